//! Tasks: the `io.modelcontextprotocol/tasks` extension of 2026-07-28 (SEP-2663). A server
//! answers a long `tools/call` with a task handle at once, and the client polls `tasks/get`
//! until the task is terminal, answers its input requests with `tasks/update`, or cancels it
//! with `tasks/cancel`.
//!
//! [`Tasks`] is the server's task table, sans-IO like the rest of the engine: the host gives it
//! the time, and the application moves its tasks through their states. It is separate from
//! any [`Connection`] because a task outlives the request that created it
//! (over Streamable HTTP each 2026-07-28 request has a connection of its own): keep one table
//! per server and hand it the tasks methods of every connection.
//!
//! ```text
//!   create ──▶ working ◀──────▶ input_required      (ask / every answer arrived)
//!                 │                   │
//!                 ▼                   ▼
//!        completed · failed · cancelled            (terminal: never changes again)
//! ```
//!
//! The flow on the server:
//!
//! 1. A `tools/call` arrives (as [`Event::Request`](crate::Event::Request)). If the request
//!    declared the extension ([`Caps::TASKS_EXTENSION`](crate::mcp::Caps::TASKS_EXTENSION) in
//!    its [`request_context`](crate::Connection::request_context)) and the work is long,
//!    [`Tasks::create`] a task and answer with
//!    [`Connection::respond_task`](crate::Connection::respond_task) and
//!    [`Tasks::create_result`]. The engine refuses a task to a request that did not declare the
//!    extension.
//! 2. The engine answers `tasks/get`, `tasks/update` and `tasks/cancel` from a client without
//!    the extension with -32021 itself; the others come to the application as requests: pass
//!    them to [`Tasks::serve`], which answers them. The table does not know who may see a
//!    task, and the extension says "Servers MUST perform authentication and authorization
//!    checks on each task-related request": check the caller (from the request's HTTP
//!    headers, say) before `serve`, and turn on
//!    [`Policy::review_listens`](crate::conn::Policy::review_listens) so that a
//!    `subscriptions/listen` naming task ids is checked as well.
//! 3. As the work goes on: [`Tasks::ask`] for input (the task goes to `input_required`; the
//!    answers come back as [`TaskEvent::Input`] from [`Tasks::poll_event`]),
//!    [`Tasks::set_message`] for progress, then [`Tasks::complete`] (a result, tool errors
//!    included), [`Tasks::fail`] (a JSON-RPC error) or [`Tasks::cancel`] (after
//!    [`TaskEvent::CancelRequested`]).
//! 4. Call [`Tasks::handle_timeout`] at [`Tasks::poll_timeout`]: a task is deleted once its
//!    TTL has run out since its creation ([`TaskEvent::Expired`] tells the application to stop
//!    any work left).
//!
//! The same table serves the experimental tasks of 2025-11-25, whose wire differs: a request
//! asks for a task with a `task` member (the engine lets it through only where we declared
//! `tasks.requests.<method>`), [`Tasks::create_legacy`] makes the task for its session,
//! [`Connection::respond_task`](crate::Connection::respond_task) answers
//! `{"task":{…}}`, and [`Tasks::serve_legacy`] answers `tasks/get`, `tasks/list`,
//! `tasks/cancel` and `tasks/result`, which waits for the task to end
//! ([`Tasks::poll_result`]). Either side may host tasks in that version (a client for
//! sampling and elicitation). A requestor gets [`Event::TaskCreated`](crate::Event::TaskCreated)
//! in both versions.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::Timestamp;
use crate::conn::{Connection, Error, json_edit};
use crate::jsonrpc::{self, Id, OwnedId, RawJson, write_json_string};
use crate::mcp::{self, Caps, ProtocolVersion};

/// Whether `request` is an input request of Multi Round-Trip Requests: an object whose
/// `method` is `elicitation/create` or `sampling/createMessage` with a `params` object, or
/// `roots/list` (whose params are optional), each member once, and params the capability
/// rules can read (not an unknown elicitation mode, nor `mode` twice): `tasks/get` could not
/// tell otherwise whether the client declared what they need.
fn is_input_request(request: RawJson<'_>) -> bool {
    let any = Caps::ROOTS | Caps::SAMPLING | Caps::ELICITATION;
    crate::conn::input_request_need(request, any).is_ok()
}

/// How [`Tasks::answer`] refuses a tasks request: the JSON-RPC error's `(code, message,
/// data)`, the data as JSON text. Answer the request with it
/// ([`Connection::respond_error`]).
pub type TaskRefusal = (i64, String, Option<String>);

/// The `data` of a -32021 error for `cap`, one of the client capabilities an input request
/// needs: `{"requiredCapabilities":{…}}`, the capability's dotted path as nested objects.
fn required_capabilities(cap: mcp::Caps) -> String {
    let parts: Vec<&str> = match cap {
        mcp::Caps::ELICITATION_FORM => vec!["elicitation", "form"],
        mcp::Caps::ELICITATION_URL => vec!["elicitation", "url"],
        mcp::Caps::SAMPLING => vec!["sampling"],
        mcp::Caps::SAMPLING_TOOLS => vec!["sampling", "tools"],
        mcp::Caps::SAMPLING_CONTEXT => vec!["sampling", "context"],
        mcp::Caps::ROOTS => vec!["roots"],
        _ => vec!["elicitation"],
    };
    let mut out = String::from("{\"requiredCapabilities\":");
    for part in &parts {
        out.push_str("{\"");
        out.push_str(part);
        out.push_str("\":");
    }
    out.push_str("{}");
    for _ in &parts {
        out.push('}');
    }
    out.push('}');
    out
}

/// The extension's identifier, the key under `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The largest number of milliseconds a task writes (`ttlMs`, `pollIntervalMs` and their
/// 2025-11-25 names): 2^53 − 1, the largest integer every JSON reader keeps exact (JavaScript's
/// `Number.MAX_SAFE_INTEGER`, about 285 000 years). A longer [`TaskConfig::ttl`] or
/// [`TaskConfig::poll_interval`] is taken as this; it is the same as none in practice.
pub const MAX_WIRE_MILLIS: u64 = (1 << 53) - 1;

/// How many 2025-11-25 `tasks/result` requests may wait for one task at once; more are
/// answered at once with an internal error (-32603). [`Tasks::serve_legacy`] drops the waiters
/// whose requests the client cancelled; with [`Tasks::answer_legacy`] alone, a client that
/// asks and cancels over and over reaches this bound instead of growing the table.
pub const MAX_RESULT_WAITERS: usize = 1024;

/// Where a task is. The last three are terminal: a task in them never changes again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// The work is going on.
    Working,
    /// The work waits for the client's answers to the task's input requests.
    InputRequired,
    /// The work finished with a result (a tool result with `isError: true` included, but for
    /// a 2025-11-25 task).
    Completed,
    /// The work failed with a JSON-RPC error, or (a 2025-11-25 task) with a tool result that
    /// has `isError: true`.
    Failed,
    /// The work was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// The wire name (`"input_required"`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the status is final.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// The bounds and the timing a [`Tasks`] table hands out. Start from
