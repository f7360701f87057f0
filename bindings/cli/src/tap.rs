//! `mcpwire tap --log FILE -- <server command…>`: a transparent stdio proxy that a host launches
//! in place of the server. Bytes pass through unchanged in both directions; an observer per
//! direction decodes a copy and writes an annotated JSONL log: direction, timestamps,
//! per-request latency, and protocol violations.
//!
//! Each log entry is one line, written whole with a single write, so a reader tailing the log
//! never sees half an entry. The first entry is `start`; then come the messages (`request`,
//! `notification`, `response`, `error`, `invalid`) and `eof` when the host closes tap's stdin;
//! the last entry is always `exit`, and nothing is logged after it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::{Decoded, Decoder, Id, Message, OwnedId};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Dir {
    ClientToServer,
    ServerToClient,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::ClientToServer => "client->server",
            Dir::ServerToClient => "server->client",
        }
    }
}

/// What both observers share: requests in flight (to time them) and the log.
struct Shared {
    start: Instant,
    log: File,
    /// One entry serialized, before its single write.
    line: Vec<u8>,
    /// Set once the `exit` entry is written: nothing may follow it.
    closed: bool,
    /// (direction the request went, id) → (method, sent at in ms).
    in_flight: HashMap<(Dir, OwnedId), (String, f64)>,
}

impl Shared {
    fn ms(&self) -> f64 {
        (self.start.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
    }

    /// Logs `entry` as one line with one write, unless the log is closed.
    fn write(&mut self, mut entry: Value) {
        if self.closed {
            return;
        }
        entry["t_ms"] = json!(self.ms());
        self.line.clear();
        if serde_json::to_writer(&mut self.line, &entry).is_ok() {
            self.line.push(b'\n');
            let _ = self.log.write_all(&self.line);
        }
        // An entry quoting a huge message should not keep its buffer for the whole session.
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::new();
        }
    }

    /// Logs the last entry and closes the log: later writes (another thread's) are dropped.
    fn write_last(&mut self, entry: Value) {
        self.write(entry);
        let _ = self.log.flush();
        self.closed = true;
    }
}

fn id_json(id: Id<'_>) -> Value {
    match id {
        Id::Int(n) => json!(n),
        Id::Str(s) => json!(s.to_str()),
    }
}

/// Decodes a copy of one direction's bytes and logs what it sees.
struct Observer {
    dir: Dir,
    lines: LineDecoder,
    decoder: Decoder,
    shared: Arc<Mutex<Shared>>,
}

impl Observer {
    fn observe(&mut self, bytes: &[u8]) {
        let mut input = bytes;
        while let Some(frame) = self.lines.next_frame(&mut input) {
            let Ok(mut shared) = self.shared.lock() else {
                return;
            };
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    shared.write(json!({"dir": self.dir.name(), "kind": "invalid", "violation": e.to_string()}));
                    continue;
                }
            };
            log_frame(&mut shared, &mut self.decoder, self.dir, frame);
        }
    }

    /// The direction ended: a last message without its newline is logged too (it passed
    /// through; peers read it as the engine does).
    fn finish(&mut self) {
        let Some(frame) = self.lines.finish() else {
            return;
        };
        if let Ok(mut shared) = self.shared.lock() {
            log_frame(&mut shared, &mut self.decoder, self.dir, frame);
        }
    }

    /// Logs `entry` (not a message: the direction's end).
    fn log(&self, entry: Value) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.write(entry);
        }
    }
}

/// Logs one frame of direction `dir`.
fn log_frame(shared: &mut Shared, decoder: &mut Decoder, dir: Dir, frame: &[u8]) {
    match decoder.decode(frame) {
        Err(e) => shared.write(json!({
            "dir": dir.name(), "kind": "invalid", "bytes": frame.len(),
            "violation": format!("not a valid JSON-RPC message: {e}"),
        })),
        Ok(Decoded::Single(m)) => note(shared, dir, &m, false),
        Ok(Decoded::Batch(members)) => {
            for m in members {
                match m {
                    Ok(m) => note(shared, dir, &m, true),
                    Err(e) => shared.write(json!({
                        "dir": dir.name(), "kind": "invalid", "batch": true,
                        "violation": format!("invalid batch member: {e}"),
                    })),
                }
            }
        }
    }
}

