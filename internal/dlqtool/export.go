package dlqtool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"
	"unicode/utf8"
)

// exportFormat and exportVersion identify an export file. WriteExport writes version 2 (letters name their
// broker); ReadExportFile reads versions 1 and 2 and refuses any other format or version.
const (
	exportFormat  = "rmqguard-dlq-export"
	exportVersion = 2
)

// maxExportLine bounds one line of an export file (a letter with its base64 body): the broker's default
// maximum message size is 4 MiB, which base64 turns into 5.4 MiB.
const maxExportLine = 64 << 20

// errExportFormat is wrapped by ReadExportFile's errors about the file's content (not about reading it).
var errExportFormat = errors.New("dlq: not a valid export file")

// ExportHeader is the first line of an export file: what was exported, when, and whether the scan that
// produced it saw the whole DLQ. Letters expire with the broker's retention (72 h by default); the file
// keeps them for dlq replay --from-file.
type ExportHeader struct {
	// Format is exportFormat and Version is exportVersion; WriteExport sets both.
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Group is the consumer group whose DLQ was exported. Every letter must belong to it.
	Group string `json:"group"`
	// ExportedAt is when the export was written, UTC; WriteExport sets it when zero.
	ExportedAt time.Time `json:"exported_at"`
	// Complete and Problems are the scan's (ScanResult): false means some letters may be missing.
	Complete bool     `json:"complete"`
	Problems []string `json:"problems,omitempty"`
	// Count is the number of letter lines that follow; WriteExport sets it, ReadExportFile checks it, so a
	// truncated file is detected.
	Count int `json:"count"`
}

// WriteExport writes an export file to w: the header h as the first line (Format, Version and Count set
// here, ExportedAt set to now when zero), then one JSON Letter per line (the body base64-encoded).
// Every letter must belong to h.Group (non-empty). Errors: an empty group, a letter of another group, a
// letter with a string that is not valid UTF-8 (JSON would replace its bytes by U+FFFD, so the file could
// not give the letter back byte for byte), or the writer's error, wrapped. The caller makes the file's creation atomic (write a temp file, rename).
func WriteExport(w io.Writer, h ExportHeader, letters []Letter) error {
	if h.Group == "" {
		return errors.New("dlq: write export: header has no group")
	}
	h.Format, h.Version, h.Count = exportFormat, exportVersion, len(letters)
	if h.ExportedAt.IsZero() {
		h.ExportedAt = time.Now().UTC()
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw) // one value per line: Encode ends each with '\n'
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("dlq: write export header: %w", err)
	}
	for i, l := range letters {
		if l.Group != h.Group {
			return fmt.Errorf("dlq: write export: letter %d (%s) is of group %q, not %q", i+1, l.StoreID, l.Group, h.Group)
		}
		if err := checkUTF8(l); err != nil {
			return fmt.Errorf("dlq: write export letter %d (%s): %w", i+1, l.StoreID, err)
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("dlq: write export letter %d (%s): %w", i+1, l.StoreID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dlq: write export: %w", err)
	}
	return nil
}

// ReadExportFile reads an export file written by WriteExport and returns its header and letters.
//
// It checks the header's format and version, that every line is one JSON letter with no unknown field,
// a store ID, a message ID and the header's group, and that the file holds header.Count letters.
// Errors wrap errExportFormat and name the line number (1 = the header); read errors are wrapped as they are.
func ReadExportFile(r io.Reader) (ExportHeader, []Letter, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
	var h ExportHeader
	var letters []Letter
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			if err := decodeHeader(sc.Bytes(), &h); err != nil {
				return h, nil, err
			}
			continue
		}
		l, err := decodeLetter(sc.Bytes(), line, h.Group)
		if err != nil {
			return h, nil, err
		}
		letters = append(letters, l)
	}
	if err := sc.Err(); err != nil {
		return h, nil, fmt.Errorf("dlq: read export after line %d: %w", line, err)
	}
	if line == 0 {
		return h, nil, fmt.Errorf("%w: empty file (no header line)", errExportFormat)
	}
	if len(letters) != h.Count {
		return h, nil, fmt.Errorf("%w: header says %d letters, the file holds %d (truncated?)", errExportFormat, h.Count, len(letters))
	}
	return h, letters, nil
}

// decodeHeader decodes and checks line 1.
func decodeHeader(b []byte, h *ExportHeader) error {
	if err := strictUnmarshal(b, h); err != nil {
		return fmt.Errorf("%w: line 1 (header): %v", errExportFormat, err)
	}
	if h.Format != exportFormat {
		return fmt.Errorf("%w: line 1: format %q, want %q", errExportFormat, h.Format, exportFormat)
	}
	if h.Version < 1 || h.Version > exportVersion {
		return fmt.Errorf("%w: line 1: version %d, this rmqguard reads versions 1 to %d", errExportFormat, h.Version, exportVersion)
	}
	if h.Group == "" {
		return fmt.Errorf("%w: line 1: no group", errExportFormat)
	}
	return nil
}

// decodeLetter decodes and checks one letter line.
func decodeLetter(b []byte, line int, group string) (Letter, error) {
	var l Letter
	if err := strictUnmarshal(b, &l); err != nil {
		return l, fmt.Errorf("%w: line %d: %v", errExportFormat, line, err)
	}
	switch {
	case l.StoreID == "":
		return l, fmt.Errorf("%w: line %d: letter has no store_id", errExportFormat, line)
	case l.MsgID == "":
		return l, fmt.Errorf("%w: line %d: letter has no msg_id", errExportFormat, line)
	case l.Group != group:
		return l, fmt.Errorf("%w: line %d: letter of group %q in an export of group %q", errExportFormat, line, l.Group, group)
	}
	return l, nil
}

// strictUnmarshal decodes exactly one JSON value with no unknown field.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// checkUTF8 returns an error naming the first field or property of l that is not valid UTF-8. RocketMQ
// properties are bytes on the wire; encoding/json would silently replace the invalid ones by U+FFFD.
func checkUTF8(l Letter) error {
	fields := []struct{ name, value string }{{"group", l.Group}, {"topic", l.Topic}, {"broker", l.Broker}, {"store_id", l.StoreID},
		{"msg_id", l.MsgID}, {"origin_topic", l.OriginTopic}, {"origin_msg_id", l.OriginMsgID}, {"event_id", l.EventID},
		{"event_type", l.EventType}, {"reason", l.Reason}, {"tags", l.Tags}, {"keys", l.Keys}}
	for _, f := range fields {
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("%s %q is not valid UTF-8: an export cannot keep it byte for byte", f.name, f.value)
		}
	}
	names := make([]string, 0, len(l.Properties))
	for k := range l.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !utf8.ValidString(k) || !utf8.ValidString(l.Properties[k]) {
			return fmt.Errorf("property %q = %q is not valid UTF-8: an export cannot keep it byte for byte", k, l.Properties[k])
		}
	}
	return nil
}
