package redisfast_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F16 (done only after the commit): a delivery whose transaction rolls back (the handler failed) leaves
// no key, so its retry is handled, not answered as a duplicate; the retry's commit writes the key.
func TestF16_RolledBackDeliveryWritesNoDoneKey(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Minute)
	failed := false
	h := f.chain(t, func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		if !failed {
			failed = true
			return consumer.Outcome{}, errors.New("business write failed")
		}
		return consumer.Processed(), nil
	})
	ev := f.prefix + "-e"
	m := f.msg(ev)

	_, err := f.handle(h, m)
	require.Error(t, err)
	assert.Empty(t, f.keysOfTest(t), "no key for a rolled-back transaction")
	o, err := f.handle(h, m)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "the retry is handled")
	assert.Equal(t, []string{f.key(ev)}, f.keysOfTest(t))
	assert.Equal(t, 1, f.ledger.Count(t, ev))
}

// S8: a stale event (its STALE row written on its own after the rollback) gets a done key too: a later
// delivery is a duplicate from Redis, as it would be from MySQL.
func TestRedisFast_StaleEventGetsADoneKey(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Minute)
	h := f.chain(t, func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Stale("older than the stored version"), nil
	})
	ev := f.prefix + "-e"

	o, err := f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindStale, o.Kind)
	misses := f.obs.get("miss")
	o, err = f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, causelabel.Resend, o.Cause)
	assert.Equal(t, misses, f.obs.get("miss"), "answered by the done key")
	assert.Equal(t, 0, f.ledger.Count(t, ev), "a stale event writes nothing")
}
