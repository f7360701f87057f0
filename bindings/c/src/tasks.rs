//! `mcpw_tasks`: a server's task table for the tasks extension of 2026-07-28
//! (`io.modelcontextprotocol/tasks`, SEP-2663), driven from C.
//!
//! A server answers a long `tools/call` with a task handle at once (`mcpw_conn_respond_task`),
//! and the client polls `tasks/get`, answers the task's input requests with `tasks/update` and
//! cancels it with `tasks/cancel`, which `mcpw_tasks_serve` answers. The table is a handle of
//! its own, apart from any connection, because a task outlives the request that created it
//! (over Streamable HTTP each 2026-07-28 request has a connection of its own): keep one table
//! per server and hand it the tasks requests of every connection.
//!
//! The same table serves the experimental tasks of 2025-11-25 (`mcpw_tasks_create_legacy`,
//! `mcpw_tasks_serve_legacy`, `mcpw_tasks_poll_result`, `mcpw_tasks_write_result`), whose
//! `tasks/result` waits for the task to end.

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::time::Duration;

use super::boundary::{
    Handle, Out, bytes_in, call, catch, chars_as_bytes, free_handle, host_callback, into_handle,
    json, optional, optional_bytes_in, read_in, text_in, utf8, with_mut, with_mut_and_ref,
    with_mut_pair, with_ref,
};
use super::conn::{id_in, id_of, mcpw_conn, refuse_if_closed, stage};
use super::event::{mcpw_id, mcpw_str};
use super::result::mcpw_result::{self, *};
use mcpwire::conn::Timestamp;
use mcpwire::tasks::{LegacyAnswer, ReadyResult, TaskConfig, TaskEvent, TaskStatus, Tasks};

fn at(now_ns: u64) -> Timestamp {
    Timestamp::from_nanos(now_ns)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

// ---- Configuration ------------------------------------------------------------------------

/// The bounds and timing of a task table, for `mcpw_tasks_new`. Start from
/// `mcpw_task_config_default()` and change what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct mcpw_task_config {
    /// Tasks kept at once. At the cap, creating a task drops the oldest terminal one whose end a
    /// client was given (2026-07-28: its `tasks/get` of the ended task; 2025-11-25: its
    /// `tasks/result` or `tasks/cancel`), or that was cancelled; with none, `mcpw_tasks_create`
    /// fails with `MCPW_ERR_TASKS_FULL`: a completed or failed task nobody fetched stays for its
    /// whole TTL (with `ttl_ms` 0, any terminal task may make room). At least 1; default 1024.
    pub max_tasks: usize,
    /// How long a task lives from its creation, in milliseconds (the `ttlMs` clients see);
    /// 0 for no limit (then only `max_tasks` bounds the table). Default one hour. Above
    /// 2^53 - 1 (the largest integer JSON readers keep exact) it is taken as 2^53 - 1.
    pub ttl_ms: u64,
    /// The polling interval suggested to clients (`pollIntervalMs`), in milliseconds. At
    /// least 1; default 1000. Above 2^53 - 1 it is taken as 2^53 - 1.
    pub poll_interval_ms: u64,
    /// Input requests a task may have outstanding at once (`mcpw_tasks_ask`). At least 1;
    /// default 16.
    pub max_input_requests: usize,
    /// The largest result, error or input request a task keeps, in bytes of JSON. At least
    /// 1; default 1 MiB.
    pub max_payload: usize,
    /// Tasks one requestor (the `owner` of `mcpw_tasks_create_legacy`) may hold at once,
    /// terminal ones included, so that one session cannot take every slot of `max_tasks`. At
    /// the cap, creating a task for that owner drops its oldest terminal task that may go (as
    /// for `max_tasks`); with none, the call fails with `MCPW_ERR_TASKS_FULL` for that owner
    /// only.
    /// 2026-07-28 tasks (`mcpw_tasks_create`) have no owner: only `max_tasks` bounds them. At
    /// least 1; default 256.
    pub max_tasks_per_owner: usize,
}

impl From<&TaskConfig> for mcpw_task_config {
    fn from(c: &TaskConfig) -> Self {
        mcpw_task_config {
            max_tasks: c.max_tasks,
            ttl_ms: c.ttl.map_or(0, millis),
            poll_interval_ms: millis(c.poll_interval),
            max_input_requests: c.max_input_requests,
            max_payload: c.max_payload,
            max_tasks_per_owner: c.max_tasks_per_owner,
        }
    }
}

/// The engine's configuration for the caller's: every bound at least 1.
fn config_in(c: &mcpw_task_config) -> Result<TaskConfig, mcpw_result> {
    let bounds = [
        c.max_tasks,
        c.max_tasks_per_owner,
        c.max_input_requests,
        c.max_payload,
    ];
    if bounds.contains(&0) || c.poll_interval_ms == 0 {
        return Err(MCPW_ERR_INVALID_ARGUMENT);
    }
    Ok(TaskConfig {
        max_tasks: c.max_tasks,
        max_tasks_per_owner: c.max_tasks_per_owner,
        ttl: (c.ttl_ms > 0).then(|| Duration::from_millis(c.ttl_ms)),
        poll_interval: Duration::from_millis(c.poll_interval_ms),
        max_input_requests: c.max_input_requests,
        max_payload: c.max_payload,
    })
}

