//! A [`Connection`] driven over any byte stream on tokio: stdio, a pipe, a TCP or Unix
//! socket, or a child process's stdin and stdout ([`spawn`]).
//!
//! [`Driver`] owns the connection and the two halves of the stream. Ask it for the next event
//! with [`next_event`](Driver::next_event), issue commands on
//! [`connection`](Driver::connection) (their output goes out on the next `next_event`), and
//! end with [`close`](Driver::close) and more `next_event` calls until `None`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mcpwire::{Config, OwnedEvent};
//! use mcpwire::jsonrpc::RawJson;
//! use mcpwire_tokio::stdio::Driver;
//!
//! let config = Config::server("demo", "1.0").with_capabilities(r#"{"tools":{}}"#).unwrap();
//! let (stdin, stdout) = (mcpwire_tokio::stdio::stdin(), mcpwire_tokio::stdio::stdout());
//! let mut driver = Driver::new(config, stdin, stdout).unwrap();
//! while let Some(event) = driver.next_event().await? {
//!     if let OwnedEvent::Request { id, .. } = event {
//!         let tools = RawJson::new(r#"{"tools":[]}"#).unwrap();
//!         let _ = driver.connection().respond(id.as_id(), tools);
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Properties:
//!
//! - **Backpressure.** Input is fed to the engine 4 KiB at a time (less under lowered limits,
//!   as [`Limits::input_piece`](mcpwire::conn::Limits::input_piece) says), with the answers
//!   written in between, so pipelined requests are all answered. While a write waits (the
//!   peer is not reading), the driver goes on reading only as long as its output holds less
//!   than half of `Limits::max_buffered_output`; past that it stops reading, so a peer that
//!   reads slowly slows its own requests down, and memory stays bounded.
//! - **No deadlock with a half-duplex peer.** A peer that reads only between its own writes
//!   (as `mcpwire serve`, Go's `Serve` and many hand-written servers do) can block writing to
//!   us while we block writing to it. While its write or flush waits, the driver feeds the
//!   rest of its last read and reads more, so the two cannot wait for each other for good,
//!   whatever the sizes pipelined both ways (below the bound above).
//! - **Nothing accepted is lost.** At end of input every answer already given is written
//!   before `next_event` returns `None`. Input already read is fed before the timers fire,
//!   so an answer that arrived while the driver was late is taken, not timed out.
//! - **A peer that goes away is heard out.** When a write fails with a broken pipe or a reset
//!   (the peer exited), nothing more is written, and the input is read to its end: the
//!   events of what the peer said last and the close come first, then that write error.
//! - **Timers run while a write waits.** A request's timeout or the end of a close's grace
//!   that comes while a write is blocked (the peer is not reading) is handled, and its
//!   events are handed out; the write then goes on.
//! - **Cancellation-safe.** Dropping a `next_event` future (in a `select!` with your own
//!   shutdown signal, say) loses nothing: bytes are consumed from the engine only once
//!   written, and input only once read.
//! - **Answers leave in batches.** The answers to one read's requests are written together:
//!   as soon as 4 KiB of them are waiting (unless a write waits: then input goes in
//!   first, as above), and before the driver waits for input or a
//!   deadline (and before it reports the end), when the writer is also flushed. A peer that
//!   pipelines requests gets them in a few writes instead of one per answer (about 0.7 µs of
//!   CPU per request against 1.2 with 128 in flight, in `mcpwire serve --tokio`). So an answer
//!   can wait for the other requests of its read to be handled: do slow work on another task,
//!   or call [`write_pending`](Driver::write_pending) before doing it inline.
//!   `tokio::io::stdout`'s flush waits for a thread of the blocking pool, which is why the
//!   writer is flushed only before a wait.
//! - **No copies beyond the kernel's.** The engine lends its output buffer to `write`, and
//!   reads land in one reused buffer; `bytes::Bytes` would add nothing here (it pays off when
//!   a buffer is shared between tasks, which this loop never does).

use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};
use std::time::Duration;

