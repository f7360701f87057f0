// Command http_server is an MCP server over Streamable HTTP, in Go: net/http for HTTP, the
// mcpwire engine (through its C ABI) for MCP. One endpoint serves handshake-era sessions
// (2025-11-25 and older) and stateless 2026-07-28 requests. It serves examples/internal/app:
// the tools "echo" and "count" (progress over SSE), the resource "mem://greeting" and the
// prompt "greet".
//
//	go run ./examples/http_server -addr 127.0.0.1:8080   # prints "listening on http://…/mcp"
//
// SIGINT or SIGTERM stop it gracefully: no new connections, open answers finish (up to 5 s).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/mcpwire/mcpwire/bindings/go/examples/internal/app"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "where to listen (port 0 picks a free one)")
	legacy := flag.Bool("legacy", false, "serve the handshake era only")
	flag.Parse()
	if flag.NArg() > 0 { // (a mistyped flag after an argument would be ignored silently)
		fmt.Fprintf(os.Stderr, "%s: unexpected argument %q\n", "http_server", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}

	cfg := &mcpwire.Config{
		Role:         mcpwire.Server,
		Name:         "mcpwire-go-http-example",
		Version:      mcpwire.Version(),
		Capabilities: json.RawMessage(app.Capabilities),
		Instructions: app.Instructions,
	}
	if *legacy {
		cfg.Versions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	}
	var srv *mcpwire.HTTPServer
	// A tool's later steps answer through srv.With, from a timer's goroutine.
	handle := func(c *mcpwire.Conn, key mcpwire.ConnKey, ev mcpwire.Event) {
		req, ok := ev.(*mcpwire.RequestEvent)
		if !ok {
			return
		}
		later := func(d time.Duration, f func(c *mcpwire.Conn) error) {
			time.AfterFunc(d, func() { _ = srv.With(key, f) }) // ErrUnknownConnection: gone
		}
		if err := app.Answer(c, req, later); err != nil {
			fmt.Fprintln(os.Stderr, "http_server:", err)
		}
	}
	srv, err := mcpwire.NewHTTPServer(cfg, &mcpwire.HTTPOptions{Tools: json.RawMessage(app.Tools)},
		mcpwire.HTTPAppFunc(handle))
	if err != nil {
		fatal(err)
	}
	defer srv.Close()

	mux := http.NewServeMux()
	mux.Handle("/mcp", srv)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fatal(err)
	}
	// Idle keep-alive connections are closed after a minute (net/http keeps them for good
	// otherwise). HTTPOptions.BodyTimeout (30 s) bounds the time a body takes to arrive. No
	// WriteTimeout: it would cut SSE streams.
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		_, _ = srv.EndListenStreams()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown) // waits for open answers (SSE streams included)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fatal(err)
	}
	<-drained // Serve returns at once on Shutdown; the answers in flight finish first
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "http_server:", err)
	os.Exit(1)
}
