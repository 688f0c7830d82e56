package middleware_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/pending"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// newConsumer calls consumer.New with a valid config and a push-consumer factory the test fails on: a
// refused handler must be reported before any client is built.
func newConsumer(t *testing.T, h consumer.Handler) error {
	t.Helper()
	_, err := consumer.New(consumer.Config{NameServers: []string{"127.0.0.1:9876"}, Group: "cg",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}}, h,
		consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
			t.Error("a client was built for a refused handler")
			return nil, errors.New("unexpected")
		}))
	return err
}

func plain(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
	return consumer.Processed(), nil
}

var txPlain = dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
	return consumer.Processed(), nil
})

func TestChain_WrongOrIncompleteChainsAreRefusedWithTheFix(t *testing.T) {
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	version, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "order",
		Load: func(context.Context, *sqlx.Tx, string) (int64, error) { return 0, nil }})
	require.NoError(t, err)
	store := new(dedup.Store) // never used: the chains below are refused before any message
	recov, classify := middleware.Recover(zap.NewNop()), middleware.Classify()
	for name, tc := range map[string]struct {
		h    consumer.Handler
		mws  []middleware.Middleware
		want string
		is   error
	}{
		"Dedup before EventID": {consumer.HandlerFunc(plain), []middleware.Middleware{recov, classify, testenv.Must(middleware.Dedup(store)), eventID},
			"middleware.Dedup (position 3) needs middleware.EventID before it: move EventID before Dedup", middleware.ErrChainOrder},
		"Dedup without EventID": {txPlain, []middleware.Middleware{classify, testenv.Must(middleware.Dedup(store))},
			"middleware.Dedup (position 2) needs middleware.EventID before it: add middleware.EventID before Dedup", middleware.ErrChainOrder},
		"Version before Dedup": {txPlain, []middleware.Middleware{classify, eventID, version, testenv.Must(middleware.Dedup(store))},
			"middleware.Version (position 3) needs middleware.Dedup before it: move Dedup before Version", middleware.ErrChainOrder},
		"Dedup without Classify": {txPlain, []middleware.Middleware{recov, eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(store))},
			"middleware.Dedup (position 4) needs middleware.Classify in the chain: add it before EventID", middleware.ErrChainOrder},
		"Classify inside Dedup": {txPlain, []middleware.Middleware{recov, eventID, testenv.Must(middleware.Dedup(store)), classify},
			"middleware.Dedup (position 3) needs middleware.Classify (position 4) before it: move Classify before Dedup", middleware.ErrChainOrder},
		"Classify inside Dedup, in a pending inner chain": {testenv.Must(middleware.Chain(txPlain, classify)), []middleware.Middleware{recov, eventID, testenv.Must(middleware.Dedup(store))},
			"middleware.Dedup (position 3) needs middleware.Classify (position 4, in the inner chain) before it: move Classify before Dedup", middleware.ErrChainOrder},
		"Version without Dedup": {consumer.HandlerFunc(plain), []middleware.Middleware{eventID, version},
			"add middleware.Dedup before Version", middleware.ErrChainOrder},
		"Timeout outside Recover": {consumer.HandlerFunc(plain), []middleware.Middleware{middleware.Timeout(time.Second), recov, classify},
			"middleware.Timeout (position 1) must be inside middleware.Recover (position 2): move Recover before Timeout", middleware.ErrChainOrder},
		"dedup.Handle without Dedup": {txPlain, []middleware.Middleware{recov, classify, eventID},
			"add middleware.Dedup(store) to the chain, after EventID", middleware.ErrChainOrder},
		"dedup.HandleJSON without Dedup": {dedup.HandleJSON(func(context.Context, *sqlx.Tx, *consumer.Delivery, struct{}) (consumer.Outcome, error) {
			return consumer.Processed(), nil
		}), []middleware.Middleware{recov, classify, eventID},
			"add middleware.Dedup(store) to the chain, after EventID", middleware.ErrChainOrder},
		"two Dedups": {txPlain, []middleware.Middleware{eventID, testenv.Must(middleware.Dedup(store)), testenv.Must(middleware.Dedup(store))},
			"middleware.Dedup (position 3) repeats middleware.Dedup (position 2): keep one of them", middleware.ErrChainOrder},
		"two EventIDs": {consumer.HandlerFunc(plain), []middleware.Middleware{eventID, classify, eventID},
			"middleware.EventID (position 3) repeats middleware.EventID (position 1)", middleware.ErrChainOrder},
		"Deadline and Timeout": {consumer.HandlerFunc(plain), []middleware.Middleware{middleware.Deadline(0), middleware.Timeout(time.Second)},
			"middleware.Timeout (position 2) repeats middleware.Deadline (position 1)", middleware.ErrChainOrder},
		"zero middleware": {consumer.HandlerFunc(plain), []middleware.Middleware{recov, {}},
			"the middleware at position 2 is nil", middleware.ErrNilDependency},
		"nil handler": {nil, []middleware.Middleware{recov},
			"middleware.Chain: the handler is nil", middleware.ErrNilDependency},
	} {
		t.Run(name, func(t *testing.T) {
			h, err := middleware.Chain(tc.h, tc.mws...) // a wrong chain is refused here
			if err == nil {
				err = newConsumer(t, h) // an incomplete one, which a chain around it may complete, by consumer.New
			}

			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestChain_UserMiddlewaresAreAllowedAnywhereAndNotCalledByTheCheck(t *testing.T) {
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	built := 0
	user := middleware.Func(func(next consumer.Handler) consumer.Handler { built++; return next })

	_, err = middleware.Chain(consumer.HandlerFunc(plain), user, middleware.Timeout(time.Second), user, middleware.Recover(nil), user)
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Zero(t, built, "a refused chain calls no user middleware")

	h := testenv.Must(middleware.Chain(consumer.HandlerFunc(plain), user, middleware.Classify(), user, eventID, user))
	require.NoError(t, pending.Refused(h))
	assert.Equal(t, 3, built, "each wrapped once, when the chain is built")
	o, err := h.Handle(context.Background(), delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1"}))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
}

func TestChain_RefusedHandlerIsRefusedUnwrapped(t *testing.T) {
	errX := errors.New("could not build the handler")
	wrapped := 0

	_, err := middleware.Chain(pending.Refuse[consumer.Delivery](errX, consumer.DeadLetter), middleware.Func(func(next consumer.Handler) consumer.Handler { wrapped++; return next }))

	assert.ErrorIs(t, err, errX)
	assert.Zero(t, wrapped)
}

func TestStandard_WrongConfigIsAnErrorWithTheFix(t *testing.T) {
	store := new(dedup.Store)
	for name, tc := range map[string]struct {
		cfg  middleware.StandardConfig
		want string
		is   error
	}{
		"nil Store":       {middleware.StandardConfig{}, "middleware.Dedup: store is nil", middleware.ErrNilDependency},
		"typed-nil Store": {middleware.StandardConfig{Store: (*dedup.Store)(nil)}, "did dedup.NewStore fail?", middleware.ErrNilDependency},
		"bad EventID config": {middleware.StandardConfig{Store: store, EventID: middleware.EventIDConfig{MaxLength: -1}},
			"middleware.Standard: EventID: event ID config: MaxLength", nil},
		"Version without store or Load": {middleware.StandardConfig{Store: dedupTxStore{store}, Version: &middleware.VersionConfig{AggregateType: "order"}},
			"middleware.Standard: Version: Store is a middleware_test.dedupTxStore, not a *dedup.Store: set VersionConfig.Load", nil},
		"bad Version config": {middleware.StandardConfig{Store: store, Version: &middleware.VersionConfig{}},
			"middleware.Standard: Version: version config: AggregateType", nil},
		"nil Store with Version": {middleware.StandardConfig{Version: &middleware.VersionConfig{AggregateType: "order"}},
			"middleware.Dedup: store is nil", middleware.ErrNilDependency},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := middleware.Standard(consumer.HandlerFunc(plain), tc.cfg)

			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// dedupTxStore is a TxStore that is not a *dedup.Store (as a fast-path layer is): Version gets no store.
type dedupTxStore struct{ dedup.TxStore }

// The recommended chain, built by Standard, processes a message once on the real MariaDB: the effect and
// the dedup row commit together, and a redelivery is a duplicate that does not run the handler again.
func TestStandard_ProcessesAMessageOnceOnMariaDB(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	run, group := testenv.Unique("std"), testenv.Unique("cg")
	ledger := testenv.NewLedger(t, db, run)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	h := testenv.Must(middleware.Standard(dedup.Handle(ledger.Handler(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil // the ledger appends the effect
	})), middleware.StandardConfig{Metrics: m, Store: store}))
	require.NoError(t, pending.Refused(h))
	msg := &primitive.MessageExt{MsgId: run + "-msg", Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
	msg.WithProperty("EVENT_ID", run+"-e1")

	o, err := h.Handle(context.Background(), testenv.NewDelivery(group, msg))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)

	msg.ReconsumeTimes = 1
	o, err = h.Handle(context.Background(), testenv.NewDelivery(group, msg))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, 1, ledger.Count(t, run+"-e1"), "applied once")
}

// A nil logger is zap.NewNop(): Recover still recovers, Logging writes nothing; neither panics.
func TestRecoverAndLogging_NilLoggerIsANop(t *testing.T) {
	panics := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { panic("handler bug") }

	o, err := testenv.Must(middleware.Chain(consumer.HandlerFunc(panics), middleware.Logging(nil), middleware.Recover(nil))).Handle(context.Background(), delivery("ORDER", "", nil))

	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Equal(t, consumer.KindRetry, o.Kind)
}

// A constructor given a nil dependency returns an error wrapping ErrNilDependency that names the fix.
func TestConstructors_NilDependencyIsAnErrorWithTheFix(t *testing.T) {
	for name, tc := range map[string]struct {
		build func() (middleware.Middleware, error)
		want  string
	}{
		"Dedup(nil)": {func() (middleware.Middleware, error) { return middleware.Dedup(nil) },
			"nil dependency: middleware.Dedup: store is nil — did dedup.NewStore fail? check its error"},
		"Dedup of a typed-nil *dedup.Store": {func() (middleware.Middleware, error) { return middleware.Dedup((*dedup.Store)(nil)) },
			"middleware.Dedup: store is nil — did dedup.NewStore fail?"},
		"Lease(nil)": {func() (middleware.Middleware, error) { return middleware.Lease(nil, time.Minute) },
			"middleware.Lease: store is nil"},
		"Metrics(nil)": {func() (middleware.Middleware, error) { return middleware.Metrics(nil) },
			"middleware.Metrics: m is nil"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.build()

			require.ErrorIs(t, err, middleware.ErrNilDependency)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Version checks only its own EventTypes, so a consumer of two aggregates' events puts one Version per
// aggregate inside Dedup: Chain accepts that, and still refuses a second Version before Dedup.
func TestChain_OneVersionPerAggregateTypeIsAccepted(t *testing.T) {
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	load := func(context.Context, *sqlx.Tx, string) (int64, error) { return 0, nil }
	orders, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "order", EventTypes: []string{"OrderCreated"}, Load: load})
	require.NoError(t, err)
	payments, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "payment", EventTypes: []string{"PaymentCaptured"}, Load: load})
	require.NoError(t, err)
	store := new(dedup.Store)

	h := testenv.Must(middleware.Chain(txPlain, middleware.Recover(nil), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store)), orders, payments))
	require.NoError(t, pending.Refused(h))

	err = testenv.Refused(middleware.Chain(txPlain, middleware.Classify(), eventID, orders, testenv.Must(middleware.Dedup(store)), payments))
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "middleware.Version (position 3) needs middleware.Dedup before it: move Dedup before Version")
}
