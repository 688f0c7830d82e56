package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// editData is the data of the edit form, its preview and its result.
type editData struct {
	Row letterRow
	// Body is the body in the form: the letter's (pretty JSON when it parses) or the operator's.
	Body string
	// Diff is the letter's body against the edited one, line by line (preview and result).
	Diff []diffLine
	// Result is the engine's outcome (dry run on the preview); Refused says why the edit is not done.
	Result  resultRow
	Refused string
	// Sends is true when the preview would send (the confirm form is shown) or the result sent.
	Sends bool
}

// diffLine is one line of a body diff: Op is " " (same), "-" (the letter's) or "+" (the edited body's).
type diffLine struct{ Op, Text string }

// editForm shows the letter's body in a textarea to edit.
func (c *Console) editForm(w http.ResponseWriter, r *http.Request, s session) {
	row, ok := c.findLetter(w, r, s)
	if !ok {
		return
	}
	if why := notEditable(row); why != "" {
		c.fail(w, r, s, http.StatusConflict, errors.New(why))
		return
	}
	c.render(w, http.StatusOK, "edit", c.newView(r, s, "Edit letter "+row.MsgID, editData{Row: row, Body: editableBody(row.Body)}))
}

// editPreview is the engine's dry run of the edited body, with the diff and a form to confirm.
func (c *Console) editPreview(w http.ResponseWriter, r *http.Request, s session) {
	c.runEdit(w, r, s, true)
}

// editConfirm sends the edited body and shows what became of it.
func (c *Console) editConfirm(w http.ResponseWriter, r *http.Request, s session) {
	c.runEdit(w, r, s, false)
}

// runEdit runs dlqtool.ReplayEdited on the letter with the form's body: a dry run (preview) or the send.
// A refusal (invalid edit, superseded, replayed, processed) is 409 with the reason; a failed send 502.
func (c *Console) runEdit(w http.ResponseWriter, r *http.Request, s session, dryRun bool) {
	group := r.PathValue("group")
	row, ok := c.findLetter(w, r, s)
	if !ok {
		return
	}
	edited := []byte(strings.ReplaceAll(r.PostFormValue("body"), "\r\n", "\n")) // browsers send CRLF
	data := editData{Row: row, Body: string(edited), Diff: bodyDiff(row.Body, edited)}
	page, title := "edit-preview", "Edit preview"
	if !dryRun {
		page, title = "edit-result", "Edit result"
	}
	status := http.StatusOK
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := c.editLetter(ctx, group, row, edited, dryRun)
	switch {
	case err != nil:
		status, data.Refused = http.StatusConflict, err.Error()
	default:
		data.Result = toRow(res)
		data.Sends = res.Outcome == dlqtool.ReplaySent || res.Outcome == dlqtool.ReplayWouldSend
		switch {
		case res.Outcome == dlqtool.ReplayFailed:
			status = http.StatusBadGateway
		case !data.Sends:
			status, data.Refused = http.StatusConflict, fmt.Sprintf("%s: %s", res.Outcome, res.Detail)
		}
	}
	if !dryRun {
		c.log.Info("console: edit", zap.String("group", group), zap.String("operator", c.cfg.Operator),
			zap.String("store_id", row.StoreID), zap.String("outcome", data.Result.Outcome), zap.String("refused", data.Refused))
	}
	c.render(w, status, page, c.newView(r, s, title, data))
}

// editLetter checks the edit and runs the engine; the error is a refusal to show the operator.
func (c *Console) editLetter(ctx context.Context, group string, row letterRow, edited []byte, dryRun bool) (dlqtool.LetterResult, error) {
	if why := notEditable(row); why != "" {
		return dlqtool.LetterResult{}, errors.New(why)
	}
	if sameBody(row.Body, edited) {
		return dlqtool.LetterResult{}, errors.New("the edited body is the letter's body (white space aside): nothing to edit; replay the letter instead")
	}
	if err := dlqtool.CheckRetryTopic(ctx, c.cfg.Cluster, group); err != nil {
		return dlqtool.LetterResult{}, err
	}
	return dlqtool.ReplayEdited(ctx, row.Letter, edited, c.replayOptions(group, dryRun))
}

