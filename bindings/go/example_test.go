package mcpwire_test

import (
	"encoding/json"
	"fmt"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
)

// A server answering a tools/list request fed to it by hand.
func Example() {
	now := time.Now()
	conn, err := mcpwire.NewConn(&mcpwire.Config{Role: mcpwire.Server, Name: "demo", Version: "1.0",
		Capabilities: json.RawMessage(`{"tools":{}}`)}, now)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	conn.Feed(now, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":"two","method":"tools/list"}`+"\n"))
	for ev, ok := conn.NextEvent(); ok; ev, ok = conn.NextEvent() {
		switch ev := ev.(type) {
		case *mcpwire.ReadyEvent:
			fmt.Println("ready:", ev.Version)
		case *mcpwire.RequestEvent:
			fmt.Println("request:", ev.ID, ev.Method)
			conn.Respond(ev.ID, json.RawMessage(`{"tools":[]}`))
		}
	}
	out, _ := conn.AppendOutput(nil)
	fmt.Printf("%s", out)
	// Output:
	// ready: 2025-06-18
	// request: "two" tools/list
	// {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"demo","version":"1.0"}}}
	// {"jsonrpc":"2.0","id":"two","result":{"tools":[]}}
}

// Reading a tool call's name and arguments in one pass over its params, then decoding only
// the arguments.
func ExampleMembers() {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	m, err := mcpwire.Members(params, "name", "arguments")
	if err != nil {
		panic(err)
	}
	var args struct{ Text string }
	if err := json.Unmarshal(m[1], &args); err != nil {
		panic(err)
	}
	fmt.Println(string(m[0]), args.Text)
	// Output: "echo" hi
}
