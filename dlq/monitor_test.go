package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/topics"
)

// monitorDB returns the test database with the replay audit table.
func monitorDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db := testenv.MySQL(t)
	_, err := dlq.Migrate(context.Background(), db.DB)
	require.NoError(t, err)
	return db
}

// runMonitor runs a Monitor of cfg until the test ends and returns its gauge of group: -1 without a series.
func runMonitor(t *testing.T, cfg dlq.MonitorConfig) func() float64 {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	m.DLQLettersWaiting.WithLabelValues(cfg.Group).Set(7) // a value from before
	cfg.Metrics = m
	mon, err := dlq.NewMonitor(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mon.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return func() float64 {
		if testutil.CollectAndCount(m.DLQLettersWaiting) == 0 {
			return -1
		}
		return testutil.ToFloat64(m.DLQLettersWaiting.WithLabelValues(cfg.Group))
	}
}

// NewMonitor names the missing or invalid field before anything runs.
func TestNewMonitor_NamesTheInvalidField(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	ok := dlq.MonitorConfig{Cluster: topics.Cluster{NameServers: []string{"127.0.0.1:9876"}}, Group: "g",
		DB: monitorDB(t), Metrics: m}
	_, err = dlq.NewMonitor(ok)
	require.NoError(t, err)
	for want, mutate := range map[string]func(*dlq.MonitorConfig){
		"NameServers":         func(c *dlq.MonitorConfig) { c.Cluster.NameServers = nil },
		"Group is required":   func(c *dlq.MonitorConfig) { c.Group = "" },
		"DB is required":      func(c *dlq.MonitorConfig) { c.DB = nil },
		"Metrics is required": func(c *dlq.MonitorConfig) { c.Metrics = nil },
		"Interval -1s":        func(c *dlq.MonitorConfig) { c.Interval = -1e9 },
	} {
		c := ok
		mutate(&c)
		_, err := dlq.NewMonitor(c)
		assert.ErrorContains(t, err, want)
	}
}

// F42: the Monitor exports the letters waiting (0 for a group whose DLQ does not exist yet), and removes the
// series when a census fails (here: no name server answers) instead of exporting a stale or partial count.
func TestMonitor_ExportsTheCountAndRemovesItWhenTheCensusFails(t *testing.T) {
	ns, db := testenv.NameServer(t), monitorDB(t)
	group := testenv.Unique("dlqmon")
	for _, c := range []struct {
		name    string
		cluster topics.Cluster
		want    float64
	}{{"no DLQ yet", topics.Cluster{NameServers: []string{ns}}, 0}, {"census fails", topics.Cluster{NameServers: []string{"127.0.0.1:1"}}, -1}} {
		t.Run(c.name, func(t *testing.T) {
			gauge := runMonitor(t, dlq.MonitorConfig{Cluster: c.cluster, Group: group, DB: db})
			require.Eventually(t, func() bool { return gauge() == c.want }, 20*time.Second, 50*time.Millisecond)
		})
	}
}

// F42: a DLQ topic deleted on a broker that is up (an operator purging the letters) is no letter, not a
// missing broker: the Monitor's count drops to 0 at once. (A master that is down is withheld instead.)
func TestMonitor_ADLQDeletedOnABrokerThatIsUpCountsNoLetter(t *testing.T) {
	ns, broker, db := testenv.NameServer(t), testenv.Broker(t), monitorDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := testenv.Unique("dlqmon")
	topic := rmq.DLQTopic(group)
	t.Cleanup(func() { _ = rmq.DeleteTopic(context.Background(), []string{ns}, broker, topic) })
	require.NoError(t, rmq.EnsureTopic(ctx, []string{ns}, broker, topic, 1))
	p, err := rmq.StartProducer([]string{ns}, group+"-producer")
	require.NoError(t, err)
	defer func() { _ = p.Shutdown() }()
	letter := primitive.NewMessage(topic, []byte("poison"))
	letter.WithProperty("EVENT_ID", group+"-e1")
	res, err := p.SendSync(ctx, letter)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)

	gauge := runMonitor(t, dlq.MonitorConfig{Cluster: topics.Cluster{NameServers: []string{ns}}, Group: group, DB: db,
		Interval: 200 * time.Millisecond})
	require.Eventually(t, func() bool { return gauge() == 1 }, 20*time.Second, 50*time.Millisecond)

	require.NoError(t, rmq.DeleteTopic(ctx, []string{ns}, broker, topic))
	require.Eventually(t, func() bool { return gauge() == 0 }, 20*time.Second, 50*time.Millisecond,
		"the letters were deleted with the topic on a broker that is up")
}
