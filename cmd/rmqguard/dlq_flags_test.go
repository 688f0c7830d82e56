package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseWhen_RFC3339OrDurationAgo(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"":                          {},
		"2026-11-29T08:30:00Z":      time.Date(2026, 11, 29, 8, 30, 0, 0, time.UTC),
		"2026-11-29T09:30:00+01:00": time.Date(2026, 11, 29, 8, 30, 0, 0, time.UTC),
		"2h":                        now.Add(-2 * time.Hour),
		"90m":                       now.Add(-90 * time.Minute),
		"3d":                        now.Add(-72 * time.Hour),
	}
	for in, want := range cases {
		got, err := parseWhen(in, now)
		require.NoError(t, err, in)
		assert.True(t, want.Equal(got), "%q: got %s, want %s", in, got, want)
	}
	for _, bad := range []string{"yesterday", "-2h", "2026-11-29", "xd"} {
		_, err := parseWhen(bad, now)
		assert.Error(t, err, bad)
	}
}

func TestWriteBody_JSONPrettyOtherHexBothCut(t *testing.T) {
	var b bytes.Buffer
	writeBody(&b, []byte(` {"a":[1,2]} `), 4096)
	assert.Equal(t, "body (13 bytes, JSON):\n  {\n    \"a\": [\n      1,\n      2\n    ]\n  }\n", b.String())

	b.Reset()
	writeBody(&b, []byte(`{"long":"abcdefghijklmnopqrstuvwxyz"}`), 10)
	assert.Equal(t, "body (37 bytes, JSON):\n  {\n    \"long\"\n  (32 more bytes)\n", b.String())

	b.Reset()
	writeBody(&b, append([]byte{0xef, 0xbb, 0xbf}, []byte("not json")...), 4096)
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "body (11 bytes, not JSON: hex and printable text):\n  00000000  ef bb bf 6e 6f 74 20 6a"), out)
	assert.Contains(t, out, "|...not json|")
	assert.NotContains(t, out, "more bytes")

	b.Reset()
	writeBody(&b, nil, 10)
	assert.Equal(t, "body (0 bytes, not JSON: hex and printable text):\n", b.String())
}
