// Command stdio_server is an MCP server over stdio, in Go on the mcpwire engine: the tool
// "echo" {text} (returns the text exactly), the tool "count" (progress over time, answered
// from a timer's goroutine), the resource "mem://greeting" and the prompt "greet"
// (examples/internal/app). Run it under any MCP client:
//
//	go build -o stdio_server ./examples/stdio_server && some-mcp-client -- ./stdio_server
//
// -tools-only serves the tools alone (no resources or prompts capability).
//
// At the end of input, requests still being answered are abandoned (the engine's rule for a
// peer that has gone: nobody would read the answer), so a "count" call piped in with nothing
// after it gets no answer; a client that waits for its answers keeps its end open.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/mcpwire/mcpwire/bindings/go/examples/internal/app"
)

func main() {
	toolsOnly := flag.Bool("tools-only", false, "serve the tools alone")
	flag.Parse()
	if flag.NArg() > 0 { // (a mistyped flag after an argument would be ignored silently)
		fmt.Fprintf(os.Stderr, "%s: unexpected argument %q\n", "stdio_server", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	caps := app.Capabilities
	if *toolsOnly {
		caps = app.WithoutResources
	}
	conn, err := mcpwire.NewConn(&mcpwire.Config{
		Role:         mcpwire.Server,
		Name:         "mcpwire-go-example",
		Version:      mcpwire.Version(),
		Capabilities: json.RawMessage(caps),
		Instructions: app.Instructions,
	}, time.Now())
	if err != nil {
		fatal(err)
	}
	defer conn.Close()
	// A write to a client that closed its end fails with EPIPE (Serve then reads the rest
	// of the input and returns) instead of killing the process: Go ends a program that
	// writes to a broken stdout with SIGPIPE unless the signal is ignored or caught.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// On a signal Serve closes gracefully, with two seconds' grace (Config.ShutdownGrace).
	// But a Write to a client that stopped reading cannot be interrupted on os.Stdout, which
	// takes no write deadline, so the wait is bounded here: a little after the grace the
	// process exits anyway. A second signal kills at once (stop gives the
	// signals back to their default).
	// (Only while Serve runs: stop, deferred, also ends ctx as main returns, and copied into
	// a function after which the program goes on, the timer would still end it.)
	served := make(chan struct{})
	context.AfterFunc(ctx, func() {
		stop()
		time.AfterFunc(3*time.Second, func() {
			select {
			case <-served:
				return
			default:
			}
			fmt.Fprintln(os.Stderr, "stdio_server: the client is not reading; exiting without the graceful close")
			os.Exit(1)
		})
	})
	// A tool's later steps run on a timer's goroutine and answer on conn directly: Serve
	// wakes for them and writes what they send. (After the end, conn refuses them.)
	later := func(d time.Duration, f func(c *mcpwire.Conn) error) {
		time.AfterFunc(d, func() { _ = f(conn) })
	}
	err = mcpwire.Serve(ctx, conn, os.Stdin, os.Stdout, mcpwire.HandlerFunc(
		func(c *mcpwire.Conn, now time.Time, ev mcpwire.Event) {
			if req, ok := ev.(*mcpwire.RequestEvent); ok {
				if err := app.Answer(c, req, later); err != nil {
					fmt.Fprintln(os.Stderr, "stdio_server:", err) // the request is gone; go on
				}
			}
		}))
	close(served)
	// After a signal Serve returns ctx.Err(): the graceful end. Anything else (a write cut
	// off past the grace, a read error) is reported.
	if err != nil && (ctx.Err() == nil || err != ctx.Err()) {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "stdio_server:", err)
	os.Exit(1)
}
