package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// Config configures the console.
type Config struct {
	// Cluster is where the DLQs are read and replays sent (every master broker). Required.
	Cluster topics.Cluster
	// Groups are the consumer groups shown (without namespace). At least one.
	Groups []string
	// Scope is the dedup scope of every group's processed check; "" = each group's own name.
	Scope string
	// EventIDProperty and EventIDJSONField say where a letter's event ID is (dlqtool.ScanOptions).
	EventIDProperty, EventIDJSONField string
	// Audit is the replay audit and Processed the dedup table's processed check. Required.
	Audit     dlqtool.Audit
	Processed dlqtool.ProcessedChecker
	// DB is the dedup database whose outbox (TablePrefix + rmqguard_outbox) is counted; nil: not shown.
	DB          *sqlx.DB
	TablePrefix string
	// Sender sends replays (a producer without namespace option, dlqtool.ProducerOptions). Required unless
	// ReadOnly.
	Sender rmq.Sender
	// Operator is recorded in the audit as who replayed or edited. Required unless ReadOnly.
	Operator string
	// ReadOnly hides replay and edit and refuses their pages.
	ReadOnly bool
	// Token is the access token; at least MinTokenLength characters. Required.
	Token string
	// PrometheusURL, when set, is the Prometheus server asked for the duplicate ratio (e.g. http://127.0.0.1:9090).
	PrometheusURL string
	// MetricsURLs, used when PrometheusURL is empty, are the consumers' /metrics endpoints whose counters give
	// the duplicate ratio since each consumer started (duplicates / acknowledged, summed over the endpoints).
	MetricsURLs []string
	// Logger gets one line per replay and per failed page; default none.
	Logger *zap.Logger
}

// MinTokenLength is the shortest access token New accepts, in bytes.
const MinTokenLength = 16