/// The default task configuration (1024 tasks, 256 of them per owner, a TTL of one hour,
/// polling every second, 16 input requests per task, payloads up to 1 MiB), to change before
/// `mcpw_tasks_new`.
#[unsafe(no_mangle)]
pub extern "C" fn mcpw_task_config_default() -> mcpw_task_config {
    const NONE: mcpw_task_config = mcpw_task_config {
        max_tasks: 0,
        ttl_ms: 0,
        poll_interval_ms: 0,
        max_input_requests: 0,
        max_payload: 0,
        max_tasks_per_owner: 0,
    };
    catch(|| NONE, || mcpw_task_config::from(&TaskConfig::default()))
}

// ---- Statuses and events ------------------------------------------------------------------

/// Where a task is (`mcpw_tasks_status`). The last three are terminal: a task in them never
/// changes again.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_task_status {
    /// `working`: the work is going on.
    MCPW_TASK_STATUS_WORKING = 1,
    /// `input_required`: the work waits for the client's answers to the task's input
    /// requests (`mcpw_tasks_ask`).
    MCPW_TASK_STATUS_INPUT_REQUIRED = 2,
    /// `completed`: the work finished with a result (a tool result with `isError: true`
    /// included, but for a 2025-11-25 task). Terminal.
    MCPW_TASK_STATUS_COMPLETED = 3,
    /// `failed`: the work failed with a JSON-RPC error, or (a 2025-11-25 task) completed with
    /// a tool result that has `isError: true`, which its `tasks/result` returns. Terminal.
    MCPW_TASK_STATUS_FAILED = 4,
    /// `cancelled`: the work was cancelled. Terminal.
    MCPW_TASK_STATUS_CANCELLED = 5,
    /// A status this version of the C ABI has no code for yet.
    MCPW_TASK_STATUS_OTHER = 999,
}

fn status_out(s: TaskStatus) -> mcpw_task_status {
    #[allow(unreachable_patterns)]
    match s {
        TaskStatus::Working => mcpw_task_status::MCPW_TASK_STATUS_WORKING,
        TaskStatus::InputRequired => mcpw_task_status::MCPW_TASK_STATUS_INPUT_REQUIRED,
        TaskStatus::Completed => mcpw_task_status::MCPW_TASK_STATUS_COMPLETED,
        TaskStatus::Failed => mcpw_task_status::MCPW_TASK_STATUS_FAILED,
        TaskStatus::Cancelled => mcpw_task_status::MCPW_TASK_STATUS_CANCELLED,
        _ => mcpw_task_status::MCPW_TASK_STATUS_OTHER,
    }
}

/// What an `mcpw_task_event` reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_task_event_kind {
    /// Nothing happened: the queue is empty. Stop polling.
    MCPW_TASK_EVENT_NONE = 0,
    /// The client answered the input request `key` of `task` (with `tasks/update`);
    /// `response` is its answer, raw JSON (an elicitation or sampling result, say). Once
    /// every outstanding request is answered the task is `working` again.
    MCPW_TASK_EVENT_INPUT = 1,
    /// The client asked to cancel `task` (`tasks/cancel`). Cancellation is cooperative: call
    /// `mcpw_tasks_cancel` once the work stopped, or finish the task normally. (A 2025-11-25
    /// task is cancelled already: just stop the work; a later cancel, complete or fail gets
    /// `MCPW_ERR_TASK_TERMINAL`.)
    MCPW_TASK_EVENT_CANCEL_REQUESTED = 2,
    /// `task` reached its TTL and was deleted: stop any work left for it.
    MCPW_TASK_EVENT_EXPIRED = 3,
    /// Something this version of the C ABI has no kind for yet. Ignore it.
    MCPW_TASK_EVENT_OTHER = 999,
}

/// What the client did to a task, filled in by `mcpw_tasks_poll_event`.
///
/// `kind` says which fields mean something; the others are absent views (NULL). Every view
/// points into memory owned by the task table and stays valid until the next call that takes
/// the table non-`const`; copy what you need to keep. Passing `task` straight back into a
/// call on the table (`mcpw_tasks_complete`, say) is fine.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_task_event {
    /// What happened.
    pub kind: mcpw_task_event_kind,
    /// The task's id (every kind but `MCPW_TASK_EVENT_NONE`).
    pub task: mcpw_str,
    /// The input request's key, as given to `mcpw_tasks_ask` (`MCPW_TASK_EVENT_INPUT`).
    pub key: mcpw_str,
    /// The client's answer, raw JSON text (`MCPW_TASK_EVENT_INPUT`).
    pub response: mcpw_str,
}

impl mcpw_task_event {
    /// The "nothing happened" event.
    pub(crate) const NONE: mcpw_task_event = mcpw_task_event {
        kind: mcpw_task_event_kind::MCPW_TASK_EVENT_NONE,
        task: mcpw_str::NONE,
        key: mcpw_str::NONE,
        response: mcpw_str::NONE,
    };

    fn of(event: &TaskEvent) -> mcpw_task_event {
        use mcpw_task_event_kind::*;
        #[allow(unreachable_patterns)]
        match event {
            TaskEvent::Input {
                task,
                key,
                response,
            } => mcpw_task_event {
                kind: MCPW_TASK_EVENT_INPUT,
                task: mcpw_str::of(task),
                key: mcpw_str::of(key),
                response: mcpw_str::of(response),
            },
            TaskEvent::CancelRequested { task } => mcpw_task_event {
                kind: MCPW_TASK_EVENT_CANCEL_REQUESTED,
                task: mcpw_str::of(task),
                ..mcpw_task_event::NONE
            },
            TaskEvent::Expired { task } => mcpw_task_event {
                kind: MCPW_TASK_EVENT_EXPIRED,
                task: mcpw_str::of(task),
                ..mcpw_task_event::NONE
            },
            _ => mcpw_task_event {
                kind: MCPW_TASK_EVENT_OTHER,
                ..mcpw_task_event::NONE
            },
        }
    }
}

