package dedup

import (
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// Tables names the tables of one dedup schema: Prefix followed by "processed_event", "aggregate_version",
// "event_lease" (lease mode) and "rmqguard_dedup_db_version" (goose). Several schemas can live in one
// database side by side, each with its own prefix (two services sharing a database, a blue/green pair),
// and do not see each other's rows. The zero Tables is the default schema, without a prefix. Build one
// with NewTables, or give the prefix to WithTablePrefix or JanitorConfig.TablePrefix.
type Tables struct {
	prefix string
}

// NewTables returns the tables of prefix ("" for the default names). The prefix may hold only lowercase
// ASCII letters, digits and '_' (table names are case-sensitive on some servers), must not start with a
// digit and may have at most 39 characters. Error: one that quotes the prefix and says why.
func NewTables(prefix string) (Tables, error) {
	if err := dedupsql.CheckPrefix(prefix); err != nil {
		return Tables{}, err
	}
	return Tables{prefix: prefix}, nil
}

// Prefix returns the prefix of the table names ("" for the default schema).
func (t Tables) Prefix() string { return t.prefix }

// processed returns the name of the processed-event table: Prefix + "processed_event".
func (t Tables) processed() string { return t.prefix + dedupsql.ProcessedTable }

// aggregate returns the name of the aggregate-version table: Prefix + "aggregate_version".
func (t Tables) aggregate() string { return t.prefix + dedupsql.AggregateTable }

// lease returns the name of the lease table of middleware.Lease: Prefix + "event_lease".
func (t Tables) lease() string { return t.prefix + dedupsql.LeaseTable }

// version returns the name of the goose version table of the dedup migrations: Prefix +
// "rmqguard_dedup_db_version".
func (t Tables) version() string { return t.prefix + dedupsql.VersionTable }

// queries are the statements of a Store, built once from its Tables (table names cannot be placeholders).
type queries struct {
	claim, confirm, committed, processed, cause, probe string
	aggregateRead, aggregateAdvance                    string
	confirmBatchHead, causesHead                       string
	claimBatchHead, claimBatchRow, ownedHead           string
	// lease mode (lease.go)
	leaseClaim, leaseTake, leaseRead, leaseMine, leaseHold, leaseRelease, leaseExpire string
}

// newQueries writes t's names into the store's statements; t's names are valid identifiers (NewTables).
func newQueries(t Tables) queries {
	p, a, l := t.processed(), t.aggregate(), t.lease()
	return queries{
		claim: `INSERT INTO ` + p + `
		   (consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status, claim_token)
		 VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?, ?)`,
		confirm:   `SELECT COUNT(*) FROM ` + p + ` WHERE consumer_group = ? AND event_id = ? AND claim_token = ?`,
		committed: `SELECT COUNT(*) FROM ` + p + ` WHERE consumer_group = ? AND event_id = ? AND claim_token = ? LOCK IN SHARE MODE`,
		processed: `SELECT COUNT(*) FROM ` + p + ` WHERE consumer_group = ? AND event_id = ?`,
		cause:     `SELECT msg_id FROM ` + p + ` WHERE consumer_group = ? AND event_id = ?`,
		probe:     `UPDATE ` + p + ` SET result_status = result_status WHERE FALSE`,
		aggregateRead: `INSERT INTO ` + a + ` (consumer_group, aggregate_type, aggregate_id, version, event_id, updated_at)
		 VALUES (?, ?, ?, 0, '', UTC_TIMESTAMP(6))
		 ON DUPLICATE KEY UPDATE version = LAST_INSERT_ID(version)`,
		aggregateAdvance: `UPDATE ` + a + ` SET version = ?, event_id = ?, updated_at = UTC_TIMESTAMP(6)
		 WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ? AND version = ?`,
		confirmBatchHead: `SELECT COUNT(*) FROM ` + p + ` WHERE claim_token = ? AND (consumer_group, event_id) IN (`,
		causesHead:       `SELECT consumer_group, event_id, msg_id FROM ` + p + ` WHERE (consumer_group, event_id) IN (`,
		claimBatchHead: `INSERT IGNORE INTO ` + p + `
		   (consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status, claim_token)
		 VALUES `,
		claimBatchRow: `(?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?, ?)`,
		ownedHead:     `SELECT consumer_group, event_id FROM ` + p + ` WHERE claim_token = ? AND (consumer_group, event_id) IN (`,
		leaseClaim: `INSERT INTO ` + l + ` (consumer_group, event_id, claim_token, msg_id, claimed_at, lease_until)
		 VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`,
		leaseTake: `UPDATE ` + l + ` SET claim_token = ?, msg_id = ?, claimed_at = UTC_TIMESTAMP(6),
		 lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, takeovers = takeovers + 1
		 WHERE consumer_group = ? AND event_id = ? AND lease_until <= UTC_TIMESTAMP(6)`,
		leaseRead:    `SELECT COUNT(*) FROM ` + l + ` WHERE consumer_group = ? AND event_id = ?`,
		leaseMine:    `SELECT COUNT(*) FROM ` + l + ` WHERE consumer_group = ? AND event_id = ? AND claim_token = ? LOCK IN SHARE MODE`,
		leaseHold:    `DELETE FROM ` + l + ` WHERE consumer_group = ? AND event_id = ? AND claim_token = ?`,
		leaseRelease: `DELETE FROM ` + l + ` WHERE consumer_group = ? AND event_id = ? AND claim_token = ?`,
		leaseExpire: `UPDATE ` + l + ` SET lease_until = LEAST(lease_until, UTC_TIMESTAMP(6))
		 WHERE consumer_group = ? AND event_id = ? AND claim_token = ?`,
	}
}

// tablesOption reads the prefix a list of options sets, for the functions that take a Store's options but
// use only WithTablePrefix (Migrate, CheckSchema): any other option is refused, naming caller, since it
// would be ignored.
func tablesOption(caller string, opts []Option) (Tables, error) {
	var c storeConfig
	for _, opt := range opts {
		if opt == nil {
			return Tables{}, fmt.Errorf("dedup: %s: an option is nil", caller)
		}
		if err := opt.apply(&c); err != nil {
			return Tables{}, fmt.Errorf("dedup: %s: %w", caller, err)
		}
	}
	if len(c.others) > 0 {
		return Tables{}, fmt.Errorf("dedup: %s: takes only WithTablePrefix; %s configure(s) a Store, pass it to NewStore",
			caller, strings.Join(c.others, ", "))
	}
	return c.tables, nil
}

// migrateHint is what follows "run dedup.Migrate" in a fix: nothing for the default tables, else the
// option that names these.
func (t Tables) migrateHint() string {
	if t.prefix == "" {
		return ""
	}
	return fmt.Sprintf(" with WithTablePrefix(%q)", t.prefix)
}
