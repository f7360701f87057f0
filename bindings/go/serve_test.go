package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// answerAll answers every request with an empty tools list, at once.
var answerAll = HandlerFunc(func(c *Conn, _ time.Time, ev Event) {
	if req, ok := ev.(*RequestEvent); ok {
		_ = c.Respond(req.ID, json.RawMessage(`{"tools":[]}`))
	}
})

// A second Serve on a Conn that one drives already is refused at once. It used to run: both
// handed out events and wrote the same output, so an answer to the first peer went out on
// the second one's writer, and the first could hang after its input ended.
func TestServeTwiceOnOneConnIsRefused(t *testing.T) {
	conn := toolsServer(t)
	inR, in := io.Pipe()
	outR, out := io.Pipe()
	first := make(chan error, 1)
	go func() { first <- Serve(context.Background(), conn, inR, out, answerAll) }()
	lines := bufio.NewScanner(outR)
	go io.WriteString(in, testInitialize+testInitialized)
	if !lines.Scan() {
		t.Fatal("no initialize result")
	}

	r2, w2 := io.Pipe()
	defer w2.Close()
	second := make(chan error, 1)
	go func() { second <- Serve(context.Background(), conn, r2, io.Discard, answerAll) }()
	select {
	case err := <-second:
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Fatalf("second Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second Serve was not refused")
	}
	// The first goes on: it answers, and ends with its input.
	go io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	if !lines.Scan() || !strings.Contains(lines.Text(), `"id":1`) {
		t.Fatalf("first peer's answer: %q", lines.Text())
	}
	in.Close()
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("first Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first Serve did not end with its input")
	}
}

