package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// testApp answers tools/list and tools/call "echo" at once, and holds "slow" calls for the
// test to answer (or cancel) later; it records what it saw.
type testApp struct {
	mu        sync.Mutex
	held      []heldCall
	cancelled int
	requests  int
}

type heldCall struct {
	key ConnKey
	id  ID
}

func (a *testApp) HandleMCP(c *Conn, key ConnKey, ev Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev := ev.(type) {
	case *PeerCancelledEvent:
		a.cancelled++
	case *RequestEvent:
		a.requests++
		switch ev.Method {
		case "tools/list":
			c.Respond(ev.ID, json.RawMessage(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"slow","inputSchema":{"type":"object"}}]}`))
		case "tools/call":
			var call struct{ Name string }
			json.Unmarshal(ev.Params, &call)
			if call.Name == "slow" {
				a.held = append(a.held, heldCall{key, ev.ID})
				return
			}
			if call.Name == "medium" { // 60 KiB of text: under the size that had a deadline
				c.Respond(ev.ID, json.RawMessage(`{"content":[{"type":"text","text":"`+
					strings.Repeat("m", 60<<10)+`"}]}`))
				return
			}
			if call.Name == "big" { // 8 MiB of text
				c.Respond(ev.ID, json.RawMessage(`{"content":[{"type":"text","text":"`+
					strings.Repeat("a", 8<<20)+`"}]}`))
				return
			}
			c.Respond(ev.ID, json.RawMessage(`{"content":[{"type":"text","text":"echoed"}]}`))
		default:
			c.Respond(ev.ID, json.RawMessage(`{}`))
		}
	}
}

func (a *testApp) snapshot() (held []heldCall, cancelled int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]heldCall(nil), a.held...), a.cancelled
}

func newTestServer(t *testing.T, versions []string) (*HTTPServer, *testApp, *httptest.Server) {
	t.Helper()
	return newTestServerWith(t, versions, nil)
}

func newTestServerWith(t *testing.T, versions []string, opts *HTTPOptions) (*HTTPServer, *testApp, *httptest.Server) {
	t.Helper()
	return newTestServerCaps(t, versions, `{"tools":{}}`, opts)
}

func newTestServerCaps(t *testing.T, versions []string, caps string, opts *HTTPOptions) (*HTTPServer, *testApp, *httptest.Server) {
	t.Helper()
	app := &testApp{}
	cfg := &Config{Role: Server, Name: "go-http-test", Version: "1.0", Versions: versions,
		Capabilities: json.RawMessage(caps)}
	srv, err := NewHTTPServer(cfg, opts, app)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return srv, app, ts
}

// runClient runs one session with an HTTPClient: tools/list, then tools/call echo, then a
// clean end; it returns the negotiated version.
func runClient(t *testing.T, url string, era ClientEra) string {
	t.Helper()
	return runClientWith(t, url, era, nil)
}

// runClientWith is runClient with the client's options.
func runClientWith(t *testing.T, url string, era ClientEra, opts *HTTPClientOptions) string {
	t.Helper()
	cfg := &Config{Role: Client, Name: "go-http-test-client", Version: "1.0", ClientEra: era}
	client, err := NewHTTPClient(cfg, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var version, step string
	var pending RequestID
	var failure error
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		fail := func(err error) {
			if failure == nil {
				failure = err
			}
			c.Shutdown(now, 0)
		}
		switch ev := ev.(type) {
		case *ReadyEvent:
			version = ev.Version
			step = "list"
			pending, err = c.Request(now, "tools/list", nil, nil)
			if err != nil {
				fail(err)
			}
		case *ResponseEvent:
			if ev.Request != pending {
				return
			}
			switch step {
			case "list":
				if !bytes.Contains(ev.Result, []byte(`"echo"`)) {
					fail(errors.New("tools/list: " + string(ev.Result)))
					return
				}
				step = "call"
				pending, err = c.Request(now, "tools/call", json.RawMessage(`{"name":"echo","arguments":{}}`), nil)
				if err != nil {
					fail(err)
				}
			case "call":
				if !bytes.Contains(ev.Result, []byte("echoed")) {
					fail(errors.New("tools/call: " + string(ev.Result)))
					return
				}
				step = "done"
				c.Shutdown(now, time.Second)
			}
		case *ErrorEvent, *FailedEvent, *TimedOutEvent:
			fail(errors.New("request failed"))
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if failure != nil || step != "done" {
		t.Fatalf("step %s: %v", step, failure)
	}
	return version
}

func TestHTTPSessionsInBothEras(t *testing.T) {
	_, _, ts := newTestServer(t, nil)
	if v := runClient(t, ts.URL, ClientEraAuto); v != "2026-07-28" {
		t.Fatalf("auto: %s", v)
	}
	if v := runClient(t, ts.URL, ClientEraLegacy); v != "2025-11-25" {
		t.Fatalf("legacy: %s", v)
	}
	// A server of the handshake era only: the probe falls back to initialize.
	_, _, legacy := newTestServer(t, handshakeEra)
	if v := runClient(t, legacy.URL, ClientEraAuto); v != "2025-11-25" {
		t.Fatalf("auto against legacy: %s", v)
	}
}

func TestHTTPConcurrentClients(t *testing.T) {
	srv, _, ts := newTestServer(t, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			era := ClientEraAuto
			if i%2 == 1 {
				era = ClientEraLegacy
			}
			runClient(t, ts.URL, era)
		}(i)
	}
	wg.Wait()
	// Handshake-era clients ended their sessions with DELETE... only when asked: Run does
	// not, so four sessions remain until they expire.
	if sessions, _ := srv.Sessions(); sessions != 4 {
		t.Fatalf("%d sessions", sessions)
	}
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// modernCall is a stateless 2026-07-28 tools/call of tool to url, with its headers.
func modernCall(ctx context.Context, url, tool string, id int) *http.Request {
	body := `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` + modernMeta + `}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	return req
}

func modernPost(t *testing.T, ctx context.Context, url, tool string, id int) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(modernCall(ctx, url, tool, id))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// http.Server.ReadTimeout bounds a request's head and body, not the SSE stream that
// follows: net/http lifts the read deadline once the body is read. (The docs said it cut
// streams, and told users to leave it unset.)
func TestHTTPReadTimeoutDoesNotCutAStream(t *testing.T) {
	srv, app, _ := newTestServer(t, nil)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadTimeout = 200 * time.Millisecond
	ts.Start()
	defer ts.Close()
	resp := modernPost(t, context.Background(), ts.URL, "slow", 1)
	defer resp.Body.Close()
	answerHeldLater(t, srv, app, resp, 4*ts.Config.ReadTimeout)
}

// answerHeldLater answers the one call the app holds with the text "later", after wait, and
// checks that the call's stream, resp, carries it. It returns the held call.
func answerHeldLater(t *testing.T, srv *HTTPServer, app *testApp, resp *http.Response, wait time.Duration) heldCall {
	t.Helper()
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	time.Sleep(wait)
	held, _ := app.snapshot()
	err := srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[{"type":"text","text":"later"}]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Contains(body, []byte(`"later"`)) {
		t.Fatalf("stream: %s, %v", body, err)
	}
	return held[0]
}

// AbandonStreams, at the end of a shutdown's grace: the call held on its stream gets -32603
// there, and the stream ends.
func TestHTTPAbandonStreamsAnswersHeldCallsWithAnError(t *testing.T) {
	srv, app, ts := newTestServer(t, nil)
	resp := modernPost(t, context.Background(), ts.URL, "slow", 1)
	defer resp.Body.Close()
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	n, err := srv.AbandonStreams()
	if err != nil || n != 1 {
		t.Fatalf("AbandonStreams: %d, %v", n, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Contains(body, []byte(`"code":-32603`)) {
		t.Fatalf("stream: %s, %v", body, err)
	}
	if n, err := srv.AbandonStreams(); n != 0 || err != nil {
		t.Fatalf("again: %d, %v", n, err)
	}
	srv.Close()
	if _, err := srv.AbandonStreams(); !errors.Is(err, ErrFreed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestHTTPAnswerLaterOnAnOpenStream(t *testing.T) {
	srv, app, ts := newTestServer(t, nil)
	resp := modernPost(t, context.Background(), ts.URL, "slow", 1)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	held := answerHeldLater(t, srv, app, resp, 0)
	// The stateless request is over: its key is gone.
	if err := srv.With(held.key, func(*Conn) error { return nil }); !errors.Is(err, ErrUnknownConnection) {
		t.Fatalf("With after the end: %v", err)
	}
}

func TestHTTPClientGoneCancelsTheRequest(t *testing.T) {
	_, app, ts := newTestServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	resp := modernPost(t, ctx, ts.URL, "slow", 2)
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	cancel()
	resp.Body.Close()
	waitFor(t, "the cancellation", func() bool { _, c := app.snapshot(); return c == 1 })
}

func TestHTTPRefusals(t *testing.T) {
	_, _, ts := newTestServer(t, nil)
	post := func(headers map[string]string, body string) int {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	if s := post(good, list); s != 200 {
		t.Fatalf("good: %d", s)
	}
	bad := map[string]string{}
	for k, v := range good {
		bad[k] = v
	}
	bad["Mcp-Method"] = "prompts/list"
	if s := post(bad, list); s != 400 {
		t.Fatalf("mismatched Mcp-Method: %d", s)
	}
	evil := map[string]string{"Origin": "http://evil.example"}
	for k, v := range good {
		evil[k] = v
	}
	if s := post(evil, list); s != 403 {
		t.Fatalf("foreign origin: %d", s)
	}
	if s := post(good, `{"pad":"`+strings.Repeat("x", 5<<20)+`"}`); s != 413 {
		t.Fatalf("big body: %d", s)
	}
}

func TestServeDrainsEveryAnswerAtEOF(t *testing.T) {
	conn := toolsServer(t)
	const n = 3000
	in := pipelined(n)
	var out bytes.Buffer
	err := Serve(context.Background(), conn, in, &out, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if req, ok := ev.(*RequestEvent); ok {
			c.Respond(req.ID, json.RawMessage(`{"tools":[]}`))
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != n+1 { // the initialize result, then every answer
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if !json.Valid(l) {
			t.Fatalf("a torn line: %q", l)
		}
	}
}

// Answers to requests read together that add up to more than the output bound all get out:
// Serve hands out the next event only while the output has room for its answers. Before,
// it handed out every event of a read first, and the answers past the bound failed
// ErrOutputFull with the peer reading all along (found by an audit of the stdio hosts).
func TestServeAnswersAddingUpPastTheOutputBoundAllGetOut(t *testing.T) {
	for _, bound := range []int{0, 1 << 20} { // the default 16 MiB, and a small one
		conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
			Capabilities: json.RawMessage(`{"tools":{}}`), Limits: Limits{MaxBufferedOutput: bound}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		size := 100 << 10
		if bound == 0 {
			size = 4 << 20 // forty are ten times the default bound
		}
		big := json.RawMessage(`{"text":"` + strings.Repeat("x", size) + `"}`)
		failed := 0
		var out bytes.Buffer
		err = Serve(context.Background(), conn, pipelined(40), &out, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			if req, ok := ev.(*RequestEvent); ok {
				if c.Respond(req.ID, big) != nil {
					failed++
				}
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if failed != 0 {
			t.Fatalf("bound %d: %d answers refused for a full output", bound, failed)
		}
		if got := bytes.Count(out.Bytes(), []byte("\n")); got != 41 {
			t.Fatalf("bound %d: %d lines, want the initialize result and 40 answers", bound, got)
		}
	}
}

// failingReader hands out its data, then fails with err in the same Read.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, r.err
	}
	return n, nil
}

// Every answer is written however the input ends: a Read that returns the last data together
// with io.EOF (as io.Reader allows), a last request without a newline, and a read error after
// data (Serve then returns that error, after the answers).
func TestServeAnswersWhatCameWithTheEndOfInput(t *testing.T) {
	broken := errors.New("the pipe broke")
	for _, tc := range []struct {
		name    string
		n       int
		reader  func(in []byte) io.Reader
		trimEOL bool
		want    error
	}{
		{"data with EOF, 3 requests", 3, func(in []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) }, false, nil},
		{"data with EOF, 1000 requests", 1000, func(in []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) }, false, nil},
		{"no newline at the end", 5, func(in []byte) io.Reader { return bytes.NewReader(in) }, true, nil},
		{"no newline, with EOF", 5, func(in []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) }, true, nil},
		{"a read error after data", 1000, func(in []byte) io.Reader { return &failingReader{in, broken} }, false, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := toolsServer(t)
			in := pipelined(tc.n).Bytes()
			if tc.trimEOL {
				in = bytes.TrimSuffix(in, []byte("\n"))
			}
			var out bytes.Buffer
			var failed int
			err := Serve(context.Background(), conn, tc.reader(in), &out, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
				if req, ok := ev.(*RequestEvent); ok {
					if c.Respond(req.ID, json.RawMessage(`{"tools":[]}`)) != nil {
						failed++
					}
				}
			}))
			if err != tc.want {
				t.Fatalf("Serve returned %v, want %v", err, tc.want)
			}
			if failed > 0 {
				t.Fatalf("%d answers were refused", failed)
			}
			lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
			if len(lines) != tc.n+1 {
				t.Fatalf("%d answers to %d requests", len(lines)-1, tc.n)
			}
		})
	}
}

// toolsServer is a handshake-era server Conn with the tools capability, closed at the end.
func toolsServer(t *testing.T) *Conn {
	t.Helper()
	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"tools":{}}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// pipelined is a client's input: the handshake, then n tools/list requests in one go.
func pipelined(n int) *bytes.Buffer {
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := 1; i <= n; i++ {
		in.WriteString(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/list"}` + "\n")
	}
	return &in
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// slowWriter takes a few bytes per write, slowly: Serve must wait for it, not fail.
type slowWriter struct{ bytes.Buffer }

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(10 * time.Microsecond)
	return w.Buffer.Write(p[:min(len(p), 512)])
}