use mcpwire::conn::{Config, ConfigError, State};
use mcpwire::{Connection, OwnedEvent, Timestamp};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Output is written once this much of it waits, or before the driver waits (see the module
/// docs). Against `loadgen stdio` at 32 in flight, 1 KiB and 2 KiB wrote more often for no
/// more throughput; one write per answer cost 1.4 µs of CPU per request against 0.85.
const WRITE_AT: usize = 4096;

/// This process's standard input, for a [`Driver`] of a server on stdio: what [`stdin`]
/// returns.
///
/// On Linux it waits for input with tokio's reactor and reads on the task's own thread, where
/// `tokio::io::stdin` hands every read to the blocking thread pool and back (two thread
/// wake-ups per read). The parent's descriptor is left as it was: a pipe, FIFO or terminal is
/// opened again through `/proc/self/fd/0`, which makes an open file description of our own to
/// set non-blocking, and a socket is read with per-call `MSG_DONTWAIT`. Anything else (a
/// regular file, `/dev/null`), other systems, and calls outside a tokio runtime use
/// `tokio::io::stdin`. Its read cannot be cancelled: a server that closes while the read
/// waits (on a signal, say) then has a runtime whose shutdown waits for input. There, end
/// with `std::process::exit` once [`Driver::next_event`] returned `None` (see
/// [`Stdin::is_polled`]).
#[derive(Debug)]
pub struct Stdin(Input);

#[derive(Debug)]
enum Input {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    Polled(crate::fdio::PolledFd),
    Pool(tokio::io::Stdin),
}

/// This process's standard output, for a [`Driver`] of a server on stdio: what [`stdout`]
/// returns. Written like [`Stdin`] is read: through the reactor where it can be (a pipe or
/// terminal opened again through `/proc/self/fd/1`, a socket with per-call `MSG_DONTWAIT`),
/// else `tokio::io::stdout`. On the reactor every write reaches the descriptor at once, so
/// flushing has nothing to do.
#[derive(Debug)]
pub struct Stdout(Output);

#[derive(Debug)]
enum Output {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    Polled(crate::fdio::PolledFd),
    Pool(tokio::io::Stdout),
}

/// Standard input for [`Driver::new`]: use it instead of `tokio::io::stdin()` when serving
/// on stdio (see [`Stdin`] for what it does differently). Call it inside the runtime, once:
/// each call opens a descriptor of its own.
///
/// # Panics
/// Inside a tokio runtime built without IO (`Builder::enable_io`), like tokio's socket
/// types. `#[tokio::main]` enables it.
pub fn stdin() -> Stdin {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::AsFd;
        if let Some(fd) = crate::fdio::PolledFd::new(io::stdin().as_fd(), false) {
            return Stdin(Input::Polled(fd));
        }
    }
    Stdin(Input::Pool(tokio::io::stdin()))
}

/// Standard output for [`Driver::new`]: use it instead of `tokio::io::stdout()` when serving
/// on stdio (see [`Stdout`]). Call it inside the runtime, once.
///
/// # Panics
/// Inside a tokio runtime built without IO, as [`stdin`].
pub fn stdout() -> Stdout {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::AsFd;
        if let Some(fd) = crate::fdio::PolledFd::new(io::stdout().as_fd(), true) {
            return Stdout(Output::Polled(fd));
        }
    }
    Stdout(Output::Pool(tokio::io::stdout()))
}

impl Stdin {
    /// Whether reads wait on the reactor (`true`) or go through tokio's blocking pool.
    /// Both behave the same apart from speed, and the end of a runtime while a pool read
    /// waits (see [`Stdin`]).
    pub fn is_polled(&self) -> bool {
        !matches!(self.0, Input::Pool(_))
    }
}

impl Stdout {
    /// Whether writes wait on the reactor (`true`) or go through tokio's blocking pool.
    pub fn is_polled(&self) -> bool {
        !matches!(self.0, Output::Pool(_))
    }
}

