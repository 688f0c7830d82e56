package consumer

import (
	"context"
	"fmt"
	"time"
)

// EnsureTopicsFunc creates the topics a consumer of cfg needs before it starts (topics.ForConsumer: the
// group's %RETRY% and %DLQ% topics). It returns an error naming the topic and the broker that failed.
type EnsureTopicsFunc func(ctx context.Context, cfg Config) error

// ensureTopicsTimeout bounds the EnsureTopicsFunc call in Start.
const ensureTopicsTimeout = 30 * time.Second

// WithEnsureTopics makes Start call ensure (with the Config after defaults, and a context that ends after
// 30 s or at Shutdown) before the client starts and subscribes, so that a new group's retry topic exists
// when the client first reads its routes: the client notices a topic created later only on its next route
// refresh (every 30 s), and the broker would create the DLQ only on the first dead letter (write-only
// before 4.9.2). An error fails Start, wrapped with the group. Use topics.ForConsumer; the consumer package
// cannot import it (topics names consumer types), hence the function value.
func WithEnsureTopics(ensure EnsureTopicsFunc) Option {
	return func(o *options) { o.ensureTopics = ensure }
}

// ensureTopics runs the WithEnsureTopics function, if any.
func (c *Consumer) ensureTopics() error {
	if c.ensure == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.runCtx, ensureTopicsTimeout)
	defer cancel()
	if err := c.ensure(ctx, c.cfg); err != nil {
		return fmt.Errorf("rmqguard consumer %s: start: ensure topics: %w", c.cfg.Group, err)
	}
	return nil
}
