package dedup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// schemaCheckTimeout bounds the queries NewStore runs to check the schema.
const schemaCheckTimeout = 5 * time.Second

// ErrSchema means processed_event (or its name with WithTablePrefix, which the wrapping error then gives) is
// not the table the store relies on: it is missing, a column Claim
// writes is missing, its primary key is not exactly (consumer_group, event_id), or a key column does not
// compare bytes exactly. The last matters most: with a case- or accent-insensitive collation (any _ci
// collation) the primary key makes `Ord-7aB` and `ord-7ab` one event, so the second is dropped as a
// duplicate. The wrapping error says what is wrong and the statement that fixes it. Test with errors.Is.
var ErrSchema = errors.New("dedup: processed_event does not have the dedup schema")

// keyColumns is processed_event's primary key, in order.
var keyColumns = []string{"consumer_group", "event_id"}

// requiredColumns are the columns Claim and Confirm use.
var requiredColumns = []string{"consumer_group", "event_id", "event_type", "aggregate_id", "topic", "msg_id",
	"consumed_at", "result_status", "claim_token"}

// column is one row of information_schema.COLUMNS.
type column struct {
	Name      string `db:"COLUMN_NAME"`
	DataType  string `db:"DATA_TYPE"`
	Type      string `db:"COLUMN_TYPE"`
	Collation string `db:"COLLATION_NAME"`
}

// CheckSchema verifies processed_event (or its WithTablePrefix name; no other option) in db's current
// database: the columns the store writes, primary key exactly (consumer_group, event_id) with no prefix
// lengths, both key columns comparing bytes exactly (a binary type or a _bin collation). Errors: one wrapping
// ErrSchema that names the table, each problem and the ALTER TABLE (or Migrate) that fixes it; an invalid
// option; the information_schema queries' error.
func CheckSchema(ctx context.Context, db *sqlx.DB, opts ...Option) error {
	t, err := tablesOption("CheckSchema", opts)
	if err != nil {
		return err
	}
	return checkSchema(ctx, db, t)
}

// checkSchema is CheckSchema on the processed-event table of t.
func checkSchema(ctx context.Context, db *sqlx.DB, t tableNames) error {
	table := t.processed()
	where := "" // the default table is named by ErrSchema's text already
	if t.prefix != "" {
		where = table + ": "
	}
	cols, err := tableColumns(ctx, db, table)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("%w: %sthe table is missing from the current database; fix: run dedup.Migrate%s", ErrSchema, where, t.migrateHint())
	}
	var problems, fixes []string
	for _, name := range requiredColumns {
		if _, ok := cols[name]; !ok {
			problems = append(problems, "column "+name+" is missing")
		}
	}
	if len(problems) > 0 {
		fixes = append(fixes, "run dedup.Migrate"+t.migrateHint())
	}
	pk, err := primaryKey(ctx, db, table)
	if err != nil {
		return err
	}
	if !slices.Equal(pk, keyColumns) {
		problems = append(problems, fmt.Sprintf("primary key is (%s), want (consumer_group, event_id) without prefix lengths", strings.Join(pk, ", ")))
		drop := "DROP PRIMARY KEY, "
		if len(pk) == 0 {
			drop = ""
		}
		fixes = append(fixes, "ALTER TABLE "+table+" "+drop+"ADD PRIMARY KEY (consumer_group, event_id);")
	}
	var modify []string
	for _, name := range keyColumns {
		c, ok := cols[name]
		if !ok || bytesExact(c) {
			continue
		}
		problems = append(problems, fmt.Sprintf("column %s has collation %s, which does not compare bytes exactly (a _ci collation makes `Ord-7aB` and `ord-7ab` one event)", name, c.Collation))
		modify = append(modify, fmt.Sprintf("MODIFY %s %s CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL", name, c.Type))
	}
	if len(modify) > 0 {
		fixes = append(fixes, "ALTER TABLE "+table+" "+strings.Join(modify, ", ")+";")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s%s; fix: %s", ErrSchema, where, strings.Join(problems, "; "), strings.Join(fixes, " "))
	}
	return nil
}

// tableColumns returns table's columns by name; none when the table does not exist.
func tableColumns(ctx context.Context, db *sqlx.DB, table string) (map[string]column, error) {
	var rows []column
	err := db.SelectContext(ctx, &rows, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(COLLATION_NAME, '') AS COLLATION_NAME
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
	if err != nil {
		return nil, fmt.Errorf("dedup: check schema: columns of %s: %w", table, err)
	}
	cols := make(map[string]column, len(rows))
	for _, c := range rows {
		cols[strings.ToLower(c.Name)] = c
	}
	return cols, nil
}

// primaryKey returns the columns of table's primary key in order; a column indexed by a prefix only is
// returned as "name(length)".
func primaryKey(ctx context.Context, db *sqlx.DB, table string) ([]string, error) {
	var pk []string
	err := db.SelectContext(ctx, &pk, `SELECT CASE WHEN SUB_PART IS NULL THEN LOWER(COLUMN_NAME)
			ELSE CONCAT(LOWER(COLUMN_NAME), '(', SUB_PART, ')') END
		FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY'
		ORDER BY SEQ_IN_INDEX`, table)
	if err != nil {
		return nil, fmt.Errorf("dedup: check schema: primary key of %s: %w", table, err)
	}
	return pk, nil
}

// bytesExact reports whether c compares bytes exactly: a binary type (no collation, or "binary") or a
// _bin collation. MariaDB's utf8mb4_bin is PAD SPACE (trailing spaces do not count), which event IDs
// never end with once trimmed by the EventID middleware.
func bytesExact(c column) bool {
	coll := strings.ToLower(c.Collation)
	return coll == "" || coll == "binary" || strings.HasSuffix(coll, "_bin")
}
