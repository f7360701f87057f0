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

// test_tool_with_progress whose first progress report finds the output full tries it again
// 50 ms later, as every later step does: the client gets every report and the answer. (The
// refusal was returned as an error, and the request was never answered.)
func TestAFirstProgressReportRefusedForAFullOutputIsGivenLater(t *testing.T) {
	now := time.Unix(1000, 0)
	// (A session: a 2026-07-28 server sends list_changed on listen streams only.)
	session := []string{"2025-11-25"}
	client, err := mcpwire.NewConn(&mcpwire.Config{Role: mcpwire.Client, Name: "c", Version: "1", Versions: session}, now)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := mcpwire.NewConn(&mcpwire.Config{Role: mcpwire.Server, Name: "s", Version: "1", Versions: session,
		Capabilities: json.RawMessage(Capabilities), Limits: mcpwire.Limits{MaxBufferedOutput: 32}}, now)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	// Bytes go across both ways; the server's requests reach Answer, whose later steps
	// wait in `pending` until run.
	var pending []func(c *mcpwire.Conn) error
	later := func(_ time.Duration, f func(c *mcpwire.Conn) error) { pending = append(pending, f) }
	var got []mcpwire.Event
	pump := func(fromServer bool) {
		for {
			out, err := server.AppendOutput(nil)
			if err != nil {
				t.Fatal(err)
			}
			in, err := client.AppendOutput(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) == 0 && len(in) == 0 {
				break
			}
			if fromServer {
				_ = client.Feed(now, out)
			}
			_ = server.Feed(now, in)
			for _, ev := range server.AppendEvents(nil) {
				if req, ok := ev.(*mcpwire.RequestEvent); ok {
					if err := Answer(server, req, later); err != nil {
						t.Fatalf("Answer: %v", err)
					}
				}
			}
			got = client.AppendEvents(got)
		}
	}
	pump(true)
	id, err := client.Request(now, "tools/call", json.RawMessage(`{"name":"test_tool_with_progress"}`),
		&mcpwire.RequestOptions{Progress: true})
	if err != nil {
		t.Fatal(err)
	}
	// The server's output is full (a ping nobody has read yet) when the call comes.
	if _, err := server.Request(now, "ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	in, _ := client.AppendOutput(nil)
	_ = server.Feed(now, in)
	for _, ev := range server.AppendEvents(nil) {
		if req, ok := ev.(*mcpwire.RequestEvent); ok {
			if err := Answer(server, req, later); err != nil {
				t.Fatalf("Answer with the output full: %v", err)
			}
		}
	}
	for i := 0; i < 10 && len(pending) > 0; i++ {
		pump(true)
		run := pending
		pending = nil
		for _, f := range run {
			_ = f(server)
		}
	}
	pump(true)
	progress, answered := 0, false
	for _, ev := range got {
		switch e := ev.(type) {
		case *mcpwire.ProgressEvent:
			progress++
		case *mcpwire.ResponseEvent:
			answered = answered || e.Request == id
		}
	}
	if progress != 3 || !answered {
		t.Fatalf("%d progress reports, answered %v: %#v", progress, answered, got)
	}
}
