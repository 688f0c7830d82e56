package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Codec decodes a message body into a value of the handler's type (the typed handlers' decode step).
// Decode parses body into v, a non-nil pointer; it must not keep body, must be safe for concurrent use, and
// returns an error when body cannot be decoded (the message is dead-lettered at once).
type Codec interface {
	Decode(body []byte, v any) error
}

// JSON is the Codec of JSON bodies (encoding/json), the typed handlers' default; its zero value is ready.
// Unknown fields are ignored and a leading BOM skipped; trailing data, an empty body, null and a value of
// the wrong type are errors. See the package doc, "JSON".
type JSON struct{}

// utf8BOM is the UTF-8 byte-order mark.
const utf8BOM = "\uFEFF"

// errJSONNull is the error of a body that is the JSON literal null.
var errJSONNull = errors.New("the body is JSON null, not a value")

// Decode parses body into v with json.Unmarshal after dropping a leading UTF-8 byte-order mark; json.Unmarshal
// does not keep body. A body that is null (white space around it allowed) is an error, and v is left as it is.
func (JSON) Decode(body []byte, v any) error {
	body = bytes.TrimPrefix(body, []byte(utf8BOM))
	if string(bytes.TrimSpace(body)) == "null" {
		return errJSONNull
	}
	return json.Unmarshal(body, v)
}
