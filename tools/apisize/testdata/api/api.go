// Package api is apisize's test input: 8 decls and 4 methods are exported (marked "counted").
package api

import "context"

// Consts: two counted, one not.
const (
	Alpha = 1 // counted
	Beta  = 2 // counted
	gamma = 3
)

// Var: one counted out of two names.
var Default, fallback = Config{}, Config{}

// Config is counted; its fields are not.
type Config struct {
	Name  string
	Limit int
	inner int
}

// Valid is counted (exported method of an exported type).
func (c Config) Valid() bool { return c.Name != "" && c.inner == 0 }

// WithLimit is counted (pointer receiver).
func (c *Config) WithLimit(n int) *Config { c.Limit = n; return c }

func (c Config) hidden() {}

// Runner is counted, and its exported method Run; Stop and the embedded interface are not.
type Runner interface {
	context.Context
	Run(ctx context.Context) error
	stop()
}

// Box is counted; its method Get is counted (generic receiver).
type Box[T any] struct{ v T }

// Get is counted.
func (b Box[T]) Get() T { return b.v }

type private struct{}

// Exported is not counted: private is not an exported type.
func (private) Exported() {}

// New is counted.
func New(name string) *Config { return &Config{Name: name} }

func helper() {}
