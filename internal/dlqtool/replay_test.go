package dlqtool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
)

// replayLetter returns a letter of group cg's DLQ with origin topic origin ("" = none) and event eventID.
func replayLetter(storeID, eventID, origin string) dlqtool.Letter {
	props := map[string]string{
		"EVENT_ID": eventID, "traceparent": "00-trace-" + eventID, "KEYS": "order-" + eventID, "TAGS": "OrderCreated",
		primitive.PropertyUniqueClientMessageIdKeyIndex: "UNIQ-" + storeID, primitive.PropertyDelayTimeLevel: "3",
		primitive.PropertyTimerDeliverMS: "1700000000000", primitive.PropertyRealTopic: "%RETRY%cg",
		primitive.PropertyRealQueueId: "0", primitive.PropertyMinOffset: "0", primitive.PropertyMaxOffset: "9",
		primitive.PropertyConsumeStartTime: "1700000000000", primitive.PropertyOriginMessageId: "ORIG-" + storeID,
		primitive.PropertyProducerGroup: "pg", primitive.PropertyTransactionPrepared: "true",
		primitive.PropertyReconsumeTime: "3", primitive.PropertyMaxReconsumeTimes: "3",
		deadletter.PropReason: "unknown SKU", deadletter.PropGroup: "cg", deadletter.PropReconsumeTimes: "0",
		deadletter.PropReplayID: "an-older-replay",
	}
	if origin != "" {
		props[primitive.PropertyRetryTopic] = origin
	}
	return dlqtool.Letter{Group: "cg", Topic: "%DLQ%cg", StoreID: storeID, MsgID: "UNIQ-" + storeID, OriginTopic: origin,
		EventID: eventID, Tags: "OrderCreated", Keys: "order-" + eventID, Properties: props, Body: []byte(`{"id":"` + eventID + `"}`)}
}

type rig struct {
	sender    *fakeSender
	audit     *fakeAudit
	processed fakeProcessed
}

func newRig() *rig {
	return &rig{sender: &fakeSender{}, audit: newFakeAudit(), processed: fakeProcessed{}}
}

func (r *rig) opts(mod ...func(*dlqtool.ReplayOptions)) dlqtool.ReplayOptions {
	o := dlqtool.ReplayOptions{Group: "cg", Operator: "alice@host", Sender: r.sender, Audit: r.audit, Processed: r.processed}
	for _, m := range mod {
		m(&o)
	}
	return o
}

func outcomes(rep dlqtool.ReplayReport) []dlqtool.ReplayOutcome {
	var out []dlqtool.ReplayOutcome
	for _, r := range rep.Results {
		out = append(out, r.Outcome)
	}
	return out
}

func TestReplayMessage_F18_GroupOnlyTopicOriginRestoredFidelityAndProvenance(t *testing.T) {
	l := replayLetter("S-1", "e-1", "ORDER")
	at := time.Date(2026, 11, 30, 22, 0, 0, 5, time.UTC)
	msg := dlqtool.ReplayMessage(l, "", "cg", "ORDER", dlqtool.Provenance{ReplayID: "R-1", Operator: "alice@host", At: at})

	assert.Equal(t, "%RETRY%cg", msg.Topic, "only the dead-lettered group reads its retry topic")
	assert.Equal(t, "ORDER", msg.GetProperty(primitive.PropertyRetryTopic), "the handler sees the origin topic")
	assert.Equal(t, l.Body, msg.Body)
	assert.Equal(t, "OrderCreated", msg.GetTags())
	assert.Equal(t, "order-e-1", msg.GetKeys())
	assert.Equal(t, "e-1", msg.GetProperty("EVENT_ID"))
	assert.Equal(t, "00-trace-e-1", msg.GetProperty("traceparent"))
	for _, reserved := range []string{primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.PropertyDelayTimeLevel,
		primitive.PropertyTimerDeliverMS, primitive.PropertyRealTopic, primitive.PropertyRealQueueId, primitive.PropertyMinOffset,
		primitive.PropertyMaxOffset, primitive.PropertyConsumeStartTime, primitive.PropertyOriginMessageId,
		primitive.PropertyProducerGroup, primitive.PropertyTransactionPrepared, primitive.PropertyReconsumeTime,
		primitive.PropertyMaxReconsumeTimes, deadletter.PropReason, deadletter.PropGroup, deadletter.PropReconsumeTimes} {
		assert.Empty(t, msg.GetProperty(reserved), "reserved property %s is dropped", reserved)
	}
	assert.Equal(t, "R-1", msg.GetProperty(deadletter.PropReplayID), "an older replay's provenance is replaced")
	assert.Equal(t, "S-1", msg.GetProperty(deadletter.PropReplayOf))
	assert.Equal(t, "2026-11-30T22:00:00.000000005Z", msg.GetProperty(deadletter.PropReplayedAt))
	assert.Equal(t, "alice@host", msg.GetProperty(deadletter.PropReplayedBy))

	// Tags and keys of a letter whose properties lack them (an export edited by hand) come from its fields.
	bare := dlqtool.Letter{StoreID: "S-2", Tags: "T", Keys: "k1 k2", Properties: map[string]string{}}
	msg = dlqtool.ReplayMessage(bare, "", "cg", "ORDER", dlqtool.Provenance{})
	assert.Equal(t, "T", msg.GetTags())
	assert.Equal(t, "k1 k2", msg.GetKeys())
}

