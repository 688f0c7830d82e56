package middleware

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/metrics"
)

// StandardConfig configures Standard.
type StandardConfig struct {
	// Metrics, when set, puts Metrics outermost; nil (the default) leaves it out.
	Metrics *metrics.Metrics
	// Logger is Recover's logger for recovered panics (one error line with the stack); nil (the default) is
	// zap.NewProduction(), JSON on stderr, as the consumer's default.
	Logger *zap.Logger
	// EventID configures EventID; the zero value reads the EVENT_ID property (see EventIDConfig).
	EventID EventIDConfig
	// Store is Dedup's store: a *dedup.Store, or a fast-path layer wrapping one. Required: a nil Store (or
	// a nil *dedup.Store left by a failed dedup.NewStore) is refused.
	Store dedup.TxStore
	// Version, when set, adds Version(store, *Version) inside Dedup, with Store as its store when Store is
	// a *dedup.Store (otherwise VersionConfig.Load is needed); nil (the default) leaves Version out.
	Version *VersionConfig
}

// Standard returns h in rmqguard's recommended chain, outermost first: Metrics (if cfg.Metrics is set) →
// Recover → Classify → EventID → Deadline(0) → Dedup → Version (if cfg.Version is set) → h; exactly Chain(h,
// that list). A bad config, a nil Store or a nil h is an error naming the fix. See the package doc,
// "Standard".
func Standard(h consumer.Handler, cfg StandardConfig) (consumer.Handler, error) {
	var mws []Middleware
	if cfg.Metrics != nil {
		m, err := Metrics(cfg.Metrics)
		if err != nil {
			return nil, fmt.Errorf("middleware.Standard: %w", err)
		}
		mws = append(mws, m)
	}
	eventID, err := EventID(cfg.EventID)
	if err != nil {
		return nil, fmt.Errorf("middleware.Standard: EventID: %w", err)
	}
	dedupMW, err := Dedup(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("middleware.Standard: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		if log, err = zap.NewProduction(); err != nil {
			return nil, fmt.Errorf("middleware.Standard: the default logger: %w", err)
		}
	}
	mws = append(mws, Recover(log), Classify(), eventID, Deadline(0), dedupMW)
	if cfg.Version != nil {
		store, ok := cfg.Store.(*dedup.Store)
		if !ok && cfg.Version.Load == nil {
			return nil, fmt.Errorf("middleware.Standard: Version: Store is a %T, not a *dedup.Store: set VersionConfig.Load "+
				"(Version reads the aggregate_version table only through a *dedup.Store)", cfg.Store)
		}
		version, err := Version(store, *cfg.Version)
		if err != nil {
			return nil, fmt.Errorf("middleware.Standard: Version: %w", err)
		}
		mws = append(mws, version)
	}
	return Chain(h, mws...)
}
