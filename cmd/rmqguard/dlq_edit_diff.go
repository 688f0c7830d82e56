package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// diffContext is how many unchanged lines the body diff shows around the changed ones.
const diffContext = 3

// writeBodyDiff writes the difference of the letter's body and the edited one, line by line: both
// pretty-printed when both are JSON (as `dlq show` prints them), as text when both are UTF-8, else as hex
// dumps. The changed lines are those between the longest common first and last lines (one changed
// region: what an edit of a field or two gives; a scattered edit shows as one larger region).
func writeBodyDiff(w io.Writer, old, edited []byte) {
	oldLines, newLines, form := splitLines(old), splitLines(edited), "text"
	switch {
	case prettyJSON(old) != nil && prettyJSON(edited) != nil:
		oldLines, newLines, form = splitLines(prettyJSON(old)), splitLines(prettyJSON(edited)), "JSON, pretty-printed"
	case !utf8.Valid(old) || !utf8.Valid(edited):
		oldLines, newLines, form = splitLines([]byte(hex.Dump(old))), splitLines([]byte(hex.Dump(edited))), "hex"
	}
	fmt.Fprintf(w, "--- letter body (%d bytes)\n+++ edited body (%d bytes)   [%s]\n", len(old), len(edited), form)
	head := 0
	for head < len(oldLines) && head < len(newLines) && oldLines[head] == newLines[head] {
		head++
	}
	tail := 0
	for tail < len(oldLines)-head && tail < len(newLines)-head && oldLines[len(oldLines)-1-tail] == newLines[len(newLines)-1-tail] {
		tail++
	}
	if head == len(oldLines) && head == len(newLines) {
		fmt.Fprintln(w, "  (no difference in this form: the bytes differ, e.g. in white space)")
		return
	}
	from := max(head-diffContext, 0)
	if from > 0 {
		fmt.Fprintf(w, "  … %d unchanged lines\n", from)
	}
	for _, l := range oldLines[from:head] {
		fmt.Fprintln(w, "  "+l)
	}
	for _, l := range oldLines[head : len(oldLines)-tail] {
		fmt.Fprintln(w, "- "+l)
	}
	for _, l := range newLines[head : len(newLines)-tail] {
		fmt.Fprintln(w, "+ "+l)
	}
	after := oldLines[len(oldLines)-tail:]
	shown := after[:min(diffContext, len(after))]
	for _, l := range shown {
		fmt.Fprintln(w, "  "+l)
	}
	if rest := len(after) - len(shown); rest > 0 {
		fmt.Fprintf(w, "  … %d unchanged lines\n", rest)
	}
}

// prettyJSON returns b indented as `dlq show` prints it, or nil when b is not JSON.
func prettyJSON(b []byte) []byte {
	var pretty bytes.Buffer
	if len(b) == 0 || json.Indent(&pretty, bytes.TrimSpace(b), "", "  ") != nil {
		return nil
	}
	return pretty.Bytes()
}

// splitLines splits b at line breaks; a final line break ends the last line rather than starting one.
func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
