package rmq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestArgumentErrors(t *testing.T) {
	ctx := context.Background()
	cases := map[string]error{
		"no name servers": EnsureTopic(ctx, nil, "127.0.0.1:10911", "T", 4),
		"blank topic":     EnsureTopic(ctx, []string{"127.0.0.1:9876"}, "127.0.0.1:10911", " ", 4),
		"no broker":       EnsureTopic(ctx, []string{"127.0.0.1:9876"}, "", "T", 4),
		"zero queues":     EnsureTopic(ctx, []string{"127.0.0.1:9876"}, "127.0.0.1:10911", "T", 0),
		"probe no ns":     Probe(ctx, []string{""}, "T"),
		"probe no topic":  Probe(ctx, []string{"127.0.0.1:9876"}, ""),
		"wait no broker":  WaitBrokerRegistered(ctx, []string{"127.0.0.1:9876"}, ""),
	}
	for name, err := range cases {
		if err == nil {
			t.Errorf("%s: want an error, got nil", name)
		}
	}
}

// fakeNameServer answers every request with the given code and body, using the remoting framing.
func fakeNameServer(t *testing.T, code int, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				var l [4]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				req := make([]byte, binary.BigEndian.Uint32(l[:]))
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				hl := binary.BigEndian.Uint32(req[:4]) & 0xFFFFFF
				var h map[string]any
				if err := json.Unmarshal(req[4:4+hl], &h); err != nil {
					return
				}
				hdr, _ := json.Marshal(map[string]any{"code": code, "opaque": h["opaque"], "flag": 1, "remark": "r"})
				out := make([]byte, 8+len(hdr)+len(body))
				binary.BigEndian.PutUint32(out[0:4], uint32(4+len(hdr)+len(body)))
				binary.BigEndian.PutUint32(out[4:8], uint32(len(hdr)))
				copy(out[8:], hdr)
				copy(out[8+len(hdr):], body)
				c.Write(out)
			}(conn)
		}
	}()
	return ln.Addr().String()
}

func TestWaitBrokerRegistered(t *testing.T) {
	body := `{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}}}`
	ns := fakeNameServer(t, 0, body)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := WaitBrokerRegistered(ctx, []string{ns}, "127.0.0.1:10911"); err != nil {
		t.Fatalf("registered broker: %v", err)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel2()
	err := WaitBrokerRegistered(short, []string{ns}, "127.0.0.1:10999")
	if err == nil || !strings.Contains(err.Error(), "does not list broker") {
		t.Fatalf("unknown broker: want a timeout naming the broker, got %v", err)
	}
}

func TestInvokeNameServerErrorCode(t *testing.T) {
	ns := fakeNameServer(t, 1, "")
	if _, err := invokeNameServer(context.Background(), ns, ReqGetBrokerClusterInfo, nil); err == nil {
		t.Fatal("want an error for a non-zero answer code")
	}
}
