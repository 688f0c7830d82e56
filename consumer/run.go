package consumer

import (
	"context"
	"errors"
)

// Run starts the consumer, consumes until ctx ends (e.g. signal.NotifyContext on SIGINT/SIGTERM), then
// shuts it down within DrainTimeout: the whole life of a consumer in a main (return c.Run(ctx)). It
// returns Start's error, or Shutdown's. See the package doc, "Run".
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.Start(); err != nil {
		return errors.Join(err, c.Shutdown(context.Background()))
	}
	<-ctx.Done()
	return c.Shutdown(context.Background())
}
