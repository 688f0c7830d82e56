package console_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// The tests of this file drive the console in headless Chromium (testenv.Browser) on the real broker and
// MariaDB. Each writes a screenshot of every page it visits (testenv.Screenshot; docs/images/console-*.png
// with RMQGUARD_SCREENSHOTS=1, which `make screenshots` sets).

// browserTimeout bounds one test's browser work (pages scan the broker; a replay sends).
const browserTimeout = 2 * time.Minute

// browse is one browser tab on a world's console.
type browse struct {
	t   *testing.T
	w   *world
	ctx context.Context
}

func newBrowse(t *testing.T, w *world) *browse {
	t.Helper()
	return &browse{t: t, w: w, ctx: testenv.Browser(t, browserTimeout)}
}

// tab opens another tab of the same browser (same cookies).
func (b *browse) tab() *browse {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	require.NoError(b.t, chromedp.Do(ctx))
	return &browse{t: b.t, w: b.w, ctx: ctx}
}

// load runs steps that load a page (a navigation, a click or key that submits a form), waits until it has
// loaded and returns its HTTP status.
func (b *browse) load(steps ...chromedp.Action[chromedp.Void]) int {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, steps...)
	require.NoError(b.t, err)
	return int(resp.Status)
}

// open navigates to the console's path and returns the HTTP status.
func (b *browse) open(path string) int {
	b.t.Helper()
	return b.load(chromedp.Navigate(b.w.srv.URL + path))
}

// do runs actions that load nothing.
func (b *browse) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, steps...))
}

// text returns the visible text of the first element that matches the CSS selector.
func (b *browse) text(css string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(css)))
	require.NoError(b.t, err, css)
	return strings.TrimSpace(s)
}

// eval evaluates a JavaScript expression in the page (an observation only: the user's input is keys and
// clicks).
func eval[T any](b *browse, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, expr)
	return v
}

// rows returns the store IDs of the letter rows shown, in order.
func (b *browse) rows() []string {
	b.t.Helper()
	ids := eval[[]string](b, `Array.from(document.querySelectorAll('#letters tbody tr')).map(r => r.id.replace(/^letter-/, ''))`)
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// cell returns the text of the cell data-field=field of the table row with id.
func (b *browse) cell(rowID, field string) string {
	b.t.Helper()
	return b.text(`tr[id="` + rowID + `"] td[data-field="` + field + `"]`)
}

// focused returns the id of the element that has the keyboard focus.
func (b *browse) focused() string {
	b.t.Helper()
	return eval[string](b, `document.activeElement ? document.activeElement.id : ""`)
}

// tabTo presses Tab until the element with id has the focus (at most 60 times), as a keyboard user does.
func (b *browse) tabTo(id string) {
	b.t.Helper()
	for range 60 {
		if b.focused() == id {
			return
		}
		b.do(chromedp.KeyEvent(kb.Tab))
	}
	b.t.Fatalf("Tab never reached #%s (focus is on #%s)", id, b.focused())
}

// awaitResult waits until a confirmed replay's progress page, reloading itself, shows the result.
func (b *browse) awaitResult() {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.ID("result-summary")))
}

// shot writes the screenshot of the page shown.
func (b *browse) shot(page string) {
	b.t.Helper()
	testenv.Screenshot(b.t, b.ctx, "console-"+page)
}

// login logs in through the login form with the mouse and waits for the groups page.
func (b *browse) login() {
	b.t.Helper()
	require.Equal(b.t, http.StatusOK, b.open("/login"))
	b.shot("login")
	b.do(chromedp.SendKeys(chromedp.ID("login-token"), token))
	require.Equal(b.t, http.StatusOK, b.load(chromedp.Click(chromedp.ID("login-submit"))))
	b.do(chromedp.WaitVisible(chromedp.ID("groups")))
}

