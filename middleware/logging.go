package middleware

import (
	"context"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
)

// Logging writes one debug line per run of the rest of the chain (never the body): a tracing aid, not part
// of the recommended chain; the consumer logs each final decision itself. A nil log writes nothing. See the
// package doc, "Logging".
func Logging(log *zap.Logger) Middleware {
	if log == nil {
		log = zap.NewNop()
	}
	return Middleware{kind: kindLogging, wrap: (&loggingMW{log: log}).wrap}
}

// loggingMW is a Logging middleware; Chain knows it by its Middleware's kind.
type loggingMW struct{ log *zap.Logger }

func (w *loggingMW) wrap(next consumer.Handler) consumer.Handler {
	return &loggingHandler{log: w.log, next: next}
}

// loggingHandler is the handler a loggingMW wraps around next.
type loggingHandler struct {
	log  *zap.Logger
	next consumer.Handler
}

func (h *loggingHandler) Handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	if !h.log.Core().Enabled(zapcore.DebugLevel) {
		return h.next.Handle(ctx, d) // no line is written: no need to time the run
	}
	start := time.Now()
	o, err := h.next.Handle(ctx, d)
	if ce := h.log.Check(zapcore.DebugLevel, "handler run"); ce != nil {
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
