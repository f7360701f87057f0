//! `mcpw_conn`: one MCP connection, client or server, driven from C.

use std::cell::{Cell, RefCell};
use std::ffi::c_char;
use std::ptr::NonNull;
use std::time::Duration;

use super::boundary::{
    Handle, Out, array_in, bytes_in, bytes_out, catch, chars_as_bytes, free_handle, into_handle,
    json, not_reentrant, optional, optional_bytes_in, read_in, required, utf8, with_mut, with_ref,
};
use super::config::{mcpw_config, mcpw_role};
use super::event::{EventTexts, mcpw_event, mcpw_id, mcpw_id_kind, mcpw_str, to_c};
use super::result::mcpw_result::{self, *};
use mcpwire::conn::{
    Connection, ListenItem, RequestId, RequestOptions, State, StreamId, Timestamp,
};
use mcpwire::jsonrpc::{Id, JsonStr};
use mcpwire::mcp::{Caps, Era, LogLevel};

/// One MCP connection, client or server. Create it with `mcpw_conn_new` and free it with
/// `mcpw_conn_free`. A handle may move between threads but must not be used by two at once.
///
/// An HTTP server or client also lends views of its connections (`mcpw_http_server_conn`,
/// `mcpw_http_client_conn`): the same handle type, for every command and getter, but the
/// HTTP handle moves its bytes, so the transport calls refuse a view, and freeing one does
/// nothing.
pub struct mcpw_conn {
    pub(crate) conn: Slot,
    poisoned: Cell<bool>,
    /// The caller's inputs to the command under way, copied: they may point into views this
    /// handle lent, which die as soon as the engine is called.
    pub(crate) staged: Vec<u8>,
    /// Decoded strings of the current event.
    texts: EventTexts,
    /// A view's lender's poison flag: a panic in a call on the view may leave the lender's
    /// connection half changed, so it poisons the lender too.
    lender_poisoned: Option<NonNull<Cell<bool>>>,
    /// A view whose lender keeps track of the commands given through it: where to note its
    /// key (the lender's list, which outlives the view), once until the lender takes note.
    lender_touched: Option<(NonNull<RefCell<Vec<u64>>>, u64)>,
    /// This view's key is in its lender's list (`lender_touched`).
    touched: bool,
}

/// The connection behind a handle: its own, or one an HTTP handle lends.
// A view wastes the room of a connection (an HTTP server keeps one per connection it lent,
// until that connection is gone and the views are collected), while boxing would add an
// indirection to every call on every owned connection.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Slot {
    /// Made by `mcpw_conn_new`; the handle owns the connection and its transport calls.
    Owned(Connection),
    /// A connection inside an HTTP server or client. `None` once the lender changed (the
    /// view is stale): the pointer is set only while the lender makes no change.
    View(Option<NonNull<Connection>>),
}

impl Slot {
    /// The connection, for commands and getters.
    pub(crate) fn get(&self) -> Result<&Connection, mcpw_result> {
        match self {
            Slot::Owned(c) => Ok(c),
            // Safety: a view's pointer is set by its lender only while the connection lives
            // and the lender does not touch it; the lender clears it before any change.
            Slot::View(Some(p)) => Ok(unsafe { p.as_ref() }),
            Slot::View(None) => Err(MCPW_ERR_STALE_VIEW),
        }
    }

    /// [`get`](Self::get), mutably.
    pub(crate) fn get_mut(&mut self) -> Result<&mut Connection, mcpw_result> {
        match self {
            Slot::Owned(c) => Ok(c),
            // Safety: as in `get`; the C caller uses the view from one thread at a time, and
            // the lender holds no reference to the connection between its own calls.
            Slot::View(Some(p)) => Ok(unsafe { p.as_mut() }),
            Slot::View(None) => Err(MCPW_ERR_STALE_VIEW),
        }
    }

    /// The connection, for the transport calls only an owner makes.
    fn owned(&mut self) -> Result<&mut Connection, mcpw_result> {
        match self {
            Slot::Owned(c) => Ok(c),
            Slot::View(_) => Err(MCPW_ERR_NOT_OWNER),
        }
    }

    /// [`owned`](Self::owned), shared.
    fn owned_ref(&self) -> Result<&Connection, mcpw_result> {
        match self {
            Slot::Owned(c) => Ok(c),
            Slot::View(_) => Err(MCPW_ERR_NOT_OWNER),
        }
    }
}

impl mcpw_conn {
    /// A view for an HTTP handle to lend, stale until [`lend`](Self::lend).
    pub(crate) fn view() -> Self {
        mcpw_conn {
            conn: Slot::View(None),
            poisoned: Cell::new(false),
            staged: Vec::new(),
            texts: EventTexts::default(),
            lender_poisoned: None,
            lender_touched: None,
            touched: false,
        }
    }

    /// Points this view at `conn`, which must stay put and untouched by anyone else until
    /// [`stale`](Self::stale); `lender_poisoned` is the lender's poison flag, which outlives
    /// the view.
    pub(crate) fn lend(&mut self, conn: &mut Connection, lender_poisoned: &Cell<bool>) {
        self.lender_poisoned = Some(NonNull::from(lender_poisoned));
        self.conn = Slot::View(Some(NonNull::from(conn)));
        // A view lent afresh starts clean (a panic on an earlier lending poisoned that one).
        self.poisoned.set(false);
    }

    /// [`lend`](Self::lend), for a lender that needs to know which of its connections were
    /// given commands through their views since it last looked: after each call that may
    /// change the view, `key` goes in `touched` (once, until [`untouch`](Self::untouch)).
    /// `touched` must outlive the view.
    pub(crate) fn lend_tracked(
        &mut self,
        conn: &mut Connection,
        lender_poisoned: &Cell<bool>,
        touched: &RefCell<Vec<u64>>,
        key: u64,
    ) {
        self.lend(conn, lender_poisoned);
        self.lender_touched = Some((NonNull::from(touched), key));
    }

    /// The lender took note of this view's key: the next command notes it again.
    pub(crate) fn untouch(&mut self) {
        self.touched = false;
    }

    /// Makes the view refuse every call until it is lent again.
    pub(crate) fn stale(&mut self) {
        self.conn = Slot::View(None);
        self.texts.release_large();
        self.lender_touched = None;
        self.touched = false;
    }
}

impl Handle for mcpw_conn {
    fn poisoned(&self) -> &Cell<bool> {
        &self.poisoned
    }
    fn after_call(&mut self) {
        // The staged copy of a large argument is not kept once the command is done.
        mcpwire::frame::empty(&mut self.staged);
        // The command may have moved the connection's deadline earlier, or given it events
        // (a close's CLOSED): its lender looks at it again.
        if let (Some((touched, key)), false, Slot::View(Some(_))) =
            (self.lender_touched, self.touched, &self.conn)
        {
            // Safety: the lender's list outlives its views (the lender frees its views when
            // it is freed), and no call on the lender runs during a call on the view.
            unsafe { touched.as_ref() }.borrow_mut().push(key);
            self.touched = true;
        }
    }
    fn on_panic(&self) {
        if let Some(lender) = self.lender_poisoned {
            // Safety: a view is used only while its lender lives (the lender frees its views
            // when it is freed), and the flag is a `Cell`, shared by design.
            unsafe { lender.as_ref() }.set(true);
        }
    }
}

/// Where a connection's lifecycle stands (`mcpw_conn_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_state {
    /// The handshake is under way.
    MCPW_STATE_INITIALIZING = 1,
    /// The handshake is done; anything negotiated may flow.
    MCPW_STATE_OPERATING = 2,
    /// `mcpw_conn_close` was called; waiting for the requests in flight either way.
    MCPW_STATE_CLOSING = 3,
    /// Ended; the `MCPW_EVENT_CLOSED` event says why.
    MCPW_STATE_CLOSED = 4,
    /// A state this version of the C ABI has no code for yet.
    MCPW_STATE_OTHER = 999,
}

