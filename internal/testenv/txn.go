package testenv

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// WithTx returns ctx carrying tx as the dedup transaction of the message being handled, for unit tests of
// what only reads it (dedup.TxFromContext, dedup.AfterCommit): after-commit hooks are accepted and never
// run; any other method of the transaction panics.
func WithTx(ctx context.Context, tx *sqlx.Tx) context.Context {
	return txproto.WithTxn(ctx, txOnly{tx: tx})
}

// txOnly is the transaction of WithTx.
type txOnly struct {
	txproto.Txn // nil: the methods WithTx's users never call
	tx          *sqlx.Tx
}

func (t txOnly) SQLTx() *sqlx.Tx { return t.tx }

func (txOnly) AfterCommit(func(context.Context) error) error { return nil }
