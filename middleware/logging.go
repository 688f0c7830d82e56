package middleware

import (
	"context"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
)

// Logging writes one debug line per run of the rest of the chain ("handler run"): group, topic, msg_id,
// keys, event_id, attempt (ReconsumeTimes), the chain's outcome, duration (the run's wall time), reason
// and error when set; never the body. It is a tracing aid, off unless the logger enables debug: the
// consumer itself logs each message's final decision once, at the level that says whether a person must
// look (consumer.WithLogger), so Logging is not part of the recommended chain. A message's chain may run
// more than once before its decision (a batch handled again after its first pass, or after losing its
// shared transaction, a run repeated after a wait for the store): Logging writes a line for each run, the
// consumer one per message. In a batch's first pass the run ends at Dedup, which defers the handler:
// "processed: deferred to the batch's commit".
// A nil log is zap.NewNop() (no lines).
func Logging(log *zap.Logger) Middleware {
	if log == nil {
		log = zap.NewNop()
	}
	return Middleware{kind: kindLogging, wrap: (&loggingMW{log: log}).wrap}
}

// loggingMW is a Logging middleware; Chain knows it by its Middleware's kind.
type loggingMW struct{ log *zap.Logger }

func (w *loggingMW) wrap(next consumer.Handler) consumer.Handler {
	log := w.log
	return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if !log.Core().Enabled(zapcore.DebugLevel) {
			return next(ctx, d) // no line is written: no need to time the run
		}
		start := time.Now()
		o, err := next(ctx, d)
		if ce := log.Check(zapcore.DebugLevel, "handler run"); ce != nil {
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
