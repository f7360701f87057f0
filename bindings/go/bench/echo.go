// Package bench compares mcpwire's Go binding with the two Go MCP servers people deploy,
// the official go-sdk (github.com/modelcontextprotocol/go-sdk) and mcp-go
// (github.com/mark3labs/mcp-go), on the same tool: "echo", which takes {"text": string} and
// returns one text content holding the same text.
//
// This file builds the three servers (and the wire bytes they are all fed); memory.go drives
// them in memory for echo_test.go, and cmd/httpserver serves them over net/http.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgo "github.com/mark3labs/mcp-go/server"
	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EchoInputSchema is the echo tool's input schema, the same for every server.
const EchoInputSchema = `{"type":"object","properties":{"text":{"type":"string","description":"the text to return"}},"required":["text"]}`

// EchoDescription describes the echo tool.
const EchoDescription = "Returns its input text as one text content."

// EchoText is the text every benchmark request sends (and expects back).
const EchoText = "hello, world"

// Implementation names the servers.
const (
	ImplName    = "mcpwire-bench"
	ImplVersion = "1.0.0"
)

// ---- Wire bytes -------------------------------------------------------------------------

// InitializeLine is the handshake-era initialize request (id 0) and InitializedLine the
// notification that completes the handshake; both end with a newline.
const (
	InitializeLine  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}` + "\n"
	InitializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
)

// CallLine is a handshake-era tools/call of echo with id, ending with a newline.
func CallLine(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) +
		`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + EchoText + `"}}}` + "\n")
}

// ModernCallBody is a stateless 2026-07-28 tools/call of echo with id: the protocol version
// and client capabilities travel in params._meta (SEP-2575), as do the client's identity.
// Send it with the headers MCP-Protocol-Version: 2026-07-28, Mcp-Method: tools/call and
// Mcp-Name: echo.
func ModernCallBody(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) +
		`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + EchoText + `"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}`)
}

// ---- The answer -------------------------------------------------------------------------

