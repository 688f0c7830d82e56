package consumer

import (
	"context"
	"errors"
)

// Run starts the consumer, consumes until ctx ends (e.g. signal.NotifyContext on SIGINT/SIGTERM), then
// shuts it down, and is the whole life of a consumer in a service's main:
//
//	return c.Run(ctx)
//
// It returns Start's error at once (after a Shutdown that releases what Start had begun); else, when ctx
// ends, Shutdown's error: nil after a clean stop, context.DeadlineExceeded wrapped when handlers still
// running at Config.DrainTimeout had to be cancelled (their messages come back after a restart, no attempt
// spent). ctx's own end is the normal way to stop and is not an error. Shutdown runs on a context of its
// own, bounded by DrainTimeout (plus up to 5 s for cancelled handlers to return, and the client's
// shutdown), not on the ended ctx. A Consumer runs once: Run after a Shutdown (or a Run that returned)
// returns ErrStopped at once.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.Start(); err != nil {
		return errors.Join(err, c.Shutdown(context.Background()))
	}
	<-ctx.Done()
	return c.Shutdown(context.Background())
}
