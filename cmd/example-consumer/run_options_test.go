package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Invalid run flags fail at start, each named with why.
func TestRunOptions_InvalidFlagsNameTheFlag(t *testing.T) {
	ok := runOptions{maxAttempts: 3, goroutines: 4, handlerTimeout: time.Second, drainTimeout: time.Second,
		gapRetries: 3, gapDelayLevel: 1}
	require.NoError(t, ok.validate())

	bad := ok
	bad.gapRetries, bad.gapDelayLevel, bad.dlqInterval = -1, 19, -time.Second
	err := bad.validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--dlq-interval -1s: must be ≥ 0 (0: no DLQ census)")
	assert.Contains(t, err.Error(), "--gap-retries -1: must be ≥ 0")
	assert.Contains(t, err.Error(), "--gap-delay-level 19: must be a broker delay level, 1..18")
}
