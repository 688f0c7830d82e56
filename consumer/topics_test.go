package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// The topic ensure runs before the client starts; its error fails Start (the client is never started) and
// keeps the topic and broker it named.
func TestEnsureTopics_RunsBeforeTheClientAndItsErrorFailsStart(t *testing.T) {
	var got consumer.Config
	var hadDeadline bool
	fail := errors.New(`ensure topic "%RETRY%cg": create on broker 127.0.0.1:10911: refused`)
	ensure := func(ctx context.Context, cfg consumer.Config) error {
		got = cfg
		_, hadDeadline = ctx.Deadline()
		return fail
	}
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithEnsureTopics(ensure))

	err := c.Start()

	require.ErrorIs(t, err, fail)
	assert.Contains(t, err.Error(), "ensure topics")
	assert.Contains(t, err.Error(), "127.0.0.1:10911")
	assert.Equal(t, validConfig().Group, got.Group)
	assert.Equal(t, 16, got.MaxAttempts, "the Config after defaults")
	assert.True(t, hadDeadline, "bounded")
	assert.NotContains(t, fp.Calls(), "start")
	require.NoError(t, c.Shutdown(context.Background()))
	assert.NotContains(t, fp.Calls(), "shutdown", "the client panics when shut down before it started")
}

func TestEnsureTopics_SuccessStartsTheClient(t *testing.T) {
	calls := 0
	ensure := func(context.Context, consumer.Config) error { calls++; return nil }
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithEnsureTopics(ensure))
	require.NoError(t, c.Start())
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 1, calls)
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "shutdown"}, fp.Calls())
}

func TestEnsureTopics_SkipTopicEnsureTurnsItOff(t *testing.T) {
	calls := 0
	ensure := func(context.Context, consumer.Config) error { calls++; return nil }
	cfg := validConfig()
	cfg.SkipTopicEnsure = true
	c, fp := newConsumer(t, cfg, handlerReturning(consumer.Processed(), nil), consumer.WithEnsureTopics(ensure))
	require.NoError(t, c.Start())
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Zero(t, calls)
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "shutdown"}, fp.Calls())
}

// closingSink is a DeadLetterSink that is also an io.Closer.
type closingSink struct {
	closed int
	err    error
}

func (s *closingSink) DeadLetter(context.Context, *consumer.Delivery, string) error { return nil }
func (s *closingSink) Close() error                                                 { s.closed++; return s.err }

// Shutdown closes a sink that implements io.Closer, once, after the client; its error is returned.
func TestShutdown_ClosesACloserSink(t *testing.T) {
	sink := &closingSink{err: errors.New("producer shutdown failed")}
	c, _ := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithDeadLetterSink(sink))
	require.NoError(t, c.Start())

	err := c.Shutdown(context.Background())
	require.ErrorIs(t, err, sink.err)
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 1, sink.closed)
}

// A second Start that fails before the client (here the topic ensure) does not forget that the first one
// started it: Shutdown still shuts the client down, which persists the committed offsets.
func TestStart_AFailedSecondStartKeepsTheClientsShutdown(t *testing.T) {
	var fail error
	ensure := func(context.Context, consumer.Config) error { return fail }
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithEnsureTopics(ensure))
	require.NoError(t, c.Start())
	fail = errors.New("name server unreachable")

	require.ErrorIs(t, c.Start(), fail)
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "shutdown"}, fp.Calls())
}

// Shutdown of a consumer that was never started leaves the client alone: the client panics when shut down
// before it started.
func TestShutdown_WithoutStartLeavesTheClientAlone(t *testing.T) {
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil))
	require.NoError(t, c.Shutdown(context.Background()))
	assert.NotContains(t, fp.Calls(), "shutdown")
	assert.ErrorIs(t, c.Start(), consumer.ErrStopped)
}

// A broker's ACL refusal during Start's topic ensure fails Start with an error that matches ErrACL,
// whose text is the refusal's, naming the access key and the broker; another failure does not match it.
func TestEnsureTopics_ACLRefusalMatchesErrACLAndKeepsItsText(t *testing.T) {
	refusal := &rmq.ACLError{AccessKey: "ak", Broker: "127.0.0.1:10911", Code: rmq.CodeNoPermission, Remark: "check signature failed."}
	ensure := func(context.Context, consumer.Config) error { return fmt.Errorf("ensure %%RETRY%%G: %w", refusal) }
	c, _ := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithEnsureTopics(ensure))

	err := c.Start()

	require.ErrorIs(t, err, consumer.ErrACL)
	var acl *rmq.ACLError
	require.ErrorAs(t, err, &acl)
	assert.Contains(t, err.Error(), "ensure topics: ensure %RETRY%G: "+refusal.Error())
	require.NoError(t, c.Shutdown(context.Background()))

	other := func(context.Context, consumer.Config) error { return errors.New("broker unreachable") }
	c, _ = newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithEnsureTopics(other))
	assert.NotErrorIs(t, c.Start(), consumer.ErrACL)
	require.NoError(t, c.Shutdown(context.Background()))
}
