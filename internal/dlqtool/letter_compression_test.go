package dlqtool_test

import (
	"hash/crc32"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// brokerLetter is a dead letter the broker wrote itself: stored body, SysFlag and body CRC as stored.
func brokerLetter(body []byte, sysFlag int32) *primitive.MessageExt {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "%DLQ%g", Body: body, Queue: &primitive.MessageQueue{}}, SysFlag: sysFlag,
		BodyCRC: int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF), OffsetMsgId: "S1", ReconsumeTimes: 1}
	m.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	return m
}

func TestLetter_OfAStillCompressedBodyNamesItsSysFlag(t *testing.T) {
	flag := body.SysFlagCompressed | body.SysFlagLZ4
	l := dlqtool.NewLetter("g", brokerLetter([]byte("lz4 frame bytes"), flag))
	assert.Equal(t, strconv.Itoa(int(flag)), l.Property(body.PropSysFlag))
	assert.Equal(t, []byte("lz4 frame bytes"), l.Body)

	replay := dlqtool.ReplayMessage(l, "", "g", "ORDER", dlqtool.Provenance{ReplayID: "r", At: time.Now()})
	assert.Equal(t, strconv.Itoa(int(flag)), replay.GetProperty(body.PropSysFlag),
		"the replay carries the codec the Go producer cannot put in the SysFlag")
}

func TestLetter_TheClientInflatedCarriesNoBodySysFlag(t *testing.T) {
	m := brokerLetter([]byte("zlib stream bytes"), body.SysFlagCompressed|body.SysFlagZlib)
	m.Body = []byte(`{"eventId":"e-1"}`) // the client inflated it: the CRC no longer matches
	assert.Empty(t, dlqtool.NewLetter("g", m).Property(body.PropSysFlag))
	assert.Empty(t, dlqtool.NewLetter("g", brokerLetter([]byte(`{}`), 0)).Property(body.PropSysFlag))
}