// While Serve runs, it alone takes the events and writes the output. A handler that drained
// the events itself (after its own Shutdown, say) took the ClosedEvent from under Serve,
// which then waited for good, its context's cancellation included; and a WriteTo beside
// Serve's writer wrote the same bytes twice. Now NextEvent and AppendEvents give nothing, and
// WriteTo and AppendOutput fail, until Serve returns.
func TestServeAloneTakesTheEventsAndWritesTheOutput(t *testing.T) {
	conn := toolsServer(t)
	inR, in := io.Pipe()
	defer in.Close()
	outR, out := io.Pipe()
	output := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(outR); output <- b }()
	var stolen int
	var writeErr, appendErr error
	h := HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		req, ok := ev.(*RequestEvent)
		if !ok {
			return
		}
		_ = c.Respond(req.ID, json.RawMessage(`{"tools":[]}`))
		_ = c.Shutdown(now, 0)
		for _, ok := c.NextEvent(); ok; _, ok = c.NextEvent() {
			stolen++
		}
		stolen += len(c.AppendEvents(nil))
		_, writeErr = c.WriteTo(io.Discard)
		_, appendErr = c.AppendOutput(nil)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, conn, inR, out, h) }()
	go io.WriteString(in, testInitialize+testInitialized+`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		select {
		case <-served:
			t.Fatal("Serve ended only when its context was cancelled")
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not end after the close, nor when its context was cancelled")
		}
	}
	out.Close()
	if got := <-output; !bytes.Contains(got, []byte(`"id":1,"result":{"tools":[]}`)) {
		t.Errorf("the answer given before the close was not written: %q", got)
	}
	if stolen != 0 {
		t.Errorf("the handler took %d events from under Serve", stolen)
	}
	for _, err := range []error{writeErr, appendErr} {
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("writing the output beside Serve: %v", err)
		}
	}
	// Serve is done: the Conn is the caller's again.
	if n, err := conn.WriteTo(io.Discard); n != 0 || err != nil {
		t.Errorf("WriteTo after Serve: %d bytes, %v", n, err)
	}
}

// Under lowered limits the input is fed in smaller pieces: 200 pipelined requests all get
// answers with MaxInboundInFlight 64 (a 4 KiB piece held up to 85 of them, and the rest
// were refused as too many in flight), and 3,000 lines of junk with a 128 KiB output bound
// do not close the connection as a peer that does not read (the engine's error answers to
// one piece passed the bound), so the request after them is answered.
func TestServeFeedsPiecesThatFitLoweredLimits(t *testing.T) {
	for _, limits := range []Limits{{MaxInboundInFlight: 64}, {MaxBufferedOutput: 128 << 10}} {
		conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
			Capabilities: json.RawMessage(`{"tools":{}}`), Limits: limits}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		in := pipelined(200)
		in.WriteString(strings.Repeat("x\n", 3000) + `{"jsonrpc":"2.0","id":999,"method":"tools/list"}` + "\n")
		var out bytes.Buffer
		if err := Serve(context.Background(), conn, in, &out, answerAll); err != nil {
			t.Fatalf("%+v: %v", limits, err)
		}
		if n := bytes.Count(out.Bytes(), []byte(`"result":{"tools":[]}`)); n != 201 {
			t.Errorf("%+v: %d answers to 201 requests", limits, n)
		}
		if bytes.Contains(out.Bytes(), []byte("too many")) {
			t.Errorf("%+v: requests refused as too many in flight", limits)
		}
	}
}

// InputPiece is the engine's (mcpw_conn_input_piece): 4 KiB by default, smaller under
// lowered limits, never under 64 bytes. A loop of one's own that feeds a large read in
// pieces of it, answering between them, gets every pipelined request answered under
// MaxInboundInFlight 64; the same read fed at once has most of them refused.
func TestInputPieceFollowsTheLimitsAndKeepsAnOwnLoopWithinThem(t *testing.T) {
	for _, c := range []struct {
		limits Limits
		want   int
	}{
		{Limits{}, 4096},
		{Limits{MaxInboundInFlight: 64}, 64 / 2 * 36},
		{Limits{MaxBufferedOutput: 128 << 10}, (128 << 10) / 2 / 64},
		{Limits{MaxInboundInFlight: 2}, 64},
	} {
		conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
			Capabilities: json.RawMessage(`{"tools":{}}`), Limits: c.limits}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.InputPiece(); got != c.want {
			t.Errorf("%+v: InputPiece %d, want %d", c.limits, got, c.want)
		}
		conn.Close()
	}

	answered := func(pieces bool) (int, bool) {
		conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
			Capabilities: json.RawMessage(`{"tools":{}}`), Limits: Limits{MaxInboundInFlight: 64}},
			time.Now())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		in := pipelined(200).Bytes()
		var out bytes.Buffer
		for len(in) > 0 {
			n := len(in)
			if pieces {
				n = min(n, conn.InputPiece())
			}
			if err := conn.Feed(time.Now(), in[:n]); err != nil {
				t.Fatal(err)
			}
			in = in[n:]
			for ev, ok := conn.NextEvent(); ok; ev, ok = conn.NextEvent() {
				answerAll(conn, time.Now(), ev)
			}
			if _, err := conn.WriteTo(&out); err != nil {
				t.Fatal(err)
			}
		}
		return bytes.Count(out.Bytes(), []byte(`"result":{"tools":[]}`)),
			bytes.Contains(out.Bytes(), []byte("too many"))
	}
	if n, refused := answered(true); n != 200 || refused {
		t.Errorf("fed in pieces: %d answers to 200 requests (refusals: %v)", n, refused)
	}
	if n, refused := answered(false); n >= 200 || !refused {
		t.Errorf("fed at once: %d answers, refusals %v: the limit was not reached, so the "+
			"test shows nothing", n, refused)
	}
}

// panickingReader panics in Read.
type panickingReader struct{}

func (panickingReader) Read([]byte) (int, error) { panic("reader bug") }

// A panic in r's Read goes on to Serve's caller, who can recover it, as one in the handler
// does. It happened on Serve's reading goroutine, where nothing could recover it: the
// process died.
func TestServeReaderPanicReachesTheCaller(t *testing.T) {
	got := func() (v any) {
		defer func() { v = recover() }()
		_ = Serve(context.Background(), toolsServer(t), panickingReader{}, io.Discard, answerAll)
		return nil
	}()
	if got != "reader bug" {
		t.Fatalf("recovered %v", got)
	}
}

// bigWriteFails panics (or, with exit, ends its goroutine) in a Write of 32 KiB or more,
// which Serve makes on its writer goroutine; smaller ones succeed.
type bigWriteFails struct{ exit bool }

func (w bigWriteFails) Write(p []byte) (int, error) {
	if len(p) >= 32<<10 {
		if w.exit {
			runtime.Goexit()
		}
		panic("writer bug")
	}
	return len(p), nil
}

// A panic in w's Write goes on to Serve's caller too, and a Write that ends its goroutine
// (runtime.Goexit, as t.FailNow does) makes Serve return an error. A large answer is written
// on Serve's writer goroutine, where the panic crashed the process and the Goexit left Serve
// waiting for its report for ever (found by a review).
func TestServeWriterPanicReachesTheCaller(t *testing.T) {
	input := testInitialize + testInitialized + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}` + "\n"
	big := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 100<<10) + `"}]}`)
	bigAnswer := HandlerFunc(func(c *Conn, _ time.Time, ev Event) {
		if ev, ok := ev.(*RequestEvent); ok {
			_ = c.Respond(ev.ID, big)
		}
	})
	got := func() (v any) {
		defer func() { v = recover() }()
		inR, in := io.Pipe()
		defer in.Close()
		go io.WriteString(in, input)
		_ = Serve(context.Background(), toolsServer(t), inR, bigWriteFails{}, bigAnswer)
		return nil
	}()
	if got != "writer bug" {
		t.Fatalf("recovered %v", got)
	}
	inR, in := io.Pipe()
	defer in.Close()
	go io.WriteString(in, input)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), toolsServer(t), inR, bigWriteFails{exit: true}, bigAnswer) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "Goexit") {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its writer's Goexit")
	}
}

// exitingReader ends its goroutine in Read (runtime.Goexit, as t.FailNow does).
type exitingReader struct{}

func (exitingReader) Read([]byte) (int, error) { runtime.Goexit(); return 0, nil }

