//! Streamable HTTP from C: `mcpw_http_server` answers the HTTP requests a C HTTP library
//! parsed, and `mcpw_http_client` tells a C HTTP client library which requests to make. Both
//! lend views of their MCP connections (`mcpw_conn*`) for the ordinary `mcpw_conn_*` commands
//! and getters, so an application answers a session exactly as it answers stdio.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;
use std::time::Duration;

use smallvec::SmallVec;

use super::boundary::{
    Handle, Out, TextOut, array_in, bytes_in, bytes_out, call, chars_as_bytes, free_handle,
    host_callback, into_handle, optional, optional_bytes_in, read_in, text_in, utf8, with_mut,
    with_ref,
};
use super::config::mcpw_config;
use super::conn::{id_in, id_of, mcpw_conn};
use super::event::{EventTexts, mcpw_event, mcpw_id, mcpw_str, to_c};
use super::result::mcpw_result::{self, *};
use mcpwire::conn::Timestamp;
use mcpwire::http::{
    Body, ClientAction, ConnKey, EventStore, ExchangeId, HttpClient, HttpRequest, HttpResponse,
    HttpServer, HttpServerConfig, HttpStreamId, ReconnectPolicy, StoreUnavailable, loopback_only,
};

fn at(now_ns: u64) -> Timestamp {
    Timestamp::from_nanos(now_ns)
}

/// One HTTP header, name and value, as pointer + length pairs (not NUL-terminated). Used for
/// the headers the host passes in (read during the call only) and the headers the library
/// lends out (valid until the next call that takes the lending handle non-`const`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_http_header {
    /// The header's name; compared ignoring ASCII case.
    pub name: mcpw_str,
    /// The header's value.
    pub value: mcpw_str,
}

/// A header's name and value, borrowed from the host where they are UTF-8.
type HeaderText<'a> = (Cow<'a, str>, Cow<'a, str>);

/// How many headers a request's tables hold on the stack; more take one allocation each.
const STACK_HEADERS: usize = 16;

/// The headers as text, on the stack for a usual request.
type HeaderTexts<'a> = SmallVec<[HeaderText<'a>; STACK_HEADERS]>;

/// The headers as the engine takes them.
fn header_pairs<'a>(headers: &'a HeaderTexts<'_>) -> SmallVec<[(&'a str, &'a str); STACK_HEADERS]> {
    headers
        .iter()
        .map(|(n, v)| (n.as_ref(), v.as_ref()))
        .collect()
}

/// Reads the host's header array as text, borrowed where it is UTF-8 (a value that is not is
/// read lossily, into a copy: no MCP header may hold such bytes, and the engine then refuses
/// it as a mismatch). Borrowing spares two allocations per header of every request.
///
/// # Safety
/// `headers` is NULL with `len` 0, or points to `len` readable headers whose views are
/// readable for their lengths.
unsafe fn headers_in<'a>(
    headers: *const mcpw_http_header,
    len: usize,
) -> Result<HeaderTexts<'a>, mcpw_result> {
    // Safety: (caller) `len` readable headers, or NULL with 0.
    let headers = unsafe { array_in(headers, len) }?;
    let mut out = HeaderTexts::with_capacity(headers.len());
    for h in headers {
        // Safety: (caller) each view is readable for its length (or NULL with length 0).
        let name = unsafe { bytes_in(chars_as_bytes(h.name.ptr), h.name.len) }?;
        // Safety: as above.
        let value = unsafe { bytes_in(chars_as_bytes(h.value.ptr), h.value.len) }?;
        out.push((text_or_lossy(name), text_or_lossy(value)));
    }
    Ok(out)
}

/// `bytes` as text: borrowed when it is UTF-8 (checked by `from_utf8`, which is much faster on
/// ASCII than `from_utf8_lossy`'s chunk walk), else a lossy copy.
fn text_or_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Header views of owned pairs, for lending.
fn headers_out<N: AsRef<str>>(pairs: &[(N, String)], out: &mut Vec<mcpw_http_header>) {
    out.clear();
    out.extend(pairs.iter().map(|(n, v)| mcpw_http_header {
        name: mcpw_str::of(n.as_ref()),
        value: mcpw_str::of(v),
    }));
}

// ---- Event store hooks ----------------------------------------------------------------------

/// Where `replay` hands each stored event back: call it with the event's bytes, in order.
pub type mcpw_replay_sink =
    unsafe extern "C" fn(sink_ctx: *mut c_void, bytes: *const u8, len: usize);

/// An event store of the host's own (shared by several server processes, say), as three
/// callbacks with one `user` pointer. The server calls them during its own calls only, from
/// the thread making that call, `mcpw_http_server_free` included (it forgets the sessions
/// still live): keep `user` valid until the server is freed. Set every member (`user` NULL
/// when unused; a member left unset is read all the same). The server is in the middle of a
/// change while they run: a call they make to any function that takes a handle (the server,
/// a view it lent, any other) returns `MCPW_ERR_REENTRANT` and does nothing (a free leaves
/// the handle be). They must return normally: a C++ exception or a `longjmp` out of one is
/// undefined behaviour. The guarantees a store must give (order, durability before
/// delivery, bounds, cleanup) are those of the Rust `mcpwire::http::EventStore` trait:
/// `replay` hands out, in increasing number, every stored event of `stream` in `session`
/// numbered above `after`, byte for byte as appended.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_event_store {
    /// Passed to every callback.
    pub user: *mut c_void,
    /// Stores one SSE event (`bytes`, complete with its `id:` line), numbered `event`, of
    /// `session`'s `stream`. Return only once it is stored. The views die after the call.
    pub append: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            session: *const c_char,
            session_len: usize,
            stream: u64,
            event: u64,
            bytes: *const u8,
            len: usize,
        ),
    >,
    /// Calls `sink(sink_ctx, bytes, len)` for each stored event of `session`'s `stream`
    /// numbered above `after`, in order, before it returns; then returns 0. Returns nonzero
    /// when the store could not be read (it timed out, or cannot be reached): the client
    /// then gets 503 with `Retry-After` and comes back, where an empty replay would end its
    /// resumed stream without the answer stored for it (events given to `sink` before a
    /// nonzero return are dropped). An event given to `sink` as NULL with a nonzero length
    /// fails the replay the same way.
    pub replay: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            session: *const c_char,
            session_len: usize,
            stream: u64,
            after: u64,
            sink: mcpw_replay_sink,
            sink_ctx: *mut c_void,
        ) -> c_int,
    >,
    /// Drops everything stored for `session` (it ended, expired or was evicted, or the
    /// server is being freed with it: `mcpw_http_server_free` calls this for each live one).
    pub forget:
        Option<unsafe extern "C" fn(user: *mut c_void, session: *const c_char, session_len: usize)>,
}

/// The host's callbacks as an [`EventStore`].
struct HostStore(mcpw_event_store);

// Safety: the header makes the host promise that its store may be used from whichever thread
// calls the server (one at a time, as for every handle).
unsafe impl Send for HostStore {}

/// What `replay_sink` is given: where the events go, and a panic of that code, kept to be
/// raised again once the host's callback has returned (unwinding through its C frames is
/// undefined behaviour), so that the server call reports it and is poisoned.
struct ReplaySink<'a> {
    out: &'a mut dyn FnMut(&[u8]),
    panic: Option<Box<dyn std::any::Any + Send>>,
    /// The host passed an event that cannot be read (NULL with a length, or a length over
    /// `isize::MAX`): the replay fails as a store that could not be read, rather than go on
    /// with a hole where that event was (the answer, perhaps).
    unreadable: bool,
}

