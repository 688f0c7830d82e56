package shop

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// EventLoyaltyPointsCredited credits a paid order's account with points (one per cent paid). The OrderPaid
// handler emits it through the transactional outbox (FollowUps), on a topic of its own, to a second
// consumer group; it is not one of EventTypes (the order topic's events).
const EventLoyaltyPointsCredited = "LoyaltyPointsCredited"

// LoyaltyCreditID is the loyalty_credit key of a paid order's credit.
func LoyaltyCreditID(orderNo string) string { return "loyalty:" + orderNo }

// LoyaltyPointsCredited is the JSON body of a LoyaltyPointsCredited event; its event ID is the EVENT_ID
// property the outbox derives from the OrderPaid's.
type LoyaltyPointsCredited struct {
	// OrderNo is the paid order; AccountID its account, the aggregate ID.
	OrderNo   string `json:"orderNo"`
	AccountID string `json:"accountId"`
	// Points is the number of points credited, > 0.
	Points int64 `json:"points"`
}

// check validates a LoyaltyPointsCredited: order and account IDs of 1..64 characters, points > 0.
func (e LoyaltyPointsCredited) check() error {
	var c checks
	c.id("orderNo", e.OrderNo)
	c.id("accountId", e.AccountID)
	if e.Points <= 0 {
		c = append(c, "points must be > 0")
	}
	return c.err(EventLoyaltyPointsCredited)
}

// PaidOrder is an order the OrderPaid handler has just moved to PAID.
type PaidOrder struct {
	OrderNo, AccountID, PaymentID string
	AmountCents                   int64
}

// FollowUps records, in the OrderPaid handler's transaction (ctx carries it), what a paid order causes
// outside the shop's tables: the example's is the outbox (a LoyaltyPointsCredited message and a
// notification effect). An error rolls the payment back with it.
type FollowUps interface {
	OrderPaid(ctx context.Context, d *consumer.Delivery, p PaidOrder) error
}

// Option configures New.
type Option func(*Shop)

// WithFollowUps makes the OrderPaid handler call f for every order it pays. Default: none.
func WithFollowUps(f FollowUps) Option { return func(s *Shop) { s.followUps = f } }

// LoyaltyPointsCredited credits e.Points to e.AccountID once per order, as LoyaltyPointsCreditedBatch
// does for a batch of one; an invalid credit is a permanent error.
func (s *Shop) LoyaltyPointsCredited(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e LoyaltyPointsCredited) (consumer.Outcome, error) {
	if err := e.check(); err != nil {
		return consumer.Outcome{}, err
	}
	outcomes, err := s.LoyaltyPointsCreditedBatch(ctx, tx, []*consumer.Delivery{d}, []LoyaltyPointsCredited{e})
	if err != nil {
		return consumer.Outcome{}, err
	}
	return outcomes[0], nil
}