func TestServeBackpressureWithASlowWriter(t *testing.T) {
	conn := toolsServer(t)
	const n = 20000
	in := pipelined(n)
	out := &slowWriter{}
	err := Serve(context.Background(), conn, in, out, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if req, ok := ev.(*RequestEvent); ok {
			if err := c.Respond(req.ID, json.RawMessage(`{"tools":[]}`)); err != nil {
				t.Errorf("respond: %v", err)
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(out.Bytes(), []byte("\n")); lines != n+1 {
		t.Fatalf("%d lines", lines)
	}
}

func TestServeStopsGracefullyOnCancel(t *testing.T) {
	conn, err := NewConn(serverConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, w := io.Pipe() // input that never ends
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, conn, r, io.Discard, HandlerFunc(func(*Conn, time.Time, Event) {})) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not stop")
	}
}

func TestHTTPKeptViewIsRefused(t *testing.T) {
	var kept *Conn
	var keptID ID
	cfg := &Config{Role: Server, Name: "kept", Version: "1.0", Capabilities: json.RawMessage(`{"tools":{}}`)}
	srv, err := NewHTTPServer(cfg, nil, HTTPAppFunc(func(c *Conn, key ConnKey, ev Event) {
		if req, ok := ev.(*RequestEvent); ok {
			kept, keptID = c, req.ID // a mistake: c dies when this returns
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	resp := modernPost(t, ctx, ts.URL, "slow", 3)
	defer resp.Body.Close()
	waitFor(t, "the request", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return kept != nil })
	srv.mu.Lock()
	err = kept.Respond(keptID, json.RawMessage(`{}`))
	srv.mu.Unlock()
	if !errors.Is(err, ErrFreed) {
		t.Fatalf("a kept view answered: %v", err)
	}
	cancel()
}

// A server dropped without Close, whose app refers to it and which holds a session (so its
// timers goroutine waits for a deadline), is still collected, and freed first.
func TestHTTPServerDroppedIsFreed(t *testing.T) {
	const n = 4
	collected := make(chan chan struct{}, n)
	for range n {
		var srv *HTTPServer
		srv, err := NewHTTPServer(serverConfig(), nil, HTTPAppFunc(func(c *Conn, key ConnKey, ev Event) {
			_ = srv // an app that keeps its server, as apps that call With do
		}))
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		openTestSession(t, ts.URL)
		ts.Close()
		runtime.AddCleanup(srv, func(done chan struct{}) { collected <- done }, srv.done)
	}
	limit := time.After(10 * time.Second)
	for got := 0; got < n; {
		runtime.GC()
		select {
		case done := <-collected:
			select {
			case <-done: // freed (its timers goroutine ends on it)
			case <-limit:
				t.Fatal("a server was collected but not freed")
			}
			got++
		case <-time.After(10 * time.Millisecond):
		case <-limit:
			t.Fatalf("%d of %d dropped servers collected", got, n)
		}
	}
}

// sessionPost sends one handshake-era message (in session sid, when not empty).
func sessionPost(t testing.TB, url, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// openTestSession opens a 2025-11-25 session on the test server at url; it returns its id.
func openTestSession(t testing.TB, url string) string {
	t.Helper()
	init := sessionPost(t, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":`+
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	_, _ = io.ReadAll(init.Body)
	init.Body.Close()
	sid := init.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session id (status %d)", init.StatusCode)
	}
	r := sessionPost(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.Body.Close()
	return sid
}

// openGetStream opens session sid's GET stream; the caller closes the body.
func openGetStream(t testing.TB, url, sid string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	get, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return get
}

// heldCallInASession opens a 2025-11-25 session on the test server at url and sends it a
// tools/call of "slow", which app holds unanswered (its stream stays open until the test
// ends); it returns the session id.
func heldCallInASession(t *testing.T, url string, app *testApp) string {
	t.Helper()
	sid := openTestSession(t, url)
	call := sessionPost(t, url, sid,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	t.Cleanup(func() { call.Body.Close() })
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	return sid
}

// A notification answered 202 reaches the app at once, not with the next request: here a
// cancellation of a call the app holds.
func TestHTTPNotificationEventsArriveWithoutAnotherRequest(t *testing.T) {
	_, app, ts := newTestServer(t, []string{"2025-11-25"})
	sid := heldCallInASession(t, ts.URL, app)
	r := sessionPost(t, ts.URL, sid,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: status %d", r.StatusCode)
	}
	waitFor(t, "the cancellation", func() bool { _, c := app.snapshot(); return c == 1 })
}

// A handler that panics takes Serve down with it (a panic is the app's bug, and goes on to
// Serve's caller), but the answers it gave before that still reach the peer.
func TestServeWritesGivenAnswersBeforeAHandlerPanicGoesOn(t *testing.T) {
	conn := toolsServer(t)
	in := pipelined(3) // ids 1, 2, 3 in one read: their events come in one batch
	var out bytes.Buffer
	panicked := func() (v any) {
		defer func() { v = recover() }()
		_ = Serve(context.Background(), conn, in, &out, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			req, ok := ev.(*RequestEvent)
			if !ok {
				return
			}
			if req.ID.String() == "3" {
				panic("a bug in the tool")
			}
			if err := c.Respond(req.ID, json.RawMessage(`{"tools":[]}`)); err != nil {
				t.Errorf("respond: %v", err)
			}
		}))
		return nil
	}()
	if panicked != "a bug in the tool" {
		t.Fatalf("the panic did not reach the caller: %v", panicked)
	}
	if out.Len() == 0 {
		t.Fatal("nothing was written: the answers given before the panic were lost")
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	var ids []string
	for _, l := range lines {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("a torn line %q: %v", l, err)
		}
		ids = append(ids, string(m.ID))
	}
	if strings.Join(ids, ",") != "0,1,2" {
		t.Fatalf("answers written before the panic went on: ids %v", ids)
	}
}

// postHeadOnly sends a POST's head declaring a body of length bytes, and only the first few
// of them, then reads the answer (10 s at most); it returns it and how long it took.
func postHeadOnly(t *testing.T, url string, length int) (*http.Response, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	start := time.Now()
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{\"jsonrpc\":", length)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body of %d bytes that does not come: %v", length, err)
	}
	resp.Body.Close()
	return resp, time.Since(start)
}

// A client that sends its headers and then trickles its body gets 408 once BodyTimeout has
// passed, instead of holding the request (and its buffer) open for as long as it likes.
func TestHTTPSlowBodyGets408(t *testing.T) {
	_, app, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 150 * time.Millisecond})
	resp, waited := postHeadOnly(t, ts.URL, 200)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	if waited < 100*time.Millisecond {
		t.Fatalf("408 after %v, before the body timeout", waited)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if app.requests != 0 {
		t.Fatalf("the app saw %d requests", app.requests)
	}
}

// trickledCall sends a stateless tools/call of echo over a connection of its own: its head,
// then its body (padded with spaces to size bytes) piece bytes every 50 ms for trickle, then
// the rest at once. It returns the answer's status and body (5 s at most) and how long after
// the head it came. The pace is kept by the clock, not by the sleeps: each step sends all
// that is due since the start (a piece at once, then a piece per 50 ms), so an oversleep or
// a stall on a loaded machine is caught up at the next step instead of lowering the rate.
func trickledCall(t *testing.T, url string, size, piece int, trickle time.Duration) (int, string, time.Duration) {
	t.Helper()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},` + modernMeta + `}}`
	body := call + strings.Repeat(" ", size-len(call))
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	t.Cleanup(func() {
		conn.Close() // (a write still trickling fails)
		<-sent
	})
	start := time.Now()
	_, err = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"+
		"Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: "+itoa(size)+"\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(sent)
		const step = 50 * time.Millisecond
		written := 0
		for elapsed := time.Since(start); written < len(body) && elapsed < trickle; elapsed = time.Since(start) {
			due := min(piece*(1+int(elapsed/step)), len(body))
			if due > written {
				if _, err := io.WriteString(conn, body[written:due]); err != nil {
					return
				}
				written = due
			}
			time.Sleep(step - elapsed%step) // to the next piece's time
		}
		_, _ = io.WriteString(conn, body[written:])
	}()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body after %v: %v", time.Since(start), err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(answer), time.Since(start)
}

// A body trickled below MinBodyRate gets 408 once BodyRateGrace has passed, long before
// BodyTimeout: a slow client no longer holds its request (and its connection, which a
// connection cap counts) for the whole body timeout.
func TestHTTPBodyBelowTheMinimumRateGets408(t *testing.T) {
	grace := 300 * time.Millisecond
	_, app, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 30 * time.Second,
		MinBodyRate: 1000, BodyRateGrace: grace})
	status, _, waited := trickledCall(t, ts.URL, 10000, 5, time.Minute) // 100 bytes/s
	if status != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", status)
	}
	if waited < grace || waited > 2*time.Second {
		t.Fatalf("408 after %v: want it soon after the %v grace", waited, grace)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if app.requests != 0 {
		t.Fatalf("the app saw %d requests", app.requests)
	}
}

// A body that keeps above MinBodyRate is served, though it takes longer than the grace: the
// deadline moves on with the bytes received.
func TestHTTPBodyAboveTheMinimumRateIsServed(t *testing.T) {
	// (A grace that a stall at the start, under -race on a loaded machine, cannot outlast.)
	grace := time.Second
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 30 * time.Second,
		MinBodyRate: 1000, BodyRateGrace: grace})
	// 150 bytes every 50 ms: 3,000 bytes/s, for a second past the grace.
	status, answer, waited := trickledCall(t, ts.URL, 10000, 150, grace+time.Second)
	if status != http.StatusOK || !strings.Contains(answer, `"echoed"`) {
		t.Fatalf("status %d after %v: %s", status, waited, answer)
	}
	if waited < grace+time.Second {
		t.Fatalf("answered after %v, before the body was sent", waited)
	}
}

// A negative MinBodyRate turns the minimum off: a body trickled far below the default rate,
// past the grace, is served.
func TestHTTPNegativeMinBodyRateTurnsItOff(t *testing.T) {
	grace := 200 * time.Millisecond
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 10 * time.Second,
		MinBodyRate: -1, BodyRateGrace: grace})
	// 5 bytes every 50 ms: 100 bytes/s, under the default 240.
	status, answer, waited := trickledCall(t, ts.URL, 1000, 5, 3*grace)
	if status != http.StatusOK || !strings.Contains(answer, `"echoed"`) {
		t.Fatalf("status %d after %v: %s", status, waited, answer)
	}
}

// A body declared larger than MaxBody is refused with 413 at once, before any of it is read
// (no wait for the body timeout), and the connection is closed; one of unknown length
// (chunked) that grows past MaxBody gets 413 too.
func TestHTTPOversizedBodiesGet413(t *testing.T) {
	_, app, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 5 * time.Second, MaxBody: 1000})
	resp, waited := postHeadOnly(t, ts.URL, 100000000)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("status %d, close %v: want 413 and a closed connection", resp.StatusCode, resp.Close)
	}
	if waited > 2*time.Second {
		t.Fatalf("413 after %v: the server waited for the body", waited)
	}

	// Chunked: the length is known only once the limit is passed.
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 20; i++ {
			if _, err := pw.Write([]byte(strings.Repeat("x", 100))); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", ts.URL, pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.ContentLength = -1 // unknown: sent chunked
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: status %d, want 413", resp.StatusCode)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if app.requests != 0 {
		t.Fatalf("the app saw %d requests", app.requests)
	}
}

// A body over MaxBody whose client is still sending it is read and dropped before the 413,
// so the client reads the answer; it was answered at once and the connection closed under the
// upload (Node's fetch and httpx saw a broken pipe).
func TestHTTPOverLimitBodyIsReadBeforeThe413(t *testing.T) {
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 5 * time.Second, MaxBody: 1000})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","pad":"` + strings.Repeat("x", 12<<20) + `"}`
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if err != nil {
		t.Fatalf("the upload was cut: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// A body declared over MaxBody (but not so far over that it is refused unread) whose bytes
// do not come is read and dropped at MinBodyRate too: its 413 comes soon after the grace. The
// drop waited for the whole BodyTimeout, so a slot was held six times as long as a body
// within the limit that trickles could hold it.
func TestHTTPOverLimitBodyThatDoesNotComeIsDroppedAtTheMinimumRate(t *testing.T) {
	grace := 300 * time.Millisecond
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 10 * time.Second,
		MaxBody: 1000, MinBodyRate: 1000, BodyRateGrace: grace})
	resp, waited := postHeadOnly(t, ts.URL, 2000)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	if waited < grace || waited > 3*time.Second {
		t.Fatalf("413 after %v: want it soon after the %v grace", waited, grace)
	}
}

// The same for a chunked body that passed MaxBody and then stopped: the rest was dropped
// within BodyTimeout alone.
func TestHTTPChunkedOverLimitBodyThatStopsIsDroppedAtTheMinimumRate(t *testing.T) {
	grace := 300 * time.Millisecond
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 10 * time.Second,
		MaxBody: 1000, MinBodyRate: 1000, BodyRateGrace: grace})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	chunk := strings.Repeat("x", 1500)
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
		len(chunk), chunk)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after %v: %v", time.Since(start), err)
	}
	resp.Body.Close()
	waited := time.Since(start)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	if waited > 3*time.Second {
		t.Fatalf("413 after %v: want it soon after the %v grace", waited, grace)
	}
}