impl Default for mcpw_task_event {
    /// The "nothing happened" event (`MCPW_TASK_EVENT_NONE`, every view absent).
    fn default() -> Self {
        mcpw_task_event::NONE
    }
}

/// A 2025-11-25 `tasks/result` request that can be answered now (its task ended or
/// expired), filled in by `mcpw_tasks_poll_result`.
///
/// When `ready` is false every other field is empty. The views point into memory owned by the
/// task table and stay valid until the next call that takes the table non-`const`. Answer the
/// request with `mcpw_tasks_write_result` on the connection of `owner`, or yourself from the
/// fields (`mcpw_conn_respond` with `result`, or `mcpw_conn_respond_error` with `code`,
/// `message` and `data`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_task_result {
    /// Whether there was a result to answer; false when the queue is empty (stop polling).
    pub ready: bool,
    /// Whose task it was: the `owner` given to `mcpw_tasks_create_legacy` (pick the
    /// connection or session to answer on by it).
    pub owner: u64,
    /// The waiting `tasks/result` request's id.
    pub id: mcpw_id,
    /// Whether the answer is a JSON-RPC error (`code`, `message`, `data`) rather than
    /// `result`.
    pub is_error: bool,
    /// The result, raw JSON text: what the task's request would have returned, with the
    /// related-task `_meta` (when not `is_error`).
    pub result: mcpw_str,
    /// The error code (when `is_error`).
    pub code: i64,
    /// The error message, text (when `is_error`).
    pub message: mcpw_str,
    /// The error data, raw JSON text, or absent (when `is_error`).
    pub data: mcpw_str,
}

impl mcpw_task_result {
    /// No result to answer.
    pub(crate) const NONE: mcpw_task_result = mcpw_task_result {
        ready: false,
        owner: 0,
        id: mcpw_id::NONE,
        is_error: false,
        result: mcpw_str::NONE,
        code: 0,
        message: mcpw_str::NONE,
        data: mcpw_str::NONE,
    };

    fn of(ready: &ReadyResult) -> mcpw_task_result {
        let base = mcpw_task_result {
            ready: true,
            owner: ready.owner,
            id: mcpw_id::of(ready.id.as_id()),
            ..mcpw_task_result::NONE
        };
        match &ready.answer {
            LegacyAnswer::Result(result) => mcpw_task_result {
                result: mcpw_str::of(result),
                ..base
            },
            LegacyAnswer::Error {
                code,
                message,
                data,
            } => mcpw_task_result {
                is_error: true,
                code: *code,
                message: mcpw_str::of(message),
                data: mcpw_str::of_opt(data.as_deref()),
                ..base
            },
            // Never polled (the engine answers a waiting request only once its task ended).
            LegacyAnswer::Wait => base,
        }
    }
}

impl Default for mcpw_task_result {
    /// No result to answer (`ready` false, every view absent).
    fn default() -> Self {
        mcpw_task_result::NONE
    }
}

// ---- The handle ---------------------------------------------------------------------------

/// A server's task table (the tasks extension of 2026-07-28). Create it with
/// `mcpw_tasks_new` and free it with `mcpw_tasks_free`. A handle may move between threads but
/// must not be used by two at once, and the calls that take a connection too
/// (`mcpw_conn_respond_task`, `mcpw_tasks_serve`) use both handles for the call.
pub struct mcpw_tasks {
    tasks: Tasks,
    poisoned: Cell<bool>,
    /// The caller's inputs to `mcpw_tasks_serve`, copied: they may point into views of the
    /// connection, which die as soon as the connection is answered on.
    staged: Vec<u8>,
    /// The id `mcpw_tasks_create` lent last.
    created: String,
    /// The event `mcpw_tasks_poll_event` lent last.
    event: Option<TaskEvent>,
    /// The 2025-11-25 answer `mcpw_tasks_poll_result` lent last, until written.
    ready: Option<ReadyResult>,
    /// `mcpw_tasks_write_result` found its connection's output full: the next poll hands
    /// `ready` back instead of the next answer.
    ready_again: bool,
    /// The params `mcpw_tasks_status_notification` lent last.
    notification: String,
}

impl Handle for mcpw_tasks {
    fn poisoned(&self) -> &Cell<bool> {
        &self.poisoned
    }
    fn after_call(&mut self) {
        mcpwire::frame::empty(&mut self.staged);
    }
}

/// Creates an empty task table with `config` (read during the call; NULL for
/// `mcpw_task_config_default()`). `now_ns` and `unix_ms` are the same instant on your
/// monotonic clock (nanoseconds, the clock of every later `now_ns`) and on the wall clock
/// (milliseconds since 1970-01-01 UTC): the times a task carries (`createdAt`,
/// `lastUpdatedAt`) are counted from them, so they never jump with the system clock. A bound
/// of 0 in `config` is `MCPW_ERR_INVALID_ARGUMENT`.
///
/// On success `*out_tasks` receives a new handle that the caller owns and must free exactly
/// once with `mcpw_tasks_free`.
///
/// # Safety
/// `config` is NULL or readable; `out_tasks` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_new(
    config: *const mcpw_task_config,
    now_ns: u64,
    unix_ms: u64,
    out_tasks: *mut *mut mcpw_tasks,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_tasks) }?;
        let config = match optional(config) {
            // Safety: (caller) readable; the struct is plain numbers.
            Some(_) => config_in(&unsafe { read_in(config) }?)?,
            None => TaskConfig::default(),
        };
        out.write(into_handle(mcpw_tasks {
            tasks: Tasks::new(config, at(now_ns), unix_ms),
            poisoned: Cell::new(false),
            staged: Vec::new(),
            created: String::new(),
            event: None,
            ready: None,
            ready_again: false,
            notification: String::new(),
        }));
        Ok(())
    })
}

