package consumer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
)

// The limits Validate documents are inclusive: the edge values are accepted, one past them is refused
// with the field named.
func TestConfigValidate_EdgeValuesAreAccepted(t *testing.T) {
	for name, mod := range map[string]func(*consumer.Config){
		"Group of MaxGroupLength":       func(c *consumer.Config) { c.Group = strings.Repeat("g", 255) },
		"MaxAttempts 1":                 func(c *consumer.Config) { c.MaxAttempts = 1 },
		"MaxAttempts 1000":              func(c *consumer.Config) { c.MaxAttempts = 1000 },
		"ConsumeGoroutines 1":           func(c *consumer.Config) { c.ConsumeGoroutines = 1 },
		"ConsumeGoroutines 1000":        func(c *consumer.Config) { c.ConsumeGoroutines = 1000 },
		"BatchSize 1":                   func(c *consumer.Config) { c.BatchSize = 1 },
		"HandlerTimeout just below":     func(c *consumer.Config) { c.HandlerTimeout, c.ConsumeTimeout = time.Second-1, time.Second },
		"DrainTimeout 1ns":              func(c *consumer.Config) { c.DrainTimeout = 1 },
		"StartFromFirstOffset":          func(c *consumer.Config) { c.StartFromFirstOffset = true },
		"name server on port 65535":     func(c *consumer.Config) { c.NameServers = []string{"ns:65535"} },
		"name server on port 1":         func(c *consumer.Config) { c.NameServers = []string{"ns:1"} },
		"IPv6 name server (last colon)": func(c *consumer.Config) { c.NameServers = []string{"[::1]:9876"} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := validConfig()
			mod(&cfg)
			assert.NoError(t, cfg.Validate())
		})
	}
}

func TestConfigValidate_OnePastTheEdgeIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		field string
		mod   func(*consumer.Config)
	}{
		"Group longer than MaxGroupLength": {"Group", func(c *consumer.Config) { c.Group = strings.Repeat("g", 255+1) }},
		"ConsumeGoroutines -1":             {"ConsumeGoroutines", func(c *consumer.Config) { c.ConsumeGoroutines = -1 }},
		"BatchSize past MaxBatchSize":      {"BatchSize", func(c *consumer.Config) { c.BatchSize = 1024 + 1 }},
		"ConsumeTimeout negative":          {"ConsumeTimeout", func(c *consumer.Config) { c.ConsumeTimeout = -time.Second }},
		"name server on port 65536":        {"NameServers", func(c *consumer.Config) { c.NameServers = []string{"ns:65536"} }},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := validConfig()
			tc.mod(&cfg)
			assert.Contains(t, fields(t, cfg.Validate()), tc.field)
		})
	}
}

// A handler that returns the zero Outcome and no error has decided nothing: the message is retried and
// the wrapper says so once, at error level (the message's decision line). A handler that returned an
// error or a real outcome gets its own decision line, without that text.
func TestConsume_F1_UndecidedHandlerIsLoggedOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		o       consumer.Outcome
		err     error
		wantLog bool
	}{
		"zero outcome, no error":    {consumer.Outcome{}, nil, true},
		"zero outcome with error":   {consumer.Outcome{}, errors.New("db down"), false},
		"processed, no error":       {consumer.Processed(), nil, false},
		"retry asked for, no error": {consumer.Retry(2, "busy"), nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			_, fp := newConsumer(t, validConfig(), handlerReturning(tc.o, tc.err), consumer.WithLogger(zap.New(core)))

			fp.deliver(t, "ORDER", orderMsg("o-1"))

			undecided := logs.FilterMessageSnippet("no outcome and no error")
			if !tc.wantLog {
				assert.Zero(t, undecided.Len())
				return
			}
			require.Equal(t, 1, undecided.Len())
			entry := undecided.All()[0]
			assert.Equal(t, zapcore.ErrorLevel, entry.Level)
			assert.Equal(t, "msg-o-1", entry.ContextMap()["msg_id"])
			assert.Equal(t, "cg", entry.ContextMap()["group"])
		})
	}
}

// combine reports the batch's first error: the one of the earliest failing member, for the logs.
func TestCombine_F10_KeepsTheFirstError(t *testing.T) {
	first, second := errors.New("b-2 failed"), errors.New("b-4 failed")
	o, err := consumer.Combine(
		[]consumer.Outcome{consumer.Processed(), {}, consumer.Processed(), consumer.Retry(3, "busy")},
		[]error{nil, first, nil, second})

	assert.Same(t, first, err)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, 3, o.DelayLevel)
	assert.Equal(t, rmq.ConsumeRetryLater, consumer.Resolve(o, err, consumer.Concurrent).Result)

	o, err = consumer.Combine([]consumer.Outcome{consumer.Processed(), consumer.Duplicate()}, []error{nil, nil})
	assert.NoError(t, err)
	assert.True(t, o.Kind.Acknowledges(), "a batch of successes is acknowledged: %v", o)
}