/// The protocol era in force (`mcpw_conn_era`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_era {
    /// Not decided yet: a client still probing, or a dual-era server before its first request.
    MCPW_ERA_UNDECIDED = 0,
    /// The `initialize` handshake era (2024-11-05 to 2025-11-25).
    MCPW_ERA_LEGACY = 1,
    /// The stateless era (2026-07-28).
    MCPW_ERA_MODERN = 2,
    /// An era this version of the C ABI has no code for yet.
    MCPW_ERA_OTHER = 999,
}

/// Log severities for `mcpw_conn_log` and `mcpw_request_context.log_level`, numbered as
/// syslog's (`LOG_EMERG` 0 to `LOG_DEBUG` 7): a lower number is more severe.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_log_level {
    /// `emergency`
    MCPW_LOG_EMERGENCY = 0,
    /// `alert`
    MCPW_LOG_ALERT = 1,
    /// `critical`
    MCPW_LOG_CRITICAL = 2,
    /// `error`
    MCPW_LOG_ERROR = 3,
    /// `warning`
    MCPW_LOG_WARNING = 4,
    /// `notice`
    MCPW_LOG_NOTICE = 5,
    /// `info`
    MCPW_LOG_INFO = 6,
    /// `debug`
    MCPW_LOG_DEBUG = 7,
}

const LOG_LEVELS: [(mcpw_log_level, LogLevel); 8] = [
    (mcpw_log_level::MCPW_LOG_EMERGENCY, LogLevel::Emergency),
    (mcpw_log_level::MCPW_LOG_ALERT, LogLevel::Alert),
    (mcpw_log_level::MCPW_LOG_CRITICAL, LogLevel::Critical),
    (mcpw_log_level::MCPW_LOG_ERROR, LogLevel::Error),
    (mcpw_log_level::MCPW_LOG_WARNING, LogLevel::Warning),
    (mcpw_log_level::MCPW_LOG_NOTICE, LogLevel::Notice),
    (mcpw_log_level::MCPW_LOG_INFO, LogLevel::Info),
    (mcpw_log_level::MCPW_LOG_DEBUG, LogLevel::Debug),
];

/// What a 2026-07-28 request declared about itself in `_meta` (`mcpw_conn_request_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_request_context {
    /// False for an unknown id or a handshake-era request (every other field is then empty).
    pub known: bool,
    /// The request's protocol version (a static string).
    pub version: mcpw_str,
    /// The client capabilities the request declared, for this request only: `MCPW_CAP_*`
    /// flags.
    pub client_capabilities: u32,
    /// Whether the request asked for log messages (`logLevel`).
    pub has_log_level: bool,
    /// The least severe level it wants, one of `mcpw_log_level`.
    pub log_level: u32,
}

/// Whether a request's timeout restarts when progress arrives for it
/// (`mcpw_request_options.reset_on_progress`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_progress_reset {
    /// As the config's `MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS` says.
    MCPW_PROGRESS_RESET_DEFAULT = 0,
    /// Restart the timeout on progress (bounded by the maximum total timeout).
    MCPW_PROGRESS_RESET_ON = 1,
    /// Never restart it.
    MCPW_PROGRESS_RESET_OFF = 2,
}

/// Per-request options for `mcpw_conn_request`. All zeroes (or passing NULL) means the
/// defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mcpw_request_options {
    /// The timeout in milliseconds; 0 uses the config's request timeout, except for
    /// `subscriptions/listen`, which then has none: its stream lasts until it is cancelled or
    /// the connection closes.
    pub timeout_ms: u64,
    /// 1 to ask for progress: the engine adds `_meta.progressToken` (the request's id) to
    /// the params and reports progress as `MCPW_EVENT_PROGRESS`; 0 not to.
    pub progress: u32,
    /// One of `mcpw_progress_reset`.
    pub reset_on_progress: u32,
}

/// Counters of what the engine dropped quietly, as the spec asks (`mcpw_conn_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mcpw_stats {
    /// Responses to our requests that arrived after a timeout or cancel.
    pub late_responses: u64,
    /// Progress notifications for unknown or finished requests.
    pub dropped_progress: u64,
    /// Progress notifications whose value did not increase.
    pub non_increasing_progress: u64,
    /// Cancellations for requests not in flight.
    pub ignored_cancellations: u64,
    /// Answers not sent: to requests the peer had cancelled, and (HTTP client) answers a
    /// server asking faster than it takes them left waiting past 1,024.
    pub suppressed_responses: u64,
    /// Peer notifications dropped because the event queue was full.
    pub dropped_events: u64,
}

// ---- Capability flags (`mcpw_request_context.client_capabilities`) ----

/// Capability flag: server `tools`.
pub const MCPW_CAP_TOOLS: u32 = 1 << 0;
/// Capability flag: server `tools.listChanged`.
pub const MCPW_CAP_TOOLS_LIST_CHANGED: u32 = 1 << 1;
/// Capability flag: server `resources`.
pub const MCPW_CAP_RESOURCES: u32 = 1 << 2;
/// Capability flag: server `resources.subscribe`.
pub const MCPW_CAP_RESOURCES_SUBSCRIBE: u32 = 1 << 3;
/// Capability flag: server `resources.listChanged`.
pub const MCPW_CAP_RESOURCES_LIST_CHANGED: u32 = 1 << 4;
/// Capability flag: server `prompts`.
pub const MCPW_CAP_PROMPTS: u32 = 1 << 5;
/// Capability flag: server `prompts.listChanged`.
pub const MCPW_CAP_PROMPTS_LIST_CHANGED: u32 = 1 << 6;
/// Capability flag: server `logging`.
pub const MCPW_CAP_LOGGING: u32 = 1 << 7;
/// Capability flag: server `completions`.
pub const MCPW_CAP_COMPLETIONS: u32 = 1 << 8;
/// Capability flag: client `roots`.
pub const MCPW_CAP_ROOTS: u32 = 1 << 9;
/// Capability flag: client `roots.listChanged`.
pub const MCPW_CAP_ROOTS_LIST_CHANGED: u32 = 1 << 10;
/// Capability flag: client `sampling`.
pub const MCPW_CAP_SAMPLING: u32 = 1 << 11;
/// Capability flag: client `sampling.tools`.
pub const MCPW_CAP_SAMPLING_TOOLS: u32 = 1 << 12;
/// Capability flag: client `sampling.context`.
pub const MCPW_CAP_SAMPLING_CONTEXT: u32 = 1 << 13;
/// Capability flag: client `elicitation`.
pub const MCPW_CAP_ELICITATION: u32 = 1 << 14;
/// Capability flag: client form-mode elicitation.
pub const MCPW_CAP_ELICITATION_FORM: u32 = 1 << 15;
/// Capability flag: client `elicitation.url`.
pub const MCPW_CAP_ELICITATION_URL: u32 = 1 << 16;
/// Capability flag: `tasks`.
pub const MCPW_CAP_TASKS: u32 = 1 << 17;
/// Capability flag: `tasks.list`.
pub const MCPW_CAP_TASKS_LIST: u32 = 1 << 18;
/// Capability flag: `tasks.cancel`.
pub const MCPW_CAP_TASKS_CANCEL: u32 = 1 << 19;
/// Capability flag: `experimental`.
pub const MCPW_CAP_EXPERIMENTAL: u32 = 1 << 20;
/// Capability flag: `extensions`.
pub const MCPW_CAP_EXTENSIONS: u32 = 1 << 21;
/// Capability flag: the tasks extension (2026-07-28), `extensions` has
/// `io.modelcontextprotocol/tasks`.
pub const MCPW_CAP_TASKS_EXTENSION: u32 = 1 << 22;
/// Capability flag: server, 2025-11-25, `tasks.requests.tools.call` (`tools/call` may be
/// task-augmented).
pub const MCPW_CAP_TASKS_TOOLS_CALL: u32 = 1 << 23;
/// Capability flag: client, 2025-11-25, `tasks.requests.sampling.createMessage`.
pub const MCPW_CAP_TASKS_SAMPLING: u32 = 1 << 24;
/// Capability flag: client, 2025-11-25, `tasks.requests.elicitation.create`.
pub const MCPW_CAP_TASKS_ELICITATION: u32 = 1 << 25;