// A Read that ends its goroutine makes Serve return an error, as a Write that does: Serve
// waited for the read's chunk for ever (found by a review of Serve).
func TestServeReaderGoexitEndsServeWithAnError(t *testing.T) {
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), toolsServer(t), exitingReader{}, io.Discard, answerAll) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "Goexit") {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its reader's Goexit")
	}
}

// emptyReader returns nothing and no error, forever, and counts its reads.
type emptyReader struct{ reads int }

func (r *emptyReader) Read([]byte) (int, error) { r.reads++; return 0, nil }

// A reader that returns nothing and no error fails with io.ErrNoProgress, as bufio's
// readers do; Serve spun on it, a core at full use, until ctx was cancelled.
func TestServeEmptyReadsFailWithNoProgress(t *testing.T) {
	r := &emptyReader{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := Serve(ctx, toolsServer(t), r, io.Discard, answerAll)
	if !errors.Is(err, io.ErrNoProgress) || r.reads > 1000 {
		t.Fatalf("%v after %d reads", err, r.reads)
	}
}

// A broken pipe met while feeding input that came with its end (one Read gave both) still
// lets the handler hear the rest and the close: Serve returned at the write error,
// with the end never fed and no ClosedEvent. (With the end in a Read of its own, it did.)
func TestServeHearsTheEndThatCameWithDataAfterABrokenPipe(t *testing.T) {
	in := pipelined(200) // more than one piece
	in.WriteString("not json\n")
	var closed, parseError bool
	h := HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ClosedEvent:
			closed = true
		case *ViolationEvent:
			parseError = parseError || ev.Violation == ViolationParse
		case *RequestEvent:
			_ = c.Respond(ev.ID, json.RawMessage(`{"tools":[]}`))
		}
	})
	err := Serve(context.Background(), toolsServer(t), &failingReader{in.Bytes(), io.EOF}, brokenPipe{}, h)
	if !errors.Is(err, syscall.EPIPE) || !closed || !parseError {
		t.Fatalf("%v: closed %v, the last line's parse error heard %v", err, closed, parseError)
	}
}

// A peer that says its last line without a newline and goes away (our answer to it meets a
// broken pipe) still leaves the handler the close: the answer's write error came once the end
// was fed, and Serve returned it before the close that the last line's events end with, so h
// never saw a ClosedEvent.
func TestServeHearsTheCloseAfterALastLineWithoutItsNewlineAndABrokenPipe(t *testing.T) {
	in := pipelined(0)
	in.WriteString(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var closed, requested bool
	h := HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev := ev.(type) {
		case *ClosedEvent:
			closed = true
		case *RequestEvent:
			requested = true
			_ = c.Respond(ev.ID, json.RawMessage(`{"tools":[]}`))
		}
	})
	w := &breaksAfter{lines: 1}
	err := Serve(context.Background(), toolsServer(t), bytes.NewReader(in.Bytes()), w, h)
	if !errors.Is(err, syscall.EPIPE) || !requested || !closed {
		t.Fatalf("%v: the last request heard %v, closed %v", err, requested, closed)
	}
}

// breaksAfter takes its first lines lines, and fails every later write with a broken pipe (a
// peer that exits once it has read them, however the writes split the output).
type breaksAfter struct{ lines int }

func (b *breaksAfter) Write(p []byte) (int, error) {
	n := 0
	for b.lines > 0 && n < len(p) {
		end := bytes.IndexByte(p[n:], '\n')
		if end < 0 {
			return len(p), nil
		}
		n += end + 1
		b.lines--
	}
	if n == len(p) {
		return n, nil
	}
	_, err := brokenPipe{}.Write(p[n:])
	return n, err
}

// A Write blocked on a peer that never reads (here a net.Pipe end nobody reads) is cut off
// a second after the grace once ctx is cancelled, because w takes write deadlines: Serve
// returns an error that wraps ctx.Err(). It stayed blocked for good, and so did its caller.
// A Serve that ends within the grace leaves w's deadline alone: w still writes afterwards.
func TestServeCancelCutsAWriteBlockedOnAPeerThatDoesNotRead(t *testing.T) {
	const grace = 200 * time.Millisecond
	server := func(t *testing.T) *Conn {
		conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
			Capabilities: json.RawMessage(`{"tools":{}}`), ShutdownGrace: grace}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	t.Run("blocked", func(t *testing.T) {
		t.Parallel()
		in, feed := io.Pipe()
		defer feed.Close()
		out, unread := net.Pipe()
		defer out.Close()
		defer unread.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, server(t), in, out, answerAll) }()
		go io.WriteString(feed, testInitialize)
		time.Sleep(100 * time.Millisecond) // the initialize result waits in Write
		cancel()
		start := time.Now()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Serve returned %v", err)
			}
			if d := time.Since(start); d < grace+time.Second {
				t.Fatalf("cut after %v, before the grace and a second", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve stayed blocked in Write after ctx was cancelled")
		}
	})
	t.Run("ended in time", func(t *testing.T) {
		t.Parallel()
		in, feed := io.Pipe()
		defer feed.Close()
		out, peer := net.Pipe()
		defer out.Close()
		defer peer.Close()
		lines := bufio.NewScanner(peer)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, server(t), in, out, answerAll) }()
		go io.WriteString(feed, testInitialize+testInitialized)
		if !lines.Scan() {
			t.Fatal("no initialize result")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve returned %v", err)
		}
		time.Sleep(grace + 1500*time.Millisecond) // past the cut Serve called off
		go func() { _, _ = out.Write([]byte("still open\n")) }()
		if !lines.Scan() || lines.Text() != "still open" {
			t.Fatalf("w no longer writes after Serve returned: %q %v", lines.Text(), lines.Err())
		}
	})
}

