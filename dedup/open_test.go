package dedup_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Open connects, migrates and returns a store whose transactions claim events: the one call of the README's
// minimal consumer.
func TestOpen_MigratesAndClaims(t *testing.T) {
	db := testenv.MySQL(t) // reachable, or skipped/failed per RMQGUARD_REQUIRE_SERVICES
	ctx := context.Background()
	store, err := dedup.Open(ctx, testenv.MySQLDSN(), dedup.WithTablePrefix("open_t_"))
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, table := range []string{"open_t_processed_event", "open_t_aggregate_version", "open_t_rmqguard_dedup_db_version"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
		}
	})

	d := &consumer.Delivery{Group: "open-test", EventID: testenv.Unique("open"),
		Msg: &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER"}}}
	txn, err := store.Protocol().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Protocol().Claim(ctx, txn, d))
	require.NoError(t, txn.Commit())
	var n int
	require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM open_t_processed_event WHERE event_id = ?", d.EventID))
	assert.Equal(t, 1, n, "the claim went to the prefixed table Open migrated")

	require.NoError(t, store.Close())
	_, err = store.Protocol().Begin(ctx)
	assert.Error(t, err, "Close closed the pools Open opened")
}

// Open's transactions run on a pool of their own (WithTxDSN(dsn)): a transaction in progress holds a
// connection of that pool, not of the pool Open reads through. A WithTxDSN given to Open takes its place.
func TestOpen_TransactionsRunOnAPoolOfTheirOwn(t *testing.T) {
	testenv.MySQL(t)
	ctx := context.Background()
	for name, opts := range map[string][]dedup.Option{
		"default":         nil,
		"WithTxDSN given": {dedup.WithTxDSN(testenv.MySQLDSN())},
	} {
		t.Run(name, func(t *testing.T) {
			store, err := dedup.Open(ctx, testenv.MySQLDSN(), opts...)
			require.NoError(t, err)
			defer store.Close()
			txn, err := store.Protocol().Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = txn.Rollback() }()
			assert.Equal(t, 1, store.Protocol().(txproto.Pooled).TxStats().InUse, "the transaction's connection")
			assert.Equal(t, 0, store.DB().Stats().InUse, "the pool Open reads through is not the transactions' pool")
		})
	}
}

// A wrong password fails Open at its connect step with the server's error; nothing is left open.
func TestOpen_WrongPasswordFailsAtConnect(t *testing.T) {
	testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	cfg.Passwd = "not-the-password"

	store, err := dedup.Open(context.Background(), cfg.FormatDSN())
	require.Error(t, err)
	assert.Nil(t, store)
	var myErr *mysql.MySQLError
	require.True(t, errors.As(err, &myErr), "the server's error is wrapped: %v", err)
	assert.EqualValues(t, 1045, myErr.Number)
	assert.Contains(t, err.Error(), "dedup: Open: connect")
}

// An empty DSN (an unset environment variable) is named as such, not as the server's access-denied error for an empty user.
func TestOpen_EmptyDSNIsNamed(t *testing.T) {
	_, err := dedup.Open(context.Background(), "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dsn is empty")
}

// An invalid option fails Open before it connects, naming the option.
func TestOpen_InvalidOptionNamesIt(t *testing.T) {
	_, err := dedup.Open(context.Background(), "u:p@tcp(127.0.0.1:1)/x", dedup.WithTablePrefix("Bad-Prefix"))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "WithTablePrefix"), err.Error())
	assert.NotContains(t, err.Error(), "connect")
}
