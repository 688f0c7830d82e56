package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Prometheus starts a Prometheus server of the test's own (the Debian package's binary, which `make up`
// installs) on a free port of 127.0.0.1, scraping target ("host:port", path /metrics) every second and
// evaluating deploy/prometheus/rules.yml every second, with its data in a temporary folder. It returns the
// server's URL once /-/ready answers, and stops the server when the test ends. A missing binary is
// Unavailable; a server that does not become ready within 30 s fails the test.
func Prometheus(t testing.TB, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		Unavailable(t, "prometheus binary: %v (apt-get install prometheus)", err)
	}
	_, file, _, _ := runtime.Caller(0)
	rules, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	body := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"+
		"rule_files: [%q]\nscrape_configs:\n  - job_name: test\n    static_configs: [{targets: [%q]}]\n", rules, target)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+config, "--web.listen-address="+addr,
		"--storage.tsdb.path="+filepath.Join(dir, "data"))
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		cancel() // kills the process; Wait reaps it before TempDir is removed
		_ = cmd.Wait()
		_ = logFile.Close()
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for !ready(url) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("prometheus on %s not ready within 30 s; log:\n%s", addr, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return url
}

func ready(url string) bool {
	resp, err := http.Get(url + "/-/ready")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