// Config.ShutdownGrace is how long the close that ctx's cancellation begins waits for our
// requests in flight before it cancels them: a negative one cancels at once. (The grace was
// a fixed two seconds: the first grace here is twice that, so that the fixed one ends two
// seconds early, and the negative one must end well before it.)
func TestServeCancelWaitsTheConfiguredShutdownGrace(t *testing.T) {
	for _, c := range []struct{ grace, most time.Duration }{
		{4 * time.Second, 7 * time.Second},
		{-1, 1800 * time.Millisecond},
	} {
		grace := c.grace
		cfg := serverConfig()
		cfg.ShutdownGrace = grace
		lines, cancel, done := servedWithAPingInFlight(t, cfg, nil)
		start := time.Now() // (before the cancel: the grace cannot begin earlier)
		cancel()
		if m := nextLine(t, lines, c.most+5*time.Second); m["method"] != "notifications/cancelled" {
			t.Fatalf("%v: not the ping's cancellation: %v", grace, m)
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%v: Serve returned %v", grace, err)
		}
		took := time.Since(start)
		if took < max(grace, 0) || took > c.most {
			t.Fatalf("the ping was cancelled %v after ctx, with a grace of %v", took, grace)
		}
	}
}

// A tool call in flight when ctx is cancelled gets the grace too: the handler's answer,
// given 300 ms after the cancellation from its own goroutine, is written, and Serve returns
// once it is. With no request of Serve's own out (a server's usual state), the call was
// answered -32603 at once and the handler's Respond got ErrClosed (found by a review of
// Serve).
func TestServeCancelLetsAToolCallInFlightFinish(t *testing.T) {
	conn, err := NewConn(serverConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inR, in := io.Pipe()
	defer in.Close()
	outR, outW := io.Pipe()
	lines := bufio.NewScanner(outR)
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan struct{})
	responded := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, conn, inR, outW, HandlerFunc(func(c *Conn, _ time.Time, ev Event) {
			if req, ok := ev.(*RequestEvent); ok && req.Method == "tools/call" {
				close(called)
				go func() {
					time.Sleep(300 * time.Millisecond)
					responded <- c.Respond(req.ID, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`))
				}()
			}
		}))
		outW.Close()
	}()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}` + "\n"
	go io.WriteString(in, testInitialize+testInitialized+call)
	nextLine(t, lines, 5*time.Second) // the initialize result
	<-called
	start := time.Now()
	cancel()
	m := nextLine(t, lines, 5*time.Second)
	if m["id"] != float64(7) || m["result"] == nil {
		t.Fatalf("not the tool's answer: %v", m)
	}
	if err := <-responded; err != nil {
		t.Fatalf("the handler's Respond: %v", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v", err)
	}
	if took := time.Since(start); took > 1800*time.Millisecond {
		t.Fatalf("Serve returned %v after ctx: it waited out the grace", took)
	}
}

// failingWriter takes its first Write and fails every later one with err.
type failingWriter struct {
	err    error
	writes atomic.Int32
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.writes.Add(1) > 1 {
		return 0, f.err
	}
	return len(p), nil
}

// A write error that is not the peer going away (EIO, a timeout) ends the connection as
// Serve returns it: the handler hears a ClosedEvent, and an answer a tool's goroutine gives
// later fails with ErrClosed. The Conn stayed open: the handler never learned, and its
// answers, taken for delivered, piled up in a Conn that nobody drove (found by a review of
// Serve).
func TestServeAWriteErrorEndsTheConnection(t *testing.T) {
	conn, err := NewConn(serverConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inR, in := io.Pipe()
	defer in.Close()
	called := make(chan *RequestEvent, 1)
	var closed atomic.Bool
	eio := errors.New("input/output error")
	w := &failingWriter{err: eio}
	go func() {
		io.WriteString(in, testInitialize+testInitialized)
		time.Sleep(50 * time.Millisecond) // (the initialize result is written first)
		io.WriteString(in, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}`+"\n")
	}()
	err = Serve(context.Background(), conn, inR, w, HandlerFunc(func(c *Conn, _ time.Time, ev Event) {
		switch ev := ev.(type) {
		case *RequestEvent:
			called <- ev
			if err := c.Respond(ev.ID, json.RawMessage(`{"content":[]}`)); err != nil {
				t.Errorf("the first answer: %v", err)
			}
		case *ClosedEvent:
			closed.Store(true)
		}
	}))
	if !errors.Is(err, eio) {
		t.Fatalf("Serve returned %v", err)
	}
	if !closed.Load() {
		t.Fatal("the handler never heard that the connection ended")
	}
	if s := conn.State(); s != StateClosed {
		t.Fatalf("the Conn is %v after Serve returned", s)
	}
	req := <-called
	if err := conn.Respond(req.ID, json.RawMessage(`{"content":[]}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("an answer after Serve returned: %v", err)
	}
}

// A write cut past the grace (a peer that stopped reading while ctx was cancelled) still
// lets the handler hear the ClosedEvent, exactly once, though it waited behind a full output
// when the close ended (found by a review of Serve's endHere).
func TestServeACutWriteStillHandsOutTheClose(t *testing.T) {
	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"tools":{}}`), ShutdownGrace: 200 * time.Millisecond,
		Limits: Limits{MaxBufferedOutput: 256 << 10}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inR, in := io.Pipe()
	defer in.Close()
	out, peer := net.Pipe() // (takes deadlines, so the stalled write can be cut)
	defer out.Close()
	defer peer.Close()
	big := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 200<<10) + `"}]}`)
	var closes atomic.Int32
	answered := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, conn, inR, out, HandlerFunc(func(c *Conn, _ time.Time, ev Event) {
			switch ev := ev.(type) {
			case *RequestEvent:
				if err := c.Respond(ev.ID, big); err != nil {
					t.Errorf("the answer: %v", err)
				}
				close(answered)
			case *ClosedEvent:
				closes.Add(1)
			}
		}))
	}()
	go io.WriteString(in, testInitialize+testInitialized)
	if _, err := bufio.NewReader(peer).ReadString('\n'); err != nil { // then reads no more
		t.Fatal(err)
	}
	go io.WriteString(in, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big","arguments":{}}}`+"\n")
	<-answered
	time.Sleep(100 * time.Millisecond) // (the answer waits in a Write nobody reads)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if n := closes.Load(); n != 1 {
		t.Fatalf("the handler heard %d ClosedEvents", n)
	}
}

// resetWriter fails every write as a socket whose peer reset the connection does.
type resetWriter struct{}

func (resetWriter) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
}

// A peer that went away (a reset connection, an io.Pipe whose reader closed) gets the same
// treatment as a broken pipe: Serve reads what the peer said last and hands it out, with
// the close, before it returns the write error. Only EPIPE was recognised: Serve returned at
// the first write and the handler never heard why.
func TestServeReadsTheLastWordsOfAPeerThatWentAway(t *testing.T) {
	closedPipe := func() io.Writer {
		r, w := io.Pipe()
		r.Close()
		return w
	}
	for _, c := range []struct {
		name string
		w    io.Writer
		err  error
	}{
		{"reset", resetWriter{}, syscall.ECONNRESET},
		{"io.Pipe", closedPipe(), io.ErrClosedPipe},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := NewConn(clientConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var parse, closed bool
			err = Serve(context.Background(), conn, strings.NewReader("not json\n"), c.w,
				HandlerFunc(func(_ *Conn, _ time.Time, ev Event) {
					switch ev := ev.(type) {
					case *ViolationEvent:
						parse = parse || ev.Violation == ViolationParse
					case *ClosedEvent:
						closed = true
					}
				}))
			if !errors.Is(err, c.err) || !parse || !closed {
				t.Fatalf("%v: the last line's parse error heard %v, closed %v", err, parse, closed)
			}
		})
	}
}

// A handler that closes the Conn on its ClosedEvent (tidying up: it is the last event) does
// not lose what came with the close, and Serve ends as the close says: nil at the end of
// input, ctx.Err() after a cancellation, whose ping's cancellation is still written. Serve
// returned ErrFreed, and the cancellation was freed unwritten.
func TestServeAHandlerThatClosesTheConnOnItsCloseLosesNothing(t *testing.T) {
	closing := HandlerFunc(func(c *Conn, _ time.Time, ev Event) {
		if _, ok := ev.(*ClosedEvent); ok {
			c.Close()
		}
	})
	var out bytes.Buffer
	if err := Serve(context.Background(), toolsServer(t), strings.NewReader(""), &out, closing); err != nil {
		t.Fatalf("at the end of input: %v", err)
	}

	cfg := serverConfig()
	cfg.ShutdownGrace = 100 * time.Millisecond
	lines, cancel, done := servedWithAPingInFlight(t, cfg, closing)
	cancel()
	if m := nextLine(t, lines, 5*time.Second); m["method"] != "notifications/cancelled" {
		t.Fatalf("the ping's cancellation was lost: %v", m)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v", err)
	}
}

// deadlineWriter counts the write deadlines set on it, and takes every write.
// deadlineWriter takes write deadlines. A Write takes perKiB for each KiB it is given (a
// peer that reads slowly); once stalled, it waits until the deadline is set, and fails then.
type deadlineWriter struct {
	cuts    atomic.Int32
	perKiB  time.Duration
	stalled atomic.Bool
	cut     chan struct{}
	once    sync.Once
}

func newDeadlineWriter() *deadlineWriter { return &deadlineWriter{cut: make(chan struct{})} }

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if d.stalled.Load() {
		<-d.cut
		return 0, os.ErrDeadlineExceeded
	}
	time.Sleep(time.Duration(len(b)) * d.perKiB / 1024)
	return len(b), nil
}

func (d *deadlineWriter) SetWriteDeadline(time.Time) error {
	d.cuts.Add(1)
	d.once.Do(func() { close(d.cut) })
	return nil
}

// The cut of a stalled write comes a second after the grace only if nothing was written
// since: a peer that still reads (here a write every 100 ms, for 1.6 s) is not cut, nor is
// an idle Serve (no Write under way: it may wait for answers during its grace), and a Write
// that stalls is cut about a second after it began. A grace of "for ever" never cuts: grace +
// 1 s overflowed to a negative duration, and the cut came at once. (Writes that went on were
// cut at the grace and a second, a peer reading slowly got half a line; an idle Serve was
// cut, and the answers it gave later failed.)
func TestServeCutsOnlyWritesThatStall(t *testing.T) {
	t.Run("reading", func(t *testing.T) {
		t.Parallel()
		d := newDeadlineWriter()
		ctx, cancel := context.WithCancel(context.Background())
		w, stop := cutStalledWrites(ctx, d, 50*time.Millisecond)
		defer stop()
		cancel()
		for range 16 {
			time.Sleep(100 * time.Millisecond)
			_, _ = w.Write([]byte("x"))
		}
		if n := d.cuts.Load(); n != 0 {
			t.Fatalf("cut %d times while the peer read", n)
		}
		time.Sleep(2500 * time.Millisecond)
		if n := d.cuts.Load(); n != 0 {
			t.Fatalf("cut %d times while no Write was under way", n)
		}
		d.stalled.Store(true)
		start := time.Now()
		if _, err := w.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the stalled Write returned %v", err)
		}
		if n, took := d.cuts.Load(), time.Since(start); n != 1 || took > 2500*time.Millisecond {
			t.Fatalf("cut %d times, %v after the Write stalled", n, took)
		}
	})
	t.Run("slow reader", func(t *testing.T) {
		t.Parallel()
		// 64 KiB at 4 KiB each 300 ms: one Write of it took 4.8 s, showed no progress for
		// a second, and was cut.
		d := newDeadlineWriter()
		d.perKiB = 75 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		w, stop := cutStalledWrites(ctx, d, 50*time.Millisecond)
		defer stop()
		cancel()
		if n, err := w.Write(make([]byte, 64<<10)); n != 64<<10 || err != nil {
			t.Fatalf("wrote %d: %v", n, err)
		}
		if n := d.cuts.Load(); n != 0 {
			t.Fatalf("cut %d times while the peer read slowly", n)
		}
	})
	t.Run("for ever", func(t *testing.T) {
		t.Parallel()
		d := &deadlineWriter{}
		ctx, cancel := context.WithCancel(context.Background())
		_, stop := cutStalledWrites(ctx, d, math.MaxInt64)
		defer stop()
		cancel()
		time.Sleep(300 * time.Millisecond)
		if n := d.cuts.Load(); n != 0 {
			t.Fatalf("cut %d times with a grace of for ever", n)
		}
	})
}

