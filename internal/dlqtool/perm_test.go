package dlqtool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// F17: a write-only %DLQ%<group> (perm 2) holding a letter is never read as "0 letters": Scan fails naming
// the perm and the fix; FixPerm makes it perm 6 keeping 1 read / 1 write queue, and the letter is then read.
func TestF17_WriteOnlyDLQ_ScanNamesThePermAndFixPermMakesItReadable(t *testing.T) {
	w := newDLQWorld(t, 2, 1)
	w.publish(letter{eventID: "e-wo", eventType: "T", reason: "invalid JSON"}) // perm 2 is writable

	_, err := dlqtool.Scan(w.ctx, w.cluster, w.group, dlqtool.ScanOptions{})
	require.ErrorIs(t, err, dlqtool.ErrWriteOnly)
	assert.Contains(t, err.Error(), "perm 2")
	assert.Contains(t, err.Error(), "--fix-perm")
	_, err = dlqtool.Read(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, 0)
	assert.ErrorIs(t, err, dlqtool.ErrNoReadableRoute)

	fix, err := dlqtool.FixPerm(w.ctx, w.cluster, w.group)
	require.NoError(t, err)
	assert.Equal(t, dlqtool.PermFix{Topic: "%DLQ%" + w.group, Before: 2, After: 6, ReadQueues: 1, WriteQueues: 1, Changed: true}, fix)
	assert.Equal(t, "%DLQ%"+w.group+" was write-only (perm 2); made readable (perm 6), 1 read / 1 write queues kept", fix.String())
	route, err := rmq.TopicRoute(w.ctx, w.ns, "%DLQ%"+w.group)
	require.NoError(t, err)
	require.Len(t, route, 1)
	assert.Equal(t, rmq.QueueData{BrokerName: route[0].BrokerName, BrokerAddr: route[0].BrokerAddr, ReadQueues: 1, WriteQueues: 1, Perm: 6}, route[0])

	res := w.scan(dlqtool.ScanOptions{})
	assert.True(t, res.Complete, "problems: %v", res.Problems)
	assert.Equal(t, []string{"e-wo"}, eventIDs(res.Letters))

	again, err := dlqtool.FixPerm(w.ctx, w.cluster, w.group)
	require.NoError(t, err)
	assert.False(t, again.Changed, "a readable DLQ is left alone")
	assert.Equal(t, 6, again.After)

	missing := newDLQWorld(t, 0, 0)
	_, err = dlqtool.FixPerm(missing.ctx, missing.cluster, missing.group)
	assert.ErrorIs(t, err, dlqtool.ErrNoDLQ)
}