/// Frees a task table, exactly once, with every task and everything it lent. NULL does
/// nothing. The tasks simply end: clients polling them get "task not found" from whoever
/// answers them next.
///
/// # Safety
/// `tasks` is NULL or a handle from `mcpw_tasks_new` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_free(tasks: *mut mcpw_tasks) {
    // Safety: (caller) NULL or live, freed only here.
    unsafe { free_handle(tasks) }
}

// ---- Creating a task and handing it out ---------------------------------------------------

/// Creates a `working` task and lends its id in `*out_task_id`: 128 bits from `random` (your
/// cryptographically secure source, `getrandom(2)` say, called with `random_user` during this
/// call only: task ids are bearer handles), as 32 hex digits. The view belongs to the table
/// and stays valid until the next call that takes it non-`const`; copy it to keep it.
///
/// Use it on a `tools/call` whose request declared the extension (`MCPW_CAP_TASKS_EXTENSION` in
/// `mcpw_conn_request_context`) when the work is long, then answer the request with
/// `mcpw_conn_respond_task`: the task is already visible to `tasks/get`. At `max_tasks`, the
/// oldest terminal task that may go (see there) is dropped to make room, or, with none, the
/// call fails with `MCPW_ERR_TASKS_FULL` (answer without a task, then). `random` NULL is
/// `MCPW_ERR_NULL_ARGUMENT`. A call `random` makes to a function that takes a handle returns
/// `MCPW_ERR_REENTRANT`.
///
/// # Safety
/// `tasks` is NULL or a live task table; `random`, when not NULL, fills `len` bytes at `buf`;
/// `out_task_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_create(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    random: Option<unsafe extern "C" fn(user: *mut c_void, buf: *mut u8, len: usize)>,
    random_user: *mut c_void,
    out_task_id: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_task_id) }?;
        let random = random.ok_or(MCPW_ERR_NULL_ARGUMENT)?;
        let mut fill = |buf: &mut [u8]| {
            // Safety: the host's callback, given a writable buffer of that length.
            host_callback(|| unsafe { random(random_user, buf.as_mut_ptr(), buf.len()) })
        };
        h.created = h.tasks.create(at(now_ns), &mut fill)?;
        out.write(mcpw_str::of(&h.created));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// `mcpw_tasks_create` for a 2025-11-25 task-augmented request (the experimental tasks of that
/// version: a `tools/call` whose params have a `task` member, which the engine lets through
/// only where the server declared `tasks.requests.tools.call`; or, on a client, a server's
/// `sampling/createMessage` or `elicitation/create`). The task belongs to `owner`, a number of
/// your choosing for the session or connection that asked: `mcpw_tasks_serve_legacy` shows a
/// requestor its own tasks only. Its wire shapes are that version's (`{"task":{…}}`, `ttl`,
/// `pollInterval`). Answer the request with `mcpw_conn_respond_task`. An owner holding
/// `max_tasks_per_owner` tasks has its oldest terminal one that may go (see `max_tasks`)
/// dropped to make room, or, with none, gets `MCPW_ERR_TASKS_FULL` (others still get tasks).
/// Errors and the lent id as for `mcpw_tasks_create`.
///
/// # Safety
/// As for `mcpw_tasks_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_create_legacy(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    random: Option<unsafe extern "C" fn(user: *mut c_void, buf: *mut u8, len: usize)>,
    random_user: *mut c_void,
    owner: u64,
    out_task_id: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_task_id) }?;
        let random = random.ok_or(MCPW_ERR_NULL_ARGUMENT)?;
        let mut fill = |buf: &mut [u8]| {
            // Safety: the host's callback, given a writable buffer of that length.
            host_callback(|| unsafe { random(random_user, buf.as_mut_ptr(), buf.len()) })
        };
        h.created = h.tasks.create_legacy(at(now_ns), &mut fill, owner)?;
        out.write(mcpw_str::of(&h.created));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Answers the peer's request `*id` on `conn` with the handle of task `task` (UTF-8) instead
/// of its result: the `CreateTaskResult`. In 2026-07-28 (a `tools/call`, task from
/// `mcpw_tasks_create`) that is `resultType: "task"` with the task's id, status and times, and
/// the client polls the task with `tasks/get` (answer it with `mcpw_tasks_serve`). In
/// 2025-11-25 (a task-augmented request, task from `mcpw_tasks_create_legacy`) it is
/// `{"task":{…}}`, and the client polls with `tasks/get` and `tasks/result` (answer them with
/// `mcpw_tasks_serve_legacy`). The client gets `MCPW_EVENT_TASK_CREATED`.
///
/// Refused, with the connection and the table unchanged: `MCPW_ERR_NOT_NEGOTIATED` when a
/// 2026-07-28 request, or the server's own capabilities, did not declare the tasks extension (a
/// task never goes to a client that cannot poll it: answer normally, and cancel the task),
/// `MCPW_ERR_NOT_ELIGIBLE` for a 2026-07-28 request but `tools/call` and for a 2025-11-25
/// request that did not ask for a task (no `task` member, or a method we did not declare under
/// `tasks.requests`), `MCPW_ERR_INVALID_PARAMS` for a task of the other version's shape,
/// `MCPW_ERR_NOT_IN_VERSION` in the versions before 2025-11-25, `MCPW_ERR_UNKNOWN_REQUEST` when
/// `*id` is not in flight, `MCPW_ERR_UNKNOWN_TASK` for an unknown task, `MCPW_ERR_CLOSED` after
/// `MCPW_EVENT_CLOSED`. The table is only read. Inputs are read during the call only, and may
/// be views from this connection's current event or from the table.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `tasks` is NULL or a live task table; `task` points to `task_len`
/// readable bytes (or is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_respond_task(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    tasks: *const mcpw_tasks,
    task: *const c_char,
    task_len: usize,
) -> mcpw_result {
    let body = |c: &mut mcpw_conn, t: &mcpw_tasks| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        let [string] = stage(&mut c.staged, [id.string]);
        let key = id_of(id.kind, id.integer, string)?;
        refuse_if_closed(c.conn.get()?)?;
        let handle = t.tasks.create_result(task).ok_or(MCPW_ERR_UNKNOWN_TASK)?;
        let handle = json(handle.as_bytes())?;
        c.conn.get_mut()?.respond_task(key, handle)?;
        Ok(())
    };
    // Safety: (caller) each NULL or a live handle of its type.
    unsafe { with_mut_and_ref(conn, tasks, body) }
}

