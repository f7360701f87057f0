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
//! - **One reader thread.** `std` cannot wait on a pipe with a timeout, so the input is read on
//!   a thread and handed over through a channel of [`READ_AHEAD`] chunks of at most
//!   [`CHUNK`] bytes; one more chunk is being fed to the engine [`FEED`] bytes at a time.
//!   That is all the input held outside the engine.
//! - **Backpressure.** Writes block. While the peer does not read, the loop waits in its
//!   write, stops taking input, and the reader thread stops reading, so a peer that writes
//!   without reading is slowed to the pace it reads at. Memory stays within the engine's
//!   bounds plus the read-ahead.
//! - **Nothing accepted is lost.** At end of input every answer already produced is written
//!   before [`Io::next_event`] reports [`Stop::Eof`].
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
//! let mut io = Io::new(std::io::stdin(), std::io::stdout(), clock);
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
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

use crate::Timestamp;
use crate::conn::{Connection, OwnedEvent};

/// The most bytes one read takes from the input.
pub const CHUNK: usize = 64 * 1024;

/// How many read chunks may wait between the reader thread and the loop. Together with
/// [`CHUNK`] this bounds the input held outside the engine (256 KiB).
pub const READ_AHEAD: usize = 4;

/// Input is fed to the engine at most this many bytes at a time, and the next piece only once
/// every event of the last one was handed out. A piece this small holds fewer complete frames
/// than [`Limits::max_inbound_in_flight`](crate::conn::Limits::max_inbound_in_flight)'s
/// default (256; a message is at least 16 bytes), so a peer that pipelines thousands of
/// requests in one write gets every one answered by an application that answers as it goes,
/// instead of "too many requests" errors for what did not fit.
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
    /// The `until` time given to [`Io::next_event`] came. The connection is unchanged; call
    /// again to go on.
    Deadline,
    /// The input ended, every event was handed out and every byte the engine produced was
    /// written (or the output was gone). Standing: every later call returns it again.
    Eof,
}

/// A callback that sees every chunk that crosses, for transcripts and logs.
type Tap = Box<dyn FnMut(Direction, &[u8]) + Send>;

/// The IO half of a blocking loop: an input read on a thread, an output written in place, and
/// the clock. Use one per connection; the [`Connection`] stays yours, so commands can be
/// issued between calls.
pub struct Io<W: Write> {
    input: Receiver<Vec<u8>>,
    output: Option<W>,
    clock: Box<dyn FnMut() -> Timestamp + Send>,
    tap: Option<Tap>,
    /// The chunk being fed, and how much of it the engine has had.
    pending: Vec<u8>,
    fed: usize,
    eof: bool,
    output_error: Option<std::io::Error>,
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
    /// [`Timestamp`] asks for).
    ///
    /// The thread ends when the input ends or fails, or, after `Io` is dropped, with the next
    /// read that returns.
    pub fn new(
        input: impl Read + Send + 'static,
        output: W,
        clock: impl FnMut() -> Timestamp + Send + 'static,
    ) -> Io<W> {
        Io {
            input: spawn_reader(input),
            output: Some(output),
            clock: Box::new(clock),
            tap: None,
            pending: Vec::new(),
            fed: 0,
            eof: false,
            output_error: None,
        }
    }

    /// Calls `tap` with every chunk read and every chunk written, in order. Use it for
    /// transcripts; it runs on the loop's thread.
    pub fn set_tap(&mut self, tap: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.tap = Some(Box::new(tap));
    }

    /// The current time, from the clock given to [`new`](Io::new).
    pub fn now(&mut self) -> Timestamp {
        (self.clock)()
    }

    /// Whether the input has ended.
    pub fn is_eof(&self) -> bool {
        self.eof
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
        let mut any = false;
        while let Some(t) = conn.poll_transmit() {
            any = true;
            let n = t.bytes.len();
            if let Some(tap) = self.tap.as_mut() {
                tap(Direction::Sent, t.bytes);
            }
            if let Some(out) = self.output.as_mut()
                && let Err(e) = out.write_all(t.bytes)
            {
                self.output_error = Some(e);
                self.output = None;
            }
            conn.consume_transmit(n);
        }
        if any
            && let Some(out) = self.output.as_mut()
            && let Err(e) = out.flush()
        {
            self.output_error = Some(e);
            self.output = None;
        }
        any
    }

    /// The loop, one event at a time: hands out the next event; when none is left, writes the
    /// engine's output, and then waits for input, end of input, the engine's deadline or `until`
    /// (whichever comes first) and feeds it in.
    ///
    /// Issue commands between calls; their output is written by the next call that finds no
    /// event left, before it reads or waits. The answers to one read of input thus leave in
    /// one write; a handler about to do long work can [`flush`](Io::flush) first, so the
    /// answers it already gave do not wait for it. Returns
    /// [`Stop::Deadline`] when `until` has come, and [`Stop::Eof`] once the input has ended
    /// and everything is written.
    pub fn next_event(
        &mut self,
        conn: &mut Connection,
        until: Option<Timestamp>,
    ) -> Result<OwnedEvent, Stop> {
        loop {
            // Events first; output is written once none is left, so the answers to a batch
            // of requests leave in one write instead of one each. Nothing waits or reads
            // before the output is written.
            if let Some(event) = conn.poll_event() {
                return Ok(event.to_owned_event());
            }
            if self.flush(conn) {
                continue;
            }
            if self.fed < self.pending.len() {
                let end = self.pending.len().min(self.fed + FEED);
                let now = self.now();
                conn.handle_input(now, &self.pending[self.fed..end]);
                self.fed = end;
                continue;
            }
            if self.eof {
                return Err(Stop::Eof);
            }
            let now = self.now();
            if until.is_some_and(|u| now >= u) {
                return Err(Stop::Deadline);
            }
            let wake = match (conn.poll_timeout(), until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wait = wake.map_or(IDLE_WAIT, |w| {
                Duration::from_nanos(w.as_nanos().saturating_sub(now.as_nanos()))
            });
            match self.input.recv_timeout(wait) {
                Ok(bytes) => {
                    if let Some(tap) = self.tap.as_mut() {
                        tap(Direction::Received, &bytes);
                    }
                    // Fed piece by piece from the top of the loop.
                    self.pending = bytes;
                    self.fed = 0;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.eof = true;
                    let now = self.now();
                    conn.handle_eof(now);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = self.now();
            conn.handle_timeout(now);
        }
    }

    /// Runs [`next_event`](Io::next_event) until `f` returns `Some`, handing it every event;
    /// `f` may issue commands on the connection it is given. Returns [`Stop::Deadline`] at
    /// `until` and [`Stop::Eof`] when the input ends first.
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
        }
    }
}

/// Reads `source` on a thread into a channel of [`READ_AHEAD`] chunks; the channel closes when
/// the input ends or fails.
fn spawn_reader(mut source: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx): (SyncSender<Vec<u8>>, _) = sync_channel(READ_AHEAD);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match source.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    rx
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

    #[test]
    fn every_request_before_eof_is_answered_before_eof_is_reported() {
        let mut input = INIT.to_owned();
        for i in 0..3000 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}}\n",
                i + 2
            ));
        }
        let (_, clock) = manual_clock();
        let mut conn = server();
        let mut out = Vec::new();
        {
            let mut io = Io::new(std::io::Cursor::new(input.into_bytes()), &mut out, clock);
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
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with('\n'), "no half line at the end");
        // The initialize result and 3,000 answers, each whole.
        let answers = text.lines().filter(|l| l.contains("\"result\":{}")).count();
        assert_eq!(answers, 3000);
        assert_eq!(text.lines().count(), 3001);
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
