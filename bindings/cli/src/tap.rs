//! `mcpwire tap --log FILE -- <server command…>`: a transparent stdio proxy that a host launches
//! in place of the server. Bytes pass through unchanged in both directions; an observer per
//! direction decodes a copy and writes an annotated JSONL log: direction, timestamps,
//! per-request latency, and protocol violations.
//!
//! Each log entry is one line, written whole with a single write, so a reader tailing the log
//! never sees half an entry (but see the end, below). The log is written on a thread of its
//! own, so a log that cannot keep up (a FIFO whose reader paused, a slow disk) never holds
//! the traffic up: up to 8 MiB of entries wait for it, and past that entries are dropped and
//! a `dropped` entry counts them. When the log cannot be written at all (a full disk), tap
//! says so on stderr once and logs nothing more; and at the end it waits at most 2 s for the
//! log to take what is left (past that, the rest is lost, and a log that had taken part of
//! an entry ends with that part).
//!
//! The first entry is `start`; then come the messages (`request`, `notification`,
//! `response`, `error`, `invalid`, and `too_long` for one over 16 MiB, which passes through
//! but is not decoded: a request or an answer among them is logged as such from its first
//! bytes, with `"too_long": true`, and kept on the record), `eof` when the host closes tap's
//! stdin, or `closed` when the server stops reading its own (tap then closes its stdin too,
//! so that the host's writes fail as they would without tap, and keeps passing on what the
//! server writes); the last entry is `exit` (unless the end gave up on the log), and nothing
//! is logged after it.
//!
//! tap ends when the server does: at the end of its output, or a second after the server
//! exited while a process it started still holds that output open. A host that stopped
//! reading and then signals tap gets it to end too: the signal goes to the server, and once
//! the server is gone, a write to the host that makes no progress for 4 s is given up.
//!
//! Memory stays bounded however long the session: tap remembers at most 65,536 requests in
//! flight per direction (past that, the oldest is forgotten and counted), a request named by a
//! `notifications/cancelled` is forgotten at once (the cancel entry names it under `cancels`),
//! and the latest 4,096 requests forgotten either way are still recognised, so that a late
//! answer to one is matched rather than called a violation (one to a cancelled request says
//! `"cancelled": true`). The `exit` entry lists at most 1,000 unanswered requests, oldest
//! first; `unanswered_count` counts all of them, including any forgotten past the bound,
//! which `forgotten` counts on its own. A string id longer than 256 bytes is remembered (and
//! listed there) as its start, `…`, a hash of the whole and its length.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use mcpwire::frame::line::{FrameError, LineDecoder};
use mcpwire::jsonrpc::{
    Decoded, Decoder, DecoderConfig, HeadFacts, Id, Message, OwnedId, RawJson, scan_head,
};

/// The most requests one direction may have in flight on record; past it, the oldest is
/// forgotten (and counted in the `exit` entry's `forgotten`).
const MAX_IN_FLIGHT: usize = 65_536;

/// How many requests taken off the record without an answer (cancelled, or forgotten past
/// [`MAX_IN_FLIGHT`]) each direction still recognises, the latest ones, to match a late answer.
const MAX_GONE: usize = 4_096;

/// The most unanswered requests the `exit` entry lists; `unanswered_count` counts them all.
const MAX_LISTED: usize = 1_000;

/// How long tap goes on passing the server's output to the host after the server exited,
/// while nothing more comes: a process the server started may hold that output open for good.
const LINGER: Duration = Duration::from_secs(1);

/// How long a write to the host may make no progress, once a signal was passed on and the
/// server has exited, before tap ends anyway: a host that stopped reading and then signalled
/// tap wants it gone, and the server it would wait for is gone already.
const STALLED: Duration = Duration::from_secs(4);

/// How much of the server's output goes to the host in one write: a pipe's atomic size, so
/// that a host reading slowly still shows progress well within [`STALLED`].
const WRITE_PIECE: usize = 4096;

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

    /// The direction answers to this direction's requests travel.
    fn other(self) -> Dir {
        match self {
            Dir::ClientToServer => Dir::ServerToClient,
            Dir::ServerToClient => Dir::ClientToServer,
        }
    }
}

/// A request on record: its method and when it passed, in ms since the start.
struct Sent {
    method: String,
    t: f64,
}

