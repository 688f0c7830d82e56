package dedup

import "fmt"

// CheckConcurrency returns an error when handlers transactions of the store at once could take every
// connection of the application's pool: the store has no pool of its own (no WithTxDSN, which Open gives)
// and db is bounded (db.Stats().MaxOpenConnections, read now) to handlers connections or fewer, or to any
// number when handlers is 0 (not bounded: orderly consumption runs one handler per queue it holds). A
// handler that then takes a second connection from db (a read outside its transaction) waits until its
// deadline, and so does every other one: consumption stalls and healthy messages spend attempts. The
// error names the fix: a pool of its own (dedup.Open, or WithTxDSN), or a larger or unbounded db.
// consumer.New and Start call it with the most handlers they run at once, for a chain built by
// middleware.Chain or Standard around the store and for the store given to consumer.WithHealthProbe. Other
// code that holds db's connections (another consumer on the same store, the application's own) is not
// counted: give the store a pool of its own then.
func (s *Store) CheckConcurrency(handlers int) error {
	if s.txdb != nil || s.db == nil { // a pool of its own; or a Store not made by NewStore, which has no pool
		return nil
	}
	limit := s.db.Stats().MaxOpenConnections
	if limit == 0 || (handlers > 0 && limit > handlers) {
		return nil
	}
	runs := fmt.Sprintf("up to %d handlers at once", handlers)
	need := fmt.Sprintf("db.SetMaxOpenConns(%d) or more (0: unbounded)", handlers+1)
	if handlers <= 0 {
		runs = "a number of handlers at once that the consumer's Config does not bound"
		need = "db.SetMaxOpenConns(0) (unbounded)"
	}
	return fmt.Errorf("dedup: the store runs its transactions on db's pool (no WithTxDSN), bounded to %d connections "+
		"(MaxOpenConns), with %s: when each holds one, a handler that takes a second connection from db waits until its "+
		"deadline, and so does every other; give the store a pool of its own (dedup.Open(ctx, dsn), or "+
		"dedup.NewStore(db, dedup.WithTxDSN(dsn))), or %s", limit, runs, need)
}
