//! Fuzz target `tasks`: the server's task table ([`mcpwire::tasks::Tasks`]) under arbitrary
//! sequences of the application's calls and the client's tasks methods, in both versions,
//! checked against a model of what each call must do.
//!
//! Input: a [`TasksSetup`] (small bounds, a TTL or none, a broken random source or not, any
//! wall clock) and [`TasksOp`]s, as `arbitrary` reads them. The client's methods reach the
//! table three ways: `answer` (2026-07-28), `answer_legacy` for two requestors without a
//! connection, and `serve_legacy` for a third whose requests arrive on a real server
//! [`Connection`] (2025-11-25, small inbound limit) and which may cancel them.
//!
//! Invariants: no panic; each call succeeds or fails exactly as the model says (unknown,
//! terminal, reused key, too many input requests, invalid payload, a full table only when no
//! terminal task whose end a client fetched could make room, repeats only from a broken random
//! source); a task's status, its cancel flag and the table's size match the model after every
//! step, and a terminal task never changes; a task leaves the table only when it expired or,
//! terminal and fetched (`tasks/get`, `tasks/result`, `tasks/cancel`), made room; the
//! table stays within `max_tasks` and each requestor within `max_tasks_per_owner`; the JSON
//! the table writes for a task (one, on one step in four) parses and names the task and status
//! it should; `tasks/list` lists the requestor's own tasks, in creation order; the events come
//! in the order the model expects;
//! every waiting `tasks/result` is answered exactly once when its task ends or expires (one the
//! client cancelled, at most once), with the answer the task's end calls for; after
//! `handle_timeout(now)` no deadline at or before `now` remains.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, Event};
use mcpwire::jsonrpc::{Id, OwnedId, RawJson};
use mcpwire::mcp::{self, ProtocolVersion};
use mcpwire::tasks::{
    LegacyAnswer, MAX_RESULT_WAITERS, TaskConfig, TaskError, TaskEvent, TaskStatus, Tasks,
};
use serde_json::Value;

use super::Rng;

/// Texts for messages and results: plain, empty, quoted, control characters, non-ASCII, long.
fn text(choice: u8) -> &'static str {
    const TEXTS: [&str; 6] = [
        "working",
        "",
        "say \"hi\" \\",
        "tab\tnul\u{0}bell\u{7}",
        "h\u{e9}llo \u{2713} \u{1f600}",
        "a much longer status message, repeated: a much longer status message, repeated",
    ];
    TEXTS[usize::from(choice) % TEXTS.len()]
}

/// The requestor whose 2025-11-25 requests arrive on a real connection (`serve_legacy`).
const CONN_OWNER: u64 = 0;
/// The server connection's inbound limit: small, so that cancelled `tasks/result` requests
/// free places the client then fills again.
const CONN_INBOUND: usize = 8;

/// The table's bounds and clock.
#[derive(Arbitrary, Debug, Clone)]
pub struct TasksSetup {
    pub max_tasks: u8,
    pub per_owner: u8,
    /// Tenths of a second (1 to 50), or no TTL.
    pub ttl: Option<u8>,
    pub poll_ms: u32,
    pub max_input: u8,
    pub max_payload: u16,
    pub broken_random: bool,
    pub unix_ms: u64,
}

/// Which task a call names.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum TaskRef {
    /// One the model knows: mostly one of the last four made, else any.
    Known(u8),
    /// An id never handed out.
    Unknown,
    /// No `taskId` member.
    Missing,
    /// A `taskId` that is not a string.
    NotString,
}

/// A result, error data or input request.
#[derive(Arbitrary, Debug, Clone)]
pub enum Payload {
    Empty,
    ToolError,
    NotObject,
    /// Just over `max_payload`.
    Big,
    /// A `_meta` with a related-task member of its own.
    RelatedMeta,
    /// A `_meta` that is not an object.
    BadMeta,
    /// `isError` twice.
    DupIsError,
    /// `_meta` twice: no result (the related-task metadata could not be merged in).
    DupMeta,
    Text(u8),
    /// The `data` of -32042: URL elicitations to complete.
    Elicitations,
}

/// An error code for `fail`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Code {
    Internal,
    InvalidParams,
    ResourceNotFound,
    UrlElicitation,
    HeaderMismatch,
    Reserved,
    Any(i64),
}

/// One call.
#[derive(Arbitrary, Debug, Clone)]
pub enum TasksOp {
    /// A task for requestor `owner % 4` (3: a 2026-07-28 task, without one).
    Create {
        owner: u8,
    },
    SetMessage {
        task: TaskRef,
        message: Option<u8>,
    },
    Ask {
        task: TaskRef,
        key: u8,
        payload: Payload,
    },
    Resume {
        task: TaskRef,
    },
    Complete {
        task: TaskRef,
        payload: Payload,
    },
    Fail {
        task: TaskRef,
        code: Code,
        message: u8,
        data: Option<Payload>,
    },
    Cancel {
        task: TaskRef,
    },
    Advance {
        ms: u16,
    },
    Timeout,
    /// 2026-07-28: `tasks/get`, `tasks/update`, `tasks/cancel` or another method.
    Answer {
        method: u8,
        task: TaskRef,
        /// Input-request keys answered: the first `count % 4`.
        keys: [u8; 3],
        count: u8,
        not_object: bool,
    },
    /// 2025-11-25 from requestor 1 or 2, without a connection.
    AnswerLegacy {
        owner: bool,
        method: u8,
        task: TaskRef,
    },
    /// 2025-11-25 from the connection's requestor; `cancel` cancels the request afterwards.
    Served {
        method: u8,
        task: TaskRef,
        cancel: bool,
    },
    PollEvents,
    PollResults,
}

