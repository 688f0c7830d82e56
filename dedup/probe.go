package dedup

import (
	"context"
	"fmt"

	"github.com/rmqguard/rmqguard/internal/mysqlerr"
)

// Probe is the probe of the consumer's store health gate (consumer.WithHealthProbe): it returns nil only when the
// database answers and accepts writes to the store's processed-event table (WithTablePrefix). It runs one
// statement on a connection of its own, an UPDATE that matches no row (WHERE FALSE: it takes no lock and
// changes nothing), which a read-only server refuses with 1290 (or 1836) like any write. A connection that met
// a read-only server is closed, not returned to the pool. Errors are wrapped and honour ctx.
func (s *Store) Probe(ctx context.Context) error {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return fmt.Errorf("dedup: probe: connection: %w", err)
	}
	_, err = conn.ExecContext(ctx, s.q.probe)
	if mysqlerr.ReadOnly(err) {
		discard(conn)
	} else {
		_ = conn.Close()
	}
	if err != nil {
		return fmt.Errorf("dedup: probe: write check: %w", err)
	}
	return nil
}
