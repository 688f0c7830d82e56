package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// rawMessage is a message sent by sendRaw: what the Go producer cannot express (a SysFlag with the
// Java 5.x client's compression codec bits) travels as the broker stores it.
type rawMessage struct {
	body       []byte
	sysFlag    int32
	properties map[string]string
}

// requestSendMessage is the remoting request code of SEND_MESSAGE (RequestCode.SEND_MESSAGE).
const requestSendMessage = 10

// sendRaw sends m to queue 0 of topic on the broker at addr with one SEND_MESSAGE request, its SysFlag
// as given, the way a Java producer sends it, and requires the broker's SUCCESS. The Go producer always
// computes the SysFlag itself (0, or 1 = zlib for bodies over 4 KB) and offers no way to set the codec
// bits 0x100 (LZ4) / 0x200 (ZSTD), so this is how a Go test makes the broker store a Java 5.x
// producer's compressed message.
func sendRaw(t *testing.T, addr, topic string, m rawMessage) {
	t.Helper()
	props := map[string]string{primitive.PropertyUniqueClientMessageIdKeyIndex: primitive.CreateUniqID(),
		primitive.PropertyWaitStoreMsgOk: "true"}
	for k, v := range m.properties {
		props[k] = v
	}
	var sb strings.Builder
	for k, v := range props {
		sb.WriteString(k + "\x01" + v + "\x02") // the client's name/value and property separators
	}
	ext := map[string]string{
		"producerGroup": "rmqguard-e2e-raw", "topic": topic, "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": strconv.Itoa(int(m.sysFlag)),
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": sb.String(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := rmq.Call(ctx, addr, requestSendMessage, ext, m.body, rmq.Credentials{})
	require.NoError(t, err)
	require.Equal(t, 0, a.Code, "broker answered %d: %s", a.Code, a.Remark)
}