/// How far a run got, for the check that random inputs reach what the target is for.
#[derive(Debug, Default, Clone, Copy)]
pub struct TasksReached {
    pub created: usize,
    pub full: usize,
    pub evicted: usize,
    pub expired: usize,
    pub input_events: usize,
    pub answered_waiters: usize,
    pub served_waits: usize,
    pub cancelled_waits: usize,
    pub ended: usize,
}

impl TasksReached {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &TasksReached) {
        self.created += other.created;
        self.full += other.full;
        self.evicted += other.evicted;
        self.expired += other.expired;
        self.input_events += other.input_events;
        self.answered_waiters += other.answered_waiters;
        self.served_waits += other.served_waits;
        self.cancelled_waits += other.cancelled_waits;
        self.ended += other.ended;
    }
}

/// What the model knows of a task.
struct Model {
    id: String,
    owner: Option<u64>,
    created: Timestamp,
    status: TaskStatus,
    /// Outstanding input-request keys, in order.
    asked: Vec<String>,
    keys: HashSet<String>,
    cancel_requested: bool,
    /// Completed with a result (rather than failed with an error object).
    tool_result: bool,
    /// The code of `fail`, as written.
    error_code: Option<i64>,
    /// `tasks/result` requests waiting: (requestor, request id).
    waiters: Vec<(u64, i64)>,
    /// Terminal, and a client was given how it ended: only then may it make room.
    fetched: bool,
    gone: bool,
}

/// What a waiting `tasks/result` must be answered with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Result,
    Error(i64),
}

struct Harness {
    tasks: Tasks,
    setup: TaskConfig,
    broken_random: bool,
    now: Timestamp,
    rng: Rng,
    model: Vec<Model>,
    events: VecDeque<TaskEvent>,
    /// Waiters whose task ended: their answer is due from `poll_result`.
    due: HashMap<(u64, i64), Expect>,
    /// Requests of the connection's requestor that the client cancelled.
    cancelled: HashSet<i64>,
    next_id: i64,
    conn: Connection,
    reached: TasksReached,
}

fn raw(text: &str) -> RawJson<'_> {
    RawJson::new(text).expect("the harness writes valid JSON")
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("invalid JSON from the table ({e}): {text}"))
}

fn status_str(s: TaskStatus) -> &'static str {
    s.as_str()
}

impl Harness {
    fn new(setup: &TasksSetup, seed: u64) -> Harness {
        let config = TaskConfig {
            max_tasks: 1 + usize::from(setup.max_tasks % 8),
            max_tasks_per_owner: 1 + usize::from(setup.per_owner % 4),
            ttl: setup
                .ttl
                .map(|t| Duration::from_millis(100 * (1 + u64::from(t % 50)))),
            poll_interval: Duration::from_millis(u64::from(setup.poll_ms)),
            max_input_requests: usize::from(setup.max_input % 4),
            max_payload: 32 + usize::from(setup.max_payload % 1024),
        };
        let mut server = Config::server("fuzz", "1")
            .with_capabilities(
                r#"{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}"#,
            )
            .expect("valid capabilities");
        server.limits.max_inbound_in_flight = CONN_INBOUND;
        let now = Timestamp::from_nanos(1_000_000_000);
        let mut conn = Connection::new(server, now).expect("a valid config");
        conn.handle_input(
            now,
            concat!(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
                "\n",
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                "\n"
            )
            .as_bytes(),
        );
        let mut h = Harness {
            tasks: Tasks::new(config.clone(), now, setup.unix_ms),
            setup: config,
            broken_random: setup.broken_random,
            now,
            rng: Rng::new(seed),
            model: Vec::new(),
            events: VecDeque::new(),
            due: HashMap::new(),
            cancelled: HashSet::new(),
            next_id: 1,
            conn,
            reached: TasksReached::default(),
        };
        h.drain_conn();
        assert_eq!(
            h.conn.protocol_version(),
            Some(ProtocolVersion::V2025_11_25),
            "the handshake"
        );
        h
    }

