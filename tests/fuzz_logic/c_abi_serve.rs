//! The connection-side half of the task and elicitation calls in the `c_abi` target:
//! `mcpw_conn_respond_task`, `mcpw_tasks_serve`, `mcpw_tasks_serve_legacy`,
//! `mcpw_tasks_poll_result`, `mcpw_tasks_write_result`,
//! `mcpw_conn_respond_url_elicitation_required` and
//! `mcpw_conn_ignored_elicitation_completions`, on a server connection of either era, side by
//! side with a Rust [`Connection`] and [`Tasks`] table given the same input and calls. The
//! serve calls are handed either copies of the request or the views of the C connection's
//! own event, as hosts do (answering ends those views, so the library must copy them first).
//! An input of the `c_abi` target that starts with [`SERVE_MARKER`] comes here (the rest is
//! read with `arbitrary`).
//!
//! Invariants checked on every call: no call panics or poisons a handle; a NULL or malformed
//! argument gets the documented code and changes nothing; otherwise the result is the Rust
//! side's, what is lent (ready results) equals what the Rust table gives, and both
//! connections write the same bytes and the same number of events, both tables the same
//! task events.

use std::ffi::{c_char, c_void};
use std::ptr;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::conn::{Connection, Event};
use mcpwire::jsonrpc::{Id, OwnedId, RawJson};
use mcpwire::tasks::{LegacyAnswer, TaskConfig, TaskEvent, Tasks};
use mcpwire_ffi::mcpw_result::{self, *};
use mcpwire_ffi::{
    mcpw_conn, mcpw_conn_free, mcpw_conn_ignored_elicitation_completions, mcpw_conn_poll_event,
    mcpw_conn_respond_task, mcpw_conn_respond_url_elicitation_required, mcpw_event,
    mcpw_event_kind, mcpw_id, mcpw_id_kind, mcpw_str, mcpw_task_event, mcpw_task_event_kind,
    mcpw_task_result, mcpw_tasks, mcpw_tasks_cancel, mcpw_tasks_complete, mcpw_tasks_create,
    mcpw_tasks_create_legacy, mcpw_tasks_fail, mcpw_tasks_free, mcpw_tasks_handle_timeout,
    mcpw_tasks_new, mcpw_tasks_poll_event, mcpw_tasks_poll_result, mcpw_tasks_serve,
    mcpw_tasks_serve_legacy, mcpw_tasks_write_result,
};

use super::c_abi_listen::{IdArg, c_id, drain_both, feed_both, id_text, rust_id, server_twins};
use super::c_abi_tasks::{Source, c_random};

/// The first byte of a `c_abi` input that selects this harness.
pub const SERVE_MARKER: u8 = 0xFC;

/// The server declares both eras' tasks: the 2026-07-28 extension and the 2025-11-25
/// `tasks` capability for `tools/call`.
const CAPS: &str = r#"{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;
/// The owner of every 2025-11-25 task (the harness has one session).
const OWNER: u64 = 1;
const UNIX_MS: u64 = 1_795_521_600_000;
const METHODS: [&str; 6] = [
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
    "tasks/list",
    "tasks/update",
    "tools/list",
];
const ELICITATIONS: [&str; 4] = [
    r#"[{"mode":"url","elicitationId":"e1","url":"https://x.example/a","message":"sign in"}]"#,
    r#"[{"mode":"url","elicitationId":"e2","url":"https://x.example/b","message":"pay"},{"mode":"url","elicitationId":"e3","url":"https://x.example/c","message":"ok"}]"#,
    "[]",
    r#"{"mode":"url"}"#,
];

/// How the session starts.
#[derive(Arbitrary, Debug)]
pub struct ServeSetup {
    /// 2026-07-28 requests (else a 2025-11-25 session).
    modern: bool,
    /// The client declares the tasks extension (2026-07-28) in its requests.
    extension: bool,
    /// The client declares `elicitation.url` (2025-11-25).
    url_elicitation: bool,
}

/// A task as a call names it: by `.0 % 16`, 0 is one nobody created, 1 text that is not
/// UTF-8, 2 NULL with a length, and the rest one created before (`.0 / 16`, modulo their
/// number).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct TaskArg(u8);

