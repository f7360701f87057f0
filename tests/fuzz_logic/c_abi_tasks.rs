//! The task-table half of the `c_abi` target: the `mcpw_tasks_*` calls, driven with the
//! arguments a C host may pass (NULL pointers with and without a length, text that is not
//! UTF-8, payloads that are not JSON, a NULL table, a NULL random source, zero bounds), side by
//! side with a Rust [`Tasks`] table given the same calls. An input of the `c_abi` target that
//! starts with [`TASKS_MARKER`] comes here (the rest of the bytes are read with `arbitrary`).
//!
//! Invariants checked on every call:
//!
//! - no call panics (`MCPW_ERR_PANIC`) or reports a poisoned handle;
//! - a malformed argument gets the code the header documents for it, checked in argument
//!   order, and changes nothing (the Rust table is not called);
//! - otherwise the call's result is the Rust table's, as its `mcpw_result`, and what it lends
//!   (task ids, statuses, notifications, events, deadlines) equals what the Rust table gives,
//!   read in full (the sanitizers watch the views).
//!
//! The task logic itself is checked against a model by the `tasks` target; this harness is
//! about the boundary.

use std::ffi::{c_char, c_void};
use std::ptr;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::jsonrpc::RawJson;
use mcpwire::tasks::{TaskConfig, TaskError, TaskEvent, TaskStatus, Tasks};
use mcpwire_ffi::mcpw_result::{self, *};
use mcpwire_ffi::{
    mcpw_str, mcpw_task_config, mcpw_task_config_default, mcpw_task_event, mcpw_task_event_kind,
    mcpw_task_status, mcpw_tasks, mcpw_tasks_ask, mcpw_tasks_cancel, mcpw_tasks_cancel_requested,
    mcpw_tasks_complete, mcpw_tasks_create, mcpw_tasks_create_legacy, mcpw_tasks_fail,
    mcpw_tasks_free, mcpw_tasks_handle_timeout, mcpw_tasks_new, mcpw_tasks_poll_event,
    mcpw_tasks_poll_timeout, mcpw_tasks_resume, mcpw_tasks_set_message, mcpw_tasks_status,
    mcpw_tasks_status_notification,
};

/// The first byte of a `c_abi` input that selects this harness.
pub const TASKS_MARKER: u8 = 0xFE;

const TEXTS: &[&str] = &["working", "", "k1", "k2", "say \"hi\"", "héllo ✓"];
const JSONS: &[&str] = &[
    r#"{"content":[]}"#,
    r#"{"content":[],"isError":true}"#,
    "[1,2]",
    "7",
    r#"{"method":"elicitation/create","params":{"message":"?"}}"#,
    r#"{"elicitations":[{"mode":"url","elicitationId":"e","url":"https://x.example","message":"m"}]}"#,
    r#"{"a":"a much longer value, so that a small max_payload refuses it: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#,
];
const CODES: &[i64] = &[-32603, -32602, -32002, -32042, -32020, -32050, 1, i64::MIN];

/// The table's bounds; `zero` makes one of them 0, which `mcpw_tasks_new` refuses.
#[derive(Arbitrary, Debug)]
pub struct TasksAbiSetup {
    max_tasks: u8,
    per_owner: u8,
    ttl: Option<u8>,
    max_input: u8,
    max_payload: u8,
    zero: Option<u8>,
    null_config: bool,
}

/// Text as a C host may pass it.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum TextArg {
    Plain(u8),
    /// `\xff\xfe`, not UTF-8.
    BadUtf8,
    /// NULL with length 0 (the empty text).
    Null,
    /// NULL with a length.
    NullWithLength,
}

/// JSON as a C host may pass it.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum JsonArg {
    Json(u8),
    NotJson,
    BadUtf8,
    Null,
    NullWithLength,
}

/// The task a call names.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum TaskArg {
    /// One created before (by index, modulo their number).
    Made(u8),
    Text(TextArg),
}

/// One call.
#[derive(Arbitrary, Debug)]
pub enum TasksAbiOp {
    Create {
        owner: Option<u8>,
        null_random: bool,
        null_out: bool,
    },
    Status {
        task: TaskArg,
        null_out: bool,
    },
    CancelRequested {
        task: TaskArg,
    },
    Notification {
        task: TaskArg,
    },
    SetMessage {
        task: TaskArg,
        message: Option<TextArg>,
    },
    Ask {
        task: TaskArg,
        key: TextArg,
        request: JsonArg,
    },
    Resume {
        task: TaskArg,
    },
    Complete {
        task: TaskArg,
        result: JsonArg,
    },
    Fail {
        task: TaskArg,
        code: u8,
        message: TextArg,
        data: Option<JsonArg>,
    },
    Cancel {
        task: TaskArg,
    },
    Advance {
        ms: u16,
    },
    Timeout,
    PollEvent,
    /// A call on a NULL table.
    NullTable {
        which: u8,
    },
}