// validate names the first invalid field.
func (c Config) validate() error {
	bad := func(field, why string) error { return fmt.Errorf("console: invalid %s: %s", field, why) }
	if err := c.Cluster.Validate(); err != nil {
		return bad("Cluster", err.Error())
	}
	if len(c.Groups) == 0 {
		return bad("Groups", "at least one consumer group is required")
	}
	for _, g := range c.Groups {
		if strings.TrimSpace(g) == "" || strings.HasPrefix(g, rmq.RetryTopicPrefix) || strings.HasPrefix(g, rmq.DLQTopicPrefix) || strings.Contains(g, "/") {
			return bad("Groups", fmt.Sprintf("%q is not a consumer group name", g))
		}
	}
	switch {
	case c.Audit == nil:
		return bad("Audit", "required")
	case c.Processed == nil:
		return bad("Processed", "required")
	case len(c.Token) < MinTokenLength:
		return bad("Token", fmt.Sprintf("at least %d characters are required", MinTokenLength))
	case !c.ReadOnly && c.Sender == nil:
		return bad("Sender", "required unless ReadOnly")
	case !c.ReadOnly && strings.TrimSpace(c.Operator) == "":
		return bad("Operator", "required unless ReadOnly (who replays is recorded)")
	}
	return nil
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/*
var staticFS embed.FS

// Console is the console's http.Handler (New).
type Console struct {
	cfg      Config
	groups   map[string]bool
	pages    map[string]*template.Template
	sessions *sessions
	mux      *http.ServeMux
	prom     *http.Client
	log      *zap.Logger
	// ctx stops the replays running in the background; runs are their progress and results.
	ctx  context.Context
	runs *runs
	bg   sync.WaitGroup
}

// New returns the console's handler for cfg; a confirmed replay runs in the background until it ends or
// ctx does (cancel ctx, then Wait, when the server stops). Errors: an invalid Config, naming the field.
func New(ctx context.Context, cfg Config) (*Console, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, groups: map[string]bool{}, pages: pages, sessions: newSessions(),
		mux: http.NewServeMux(), prom: &http.Client{Timeout: prometheusTimeout}, log: cfg.Logger, ctx: ctx, runs: newRuns()}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	for _, g := range cfg.Groups {
		c.groups[g] = true
	}
	c.routes()
	return c, nil
}

// routes registers every page.
func (c *Console) routes() {
	c.mux.HandleFunc("GET /static/console.css", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, staticFS, "static/console.css") // the one public file: the pages' style, no listing
	})
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("POST /logout", c.authed(c.post(c.logout)))
	c.mux.HandleFunc("GET /{$}", c.authed(c.groupsPage))
	c.mux.HandleFunc("GET /groups/{group}/letters", c.authed(c.group(c.lettersPage)))
	c.mux.HandleFunc("GET /groups/{group}/letters/{id}", c.authed(c.group(c.letterPage)))
	c.mux.HandleFunc("GET /groups/{group}/letters/{id}/edit", c.authed(c.writable(c.group(c.editForm))))
	c.mux.HandleFunc("POST /groups/{group}/letters/{id}/edit/preview", c.authed(c.post(c.writable(c.group(c.editPreview)))))
	c.mux.HandleFunc("POST /groups/{group}/letters/{id}/edit", c.authed(c.post(c.writable(c.group(c.editConfirm)))))
	c.mux.HandleFunc("POST /groups/{group}/replay/preview", c.authed(c.post(c.writable(c.group(c.replayPreview)))))
	c.mux.HandleFunc("POST /groups/{group}/replay", c.authed(c.post(c.writable(c.group(c.replayConfirm)))))
	c.mux.HandleFunc("GET /groups/{group}/replays/{id}", c.authed(c.group(c.replayPage)))
}

// Wait returns when every background replay has returned (after New's ctx ends, the letter in flight).
func (c *Console) Wait() { c.bg.Wait() }

// maxBody bounds a request's body: an edited letter body (the CLI takes up to 16 MiB) and its form.
const maxBody = 20 << 20

// ServeHTTP sets the security headers, bounds the body (maxBody) and serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	c.mux.ServeHTTP(w, r)
}

// handler is a page behind authentication: it gets the request's session.
type handler func(w http.ResponseWriter, r *http.Request, s session)

// group checks that the path's group is configured (404 otherwise).
func (c *Console) group(next handler) handler {
	return func(w http.ResponseWriter, r *http.Request, s session) {
		if !c.groups[r.PathValue("group")] {
			c.fail(w, r, s, http.StatusNotFound, fmt.Errorf("consumer group %q is not shown by this console", r.PathValue("group")))
			return
		}
		next(w, r, s)
	}
}

// writable refuses replay in read-only mode (403).
func (c *Console) writable(next handler) handler {
	return func(w http.ResponseWriter, r *http.Request, s session) {
		if c.cfg.ReadOnly {
			c.fail(w, r, s, http.StatusForbidden, errors.New("this console is read-only (--read-only): replay and edit are off"))
			return
		}
		next(w, r, s)
	}
}

// requestTimeout bounds a page's scans and queries.
const requestTimeout = 2 * time.Minute

// view is what every page's template gets.
type view struct {
	Title, Group, CSRF, Operator string
	ReadOnly, Authenticated      bool
	// Refresh, when not 0, reloads the page every Refresh seconds (a replay's progress).
	Refresh int
	// Page is the page's own data.
	Page any
}

// render writes page with status.
func (c *Console) render(w http.ResponseWriter, status int, page string, v view) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	var buf strings.Builder
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.Error("console: render", zap.String("page", page), zap.Error(err))
		http.Error(w, "render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// newView is the view of an authenticated page.
func (c *Console) newView(r *http.Request, s session, title string, page any) view {
	return view{Title: title, Group: r.PathValue("group"), CSRF: s.csrf, Operator: c.cfg.Operator,
		ReadOnly: c.cfg.ReadOnly, Authenticated: true, Page: page}
}

// errorPage is the data of the error page.
type errorPage struct{ Status, Message string }

// fail renders the error page with status and err's text.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s session, status int, err error) {
	if status >= 500 {
		c.log.Error("console: page failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
	c.render(w, status, "error", c.newView(r, s, http.StatusText(status),
		errorPage{Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Message: err.Error()}))
}

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" || page == "partials" {
			continue
		}
		t, err := template.New(page).Funcs(templateFuncs()).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		pages[page] = t
	}
	return pages, nil
}
