package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/outbox"
	"github.com/rmqguard/rmqguard/topics"
)

// token is the access token of every test console.
const token = "test-token-0123456789abcdef"

// world is a consumer group of its own on the shared broker (its %RETRY% and %DLQ% topics created, one
// queue each, deleted at the end), the test database with the replay audit, and a console serving it.
type world struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	broker string
	group  string
	db     *sqlx.DB
	prod   rocketmq.Producer
	sent   *recordingSender
	srv    *httptest.Server
}

// newWorld starts the world; cfg changes the console's configuration (ReadOnly, …) before New.
func newWorld(t *testing.T, cfg func(*console.Config)) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, ns: testenv.NameServer(t), broker: testenv.Broker(t), group: testenv.Unique("console"),
		db: testenv.MySQL(t)}
	require.NoError(t, rmq.EnsureGroupTopics(ctx, []string{w.ns}, w.broker, w.group))
	t.Cleanup(func() {
		for _, topic := range []string{rmq.RetryTopic(w.group), rmq.DLQTopic(w.group)} {
			_ = rmq.DeleteTopic(context.Background(), []string{w.ns}, w.broker, topic)
		}
	})
	_, err := dlq.Migrate(ctx, w.db.DB)
	require.NoError(t, err)
	audit, err := dlqtool.NewMySQLAudit(w.db)
	require.NoError(t, err)
	processed, err := dlqtool.NewMySQLProcessed(w.db)
	require.NoError(t, err)
	w.prod, err = rmq.StartProducer([]string{w.ns}, testenv.Unique("console-prod"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.prod.Shutdown() })
	w.sent = &recordingSender{next: w.prod}
	c := console.Config{Cluster: topics.Cluster{NameServers: []string{w.ns}}, Groups: []string{w.group},
		Audit: audit, Processed: processed, DB: w.db, Sender: w.sent, Operator: "alice@console-test", Token: token}
	if cfg != nil {
		cfg(&c)
	}
	h, err := console.New(ctx, c)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); h.Wait() }) // background replays end before the producer shuts down
	w.srv = httptest.NewServer(h)
	t.Cleanup(w.srv.Close)
	return w
}

// recordingSender sends through the real producer and records each message the broker stored.
type recordingSender struct {
	next rmq.Sender
	mu   sync.Mutex
	msgs []*primitive.Message
}

func (s *recordingSender) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	res, err := s.next.SendSync(ctx, msgs...)
	if err == nil && res != nil && res.Status == primitive.SendOK {
		s.mu.Lock()
		s.msgs = append(s.msgs, msgs...)
		s.mu.Unlock()
	}
	return res, err
}

// messages returns the messages the broker stored, in order.
func (s *recordingSender) messages() []*primitive.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*primitive.Message(nil), s.msgs...)
}

// replayed returns the store IDs of the letters whose replays the broker stored (PropReplayOf), in order.
func (s *recordingSender) replayed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		out = append(out, m.GetProperty(deadletter.PropReplayOf))
	}
	return out
}

// letterSpec describes one dead letter to publish.
type letterSpec struct {
	eventID, eventType, reason, origin string
	body                               []byte
	// noEventIDProperty leaves the EVENT_ID property out (the event ID is then in the body only).
	noEventIDProperty bool
}

// publish sends a dead letter of a delivery from spec.origin (default ORDER) as rmqguard's publisher builds
// it, and returns its store ID (the console's letter ID).
func (w *world) publish(spec letterSpec) string {
	w.t.Helper()
	if spec.origin == "" {
		spec.origin = "ORDER"
	}
	if spec.body == nil {
		spec.body = []byte(`{"eventId":"` + spec.eventID + `"}`)
	}
	orig := &primitive.MessageExt{MsgId: testenv.Unique("MSG"), ReconsumeTimes: 2,
		Message: primitive.Message{Topic: rmq.RetryTopic(w.group), Body: spec.body}}
	orig.WithTag(spec.eventType)
	orig.WithKeys([]string{"k-" + spec.eventID})
	if !spec.noEventIDProperty {
		orig.WithProperty("EVENT_ID", spec.eventID)
	}
	orig.WithProperty(primitive.PropertyRetryTopic, spec.origin)
	msg := deadletter.Message(deadletter.Origin{Msg: orig, Group: w.group, Topic: spec.origin}, spec.reason, time.Now())
	res, err := w.prod.SendSync(w.ctx, msg)
	require.NoError(w.t, err)
	require.Equal(w.t, primitive.SendOK, res.Status)
	return res.OffsetMsgID
}

