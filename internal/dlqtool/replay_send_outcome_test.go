package dlqtool_test

import (
	"context"
	"fmt"
	"testing"

	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// statusSender answers every send with a fixed result and error, and counts the sends.
type statusSender struct {
	res  *primitive.SendResult
	err  error
	sent int
}

func (s *statusSender) SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error) {
	s.sent++
	return s.res, s.err
}

// A send whose request reached the broker but whose answer did not come back (the client's send timeout,
// errors.ErrRequestTimeout) may have been stored: a later run must not send it again without --force.
func TestReplay_S5_SendTimeoutMayHaveBeenStoredIsNotResentWithoutForce(t *testing.T) {
	r := newRig()
	s := &statusSender{err: fmt.Errorf("send: %w", rmqerrors.ErrRequestTimeout)}
	letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER")}
	rep, err := dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Sender = s }))
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Summary.Failed, "the run cannot say it was sent")
	assert.ErrorIs(t, rep.Results[0].Err, rmqerrors.ErrRequestTimeout)
	assert.Equal(t, dlqtool.AuditSending, r.audit.get("cg", "S-1").Status, "the row says it may have been sent")

	s.err, s.res = nil, &primitive.SendResult{Status: primitive.SendOK, MsgID: "M-2"}
	rep, err = dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Sender = s }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedUncertain: 1}, rep.Summary)
	assert.Equal(t, 1, s.sent, "a second run sends nothing without --force")

	rep, err = dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Sender = s; o.Force = true }))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, Sent: 1}, rep.Summary)
}

// FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE are answers of a broker that stored the
// message (only its flush or replication is late): the replay was sent and is recorded so.
func TestReplay_S5_StoredButNotFlushedIsSentAndNotResent(t *testing.T) {
	for _, st := range []primitive.SendStatus{primitive.SendFlushDiskTimeout, primitive.SendFlushSlaveTimeout, primitive.SendSlaveNotAvailable} {
		r := newRig()
		s := &statusSender{res: &primitive.SendResult{Status: st, MsgID: "M-1"}}
		letters := []dlqtool.Letter{replayLetter("S-1", "e-1", "ORDER")}
		rep, err := dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Sender = s }))
		require.NoError(t, err)
		assert.Equal(t, dlqtool.ReplaySent, rep.Results[0].Outcome, "status %v", st)
		assert.Equal(t, "M-1", rep.Results[0].SentMsgID)

		rep, err = dlqtool.Replay(context.Background(), letters, r.opts(func(o *dlqtool.ReplayOptions) { o.Sender = s }))
		require.NoError(t, err)
		assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedReplayed: 1}, rep.Summary, "status %v", st)
		assert.Equal(t, 1, s.sent, "status %v: the stored replay is not sent again", st)
	}
}