/// Where the host's `replay` callback hands events back into Rust.
unsafe extern "C" fn replay_sink(ctx: *mut c_void, bytes: *const u8, len: usize) {
    if ctx.is_null() {
        return;
    }
    // Safety: `ctx` is the `ReplaySink` that `replay` passed for the duration of the host's
    // callback, which calls us only before it returns.
    let sink = unsafe { &mut *ctx.cast::<ReplaySink<'_>>() };
    if sink.panic.is_some() || sink.unreadable {
        return; // (the call fails anyway)
    }
    // Safety: (host) `bytes` is readable for `len` during this call.
    let Ok(bytes) = (unsafe { bytes_in(bytes, len) }) else {
        sink.unreadable = true;
        return;
    };
    let out = &mut sink.out;
    let caught = panic::catch_unwind(AssertUnwindSafe(|| out(bytes)));
    if let Err(panic) = caught {
        sink.panic = Some(panic);
    }
}

impl EventStore for HostStore {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        if let Some(append) = self.0.append {
            // Safety: the host's callback, given views that live through the call.
            host_callback(|| unsafe {
                append(
                    self.0.user,
                    session.as_ptr().cast(),
                    session.len(),
                    stream.0,
                    event,
                    bytes.as_ptr(),
                    bytes.len(),
                )
            })
        }
    }

    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreUnavailable> {
        if let Some(replay) = self.0.replay {
            let mut sink = ReplaySink {
                out,
                panic: None,
                unreadable: false,
            };
            let ctx: *mut ReplaySink<'_> = &mut sink;
            // Safety: the host's callback; `ctx` lives through the call and `replay_sink`
            // reads it back as the same type.
            let rc = host_callback(|| unsafe {
                replay(
                    self.0.user,
                    session.as_ptr().cast(),
                    session.len(),
                    stream.0,
                    after,
                    replay_sink,
                    ctx.cast(),
                )
            });
            if let Some(panic) = sink.panic {
                panic::resume_unwind(panic);
            }
            if rc != 0 || sink.unreadable {
                return Err(StoreUnavailable);
            }
        }
        Ok(())
    }

    fn forget(&mut self, session: &str) {
        if let Some(forget) = self.0.forget {
            // Safety: the host's callback, given a view that lives through the call.
            host_callback(|| unsafe { forget(self.0.user, session.as_ptr().cast(), session.len()) })
        }
    }
}

// ---- Server -------------------------------------------------------------------------------

/// The host's random source, as `mcpw_http_server_options.random` holds it.
type RandomFn = unsafe extern "C" fn(user: *mut c_void, buf: *mut u8, len: usize);

/// Settings for `mcpw_http_server_new`. Zero-initialize it, set `random`, and change what you
/// need: every zero or NULL field means its default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_http_server_options {
    /// Required: fills `len` bytes at `buf` from a cryptographically secure source
    /// (`getrandom(2)`, say); session ids are drawn from it. Called during server calls only,
    /// in the middle of a change: a call it makes to a function that takes a handle returns
    /// `MCPW_ERR_REENTRANT`, as from the event store's callbacks.
    pub random: Option<unsafe extern "C" fn(user: *mut c_void, buf: *mut u8, len: usize)>,
    /// Passed to `random`.
    pub random_user: *mut c_void,
    /// The MCP endpoint's path (`"/mcp"`, say): a request to another path gets 404. NULL:
    /// the path is not checked (route before calling, then).
    pub endpoint: mcpw_str,
    /// Host names (with or without a port) accepted besides loopback in `Host` and in the
    /// authority of `Origin` (DNS rebinding protection); anything else gets 403. NULL with 0:
    /// loopback names only (`localhost`, 127.0.0.0/8, `[::1]`, `::1`); a request without
    /// `Host` or `Origin`, or with `Origin: null`, passes either way. Copied by the call.
    pub allowed_hosts: *const mcpw_str,
    /// How many entries `allowed_hosts` has.
    pub allowed_hosts_len: usize,
    /// How long a session may sit idle before it expires. 0: 10 minutes.
    pub session_idle_timeout_ms: u64,
    /// Sessions alive at once (the least recently used idle one is evicted beyond). 0: 1024.
    pub max_sessions: usize,
    /// The largest POST body accepted (413 beyond); stop reading there too. 0: 4 MiB.
    pub max_body: usize,
    /// Events each session keeps for resumption in the built-in store. 0: 256.
    pub event_store: usize,
    /// The `retry` (ms) sent to 2025-11-25 clients before they resume a stream. 0: 1000.
    pub retry_ms: u64,
    /// The server's tools (a `tools/list` result or its `tools` array, JSON text), so that
    /// 2026-07-28 `tools/call` requests are checked against their `x-mcp-header`
    /// annotations. Text that is not JSON is `MCPW_ERR_INVALID_JSON` (or
    /// `MCPW_ERR_INVALID_UTF8`), JSON without such an array `MCPW_ERR_JSON_WRONG_TYPE`, and a
    /// tool whose annotations are invalid (clients drop such a tool: fix its schema)
    /// `MCPW_ERR_CONFIG_REFUSED`. NULL: none declared.
    pub tools: mcpw_str,
    /// A store of the host's own for resumable events (copied; every callback required, else
    /// `MCPW_ERR_NULL_ARGUMENT`). NULL: in this process's memory.
    pub events: *const mcpw_event_store,
    /// Bytes of events each session keeps for resumption in the built-in store, and bytes of
    /// messages waiting for a session's GET stream while none is open: the oldest go (the
    /// newest always stays). Lower it to bound memory per session. 0: 4 MiB.
    pub event_store_bytes: usize,
    /// How often every open SSE stream with nothing waiting gets an SSE comment line, so that
    /// proxies and idle timeouts do not cut a quiet stream: the stream is woken
    /// (`mcpw_http_server_poll_woken`) with the comment to write. 0: 15 s; `UINT64_MAX`:
    /// never.
    pub keepalive_ms: u64,
}

/// The answer to one HTTP request, lent by `mcpw_http_server_handle_request` and
/// `mcpw_http_server_settle`; its views stay valid until the next call that takes the server
/// non-`const`, so copy the headers into your HTTP library's response first.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_http_response {
    /// The status code.
    pub status: u16,
    /// The headers to send (content type included).
    pub headers: *const mcpw_http_header,
    /// How many headers.
    pub headers_len: usize,
    /// The complete body (NULL with length 0 for none); meaningless when `has_stream`.
    pub body: *const u8,
    /// The body's length.
    pub body_len: usize,
    /// The body is an SSE stream: settle the response, then drain `stream` with
    /// `mcpw_http_server_poll_stream`.
    pub has_stream: bool,
    /// The stream, when `has_stream`.
    pub stream: u64,
}

/// The server side of Streamable HTTP: sessions (handshake era) and stateless requests
/// (2026-07-28), behind one endpoint. Create it with `mcpw_http_server_new`, free it with
/// `mcpw_http_server_free`. One thread at a time.
pub struct mcpw_http_server {
    server: HttpServer,
    poisoned: Cell<bool>,
    random: RandomFn,
    random_user: *mut c_void,
    endpoint: Option<String>,
    /// The connection views this server lends, one per connection (each from `Box::leak`,
    /// freed once its connection is gone, or on drop), so a view never points at another
    /// session than the one it was lent for.
    views: HashMap<u64, NonNull<mcpw_conn>>,
    /// The views lent since the last call that was not a lending one.
    lent: Vec<u64>,
    /// The connections given commands through their views since the server last took note
    /// (each view notes its key once): the server marks them at its next call that may
    /// change it, and `poll_timeout` counts their deadlines. Lending marked them, but a
    /// `poll_timeout` or `poll_event` in between may have taken that note already.
    touched: RefCell<Vec<u64>>,
    /// Collect the views of gone connections once there are this many.
    collect_at: usize,
    /// The call under way lends a view: keep the lent views valid after the call.
    lending: bool,
    texts: EventTexts,
    /// The response lent last.
    lent_headers: Vec<(&'static str, String)>,
    lent_c_headers: Vec<mcpw_http_header>,
    lent_body: Vec<u8>,
    /// A stream response not settled yet.
    pending: Option<HttpResponse>,
    /// Per stream, the bytes the last `mcpw_http_server_poll_stream` lent and no consume has
    /// reported written yet: the most a consume may report. (What waits on the stream can be
    /// more by then: answers given on views since are moved onto it by any server call.)
    stream_lent: HashMap<u64, usize>,
}

impl Handle for mcpw_http_server {
    fn poisoned(&self) -> &Cell<bool> {
        &self.poisoned
    }
    fn on_panic(&self) {
        // The call that panicked may have ended connections before it did (and skipped
        // `after_call`): the views lent before it refuse every call from now on, rather than
        // reach into memory that may be gone.
        for key in &self.lent {
            if let Some(view) = self.views.get(key) {
                // Safety: the view is ours (from `Box::leak`), and C is not using it during a
                // call on the server; it is changed through its pointer, as `after_call` does.
                unsafe { &mut *view.as_ptr() }.stale();
            }
        }
    }
    fn before_call(&mut self) {
        // What was done through views since the last call: their connections may have
        // earlier deadlines, output and events.
        let mut touched = std::mem::take(self.touched.get_mut());
        for key in touched.drain(..) {
            if let Some(view) = self.views.get_mut(&key) {
                // Safety: the view is ours (from `Box::leak`), and C is not using it during a
                // call on the server.
                unsafe { view.as_mut() }.untouch();
            }
            self.server.connection(ConnKey::from_raw(key));
        }
        *self.touched.get_mut() = touched;
    }
    fn after_call(&mut self) {
        // A lending call keeps the views lent so far valid, except those whose connection it
        // ended (a stateless request whose last event was taken, say): their connection is
        // gone, and its memory may already serve another request. Any other call ends them
        // all.
        let lending = std::mem::take(&mut self.lending);
        let (server, views) = (&self.server, &mut self.views);
        self.lent.retain(|&key| {
            let keep = lending && server.contains(ConnKey::from_raw(key));
            if !keep && let Some(view) = views.get_mut(&key) {
                // Safety: the view is ours (from `Box::leak`), and C is not using it during a
                // call on the server.
                unsafe { view.as_mut() }.stale();
            }
            keep
        });
        if lending {
            return;
        }
        if self.views.len() >= self.collect_at {
            let server = &self.server;
            self.views.retain(|&key, view| {
                let alive = server.contains(ConnKey::from_raw(key));
                if !alive {
                    // Safety: from `Box::leak`, stale, and dropped only here.
                    drop(unsafe { Box::from_raw(view.as_ptr()) });
                }
                alive
            });
            self.collect_at = 2 * self.views.len() + 32;
        }
    }
}

impl Drop for mcpw_http_server {
    fn drop(&mut self) {
        for view in self.views.values() {
            // Safety: each from `Box::leak`, dropped only here (or when collected, which
            // removed it from the map).
            drop(unsafe { Box::from_raw(view.as_ptr()) });
        }
    }
}

impl mcpw_http_server {
    /// Lends the view of connection `key`, or refuses an unknown key.
    fn lend(&mut self, key: u64) -> Result<*mut mcpw_conn, mcpw_result> {
        let conn = self
            .server
            .connection(ConnKey::from_raw(key))
            .ok_or(MCPW_ERR_UNKNOWN_CONNECTION)?;
        let view = self
            .views
            .entry(key)
            .or_insert_with(|| NonNull::from(Box::leak(Box::new(mcpw_conn::view()))));
        // Safety: the view is ours; C uses it only between calls on the server.
        unsafe { view.as_mut() }.lend_tracked(conn, &self.poisoned, &self.touched, key);
        let view = view.as_ptr();
        if !self.lent.contains(&key) {
            self.lent.push(key);
        }
        self.lending = true;
        Ok(view)
    }

