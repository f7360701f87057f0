//! The HTTP half of the `c_abi` target: `mcpw_http_server_*` and `mcpw_http_client_*` driven as
//! a C host drives them, mistakes included. An input of the `c_abi` target that starts with
//! [`HTTP_MARKER`] comes here (the rest of the bytes are read with `arbitrary`).
//!
//! An HTTP client and an HTTP server handle are wired together by the harness (the client's
//! requests, possibly altered, go to the server; the server's answers and stream bytes go back),
//! while raw requests, stray stream ids and keys, NULL arguments, stale and misused connection
//! views, early and late calls are mixed in. Invariants checked on every call:
//!
//! - no call panics (`MCPW_ERR_PANIC`) or reports a poisoned handle;
//! - every result is one the header documents for that call;
//! - every lent view is readable for its length (read in full; the sanitizers watch);
//! - a connection view refuses every call with `MCPW_ERR_STALE_VIEW` once its lender was
//!   called since, and the transport calls with `MCPW_ERR_NOT_OWNER` while fresh;
//!   `mcpw_conn_free` on a view does nothing;
//! - consuming more than a stream lent is `MCPW_ERR_CONSUME_TOO_MUCH` and consumes nothing;
//! - statuses are HTTP statuses; the server's deadline never lies in the past of a call that
//!   just handled it;
//! - a host event store sees its events replayed in order;
//! - every request id `mcpw_conn_request` returns on the client's view ends exactly once (an
//!   answer, an error, a failure, a time-out, abandonment...), its progress comes before its
//!   end, no event names an id never returned, and none is lost: at the end, with every
//!   exchange failed and time run past every deadline, none is still waiting.

use std::ffi::{c_char, c_void};
use std::ptr;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire_ffi::mcpw_result::{self, *};
use mcpwire_ffi::{
    mcpw_config, mcpw_config_free, mcpw_config_new, mcpw_config_set_capabilities,
    mcpw_config_set_client_era, mcpw_config_set_versions, mcpw_conn, mcpw_conn_free,
    mcpw_conn_handle_input, mcpw_conn_notify, mcpw_conn_poll_event, mcpw_conn_progress,
    mcpw_conn_request, mcpw_conn_respond, mcpw_conn_respond_error, mcpw_conn_state,
    mcpw_conn_transmit, mcpw_event, mcpw_event_kind, mcpw_event_store, mcpw_http_action,
    mcpw_http_action_kind, mcpw_http_client, mcpw_http_client_conn, mcpw_http_client_end_session,
    mcpw_http_client_failure_text, mcpw_http_client_free, mcpw_http_client_handle_body,
    mcpw_http_client_handle_end, mcpw_http_client_handle_error, mcpw_http_client_handle_response,
    mcpw_http_client_handle_timeout, mcpw_http_client_has_unheard, mcpw_http_client_new,
    mcpw_http_client_options, mcpw_http_client_poll_action, mcpw_http_client_poll_event,
    mcpw_http_client_poll_timeout, mcpw_http_client_session_id, mcpw_http_header,
    mcpw_http_response, mcpw_http_server, mcpw_http_server_close_stream_for_polling,
    mcpw_http_server_conn, mcpw_http_server_consume_stream, mcpw_http_server_counts,
    mcpw_http_server_end_listen_streams, mcpw_http_server_free, mcpw_http_server_handle_request,
    mcpw_http_server_handle_timeout, mcpw_http_server_new, mcpw_http_server_options,
    mcpw_http_server_poll_event, mcpw_http_server_poll_stream, mcpw_http_server_poll_timeout,
    mcpw_http_server_poll_woken, mcpw_http_server_session_id, mcpw_http_server_settle,
    mcpw_http_server_stream_closed, mcpw_id, mcpw_replay_sink, mcpw_request_options, mcpw_role,
    mcpw_state, mcpw_str,
};

use super::{Blob, Rng};

/// The first byte of a `c_abi` input that selects this harness.
pub const HTTP_MARKER: u8 = 0xFF;

const METHODS: &[&str] = &["POST", "GET", "DELETE", "PUT", "", "post"];
const PATHS: &[&str] = &["/mcp", "/mcp?x=1", "/", "/other", ""];
const HEADER_NAMES: &[&str] = &[
    "Host",
    "Origin",
    "Content-Type",
    "Accept",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Last-Event-ID",
    "Mcp-Param-Text",
];
const HEADER_VALUES: &[&str] = &[
    "127.0.0.1:8080",
    "localhost",
    "evil.example",
    "http://evil.example",
    "application/json",
    "application/json, text/event-stream",
    "2026-07-28",
    "2025-11-25",
    "2025-03-26",
    "1999-01-01",
    "tools/call",
    "tools/list",
    "echo",
    "1-1",
    "0",
    "",
    "\u{e9}",
];
const BODIES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#,
    r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
    r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
    "{",
    "",
];
const RESULTS: &[&str] = &[
    r#"{"content":[{"type":"text","text":"ok"}]}"#,
    r#"{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}"#,
    "{}",
    "[1]",
    "nope",
];
const CLIENT_METHODS: &[&str] = &[
    "tools/list",
    "tools/call",
    "ping",
    "prompts/list",
    "x/y",
    "",
];

/// How the harness is set up.
#[derive(Arbitrary, Debug)]
struct HttpSetup {
    /// Serve only the handshake era.
    legacy: bool,
    /// The client's era: 0 auto, 1 legacy, 2 modern; others are refused.
    client_era: u8,
    /// Check the path against "/mcp".
    endpoint: bool,
    /// Accept "evil.example" besides loopback.
    allow_evil: bool,
    /// A host event store instead of the built-in one.
    host_store: bool,
    /// Small limits (bodies of 1 KiB), so refusals happen.
    small: bool,
    /// Open the client's standalone GET stream.
    open_get: bool,
    /// Seeds the harness's own choices.
    seed: u16,
}

