package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// rawMessage is a message sent by sendRaw: what the Go producer cannot express (a SysFlag with the
// Java 5.x client's compression codec bits) travels as the broker stores it.
type rawMessage struct {
	body       []byte
	sysFlag    int32
	properties map[string]string
}

// sendRaw sends m to queue 0 of topic on the broker at addr with one SEND_MESSAGE request (code 10) of
// RocketMQ's remoting protocol (JSON header), as a Java producer does, and requires the broker's SUCCESS.
// The Go producer always computes the SysFlag itself (0, or 1 = zlib for bodies over 4 KB) and offers no
// way to set the codec bits 0x100 (LZ4) / 0x200 (ZSTD), so this is how a Go test makes the broker store
// a Java 5.x producer's compressed message.
func sendRaw(t *testing.T, addr, topic string, m rawMessage) {
	t.Helper()
	props := map[string]string{primitive.PropertyUniqueClientMessageIdKeyIndex: primitive.CreateUniqID(),
		primitive.PropertyWaitStoreMsgOk: "true"}
	for k, v := range m.properties {
		props[k] = v
	}
	var sb strings.Builder
	for k, v := range props {
		sb.WriteString(k + "\x01" + v + "\x02")
	}
	header, err := json.Marshal(map[string]any{
		"code": 10, "language": "GO", "version": 317, "opaque": 1, "flag": 0, "serializeTypeCurrentRPC": "JSON",
		"extFields": map[string]string{
			"producerGroup": "rmqguard-e2e-raw", "topic": topic, "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": strconv.Itoa(int(m.sysFlag)),
			"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
			"properties": sb.String(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
		},
	})
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	frame := make([]byte, 8, 8+len(header)+len(m.body))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(header)+len(m.body)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(header))) // serialize type 0 (JSON) in the high byte
	frame = append(append(frame, header...), m.body...)
	_, err = conn.Write(frame)
	require.NoError(t, err)
	code, remark, err := readRemotingResponse(conn)
	require.NoError(t, err)
	require.Equal(t, 0, code, "broker answered %d: %s", code, remark)
}

// readRemotingResponse reads one remoting frame and returns its header's code and remark.
func readRemotingResponse(r io.Reader) (code int, remark string, err error) {
	var lengths [8]byte
	if _, err := io.ReadFull(r, lengths[:]); err != nil {
		return 0, "", fmt.Errorf("read response length: %w", err)
	}
	total := binary.BigEndian.Uint32(lengths[0:4])
	headerLen := binary.BigEndian.Uint32(lengths[4:8]) & 0xFFFFFF
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return 0, "", fmt.Errorf("read response: %w", err)
	}
	var h struct {
		Code   int    `json:"code"`
		Remark string `json:"remark"`
	}
	if err := json.Unmarshal(rest[:headerLen], &h); err != nil {
		return 0, "", fmt.Errorf("decode response header: %w", err)
	}
	return h.Code, h.Remark, nil
}
