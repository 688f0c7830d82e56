package dlqtool_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

func exportLetters() []dlqtool.Letter {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return []dlqtool.Letter{
		{Group: "g", Topic: "%DLQ%g", Broker: "broker-a", StoreID: "S1", MsgID: "M1", EventID: "e-1", FailedAt: at, BornAt: at,
			Properties: map[string]string{"EVENT_ID": "e-1", "traceparent": "00-abc"}, Body: []byte{0, 0xff, '{', '\n'}},
		{Group: "g", Topic: "%DLQ%g", Broker: "broker-b", QueueID: 1, QueueOffset: 7, StoreID: "S2", MsgID: "M2", Body: []byte(`{"a":1}`),
			FailedAt: at, BornAt: at, Properties: map[string]string{}},
	}
}

// Export files keep letters byte for byte (body, properties) and say whether the scan was complete.
func TestExport_RoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := exportLetters()
	require.NoError(t, dlqtool.WriteExport(&buf, dlqtool.ExportHeader{Group: "g", Complete: false, Problems: []string{"limit 2 reached"}}, in))
	assert.Equal(t, 3, strings.Count(buf.String(), "\n"), "a header line and one line per letter")

	h, out, err := dlqtool.ReadExportFile(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, in, out)
	assert.Equal(t, dlqtool.ExportVersion, h.Version)
	assert.Equal(t, "g", h.Group)
	assert.False(t, h.Complete)
	assert.Equal(t, []string{"limit 2 reached"}, h.Problems)
	assert.WithinDuration(t, time.Now(), h.ExportedAt, time.Minute)
}

// ReadExport refuses a wrong version, a broken or foreign line (naming its line number) and a truncated file.
func TestExport_ReadRefusesBadFiles(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, dlqtool.WriteExport(&buf, dlqtool.ExportHeader{Group: "g", Complete: true}, exportLetters()))
	lines := strings.SplitAfter(buf.String(), "\n")
	cases := map[string]struct{ file, want string }{
		"version":   {strings.Replace(lines[0], `"version":2`, `"version":9`, 1) + lines[1] + lines[2], "line 1: version 9"},
		"format":    {strings.Replace(lines[0], dlqtool.ExportFormat, "csv", 1) + lines[1] + lines[2], `line 1: format "csv"`},
		"broken":    {lines[0] + lines[1] + lines[2][:20] + "\n", "line 3:"},
		"group":     {lines[0] + lines[1] + strings.Replace(lines[2], `"group":"g"`, `"group":"h"`, 1), `line 3: letter of group "h"`},
		"unknown":   {lines[0] + strings.Replace(lines[1], `{`, `{"surprise":1,`, 1) + lines[2], "line 2:"},
		"truncated": {lines[0] + lines[1], "header says 2 letters, the file holds 1"},
		"empty":     {"", "empty file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := dlqtool.ReadExport(strings.NewReader(c.file))
			require.ErrorIs(t, err, dlqtool.ErrExportFormat)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	assert.Error(t, dlqtool.WriteExport(&buf, dlqtool.ExportHeader{}, nil), "a header without group is refused")

	// A version 1 file (before letters named their broker) is still read.
	v1 := strings.Replace(lines[0], `"version":2`, `"version":1`, 1) + strings.Replace(lines[1], `"broker":"broker-a",`, "", 1) + lines[2]
	_, letters, err := dlqtool.ReadExportFile(strings.NewReader(v1))
	require.NoError(t, err)
	assert.Equal(t, []string{"", "broker-b"}, []string{letters[0].Broker, letters[1].Broker})
	assert.ErrorContains(t, dlqtool.WriteExport(&buf, dlqtool.ExportHeader{Group: "x"}, exportLetters()), `of group "g", not "x"`)
}