// K8: in the browser an operator logs in, sees the group's DLQ depth, lists its three letters, narrows them
// with a filter and opens one, whose JSON body is pretty-printed.
func TestConsoleBrowser_ListsFiltersAndOpensALetter(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "undecodable body: unexpected EOF",
		body: []byte(`{"orderNo":"o-1","quantity":2}`)})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderPaid", reason: "bug: unknown SKU"})
	c := w.publish(letterSpec{eventID: testenvID(t, "c"), eventType: "OrderPaid", reason: "bug: unknown SKU", origin: "PAYMENT"})
	br := newBrowse(t, w)
	br.login()

	br.shot("groups")
	assert.Equal(t, "3", br.cell("group-"+w.group, "letters"), "the DLQ depth")
	assert.Equal(t, "3", br.cell("group-"+w.group, "waiting"))

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("group-link-"+w.group))))
	br.shot("letters")
	assert.Equal(t, []string{a, b, c}, br.rows())
	assert.Equal(t, "not replayed", br.cell("letter-"+a, "replay"))
	assert.Equal(t, "PAYMENT", br.cell("letter-"+c, "origin-topic"))

	br.do(chromedp.SendKeys(chromedp.ID("filter-reason"), "SKU"))
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("filter-apply"))))
	assert.Equal(t, []string{b, c}, br.rows(), "reason contains SKU")
	br.do(chromedp.SendKeys(chromedp.ID("filter-origin-topic"), "PAYMENT"))
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("filter-apply"))))
	br.shot("letters-filtered")
	assert.Equal(t, []string{c}, br.rows(), "reason contains SKU and origin topic PAYMENT")
	assert.Equal(t, "SKU", eval[string](br, `document.getElementById('filter-reason').value`), "the filter stays in its field")
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("filter-clear"))))
	assert.Equal(t, []string{a, b, c}, br.rows(), "cleared")
	assert.Empty(t, eval[string](br, `document.getElementById('filter-reason').value`))

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("letter-link-"+a))))
	br.shot("letter")
	assert.Equal(t, "json", eval[string](br, `document.getElementById('body').dataset.format`))
	assert.Equal(t, "{\n  \"orderNo\": \"o-1\",\n  \"quantity\": 2\n}",
		eval[string](br, `document.getElementById('body').textContent`), "the body, pretty-printed")
	assert.Equal(t, "undecodable body: unexpected EOF", br.text("#meta-reason"))
	assert.Equal(t, "2", br.text("#meta-attempts"))
	assert.Equal(t, "ORDER", br.text("#meta-origin-topic"))
	assert.Equal(t, "no", br.text("#meta-processed"))
	assert.Equal(t, "Never replayed.", br.text("#replay-history-none"))
}

// S5, K8: in the browser two of three letters are selected, previewed (nothing sent) and confirmed: the broker
// stores those two replays and the list shows them sent. The same preview confirmed again in a second tab
// (a double submit) sends nothing, and its result page says so.
func TestConsoleBrowser_ReplaysTwoOfThreeOnceEvenWhenConfirmedTwice(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "bug"})
	c := w.publish(letterSpec{eventID: testenvID(t, "c"), eventType: "OrderCreated", reason: "bug"})
	br := newBrowse(t, w)
	br.login()
	require.Equal(t, http.StatusOK, br.open(w.lettersPath(nil)))
	require.Equal(t, []string{a, b, c}, br.rows())

	br.do(chromedp.Click(chromedp.ID("select-"+a)), chromedp.Click(chromedp.ID("select-"+c)))
	br.shot("letters-selected")
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("replay-preview"))))
	br.shot("preview")
	assert.Equal(t, "would-send", br.cell("outcome-"+a, "outcome"))
	assert.Equal(t, "would-send", br.cell("outcome-"+c, "outcome"))
	assert.Zero(t, eval[int](br, `document.querySelectorAll('#outcome-`+b+`').length`), "the unselected letter is not in the preview")
	assert.Contains(t, br.text("#preview-summary"), "2 would be sent")
	assert.Empty(t, w.sent.replayed(), "a preview sends nothing")

	second := br.tab() // the same preview, open in a second tab before the first is confirmed
	require.Equal(t, http.StatusOK, second.load(chromedp.Navigate(w.srv.URL+w.lettersPath(nil))))
	second.do(chromedp.Click(chromedp.ID("select-"+a)), chromedp.Click(chromedp.ID("select-"+c)))
	require.Equal(t, http.StatusOK, second.load(chromedp.Click(chromedp.ID("replay-preview"))))
	second.do(chromedp.WaitVisible(chromedp.ID("replay-confirm")))

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("replay-confirm"))))
	br.awaitResult()
	br.shot("result")
	assert.Equal(t, "sent", br.cell("outcome-"+a, "outcome"))
	assert.Equal(t, "sent", br.cell("outcome-"+c, "outcome"))
	assert.Contains(t, br.text("#result-summary"), ": 2 sent,")
	assert.Equal(t, []string{a, c}, w.sent.replayed(), "the broker stored the replays of the two selected")

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("back-to-letters"))))
	br.shot("letters-replayed")
	assert.True(t, strings.HasPrefix(br.cell("letter-"+a, "replay"), "sent "), "a's status: %q", br.cell("letter-"+a, "replay"))
	assert.True(t, strings.HasPrefix(br.cell("letter-"+c, "replay"), "sent "), "c's status: %q", br.cell("letter-"+c, "replay"))
	assert.Contains(t, br.cell("letter-"+a, "replay"), "by alice@console-test", "the operator")
	assert.Equal(t, "not replayed", br.cell("letter-"+b, "replay"))

	require.Equal(t, http.StatusOK, second.load(chromedp.Click(chromedp.ID("replay-confirm"))))
	second.awaitResult()
	second.shot("result-again")
	assert.Equal(t, "skipped-already-replayed", second.cell("outcome-"+a, "outcome"))
	assert.Equal(t, "skipped-already-replayed", second.cell("outcome-"+c, "outcome"))
	assert.Contains(t, second.text("#result-summary"), ": 0 sent, 2 skipped as already replayed")
	assert.Equal(t, []string{a, c}, w.sent.replayed(), "the second confirm sent nothing")

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("letter-link-"+a))))
	br.shot("letter-replayed")
	assert.Equal(t, "sent", br.text(`#replay-history td[data-field="status"]`), "the letter page shows the audit row")
	assert.Equal(t, "alice@console-test", br.text(`#replay-history td[data-field="replayed-by"]`))
}

