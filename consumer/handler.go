package consumer

import "context"

// Handler handles one Delivery and says what happened. A non-nil error with an unset Outcome means
// "retry"; an error never acknowledges a message, whatever Outcome accompanies it.
type Handler interface {
	Handle(ctx context.Context, d *Delivery) (Outcome, error)
}

// HandlerFunc is a function used as a Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) (Outcome, error)

// Handle calls f(ctx, d).
func (f HandlerFunc) Handle(ctx context.Context, d *Delivery) (Outcome, error) { return f(ctx, d) }
