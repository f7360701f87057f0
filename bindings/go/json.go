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
