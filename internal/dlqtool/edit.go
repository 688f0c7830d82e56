package dlqtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// ReplayEdited replays letter l of opts.Group's DLQ with body in place of its own, as Replay does one letter
// (same checks, Force, DryRun, audit claim before the send), and records the edit in the claim: the letter
// is superseded (the package doc, "Edit, then replay"). opts.Operator is the editor; opts.Limiter and
// opts.Progress are not used. The error is for invalid options or arguments only: body empty or equal to
// l.Body, l without an event ID, or body dropping the JSON field l's event ID is read from.
func ReplayEdited(ctx context.Context, l Letter, body []byte, opts ReplayOptions) (LetterResult, error) {
	if err := opts.validate(); err != nil {
		return LetterResult{}, err
	}
	switch {
	case len(body) == 0:
		return LetterResult{}, errors.New("dlq: edit: the edited body is empty (the broker refuses an empty body)")
	case bytes.Equal(body, l.Body):
		return LetterResult{}, errors.New("dlq: edit: the edited body is the letter's body: replay the letter instead")
	case l.EventID == "":
		return LetterResult{}, fmt.Errorf("dlq: edit %s: the letter has no event ID: an edited copy is only safe under the letter's event ID, where dedup stops a second effect", l.StoreID)
	case !carriesEventID(l, body):
		return LetterResult{}, fmt.Errorf("dlq: edit %s: the edited body drops event ID %s, which the letter carries in its body and no property: keep that field", l.StoreID, l.EventID)
	}
	r := replayer{opts: opts.withDefaults(), seen: map[string]bool{}, edited: body}
	if err := ctx.Err(); err != nil {
		return failed(LetterResult{Letter: l}, fmt.Errorf("dlq: edit: not attempted: %w", err)), nil
	}
	return r.one(ctx, l), nil
}

// toSend is the letter a replay sends: l, or for an edit l with the edited body and without
// body.PropSysFlag (the operator's body is not compressed).
func (r *replayer) toSend(l Letter) Letter {
	if r.edited == nil {
		return l
	}
	l.Body = r.edited
	l.Properties = maps.Clone(l.Properties)
	delete(l.Properties, body.PropSysFlag)
	return l
}

// carriesEventID reports whether a copy of l with body b carries l's event ID where a consumer reads it: a
// property of l that a replay keeps, or every top-level JSON field of l's body holding it, kept in b.
func carriesEventID(l Letter, b []byte) bool {
	for k, v := range l.Properties {
		if v == l.EventID && !reservedProperty(k) {
			return true
		}
	}
	var orig, edited map[string]json.RawMessage
	if json.Unmarshal(bytes.TrimPrefix(l.Body, utf8BOM), &orig) != nil {
		return false
	}
	_ = json.Unmarshal(bytes.TrimPrefix(b, utf8BOM), &edited) // not JSON: no field keeps it
	found := false
	for k, raw := range orig {
		var was, is string
		if json.Unmarshal(raw, &was) != nil || was != l.EventID {
			continue
		}
		found = true
		if json.Unmarshal(edited[k], &is) != nil || is != was {
			return false
		}
	}
	return found
}

// supersededDetail explains the skip of a letter whose row rec is an edit's, to a replay or (editing) an edit.
func supersededDetail(rec AuditRecord, editing bool) string {
	d := fmt.Sprintf("superseded by an edited copy (edited by %s at %s, replay %s", rec.EditedBy, formatAt(rec.EditedAt), rec.ReplayID)
	switch rec.Status {
	case AuditSent:
		d += ", sent as " + rec.SentMsgID + ")"
	case AuditSending:
		d += ", its send not recorded yet)"
	default:
		d += ", its send failed: " + rec.Error + ")"
	}
	switch {
	case !editing && rec.Status == AuditFailed:
		return d + ": the letter is never replayed as it is; edit it again"
	case !editing:
		return d + ": the letter is never replayed as it is"
	case rec.Status == AuditSending:
		return d + ": it is being sent, or that edit stopped before recording it (it may have been sent): check (dlq show), and only if it stopped, edit again with --force"
	}
	return d + ": it is not edited twice; if the edited copy failed too, it is a new letter in the DLQ (" +
		letter.PropReplayOf + "=" + rec.StoreID + "): edit or replay that one"
}
