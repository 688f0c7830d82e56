package rmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestAgainstLocalServices runs against the services of `make up` (skipped when they are down, failed
// instead when RMQGUARD_REQUIRE_SERVICES=1).
func TestAgainstLocalServices(t *testing.T) {
	ns, broker := []string{testenv.NameServer(t)}, testenv.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rmq.EnsureTopic(ctx, ns, broker, "RMQGUARD_PROBE", 4); err != nil {
		t.Fatal(err)
	}
	if err := rmq.Probe(ctx, ns, "RMQGUARD_PROBE"); err != nil {
		t.Fatal(err)
	}
	if err := rmq.Probe(ctx, ns, "RMQGUARD_NO_SUCH_TOPIC_X"); err == nil {
		t.Fatal("probe of a missing topic: want an error")
	}
}
