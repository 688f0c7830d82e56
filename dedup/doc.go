// Package dedup keeps the idempotency record of consumed events: one processed_event row per dedup
// scope (by default the consumer group) and business event ID, inserted in the same local transaction as
// the handler's business writes. The database's unique key, not an assumption that retries never overlap,
// settles concurrent deliveries. Rows older than the dedup window are removed by a Janitor or `rmqguard dedup purge`. The
// tables can carry a prefix (WithTablePrefix), so that several dedup schemas share a database.
//
// # Claims
//
// A claim's consumed_at is the database's clock in UTC (UTC_TIMESTAMP(6)), never the consumer host's, so
// that the retention window of a purge is measured on one clock whatever the session time zone. A claim
// that waits on the lock of a transaction holding the same key gets the 1062 when that one commits.
//
// # The transaction
//
// middleware.Dedup (and Lease, the batch paths, outbox) drive a store through its transaction protocol,
// which TxStore hands over (Protocol) and which only rmqguard's packages call: Begin a message's
// transaction, Claim its row, run the handler, Confirm the row, Commit; RecordStale, DuplicateCause and
// the batch and lease steps below are its other steps. The rules of each are here.
//
// A message's transaction runs on a connection of its own with autocommit off: when MySQL rolls the transaction back
// underneath the handler (a deadlock, 1213), statements the handler runs after that open a new transaction
// instead of committing one by one, so nothing is durable unless Commit succeeds. When the context given to
// Begin ends first (a handler past its deadline, perhaps abandoned by middleware.Timeout), the transaction is
// rolled back and the connection returned to the pool at once, not when the handler finally returns. A
// connection on which the transaction met a read-only server (MySQL 1290/1836/1792: a former primary after
// a failover) is closed, never handed back to the pool.
//
// Commit closes the connection when the server refused the commit as read-only. After a successful COMMIT
// it runs the AfterCommit hooks in order, with the context given to Begin (which may have ended by then); a
// hook that fails (an error, or a panic, recovered) is counted and logged, and Commit returns nil: the
// transaction committed, so the message must not be retried. A failed COMMIT (other than the message's own
// failure) leaves unknown whether the store kept it, so the message must be handled again once the store
// answers. A COMMIT whose answer was lost (the connection failed around it; not a refusal by the server) is
// decided by the rows it left: Commit reads one of the transaction's own rows back by its claim token (a
// locking read, which waits for a COMMIT the server is still working on), on the store's db with a context
// of its own bounded by 5 s, since the one given to Begin may have ended meanwhile. When the row is there
// the transaction committed, and Commit returns nil whatever the clock says. Only this failure path
// reads back.
//
// # The transaction's pool
//
// With WithTxDSN the transactions run on a pool of the store's own whose connections start with autocommit
// off, set once per connection rather than toggled twice per message, which db's pool cannot allow because
// the application's own statements on it must commit by themselves; and each connection remembers whether,
// since its last BEGIN, a statement failed or one that is not plain DML ran (the only ways a transaction
// ends underneath the handler), so that the dedup row is read back only then, not on the happy path.
// Together they save three round trips per message. Everything else the store does (RecordStale, Purge,
// Probe, …) stays on db, which is why NewStore refuses a dsn that reaches another server or database than
// db. The dsn's autocommit parameter (any case) is replaced by autocommit=0 and multiStatements is turned
// off: a query holding several statements could end the transaction while looking like plain DML, so on this
// pool it fails (MySQL 1064). On that pool a successful rollback to a savepoint is not a doubt unless there
// was one before it, so a batch with a failing member still commits without a SELECT.
// The pool dials its connections itself (a network the driver has a dial registered for keeps it): a
// statement whose context can end is handed to the driver without the context's cancellation, and the
// connection interrupts it when the context ends, with the driver's effect (the statement fails with the
// context's error, the connection is discarded, MySQL rolls the transaction back) but without the driver's
// two goroutine hand-offs per statement that watching a context costs.
//
// # Pools
//
// Without a pool of its own the store's transactions take db's connections: once each holds one, a handler
// that takes a second connection from db (a read outside its transaction) waits until its deadline, and so
// does every other one: consumption stalls and healthy messages spend attempts. CheckConcurrency reads
// db.Stats().MaxOpenConnections when called; orderly consumption runs one handler per queue it holds, so
// it needs db unbounded. consumer.New and Start call CheckConcurrency with the most handlers they run at
// once, for a chain built by middleware.Chain or Standard around the store and for the store given to
// consumer.WithHealthProbe. Other code that holds db's connections (another consumer on the same store, the
// application's own) is not counted: give the store a pool of its own then.
//
// # Duplicates
//
// DuplicateCause reads the stored processed_event row (on the duplicate path only):
//
//   - "redelivery" when the row's msg_id is the message's ID: the same message again (a lost
//     offset commit, a consume-timeout resend, a rebalance, a retried batch; the client's MsgId is the
//     producer's UNIQ_KEY, kept across redeliveries);
//   - "replay" when the message carries replay provenance (the RMQGUARD_REPLAY_ID property): `rmqguard dlq
//     replay` sent it, with a new message ID;
//   - "resend" otherwise: a new message carrying an event ID already processed (the producer
//     sent the event again).
//
// # Stale events
//
// RecordStale keeps only the decision: its row has no claim token and is inserted after the event's
// transaction rolled back, so that nothing the handler wrote survives. As for a message's own transaction,
// the INSERT ends with ctx (nothing commits then) but a COMMIT once sent is waited for even when ctx ends
// meanwhile: the row is there exactly when RecordStale returns nil, so a deadline never turns a recorded
// decision into a failure. A later delivery of the same event ID in the scope then claims a 1062 and is
// a duplicate. A 1062 in RecordStale means the scope already has a row for the event (a concurrent
// delivery recorded or processed it first, while this one decided): middleware.Dedup then reports this
// delivery as a duplicate, so that one event counts as stale once. Its other errors are a retry: the decision
// must be kept before the message is acknowledged. The store's own failures — no connection, a connection
// lost, a read-only server — are not the message's failure, so no attempt is spent on them. It runs on a
// connection of its own, which is closed, not returned to the pool, when it met a read-only server.
//
// # Versions
//
// AggregateVersion is one statement: INSERT … ON DUPLICATE KEY UPDATE version = LAST_INSERT_ID(version). For
// a new aggregate it inserts a placeholder row at version 0 (AdvanceAggregate moves it; a rollback removes
// it; a row left at 0 means "no version"); for a known one it locks the row and returns its version through
// LAST_INSERT_ID (the statement's insert ID: 0 when a row was inserted). A locking read (SELECT … FOR UPDATE)
// would be the plain way, but on a missing row it takes a gap lock in REPEATABLE READ, and first events of
// different new aggregates then deadlock on their inserts (measured: most of 16 at once); inserting takes no
// gap lock, and two first events of one new aggregate wait for each other instead.
//
// # Transitions
//
// Transition runs
//
//	UPDATE table SET status = To, version = Version [, Set columns]
//	WHERE key = Key AND version = Version-1 AND status IN (From…)
//
// One row changed is TransitionApplied: one round trip on the happy path. Zero rows is never success: one
// SELECT … FOR UPDATE of the row then tells TransitionStale (its version ≥ Version), TransitionAhead (its
// version < Version-1), TransitionIllegal (its version is Version-1, its status not in From) or
// TransitionMissing (no row). An invalid Transition (nil Key, no From or an empty one, empty To, Version < 1,
// a bad, reserved or twice named Set column) is a programming error in the handler: retry.Permanent, so that
// the message goes to the dead-letter queue instead of looping. Database errors classify as the retry
// package says (1213, 1205: transient). A row that changed between the UPDATE and the SELECT (possible under
// READ COMMITTED) is retry.Transient: retry the event.
//
// # Actions
//
// A 1062 on an action's KeyName means its row exists, so its effect does too. MySQL rolls back only the
// failed statement and keeps the transaction open, so the handler carries on (and commits its dedup row)
// while applying nothing. The database's unique key settles a race: with InnoDB, a second transaction
// inserting the same id waits for the first; if the first commits, the second gets the 1062 (already
// applied); if it rolls back, the second's insert goes through (applied). So a message and a compensation
// job handling one action give one effect. A 1062 on another unique key of the table (or one whose key
// MySQL does not name) is not this action's row, and comes back as an error.
//
// # Typed handlers
//
// The body is decoded inside the dedup transaction, after the claim: a duplicate is acknowledged without
// decoding, and a body the codec cannot decode (for JSON also an empty body and null) is dead-lettered at
// once (consumer.KindDeadLetter, "permanent"). A dead letter is not a success, so the
// transaction rolls back and no processed_event row is kept; a redelivery of the message is dead-lettered
// the same way, never retried endlessly.
//
// # Batches
//
// ClaimBatch writes ds's rows as Claim writes them; sorted by scope and event ID, concurrent batches lock
// their claims in one order. A member is a duplicate when its scope already has a committed row for the
// event (after waiting for a transaction that held it), or an earlier member carries the same event. Telling
// them apart costs no failed statement: when some but not all rows went in, one SELECT of the rows carrying
// the transaction's token tells which are its own. A member IGNORE would store altered (a field not valid
// UTF-8 or longer than its column) is refused before any statement, so that Claim decides it alone.
//
// In a batch's first pass (consumer.Config.BatchSize > 1), where middleware.Dedup runs the members' chains
// after the last member, a HandleBatch handler runs once, in the batch's transaction, with the batch's new
// deliveries (duplicates left out) in the order the chains reached it; when a delivery's outcome is not
// processed (or a duplicate), or the handler fails, the batch is handled again carefully, calling it with one
// delivery at a time inside that member's savepoint, so that the failing member alone is retried or
// dead-lettered. Its context there is the batch's (deadline HandlerTimeout × members).
//
// # After-commit hooks
//
// An AfterCommit hook is for effects that must not happen unless the business writes did and whose loss is
// acceptable, such as invalidating a cache. It never runs when the transaction rolls back (an error, a retry,
// a stale event, a lost claim, a failed or abandoned commit), nor for a duplicate (the handler does not run).
// It runs at most once per commit, in the consumer's goroutine before the message is acknowledged, with the
// handler's context; it is not exactly-once: a crash between COMMIT and the hook loses it, and the
// redelivery is then a duplicate that does not run it again. A hook that returns an error or panics has
// lost its effect; each failure is logged at error level with the event ID, whatever the logger's sampling.
//
// # Leases
//
// A lease row is taken over when its lease has expired: its holder died or gave up, it never committed; the
// takeover is a conditional UPDATE, and Takeover reports true for the handler of the delivery that took it over.
// Lease times are on the database's UTC clock; a claim whose COMMIT's answer was lost is decided by the lease
// row it left (read back by its token). A missing lease table (the schema before migration 00005) names the
// fix and is marked infrastructure, so consumption pauses instead of spending attempts.
//
// # Purging
//
// A purge (a Janitor's, or `rmqguard dedup purge`) reads each batch's primary keys with a plain (non-locking) SELECT on the (consumer_group,
// consumed_at) index, then deletes those keys, repeating the consumed_at condition, in a READ COMMITTED
// transaction of its own (record locks on those rows only, no gap locks), so claims running meanwhile do not
// wait on it beyond one batch, and a row claimed again since is kept. The lease rows it deletes afterwards
// (lease mode, the event_lease table, lease_until before the cutoff) are the traces of runs that died and
// whose message did not come back within the window.
//
// # Table names
//
// WithTablePrefix(p) names the tables p + "processed_event", p + "aggregate_version", p + "event_lease"
// (lease mode) and p + "rmqguard_dedup_db_version" (the migrations' version table), so that the same event ID
// is processed once in each schema. The CLI takes it as `rmqguard dedup purge --table-prefix`. The names must
// not start with a digit (see WithTablePrefix). CheckSchema's key check passes a binary type or a _bin collation
// such as utf8mb4_bin, which migration 00001 uses.
package dedup
