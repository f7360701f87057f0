// Package app is the MCP application the Go examples serve, over stdio and over HTTP: the
// tool "echo" {text} (returns the text exactly), the tool "add" {a, b} (returns the sum as
// text), the tool "count" (reports progress three
// times, 50 ms apart, then answers), the resource "mem://greeting" and the prompt "greet";
// and for the official conformance suite, the tools "test_simple_text",
// "test_tool_with_progress", "test_missing_capability" (needs the client's sampling),
// "test_error_handling", "test_logging_tool" and "test_streaming_elicitation".
package app

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
)

// Capabilities is what the application serves; WithoutResources serves tools only.
const (
	Capabilities     = `{"tools":{},"resources":{},"prompts":{},"logging":{}}`
	WithoutResources = `{"tools":{}}`
	Instructions     = "Try the echo tool."
)

// The tools, one entry each.
const (
	toolEcho = `{"name":"echo","description":"Returns its text argument exactly",` +
		`"inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}`
	toolAdd = `{"name":"add","description":"Adds two numbers",` +
		`"inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}`
	toolCount = `{"name":"count","description":"Counts to three, reporting progress",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	toolSimpleText = `{"name":"test_simple_text","description":"Returns a simple text response",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	toolWithProgress = `{"name":"test_tool_with_progress","description":"Reports progress, then answers",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	toolMissingCapability = `{"name":"test_missing_capability","description":"Needs the client's sampling capability",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	toolErrorHandling = `{"name":"test_error_handling","description":"Always fails with an isError result",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	toolLogging = `{"name":"test_logging_tool","description":"Logs at info while it runs",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	toolStreamingElicitation = `{"name":"test_streaming_elicitation",` +
		`"description":"Asks the user for input (2026-07-28: an input-required answer)",` +
		`"inputSchema":{"type":"object","properties":{}}}`
	// The tools that answer at once, in both lists.
	toolsAtOnceTail = toolErrorHandling + `,` + toolLogging + `,` + toolStreamingElicitation
)

// Tools is the tools/list result of a host that can run later steps (Answer's later).
const Tools = `{"tools":[` + toolEcho + `,` + toolAdd + `,` + toolCount + `,` + toolSimpleText + `,` +
	toolWithProgress + `,` + toolMissingCapability + `,` + toolsAtOnceTail + `]}`

// ToolsAtOnce is the tools/list result of a host without later steps: the tools that answer
// at once ("count" and "test_tool_with_progress" report progress over time).
const ToolsAtOnce = `{"tools":[` + toolEcho + `,` + toolAdd + `,` + toolSimpleText + `,` +
	toolMissingCapability + `,` + toolsAtOnceTail + `]}`

const (
	resources = `{"resources":[{"uri":"mem://greeting","name":"greeting","mimeType":"text/plain"}]}`
	greeting  = `{"contents":[{"uri":"mem://greeting","mimeType":"text/plain","text":"Hello from mcpwire, in Go"}]}`
	prompts   = `{"prompts":[{"name":"greet","description":"Say hello"}]}`
	prompt    = `{"description":"Say hello","messages":[{"role":"user","content":{"type":"text","text":"Say hello to mcpwire."}}]}`
)

// Later runs f after d, on whatever goroutine the host answers from (Serve's timers, an
// HTTPServer's With). Nil: the tools that need it ("count", "test_tool_with_progress") are
// not listed, and refused if called.
type Later func(d time.Duration, f func(c *mcpwire.Conn) error)

// Answer answers one request on c. later schedules the steps of "count", and an answer the
// engine refuses because the client is behind in reading (ErrOutputFull: the request is
// still in flight) is given again 50 ms later: nothing is dropped.
func Answer(c *mcpwire.Conn, req *mcpwire.RequestEvent, later Later) error {
	switch req.Method {
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		// Every list fits on one page: a cursor is one this server never gave (the spec's
		// pagination page: -32602).
		var cursor [1]json.RawMessage
		if m, err := mcpwire.AppendMembersUnchecked(cursor[:0], req.Params, "cursor"); err == nil && m[0] != nil {
			return respondError(c, later, req.ID, mcpwire.CodeInvalidParamsRPC, "Invalid params: unknown cursor", nil)
		}
	}
	switch req.Method {
	case "tools/list":
		if later == nil { // only what this host can run
			return respond(c, later, req.ID, json.RawMessage(ToolsAtOnce))
		}
		return respond(c, later, req.ID, json.RawMessage(Tools))
	case "tools/call":
		// Only the members needed are read, not the whole params, whose 2026-07-28 _meta
		// encoding/json would walk too. The engine validated the params, so
		// AppendMembersUnchecked reads them without checking them again, into arrays on
		// the stack; mcpwire.String and Float read a string or a number as encoding/json
		// would, without its reflection.
		var top [2]json.RawMessage
		m, err := mcpwire.AppendMembersUnchecked(top[:0], req.Params, "name", "arguments")
		if err != nil {
			return respondError(c, later, req.ID, mcpwire.CodeInvalidParamsRPC, "Invalid params", nil)
		}
		name, ok := mcpwire.String(m[0])
		if !ok {
			return respondError(c, later, req.ID, mcpwire.CodeInvalidParamsRPC, "Invalid params", nil)
		}
		// An absent or non-object "arguments" has no members: every argument is missing.
		args := m[1]
		switch name {
		case "echo":
			// The text goes back as the raw JSON string it arrived as: exactly the same text.
			var arg [1]json.RawMessage
			v, err := mcpwire.AppendMembersUnchecked(arg[:0], args, "text")
			if err != nil || len(v[0]) == 0 || v[0][0] != '"' {
				return respond(c, later, req.ID, toolText(`"echo needs a string argument 'text'"`, true))
			}
			return respond(c, later, req.ID, toolText(v[0], false))
		case "add":
			var a, b float64
			okA, okB := false, false
			var arg [2]json.RawMessage
			if ab, err := mcpwire.AppendMembersUnchecked(arg[:0], args, "a", "b"); err == nil {
				a, okA = mcpwire.Float(ab[0])
				b, okB = mcpwire.Float(ab[1])
			}
			if !okA || !okB {
				return respond(c, later, req.ID, toolText(`"add needs numbers 'a' and 'b'"`, true))
			}
			// Whole sums print without a fraction: add(2, 3) is "5".
			var sum [40]byte
			text := strconv.AppendFloat(append(sum[:0], '"'), a+b, 'f', -1, 64)
			return respond(c, later, req.ID, toolText(append(text, '"'), false))
		case "count", "test_tool_with_progress":
			if later == nil {
				break // not listed here (ToolsAtOnce): unknown
			}
			if name == "count" {
				count(req.ID, 1, 3, later)
				return nil
			}
			err := c.Progress(req.ID, mcpwire.ProgressUpdate{Progress: 0, Total: 100, HasTotal: true})
			switch {
			case errors.Is(err, mcpwire.ErrOutputFull):
				count(req.ID, 0, 100, later) // the first report again, 50 ms later
				return nil
			case err != nil && !errors.Is(err, mcpwire.ErrNoProgressToken):
				return err
			}
			count(req.ID, 50, 100, later)
			return nil
		case "test_simple_text":
			return respond(c, later, req.ID, toolText(`"This is a simple text response for testing."`, false))
		case "test_missing_capability":
			return needsSampling(c, later, req.ID)
		case "test_error_handling":
			return respond(c, later, req.ID, toolText(`"This tool intentionally returns an error for testing"`, true))
		case "test_logging_tool":
			// Sent in a session, and in 2026-07-28 only where the request asked for logs (its
			// logLevel): either way the server must declare logging, as Capabilities does.
			_, _ = c.Log(req.ID, mcpwire.LogInfo, "test_logging_tool", json.RawMessage(`"test_logging_tool ran"`))
			return respond(c, later, req.ID, toolText(`"Logging tool completed"`, false))
		case "test_streaming_elicitation":
			return streamingElicitation(c, later, req)
		}
		// An unknown tool is a protocol error, as the spec's tools page shows, not a result.
		return respondError(c, later, req.ID, mcpwire.CodeInvalidParamsRPC, "Unknown tool: "+name, nil)
	case "resources/list":
		return respond(c, later, req.ID, json.RawMessage(resources))
	case "resources/templates/list":
		return respond(c, later, req.ID, json.RawMessage(`{"resourceTemplates":[]}`))
	case "resources/read":
		var read struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(req.Params, &read) != nil || read.URI != "mem://greeting" {
			return respondError(c, later, req.ID, mcpwire.CodeResourceNotFound, "Resource not found", nil)
		}
		return respond(c, later, req.ID, json.RawMessage(greeting))
	case "prompts/list":
		return respond(c, later, req.ID, json.RawMessage(prompts))
	case "logging/setLevel":
		// A session's level (handshake era): every level is sent here, so nothing to keep.
		return respond(c, later, req.ID, json.RawMessage(`{}`))
	case "prompts/get":
		var get struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(req.Params, &get) != nil || get.Name != "greet" {
			return respondError(c, later, req.ID, mcpwire.CodeInvalidParamsRPC, "Unknown prompt", nil)
		}
		return respond(c, later, req.ID, json.RawMessage(prompt))
	default:
		return respondError(c, later, req.ID, mcpwire.CodeMethodNotFound, "Method not found", nil)
	}
}

// respond gives result to id now, or, while the client is behind in reading (ErrOutputFull),
// again every 50 ms until it fits (without later, the refusal is returned).
func respond(c *mcpwire.Conn, later Later, id mcpwire.ID, result json.RawMessage) error {
	err := c.Respond(id, result)
	if errors.Is(err, mcpwire.ErrOutputFull) && later != nil {
		later(50*time.Millisecond, func(c *mcpwire.Conn) error { return respond(c, later, id, result) })
		return nil
	}
	return err
}

// respondError is respond for an error answer.
func respondError(c *mcpwire.Conn, later Later, id mcpwire.ID, code int64, message string, data json.RawMessage) error {
	err := c.RespondError(id, code, message, data)
	if errors.Is(err, mcpwire.ErrOutputFull) && later != nil {
		later(50*time.Millisecond, func(c *mcpwire.Conn) error {
			return respondError(c, later, id, code, message, data)
		})
		return nil
	}
	return err
}

// count reports progress `at` of `total` every 50 ms, in steps of total/3 (count) or 50
// (test_tool_with_progress), then answers; a request cancelled meanwhile (or whose client
// went away) ends it quietly. While the client is behind in reading (the output is full),
// the same step is tried again 50 ms later: nothing is dropped.
func count(id mcpwire.ID, at, total float64, later Later) {
	later(50*time.Millisecond, func(c *mcpwire.Conn) error {
		err := c.Progress(id, mcpwire.ProgressUpdate{Progress: at, Total: total, HasTotal: true})
		switch {
		case errors.Is(err, mcpwire.ErrOutputFull):
			count(id, at, total, later)
			return nil
		case err != nil && !errors.Is(err, mcpwire.ErrNoProgressToken):
			return nil // gone
		}
		if at < total {
			step := 50.0
			if total == 3 {
				step = 1
			}
			count(id, at+step, total, later)
			return nil
		}
		answer(id, total, later, c)
		return nil
	})
}

// answer gives count's final answer, again 50 ms later while the output is full.
func answer(id mcpwire.ID, total float64, later Later, c *mcpwire.Conn) {
	text := `"Progress test completed"`
	if total == 3 {
		text = `"counted to 3"`
	}
	if errors.Is(c.Respond(id, toolText(text, false)), mcpwire.ErrOutputFull) {
		later(50*time.Millisecond, func(c *mcpwire.Conn) error {
			answer(id, total, later, c)
			return nil
		})
	}
}

// needsSampling answers a request that needs the client's sampling capability: per request
// in 2026-07-28 (what the request declared), per session before. Without it the answer is
// the spec's MissingRequiredClientCapability error (-32021; HTTP 400 in 2026-07-28).
func needsSampling(c *mcpwire.Conn, later Later, id mcpwire.ID) error {
	declared := false
	if rc, ok := c.RequestContext(id); ok {
		declared = rc.ClientCapabilities&mcpwire.CapSampling != 0
	} else {
		var caps map[string]json.RawMessage
		_ = json.Unmarshal(c.PeerCapabilities(), &caps)
		_, declared = caps["sampling"]
	}
	if declared {
		return respond(c, later, id, toolText(`"The client declared sampling"`, false))
	}
	err := respondError(c, later, id, -32021, "Missing required client capability: sampling",
		json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`))
	if errors.Is(err, mcpwire.ErrCodeNotInVersion) {
		// -32021 is a 2026-07-28 code: a session gets a tool error instead.
		return respond(c, later, id, toolText(`"This tool needs the client's sampling capability"`, true))
	}
	return err
}

// toolText is a tools/call result with one text item; rawText is a JSON string, given as a
// constant or as the bytes of a view, which are copied once, into the result. It is appended
// piece by piece: fmt.Sprintf took about 3% of the stdio server's time.
func toolText[T ~string | ~[]byte](rawText T, isError bool) json.RawMessage {
	const head, tail = `{"content":[{"type":"text","text":`, `}],"isError":`
	b := make([]byte, 0, len(head)+len(rawText)+len(tail)+len("false}"))
	b = append(append(append(b, head...), rawText...), tail...)
	b = strconv.AppendBool(b, isError)
	return append(b, '}')
}

// streamingElicitation is test_streaming_elicitation, 2026-07-28: the question goes back as an
// "input required" answer (on the request's own stream, never as a request of ours), and the
// client's retry carries the answer in inputResponses. A session, or a client that cannot
// elicit, gets a tool error instead.
func streamingElicitation(c *mcpwire.Conn, later Later, req *mcpwire.RequestEvent) error {
	var found [1]json.RawMessage
	if m, err := mcpwire.AppendMembersUnchecked(found[:0], req.Params, "inputResponses"); err == nil && m[0] != nil {
		return respond(c, later, req.ID, toolText(`"Thank you for your input"`, false))
	}
	const ask = `{"input":{"method":"elicitation/create","params":{"mode":"form",` +
		`"message":"Please provide your name","requestedSchema":{"type":"object",` +
		`"properties":{"name":{"type":"string"}},"required":["name"]}}}}`
	err := c.RespondInputRequired(req.ID, json.RawMessage(ask), "")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mcpwire.ErrOutputFull) && later != nil:
		// The client is behind in reading: ask again in a moment (nothing was sent).
		later(50*time.Millisecond, func(c *mcpwire.Conn) error { return streamingElicitation(c, later, req) })
		return nil
	}
	return respond(c, later, req.ID, toolText(`"This tool needs a 2026-07-28 client that can elicit"`, true))
}