/// An argument's bytes and what the C side makes of them.
struct Arg {
    bytes: Vec<u8>,
    null: bool,
    /// The code the call must fail with because of this argument, if any.
    refused: Option<mcpw_result>,
}

impl Arg {
    fn text(t: TextArg) -> Arg {
        match t {
            TextArg::Plain(i) => Arg::ok(TEXTS[usize::from(i) % TEXTS.len()].as_bytes()),
            TextArg::BadUtf8 => Arg {
                bytes: vec![0xff, 0xfe],
                null: false,
                refused: Some(MCPW_ERR_INVALID_UTF8),
            },
            TextArg::Null => Arg {
                bytes: Vec::new(),
                null: true,
                refused: None,
            },
            TextArg::NullWithLength => Arg {
                bytes: b"abc".to_vec(),
                null: true,
                refused: Some(MCPW_ERR_NULL_ARGUMENT),
            },
        }
    }

    fn json(j: JsonArg) -> Arg {
        match j {
            JsonArg::Json(i) => Arg::ok(JSONS[usize::from(i) % JSONS.len()].as_bytes()),
            JsonArg::NotJson => Arg {
                bytes: b"{nope".to_vec(),
                null: false,
                refused: Some(MCPW_ERR_INVALID_JSON),
            },
            JsonArg::BadUtf8 => Arg {
                bytes: vec![b'"', 0xff, b'"'],
                null: false,
                refused: Some(MCPW_ERR_INVALID_UTF8),
            },
            // Required JSON: NULL with length 0 is the empty text, which is not JSON.
            JsonArg::Null => Arg {
                bytes: Vec::new(),
                null: true,
                refused: Some(MCPW_ERR_INVALID_JSON),
            },
            JsonArg::NullWithLength => Arg {
                bytes: b"{}".to_vec(),
                null: true,
                refused: Some(MCPW_ERR_NULL_ARGUMENT),
            },
        }
    }

    fn ok(bytes: &[u8]) -> Arg {
        Arg {
            bytes: bytes.to_vec(),
            null: false,
            refused: None,
        }
    }

    fn ptr(&self) -> *const c_char {
        if self.null {
            ptr::null()
        } else {
            self.bytes.as_ptr().cast()
        }
    }

    fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The text the Rust table gets (only when not refused).
    fn str(&self) -> &str {
        std::str::from_utf8(&self.bytes).expect("an argument not refused is UTF-8")
    }
}

fn none() -> mcpw_str {
    mcpw_str {
        ptr: ptr::null(),
        len: 0,
    }
}

/// Reads a lent view in full.
fn read(v: mcpw_str) -> String {
    if v.len == 0 {
        return String::new();
    }
    assert!(!v.ptr.is_null(), "a non-empty view with a NULL pointer");
    // Safety: the library lends `len` readable bytes until the next mutating call.
    let bytes = unsafe { std::slice::from_raw_parts(v.ptr.cast::<u8>(), v.len) };
    String::from_utf8(bytes.to_vec()).expect("views are UTF-8")
}

fn code(r: Result<(), TaskError>) -> mcpw_result {
    match r {
        Ok(()) => MCPW_OK,
        Err(e) => mcpw_result::from(e),
    }
}

fn status_of(s: TaskStatus) -> mcpw_task_status {
    use mcpw_task_status::*;
    #[allow(unreachable_patterns)]
    match s {
        TaskStatus::Working => MCPW_TASK_STATUS_WORKING,
        TaskStatus::InputRequired => MCPW_TASK_STATUS_INPUT_REQUIRED,
        TaskStatus::Completed => MCPW_TASK_STATUS_COMPLETED,
        TaskStatus::Failed => MCPW_TASK_STATUS_FAILED,
        TaskStatus::Cancelled => MCPW_TASK_STATUS_CANCELLED,
        _ => MCPW_TASK_STATUS_OTHER,
    }
}

/// The deterministic random source both tables draw from, in step.
pub(super) struct Source(pub(super) u64);

impl Source {
    pub(super) fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (self.0 >> 56) as u8;
        }
    }
}

