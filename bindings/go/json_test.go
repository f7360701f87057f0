package mcpwire

import (
	"encoding/json"
	"errors"
	"testing"
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
