package dedup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
)

// Review 9 (issue 8, batch mode): attacks on the shared batch transaction through the consumer's real
// callback on the real test database.

// A panic in member 2's handler, with Recover outside Dedup as the recommended chain has it, must undo
// member 2's claim and writes like any other failure: the other members still commit, but member 2's
// processed_event row must not commit without its effect (the handler never finished), else its
// redelivery is a duplicate and the event is lost.
func TestReview9_Batch_PanicInMemberRollsBackItsClaim(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	boom := true
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-half"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e2 && boom {
			boom = false
			panic("member 2 panics half-way")
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, "", f.status(t, e2), "the panicking member's claim must not commit")
	assert.Equal(t, 0, f.ledger.Count(t, e2+"-half"), "the panicking member's half-done write must not commit")
	assert.Equal(t, "SUCCESS", f.status(t, e1))
	assert.Equal(t, "SUCCESS", f.status(t, e3))

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// A handler's own SAVEPOINT may carry any name; one that happens to be the batch's name for the member's
// savepoint (rmqguard_sp<N>, documented and predictable) moves it past the member's claim, so that the
// member's ROLLBACK TO SAVEPOINT on failure keeps its claim and the writes before it, and COMMIT makes
// them durable: a failed message whose redelivery is a duplicate. The batch's savepoint names must not be
// a handler's to take.
func TestReview9_Batch_HandlerSavepointOfTheSameNameKeepsAFailedClaim(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	fail := true
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-before"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e2 && fail {
			fail = false
			// The handler's own savepoint, for its own partial undo; its name is the member's.
			if _, err := tx.ExecContext(ctx, "SAVEPOINT rmqguard_sp2"); err != nil {
				return consumer.Outcome{}, err
			}
			return consumer.Outcome{}, errors.New("member 2 fails after its own savepoint")
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, "", f.status(t, e2), "the failed member's claim must not commit")
	assert.Equal(t, 0, f.ledger.Count(t, e2+"-before"), "the failed member's write must not commit")

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

var _ = time.Second
