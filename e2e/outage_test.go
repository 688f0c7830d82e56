package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/topics"
)

// countingProbe counts the store health gate's probes.
type countingProbe struct {
	store *dedup.Store
	calls atomic.Int32
}

func (p *countingProbe) Probe(ctx context.Context) error {
	p.calls.Add(1)
	return p.store.Probe(ctx)
}

// outageRig is the example chain on a MariaDB of the test's own, with a counted handler and probe, metrics
// on a registry of its own and a log that records the consumer's warnings and info lines.
type outageRig struct {
	w     *world
	in    *testenv.Instance
	db    *sqlx.DB
	m     *metrics.Metrics
	logs  *observer.ObservedLogs
	probe *countingProbe
	runs  atomic.Int32 // handler invocations (chain runs)
	c     *consumer.Consumer
}

func newOutageRig(t *testing.T, name string, port int) *outageRig {
	w := newWorld(t, 4)
	in := testenv.MariaDBInstance(t, name, port)
	db := in.Open()
	db.SetMaxOpenConns(24)
	require.NoError(t, shop.Migrate(w.ctx, db.DB))
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	core, logs := observer.New(zapcore.InfoLevel)
	r := &outageRig{w: w, in: in, db: db, m: m, logs: logs, probe: &countingProbe{store: store}}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	count := middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			r.runs.Add(1)
			return next.Handle(ctx, d)
		})
	})
	handler := testenv.Must(middleware.Chain(dedup.Handle(shop.HandleOrderCreated), testenv.Must(middleware.Metrics(m)), count,
		middleware.Classify(), eventID, middleware.Timeout(10*time.Second), testenv.Must(middleware.Dedup(store))))
	r.c = w.start(consumer.Config{MaxAttempts: 3, ConsumeGoroutines: 8, HandlerTimeout: 10 * time.Second, DrainTimeout: 10 * time.Second},
		handler, consumer.WithLogger(zap.New(core)), consumer.WithHealthProbe(r.probe), consumer.WithObserver(m))
	return r
}

func (r *outageRig) paused() float64 {
	return testutil.ToFloat64(r.m.ConsumptionPaused.WithLabelValues(r.w.group))
}

func (r *outageRig) transitions() (paused, resumed int) {
	return r.logs.FilterMessageSnippet("consumption paused").FilterLevelExact(zapcore.WarnLevel).Len(),
		r.logs.FilterMessageSnippet("consumption resumed").Len()
}

// send sends events n..n+count-1 of the run.
func (r *outageRig) send(t *testing.T, part string, n int) {
	plan, err := shop.Workload{RunID: r.w.run + "-" + part, Topic: r.w.topic, Messages: n}.Plan()
	require.NoError(t, err)
	r.w.send(plan.Messages...)
}

// requireOnceEach waits until events effects exist for the run and checks there is one of each and no
// dead letter at all, read from %DLQ%<group>.
func (r *outageRig) requireOnceEach(t *testing.T, events int) {
	ctx := r.w.ctx
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(ctx, r.db, r.w.run)
		return err == nil && orders >= events
	}, 2*time.Minute, 500*time.Millisecond, "all %d events take effect after the outage", events)
	time.Sleep(2 * time.Second) // a doubled effect, if any, would be written within this
	orders, reservations, err := shop.Effects(ctx, r.db, r.w.run)
	require.NoError(t, err)
	assert.Equal(t, events, orders, "one effect per event")
	assert.Equal(t, events, reservations)
	var rows int
	require.NoError(t, r.db.GetContext(ctx, &rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, r.w.group))
	assert.Equal(t, events, rows)
	letters, err := dlqtool.Read(ctx, topics.Cluster{NameServers: r.w.ns}, r.w.group, 10)
	require.NoError(t, err)
	assert.Empty(t, letters, "nothing was dead-lettered: the outage spent no attempt")
}

