package middleware_test

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/goleak"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestMain fails the package when a test leaves a goroutine behind (e.g. a Timeout handler never released).
// The RocketMQ client starts a go-cache janitor in a package init; it is not ours. Run with leaseHolderEnv
// set, the binary is a lease holder that a test kills (runLeaseHolder).
func TestMain(m *testing.M) {
	if os.Getenv(leaseHolderEnv) != "" {
		runLeaseHolder() // a child process of TestLease_HolderKilledMinus9…
		return
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}

// msg builds a message on topic with the given user properties (KEYS and TAGS may be set through them).
func msg(topic string, body string, props map[string]string) *primitive.MessageExt {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: topic, Body: []byte(body)}, MsgId: "7F0000010001-msg-1"}
	for k, v := range props {
		m.WithProperty(k, v)
	}
	return m
}

// delivery is the Delivery the consumer would build for msg in group "cg".
func delivery(topic, body string, props map[string]string) *consumer.Delivery {
	return testenv.NewDelivery("cg", msg(topic, body, props))
}
