package acl_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// F17 under ACL: the perm update of a write-only DLQ is signed. With a wrong secret FixPerm fails at once
// with the ACL error (not with a route that never turns readable at the timeout); with the right keys it
// makes the DLQ readable, keeping its queue counts.
func TestACL_F17_FixPermIsSignedAndARefusalIsTheACLError(t *testing.T) {
	w := newACLWorld(t)
	topic := rmq.NamespacedDLQTopic(w.cluster.Namespace, w.group)
	require.NoError(t, rmq.UpdateTopic(w.ctx, w.stack.Broker,
		rmq.TopicConfig{Topic: topic, ReadQueues: 1, WriteQueues: 1, Perm: 2}, rmq.Credentials(w.cluster.Credentials)))
	require.Eventually(t, func() bool {
		_, err := dlqtool.Scan(w.ctx, w.cluster, w.group, dlqtool.ScanOptions{})
		return errors.Is(err, dlqtool.ErrWriteOnly)
	}, 30*time.Second, 200*time.Millisecond, "the DLQ is write-only on the name server")

	wrong := w.cluster
	wrong.Credentials = w.wrongSecret()
	_, err := dlqtool.FixPerm(w.ctx, wrong, w.group)
	var acl *rmq.ACLError // unsigned, or unread answers, would end in "still unreadable" at the deadline
	require.True(t, errors.As(err, &acl), "wrong secret: %v", err)
	assert.Equal(t, wrong.Credentials.AccessKey, acl.AccessKey)

	fix, err := dlqtool.FixPerm(w.ctx, w.cluster, w.group)
	require.NoError(t, err)
	assert.Equal(t, dlqtool.PermFix{Topic: topic, Before: 2, After: 6, Changed: true, ReadQueues: 1, WriteQueues: 1}, fix)
}