// TestE2E_F19_StoreDownFor60sPausesConsumptionAndLosesNothing: MaxAttempts 3 and 1 s delay levels, which
// used to send the whole backlog to %DLQ% as "retries exhausted". 100 events are handled, the consumer's
// MariaDB is stopped for 60 s while 400 more arrive, then started: pulling is paused while it is down
// (gauge, one log line per transition), without a hot loop; afterwards 500 effects, once each, and
// %DLQ%<group> is empty.
func TestE2E_F19_StoreDownFor60sPausesConsumptionAndLosesNothing(t *testing.T) {
	r := newOutageRig(t, "gate-f19", 13319)
	r.send(t, "a", 100)
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(r.w.ctx, r.db, r.w.run)
		return err == nil && orders == 100
	}, time.Minute, 200*time.Millisecond, "the first 100 events are handled while the store is up")

	r.in.Stop()
	down := time.Now()
	runsBefore := r.runs.Load()
	r.send(t, "b", 400)
	require.Eventually(t, func() bool { return r.paused() == 1 }, 30*time.Second, 100*time.Millisecond, "the pause shows on the gauge")
	time.Sleep(time.Until(down.Add(60 * time.Second)))
	assert.Equal(t, 1.0, r.paused(), "still paused after 60 s")
	paused, resumed := r.transitions()
	assert.Equal(t, 1, paused, "one warning for the whole outage, not one per message")
	assert.Zero(t, resumed)
	runsDuringOutage, probes := r.runs.Load()-runsBefore, r.probe.calls.Load()
	t.Logf("outage: %d handler runs, %d probes", runsDuringOutage, probes)
	assert.LessOrEqual(t, runsDuringOutage, int32(40), "no hot loop: callbacks wait at the gate instead of running their handlers")
	assert.LessOrEqual(t, probes, int32(30), "the prober backs off (100 ms doubling to 5 s)")

	r.in.Restart()
	require.Eventually(t, func() bool { return r.paused() == 0 }, 30*time.Second, 100*time.Millisecond, "consumption resumes")
	r.requireOnceEach(t, 500)
	paused, resumed = r.transitions()
	assert.Equal(t, paused, resumed, "every pause ended with one line")
	assert.Equal(t, 1, resumed)
	pausedFor := testutil.ToFloat64(r.m.ConsumptionPausedSeconds.WithLabelValues(r.w.group))
	t.Logf("consumption paused %.1f s", pausedFor)
	assert.GreaterOrEqual(t, pausedFor, 55.0)
	for _, dead := range []string{"dead_letter", "dead_lettered"} {
		assert.Zero(t, testutil.ToFloat64(r.m.Messages.WithLabelValues(r.w.group, r.w.topic, dead)), dead)
	}
}

// serverTime runs statements on the instance and returns the NOW(6) they select (second output line).
func serverTime(t *testing.T, in *testenv.Instance, statements string) string {
	lines := strings.Split(strings.TrimSpace(in.SQL(statements)), "\n")
	require.GreaterOrEqual(t, len(lines), 2, "NOW(6) selected")
	return strings.TrimSpace(lines[len(lines)-1])
}

// TestE2E_F20_ReadOnlyFor20sDeadLettersNothingAndDropsTheConnectionsThatSawIt: the consumer's MariaDB is
// made read-only for 20 s mid-run (the failover stand-in). Nothing is dead-lettered; every connection that
// sent a write while the server was read-only (and so got 1290) runs no statement after the outage: read
// from the server's general log (thread IDs); all effects once after it is writable again.
func TestE2E_F20_ReadOnlyFor20sDeadLettersNothingAndDropsTheConnectionsThatSawIt(t *testing.T) {
	r := newOutageRig(t, "gate-f20", 13320)
	r.in.SQL("SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = 1")
	r.send(t, "a", 100)

	readOnlyAt := serverTime(t, r.in, "SET GLOBAL read_only = 1; SELECT NOW(6)")
	r.send(t, "b", 200)
	require.Eventually(t, func() bool { return r.paused() == 1 }, 30*time.Second, 100*time.Millisecond, "read-only pauses consumption")
	time.Sleep(20 * time.Second)
	writableAt := serverTime(t, r.in, "SELECT NOW(6); SET GLOBAL read_only = 0")
	r.requireOnceEach(t, 300)

	// Writes logged from a second after read_only=1 to a second before read_only=0 all got 1290.
	sawReadOnly := fmt.Sprintf(`SELECT DISTINCT thread_id FROM mysql.general_log
		WHERE event_time > '%s' + INTERVAL 1 SECOND AND event_time < '%s' - INTERVAL 1 SECOND
		  AND (argument LIKE '%%INSERT INTO processed_event%%' OR argument LIKE '%%UPDATE processed_event%%')`, readOnlyAt, writableAt)
	out := strings.Fields(r.in.SQL("SELECT COUNT(*) FROM (" + sawReadOnly + ") s"))
	require.Len(t, out, 2)
	t.Logf("connections that met the read-only server: %s", out[1])
	assert.NotEqual(t, "0", out[1], "writes met the read-only server")
	out = strings.Fields(r.in.SQL(fmt.Sprintf(`SELECT COUNT(*) FROM mysql.general_log
		WHERE event_time > '%s' + INTERVAL 1 SECOND AND command_type <> 'Quit' AND thread_id IN (%s)`, writableAt, sawReadOnly)))
	require.Len(t, out, 2)
	assert.Equal(t, "0", out[1], "no connection that saw the read-only server ran a statement after the outage")
	paused, resumed := r.transitions()
	assert.Equal(t, paused, resumed)
	for _, dead := range []string{"dead_letter", "dead_lettered"} {
		assert.Zero(t, testutil.ToFloat64(r.m.Messages.WithLabelValues(r.w.group, r.w.topic, dead)), dead)
	}
}
