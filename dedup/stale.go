package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
)

// RecordStale records that d's event was decided stale: it inserts d's processed_event row with
// result_status ResultStale (and no claim token) in a statement of its own, outside any transaction — call
// it after the event's transaction rolled back, so that nothing the handler wrote survives and only the
// decision is kept. A later delivery of the same event ID in the scope then claims a 1062 and is a
// duplicate (S7, F12). A 1062 here means the scope already has a row for the event (a concurrent delivery
// recorded or processed it first): the event is decided either way, so RecordStale returns nil. It
// returns the other errors of the insert, wrapped (a retry: the decision must be kept before the message
// is acknowledged), and rejects an empty or too long event ID as permanent, like Claim.
func (s *Store) RecordStale(ctx context.Context, d *consumer.Delivery) error {
	err := s.insertRow(ctx, s.db, d, ResultStale, "")
	if errors.Is(err, ErrDuplicate) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dedup: record stale: %w", err)
	}
	return nil
}