// servedWithAPingInFlight serves a server Conn made from cfg over pipes, through the handshake,
// with our ping to the client sent and never answered: the served output's lines, the
// cancel of Serve's ctx, and where Serve's error lands. h sees every event after Serve's own
// use of ReadyEvent.
func servedWithAPingInFlight(t *testing.T, cfg *Config, h Handler) (*bufio.Scanner, context.CancelFunc, chan error) {
	t.Helper()
	conn, err := NewConn(cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ready := make(chan struct{})
	inR, in := io.Pipe()
	t.Cleanup(func() { in.Close() })
	outR, outW := io.Pipe()
	lines := bufio.NewScanner(outR)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, conn, inR, outW, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			if _, ok := ev.(*ReadyEvent); ok {
				close(ready)
			}
			if h != nil {
				h.HandleEvent(c, now, ev)
			}
		}))
		outW.Close()
	}()
	go io.WriteString(in, testInitialize+testInitialized)
	nextLine(t, lines, 5*time.Second) // the initialize result
	<-ready
	if _, err := conn.Request(time.Now(), "ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	if m := nextLine(t, lines, 5*time.Second); m["method"] != "ping" {
		t.Fatalf("not the ping: %v", m)
	}
	return lines, cancel, done
}

// halfDuplexServer serves MCP over (in, out) as many hand-written servers do: it reads a
// line, writes its whole answer, and only then reads the next line. It answers initialize
// and echoes every tools/call's text back. It ends at the end of its input.
func halfDuplexServer(in io.Reader, out io.WriteCloser) {
	defer out.Close()
	lines := bufio.NewReader(in)
	for {
		line, err := lines.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil || req.ID == nil {
			continue
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-11-25",
				"capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo":   map[string]any{"name": "half-duplex", "version": "1"}}
		default:
			result = map[string]any{"content": []any{
				map[string]any{"type": "text", "text": req.Params.Arguments.Text}}}
		}
		answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		if _, err := out.Write(append(answer, '\n')); err != nil {
			return
		}
	}
}

