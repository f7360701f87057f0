package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
)

// A connection past the cap, when every connection is in a request, gets 503 at once and is
// closed; once a served connection closes, the next one is served. (net/http bounds nothing:
// a helper's audit held 3,000 idle connections open on this example.)
func TestConnectionsPastTheCapGet503(t *testing.T) {
	addr, ln, accepted := acceptCapped(t, 1)
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	served := <-accepted
	ln.ConnState(served, http.StateActive) // as net/http says once a request arrives

	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Write([]byte("GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("past the cap: %d %v", resp.StatusCode, resp.Header)
	}
	select {
	case c := <-accepted:
		t.Fatalf("a connection past the cap was handed out: %v", c.RemoteAddr())
	default:
	}

	// The served one closes: its slot is free again (closing twice frees it once).
	served.Close()
	served.Close()
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	select {
	case c := <-accepted:
		ln.ConnState(c, http.StateActive)
	case <-time.After(5 * time.Second):
		t.Fatal("the freed slot was not given to the next connection")
	}
	fourth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	_ = fourth.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fourth.Write([]byte("GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(fourth), nil); err != nil || resp.StatusCode != 503 {
		t.Fatalf("one slot, two connections: %v %v", resp, err)
	}
}

// At the cap, a new connection takes the place of the one idle longest (silent since it was
// accepted, or between two requests), never one in a request: sockets left open cannot lock
// clients out. Before, a cap's worth of them got every later client 503.
func TestTheConnectionIdleLongestMakesRoom(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, 3)
	release := make(chan struct{})
	hs := &http.Server{ConnState: ln.ConnState, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	defer close(release)
	addr := inner.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	get := func(c net.Conn, path string) int {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	closed := func(c net.Conn) bool {
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}

	silent := dial()
	defer silent.Close()
	time.Sleep(20 * time.Millisecond)
	kept := dial()
	defer kept.Close()
	if code := get(kept, "/"); code != 200 {
		t.Fatalf("kept: %d", code)
	}
	waitIdle(t, ln, 1) // kept idle before busy and fourth connect
	busy := dial()
	defer busy.Close()
	if _, err := io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)

	fourth := dial()
	defer fourth.Close()
	if code := get(fourth, "/"); code != 200 {
		t.Fatalf("at the cap: %d, want the silent connection to make room", code)
	}
	if !closed(silent) {
		t.Fatal("the silent connection is still open")
	}
	fifth := dial()
	defer fifth.Close()
	if code := get(fifth, "/"); code != 200 {
		t.Fatalf("at the cap again: %d", code)
	}
	if !closed(kept) {
		t.Fatal("the kept-alive connection idle longest is still open")
	}
	// The busy one was never chosen: its answer comes once the handler is released.
	release <- struct{}{}
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the busy connection: %v %v", resp, err)
	}
	resp.Body.Close()
}

// At the cap, a connection between two requests whose next request waits unread in the
// kernel (net/http has not read it yet, so it still calls the connection idle) is passed
// over, though idle longest: closing it lost that request. The next idle one makes room.
func TestAConnectionWithItsNextRequestWaitingIsNotClosed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, 2)
	defer ln.Close()
	addr := inner.Addr().String()
	var clients, served []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		clients, served = append(clients, c), append(served, s)
		ln.ConnState(s, http.StateIdle) // the first idle longest
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := io.WriteString(clients[0], "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)

	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := ln.Accept(); err != nil {
		t.Fatal(err)
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return isClosed(err)
	}
	if closed(clients[0]) {
		t.Fatal("the connection whose next request waited was closed")
	}
	if !closed(clients[1]) {
		t.Fatal("the other idle connection did not make room")
	}
	// Its request is still there to read.
	_ = served[0].SetReadDeadline(time.Now().Add(time.Second))
	req, err := http.ReadRequest(bufio.NewReader(served[0]))
	if err != nil || req.URL.Path != "/" {
		t.Fatalf("the waiting request: %v %v", req, err)
	}
}

