package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// pageSize is the number of letters on one page of the list.
const pageSize = 50

// The replay-status filter's values besides "" (any).
const (
	statusWaiting     = "waiting"      // not sent by a replay, event not processed (the census's waiting)
	statusNotReplayed = "not-replayed" // no audit row
	statusSent        = "sent"         // the audit's states
	statusFailed      = "failed"
	statusSending     = "sending"
	statusProcessed   = "processed" // the dedup scope processed its event
)

// statusChoices are the filter's options, in the order shown.
var statusChoices = []string{statusWaiting, statusNotReplayed, statusSent, statusFailed, statusSending, statusProcessed}

// filterForm is the list's filter as the form gives it.
type filterForm struct {
	Reason, EventType, OriginTopic, Since, Until, Status string
}

// filterOf reads the filter form from q; a bad time is an error naming the field.
func filterOf(q url.Values) (filterForm, dlqtool.Filter, error) {
	f := filterForm{Reason: q.Get("reason"), EventType: q.Get("event_type"), OriginTopic: q.Get("origin_topic"),
		Since: q.Get("since"), Until: q.Get("until"), Status: q.Get("status")}
	df := dlqtool.Filter{Reason: f.Reason, EventType: f.EventType, OriginTopic: f.OriginTopic}
	var err error
	if df.Since, err = parseTime(f.Since); err != nil {
		return f, df, fmt.Errorf("since: %w", err)
	}
	if df.Until, err = parseTime(f.Until); err != nil {
		return f, df, fmt.Errorf("until: %w", err)
	}
	if !df.Since.IsZero() && !df.Until.IsZero() && !df.Since.Before(df.Until) {
		return f, df, errors.New("since is not before until")
	}
	if f.Status != "" && !contains(statusChoices, f.Status) {
		return f, df, fmt.Errorf("status %q: want one of %s", f.Status, strings.Join(statusChoices, ", "))
	}
	return f, df, nil
}

// timeLayouts are the forms a time filter takes, in UTC: what <input type=datetime-local> sends, with or
// without seconds, and RFC 3339.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano}

// parseTime parses a time filter; "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want YYYY-MM-DDTHH:MM (UTC) or RFC 3339", s)
}

// matchStatus reports whether a letter of status st passes the status filter want.
func matchStatus(want string, st dlqtool.LetterStatus) bool {
	switch want {
	case "":
		return true
	case statusWaiting:
		return st.Waiting()
	case statusNotReplayed:
		return st.Replay == nil
	case statusProcessed:
		return st.Processed
	}
	return st.Replay != nil && string(st.Replay.Status) == want
}

// letterRow is one letter with its status, as the list and the letter page show it.
type letterRow struct {
	dlqtool.Letter
	Status dlqtool.LetterStatus
}

// ReplayCell is the letter's replay status in words: "not replayed", or the audit's status with when and by whom.
func (r letterRow) ReplayCell() string {
	rep := r.Status.Replay
	if rep == nil {
		return "not replayed"
	}
	if rep.Superseded() {
		return r.SupersededCell()
	}
	word := string(rep.Status)
	if rep.Status == dlqtool.AuditSending {
		word = "uncertain (sending)"
	}
	return fmt.Sprintf("%s %s by %s", word, rep.ReplayedAt.UTC().Format(time.RFC3339), rep.ReplayedBy)
}

// Superseded reports that an edited copy replaced the letter (it is neither replayed nor edited again).
func (r letterRow) Superseded() bool { return r.Status.Replay != nil && r.Status.Replay.Superseded() }

// SupersededCell is "superseded: edited <time> by <operator>".
func (r letterRow) SupersededCell() string {
	rep := r.Status.Replay
	return fmt.Sprintf("superseded: edited %s by %s", rep.EditedAt.UTC().Format(time.RFC3339), rep.EditedBy)
}

// ProcessedCell is yes, no, or dash for a letter without an event ID.
func (r letterRow) ProcessedCell() string {
	switch {
	case r.Status.Processed:
		return "yes"
	case r.EventID == "" && (r.Status.Replay == nil || r.Status.Replay.EventID == ""):
		return dash
	}
	return "no"
}

// lettersData is the list page's data.
type lettersData struct {
	Filter   filterForm
	Statuses []string
	Rows     []letterRow
	// Total counts the letters the filters match; Page (from 1) of Pages.
	Total, Page, Pages int
	// PrevURL and NextURL link the neighbouring pages ("" when none).
	PrevURL, NextURL string
	// Complete is false when the scan did not read the whole DLQ; Problems say why.
	Complete bool
	Problems []string
	// NoDLQ is true when the DLQ topic does not exist (no letter yet).
	NoDLQ bool
	Error string
}