/// The C ABI's flags and the engine's, one to one.
pub(crate) const CAPS: [(u32, Caps); 26] = [
    (MCPW_CAP_TOOLS, Caps::TOOLS),
    (MCPW_CAP_TOOLS_LIST_CHANGED, Caps::TOOLS_LIST_CHANGED),
    (MCPW_CAP_RESOURCES, Caps::RESOURCES),
    (MCPW_CAP_RESOURCES_SUBSCRIBE, Caps::RESOURCES_SUBSCRIBE),
    (
        MCPW_CAP_RESOURCES_LIST_CHANGED,
        Caps::RESOURCES_LIST_CHANGED,
    ),
    (MCPW_CAP_PROMPTS, Caps::PROMPTS),
    (MCPW_CAP_PROMPTS_LIST_CHANGED, Caps::PROMPTS_LIST_CHANGED),
    (MCPW_CAP_LOGGING, Caps::LOGGING),
    (MCPW_CAP_COMPLETIONS, Caps::COMPLETIONS),
    (MCPW_CAP_ROOTS, Caps::ROOTS),
    (MCPW_CAP_ROOTS_LIST_CHANGED, Caps::ROOTS_LIST_CHANGED),
    (MCPW_CAP_SAMPLING, Caps::SAMPLING),
    (MCPW_CAP_SAMPLING_TOOLS, Caps::SAMPLING_TOOLS),
    (MCPW_CAP_SAMPLING_CONTEXT, Caps::SAMPLING_CONTEXT),
    (MCPW_CAP_ELICITATION, Caps::ELICITATION),
    (MCPW_CAP_ELICITATION_FORM, Caps::ELICITATION_FORM),
    (MCPW_CAP_ELICITATION_URL, Caps::ELICITATION_URL),
    (MCPW_CAP_TASKS, Caps::TASKS),
    (MCPW_CAP_TASKS_LIST, Caps::TASKS_LIST),
    (MCPW_CAP_TASKS_CANCEL, Caps::TASKS_CANCEL),
    (MCPW_CAP_EXPERIMENTAL, Caps::EXPERIMENTAL),
    (MCPW_CAP_EXTENSIONS, Caps::EXTENSIONS),
    (MCPW_CAP_TASKS_EXTENSION, Caps::TASKS_EXTENSION),
    (MCPW_CAP_TASKS_TOOLS_CALL, Caps::TASKS_TOOLS_CALL),
    (MCPW_CAP_TASKS_SAMPLING, Caps::TASKS_SAMPLING),
    (MCPW_CAP_TASKS_ELICITATION, Caps::TASKS_ELICITATION),
];

fn caps_out(caps: Caps) -> u32 {
    CAPS.iter()
        .filter(|(_, c)| caps.contains(*c))
        .fold(0, |bits, (flag, _)| bits | flag)
}

fn at(now_ns: u64) -> Timestamp {
    Timestamp::from_nanos(now_ns)
}

/// Copies the caller's inputs for one command into `buf` and returns views of the copies
/// (`None` stays `None`).
pub(crate) fn stage<'s, const N: usize>(
    buf: &'s mut Vec<u8>,
    parts: [Option<&[u8]>; N],
) -> [Option<&'s [u8]>; N] {
    buf.clear();
    let mut spans = [None; N];
    for (span, part) in spans.iter_mut().zip(parts) {
        if let Some(part) = part {
            let start = buf.len();
            buf.extend_from_slice(part);
            *span = Some((start, buf.len()));
        }
    }
    let buf: &'s [u8] = buf;
    spans.map(|s| s.map(|(start, end)| &buf[start..end]))
}

/// Refuses a command on a closed connection with `MCPW_ERR_CLOSED`, once its arguments are
/// checked. The header promises that code for every command after `MCPW_EVENT_CLOSED`; the
/// engine refuses them all too, but some with the reason it checks first (an id that is no
/// longer in flight, an engine-owned method, an error code of the version).
pub(crate) fn refuse_if_closed(conn: &Connection) -> Result<(), mcpw_result> {
    if conn.state() == State::Closed {
        return Err(MCPW_ERR_CLOSED);
    }
    Ok(())
}

/// Reads the caller's request options (NULL: the defaults).
///
/// # Safety
/// `options` is NULL or readable.
unsafe fn options_in(options: *const mcpw_request_options) -> Result<RequestOptions, mcpw_result> {
    let options = match optional(options) {
        // Safety: (caller) readable; the struct is plain numbers.
        Some(_) => unsafe { read_in(options) }?,
        None => mcpw_request_options::default(),
    };
    let reset_on_progress = match options.reset_on_progress {
        r if r == mcpw_progress_reset::MCPW_PROGRESS_RESET_DEFAULT as u32 => None,
        r if r == mcpw_progress_reset::MCPW_PROGRESS_RESET_ON as u32 => Some(true),
        r if r == mcpw_progress_reset::MCPW_PROGRESS_RESET_OFF as u32 => Some(false),
        _ => return Err(MCPW_ERR_INVALID_ARGUMENT),
    };
    Ok(RequestOptions {
        timeout: (options.timeout_ms > 0).then(|| Duration::from_millis(options.timeout_ms)),
        progress: match options.progress {
            0 => false,
            1 => true,
            _ => return Err(MCPW_ERR_INVALID_ARGUMENT),
        },
        reset_on_progress,
    })
}

/// An id from C, before staging: its kind, integer and string bytes.
pub(crate) struct IdIn<'a> {
    pub(crate) kind: u32,
    pub(crate) integer: i64,
    pub(crate) string: Option<&'a [u8]>,
}

/// Reads an `mcpw_id` the caller passed.
///
/// # Safety
/// `id` is NULL or readable, and its string view readable for its length.
pub(crate) unsafe fn id_in<'a>(id: *const mcpw_id) -> Result<IdIn<'a>, mcpw_result> {
    let id = required(id)?.as_ptr();
    // Member by member: `kind` first, then only the member it names, since C may leave the
    // other unset (reading it, even unused, would read uninitialised memory).
    // Safety: (caller) readable; a number, for which any bits are valid.
    let kind = unsafe { std::ptr::addr_of!((*id).kind).read() };
    let (mut integer, mut string) = (0, None);
    if kind == mcpw_id_kind::MCPW_ID_INT as u32 {
        // Safety: as above.
        integer = unsafe { std::ptr::addr_of!((*id).integer).read() };
    } else if kind == mcpw_id_kind::MCPW_ID_STRING as u32 {
        // Safety: as above; a pointer and a length, set since `kind` names them.
        let view = unsafe { std::ptr::addr_of!((*id).string).read() };
        // Safety: (caller) the view is readable for its length.
        string = Some(unsafe { bytes_in(chars_as_bytes(view.ptr), view.len) }?);
    }
    Ok(IdIn {
        kind,
        integer,
        string,
    })
}

/// The engine's id for a staged `IdIn`.
pub(crate) fn id_of(kind: u32, integer: i64, string: Option<&[u8]>) -> Result<Id<'_>, mcpw_result> {
    match (kind, string) {
        (k, _) if k == mcpw_id_kind::MCPW_ID_INT as u32 => Ok(Id::Int(integer)),
        (k, Some(s)) if k == mcpw_id_kind::MCPW_ID_STRING as u32 => {
            let text = std::str::from_utf8(s).map_err(|_| MCPW_ERR_INVALID_ID)?;
            JsonStr::from_raw(text)
                .map(Id::Str)
                .ok_or(MCPW_ERR_INVALID_ID)
        }
        _ => Err(MCPW_ERR_INVALID_ID),
    }
}

// ---- Lifetime -----------------------------------------------------------------------------

