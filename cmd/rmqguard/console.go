package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// envConsoleToken holds the console's access token when --token-file is not given.
const envConsoleToken = "RMQGUARD_CONSOLE_TOKEN"

// consoleOptions are the flags of `rmqguard console`.
type consoleOptions struct {
	dbFlags                               // --mysql-dsn, --scope, --table-prefix
	groups                                []string
	addr, tokenFile, operator, prometheus string
	metrics                               []string
	eventIDProperty, eventIDJSONField     string
	readOnly                              bool
}

// consoleShutdownGrace is how long a stopping console waits for requests in flight (a replay finishing).
const consoleShutdownGrace = 30 * time.Second

func newConsoleCmd(g *globalOptions) *cobra.Command {
	o := &consoleOptions{}
	cmd := &cobra.Command{
		Use:   "console --group G [--group G2 …] [--addr 127.0.0.1:8089] [--token-file PATH] [--read-only]",
		Short: "Serve the operator's DLQ web page: groups, letters, one letter, replay with a preview",
		Long: "Serve a web page for the DLQs of the --group consumer groups, on --addr (default 127.0.0.1:8089):\n" +
			"each group's DLQ depth, duplicate ratio (--prometheus, or --metrics) and parked outbox rows; a group's letters,\n" +
			"filtered and paged, read from every master broker; one letter with its body and replay status; and the\n" +
			"replay of selected letters: the same engine as `dlq replay` (a dry-run preview, then confirm; the audit\n" +
			"records --operator; a letter already sent is skipped).\n\n" +
			"Every request needs the access token: the content of --token-file, else $" + envConsoleToken + " (at\n" +
			"least 16 characters), as `Authorization: Bearer TOKEN` or entered once on /login. Replay POSTs carry a\n" +
			"CSRF token. --read-only turns replay off. There is no TLS: bind to another address than loopback only\n" +
			"behind a TLS proxy. Stops on SIGINT/SIGTERM.",
		Args: exactArgs(0, "no argument"),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.groups, "group", nil, "consumer group to show (repeatable; at least one)")
	f.StringVar(&o.addr, "addr", "127.0.0.1:8089", "address to listen on (host:port)")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the access token (default $"+envConsoleToken+")")
	f.BoolVar(&o.readOnly, "read-only", false, "hide replay and refuse it")
	f.StringVar(&o.operator, "operator", "", "who replays, recorded in the audit and on each message (default user@host)")
	f.StringVar(&o.prometheus, "prometheus", "", "Prometheus URL for the duplicate ratio (rmqguard:duplicate_ratio:rate5m), e.g. http://127.0.0.1:9090")
	f.StringSliceVar(&o.metrics, "metrics", nil, "without --prometheus: a consumer's /metrics URL for the duplicate ratio since it started (repeatable)")
	f.StringVar(&o.eventIDProperty, "event-id-property", "EVENT_ID", "property holding a letter's event ID")
	f.StringVar(&o.eventIDJSONField, "event-id-json-field", "", "top-level JSON body field holding the event ID when the property is absent (e.g. eventId)")
	o.addDBFlags(f, "holds the replay audit")
	return cmd
}

// readToken returns the access token of --token-file, else of the environment; never printed.
func (o *consoleOptions) readToken() (string, error) {
	if o.tokenFile == "" {
		if tok := strings.TrimSpace(os.Getenv(envConsoleToken)); tok != "" {
			return tok, nil
		}
		return "", usageError("no access token: pass --token-file PATH or set %s", envConsoleToken)
	}
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return "", usageError("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", usageError("--token-file %s is empty", o.tokenFile)
	}
	return tok, nil
}

// checkToken refuses a token shorter than console.MinTokenLength, naming where it came from.
func (o *consoleOptions) checkToken(tok string) error {
	if len(tok) >= console.MinTokenLength {
		return nil
	}
	from := "$" + envConsoleToken
	if o.tokenFile != "" {
		from = "--token-file " + o.tokenFile
	}
	return usageError("the access token of %s is %d bytes: at least %d are required (e.g. openssl rand -hex 32)", from, len(tok), console.MinTokenLength)
}

