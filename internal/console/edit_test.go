package console_test

import (
	"html"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/console"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
)

// editPath is the edit form of the world's letter id.
func (w *world) editPath(id string) string { return w.lettersPath(nil) + "/" + id + "/edit" }

// S5 (edit, then replay): the edit form holds the body as pretty JSON; the preview shows the difference
// and sends nothing; confirm sends the edited body once, under the letter's event ID, and the audit
// records both bodies and the console's operator. The letter is then superseded: the letter and list
// pages say so and offer no replay or edit, a replay of it sends nothing, and a second edit is refused.
func TestConsole_EditedReplaySendsTheNewBodyOnceAndSupersedesTheLetter(t *testing.T) {
	w := newWorld(t, nil)
	ev := testenvID(t, "e")
	orig := []byte(`{"eventId":"` + ev + `","sku":"BAD-1"}`)
	a := w.publish(letterSpec{eventID: ev, eventType: "OrderCreated", reason: "bug: unknown SKU", body: orig})
	cl := w.login()

	letter := w.get(cl, w.lettersPath(nil)+"/"+a)
	require.Equal(t, http.StatusOK, letter.status, letter.body)
	assert.Contains(t, letter.body, `id="edit-one-form"`)
	form := w.get(cl, w.editPath(a))
	require.Equal(t, http.StatusOK, form.status, form.body)
	assert.Contains(t, html.UnescapeString(form.body), "{\n  \"eventId\": \""+ev+"\",\n  \"sku\": \"BAD-1\"\n}</textarea>")
	assert.Contains(t, form.body, `<label for="edit-body">`)

	edited := "{\r\n  \"eventId\": \"" + ev + "\",\r\n  \"sku\": \"GOOD-1\"\r\n}" // as a browser posts a textarea
	sent := "{\n  \"eventId\": \"" + ev + "\",\n  \"sku\": \"GOOD-1\"\n}"
	preview := w.post(cl, w.editPath(a)+"/preview", url.Values{"csrf": {form.csrf(t)}, "body": {edited}})
	require.Equal(t, http.StatusOK, preview.status, preview.body)
	text := html.UnescapeString(preview.body)
	assert.Contains(t, text, `-   "sku": "BAD-1"`)
	assert.Contains(t, text, `+   "sku": "GOOD-1"`)
	assert.Contains(t, preview.body, `id="edit-confirm"`)
	assert.Empty(t, w.sent.replayed(), "a preview sends nothing")

	result := w.post(cl, w.editPath(a), url.Values{"csrf": {preview.csrf(t)}, "body": {edited}})
	require.Equal(t, http.StatusOK, result.status, result.body)
	assert.Contains(t, result.body, `id="edit-sent"`)
	require.Equal(t, []string{a}, w.sent.replayed(), "the broker stored one edited copy")
	msg := w.sent.messages()[0]
	assert.Equal(t, sent, string(msg.Body), "the edited body, line ends as typed")
	assert.Equal(t, ev, msg.GetProperty("EVENT_ID"), "under the letter's event ID")
	assert.Equal(t, a, msg.GetProperty(deadletter.PropReplayOf))

	var rec struct {
		EventID  string `db:"event_id"`
		EditedBy string `db:"edited_by"`
		Status   string `db:"status"`
		SentID   string `db:"sent_msg_id"`
		Original []byte `db:"original_body"`
		Edited   []byte `db:"edited_body"`
	}
	require.NoError(t, w.db.Get(&rec, `SELECT event_id, edited_by, status, sent_msg_id, original_body, edited_body FROM dlq_replay
		WHERE consumer_group = ? AND dlq_store_id = ?`, w.group, a))
	assert.Equal(t, ev, rec.EventID)
	assert.Equal(t, "alice@console-test", rec.EditedBy, "the console's operator edited")
	assert.Equal(t, "sent", rec.Status)
	assert.Contains(t, result.body, "as message "+rec.SentID, "the result names the sent message")
	assert.Equal(t, orig, rec.Original)
	assert.Equal(t, sent, string(rec.Edited))

	letter = w.get(cl, w.lettersPath(nil)+"/"+a)
	assert.Contains(t, letter.body, `id="letter-superseded"`)
	assert.Contains(t, letter.body, "superseded: edited ")
	assert.Contains(t, letter.body, " by alice@console-test")
	assert.NotContains(t, letter.body, `id="replay-one-form"`)
	assert.NotContains(t, letter.body, `id="edit-one-form"`)
	list := w.get(cl, w.lettersPath(nil))
	row := list.row(t, "letter-"+a)
	assert.Contains(t, field(t, row, "replay"), "superseded: edited ")
	assert.Contains(t, row, `value="`+a+`" disabled>`, "its checkbox is disabled")

	again := w.confirm(cl, url.Values{"csrf": {list.csrf(t)}, "letter": {a}})
	require.Equal(t, http.StatusOK, again.status, again.body)
	assert.Equal(t, "skipped-superseded", field(t, again.row(t, "outcome-"+a), "outcome"))
	for _, path := range []string{w.editPath(a) + "/preview", w.editPath(a)} {
		p := w.post(cl, path, url.Values{"csrf": {list.csrf(t)}, "body": {`{"eventId":"` + ev + `","sku":"GOOD-2"}`}})
		assert.Equal(t, http.StatusConflict, p.status, path)
		assert.Contains(t, p.body, `id="edit-refused"`, path)
		assert.Contains(t, p.body, "superseded", path)
	}
	assert.Equal(t, http.StatusConflict, w.get(cl, w.editPath(a)).status, "no edit form for a superseded letter")
	assert.Equal(t, []string{a}, w.sent.replayed(), "neither the replay nor the second edit sent anything")
}

