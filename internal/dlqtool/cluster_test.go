package dlqtool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/topics"
)

// The client options of a cluster carry the resolver and the group in the namespace, and the credentials
// only when the cluster has some.
func TestClusterOptions_CarryCredentialsOnlyWhenSet(t *testing.T) {
	plain := topics.Cluster{NameServers: []string{"127.0.0.1:9876"}}
	assert.Len(t, dlqtool.ProducerOptions(plain, "p"), 2, "resolver and group, no credentials")
	assert.Len(t, dlqtool.PullConsumerOptionsOf(plain, "r"), 2)
	assert.Len(t, dlqtool.AdminOptions(plain), 1)

	acl := topics.Cluster{NameServers: []string{"127.0.0.1:9876"}, Namespace: "prod",
		Credentials: consumer.Credentials{AccessKey: "ak", SecretKey: "sk"}}
	assert.Len(t, dlqtool.ProducerOptions(acl, "p"), 3, "resolver, group and credentials")
	assert.Len(t, dlqtool.PullConsumerOptionsOf(acl, "r"), 3)
	assert.Len(t, dlqtool.AdminOptions(acl), 2)
}