pub(super) unsafe extern "C" fn c_random(user: *mut c_void, buf: *mut u8, len: usize) {
    // Safety: `user` is the harness's `Source`, `buf` is `len` writable bytes (the library's
    // promise).
    unsafe {
        let source = &mut *user.cast::<Source>();
        source.fill(std::slice::from_raw_parts_mut(buf, len));
    }
}

/// How far a run got: calls that succeeded, that the table refused, that an argument
/// refused, and events compared.
#[derive(Debug, Default, Clone, Copy)]
pub struct TasksAbiReached {
    pub ok: usize,
    pub refused_by_table: usize,
    pub refused_argument: usize,
    pub events: usize,
}

struct Harness {
    reached: TasksAbiReached,
    c: *mut mcpw_tasks,
    rust: Tasks,
    c_source: Box<Source>,
    rust_source: Source,
    now: u64,
    made: Vec<String>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Safety: the harness's own live table, freed once.
        unsafe { mcpw_tasks_free(self.c) };
    }
}

thread_local! {
    /// Results seen by [`same`] in this run: OK, refused by the table, refused for an argument.
    static SEEN: std::cell::Cell<[usize; 3]> = const { std::cell::Cell::new([0; 3]) };
}

/// Checks a call's result: not broken, and `want`.
fn same(call: &str, got: mcpw_result, want: mcpw_result) {
    assert!(
        got != MCPW_ERR_PANIC && got != MCPW_ERR_POISONED,
        "{call}: {got:?}"
    );
    assert_eq!(got, want, "{call}");
    let class = match got {
        MCPW_OK => 0,
        MCPW_ERR_NULL_ARGUMENT
        | MCPW_ERR_INVALID_UTF8
        | MCPW_ERR_INVALID_JSON
        | MCPW_ERR_INVALID_ARGUMENT => 2,
        _ => 1,
    };
    SEEN.with(|s| {
        let mut seen = s.get();
        seen[class] += 1;
        s.set(seen);
    });
}

impl Harness {
    fn new(setup: &TasksAbiSetup) -> Option<Harness> {
        let mut config = mcpw_task_config_default();
        config.max_tasks = 1 + usize::from(setup.max_tasks % 6);
        config.max_tasks_per_owner = 1 + usize::from(setup.per_owner % 3);
        config.ttl_ms = setup.ttl.map_or(0, |t| 100 * (1 + u64::from(t % 30)));
        config.max_input_requests = 1 + usize::from(setup.max_input % 3);
        config.max_payload = 16 + usize::from(setup.max_payload);
        if let Some(z) = setup.zero {
            match z % 5 {
                0 => config.max_tasks = 0,
                1 => config.max_tasks_per_owner = 0,
                2 => config.max_input_requests = 0,
                3 => config.max_payload = 0,
                _ => config.poll_interval_ms = 0,
            }
        }
        let now = 1_000_000_000;
        let mut c = ptr::null_mut();
        let config_arg: *const mcpw_task_config = if setup.null_config {
            ptr::null()
        } else {
            &config
        };
        // Safety: a readable config (or NULL) and a writable out-pointer.
        let rc = unsafe { mcpw_tasks_new(config_arg, now, 1_795_521_600_000, &mut c) };
        if setup.zero.is_some() && !setup.null_config {
            same(
                "mcpw_tasks_new with a zero bound",
                rc,
                MCPW_ERR_INVALID_ARGUMENT,
            );
            assert!(c.is_null(), "an output written on failure");
            return None;
        }
        same("mcpw_tasks_new", rc, MCPW_OK);
        let rust_config = if setup.null_config {
            TaskConfig::default()
        } else {
            TaskConfig {
                max_tasks: config.max_tasks,
                max_tasks_per_owner: config.max_tasks_per_owner,
                ttl: (config.ttl_ms > 0).then(|| Duration::from_millis(config.ttl_ms)),
                poll_interval: Duration::from_millis(config.poll_interval_ms),
                max_input_requests: config.max_input_requests,
                max_payload: config.max_payload,
            }
        };
        Some(Harness {
            reached: TasksAbiReached::default(),
            c,
            rust: Tasks::new(rust_config, Timestamp::from_nanos(now), 1_795_521_600_000),
            c_source: Box::new(Source(7)),
            rust_source: Source(7),
            now,
            made: Vec::new(),
        })
    }

