package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handler handles the events of a connection driven by Serve. HandleEvent runs on Serve's
// goroutine and may call any command on c. It must not block for long: start a goroutine
// for slow work, and answer on c from it (Serve wakes and writes the answer). now is the time Serve read when it began handing
// out the current round of events (one clock read per round, not per event).
type Handler interface {
	HandleEvent(c *Conn, now time.Time, ev Event)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *Conn, now time.Time, ev Event)

// HandleEvent calls f.
func (f HandlerFunc) HandleEvent(c *Conn, now time.Time, ev Event) { f(c, now, ev) }

// Serve drives conn over a byte stream (stdio, a pipe, a socket) until the connection
// closes: r ends (every answer already given is written before Serve returns), the peer's
// side closes it, or ctx is cancelled (a graceful Shutdown with Config.ShutdownGrace, then
// ctx.Err()). h sees every event. It returns nil after a normal end, or the first read,
// write or engine error. On a connection that closed before (its ClosedEvent handed out),
// it returns ErrClosed at once. When w's peer stops reading (a broken pipe: the process at
// the other end exited; also a reset connection, or an io.Pipe whose reader closed), Serve
// writes nothing more but reads r to its end first, so that h sees what the peer said last
// and why the connection closed; then it returns the write error. (With w = os.Stdout, that
// needs SIGPIPE ignored, signal.Ignore(syscall.SIGPIPE), as examples/stdio_server does: by
// default Go ends a program that writes to a broken stdout.)
//
// Answers never find the output full for want of writing: once the output passes a
// high-water mark (1 MiB, or half of Limits.MaxBufferedOutput if smaller), it is written
// before the next event is handed out. (That write may stop early for input waiting to be
// fed, as below, but only with less than half of Limits.MaxBufferedOutput left unwritten:
// an answer of up to half the bound always finds room.)
//
// Backpressure: input is read as Serve comes for it, and w's Write blocks Serve, so a peer
// that reads slowly slows its own requests down instead of growing memory. During a write of
// more than 64 KiB (the one at the high-water mark too), Serve reads ahead (up to 1 MiB held
// outside the engine), and between two Writes it feeds what it read, and the rest of its
// last read, before the write goes on, while the output holds less than half of
// Limits.MaxBufferedOutput: a peer that reads only between its own writes (a hand-written
// read-a-line, write-the-answer server, mcpwire's blocking loop, another Serve) may be blocked
// writing its answers to us while we write our requests to it, and the two would wait for
// each other for good. One Write that blocks cannot be interrupted, though: a peer that
// writes more than the read-ahead to us while one of our Writes waits, or a smaller write
// that blocks (only once the peer has left a pipe's worth of our output unread), still holds
// Serve without reading.
// A peer that never reads holds Serve in its Write: commands from other goroutines get ErrOutputFull
// once the engine's output limit is reached, and the engine's timers wait too (a request's
// timeout is handed out once the Write returns). When ctx is cancelled meanwhile, Serve ends
// a Write that has made no progress for a second, past the grace, if w takes write
// deadlines (a net.Conn, an os.Pipe end): it fails (w's write deadline is left in the past)
// and Serve returns an error that wraps ctx.Err(). A peer that still reads is not cut: after
// the cancel, Writes go out 4 KiB at a time, so that one that reads slowly shows it (a Write
// begun before the cancel is watched whole: its peer must take its 64 KiB within the grace
// and a second). Other
// writers cannot be interrupted (os.Stdout is usually one: a program that must end on a
// signal bounds its own wait, as examples/stdio_server does). A command given on another
// goroutine (an answer, a progress report, a request of ours) is written as soon as it is
// given, and a request's timeout is armed for it. A deadline that comes with input already
// read waits for that input to be fed: an answer that arrived while Serve was busy is taken,
// not timed out (input still unread, in the kernel, is not looked for).
//
// One Serve at a time drives a Conn: another returns an error at once. When Serve returns,
// a read of r may be outstanding, and reads taken ahead may not be fed yet: the goroutine
// ends when that Read does, and what was read is dropped, so after an error do not Serve the
// same r again. A reader that returns
// nothing and no error 100 times in a row fails with io.ErrNoProgress.
//
// A panic in h, or in r's Read, goes on to Serve's caller, as any panic does, but the answers
// h gave before it (to this request and to earlier ones) are written to w first, so the peer
// is not left without answers the server already gave.
func Serve(ctx context.Context, conn *Conn, r io.Reader, w io.Writer, h Handler) error {
	if conn == nil {
		return ErrFreed
	}
	if h == nil {
		return errNilHandler
	}
	// Commands given on other goroutines (a tool answering later, a progress report) wake
	// the wait below.
	wake, alone := conn.serveWake()
	if !alone {
		return errServing
	}
	defer conn.serveDone()
	w, stopCut := cutStalledWrites(ctx, w, conn.grace)
	defer stopCut()
	if conn.State() == StateClosed {
		// Nothing more will happen: hand out what is left (the ClosedEvent, if it was not
		// handed out yet) and write what is waiting.
		handed, _, _ := handOut(conn, w, h, nil)
		if _, err := conn.WriteTo(w); err != nil && !errors.Is(err, ErrFreed) {
			return err
		}
		if handed {
			return nil
		}
		if conn.isFreed() {
			return ErrFreed
		}
		return ErrClosed
	}
	type chunk struct {
		data     []byte
		err      error
		panicked any // a panic in r.Read, passed on to Serve's caller
	}
	// The reader reads once per token in want, which the loop gives before it waits for
	// input; and before a write that may block (more than one Write's worth), during which it
	// goes on reading (writing), up to readAhead chunks: a peer that reads only between its
	// own writes (a half-duplex server) may be blocked writing to us while we write to it,
	// waiting for us to read. Otherwise input is read only as the loop comes for it, in
	// batches.
	reads := make(chan chunk, readAhead-1)
	want := make(chan struct{}, 1)
	var writing atomic.Bool
	asked := false // a token was given, and no chunk taken since
	ask := func() {
		if !asked {
			asked = true
			select {
			case want <- struct{}{}:
			default: // (the last token is still there: a chunk read ahead came first)
			}
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		buf := make([]byte, 64*1024)
		// read reads once, past empty reads: a reader that returns nothing and no error
		// 100 times in a row fails with io.ErrNoProgress, as bufio's do, rather than have
		// Serve spin on it. A panic in Read is caught for Serve's goroutine.
		read := func() (c chunk) {
			defer func() {
				if v := recover(); v != nil {
					c = chunk{panicked: v}
				}
			}()
			for range 100 {
				n, err := r.Read(buf)
				if n > 0 || err != nil {
					return chunk{data: append([]byte(nil), buf[:n]...), err: err}
				}
			}
			return chunk{err: io.ErrNoProgress}
		}
		for {
			select {
			case <-want:
			case <-stop:
				return
			}
			for {
				c := read()
				select {
				case reads <- c:
				case <-stop:
					return
				}
				if c.err != nil || c.panicked != nil {
					return
				}
				if !writing.Load() {
					break
				}
			}
		}
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	piece := conn.InputPiece()
	var pending []byte // read but not yet fed
	var readErr error  // how the input ended (io.EOF, or a read error), once it has
	// The peer stopped reading (a broken pipe): its last words, still in r, say why (an
	// error, a message it could not parse, its exit), so they are read to the end and
	// handed out, with nothing more written; the write error is returned then.
	var broken error
	inputOpen, shutdown, eofFed := true, false, false
	// The deadline came with input already read: the input is fed first, then the timers
	// fire (an answer already here is not timed out because the loop came late to it).
	timersAfterFeed := false
	done := ctx.Done()
	// took takes a read chunk in.
	took := func(c chunk) {
		asked = false
		if c.panicked != nil {
			// The reader's panic goes on to Serve's caller, as a panic in h does, after
			// what is already answered is written.
			_, _ = conn.WriteTo(w)
			panic(c.panicked)
		}
		// Data that came with the end (io.Reader allows both at once) is fed like any
		// other read, a piece at a time with the answers handed out in between; the end is
		// fed after it (below).
		pending = c.data
		if c.err != nil {
			inputOpen = false
			readErr = c.err
		}
	}
	// A write stops between two Writes for input that arrived meanwhile (stoppedForInput),
	// while the output has room for its answers; it goes on once that input is fed
	// (feeding until then).
	// A write of more than one Write's worth (bigWrite) also stops for the rest of the last
	// read: the peer may be blocked writing what is yet to be fed.
	stoppedForInput, feeding, bigWrite := false, false, false
	roomForAnswers := func() bool { return int64(conn.PendingOutput()) < conn.readAheadBelow }
	inputWaits := func() bool {
		arrived := inputOpen && len(pending) == 0 && len(reads) > 0
		if (arrived || (feeding || bigWrite) && len(pending) > 0) && roomForAnswers() {
			stoppedForInput, feeding = true, true
		}
		return stoppedForInput
	}
	// write writes the output, stopping between Writes for input (inputWaits); during a
	// write that may block (more than one Write's worth), the reader reads ahead. It
	// reports whether it stopped for input.
	write := func() (bool, error) {
		// (The estimate says maybe; the engine says how much there is.)
		mayBlock := inputOpen && conn.given.Load() >= writeChunk &&
			conn.PendingOutput() >= writeChunk
		if mayBlock {
			ask()
			writing.Store(true)
		}
		bigWrite = mayBlock
		_, err := conn.writeOut(w, inputWaits)
		bigWrite = false
		if mayBlock {
			writing.Store(false)
		}
		if err == nil && !stoppedForInput {
			feeding = false // all written
		}
		return stoppedForInput, err
	}
	for {
		// 1. Events (the handler may issue commands), 2. all output. A command given on
		// another goroutine after mark, which they may have missed, is looked at before
		// waiting (4).
		mark := conn.changeMark()
		stoppedForInput = false
		var ahead func() (bool, error)
		if broken == nil {
			ahead = write
		}
		closed, cut, werr := handOut(conn, w, h, ahead)
		if err := conn.Err(); err != nil && !(closed && errors.Is(err, ErrFreed)) {
			return err
		}
		if broken == nil {
			switch {
			case werr != nil:
			case closed:
				_, werr = conn.WriteTo(w) // everything, before Serve returns
			case stoppedForInput, feeding && len(pending) > 0 && roomForAnswers():
				// The input that stopped the write goes in first.
			default:
				_, werr = write()
			}
			if closed && errors.Is(werr, ErrFreed) {
				werr = nil // the handler closed the Conn on its ClosedEvent: all was written
			}
			if werr != nil {
				if ctx.Err() != nil && errors.Is(werr, os.ErrDeadlineExceeded) {
					// Cut off by cutStalledWrites: the peer did not read within the grace.
					return fmt.Errorf("%w (the peer stopped reading: %w)", ctx.Err(), werr)
				}
				if !peerGone(werr) {
					return werr
				}
				// (Even once everything read is fed, EOF included, the close may be still
				// to come: a last line without its newline closes once its events are out.)
				broken = werr
			}
		}
		if closed {
			switch {
			case broken != nil:
				return broken
			case shutdown:
				return ctx.Err()
			case readErr != nil && readErr != io.EOF:
				return readErr
			}
			return nil
		}
		// Input that stopped the write (see inputWaits) is taken in, and fed before the
		// write goes on.
		if stoppedForInput && len(pending) == 0 {
			select {
			case c := <-reads:
				took(c)
			default:
			}
		}
		// The events handOut left go first: input goes in only once every event is handed
		// out (as Conn.InputPiece asks: else requests in flight would grow a piece per event),
		// and the end of input too (it closes the connection: they could not be answered).
		if cut {
			continue
		}
		// 3. The rest of the last read, a piece at a time, before reading more.
		if len(pending) > 0 {
			n := min(len(pending), piece)
			if err := conn.Feed(time.Now(), pending[:n]); err != nil {
				return err
			}
			pending = pending[n:]
			continue
		}
		// The input ended, and everything read before its end is in and handed out: now
		// the end itself (a last line without a newline is processed then, and answered).
		if readErr != nil && !eofFed {
			eofFed = true
			if err := conn.FeedEOF(time.Now()); err != nil {
				return err
			}
			continue
		}
		if timersAfterFeed {
			timersAfterFeed = false
			if err := conn.HandleTimeout(time.Now()); err != nil {
				return err
			}
			continue
		}

		// 4. Wait for input, the engine's deadline, a command from another goroutine, or
		// cancellation. A command given since the output was written is looked at first.
		if !conn.beginWait(mark) {
			continue
		}
		var timeout <-chan time.Time
		timer.Stop()
		if deadline, ok := conn.NextDeadline(); ok {
			timer.Reset(time.Until(deadline))
			timeout = timer.C
		}
		var input chan chunk
		if inputOpen {
			if len(reads) == 0 {
				ask()
			}
			input = reads
		}
		select {
		case c := <-input:
			took(c)
		case <-wake:
		case <-timeout:
			select {
			case c := <-input:
				// (Input that is here already goes in first: see timersAfterFeed. Each time
				// the deadline comes, so input that keeps coming cannot hold it off.)
				took(c)
				timersAfterFeed = true
			default:
				if err := conn.HandleTimeout(time.Now()); err != nil {
					return err
				}
			}
		case <-done:
			done = nil
			shutdown = true
			if err := conn.Shutdown(time.Now(), conn.grace); err != nil {
				return err
			}
		}
	}
}

// readAhead is how many reads of up to 64 KiB Serve's reader may hold ahead of the loop
// during a write (see Serve): the input held outside the engine (1 MiB).
const readAhead = 16

// peerGone reports whether a write error means that the peer stopped reading (it exited, or
// closed its end): a broken pipe, a connection reset, or an io.Pipe whose reader closed.
func peerGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrClosedPipe)
}