/// Creates a connection from `config` (copied: the config may be freed or changed
/// afterwards). `now_ns` is the current time on your monotonic clock, in nanoseconds; every
/// later timestamp must be on the same clock. A client queues its first request at once
/// (`server/discover` or `initialize`, by era): drain `mcpw_conn_transmit` next.
///
/// On success `*out_conn` receives a new handle that the caller owns and must free exactly
/// once with `mcpw_conn_free`. Returns `MCPW_ERR_CONFIG_REFUSED` when the config has no
/// protocol versions.
///
/// # Safety
/// `config` is NULL or a live config handle; `out_conn` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_new(
    config: *const mcpw_config,
    now_ns: u64,
    out_conn: *mut *mut mcpw_conn,
) -> mcpw_result {
    let body = |c: &mcpw_config| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_conn) }?;
        let conn =
            Connection::new(c.config().clone(), at(now_ns)).map_err(|_| MCPW_ERR_CONFIG_REFUSED)?;
        out.write(into_handle(mcpw_conn {
            conn: Slot::Owned(conn),
            poisoned: Cell::new(false),
            staged: Vec::new(),
            texts: EventTexts::default(),
            lender_poisoned: None,
            lender_touched: None,
            touched: false,
        }));
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_ref(config, body) }
}

/// Frees a connection, exactly once, with everything it lent (event views, transmit bytes).
/// NULL does nothing. It does not close anything: it owns no transport.
///
/// # Safety
/// `conn` is NULL or a handle from `mcpw_conn_new` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_free(conn: *mut mcpw_conn) {
    // From inside a callback, not even looked at: a view would be read while its lender's
    // call holds it (and `free_handle` would keep an owned one anyway).
    if not_reentrant().is_err() {
        return;
    }
    // A view belongs to the HTTP handle that lent it.
    // Safety: (caller) NULL or a live handle (owned, or a view whose lender is alive).
    let view = catch(
        || true,
        || unsafe { conn.as_ref() }.is_some_and(|h| matches!(h.conn, Slot::View(_))),
    );
    if view {
        return;
    }
    // Safety: (caller) NULL or a live handle from `mcpw_conn_new`, freed only here.
    unsafe { free_handle(conn) }
}

// ---- Inputs -------------------------------------------------------------------------------

/// Feeds bytes read from the transport (stdio, a socket), in any chunking, with the time
/// they arrived. Consumes all of them and keeps no pointer into them (an incomplete last line
/// is copied, up to the frame cap). Then drain events, transmit and the timeout.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `bytes` points to `len` readable bytes (or is
/// NULL with length 0) that are not memory this handle lent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_handle_input(
    conn: *mut mcpw_conn,
    now_ns: u64,
    bytes: *const u8,
    len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let bytes = unsafe { bytes_in(bytes, len) }?;
        h.conn.owned()?.handle_input(at(now_ns), bytes);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Feeds one whole message from a message-oriented transport (an HTTP body), tagged with
/// `stream`, the stream that answers to it must go to (`mcpw_conn_transmit` reports it).
/// The bytes are one frame, without a trailing newline, and are not kept.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `frame` points to `len` readable bytes (or is
/// NULL with length 0) that are not memory this handle lent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_handle_frame(
    conn: *mut mcpw_conn,
    now_ns: u64,
    stream: u64,
    frame: *const u8,
    len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let frame = unsafe { bytes_in(frame, len) }?;
        h.conn
            .owned()?
            .handle_frame(at(now_ns), StreamId(stream), frame);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// The transport reached end of input: a last unterminated line is processed, our requests in
/// flight are abandoned, and the connection closes (`MCPW_EVENT_CLOSED`).
///
/// # Safety
/// `conn` is NULL or a live connection handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_handle_eof(conn: *mut mcpw_conn, now_ns: u64) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        h.conn.owned()?.handle_eof(at(now_ns));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Fires every timer due at `now_ns`: request timeouts and the end of a graceful close.
/// Calling it early does nothing. A view lent by an HTTP server or client refuses it
/// (`MCPW_ERR_NOT_OWNER`): its lender's `handle_timeout` fires its timers, with the
/// lender's own (resumptions, sessions' idle time).
///
/// # Safety
/// `conn` is NULL or a live connection handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_handle_timeout(
    conn: *mut mcpw_conn,
    now_ns: u64,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        h.conn.owned()?.handle_timeout(at(now_ns));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

// ---- Outputs ------------------------------------------------------------------------------

/// Takes the next event into `*out_event`. When there is none, returns `MCPW_OK` with
/// `kind == MCPW_EVENT_NONE`. Call it until then after every input and command.
///
/// The event's views point into this handle and stay valid until the next call that takes
/// the handle non-`const` (including the next `mcpw_conn_poll_event`). They may be passed
/// straight back into a command on this handle.
///
/// A view lent by an HTTP server or client gets its events from its lender
/// (`mcpw_http_server_poll_event`, `mcpw_http_client_poll_event`): this call refuses it with
/// `MCPW_ERR_NOT_OWNER` (`MCPW_ERR_STALE_VIEW` once stale).
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_poll_event(
    conn: *mut mcpw_conn,
    out_event: *mut mcpw_event,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // A view's events are its lender's to hand out: taking them here would pass the
        // lender by, and free the texts of the event the lender lent last.
        h.conn.get()?;
        h.conn.owned()?;
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_event) }?;
        let event = match h.conn.get_mut()?.poll_event() {
            Some(event) => to_c(event, &mut h.texts),
            None => {
                // No event borrows the decoded texts any more.
                h.texts.release_large();
                mcpw_event::NONE
            }
        };
        out.write(event);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Lends the next bytes to write to the transport: `*out_len` bytes at `*out_bytes`, for the