// ---- Getters ------------------------------------------------------------------------------

/// The status notification of task `task` (UTF-8) as it stands: `*out_method` is
/// `notifications/tasks` for an extension task (its params the full DetailedTask; send it with
/// `mcpw_conn_notify` on every connection, and the engine delivers it only on the
/// `subscriptions/listen` streams granted this task's id) or
/// `notifications/tasks/status` for a 2025-11-25 task (the flat Task; send it on its owner's
/// connection). Both are optional in the spec: clients keep polling. The views stay valid
/// until the next non-const call on the table. `MCPW_ERR_UNKNOWN_TASK` for an unknown task.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
/// NULL with length 0); `out_method` and `out_params` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_status_notification(
    tasks: *mut mcpw_tasks,
    task: *const c_char,
    task_len: usize,
    out_method: *mut mcpw_str,
    out_params: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let method_out = unsafe { Out::new(out_method) }?;
        // Safety: (caller) writable or NULL, which is refused.
        let params_out = unsafe { Out::new(out_params) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        let (method, params) = h
            .tasks
            .status_notification(task)
            .ok_or(MCPW_ERR_UNKNOWN_TASK)?;
        h.notification = params;
        method_out.write(mcpw_str::of(method));
        params_out.write(mcpw_str::of(&h.notification));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Reads the status of task `task` (UTF-8) into `*out_status`. `MCPW_ERR_UNKNOWN_TASK` for a
/// task never created, expired or dropped.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
/// NULL with length 0); `out_status` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_status(
    tasks: *const mcpw_tasks,
    task: *const c_char,
    task_len: usize,
    out_status: *mut mcpw_task_status,
) -> mcpw_result {
    let body = |h: &mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_status) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        let status = h.tasks.status(task).ok_or(MCPW_ERR_UNKNOWN_TASK)?;
        out.write(status_out(status));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_ref(tasks, body) }
}

/// Reads whether the client asked to cancel task `task` (UTF-8) into `*out_requested`: it
/// stays asked while the table holds the task (after it ends too); false for an unknown task. The same news comes once as
/// `MCPW_TASK_EVENT_CANCEL_REQUESTED`; this lets long work check between steps.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
/// NULL with length 0); `out_requested` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_cancel_requested(
    tasks: *const mcpw_tasks,
    task: *const c_char,
    task_len: usize,
    out_requested: *mut bool,
) -> mcpw_result {
    let body = |h: &mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_requested) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        out.write(h.tasks.cancel_requested(task));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_ref(tasks, body) }
}

// ---- Moving a task along ------------------------------------------------------------------

/// Sets the `statusMessage` of task `task` to `message` (UTF-8, a progress description for
/// example), or clears it when `message` is NULL.
///
/// An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
/// (nothing changes). Inputs are read during the call only, and may be views the table lent.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` and `message` point to their lengths in
/// readable bytes (or are NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_set_message(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    task: *const c_char,
    task_len: usize,
    message: *const c_char,
    message_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let message = unsafe { optional_bytes_in(message, message_len) }?;
        let message = message.map(utf8).transpose()?;
        h.tasks.set_message(at(now_ns), task, message)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Puts task `task` back to `working` after `input_required`, dropping its outstanding input
