package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// GapPolicy says what Version does with an event whose version skips ahead of the stored one once it has
// waited GapRetries deliveries for the missing events.
type GapPolicy uint8

const (
	// GapDeadLetter (default) sends the event to the DLQ with the reason "version gap: …" (reason class
	// "version_gap"): strict mode, for versions that move up by one per event.
	GapDeadLetter GapPolicy = iota
	// GapApply applies the event anyway; the stored version jumps to the event's. For versions that are
	// monotonic but not dense (an aggregate whose events this group does not all see).
	GapApply
)

// NoGapRetries, as VersionConfig.GapRetries, applies OnGap on the first delivery of a gap, without waiting.
const NoGapRetries = -1

// Defaults of VersionConfig.
const (
	// defaultGapRetries is how many deliveries a gap waits by default.
	defaultGapRetries = 3
	// defaultGapDelayLevel is the broker delay level of a gap's retry by default (5 s on a default broker).
	defaultGapDelayLevel = 2
)

// VersionLoader reads an aggregate's current version inside the dedup transaction, for aggregates that keep
// their own version column; it returns 0 when the aggregate does not exist yet. A locking read (SELECT …
// FOR UPDATE) serialises concurrent events of one aggregate; a plain read is enough when the handler moves
// the row with a conditional UPDATE (dedup.States.Transition), which then finds a concurrent change. Its
// error is returned as it is (classified by the retry package).
type VersionLoader func(ctx context.Context, tx *sqlx.Tx, aggregateID string) (int64, error)

// VersionConfig configures Version. The zero value of every field but AggregateType is a usable default.
type VersionConfig struct {
	// AggregateType names the aggregate (e.g. "order"): part of the aggregate_version key and of reasons.
	// Required: a plain identifier (ASCII letters, digits, '_', not starting with a digit), 1..64 characters.
	AggregateType string
	// EventTypes are the event types (Delivery.EventType) checked; others pass through untouched. Empty: all.
	// In table mode (no Load) an unchecked event never moves the stored version: list every event type that
	// advances the aggregate (the one creating it too), or its successor waits as a gap.
	EventTypes []string
	// AggregateExtractors find the aggregate ID, tried in order. Default: Delivery.AggregateID (set by
	// EventID from the AGGREGATE_ID property). Each needs a Name and an Extract func.
	AggregateExtractors []Extractor
	// VersionExtractors find the version, a decimal integer ≥ 1, tried in order. Default:
	// FromProperty("AGGREGATE_VERSION"). Each needs a Name and an Extract func.
	VersionExtractors []Extractor
	// Load reads the stored version from the aggregate's own table; the handler's conditional update then
	// moves it. nil: Version keeps the version in the aggregate_version table (dedup.Migrate creates it) and
	// advances it itself.
	Load VersionLoader
	// Require dead-letters a checked event without an aggregate ID or version (reason class permanent).
	// Off: such an event passes through unchecked.
	Require bool
	// GapRetries is how many deliveries an event with a gap (version > stored + 1) is retried for, waiting
	// for the missing events: deliveries with Attempt < GapRetries are retried, so OnGap applies on
	// delivery GapRetries + 1. 0 means 3; NoGapRetries (-1) applies OnGap at once.
	// OnGap also applies on the group's last delivery (Delivery.LastAttempt), whatever GapRetries says:
	// a retry there would end in the DLQ as "retries exhausted", not as the policy says.
	GapRetries int
	// GapDelayLevel is the broker delay level (1..18) of a gap's retry. 0 means 2.
	// Orderly consumption has no delay levels: there a gap's retry suspends the queue for
	// consumer.Config.SuspendTime.
	GapDelayLevel int
	// OnGap is the policy once a gap has waited GapRetries deliveries. Default GapDeadLetter. With Load,
	// GapApply only lets the handler run: the row moves only if the handler's update accepts the jump
	// (dedup.States.Transition does not: it needs the row at Version-1 and answers TransitionAhead).
	OnGap GapPolicy
}

// validate checks cfg and fills its defaults; errors name the field and why.
func (cfg *VersionConfig) validate(store *dedup.Store) error {
	if err := dedupsql.ValidIdentifier(cfg.AggregateType); err != nil {
		return fmt.Errorf("version config: AggregateType: %w", err)
	}
	if cfg.Load == nil && store == nil {
		return errors.New("version config: store is nil: it keeps the aggregate_version table unless Load is set")
	}
	if cfg.GapRetries == 0 {
		cfg.GapRetries = defaultGapRetries
	}
	if cfg.GapRetries < NoGapRetries {
		return fmt.Errorf("version config: GapRetries: %d is below NoGapRetries (-1); 0 means the default %d", cfg.GapRetries, defaultGapRetries)
	}
	if cfg.GapDelayLevel == 0 {
		cfg.GapDelayLevel = defaultGapDelayLevel
	}
	if cfg.GapDelayLevel < 1 || cfg.GapDelayLevel > 18 {
		return fmt.Errorf("version config: GapDelayLevel: %d is outside the broker's delay levels 1..18", cfg.GapDelayLevel)
	}
	if cfg.OnGap != GapDeadLetter && cfg.OnGap != GapApply {
		return fmt.Errorf("version config: OnGap: %d is neither GapDeadLetter nor GapApply", cfg.OnGap)
	}
	if cfg.AggregateExtractors == nil {
		cfg.AggregateExtractors = []Extractor{FromFunc("Delivery.AggregateID", func(d *consumer.Delivery) (string, error) {
			return d.AggregateID, nil
		})}
	}
	if cfg.VersionExtractors == nil {
		cfg.VersionExtractors = []Extractor{FromProperty("AGGREGATE_VERSION")}
	}
	for _, f := range []struct {
		name string
		list []Extractor
	}{{"AggregateExtractors", cfg.AggregateExtractors}, {"VersionExtractors", cfg.VersionExtractors}} {
		for i, x := range f.list {
			if x.Extract == nil || x.Name == "" {
				return fmt.Errorf("version config: %s: extractor %d (%q) needs a Name and an Extract func", f.name, i, x.Name)
			}
		}
	}
	return nil
}

// schemaCheckTimeout bounds Version's check of the aggregate_version table.
const schemaCheckTimeout = 5 * time.Second

// checkTable checks, in table mode (no Load), that store's database has the aggregate_version table.
func checkTable(store *dedup.Store, cfg VersionConfig) error {
	if cfg.Load != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), schemaCheckTimeout)
	defer cancel()
	versioned, ok := store.Protocol().(txproto.Versioned)
	if !ok {
		return fmt.Errorf("version: the store's protocol %T keeps no aggregate versions", store.Protocol())
	}
	if err := versioned.CheckAggregateSchema(ctx); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	return nil
}