fn note(shared: &mut Shared, dir: Dir, m: &Message<'_>, batch: bool) {
    let other = match dir {
        Dir::ClientToServer => Dir::ServerToClient,
        Dir::ServerToClient => Dir::ClientToServer,
    };
    let mut entry = json!({"dir": dir.name()});
    if batch {
        entry["batch"] = json!(true);
    }
    match m {
        Message::Request(r) => {
            let method = r.method.to_str().into_owned();
            entry["kind"] = json!("request");
            entry["id"] = id_json(r.id);
            entry["method"] = json!(method);
            let key = (dir, OwnedId::from(r.id));
            if shared.in_flight.contains_key(&key) {
                entry["violation"] =
                    json!("request id reused while the first request is in flight");
            }
            let t = shared.ms();
            shared.in_flight.insert(key, (method, t));
        }
        Message::Notification(n) => {
            entry["kind"] = json!("notification");
            entry["method"] = json!(n.method.to_str());
        }
        Message::Response(r) => {
            entry["kind"] = json!("response");
            entry["id"] = id_json(r.id);
            answer(shared, other, r.id, &mut entry);
        }
        Message::Error(e) => {
            entry["kind"] = json!("error");
            entry["code"] = json!(e.error.code);
            entry["message"] = json!(e.error.message.to_str());
            match e.id {
                Some(id) => {
                    entry["id"] = id_json(id);
                    answer(shared, other, id, &mut entry);
                }
                None => entry["id"] = Value::Null,
            }
        }
    }
    shared.write(entry);
}

/// Matches an answer with its request (sent the other way) and records the latency.
fn answer(shared: &mut Shared, request_dir: Dir, id: Id<'_>, entry: &mut Value) {
    match shared.in_flight.remove(&(request_dir, OwnedId::from(id))) {
        Some((method, sent)) => {
            entry["method"] = json!(method);
            entry["latency_ms"] = json!(((shared.ms() - sent) * 1000.0).round() / 1000.0);
        }
        None => entry["violation"] = json!("answer to a request that is not in flight"),
    }
}