    /// Keeps `response` for lending, and returns its C form.
    fn lend_response(&mut self, response: HttpResponse) -> mcpw_http_response {
        let HttpResponse {
            status,
            headers,
            body,
        } = response;
        let stream = match body {
            Body::Complete(_, bytes) => {
                self.lent_body = bytes;
                None
            }
            // (The last body is let go, not cleared: its capacity, perhaps a large answer's,
            // was kept for the server's life, and nothing is ever written into it.)
            Body::Empty => {
                self.lent_body = Vec::new();
                None
            }
            Body::Stream(id) => {
                self.lent_body = Vec::new();
                Some(id)
            }
        };
        // A stream response waits for `settle`, which needs it whole.
        self.pending = stream.map(|id| HttpResponse {
            status,
            headers: headers.clone(),
            body: Body::Stream(id),
        });
        self.lent_headers = headers;
        headers_out(&self.lent_headers, &mut self.lent_c_headers);
        let stream = stream.map(|id| id.0);
        mcpw_http_response {
            status,
            headers: if self.lent_c_headers.is_empty() {
                std::ptr::null()
            } else {
                self.lent_c_headers.as_ptr()
            },
            headers_len: self.lent_c_headers.len(),
            body: bytes_out(&self.lent_body),
            body_len: self.lent_body.len(),
            has_stream: stream.is_some(),
            stream: stream.unwrap_or(0),
        }
    }
}

/// The authority of an `Origin` (`scheme://host[:port]`), or the whole value.
fn origin_authority(origin: &str) -> &str {
    origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .trim_end_matches('/')
}

/// Whether `authority` (`host[:port]`) is one of `allowed` (an entry without a port accepts
/// any port).
fn host_allowed(authority: &str, allowed: &[String]) -> bool {
    let host = authority
        .rsplit_once(':')
        .filter(|(h, p)| {
            !h.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':')
        })
        .map_or(authority, |(h, _)| h);
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(authority) || a.eq_ignore_ascii_case(host))
}

/// Reads the server options into an engine configuration.
///
/// # Safety
/// Every pointer in `o` is NULL (with length 0) or readable for its length.
unsafe fn server_config(
    config: &mcpw_config,
    o: &mcpw_http_server_options,
) -> Result<(HttpServerConfig, Option<String>), mcpw_result> {
    let mut c = HttpServerConfig::new(config.config().clone());
    // Safety: (caller) readable for its length, or NULL with length 0.
    let endpoint = unsafe { optional_bytes_in(o.endpoint.ptr, o.endpoint.len) }?
        .map(|b| utf8(b).map(str::to_owned))
        .transpose()?;
    let mut allowed = Vec::new();
    // Safety: (caller) `allowed_hosts_len` readable entries, or NULL with 0.
    for h in unsafe { array_in(o.allowed_hosts, o.allowed_hosts_len) }? {
        // Safety: (caller) each entry readable for its length.
        allowed.push(unsafe { text_in(h.ptr, h.len) }?.to_owned());
    }
    if !allowed.is_empty() {
        c.check_origin = Box::new(move |host, origin| {
            let host_ok =
                host.is_none_or(|h| loopback_only(Some(h), None) || host_allowed(h, &allowed));
            let origin_ok = origin.is_none_or(|o| {
                loopback_only(None, Some(o)) || host_allowed(origin_authority(o), &allowed)
            });
            host_ok && origin_ok
        });
    }
    if o.session_idle_timeout_ms > 0 {
        c.session_idle_timeout = Duration::from_millis(o.session_idle_timeout_ms);
    }
    if o.max_sessions > 0 {
        c.max_sessions = o.max_sessions;
    }
    if o.max_body > 0 {
        c.max_body = o.max_body;
    }
    if o.event_store > 0 {
        c.event_store = o.event_store;
    }
    if o.event_store_bytes > 0 {
        c.event_store_bytes = o.event_store_bytes;
    }
    if o.retry_ms > 0 {
        c.retry_ms = o.retry_ms;
    }
    match o.keepalive_ms {
        0 => {}
        u64::MAX => c.keepalive = None,
        ms => c.keepalive = Some(std::time::Duration::from_millis(ms)),
    }
    // Safety: (caller) readable for its length, or NULL with length 0.
    if let Some(tools) = unsafe { optional_bytes_in(o.tools.ptr, o.tools.len) }?
        && !c.declare_tools(tools_list(tools)?).is_empty()
    {
        return Err(MCPW_ERR_CONFIG_REFUSED);
    }
    if let Some(events) = optional(o.events) {
        // Safety: (caller) readable; the struct is pointers, for which any bits are valid.
        let store = unsafe { events.as_ptr().read() };
        // A store missing a callback would keep nothing, or replay nothing, without a word.
        if store.append.is_none() || store.replay.is_none() || store.forget.is_none() {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        }
        c.events = Some(Box::new(HostStore(store)));
    }
    Ok((c, endpoint))
}

/// Creates an HTTP server for the MCP server `config` (server role; its versions decide which
/// eras are served: 2026-07-28 for stateless requests, the others for sessions), with
/// `options` (read during the call; `random` is required, else `MCPW_ERR_NULL_ARGUMENT`).
/// Use it when you serve MCP over HTTP; for stdio, `mcpw_conn_new` is enough. A client
/// config, or one `mcpw_conn_new` refuses (no protocol versions), is
/// `MCPW_ERR_CONFIG_REFUSED`.
///
/// On success `*out_server` receives a handle that the caller owns and frees exactly once
/// with `mcpw_http_server_free`.
///
/// # Safety
/// `config` is NULL or a live config handle; `options` is NULL or readable, with its pointers
/// readable for their lengths; `out_server` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_new(
    config: *const mcpw_config,
    options: *const mcpw_http_server_options,
    out_server: *mut *mut mcpw_http_server,
) -> mcpw_result {
    let body = |c: &mcpw_config| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_server) }?;
        // Safety: (caller) readable or NULL, which is refused; any bits are valid.
        let o = unsafe { read_in(options) }?;
        let random = o.random.ok_or(MCPW_ERR_NULL_ARGUMENT)?;
        if c.config().role != mcpwire::conn::Role::Server {
            return Err(MCPW_ERR_CONFIG_REFUSED);
        }
        // A config no connection takes (no protocol versions, say) is refused here, as
        // `mcpw_conn_new` refuses it: the server would answer every request 400.
        if mcpwire::conn::Connection::new(c.config().clone(), Timestamp::ZERO).is_err() {
            return Err(MCPW_ERR_CONFIG_REFUSED);
        }
        // Safety: (caller) the options' pointers are readable for their lengths.
        let (config, endpoint) = unsafe { server_config(c, &o) }?;
        out.write(into_handle(mcpw_http_server {
            server: HttpServer::new(config),
            poisoned: Cell::new(false),
            random,
            random_user: o.random_user,
            endpoint,
            views: HashMap::new(),
            stream_lent: HashMap::new(),
            lent: Vec::new(),
            touched: RefCell::new(Vec::new()),
            collect_at: 32,
            lending: false,
            texts: EventTexts::default(),
            lent_headers: Vec::new(),
            lent_c_headers: Vec::new(),
            lent_body: Vec::new(),
            pending: None,
        }));
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_ref(config, body) }
}