/// stream `*out_stream` (0 for stdio and other byte streams). When nothing is pending,
/// returns `MCPW_OK` with `*out_bytes == NULL` and `*out_len == 0`.
///
/// The bytes belong to the handle and stay valid until the next call that takes it
/// non-`const`. Write what the transport takes, then report it with `mcpw_conn_consume`, and
/// ask again.
///
/// # Safety
/// `conn` is NULL or a live connection handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_transmit(
    conn: *const mcpw_conn,
    out_bytes: *mut *const u8,
    out_len: *mut usize,
    out_stream: *mut u64,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let (bytes_to, len_to, stream_to) = unsafe {
            (
                Out::new(out_bytes)?,
                Out::new(out_len)?,
                Out::new(out_stream)?,
            )
        };
        let (bytes, stream) = match h.conn.owned_ref()?.poll_transmit() {
            Some(t) => (t.bytes, t.stream.0),
            None => (&[][..], 0),
        };
        bytes_to.write(bytes_out(bytes));
        len_to.write(bytes.len());
        stream_to.write(stream);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reports that the first `n` bytes lent by `mcpw_conn_transmit` were written (a partial
/// write is fine; 0 is allowed). More than was lent is refused with
/// `MCPW_ERR_CONSUME_TOO_MUCH`, consuming nothing.
///
/// # Safety
/// `conn` is NULL or a live connection handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_consume(conn: *mut mcpw_conn, n: usize) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        let lent = h.conn.owned()?.poll_transmit().map_or(0, |t| t.bytes.len());
        if n > lent {
            return Err(MCPW_ERR_CONSUME_TOO_MUCH);
        }
        h.conn.owned()?.consume_transmit(n);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Reads the earliest deadline at which `mcpw_conn_handle_timeout` has work: `*out_has` is
/// true and `*out_deadline_ns` holds it (on the clock of `now_ns`), or `*out_has` is false
/// and `*out_deadline_ns` is 0 when no timer is armed. It changes after inputs and commands;
/// re-arm your timer from it every time round the loop. A view lent by an HTTP server or
/// client refuses it (`MCPW_ERR_NOT_OWNER`): arm the timer from its lender's `poll_timeout`.
///
/// # Safety
/// `conn` is NULL or a live connection handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_poll_timeout(
    conn: *const mcpw_conn,
    out_has: *mut bool,
    out_deadline_ns: *mut u64,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let (has_to, deadline_to) = unsafe { (Out::new(out_has)?, Out::new(out_deadline_ns)?) };
        let deadline = h.conn.owned_ref()?.poll_timeout();
        has_to.write(deadline.is_some());
        deadline_to.write(deadline.map_or(0, Timestamp::as_nanos));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

// ---- Commands -----------------------------------------------------------------------------

/// Sends a request: `method` (UTF-8) with `params` (a JSON object as text, or NULL for none),
/// and `options` (NULL for the defaults). On success `*out_request_id` receives its id, which
/// the answer's event carries in `request`. Inputs are read during the call only.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `method` and `params` point to their lengths in
/// readable bytes (or are NULL with length 0); `options` is NULL or readable;
/// `out_request_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_request(
    conn: *mut mcpw_conn,
    now_ns: u64,
    method: *const c_char,
    method_len: usize,
    params: *const c_char,
    params_len: usize,
    options: *const mcpw_request_options,
    out_request_id: *mut i64,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_request_id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let method = unsafe { bytes_in(chars_as_bytes(method), method_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let params = unsafe { optional_bytes_in(params, params_len) }?;
        // Safety: (caller) NULL or readable.
        let options = unsafe { options_in(options) }?;
        let [Some(method), params] = stage(&mut h.staged, [Some(method), params]) else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let method = utf8(method)?;
        let params = params.map(json).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        let id = h
            .conn
            .get_mut()?
            .request_with(at(now_ns), method, params, options)?;
        out.write(id.0);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Sends a request on behalf of the peer's request `*parent`, still in flight (a server asking
/// the client to sample or elicit while a tool runs). It travels on the stream of `parent`
/// (on stdio, that is the only stream). Otherwise as `mcpw_conn_request`; an unknown parent
/// is `MCPW_ERR_UNKNOWN_REQUEST`.
///
/// # Safety
/// As `mcpw_conn_request`; `parent` is NULL or readable (its string readable for its length).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_request_related(
    conn: *mut mcpw_conn,
    now_ns: u64,
    parent: *const mcpw_id,
    method: *const c_char,
    method_len: usize,
    params: *const c_char,
    params_len: usize,
    options: *const mcpw_request_options,
    out_request_id: *mut i64,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_request_id) }?;
        // Safety: (caller) readable, or NULL, which is refused.
        let parent = unsafe { id_in(parent) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let method = unsafe { bytes_in(chars_as_bytes(method), method_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let params = unsafe { optional_bytes_in(params, params_len) }?;
        // Safety: (caller) NULL or readable.
        let options = unsafe { options_in(options) }?;
        let [string, Some(method), params] =
            stage(&mut h.staged, [parent.string, Some(method), params])
        else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let parent = id_of(parent.kind, parent.integer, string)?;
        let method = utf8(method)?;
        let params = params.map(json).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        let id = h
            .conn
            .get_mut()?
            .request_related(at(now_ns), parent, method, params, options)?;
        out.write(id.0);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Sends a notification: `method` (UTF-8) with `params` (a JSON object as text, or NULL for
/// none). Inputs are read during the call only.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `method` and `params` point to their lengths in
/// readable bytes (or are NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_notify(
    conn: *mut mcpw_conn,
    method: *const c_char,
    method_len: usize,
    params: *const c_char,
    params_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let method = unsafe { bytes_in(chars_as_bytes(method), method_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let params = unsafe { optional_bytes_in(params, params_len) }?;
        let [Some(method), params] = stage(&mut h.staged, [Some(method), params]) else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let method = utf8(method)?;
        let params = params.map(json).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn.get_mut()?.notify(method, params)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Answers the peer's request `*id` with `result`: a JSON object as text, as every MCP result
/// is (any other value gets `MCPW_ERR_INVALID_PARAMS`). Answering a request the peer has
/// cancelled succeeds and sends nothing. Answering a 2026-07-28 `subscriptions/listen`
/// request ends that subscription: its result goes out with the subscription id in `_meta`
/// and nothing else, whatever object `result` holds (the schema's
/// listen result is otherwise empty). In 2026-07-28 it sends complete results only: a
/// `resultType` other than `"complete"` gets `MCPW_ERR_INVALID_PARAMS` (use
/// `mcpw_conn_respond_input_required`, or `mcpw_conn_respond_task` for a task handle), and so
/// do cache hints of your own that are not valid (a `ttlMs` that is not a number `>= 0`, or
/// in a cacheable result such as `tools/list` not an integer `>= 0`; null only outside
/// cacheable results, as a task's `ttlMs`; a `cacheScope` other than `"public"` or
/// `"private"`). Inputs are read during the
/// call only, and may be views from this handle's current event.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `result` points to `result_len` readable bytes (or is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_respond(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    result: *const c_char,
    result_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let result = unsafe { bytes_in(chars_as_bytes(result), result_len) }?;
        let [string, Some(result)] = stage(&mut h.staged, [id.string, Some(result)]) else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let key = id_of(id.kind, id.integer, string)?;
        let result = json(result)?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn.get_mut()?.respond(key, result)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Answers the peer's request `*id` with a JSON-RPC error: `code`, `message` (UTF-8) and
/// `data` (any JSON value as text, or NULL for none). Codes that the negotiated version does
/// not define (before one is negotiated: that no configured version defines) are refused
/// with `MCPW_ERR_CODE_NOT_IN_VERSION`, except
/// `MCPW_MCP_RESOURCE_NOT_FOUND`, which is sent as the version's "resource not found" code
/// (-32602 from 2026-07-28 on, which replaced -32002). -32021 and -32022 need the `data` the
/// schema requires (`requiredCapabilities`; `supported` and `requested`), else
/// `MCPW_ERR_INVALID_PARAMS`. Inputs are read during the call only, and may be views from this
/// handle's current event.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `message` and `data` point to their lengths in readable bytes (or are
/// NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_respond_error(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    code: i64,
    message: *const c_char,
    message_len: usize,
    data: *const c_char,
    data_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let message = unsafe { bytes_in(chars_as_bytes(message), message_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let data = unsafe { optional_bytes_in(data, data_len) }?;
        let [string, Some(message), data] = stage(&mut h.staged, [id.string, Some(message), data])
        else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let key = id_of(id.kind, id.integer, string)?;
        let message = utf8(message)?;
        let data = data.map(json).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn.get_mut()?.respond_error(key, code, message, data)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// What one item of a `subscriptions/listen` request asks to hear (`mcpw_listen_item.kind`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_listen_item_kind {
    /// `notifications/tools/list_changed`.
    MCPW_LISTEN_TOOLS_LIST_CHANGED = 1,
    /// `notifications/prompts/list_changed`.
    MCPW_LISTEN_PROMPTS_LIST_CHANGED = 2,
    /// `notifications/resources/list_changed`.
    MCPW_LISTEN_RESOURCES_LIST_CHANGED = 3,
    /// `notifications/resources/updated` for the resource URI in `text`.
    MCPW_LISTEN_RESOURCE = 4,
    /// `notifications/tasks` for the task id in `text` (the tasks extension).
    MCPW_LISTEN_TASK = 5,
}

/// One item of a `subscriptions/listen` request, as `mcpw_conn_listen_items` lists it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_listen_item {
    /// One of `mcpw_listen_item_kind` (a plain integer, as in `mcpw_id`).
    pub kind: u32,
    /// The resource URI or task id, decoded UTF-8 (not NUL-terminated); absent for the list
    /// changes. A view into the connection, valid until the next call that changes it.
    pub text: mcpw_str,
}

/// Server, 2026-07-28: lists what the `subscriptions/listen` request `*id` asks to hear and we
/// can honour, while it waits for `mcpw_conn_grant_listen`. Such a request comes as
/// `MCPW_EVENT_REQUEST` only when the config has `MCPW_POLICY_REVIEW_LISTENS`: check each item
/// (the tasks extension requires an access check on every task-related request), then grant.
/// The order is fixed: the list changes, then at most 256 resource URIs, then at most 256 task
/// ids.
///
/// Writes the first `min(count, capacity)` items to `out_items` and their number to
/// `*out_count` (a call with capacity 0 asks for the count). `MCPW_ERR_UNKNOWN_REQUEST` when
/// `*id` is not a listen waiting for its grant; nothing is written unless the call succeeds.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `out_items` points to `capacity` writable items (or is NULL with
/// `capacity` 0); `out_count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_listen_items(
    conn: *const mcpw_conn,
    id: *const mcpw_id,
    out_items: *mut mcpw_listen_item,
    capacity: usize,
    out_count: *mut usize,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) writable or NULL, which is refused.
        let count = unsafe { Out::new(out_count) }?;
        if out_items.is_null() && capacity != 0 {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        }
        let key = id_of(id.kind, id.integer, id.string)?;
        let items = h
            .conn
            .get()?
            .listen_items(key)
            .ok_or(MCPW_ERR_UNKNOWN_REQUEST)?;
        use mcpw_listen_item_kind::*;
        for (i, item) in items.iter().take(capacity).enumerate() {
            let (kind, text) = match *item {
                ListenItem::ToolsListChanged => (MCPW_LISTEN_TOOLS_LIST_CHANGED, None),
                ListenItem::PromptsListChanged => (MCPW_LISTEN_PROMPTS_LIST_CHANGED, None),
                ListenItem::ResourcesListChanged => (MCPW_LISTEN_RESOURCES_LIST_CHANGED, None),
                ListenItem::Resource(uri) => (MCPW_LISTEN_RESOURCE, Some(uri)),
                ListenItem::Task(task) => (MCPW_LISTEN_TASK, Some(task)),
            };
            let item = mcpw_listen_item {
                kind: kind as u32,
                text: mcpw_str::of_opt(text),
            };
            // Safety: `i < capacity`, and (caller) `out_items` holds `capacity` writable
            // items; `write` neither reads nor drops what was there.
            unsafe { out_items.add(i).write(item) };
        }
        count.write(items.len());
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Server, 2026-07-28: grants the `subscriptions/listen` request `*id` and sends its
/// acknowledgement. `keep` holds one flag per item of `mcpw_conn_listen_items`, in its order
/// (`keep_len` must be that count); the stream carries the items flagged `true`. To refuse the
/// whole listen, answer it with `mcpw_conn_respond_error` instead. Granting a listen the peer
/// has cancelled succeeds and sends nothing.
///
/// Refused, with nothing sent: `MCPW_ERR_UNKNOWN_REQUEST` when `*id` is not a listen waiting
/// for its grant, `MCPW_ERR_INVALID_ARGUMENT` when `keep_len` is not its number of items,
/// `MCPW_ERR_OUTPUT_FULL` when the output is past its limit, `MCPW_ERR_CLOSED` after
/// `MCPW_EVENT_CLOSED`, `MCPW_ERR_NULL_ARGUMENT` for a NULL `conn`, `id` or `keep` (with a
/// length).
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `keep` points to `keep_len` readable flags (or is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_grant_listen(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    keep: *const bool,
    keep_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Read as bytes, any nonzero byte true: a byte C wrote through a cast is not always a
        // valid Rust `bool`.
        // Safety: (caller) `keep_len` readable flags, or NULL with 0.
        let keep: Vec<bool> = unsafe { array_in(keep.cast::<u8>(), keep_len) }?
            .iter()
            .map(|&b| b != 0)
            .collect();
        let [string] = stage(&mut h.staged, [id.string]);
        let key = id_of(id.kind, id.integer, string)?;
        refuse_if_closed(h.conn.get()?)?;
        let conn = h.conn.get_mut()?;
        match conn.listen_items(key) {
            Some(items) if items.len() != keep.len() => return Err(MCPW_ERR_INVALID_ARGUMENT),
            _ => {}
        }
        let mut next = keep.into_iter();
        conn.grant_listen(key, |_| next.next().unwrap_or(false))?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Server, 2025-11-25: answers the peer's request `*id` with the error -32042 (URL elicitation
/// required): the user must complete the URL-mode elicitations `elicitations` (a JSON array of
/// objects with `mode` `"url"`, `elicitationId`, `url` and `message`) before the request can
/// succeed. The client gets `MCPW_EVENT_URL_ELICITATION_REQUIRED`; announce each one's end
/// with `mcpw_conn_notify` of `notifications/elicitation/complete`.
///
/// Refused, with nothing sent: `MCPW_ERR_NOT_IN_VERSION` outside 2025-11-25,
/// `MCPW_ERR_NOT_NEGOTIATED` when the client did not declare `elicitation.url`,
/// `MCPW_ERR_INVALID_PARAMS` for elicitations that are not such an array (an empty one
/// included), `MCPW_ERR_INVALID_JSON` for text that is not JSON. Inputs are read during the
/// call only, and may be views from this handle's current event.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `elicitations` points to `elicitations_len` readable bytes (or is NULL
/// with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_respond_url_elicitation_required(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    elicitations: *const c_char,
    elicitations_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let elicitations = unsafe { bytes_in(chars_as_bytes(elicitations), elicitations_len) }?;
        let [string, Some(elicitations)] = stage(&mut h.staged, [id.string, Some(elicitations)])
        else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let key = id_of(id.kind, id.integer, string)?;
        let elicitations = json(elicitations)?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn
            .get_mut()?
            .respond_url_elicitation_required(key, elicitations)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Reports progress on the peer's request `*id`, which must have carried a progress token
/// (else `MCPW_ERR_NO_PROGRESS_TOKEN`): `progress` must be finite and increase with every
/// call, and `total`, sent when `has_total`, be finite (else
/// `MCPW_ERR_NON_INCREASING_PROGRESS`); `message` (UTF-8, or NULL for none) is sent where
/// the protocol version has it. Inputs are read during the call only.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `message` points to `message_len` readable bytes (or is NULL with length
/// 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_progress(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    progress: f64,
    total: f64,
    has_total: bool,
    message: *const c_char,
    message_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let message = unsafe { optional_bytes_in(message, message_len) }?;
        let [string, message] = stage(&mut h.staged, [id.string, message]);
        let key = id_of(id.kind, id.integer, string)?;
        let message = message.map(utf8).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn
            .get_mut()?
            .progress(key, progress, has_total.then_some(total), message)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Server: sends a log message (`notifications/message`) about the peer's request `*id`, at
/// `level` (one of `mcpw_log_level`), from `logger` (UTF-8, or NULL for none), with `data`
/// (any JSON value as text). In 2026-07-28 it goes out only if the request asked for this
/// level or a more verbose one; in the handshake era, always. Either way we must have
/// declared `logging` (else `MCPW_ERR_NOT_NEGOTIATED`).
/// `*out_sent` says whether it was sent; a client gets `MCPW_ERR_WRONG_DIRECTION`. Inputs are
/// read during the call only.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `logger` and `data` point to their lengths in readable bytes (or are NULL
/// with length 0); `out_sent` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_log(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    level: u32,
    logger: *const c_char,
    logger_len: usize,
    data: *const c_char,
    data_len: usize,
    out_sent: *mut bool,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_sent) }?;
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        let level = LOG_LEVELS
            .iter()
            .find(|(c, _)| *c as u32 == level)
            .map(|(_, l)| *l)
            .ok_or(MCPW_ERR_INVALID_ARGUMENT)?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let logger = unsafe { optional_bytes_in(logger, logger_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let data = unsafe { bytes_in(chars_as_bytes(data), data_len) }?;
        let [string, logger, Some(data)] = stage(&mut h.staged, [id.string, logger, Some(data)])
        else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let key = id_of(id.kind, id.integer, string)?;
        let logger = logger.map(utf8).transpose()?;
        let data = json(data)?;
        refuse_if_closed(h.conn.get()?)?;
        let sent = h.conn.get_mut()?.log(key, level, logger, data)?;
        out.write(sent);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Server, 2026-07-28: answers the peer's `tools/call`, `prompts/get` or `resources/read`
/// `*id` with "input required": `input_requests` (a JSON object of input requests, each
/// needing a capability the request declared, or NULL for none) and/or `request_state` (UTF-8
/// text the client echoes back on its retry, or NULL for none). Other requests are
/// `MCPW_ERR_NOT_ELIGIBLE`. Inputs are read during the call only.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `input_requests` and `request_state` point to their lengths in readable
/// bytes (or are NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_respond_input_required(
    conn: *mut mcpw_conn,
    id: *const mcpw_id,
    input_requests: *const c_char,
    input_requests_len: usize,
    request_state: *const c_char,
    request_state_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let requests = unsafe { optional_bytes_in(input_requests, input_requests_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let state = unsafe { optional_bytes_in(request_state, request_state_len) }?;
        let [string, requests, state] = stage(&mut h.staged, [id.string, requests, state]);
        let key = id_of(id.kind, id.integer, string)?;
        let requests = requests.map(json).transpose()?;
        let state = state.map(utf8).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn
            .get_mut()?
            .respond_input_required(key, requests, state)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Client, 2026-07-28: re-sends our request `request_id`, which ended with
/// `MCPW_EVENT_INPUT_REQUIRED`, as a new request with the original params, `input_responses`
/// (a JSON object, or NULL for none) and the server's `requestState` echoed byte for byte. On
/// success `*out_request_id` receives the new request's id.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `input_responses` points to its length in
/// readable bytes (or is NULL with length 0); `out_request_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_retry(
    conn: *mut mcpw_conn,
    now_ns: u64,
    request_id: i64,
    input_responses: *const c_char,
    input_responses_len: usize,
    out_request_id: *mut i64,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_request_id) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let responses = unsafe { optional_bytes_in(input_responses, input_responses_len) }?;
        let [responses] = stage(&mut h.staged, [responses]);
        let responses = responses.map(json).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        let id = h
            .conn
            .get_mut()?
            .retry(at(now_ns), RequestId(request_id), responses)?;
        out.write(id.0);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Cancels our request `request_id`: the peer is told (with `reason`, UTF-8, or NULL for
/// none) and the request ends here, with no event; an answer arriving later is dropped. A
/// 2025-11-25 task-augmented request whose task handle has not come ends without a word to
/// the peer (tasks are cancelled with `tasks/cancel`, and there is no task id yet); if the
/// handle still comes, the engine sends `tasks/cancel` for that task itself (where the peer
/// declared `tasks.cancel`), and its answer is no event.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `reason` points to `reason_len` readable bytes
/// (or is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_cancel(
    conn: *mut mcpw_conn,
    now_ns: u64,
    request_id: i64,
    reason: *const c_char,
    reason_len: usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let reason = unsafe { optional_bytes_in(reason, reason_len) }?;
        let [reason] = stage(&mut h.staged, [reason]);
        let reason = reason.map(utf8).transpose()?;
        refuse_if_closed(h.conn.get()?)?;
        h.conn
            .get_mut()?
            .cancel(at(now_ns), RequestId(request_id), reason)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Begins a graceful close: no new requests or notifications; the requests in flight either
/// way get until `now_ns + grace_ms` to be answered (ours by the peer, the peer's by you: go
/// on answering them), and the close ends as soon as none is left. When the grace runs out
/// first, the peer is sent a cancellation for each of ours still unanswered, the peer's own
/// still unanswered get an error (-32603), and the connection closes (`MCPW_EVENT_CLOSED`
/// with `MCPW_CLOSE_LOCAL`): write out what it holds before you drop it. A 2026-07-28 server
/// first ends the peer's `subscriptions/listen` requests with their results; a client's own,
/// which nothing else ends, are cancelled at once (`MCPW_EVENT_ABANDONED`). Called again while
/// closing, it can only bring the end sooner (a later deadline changes nothing). Closing a
/// closed connection does nothing.
///
/// # Safety
/// `conn` is NULL or a live connection handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_close(
    conn: *mut mcpw_conn,
    now_ns: u64,
    grace_ms: u64,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        h.conn
            .get_mut()?
            .close(at(now_ns), Duration::from_millis(grace_ms));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

/// Answers every request of the peer's still in flight with an internal error (-32603)
/// carrying `message` (UTF-8, `message_len` bytes), all but 2026-07-28 listens (a graceful
/// close ends those with their results), and writes how many it answered to `*out_count`
/// (may be NULL). Use
/// it when nothing will answer them any more, a host that stops, before `mcpw_conn_close`:
/// the close waits for the answers to the peer's requests too, and would otherwise wait its
/// whole grace. One the output has no room for is not answered (its peer is not reading).
///
/// # Safety
/// `conn` is NULL or a live connection handle; `message` is readable for `message_len`
/// bytes (NULL with 0 for none); `out_count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_refuse_peer_requests(
    conn: *mut mcpw_conn,
    message: *const c_char,
    message_len: usize,
    out_count: *mut usize,
) -> mcpw_result {
    let body = |h: &mut mcpw_conn| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let message = unsafe { bytes_in(chars_as_bytes(message), message_len) }?;
        let [Some(message)] = stage(&mut h.staged, [Some(message)]) else {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        };
        let message = utf8(message)?;
        refuse_if_closed(h.conn.get()?)?;
        let n = h.conn.get_mut()?.refuse_peer_requests(message);
        if !out_count.is_null() {
            // Safety: (caller) writable, and not NULL.
            unsafe { Out::new(out_count) }?.write(n);
        }
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_mut(conn, body) }
}

// ---- Getters ------------------------------------------------------------------------------

/// Reads where the lifecycle stands into `*out_state`. Use it to decide whether commands
/// can be given yet (`MCPW_STATE_OPERATING`) or any more (`MCPW_STATE_CLOSED`: free it).
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_state` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_state(
    conn: *const mcpw_conn,
    out_state: *mut mcpw_state,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_state) }?;
        #[allow(unreachable_patterns)]
        out.write(match h.conn.get()?.state() {
            State::Initializing => mcpw_state::MCPW_STATE_INITIALIZING,
            State::Operating => mcpw_state::MCPW_STATE_OPERATING,
            State::Closing => mcpw_state::MCPW_STATE_CLOSING,
            State::Closed => mcpw_state::MCPW_STATE_CLOSED,
            _ => mcpw_state::MCPW_STATE_OTHER,
        });
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads the connection's role into `*out_role`: for code handed a connection it did not
/// create (a view from an HTTP handle, a generic event loop) that acts by role.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_role` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_role(
    conn: *const mcpw_conn,
    out_role: *mut mcpw_role,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_role) }?;
        out.write(h.conn.get()?.role().into());
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads into `*out_bytes` how much input to give `mcpw_conn_handle_input` at a time, handing
/// out every event (and answering) between pieces, when a read brought more: 4 KiB, less
/// when the config lowered `max_inbound_in_flight`, `max_buffered_output` or
/// `max_queued_events`. Use it in a
/// loop of your own that reads large chunks, so that a peer that pipelines thousands of
/// requests in one write gets every one answered, instead of "too many requests" errors.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_bytes` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_input_piece(
    conn: *const mcpw_conn,
    out_bytes: *mut usize,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_bytes) }?;
        out.write(h.conn.get()?.config().limits.input_piece());
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads the protocol era in force into `*out_era`: after `MCPW_EVENT_READY`, to know
/// whether the peer speaks sessions (handshake era) or stateless requests (2026-07-28).
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_era` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_era(
    conn: *const mcpw_conn,
    out_era: *mut mcpw_era,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_era) }?;
        #[allow(unreachable_patterns)]
        out.write(match h.conn.get()?.era() {
            None => mcpw_era::MCPW_ERA_UNDECIDED,
            Some(Era::Legacy) => mcpw_era::MCPW_ERA_LEGACY,
            Some(Era::Modern) => mcpw_era::MCPW_ERA_MODERN,
            Some(_) => mcpw_era::MCPW_ERA_OTHER,
        });
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Server: reads what the peer's 2026-07-28 request `*id`, still in flight, declared in its
/// `_meta` into `*out_context` (`known` is false for an unknown id or a handshake-era
/// request). The id is read during the call only.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
/// for its length); `out_context` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_request_context(
    conn: *const mcpw_conn,
    id: *const mcpw_id,
    out_context: *mut mcpw_request_context,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_context) }?;
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        let key = id_of(id.kind, id.integer, id.string)?;
        let context = h.conn.get()?.request_context(key);
        let level = context.and_then(|c| c.log_level).and_then(|l| {
            LOG_LEVELS
                .iter()
                .find(|(_, level)| *level == l)
                .map(|(c, _)| *c as u32)
        });
        out.write(mcpw_request_context {
            known: context.is_some(),
            version: mcpw_str::of_opt(context.map(|c| c.version.as_str())),
            client_capabilities: context.map_or(0, |c| caps_out(c.client_capabilities)),
            has_log_level: level.is_some(),
            log_level: level.unwrap_or(0),
        });
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads the negotiated protocol version (`"2025-11-25"`) into `*out_version`: a static string
/// that lives as long as the program, or an absent view (NULL) before negotiation.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_version` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_protocol_version(
    conn: *const mcpw_conn,
    out_version: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_version) }?;
        out.write(mcpw_str::of_opt(
            h.conn.get()?.protocol_version().map(|v| v.as_str()),
        ));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads the peer's `clientInfo` / `serverInfo` object (raw JSON) into `*out_json`, or an
/// absent view (NULL) before the handshake. The view belongs to the handle and stays valid
/// until the next call that takes it non-`const`.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_peer_info(
    conn: *const mcpw_conn,
    out_json: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_json) }?;
        out.write(mcpw_str::of_opt(h.conn.get()?.peer_info().map(|j| j.get())));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads the peer's capabilities object (raw JSON, as the peer declared it) into `*out_json`,
/// or an absent view (NULL) before the handshake. The view belongs to the handle and stays
/// valid until the next call that takes it non-`const`.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_peer_capabilities(
    conn: *const mcpw_conn,
    out_json: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_json) }?;
        out.write(mcpw_str::of_opt(
            h.conn.get()?.peer_capabilities().map(|c| c.raw().get()),
        ));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Client: reads the server's `instructions` (decoded text) into `*out_text`, or an absent
