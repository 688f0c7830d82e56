package testenv

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The browser Browser starts runs a page's form from the keyboard alone: Tab to the field, type, Enter
// submits it to the server, and the answer page is read back; its screenshot is a PNG file.
func TestBrowser_SubmitsAFormFromTheKeyboard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodPost {
			_, _ = fmt.Fprintf(w, `<!doctype html><title>done</title><p id="greeting">hello %s</p>`,
				html.EscapeString(r.PostFormValue("name")))
			return
		}
		_, _ = fmt.Fprint(w, `<!doctype html><title>form</title><form method="post">`+
			`<label for="name">Name</label> <input id="name" name="name"> <button type="submit">Send</button></form>`)
	}))
	t.Cleanup(srv.Close)

	ctx := Browser(t, time.Minute)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL),
		chromedp.WaitVisible(chromedp.ID("name")),
		chromedp.KeyEvent(kb.Tab), // the first focusable element: the field
		chromedp.KeyEvent("rmq"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.ID("greeting")),
	))
	greeting, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("greeting")))
	require.NoError(t, err)
	assert.Equal(t, "hello rmq", greeting)

	path := Screenshot(t, ctx, "testenv-browser-smoke")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Positive(t, info.Size())
}

// Without the binary, Browser is Unavailable: under RMQGUARD_REQUIRE_SERVICES=1 the test fails, naming the
// script that installs it.
func TestBrowser_MissingChromiumFailsWhenServicesAreRequired(t *testing.T) {
	t.Setenv("RMQGUARD_CHROMIUM", "/nonexistent/chromium")
	t.Setenv("RMQGUARD_REQUIRE_SERVICES", "1")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Browser(tb, time.Minute)
	}()
	<-done
	assert.Contains(t, tb.msg, "deploy/local/chromium.sh install")
}
