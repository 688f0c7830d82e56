package dlqtool_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
)

// The summary counts every letter once, under the outcome it got (mutants of the counters lived).
func TestReplay_SummaryCountsEachOutcome(t *testing.T) {
	r := newRig()
	r.processed["cg/e-done"] = true
	r.audit.put(dlqtool.AuditRecord{Group: "cg", StoreID: "S-sending", ReplayID: "R-crashed", Status: dlqtool.AuditSending})
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER"), replayLetter("S-done", "e-done", "ORDER"),
		replayLetter("S-sending", "e-3", "ORDER"), replayLetter("S-none", "e-4", "")}

	rep, err := dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.DryRun = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 4, WouldSend: 1, SkippedProcessed: 1, SkippedUncertain: 1, SkippedNoOrigin: 1}, rep.Summary)

	rep, err = dlqtool.Replay(context.Background(), letters, r.opts())
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 4, Sent: 1, SkippedProcessed: 1, SkippedUncertain: 1, SkippedNoOrigin: 1}, rep.Summary)
}

// Two remarks on one sent letter are both kept: no event ID, and a stored-but-late status.
func TestReplay_SentWithoutEventIDAndALateFlushKeepsBothRemarks(t *testing.T) {
	r := newRig()
	s := &statusSender{res: &primitive.SendResult{Status: primitive.SendFlushDiskTimeout, MsgID: "M-1"}}
	rep, err := dlqtool.Replay(context.Background(), []dlqtool.Letter{replayLetter("S-1", "", "ORDER")},
		r.opts(func(o *dlqtool.ReplayOptions) { o.Sender = s }))
	require.NoError(t, err)
	require.Equal(t, []dlqtool.ReplayOutcome{dlqtool.ReplaySent}, outcomes(rep))
	assert.Regexp(t, `^no event ID, so the already-processed check was not done; stored, but the broker answered status \S+ \(flush or replication late\)$`,
		rep.Results[0].Detail)
}

// A letter the broker dead-lettered itself carries the ReconsumeTimes of its DLQ copy, one more than the
// last delivery's; Attempts is that last delivery's (never below 0). An rmqguard letter says it in a property.
func TestNewLetter_AttemptsIsTheLastDeliverysReconsumeTimes(t *testing.T) {
	for _, tc := range []struct {
		reconsume int32
		prop      string
		want      int
	}{{3, "", 2}, {1, "", 0}, {0, "", 0}, {0, "5", 5}} {
		m := &primitive.MessageExt{MsgId: "m", ReconsumeTimes: tc.reconsume}
		m.Queue = &primitive.MessageQueue{Topic: "%DLQ%cg"}
		if tc.prop != "" {
			m.WithProperty(deadletter.PropReconsumeTimes, tc.prop)
		}
		assert.Equal(t, tc.want, dlqtool.NewLetter("cg", m).Attempts, "ReconsumeTimes %d, property %q", tc.reconsume, tc.prop)
	}
}