/// view (NULL) when it sent none. The view belongs to the handle and stays valid until the
/// next call that takes it non-`const`.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_text` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_peer_instructions(
    conn: *const mcpw_conn,
    out_text: *mut mcpw_str,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_text) }?;
        out.write(mcpw_str::of_opt(h.conn.get()?.peer_instructions()));
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads the counters of what the engine dropped quietly into `*out_stats`: for logs and
/// metrics, and to find out why an expected message never became an event.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_stats` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_stats(
    conn: *const mcpw_conn,
    out_stats: *mut mcpw_stats,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_stats) }?;
        let s = h.conn.get()?.stats();
        out.write(mcpw_stats {
            late_responses: s.late_responses,
            dropped_progress: s.dropped_progress,
            non_increasing_progress: s.non_increasing_progress,
            ignored_cancellations: s.ignored_cancellations,
            suppressed_responses: s.suppressed_responses,
            dropped_events: s.dropped_events,
        });
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads how many `notifications/elicitation/complete` the engine dropped for unknown or
/// already-completed elicitation ids (2025-11-25, URL mode) into `*out_count`. A getter of its
/// own: `mcpw_stats` keeps its size within 0.1.x, since callers allocate it.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_ignored_elicitation_completions(
    conn: *const mcpw_conn,
    out_count: *mut u64,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_count) }?;
        out.write(h.conn.get()?.stats().ignored_elicitation_completions);
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