// A browser without the session cookie gets 401 and the login form on every page, and no letter.
func TestConsoleBrowser_PageWithoutTokenIsRefused(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	br := newBrowse(t, w)
	for _, path := range []string{"/", w.lettersPath(nil), w.lettersPath(nil) + "/" + a} {
		assert.Equal(t, http.StatusUnauthorized, br.open(path), path)
		br.do(chromedp.WaitVisible(chromedp.ID("login-form")))
		assert.Equal(t, "An access token is required.", br.text("#login-message"), path)
		assert.Zero(t, eval[int](br, `document.querySelectorAll('#letters, #groups, #letter-meta').length`), path)
	}
	br.shot("unauthorized")
	cookies := eval[string](br, `document.cookie`)
	assert.Empty(t, cookies, "no session cookie was set (and an HttpOnly one would not show here)")

	br.do(chromedp.SendKeys(chromedp.ID("login-token"), "wrong-token-0123456789"))
	assert.Equal(t, http.StatusUnauthorized, br.load(chromedp.Click(chromedp.ID("login-submit"))), "a wrong token")
	assert.Equal(t, "Wrong access token.", br.text("#login-message"))
}

// K8: the whole replay works from the keyboard alone (Tab, Space, Enter; no mouse): log in, open the group,
// select two of three letters, preview, confirm; the broker stores exactly those two.
func TestConsoleBrowser_KeyboardOnlyReplaysTwoOfThree(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "bug"})
	c := w.publish(letterSpec{eventID: testenvID(t, "c"), eventType: "OrderCreated", reason: "bug"})
	br := newBrowse(t, w)
	key := func(k string) chromedp.Action[chromedp.Void] { return chromedp.KeyEvent(k) }

	require.Equal(t, http.StatusOK, br.open("/login"))
	br.tabTo("login-token")
	br.shot("keyboard-login")
	br.do(key(token))
	require.Equal(t, http.StatusOK, br.load(key(kb.Enter)), "Enter in the token field logs in")
	br.do(chromedp.WaitVisible(chromedp.ID("groups")))

	br.tabTo("group-link-" + w.group)
	br.shot("keyboard-groups")
	require.Equal(t, http.StatusOK, br.load(key(kb.Enter)))
	require.Equal(t, []string{a, b, c}, br.rows())

	for _, id := range []string{a, c} {
		br.tabTo("select-" + id)
		br.do(key(" "))
		assert.True(t, eval[bool](br, `document.getElementById('select-`+id+`').checked`), "Space checks %s", id)
	}
	assert.False(t, eval[bool](br, `document.getElementById('select-`+b+`').checked`))
	br.tabTo("replay-preview")
	br.shot("keyboard-letters")
	require.Equal(t, http.StatusOK, br.load(key(kb.Enter)))
	assert.Equal(t, "would-send", br.cell("outcome-"+a, "outcome"))
	assert.Equal(t, "would-send", br.cell("outcome-"+c, "outcome"))

	br.tabTo("replay-confirm")
	br.shot("keyboard-preview")
	require.Equal(t, http.StatusOK, br.load(key(" ")), "Space on the focused button confirms")
	br.awaitResult()
	br.shot("keyboard-result")
	assert.Equal(t, "sent", br.cell("outcome-"+a, "outcome"))
	assert.Equal(t, "sent", br.cell("outcome-"+c, "outcome"))
	assert.Equal(t, []string{a, c}, w.sent.replayed())
}