/// Frees a server, exactly once, with all its sessions, streams and lent views (the
/// connection view included). NULL does nothing. Close your HTTP library's responses first.
///
/// # Safety
/// `server` is NULL or a handle from `mcpw_http_server_new` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_free(server: *mut mcpw_http_server) {
    // Safety: (caller) NULL or live, freed only here.
    unsafe { free_handle(server) }
}

/// Handles one HTTP request to the MCP endpoint: `method` (`"POST"`, `"GET"`, `"DELETE"`, …),
/// `path` (NULL: not checked; a query string is ignored), every header, and the whole body.
/// `*out_response` receives the answer (its views valid until the next non-`const` call on
/// the server).
///
/// When `has_stream` is set, the request produced events: drain `mcpw_http_server_poll_event`
/// and answer what you can at once, then call `mcpw_http_server_settle` for the final form
/// of the response (a JSON body when the whole answer is ready), send it, and drain the
/// stream, if it still is one, with `mcpw_http_server_poll_stream`. Inputs are read during
/// the call only.
///
/// # Safety
/// `server` is NULL or a live server handle; `method`, `path` and `body` point to their
/// lengths in readable bytes (or are NULL with length 0); `headers` points to `headers_len`
/// readable headers (or is NULL with 0), none of them (nor `body`) memory this server lent
/// (copy a session id from `mcpw_http_server_session_id` before sending it back as a header:
/// a DELETE frees it); `out_response` is NULL or writable.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_handle_request(
    server: *mut mcpw_http_server,
    now_ns: u64,
    method: *const c_char,
    method_len: usize,
    path: *const c_char,
    path_len: usize,
    headers: *const mcpw_http_header,
    headers_len: usize,
    body: *const u8,
    body_len: usize,
    out_response: *mut mcpw_http_response,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_response) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let method = unsafe { text_in(method, method_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let path = unsafe { optional_bytes_in(path, path_len) }?;
        // Safety: (caller) readable headers.
        let headers = unsafe { headers_in(headers, headers_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let body = unsafe { bytes_in(body, body_len) }?;
        let wrong_path = match (&h.endpoint, path) {
            (Some(endpoint), Some(path)) => {
                let path = path.split(|&b| b == b'?').next().unwrap_or_default();
                path != endpoint.as_bytes()
            }
            _ => false,
        };
        let response = if wrong_path {
            HttpResponse {
                status: 404,
                headers: Vec::new(),
                body: Body::Empty,
            }
        } else {
            let pairs = header_pairs(&headers);
            let request = HttpRequest {
                method,
                headers: &pairs,
                body,
            };
            let (random, user) = (h.random, h.random_user);
            let mut fill = |buf: &mut [u8]| {
                // Safety: the host's callback, given a writable buffer of that length.
                host_callback(|| unsafe { random(user, buf.as_mut_ptr(), buf.len()) })
            };
            h.server.handle_request(at(now_ns), &request, &mut fill)
        };
        out.write(h.lend_response(response));
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Gives the final form of the stream response that `mcpw_http_server_handle_request` just
/// returned for `stream`, once you answered what its events allow at once: a plain JSON body
/// when the whole answer is there (with the status a 2026-07-28 error maps to), else the SSE
/// response unchanged. Call it once per stream response, before the next request.
/// `MCPW_ERR_UNKNOWN_STREAM` when no response of `stream` waits.
///
/// # Safety
/// `server` is NULL or a live server handle; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_settle(
    server: *mut mcpw_http_server,
    stream: u64,
    out_response: *mut mcpw_http_response,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_response) }?;
        let pending = match h.pending.take() {
            Some(r) if r.body == Body::Stream(HttpStreamId(stream)) => r,
            other => {
                h.pending = other;
                return Err(MCPW_ERR_UNKNOWN_STREAM);
            }
        };
        let settled = h.server.settle(pending);
        let lent = h.lend_response(settled);
        // Settled responses are not settled again.
        h.pending = None;
        out.write(lent);
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Lends the bytes waiting on SSE `stream`: write them to the response body, report how many
/// were written with `mcpw_http_server_consume_stream`, and end the response once
/// `*out_finished` is set and nothing is left. A poll that finds a stream finished with
/// nothing left (`*out_len` 0) lets it go at once: end the response; there is nothing to
/// consume, and later calls for `stream` find it gone. `*out_open` is false (and nothing is lent)
/// for a stream the host no longer holds: it ended, its client went away, it was closed for
/// polling, or a `Last-Event-ID` GET took it over (that response got a new stream id). With
/// no bytes yet, wait (suspend the response) until the next input, command
/// or timer, then ask again. The bytes stay valid until the next non-`const` call on the
/// server.
///
/// # Safety
/// `server` is NULL or a live server handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_poll_stream(
    server: *mut mcpw_http_server,
    stream: u64,
    out_bytes: *mut *const u8,
    out_len: *mut usize,
    out_finished: *mut bool,
    out_open: *mut bool,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let (bytes_to, len_to, finished_to, open_to) = unsafe {
            (
                Out::new(out_bytes)?,
                Out::new(out_len)?,
                Out::new(out_finished)?,
                Out::new(out_open)?,
            )
        };
        // Streams the server let go without a last consume (their client left unreported,
        // say) leave their entries: collected once they could be most of the map.
        if h.stream_lent.len() > 2 * h.server.open_streams() + 32 {
            let server = &h.server;
            h.stream_lent
                .retain(|&id, _| server.holds_stream(HttpStreamId(id)));
        }
        let (bytes, finished, open) = match h.server.poll_stream(HttpStreamId(stream)) {
            Some(o) => (o.bytes, o.finished, true),
            None => (&[][..], false, false),
        };
        if bytes.is_empty() {
            h.stream_lent.remove(&stream);
        } else {
            h.stream_lent.insert(stream, bytes.len());
        }
        bytes_to.write(bytes_out(bytes));
        len_to.write(bytes.len());
        finished_to.write(finished);
        open_to.write(open);
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// The next stream whose output may have changed since it was last named here: it got bytes,
/// finished, was closed for polling, ended with its session, or was taken over by a
/// `Last-Event-ID` GET (its old response ends). `*out_has` is false when
/// there is none. Use it in a host that suspends one response per SSE stream (a suspended
/// libmicrohttpd connection, a goroutine, a coroutine): after each call into the server (and
/// after answering on lent views), resume just the streams this names, which then ask
/// `mcpw_http_server_poll_stream`, instead of resuming every open stream after every request
/// (with a thousand clients listening on their GET streams, that made each request 18 times
/// dearer). Drain it to the end each time, also after a stream's own poll: a stream is named
/// once until taken, so one left untaken is not named again. Answers given on lent views are
/// moved to their streams first. A host that never calls it loses nothing.
///
/// # Safety
/// `server` is NULL or a live server handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_poll_woken(
    server: *mut mcpw_http_server,
    out_has: *mut bool,
    out_stream: *mut u64,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let (has_to, stream_to) = unsafe { (Out::new(out_has)?, Out::new(out_stream)?) };
        h.server.pump();
        let woken = h.server.poll_woken();
        has_to.write(woken.is_some());
        stream_to.write(woken.map_or(0, |id| id.0));
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Reports that the first `n` bytes lent by `mcpw_http_server_poll_stream` for `stream` were
/// written (the bytes lent by its last poll; a write in parts may report each part, in
/// order, as long as the bytes are not read after the first report). More
/// than was lent and not yet reported is `MCPW_ERR_CONSUME_TOO_MUCH`, consuming nothing;
/// zero does nothing.
///
/// # Safety
/// `server` is NULL or a live server handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_consume_stream(
    server: *mut mcpw_http_server,
    stream: u64,
    n: usize,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Checked against what was lent, not against what waits now: asking the server again
        // moved answers given since onto the stream (a larger `n` passed, and bytes never
        // written counted as sent), and ended the recording of a response not yet settled.
        let lent = h.stream_lent.get(&stream).copied().unwrap_or(0);
        if n > lent {
            return Err(MCPW_ERR_CONSUME_TOO_MUCH);
        }
        if n == 0 {
            return Ok(());
        }
        if n == lent {
            h.stream_lent.remove(&stream);
        } else {
            h.stream_lent.insert(stream, lent - n);
        }
        h.server.consume_stream(HttpStreamId(stream), n);
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Reports that the client went away from `stream` (the connection closed before the stream
/// finished). 2026-07-28: that cancels its request. In a session, its events stay stored for
/// a `Last-Event-ID` resumption, and what the stream held back for the session's other
/// streams moves on at once: resume those `mcpw_http_server_poll_woken` names. An unknown
/// stream does nothing.
///
/// # Safety
/// `server` is NULL or a live server handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_stream_closed(
    server: *mut mcpw_http_server,
    now_ns: u64,
    stream: u64,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        h.stream_lent.remove(&stream);
        h.server.stream_closed(at(now_ns), HttpStreamId(stream));
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Gives up on every stream for good, for a host whose shutdown grace is over and that is
/// about to end all its responses: every request still awaited on a stream gets an error
/// answer (-32603) there, so that its client learns at once that no answer will come (a
/// stateless request's client cannot resume it). Write what the streams then hold
/// (`mcpw_http_server_poll_woken` names them; each finishes with its answer) before ending
/// the responses. `*out_answered` (may be NULL) is how many requests were answered.
///
/// # Safety
/// `server` is NULL or a live server handle; `out_answered` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_abandon_streams(
    server: *mut mcpw_http_server,
    out_answered: *mut usize,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        let answered = h.server.abandon_streams();
        if !out_answered.is_null() {
            // Safety: (caller) writable when not NULL.
            unsafe { out_answered.write(answered) };
        }
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Fires every timer due at `now_ns`: request timeouts of every connection and the expiry of
/// idle sessions. Call it when the deadline of `mcpw_http_server_poll_timeout` passes.
///
/// # Safety
/// `server` is NULL or a live server handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_handle_timeout(
    server: *mut mcpw_http_server,
    now_ns: u64,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        h.server.handle_timeout(at(now_ns));
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Reads the earliest deadline of the server (any connection's timer, any session's
/// expiry): as `mcpw_conn_poll_timeout`. Use it as your event loop's poll timeout.
///
/// # Safety
/// `server` is NULL or a live server handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_poll_timeout(
    server: *const mcpw_http_server,
    out_has: *mut bool,
    out_deadline_ns: *mut u64,
) -> mcpw_result {
    let run = |h: &mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let (has_to, deadline_to) = unsafe { (Out::new(out_has)?, Out::new(out_deadline_ns)?) };
        // Commands given through views since the server's last non-const call may have
        // brought their connections' deadlines earlier: the server looks at those again.
        for &key in h.touched.borrow().iter() {
            h.server.note_commands(ConnKey::from_raw(key));
        }
        let deadline = h.server.poll_timeout();
        has_to.write(deadline.is_some());
        deadline_to.write(deadline.map_or(0, Timestamp::as_nanos));
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_ref(server, run) }
}

/// The next event of any connection: `*out_event` as `mcpw_conn_poll_event` gives it (kind
/// `MCPW_EVENT_NONE` when there is none), `*out_key` the connection it came from (keep it to
/// address that session later), and `*out_conn` a view of that connection for answering it
/// with the `mcpw_conn_*` commands. The event's views and the connection view stay valid
/// until the next non-`const` call on the server; `mcpw_http_server_conn` lends the view
/// again later. Poll until `MCPW_EVENT_NONE` after every request, command and timer.
///
/// # Safety
/// `server` is NULL or a live server handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_poll_event(
    server: *mut mcpw_http_server,
    out_event: *mut mcpw_event,
    out_key: *mut u64,
    out_conn: *mut *mut mcpw_conn,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let (event_to, key_to, conn_to) = unsafe {
            (
                Out::new(out_event)?,
                Out::new(out_key)?,
                Out::new(out_conn)?,
            )
        };
        let Some((key, event)) = h.server.poll_event() else {
            h.texts.release_large();
            event_to.write(mcpw_event::NONE);
            key_to.write(0);
            conn_to.write(std::ptr::null_mut());
            return Ok(());
        };
        let event = to_c(event, &mut h.texts);
        let view = h.lend(key.as_raw())?;
        event_to.write(event);
        key_to.write(key.as_raw());
        conn_to.write(view);
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Lends a view of connection `key` (from `mcpw_http_server_poll_event`) for the
/// `mcpw_conn_*` commands and getters: answer a request later, send progress, a log or a
/// request of your own to that session. `MCPW_ERR_UNKNOWN_CONNECTION` when it is gone.
///
/// This call keeps the server's other views valid, even when it is refused (the current
/// event's, and the views of other connections lent since the last other call: each
/// connection has a view of its own).
/// The view stays valid until the next other non-`const` call on the server; after using it,
/// drain `mcpw_http_server_poll_stream` on the streams you hold. Never free it.
///
/// # Safety
/// `server` is NULL or a live server handle; `out_conn` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_conn(
    server: *mut mcpw_http_server,
    key: u64,
    out_conn: *mut *mut mcpw_conn,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Refused or not, this call changes nothing on the server: the views lent so far
        // stay valid (a refusal made them stale, and an answer given through one of them
        // then failed).
        h.lending = true;
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_conn) }?;
        out.write(h.lend(key)?);
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Reads the session id of connection `key` into `*out_session`: NULL (length 0) for a
/// stateless 2026-07-28 request. The view is valid until the next non-`const` call on the
/// server. `MCPW_ERR_UNKNOWN_CONNECTION` when it is gone.
///
/// # Safety
/// `server` is NULL or a live server handle; `out_session` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_session_id(
    server: *const mcpw_http_server,
    key: u64,
    out_session: *mut mcpw_str,
) -> mcpw_result {
    let run = |h: &mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_session) }?;
        let key = ConnKey::from_raw(key);
        if !h.server.contains(key) {
            return Err(MCPW_ERR_UNKNOWN_CONNECTION);
        }
        out.write(mcpw_str::of_opt(h.server.session_of(key)));
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_ref(server, run) }
}

