package dlq

import (
	"context"
	"time"
)

// Filter selects letters; zero fields select everything.
type Filter struct {
	// Since and Until bound FailedAt (Since inclusive, Until exclusive); zero = unbounded.
	Since, Until time.Time
	// EventType selects letters whose EventType equals it.
	EventType string
	// Reason selects letters whose Reason contains it.
	Reason string
	// Key selects letters whose KEYS (space-separated) include it, or whose EventID equals it.
	Key string
}

// ScanOptions bound a scan of a DLQ.
type ScanOptions struct {
	Filter
	// Limit is the most letters returned (≤ 0: no limit); hitting it makes the result incomplete.
	Limit int
}

// ScanResult is what a scan found, and whether it saw the whole DLQ.
type ScanResult struct {
	// Letters are the selected letters, queue by queue from the oldest.
	Letters []Letter
	// Complete is false when some queue could not be read to its end or the limit was hit; Problems say why.
	Complete bool
	// Problems describe each reason the scan is incomplete, e.g. "queue 0: pull: timeout".
	Problems []string
}

// Scan reads group's DLQ on cluster and returns the letters opts selects.
//
// SKELETON: it reads through Read and applies no filter or bound yet; the dlq-read work replaces it.
func Scan(ctx context.Context, cluster Cluster, group string, opts ScanOptions) (ScanResult, error) {
	if err := cluster.Validate(); err != nil {
		return ScanResult{}, err
	}
	msgs, err := Read(ctx, cluster.NameServers, group, opts.Limit)
	res := ScanResult{Complete: err == nil}
	for _, m := range msgs {
		res.Letters = append(res.Letters, NewLetter(group, m))
	}
	return res, err
}
