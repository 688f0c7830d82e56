package console

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// maxRuns bounds the replay runs the console keeps (running and finished); a finished run is dropped,
// oldest first, to make room for a new one.
const maxRuns = 32

// errTooManyRuns: every kept run is still running.
var errTooManyRuns = errors.New("too many replays are running: wait until one ends")

// progressRefresh is the progress page's reload interval, in seconds.
const progressRefresh = 1

// run is one replay started by a confirm, running in the background.
type run struct {
	group string
	// Done of Total letters so far, with their outcomes counted; Finished once the engine returned.
	done, total          int
	sent, skipped, fails int
	finished             bool
	data                 replayData // the result, once finished
	err                  error      // the engine's error, once finished
}

// runs is the console's bounded registry of replay runs, by replay ID.
type runs struct {
	mu    sync.Mutex
	byID  map[string]*run
	order []string // replay IDs, oldest first
}

func newRuns() *runs { return &runs{byID: map[string]*run{}} }

// add registers a new run of group with total letters under id; errTooManyRuns when every kept run is running.
func (rs *runs) add(id, group string, total int) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.order) >= maxRuns {
		i := 0
		for i < len(rs.order) && !rs.byID[rs.order[i]].finished {
			i++
		}
		if i == len(rs.order) {
			return errTooManyRuns
		}
		delete(rs.byID, rs.order[i])
		rs.order = append(rs.order[:i], rs.order[i+1:]...)
	}
	rs.byID[id] = &run{group: group, total: total}
	rs.order = append(rs.order, id)
	return nil
}

// progress counts one letter's outcome of run id.
func (rs *runs) progress(id string, done int, lr dlqtool.LetterResult) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.byID[id]
	r.done = done
	switch lr.Outcome {
	case dlqtool.ReplaySent:
		r.sent++
	case dlqtool.ReplayFailed:
		r.fails++
	default:
		r.skipped++
	}
}

// finish records run id's result.
func (rs *runs) finish(id string, data replayData, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.byID[id]
	r.finished, r.data, r.err = true, data, err
}

// get returns a copy of run id of group.
func (rs *runs) get(id, group string) (run, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.byID[id]
	if !ok || r.group != group {
		return run{}, false
	}
	return *r, true
}

// progressData is the progress page's data.
type progressData struct {
	ReplayID                           string
	Done, Total, Sent, Skipped, Failed int
}

// replayConfirm reads the confirmed letters, starts their replay in the background (stopped by the
// console's context) and redirects to its progress page.
func (c *Console) replayConfirm(w http.ResponseWriter, r *http.Request, s session) {
	group := r.PathValue("group")
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	letters, data, err := c.selected(ctx, r, false)
	if err != nil {
		c.failReplay(w, r, s, err)
		return
	}
	id := uuid.NewString()
	if err := c.runs.add(id, group, len(letters)); err != nil {
		c.fail(w, r, s, http.StatusServiceUnavailable, err)
		return
	}
	opts := c.replayOptions(group, false)
	opts.ReplayID, opts.Limiter = id, rate.NewLimiter(replaySendRate, 1)
	opts.Progress = func(done, _ int, lr dlqtool.LetterResult) { c.runs.progress(id, done, lr) }
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		report, err := dlqtool.Replay(c.ctx, letters, opts)
		if err == nil {
			data.fill(report)
			sum := data.Summary
			c.log.Info("console: replay", zap.String("group", group), zap.String("operator", c.cfg.Operator),
				zap.String("replay_id", id), zap.Int("selected", sum.Selected), zap.Int("sent", sum.Sent),
				zap.Int("failed", sum.Failed), zap.Int("missing", len(data.Missing)))
		}
		c.runs.finish(id, data, err)
	}()
	http.Redirect(w, r, replayPageURL(group, id), http.StatusSeeOther)
}

// replayPage shows a replay's progress, reloading itself, until it ends; then its result.
func (c *Console) replayPage(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	run, ok := c.runs.get(id, r.PathValue("group"))
	switch {
	case !ok:
		c.fail(w, r, s, http.StatusNotFound, errors.New("no replay "+id+" in this console (it keeps the last ones since it started); the letters' status shows what was sent"))
	case !run.finished:
		v := c.newView(r, s, "Replay in progress", progressData{ReplayID: id, Done: run.done, Total: run.total,
			Sent: run.sent, Skipped: run.skipped, Failed: run.fails})
		v.Refresh = progressRefresh
		c.render(w, http.StatusOK, "progress", v)
	case run.err != nil:
		c.failReplay(w, r, s, run.err)
	default:
		c.render(w, http.StatusOK, "result", c.newView(r, s, "Replay result", run.data))
	}
}
