package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/scrape"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// F41: the duplicate ratio and its causes, read from the consumer's /metrics, against the truth on a mixed
// workload through the real broker and MariaDB, in per-message and batch mode, across a consumer restart.
//
// The workload, in three phases (the consumer is restarted, with new counters, before the third):
//  1. 40 new events (6 of them failing their first delivery: retries), 6 poison events (dead-lettered);
//  2. 10 producer re-sends of processed events (a new message ID), 6 copies of processed messages (the same
//     message ID: what a redelivery is), 3 poison events fixed by a producer re-send, 3 dead letters
//     replayed with dlqtool.Replay (processed by the replay);
//  3. (consumer restarted) the 3 letters of the fixed events replayed (duplicates: replays), copies of the
//     3 replay messages that took effect (redeliveries, though they carry replay provenance), 4 re-sends,
//     4 copies, 8 new events (4 failing their first delivery).
//
// The truth of a duplicate's cause comes from the business side: the test's handler records, in its own
// transaction, which message applied each event; a duplicate delivery of the message that applied its event
// is a redelivery, of a replay message a replay, of any other message a re-send.

// ackOutcomes are the outcomes of rmqguard_messages_total that end a message's delivery — the denominator of
// the duplicate ratio in deploy/prometheus/rules.yml (rmqguard:messages_acknowledged:*).
var ackOutcomes = []string{"processed", "duplicate", "stale", "dead_lettered", "dead_letter"}

// allCauses are the duplicate causes rmqguard_duplicates_total may carry.
var allCauses = []string{"redelivery", "resend", "replay", "unknown"}

const appliedByTable = "test_applied_by"

// decided is one final decision, as the consumer reported it.
type decided struct {
	msgID, eventID string
	replay         bool
	kind           consumer.Kind
	cause          string
	batchRetried   bool
}

// decisionRecorder is the consumer's observer: the metrics, and a record of every decision beside them.
type decisionRecorder struct {
	*metrics.Metrics
	mu  sync.Mutex
	got []decided
}

func (r *decisionRecorder) Decided(d *consumer.Delivery, dec consumer.Decision) {
	r.mu.Lock()
	r.got = append(r.got, decided{msgID: d.Msg.MsgId, eventID: d.EventID, replay: d.Msg.GetProperty(letter.PropReplayID) != "",
		kind: dec.Outcome.Kind, cause: dec.Outcome.Cause, batchRetried: dec.BatchRetried})
	r.mu.Unlock()
	r.Metrics.Decided(d, dec)
}

func (r *decisionRecorder) snapshot() []decided {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]decided(nil), r.got...)
}

// finals counts, per message ID, the final decisions: acknowledged, their batch not retried.
func (r *decisionRecorder) finals(into map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if g.kind.Acknowledges() && !g.batchRetried {
			into[g.msgID]++
		}
	}
}

// ratioRun is one consumer process of the test: its counters, served on a /metrics of their own.
type ratioRun struct {
	rec        *decisionRecorder
	metricsURL string
}

// mixedWorkload runs the F41 workload with the consumer's BatchSize and returns what it measured.
type mixedWorkload struct {
	w        *world
	db       *sqlx.DB
	ledger   *testenv.Ledger
	handler  consumer.Handler
	batch    int
	sent     []string // message IDs (UNIQ_KEY) of every message sent
	runs     []*ratioRun
	consumer *consumer.Consumer
}

