// Command httpserver serves the echo tool over Streamable HTTP at /mcp with one of four
// implementations, for whole-server load runs (.ci/go-bench):
//
//	httpserver -impl floor|floorapp|gosdk|mcpgo|mcpwire [-addr 127.0.0.1:0] [-sessions]
//
// It prints "listening on http://ADDR/mcp" once it accepts connections, and stops on SIGINT
// or SIGTERM.
//
//   - floor: a bare net/http handler that reads the body and answers every POST with a fixed
//     JSON-RPC result, no MCP at all: the ceiling net/http and the load generator allow.
//   - floorapp: the floor plus the echo application's own JSON work, no MCP (bench.FloorApp).
//   - gosdk: go-sdk's StreamableHTTPHandler, stateless with JSON responses (with -sessions:
//     sessions, still JSON responses).
//   - mcpgo: mcp-go's StreamableHTTPServer, stateless (with -sessions: stateful).
//   - mcpwire: mcpwire.HTTPServer, which serves stateless 2026-07-28 requests and
//     handshake-era sessions on the same endpoint (-sessions changes nothing).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/server"
	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/mcpwire/mcpwire/bindings/go/bench"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// floorBody is what the floor handler answers: the bytes of a real echo answer to id 1.
var floorBody = []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + bench.EchoText + `"}]}}`)

func floor(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(floorBody)
}

// handler builds the MCP endpoint of impl, and what to close at the end.
func handler(impl string, sessions bool) (http.Handler, func(), error) {
	switch impl {
	case "floor":
		return http.HandlerFunc(floor), func() {}, nil
	case "floorapp":
		return http.HandlerFunc(bench.FloorApp), func() {}, nil
	case "gosdk":
		server := bench.NewGoSDKServer()
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: !sessions, JSONResponse: true})
		return h, func() {}, nil
	case "mcpgo":
		opts := []mcpgo.StreamableHTTPOption{mcpgo.WithStateLess(!sessions)}
		if sessions {
			opts = append(opts, mcpgo.WithStateful(true))
		}
		h := mcpgo.NewStreamableHTTPServer(bench.NewMCPGoServer(), opts...)
		return h, func() { _ = h.Shutdown(context.Background()) }, nil
	case "mcpwire":
		h, err := mcpwire.NewHTTPServer(bench.MCPWireConfig(),
			&mcpwire.HTTPOptions{Tools: bench.MCPWireTools}, bench.MCPWireHTTPApp())
		if err != nil {
			return nil, nil, err
		}
		return h, func() { _ = h.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown -impl %q (floor, floorapp, gosdk, mcpgo, mcpwire)", impl)
}

func main() {
	impl := flag.String("impl", "", "floor, floorapp, gosdk, mcpgo or mcpwire")
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	sessions := flag.Bool("sessions", false, "gosdk, mcpgo: keep handshake-era sessions instead of serving statelessly")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("httpserver: ")

	h, closeImpl, err := handler(*impl, *sessions)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	case <-stop:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	closeImpl()
}
