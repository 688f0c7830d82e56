package middleware

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
)

// ErrPanic marks the error of a recovered handler panic; test it with errors.Is.
var ErrPanic = errors.New("handler panicked")

// Recover turns a panic inside the chain into a retry: the outcome is consumer.Retry and the error wraps
// ErrPanic with the panic value. The stack is logged at error level with group, topic and msg_id.
// A transaction opened inside is rolled back by the middleware that opened it (deferred rollback).
func Recover(log *zap.Logger) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (o consumer.Outcome, err error) {
			defer func() {
				if r := recover(); r != nil {
					log.Error("handler panic recovered; message will be retried",
						zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
						zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
					o, err = consumer.Retry(0, "panic"), fmt.Errorf("%w: %v", ErrPanic, r)
				}
			}()
			return next(ctx, d)
		}
	}
}