/// [`TaskConfig::default`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskConfig {
    /// Tasks kept at once. At the cap, creating a task drops the oldest terminal one whose end a
    /// client was given (2026-07-28: its `tasks/get` of the ended task; 2025-11-25: its
    /// `tasks/result` or `tasks/cancel`), or that was cancelled; with none, [`Tasks::create`] fails
    /// with [`TaskError::Full`] (answer the request without a task, or with an error). A completed
    /// or failed task nobody fetched stays for its whole TTL, as its handle promised (without a
    /// [`ttl`](Self::ttl), any terminal task may make room). Default 1024.
    pub max_tasks: usize,
    /// Tasks one requestor may hold at once (terminal ones included, until they expire or are
    /// dropped), so that one session cannot take every slot of [`max_tasks`](Self::max_tasks)
    /// from the others. At the cap, creating a task for that requestor drops its oldest
    /// terminal task that may go (as for `max_tasks`); with none, [`Tasks::create_legacy`]
    /// fails with [`TaskError::Full`] for that requestor only. It bounds the tasks that have an owner
    /// (2025-11-25's, [`Tasks::create_legacy`]); a 2026-07-28 task ([`Tasks::create`]) has none
    /// the table knows (that version has no sessions), so only `max_tasks` bounds those.
    /// Default 256 (a quarter of the default `max_tasks`).
    pub max_tasks_per_owner: usize,
    /// How long a task lives from its creation (`ttlMs`); `None` for no limit (then only the
    /// cap bounds the table). Default one hour; at most [`MAX_WIRE_MILLIS`] milliseconds
    /// (longer is taken as that).
    pub ttl: Option<Duration>,
    /// The polling interval suggested to clients (`pollIntervalMs`). Default one second; at
    /// most [`MAX_WIRE_MILLIS`] milliseconds (longer is taken as that).
    pub poll_interval: Duration,
    /// Input requests a task may have outstanding at once. Default 16.
    pub max_input_requests: usize,
    /// The largest result, error or input request a task keeps, in bytes of JSON. Default
    /// 1 MiB.
    pub max_payload: usize,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            max_tasks: 1024,
            max_tasks_per_owner: 256,
            ttl: Some(Duration::from_secs(3600)),
            poll_interval: Duration::from_secs(1),
            max_input_requests: 16,
            max_payload: 1 << 20,
        }
    }
}

/// How many ids a random source may give that are already in use before it is taken for
/// broken (tasks here, session ids in the HTTP server).
pub(crate) const RANDOM_TRIES: usize = 8;

/// Why a [`Tasks`] call was refused. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskError {
    /// The table is at [`TaskConfig::max_tasks`] and no terminal task may go before its TTL
    /// (see there), or the requestor holds [`TaskConfig::max_tasks_per_owner`] tasks and none
    /// of them may.
    Full,
    /// No such task (never created, expired or dropped).
    UnknownTask,
    /// The task is terminal: it never changes again.
    Terminal,
    /// The input-request key was used before in this task (keys are unique over a task's
    /// life, SEP-2663).
    KeyReused,
    /// The task has [`TaskConfig::max_input_requests`] outstanding already.
    TooManyInputRequests,
    /// The JSON given is not what the call takes (a result is an object, an input request one
    /// of Multi Round-Trip Requests), or it is over [`TaskConfig::max_payload`], or [`Tasks::fail`]'s error code is one the
    /// task's protocol version does not define (as
    /// [`Connection::respond_error`](crate::Connection::respond_error) refuses it).
    InvalidPayload,
    /// The random source gave ids already in use, or nothing but zero bits, eight times
    /// running: it is not random (a failed `getrandom` that left the buffer as it was, a
    /// fixed test seed). No task was created; fix the source.
    RandomRepeats,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaskError::Full => "the task table is full",
            TaskError::UnknownTask => "no such task",
            TaskError::Terminal => "the task is terminal",
            TaskError::KeyReused => "the input request key was used before in this task",
            TaskError::TooManyInputRequests => "too many input requests outstanding",
            TaskError::InvalidPayload => "the JSON is not what the call takes, or is too large",
            TaskError::RandomRepeats => "the random source repeats itself: no fresh task id",
        })
    }
}

impl std::error::Error for TaskError {}

/// The answer to a 2025-11-25 tasks request, from [`Tasks::answer_legacy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LegacyAnswer {
    /// A result (JSON text).
    Result(String),
    /// A JSON-RPC error.
    Error {
        /// The code.
        code: i64,
        /// The message.
        message: String,
        /// The data (JSON text), if any.
        data: Option<String>,
    },
    /// `tasks/result` on a task still running: the answer comes from
    /// [`Tasks::poll_result`] once the task ends ("MUST block the response until the task
    /// reaches a terminal status").
    Wait,
}

impl LegacyAnswer {
    /// Writes the answer to request `id` on `conn` (nothing for [`LegacyAnswer::Wait`]). An
    /// error `conn` cannot carry (-32042 to a client that did not declare URL elicitation) is
    /// written as an internal error (-32603) with its message, so that the request is answered.
    /// A result or data that is not valid JSON (an answer built by hand) is refused with
    /// [`Error::InvalidParams`], and nothing is written.
    pub fn write(&self, conn: &mut Connection, id: Id<'_>) -> Result<(), Error> {
        fn valid(text: &str) -> Result<RawJson<'_>, Error> {
            RawJson::new(text).map_err(|_| Error::InvalidParams)
        }
        match self {
            LegacyAnswer::Result(r) => conn.respond(id, valid(r)?),
            LegacyAnswer::Error {
                code,
                message,
                data,
            } => {
                let data = data.as_deref().map(valid).transpose()?;
                match conn.respond_error(id, *code, message, data) {
                    // A code this connection cannot carry (-32042 to a client that did not
                    // declare URL elicitation): the request still gets its answer.
                    Err(
                        Error::NotNegotiated(_)
                        | Error::InvalidParams
                        | Error::CodeNotInVersion
                        | Error::NotInVersion,
                    ) => conn.respond_error(id, jsonrpc::INTERNAL_ERROR, message, None),
                    written => written,
                }
            }
            LegacyAnswer::Wait => Ok(()),
        }
    }
}

/// A 2025-11-25 `tasks/result` that can now be answered: write it with
/// [`Tasks::write_ready`] on the connection of `owner` (as given to
/// [`Tasks::create_legacy`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyResult {
    /// Whose task it was.
    pub owner: u64,
    /// The task.
    pub task: String,
    /// The waiting `tasks/result` request.
    pub id: OwnedId,
    /// Its answer (never [`LegacyAnswer::Wait`]).
    pub answer: LegacyAnswer,
}

/// What the client did to a task, for the application: from [`Tasks::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEvent {
    /// The client answered the input request `key` of `task` (with `tasks/update`); `response`
    /// is its JSON. Once every outstanding request is answered the task is `working` again.
    Input {
        /// The task.
        task: String,
        /// The input request's key, as given to [`Tasks::ask`].
        key: String,
        /// The client's answer (an elicitation or sampling result, for example).
        response: String,
    },
    /// The client asked to cancel `task` (`tasks/cancel`). Cancellation is cooperative: call
    /// [`Tasks::cancel`] once the work stopped, or finish it normally. (A 2025-11-25 task is
    /// cancelled already, as that version's `tasks/cancel` answers with it: just stop the
    /// work; a later `cancel`, `complete` or `fail` gets [`TaskError::Terminal`].)
    CancelRequested {
        /// The task.
        task: String,
    },
    /// `task` reached its TTL and was deleted; stop any work left for it.
    Expired {
        /// The task.
        task: String,
    },
}