// The most read and dropped before a 413 is four times MaxBody, at least 16 MiB, and never
// less than MaxBody itself: past MaxInt/4 the product wrapped and the limit fell back to
// 16 MiB.
func TestHTTPDiscardLimitAtTheLargestMaxBody(t *testing.T) {
	for _, tc := range []struct{ maxBody, want int }{
		{0, 16 << 20}, {1000, 16 << 20}, {8 << 20, 32 << 20},
		{math.MaxInt / 4, math.MaxInt / 4 * 4}, {math.MaxInt/4 + 1, math.MaxInt / 4 * 4}, {math.MaxInt, math.MaxInt / 4 * 4},
	} {
		srv, _, _ := newTestServerWith(t, nil, &HTTPOptions{MaxBody: tc.maxBody})
		if got := srv.discardLimit(); got != tc.want {
			t.Errorf("MaxBody %d: discardLimit %d, want %d", tc.maxBody, got, tc.want)
		}
	}
}

// MaxBody: math.MaxInt ("no limit") keeps the bounds worked out from it: a body's buffer
// still doubles (it grew 512 bytes at a time, copying the body each time: quadratic), and
// MaxBodyTotal still fits one body of MaxBody (it wrapped and stayed at 64 MiB).
func TestHTTPNoBodyLimitKeepsTheBodyBufferDoubling(t *testing.T) {
	srv, _, _ := newTestServerWith(t, nil, &HTTPOptions{MaxBody: math.MaxInt})
	if srv.maxTotal < int64(srv.maxBody) {
		t.Fatalf("MaxBodyTotal %d under MaxBody %d", srv.maxTotal, srv.maxBody)
	}
	// A reader that fills whatever it is given reads the body in as many pieces as the buffer
	// grew: about 12 doubling from 512 bytes, 2,048 growing 512 bytes at a time. (Counted, not
	// measured with testing.AllocsPerRun: other tests' goroutines allocate meanwhile.)
	body := &countingReader{r: bytes.NewReader(make([]byte, 1<<20))}
	buf, taken, err := srv.readBody(httptest.NewRecorder(), body, true, nil)
	if err != nil || len(buf) != 1<<20 {
		t.Fatalf("read %d bytes: %v", len(buf), err)
	}
	srv.bodies.Add(-taken)
	if body.reads > 40 {
		t.Fatalf("a 1 MiB body was read in %d pieces", body.reads)
	}
}

// countingReader counts the Read calls made on r.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// dialWithASmallReceiveBuffer connects to the test server at url with a 4 KiB receive
// buffer, as a client that reads little would; closed when the test ends.
func dialWithASmallReceiveBuffer(t *testing.T, url string) net.Conn {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A client that stops reading a large answer: once a write makes no progress for
// SendTimeout the connection is closed, and the answer is no longer held (it was held, with
// the handler's goroutine and buffers, as long as the client kept the connection open).
func TestHTTPSendTimeoutCutsAClientThatStopsReading(t *testing.T) {
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{SendTimeout: 300 * time.Millisecond})
	conn := dialWithASmallReceiveBuffer(t, ts.URL)
	req := modernCall(context.Background(), ts.URL, "big", 1)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // reads nothing for longer than SendTimeout
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was never closed (%d bytes read)", n)
	}
	if n >= 8<<20 {
		t.Fatalf("the whole answer came (%d bytes)", n)
	}
}

