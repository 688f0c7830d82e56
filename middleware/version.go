package middleware

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// GapPolicy says what Version does with an event whose version skips ahead of the stored one once it has
// waited GapRetries deliveries for the missing events.
type GapPolicy uint8

const (
	// GapDeadLetter (default) sends the event to the DLQ with the reason "version gap …".
	GapDeadLetter GapPolicy = iota
	// GapApply applies the event anyway; the stored version jumps to the event's.
	GapApply
)

// VersionLoader reads an aggregate's current version inside the dedup transaction, for aggregates that keep
// their own version column; it returns 0 when the aggregate does not exist yet.
type VersionLoader func(ctx context.Context, tx *sqlx.Tx, aggregateID string) (int64, error)

// VersionConfig configures Version.
type VersionConfig struct {
	// AggregateType names the aggregate (e.g. "order"). Required.
	AggregateType string
	// EventTypes are the event types checked; others pass through. Empty: all.
	EventTypes []string
	// AggregateExtractors find the aggregate ID. Default: Delivery.AggregateID (set by EventID).
	AggregateExtractors []Extractor
	// VersionExtractors find the version. Default: FromProperty("AGGREGATE_VERSION").
	VersionExtractors []Extractor
	// Load reads the stored version; nil keeps it in the aggregate_version table.
	Load VersionLoader
	// Require dead-letters a checked event without a version.
	Require bool
	// GapRetries is how many deliveries a gap is retried before OnGap applies.
	GapRetries int
	// GapDelayLevel is the broker delay level of a gap's retry.
	GapDelayLevel int
	// OnGap is the policy after GapRetries.
	OnGap GapPolicy
}

// Version checks aggregate versions inside the dedup transaction (skeleton, not built yet).
func Version(store *dedup.Store, cfg VersionConfig) (consumer.Middleware, error) {
	return nil, errors.New("middleware: Version not built yet")
}
