package mcpwire

// Call sequences a host may get wrong, through the public API: each gets a clear error or
// goes on, never a crash, a read of freed memory or a hang.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// runUntilReturned runs client until h's work is done; it fails the test when Run does not return
// within 10 s.
func runUntilReturned(t *testing.T, client *HTTPClient, ctx context.Context, h HandlerFunc) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- client.Run(ctx, h) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// Close from the handler ends Run, which frees the client on its way out; the view the
// handler was given, kept, then returns ErrFreed (before: a crash in C, or a read of freed
// memory).
func TestHTTPClientClosedFromItsHandler(t *testing.T) {
	_, _, ts := newTestServer(t, []string{"2025-11-25"})
	client := legacyHTTPClient(t, ts.URL)
	var kept *Conn
	err := runUntilReturned(t, client, context.Background(), func(c *Conn, _ time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			kept = c
			if err := client.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	if !errors.Is(err, ErrFreed) {
		t.Fatalf("Run returned %v, want ErrFreed", err)
	}
	if kept == nil {
		t.Fatal("the session never became ready")
	}
	if _, err := kept.Request(time.Now(), "tools/list", nil, nil); !errors.Is(err, ErrFreed) {
		t.Fatalf("a kept view after Close: %v, want ErrFreed", err)
	}
	if err := client.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if err := client.Run(context.Background(), HandlerFunc(func(*Conn, time.Time, Event) {})); !errors.Is(err, ErrFreed) {
		t.Fatalf("Run after Close: %v, want ErrFreed", err)
	}
}

// Close from another goroutine while Run waits (cancel, then Close without waiting for Run):
// Run returns ErrFreed at once instead of using the freed client.
func TestHTTPClientClosedWhileRunWaits(t *testing.T) {
	_, _, ts := newTestServer(t, []string{"2025-11-25"})
	client := legacyHTTPClient(t, ts.URL)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- client.Run(context.Background(), HandlerFunc(func(_ *Conn, _ time.Time, ev Event) {
			if _, ok := ev.(*ReadyEvent); ok {
				close(ready)
			}
		}))
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the session never became ready")
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrFreed) {
			t.Fatalf("Run returned %v, want ErrFreed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if id := client.SessionID(); id != "" {
		t.Fatalf("a freed client still reports session %q", id)
	}
}

// A URL that cannot be a request's is refused at once, not at the first request (where Run
// used to wait for ever).
func TestNewHTTPClientRefusesAnUnusableURL(t *testing.T) {
	cfg := &Config{Role: Client, Name: "t", Version: "1"}
	for _, url := range []string{"http://127.0.0.1:80%zz/mcp", "127.0.0.1:8080/mcp", "ftp://host/mcp", "http:///mcp", ""} {
		if c, err := NewHTTPClient(cfg, url, nil); err == nil {
			c.Close()
			t.Errorf("%q was taken", url)
		}
	}
	if _, err := NewHTTPClient(nil, "http://127.0.0.1/mcp", nil); err == nil {
		t.Error("a nil Config was taken")
	}
}

// Run and Serve on a connection whose end was already handed out return ErrClosed at once
// (before: Run waited for ever, even past its ctx; Serve until its ctx ended).
func TestRunAndServeAgainAfterTheEnd(t *testing.T) {
	_, _, ts := newTestServer(t, []string{"2025-11-25"})
	client := legacyHTTPClient(t, ts.URL)
	err := runUntilReturned(t, client, context.Background(), func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			_ = c.Shutdown(now, time.Second)
		}
	})
	if err != nil {
		t.Fatalf("the first Run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := runUntilReturned(t, client, ctx, func(*Conn, time.Time, Event) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run again: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Run again took %v", d)
	}

	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out bytes.Buffer
	nop := HandlerFunc(func(*Conn, time.Time, Event) {})
	if err := Serve(ctx, conn, strings.NewReader(""), &out, nop); err != nil {
		t.Fatalf("the first Serve: %v", err)
	}
	start = time.Now()
	if err := Serve(ctx, conn, strings.NewReader(""), &out, nop); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve again: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Serve again took %v", d)
	}
	if err := Serve(ctx, conn, strings.NewReader(""), &out, nil); err == nil {
		t.Fatal("Serve with a nil Handler")
	}
	var none *Conn
	if err := none.Close(); err != nil {
		t.Fatalf("Close of a nil *Conn: %v", err)
	}
}

