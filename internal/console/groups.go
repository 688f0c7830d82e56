package console

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/outboxadmin"
	"github.com/rmqguard/rmqguard/internal/scrape"
)

// dash is what a cell shows when the figure is not available (no Prometheus, no outbox).
const dash = "—"

// groupRow is one line of the groups page.
type groupRow struct {
	Name string
	// Letters and Waiting are the census's counts; Problem replaces them when the census failed.
	Letters, Waiting int
	Problem          string
	// DuplicateRatio and Parked are shown as text: a figure, or dash.
	DuplicateRatio, Parked string
}

// groupsData is the groups page's data.
type groupsData struct {
	Rows []groupRow
	// Notes say why a column shows dash or what failed reading it.
	Notes []string
}

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request, s session) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	data := groupsData{Rows: make([]groupRow, len(c.cfg.Groups))}
	var wg sync.WaitGroup
	for i, g := range c.cfg.Groups {
		data.Rows[i] = groupRow{Name: g, DuplicateRatio: dash, Parked: dash}
		wg.Add(1)
		go func(row *groupRow) {
			defer wg.Done()
			census, err := dlqtool.TakeCensus(ctx, c.cfg.Cluster, c.scanOptions(dlqtool.Filter{}), c.statusOptions(row.Name))
			if err != nil {
				row.Problem = err.Error()
				return
			}
			row.Letters, row.Waiting = census.Letters, census.Waiting
		}(&data.Rows[i])
	}
	wg.Wait()
	data.Notes = append(data.Notes, c.fillDuplicateRatios(ctx, data.Rows)...)
	data.Notes = append(data.Notes, c.fillParked(ctx, data.Rows)...)
	c.render(w, http.StatusOK, "groups", c.newView(r, s, "Consumer groups", data))
}

// fillDuplicateRatios sets each row's duplicate ratio from Prometheus, when configured; it returns notes.
func (c *Console) fillDuplicateRatios(ctx context.Context, rows []groupRow) []string {
	if c.cfg.PrometheusURL == "" {
		if len(c.cfg.MetricsURLs) == 0 {
			return []string{"Duplicate ratio: no Prometheus (--prometheus URL) and no consumer /metrics (--metrics URL) configured."}
		}
		return c.fillRatiosFromMetrics(ctx, rows)
	}
	ratios, err := duplicateRatios(ctx, c.prom, c.cfg.PrometheusURL)
	if err != nil {
		c.log.Warn("console: duplicate ratio", zap.Error(err))
		return []string{"Duplicate ratio: " + err.Error()}
	}
	for i := range rows {
		v, ok := ratios[rows[i].Name]
		switch {
		case !ok:
			rows[i].DuplicateRatio = "no data"
		case math.IsNaN(v):
			rows[i].DuplicateRatio = "no traffic"
		default:
			rows[i].DuplicateRatio = fmt.Sprintf("%.2f %% (5 min)", 100*v)
		}
	}
	return nil
}

// fillParked sets each row's parked outbox rows (of the group's dedup scope), when the outbox exists; it
// returns notes.
func (c *Console) fillParked(ctx context.Context, rows []groupRow) []string {
	if c.cfg.DB == nil {
		return []string{"Parked outbox rows: no database."}
	}
	parked, err := outboxadmin.ParkedByScope(ctx, c.cfg.DB, c.cfg.TablePrefix)
	if mysqlerr.MissingTable(err) {
		return []string{fmt.Sprintf("Parked outbox rows: no outbox table (%srmqguard_outbox) in this database.", c.cfg.TablePrefix)}
	}
	if err != nil {
		c.log.Warn("console: parked outbox rows", zap.Error(err))
		return []string{"Parked outbox rows: " + err.Error()}
	}
	for i := range rows {
		p := parked[c.scope(rows[i].Name)]
		rows[i].Parked = fmt.Sprintf("%d messages, %d effects", p.Messages, p.Effects)
	}
	return nil
}

// scope is group's dedup scope.
func (c *Console) scope(group string) string {
	if c.cfg.Scope != "" {
		return c.cfg.Scope
	}
	return group
}

// scanOptions are the scan options of the console with filter f.
func (c *Console) scanOptions(f dlqtool.Filter) dlqtool.ScanOptions {
	return dlqtool.ScanOptions{Filter: f, EventIDProperty: c.cfg.EventIDProperty, EventIDJSONField: c.cfg.EventIDJSONField}
}

// statusOptions are the status options of group.
func (c *Console) statusOptions(group string) dlqtool.StatusOptions {
	return dlqtool.StatusOptions{Group: group, Namespace: c.cfg.Cluster.Namespace, Scope: c.scope(group),
		Audit: c.cfg.Audit, Processed: c.cfg.Processed}
}

// fillRatiosFromMetrics sets each row's duplicate ratio from the consumers' /metrics (MetricsURLs): its
// duplicates over its acknowledged messages since the consumers started, summed over the endpoints.
func (c *Console) fillRatiosFromMetrics(ctx context.Context, rows []groupRow) []string {
	var notes []string
	for i := range rows {
		var dups, acked float64
		for _, u := range c.cfg.MetricsURLs {
			d, a, err := scrape.Duplicates(ctx, u, rows[i].Name)
			if err != nil {
				c.log.Warn("console: duplicate ratio from /metrics", zap.String("url", u), zap.Error(err))
				notes = append(notes, "Duplicate ratio: "+err.Error())
				continue
			}
			dups, acked = dups+d, acked+a
		}
		if acked == 0 {
			rows[i].DuplicateRatio = "no traffic"
			continue
		}
		rows[i].DuplicateRatio = fmt.Sprintf("%.2f %% (since start)", 100*dups/acked)
	}
	return notes
}