/// Records keyed by request id, in the order they were put in, holding at most `cap`: putting
/// one more in takes the oldest out.
struct Table<V> {
    cap: usize,
    /// id → (position in `order`, record).
    entries: HashMap<OwnedId, (u64, V)>,
    /// Position → id, oldest first.
    order: BTreeMap<u64, OwnedId>,
    next: u64,
}

impl<V> Table<V> {
    fn new(cap: usize) -> Self {
        Table {
            cap,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn contains(&self, id: &OwnedId) -> bool {
        self.entries.contains_key(id)
    }

    fn remove(&mut self, id: &OwnedId) -> Option<V> {
        let (position, record) = self.entries.remove(id)?;
        self.order.remove(&position);
        Some(record)
    }

    /// Puts `record` in as the newest (in place of one with the same id); gives back the
    /// oldest record if the table was full.
    fn insert(&mut self, id: OwnedId, record: V) -> Option<(OwnedId, V)> {
        self.remove(&id);
        let displaced = if self.entries.len() >= self.cap {
            self.order
                .pop_first()
                .and_then(|(_, old)| self.entries.remove(&old).map(|(_, r)| (old, r)))
        } else {
            None
        };
        let position = self.next;
        self.next += 1;
        self.order.insert(position, id.clone());
        self.entries.insert(id, (position, record));
        displaced
    }

    /// The records, oldest first.
    fn oldest_first(&self) -> impl Iterator<Item = (&OwnedId, &V)> {
        self.order
            .values()
            .filter_map(|id| self.entries.get(id).map(|(_, record)| (id, record)))
    }
}

/// What tap knows of the requests one direction sent.
struct Side {
    /// Requests not yet answered, at most [`MAX_IN_FLIGHT`].
    in_flight: Table<Sent>,
    /// The latest requests taken off `in_flight` unanswered, with whether a cancel did it.
    gone: Table<(Sent, bool)>,
    /// Requests forgotten past [`MAX_IN_FLIGHT`] whose answer has not been seen.
    forgotten: u64,
}

impl Side {
    fn new() -> Self {
        Side {
            in_flight: Table::new(MAX_IN_FLIGHT),
            gone: Table::new(MAX_GONE),
            forgotten: 0,
        }
    }
}

/// The most log bytes waiting for the log's writer thread; past it, entries are dropped.
const LOG_QUEUE: usize = 8 << 20;

/// How long the end waits for the log to take the entries still waiting.
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// The log, written on a thread of its own from a bounded queue (see the module docs).
struct LogSink {
    queue: Arc<(Mutex<LogQueue>, Condvar)>,
}

#[derive(Default)]
struct LogQueue {
    entries: VecDeque<Vec<u8>>,
    /// The bytes in `entries`.
    bytes: usize,
    /// No entry comes any more: the writer ends once `entries` is empty.
    closed: bool,
    /// The writer has ended.
    drained: bool,
}

impl LogSink {
    fn new(mut file: File) -> LogSink {
        let queue: Arc<(Mutex<LogQueue>, Condvar)> = Arc::default();
        let q = Arc::clone(&queue);
        std::thread::spawn(move || {
            let (lock, changed) = &*q;
            let mut failed = false;
            loop {
                let batch: Vec<Vec<u8>> = {
                    let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
                    while q.entries.is_empty() && !q.closed {
                        q = changed.wait(q).unwrap_or_else(|p| p.into_inner());
                    }
                    if q.entries.is_empty() {
                        q.drained = true;
                        changed.notify_all();
                        return;
                    }
                    q.bytes = 0;
                    q.entries.drain(..).collect()
                };
                for entry in &batch {
                    if failed {
                        break;
                    }
                    if let Err(e) = file.write_all(entry) {
                        // An entry cut short would glue the next one to it: nothing more.
                        say!("mcpwire tap: cannot write the log ({e}); logging stopped");
                        failed = true;
                    }
                }
            }
        });
        LogSink { queue }
    }

    /// Queues one entry (a whole line); false when the queue is full and it was dropped.
    /// `last` is queued whatever the queue holds.
    fn push(&self, line: &[u8], last: bool) -> bool {
        let (lock, changed) = &*self.queue;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        if q.closed || (!last && q.bytes + line.len() > LOG_QUEUE) {
            return false;
        }
        q.bytes += line.len();
        q.entries.push_back(line.to_vec());
        changed.notify_all();
        true
    }

    /// No more entries: waits up to `limit` for the writer to write what is queued.
    fn close(&self, limit: Duration) {
        let (lock, changed) = &*self.queue;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        q.closed = true;
        changed.notify_all();
        let until = Instant::now() + limit;
        while !q.drained {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            q = changed
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// What both observers share: requests in flight (to time them) and the log.
struct Shared {
    start: Instant,
    log: LogSink,
    /// Entries dropped since the last one the log took (its queue was full).
    dropped: u64,
    /// One entry serialized, before its single write.
    line: Vec<u8>,
    /// Set once the `exit` entry is written: nothing may follow it.
    closed: bool,
    /// The requests each direction sent, indexed by `Dir as usize`.
    sides: [Side; 2],
}

impl Shared {
    fn ms(&self) -> f64 {
        (self.start.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
    }

    fn side(&mut self, dir: Dir) -> &mut Side {
        &mut self.sides[dir as usize]
    }

    /// Logs `entry` as one line with one write, unless the log is closed.
    fn write(&mut self, entry: Value) {
        self.write_entry(entry, false);
    }

    /// [`write`](Self::write); `last` is queued even when the log's queue is full.
    fn write_entry(&mut self, mut entry: Value, last: bool) {
        if self.closed {
            return;
        }
        let t_ms = self.ms();
        if self.dropped > 0 {
            let notice = json!({"kind": "dropped", "entries": self.dropped, "t_ms": t_ms});
            if self.log.push(format!("{notice}\n").as_bytes(), last) {
                self.dropped = 0;
            }
        }
        entry["t_ms"] = json!(t_ms);
        self.line.clear();
        if serde_json::to_writer(&mut self.line, &entry).is_ok() {
            self.line.push(b'\n');
            if !self.log.push(&self.line, last) {
                self.dropped += 1;
            }
        }
        // An entry quoting a huge message should not keep its buffer for the whole session.
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::new();
        }
    }

    /// Logs the last entry and closes the log: later writes (another thread's) are dropped.
    /// Waits up to [`LOG_DRAIN`] for the log to take what is queued.
    fn write_last(&mut self, entry: Value) {
        self.write_entry(entry, true);
        self.closed = true;
        self.log.close(LOG_DRAIN);
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
                Err(FrameError::TooLong { limit }) => {
                    let facts = scan_head(self.lines.too_long_head());
                    too_long(&mut shared, self.dir, limit, &facts);
                    continue;
                }
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

/// Logs a message longer than tap decodes (MCP sets no limit, so it is no violation): it
/// passed through unchanged, and what its first bytes tell (`facts`) keeps the record of
/// requests in flight: an answer is matched with its request, and a request is remembered.
fn too_long(shared: &mut Shared, dir: Dir, limit: usize, facts: &HeadFacts) {
    let mut entry = json!({
        "dir": dir.name(),
        "kind": "too_long",
        "note": format!("over {limit} bytes: passed through, not decoded"),
    });
    if let Some(id) = &facts.id {
        entry["id"] = id_json(id.as_id());
        if facts.response {
            entry["kind"] = json!("response");
            entry["too_long"] = json!(true);
            answer(shared, dir.other(), id.as_id(), &mut entry);
        } else {
            // A request (its method, when the head holds it): its answer is matched.
            entry["kind"] = json!("request");
            entry["too_long"] = json!(true);
            let method = facts.method.as_deref().unwrap_or("");
            if facts.method.is_some() {
                entry["method"] = json!(method);
            }
            remember(shared, dir, id.as_id(), method, &mut entry);
        }
    } else if let Some(method) = &facts.method {
        entry["method"] = json!(method);
    }
    shared.write(entry);
}

/// The most of a request's method name remembered while it is in flight (the log entry of
/// the request itself has it whole): a method name may be as long as a frame.
const METHOD_KEPT: usize = 256;

/// The longest string id (its text, escapes decoded) remembered as it is while its request is
/// in flight; a longer one is remembered as its start, its length and a hash of the whole
/// (see [`kept_id`]). An id may be as long as a frame, and 65,536 requests are remembered per
/// direction, each id twice.
const ID_KEPT: usize = 256;

/// The key a request id is remembered under: the id itself, or for a string id over
/// [`ID_KEPT`] bytes of text, `<its first characters>…#<hash>/<length>`, which stands for it in
/// the exit entry too. Both are taken from the text, escapes decoded, so that an answer that
/// spells the id with other escapes (`\u00e9` for `é`) is matched, as JSON-RPC compares ids.
/// Two different long ids share a key only if their hashes collide.
fn kept_id(id: Id<'_>) -> OwnedId {
    let Id::Str(s) = id else {
        return OwnedId::from(id);
    };
    // (The wire form is never shorter than the text: most ids stop here without decoding.)
    if s.raw().len() <= ID_KEPT {
        return OwnedId::from(id);
    }
    let text = s.to_str();
    if text.len() <= ID_KEPT {
        return OwnedId::from(id);
    }
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    // The start: plain ASCII that needs no escape in the key's wire form.
    let start: String = text
        .chars()
        .take(64)
        .take_while(|&c| c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\')
        .collect();
    let key = format!("{start}\\u2026#{:016x}/{}", hasher.finish(), text.len());
    OwnedId::Str(key.into_bytes().into())
}

/// Logs one message that went `dir`, keeping the record of requests in flight up to date.
fn note(shared: &mut Shared, dir: Dir, m: &Message<'_>, batch: bool) {
    let mut entry = json!({"dir": dir.name()});
    if batch {
        entry["batch"] = json!(true);
    }
    match m {
        Message::Request(r) => {
            let full = r.method.to_str();
            entry["kind"] = json!("request");
            entry["id"] = id_json(r.id);
            entry["method"] = json!(full);
            remember(shared, dir, r.id, &full, &mut entry);
        }
        Message::Notification(n) => {
            entry["kind"] = json!("notification");
            entry["method"] = json!(n.method.to_str());
            if n.method.eq_str("notifications/cancelled") {
                cancel(shared, dir, n.params, &mut entry);
            }
        }
        Message::Response(r) => {
            entry["kind"] = json!("response");
            entry["id"] = id_json(r.id);
            answer(shared, dir.other(), r.id, &mut entry);
        }
        Message::Error(e) => {
            entry["kind"] = json!("error");
            entry["code"] = json!(e.error.code);
            entry["message"] = json!(e.error.message.to_str());
            match e.id {
                Some(id) => {
                    entry["id"] = id_json(id);
                    answer(shared, dir.other(), id, &mut entry);
                }
                None => entry["id"] = Value::Null,
            }
        }
    }
    shared.write(entry);
}

/// Puts a request that went `dir` on the record of those in flight, until its answer.
fn remember(shared: &mut Shared, dir: Dir, id: Id<'_>, full: &str, entry: &mut Value) {
    // What is remembered until the answer: at most METHOD_KEPT bytes of the name.
    let mut cut = full.len().min(METHOD_KEPT);
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    let method = full[..cut].to_owned();
    let id = kept_id(id);
    let t = shared.ms();
    let side = shared.side(dir);
    if side.in_flight.contains(&id) {
        entry["violation"] = json!("request id reused while the first request is in flight");
    }
    // An answer under this id is this request's now, not a forgotten one's.
    side.gone.remove(&id);
    if let Some((old, sent)) = side.in_flight.insert(id, Sent { method, t }) {
        side.forgotten += 1;
        side.gone.insert(old, (sent, false));
    }
}

/// A `notifications/cancelled` that went `dir` ends the request it names, which `dir` sent:
/// the request comes off the record of those in flight (it gets no answer, as a rule), and
/// the cancel's `entry` names it. A cancel for a request not in flight changes nothing.
fn cancel(shared: &mut Shared, dir: Dir, params: Option<RawJson<'_>>, entry: &mut Value) {
    let Some(id) = params
        .and_then(|p| p.get_unique("requestId").ok().flatten())
        .and_then(|v| v.as_id())
    else {
        return;
    };
    let id = kept_id(id);
    let side = shared.side(dir);
    if let Some(sent) = side.in_flight.remove(&id) {
        entry["cancels"] = json!({"id": id_json(id.as_id()), "method": sent.method});
        side.gone.insert(id, (sent, true));
    }
}

/// Matches an answer with its request (sent the other way) and records the latency.
fn answer(shared: &mut Shared, request_dir: Dir, id: Id<'_>, entry: &mut Value) {
    let now = shared.ms();
    let id = kept_id(id);
    let side = shared.side(request_dir);
    let (sent, cancelled) = match side.in_flight.remove(&id) {
        Some(sent) => (sent, false),
        None => match side.gone.remove(&id) {
            Some((sent, cancelled)) => {
                if !cancelled {
                    side.forgotten = side.forgotten.saturating_sub(1);
                }
                (sent, cancelled)
            }
            None => {
                entry["violation"] = json!("answer to a request that is not in flight");
                return;
            }
        },
    };
    entry["method"] = json!(sent.method);
    entry["latency_ms"] = json!(((now - sent.t) * 1000.0).round() / 1000.0);
    if cancelled {
        entry["cancelled"] = json!(true);
    }
}

/// The `exit` entry: the server's exit `code` (and `signal`), and the requests still
/// unanswered, the oldest [`MAX_LISTED`] listed with their ids as the requests wrote them
/// (`3` and `"3"` stay apart).
fn exit_entry(shared: &Shared, code: i32, signal: Option<i32>) -> Value {
    let mut listed: Vec<(f64, Value)> = Vec::new();
    let mut count = 0u64;
    let mut forgotten = 0u64;
    for dir in [Dir::ClientToServer, Dir::ServerToClient] {
        let side = &shared.sides[dir as usize];
        count += side.in_flight.len() as u64 + side.forgotten;
        forgotten += side.forgotten;
        listed.extend(side.in_flight.oldest_first().take(MAX_LISTED).map(|(id, sent)| {
            (
                sent.t,
                json!({"dir": dir.name(), "id": id_json(id.as_id()), "method": sent.method}),
            )
        }));
    }
    // Each direction's are in order already; a stable sort interleaves them by time.
    listed.sort_by(|a, b| a.0.total_cmp(&b.0));
    listed.truncate(MAX_LISTED);
    let listed: Vec<Value> = listed.into_iter().map(|(_, v)| v).collect();
    let mut entry = json!({
        "kind": "exit", "code": code, "unanswered": listed, "unanswered_count": count,
    });
    if forgotten > 0 {
        entry["forgotten"] = json!(forgotten);
    }
    if let Some(signal) = signal {
        entry["signal"] = json!(signal);
    }
    entry
}

/// Closes this process's stdin (fd 0, which now reads as empty): the host's writes to it fail
/// (EPIPE), as they would if it ran the server without tap and the server closed its stdin.
/// The descriptor stays taken (by /dev/null), so nothing opened later can land on fd 0.
fn close_own_stdin() {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        match File::open("/dev/null") {
            // SAFETY: dup2(2) on two open descriptors; it closes the pipe fd 0 held atomically.
            Ok(null) => unsafe {
                libc::dup2(null.as_raw_fd(), 0);
            },
            // SAFETY: close(2) on fd 0, which no Rust object here owns.
            Err(_) => unsafe {
                libc::close(0);
            },
        }
    }
}

/// Points this process's stdout at /dev/null: the host reads the end of tap's output.
fn close_own_stdout() {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        match File::open("/dev/null") {
            // SAFETY: dup2(2) on two open descriptors; it closes the pipe fd 1 held atomically.
            Ok(null) => unsafe {
                libc::dup2(null.as_raw_fd(), 1);
            },
            // SAFETY: close(2) on fd 1, whose only Rust owner (the stdout lock) is gone.
            Err(_) => unsafe {
                libc::close(1);
            },
        }
    }
}

/// Runs `command` as the server behind tap, logging to `log_path`, until the server ends;
/// gives the exit code tap ends with (the server's, or 128 + the signal that killed it).
pub fn run(log_path: &str, command: &[String]) -> i32 {
    let log = match File::create(log_path) {
        Ok(f) => f,
        Err(e) => {
            say!("mcpwire tap: cannot write {log_path}: {e}");
            return crate::probe::EXIT_USAGE;
        }
    };
    let Some((program, args)) = command.split_first() else {
        say!("mcpwire tap: no server command given");
        return crate::probe::EXIT_USAGE;
    };
    // A signal that comes while the server starts is held for it (see below).
    crate::signals::catch();
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            say!("mcpwire tap: cannot start {program}: {e}");
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
        log: LogSink::new(log),
        dropped: 0,
        line: Vec::new(),
        closed: false,
        sides: [Side::new(), Side::new()],
    }));
    if let Ok(mut s) = shared.lock() {
        s.write(json!({"kind": "start", "command": command}));
    }
    let observer = |dir| Observer {
        dir,
        lines: LineDecoder::new(),
        // As deep as the decoder goes: MCP sets no depth limit, and tap only watches.
        decoder: Decoder::new(DecoderConfig {
            max_depth: 1024,
            ..DecoderConfig::default()
        }),
        shared: Arc::clone(&shared),
    };

    // Host → server, on its own thread.
    let mut child_in = child.stdin.take();
    let mut up = observer(Dir::ClientToServer);
    let upstream = std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        let mut refused = None;
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
            if let Err(e) = pipe.write_all(&buf[..n]).and_then(|()| pipe.flush()) {
                refused = Some(e);
                break;
            }
        }
        drop(stdin);
        up.finish();
        match refused {
            None => up.log(json!({"dir": Dir::ClientToServer.name(), "kind": "eof"})),
            // The server stopped reading (EPIPE, as a rule): the host must learn it as it would
            // without tap, from its own writes failing, not by blocking once the pipe is full.
            // Logged first: the server's end, and the exit entry, may follow at once.
            Some(e) => {
                up.log(json!({
                    "dir": Dir::ClientToServer.name(), "kind": "closed",
                    "error": e.to_string(),
                }));
                close_own_stdin();
            }
        }
        // Closing the server's stdin is how the host ends the session. It comes after the
        // entry above, so that the exit entry, which the server's end leads to, follows it.
        drop(child_in);
    });