/// requests: the 2025-11-25 flow, where the server sends its input requests itself (related to
/// the task) and resumes the task when their answers came. (In the 2026-07-28 flow the last
/// `MCPW_TASK_EVENT_INPUT` does this.) A task already `working` stays so.
///
/// An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
/// (nothing changes). Inputs are read during the call only, and may be views the table lent.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
/// NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_resume(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    task: *const c_char,
    task_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        h.tasks.resume(at(now_ns), task)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Asks the client for input for task `task`: `request` (a JSON object such as
/// `{"method":"elicitation/create","params":{…}}`) goes out under `key` (UTF-8) in the
/// task's `inputRequests`, and the task is `input_required` until every outstanding request
/// has its answer (`MCPW_TASK_EVENT_INPUT`, from `tasks/update`). A key is used once in a
/// task's life (`MCPW_ERR_TASK_KEY_REUSED`); at `max_input_requests` outstanding,
/// `MCPW_ERR_TOO_MANY_INPUT_REQUESTS`; a request that is no input request of Multi
/// Round-Trip Requests (`elicitation/create` or `sampling/createMessage` with a params object,
/// or `roots/list`) or is over `max_payload`, `MCPW_ERR_INVALID_TASK_PAYLOAD` (text that is
/// not JSON: `MCPW_ERR_INVALID_JSON`). Ask only for what the client declared:
/// `mcpw_tasks_serve` answers a `tasks/get` from a client without it with -32021.
///
/// An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
/// (nothing changes). Inputs are read during the call only, and may be views the table lent.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task`, `key` and `request` point to their lengths in
/// readable bytes (or are NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_ask(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    task: *const c_char,
    task_len: usize,
    key: *const c_char,
    key_len: usize,
    request: *const c_char,
    request_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let key = unsafe { text_in(key, key_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let request = json(unsafe { bytes_in(chars_as_bytes(request), request_len) }?)?;
        h.tasks.ask(at(now_ns), task, key, request)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Finishes task `task` as `completed` with `result` (a JSON object: what the request would
/// have returned, a `CallToolResult`, `isError: true` included). Outstanding input requests
/// are dropped. A result that is not an object or is over `max_payload` is
/// `MCPW_ERR_INVALID_TASK_PAYLOAD`.
///
/// An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
/// (nothing changes). Inputs are read during the call only, and may be views the table lent.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` and `result` point to their lengths in
/// readable bytes (or are NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_complete(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    task: *const c_char,
    task_len: usize,
    result: *const c_char,
    result_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let result = json(unsafe { bytes_in(chars_as_bytes(result), result_len) }?)?;
        h.tasks.complete(at(now_ns), task, result)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Finishes task `task` as `failed` with a JSON-RPC error: `code`, `message` (UTF-8) and
/// `data` (any JSON value as text, or NULL for none). For a protocol-level fault; a tool that
/// ran and reported an error completes with `isError: true` instead. The message also becomes
/// the task's `statusMessage`, in place of any progress message (a failed task's
/// `statusMessage` says why it failed). An error over `max_payload` is
/// `MCPW_ERR_INVALID_TASK_PAYLOAD`, and so is a code the task's protocol version does not
/// define (2025-11-25 for a legacy task, 2026-07-28 otherwise; the rules of
/// `mcpw_conn_respond_error`, -32002 written as 2026-07-28's -32602), and -32042 without the
/// `elicitations` of URL elicitation in `data`. Any other integer goes out as given.
///
/// An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
/// (nothing changes). Inputs are read during the call only, and may be views the table lent.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task`, `message` and `data` point to their lengths
/// in readable bytes (or are NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_fail(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    task: *const c_char,
    task_len: usize,
    code: i64,
    message: *const c_char,
    message_len: usize,
    data: *const c_char,
    data_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let message = unsafe { text_in(message, message_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let data = unsafe { optional_bytes_in(data, data_len) }?;
        let data = data.map(json).transpose()?;
        h.tasks.fail(at(now_ns), task, code, message, data)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// Ends task `task` as `cancelled`: the work stopped, after
/// `MCPW_TASK_EVENT_CANCEL_REQUESTED` or for the server's own reasons.
///
/// An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
/// (nothing changes). Inputs are read during the call only, and may be views the table lent.
///
/// # Safety
/// `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
/// NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_cancel(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    task: *const c_char,
    task_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let task = unsafe { text_in(task, task_len) }?;
        h.tasks.cancel(at(now_ns), task)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

// ---- The client's side: requests, events, time --------------------------------------------

/// Answers the peer's request `*id` on `conn` if `method` (UTF-8) is a tasks method of the
/// 2026-07-28 extension: `tasks/get` with the task's `DetailedTask` (its input requests, result or error
/// by status), `tasks/update` and `tasks/cancel` with an empty acknowledgement (their effects
/// come as `mcpw_tasks_poll_event` events), a missing or unknown task with -32602.
/// `*out_served` is true when it answered, and false (nothing answered, nothing changed) for
/// any other method, and for a request that is not a 2026-07-28 one (a 2025-11-25 session's
/// `tasks/get` goes on to `mcpw_tasks_serve_legacy`): answer that one yourself. `params` is the request's params object (JSON
/// text, or NULL when absent).
///
/// Pass it every request of every connection of the server before your own dispatch (the
/// engine already refuses these methods, with -32021, to a client that did not declare the
/// extension), once you have checked that the caller may see the task: the table checks no
/// access, and the extension requires a check on every task-related request (set
/// `MCPW_POLICY_REVIEW_LISTENS` too, so that listens naming task ids are checked). Afterwards
/// drain `mcpw_tasks_poll_event`, then the connection as after any command. A refusal of the answer by the connection (`MCPW_ERR_UNKNOWN_REQUEST`, say) comes
/// after the table took the request in, as in the Rust API. Inputs are read during the call
/// only, and may be views from this connection's current event.
///
/// # Safety
/// `tasks` is NULL or a live task table; `conn` is NULL or a live connection handle; `id` is
/// NULL or readable (its string readable for its length); `method` and `params` point to their
/// lengths in readable bytes (or are NULL with length 0); `out_served` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_serve(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    method: *const c_char,
    method_len: usize,
    params: *const c_char,
    params_len: usize,
    out_served: *mut bool,
) -> mcpw_result {
    let request = (id, method, method_len, params, params_len, out_served);
    // Safety: (caller) as this function's contract.
    unsafe {
        serve_request(tasks, conn, request, |t, c, id, method, params| {
            t.serve(at(now_ns), c, id, method, params)
        })
    }
}

/// A request handed to `mcpw_tasks_serve` or `mcpw_tasks_serve_legacy`: its id, method and
/// params as the caller gave them, and where to say whether it was served.
type RequestIn = (
    *const mcpw_id,
    *const c_char,
    usize,
    *const c_char,
    usize,
    *mut bool,
);

/// The two serve calls: reads and copies the request (its inputs may be views of this very
/// connection, which answering ends), then lets `serve` answer it on the connection.
///
/// # Safety
/// As for `mcpw_tasks_serve`.
unsafe fn serve_request(
    tasks: *mut mcpw_tasks,
    conn: *mut mcpw_conn,
    (id, method, method_len, params, params_len, out_served): RequestIn,
    serve: impl FnOnce(
        &mut Tasks,
        &mut mcpwire::Connection,
        mcpwire::jsonrpc::Id<'_>,
        &str,
        Option<mcpwire::jsonrpc::RawJson<'_>>,
    ) -> Result<bool, mcpwire::conn::Error>,
) -> mcpw_result {
    let body = |t: &mut mcpw_tasks, c: &mut mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_served) }?;
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let method = unsafe { bytes_in(chars_as_bytes(method), method_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let params = unsafe { optional_bytes_in(params, params_len) }?;
        let [string, Some(method), params] =
            stage(&mut t.staged, [id.string, Some(method), params])
        else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let key = id_of(id.kind, id.integer, string)?;
        let method = utf8(method)?;
        let params = params.map(json).transpose()?;
        refuse_if_closed(c.conn.get()?)?;
        let served = serve(&mut t.tasks, c.conn.get_mut()?, key, method, params)?;
        out.write(served);
        Ok(())
    };
    // Safety: (caller) each NULL or a live handle of its type.
    unsafe { with_mut_pair(tasks, conn, body) }
}

/// Takes the next thing the client did to a task (or a task's expiry) into `*out_event`,
/// oldest first. When there is none, returns `MCPW_OK` with `kind ==
/// MCPW_TASK_EVENT_NONE`. Call it until then after `mcpw_tasks_serve` and
/// `mcpw_tasks_handle_timeout`. The event's views stay valid until the next call that takes
/// the table non-`const`.
///
/// # Safety
/// `tasks` is NULL or a live task table; `out_event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_poll_event(
    tasks: *mut mcpw_tasks,
    out_event: *mut mcpw_task_event,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_event) }?;
        h.event = h.tasks.poll_event();
        out.write(
            h.event
                .as_ref()
                .map_or(mcpw_task_event::NONE, mcpw_task_event::of),
        );
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

// ---- 2025-11-25: the experimental tasks of that version -----------------------------------

/// 2025-11-25: answers the peer's request `*id` on `conn` if `method` (UTF-8) is a tasks
/// method of that version, from `owner` (the session or connection that sent it, as given to
/// `mcpw_tasks_create_legacy`; it sees its own tasks only): `tasks/get` and `tasks/cancel`
/// with the task, `tasks/list` with the owner's tasks (one page), `tasks/result` with the
/// underlying request's result (with the related-task `_meta`) or error once the task has
/// ended. A `tasks/result` on a task still running is not answered now: it comes out of
/// `mcpw_tasks_poll_result` once the task ends (or expires); those the client cancelled meanwhile
/// stop waiting (`conn` is `owner`'s connection), and at most 1024 wait for one task (more get
/// -32603 at once). `tasks/cancel` ends the task as
/// `cancelled` at once and reports `MCPW_TASK_EVENT_CANCEL_REQUESTED` so that the work stops.
/// An unknown task, or cancelling a terminal one, gets -32602. `*out_served` is true when it
/// took the request (answered or waiting), and false (nothing answered, nothing changed) for
/// any other method: answer that one yourself. `params` is the request's params object (JSON
/// text, or NULL when absent).
///
/// Afterwards drain `mcpw_tasks_poll_event` and `mcpw_tasks_poll_result`, then the connection
/// as after any command. Errors and inputs as for `mcpw_tasks_serve`: after
/// `MCPW_ERR_OUTPUT_FULL` nothing changed (a `tasks/cancel` has not cancelled its task yet);
/// drain the connection and call again.
///
/// # Safety
/// As for `mcpw_tasks_serve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_serve_legacy(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
    owner: u64,
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    method: *const c_char,
    method_len: usize,
    params: *const c_char,
    params_len: usize,
    out_served: *mut bool,
) -> mcpw_result {
    let request = (id, method, method_len, params, params_len, out_served);
    // Safety: (caller) as this function's contract.
    unsafe {
        serve_request(tasks, conn, request, |t, c, id, method, params| {
            t.serve_legacy(at(now_ns), owner, c, id, method, params)
        })
    }
}

/// 2025-11-25: takes the next `tasks/result` request that can be answered now (its task ended
/// or expired) into `*out_result`, oldest first. When there is none, returns `MCPW_OK` with
/// `ready` false. Call it until then after the calls that end tasks (`mcpw_tasks_complete`,
/// `mcpw_tasks_fail`, `mcpw_tasks_cancel`, `mcpw_tasks_serve_legacy`) and after
/// `mcpw_tasks_handle_timeout`, and answer each with `mcpw_tasks_write_result` (or yourself,
/// from its fields). The views stay valid until the next call that takes the table
/// non-`const`. After a write refused with `MCPW_ERR_OUTPUT_FULL`, the next call returns the
/// same answer again (drain the connection's output first), so that it is not lost.
///
/// # Safety
/// `tasks` is NULL or a live task table; `out_result` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_poll_result(
    tasks: *mut mcpw_tasks,
    out_result: *mut mcpw_task_result,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_result) }?;
        if !std::mem::take(&mut h.ready_again) || h.ready.is_none() {
            h.ready = h.tasks.poll_result();
        }
        out.write(
            h.ready
                .as_ref()
                .map_or(mcpw_task_result::NONE, mcpw_task_result::of),
        );
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

