package dlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/topics"
)

// DefaultMonitorInterval is the time between two censuses of a Monitor.
const DefaultMonitorInterval = time.Minute

// MonitorConfig configures a Monitor. Zero fields take their defaults.
type MonitorConfig struct {
	// Cluster is how to reach the group's cluster (name servers, namespace, credentials; Brokers is not
	// used: every master is read). Required.
	Cluster topics.Cluster
	// Group is the consumer group whose letters are counted (Config.Group, without namespace). Required.
	Group string
	// Scope is the group's dedup scope (dedup.WithScope), for the processed check; default Group.
	Scope string
	// DB is the dedup database: it holds the processed events and the replay audit table (Migrate). Required.
	DB *sqlx.DB
	// EventIDProperty and EventIDJSONField say where a letter's event ID is, for the processed check
	// (default the EVENT_ID property; the JSON field, a top-level field of the body, when set).
	EventIDProperty, EventIDJSONField string
	// Interval is the time between two censuses; default DefaultMonitorInterval. Each reads the whole DLQ.
	Interval time.Duration
	// Metrics receives the census: rmqguard_dlq_letters_waiting{group}. Required.
	Metrics *metrics.Metrics
	// Logger receives the censuses that failed (warn); default zap.NewNop.
	Logger *zap.Logger
}

// Monitor exports the depth of a consumer group's DLQ, the letters waiting for an operator (not sent by a
// replay, event not processed), counted every Interval into rmqguard_dlq_letters_waiting{group}. A census
// that fails, reads the DLQ only in part, or misses a master it last counted letters on removes the series
// (the package doc, "The DLQ census"). Run it in the consumer's process: it knows its group, cluster and DB.
type Monitor struct {
	cfg    MonitorConfig
	status dlqtool.StatusOptions

	mu sync.Mutex
	// held maps each broker where the last census that read it counted waiting letters to when that was.
	held map[string]time.Time
}

// missingBrokerLimit is how long a Monitor withholds its count while a broker that held waiting letters
// is not listed: the window of the alert RmqguardDLQLettersWaiting, so that the letters of a master back
// within it are not taken for new ones (deploy/prometheus/rules.yml).
const missingBrokerLimit = time.Hour

// NewMonitor returns a Monitor of cfg. Errors name the field: an invalid Cluster, a missing Group, DB or
// Metrics, a negative Interval.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if err := cfg.Cluster.Validate(); err != nil {
		return nil, fmt.Errorf("dlq: monitor: %w", err)
	}
	switch {
	case cfg.Group == "":
		return nil, errors.New("dlq: monitor: Group is required")
	case cfg.DB == nil:
		return nil, errors.New("dlq: monitor: DB is required")
	case cfg.Metrics == nil:
		return nil, errors.New("dlq: monitor: Metrics is required")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("dlq: monitor: Interval %s is negative", cfg.Interval)
	}
	audit, err := dlqtool.NewMySQLAudit(cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("dlq: monitor: %w", err)
	}
	processed, err := dlqtool.NewMySQLProcessed(cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("dlq: monitor: %w", err)
	}
	return newMonitor(cfg, dlqtool.StatusOptions{Group: cfg.Group, Namespace: cfg.Cluster.Namespace,
		Scope: cfg.Scope, Audit: audit, Processed: processed}), nil
}

// newMonitor returns a Monitor of cfg, valid, with its defaults, that reads the letters' status as status says.
func newMonitor(cfg MonitorConfig, status dlqtool.StatusOptions) *Monitor {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultMonitorInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Monitor{cfg: cfg, status: status, held: map[string]time.Time{}}
}

// Run takes a census at once and then every Interval until ctx ends, and returns nil then.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.once(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// once takes one census and exports it, or removes the group's series when the census failed or missed
// a broker that held waiting letters; a census cut by the end of ctx changes nothing.
func (m *Monitor) once(ctx context.Context) {
	group := m.status.Group
	scan := dlqtool.ScanOptions{EventIDProperty: m.cfg.EventIDProperty, EventIDJSONField: m.cfg.EventIDJSONField}
	c, err := dlqtool.TakeCensus(ctx, m.cfg.Cluster, scan, m.status)
	if err == nil {
		err = m.checkBrokers(ctx, c)
	}
	if err != nil {
		if ctx.Err() != nil {
			return // cut by the monitor's stop, not a failed census: the last count stands
		}
		m.cfg.Metrics.DLQLettersWaiting.DeleteLabelValues(group)
		m.cfg.Logger.Warn("dlq census failed; rmqguard_dlq_letters_waiting removed until one succeeds",
			zap.String("group", group), zap.Error(err))
		return
	}
	m.cfg.Metrics.DLQLettersWaiting.WithLabelValues(group).Set(float64(c.Waiting))
}

// checkBrokers returns an error naming the brokers that census c missed: brokers where an earlier census
// counted waiting letters, which c did not read and the name servers no longer list as masters (asked
// after c: a broker that came back meanwhile is listed). A broker listed but not read no longer holds the
// DLQ (deleted there): its letters are gone.
func (m *Monitor) checkBrokers(ctx context.Context, c dlqtool.Census) error {
	masters, err := rmq.Masters(ctx, m.cfg.Cluster.NameServers)
	if err != nil {
		return fmt.Errorf("dlq: census of %s: %w", m.status.Group, err)
	}
	listed := make(map[string]bool, len(masters))
	for _, b := range masters {
		listed[b.Name] = true
	}
	if missing := m.missing(c, listed, time.Now()); len(missing) > 0 {
		return fmt.Errorf("dlq: census of %s: broker(s) %s held waiting letters and are not listed by the name servers (down?); withheld for at most %s",
			m.status.Group, strings.Join(missing, ", "), missingBrokerLimit)
	}
	return nil
}

// missing records where census c counted waiting letters at now and returns, sorted, the brokers that
// held waiting letters at a census less than missingBrokerLimit ago, that c did not read and that are
// not listed.
func (m *Monitor) missing(c dlqtool.Census, listed map[string]bool, now time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for b, n := range c.WaitingByBroker {
		if n > 0 {
			m.held[b] = now
		} else {
			delete(m.held, b)
		}
	}
	var out []string
	for b, at := range m.held {
		switch _, read := c.WaitingByBroker[b]; {
		case read:
		case listed[b] || now.Sub(at) >= missingBrokerLimit:
			delete(m.held, b)
		default:
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}