// CheckEchoResponse verifies one JSON-RPC message: a response to id whose result holds
// exactly one text content equal to EchoText, and no error.
func CheckEchoResponse(msg []byte, id int) error {
	var resp struct {
		JSONRPC string           `json:"jsonrpc"`
		ID      json.RawMessage  `json:"id"`
		Error   *json.RawMessage `json:"error"`
		Result  *struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil {
		return fmt.Errorf("not JSON (%v): %.300s", err, msg)
	}
	switch {
	case resp.JSONRPC != "2.0":
		return fmt.Errorf("not JSON-RPC 2.0: %.300s", msg)
	case string(resp.ID) != strconv.Itoa(id):
		return fmt.Errorf("id %s, want %d: %.300s", resp.ID, id, msg)
	case resp.Error != nil || resp.Result == nil:
		return fmt.Errorf("no result: %.300s", msg)
	case resp.Result.IsError:
		return fmt.Errorf("tool error: %.300s", msg)
	case len(resp.Result.Content) != 1 || resp.Result.Content[0].Type != "text" ||
		resp.Result.Content[0].Text != EchoText:
		return fmt.Errorf("content is not one text %q: %.300s", EchoText, msg)
	}
	return nil
}

// ---- mcpwire ----------------------------------------------------------------------------

// MCPWireConfig is the server configuration of the mcpwire servers (both eras).
func MCPWireConfig() *mcpwire.Config {
	return &mcpwire.Config{Role: mcpwire.Server, Name: ImplName, Version: ImplVersion,
		Capabilities: json.RawMessage(`{"tools":{}}`)}
}

// MCPWireTools is the tools/list result of the mcpwire servers.
var MCPWireTools = json.RawMessage(`{"tools":[{"name":"echo","description":"` + EchoDescription +
	`","inputSchema":` + EchoInputSchema + `}]}`)

// echoArguments is what an mcpwire application decodes from a tools/call's arguments.
type echoArguments struct {
	Text *string `json:"text"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError,omitempty"`
}

// MCPWireAnswer answers one request event on c the way an application on mcpwire does:
// the engine hands over the raw params, the application reads "name" and "arguments" with
// mcpwire.MembersUnchecked (one pass in Go over the params the engine validated) and decodes each with encoding/json (as go-sdk's and mcp-go's handlers
// decode the arguments their SDK split out), runs the tool and encodes the result. tools/list gets MCPWireTools; other methods get
// "method not found".
func MCPWireAnswer(c *mcpwire.Conn, req *mcpwire.RequestEvent) error {
	switch req.Method {
	case "tools/call":
		var name string
		var args echoArguments
		m, err := mcpwire.MembersUnchecked(req.Params, "name", "arguments")
		if err != nil || json.Unmarshal(m[0], &name) != nil {
			return c.RespondError(req.ID, mcpwire.CodeInvalidParamsRPC, "invalid params", nil)
		}
		if name != "echo" {
			return c.RespondError(req.ID, mcpwire.CodeInvalidParamsRPC, "unknown tool "+name, nil)
		}
		if rawArgs := m[1]; rawArgs != nil && json.Unmarshal(rawArgs, &args) != nil {
			return c.RespondError(req.ID, mcpwire.CodeInvalidParamsRPC, "invalid params", nil)
		}
		res := toolResult{Content: []textContent{{Type: "text"}}}
		if args.Text == nil {
			res.Content[0].Text, res.IsError = `missing argument "text"`, true
		} else {
			res.Content[0].Text = *args.Text
		}
		out, err := json.Marshal(&res)
		if err != nil {
			return err
		}
		return c.Respond(req.ID, out)
	case "tools/list":
		return c.Respond(req.ID, MCPWireTools)
	}
	return c.RespondError(req.ID, mcpwire.CodeMethodNotFound, "method not found", nil)
}

// FloorApp is the floor plus the echo application's own work and nothing of MCP: it reads
// the body, takes params.name and params.arguments with mcpwire.MembersUnchecked, decodes
// them and encodes the result with encoding/json as MCPWireAnswer does, and writes the
// answer under id 1 (no id, version or header checks, no engine). Between the floor and
// mcpwire.HTTPServer, it shows how much of the gap is the application's JSON and how much
// the engine and its glue (benches/README.md).
func FloorApp(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var name string
	var args echoArguments
	p, err := mcpwire.MembersUnchecked(body, "params")
	if err == nil && p[0] != nil {
		var m []json.RawMessage
		if m, err = mcpwire.MembersUnchecked(p[0], "name", "arguments"); err == nil {
			err = errors.Join(json.Unmarshal(m[0], &name), json.Unmarshal(m[1], &args))
		}
	}
	if err != nil || name != "echo" || args.Text == nil {
		http.Error(w, "not an echo call", http.StatusBadRequest)
		return
	}
	out, err := json.Marshal(&toolResult{Content: []textContent{{Type: "text", Text: *args.Text}}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	answer := make([]byte, 0, len(out)+40)
	answer = append(append(append(answer, `{"jsonrpc":"2.0","id":1,"result":`...), out...), '}')
	_, _ = w.Write(answer)
}

// MCPWireHTTPApp is the echo application behind a mcpwire.HTTPServer.
func MCPWireHTTPApp() mcpwire.HTTPApp {
	return mcpwire.HTTPAppFunc(func(c *mcpwire.Conn, _ mcpwire.ConnKey, ev mcpwire.Event) {
		if req, ok := ev.(*mcpwire.RequestEvent); ok {
			_ = MCPWireAnswer(c, req)
		}
	})
}

// ---- go-sdk -----------------------------------------------------------------------------

// echoArgs are the echo tool's arguments.
type echoArgs struct {
	Text *string `json:"text"`
}

// NewGoSDKServer is a go-sdk server with the echo tool, registered through the low-level
// Server.AddTool: the handler decodes the raw arguments with encoding/json, as the mcpwire
// application does, and the SDK validates nothing (its generic AddTool would add JSON
// Schema validation of the input: see NewGoSDKServerTyped).
func NewGoSDKServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ImplName, Version: ImplVersion},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	s.AddTool(&mcp.Tool{Name: "echo", Description: EchoDescription, InputSchema: json.RawMessage(EchoInputSchema)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args echoArgs
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			if args.Text == nil {
				return &mcp.CallToolResult{IsError: true,
					Content: []mcp.Content{&mcp.TextContent{Text: `missing argument "text"`}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: *args.Text}}}, nil
		})
	return s
}

// typedEchoArgs are the arguments of the typed go-sdk tool (its schema is inferred).
type typedEchoArgs struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

// NewGoSDKServerTyped is a go-sdk server with the echo tool registered the way the SDK
// recommends, through the generic mcp.AddTool: the SDK infers the schema, validates every
// call's arguments against it and decodes them.
func NewGoSDKServerTyped() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ImplName, Version: ImplVersion},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: EchoDescription},
		func(_ context.Context, _ *mcp.CallToolRequest, in typedEchoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	return s
}

// ---- mcp-go -----------------------------------------------------------------------------

// NewMCPGoServer is an mcp-go server with the echo tool. mcp-go decodes the arguments into
// a map itself; the handler reads "text" from it (RequireString, the idiomatic accessor).
func NewMCPGoServer() *mcpgo.MCPServer {
	s := mcpgo.NewMCPServer(ImplName, ImplVersion, mcpgo.WithToolCapabilities(false))
	tool := mcpgomcp.NewToolWithRawSchema("echo", EchoDescription, json.RawMessage(EchoInputSchema))
	s.AddTool(tool, func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcpgomcp.NewToolResultError(err.Error()), nil
		}
		return mcpgomcp.NewToolResultText(text), nil
	})
	return s
}

// errNoAnswer reports a request an in-memory server did not answer.
var errNoAnswer = errors.New("no answer")
