package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names the sampler reads from the example consumers' /metrics. The pause metrics come with the store
// health gate (the consumer pauses pulling while the database is down or read-only); a group that never
// paused has no series, and the report then says paused=0.0s.
const (
	// MetricDuplicates counts messages recognised as duplicates, labels group and topic.
	MetricDuplicates = "rmqguard_duplicates_total"
	// MetricMessages counts handled messages by outcome, labels group, topic and outcome.
	MetricMessages = "rmqguard_messages_total"
	// MetricPaused is the gate's gauge, 1 while the group's consumption is paused, label group.
	MetricPaused = "rmqguard_consumption_paused"
	// MetricPausedSeconds is the gate's counter of seconds paused, label group; it grows when a pause ends.
	MetricPausedSeconds = "rmqguard_consumption_paused_seconds_total"
)

// reading is what one scrape of one process saw for the group.
type reading struct {
	duplicates, messages, pausedSeconds float64
	pausedNow                           bool
}

// Sampler scrapes the consumers of one group periodically and keeps, per slot and generation, the last
// reading. A killed process loses what it counted after its last scrape, so duplicates are a lower bound.
type Sampler struct {
	group   string
	targets func() []Target

	mu           sync.Mutex
	last         map[string]reading
	slotOf       map[string]int
	lastProgress time.Time // when the summed message count last changed
	lastMessages float64
}

// NewSampler samples group's series on the processes targets returns at each round.
func NewSampler(group string, targets func() []Target) *Sampler {
	return &Sampler{group: group, targets: targets, last: map[string]reading{}, slotOf: map[string]int{},
		lastProgress: time.Now()}
}

// Run scrapes every interval until ctx ends. Unreachable processes (being killed, restarting) are skipped.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round scrapes every target, then records the readings at once, so Figures never sees half a round.
func (s *Sampler) round(ctx context.Context) {
	targets := s.targets()
	readings := make(map[string]reading, len(targets))
	for _, t := range targets {
		if r, err := scrapeGroup(ctx, t.MetricsURL, s.group); err == nil {
			readings[t.Key] = r
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range targets {
		if r, ok := readings[t.Key]; ok {
			s.last[t.Key], s.slotOf[t.Key] = r, t.Slot
		}
	}
	total := 0.0
	for _, r := range s.last {
		total += r.messages
	}
	if total != s.lastMessages {
		s.lastMessages, s.lastProgress = total, time.Now()
	}
}

// Figures are the sampler's totals over every process it has seen.
type Figures struct {
	// Duplicates is rmqguard_duplicates_total of the group summed over processes.
	Duplicates float64
	// Messages is rmqguard_messages_total of the group (every outcome) summed over processes.
	Messages float64
	// Paused is how long consumption was paused: per slot, rmqguard_consumption_paused_seconds_total summed
	// over its generations; the largest slot's figure (the group was paused at least that long).
	Paused time.Duration
	// PausedNow is true when some process's gauge said paused at its last scrape.
	PausedNow bool
	// LastProgress is when Messages last changed.
	LastProgress time.Time
}

// Figures returns the totals so far.
func (s *Sampler) Figures() Figures {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := Figures{LastProgress: s.lastProgress}
	perSlot := map[int]float64{}
	for key, r := range s.last {
		f.Duplicates += r.duplicates
		f.Messages += r.messages
		f.PausedNow = f.PausedNow || r.pausedNow
		perSlot[s.slotOf[key]] += r.pausedSeconds
	}
	for _, v := range perSlot {
		f.Paused = max(f.Paused, time.Duration(v*float64(time.Second)))
	}
	return f
}

// scrapeGroup reads the group's series from one /metrics endpoint.
func scrapeGroup(ctx context.Context, url, group string) (reading, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return reading{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reading{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return reading{}, fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return reading{}, fmt.Errorf("metrics %s: parse: %w", url, err)
	}
	var r reading
	r.duplicates = sum(families[MetricDuplicates], group)
	r.messages = sum(families[MetricMessages], group)
	r.pausedSeconds = sum(families[MetricPausedSeconds], group)
	paused := sum(families[MetricPaused], group)
	r.pausedNow = paused > 0
	return r, nil
}

// sum adds the values (counter, gauge or untyped) of fam's series whose label group is group; 0 when there
// is no such series.
func sum(fam *dto.MetricFamily, group string) (total float64) {
	for _, m := range fam.GetMetric() {
		if !hasLabel(m, "group", group) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}
