package main

import (
	"context"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2"
	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// callbackFunc handles the messages of one callback of the client's push consumer (1..its batch size): a
// nil error acknowledges them all, an error asks the broker to redeliver them all later.
type callbackFunc func(ctx context.Context, msgs []*primitive.MessageExt) error

// eachMessage is a callbackFunc that hands the messages one by one to handle and stops at the first error.
func eachMessage(handle func(ctx context.Context, m *primitive.MessageExt) error) callbackFunc {
	return func(ctx context.Context, msgs []*primitive.MessageExt) error {
		for _, m := range msgs {
			if err := handle(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
}

// startClient starts the client's own push consumer of group on b's topic from the first offset, with
// o.goroutines consume goroutines and up to batch messages per callback (ConsumeMessageBatchMaxSize, as
// consumer.Config.BatchSize sets it for rmqguard), handing each callback's messages to handle.
func startClient(env *environment, o options, b backlog, group string, batch int, handle callbackFunc) (func(), error) {
	pc, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithGroupName(group),
		rmqconsumer.WithInstance(group),
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver(env.nameServers)),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
		rmqconsumer.WithConsumeGoroutineNums(o.goroutines),
		rmqconsumer.WithConsumeMessageBatchMaxSize(batch),
	)
	if err != nil {
		return nil, fmt.Errorf("push consumer %s: %w", group, err)
	}
	err = pc.Subscribe(b.topic, rmqconsumer.MessageSelector{},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
			if err := handle(ctx, msgs); err != nil {
				return rmqconsumer.ConsumeRetryLater, nil
			}
			return rmqconsumer.ConsumeSuccess, nil
		})
	if err != nil {
		return nil, fmt.Errorf("push consumer %s: subscribe: %w", group, err)
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("push consumer %s: start: %w", group, err)
	}
	return func() { _ = pc.Shutdown() }, nil
}

// startRaw is the ceiling: the client's push consumer with a handler that only counts.
func startRaw(_ context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	return startClient(env, o, b, group, 1, eachMessage(func(_ context.Context, m *primitive.MessageExt) error {
		tr.handled(m.GetProperty("EVENT_ID"))
		return nil
	}))
}
