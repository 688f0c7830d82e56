// Package batch is the scope the consumer gives the members of one client callback of several messages
// (consumer.Config.BatchSize > 1), for middlewares that share a resource across them (middleware.Dedup's
// one transaction). It imports no other package of this module; the consumer instantiates Batch with its
// Outcome and Cause.
//
// A Batch is in the context of each of its members' handlers (FromContext), and lets a middleware attach
// one resource per key that the members share. Members are handled one after another, never at once; a
// Batch is still safe for concurrent use (a handler abandoned at its deadline may run on).
//
// A callback is handled in passes, each with a new Batch. The first is optimistic (Careful false): a
// resource may defer its members' work to its Finish (middleware.Dedup claims them in one statement and
// runs their handlers there, in aggregate order unless Ordered), set their outcomes there (SetOutcome),
// and ask for a careful pass (ErrHandleCarefully) when a member is not kept; later passes are careful (a
// member decided while it is handled: middleware.Dedup's savepoint each).
//
// Its context (Context) is not a member's: it derives from the consumer's run context, so Shutdown ends it,
// with a deadline of HandlerTimeout × the number of members in the callback; a resource begun with it (a
// transaction) is rolled back when it ends. A resource lost to the store (its Finish error wraps
// ErrStoreUnavailable: a broken connection, a failed COMMIT, or waits at the store gate that outlasted that
// deadline) makes the consumer wait at the gate and handle the whole callback again with a new Batch,
// spending no attempt, within OutageWait; any other failure of a resource retries its dependents.
package batch
