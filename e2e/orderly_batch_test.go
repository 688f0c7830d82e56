package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// F3 with BatchSize 4: v1, v2, v3 of acc-1 are queued before the consumer starts, so the orderly client
// hands them over in one batch; v1 fails twice. v2 and v3 are not handled while v1 fails (they would take
// effect before it): they are applied strictly after v1, each once.
func TestE2E_F3_OrderlyBatchKeepsOrder(t *testing.T) {
	w := newWorld(t, orderlyQueues)
	p := w.startHashProducer()
	w.sendAccountEvents(p, "acc-1", 3)
	l := newLedger()
	fail := func(account string, version, attempt int) bool {
		return account == "acc-1" && version == 1 && attempt < 2
	}
	cfg := orderlyConfig(3)
	cfg.BatchSize = 4
	c := w.start(cfg, orderlyHandler(l, fail, nil), consumer.WithObserver(l))

	l.waitApplied(t, "acc-1 v3")
	require.NoError(t, c.Shutdown(context.Background()))

	assert.Equal(t, []string{
		"acc-1 v1 #0 failed", "acc-1 v1 #1 failed", "acc-1 v1 #2 applied", "acc-1 v2 #0 applied", "acc-1 v3 #0 applied",
	}, l.of("acc-1"), "v2 and v3 wait behind v1 in their batch, and spend no attempt")
	w.requireNoDeadLetters()
}
