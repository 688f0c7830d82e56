package dlqtool_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// F42: a letter's status is its audit row (keyed by the group in its namespace and the store ID) and the
// processed check of its event in the scope; it waits for an operator unless a replay sent it or its event
// was processed. A failed or uncertain replay leaves it waiting; a letter without event ID is never processed.
func TestStatuses_AuditRowAndProcessedDecideWhetherALetterWaits(t *testing.T) {
	audit := newFakeAudit()
	audit.put(dlqtool.AuditRecord{Group: "ns%g", StoreID: "S-sent", Status: dlqtool.AuditSent, ReplayedBy: "alice"})
	audit.put(dlqtool.AuditRecord{Group: "ns%g", StoreID: "S-failed", Status: dlqtool.AuditFailed})
	audit.put(dlqtool.AuditRecord{Group: "ns%g", StoreID: "S-sending", Status: dlqtool.AuditSending})
	audit.put(dlqtool.AuditRecord{Group: "g", StoreID: "S-other-ns", Status: dlqtool.AuditSent})
	processed := fakeProcessed{"scope/e-sent": true, "scope/e-done": true}
	letters := []dlqtool.Letter{
		{StoreID: "S-sent", EventID: "e-sent"}, {StoreID: "S-failed", EventID: "e-failed"},
		{StoreID: "S-sending", EventID: "e-sending"}, {StoreID: "S-done", EventID: "e-done"},
		{StoreID: "S-other-ns", EventID: "e-x"}, {StoreID: "S-no-event"},
	}
	st, err := dlqtool.Statuses(context.Background(), letters, dlqtool.StatusOptions{Group: "g", Namespace: "ns", Scope: "scope",
		Audit: audit, Processed: processed})
	require.NoError(t, err)
	require.Len(t, st, len(letters))
	require.NotNil(t, st[0].Replay)
	assert.Equal(t, "alice", st[0].Replay.ReplayedBy)
	assert.Nil(t, st[4].Replay, "the audit is keyed by the group in its namespace")
	var waiting, processedFlags []bool
	for _, s := range st {
		waiting = append(waiting, s.Waiting())
		processedFlags = append(processedFlags, s.Processed)
	}
	assert.Equal(t, []bool{false, true, true, false, true, true}, waiting)
	assert.Equal(t, []bool{true, false, false, true, false, false}, processedFlags)

	_, err = dlqtool.Statuses(context.Background(), letters, dlqtool.StatusOptions{Group: "g", Processed: processed})
	assert.ErrorContains(t, err, "Audit is required")
}

// F42: a letter replayed from an edited export file (its event ID changed) is processed when the replay's
// event is: the audit row's event ID, not the letter's, is checked for a letter a replay sent.
func TestStatuses_AnEditedReplayIsProcessedUnderTheEventIDItWasSentWith(t *testing.T) {
	audit := newFakeAudit()
	audit.put(dlqtool.AuditRecord{Group: "g", StoreID: "S-edited", EventID: "e-new", Status: dlqtool.AuditSent})
	audit.put(dlqtool.AuditRecord{Group: "g", StoreID: "S-failed", EventID: "e-new2", Status: dlqtool.AuditFailed})
	processed := fakeProcessed{"g/e-new": true, "g/e-new2": true}
	letters := []dlqtool.Letter{{StoreID: "S-edited", EventID: "e-orig"}, {StoreID: "S-failed", EventID: "e-orig2"}}
	st, err := dlqtool.Statuses(context.Background(), letters, dlqtool.StatusOptions{Group: "g", Audit: audit, Processed: processed})
	require.NoError(t, err)
	assert.True(t, st[0].Processed, "the replay sent e-new, which is processed")
	assert.False(t, st[1].Processed, "a failed replay sent nothing: the letter's own event is checked")
}
