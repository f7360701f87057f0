//! A blocking run loop over any byte stream pair: stdin/stdout, a child process's pipes, a
//! socket. Feature `blocking`.
//!
//! The engine itself does no IO; this module is the one IO layer the crate ships, for programs
//! that have no event loop of their own (a command-line server, a test, a tool). It is the loop
//! the [crate docs](crate) describe, written once: drain events, write everything the engine
//! lends, then wait for input, end of input or the earliest deadline, and feed it in.
//!
//! - **Time stays an input.** [`Io`] reads the time from a clock you give it
//!   (`FnMut() -> Timestamp`), so tests can drive it with any clock.
//! - **No thread on Unix.** [`Io::stdio`] and [`Io::from_fd`] wait on the input's file
//!   descriptor themselves with `poll(2)` (through the `libc` crate, which has each platform's
//!   exact types) and read [`CHUNK`] bytes at a time on the loop's thread. One message in,
//!   one answer out, then costs one wake-up of one thread.
//! - **One reader thread otherwise.** `std` cannot wait on an arbitrary [`Read`] with a
//!   timeout, so [`Io::new`] reads its input on a thread and hands it over through a channel
//!   of [`READ_AHEAD`] chunks of at most [`CHUNK`] bytes (and holds one more while it waits
//!   to queue it). Either way one more chunk is being fed to the engine [`FEED`] bytes at a
//!   time; that, and the reader's own buffer of [`CHUNK`] bytes, is all the input held
//!   outside the engine (at most 448 KiB with a reader thread, 64 KiB without).
//! - **Backpressure.** Writes block, also on an output its parent left non-blocking (the
//!   loop then waits for it with `poll(2)`, or retries). While the peer does not read, the
//!   loop waits in its write and takes no input (a reader thread stops once its chunks
//!   wait), so a peer that writes without reading is slowed to the pace it reads at. Memory
//!   stays within the engine's bounds plus the read-ahead. This makes the loop half-duplex:
//!   a peer that also reads only once it has written everything (pipelined requests beyond
//!   what the pipes and the read-ahead hold, sent before reading any answer) waits for us
//!   while we wait for it, for good. For such peers use a loop that reads while it writes
//!   (`mcpwire_tokio::stdio::Driver`, Go's `Serve`, the C stdio example).
//! - **Nothing accepted is lost.** At end of input every answer already produced is written
//!   before [`Io::next_event`] reports [`Stop::Eof`]. Input already read is fed before the
//!   engine's timers fire, so an answer that arrived while the loop was late (busy, or in a
//!   long write) is taken, not timed out.
//!
//! ```no_run
//! # #[cfg(feature = "blocking")] {
//! # #![allow(clippy::disallowed_methods)]
//! use mcpwire::blocking::{Io, Stop};
//! use mcpwire::{Config, Connection, OwnedEvent, Timestamp};
//! use mcpwire::jsonrpc::RawJson;
//!
//! let start = std::time::Instant::now();
//! let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
//! let config = Config::server("demo", "1.0").with_capabilities(r#"{"tools":{}}"#).unwrap();
//! let mut conn = Connection::new(config, Timestamp::ZERO).unwrap();
//! let mut io = Io::stdio(clock);
//! loop {
//!     match io.next_event(&mut conn, None) {
//!         Ok(OwnedEvent::Request { id, method, .. }) if method == "tools/list" => {
//!             let _ = conn.respond(id.as_id(), RawJson::new(r#"{"tools":[]}"#).unwrap());
//!         }
//!         Ok(OwnedEvent::Request { id, .. }) => {
//!             let _ = conn.respond_error(id.as_id(), -32601, "Method not found", None);
//!         }
//!         Ok(OwnedEvent::Closed { .. }) | Err(Stop::Eof) => break,
//!         Ok(_) | Err(_) => {}
//!     }
//! }
//! # }
//! ```

use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use crate::Timestamp;
use crate::conn::{Connection, OwnedEvent};

/// The most bytes one read takes from the input.
pub const CHUNK: usize = 64 * 1024;

/// How many read chunks may wait between the reader thread and the loop. Together with
/// [`CHUNK`] this bounds the input held outside the engine (see the [module docs](self)).
pub const READ_AHEAD: usize = 4;

/// How many chunks of input that is ready are taken before the engine's timers fire: all that
/// a reader thread may hold read ahead (its [`READ_AHEAD`] queued, and one in hand).
const LOOKS_BEFORE_TIMERS: usize = READ_AHEAD + 1;

/// Input is fed to the engine at most this many bytes at a time, and the next piece only once
/// every event of the last one was handed out: less under lowered limits, as
/// [`Limits::input_piece`](crate::conn::Limits::input_piece) says. So a peer that pipelines
/// thousands of requests in one write gets every one answered by an application that
/// answers as it goes, instead of "too many requests" errors for what did not fit.
pub const FEED: usize = 4 * 1024;

/// The longest single wait when there is no deadline at all. The loop wakes this often with
/// nothing to do; it only bounds how long a `recv` call lasts.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// Which way bytes crossed, for a [tap](Io::set_tap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Written to the output.
    Sent,
    /// Read from the input.
    Received,
}

/// Why [`Io::next_event`] returned without an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The `until` time given to [`Io::next_event`] came, and no event is left
    /// ([`Io::run_until`] returns it between events too: those left wait for the next call).
    /// The input that was ready went in and the engine's timers that were due fired
    /// (answering a ping, say, without an event); call again to go on.
    Deadline,
    /// The input ended, every event was handed out and every byte the engine produced was
    /// written (or the output was gone). Standing: every later call returns it again.
    Eof,
}

/// A callback that sees every chunk that crosses, for transcripts and logs.
type Tap = Box<dyn FnMut(Direction, &[u8]) + Send>;

impl Io<std::io::Stdout> {
    /// The loop over this process's stdin and stdout: the usual stdio server. On Unix it waits
    /// on stdin itself, as [`from_fd`](Io::from_fd) does (so nothing may have been read from
    /// stdin before); elsewhere, or when stdin's descriptor cannot be duplicated, it reads
    /// stdin on a thread, as [`new`](Io::new) does.
    pub fn stdio(clock: impl FnMut() -> Timestamp + Send + 'static) -> Io<std::io::Stdout> {
        #[cfg(unix)]
        if let Ok(input) = Input::fd(std::io::stdin()) {
            let mut io = Io::with_input(input, std::io::stdout(), clock);
            io.output_fd = Some(std::os::fd::AsRawFd::as_raw_fd(&std::io::stdout()));
            return io;
        }
        Io::new(std::io::stdin(), std::io::stdout(), clock)
    }
}

/// Where the input comes from.
enum Input {
    /// Chunks from a reader thread (see [`Io::new`]), and the error that ended its reads.
    Thread(Receiver<Vec<u8>>, ReadError),
    /// A descriptor the loop waits on and reads itself (see [`Io::from_fd`]).
    #[cfg(unix)]
    Fd(std::fs::File),
}

impl Input {
    /// A duplicate of `input`'s descriptor, read on the loop's thread.
    #[cfg(unix)]
    fn fd(input: impl std::os::fd::AsFd) -> std::io::Result<Input> {
        let fd = input.as_fd().try_clone_to_owned()?;
        Ok(Input::Fd(std::fs::File::from(fd)))
    }
}