struct Task {
    status: TaskStatus,
    message: Option<String>,
    created: Timestamp,
    updated: Timestamp,
    /// Outstanding input requests, in the order asked: (key, request JSON).
    asked: Vec<(String, String)>,
    /// Every key used so far (never reused).
    keys: HashSet<String>,
    /// The result (completed) or the error object (failed).
    outcome: Option<String>,
    /// The error's parts (failed), for a 2025-11-25 `tasks/result`.
    error: Option<(i64, String, Option<String>)>,
    cancel_requested: bool,
    /// A 2025-11-25 task (its wire shapes differ), and whose it is (its `tasks/list` scope).
    legacy: Option<u64>,
    /// 2025-11-25 `tasks/result` requests waiting for the task to end.
    waiters: Vec<OwnedId>,
    /// Terminal, and a client was given how it ended (its `tasks/get`, its `tasks/result`,
    /// its `tasks/cancel`): only such a task may leave before its TTL to make room.
    fetched: bool,
}

/// A server's tasks. See the [module docs](self).
pub struct Tasks {
    config: TaskConfig,
    tasks: HashMap<String, Task>,
    /// Task ids by creation, oldest first (for expiry and eviction).
    order: VecDeque<(Timestamp, String)>,
    events: VecDeque<TaskEvent>,
    /// Answers for [`poll_result`](Tasks::poll_result): the waiters of one task share one
    /// answer, copied as each is taken, so a peer's 256 waiting `tasks/result` requests on a
    /// 1 MiB result hold one copy, not 256.
    ready: VecDeque<(u64, String, OwnedId, Arc<LegacyAnswer>)>,
    /// The wall clock at `base` (Unix milliseconds), for `createdAt` and `lastUpdatedAt`.
    base: Timestamp,
    base_unix_ms: u64,
}

impl fmt::Debug for Tasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tasks")
            .field("tasks", &self.tasks.len())
            .field("events", &self.events.len())
            .finish()
    }
}

impl Tasks {
    /// An empty table. `now` and `unix_ms` are the same instant on the host's monotonic clock
    /// and on the wall clock (milliseconds since 1970): the wall-clock times a task carries
    /// (`createdAt`, `lastUpdatedAt`) are counted from them, so they never jump with the
    /// system clock.
    pub fn new(config: TaskConfig, now: Timestamp, unix_ms: u64) -> Self {
        let most = Duration::from_millis(MAX_WIRE_MILLIS);
        let config = TaskConfig {
            ttl: config.ttl.map(|ttl| ttl.min(most)),
            poll_interval: config.poll_interval.min(most),
            ..config
        };
        Tasks {
            config,
            tasks: HashMap::new(),
            order: VecDeque::new(),
            events: VecDeque::new(),
            ready: VecDeque::new(),
            base: now,
            base_unix_ms: unix_ms,
        }
    }

    /// How many tasks the table holds (terminal ones included, until they expire).
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the table holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// A task's status, or `None` for an unknown task.
    pub fn status(&self, task: &str) -> Option<TaskStatus> {
        self.tasks.get(task).map(|t| t.status)
    }

    /// Whether the client asked to cancel `task`, in either era (it stays asked for as long
    /// as the table holds the task). A 2025-11-25 task the client cancelled is `cancelled`
    /// at once; a 2026-07-28 one runs until the application ends it.
    pub fn cancel_requested(&self, task: &str) -> bool {
        self.tasks.get(task).is_some_and(|t| t.cancel_requested)
    }

