package rmq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The signature is HMAC-SHA1(secret, values of the ext fields with AccessKey, in key order, then the body),
// base64: the known answer below was computed apart from this code (Python's hmac).
func TestSigned_ACL_KnownAnswer(t *testing.T) {
	ext := map[string]string{"topic": "T", "b": "2"}
	got := signed(ext, []byte("BODY"), Credentials{AccessKey: "ak", SecretKey: "sk"})
	assert.Equal(t, "jDqU4wR2cFNwpJ9TTInvsyfwRss=", got["Signature"])
	assert.Equal(t, "ak", got["AccessKey"])
	assert.Equal(t, map[string]string{"topic": "T", "b": "2"}, ext, "the caller's map is not changed")
	assert.Equal(t, ext, signed(ext, nil, Credentials{}), "no credentials: unsigned")
}

// Call frames a request and reads the answer's code, remark and body; a fake name server answers with a
// cluster table whose master addresses MasterBrokers extracts.
func TestCall_ACL_MasterBrokersFromTheClusterTable(t *testing.T) {
	table := `{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:20921",1:"127.0.0.1:20931"},"brokerName":"broker-a"},` +
		`"broker-b":{"brokerAddrs":{0:"10.0.0.2:10911"},"brokerName":"broker-b"}}}`
	addr := fakeServer(t, Answer{Code: 0, Body: []byte(table)})
	got, err := MasterBrokers(context.Background(), []string{addr})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"127.0.0.1:20921", "10.0.0.2:10911"}, got, "masters only (brokerId 0)")
	masters, err := Masters(context.Background(), []string{addr})
	require.NoError(t, err)
	assert.Equal(t, []Master{{Name: "broker-a", Addr: "127.0.0.1:20921"}, {Name: "broker-b", Addr: "10.0.0.2:10911"}}, masters,
		"each master with its broker name, sorted by name")
}

// A NO_PERMISSION answer to the heartbeat is an *ACLError naming the access key; the secret is not in it.
func TestCheckAccess_ACL_RefusalIsAnACLError(t *testing.T) {
	addr := fakeServer(t, Answer{Code: CodeNoPermission, Remark: "check signature failed."})
	err := CheckAccess(context.Background(), addr, Credentials{AccessKey: "ak", SecretKey: "secret-xyz"})
	var acl *ACLError
	require.True(t, errors.As(err, &acl), "%v", err)
	assert.Equal(t, "ak", acl.AccessKey)
	assert.Equal(t, addr, acl.Broker)
	assert.Contains(t, err.Error(), "ACL: access denied / signature mismatch for access key ak on broker "+addr)
	assert.NotContains(t, err.Error(), "secret-xyz")
	assert.Contains(t, (&ACLError{Broker: addr, Code: 16}).Error(), "(none: credentials required)")

	ok := fakeServer(t, Answer{Code: 0})
	require.NoError(t, CheckAccess(context.Background(), ok, Credentials{AccessKey: "ak", SecretKey: "s"}))
}

// fakeServer accepts connections on 127.0.0.1 and answers every request with a.
func fakeServer(t *testing.T, a Answer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			func() {
				defer conn.Close()
				if _, err := readAnswer(conn); err != nil { // a request has the same frame as an answer
					return
				}
				header, _ := json.Marshal(map[string]any{"code": a.Code, "remark": a.Remark, "flag": 1})
				raw := make([]byte, 8+len(header)+len(a.Body))
				binary.BigEndian.PutUint32(raw[0:4], uint32(4+len(header)+len(a.Body)))
				binary.BigEndian.PutUint32(raw[4:8], uint32(len(header)))
				copy(raw[8:], header)
				copy(raw[8+len(header):], a.Body)
				_, _ = conn.Write(raw)
			}()
		}
	}()
	return l.Addr().String()
}
