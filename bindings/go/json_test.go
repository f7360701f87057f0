package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMemberFindsOneFieldOfRawJSON(t *testing.T) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi, \"you\""},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"caf\u00e9":[1, 2]}`)
	cases := []struct {
		key, want string
	}{
		{"name", `"echo"`},
		{"arguments", `{"text":"hi, \"you\""}`},
		{"_meta", `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`},
		{"café", `[1, 2]`}, // compared after decoding the escape
		{"missing", ``},
		{"text", ``}, // members of members are not members
	}
	for _, c := range cases {
		got, err := Member(params, c.key)
		if err != nil {
			t.Fatalf("Member(%q): %v", c.key, err)
		}
		if string(got) != c.want || (c.want == "") != (got == nil) {
			t.Errorf("Member(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	// The value views params: appending to it must not overwrite what follows.
	args, _ := Member(params, "arguments")
	_ = append(args, 'x')
	if again, _ := Member(params, "_meta"); again == nil {
		t.Fatal("appending to a member changed the object")
	}
}

func TestMemberRefusesWhatIsNotOneObject(t *testing.T) {
	cases := []struct {
		obj  string
		want error
	}{
		{`{"a":1,"a":2}`, ErrDuplicateKey},
		{`[1,2]`, ErrJSONWrongType},
		{`"a"`, ErrJSONWrongType},
		{`{"a":}`, ErrInvalidJSON},
		{``, ErrInvalidJSON},
		{"{\"a\":\"\xff\"}", ErrInvalidUTF8},
	}
	for _, c := range cases {
		got, err := Member(json.RawMessage(c.obj), "a")
		if got != nil || !errors.Is(err, c.want) {
			t.Errorf("Member(%q) = %q, %v; want %v", c.obj, got, err, c.want)
		}
	}
}

func TestMembersFindsSeveralFieldsInOnePass(t *testing.T) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi, \"you\""},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"caf\u00e9":[1, 2]}`)
	keys := []string{"arguments", "missing", "café", "name", "text", "name"}
	want := []string{`{"text":"hi, \"you\""}`, ``, `[1, 2]`, `"echo"`, ``, `"echo"`}
	got, err := Members(params, keys...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d values for %d keys", len(got), len(keys))
	}
	for i, k := range keys {
		if string(got[i]) != want[i] || (want[i] == "") != (got[i] == nil) {
			t.Errorf("Members(%q)[%d] = %q, want %q", k, i, got[i], want[i])
		}
		// Each agrees with Member, which validates on its own.
		one, err := Member(params, k)
		if err != nil || string(one) != string(got[i]) {
			t.Errorf("Member(%q) = %q, %v; Members gave %q", k, one, err, got[i])
		}
	}
	// A long key list spills past the stack buffer and still matches.
	long := strings.Repeat("k", 300)
	obj := json.RawMessage(`{"` + long + `":true,"a":1}`)
	if got, err := Members(obj, "a", long); err != nil || string(got[0]) != "1" || string(got[1]) != "true" {
		t.Errorf("Members with a 300-byte key = %q, %v", got, err)
	}
	if got, err := Members(params); err != nil || len(got) != 0 {
		t.Errorf("Members with no key = %q, %v", got, err)
	}
	// Reading two members allocates only the result slice.
	if n := testing.AllocsPerRun(100, func() { _, _ = Members(params, "name", "arguments") }); n > 1 {
		t.Errorf("Members allocates %v times per call, want 1", n)
	}
}

func TestMembersRefusesWhatMemberRefuses(t *testing.T) {
	cases := []struct {
		obj  string
		keys []string
		want error
	}{
		{`{"a":1,"a":2}`, []string{"b", "a"}, ErrDuplicateKey},
		{`[1,2]`, []string{"a"}, ErrJSONWrongType},
		{`{"a":}`, []string{"a"}, ErrInvalidJSON},
		{``, []string{"a"}, ErrInvalidJSON},
		{"{\"a\":\"\xff\"}", []string{"a"}, ErrInvalidUTF8},
		{`{}`, []string{"\xff"}, ErrInvalidUTF8},
		{`{}`, make([]string, 65), ErrInvalidArgument},
	}
	for _, c := range cases {
		got, err := Members(json.RawMessage(c.obj), c.keys...)
		if got != nil || !errors.Is(err, c.want) {
			t.Errorf("Members(%q) = %q, %v; want %v", c.obj, got, err, c.want)
		}
	}
	// A key repeated in the object but not asked for is no error.
	if got, err := Members(json.RawMessage(`{"b":1,"b":2,"a":3}`), "a"); err != nil || string(got[0]) != "3" {
		t.Errorf("Members = %q, %v", got, err)
	}
}

