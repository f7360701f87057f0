package mcpwire

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
)

// MembersUnchecked is Members for text already known to be valid JSON: an event's Params,
// Result or Data, which the engine validated before handing them over, or a member read from
// one of those. Use it in tool handlers on the request's params and arguments: it reads obj
// in Go, with no call into the engine and no second validation: about 70 ns against
// Members' 115 on a usual tool call's params (BenchmarkMembers). On valid JSON it answers as
// Members does: the same views, ErrJSONWrongType when obj is not an object, ErrDuplicateKey
// when a key asked for appears twice, keys compared after decoding escapes, at most 64 keys
// (more is ErrInvalidArgument).
// On other text it never panics, but what it returns is unspecified: use Members for text
// from anywhere else. Empty text is ErrInvalidJSON, as for Members: the Params of a request
// sent without params are nil, so tell "no params" apart first where a method allows it.
// AppendMembersUnchecked does the same without allocating.
func MembersUnchecked(obj json.RawMessage, keys ...string) ([]json.RawMessage, error) {
	out, err := AppendMembersUnchecked(make([]json.RawMessage, 0, len(keys)), obj, keys...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendMembersUnchecked is MembersUnchecked appending the views to dst, one per key, and
// returning the extended slice; on an error it returns dst as it came. Use it where a
// handler runs for every request: with room in dst, a small array on the caller's stack,
// it allocates nothing, where MembersUnchecked allocates its result.
//
//	var buf [2]json.RawMessage
//	m, err := mcpwire.AppendMembersUnchecked(buf[:0], req.Params, "name", "arguments")
func AppendMembersUnchecked(dst []json.RawMessage, obj json.RawMessage, keys ...string) ([]json.RawMessage, error) {
	if len(keys) > 64 {
		return dst, ErrInvalidArgument
	}
	i := skipSpace(obj, 0)
	if i >= len(obj) {
		return dst, ErrInvalidJSON
	}
	if obj[i] != '{' {
		return dst, ErrJSONWrongType
	}
	given := len(dst)
	dst = append(dst, make([]json.RawMessage, len(keys))...)
	out := dst[given:]
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return finish(dst, given, trailing(obj, i+1))
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return dst[:given], ErrInvalidJSON
		}
		open := i
		end, escaped := stringEnd(obj, open+1)
		if end < 0 {
			return dst[:given], ErrInvalidJSON
		}
		i = skipSpace(obj, end+1)
		if i >= len(obj) || obj[i] != ':' {
			return dst[:given], ErrInvalidJSON
		}
		start := skipSpace(obj, i+1)
		stop := valueEnd(obj, start)
		if stop <= start {
			return dst[:given], ErrInvalidJSON
		}
		key := obj[open+1 : end]
		decoded, haveDecoded := "", false
		for k, want := range keys {
			var match bool
			if escaped {
				if !haveDecoded {
					decoded, _ = String(obj[open : end+1])
					haveDecoded = true
				}
				match = decoded == want
			} else {
				match = string(key) == want
			}
			if match {
				if out[k] != nil {
					return dst[:given], ErrDuplicateKey
				}
				out[k] = obj[start:stop:stop]
			}
		}
		i = skipSpace(obj, stop)
		switch {
		case i < len(obj) && obj[i] == ',':
			i = skipSpace(obj, i+1)
		case i < len(obj) && obj[i] == '}':
			return finish(dst, given, trailing(obj, i+1))
		default:
			return dst[:given], ErrInvalidJSON
		}
	}
}

// finish returns dst when err is nil, else dst cut back to its given length.
func finish(dst []json.RawMessage, given int, err error) ([]json.RawMessage, error) {
	if err != nil {
		return dst[:given], err
	}
	return dst, nil
}

// trailing is nil when only whitespace follows position i of b.
func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return ErrInvalidJSON
	}
	return nil
}

// skipSpace returns the first position from i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringEnd returns the position of the quote that closes the string whose text starts at
// from, and whether the string holds escapes; -1 when it does not close. It reads eight bytes
// at a time, looking for the first quote or backslash among them.
func stringEnd(b []byte, from int) (int, bool) {
	escaped := false
	j := from
	for j < len(b) {
		if len(b)-j >= 8 {
			x := binary.LittleEndian.Uint64(b[j:])
			m := zeroBytes(x^quotes) | zeroBytes(x^backslashes)
			if m == 0 {
				j += 8
				continue
			}
			j += bits.TrailingZeros64(m) / 8
		}
		switch b[j] {
		case '"':
			return j, escaped
		case '\\':
			escaped = true
			j += 2 // the backslash and the byte it escapes
		default:
			j++
		}
	}
	return -1, false
}

const (
	quotes      = 0x2222222222222222 // '"' in every byte
	backslashes = 0x5c5c5c5c5c5c5c5c // '\\' in every byte
	lows        = 0x0101010101010101
	highs       = 0x8080808080808080
)

// zeroBytes sets the high bit of the lowest zero byte of x, and possibly of bytes above it,
// but of no byte below it: its lowest set bit marks the first zero byte.
func zeroBytes(x uint64) uint64 {
	return (x - lows) &^ x & highs
}

// valueEnd returns the position just after the JSON value that starts at i, reading valid
// text without checking it; at most len(b), and -1 for a string or container that does not
// close.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i+1)
		if end < 0 {
			return -1
		}
		return end + 1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j+1)
				if end < 0 {
					return -1
				}
				j = end
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}