enum Task {
    Made(usize),
    Unknown,
    BadUtf8,
    NullWithLength,
}

impl TaskArg {
    fn pick(self, made: usize) -> Task {
        match self.0 % 16 {
            1 => Task::BadUtf8,
            2 => Task::NullWithLength,
            n if n >= 3 && made > 0 => Task::Made(usize::from(self.0 / 16) % made),
            _ => Task::Unknown,
        }
    }
}

/// Elicitations as a call passes them.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum ElicitArg {
    /// One of [`ELICITATIONS`].
    Pick(u8),
    NotJson,
    BadUtf8,
    NullWithLength,
}

/// One step.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum ServeOp {
    /// The client calls a tool with request `id`; in 2025-11-25 with a `task` member when
    /// `task` (in 2026-07-28 the setup's declaration of the extension decides).
    Call { id: IdArg, task: bool },
    /// Both tables create a task: of the session's era, or the other one's one time in four.
    Create { kind: u8 },
    /// `mcpw_conn_respond_task`.
    RespondTask {
        id: IdArg,
        task: TaskArg,
        null_tasks: bool,
    },
    /// The client sends `METHODS[how % 6]` about `task` with request `id`; both tables serve
    /// it, the C one with the event's views when `views`. One time in eight (by `how / 6`)
    /// it is the other era's serve call, and one in eight a NULL `out_served`.
    Request {
        /// The request id: an integer or, when odd, a string (`id / 2 % 4` picks it).
        id: u8,
        how: u8,
        task: TaskArg,
        views: bool,
    },
    /// Completes (0), fails (1) or cancels (2) `task`, then writes the ready results (the
    /// first write with a NULL connection when `null_conn`, each twice when `twice`).
    End {
        task: TaskArg,
        how: u8,
        null_conn: bool,
        twice: bool,
    },
    /// `mcpw_conn_respond_url_elicitation_required`.
    UrlElicitation { id: IdArg, elicitations: ElicitArg },
    /// The client says elicitation `e{which % 4}` is complete.
    ElicitationComplete { which: u8 },
    /// Time passes and the tables' timers run.
    Advance { ms: u16 },
}

fn same(call: &str, got: mcpw_result, want: mcpw_result) {
    assert!(
        got != MCPW_ERR_PANIC && got != MCPW_ERR_POISONED,
        "{call}: {got:?}"
    );
    assert_eq!(got, want, "{call}");
}

fn code<T, E: Into<mcpw_result>>(r: Result<T, E>) -> mcpw_result {
    r.map_or_else(Into::into, |_| MCPW_OK)
}

/// Reads a lent view in full (`None` for NULL).
fn view(s: mcpw_str) -> Option<String> {
    if s.ptr.is_null() {
        assert_eq!(s.len, 0, "NULL with a length");
        return None;
    }
    // Safety: the library lends `len` readable bytes until the next mutating call.
    let bytes = unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) };
    Some(String::from_utf8(bytes.to_vec()).expect("views are UTF-8"))
}

/// Text bytes as a call passes them: (bytes, NULL pointer, the code they must be refused
/// with before anything else is looked at).
type Passed = (Vec<u8>, bool, Option<mcpw_result>);

fn passed_ptr((bytes, null, _): &Passed) -> *const c_char {
    if *null {
        ptr::null()
    } else {
        bytes.as_ptr().cast()
    }
}

struct Harness {
    c: *mut mcpw_conn,
    c_tasks: *mut mcpw_tasks,
    c_source: Box<Source>,
    rust: Connection,
    tasks: Tasks,
    rust_source: Source,
    modern: bool,
    extension: bool,
    now: u64,
    made: Vec<String>,
    reached: ServeAbiReached,
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Safety: our handles, freed once.
        unsafe {
            mcpw_conn_free(self.c);
            mcpw_tasks_free(self.c_tasks);
        }
    }
}

