package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/outbox"
)

// Names of a paid order's outbox rows: the outbox derives the rows' event IDs from them, so they never change.
const (
	// outboxLoyalty is the LoyaltyPointsCredited message.
	outboxLoyalty = "loyalty"
	// effectNotify is the notification effect.
	effectNotify = "notify-paid"
)

// outboxFollowUps is the example's shop.FollowUps: per paid order, in its OrderPaid transaction, a
// LoyaltyPointsCredited message on the loyalty topic (sharded by account, so an account's credits keep
// their order) and a notification effect, both relayed after the commit.
type outboxFollowUps struct {
	ob    *outbox.Outbox
	topic string
}

func (f outboxFollowUps) OrderPaid(ctx context.Context, d *consumer.Delivery, p shop.PaidOrder) error {
	body, err := json.Marshal(shop.LoyaltyPointsCredited{OrderNo: p.OrderNo, AccountID: p.AccountID, Points: p.AmountCents})
	if err != nil {
		return err
	}
	if _, err := f.ob.Send(ctx, d, outbox.Message{Name: outboxLoyalty, Topic: f.topic, Tag: shop.EventLoyaltyPointsCredited,
		Keys: []string{p.OrderNo}, ShardingKey: p.AccountID, Body: body,
		Properties: map[string]string{shop.PropEventType: shop.EventLoyaltyPointsCredited, shop.PropAggregateID: p.AccountID}}); err != nil {
		return err
	}
	payload, err := json.Marshal(notification{OrderNo: p.OrderNo, AccountID: p.AccountID, AmountCents: p.AmountCents})
	if err != nil {
		return err
	}
	_, err = f.ob.Do(ctx, d, effectNotify, payload)
	return err
}

// notification is the body the notification effect posts.
type notification struct {
	OrderNo     string `json:"orderNo"`
	AccountID   string `json:"accountId"`
	AmountCents int64  `json:"amountCents"`
}

// notifyEffect posts the effect's payload to url with the header Idempotency-Key; anything but a 2xx
// answer is a failure the relay retries.
func notifyEffect(client *http.Client, url string) outbox.EffectFunc {
	return func(ctx context.Context, e outbox.Effect) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(e.Payload))
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idempotencyHeader, e.IdempotencyKey)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("notify %s: answered %d", url, resp.StatusCode)
		}
		return nil
	}
}
