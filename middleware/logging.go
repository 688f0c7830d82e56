package middleware

import (
	"context"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
)

// Logging logs one line per message after the rest of the chain: group, topic, msg_id, keys, event_id,
// attempt (ReconsumeTimes), outcome, duration and the error if any; never the body. Successes and
// unavailable (the store is down: the consumer warns once per pause) log at info, retries at warn, dead
// letters and undecided outcomes at error. It logs the chain's outcome; when the consumer's final decision
// differs (a dead letter published: dead_lettered; a dead letter whose batch is retried: retry), the
// consumer logs one more line with both (consumer.Decision).
func Logging(log *zap.Logger) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			var start time.Time
			if mayLog(log.Core()) { // else no line is written: no need to time the run
				start = time.Now()
			}
			o, err := next(ctx, d)
			level := zapcore.InfoLevel
			switch {
			case o.Kind == consumer.KindUnavailable:
				// not the message's failure; the consumer logs the pause once, as a warning
			case o.Kind == consumer.KindRetry:
				level = zapcore.WarnLevel
			case !o.Kind.Acknowledges():
				level = zapcore.ErrorLevel
			}
			if ce := log.Check(level, "message handled"); ce != nil {
				fields := []zap.Field{
					zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
					zap.String("keys", d.Msg.GetKeys()), zap.String("event_id", d.EventID), zap.Int("attempt", d.Attempt),
					zap.Stringer("outcome", o.Kind), zap.Duration("duration", time.Since(start)),
				}
				if o.Reason != "" {
					fields = append(fields, zap.String("reason", o.Reason))
				}
				if err != nil {
					fields = append(fields, zap.Error(err))
				}
				ce.Write(fields...)
			}
			return o, err
		}
	}
}

// mayLog reports whether core writes lines at any level Logging uses (info, warn, error); levels are asked
// one by one, since a core may enable a level without the ones above it.
func mayLog(core zapcore.Core) bool {
	return core.Enabled(zapcore.InfoLevel) || core.Enabled(zapcore.WarnLevel) || core.Enabled(zapcore.ErrorLevel)
}
