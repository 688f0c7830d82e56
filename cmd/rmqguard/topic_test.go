package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// runTopicEnsure runs `rmqguard topic ensure` with args and returns stdout and the exit code.
func runTopicEnsure(ns, broker string, args ...string) (string, int) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--namesrv", ns, "--timeout", "30s", "topic", "ensure", "--broker", broker}, args...))
	code := exitCode(root.Execute())
	return out.String() + errOut.String(), code
}

// `topic ensure --broker B` says per topic, on broker B, whether it created it, found it, or made a
// write-only DLQ readable; a second run reports "exists"; exit 0 each time, 2 (a usage error) for a queue
// count below 1.
func TestCLI_TopicEnsureReportsCreatedExistsUpdated(t *testing.T) {
	ns, broker := testenv.NameServer(t), testenv.Broker(t)
	group := testenv.Unique("cli-topics")
	retry, dlqTopic := rmq.RetryTopic(group), rmq.DLQTopic(group)
	writeOnly := rmq.DLQTopic(group + "-old")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, tp := range []string{retry, dlqTopic, writeOnly} {
			_ = rmq.DeleteTopic(ctx, []string{ns}, broker, tp)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, rmq.UpdateTopic(ctx, broker, rmq.TopicConfig{Topic: writeOnly, ReadQueues: 1, WriteQueues: 1,
		Perm: rmq.PermWrite}, rmq.Credentials{}))
	require.Eventually(t, func() bool {
		r, err := rmq.TopicRoute(ctx, []string{ns}, writeOnly)
		return err == nil && len(r) == 1
	}, 10*time.Second, 100*time.Millisecond)

	route, err := rmq.TopicRoute(ctx, []string{ns}, writeOnly)
	require.NoError(t, err)
	on := " on " + route[0].BrokerName + " (" + broker + "): "
	out, code := runTopicEnsure(ns, broker, "--queues", "1", retry, dlqTopic, writeOnly)
	require.Equal(t, 0, code, out)
	assert.Equal(t, "topic "+retry+on+"created\ntopic "+dlqTopic+on+"created\ntopic "+writeOnly+on+"updated\n", out)

	out, code = runTopicEnsure(ns, broker, "--queues", "1", retry, dlqTopic, writeOnly)
	require.Equal(t, 0, code, out)
	assert.Equal(t, "topic "+retry+on+"exists\ntopic "+dlqTopic+on+"exists\ntopic "+writeOnly+on+"exists\n", out)

	out, code = runTopicEnsure(ns, broker, "--queues", "0", retry)
	assert.Equal(t, exitUsage, code, out)
}

// A missing or invalid setting of `topic ensure` is a usage error, exit 2 as for every rmqguard command
// (the README's "2 for a usage error"), found before any name server is dialled: the addresses here
// reach nothing, so a command that got as far as the broker would fail with 1.
func TestCLI_TopicEnsureUsageErrorsExit2(t *testing.T) {
	const ns, broker = "127.0.0.1:1", "127.0.0.1:1"
	for name, args := range map[string][]string{
		"no topic":          {},
		"queues below 1":    {"--queues", "0", "T"},
		"empty broker":      {"--broker", "", "T"},
		"access key alone":  {"--access-key", "ak", "T"},
		"invalid namespace": {"--namespace", "a%b", "T"},
		"an unknown flag":   {"--bogus", "T"},
	} {
		t.Run(name, func(t *testing.T) {
			out, code := runTopicEnsure(ns, broker, args...)
			assert.Equal(t, exitUsage, code, out)
		})
	}
}
