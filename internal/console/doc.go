// Package console is the operator's DLQ web page behind `rmqguard console`: an http.Handler (New) that shows
// the configured consumer groups, their dead letters and one letter, and replays selected letters. It is a
// face on internal/dlqtool, never a second engine: letters are read with dlqtool.Scan (every master broker),
// their status with dlqtool.Statuses, depths with dlqtool.TakeCensus, and replays run dlqtool.Replay (a dry
// run for the preview, then the real one, claimed in the audit first, so a replay twice sends nothing twice).
//
// # Pages
//
//   - GET / : each group with its DLQ depth (letters, waiting), duplicate ratio (the recording rule
//     rmqguard:duplicate_ratio:rate5m, when a Prometheus URL is configured) and parked outbox rows (when the
//     outbox table exists).
//   - GET /groups/{group}/letters : the letters, filtered (reason substring, event type, origin topic,
//     since/until, replay status) and paged (pageSize per page), each with a checkbox.
//   - GET /groups/{group}/letters/{id} : one letter by store ID: properties, body (JSON pretty-printed, else a
//     hex dump), reason, attempts, origin, its audit row and whether its event is processed.
//   - POST /groups/{group}/replay/preview : the engine's dry run of the selected letters; its confirm form
//     posts the letters that would be sent to POST /groups/{group}/replay, which starts their replay in the
//     background (stopped by New's context) and redirects to GET /groups/{group}/replays/{replay ID}: the
//     counts so far, reloading itself every progressRefresh seconds, then sent / skipped / failed per letter.
//     The console keeps the last maxRuns replays in memory.
//   - GET /groups/{group}/letters/{id}/edit : the letter's body (pretty JSON) in a text field, posted to
//     POST …/edit/preview (the diff and dlqtool.ReplayEdited's dry run) and confirmed to POST …/edit (the
//     send; the result or the refusal, 409, and why). CRLF line ends are sent as LF. A body equal to the
//     letter's (as JSON, white space aside), a binary body or a superseded letter is refused. A superseded
//     letter offers no replay, edit or checkbox.
//
// Only the configured groups are served (404 otherwise). A scan that is incomplete shows its problems above
// what it read. Pages work without JavaScript; every form, input and table has a stable id.
//
// # Safety
//
// Every request but /login and /static/ needs the access token: an `Authorization: Bearer` header, or the
// session cookie that POST /login (the token in a form) or a Bearer request sets (HttpOnly,
// SameSite=Strict, kept sessionTTL in memory). The token is compared in constant time and never logged.
// Without it the answer is 401 with the login form. Every POST but /login needs the session's CSRF token in
// the form field "csrf" (403 otherwise). ReadOnly hides replay and edit and answers their pages 403. Every
// answer carries Content-Security-Policy default-src 'self', X-Frame-Options DENY, nosniff, no-referrer and
// no-store.
package console
