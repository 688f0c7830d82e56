package consumer

import (
	"fmt"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// concurrencyChecker is something the handlers depend on whose safety depends on how many handlers run at
// once: *dedup.Store, whose transactions may take their connections from a bounded pool the handlers also
// use. CheckConcurrency gets the most handlers the consumer runs at once (0: not bounded by the Config) and
// returns why that is too many, naming the fix.
type concurrencyChecker interface {
	CheckConcurrency(handlers int) error
}

// configChecker is a condition that also depends on the consumer's Config beyond how many handlers run at
// once (middleware.Lease: a lease longer than HandlerTimeout, one message per callback). CheckConfig gets
// the Config with its defaults applied and returns why the handlers cannot run safely with it, naming the fix.
type configChecker interface {
	CheckConfig(cfg Config) error
}

// maxHandlers returns the most handler runs a consumer with c (defaults applied) makes at once: the client
// runs ConsumeGoroutines callbacks for each topic it consumes (every subscription, and %RETRY%<group>),
// one handler run each at a time (a batch's members run one after another); 0 in orderly mode, where it
// runs one per queue it holds, which the Config does not bound.
func (c Config) maxHandlers() int {
	if c.Orderly {
		return 0
	}
	return c.ConsumeGoroutines * (len(c.Subscriptions) + 1)
}

// handlersAtOnce says how maxHandlers is reached, for an error message.
func (c Config) handlersAtOnce() string {
	if c.Orderly {
		return "orderly consumption runs one handler per queue it holds"
	}
	return fmt.Sprintf("%d handlers = ConsumeGoroutines %d × (%d subscribed topics + %s)",
		c.maxHandlers(), c.ConsumeGoroutines, len(c.Subscriptions), rmq.RetryTopic(c.Group))
}

// concurrencyCheck is one check New and Start make: where it came from, for the error, and the checker.
type concurrencyCheck struct {
	from    string
	checker concurrencyChecker
}

// checkConcurrency runs every check against the handlers a consumer with cfg runs at once; where names
// the caller (consumer.New, consumer.Start) in the error.
func checkConcurrency(cfg Config, checks []concurrencyCheck, where string) error {
	for _, ch := range checks {
		if cc, ok := ch.checker.(configChecker); ok {
			if err := cc.CheckConfig(cfg); err != nil {
				return fmt.Errorf("%s: %s: %w", where, ch.from, err)
			}
		}
		if err := ch.checker.CheckConcurrency(cfg.maxHandlers()); err != nil {
			return fmt.Errorf("%s: %s: %w (%s)", where, ch.from, err, cfg.handlersAtOnce())
		}
	}
	return nil
}

// concurrencyChecks returns the checks of a consumer: the handler's condition, if it has one, and the
// health probe when it is a concurrencyChecker.
func concurrencyChecks(cond concurrencyChecker, probe healthProbe) []concurrencyCheck {
	var checks []concurrencyCheck
	if cond != nil {
		checks = append(checks, concurrencyCheck{from: "handler", checker: cond})
	}
	if p, ok := probe.(concurrencyChecker); ok {
		checks = append(checks, concurrencyCheck{from: "WithHealthProbe", checker: p})
	}
	return checks
}