func TestReplay_S5_SentOnceThenSkippedAsAlreadyReplayed(t *testing.T) {
	r := newRig()
	lim := &countingLimiter{}
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER"), replayLetter("S-2", "e-2", "ORDER")}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Limiter = lim }))
	require.NoError(t, err)
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySent, dlqtool.ReplaySent}, outcomes(rep))
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 2, Sent: 2}, rep.Summary)
	assert.Equal(t, 2, lim.waits, "one limiter wait per send")
	require.Equal(t, 2, r.sender.count())
	assert.Equal(t, rep.ReplayID, r.sender.sent[0].GetProperty(deadletter.PropReplayID))
	row := r.audit.get("cg", "S-1")
	assert.Equal(t, dlqtool.AuditSent, row.Status)
	assert.Equal(t, rep.Results[0].SentMsgID, row.SentMsgID)
	assert.Equal(t, "e-1", row.EventID)
	assert.Equal(t, "alice@host", row.ReplayedBy)

	again, err := dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.NotEqual(t, rep.ReplayID, again.ReplayID, "each run has its own replay ID")
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 2, SkippedReplayed: 2}, again.Summary)
	assert.Contains(t, again.Results[0].Detail, rep.ReplayID)
	assert.Equal(t, 2, r.sender.count(), "a second run sends nothing")

	forced, err := dlqtool.Replay(context.Background(), letters[:1], r.opts(func(o *dlqtool.ReplayOptions) { o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, Sent: 1}, forced.Summary, "--force sends a replayed letter again")
	assert.Equal(t, forced.ReplayID, r.audit.get("cg", "S-1").ReplayID)
}

func TestReplay_S5_ProcessedEventSkippedEvenWithForce(t *testing.T) {
	r := newRig()
	r.processed["cg/e-done"] = true
	r.processed["inventory/e-scoped"] = true
	letters := []dlqtool.Letter{replayLetter("S-1", "e-done", "ORDER"), replayLetter("S-2", "e-scoped", "ORDER")}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySkippedProcessed, dlqtool.ReplaySent}, outcomes(rep),
		"the scope is the group by default")
	assert.Contains(t, rep.Results[0].Detail, "e-done")

	rep, err = dlqtool.Replay(context.Background(), letters[1:], r.opts(func(o *dlqtool.ReplayOptions) { o.Scope = "inventory"; o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySkippedProcessed}, outcomes(rep), "Scope names the dedup scope checked")
	assert.Equal(t, 1, r.sender.count())
	_, found, _ := r.audit.Lookup(context.Background(), "cg", "S-1")
	assert.False(t, found, "a skipped letter is not claimed")
}

func TestReplay_F18_NoOriginSkippedAndListedUnlessTargetTopic(t *testing.T) {
	r := newRig()
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", ""), replayLetter("S-2", "e-2", "%RETRY%cg"), replayLetter("S-3", "e-3", "%DLQ%cg")}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 3, SkippedNoOrigin: 3}, rep.Summary,
		"a %%RETRY%%/%%DLQ%% origin is no origin: the handler must never see it")
	assert.Contains(t, rep.Results[0].Detail, "--target-topic")
	assert.Zero(t, r.sender.count())

	rep, err = dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.TargetTopic = "ORDER_V2" }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 3, Sent: 3}, rep.Summary)
	for _, m := range r.sender.sent {
		assert.Equal(t, "%RETRY%cg", m.Topic)
		assert.Equal(t, "ORDER_V2", m.GetProperty(primitive.PropertyRetryTopic))
	}
	assert.Equal(t, "ORDER_V2", r.audit.get("cg", "S-1").TargetTopic)
}

