package consumer

import "context"

// Handler handles one Delivery and says what happened. A non-nil error with an unset Outcome means
// "retry"; an error never acknowledges a message, whatever Outcome accompanies it.
type Handler func(ctx context.Context, d *Delivery) (Outcome, error)