/// What waiting for input brought.
enum Waited {
    /// `len` bytes, now in `pending`.
    Bytes(usize),
    /// The input ended or failed.
    End,
    /// Nothing yet (the wait timed out or was interrupted).
    Nothing,
}

/// The IO half of a blocking loop: an input, an output written in place, and the clock. Use
/// one per connection; the [`Connection`] stays yours, so commands can be issued between
/// calls.
pub struct Io<W: Write> {
    input: Input,
    output: Option<W>,
    clock: Box<dyn FnMut() -> Timestamp + Send>,
    tap: Option<Tap>,
    /// The chunk being fed (its first `end` bytes), and how much of it the engine has had.
    pending: Vec<u8>,
    end: usize,
    fed: usize,
    /// The engine's timers wait for the chunk being fed: an answer that is already here is
    /// not timed out because the loop came late to it.
    timers_after_feed: bool,
    /// Before those timers fire, input that is ready is looked for: how many chunks were
    /// taken so. At most [`LOOKS_BEFORE_TIMERS`], so that input that keeps coming cannot hold
    /// the timers off.
    looks_before_timers: usize,
    eof: bool,
    /// The error that ended the input, when a read failed.
    input_error: Option<std::io::Error>,
    output_error: Option<std::io::Error>,
    /// The time the loop last read (see [`event_time`](Io::event_time)).
    read_at: Timestamp,
    /// The output's descriptor, when known (stdout), to wait on when it is full (see
    /// [`write_waiting`]).
    #[cfg(unix)]
    output_fd: Option<std::os::fd::RawFd>,
}

impl<W: Write> std::fmt::Debug for Io<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("eof", &self.eof)
            .field("output_open", &self.output.is_some())
            .finish_non_exhaustive()
    }
}

impl<W: Write> Io<W> {
    /// Starts reading `input` on a thread of its own, and writes to `output` from the calling
    /// thread. `clock` must never go backwards (a monotonic clock, as
    /// [`Timestamp`] asks for). Use it for any [`Read`]: an in-memory input in a test, or a
    /// source without a file descriptor. For stdin, and on Unix for any pipe or socket,
    /// [`stdio`](Io::stdio) and [`from_fd`](Io::from_fd) need no thread.
    ///
    /// The thread ends when the input ends or fails, or, after `Io` is dropped, with the next
    /// read that returns. A read that fails with `WouldBlock` (a non-blocking source) is not
    /// an end: the thread tries again every millisecond, and ends within about a second of
    /// `Io` being dropped.
    pub fn new(
        input: impl Read + Send + 'static,
        output: W,
        clock: impl FnMut() -> Timestamp + Send + 'static,
    ) -> Io<W> {
        let (chunks, failed) = spawn_reader(input);
        Io::with_input(Input::Thread(chunks, failed), output, clock)
    }

    /// Reads the file descriptor `input` (a pipe, a socket, stdin) on the loop's own thread,
    /// waiting on it with `poll(2)`, and writes to `output`. Use it on Unix instead of
    /// [`new`](Io::new) whenever the input has a descriptor: each read wakes one thread
    /// instead of two, which shortens every round trip (see the stdio rows of the end-to-end
    /// bench in `benches/README.md`).
    ///
    /// The descriptor is duplicated, so `input` itself may be dropped. Nothing may have been
    /// read through `input` before (a [`Stdin`](std::io::Stdin) that buffered some bytes keeps
    /// them), and nothing else may read it while the `Io` lives. Fails only when the
    /// descriptor cannot be duplicated.
    #[cfg(unix)]
    pub fn from_fd(
        input: impl std::os::fd::AsFd,
        output: W,
        clock: impl FnMut() -> Timestamp + Send + 'static,
    ) -> std::io::Result<Io<W>> {
        Ok(Io::with_input(Input::fd(input)?, output, clock))
    }

    fn with_input(
        input: Input,
        output: W,
        clock: impl FnMut() -> Timestamp + Send + 'static,
    ) -> Io<W> {
        Io {
            input,
            output: Some(output),
            clock: Box::new(clock),
            tap: None,
            pending: Vec::new(),
            end: 0,
            fed: 0,
            timers_after_feed: false,
            looks_before_timers: 0,
            eof: false,
            input_error: None,
            output_error: None,
            read_at: Timestamp::ZERO,
            #[cfg(unix)]
            output_fd: None,
        }
    }

    /// Calls `tap` with every chunk read and every chunk written, in order (once written: what
    /// a failed or closed output discarded is not shown). Use it for transcripts; it runs on
    /// the loop's thread.
    pub fn set_tap(&mut self, tap: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.tap = Some(Box::new(tap));
    }

    /// The current time, from the clock given to [`new`](Io::new).
    pub fn now(&mut self) -> Timestamp {
        (self.clock)()
    }

    /// The time [`next_event`](Io::next_event) read from the clock last: when it fed the
    /// input, or handled the deadline, whose events it is handing out. Use it as `now` for the
    /// commands that answer those events: it costs no clock read, where [`now`](Io::now)
    /// calls the clock every time (a stdio server spent about 8% of its time there at one
    /// call per event). It is older than `now()` by the time spent since that read: the time
    /// spent on the batch so far, unless the application did slow work between two calls;
    /// use `now()` after such work.
    pub fn event_time(&self) -> Timestamp {
        self.read_at
    }

    /// Calls the clock and remembers the time for [`event_time`](Io::event_time).
    fn read_clock(&mut self) -> Timestamp {
        self.read_at = (self.clock)();
        self.read_at
    }

    /// Whether the input has ended.
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// The error that ended the input, if a read failed (a reset connection, an I/O error)
    /// rather than reaching the end: [`next_event`](Io::next_event) reports [`Stop::Eof`]
    /// all the same (what was read before it is fed and answered), and a host that must tell
    /// a failed input from a finished one looks here then.
    pub fn input_error(&self) -> Option<&std::io::Error> {
        self.input_error.as_ref()
    }

    /// The error that closed the output, if a write failed (the peer went away). Output is
    /// discarded after that, and reading goes on.
    pub fn output_error(&self) -> Option<&std::io::Error> {
        self.output_error.as_ref()
    }

    /// Closes the output (drops the writer): for a child process, its stdin closes, which is
    /// how the stdio transport asks a server to exit. Later output is discarded.
    pub fn close_output(&mut self) {
        self.output = None;
    }

    /// Writes everything the engine has to send, blocking while the peer does not read.
    /// Returns whether the engine had anything. A failed write closes the output (see
    /// [`output_error`](Io::output_error)); the bytes are then consumed and discarded, so the
    /// engine never stalls on a peer that is gone.
    pub fn flush(&mut self, conn: &mut Connection) -> bool {
        let wait = self.writable();
        let mut any = false;
        while let Some(t) = conn.poll_transmit() {
            any = true;
            let n = t.bytes.len();
            // The tap sees what was written: not what a closed output discarded, nor a
            // segment whose write failed.
            if let Some(out) = self.output.as_mut() {
                match write_waiting(out, t.bytes, &wait) {
                    Ok(()) => {
                        if let Some(tap) = self.tap.as_mut() {
                            tap(Direction::Sent, t.bytes);
                        }
                    }
                    Err(e) => {
                        self.output_error = Some(e);
                        self.output = None;
                    }
                }
            }
            conn.consume_transmit(n);
        }
        if any
            && let Some(out) = self.output.as_mut()
            && let Err(e) = flush_waiting(out, &wait)
        {
            self.output_error = Some(e);
            self.output = None;
        }
        any
    }

