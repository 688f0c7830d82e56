// Package redisfast is the Redis fast path of the dedup store: a layer around a dedup.TxStore that keeps,
// for each event whose processed_event row committed, a "done" key with a TTL, and answers a later delivery
// of that event as a duplicate with no database round trip. Redis is only a speed-up, never the judge: Redis may lose keys, keys expire, a failover opens a window, so a key
// that is missing, a Redis error or a timeout falls through to the database, whose unique key decides. A
// key is written only after the row committed, never before, so a "done" answer is never wrong; Redis
// being down for a whole run changes nothing but speed. It keeps no "processing" marker that acknowledges a
// message: such a marker can outlive a consumer that crashed mid-event and then hide an event that never
// committed, so an event in progress elsewhere is left to the database.
//
// # Keys
//
// A claim that succeeds registers, as an after-commit step of its transaction (its AfterCommit), the
// write of the event's done key holding its message ID: the key appears only once the row committed, never
// before, and never when the transaction rolls back. When the scope already has the row and it is not the
// transaction's own (a batch's transaction meets its own uncommitted row when two members carry one event),
// the key is written with no message ID unless one exists (SET NX), so that the next delivery skips the
// database.
package redisfast