    // The server is waited for on a thread of its own: its end is news even while its output
    // stays open (a process it started holds it) or the host does not read.
    let child_out = child.stdout.take();
    let exited: Arc<Mutex<Option<std::io::Result<std::process::ExitStatus>>>> =
        Arc::new(Mutex::new(None));
    let waiter = {
        let (exited, reaped) = (Arc::clone(&exited), Arc::clone(&reaped));
        std::thread::spawn(move || {
            // (Through `reap`: the signal relay forgets the pid before it is freed.)
            let status = crate::signals::reap(&mut child, true)
                .unwrap_or_else(|| Err(std::io::Error::other("no status")));
            reaped.store(true, Ordering::SeqCst);
            *exited.lock().unwrap_or_else(|p| p.into_inner()) = Some(status);
        })
    };
    let has_exited = || exited.lock().map(|e| e.is_some()).unwrap_or(true);
    // Bytes written to the host so far, and whether the main thread is done with them.
    let written = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // Ends tap (the exit entry, then the process) when the host, having signalled tap, no
    // longer reads what the gone server wrote.
    {
        let (exited, written, done) =
            (Arc::clone(&exited), Arc::clone(&written), Arc::clone(&done));
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            let mut last = (u64::MAX, Instant::now());
            loop {
                std::thread::sleep(Duration::from_millis(100));
                if done.load(Ordering::SeqCst) {
                    return;
                }
                let gone = exited.lock().map(|e| e.is_some()).unwrap_or(true);
                let now = written.load(Ordering::SeqCst);
                if !gone || crate::signals::caught().is_none() || now != last.0 {
                    last = (now, Instant::now());
                    continue;
                }
                if last.1.elapsed() >= STALLED {
                    let code = finish(&shared, &exited, &done);
                    std::process::exit(code);
                }
            }
        });
    }

    // Server → host, here.
    let mut down = observer(Dir::ServerToClient);
    if let Some(mut child_out) = child_out {
        let mut stdout = std::io::stdout().lock();
        let mut buf = vec![0u8; 64 * 1024];
        let mut quiet_since: Option<Instant> = None;
        loop {
            // Wait for output, a quarter second at a time, to see the server's end.
            if !readable(&child_out, Duration::from_millis(250)) {
                if has_exited() {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= LINGER {
                        break; // the server is gone; what holds its output open is not it
                    }
                }
                continue;
            }
            quiet_since = None;
            let n = match child_out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            down.observe(&buf[..n]);
            // A piece at a time, counted as it goes: a blocking write to a pipe returns once
            // all of it went, and a host that reads slowly would take longer than STALLED
            // over a whole read's worth, though it never stopped reading.
            let progress = buf[..n].chunks(WRITE_PIECE).try_for_each(|piece| {
                write_waiting(&mut stdout, piece)?;
                written.fetch_add(piece.len() as u64, Ordering::SeqCst);
                Ok::<_, std::io::Error>(())
            });
            if progress.is_err() {
                break;
            }
        }
        // Nothing more comes from the server: its end reaches the host now, not once the
        // server exits (a host that waits for the end of the output before closing the
        // server's input would wait for good).
        let _ = stdout.flush();
        drop(stdout);
        close_own_stdout();
    }
    down.finish();
    let _ = waiter.join(); // (the server's status is in `exited` then)
    let code = finish(&shared, &exited, &done);
    // The host may keep its stdin open; the session is over once the server has gone.
    drop(upstream);
    code
}

