package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dupcause"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// DuplicateCause tells why d, whose Claim returned ErrDuplicate, came again: "redelivery",
// "replay" or "resend" (the package doc, "Duplicates"), read from the stored row in txn with one
// SELECT. It returns an error, wrapped, when the row cannot be read (the query fails, or the row was purged
// since); the caller then leaves the cause empty, reported as "unknown".
func (s storeProtocol) DuplicateCause(ctx context.Context, pt txproto.Txn, d *consumer.Delivery) (string, error) {
	txn, err := local(pt)
	if err != nil {
		return "", err
	}
	scope := s.scopeOf(d)
	var msgID string
	err = txn.Tx.GetContext(ctx, &msgID, s.q.cause, scope, d.EventID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("dedup: duplicate cause scope %s event %s: the row is gone: %w", scope, d.EventID, err)
	}
	if err != nil {
		return "", fmt.Errorf("dedup: duplicate cause scope %s event %s: %w", scope, d.EventID, err)
	}
	return dupcause.Of(msgID, d), nil
}

// DuplicateCauses is DuplicateCause for several duplicates together, a batch's: one SELECT of their rows on
// the store's pool, outside any transaction. Call it once the batch's transaction has ended, so that it reads
// every committed row (a row that a concurrent transaction committed after the batch's first read would be
// hidden from a read inside the batch's transaction). causes[i] is ds[i]'s cause (as DuplicateCause gives it),
// "" when its row is not there (purged since, or a row of the batch's own that rolled back). An empty ds costs
// nothing. It returns the query's error, wrapped.
func (s storeProtocol) DuplicateCauses(ctx context.Context, ds []*consumer.Delivery) ([]string, error) {
	causes := make([]string, len(ds))
	if len(ds) == 0 {
		return causes, nil
	}
	var q strings.Builder
	q.WriteString(s.q.causesHead)
	args := make([]any, 0, 2*len(ds))
	for i, d := range ds {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, s.scopeOf(d), d.EventID)
	}
	q.WriteString(")")
	var rows []struct {
		Scope   string `db:"consumer_group"`
		EventID string `db:"event_id"`
		MsgID   string `db:"msg_id"`
	}
	if err := s.db.SelectContext(ctx, &rows, q.String(), args...); err != nil {
		return nil, fmt.Errorf("dedup: causes of %d duplicates: %w", len(ds), err)
	}
	stored := make(map[[2]string]string, len(rows))
	for _, r := range rows {
		stored[[2]string{r.Scope, r.EventID}] = r.MsgID
	}
	for i, d := range ds {
		if msgID, ok := stored[[2]string{s.scopeOf(d), d.EventID}]; ok {
			causes[i] = dupcause.Of(msgID, d)
		}
	}
	return causes, nil
}