/// Reads how many sessions are alive and how many streams are open: for metrics, and to
/// see that a shutdown has let every stream go.
///
/// # Safety
/// `server` is NULL or a live server handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_counts(
    server: *const mcpw_http_server,
    out_sessions: *mut usize,
    out_streams: *mut usize,
) -> mcpw_result {
    let run = |h: &mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let (sessions, streams) = unsafe { (Out::new(out_sessions)?, Out::new(out_streams)?) };
        sessions.write(h.server.sessions());
        streams.write(h.server.open_streams());
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_ref(server, run) }
}

/// 2025-11-25 sessions (SEP-1699): closes the SSE stream carrying the peer's request `*id`
/// on connection `key` before its answer, so a long-running request holds no HTTP connection;
/// the client resumes it with `Last-Event-ID` and gets the answer then. `*out_closed` is
/// false (nothing changed) when no such stream is open or its client cannot resume
/// (stateless requests, older versions). Drain the stream to its end afterwards.
///
/// # Safety
/// `server` is NULL or a live server handle; `id` is NULL or readable (its string readable for
/// its length); `out_closed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_close_stream_for_polling(
    server: *mut mcpw_http_server,
    key: u64,
    id: *const mcpw_id,
    out_closed: *mut bool,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_closed) }?;
        // Safety: (caller) readable, or NULL, which is refused.
        let id = unsafe { id_in(id) }?;
        let string = id.string.map(<[u8]>::to_vec);
        let id = id_of(id.kind, id.integer, string.as_deref())?;
        out.write(
            h.server
                .close_stream_for_polling(ConnKey::from_raw(key), id),
        );
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// `tools` as JSON, when it is a tools array or an object that holds one (a `tools/list`
/// result): anything else would declare nothing.
fn tools_list(tools: &[u8]) -> Result<mcpwire::jsonrpc::RawJson<'_>, mcpw_result> {
    let tools = super::boundary::json(tools)?;
    let list = if tools.is_object() {
        tools.get_unique("tools").ok().flatten()
    } else {
        Some(tools)
    };
    if !list.is_some_and(|l| l.get().trim_start().starts_with('[')) {
        return Err(MCPW_ERR_JSON_WRONG_TYPE);
    }
    Ok(tools)
}

