package dedup_test

import (
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// The duplicate's cause comes from the stored processed_event row, on the real database: the same message
// again (its MsgId is the row's) is a redelivery, a new message with the event ID is a resend, a new
// message carrying replay provenance is a replay. A replayed message that is itself redelivered is a
// redelivery: the row then holds the replay's MsgId.
func TestDuplicateCause_S1_S3_S5_RedeliveryResendReplay(t *testing.T) {
	f := newFixture(t)
	h := f.chain(t, f.ledger.Handler(handleOrderCreated))
	ev, order := f.prefix+"-e", f.prefix+"-1"

	first := f.orderMsg(t, ev, order)
	o, err := f.handle(h, first)
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)

	again := f.orderMsg(t, ev, order) // the same message, e.g. after a lost offset commit: same MsgId, ReconsumeTimes 0
	again.MsgId = first.MsgId
	resent := f.orderMsg(t, ev, order)
	replayed := f.orderMsg(t, ev, order)
	replayed.WithProperty(letter.PropReplayID, "replay-1")
	for want, msg := range map[string]*primitive.MessageExt{
		causelabel.Redelivery: again,
		causelabel.Resend:     resent,
		causelabel.Replay:     replayed,
	} {
		o, err := f.handle(h, msg)
		require.NoError(t, err)
		assert.Equal(t, consumer.KindDuplicate, o.Kind, "%s", want)
		assert.Equal(t, want, o.Cause)
	}

	// A replay of an event that never succeeded is processed; the same replayed message again is a redelivery.
	ev2 := f.prefix + "-e2"
	replay2 := f.orderMsg(t, ev2, f.prefix+"-2")
	replay2.WithProperty(letter.PropReplayID, "replay-2")
	o, err = f.handle(h, replay2)
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	o, err = f.handle(h, replay2)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, causelabel.Redelivery, o.Cause, "the row holds this replay's MsgId")
	assert.Equal(t, 1, f.ledger.Count(t, ev), "one effect per event")
	assert.Equal(t, 1, f.ledger.Count(t, ev2))
}
