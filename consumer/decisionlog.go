package consumer

import (
	"errors"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/internal/batch"
)

// One log line per message at its final decision (Consumer.report); the levels and fields are documented
// on WithLogger. Error lines carry no stack trace: WithLogger turns off zap's AddStacktrace, since the
// stack of the consumer's own call site says nothing about the message.

// withoutStacks returns log with zap's automatic stack traces turned off; zap's production config adds
// one to every line at error level and above (zap.NewProductionConfig: AddStacktrace(ErrorLevel)).
func withoutStacks(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false })))
}

// decisionLevel returns the level and the text of the log line of dec (see the rules above).
func decisionLevel(d *Delivery, dec Decision) (zapcore.Level, string) {
	switch k := dec.Outcome.Kind; {
	case dec.BatchRetried:
		return zapcore.InfoLevel, "message acknowledged by its handler but its batch is retried; it comes back as a duplicate"
	case k == KindProcessed:
		return zapcore.DebugLevel, "message processed"
	case k == KindDuplicate:
		return zapcore.DebugLevel, "duplicate message acknowledged"
	case k == KindStale:
		return zapcore.DebugLevel, "stale message acknowledged"
	case k == KindUnsubscribed:
		return zapcore.DebugLevel, "message acknowledged without handling: the group no longer subscribes its tag"
	case k == KindDeadLettered:
		return zapcore.ErrorLevel, "message dead-lettered"
	case k == KindDeadLetter:
		return zapcore.ErrorLevel, "message dead-lettered by the broker"
	case k == KindUnavailable:
		return zapcore.WarnLevel, "store unavailable: message retried"
	case k == kindUnset:
		return zapcore.ErrorLevel, "handler returned no outcome and no error; message retried (the zero Outcome is not a success)"
	case retryNeedsAttention(d, dec):
		return zapcore.WarnLevel, "message retried"
	default:
		return zapcore.InfoLevel, "message retried"
	}
}

// retryNeedsAttention reports whether a retry logs at warn: the next delivery is the message's last, this
// one was, the store was unavailable, or the chain's dead letter was not published.
func retryNeedsAttention(d *Delivery, dec Decision) bool {
	lastAhead := d.MaxAttempts > 0 && d.Attempt+1 >= d.MaxAttempts
	return lastAhead || errors.Is(dec.Err, batch.ErrStoreUnavailable) || dec.Chain.Kind == KindDeadLetter
}

// logDecision writes the one line of d's final decision: group, topic, msg_id, event_id, attempt
// (ReconsumeTimes), outcome, duration (Decision.Elapsed), and when set cause, reason, error,
// chain_outcome (when the chain said something else) and batch_retried. Fields are built only when the
// level is enabled: at 10,000 messages/s with debug off a success costs one level check.
func (c *Consumer) logDecision(d *Delivery, dec Decision) {
	level, msg := decisionLevel(d, dec)
	ce := c.log.Check(level, msg)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 12)
	fields = append(fields,
		zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
		zap.String("event_id", d.EventID), zap.Int("attempt", d.Attempt), zap.Stringer("outcome", dec.Outcome.Kind),
		zap.Duration("duration", dec.Elapsed))
	if dec.Outcome.Cause != "" {
		fields = append(fields, zap.String("cause", dec.Outcome.Cause))
	}
	if dec.Outcome.Reason != "" {
		fields = append(fields, zap.String("reason", dec.Outcome.Reason))
	}
	if dec.Err != nil {
		fields = append(fields, zap.Error(dec.Err))
	}
	if dec.Chain.Kind != dec.Outcome.Kind {
		fields = append(fields, zap.Stringer("chain_outcome", dec.Chain.Kind))
	}
	if dec.BatchRetried {
		fields = append(fields, zap.Bool("batch_retried", true))
	}
	ce.Write(fields...)
}