func (o *consoleOptions) run(cmd *cobra.Command, g *globalOptions) error {
	if len(o.groups) == 0 {
		return usageError("--group is required (at least one consumer group)")
	}
	if err := o.validateDB(); err != nil {
		return err
	}
	if o.dsn == "" {
		return usageError("no database: pass --mysql-dsn or set %s (the dedup database holds the replay audit)", envMySQLDSN)
	}
	token, err := o.readToken()
	if err != nil {
		return err
	}
	if err := o.checkToken(token); err != nil {
		return err
	}
	if o.operator == "" {
		o.operator = defaultOperator()
	}
	cluster, err := dlqCluster(g)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := sqlx.Open("mysql", o.dsn)
	if err != nil {
		return failure(fmt.Errorf("open database: %w", err))
	}
	defer func() { _ = db.Close() }()
	cfg := console.Config{Cluster: cluster, Groups: o.groups, Scope: o.scope, EventIDProperty: o.eventIDProperty,
		EventIDJSONField: o.eventIDJSONField, DB: db, TablePrefix: o.tablePrefix, Operator: o.operator,
		ReadOnly: o.readOnly, Token: token, PrometheusURL: o.prometheus, MetricsURLs: o.metrics}
	if cfg.Processed, err = o.processedChecker(db); err != nil {
		return failure(err)
	}
	if o.readOnly {
		cfg.Audit, err = readAudit(ctx, db) // creates nothing
	} else {
		cfg.Audit, err = writableAudit(ctx, db)
	}
	if err != nil {
		return failure(err)
	}
	if !o.readOnly {
		prod, err := startReplayProducer(cluster)
		if err != nil {
			return failure(err)
		}
		defer func() { _ = prod.Shutdown() }()
		cfg.Sender = prod
	}
	log, err := zap.NewProduction()
	if err != nil {
		return failure(fmt.Errorf("logger: %w", err))
	}
	defer func() { _ = log.Sync() }()
	cfg.Logger = log
	h, err := console.New(ctx, cfg)
	if err != nil {
		return usageError("%w", err)
	}
	defer h.Wait() // a replay in the background records its letter in flight before the producer and database close
	return serveConsole(ctx, cmd.ErrOrStderr(), o.addr, h)
}

// writableAudit creates the replay audit table when missing (dlq.Migrate) and returns the audit on it.
func writableAudit(ctx context.Context, db *sqlx.DB) (dlqtool.Audit, error) {
	if _, err := dlq.Migrate(ctx, db.DB); err != nil {
		return nil, fmt.Errorf("replay audit table: %w", err)
	}
	return dlqtool.NewMySQLAudit(db)
}

// serveConsole serves h on addr until ctx ends, then shuts the server down, waiting up to
// consoleShutdownGrace for requests in flight. A non-loopback address gets a warning on stderr.
func serveConsole(ctx context.Context, stderr io.Writer, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failure(fmt.Errorf("listen on %s: %w", addr, err))
	}
	if !loopback(ln.Addr()) {
		fmt.Fprintf(stderr, "rmqguard console: WARNING: listening on %s, not a loopback address, and there is no TLS in front: "+
			"the access token and session cookie travel in clear; put a TLS proxy in front or bind to 127.0.0.1\n", ln.Addr())
	}
	fmt.Fprintf(stderr, "rmqguard console: serving http://%s/ (Ctrl-C stops)\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return failure(fmt.Errorf("serve: %w", err))
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), consoleShutdownGrace)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		_ = srv.Close()
		return failure(fmt.Errorf("shutdown: %w", err))
	}
	fmt.Fprintln(stderr, "rmqguard console: stopped")
	return nil
}

// loopback reports whether a is a loopback address.
func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