// A client that reads a large answer steadily, only slowly, gets all of it: the send timeout
// bounds each piece of the write, as it does a stream's, not the whole answer (an 8 MiB
// answer was cut after SendTimeout, and the call was lost: it had been answered).
func TestHTTPSendTimeoutSparesASlowButSteadyReader(t *testing.T) {
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{SendTimeout: 500 * time.Millisecond})
	conn := dialWithASmallReceiveBuffer(t, ts.URL)
	if err := modernCall(context.Background(), ts.URL, "big", 1).Write(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	buf := make([]byte, 64<<10)
	for { // 64 KiB every 10 ms: 8 MiB take over a second, no piece near 500 ms
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got < 8<<20 {
		t.Fatalf("the answer was cut after %d bytes, with the client reading all along", got)
	}
}

// An SSE stream does not keep the request's buffers, grown by the requests before it (a 60
// KiB answer here), for as long as it stays open: 64 held streams after such answers kept
// about 4 MiB more than 64 after none, the pooled buffers given back only when each stream
// ended (found by a review of the Go server).
func TestHTTPHeldStreamsDoNotKeepTheRequestBuffers(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 64
	held := func(afterAnswers bool) uint64 {
		_, app, ts := newTestServer(t, nil)
		before := heap()
		var streams []*http.Response
		for i := range n {
			if afterAnswers {
				r := modernPost(t, context.Background(), ts.URL, "medium", 1000+i)
				_, _ = io.ReadAll(r.Body)
				r.Body.Close()
			}
			streams = append(streams, modernPost(t, context.Background(), ts.URL, "slow", i+1))
		}
		waitFor(t, "the held calls", func() bool { h, _ := app.snapshot(); return len(h) == n })
		after := heap()
		for _, r := range streams {
			r.Body.Close()
		}
		return after - min(after, before)
	}
	plain := held(false)
	grown := held(true)
	if grown > plain+n*32<<10 {
		t.Fatalf("%d held streams keep %d KiB after large answers, %d KiB after none",
			n, grown>>10, plain>>10)
	}
}

// A stream that goes quiet does not keep its copy of the last large message it wrote (up to
// 256 KiB per stream: a server with many quiet streams kept as many copies).
func TestHTTPQuietStreamsDoNotKeepTheirLastLargeMessage(t *testing.T) {
	srv, app, ts := newTestServer(t, nil)
	const n = 64
	var readers []*bufio.Reader
	for i := range n {
		body := `{"jsonrpc":"2.0","id":` + itoa(i+1) + `,"method":"tools/call","params":{"name":"slow",` +
			`"arguments":{},"_meta":{"progressToken":` + itoa(i+1) +
			`,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req := modernCall(context.Background(), ts.URL, "slow", i+1)
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		readers = append(readers, bufio.NewReader(resp.Body))
	}
	waitFor(t, "the held calls", func() bool { h, _ := app.snapshot(); return len(h) == n })
	held, _ := app.snapshot()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	big := strings.Repeat("p", 200<<10)
	for _, h := range held {
		err := srv.With(h.key, func(c *Conn) error {
			return c.Progress(h.id, ProgressUpdate{Progress: 1, Message: big})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range readers { // each stream wrote its message, then waits
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			if strings.HasPrefix(line, "data:") && strings.Contains(line, big) {
				break
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // every stream's goroutine back in its wait
	after := heap()
	if grew := after - min(after, before); grew > n*64<<10 {
		t.Fatalf("%d quiet streams keep %d KiB", n, grew>>10)
	}
}

// The same for a client that pipelines many small answers' requests and reads none: each
// answer fits in the socket's buffers, but together they fill them, and a write of one blocks.
// Only answers over 64 KiB had a deadline, so the connection (and its goroutine) was held
// for good, and a connection cap filled with such clients locked everyone else out.
func TestHTTPSendTimeoutCutsAPipeliningClientThatStopsReading(t *testing.T) {
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{SendTimeout: 300 * time.Millisecond})
	conn := dialWithASmallReceiveBuffer(t, ts.URL)
	const calls = 300 // 18 MiB of answers, more than the kernel buffers on loopback
	go func() {
		for i := range calls {
			if modernCall(context.Background(), ts.URL, "medium", i+1).Write(conn) != nil {
				return
			}
		}
	}()
	time.Sleep(2 * time.Second) // reads nothing for longer than SendTimeout
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was never closed (%d bytes read)", n)
	}
	if n >= calls*60<<10 {
		t.Fatalf("every answer came (%d bytes)", n)
	}
}

// An answer's write deadline outlives its handler, for net/http's flush after it returns: a
// kept-alive connection's next request must not meet it once it has passed (its 100
// Continue and its answer would fail to be written, and the connection close). net/http
// lifts it after that flush; this holds it to that.
func TestHTTPAKeptAliveConnectionServesAfterTheLastAnswersDeadline(t *testing.T) {
	_, _, ts := newTestServerWith(t, nil, &HTTPOptions{SendTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	call := func(id int, expect bool) {
		t.Helper()
		req := modernCall(context.Background(), ts.URL, "echo", id)
		body, _ := io.ReadAll(req.Body)
		head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"+
			"Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: %d\r\n",
			req.URL.Host, len(body))
		if expect {
			head += "Expect: 100-continue\r\n"
		}
		if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
			t.Fatal(err)
		}
		if expect {
			line, err := rd.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
				t.Fatalf("call %d: %q %v", id, line, err)
			}
			if _, err := rd.ReadString('\n'); err != nil { // the blank line after it
				t.Fatal(err)
			}
		}
		if _, err := conn.Write(body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("call %d: %v", id, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(answer), "echoed") {
			t.Fatalf("call %d: %d %s", id, resp.StatusCode, answer)
		}
	}
	call(1, false)
	time.Sleep(500 * time.Millisecond) // past the first answer's deadline
	call(2, true)
	call(3, false)
}

// newHTTP2Server serves srv over TLS with HTTP/2, as a host behind its own certificate
// would; the returned client speaks HTTP/2 to it.
func newHTTP2Server(t *testing.T, srv *HTTPServer) (*httptest.Server, *http.Client) {
	t.Helper()
	ts := httptest.NewUnstartedServer(srv)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, ts.Client()
}

// Over HTTP/2 a write deadline left armed fires by itself: net/http's HTTP/2 server resets
// the stream when it passes, written to or not. A quiet SSE stream (no keepalive) whose
// answer comes later than SendTimeout must still carry it; the deadline set for the stream's
// head was left armed while it waited, and the stream was reset under a client that read.
func TestHTTP2QuietStreamOutlivesTheSendTimeout(t *testing.T) {
	srv, app, _ := newTestServerWith(t, nil, &HTTPOptions{SendTimeout: 300 * time.Millisecond, KeepAlive: -1})
	ts, client := newHTTP2Server(t, srv)
	resp, err := client.Do(modernCall(context.Background(), ts.URL, "slow", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	answerHeldLater(t, srv, app, resp, 4*300*time.Millisecond)
}

// Both eras over HTTP/2 (TLS, as a browser or a proxy would speak it), with the Go client.
func TestHTTP2SessionsInBothEras(t *testing.T) {
	srv, _, _ := newTestServer(t, nil)
	ts, client := newHTTP2Server(t, srv)
	opts := &HTTPClientOptions{Client: client}
	if v := runClientWith(t, ts.URL, ClientEraAuto, opts); v != "2026-07-28" {
		t.Fatalf("auto: %s", v)
	}
	if v := runClientWith(t, ts.URL, ClientEraLegacy, opts); v != "2025-11-25" {
		t.Fatalf("legacy: %s", v)
	}
}

// A 413 over HTTP/2 leaves the connection to the other requests on it: "Connection: close"
// (HTTP/1's way to end a connection whose body was not read) makes net/http's HTTP/2 server
// send GOAWAY, and the client's next request needed a new connection.
func TestHTTP2OversizedBodyKeepsTheConnection(t *testing.T) {
	srv, _, _ := newTestServerWith(t, nil, &HTTPOptions{MaxBody: 1000})
	ts, client := newHTTP2Server(t, srv)
	do := func(req *http.Request) (status int, reused bool) {
		t.Helper()
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, reused
	}
	big := modernCall(context.Background(), ts.URL, "echo", 1)
	pad := strings.Repeat("x", 2000)
	big.Body, big.ContentLength = io.NopCloser(strings.NewReader(pad)), int64(len(pad))
	if status, _ := do(big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", status)
	}
	time.Sleep(100 * time.Millisecond) // a GOAWAY, if any, reaches the client
	status, reused := do(modernCall(context.Background(), ts.URL, "echo", 2))
	if status != http.StatusOK || !reused {
		t.Fatalf("the request after the 413 needed a new connection (status %d)", status)
	}
}

// servedBehind serves a test server (ErrorLog to logged) behind a middleware that wraps
// each http.ResponseWriter with wrap.
func servedBehind(t *testing.T, logged *lockedBuffer, wrap func(http.ResponseWriter) http.ResponseWriter) (*HTTPServer, *testApp, *httptest.Server) {
	t.Helper()
	srv, app, _ := newTestServerWith(t, nil, &HTTPOptions{ErrorLog: log.New(logged, "", 0)})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(wrap(w), r)
	}))
	t.Cleanup(ts.Close)
	return srv, app, ts
}

// A server of the stateless era alone refuses DELETE as well: the 405 of a GET it cannot
// stream says it takes POST only (it named DELETE too).
func TestHTTPUnflushableStatelessServerAllowsPostOnly(t *testing.T) {
	srv, _, _ := newTestServerWith(t, []string{"2026-07-28"}, nil)
	req := httptest.NewRequest("GET", "http://127.0.0.1/", nil)
	req.Header.Set("Accept", "text/event-stream")
	rec := hiddenFlush{httptest.NewRecorder()}
	srv.ServeHTTP(rec, req)
	got := rec.ResponseWriter.(*httptest.ResponseRecorder)
	if got.Code != http.StatusMethodNotAllowed || got.Header().Get("Allow") != "POST" {
		t.Fatalf("status %d, Allow %q; want 405 with Allow: POST", got.Code, got.Header().Get("Allow"))
	}
}

// flushOnly wraps a ResponseWriter as many middlewares do: with Flush, without Unwrap, so
// http.ResponseController cannot reach the deadlines of the writer inside.
type flushOnly struct{ http.ResponseWriter }

func (f flushOnly) Flush() { f.ResponseWriter.(http.Flusher).Flush() }

// Behind such a wrapper no deadline can be set, so BodyTimeout, MinBodyRate and SendTimeout
// do nothing: ErrorLog says so, once. The error was dropped, and nothing told the operator
// why slow clients were never cut off. Requests are still served.
func TestHTTPAWriterWithoutDeadlinesIsReportedOnce(t *testing.T) {
	logged := new(lockedBuffer)
	_, _, ts := servedBehind(t, logged, func(w http.ResponseWriter) http.ResponseWriter { return flushOnly{w} })
	for id := range 3 {
		resp := modernPost(t, context.Background(), ts.URL, "echo", id+1)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("echoed")) {
			t.Fatalf("call %d: %d %s", id, resp.StatusCode, body)
		}
	}
	if n := strings.Count(logged.String(), "takes no deadlines"); n != 1 {
		t.Fatalf("logged %d times: %q", n, logged.String())
	}
}

// hiddenFlush wraps a ResponseWriter as a careless middleware would: without Flush, and
// without Unwrap.
type hiddenFlush struct{ http.ResponseWriter }

// Behind a wrapper that hides Flush, a GET stream could send nothing, not even its head,
// until net/http's buffer filled: the client waited in vain. It gets 405 (no GET stream
// here), a POST's stream still carries its answer at its end, and ErrorLog says why, once.
func TestHTTPUnflushableWriterRefusesGetStreamsAndSaysWhy(t *testing.T) {
	logged := new(lockedBuffer)
	srv, app, ts := servedBehind(t, logged, func(w http.ResponseWriter) http.ResponseWriter { return hiddenFlush{w} })
	sid := openTestSession(t, ts.URL)
	req, _ := http.NewRequest("GET", ts.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	client := &http.Client{Timeout: 3 * time.Second}
	get, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed || get.Header.Get("Allow") != "POST, DELETE" {
		t.Fatalf("GET: status %d, Allow %q; want 405 with Allow: POST, DELETE", get.StatusCode, get.Header.Get("Allow"))
	}
	// A foreign Origin still gets the 403 the spec requires (it got the 405 first).
	req.Header.Set("Origin", "http://evil.example")
	get, err = client.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusForbidden {
		t.Fatalf("GET with a foreign Origin: status %d, want 403", get.StatusCode)
	}
	// The POST's head waits in the buffer with its stream: it comes with the answer.
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(modernCall(context.Background(), ts.URL, "slow", 1))
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	held, _ := app.snapshot()
	err = srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[{"type":"text","text":"later"}]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	resp := <-got
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	if body, err := io.ReadAll(resp.Body); err != nil || !bytes.Contains(body, []byte(`"later"`)) {
		t.Fatalf("stream: %s, %v", body, err)
	}
	if n := strings.Count(logged.String(), "cannot flush"); n != 1 {
		t.Fatalf("logged %d times, want once: %q", n, logged.String())
	}
}

// A body net/http cannot read (a chunk size that is not hex, a chunk longer than it said) is
// 400, as Rust's and C's hosts answer; it was an empty 200, which net/http sends for a handler
// that writes nothing.
func TestHTTPMalformedChunkedBodyGets400(t *testing.T) {
	_, app, ts := newTestServerWith(t, nil, nil)
	addr := strings.TrimPrefix(ts.URL, "http://")
	for _, chunks := range []string{"ZZ\r\n{}\r\n0\r\n\r\n", "1\r\n{}\r\n0\r\n\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%s", addr, chunks)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%q: status %d, want 400", chunks, resp.StatusCode)
		}
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if app.requests != 0 {
		t.Fatalf("the app saw %d requests", app.requests)
	}
}

// answerSlowCallLate makes a "slow" call to url, answers it 400 ms later through srv, and
// fails the test unless the answer reaches the client on the call's SSE stream.
func answerSlowCallLate(t *testing.T, srv *HTTPServer, app *testApp, url string) {
	t.Helper()
	resp := modernPost(t, context.Background(), url, "slow", 1)
	defer resp.Body.Close()
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	time.Sleep(400 * time.Millisecond)
	held, _ := app.snapshot()
	err := srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[{"type":"text","text":"much later"}]}`))
	})
	if err != nil {
		t.Fatalf("the stream was cut: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"much later"`)) {
		t.Fatalf("stream: %s", body)
	}
}

// The body's deadline ends with the body: an SSE answer that comes long after it still
// reaches the client (net/http's ReadTimeout would cut the stream there).
func TestHTTPStreamOutlivesTheBodyTimeout(t *testing.T) {
	srv, app, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 100 * time.Millisecond})
	answerSlowCallLate(t, srv, app, ts.URL)
}

// Behind middleware that reads every body first (to log or sign it, say) and hands on a copy,
// net/http has already seen the body end when ServeHTTP reads the copy: it has lifted the read
// deadline and watches the connection for a close. A deadline set then would end that watch,
// cancel the request and cut its SSE stream once the grace was over. (A GET through
// http.MaxBytesHandler is the same: its empty body is wrapped.)
func TestHTTPStreamBehindBodyMiddlewareOutlivesTheGrace(t *testing.T) {
	srv, app, _ := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 100 * time.Millisecond,
		BodyRateGrace: 100 * time.Millisecond})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(read))
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	answerSlowCallLate(t, srv, app, ts.URL)
}

// A request with more headers than the shim and the C ABI keep on the stack (32 and 16) is
// served like any other.
func TestHTTPManyHeaders(t *testing.T) {
	_, _, ts := newTestServer(t, nil)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},` + modernMeta + `}}`
	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	for i := range 40 {
		req.Header.Set("X-Extra-"+itoa(i), strings.Repeat("v", i))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(got, []byte(`"echoed"`)) || !bytes.Contains(got, []byte(`"id":7`)) {
		t.Fatalf("%d: %s", resp.StatusCode, got)
	}
}

// Messages sent to a session while no GET stream is open wait for one, bounded by
// EventBytesPerSession: the oldest go, and the GET stream carries the latest.
func TestHTTPMessagesWaitingForAGetStreamAreBoundedInBytes(t *testing.T) {
	srv, app, ts := newTestServerCaps(t, []string{"2025-11-25"},
		`{"tools":{"listChanged":true},"logging":{}}`, &HTTPOptions{EventBytesPerSession: 3000})
	sid := heldCallInASession(t, ts.URL, app)
	held, _ := app.snapshot()
	// Five messages of about 1 KB each, then a small one: 3,000 bytes hold the last three.
	err := srv.With(held[0].key, func(c *Conn) error {
		for n := 1; n <= 5; n++ {
			params := `{"level":"info","data":{"n":` + itoa(n) + `,"pad":"` + strings.Repeat("p", 1000) + `"}}`
			if err := c.Notify("notifications/message", json.RawMessage(params)); err != nil {
				return err
			}
		}
		return c.Notify("notifications/tools/list_changed", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	get := openGetStream(t, ts.URL, sid)
	defer get.Body.Close()
	var got []string
	lines := bufio.NewScanner(get.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data:")
		if !ok || strings.TrimSpace(data) == "" {
			continue
		}
		var m struct {
			Method string
			Params struct{ Data struct{ N int } }
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if m.Method == "notifications/tools/list_changed" {
			break
		}
		got = append(got, itoa(m.Params.Data.N))
	}
	if strings.Join(got, ",") != "4,5" {
		t.Fatalf("the GET stream carried messages %v, want the latest that fit: 4,5", got)
	}
}

// Each open GET stream waits on a channel of its own: a request in one session, or a message
// to it, wakes that session's streams only (waking every stream made each request as dear as
// the number of streams open).
func TestHTTPARequestWakesOnlyTheStreamsItChanged(t *testing.T) {
	srv, app, ts := newTestServerCaps(t, []string{"2025-11-25"}, `{"tools":{"listChanged":true}}`, nil)
	const n = 20
	sids := []string{heldCallInASession(t, ts.URL, app)}
	for len(sids) < n {
		sids = append(sids, openTestSession(t, ts.URL))
	}
	gets := make([]*bufio.Reader, n)
	for i, sid := range sids {
		get := openGetStream(t, ts.URL, sid)
		t.Cleanup(func() { get.Body.Close() })
		gets[i] = bufio.NewReader(get.Body)
	}
	parked := func() map[uint64]chan struct{} {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return maps.Clone(srv.parked)
	}
	// The GET streams, and the stream of the call the app holds in the first session.
	waitFor(t, "every stream waiting", func() bool { return len(parked()) == n+1 })
	before := parked()
	// A request in the first session changes no GET stream: none wakes.
	r := sessionPost(t, ts.URL, sids[0], `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	_, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if after := parked(); !maps.Equal(before, after) {
		t.Fatalf("a ping woke streams: %d of %d still wait as before", countSame(before, after), n+1)
	}
	// A message to the first session wakes its GET stream, which carries it; only that one.
	held, _ := app.snapshot()
	if err := srv.With(held[0].key, func(c *Conn) error {
		return c.Notify("notifications/tools/list_changed", nil)
	}); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := gets[0].ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "notifications/tools/list_changed") {
			break
		}
	}
	if same := countSame(before, parked()); same != n {
		t.Fatalf("%d streams still wait as before, want all but the one that carried the message (%d)", same, n)
	}
}

