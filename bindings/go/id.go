package mcpwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// RequestID identifies one of our own requests: the id Conn.Request returned, carried by the
// events that answer it.
type RequestID int64

// ID is a JSON-RPC request id of the peer's: an integer or a string, never equal to each
// other (IntID(7) != StringID("7")). IDs are comparable and can key a map.
//
// A string id is kept in its wire form, the exact bytes between the quotes (escapes and
// all), so answering with the ID an event carried echoes it byte for byte; a cancellation
// names the request as the request did, whatever escapes the cancel used. IDs are equal when
// their wire forms are: json.Marshal escapes <, > and & in every string it writes (MarshalJSON
// included), so such an id comes back from a json.Marshal/Unmarshal round trip with other
// escapes, a different map key (answering with it still works: the engine matches ids as
// JSON). Use a json.Encoder with SetEscapeHTML(false) to keep ids byte for byte.
type ID struct {
	kind idKind
	num  int64
	wire string
}

type idKind uint8

const (
	idNone idKind = iota
	idInt
	idString
)

// IntID is the integer id n.
func IntID(n int64) ID { return ID{kind: idInt, num: n} }

// StringID is the string id with the text s (escaped into its wire form here).
func StringID(s string) ID { return ID{kind: idString, wire: escapeJSON(s)} }

// RawStringID is the string id whose wire form (the JSON string text between the quotes) is
// wire. The library refuses wire text that is not valid JSON string content.
func RawStringID(wire string) ID { return ID{kind: idString, wire: wire} }

// IsZero reports whether there is no id (events that carry none).
func (id ID) IsZero() bool { return id.kind == idNone }

// IsInt reports whether the id is an integer.
func (id ID) IsInt() bool { return id.kind == idInt }

// IsString reports whether the id is a string.
func (id ID) IsString() bool { return id.kind == idString }

// Int returns the integer id, and false for a string id or no id.
func (id ID) Int() (int64, bool) { return id.num, id.kind == idInt }

// Raw returns a string id's wire form (escapes kept), and false for an integer id or no id.
func (id ID) Raw() (string, bool) { return id.wire, id.kind == idString }

// Text returns a string id's decoded text, and false for an integer id or no id.
func (id ID) Text() (string, bool) {
	if id.kind != idString {
		return "", false
	}
	var s string
	if err := json.Unmarshal([]byte(`"`+id.wire+`"`), &s); err != nil {
		return id.wire, true
	}
	return s, true
}

// String is the id as JSON: 7 or "seven" (and "<none>" for no id).
func (id ID) String() string {
	switch id.kind {
	case idInt:
		return strconv.FormatInt(id.num, 10)
	case idString:
		return `"` + id.wire + `"`
	default:
		return "<none>"
	}
}

// MarshalJSON writes the id as JSON.
func (id ID) MarshalJSON() ([]byte, error) {
	if id.kind == idNone {
		return []byte("null"), nil
	}
	return []byte(id.String()), nil
}

// UnmarshalJSON reads an id written by MarshalJSON (or by any JSON-RPC peer): an integer, a
// string (kept in its wire form, so it is answered byte for byte), or null for no id. Use it
// to keep the ids of requests to answer later in JSON (a database, a queue). Anything else,
// a fraction or an integer out of int64's range included, is an error.
func (id *ID) UnmarshalJSON(b []byte) error {
	text := string(bytes.TrimSpace(b))
	switch {
	case text == "null":
		*id = ID{}
		return nil
	case len(text) >= 2 && text[0] == '"' && text[len(text)-1] == '"':
		var check string
		if err := json.Unmarshal([]byte(text), &check); err != nil {
			return fmt.Errorf("mcpwire: an id: %w", err)
		}
		*id = RawStringID(text[1 : len(text)-1])
		return nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return fmt.Errorf("mcpwire: an id must be an integer, a string or null: %q", text)
	}
	*id = IntID(n)
	return nil
}

// escapeJSON returns s as JSON string content (no quotes): only what JSON requires is
// escaped, so non-ASCII text stays as it is.
func escapeJSON(s string) string {
	const hex = "0123456789abcdef"
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
