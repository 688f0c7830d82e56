package dedup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

func TestStates_LoadVersionReadsTheRowOrZero(t *testing.T) {
	db := testenv.MySQL(t)
	s, table := orderStates(t, db)
	_, err := db.Exec("UPDATE " + table + " SET version = 7 WHERE order_no = 'o-1'")
	require.NoError(t, err)
	tx, err := db.Beginx()
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	v, err := s.LoadVersion(context.Background(), tx, "o-1")
	require.NoError(t, err)
	assert.EqualValues(t, 7, v)
	v, err = s.LoadVersion(context.Background(), tx, "o-404")
	require.NoError(t, err)
	assert.EqualValues(t, 0, v, "a missing row is version 0")
}

func TestTransitionOutcome_MapsEachResult(t *testing.T) {
	for r, want := range map[dedup.TransitionResult]consumer.Kind{
		dedup.TransitionApplied: consumer.KindProcessed,
		dedup.TransitionStale:   consumer.KindStale,
		dedup.TransitionIllegal: consumer.KindDeadLetter,
		dedup.TransitionAhead:   consumer.KindRetry,
		dedup.TransitionMissing: consumer.KindRetry,
	} {
		o, err := dedup.TransitionOutcome(r, nil)
		require.NoError(t, err)
		assert.Equal(t, want, o.Kind, r.String())
		assert.Zero(t, o.DelayLevel, r.String())
	}
	boom := errors.New("boom")
	o, err := dedup.TransitionOutcome(dedup.TransitionApplied, boom)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, consumer.Kind(0), o.Kind, "an error never comes with a success")
}
