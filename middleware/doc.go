// Package middleware holds Chain and rmqguard's standard middlewares. A typical chain, outermost first:
//
//	Metrics → Recover → Classify → EventID → Deadline → Dedup → [Version] → business handler
//
// Metrics sees the chain's outcome of each run (the consumer then reports each message's final decision,
// after a batch is combined and dead letters are published, to its Observer and, in one line per message,
// to its log: consumer.WithLogger); Logging, a debug-only trace of each run, goes right after Metrics when
// wanted; Recover turns a panic anywhere inside into a retry;
// Classify turns errors into retry or dead-letter outcomes; EventID finds the idempotency key;
// Deadline reports a run that outlived the consumer's HandlerTimeout (or a shorter deadline of its own)
// without a commit as a timeout, inline — Timeout, in its place, only for handlers that ignore their context, at a goroutine per
// message; Dedup runs the handler in one transaction with the dedup row; Version,
// where events carry aggregate versions, turns away stale events inside that transaction. Standard builds
// this chain in one call; Chain refuses a wrong order of these middlewares when it builds a chain.
//
// # Chain rules
//
// Chain wraps h in mws; the first middleware is the outermost, so Chain(h, a, b) runs a, then b, then h.
//
// It checks the chain once, at build time, knowing rmqguard's standard middlewares by their Middleware's kind (never
// calling them), and returns an error wrapping ErrChainOrder that says what to move or add where for:
//   - Dedup without EventID before it (Dedup needs the event ID EventID sets);
//   - Version without Dedup before it (Version runs inside the dedup transaction);
//   - Timeout outside Recover. Timeout recovers a panic on its own goroutine itself and returns it as a
//     *PanicError, so none escapes either way; the rule keeps Recover, which logs each panic once with the
//     handler's stack, on the consumer's goroutine around Timeout and whatever sits between them, as in the
//     recommended order (a Recover inside Timeout runs on Timeout's per-message goroutine);
//   - Timeout inside Lease (Lease would end its lease when Timeout answers, the handler still running);
//   - Dedup without Classify before it (without it, a permanent error, e.g. MySQL 1406 or an undecodable
//     body, would be retried on every delivery, then dead-lettered by the broker without its reason; inside
//     Dedup, it never sees Dedup's own store errors, so a store outage spends attempts instead of pausing
//     consumption as consumer.Unavailable);
//   - a handler made by dedup.Handle (dedup.IsTxHandler) without Dedup in the chain;
//   - a standard middleware twice (Deadline and Timeout count as one, so do Dedup and Lease: Lease, Dedup in
//     lease mode, is held to every rule above that names Dedup), except Version: each checks only its
//     VersionConfig.EventTypes, so a chain may hold one Version per aggregate type, all after Dedup.
//
// A nil h or a zero Middleware is an error wrapping ErrNilDependency. A wrong chain, one that no chain
// around it can mend (a middleware twice, a needed middleware present but inside the one needing it,
// Timeout outside Recover), is Chain's error. An incomplete chain, one that only lacks EventID,
// Classify or Dedup, which a chain around it may provide, comes back pending (internal/pending): it
// runs, but consumer.New given it fails with err ("consumer.New: handler: …"), as for a wrong chain. A
// Chain given such a pending h checks its mws and h's middlewares as one chain (positions counted over
// both, outermost first; "in the inner chain" marks h's) and wraps h's chain without the pending layer:
// complete, it is an ordinary handler; so Chain(Chain(txH, Dedup(store)), Recover(nil), Classify(),
// eventID) is accepted, and a Chain in a router's branch may leave to the chain around the router what
// every branch needs. A branch hidden from consumer.New (called by your own handler) that no chain
// completes runs incomplete: build each branch complete. A refused h (dedup.Handle(nil), Dedup's or Lease's
// Wrap(nil)), or a pending one not made by Chain (even one whose error wraps a Chain's),
// makes its error Chain's. A complete h is not inspected: its middlewares are
// not counted with mws. Other middlewares are allowed anywhere and are not called by the check; a chain
// composed by hand (mw.Wrap(h)) is not checked. A complete chain costs nothing more per message than the
// wrapped middlewares; a pending one, one call and a nil check more until an outer Chain unwraps it.
//
// A chain whose Dedup store has a concurrency check (the store's CheckConcurrency, forwarded by
// dedup/redisfast's layer), also one an outer Chain completes, comes back pending with that check as its
// condition: it is not refused, but consumer.New and Start refuse a store whose
// transactions could hold every connection of the application's pool the handlers also use, naming the
// fix; New then runs the chain without the pending layer. An outer Chain given such a complete chain, or a
// chain composed by hand, does not see the check: pass the store to consumer.WithHealthProbe as well.
//
// # Standard
//
// Standard returns h in rmqguard's recommended chain, outermost first:
//
//	Metrics (if cfg.Metrics != nil) → Recover(cfg.Logger) → Classify → EventID(cfg.EventID) → Deadline(0) →
//	Dedup(cfg.Store) → Version(cfg.Version, if set) → h
//
// The result is exactly Chain(h, that list): copy the list into Chain to change it. A bad EventID or
// Version config, a nil Store or nil h is an error naming the fix; Version's construction checks the aggregate_version table (see Version). A
// Store on the application's pool (no dedup.WithTxDSN) is checked by consumer.New against the handlers it
// runs at once (see Chain).
//
// # Recover
//
// Recover turns a panic inside the chain into a retry: the outcome is consumer.Retry (Cause
// "panic") and the error is a
// *PanicError (wrapping ErrPanic) with the panic value. It logs one error-level line per panic with group,
// topic, msg_id, the panic value and the panicking goroutine's stack (field "stack"): for a panic it
// recovers itself, and for a *PanicError returned from inside (middleware.Timeout recovers the panics of
// its own goroutine and returns them so). The stack is written once: Recover turns off zap's automatic
// "stacktrace" on its logger (zap's production config adds one at error level, Recover's own frames,
// not the handler's). On the message's last delivery the panic's outcome is the dead letter Classify would
// make ("retries exhausted after N deliveries: panic", Cause "panic"), since Classify, inside Recover in the
// recommended order, never sees the panic. The consumer then logs the message's decision without a stack. A transaction opened inside is rolled back by the middleware that
// opened it (deferred rollback). A nil log is zap.NewNop(): panics are still recovered, not logged. A
// handler that Dedup runs in a batch's first pass (after the chain returned) panics outside Recover: the
// consumer logs that panic at warn (consumer.WithLogger), and Recover the careful pass's, if it recurs.
//
// # Classify
//
// Classify turns an error from the rest of the chain into an outcome with retry.Classify:
//
//   - permanent → consumer.DeadLetter (to %DLQ%<group> at once, the error as its reason);
//   - infrastructure (the store is down or unwritable) → consumer.Unavailable, on every delivery, the
//     last one included: the consumer pauses consumption and handles the message again when the store
//     is back, without spending an attempt (an attempt is spent only by the message's own failure);
//   - transient or unknown → consumer.Retry, keeping a delay level the inner outcome asked for.
//
// Dead letters carry a reason class in Outcome.Cause (an inner dead letter without one gets it from its
// error): unidentifiable (an error wrapping ErrUnidentifiable) or permanent; on the last delivery panic, timeout (the retry's cause, or an error wrapping ErrPanic or
// context.DeadlineExceeded) or exhausted.
//
// On the last delivery (Delivery.LastAttempt) a retry — asked for, from an error, or the zero Outcome —
// becomes consumer.DeadLetter with the reason "retries exhausted …", so that the dead letter is counted and
// carries its reason instead of being moved to the DLQ silently by the broker; except when ctx was
// cancelled (the consumer is shutting down: the message is not answered and comes back as it was). The
// error is passed on for logging; an outcome already set to dead letter or unavailable is kept; a success
// without error is unchanged.
//
// # Deadline and Timeout
//
// Deadline gives the rest of the chain a context deadline d after the message reaches it (or keeps the
// parent's, the consumer's Config.HandlerTimeout, when that is earlier) and runs it inline, on the
// consumer's goroutine: no goroutine and no allocation per message beyond the context's own (none when the
// parent's deadline is the earlier one: the parent's context is passed on as it is). It is the
// deadline for handlers that honour their context — Dedup's transaction and every database/sql call made
// with ctx end when it passes (database/sql rolls the transaction back), so the handler returns at once.
// With d ≤ 0 it sets no deadline of its own and watches the parent's: Deadline(0) is the recommended form,
// the consumer's Config.HandlerTimeout then being the one deadline.
//
// An outcome whose transaction committed (consumer.Outcome.Committed on an outcome that acknowledges the
// message: Dedup's COMMIT answered after the deadline or the cancellation) passes through unchanged: a
// committed transaction is never a timeout.
// When the chain returns anything else after a deadline fired, the outcome is a retry with Cause
// "timeout" and the reason "handler timeout"; the error wraps context.DeadlineExceeded and names
// the deadline that fired: "middleware.Deadline(<d>)", or the parent context's (the consumer's
// HandlerTimeout) with the time it had left when the message reached Deadline. The handler's own error, if
// any, is kept as text only, so a late error cannot change how the message is classified. When the parent
// was cancelled (the consumer is stopping) the outcome is a retry "handler cancelled" and the error wraps
// context.Canceled. Results returned before any deadline pass through unchanged.
//
// A handler that ignores its context keeps the consumer's goroutine until it returns; Timeout returns at the
// deadline instead, at the price of a goroutine per message. A panic inside propagates, with the handler's
// stack, to Recover.
//
// Timeout is the deadline only for handlers that ignore their context: it runs the rest of the chain on a
// goroutine of its own (one per message) and returns at the deadline even if the handler has not. Handlers
// that honour their context (Dedup and database/sql calls made with ctx do) need only the consumer's
// Config.HandlerTimeout, or Deadline, which costs no goroutine.
//
// It gives the rest of the chain a context deadline d (or keeps the parent's, the consumer's HandlerTimeout,
// when that is earlier). When a deadline passes first, the outcome is a retry (Cause "timeout",
// reason "handler timeout") and the error wraps context.DeadlineExceeded and names the deadline that fired:
// "middleware.Timeout(<d>)", or the parent context's with the time it had left when the message reached
// Timeout. When the parent is cancelled first (the consumer is stopping), the outcome is a retry "handler
// cancelled" wrapping context.Canceled. A transaction begun with that context is rolled back by
// database/sql when the deadline passes, so nothing the late handler writes can commit; and a Dedup inside
// Timeout that decided before the deadline (its COMMIT sent, a duplicate found) is waited for instead: its
// answer decides, so a committed transaction is never reported as a timeout (see commit.go). The late
// handler's goroutine ends when the handler returns; handlers must not modify the Delivery. A panic in the
// inner chain is recovered on the handler's goroutine and returned as a *PanicError (wrapping ErrPanic)
// that carries that goroutine's stack, for Recover to log. With d ≤ 0 only the parent's deadline applies,
// still enforced. In a batch (consumer.Config.BatchSize > 1) the members share a transaction begun with the
// batch's context instead, and Dedup loses it when a member was abandoned still running, so nothing commits
// then either. Chain refuses Timeout outside Recover, and Timeout together with Deadline.
//
// # Dedup
//
// Dedup runs the rest of the chain inside one local transaction that first inserts the message's
// processed_event row, keyed by the store's dedup scope (the consumer group unless dedup.WithScope names
// another) and the event ID. The transaction is in the context (dedup.TxFromContext; use dedup.Handle for
// a typed handler), and so is its after-commit list (dedup.AfterCommit: run once after the commit only). It commits only when the handler returns consumer.Processed (or
// consumer.Duplicate, its own finding that the effect exists) without error; otherwise it rolls back,
// releasing the key. A consumer.Stale outcome without error (from Version, or the handler's own finding)
// rolls the transaction back too — the event writes nothing, even what the handler wrote before deciding —
// and then records the decision: a processed_event row with result_status "STALE" in a transaction
// of its own (the store's RecordStale), so that a later delivery of the event is a duplicate, not a second
// stale; if that insert fails, the error is returned (a retry, or Unavailable through Classify when the store
// failed: the store's RecordStale marks that). The processed path costs no extra
// statement. An event ID the scope already processed is a consumer.Duplicate and the handler
// does not run; its Cause (redelivery, resend or replay) comes from the stored row (the store's DuplicateCause,
// one SELECT on the duplicate path only). A failed begin, claim or commit is returned as an error (a retry): a message is never
// acknowledged unless its row committed (a COMMIT whose answer is lost is decided by reading its row back,
// the transaction's Commit; an error when that read cannot tell, never a guess).
// The outcome of a committed transaction (processed, a recorded stale) and of a duplicate (its row
// committed earlier) carries consumer.Outcome.Committed, so that a deadline that passed while the store
// answered (Deadline, Timeout) keeps it instead of reporting a timeout (see commit.go). Before committing
// it checks that the transaction still holds its row (the store's Confirm): a deadlock inside the handler
// rolls the whole transaction back, and a handler that retried its statement would otherwise commit the
// effect without the row. On a store with its own
// transaction pool (dedup.WithTxDSN) that check reads the row back only when a statement of the
// transaction failed or was not plain DML, so a processed message costs BEGIN, the claim, the handler's
// writes and COMMIT. The Delivery must carry
// an EventID (put EventID before Dedup).
//
// store is any dedup.TxStore: a *dedup.Store, or a fast-path layer wrapping one. Before Begin, Dedup asks
// the store whether the event is done; an event the store knows is done is a consumer.Duplicate without a transaction (with the
// cause the store knows, or none: the consumer then reports "unknown"). *dedup.Store never
// knows (no round trip).
//
// In a batch (consumer.Config.BatchSize > 1; consumer's package doc, "Batch") the members of one callback share
// one transaction instead, committed once after the last: the first pass claims them in one statement and
// runs their handlers after the last member, in aggregate order, without savepoints (dedup_deferred.go);
// a member not kept makes the consumer handle the batch again carefully, a SAVEPOINT per member
// (dedup_batch.go). dedup.HandleBatch handles a batch's new members in one call.
//
// A nil store (nil, or a nil *dedup.Store left by a failed dedup.NewStore) is an error wrapping
// ErrNilDependency. Dedup applied by hand to a nil handler is refused (consumer.New fails naming it). A store with a concurrency check (a *dedup.Store) makes
// Chain's chain checked by consumer.New (see Chain).
//
// # Lease
//
// Lease is Dedup in lease mode (claim first), for a handler whose external call must happen before the
// commit because its answer is written (charge a card, store the charge ID) and which the other side cannot
// dedup. Before the handler runs, a lease of duration lease on the event is committed (the store's ClaimLease);
// the handler's transaction then deletes it with its processed_event row and business writes, so "done"
// commits exactly with them. Put it where Dedup goes (Chain treats it as Dedup: EventID and Classify before
// it, Version after it; it serves dedup.Handle handlers), never both. Per delivery:
//   - another delivery holds a live lease (its handler is running, or died less than lease ago): a retry
//     with cause "lease_held" at the broker delay level covering lease (on a default broker:
//     1s 5s 10s 30s 1m … 2h), never acknowledged; the handler does not run;
//   - the lease expired without a commit (its holder died): this delivery takes it over by a conditional
//     UPDATE and dedup.Takeover(ctx) reports true to the handler, which should ask the other side whether
//     the call happened before calling again; the processed outcome carries "takeover"
//     (rmqguard_lease_takeovers_total);
//   - the handler returns an error (its context live; not a deadline, a cancellation, a panic or an
//     outage, after which the lease is expired) or an outcome that does not commit: the lease is released, and the retry runs as a new claim —
//     return an error only when the call did not take effect;
//     after a takeover the lease is expired instead, so the retry is a takeover too (the dead holder's call
//     may still have happened);
//   - the run ends without a commit after the handler returned success, at its deadline, or by a panic: the
//     lease is expired at once, so the next delivery is a takeover;
//   - the event is done (its processed_event row committed): a duplicate, as with Dedup.
//
// lease must exceed the handler's deadline (consumer.Config.HandlerTimeout), or a slow handler's lease can
// expire while it still runs: consumer.New and Start refuse a Chain holding Lease whose lease is not longer
// than HandlerTimeout, or with BatchSize > 1, naming the fix (run by hand in a batch, a message is
// dead-lettered as permanent, saying so). The handler must end when its context does (make the call with
// ctx): one running past its lease runs alongside the delivery that takes it over. Chain refuses Timeout
// inside Lease. An outage of the store while claiming, holding or committing is
// classified infrastructure (consumer.Unavailable through Classify): no attempt is spent on it. A nil
// store or a lease that is not positive is an error (a nil store wraps ErrNilDependency).
//
// # Version
//
// Version checks each event's aggregate version against the stored one, inside the dedup transaction, so
// that a stale event never overwrites newer state: an event may arrive after a newer one for the same
// aggregate (a retry, a replay, another queue), so a state change is applied only when its version follows
// the stored one, as a precondition checked in the transaction that writes it. Put it
// after Dedup: it takes the transaction from the context; without one every message fails with an error
// wrapping dedup.ErrNoTx that says so, and is retried. The stored version comes from cfg.Load, or else from
// store's aggregate_version table, keyed by the dedup scope (store.Scope), cfg.AggregateType and the
// aggregate ID, whose row it locks until the transaction ends (dedup.Store.AggregateVersion). It sets
// Delivery.AggregateID and Delivery.Version, then:
//
//   - an event type not in cfg.EventTypes (when set): passes through, unchecked;
//   - no aggregate ID or no version: with cfg.Require, consumer.DeadLetter with the reason (permanent, never
//     retried); otherwise passes through unchecked. A version that is not a decimal integer ≥ 1 is a dead
//     letter in both cases (and, in table mode, an aggregate ID longer than 128 characters, the aggregate_id column);
//   - version ≤ stored: consumer.Stale("aggregate order o-1: event version 5 ≤ stored 7"); the handler does
//     not run, and Dedup rolls back and records the event as stale (a replay is then a duplicate);
//   - version = stored + 1: the handler runs; when it returns consumer.Processed, or consumer.Duplicate (its
//     own finding that the event's effect exists: Dedup commits that too), without error, the stored
//     version moves to the event's in the same transaction (table mode; with Load the handler's own
//     conditional update moves it);
//   - version > stored + 1, a gap (an earlier event has not arrived): consumer.Retry(cfg.GapDelayLevel,
//     "version gap: …") while Attempt < GapRetries and the delivery is not the last; then cfg.OnGap:
//     GapDeadLetter → consumer.DeadLetter("version gap: …", reason class "version_gap"),
//     GapApply → applied as the next version would be (the stored version jumps).
//
// Two events of one aggregate handled at once are serialised by the row lock (table mode), a new aggregate's
// too: they never both apply on one stored version, and the second sees what the first left. Errors of the
// loader, the store and the handler are returned as they are. It returns an error naming the field when cfg is invalid, or when store is nil without Load;
// without Load, also one wrapping dedup.ErrSchema when aggregate_version is missing (run dedup.Migrate), or
// the error of that check (bounded by 5 s).
//
// # Metrics
//
// Metrics records in m what only the chain knows, after the rest of the chain: the chain's time per run
// (rmqguard_handle_duration_seconds), recovered panics (rmqguard_panics_total: errors wrapping ErrPanic),
// unidentifiable messages (rmqguard_unidentifiable_total: errors wrapping ErrUnidentifiable) and handler
// errors by retry class (rmqguard_handler_errors_total). It does not count messages or duplicates: the
// consumer reports each message's final decision once (consumer.WithObserver(m) feeds
// rmqguard_messages_total, rmqguard_duplicates_total, rmqguard_dead_letters_total …), after a batch is
// combined and dead letters are published. Labels use the original topic (restored from RETRY_TOPIC).
// In a batch's first pass the run ends at Dedup, which defers the handler to the batch's end (its errors
// are met again in the careful pass that follows them). Each chain keeps the
// rmqguard_handle_duration_seconds series of the (group, topic) pairs it has seen (up to 256), so a message
// costs no label lookup; those series must not be deleted from m.HandleDuration.
// A nil m is an error wrapping ErrNilDependency.
//
// # Logging
//
// Logging writes one debug line per run of the rest of the chain ("handler run"): group, topic, msg_id,
// keys, event_id, attempt (ReconsumeTimes), the chain's outcome, duration (the run's wall time), reason
// and error when set; never the body. It is a tracing aid, off unless the logger enables debug: the
// consumer itself logs each message's final decision once, at the level that says whether a person must
// look (consumer.WithLogger), so Logging is not part of the recommended chain. A message's chain may run
// more than once before its decision (a batch handled again after its first pass, or after losing its
// shared transaction, a run repeated after a wait for the store): Logging writes a line for each run, the
// consumer one per message. In a batch's first pass the run ends at Dedup, which defers the handler:
// "processed: deferred to the batch's commit".
// A nil log is zap.NewNop() (no lines).
package middleware
