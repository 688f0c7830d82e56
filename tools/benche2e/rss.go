package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// statusKB reads one "Name:   1234 kB" field of /proc/self/status, in kB.
func statusKB(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rss: %s: %w", field, err)
		}
		return kb, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	return 0, fmt.Errorf("rss: no %s in /proc/self/status", field)
}

// resetPeak resets the process's VmHWM to its current RSS (Linux: "5" written to /proc/self/clear_refs).
// It reports whether the reset worked; when not, VmHWM includes everything before.
func resetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// sampleRSS samples VmRSS every interval until ctx ends and returns a function giving the highest sample
// in kB so far.
func sampleRSS(ctx context.Context, interval time.Duration) func() int64 {
	var peak atomic.Int64
	sample := func() {
		if kb, err := statusKB("VmRSS"); err == nil && kb > peak.Load() {
			peak.Store(kb)
		}
	}
	sample()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return peak.Load
}
