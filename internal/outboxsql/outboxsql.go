// Package outboxsql holds the outbox table's names and values, and the event IDs of its rows, that the
// outbox package, the operator commands (internal/outboxadmin, `rmqguard outbox`), the demo's checks and
// the chaos harness share.
package outboxsql

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// Table and VersionTable are the default names of the outbox table and of the table recording its
// migrations; a dedup table prefix goes before both.
const (
	Table        = "rmqguard_outbox"
	VersionTable = "rmqguard_outbox_version"
)

// Row kinds (the kind column).
const (
	KindMessage = "message"
	KindEffect  = "effect"
)

// Row statuses (the status column).
const (
	StatusPending = "pending"
	StatusSent    = "sent"
	StatusParked  = "parked"
)

// EventID returns the event ID of the outgoing row name of the event eventID in scope:
// "scope/eventID/name" when that fits the 128 characters of processed_event.event_id and scope has no '/'
// (then it reads back unambiguously), else "ob-" and 40 hex digits of the SHA-256 of the three parts.
func EventID(scope, eventID, name string) string {
	id := scope + "/" + eventID + "/" + name
	if utf8.RuneCountInString(id) <= dedupsql.MaxEventIDLength && !strings.Contains(scope, "/") {
		return id
	}
	sum := sha256.Sum256([]byte(scope + "\x00" + eventID + "\x00" + name))
	return "ob-" + hex.EncodeToString(sum[:20])
}