/// One step.
#[derive(Arbitrary, Debug)]
enum HttpOp {
    /// Take the client's next action; SEND goes to the server (`alter` changes it first).
    Exchange { alter: u8 },
    /// A request the harness makes up.
    Raw {
        method: u8,
        path: u8,
        headers: Vec<(u8, u8)>,
        body: u8,
        blob: Option<Blob>,
    },
    /// Drain a server stream into the client (`how`: partial, all, too much).
    Stream { which: u8, how: u8 },
    /// The client of a stream went away.
    Vanish { which: u8 },
    /// Answer the server's events through its views.
    Serve,
    /// Time passes (`ms` × 8 ms, so sessions expire after a run of these), then both handles'
    /// timers run.
    Wait { ms: u8 },
    /// The client view sends something.
    ClientCommand { method: u8, params: u8 },
    /// A view is used after its lender was called again; transport calls on views.
    MisuseViews { key: u64 },
    /// Calls with stray keys and stream ids.
    Stray { key: u64, stream: u64 },
    /// NULL where the header requires a pointer.
    Nulls,
    /// Polling close and listen ends.
    CloseForPolling { key: u8, id: i64 },
    /// The client ends its session.
    EndSession,
    /// Reports on the client.
    ClientReports,
}

/// A stream the server holds and the exchange of the client it goes to.
struct Held {
    stream: u64,
    exchange: Option<u64>,
}

/// The host event store: events by (session, stream), in order.
#[derive(Default)]
struct Store {
    events: Vec<(Vec<u8>, u64, u64, Vec<u8>)>,
}

unsafe extern "C" fn store_append(
    user: *mut c_void,
    session: *const c_char,
    session_len: usize,
    stream: u64,
    event: u64,
    bytes: *const u8,
    len: usize,
) {
    // Safety: `user` is the harness's `Store`; the views are readable for their lengths.
    let store = unsafe { &mut *user.cast::<Store>() };
    let session = unsafe { std::slice::from_raw_parts(session.cast::<u8>(), session_len) };
    let bytes = unsafe { std::slice::from_raw_parts(bytes, len) };
    // Numbers increase per stream, and are unique per session while one server holds it
    // (the harness restores no session from a shared store); across streams they are not
    // in order (a request's stream stores its events once first drained).
    let mut of_session = store.events.iter().filter(|(s, ..)| s == session);
    assert!(
        of_session.all(|(_, st, e, _)| *e != event && (*st != stream || *e < event)),
        "event {event} of stream {stream}: numbers must be unique per session (none restored here) and increase per stream"
    );
    store
        .events
        .push((session.to_vec(), stream, event, bytes.to_vec()));
    if store.events.len() > 4096 {
        store.events.remove(0);
    }
}

unsafe extern "C" fn store_replay(
    user: *mut c_void,
    session: *const c_char,
    session_len: usize,
    stream: u64,
    after: u64,
    sink: mcpw_replay_sink,
    sink_ctx: *mut c_void,
) -> std::ffi::c_int {
    // Safety: as in `store_append`.
    let store = unsafe { &mut *user.cast::<Store>() };
    let session = unsafe { std::slice::from_raw_parts(session.cast::<u8>(), session_len) };
    for (s, st, e, bytes) in &store.events {
        if s == session && *st == stream && *e > after {
            // Safety: the server's sink, during the replay call.
            unsafe { sink(sink_ctx, bytes.as_ptr(), bytes.len()) };
        }
    }
    0
}

unsafe extern "C" fn store_forget(user: *mut c_void, session: *const c_char, session_len: usize) {
    // Safety: as in `store_append`.
    let store = unsafe { &mut *user.cast::<Store>() };
    let session = unsafe { std::slice::from_raw_parts(session.cast::<u8>(), session_len) };
    store.events.retain(|(s, ..)| s != session);
}

unsafe extern "C" fn random(user: *mut c_void, buf: *mut u8, len: usize) {
    // Safety: `user` is the harness's counter; `buf` is writable for `len`.
    let counter = unsafe { &mut *user.cast::<u64>() };
    let out = unsafe { std::slice::from_raw_parts_mut(buf, len) };
    for b in out {
        *counter = counter.wrapping_mul(6364136223846793005).wrapping_add(1);
        *b = (*counter >> 33) as u8;
    }
}

fn s(text: &str) -> mcpw_str {
    mcpw_str {
        ptr: text.as_ptr().cast(),
        len: text.len(),
    }
}

/// Reads a lent view in full (the sanitizers check it is readable).
fn read(ptr: *const u8, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    assert!(!ptr.is_null(), "a non-empty view with a NULL pointer");
    // Safety: the library lends `len` readable bytes until the next mutating call.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

fn read_str(v: mcpw_str) -> Vec<u8> {
    read(v.ptr.cast(), v.len)
}

fn ok(rc: mcpw_result, what: &str) {
    assert_eq!(rc, MCPW_OK, "{what}");
}

fn not_broken(rc: mcpw_result, what: &str) {
    assert!(
        rc != MCPW_ERR_PANIC && rc != MCPW_ERR_POISONED,
        "{what}: {rc:?}"
    );
}

/// Copies a lent header array.
fn headers_of(ptr: *const mcpw_http_header, len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    if len == 0 {
        return Vec::new();
    }
    assert!(!ptr.is_null());
    // Safety: `len` headers lent until the next mutating call.
    let hs = unsafe { std::slice::from_raw_parts(ptr, len) };
    hs.iter()
        .map(|h| (read_str(h.name), read_str(h.value)))
        .collect()
}

/// How far one input got, for the test that checks the seeds and random inputs go deep.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reached {
    /// Responses with a 2xx status.
    pub ok_responses: usize,
    /// Requests answered through a server view.
    pub served: usize,
    /// Stream bytes handed to the client.
    pub stream_bytes: usize,
    /// Stale views refused.
    pub stale_refused: usize,
    /// Events the client's application saw.
    pub client_events: usize,
}

/// A client request on its way to the server: exchange, method, headers, body.
type Pending = (u64, String, Vec<(String, String)>, Vec<u8>);