    /// Creates a `working` task and returns its id: 128 bits from `random` (the host's secure
    /// random source: task ids are bearer handles, SEP-2663), in hex. Answer the request with
    /// [`create_result`](Self::create_result) only after this returned: the task is then
    /// already visible to `tasks/get`.
    pub fn create(
        &mut self,
        now: Timestamp,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> Result<String, TaskError> {
        self.insert(now, random, None)
    }

    /// [`create`](Self::create) for a 2025-11-25 task-augmented request (the experimental
    /// tasks of that version): the task belongs to `owner` (the session or connection that
    /// asked, one number per connection: a `tasks/result` waits on its owner's connection,
    /// and results go to it; to bind tasks to a user across connections, check the user in
    /// your own code before serving; [`serve_legacy`](Self::serve_legacy) shows a requestor
    /// its own tasks only), and
    /// its wire shapes are that version's (`{"task":{…}}`, `ttl`, `pollInterval`). An owner
    /// holding [`TaskConfig::max_tasks_per_owner`] tasks has its oldest terminal one that may
    /// go (see [`TaskConfig::max_tasks`]) dropped to make room, or, with none, gets
    /// [`TaskError::Full`] while others still get tasks.
    pub fn create_legacy(
        &mut self,
        now: Timestamp,
        random: &mut dyn FnMut(&mut [u8]),
        owner: u64,
    ) -> Result<String, TaskError> {
        self.insert(now, random, Some(owner))
    }

    fn insert(
        &mut self,
        now: Timestamp,
        random: &mut dyn FnMut(&mut [u8]),
        legacy: Option<u64>,
    ) -> Result<String, TaskError> {
        // The id first, so that a source that fails leaves the table as it was (no terminal
        // task evicted for a task never made). 128 random bits collide by chance about
        // never; a source that repeats would make this loop spin for good. All zero bits are
        // a source that wrote nothing (a failed `getrandom`): a guessable id, and the same
        // one again once its task is gone.
        let id = (0..RANDOM_TRIES)
            .filter_map(|_| {
                let mut bytes = [0u8; 16];
                random(&mut bytes);
                (bytes != [0; 16]).then(|| {
                    let mut id = String::with_capacity(32);
                    for b in bytes {
                        for nibble in [b >> 4, b & 15] {
                            id.push(char::from(b"0123456789abcdef"[usize::from(nibble)]));
                        }
                    }
                    id
                })
            })
            .find(|id| !self.tasks.contains_key(id))
            .ok_or(TaskError::RandomRepeats)?;
        // The requestor's own cap first, so that a full requestor takes none of the others'
        // terminal tasks; then the table's.
        if let Some(owner) = legacy {
            let held = self.tasks.values().filter(|t| t.legacy == legacy).count();
            if held >= self.config.max_tasks_per_owner && !self.evict_terminal(Some(owner)) {
                return Err(TaskError::Full);
            }
        }
        if self.tasks.len() >= self.config.max_tasks && !self.evict_terminal(None) {
            return Err(TaskError::Full);
        }
        self.tasks.insert(
            id.clone(),
            Task {
                status: TaskStatus::Working,
                message: None,
                created: now,
                updated: now,
                asked: Vec::new(),
                keys: HashSet::new(),
                outcome: None,
                error: None,
                cancel_requested: false,
                legacy,
                waiters: Vec::new(),
                fetched: false,
            },
        );
        self.order.push_back((now, id.clone()));
        Ok(id)
    }

    /// Drops the oldest terminal task that may go before its TTL (of `owner`'s, when given);
    /// whether there was one. A completed or failed task nobody fetched stays for its whole
    /// TTL, the lifetime its handle promised; a cancelled one has no result to lose (and may
    /// never have been handed out: the docs say to cancel a task whose handle was refused);
    /// without a TTL, the cap is the only bound, and any terminal task may go.
    fn evict_terminal(&mut self, owner: Option<u64>) -> bool {
        let no_ttl = self.config.ttl.is_none();
        let Some(at) = self.order.iter().position(|(_, id)| {
            self.tasks.get(id).is_some_and(|t| {
                t.status.is_terminal()
                    && (t.fetched || t.status == TaskStatus::Cancelled || no_ttl)
                    && (owner.is_none() || t.legacy == owner)
            })
        }) else {
            return false;
        };
        if let Some((_, id)) = self.order.remove(at) {
            self.tasks.remove(&id);
        }
        true
    }

    /// The `CreateTaskResult` for `task` (`resultType: "task"`, the task's id, status and
    /// times), to answer the request that created it with
    /// [`Connection::respond_task`](crate::Connection::respond_task).
    ///
    /// A 2025-11-25 task ([`create_legacy`](Self::create_legacy)) gets that version's
    /// `CreateTaskResult`, `{"task":{…}}`.
    pub fn create_result(&self, task: &str) -> Option<String> {
        let t = self.tasks.get(task)?;
        let mut out = Vec::with_capacity(256);
        if t.legacy.is_some() {
            out.extend_from_slice(b"{\"task\":{");
            self.write_task(&mut out, task, t, false);
            out.extend_from_slice(b"}}");
        } else {
            out.extend_from_slice(b"{\"resultType\":\"task\",");
            self.write_task(&mut out, task, t, false);
            out.push(b'}');
        }
        String::from_utf8(out).ok()
    }

    /// The `DetailedTask` of `task` as `tasks/get` and `notifications/tasks` carry it: the
    /// task's fields, with its input requests, result or error by status.
    pub fn detailed(&self, task: &str) -> Option<String> {
        self.task_object(task, true)
    }

    /// The task as a JSON object: its fields, and with `detailed` what its status inlines.
    fn task_object(&self, task: &str, detailed: bool) -> Option<String> {
        let t = self.tasks.get(task)?;
        let mut out = Vec::with_capacity(256);
        out.push(b'{');
        self.write_task(&mut out, task, t, detailed);
        out.push(b'}');
        String::from_utf8(out).ok()
    }

    /// The status notification of `task` as it stands: `("notifications/tasks", DetailedTask)`
    /// for an extension task (send it with [`Connection::notify`](crate::Connection::notify) on
    /// every connection: the engine delivers it only on the `subscriptions/listen` streams
    /// granted this task's id), `("notifications/tasks/status", Task)` for a 2025-11-25 task
    /// (send it on its owner's connection; the spec makes both optional, and clients keep
    /// polling). `None` for an unknown task.
    pub fn status_notification(&self, task: &str) -> Option<(&'static str, String)> {
        let t = self.tasks.get(task)?;
        if t.legacy.is_some() {
            Some(("notifications/tasks/status", self.task_object(task, false)?))
        } else {
            Some(("notifications/tasks", self.detailed(task)?))
        }
    }

    fn write_task(&self, out: &mut Vec<u8>, id: &str, t: &Task, detailed: bool) {
        out.extend_from_slice(b"\"taskId\":");
        write_json_string(out, id);
        out.extend_from_slice(b",\"status\":");
        write_json_string(out, t.status.as_str());
        if let Some(message) = &t.message {
            out.extend_from_slice(b",\"statusMessage\":");
            write_json_string(out, message);
        }
        out.extend_from_slice(b",\"createdAt\":\"");
        self.write_iso8601(out, t.created);
        out.extend_from_slice(b"\",\"lastUpdatedAt\":\"");
        self.write_iso8601(out, t.updated);
        // 2025-11-25 names the fields `ttl` and `pollInterval` (milliseconds as well).
        let legacy = t.legacy.is_some();
        out.extend_from_slice(if legacy {
            b"\",\"ttl\":"
        } else {
            b"\",\"ttlMs\":"
        });
        match self.config.ttl {
            Some(ttl) => write_digits(out, millis(ttl), 1),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(if legacy {
            b",\"pollInterval\":"
        } else {
            b",\"pollIntervalMs\":"
        });
        write_digits(out, millis(self.config.poll_interval).max(1), 1);
        if !detailed {
            return;
        }
        match t.status {
            TaskStatus::InputRequired => {
                out.extend_from_slice(b",\"inputRequests\":{");
                for (i, (key, request)) in t.asked.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_json_string(out, key);
                    out.push(b':');
                    out.extend_from_slice(request.as_bytes());
                }
                out.push(b'}');
            }
            TaskStatus::Completed => {
                if let Some(result) = &t.outcome {
                    out.extend_from_slice(b",\"result\":");
                    out.extend_from_slice(result.as_bytes());
                }
            }
            TaskStatus::Failed => {
                if let Some(error) = &t.outcome {
                    out.extend_from_slice(b",\"error\":");
                    out.extend_from_slice(error.as_bytes());
                }
            }
            TaskStatus::Working | TaskStatus::Cancelled => {}
        }
    }

    /// `now` on the wall clock, as ISO 8601 in UTC with milliseconds.
    fn write_iso8601(&self, out: &mut Vec<u8>, now: Timestamp) {
        let since = now.as_nanos().saturating_sub(self.base.as_nanos()) / 1_000_000;
        write_iso8601_utc(out, self.base_unix_ms.saturating_add(since));
    }

    fn live(&mut self, task: &str) -> Result<&mut Task, TaskError> {
        let t = self.tasks.get_mut(task).ok_or(TaskError::UnknownTask)?;
        if t.status.is_terminal() {
            return Err(TaskError::Terminal);
        }
        Ok(t)
    }

    /// Sets (or with `None` clears) the task's `statusMessage`, a progress description for
    /// example.
    pub fn set_message(
        &mut self,
        now: Timestamp,
        task: &str,
        message: Option<&str>,
    ) -> Result<(), TaskError> {
        let t = self.live(task)?;
        t.message = message.map(str::to_owned);
        t.updated = t.updated.max(now);
        Ok(())
    }

    /// Asks the client for input: `request` (`{"method":"elicitation/create","params":…}`, for
    /// example) goes out under `key` in the task's `inputRequests`, and the task is
    /// `input_required` until every outstanding request has its answer
    /// ([`TaskEvent::Input`]). A key is used once in a task's life. `request` must be an input
    /// request of Multi Round-Trip Requests (`elicitation/create` or `sampling/createMessage`
    /// with a params object, or `roots/list`), else [`TaskError::InvalidPayload`]: ask only
    /// for what the client declared (its `clientCapabilities`); [`serve`](Self::serve)
    /// answers a `tasks/get` whose requestor did not declare them with -32021.
    pub fn ask(
        &mut self,
        now: Timestamp,
        task: &str,
        key: &str,
        request: RawJson<'_>,
    ) -> Result<(), TaskError> {
        let (max_asked, max_payload) = (self.config.max_input_requests, self.config.max_payload);
        let t = self.live(task)?;
        if !is_input_request(request) || request.get().len() > max_payload {
            return Err(TaskError::InvalidPayload);
        }
        if t.keys.contains(key) {
            return Err(TaskError::KeyReused);
        }
        if t.asked.len() >= max_asked {
            return Err(TaskError::TooManyInputRequests);
        }
        t.keys.insert(key.to_owned());
        t.asked.push((key.to_owned(), request.get().to_owned()));
        t.status = TaskStatus::InputRequired;
        t.updated = t.updated.max(now);
        Ok(())
    }

    /// Back to `working` after `input_required`: the 2025-11-25 flow, where the application
    /// sends its input requests itself (related to the task) and resumes the task when their
    /// answers came. (In the extension's flow the last [`TaskEvent::Input`] does this.)
    pub fn resume(&mut self, now: Timestamp, task: &str) -> Result<(), TaskError> {
        let t = self.live(task)?;
        if t.status == TaskStatus::InputRequired {
            t.asked.clear();
            t.status = TaskStatus::Working;
            t.updated = t.updated.max(now);
        }
        Ok(())
    }

    /// Finishes the task with `result` (what the request would have returned: a
    /// `CallToolResult`, `isError: true` included). Outstanding input requests are dropped.
    ///
    /// The task is `completed`, except a 2025-11-25 task ([`create_legacy`](Self::create_legacy))
    /// whose result has `isError: true`: that version counts it as `failed` ("this includes
    /// cases where the tool call result has `isError` set to true"), while its `tasks/result`
    /// still returns the result itself. (SEP-2663 keeps such a task `completed`.)
    pub fn complete(
        &mut self,
        now: Timestamp,
        task: &str,
        result: RawJson<'_>,
    ) -> Result<(), TaskError> {
        let max_payload = self.config.max_payload;
        let t = self.live(task)?;
        // (A `_meta` twice: the related-task metadata could not be merged into it, and the
        // peer may read either.)
        if !result.is_object()
            || result.get().len() > max_payload
            || result.get_unique("_meta").is_err()
        {
            return Err(TaskError::InvalidPayload);
        }
        let tool_error = t.legacy.is_some()
            && result
                .unique("isError")
                .is_some_and(|e| e.get().trim() == "true");
        t.outcome = Some(result.get().to_owned());
        let status = if tool_error {
            // "The tasks/get response SHOULD include a statusMessage field with diagnostic
            // information about the failure" (2025-11-25), not the last progress message.
            t.message = Some("The tool reported an error (isError)".to_owned());
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        Self::finish(t, now, status);
        self.release(task);
        Ok(())
    }

    /// Fails the task with a JSON-RPC error (a protocol-level fault; a tool that ran and
    /// reported an error [`complete`](Self::complete)s with `isError: true` instead).
    ///
    /// The code follows [`Connection::respond_error`](crate::Connection::respond_error)'s
    /// rules for the task's version (2025-11-25 for a [`create_legacy`](Self::create_legacy)
    /// task, 2026-07-28 otherwise): [`mcp::RESOURCE_NOT_FOUND`] is written as that version's
    /// code, and a code it does not define is refused with [`TaskError::InvalidPayload`], as
    /// is [`mcp::URL_ELICITATION_REQUIRED`] without `data` holding its `elicitations`, and
    /// -32021 or -32022 without the data the schema requires of them.
    /// Any other integer goes out as given: JSON-RPC asks only that a code be an integer.
    pub fn fail(
        &mut self,
        now: Timestamp,
        task: &str,
        code: i64,
        message: &str,
        data: Option<RawJson<'_>>,
    ) -> Result<(), TaskError> {
        let max_payload = self.config.max_payload;
        let t = self.live(task)?;
        let version = if t.legacy.is_some() {
            ProtocolVersion::V2025_11_25
        } else {
            ProtocolVersion::V2026_07_28
        };
        let code = if code == mcp::RESOURCE_NOT_FOUND {
            mcp::resource_not_found_code(version)
        } else {
            code
        };
        if !mcp::error_code_allowed(code, version) || !mcp::has_required_data(code, data) {
            return Err(TaskError::InvalidPayload);
        }
        // -32042 is written only with the URL elicitations to complete, as
        // `Connection::respond_error` requires.
        let elicitations = data.and_then(|d| d.unique("elicitations"));
        if code == mcp::URL_ELICITATION_REQUIRED
            && elicitations
                .and_then(crate::conn::required_elicitations)
                .is_none()
        {
            return Err(TaskError::InvalidPayload);
        }
        let mut error = Vec::new();
        error.extend_from_slice(b"{\"code\":");
        error.extend_from_slice(code.to_string().as_bytes());
        error.extend_from_slice(b",\"message\":");
        write_json_string(&mut error, message);
        if let Some(data) = data {
            error.extend_from_slice(b",\"data\":");
            error.extend_from_slice(data.get().as_bytes());
        }
        error.push(b'}');
        if error.len() > max_payload {
            return Err(TaskError::InvalidPayload);
        }
        t.outcome = String::from_utf8(error).ok();
        t.error = Some((code, message.to_owned(), data.map(|d| d.get().to_owned())));
        // The failure's own message, not a progress message left from the work: "The
        // tasks/get response SHOULD include a statusMessage field with diagnostic
        // information about the failure".
        t.message = Some(message.to_owned());
        Self::finish(t, now, TaskStatus::Failed);
        self.release(task);
        Ok(())
    }

    /// Ends the task as `cancelled`: the work stopped (after [`TaskEvent::CancelRequested`],
    /// or for the server's own reasons).
    pub fn cancel(&mut self, now: Timestamp, task: &str) -> Result<(), TaskError> {
        let t = self.live(task)?;
        t.outcome = None;
        Self::finish(t, now, TaskStatus::Cancelled);
        self.release(task);
        Ok(())
    }

    /// Answers the `tasks/result` requests waiting for `task`, which just ended.
    fn release(&mut self, task: &str) {
        let Some(t) = self.tasks.get_mut(task) else {
            return;
        };
        let (Some(owner), false) = (t.legacy, t.waiters.is_empty()) else {
            return;
        };
        let waiters = std::mem::take(&mut t.waiters);
        t.fetched = true;
        let answer = Arc::new(legacy_result(task, t));
        for id in waiters {
            (self.ready).push_back((owner, task.to_owned(), id, Arc::clone(&answer)));
        }
    }

    /// 2025-11-25: the `tasks/result` requests whose task has ended (or expired), to answer
    /// now, oldest first, with [`write_ready`](Self::write_ready). Poll it after the calls
    /// that end tasks and after [`handle_timeout`](Self::handle_timeout).
    pub fn poll_result(&mut self) -> Option<ReadyResult> {
        let (owner, task, id, answer) = self.ready.pop_front()?;
        // The last waiter takes the answer itself; the others a copy each.
        let answer = Arc::try_unwrap(answer).unwrap_or_else(|shared| (*shared).clone());
        Some(ReadyResult {
            owner,
            task,
            id,
            answer,
        })
    }

    /// 2025-11-25: writes `ready` (from [`poll_result`](Self::poll_result)) on `conn`, the
    /// connection of its owner; errors as [`LegacyAnswer::write`]'s (an
    /// [`Error::UnknownRequest`] when the request is not in flight on `conn`: try its owner's
    /// other connection, if it has one). Use it rather than writing the answer yourself: a
    /// `tasks/result` the client cancelled meanwhile gets no answer (the connection drops
    /// it), and its task then counts as not fetched, so that it is kept for the client to ask
    /// again within its TTL instead of making room for a new task.
    pub fn write_ready(&mut self, conn: &mut Connection, ready: &ReadyResult) -> Result<(), Error> {
        let awaited = conn.awaits_answer_to(ready.id.as_id());
        ready.answer.write(conn, ready.id.as_id())?;
        if !awaited {
            self.unfetch(Some(ready.task.clone()));
        }
        Ok(())
    }

    fn finish(t: &mut Task, now: Timestamp, status: TaskStatus) {
        t.status = status;
        t.asked = Vec::new();
        t.keys = HashSet::new();
        t.updated = t.updated.max(now);
    }

    /// What the client did since the last call, oldest first.
    pub fn poll_event(&mut self) -> Option<TaskEvent> {
        self.events.pop_front()
    }

    /// When the next task expires, if any: call [`handle_timeout`](Self::handle_timeout)
    /// then.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let ttl = self.config.ttl?;
        // Creation order is expiry order.
        self.order.front().map(|(created, _)| created.after(ttl))
    }

    /// Deletes the tasks whose TTL ran out by `now` (a live one also gets
    /// [`TaskEvent::Expired`]).
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let Some(ttl) = self.config.ttl else {
            return;
        };
        while let Some((created, _)) = self.order.front() {
            if created.after(ttl) > now {
                break;
            }
            let Some((_, id)) = self.order.pop_front() else {
                break;
            };
            if let Some(t) = self.tasks.remove(&id)
                && !t.status.is_terminal()
            {
                if let Some(owner) = t.legacy {
                    let expired = Arc::new(LegacyAnswer::Error {
                        code: jsonrpc::INVALID_PARAMS,
                        message: "Task has expired".to_owned(),
                        data: None,
                    });
                    for waiter in t.waiters {
                        let ready = (owner, id.clone(), waiter, Arc::clone(&expired));
                        self.ready.push_back(ready);
                    }
                }
                self.events.push_back(TaskEvent::Expired { task: id });
            }
        }
        if self.tasks.capacity() > 4 * self.tasks.len() + 64 {
            self.tasks.shrink_to(2 * self.tasks.len());
        }
    }

