package topics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/topics"
)

// A consumer creates its group's %RETRY% and %DLQ% topics in Start by default; where a deployment step
// creates them (ExampleEnsure) and the consumer's keys may not, Config.SkipTopicEnsure turns that off.
// Compiled, not run (it needs a broker).
func Example_consumer() {
	handler := consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil // the chain: see the middleware package's Example_wiring
	})
	cfg := consumer.Config{NameServers: []string{"127.0.0.1:9876"}, Group: "inventory",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}, SkipTopicEnsure: true}
	c, err := consumer.New(cfg, handler)
	if err != nil {
		panic(err) // an invalid setting names the field
	}
	if err := c.Start(); err != nil { // without SkipTopicEnsure: fails naming the topic and broker it could not create
		panic(err)
	}
	defer c.Shutdown(context.Background())
}

// Ensuring topics explicitly, e.g. in a deployment step, with what was done per topic.
func ExampleEnsure() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster := topics.Cluster{NameServers: []string{"127.0.0.1:9876"}} // every master broker
	res, err := topics.Ensure(ctx, cluster, append(topics.GroupTopics("inventory"), topics.Topic{Name: "ORDER", Queues: 8})...)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r) // e.g. "%RETRY%inventory: created", "ORDER: exists"
	}
}
