package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
)

// DuplicateCause tells why d, whose Claim returned ErrDuplicate, came again, by reading the stored
// processed_event row in txn (one SELECT, on the duplicate path only):
//
//   - consumer.CauseRedelivery when the row's msg_id is d's message ID: the same message again (a lost
//     offset commit, a consume-timeout resend, a rebalance, a retried batch; the client's MsgId is the
//     producer's UNIQ_KEY, kept across redeliveries);
//   - consumer.CauseReplay when d carries replay provenance (consumer.PropReplayID): `rmqguard dlq replay`
//     sent it, with a new message ID;
//   - consumer.CauseResend otherwise: a new message carrying an event ID already processed (the producer
//     sent the event again).
//
// It returns an error, wrapped, when the row cannot be read (the query fails, or the row is gone: purged
// since); the caller then leaves the cause to the consumer's guess (consumer.Decision).
func (s *Store) DuplicateCause(ctx context.Context, txn *Txn, d *consumer.Delivery) (consumer.Cause, error) {
	scope := s.Scope(d)
	var msgID string
	err := txn.Tx.GetContext(ctx, &msgID, s.q.cause, scope, d.EventID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("dedup: duplicate cause scope %s event %s: the row is gone: %w", scope, d.EventID, err)
	}
	if err != nil {
		return "", fmt.Errorf("dedup: duplicate cause scope %s event %s: %w", scope, d.EventID, err)
	}
	return CauseOf(msgID, d), nil
}

// CauseOf is the cause of duplicate d whose event was processed from the message storedMsgID (the
// processed_event row's msg_id, or what a fast path kept of it): consumer.CauseRedelivery when it is d's
// message ID, consumer.CauseReplay when d carries replay provenance, consumer.CauseResend otherwise (see
// Store.DuplicateCause).
func CauseOf(storedMsgID string, d *consumer.Delivery) consumer.Cause {
	switch {
	case storedMsgID == d.Msg.MsgId:
		return consumer.CauseRedelivery
	case d.Msg.GetProperty(consumer.PropReplayID) != "":
		return consumer.CauseReplay
	default:
		return consumer.CauseResend
	}
}
