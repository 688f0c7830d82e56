package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/topics"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// scanFlags are the flags the dlq commands share: which group's DLQ, which letters, how many, and whether
// to make a write-only DLQ readable first.
type scanFlags struct {
	group            string
	since, until     string
	eventType        string
	reason           string
	key              string
	limit            int
	eventIDProperty  string
	eventIDJSONField string
	fixPerm          bool
}

// addScanFlags registers the shared flags on fs; withFilters adds the letter filters and --limit too.
func (f *scanFlags) addScanFlags(fs *pflag.FlagSet, withFilters bool) {
	fs.StringVar(&f.group, "group", "", "consumer group whose DLQ (%DLQ%<group>) to read (required)")
	fs.StringVar(&f.eventIDProperty, "event-id-property", "EVENT_ID", "property holding a letter's event ID")
	fs.StringVar(&f.eventIDJSONField, "event-id-json-field", "", "top-level JSON body field holding the event ID when the property is absent (e.g. eventId)")
	fs.BoolVar(&f.fixPerm, "fix-perm", false, "make a write-only DLQ (perm 2) readable (perm 6) first, keeping its queue counts")
	if !withFilters {
		return
	}
	fs.StringVar(&f.since, "since", "", "only letters dead-lettered at or after T: RFC 3339 (2026-11-30T12:00:00Z) or a duration ago (2h, 3d)")
	fs.StringVar(&f.until, "until", "", "only letters dead-lettered before T (same forms as --since)")
	fs.StringVar(&f.eventType, "event-type", "", "only letters of this event type (EVENT_TYPE property, else the tag)")
	fs.StringVar(&f.reason, "reason", "", "only letters whose reason contains TEXT")
	fs.StringVar(&f.key, "key", "", "only letters with this KEYS entry or event ID")
	fs.IntVar(&f.limit, "limit", 0, "at most N letters (0: no limit); a scan stopped by the limit is incomplete (exit 1)")
}

// options checks the flags and returns the scan options; a bad value is a usage error (exit 2).
func (f *scanFlags) options(now time.Time) (dlqtool.ScanOptions, error) {
	if strings.TrimSpace(f.group) == "" {
		return dlqtool.ScanOptions{}, usageError("--group is required")
	}
	if f.limit < 0 {
		return dlqtool.ScanOptions{}, usageError("--limit %d: must be 0 (no limit) or more", f.limit)
	}
	opts := dlqtool.ScanOptions{
		Filter:           dlqtool.Filter{EventType: f.eventType, Reason: f.reason, Key: f.key},
		Limit:            f.limit,
		EventIDProperty:  f.eventIDProperty,
		EventIDJSONField: f.eventIDJSONField,
	}
	var err error
	if opts.Since, err = parseWhen(f.since, now); err != nil {
		return opts, usageError("--since: %w", err)
	}
	if opts.Until, err = parseWhen(f.until, now); err != nil {
		return opts, usageError("--until: %w", err)
	}
	if !opts.Since.IsZero() && !opts.Until.IsZero() && !opts.Since.Before(opts.Until) {
		return opts, usageError("--since %s is not before --until %s", f.since, f.until)
	}
	return opts, nil
}

// parseWhen parses an RFC 3339 time, or a duration before now ("90m", "2h", "3d"); "" is the zero time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration ago like 2h or 3d", s)
	}
	return now.Add(-d).UTC(), nil
}

// dlqCluster returns how to reach the cluster: name servers, namespace and ACL credentials from the global
// flags (globalOptions.cluster); a missing or invalid one is a usage error, credentials a broker refuses a
// failure naming the access key (checkAccess).
func dlqCluster(g *globalOptions) (topics.Cluster, error) {
	c, err := g.cluster()
	if err != nil {
		return topics.Cluster{}, usageError("%w", err)
	}
	if err := checkAccess(c, g.timeout); err != nil {
		return topics.Cluster{}, err
	}
	return c, nil
}

// scanDLQ runs the scan the flags describe: with --fix-perm it first makes a write-only DLQ readable
// (printing what it did to stderr). A DLQ that does not exist gives an empty, complete result and a note on
// stderr. A write-only DLQ without --fix-perm, or any other scan error, is returned as a failure (exit 1).
func (f *scanFlags) scanDLQ(ctx context.Context, cmd *cobra.Command, g *globalOptions, opts dlqtool.ScanOptions) (dlqtool.ScanResult, error) {
	cluster, err := dlqCluster(g)
	if err != nil {
		return dlqtool.ScanResult{}, err
	}
	stderr := cmd.ErrOrStderr()
	if f.fixPerm {
		fix, err := dlqtool.FixPerm(ctx, cluster, f.group)
		switch {
		case errors.Is(err, dlqtool.ErrNoDLQ): // said below by the scan
		case err != nil:
			return dlqtool.ScanResult{}, failure(err)
		case fix.Changed:
			fmt.Fprintln(stderr, fix)
		}
	}
	res, err := dlqtool.Scan(ctx, cluster, f.group, opts)
	if errors.Is(err, dlqtool.ErrNoDLQ) {
		fmt.Fprintf(stderr, "no dead letters: %s does not exist (created on the first dead letter)\n", res.Topic)
		return dlqtool.ScanResult{Topic: res.Topic, Complete: true}, nil
	}
	if err != nil {
		return res, failure(err)
	}
	return res, nil
}

// reportIncomplete prints an incomplete scan's problems to w and returns the exit-1 error; nil when complete.
func reportIncomplete(w io.Writer, res dlqtool.ScanResult) error {
	if res.Complete {
		return nil
	}
	fmt.Fprintf(w, "rmqguard: incomplete scan of %s (%d letters read, %d selected); missing letters possible:\n", res.Topic, res.Read, len(res.Letters))
	for _, p := range res.Problems {
		fmt.Fprintln(w, "  -", p)
	}
	return failure(nil)
}

// scan is the step list, show and export share: the flags' options at now, then scanDLQ bounded by --timeout.
func (f *scanFlags) scan(cmd *cobra.Command, g *globalOptions, now time.Time) (dlqtool.ScanResult, error) {
	opts, err := f.options(now)
	if err != nil {
		return dlqtool.ScanResult{}, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	return f.scanDLQ(ctx, cmd, g, opts)
}

// exactArgs is cobra.ExactArgs returning a usage error (exit 2) naming what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("want %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}
