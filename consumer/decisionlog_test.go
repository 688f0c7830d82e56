package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	ibatch "github.com/rmqguard/rmqguard/internal/batch"
)

// productionLike is a logger on an observer core at debug with zap's production stack option
// (AddStacktrace at error level), so that a line that would carry a "stacktrace" shows it in Entry.Stack.
func productionLike() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel)), logs
}

// withEventID wraps h so that the delivery carries event ID e-<key>, as middleware.EventID would set it.
func withEventID(h consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		d.EventID = "e-" + d.Msg.GetKeys()
		return h.Handle(ctx, d)
	})
}

// linesFor returns the log lines that name the message msgID.
func linesFor(logs *observer.ObservedLogs, msgID string) []observer.LoggedEntry {
	return logs.FilterField(zap.String("msg_id", msgID)).All()
}

// Each message's final decision is one line from the consumer, at the level that says
// whether a person must look — successes at debug, retries at info (warn when the next delivery is the
// last or the store is unavailable), dead letters and undecided handlers at error — with its fields and
// without a stack trace even under zap's production options.
func TestDecisionLog_LineLevelPerOutcome(t *testing.T) {
	storeDown := fmt.Errorf("claim: %w", ibatch.ErrStoreUnavailable)
	for _, tc := range []struct {
		name     string
		o        consumer.Outcome
		err      error
		attempt  int32 // ReconsumeTimes; MaxAttempts is 3
		tag      string
		sink     bool
		level    zapcore.Level
		outcome  string
		reason   string
		withCaus string
	}{
		{"processed", consumer.Processed(), nil, 0, "", false, zapcore.DebugLevel, "processed", "", ""},
		{"duplicate", consumer.Duplicate(), nil, 1, "", false, zapcore.DebugLevel, "duplicate", "", "unknown"},
		{"stale", consumer.Stale("version 1 <= 2"), nil, 0, "", false, zapcore.DebugLevel, "stale", "version 1 <= 2", ""},
		{"unsubscribed", consumer.Processed(), nil, 1, "OrderPaid", false, zapcore.DebugLevel, "unsubscribed", "tag OrderPaid not subscribed", ""},
		{"retry, attempts left", consumer.Retry(0, "busy"), errors.New("busy"), 0, "", false, zapcore.InfoLevel, "retry", "busy", ""},
		{"retry, next delivery is the last", consumer.Retry(0, "busy"), errors.New("busy"), 2, "", false, zapcore.WarnLevel, "retry", "busy", ""},
		{"retry, store unavailable", consumer.Retry(0, "store"), storeDown, 0, "", false, zapcore.WarnLevel, "retry", "store", ""},
		{"retry on the last delivery", consumer.Retry(0, "busy"), errors.New("busy"), 3, "", false, zapcore.ErrorLevel, "dead_letter", "busy", "exhausted"},
		{"dead letter published", consumer.DeadLetter("bad json"), nil, 0, "", true, zapcore.ErrorLevel, "dead_lettered", "bad json", "permanent"},
		{"dead letter to the broker's DLQ", consumer.DeadLetter("bad json"), nil, 0, "", false, zapcore.ErrorLevel, "dead_letter", "bad json", "permanent"},
		{"undecided", consumer.Outcome{}, nil, 0, "", false, zapcore.ErrorLevel, "unset", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := productionLike()
			cfg := validConfig()
			cfg.MaxAttempts = 3
			cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER", Expression: "OrderCreated"}}
			opts := []consumer.Option{consumer.WithLogger(log), consumer.WithDeadLetterSink(nil)}
			if tc.sink {
				opts = append(opts, consumer.WithDeadLetterSink(&fakeSink{}))
			}
			_, fp := newConsumer(t, cfg, withEventID(handlerReturning(tc.o, tc.err)), opts...)
			m := orderMsg("o-1")
			m.WithTag("OrderCreated")
			if tc.tag != "" {
				m.WithTag(tc.tag)
			}
			m.ReconsumeTimes = tc.attempt

			fp.deliver(t, "ORDER", m)

			require.Equal(t, 1, logs.Len(), "one line for the message: %v", logs.All())
			line := logs.All()[0]
			assert.Equal(t, tc.level, line.Level, line.Message)
			assert.Empty(t, line.Stack, "no stack trace on a decision line")
			f := line.ContextMap()
			assert.Equal(t, "cg", f["group"])
			assert.Equal(t, "ORDER", f["topic"])
			assert.Equal(t, "msg-o-1", f["msg_id"])
			assert.Equal(t, int64(tc.attempt), f["attempt"])
			assert.Equal(t, tc.outcome, f["outcome"])
			assert.Contains(t, f, "duration")
			if tc.outcome != "unsubscribed" {
				assert.Equal(t, "e-o-1", f["event_id"], "the event ID the chain extracted")
			}
			if tc.reason != "" {
				assert.Equal(t, tc.reason, f["reason"])
			}
			if tc.withCaus != "" {
				assert.Equal(t, tc.withCaus, f["cause"])
			}
			if tc.err != nil {
				assert.Equal(t, tc.err.Error(), f["error"])
			}
		})
	}
}