// At the cap, a connection whose next request head net/http has read in part (it still
// calls the connection idle until the head is whole) is passed over for a second: closing it
// lost that request. A head that has been arriving for longer is a slow one, and its
// connection makes room (so trickled heads cannot lock clients out).
func TestAHeadArrivingProtectsItsConnectionForASecond(t *testing.T) {
	addr, ln := serveCapped(t, 2)
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return isClosed(err)
	}

	// Served once, then half of its next head, read by net/http; a silent one after it.
	begun := dialFor10s(t, addr)
	begunReader := bufio.NewReader(begun)
	mustWrite(t, begun, head)
	if code := status(t, begunReader); code != 200 {
		t.Fatalf("first: %d", code)
	}
	mustWrite(t, begun, head[:10])
	time.Sleep(100 * time.Millisecond)
	silent := dialFor10s(t, addr)
	time.Sleep(50 * time.Millisecond)
	third := dialFor10s(t, addr)
	thirdReader := bufio.NewReader(third)
	mustWrite(t, third, head)
	if code := status(t, thirdReader); code != 200 {
		t.Fatalf("at the cap: %d", code)
	}
	if !closed(silent) {
		t.Fatal("the silent connection did not make room")
	}
	mustWrite(t, begun, head[10:])
	if code := status(t, begunReader); code != 200 {
		t.Fatalf("the begun request: %d", code)
	}

	// Now a head trickled for two seconds: its connection (idle longest) makes room.
	waitIdle(t, ln, 2) // begun idle before third's next request
	mustWrite(t, third, head)
	if code := status(t, thirdReader); code != 200 {
		t.Fatalf("third again: %d", code)
	}
	mustWrite(t, begun, head[:10])
	for range 10 { // 2 s: well past headGrace even when the server is slow to read (-race)
		time.Sleep(200 * time.Millisecond)
		mustWrite(t, begun, "X")
	}
	fourth := dialFor10s(t, addr)
	mustWrite(t, fourth, head)
	if code := status(t, bufio.NewReader(fourth)); code != 200 {
		t.Fatalf("at the cap again: %d", code)
	}
	if !closed(begun) {
		t.Fatal("the trickling connection is still open")
	}
	mustWrite(t, third, head) // the other stays
	if code := status(t, thirdReader); code != 200 {
		t.Fatalf("third, after: %d", code)
	}
}

// isClosed tells a read that found the connection closed (an end, or a reset: a socket closed
// with input unread resets) from one that timed out.
func isClosed(err error) bool {
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

// Heads kept arriving cannot lock new clients out: when every idle connection at the cap
// has a request arriving, the one idle longest is closed all the same.
func TestArrivingHeadsEverywhereStillMakeRoom(t *testing.T) {
	addr, ln := serveCapped(t, 2)
	var conns []net.Conn
	var readers []*bufio.Reader
	for i := range 2 {
		c := dialFor10s(t, addr)
		br := bufio.NewReader(c)
		mustWrite(t, c, head)
		if code := status(t, br); code != 200 {
			t.Fatalf("first: %d", code)
		}
		conns, readers = append(conns, c), append(readers, br)
		waitIdle(t, ln, i+1) // conns[0] idle longest
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range conns {
		mustWrite(t, c, head[:10])
	}
	time.Sleep(100 * time.Millisecond)
	third := dialFor10s(t, addr)
	mustWrite(t, third, head)
	if code := status(t, bufio.NewReader(third)); code != 200 {
		t.Fatalf("at the cap: %d, want the one idle longest to make room", code)
	}
	_ = conns[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := readers[0].ReadByte(); !isClosed(err) {
		t.Fatalf("the one idle longest: %v, want it closed", err)
	}
	mustWrite(t, conns[1], head[10:])
	if code := status(t, readers[1]); code != 200 {
		t.Fatalf("the other: %d", code)
	}
}

// serveCapped serves "ok" to every request on a loopback listener capped at limit connections,
// until the test ends; it returns the address and the listener.
func serveCapped(t *testing.T, limit int) (string, *capped) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, limit)
	hs := &http.Server{ConnState: ln.ConnState, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return inner.Addr().String(), ln
}

// waitIdle waits (5 s at most) until n of ln's connections are idle between requests: net/http
// reports a connection idle a moment after its answer has gone out, so a client that has read
// its answer cannot tell yet which connection the listener counts as idle longest.
func waitIdle(t *testing.T, ln *capped, n int) {
	t.Helper()
	waitState(t, ln, http.StateIdle, n)
}

// waitState waits (5 s at most) until n of ln's connections are in state, as net/http last
// reported it.
func waitState(t *testing.T, ln *capped, state http.ConnState, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		ln.mu.Lock()
		count := 0
		for c := range ln.conns {
			if c.state == state {
				count++
			}
		}
		ln.mu.Unlock()
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections %v after 5 s, want %d", count, state, n)
		}
	}
}