/// The headers a correct client sends with `body`: Host, Accept, Content-Type, and for a
/// 2026-07-28 request its version, method and name headers.
fn well_formed_headers(body: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(body);
    let mut hs = vec![
        ("Host".to_owned(), "localhost:1".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("Content-Type".to_owned(), "application/json".to_owned()),
    ];
    if text.contains("2026-07-28") {
        hs.push(("MCP-Protocol-Version".into(), "2026-07-28".into()));
        if let Some(m) = ["tools/call", "tools/list"]
            .iter()
            .find(|m| text.contains(*m))
        {
            hs.push(("Mcp-Method".into(), (*m).into()));
        }
        if text.contains("\"name\":\"echo\"") {
            hs.push(("Mcp-Name".into(), "echo".into()));
        }
    }
    hs
}

struct Harness {
    reached: Reached,
    rng: Rng,
    now: u64,
    server: *mut mcpw_http_server,
    client: *mut mcpw_http_client,
    store: Box<Store>,
    counter: Box<u64>,
    held: Vec<Held>,
    /// Client exchanges waiting to go to the server: (exchange, method, headers, body).
    queue: Vec<Pending>,
    keys: Vec<u64>,
    peer_ids: Vec<(u64, i64)>,
    /// Client exchanges whose answer a proxy replaces with an HTML error page.
    proxy_pages: Vec<u64>,
    /// Request ids the client's view returned, and the event that ended each.
    issued: Vec<i64>,
    ended: std::collections::HashMap<i64, mcpw_event_kind>,
}

/// The event kinds that end one of our requests.
fn ends_request(kind: mcpw_event_kind) -> bool {
    use mcpw_event_kind::*;
    matches!(
        kind,
        MCPW_EVENT_RESPONSE
            | MCPW_EVENT_ERROR
            | MCPW_EVENT_TIMED_OUT
            | MCPW_EVENT_ABANDONED
            | MCPW_EVENT_INPUT_REQUIRED
            | MCPW_EVENT_INVALID_RESPONSE
            | MCPW_EVENT_FAILED
            | MCPW_EVENT_TASK_CREATED
            | MCPW_EVENT_URL_ELICITATION_REQUIRED
    )
}

impl Harness {
    fn new(setup: &HttpSetup) -> Harness {
        let mut config: *mut mcpw_config = ptr::null_mut();
        // Safety (all FFI calls below): valid pointers and lengths, handles live.
        unsafe {
            ok(
                mcpw_config_new(
                    mcpw_role::MCPW_ROLE_SERVER as u32,
                    b"f".as_ptr().cast(),
                    1,
                    b"1".as_ptr().cast(),
                    1,
                    &mut config,
                ),
                "server config",
            );
            let caps = r#"{"tools":{},"logging":{}}"#;
            ok(
                mcpw_config_set_capabilities(config, caps.as_ptr().cast(), caps.len()),
                "capabilities",
            );
            if setup.legacy {
                let v = [s("2025-03-26"), s("2025-06-18"), s("2025-11-25")];
                ok(
                    mcpw_config_set_versions(config, v.as_ptr(), v.len()),
                    "versions",
                );
            }
        }
        let mut store = Box::<Store>::default();
        let mut counter = Box::new(u64::from(setup.seed));
        let hooks = mcpw_event_store {
            user: (&mut *store as *mut Store).cast(),
            append: Some(store_append),
            replay: Some(store_replay),
            forget: Some(store_forget),
        };
        let evil = [s("evil.example")];
        let options = mcpw_http_server_options {
            random: Some(random),
            random_user: (&mut *counter as *mut u64).cast(),
            endpoint: if setup.endpoint {
                s("/mcp")
            } else {
                mcpw_str {
                    ptr: ptr::null(),
                    len: 0,
                }
            },
            allowed_hosts: if setup.allow_evil {
                evil.as_ptr()
            } else {
                ptr::null()
            },
            allowed_hosts_len: if setup.allow_evil { 1 } else { 0 },
            session_idle_timeout_ms: 5000,
            max_sessions: if setup.small { 2 } else { 0 },
            max_body: if setup.small { 1024 } else { 0 },
            event_store: if setup.small { 4 } else { 0 },
            event_store_bytes: if setup.small { 2048 } else { 0 },
            retry_ms: 0,
            keepalive_ms: if setup.small { 1000 } else { 0 },
            tools: s(r#"{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}"#),
            events: if setup.host_store {
                &hooks
            } else {
                ptr::null()
            },
        };
        let mut server: *mut mcpw_http_server = ptr::null_mut();
        // Safety: as above.
        unsafe {
            ok(
                mcpw_http_server_new(config, &options, &mut server),
                "server",
            );
            mcpw_config_free(config);
        }
        let mut cconfig: *mut mcpw_config = ptr::null_mut();
        let mut client: *mut mcpw_http_client = ptr::null_mut();
        // Safety: as above.
        unsafe {
            ok(
                mcpw_config_new(
                    mcpw_role::MCPW_ROLE_CLIENT as u32,
                    b"c".as_ptr().cast(),
                    1,
                    b"1".as_ptr().cast(),
                    1,
                    &mut cconfig,
                ),
                "client config",
            );
            let rc = mcpw_config_set_client_era(cconfig, u32::from(setup.client_era));
            assert!(
                rc == MCPW_OK || rc == MCPW_ERR_INVALID_ARGUMENT,
                "client era: {rc:?}"
            );
            let copts = mcpw_http_client_options {
                initial_delay_ms: 10,
                max_delay_ms: 100,
                max_attempts: 2,
                open_get_stream: setup.open_get,
            };
            ok(
                mcpw_http_client_new(cconfig, 0, &copts, &mut client),
                "client",
            );
            mcpw_config_free(cconfig);
        }
        Harness {
            reached: Reached::default(),
            rng: Rng::new(u64::from(setup.seed)),
            now: 0,
            server,
            client,
            store,
            counter,
            held: Vec::new(),
            queue: Vec::new(),
            keys: Vec::new(),
            peer_ids: Vec::new(),
            proxy_pages: Vec::new(),
            issued: Vec::new(),
            ended: std::collections::HashMap::new(),
        }
    }

    /// Takes the client's events (up to `max`), checking how our requests end.
    fn client_events(&mut self, max: usize) {
        for _ in 0..max {
            let mut ev = std::mem::MaybeUninit::<mcpw_event>::uninit();
            // Safety: the client is live; the event is written on success and its views
            // read before the next call.
            let ev = unsafe {
                ok(
                    mcpw_http_client_poll_event(self.client, ev.as_mut_ptr()),
                    "client poll_event",
                );
                ev.assume_init()
            };
            read_str(ev.result);
            read_str(ev.message);
            if ev.kind == mcpw_event_kind::MCPW_EVENT_NONE {
                break;
            }
            self.reached.client_events += 1;
            if ends_request(ev.kind) || ev.kind == mcpw_event_kind::MCPW_EVENT_PROGRESS {
                assert!(
                    self.issued.contains(&ev.request),
                    "{:?} for request {}, which was never returned",
                    ev.kind,
                    ev.request
                );
                if let Some(before) = self.ended.get(&ev.request) {
                    panic!(
                        "{:?} for request {} after it ended with {before:?}",
                        ev.kind, ev.request
                    );
                }
            }
            if ends_request(ev.kind) {
                self.ended.insert(ev.request, ev.kind);
            }
        }
    }

    /// The end: every exchange still out fails (as a host's connection errors would), the
    /// client's retries too, and time runs past every deadline; then no request is waiting.
    fn finish(&mut self) {
        for _ in 0..64 {
            while self.take_action(1) {}
            for (exchange, ..) in std::mem::take(&mut self.queue) {
                // Safety: the client is live.
                ok(
                    unsafe { mcpw_http_client_handle_error(self.client, self.now, exchange, 0) },
                    "handle_error at the end",
                );
            }
            for held in std::mem::take(&mut self.held) {
                // Safety: both handles are live.
                unsafe {
                    ok(
                        mcpw_http_server_stream_closed(self.server, self.now, held.stream),
                        "stream closed at the end",
                    );
                    if let Some(exchange) = held.exchange {
                        ok(
                            mcpw_http_client_handle_error(self.client, self.now, exchange, 0),
                            "handle_error at the end",
                        );
                    }
                }
            }
            self.client_events(usize::MAX);
            if self.issued.iter().all(|id| self.ended.contains_key(id)) {
                return;
            }
            let (mut has, mut at) = (false, 0u64);
            // Safety: the client is live.
            ok(
                unsafe { mcpw_http_client_poll_timeout(self.client, &mut has, &mut at) },
                "client poll_timeout",
            );
            self.now = if has { at.max(self.now) } else { self.now } + 1_000_000_000;
            // Safety: the client is live.
            ok(
                unsafe { mcpw_http_client_handle_timeout(self.client, self.now) },
                "client timeout",
            );
        }
        let waiting: Vec<i64> = (self.issued.iter())
            .filter(|id| !self.ended.contains_key(id))
            .copied()
            .collect();
        assert!(waiting.is_empty(), "requests that never ended: {waiting:?}");
    }

    /// Feeds one request to the server and, for a stream, answers its events and settles it.
    fn request(
        &mut self,
        method: &str,
        path: Option<&str>,
        headers: &[(String, String)],
        body: &[u8],
        exchange: Option<u64>,
    ) {
        let hs: Vec<mcpw_http_header> = headers
            .iter()
            .map(|(n, v)| mcpw_http_header {
                name: s(n),
                value: s(v),
            })
            .collect();
        let mut resp = std::mem::MaybeUninit::<mcpw_http_response>::uninit();
        let (pp, pl) = path.map_or((ptr::null(), 0), |p| (p.as_ptr().cast::<c_char>(), p.len()));
        // Safety: valid views of the stated lengths; the server is live.
        let rc = unsafe {
            mcpw_http_server_handle_request(
                self.server,
                self.now,
                method.as_ptr().cast(),
                method.len(),
                pp,
                pl,
                if hs.is_empty() {
                    ptr::null()
                } else {
                    hs.as_ptr()
                },
                hs.len(),
                if body.is_empty() {
                    ptr::null()
                } else {
                    body.as_ptr()
                },
                body.len(),
                resp.as_mut_ptr(),
            )
        };
        if rc == MCPW_ERR_INVALID_UTF8 {
            return; // a method that is not UTF-8
        }
        ok(rc, "handle_request");
        // Safety: written on success.
        let mut resp = unsafe { resp.assume_init() };
        if resp.has_stream {
            assert_ne!(resp.stream, 0);
            let stream = resp.stream;
            self.serve();
            // Safety: the server is live; `resp` is writable.
            ok(
                unsafe { mcpw_http_server_settle(self.server, stream, &mut resp) },
                "settle",
            );
        }
        assert!((100..600).contains(&resp.status), "status {}", resp.status);
        let status = resp.status;
        if (200..300).contains(&status) {
            self.reached.ok_responses += 1;
        }
        let (mut has_stream, stream) = (resp.has_stream, resp.stream);
        let mut headers = headers_of(resp.headers, resp.headers_len);
        let mut body = if has_stream {
            Vec::new()
        } else {
            read(resp.body, resp.body_len)
        };
        let mut status = status;
        let proxied = exchange.and_then(|ex| self.proxy_pages.iter().position(|&p| p == ex));
        if let Some(i) = proxied {
            // A proxy in between answers with an HTML page instead (padded with whitespace,
            // sometimes longer than the 512 bytes the client keeps of it).
            self.proxy_pages.swap_remove(i);
            if has_stream {
                // Safety: the server is live.
                let rc = unsafe { mcpw_http_server_stream_closed(self.server, self.now, stream) };
                ok(rc, "stream closed by the proxy");
                has_stream = false;
            }
            status = 502;
            headers = vec![(b"Content-Type".to_vec(), b"text/html".to_vec())];
            let filler = "Bad Gateway é ".repeat(1 + self.rng.below(64));
            body = format!("\n  <html><body>{filler}</body></html>  \r\n").into_bytes();
        }
        if has_stream {
            // A stream response is settled once; the views above died with this call.
            let mut again = std::mem::MaybeUninit::<mcpw_http_response>::uninit();
            // Safety: the server is live; `again` is writable.
            let rc = unsafe { mcpw_http_server_settle(self.server, stream, again.as_mut_ptr()) };
            assert_eq!(rc, MCPW_ERR_UNKNOWN_STREAM);
        }
        let Some(exchange) = exchange else {
            if has_stream {
                self.held.push(Held {
                    stream,
                    exchange: None,
                });
            }
            return;
        };
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        let hs: Vec<mcpw_http_header> = pairs
            .iter()
            .map(|(n, v)| mcpw_http_header {
                name: s(n),
                value: s(v),
            })
            .collect();
        // Safety: the client is live; views valid for the call.
        unsafe {
            ok(
                mcpw_http_client_handle_response(
                    self.client,
                    self.now,
                    exchange,
                    status,
                    hs.as_ptr(),
                    hs.len(),
                ),
                "handle_response",
            );
            if has_stream {
                self.held.push(Held {
                    stream,
                    exchange: Some(exchange),
                });
            } else {
                ok(
                    mcpw_http_client_handle_body(
                        self.client,
                        self.now,
                        exchange,
                        body.as_ptr(),
                        body.len(),
                    ),
                    "handle_body",
                );
                ok(
                    mcpw_http_client_handle_end(
                        self.client,
                        self.now,
                        exchange,
                        self.rng.next() as u32,
                    ),
                    "handle_end",
                );
            }
        }
    }

    /// Answers every server event through the lent views.
    fn serve(&mut self) {
        for _ in 0..256 {
            let mut ev = std::mem::MaybeUninit::<mcpw_event>::uninit();
            let mut key = 0u64;
            let mut conn: *mut mcpw_conn = ptr::null_mut();
            // Safety: the server is live; outputs writable.
            ok(
                unsafe {
                    mcpw_http_server_poll_event(self.server, ev.as_mut_ptr(), &mut key, &mut conn)
                },
                "poll_event",
            );
            // Safety: written on success.
            let ev = unsafe { ev.assume_init() };
            if ev.kind == mcpw_event_kind::MCPW_EVENT_NONE {
                return;
            }
            assert!(!conn.is_null() && key != 0);
            read_str(ev.method);
            read_str(ev.params);
            if !self.keys.contains(&key) {
                self.keys.push(key);
            }
            if ev.kind != mcpw_event_kind::MCPW_EVENT_REQUEST {
                continue;
            }
            if ev.id.kind == 1 {
                self.peer_ids.push((key, ev.id.integer));
            }
            let id: mcpw_id = ev.id;
            // A const call between the lending and the command keeps the view; what the
            // command does still counts at the next poll_timeout (whose debug builds check
            // the server's deadlines against a scan of every connection: a request made
            // through a view after a poll_timeout was left out, and never timed out).
            let between = self.rng.below(2) == 0;
            if between {
                self.poll_server_timeout();
            }
            let choice = self.rng.below(6);
            // Safety: `conn` is the fresh view; `id` views the current event, which the
            // commands copy before use.
            let rc = unsafe {
                match choice {
                    0 => {
                        let r = RESULTS[self.rng.below(RESULTS.len())];
                        mcpw_conn_respond(conn, &id, r.as_ptr().cast(), r.len())
                    }
                    1 => mcpw_conn_respond_error(
                        conn,
                        &id,
                        -32602,
                        b"bad".as_ptr().cast(),
                        3,
                        ptr::null(),
                        0,
                    ),
                    2 => mcpw_conn_progress(conn, &id, 1.0, 2.0, true, ptr::null(), 0),
                    3 => MCPW_OK, // answered later, or never
                    4 => {
                        // A request of the server's own, due soon (refused in 2026-07-28).
                        let options = mcpw_request_options {
                            timeout_ms: 1 + self.rng.below(40) as u64,
                            progress: 0,
                            reset_on_progress: 0,
                        };
                        let mut rid = 0i64;
                        let rc = mcpw_conn_request(
                            conn,
                            self.now,
                            b"ping".as_ptr().cast(),
                            4,
                            ptr::null(),
                            0,
                            &options,
                            &mut rid,
                        );
                        not_broken(rc, "a request through a server view");
                        let r = RESULTS[0];
                        mcpw_conn_respond(conn, &id, r.as_ptr().cast(), r.len())
                    }
                    _ => {
                        let r = RESULTS[0];
                        mcpw_conn_respond(conn, &id, r.as_ptr().cast(), r.len())
                    }
                }
            };
            not_broken(rc, "a command on a server view");
            if rc == MCPW_OK && choice != 3 {
                self.reached.served += 1;
            }
            assert_ne!(rc, MCPW_ERR_STALE_VIEW, "a fresh view was refused");
            if between {
                self.poll_server_timeout();
            }
        }
    }

    /// The server's `poll_timeout` (const: the views lent so far stay valid), which must
    /// succeed (in debug builds the engine checks its deadlines there).
    fn poll_server_timeout(&mut self) {
        let (mut has, mut at) = (false, 0u64);
        // Safety: the server is live; outputs writable.
        ok(
            unsafe { mcpw_http_server_poll_timeout(self.server, &mut has, &mut at) },
            "server poll_timeout between a view's lending and its command",
        );
    }

    fn stream(&mut self, which: u8, how: u8) {
        // The streams named since the last look: each is a stream id, and the list ends.
        for taken in 0.. {
            let (mut has, mut named) = (true, u64::MAX);
            // Safety: the server is live; outputs writable.
            ok(
                unsafe { mcpw_http_server_poll_woken(self.server, &mut has, &mut named) },
                "poll_woken",
            );
            if !has {
                assert_eq!(
                    named, 0,
                    "poll_woken named a stream and said there was none"
                );
                break;
            }
            assert!(named != 0 && taken < 100_000, "poll_woken does not end");
        }
        if self.held.is_empty() {
            return;
        }
        let i = usize::from(which) % self.held.len();
        let stream = self.held[i].stream;
        let (mut bytes, mut len, mut finished, mut open) = (ptr::null(), 0usize, false, false);
        // Safety: the server is live; outputs writable.
        ok(
            unsafe {
                mcpw_http_server_poll_stream(
                    self.server,
                    stream,
                    &mut bytes,
                    &mut len,
                    &mut finished,
                    &mut open,
                )
            },
            "poll_stream",
        );
        if !open {
            assert_eq!(len, 0);
            let held = self.held.remove(i);
            if let Some(ex) = held.exchange {
                // Safety: the client is live.
                ok(
                    unsafe { mcpw_http_client_handle_end(self.client, self.now, ex, 1) },
                    "end",
                );
            }
            return;
        }
        let data = read(bytes, len);
        let n = match how % 4 {
            0 => len,
            1 => len / 2,
            2 => len + 1,
            _ => 0,
        };
        // Safety: the server is live.
        let rc = unsafe { mcpw_http_server_consume_stream(self.server, stream, n) };
        if n > len {
            assert_eq!(rc, MCPW_ERR_CONSUME_TOO_MUCH);
            return;
        }
        ok(rc, "consume_stream");
        self.reached.stream_bytes += n;
        if let Some(ex) = self.held[i].exchange {
            // Safety: the client is live; `data` is ours.
            ok(
                unsafe {
                    mcpw_http_client_handle_body(self.client, self.now, ex, data.as_ptr(), n)
                },
                "handle_body",
            );
        }
    }

    /// Takes the client's next action: false when there is none.
    fn take_action(&mut self, alter: u8) -> bool {
        let mut action = std::mem::MaybeUninit::<mcpw_http_action>::uninit();
        // Safety: the client is live.
        ok(
            unsafe { mcpw_http_client_poll_action(self.client, action.as_mut_ptr()) },
            "poll_action",
        );
        // Safety: written on success.
        let a = unsafe { action.assume_init() };
        match a.kind {
            mcpw_http_action_kind::MCPW_HTTP_ACTION_NONE => return false,
            mcpw_http_action_kind::MCPW_HTTP_ACTION_ABORT => {
                if let Some(i) = self
                    .held
                    .iter()
                    .position(|h| h.exchange == Some(a.exchange))
                {
                    let held = self.held.remove(i);
                    // Safety: the server is live.
                    ok(
                        unsafe {
                            mcpw_http_server_stream_closed(self.server, self.now, held.stream)
                        },
                        "closed",
                    );
                }
            }
            mcpw_http_action_kind::MCPW_HTTP_ACTION_SEND => {
                let method = String::from_utf8_lossy(&read_str(a.method)).into_owned();
                let mut headers: Vec<(String, String)> = headers_of(a.headers, a.headers_len)
                    .into_iter()
                    .map(|(n, v)| {
                        (
                            String::from_utf8_lossy(&n).into_owned(),
                            String::from_utf8_lossy(&v).into_owned(),
                        )
                    })
                    .collect();
                let mut body = read(a.body, a.body_len);
                headers.push(("Host".into(), "127.0.0.1:1".into()));
                // Now and then the request is damaged on the way.
                match (alter / 4) % 16 {
                    1 if !headers.is_empty() => {
                        let k = self.rng.below(headers.len());
                        headers.remove(k);
                    }
                    2 if !body.is_empty() => {
                        let k = self.rng.below(body.len());
                        body[k] ^= 0x20;
                    }
                    3 => headers.push(("Origin".into(), "http://evil.example".into())),
                    4 => self.proxy_pages.push(a.exchange),
                    _ => {}
                }
                self.queue.push((a.exchange, method, headers, body));
            }
        }
        true
    }

    fn apply(&mut self, op: &HttpOp) {
        match op {
            HttpOp::Exchange { alter } => {
                // Take every action the client has, then deliver them (all in order, or one
                // at random, leaving the rest for later).
                for _ in 0..16 {
                    if !self.take_action(*alter) {
                        break;
                    }
                }
                let rounds = if alter % 4 == 0 { 1 } else { self.queue.len() };
                for _ in 0..rounds {
                    if self.queue.is_empty() {
                        break;
                    }
                    let i = if alter % 4 == 0 {
                        self.rng.below(self.queue.len())
                    } else {
                        0
                    };
                    let (ex, method, headers, body) = self.queue.remove(i);
                    self.request(&method, Some("/mcp"), &headers, &body, Some(ex));
                }
            }
            HttpOp::Raw {
                method,
                path,
                headers,
                body,
                blob,
            } => {
                let m = METHODS[usize::from(*method) % METHODS.len()];
                let p = PATHS[usize::from(*path) % PATHS.len()];
                let mut hs: Vec<(String, String)> = headers
                    .iter()
                    .take(12)
                    .map(|(n, v)| {
                        (
                            HEADER_NAMES[usize::from(*n) % HEADER_NAMES.len()].to_owned(),
                            HEADER_VALUES[usize::from(*v) % HEADER_VALUES.len()].to_owned(),
                        )
                    })
                    .collect();
                let b: Vec<u8> = match blob {
                    Some(Blob(bytes)) => bytes.clone(),
                    None => BODIES[usize::from(*body) % BODIES.len()]
                        .as_bytes()
                        .to_vec(),
                };
                if headers.is_empty() && blob.is_none() {
                    // A well-formed request: the headers its body calls for.
                    hs = well_formed_headers(&b);
                }
                let path = if *path == 255 { None } else { Some(p) };
                self.request(m, path, &hs, &b, None);
            }
            HttpOp::Stream { which, how } => self.stream(*which, *how),
            HttpOp::Vanish { which } => {
                if !self.held.is_empty() {
                    let i = usize::from(*which) % self.held.len();
                    let held = self.held.remove(i);
                    // Safety: handles live.
                    unsafe {
                        ok(
                            mcpw_http_server_stream_closed(self.server, self.now, held.stream),
                            "closed",
                        );
                        if let Some(ex) = held.exchange {
                            ok(
                                mcpw_http_client_handle_error(self.client, self.now, ex, 7),
                                "handle_error",
                            );
                        }
                    }
                }
            }
            HttpOp::Serve => self.serve(),
            HttpOp::Wait { ms } => {
                self.now += u64::from(*ms) * 8_000_000;
                let (mut has, mut at) = (false, 0u64);
                // Safety: handles live.
                unsafe {
                    ok(
                        mcpw_http_server_handle_timeout(self.server, self.now),
                        "server timeout",
                    );
                    ok(
                        mcpw_http_server_poll_timeout(self.server, &mut has, &mut at),
                        "server poll_timeout",
                    );
                    assert!(
                        !has || at > self.now,
                        "a deadline already handled: {at} <= {}",
                        self.now
                    );
                    ok(
                        mcpw_http_client_handle_timeout(self.client, self.now),
                        "client timeout",
                    );
                    ok(
                        mcpw_http_client_poll_timeout(self.client, &mut has, &mut at),
                        "client poll_timeout",
                    );
                }
                self.serve();
            }
            HttpOp::ClientCommand { method, params } => {
                let mut view: *mut mcpw_conn = ptr::null_mut();
                // Safety: the client is live.
                ok(
                    unsafe { mcpw_http_client_conn(self.client, &mut view) },
                    "client conn",
                );
                let m = CLIENT_METHODS[usize::from(*method) % CLIENT_METHODS.len()];
                let p = RESULTS[usize::from(*params) % RESULTS.len()];
                let mut id = 0i64;
                // Safety: the fresh view; valid views of the stated lengths.
                let rc = unsafe {
                    if *params % 2 == 0 {
                        mcpw_conn_request(
                            view,
                            self.now,
                            m.as_ptr().cast(),
                            m.len(),
                            p.as_ptr().cast(),
                            p.len(),
                            ptr::null(),
                            &mut id,
                        )
                    } else {
                        mcpw_conn_notify(view, m.as_ptr().cast(), m.len(), ptr::null(), 0)
                    }
                };
                not_broken(rc, "a command on the client view");
                assert_ne!(rc, MCPW_ERR_STALE_VIEW);
                if rc == MCPW_OK && *params % 2 == 0 {
                    assert!(!self.issued.contains(&id), "request id {id} returned twice");
                    self.issued.push(id);
                }
                // As the header says: after a command, make the requests it asks for.
                self.apply(&HttpOp::Exchange { alter: 1 });
            }
            HttpOp::MisuseViews { key } => {
                // The client's view: fresh after `_conn`, stale after another client call.
                let mut cview: *mut mcpw_conn = ptr::null_mut();
                let mut state = mcpw_state::MCPW_STATE_OTHER;
                // Safety: the client is live; the view is used only as the header allows.
                unsafe {
                    ok(
                        mcpw_http_client_conn(self.client, &mut cview),
                        "client conn",
                    );
                    ok(
                        mcpw_conn_state(cview, &mut state),
                        "state on a fresh client view",
                    );
                    let (mut b, mut l, mut st) = (ptr::null(), 0usize, 0u64);
                    assert_eq!(
                        mcpw_conn_transmit(cview, &mut b, &mut l, &mut st),
                        MCPW_ERR_NOT_OWNER
                    );
                    // A view's events come from its lender.
                    let mut ev = std::mem::MaybeUninit::<mcpw_event>::zeroed();
                    assert_eq!(
                        mcpw_conn_poll_event(cview, ev.as_mut_ptr()),
                        MCPW_ERR_NOT_OWNER
                    );
                    ok(
                        mcpw_http_client_handle_timeout(self.client, self.now),
                        "client timeout",
                    );
                    assert_eq!(mcpw_conn_state(cview, &mut state), MCPW_ERR_STALE_VIEW);
                    self.reached.stale_refused += 1;
                }
                let key = if self.keys.is_empty() {
                    *key
                } else {
                    self.keys[(*key % self.keys.len() as u64) as usize]
                };
                let mut view: *mut mcpw_conn = ptr::null_mut();
                // Safety: handles live; the view is used only as the header allows.
                unsafe {
                    let rc = mcpw_http_server_conn(self.server, key, &mut view);
                    assert!(
                        rc == MCPW_OK || rc == MCPW_ERR_UNKNOWN_CONNECTION,
                        "conn: {rc:?}"
                    );
                    if rc != MCPW_OK {
                        return;
                    }
                    assert_eq!(
                        mcpw_conn_handle_input(view, self.now, b"{}\n".as_ptr(), 3),
                        MCPW_ERR_NOT_OWNER
                    );
                    let (mut b, mut l, mut st) = (ptr::null(), 0usize, 0u64);
                    assert_eq!(
                        mcpw_conn_transmit(view, &mut b, &mut l, &mut st),
                        MCPW_ERR_NOT_OWNER
                    );
                    let mut ev = std::mem::MaybeUninit::<mcpw_event>::zeroed();
                    assert_eq!(
                        mcpw_conn_poll_event(view, ev.as_mut_ptr()),
                        MCPW_ERR_NOT_OWNER
                    );
                    // A refused lending keeps the views lent so far.
                    let mut other: *mut mcpw_conn = ptr::null_mut();
                    assert_eq!(
                        mcpw_http_server_conn(self.server, u64::MAX, &mut other),
                        MCPW_ERR_UNKNOWN_CONNECTION
                    );
                    mcpw_conn_free(view); // does nothing
                    let mut state = mcpw_state::MCPW_STATE_OTHER;
                    ok(mcpw_conn_state(view, &mut state), "state on a fresh view");
                    // Any other call on the server makes the view stale.
                    let (mut sessions, mut streams) = (0usize, 0usize);
                    ok(
                        mcpw_http_server_counts(self.server, &mut sessions, &mut streams),
                        "counts",
                    );
                    ok(
                        mcpw_conn_state(view, &mut state),
                        "a const call keeps the view",
                    );
                    ok(
                        mcpw_http_server_handle_timeout(self.server, self.now),
                        "timeout",
                    );
                    assert_eq!(mcpw_conn_state(view, &mut state), MCPW_ERR_STALE_VIEW);
                    let r = RESULTS[0];
                    let id = mcpw_id {
                        kind: 1,
                        integer: 1,
                        string: mcpw_str {
                            ptr: ptr::null(),
                            len: 0,
                        },
                    };
                    assert_eq!(
                        mcpw_conn_respond(view, &id, r.as_ptr().cast(), r.len()),
                        MCPW_ERR_STALE_VIEW
                    );
                }
            }
            HttpOp::Stray { key, stream } => {
                let (mut b, mut l, mut f, mut o) = (ptr::null(), 0usize, false, false);
                let mut view: *mut mcpw_conn = ptr::null_mut();
                let mut sid = mcpw_str {
                    ptr: ptr::null(),
                    len: 0,
                };
                // Safety: handles live; stray numbers are just numbers.
                unsafe {
                    ok(
                        mcpw_http_server_poll_stream(
                            self.server,
                            *stream,
                            &mut b,
                            &mut l,
                            &mut f,
                            &mut o,
                        ),
                        "stray poll",
                    );
                    if !o {
                        assert_eq!(
                            mcpw_http_server_consume_stream(self.server, *stream, 1),
                            MCPW_ERR_CONSUME_TOO_MUCH
                        );
                    }
                    ok(
                        mcpw_http_server_stream_closed(self.server, self.now, *stream),
                        "stray closed",
                    );
                    self.held.retain(|h| h.stream != *stream);
                    let rc = mcpw_http_server_conn(self.server, *key, &mut view);
                    assert!(rc == MCPW_OK || rc == MCPW_ERR_UNKNOWN_CONNECTION);
                    let rc = mcpw_http_server_session_id(self.server, *key, &mut sid);
                    assert!(rc == MCPW_OK || rc == MCPW_ERR_UNKNOWN_CONNECTION);
                    read_str(sid);
                    let mut resp = std::mem::MaybeUninit::<mcpw_http_response>::uninit();
                    let rc = mcpw_http_server_settle(self.server, *stream, resp.as_mut_ptr());
                    assert_eq!(rc, MCPW_ERR_UNKNOWN_STREAM);
                    ok(
                        mcpw_http_client_handle_end(self.client, self.now, *key, 0),
                        "stray end",
                    );
                    ok(
                        mcpw_http_client_handle_error(self.client, self.now, *stream, 0),
                        "stray error",
                    );
                }
            }
            HttpOp::Nulls => {
                // Safety: NULL is what the header says these refuse.
                unsafe {
                    assert_eq!(
                        mcpw_http_server_poll_event(
                            self.server,
                            ptr::null_mut(),
                            ptr::null_mut(),
                            ptr::null_mut()
                        ),
                        MCPW_ERR_NULL_ARGUMENT
                    );
                    assert_eq!(
                        mcpw_http_server_counts(ptr::null(), ptr::null_mut(), ptr::null_mut()),
                        MCPW_ERR_NULL_ARGUMENT
                    );
                    assert_eq!(
                        mcpw_http_client_poll_action(self.client, ptr::null_mut()),
                        MCPW_ERR_NULL_ARGUMENT
                    );
                    assert_eq!(
                        mcpw_http_server_handle_request(
                            self.server,
                            self.now,
                            ptr::null(),
                            4,
                            ptr::null(),
                            0,
                            ptr::null(),
                            0,
                            ptr::null(),
                            0,
                            ptr::null_mut()
                        ),
                        MCPW_ERR_NULL_ARGUMENT
                    );
                    let mut resp = std::mem::MaybeUninit::<mcpw_http_response>::uninit();
                    assert_eq!(
                        mcpw_http_server_handle_request(
                            self.server,
                            self.now,
                            b"POST".as_ptr().cast(),
                            4,
                            ptr::null(),
                            0,
                            ptr::null(),
                            3,
                            ptr::null(),
                            0,
                            resp.as_mut_ptr()
                        ),
                        MCPW_ERR_NULL_ARGUMENT
                    );
                    assert_eq!(
                        mcpw_http_client_handle_body(self.client, self.now, 1, ptr::null(), 5),
                        MCPW_ERR_NULL_ARGUMENT
                    );
                    mcpw_http_server_free(ptr::null_mut());
                    mcpw_http_client_free(ptr::null_mut());
                }
            }
            HttpOp::CloseForPolling { key, id } => {
                let key = if self.peer_ids.is_empty() {
                    (u64::from(*key), *id)
                } else {
                    self.peer_ids[usize::from(*key) % self.peer_ids.len()]
                };
                let mid = mcpw_id {
                    kind: 1,
                    integer: key.1,
                    string: mcpw_str {
                        ptr: ptr::null(),
                        len: 0,
                    },
                };
                let (mut closed, mut ended) = (false, 0usize);
                // Safety: handles live.
                unsafe {
                    ok(
                        mcpw_http_server_close_stream_for_polling(
                            self.server,
                            key.0,
                            &mid,
                            &mut closed,
                        ),
                        "close for polling",
                    );
                    ok(
                        mcpw_http_server_end_listen_streams(self.server, &mut ended),
                        "end listen",
                    );
                }
            }
            HttpOp::EndSession => {
                let mut queued = false;
                // Safety: the client is live.
                ok(
                    unsafe { mcpw_http_client_end_session(self.client, &mut queued) },
                    "end_session",
                );
            }
            HttpOp::ClientReports => {
                let mut sid = mcpw_str {
                    ptr: ptr::null(),
                    len: 0,
                };
                // Safety: the client is live.
                unsafe {
                    ok(
                        mcpw_http_client_session_id(self.client, &mut sid),
                        "session_id",
                    );
                    read_str(sid);
                    let mut unheard = false;
                    ok(
                        mcpw_http_client_has_unheard(self.client, &mut unheard),
                        "has_unheard",
                    );
                    let mut text = mcpw_str {
                        ptr: ptr::null(),
                        len: 0,
                    };
                    ok(
                        mcpw_http_client_failure_text(self.client, &mut text),
                        "failure_text",
                    );
                    // What the header promises: NULL with 0 for none; else up to 512 bytes
                    // of UTF-8, trimmed.
                    assert!(!text.ptr.is_null() || text.len == 0, "NULL with a length");
                    let text = String::from_utf8(read_str(text)).expect("failure text is UTF-8");
                    assert!(text.len() <= 512, "{} bytes of failure text", text.len());
                    assert_eq!(text.trim(), text, "failure text not trimmed");
                }
                self.client_events(64);
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Safety: both handles are live and freed once; the store outlives the server.
        unsafe {
            mcpw_http_server_free(self.server);
            mcpw_http_client_free(self.client);
        }
        let _ = (&self.store, &self.counter);
    }
}

/// Runs the HTTP harness on `data` (the bytes after [`HTTP_MARKER`]).
pub fn c_abi_http(data: &[u8]) {
    c_abi_http_reached(data);
}

/// [`c_abi_http`], saying how far the input got.
pub fn c_abi_http_reached(data: &[u8]) -> Reached {
    let mut u = Unstructured::new(data);
    let Ok(setup) = HttpSetup::arbitrary(&mut u) else {
        return Reached::default();
    };
    let mut h = Harness::new(&setup);
    let mut steps = 0;
    while !u.is_empty() && steps < 400 {
        let Ok(op) = HttpOp::arbitrary(&mut u) else {
            break;
        };
        h.apply(&op);
        steps += 1;
    }
    h.finish();
    h.reached
}
