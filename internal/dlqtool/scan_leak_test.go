package dlqtool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// readerGroups returns the broker's subscription groups whose name starts with rmqguard-dlq-reader.
func readerGroups(t *testing.T, w *dlqWorld) map[string]bool {
	t.Helper()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(w.ns)))
	require.NoError(t, err)
	defer func() { _ = adm.Close() }()
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	subs, err := adm.GetAllSubscriptionGroup(ctx, w.broker, 5*time.Second)
	require.NoError(t, err)
	out := map[string]bool{}
	for name := range subs.SubscriptionGroupTable {
		if strings.HasPrefix(name, "rmqguard-dlq-reader") {
			out[name] = true
		}
	}
	return out
}

// An operator's read of the DLQ (list, show, export: one Scan each) must not leave configuration behind on a
// production broker. Each Scan pulls in a consumer group named after the process and the nanosecond, and the
// broker (autoCreateSubscriptionGroup, on by default) persists that group in subscriptionGroup.json and
// creates its %RETRY%<group> topic, registered on every name server: one more group and topic per command run.
// Three scans may add at most one reader group (a fixed name, created once).
func TestScan_LeavesNoSubscriptionGroupPerRun(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	w.publish(letter{eventID: "e-1", eventType: "T", reason: "r"})
	before := readerGroups(t, w)
	for i := 0; i < 3; i++ {
		res, err := dlqtool.Scan(w.ctx, w.cluster, w.group, dlqtool.ScanOptions{})
		require.NoError(t, err)
		require.Len(t, res.Letters, 1)
	}
	var added []string
	for name := range readerGroups(t, w) {
		if !before[name] {
			added = append(added, name)
		}
	}
	assert.LessOrEqual(t, len(added), 1, "subscription groups left on the broker by 3 scans: %v", added)
}