// An edit that changes nothing (the prefilled pretty JSON as it is) or drops the JSON field the event ID
// is read from is refused, naming why, and sends nothing.
func TestConsole_EditRefusesAnUnchangedBodyAndADroppedEventIDField(t *testing.T) {
	w := newWorld(t, func(c *console.Config) { c.EventIDJSONField = "eventId" })
	ev := testenvID(t, "f")
	a := w.publish(letterSpec{eventID: ev, eventType: "OrderCreated", reason: "bug", noEventIDProperty: true,
		body: []byte(`{"eventId":"` + ev + `","sku":"BAD-1"}`)})
	cl := w.login()
	csrf := w.get(cl, "/").csrf(t)
	for name, tc := range map[string]struct{ body, why string }{
		"unchanged":         {"{\n  \"eventId\": \"" + ev + "\",\n  \"sku\": \"BAD-1\"\n}", "the edited body is the letter's body"},
		"event ID dropped":  {`{"sku":"GOOD-1"}`, "drops event ID " + ev},
		"event ID replaced": {`{"eventId":"other","sku":"GOOD-1"}`, "drops event ID " + ev},
	} {
		for _, path := range []string{w.editPath(a) + "/preview", w.editPath(a)} {
			p := w.post(cl, path, url.Values{"csrf": {csrf}, "body": {tc.body}})
			assert.Equal(t, http.StatusConflict, p.status, name+" "+path)
			assert.Contains(t, p.body, `id="edit-refused"`, name)
			assert.Contains(t, html.UnescapeString(p.body), tc.why, name)
		}
	}
	assert.Empty(t, w.sent.replayed())
	assert.NotContains(t, w.get(cl, w.lettersPath(nil)+"/"+a).body, `id="letter-superseded"`)
}

// A binary (not UTF-8) body is not offered for edit: the letter page says why and the form is refused.
func TestConsole_BinaryBodyIsNotOfferedForEdit(t *testing.T) {
	w := newWorld(t, nil)
	a := w.publish(letterSpec{eventID: testenvID(t, "b"), eventType: "OrderCreated", reason: "undecodable body",
		body: []byte{0x00, 0x01, 0xfe, 'h', 'i'}})
	cl := w.login()
	p := w.get(cl, w.lettersPath(nil)+"/"+a)
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, `id="edit-not-offered"`)
	assert.NotContains(t, p.body, `id="edit-one-form"`)
	assert.Contains(t, p.body, `id="replay-one-form"`, "replay as it is stays offered")
	p = w.get(cl, w.editPath(a))
	assert.Equal(t, http.StatusConflict, p.status)
	assert.Contains(t, p.body, "binary")
}
