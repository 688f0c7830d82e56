package dashboards

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// maxLabels bounds the search for a metric's number of variable labels (see sample).
const maxLabels = 16

// Exposed returns the names of the series that the collectors register creates would expose: it calls
// register with a Registerer that records the collectors (and registers them on a fresh registry, so
// conflicts still fail), then, since a labelled vector exposes nothing before its first use, builds one
// sample of every described metric and gathers it. A counter or gauge gives its name, a histogram its
// _bucket, _sum and _count series, a summary its name, _sum and _count. Errors: those of register, and a
// described metric that cannot be sampled or gathered.
func Exposed(register func(prometheus.Registerer) error) (map[string]bool, error) {
	rec := &recorder{reg: prometheus.NewRegistry()}
	if err := register(rec); err != nil {
		return nil, fmt.Errorf("exposed: register: %w", err)
	}
	samples := &constCollector{}
	for _, c := range rec.collectors {
		k := kindOf(c)
		for _, d := range describe(c) {
			m, err := sample(d, k)
			if err != nil {
				return nil, fmt.Errorf("exposed: %s: %w", d, err)
			}
			samples.descs = append(samples.descs, d)
			samples.metrics = append(samples.metrics, m)
		}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(samples); err != nil {
		return nil, fmt.Errorf("exposed: %w", err)
	}
	families, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("exposed: gather: %w", err)
	}
	names := map[string]bool{}
	for _, f := range families {
		base := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[base+"_bucket"], names[base+"_sum"], names[base+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[base], names[base+"_sum"], names[base+"_count"] = true, true, true
		default:
			names[base] = true
		}
	}
	return names, nil
}

// recorder is a Registerer that keeps what is registered, and registers it on reg too.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

// Register registers c on the fresh registry and, when that succeeds, keeps it.
func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister is Register for each of cs, panicking on the first error (as prometheus.Registry does).
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister forgets c and unregisters it from the fresh registry.
func (r *recorder) Unregister(c prometheus.Collector) bool {
	for i, have := range r.collectors {
		if have == c {
			r.collectors = append(r.collectors[:i], r.collectors[i+1:]...)
			break
		}
	}
	return r.reg.Unregister(c)
}

type kind int

const (
	plain kind = iota // counter, gauge, untyped: exposed under its name
	histogram
	summary
)

// kindOf tells histograms and summaries apart from the rest: a vector by its Go type, anything else by a
// metric it emits now (a collector that emits nothing counts as plain).
func kindOf(c prometheus.Collector) kind {
	switch c.(type) {
	case *prometheus.HistogramVec:
		return histogram
	case *prometheus.SummaryVec:
		return summary
	}
	k := plain
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }() // ends when Collect returns; drained below
	for m := range ch {
		var out dto.Metric
		if m.Write(&out) != nil {
			continue
		}
		switch {
		case out.Histogram != nil:
			k = histogram
		case out.Summary != nil:
			k = summary
		}
	}
	return k
}

func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }() // ends when Describe returns; drained below
	var descs []*prometheus.Desc
	for d := range ch {
		descs = append(descs, d)
	}
	return descs
}

// sample builds a constant metric of kind k for d. The number of variable labels is not exported by Desc,
// so it is found by trying 0..maxLabels label values: the constructors refuse any other count.
func sample(d *prometheus.Desc, k kind) (prometheus.Metric, error) {
	var last error
	for n := 0; n <= maxLabels; n++ {
		values := make([]string, n)
		var (
			m   prometheus.Metric
			err error
		)
		switch k {
		case histogram:
			m, err = prometheus.NewConstHistogram(d, 0, 0, nil, values...)
		case summary:
			m, err = prometheus.NewConstSummary(d, 0, 0, nil, values...)
		default:
			m, err = prometheus.NewConstMetric(d, prometheus.UntypedValue, 0, values...)
		}
		if err == nil {
			return m, nil
		}
		last = err
	}
	return nil, errors.Join(fmt.Errorf("no label count in 0..%d fits", maxLabels), last)
}

// constCollector emits fixed metrics with their descriptions.
type constCollector struct {
	descs   []*prometheus.Desc
	metrics []prometheus.Metric
}

func (c *constCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics {
		ch <- m
	}
}
