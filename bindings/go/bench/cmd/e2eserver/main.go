// Command e2eserver is a third-party MCP server for the end-to-end benchmark (benches/e2e):
// the tools "echo" and "add" served by the official go-sdk
// (github.com/modelcontextprotocol/go-sdk) or by mcp-go (github.com/mark3labs/mcp-go), over
// stdio or Streamable HTTP. It imports neither mcpwire nor package bench, so nothing of
// mcpwire is linked in.
//
//	e2eserver -impl gosdk|mcpgo -transport stdio
//	e2eserver -impl gosdk|mcpgo -transport http [-addr 127.0.0.1:0] [-stateless]
//
// (-cpuprofile FILE writes a CPU profile of the whole run.)
//
// stdio: newline-delimited JSON-RPC on stdin/stdout (go-sdk's StdioTransport, mcp-go's
// ServeStdio); nothing else is written to stdout, and the server exits at stdin EOF.
//
// http: the SDK's Streamable HTTP handler at /mcp under net/http. It prints
// "listening on http://ADDR/mcp" once it accepts connections.
//   - gosdk: StreamableHTTPHandler with JSONResponse (plain JSON bodies instead of SSE);
//     handshake-era sessions, or with -stateless no sessions (Stateless: true).
//   - mcpgo: StreamableHTTPServer, which answers with JSON bodies unless a handler sends
//     notifications first; sessions checked by the server (WithStateful(true)), or with
//     -stateless none (WithStateLess(true)).
//
// SIGINT and SIGTERM stop the server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgo "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools, the same for every server of the benchmark.
const (
	echoName        = "echo"
	echoDescription = "Returns its input text as one text content."
	echoInputSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`

	addName        = "add"
	addDescription = "Returns the sum a+b as one text content."
	addInputSchema = `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`

	implName    = "e2eserver"
	implVersion = "1.0.0"
)

// formatNumber prints a sum the way every server of the benchmark does: integral values
// without a decimal point (5, not 5.0), others in their shortest round-trip form.
func formatNumber(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// ---- go-sdk -----------------------------------------------------------------------------

// newGoSDKServer builds the go-sdk server. The tools are registered through the low-level
// Server.AddTool with the exact raw schemas; the handlers decode the raw arguments with
// encoding/json (the generic mcp.AddTool would infer a schema of its own and validate every
// call against it).
func newGoSDKServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: implName, Version: implVersion}, nil)
	s.AddTool(&mcp.Tool{Name: echoName, Description: echoDescription, InputSchema: json.RawMessage(echoInputSchema)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Text == nil {
				return goSDKToolError(`argument "text" (a string) is required`), nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: *args.Text}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: addName, Description: addDescription, InputSchema: json.RawMessage(addInputSchema)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				A *float64 `json:"a"`
				B *float64 `json:"b"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.A == nil || args.B == nil {
				return goSDKToolError(`arguments "a" and "b" (numbers) are required`), nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: formatNumber(*args.A + *args.B)}}}, nil
		})
	return s
}

func goSDKToolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// ---- mcp-go -----------------------------------------------------------------------------

// newMCPGoServer builds the mcp-go server: raw schemas, and the arguments read through
// mcp-go's own accessors (it decodes them into a map itself).
func newMCPGoServer() *mcpgo.MCPServer {
	s := mcpgo.NewMCPServer(implName, implVersion, mcpgo.WithToolCapabilities(false))
	s.AddTool(mcpgomcp.NewToolWithRawSchema(echoName, echoDescription, json.RawMessage(echoInputSchema)),
		func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcpgomcp.NewToolResultError(err.Error()), nil
			}
			return mcpgomcp.NewToolResultText(text), nil
		})
	s.AddTool(mcpgomcp.NewToolWithRawSchema(addName, addDescription, json.RawMessage(addInputSchema)),
		func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
			a, err := req.RequireFloat("a")
			if err != nil {
				return mcpgomcp.NewToolResultError(err.Error()), nil
			}
			b, err := req.RequireFloat("b")
			if err != nil {
				return mcpgomcp.NewToolResultError(err.Error()), nil
			}
			return mcpgomcp.NewToolResultText(formatNumber(a + b)), nil
		})
	return s
}

// ---- transports -------------------------------------------------------------------------

// serveStdio serves impl on stdin/stdout until EOF or a signal.
func serveStdio(impl string) error {
	switch impl {
	case "gosdk":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err := newGoSDKServer().Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil // stopped by a signal
		}
		return err
	case "mcpgo":
		// ServeStdio installs its own SIGINT/SIGTERM handling and answers a signal with
		// context.Canceled; stdin EOF returns nil.
		err := mcpgo.ServeStdio(newMCPGoServer())
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return fmt.Errorf("unknown -impl %q (gosdk, mcpgo)", impl)
}

// httpHandler builds the MCP endpoint of impl, and what to close at the end.
func httpHandler(impl string, stateless bool) (http.Handler, func(), error) {
	switch impl {
	case "gosdk":
		server := newGoSDKServer()
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: stateless, JSONResponse: true})
		return h, func() {}, nil
	case "mcpgo":
		opt := mcpgo.WithStateful(true)
		if stateless {
			opt = mcpgo.WithStateLess(true)
		}
		h := mcpgo.NewStreamableHTTPServer(newMCPGoServer(), opt)
		return h, func() { _ = h.Shutdown(context.Background()) }, nil
	}
	return nil, nil, fmt.Errorf("unknown -impl %q (gosdk, mcpgo)", impl)
}

// serveHTTP serves impl at http://addr/mcp until a signal.
func serveHTTP(impl, addr string, stateless bool) error {
	h, closeImpl, err := httpHandler(impl, stateless)
	if err != nil {
		return err
	}
	defer closeImpl()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// os.Stdout is unbuffered: the line is out once Printf returns, and the listener
	// already accepts connections (they wait in its backlog until Serve runs).
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-stop:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	return nil
}

func main() {
	impl := flag.String("impl", "", "gosdk or mcpgo")
	transport := flag.String("transport", "", "stdio or http")
	addr := flag.String("addr", "127.0.0.1:0", "http: address to listen on")
	stateless := flag.Bool("stateless", false, "http: serve without sessions")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("e2eserver: ")
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

	var err error
	switch *transport {
	case "stdio":
		err = serveStdio(*impl)
	case "http":
		err = serveHTTP(*impl, *addr, *stateless)
	default:
		err = fmt.Errorf("unknown -transport %q (stdio, http)", *transport)
	}
	if err != nil {
		pprof.StopCPUProfile()
		log.Fatal(err)
	}
}
