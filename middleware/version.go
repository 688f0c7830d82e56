package middleware

import (
	"context"
	"fmt"
	"strconv"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// Version checks each event's aggregate version against the stored one inside the dedup transaction, so
// that a stale event never overwrites newer state (a stale or repeated version is acknowledged as stale). It
// returns an error naming the field for an invalid cfg, a nil store without Load, or a missing
// aggregate_version table (wrapping dedup.ErrSchema). See the package doc, "Version".
func Version(store *dedup.Store, cfg VersionConfig) (Middleware, error) {
	if err := cfg.validate(store); err != nil {
		return Middleware{}, err
	}
	if err := checkTable(store, cfg); err != nil {
		return Middleware{}, err
	}
	v := &versionCheck{cfg: cfg, store: store, types: map[string]bool{}}
	for _, t := range cfg.EventTypes {
		v.types[t] = true
	}
	return Middleware{kind: kindVersion, wrap: (&versionMW{v: v}).wrap}, nil
}

// versionMW is a Version middleware; Chain knows it by its Middleware's kind.
type versionMW struct{ v *versionCheck }

func (w *versionMW) wrap(next consumer.Handler) consumer.Handler {
	v := w.v
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		return v.handle(ctx, d, next)
	})
}

// versionCheck is one Version middleware's configuration.
type versionCheck struct {
	cfg   VersionConfig
	store *dedup.Store
	types map[string]bool // cfg.EventTypes
}

// handle applies the version rules (see Version) to d.
func (v *versionCheck) handle(ctx context.Context, d *consumer.Delivery, next consumer.Handler) (consumer.Outcome, error) {
	tx, ok := dedup.TxFromContext(ctx)
	if !ok {
		return consumer.Outcome{}, fmt.Errorf("version: %w (put middleware.Version after middleware.Dedup)", dedup.ErrNoTx)
	}
	if len(v.types) > 0 && !v.types[d.EventType] {
		return next.Handle(ctx, d)
	}
	version, unchecked := v.identify(d)
	if unchecked != "" {
		if v.cfg.Require || version < 0 {
			return withCause(consumer.DeadLetter(unchecked), causelabel.Permanent), nil
		}
		return next.Handle(ctx, d)
	}
	stored, err := v.stored(ctx, d)
	if err != nil {
		return consumer.Outcome{}, err
	}
	name := fmt.Sprintf("aggregate %s %s", v.cfg.AggregateType, d.AggregateID)
	switch {
	case version <= stored:
		return consumer.Stale(fmt.Sprintf("%s: event version %d ≤ stored %d", name, version, stored)), nil
	case version > stored+1 && v.waitForGap(d):
		return consumer.Retry(v.cfg.GapDelayLevel, gapReason(name, version, stored, d)), nil
	case version > stored+1 && v.cfg.OnGap == GapDeadLetter:
		return withCause(consumer.DeadLetter(gapReason(name, version, stored, d)), causelabel.VersionGap), nil
	}
	o, err := next.Handle(ctx, d)
	if err != nil || (o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate) || v.cfg.Load != nil {
		return o, err // only an outcome Dedup commits moves the version
	}
	if err := v.store.AdvanceAggregate(ctx, tx, d, v.cfg.AggregateType, stored, version); err != nil {
		return consumer.Outcome{}, err
	}
	return o, nil
}

// identify finds d's aggregate ID and version and sets them on d. When they cannot be checked it returns
// why (a dead letter's reason): the version is -1 when it is present but not an integer ≥ 1, else 0.
func (v *versionCheck) identify(d *consumer.Delivery) (int64, string) {
	id, idMisses := search(v.cfg.AggregateExtractors, d, nil)
	raw, versionMisses := search(v.cfg.VersionExtractors, d, nil)
	name := fmt.Sprintf("aggregate %s %s", v.cfg.AggregateType, id)
	if raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 {
			return -1, fmt.Sprintf("%s: event version %q is not an integer ≥ 1", name, raw)
		}
		d.Version = n
	}
	if id != "" {
		d.AggregateID = id
	}
	switch {
	case id == "":
		return 0, fmt.Sprintf("aggregate %s: no aggregate ID (%s)", v.cfg.AggregateType, explain(idMisses))
	case raw == "":
		return 0, fmt.Sprintf("%s: no version (%s)", name, explain(versionMisses))
	}
	return d.Version, ""
}

// stored is the aggregate's stored version: the loader's, or the aggregate_version row's (0: none).
func (v *versionCheck) stored(ctx context.Context, d *consumer.Delivery) (int64, error) {
	tx, _ := dedup.TxFromContext(ctx)
	if v.cfg.Load != nil {
		return v.cfg.Load(ctx, tx, d.AggregateID)
	}
	return v.store.AggregateVersion(ctx, tx, d, v.cfg.AggregateType)
}

// waitForGap reports whether a gap on d is retried: GapRetries deliveries are not used up, and d is not the
// last delivery (a retry there would be dead-lettered as exhausted instead of following OnGap).
func (v *versionCheck) waitForGap(d *consumer.Delivery) bool {
	return d.Attempt < v.cfg.GapRetries && !d.LastAttempt()
}

// gapReason explains a version gap: which versions are missing, after how many deliveries.
func gapReason(name string, version, stored int64, d *consumer.Delivery) string {
	return fmt.Sprintf("version gap: %s: event version %d, stored %d (versions %d..%d missing) on delivery %d",
		name, version, stored, stored+1, version-1, d.Attempt+1)
}
