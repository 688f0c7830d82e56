package console

import (
	"html/template"
	"net/url"
	"time"
)

// templateFuncs are the templates' helpers.
func templateFuncs() template.FuncMap {
	return template.FuncMap{
		// lettersURL and letterURL link a group's list and one of its letters.
		"lettersURL": func(group string) string { return "/groups/" + url.PathEscape(group) + "/letters" },
		"letterURL": func(group, storeID string) string {
			return "/groups/" + url.PathEscape(group) + "/letters/" + url.PathEscape(storeID)
		},
		"replayURL":     func(group string) string { return "/groups/" + url.PathEscape(group) + "/replay" },
		"replayPageURL": replayPageURL,
		// utc formats a time in UTC, RFC 3339.
		"utc": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format(time.RFC3339)
		},
		// orDash shows "" as a dash.
		"orDash": func(s string) string {
			if s == "" {
				return "—"
			}
			return s
		},
	}
}

// replayPageURL is the progress (then result) page of replay id of group.
func replayPageURL(group, id string) string {
	return "/groups/" + url.PathEscape(group) + "/replays/" + url.PathEscape(id)
}
