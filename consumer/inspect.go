package consumer

import "github.com/rmqguard/rmqguard/internal/pending"

// inspect returns the condition of a handler internal/pending wrapped with one, with the handler it runs,
// or the error of a handler it refused or wrapped; h itself and nil, nil for any other handler, which it
// never calls. See the package doc, "New".
func inspect(h Handler) (Handler, concurrencyChecker, error) {
	inner, err, wrapped := pending.Inspect(h)
	if cond, ok := err.(concurrencyChecker); ok && wrapped {
		return inner, cond, nil
	}
	return h, nil, err
}
