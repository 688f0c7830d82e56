package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// maxSelected bounds the letters of one replay request.
const maxSelected = 1000

// replaySendRate is the replay's sends per second (the CLI's default --rate).
const replaySendRate = 50

// resultRow is one letter of a preview or a result.
type resultRow struct {
	StoreID, MsgID, EventID string
	Outcome, Topic, Detail  string
	SentMsgID, Error        string
	Sends                   bool // the outcome sends (sent, or would send)
}

// replayData is the data of the preview and the result page.
type replayData struct {
	ReplayID string
	Rows     []resultRow
	Summary  dlqtool.ReplaySummary
	// Missing are selected store IDs not found on the DLQ.
	Missing []string
	// Confirm are the store IDs the confirm form posts (the preview's would-send letters).
	Confirm []string
	// Problem says why a replay cannot send now (the group's retry topic is missing); the preview shows it.
	Problem string
}

// replayPreview is the engine's dry run of the selected letters, with a form to confirm those it would send.
func (c *Console) replayPreview(w http.ResponseWriter, r *http.Request, s session) {
	data, err := c.runReplay(r)
	if err != nil {
		c.failReplay(w, r, s, err)
		return
	}
	for _, row := range data.Rows {
		if row.Sends && data.Problem == "" {
			data.Confirm = append(data.Confirm, row.StoreID)
		}
	}
	c.render(w, http.StatusOK, "preview", c.newView(r, s, "Replay preview", data))
}

// errNoSelection: the request selected no letter, or too many.
var errNoSelection = errors.New("select at least one letter")

// failReplay renders a replay's error: 400 for a bad selection, else 502 (broker or database).
func (c *Console) failReplay(w http.ResponseWriter, r *http.Request, s session, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, errNoSelection) {
		status = http.StatusBadRequest
	}
	c.fail(w, r, s, status, err)
}

// runReplay reads the selected letters (form field "letter", store IDs) from the DLQ and runs the engine's
// dry run on them.
func (c *Console) runReplay(r *http.Request) (replayData, error) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	letters, data, err := c.selected(ctx, r, true)
	if err != nil {
		return replayData{}, err
	}
	report, err := dlqtool.Replay(ctx, letters, c.replayOptions(r.PathValue("group"), true))
	if err != nil {
		return replayData{}, err
	}
	data.fill(report)
	return data, nil
}

// selected reads the selected letters (form field "letter", store IDs) from the DLQ; data gets those not
// found. Without the group's retry topic, a dry run notes the Problem and a replay is refused.
func (c *Console) selected(ctx context.Context, r *http.Request, dryRun bool) ([]dlqtool.Letter, replayData, error) {
	group := r.PathValue("group")
	if err := r.ParseForm(); err != nil {
		return nil, replayData{}, fmt.Errorf("%w: %v", errNoSelection, err)
	}
	ids := unique(r.PostForm["letter"])
	if len(ids) == 0 || len(ids) > maxSelected {
		return nil, replayData{}, fmt.Errorf("%w (at most %d; %d selected)", errNoSelection, maxSelected, len(ids))
	}
	res, err := dlqtool.Scan(ctx, c.cfg.Cluster, group, c.scanOptions(dlqtool.Filter{}))
	if err != nil && !errors.Is(err, dlqtool.ErrNoDLQ) {
		return nil, replayData{}, err
	}
	byID := map[string]dlqtool.Letter{}
	for _, l := range res.Letters {
		byID[l.StoreID] = l
	}
	var data replayData
	var letters []dlqtool.Letter
	for _, id := range ids {
		if l, ok := byID[id]; ok {
			letters = append(letters, l)
		} else {
			data.Missing = append(data.Missing, id)
		}
	}
	if len(letters) > 0 {
		// Every replay goes to the group's retry topic: without it every send would fail.
		if err := dlqtool.CheckRetryTopic(ctx, c.cfg.Cluster, group); err != nil {
			if !dryRun {
				return nil, replayData{}, err
			}
			data.Problem = err.Error()
		}
	}
	return letters, data, nil
}

// replayOptions are the engine's options for a replay of group as the console's operator.
func (c *Console) replayOptions(group string, dryRun bool) dlqtool.ReplayOptions {
	return dlqtool.ReplayOptions{Group: group, Namespace: c.cfg.Cluster.Namespace, Scope: c.scope(group),
		DryRun: dryRun, Operator: c.cfg.Operator, Sender: c.cfg.Sender, Audit: c.cfg.Audit, Processed: c.cfg.Processed}
}

// fill sets the report's ID, summary and rows.
func (d *replayData) fill(report dlqtool.ReplayReport) {
	d.ReplayID, d.Summary = report.ReplayID, report.Summary
	for _, lr := range report.Results {
		d.Rows = append(d.Rows, toRow(lr))
	}
}

// unique returns the non-empty values of xs, first occurrence kept.
func unique(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