// countSame counts the streams waiting on the same channel in both maps.
func countSame(a, b map[uint64]chan struct{}) int {
	same := 0
	for id, ch := range a {
		if b[id] == ch {
			same++
		}
	}
	return same
}

// A client whose connection broke resumes with Last-Event-ID before the server noticed the
// break: the first response ends, and the answer goes to the resumption.
func TestHTTPResumptionWhileTheFirstResponseIsHeld(t *testing.T) {
	srv, app, ts := newTestServer(t, []string{"2025-11-25"})
	sid, first, last := heldSlowCall(t, ts.URL, app)
	resumed := listenGet(t, ts.URL, sid, last)
	defer resumed.Body.Close()
	if resumed.StatusCode != 200 {
		t.Fatalf("resumption: status %d", resumed.StatusCode)
	}
	// The first response ends without the answer.
	ended := make(chan error, 1)
	var stale []byte
	go func() {
		var err error
		stale, err = io.ReadAll(first)
		ended <- err
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the first response was cut: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first response is still open")
	}
	held, _ := app.snapshot()
	err := srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[{"type":"text","text":"later"}]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resumed.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"later"`)) || bytes.Contains(stale, []byte(`"later"`)) {
		t.Fatalf("resumed: %s\nfirst: %s", body, stale)
	}
}

// heldSlowCall opens a 2025-11-25 session and calls the "slow" tool, which the app holds:
// it returns the session id, the call's SSE body past its priming event, and that event's id.
func heldSlowCall(t *testing.T, url string, app *testApp) (sid string, first *bufio.Reader, last string) {
	t.Helper()
	sid = openTestSession(t, url)
	call := sessionPost(t, url, sid,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	t.Cleanup(func() { call.Body.Close() })
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	first = bufio.NewReader(call.Body)
	line, err := first.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "id:") {
		t.Fatalf("priming event: %q %v", line, err)
	}
	return sid, first, strings.TrimSpace(strings.TrimPrefix(line, "id:"))
}

// CloseStreamForPolling (SEP-1699) ends the SSE stream of a request held for later before its
// answer; the client comes back with Last-Event-ID and gets the answer there. A second call
// finds no stream to close.
func TestHTTPCloseStreamForPollingThenTheAnswerOnResumption(t *testing.T) {
	srv, app, ts := newTestServer(t, []string{"2025-11-25"})
	sid, first, last := heldSlowCall(t, ts.URL, app)
	held, _ := app.snapshot()
	closed, err := srv.CloseStreamForPolling(held[0].key, held[0].id)
	if !closed || err != nil {
		t.Fatalf("CloseStreamForPolling: %v, %v", closed, err)
	}
	rest, err := io.ReadAll(first)
	if err != nil || bytes.Contains(rest, []byte(`"result"`)) {
		t.Fatalf("the closed stream: %q, %v", rest, err)
	}
	if again, err := srv.CloseStreamForPolling(held[0].key, held[0].id); again || err != nil {
		t.Fatalf("a second CloseStreamForPolling: %v, %v", again, err)
	}
	err = srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[{"type":"text","text":"later"}]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	resumed := listenGet(t, ts.URL, sid, last)
	defer resumed.Body.Close()
	body, err := io.ReadAll(resumed.Body)
	if resumed.StatusCode != 200 || err != nil || !bytes.Contains(body, []byte(`"id":5,"result":{"content":[{"type":"text","text":"later"}]}`)) {
		t.Fatalf("resumed: %d %q %v", resumed.StatusCode, body, err)
	}
}

// smallSendBuffers accepts connections with a 4 KiB kernel send buffer, so that a write of
// more than a few KiB waits for its client to read.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// An answer whose write was cut off by its client's leaving is resumed even after the event
// store dropped it. Each piece of a stream was consumed from the engine before it was
// written, so an answer in a piece whose write then failed counted as delivered: the engine
// did not keep it aside, and once the store had let it go the resumption found nothing.
func TestHTTPAnAnswerCutOffMidWriteIsResumedAfterTheStoreDroppedIt(t *testing.T) {
	app := &testApp{}
	cfg := &Config{Role: Server, Name: "go-http-test", Version: "1.0",
		Versions: []string{"2025-11-25"}, Capabilities: json.RawMessage(`{"tools":{}}`)}
	srv, err := NewHTTPServer(cfg, &HTTPOptions{EventsPerSession: 1}, app)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	sid := openTestSession(t, ts.URL)
	conn := dialWithASmallReceiveBuffer(t, ts.URL)
	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	primed := bufio.NewReader(resp.Body)
	line, err := primed.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "id:") {
		t.Fatalf("priming event: %q %v", line, err)
	}
	last := strings.TrimSpace(strings.TrimPrefix(line, "id:"))
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	held, _ := app.snapshot()
	big := strings.Repeat("b", 200<<10) // one piece of the stream, far more than the buffers
	err = srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[{"type":"text","text":"`+big+`"}]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the write waits for a client that does not read
	conn.Close()
	waitFor(t, "the server to see the client go", func() bool { _, streams := srv.Sessions(); return streams == 0 })
	// A later call's events push the answer out of the store (one event per session).
	later := sessionPost(t, ts.URL, sid,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	defer later.Body.Close()
	waitFor(t, "the later call", func() bool { h, _ := app.snapshot(); return len(h) == 2 })
	held, _ = app.snapshot()
	err = srv.With(held[1].key, func(c *Conn) error {
		return c.Respond(held[1].id, json.RawMessage(`{"content":[]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(later.Body); !bytes.Contains(b, []byte(`"id":6`)) {
		t.Fatalf("the later call: %s", b)
	}
	resumed := listenGet(t, ts.URL, sid, last)
	defer resumed.Body.Close()
	got := make(chan bool, 1)
	go func() {
		r := bufio.NewReaderSize(resumed.Body, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				got <- false
				return
			}
			if strings.Contains(line, `"id":5`) && strings.Contains(line, big) {
				got <- true
				return
			}
		}
	}()
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("the resumption ended without the answer")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the resumption never carried the answer: it was lost")
	}
}

// listenGet opens session sid's GET stream, resuming after last when it is not empty.
func listenGet(t *testing.T, url, sid, last string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A positive duration under a millisecond is rounded up, not taken for zero: a session idle
// timeout of 500 µs expired sessions after the default 10 minutes.
func TestHTTPDurationsUnderAMillisecondAreNotTheDefault(t *testing.T) {
	srv, _, ts := newTestServerWith(t, []string{"2025-11-25"},
		&HTTPOptions{SessionIdleTimeout: 500 * time.Microsecond})
	openTestSession(t, ts.URL)
	waitFor(t, "the session to expire", func() bool { n, _ := srv.Sessions(); return n == 0 })
}

// Streams that finish with nothing more to send leave nothing behind: not the stream, and
// not the hold it keeps on its session, which would then never expire.
func TestHTTPStreamsThatFinishEmptyLeaveNothingBehind(t *testing.T) {
	srv, _, ts := newTestServerWith(t, []string{"2025-11-25"},
		&HTTPOptions{SessionIdleTimeout: 2 * time.Second})
	sid := openTestSession(t, ts.URL)
	// Resumptions naming streams the server never had: each one finishes at once.
	for i := range 20 {
		r := listenGet(t, ts.URL, sid, itoa(1000+i)+"-0")
		_, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	waitFor(t, "no stream held", func() bool { _, n := srv.Sessions(); return n == 0 })
	// A second GET stream replaces the first, which finishes empty; then its client leaves.
	first := listenGet(t, ts.URL, sid, "")
	firstBody := bufio.NewReader(first.Body)
	if _, err := firstBody.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	second := listenGet(t, ts.URL, sid, "")
	if _, err := io.ReadAll(firstBody); err != nil {
		t.Fatalf("the replaced stream was cut: %v", err)
	}
	first.Body.Close()
	second.Body.Close()
	// With no stream held the session goes idle, and expires.
	waitFor(t, "the session to expire", func() bool { n, _ := srv.Sessions(); return n == 0 })
	// A session deleted while its GET stream is held.
	sid = openTestSession(t, ts.URL)
	get := listenGet(t, ts.URL, sid, "")
	req, _ := http.NewRequest("DELETE", ts.URL, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if _, err := io.ReadAll(get.Body); err != nil {
		t.Fatalf("the deleted session's stream was cut: %v", err)
	}
	get.Body.Close()
	waitFor(t, "no stream held", func() bool { _, n := srv.Sessions(); return n == 0 })
}

// scriptedLegacyServer is a hand-written 2025-11-25 server: it accepts notifications and
// answers (202), answers initialize with session "s1", and hands every other request, with
// its id, to request.
func scriptedLegacyServer(request func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) *httptest.Server {
	return httptest.NewServer(scriptedLegacyHandler(request))
}

// scriptedLegacyHandler is the handler of scriptedLegacyServer (its server declares tools and
// logging).
func scriptedLegacyHandler(request func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if json.NewDecoder(r.Body).Decode(&m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if m.Method != "initialize" {
			request(w, r, m.ID)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"scripted","version":"1"}}}`)
	})
}

// legacyHTTPClient is a handshake-era HTTPClient of url, closed when the test ends.
func legacyHTTPClient(t *testing.T, url string) *HTTPClient {
	t.Helper()
	client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy}, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// A server that keeps every SSE response open after its answer: the client closes the stream
// itself a little later (the engine's LINGER, 2 s), instead of holding one connection per
// request for as long as the server likes.
func TestHTTPClientLetsGoOfAStreamTheServerKeepsOpen(t *testing.T) {
	gone := make(chan time.Time, 1)
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+string(id)+",\"result\":{\"tools\":[]}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never ends the stream itself
		gone <- time.Now()
	})
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var answered time.Time
	done := make(chan error, 1)
	go func() {
		done <- client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch ev.(type) {
			case *ReadyEvent:
				if _, err := c.Request(now, "tools/list", nil, nil); err != nil {
					t.Error(err)
				}
			case *ResponseEvent:
				answered = now
			case *ErrorEvent, *FailedEvent, *TimedOutEvent:
				t.Errorf("the request failed: %#v", ev)
			}
		}))
	}()
	select {
	case at := <-gone:
		cancel()
		<-done
		if answered.IsZero() {
			t.Fatal("the stream was closed before its answer was handed out")
		}
		if d := at.Sub(answered); d < time.Second || d > 5*time.Second {
			t.Fatalf("the stream was let go %v after its answer (want about 2 s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client never closed the stream the server kept open")
	}
}

// A server that has forgotten the session answers 404, as the spec says, but never ends that
// answer's body: the request fails, and the client closes that exchange (the engine aborts
// it with the session's others) instead of reading it for as long as the server writes.
func TestHTTPClientClosesTheEndless404OfAnExpiredSession(t *testing.T) {
	gone := make(chan struct{}, 1)
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		for r.Context().Err() == nil {
			io.WriteString(w, "gone\n")
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
		gone <- struct{}{}
	})
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	failed := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		sent := false
		done <- client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch ev.(type) {
			case *ReadyEvent:
				if !sent {
					sent = true
					if _, err := c.Request(now, "tools/list", nil, nil); err != nil {
						t.Error(err)
					}
				}
			case *FailedEvent:
				failed <- struct{}{}
			case *ResponseEvent:
				t.Error("an answer from a forgotten session")
			}
		}))
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not fail")
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the 404's connection is still open")
	}
}

// A server that pings on the GET stream faster than it takes the answers: at most 64 of the
// client's answer POSTs run at once (before: one connection per ping), the others wait their
// turn, and once the server takes them again every answer arrives, once.
func TestHTTPClientAnswersAServerThatDoesNotTakeThemAFewAtATime(t *testing.T) {
	const pings = 300
	var running, most, got atomic.Int32
	release := make(chan struct{})
	var order []int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			for n := range pings {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n\n", n)
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"scripted","version":"1"}}}`)
		case m.Result != nil: // an answer to a ping: held until the test lets them through
			now := running.Add(1)
			for {
				old := most.Load()
				if now <= old || most.CompareAndSwap(old, now) {
					break
				}
			}
			<-release
			var n int
			_ = json.Unmarshal(m.ID, &n)
			mu.Lock()
			order = append(order, n)
			mu.Unlock()
			running.Add(-1)
			got.Add(1)
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	defer srv.CloseClientConnections()
	client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy},
		srv.URL, &HTTPClientOptions{OpenGetStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- client.Run(ctx, HandlerFunc(func(*Conn, time.Time, Event) {})) }()
	waitFor(t, "64 answers running", func() bool { return running.Load() == 64 })
	time.Sleep(200 * time.Millisecond) // room for a 65th, if the client sent one
	if n := most.Load(); n != 64 {
		t.Fatalf("%d answers ran at once, want 64", n)
	}
	close(release)
	waitFor(t, "every answer", func() bool { return got.Load() == pings })
	cancel()
	<-done
	if n := most.Load(); n != 64 {
		t.Fatalf("%d answers ran at once, want 64", n)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(order)
	for i, n := range order {
		if n != i {
			t.Fatalf("answers lost or repeated: %v", order)
		}
	}
}

// A quiet GET stream gets a keep-alive comment every KeepAlive, so that proxies and idle
// timeouts leave it open; with a negative KeepAlive it gets none.
func TestHTTPQuietStreamsGetKeepAliveComments(t *testing.T) {
	read := func(keepalive time.Duration, wait time.Duration) string {
		_, _, ts := newTestServerWith(t, []string{"2025-11-25"}, &HTTPOptions{KeepAlive: keepalive})
		sid := openTestSession(t, ts.URL)
		get := openGetStream(t, ts.URL, sid)
		defer get.Body.Close()
		var got bytes.Buffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 256)
			for {
				n, err := get.Body.Read(buf)
				got.Write(buf[:n])
				if err != nil || bytes.Count(got.Bytes(), []byte(":\n\n")) >= 2 {
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(wait):
		}
		get.Body.Close()
		<-done
		return got.String()
	}
	if got := read(50*time.Millisecond, 5*time.Second); strings.Count(got, ":\n\n") < 2 {
		t.Fatalf("no keep-alive comments within 5 s: %q", got)
	}
	if got := read(-1, 500*time.Millisecond); strings.Contains(got, ":\n\n") {
		t.Fatalf("a comment with keep-alives off: %q", got)
	}
}

// A server that redirects a request elsewhere: the client does not follow (the session id
// and the message would go to the other host), and the request fails with the status.
func TestHTTPClientDoesNotFollowRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	defer other.Close()
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	})
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	var failure string
	runFailingToolsList(t, client, func(ev *FailedEvent) {
		failure = fmt.Sprintf("%d %s", ev.Status, ev.Reason)
	})
	if !strings.HasPrefix(failure, "307") {
		t.Fatalf("the request's failure: %q", failure)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("%d requests followed the redirect", n)
	}
}

