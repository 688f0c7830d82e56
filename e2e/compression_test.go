package e2e

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

func TestE2E_JavaCompressedBodiesReachTheHandlerDecodedOthersAreDeadLetteredWithTheirFlag(t *testing.T) {
	w := newWorld(t, 1)
	broker := testenv.Broker(t)
	plainBody := func(id string) []byte {
		return []byte(`{"eventId":"` + id + `","orderNo":"O-` + id + `","note":"zwölf Bücher, 十二本"}`)
	}
	lz4Flag := body.SysFlagCompressed | body.SysFlagLZ4
	zstdFlag := body.SysFlagCompressed | body.SysFlagZSTD
	zlibFlag := body.SysFlagCompressed | body.SysFlagZlib
	unknownFlag := body.SysFlagCompressed | 4<<8
	sent := map[string]rawMessage{
		"lz4":     {body: testenv.JavaCompressed(t, lz4Flag, plainBody(w.run+"-lz4")), sysFlag: lz4Flag},
		"zstd":    {body: testenv.JavaCompressed(t, zstdFlag, plainBody(w.run+"-zstd")), sysFlag: zstdFlag},
		"zlib":    {body: testenv.JavaCompressed(t, zlibFlag, plainBody(w.run+"-zlib")), sysFlag: zlibFlag},
		"plain":   {body: plainBody(w.run + "-plain")},
		"unknown": {body: []byte("a codec from the future"), sysFlag: unknownFlag},
		"corrupt": {body: []byte("not an LZ4 frame"), sysFlag: lz4Flag},
	}
	for name, m := range sent {
		m.properties = map[string]string{"EVENT_ID": w.run + "-" + name, "CASE": name}
		sendRaw(t, broker, w.topic, m)
	}

	var mu sync.Mutex
	seen := map[string][]byte{}
	handler := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[d.Msg.GetProperty("CASE")] = d.Msg.Body
		return consumer.Processed(), nil
	}
	publisher, err := dlq.NewPublisher(w.prod)
	require.NoError(t, err)
	w.start(consumer.Config{MaxAttempts: 3}, consumer.HandlerFunc(handler), consumer.WithDeadLetterSink(publisher))

	var res dlqtool.ScanResult
	require.Eventually(t, func() bool {
		mu.Lock()
		handled := len(seen)
		mu.Unlock()
		res, err = dlqtool.Scan(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, dlqtool.ScanOptions{})
		return handled >= 4 && err == nil && len(res.Letters) >= 2
	}, 60*time.Second, 500*time.Millisecond, "4 messages handled, 2 dead-lettered")

	mu.Lock()
	for _, name := range []string{"lz4", "zstd", "zlib", "plain"} {
		assert.Equal(t, string(plainBody(w.run+"-"+name)), string(seen[name]), "%s: the handler sees the plain body", name)
	}
	assert.NotContains(t, seen, "unknown", "the chain never sees a body it cannot read")
	assert.NotContains(t, seen, "corrupt")
	mu.Unlock()

	require.Len(t, res.Letters, 2)
	for _, l := range res.Letters {
		name := l.Property("CASE")
		assert.Equal(t, sent[name].body, l.Body, "%s: the letter keeps the stored body", name)
		assert.Equal(t, strconv.Itoa(int(sent[name].sysFlag)), l.Property(body.PropSysFlag),
			"%s: the letter names the body's SysFlag", name)
		assert.Equal(t, 0, l.Attempts, "%s: dead-lettered on its first delivery, never retried", name)
		switch name {
		case "unknown":
			assert.Contains(t, l.Reason, "unsupported compression (type 4, SysFlag 1025)")
		case "corrupt":
			assert.Contains(t, l.Reason, "corrupt compressed body (lz4, SysFlag 257)")
		default:
			t.Errorf("unexpected letter %s: %s", name, l.Reason)
		}
	}
}

func TestE2E_TheBrokersOwnLetterOfAJavaCompressedMessageIsReadableAndReplaysDecoded(t *testing.T) {
	w := newWorld(t, 1)
	zstdFlag := body.SysFlagCompressed | body.SysFlagZSTD
	plain := []byte(`{"eventId":"` + w.run + `-zstd","orderNo":"O-1"}`)
	stored := testenv.JavaCompressed(t, zstdFlag, plain)
	sendRaw(t, testenv.Broker(t), w.topic, rawMessage{body: stored, sysFlag: zstdFlag,
		properties: map[string]string{"EVENT_ID": w.run + "-zstd"}})

	var mu sync.Mutex
	var replayed []byte
	handler := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetProperty(letter.PropReplayID) == "" {
			return consumer.DeadLetter("rejected before the replay"), nil
		}
		mu.Lock()
		defer mu.Unlock()
		replayed = d.Msg.Body
		return consumer.Processed(), nil
	}
	// WithDeadLetterSink(nil): a message alone is dead-lettered by the broker (DelayLevelDLQ), which copies
	// the stored body and SysFlag.
	w.start(consumer.Config{MaxAttempts: 3}, consumer.HandlerFunc(handler), consumer.WithDeadLetterSink(nil))

	var res dlqtool.ScanResult
	require.Eventually(t, func() bool {
		var err error
		res, err = dlqtool.Scan(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, dlqtool.ScanOptions{})
		return err == nil && len(res.Letters) >= 1
	}, 60*time.Second, 500*time.Millisecond, "the message reaches %%DLQ%%%s", w.group)
	require.Len(t, res.Letters, 1)
	l := res.Letters[0]
	assert.Equal(t, stored, l.Body, "the broker's letter holds the stored ZSTD frame")
	assert.Equal(t, strconv.Itoa(int(zstdFlag)), l.Property(body.PropSysFlag), "the Letter names its SysFlag")

	// What dlqtool.Replay sends: the Go producer cannot set the SysFlag, the property carries it.
	w.send(dlqtool.ReplayMessage(l, "", w.group, w.topic, dlqtool.Provenance{ReplayID: "r-" + w.run, Operator: "e2e", At: time.Now()}))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return replayed != nil
	}, 60*time.Second, 500*time.Millisecond, "the replay is handled")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, string(plain), string(replayed), "the replayed letter reaches the handler decoded")
}
