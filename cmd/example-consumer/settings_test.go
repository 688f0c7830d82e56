package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// The secret in the environment is used at run time and never shown by --help; a flag wins over it.
func TestACL_ExampleConsumer_AccessFromFlagsAndEnvironment(t *testing.T) {
	const secret = "example-secret-91ab"
	t.Setenv("RMQGUARD_ACCESS_KEY", "ak-env")
	t.Setenv("RMQGUARD_SECRET_KEY", secret)
	t.Setenv("RMQGUARD_NAMESPACE", "ns-env")
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"run", "--help"})
	require.NoError(t, root.Execute())
	assert.Contains(t, out.String(), "--secret-key")
	assert.NotContains(t, out.String(), secret)

	s := &settings{}
	c, ns, err := s.clusterAccess()
	require.NoError(t, err)
	assert.Equal(t, consumer.Credentials{AccessKey: "ak-env", SecretKey: secret}, c)
	assert.Equal(t, "ns-env", ns)
	s = &settings{secretKey: "flag-secret", namespace: "ns-flag"}
	c, ns, err = s.clusterAccess()
	require.NoError(t, err)
	assert.Equal(t, consumer.Credentials{AccessKey: "ak-env", SecretKey: "flag-secret"}, c)
	assert.Equal(t, "ns-flag", ns)

	t.Setenv("RMQGUARD_ACCESS_KEY", "")
	_, _, err = (&settings{}).clusterAccess()
	assert.ErrorContains(t, err, "--access-key")
	_, _, err = (&settings{accessKey: "a", secretKey: "b", namespace: "bad%ns"}).clusterAccess()
	assert.ErrorContains(t, err, "--namespace")
}