/// Says which tools of `tools` (a `tools/list` result or its `tools` array, as JSON text) an
/// HTTP server would refuse, and why: call it after `mcpw_http_server_new` or
/// `mcpw_http_server_declare_tools` returned `MCPW_ERR_CONFIG_REFUSED` for the same tools, to
/// log or show what to fix, or before declaring them, as a check. It changes nothing.
///
/// Writes a JSON array with one object per refused tool, `{"name": ..., "reason": ...}` (the reason
/// is English text), or `[]` when every tool would be accepted. The length in bytes goes to
/// `*out_len`; the text is written to `out_text` only when it fits in `capacity`, followed by a NUL
/// when there is room: otherwise call again with room for `*out_len + 1` bytes.
/// `MCPW_ERR_INVALID_UTF8`, `MCPW_ERR_INVALID_JSON` or `MCPW_ERR_JSON_WRONG_TYPE` for what is not a
/// tools list. `[]` after a refusal means the refusal had another cause (the config is not a
/// server's).
///
/// # Safety
/// `tools` points to `tools_len` readable bytes (or is NULL with length 0); `out_text` points
/// to `capacity` writable bytes (or is NULL with `capacity` 0); `out_len` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_tools_refusals(
    tools: *const c_char,
    tools_len: usize,
    out_text: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) `out_text` holds `capacity` writable bytes or is NULL with
        // `capacity` 0; `out_len` is writable or NULL, which is refused.
        let out = unsafe { TextOut::new(out_text, capacity, out_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let tools = unsafe { bytes_in(chars_as_bytes(tools), tools_len) }?;
        let refused = mcpwire::http::headers::ToolHeaders::new().declare(tools_list(tools)?);
        let mut text = Vec::with_capacity(2 + refused.len() * 96);
        text.push(b'[');
        for (i, (name, why)) in refused.iter().enumerate() {
            if i > 0 {
                text.push(b',');
            }
            text.extend_from_slice(b"{\"name\":");
            mcpwire::jsonrpc::write_json_string(&mut text, name);
            text.extend_from_slice(b",\"reason\":");
            mcpwire::jsonrpc::write_json_string(&mut text, &why.to_string());
            text.push(b'}');
        }
        text.push(b']');
        out.write(&text);
        Ok(())
    })
}

/// Declares the server's tools anew while it runs, as `tools` in `mcpw_http_server_options`
/// does at its start (a `tools/list` result or its `tools` array, as JSON text): call it when
/// they change, before sending `notifications/tools/list_changed`, so that 2026-07-28
/// `tools/call` requests are checked against the `x-mcp-header` annotations of the tools as
/// they now are. The tools declared before are replaced. `MCPW_ERR_CONFIG_REFUSED` when a
/// tool's annotations are invalid (clients drop such a tool: fix its schema); the others are
/// declared all the same. `MCPW_ERR_INVALID_UTF8`, `MCPW_ERR_INVALID_JSON` or
/// `MCPW_ERR_JSON_WRONG_TYPE` for what is not a tools list, and nothing changes. Inputs are
/// read during the call only.
///
/// # Safety
/// `server` is NULL or a live server handle; `tools` points to `tools_len` readable bytes (or
/// is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_declare_tools(
    server: *mut mcpw_http_server,
    tools: *const c_char,
    tools_len: usize,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let tools = unsafe { bytes_in(tools.cast(), tools_len) }?;
        if h.server.declare_tools(tools_list(tools)?).is_empty() {
            Ok(())
        } else {
            Err(MCPW_ERR_CONFIG_REFUSED)
        }
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

/// Ends every stream that only waits for server messages, gracefully (at shutdown): each
/// 2026-07-28 `subscriptions/listen` stream gets its result, and each handshake-era
/// session's GET stream is finished; both end once drained (they are woken). `*out_count`
/// says how many were ended.
///
/// # Safety
/// `server` is NULL or a live server handle; `out_count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_server_end_listen_streams(
    server: *mut mcpw_http_server,
    out_count: *mut usize,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_server| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_count) }?;
        out.write(h.server.end_listen_streams());
        Ok(())
    };
    // Safety: (caller) NULL or a live server handle.
    unsafe { with_mut(server, run) }
}

// ---- Client -------------------------------------------------------------------------------

/// Settings for `mcpw_http_client_new`; zero-initialize it (or pass NULL) for the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mcpw_http_client_options {
    /// The first delay before resuming a broken stream when the server sent no `retry`.
    /// 0: 500 ms.
    pub initial_delay_ms: u64,
    /// The longest resumption delay (each attempt doubles the last). 0: 30 s.
    pub max_delay_ms: u64,
    /// Resumptions tried per stream before its requests fail. 0: 5. The session's GET
    /// stream, which carries no request, is then still opened again once per longest delay
    /// while the session lasts.
    pub max_attempts: u32,
    /// Open the session's standalone GET stream once a handshake-era session is ready, for
    /// server messages that belong to no request.
    pub open_get_stream: bool,
}

/// Reads the options at `p` field by field, the flag as a byte: a `bool` field C filled with
/// another value (`memset`, or a binding that writes an int) is not a Rust `bool`, so copying
/// the struct whole would be undefined behaviour. Any non-zero byte means true.
///
/// # Safety
/// `p` is readable for a `mcpw_http_client_options`.
unsafe fn client_options_in(p: NonNull<mcpw_http_client_options>) -> mcpw_http_client_options {
    let p = p.as_ptr();
    // Safety: (caller) readable; each read copies one field of plain bytes.
    unsafe {
        mcpw_http_client_options {
            initial_delay_ms: std::ptr::addr_of!((*p).initial_delay_ms).read(),
            max_delay_ms: std::ptr::addr_of!((*p).max_delay_ms).read(),
            max_attempts: std::ptr::addr_of!((*p).max_attempts).read(),
            open_get_stream: std::ptr::addr_of!((*p).open_get_stream).cast::<u8>().read() != 0,
        }
    }
}

/// What `mcpw_http_client_poll_action` asks of the host.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_http_action_kind {
    /// Nothing to do now.
    MCPW_HTTP_ACTION_NONE = 0,
    /// Make the HTTP request `method` with `headers` and `body` to the MCP endpoint, then
    /// report its outcome for `exchange`.
    MCPW_HTTP_ACTION_SEND = 1,
    /// Stop reading the response of `exchange` and close it; report nothing more for it. It
    /// comes for a cancelled 2026-07-28 request, for the exchanges of an expired session, for
    /// the session's GET stream when the session ends or the connection closes, for an
    /// exchange with nothing to wait for that got no response head within 10 s, and for a
    /// stream the server keeps open two seconds after every request it carried ended.
    MCPW_HTTP_ACTION_ABORT = 2,
}

/// One action for the host; the views are valid until the next non-`const` call on the
/// client, so hand them to your HTTP library (which copies them) at once.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_http_action {
    /// What to do.
    pub kind: mcpw_http_action_kind,
    /// The exchange the outcome is reported for.
    pub exchange: u64,
    /// `POST`, `GET` or `DELETE` (SEND only).
    pub method: mcpw_str,
    /// Every header to send (SEND only).
    pub headers: *const mcpw_http_header,
    /// How many headers.
    pub headers_len: usize,
    /// The body (SEND only; NULL with length 0 for none).
    pub body: *const u8,
    /// The body's length.
    pub body_len: usize,
}

/// An MCP client over Streamable HTTP, both eras: it says which HTTP requests to make and
/// reads their responses (JSON or SSE, with resumption). Create it with
/// `mcpw_http_client_new`, free it with `mcpw_http_client_free`. One thread at a time.
pub struct mcpw_http_client {
    client: HttpClient,
    poisoned: Cell<bool>,
    view: NonNull<mcpw_conn>,
    lending: bool,
    texts: EventTexts,
    action_headers: Vec<mcpw_http_header>,
}

impl Handle for mcpw_http_client {
    fn poisoned(&self) -> &Cell<bool> {
        &self.poisoned
    }
    fn on_panic(&self) {
        // Safety: the view is ours, and C is not using it during a call on the client.
        unsafe { &mut *self.view.as_ptr() }.stale();
    }
    fn after_call(&mut self) {
        if !std::mem::take(&mut self.lending) {
            // Safety: the view is ours, and C is not using it during a call on the client.
            unsafe { self.view.as_mut() }.stale();
        }
    }
}

impl Drop for mcpw_http_client {
    fn drop(&mut self) {
        // Safety: made by `Box::leak` in `mcpw_http_client_new`, dropped only here.
        drop(unsafe { Box::from_raw(self.view.as_ptr()) });
    }
}

