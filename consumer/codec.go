package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Codec decodes a message body into a value of the handler's type. It is the decode step of the typed
// handlers (HandleWith, dedup.HandleWith).
//
// Decode parses body into v, a non-nil pointer (the typed handlers pass a *T). It must not keep body or
// any slice of it after it returns: the body belongs to the message, which the client reuses. It returns
// an error when body cannot be decoded; the typed handlers dead-letter such a message at once with the
// error as its reason (no redelivery decodes it better). A Codec is called from many goroutines at once
// and must be safe for that.
type Codec interface {
	Decode(body []byte, v any) error
}

// CodecFunc adapts a function to a Codec: CodecFunc(f).Decode(body, v) is f(body, v). The same rules as
// Codec.Decode apply to f.
type CodecFunc func(body []byte, v any) error

// Decode calls f(body, v).
func (f CodecFunc) Decode(body []byte, v any) error { return f(body, v) }

// JSON is the Codec of JSON bodies (encoding/json), the default of the typed handlers (HandleJSON). Its
// zero value is ready to use and it holds no state.
//
// Fields of the body that the target type does not have are ignored, not refused: producers evolve, and a
// producer that adds a field must not break the consumers that do not know it yet. A leading UTF-8
// byte-order mark is skipped (RFC 8259 lets a parser ignore it, and some producers write one). Anything
// after the JSON value other than white space, an empty body, a body that is the JSON literal null, and a
// value of the wrong JSON type for a field are errors. null is refused because encoding/json would leave
// the target at its zero value without an error, and a handler would then apply an empty event (an order
// with no number) instead of the message going to the DLQ.
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