// cutStalledWrites makes a Write to w that makes no progress a second after Serve's grace
// (ctx cancelled, the peer not reading) fail, when w can take a write deadline (a net.Conn,
// an os.File on a pollable pipe or socket): otherwise ctx could not end Serve. A peer that
// still reads is not cut: while bytes go out, the check comes again a second later. Serve
// writes through the writer it returns, which counts them. The function it returns, called
// as Serve returns, calls that off; w's deadline is never touched once Serve has returned.
func cutStalledWrites(ctx context.Context, w io.Writer, grace time.Duration) (io.Writer, func()) {
	dw, ok := w.(interface{ SetWriteDeadline(time.Time) error })
	if !ok {
		return w, func() {}
	}
	counted := &countingWriter{w: w, ctx: ctx}
	var mu sync.Mutex
	returned := false
	var cut *time.Timer
	var check func(after time.Duration) // (with mu held)
	check = func(after time.Duration) {
		seen, began := counted.n.Load(), counted.began.Load()
		cut = time.AfterFunc(after, func() {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case returned:
			case counted.n.Load() != seen, counted.began.Load() != began, !counted.inWrite.Load():
				// The peer reads, or no Write waits (Serve waits for answers, or for its
				// grace): no cut yet. A Write that begins later is watched for a second.
				check(time.Second)
			default:
				_ = dw.SetWriteDeadline(time.Unix(1, 0)) // (in the past: blocked Writes fail now)
			}
		})
	}
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !returned {
			check(min(grace, math.MaxInt64-time.Second) + time.Second) // (a grace of "for ever" stays one)
		}
	})
	return counted, func() {
		stopWatch()
		mu.Lock()
		defer mu.Unlock()
		returned = true
		if cut != nil {
			cut.Stop()
		}
	}
}

