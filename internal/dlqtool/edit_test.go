package dlqtool_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
)

// An edited replay sends the letter's replay message with the new body under the same event ID and
// properties, and its claim records both bodies and the editor: the letter is superseded, so a replay of
// it sends nothing (with Force neither), and it is not edited twice.
func TestReplayEdited_SendsTheNewBodyUnderTheSameEventIDAndSupersedesTheLetter(t *testing.T) {
	r := newRig()
	l := replayLetter("S-1", "e-1", "ORDER")
	fixed := []byte(`{"id":"e-1","sku":"fixed"}`)
	res, err := dlqtool.ReplayEdited(context.Background(), l, fixed, r.opts())
	require.NoError(t, err)
	require.Equal(t, dlqtool.ReplaySent, res.Outcome, "%+v", res)
	require.Equal(t, 1, r.sender.count())
	msg := r.sender.sent[0]
	assert.Equal(t, fixed, msg.Body)
	assert.Equal(t, "e-1", msg.GetProperty("EVENT_ID"), "dedup applies to the edited copy")
	assert.Equal(t, "00-trace-e-1", msg.GetProperty("traceparent"))
	assert.Equal(t, "%RETRY%cg", msg.Topic)
	assert.Equal(t, "ORDER", msg.GetProperty(primitive.PropertyRetryTopic))
	assert.Equal(t, "S-1", msg.GetProperty(deadletter.PropReplayOf))
	assert.Equal(t, "alice@host", msg.GetProperty(deadletter.PropReplayedBy))
	assert.Equal(t, []byte(`{"id":"e-1"}`), l.Body, "the caller's letter is not changed")

	row := r.audit.get("cg", "S-1")
	assert.True(t, row.Superseded())
	assert.Equal(t, dlqtool.AuditSent, row.Status)
	assert.Equal(t, "alice@host", row.EditedBy)
	assert.Equal(t, l.Body, row.OriginalBody)
	assert.Equal(t, fixed, row.EditedBody)
	assert.Equal(t, res.SentMsgID, row.SentMsgID)

	for _, force := range []bool{false, true} {
		rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{l}, r.opts(func(o *dlqtool.ReplayOptions) { o.Force = force }))
		require.NoError(t, err)
		assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedSuperseded: 1}, rep.Summary, "force %v", force)
		assert.Contains(t, rep.Results[0].Detail, "never replayed as it is")
	}
	again, err := dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","sku":"other"}`), r.opts(func(o *dlqtool.ReplayOptions) { o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySkippedSuperseded, again.Outcome)
	assert.Contains(t, again.Detail, "not edited twice")
	assert.Contains(t, again.Detail, deadletter.PropReplayOf+"=S-1", "the detail says which letter to edit instead")
	assert.Equal(t, 1, r.sender.count(), "nothing sent after the edit")
}

// An edit whose send failed leaves the letter superseded (a replay still skips it) and may be edited again;
// an uncertain one only with Force.
func TestReplayEdited_AFailedEditIsEditedAgainAndAnUncertainOneOnlyWithForce(t *testing.T) {
	r := newRig()
	l := replayLetter("S-1", "e-1", "ORDER")
	r.sender.fail = func(*primitive.Message) error { return errors.New("broker busy") }
	res, err := dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","v":1}`), r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplayFailed, res.Outcome)
	r.sender.fail = nil

	rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{l}, r.opts(func(o *dlqtool.ReplayOptions) { o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedSuperseded: 1}, rep.Summary)
	assert.Contains(t, rep.Results[0].Detail, "edit it again")

	res, err = dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","v":2}`), r.opts(func(o *dlqtool.ReplayOptions) { o.Operator = "bob" }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySent, res.Outcome)
	row := r.audit.get("cg", "S-1")
	assert.Equal(t, "bob", row.EditedBy)
	assert.Equal(t, []byte(`{"id":"e-1","v":2}`), row.EditedBody)

	row.Status = dlqtool.AuditSending // as after a send whose answer never came
	r.audit.put(row)
	res, err = dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","v":3}`), r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySkippedSuperseded, res.Outcome)
	assert.Contains(t, res.Detail, "--force")
	res, err = dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","v":3}`), r.opts(func(o *dlqtool.ReplayOptions) { o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySent, res.Outcome)
	assert.Equal(t, 2, r.sender.count())
}

// Of eight edits of one letter at once, one claims and sends; the others are skipped as superseded.
func TestReplayEdited_ConcurrentEditsOfOneLetterSendOnce(t *testing.T) {
	r := newRig()
	l := replayLetter("S-1", "e-1", "ORDER")
	var wg sync.WaitGroup
	results := make([]dlqtool.LetterResult, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","n":`+string(rune('0'+i))+`}`), r.opts())
			assert.NoError(t, err)
			results[i] = res
		}()
	}
	wg.Wait()
	count := map[dlqtool.ReplayOutcome]int{}
	for _, res := range results {
		count[res.Outcome]++
	}
	assert.Equal(t, map[dlqtool.ReplayOutcome]int{dlqtool.ReplaySent: 1, dlqtool.ReplaySkippedSuperseded: 7}, count)
	assert.Equal(t, 1, r.sender.count())
}

