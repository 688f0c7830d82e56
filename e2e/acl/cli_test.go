package acl_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// buildCLI builds cmd/rmqguard into the test's temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rmqguard")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/rmqguard").CombinedOutput()
	require.NoError(t, err, "go build ./cmd/rmqguard: %s", out)
	return bin
}

// cliResult is one run of the CLI.
type cliResult struct {
	stdout, stderr string
	exit           int
}

// runCLI runs bin with args and the environment env added to the test's.
func runCLI(t *testing.T, bin string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), exit: code}
}

// `rmqguard topic ensure` and `rmqguard probe` with the keys from the environment work in a namespace; with
// a wrong --secret-key, or none, they exit 1 with the ACL error, and no output shows a secret.
func TestACL_CLI_TopicEnsureAndProbe(t *testing.T) {
	w := newACLWorld(t)
	bin := buildCLI(t)
	topic := "RMQGUARD_ACL_CLI_" + strings.ReplaceAll(testenv.Unique("t"), "-", "_")
	env := []string{"RMQGUARD_ACCESS_KEY=" + w.cluster.Credentials.AccessKey,
		"RMQGUARD_SECRET_KEY=" + w.cluster.Credentials.SecretKey, "RMQGUARD_NAMESPACE=" + w.cluster.Namespace}
	global := []string{"--namesrv", w.cluster.NameServers[0], "--timeout", "30s"}

	ok := runCLI(t, bin, env, append(global, "topic", "ensure", "--broker", w.stack.Broker, "--queues", "1", topic)...)
	require.Equal(t, 0, ok.exit, "stderr: %s", ok.stderr)
	assert.Regexp(t, `^topic `+topic+` on \S+ \(`+w.stack.Broker+`\): created\n$`, ok.stdout)
	ok = runCLI(t, bin, env, append(global, "probe", topic)...)
	require.Equal(t, 0, ok.exit, "stderr: %s", ok.stderr)
	assert.Contains(t, ok.stdout, "SEND_OK")
	assert.NotContains(t, ok.stdout+ok.stderr, w.cluster.Credentials.SecretKey)

	wrong := w.wrongSecret()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"ensure, wrong secret", env, append(global, "--secret-key", wrong.SecretKey, "topic", "ensure", "--broker", w.stack.Broker, topic+"_X"),
			"ACL: access denied / signature mismatch for access key " + wrong.AccessKey},
		{"probe, wrong secret", env, append(global, "--secret-key", wrong.SecretKey, "probe", topic),
			"ACL: access denied / signature mismatch for access key " + wrong.AccessKey},
		{"probe, no keys", []string{"RMQGUARD_ACCESS_KEY=", "RMQGUARD_SECRET_KEY=", "RMQGUARD_NAMESPACE=" + w.cluster.Namespace},
			append(global, "probe", topic), "ACL: access denied / signature mismatch for access key (none"},
	} {
		res := runCLI(t, bin, tc.env, tc.args...)
		assert.Equal(t, 1, res.exit, tc.name)
		assert.Contains(t, res.stderr, tc.want, tc.name)
		assert.NotContains(t, res.stdout+res.stderr, wrong.SecretKey, tc.name)
		assert.NotContains(t, res.stdout+res.stderr, w.cluster.Credentials.SecretKey, tc.name)
	}
}