// countingWriter counts the bytes written through it and the Writes begun, and tells whether
// one is under way, for cutStalledWrites. Once ctx is cancelled, it writes at most
// slicedWrite bytes per Write of w, so that a peer that reads slowly shows that it reads.
type countingWriter struct {
	w       io.Writer
	ctx     context.Context
	n       atomic.Int64
	began   atomic.Int64
	inWrite atomic.Bool
}

// slicedWrite is the most a countingWriter hands w at once after Serve's ctx is cancelled:
// a peer that reads at least this much a second is not cut off.
const slicedWrite = 4 << 10

func (c *countingWriter) Write(b []byte) (int, error) {
	c.inWrite.Store(true)
	defer c.inWrite.Store(false)
	written := 0
	sliced := c.ctx.Err() != nil
	for {
		c.began.Add(1)
		piece := b[written:]
		if sliced && len(piece) > slicedWrite {
			piece = piece[:slicedWrite]
		}
		n, err := c.w.Write(piece)
		n = max(min(n, len(piece)), 0)
		c.n.Add(int64(n))
		written += n
		if err != nil || written == len(b) {
			return written, err
		}
		if n < len(piece) {
			return written, io.ErrShortWrite
		}
	}
}

// handOut hands every event conn holds to h, all with the time of the first; it reports
// whether the ClosedEvent was among them. With write (Serve's), output past the Conn's
// high-water mark is written before the next event, so that the answers an event gets always
// find room (a large answer among pipelined requests would otherwise leave the next ones
// ErrOutputFull with the peer reading all along); a write error stops that and is returned.
// When that write stops for input (with less than half the bound left), handOut stops after
// the event at hand (cut): Serve takes that input in, and hands out the rest before it feeds
// any of it.
func handOut(conn *Conn, w io.Writer, h Handler, write func() (bool, error)) (closed, cut bool, werr error) {
	writeAhead := write != nil
	var now time.Time
	for ev, ok := conn.NextEvent(); ok; ev, ok = conn.NextEvent() {
		if _, isClosed := ev.(*ClosedEvent); isClosed {
			closed = true
			// What came with the close (the cancellations its grace ended with) is written
			// before the handler hears of it: the handler may Close the Conn, the last event
			// handed out, and what was still unwritten would go with it.
			if writeAhead && werr == nil {
				_, werr = conn.WriteTo(w)
			}
		}
		if now.IsZero() {
			now = time.Now()
		}
		stopped := false
		if writeAhead && werr == nil && conn.given.Load() >= conn.highWater {
			// The estimate says maybe; the engine says how much there is.
			if pending := int64(conn.PendingOutput()); pending >= conn.highWater {
				stopped, werr = write()
			} else {
				conn.given.Store(pending)
			}
		}
		handleServed(conn, w, h, ev, now)
		if stopped && werr == nil && !closed {
			return false, true, nil
		}
	}
	return closed, false, werr
}

// handleServed hands ev to h. When h panics (or calls runtime.Goexit), the output the
// connection already holds is written to w on the way out; the panic itself goes on.
func handleServed(conn *Conn, w io.Writer, h Handler, ev Event, now time.Time) {
	returned := false
	defer func() {
		if !returned {
			_, _ = conn.WriteTo(w) // best effort: the panic, not a write error, is the news
		}
	}()
	h.HandleEvent(conn, now, ev)
	returned = true
}
