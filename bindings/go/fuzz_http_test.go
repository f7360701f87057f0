package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzHTTPServer hands arbitrary requests (method, headers, body) to an HTTPServer's
// ServeHTTP, as net/http would after parsing them: the server must answer each with a status
// of its own (never a 500, which only an engine failure gives), with valid JSON when it
// answers 200 with a JSON body, and must still serve a good request afterwards. Headers come
// from the input one "Name: value" line each, in any number and with any bytes, so the
// shim's and the C ABI's header tables are crossed both on the stack and past it.
func FuzzHTTPServer(f *testing.F) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + modernMeta + `}}`
	modern := "Content-Type: application/json\nAccept: application/json, text/event-stream\n" +
		"MCP-Protocol-Version: 2026-07-28\nMcp-Method: tools/call\nMcp-Name: echo"
	f.Add(uint8(0), modern, []byte(call))
	f.Add(uint8(0), "Content-Type: application/json\nAccept: application/json, text/event-stream",
		[]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`))
	f.Add(uint8(0), modern+"\nMcp-Name: other", []byte(call))
	f.Add(uint8(1), "Accept: text/event-stream\nMcp-Session-Id: nope", []byte(nil))
	f.Add(uint8(2), "Mcp-Session-Id: x", []byte(nil))
	f.Add(uint8(0), strings.Repeat("X-Pad: v\n", 40)+modern, []byte(`[`+call+`]`))
	f.Add(uint8(3), "Content-Type: \xff\xfe", []byte("\x00{"))

	srv, err := NewHTTPServer(&Config{Role: Server, Name: "fuzz", Version: "1.0",
		Capabilities: json.RawMessage(`{"tools":{}}`)}, nil, HTTPAppFunc(func(c *Conn, _ ConnKey, ev Event) {
		if req, ok := ev.(*RequestEvent); ok {
			if req.Method == "tools/list" {
				_ = c.Respond(req.ID, json.RawMessage(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`))
				return
			}
			_ = c.Respond(req.ID, json.RawMessage(`{"content":[{"type":"text","text":"echoed"}]}`))
		}
	}))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	methods := []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut}

	serve := func(method, headers string, body []byte) *httptest.ResponseRecorder {
		// A GET may open a stream that only its client's leaving ends.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, method, "http://127.0.0.1/mcp", bytes.NewReader(body))
		for _, line := range strings.Split(headers, "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok {
				req.Header[name] = append(req.Header[name], strings.TrimSpace(value))
			}
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}

	f.Fuzz(func(t *testing.T, method uint8, headers string, body []byte) {
		rec := serve(methods[int(method)%len(methods)], headers, body)
		if rec.Code < 200 || rec.Code > 599 || rec.Code == http.StatusInternalServerError {
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		if rec.Code == http.StatusOK && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") &&
			!json.Valid(rec.Body.Bytes()) {
			t.Fatalf("a 200 with invalid JSON: %q", rec.Body.Bytes())
		}
		// The server serves on.
		good := serve(http.MethodPost, modern, []byte(call))
		if good.Code != http.StatusOK || !bytes.Contains(good.Body.Bytes(), []byte(`"echoed"`)) {
			t.Fatalf("a good request after that one: %d %s", good.Code, good.Body.Bytes())
		}
	})
}