/// Creates an HTTP client for `config` (client role; its era setting decides between a
/// 2026-07-28 probe and `initialize`). Its first POST is ready at once: drain
/// `mcpw_http_client_poll_action` next. `options` may be NULL for the defaults.
///
/// On success `*out_client` receives a handle that the caller owns and frees exactly once
/// with `mcpw_http_client_free`.
///
/// # Safety
/// `config` is NULL or a live config handle; `options` is NULL or readable; `out_client` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_new(
    config: *const mcpw_config,
    now_ns: u64,
    options: *const mcpw_http_client_options,
    out_client: *mut *mut mcpw_http_client,
) -> mcpw_result {
    let run = |c: &mcpw_config| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_client) }?;
        let o = match optional(options) {
            // Safety: (caller) readable.
            Some(p) => unsafe { client_options_in(p) },
            None => mcpw_http_client_options::default(),
        };
        if c.config().role != mcpwire::conn::Role::Client {
            return Err(MCPW_ERR_CONFIG_REFUSED);
        }
        let mut policy = ReconnectPolicy::default();
        if o.initial_delay_ms > 0 {
            policy.initial_delay = Duration::from_millis(o.initial_delay_ms);
        }
        if o.max_delay_ms > 0 {
            policy.max_delay = Duration::from_millis(o.max_delay_ms);
        }
        if o.max_attempts > 0 {
            policy.max_attempts = o.max_attempts;
        }
        let client = HttpClient::new(c.config().clone(), at(now_ns), policy, o.open_get_stream)
            .map_err(|_| MCPW_ERR_CONFIG_REFUSED)?;
        let view = NonNull::from(Box::leak(Box::new(mcpw_conn::view())));
        out.write(into_handle(mcpw_http_client {
            client,
            poisoned: Cell::new(false),
            view,
            lending: false,
            texts: EventTexts::default(),
            action_headers: Vec::new(),
        }));
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_ref(config, run) }
}

/// Frees a client, exactly once, with its connection view. NULL does nothing.
///
/// # Safety
/// `client` is NULL or a handle from `mcpw_http_client_new` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_free(client: *mut mcpw_http_client) {
    // Safety: (caller) NULL or live, freed only here.
    unsafe { free_handle(client) }
}

/// The next HTTP request to make (or response to abandon): kind `MCPW_HTTP_ACTION_NONE` when
/// there is none. Call it after every input, command and timer, until NONE.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_action` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_poll_action(
    client: *mut mcpw_http_client,
    out_action: *mut mcpw_http_action,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_action) }?;
        let none = mcpw_http_action {
            kind: mcpw_http_action_kind::MCPW_HTTP_ACTION_NONE,
            exchange: 0,
            method: mcpw_str::of_opt(None),
            headers: std::ptr::null(),
            headers_len: 0,
            body: std::ptr::null(),
            body_len: 0,
        };
        let action = match h.client.poll_action() {
            None => none,
            Some(ClientAction::Abort { exchange }) => mcpw_http_action {
                kind: mcpw_http_action_kind::MCPW_HTTP_ACTION_ABORT,
                exchange: exchange.0,
                ..none
            },
            Some(ClientAction::Send {
                exchange,
                method,
                headers,
                body,
            }) => {
                headers_out(headers, &mut h.action_headers);
                mcpw_http_action {
                    kind: mcpw_http_action_kind::MCPW_HTTP_ACTION_SEND,
                    exchange: exchange.0,
                    method: mcpw_str::of(method),
                    headers: h.action_headers.as_ptr(),
                    headers_len: h.action_headers.len(),
                    body: bytes_out(body),
                    body_len: body.len(),
                }
            }
        };
        out.write(action);
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Reports the status and headers of the response to `exchange`, as soon as your HTTP
/// client has them (before the body): the engine decides from them how to read the body.
/// Report the final head only: a 1xx status here (a `101 Switching Protocols` your HTTP
/// library handed over as the response, say) fails the exchange's requests with that status
/// and queues `MCPW_HTTP_ACTION_ABORT` for it.
///
/// # Safety
/// `client` is NULL or a live client handle; `headers` points to `headers_len` readable
/// headers (or is NULL with 0) that are not memory this client lent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_handle_response(
    client: *mut mcpw_http_client,
    now_ns: u64,
    exchange: u64,
    status: u16,
    headers: *const mcpw_http_header,
    headers_len: usize,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        // Safety: (caller) readable headers.
        let headers = unsafe { headers_in(headers, headers_len) }?;
        let pairs = header_pairs(&headers);
        h.client
            .handle_response(at(now_ns), ExchangeId(exchange), status, &pairs);
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Reports bytes of the response body of `exchange` as they arrive, in any chunking (SSE is
/// decoded across chunks, with the last event id kept for resumption); after
/// `mcpw_http_client_handle_response`, and before `mcpw_http_client_handle_end`.
///
/// # Safety
/// `client` is NULL or a live client handle; `bytes` points to `len` readable bytes (or is
/// NULL with length 0) that are not memory this client lent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_handle_body(
    client: *mut mcpw_http_client,
    now_ns: u64,
    exchange: u64,
    bytes: *const u8,
    len: usize,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let bytes = unsafe { bytes_in(bytes, len) }?;
        h.client
            .handle_body(at(now_ns), ExchangeId(exchange), bytes);
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Reports that the response body of `exchange` ended normally. Requests it should have
/// answered are resumed (SSE with an event id, after a delay: see the timeout) or fail.
/// `jitter` is a random number for that delay.
///
/// # Safety
/// `client` is NULL or a live client handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_handle_end(
    client: *mut mcpw_http_client,
    now_ns: u64,
    exchange: u64,
    jitter: u32,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        h.client
            .handle_end(at(now_ns), ExchangeId(exchange), jitter);
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Reports that `exchange` failed (no connection, or it broke): its stream is resumed if it
/// can be, else its requests end at once with a failure event.
///
/// # Safety
/// `client` is NULL or a live client handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_handle_error(
    client: *mut mcpw_http_client,
    now_ns: u64,
    exchange: u64,
    jitter: u32,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        h.client
            .handle_error(at(now_ns), ExchangeId(exchange), jitter);
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// The next event of the client's connection, as `mcpw_conn_poll_event` gives it; after a
/// session expired, the old connection's events come first, then a new session starts
/// (unless the connection was closed, the session ended, or this is the second session in a
/// row to expire before the server took anything of it: the connection then closes).
///
/// # Safety
/// `client` is NULL or a live client handle; `out_event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_poll_event(
    client: *mut mcpw_http_client,
    out_event: *mut mcpw_event,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_event) }?;
        let event = match h.client.poll_event() {
            Some(e) => to_c(e, &mut h.texts),
            None => {
                h.texts.release_large();
                mcpw_event::NONE
            }
        };
        out.write(event);
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Lends a view of the client's connection for the `mcpw_conn_*` commands and getters
/// (`mcpw_conn_request`, `mcpw_conn_respond`, `mcpw_conn_protocol_version`, …); its output is
/// sent through `mcpw_http_client_poll_action`. This call keeps the client's other views
/// valid, even when it is refused; the view stays valid until the next other non-`const` call on the client. Never
/// free it.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_conn` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_conn(
    client: *mut mcpw_http_client,
    out_conn: *mut *mut mcpw_conn,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        // Refused or not, this call changes nothing on the client: its views stay valid.
        h.lending = true;
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_conn) }?;
        // Safety: the view is ours; C uses it only between calls on the client.
        unsafe { h.view.as_mut() }.lend(h.client.connection(), &h.poisoned);
        out.write(h.view.as_ptr());
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Reads the earliest deadline of the client (the connection's timers, resumptions
/// waiting), as `mcpw_conn_poll_timeout`. It is the last time given while work waits that no
/// input or command brought: a new session's `initialize` after a 404, made when the old
/// session's last event was handed out, or the failures of requests made after the session
/// ended. Call `mcpw_http_client_handle_timeout`, then take events and actions as usual.
///
/// # Safety
/// `client` is NULL or a live client handle; each `out_*` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_poll_timeout(
    client: *const mcpw_http_client,
    out_has: *mut bool,
    out_deadline_ns: *mut u64,
) -> mcpw_result {
    let run = |h: &mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let (has_to, deadline_to) = unsafe { (Out::new(out_has)?, Out::new(out_deadline_ns)?) };
        let deadline = h.client.poll_timeout();
        has_to.write(deadline.is_some());
        deadline_to.write(deadline.map_or(0, Timestamp::as_nanos));
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_ref(client, run) }
}

/// Fires what is due at `now_ns`: request timeouts and stream resumptions.
///
/// # Safety
/// `client` is NULL or a live client handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_handle_timeout(
    client: *mut mcpw_http_client,
    now_ns: u64,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        h.client.handle_timeout(at(now_ns));
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Reads the handshake-era session id into `*out_session` (NULL with length 0 before the
/// server gave one, and in 2026-07-28; an id that is not all visible ASCII is never taken).
/// Valid until the next non-`const` call on the client.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_session` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_session_id(
    client: *const mcpw_http_client,
    out_session: *mut mcpw_str,
) -> mcpw_result {
    let run = |h: &mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_session) }?;
        out.write(mcpw_str::of_opt(h.client.session_id()));
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_ref(client, run) }
}

