package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/server"
	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The http.Handler benchmarks call each server's handler directly with a recorded stateless
// 2026-07-28 tools/call of echo, as net/http would after parsing the request: no sockets, so
// the figure is the handler's own CPU per request (and its allocations), without the load
// generator and the kernel that make whole-server runs noisy on a small machine. The floor
// reads the body and writes a fixed answer. Every answer is checked.

func floorHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` +
		EchoText + `"}]}}`))
}

// recorder is an httptest.ResponseRecorder that takes read and write deadlines, as
// net/http's own ResponseWriter does (mcpwire.HTTPServer sets one for the body and one for
// the answer; on a bare recorder the attempt would cost an error value that no real server
// pays). Setting one on a real connection costs about 0.1 µs (see benches/README.md).
type recorder struct{ *httptest.ResponseRecorder }

func (recorder) SetReadDeadline(time.Time) error  { return nil }
func (recorder) SetWriteDeadline(time.Time) error { return nil }

func benchHandler(b *testing.B, h http.Handler) {
	body := ModernCallBody(1)
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		rec := httptest.NewRecorder()
		h.ServeHTTP(recorder{rec}, req)
		return rec
	}
	rec := serve()
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
	}
	msg := bytes.TrimSpace(rec.Body.Bytes())
	if bytes.HasPrefix(msg, []byte("event:")) || bytes.HasPrefix(msg, []byte("data:")) {
		b.Fatalf("an SSE answer where JSON was asked for: %s", msg)
	}
	if err := CheckEchoResponse(msg, 1); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, startCPU := time.Now(), cpuTime()
	for b.Loop() {
		if rec := serve(); rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-startCPU
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "msg/cpu-s")
}

// BenchmarkHandler: the floor, the floor with the application's JSON work (FloorApp), then
// mcpwire.HTTPServer, mcp-go's StreamableHTTPServer and go-sdk's StreamableHTTPHandler, each
// stateless with JSON answers.
func BenchmarkHandler(b *testing.B) {
	b.Run("floor", func(b *testing.B) { benchHandler(b, http.HandlerFunc(floorHandler)) })
	b.Run("floorapp", func(b *testing.B) { benchHandler(b, http.HandlerFunc(FloorApp)) })
	b.Run("mcpwire", func(b *testing.B) {
		h, err := mcpwire.NewHTTPServer(MCPWireConfig(), &mcpwire.HTTPOptions{Tools: MCPWireTools},
			MCPWireHTTPApp())
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		benchHandler(b, h)
	})
	b.Run("mcpgo", func(b *testing.B) {
		h := mcpgo.NewStreamableHTTPServer(NewMCPGoServer(), mcpgo.WithStateLess(true))
		defer func() { _ = h.Shutdown(context.Background()) }()
		benchHandler(b, h)
	})
	b.Run("gosdk", func(b *testing.B) {
		server := NewGoSDKServer()
		benchHandler(b, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	})
}
