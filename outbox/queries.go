package outbox

import (
	"database/sql"
	"strconv"
	"strings"
)

// row is one outbox row as the relay reads it.
type row struct {
	ID          int64          `db:"id"`
	Kind        string         `db:"kind"`
	EventID     string         `db:"event_id"`
	Name        string         `db:"name"`
	ShardingKey string         `db:"sharding_key"`
	Topic       string         `db:"topic"`
	Tag         string         `db:"tag"`
	Keys        string         `db:"msg_keys"`
	Properties  sql.NullString `db:"properties"`
	Body        []byte         `db:"body"`
	Attempts    int            `db:"attempts"`
}

// queries are the outbox's statements on its table.
type queries struct {
	table                                              string
	insert, lock, markSentHead, markParked, markFailed string
	backlog                                            string
}

func newQueries(t string) queries {
	return queries{
		table: t,
		insert: `INSERT INTO ` + t + ` (kind, event_id, source_event_id, scope, name, sharding_key, topic, tag, msg_keys,
		   properties, body, status, attempts, next_attempt_at, created_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
		// lock is followed by the ids, then lockTail.
		lock: `SELECT id, kind, event_id, name, sharding_key, topic, tag, msg_keys, properties, body, attempts FROM ` + t + `
		 WHERE id IN (`,
		// markSentHead is followed by " WHEN id IN (ids) THEN microseconds ago" per SEND_OK, then the END
		// and the WHERE.
		markSentHead: `UPDATE ` + t + ` SET status = 'sent', attempts = attempts + 1, last_error = '',
		   sent_at = UTC_TIMESTAMP(6) - INTERVAL CASE`,
		markParked: `UPDATE ` + t + ` SET status = 'parked', attempts = attempts + 1, last_error = ? WHERE id = ?`,
		markFailed: `UPDATE ` + t + ` SET attempts = attempts + 1, last_error = ?,
		   next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id = ?`,
		backlog: `SELECT COALESCE(SUM(status = 'pending'), 0) AS pending, COALESCE(SUM(status = 'parked'), 0) AS parked,
		   COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN status = 'pending' THEN created_at END), UTC_TIMESTAMP(6)), 0) AS oldest
		 FROM ` + t + ` WHERE status IN ('pending', 'parked')`,
	}
}

// lockTail ends the lock statement after its ids.
const lockTail = `) AND status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED`

// The relay's statements carry their ids and numbers as literals, so that they go in one round trip each
// on a pool whose DSN has no interpolateParams (the application's, Store.DB): a statement with arguments
// is then a prepare, an execute and a close, and the server parses it each time all the same.

// appendIDs writes ids to b, comma separated.
func appendIDs(b *strings.Builder, ids []int64) {
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
}

// claimHeads is the query for the IDs of the due head rows, oldest first: pending rows that are due, of a
// kind this relay handles (messages when messages, effects named in effects), whose sharding key's row
// before them (id order) is sent, or that have none. A key's rows are sent one after the other in id
// order, so its sent rows are the oldest ones (purged rows were sent too): the row before a pending row
// is sent exactly when no older row of its key is pending or parked. A parked head holds its key's later
// rows back, and only them; a row committed late below its key's last sent row does not hold the rows
// after it. The query reads the pending rows in id order (idx_outbox_pending) and stops at the limit,
// each row checked by one lookup of idx_outbox_key and the primary key: its cost grows with the rows it
// reads before the limit, not with the backlog or a key's history. It is returned as a function of the
// lowest id to look at and the limit, with its arguments (the effect names); nil when the relay handles
// nothing. It is a plain read: the relay locks what it finds with SKIP LOCKED, and a row another relay
// finished meanwhile no longer matches status = 'pending'.
func (q queries) claimHeads(messages bool, effects []string) (func(from int64, limit int) string, []any) {
	var kinds []string
	var args []any
	if messages {
		kinds = append(kinds, "o.kind = 'message'")
	}
	if len(effects) > 0 {
		kinds = append(kinds, "(o.kind = 'effect' AND o.name IN (?"+strings.Repeat(", ?", len(effects)-1)+"))")
		for _, e := range effects {
			args = append(args, e)
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	head := `SELECT o.id FROM ` + q.table + ` o FORCE INDEX (idx_outbox_pending)
	 WHERE o.status = 'pending' AND o.next_attempt_at <= UTC_TIMESTAMP(6) AND (` + strings.Join(kinds, " OR ") + `) AND o.id >= `
	tail := `
	   AND COALESCE((SELECT e.status FROM ` + q.table + ` e FORCE INDEX (idx_outbox_key)
	     WHERE e.sharding_key = o.sharding_key AND e.id < o.id ORDER BY e.id DESC LIMIT 1), 'sent') = 'sent'
	 ORDER BY o.id LIMIT `
	return func(from int64, limit int) string {
		return head + strconv.FormatInt(from, 10) + tail + strconv.Itoa(limit)
	}, args
}
