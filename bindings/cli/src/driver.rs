//! The command's IO layer: child processes over pipes and a clock, around the library's
//! blocking loop (`mcpwire::blocking`).

use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::Timestamp;
use mcpwire::blocking::{self, Io};
use mcpwire::conn::{Config, Connection};

/// Events as the command handles them: the library's owned copy.
pub use mcpwire::OwnedEvent as Ev;
/// Which way bytes went, for transcripts.
pub use mcpwire::blocking::Direction as Dir;

/// A transcript callback: sees every chunk that crosses the pipes.
pub type Transcript = Box<dyn FnMut(Dir, &[u8]) + Send>;

/// Why the loop stopped without the awaited outcome.
#[derive(Debug)]
pub enum Stop {
    /// The deadline passed.
    Deadline,
    /// The server closed its output (exited or crashed).
    Eof,
}

/// A client engine talking to a server child process over its stdin/stdout, on the
/// library's blocking loop.
pub struct Session {
    pub conn: Connection,
    child: Child,
    io: Io<ChildStdin>,
    start: Instant,
    /// Sees every chunk that crosses, when set.
    transcript: Arc<Mutex<Option<Transcript>>>,
    /// The most recent input, for naming what a misbehaving server wrote.
    last_input: Arc<Mutex<Vec<u8>>>,
}

impl Session {
    pub fn spawn(argv: &[String], config: Config, quiet_stderr: bool) -> std::io::Result<Session> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("no server command given"))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if quiet_stderr {
                Stdio::null()
            } else {
                Stdio::inherit()
            })
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let start = Instant::now();
        let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
        let mut io = Io::new(stdout, stdin, clock);
        let transcript: Arc<Mutex<Option<Transcript>>> = Arc::default();
        let last_input: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (t, last) = (Arc::clone(&transcript), Arc::clone(&last_input));
        io.set_tap(move |dir, bytes| {
            if dir == Dir::Received
                && let Ok(mut last) = last.lock()
            {
                last.clear();
                last.extend_from_slice(bytes);
            }
            if let Ok(mut t) = t.lock()
                && let Some(t) = t.as_mut()
            {
                t(dir, bytes);
            }
        });
        let conn = Connection::new(config, Timestamp::ZERO).map_err(std::io::Error::other)?;
        Ok(Session {
            conn,
            child,
            io,
            start,
            transcript,
            last_input,
        })
    }

    /// Shows every chunk that crosses from now on to `transcript`.
    pub fn set_transcript(&mut self, transcript: Transcript) {
        if let Ok(mut t) = self.transcript.lock() {
            *t = Some(transcript);
        }
    }

    /// The most recent chunk the server wrote.
    pub fn last_input(&self) -> Vec<u8> {
        self.last_input
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    pub fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Runs until `f` returns `Some`, handing it every event. `f` may issue commands.
    pub fn run_until<T>(
        &mut self,
        limit: Duration,
        f: impl FnMut(&mut Connection, Timestamp, Ev) -> Option<T>,
    ) -> Result<T, Stop> {
        let give_up = Timestamp::from_nanos(self.now().as_nanos() + limit.as_nanos() as u64);
        self.io
            .run_until(&mut self.conn, Some(give_up), f)
            .map_err(|stop| match stop {
                blocking::Stop::Deadline => Stop::Deadline,
                blocking::Stop::Eof => Stop::Eof,
            })
    }

    /// The exit status, if the server exits within a moment (it has closed its output, so it
    /// is usually on its way out).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The stdio shutdown the spec describes: close the server's stdin, wait, then SIGTERM,
    /// then SIGKILL.
    pub fn shutdown(mut self) -> Option<ExitStatus> {
        self.io.close_output();
        for signal in [None, Some("-TERM")] {
            if let Some(sig) = signal {
                let _ = Command::new("kill")
                    .arg(sig)
                    .arg(self.child.id().to_string())
                    .status();
            }
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until {
                if let Ok(Some(status)) = self.child.try_wait() {
                    return Some(status);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