// head is a whole request head, for the cap tests.
const head = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// dialFor10s connects to addr, with 10 s for everything on the connection, closed when the
// test ends.
func dialFor10s(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// mustWrite writes text to c.
func mustWrite(t *testing.T, c net.Conn, text string) {
	t.Helper()
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
}

// status reads one response from br, drains its body and returns its status.
func status(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// At the cap, connections whose bodies trickle are in a request, which is never displaced;
// HTTPServer's minimum body rate answers them 408 once its grace is over, net/http closes
// them, and a new client is served again soon after the grace, not after the 30 s body
// timeout. The listener and the handler as main wires them, with a grace of 1.5 s (short,
// but long enough for the first new client to find the cap full on a loaded machine).
func TestTrickledBodiesAtTheCapGiveWayAfterTheGrace(t *testing.T) {
	srv, err := mcpwire.NewHTTPServer(&mcpwire.Config{Role: mcpwire.Server, Name: "t", Version: "1"},
		&mcpwire.HTTPOptions{MinBodyRate: 1000, BodyRateGrace: 1500 * time.Millisecond},
		mcpwire.HTTPAppFunc(func(*mcpwire.Conn, mcpwire.ConnKey, mcpwire.Event) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, 2)
	hs := &http.Server{Handler: mux, ConnState: ln.ConnState}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	addr := inner.Addr().String()

	// Two bodies at 20 bytes a second, each in its own connection: the cap.
	var wg sync.WaitGroup
	defer wg.Wait()
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
			"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ { // (a failed write: cut)
				time.Sleep(50 * time.Millisecond)
				if _, err := io.WriteString(c, " "); err != nil {
					return
				}
			}
		}()
	}
	waitState(t, ln, http.StateActive, 2) // both in a request

	started := time.Now()
	refused := 0
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		status := 0
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		c.Close()
		if status == http.StatusNotFound {
			break
		}
		refused++
		if time.Since(started) > 6*time.Second {
			t.Fatalf("still turned away (%d, %v) after %v", status, err, time.Since(started))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refused == 0 {
		t.Fatal("the trickled bodies never filled the cap")
	}
}

// A request to a path other than /mcp that declares a body and sends none gets its 404 at once,
// and its connection is closed: net/http read (and dropped) the declared body first, with no
// deadline, so such a connection held its slot of the cap for good.
// Paths a ServeMux would clean (//mcp, /./x) and OPTIONS * too: each was answered by net/http
// itself after reading the declared body, with no deadline, so a client that never sent it
// held the connection (and a slot of the cap) for good.
func TestOtherPathsAre404AtOnceAndClosed(t *testing.T) {
	srv := httptestServer(t, routes(http.NotFoundHandler()))
	for _, target := range []string{"POST /x", "POST //mcp", "POST /./x", "POST /x/../mcp/", "OPTIONS *"} {
		c, err := net.Dial("tcp", srv)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, target+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: no answer while the body was missing: %v", target, err)
		}
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != http.StatusNotFound || !resp.Close {
			t.Fatalf("%s: %d, close %v", target, resp.StatusCode, resp.Close)
		}
	}
}