// S5 (edit, then replay) in the browser: the operator opens a letter, edits its body in the form's text
// field with the keyboard, sees the difference in the preview, confirms, and the letter page then shows
// it superseded, with no replay or edit offered; the broker stored one copy, with the edited body.
func TestConsoleBrowser_EditsALetterAndSeesItSuperseded(t *testing.T) {
	w := newWorld(t, nil)
	ev := testenvID(t, "e")
	a := w.publish(letterSpec{eventID: ev, eventType: "OrderCreated", reason: "bug: unknown SKU",
		body: []byte(`{"eventId":"` + ev + `","sku":"BAD-1"}`)})
	br := newBrowse(t, w)
	br.login()
	require.Equal(t, http.StatusOK, br.open(w.lettersPath(nil)))
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("letter-link-"+a))))
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("edit-one"))))
	assert.Contains(t, eval[string](br, `document.getElementById('edit-body').value`), `"sku": "BAD-1"`, "the body, pretty JSON")

	edited := `{"eventId":"` + ev + `","sku":"GOOD-1"}`
	br.do(chromedp.Click(chromedp.ID("edit-body")), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.KeyEvent(edited))
	br.shot("edit")
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("edit-preview"))))
	br.shot("edit-preview")
	diff := br.text("#edit-diff")
	assert.Contains(t, diff, `-   "sku": "BAD-1"`)
	assert.Contains(t, diff, `+   "sku": "GOOD-1"`)
	assert.Contains(t, br.text("#edit-preview-summary"), "Nothing has been sent yet")
	assert.Empty(t, w.sent.replayed(), "a preview sends nothing")

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("edit-confirm"))))
	assert.Contains(t, br.text("#edit-sent"), "this letter is superseded")
	require.Equal(t, []string{a}, w.sent.replayed())
	assert.Equal(t, edited, string(w.sent.messages()[0].Body))

	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("back-to-letter"))))
	br.shot("letter-superseded")
	assert.Contains(t, br.text("#letter-superseded"), "superseded: edited ")
	assert.Contains(t, br.text("#letter-superseded"), "by alice@console-test")
	assert.Zero(t, eval[int](br, `document.querySelectorAll('#replay-one-form, #edit-one-form').length`), "no replay, no edit")
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("nav-letters"))))
	assert.True(t, eval[bool](br, `document.getElementById('select-`+a+`').disabled`), "its checkbox is disabled")
	assert.Contains(t, br.cell("letter-"+a, "replay"), "superseded: edited ")
}

// K8: in the browser, a confirmed replay shows its progress page, which reloads itself (no script) until
// the replay ends and then shows the result.
func TestConsoleBrowser_ReplayProgressReloadsUntilTheResult(t *testing.T) {
	gate := &gatedSender{open: make(chan struct{})}
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(gate.open) }) })
	w := newWorld(t, func(c *console.Config) {
		gate.next = c.Sender
		c.Sender = gate
	})
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "bug"})
	br := newBrowse(t, w)
	br.login()
	require.Equal(t, http.StatusOK, br.open(w.lettersPath(nil)))
	br.do(chromedp.Click(chromedp.ID("select-"+a)), chromedp.Click(chromedp.ID("select-"+b)))
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("replay-preview"))))
	require.Equal(t, http.StatusOK, br.load(chromedp.Click(chromedp.ID("replay-confirm"))))
	assert.Contains(t, br.text("#progress-summary"), "of 2 letters done")
	require.Eventually(t, func() bool { // the page reloads meanwhile: an evaluation may meet no document
		s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`(document.getElementById('progress-summary') || {}).textContent || ''`))
		return err == nil && strings.Contains(s, "1 of 2 letters done")
	}, time.Minute, 100*time.Millisecond, "the first letter is sent, the second held")
	br.shot("progress")
	assert.Contains(t, br.text("#progress-summary"), "1 sent, 0 skipped, 0 failed so far")

	release.Do(func() { close(gate.open) })
	br.awaitResult()
	assert.Contains(t, br.text("#result-summary"), ": 2 sent,")
	assert.Equal(t, []string{a, b}, w.sent.replayed())
}
