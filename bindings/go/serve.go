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
// for slow work, and answer on c from it (Serve wakes and writes the answer, as long as the
// connection is open: once the input ends it closes, and an answer given later fails with
// ErrClosed; a handler that must answer every request of a piped file answers before
// HandleEvent returns). now is the time Serve read when it began handing out the current
// round of events (one clock read per round, not per event).
type Handler interface {
	HandleEvent(c *Conn, now time.Time, ev Event)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *Conn, now time.Time, ev Event)

// HandleEvent calls f.
func (f HandlerFunc) HandleEvent(c *Conn, now time.Time, ev Event) { f(c, now, ev) }

// Serve drives conn over a byte stream (stdio, a pipe, a socket) until the connection
// closes: r ends (every answer already given is written before Serve returns; the peer's
// requests still unanswered then get none, as the end of a client's input is its shutdown),
// the peer's side closes it, or ctx is cancelled (a graceful Shutdown with
// Config.ShutdownGrace, in which the requests in flight either way may still be answered,
// then ctx.Err()). h sees every event. It returns nil after a normal end, or the first read,
// write or engine error; after a write error conn is closed (h hears its ClosedEvent, and
// later answers fail with ErrClosed). On a connection that closed before (its ClosedEvent
// handed out), it returns ErrClosed at once. When w's peer stops reading (a broken pipe: the
// process at the other end exited; also a reset connection, or an io.Pipe whose reader
// closed), Serve writes nothing more but reads r to its end first, so that h sees what the
// peer said last and why the connection closed; then it returns the write error. (With w =
// os.Stdout, that needs SIGPIPE ignored, signal.Ignore(syscall.SIGPIPE), as
// examples/stdio_server does: by default Go ends a program that writes to a broken stdout.)
//
// Answers never find the output full for want of writing: the next event is handed out, and
// more input fed, only while the output holds less than half of Limits.MaxBufferedOutput, so
// an answer of up to half the bound always finds room.
//
// Writes: output of less than 64 KiB is written on Serve's goroutine, more on a goroutine of
// its own, while Serve goes on: it reads ahead (up to 1 MiB waiting, besides the read being
// fed: about 2 MiB held outside the engine at most), feeds
// input and hands out events while the output has room, fires timers, and takes commands
// from other goroutines. A peer that reads only between its own writes (a hand-written
// read-a-line, write-the-answer server, mcpwire's blocking loop, another Serve) may be
// blocked writing its answers to us while we write our requests to it: we read them, and
// the two do not wait for each other. A smaller Write that blocks (once the peer has left a
// pipe's worth of our output unread) holds Serve's loop, which neither feeds input nor fires
// timers until that Write returns; once it has taken 2 ms, the reader reads ahead meanwhile
// too, so such a peer gets to write its answers and read on, unless it writes more than that
// 1 MiB at once.
//
// Backpressure: input is read as Serve comes for it (and ahead during a large write, as
// above), so a peer that reads slowly slows its own requests down instead of growing memory.
// A peer that never reads leaves the output full: commands from other goroutines get
// ErrOutputFull once the engine's output limit is reached. When ctx is cancelled meanwhile,
// Serve ends a Write that has made no progress for a second, past the grace, if w takes
// write deadlines (a net.Conn, an os.Pipe end): it fails (w's write deadline is left in the
// past) and Serve returns an error that wraps ctx.Err(). A peer that still reads is not
// cut: after the cancel, Writes go out 4 KiB at a time, so that one that reads slowly shows
// it (a Write begun before the cancel is watched whole: its peer must take its 64 KiB within
// the grace and a second). Other writers cannot be interrupted, and Serve never returns with
// a Write of its own under way (os.Stdout is usually one: a program that must end on a
// signal bounds its own wait, as examples/stdio_server does). A command given on another
// goroutine (an answer, a progress report, a request of ours) is written as soon as it is
// given, and a request's timeout is armed for it. A deadline that comes with input already
// read waits for that input to be fed: an answer that arrived while Serve was busy is taken,
// not timed out. Input still in the kernel (the reader idled while Serve was busy) gets up
// to 5 ms to be read before such a deadline fires.
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
		flush := func() error { _, err := conn.writeTo(w); return err }
		handed, _, _ := handOut(conn, h, nil, flush)
		if err := flush(); err != nil && !errors.Is(err, ErrFreed) {
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
	stop := make(chan struct{})
	defer close(stop)

	// The reader reads once per token in want, which the loop gives before it waits for
	// input: input is read as the loop comes for it, in batches. During a write (bigWrite:
	// one on the writer goroutine, or one under way on Serve's), it goes on reading, up to
	// readAhead bytes: a peer that reads only between its own writes (a half-duplex server)
	// may be blocked writing to us while we write to it, waiting for us to read.
	type chunk struct {
		data     []byte
		err      error
		panicked any // a panic in r.Read, passed on to Serve's caller
	}
	// What the reader read and the loop has not taken yet, in one piece (a peer may write many
	// small messages while the loop is busy, and an io.Pipe hands each over as written), and
	// how it ended; ready holds a signal once something waits there.
	var inMu sync.Mutex
	var queued chunk
	ready := make(chan struct{}, 1)
	take := func() chunk {
		inMu.Lock()
		c := queued
		queued = chunk{}
		inMu.Unlock()
		return c
	}
	waiting := func() bool {
		inMu.Lock()
		defer inMu.Unlock()
		return len(queued.data) > 0 || queued.err != nil || queued.panicked != nil
	}
	want := make(chan struct{}, 1)
	var bigWrite atomic.Bool
	asked := false // a token was given, and nothing taken since
	ask := func() {
		if !asked {
			asked = true
			select {
			case want <- struct{}{}:
			default: // (the last token is still there: input read ahead came first)
			}
		}
	}
	go func() {
		buf := make([]byte, 64*1024)
		// put adds a read to what waits for the loop, and says how much waits.
		put := func(c chunk) int {
			inMu.Lock()
			queued.data = append(queued.data, c.data...)
			queued.err, queued.panicked = c.err, c.panicked
			held := len(queued.data)
			inMu.Unlock()
			select {
			case ready <- struct{}{}:
			default: // (a signal waits already)
			}
			return held
		}
		// readOnce reads once, past empty reads: a reader that returns nothing and no error
		// 100 times in a row fails with io.ErrNoProgress, as bufio's do, rather than have
		// Serve spin on it. The data is buf's until the next read.
		readOnce := func() chunk {
			for range 100 {
				n, err := r.Read(buf)
				if n < 0 || n > len(buf) {
					return chunk{err: fmt.Errorf("mcpwire: Read returned %d for a %d-byte buffer", n, len(buf))}
				}
				if n > 0 || err != nil {
					return chunk{data: buf[:n], err: err}
				}
			}
			return chunk{err: io.ErrNoProgress}
		}
		// read is readOnce, with a panic in Read caught for Serve's goroutine, and a Read
		// that ends this goroutine (runtime.Goexit, as t.FailNow does) reported as an error
		// first: Serve would wait for its chunk for ever.
		read := func() (c chunk) {
			returned := false
			defer func() {
				if v := recover(); v != nil {
					c = chunk{panicked: v}
				} else if !returned {
					put(chunk{err: errReaderGoexit})
				}
			}()
			c = readOnce()
			returned = true
			return c
		}
		for {
			select {
			case <-want:
			case <-stop:
				return
			}
			for {
				// Within readAhead before every read, the first after a token too: a token
				// comes with every write that stalls, and a read each time, whatever waited
				// already, let a peer that floods us and reads slowly grow what waits
				// sixteenfold a round (64 KiB read for each 4 KiB piece fed).
				inMu.Lock()
				full := len(queued.data) >= readAhead
				inMu.Unlock()
				if full {
					break
				}
				// A token left from a Read under way may still wait when Serve returns: no
				// Read begins after that (its bytes would be lost to whoever reads r next).
				select {
				case <-stop:
					return
				default:
				}
				c := read()
				held := put(c)
				if c.err != nil || c.panicked != nil {
					return
				}
				if !bigWrite.Load() || held >= readAhead {
					break
				}
			}
		}
	}()

	// The writer writes the output while the loop goes on: feeding input, handing out
	// events, firing timers. One WriteTo at a time, begun by a token in kick; it reports on
	// wrote when it has emptied the output, or failed. Serve never returns with a Write of
	// its own under way (see the defer).
	kick := make(chan struct{}, 1)
	wrote := make(chan error, 1)
	writing := false
	go func() {
		for {
			select {
			case <-kick:
			case <-stop:
				return
			}
			// A panic in w.Write goes on to Serve's caller, as one in r.Read does, and a
			// Write that ends its goroutine (runtime.Goexit) still reports, so Serve never
			// waits for it for ever.
			reported := false
			func() {
				defer func() {
					if !reported {
						wrote <- &writerPanic{value: recover()}
					}
				}()
				_, err := conn.writeTo(w)
				bigWrite.Store(false)
				reported = true
				wrote <- err // (never blocks: one token, one report)
			}()
		}
	}()
	var werr error // the writer's error, once it has one: nothing more is written then
	// fromWriter takes the writer's report: a panic in its Write goes on here.
	fromWriter := func(err error) error {
		if p, ok := err.(*writerPanic); ok && p.value != nil {
			panic(p.value)
		}
		return err
	}
	// settle waits for the Write under way to end.
	settle := func() {
		if writing {
			writing = false
			if err := fromWriter(<-wrote); werr == nil {
				werr = err
			}
		}
	}
	defer settle()
	// flush writes everything on Serve's goroutine, after the writer's last Write: before
	// the handler hears of the close, and when a panic leaves.
	flush := func() error {
		settle()
		if werr == nil {
			_, werr = conn.writeTo(w)
		}
		return werr
	}

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
			_ = flush()
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
	// room says whether the output has room for what the next event or piece of input may
	// add: it holds less than half the engine's bound (so an answer of up to half the bound
	// fits). Once the peer stopped reading, nothing waits for the output.
	room := func() bool {
		if broken != nil || conn.given.Load() < conn.roomBelow {
			return true
		}
		// The estimate says maybe; the engine says how much there is.
		return conn.measureGiven() < conn.roomBelow
	}
	// readDuringWrite has the reader read ahead during a write on the writer goroutine.
	// askedDuringWrite: the reader was given a token during a write since the loop last
	// waited, so input may be on its way as for a token given just before the wait
	// (lateInput).
	askedDuringWrite := false
	readDuringWrite := func() {
		if inputOpen {
			bigWrite.Store(true)
			asked, askedDuringWrite = true, true
			select {
			case want <- struct{}{}:
			default:
			}
		}
	}
	// A Write on Serve's own goroutine that has not returned within writeStall has the
	// reader read ahead too: its peer may be blocked writing to us in turn (a half-duplex
	// peer, above), and both would wait for good. (Not before every Write: a reader that
	// blocks in Read while the loop still works costs a busy stdio server most of its
	// throughput with one thread.)
	watch := newStallWatch(func() {
		bigWrite.Store(true)
		select {
		case want <- struct{}{}:
		default:
		}
	})
	defer watch.timer.Stop()
	watchWrite := func() {
		if inputOpen {
			watch.start()
		}
	}
	// fail turns a write error into Serve's result, or into broken: a peer that went away
	// is heard out first.
	fail := func(err error) error {
		if ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			// Cut off by cutStalledWrites: the peer did not read within the grace.
			endHere(conn, h)
			return fmt.Errorf("%w (the peer stopped reading: %w)", ctx.Err(), err)
		}
		if !peerGone(err) {
			endHere(conn, h)
			return err
		}
		broken = err
		return nil
	}
	for {
		// 1. Events, while the output has room (the handler may issue commands). A command
		// given on another goroutine after mark, which the turn may have missed, is looked
		// at before waiting (4).
		mark := conn.changeMark()
		closed, held, closeErr := handOut(conn, h, room, flush)
		if err := conn.Err(); err != nil && !(closed && errors.Is(err, ErrFreed)) {
			return err
		}
		if closed {
			// Everything is written before Serve returns (the handler heard of the close
			// after flush). ErrFreed only after the handler heard of it: it closed the Conn
			// on its ClosedEvent, with everything written; before, another goroutine did.
			if err := flush(); err != nil && broken == nil &&
				(!errors.Is(err, ErrFreed) || errors.Is(closeErr, ErrFreed)) {
				if err := fail(err); err != nil {
					return err
				}
			}
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
		// 2. The output: up to one Write's worth here, more on the writer's goroutine, so
		// that the loop goes on while it is written. (Handing every write over would cost a
		// switch of goroutines per turn: a quarter of the throughput of a busy stdio server.)
		switch {
		case writing:
		case broken != nil:
			if conn.isFreed() {
				return ErrFreed // (another goroutine closed the Conn)
			}
		default:
			_, big, err := conn.writeOut(w, writeChunk, watchWrite)
			if watch.end() {
				asked, askedDuringWrite = true, true
			}
			if !big {
				bigWrite.Store(false)
			}
			switch {
			case err != nil:
				werr = err // (ErrFreed: another goroutine closed the Conn)
				if err := fail(err); err != nil {
					return err
				}
			case big:
				writing = true
				// The reader reads ahead during the write, even when a token it was given
				// already brought a chunk that waits to be taken.
				readDuringWrite()
				kick <- struct{}{}
			}
		}
		if held && !writing {
			continue // (written here: the events held for room go out now)
		}
		// 3. Input, once every event is handed out (as Conn.InputPiece asks: else requests
		// in flight would grow a piece per event), and while the output has room: the rest
		// of the last read, a piece at a time, before reading more.
		if !held && len(pending) > 0 && room() {
			n := min(len(pending), piece)
			if err := conn.Feed(time.Now(), pending[:n]); err != nil {
				return err
			}
			pending = pending[n:]
			continue
		}
		// The input ended, and everything read before its end is in and handed out: now
		// the end itself (a last line without a newline is processed then, and answered if
		// the handler answers it at once).
		if !held && readErr != nil && len(pending) == 0 && !eofFed {
			eofFed = true
			if err := conn.FeedEOF(time.Now()); err != nil {
				return err
			}
			continue
		}
		if timersAfterFeed && len(pending) == 0 {
			timersAfterFeed = false
			if err := conn.HandleTimeout(time.Now()); err != nil {
				return err
			}
			continue
		}

		// 4. Wait for input, the writer, the engine's deadline, a command from another
		// goroutine, or cancellation. A command given since mark is looked at first.
		if !conn.beginWait(mark) {
			continue
		}
		var timeout <-chan time.Time
		timer.Stop()
		// (Not while input read before a deadline came waits for room to be fed: the
		// timers fire right after it is.)
		if deadline, ok := conn.NextDeadline(); ok && !(timersAfterFeed && len(pending) > 0) {
			timer.Reset(time.Until(deadline))
			timeout = timer.C
		}
		var input chan struct{}
		// The reader idled until now (the loop was busy), or was asked during a write: what
		// reached r meanwhile is one Read away, and a deadline that passed meanwhile gives it
		// lateInput to come first.
		justAsked := false
		if inputOpen && len(pending) == 0 {
			if !waiting() {
				justAsked = !asked || askedDuringWrite
				ask()
			}
			input = ready
		}
		var written chan error
		if writing {
			written = wrote
		}
		askedDuringWrite = false
		select {
		case <-input:
			took(take())
		case err := <-written:
			writing = false
			err = fromWriter(err)
			if err != nil {
				werr = err // (nothing more is written)
				if err := fail(err); err != nil {
					return err
				}
			}
		case <-wake:
		case <-timeout:
			// Input that is here already goes in first (see timersAfterFeed), once each time
			// the deadline comes, so input that keeps coming cannot hold it off: input read
			// and not yet fed (the output has no room for what it may bring), and input that
			// reached r meanwhile.
			if len(pending) > 0 {
				timersAfterFeed = true
				break
			}
			var c chunk
			arrived := false
			select {
			case <-input:
				c, arrived = take(), true
			default:
				if justAsked {
					timer.Reset(lateInput)
					select {
					case <-input:
						c, arrived = take(), true
					case <-timer.C:
					}
				}
			}
			if arrived {
				took(c)
				timersAfterFeed = true
			} else if err := conn.HandleTimeout(time.Now()); err != nil {
				return err
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

// writerPanic is how Serve's writer goroutine reports a Write that panicked (value, passed
// on to Serve's caller) or ended the goroutine with runtime.Goexit (value nil: Serve returns
// it as its error).
type writerPanic struct{ value any }

func (p *writerPanic) Error() string {
	return "mcpwire: the writer's Write ended its goroutine (runtime.Goexit)"
}

// errReaderGoexit is Serve's error when the reader's Read ended its goroutine
// (runtime.Goexit).
var errReaderGoexit = errors.New("mcpwire: the reader's Read ended its goroutine (runtime.Goexit)")

// lateInput is how long a deadline that passed while Serve was busy waits for the Read it has
// just asked for: long enough for input that reached r meanwhile to be read (a Read of a
// pipe or socket with bytes waiting returns at once), short against any timeout.
const lateInput = 5 * time.Millisecond

// writeStall is how long a Write on Serve's goroutine may take before the reader reads ahead
// during it (see Serve).
const writeStall = 2 * time.Millisecond

// stallWatch watches a Write on Serve's goroutine: if it has not returned within writeStall,
// the reader gets a token (give). start arms it before the Write; end disarms it after, and
// reports whether the token was given, which Serve then counts as asked for. The two sides
// take a lock, so that a token given is reported exactly once: with a callback that was
// already running when end stopped the timer, a token given after end looked (a stale
// "stalled" reported by the next end instead) left Serve counting a token that had been
// taken, and asking for none while the reader idled: input was never read again.
type stallWatch struct {
	mu       sync.Mutex
	watching bool // armed, for a Write under way
	stalled  bool // the token was given during this Write
	give     func()
	timer    *time.Timer
}

func newStallWatch(give func()) *stallWatch {
	w := &stallWatch{give: give}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

func (w *stallWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watching && !w.stalled {
		w.stalled = true
		w.give()
	}
}

func (w *stallWatch) start() {
	w.mu.Lock()
	w.watching = true
	w.mu.Unlock()
	w.timer.Reset(writeStall)
}

func (w *stallWatch) end() (stalled bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watching {
		return false
	}
	w.timer.Stop() // (a callback already running waits for the lock, then finds nothing armed)
	stalled = w.stalled
	w.watching, w.stalled = false, false
	return stalled
}

// readAhead is how many bytes Serve's reader may hold ahead of the loop during a write (see
// Serve): the input held outside the engine.
const readAhead = 1 << 20

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

// handOut hands the events conn holds to h, all with the time of the first, while room (if not
// nil) says that the output has room for what an event's answers may add. It reports whether
// the ClosedEvent was among them, and whether events are held back for want of room. flush
// writes the output before the handler hears of the close (the handler may Close the Conn,
// and what was unwritten would go with it; closeErr is how that write ended), and when the
// handler panics.
func handOut(conn *Conn, h Handler, room func() bool, flush func() error) (closed, held bool, closeErr error) {
	var now time.Time
	for {
		if room != nil && !room() {
			return closed, true, closeErr
		}
		ev, ok := conn.nextEvent()
		if !ok {
			return closed, false, closeErr
		}
		if _, isClosed := ev.(*ClosedEvent); isClosed {
			closed = true
			closeErr = flush()
		}
		if now.IsZero() {
			now = time.Now()
		}
		handleServed(conn, h, ev, now, flush)
	}
}

// endHere closes conn at once, when Serve returns with a write error that leaves it nothing
// to write to, and hands h what the close brings (its ClosedEvent last): h learns that the
// connection is over, and answers its goroutines give later fail with ErrClosed instead of
// piling up, taken for delivered, in a Conn that nobody drives. What the close writes (the
// peer's requests' -32603, our requests' cancellations) is lost with the output.
func endHere(conn *Conn, h Handler) {
	if conn.State() != StateClosed {
		_ = conn.Shutdown(time.Now(), 0)
	}
	// (Closed already, its ClosedEvent may still wait: held while the output was full.)
	handOut(conn, h, nil, func() error { return nil })
}

// handleServed hands ev to h. When h panics (or calls runtime.Goexit), the output the
// connection already holds is written (flush) on the way out; the panic itself goes on.
func handleServed(conn *Conn, h Handler, ev Event, now time.Time, flush func() error) {
	returned := false
	defer func() {
		if !returned {
			_ = flush() // best effort: the panic, not a write error, is the news
		}
	}()
	h.HandleEvent(conn, now, ev)
	returned = true
}