// lateAudit hides the rows from the first Lookup, as when an edit claims the letter between a replay's
// lookup and its claim.
type lateAudit struct {
	*fakeAudit
	looked bool
}

func (a *lateAudit) Lookup(ctx context.Context, group, storeID string) (dlqtool.AuditRecord, bool, error) {
	if !a.looked {
		a.looked = true
		return dlqtool.AuditRecord{}, false, nil
	}
	return a.fakeAudit.Lookup(ctx, group, storeID)
}

// A plain replay that loses its claim to an edit running at once is skipped as superseded.
func TestReplay_AClaimLostToAConcurrentEditIsSuperseded(t *testing.T) {
	r := newRig()
	r.audit.put(dlqtool.AuditRecord{Group: "cg", StoreID: "S-1", ReplayID: "R-edit", Status: dlqtool.AuditSending, EditedBy: "bob"})
	rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER")},
		r.opts(func(o *dlqtool.ReplayOptions) { o.Audit = &lateAudit{fakeAudit: r.audit} }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedSuperseded: 1}, rep.Summary)
	assert.Contains(t, rep.Results[0].Detail, "edited at the same time by bob (replay R-edit)")
	assert.Zero(t, r.sender.count())
}

// A dry run decides the edit and claims nothing; an event already processed is not sent edited either.
func TestReplayEdited_DryRunClaimsNothingAndAProcessedEventIsSkipped(t *testing.T) {
	r := newRig()
	l := replayLetter("S-1", "e-1", "ORDER")
	res, err := dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","x":1}`), dlqtool.ReplayOptions{Group: "cg", Operator: "op",
		DryRun: true, Audit: r.audit, Processed: r.processed})
	require.NoError(t, err, "a dry run needs no sender")
	assert.Equal(t, dlqtool.ReplayWouldSend, res.Outcome)
	_, found, _ := r.audit.Lookup(context.Background(), "cg", "S-1")
	assert.False(t, found)

	r.processed["cg/e-1"] = true
	res, err = dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","x":1}`), r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySkippedProcessed, res.Outcome)
	assert.Zero(t, r.sender.count())
}

// An edit must keep the event ID where the consumer reads it, and change the body; a compressed letter's
// SysFlag property is not carried to the operator's plain body.
func TestReplayEdited_RefusesAnEditThatLosesTheEventIDOrChangesNothing(t *testing.T) {
	r := newRig()
	l := replayLetter("S-1", "e-1", "ORDER")
	for name, tc := range map[string]struct {
		letter dlqtool.Letter
		body   string
		want   string
	}{
		"empty":     {l, "", "empty"},
		"unchanged": {l, `{"id":"e-1"}`, "replay the letter instead"},
		"no event":  {replayLetter("S-2", "", "ORDER"), `{"x":1}`, "no event ID"},
		"field gone": {dlqtool.Letter{Group: "cg", StoreID: "S-3", EventID: "e-3", OriginTopic: "ORDER",
			Properties: map[string]string{}, Body: []byte(`{"eventId":"e-3","sku":"bad"}`)}, `{"eventId":"e-4","sku":"good"}`, "drops event ID e-3"},
	} {
		_, err := dlqtool.ReplayEdited(context.Background(), tc.letter, []byte(tc.body), r.opts())
		assert.ErrorContains(t, err, tc.want, name)
	}
	_, err := dlqtool.ReplayEdited(context.Background(), l, []byte(`{"id":"e-1","x":1}`), r.opts(func(o *dlqtool.ReplayOptions) { o.Operator = "" }))
	assert.ErrorContains(t, err, "invalid Operator")

	inBody := dlqtool.Letter{Group: "cg", StoreID: "S-5", EventID: "e-5", OriginTopic: "ORDER",
		Properties: map[string]string{body.PropSysFlag: "257"}, Body: []byte("\xef\xbb\xbf{\"eventId\":\"e-5\",\"sku\":\"bad\"}")}
	res, err := dlqtool.ReplayEdited(context.Background(), inBody, []byte(`{"eventId":"e-5","sku":"good"}`), r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySent, res.Outcome, "the event ID field is kept")
	assert.Empty(t, r.sender.sent[0].GetProperty(body.PropSysFlag), "the edited body is not compressed")
	assert.Equal(t, "257", inBody.Properties[body.PropSysFlag], "the caller's letter is not changed")
}