    /// Answers a tasks method: `tasks/get` with the task's `DetailedTask`, `tasks/update` and
    /// `tasks/cancel` with an empty acknowledgement (their effects come as
    /// [`TaskEvent`]s), an unknown task with -32602. `None` for any other method (answer it
    /// yourself). `declared` is what the request declared
    /// ([`RequestContext::client_capabilities`](crate::conn::RequestContext)): a `tasks/get`
    /// of a task whose input requests need a capability it lacks gets -32021 with the
    /// `requiredCapabilities` as the error's `data` ("Servers MUST NOT send an inputRequests
    /// that the client has not declared support for").
    ///
    /// A terminal task counts as fetched once this returns it (it may then make room at the
    /// [`max_tasks`](TaskConfig::max_tasks) cap): give the answer, or keep it and give it
    /// later when the output is full. [`serve`](Self::serve) answers on a connection
    /// directly, and leaves the task unfetched when the answer could not be written.
    pub fn answer(
        &mut self,
        now: Timestamp,
        declared: mcp::Caps,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Option<Result<String, TaskRefusal>> {
        if !matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel") {
            return None;
        }
        let invalid = |m: &str| Err((jsonrpc::INVALID_PARAMS, m.to_owned(), None));
        let task = task_id(params);
        let Some(task) = task else {
            return Some(invalid("taskId (a string) is required"));
        };
        let Some(t) = self.tasks.get_mut(&task).filter(|t| t.legacy.is_none()) else {
            return Some(invalid("Failed to retrieve task: Task not found"));
        };
        Some(match method {
            "tasks/get" => {
                if let Some(missing) = undeclared_input(t, declared) {
                    return Some(Err((
                        mcp::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        "Missing required client capability".to_owned(),
                        Some(required_capabilities(missing)),
                    )));
                }
                // A terminal task's DetailedTask carries its result or error.
                t.fetched |= t.status.is_terminal();
                match self.detailed(&task) {
                    Some(detailed) => Ok(detailed),
                    None => invalid("Failed to retrieve task: Task not found"),
                }
            }
            "tasks/update" => {
                let responses = params
                    .and_then(|p| p.unique("inputResponses"))
                    .filter(|r| r.is_object());
                let Some(responses) = responses else {
                    return Some(invalid("inputResponses (an object) is required"));
                };
                // Checked whole before anything changes: each response an object (the
                // schema's InputResponse is a sampling, roots or elicitation result), each key
                // once (a reader keeping the last of two would see another answer than the
                // application got).
                let mut keys = std::collections::HashSet::new();
                for (key, response) in responses.members() {
                    if !response.is_object() {
                        return Some(invalid("each input response is an object"));
                    }
                    if !keys.insert(key.to_str()) {
                        return Some(invalid("an input response key is written twice"));
                    }
                }
                // Answers to keys not outstanding are ignored (never issued, answered before,
                // or the task is terminal), as SEP-2663 asks.
                let mut answered = false;
                for (key, response) in responses.members() {
                    let key = key.to_str();
                    if let Some(at) = t.asked.iter().position(|(k, _)| *k == key) {
                        t.asked.remove(at);
                        answered = true;
                        self.events.push_back(TaskEvent::Input {
                            task: task.clone(),
                            key: key.into_owned(),
                            response: response.get().to_owned(),
                        });
                    }
                }
                if answered {
                    // The task changed (fewer input requests), whether or not it goes back
                    // to working: lastUpdatedAt says so.
                    t.updated = t.updated.max(now);
                    if t.asked.is_empty() && t.status == TaskStatus::InputRequired {
                        t.status = TaskStatus::Working;
                    }
                }
                Ok("{}".to_owned())
            }
            _ => {
                // tasks/cancel: idempotent; on a terminal task it changes nothing.
                if !t.status.is_terminal() && !t.cancel_requested {
                    t.cancel_requested = true;
                    self.events
                        .push_back(TaskEvent::CancelRequested { task: task.clone() });
                }
                Ok("{}".to_owned())
            }
        })
    }

