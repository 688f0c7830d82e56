package consumer_test

import (
	"context"
	"io"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// BenchmarkDecisionLog measures one processed message through the consumer's callback with the
// decision line off (no logger; a production JSON logger at info, where a success is a debug line) and on
// (the same logger at debug, writing to io.Discard). Compare with benchstat: at info the line should cost
// one level check.
func BenchmarkDecisionLog(b *testing.B) {
	production := func(level zapcore.Level) *zap.Logger {
		enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
		return zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), level), zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel))
	}
	for name, log := range map[string]*zap.Logger{
		"nop":   zap.NewNop(),
		"info":  production(zapcore.InfoLevel),
		"debug": production(zapcore.DebugLevel),
	} {
		b.Run(name, func(b *testing.B) {
			fp := newFakePush()
			unusable := &fakeProducer{fail: 1 << 30}
			_, err := consumer.New(validConfig(), withEventID(handlerReturning(consumer.Processed(), nil)),
				consumer.WithLogger(log),
				consumer.WithDeadLetterProducer(func() (consumer.Producer, error) { return unusable, nil }),
				consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return fp, nil }))
			if err != nil {
				b.Fatal(err)
			}
			fp.mu.Lock()
			cb := fp.callbacks["ORDER"]
			fp.mu.Unlock()
			msg := orderMsg("o-1")
			ctx := primitive.WithConcurrentlyCtx(context.Background(), primitive.NewConsumeConcurrentlyContext())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cb(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
