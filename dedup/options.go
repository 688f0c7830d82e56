package dedup

import (
	"fmt"
	"unicode/utf8"

	"go.uber.org/zap"
)

// Option configures a Store (see NewStore).
type Option func(*Store) error

// WithScope names the dedup scope: the value written to processed_event.consumer_group and checked by
// Claim and Confirm, in place of the delivery's consumer group. By default (no WithScope) the scope is the
// consumer group. Give a renamed group (inventory → inventory-v2) the old group's name as its scope, so
// that re-reading a topic applies nothing twice; two groups that must each process every event once need
// two scopes. One Store serves one scope. The scope must be 1 to MaxGroupLength characters.
func WithScope(scope string) Option {
	return func(s *Store) error {
		if scope == "" || utf8.RuneCountInString(scope) > MaxGroupLength {
			return fmt.Errorf("dedup: WithScope: scope %q must be 1 to %d characters (the consumer_group column)", scope, MaxGroupLength)
		}
		s.scope = scope
		return nil
	}
}

// WithLogger sets the logger of the store's transactions, which reports after-commit hooks that panicked.
// The default logs nothing (zap.NewNop).
func WithLogger(log *zap.Logger) Option {
	return func(s *Store) error {
		if log == nil {
			return fmt.Errorf("dedup: WithLogger: logger is nil")
		}
		s.log = log
		return nil
	}
}
