package consumer_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// configErrors returns every *consumer.ConfigError in err (Validate joins them).
func configErrors(t *testing.T, err error) []*consumer.ConfigError {
	t.Helper()
	var out []*consumer.ConfigError
	var walk func(error)
	walk = func(e error) {
		var ce *consumer.ConfigError
		if errors.As(e, &ce) && e == error(ce) {
			out = append(out, ce)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				walk(inner)
			}
		}
	}
	walk(err)
	return out
}

// fields returns the Field of every ConfigError in err.
func fields(t *testing.T, err error) []string {
	var out []string
	for _, ce := range configErrors(t, err) {
		out = append(out, ce.Field)
	}
	return out
}

func TestConfigValidate_ValidConfigPasses(t *testing.T) {
	require.NoError(t, validConfig().Validate())

	full := validConfig()
	full.NameServers = []string{"ns-1.internal:9876", "10.0.0.2:9876"}
	full.Subscriptions = append(full.Subscriptions, consumer.Subscription{Topic: "PAYMENT", Expression: "Paid || Refunded"})
	full.MaxAttempts = 3
	full.BatchSize = 4
	full.HandlerTimeout = 5 * time.Second
	full.ConsumeTimeout = time.Minute
	full.DrainTimeout = 10 * time.Second
	full.StartFromFirstOffset = true
	require.NoError(t, full.Validate())
}

func TestConfigValidate_MissingNameServersNamesTheField(t *testing.T) {
	cfg := validConfig()
	cfg.NameServers = nil

	err := cfg.Validate()

	require.Error(t, err, "a missing name server address is an error, not a silent default")
	var ce *consumer.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "NameServers", ce.Field)
	assert.Contains(t, err.Error(), "NameServers")
}

func TestConfigValidate_BadHostPort(t *testing.T) {
	for _, ns := range []string{"127.0.0.1", "127.0.0.1:", ":9876", "host:abc", "host:0", "host:70000", ""} {
		t.Run(ns, func(t *testing.T) {
			cfg := validConfig()
			cfg.NameServers = []string{"127.0.0.1:9876", ns}
			assert.Equal(t, []string{"NameServers"}, fields(t, cfg.Validate()))
		})
	}
}

func TestConfigValidate_Group(t *testing.T) {
	for _, g := range []string{"", "  ", "%RETRY%cg", "%DLQ%cg"} {
		t.Run(g, func(t *testing.T) {
			cfg := validConfig()
			cfg.Group = g
			assert.Equal(t, []string{"Group"}, fields(t, cfg.Validate()))
		})
	}
}

func TestConfigValidate_Subscriptions(t *testing.T) {
	none := validConfig()
	none.Subscriptions = nil
	assert.Equal(t, []string{"Subscriptions"}, fields(t, none.Validate()))

	empty := validConfig()
	empty.Subscriptions = []consumer.Subscription{{Topic: " "}}
	assert.Equal(t, []string{"Subscriptions"}, fields(t, empty.Validate()))

	dup := validConfig()
	dup.Subscriptions = []consumer.Subscription{{Topic: "ORDER"}, {Topic: "ORDER", Expression: "Paid"}}
	err := dup.Validate()
	assert.Equal(t, []string{"Subscriptions"}, fields(t, err))
	assert.Contains(t, err.Error(), "ORDER")
}

func TestConfigValidate_HandlerTimeoutMustBeBelowConsumeTimeout(t *testing.T) {
	for _, tc := range []struct{ handler, consume time.Duration }{
		{time.Minute, time.Minute},
		{2 * time.Minute, time.Minute},
		{15 * time.Minute, 0}, // against the default
	} {
		cfg := validConfig()
		cfg.HandlerTimeout, cfg.ConsumeTimeout = tc.handler, tc.consume
		assert.Equal(t, []string{"HandlerTimeout"}, fields(t, cfg.Validate()), "%s vs %s", tc.handler, tc.consume)
	}
}

func TestConfigValidate_F19_OutageWaitIsBelowConsumeTimeout(t *testing.T) {
	cfg := validConfig()
	assert.NoError(t, cfg.Validate(), "the default fits the default ConsumeTimeout")
	cfg.ConsumeTimeout, cfg.HandlerTimeout = time.Minute, 5*time.Second
	assert.NoError(t, cfg.Validate(), "the default shrinks to a third of a short ConsumeTimeout")

	cfg.OutageWait = time.Minute
	err := cfg.Validate()
	assert.Equal(t, []string{"OutageWait"}, fields(t, err))
	assert.Contains(t, err.Error(), "ConsumeTimeout")

	cfg.OutageWait = -time.Second
	assert.Equal(t, []string{"OutageWait"}, fields(t, cfg.Validate()))
}

