package consumer

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// WithBackground makes Start run fn in a goroutine of its own once the client has started, and Shutdown
// cancel fn's context after the drain and the client's shutdown, then wait for fn to return: for work
// that lives with the consumer, such as the outbox relay (outbox.Outbox.Run). fn's error, if any, is
// logged (error level); it does not stop the consumer. It may be given several times; a nil fn is ignored.
func WithBackground(fn func(ctx context.Context) error) Option {
	return func(o *options) {
		if fn != nil {
			o.background = append(o.background, fn)
		}
	}
}

// background runs the functions of WithBackground between Start and Shutdown.
type background struct {
	fns    []func(context.Context) error
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start runs each function once; later calls do nothing.
func (b *background) start(log *zap.Logger, group string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil || len(b.fns) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for i, fn := range b.fns {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := fn(ctx); err != nil {
				log.Error("background function failed", zap.String("group", group), zap.Int("background", i), zap.Error(err))
			}
		}()
	}
}

// stop cancels the functions' context and waits for them to return.
func (b *background) stop() {
	b.mu.Lock()
	cancel := b.cancel
	b.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	b.wg.Wait()
}