func newMixedWorkload(t *testing.T, batch int) *mixedWorkload {
	w := newWorld(t, 4)
	db := shoptest.MySQL(t)
	_, err := db.Exec(`CREATE TABLE IF NOT EXISTS ` + appliedByTable + ` (
		run VARCHAR(64) NOT NULL, event_id VARCHAR(128) NOT NULL, msg_id VARCHAR(128) NOT NULL,
		PRIMARY KEY (run, event_id)) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = dlq.Migrate(w.ctx, db.DB)
	require.NoError(t, err)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	ledger := testenv.NewLedger(t, db, w.run)
	run := w.run
	business := func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		replayed := d.Msg.GetProperty(letter.PropReplayID) != ""
		if d.Msg.GetProperty("POISON") != "" && !replayed {
			return consumer.Outcome{}, retry.Permanent(errors.New("poison until replayed"))
		}
		if d.Msg.GetProperty("FAIL_FIRST") != "" && d.Attempt == 0 {
			return consumer.Outcome{}, errors.New("fails on its first delivery")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+appliedByTable+` (run, event_id, msg_id) VALUES (?, ?, ?)`,
			run, d.EventID, d.Msg.MsgId); err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(business)), middleware.Recover(log), middleware.Classify(),
		eventID, middleware.Timeout(10*time.Second), testenv.Must(middleware.Dedup(store))))
	return &mixedWorkload{w: w, db: db, ledger: ledger, handler: handler, batch: batch}
}

// start starts a consumer process: new counters on a /metrics of their own (a restart starts them at 0).
func (m *mixedWorkload) start(t *testing.T) {
	reg := prometheus.NewRegistry()
	met, err := metrics.New(reg)
	require.NoError(t, err)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	run := &ratioRun{rec: &decisionRecorder{Metrics: met}, metricsURL: srv.URL + "/metrics"}
	m.runs = append(m.runs, run)
	publisher, err := dlq.NewPublisher(m.w.prod)
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	m.consumer = m.w.start(consumer.Config{MaxAttempts: 5, BatchSize: m.batch, DrainTimeout: 10 * time.Second}, m.handler,
		consumer.WithLogger(log), consumer.WithDeadLetterSink(publisher), consumer.WithObserver(run.rec))
}

// stop shuts the running consumer down (its counters stay readable on its /metrics, as Prometheus keeps
// the samples it scraped).
func (m *mixedWorkload) stop(t *testing.T) {
	require.NoError(t, m.consumer.Shutdown(m.w.ctx))
}

// message is an order event with its own message ID (UNIQ_KEY) unless uniq names one (a copy).
func (m *mixedWorkload) message(event, uniq string, props ...string) *primitive.Message {
	msg := primitive.NewMessage(m.w.topic, []byte(`{"eventId":"`+event+`"}`))
	msg.WithTag("OrderCreated")
	msg.WithProperty("EVENT_ID", event)
	for i := 0; i+1 < len(props); i += 2 {
		msg.WithProperty(props[i], props[i+1])
	}
	if uniq == "" {
		uniq = primitive.CreateUniqID()
	}
	msg.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, uniq)
	return msg
}

// send sends msgs and remembers their message IDs.
func (m *mixedWorkload) send(t *testing.T, msgs ...*primitive.Message) {
	m.w.send(msgs...)
	for _, msg := range msgs {
		m.sent = append(m.sent, msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
	}
}

// settle waits until every message sent (a copy sends a message ID again) had its final decision in the
// running consumer or an earlier one, and then 3 s more for stray deliveries (retry delays are 1 s on the
// test broker).
func (m *mixedWorkload) settle(t *testing.T) {
	require.Eventually(t, func() bool {
		finals := map[string]int{}
		for _, r := range m.runs {
			r.rec.finals(finals)
		}
		for _, id := range m.sent {
			if finals[id]--; finals[id] < 0 {
				return false
			}
		}
		return true
	}, 2*time.Minute, 200*time.Millisecond, "every message sent has its final decision")
	time.Sleep(3 * time.Second)
}

// appliedBy returns, per event, the message ID that applied it (written in the handler's transaction).
func (m *mixedWorkload) appliedBy(t *testing.T) map[string]string {
	var rows []struct {
		EventID string `db:"event_id"`
		MsgID   string `db:"msg_id"`
	}
	require.NoError(t, m.db.Select(&rows, `SELECT event_id, msg_id FROM `+appliedByTable+` WHERE run = ?`, m.w.run))
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.EventID] = r.MsgID
	}
	return out
}

// counters sums a counter over every run's /metrics, per value of label (what increase() over a window
// holding both processes adds up).
func (m *mixedWorkload) counters(t *testing.T, name, label string, values []string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range m.runs {
		for _, v := range values {
			n, err := scrape.Counter(m.w.ctx, r.metricsURL, name, map[string]string{"group": m.w.group, label: v})
			require.NoError(t, err)
			out[v] += n
		}
	}
	return out
}

func (m *mixedWorkload) run(t *testing.T) {
	ev := func(i int) string { return fmt.Sprintf("%s-e%02d", m.w.run, i) }
	poison := func(i int) string { return fmt.Sprintf("%s-p%d", m.w.run, i) }

	// Phase 1: queued before the consumer starts, so that batch mode gets full batches.
	originals := map[string]string{} // event → message ID of its first message
	var phase1 []*primitive.Message
	for i := 0; i < 40; i++ {
		var msg *primitive.Message
		if i%7 == 3 {
			msg = m.message(ev(i), "", "FAIL_FIRST", "1")
		} else {
			msg = m.message(ev(i), "")
		}
		originals[ev(i)] = msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
		phase1 = append(phase1, msg)
	}
	for i := 0; i < 6; i++ {
		phase1 = append(phase1, m.message(poison(i), "", "POISON", "1"))
	}
	m.send(t, phase1...)
	m.start(t)
	m.settle(t)

	scan, err := dlqtool.Scan(m.w.ctx, topics.Cluster{NameServers: m.w.ns}, m.w.group, dlqtool.ScanOptions{})
	require.NoError(t, err)
	require.Len(t, scan.Letters, 6, "the poison events are dead-lettered")
	letters := map[string]dlqtool.Letter{}
	for _, l := range scan.Letters {
		letters[l.EventID] = l
	}

	// Phase 2: re-sends, copies, fixes of three poison events, a replay of the three others.
	var phase2 []*primitive.Message
	for i := 0; i < 10; i++ {
		phase2 = append(phase2, m.message(ev(i*4), ""))
	}
	for i := 0; i < 6; i++ {
		phase2 = append(phase2, m.message(ev(i*5+1), originals[ev(i*5+1)]))
	}
	for i := 3; i < 6; i++ {
		phase2 = append(phase2, m.message(poison(i), ""))
	}
	m.send(t, phase2...)
	audit, err := dlqtool.NewMySQLAudit(m.db)
	require.NoError(t, err)
	processed, err := dlqtool.NewMySQLProcessed(m.db)
	require.NoError(t, err)
	toReplay := []dlqtool.Letter{letters[poison(0)], letters[poison(1)], letters[poison(2)]}
	rep, err := dlqtool.Replay(m.w.ctx, toReplay, dlqtool.ReplayOptions{Group: m.w.group, Operator: "f41", Sender: m.w.prod,
		Audit: audit, Processed: processed})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Summary.Sent, "%+v", rep.Summary)
	var replayMsgIDs []string
	for _, r := range rep.Results {
		replayMsgIDs = append(replayMsgIDs, r.SentMsgID)
		m.sent = append(m.sent, r.SentMsgID)
	}
	m.settle(t)
	m.stop(t)

	// Phase 3, sent while the consumer is down; then it starts again with new counters.
	var phase3 []*primitive.Message
	for i := 3; i < 6; i++ { // the letters of events a re-send has processed since: duplicates, cause replay
		l := letters[poison(i)]
		msg := dlqtool.ReplayMessage(l, "", m.w.group, m.w.topic, dlqtool.Provenance{ReplayID: "f41-late", Operator: "f41", At: time.Now()})
		msg.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.CreateUniqID())
		phase3 = append(phase3, msg)
	}
	for i, id := range replayMsgIDs { // the replay messages that took effect, again: redeliveries
		msg := dlqtool.ReplayMessage(letters[poison(i)], "", m.w.group, m.w.topic, dlqtool.Provenance{ReplayID: rep.ReplayID, Operator: "f41", At: time.Now()})
		msg.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, id)
		phase3 = append(phase3, msg)
	}
	for i := 0; i < 4; i++ {
		phase3 = append(phase3, m.message(ev(i*9+2), ""), m.message(ev(i*9+6), originals[ev(i*9+6)]))
	}
	for i := 40; i < 48; i++ {
		if i%2 == 0 {
			phase3 = append(phase3, m.message(ev(i), "", "FAIL_FIRST", "1"))
		} else {
			phase3 = append(phase3, m.message(ev(i), ""))
		}
	}
	m.send(t, phase3...)
	m.start(t)
	m.settle(t)
	m.stop(t)
}

// ratioReport is what the test measured: from /metrics (summed over both processes) and the truth.
type ratioReport struct {
	outcomes       map[string]float64 // rmqguard_messages_total by outcome
	causes         map[string]float64 // rmqguard_duplicates_total by cause
	batchRetried   float64
	trueCauses     map[string]int
	mislabelled    []string
	trueDuplicates int
	trueAcked      int
}

func (m *mixedWorkload) report(t *testing.T) ratioReport {
	applied := m.appliedBy(t)
	rep := ratioReport{
		outcomes: m.counters(t, "rmqguard_messages_total", "outcome",
			[]string{"processed", "duplicate", "stale", "retry", "dead_letter", "dead_lettered", "unavailable", "unset", "unsubscribed"}),
		causes:     m.counters(t, "rmqguard_duplicates_total", "cause", allCauses),
		trueCauses: map[string]int{},
	}
	for _, r := range m.runs {
		n, err := scrape.Counter(m.w.ctx, r.metricsURL, "rmqguard_batch_retried_total", map[string]string{"group": m.w.group})
		require.NoError(t, err)
		rep.batchRetried += n
		for _, d := range r.rec.snapshot() {
			if d.kind.Acknowledges() {
				rep.trueAcked++
			}
			if d.kind != consumer.KindDuplicate {
				continue
			}
			rep.trueDuplicates++
			truth := "resend"
			switch by, ok := applied[d.eventID]; {
			case !ok:
				truth = "never applied"
			case by == d.msgID:
				truth = "redelivery"
			case d.replay:
				truth = "replay"
			}
			rep.trueCauses[truth]++
			if string(d.cause) != truth && d.cause != "unknown" {
				rep.mislabelled = append(rep.mislabelled, fmt.Sprintf("%s (event %s): %s, truly %s", d.msgID, d.eventID, d.cause, truth))
			}
		}
	}
	sort.Strings(rep.mislabelled)
	return rep
}

func sumOf(m map[string]float64, keys []string) float64 {
	total := 0.0
	for _, k := range keys {
		total += m[k]
	}
	return total
}

func testDuplicateRatioExact(t *testing.T, batch int) {
	m := newMixedWorkload(t, batch)
	m.run(t)
	rep := m.report(t)

	m.ledger.RequireOncePerEvent(t, 54)
	acked := sumOf(rep.outcomes, ackOutcomes)
	dups := sumOf(rep.causes, allCauses)
	allOutcomes := 0.0
	for _, n := range rep.outcomes {
		allOutcomes += n
	}
	t.Logf("/metrics (two processes): outcomes %v, causes %v, batch retried %.0f", rep.outcomes, rep.causes, rep.batchRetried)
	t.Logf("ratio over messages acknowledged: %.0f / %.0f = %.4f; over every decision (retries too): %.0f / %.0f = %.4f",
		dups, acked, dups/acked, dups, allOutcomes, dups/allOutcomes)
	t.Logf("truth: %d duplicates of %d messages acknowledged = %.4f; causes %v; mislabelled %d",
		rep.trueDuplicates, rep.trueAcked, float64(rep.trueDuplicates)/float64(rep.trueAcked), rep.trueCauses, len(rep.mislabelled))

	// Every message sent ends once (processed, duplicate or dead-lettered); a message acknowledged by its own
	// outcome whose batch was retried comes back and ends once more; and the broker may deliver a message
	// again on its own (at least once, e.g. around the restart), which the truth counts as a redelivery.
	assert.Equal(t, float64(rep.trueAcked), acked, "messages acknowledged = what the handlers' record says")
	assert.GreaterOrEqual(t, acked, float64(len(m.sent))+rep.batchRetried, "messages acknowledged ≥ messages sent + batch comebacks")
	assert.Equal(t, 54.0, rep.outcomes["processed"], "each event processed once")
	assert.Equal(t, 6.0, rep.outcomes["dead_lettered"], "the poison events")
	assert.Equal(t, acked-54-6, rep.outcomes["duplicate"], "the rest are duplicates")
	assert.Equal(t, rep.outcomes["duplicate"], dups, "every duplicate counted once by cause")
	assert.Equal(t, float64(rep.trueDuplicates)/float64(rep.trueAcked), dups/acked, "the ratio is duplicates / messages acknowledged")
	assert.Greater(t, rep.outcomes["retry"], 0.0, "the workload had retries (not in the denominator)")

	assert.Empty(t, rep.mislabelled, "no duplicate carries a cause other than its true one")
	assert.Zero(t, rep.trueCauses["never applied"])
	for _, c := range []string{"redelivery", "resend", "replay"} {
		assert.Equal(t, float64(rep.trueCauses[c]), rep.causes[c], "duplicates of cause %s", c)
	}
	assert.Zero(t, rep.causes["unknown"], "every cause known on this workload")
	assert.GreaterOrEqual(t, rep.trueCauses["redelivery"], 6+3+4, "copies of processed messages and of replays")
	assert.GreaterOrEqual(t, rep.trueCauses["resend"], 10+4)
	assert.GreaterOrEqual(t, rep.trueCauses["replay"], 3)
}

// TestE2E_F41_DuplicateRatioAndCausesExact_PerMessage: per-message mode. F41.
func TestE2E_F41_DuplicateRatioAndCausesExact_PerMessage(t *testing.T) {
	testDuplicateRatioExact(t, 1)
}

// TestE2E_F41_DuplicateRatioAndCausesExact_Batch: batch mode (BatchSize 8), where members share one
// transaction and the causes of a batch's duplicates are read together. F41.
func TestE2E_F41_DuplicateRatioAndCausesExact_Batch(t *testing.T) {
	testDuplicateRatioExact(t, 8)
}
