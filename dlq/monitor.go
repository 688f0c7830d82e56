package dlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/metrics"
)

// DefaultMonitorInterval is the time between two censuses of a Monitor.
const DefaultMonitorInterval = time.Minute

// Census is what one count of a group's DLQ found, over every master broker the name servers list.
type Census struct {
	// Letters counts the letters on the DLQ; ByBroker splits them by broker name, with a 0 for each broker
	// read that holds none (ScanResult.Brokers).
	Letters  int
	ByBroker map[string]int
	// Waiting counts the letters that wait for an operator (LetterStatus.waiting): not sent by a replay,
	// event not processed; WaitingByBroker splits them as ByBroker does.
	Waiting         int
	WaitingByBroker map[string]int
}

// TakeCensus reads group's whole DLQ on cluster (Scan, every master broker; scan's event ID options) and
// counts its letters by status (Statuses with status). A DLQ that does not exist has no letter. Errors: an
// invalid cluster or options; the scan failing or incomplete (its problems); a status lookup failing.
func TakeCensus(ctx context.Context, cluster Cluster, scan ScanOptions, status StatusOptions) (Census, error) {
	if err := status.validate(); err != nil {
		return Census{}, err
	}
	scan.Filter, scan.Limit = Filter{}, 0 // a census counts every letter
	res, err := Scan(ctx, cluster, status.Group, scan)
	if errors.Is(err, ErrNoDLQ) {
		return Census{ByBroker: map[string]int{}, WaitingByBroker: map[string]int{}}, nil
	}
	if err != nil {
		return Census{}, err
	}
	if !res.Complete {
		return Census{}, fmt.Errorf("dlq: census of %s: incomplete scan: %s", res.Topic, strings.Join(res.Problems, "; "))
	}
	statuses, err := Statuses(ctx, res.Letters, status)
	if err != nil {
		return Census{}, err
	}
	c := Census{Letters: len(res.Letters), ByBroker: map[string]int{}, WaitingByBroker: map[string]int{}}
	for _, b := range res.Brokers {
		c.ByBroker[b], c.WaitingByBroker[b] = 0, 0
	}
	for i, l := range res.Letters {
		c.ByBroker[l.Broker]++
		if statuses[i].waiting() {
			c.Waiting++
			c.WaitingByBroker[l.Broker]++
		}
	}
	return c, nil
}

// MonitorConfig configures a Monitor. Zero fields take their defaults.
type MonitorConfig struct {
	// Cluster is how to reach the group's cluster (name servers, namespace, credentials). Required.
	Cluster Cluster
	// Status says whose letters are counted and where their replay status is read (Group, Audit and
	// Processed required).
	Status StatusOptions
	// EventIDProperty and EventIDJSONField say where a letter's event ID is, for the processed check, as
	// in ScanOptions (default the EVENT_ID property, no JSON field).
	EventIDProperty, EventIDJSONField string
	// Interval is the time between two censuses; default DefaultMonitorInterval. Each reads the whole DLQ.
	Interval time.Duration
	// Metrics receives the census: rmqguard_dlq_letters_waiting{group}. Required.
	Metrics *metrics.Metrics
	// Logger receives the censuses that failed (warn); default zap.NewNop.
	Logger *zap.Logger
}

// Monitor exports the depth of a consumer group's DLQ, the letters waiting for an operator, counted by
// TakeCensus every Interval into rmqguard_dlq_letters_waiting{group}. A census that fails, reads the DLQ only
// in part, or misses a master it last counted letters on removes the series (the package doc, "The DLQ
// census"). Run it in the consumer's process: it knows its group, cluster and dedup database.
type Monitor struct {
	cfg MonitorConfig

	mu sync.Mutex
	// held maps each broker where the last census that read it counted waiting letters to when that was.
	held map[string]time.Time
}

// missingBrokerLimit is how long a Monitor withholds its count while a broker that held waiting letters
// is not listed: the window of the alert RmqguardDLQLettersWaiting, so that the letters of a master back
// within it are not taken for new ones (deploy/prometheus/rules.yml).
const missingBrokerLimit = time.Hour

// NewMonitor returns a Monitor of cfg. Errors name the field: an invalid Cluster, a missing Status.Group,
// Status.Audit, Status.Processed or Metrics, a negative Interval.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if err := cfg.Cluster.Validate(); err != nil {
		return nil, fmt.Errorf("dlq: monitor: %w", err)
	}
	if err := cfg.Status.validate(); err != nil {
		return nil, fmt.Errorf("dlq: monitor: %w", err)
	}
	switch {
	case cfg.Metrics == nil:
		return nil, errors.New("dlq: monitor: Metrics is required")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("dlq: monitor: Interval %s is negative", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultMonitorInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Monitor{cfg: cfg, held: map[string]time.Time{}}, nil
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
	group := m.cfg.Status.Group
	scan := ScanOptions{EventIDProperty: m.cfg.EventIDProperty, EventIDJSONField: m.cfg.EventIDJSONField}
	c, err := TakeCensus(ctx, m.cfg.Cluster, scan, m.cfg.Status)
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
func (m *Monitor) checkBrokers(ctx context.Context, c Census) error {
	masters, err := rmq.Masters(ctx, m.cfg.Cluster.NameServers)
	if err != nil {
		return fmt.Errorf("dlq: census of %s: %w", m.cfg.Status.Group, err)
	}
	listed := make(map[string]bool, len(masters))
	for _, b := range masters {
		listed[b.Name] = true
	}
	if missing := m.missing(c, listed, time.Now()); len(missing) > 0 {
		return fmt.Errorf("dlq: census of %s: broker(s) %s held waiting letters and are not listed by the name servers (down?); withheld for at most %s",
			m.cfg.Status.Group, strings.Join(missing, ", "), missingBrokerLimit)
	}
	return nil
}

// missing records where census c counted waiting letters at now and returns, sorted, the brokers that
// held waiting letters at a census less than missingBrokerLimit ago, that c did not read and that are
// not listed.
func (m *Monitor) missing(c Census, listed map[string]bool, now time.Time) []string {
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