// The default OutageWait is a third of ConsumeTimeout; when that rounds to zero Validate names OutageWait
// instead of accepting a bound that would answer every outage at once.
func TestConfigValidate_F19_ZeroDefaultOutageWaitIsRefused(t *testing.T) {
	cfg := validConfig()
	cfg.ConsumeTimeout, cfg.HandlerTimeout = 2, 1 // nanoseconds: 2/3 is 0

	assert.Equal(t, []string{"OutageWait"}, fields(t, cfg.Validate()))
}

func TestConfigValidate_F26_TagExpressions(t *testing.T) {
	for _, expr := range []string{"", "*", "OrderCreated", "OrderCreated || OrderPaid", "A||B"} {
		cfg := validConfig()
		cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER", Expression: expr}}
		assert.NoError(t, cfg.Validate(), "%q", expr)
	}
	for _, expr := range []string{"A ||", "|| A", "A || * ", "A B", "A | B"} {
		cfg := validConfig()
		cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER", Expression: expr}}
		err := cfg.Validate()
		assert.Equal(t, []string{"Subscriptions"}, fields(t, err), "%q", expr)
	}
}

// An invalid tag expression's error counts tags from 1, so the operator finds the empty one.
func TestConfigValidate_F26_EmptyTagIsNamedByPosition(t *testing.T) {
	cfg := validConfig()
	cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER", Expression: "A || || B"}}

	err := cfg.Validate()

	assert.Equal(t, []string{"Subscriptions"}, fields(t, err))
	assert.Contains(t, err.Error(), `tag 2 of "A || || B" is empty`)
}

func TestConfigValidate_BatchSize(t *testing.T) {
	cfg := validConfig()
	cfg.BatchSize = 0
	assert.NoError(t, cfg.Validate(), "0 takes the default")

	cfg.BatchSize = 1024
	assert.NoError(t, cfg.Validate())

	cfg.BatchSize = 2000
	assert.Equal(t, []string{"BatchSize"}, fields(t, cfg.Validate()))

	cfg.BatchSize = -1
	assert.Equal(t, []string{"BatchSize"}, fields(t, cfg.Validate()))
}

func TestConfigValidate_Ranges(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*consumer.Config)
	}{
		{"MaxAttempts", func(c *consumer.Config) { c.MaxAttempts = -1 }},
		{"MaxAttempts", func(c *consumer.Config) { c.MaxAttempts = 1001 }},
		{"ConsumeGoroutines", func(c *consumer.Config) { c.ConsumeGoroutines = 1001 }},
		{"HandlerTimeout", func(c *consumer.Config) { c.HandlerTimeout = -time.Second }},
		{"DrainTimeout", func(c *consumer.Config) { c.DrainTimeout = -time.Second }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := validConfig()
			tc.mod(&cfg)
			assert.Contains(t, fields(t, cfg.Validate()), tc.field)
		})
	}
}

func TestConfigValidate_ReportsEveryProblem(t *testing.T) {
	err := consumer.Config{BatchSize: 2000}.Validate()
	assert.ElementsMatch(t, []string{"NameServers", "Group", "Subscriptions", "BatchSize"}, fields(t, err))
}

func TestNew_InvalidConfigNeverCallsTheFactory(t *testing.T) {
	called := false
	factory := consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
		called = true
		return newFakePush(), nil
	})
	cfg := validConfig()
	cfg.NameServers = nil

	c, err := consumer.New(cfg, handlerReturning(consumer.Processed(), nil), factory)

	require.Error(t, err)
	assert.Nil(t, c)
	var ce *consumer.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "NameServers", ce.Field)
	assert.False(t, called, "no client is built from an invalid config")
}

func TestNew_NilHandlerIsAConfigError(t *testing.T) {
	called := false
	factory := consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
		called = true
		return newFakePush(), nil
	})

	_, err := consumer.New(validConfig(), nil, factory)

	var ce *consumer.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Handler", ce.Field)
	assert.False(t, called)
}

func TestNew_FactoryErrorIsWrapped(t *testing.T) {
	boom := errors.New("client init failed")
	_, err := consumer.New(validConfig(), handlerReturning(consumer.Processed(), nil),
		consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return nil, boom }))

	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "cg")
}