// runFailingToolsList runs client until its tools/list fails: failed sees the FailedEvent,
// and any answer fails the test.
func runFailingToolsList(t *testing.T, client *HTTPClient, failed func(*FailedEvent)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ReadyEvent:
			if _, err := c.Request(now, "tools/list", nil, nil); err != nil {
				t.Error(err)
			}
		case *FailedEvent:
			failed(ev)
			c.Shutdown(now, 0)
		case *ResponseEvent, *ErrorEvent, *TimedOutEvent:
			t.Errorf("unexpected %#v", ev)
			c.Shutdown(now, 0)
		}
	}))
	if err != nil && ctx.Err() != nil {
		t.Fatalf("no end in time: %v", err)
	}
}

// An error page instead of an answer: the request fails with the status, and the page's text
// is kept for the message (FailureText), readable from the handler.
func TestHTTPClientKeepsTheTextOfAnErrorPage(t *testing.T) {
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "\n<h1>502 Bad Gateway</h1>\n")
	})
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	if got := client.FailureText(); got != "" {
		t.Fatalf("before any failure: %q", got)
	}
	var status int
	var text string
	runFailingToolsList(t, client, func(ev *FailedEvent) {
		status, text = ev.Status, client.FailureText() // (the handler may call the client)
	})
	if status != http.StatusBadGateway || text != "<h1>502 Bad Gateway</h1>" {
		t.Fatalf("status %d, text %q", status, text)
	}
}

// An exchange that fails below HTTP (here nothing listens) says why in TransportError: the
// events say only "the connection failed", and net/http's error was dropped.
func TestHTTPClientKeepsWhyAnExchangeFailed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/mcp"
	srv.Close()
	client, err := NewHTTPClient(clientConfig(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if got := client.TransportError(); got != "" {
		t.Fatalf("before any failure: %q", got)
	}
	var closed *ClosedEvent
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if ev, ok := ev.(*ClosedEvent); ok {
			closed = ev
		}
	}))
	if err != nil || closed == nil || closed.Reason != CloseTransportFailed {
		t.Fatalf("Run: %v, closed %#v", err, closed)
	}
	if got := client.TransportError(); !strings.Contains(got, "connection refused") {
		t.Fatalf("TransportError: %q", got)
	}
}

// switchProtocols answers with 101 Switching Protocols on the raw connection, which it
// keeps open until hold is closed (nil: it closes it at once).
func switchProtocols(w http.ResponseWriter, hold <-chan struct{}) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
	buf.Flush()
	if hold != nil {
		<-hold
	}
}

// A server that answers a request with 101 Switching Protocols and keeps the connection:
// the request fails at once, with that status, and Close does not wait.
// net/http hands the raw connection over as the body, no longer tied to the request's
// context: the exchange read it until the server closed it, the request waited for its
// timeout, Close waited its whole three seconds, and the goroutine outlived them both.
func TestHTTPClientRefusesASwitchOfProtocols(t *testing.T) {
	hold := make(chan struct{})
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		switchProtocols(w, hold)
	})
	defer srv.Close()
	defer close(hold)
	cfg := &Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy,
		RequestTimeout: 5 * time.Second}
	client, err := NewHTTPClient(cfg, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var failed bool
	status := 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_ = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ReadyEvent:
			_, _ = c.Request(now, "tools/list", nil, nil)
		case *FailedEvent:
			failed, status = true, ev.Status
			c.Shutdown(now, 0)
		case *ResponseEvent, *ErrorEvent, *TimedOutEvent:
			c.Shutdown(now, 0)
		}
	}))
	if !failed || time.Since(start) > 3*time.Second {
		t.Fatalf("failed %v after %v: the request waited for its timeout", failed, time.Since(start))
	}
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("the request failed with status %d", status)
	}
	start = time.Now()
	client.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
	waitFor(t, "the exchange's goroutine to end", func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*HTTPClient).exchange")
	})
}

// A server that answers the session's GET stream with 101 Switching Protocols: the stream is
// asked for once, not again and again as after a broken connection (the 101 was reported as
// one, and the engine resumed the stream up to MaxAttempts times).
func TestHTTPClientDoesNotAskAgainForAGetStreamAnswered101(t *testing.T) {
	var gets atomic.Int32
	posts := scriptedLegacyHandler(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.WriteHeader(http.StatusAccepted)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			posts.ServeHTTP(w, r)
			return
		}
		gets.Add(1)
		switchProtocols(w, nil)
	}))
	defer srv.Close()
	client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy},
		srv.URL, &HTTPClientOptions{OpenGetStream: true, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			go func() {
				waitFor(t, "the GET", func() bool { return gets.Load() > 0 })
				time.Sleep(500 * time.Millisecond) // retries 1 ms apart would all be in
				c.Shutdown(time.Now(), 0)
			}()
		}
	}))
	if n := gets.Load(); n != 1 {
		t.Fatalf("the GET stream was asked for %d times", n)
	}
}

// setHeaders: canonical names; each name the answer has replaces what a middleware set under
// it; one the answer repeats keeps every value, in order; other headers stay.
func TestSetHeadersReplaceAMiddlewaresAndKeepTheirOwnRepeats(t *testing.T) {
	got := http.Header{"Vary": {"Origin"}, "Content-Type": {"application/json"}}
	headers := [][2]string{{"Content-Type", "text/event-stream"}, {"mcp-session-id", "s1"},
		{"cache-control", "no-cache"}, {"content-type", "second"}}
	setHeaders(got, headers)
	want := http.Header{"Vary": {"Origin"}, "Content-Type": {"text/event-stream", "second"},
		"Mcp-Session-Id": {"s1"}, "Cache-Control": {"no-cache"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Appending to one header must not reach the next one's value.
	got["Mcp-Session-Id"] = append(got["Mcp-Session-Id"], "extra")
	if got.Get("Cache-Control") != "no-cache" {
		t.Fatalf("an append overwrote another header: %v", got)
	}
}

// Behind a middleware that sets an API-wide Content-Type, an SSE answer says only
// text/event-stream (it carried both, and clients read the first).
func TestHTTPAnswerHeadersReplaceAMiddlewaresDefaults(t *testing.T) {
	srv, app, _ := newTestServer(t, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	resp := modernPost(t, context.Background(), ts.URL, "slow", 1)
	defer resp.Body.Close()
	if v := resp.Header.Values("Content-Type"); len(v) != 1 || v[0] != "text/event-stream" {
		t.Fatalf("Content-Type %q", v)
	}
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
}

// A request without a Host (HTTP/1.0 may send none, HTTP/2 no :authority) is served, as the
// engine's rule says: it was passed on as an empty Host, which no allowed host matches (403).
func TestHTTPRequestWithoutAHostIsServed(t *testing.T) {
	srv, _, _ := newTestServer(t, nil)
	req := modernCall(context.Background(), "http://127.0.0.1/", "echo", 1)
	req.Host = ""
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "echoed") {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
}

// brokenPipe is a writer whose reader has gone, as a pipe to an exited process is.
type brokenPipe struct{}

func (brokenPipe) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}
}

// A peer that stops reading (it exited) said why in what it wrote last: Serve reads that to
// the end and hands it out before it returns the broken pipe. (It returned at once, and a
// client reported "broken pipe" where the server had answered with a line it could not
// parse, or closed its output: whichever the client noticed first.)
func TestServeReadsThePeersLastWordsAfterABrokenPipe(t *testing.T) {
	conn, err := NewConn(clientConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got []Event
	err = Serve(context.Background(), conn, strings.NewReader("not json\n"), brokenPipe{},
		HandlerFunc(func(c *Conn, now time.Time, ev Event) { got = append(got, ev) }))
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Serve returned %v", err)
	}
	var parse, closed bool
	for _, ev := range got {
		switch ev := ev.(type) {
		case *ViolationEvent:
			parse = parse || ev.Violation == ViolationParse
		case *ClosedEvent:
			closed = true
		}
	}
	if !parse || !closed {
		t.Fatalf("the peer's last words were not handed out: %#v", got)
	}
}

// When the connection closes (here: the stateless probe times out), Run returns at once: it
// waited up to two seconds for every exchange still running, a hung request included, where
// only a session's DELETE is worth the wait. (Those two seconds began after the ClosedEvent:
// the bound below stays under them.)
func TestHTTPClientRunReturnsAtOnceAfterTheClose(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // never answers while the client runs
	}))
	defer srv.Close()
	defer close(release) // (before Close, which waits for the handler)
	cfg := clientConfig()
	cfg.Versions = []string{"2026-07-28"}
	cfg.RequestTimeout = 300 * time.Millisecond
	client, err := NewHTTPClient(cfg, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var closedAt time.Time
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ClosedEvent); ok {
			closedAt = time.Now()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if closedAt.IsZero() {
		t.Fatal("no ClosedEvent")
	}
	if d := time.Since(closedAt); d > 1800*time.Millisecond {
		t.Fatalf("Run returned %v after the close", d)
	}
}

// Negative backoff delays mean the defaults: they reached the engine as delays of millions
// of years (a broken stream never resumed). A negative MaxAttempts means no limit, and
// attempts past what the engine counts are the most it counts, not that number's low 32
// bits.
func TestHTTPClientBackoffOptions(t *testing.T) {
	huge := int64(1) << 32 // (a variable: the constant overflows int on 32-bit targets)
	for _, c := range []struct {
		opts          HTTPClientOptions
		initial, most uint64
		attempts      uint32
	}{
		{HTTPClientOptions{}, 0, 0, 0},
		{HTTPClientOptions{InitialDelay: -time.Second, MaxDelay: -1, MaxAttempts: -1}, 0, 0, math.MaxUint32},
		{HTTPClientOptions{InitialDelay: 1500 * time.Microsecond, MaxDelay: time.Minute, MaxAttempts: 3}, 2, 60000, 3},
		// Under a millisecond is not 0, the engine's default.
		{HTTPClientOptions{InitialDelay: 500 * time.Microsecond, MaxDelay: 900 * time.Microsecond}, 1, 1, 0},
		{HTTPClientOptions{MaxAttempts: int(huge)}, 0, 0, math.MaxUint32},
	} {
		initial, most, attempts := c.opts.backoff()
		if initial != c.initial || most != c.most || attempts != c.attempts {
			t.Errorf("%+v: %d, %d, %d; want %d, %d, %d", c.opts, initial, most, attempts,
				c.initial, c.most, c.attempts)
		}
	}
}

