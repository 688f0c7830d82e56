package dedup

import "sync"

// claims is the list of processed_event rows a transaction inserted (its claims and the STALE rows of a
// batch), as scope and event ID, so that a 1062 can be told apart from the transaction's own row without a
// round trip (localTx.Claimed). A rollback to a savepoint truncates it to the savepoint's mark.
type claims struct {
	mu   sync.Mutex
	keys []string
}

// claimKey is the list's entry for scope and eventID.
func claimKey(scope, eventID string) string { return scope + "\x00" + eventID }

func (c *claims) add(scope, eventID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, claimKey(scope, eventID))
}

func (c *claims) has(scope, eventID string) bool {
	k := claimKey(scope, eventID)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.keys {
		if x == k {
			return true
		}
	}
	return false
}

// first returns the first row's entry (scope and event ID, see claimKey); false when there is none.
func (c *claims) first() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) == 0 {
		return "", false
	}
	return c.keys[0], true
}

func (c *claims) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

func (c *claims) truncate(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < len(c.keys) {
		c.keys = c.keys[:n]
	}
}

// Claimed reports whether the transaction itself inserted scope's row for eventID (Claim, or RecordStaleIn
// in a batch) and has not rolled it back to a savepoint: a 1062 on such a row comes from the transaction's
// own uncommitted row (two claims of one event in a batch's transaction), not from a committed one. It
// costs no round trip. middleware.Dedup never claims one event twice in a transaction; a layer such as
// dedup/redisfast checks it before treating a 1062 as "done".
func (t *localTx) Claimed(scope, eventID string) bool { return t.claims.has(scope, eventID) }