func TestNew_SubscribesEveryTopicWithDefaultExpression(t *testing.T) {
	cfg := validConfig()
	cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER"}, {Topic: "PAYMENT", Expression: "Paid || Refunded"}}

	_, fp := newConsumer(t, cfg, handlerReturning(consumer.Processed(), nil))

	assert.Equal(t, rmq.MessageSelector{Type: rmq.TAG, Expression: "*"}, fp.subscribed["ORDER"])
	assert.Equal(t, rmq.MessageSelector{Type: rmq.TAG, Expression: "Paid || Refunded"}, fp.subscribed["PAYMENT"])
	assert.Equal(t, []string{"subscribe ORDER", "subscribe PAYMENT"}, fp.Calls(), "New subscribes but does not start")
}

func TestNew_SubscribeErrorIsReturned(t *testing.T) {
	fp := newFakePush()
	fp.subErr = errors.New("bad selector")

	_, err := consumer.New(validConfig(), handlerReturning(consumer.Processed(), nil),
		consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return fp, nil }))

	require.ErrorIs(t, err, fp.subErr)
	assert.Contains(t, err.Error(), "ORDER")
}

// clientOptions applies the options New handed to the factory to a zero value of the client's
// (unexported) options struct, reached through the Option func's parameter type, and returns it for
// reading its exported fields by name. It reads what the client would see without building a client.
func clientOptions(t *testing.T, opts []rmq.Option) reflect.Value {
	t.Helper()
	ptrType := reflect.TypeOf(rmq.Option(nil)).In(0)
	target := reflect.New(ptrType.Elem())
	for _, o := range opts {
		reflect.ValueOf(o).Call([]reflect.Value{target})
	}
	return target.Elem()
}

func TestNew_F5_MaxAttemptsBecomesMaxReconsumeTimes(t *testing.T) {
	var got []rmq.Option
	cfg := validConfig()
	cfg.MaxAttempts = 3
	cfg.BatchSize = 4
	cfg.ConsumeGoroutines = 8
	cfg.InstanceName = "orders-1"
	cfg.HandlerTimeout = 5 * time.Second
	cfg.ConsumeTimeout = time.Minute
	_, err := consumer.New(cfg, handlerReturning(consumer.Processed(), nil),
		consumer.WithPushConsumer(func(opts []rmq.Option) (irmq.PushConsumer, error) {
			got = opts
			return newFakePush(), nil
		}))
	require.NoError(t, err)

	o := clientOptions(t, got)

	assert.EqualValues(t, 3, o.FieldByName("MaxReconsumeTimes").Int(), "MaxAttempts is the client's MaxReconsumeTimes")
	assert.EqualValues(t, 0, o.FieldByName("RetryTimes").Int(), "not the client's request-retry option")
	assert.EqualValues(t, 4, o.FieldByName("ConsumeMessageBatchMaxSize").Int())
	assert.EqualValues(t, 8, o.FieldByName("ConsumeGoroutineNums").Int())
	assert.Equal(t, "cg", o.FieldByName("GroupName").String())
	assert.Equal(t, "orders-1", o.FieldByName("InstanceName").String())
	assert.EqualValues(t, time.Minute, o.FieldByName("ConsumeTimeout").Int())
	assert.Equal(t, int64(rmq.Clustering), o.FieldByName("ConsumerModel").Int())
	assert.Equal(t, int64(rmq.ConsumeFromLastOffset), o.FieldByName("FromWhere").Int())
}

func TestNew_DefaultsReachTheClient(t *testing.T) {
	var got []rmq.Option
	cfg := validConfig()
	cfg.StartFromFirstOffset = true
	_, err := consumer.New(cfg, handlerReturning(consumer.Processed(), nil),
		consumer.WithPushConsumer(func(opts []rmq.Option) (irmq.PushConsumer, error) {
			got = opts
			return newFakePush(), nil
		}))
	require.NoError(t, err)

	o := clientOptions(t, got)

	assert.EqualValues(t, 16, o.FieldByName("MaxReconsumeTimes").Int())
	assert.EqualValues(t, 1, o.FieldByName("ConsumeMessageBatchMaxSize").Int())
	assert.EqualValues(t, 20, o.FieldByName("ConsumeGoroutineNums").Int())
	assert.EqualValues(t, 15*time.Minute, o.FieldByName("ConsumeTimeout").Int())
	assert.Equal(t, int64(rmq.ConsumeFromFirstOffset), o.FieldByName("FromWhere").Int())
	instance := o.FieldByName("InstanceName").String()
	assert.Regexp(t, `^rmqguard-\d+-[0-9a-f]{8}$`, instance, "a unique instance name per consumer, not the client's shared DEFAULT")
}