/// 2025-11-25: writes the answer `mcpw_tasks_poll_result` returned last to its request on `conn`
/// (the connection of its `owner`), then forgets it: calling again, or with nothing polled, is
/// `MCPW_ERR_UNKNOWN_REQUEST`. An error `conn` cannot carry (-32042 to a client that did not
/// declare URL elicitation) goes out as -32603 with its message. When the connection refuses it
/// (`MCPW_ERR_UNKNOWN_REQUEST` for a request not in flight there, `MCPW_ERR_CLOSED`, …) the answer
/// is kept, so another connection may be tried; the next poll replaces it, except after
/// `MCPW_ERR_OUTPUT_FULL`: then the next poll returns it again, for a write once the output is
/// drained. A `tasks/result` the client cancelled meanwhile gets nothing (`MCPW_OK`), and its task
/// then counts as not fetched: it is kept for the client's retry within its TTL. Drain the
/// connection afterwards as after any command.
///
/// # Safety
/// `tasks` is NULL or a live task table; `conn` is NULL or a live connection handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_write_result(
    tasks: *mut mcpw_tasks,
    conn: *mut mcpw_conn,
) -> mcpw_result {
    let body = |t: &mut mcpw_tasks, c: &mut mcpw_conn| {
        let ready = t.ready.as_ref().ok_or(MCPW_ERR_UNKNOWN_REQUEST)?;
        refuse_if_closed(c.conn.get()?)?;
        // (Through the table: a request the client cancelled leaves its task unfetched.)
        let written = t.tasks.write_ready(c.conn.get_mut()?, ready);
        t.ready_again = matches!(written, Err(mcpwire::conn::Error::OutputFull));
        written?;
        t.ready = None;
        Ok(())
    };
    // Safety: (caller) each NULL or a live handle of its type.
    unsafe { with_mut_pair(tasks, conn, body) }
}