// client returns an HTTP client with a cookie jar that does not follow redirects.
func (w *world) client() *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(w.t, err)
	return &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login returns a client logged in through the /login form.
func (w *world) login() *http.Client {
	w.t.Helper()
	c := w.client()
	resp, err := c.PostForm(w.srv.URL+"/login", url.Values{"token": {token}})
	require.NoError(w.t, err)
	_ = resp.Body.Close()
	require.Equal(w.t, http.StatusSeeOther, resp.StatusCode)
	return c
}

// page is an answer: its status, headers and body.
type page struct {
	status int
	header http.Header
	body   string
}

// get fetches path with c.
func (w *world) get(c *http.Client, path string) page {
	w.t.Helper()
	resp, err := c.Get(w.srv.URL + path)
	require.NoError(w.t, err)
	return read(w.t, resp)
}

// post posts form to path with c.
func (w *world) post(c *http.Client, path string, form url.Values) page {
	w.t.Helper()
	resp, err := c.PostForm(w.srv.URL+path, form)
	require.NoError(w.t, err)
	return read(w.t, resp)
}

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// confirm posts a replay's confirm form with c: it redirects to the replay's progress page, which is
// fetched again until it shows the result (or another final page), returned.
func (w *world) confirm(c *http.Client, form url.Values) page {
	w.t.Helper()
	p := w.post(c, "/groups/"+w.group+"/replay", form)
	require.Equal(w.t, http.StatusSeeOther, p.status, p.body)
	loc := p.header.Get("Location")
	require.True(w.t, strings.HasPrefix(loc, "/groups/"+w.group+"/replays/"), loc)
	require.Eventually(w.t, func() bool {
		p = w.get(c, loc)
		return !strings.Contains(p.body, `id="progress-summary"`)
	}, time.Minute, 50*time.Millisecond, "the replay at %s never ended", loc)
	return p
}

// lettersPath is the list page of the world's group with query q.
func (w *world) lettersPath(q url.Values) string {
	p := "/groups/" + w.group + "/letters"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	letterRow = regexp.MustCompile(`<tr id="letter-([0-9A-F]+)">`)
)

// csrf returns the page's CSRF token.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	require.NotNil(t, m, "no csrf field in %s", p.body)
	return m[1]
}

// letters returns the store IDs of the letter rows of a list page, in order.
func (p page) letters() []string {
	var out []string
	for _, m := range letterRow.FindAllStringSubmatch(p.body, -1) {
		out = append(out, m[1])
	}
	return out
}

// row returns the table row with id, from its opening tag to its end.
func (p page) row(t *testing.T, id string) string {
	t.Helper()
	i := strings.Index(p.body, `<tr id="`+id+`">`)
	require.GreaterOrEqual(t, i, 0, "no row %s", id)
	j := strings.Index(p.body[i:], "</tr>")
	return p.body[i : i+j]
}

// field returns the text of the cell data-field=name in row.
func field(t *testing.T, row, name string) string {
	t.Helper()
	m := regexp.MustCompile(`data-field="` + name + `"[^>]*>([^<]*)<`).FindStringSubmatch(row)
	require.NotNil(t, m, "no field %s in %s", name, row)
	return m[1]
}

// testenvID is a unique event ID.
func testenvID(_ *testing.T, prefix string) string { return testenv.Unique("evt-" + prefix) }

// timeAgo is n hours before now, UTC.
func timeAgo(n int) time.Time { return time.Now().UTC().Add(-time.Duration(n) * time.Hour) }

// outboxTable creates an outbox table on a prefix of its own in db (dropped at the end) and returns the prefix.
func outboxTable(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	prefix := "cons" + strings.ReplaceAll(strings.TrimPrefix(testenv.Unique("c"), "c-"), "-", "_") + "_"
	_, err := outbox.Migrate(context.Background(), db.DB, prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, tb := range []string{prefix + outboxsql.Table, prefix + outboxsql.VersionTable} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	return prefix
}
