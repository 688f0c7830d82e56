package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// gatedSender lets the first send through and holds the others until open is closed.
type gatedSender struct {
	next  rmq.Sender
	open  chan struct{}
	mu    sync.Mutex
	sends int
}

func (s *gatedSender) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	s.mu.Lock()
	s.sends++
	first := s.sends == 1
	s.mu.Unlock()
	if !first {
		select {
		case <-s.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.next.SendSync(ctx, msgs...)
}

// K8: a confirmed replay runs in the background; its page reloads itself and shows the letters done so
// far with sent, skipped and failed counts, then the result.
func TestConsole_ReplayProgressPageShowsCountsThenTheResult(t *testing.T) {
	gate := &gatedSender{open: make(chan struct{})}
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(gate.open) }) })
	w := newWorld(t, func(c *console.Config) {
		gate.next = c.Sender
		c.Sender = gate
	})
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "bug"})
	c := w.publish(letterSpec{eventID: testenvID(t, "c"), eventType: "OrderCreated", reason: "bug"})
	cl := w.login()
	csrf := w.get(cl, "/").csrf(t)

	p := w.post(cl, "/groups/"+w.group+"/replay", url.Values{"csrf": {csrf}, "letter": {a, b, c}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	loc := p.header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/groups/"+w.group+"/replays/"), loc)
	require.Eventually(t, func() bool {
		p = w.get(cl, loc)
		return strings.Contains(p.body, "1 of 3 letters done")
	}, time.Minute, 50*time.Millisecond, "the first letter is sent, the second held")
	assert.Equal(t, http.StatusOK, p.status)
	assert.Contains(t, p.body, "1 sent, 0 skipped, 0 failed so far")
	assert.Contains(t, p.body, `<meta http-equiv="refresh" content="1">`, "the page reloads itself")
	assert.NotContains(t, p.body, `id="result-summary"`)

	release.Do(func() { close(gate.open) })
	require.Eventually(t, func() bool {
		p = w.get(cl, loc)
		return strings.Contains(p.body, `id="result-summary"`)
	}, time.Minute, 50*time.Millisecond, "the replay ends")
	assert.NotContains(t, p.body, `http-equiv="refresh"`, "the result does not reload")
	assert.Contains(t, p.body, ": 3 sent,")
	for _, id := range []string{a, b, c} {
		assert.Equal(t, "sent", field(t, p.row(t, "outcome-"+id), "outcome"))
	}
	assert.Equal(t, []string{a, b, c}, w.sent.replayed())

	assert.Equal(t, http.StatusNotFound, w.get(cl, "/groups/"+w.group+"/replays/no-such-replay").status)
}