/// Writes the `exit` entry for the server's end (once: `done` says it was written) and gives
/// the code tap ends with: the server's, or 128 + the signal that killed it, as a shell
/// reports it.
fn finish(
    shared: &Mutex<Shared>,
    exited: &Mutex<Option<std::io::Result<std::process::ExitStatus>>>,
    done: &AtomicBool,
) -> i32 {
    let status = exited.lock().unwrap_or_else(|p| p.into_inner());
    let status = status.as_ref().and_then(|s| s.as_ref().ok());
    let signal = status.and_then(killed_by);
    let code = match signal {
        Some(signal) => 128 + signal,
        None => status.and_then(|s| s.code()).unwrap_or(1),
    };
    // The last entry, complete: written under the lock, which no other entry holds now, and
    // closing the log, so that the other thread's later entries (the host may still write)
    // are dropped rather than following it or being cut off by the process's exit.
    if let Ok(mut s) = shared.lock()
        && !done.swap(true, Ordering::SeqCst)
    {
        let entry = exit_entry(&s, code, signal);
        s.write_last(entry);
    }
    code
}

/// Whether `pipe` has something to read (or its end) within `wait`.
fn readable(pipe: &std::process::ChildStdout, wait: Duration) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let mut fds = [libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is one valid, writable pollfd for the duration of the call, on a
        // descriptor `pipe` keeps open. An interrupted wait reads as nothing yet.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) > 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = (pipe, wait);
        true
    }
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
pub(crate) fn write_waiting(out: &mut impl Write, mut bytes: &[u8]) -> std::io::Result<()> {
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Entries past the log's queue are dropped, not waited for, and the next entry the log
    /// takes is preceded by a `dropped` entry that counts them; the end waits for the rest.
    #[test]
    fn a_full_log_queue_drops_entries_and_counts_them() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let file = File::from(std::os::fd::OwnedFd::from(writer));
        let mut shared = Shared {
            start: Instant::now(),
            log: LogSink::new(file),
            dropped: 0,
            line: Vec::new(),
            closed: false,
            sides: [Side::new(), Side::new()],
        };
        // Nobody reads yet: the pipe takes 64 KiB, the queue 8 MiB, and the rest is dropped.
        let text = "x".repeat(1000);
        for _ in 0..10_000 {
            shared.write(json!({"kind": "notification", "text": text}));
        }
        assert!(shared.dropped > 1000, "{} dropped", shared.dropped);
        let reading = std::thread::spawn(move || {
            let mut log = String::new();
            reader.read_to_string(&mut log).unwrap();
            log
        });
        shared.write_last(json!({"kind": "exit"}));
        drop(shared); // (the writer thread holds the pipe until it ends)
        let log = reading.join().unwrap();
        let entries: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kept = entries
            .iter()
            .filter(|e| e["kind"] == "notification")
            .count() as u64;
        let counted: u64 = entries
            .iter()
            .filter(|e| e["kind"] == "dropped")
            .map(|e| e["entries"].as_u64().unwrap())
            .sum();
        assert_eq!(
            kept + counted,
            10_000,
            "{kept} kept, {counted} counted as dropped"
        );
        assert!(counted > 1000);
        assert_eq!(entries.last().unwrap()["kind"], "exit");
    }
}