func (c *Console) lettersPage(w http.ResponseWriter, r *http.Request, s session) {
	group := r.PathValue("group")
	data := lettersData{Statuses: statusChoices, Page: 1, Complete: true}
	form, filter, err := filterOf(r.URL.Query())
	data.Filter = form
	if err != nil {
		data.Error = err.Error()
		c.render(w, http.StatusBadRequest, "letters", c.newView(r, s, "Dead letters of "+group, data))
		return
	}
	if p, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && p > 1 {
		data.Page = p
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := dlqtool.Scan(ctx, c.cfg.Cluster, group, c.scanOptions(filter))
	switch {
	case errors.Is(err, dlqtool.ErrNoDLQ):
		data.NoDLQ = true
	case err != nil:
		c.fail(w, r, s, http.StatusBadGateway, err)
		return
	}
	data.Complete, data.Problems = res.Complete || data.NoDLQ, res.Problems
	letters := res.Letters
	if form.Status == "" { // only the page's letters need a status
		data.Pages = max(1, (len(letters)+pageSize-1)/pageSize)
		data.Page = min(data.Page, data.Pages)
		from := (data.Page - 1) * pageSize
		letters = letters[from:min(from+pageSize, len(letters))]
	}
	rows, err := c.withStatuses(ctx, group, letters)
	if err != nil {
		c.fail(w, r, s, http.StatusBadGateway, err)
		return
	}
	if form.Status == "" {
		data.Total, data.Rows = len(res.Letters), rows
	} else {
		selected := rows[:0]
		for _, row := range rows {
			if matchStatus(form.Status, row.Status) {
				selected = append(selected, row)
			}
		}
		data.Total = len(selected)
		data.Pages = max(1, (data.Total+pageSize-1)/pageSize)
		data.Page = min(data.Page, data.Pages)
		from := (data.Page - 1) * pageSize
		data.Rows = selected[from:min(from+pageSize, data.Total)]
	}
	if data.Page > 1 {
		data.PrevURL = pageURL(r, data.Page-1)
	}
	if data.Page < data.Pages {
		data.NextURL = pageURL(r, data.Page+1)
	}
	c.render(w, http.StatusOK, "letters", c.newView(r, s, "Dead letters of "+group, data))
}

// pageURL is the request's URL on page p.
func pageURL(r *http.Request, p int) string {
	q := r.URL.Query()
	q.Set("page", strconv.Itoa(p))
	return r.URL.Path + "?" + q.Encode()
}

// withStatuses reads the status of each of group's letters.
func (c *Console) withStatuses(ctx context.Context, group string, letters []dlqtool.Letter) ([]letterRow, error) {
	statuses, err := dlqtool.Statuses(ctx, letters, c.statusOptions(group))
	if err != nil {
		return nil, err
	}
	rows := make([]letterRow, len(letters))
	for i, l := range letters {
		rows[i] = letterRow{Letter: l, Status: statuses[i]}
	}
	return rows, nil
}

// property is one property of a letter.
type property struct{ Name, Value string }

// letterData is the letter page's data.
type letterData struct {
	Row        letterRow
	Properties []property
	// BodyFormat is "json" or "hex"; Body the pretty JSON or the hex dump, cut at maxBodyShown bytes
	// (BodyCut more not shown).
	BodyFormat, Body string
	BodyLen, BodyCut int
	// NotEditable says why the page offers no edit ("" when it does): a binary body, a letter a replay sent.
	NotEditable string
}

// maxBodyShown is the most bytes of a body (of its pretty JSON, or of the body in hex) shown.
const maxBodyShown = 64 << 10

func (c *Console) letterPage(w http.ResponseWriter, r *http.Request, s session) {
	group, id := r.PathValue("group"), r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := dlqtool.Scan(ctx, c.cfg.Cluster, group, c.scanOptions(dlqtool.Filter{}))
	if err != nil && !errors.Is(err, dlqtool.ErrNoDLQ) {
		c.fail(w, r, s, http.StatusBadGateway, err)
		return
	}
	for _, l := range res.Letters {
		if l.StoreID != id {
			continue
		}
		rows, err := c.withStatuses(ctx, group, []dlqtool.Letter{l})
		if err != nil {
			c.fail(w, r, s, http.StatusBadGateway, err)
			return
		}
		c.render(w, http.StatusOK, "letter", c.newView(r, s, "Letter "+l.MsgID, newLetterData(rows[0])))
		return
	}
	c.fail(w, r, s, http.StatusNotFound, fmt.Errorf("no letter with store ID %q on the DLQ of %s (expired, or never there)", id, group))
}

// newLetterData builds the letter page's data: properties sorted by name, the body pretty-printed or in hex.
func newLetterData(row letterRow) letterData {
	d := letterData{Row: row, BodyLen: len(row.Body), NotEditable: notEditable(row)}
	for k, v := range row.Properties {
		d.Properties = append(d.Properties, property{Name: k, Value: v})
	}
	sort.Slice(d.Properties, func(i, j int) bool { return d.Properties[i].Name < d.Properties[j].Name })
	var pretty bytes.Buffer
	if len(row.Body) > 0 && json.Indent(&pretty, bytes.TrimSpace(row.Body), "", "  ") == nil {
		text, rest := cut(pretty.Bytes(), maxBodyShown)
		d.BodyFormat, d.Body, d.BodyCut = "json", string(text), rest
		return d
	}
	shown, rest := cut(row.Body, maxBodyShown)
	d.BodyFormat, d.Body, d.BodyCut = "hex", hex.Dump(shown), rest
	return d
}

// cut returns the first n bytes of b and how many were left out.
func cut(b []byte, n int) ([]byte, int) {
	if len(b) <= n {
		return b, 0
	}
	return b[:n], len(b) - n
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