/// Reads the start of the last error response whose body held no JSON-RPC answer (an HTML
/// page from a proxy, a framework's text) into `*out_text`: up to 512 bytes of UTF-8
/// (invalid bytes replaced), trimmed; NULL with length 0 when none came. A request such a
/// response failed reports only its HTTP status (`MCPW_EVENT_FAILED`); show this next to it
/// when telling a person why, escaping control characters (it is the server's text). Valid
/// until the next non-`const` call on the client.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_text` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_failure_text(
    client: *const mcpw_http_client,
    out_text: *mut mcpw_str,
) -> mcpw_result {
    let run = |h: &mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_text) }?;
        out.write(mcpw_str::of_opt(h.client.failure_text()));
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_ref(client, run) }
}

/// Ends the handshake-era session: queues a `DELETE` (drain `mcpw_http_client_poll_action`)
/// so the server frees it at once. `*out_queued` is false without a session, and while
/// `initialize` has no answer yet: the DELETE is then owed, and goes out once that answer
/// brings the session id (`mcpw_http_client_is_ending_session` is true meanwhile). Called
/// before any `initialize` went out (an auto-era `server/discover` probe under way, or no
/// `mcpw_http_client_poll_action` yet), it is false too and no session starts: the
/// `initialize` made later fails unsent and the connection closes
/// (`MCPW_CLOSE_TRANSPORT_FAILED`), unless the server answers the probe in the 2026-07-28
/// era, which has no sessions. Close the connection first (`mcpw_conn_close`) for a clean
/// end. The DELETE's `SEND` comes once the
/// notifications and answers POSTed before it (the close's cancellations) have their
/// response heads, or were let go: keep driving the client while
/// `mcpw_http_client_is_ending_session` says so.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_queued` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_end_session(
    client: *mut mcpw_http_client,
    out_queued: *mut bool,
) -> mcpw_result {
    let run = |h: &mut mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_queued) }?;
        out.write(h.client.end_session().is_some());
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_mut(client, run) }
}

/// Writes whether a notification or answer has not reached the server yet (it went out and
/// has no response head, it is an answer to the server waiting for a place among the 64
/// that run at once, or the connection still holds it while messages wait for the session's
/// GET stream or `initialized` to get its response head, about a second at most), so that
/// what it carries (the close's cancellations, say) may be lost. Before the host exits or
/// frees the client, it keeps driving the client while this is true, timers included,
/// within a bound of its own (a second or two): with a session the DELETE waits for these
/// anyway, but a server without sessions has no DELETE to wait for.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_unheard` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_has_unheard(
    client: *const mcpw_http_client,
    out_unheard: *mut bool,
) -> mcpw_result {
    let run = |h: &mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_unheard) }?;
        out.write(h.client.has_unheard());
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_ref(client, run) }
}

/// Writes whether the session's DELETE (`mcpw_http_client_end_session`) is still to go out
/// or under way: owed to the session that an unanswered `initialize` is about to make,
/// held back for the POSTs sent before it, queued, or sent and not yet ended. False once it
/// ended, failed or was given up (its `ABORT`), and when the session turned
/// out to be gone before it went out (a 404 to another exchange): that DELETE is never
/// sent, so no `SEND` or `ABORT` of it ever comes. A host that ends the session keeps
/// driving the client while this is true, within a bound of its own.
///
/// # Safety
/// `client` is NULL or a live client handle; `out_ending` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_http_client_is_ending_session(
    client: *const mcpw_http_client,
    out_ending: *mut bool,
) -> mcpw_result {
    let run = |h: &mcpw_http_client| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_ending) }?;
        out.write(h.client.is_ending_session());
        Ok(())
    };
    // Safety: (caller) NULL or a live client handle.
    unsafe { with_ref(client, run) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{mcpw_config_free, mcpw_config_new};
    use mcpwire::http::MemoryEventStore;
    use std::ptr;

    /// The engine configuration that `options` give.
    fn configured(options: &mcpw_http_server_options) -> HttpServerConfig {
        let mut config = ptr::null_mut();
        // Safety: the names are readable for their lengths; the out-pointer is writable; the
        // config is live until freed, once, after its last use; `options` holds no pointers.
        unsafe {
            assert_eq!(
                mcpw_config_new(
                    crate::config::mcpw_role::MCPW_ROLE_SERVER as u32,
                    c"t".as_ptr(),
                    1,
                    c"1".as_ptr(),
                    1,
                    &mut config
                ),
                mcpw_result::MCPW_OK
            );
            let made = server_config(&*config, options);
            mcpw_config_free(config);
            made.expect("valid options").0
        }
    }

    /// Zero keeps each bound's default; a number replaces it.
    #[test]
    fn the_event_store_bounds_reach_the_engine() {
        // Safety: every field of the options is a number, a nullable pointer or an
        // `Option` of a function pointer, for which all zero bits are valid (NULL, `None`).
        let mut options: mcpw_http_server_options = unsafe { std::mem::zeroed() };
        let c = configured(&options);
        assert_eq!(
            (c.event_store, c.event_store_bytes),
            (256, MemoryEventStore::DEFAULT_BYTES_PER_SESSION)
        );
        options.event_store = 16;
        options.event_store_bytes = 64 * 1024;
        let c = configured(&options);
        assert_eq!((c.event_store, c.event_store_bytes), (16, 64 * 1024));
    }

    unsafe extern "C" fn zeros(_: *mut c_void, buf: *mut u8, len: usize) {
        // Safety: (engine) `buf` is writable for `len` bytes.
        unsafe { ptr::write_bytes(buf, 0, len) }
    }

    /// A server with default options and random bytes that are all zero; free it with
    /// `mcpw_http_server_free`.
    fn new_server() -> *mut mcpw_http_server {
        // Safety: every field of the options is a number, a nullable pointer or an `Option`
        // of a function pointer, for which all zero bits are valid; the names are readable
        // for their lengths; the out-pointers are writable; the config is freed once, after
        // the server was made from it.
        unsafe {
            let mut options: mcpw_http_server_options = std::mem::zeroed();
            options.random = Some(zeros);
            let mut config = ptr::null_mut();
            let role = crate::config::mcpw_role::MCPW_ROLE_SERVER as u32;
            let name = c"t".as_ptr();
            assert_eq!(
                mcpw_config_new(role, name, 1, name, 1, &mut config),
                mcpw_result::MCPW_OK
            );
            let mut server = ptr::null_mut();
            assert_eq!(
                mcpw_http_server_new(config, &options, &mut server),
                mcpw_result::MCPW_OK
            );
            mcpw_config_free(config);
            server
        }
    }

    /// A large complete body lent once is let go with the next response that has none: its
    /// capacity was kept for the server's life.
    #[test]
    fn a_large_lent_body_is_let_go() {
        // Safety: the server lives until freed, once, after its last use.
        unsafe {
            let server = new_server();
            for body in [Body::Empty, Body::Stream(HttpStreamId(1))] {
                let big = HttpResponse {
                    status: 200,
                    headers: Vec::new(),
                    body: Body::Complete("application/json", vec![b' '; 1 << 20]),
                };
                let lent = (*server).lend_response(big);
                assert_eq!(lent.body_len, 1 << 20);
                let none = HttpResponse {
                    status: 202,
                    headers: Vec::new(),
                    body,
                };
                let lent = (*server).lend_response(none);
                assert_eq!(lent.body_len, 0);
                assert_eq!((*server).lent_body.capacity(), 0);
            }
            mcpw_http_server_free(server);
        }
    }

    /// What the server lent streams it has since let go (a host that never reported a
    /// client gone, say) does not pile up: a poll collects it once it could be most of the
    /// map.
    #[test]
    fn the_bytes_lent_to_streams_let_go_are_collected() {
        // Safety: the out-pointers are writable; the server lives until freed, once, after
        // its last use.
        unsafe {
            let server = new_server();
            let (mut bytes, mut len, mut finished, mut open) = (ptr::null(), 0, false, false);
            let mut poll = |stream| {
                let rc = mcpw_http_server_poll_stream(
                    server,
                    stream,
                    &mut bytes,
                    &mut len,
                    &mut finished,
                    &mut open,
                );
                assert_eq!(rc, mcpw_result::MCPW_OK);
            };
            (*server)
                .stream_lent
                .extend((1000..1032).map(|id| (id, 10)));
            poll(7);
            assert_eq!((*server).stream_lent.len(), 32, "not yet");
            (*server).stream_lent.insert(1032, 10);
            poll(7);
            assert!((*server).stream_lent.is_empty());
            mcpw_http_server_free(server);
        }
    }
}
