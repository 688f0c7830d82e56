package dedup

import "fmt"

// CheckConcurrency is the store's own check of the protocol (Store.CheckConcurrency).
func (s storeProtocol) CheckConcurrency(handlers int) error {
	return s.Store.CheckConcurrency(handlers)
}

// CheckConcurrency returns an error, naming the fix (dedup.Open or WithTxDSN, or a larger or unbounded db),
// when handlers transactions at once could take every connection of db: the store has no pool of its own and
// db is bounded to handlers connections or fewer, or to any number when handlers is 0 (unbounded). consumer.New
// and Start call it, on the chain's store and on a WithHealthProbe store (the package doc, "Pools").
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
