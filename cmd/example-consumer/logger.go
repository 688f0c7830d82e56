package main

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Sampling of debug lines: per second and per message text, the first debugSampleFirst lines, then one
// in debugSampleThereafter (zap.NewProductionConfig's own figures).
const (
	debugSampleFirst      = 100
	debugSampleThereafter = 100
)

// newLogger builds the consumer's logger: zap's production JSON encoding on out at level, with zap's
// sampler on debug lines only. zap.NewProductionConfig samples every level — per second, for each level
// and message text, the first 100 lines and then one in 100 — and the consumer's decision lines share
// their text per outcome ("message retried", "message dead-lettered"), so at 10,000 messages/s a burst
// of retries or dead letters would lose most of its lines. Here info and above (retries, dead letters,
// the consumer's events) are never dropped; debug lines (one per processed, duplicate, stale or
// unsubscribed message: the volume that grows with throughput) are sampled. Error lines carry no
// "stacktrace" (the consumer and Recover turn it off; a panic's stack is Recover's "stack" field).
func newLogger(level zapcore.Level, out zapcore.WriteSyncer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	debug := zapcore.NewCore(enc, out, zap.LevelEnablerFunc(func(l zapcore.Level) bool {
		return l < zapcore.InfoLevel && level.Enabled(l)
	}))
	rest := zapcore.NewCore(enc.Clone(), out, zap.LevelEnablerFunc(func(l zapcore.Level) bool {
		return l >= zapcore.InfoLevel && level.Enabled(l)
	}))
	sampled := zapcore.NewSamplerWithOptions(debug, time.Second, debugSampleFirst, debugSampleThereafter)
	return zap.New(zapcore.NewTee(sampled, rest), zap.AddCaller())
}

// levelFlag is a pflag.Value for a zapcore.Level ("debug", "info", "warn", "error").
type levelFlag struct{ level *zapcore.Level }

// String returns the level's name.
func (f *levelFlag) String() string { return f.level.String() }

// Set parses s as a level name; an unknown name is an error naming the accepted ones.
func (f *levelFlag) Set(s string) error { return f.level.Set(s) }

// Type names the flag's value in --help.
func (f *levelFlag) Type() string { return "level" }
