package mcpwire

import (
	"encoding/json"
	"testing"
)

// An ID survives a trip through JSON: integers, strings in their wire form (escapes kept, so
// the answer echoes them byte for byte) and no id; what is not an id is an error (there was
// no UnmarshalJSON at all, and json.Unmarshal into an ID failed on every value).
func TestIDRoundTripsThroughJSON(t *testing.T) {
	for _, id := range []ID{IntID(7), IntID(-9007199254740993), StringID("seven"),
		RawStringID(`a\u00e9\"b`), {}} {
		text, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		var back ID
		if err := json.Unmarshal(text, &back); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if back != id {
			t.Fatalf("%s came back as %v, want %v", text, back, id)
		}
	}
	var kept struct{ ID ID }
	if err := json.Unmarshal([]byte("{\"ID\": \"x\ty\"}"), &kept); err == nil {
		t.Fatal("a raw control character in a string id was taken")
	}
	for _, bad := range []string{`1.5`, `1e3`, `true`, `[]`, `{}`, `99999999999999999999`, `"open`} {
		var id ID
		if err := json.Unmarshal([]byte(bad), &id); err == nil {
			t.Fatalf("%s was taken as %v", bad, id)
		}
	}
}