// An app that calls runtime.Goexit (t.FailNow in a test helper, say) ends its own goroutine
// only: the server's lock is released and later requests are served (before: every later
// request and Sessions() waited for ever).
func TestHTTPAppGoexitLeavesTheServerServing(t *testing.T) {
	first := true
	srv, err := NewHTTPServer(&Config{Role: Server, Name: "s", Version: "1", Capabilities: json.RawMessage(`{"tools":{}}`)},
		&HTTPOptions{ErrorLog: log.New(io.Discard, "", 0)}, HTTPAppFunc(func(c *Conn, _ ConnKey, ev Event) {
			if req, ok := ev.(*RequestEvent); ok {
				if first {
					first = false
					runtime.Goexit()
				}
				_ = c.Respond(req.ID, json.RawMessage(`{}`))
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	call := func() (int, error) {
		req := modernCall(context.Background(), "http://127.0.0.1/mcp", "echo", 1)
		w := httptest.NewRecorder()
		finished := make(chan struct{})
		go func() { defer close(finished); srv.ServeHTTP(w, req) }()
		select {
		case <-finished:
			return w.Code, nil
		case <-time.After(5 * time.Second):
			return 0, errors.New("the request hung")
		}
	}
	if _, err := call(); err != nil {
		t.Fatalf("the request whose app called Goexit: %v", err)
	}
	code, err := call()
	if err != nil || code != http.StatusOK {
		t.Fatalf("the next request: %d %v", code, err)
	}
	done := make(chan struct{})
	var streams int
	go func() { _, streams = srv.Sessions(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Sessions() hung")
	}
	if streams != 0 {
		t.Fatalf("%d streams held: the one whose app called Goexit was never let go", streams)
	}
}

// The documented graceful end, EndListenStreams then http.Server.Shutdown, finishes with a
// handshake-era GET stream open (before: Shutdown waited for ever).
func TestEndListenStreamsLetsShutdownFinishWithAGetStreamOpen(t *testing.T) {
	srv, _, ts := newTestServer(t, []string{"2025-11-25"})
	ts.Close() // (only its handler is used, behind a server the test can Shutdown)
	hs := &http.Server{Handler: srv}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/mcp"
	sid := openTestSession(t, url)
	get := openGetStream(t, url, sid)
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", get.StatusCode)
	}
	if n, err := srv.EndListenStreams(); err != nil || n != 1 {
		t.Fatalf("EndListenStreams: %d %v, want 1", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// A view kept past its callback and used from another goroutine returns ErrFreed, without a
// data race (before: the lender cleared the view's handle while the goroutine read it, which
// `go test -race` reports).
func TestAKeptServerViewUsedFromAnotherGoroutineReturnsErrFreed(t *testing.T) {
	kept := make(chan error, 20)
	srv, err := NewHTTPServer(&Config{Role: Server, Name: "s", Version: "1", Capabilities: json.RawMessage(`{"tools":{}}`)},
		nil, HTTPAppFunc(func(c *Conn, _ ConnKey, ev Event) {
			if req, ok := ev.(*RequestEvent); ok {
				_ = c.Respond(req.ID, json.RawMessage(`{"content":[]}`))
				go func() {
					time.Sleep(10 * time.Millisecond) // well after the callback returned
					kept <- c.Notify("notifications/message", nil)
				}()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for range cap(kept) {
		req := modernCall(context.Background(), "http://127.0.0.1/mcp", "echo", 1)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	for range cap(kept) {
		if err := <-kept; !errors.Is(err, ErrFreed) {
			t.Fatalf("a kept view: %v, want ErrFreed", err)
		}
	}
}

// EndSession from Run's handler leaves the handler's view usable (before: ErrStaleView, and
// a Shutdown through it did nothing, so Run went on until its ctx ended).
func TestEndSessionInTheHandlerKeepsItsView(t *testing.T) {
	srv, _, ts := newTestServer(t, []string{"2025-11-25"})
	client := legacyHTTPClient(t, ts.URL)
	var shutdownErr error
	err := runUntilReturned(t, client, context.Background(), func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			if !client.EndSession() {
				t.Error("no session to end")
			}
			shutdownErr = c.Shutdown(now, time.Second)
		}
	})
	if err != nil || shutdownErr != nil {
		t.Fatalf("Run: %v; Shutdown after EndSession: %v", err, shutdownErr)
	}
	waitFor(t, "the session deleted", func() bool { n, _ := srv.Sessions(); return n == 0 })
}

// A view kept by a goroutine is cut off as soon as its callback returns, not when the
// server's pass over its events ends: here the next callback of the same pass (the second
// request of a 2025-03-26 batch) waits for the kept view's call. That call reached the
// engine while the server went on polling it (a race on the C side, which -race cannot see;
// after Close, freed memory); it now returns ErrFreed.
func TestAViewKeptPastItsCallbackIsCutBeforeTheNextOne(t *testing.T) {
	proceed, kept := make(chan struct{}), make(chan error, 1)
	app := HTTPAppFunc(func(c *Conn, _ ConnKey, ev Event) {
		req, ok := ev.(*RequestEvent)
		if !ok {
			return
		}
		if req.ID.String() == "1" {
			go func() {
				<-proceed
				kept <- c.Notify("notifications/message", json.RawMessage(`{"level":"info","data":"late"}`))
			}()
		} else {
			close(proceed)
			if err := <-kept; !errors.Is(err, ErrFreed) {
				t.Errorf("a view kept past its callback: %v, want ErrFreed", err)
			}
		}
		_ = c.Respond(req.ID, json.RawMessage(`{"content":[]}`))
	})
	srv, err := NewHTTPServer(&Config{Role: Server, Name: "s", Version: "1",
		Capabilities: json.RawMessage(`{"tools":{},"logging":{}}`)}, nil, app)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	init := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":`+
		`{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	_, _ = io.ReadAll(init.Body)
	init.Body.Close()
	sid := init.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session (status %d)", init.StatusCode)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	batch := post(sid, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","arguments":{}}}]`)
	answer, _ := io.ReadAll(batch.Body)
	batch.Body.Close()
	if batch.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"id":2`) {
		t.Fatalf("the batch: status %d, %s", batch.StatusCode, answer)
	}
	if strings.Contains(string(answer), "late") {
		t.Fatalf("the kept view's notification was sent: %s", answer)
	}
}

// A zero HTTPClient (not made by NewHTTPClient) is a freed one: every method returns
// ErrFreed or nothing, and none panics (moving the engine's handle out of the client made
// each of them dereference a nil core).
func TestAZeroHTTPClientIsFreed(t *testing.T) {
	var c HTTPClient
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Run(context.Background(), HandlerFunc(func(*Conn, time.Time, Event) {})); !errors.Is(err, ErrFreed) {
		t.Fatalf("Run: %v", err)
	}
	if _, err := c.Conn().Request(time.Now(), "tools/list", nil, nil); !errors.Is(err, ErrFreed) {
		t.Fatalf("a request on its Conn: %v", err)
	}
	if c.SessionID() != "" || c.FailureText() != "" || c.TransportError() != "" || c.EndSession() {
		t.Fatal("a zero client reported something")
	}
}
