package console_test

import (
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
)

// Every page needs the token: without it, or with a wrong one, 401 and the login form; with it as Bearer or
// through /login, the page, with the security headers.
func TestConsole_RequestWithoutTokenIsRefused(t *testing.T) {
	w := newWorld(t, nil)
	for _, path := range []string{"/", w.lettersPath(nil), w.lettersPath(nil) + "/0A0B"} {
		p := w.get(w.client(), path)
		assert.Equal(t, http.StatusUnauthorized, p.status, path)
		assert.Contains(t, p.body, `id="login-form"`, path)
		assert.Equal(t, `Bearer realm="rmqguard console"`, p.header.Get("WWW-Authenticate"))
	}
	p := w.post(w.client(), "/groups/"+w.group+"/replay", url.Values{"letter": {"x"}})
	assert.Equal(t, http.StatusUnauthorized, p.status, "a replay without the token")

	req, err := http.NewRequest(http.MethodGet, w.srv.URL+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token+"x")
	resp, err := w.client().Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, read(t, resp).status, "a wrong Bearer token")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = w.client().Do(req)
	require.NoError(t, err)
	p = read(t, resp)
	assert.Equal(t, http.StatusOK, p.status, "the right Bearer token")
	assert.Contains(t, p.body, `id="group-`+w.group+`"`)

	p = w.post(w.client(), "/login", url.Values{"token": {"wrong-token-0123456789"}})
	assert.Equal(t, http.StatusUnauthorized, p.status)
	assert.Contains(t, p.body, "Wrong access token")

	c := w.login()
	u, err := url.Parse(w.srv.URL)
	require.NoError(t, err)
	require.Len(t, c.Jar.Cookies(u), 1, "the session cookie")
	p = w.get(c, "/")
	require.Equal(t, http.StatusOK, p.status)
	assert.Equal(t, "default-src 'self'", p.header.Get("Content-Security-Policy"))
	assert.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
	assert.NotContains(t, p.body, token, "the token is never shown")

	p = w.post(c, "/logout", url.Values{"csrf": {p.csrf(t)}})
	assert.Equal(t, http.StatusSeeOther, p.status)
	assert.Equal(t, http.StatusUnauthorized, w.get(c, "/").status, "logged out")
}