    /// [`answer`](Self::answer), written to `conn` as the answer to request `id`, with the
    /// capabilities that request declared. Returns `Ok(false)` (and answers nothing) when
    /// `method` is not a tasks method, or `id` is not a 2026-07-28 request in flight on
    /// `conn` (a 2025-11-25 session's `tasks/get` is [`serve_legacy`](Self::serve_legacy)'s:
    /// answered here, it got the extension's rules, "not found" for its own task). When the answer cannot be written (`OutputFull`: call
    /// again later), a terminal task it carried stays unfetched, so it is not dropped at the
    /// cap before a client saw it. It checks no access: check that the caller may see the
    /// task first (see the module docs).
    pub fn serve(
        &mut self,
        now: Timestamp,
        conn: &mut Connection,
        id: Id<'_>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Result<bool, Error> {
        let Some(context) = conn.request_context(id) else {
            return Ok(false);
        };
        let declared = context.client_capabilities;
        let unfetched = self.unfetched(params);
        let written = match self.answer(now, declared, method, params) {
            None => return Ok(false),
            Some(Ok(result)) => conn.respond(id, RawJson::validated(&result)),
            Some(Err((code, message, data))) => {
                let data = data.as_deref().map(RawJson::validated);
                conn.respond_error(id, code, &message, data)
            }
        };
        if written.is_err() {
            self.unfetch(unfetched);
        }
        written.map(|()| true)
    }
}

