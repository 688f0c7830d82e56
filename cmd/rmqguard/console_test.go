package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

func TestConsoleCmd_UsageErrorsExit2(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	for name, tc := range map[string]struct {
		args []string
		env  string
		want string
	}{
		"no group":       {[]string{"--token-file", short}, "", "--group is required"},
		"no token":       {[]string{"--group", "cg"}, "", "no access token: pass --token-file PATH or set " + envConsoleToken},
		"missing file":   {[]string{"--group", "cg", "--token-file", short + "-missing"}, "", "--token-file: open"},
		"short file":     {[]string{"--group", "cg", "--token-file", short}, "", "the access token of --token-file " + short + " is 3 bytes: at least 16"},
		"short env":      {[]string{"--group", "cg"}, "abc", "the access token of $" + envConsoleToken + " is 3 bytes"},
		"no database":    {[]string{"--group", "cg", "--mysql-dsn", ""}, "0123456789abcdef", "pass --mysql-dsn"},
		"an argument":    {[]string{"--group", "cg", "extra"}, "0123456789abcdef", "want no argument"},
		"bad table pref": {[]string{"--group", "cg", "--table-prefix", "Bad-"}, "0123456789abcdef", "--table-prefix"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(envMySQLDSN, "")
			t.Setenv(envConsoleToken, tc.env)
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			args := []string{"console", "--namesrv", "127.0.0.1:1"}
			if name != "no database" {
				args = append(args, "--mysql-dsn", "u:p@tcp(127.0.0.1:1)/db")
			}
			root.SetArgs(append(args, tc.args...))
			err := root.Execute()
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, exitUsage, exitCode(err), "exit code of %v", err)
			assert.NotContains(t, out.String()+err.Error(), "0123456789abcdef", "the token is never printed")
		})
	}
}

// A non-loopback address is served with a warning that there is no TLS in front; the server stops when
// its context ends.
func TestConsoleCmd_NonLoopbackAddressWarnsAndContextEndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	require.NoError(t, serveConsole(ctx, &out, "0.0.0.0:0", http.NotFoundHandler()))
	assert.Contains(t, out.String(), "not a loopback address, and there is no TLS in front")
	assert.Contains(t, out.String(), "rmqguard console: stopped")

	out.Reset()
	require.NoError(t, serveConsole(ctx, &out, "127.0.0.1:0", http.NotFoundHandler()))
	assert.NotContains(t, out.String(), "WARNING")
	assert.True(t, loopback(&net.TCPAddr{IP: net.ParseIP("::1")}))
	assert.False(t, loopback(&net.TCPAddr{IP: net.ParseIP("192.0.2.1")}))
}

// The whole command on the real broker and MariaDB: it serves the groups page to the token (and 401
// without), and returns 0 when its context ends (as on SIGINT/SIGTERM).
func TestConsoleCmd_ServesWithTheTokenFileAndStopsWhenCancelled(t *testing.T) {
	ns := testenv.NameServer(t)
	testenv.MySQL(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	const tok = "cmd-test-token-0123456789"
	require.NoError(t, os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600))
	group := testenv.Unique("console-cmd")
	root := newRootCmd()
	stderrR, stderrW := io.Pipe()
	root.SetOut(io.Discard)
	root.SetErr(stderrW)
	root.SetArgs([]string{"--namesrv", ns, "console", "--group", group, "--addr", "127.0.0.1:0", "--token-file", tokenFile,
		"--mysql-dsn", testenv.MySQLDSN(), "--read-only"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); _ = stderrW.Close() }()
	lines := bufio.NewScanner(stderrR)
	var url string
	for url == "" && lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "rmqguard console: serving "); ok {
			url = strings.TrimSuffix(u, " (Ctrl-C stops)")
		}
	}
	require.NotEmpty(t, url, "the console says where it serves")
	go func() { _, _ = io.Copy(io.Discard, stderrR) }()

	resp, err := http.Get(url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `id="group-`+group+`"`)
	assert.Contains(t, string(body), `id="read-only-badge"`)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the console did not stop after its context ended")
	}
}
