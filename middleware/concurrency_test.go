package middleware_test

import (
	"context"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/pending"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
)

// idlePush is a push consumer that is never started: consumer.New builds it for an accepted handler.
type idlePush struct{}

func (idlePush) Start() error                       { return nil }
func (idlePush) Shutdown() error                    { return nil }
func (idlePush) Suspend()                           {}
func (idlePush) Resume()                            {}
func (idlePush) GetOffsetDiffMap() map[string]int64 { return nil }
func (idlePush) Subscribe(string, rmq.MessageSelector, func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)) error {
	return nil
}

// newIdleConsumer is consumer.New's answer for h with the default 20 goroutines on one topic (up to 40
// handlers at once, with %RETRY%cg).
func newIdleConsumer(h consumer.Handler) error {
	_, err := consumer.New(consumer.Config{NameServers: []string{"127.0.0.1:9876"}, Group: "cg",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}}, h,
		consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return idlePush{}, nil }))
	return err
}

// F40: a chain around a dedup store on the application's pool (no WithTxDSN) carries the store's check to
// consumer.New, which refuses a pool of 20 for up to 40 handlers with the fix and accepts one of 41; the
// chain is not refused as such (pending.Refused says nil), and it carries the check when Standard builds
// it, when an outer Chain completes an inner one holding Dedup, and when Dedup holds a layer that forwards
// the check.
func TestChain_F40_DedupStoreOnTheApplicationsPoolIsCheckedByConsumerNew(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	for name, h := range map[string]consumer.Handler{
		"Standard": testenv.Must(middleware.Standard(txPlain, middleware.StandardConfig{Store: store})),
		"inner Chain completed by an outer one": testenv.Must(middleware.Chain(testenv.Must(middleware.Chain(txPlain, testenv.Must(middleware.Dedup(store)))),
			middleware.Recover(nil), middleware.Classify(), eventID)),
		"a layer that forwards the check": testenv.Must(middleware.Standard(txPlain, middleware.StandardConfig{Store: forwarding{store}})),
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, pending.Refused(h), "a condition, not a refusal")
			db.SetMaxOpenConns(20)
			err := newIdleConsumer(h)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "consumer.New: handler: dedup: the store runs its transactions on db's pool (no WithTxDSN), bounded to 20 connections")
			assert.Contains(t, err.Error(), "dedup.WithTxDSN(dsn)")
			db.SetMaxOpenConns(41)
			require.NoError(t, newIdleConsumer(h))
		})
	}
}

// F40: a store on a pool of its own (WithTxDSN) passes the check whatever the sizes, and a store whose check
// has nothing to say (a layer that does not forward it) leaves the chain as it is.
func TestChain_F40_StoreOnItsOwnPoolOrWithoutACheckIsAccepted(t *testing.T) {
	db := testenv.MySQL(t)
	db.SetMaxOpenConns(2)
	own, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, own.Close()) })
	shared, err := dedup.NewStore(db)
	require.NoError(t, err)

	require.NoError(t, newIdleConsumer(testenv.Must(middleware.Standard(txPlain, middleware.StandardConfig{Store: own}))))
	require.NoError(t, newIdleConsumer(testenv.Must(middleware.Standard(txPlain, middleware.StandardConfig{Store: noCheck{shared}}))))
}

// Dedup around a nil handler, composed by hand, is refused rather than left to panic on the first message.
func TestDedup_AroundANilHandlerIsRefused(t *testing.T) {
	err := pending.Refused(testenv.Must(middleware.Dedup(new(dedup.Store))).Wrap(nil))
	require.Error(t, err)
	assert.Equal(t, "middleware.Dedup: the handler it wraps is nil", err.Error())
}

// noCheck is a fast-path layer that does not forward the store's concurrency check.
type noCheck struct{ dedup.TxStore }

func (s noCheck) Protocol() txproto.Store { return noCheckProtocol{s.TxStore.Protocol()} }

// noCheckProtocol is the protocol of a noCheck layer.
type noCheckProtocol struct{ txproto.Store }

func (noCheckProtocol) CheckConcurrency(int) error { return nil }

// forwarding is a fast-path layer that forwards the store's concurrency check (as dedup/redisfast does).
type forwarding struct{ *dedup.Store }