// FuzzMembers: Members(obj, k1, k2, k1) agrees with one Member call per key: the same views
// (the same bytes of obj) when every call succeeds, else one of their errors (or
// ErrInvalidUTF8 for a key that is not UTF-8: Members checks the keys before the text).
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"name":"echo","arguments":{"text":"hi"}}`), "name", "arguments")
	f.Add([]byte(`{"a":1,"a":2,"b":3}`), "b", "a")
	f.Add([]byte(`{"caf\u00e9":[1, 2],"x":{"y":null}}`), "café", "y")
	f.Add([]byte(`[1,2]`), "a", "")
	f.Add([]byte("{\"a\":\"\xff\"}"), "a", "\xff")
	f.Fuzz(func(t *testing.T, obj []byte, k1, k2 string) {
		keys := []string{k1, k2, k1}
		got, err := Members(obj, keys...)
		var errs []error
		views := make([]json.RawMessage, len(keys))
		for i, k := range keys {
			v, e := Member(obj, k)
			if e != nil {
				errs = append(errs, e)
			}
			views[i] = v
		}
		if len(errs) == 0 {
			if err != nil {
				t.Fatalf("Members failed (%v) where every Member succeeded", err)
			}
			for i := range keys {
				if string(got[i]) != string(views[i]) || (got[i] == nil) != (views[i] == nil) {
					t.Fatalf("key %q: Members %q, Member %q", keys[i], got[i], views[i])
				}
				if len(got[i]) > 0 && &got[i][0] != &views[i][0] {
					t.Fatalf("key %q: Members and Member view different bytes", keys[i])
				}
			}
			return
		}
		if err == nil || got != nil {
			t.Fatalf("Members = %q, %v where Member failed with %v", got, err, errs)
		}
		for _, e := range errs {
			if errors.Is(err, e) {
				return
			}
		}
		if !errors.Is(err, ErrInvalidUTF8) || (utf8.ValidString(k1) && utf8.ValidString(k2)) {
			t.Fatalf("Members failed with %v, Member with %v", err, errs)
		}
	})
}

// String and Float answer as encoding/json does for a string or a number, and refuse
// anything else (null included, which json.Unmarshal would accept by leaving its target
// unchanged).
func checkStringFloat(t *testing.T, raw []byte) {
	t.Helper()
	var want any
	wantErr := json.Unmarshal(raw, &want)
	s, ok := String(raw)
	ws, isString := want.(string)
	if wantErr != nil {
		isString = false
	}
	if ok != isString || s != ws {
		t.Fatalf("String(%q) = %q, %v; encoding/json: %q, %v (%v)", raw, s, ok, ws, isString, wantErr)
	}
	f, ok := Float(raw)
	wf, isNumber := want.(float64)
	if wantErr != nil {
		isNumber = false
	}
	if ok != isNumber || (ok && f != wf && !(f != f && wf != wf)) || (ok && math.Signbit(f) != math.Signbit(wf)) {
		t.Fatalf("Float(%q) = %v, %v; encoding/json: %v, %v (%v)", raw, f, ok, wf, isNumber, wantErr)
	}
}

func TestStringAndFloat(t *testing.T) {
	for _, raw := range []string{
		`"echo"`, `""`, ` "a" `, `"a\"b"`, `"\u0065cho"`, `"\ud83d\ude00"`, `"é"`, "\"\xff\"",
		"\"a\tb\"", `"a"b"`, `"`, `null`, `true`, `{"a":1}`, `["a"]`, `"\x"`, `"\u12"`,
		`0`, `-0`, `1.5`, `-1.5e3`, `1E+2`, `2e-3`, ` 7 `, `01`, `+1`, `.5`, `1.`, `1e`, `-`,
		`0x10`, `Infinity`, `NaN`, `1e400`, `-1e400`, `1e-400`, `1_000`, `12345678901234567890`,
		`"5"`, `5 5`, `5`, `-5`, `123456789012345`, `-123456789012345`, `999999999999999`,
		`1234567890123456`, `9007199254740993`, `-00`, `0 `, `- 1`, `1-`, `12a`,
	} {
		checkStringFloat(t, []byte(raw))
	}
}

func FuzzStringAndFloat(f *testing.F) {
	for _, seed := range []string{`"echo"`, `"\u0065"`, `1.5e3`, `-0`, `null`, "\"\xff\"", `01`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(checkStringFloat)
}

// String and Float against json.Unmarshal into a string and a float64, on a tool name and a
// number argument.
func BenchmarkStringAndFloat(b *testing.B) {
	name, num, integer := json.RawMessage(`"echo"`), json.RawMessage(`-12.5e3`), json.RawMessage(`42`)
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s, ok := String(name); !ok || s != "echo" {
				b.Fatal(s)
			}
		}
	})
	b.Run("Unmarshal-string", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s string
			if json.Unmarshal(name, &s) != nil || s != "echo" {
				b.Fatal(s)
			}
		}
	})
	b.Run("Float", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if f, ok := Float(num); !ok || f != -12500 {
				b.Fatal(f)
			}
		}
	})
	b.Run("Float-integer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if f, ok := Float(integer); !ok || f != 42 {
				b.Fatal(f)
			}
		}
	})
	b.Run("Unmarshal-float", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var f float64
			if json.Unmarshal(num, &f) != nil || f != -12500 {
				b.Fatal(f)
			}
		}
	})
}

// Members and MembersUnchecked on a tool call's params, the 2025-11-25 shape and the
// 2026-07-28 shape with its _meta, reading "name" and "arguments" as a tool handler does.
func BenchmarkMembers(b *testing.B) {
	for _, c := range []struct{ name, params string }{
		{"handshake-era", `{"name":"echo","arguments":{"text":"hello, world"}}`},
		{"stateless", `{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`},
	} {
		params := json.RawMessage(c.params)
		for _, how := range []string{"Members", "Unchecked", "AppendUnchecked"} {
			b.Run(how+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var buf [2]json.RawMessage
					var m []json.RawMessage
					var err error
					switch how {
					case "Members":
						m, err = Members(params, "name", "arguments")
					case "Unchecked":
						m, err = MembersUnchecked(params, "name", "arguments")
					default:
						m, err = AppendMembersUnchecked(buf[:0], params, "name", "arguments")
					}
					if err != nil || string(m[0]) != `"echo"` || len(m[1]) != 23 {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// MembersUnchecked against Members, on any text: where Members accepts the object, or finds
// it valid but not an object or with a duplicated key, MembersUnchecked must answer the same;
// elsewhere it only must not panic.
func checkUnchecked(t *testing.T, obj []byte, key string) (valid bool) {
	keys := []string{"name", "arguments", key, "name"}
	want, wantErr := Members(obj, keys...)
	got, gotErr := MembersUnchecked(obj, keys...)
	switch {
	case wantErr == nil:
		if gotErr != nil {
			t.Fatalf("%q: Members found %q, MembersUnchecked failed: %v", obj, want, gotErr)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) || (got[i] == nil) != (want[i] == nil) {
				t.Fatalf("%q, key %q: Members %q, MembersUnchecked %q", obj, keys[i], want[i], got[i])
			}
		}
		return true
	case errors.Is(wantErr, ErrJSONWrongType), errors.Is(wantErr, ErrDuplicateKey):
		if !errors.Is(gotErr, wantErr) {
			t.Fatalf("%q: Members says %v, MembersUnchecked %v", obj, wantErr, gotErr)
		}
	}
	return false
}

// checkAppend holds AppendMembersUnchecked to MembersUnchecked's answers, appended after what
// dst already holds, into spare capacity that holds stale views (which must not be taken for
// keys already seen); on an error dst comes back as it was given.
func checkAppend(t *testing.T, obj []byte, key string) {
	keys := []string{"name", "arguments", key, "name"}
	want, wantErr := MembersUnchecked(obj, keys...)
	stale := json.RawMessage(`"stale"`)
	buf := []json.RawMessage{json.RawMessage(`1`), stale, stale, stale, stale, stale}
	got, gotErr := AppendMembersUnchecked(buf[:1], obj, keys...)
	if !errors.Is(gotErr, wantErr) || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: MembersUnchecked says %v, AppendMembersUnchecked %v", obj, wantErr, gotErr)
	}
	if len(got) == 0 || string(got[0]) != `1` || &got[0] != &buf[0] {
		t.Fatalf("%q: what dst held was lost: %q", obj, got)
	}
	if gotErr != nil {
		if len(got) != 1 {
			t.Fatalf("%q: an error, yet dst grew to %q", obj, got)
		}
		return
	}
	if len(got) != 1+len(keys) {
		t.Fatalf("%q: %d views for %d keys", obj, len(got)-1, len(keys))
	}
	for i := range want {
		if !bytes.Equal(got[1+i], want[i]) || (got[1+i] == nil) != (want[i] == nil) {
			t.Fatalf("%q, key %q: MembersUnchecked %q, AppendMembersUnchecked %q", obj, keys[i], want[i], got[1+i])
		}
	}
}

// A handler's lookup into an array on its stack allocates nothing.
func TestAppendMembersUncheckedAllocates(t *testing.T) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello, world"}}`)
	bad := false
	n := testing.AllocsPerRun(100, func() {
		var buf [2]json.RawMessage
		m, err := AppendMembersUnchecked(buf[:0], params, "name", "arguments")
		bad = bad || err != nil || len(m) != 2 || string(m[0]) != `"echo"` || len(m[1]) != 23
	})
	if bad || (n != 0 && !raceEnabled) {
		t.Fatalf("wrong views (%v), or %v allocations", bad, n)
	}
	// Without room it grows dst as append does.
	m, err := AppendMembersUnchecked(nil, params, "arguments")
	if err != nil || len(m) != 1 || string(m[0]) != `{"text":"hello, world"}` {
		t.Fatalf("%q, %v", m, err)
	}
}

