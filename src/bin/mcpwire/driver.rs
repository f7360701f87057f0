//! The command's IO layer: child processes over pipes, a clock, and a blocking loop that drives
//! an engine the way any event loop would.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use mcpwire::Timestamp;
use mcpwire::conn::{CloseReason, Config, Connection, Event, RequestId, ViolationKind};
use mcpwire::jsonrpc::OwnedId;
use mcpwire::mcp::ProtocolVersion;

/// An event, owned, so the loop can hand it to code that issues commands.
#[derive(Clone, Debug)]
pub enum Ev {
    Ready(ProtocolVersion),
    Closed(CloseReason),
    Request {
        id: OwnedId,
        method: String,
        params: Option<String>,
    },
    Notification {
        method: String,
    },
    PeerCancelled {
        id: OwnedId,
    },
    Response {
        request: RequestId,
        result: String,
    },
    Error {
        request: RequestId,
        code: i64,
        message: String,
    },
    Progress,
    InputRequired {
        request: RequestId,
        input_requests: Option<String>,
    },
    InvalidResponse,
    TimedOut(RequestId),
    Abandoned(RequestId),
    Violation {
        kind: ViolationKind,
    },
}

pub fn own(e: Event<'_>) -> Option<Ev> {
    Some(match e {
        Event::Ready { version } => Ev::Ready(version),
        Event::Closed { reason } => Ev::Closed(reason.clone()),
        Event::Request { id, method, params } => Ev::Request {
            id: id.into(),
            method: method.to_str().into_owned(),
            params: params.map(|p| p.get().to_owned()),
        },
        Event::Notification { method, .. } => Ev::Notification {
            method: method.to_str().into_owned(),
        },
        Event::PeerCancelled { id, .. } => Ev::PeerCancelled { id: id.into() },
        Event::Response { request, result } => Ev::Response {
            request,
            result: result.get().to_owned(),
        },
        Event::Error {
            request,
            code,
            message,
            ..
        } => Ev::Error {
            request,
            code,
            message: message.to_str().into_owned(),
        },
        Event::Progress { .. } => Ev::Progress,
        Event::InputRequired {
            request,
            input_requests,
            ..
        } => Ev::InputRequired {
            request,
            input_requests: input_requests.map(|r| r.get().to_owned()),
        },
        Event::InvalidResponse { .. } => Ev::InvalidResponse,
        Event::TimedOut { request } => Ev::TimedOut(request),
        Event::Abandoned { request } => Ev::Abandoned(request),
        Event::Violation { kind, .. } => Ev::Violation { kind },
        _ => return None,
    })
}

/// Reads a stream on a thread and forwards chunks (`None` at end of input).
pub fn spawn_reader(mut source: impl Read + Send + 'static) -> Receiver<Option<Vec<u8>>> {
    let (tx, rx): (Sender<Option<Vec<u8>>>, _) = channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match source.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(None);
                    return;
                }
                Ok(n) => {
                    if tx.send(Some(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Which way bytes went, for transcripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Sent,
    Received,
}

/// A transcript callback: sees every chunk that crosses the pipes.
pub type Transcript = Box<dyn FnMut(Dir, &[u8])>;

/// Why the loop stopped without the awaited outcome.
#[derive(Debug)]
pub enum Stop {
    /// The deadline passed.
    Deadline,
    /// The server closed its output (exited or crashed).
    Eof,
}

/// A client engine talking to a server child process over its stdin/stdout.
pub struct Session {
    pub conn: Connection,
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Option<Vec<u8>>>,
    start: Instant,
    eof: bool,
    /// Called with every chunk that crosses, when set.
    pub transcript: Option<Transcript>,
    /// The most recent input, for naming what a misbehaving server wrote.
    pub last_input: Vec<u8>,
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
        let rx = spawn_reader(stdout);
        let start = Instant::now();
        let conn = Connection::new(config, Timestamp::ZERO).map_err(std::io::Error::other)?;
        Ok(Session {
            conn,
            stdin: child.stdin.take(),
            child,
            rx,
            start,
            eof: false,
            transcript: None,
            last_input: Vec::new(),
        })
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
        mut f: impl FnMut(&mut Connection, Timestamp, Ev) -> Option<T>,
    ) -> Result<T, Stop> {
        let give_up = Instant::now() + limit;
        loop {
            let mut busy = false;
            while let Some(e) = self.conn.poll_event() {
                busy = true;
                let Some(ev) = own(e) else { continue };
                let now = self.now();
                if let Some(out) = f(&mut self.conn, now, ev) {
                    self.flush();
                    return Ok(out);
                }
            }
            busy |= self.flush();
            if busy {
                continue;
            }
            if self.eof {
                return Err(Stop::Eof);
            }
            let now = Instant::now();
            if now >= give_up {
                return Err(Stop::Deadline);
            }
            let mut wait = give_up - now;
            if let Some(deadline) = self.conn.poll_timeout() {
                let until =
                    Duration::from_nanos(deadline.as_nanos().saturating_sub(self.now().as_nanos()));
                wait = wait.min(until);
            }
            match self.rx.recv_timeout(wait) {
                Ok(Some(bytes)) => {
                    if let Some(t) = self.transcript.as_mut() {
                        t(Dir::Received, &bytes);
                    }
                    self.last_input.clear();
                    self.last_input.extend_from_slice(&bytes);
                    let now = self.now();
                    self.conn.handle_input(now, &bytes);
                }
                Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                    self.eof = true;
                    let now = self.now();
                    self.conn.handle_eof(now);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = self.now();
            self.conn.handle_timeout(now);
        }
    }

    fn flush(&mut self) -> bool {
        let mut wrote = false;
        while let Some(t) = self.conn.poll_transmit() {
            let n = t.bytes.len();
            if let Some(tr) = self.transcript.as_mut() {
                tr(Dir::Sent, t.bytes);
            }
            if let Some(stdin) = self.stdin.as_mut()
                && (stdin.write_all(t.bytes).is_err() || stdin.flush().is_err())
            {
                self.stdin = None;
            }
            self.conn.consume_transmit(n);
            wrote = true;
        }
        wrote
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
        self.stdin = None;
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