func TestReplay_DryRunDecidesButSendsAndRecordsNothing(t *testing.T) {
	r := newRig()
	r.processed["cg/e-done"] = true
	r.audit.put(dlqtool.AuditRecord{Group: "cg", StoreID: "S-old", ReplayID: "R-0", Status: dlqtool.AuditSent})
	lim := &countingLimiter{}
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER"), replayLetter("S-2", "e-done", "ORDER"), replayLetter("S-old", "e-3", "ORDER"), replayLetter("S-4", "e-4", "")}
	rep, err := dlqtool.Replay(context.Background(), letters, dlqtool.ReplayOptions{Group: "cg", Operator: "op", DryRun: true,
		Audit: r.audit, Processed: r.processed, Limiter: lim})
	require.NoError(t, err, "a dry run needs no sender")
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplayWouldSend, dlqtool.ReplaySkippedProcessed, dlqtool.ReplaySkippedReplayed, dlqtool.ReplaySkippedNoOrigin}, outcomes(rep))
	assert.Zero(t, lim.waits)
	_, found, _ := r.audit.Lookup(context.Background(), "cg", "S-1")
	assert.False(t, found, "a dry run claims nothing")
}

func TestReplay_SendFailureRecordedFailedAndRetriedByALaterRun(t *testing.T) {
	r := newRig()
	r.sender.fail = func(*primitive.Message) error { return errors.New("broker busy") }
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER")}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, Failed: 1}, rep.Summary)
	assert.ErrorContains(t, rep.Results[0].Err, "broker busy")
	row := r.audit.get("cg", "S-1")
	assert.Equal(t, dlqtool.AuditFailed, row.Status)
	assert.Contains(t, row.Error, "broker busy")

	r.sender.fail = nil
	rep, err = dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, Sent: 1}, rep.Summary, "a failed row is retried without --force")
	assert.Equal(t, dlqtool.AuditSent, r.audit.get("cg", "S-1").Status)
}

func TestReplay_UncertainSendingRowSkippedUnlessForce(t *testing.T) {
	r := newRig()
	r.audit.put(dlqtool.AuditRecord{Group: "cg", StoreID: "S-1", ReplayID: "R-crashed", Status: dlqtool.AuditSending})
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER")}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedUncertain: 1}, rep.Summary)
	assert.Contains(t, rep.Results[0].Detail, "R-crashed")
	assert.Zero(t, r.sender.count())

	rep, err = dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, Sent: 1}, rep.Summary)
}

func TestReplay_TwoRunsAtOnceSendEachLetterOnce(t *testing.T) {
	r := newRig()
	var letters []dlqtool.Letter
	for _, id := range []string{"1", "2", "3", "4", "5", "6", "7", "8"} {
		letters = append(letters, replayLetter("S-"+id, "e-"+id, "ORDER"))
	}
	var wg sync.WaitGroup
	reps := make([]dlqtool.ReplayReport, 4)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := dlqtool.Replay(context.Background(), letters, r.opts())
			assert.NoError(t, err)
			reps[i] = rep
		}()
	}
	wg.Wait()
	sent := 0
	for _, rep := range reps {
		sent += rep.Summary.Sent
		assert.Equal(t, len(letters), rep.Summary.Sent+rep.Summary.SkippedReplayed+rep.Summary.SkippedUncertain,
			"a letter another run is sending is skipped as replayed or uncertain")
	}
	assert.Equal(t, len(letters), sent)
	assert.Equal(t, len(letters), r.sender.count(), "the claim settles concurrent runs: one send per letter")
}

func TestReplay_LettersThatCannotBeKeyedOrAreListedTwice(t *testing.T) {
	r := newRig()
	other := replayLetter("S-9", "e-9", "ORDER")
	other.Group = "another"
	noID := replayLetter("", "e-8", "ORDER")
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER"), replayLetter("S-1", "e-1", "ORDER"), other, noID}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySent, dlqtool.ReplaySkippedReplayed, dlqtool.ReplayFailed, dlqtool.ReplayFailed}, outcomes(rep))
	assert.ErrorIs(t, rep.Results[2].Err, dlqtool.ErrOtherGroup)
	assert.ErrorIs(t, rep.Results[3].Err, dlqtool.ErrNoStoreID)
	assert.Equal(t, 1, r.sender.count())
}

func TestReplay_CancelledContextReportsTheRestAsNotAttempted(t *testing.T) {
	r := newRig()
	ctx, cancel := context.WithCancel(context.Background())
	var progress []int
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER"), replayLetter("S-2", "e-2", "ORDER"), replayLetter("S-3", "e-3", "ORDER")}
	rep, err := dlqtool.Replay(ctx, letters, r.opts(func(o *dlqtool.ReplayOptions) {
		o.Progress = func(done, total int, _ dlqtool.LetterResult) {
			progress = append(progress, done*10+total)
			cancel()
		}
	}))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 3, Sent: 1, Failed: 2}, rep.Summary)
	assert.ErrorIs(t, rep.Results[2].Err, context.Canceled)
	assert.Equal(t, []int{13, 23, 33}, progress, "progress after every letter")
}

