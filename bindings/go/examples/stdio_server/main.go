// Command stdio_server is an MCP server over stdio, in Go on the mcpwire engine.
//
// It serves the tool "echo" {text} (returns the text exactly), the resource
// "mem://greeting" and the prompt "greet". Run it under any MCP client:
//
//	go build -o stdio_server ./examples/stdio_server && some-mcp-client -- ./stdio_server
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	mcpwire "github.com/mcpwire/mcpwire-go"
	"github.com/mcpwire/mcpwire-go/examples/internal/pump"
)

const (
	tools = `{"tools":[{"name":"echo","description":"Returns its text argument exactly",` +
		`"inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}`
	resources = `{"resources":[{"uri":"mem://greeting","name":"greeting","mimeType":"text/plain"}]}`
	greeting  = `{"contents":[{"uri":"mem://greeting","mimeType":"text/plain","text":"Hello from mcpwire, in Go"}]}`
	prompts   = `{"prompts":[{"name":"greet","description":"Say hello"}]}`
	prompt    = `{"description":"Say hello","messages":[{"role":"user","content":{"type":"text","text":"Say hello to mcpwire."}}]}`
)

func main() {
	conn, err := mcpwire.NewConn(&mcpwire.Config{
		Role:         mcpwire.Server,
		Name:         "mcpwire-go-example",
		Version:      mcpwire.Version(),
		Capabilities: json.RawMessage(`{"tools":{},"resources":{},"prompts":{}}`),
		Instructions: "Try the echo tool.",
	}, time.Now())
	if err != nil {
		fatal(err)
	}
	defer conn.Close()
	err = pump.Run(conn, os.Stdin, os.Stdout, func(now time.Time, ev mcpwire.Event) {
		if req, ok := ev.(*mcpwire.RequestEvent); ok {
			if err := answer(conn, req); err != nil {
				fatal(err)
			}
		}
	})
	if err != nil {
		fatal(err)
	}
}

func answer(conn *mcpwire.Conn, req *mcpwire.RequestEvent) error {
	switch req.Method {
	case "tools/list":
		return conn.Respond(req.ID, json.RawMessage(tools))
	case "tools/call":
		var call struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &call); err != nil {
			return conn.RespondError(req.ID, mcpwire.CodeInvalidParamsRPC, "Invalid params", nil)
		}
		if call.Name != "echo" {
			return conn.Respond(req.ID, toolText(`"unknown tool"`, true))
		}
		// The text goes back as the raw JSON string it arrived as: exactly the same text.
		text, ok := call.Arguments["text"]
		if !ok || len(text) == 0 || text[0] != '"' {
			return conn.Respond(req.ID, toolText(`"echo needs a string argument 'text'"`, true))
		}
		return conn.Respond(req.ID, toolText(string(text), false))
	case "resources/list":
		return conn.Respond(req.ID, json.RawMessage(resources))
	case "resources/templates/list":
		return conn.Respond(req.ID, json.RawMessage(`{"resourceTemplates":[]}`))
	case "resources/read":
		var read struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(req.Params, &read) != nil || read.URI != "mem://greeting" {
			return conn.RespondError(req.ID, mcpwire.CodeResourceNotFound, "Resource not found", nil)
		}
		return conn.Respond(req.ID, json.RawMessage(greeting))
	case "prompts/list":
		return conn.Respond(req.ID, json.RawMessage(prompts))
	case "prompts/get":
		var get struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(req.Params, &get) != nil || get.Name != "greet" {
			return conn.RespondError(req.ID, mcpwire.CodeInvalidParamsRPC, "Unknown prompt", nil)
		}
		return conn.Respond(req.ID, json.RawMessage(prompt))
	default:
		return conn.RespondError(req.ID, mcpwire.CodeMethodNotFound, "Method not found", nil)
	}
}

// toolText is a tools/call result with one text item; rawText is a JSON string.
func toolText(rawText string, isError bool) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"isError":%t}`, rawText, isError))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "stdio_server:", err)
	os.Exit(1)
}
