package mcpwire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The handshake a client sends first, one line each.
const (
	testInitialize  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	testInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
)

// servePipes runs Serve on conn over two pipes and returns the client's ends: what it writes
// to the server, and a reader of the server's lines. Serve's result arrives on done.
func servePipes(t *testing.T, conn *Conn, h Handler) (in *io.PipeWriter, lines *bufio.Scanner, done chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done = make(chan error, 1)
	go func() {
		err := Serve(context.Background(), conn, inR, outW, h)
		outW.Close()
		done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // (let Serve write what it still has)
		<-done
	})
	lines = bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	return inW, lines, done
}

// nextLine reads the server's next line within d.
func nextLine(t *testing.T, lines *bufio.Scanner, d time.Duration) map[string]any {
	t.Helper()
	got := make(chan map[string]any, 1)
	go func() {
		if !lines.Scan() {
			got <- nil
			return
		}
		var m map[string]any
		_ = json.Unmarshal(lines.Bytes(), &m)
		got <- m
	}()
	select {
	case m := <-got:
		if m == nil {
			t.Fatal("the server's output ended")
		}
		return m
	case <-time.After(d):
		t.Fatalf("no line from the server within %v", d)
		return nil
	}
}

// An answer given on another goroutine while Serve waits for input is written at once (it
// waited for the client's next bytes), and thousands of them, given concurrently, all arrive
// (concurrent calls corrupted the engine: "range end index out of range", SIGSEGV).
func TestServeWritesAnswersGivenOnOtherGoroutines(t *testing.T) {
	conn := toolsServer(t)
	in, lines, _ := servePipes(t, conn, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if req, ok := ev.(*RequestEvent); ok {
			go func() {
				time.Sleep(time.Millisecond)
				// (A request the engine refused while too many were in flight is answered
				// already: ErrUnknownRequest.)
				if err := c.Respond(req.ID, json.RawMessage(`{"tools":[]}`)); err != nil &&
					!errors.Is(err, ErrUnknownRequest) {
					t.Error(err)
				}
			}()
		}
	}))
	go io.WriteString(in, testInitialize+testInitialized+`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	if m := nextLine(t, lines, 5*time.Second); m["id"] != 0.0 {
		t.Fatalf("not the initialize result: %v", m)
	}
	// Nothing else comes in: the answer must not wait for it.
	if m := nextLine(t, lines, 5*time.Second); m["id"] != 1.0 {
		t.Fatalf("not the answer to 1: %v", m)
	}

	const n = 5000
	go func() {
		for i := 2; i < n+2; i++ {
			io.WriteString(in, `{"jsonrpc":"2.0","id":`+itoa(i)+`,"method":"tools/list"}`+"\n")
		}
	}()
	// Every request is answered once: by its goroutine, or, past the engine's limit on
	// requests in flight, with its error.
	seen := make(map[float64]bool)
	answered := 0
	for len(seen) < n {
		m := nextLine(t, lines, 10*time.Second)
		id, _ := m["id"].(float64)
		if seen[id] || id < 2 || (m["result"] == nil && m["error"] == nil) {
			t.Fatalf("after %d answers: %v", len(seen), m)
		}
		seen[id] = true
		if m["result"] != nil {
			answered++
		}
	}
	if answered < n/10 {
		t.Fatalf("only %d of %d answered by their goroutines", answered, n)
	}
}

// A request sent on another goroutine while Serve waits goes out at once, and its timeout
// fires: Serve re-arms its timer for the deadline the request added.
func TestServeSendsAndTimesOutARequestGivenOnAnotherGoroutine(t *testing.T) {
	conn, err := NewConn(serverConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ready := make(chan struct{})
	timedOut := make(chan RequestID, 1)
	in, lines, _ := servePipes(t, conn, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ReadyEvent:
			close(ready)
		case *TimedOutEvent:
			timedOut <- ev.Request
		}
	}))
	go io.WriteString(in, testInitialize+testInitialized)
	nextLine(t, lines, 5*time.Second) // the initialize result
	<-ready
	time.Sleep(50 * time.Millisecond) // (Serve is waiting for input now)
	id, err := conn.Request(time.Now(), "ping", nil, &RequestOptions{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if m := nextLine(t, lines, 5*time.Second); m["method"] != "ping" {
		t.Fatalf("not the ping: %v", m)
	}
	select {
	case got := <-timedOut:
		if got != id {
			t.Fatalf("timed out %v, want %v", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request never timed out")
	}
	if m := nextLine(t, lines, 5*time.Second); m["method"] != "notifications/cancelled" {
		t.Fatalf("not the cancellation: %v", m)
	}
}

// Close is safe from several goroutines at once, and while Serve runs on another (a double
// free, and "malloc(): unaligned tcache chunk" under traffic).
func TestConnCloseFromSeveralGoroutinesWhileServing(t *testing.T) {
	for round := 0; round < 20; round++ {
		conn := toolsServer(t)
		in, lines, done := servePipes(t, conn, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			if req, ok := ev.(*RequestEvent); ok {
				_ = c.Respond(req.ID, json.RawMessage(`{"tools":[]}`))
			}
		}))
		go io.Copy(io.Discard, struct{ io.Reader }{readerOf(lines)})
		go func() {
			io.WriteString(in, testInitialize+testInitialized)
			for i := 1; ; i++ {
				if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":`+itoa(i)+`,"method":"tools/list"}`+"\n"); err != nil {
					return
				}
			}
		}()
		time.Sleep(2 * time.Millisecond)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := conn.Close(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, ErrFreed) {
				t.Fatalf("Serve after Close: %v", err)
			}
			done <- err // (for the cleanup)
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return after Close")
		}
		in.Close()
	}
}