// An event larger than arenaKept grows the arena that copies it out of the engine; once it is
// copied, the arena goes back to its first size, so that a client or a server does not keep
// up to MaxFrame bytes for the rest of its life after one large message.
func TestHTTPLargeEventsDoNotKeepTheirArena(t *testing.T) {
	srv, _, ts := newTestServer(t, nil)
	client, err := NewHTTPClient(&Config{Role: Client, Name: "arena", Version: "1.0"}, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pad := strings.Repeat("p", 2<<20) // a 2 MiB request for the server
	var pending RequestID
	var result []byte
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ReadyEvent:
			pending, err = c.Request(now, "tools/call",
				json.RawMessage(`{"name":"big","arguments":{"pad":"`+pad+`"}}`), nil)
			if err != nil {
				t.Error(err)
				c.Shutdown(now, 0)
			}
		case *ResponseEvent: // the tool's 8 MiB answer for the client
			if ev.Request == pending {
				result = ev.Result
				c.Shutdown(now, time.Second)
			}
		case *ErrorEvent, *FailedEvent, *TimedOutEvent:
			t.Errorf("%s", dump([]Event{ev}))
			c.Shutdown(now, 0)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	text := `"text":"` + strings.Repeat("a", 8<<20) + `"`
	if !bytes.Contains(result, []byte(text)) { // (copied out whole before the arena went)
		t.Fatalf("a result of %d bytes without the text", len(result))
	}
	if n := len(client.arena); n != eventArena {
		t.Errorf("the client keeps an arena of %d bytes", n)
	}
	srv.mu.Lock()
	n := len(srv.arena)
	srv.mu.Unlock()
	if n != eventArena {
		t.Errorf("the server keeps an arena of %d bytes", n)
	}
}

// A session's idle time starts when its client's last stream was written out: a call that
// ran longer than SessionIdleTimeout lost its session as soon as its answer was written (the
// engine counted from the call's POST), so the client's next request got 404. (The call
// lasts 1.5 idle timeouts; the session is looked at 0.4 of one after the answer, which
// leaves 1.8 s to spare on a slow machine.)
func TestHTTPSessionIdlesFromItsLastStreamsEnd(t *testing.T) {
	const idle = 3 * time.Second
	srv, app, ts := newTestServerWith(t, nil, &HTTPOptions{SessionIdleTimeout: idle,
		KeepAlive: 100 * time.Millisecond})
	sid := openTestSession(t, ts.URL)
	call := sessionPost(t, ts.URL, sid,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	defer call.Body.Close()
	answerHeldLater(t, srv, app, call, idle*3/2)
	// Keep-alive ticks fire the engine's timers meanwhile.
	time.Sleep(idle * 2 / 5)
	if n, _ := srv.Sessions(); n != 1 {
		t.Fatalf("%d sessions %v after the answer, want 1", n, idle*2/5)
	}
	ping := sessionPost(t, ts.URL, sid, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	_, _ = io.ReadAll(ping.Body)
	ping.Body.Close()
	if ping.StatusCode != http.StatusOK {
		t.Fatalf("ping after the answer: HTTP %d, want 200", ping.StatusCode)
	}
}

// The bodies being read share MaxBodyTotal: two large bodies still arriving hold it, and a
// third that does not fit gets 503 with Retry-After (read and dropped) instead of adding
// to the memory the server holds. Once the two are in and answered, their share is given
// back: the next large body is served. Before the shared bound, each request could hold
// MaxBody at once.
func TestHTTPBodiesPastTheSharedBoundGet503(t *testing.T) {
	srv, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyTimeout: 20 * time.Second,
		MaxBody: 1 << 20, MaxBodyTotal: 1 << 20})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	body := init + strings.Repeat(" ", 450000-len(init))
	head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", len(body))
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		return conn
	}
	answer := func(conn net.Conn) *http.Response {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	exchange := func() *http.Response {
		conn := dial()
		if _, err := io.WriteString(conn, head+body); err != nil {
			t.Fatal(err)
		}
		return answer(conn)
	}
	// Two bodies, 400,000 of their 450,000 bytes sent: their buffers (512 KiB each) hold the
	// 1 MiB, and need no more for the rest.
	var held []net.Conn
	for range 2 {
		conn := dial()
		if _, err := io.WriteString(conn, head+body[:400000]); err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	// Once the server has read theirs (each buffer at 512 KiB: at least 448 KiB taken, past
	// the 64 KiB a pooled buffer may bring), a third does not fit.
	for deadline := time.Now().Add(10 * time.Second); srv.bodies.Load() < 2*448<<10; {
		if time.Now().After(deadline) {
			t.Fatalf("the held bodies took %d bytes", srv.bodies.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if resp := exchange(); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a body past the shared bound: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The two held bodies are still served, and give their share back.
	for _, conn := range held {
		if _, err := io.WriteString(conn, body[400000:]); err != nil {
			t.Fatal(err)
		}
		if resp := answer(conn); resp.StatusCode != http.StatusOK {
			t.Fatalf("a held body: status %d", resp.StatusCode)
		}
	}
	if resp := exchange(); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the held bodies: status %d, want the bound given back", resp.StatusCode)
	}
}

// A request with no header at all (HTTP/1.0 needs no Host) is answered by the engine: its
// empty header list was passed to C as &lens[0] of an empty slice, a panic that net/http
// recovered by dropping the connection, with a stack in the log for every such request.
func TestHTTPARequestWithNoHeadersIsAnswered(t *testing.T) {
	srv, _, ts := newTestServerWith(t, nil, nil)
	for _, method := range []string{"GET", "POST", "DELETE"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(conn, "%s / HTTP/1.0\r\n\r\n", method); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: no answer: %v", method, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("%s: status %d, want the engine's refusal", method, resp.StatusCode)
		}
	}
	// And through ServeHTTP directly, without net/http's recovery.
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{}`))
	r.Host, r.Header = "", http.Header{}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code < 400 || w.Code >= 500 {
		t.Fatalf("status %d", w.Code)
	}
}

// Tools whose x-mcp-header annotation is invalid (not an HTTP token) are refused when the
// server is made: clients drop such a tool, and its headers were never checked, silently.
func TestHTTPToolsWithAnInvalidAnnotationAreRefused(t *testing.T) {
	cfg := &Config{Role: Server, Name: "s", Version: "1", Capabilities: json.RawMessage(`{"tools":{}}`)}
	tools := func(name string) json.RawMessage {
		return json.RawMessage(`[{"name":"t","inputSchema":{"type":"object","properties":` +
			`{"a":{"type":"string","x-mcp-header":"` + name + `"}}}}]`)
	}
	_, err := NewHTTPServer(cfg, &HTTPOptions{Tools: tools("bad name")}, HTTPAppFunc(func(*Conn, ConnKey, Event) {}))
	if !errors.Is(err, ErrConfigRefused) {
		t.Fatalf("an invalid annotation: %v, want ErrConfigRefused", err)
	}
	// The error says which tool and why, and errors.As reaches the list.
	want := []ToolRefusal{{Name: "t", Reason: "x-mcp-header is not a non-empty HTTP token"}}
	var refused *ToolsRefusedError
	if !errors.As(err, &refused) || !slices.Equal(refused.Refused, want) {
		t.Fatalf("refusal detail: %#v", err)
	}
	if !strings.Contains(err.Error(), `tool "t": x-mcp-header is not a non-empty HTTP token`) {
		t.Fatalf("message: %v", err)
	}
	var code *ResultError
	if !errors.As(err, &code) || code.Code != CodeConfigRefused {
		t.Fatalf("errors.As *ResultError: %v", err)
	}
	if got, err := ToolRefusals(tools("bad name")); err != nil || !slices.Equal(got, want) {
		t.Fatalf("ToolRefusals: %v, %v", got, err)
	}
	if got, err := ToolRefusals(tools("Region")); err != nil || got != nil {
		t.Fatalf("ToolRefusals of good tools: %v, %v", got, err)
	}
	if _, err := ToolRefusals(json.RawMessage(`{"tools":5}`)); !errors.Is(err, ErrJSONWrongType) {
		t.Fatalf("ToolRefusals of no tools list: %v", err)
	}
	// A client's config is refused too, with no tool to name.
	clientCfg := &Config{Role: Client, Name: "c", Version: "1"}
	_, err = NewHTTPServer(clientCfg, &HTTPOptions{Tools: tools("Region")}, HTTPAppFunc(func(*Conn, ConnKey, Event) {}))
	if !errors.Is(err, ErrConfigRefused) || errors.As(err, &refused) {
		t.Fatalf("a client's config: %#v", err)
	}
	srv, err := NewHTTPServer(cfg, &HTTPOptions{Tools: tools("Region")}, HTTPAppFunc(func(*Conn, ConnKey, Event) {}))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}

// Tools declared while the server runs (DeclareTools) are checked from then on: a tools/call
// whose annotated argument lacks its Mcp-Param header gets 400 with -32020.
func TestHTTPToolsDeclaredWhileTheServerRunsAreChecked(t *testing.T) {
	srv, _, ts := newTestServer(t, nil)
	call := func() *http.Response {
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":"eu"},` +
			modernMeta + `}}`
		req := modernCall(context.Background(), ts.URL, "echo", 3)
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := call(); r.StatusCode != http.StatusOK {
		t.Fatalf("not declared: status %d", r.StatusCode)
	}
	annotated := json.RawMessage(`{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":` +
		`{"a":{"type":"string","x-mcp-header":"Region"}}}}]}`)
	if err := srv.DeclareTools(annotated); err != nil {
		t.Fatal(err)
	}
	if r := call(); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("declared, without its header: status %d", r.StatusCode)
	}
	if err := srv.DeclareTools(json.RawMessage(`5`)); !errors.Is(err, ErrJSONWrongType) {
		t.Fatalf("not a tools list: %v", err)
	}
	bad := json.RawMessage(`[{"name":"t","inputSchema":{"type":"object","properties":` +
		`{"a":{"type":"string","x-mcp-header":"bad name"}}}}]`)
	var refused *ToolsRefusedError
	if err := srv.DeclareTools(bad); !errors.Is(err, ErrConfigRefused) || !errors.As(err, &refused) ||
		len(refused.Refused) != 1 || refused.Refused[0].Name != "t" {
		t.Fatalf("an invalid annotation: %v", err)
	}
	if r := call(); r.StatusCode != http.StatusOK {
		t.Fatalf("declared anew without it: status %d", r.StatusCode)
	}
	srv.Close()
	if err := srv.DeclareTools(annotated); err != ErrFreed {
		t.Fatalf("after Close: %v", err)
	}
}

// A body of MaxBody bytes fits in MaxBodyTotal alone, whatever was asked for: its buffer
// reaches MaxBody+1 and one read's room more, and MaxBodyTotal == MaxBody refused it on an
// idle server, for good (a client honouring Retry-After sent it again and again).
func TestHTTPABodyOfMaxBodyFitsTheSharedBoundAlone(t *testing.T) {
	srv, _, ts := newTestServerWith(t, nil, &HTTPOptions{MaxBody: 1 << 20, MaxBodyTotal: 1 << 20})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	body := init + strings.Repeat(" ", 1<<20-len(init))
	// Chunked: its end is read only once the buffer holds all of it.
	resp := postChunked(t, ts.URL, strings.NewReader(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a body of MaxBody bytes alone: status %d", resp.StatusCode)
	}
	if held := srv.bodies.Load(); held != 0 {
		t.Fatalf("%d bytes still taken", held)
	}
}

// With the shared bound taken whole by bodies being read, a request without a body (a
// session's GET or DELETE) is still served: it took a read's room of the bound and got 503,
// and a DELETE refused so left its session behind. A chunked body over MaxBody gets its 413,
// not a 503 its client would send it again after.
func TestHTTPTheSharedBoundFullRefusesOnlyBodies(t *testing.T) {
	srv, _, ts := newTestServerWith(t, nil, &HTTPOptions{MaxBody: 1000})
	sid := openTestSession(t, ts.URL)
	srv.bodies.Store(srv.maxTotal)
	defer srv.bodies.Store(0)
	// No pooled buffer with room: each request below makes its own, as under load.
	emptyPool := func() { runtime.GC(); runtime.GC() }
	emptyPool()
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(strings.Repeat("x", 5000)))
		pw.Close()
	}()
	resp := postChunked(t, ts.URL, pr)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a chunked body over MaxBody with the bound full: status %d, want 413", resp.StatusCode)
	}
	emptyPool()
	req, _ := http.NewRequest("DELETE", ts.URL, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a DELETE with the bound full: status %d, want 200", resp.StatusCode)
	}
}

