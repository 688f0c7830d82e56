package rmq

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInNamespace_ACL_BrokerNames(t *testing.T) {
	cases := []struct{ ns, in, want string }{
		{"", "ORDER", "ORDER"},
		{"", "%DLQ%cg", "%DLQ%cg"},
		{"prod", "ORDER", "prod%ORDER"},
		{"prod", "prod%ORDER", "prod%ORDER"}, // already in the namespace: applied twice, same name
		{"prod", "%RETRY%cg", "%RETRY%prod%cg"},
		{"prod", "%DLQ%cg", "%DLQ%prod%cg"},
		{"prod", "%DLQ%prod%cg", "%DLQ%prod%cg"},
		{"prod", "", ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, InNamespace(c.ns, c.in), "InNamespace(%q, %q)", c.ns, c.in)
		if c.in != "" && c.ns != "" && c.in != c.want {
			assert.Equal(t, c.in, WithoutNamespace(c.ns, c.want), "WithoutNamespace(%q, %q)", c.ns, c.want)
		}
	}
	assert.Equal(t, "other%ORDER", WithoutNamespace("prod", "other%ORDER"), "another namespace is left alone")
	assert.Equal(t, "%DLQ%prod%cg", NamespacedDLQTopic("prod", "cg"))
	assert.Equal(t, "%RETRY%prod%cg", NamespacedRetryTopic("prod", "cg"))
	assert.Equal(t, DLQTopic("cg"), NamespacedDLQTopic("", "cg"))
	assert.Equal(t, RetryTopic("cg"), NamespacedRetryTopic("", "cg"))
	assert.Equal(t, "%RETRY%cg", RetryTopic("cg"))
	assert.Equal(t, "%DLQ%cg", DLQTopic("cg"))
	assert.True(t, IsSystemTopic("%RETRY%cg") && IsSystemTopic("%DLQ%cg") && !IsSystemTopic("ORDER"))
}