// readerOf turns the scanner's remaining lines back into a stream to drain.
func readerOf(s *bufio.Scanner) io.Reader {
	r, w := io.Pipe()
	go func() {
		for s.Scan() {
			w.Write(s.Bytes())
		}
		w.Close()
	}()
	return r
}

// The HTTPClient's Conn takes requests from other goroutines while Run runs (a host calls a
// tool when its model asks for one): each goes out at once and its answer reaches the
// handler. Before, such a call raced Run inside the engine, and what it queued waited until
// Run woke for some other reason (seconds: the next keep-alive, or the end).
func TestHTTPClientTakesRequestsFromOtherGoroutinesWhileRunning(t *testing.T) {
	for _, era := range []ClientEra{ClientEraLegacy, ClientEraAuto} {
		_, _, ts := newTestServer(t, nil)
		client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: era}, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		ready := make(chan struct{})
		answers := make(chan RequestID, 64)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
				switch ev := ev.(type) {
				case *ReadyEvent:
					close(ready)
				case *ResponseEvent:
					answers <- ev.Request
				case *ErrorEvent, *FailedEvent, *TimedOutEvent:
					t.Errorf("%T %+v", ev, ev)
				}
			}))
		}()
		<-ready
		time.Sleep(50 * time.Millisecond) // (Run is waiting now)
		const n = 20
		sent := make(map[RequestID]bool)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n / 4 {
					id, err := client.Conn().Request(time.Now(), "tools/list", nil, nil)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					sent[id] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for got := 0; got < n; got++ {
			select {
			case id := <-answers:
				mu.Lock()
				if !sent[id] {
					t.Fatalf("an answer to %v, which was not sent", id)
				}
				delete(sent, id)
				mu.Unlock()
			case <-time.After(3 * time.Second):
				t.Fatalf("era %v: %d of %d answers after 3 s", era, got, n)
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		client.Close()
	}
}

// Close on another goroutine wakes a Serve that waits for input: it returns ErrFreed at
// once (it waited for the next input, the next deadline or its ctx).
func TestCloseWakesAWaitingServe(t *testing.T) {
	conn := toolsServer(t)
	ready := make(chan struct{})
	in, lines, done := servePipes(t, conn, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			close(ready)
		}
	}))
	go io.WriteString(in, testInitialize+testInitialized)
	nextLine(t, lines, 5*time.Second)
	<-ready
	time.Sleep(50 * time.Millisecond) // (Serve waits for input now)
	conn.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrFreed) {
			t.Fatalf("Serve: %v, want ErrFreed", err)
		}
		done <- err // (for the cleanup)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}

// blockingWriter's Write waits until release is closed.
type blockingWriter struct{ release chan struct{} }

func (w blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}

