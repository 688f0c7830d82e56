package dlq_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
)

func TestCluster_ACL_NamesAndOptions(t *testing.T) {
	plain := dlq.Cluster{NameServers: []string{"127.0.0.1:9876"}}
	assert.Equal(t, "%DLQ%cg", plain.DLQTopic("cg"))
	assert.Equal(t, "%RETRY%cg", plain.RetryTopic("cg"))
	assert.Equal(t, "ORDER", plain.Topic("ORDER"))
	assert.Len(t, plain.ProducerOptions("p"), 2, "resolver and group, no credentials")
	assert.Len(t, plain.PullConsumerOptionsOf("r"), 2)
	assert.Len(t, plain.AdminOptions(), 1)

	acl := dlq.Cluster{NameServers: []string{"127.0.0.1:9876"}, Namespace: "prod",
		Credentials: consumer.Credentials{AccessKey: "ak", SecretKey: "sk"}}
	require.NoError(t, acl.Validate())
	assert.Equal(t, "%DLQ%prod%cg", acl.DLQTopic("cg"))
	assert.Equal(t, "%RETRY%prod%cg", acl.RetryTopic("cg"))
	assert.Equal(t, "prod%ORDER", acl.Topic("ORDER"))
	assert.Equal(t, "prod%ORDER", acl.Topic("prod%ORDER"), "a name already in the namespace stays")
	assert.Equal(t, "prod%cg", acl.Topic("cg"), "a group is named in the namespace as a topic is")
	assert.Len(t, acl.ProducerOptions("p"), 3, "resolver, group and credentials")
	assert.Len(t, acl.PullConsumerOptionsOf("r"), 3)
	assert.Len(t, acl.AdminOptions(), 2)
}

func TestCluster_ACL_ValidateNamesTheProblem(t *testing.T) {
	ns := []string{"127.0.0.1:9876"}
	assert.ErrorContains(t, dlq.Cluster{NameServers: ns, Namespace: "a%b"}.Validate(), "namespace")
	err := dlq.Cluster{NameServers: ns, Credentials: consumer.Credentials{SecretKey: "sk-hidden"}}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "access key")
	assert.NotContains(t, err.Error(), "sk-hidden")
}