/// Reads when the next task expires: `*out_has` is true and `*out_deadline_ns` holds it (on
/// the clock of `now_ns`), or `*out_has` is false and `*out_deadline_ns` is 0 when no task
/// can expire (none, or no TTL). Call `mcpw_tasks_handle_timeout` then; re-arm your timer
/// from it after creating tasks and after each timeout.
///
/// # Safety
/// `tasks` is NULL or a live task table; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_poll_timeout(
    tasks: *const mcpw_tasks,
    out_has: *mut bool,
    out_deadline_ns: *mut u64,
) -> mcpw_result {
    let body = |h: &mcpw_tasks| {
        // Safety: (caller) writable or NULL, which is refused.
        let (has_to, deadline_to) = unsafe { (Out::new(out_has)?, Out::new(out_deadline_ns)?) };
        let deadline = h.tasks.poll_timeout();
        has_to.write(deadline.is_some());
        deadline_to.write(deadline.map_or(0, Timestamp::as_nanos));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_ref(tasks, body) }
}

/// Deletes every task whose TTL ran out by `now_ns` (counted from its creation); a task that
/// was not terminal yet also gets `MCPW_TASK_EVENT_EXPIRED`, so drain
/// `mcpw_tasks_poll_event` next. Calling it early does nothing.
///
/// # Safety
/// `tasks` is NULL or a live task table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tasks_handle_timeout(
    tasks: *mut mcpw_tasks,
    now_ns: u64,
) -> mcpw_result {
    let body = |h: &mut mcpw_tasks| {
        h.tasks.handle_timeout(at(now_ns));
        Ok(())
    };
    // Safety: (caller) NULL or a live task table.
    unsafe { with_mut(tasks, body) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_the_engines() {
        let c = mcpw_task_config_default();
        let engine = TaskConfig::default();
        assert_eq!(config_in(&c), Ok(engine));
        assert_eq!(c.ttl_ms, 3_600_000);
        let unlimited = mcpw_task_config { ttl_ms: 0, ..c };
        assert_eq!(config_in(&unlimited).map(|c| c.ttl), Ok(None));
        for zero in [
            mcpw_task_config { max_tasks: 0, ..c },
            mcpw_task_config {
                max_tasks_per_owner: 0,
                ..c
            },
            mcpw_task_config {
                poll_interval_ms: 0,
                ..c
            },
            mcpw_task_config {
                max_input_requests: 0,
                ..c
            },
            mcpw_task_config {
                max_payload: 0,
                ..c
            },
        ] {
            assert_eq!(config_in(&zero), Err(MCPW_ERR_INVALID_ARGUMENT));
        }
    }

    #[test]
    fn every_status_and_event_has_its_code() {
        use mcpw_task_status::*;
        let statuses = [
            (TaskStatus::Working, MCPW_TASK_STATUS_WORKING),
            (TaskStatus::InputRequired, MCPW_TASK_STATUS_INPUT_REQUIRED),
            (TaskStatus::Completed, MCPW_TASK_STATUS_COMPLETED),
            (TaskStatus::Failed, MCPW_TASK_STATUS_FAILED),
            (TaskStatus::Cancelled, MCPW_TASK_STATUS_CANCELLED),
        ];
        for (engine, c) in statuses {
            assert_eq!(status_out(engine), c);
        }
        let expired = TaskEvent::Expired { task: "t".into() };
        let e = mcpw_task_event::of(&expired);
        assert_eq!(e.kind, mcpw_task_event_kind::MCPW_TASK_EVENT_EXPIRED);
        assert_eq!(e.task.len, 1);
        assert!(e.key.is_none() && e.response.is_none());
    }
}