// A Bearer request is a session of its own: no cookie, nothing kept (so scripts never push a browser's
// session out), and no CSRF token needed (a browser never sends the header on its own). /login reads at most
// a small body before checking the token; the one public path is the style sheet, with no listing.
func TestConsole_BearerRequestsKeepNoSessionAndLoginReadsASmallBody(t *testing.T) {
	w := newWorld(t, nil)
	browser := w.login()
	bearer := func(method, path string) page {
		req, err := http.NewRequest(method, w.srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := w.client().Do(req)
		require.NoError(t, err)
		if method == http.MethodGet {
			assert.Empty(t, resp.Cookies(), "no session cookie for a Bearer request")
		}
		return read(t, resp)
	}
	require.Equal(t, http.StatusOK, bearer(http.MethodGet, "/").status)
	for range 1005 { // more than the sessions kept; a group not served answers after the token is checked
		require.Equal(t, http.StatusNotFound, bearer(http.MethodGet, "/groups/not-served/letters").status)
	}
	assert.Equal(t, http.StatusOK, w.get(browser, "/").status, "the browser's session survives")
	assert.Equal(t, http.StatusSeeOther, bearer(http.MethodPost, "/logout").status, "a Bearer POST needs no CSRF token")

	big := url.Values{"token": {token}, "pad": {strings.Repeat("x", 64<<10)}}
	assert.Equal(t, http.StatusUnauthorized, w.post(w.client(), "/login", big).status, "a login body past 8 KiB is not read")

	assert.Equal(t, http.StatusOK, w.get(w.client(), "/static/console.css").status)
	assert.Equal(t, http.StatusNotFound, w.get(w.client(), "/static/").status, "no listing")
}

// The session cookie is HttpOnly and SameSite=Strict.
func TestConsole_SessionCookieIsHttpOnlyAndSameSiteStrict(t *testing.T) {
	w := newWorld(t, nil)
	resp, err := w.client().PostForm(w.srv.URL+"/login", url.Values{"token": {token}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	assert.True(t, cookies[0].HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
}

// The groups page shows the group's DLQ depth (the census), its parked outbox rows (F33) and, without
// Prometheus, a dash.
func TestConsole_GroupsPageShowsDLQDepthAndParkedOutboxRows(t *testing.T) {
	var prefix string
	w := newWorld(t, func(c *console.Config) {
		prefix = outboxTable(t, c.DB)
		c.TablePrefix = prefix
	})
	w.publish(letterSpec{eventID: testenvID(t, "g1"), eventType: "OrderCreated", reason: "bug"})
	w.publish(letterSpec{eventID: testenvID(t, "g2"), eventType: "OrderCreated", reason: "bug"})
	for i, r := range []struct{ kind, scope, status string }{
		{outboxsql.KindMessage, w.group, outboxsql.StatusParked}, {outboxsql.KindEffect, w.group, outboxsql.StatusParked},
		{outboxsql.KindMessage, w.group, outboxsql.StatusParked}, {outboxsql.KindMessage, w.group, outboxsql.StatusPending},
		{outboxsql.KindMessage, "other-" + w.group, outboxsql.StatusParked},
	} {
		_, err := w.db.Exec(`INSERT INTO `+prefix+outboxsql.Table+` (kind, event_id, source_event_id, scope, name, sharding_key,
		   body, status, next_attempt_at, created_at) VALUES (?, ?, 'ev', ?, 'n', 'k', 'b', ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
			r.kind, "ev-"+strconv.Itoa(i), r.scope, r.status)
		require.NoError(t, err)
	}
	p := w.get(w.login(), "/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	row := p.row(t, "group-"+w.group)
	assert.Equal(t, "2", field(t, row, "letters"))
	assert.Equal(t, "2", field(t, row, "waiting"))
	assert.Equal(t, "2 messages, 1 effects", field(t, row, "parked"))
	assert.Equal(t, "—", field(t, row, "duplicate-ratio"))
	assert.Contains(t, p.body, "no Prometheus (--prometheus URL) and no consumer /metrics (--metrics URL) configured")
}

// Without an outbox table under the prefix, the parked column shows a dash and a note says why.
func TestConsole_GroupsPageWithoutOutboxShowsADash(t *testing.T) {
	w := newWorld(t, func(c *console.Config) { c.TablePrefix = "nooutbox_" })
	p := w.get(w.login(), "/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Equal(t, "—", field(t, p.row(t, "group-"+w.group), "parked"))
	assert.Contains(t, p.body, "no outbox table (nooutbox_rmqguard_outbox)")
}

// Without Prometheus, the duplicate ratio comes from the consumers' own /metrics (rmqguard's metrics
// package behind promhttp, one endpoint per consumer process): duplicates over acknowledged messages since
// they started, summed over the endpoints.
func TestConsole_GroupsPageShowsTheDuplicateRatioFromTheConsumersMetrics(t *testing.T) {
	var urls []string
	group := testenv.Unique("console")
	for range 2 { // two consumer processes: 3 processed and 1 duplicate each
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		require.NoError(t, err)
		d := &consumer.Delivery{Group: group, Topic: "ORDER"}
		for _, o := range []consumer.Outcome{consumer.Processed(), consumer.Processed(), consumer.Processed(), consumer.Duplicate()} {
			m.Decided(d, consumer.Decision{Outcome: o})
		}
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	w := newWorld(t, func(c *console.Config) { c.Groups, c.MetricsURLs = append(c.Groups, group), urls })

	p := w.get(w.login(), "/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Equal(t, "25.00 % (since start)", field(t, p.row(t, "group-"+group), "duplicate-ratio"))
	assert.Equal(t, "no traffic", field(t, p.row(t, "group-"+w.group), "duplicate-ratio"))
}

// The list shows every letter with its status and filters by reason, event type, origin topic, time and
// replay status (K8).
func TestConsole_ListFiltersLetters(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "undecodable body: eof"})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderPaid", reason: "bug: unknown SKU"})
	c := w.publish(letterSpec{eventID: testenvID(t, "c"), eventType: "OrderPaid", reason: "bug: unknown SKU", origin: "PAYMENT"})
	cl := w.login()

	p := w.get(cl, w.lettersPath(nil))
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Equal(t, []string{a, b, c}, p.letters())
	assert.Equal(t, "not replayed", field(t, p.row(t, "letter-"+a), "replay"))
	assert.Equal(t, "no", field(t, p.row(t, "letter-"+a), "processed"))
	assert.Equal(t, "PAYMENT", field(t, p.row(t, "letter-"+c), "origin-topic"))

	for name, tc := range map[string]struct {
		q    url.Values
		want []string
	}{
		"reason substring": {url.Values{"reason": {"SKU"}}, []string{b, c}},
		"event type":       {url.Values{"event_type": {"OrderCreated"}}, []string{a}},
		"origin topic":     {url.Values{"origin_topic": {"PAYMENT"}}, []string{c}},
		"two at once":      {url.Values{"event_type": {"OrderPaid"}, "origin_topic": {"ORDER"}}, []string{b}},
		"since an hour":    {url.Values{"since": {hoursAgo(1)}}, []string{a, b, c}},
		"until an hour":    {url.Values{"until": {hoursAgo(1)}}, nil},
		"status waiting":   {url.Values{"status": {"waiting"}}, []string{a, b, c}},
		"status sent":      {url.Values{"status": {"sent"}}, nil},
	} {
		p := w.get(cl, w.lettersPath(tc.q))
		require.Equal(t, http.StatusOK, p.status, name)
		assert.Equal(t, tc.want, p.letters(), name)
	}
	p = w.get(cl, w.lettersPath(url.Values{"since": {"yesterday"}}))
	assert.Equal(t, http.StatusBadRequest, p.status)
	assert.Contains(t, p.body, `id="filter-error"`)
	assert.Equal(t, http.StatusNotFound, w.get(cl, "/groups/not-"+w.group+"/letters").status, "only configured groups")
}

// 51 letters are two pages: 50, then 1.
func TestConsole_ListPagesFiftyLettersAtATime(t *testing.T) {
	w := newWorld(t, nil)
	for i := 0; i < 51; i++ {
		w.publish(letterSpec{eventID: testenvID(t, "p"), eventType: "OrderCreated", reason: "bug"})
	}
	cl := w.login()
	first := w.get(cl, w.lettersPath(nil))
	require.Equal(t, http.StatusOK, first.status)
	assert.Len(t, first.letters(), 50)
	assert.Contains(t, first.body, `id="page-next"`)
	assert.NotContains(t, first.body, `id="page-prev"`)
	second := w.get(cl, w.lettersPath(url.Values{"page": {"2"}}))
	assert.Len(t, second.letters(), 1)
	assert.Contains(t, second.body, `id="page-prev"`)
	assert.NotContains(t, first.letters(), second.letters()[0])
}

// The letter page shows a JSON body pretty-printed and a binary one as a hex dump, with the metadata.
func TestConsole_LetterPageShowsPrettyJSONAndHexForBinary(t *testing.T) {
	w := newWorld(t, nil)
	jsonID := w.publish(letterSpec{eventID: testenvID(t, "j"), eventType: "OrderCreated", reason: "bug: unknown SKU",
		body: []byte(`{"orderNo":"o-1","quantity":2}`)})
	binID := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "undecodable body",
		body: []byte{0x00, 0x01, 0xfe, 'h', 'i'}})
	cl := w.login()

	p := w.get(cl, w.lettersPath(nil)+"/"+jsonID)
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, `data-format="json"`)
	assert.Contains(t, html.UnescapeString(p.body), "{\n  \"orderNo\": \"o-1\",\n  \"quantity\": 2\n}")
	assert.Contains(t, p.body, `<dd id="meta-reason">bug: unknown SKU</dd>`)
	assert.Contains(t, p.body, `<dd id="meta-attempts">2</dd>`)
	assert.Contains(t, p.body, `<dd id="meta-origin-topic">ORDER</dd>`)
	assert.Contains(t, p.body, `<dd id="meta-processed">no</dd>`)
	assert.Contains(t, p.body, `id="replay-history-none"`)
	assert.Contains(t, p.body, `<th scope="row">RMQGUARD_DLQ_REASON</th>`)

	p = w.get(cl, w.lettersPath(nil)+"/"+binID)
	require.Equal(t, http.StatusOK, p.status)
	assert.Contains(t, p.body, `data-format="hex"`)
	assert.Contains(t, p.body, "00000000  00 01 fe 68 69")
	assert.Contains(t, p.body, "|...hi|")

	assert.Equal(t, http.StatusNotFound, w.get(cl, w.lettersPath(nil)+"/00000000000000000000000000000000").status)
}

// S5, K8: two of three letters selected; the preview is the engine's dry run (nothing sent); confirm
// sends exactly those two, as the operator; a second replay of them sends nothing.
func TestConsole_ReplayPreviewThenConfirmSendsTheTwoSelectedAndAgainNothing(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	b := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "bug"})
	c := w.publish(letterSpec{eventID: testenvID(t, "c"), eventType: "OrderCreated", reason: "bug"})
	cl := w.login()
	list := w.get(cl, w.lettersPath(nil))
	require.Equal(t, []string{a, b, c}, list.letters())
	assert.Contains(t, list.row(t, "letter-"+a), `name="letter" value="`+a+`"`, "a checkbox per letter")

	preview := w.post(cl, "/groups/"+w.group+"/replay/preview", url.Values{"csrf": {list.csrf(t)}, "letter": {a, c}})
	require.Equal(t, http.StatusOK, preview.status, preview.body)
	assert.Equal(t, "would-send", field(t, preview.row(t, "outcome-"+a), "outcome"))
	assert.Equal(t, "would-send", field(t, preview.row(t, "outcome-"+c), "outcome"))
	assert.NotContains(t, preview.body, `id="outcome-`+b+`"`)
	assert.Empty(t, w.sent.replayed(), "a preview sends nothing")

	result := w.confirm(cl, url.Values{"csrf": {preview.csrf(t)}, "letter": {a, c}})
	require.Equal(t, http.StatusOK, result.status, result.body)
	assert.Equal(t, "sent", field(t, result.row(t, "outcome-"+a), "outcome"))
	assert.Equal(t, "sent", field(t, result.row(t, "outcome-"+c), "outcome"))
	assert.Equal(t, []string{a, c}, w.sent.replayed(), "the broker stored the replays of the two selected")

	var by []string
	require.NoError(t, w.db.Select(&by, `SELECT replayed_by FROM dlq_replay WHERE consumer_group = ? AND status = 'sent' ORDER BY dlq_store_id`, w.group))
	assert.Equal(t, []string{"alice@console-test", "alice@console-test"}, by, "the audit records the console's operator")

	list = w.get(cl, w.lettersPath(url.Values{"status": {"sent"}}))
	assert.ElementsMatch(t, []string{a, c}, list.letters(), "their status changed")
	assert.Contains(t, field(t, list.row(t, "letter-"+a), "replay"), "sent ")

	again := w.post(cl, "/groups/"+w.group+"/replay/preview", url.Values{"csrf": {list.csrf(t)}, "letter": {a, c}})
	assert.Equal(t, "skipped-already-replayed", field(t, again.row(t, "outcome-"+a), "outcome"))
	assert.Contains(t, again.body, `id="nothing-to-send"`)
	again = w.confirm(cl, url.Values{"csrf": {list.csrf(t)}, "letter": {a, c}})
	require.Equal(t, http.StatusOK, again.status)
	assert.Equal(t, "skipped-already-replayed", field(t, again.row(t, "outcome-"+c), "outcome"))
	assert.Equal(t, []string{a, c}, w.sent.replayed(), "a second replay sends nothing")
	letter := w.get(cl, w.lettersPath(nil)+"/"+a)
	assert.NotContains(t, letter.body, `id="edit-one-form"`, "a letter a replay sent is not offered for edit")
	assert.Contains(t, letter.body, `id="edit-not-offered"`)

	p := w.get(cl, w.lettersPath(nil)+"/"+a)
	assert.Equal(t, "sent", field(t, p.body, "status"), "the letter page shows the audit row")
	assert.Equal(t, "alice@console-test", field(t, p.body, "replayed-by"))
}

// A replay or edit POST without the session's CSRF token, or with another session's, is refused (403) and
// sends nothing.
func TestConsole_PostWithoutCSRFTokenIsForbidden(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	cl, other := w.login(), w.login()
	otherToken := w.get(other, "/").csrf(t)
	for name, form := range map[string]url.Values{
		"no token":              {"letter": {a}},
		"another session's one": {"letter": {a}, "csrf": {otherToken}},
	} {
		for _, path := range []string{"/groups/" + w.group + "/replay/preview", "/groups/" + w.group + "/replay",
			w.editPath(a) + "/preview", w.editPath(a)} {
			form := url.Values{"letter": form["letter"], "csrf": form["csrf"], "body": {`{"eventId":"x"}`}}
			p := w.post(cl, path, form)
			assert.Equal(t, http.StatusForbidden, p.status, name+" "+path)
			assert.Contains(t, p.body, "CSRF", name)
		}
	}
	assert.Empty(t, w.sent.replayed())
}

// With ReadOnly the list has no checkbox and no replay button, the letter page no replay or edit form, and
// the edit form and the replay and edit POSTs are refused (403), sending nothing.
func TestConsole_ReadOnlyRefusesReplay(t *testing.T) {
	w := newWorld(t, func(c *console.Config) { c.ReadOnly = true })
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	cl := w.login()
	list := w.get(cl, w.lettersPath(nil))
	require.Equal(t, []string{a}, list.letters())
	assert.NotContains(t, list.body, `type="checkbox"`)
	assert.NotContains(t, list.body, `id="replay-preview"`)
	assert.Contains(t, list.body, `id="read-only-badge"`)
	letter := w.get(cl, w.lettersPath(nil)+"/"+a)
	assert.NotContains(t, letter.body, `id="replay-one-form"`)
	assert.NotContains(t, letter.body, `id="edit-one-form"`)
	p := w.get(cl, w.editPath(a))
	assert.Equal(t, http.StatusForbidden, p.status, "the edit form")
	assert.Contains(t, p.body, "read-only")
	for _, path := range []string{"/groups/" + w.group + "/replay/preview", "/groups/" + w.group + "/replay",
		w.editPath(a) + "/preview", w.editPath(a)} {
		p := w.post(cl, path, url.Values{"csrf": {list.csrf(t)}, "letter": {a}, "body": {`{"eventId":"x"}`}})
		assert.Equal(t, http.StatusForbidden, p.status, path)
		assert.Contains(t, p.body, "read-only")
	}
	assert.Empty(t, w.sent.replayed())
}

// hoursAgo is the time n hours ago as the since/until filters take it.
func hoursAgo(n int) string { return timeAgo(n).Format("2006-01-02T15:04") }

// F17's sibling: without the group's retry topic (its consumers never ran here) the preview says the
// replay cannot send and offers no confirm; a confirm is refused naming the fix, and nothing is sent.
func TestConsole_ReplayWithoutTheRetryTopicNamesTheFix(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "a"), eventType: "OrderCreated", reason: "bug"})
	retry := rmq.RetryTopic(w.group)
	require.NoError(t, rmq.DeleteTopic(w.ctx, []string{w.ns}, w.broker, retry))
	require.Eventually(t, func() bool {
		_, err := rmq.TopicRoute(w.ctx, []string{w.ns}, retry)
		return errors.Is(err, rmq.ErrTopicNotExist)
	}, 10*time.Second, 100*time.Millisecond, "%s deleted", retry)
	cl := w.login()
	csrf := w.get(cl, "/").csrf(t)

	p := w.post(cl, "/groups/"+w.group+"/replay/preview", url.Values{"csrf": {csrf}, "letter": {a}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, `id="replay-problem"`)
	assert.Contains(t, p.body, "rmqguard topic ensure --queues 1")
	assert.NotContains(t, p.body, `id="confirm-form"`)

	p = w.post(cl, "/groups/"+w.group+"/replay", url.Values{"csrf": {csrf}, "letter": {a}})
	assert.Equal(t, http.StatusBadGateway, p.status)
	assert.Contains(t, p.body, "has no writable queue")
	assert.Empty(t, w.sent.replayed())
}