// A message that waited OutageWait for the store is a retry logged once at warn.
func TestDecisionLog_UnavailableDecisionIsOneWarning(t *testing.T) {
	s := newStore()
	log, logs := productionLike()
	cfg := validConfig()
	cfg.HandlerTimeout, cfg.OutageWait = time.Second, 200*time.Millisecond
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(s.handle), consumer.WithHealthProbe(s), consumer.WithLogger(log))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))
	require.NoError(t, c.Shutdown(context.Background()))

	require.Equal(t, rmq.ConsumeRetryLater, res)
	lines := linesFor(logs, "msg-o-1")
	var infoOrAbove []observer.LoggedEntry
	for _, l := range lines {
		if l.Level >= zapcore.InfoLevel {
			infoOrAbove = append(infoOrAbove, l)
		}
	}
	require.Len(t, infoOrAbove, 1, "one line a person sees for the message: %v", lines)
	assert.Equal(t, zapcore.WarnLevel, infoOrAbove[0].Level)
	assert.Equal(t, "unavailable", infoOrAbove[0].ContextMap()["outcome"])
}

// Under zap's production config (JSON, AddStacktrace at error) a dead letter's line is
// at error and has no "stacktrace" key; the reason and cause are fields.
func TestDecisionLog_DeadLetterLineHasNoStacktraceUnderProductionConfig(t *testing.T) {
	for name, sink := range map[string]consumer.DeadLetterSink{"published": &fakeSink{}, "broker's DLQ": nil} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			cfg := zap.NewProductionConfig()
			core := zapcore.NewCore(zapcore.NewJSONEncoder(cfg.EncoderConfig), zapcore.AddSync(&buf), cfg.Level)
			log := zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))
			_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("invalid JSON"), nil),
				consumer.WithLogger(log), consumer.WithDeadLetterSink(sink))

			fp.deliver(t, "ORDER", orderMsg("o-1"))

			lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
			require.Len(t, lines, 1, buf.String())
			var line map[string]any
			require.NoError(t, json.Unmarshal(lines[0], &line))
			assert.Equal(t, "error", line["level"])
			assert.NotContains(t, line, "stacktrace")
			assert.Equal(t, "invalid JSON", line["reason"])
			assert.Equal(t, "permanent", line["cause"])
		})
	}
}

// A batch of 3 (processed, duplicate, dead letter) logs exactly one decision line per
// message, each at its own level.
func TestDecisionLog_BatchOfThreeLogsOneDecisionLinePerMessage(t *testing.T) {
	log, logs := productionLike()
	cfg := validConfig()
	cfg.BatchSize = 8
	h := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.Msg.GetKeys() {
		case "b-1":
			return consumer.Processed(), nil
		case "b-2":
			return consumer.Duplicate(), nil
		default:
			return consumer.DeadLetter("bad json"), nil
		}
	}
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithLogger(log), consumer.WithDeadLetterSink(&fakeSink{}))

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3")...)

	require.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, 3, logs.Len(), "nothing but the three decisions: %v", logs.All())
	for id, level := range map[string]zapcore.Level{"msg-b-1": zapcore.DebugLevel, "msg-b-2": zapcore.DebugLevel, "msg-b-3": zapcore.ErrorLevel} {
		lines := linesFor(logs, id)
		require.Len(t, lines, 1, "one decision line for %s", id)
		assert.Equal(t, level, lines[0].Level, id)
		assert.Empty(t, lines[0].Stack)
	}
}

// A batch whose shared transaction is lost is handled again; each message still gets one decision line, from
// the last pass. When the second pass is lost too, each member is handled alone: still one line each, and one
// info line says the batch was lost again.
func TestDecisionLog_LostBatchHandledAgainLogsOneDecisionPerMessage(t *testing.T) {
	for _, fails := range []int{1, 2} {
		t.Run(fmt.Sprintf("lost in %d passes", fails), func(t *testing.T) {
			passes, runs := 0, 0
			h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				runs++
				b := ibatch.FromContext[consumer.Outcome, string](ctx)
				if b == nil {
					return consumer.Processed(), nil // handled alone
				}
				if b.Resource("tx") == nil {
					passes++
					r := &sharedResource{}
					if passes <= fails {
						r.err = fmt.Errorf("commit in pass %d: deadlock", passes)
					}
					require.NoError(t, b.Attach("tx", r))
				}
				if d.Msg.GetKeys() == "b-2" {
					return consumer.Duplicate(), nil // did not depend on the transaction
				}
				b.Depend("tx", b.Member())
				return consumer.Processed(), nil
			}
			log, logs := productionLike()
			cfg := validConfig()
			cfg.BatchSize = 8
			_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithLogger(log))

			fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3")...)

			require.Equal(t, 3*(fails+1), runs, "every member handled in every pass")
			for _, id := range []string{"msg-b-1", "msg-b-2", "msg-b-3"} {
				lines := linesFor(logs, id)
				require.Len(t, lines, 1, "one decision line for %s: %v", id, logs.All())
				assert.Equal(t, zapcore.DebugLevel, lines[0].Level, id)
			}
			again := logs.FilterMessage("the batch's shared transaction was lost again; handling each member alone").All()
			if fails == 2 {
				require.Len(t, again, 1)
				assert.Equal(t, zapcore.InfoLevel, again[0].Level)
			} else {
				assert.Empty(t, again)
			}
		})
	}
}
