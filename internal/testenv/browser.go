package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// defaultChromium is the binary Browser starts unless RMQGUARD_CHROMIUM names another: Debian's chromium,
// which `make up` installs (deploy/local/chromium.sh).
const defaultChromium = "/usr/bin/chromium"

// Browser starts a headless Chromium of the test's own (RMQGUARD_CHROMIUM, else /usr/bin/chromium; 1280×800, no
// sandbox: it loads only the test's loopback pages) and returns a chromedp context on its first tab, cancelled
// after timeout. The browser stops when the test ends. A missing binary is Unavailable; a browser that does not
// start fails the test with its output.
func Browser(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	bin := Env("RMQGUARD_CHROMIUM", defaultChromium)
	if _, err := exec.LookPath(bin); err != nil {
		Unavailable(t, "chromium: %v (make up installs it: deploy/local/chromium.sh install)", err)
		return nil
	}
	var out syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.UserDataDir(t.TempDir()), chromedp.CombinedOutput(&out))
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(ctx, 10*time.Second)
		defer stopCancel()
		if err := chromedp.Cancel(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("chromium: close: %v", err)
		}
		cancel()
		allocCancel() // waits for the process to exit, before TempDir is removed
	})
	// The first Run starts the browser and binds it to ctx, which must not carry the timeout (chromedp.NewContext).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium %s did not start: %v\n%s", bin, err, out.String())
	}
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(tcancel)
	return tctx
}

// Screenshot captures the whole page of ctx's tab as a PNG named name+".png": into docs/images when
// RMQGUARD_SCREENSHOTS=1 (`make screenshots`, for the README; the file is replaced), else into the test's
// temporary folder. It returns the file's path, and fails the test when the capture fails.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s: not a PNG (%d bytes)", name, len(png))
	}
	dir := t.TempDir()
	if os.Getenv("RMQGUARD_SCREENSHOTS") == "1" {
		dir = filepath.Join(repoRoot(), "docs", "images")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	return path
}

// syncBuffer keeps the browser's output (written by chromedp's goroutines) for the message of a failed start.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
