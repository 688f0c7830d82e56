package dlqtool_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// RocketMQ properties, KEYS and TAGS are bytes on the wire (the Go client decodes them with string(b)), so a
// letter may carry values that are not valid UTF-8. encoding/json silently turns every invalid byte into
// U+FFFD, so an export must either give the letter back byte for byte or refuse to write it: a replay
// --from-file must never send an altered EVENT_ID, KEYS or traceparent.
func TestExport_NonUTF8StringsRoundTripOrAreRefused(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := map[string]dlqtool.Letter{
		"property": {Properties: map[string]string{"EVENT_ID": "e-\xff\xfe", "bin": "\x80\x81"}, EventID: "e-\xff\xfe"},
		"keys":     {Keys: "k-\xc3", Properties: map[string]string{"KEYS": "k-\xc3"}},
		"tags":     {Tags: "T\xe9", Properties: map[string]string{"TAGS": "T\xe9"}},
		"reason":   {Reason: "bad byte \xff in body", Properties: map[string]string{}},
	}
	for name, l := range cases {
		t.Run(name, func(t *testing.T) {
			l.Group, l.Topic, l.StoreID, l.MsgID, l.FailedAt, l.BornAt, l.Body = "g", "%DLQ%g", "S1", "M1", at, at, []byte("x")
			var buf bytes.Buffer
			if err := dlqtool.WriteExport(&buf, dlqtool.ExportHeader{Group: "g", Complete: true}, []dlqtool.Letter{l}); err != nil {
				assert.Contains(t, err.Error(), "UTF-8", "a refusal says why")
				return
			}
			out, err := dlqtool.ReadExport(&buf)
			require.NoError(t, err)
			require.Len(t, out, 1)
			assert.Equal(t, l, out[0], "the export altered the letter")
		})
	}
}