// A client that pipelines calls larger than a pipe to a half-duplex server (one that reads
// its next request only once it has written the last answer whole) gets every answer, at
// the same size. Serve read only while no output waited: the server, blocked writing an
// answer, stopped reading, and Serve, blocked writing the next call, never read that answer:
// both waited for good.
func TestServePipelinedLargeCallsToAHalfDuplexServerAllComplete(t *testing.T) {
	for _, calls := range []int{6, 8, 12} {
		t.Run(strconv.Itoa(calls), func(t *testing.T) { servePipelinedCallsToAHalfDuplexServer(t, calls, 256<<10) })
	}
}

// The same with calls too small to be handed to the writer goroutine (together less than one
// Write's worth): Serve's own Write blocked while the server, having read the first call,
// blocked writing its answer, which nobody read (found by a review; io.Pipe takes no write
// deadline, so not even ctx could end it).
func TestServeSmallPipelinedCallsToAHalfDuplexServerAllComplete(t *testing.T) {
	for _, c := range []struct{ calls, size int }{{3, 3 << 10}, {12, 5 << 10}, {40, 1 << 10}} {
		t.Run(fmt.Sprintf("%dx%d", c.calls, c.size), func(t *testing.T) {
			servePipelinedCallsToAHalfDuplexServer(t, c.calls, c.size)
		})
	}
}