// findLetter reads the path's letter with its status; it renders the error page and returns false when
// the letter is not on the DLQ or cannot be read.
func (c *Console) findLetter(w http.ResponseWriter, r *http.Request, s session) (letterRow, bool) {
	group, id := r.PathValue("group"), r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	res, err := dlqtool.Scan(ctx, c.cfg.Cluster, group, c.scanOptions(dlqtool.Filter{}))
	if err != nil && !errors.Is(err, dlqtool.ErrNoDLQ) {
		c.fail(w, r, s, http.StatusBadGateway, err)
		return letterRow{}, false
	}
	for _, l := range res.Letters {
		if l.StoreID != id {
			continue
		}
		rows, err := c.withStatuses(ctx, group, []dlqtool.Letter{l})
		if err != nil {
			c.fail(w, r, s, http.StatusBadGateway, err)
			return letterRow{}, false
		}
		return rows[0], true
	}
	c.fail(w, r, s, http.StatusNotFound, fmt.Errorf("no letter with store ID %q on the DLQ of %s (expired, or never there)", id, group))
	return letterRow{}, false
}

// notEditable says why the console does not edit the letter ("" when it does).
func notEditable(row letterRow) string {
	switch {
	case row.Superseded():
		return row.SupersededCell() + ": it is not edited again here (rmqguard dlq edit --force, after checking its send)"
	case row.Status.Replay != nil && row.Status.Replay.Status != dlqtool.AuditFailed:
		return "a replay has sent it (or may have: " + row.ReplayCell() + "): it is not edited here (rmqguard dlq edit --force, after checking that send)"
	case !utf8.Valid(row.Body):
		return "the body is binary (not UTF-8 text) and cannot be edited in a text field: use rmqguard dlq edit --body-file"
	}
	return ""
}

// editableBody is the body to edit: pretty JSON when it parses, else the text itself.
func editableBody(b []byte) string {
	if p := prettyJSON(b); p != nil {
		return string(p)
	}
	return string(b)
}

// prettyJSON is b indented, or nil when b is not JSON.
func prettyJSON(b []byte) []byte {
	var out bytes.Buffer
	if len(bytes.TrimSpace(b)) == 0 || json.Indent(&out, bytes.TrimSpace(b), "", "  ") != nil {
		return nil
	}
	return out.Bytes()
}

// sameBody reports whether edited is old: the same bytes, or the same JSON but for white space.
func sameBody(old, edited []byte) bool {
	if bytes.Equal(old, edited) {
		return true
	}
	var a, b bytes.Buffer
	return json.Compact(&a, old) == nil && json.Compact(&b, edited) == nil && bytes.Equal(a.Bytes(), b.Bytes())
}

// bodyDiff is the letter's body against the edited one, both pretty-printed when both are JSON: the common
// first and last lines, with the lines between them removed and added (one changed region).
func bodyDiff(old, edited []byte) []diffLine {
	if po, pe := prettyJSON(old), prettyJSON(edited); po != nil && pe != nil {
		old, edited = po, pe
	}
	a, b := strings.Split(string(old), "\n"), strings.Split(string(edited), "\n")
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var out []diffLine
	for _, l := range a[:head] {
		out = append(out, diffLine{" ", l})
	}
	for _, l := range a[head : len(a)-tail] {
		out = append(out, diffLine{"-", l})
	}
	for _, l := range b[head : len(b)-tail] {
		out = append(out, diffLine{"+", l})
	}
	for _, l := range a[len(a)-tail:] {
		out = append(out, diffLine{" ", l})
	}
	return out
}

// toRow is a letter's result as the outcome table shows it.
func toRow(lr dlqtool.LetterResult) resultRow {
	row := resultRow{StoreID: lr.Letter.StoreID, MsgID: lr.Letter.MsgID, EventID: lr.Letter.EventID,
		Outcome: string(lr.Outcome), Topic: lr.Topic, Detail: lr.Detail, SentMsgID: lr.SentMsgID,
		Sends: lr.Outcome == dlqtool.ReplaySent || lr.Outcome == dlqtool.ReplayWouldSend}
	if lr.Err != nil {
		row.Error = lr.Err.Error()
	}
	return row
}
