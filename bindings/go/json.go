package mcpwire

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
)

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