// Many pipelined requests answered large, to a client that reads: every one is answered.
// When a write before the next event stopped for input, Serve fed the next piece with events
// still waiting, a piece per event, so requests in flight grew past the engine's bound and
// the rest were refused.
func TestServeManyPipelinedRequestsAnsweredLargeAreAllAnswered(t *testing.T) {
	conn := toolsServer(t)
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 100<<10) + `"}`)
	refused := 0
	var out bytes.Buffer
	err := Serve(context.Background(), conn, pipelined(300), &out, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if req, ok := ev.(*RequestEvent); ok {
			if c.Respond(req.ID, big) != nil {
				refused++
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(out.Bytes(), []byte("xxx\"}")); refused != 0 || got != 300 {
		t.Fatalf("%d answers refused, %d written", refused, got)
	}
	if bytes.Contains(out.Bytes(), []byte(`"error"`)) {
		t.Fatal("a request was refused by the engine")
	}
}

// Under an output bound below 128 KiB, events held back for room (the output at half the
// bound or more, but under one Write's worth) go out once the loop has written that output
// itself. The loop waited for input instead: request 1, fed already, was never handed out,
// and its peer waited for good. (Found by a review of the writer goroutine's change.)
func TestServeHandsOutHeldEventsAfterWritingOnItsOwnGoroutine(t *testing.T) {
	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"tools":{}}`), Limits: Limits{MaxBufferedOutput: 64 << 10}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	handle := func() {
		for ev, ok := conn.NextEvent(); ok; ev, ok = conn.NextEvent() {
			answerAll(conn, time.Now(), ev)
		}
	}
	if err := conn.Feed(time.Now(), []byte(testInitialize+testInitialized)); err != nil {
		t.Fatal(err)
	}
	handle()
	if _, err := conn.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	// A 40 KiB answer waits unwritten (over half the bound), and request 1 waits behind it.
	if err := conn.Feed(time.Now(), []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	ev, _ := conn.NextEvent()
	big := json.RawMessage(`{"tools":[],"x":"` + strings.Repeat("x", 40<<10) + `"}`)
	if err := conn.Respond(ev.(*RequestEvent).ID, big); err != nil {
		t.Fatal(err)
	}
	if err := conn.Feed(time.Now(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	inR, in := io.Pipe() // the peer sends nothing more: it waits for its answer
	defer in.Close()
	outR, outW := io.Pipe()
	go func() { _ = Serve(context.Background(), conn, inR, outW, answerAll) }()
	answered := make(chan bool, 1)
	go func() {
		lines := bufio.NewScanner(outR)
		lines.Buffer(make([]byte, 1<<20), 1<<20)
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"id":1,`) {
				answered <- true
				return
			}
		}
	}()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("request 1 was never handed out")
	}
}

