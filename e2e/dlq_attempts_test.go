package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// dlqtool.Letter.Attempts is documented as "the ReconsumeTimes of the original when it was dead-lettered". For a
// letter the broker itself moved to %DLQ%<group> (no DLQ publisher: retries exhausted, or delay level -1) the
// broker stores the copy with ReconsumeTimes + 1 (SendMessageProcessor, as for a retry), so `dlq list` must
// not show that raw value: the same failure history would read 4 for a broker letter and 3 for one rmqguard
// published.
func TestE2E_DLQList_AttemptsOfBrokerLettersIsTheLastReconsumeTimes(t *testing.T) {
	w := newWorld(t, 1)
	var mu sync.Mutex
	last := map[string]int{} // EVENT_ID → last ReconsumeTimes the handler saw
	handler := testenv.Must(middleware.Chain(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		id := d.Msg.GetProperty("EVENT_ID")
		mu.Lock()
		last[id] = int(d.Msg.ReconsumeTimes)
		mu.Unlock()
		if id == "e-permanent" {
			return consumer.Outcome{}, retry.Permanent(errors.New("unknown SKU"))
		}
		return consumer.Outcome{}, errors.New("db down")
	}), middleware.Classify()))
	c := w.start(consumer.Config{MaxAttempts: 2, DrainTimeout: 5 * time.Second}, handler, consumer.WithDeadLetterSink(nil)) // the broker's letters
	defer func() { _ = c.Shutdown(context.Background()) }()
	for _, id := range []string{"e-exhausted", "e-permanent"} {
		msg := primitive.NewMessage(w.topic, []byte(`{"orderNo":"o-1"}`))
		msg.WithProperty("EVENT_ID", id)
		w.send(msg)
	}

	var res dlqtool.ScanResult
	require.Eventually(t, func() bool {
		var err error
		res, err = dlqtool.Scan(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, dlqtool.ScanOptions{})
		return err == nil && len(res.Letters) >= 2
	}, 90*time.Second, time.Second, "both messages reach %%DLQ%%%s", w.group)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, last["e-exhausted"], "MaxAttempts 2: deliveries with ReconsumeTimes 0, 1, 2")
	for _, l := range res.Letters {
		assert.Equal(t, last[l.EventID], l.Attempts, "letter %s: Attempts", l.EventID)
	}
}