    /// How to wait until the output takes bytes again (see [`write_waiting`]).
    fn writable(&self) -> impl Fn() + use<W> {
        #[cfg(unix)]
        let fd = self.output_fd;
        move || {
            #[cfg(unix)]
            if let Some(fd) = fd {
                let mut fds = [libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                // SAFETY: `fds` is one valid, writable pollfd for the duration of the call;
                // the descriptor is this process's stdout, open for its lifetime. A wait
                // that fails or is interrupted just leads to another write attempt.
                unsafe { libc::poll(fds.as_mut_ptr(), 1, -1) };
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The loop, one event at a time: hands out the next event; when none is left, writes the
    /// engine's output, and then waits for input, end of input, the engine's deadline or `until`
    /// (whichever comes first) and feeds it in.
    ///
    /// Issue commands between calls; their output is written by the next call that finds no
    /// event left, before it reads or waits. The answers to one piece of input (up to
    /// [`FEED`] bytes) thus leave in one write; a handler about to do long work can
    /// [`flush`](Io::flush) first, so the answers it already gave do not wait for it. Returns
    /// [`Stop::Deadline`] when `until` has come, and [`Stop::Eof`] once the input has ended
    /// and everything is written. Everything is written before `Closed` is handed out too, so
    /// a loop may stop at either.
    ///
    /// `until` bounds the waits for input, not the writes: while the peer does not read,
    /// the call stays in its write (backpressure), past `until` and the engine's timers. A
    /// host that must end on a signal whatever the peer does bounds that wait itself (a
    /// child process it can kill from another thread).
    pub fn next_event(
        &mut self,
        conn: &mut Connection,
        until: Option<Timestamp>,
    ) -> Result<OwnedEvent, Stop> {
        let mut looked_at_until = false;
        loop {
            // Events first; output is written once none is left, so the answers to a batch
            // of requests leave in one write instead of one each. Nothing waits or reads
            // before the output is written. Except past the high-water mark: then the output
            // is written before the next event, so that the answers it may give always have
            // room (a large answer among pipelined requests would otherwise leave the next
            // ones `OutputFull` with the client reading all along).
            if conn.pending_events() > 0 && pending_output(conn) >= high_water(conn) {
                self.flush(conn);
            }
            if let Some(event) = conn.poll_event() {
                let event = event.to_owned_event();
                if matches!(event, OwnedEvent::Closed { .. }) {
                    // The caller usually stops at the end: what the connection still has to
                    // say (an answer given just before a close) leaves first.
                    self.flush(conn);
                }
                return Ok(event);
            }
            if self.flush(conn) {
                continue;
            }
            if self.fed < self.end {
                let end = self.end.min(self.fed + conn.config().limits.input_piece());
                let now = self.read_clock();
                conn.handle_input(now, &self.pending[self.fed..end]);
                self.fed = end;
                continue;
            }
            if self.timers_after_feed {
                // Input that came while the caller worked on the events handed out (the
                // answer to a request whose deadline passed meanwhile, say) goes in before
                // the timers fire: what is ready now is taken, chunk by chunk, when a timer
                // is due (otherwise there is nothing to lose, and no call to make), as many
                // chunks as the loop may hold read ahead.
                let now = self.read_clock();
                let due = conn.poll_timeout().is_some_and(|at| at <= now);
                if due && self.looks_before_timers < LOOKS_BEFORE_TIMERS {
                    self.looks_before_timers += 1;
                    match self.wait_for_input(Duration::ZERO) {
                        Waited::Bytes(len) => {
                            self.took(len);
                            continue;
                        }
                        // Taken now: a terminal's end of input (Ctrl-D) is read only once.
                        Waited::End => {
                            self.eof = true;
                            conn.handle_eof(now);
                        }
                        Waited::Nothing => {}
                    }
                }
                // The chunk is in: now the timers that came due while it waited. (Each chunk
                // is followed by them, so input that keeps coming cannot hold them off.)
                self.looks_before_timers = 0;
                self.timers_after_feed = false;
                conn.handle_timeout(now);
                continue;
            }
            if self.eof {
                // A last line without its newline closes the connection only once its
                // events are out (`Connection::handle_eof`): then the time closes it, and
                // `Closed` (with `Abandoned` for requests in flight) comes before the end.
                let now = self.read_clock();
                conn.handle_timeout(now);
                if conn.pending_events() > 0 || conn.poll_transmit().is_some() {
                    continue;
                }
                return Err(Stop::Eof);
            }
            let now = self.read_clock();
            if until.is_some_and(|u| now >= u) {
                // Once per call, even when `until` had come before it (a host polling without
                // waiting): the input that is ready goes in and what is due fires first.
                if looked_at_until {
                    return Err(Stop::Deadline);
                }
                looked_at_until = true;
                match self.wait_for_input(Duration::ZERO) {
                    Waited::Bytes(len) => {
                        self.took(len);
                        continue;
                    }
                    Waited::End => {
                        self.eof = true;
                        conn.handle_eof(now);
                    }
                    Waited::Nothing => {}
                }
                conn.handle_timeout(now);
                continue;
            }
            let wake = match (conn.poll_timeout(), until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wait = wake.map_or(IDLE_WAIT, |w| {
                Duration::from_nanos(w.as_nanos().saturating_sub(now.as_nanos()))
            });
            match self.wait_for_input(wait) {
                Waited::Bytes(len) => {
                    self.took(len);
                    continue;
                }
                Waited::End => {
                    self.eof = true;
                    let now = self.read_clock();
                    conn.handle_eof(now);
                }
                Waited::Nothing => {}
            }
            let now = self.read_clock();
            conn.handle_timeout(now);
        }
    }

    /// Notes a chunk of `len` bytes read into `pending`.
    fn took(&mut self, len: usize) {
        if let Some(tap) = self.tap.as_mut() {
            tap(Direction::Received, &self.pending[..len]);
        }
        // Fed piece by piece from the top of the loop, and only then the timers: a request
        // whose answer is in this chunk is answered, not timed out, when the loop comes to it
        // after its deadline (a loaded machine, a long write).
        self.end = len;
        self.fed = 0;
        self.timers_after_feed = true;
    }

    /// Waits up to `wait` for the next chunk of input and puts it in `pending` (whose bytes
    /// the engine has all had).
    fn wait_for_input(&mut self, wait: Duration) -> Waited {
        match &mut self.input {
            Input::Thread(rx, failed) => {
                let mut left = wait;
                loop {
                    return match rx.recv_timeout(left) {
                        // The reader asking whether the loop is still there
                        // (`spawn_reader`): what it queued behind that is input, looked at
                        // now (taken for nothing, an answer behind it was timed out).
                        Ok(bytes) if bytes.is_empty() => {
                            left = Duration::ZERO;
                            continue;
                        }
                        Ok(bytes) => {
                            self.pending = bytes;
                            Waited::Bytes(self.pending.len())
                        }
                        Err(RecvTimeoutError::Disconnected) => {
                            // (Taken once: the thread has ended.)
                            let error = failed.lock().map(|mut e| e.take());
                            self.input_error = self.input_error.take().or(error.ok().flatten());
                            Waited::End
                        }
                        Err(RecvTimeoutError::Timeout) => Waited::Nothing,
                    };
                }
            }
            #[cfg(unix)]
            Input::Fd(file) => {
                use std::os::fd::AsRawFd;
                // Rounded up, so that the loop does not wake just before its deadline.
                let ms = wait.as_nanos().div_ceil(1_000_000);
                let timeout = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
                let mut fds = [libc::pollfd {
                    fd: file.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                }];
                // SAFETY: `fds` is one valid, writable pollfd for the duration of the call,
                // and the descriptor is ours (owned by `file`) until `file` is dropped.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout) };
                if ready <= 0 {
                    // Timed out, or interrupted by a signal (EINTR): the caller looks again.
                    // poll fails otherwise only on bad arguments, which these are not.
                    return Waited::Nothing;
                }
                // Readable, or at its end, or failed: the read says which.
                if self.pending.len() < CHUNK {
                    self.pending.resize(CHUNK, 0);
                }
                match file.read(&mut self.pending) {
                    Ok(0) => Waited::End,
                    Ok(n) => Waited::Bytes(n),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                        ) =>
                    {
                        Waited::Nothing
                    }
                    Err(e) => {
                        self.input_error = Some(e);
                        Waited::End
                    }
                }
            }
        }
    }

    /// Runs [`next_event`](Io::next_event) until `f` returns `Some`, handing it every event;
    /// `f` may issue commands on the connection it is given. Returns [`Stop::Deadline`] at
    /// `until`, looked at between events too, so that a peer that keeps sending cannot hold
    /// the call past it (events not handed out yet wait for the next call), and [`Stop::Eof`]
    /// when the input ends first.
    pub fn run_until<T>(
        &mut self,
        conn: &mut Connection,
        until: Option<Timestamp>,
        mut f: impl FnMut(&mut Connection, Timestamp, OwnedEvent) -> Option<T>,
    ) -> Result<T, Stop> {
        loop {
            let event = self.next_event(conn, until)?;
            let now = self.now();
            if let Some(out) = f(conn, now, event) {
                self.flush(conn);
                return Ok(out);
            }
            if until.is_some_and(|until| now >= until) {
                self.flush(conn);
                return Err(Stop::Deadline);
            }
        }
    }
}

/// Writes all of `bytes` to `out`, waiting with `wait` while it is full: an output whose
/// parent left its descriptor non-blocking answers `WouldBlock` where a blocking one would
/// wait, and dropping the rest then would lose answers already given. `write` is retried with
/// what is left, since a failed `write` takes nothing (`write_all` would lose track).
/// The bytes the engine has for the output.
fn pending_output(conn: &Connection) -> usize {
    conn.poll_transmit().map_or(0, |t| t.bytes.len())
}

/// How much output [`Io::next_event`] lets build up before it writes ahead of the next
/// event: 1 MiB (large writes), or half the connection's output bound if that is smaller, so
/// an event's answers always find room.
fn high_water(conn: &Connection) -> usize {
    (conn.config().limits.max_buffered_output / 2).min(1 << 20)
}

fn write_waiting(out: &mut impl Write, mut bytes: &[u8], wait: &impl Fn()) -> std::io::Result<()> {
    use std::io::ErrorKind;
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait(),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `out.flush()`, waiting with `wait` while the output is full (see [`write_waiting`]).
fn flush_waiting(out: &mut impl Write, wait: &impl Fn()) -> std::io::Result<()> {
    use std::io::ErrorKind;
    loop {
        match out.flush() {
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait(),
            other => return other,
        }
    }
}

/// The error that ended a reader thread's reads, set before its channel closes.
type ReadError = std::sync::Arc<std::sync::Mutex<Option<std::io::Error>>>;

/// Records a panic of the reader thread as the input's error when the thread unwinds.
struct ReaderPanic(ReadError);

impl Drop for ReaderPanic {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Ok(mut slot) = self.0.lock()
        {
            slot.get_or_insert_with(|| std::io::Error::other("the input's reader panicked"));
        }
    }
}

/// Reads `source` on a thread into a channel of [`READ_AHEAD`] chunks; the channel closes when
/// the input ends or fails (the error is left in the [`ReadError`] first).
fn spawn_reader(mut source: impl Read + Send + 'static) -> (Receiver<Vec<u8>>, ReadError) {
    let (tx, rx): (SyncSender<Vec<u8>>, _) = sync_channel(READ_AHEAD);
    let failed = ReadError::default();
    let failure = failed.clone();
    std::thread::spawn(move || {
        // A reader that panics ends the input as a failure, not as its end (the channel's
        // sender goes after this guard).
        let _guard = ReaderPanic(failure.clone());
        let mut buf = vec![0u8; CHUNK];
        let mut idle = 0u32;
        loop {
            match source.read(&mut buf) {
                Ok(0) => return,
                Ok(n) if n > buf.len() => {
                    if let Ok(mut slot) = failure.lock() {
                        *slot = Some(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "the input's read returned more bytes than its buffer holds",
                        ));
                    }
                    return;
                }
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A source left non-blocking (a socket, a descriptor its parent set so) has
                // nothing yet: it has not ended. With no descriptor to wait on, look again
                // shortly; now and then an empty chunk asks whether `Io` is still there.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    idle = idle.wrapping_add(1);
                    if idle.is_multiple_of(1024)
                        && let Err(TrySendError::Disconnected(_)) = tx.try_send(Vec::new())
                    {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(e) => {
                    if let Ok(mut slot) = failure.lock() {
                        *slot = Some(e);
                    }
                    return;
                }
            }
            idle = 0;
        }
    });
    (rx, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Config;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A clock the test moves by hand.
    fn manual_clock() -> (Arc<AtomicU64>, impl FnMut() -> Timestamp + Send + 'static) {
        let now = Arc::new(AtomicU64::new(0));
        let read = Arc::clone(&now);
        (now, move || {
            Timestamp::from_nanos(read.load(Ordering::SeqCst))
        })
    }

    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#;

    fn server() -> Connection {
        let config = Config::server("s", "1")
            .with_capabilities(r#"{"tools":{}}"#)
            .unwrap();
        Connection::new(config, Timestamp::ZERO).unwrap()
    }

    /// The initialize exchange and 3,000 `tools/list` requests.
    fn many_requests() -> String {
        let mut input = INIT.to_owned();
        for i in 0..3000 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}}\n",
                i + 2
            ));
        }
        input
    }

    /// A handshake-era client whose requests time out after 1 s.
    /// A server's answer to the client's `initialize`, as a line.
    const INIT_RESULT: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}\n";