    fn task(&self, t: TaskArg) -> Arg {
        match t {
            TaskArg::Made(i) if !self.made.is_empty() => {
                Arg::ok(self.made[usize::from(i) % self.made.len()].as_bytes())
            }
            TaskArg::Made(_) => Arg::ok(b"0123456789abcdef0123456789abcdef"),
            TaskArg::Text(t) => Arg::text(t),
        }
    }

    fn at(&self) -> Timestamp {
        Timestamp::from_nanos(self.now)
    }

    fn step(&mut self, op: &TasksAbiOp) {
        let now = self.now;
        match *op {
            TasksAbiOp::Create {
                owner,
                null_random,
                null_out,
            } => {
                let mut out = mcpw_str {
                    ptr: ptr::null(),
                    len: 0,
                };
                let out_ptr: *mut mcpw_str = if null_out { ptr::null_mut() } else { &mut out };
                let random = (!null_random).then_some(c_random as _);
                let user: *mut Source = &mut *self.c_source;
                // Safety: a live table, a callback that fills what it is given, a writable
                // out-pointer or NULL.
                let rc = unsafe {
                    match owner {
                        Some(o) => mcpw_tasks_create_legacy(
                            self.c,
                            now,
                            random,
                            user.cast(),
                            u64::from(o % 3),
                            out_ptr,
                        ),
                        None => mcpw_tasks_create(self.c, now, random, user.cast(), out_ptr),
                    }
                };
                if null_out || null_random {
                    same("mcpw_tasks_create with NULL", rc, MCPW_ERR_NULL_ARGUMENT);
                    return;
                }
                let at = self.at();
                let mut fill = |b: &mut [u8]| self.rust_source.fill(b);
                let want = match owner {
                    Some(o) => self.rust.create_legacy(at, &mut fill, u64::from(o % 3)),
                    None => self.rust.create(at, &mut fill),
                };
                match want {
                    Ok(id) => {
                        same("mcpw_tasks_create", rc, MCPW_OK);
                        assert_eq!(read(out), id, "the lent task id");
                        if !self.made.contains(&id) {
                            self.made.push(id);
                        }
                    }
                    Err(e) => same("mcpw_tasks_create", rc, mcpw_result::from(e)),
                }
            }
            TasksAbiOp::Status { task, null_out } => {
                let t = self.task(task);
                let mut out = mcpw_task_status::MCPW_TASK_STATUS_OTHER;
                let out_ptr: *mut mcpw_task_status =
                    if null_out { ptr::null_mut() } else { &mut out };
                // Safety: readable text (or NULL as the argument says), writable out or NULL.
                let rc = unsafe { mcpw_tasks_status(self.c, t.ptr(), t.len(), out_ptr) };
                // (The output is checked first.)
                if null_out {
                    return same("mcpw_tasks_status", rc, MCPW_ERR_NULL_ARGUMENT);
                }
                if let Some(refused) = t.refused {
                    return same("mcpw_tasks_status", rc, refused);
                }
                match self.rust.status(t.str()) {
                    Some(s) => {
                        same("mcpw_tasks_status", rc, MCPW_OK);
                        assert_eq!(out, status_of(s));
                    }
                    None => same("mcpw_tasks_status", rc, MCPW_ERR_UNKNOWN_TASK),
                }
            }
            TasksAbiOp::CancelRequested { task } => {
                let t = self.task(task);
                let mut out = true;
                // Safety: as for the status.
                let rc = unsafe { mcpw_tasks_cancel_requested(self.c, t.ptr(), t.len(), &mut out) };
                if let Some(refused) = t.refused {
                    return same("mcpw_tasks_cancel_requested", rc, refused);
                }
                // (False for an unknown task.)
                same("mcpw_tasks_cancel_requested", rc, MCPW_OK);
                assert_eq!(out, self.rust.cancel_requested(t.str()));
            }
            TasksAbiOp::Notification { task } => {
                let t = self.task(task);
                let (mut method, mut params) = (none(), none());
                // Safety: as for the status.
                let rc = unsafe {
                    mcpw_tasks_status_notification(
                        self.c,
                        t.ptr(),
                        t.len(),
                        &mut method,
                        &mut params,
                    )
                };
                if let Some(refused) = t.refused {
                    return same("mcpw_tasks_status_notification", rc, refused);
                }
                match self.rust.status_notification(t.str()) {
                    Some((m, p)) => {
                        same("mcpw_tasks_status_notification", rc, MCPW_OK);
                        assert_eq!((read(method).as_str(), read(params)), (m, p));
                    }
                    None => same("mcpw_tasks_status_notification", rc, MCPW_ERR_UNKNOWN_TASK),
                }
            }
            TasksAbiOp::SetMessage { task, message } => {
                let t = self.task(task);
                let m = message.map(Arg::text);
                let (mp, ml) = m.as_ref().map_or((ptr::null(), 0), |m| (m.ptr(), m.len()));
                // Safety: readable texts (or NULL as the arguments say).
                let rc = unsafe { mcpw_tasks_set_message(self.c, now, t.ptr(), t.len(), mp, ml) };
                // NULL with length 0 clears the message.
                let refused = t.refused.or(m.as_ref().and_then(|m| m.refused));
                if let Some(refused) = refused {
                    return same("mcpw_tasks_set_message", rc, refused);
                }
                let message = m.as_ref().filter(|m| !m.null).map(Arg::str);
                let want = self.rust.set_message(self.at(), t.str(), message);
                same("mcpw_tasks_set_message", rc, code(want));
            }
            TasksAbiOp::Ask { task, key, request } => {
                let (t, k, r) = (self.task(task), Arg::text(key), Arg::json(request));
                // Safety: readable arguments (or NULL as they say).
                let rc = unsafe {
                    mcpw_tasks_ask(
                        self.c,
                        now,
                        t.ptr(),
                        t.len(),
                        k.ptr(),
                        k.len(),
                        r.ptr(),
                        r.len(),
                    )
                };
                if let Some(refused) = t.refused.or(k.refused).or(r.refused) {
                    return same("mcpw_tasks_ask", rc, refused);
                }
                let request = RawJson::new(r.str()).expect("valid JSON");
                let want = self.rust.ask(self.at(), t.str(), k.str(), request);
                same("mcpw_tasks_ask", rc, code(want));
            }
            TasksAbiOp::Resume { task } => {
                let t = self.task(task);
                // Safety: readable text (or NULL as it says).
                let rc = unsafe { mcpw_tasks_resume(self.c, now, t.ptr(), t.len()) };
                if let Some(refused) = t.refused {
                    return same("mcpw_tasks_resume", rc, refused);
                }
                same(
                    "mcpw_tasks_resume",
                    rc,
                    code(self.rust.resume(self.at(), t.str())),
                );
            }
            TasksAbiOp::Complete { task, result } => {
                let (t, r) = (self.task(task), Arg::json(result));
                // Safety: readable arguments (or NULL as they say).
                let rc =
                    unsafe { mcpw_tasks_complete(self.c, now, t.ptr(), t.len(), r.ptr(), r.len()) };
                if let Some(refused) = t.refused.or(r.refused) {
                    return same("mcpw_tasks_complete", rc, refused);
                }
                let result = RawJson::new(r.str()).expect("valid JSON");
                same(
                    "mcpw_tasks_complete",
                    rc,
                    code(self.rust.complete(self.at(), t.str(), result)),
                );
            }
            TasksAbiOp::Fail {
                task,
                code: c,
                message,
                data,
            } => {
                let (t, m) = (self.task(task), Arg::text(message));
                let d = data.map(Arg::json);
                let error_code = CODES[usize::from(c) % CODES.len()];
                // Optional data: NULL with length 0 is "none".
                let (dp, dl, d_refused) = match &d {
                    None => (ptr::null(), 0, None),
                    Some(d) if d.null && d.len() == 0 => (ptr::null(), 0, None),
                    Some(d) => (d.ptr(), d.len(), d.refused),
                };
                // Safety: readable arguments (or NULL as they say).
                let rc = unsafe {
                    mcpw_tasks_fail(
                        self.c,
                        now,
                        t.ptr(),
                        t.len(),
                        error_code,
                        m.ptr(),
                        m.len(),
                        dp,
                        dl,
                    )
                };
                if let Some(refused) = t.refused.or(m.refused).or(d_refused) {
                    return same("mcpw_tasks_fail", rc, refused);
                }
                let data = (dl > 0).then(|| d.as_ref().unwrap().str());
                let data = data.map(|d| RawJson::new(d).expect("valid JSON"));
                let want = self
                    .rust
                    .fail(self.at(), t.str(), error_code, m.str(), data);
                same("mcpw_tasks_fail", rc, code(want));
            }
            TasksAbiOp::Cancel { task } => {
                let t = self.task(task);
                // Safety: readable text (or NULL as it says).
                let rc = unsafe { mcpw_tasks_cancel(self.c, now, t.ptr(), t.len()) };
                if let Some(refused) = t.refused {
                    return same("mcpw_tasks_cancel", rc, refused);
                }
                same(
                    "mcpw_tasks_cancel",
                    rc,
                    code(self.rust.cancel(self.at(), t.str())),
                );
            }
            TasksAbiOp::Advance { ms } => self.now += u64::from(ms) * 1_000_000,
            TasksAbiOp::Timeout => {
                // Safety: a live table.
                let rc = unsafe { mcpw_tasks_handle_timeout(self.c, now) };
                same("mcpw_tasks_handle_timeout", rc, MCPW_OK);
                self.rust.handle_timeout(self.at());
                let (mut has, mut at) = (true, 7);
                // Safety: a live table, writable outputs.
                let rc = unsafe { mcpw_tasks_poll_timeout(self.c, &mut has, &mut at) };
                same("mcpw_tasks_poll_timeout", rc, MCPW_OK);
                let want = self.rust.poll_timeout();
                assert_eq!(has.then_some(at), want.map(Timestamp::as_nanos));
            }
            TasksAbiOp::PollEvent => {
                let mut ev = mcpw_task_event::default();
                // Safety: a live table, a writable event.
                let rc = unsafe { mcpw_tasks_poll_event(self.c, &mut ev) };
                same("mcpw_tasks_poll_event", rc, MCPW_OK);
                use mcpw_task_event_kind::*;
                let got = match ev.kind {
                    MCPW_TASK_EVENT_NONE => None,
                    MCPW_TASK_EVENT_EXPIRED => Some(TaskEvent::Expired {
                        task: read(ev.task),
                    }),
                    MCPW_TASK_EVENT_CANCEL_REQUESTED => Some(TaskEvent::CancelRequested {
                        task: read(ev.task),
                    }),
                    MCPW_TASK_EVENT_INPUT => Some(TaskEvent::Input {
                        task: read(ev.task),
                        key: read(ev.key),
                        response: read(ev.response),
                    }),
                    other => panic!("an event kind the table never gives: {other:?}"),
                };
                if got.is_some() {
                    self.reached.events += 1;
                }
                assert_eq!(got, self.rust.poll_event(), "events");
            }
            TasksAbiOp::NullTable { which } => {
                let mut s = none();
                let mut status = mcpw_task_status::MCPW_TASK_STATUS_OTHER;
                let mut ev = mcpw_task_event::default();
                // Safety: every call takes a NULL table and refuses it.
                let rc = unsafe {
                    match which % 5 {
                        0 => mcpw_tasks_create(
                            ptr::null_mut(),
                            now,
                            Some(c_random),
                            ptr::null_mut(),
                            &mut s,
                        ),
                        1 => mcpw_tasks_status(ptr::null(), b"x".as_ptr().cast(), 1, &mut status),
                        2 => mcpw_tasks_cancel(ptr::null_mut(), now, b"x".as_ptr().cast(), 1),
                        3 => mcpw_tasks_poll_event(ptr::null_mut(), &mut ev),
                        _ => mcpw_tasks_handle_timeout(ptr::null_mut(), now),
                    }
                };
                same("a call on a NULL table", rc, MCPW_ERR_NULL_ARGUMENT);
            }
        }
    }
}

/// The harness: see the module docs.
pub fn c_abi_tasks(data: &[u8]) {
    c_abi_tasks_reached(data);
}

/// [`c_abi_tasks`], returning how far the run got.
pub fn c_abi_tasks_reached(data: &[u8]) -> TasksAbiReached {
    SEEN.with(|s| s.set([0; 3]));
    let mut u = Unstructured::new(data);
    let Ok(setup) = TasksAbiSetup::arbitrary(&mut u) else {
        return TasksAbiReached::default();
    };
    let Some(mut h) = Harness::new(&setup) else {
        return TasksAbiReached::default();
    };
    let mut steps = 0;
    while !u.is_empty() && steps < 256 {
        let Ok(op) = TasksAbiOp::arbitrary(&mut u) else {
            break;
        };
        h.step(&op);
        steps += 1;
    }
    // Both tables end with the same tasks and events.
    h.now += 3_600_000_000_000;
    h.step(&TasksAbiOp::Timeout);
    for _ in 0..64 {
        h.step(&TasksAbiOp::PollEvent);
    }
    let [ok, refused_by_table, refused_argument] = SEEN.with(|s| s.get());
    TasksAbiReached {
        ok,
        refused_by_table,
        refused_argument,
        ..h.reached
    }
}