impl AsyncRead for Stdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            Input::Polled(fd) => fd.poll_read(cx, buf),
            Input::Pool(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            Output::Polled(fd) => fd.poll_write(cx, bytes),
            Output::Pool(stdout) => Pin::new(stdout).poll_write(cx, bytes),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            Output::Polled(_) => Poll::Ready(Ok(())),
            Output::Pool(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            Output::Polled(_) => Poll::Ready(Ok(())),
            Output::Pool(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}

/// A [`Connection`] over a reader and a writer. See the [module docs](self).
pub struct Driver<R, W> {
    conn: Connection,
    reader: R,
    writer: W,
    /// On tokio's clock, so that a runtime with paused time (a test) sees the engine's
    /// deadlines pass when its sleeps end (on the system clock it spun until they did).
    start: tokio::time::Instant,
    /// One read's bytes, and how many the engine has had.
    buf: Vec<u8>,
    filled: usize,
    fed: usize,
    /// How much of it the engine gets at a time (`Limits::input_piece`).
    feed: usize,
    eof: bool,
    /// The engine has been told of the end of the input (`handle_eof`).
    eof_fed: bool,
    /// Bytes were written since the writer was last flushed.
    unflushed: bool,
    /// The time the driver last read (see [`event_time`](Self::event_time)).
    read_at: Timestamp,
    /// The error returned after the close: a write error that showed the peer stopped reading
    /// (a broken pipe, a reset: nothing more is written, the input is read to its end), or a
    /// read error (the input ends there). `None` once returned.
    broken: Option<io::Error>,
    /// Whether the peer stopped reading (`broken` stays set until it is returned).
    gone: bool,
    /// A write waited with input to feed (read while it waited, or left from the last
    /// read): that input is fed before the write goes on, while the output has room for its
    /// answers (see [`write_until_due`](Self::write_until_due)). Cleared once a write
    /// completes.
    feed_first: bool,
    /// The timers wait for the chunk just read: an answer already here is not timed out
    /// because the loop came late to it (they fire once it is fed).
    timers_after_feed: bool,
    /// Before those timers fire, input that is ready was looked for once (one more read, so
    /// that input that keeps coming cannot hold the timers off).
    looked_before_timers: bool,
}

/// How [`Driver::write_until_due`] ended.
enum Wrote {
    /// Everything the engine had is written.
    All,
    /// One of the engine's deadlines came first and was handled.
    Due,
    /// Input came first and was read (into the driver's buffer, or its end noted).
    Read,
}

/// Writes everything `conn` has to send to `writer`. The writer is flushed only before the
/// driver waits (see `Driver::flush_until_due`): a writer that buffers, such as
/// `tokio::io::stdout`, whose flush waits for a thread of the blocking pool, would otherwise
/// pay that wait for every answer. Cancel-safe: bytes leave the engine only once written.
async fn write_all_out<W: AsyncWrite + Unpin>(
    conn: &mut Connection,
    writer: &mut W,
    unflushed: &mut bool,
) -> io::Result<()> {
    while let Some(t) = conn.poll_transmit() {
        match writer.write(t.bytes).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => conn.consume_transmit(n),
        }
        *unflushed = true;
    }
    Ok(())
}

/// The bytes `conn` has to send.
fn pending_output(conn: &Connection) -> usize {
    conn.poll_transmit().map_or(0, |t| t.bytes.len())
}

/// Whether a write error means that the peer stopped reading (it exited, or closed its end).
fn peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Driver<R, W> {
    /// A driver for a new connection from `config` (a client queues its first request at
    /// once), reading from `reader` and writing to `writer`.
    pub fn new(config: Config, reader: R, writer: W) -> Result<Self, ConfigError> {
        let start = tokio::time::Instant::now();
        let feed = config.limits.input_piece();
        Ok(Driver {
            conn: Connection::new(config, Timestamp::ZERO)?,
            reader,
            writer,
            start,
            buf: vec![0; 64 * 1024],
            filled: 0,
            fed: 0,
            feed,
            eof: false,
            eof_fed: false,
            unflushed: false,
            read_at: Timestamp::ZERO,
            broken: None,
            gone: false,
            feed_first: false,
            timers_after_feed: false,
            looked_before_timers: false,
        })
    }

    /// The connection, for commands (`request`, `respond`, `notify`, ...). Their output is
    /// written by [`next_event`](Self::next_event) with the rest of its batch, or at once by
    /// [`write_pending`](Self::write_pending).
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The engine's clock: time since the driver was made. Pass it to commands that take a
    /// `now`.
    pub fn now(&self) -> Timestamp {
        Timestamp::ZERO.after(self.start.elapsed())
    }

    /// The time the driver read from its clock last: when it fed the input, or handled the
    /// deadline, whose events [`next_event`](Self::next_event) is handing out. Use it as
    /// `now` for the commands that answer those events: it costs no clock read, where
    /// [`now`](Self::now) reads the clock on every call (a stdio server spent about 7% of its
    /// time there at one call per event). It is older than `now()` by the time spent since
    /// that read, which is the time spent on the batch so far unless the application did slow
    /// work between two `next_event` calls; use `now()` after such work.
    pub fn event_time(&self) -> Timestamp {
        self.read_at
    }

    /// Reads the clock and remembers the time for [`event_time`](Self::event_time).
    fn read_clock(&mut self) -> Timestamp {
        self.read_at = self.now();
        self.read_at
    }

    /// Begins a graceful close: the requests in flight either way get `grace` to be answered
    /// (ours by the peer, the peer's by the application, which goes on answering them), and
    /// the close ends as soon as none is left; when the grace runs out first, the peer's still
    /// unanswered get an error (-32603) and the connection closes. Keep calling
    /// [`next_event`](Self::next_event) until `None`.
    pub fn close(&mut self, grace: Duration) {
        let now = self.now();
        self.conn.close(now, grace);
    }

    /// A write error: the peer stopped reading (see [`next_event`](Self::next_event)), noted
    /// for later, or any other, returned.
    fn left(&mut self, e: io::Error) -> io::Result<()> {
        if !peer_gone(&e) {
            return Err(e);
        }
        self.gone = true;
        self.broken = Some(e);
        Ok(())
    }

    /// Whether input may be read while a write waits: the last read is all fed, the input
    /// has not ended, and the output holds less than half of the engine's bound
    /// (`Limits::max_buffered_output`), so that the answers to what is read still fit. Past
    /// that, the driver stops reading until the peer reads (backpressure).
    fn may_read_ahead(&self) -> bool {
        // Once closed, what is read is dropped: it adds no answers.
        let room =
            self.conn.state() == State::Closed || self.room_for_answers(pending_output(&self.conn));
        !self.eof && self.fed >= self.filled && room
    }

    /// Whether an output of `out` bytes leaves room for the answers to more input: less than
    /// half of the engine's bound.
    fn room_for_answers(&self, out: usize) -> bool {
        out < self.conn.config().limits.max_buffered_output / 2
    }

    /// Writes everything the engine has to send (nothing once the peer has stopped reading:
    /// see [`next_event`](Self::next_event)), unless one of the engine's deadlines comes first (a
    /// request's timeout, the end of a close's grace), or input arrives while the write
    /// waits ([`may_read_ahead`](Self::may_read_ahead)). A deadline is handled then; input
    /// is read and fed before the write goes on. A peer that stops reading thus cannot hold
    /// the timers up, and a peer that reads only between its own writes (a half-duplex
    /// server, blocked writing to us) is read from, so the two cannot wait for each other
    /// for good. Cancel-safe, as the write is, and as a read is.
    async fn write_until_due(&mut self) -> io::Result<Wrote> {
        self.output_until_due(false).await
    }

    /// [`write_until_due`](Self::write_until_due) for the writer's flush, which waits for
    /// the peer as a write does (`tokio::io::stdout`'s flush waits for the write its thread
    /// is doing; a `BufWriter`'s writes its buffer).
    async fn flush_until_due(&mut self) -> io::Result<Wrote> {
        if !self.unflushed {
            return Ok(Wrote::All);
        }
        self.output_until_due(true).await
    }

    /// The write (or, with `flush`, the flush) of [`write_until_due`](Self::write_until_due).
    /// When it waits, what comes first is handled: a deadline, input read (while the last
    /// read is all fed), or the rest of the last read, fed first (see
    /// [`feed_first`](Self::feed_first)) while the output has room for its answers.
    async fn output_until_due(&mut self, flush: bool) -> io::Result<Wrote> {
        if self.gone {
            return Ok(Wrote::All);
        }
        let wait = self
            .conn
            .poll_timeout()
            .map(|at| Duration::from_nanos(at.as_nanos().saturating_sub(self.now().as_nanos())));
        let read_too = self.may_read_ahead();
        let feed_too = self.fed < self.filled && self.room_for_answers(pending_output(&self.conn));
        let Driver {
            conn,
            writer,
            reader,
            buf,
            unflushed,
            ..
        } = self;
        let output = async {
            if flush {
                writer.flush().await?;
                *unflushed = false;
                Ok(())
            } else {
                write_all_out(conn, writer, unflushed).await
            }
        };
        let outcome = tokio::select! {
            biased;
            done = output => Ok(done),
            // Input before the deadline: an answer already here is fed before the timers
            // fire (`timers_after_feed`), not timed out.
            read = reader.read(buf), if read_too => Err(Some(read)),
            // (Not while input read is still to feed: it goes in first, as above.)
            () = sleep_for(wait), if !feed_too => Err(None),
            // Only when the output waits (the arms above are polled first): the peer may be
            // blocked writing what we have yet to feed.
            () = std::future::ready(()), if feed_too => {
                self.feed_first = true;
                return Ok(Wrote::Read);
            }
        };
        match outcome {
            Ok(Ok(())) => {
                self.feed_first = false;
                Ok(Wrote::All)
            }
            Ok(Err(e)) => self.left(e).map(|()| Wrote::All),
            Err(None) => {
                let now = self.read_clock();
                self.conn.handle_timeout(now);
                Ok(Wrote::Due)
            }
            Err(Some(read)) => {
                self.took_read(read);
                self.feed_first = true;
                Ok(Wrote::Read)
            }
        }
    }

    /// Notes a read: bytes, the input's end, or an error, which ends the input as its end
    /// does and is kept to be returned in place of the first `None`, once the answers given
    /// so far are written (returned at once, it lost them). Once closed, nothing more is
    /// heard: a failing input then only ends the reading.
    fn took_read(&mut self, read: io::Result<usize>) {
        match ended_by_reset(read) {
            Ok(n) => self.took_input(n),
            Err(e) => {
                self.eof = true;
                if self.conn.state() != State::Closed && self.broken.is_none() {
                    self.broken = Some(e);
                }
            }
        }
    }

    /// Notes a read of `n` bytes into the buffer (0: the input ended; the engine hears of it
    /// once everything before it is fed and its events are handed out).
    fn took_input(&mut self, n: usize) {
        if n == 0 {
            self.eof = true;
        } else {
            self.filled = n;
            self.fed = 0;
            self.timers_after_feed = true;
        }
    }

    /// Writes and flushes every answer and message given so far, now rather than with the
    /// rest of the batch (see the module docs): call it before slow work done between two
    /// [`next_event`](Self::next_event) calls, so that the answers already given are not held
    /// up by it.
    ///
    /// While the write waits it behaves as `next_event` does: it reads and feeds the peer's
    /// input (within the same bound) and fires the deadlines that come, so a half-duplex peer
    /// blocked writing to us cannot hold it up for good. The events of what it fed and fired
    /// wait for the next `next_event`. It returns early, with the rest left for `next_event`,
    /// when a deadline stays due until those events are handed out, and when the engine
    /// could not take another piece of input without refusing requests as too many in
    /// flight, or dropping events, before the application has seen them.
    pub async fn write_pending(&mut self) -> io::Result<()> {
        loop {
            let wrote = match self.write_until_due().await? {
                Wrote::All => self.flush_until_due().await?,
                other => other,
            };
            match wrote {
                Wrote::All => return Ok(()),
                Wrote::Read if self.room_for_a_piece() => self.feed_piece(),
                Wrote::Read => return Ok(()),
                Wrote::Due => {
                    let now = self.now();
                    if self.conn.poll_timeout().is_some_and(|at| at <= now) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Whether the engine takes one more piece of input ([`Limits::input_piece`]) with none
    /// of its events handed out: room for as many more requests in flight and queued events
    /// as the piece can hold (the shortest message, a notification with a one-letter method,
    /// takes 31 bytes with its line end).
    ///
    /// [`Limits::input_piece`]: mcpwire::conn::Limits::input_piece
    fn room_for_a_piece(&self) -> bool {
        let limits = &self.conn.config().limits;
        // (One more: a message split across two pieces ends in the second.)
        let most = self.feed / 31 + 1;
        self.conn.peer_requests_in_flight() + most <= limits.max_inbound_in_flight
            && self.conn.pending_events() + most <= limits.max_queued_events
    }

    /// Feeds the next piece of the last read, if any is left.
    fn feed_piece(&mut self) {
        if self.fed < self.filled {
            let end = (self.fed + self.feed).min(self.filled);
            let now = self.read_clock();
            self.conn.handle_input(now, &self.buf[self.fed..end]);
            self.fed = end;
        }
    }

    /// The next event, or `None` once the connection has closed and its output is written.
    /// A write error is returned as it is, but one: when the peer stops reading (a write fails
    /// with a broken pipe or a reset: the process at the other end exited), nothing more is
    /// written and the input is read to its end, so that the events of what the peer said
    /// last, and the close, are still handed out; the write error comes after them, once, in
    /// place of the first `None`. A read error ends the input as its end does (a reset is
    /// taken for the end): the answers given are written, the close comes, and the error is
    /// returned once in place of the first `None`.
    pub async fn next_event(&mut self) -> io::Result<Option<OwnedEvent>> {
        loop {
            // Output first, once there is enough of it: commands issued since the last call,
            // then what input produced. (Input read while a write waited goes in first,
            // while the output has room for its answers.)
            let out = pending_output(&self.conn);
            let feed_first =
                self.feed_first && self.fed < self.filled && self.room_for_answers(out);
            if out >= WRITE_AT && !feed_first {
                match self.write_until_due().await? {
                    Wrote::All => {}
                    // A deadline came first: its events go out before the write goes on.
                    Wrote::Due => {
                        if let Some(event) = self.conn.poll_event() {
                            return Ok(Some(event.to_owned_event()));
                        }
                        continue;
                    }
                    Wrote::Read => continue,
                }
            }
            if let Some(event) = self.conn.poll_event() {
                return Ok(Some(event.to_owned_event()));
            }
            if self.conn.state() == State::Closed {
                // Whatever the peer still says is of no use now, but it is read (and
                // dropped) while the last write and flush wait, so that a peer writing to
                // us cannot hold them up.
                self.fed = self.filled;
                while !matches!(self.write_until_due().await?, Wrote::All) {
                    self.fed = self.filled;
                }
                while !matches!(self.flush_until_due().await?, Wrote::All) {
                    self.fed = self.filled;
                }
                if let Some(e) = self.broken.take() {
                    return Err(e);
                }
                return Ok(None);
            }
            // The rest of the last read, a piece at a time.
            if self.fed < self.filled {
                self.feed_piece();
                continue;
            }
            if self.timers_after_feed {
                // Input that came while the application worked on the events handed out
                // (the answer to a request whose deadline passed meanwhile, say) goes in
                // before the timers fire: what is ready now is read, once, when a timer is
                // due (otherwise there is nothing to lose, and no read to try).
                let now = self.read_clock();
                let due = self.conn.poll_timeout().is_some_and(|at| at <= now);
                if due && !self.looked_before_timers && self.may_read_ahead() {
                    // The reactor looks at the descriptors first: it has not run while the
                    // application held the thread, and a pipe's readiness is cleared after a
                    // short read (tokio's `ChildStdout`), so the reader alone would say
                    // "nothing yet" with input waiting. A yielded task is woken only after
                    // the runtime has polled its driver.
                    tokio::task::yield_now().await;
                    self.looked_before_timers = true;
                    let ready = tokio::select! {
                        biased;
                        read = self.reader.read(&mut self.buf) => Some(read),
                        () = std::future::ready(()) => None,
                    };
                    if let Some(read) = ready {
                        self.took_read(read);
                        continue;
                    }
                }
                // The chunk is in: now the timers that came due while it waited (after every
                // chunk, so that input that keeps coming cannot hold them off).
                self.looked_before_timers = false;
                self.timers_after_feed = false;
                self.conn.handle_timeout(now);
                continue;
            }
            // The end of the input, once everything before it is in and handed out (a last
            // line without a newline is handled then).
            if self.eof && !self.eof_fed {
                self.eof_fed = true;
                let now = self.read_clock();
                self.conn.handle_eof(now);
                continue;
            }
            if !matches!(self.write_until_due().await?, Wrote::All) {
                // A deadline or input came first: its events, then the rest of the write.
                continue;
            }
            if !matches!(self.flush_until_due().await?, Wrote::All) {
                continue;
            }
            let wait = self.conn.poll_timeout().map(|at| {
                Duration::from_nanos(at.as_nanos().saturating_sub(self.read_clock().as_nanos()))
            });
            if self.eof {
                sleep_for(wait).await;
                let now = self.read_clock();
                self.conn.handle_timeout(now);
                continue;
            }
            tokio::select! {
                biased;
                // (Input first: see `timers_after_feed`.)
                read = self.reader.read(&mut self.buf) => self.took_read(read),
                () = sleep_for(wait) => {
                    let now = self.read_clock();
                    self.conn.handle_timeout(now);
                }
            }
        }
    }

    /// Takes the driver apart: the connection, the reader and the writer.
    pub fn into_parts(self) -> (Connection, R, W) {
        (self.conn, self.reader, self.writer)
    }
}

/// Sleeps for `wait`, or for ever when there is no deadline.
async fn sleep_for(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

/// Starts `command` as an MCP server with piped stdin and stdout (stderr is inherited), and a
/// client [`Driver`] over them. Keep the [`Child`] to wait for it; [`stop`] ends both
/// (dropped without it, the child alone is killed with SIGKILL). A configuration the engine
/// refuses is reported before anything starts.
pub fn spawn(
    command: &mut Command,
    config: Config,
) -> io::Result<(Driver<ChildStdout, ChildStdin>, Child)> {
    // Checked first: refused after the spawn, the child was killed alone (a wrapper's real
    // server, its grandchild, could live on).
    mcpwire::conn::Connection::new(config.clone(), mcpwire::Timestamp::ZERO)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("the child's stdio is not piped"));
    };
    let driver = Driver::new(config, stdout, stdin)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
    Ok((driver, child))
}

/// Ends a session with a child server gracefully, as the MCP lifecycle says: closes the
/// connection (with `grace` for our requests in flight; the child's requests, which nobody
/// is left to answer, are refused with -32603), writes what is left, closes the
/// child's stdin (an MCP server exits at end of input), and waits up to `grace` again for it
/// to exit; then, on Unix, sends it SIGTERM and waits up to `grace` once more; then kills it
/// (SIGKILL). While it waits, what the child still writes is read and dropped, so that a
/// last word at its exit does not break the pipe. A child that stops reading its stdin
/// cannot hold this up: what is left to write is given up a second after `grace`. A child
/// that exited first (the pipe to it broken) still gets its exit status returned.
///
/// The signals go to the child alone, unless it leads a process group of its own: start it
/// with [`Command::process_group`]`(0)` when it is a wrapper (`npx`, `uvx`, `sh -c`) whose
/// real server is a grandchild, and they go to the whole group, so that the server does not
/// outlive its wrapper.
pub async fn stop(
    mut driver: Driver<ChildStdout, ChildStdin>,
    mut child: Child,
    grace: Duration,
) -> io::Result<std::process::ExitStatus> {
    // The child's requests the application has not answered will not be now, nor those that
    // come during the close: refused, so that the close waits for ours alone.
    const STOPPING: &str = "the client is stopping";
    driver.connection().refuse_peer_requests(STOPPING);
    driver.close(grace);
    let drain = async {
        while let Some(event) = driver.next_event().await? {
            if matches!(event, mcpwire::conn::OwnedEvent::Request { .. }) {
                driver.connection().refuse_peer_requests(STOPPING);
            }
        }
        Ok::<(), io::Error>(())
    };
    // (Timing out only gives up the write a child does not read; `next_event` is cancel-safe.)
    // (A child that exited, or closed its stdin, breaks the pipe: its exit status is still
    // what the caller wants.)
    if let Ok(Err(e)) =
        tokio::time::timeout(grace.saturating_add(Duration::from_secs(1)), drain).await
        && !peer_gone(&e)
    {
        // The child ends as one that outstays its grace does, its group too (dropped, it got
        // SIGKILL alone, and a wrapper's server outlived it), then the error.
        #[cfg(unix)]
        signal(&child, libc::SIGKILL);
        let _ = child.kill().await;
        return Err(e);
    }
    let (_, mut stdout, stdin) = driver.into_parts();
    drop(stdin);
    // What the child still writes (a last log line, the answer to a request it was on) is
    // read and dropped while it exits: with its stdout closed, that write would break the
    // pipe and end it with an error, or SIGPIPE.
    let mut open = true;
    if let Ok(status) = tokio::time::timeout(grace, exit(&mut child, &mut stdout, &mut open)).await
    {
        return status;
    }
    #[cfg(unix)]
    if signal(&child, libc::SIGTERM)
        && let Ok(status) =
            tokio::time::timeout(grace, exit(&mut child, &mut stdout, &mut open)).await
    {
        return status;
    }
    drop(stdout);
    #[cfg(unix)]
    signal(&child, libc::SIGKILL);
    child.kill().await?;
    child.wait().await
}

/// Waits for `child` to exit, reading and dropping what it writes to `stdout` meanwhile
/// (until that ends: `open` turns false then).
async fn exit(
    child: &mut Child,
    stdout: &mut ChildStdout,
    open: &mut bool,
) -> io::Result<std::process::ExitStatus> {
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            status = child.wait() => return status,
            read = stdout.read(&mut buf), if *open => {
                if !matches!(read, Ok(n) if n > 0) {
                    *open = false;
                }
            }
        }
    }
}

/// Sends `signal` to `child` (not reaped yet), or to the process group it leads: whether it
/// was sent.
#[cfg(unix)]
fn signal(child: &Child, signal: libc::c_int) -> bool {
    let Some(pid) = child.id().and_then(|p| libc::pid_t::try_from(p).ok()) else {
        return false;
    };
    // SAFETY: getpgid(2) and kill(2) take plain values. The child has not been reaped (`id`
    // is `None` once it was), so its id, and the id of the group it leads, are still its.
    unsafe {
        let target = if libc::getpgid(pid) == pid { -pid } else { pid };
        libc::kill(target, signal) == 0
    }
}

/// A read that failed because the peer reset the connection is the input's end: over one
/// socket for both directions (socat's `EXEC`, inetd, systemd's `Accept=yes`), a peer that
/// exits with our answers unread resets it, and its last words and the close are still to
/// be handed out (a write error then follows them, as the docs say), not replaced by the
/// reset.
fn ended_by_reset(read: io::Result<usize>) -> io::Result<usize> {
    match read {
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(0),
        read => read,
    }
}
