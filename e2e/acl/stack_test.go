package acl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

func removeStack() error { return testenv.RemoveACLBroker() }

// aclWorld is one test's own namespace, topic and group on the ACL broker.
type aclWorld struct {
	stack   testenv.ACLStack
	ctx     context.Context
	cluster topics.Cluster // name server, namespace, the right keys
	topic   string         // without the namespace
	group   string         // without the namespace
}

// newACLWorld starts (or reuses) the ACL broker, creates the test's topic and its group's retry and DLQ
// topics in a namespace of its own with the right keys.
func newACLWorld(t *testing.T) *aclWorld {
	t.Helper()
	rlog.SetLogLevel("error")
	stack := testenv.ACLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	run := testenv.Unique("acl")
	w := &aclWorld{stack: stack, ctx: ctx,
		cluster: topics.Cluster{NameServers: []string{stack.NameServer}, Namespace: "ns-" + strings.ReplaceAll(run, "-", "_"),
			Credentials: stack.Credentials},
		topic: "RMQGUARD_ACL_" + strings.ReplaceAll(run, "-", "_"), group: "rmqguard-acl-" + run}
	require.NoError(t, w.cluster.Validate())
	access := w.access(stack.Credentials)
	require.NoError(t, rmq.EnsureTopic(ctx, w.cluster.NameServers, stack.Broker, w.topic, 2, access...))
	require.NoError(t, rmq.EnsureGroupTopics(ctx, w.cluster.NameServers, stack.Broker, w.group, access...))
	return w
}

// access returns the rmq options of the world's namespace with credentials c.
func (w *aclWorld) access(c consumer.Credentials) []rmq.Option {
	return []rmq.Option{rmq.WithCredentials(rmq.Credentials(c)), rmq.WithNamespace(w.cluster.Namespace)}
}

// wrongSecret is the right access key with a wrong secret.
func (w *aclWorld) wrongSecret() consumer.Credentials {
	return consumer.Credentials{AccessKey: w.stack.Credentials.AccessKey, SecretKey: "not-the-secret"}
}