impl Harness {
    fn new(setup: &ServeSetup) -> Harness {
        let (c, rust) = server_twins(CAPS, false);
        let mut c_tasks: *mut mcpw_tasks = ptr::null_mut();
        // Safety: default bounds (NULL config), a writable out pointer.
        let rc = unsafe { mcpw_tasks_new(ptr::null(), 0, UNIX_MS, &mut c_tasks) };
        same("tasks", rc, MCPW_OK);
        let mut h = Harness {
            c,
            c_tasks,
            c_source: Box::new(Source(11)),
            rust,
            tasks: Tasks::new(TaskConfig::default(), Timestamp::ZERO, UNIX_MS),
            rust_source: Source(11),
            modern: setup.modern,
            extension: setup.extension,
            now: 0,
            made: Vec::new(),
            reached: ServeAbiReached::default(),
        };
        if !setup.modern {
            let caps = if setup.url_elicitation {
                r#"{"elicitation":{"form":{},"url":{}}}"#
            } else {
                "{}"
            };
            h.feed(&format!(
                r#"{{"jsonrpc":"2.0","id":"init","method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{caps},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
            ));
            h.feed(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
            h.drain();
        }
        h
    }

    fn at(&self) -> Timestamp {
        Timestamp::from_nanos(self.now)
    }

    /// A request's params with the 2026-07-28 `_meta` added when the session is modern.
    fn params(&self, members: &str) -> String {
        if !self.modern {
            return format!("{{{members}}}");
        }
        let caps = if self.extension {
            r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
        } else {
            "{}"
        };
        let meta = format!(
            r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{caps}}}"#
        );
        if members.is_empty() {
            format!("{{{meta}}}")
        } else {
            format!("{{{members},{meta}}}")
        }
    }

    fn feed(&mut self, line: &str) {
        self.now += 1_000_000;
        feed_both(self.c, &mut self.rust, self.now, line);
    }

    /// Both connections' events (counted) and output (compared byte for byte), and both
    /// tables' events (compared).
    fn drain(&mut self) {
        drain_both(self.c, &mut self.rust);
        loop {
            let mut ev = std::mem::MaybeUninit::<mcpw_task_event>::uninit();
            // Safety: a live table, a writable event.
            let rc = unsafe { mcpw_tasks_poll_event(self.c_tasks, ev.as_mut_ptr()) };
            same("tasks poll_event", rc, MCPW_OK);
            // Safety: written on success.
            let ev = unsafe { ev.assume_init() };
            let want = self.tasks.poll_event();
            if ev.kind == mcpw_task_event_kind::MCPW_TASK_EVENT_NONE {
                assert_eq!(want, None, "task events");
                break;
            }
            let want = want.expect("a task event on both sides");
            let task = match &want {
                TaskEvent::Input { task, .. }
                | TaskEvent::CancelRequested { task }
                | TaskEvent::Expired { task } => task.clone(),
            };
            assert_eq!(view(ev.task).unwrap_or_default(), task, "task event");
            self.reached.task_events += 1;
        }
    }

    fn task(&self, t: TaskArg) -> Passed {
        match t.pick(self.made.len()) {
            Task::Made(i) => (self.made[i].clone().into_bytes(), false, None),
            Task::Unknown => (b"0123456789abcdef0123456789abcdef".to_vec(), false, None),
            Task::BadUtf8 => (vec![0xff, 0xfe], false, Some(MCPW_ERR_INVALID_UTF8)),
            Task::NullWithLength => (b"abc".to_vec(), true, Some(MCPW_ERR_NULL_ARGUMENT)),
        }
    }

    fn step(&mut self, op: ServeOp) {
        match op {
            ServeOp::Call { id, task } => {
                let Some(id) = id_text(id) else { return };
                let ask = if task && !self.modern {
                    r#","task":{"ttl":60000}"#
                } else {
                    ""
                };
                let params = self.params(&format!(
                    r#""name":"echo","arguments":{{"text":"hi"}}{ask}"#
                ));
                self.feed(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#
                ));
            }
            ServeOp::Create { kind } => self.create(self.modern == (kind % 4 == 3)),
            ServeOp::RespondTask {
                id,
                task,
                null_tasks,
            } => self.respond_task(id, task, null_tasks),
            ServeOp::Request {
                id,
                how,
                task,
                views,
            } => {
                let (other, null_out) = ((how / 6) % 8 == 6, (how / 6) % 8 == 7);
                let id = if id % 2 == 1 {
                    IdArg::Str(id / 2)
                } else {
                    IdArg::Int(id / 2)
                };
                self.request(id, how, task, views, other, null_out);
                // (A cancel ends a task: its waiting results are ready.)
                self.results(false, false);
            }
            ServeOp::End {
                task,
                how,
                null_conn,
                twice,
            } => {
                self.end(task, how);
                self.results(null_conn, twice);
            }
            ServeOp::UrlElicitation { id, elicitations } => self.url_elicitation(id, elicitations),
            ServeOp::ElicitationComplete { which } => {
                let params = self.params(&format!(r#""elicitationId":"e{}""#, which % 4));
                self.feed(&format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{params}}}"#
                ));
                let mut n = u64::MAX;
                // Safety: a live handle, a writable count.
                let rc = unsafe { mcpw_conn_ignored_elicitation_completions(self.c, &mut n) };
                same("ignored_elicitation_completions", rc, MCPW_OK);
                assert_eq!(
                    n,
                    self.rust.stats().ignored_elicitation_completions,
                    "ignored completions"
                );
                // Safety: NULL output, refused.
                let rc =
                    unsafe { mcpw_conn_ignored_elicitation_completions(self.c, ptr::null_mut()) };
                same(
                    "ignored_elicitation_completions NULL",
                    rc,
                    MCPW_ERR_NULL_ARGUMENT,
                );
            }
            ServeOp::Advance { ms } => {
                self.now += u64::from(ms) * 1_000_000;
                // Safety: a live table.
                let rc = unsafe { mcpw_tasks_handle_timeout(self.c_tasks, self.now) };
                same("tasks handle_timeout", rc, MCPW_OK);
                self.tasks.handle_timeout(self.at());
                self.results(false, false);
            }
        }
        self.drain();
    }

    fn create(&mut self, legacy: bool) {
        let mut id = mcpw_str {
            ptr: ptr::null(),
            len: 0,
        };
        let user = (&mut *self.c_source as *mut Source).cast::<c_void>();
        // Safety: a live table, a random source that fills what it is given, a writable id.
        let rc = unsafe {
            if legacy {
                mcpw_tasks_create_legacy(
                    self.c_tasks,
                    self.now,
                    Some(c_random),
                    user,
                    OWNER,
                    &mut id,
                )
            } else {
                mcpw_tasks_create(self.c_tasks, self.now, Some(c_random), user, &mut id)
            }
        };
        let (at, source) = (self.at(), &mut self.rust_source);
        let want = if legacy {
            self.tasks.create_legacy(at, &mut |b| source.fill(b), OWNER)
        } else {
            self.tasks.create(at, &mut |b| source.fill(b))
        };
        match want {
            Ok(task) => {
                same("create", rc, MCPW_OK);
                assert_eq!(view(id).as_deref(), Some(task.as_str()), "task id");
                self.made.push(task);
            }
            Err(e) => same("create", rc, e.into()),
        }
    }

    fn respond_task(&mut self, id: IdArg, task: TaskArg, null_tasks: bool) {
        let mut text = String::new();
        let (cid, null_id) = c_id(id, &mut text);
        let arg = self.task(task);
        let tasks = if null_tasks {
            ptr::null()
        } else {
            self.c_tasks.cast_const()
        };
        let id_ptr: *const mcpw_id = if null_id { ptr::null() } else { &cid };
        // Safety: live handles or NULL; the id and the task text readable for their lengths.
        let rc =
            unsafe { mcpw_conn_respond_task(self.c, id_ptr, tasks, passed_ptr(&arg), arg.0.len()) };
        let want = if null_tasks || null_id {
            MCPW_ERR_NULL_ARGUMENT
        } else if let Some(refused) = arg.2 {
            refused
        } else if let Some(rid) = rust_id(id, &text) {
            let task = std::str::from_utf8(&arg.0).expect("UTF-8");
            match self.tasks.create_result(task) {
                None => MCPW_ERR_UNKNOWN_TASK,
                Some(handle) => code(
                    self.rust
                        .respond_task(rid, RawJson::new(&handle).expect("JSON")),
                ),
            }
        } else {
            MCPW_ERR_INVALID_ID
        };
        if want == MCPW_OK {
            self.reached.tasks_responded += 1;
        }
        same("respond_task", rc, want);
    }

    fn request(
        &mut self,
        id: IdArg,
        method: u8,
        task: TaskArg,
        views: bool,
        other: bool,
        null_out: bool,
    ) {
        let Some(id_json) = id_text(id) else { return };
        let method = METHODS[usize::from(method) % METHODS.len()];
        let task_id = match task.pick(self.made.len()) {
            Task::Made(i) => self.made[i].clone(),
            Task::Unknown => "nobody".to_owned(),
            // A request without a task id (refused with -32602 by the tables).
            Task::BadUtf8 | Task::NullWithLength => String::new(),
        };
        let mut members = String::new();
        if !task_id.is_empty() {
            members = format!(r#""taskId":"{task_id}""#);
        }
        if method == "tasks/update" {
            if !members.is_empty() {
                members.push(',');
            }
            members.push_str(r#""inputResponses":{"k1":{"action":"accept"}}"#);
        }
        let params = self.params(&members);
        self.feed(&format!(
            r#"{{"jsonrpc":"2.0","id":{id_json},"method":"{method}","params":{params}}}"#
        ));
        // The request, as each side hands it out (the engine may have refused it already).
        let mut ev = std::mem::MaybeUninit::<mcpw_event>::uninit();
        // Safety: a live handle, a writable event.
        let rc = unsafe { mcpw_conn_poll_event(self.c, ev.as_mut_ptr()) };
        same("poll_event", rc, MCPW_OK);
        // Safety: written on success; its views live until the next call on the handle.
        let ev = unsafe { ev.assume_init() };
        let theirs = match self.rust.poll_event() {
            Some(Event::Request { id, method, params }) => Some((
                OwnedId::from(id),
                method.to_str().into_owned(),
                params.map(|p| p.get().to_owned()),
            )),
            Some(_) => None,
            None => {
                assert_eq!(ev.kind, mcpw_event_kind::MCPW_EVENT_NONE, "event kinds");
                return;
            }
        };
        let Some((rid, rmethod, rparams)) = theirs else {
            assert_ne!(ev.kind, mcpw_event_kind::MCPW_EVENT_REQUEST, "event kinds");
            return;
        };
        assert_eq!(ev.kind, mcpw_event_kind::MCPW_EVENT_REQUEST, "event kinds");
        assert_eq!(view(ev.method).as_deref(), Some(rmethod.as_str()), "method");
        assert_eq!(view(ev.params), rparams, "params");
        // The C call gets the event's own views, or copies of them.
        let (copy_id, copy_method, copy_params) = (
            view(ev.id.string).unwrap_or_default(),
            view(ev.method).unwrap_or_default(),
            view(ev.params),
        );
        let (cid, method_ptr, method_len, params_ptr, params_len) = if views {
            (
                ev.id,
                ev.method.ptr,
                ev.method.len,
                ev.params.ptr,
                ev.params.len,
            )
        } else {
            let mut cid = ev.id;
            cid.string = mcpw_str {
                ptr: if cid.kind == mcpw_id_kind::MCPW_ID_STRING as u32 {
                    copy_id.as_ptr().cast()
                } else {
                    ptr::null()
                },
                len: if cid.kind == mcpw_id_kind::MCPW_ID_STRING as u32 {
                    copy_id.len()
                } else {
                    0
                },
            };
            (
                cid,
                copy_method.as_ptr().cast::<c_char>(),
                copy_method.len(),
                copy_params
                    .as_deref()
                    .map_or(ptr::null(), |p| p.as_ptr().cast::<c_char>()),
                copy_params.as_deref().map_or(0, str::len),
            )
        };
        let legacy = self.modern == other;
        let mut served = false;
        let out: *mut bool = if null_out {
            ptr::null_mut()
        } else {
            &mut served
        };
        // Safety: live handles; the id, method and params readable for their lengths (views
        // of the connection's current event, which the call may end, or our copies).
        let rc = unsafe {
            if legacy {
                mcpw_tasks_serve_legacy(
                    self.c_tasks,
                    self.now,
                    OWNER,
                    self.c,
                    &cid,
                    method_ptr,
                    method_len,
                    params_ptr,
                    params_len,
                    out,
                )
            } else {
                mcpw_tasks_serve(
                    self.c_tasks,
                    self.now,
                    self.c,
                    &cid,
                    method_ptr,
                    method_len,
                    params_ptr,
                    params_len,
                    out,
                )
            }
        };
        if null_out {
            same("serve with a NULL out_served", rc, MCPW_ERR_NULL_ARGUMENT);
            return;
        }
        let raw = rparams.as_deref().map(|p| RawJson::new(p).expect("JSON"));
        let want = if legacy {
            self.tasks
                .serve_legacy(self.at(), OWNER, &mut self.rust, rid.as_id(), &rmethod, raw)
        } else {
            (self.tasks).serve(self.at(), &mut self.rust, rid.as_id(), &rmethod, raw)
        };
        match want {
            Ok(want) => {
                same("serve", rc, MCPW_OK);
                assert_eq!(served, want, "served");
                if want {
                    self.reached.served += 1;
                }
            }
            Err(e) => same("serve", rc, e.into()),
        }
    }

    fn end(&mut self, task: TaskArg, how: u8) {
        let arg = self.task(task);
        if arg.2.is_some() {
            return; // (the boundary of these calls is the c_abi_tasks harness's)
        }
        let name = std::str::from_utf8(&arg.0).expect("UTF-8");
        let (result, message) = (r#"{"content":[]}"#, "boom");
        // Safety: a live table; readable texts.
        let (rc, want) = unsafe {
            match how % 3 {
                0 => (
                    mcpw_tasks_complete(
                        self.c_tasks,
                        self.now,
                        name.as_ptr().cast(),
                        name.len(),
                        result.as_ptr().cast(),
                        result.len(),
                    ),
                    self.tasks
                        .complete(self.at(), name, RawJson::new(result).expect("JSON")),
                ),
                1 => (
                    mcpw_tasks_fail(
                        self.c_tasks,
                        self.now,
                        name.as_ptr().cast(),
                        name.len(),
                        -32603,
                        message.as_ptr().cast(),
                        message.len(),
                        ptr::null(),
                        0,
                    ),
                    self.tasks.fail(self.at(), name, -32603, message, None),
                ),
                _ => (
                    mcpw_tasks_cancel(self.c_tasks, self.now, name.as_ptr().cast(), name.len()),
                    self.tasks.cancel(self.at(), name),
                ),
            }
        };
        same("end a task", rc, code(want));
    }

    fn results(&mut self, null_conn: bool, twice: bool) {
        for _ in 0..64 {
            let mut r = std::mem::MaybeUninit::<mcpw_task_result>::uninit();
            // Safety: a live table, a writable result.
            let rc = unsafe { mcpw_tasks_poll_result(self.c_tasks, r.as_mut_ptr()) };
            same("poll_result", rc, MCPW_OK);
            // Safety: written on success.
            let r = unsafe { r.assume_init() };
            let Some(want) = self.tasks.poll_result() else {
                assert!(!r.ready, "a ready result the Rust table does not have");
                return;
            };
            assert!(r.ready, "no ready result where the Rust table has one");
            assert_eq!(r.owner, want.owner, "owner");
            let id = match want.id.as_id() {
                Id::Int(n) => (mcpw_id_kind::MCPW_ID_INT as u32, n, None),
                Id::Str(s) => (
                    mcpw_id_kind::MCPW_ID_STRING as u32,
                    0,
                    Some(s.raw().to_owned()),
                ),
            };
            assert_eq!((r.id.kind, r.id.integer, view(r.id.string)), id, "ready id");
            match &want.answer {
                LegacyAnswer::Result(result) => {
                    assert!(!r.is_error, "an error for a result");
                    assert_eq!(view(r.result).as_deref(), Some(result.as_str()), "result");
                }
                LegacyAnswer::Error {
                    code,
                    message,
                    data,
                } => {
                    assert!(r.is_error, "a result for an error");
                    assert_eq!(r.code, *code, "code");
                    assert_eq!(
                        view(r.message).as_deref(),
                        Some(message.as_str()),
                        "message"
                    );
                    assert_eq!(view(r.data), *data, "data");
                }
                LegacyAnswer::Wait => panic!("a ready result that waits"),
            }
            if null_conn {
                // Safety: a live table, a NULL connection (refused; the answer is kept).
                let rc = unsafe { mcpw_tasks_write_result(self.c_tasks, ptr::null_mut()) };
                same("write_result to NULL", rc, MCPW_ERR_NULL_ARGUMENT);
                // Safety: a NULL table (refused).
                let rc = unsafe { mcpw_tasks_write_result(ptr::null_mut(), self.c) };
                same("write_result from NULL", rc, MCPW_ERR_NULL_ARGUMENT);
            }
            // Safety: live handles.
            let rc = unsafe { mcpw_tasks_write_result(self.c_tasks, self.c) };
            let wrote = self.tasks.write_ready(&mut self.rust, &want);
            let first = code(wrote);
            same("write_result", rc, first);
            if first == MCPW_OK {
                self.reached.results_written += 1;
            }
            if twice {
                // Safety: live handles.
                let rc = unsafe { mcpw_tasks_write_result(self.c_tasks, self.c) };
                // Written: forgotten. Refused by the connection: kept, and refused again.
                let again = if first == MCPW_OK {
                    MCPW_ERR_UNKNOWN_REQUEST
                } else {
                    code(self.tasks.write_ready(&mut self.rust, &want))
                };
                same("write_result again", rc, again);
            }
        }
    }

    fn url_elicitation(&mut self, id: IdArg, elicitations: ElicitArg) {
        let mut text = String::new();
        let (cid, null_id) = c_id(id, &mut text);
        let arg: Passed = match elicitations {
            ElicitArg::Pick(i) => (
                ELICITATIONS[usize::from(i) % ELICITATIONS.len()]
                    .as_bytes()
                    .to_vec(),
                false,
                None,
            ),
            ElicitArg::NotJson => (b"[{nope".to_vec(), false, None),
            ElicitArg::BadUtf8 => (vec![b'"', 0xff, b'"'], false, None),
            ElicitArg::NullWithLength => (b"[]".to_vec(), true, Some(MCPW_ERR_NULL_ARGUMENT)),
        };
        let id_ptr: *const mcpw_id = if null_id { ptr::null() } else { &cid };
        // Safety: a live handle; the id and the text readable for their lengths, or NULL.
        let rc = unsafe {
            mcpw_conn_respond_url_elicitation_required(
                self.c,
                id_ptr,
                passed_ptr(&arg),
                arg.0.len(),
            )
        };
        let want = if null_id {
            MCPW_ERR_NULL_ARGUMENT
        } else if let Some(refused) = arg.2 {
            refused
        } else if let Some(rid) = rust_id(id, &text) {
            match std::str::from_utf8(&arg.0) {
                Err(_) => MCPW_ERR_INVALID_UTF8,
                Ok(t) => match RawJson::new(t) {
                    Err(_) => MCPW_ERR_INVALID_JSON,
                    Ok(json) => code(self.rust.respond_url_elicitation_required(rid, json)),
                },
            }
        } else {
            MCPW_ERR_INVALID_ID
        };
        if want == MCPW_OK {
            self.reached.elicitations += 1;
        }
        same("respond_url_elicitation_required", rc, want);
    }
}

/// How far a run got, for the check that random inputs reach each call's success.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServeAbiReached {
    pub steps: usize,
    pub tasks_responded: usize,
    pub served: usize,
    pub results_written: usize,
    pub elicitations: usize,
    pub task_events: usize,
}

/// The harness: see the module docs.
pub fn c_abi_serve(data: &[u8]) {
    c_abi_serve_reached(data);
}

/// [`c_abi_serve`], returning how far the run got.
pub fn c_abi_serve_reached(data: &[u8]) -> ServeAbiReached {
    let mut u = Unstructured::new(data);
    let Ok(setup) = ServeSetup::arbitrary(&mut u) else {
        return ServeAbiReached::default();
    };
    let mut h = Harness::new(&setup);
    let mut steps = 0;
    while !u.is_empty() && steps < 256 {
        let Ok(op) = ServeOp::arbitrary(&mut u) else {
            break;
        };
        h.step(op);
        steps += 1;
    }
    ServeAbiReached { steps, ..h.reached }
}