    /// A server's answer to the client's `tools/list` request `id`, as a line.
    fn tools_answer(id: crate::conn::RequestId) -> String {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"tools\":[]}}}}\n",
            id.0
        )
    }

    fn client_with_a_one_second_timeout() -> Connection {
        let mut config = Config::client("c", "1");
        config.client_era = crate::conn::ClientEra::Legacy;
        config.request_timeout = Duration::from_secs(1);
        Connection::new(config, Timestamp::ZERO).unwrap()
    }

    /// An `Io` reading `reader` on the loop's thread (`on_fd`) or on a thread of its own.
    #[cfg(unix)]
    fn io_over_pipe<'a>(
        on_fd: bool,
        reader: &std::io::PipeReader,
        out: &'a mut Vec<u8>,
        clock: impl FnMut() -> Timestamp + Send + 'static,
    ) -> Io<&'a mut Vec<u8>> {
        if on_fd {
            Io::from_fd(reader, out, clock).unwrap()
        } else {
            Io::new(reader.try_clone().unwrap(), out, clock)
        }
    }

    /// An answer that is already here when the loop comes to it past its request's deadline
    /// (a loaded machine, a long write) is taken, not timed out: the loop read it, then fired
    /// the timers, and only then fed it, so the request timed out and the answer was dropped
    /// as late. Both ways of reading: a thread, and the descriptor on the loop's thread.
    #[cfg(unix)]
    #[test]
    fn an_answer_already_read_beats_a_deadline_that_passed_meanwhile() {
        for on_fd in [false, true] {
            let (reader, mut writer) = std::io::pipe().unwrap();
            let (now, clock) = manual_clock();
            let mut conn = client_with_a_one_second_timeout();
            let mut out = Vec::new();
            let mut io = io_over_pipe(on_fd, &reader, &mut out, clock);
            // The initialize request goes out, and the call returns at its `until`.
            let until = Some(Timestamp::from_nanos(10_000_000));
            now.store(20_000_000, Ordering::SeqCst);
            assert_eq!(io.next_event(&mut conn, until), Err(Stop::Deadline));
            // Its answer arrives, and the loop comes to it at 5 s, past the 1 s timeout.
            let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#;
            writer.write_all(format!("{answer}\n").as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(100)); // (the reader thread has it)
            now.store(5_000_000_000, Ordering::SeqCst);
            let event = io.next_event(&mut conn, None);
            assert!(
                matches!(event, Ok(OwnedEvent::Ready { .. })),
                "on_fd {on_fd}: {event:?}"
            );
            drop(io);
            let sent = String::from_utf8(out).unwrap();
            assert!(sent.contains(r#""id":1,"method":"initialize""#), "{sent}");
        }
    }

    /// The same when the answer came while the caller worked on the last event handed out:
    /// the timers that wait for the last chunk to be fed fired before a look at the input
    /// that was ready, and the request timed out with its answer in the pipe.
    #[cfg(unix)]
    #[test]
    fn an_answer_that_came_while_the_caller_worked_beats_a_deadline() {
        for on_fd in [false, true] {
            let (reader, mut writer) = std::io::pipe().unwrap();
            let (now, clock) = manual_clock();
            let mut conn = client_with_a_one_second_timeout();
            let mut out = Vec::new();
            let mut io = io_over_pipe(on_fd, &reader, &mut out, clock);
            now.store(20_000_000, Ordering::SeqCst);
            let until = Some(Timestamp::from_nanos(10_000_000));
            assert_eq!(io.next_event(&mut conn, until), Err(Stop::Deadline));
            writer.write_all(INIT_RESULT.as_bytes()).unwrap();
            let event = io.next_event(&mut conn, None);
            assert!(matches!(event, Ok(OwnedEvent::Ready { .. })), "{event:?}");
            // The caller asks, and works on: the answer arrives, and the deadline passes.
            let asked = Timestamp::from_nanos(now.load(Ordering::SeqCst));
            let id = conn.request(asked, "tools/list", None).unwrap();
            writer.write_all(tools_answer(id).as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(100)); // (the reader thread has it)
            now.store(5_000_000_000, Ordering::SeqCst);
            let event = io.next_event(&mut conn, None);
            assert!(
                matches!(event, Ok(OwnedEvent::Response { .. })),
                "on_fd {on_fd}: {event:?}"
            );
        }
    }

    /// An answer queued behind the reader thread's "still there?" chunk (a source left
    /// non-blocking, idle for a second) beats a deadline that passed while the caller worked:
    /// the empty chunk was taken for "nothing ready", the timers fired, and the request timed
    /// out with its answer in the channel.
    #[test]
    fn an_answer_behind_the_readers_empty_chunk_beats_a_deadline() {
        /// A non-blocking source: what the test queued, else `WouldBlock`.
        struct Queue(Arc<std::sync::Mutex<std::collections::VecDeque<Vec<u8>>>>);
        impl Read for Queue {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                match self.0.lock().unwrap().pop_front() {
                    Some(bytes) => {
                        buf[..bytes.len()].copy_from_slice(&bytes);
                        Ok(bytes.len())
                    }
                    None => Err(std::io::ErrorKind::WouldBlock.into()),
                }
            }
        }
        let queue = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let (now, clock) = manual_clock();
        let mut conn = client_with_a_one_second_timeout();
        let mut out = Vec::new();
        let mut io = Io::new(Queue(Arc::clone(&queue)), &mut out, clock);
        now.store(20_000_000, Ordering::SeqCst);
        let until = Some(Timestamp::from_nanos(10_000_000));
        assert_eq!(io.next_event(&mut conn, until), Err(Stop::Deadline));
        queue
            .lock()
            .unwrap()
            .push_back(INIT_RESULT.as_bytes().to_vec());
        let event = io.next_event(&mut conn, None);
        assert!(matches!(event, Ok(OwnedEvent::Ready { .. })), "{event:?}");
        // The caller asks, and works on: the reader, idle for over a second, queues its empty
        // chunk; then the answer comes, and the deadline passes.
        let asked = Timestamp::from_nanos(now.load(Ordering::SeqCst));
        let id = conn.request(asked, "tools/list", None).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        queue
            .lock()
            .unwrap()
            .push_back(tools_answer(id).into_bytes());
        std::thread::sleep(Duration::from_millis(100)); // (the reader thread has it)
        now.store(5_000_000_000, Ordering::SeqCst);
        let event = io.next_event(&mut conn, None);
        assert!(
            matches!(event, Ok(OwnedEvent::Response { .. })),
            "{event:?}"
        );
    }

    /// Input read ahead in several chunks (a reader thread keeps up to [`READ_AHEAD`] of them,
    /// and one more in hand): every chunk read before the timers came due goes in before
    /// they fire. Only one was taken: the answer behind three pings timed out.
    #[test]
    fn an_answer_behind_several_chunks_read_ahead_beats_a_deadline() {
        for on_fd in [false, true] {
            let (reader, mut writer) = std::io::pipe().unwrap();
            let (now, clock) = manual_clock();
            let mut conn = client_with_a_one_second_timeout();
            let mut out = Vec::new();
            let mut io = io_over_pipe(on_fd, &reader, &mut out, clock);
            now.store(20_000_000, Ordering::SeqCst);
            let until = Some(Timestamp::from_nanos(10_000_000));
            assert_eq!(io.next_event(&mut conn, until), Err(Stop::Deadline));
            writer.write_all(INIT_RESULT.as_bytes()).unwrap();
            let event = io.next_event(&mut conn, None);
            assert!(matches!(event, Ok(OwnedEvent::Ready { .. })), "{event:?}");
            let asked = Timestamp::from_nanos(now.load(Ordering::SeqCst));
            let id = conn.request(asked, "tools/list", None).unwrap();
            // Three pings, then the answer, each its own write (and, for the reader thread,
            // its own chunk).
            for n in 0..3 {
                let ping = format!(r#"{{"jsonrpc":"2.0","id":"p{n}","method":"ping"}}"#);
                writer.write_all(format!("{ping}\n").as_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
            writer.write_all(tools_answer(id).as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            now.store(5_000_000_000, Ordering::SeqCst);
            let event = io.next_event(&mut conn, None);
            assert!(
                matches!(event, Ok(OwnedEvent::Response { .. })),
                "on_fd {on_fd}: {event:?}"
            );
        }
    }

    /// A peer that keeps sending cannot hold `run_until` past `until`: `next_event` takes the
    /// input that is ready before it looks at the time, so a caller whose `f` waited for
    /// something else (a CLI waiting for an answer, with a signal to heed between slices)
    /// went on for as long as the notifications came (found by a review of the CLI).
    #[test]
    fn run_until_stops_at_until_while_the_peer_keeps_sending() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let (now, clock) = manual_clock();
        let mut conn = client_with_a_one_second_timeout();
        let mut out = Vec::new();
        let mut io = Io::new(reader, &mut out, clock);
        writer.write_all(INIT_RESULT.as_bytes()).unwrap();
        let event = io.next_event(&mut conn, None);
        assert!(matches!(event, Ok(OwnedEvent::Ready { .. })), "{event:?}");
        let flood =
            r#"{"jsonrpc":"2.0","method":"notifications/custom","params":{}}"#.to_owned() + "\n";
        writer.write_all(flood.repeat(200).as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(100)); // (the reader thread has them)
        let until = Timestamp::from_nanos(now.load(Ordering::SeqCst) + 1_000_000);
        now.fetch_add(2_000_000, Ordering::SeqCst);
        let mut seen = 0;
        let got = io.run_until(&mut conn, Some(until), |_, _, event| {
            assert!(
                matches!(event, OwnedEvent::Notification { .. }),
                "{event:?}"
            );
            seen += 1;
            None::<()>
        });
        assert_eq!(got, Err(Stop::Deadline));
        assert_eq!(seen, 1, "events handed out past until");
        // The rest wait for the next call.
        let next = io.next_event(&mut conn, None);
        assert!(
            matches!(next, Ok(OwnedEvent::Notification { .. })),
            "{next:?}"
        );
    }

    /// A host that polls without waiting (`until` already past) still gets the input that is
    /// ready and the time-outs that are due: it got `Deadline` for good.
    #[test]
    fn an_until_already_past_still_takes_input_and_fires_timers() {
        for on_fd in [false, true] {
            let (reader, mut writer) = std::io::pipe().unwrap();
            let (now, clock) = manual_clock();
            let mut conn = client_with_a_one_second_timeout();
            let mut out = Vec::new();
            let mut io = io_over_pipe(on_fd, &reader, &mut out, clock);
            writer.write_all(INIT_RESULT.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            now.store(20_000_000, Ordering::SeqCst);
            let past = Some(Timestamp::from_nanos(10_000_000));
            let event = io.next_event(&mut conn, past);
            assert!(
                matches!(event, Ok(OwnedEvent::Ready { .. })),
                "on_fd {on_fd}: {event:?}"
            );
            assert_eq!(io.next_event(&mut conn, past), Err(Stop::Deadline));
            let asked = Timestamp::from_nanos(now.load(Ordering::SeqCst));
            let id = conn.request(asked, "tools/list", None).unwrap();
            now.store(5_000_000_000, Ordering::SeqCst);
            let event = io.next_event(&mut conn, past);
            assert_eq!(
                event,
                Ok(OwnedEvent::TimedOut { request: id }),
                "on_fd {on_fd}"
            );
        }
    }

    /// A reader that panics ends the input as a failure: it looked like a clean end.
    #[test]
    fn a_reader_that_panics_is_an_input_error() {
        struct Panics(bool);
        impl Read for Panics {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    panic!("a reader that panics (expected by this test)");
                }
                let line = INIT.as_bytes();
                buf[..line.len()].copy_from_slice(line);
                Ok(line.len())
            }
        }
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let mut io = Io::new(Panics(false), &mut out, clock);
        let mut conn = server();
        loop {
            match io.next_event(&mut conn, None) {
                Err(Stop::Eof) => break,
                Err(Stop::Deadline) => unreachable!(),
                Ok(_) => {}
            }
        }
        let error = io.input_error().expect("the panic is the input's error");
        assert!(error.to_string().contains("panicked"), "{error}");
        assert!(
            String::from_utf8_lossy(&out).contains(r#""id":1"#),
            "what was read before it is answered"
        );
    }

    /// The tap shows what was written, not what a closed output discarded.
    #[test]
    fn the_tap_sees_only_what_was_written() {
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let mut io = Io::new(std::io::Cursor::new(INIT.as_bytes()), &mut out, clock);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        io.set_tap(move |direction, bytes| {
            log.lock().unwrap().push((direction, bytes.len()));
        });
        let mut conn = server();
        let event = io.next_event(&mut conn, None);
        assert!(matches!(event, Ok(OwnedEvent::Ready { .. })), "{event:?}");
        io.flush(&mut conn);
        let sent = |seen: &[(Direction, usize)]| {
            (seen.iter())
                .filter(|(d, _)| *d == Direction::Sent)
                .map(|(_, n)| n)
                .sum::<usize>()
        };
        let before = sent(&seen.lock().unwrap());
        assert!(before > 0, "the initialize result was written and shown");
        io.close_output();
        conn.notify("x/custom", None).unwrap();
        assert!(io.flush(&mut conn), "the engine had bytes");
        assert_eq!(
            sent(&seen.lock().unwrap()),
            before,
            "discarded bytes shown as sent"
        );
        drop(io);
        assert_eq!(out.len(), before);
    }

    #[test]
    fn every_request_before_eof_is_answered_before_eof_is_reported() {
        let input = many_requests();
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let io = Io::new(std::io::Cursor::new(input.into_bytes()), &mut out, clock);
        answer_all(io);
        check_answers(out);
    }

    /// Under lowered limits the pieces shrink: with `max_inbound_in_flight` 64, a 4 KiB piece
    /// held up to 85 of these requests, and those past 64 were refused as too many in flight.
    #[test]
    fn every_request_is_answered_under_a_lowered_in_flight_limit() {
        let mut config = Config::server("s", "1")
            .with_capabilities(r#"{"tools":{}}"#)
            .unwrap();
        config.limits.max_inbound_in_flight = 64;
        assert_eq!(config.limits.input_piece(), 32 * 36);
        assert_eq!(crate::conn::Limits::default().input_piece(), FEED);
        let conn = Connection::new(config, Timestamp::ZERO).unwrap();
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let io = Io::new(
            std::io::Cursor::new(many_requests().into_bytes()),
            &mut out,
            clock,
        );
        answer_all_on(io, conn);
        check_answers(out);
    }

    /// The same through a pipe read on the loop's thread: the writer fills the pipe from a
    /// thread of its own (the requests are more than a pipe holds) and then closes it.
    #[cfg(unix)]
    #[test]
    fn from_fd_answers_every_request_before_eof_too() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let feeder = std::thread::spawn(move || writer.write_all(many_requests().as_bytes()));
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let io = Io::from_fd(&reader, &mut out, clock).unwrap();
        drop(reader); // the loop holds its own duplicate
        answer_all(io);
        feeder.join().unwrap().unwrap();
        check_answers(out);
    }

    /// The output is a pipe its parent left non-blocking, and its reader starts late: writes
    /// meet a full pipe (`WouldBlock`). Every answer must still come out whole, by waiting on
    /// the descriptor (as `stdio` does for stdout) or, for a writer without one, by retrying.
    #[cfg(unix)]
    #[test]
    fn a_non_blocking_output_that_fills_up_loses_no_answer() {
        use std::os::fd::AsRawFd;
        for with_fd in [true, false] {
            let (reader, mut writer) = std::io::pipe().unwrap();
            let feeder = std::thread::spawn(move || writer.write_all(many_requests().as_bytes()));
            let (mut out_reader, out_writer) = std::io::pipe().unwrap();
            // SAFETY: F_GETFL and F_SETFL on an open descriptor.
            unsafe {
                let fd = out_writer.as_raw_fd();
                let flags = libc::fcntl(fd, libc::F_GETFL);
                assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
            }
            let drain = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                let mut got = Vec::new();
                out_reader.read_to_end(&mut got).unwrap();
                got
            });
            let (_, clock) = manual_clock();
            let fd = out_writer.as_raw_fd();
            let mut io = Io::from_fd(&reader, out_writer, clock).unwrap();
            if with_fd {
                io.output_fd = Some(fd);
            }
            drop(reader);
            answer_all(io); // (drops the writer, so the drain ends)
            feeder.join().unwrap().unwrap();
            check_answers(drain.join().unwrap());
        }
    }

    /// Requests read together whose answers add up to more than the output bound all get
    /// them: the output is written ahead of the next event once it passes the high-water
    /// mark. Before, every event of one read was handed out first, and the answers after the
    /// bound's worth failed `OutputFull` with the client reading all along (found by an
    /// audit of the stdio hosts).
    #[test]
    fn answers_adding_up_past_the_output_bound_all_get_out() {
        let mut input = INIT.to_owned();
        for i in 0..40 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}}\n",
                i + 2
            ));
        }
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let mut io = Io::new(std::io::Cursor::new(input.into_bytes()), &mut out, clock);
        let mut config = Config::server("s", "1")
            .with_capabilities(r#"{"tools":{}}"#)
            .unwrap();
        config.limits.max_buffered_output = 1 << 20;
        let mut conn = Connection::new(config, Timestamp::ZERO).unwrap();
        // Each answer is 100 KiB: forty of them are four times the bound.
        let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(100 * 1024));
        let mut failed = 0;
        loop {
            match io.next_event(&mut conn, None) {
                Ok(OwnedEvent::Request { id, .. }) => {
                    if conn
                        .respond(id.as_id(), crate::jsonrpc::RawJson::new(&big).unwrap())
                        .is_err()
                    {
                        failed += 1;
                    }
                }
                Ok(_) => {}
                Err(Stop::Eof) => break,
                Err(Stop::Deadline) => panic!("no deadline was set"),
            }
        }
        drop(io);
        assert_eq!(failed, 0, "answers refused for a full output");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().filter(|l| l.contains("xxxx")).count(), 40);
    }

    /// Answers every request with `{}` until EOF.
    fn answer_all<W: Write>(io: Io<W>) {
        answer_all_on(io, server());
    }

    /// [`answer_all`] on `conn`.
    fn answer_all_on<W: Write>(mut io: Io<W>, mut conn: Connection) {
        loop {
            match io.next_event(&mut conn, None) {
                Ok(OwnedEvent::Request { id, .. }) => {
                    conn.respond(id.as_id(), crate::jsonrpc::RawJson::new("{}").unwrap())
                        .unwrap();
                }
                Ok(_) => {}
                Err(Stop::Eof) => break,
                Err(Stop::Deadline) => panic!("no deadline was set"),
            }
        }
        assert_eq!(io.next_event(&mut conn, None), Err(Stop::Eof), "standing");
    }

    /// A reader that hands out `data`, then fails with `ConnectionReset`.
    struct ResetAfter(std::io::Cursor<Vec<u8>>);

    impl Read for ResetAfter {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(std::io::ErrorKind::ConnectionReset.into()),
                n => Ok(n),
            }
        }
    }

    /// A read that fails ends the input as its end does (what was read before is answered),
    /// and `input_error` tells it from a clean end: it was taken for one, and the host could
    /// not tell a reset peer from one that had finished. Both ways of reading.
    #[test]
    fn a_failed_read_ends_the_input_and_says_why() {
        let input = format!("{INIT}{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}}\n");
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let mut io = Io::new(
            ResetAfter(std::io::Cursor::new(input.into_bytes())),
            &mut out,
            clock,
        );
        let mut conn = server();
        loop {
            match io.next_event(&mut conn, None) {
                Ok(OwnedEvent::Request { id, .. }) => {
                    conn.respond(id.as_id(), crate::jsonrpc::RawJson::new("{}").unwrap())
                        .unwrap();
                }
                Ok(_) => {}
                Err(Stop::Eof) => break,
                Err(Stop::Deadline) => panic!("no deadline was set"),
            }
        }
        let kind = io.input_error().map(std::io::Error::kind);
        assert_eq!(kind, Some(std::io::ErrorKind::ConnectionReset));
        drop(io);
        assert!(
            String::from_utf8(out).unwrap().contains("\"id\":2"),
            "answered first"
        );

        // A clean end has none.
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let mut io = Io::new(
            std::io::Cursor::new(INIT.as_bytes().to_vec()),
            &mut out,
            clock,
        );
        let mut conn = server();
        while io.next_event(&mut conn, None).is_ok() {}
        assert!(io.input_error().is_none());

        // On the loop's thread: a descriptor whose reads fail (a directory's: EISDIR).
        #[cfg(unix)]
        {
            let dir = std::fs::File::open("/").unwrap();
            let (_, clock) = manual_clock();
            let mut out = Vec::new();
            let mut io = Io::from_fd(&dir, &mut out, clock).unwrap();
            let mut conn = server();
            while io.next_event(&mut conn, None).is_ok() {}
            assert!(
                io.input_error().is_some(),
                "a failed read on the descriptor"
            );
        }
    }

    /// A last request without its newline is answered, and then the connection closes:
    /// `Closed` comes before `Stop::Eof`. It never came, and the connection stayed open.
    #[test]
    fn a_last_line_without_its_newline_is_answered_and_then_closed_is_handed_out() {
        let input = format!("{INIT}{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}}");
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        let mut io = Io::new(std::io::Cursor::new(input.into_bytes()), &mut out, clock);
        let mut conn = server();
        let mut seen = Vec::new();
        loop {
            match io.next_event(&mut conn, None) {
                Ok(OwnedEvent::Request { id, .. }) => {
                    seen.push("request");
                    conn.respond(id.as_id(), crate::jsonrpc::RawJson::new("{}").unwrap())
                        .unwrap();
                }
                Ok(OwnedEvent::Closed { .. }) => seen.push("closed"),
                Ok(_) => {}
                Err(Stop::Eof) => break,
                Err(Stop::Deadline) => panic!("no deadline was set"),
            }
        }
        assert_eq!(seen, ["request", "closed"]);
        assert_eq!(conn.state(), crate::conn::State::Closed);
        assert_eq!(io.next_event(&mut conn, None), Err(Stop::Eof), "standing");
        drop(io);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""id":2,"result":{}"#), "{text}");
    }

    /// A source that has nothing yet (`WouldBlock`, as a non-blocking socket says) has not
    /// ended: its later requests are answered. The reader thread took it for the end, and the
    /// connection closed at once.
    #[test]
    fn a_read_that_would_block_is_not_the_end_of_input() {
        struct Slow {
            input: std::io::Cursor<Vec<u8>>,
            calls: usize,
        }
        impl Read for Slow {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.calls += 1;
                if !self.calls.is_multiple_of(3) {
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                // A line at a time, so that every line follows a `WouldBlock`.
                let rest = &self.input.get_ref()[self.input.position() as usize..];
                let line = rest
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(rest.len(), |i| i + 1);
                let n = line.min(buf.len());
                self.input.read(&mut buf[..n])
            }
        }
        let mut input = INIT.to_owned();
        for id in 2..12 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n"
            ));
        }
        let slow = Slow {
            input: std::io::Cursor::new(input.into_bytes()),
            calls: 0,
        };
        let (_, clock) = manual_clock();
        let mut out = Vec::new();
        answer_all(Io::new(slow, &mut out, clock));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().filter(|l| l.contains("\"result\":{}")).count(),
            10,
            "{text}"
        );
    }

    /// The initialize result and 3,000 answers, each whole.
    fn check_answers(out: Vec<u8>) {
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with('\n'), "no half line at the end");
        let answers = text.lines().filter(|l| l.contains("\"result\":{}")).count();
        assert_eq!(answers, 3000);
        assert_eq!(text.lines().count(), 3001);
    }

    /// An application that answers and then closes at once gets `Closed` from the next call,
    /// and usually stops there: the answer has been written by then.
    #[test]
    fn the_answer_before_a_close_is_written_before_closed_is_handed_out() {
        let (_, clock) = manual_clock();
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer
            .write_all(
                format!("{INIT}{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}}\n")
                    .as_bytes(),
            )
            .unwrap();
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut io = Io::new(reader, SharedOut(Arc::clone(&out)), clock);
        let mut conn = server();
        loop {
            match io.next_event(&mut conn, None) {
                Ok(OwnedEvent::Request { id, .. }) => {
                    conn.respond(id.as_id(), crate::jsonrpc::RawJson::new("{}").unwrap())
                        .unwrap();
                    conn.close(Timestamp::ZERO, Duration::ZERO);
                }
                Ok(OwnedEvent::Closed { .. }) => break,
                Ok(_) => {}
                Err(e) => panic!("{e:?} before Closed"),
            }
        }
        let written = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert!(written.contains(r#""id":7,"result":{}"#), "{written}");
        drop(writer);
    }

    /// A writer whose bytes the test can still read after the `Io` keeps it.
    struct SharedOut(Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for SharedOut {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// `event_time` is the time read for the input whose events are handed out: the events
    /// of one read share it while the clock moves on, and a deadline reports the time that
    /// found it due.
    #[test]
    fn event_time_is_read_once_per_batch() {
        let (now, clock) = manual_clock();
        let mut input = INIT.to_owned();
        for id in 2..5 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n"
            ));
        }
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(input.as_bytes()).unwrap();
        let mut io = Io::new(reader, Vec::new(), clock);
        let mut conn = server();
        assert_eq!(io.event_time(), Timestamp::ZERO);
        now.store(7_000_000, Ordering::SeqCst);
        let mut requests = 0;
        while requests < 3 {
            if let OwnedEvent::Request { id, .. } = io.next_event(&mut conn, None).unwrap() {
                requests += 1;
                assert_eq!(io.event_time(), Timestamp::from_millis(7), "request {id:?}");
                conn.respond(id.as_id(), crate::jsonrpc::RawJson::new("{}").unwrap())
                    .unwrap();
                now.fetch_add(1_000_000, Ordering::SeqCst); // the clock moves on
                assert!(io.now() > io.event_time());
            }
        }
        assert_eq!(
            io.next_event(&mut conn, Some(Timestamp::from_millis(10))),
            Err(Stop::Deadline)
        );
        assert_eq!(io.event_time(), Timestamp::from_millis(10));
    }

    #[test]
    fn until_returns_deadline_without_input_and_the_tap_sees_both_ways() {
        let (now, clock) = manual_clock();
        let mut conn = server();
        // An input that stays open: the read end of a pipe whose writer the test keeps.
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(INIT.as_bytes()).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen_by_tap = Arc::clone(&seen);
        let mut io = Io::new(reader, Vec::new(), clock);
        io.set_tap(move |dir, bytes| seen_by_tap.lock().unwrap().push((dir, bytes.to_vec())));
        match io.next_event(&mut conn, None) {
            Ok(OwnedEvent::Ready { .. }) => {}
            other => panic!("expected Ready, got {other:?}"),
        }
        // The answer to initialize waits until the events are drained, or a flush.
        assert!(io.flush(&mut conn));
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen[0].0, Direction::Received);
        let sent: Vec<u8> = seen
            .iter()
            .filter(|(d, _)| *d == Direction::Sent)
            .flat_map(|(_, b)| b.clone())
            .collect();
        assert!(
            String::from_utf8(sent)
                .unwrap()
                .contains("\"protocolVersion\":\"2025-11-25\"")
        );
        // Nothing more arrives: the call returns at `until`, not before and without EOF.
        now.store(5_000_000, Ordering::SeqCst);
        assert_eq!(
            io.next_event(&mut conn, Some(Timestamp::from_millis(5))),
            Err(Stop::Deadline)
        );
        assert!(!io.is_eof());
        drop(writer);
        assert_eq!(
            io.next_event(&mut conn, None).map(|_| ()),
            Ok(()),
            "Closed after EOF"
        );
        assert_eq!(io.next_event(&mut conn, None), Err(Stop::Eof));
    }

    /// On a descriptor the loop waits in poll(2): it returns at `until` (not before) while the
    /// input stays open, sees what the tap sees, and reports the end once the writer closes.
    #[cfg(unix)]
    #[test]
    #[allow(clippy::disallowed_methods)] // a real clock: poll(2) waits real time
    fn from_fd_waits_for_until_and_then_for_the_end() {
        let start = std::time::Instant::now();
        let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
        let mut conn = server();
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(INIT.as_bytes()).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen_by_tap = Arc::clone(&seen);
        let mut io = Io::from_fd(reader, Vec::new(), clock).unwrap();
        io.set_tap(move |dir, bytes| seen_by_tap.lock().unwrap().push((dir, bytes.to_vec())));
        match io.next_event(&mut conn, None) {
            Ok(OwnedEvent::Ready { .. }) => {}
            other => panic!("expected Ready, got {other:?}"),
        }
        assert!(io.flush(&mut conn));
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen[0], (Direction::Received, INIT.as_bytes().to_vec()));
            assert!(seen.iter().any(|(d, _)| *d == Direction::Sent));
        }
        let until = io.now().as_nanos() + 30_000_000;
        assert_eq!(
            io.next_event(&mut conn, Some(Timestamp::from_nanos(until))),
            Err(Stop::Deadline)
        );
        assert!(io.now().as_nanos() >= until, "returned before `until`");
        assert!(!io.is_eof());
        drop(writer);
        assert!(
            matches!(
                io.next_event(&mut conn, None),
                Ok(OwnedEvent::Closed { .. })
            ),
            "Closed after EOF"
        );
        assert_eq!(io.next_event(&mut conn, None), Err(Stop::Eof));
    }

    /// A writer whose peer has gone.
    struct Gone;
    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_closes_the_output_and_the_engine_never_stalls() {
        let (_, clock) = manual_clock();
        let mut conn = server();
        let mut io = Io::new(std::io::Cursor::new(INIT.as_bytes().to_vec()), Gone, clock);
        let mut events = 0;
        while io.next_event(&mut conn, None).is_ok() {
            events += 1;
        }
        assert!(events >= 2, "Ready and Closed still arrive");
        assert_eq!(
            io.output_error().map(std::io::Error::kind),
            Some(std::io::ErrorKind::BrokenPipe)
        );
        assert!(
            conn.poll_transmit().is_none(),
            "the answer was consumed, not left queued"
        );
    }
}
