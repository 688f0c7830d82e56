// Package retry classifies handler errors: permanent errors go to the DLQ at once, transient ones are
// retried, anything unknown is retried until the consumer group's MaxReconsumeTimes runs out, after
// which the broker moves the message to %DLQ%<group>, and infrastructure errors (the store is down or
// unwritable) are not the message's failure at all: consumption pauses until the store is back, and no
// attempt is spent. Classification uses errors.Is/errors.As and MySQL error numbers, never message text.
//
// # Classes
//
// Classify decides in this order:
//
//   - the outermost explicit mark (Permanent, Transient or Infrastructure) wins;
//   - MySQL numbers: 1048/1264/1292/1366/1406 (a value its column cannot hold) are permanent;
//     1213/1205/1317 (deadlock, lock wait, interrupted query: this message's own transaction) are
//     transient; 1040/1053 (too many connections, server shutting down), 1290/1792/1836 (read-only
//     server) and the client numbers 2006/2013 are infrastructure;
//   - driver.ErrBadConn and mysql.ErrInvalidConn (a database connection lost) are infrastructure;
//   - plain network errors — ECONNREFUSED, ECONNRESET, EPIPE, a failed dial — are transient, not
//     infrastructure: they also come from a handler's own dependencies (an HTTP service refusing
//     connections), which the store probe cannot see, so treating them as the store's outage would pause
//     and resume consumption over and over while the store is healthy. The store's own failures to
//     connect, begin or commit reach Classify marked Infrastructure by the dedup package;
//   - context.DeadlineExceeded and other net timeouts are transient: the message's own handler ran out
//     of time;
//   - io.ErrUnexpectedEOF is transient, not infrastructure: the MySQL driver reports a broken read as
//     mysql.ErrInvalidConn, while a body cut short fails to decode with io.ErrUnexpectedEOF (the message's
//     own failure, which must not pause consumption);
//   - context.Canceled is transient: inside the consumer only its shutdown cancels a handler, and the
//     consumer never answers such a callback (the message comes back unchanged after a restart); a
//     handler that cancels its own work is retried like any other failure, without pausing consumption;
//   - anything else is ClassUnknown. A nil err is ClassUnknown.
package retry