// servePipelinedCallsToAHalfDuplexServer makes calls pipelined calls of size bytes each to a
// half-duplex server answering at the same size. With 8 or more, more than the high-water
// mark (1 MiB) was still unwritten when the first answer was handed out, and the write that
// handOut makes before the next event neither read ahead nor stopped for input: the two
// blocked each other.
func servePipelinedCallsToAHalfDuplexServer(t *testing.T, calls, size int) {
	toServer, serverIn := io.Pipe()
	serverOut, fromServer := io.Pipe()
	go halfDuplexServer(toServer, fromServer)
	conn, err := NewConn(clientConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	text := strings.Repeat("x", size)
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"text": text}})
	var answered atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, conn, serverOut, serverIn, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch ev := ev.(type) {
			case *ReadyEvent:
				for range calls {
					if _, err := c.Request(now, "tools/call", params, nil); err != nil {
						t.Errorf("request: %v", err)
					}
				}
			case *ResponseEvent:
				if len(ev.Result) < len(text) {
					t.Errorf("an answer of %d bytes", len(ev.Result))
				}
				if answered.Add(1) == int32(calls) {
					serverIn.Close() // the server's input ends, and so does it
				}
			}
		}))
	}()
	select {
	case err := <-done:
		if answered.Load() != int32(calls) {
			t.Fatalf("%d of %d calls answered (Serve: %v)", answered.Load(), calls, err)
		}
	case <-time.After(25 * time.Second):
		t.Fatalf("Serve hung after %d of %d answers", answered.Load(), calls)
	}
}

// pingFlood is a peer that writes pipelined pings as fast as Serve reads them, and reads
// their answers slowly (each Write of Serve's sleeps 3 ms, past the write-stall watch): it
// notes how far its reads ran ahead of the answers it took, in bytes of requests.
type pingFlood struct {
	mu       sync.Mutex
	sent     int // requests handed to Serve
	answered int // answers written by Serve
	ahead    int // the most requests sent and not yet answered
	limit    int // requests to send in all
	next     []byte
}

const floodPing = `{"jsonrpc":"2.0","id":"p","method":"ping"}` + "\n"

func (f *pingFlood) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent >= f.limit && len(f.next) == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		if len(f.next) == 0 {
			if f.sent >= f.limit {
				break
			}
			f.next = []byte(floodPing)
			f.sent++
		}
		c := copy(p[n:], f.next)
		f.next = f.next[c:]
		n += c
	}
	f.ahead = max(f.ahead, f.sent-f.answered)
	return n, nil
}

func (f *pingFlood) Write(p []byte) (int, error) {
	time.Sleep(3 * time.Millisecond)
	f.mu.Lock()
	f.answered += bytes.Count(p, []byte("\n"))
	f.mu.Unlock()
	return len(p), nil
}

// A peer that floods requests and reads our answers slowly is held to Serve's read-ahead:
// the reader read a whole chunk for every write that stalled, whatever it held already, so
// what waited grew sixteenfold a round (64 KiB, 1 MiB, 16 MiB, ...) at the pace the peer
// wrote.
func TestServeReadAheadStaysBoundedAgainstAFloodReadSlowly(t *testing.T) {
	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"tools":{}}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	init := pipelined(0)
	flood := &pingFlood{limit: 1_000_000}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	_ = Serve(ctx, conn, io.MultiReader(init, flood), flood, answerAll)
	flood.mu.Lock()
	defer flood.mu.Unlock()
	// 1 MiB queued, as much taken and being fed, and a chunk: about 50,000 pings; and the
	// answers not written yet. Three times that is room enough; the reads ran away without
	// bound (all 200,000 of a smaller flood within the time).
	const bound = 3 * (2<<20 + 64<<10) / len(floodPing)
	if flood.ahead > bound {
		t.Errorf("%d requests read ahead of their answers (bound %d)", flood.ahead, bound)
	}
	t.Logf("%d requests read ahead at most, %d answered", flood.ahead, flood.answered)
	if flood.answered < 1000 {
		t.Errorf("only %d answers", flood.answered)
	}
}

// A token the stall watch gives is reported by exactly one end, however its timer's callback
// and end interleave: one given after end looked and reported by a later end made Serve
// count a token the reader had already used, and ask for no more input.
func TestStallWatchReportsEachTokenOnce(t *testing.T) {
	var given atomic.Int64
	w := newStallWatch(func() { given.Add(1) })
	defer w.timer.Stop()
	stop := make(chan struct{})
	var firing sync.WaitGroup
	for range 2 {
		firing.Add(1)
		go func() { // late and early callbacks, as a timer racing with end gives them
			defer firing.Done()
			for {
				select {
				case <-stop:
					return
				default:
					w.fire()
				}
			}
		}()
	}
	reported := int64(0)
	for range 20000 {
		w.start()
		runtime.Gosched()
		if w.end() {
			reported++
		}
	}
	close(stop)
	firing.Wait()
	if w.end() {
		reported++
	}
	if given.Load() != reported || reported == 0 {
		t.Fatalf("%d tokens given, %d reported", given.Load(), reported)
	}
}

// What the stall watch adds to each Write of Serve's loop (one per turn that has output:
// one per answer when a peer keeps one request in flight): a lock, a timer armed and stopped.
func BenchmarkStallWatch(b *testing.B) {
	w := newStallWatch(func() {})
	defer w.timer.Stop()
	for b.Loop() {
		w.start()
		w.end()
	}
}
