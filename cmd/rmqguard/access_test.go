package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// The secret key set in the environment never appears in --help, of the root or of a subcommand.
func TestACL_CLI_HelpNeverShowsTheSecret(t *testing.T) {
	const secret = "s3cr3t-from-env-7f2c"
	t.Setenv(envSecretKey, secret)
	t.Setenv(envAccessKey, "ak-from-env")
	for _, args := range [][]string{{"--help"}, {"probe", "--help"}, {"topic", "ensure", "--help"}, {"dlq", "--help"}} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		require.NoError(t, root.Execute(), "%v", args)
		assert.Contains(t, out.String(), "--secret-key", "%v lists the flag", args)
		assert.NotContains(t, out.String(), secret, "%v", args)
	}
}

// The flags are read from the environment at run time, a flag given on the command line wins, and
// cluster() carries them into a topics.Cluster.
func TestACL_CLI_ClusterFromFlagsAndEnvironment(t *testing.T) {
	t.Setenv(envNameServer, "127.0.0.1:9876")
	t.Setenv(envAccessKey, "ak-env")
	t.Setenv(envSecretKey, "sk-env")
	t.Setenv(envNamespace, "ns-env")
	cluster := func(args ...string) (got struct {
		c   consumer.Credentials
		ns  string
		err error
	}) {
		opts := &globalOptions{}
		root := newRootCmdWith(opts)
		require.NoError(t, root.PersistentFlags().Parse(args))
		opts.access.fromEnv(root.PersistentFlags())
		c, err := opts.cluster()
		got.c, got.ns, got.err = c.Credentials, c.Namespace, err
		return got
	}
	env := cluster()
	require.NoError(t, env.err)
	assert.Equal(t, consumer.Credentials{AccessKey: "ak-env", SecretKey: "sk-env"}, env.c)
	assert.Equal(t, "ns-env", env.ns)
	flags := cluster("--access-key", "ak-flag", "--secret-key", "sk-flag", "--namespace", "ns-flag")
	require.NoError(t, flags.err)
	assert.Equal(t, consumer.Credentials{AccessKey: "ak-flag", SecretKey: "sk-flag"}, flags.c)
	assert.Equal(t, "ns-flag", flags.ns)

	t.Setenv(envSecretKey, "")
	half := cluster()
	require.Error(t, half.err)
	assert.Contains(t, half.err.Error(), "--secret-key")
	t.Setenv(envNamespace, "a%b")
	bad := cluster("--secret-key", "x")
	require.Error(t, bad.err)
	assert.Contains(t, bad.err.Error(), "--namespace")
}