/// A capability that an input request of the extension task `t` needs and `declared` lacks
/// ("Servers MUST NOT send an inputRequests that the client has not declared support for in
/// its capabilities").
fn undeclared_input(t: &Task, declared: mcp::Caps) -> Option<mcp::Caps> {
    if t.legacy.is_some() || t.status != TaskStatus::InputRequired {
        return None;
    }
    t.asked.iter().find_map(|(_, request)| {
        crate::conn::input_request_need(RawJson::validated(request), declared)
            .ok()
            .flatten()
    })
}

impl Tasks {
    /// The task `params` names, when it is there and not fetched yet: what
    /// [`unfetch`](Self::unfetch) restores when its answer could not be written.
    fn unfetched(&self, params: Option<RawJson<'_>>) -> Option<String> {
        let task = task_id(params)?;
        self.tasks
            .get(&task)
            .is_some_and(|t| !t.fetched)
            .then_some(task)
    }

    /// Marks `task` (from [`unfetched`](Self::unfetched)) unfetched again: the answer that
    /// fetched it was not written.
    fn unfetch(&mut self, task: Option<String>) {
        if let Some(t) = task.and_then(|task| self.tasks.get_mut(&task)) {
            t.fetched = false;
        }
    }

    /// Answers a 2025-11-25 tasks method from `owner` (the session or connection that sent
    /// it; it sees its own tasks only): `tasks/get` and `tasks/cancel` with the task,
    /// `tasks/list` with the owner's tasks, `tasks/result` with the underlying request's
    /// result or error once the task has ended ([`LegacyAnswer::Wait`] before: see
    /// [`poll_result`](Self::poll_result)). An unknown task, or cancelling a terminal one,
    /// gets -32602. `tasks/cancel` ends the task as `cancelled` at once ("MUST transition the
    /// task to cancelled status before sending the response") and reports
    /// [`TaskEvent::CancelRequested`] so that the work stops. `None` for any other method.
    /// At most [`MAX_RESULT_WAITERS`] `tasks/result` requests wait for one task.
    pub fn answer_legacy(
        &mut self,
        now: Timestamp,
        owner: u64,
        id: Id<'_>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Option<LegacyAnswer> {
        let invalid = |message: &str| LegacyAnswer::Error {
            code: jsonrpc::INVALID_PARAMS,
            message: message.to_owned(),
            data: None,
        };
        if method == "tasks/list" {
            if params.is_some_and(|p| p.unique("cursor").is_some()) {
                // We never hand out cursors: the whole list comes in one page.
                return Some(invalid("Invalid cursor"));
            }
            let mut out = Vec::from(&b"{\"tasks\":["[..]);
            let mut first = true;
            for (_, task) in &self.order {
                if let Some(t) = self.tasks.get(task).filter(|t| t.legacy == Some(owner)) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    out.push(b'{');
                    self.write_task(&mut out, task, t, false);
                    out.push(b'}');
                }
            }
            out.extend_from_slice(b"]}");
            return Some(LegacyAnswer::Result(String::from_utf8(out).ok()?));
        }
        if !matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel") {
            return None;
        }
        let task = task_id(params);
        let Some(task) = task else {
            return Some(invalid("taskId (a string) is required"));
        };
        let Some(t) = self
            .tasks
            .get_mut(&task)
            .filter(|t| t.legacy == Some(owner))
        else {
            return Some(invalid("Failed to retrieve task: Task not found"));
        };
        match method {
            "tasks/get" => {}
            "tasks/result" if t.status.is_terminal() => {
                t.fetched = true;
                return Some(legacy_result(&task, t));
            }
            "tasks/result" if t.waiters.len() >= MAX_RESULT_WAITERS => {
                return Some(LegacyAnswer::Error {
                    code: jsonrpc::INTERNAL_ERROR,
                    message: "Too many tasks/result requests wait for this task".to_owned(),
                    data: None,
                });
            }
            "tasks/result" => {
                t.waiters.push(OwnedId::from(id));
                return Some(LegacyAnswer::Wait);
            }
            _ => {
                if t.status.is_terminal() {
                    return Some(invalid(&format!(
                        "Cannot cancel task: already in terminal status '{}'",
                        t.status.as_str()
                    )));
                }
                t.outcome = None;
                t.cancel_requested = true;
                t.fetched = true; // (its answer says how it ended)
                // A progress message left from the work would describe a task still running.
                t.message = Some("The task was cancelled by request.".to_owned());
                Self::finish(t, now, TaskStatus::Cancelled);
                self.events
                    .push_back(TaskEvent::CancelRequested { task: task.clone() });
                self.release(&task);
            }
        }
        Some(LegacyAnswer::Result(self.task_object(&task, false)?))
    }

    /// [`answer_legacy`](Self::answer_legacy), written to `conn` as the answer to request
    /// `id` (a `tasks/result` that must wait is answered later, from
    /// [`poll_result`](Self::poll_result)). `Ok(false)` for a method that is not a tasks
    /// method. `conn` is `owner`'s connection: the task's waiting `tasks/result` requests that
    /// it no longer awaits (cancelled by the client) are dropped here. Prefer it to
    /// `answer_legacy` for that.
    ///
    /// When the answer cannot be written (`OutputFull`), a `tasks/result` or `tasks/get`
    /// leaves its task as unfetched as it was, and a `tasks/cancel` is refused before it takes
    /// effect: call again once the output has drained. (A `tasks/cancel` whose answer `conn`
    /// refuses for another reason, a request it does not await, has taken effect, and a
    /// second one is refused as the task is terminal: a host that answers on another
    /// connection takes the answer from `answer_legacy` and keeps it until
    /// [`LegacyAnswer::write`] succeeds.)
    pub fn serve_legacy(
        &mut self,
        now: Timestamp,
        owner: u64,
        conn: &mut Connection,
        id: Id<'_>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Result<bool, Error> {
        if method == "tasks/cancel" && !conn.output_has_room() {
            // Refused before it cancels anything: taken now with its answer refused, the retry
            // found the task ended and told the client its cancel failed (-32602).
            return Err(Error::OutputFull);
        }
        let unfetched = self.unfetched(params);
        match self.answer_legacy(now, owner, id, method, params) {
            None => Ok(false),
            Some(LegacyAnswer::Wait) => {
                // The task's other waiters are this owner's requests on `conn`: those it no
                // longer awaits (the client cancelled them) stop waiting, so that asking and
                // cancelling over and over cannot grow the list.
                if let Some(t) = task_id(params).and_then(|task| self.tasks.get_mut(&task)) {
                    t.waiters.retain(|w| conn.awaits_answer_to(w.as_id()));
                }
                Ok(true)
            }
            Some(answer) => {
                let written = answer.write(conn, id);
                if written.is_err() {
                    self.unfetch(unfetched);
                }
                written.map(|()| true)
            }
        }
    }
}

