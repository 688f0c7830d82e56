package e2e

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/outbox"
)

// F31: the broker (a name server and broker of the test's own) is stopped for 30 s while 512 rows over
// 8 keys are committed: none is lost or parked, the relay backs off (a handful of attempts, not a loop),
// the pending-rows gauge rises to the backlog; after the restart every row goes out, the downstream group
// applies each once and each key's rows in commit order, and the gauge falls to 0.
func TestOutboxRelay_BrokerStopped30sRowsWaitUnparkedThenGoOutOnceInKeyOrder(t *testing.T) {
	stack := testenv.StartBrokerStack(t, "outbox-f31", 19916, 20981)
	f := newFixture(t)
	f.ns = []string{stack.NameServer}
	require.NoError(t, rmq.EnsureTopic(f.ctx, f.ns, stack.Broker, f.topic, 4))

	m, err := metrics.NewOutbox(prometheus.NewRegistry())
	require.NoError(t, err)
	ob := f.outbox(outbox.Config{MaxBackoff: 5 * time.Second, Observer: m})
	up := f.upstream(sendEach(ob, f.topic, keyOfEvent))
	ds := f.downstream()
	f.relay(ob)
	warm := deliverEvents(t, up, f.run+"-a", 2, 1) // the relay's producer and the downstream have a route; "-a-" sorts before the later events of its key
	ds.waitApplied(t, len(warm), 90*time.Second)

	stack.StopBroker(t)
	stopped := time.Now()
	ids := deliverEvents(t, up, f.run, 8, 64)
	var peak float64
	for time.Since(stopped) < 30*time.Second {
		peak = max(peak, testutil.ToFloat64(m.Pending))
		require.Zero(t, f.count(outboxsql.StatusParked), "a row parked while the broker is down")
		time.Sleep(500 * time.Millisecond)
	}
	require.Equal(t, float64(len(ids)), peak, "pending-rows gauge while the broker is down")
	require.Equal(t, len(ids), f.count(outboxsql.StatusPending), "every row waits")
	var attempts int
	require.NoError(t, f.db.Get(&attempts, "SELECT COALESCE(SUM(attempts), 0) FROM "+f.prefix+outboxsql.Table+" WHERE status = 'pending'"))
	t.Logf("broker down %s: %d send attempts on %d pending rows", time.Since(stopped).Round(time.Second), attempts, len(ids))
	require.LessOrEqual(t, attempts, 30, "backoff: 100 ms doubling to 5 s over 30 s, not a loop")

	stack.StartBroker(t)
	requireOnceInKeyOrder(t, f, ds, append(warm, ids...))
	require.Eventually(t, func() bool { return f.count(outboxsql.StatusSent) == len(warm)+len(ids) }, 30*time.Second, 200*time.Millisecond)
	require.Zero(t, f.count(outboxsql.StatusParked))
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.Pending) == 0 }, 10*time.Second, 100*time.Millisecond, "the gauge falls")
}