// A body refused because MaxBodyTotal is full, sent at a good rate for longer than
// BodyRateGrace, is read to its end before the 503: it was dropped against the deadline
// readBody left (the grace alone), so the client still sending got a reset connection
// instead of the 503 (found by a review of the Go server).
func TestHTTPABodyRefusedForTheSharedBoundIsReadAtMinBodyRate(t *testing.T) {
	srv, _, ts := newTestServerWith(t, nil, &HTTPOptions{BodyRateGrace: 300 * time.Millisecond})
	srv.bodies.Store(srv.maxTotal)
	defer srv.bodies.Store(0)
	runtime.GC()
	runtime.GC() // no pooled buffer with room
	body := strings.Repeat(" ", 60000)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// 6,000 bytes every 100 ms (60 KB/s, far above MinBodyRate), for a second in all.
	for i := 0; i < len(body); i += 6000 {
		time.Sleep(100 * time.Millisecond)
		if _, err := io.WriteString(conn, body[i:i+6000]); err != nil {
			t.Fatalf("the body was cut after %d bytes: %v", i, err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// postChunked POSTs body to url as a JSON request of unknown length (sent chunked); the
// response, its body closed.
func postChunked(t *testing.T, url string, body io.Reader) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, io.MultiReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// A tools/call the server refuses for its Mcp-Param headers (HeaderMismatch) goes again after
// the client reads tools/list itself: a client that listed the tools before their
// annotations changed gets its call through, and the application sees only the call's answer.
func TestHTTPClientCallRefusedForItsParamHeadersGoesAgainAfterToolsList(t *testing.T) {
	plain := `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}]}`
	annotated := `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":` +
		`{"a":{"type":"string","x-mcp-header":"Region"}}}}]}`
	var mu sync.Mutex
	tools := plain
	var seen []string
	app := HTTPAppFunc(func(c *Conn, key ConnKey, ev Event) {
		req, ok := ev.(*RequestEvent)
		if !ok {
			return
		}
		mu.Lock()
		seen = append(seen, req.Method)
		list := tools
		mu.Unlock()
		switch req.Method {
		case "tools/list":
			c.Respond(req.ID, json.RawMessage(list))
		case "tools/call":
			var call struct{ Arguments struct{ A string } }
			json.Unmarshal(req.Params, &call)
			c.Respond(req.ID, json.RawMessage(`{"content":[{"type":"text","text":"echoed `+call.Arguments.A+`"}]}`))
		default:
			c.Respond(req.ID, json.RawMessage(`{}`))
		}
	})
	cfg := &Config{Role: Server, Name: "t", Version: "1", Capabilities: json.RawMessage(`{"tools":{}}`)}
	srv, err := NewHTTPServer(cfg, &HTTPOptions{Tools: json.RawMessage(plain)}, app)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer srv.Close()
	defer ts.Close()
	client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1"}, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var pending RequestID
	var answers []string
	var failure error
	call := func(c *Conn, now time.Time) {
		pending, err = c.Request(now, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"a":"eu"}}`), nil)
		if err != nil {
			failure = err
			c.Shutdown(now, 0)
		}
	}
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ReadyEvent:
			pending, _ = c.Request(now, "tools/list", nil, nil)
		case *ResponseEvent:
			if ev.Request != pending {
				failure = fmt.Errorf("an answer to request %d, which it did not ask for: %s", ev.Request, ev.Result)
				c.Shutdown(now, 0)
				return
			}
			answers = append(answers, string(ev.Result))
			if len(answers) == 1 {
				// The server's tools change: echo's argument is now mirrored in a header.
				mu.Lock()
				tools = annotated
				mu.Unlock()
				if err := srv.DeclareTools(json.RawMessage(annotated)); err != nil {
					failure = err
					c.Shutdown(now, 0)
					return
				}
				call(c, now)
				return
			}
			c.Shutdown(now, time.Second)
		case *ErrorEvent:
			failure = fmt.Errorf("error %d: %s", ev.Code, ev.Message)
			c.Shutdown(now, 0)
		case *FailedEvent, *TimedOutEvent:
			failure = fmt.Errorf("request failed: %#v", ev)
			c.Shutdown(now, 0)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if failure != nil {
		t.Fatal(failure)
	}
	if len(answers) != 2 || !strings.Contains(answers[1], "echoed eu") {
		t.Fatalf("answers: %q", answers)
	}
	mu.Lock()
	defer mu.Unlock()
	// The refused call never reached the application; the client's own tools/list did.
	if want := []string{"tools/list", "tools/list", "tools/call"}; !slices.Equal(seen, want) {
		t.Fatalf("the server's application saw %q, want %q", seen, want)
	}
}

// panicsOnFlush is a middleware's ResponseWriter whose Flush panics (an unchecked
// w.(http.Flusher) over a writer that cannot flush).
type panicsOnFlush struct{ http.ResponseWriter }

func (panicsOnFlush) Flush() { panic("flush bug") }

// A panic in the writer while a stream is served (here the first Flush) lets the engine's
// stream go: it stayed attached for good, its request never cancelled and, in a session,
// the session never expiring (found by a review of the Go host).
func TestHTTPAPanickingWriterLetsTheStreamGo(t *testing.T) {
	srv, app, _ := newTestServer(t, nil)
	recovered := make(chan any, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { recovered <- recover() }()
		srv.ServeHTTP(panicsOnFlush{w}, r)
	}))
	defer ts.Close()
	resp, err := http.DefaultClient.Do(modernCall(context.Background(), ts.URL, "slow", 7))
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := <-recovered; got != "flush bug" {
		t.Fatalf("recovered %v", got)
	}
	waitFor(t, "the stream let go", func() bool {
		_, streams := srv.Sessions()
		return streams == 0
	})
	waitFor(t, "the call cancelled", func() bool {
		_, cancelled := app.snapshot()
		return cancelled == 1
	})
}

// HTTP/2 hands the handler a `host` field in r.Header beside r.Host (from `:authority`);
// both went to the engine, which refuses two Host headers with 400 (found by a review of the
// Go host). Played here as net/http's HTTP/2 server builds the request.
func TestHTTPAHostFieldBesideTheAuthorityIsOneHost(t *testing.T) {
	srv, _, _ := newTestServer(t, nil)
	req := modernCall(context.Background(), "http://localhost/mcp", "echo", 3)
	req.Header.Set("Host", "localhost")
	req.ProtoMajor, req.ProtoMinor, req.Proto = 2, 0, "HTTP/2.0"
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
}

// A body longer than MaxBody gets 413 whatever Content-Length says: a middleware that
// decompresses the body keeps the compressed length, which net/http's own reader enforced,
// and the body was read past MaxBody, a copy of the whole at each read, until MaxBodyTotal
// ran out: then 503 with Retry-After, and the client sent it again and again (found by a
// review of the Go host).
func TestHTTPMaxBodyHoldsBehindADecompressingMiddleware(t *testing.T) {
	srv, _, _ := newTestServerWith(t, nil, &HTTPOptions{MaxBody: 64 << 10, MaxBodyTotal: 96 << 10})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// "Decompressed": 1 MiB more than was sent, the declared length kept.
		more := strings.NewReader(strings.Repeat(" ", 1<<20))
		r.Body = io.NopCloser(io.MultiReader(r.Body, more))
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	resp, err := http.DefaultClient.Do(modernCall(context.Background(), ts.URL, "echo", 4))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := srv.bodies.Load(); got != 0 {
		t.Fatalf("%d bytes of MaxBodyTotal still taken", got)
	}
}

// The same while other bodies hold MaxBodyTotal: the body past MaxBody behind such a
// middleware got 503 with Retry-After (its client sent it again and again), not 413 (found
// by a review of this session's changes).
func TestHTTPMaxBodyHoldsBehindADecompressingMiddlewareUnderLoad(t *testing.T) {
	srv, _, _ := newTestServerWith(t, nil, &HTTPOptions{MaxBody: 64 << 10, MaxBodyTotal: 96 << 10})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Decompressed") != "" {
			more := strings.NewReader(strings.Repeat(" ", 1<<20))
			r.Body = io.NopCloser(io.MultiReader(r.Body, more))
		}
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	// Another body, 60 KiB of it sent and the rest held back: its reading holds MaxBody of
	// MaxBodyTotal.
	pr, pw := io.Pipe()
	slow, _ := http.NewRequest("POST", ts.URL, pr)
	slow.Header.Set("Content-Type", "application/json")
	go func() {
		resp, err := http.DefaultClient.Do(slow)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	go pw.Write([]byte(strings.Repeat(" ", 60<<10)))
	defer pw.Close()
	waitFor(t, "the slow body taken", func() bool { return srv.bodies.Load() > 32<<10 })
	req := modernCall(context.Background(), ts.URL, "echo", 5)
	req.Header.Set("X-Decompressed", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// An engine that failed for good (a panic inside it poisons it: every call then fails) says
// so once in ErrorLog and through Err, so the operator learns why every request gets 500;
// other failures (a refused argument) leave Err nil.
func TestHTTPAPoisonedEngineIsLoggedOnceAndReported(t *testing.T) {
	logged := &bytes.Buffer{}
	srv, _, _ := newTestServerWith(t, nil, &HTTPOptions{ErrorLog: log.New(logged, "", 0)})
	if srv.Err() != nil {
		t.Fatalf("a new server: %v", srv.Err())
	}
	fail := func(code ResultCode) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		srv.mu.Lock()
		srv.failedLocked(w, &ResultError{Op: "handle request", Code: code})
		srv.mu.Unlock()
		return w
	}
	// (A ResponseRecorder takes no deadlines, which is logged once; the failure is not.)
	if w := fail(CodeInvalidArgument); w.Code != http.StatusInternalServerError || srv.Err() != nil ||
		strings.Contains(logged.String(), "failed for good") {
		t.Fatalf("a passing failure: %d, %v, %q", w.Code, srv.Err(), logged.String())
	}
	fail(CodePanic)
	fail(CodePoisoned)
	if !errors.Is(srv.Err(), ErrPanic) {
		t.Fatalf("Err after the panic: %v", srv.Err())
	}
	if n := strings.Count(logged.String(), "failed for good"); n != 1 {
		t.Fatalf("logged %d times: %q", n, logged.String())
	}
}

// An engine that failed for good ends the streams waiting on it: none would be woken again,
// so each held its goroutine and connection until its client left (found by a review of the
// Go server).
func TestHTTPAPoisonedEngineEndsTheStreamsWaiting(t *testing.T) {
	srv, app, ts := newTestServerWith(t, nil, &HTTPOptions{ErrorLog: log.New(io.Discard, "", 0)})
	resp := modernPost(t, context.Background(), ts.URL, "slow", 1)
	defer resp.Body.Close()
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	srv.mu.Lock()
	srv.failedLocked(httptest.NewRecorder(), &ResultError{Op: "handle request", Code: CodePanic})
	srv.mu.Unlock()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	select {
	case <-ended:
	case <-time.After(3 * time.Second):
		t.Fatal("the stream waits on a failed engine")
	}
}

// A client that pipelines requests and never reads cannot hold even small error answers for
// good: they are written within SendTimeout too, and its connection is closed. net/http lifts
// the write deadline after each request, and only the engine's answers set one, so the
// flush of a closed server's 503s blocked with no end (found by a review of the Go server).
func TestHTTPErrorAnswersToAClientThatNeverReadsAreCutAfterTheSendTimeout(t *testing.T) {
	cfg := &Config{Role: Server, Name: "t", Version: "1", Capabilities: json.RawMessage(`{"tools":{}}`)}
	srv, err := NewHTTPServer(cfg, &HTTPOptions{SendTimeout: 200 * time.Millisecond}, &testApp{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // every request now gets 503 "server closed"
	closed := make(chan struct{}, 1)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	ts.Start()
	defer ts.Close()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	request := "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nContent-Length: 2\r\n\r\n{}"
	go func() {
		for range 20000 {
			if _, err := io.WriteString(conn, request); err != nil {
				return
			}
		}
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of a client that never reads is still open")
	}
}
