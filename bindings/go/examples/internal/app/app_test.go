package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
)

// An answer given right after a log message that fills the output bound is refused for now
// (ErrOutputFull) and given again 50 ms later: the client gets both. (It was returned as an
// error, printed, and the request waited for an answer until its client gave up.)
func TestAnAnswerRefusedForAFullOutputIsGivenLater(t *testing.T) {
	cfg := &mcpwire.Config{Role: mcpwire.Server, Name: "t", Version: "1",
		Capabilities: json.RawMessage(Capabilities), Limits: mcpwire.Limits{MaxBufferedOutput: 100}}
	var srv *mcpwire.HTTPServer
	failed := make(chan error, 4)
	handle := func(c *mcpwire.Conn, key mcpwire.ConnKey, ev mcpwire.Event) {
		req, ok := ev.(*mcpwire.RequestEvent)
		if !ok {
			return
		}
		later := func(d time.Duration, f func(c *mcpwire.Conn) error) {
			time.AfterFunc(d, func() { _ = srv.With(key, f) })
		}
		if err := Answer(c, req, later); err != nil {
			failed <- err
		}
	}
	srv, err := mcpwire.NewHTTPServer(cfg, nil, mcpwire.HTTPAppFunc(handle))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	body := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_logging_tool","arguments":{},"_meta":{"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
		"Mcp-Name": "test_logging_tool",
	} {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%v after %q", err, got)
	}
	text := string(got)
	if !strings.Contains(text, "test_logging_tool ran") || !strings.Contains(text, "Logging tool completed") {
		t.Fatalf("want the log message and the answer: %d %q", resp.StatusCode, text)
	}
	select {
	case err := <-failed:
		t.Fatalf("Answer: %v", err)
	default:
	}
}
