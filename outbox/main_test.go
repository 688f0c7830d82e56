package outbox

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a relay not stopped by its context,
// an abandoned effect call never released. The RocketMQ client starts a go-cache janitor in a package
// init; it is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}