/// What a 2025-11-25 `tasks/result` returns for an ended task: "exactly what the underlying
/// request would have returned", with the related-task `_meta`.
fn legacy_result(task: &str, t: &Task) -> LegacyAnswer {
    match (t.status, &t.outcome, &t.error) {
        (TaskStatus::Failed, _, Some((code, message, data))) => LegacyAnswer::Error {
            code: *code,
            message: message.clone(),
            data: data.clone(),
        },
        // Completed, or failed with a tool result that has `isError: true`.
        (TaskStatus::Completed | TaskStatus::Failed, Some(result), None) => {
            LegacyAnswer::Result(with_related_task(result, task))
        }
        _ => LegacyAnswer::Error {
            code: jsonrpc::INTERNAL_ERROR,
            message: "The task was cancelled".to_owned(),
            data: None,
        },
    }
}

/// The `_meta` key that relates a 2025-11-25 message to its task.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// `result` (an object) with the related-task `_meta` of `task` first in its `_meta`, merged
/// with the result's own `_meta` members (a related-task member of its own is replaced: it
/// is this task's result; a `_meta` that is not an object is dropped). The other members
/// pass through byte for byte.
fn with_related_task(result: &str, task: &str) -> String {
    let mut related = Vec::with_capacity(task.len() + 16);
    related.extend_from_slice(b"{\"taskId\":");
    write_json_string(&mut related, task);
    related.push(b'}');
    // `{"_meta":{"<key>":<related>,` before the result's members: one allocation.
    let mut out = Vec::with_capacity(result.len() + RELATED_TASK.len() + related.len() + 16);
    let edited = json_edit::replace_meta(
        &mut out,
        RawJson::validated(result),
        &[(RELATED_TASK, &related)],
    );
    match edited.map(|()| String::from_utf8(out)) {
        Ok(Ok(text)) => text,
        _ => result.to_owned(),
    }
}

/// The `taskId` a tasks request names (a string), if it names one.
fn task_id(params: Option<RawJson<'_>>) -> Option<String> {
    params
        .and_then(|p| p.unique_str("taskId"))
        .map(|t| t.to_str().into_owned())
}

/// The `taskId` of a task handle we received, if the handle is a well-formed `Task`: a string
/// `taskId`, a known `status`, string `createdAt` and `lastUpdatedAt`, a numeric or null TTL
/// (`ttlMs` in 2026-07-28, `ttl` with `legacy`, the `{"task":{…}}` of 2025-11-25), and where
/// present and not null a numeric poll interval and a string `statusMessage`; no member twice.
/// `task` is the flat `CreateTaskResult` of 2026-07-28 or the object under `task` of
/// 2025-11-25. Anything else is an invalid response for the requestor.
pub(crate) fn handle_task_id(task: RawJson<'_>, legacy: bool) -> Option<jsonrpc::JsonStr<'_>> {
    let [ttl, poll] = if legacy {
        ["ttl", "pollInterval"]
    } else {
        ["ttlMs", "pollIntervalMs"]
    };
    let keys = [
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        ttl,
        poll,
        "statusMessage",
    ];
    let found = task.get_each(keys);
    let mut v = [None; 7];
    for (i, slot) in v.iter_mut().enumerate() {
        *slot = found.get(i).ok()?;
    }
    let [id, status, created, updated, ttl, poll, message] = v;
    let number = |n: RawJson<'_>| n.as_f64().is_some();
    let known = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];
    let valid = task.is_object()
        && status
            .and_then(|s| s.as_str())
            .is_some_and(|s| known.iter().any(|k| s.eq_str(k.as_str())))
        && created.and_then(|c| c.as_str()).is_some()
        && updated.and_then(|u| u.as_str()).is_some()
        && ttl.is_some_and(|t| t.is_null() || number(t))
        && poll.is_none_or(|p| p.is_null() || number(p))
        && message.is_none_or(|m| m.is_null() || m.as_str().is_some());
    id.and_then(|id| id.as_str()).filter(|_| valid)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The last millisecond of 9999-12-31 UTC: RFC 3339 has four-digit years, so a clock past it
/// (a host's bogus wall clock) is written as this.
const LAST_RFC3339_MS: u64 = 253_402_300_799_999;

/// Writes `n` in decimal, with leading zeros up to `width` digits: task JSON is written
/// without allocating.
fn write_digits(out: &mut Vec<u8>, n: u64, width: usize) {
    crate::jsonrpc::write_u64_padded(out, n, width);
}

/// Writes `unix_ms` (milliseconds since 1970-01-01 UTC) as `YYYY-MM-DDTHH:MM:SS.mmmZ`, at most
/// the end of year 9999.
fn write_iso8601_utc(out: &mut Vec<u8>, unix_ms: u64) {
    let unix_ms = unix_ms.min(LAST_RFC3339_MS);
    let ms = unix_ms % 1000;
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days since the epoch to a civil date (proleptic Gregorian), by 400-year eras that start
    // on March 1st so that the leap day comes last.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    for (n, width, then) in [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (h, 2, b':'),
        (m, 2, b':'),
        (s, 2, b'.'),
        (ms, 3, b'Z'),
    ] {
        write_digits(out, n, width);
        out.push(then);
    }
}

#[cfg(test)]
mod tests {
    use super::{write_digits, write_iso8601_utc};

    fn iso8601_utc(unix_ms: u64) -> String {
        let mut out = Vec::new();
        write_iso8601_utc(&mut out, unix_ms);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn digits_are_written_with_their_padding() {
        for (n, width, want) in [
            (0, 1, "0"),
            (7, 3, "007"),
            (1234, 2, "1234"),
            (u64::MAX, 1, "18446744073709551615"),
        ] {
            let mut out = b"x".to_vec();
            write_digits(&mut out, n, width);
            assert_eq!(out, format!("x{want}").as_bytes());
        }
    }

    #[test]
    fn wall_clock_times_are_iso_8601_in_utc() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a year divisible by 400), 12:34:56.789.
        assert_eq!(iso8601_utc(951_827_696_789), "2000-02-29T12:34:56.789Z");
        // 2026-11-24T12:00:00Z.
        assert_eq!(iso8601_utc(1_795_521_600_000), "2026-11-24T12:00:00.000Z");
        // The last millisecond of 2023 and the first of 2024.
        assert_eq!(iso8601_utc(1_704_067_199_999), "2023-12-31T23:59:59.999Z");
        assert_eq!(iso8601_utc(1_704_067_200_000), "2024-01-01T00:00:00.000Z");
        // A clock past year 9999 stays a valid timestamp (it wrote year 584556019).
        assert_eq!(iso8601_utc(u64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso8601_utc(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
    }
}
