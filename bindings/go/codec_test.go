package mcpwire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func decodeOne(t *testing.T, frame string) Message {
	t.Helper()
	msgs, batch, err := Decode(nil, []byte(frame))
	if err != nil || batch || len(msgs) != 1 {
		t.Fatalf("Decode(%s) = %v, %v, %v", frame, msgs, batch, err)
	}
	return msgs[0]
}

func TestDecodeEachKind(t *testing.T) {
	r := decodeOne(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
	if n, ok := r.ID.Int(); r.Kind != MessageRequest || !ok || n != 7 || r.Method != "tools/call" || string(r.Params) != `{"name":"x"}` || r.Result != nil {
		t.Fatalf("request: %+v", r)
	}
	n := decodeOne(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if n.Kind != MessageNotification || !n.ID.IsZero() || n.Params != nil || n.Method != "notifications/initialized" {
		t.Fatalf("notification: %+v", n)
	}
	ok := decodeOne(t, `{"id":"a\"b","result":[1,2],"jsonrpc":"2.0"}`)
	if raw, _ := ok.ID.Raw(); ok.Kind != MessageResponse || raw != `a\"b` || string(ok.Result) != "[1,2]" {
		t.Fatalf("response: %+v", ok)
	}
	if text, _ := ok.ID.Text(); text != `a"b` {
		t.Fatalf("string id text %q", text)
	}
	e := decodeOne(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no \u00e9","data":{"k":1}}}`)
	if e.Kind != MessageError || !e.ID.IsZero() || e.Code != -32601 || e.ErrorMessage != "no é" || string(e.Data) != `{"k":1}` || e.Reason != DecodeNone {
		t.Fatalf("error: %+v", e)
	}
	esc := decodeOne(t, `{"jsonrpc":"2.0","method":"p\u0069ng"}`)
	if esc.Method != "ping" {
		t.Fatalf("escaped method decoded to %q", esc.Method)
	}
}

func TestDecodeRefusals(t *testing.T) {
	p := decodeOne(t, `{"jsonrpc":"2.0","id":1,"method":"ping"`)
	if p.Kind != MessageParseError || p.Code != -32700 || p.Reason != DecodeUnexpectedEnd || p.Offset != 39 || !p.ID.IsZero() {
		t.Fatalf("parse error: %+v", p)
	}
	i := decodeOne(t, `{"jsonrpc":"1.0","id":9,"method":"ping"}`)
	if n, _ := i.ID.Int(); i.Kind != MessageInvalid || i.Code != -32600 || i.Reason != DecodeWrongVersion || n != 9 || i.Method != "" {
		t.Fatalf("invalid: %+v", i)
	}
	u := decodeOne(t, "{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}")
	if u.Kind != MessageParseError || u.Reason != DecodeInvalidUTF8 || u.Offset != 27 {
		t.Fatalf("bad UTF-8: %+v", u)
	}
	if m := decodeOne(t, ""); m.Kind != MessageParseError {
		t.Fatalf("empty frame: %+v", m)
	}
	if m := decodeOne(t, "[]"); m.Kind != MessageInvalid || m.Reason != DecodeEmptyBatch {
		t.Fatalf("empty batch: %+v", m)
	}
	// Shaped like a response: never to be answered, its id is one of the receiver's.
	r := decodeOne(t, `{"jsonrpc":"2.0","id":4,"result":{},"result":{}}`)
	if n, _ := r.ID.Int(); r.Kind != MessageInvalidResponse || r.Reason != DecodeDuplicateKey || n != 4 || r.Kind.String() != "invalid response" {
		t.Fatalf("invalid response: %+v", r)
	}
	if m := decodeOne(t, `{"id":4,"error":{"code":1,"message":"m"}}`); m.Kind != MessageInvalidResponse || m.Reason != DecodeMissingVersion {
		t.Fatalf("response without jsonrpc: %+v", m)
	}
	// A valid JSON-RPC notification MCP refuses (params an array): never answered either.
	n := decodeOne(t, `{"jsonrpc":"2.0","method":"x/y","params":[1,2]}`)
	if n.Kind != MessageInvalidNotification || n.Reason != DecodeParamsNotObject || n.Kind.String() != "invalid notification" {
		t.Fatalf("invalid notification: %+v", n)
	}
	// A request so shaped is still answered.
	if m := decodeOne(t, `{"jsonrpc":"2.0","id":1,"method":"x/y","params":[1,2]}`); m.Kind != MessageInvalid {
		t.Fatalf("invalid request: %+v", m)
	}
}

// A batch keeps its members in order, invalid ones included, also past the records Decode
// keeps on its stack; dst is appended to.
func TestDecodeBatches(t *testing.T) {
	for _, size := range []int{1, 3, decodeOnStack, decodeOnStack + 1, 100} {
		var b strings.Builder
		b.WriteByte('[')
		for i := range size {
			if i > 0 {
				b.WriteByte(',')
			}
			if i%3 == 1 {
				b.WriteString(`7`)
			} else {
				b.WriteString(`{"jsonrpc":"2.0","id":` + strings.Repeat("1", 1+i%5) + `,"result":{}}`)
			}
		}
		b.WriteByte(']')
		prior := []Message{{Kind: MessageNotification, Method: "kept"}}
		msgs, batch, err := Decode(prior, []byte(b.String()))
		if err != nil || !batch || len(msgs) != size+1 || msgs[0].Method != "kept" {
			t.Fatalf("size %d: %d messages, batch %v, %v", size, len(msgs), batch, err)
		}
		for i, m := range msgs[1:] {
			want := MessageResponse
			if i%3 == 1 {
				want = MessageInvalid
			}
			if m.Kind != want {
				t.Fatalf("size %d member %d: %v, want %v", size, i, m.Kind, want)
			}
			if want == MessageResponse {
				wantID, _ := strconv.ParseInt(strings.Repeat("1", 1+i%5), 10, 64)
				if n, _ := m.ID.Int(); n != wantID {
					t.Fatalf("size %d member %d: id %v, want %d", size, i, m.ID, wantID)
				}
			}
		}
	}
}

// A batch past the engine's limit (1024 members) is one refusal, not a message per member.
func TestDecodeRefusesABatchPastTheLimit(t *testing.T) {
	member := `{"jsonrpc":"2.0","method":"n"}`
	at := "[" + strings.TrimSuffix(strings.Repeat(member+",", 1024), ",") + "]"
	if msgs, batch, err := Decode(nil, []byte(at)); err != nil || !batch || len(msgs) != 1024 {
		t.Fatalf("1024 members: %d messages, batch %v, %v", len(msgs), batch, err)
	}
	past := "[" + member + "," + at[1:]
	m := decodeOne(t, past)
	if m.Kind != MessageInvalid || m.Reason != DecodeBatchTooLarge || m.Code != -32600 || m.Offset != 0 {
		t.Fatalf("1025 members: %+v", m)
	}
}

// Views alias the frame with their capacity cut, so appending to one does not write into it.
func TestDecodeViewsAreCappedSlicesOfTheFrame(t *testing.T) {
	frame := []byte(`{"jsonrpc":"2.0","id":1,"result":{"a":1},"x":0}`)
	msgs, _, _ := Decode(nil, frame)
	m := msgs[0]
	if &m.Result[0] != &frame[33] || cap(m.Result) != len(m.Result) {
		t.Fatalf("result is not a capped view: %q cap %d", m.Result, cap(m.Result))
	}
	_ = append(m.Result, 'Z')
	if !bytes.Equal(frame, []byte(`{"jsonrpc":"2.0","id":1,"result":{"a":1},"x":0}`)) {
		t.Fatalf("appending to a view changed the frame: %s", frame)
	}
}

// With a reused dst, a single message with an integer id and a common method allocates
// nothing.
func TestDecodeAllocatesNothingForTheUsualMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	frame := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo"}}`)
	dst := make([]Message, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		msgs, _, _ := Decode(dst[:0], frame)
		if len(msgs) != 1 || msgs[0].Method != "tools/call" {
			t.Fatal("decoded wrongly")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Decode", allocs)
	}
}

// checkDecoded holds what must be true of any Decode result: views inside the frame and
// themselves JSON, a kind's fields present, and anything accepted is JSON to encoding/json.
func checkDecoded(t *testing.T, frame []byte) {
	msgs, batch, err := Decode(nil, frame)
	if err != nil {
		t.Fatalf("Decode failed: %v", err)
	}
	if len(msgs) == 0 || (!batch && len(msgs) != 1) {
		t.Fatalf("%d messages, batch %v", len(msgs), batch)
	}
	inside := func(v []byte) bool {
		if v == nil {
			return true
		}
		if len(v) == 0 {
			return false
		}
		for i := range frame {
			if &frame[i] == &v[0] {
				return i+len(v) <= len(frame)
			}
		}
		return false
	}
	for _, m := range msgs {
		for _, v := range []json.RawMessage{m.Params, m.Result, m.Data} {
			if !inside(v) || (v != nil && !json.Valid(v)) {
				t.Fatalf("view %q is not JSON inside the frame", v)
			}
		}
		switch m.Kind {
		case MessageParseError:
			if batch || m.Code != -32700 || m.Reason == DecodeNone || m.Offset < 0 || m.Offset > len(frame) {
				t.Fatalf("parse error: %+v", m)
			}
		case MessageInvalid, MessageInvalidResponse, MessageInvalidNotification:
			if m.Code != -32600 || m.Reason < 100 {
				t.Fatalf("invalid: %+v", m)
			}
		case MessageRequest:
			if m.ID.IsZero() || (m.Params != nil && m.Params[0] != '{') {
				t.Fatalf("request: %+v", m)
			}
		case MessageNotification:
			if !m.ID.IsZero() {
				t.Fatalf("notification with an id: %+v", m)
			}
		case MessageResponse:
			if m.ID.IsZero() || m.Result == nil {
				t.Fatalf("response: %+v", m)
			}
		case MessageError:
		default:
			t.Fatalf("unknown kind %v", m.Kind)
		}
		if m.Kind != MessageParseError && !json.Valid(frame) {
			t.Fatalf("accepted as JSON, but encoding/json refuses it: %q", frame)
		}
	}
	// A single message's texts are what encoding/json reads from the same members.
	if m := msgs[0]; !batch && m.Kind >= MessageRequest && m.Kind <= MessageError {
		var env struct {
			Method *string
			Error  *struct{ Message string }
		}
		var exact map[string]json.RawMessage
		if json.Unmarshal(frame, &exact) != nil {
			t.Fatalf("accepted, but encoding/json cannot read it: %q", frame)
		}
		if raw, ok := exact["method"]; ok {
			_ = json.Unmarshal(raw, &env.Method)
			if env.Method == nil || *env.Method != m.Method {
				t.Fatalf("method %q, encoding/json reads %q", m.Method, raw)
			}
		}
		if raw, ok := exact["error"]; ok && m.Kind == MessageError {
			var errObj map[string]json.RawMessage
			_ = json.Unmarshal(raw, &errObj)
			var text string
			if json.Unmarshal(errObj["message"], &text) != nil || text != m.ErrorMessage {
				t.Fatalf("error message %q, encoding/json reads %q", m.ErrorMessage, errObj["message"])
			}
		}
	}
}

func TestDecodeOnTheCorpora(t *testing.T) {
	for _, c := range []corpus{smallCorpus(), mixedCorpus()} {
		kinds := map[MessageKind]int{}
		for line := range bytes.Lines(c.bytes) {
			line = bytes.TrimSuffix(line, []byte("\n"))
			checkDecoded(t, line)
			msgs, _, _ := Decode(nil, line)
			kinds[msgs[0].Kind]++
		}
		if kinds[MessageParseError]+kinds[MessageInvalid] != 0 || kinds[MessageRequest] == 0 || kinds[MessageResponse] == 0 {
			t.Fatalf("kinds over the corpus: %v", kinds)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"","method":"","params":{}}`,
		`[{"jsonrpc":"2.0","id":"x","result":null},3]`,
		`{"jsonrpc":"2.0","error":{"code":1,"message":"m\n","data":[]}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
		"{\"a\":\"\xc3\x28\"}",
		`{"jsonrpc":"2.0","method":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude80\u0000z"}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"caf\u00E9 \"x\" \ud83d\ude80"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		checkDecoded(t, frame)
	})
}

// unescape decodes every escape itself (no fallback to encoding/json on validated text) and
// reads what encoding/json reads.
func TestUnescapeAgreesWithEncodingJSON(t *testing.T) {
	for _, wire := range []string{
		``, `plain`, `a\"b`, `\\\/\b\f\n\r\t`, `\u00e9\u00E9`, `\u0000`, `\ud83d\ude80 rocket`,
		`\uD83D\uDE80`, `日本語 \u65e5`, `end\\`,
	} {
		got, ok := unescape([]byte(wire))
		var want string
		if err := json.Unmarshal([]byte(`"`+wire+`"`), &want); err != nil {
			t.Fatalf("%q: %v", wire, err)
		}
		if !ok || got != want {
			t.Fatalf("unescape(%q) = %q, %v; encoding/json: %q", wire, got, ok, want)
		}
	}
	// What the engine would have refused is handed back, not guessed at.
	for _, wire := range []string{`\`, `\x`, `\u12`, `\ud83d`, `\ud83dx`, `\ud83d\u0041`} {
		if got, ok := unescape([]byte(wire)); ok {
			t.Fatalf("unescape(%q) = %q, true", wire, got)
		}
	}
}