    /// The conn's events and output, dropped (answers are checked where they are written).
    fn drain_conn(&mut self) -> Vec<Value> {
        while self.conn.poll_event().is_some() {}
        let mut out = Vec::new();
        while let Some(t) = self.conn.poll_transmit() {
            let n = t.bytes.len();
            out.extend_from_slice(t.bytes);
            self.conn.consume_transmit(n);
        }
        out.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("the connection writes JSON lines"))
            .collect()
    }

    fn pick(&self, r: TaskRef) -> Option<usize> {
        match r {
            // Mostly one of the last four made (likelier alive), else any.
            TaskRef::Known(i) if !self.model.is_empty() => {
                let n = self.model.len();
                Some(if i < 192 {
                    n - 1 - usize::from(i) % n.min(4)
                } else {
                    usize::from(i) % n
                })
            }
            _ => None,
        }
    }

    /// The id a call names: a known task's, or one that is not.
    fn task_text(&self, r: TaskRef) -> String {
        match self.pick(r) {
            Some(i) => self.model[i].id.clone(),
            None => "0123456789abcdef0123456789abcdef".to_owned(),
        }
    }

    /// The params of a tasks request naming `r`.
    fn params(&self, r: TaskRef, extra: &str) -> String {
        match r {
            TaskRef::Missing => format!("{{{extra}}}"),
            TaskRef::NotString => {
                let sep = if extra.is_empty() { "" } else { "," };
                format!(r#"{{"taskId":5{sep}{extra}}}"#)
            }
            _ => {
                let sep = if extra.is_empty() { "" } else { "," };
                format!(r#"{{"taskId":"{}"{sep}{extra}}}"#, self.task_text(r))
            }
        }
    }

    /// The model entry of a live task in the table, by the name the call used.
    fn present(&self, r: TaskRef) -> Option<usize> {
        self.pick(r).filter(|&i| !self.model[i].gone)
    }

    fn payload(&self, p: &Payload) -> String {
        match p {
            Payload::Empty => r#"{"content":[]}"#.to_owned(),
            Payload::ToolError => r#"{"content":[],"isError":true}"#.to_owned(),
            Payload::NotObject => "[1,2]".to_owned(),
            Payload::Big => format!(r#"{{"x":"{}"}}"#, "a".repeat(self.setup.max_payload)),
            Payload::RelatedMeta => {
                r#"{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"},"k":1},"a":1}"#
                    .to_owned()
            }
            Payload::BadMeta => r#"{"_meta":5,"a":[]}"#.to_owned(),
            Payload::DupIsError => r#"{"isError":true,"isError":false}"#.to_owned(),
            Payload::DupMeta => r#"{"_meta":{},"_meta":{"a":1}}"#.to_owned(),
            Payload::Elicitations => concat!(
                r#"{"elicitations":[{"mode":"url","elicitationId":"e1","#,
                r#""url":"https://example.com/auth","message":"Sign in"}]}"#
            )
            .to_owned(),
            Payload::Text(t) => {
                format!(r#"{{"text":{}}}"#, serde_json::to_string(text(*t)).unwrap())
            }
        }
    }

    fn payload_fits(&self, text: &str) -> bool {
        text.starts_with('{')
            && text.len() <= self.setup.max_payload
            && raw(text).get_unique("_meta").is_ok()
    }

    /// What `ask` is given for `p`: an input request of Multi Round-Trip Requests for the
    /// payloads that stand for one (the big one over the bound), the payload itself, which is
    /// no input request, for the others.
    fn input_request(&self, p: &Payload) -> String {
        match p {
            Payload::Empty => r#"{"method":"roots/list"}"#.to_owned(),
            Payload::ToolError => {
                r#"{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}"#
                    .to_owned()
            }
            Payload::Text(t) => format!(
                r#"{{"method":"elicitation/create","params":{{"message":{},"requestedSchema":{{"type":"object","properties":{{}}}}}}}}"#,
                serde_json::to_string(text(*t)).unwrap()
            ),
            Payload::RelatedMeta => {
                r#"{"method":"roots/list","params":{"_meta":{"k":1}}}"#.to_owned()
            }
            Payload::Elicitations => concat!(
                r#"{"method":"elicitation/create","params":{"mode":"url","elicitationId":"e1","#,
                r#""url":"https://example.com/auth","message":"Sign in"}}"#
            )
            .to_owned(),
            Payload::Big => format!(
                r#"{{"method":"roots/list","params":{{"p":"{}"}}}}"#,
                "a".repeat(self.setup.max_payload)
            ),
            other => self.payload(other),
        }
    }

    /// Whether `ask` takes `text` from [`input_request`](Self::input_request).
    fn input_fits(&self, text: &str) -> bool {
        self.payload_fits(text) && text.starts_with(r#"{"method":"#)
    }

    /// The error a call on a task that must be live gets, if any.
    fn live_error(&self, r: TaskRef) -> Result<usize, TaskError> {
        let i = self.present(r).ok_or(TaskError::UnknownTask)?;
        if self.model[i].status.is_terminal() {
            return Err(TaskError::Terminal);
        }
        Ok(i)
    }

    /// The model's side of a task reaching `status`: its input requests dropped, its waiters due.
    fn finish(&mut self, i: usize, status: TaskStatus) {
        let m = &mut self.model[i];
        m.status = status;
        m.asked.clear();
        let expect = match (status, m.tool_result, m.error_code) {
            (TaskStatus::Failed, false, Some(code)) => Expect::Error(code),
            (TaskStatus::Completed | TaskStatus::Failed, true, _) => Expect::Result,
            _ => Expect::Error(-32603),
        };
        // Waiting `tasks/result` requests are answered with how it ended.
        m.fetched |= !m.waiters.is_empty();
        for w in std::mem::take(&mut m.waiters) {
            assert!(
                self.due.insert(w, expect).is_none(),
                "a waiter twice: {w:?}"
            );
        }
        self.reached.ended += 1;
    }

    /// Whether terminal task `m` may leave before its TTL to make room: its end was fetched,
    /// it was cancelled (no result to lose), or the table has no TTL.
    fn may_go(&self, m: &Model) -> bool {
        m.status.is_terminal()
            && (m.fetched || m.status == TaskStatus::Cancelled || self.setup.ttl.is_none())
    }

    fn create(&mut self, owner: u8) {
        let owner = match owner % 4 {
            3 => None,
            o => Some(u64::from(o)),
        };
        let broken = self.broken_random;
        let rng = &mut self.rng;
        let mut random = |buf: &mut [u8]| {
            if broken {
                buf.fill(7);
            } else {
                for b in buf.iter_mut() {
                    *b = rng.below(256) as u8;
                }
            }
        };
        let made = match owner {
            Some(o) => self.tasks.create_legacy(self.now, &mut random, o),
            None => self.tasks.create(self.now, &mut random),
        };
        // What could make room: a terminal task of the requestor's (at its cap), or any.
        let live = |m: &&Model| !m.gone;
        let held = self
            .model
            .iter()
            .filter(live)
            .filter(|m| owner.is_some() && m.owner == owner)
            .count();
        let owner_room = held < self.setup.max_tasks_per_owner
            || self
                .model
                .iter()
                .filter(live)
                .any(|m| m.owner == owner && self.may_go(m));
        let total = self.model.iter().filter(live).count();
        let table_room =
            total < self.setup.max_tasks || self.model.iter().filter(live).any(|m| self.may_go(m));
        match made {
            Ok(id) => {
                assert!(
                    owner.is_none() || owner_room,
                    "a task for a requestor at its cap"
                );
                assert!(table_room, "a task in a full table");
                assert_eq!(id.len(), 32, "{id}");
                assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
                // An id given again (a broken source) belongs to a task that left the table,
                // before or by this call (a terminal one, dropped to make room).
                if let Some(old) = self.model.iter().position(|m| m.id == id) {
                    let old_task = &self.model[old];
                    assert!(
                        old_task.gone || old_task.status.is_terminal(),
                        "an id in use given again: {id}"
                    );
                    self.model.remove(old);
                }
                self.model.push(Model {
                    id,
                    owner,
                    created: self.now,
                    status: TaskStatus::Working,
                    asked: Vec::new(),
                    keys: HashSet::new(),
                    cancel_requested: false,
                    tool_result: false,
                    error_code: None,
                    waiters: Vec::new(),
                    fetched: false,
                    gone: false,
                });
                self.reached.created += 1;
                // Room was made by dropping terminal tasks: the sync finds which.
            }
            Err(TaskError::Full) => {
                self.reached.full += 1;
                let owner_full = owner.is_some() && !owner_room;
                // (When the owner's terminal task made room, the table has room too.)
                assert!(owner_full || !table_room, "Full with room to spare");
            }
            Err(TaskError::RandomRepeats) => assert!(broken, "repeats from a good source"),
            Err(e) => panic!("create: {e:?}"),
        }
    }

    /// Reconciles the model with the table: a task may have left only if it expired, or if it
    /// was terminal (dropped to make room). Checks status, flags, size and bounds.
    fn sync(&mut self) {
        for m in self.model.iter_mut().filter(|m| !m.gone) {
            match self.tasks.status(&m.id) {
                Some(s) => {
                    assert_eq!(s, m.status, "status of {}", m.id);
                    assert_eq!(
                        self.tasks.cancel_requested(&m.id),
                        m.cancel_requested,
                        "cancel flag of {}",
                        m.id
                    );
                }
                None => {
                    // Live tasks leave only at `handle_timeout` (see `timeout`); before its TTL a
                    // task leaves only once terminal and fetched (or cancelled, or without a
                    // TTL).
                    let may_go = m.status.is_terminal()
                        && (m.fetched
                            || m.status == TaskStatus::Cancelled
                            || self.setup.ttl.is_none());
                    assert!(
                        may_go,
                        "{} left the table while {:?}, fetched: {}",
                        m.id, m.status, m.fetched
                    );
                    m.gone = true;
                    self.reached.evicted += 1;
                }
            }
        }
        // Tasks long gone are forgotten (calls may still name recent ones), so that a step
        // costs the same at the end of a long run as at its start.
        while self.model.len() > 32 {
            let Some(at) = self.model.iter().position(|m| m.gone) else {
                break;
            };
            self.model.remove(at);
        }
        let live: Vec<&Model> = self.model.iter().filter(|m| !m.gone).collect();
        assert_eq!(self.tasks.len(), live.len(), "table size");
        assert!(live.len() <= self.setup.max_tasks);
        for owner in 0..3 {
            let held = live.iter().filter(|m| m.owner == Some(owner)).count();
            assert!(
                held <= self.setup.max_tasks_per_owner,
                "owner {owner}: {held}"
            );
        }
        // The JSON the table writes for a task, for one task on one step in four (256 steps
        // make about 64 checks, and the table's state, not the step, decides what it writes):
        // read with the engine's strict validator, and on one check in eight parsed by
        // serde_json as well, so that the check stays independent of the engine. Checking
        // every step cost the target half its speed under ASan.
        if !live.is_empty() && self.rng.below(4) == 0 {
            let m = live[self.rng.below(live.len())];
            let created = self.tasks.create_result(&m.id).expect("a live task");
            let detailed = self.tasks.detailed(&m.id).expect("a live task");
            let (method, note) = self.tasks.status_notification(&m.id).expect("a live task");
            assert_eq!(
                method,
                if m.owner.is_some() {
                    "notifications/tasks/status"
                } else {
                    "notifications/tasks"
                }
            );
            check_json_fast(&created, &detailed, &note, m);
            if self.rng.below(8) == 0 {
                check_json_full(&created, &detailed, &note, m);
            }
        }
    }

    /// `handle_timeout`: expired tasks leave, live ones with an event and their waiters due.
    fn timeout(&mut self) {
        self.tasks.handle_timeout(self.now);
        self.conn.handle_timeout(self.now);
        if let Some(ttl) = self.setup.ttl {
            for i in 0..self.model.len() {
                let m = &self.model[i];
                if m.gone || m.created.after(ttl) > self.now {
                    continue;
                }
                if !m.status.is_terminal() {
                    self.reached.expired += 1;
                    self.events
                        .push_back(TaskEvent::Expired { task: m.id.clone() });
                    let waiters = std::mem::take(&mut self.model[i].waiters);
                    for w in waiters {
                        assert!(self.due.insert(w, Expect::Error(-32602)).is_none());
                    }
                }
                self.model[i].gone = true;
                assert_eq!(
                    self.tasks.status(&self.model[i].id),
                    None,
                    "expired, still there"
                );
            }
        }
        if let Some(at) = self.tasks.poll_timeout() {
            assert!(at > self.now, "a deadline left at or before now");
        }
    }

    fn poll_events(&mut self) {
        while let Some(ev) = self.tasks.poll_event() {
            let want = self.events.pop_front();
            if matches!(ev, TaskEvent::Input { .. }) {
                self.reached.input_events += 1;
            }
            assert_eq!(Some(&ev), want.as_ref(), "events out of step");
        }
        assert!(self.events.is_empty(), "events missing: {:?}", self.events);
    }

    fn poll_results(&mut self) {
        while let Some(ready) = self.tasks.poll_result() {
            let OwnedId::Int(n) = ready.id else {
                panic!("an id the harness never used: {:?}", ready.id)
            };
            let expect = self
                .due
                .remove(&(ready.owner, n))
                .unwrap_or_else(|| panic!("an answer not due: {:?}", (ready.owner, n)));
            self.reached.answered_waiters += 1;
            match (&ready.answer, expect) {
                (LegacyAnswer::Result(r), Expect::Result) => {
                    let r = parse(r);
                    assert!(
                        r["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].is_string(),
                        "{r}"
                    );
                }
                (LegacyAnswer::Error { code, .. }, Expect::Error(want)) => {
                    assert_eq!(*code, want)
                }
                (got, want) => panic!("answered {got:?}, want {want:?}"),
            }
            if ready.owner == CONN_OWNER {
                // Refused when the client cancelled it (nothing is sent then).
                let written = self.tasks.write_ready(&mut self.conn, &ready);
                assert!(
                    written.is_ok() || self.cancelled.contains(&n),
                    "{written:?} for a live request"
                );
                if self.cancelled.contains(&n) {
                    // Nothing went out: the task's end was not given after all, and it stays
                    // for the client's retry.
                    if let Some(m) = self.model.iter_mut().find(|m| m.id == ready.task) {
                        m.fetched = false;
                    }
                }
                self.drain_conn();
            }
        }
    }

    fn answer(&mut self, method: u8, r: TaskRef, keys: &[u8], not_object: bool) {
        let method = [
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "tasks/list",
            "tools/call",
        ][usize::from(method % 5)];
        let responses = if not_object {
            r#""inputResponses":[1]"#.to_owned()
        } else {
            let members: Vec<String> = keys
                .iter()
                .take(6)
                .map(|k| format!(r#""k{}":{{"action":"accept"}}"#, k % 5))
                .collect();
            format!(r#""inputResponses":{{{}}}"#, members.join(","))
        };
        let params = self.params(
            r,
            if method == "tasks/update" {
                &responses
            } else {
                ""
            },
        );
        // (Declaring every capability an input request needs: the -32021 of a requestor that
        // declared less is tests/tasks.rs's.)
        let declared = mcp::Caps::ROOTS
            | mcp::Caps::SAMPLING
            | mcp::Caps::ELICITATION
            | mcp::Caps::ELICITATION_FORM
            | mcp::Caps::ELICITATION_URL;
        let got = self
            .tasks
            .answer(self.now, declared, method, Some(raw(&params)));
        if !matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel") {
            assert!(got.is_none(), "{method} answered");
            return;
        }
        let got = got.expect("a tasks method is answered");
        let target = self
            .present(r)
            .filter(|&i| self.model[i].owner.is_none())
            .filter(|_| matches!(r, TaskRef::Known(_)));
        let Some(i) = target else {
            assert!(matches!(got, Err((-32602, _, _))), "{got:?}");
            return;
        };
        // A key written twice is refused whole, as is what is no object.
        let taken: Vec<u8> = keys.iter().take(6).map(|k| k % 5).collect();
        let repeated = (1..taken.len()).any(|i| taken[..i].contains(&taken[i]));
        if method == "tasks/update" && (not_object || repeated) {
            assert!(matches!(got, Err((-32602, _, _))), "{got:?}");
            return;
        }
        let text = got.unwrap_or_else(|e| panic!("{method}: {e:?}"));
        match method {
            "tasks/get" => {
                check_detailed(&parse(&text), &self.model[i]);
                let m = &mut self.model[i];
                m.fetched |= m.status.is_terminal();
            }
            "tasks/update" => {
                assert_eq!(text, "{}");
                let mut answered = false;
                for k in keys.iter().take(6) {
                    let key = format!("k{}", k % 5);
                    let m = &mut self.model[i];
                    if let Some(at) = m.asked.iter().position(|a| *a == key) {
                        m.asked.remove(at);
                        answered = true;
                        self.events.push_back(TaskEvent::Input {
                            task: m.id.clone(),
                            key,
                            response: r#"{"action":"accept"}"#.to_owned(),
                        });
                    }
                }
                let m = &mut self.model[i];
                if answered && m.asked.is_empty() && m.status == TaskStatus::InputRequired {
                    m.status = TaskStatus::Working;
                }
            }
            _ => {
                assert_eq!(text, "{}");
                let m = &mut self.model[i];
                if !m.status.is_terminal() && !m.cancel_requested {
                    m.cancel_requested = true;
                    self.events
                        .push_back(TaskEvent::CancelRequested { task: m.id.clone() });
                }
            }
        }
    }

    /// A 2025-11-25 tasks method from `owner` with request id `n`: what the table answered
    /// (`None`: not a tasks method), checked against the model.
    fn legacy(&mut self, owner: u64, n: i64, method: u8, r: TaskRef) -> Option<LegacyAnswer> {
        let method = [
            "tasks/get",
            "tasks/result",
            "tasks/cancel",
            "tasks/list",
            "tasks/list+cursor",
            "tools/list",
        ][usize::from(method % 6)];
        let (method, params) = match method {
            "tasks/list" => (method, "{}".to_owned()),
            "tasks/list+cursor" => ("tasks/list", r#"{"cursor":"c"}"#.to_owned()),
            _ => (method, self.params(r, "")),
        };
        let got = if owner == CONN_OWNER {
            // Through the connection: the request as the client sends it.
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"{method}","params":{params}}}"#);
            self.conn
                .handle_input(self.now, format!("{line}\n").as_bytes());
            let mut arrived = false;
            while let Some(ev) = self.conn.poll_event() {
                if let Event::Request { id, .. } = ev {
                    arrived |= id == Id::Int(n);
                }
            }
            if !arrived {
                // Refused by the connection (its inbound limit): answered with an error there.
                self.drain_conn();
                return None;
            }
            let served = self
                .tasks
                .serve_legacy(
                    self.now,
                    owner,
                    &mut self.conn,
                    Id::Int(n),
                    method,
                    Some(raw(&params)),
                )
                .expect("serve_legacy writes its answer");
            let out = self.drain_conn();
            let answered = out.iter().find(|v| v["id"] == n);
            if !served {
                assert!(answered.is_none());
                let _ = self.conn.respond_error(Id::Int(n), -32601, "no", None);
                self.drain_conn();
                return None;
            }
            // The same answer again from answer_legacy would change the table twice: rebuild
            // what it was from the line written (or its absence: a wait).
            match answered {
                None => Some(LegacyAnswer::Wait),
                Some(v) if v.get("result").is_some() => {
                    Some(LegacyAnswer::Result(v["result"].to_string()))
                }
                Some(v) => Some(LegacyAnswer::Error {
                    code: v["error"]["code"].as_i64().expect("an integer code"),
                    message: String::new(),
                    data: None,
                }),
            }
        } else {
            self.tasks
                .answer_legacy(self.now, owner, Id::Int(n), method, Some(raw(&params)))
        };
        if method == "tools/list" {
            assert!(got.is_none(), "tools/list answered by the table");
            return None;
        }
        let got = got.expect("a tasks method is answered");
        if method == "tasks/list" {
            if params.contains("cursor") {
                assert!(
                    matches!(got, LegacyAnswer::Error { code: -32602, .. }),
                    "{got:?}"
                );
                return Some(got);
            }
            let LegacyAnswer::Result(text) = &got else {
                panic!("tasks/list: {got:?}")
            };
            let listed: Vec<String> = parse(text)["tasks"]
                .as_array()
                .expect("an array of tasks")
                .iter()
                .map(|t| t["taskId"].as_str().expect("a string id").to_owned())
                .collect();
            let mine: Vec<String> = self
                .model
                .iter()
                .filter(|m| !m.gone && m.owner == Some(owner))
                .map(|m| m.id.clone())
                .collect();
            assert_eq!(listed, mine, "tasks/list of {owner}");
            return Some(got);
        }
        let target = self
            .present(r)
            .filter(|&i| self.model[i].owner == Some(owner))
            .filter(|_| matches!(r, TaskRef::Known(_)));
        let Some(i) = target else {
            assert!(
                matches!(got, LegacyAnswer::Error { code: -32602, .. }),
                "{got:?}"
            );
            return Some(got);
        };
        let terminal = self.model[i].status.is_terminal();
        match method {
            "tasks/get" => {
                let LegacyAnswer::Result(text) = &got else {
                    panic!("tasks/get: {got:?}")
                };
                let v = parse(text);
                assert_eq!(v["taskId"], self.model[i].id.as_str());
                assert_eq!(v["status"], status_str(self.model[i].status));
            }
            "tasks/result" if terminal => {
                self.model[i].fetched = true;
                let m = &self.model[i];
                match (&got, m.status, m.tool_result) {
                    (LegacyAnswer::Result(text), _, true) => {
                        let v = parse(text);
                        assert_eq!(
                            v["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                            m.id.as_str()
                        );
                    }
                    (LegacyAnswer::Error { code, .. }, TaskStatus::Failed, false) => {
                        // Through the connection, -32042 goes out as -32603: the client did
                        // not declare URL elicitation.
                        let want = match m.error_code {
                            Some(mcp::URL_ELICITATION_REQUIRED) if owner == CONN_OWNER => {
                                Some(-32603)
                            }
                            code => code,
                        };
                        assert_eq!(Some(*code), want)
                    }
                    (LegacyAnswer::Error { code: -32603, .. }, TaskStatus::Cancelled, _) => {}
                    other => panic!("tasks/result of an ended task: {other:?}"),
                }
            }
            "tasks/result" => {
                let waiting = self.model[i].waiters.len();
                if waiting >= MAX_RESULT_WAITERS {
                    // (Out of reach for the connection's requestor, whose cancelled waiters
                    // the model keeps: 256 steps make fewer.)
                    assert!(
                        matches!(got, LegacyAnswer::Error { code: -32603, .. }),
                        "{got:?}"
                    );
                } else {
                    assert_eq!(got, LegacyAnswer::Wait);
                    self.model[i].waiters.push((owner, n));
                    if owner == CONN_OWNER {
                        self.reached.served_waits += 1;
                    }
                }
            }
            _ => {
                if terminal {
                    assert!(
                        matches!(got, LegacyAnswer::Error { code: -32602, .. }),
                        "{got:?}"
                    );
                } else {
                    let LegacyAnswer::Result(text) = &got else {
                        panic!("tasks/cancel: {got:?}")
                    };
                    assert_eq!(parse(text)["status"], "cancelled");
                    let id = self.model[i].id.clone();
                    // The client asked, in this era too, and its answer says how it ended.
                    self.model[i].cancel_requested = true;
                    self.model[i].fetched = true;
                    self.finish(i, TaskStatus::Cancelled);
                    self.events
                        .push_back(TaskEvent::CancelRequested { task: id });
                }
            }
        }
        Some(got)
    }

    fn step(&mut self, op: &TasksOp) {
        let now = self.now;
        match op {
            TasksOp::Create { owner } => self.create(*owner),
            TasksOp::SetMessage { task, message } => {
                let id = self.task_text(*task);
                let got = self.tasks.set_message(now, &id, message.map(text));
                assert_eq!(got.err(), self.live_error(*task).err(), "set_message");
            }
            TasksOp::Ask { task, key, payload } => {
                let key = format!("k{}", key % 5);
                let request = self.input_request(payload);
                let id = self.task_text(*task);
                let got = self.tasks.ask(now, &id, &key, raw(&request));
                let want = self.live_error(*task).and_then(|i| {
                    let m = &self.model[i];
                    if !self.input_fits(&request) {
                        Err(TaskError::InvalidPayload)
                    } else if m.keys.contains(&key) {
                        Err(TaskError::KeyReused)
                    } else if m.asked.len() >= self.setup.max_input_requests {
                        Err(TaskError::TooManyInputRequests)
                    } else {
                        Ok(i)
                    }
                });
                assert_eq!(got.err(), want.err(), "ask");
                if let Ok(i) = want {
                    let m = &mut self.model[i];
                    m.keys.insert(key.clone());
                    m.asked.push(key);
                    m.status = TaskStatus::InputRequired;
                }
            }
            TasksOp::Resume { task } => {
                let id = self.task_text(*task);
                let got = self.tasks.resume(now, &id);
                let want = self.live_error(*task);
                assert_eq!(got.err(), want.err(), "resume");
                if let Ok(i) = want
                    && self.model[i].status == TaskStatus::InputRequired
                {
                    self.model[i].asked.clear();
                    self.model[i].status = TaskStatus::Working;
                }
            }
            TasksOp::Complete { task, payload } => {
                let result = self.payload(payload);
                let id = self.task_text(*task);
                let got = self.tasks.complete(now, &id, raw(&result));
                let want = self.live_error(*task).and_then(|i| {
                    if self.payload_fits(&result) {
                        Ok(i)
                    } else {
                        Err(TaskError::InvalidPayload)
                    }
                });
                assert_eq!(got.err(), want.err(), "complete");
                if let Ok(i) = want {
                    // 2025-11-25 counts a tool error as failed; `isError` twice is no verdict.
                    let failed =
                        self.model[i].owner.is_some() && matches!(payload, Payload::ToolError);
                    self.model[i].tool_result = true;
                    let status = if failed {
                        TaskStatus::Failed
                    } else {
                        TaskStatus::Completed
                    };
                    self.finish(i, status);
                }
            }
            TasksOp::Fail {
                task,
                code,
                message,
                data,
            } => {
                let code = match *code {
                    Code::Internal => -32603,
                    Code::InvalidParams => -32602,
                    Code::ResourceNotFound => mcp::RESOURCE_NOT_FOUND,
                    Code::UrlElicitation => mcp::URL_ELICITATION_REQUIRED,
                    Code::HeaderMismatch => mcp::HEADER_MISMATCH,
                    Code::Reserved => -32050,
                    Code::Any(n) => n,
                };
                let message = text(*message);
                let data = data.as_ref().map(|d| self.payload(d));
                let id = self.task_text(*task);
                let got = self
                    .tasks
                    .fail(now, &id, code, message, data.as_deref().map(raw));
                let want = self.live_error(*task);
                match (got, want) {
                    (Ok(()), Ok(i)) => {
                        let version = if self.model[i].owner.is_some() {
                            ProtocolVersion::V2025_11_25
                        } else {
                            ProtocolVersion::V2026_07_28
                        };
                        let written = if code == mcp::RESOURCE_NOT_FOUND {
                            mcp::resource_not_found_code(version)
                        } else {
                            code
                        };
                        assert!(mcp::error_code_allowed(written, version), "{written}");
                        self.model[i].error_code = Some(written);
                        self.finish(i, TaskStatus::Failed);
                        let detailed = parse(&self.tasks.detailed(&id).unwrap());
                        assert_eq!(detailed["error"]["code"], written);
                        assert_eq!(detailed["error"]["message"], message);
                    }
                    // Refused: a code the version lacks, or an error object too large.
                    (Err(TaskError::InvalidPayload), Ok(_)) => {}
                    (got, want) => assert_eq!(got.err(), want.err(), "fail"),
                }
            }
            TasksOp::Cancel { task } => {
                let id = self.task_text(*task);
                let got = self.tasks.cancel(now, &id);
                let want = self.live_error(*task);
                assert_eq!(got.err(), want.err(), "cancel");
                if let Ok(i) = want {
                    self.finish(i, TaskStatus::Cancelled);
                }
            }
            TasksOp::Advance { ms } => {
                self.now = self.now.after(Duration::from_millis(u64::from(*ms)));
            }
            TasksOp::Timeout => self.timeout(),
            TasksOp::Answer {
                method,
                task,
                keys,
                count,
                not_object,
            } => self.answer(*method, *task, &keys[..usize::from(count % 4)], *not_object),
            TasksOp::AnswerLegacy {
                owner,
                method,
                task,
            } => {
                let n = self.next_id;
                self.next_id += 1;
                self.legacy(1 + u64::from(*owner), n, *method, *task);
            }
            TasksOp::Served {
                method,
                task,
                cancel,
            } => {
                let n = self.next_id;
                self.next_id += 1;
                let got = self.legacy(CONN_OWNER, n, *method, *task);
                if *cancel && matches!(got, Some(LegacyAnswer::Wait)) {
                    self.conn.handle_input(
                        self.now,
                        format!(
                            "{}\n",
                            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":N}}"#
                                .replace('N', &n.to_string())
                        )
                        .as_bytes(),
                    );
                    self.drain_conn();
                    self.cancelled.insert(n);
                    self.reached.cancelled_waits += 1;
                }
            }
            TasksOp::PollEvents => self.poll_events(),
            TasksOp::PollResults => self.poll_results(),
        }
        self.sync();
    }

    /// Ends every task still running and takes every answer: each waiter not cancelled was
    /// answered exactly once.
    fn finish_all(&mut self) {
        for i in 0..self.model.len() {
            if !self.model[i].gone && !self.model[i].status.is_terminal() {
                let id = self.model[i].id.clone();
                self.tasks.cancel(self.now, &id).expect("a live task ends");
                self.finish(i, TaskStatus::Cancelled);
            }
        }
        self.poll_results();
        self.poll_events();
        // (One the client cancelled may have been dropped unanswered.)
        self.due
            .retain(|(owner, n), _| !(*owner == CONN_OWNER && self.cancelled.contains(n)));
        assert!(
            self.due.is_empty(),
            "waiting tasks/result never answered: {:?}",
            self.due
        );
    }
}

/// The members `keys` of object `v`, in one pass; each may be there once at most.
fn members<'a, const N: usize>(v: RawJson<'a>, keys: [&str; N]) -> [Option<RawJson<'a>>; N] {
    let found = v.get_each(keys);
    std::array::from_fn(|i| found.get(i).expect("members written once"))
}

fn text_of(v: Option<RawJson<'_>>) -> String {
    let v = v.expect("the member is there");
    v.as_str()
        .unwrap_or_else(|| panic!("{} is no string", v.get()))
        .to_str()
        .into_owned()
}

/// The table's JSON for task `m` (its creation result, its detailed form and its status
/// notification), read with the engine's strict validator, one pass over each object.
fn check_json_fast(created: &str, detailed: &str, note: &str, m: &Model) {
    let created = RawJson::new(created).expect("the table writes JSON");
    let handle = if m.owner.is_some() {
        members(created, ["task"])[0].expect("a task member")
    } else {
        created
    };
    let [id, status, kind] = members(handle, ["taskId", "status", "resultType"]);
    assert_eq!(text_of(id), m.id);
    assert_eq!(text_of(status), status_str(m.status));
    if m.owner.is_none() {
        assert_eq!(text_of(kind), "task");
    }
    let v = RawJson::new(detailed).expect("the table writes JSON");
    let [id, status, requests, result, error] =
        members(v, ["taskId", "status", "inputRequests", "result", "error"]);
    assert_eq!(text_of(id), m.id);
    assert_eq!(text_of(status), status_str(m.status), "{detailed}");
    match m.status {
        TaskStatus::InputRequired => {
            let mut keys: Vec<String> = requests
                .expect("input requests")
                .members()
                .map(|(k, _)| k.to_str().into_owned())
                .collect();
            let mut want = m.asked.clone();
            keys.sort_unstable();
            want.sort_unstable();
            assert_eq!(keys, want, "input requests of {}", m.id);
        }
        TaskStatus::Completed => assert!(result.is_some(), "{detailed}"),
        TaskStatus::Failed if !m.tool_result => {
            let [code] = members(error.expect("an error"), ["code"]);
            assert!(code.and_then(|c| c.as_i64()).is_some(), "{detailed}");
        }
        _ => {}
    }
    let note = RawJson::new(note).expect("the table writes JSON");
    assert_eq!(text_of(members(note, ["taskId"])[0]), m.id);
}

/// [`check_json_fast`] through serde_json.
fn check_json_full(created: &str, detailed: &str, note: &str, m: &Model) {
    let created = parse(created);
    let handle = if m.owner.is_some() {
        &created["task"]
    } else {
        assert_eq!(created["resultType"], "task");
        &created
    };
    assert_eq!(handle["taskId"], m.id.as_str());
    assert_eq!(handle["status"], status_str(m.status));
    check_detailed(&parse(detailed), m);
    assert_eq!(parse(note)["taskId"], m.id.as_str());
}

/// A `DetailedTask` as the model says it stands.
fn check_detailed(v: &Value, m: &Model) {
    assert_eq!(v["taskId"], m.id.as_str());
    assert_eq!(v["status"], status_str(m.status), "{v}");
    match m.status {
        TaskStatus::InputRequired => {
            let keys: Vec<&str> = v["inputRequests"]
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let mut want: Vec<&str> = m.asked.iter().map(String::as_str).collect();
            let mut keys = keys;
            keys.sort_unstable();
            want.sort_unstable();
            assert_eq!(keys, want, "input requests of {}", m.id);
        }
        TaskStatus::Completed => assert!(v.get("result").is_some(), "{v}"),
        TaskStatus::Failed if !m.tool_result => assert!(v["error"]["code"].is_i64(), "{v}"),
        _ => {}
    }
}

/// The target: see the module docs.
pub fn tasks(data: &[u8]) {
    tasks_reached(data);
}

/// [`tasks`], returning how far the run got.
pub fn tasks_reached(data: &[u8]) -> TasksReached {
    let mut u = Unstructured::new(data);
    let Ok(setup) = TasksSetup::arbitrary(&mut u) else {
        return TasksReached::default();
    };
    let seed = super::seed_of(data);
    let mut h = Harness::new(&setup, seed);
    let mut steps = 0;
    while !u.is_empty() && steps < 256 {
        let Ok(op) = TasksOp::arbitrary(&mut u) else {
            break;
        };
        h.step(&op);
        steps += 1;
    }
    h.poll_events();
    h.finish_all();
    h.reached
}
