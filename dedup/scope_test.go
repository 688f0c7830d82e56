package dedup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F24: with a dedup scope, a renamed group (a new consumer group name) finds the events its predecessor
// processed: duplicates, no second effect; the rows carry the scope, not either group.
func TestF24_RenamedGroupWithTheSameScopeAppliesNothingTwice(t *testing.T) {
	f := newFixture(t)
	scope := testenv.Unique("scope")
	store, err := dedup.NewStore(f.db, dedup.WithScope(scope))
	require.NoError(t, err)
	f.store = store
	var effects []string
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		effects = append(effects, d.Group+"/"+d.EventID)
		return consumer.Processed(), nil
	})
	ev := f.prefix + "-e"
	for _, g := range []struct {
		group string
		want  consumer.Kind
	}{{f.group, consumer.KindProcessed}, {f.group + "-v2", consumer.KindDuplicate}} {
		o, err := h.Handle(context.Background(), testenv.NewDelivery(g.group, f.orderMsg(t, ev, ev)))
		require.NoError(t, err)
		assert.Equal(t, g.want, o.Kind, g.group)
	}
	assert.Equal(t, []string{f.group + "/" + ev}, effects, "one effect")
	processed, err := store.Processed(context.Background(), scope, ev)
	require.NoError(t, err)
	assert.True(t, processed, "the row is keyed by the scope")
	assert.Equal(t, 0, f.dedupRows(t, ev), "not by the group")
}

func TestF24_InvalidScopeIsRefusedAtConstruction(t *testing.T) {
	db := businessDB(t)
	for _, scope := range []string{"", strings.Repeat("s", dedup.MaxGroupLength+1)} {
		_, err := dedup.NewStore(db, dedup.WithScope(scope))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WithScope")
	}
}