func TestReplayOptions_InvalidFieldNamed(t *testing.T) {
	r := newRig()
	for field, mod := range map[string]func(*dlqtool.ReplayOptions){
		"Group":       func(o *dlqtool.ReplayOptions) { o.Group = "" },
		"TargetTopic": func(o *dlqtool.ReplayOptions) { o.TargetTopic = "%DLQ%cg" },
		"Operator":    func(o *dlqtool.ReplayOptions) { o.Operator = " " },
		"Audit":       func(o *dlqtool.ReplayOptions) { o.Audit = nil },
		"Processed":   func(o *dlqtool.ReplayOptions) { o.Processed = nil },
		"Sender":      func(o *dlqtool.ReplayOptions) { o.Sender = nil },
	} {
		_, err := dlqtool.Replay(context.Background(), nil, r.opts(mod))
		assert.ErrorContains(t, err, "invalid "+field, field)
	}
	_, err := dlqtool.Replay(context.Background(), nil, r.opts(func(o *dlqtool.ReplayOptions) { o.Group = "%RETRY%cg" }))
	assert.ErrorContains(t, err, "invalid Group")
}

func TestReplay_NamespaceNamesAreTheBrokers(t *testing.T) {
	r := newRig()
	l := replayLetter("S-1", "e-1", "prod%ORDER") // RETRY_TOPIC of a namespaced letter is in the namespace
	l.Group = "prod%cg"
	msg := dlqtool.ReplayMessage(l, "prod", "cg", "ORDER", dlqtool.Provenance{})
	assert.Equal(t, "%RETRY%prod%cg", msg.Topic)
	assert.Equal(t, "prod%ORDER", msg.GetProperty(primitive.PropertyRetryTopic))

	rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{l}, r.opts(func(o *dlqtool.ReplayOptions) { o.Namespace = "prod" }))
	require.NoError(t, err)
	require.Equal(t, dlqtool.ReplaySummary{Selected: 1, Sent: 1}, rep.Summary)
	assert.Equal(t, "ORDER", rep.Results[0].Topic, "results name the topic without the namespace")
	assert.Equal(t, "%RETRY%prod%cg", r.sender.sent[0].Topic)
	assert.Equal(t, "prod%ORDER", r.sender.sent[0].GetProperty(primitive.PropertyRetryTopic))
	assert.Equal(t, dlqtool.AuditSent, r.audit.get("prod%cg", "S-1").Status, "the audit keys the group as the broker names it")

	_, err = dlqtool.Replay(context.Background(), nil, r.opts(func(o *dlqtool.ReplayOptions) { o.Namespace = "a%b" }))
	assert.ErrorContains(t, err, "invalid Namespace")
}

// blindAudit hides every row from Lookup, as when another run claims a letter between this run's lookup
// and its claim.
type blindAudit struct{ *fakeAudit }

func (blindAudit) Lookup(context.Context, string, string) (dlqtool.AuditRecord, bool, error) {
	return dlqtool.AuditRecord{}, false, nil
}

// A claim lost to a concurrent run is uncertain (exit 1), not "already replayed": the other run's send
// may still fail.
func TestReplay_S5_AClaimLostToAConcurrentRunIsUncertain(t *testing.T) {
	r := newRig()
	r.audit.put(dlqtool.AuditRecord{Group: "cg", StoreID: "S-1", ReplayID: "R-other", Status: dlqtool.AuditSending})
	rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER")},
		r.opts(func(o *dlqtool.ReplayOptions) { o.Audit = blindAudit{r.audit} }))
	require.NoError(t, err)
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySkippedUncertain}, outcomes(rep))
	assert.Contains(t, rep.Results[0].Detail, "concurrent replay")
	assert.Equal(t, 1, rep.Summary.SkippedUncertain)
	assert.Zero(t, r.sender.count(), "nothing sent")
}

// A letter without an event ID is sent, and its result says that the already-processed check could not be
// done (not skipped without a word).
func TestReplay_S5_ALetterWithoutEventIDSaysTheProcessedCheckWasNotDone(t *testing.T) {
	r := newRig()
	rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{replayLetter("S-1", "", "ORDER")}, r.opts())
	require.NoError(t, err)
	assert.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySent}, outcomes(rep))
	assert.Equal(t, "no event ID, so the already-processed check was not done", rep.Results[0].Detail)
}
