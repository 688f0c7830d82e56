package dedup_test

import (
	"context"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/retry"
)

// S2: a claim that waits on the key of a transaction still open (a concurrent delivery of the same event)
// until the lock-wait timeout (1205, 1 s on this connection) is a transient retry: not acknowledged as a
// duplicate, not dead-lettered, no effect. Once the other transaction rolls back, the redelivery applies
// the event once.
func TestDedup_LockWaitTimeoutOnAClaimHeldByAnotherTransactionIsATransientRetry(t *testing.T) {
	f := newFixture(t)
	cfg, err := mysql.ParseDSN(testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = "1"
	short, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = short.Close() })
	impatient, err := dedup.NewStore(short)
	require.NoError(t, err)

	ev, order := f.prefix+"-e", f.prefix+"-1"
	ctx := context.Background()
	holder := testenv.NewDelivery(f.group, f.orderMsg(t, ev, order))
	holder.EventID = ev
	other, err := f.store.Protocol().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, f.store.Protocol().Claim(ctx, other, holder)) // uncommitted: holds the key

	f.store = impatient
	h := f.chain(t, handleOrderCreated)
	msg := f.orderMsg(t, ev, order)
	msg.ReconsumeTimes = 1
	d := testenv.NewDelivery(f.group, msg)
	d.MaxAttempts = 3
	o, err := h.Handle(ctx, d)
	res := testenv.AnswerTo(t, o, err)

	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, mysqlerr.ErLockWaitTimeout, me.Number)
	assert.NotErrorIs(t, err, dedup.ErrDuplicate)
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
	assert.Equal(t, consumer.KindRetry, o.Kind, "not a duplicate, not a dead letter")
	assert.Equal(t, rmq.ConsumeRetryLater, res.Result, "not acknowledged")
	orders, _ := f.effects(t)
	assert.Zero(t, orders)

	require.NoError(t, other.Rollback())
	f.requireOnceThenDuplicate(t, h, ev, order)
	orders, _ = f.effects(t)
	assert.Equal(t, 1, orders)
}