/// Runs `command` as the server behind tap, logging to `log_path`, until the server ends;
/// gives the exit code tap ends with (the server's, or 128 + the signal that killed it).
pub fn run(log_path: &str, command: &[String]) -> i32 {
    let log = match File::create(log_path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mcpwire tap: cannot write {log_path}: {e}");
            return crate::probe::EXIT_USAGE;
        }
    };
    let Some((program, args)) = command.split_first() else {
        eprintln!("mcpwire tap: no server command given");
        return crate::probe::EXIT_USAGE;
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire tap: cannot start {program}: {e}");
            return crate::probe::EXIT_SPAWN;
        }
    };
    // Stopping tap stops the server: the host's signal goes to it, and tap ends when it does
    // (a server that ignores it is killed 4 s later).
    crate::signals::pass_to(child.id());
    let reaped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    crate::signals::kill_if_stubborn(child.id(), Arc::clone(&reaped), Duration::from_secs(4));
    let shared = Arc::new(Mutex::new(Shared {
        start: Instant::now(),
        log,
        line: Vec::new(),
        closed: false,
        in_flight: HashMap::new(),
    }));
    if let Ok(mut s) = shared.lock() {
        s.write(json!({"kind": "start", "command": command}));
    }
    let observer = |dir| Observer {
        dir,
        lines: LineDecoder::new(),
        decoder: Decoder::default(),
        shared: Arc::clone(&shared),
    };

    // Host → server, on its own thread.
    let mut child_in = child.stdin.take();
    let mut up = observer(Dir::ClientToServer);
    let upstream = std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                // A stdin its parent left non-blocking: wait for it, it has not ended.
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    wait_for(0, Ready::Read);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            // Observe first: the answer may come back before this thread runs again, and the
            // request must already be on record to time it.
            up.observe(&buf[..n]);
            let Some(pipe) = child_in.as_mut() else { break };
            if pipe.write_all(&buf[..n]).is_err() || pipe.flush().is_err() {
                break;
            }
        }
        up.finish();
        up.log(json!({"dir": Dir::ClientToServer.name(), "kind": "eof"}));
        // Closing the server's stdin is how the host ends the session. It comes after the
        // entry above, so that the exit entry, which the server's end leads to, follows it.
        drop(child_in);
    });

    // Server → host, here.
    let mut down = observer(Dir::ServerToClient);
    if let Some(mut child_out) = child.stdout.take() {
        let mut stdout = std::io::stdout().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match child_out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            down.observe(&buf[..n]);
            if write_waiting(&mut stdout, &buf[..n]).is_err() {
                break;
            }
        }
    }
    down.finish();
    let status = child.wait();
    reaped.store(true, std::sync::atomic::Ordering::SeqCst);
    // A server killed by a signal ends tap as a shell reports it: 128 + the signal.
    let signal = status.as_ref().ok().and_then(killed_by);
    let code = match signal {
        Some(signal) => 128 + signal,
        None => status.as_ref().ok().and_then(|s| s.code()).unwrap_or(1),
    };
    // The last entry, complete: written under the lock, which no other entry holds now, and
    // closing the log, so that the other thread's later entries (the host may still write)
    // are dropped rather than following it or being cut off by the process's exit.
    if let Ok(mut s) = shared.lock() {
        // Ids as the request entries write them (`3` and `"3"` stay apart), oldest first.
        let mut pending: Vec<(&f64, Value)> = s
            .in_flight
            .iter()
            .map(|((dir, id), (method, t))| {
                (
                    t,
                    json!({"dir": dir.name(), "id": id_json(id.as_id()), "method": method}),
                )
            })
            .collect();
        pending.sort_by(|a, b| a.0.total_cmp(b.0));
        let pending: Vec<Value> = pending.into_iter().map(|(_, v)| v).collect();
        let mut entry = json!({"kind": "exit", "code": code, "unanswered": pending});
        if let Some(signal) = signal {
            entry["signal"] = json!(signal);
        }
        s.write_last(entry);
    }
    // The host may keep its stdin open; the session is over once the server has gone.
    drop(upstream);
    code
}

/// The signal that ended a process, if one did.
fn killed_by(status: &std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(status)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// Which way a descriptor must be ready.
#[derive(Clone, Copy)]
enum Ready {
    Read,
    Write,
}

/// Waits until descriptor `fd` (0 or 1) is ready, for a stdin or stdout its parent left
/// non-blocking, whose calls answer `WouldBlock` where a blocking one would wait.
fn wait_for(fd: i32, ready: Ready) {
    #[cfg(unix)]
    {
        let events = match ready {
            Ready::Read => libc::POLLIN,
            Ready::Write => libc::POLLOUT,
        };
        let mut fds = [libc::pollfd {
            fd,
            events,
            revents: 0,
        }];
        // SAFETY: `fds` is one valid, writable pollfd for the duration of the call; stdin and
        // stdout stay open for the process's lifetime. A failed or interrupted wait only
        // leads to another attempt.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, -1) };
    }
    #[cfg(not(unix))]
    {
        let _ = (fd, ready);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Writes all of `bytes` to stdout and flushes, waiting while a non-blocking stdout is full.
/// `write` is retried with what is left: a failed `write` takes nothing.
fn write_waiting(out: &mut impl Write, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_for(1, Ready::Write),
            Err(e) => return Err(e),
        }
    }
    loop {
        match out.flush() {
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_for(1, Ready::Write),
            other => return other,
        }
    }
}