// A Write that blocks (a peer that stopped reading) does not hold the Conn: commands from
// other goroutines, a Tasks table and Close go on (they waited for the writer: one stuck
// peer froze every Tasks call in the process), and Serve returns once the Write does.
func TestABlockedWriteHoldsNothingBack(t *testing.T) {
	conn := toolsServer(t)
	tasks, err := NewTasks(nil, time.Now(), time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	defer tasks.Close()
	w := blockingWriter{make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), conn, stringsReader(testInitialize), w, HandlerFunc(func(*Conn, time.Time, Event) {}))
	}()
	time.Sleep(100 * time.Millisecond) // (Serve is writing the initialize result now)
	within := func(what string, f func()) {
		t.Helper()
		finished := make(chan struct{})
		go func() { f(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(2 * time.Second):
			t.Fatalf("%s waited for the blocked Write", what)
		}
	}
	within("a command", func() { _ = conn.Notify("notifications/tools/list_changed", nil) })
	within("Status", func() { _, _ = conn.Status() })
	within("Tasks.Create", func() { _, _ = tasks.Create(time.Now()) })
	within("Close", func() { conn.Close() })
	close(w.release)
	select {
	case err := <-done:
		if !errors.Is(err, ErrFreed) {
			t.Fatalf("Serve: %v, want ErrFreed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// stallsOnBig takes small Writes, and blocks a Write of 32 KiB or more until release is
// closed: a peer that reads a little, then stops reading.
type stallsOnBig struct{ release chan struct{} }

func (w stallsOnBig) Write(p []byte) (int, error) {
	if len(p) >= 32<<10 {
		<-w.release
	}
	return len(p), nil
}

// While a large Write waits on a peer that does not read, Serve goes on: it reads and feeds
// the peer's requests (the handler hears them), and the timeout of our request fires on time.
// Both waited for the Write: the loop neither fed input nor fired timers until it returned.
func TestServeGoesOnWhileALargeWriteWaits(t *testing.T) {
	conn := toolsServer(t)
	w := stallsOnBig{make(chan struct{})}
	inR, in := io.Pipe()
	defer in.Close()
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 100<<10) + `"}`)
	heard, timedOut := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), conn, inR, w, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch ev := ev.(type) {
			case *ReadyEvent:
				if _, err := c.Request(now, "ping", nil, &RequestOptions{Timeout: 200 * time.Millisecond}); err != nil {
					t.Error(err)
				}
			case *RequestEvent:
				if ev.ID.String() == "2" {
					close(heard)
				}
				_ = c.Respond(ev.ID, big)
			case *TimedOutEvent:
				close(timedOut)
			}
		}))
	}()
	// The answer to 1 blocks in Write; 2 is sent meanwhile.
	go io.WriteString(in, testInitialize+testInitialized+`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	time.Sleep(100 * time.Millisecond)
	go io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	select {
	case <-heard:
	case <-time.After(5 * time.Second):
		t.Fatal("the request sent while a Write waited was not heard")
	}
	select {
	case <-timedOut:
	case <-time.After(5 * time.Second):
		t.Fatal("the ping's timeout did not fire while a Write waited")
	}
	close(w.release)
	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return at the end of input")
	}
}

// An answer read while the output had no room for more (a large Write waiting on a peer that
// reads slowly) is fed before the deadline that passes meanwhile fires: the request had its
// answer in time. The timeout fired with the answer read but not fed, and the answer was
// dropped as late (found by a review).
func TestServeFeedsAnAnswerReadBeforeItsDeadlineFiresWhileTheOutputIsFull(t *testing.T) {
	cfg := &Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"tools":{}}`), Limits: Limits{MaxBufferedOutput: 256 << 10}}
	conn, err := NewConn(cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	w := stallsOnBig{make(chan struct{})}
	inR, in := io.Pipe()
	defer in.Close()
	// More than half the output's bound: no input is fed while it waits.
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 200<<10) + `"}`)
	pinged := make(chan RequestID, 1)
	outcome := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), conn, inR, w, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch ev := ev.(type) {
			case *ReadyEvent:
				id, err := c.Request(now, "ping", nil, &RequestOptions{Timeout: time.Second})
				if err != nil {
					t.Error(err)
				}
				pinged <- id
			case *RequestEvent:
				_ = c.Respond(ev.ID, big)
			case *ResponseEvent:
				outcome <- "answered"
			case *TimedOutEvent:
				outcome <- "timed out"
			}
		}))
	}()
	go io.WriteString(in, testInitialize+testInitialized+`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	id := <-pinged
	time.Sleep(100 * time.Millisecond) // the answer to 1 waits in Write by now
	go io.WriteString(in, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", id))
	time.Sleep(1500 * time.Millisecond) // past the ping's deadline (slack for a loaded machine)
	close(w.release)
	select {
	case got := <-outcome:
		if got != "answered" {
			t.Fatalf("the ping %s; its answer came 100 ms after it was sent", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no outcome for the ping")
	}
	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return at the end of input")
	}
}

// An answer that reached the pipe while a handler held Serve past the request's deadline is
// taken, not timed out: the deadline had passed when Serve came back, and it fired before the
// reader, asked only then, had read what the kernel held.
func TestServeTakesAnAnswerThatArrivedWhileAHandlerHeldItPastTheDeadline(t *testing.T) {
	conn, err := NewConn(serverConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	inR, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer in.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	lines := bufio.NewScanner(outR)
	busy := make(chan struct{})
	outcome := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), conn, inR, outW, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch ev := ev.(type) {
			case *ReadyEvent:
				if _, err := c.Request(now, "ping", nil, &RequestOptions{Timeout: time.Second}); err != nil {
					t.Error(err)
				}
			case *RequestEvent:
				// Slow work on Serve's goroutine, past the ping's deadline; the answer
				// reaches the pipe meanwhile.
				close(busy)
				time.Sleep(1500 * time.Millisecond)
				_ = c.Respond(ev.ID, json.RawMessage(`{"tools":[]}`))
			case *ResponseEvent:
				outcome <- "answered"
			case *TimedOutEvent:
				outcome <- "timed out"
			}
		}))
		outW.Close()
	}()
	if _, err := io.WriteString(in, testInitialize+testInitialized); err != nil {
		t.Fatal(err)
	}
	var ping map[string]any
	for ping == nil || ping["method"] != "ping" {
		ping = nextLine(t, lines, 5*time.Second)
	}
	id, _ := json.Marshal(ping["id"])
	go func() {
		for lines.Scan() { // (the rest of the output, unread)
		}
	}()
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	<-busy
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-outcome:
		if got != "answered" {
			t.Fatalf("the ping's answer, in the pipe before Serve came back to it: %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("neither answer nor timeout")
	}
	in.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// statusWriter calls its Conn from inside Write.
type statusWriter struct{ c *Conn }

func (w statusWriter) Write(p []byte) (int, error) {
	w.c.State()
	return len(p), nil
}

// A writer may call the Conn it writes for (it waited for itself for ever).
func TestAWriterMayCallItsConn(t *testing.T) {
	conn := toolsServer(t)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), conn, stringsReader(testInitialize), statusWriter{conn}, HandlerFunc(func(*Conn, time.Time, Event) {}))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve hung: the writer waited for the Conn")
	}
}

// Serve on a closed Conn while another goroutine closes it, and an HTTPClient's Conn drained
// from several goroutines: no data race (-race).
func TestServeOnAClosedConnAndSharedClientViewsAreRaceFree(t *testing.T) {
	conn := toolsServer(t)
	_ = conn.FeedEOF(time.Now())
	for _, ok := conn.NextEvent(); ok; _, ok = conn.NextEvent() {
	}
	go conn.Close()
	_ = Serve(context.Background(), conn, stringsReader(""), io.Discard, HandlerFunc(func(*Conn, time.Time, Event) {}))

	_, _, ts := newTestServer(t, nil)
	client := legacyHTTPClient(t, ts.URL)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				client.Conn().NextEvent()
			}
		}()
	}
	wg.Wait()
}

func stringsReader(s string) io.Reader { return &failingReader{data: []byte(s), err: io.EOF} }

// Commands that keep coming while the peer reads as fast as they come cannot hold Serve's
// loop in its write: input is still taken and answered, and a cancelled ctx still ends Serve.
// Serve's own write went on for as long as each Write found a little more output (found by a
// review of Serve). Here each Write itself gives the next command, as another goroutine at
// the writer's pace would.
func TestServeGoesOnWhileCommandsKeepComing(t *testing.T) {
	conn, err := NewConn(serverConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	pinged := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(outR)
		lines.Buffer(make([]byte, 1<<20), 1<<20)
		seen := false
		for lines.Scan() {
			if !seen && strings.Contains(lines.Text(), `"id":7,"result"`) {
				seen = true
				close(pinged)
			}
		}
	}()
	w := &commandingWriter{w: outW, conn: conn}
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, conn, inR, w, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			if _, ok := ev.(*ReadyEvent); ok {
				close(ready)
			}
		}))
		outW.Close()
	}()
	go io.WriteString(inW, testInitialize+testInitialized)
	<-ready
	w.on.Store(true)
	_ = conn.Notify("notifications/tools/list_changed", nil) // the first; each Write gives the next
	time.Sleep(100 * time.Millisecond)
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n")
	select {
	case <-pinged:
	case <-time.After(5 * time.Second):
		w.on.Store(false) // (so that Serve can end)
		t.Fatal("the ping was not answered while commands kept coming")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		w.on.Store(false)
		t.Fatal("Serve did not end on ctx while commands kept coming")
	}
}

// commandingWriter writes to w and then, while on, gives conn one more command.
type commandingWriter struct {
	w    io.Writer
	conn *Conn
	on   atomic.Bool
}

func (c *commandingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if c.on.Load() {
		_ = c.conn.Notify("notifications/tools/list_changed", nil)
	}
	return n, err
}