func TestMembersUnchecked(t *testing.T) {
	for _, obj := range []string{
		`{"name":"echo","arguments":{"text":"hello, world"}}`,
		` { "name" : "a\"b" , "arguments" : [1, {"x": "]}"}] , "k": null } `,
		`{"na\u006de":1,"arguments":"\\"}`,
		`{"name":1,"name":2}`,
		`{"k":1,"k":2,"name":3}`,
		`{"k":"\\\\","name":-1.5e3}`,
		`{}`, `[]`, `"name"`, `12`, `null`, ``, ` `, `{`, `{"name"`, `{"name":}`, `{"name":1,}`,
		`{"name":1}x`, `{"name":"\ud800"}`, `{"\ud800":1}`, "{\"name\":\"\xff\"}",
		`{"name":{"a":[{"b":"}"}]},"arguments":true}`,
	} {
		checkUnchecked(t, []byte(obj), "k")
		checkAppend(t, []byte(obj), "k")
	}
	// Escapes and quotes at every offset around the eight-byte steps.
	valid := 0
	for n := 0; n < 20; n++ {
		pad := strings.Repeat("x", n)
		for _, esc := range []string{`\"`, `\\`, `\\\"`, `\u0022`, `"`} {
			for _, obj := range []string{
				`{"k":"` + pad + esc + pad + `","name":"` + pad + esc + `"}`,
				`{"` + pad + esc + `":1,"name":["` + pad + esc + `"]}`,
			} {
				if checkUnchecked(t, []byte(obj), pad+`"`) {
					valid++
				}
				checkAppend(t, []byte(obj), pad+`"`)
			}
		}
	}
	if valid != 20*4*2 { // all but the bare quote are valid JSON
		t.Fatalf("%d valid objects", valid)
	}
	// No keys: an empty slice, not nil, as Members.
	if m, err := MembersUnchecked(json.RawMessage(`{"a":1}`)); err != nil || m == nil || len(m) != 0 {
		t.Fatalf("no keys: %q, %v", m, err)
	}
	// Keys past the 64 limit, as Members.
	if _, err := MembersUnchecked(json.RawMessage(`{}`), make([]string, 65)...); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("65 keys: %v", err)
	}
}

func FuzzMembersUnchecked(f *testing.F) {
	for _, seed := range []string{
		`{"name":"echo","arguments":{"text":"hi"}}`, `{"k":"\\\"","k":1}`, `{"n\u0061me":[]}`, `[1]`,
	} {
		f.Add([]byte(seed), "k")
	}
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		checkUnchecked(t, obj, key)
		checkAppend(t, obj, key)
	})
}
