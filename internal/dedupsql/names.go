// Package dedupsql holds what the dedup schema's tools share below the dedup package: the rule for the
// table and column names written into SQL text, the tables' default names and prefix rule, and the purge
// of old rows (dedup.Janitor runs it inside consumers, `rmqguard dedup purge` and tools/purgebench
// outside). Errors are wrapped with context; test them with errors.Is.
package dedupsql

import (
	"errors"
	"fmt"
)

// ErrInvalidIdentifier means a table or column name (or a table prefix) is not a plain SQL identifier.
var ErrInvalidIdentifier = errors.New("dedup: not a plain SQL identifier")

// MaxIdentifierLength is MySQL's limit for table and column names (and named locks).
const MaxIdentifierLength = 64

// MaxEventIDLength is the longest event ID processed_event.event_id holds, in characters.
const MaxEventIDLength = 128

// MaxScopeLength is the longest dedup scope (processed_event.consumer_group), in characters.
const MaxScopeLength = 255

// Default names of the dedup schema's tables (no prefix).
const (
	// ProcessedTable holds one row per processed event.
	ProcessedTable = "processed_event"
	// AggregateTable holds each aggregate's stored version.
	AggregateTable = "aggregate_version"
	// LeaseTable holds lease mode's leases; shorter than VersionTable, so every valid prefix fits.
	LeaseTable = "event_lease"
	// VersionTable is where goose records the dedup schema's applied migrations.
	VersionTable = "rmqguard_dedup_db_version"
)

// result_status values of processed_event.
const (
	// ResultSuccess is the result_status of a processed event: its effect committed with the row.
	ResultSuccess = "SUCCESS"
	// ResultStale is the result_status of an event decided stale (consumer.KindStale: its aggregate version
	// is not above the stored one): it wrote nothing, and the row, written after its transaction rolled back
	// (dedup's RecordStale), makes a later delivery of the same event a duplicate instead of a second stale.
	ResultStale = "STALE"
)

// MaxPrefixLength is the longest table prefix: the longest name it starts, VersionTable (25 characters),
// must stay within MySQL's 64.
const MaxPrefixLength = MaxIdentifierLength - len(VersionTable)

// ValidIdentifier checks that name can be written into SQL text unquoted: 1..64 ASCII letters, digits and
// '_', not starting with a digit (placeholders cannot stand for identifiers, so anything else is refused
// rather than escaped). Error: one wrapping ErrInvalidIdentifier that quotes the name and says why.
func ValidIdentifier(name string) error {
	if name == "" || len(name) > MaxIdentifierLength {
		return fmt.Errorf("%w: %q must have 1..%d characters", ErrInvalidIdentifier, name, MaxIdentifierLength)
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return fmt.Errorf("%w: %q may hold only ASCII letters, digits and '_', and must not start with a digit",
				ErrInvalidIdentifier, name)
		}
	}
	return nil
}

// CheckPrefix checks a table prefix ("" for the default names): lowercase ASCII letters, digits and '_'
// (table names are case-sensitive on some servers, lower_case_table_names), and every name it makes a
// ValidIdentifier: at most MaxPrefixLength characters, not starting with a digit. Error: one wrapping
// ErrInvalidIdentifier that quotes the prefix and says why.
func CheckPrefix(prefix string) error {
	if len(prefix) > MaxPrefixLength {
		return fmt.Errorf("%w: table prefix %q has %d characters, at most %d (%s%s must fit MySQL's %d)",
			ErrInvalidIdentifier, prefix, len(prefix), MaxPrefixLength, prefix, VersionTable, MaxIdentifierLength)
	}
	for _, r := range prefix {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return fmt.Errorf("%w: table prefix %q may hold only lowercase ASCII letters, digits and '_' "+
				"(table names are case-sensitive on some servers and not on others)", ErrInvalidIdentifier, prefix)
		}
	}
	for _, name := range []string{prefix + ProcessedTable, prefix + AggregateTable, prefix + VersionTable} {
		if err := ValidIdentifier(name); err != nil {
			return fmt.Errorf("table prefix %q: table name: %w", prefix, err)
		}
	}
	return nil
}

// Names returns every table name of the dedup schema of prefix: processed, aggregate, lease and version
// table, in that order (for tools and tests that list or drop a schema).
func Names(prefix string) []string {
	return []string{prefix + ProcessedTable, prefix + AggregateTable, prefix + LeaseTable, prefix + VersionTable}
}
