// Package mcpwire is the Go binding of mcpwire, a zero-copy, sans-IO engine for the Model
// Context Protocol (MCP), over its C ABI.
//
// The engine owns no sockets, goroutines, timers or clock. Bytes and the current time go
// in; events, bytes to write and the next deadline come out. Serve runs the loop over a
// byte stream (stdio, a pipe, a socket), HTTPServer serves Streamable HTTP as an
// http.Handler, and HTTPClient is a client over it. A host with its own event loop runs
// this one (serve.go's Serve is a complete one):
//
//	conn, err := mcpwire.NewConn(&mcpwire.Config{Role: mcpwire.Server, Name: "demo", Version: "1.0",
//		Capabilities: json.RawMessage(`{"tools":{}}`)}, time.Now())
//	if err != nil { ... }
//	defer conn.Close()
//	for {
//		// 1. Drain events; acting on them may issue commands.
//		for ev, ok := conn.NextEvent(); ok; ev, ok = conn.NextEvent() {
//			switch ev := ev.(type) {
//			case *mcpwire.RequestEvent:
//				conn.Respond(ev.ID, json.RawMessage(`{"tools":[]}`))
//			case *mcpwire.ClosedEvent:
//				return
//			}
//		}
//		// 2. Write what the engine has to send (partial writes are handled).
//		conn.WriteTo(os.Stdout)
//		// 3. Wait for input or the deadline, and feed it in.
//		deadline, armed := conn.NextDeadline()
//		... // select on the reader's channel and a timer for deadline (when armed)
//		// At most conn.InputPiece() bytes, then the events again: the rest of a large
//		// chunk waits for the next turn, so a peer that pipelines many requests gets
//		// every one answered instead of "too many requests in flight".
//		conn.Feed(time.Now(), chunk) // or conn.FeedEOF(time.Now()) at end of input
//		conn.HandleTimeout(time.Now())
//	}
//
// # Memory and lifetimes
//
// Go memory is lent to C only for the duration of a call: the library copies what it keeps
// and holds no Go pointer. Events are copied out of the engine (in batches, one cgo crossing
// for up to 256 events), so they own their data and may be kept freely. WriteTo copies
// the engine's output into a buffer of the Conn's own and hands the writer that, valid
// during that Write call only. Every call
// into C is followed by runtime.KeepAlive on the Conn, so the finalizer (a safety net for a
// Conn dropped without Close) can never free a handle mid-call.
//
// A Conn is safe for use by several goroutines: calls take turns, and Serve wakes for a
// command given on another goroutine (a tool answering later). Its events are one stream,
// drained by one goroutine; while Serve runs, Serve alone drains them and writes the output.
// An HTTPServer is safe for concurrent use; a Conn it lends is for
// its callback only (With lends one later). An HTTPClient is safe for concurrent use too: its
// Conn takes commands on any goroutine while Run runs, and Run wakes to send them.
//
// # Errors
//
// A call the engine refuses returns a *ResultError carrying the C ABI's result code.
// Compare with errors.Is against the sentinels (ErrClosed, ErrNotInitialized, ...) or take
// the code with errors.As. A few errors are the binding's own, plain errors: ErrFreed (the
// handle was closed, or a lent Conn outlived its lending), a nil handler, a second Run, an
// endpoint that is not an http or https URL. Codes 300-399 (ResultCode.IsRefused) are commands the engine refused; the
// connection (or the Tasks table) is unchanged. JSON-RPC error codes sent by the peer are event data
// (ErrorEvent.Code), never Go errors.
//
// # Building
//
// The package links the installed C library through pkg-config (#cgo pkg-config: mcpwire):
// install it with `make -C bindings/c install PREFIX=/usr/local` from the repository root.
// For another prefix, point pkg-config at it, and the dynamic loader too:
//
//	PKG_CONFIG_PATH=/prefix/lib/pkgconfig CGO_LDFLAGS=-Wl,-rpath,/prefix/lib go test ./...
package mcpwire