// httptestServer serves h on a loopback port of its own until the test ends.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpServer(h)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// As the server stops, a connection that has sent nothing is closed at once (net/http's
// Shutdown waited 5 s for it); one whose request has begun to arrive is left to be served.
func TestStoppingClosesSilentConnectionsOnly(t *testing.T) {
	addr, ln, accepted := acceptCapped(t, 4)
	dial := func() (client, served net.Conn) {
		client, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		return client, <-accepted
	}
	silent, _ := dial()
	talking, talkingServed := dial()
	if _, err := io.WriteString(talking, "POST /mcp HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	// (Not read yet: waiting on the socket, as a head net/http has not taken in.)
	deadline := time.Now().Add(5 * time.Second)
	for !pendingInput(talkingServed.(*slotConn).Conn) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ln.closeSilent()
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the silent connection is still open: %d %v", n, err)
	}
	_ = talking.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := talking.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection with a request arriving was closed: %v", err)
	}
}

// acceptCapped listens on a loopback port capped at limit connections, and hands every
// connection it accepts to the channel it returns (no HTTP server: the test plays its part),
// until the test ends.
func acceptCapped(t *testing.T, limit int) (string, *capped, chan net.Conn) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, limit)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return inner.Addr().String(), ln, accepted
}

// Stopping: a call answered within the grace gets its answer; a call still open when the
// grace runs out gets a -32603 error on its stream (its client learns at once that no answer
// will come, instead of waiting out its own timeout), and the stop then ends.
func TestStoppingAnswersCallsStillOpenAfterTheGraceWithAnError(t *testing.T) {
	type held struct {
		key mcpwire.ConnKey
		id  mcpwire.ID
	}
	calls := make(chan held, 2)
	srv, err := mcpwire.NewHTTPServer(&mcpwire.Config{Role: mcpwire.Server, Name: "t", Version: "1",
		Capabilities: json.RawMessage(`{"tools":{}}`)}, nil,
		mcpwire.HTTPAppFunc(func(_ *mcpwire.Conn, key mcpwire.ConnKey, ev mcpwire.Event) {
			if req, ok := ev.(*mcpwire.RequestEvent); ok {
				calls <- held{key, req.ID}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, 8)
	hs := httpServer(routes(srv))
	hs.ConnState = ln.ConnState
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + inner.Addr().String() + "/mcp"

	call := func(id int) (*http.Response, held) {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"slow",` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "slow")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		select {
		case h := <-calls:
			return resp, h
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not reach the application")
		}
		panic("unreachable")
	}
	answered, first := call(1)
	abandoned, _ := call(2)

	const grace = 300 * time.Millisecond
	stopped := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(stopped)
		stopGracefully(srv, hs, ln, grace)
	}()
	time.Sleep(grace / 3)
	if err := srv.With(first.key, func(c *mcpwire.Conn) error {
		return c.Respond(first.id, json.RawMessage(`{"content":[{"type":"text","text":"in time"}]}`))
	}); err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(answered.Body); err != nil || !strings.Contains(string(body), `"in time"`) {
		t.Fatalf("the call answered within the grace: %q, %v", body, err)
	}
	body, err := io.ReadAll(abandoned.Body)
	if err != nil || !strings.Contains(string(body), `"code":-32603`) || !strings.Contains(string(body), `"id":2`) {
		t.Fatalf("the call still open after the grace: %q, %v", body, err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the stop did not end")
	}
	if took := time.Since(start); took < grace {
		t.Fatalf("stopped after %v, before the grace of %v", took, grace)
	}
}
