package dedup

import (
	"context"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
)

// RecordStale records that d's event was decided stale: it inserts d's processed_event row with
// result_status ResultStale (and no claim token) in a statement of its own, outside any transaction — call
// it after the event's transaction rolled back, so that nothing the handler wrote survives and only the
// decision is kept. A later delivery of the same event ID in the scope then claims a 1062 and is a
// duplicate (S7, F12). A 1062 here means the scope already has a row for the event (a concurrent delivery
// recorded or processed it first, while this one decided): RecordStale then returns an error wrapping
// ErrDuplicate, and middleware.Dedup reports this delivery as a duplicate, so that one event counts as
// stale once. It returns the other errors of the insert, wrapped (a retry: the decision must be kept
// before the message is acknowledged), and rejects an empty or too long event ID as permanent, like Claim.
func (s *Store) RecordStale(ctx context.Context, d *consumer.Delivery) error {
	if err := s.insertRow(ctx, s.db, d, ResultStale, ""); err != nil {
		return fmt.Errorf("dedup: record stale: %w", err)
	}
	return nil
}
