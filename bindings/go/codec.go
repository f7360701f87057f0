package mcpwire

/*
// The frame and the records on Decode's stack: C keeps no pointer to them, and calls no Go
// code.
#cgo noescape mcpwgo_decode
#cgo nocallback mcpwgo_decode
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MessageKind says what a Message from Decode holds.
type MessageKind uint8

// The kinds of Message.
const (
	// MessageRequest: ID, Method and Params (nil when absent).
	MessageRequest MessageKind = 1
	// MessageNotification: Method and Params (nil when absent).
	MessageNotification MessageKind = 2
	// MessageResponse: ID and Result.
	MessageResponse MessageKind = 3
	// MessageError: ID (zero when the peer sent null), Code, ErrorMessage and Data (nil when
	// absent).
	MessageError MessageKind = 4
	// MessageParseError: the frame is not JSON and is refused whole. Code is -32700, the code
	// to answer with; Reason and Offset say what and where.
	MessageParseError MessageKind = 5
	// MessageInvalid: JSON, but not a valid JSON-RPC message (a whole frame, or one member of
	// a batch). Code is -32600, the code to answer with; Reason and Offset say what and where;
	// ID is the message's id when it could be read (answer with it, else with null). A frame
	// shaped like a response is MessageInvalidResponse instead.
	MessageInvalid MessageKind = 6
	// MessageInvalidResponse: JSON shaped like a response (a result or error member and no
	// method) that is not a valid one. Never answer it: its ID is one of your own request
	// ids, and an error sent back with it would be taken by the peer for the answer to its
	// request of that id. Code (-32600, for logs), Reason, Offset and ID as for
	// MessageInvalid.
	MessageInvalidResponse MessageKind = 7
	// MessageInvalidNotification: a valid JSON-RPC notification that only MCP's rules refuse
	// (its params an array, where MCP wants an object, or a member named as a JSON-RPC one but
	// for its case, such as "Id"). Never answer it: JSON-RPC forbids replying
	// to a notification; log it. Code (-32600, for logs), Reason and Offset as for
	// MessageInvalid.
	MessageInvalidNotification MessageKind = 8
)

// String names the kind.
func (k MessageKind) String() string {
	switch k {
	case MessageRequest:
		return "request"
	case MessageNotification:
		return "notification"
	case MessageResponse:
		return "response"
	case MessageError:
		return "error"
	case MessageParseError:
		return "parse error"
	case MessageInvalid:
		return "invalid"
	case MessageInvalidResponse:
		return "invalid response"
	case MessageInvalidNotification:
		return "invalid notification"
	}
	return "unknown"
}

// Message is one JSON-RPC message decoded by Decode, or why it was refused. Kind says which
// fields mean something; the others are zero.
//
// Params, Result and Data are views into the frame given to Decode (their capacity ends
// where they end, so appending to one copies): they stay valid while the frame is unchanged.
// Method and ErrorMessage are strings of their own, with escapes decoded; a string ID keeps
// its wire form, as everywhere in this package (ID.Text decodes it).
type Message struct {
	Kind         MessageKind
	ID           ID
	Method       string
	Params       json.RawMessage
	Result       json.RawMessage
	Code         int64
	ErrorMessage string
	Data         json.RawMessage
	// Reason and Offset (in bytes into the frame) say why a message was refused.
	Reason DecodeReason
	Offset int
}

// decodeOnStack is how many messages one Decode call reads without allocating records on
// the heap: a single message. A batch (2025-03-26 only, and rare) takes a second call with
// room for every member; more records here would be zeroed on every call, for nothing.
const decodeOnStack = 1

// Decode applies the engine's JSON-RPC rules to one frame (a stdio line without its
// newline, or an HTTP body) without a connection, and appends its messages to dst: one for
// a single message, one per member for a batch (batch is then true). A frame refused whole
// is one Message of kind MessageParseError, MessageInvalid, MessageInvalidResponse or
// MessageInvalidNotification (answer only MessageParseError and MessageInvalid), never an
// error: err is only a failure of the library itself.
//
// Use it where a connection would be too much: a proxy or gateway that routes by method or
// id, a log, a test that checks what a peer sent. To run the protocol (answer requests,
// correlate responses, negotiate), feed a Conn or an HTTPServer instead. Pass a reused dst
// (dst[:0]) to decode without allocating: only string ids, method names other than the
// common ones, and error messages are allocated.
func Decode(dst []Message, frame []byte) (msgs []Message, batch bool, err error) {
	var onStack [decodeOnStack]C.mcpwgo_message
	recs := onStack[:]
	d := C.mcpwgo_decode((*C.uint8_t)(bytesPtr(frame)), C.size_t(len(frame)), &recs[0], C.size_t(len(recs)))
	if d.rc == C.MCPW_OK && int(d.count) > len(recs) {
		// A batch larger than the records on the stack: again, with room for every member.
		recs = make([]C.mcpwgo_message, int(d.count))
		d = C.mcpwgo_decode((*C.uint8_t)(bytesPtr(frame)), C.size_t(len(frame)), &recs[0], C.size_t(len(recs)))
	}
	runtime.KeepAlive(frame)
	if err := check("decode", d.rc); err != nil {
		return dst, false, err
	}
	n := min(int(d.count), len(recs))
	for i := range n {
		dst = append(dst, decodedMessage(frame, &recs[i]))
	}
	return dst, d.batch != 0, nil
}

// decodedMessage builds a Message from one record of mcpwgo_decode.
func decodedMessage(frame []byte, r *C.mcpwgo_message) Message {
	view := func(which int) []byte {
		if r.len[which] < 0 {
			return nil
		}
		at, n := int(r.off[which]), int(r.len[which])
		return frame[at : at+n : at+n]
	}
	m := Message{Kind: MessageKind(r.kind), Code: int64(r.code), Reason: DecodeReason(r.reason), Offset: int(r.offset)}
	switch r.id_kind {
	case C.MCPW_ID_INT:
		m.ID = IntID(int64(r.id_int))
	case C.MCPW_ID_STRING:
		m.ID = RawStringID(string(view(0)))
	}
	if method := view(1); method != nil {
		m.Method = wireText(method, r.escaped&1 != 0)
	}
	m.Params = view(2)
	m.Result = view(3)
	if message := view(4); message != nil {
		m.ErrorMessage = wireText(message, r.escaped&2 != 0)
	}
	m.Data = view(5)
	return m
}

// wireText is the text of a JSON string's wire form (the bytes between its quotes, which the
// engine has validated), common method names without allocating.
func wireText(wire []byte, escaped bool) string {
	if !escaped {
		if s, ok := interned(wire); ok {
			return s
		}
		return string(wire)
	}
	if s, ok := unescape(wire); ok {
		return s
	}
	quoted := make([]byte, 0, len(wire)+2)
	quoted = append(append(append(quoted, '"'), wire...), '"')
	s, _ := String(quoted) // never reached on text the engine validated
	return s
}

// unescape decodes the escapes of a JSON string's wire form that the engine validated
// (well-formed escapes, paired surrogates, valid UTF-8): one pass and one allocation, where
// encoding/json takes several of each. On anything else it answers false, and the caller
// asks encoding/json.
func unescape(wire []byte) (string, bool) {
	var b strings.Builder
	b.Grow(len(wire))
	for i := 0; i < len(wire); {
		c := wire[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(wire) {
			return "", false
		}
		switch wire[i+1] {
		case '"', '\\', '/':
			b.WriteByte(wire[i+1])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(wire[i+2:])
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				low, ok := hex4(wire[min(i+8, len(wire)):])
				if !ok || i+7 >= len(wire) || wire[i+6] != '\\' || wire[i+7] != 'u' {
					return "", false
				}
				if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			b.WriteRune(r)
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// hex4 reads the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