// LoyaltyPointsCreditedBatch credits the points of es (es[i] is ds[i]'s body) once per order, in the dedup
// transaction (dedup.HandleBatchJSON): a loyalty_credit row per credit, keyed by LoyaltyCreditID (with the
// event ID), then the points of the credits it recorded added to their accounts in one multi-row upsert, in
// account order, so that batches crediting the same accounts lock them in the same order. A credit already
// recorded (the same order under another event ID) changes nothing and is a duplicate; an invalid one is
// dead-lettered alone.
func (s *Shop) LoyaltyPointsCreditedBatch(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery, es []LoyaltyPointsCredited) ([]consumer.Outcome, error) {
	outcomes := make([]consumer.Outcome, len(ds))
	points := map[string]int64{}
	now := time.Now().UTC()
	for i, e := range es {
		if err := e.check(); err != nil {
			outcomes[i] = consumer.DeadLetter(err.Error())
			continue
		}
		res, err := s.credits.Record(ctx, tx, LoyaltyCreditID(e.OrderNo), map[string]any{
			"account_id": e.AccountID, "order_no": e.OrderNo, "points": e.Points, "event_id": ds[i].EventID, "created_at": now})
		if err != nil {
			return nil, fmt.Errorf("shop: record loyalty credit of order %s: %w", e.OrderNo, err)
		}
		if res == dedup.ActionAlreadyApplied {
			outcomes[i] = consumer.Duplicate()
			continue
		}
		points[e.AccountID] += e.Points
		outcomes[i] = consumer.Processed()
	}
	if len(points) == 0 {
		return outcomes, nil
	}
	accounts := slices.Sorted(maps.Keys(points))
	args := make([]any, 0, 3*len(accounts))
	for _, a := range accounts {
		args = append(args, a, points[a], now)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO loyalty_account (account_id, points, updated_at) VALUES (?, ?, ?)`+
		strings.Repeat(", (?, ?, ?)", len(accounts)-1)+
		` ON DUPLICATE KEY UPDATE points = points + VALUES(points), updated_at = VALUES(updated_at)`, args...); err != nil {
		return nil, fmt.Errorf("shop: credit loyalty points of %d accounts: %w", len(accounts), err)
	}
	return outcomes, nil
}

// paidFollowUps calls the follow-ups (if any) for the order just paid, reading its account and amount.
// An order without account (from the OrderCreated-only workloads) has none.
func (s *Shop) paidFollowUps(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderPaid) error {
	if s.followUps == nil {
		return nil
	}
	p := PaidOrder{OrderNo: e.OrderNo, PaymentID: e.PaymentID}
	if err := tx.QueryRowxContext(ctx, `SELECT account_id, amount_cents FROM orders WHERE order_no = ?`, e.OrderNo).
		Scan(&p.AccountID, &p.AmountCents); err != nil {
		return fmt.Errorf("shop: read paid order %s: %w", e.OrderNo, err)
	}
	if p.AccountID == "" {
		return nil
	}
	if err := s.followUps.OrderPaid(ctx, d, p); err != nil {
		return fmt.Errorf("shop: follow-ups of paid order %s: %w", e.OrderNo, err)
	}
	return nil
}

// LoyaltyEffects are the loyalty rows of one demo run.
type LoyaltyEffects struct {
	// Credits counts loyalty_credit rows; Points is the points per account.
	Credits int
	Points  map[string]int64
}

// RunLoyalty reads the loyalty rows of the orders and accounts whose keys start with prefix.
func RunLoyalty(ctx context.Context, db *sqlx.DB, prefix string) (LoyaltyEffects, error) {
	like := escapeLike(prefix) + "%"
	l := LoyaltyEffects{Points: map[string]int64{}}
	if err := db.GetContext(ctx, &l.Credits, `SELECT COUNT(*) FROM loyalty_credit WHERE order_no LIKE ?`, like); err != nil {
		return l, fmt.Errorf("shop: run loyalty: credits: %w", err)
	}
	if err := amounts(ctx, db, l.Points, `SELECT account_id, points FROM loyalty_account WHERE account_id LIKE ?`, like); err != nil {
		return l, fmt.Errorf("shop: run loyalty: points: %w", err)
	}
	return l, nil
}

// loyaltyPoints: an account's points ≠ the sum of its credits.
func loyaltyPoints(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		ID     string `db:"account_id"`
		Points int64  `db:"points"`
		Sum    int64  `db:"total"`
		N      int    `db:"n"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT a.account_id, a.points, COALESCE(SUM(c.points), 0) AS total, COUNT(c.credit_id) AS n
		FROM loyalty_account a LEFT JOIN loyalty_credit c ON c.account_id = a.account_id
		WHERE a.account_id LIKE ? GROUP BY a.account_id, a.points HAVING a.points <> total ORDER BY a.account_id`, like)
	if err != nil {
		return nil, fmt.Errorf("loyalty points: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"loyalty account " + r.ID,
			fmt.Sprintf("points %d ≠ sum of its %d credits %d", r.Points, r.N, r.Sum)})
	}
	return diffs, nil
}
