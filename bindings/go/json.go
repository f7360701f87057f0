package mcpwire

/*
// The key and result arrays of Members live on its stack: C keeps no pointer to them, and
// calls no Go code.
#cgo noescape mcpwgo_json_members
#cgo nocallback mcpwgo_json_members
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"strconv"
	"unsafe"
)

// Members returns the raw JSON text of several members of the JSON object obj, in the order
// of keys (nil for an absent one), as slices of obj. Use it instead of several Member calls
// when a handler reads more than one member of the same object, such as a tool call's "name"
// and "arguments": obj is validated and read once, not once per key. At most 64 keys (more is
// ErrInvalidArgument); the other errors are Member's, and ErrDuplicateKey concerns only the
// keys asked for.
func Members(obj json.RawMessage, keys ...string) ([]json.RawMessage, error) {
	if len(keys) > 64 {
		return nil, ErrInvalidArgument
	}
	var joinedBuf [256]byte
	joined := joinedBuf[:0]
	var keyLens, offs, lens [64]C.size_t
	for i, k := range keys {
		joined = append(joined, k...)
		keyLens[i] = C.size_t(len(k))
	}
	rc := C.mcpwgo_json_members(cBytes(obj), C.size_t(len(obj)), cBytes(joined), &keyLens[0],
		C.size_t(len(keys)), &offs[0], &lens[0])
	runtime.KeepAlive(obj)
	if err := check("json members", rc); err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(keys))
	for i := range keys {
		if offs[i] == ^C.size_t(0) {
			continue
		}
		off, n := int(offs[i]), int(lens[i])
		if off < 0 || n < 0 || off+n > len(obj) {
			return nil, ErrInvalidJSON // never: the engine's views lie inside obj
		}
		out[i] = obj[off : off+n : off+n]
	}
	return out, nil
}

// Member returns the raw JSON text of member key of the JSON object obj, as a slice of obj
// (nothing is copied), or nil when obj has no such member. Use it to read one field of raw
// params, such as a tool call's "arguments", instead of decoding the whole object with
// encoding/json: a 2026-07-28 request's params also carry the protocol's _meta, which
// json.Unmarshal would walk too. The engine validates obj on each call; the errors are
// ErrInvalidJSON (obj is not JSON), ErrInvalidUTF8, ErrJSONWrongType (obj is not an object)
// and ErrDuplicateKey (key appears twice). Keys are compared after decoding escapes.
func Member(obj json.RawMessage, key string) (json.RawMessage, error) {
	m := C.mcpwgo_json_member(cBytes(obj), C.size_t(len(obj)), cString(key), C.size_t(len(key)))
	runtime.KeepAlive(obj)
	runtime.KeepAlive(key)
	if err := check("json member", m.rc); err != nil {
		return nil, err
	}
	if m.has == 0 {
		return nil, nil
	}
	off, n := int(m.off), int(m.len)
	if off < 0 || n < 0 || off+n > len(obj) {
		return nil, ErrInvalidJSON // never: the engine's view lies inside obj
	}
	return obj[off : off+n : off+n], nil
}

// String reads raw, one JSON value such as Member and Members return, as a JSON string:
// its text, and ok false when raw is anything else (a number, an object, null, malformed
// text). Use it for the string members of params, a tool's name, say, instead of
// json.Unmarshal into a string, which goes through reflection. It answers exactly as
// json.Unmarshal does (escapes decoded; invalid UTF-8 replaced by U+FFFD). A string of plain
// ASCII without escapes, the usual name, is read in one pass and costs one allocation, the
// copy; any other is handed to encoding/json.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		inner := raw[1 : len(raw)-1]
		plain := true
		for _, b := range inner {
			if b == '"' || b == '\\' || b < 0x20 || b >= 0x80 {
				plain = false // escapes, and UTF-8 to check: encoding/json's way below
				break
			}
		}
		if plain {
			return string(inner), true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !isJSONString(raw) {
		return "", false
	}
	return s, true
}

// isJSONString reports whether raw, once json.Unmarshal took it as a string, was one (and not
// null, which Unmarshal accepts into a string and leaves it unchanged).
func isJSONString(raw json.RawMessage) bool {
	i := skipSpace(raw, 0)
	return i < len(raw) && raw[i] == '"'
}

// Float reads raw, one JSON value such as Member and Members return, as a JSON number: its
// value as a float64, and ok false when raw is anything else or does not fit a float64.
// Use it for the number members of params (a tool's numeric arguments) instead of
// json.Unmarshal into a float64, which goes through reflection; it answers exactly as that
// does, and allocates nothing.
func Float(raw json.RawMessage) (float64, bool) {
	text := trimJSONSpace(raw)
	if f, ok := shortInteger(text); ok {
		return f, true
	}
	if !isJSONNumber(text) {
		return 0, false
	}
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(text), len(text)), 64)
	return f, err == nil
}

// shortInteger reads b when it is a JSON integer of at most 15 digits (the usual numeric
// argument), which a float64 holds exactly, without strconv: the value ParseFloat would
// give, -0 included. ok is false for anything else, which Float reads the general way.
func shortInteger(b []byte) (float64, bool) {
	digits := b
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	f := float64(n)
	if neg {
		f = -f
	}
	return f, true
}

// trimJSONSpace cuts JSON whitespace from both ends of b.
func trimJSONSpace(b []byte) []byte {
	b = b[skipSpace(b, 0):]
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// isJSONNumber reports whether b is exactly a JSON number (RFC 8259 section 6): an optional
// minus, an integer part without leading zeros, an optional fraction, an optional exponent.
func isJSONNumber(b []byte) bool {
	i := 0
	digits := func() int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
