package dedup

import (
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// tableNames names the tables of one dedup schema: prefix followed by "processed_event",
// "aggregate_version", "event_lease" (lease mode) and "rmqguard_dedup_db_version" (goose). Several schemas
// can live in one database side by side, each with its own prefix (WithTablePrefix), and do not see each
// other's rows. The zero tableNames is the default schema, without a prefix.
type tableNames struct {
	prefix string
}

// newTableNames returns the tables of prefix ("" for the default names), or dedupsql.CheckPrefix's error.
func newTableNames(prefix string) (tableNames, error) {
	if err := dedupsql.CheckPrefix(prefix); err != nil {
		return tableNames{}, err
	}
	return tableNames{prefix: prefix}, nil
}

// processed returns the name of the processed-event table: Prefix + "processed_event".
func (t tableNames) processed() string { return t.prefix + dedupsql.ProcessedTable }

// aggregate returns the name of the aggregate-version table: Prefix + "aggregate_version".
func (t tableNames) aggregate() string { return t.prefix + dedupsql.AggregateTable }

// lease returns the name of the lease table of middleware.Lease: Prefix + "event_lease".
func (t tableNames) lease() string { return t.prefix + dedupsql.LeaseTable }

// version returns the name of the goose version table of the dedup migrations: Prefix +
// "rmqguard_dedup_db_version".
func (t tableNames) version() string { return t.prefix + dedupsql.VersionTable }

// queries are the statements of a Store, built once from its table names (they cannot be placeholders).
type queries struct {
	claim, confirm, committed, processed, cause, probe string
	aggregateRead, aggregateAdvance                    string
	confirmBatchHead, causesHead                       string
	claimBatchHead, claimBatchRow, ownedHead           string
	// lease mode (lease.go)
	leaseClaim, leaseTake, leaseRead, leaseMine, leaseHold, leaseRelease, leaseExpire string
}

// newQueries writes t's names into the store's statements; t's names are valid identifiers (newTableNames).
func newQueries(t tableNames) queries {
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
func tablesOption(caller string, opts []Option) (tableNames, error) {
	var c storeConfig
	for _, opt := range opts {
		if opt == nil {
			return tableNames{}, fmt.Errorf("dedup: %s: an option is nil", caller)
		}
		if err := opt.apply(&c); err != nil {
			return tableNames{}, fmt.Errorf("dedup: %s: %w", caller, err)
		}
	}
	if len(c.others) > 0 {
		return tableNames{}, fmt.Errorf("dedup: %s: takes only WithTablePrefix; %s configure(s) a Store, pass it to NewStore",
			caller, strings.Join(c.others, ", "))
	}
	return c.tables, nil
}

// migrateHint is what follows "run dedup.Migrate" in a fix: nothing for the default tables, else the
// option that names these.
func (t tableNames) migrateHint() string {
	if t.prefix == "" {
		return ""
	}
	return fmt.Sprintf(" with WithTablePrefix(%q)", t.prefix)
}
