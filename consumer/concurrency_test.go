package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/pending"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// poolCondition stands for a store that can serve at most limit handlers at once (0: any number); it
// records the handlers it was asked about. As a Pending error it is a condition, as a probe a checker.
type poolCondition struct {
	limit int
	asked []int
}

func (p *poolCondition) Error() string { return "checked against the consumer's concurrency" }

func (p *poolCondition) CheckConcurrency(handlers int) error {
	p.asked = append(p.asked, handlers)
	if p.limit > 0 && (handlers == 0 || handlers > p.limit) {
		return fmt.Errorf("pool of %d: use a pool of its own", p.limit)
	}
	return nil
}

func (p *poolCondition) Probe(context.Context) error { return nil }

func processed(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
	return consumer.Processed(), nil
}

// F40: a handler carrying a condition on the consumer's concurrency (a chain around a dedup store) is
// checked with the most handlers the client runs at once: ConsumeGoroutines for each subscribed topic and
// for %RETRY%<group>; 0 in orderly mode (one per queue held, not bounded by the Config). It is not refused:
// Refused says nil, and New accepts it when the condition holds.
func TestNew_F40_ConditionIsCheckedWithTheHandlersTheClientRunsAtOnce(t *testing.T) {
	two := validConfig()
	two.Subscriptions = append(two.Subscriptions, consumer.Subscription{Topic: "PAYMENT"})
	two.ConsumeGoroutines = 8
	orderly := validConfig()
	orderly.Orderly = true
	for name, c := range map[string]struct {
		cfg  consumer.Config
		want int
	}{
		"default goroutines, one topic":  {validConfig(), 2 * 20},
		"8 goroutines, two topics":       {two, 3 * 8},
		"orderly: not bounded by Config": {orderly, 0},
	} {
		t.Run(name, func(t *testing.T) {
			cond := &poolCondition{}
			h := pending.Wrap(consumer.HandlerFunc(processed), cond)
			require.NoError(t, pending.Refused(h), "a condition is not a refusal")
			newConsumer(t, c.cfg, h)
			assert.Equal(t, []int{c.want}, cond.asked)
		})
	}
}

// F40: a condition that does not hold fails New with its error and the count it was checked against,
// before any client is built; so does a WithHealthProbe probe that checks the concurrency (the dedup store
// given to the gate, for a chain Chain never saw).
func TestNew_F40_ConditionThatFailsRefusesTheConsumerWithTheFix(t *testing.T) {
	built := false
	factory := consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
		built = true
		return newFakePush(), nil
	})
	cond := &poolCondition{limit: 20}

	_, err := consumer.New(validConfig(), pending.Wrap(consumer.HandlerFunc(processed), cond), factory)
	require.Error(t, err)
	assert.Equal(t, "consumer.New: handler: pool of 20: use a pool of its own (40 handlers = ConsumeGoroutines 20 × "+
		"(1 subscribed topics + %RETRY%cg))", err.Error())

	_, err = consumer.New(validConfig(), consumer.HandlerFunc(processed), consumer.WithHealthProbe(cond), factory)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "consumer.New: WithHealthProbe: pool of 20: use a pool of its own")

	orderly := validConfig()
	orderly.Orderly = true
	_, err = consumer.New(orderly, pending.Wrap(consumer.HandlerFunc(processed), &poolCondition{limit: 64}), factory)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(orderly consumption runs one handler per queue it holds)")
	assert.False(t, built, "no client is built for a refused consumer")
}

// F40: Start checks again, so a pool shrunk between New and Start is refused before the client starts.
func TestStart_F40_ConditionIsCheckedAgain(t *testing.T) {
	cond := &poolCondition{limit: 64}
	c, fp := newConsumer(t, validConfig(), pending.Wrap(consumer.HandlerFunc(processed), cond))
	cond.limit = 20

	err := c.Start()

	require.Error(t, err)
	assert.Contains(t, err.Error(), "consumer.Start: handler: pool of 20")
	assert.NotContains(t, fp.Calls(), "start", "the client is not started")
	assert.Equal(t, []int{40, 40}, cond.asked)
}

// A Pending whose error wraps a condition, or a Refuse whose error is one, stays a refusal: only a
// Pending's own error can be a condition.
func TestRefused_WrappedConditionIsStillARefusal(t *testing.T) {
	cond := &poolCondition{}
	wrapped := pending.Wrap(consumer.HandlerFunc(processed), fmt.Errorf("router: %w", cond))
	require.Error(t, pending.Refused(wrapped))
	require.Error(t, pending.Refused(pending.Refuse[consumer.Delivery](cond, consumer.DeadLetter)))
	_, err := consumer.New(validConfig(), wrapped, consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
		return newFakePush(), nil
	}))
	require.True(t, errors.Is(err, cond))
	assert.Empty(t, cond.asked)
}

// A Pending condition runs its handler on every message, as any Pending does.
func TestPending_ConditionRunsItsHandler(t *testing.T) {
	o, err := pending.Wrap(consumer.HandlerFunc(processed), &poolCondition{}).Handle(context.Background(), testenv.NewDelivery("cg", orderMsg("k-1")))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
}

// A consumer built with a condition that holds handles messages with the Pending's handler.
func TestNew_F40_AcceptedConditionHandlesMessages(t *testing.T) {
	runs := 0
	h := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		runs++
		return consumer.Processed(), nil
	}
	_, fp := newConsumer(t, validConfig(), pending.Wrap(consumer.HandlerFunc(h), &poolCondition{}))

	res, _ := fp.deliver(t, "ORDER", orderMsg("k-1"))

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, 1, runs)
}