/// Reads how many of our requests await an answer (`*out_ours`) and how many of the peer's
/// await ours (`*out_peers`): to wait for both to reach 0 before a shutdown, or to throttle
/// before `MCPW_ERR_TOO_MANY_IN_FLIGHT`.
///
/// # Safety
/// `conn` is NULL or a live connection handle; `out_ours` and `out_peers` are NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_conn_in_flight(
    conn: *const mcpw_conn,
    out_ours: *mut usize,
    out_peers: *mut usize,
) -> mcpw_result {
    let body = |h: &mcpw_conn| {
        // Safety: (caller) writable or NULL, which is refused.
        let (ours, peers) = unsafe { (Out::new(out_ours)?, Out::new(out_peers)?) };
        ours.write(h.conn.get()?.requests_in_flight());
        peers.write(h.conn.get()?.peer_requests_in_flight());
        Ok(())
    };
    // Safety: (caller) NULL or a live connection handle.
    unsafe { with_ref(conn, body) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{mcpw_config_free, mcpw_config_new};
    use mcpwire::frame::KEEP_WHEN_EMPTY;
    use std::ptr;

    /// A fresh handle for `role`, freed by the caller with `mcpw_conn_free`.
    fn conn(role: mcpw_role) -> *mut mcpw_conn {
        let (mut config, mut conn) = (ptr::null_mut(), ptr::null_mut());
        // Safety: the names are readable for their lengths; the out-pointers are writable;
        // the config is freed once, after the connection was made from it.
        unsafe {
            assert_eq!(
                mcpw_config_new(role as u32, c"t".as_ptr(), 1, c"1".as_ptr(), 1, &mut config),
                MCPW_OK
            );
            assert_eq!(mcpw_conn_new(config, 0, &mut conn), MCPW_OK);
            mcpw_config_free(config);
        }
        conn
    }

    /// A command's staged copy of a large argument, and an event's decoded copy of a large
    /// escaped string, are not kept once they are done with: an idle handle does not hold the
    /// size of the largest message it saw.
    #[test]
    fn large_copies_are_given_back() {
        const BIG: usize = 1 << 20;
        let client = conn(mcpw_role::MCPW_ROLE_CLIENT);
        let params = format!(r#"{{"pad":"{}"}}"#, "p".repeat(BIG));
        let method = "notifications/message";
        // Safety: `client` is live; the arguments are readable for their lengths.
        let code = unsafe {
            mcpw_conn_notify(
                client,
                method.as_ptr().cast(),
                method.len(),
                params.as_ptr().cast(),
                params.len(),
            )
        };
        // Refused (no handshake yet), but only after the arguments were staged.
        assert_eq!(code, MCPW_ERR_NOT_INITIALIZED);
        // Safety: `client` is live and used by nothing else.
        let h = unsafe { &*client };
        assert!(
            h.staged.capacity() <= KEEP_WHEN_EMPTY,
            "{}",
            h.staged.capacity()
        );

        let server = conn(mcpw_role::MCPW_ROLE_SERVER);
        let frame = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/\\u0078{}\"}}\n",
            "x".repeat(BIG)
        );
        // Safety: `server` is live; the frame is readable for its length.
        unsafe { mcpw_conn_handle_input(server, 0, frame.as_ptr().cast(), frame.len()) };
        let mut event = mcpw_event::NONE;
        let mut largest = 0;
        loop {
            // Safety: `server` is live; `event` is writable.
            assert_eq!(unsafe { mcpw_conn_poll_event(server, &mut event) }, MCPW_OK);
            if event.kind == mcpw_event::NONE.kind {
                break;
            }
            // Safety: as above.
            largest = largest.max(unsafe { &*server }.texts.capacity());
        }
        // The event (a violation: no handshake yet) carried the decoded method.
        assert!(largest > BIG, "{largest}");
        // Safety: as above.
        assert!(unsafe { &*server }.texts.capacity() <= KEEP_WHEN_EMPTY);
        // Safety: both handles are live and freed once.
        unsafe {
            mcpw_conn_free(client);
            mcpw_conn_free(server);
        }
    }
}
