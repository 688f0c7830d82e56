package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// countLevels decodes buf's JSON lines and counts them per level name.
func countLevels(t *testing.T, buf *bytes.Buffer) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, raw := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		var line map[string]any
		require.NoError(t, json.Unmarshal(raw, &line))
		n[line["level"].(string)]++
	}
	return n
}

// zap's production sampler would keep ~100 of 1,000 same-text lines a second; the
// example's logger keeps every retry and dead-letter line (info and above) and samples only the
// per-success debug lines.
func TestExampleLogger_KeepsEveryRetryAndDeadLetterLine(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(zapcore.DebugLevel, zapcore.AddSync(&buf))
	const burst = 1000
	for i := range burst {
		log.Debug("message processed", zap.Int("i", i))
		log.Info("message retried", zap.Int("i", i))
		log.Warn("message retried", zap.Int("i", i))
		log.Error("message dead-lettered", zap.Int("i", i))
	}

	n := countLevels(t, &buf)
	assert.Equal(t, burst, n["info"], "no retry line dropped")
	assert.Equal(t, burst, n["warn"])
	assert.Equal(t, burst, n["error"], "no dead-letter line dropped")
	assert.Less(t, n["debug"], burst, "debug lines are sampled")
	assert.GreaterOrEqual(t, n["debug"], debugSampleFirst, "the first lines of each second are kept")
}

// At the default level (info) the per-success debug lines are not written at all.
func TestExampleLogger_AtInfoWritesNoDebugLines(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(zapcore.InfoLevel, zapcore.AddSync(&buf))

	log.Debug("message processed")
	log.Info("message retried")
	log.Error("message dead-lettered")

	assert.Equal(t, map[string]int{"info": 1, "error": 1}, countLevels(t, &buf))
	assert.NotContains(t, buf.String(), "stacktrace", "the example's logger adds no stack traces")
}
