//! The server role of Streamable HTTP.
//!
//! Rules enforced here (the Streamable HTTP transport pages of each version; the index of every
//! rule, its home and its test is docs/rules.md):
//!
//! 1. Host and Origin are checked first; a foreign one gets 403.
//! 2. Handshake era (2025-03-26 … 2025-11-25): POST carries one message (2025-03-26: or a
//!    batch). `initialize` without a session creates one, its id drawn from the host's random
//!    source and returned in `Mcp-Session-Id`; every later request must carry it (400 without,
//!    404 for an unknown or ended one). `MCP-Protocol-Version`, when present, must be a
//!    handshake-era version we serve (400 otherwise; absent, the session's version holds).
//!    Notifications and responses get 202; requests get an SSE stream (or a JSON body when
//!    the answer was immediate) that ends after the response. GET opens the session's stream
//!    for unrelated server messages; GET with `Last-Event-ID` replays that stream's later
//!    events from a bounded store and carries a live stream on, under a response id of its
//!    own: a response still holding the stream (its client gone unnoticed) ends, and gets
//!    nothing more. A finished stream's replay goes out on a response of its own, and the
//!    old number is not taken again. DELETE ends the session. New streams start with a
//!    priming event (an id, empty data) and `retry` in 2025-11-25.
//! 3. Stateless era (2026-07-28): POST only (GET and DELETE get 405), no sessions. The
//!    `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`, `resources/read`,
//!    `prompts/get`, and the tasks methods' `taskId`) `Mcp-Name` headers must match the body,
//!    else 400 with -32020. The engine's
//!    own refusals map to statuses: -32601 → 404, -32600/-32602/-32020/-32021/-32022 → 400. A
//!    client closing the stream cancels the request.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use smallvec::SmallVec;

use super::headers::{self, AnnotationError, ToolHeaders};
use super::kept::{self, KeepLimits, KeptAnswers};
use super::store::{EventStore, MemoryEventStore, SessionStore, StoreUnavailable};

use crate::Timestamp;
use crate::conn::tables::FastMap;
use crate::conn::{Config, Connection, Event, MetaView, State, StreamId};
use crate::frame::sse;
use crate::jsonrpc::{
    self, Decoded, Decoder, DuplicateMember, Id, Message, OwnedId, ParamsIndex, RawJson,
};
use crate::mcp::{self, Era, META_PROTOCOL_VERSION, ProtocolVersion};

/// An HTTP stream the host holds open (one SSE response body). Hosts get it from
/// [`Body::Stream`] and hand it back to [`HttpServer::poll_stream`] and its siblings. It names
/// one response: when a `Last-Event-ID` GET takes over a stream whose first response is still
/// held (the client saw its connection break before the host did), the new response gets a
/// new id and the old one finds nothing more to poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HttpStreamId(pub u64);

/// Which connection an event came from, for answering it with
/// [`HttpServer::connection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnKey(u64);

impl ConnKey {
    /// The key as a number, for hosts (and the C ABI) that keep keys in integer fields.
    /// Keys are never reused by one server; 0 is never a key.
    pub fn as_raw(self) -> u64 {
        self.0
    }

    /// A key from [`as_raw`](Self::as_raw). A number that was never a key of the server
    /// simply finds no connection.
    pub fn from_raw(raw: u64) -> Self {
        ConnKey(raw)
    }
}

/// One incoming HTTP request, as the host parsed it.
#[derive(Clone, Copy, Debug)]
pub struct HttpRequest<'a> {
    /// `GET`, `POST`, `DELETE`, …
    pub method: &'a str,
    /// Every header, names in any case.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

impl HttpRequest<'_> {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// What to send back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// No body.
    Empty,
    /// A complete body with the given content type.
    Complete(&'static str, Vec<u8>),
    /// `text/event-stream`: drain it with [`HttpServer::poll_stream`] until it finishes.
    Stream(HttpStreamId),
}

/// The answer to an HTTP request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Headers to add (content type included).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Body,
}

impl HttpResponse {
    fn empty(status: u16) -> Self {
        HttpResponse {
            status,
            headers: Vec::new(),
            body: Body::Empty,
        }
    }

    fn json(status: u16, body: Vec<u8>) -> Self {
        HttpResponse {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: Body::Complete("application/json", body),
        }
    }

    fn rpc_error(status: u16, id: Option<Id<'_>>, code: i64, message: &str) -> Self {
        let mut body = Vec::new();
        jsonrpc::encode_error(&mut body, id, code, message, None);
        Self::json(status, body)
    }
}

/// Bytes of an SSE stream ready for the host, from [`HttpServer::poll_stream`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOutput<'a> {
    /// The bytes to write now (may be empty).
    pub bytes: &'a [u8],
    /// The stream ends once these bytes are written: close the response.
    pub finished: bool,
}

/// Settings for an [`HttpServer`].
pub struct HttpServerConfig {
    /// The MCP server every connection is created from; its `versions` decide which eras are
    /// served.
    pub server: Config,
    /// Sessions alive at once. Default 1024. At the cap, a new `initialize` evicts the least
    /// recently used idle session (one whose client holds no stream open); only when every
    /// session is busy does it get 503.
    pub max_sessions: usize,
    /// How long a session may sit idle (no request, no stream held open by its client) before
    /// it expires; a request for it then gets 404, and the client starts a new session.
    /// Default 10 minutes. Expiry runs from [`HttpServer::handle_timeout`].
    pub session_idle_timeout: Duration,
    /// The largest POST body accepted; a larger one gets 413. Default 4 MiB. (The host should
    /// also stop reading a body past this size.)
    pub max_body: usize,
    /// The tools' `x-mcp-header` annotations, for checking `Mcp-Param-*` headers on
    /// 2026-07-28 `tools/call` requests. Empty by default; declare the tools with
    /// [`HttpServerConfig::declare_tools`].
    pub tool_headers: ToolHeaders,
    /// Events each session keeps for resumption with `Last-Event-ID` in the default store,
    /// and messages waiting for a session's GET stream while none is open. Default 256.
    ///
    /// This bound and the two below also hold, on their own, the answers the server keeps
    /// aside whatever the store: those of request streams whose client went away before it
    /// had them. A resumption puts back any the store lost to its bounds (a burst of log
    /// messages, say); an answer goes once a response carrying it was written out, or a
    /// resumption shows the client has it. Zero keeps none.
    pub event_store: usize,
    /// Bytes of events each session keeps in the default store, and bytes of messages waiting
    /// for its GET stream: the oldest go past it (the newest always stays). Default
    /// [`MemoryEventStore::DEFAULT_BYTES_PER_SESSION`], 4 MiB.
    pub event_store_bytes: usize,
    /// Bytes of events the default store keeps over all sessions: the oldest of any session
    /// go past it. Default [`MemoryEventStore::DEFAULT_TOTAL_BYTES`], 256 MiB (the per-session
    /// bound times the most sessions would be 4 GiB).
    pub event_store_total_bytes: usize,
    /// Where resumable events live. `None` (the default) uses a [`MemoryEventStore`] of
    /// [`event_store`](Self::event_store) events per session; several server processes
    /// share one by supplying their own [`EventStore`].
    pub events: Option<Box<dyn EventStore>>,
    /// Where sessions live beyond this process. `None` (the default) keeps each session in
    /// the memory of the process that opened it; several server processes behind one address
    /// share a [`SessionStore`] (with a shared [`events`](Self::events) store too) so that any
    /// of them serves any session.
    pub sessions: Option<Box<dyn SessionStore>>,
    /// The first SSE stream id this server hands out (default 1). Stream ids appear in event
    /// ids and key the shared [`EventStore`], so processes sharing one must draw from disjoint
    /// ranges, and so must a process that restarts while its sessions live on in the shared
    /// stores: take a start no process had before from the shared store itself (as
    /// `mcpwire_redis::RedisEventStore::first_stream_id` does), not a fixed number per
    /// replica. Past `u64::MAX`, ids go on from 1.
    pub first_stream_id: u64,
    /// With a shared [`SessionStore`]: the longest a replica goes without touching a session
    /// it serves (default zero: every request touches it). Each touch is a round trip to the
    /// store; with an interval, a session busy on this replica costs one per interval, and a
    /// DELETE made on another replica is noticed here within it (until then this replica
    /// still serves the session). It is held to half of
    /// [`session_idle_timeout`](Self::session_idle_timeout) at most, which the store's expiry
    /// is at least: with a longer one, a session busy on this replica alone expired in the
    /// store, and the other replicas answered its client 404.
    pub shared_touch_interval: Duration,
    /// The `retry` (ms) sent in priming events. Default 1000.
    pub retry_ms: u64,
    /// How often every open SSE stream with nothing waiting gets a comment line (`:`), so
    /// that proxies and clients with idle timeouts do not close a quiet stream (2026-07-28:
    /// "servers are encouraged to periodically emit an SSE comment line ... as a
    /// keep-alive"; clients ignore comments in every era). Default 15 s; `None`: never; at
    /// least 1 ms (zero is taken as that).
    pub keepalive: Option<Duration>,
    /// Decides whether a request's `Host` and `Origin` are acceptable (403 otherwise). The
    /// default, [`loopback_only`], accepts loopback names only (`localhost`, an address of
    /// 127.0.0.0/8, `[::1]` and a bare `::1`, any port), a missing `Host` or `Origin`, and
    /// `Origin: null` (what a browser sends from a `file:` page or a sandboxed frame).
    pub check_origin: OriginCheck,
}

/// Decides from `Host` and `Origin` whether a request may proceed.
pub type OriginCheck = Box<dyn Fn(Option<&str>, Option<&str>) -> bool + Send>;

/// The default Host/Origin check: loopback names only (`localhost`, an address of
/// 127.0.0.0/8, `[::1]`, `::1`, any port); a missing `Host` or `Origin` and `Origin: null`
/// pass too. Use it inside a check of your own that adds names (a proxy's) to these.
pub fn loopback_only(host: Option<&str>, origin: Option<&str>) -> bool {
    fn loopback(authority: &str) -> bool {
        let host = authority
            .rsplit_once(':')
            .filter(|(h, port)| {
                !h.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':')
            })
            .map(|(h, _)| h)
            .unwrap_or(authority);
        // (Host names compare ignoring case: `LOCALHOST` is loopback too.) Every address of
        // 127.0.0.0/8 is loopback: a server bound to 127.0.0.2 prints a URL with that name.
        let literal = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        host.eq_ignore_ascii_case("localhost")
            || literal
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
    let host_ok = host.is_none_or(loopback);
    let origin_ok = origin.is_none_or(|o| {
        o == "null"
            || o.split_once("://")
                .is_some_and(|(_, rest)| loopback(rest.trim_end_matches('/')))
    });
    host_ok && origin_ok
}

impl HttpServerConfig {
    /// Declares the server's tools (a `tools/list` result, or its `tools` array), so that
    /// 2026-07-28 `tools/call` requests are checked against their `x-mcp-header` annotations
    /// (SEP-2243): a value present in the arguments must come in its `Mcp-Param-{Name}` header,
    /// equal once decoded, else 400 with -32020. Returns the tools whose annotations are
    /// invalid (clients drop those tools); fix their schemas.
    pub fn declare_tools(&mut self, tools: RawJson<'_>) -> Vec<(String, AnnotationError)> {
        self.tool_headers.declare(tools)
    }

    /// Defaults around an MCP server configuration.
    pub fn new(server: Config) -> Self {
        HttpServerConfig {
            server,
            max_sessions: 1024,
            session_idle_timeout: Duration::from_secs(600),
            max_body: 4 * 1024 * 1024,
            tool_headers: ToolHeaders::new(),
            event_store: 256,
            event_store_bytes: MemoryEventStore::DEFAULT_BYTES_PER_SESSION,
            event_store_total_bytes: MemoryEventStore::DEFAULT_TOTAL_BYTES,
            events: None,
            sessions: None,
            first_stream_id: 1,
            shared_touch_interval: Duration::ZERO,
            retry_ms: 1000,
            keepalive: Some(Duration::from_secs(15)),
            check_origin: Box::new(loopback_only),
        }
    }
}

/// One SSE stream.
struct Stream {
    conn: ConnKey,
    /// The bytes waiting for the host.
    buf: Vec<u8>,
    read: usize,
    /// Requests whose answers end the stream.
    awaiting: Awaiting,
    /// Ends once `buf` is drained.
    done: bool,
    /// The standalone GET stream of a session (never ends by itself).
    standalone: bool,
    /// Frames (not SSE-encoded) written so far, with their event numbers, kept while the
    /// answer may still be immediate (until the host first drains the stream). Most streams
    /// carry one: its entry needs no allocation of its own.
    frames: SmallVec<[(u64, Vec<u8>); 1]>,
    /// Whether the first of `frames` answers a request (a response, an error or a batch of
    /// them): only such a frame becomes a JSON body, never a lone notification or request
    /// of a stream that ended without its answer (its connection closed).
    first_answers: bool,
    /// Without a session, recorded frames are written as SSE events only when the host
    /// drains the stream (`render`): an answer settled into a JSON body never is. These many
    /// of `frames` are in `buf` already, and `unrendered` bytes are not.
    rendered: usize,
    unrendered: usize,
    /// Whether `frames` is still recorded.
    record: bool,
    /// Its host wrote some of it out, it was closed for polling (its host writes what it
    /// holds, ids included, before it ends), or a client resumed it: the client may hold one
    /// of its event ids, so it can resume it. Answers of a stream it cannot resume are not
    /// kept.
    ids_shown: bool,
    /// Events not yet in the event store: while the answer may still become a plain JSON body
    /// (`record`), its events are kept here, and stored only once the stream is certain to be
    /// SSE (the host drains it, or its client goes away): an answer given as JSON never costs
    /// a store round trip. Nobody has seen these bytes yet, so nothing seen is unstored.
    unstored: Vec<(u64, Vec<u8>)>,
    /// The host's client went away while requests were still awaited (handshake era): the
    /// stream lives on without bytes (its events are in the session's store) until a
    /// `Last-Event-ID` GET takes it over or its last answer is written.
    detached: bool,
    /// The application closed it before its answer (SEP-1699 polling): it finishes once its
    /// bytes are drained, then lives on detached for the client's `Last-Event-ID` GET.
    closing_for_polling: bool,
    /// The error code of the last frame written, when it was a single error answer (the
    /// status of a stateless answer settled into a JSON body).
    error_code: Option<i64>,
    /// In [`HttpServer::woken`], not yet taken by the host.
    woken: bool,
    /// The id the host's response polls it by: the stream's own id, or a fresh one (in
    /// [`HttpServer::aliases`]) once a `Last-Event-ID` GET took it over from a response still
    /// held. Event ids always carry the stream's own id, which is what clients resume.
    handle: HttpStreamId,
}

/// A connection with what the HTTP layer knows about it.
struct Conn {
    conn: Connection,
    /// The session id (handshake era); `None` for a stateless request.
    session: Option<String>,
    /// The session's GET stream.
    standalone: Option<HttpStreamId>,
    /// The last GET stream whose client went away, which a `Last-Event-ID` GET may resume.
    closed_standalone: Option<HttpStreamId>,
    /// Unrelated messages while no GET stream is open, bounded by count and by bytes
    /// ([`HttpServerConfig::event_store`] and [`HttpServerConfig::event_store_bytes`]).
    backlog: VecDeque<Vec<u8>>,
    /// The bytes of `backlog`'s messages.
    backlog_bytes: usize,
    /// (event id, stream, SSE bytes) for resumption.
    next_event: u64,
    /// When the session's client last did something (a request, or letting go of a stream).
    last_active: Timestamp,
    /// Its client's last stream was written out to the end (`consume_stream` and
    /// `poll_stream` take no time): its idle time starts at the next time the host gives, and
    /// it does not expire before (see `HttpServer::clock`).
    unclocked: bool,
    /// When this process last touched the session in the shared [`SessionStore`].
    shared_touched: Timestamp,
    /// When its last touch of the shared store failed ([`StoreUnavailable`]), if it did: the
    /// touch is tried again soon after ([`HttpServer::touch_retry`]), so that the record,
    /// whose expiry still runs from the last touch that went through, does not lapse.
    touch_failed: Option<Timestamp>,
    /// Removed once its last events are handed out: a stateless request whose client went
    /// away (the cancellation), or a connection that closed (`end_closed`; the `Closed` event).
    orphaned: bool,
    /// In `HttpServer::dirty`: it may have output for `pump`.
    in_dirty: bool,
    /// In `HttpServer::eventful`: it may have events for `poll_event`.
    in_eventful: bool,
    /// The event store's code panicked on this connection's output: its events go out
    /// live from then on, unstored (see `HttpServer::pump`).
    store_panicked: bool,
    /// How many of its streams a client holds (not detached): a session with one is busy,
    /// so it does not expire.
    attached: u32,
    /// In `Deadlines::recheck`.
    deadline_noted: Cell<bool>,
    /// Answers its client may not have received, safe from the event store's bounds until
    /// a resumption carries them out.
    kept: Option<Box<KeptAnswers>>,
    /// (finished stream, the response replaying it) for the replays its client may still be
    /// reading: resuming the same stream again ends the earlier one, so that a client
    /// repeating a resumption holds one replay, not one per request. (One pointer inline
    /// rather than a vector's three words: most sessions never resume.)
    #[allow(clippy::box_collection)]
    replays: Option<Box<Vec<(HttpStreamId, HttpStreamId)>>>,
}

/// The connections' deadlines in a lazily updated min-heap, so that
/// [`HttpServer::poll_timeout`] costs the same with ten sessions open or ten thousand (it
/// scanned every connection, after every request).
///
/// The invariant: every connection whose deadline is `d` is in `recheck`, or has its entry
/// `(queued[key], key)` in `heap` with `queued[key] <= d`. A deadline that moves later needs
/// nothing (its entry is fixed when it reaches the top); one that may move earlier is noted
/// in `recheck` (a command or input to the connection, a stream its client lets go of or takes
/// up). Entries whose time is not `queued[key]` are superseded and dropped at the top.
#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<(Timestamp, u64)>>,
    queued: FastMap<u64, Timestamp>,
    recheck: Vec<u64>,
}

impl Deadlines {
    /// Queues `key` at `at` when that is earlier than its queued entry (or it has none).
    fn offer(&mut self, key: u64, at: Option<Timestamp>) {
        let Some(at) = at else { return };
        if self.queued.get(&key).is_none_or(|&q| at < q) {
            self.queued.insert(key, at);
            self.heap.push(Reverse((at, key)));
        }
        // Superseded entries pile up when deadlines keep moving earlier: rebuild from the
        // live ones now and then.
        if self.heap.len() > 2 * self.queued.len() + 64 {
            self.heap = self.queued.iter().map(|(&k, &t)| Reverse((t, k))).collect();
        }
    }
}

/// The server side of Streamable HTTP. See the [module docs](crate::http).
pub struct HttpServer {
    config: HttpServerConfig,
    /// Resumable events of the sessions' streams.
    events: Box<dyn EventStore>,
    /// Sessions shared with other processes, if configured.
    shared: Option<Box<dyn SessionStore>>,
    // Keyed by counters the server assigns, so the fast hasher is safe here.
    conns: FastMap<u64, Box<Conn>>,
    sessions: HashMap<String, u64>,
    streams: FastMap<HttpStreamId, Stream>,
    /// Streams whose output may have changed since the host last took them
    /// ([`poll_woken`](Self::poll_woken)); each at most once while its `woken` is set.
    woken: Vec<HttpStreamId>,
    /// The responses that `Last-Event-ID` GETs took streams over from: [`poll_woken`]
    /// names them once so that their hosts end them (at most [`SUPERSEDED_KEPT`]).
    ///
    /// [`poll_woken`]: Self::poll_woken
    superseded: Vec<HttpStreamId>,
    /// The response ids that differ from their stream's own id (see [`Stream::handle`]),
    /// mapped to the stream. Entries whose stream ended or moved on are dropped once they
    /// outnumber the streams.
    aliases: FastMap<HttpStreamId, HttpStreamId>,
    next_key: u64,
    next_stream: u64,
    /// [`end_listen_streams`](HttpServer::end_listen_streams) was called: the server shuts
    /// down, and streams that only wait for server messages end as they open.
    draining: bool,
    decoder: Decoder,
    /// What the decoder recorded of the params of the body being handled.
    params: ParamsIndex,
    /// The connections whose events `poll_event` is handing out.
    polling: Vec<u64>,
    /// Connections that may have output: `pump` visits these, not every connection, so a
    /// request costs the same with ten sessions open or ten thousand.
    dirty: Vec<u64>,
    /// Connections that may have events, for the next round of `poll_event`.
    eventful: Vec<u64>,
    /// The client capabilities the last stateless request parsed, handed to the next one's
    /// connection (a client sends the same object with every request).
    stateless_caps: Option<crate::mcp::Capabilities>,
    /// The server's `Config` narrowed to each era's versions, validated once and shared by
    /// every connection of that era (`None`: it is not valid, and requests get 500).
    era_configs: [Option<Arc<Config>>; 2],
    /// The last finished stateless connection, if small: the next connection takes over its
    /// box and its emptied buffers instead of allocating its own.
    spare: Option<Box<Conn>>,
    /// The connections' deadlines (see [`Deadlines`]); behind a `RefCell` because
    /// `poll_timeout` takes `&self` and tidies the heap as it reads it.
    deadlines: RefCell<Deadlines>,
    /// When the streams next get a keep-alive comment ([`HttpServerConfig::keepalive`]):
    /// armed by a request, then every period while streams are open.
    next_keepalive: Option<Timestamp>,
    /// The latest time the host gave.
    now: Timestamp,
    /// Sessions whose client let go of its last stream when no time was given
    /// (`Conn::unclocked`): their idle time starts at the host's next time.
    unclocked: Vec<u64>,
    /// The bytes of answers kept aside over all sessions (`Conn::kept`).
    kept_bytes: Arc<AtomicUsize>,
    /// Sessions whose ending (expiry, eviction) has begun and not returned: a store's code
    /// panicked in it. The next ending of one goes without the stores' calls, so that it
    /// cannot stall the sessions after it for good.
    ending: Vec<u64>,
    /// The connection whose output [`pump`](Self::pump) was routing when a store's code
    /// panicked in it: from the next pump on, it goes without the event store.
    pumping: Option<u64>,
    /// What the request being handled made for its response to hand to the host.
    unhanded: Unhanded,
    /// The connections `pump` found blocked by a stream whose client does not read, and
    /// those it found closed: on `self`, so that a panic in the pump does not lose them.
    blocked: Vec<u64>,
    closing: Vec<u64>,
}

/// An event store that keeps nothing, for the one connection a store's code panicked on.
struct NoEvents;

impl EventStore for NoEvents {
    fn append(&mut self, _: &str, _: HttpStreamId, _: u64, _: &[u8]) {}
    fn replay(
        &mut self,
        _: &str,
        _: HttpStreamId,
        _: u64,
        _: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreUnavailable> {
        Ok(())
    }
    fn forget(&mut self, _: &str) {}
}

/// The SSE comment line a quiet stream gets now and then ([`HttpServerConfig::keepalive`]).
const KEEPALIVE_COMMENT: &[u8] = b":\n\n";

/// How many superseded responses [`HttpServer::poll_woken`] keeps to name, for a host that
/// never takes them (it finds them ended at its next poll of each).
const SUPERSEDED_KEPT: usize = 1024;

/// What begins the event ids of a session's GET stream (`gSTREAM-EVENT`): see
/// [`write_stream_event`].
pub(crate) const LISTEN_MARK: &str = "g";

/// The head of an SSE response to a POST, before [`HttpServer::settle`] decides whether it
/// stays a stream (then it gets [`no_proxy_buffering`]) or becomes a JSON body.
fn sse_headers() -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "text/event-stream".into()),
        ("Cache-Control", "no-cache".into()),
    ]
}

/// `X-Accel-Buffering: no` asks reverse proxies such as nginx not to hold a stream's events
/// back ("When initiating an SSE stream, servers SHOULD include the `X-Accel-Buffering: no`
/// header", 2026-07-28; harmless in the handshake era). GET streams get it at once; a POST's
/// stream when [`HttpServer::settle`] leaves it a stream.
fn no_proxy_buffering() -> (&'static str, String) {
    ("X-Accel-Buffering", "no".into())
}

fn status_for_code(code: i64) -> u16 {
    match code {
        jsonrpc::METHOD_NOT_FOUND => 404,
        jsonrpc::INVALID_REQUEST
        | jsonrpc::INVALID_PARAMS
        | jsonrpc::PARSE_ERROR
        | mcp::HEADER_MISMATCH
        | mcp::MISSING_REQUIRED_CLIENT_CAPABILITY
        | mcp::UNSUPPORTED_PROTOCOL_VERSION => 400,
        _ => 200,
    }
}

fn session_id(random: &mut dyn FnMut(&mut [u8])) -> String {
    let mut bytes = [0u8; 16];
    random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A refusal for now: 503 with `Retry-After: 1` and `message` as a JSON-RPC error without an
/// id (the HTTP client sends the request again after it).
fn try_again_later(message: &str) -> HttpResponse {
    let mut r = HttpResponse::rpc_error(503, None, jsonrpc::INTERNAL_ERROR, message);
    r.headers.push(("Retry-After", "1".into()));
    r
}

/// The answer to a request that needs a shared store that could not be read just now: come
/// back in a second (a resumed stream's answer, a session opened elsewhere, stay stored).
fn store_unavailable() -> HttpResponse {
    try_again_later("the shared session store is unavailable; try again")
}

/// The streams a request gave a handle (a new stream, or a resumed one's new response) and
/// the connections it made, while [`HttpServer::handle_request`] runs: its response hands
/// them to the host. A store's code that panics in between (a host may catch it and go on)
/// leaves them to nobody: no host would ever close such a stream, and its session, held
/// open by it, would never expire; a connection opened for an `initialize` would stay
/// outside the sessions, counted by nothing. The next request or timer closes them.
#[derive(Default)]
struct Unhanded {
    /// A request is being handled (still set after one that panicked).
    active: bool,
    streams: SmallVec<[HttpStreamId; 2]>,
    conns: SmallVec<[u64; 2]>,
}

impl Drop for HttpServer {
    /// The sessions still live end with the server: without a shared [`SessionStore`] no
    /// other process can serve them, so their events go too. A store that outlives the
    /// process (a host's own, Redis) would otherwise keep them until it expires them.
    fn drop(&mut self) {
        // (Not while a panic unwinds: a store that panicked too would abort the process.)
        if self.shared.is_none() && !std::thread::panicking() {
            for sid in self.sessions.keys() {
                self.events.forget(sid);
            }
        }
    }
}

impl HttpServer {
    /// A server with no sessions yet. Use it with a configuration known to be valid (one
    /// built with [`Config::server`] and `with_capabilities`); [`try_new`](Self::try_new)
    /// reports an invalid one instead.
    ///
    /// # Panics
    /// If `config.server` is invalid (a client's, no protocol version, capabilities that
    /// break the schema's types, `info` without string `name` and `version`): every request
    /// would get 500, or a client's answers.
    pub fn new(config: HttpServerConfig) -> Self {
        match Self::try_new(config) {
            Ok(server) => server,
            Err(e) => panic!("mcpwire: invalid HTTP server configuration: {e}"),
        }
    }

    /// [`new`](Self::new), with an invalid `config.server` reported rather than a panic.
    pub fn try_new(mut config: HttpServerConfig) -> Result<Self, crate::conn::ConfigError> {
        config
            .server
            .validate()
            .map_err(crate::conn::ConfigError::new)?;
        if config.server.role != crate::conn::Role::Server {
            return Err(crate::conn::ConfigError::new(
                "an HTTP server needs a server configuration (Config::server)",
            ));
        }
        // Keep-alive comments that do not keep a timer due forever: zero is taken as 1 ms. So
        // is an idle timeout of zero: a shared session's refresh, due at half of it, would
        // stay due.
        config.keepalive = config.keepalive.map(|d| d.max(Duration::from_millis(1)));
        config.session_idle_timeout = config.session_idle_timeout.max(Duration::from_millis(1));
        config.shared_touch_interval =
            (config.shared_touch_interval).min(config.session_idle_timeout / 2);
        let events = config.events.take().unwrap_or_else(|| {
            Box::new(MemoryEventStore::with_bounds(
                config.event_store,
                config.event_store_bytes,
                config.event_store_total_bytes,
            ))
        });
        let shared = config.sessions.take();
        let next_stream = config.first_stream_id.max(1);
        Ok(HttpServer {
            decoder: Decoder::new(config.server.decoder),
            params: ParamsIndex::EMPTY,
            stateless_caps: None,
            era_configs: [Era::Legacy, Era::Modern].map(|era| {
                let mut c = config.server.clone();
                c.versions.retain(|v| v.era() == era);
                c.validate().is_ok().then(|| Arc::new(c))
            }),
            spare: None,
            deadlines: RefCell::new(Deadlines::default()),
            next_keepalive: None,
            now: Timestamp::ZERO,
            unclocked: Vec::new(),
            kept_bytes: Arc::new(AtomicUsize::new(0)),
            events,
            shared,
            config,
            conns: FastMap::default(),
            sessions: HashMap::new(),
            streams: FastMap::default(),
            woken: Vec::new(),
            superseded: Vec::new(),
            draining: false,
            aliases: FastMap::default(),
            next_key: 1,
            next_stream,
            polling: Vec::new(),
            dirty: Vec::new(),
            eventful: Vec::new(),
            ending: Vec::new(),
            pumping: None,
            unhanded: Unhanded::default(),
            blocked: Vec::new(),
            closing: Vec::new(),
        })
    }

    /// The bounds of the answers kept aside (`Conn::kept`): the event store's.
    fn keep_limits(&self) -> KeepLimits {
        KeepLimits {
            events: self.config.event_store,
            bytes: self.config.event_store_bytes,
            total_bytes: self.config.event_store_total_bytes,
        }
    }

    /// Declares the server's tools anew, as [`HttpServerConfig::declare_tools`] does before
    /// the server starts: call it when they change (before sending
    /// `notifications/tools/list_changed`), so that 2026-07-28 `tools/call` requests for the
    /// new or changed tools are checked against their `x-mcp-header` annotations, and those
    /// of tools gone are no longer asked for. The tools declared before are replaced. Returns
    /// the tools whose annotations are invalid (the others are declared all the same).
    pub fn declare_tools(&mut self, tools: RawJson<'_>) -> Vec<(String, AnnotationError)> {
        self.config.declare_tools(tools)
    }

    /// How many handshake-era sessions are alive.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// How many streams are open.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether `stream` still belongs to a response the host holds: whether
    /// [`poll_stream`](Self::poll_stream) would give it `Some`, without that call's work.
    /// Use it to drop what a host keeps per stream once the server has let it go (the C ABI
    /// keeps the bytes it lent each stream, to refuse a larger `consume`).
    pub fn holds_stream(&self, stream: HttpStreamId) -> bool {
        self.resolve(stream)
            .and_then(|id| self.streams.get(&id))
            .is_some_and(|s| !s.detached)
    }

    /// The connection behind `key`, to answer its events (then call [`pump`](Self::pump)).
    pub fn connection(&mut self, key: ConnKey) -> Option<&mut Connection> {
        // The caller may issue commands: output and events may follow.
        self.mark(key.0);
        self.conns.get_mut(&key.0).map(|c| &mut c.conn)
    }

    /// Notes that connection `key` may have been given commands since its deadline was last
    /// looked at, through a pointer kept from [`connection`](Self::connection) past that
    /// borrow: the next [`poll_timeout`](Self::poll_timeout) counts its deadline again. Safe
    /// Rust never needs it (`connection` notes that already); a foreign-function layer
    /// that lends connections to another language calls it before `poll_timeout` for each
    /// connection given commands since, and calls `connection` again before the server's next
    /// call that takes `&mut self`, so that their output and events are seen too.
    pub fn note_commands(&self, key: ConnKey) {
        let Some(c) = self.conns.get(&key.0) else {
            return;
        };
        if !c.deadline_noted.replace(true) {
            self.deadlines.borrow_mut().recheck.push(key.0);
        }
    }

    /// Notes that connection `key` was given input or commands: `pump` and `poll_event` look
    /// at it next time.
    fn mark(&mut self, key: u64) {
        // Commands or input may bring its timers earlier.
        self.note_deadline(key);
        if let Some(c) = self.conns.get_mut(&key) {
            if !c.in_dirty {
                c.in_dirty = true;
                self.dirty.push(key);
            }
            if !c.in_eventful {
                c.in_eventful = true;
                self.eventful.push(key);
            }
        }
    }

    /// [`mark`](Self::mark) for every connection (timers, shutdown).
    fn mark_all(&mut self) {
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        for key in keys {
            self.mark(key);
        }
    }

    /// Whether connection `key` is alive: a session not yet ended, or a stateless request not
    /// yet over. Unlike [`connection`](Self::connection) it changes nothing, so a host can use
    /// it to drop what it keeps for connections that have gone.
    pub fn contains(&self, key: ConnKey) -> bool {
        self.conns.contains_key(&key.0)
    }

    /// The session id of a connection, if it is a handshake-era session.
    pub fn session_of(&self, key: ConnKey) -> Option<&str> {
        self.conns.get(&key.0)?.session.as_deref()
    }

    /// Every live connection (sessions and stateless requests in flight).
    pub fn connections(&self) -> Vec<ConnKey> {
        let mut keys: Vec<u64> = self.conns.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter().map(ConnKey).collect()
    }

    /// A stream id in use by no stream and no response.
    fn fresh_id(&mut self) -> HttpStreamId {
        // A `Last-Event-ID` GET may have resumed a stream under an id this server has not
        // handed out yet (the client chose it): skip it, never replace a stream in use.
        // (Past `u64::MAX` the ids go on from 1: 0 is no stream id.)
        let step = |n: u64| n.checked_add(1).unwrap_or(1);
        while self.streams.contains_key(&HttpStreamId(self.next_stream))
            || self.aliases.contains_key(&HttpStreamId(self.next_stream))
        {
            self.next_stream = step(self.next_stream);
        }
        let id = HttpStreamId(self.next_stream);
        self.next_stream = step(self.next_stream);
        id
    }

    /// The stream that response `handle` polls, if it is still that stream's response.
    fn resolve(&self, handle: HttpStreamId) -> Option<HttpStreamId> {
        if let Some(s) = self.streams.get(&handle) {
            // Its own id: unless a resumption gave the stream another response since.
            return (s.handle == handle).then_some(handle);
        }
        let id = *self.aliases.get(&handle)?;
        self.streams
            .get(&id)
            .filter(|s| s.handle == handle)
            .map(|_| id)
    }

    fn new_stream(&mut self, conn: u64, standalone: bool) -> HttpStreamId {
        let id = self.fresh_id();
        if self.unhanded.active {
            self.unhanded.streams.push(id);
        }
        self.streams.insert(
            id,
            Stream {
                conn: ConnKey(conn),
                buf: Vec::new(),
                read: 0,
                awaiting: Awaiting::default(),
                done: false,
                standalone,
                frames: SmallVec::new(),
                first_answers: false,
                rendered: 0,
                unrendered: 0,
                // A GET stream never becomes a JSON body: its events are stored and written
                // as they come, not held three times until its host first drains it.
                record: !standalone,
                unstored: Vec::new(),
                ids_shown: false,
                detached: false,
                closing_for_polling: false,
                error_code: None,
                woken: false,
                handle: id,
            },
        );
        self.attach(conn, true);
        id
    }

    /// Writes the priming event (an empty event with an id, and `retry`) of 2025-11-25 stream
    /// `stream`, a session's GET stream when `listen`.
    fn priming(&mut self, conn: u64, stream: HttpStreamId, listen: bool) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.conn.protocol_version() != Some(ProtocolVersion::V2025_11_25) {
            return;
        }
        let event_id = c.next_event;
        c.next_event += 1;
        let mut bytes = Vec::new();
        write_stream_event(&mut bytes, stream, listen, event_id, "");
        sse::write_retry(&mut bytes, self.config.retry_ms);
        if let Some(s) = self.streams.get_mut(&stream) {
            s.buf.extend_from_slice(&bytes);
        }
        wake(&mut self.streams, &mut self.woken, stream);
    }

    /// Handles one HTTP request. `random` fills buffers from the host's secure random source
    /// (for session ids).
    pub fn handle_request(
        &mut self,
        now: Timestamp,
        req: &HttpRequest<'_>,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> HttpResponse {
        self.reclaim_unhanded(now);
        self.unhanded.active = true;
        let response = self.handle_request_once(now, req, random);
        self.unhanded = Unhanded::default();
        response
    }

    /// The refusal a request earns from its head alone, before its body is read: a header
    /// name that is no token, a repeated Host or Origin (400), a Host or Origin
    /// [`check_origin`](HttpServerConfig::check_origin) refuses (403), and for a POST a body
    /// that is not JSON or an answer it cannot accept (415, 406). `None` when the head
    /// passes these; [`handle_request`](Self::handle_request) checks them again, with the
    /// rest. Use it for a request whose client waits for `100 Continue` before it sends its
    /// body: refused here, the body need never be sent.
    pub fn refuse_head(&self, method: &str, headers: &[(&str, &str)]) -> Option<HttpResponse> {
        let known = Known::of(headers);
        self.refuse_names_and_origin(&known).or_else(|| {
            let req = HttpRequest {
                method,
                headers,
                body: &[],
            };
            (method == "POST")
                .then(|| refuse_post_media(&req, &known))
                .flatten()
        })
    }

    /// The head's header names and its Host and Origin: 400 or 403, or `None`.
    fn refuse_names_and_origin(&self, known: &Known<'_>) -> Option<HttpResponse> {
        // RFC 9110/9112: a header name is a token, and a request has one Host. (Hosts whose
        // HTTP stack lets these through would act on headers a proxy reads otherwise.)
        if known.bad_name
            || known.host_repeated
            || known.origin_repeated
            || known.content_type_repeated
        {
            let what = if known.bad_name {
                "Bad Request: invalid header name"
            } else if known.host_repeated {
                "Bad Request: more than one Host header"
            } else if known.origin_repeated {
                "Bad Request: more than one Origin header"
            } else {
                "Bad Request: more than one Content-Type header"
            };
            return Some(HttpResponse::rpc_error(
                400,
                None,
                jsonrpc::INVALID_REQUEST,
                what,
            ));
        }
        if !(self.config.check_origin)(known.host, known.origin) {
            return Some(HttpResponse::rpc_error(
                403,
                None,
                jsonrpc::INVALID_REQUEST,
                "Forbidden: invalid Host or Origin",
            ));
        }
        None
    }

    /// Closes what a request that panicked made and never handed to its host (see
    /// [`Unhanded`]): its streams as if their clients had gone, and a connection that no
    /// session names (an `initialize`'s, or a stateless request's that got no stream).
    fn reclaim_unhanded(&mut self, now: Timestamp) {
        if !self.unhanded.active {
            return;
        }
        let Unhanded { streams, conns, .. } = std::mem::take(&mut self.unhanded);
        // The session whose output the store panicked on goes on without the store from now
        // (as from the next pump), before what follows calls the store again.
        self.note_store_panic();
        // A connection no session names (an `initialize`'s) goes first, with its streams and
        // without the store's calls: its client never learned of it.
        let mut forget = Vec::new();
        for &key in &conns {
            let Some(c) = self.conns.get(&key) else {
                continue;
            };
            let Some(sid) = c.session.as_ref() else {
                continue;
            };
            if self.sessions.get(sid) == Some(&key) {
                continue;
            }
            if self.shared.is_none() && !c.store_panicked {
                forget.push(sid.clone());
            }
            self.conns.remove(&key);
            self.streams.retain(|_, s| s.conn.0 != key);
        }
        for handle in streams {
            self.close_stream(now, handle);
        }
        // A stateless request's connection that got no stream (one that got a stream went
        // with it, or once its cancellation is handed out).
        for key in conns {
            if (self.conns.get(&key))
                .is_some_and(|c| c.session.is_none() && c.attached == 0 && !c.orphaned)
            {
                self.conns.remove(&key);
            }
        }
        // The store's code last.
        for sid in forget {
            self.events.forget(&sid);
        }
    }

    /// [`handle_request`](Self::handle_request), with what it makes noted in `unhanded`.
    fn handle_request_once(
        &mut self,
        now: Timestamp,
        req: &HttpRequest<'_>,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> HttpResponse {
        self.clock(now);
        if self.next_keepalive.is_none()
            && let Some(every) = self.config.keepalive
        {
            self.next_keepalive = Some(now.after(every));
        }
        let known = Known::of(req.headers);
        if let Some(refusal) = self.refuse_names_and_origin(&known) {
            return refusal;
        }
        if req.body.len() > self.config.max_body {
            return HttpResponse::rpc_error(
                413,
                None,
                jsonrpc::INVALID_REQUEST,
                "Payload Too Large: the body is over the server's limit",
            );
        }
        let version_header = known.version;
        let modern_header = version_header
            .and_then(ProtocolVersion::parse)
            .is_some_and(|v| v.era() == Era::Modern);
        let serves_modern = self.config.server.speaks(Era::Modern);
        let serves_legacy = self.config.server.speaks(Era::Legacy);
        // A header the engine reads may appear once: with two, an intermediary and the server
        // could each act on a different one. (A stateless request's `Mcp-Session-Id` and
        // `Last-Event-ID` are not read: "ignore it", however many there are. A GET or a
        // DELETE is routed by its session, whatever its version header says.)
        let sessionless = !serves_legacy || (req.method == "POST" && modern_header);
        if let Some(name) = known
            .may_repeat
            .then(|| duplicated_mcp_header(req.headers, sessionless))
            .flatten()
        {
            // -32020 exists from 2026-07-28 on; a session's request (an older version) gets
            // the JSON-RPC code its version has.
            let code = if name.eq_ignore_ascii_case(crate::http::SESSION_HEADER)
                || name.eq_ignore_ascii_case(crate::http::LAST_EVENT_ID_HEADER)
                || !(sessionless && serves_modern)
            {
                jsonrpc::INVALID_REQUEST
            } else {
                mcp::HEADER_MISMATCH
            };
            let mut r =
                HttpResponse::rpc_error(400, None, code, &format!("duplicate {name} header"));
            if let Ok(Decoded::Single(Message::Request(rq))) = self.decoder.decode(req.body) {
                set_id(&mut r, Some(rq.id));
            }
            return r;
        }
        let session = known.session;
        // Content negotiation: a POST carries JSON and accepts both answers; a GET accepts
        // an event stream.
        match req.method {
            "POST" => {
                if let Some(refusal) = refuse_post_media(req, &known) {
                    return refusal;
                }
            }
            // (A GET that gets 405 below is not asked for an Accept it will never use.)
            "GET"
                if session.is_some()
                    && serves_legacy
                    && !accepts(req, &known, &["text/event-stream"]) =>
            {
                return HttpResponse::rpc_error(
                    406,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "Not Acceptable: Accept must list text/event-stream",
                );
            }
            _ => {}
        }
        match req.method {
            "POST" => {}
            "GET" if session.is_some() && serves_legacy => {
                return self.get(now, &known, session.unwrap_or(""));
            }
            "DELETE" if session.is_some() && serves_legacy => {
                return self.delete(now, &known, session.unwrap_or(""));
            }
            // A session's GET or DELETE without its session: the spec's 400 for a server that
            // requires one. A GET only when it names a version of the handshake era: without
            // one it may be a 2024-11-05 client opening its SSE stream, which falls back on
            // 405 (as mcp-remote's SSE-first mode does). Naming the stateless era, either is
            // that era's legacy traffic. Those get 405 below.
            "GET" if serves_legacy && version_header.is_some() && !modern_header => {
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "Bad Request: Mcp-Session-Id header is required",
                );
            }
            "DELETE" if serves_legacy && !modern_header => {
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "Bad Request: Mcp-Session-Id header is required",
                );
            }
            _ => {
                let mut r = HttpResponse::rpc_error(
                    405,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "Method not allowed",
                );
                // Every method the endpoint takes (RFC 9110: a 405 MUST say), though GET and
                // DELETE need a session.
                let allow = if serves_legacy {
                    "GET, POST, DELETE"
                } else {
                    "POST"
                };
                r.headers.push(("Allow", allow.into()));
                return r;
            }
        }
        // The body is decoded here, once; the connection gets the decoded message.
        let (text, decoded) = match self.decoder.decode_text(req.body, &mut self.params) {
            Ok(parsed) => parsed,
            // A malformed response's id is one of the server's own requests: the error goes
            // without it, as the spec allows for a response or notification it cannot accept
            // ("a JSON-RPC error response that has no id").
            Err(e) => {
                let id = e.id().filter(|_| !e.is_response_shaped());
                let refused = HttpResponse::rpc_error(400, id, e.code(), e.message());
                // One that names a request of the session's ends it there (`InvalidResponse`,
                // a violation), as over stdio, instead of leaving it to its timeout.
                if e.is_response_shaped()
                    && let Some(sid) = session
                    && !modern_header
                    && serves_legacy
                    && let Ok(key) = self.find_session(now, sid)
                    && let Some(c) = self.conns.get_mut(&key)
                {
                    c.conn.handle_frame(now, StreamId::MAIN, req.body);
                    self.touch(key, now);
                    self.mark(key);
                    self.pump();
                }
                return refused;
            }
        };
        // A server of the stateless era alone ignores a session id ("An Mcp-Session-Id header
        // on a request: ignore it").
        if let Some(sid) = session
            && !modern_header
            && serves_legacy
        {
            return self.post_session(now, &known, sid, text, decoded);
        }
        // No session: `initialize`, or a stateless request.
        // (An `initialize` without an id is a notification no session can begin with: it gets
        // the 400 of any message without a session, not a session's room made for it, which
        // at the cap evicted an idle session.)
        let (is_initialize, request_params) = match &decoded {
            Decoded::Single(Message::Request(r)) => (r.method.eq_str("initialize"), r.params),
            _ => (false, None),
        };
        // `params._meta` naming a protocol version makes a request stateless too; it is read
        // only when the headers leave the era open (a walk over params costs ~1 k instructions).
        let modern_body = || {
            request_params
                .and_then(|p| p.unique("_meta"))
                .and_then(|m| m.unique(META_PROTOCOL_VERSION))
                .is_some()
        };
        // (An `initialize` that names the stateless era in its `_meta` is a stateless request
        // for a removed method, as on stdio: it opens no session.)
        if serves_legacy && is_initialize && !modern_header && !(serves_modern && modern_body()) {
            // The header is not expected yet, but one that names no protocol version at all
            // is invalid ("MUST respond with 400 Bad Request"); a known one is left to the
            // negotiation in the body.
            if version_header.is_some_and(|v| ProtocolVersion::parse(v).is_none()) {
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "Bad Request: unsupported or mismatched MCP-Protocol-Version",
                );
            }
            return self.initialize(now, text, decoded, random);
        }
        if serves_modern && (modern_header || !serves_legacy || modern_body()) {
            return self.stateless(now, req, &known, text, decoded);
        }
        if serves_legacy && session.is_none() {
            return HttpResponse::rpc_error(
                400,
                None,
                jsonrpc::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            );
        }
        HttpResponse::rpc_error(400, None, jsonrpc::INVALID_REQUEST, "Bad Request")
    }

    fn new_conn(&mut self, now: Timestamp, session: Option<String>, modern: bool) -> Option<u64> {
        let config = self.era_configs[usize::from(modern)].clone()?;
        // The spare's box and buffers go to this connection.
        let mut spare = self.spare.take();
        let mut conn = Connection::with_validated(config, now, spare.as_mut().map(|c| &mut c.conn));
        if modern && session.is_none() {
            conn.swap_client_caps(&mut self.stateless_caps);
        }
        let key = self.next_key;
        self.next_key += 1;
        if self.unhanded.active {
            self.unhanded.conns.push(key);
        }
        let fresh = Conn {
            conn,
            session,
            standalone: None,
            closed_standalone: None,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            next_event: 1,
            last_active: now,
            unclocked: false,
            shared_touched: now,
            touch_failed: None,
            orphaned: false,
            in_dirty: false,
            in_eventful: false,
            store_panicked: false,
            attached: 0,
            deadline_noted: Cell::new(false),
            kept: None,
            replays: None,
        };
        // Boxed: the map's empty slots then cost a pointer, not a whole connection.
        let boxed = match spare {
            Some(mut old) => {
                *old = fresh;
                old
            }
            None => Box::new(fresh),
        };
        self.conns.insert(key, boxed);
        self.note_deadline(key);
        Some(key)
    }

    fn initialize(
        &mut self,
        now: Timestamp,
        text: &str,
        decoded: Decoded<'_>,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> HttpResponse {
        if let Err(busy) = self.make_room() {
            return busy;
        }
        // A source that repeats itself would make this spin for good (see `RANDOM_TRIES`).
        let Some(sid) = (0..crate::tasks::RANDOM_TRIES)
            .map(|_| session_id(random))
            .find(|sid| !self.sessions.contains_key(sid))
        else {
            return HttpResponse::rpc_error(
                500,
                None,
                jsonrpc::INTERNAL_ERROR,
                "Internal Server Error: the server's random source repeats itself",
            );
        };
        let Some(key) = self.new_conn(now, Some(sid.clone()), false) else {
            return HttpResponse::empty(500);
        };
        let mut response = self.deliver(now, key, text, decoded, false, None);
        if self
            .conns
            .get(&key)
            .is_some_and(|c| c.conn.protocol_version().is_some())
        {
            // Registered first: a shared store whose `create` panics leaves a session that
            // counts against the cap and expires, not a connection outside both.
            self.sessions.insert(sid.clone(), key);
            if let Some(shared) = self.shared.as_mut()
                && shared.create(&sid, text).is_err()
            {
                self.sessions.remove(&sid);
                self.conns.remove(&key);
                return store_unavailable();
            }
            response.headers.push(("Mcp-Session-Id", sid));
        } else {
            self.conns.remove(&key);
        }
        response
    }

    /// At the session cap, the least recently used idle session makes room; only sessions
    /// whose clients all hold streams open make a newcomer wait (the 503 to send).
    fn make_room(&mut self) -> Result<(), HttpResponse> {
        while self.sessions.len() >= self.config.max_sessions {
            match self.least_recently_used_idle() {
                Some(key) => self.end_session(key, true),
                None => return Err(try_again_later("too many active sessions")),
            }
        }
        Ok(())
    }

    /// The connection serving session `sid`, or the response refusing the request (404 for a
    /// session no replica knows). With a shared [`SessionStore`], a session this process holds
    /// is checked against it (it may have been deleted on another replica), and one it does
    /// not hold is taken over from it.
    fn find_session(&mut self, now: Timestamp, sid: &str) -> Result<u64, HttpResponse> {
        let not_found =
            || HttpResponse::rpc_error(404, None, jsonrpc::INVALID_REQUEST, "Session not found");
        let local = self.sessions.get(sid).copied();
        let Some(shared) = self.shared.as_mut() else {
            return local.ok_or_else(not_found);
        };
        if let Some(key) = local {
            let interval = self.config.shared_touch_interval;
            if !interval.is_zero()
                && self
                    .conns
                    .get(&key)
                    .is_some_and(|c| now < c.shared_touched.after(interval))
            {
                return Ok(key);
            }
            match shared.touch(sid) {
                Ok(true) => {
                    if let Some(c) = self.conns.get_mut(&key) {
                        c.shared_touched = now;
                        c.touch_failed = None;
                    }
                    return Ok(key);
                }
                Err(StoreUnavailable) => {
                    // Served all the same; the touch is tried again soon.
                    if let Some(c) = self.conns.get_mut(&key) {
                        c.touch_failed = Some(now);
                    }
                    self.note_deadline(key);
                    return Ok(key);
                }
                Ok(false) => {}
            }
            // Deleted (or expired) everywhere: this copy goes too.
            self.end_session(key, false);
            return Err(not_found());
        }
        let initialize = match shared.load(sid) {
            Ok(Some(initialize)) => initialize,
            Ok(None) => return Err(not_found()),
            Err(StoreUnavailable) => return Err(store_unavailable()),
        };
        self.make_room()?;
        self.restore(now, sid, &initialize).ok_or_else(not_found)
    }

    /// Takes over a session opened on another replica: a fresh connection negotiates it again
    /// from its stored `initialize` request (the answer goes nowhere: the client has it) and
    /// its client's `initialized` notification.
    fn restore(&mut self, now: Timestamp, sid: &str, initialize: &str) -> Option<u64> {
        let key = self.new_conn(now, Some(sid.to_owned()), false)?;
        let c = self.conns.get_mut(&key)?;
        let mut index = ParamsIndex::EMPTY;
        if let Ok((text, decoded)) = self.decoder.decode_text(initialize.as_bytes(), &mut index)
            && matches!(&decoded, Decoded::Single(Message::Request(r)) if r.method.to_str() == "initialize")
        {
            c.conn
                .handle_decoded(now, StreamId::MAIN, text, decoded, &index);
        }
        while c.conn.poll_frame().is_some() {
            c.conn.consume_frame();
        }
        if c.conn.protocol_version().is_none() {
            self.conns.remove(&key);
            return None;
        }
        const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        if let Ok((text, decoded)) = self.decoder.decode_text(INITIALIZED.as_bytes(), &mut index) {
            c.conn
                .handle_decoded(now, StreamId::MAIN, text, decoded, &index);
        }
        self.sessions.insert(sid.to_owned(), key);
        self.mark(key);
        Some(key)
    }

    fn post_session(
        &mut self,
        now: Timestamp,
        known: &Known<'_>,
        sid: &str,
        text: &str,
        decoded: Decoded<'_>,
    ) -> HttpResponse {
        let key = match self.find_session(now, sid) {
            Ok(key) => key,
            Err(refused) => return refused,
        };
        self.touch(key, now);
        if let Some(refused) = self.refuse_version_header(known) {
            return refused;
        }
        // A batch where the session's version has none (all but 2025-03-26) is refused here,
        // as a single request would be: passed on, it opened a stream that waited for answers
        // its members would never get.
        if matches!(decoded, Decoded::Batch(_))
            && !self
                .conns
                .get(&key)
                .and_then(|c| c.conn.protocol_version())
                .is_some_and(ProtocolVersion::has_batches)
        {
            return HttpResponse::rpc_error(
                400,
                None,
                jsonrpc::INVALID_REQUEST,
                "batches are not supported in this protocol version",
            );
        }
        self.deliver(now, key, text, decoded, false, None)
    }

    /// The client cancelled requests `ids` of session `key`: a POST stream that waits for
    /// nothing else ends now, without an answer (none will come: the connection mutes it),
    /// instead of staying open until the client goes away. A request the connection still
    /// has in flight (cancelling `initialize`, an unknown id) is not cancelled.
    fn end_cancelled(&mut self, key: u64, ids: &[OwnedId]) {
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        let gone: Vec<&OwnedId> = ids
            .iter()
            .filter(|id| !c.conn.awaits_answer_to(id.as_id()))
            .collect();
        if gone.is_empty() {
            return;
        }
        let mut ended = Vec::new();
        for (&stream, s) in self.streams.iter_mut() {
            if s.conn.0 != key || s.standalone || s.done {
                continue;
            }
            let before = !s.awaiting.is_empty();
            for id in &gone {
                s.awaiting.remove(id);
            }
            if before && s.awaiting.is_empty() {
                s.done = true;
                ended.push((stream, s.detached));
            }
        }
        for (stream, detached) in ended {
            if detached {
                // Nobody holds it, and no answer will come for a resumption to fetch.
                self.streams.remove(&stream);
            } else {
                wake(&mut self.streams, &mut self.woken, stream);
            }
        }
    }

    /// The answer to a session's request (POST, GET or DELETE) whose `MCP-Protocol-Version`
    /// header names a version this server does not speak in a session, if it does. "Invalid
    /// or unsupported" gets 400: any handshake-era version we serve is neither, even when it is
    /// not the negotiated one (the official suite sends 2025-03-26 on a 2025-11-25 session, and
    /// SDK servers accept it). No header is fine: the session knows its version.
    fn refuse_version_header(&self, known: &Known<'_>) -> Option<HttpResponse> {
        let header = known.version?;
        let served = ProtocolVersion::parse(header)
            .is_some_and(|v| v.era() == Era::Legacy && self.config.server.versions.contains(&v));
        (!served).then(|| {
            HttpResponse::rpc_error(
                400,
                None,
                jsonrpc::INVALID_REQUEST,
                "Bad Request: unsupported or mismatched MCP-Protocol-Version",
            )
        })
    }

    /// Feeds a POST body to a connection and decides the answer.
    fn deliver(
        &mut self,
        now: Timestamp,
        key: u64,
        text: &str,
        decoded: Decoded<'_>,
        modern: bool,
        meta: Option<MetaView<'_>>,
    ) -> HttpResponse {
        // Which requests does the body carry? Their answers end the stream.
        let mut awaiting = Awaiting::default();
        match &decoded {
            Decoded::Single(Message::Request(r)) => {
                awaiting.insert(OwnedId::from(r.id));
            }
            Decoded::Batch(members) => {
                for m in members {
                    match m {
                        Ok(Message::Request(r)) => {
                            awaiting.insert(OwnedId::from(r.id));
                        }
                        // An invalid member that the engine answers (2025-03-26 batches): the
                        // batch's answer, which ends the stream whatever it awaits, carries
                        // its error, so the POST gets that answer and not a 202.
                        Err(e) if crate::conn::answers_decode_error(e) => {
                            awaiting.insert(e.id().map_or(OwnedId::Int(i64::MIN), OwnedId::from));
                        }
                        _ => {}
                    }
                }
            }
            Decoded::Single(Message::Notification(n))
                if self
                    .conns
                    .get(&key)
                    .is_some_and(|c| c.conn.refuses_notification(&n.method.to_str())) =>
            {
                // "If the server cannot accept it, it MUST return an HTTP error status code".
                if modern {
                    self.conns.remove(&key);
                }
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "clients do not send this notification in this protocol version",
                );
            }
            Decoded::Single(Message::Response(_) | Message::Error(_)) if modern => {
                // Refused before the connection saw it: a stateless one goes with the request.
                self.conns.remove(&key);
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "clients do not send responses in this protocol version",
                );
            }
            _ => {}
        }
        // A batch of notifications (2025-03-26) with one the client never sends is refused
        // whole, as one sent alone is.
        if awaiting.is_empty()
            && let Decoded::Batch(members) = &decoded
            && let Some(c) = self.conns.get(&key)
            && members.iter().any(|m| {
                matches!(m, Ok(Message::Notification(n))
                    if c.conn.refuses_notification(&n.method.to_str()))
            })
        {
            return HttpResponse::rpc_error(
                400,
                None,
                jsonrpc::INVALID_REQUEST,
                "clients do not send this notification in this protocol version",
            );
        }
        if awaiting.is_empty() {
            // Notifications and responses: accepted, nothing to stream.
            let cancelled = (!modern).then(|| cancelled_ids(&decoded));
            if let Some(c) = self.conns.get_mut(&key) {
                c.conn
                    .handle_decoded(now, StreamId::MAIN, text, decoded, &self.params);
            }
            self.mark(key);
            self.pump();
            if let Some(ids) = cancelled {
                self.end_cancelled(key, &ids);
            }
            if modern {
                // A stateless notification's connection goes with its answer, but not before
                // its events (the notification itself, for the application) are handed out.
                match self.conns.get_mut(&key) {
                    Some(c) if c.conn.pending_events() > 0 => {
                        c.orphaned = true;
                        self.mark(key);
                    }
                    _ => {
                        self.conns.remove(&key);
                    }
                }
            }
            return HttpResponse::empty(202);
        }
        // Requests into a session whose output is full (a stream whose client does not
        // read holds it: one output serves every stream before 2025-11-25) are refused for
        // now, as a stdio host stops reading: their answers could not be written, and an
        // application that keeps each refused answer to give it later would keep as many as
        // the client cares to send. Notifications and responses still go in.
        if !modern
            && self
                .conns
                .get(&key)
                .is_some_and(|c| !c.conn.output_has_room())
        {
            return try_again_later(
                "the session's output is full (a stream of it is not being read); try again",
            );
        }
        // A 2025-03-26 batch may cancel its own requests: their answers never come.
        let cancelled = match &decoded {
            Decoded::Batch(_) if !modern => cancelled_ids(&decoded),
            _ => Vec::new(),
        };
        let stream = self.new_stream(key, false);
        if let Some(s) = self.streams.get_mut(&stream) {
            s.awaiting = awaiting;
        }
        if let Some(c) = self.conns.get_mut(&key) {
            let stream = StreamId(stream.0);
            match meta {
                Some(meta) => {
                    c.conn
                        .handle_decoded_with_meta(now, stream, text, decoded, &self.params, meta)
                }
                None => c
                    .conn
                    .handle_decoded(now, stream, text, decoded, &self.params),
            }
        }
        self.mark(key);
        self.pump();
        if self.draining && self.end_listens_of(key) > 0 {
            self.mark(key);
            self.pump();
        }
        if !cancelled.is_empty() {
            self.end_cancelled(key, &cancelled);
        }
        // Answered at once (the engine's own answer, or a refusal): a plain JSON body.
        let immediate = self
            .streams
            .get(&stream)
            .is_some_and(|s| s.done && s.frames.len() == 1);
        if immediate && let Some(mut s) = self.streams.remove(&stream) {
            self.attach(key, false);
            let (_, frame) = s.frames.swap_remove(0);
            let status = match s.error_code {
                Some(code) if modern => status_for_code(code),
                _ => 200,
            };
            if modern {
                self.conns.remove(&key);
            }
            return HttpResponse::json(status, frame);
        }
        self.priming(key, stream, false);
        HttpResponse {
            status: 200,
            headers: sse_headers(),
            body: Body::Stream(stream),
        }
    }

    fn stateless(
        &mut self,
        now: Timestamp,
        req: &HttpRequest<'_>,
        known: &Known<'_>,
        text: &str,
        decoded: Decoded<'_>,
    ) -> HttpResponse {
        // The headers must agree with the body.
        let mismatch = |what: &str| {
            HttpResponse::rpc_error(
                400,
                None,
                mcp::HEADER_MISMATCH,
                &format!("Header mismatch: {what}"),
            )
        };
        let (id, method, params) = match &decoded {
            Decoded::Single(Message::Request(r)) => {
                (Some(OwnedId::from(r.id)), r.method.to_str(), r.params)
            }
            Decoded::Single(Message::Notification(n)) => (None, n.method.to_str(), n.params),
            _ => {
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "a single request or notification is required",
                );
            }
        };
        let rid = id.as_ref().map(|i| i.as_id());
        let name_key = match &*method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            // SEP-2663: routing by task, so a load balancer can find the task's replica.
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
            _ => None,
        };
        // What the header checks read, from the decoder's index of the params (else one pass).
        const META: usize = 0;
        const NAME: usize = 1;
        const ARGUMENTS: usize = 2;
        let index = &self.params;
        let found =
            params.map(|p| index.get_each(p, ["_meta", name_key.unwrap_or("name"), "arguments"]));
        let member = |i| found.and_then(|f| f.get(i).ok().flatten());
        // `_meta` read once, here, for the version check and for the connection, which then
        // does not look it up again.
        let meta = MetaView::of(
            params
                .filter(|p| p.is_object())
                .and(found)
                .map(|f| f.get(META)),
        );
        let body_version = meta.version().and_then(|v| v.as_str()).map(|v| v.to_str());
        let header_version = known.version;
        // An `initialize` without these headers (a handshake-era client's) goes to the
        // connection, which names our versions in its -32022: a modern-only server "SHOULD
        // name the protocol versions it supports in any error it returns to an initialize
        // request". With a version header, the headers must agree with the body as ever.
        if id.is_some() && (method != "initialize" || header_version.is_some()) {
            // A version we do not serve at all is named first, whatever else is wrong: "MUST
            // respond with 400 Bad Request and an UnsupportedProtocolVersionError listing its
            // supported versions", and a client of a later version must learn ours. (One we
            // serve in sessions, beside a stateless `_meta`, is a mismatch, below.)
            if let Some(h) = header_version
                && !ProtocolVersion::parse(h)
                    .is_some_and(|v| self.config.server.versions.contains(&v))
            {
                let data = crate::conn::unsupported_data(&self.config.server, h);
                let mut body = Vec::new();
                jsonrpc::encode_error(
                    &mut body,
                    rid,
                    mcp::UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version",
                    Some(RawJson::validated(&data)),
                );
                return HttpResponse::json(400, body);
            }
            match (header_version, body_version.as_deref()) {
                (Some(h), Some(b)) if h != b => {
                    let mut r = mismatch("MCP-Protocol-Version does not match _meta");
                    set_id(&mut r, rid);
                    return r;
                }
                (None, _) => {
                    let mut r = mismatch("MCP-Protocol-Version header is required");
                    set_id(&mut r, rid);
                    return r;
                }
                _ => {}
            }
            match known.method {
                // ("A header value contains invalid characters": a control character, which
                // no HTTP parser lets through but a host may hand over, even when the body's
                // method, escaped, has the same.)
                Some(m) if m.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) => {
                    let mut r = mismatch("Mcp-Method: invalid character");
                    set_id(&mut r, rid);
                    return r;
                }
                Some(m) if m == method => {}
                Some(_) => {
                    let mut r = mismatch("Mcp-Method does not match the body");
                    set_id(&mut r, rid);
                    return r;
                }
                None => {
                    let mut r = mismatch("Mcp-Method header is required");
                    set_id(&mut r, rid);
                    return r;
                }
            }
            if name_key.is_some() {
                let body_name = member(NAME).and_then(|v| v.as_str()).map(|v| v.to_str());
                let header = match known.name.map(headers::decode_value_borrowed) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => {
                        let mut r = mismatch(&format!("Mcp-Name: {e}"));
                        set_id(&mut r, rid);
                        return r;
                    }
                    None => None,
                };
                if header.is_none() || header != body_name {
                    let mut r = mismatch("Mcp-Name does not match the body");
                    set_id(&mut r, rid);
                    return r;
                }
            }
            if method == "tools/call"
                && let Some(name) = member(NAME).and_then(|n| n.as_str())
                && let Some(problem) =
                    self.param_header_problem(req, &name.to_str(), found.map(|f| f.get(ARGUMENTS)))
            {
                let mut r = mismatch(&problem);
                set_id(&mut r, rid);
                return r;
            }
        }
        let Some(key) = self.new_conn(now, None, true) else {
            return HttpResponse::empty(500);
        };
        self.deliver(now, key, text, decoded, true, Some(meta))
    }

    /// A `tools/call`'s `Mcp-Param-*` headers against the arguments of `tool` and its
    /// `x-mcp-header` annotations: what is wrong, if anything. `arguments` written twice, or a
    /// member on an annotation's path written twice, is wrong: the tool's parser picks one of
    /// the two, and a router reading the header (or its absence) may act on the other.
    fn param_header_problem(
        &self,
        req: &HttpRequest<'_>,
        tool: &str,
        arguments: Option<Result<Option<RawJson<'_>>, DuplicateMember>>,
    ) -> Option<String> {
        let annotations = self.config.tool_headers.for_tool(tool);
        let arguments = match arguments {
            Some(Err(DuplicateMember)) if !annotations.is_empty() => {
                return Some("arguments is written twice".into());
            }
            Some(found) => found.ok().flatten(),
            None => None,
        };
        for annotation in annotations {
            let header_name = annotation.header_name();
            let header = match req.header(&header_name).map(headers::decode_value) {
                Some(Ok(v)) => Some(v),
                Some(Err(e)) => return Some(format!("{header_name}: {e}")),
                None => None,
            };
            let body = match arguments.map(|a| annotation.value_in(a)) {
                Some(Err(DuplicateMember)) => {
                    let path = annotation.path.join(".");
                    return Some(format!("{header_name}: argument {path} is written twice"));
                }
                Some(Ok(value)) => value,
                None => None,
            };
            match (header, body) {
                // A value a header cannot carry (an object or array) matches no header.
                (Some(h), Some(b)) if headers::value_matches(&h, b) != Some(true) => {
                    return Some(format!("{header_name} does not match the body"));
                }
                // A header whose value the body lacks: a router would act on what the tool
                // never receives.
                (Some(_), None) => {
                    return Some(format!("{header_name} has no value in the body"));
                }
                (None, Some(b)) if headers::value_matches("", b).is_some() => {
                    return Some(format!("{header_name} header is required"));
                }
                _ => {}
            }
        }
        None
    }

    fn get(&mut self, now: Timestamp, known: &Known<'_>, sid: &str) -> HttpResponse {
        let key = match self.find_session(now, sid) {
            Ok(key) => key,
            Err(refused) => return refused,
        };
        if let Some(refused) = self.refuse_version_header(known) {
            return refused;
        }
        self.touch(key, now);
        let mut sse_headers = sse_headers();
        sse_headers.push(no_proxy_buffering());
        // (An empty one names no event: the SSE standard's "no last event ID", which some
        // clients send whenever the header's variable exists.)
        if let Some(last) = known.last_event_id.filter(|v| !v.is_empty()) {
            // Resume: "<stream>-<event>", or "g<stream>-<event>" for a GET stream; replay that
            // stream's later events only.
            let (listen, last) = match last.strip_prefix(LISTEN_MARK) {
                Some(rest) => (true, rest),
                None => (false, last),
            };
            let parsed = last
                .split_once('-')
                .and_then(|(s, e)| Some((s.parse::<u64>().ok()?, e.parse::<u64>().ok()?)));
            // (Stream 0 is no stream's: ids start at 1.)
            let Some((stream_no, event_no)) = parsed.filter(|&(s, _)| s != 0) else {
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "unknown Last-Event-ID",
                );
            };
            let old = HttpStreamId(stream_no);
            if self.aliases.contains_key(&old) {
                // A response's id, never a stream's: no event carries it.
                return HttpResponse::rpc_error(
                    400,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "unknown Last-Event-ID",
                );
            }
            if !listen && !self.streams.contains_key(&old) {
                // A finished request's stream resumed again: the response that replayed it
                // before ends (its client came back for the same events), and the answers it
                // carried go back to be carried by this one. Each replay holds up to the
                // store's bytes for the session: repeated, they added up without bound.
                let earlier: Vec<HttpStreamId> = (self.conns.get_mut(&key))
                    .and_then(|c| c.replays.as_mut())
                    .map(|r| {
                        let same = r.iter().filter(|(o, _)| *o == old).map(|(_, f)| *f);
                        let same: Vec<HttpStreamId> = same.collect();
                        r.retain(|(o, _)| *o != old);
                        same
                    })
                    .unwrap_or_default();
                for response in earlier {
                    if self.resolve(response).is_some() {
                        self.end_replaced(now, response);
                    }
                }
            }
            if self.streams.get(&old).is_some_and(|s| s.conn.0 == key) {
                // Events held back while the answer could still become a JSON body (the
                // host has not drained the stream yet) go to the store first, to be replayed.
                self.store_unstored(old);
                // Answers a response still holds unwritten are kept aside: that response ends.
                self.keep_unread_answers(old);
            }
            // Answers kept aside for the stream go back among the events replayed, in their
            // place, where the store lost them to its bounds.
            let kept = (self.conns.get_mut(&key))
                .and_then(|c| c.kept.as_mut())
                .map(|k| k.resume(old, event_no))
                .unwrap_or_default();
            let mut replay = Vec::new();
            let mut events = Vec::new();
            let replayed = self.events.replay(sid, old, event_no, &mut |event| {
                if kept.is_empty() {
                    replay.extend_from_slice(event)
                } else {
                    events.push(event.to_vec())
                }
            });
            if replayed.is_err() {
                // What is stored may be the answer the client resumes for: it comes back.
                return store_unavailable();
            }
            let carries = !kept.is_empty();
            if carries {
                replay = kept::merge(&events, kept);
            }
            let resumes_standalone = self
                .conns
                .get(&key)
                .is_some_and(|c| c.closed_standalone == Some(old) || c.standalone == Some(old));
            // The resumed stream takes over the old one's id, so later events continue it: a
            // request still awaited keeps its answer coming on it, a GET stream stays open.
            let taken = match self.streams.get_mut(&old) {
                Some(s) if s.conn.0 == key => {
                    let was_detached = s.detached;
                    s.buf.clear();
                    s.read = 0;
                    s.ids_shown = true;
                    s.buf.extend_from_slice(&replay);
                    if let Some(c) = self.conns.get_mut(&key) {
                        // What its bytes carried is gone with them (a client may name a
                        // resumption's own stream): only this replay's answers are carried.
                        if let Some(k) = c.kept.as_mut() {
                            k.uncarry(old);
                            if carries {
                                k.carried(old, event_no, old);
                            }
                        }
                    }
                    s.detached = false;
                    s.closing_for_polling = false;
                    // The session's GET stream, ended at its bound before its host drained
                    // it: it goes on (a request's stream ends once answered, as before).
                    if resumes_standalone && s.standalone {
                        s.done = false;
                    }
                    s.stop_recording();
                    was_detached
                }
                Some(_) => {
                    return HttpResponse::rpc_error(
                        400,
                        None,
                        jsonrpc::INVALID_REQUEST,
                        "unknown Last-Event-ID",
                    );
                }
                None if !resumes_standalone && listen => {
                    // A GET stream of this session that this process does not hold: another
                    // process held it (the client came back here), or this one did before
                    // the session left its memory. Its stored events, then this process's
                    // own GET stream: without it the client, which resumes what it had,
                    // would come back for ever and never hear this process's messages.
                    let stream = self.open_get_stream(now, key, replay);
                    if carries
                        && let Some(k) = self.conns.get_mut(&key).and_then(|c| c.kept.as_mut())
                    {
                        k.carried(old, event_no, stream);
                    }
                    return HttpResponse {
                        status: 200,
                        headers: sse_headers,
                        body: Body::Stream(stream),
                    };
                }
                None if !resumes_standalone => {
                    // A request's stream that no longer exists here has finished (or another
                    // process holds it): the replay is all this response carries. It gets a
                    // number of its own and leaves the old one free, so that no session can
                    // hold another's stream number (the owner's own resumption got 400 while
                    // another session held it).
                    let mut buf = replay;
                    let ours =
                        (self.config.first_stream_id.max(1)..self.next_stream).contains(&old.0);
                    if self.shared.is_some() && !ours {
                        // Another process holds this request's stream, or held it: what it
                        // stores later reaches the client only through another resumption.
                        // Keep the client's place and say when to come back (SEP-1699
                        // polling). A stream that ended with nothing at all looked finished
                        // to the TypeScript SDK, which then dropped its cursor, opened a
                        // plain GET and never got the answer. (One of this process's own
                        // that it no longer holds has finished: nothing more will come.)
                        let version = self.conns.get(&key).and_then(|c| c.conn.protocol_version());
                        if buf.is_empty() && version == Some(ProtocolVersion::V2025_11_25) {
                            write_stream_event(&mut buf, old, false, event_no, "");
                        }
                        sse::write_retry(&mut buf, self.config.retry_ms);
                    }
                    let fresh = self.new_stream(key, false);
                    if let Some(s) = self.streams.get_mut(&fresh) {
                        s.buf = buf;
                        s.done = true;
                        s.stop_recording();
                    }
                    let streams = &self.streams;
                    if let Some(c) = self.conns.get_mut(&key) {
                        let replays = c.replays.get_or_insert_default();
                        replays.retain(|(_, response)| streams.contains_key(response));
                        replays.push((old, fresh));
                    }
                    if carries
                        && let Some(k) = self.conns.get_mut(&key).and_then(|c| c.kept.as_mut())
                    {
                        k.carried(old, event_no, fresh);
                    }
                    wake(&mut self.streams, &mut self.woken, fresh);
                    return HttpResponse {
                        status: 200,
                        headers: sse_headers,
                        body: Body::Stream(fresh),
                    };
                }
                None => {
                    self.streams.insert(
                        old,
                        Stream {
                            conn: ConnKey(key),
                            buf: replay,
                            read: 0,
                            awaiting: Awaiting::default(),
                            done: false,
                            standalone: true,
                            frames: SmallVec::new(),
                            first_answers: false,
                            rendered: 0,
                            unrendered: 0,
                            record: false,
                            unstored: Vec::new(),
                            ids_shown: true,
                            detached: false,
                            closing_for_polling: false,
                            error_code: None,
                            woken: false,
                            handle: old,
                        },
                    );
                    true
                }
            };
            if taken {
                self.attach(key, true);
            }
            // The new response gets an id of its own. When the first one is still held (the
            // client saw that connection break before the host did), it ends (its host learns
            // of it from `poll_woken`) instead of taking what follows to a dead socket or,
            // once its host notices, ending the new one. A response that ended earlier never
            // polls this stream again either, even if it is recreated under the same number.
            self.supersede(old, !taken);
            // Its bytes start again: a host task that held it looks again.
            wake(&mut self.streams, &mut self.woken, old);
            if resumes_standalone {
                let backlog: Vec<Vec<u8>> = match self.conns.get_mut(&key) {
                    Some(c) => {
                        c.closed_standalone = None;
                        if let Some(previous) = c.standalone.replace(old)
                            && previous != old
                            && let Some(s) = self.streams.get_mut(&previous)
                        {
                            s.done = true;
                            wake(&mut self.streams, &mut self.woken, previous);
                        }
                        c.backlog_bytes = 0;
                        c.backlog.drain(..).collect()
                    }
                    None => Vec::new(),
                };
                for frame in backlog {
                    self.route(key, old, &frame);
                }
                if self.draining {
                    self.end_listens_of(key);
                }
            }
            let handle = self.streams.get(&old).map_or(old, |s| s.handle);
            debug_assert_ne!(handle, old, "a resumption's response has an id of its own");
            return HttpResponse {
                status: 200,
                headers: sse_headers,
                body: Body::Stream(handle),
            };
        }
        let stream = self.open_get_stream(now, key, Vec::new());
        HttpResponse {
            status: 200,
            headers: sse_headers,
            body: Body::Stream(stream),
        }
    }

    /// Opens session `key`'s GET stream, which first carries `replay` (what a resumption
    /// brings back), then its priming event and the messages that waited for a GET stream;
    /// the session's previous GET stream ends: once written out, or at once when this one
    /// replays (what it held is stored, and its client came back for it: a client repeating
    /// its resumption held a replay per request until each was written out).
    fn open_get_stream(&mut self, now: Timestamp, key: u64, replay: Vec<u8>) -> HttpStreamId {
        let stream = self.new_stream(key, true);
        let replays = !replay.is_empty();
        if replays && let Some(s) = self.streams.get_mut(&stream) {
            s.buf = replay;
            // (Its client may resume from what it replays: ids are shown.)
            s.ids_shown = true;
        }
        let previous = (self.conns.get_mut(&key)).and_then(|c| c.standalone.replace(stream));
        if let Some(previous) = previous
            && self.streams.contains_key(&previous)
        {
            if replays {
                // (By its response's id: a takeover may have given it one of its own.)
                let response = self.streams.get(&previous).map_or(previous, |s| s.handle);
                self.end_replaced(now, response);
            } else if let Some(s) = self.streams.get_mut(&previous) {
                s.done = true;
                wake(&mut self.streams, &mut self.woken, previous);
            }
        }
        self.priming(key, stream, true);
        // Messages that waited for a GET stream.
        let backlog: Vec<Vec<u8>> = self
            .conns
            .get_mut(&key)
            .map(|c| {
                c.backlog_bytes = 0;
                c.backlog.drain(..).collect()
            })
            .unwrap_or_default();
        for frame in backlog {
            self.route(key, stream, &frame);
        }
        if self.draining {
            self.end_listens_of(key);
        }
        wake(&mut self.streams, &mut self.woken, stream);
        stream
    }

    /// Ends `response`, which a resumption replaced, as if its client had gone (what it
    /// carried stays resumable): it finds nothing more to poll, and is named once by
    /// `poll_woken`.
    fn end_replaced(&mut self, now: Timestamp, response: HttpStreamId) {
        self.close_stream(now, response);
        if self.superseded.len() < SUPERSEDED_KEPT {
            self.superseded.push(response);
        }
    }

    /// Gives stream `id` a new response id: the response that held it finds nothing more to
    /// poll, and when it is still `held` it is named once by `poll_woken`.
    fn supersede(&mut self, id: HttpStreamId, held: bool) {
        let fresh = self.fresh_id();
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let stale = std::mem::replace(&mut s.handle, fresh);
        if self.unhanded.active {
            self.unhanded.streams.push(fresh);
        }
        if stale != id {
            self.aliases.remove(&stale);
        }
        if held && self.superseded.len() < SUPERSEDED_KEPT {
            self.superseded.push(stale);
        }
        self.aliases.insert(fresh, id);
        if self.aliases.len() > self.streams.len() + 64 {
            let streams = &self.streams;
            self.aliases
                .retain(|handle, id| streams.get(id).is_some_and(|s| s.handle == *handle));
        }
    }

    fn delete(&mut self, now: Timestamp, known: &Known<'_>, sid: &str) -> HttpResponse {
        // A session another replica opened is ended in the shared stores alone: taking it over
        // first needed room for it here, and at the session cap the DELETE got a 503 while
        // the session lived on everywhere.
        if !self.sessions.contains_key(sid)
            && let Some(shared) = self.shared.as_mut()
        {
            match shared.load(sid) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return HttpResponse::rpc_error(
                        404,
                        None,
                        jsonrpc::INVALID_REQUEST,
                        "Session not found",
                    );
                }
                Err(StoreUnavailable) => return store_unavailable(),
            }
            if let Some(refused) = self.refuse_version_header(known) {
                return refused;
            }
            if let Some(shared) = self.shared.as_mut()
                && shared.forget(sid).is_err()
            {
                return store_unavailable();
            }
            self.events.forget(sid);
            return HttpResponse::empty(200);
        }
        let key = match self.find_session(now, sid) {
            Ok(key) => key,
            Err(refused) => return refused,
        };
        if let Some(refused) = self.refuse_version_header(known) {
            return refused;
        }
        // Gone for every replica first: where the store cannot tell them, the session goes
        // on here too, and its client is told to come back (a 200 left it alive in the
        // store, and any replica, this one included, restored it at its next request).
        if let Some(shared) = self.shared.as_mut()
            && shared.forget(sid).is_err()
        {
            return store_unavailable();
        }
        self.end_session(key, false);
        if self.shared.is_some() {
            // With its events.
            self.events.forget(sid);
        }
        self.give_back_capacity();
        HttpResponse::empty(200)
    }

    /// Ends a session: DELETE, expiry, or eviction. Streams no client holds go now; the others
    /// end once drained. A later request naming it gets 404. With a shared [`SessionStore`]
    /// only this process's copy ends here (another replica may serve the session, and resume
    /// its streams from the shared events); [`delete`](Self::delete) ends it everywhere.
    ///
    /// `elsewhere`: the session may go on on another replica (this process let its copy go:
    /// expiry or eviction). Requests still awaited on its streams then get an error answer
    /// (`-32603`) in the shared events first: their answers can no longer come, and a client
    /// resuming the stream on any replica learns so, where it was sent back for ever by a
    /// replica with nothing to replay. (A session gone everywhere leaves nothing to resume.)
    fn end_session(&mut self, key: u64, elsewhere: bool) {
        // A session whose ending panicked last time, in a store's code, ends without the
        // stores' calls this time: the expiry timer or the eviction at the session cap would
        // pick it first again, and every session due after it would wait for good.
        let again = self.ending.contains(&key);
        if !again {
            self.ending.push(key);
        }
        self.end_session_once(key, elsewhere && !again);
        self.ending.retain(|&k| k != key);
    }

    /// [`end_session`](Self::end_session), with the stores' calls when `elsewhere`.
    fn end_session_once(&mut self, key: u64, elsewhere: bool) {
        if elsewhere && self.shared.is_some() {
            // Answers the application gave already (still in the connection's output) go
            // out first: they are not abandoned.
            self.pump();
            let _ = self.abandon_awaited(key);
        }
        let gone: Vec<String> = match self.conns.remove(&key) {
            Some(c) => c.session.into_iter().collect(),
            // A session whose connection already went (it closed while its `initialize` was
            // handled): its entry goes too, or the eviction at the session cap would pick it
            // again and again, for good.
            None => (self.sessions.iter())
                .filter(|&(_, &k)| k == key)
                .map(|(sid, _)| sid.clone())
                .collect(),
        };
        for sid in &gone {
            self.sessions.remove(sid);
        }
        self.streams.retain(|_, s| !(s.conn.0 == key && s.detached));
        let ended: Vec<HttpStreamId> = (self.streams.iter_mut())
            .filter(|(_, s)| s.conn.0 == key)
            .map(|(&id, s)| {
                s.done = true;
                id
            })
            .collect();
        for id in ended {
            wake(&mut self.streams, &mut self.woken, id);
        }
        // The store's code last, once the server's own state is whole: a store that panics
        // here leaves no session half ended (its streams open for good, never woken).
        if self.shared.is_none() {
            for sid in &gone {
                self.events.forget(sid);
            }
        }
    }

    /// Answers every request awaited on connection `key`'s streams with an error: the
    /// connection is about to go, and their answers with it. Not when the shared store says
    /// the session is gone (deleted on another replica): nobody would read them, and nothing
    /// would forget them. (The placeholder a 2025-03-26 batch keeps for a member without an
    /// id gets none: the batch's other members are answered.)
    fn abandon_awaited(&mut self, key: u64) -> usize {
        let placeholder = OwnedId::Int(i64::MIN);
        let abandoned: Vec<(HttpStreamId, Vec<OwnedId>)> = (self.streams.iter())
            .filter(|(_, s)| s.conn.0 == key && !s.awaiting.is_empty())
            .map(|(&id, s)| {
                let ids = s.awaiting.iter().filter(|&id| *id != placeholder);
                (id, ids.cloned().collect())
            })
            .collect();
        if abandoned.is_empty() {
            return 0;
        }
        let alive = match (self.shared.as_mut(), self.conns.get(&key)) {
            // (Unless known gone: a store that cannot be reached leaves it alive.)
            (Some(shared), Some(c)) => {
                (c.session.as_deref()).is_some_and(|sid| !matches!(shared.touch(sid), Ok(false)))
            }
            _ => false,
        };
        if !alive {
            return 0;
        }
        let mut frame = Vec::new();
        let mut answered = 0;
        for (stream, ids) in abandoned {
            for id in ids {
                answered += 1;
                frame.clear();
                jsonrpc::encode_error(
                    &mut frame,
                    Some(id.as_id()),
                    jsonrpc::INTERNAL_ERROR,
                    "the server let the session go before answering this request",
                    None,
                );
                self.route(key, stream, &frame);
            }
        }
        answered
    }

    /// The host gives up on a request's stream for good: its shutdown grace is over and the
    /// process is about to end the response. Every request still awaited on the stream gets
    /// an error answer (`-32603`) there, so that its client learns at once that the answer
    /// will not come (the SSE stream "SHOULD eventually include a JSON-RPC response"; a
    /// stateless request's client cannot resume it, and waited for its own time-out). Write
    /// what [`poll_stream`](Self::poll_stream) then gives (the stream finishes with it), or end
    /// the response when it returns 0. Returns how many requests it answered. A stream that
    /// awaits nothing (a GET stream, an answered request's) is left as it is.
    pub fn abandon_stream(&mut self, stream: HttpStreamId) -> usize {
        self.pump();
        let Some(stream) = self.resolve(stream) else {
            return 0;
        };
        let Some(s) = self.streams.get(&stream).filter(|s| !s.detached) else {
            return 0;
        };
        let key = s.conn.0;
        let placeholder = OwnedId::Int(i64::MIN);
        let ids: Vec<OwnedId> = (s.awaiting.iter())
            .filter(|&id| *id != placeholder)
            .cloned()
            .collect();
        if ids.is_empty() {
            return 0;
        }
        // (Marked, as for the application's own commands: the next pump routes the answers.)
        self.mark(key);
        let Some(c) = self.conns.get_mut(&key) else {
            return 0;
        };
        let answered = (ids.iter())
            .filter(|id| {
                let message = "the server shut down before answering this request";
                (c.conn)
                    .respond_error(id.as_id(), jsonrpc::INTERNAL_ERROR, message, None)
                    .is_ok()
            })
            .count();
        self.pump();
        answered
    }

    /// [`abandon_stream`](Self::abandon_stream) for every stream that awaits an answer: for a
    /// host that ends all its responses at once when its shutdown grace is over (Go's
    /// `HTTPServer.AbandonStreams`, C's `mcpw_http_server_abandon_streams`). Write what the
    /// streams then give ([`poll_woken`](Self::poll_woken) names them) before ending them.
    /// Returns how many requests it answered.
    pub fn abandon_streams(&mut self) -> usize {
        self.pump();
        let mut ids: Vec<HttpStreamId> = (self.streams.iter())
            .filter(|(_, s)| !s.detached && !s.awaiting.is_empty())
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable_by_key(|id| id.0);
        ids.into_iter().map(|id| self.abandon_stream(id)).sum()
    }

    /// With a shared [`SessionStore`]: call it once this process stops serving for good,
    /// after its shutdown grace (the tokio host does, as `serve` returns). Every request of a
    /// session that is still awaited, its answer not given, gets an error answer (`-32603`)
    /// in the shared events, so that a client resuming its stream on another replica learns
    /// that it is lost, instead of being sent back with `retry` for as long as it waits.
    /// Answers the application gave already go out first. Without a shared store it does
    /// nothing (the sessions end with the process). Returns how many requests it answered.
    pub fn abandon_requests(&mut self) -> usize {
        if self.shared.is_none() {
            return 0;
        }
        self.pump();
        let working: HashSet<u64> = (self.streams.values())
            .filter(|s| !s.awaiting.is_empty())
            .map(|s| s.conn.0)
            .collect();
        let mut working: Vec<u64> = working.into_iter().collect();
        working.sort_unstable();
        working
            .into_iter()
            .map(|key| self.abandon_awaited(key))
            .sum()
    }

    /// Notes that a client took up (`true`) or let go of one of connection `key`'s streams:
    /// a session without one may expire (and one with one may need a store refresh), so its
    /// deadline is looked at again.
    fn attach(&mut self, key: u64, taken: bool) {
        if let Some(c) = self.conns.get_mut(&key) {
            c.attached = if taken {
                c.attached + 1
            } else {
                c.attached.saturating_sub(1)
            };
            self.note_deadline(key);
        }
    }

    /// Notes that connection `key`'s deadline may have moved earlier: [`Deadlines`] looks at
    /// it again at the next `poll_timeout`. Each connection is noted once until then, and a
    /// host that never asks is not made to hold more than about two notes per connection.
    fn note_deadline(&mut self, key: u64) {
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        if c.deadline_noted.replace(true) {
            return;
        }
        let deadlines = self.deadlines.get_mut();
        deadlines.recheck.push(key);
        if deadlines.recheck.len() > 2 * self.conns.len() + 64 {
            let _ = self.earliest_deadline();
        }
    }

    /// Notes that a session's client did something now.
    fn touch(&mut self, key: u64, now: Timestamp) {
        if let Some(c) = self.conns.get_mut(&key) {
            c.last_active = c.last_active.max(now);
        }
        // Active again: a later ending has the stores' calls again (see `ending`).
        if !self.ending.is_empty() {
            self.ending.retain(|&k| k != key);
        }
    }

    /// The connections whose client holds a stream open (such a session is never idle),
    /// gathered in one pass over the streams.
    #[cfg(debug_assertions)]
    fn busy_conns(&self) -> HashSet<u64> {
        self.streams
            .values()
            .filter(|s| !s.detached)
            .map(|s| s.conn.0)
            .collect()
    }

    /// When a session expires if nothing happens: `None` for a connection without a session
    /// and while its client holds a stream (`busy`).
    fn expiry(&self, c: &Conn, busy: bool) -> Option<Timestamp> {
        (c.session.is_some() && !busy && !c.unclocked)
            .then(|| c.last_active.after(self.config.session_idle_timeout))
    }

    /// Takes the host's time. The sessions whose client let go of its last stream since the
    /// host last gave one start their idle time now: `consume_stream` and `poll_stream` take
    /// no time, and counted from the last request, a session whose answer took longer than
    /// the idle timeout expired as soon as that answer was written (and a stream closed for
    /// polling lost its session before the client's `Last-Event-ID` GET).
    fn clock(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
        for key in std::mem::take(&mut self.unclocked) {
            if let Some(c) = self.conns.get_mut(&key) {
                c.unclocked = false;
                c.last_active = c.last_active.max(now);
                self.note_deadline(key);
            }
        }
    }

    /// When a session must touch the shared [`SessionStore`] again, so that the store does not
    /// expire it before it expires here: every half idle timeout while its client holds a
    /// stream open (never idle here, so it sends no requests that would touch it); and at the
    /// end of the [`shared_touch_interval`](HttpServerConfig::shared_touch_interval) after a
    /// request that came within it, which did not touch the store (the store's expiry, which
    /// may be just the idle timeout, would otherwise run from the touch before that request).
    fn refresh_due(&self, c: &Conn, busy: bool) -> Option<Timestamp> {
        if self.shared.is_none() || c.session.is_none() {
            return None;
        }
        if let Some(failed) = c.touch_failed {
            return Some(failed.after(self.touch_retry()));
        }
        if busy {
            return Some(c.shared_touched.after(self.config.session_idle_timeout / 2));
        }
        // (Without an interval every request touches it: a stream that ends later, the
        // session's idle clock starting again, costs no round trip of its own.)
        let interval = self.config.shared_touch_interval;
        (!interval.is_zero() && c.last_active > c.shared_touched)
            .then(|| c.shared_touched.after(interval))
    }

    /// How soon a touch of the shared store that failed is tried again: an eighth of the idle
    /// timeout (the store's expiry), at most a second and at least 10 ms.
    fn touch_retry(&self) -> Duration {
        (self.config.session_idle_timeout / 8)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    /// The least recently active idle session, to evict at the cap; one with requests still
    /// awaited (its client left their streams) only when every idle one has some: evicting it
    /// ends that work.
    fn least_recently_used_idle(&self) -> Option<u64> {
        // A session's client holds a stream exactly while `attached > 0` (checked against the
        // streams in debug builds by `poll_timeout`): no pass over every stream for that.
        let working: HashSet<u64> = (self.streams.values())
            .filter(|s| !s.awaiting.is_empty())
            .map(|s| s.conn.0)
            .collect();
        self.sessions
            .values()
            .copied()
            .filter(|k| self.conns.get(k).is_none_or(|c| c.attached == 0))
            // (One whose client just let go of its stream is the most recently used.)
            .min_by_key(|k| {
                (self.conns.get(k)).map(|c| (working.contains(k), c.unclocked, c.last_active, *k))
            })
    }

    /// 2025-11-25 sessions (SEP-1699 polling): closes the SSE stream that carries the peer's
    /// request `id` on connection `key` before its answer, so a long-running request does not
    /// hold a connection open. The stream gets a `retry` field and then finishes (the host
    /// ends the response once [`poll_stream`](Self::poll_stream) says so); everything sent for
    /// the request afterwards is kept in the session's event store, and the client's `GET` with
    /// `Last-Event-ID` resumes it, the answer included. Returns `false` (and changes nothing)
    /// when no such stream is open, or when its client cannot resume: stateless requests, and
    /// sessions before 2025-11-25 (no priming event id).
    pub fn close_stream_for_polling(&mut self, key: ConnKey, id: Id<'_>) -> bool {
        self.pump();
        let resumable = self.conns.get(&key.0).is_some_and(|c| {
            c.session.is_some() && c.conn.protocol_version() == Some(ProtocolVersion::V2025_11_25)
        });
        if !resumable {
            return false;
        }
        let id = OwnedId::from(id);
        let retry_ms = self.config.retry_ms;
        let Some(stream_id) = self
            .streams
            .iter()
            .find(|(_, s)| {
                s.conn == key && !s.standalone && !s.detached && !s.done && s.awaiting.contains(&id)
            })
            .map(|(&stream_id, _)| stream_id)
        else {
            return false;
        };
        let Some(c) = self.conns.get(&key.0) else {
            return false;
        };
        let Some(session) = c.session.as_deref() else {
            return false;
        };
        let events: &mut dyn EventStore = if c.store_panicked {
            &mut NoEvents
        } else {
            &mut *self.events
        };
        let before = self.pumping.replace(key.0);
        close_for_polling(
            &mut self.streams,
            events,
            &mut self.woken,
            (session, retry_ms),
            stream_id,
        );
        self.pumping = before;
        true
    }

    /// Ends every stream that only waits for server messages, gracefully (at shutdown, say):
    /// each 2026-07-28 `subscriptions/listen` request gets its result, and each handshake-era
    /// session's GET stream is finished; both end once drained. Streams carrying answers are
    /// left to finish, a GET that resumed a request's stream (`Last-Event-ID`) included.
    /// From then on, such streams end as they open (a GET gets its priming event and what
    /// waited for it; a listen its result), so that a request that arrives during the
    /// shutdown's grace period cannot hold it. Returns how many were ended.
    pub fn end_listen_streams(&mut self) -> usize {
        self.draining = true;
        self.mark_all();
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        let ended = keys.into_iter().map(|k| self.end_listens_of(k)).sum();
        self.pump();
        ended
    }

    /// Ends the listen requests and the GET stream of connection `key` (see
    /// [`end_listen_streams`](Self::end_listen_streams)); how many.
    fn end_listens_of(&mut self, key: u64) -> usize {
        let Some(c) = self.conns.get_mut(&key) else {
            return 0;
        };
        let mut ended = 0;
        for id in c.conn.listen_subscriptions() {
            if c.conn.end_listen(id.as_id()).is_ok() {
                ended += 1;
            }
        }
        // A GET stream never ends by itself; its client resumes it (`Last-Event-ID`) if it
        // wants more, which a server that shuts down no longer takes.
        if let Some(stream) = c.standalone
            && let Some(s) = self.streams.get_mut(&stream)
            && !s.done
        {
            s.done = true;
            wake(&mut self.streams, &mut self.woken, stream);
            ended += 1;
        }
        ended
    }

    /// Moves every connection's output onto its HTTP streams. Call it after answering events
    /// (commands on a [`connection`](Self::connection)); inputs call it themselves. Each
    /// message is taken whole from the connection ([`Connection::poll_frame`]) and written
    /// once, as an SSE event, into its stream.
    pub fn pump(&mut self) {
        // Taken one at a time, not all at once, and what is left to do kept on `self`: when
        // a store's code panics on one connection's output (a host may catch it and go on),
        // the other connections, those still listed, blocked or closed, are not lost with
        // the panic; taken at once, they were lost for good.
        let blocked = std::mem::take(&mut self.blocked);
        self.dirty.extend(blocked);
        self.note_store_panic();
        while let Some(key) = self.dirty.pop() {
            self.pumping = Some(key);
            self.pump_one(key);
        }
        self.pumping = None;
        let blocked = std::mem::take(&mut self.blocked);
        self.dirty.extend(blocked);
        while let Some(key) = self.closing.pop() {
            self.end_closed(key);
        }
    }

    /// The connection whose output the event store's code panicked on (`pumping`, still
    /// set) goes on without that store: its events go out live, unstored, so that a store
    /// that panics every time on it holds nobody else's answers (every host call pumps).
    fn note_store_panic(&mut self) {
        if let Some(key) = self.pumping.take()
            && let Some(c) = self.conns.get_mut(&key)
        {
            c.store_panicked = true;
            self.dirty.push(key);
        }
    }

    /// [`pump`](Self::pump) for connection `key`: its output to its streams (or its
    /// session's backlog), until a stream's client does not keep up (`self.blocked`);
    /// `self.closing` when the connection closed and its output is out.
    fn pump_one(&mut self, key: u64) {
        let mut unstored = NoEvents;
        if let Some(c) = self.conns.get_mut(&key) {
            c.in_dirty = false;
        }
        while let Some(c) = self.conns.get_mut(&key) {
            let Conn {
                conn,
                session,
                standalone,
                closed_standalone,
                backlog,
                backlog_bytes,
                next_event,
                in_dirty,
                kept,
                store_panicked,
                ..
            } = &mut **c;
            let events: &mut dyn EventStore = if *store_panicked {
                &mut unstored
            } else {
                &mut *self.events
            };
            let Some(frame) = conn.poll_frame() else {
                break;
            };
            // A cancellation of one of our requests whose stream has ended (the peer's request
            // it went out with was answered meanwhile) goes where unrelated messages go:
            // stored on the ended stream, no client would ever read it.
            let main = frame.stream == StreamId::MAIN
                || (!self.streams.contains_key(&HttpStreamId(frame.stream.0))
                    && matches!(
                        self.decoder.decode(frame.bytes),
                        Ok(Decoded::Single(Message::Notification(n)))
                            if n.method.eq_str("notifications/cancelled")
                    ));
            let mut target = if main {
                // Unrelated messages go to the session's GET stream, or wait for one.
                standalone.filter(|s| self.streams.contains_key(s))
            } else {
                Some(HttpStreamId(frame.stream.0))
            };
            // A stream another connection holds under this number never carries this
            // connection's frames: they are only stored, for this session. (No flow is
            // known to lead here any more: a `Last-Event-ID` GET no longer takes a
            // finished stream's number. The check stays, as the last line of defence.)
            if let Some(stream) = target
                && self.streams.get(&stream).is_some_and(|s| s.conn.0 != key)
            {
                if let Some(sid) = session.as_deref() {
                    let event_id = *next_event;
                    *next_event += 1;
                    let mut bytes = Vec::new();
                    let text = frame_text(frame.bytes);
                    write_stream_event(&mut bytes, stream, false, event_id, &text);
                    events.append(sid, stream, event_id, &bytes);
                }
                conn.consume_frame();
                continue;
            }
            let cap = self.config.server.limits.max_buffered_output;
            let over = |streams: &HashMap<HttpStreamId, Stream, _>, stream| {
                streams.get(&stream).is_some_and(|s: &Stream| {
                    // One closed for polling takes no more bytes.
                    !s.detached
                        && !s.closing_for_polling
                        && s.buf.len() - s.read + s.unrendered >= cap
                })
            };
            // A GET stream whose client does not read ends (as if that client had gone
            // away): the answers to the session's requests, on their own streams, must
            // not wait behind it. What comes next waits for the client's next GET, which
            // may resume this one from the event store (`Last-Event-ID`).
            if main
                && let Some(stream) = target
                && over(&self.streams, stream)
            {
                if let Some(s) = self.streams.get_mut(&stream) {
                    // When to come back ("SHOULD send an SSE event with a standard `retry`
                    // field before closing the connection"), as the priming event said.
                    if conn.protocol_version() == Some(ProtocolVersion::V2025_11_25) {
                        sse::write_retry(&mut s.buf, self.config.retry_ms);
                    }
                    s.done = true;
                }
                wake(&mut self.streams, &mut self.woken, stream);
                *standalone = None;
                *closed_standalone = Some(stream);
                target = None;
            }
            // The same for a request's stream in a session that can resume it (2025-11-25):
            // it is closed for polling, and its client gets the rest, this frame on, with
            // `Last-Event-ID`; the session's other streams go on.
            if !main
                && let Some(stream) = target
                && let Some(sid) = session.as_deref()
                && conn.protocol_version() == Some(ProtocolVersion::V2025_11_25)
                && self.streams.get(&stream).is_some_and(|s| !s.standalone)
                && over(&self.streams, stream)
            {
                close_for_polling(
                    &mut self.streams,
                    &mut *events,
                    &mut self.woken,
                    (sid, self.config.retry_ms),
                    stream,
                );
            }
            // Backpressure: while a stream's client does not read what waits for it, the
            // connection's output stays in the connection, whose own bound then applies
            // (commands get `OutputFull`), instead of piling up here without end.
            if let Some(stream) = target
                && over(&self.streams, stream)
            {
                // Tried again at every pump until the client reads.
                *in_dirty = true;
                self.blocked.push(key);
                break;
            }
            match target {
                Some(stream) => {
                    let unheld = route_frame(
                        &mut self.streams,
                        &mut *events,
                        (session.as_deref(), next_event),
                        stream,
                        frame.bytes,
                    );
                    if let Some((event, bytes)) = unheld {
                        let limits = KeepLimits {
                            events: self.config.event_store,
                            bytes: self.config.event_store_bytes,
                            total_bytes: self.config.event_store_total_bytes,
                        };
                        (kept.get_or_insert_with(Box::default)).keep(
                            &self.kept_bytes,
                            limits,
                            stream,
                            event,
                            bytes,
                        );
                    }
                    wake(&mut self.streams, &mut self.woken, stream);
                }
                None => {
                    // The oldest go first; the newest always stays.
                    let len = frame.bytes.len();
                    while !backlog.is_empty()
                        && (backlog.len() >= self.config.event_store
                            || *backlog_bytes + len > self.config.event_store_bytes)
                    {
                        if let Some(old) = backlog.pop_front() {
                            *backlog_bytes -= old.len();
                        }
                    }
                    *backlog_bytes += len;
                    backlog.push_back(frame.bytes.to_vec());
                }
            }
            conn.consume_frame();
        }
        // A connection that closed (the application closed it through its view, or its
        // peer stopped reading) ends once its output is out, as if its client had deleted
        // it: nothing would ever answer its session's requests again.
        if let Some(c) = self.conns.get(&key)
            && !c.in_dirty
            && !c.orphaned
            && c.conn.state() == State::Closed
        {
            self.closing.push(key);
        }
    }

    /// Ends connection `key`, which closed: its streams finish once drained, its session is
    /// gone (for every replica: later requests naming it get 404), and the connection itself
    /// goes once its last events (the `Closed` one) are handed out.
    fn end_closed(&mut self, key: u64) {
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        let session = c.session.clone();
        if c.conn.pending_events() > 0 {
            c.orphaned = true;
            self.mark(key);
        } else {
            self.conns.remove(&key);
        }
        self.streams.retain(|_, s| !(s.conn.0 == key && s.detached));
        let ended: Vec<HttpStreamId> = (self.streams.iter_mut())
            .filter(|(_, s)| s.conn.0 == key && !s.done)
            .map(|(&id, s)| {
                s.done = true;
                id
            })
            .collect();
        for id in ended {
            wake(&mut self.streams, &mut self.woken, id);
        }
        if let Some(sid) = session {
            self.sessions.remove(&sid);
            // Gone for every replica first: an event store that panics then leaves no
            // session that another request would load and restore.
            // (Where the store cannot be reached, its record stays until it expires, and a
            // request naming the session meanwhile restores it: nothing here could wait.)
            if let Some(shared) = self.shared.as_mut() {
                let _ = shared.forget(&sid);
            }
            self.events.forget(&sid);
        }
    }

    /// The next stream whose output may have changed since the host last took it here: it got
    /// bytes, finished, was closed for polling, ended with its session, or was taken over by a
    /// `Last-Event-ID` GET (the response that held it ends). A host that parks
    /// one task (or goroutine) per open SSE stream wakes just that stream's task, which then
    /// polls it ([`poll_stream`](Self::poll_stream)); waking every stream after every request
    /// costs each request as many wake-ups and lock turns as there are open streams (a
    /// thousand clients listening on their GET streams made each request 18 times dearer).
    /// Drain it after every call into the server, the streams' own polls included (draining
    /// one stream can move another connection's output along). A stream appears once until
    /// taken; one that ended at the host's own call (`stream_closed`, `settle`, the last
    /// `consume_stream`) does not appear. A host that never calls it loses nothing: the
    /// list keeps at most one entry per stream.
    pub fn poll_woken(&mut self) -> Option<HttpStreamId> {
        if let Some(stale) = self.superseded.pop() {
            return Some(stale);
        }
        while let Some(id) = self.woken.pop() {
            if let Some(s) = self.streams.get_mut(&id)
                && std::mem::take(&mut s.woken)
            {
                return Some(s.handle);
            }
        }
        None
    }

    /// [`route_frame`] for a frame that is not in a connection's output (a backlog entry).
    fn route(&mut self, key: u64, stream: HttpStreamId, frame: &[u8]) {
        let limits = self.keep_limits();
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        let events: &mut dyn EventStore = if c.store_panicked {
            &mut NoEvents
        } else {
            &mut *self.events
        };
        // (Noted while the store runs: should it panic, the session goes on without it.)
        let before = self.pumping.replace(key);
        let unheld = route_frame(
            &mut self.streams,
            events,
            (c.session.as_deref(), &mut c.next_event),
            stream,
            frame,
        );
        self.pumping = before;
        if let Some((event, bytes)) = unheld {
            (c.kept.get_or_insert_with(Box::default)).keep(
                &self.kept_bytes,
                limits,
                stream,
                event,
                bytes,
            );
        }
        wake(&mut self.streams, &mut self.woken, stream);
    }

    /// The bytes waiting on an SSE stream, and whether it ends after them: end the response
    /// once they are written. A poll that finds it finished with nothing left lets it go
    /// there and then (as the last [`consume_stream`](Self::consume_stream) would): the host
    /// ends the response and need not report zero bytes written. `None` for a stream the host no longer holds (it ended, its
    /// client went away, it was closed for polling, or a `Last-Event-ID` GET took it over).
    pub fn poll_stream(&mut self, stream: HttpStreamId) -> Option<StreamOutput<'_>> {
        self.pump();
        let stream = self.resolve(stream)?;
        // A detached stream belongs to no response any more (its client went away, or it was
        // closed for polling): the host has nothing to write.
        let s = self.streams.get_mut(&stream).filter(|s| !s.detached)?;
        // The host is draining it: the answer can no longer become a plain JSON body.
        let recorded = s.record;
        if recorded {
            s.render();
            s.stop_recording();
        }
        let drained = s.read == s.buf.len() && (s.done || s.closing_for_polling);
        if recorded {
            self.store_unstored(stream);
        }
        if drained {
            // Finished with nothing left: the host ends the response now, and need not report
            // zero bytes written, so the stream is let go here as by the last `consume_stream`
            // (it would otherwise hold its session open for good).
            self.drained(stream);
            return Some(StreamOutput {
                bytes: &[],
                finished: true,
            });
        }
        let s = self.streams.get(&stream)?;
        Some(StreamOutput {
            bytes: &s.buf[s.read..],
            finished: s.done || s.closing_for_polling,
        })
    }

    /// Reports that `n` bytes of [`poll_stream`](Self::poll_stream) were written (`n` larger
    /// than what is waiting counts as all of it). A finished stream with nothing left is
    /// forgotten (and, for a stateless request, its connection).
    pub fn consume_stream(&mut self, stream: HttpStreamId, n: usize) {
        let Some(stream) = self.resolve(stream) else {
            return;
        };
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        s.read = s.read.saturating_add(n).min(s.buf.len());
        s.ids_shown |= n > 0;
        let key = s.conn.0;
        if s.read == s.buf.len() {
            self.drained(stream);
        }
        // Shutting down: a listen whose end found the connection's output full (its client
        // behind on reading) ends now that the client reads ("call again once it drained").
        if self.draining && self.end_listens_of(key) > 0 {
            self.mark(key);
            self.pump();
        }
    }

    /// Everything stream `stream` had was written: a finished one is forgotten (with a
    /// stateless request's connection), one closed for polling lives on detached.
    fn drained(&mut self, stream: HttpStreamId) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        // A long-lived (standalone) stream does not keep a large message's capacity.
        crate::frame::empty(&mut s.buf);
        s.read = 0;
        let (key, held) = (s.conn.0, !s.detached);
        if held
            && (s.done || s.closing_for_polling)
            && let Some(c) = self.conns.get_mut(&key)
            && c.session.is_some()
            && !c.unclocked
        {
            c.unclocked = true;
            self.unclocked.push(key);
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        if s.done {
            self.streams.remove(&stream);
            if held {
                self.attach(key, false);
            }
            // Written out to the end: what a resumption gave it to carry goes.
            if let Some(k) = self.conns.get_mut(&key).and_then(|c| c.kept.as_mut()) {
                k.delivered(stream);
            }
            self.forget_stateless(key);
        } else if s.closing_for_polling {
            // Closed for polling: what comes next waits in the store for the client's
            // `Last-Event-ID` GET.
            s.closing_for_polling = false;
            s.detached = true;
            if held {
                self.attach(key, false);
            }
        }
    }

    /// The client went away from a stream. In the stateless era that cancels the request;
    /// in a session the stream's events stay in the store for resumption. The connection's
    /// output that the stream held back moves on at once: the streams it fills are named by
    /// [`poll_woken`](Self::poll_woken).
    pub fn stream_closed(&mut self, now: Timestamp, stream: HttpStreamId) {
        self.close_stream(now, stream);
        self.pump();
    }

    /// [`stream_closed`](Self::stream_closed) without the pump.
    fn close_stream(&mut self, now: Timestamp, stream: HttpStreamId) {
        self.clock(now);
        // A response that a `Last-Event-ID` GET superseded no longer has a stream.
        let Some(stream) = self.resolve(stream) else {
            return;
        };
        // What it carried must be resumable from the store, and the answers its client may
        // not have received are kept aside too. The store's code runs last, once the stream
        // is closed here: a store that panics leaves no stream that nobody holds (attached,
        // its session never expired).
        let unstored = (self.streams.get_mut(&stream))
            .map(|s| (s.conn.0, std::mem::take(&mut s.unstored)))
            .filter(|(_, unstored)| !unstored.is_empty())
            .and_then(|(key, unstored)| {
                let c = self.conns.get(&key).filter(|c| !c.store_panicked)?;
                Some((key, c.session.clone()?, unstored))
            });
        self.keep_unread_answers(stream);
        self.close_stream_here(now, stream);
        if let Some((key, session, unstored)) = unstored {
            let before = self.pumping.replace(key);
            for (event, bytes) in &unstored {
                self.events.append(&session, stream, *event, bytes);
            }
            self.pumping = before;
        }
    }

    /// [`close_stream`](Self::close_stream) without the store's part.
    fn close_stream_here(&mut self, now: Timestamp, stream: HttpStreamId) {
        let Some(s) = self.streams.remove(&stream) else {
            return;
        };
        let key = s.conn.0;
        if !s.detached {
            self.attach(key, false);
        }
        // The idle clock of a session starts when its client lets go of its last stream.
        self.touch(key, now);
        let stateless = self.conns.get(&key).is_some_and(|c| c.session.is_none());
        if stateless {
            if let Some(c) = self.conns.get_mut(&key) {
                for id in s.awaiting.iter() {
                    let mut note = Vec::new();
                    note.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":");
                    match id.as_id() {
                        Id::Int(n) => note.extend_from_slice(n.to_string().as_bytes()),
                        Id::Str(s) => {
                            note.push(b'"');
                            note.extend_from_slice(s.raw().as_bytes());
                            note.push(b'"');
                        }
                    }
                    note.extend_from_slice(b",\"reason\":\"client disconnected\"}}");
                    c.conn.handle_frame(now, StreamId(stream.0), &note);
                }
                // The application learns of the cancellation from the connection's events:
                // it goes once they are handed out (`poll_event`).
                if c.conn.pending_events() > 0 {
                    c.orphaned = true;
                    self.mark(key);
                    return;
                }
            }
            self.conns.remove(&key);
        } else if let Some(c) = self.conns.get_mut(&key)
            && !c.orphaned
        {
            if c.standalone == Some(stream) {
                c.standalone = None;
                c.closed_standalone = Some(stream);
            } else if !s.done && !s.awaiting.is_empty() {
                // Answers still to come: keep the stream (without bytes; the store has them)
                // so that a `Last-Event-ID` GET can take it over and see it through.
                self.streams.insert(
                    stream,
                    Stream {
                        buf: Vec::new(),
                        read: 0,
                        frames: SmallVec::new(),
                        rendered: 0,
                        unrendered: 0,
                        record: false,
                        unstored: Vec::new(),
                        detached: true,
                        closing_for_polling: false,
                        error_code: None,
                        woken: false,
                        ..s
                    },
                );
            }
        }
    }

    /// Call after answering the events a request produced, before sending the response's
    /// headers: a stream whose whole answer is already there (one message, the request's
    /// answer) becomes a plain JSON body, with the HTTP status a 2026-07-28 error maps to (an
    /// application's -32021 gets 400, for example). Any other response is returned unchanged.
    pub fn settle(&mut self, response: HttpResponse) -> HttpResponse {
        let Body::Stream(handle) = response.body else {
            return response;
        };
        self.pump();
        let Some(id) = self.resolve(handle) else {
            return response;
        };
        match self.streams.get(&id) {
            Some(s)
                if s.record
                    && s.done
                    && !s.standalone
                    && s.frames.len() == 1
                    && s.first_answers => {}
            _ => {
                // It stays a stream: ask proxies not to buffer it (see `sse_headers`), once
                // (a GET stream has the header already).
                let mut response = response;
                let header = no_proxy_buffering();
                if !response.headers.iter().any(|(name, _)| *name == header.0) {
                    response.headers.push(header);
                }
                return response;
            }
        }
        let Some(mut s) = self.streams.remove(&id) else {
            return response;
        };
        let (_, frame) = s.frames.swap_remove(0);
        let key = s.conn.0;
        if !s.detached {
            self.attach(key, false);
        }
        let modern = self.conns.get(&key).is_some_and(|c| c.session.is_none());
        let status = match s.error_code {
            Some(code) if modern => status_for_code(code),
            _ => 200,
        };
        self.forget_stateless(key);
        // The SSE head becomes a JSON one, in place: its content type's string is reused.
        let mut headers = response.headers;
        let mut typed = false;
        headers.retain_mut(|(name, value)| {
            if name.eq_ignore_ascii_case("Cache-Control") {
                return false;
            }
            if name.eq_ignore_ascii_case("Content-Type") {
                if typed {
                    return false; // one content type
                }
                value.clear();
                value.push_str("application/json");
                typed = true;
            }
            true
        });
        if !typed {
            headers.push(("Content-Type", "application/json".into()));
        }
        HttpResponse {
            status,
            headers,
            body: Body::Complete("application/json", frame),
        }
    }

    /// Keeps aside the answers in a session's stream that its host had not written out
    /// whole: its client is about to resume it, and the store may have lost them by then.
    /// They are read back from the stream's own SSE events (this happens only when a client
    /// goes away with bytes unwritten, so the common path records nothing).
    fn keep_unread_answers(&mut self, stream: HttpStreamId) {
        let limits = self.keep_limits();
        let Some(s) = self.streams.get(&stream) else {
            return;
        };
        // A client that saw none of its event ids cannot resume it.
        if s.read == s.buf.len() || !s.ids_shown {
            return;
        }
        let Some(c) = (self.conns.get_mut(&s.conn.0)).filter(|c| c.session.is_some()) else {
            return;
        };
        // Kept under the stream their ids name: a resumption's response carries another
        // stream's events, and that is the stream a client resumes.
        for (named, event, bytes, data) in kept::unwritten_events(&s.buf, s.read) {
            let (answered, batch, _) = answered_by(&data);
            if answered.is_some() || batch {
                (c.kept.get_or_insert_with(Box::default)).keep(
                    &self.kept_bytes,
                    limits,
                    named,
                    event,
                    bytes.to_vec(),
                );
            }
        }
    }

    /// Moves a stream's held-back events into the event store, in order. (Not for a session
    /// whose store's code panicked on its output: its events go out live, unstored.)
    fn store_unstored(&mut self, stream: HttpStreamId) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        if s.unstored.is_empty() {
            return;
        }
        let unstored = std::mem::take(&mut s.unstored);
        let key = s.conn.0;
        let Some(session) = (self.conns.get(&key))
            .filter(|c| !c.store_panicked)
            .and_then(|c| c.session.as_deref())
        else {
            return;
        };
        // (Noted while the store runs: should it panic, the session goes on without it.)
        let before = self.pumping.replace(key);
        for (event, bytes) in &unstored {
            self.events.append(session, stream, *event, bytes);
        }
        self.pumping = before;
    }

    fn forget_stateless(&mut self, key: u64) {
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        let stateless = c.session.is_none();
        // A stateless request's streams are never detached (that is for resumption, in a
        // session), so its count of held streams is all of them: no scan of every stream.
        let open = c.attached > 0;
        debug_assert!(
            !stateless || open == self.streams.values().any(|s| s.conn.0 == key),
            "a stateless connection with a detached stream"
        );
        if stateless
            && !open
            && let Some(mut c) = self.conns.remove(&key)
        {
            c.conn.swap_client_caps(&mut self.stateless_caps);
            self.retire(c);
        }
    }

    /// Keeps a finished connection's box and buffers for the next one, when they are small
    /// (a large answer's buffer is not kept alive for every later request).
    fn retire(&mut self, c: Box<Conn>) {
        if c.conn.reusable_bytes() <= 64 * 1024 {
            self.spare = Some(c);
        }
    }

    /// The next event from any connection, with the key to answer it through. Views borrow
    /// the server until the next call that takes it mutably.
    pub fn poll_event(&mut self) -> Option<(ConnKey, Event<'_>)> {
        loop {
            if self.polling.is_empty() {
                if self.eventful.is_empty() {
                    return None;
                }
                // The connections that got input or commands since the last round, oldest
                // first.
                // Swapped, so that both lists keep their capacity.
                std::mem::swap(&mut self.polling, &mut self.eventful);
                for key in &self.polling {
                    if let Some(c) = self.conns.get_mut(key) {
                        c.in_eventful = false;
                    }
                }
                self.polling.sort_unstable_by(|a, b| b.cmp(a));
                self.polling.dedup();
            }
            let Some(&key) = self.polling.last() else {
                continue;
            };
            let has = self.conns.get_mut(&key).is_some_and(|c| {
                // Peek: an event is handed out below; if none, move on.
                c.conn.poll_event().is_some()
            });
            if !has {
                self.polling.pop();
                if self.conns.get(&key).is_some_and(|c| c.orphaned) {
                    self.conns.remove(&key);
                }
                continue;
            }
            // The event was retired by the peek: the engine keeps it as "current", so hand
            // out the same one again by re-borrowing.
            let c = self.conns.get_mut(&key)?;
            return c.conn.current_event().map(|e| (ConnKey(key), e));
        }
    }

    /// Fires the timers that are due: connections' timeouts, idle sessions' expiry, and the
    /// shared store's refreshes. Call it at [`poll_timeout`](Self::poll_timeout); calling it
    /// earlier, or on every turn of an event loop, is harmless and cheap: only connections
    /// whose deadline has come are visited, so idle sessions cost nothing here.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.reclaim_unhanded(now);
        self.clock(now);
        let due = self.take_due(now);
        for &key in &due {
            if let Some(c) = self.conns.get_mut(&key) {
                c.conn.handle_timeout(now);
            }
            // Queues its next deadline, and has `pump` and `poll_event` look at it.
            self.mark(key);
        }
        self.pump();
        // A session's client holds a stream exactly while `attached > 0` (checked against
        // the streams in debug builds by `poll_timeout`).
        let expired: Vec<u64> = due
            .iter()
            .copied()
            .filter(|k| {
                self.conns
                    .get(k)
                    .and_then(|c| self.expiry(c, c.attached > 0))
                    .is_some_and(|at| at <= now)
            })
            .collect();
        for key in expired {
            self.end_session(key, true);
        }
        let refresh: Vec<u64> = due
            .iter()
            .copied()
            .filter(|k| {
                self.conns
                    .get(k)
                    .and_then(|c| self.refresh_due(c, c.attached > 0))
                    .is_some_and(|at| at <= now)
            })
            .collect();
        for key in refresh {
            let alive = match (self.shared.as_mut(), self.conns.get_mut(&key)) {
                (Some(shared), Some(c)) => {
                    match c.session.as_deref().map(|sid| shared.touch(sid)) {
                        Some(Ok(alive)) => {
                            c.shared_touched = now;
                            c.touch_failed = None;
                            alive
                        }
                        // Tried again soon (`refresh_due`): the store's expiry runs from the last
                        // touch that went through, and the next regular one would come too late.
                        Some(Err(StoreUnavailable)) => {
                            c.touch_failed = Some(now);
                            true
                        }
                        None => true,
                    }
                }
                _ => true,
            };
            if !alive {
                // Deleted on another replica while this one streamed to its client.
                self.end_session(key, false);
            }
        }
        if self.next_keepalive.is_some_and(|at| at <= now) {
            self.keep_alive();
            self.next_keepalive = match self.config.keepalive {
                Some(every) if !self.streams.is_empty() => Some(now.after(every)),
                _ => None, // armed again by the next request
            };
        }
        self.give_back_capacity();
    }

    /// Writes a comment line on every stream the host drains that has nothing waiting, and
    /// wakes it. Streams still held back (their answer may yet become a JSON body), finished
    /// or detached ones, and those whose client is not keeping up get none.
    fn keep_alive(&mut self) {
        let quiet: Vec<HttpStreamId> = (self.streams.iter())
            .filter(|(_, s)| {
                !s.record
                    && !s.done
                    && !s.detached
                    && !s.closing_for_polling
                    && s.read == s.buf.len()
            })
            .map(|(&id, _)| id)
            .collect();
        for id in quiet {
            if let Some(s) = self.streams.get_mut(&id) {
                s.buf.extend_from_slice(KEEPALIVE_COMMENT);
            }
            wake(&mut self.streams, &mut self.woken, id);
        }
    }

    /// Takes the connections whose deadline is at or before `now` off the deadline heap, in
    /// deadline order. Each is queued again by [`mark`](Self::mark).
    fn take_due(&mut self, now: Timestamp) -> Vec<u64> {
        let mut due = Vec::new();
        // `earliest_deadline` settles `recheck` and the heap's top first.
        while self.earliest_deadline().is_some_and(|at| at <= now) {
            let d = self.deadlines.get_mut();
            let Some(Reverse((_, key))) = d.heap.pop() else {
                break;
            };
            d.queued.remove(&key);
            due.push(key);
        }
        #[cfg(debug_assertions)]
        for (k, c) in &self.conns {
            debug_assert!(
                due.contains(k)
                    || self
                        .deadline_with(c, c.attached > 0)
                        .is_none_or(|at| at > now),
                "connection {k} is due but was not taken off the deadline heap"
            );
        }
        due
    }

    /// After a wave of sessions has gone, the tables give their room back (a connection is a
    /// few KiB), so an idle server returns to its baseline.
    fn give_back_capacity(&mut self) {
        fn shrink<K: std::hash::Hash + Eq, V, S: std::hash::BuildHasher>(
            map: &mut HashMap<K, V, S>,
        ) {
            if map.capacity() > 4 * map.len() + 64 {
                map.shrink_to(2 * map.len());
            }
        }
        shrink(&mut self.conns);
        shrink(&mut self.sessions);
        shrink(&mut self.streams);
        let d = self.deadlines.get_mut();
        shrink(&mut d.queued);
        if d.heap.capacity() > 4 * d.heap.len() + 64 {
            d.heap.shrink_to(2 * d.heap.len());
        }
        // Keys of connections that are gone wait in these lists until the host next polls
        // events; a host that rarely does must not keep them.
        let conns = &self.conns;
        self.eventful.retain(|k| conns.contains_key(k));
        self.dirty.retain(|k| conns.contains_key(k));
        self.ending.retain(|k| conns.contains_key(k));
        for list in [&mut self.eventful, &mut self.dirty] {
            if list.capacity() > 4 * list.len() + 64 {
                list.shrink_to(2 * list.len());
            }
        }
        if self.polling.is_empty() {
            self.polling = Vec::new();
        }
    }

    /// The earliest deadline of any connection, or of the streams' next keep-alive comment:
    /// call [`handle_timeout`](Self::handle_timeout) then.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let earliest = self.earliest_deadline();
        #[cfg(debug_assertions)]
        {
            // The heap against a scan of every connection (debug builds: the tests and the
            // fuzz targets check the bookkeeping of `Deadlines` on every call).
            let busy = self.busy_conns();
            let scanned = self
                .conns
                .keys()
                .filter_map(|&k| self.deadline_of(k, &busy))
                .min();
            debug_assert_eq!(earliest, scanned, "the deadline heap lost a deadline");
            for (&k, c) in &self.conns {
                debug_assert_eq!(c.attached > 0, busy.contains(&k), "attached count of {k}");
            }
        }
        let keepalive = self.next_keepalive.filter(|_| !self.streams.is_empty());
        // A session whose idle time waits for the host's time: now, as far as it is known.
        let keepalive = match (keepalive, self.unclocked.is_empty()) {
            (Some(k), false) => Some(k.min(self.now)),
            (None, false) => Some(self.now),
            (k, true) => k,
        };
        match (earliest, keepalive) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The earliest deadline of any connection, from [`Deadlines`].
    fn earliest_deadline(&self) -> Option<Timestamp> {
        let mut deadlines = self.deadlines.borrow_mut();
        let d = &mut *deadlines;
        let deadline = |key: u64| {
            let c = self.conns.get(&key)?;
            self.deadline_with(c, c.attached > 0)
        };
        let mut recheck = std::mem::take(&mut d.recheck);
        for key in recheck.drain(..) {
            if let Some(c) = self.conns.get(&key) {
                c.deadline_noted.set(false);
            }
            d.offer(key, deadline(key));
        }
        // Empty, with its capacity, unless a wave of connections that has gone left it large.
        if recheck.capacity() <= 4 * self.conns.len() + 64 {
            d.recheck = recheck;
        }

        // Entries of connections that are gone go in bulk, once they are half of them.
        if d.queued.len() > 2 * self.conns.len() + 64 {
            d.queued.retain(|k, _| self.conns.contains_key(k));
            d.heap = d.queued.iter().map(|(&k, &t)| Reverse((t, k))).collect();
        }
        while let Some(&Reverse((at, key))) = d.heap.peek() {
            if d.queued.get(&key) != Some(&at) {
                d.heap.pop(); // superseded by an earlier entry, or its connection is gone
                continue;
            }
            match deadline(key) {
                Some(now_at) if now_at == at => return Some(at),
                later => {
                    // It moved later (or went): queue it again at its real time.
                    d.heap.pop();
                    d.queued.remove(&key);
                    d.offer(key, later);
                }
            }
        }
        None
    }

    /// The deadline of connection `key`: its timers, and for a session its expiry or store
    /// refresh (`busy`, from [`busy_conns`](Self::busy_conns), says whether its client holds
    /// a stream).
    #[cfg(debug_assertions)]
    fn deadline_of(&self, key: u64, busy: &HashSet<u64>) -> Option<Timestamp> {
        let c = self.conns.get(&key)?;
        self.deadline_with(c, busy.contains(&key))
    }

    /// [`deadline_of`](Self::deadline_of) for connection `c`, busy or not.
    fn deadline_with(&self, c: &Conn, busy: bool) -> Option<Timestamp> {
        [
            c.conn.poll_timeout(),
            self.expiry(c, busy),
            self.refresh_due(c, busy),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// A frame of the connection's own output as text: UTF-8 in practice, checked by the vector
/// validator (`from_utf8_lossy` alone cost about 1,500 instructions per small answer).
fn frame_text(frame: &[u8]) -> std::borrow::Cow<'_, str> {
    match crate::jsonrpc::utf8::validate(frame) {
        // SAFETY: `validate` just accepted `frame` as UTF-8.
        Ok(()) => std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(frame) }),
        Err(_) => String::from_utf8_lossy(frame),
    }
}

/// Notes that stream `id`'s output may have changed, for [`HttpServer::poll_woken`]: once
/// until the host takes it. Entries of streams that ended meanwhile are dropped when they
/// outnumber the streams, so a host that never takes them keeps a bounded list.
fn wake(
    streams: &mut FastMap<HttpStreamId, Stream>,
    woken: &mut Vec<HttpStreamId>,
    id: HttpStreamId,
) {
    let Some(s) = streams.get_mut(&id) else {
        return;
    };
    if std::mem::replace(&mut s.woken, true) {
        return;
    }
    woken.push(id);
    if woken.len() > 2 * streams.len() + 64 {
        woken.retain(|id| streams.get(id).is_some_and(|s| s.woken));
    }
}

/// Closes a request's stream for polling (SEP-1699): what it holds is written out, then a
/// `retry` field, and it finishes once drained; later frames go to the event store only,
/// for the client's `Last-Event-ID` GET. `session` is its session id and the retry delay.
fn close_for_polling(
    streams: &mut FastMap<HttpStreamId, Stream>,
    events: &mut dyn EventStore,
    woken: &mut Vec<HttpStreamId>,
    session: (&str, u64),
    stream: HttpStreamId,
) {
    let Some(s) = streams.get_mut(&stream) else {
        return;
    };
    s.render();
    sse::write_retry(&mut s.buf, session.1);
    s.closing_for_polling = true;
    // Its host writes what it holds (the priming event's id among it) before it finishes:
    // its client can resume it, and answers given meanwhile are kept aside for that.
    s.ids_shown = true;
    // Its answer can no longer be a plain JSON body.
    s.stop_recording();
    for (event, bytes) in std::mem::take(&mut s.unstored) {
        events.append(session.0, stream, event, &bytes);
    }
    wake(streams, woken, stream);
}

/// Writes `text` to `out` as one SSE event of `stream`, numbered `event_id`: its id is
/// `STREAM-EVENT`, or `gSTREAM-EVENT` on a session's GET stream (`listen`), formatted on the
/// stack (two u64s, a dash and the mark fit in 42 bytes). The mark lets any process that
/// serves the session tell a GET stream's resumption from a request's, whether or not it
/// ever held that stream.
fn write_stream_event(
    out: &mut Vec<u8>,
    stream: HttpStreamId,
    listen: bool,
    event_id: u64,
    text: &str,
) {
    let mut id_buf = [0u8; 48];
    let id_len = {
        let (mark, mut rest) = id_buf.split_at_mut(usize::from(listen));
        mark.copy_from_slice(&LISTEN_MARK.as_bytes()[..mark.len()]);
        let _ = write!(rest, "{}-{event_id}", stream.0);
        48 - rest.len()
    };
    let id = std::str::from_utf8(&id_buf[..id_len]).unwrap_or("0");
    out.reserve(text.len() + id_len + 32);
    sse::write_event(out, Some(id), None, text);
}

/// Writes `text` to `out` as one SSE event without an id (a stateless request's stream).
fn write_unnumbered_event(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 8);
    sse::write_event(out, None, None, text);
}

impl Stream {
    /// Writes the recorded frames not yet in `buf` as SSE events, in order: the host is about
    /// to drain the stream, or its answer can no longer be a JSON body. Only a stateless
    /// request's stream has any (a session's frames become events as they are routed), so
    /// they carry no event id: 2026-07-28 removed them with resumption (SEP-2575).
    fn render(&mut self) {
        let Some(pending) = self.frames.get(self.rendered..).filter(|p| !p.is_empty()) else {
            return;
        };
        let held = !self.detached && !self.closing_for_polling;
        for (_, frame) in pending {
            if !held {
                break;
            }
            write_unnumbered_event(&mut self.buf, &frame_text(frame));
        }
        self.rendered = self.frames.len();
        self.unrendered = 0;
    }

    /// The stream is SSE for good: its frames are no longer kept (render them first).
    fn stop_recording(&mut self) {
        debug_assert_eq!(self.unrendered, 0, "recorded frames dropped unwritten");
        self.record = false;
        self.frames = SmallVec::new();
        self.rendered = 0;
        self.unrendered = 0;
    }
}

/// Writes one message as an SSE event on `stream`, stores it for resumption when the
/// connection is a session, and ends the stream after the last awaited answer. `conn` is the
/// connection's session id and event counter.
///
/// Returns an answer that went to the store only, its stream being held by no response
/// (event number, SSE bytes): the caller keeps it aside too (`Conn::kept`).
fn route_frame(
    streams: &mut FastMap<HttpStreamId, Stream>,
    events: &mut dyn EventStore,
    conn: (Option<&str>, &mut u64),
    stream: HttpStreamId,
    frame: &[u8],
) -> Option<(u64, Vec<u8>)> {
    let (session, next_event) = conn;
    let event_id = *next_event;
    *next_event += 1;
    let text = frame_text(frame);
    let held = |s: &Stream| !s.detached && !s.closing_for_polling;
    // A session's event that no response carries.
    let mut unheld = None;
    if let Some(session) = session {
        // Kept for resumption: the event is built once, then stored and written.
        let mut bytes = Vec::new();
        let mut s = streams.get_mut(&stream);
        let listen = s.as_ref().is_some_and(|s| s.standalone);
        write_stream_event(&mut bytes, stream, listen, event_id, &text);
        match &mut s {
            Some(s) if s.record => s.unstored.push((event_id, bytes.clone())),
            _ => events.append(session, stream, event_id, &bytes),
        }
        match s {
            Some(s) if held(s) => s.buf.extend_from_slice(&bytes),
            // Kept aside too when its client can come back for it.
            Some(s) if s.ids_shown => unheld = Some((event_id, bytes)),
            _ => {}
        }
    } else if let Some(s) = streams.get_mut(&stream).filter(|s| held(s) && !s.record) {
        // Nothing to store without a session: straight into the stream (a recorded one is
        // written when the host drains it, if it does), with no event id: nothing can resume
        // a 2026-07-28 stream, and a client that saw ids would try.
        write_unnumbered_event(&mut s.buf, &text);
    }
    let (answered, batch, error_code) = answered_by(&text);
    let s = streams.get_mut(&stream)?;
    s.error_code = error_code;
    let answers = answered.is_some() || batch;
    if s.record {
        s.frames.push((event_id, frame.to_vec()));
        if s.frames.len() == 1 {
            s.first_answers = answered.is_some() || batch;
        }
        if session.is_some() {
            s.rendered = s.frames.len();
        } else {
            s.unrendered += frame.len();
        }
    }
    if let Some(id) = answered {
        s.awaiting.remove(&id);
    }
    if batch {
        s.awaiting.clear();
    }
    if s.awaiting.is_empty() && !s.standalone {
        s.done = true;
        if s.detached {
            // Nobody holds it: what it carried waits in the store for a resumption.
            streams.remove(&stream);
        }
    }
    unheld.filter(|_| answers)
}

/// The request ids a body's `notifications/cancelled` name (a batch may carry several).
fn cancelled_ids(decoded: &Decoded<'_>) -> Vec<OwnedId> {
    let one = |m: &Message<'_>| match m {
        Message::Notification(n) if n.method.eq_str("notifications/cancelled") => n
            .params
            .and_then(|p| p.unique("requestId"))
            .and_then(|v| v.as_id())
            .map(OwnedId::from),
        _ => None,
    };
    match decoded {
        Decoded::Single(m) => one(m).into_iter().collect(),
        Decoded::Batch(members) => members.iter().flatten().filter_map(one).collect(),
    }
}

/// The ids of the requests a stream still owes answers to. Most streams carry one request,
/// which needs no table; a batch's ids go in a set (SipHash: the client picks them).
#[derive(Default)]
enum Awaiting {
    #[default]
    Nothing,
    One(OwnedId),
    Many(HashSet<OwnedId>),
}

impl Awaiting {
    fn insert(&mut self, id: OwnedId) {
        match std::mem::take(self) {
            Awaiting::Nothing => *self = Awaiting::One(id),
            Awaiting::One(first) if first == id => *self = Awaiting::One(first),
            Awaiting::One(first) => *self = Awaiting::Many(HashSet::from([first, id])),
            Awaiting::Many(mut set) => {
                set.insert(id);
                *self = Awaiting::Many(set);
            }
        }
    }

    fn contains(&self, id: &OwnedId) -> bool {
        match self {
            Awaiting::Nothing => false,
            Awaiting::One(one) => one == id,
            Awaiting::Many(set) => set.contains(id),
        }
    }

    fn remove(&mut self, id: &OwnedId) {
        match self {
            Awaiting::One(one) if one == id => *self = Awaiting::Nothing,
            Awaiting::Many(set) => {
                set.remove(id);
            }
            _ => {}
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Awaiting::Nothing => true,
            Awaiting::One(_) => false,
            Awaiting::Many(set) => set.is_empty(),
        }
    }

    fn clear(&mut self) {
        *self = Awaiting::Nothing;
    }

    fn iter(&self) -> impl Iterator<Item = &OwnedId> {
        let (one, many) = match self {
            Awaiting::Nothing => (None, None),
            Awaiting::One(one) => (Some(one), None),
            Awaiting::Many(set) => (None, Some(set)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// Which request a frame of a connection's own output answers (a batch answers all of
/// them), and the code of an error answer (the status of a stateless request's JSON body,
/// see `settle`). The engine wrote the frame, so it is valid JSON-RPC: the envelope's members
/// are looked up, not decoded and validated again (that cost ~1,800 instructions per answer).
#[inline(always)]
fn answered_by(frame: &str) -> (Option<OwnedId>, bool, Option<i64>) {
    let frame = frame.trim_ascii();
    // The encoder's own order: `{"jsonrpc":"2.0","id":<id>,"result":…}`. Seen that far, the
    // frame is a success answer to <id>, and the result (most of the frame) is not walked.
    if let Some(rest) = frame.strip_prefix(r#"{"jsonrpc":"2.0","id":"#) {
        let end = jsonrpc::skip_valid(rest.as_bytes(), 0);
        if let Some(id) = rest.get(..end)
            && rest.as_bytes()[end..].starts_with(br#","result":"#)
        {
            return (
                RawJson::validated(id).as_id().map(OwnedId::from),
                false,
                None,
            );
        }
    }
    let message = RawJson::validated(frame);
    if message.get().starts_with('[') {
        return (None, true, None);
    }
    if !message.is_object() {
        return (None, false, None);
    }
    let found = message.get_each(["id", "method", "error"]);
    let member = |i| found.get(i).ok().flatten();
    if member(1).is_some() {
        return (None, false, None); // a request or a notification of ours
    }
    let id = member(0).and_then(|v| v.as_id()).map(OwnedId::from);
    let code = member(2)
        .and_then(|e| e.unique("code"))
        .and_then(|c| c.as_i64());
    (id, false, code)
}

/// The headers the server reads, found in one pass over a request's headers (each lookup by
/// [`HttpRequest::header`] is a pass of its own, and a request took about ten). Each is the
/// first of its name, as [`HttpRequest::header`] gives it.
#[derive(Default)]
struct Known<'a> {
    host: Option<&'a str>,
    origin: Option<&'a str>,
    content_type: Option<&'a str>,
    accept: Option<&'a str>,
    /// `Accept` appears more than once: [`accepts`] reads them all.
    accepts_more: bool,
    session: Option<&'a str>,
    version: Option<&'a str>,
    method: Option<&'a str>,
    name: Option<&'a str>,
    last_event_id: Option<&'a str>,
    /// Some MCP header appears twice, or there are two `Mcp-Param-*` headers (which may
    /// share a name): [`duplicated_mcp_header`] has to look.
    may_repeat: bool,
    /// `Host` appears twice: which one the Host check should read is anyone's guess.
    host_repeated: bool,
    /// `Origin` appears twice: as for `Host` (a proxy may merge or pick another one).
    origin_repeated: bool,
    /// `Content-Type` appears twice: a single value (RFC 9110), whose first copy the check of
    /// the body's type would read, and an intermediary perhaps the other.
    content_type_repeated: bool,
    /// A header's name is not an RFC 9110 token (empty, or with a space, say:
    /// `Content-Length : 5`, which a proxy in front may read as a length).
    bad_name: bool,
}

/// `value` without the optional whitespace around it (spaces and tabs), at the cost of two
/// byte compares when there is none (the usual case).
fn trim_ows(value: &str) -> &str {
    let ows = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let bytes = value.as_bytes();
    if ows(bytes.first()) || ows(bytes.last()) {
        value.trim_matches([' ', '\t'])
    } else {
        value
    }
}

/// Whether `name` is an RFC 9110 token (`tchar`s), as every header name must be.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl<'a> Known<'a> {
    fn of(headers: &[(&str, &'a str)]) -> Self {
        let mut k = Known::default();
        let mut params = 0usize;
        for &(name, value) in headers {
            k.bad_name |= !is_token(name);
            let is = |known: &str| name.eq_ignore_ascii_case(known);
            // The length picks the one name to compare with.
            let (slot, mcp) = match name.len() {
                4 if is("Host") => {
                    k.host_repeated |= k.host.is_some();
                    (&mut k.host, false)
                }
                6 if is("Origin") => {
                    k.origin_repeated |= k.origin.is_some();
                    (&mut k.origin, false)
                }
                6 if is("Accept") => {
                    k.accepts_more |= k.accept.is_some();
                    (&mut k.accept, false)
                }
                8 if is(crate::http::NAME_HEADER) => (&mut k.name, true),
                10 if is(crate::http::METHOD_HEADER) => (&mut k.method, true),
                12 if is("Content-Type") => {
                    k.content_type_repeated |= k.content_type.is_some();
                    (&mut k.content_type, false)
                }
                13 if is(crate::http::LAST_EVENT_ID_HEADER) => (&mut k.last_event_id, true),
                14 if is(crate::http::SESSION_HEADER) => (&mut k.session, true),
                20 if is(crate::http::VERSION_HEADER) => (&mut k.version, true),
                n if n >= 10 && name.as_bytes()[..10].eq_ignore_ascii_case(b"Mcp-Param-") => {
                    params += 1;
                    continue;
                }
                _ => continue,
            };
            match slot {
                Some(_) => k.may_repeat |= mcp,
                // (Optional whitespace around a value is not part of it, RFC 9110 §5.5;
                // HTTP parsers strip it, but a host may hand values over as they came.)
                None => *slot = Some(trim_ows(value)),
            }
        }
        k.may_repeat |= params > 1;
        k
    }
}

/// The first MCP header (or `Mcp-Param-*` header) that appears more than once: the earliest
/// one with the same name as one before it. A client may send many `Mcp-Param-*` headers (Go's
/// `net/http` takes a megabyte of them, some 50,000): see [`headers::first_repeat`]. With
/// `sessionless`, `Mcp-Session-Id` and `Last-Event-ID` are not looked at.
fn duplicated_mcp_header<'a>(headers: &[(&'a str, &str)], sessionless: bool) -> Option<&'a str> {
    // (The session's two come last: a stateless request's are not read.)
    const READ: [&str; 5] = [
        crate::http::VERSION_HEADER,
        crate::http::METHOD_HEADER,
        crate::http::NAME_HEADER,
        crate::http::SESSION_HEADER,
        crate::http::LAST_EVENT_ID_HEADER,
    ];
    let read = if sessionless { &READ[..3] } else { &READ[..] };
    let mcp_header = |name: &str| {
        read.iter().any(|h| h.eq_ignore_ascii_case(name))
            || name
                .get(..10)
                .is_some_and(|p| p.eq_ignore_ascii_case("Mcp-Param-"))
    };
    let mcp: SmallVec<[&'a str; 8]> = headers
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| mcp_header(name))
        .collect();
    headers::first_repeat(&mcp).map(|i| mcp[i])
}

/// The media ranges of an `Accept` value, each with its parameters (`;q=0.5`, or empty).
fn media_ranges(value: &str) -> impl Iterator<Item = (&str, &str)> {
    // Split by bytes: `str::split` with a `char` costs about 500 instructions on a typical
    // `Accept` (`,` and `;` are ASCII, so every cut falls on a character boundary).
    let mut rest = value;
    std::iter::from_fn(move || {
        while !rest.is_empty() {
            let b = rest.as_bytes();
            let end = b.iter().position(|&c| c == b',').unwrap_or(b.len());
            let item = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or("");
            let params = item.bytes().position(|c| c == b';').unwrap_or(item.len());
            let media = item[..params].trim_ascii();
            if !media.is_empty() {
                return Some((media, &item[params..]));
            }
        }
        None
    })
}

/// Whether the parameters of a media range (`;q=0;level=1`) give it the weight 0: `q=0`, or
/// `0.` with up to three zeros (RFC 9110 §12.4.2). A missing or malformed weight is not 0.
fn weight_is_zero(params: &str) -> bool {
    params.split(';').any(|p| {
        let Some(eq) = p.bytes().position(|b| b == b'=') else {
            return false;
        };
        let (name, value) = (&p[..eq], &p[eq + 1..]);
        let value = value.trim_ascii();
        name.trim_ascii().eq_ignore_ascii_case("q")
            && (value == "0"
                || value
                    .strip_prefix("0.")
                    .is_some_and(|z| z.len() <= 3 && z.bytes().all(|b| b == b'0')))
    })
}

/// A POST's content negotiation: it carries JSON and accepts both answers; else 415 or 406.
fn refuse_post_media(req: &HttpRequest<'_>, known: &Known<'_>) -> Option<HttpResponse> {
    // One media type (RFC 9110: `Content-Type = media-type`, not a list): a list naming JSON
    // after `text/plain` passed, and a browser sends such a body from any page without a
    // preflight (an initialize with `Origin: null`).
    if !known.content_type.is_some_and(|t| {
        let media = t.split(';').next().unwrap_or("");
        media.trim_ascii().eq_ignore_ascii_case("application/json")
    }) {
        return Some(HttpResponse::rpc_error(
            415,
            None,
            jsonrpc::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        ));
    }
    if !accepts(req, known, &["application/json", "text/event-stream"]) {
        return Some(HttpResponse::rpc_error(
            406,
            None,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        ));
    }
    None
}

/// Whether the request's `Accept` takes every type of `wanted` (at most 32), read in one
/// pass: each type is judged by the most specific range that covers it (its own type, then
/// its major type's wildcard, then `*/*`), and a range of weight 0 refuses it.
fn accepts(req: &HttpRequest<'_>, known: &Known<'_>, wanted: &[&str]) -> bool {
    let n = wanted.len().min(32);
    // Per wanted type: (how specific the best range found is, 0 for none; whether it takes
    // the type). Among equally specific ranges, one that takes it wins.
    let mut best = [(0u8, false); 32];
    const EXACT: (u8, bool) = (3, true);
    // One `Accept` (the usual case) was found by `Known`; several are all read.
    let several = if known.accepts_more { req.headers } else { &[] };
    let values = (known.accept.filter(|_| !known.accepts_more))
        .into_iter()
        .chain(
            (several.iter())
                .filter(|(n, _)| n.eq_ignore_ascii_case("Accept"))
                .map(|(_, v)| *v),
        );
    for value in values {
        // What the SDKs' clients send, and this crate's: no list to parse.
        if value == "application/json, text/event-stream" {
            for (i, w) in wanted.iter().enumerate().take(n) {
                if w.eq_ignore_ascii_case("application/json")
                    || w.eq_ignore_ascii_case("text/event-stream")
                {
                    best[i] = EXACT;
                }
            }
        } else {
            for (m, params) in media_ranges(value) {
                let wildcard = m.strip_suffix("/*");
                for (i, w) in wanted.iter().enumerate().take(n) {
                    let major = &w[..w.bytes().position(|b| b == b'/').unwrap_or(w.len())];
                    let specific = if m.eq_ignore_ascii_case(w) {
                        3
                    } else if m == "*/*" {
                        1
                    } else if wildcard.is_some_and(|t| t.eq_ignore_ascii_case(major)) {
                        2
                    } else {
                        continue;
                    };
                    if (specific, true) > best[i] {
                        best[i] = best[i].max((specific, !weight_is_zero(params)));
                    }
                }
            }
        }
        // Nothing later can change a verdict made by the types themselves.
        if best[..n].iter().all(|&b| b == EXACT) {
            return true;
        }
    }
    best[..n]
        .iter()
        .all(|&(specific, takes)| specific > 0 && takes)
}

fn set_id(r: &mut HttpResponse, id: Option<Id<'_>>) {
    if let (Some(id), Body::Complete(_, body)) = (id, &mut r.body) {
        let text = String::from_utf8_lossy(body).into_owned();
        if let Ok(raw) = RawJson::new(&text)
            && let Ok(Some(err)) = raw.get_unique("error")
            && let Some(code) = err.unique("code").and_then(|c| c.as_i64())
        {
            let message = err
                .unique_str("message")
                .map(|m| m.to_str().into_owned())
                .unwrap_or_default();
            let mut out = Vec::new();
            jsonrpc::encode_error(&mut out, Some(id), code, &message, None);
            *body = out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts_of(req: &HttpRequest<'_>, wanted: &[&str]) -> bool {
        accepts(req, &Known::of(req.headers), wanted)
    }

    /// The pairwise definition, for comparison: the first MCP header with an earlier one of
    /// the same name.
    fn duplicated_by_pairs<'a>(headers: &[(&'a str, &str)]) -> Option<&'a str> {
        let mcp = |n: &str| {
            let names = [
                "mcp-session-id",
                "mcp-protocol-version",
                "mcp-method",
                "mcp-name",
            ];
            (names.iter().chain(&["last-event-id"])).any(|h| h.eq_ignore_ascii_case(n))
                || n.to_ascii_lowercase().starts_with("mcp-param-")
        };
        headers.iter().enumerate().find_map(|(i, (name, _))| {
            (mcp(name)
                && headers[..i]
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name)))
            .then_some(*name)
        })
    }

    #[test]
    fn a_duplicated_header_is_the_earliest_repeat_however_many_there_are() {
        let pool = [
            "Mcp-Param-A",
            "mcp-param-a",
            "Mcp-Param-B",
            "MCP-PARAM-B",
            "Mcp-Param-Cc",
            "Mcp-Session-Id",
            "mcp-session-id",
            "Mcp-Name",
            "Last-Event-ID",
            "Accept",
            "accept",
            "X-Other",
            "Mcp-Param-",
            "Mcp-Param\u{e9}x",
            "MCP-Protocol-Version",
            "mcp-method",
            "Host",
            "Origin",
            "content-type",
        ];
        let distinct: Vec<String> = (0..40).map(|i| format!("Mcp-Param-P{i}")).collect();
        // A small generator of header lists: 0 to 60 headers, mostly distinct parameters,
        // with a few names drawn from `pool`, so lists above and below the pairwise cut-off
        // (16 MCP headers) and with none, one or several repeats all occur.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for _ in 0..5_000 {
            let len = next(61);
            let headers: Vec<(&str, &str)> = (0..len)
                .map(|_| {
                    if next(8) == 0 {
                        (pool[next(pool.len())], "v")
                    } else {
                        (distinct[next(distinct.len())].as_str(), "v")
                    }
                })
                .collect();
            let repeat = duplicated_by_pairs(&headers);
            assert_eq!(
                duplicated_mcp_header(&headers, false),
                repeat,
                "{headers:?}"
            );
            // The one-pass reading agrees with a lookup per name, and never misses a repeat.
            let k = Known::of(&headers);
            let req = HttpRequest {
                method: "POST",
                headers: &headers,
                body: b"",
            };
            assert!(k.may_repeat || repeat.is_none(), "{headers:?}");
            assert_eq!(k.session, req.header("mcp-session-id"));
            assert_eq!(k.name, req.header("MCP-NAME"));
            assert_eq!(k.last_event_id, req.header("last-event-id"));
            assert_eq!(k.accept, req.header("Accept"));
            assert_eq!(k.version, req.header("mcp-protocol-version"));
            assert_eq!(k.method, req.header("Mcp-Method"));
            assert_eq!(
                (k.host, k.origin),
                (req.header("host"), req.header("origin"))
            );
            assert_eq!(k.content_type, req.header("Content-Type"));
        }
    }

    #[test]
    fn media_ranges_are_cut_at_commas_and_their_parameters_set_apart() {
        let all = |v| media_ranges(v).map(|(m, _)| m).collect::<Vec<_>>();
        assert_eq!(
            all("application/json, text/event-stream"),
            ["application/json", "text/event-stream"]
        );
        assert_eq!(
            all(" text/html;q=0.9 ,, ;q=1, */* ; q=0.1,"),
            ["text/html", "*/*"]
        );
        assert_eq!(all("application/json"), ["application/json"]);
        assert!(all("").is_empty());
        assert!(all(" , ;x=1 ,").is_empty());
        assert_eq!(all("täxt/é, a"), ["täxt/é", "a"]);
    }

    #[test]
    fn answers_are_told_from_requests_and_batches() {
        let id = |n| Some(OwnedId::from(Id::Int(n)));
        assert_eq!(
            answered_by(r#"{"jsonrpc":"2.0","id":7,"result":{"id":1,"error":2}}"#),
            (id(7), false, None)
        );
        assert_eq!(
            answered_by(r#"{"jsonrpc":"2.0","id":"7","error":{"code":-32602,"message":"m"}}"#),
            (
                Some(OwnedId::from(Id::Str(crate::jsonrpc::JsonStr::validated(
                    "7", false
                )))),
                false,
                Some(-32602)
            )
        );
        assert_eq!(
            answered_by(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#),
            (None, false, Some(-32700))
        );
        // The encoder's order is read without walking the result; any other order too.
        assert_eq!(
            answered_by(r#"{"jsonrpc":"2.0","id":"a\",\"result\":","result":{}}"#),
            (
                Some(OwnedId::from(Id::Str(crate::jsonrpc::JsonStr::validated(
                    r#"a\",\"result\":"#,
                    true
                )))),
                false,
                None
            )
        );
        assert_eq!(
            answered_by(r#"{"id":8,"jsonrpc":"2.0","result":{"error":{"code":1}}}"#),
            (id(8), false, None)
        );
        // Our own requests and notifications on the stream answer nothing.
        assert_eq!(
            answered_by(r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"}"#),
            (None, false, None)
        );
        assert_eq!(
            answered_by(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#),
            (None, false, None)
        );
        assert_eq!(
            answered_by(r#" [{"jsonrpc":"2.0","id":1,"result":{}}]"#),
            (None, true, None)
        );
    }

    #[test]
    fn accept_wildcards_cover_their_types() {
        let headers = [("accept", "text/*;q=0.5"), ("Accept", "application/json")];
        let req = HttpRequest {
            method: "POST",
            headers: &headers,
            body: b"",
        };
        assert!(accepts_of(&req, &["application/json"]));
        assert!(accepts_of(&req, &["text/event-stream"]));
        assert!(accepts_of(&req, &["application/json", "text/event-stream"]));
        assert!(!accepts_of(&req, &["image/png"]));
        assert!(!accepts_of(&req, &["application/json", "image/png"]));
        let any = [("Accept", "image/png, */*;q=0.1")];
        let req = HttpRequest {
            method: "GET",
            headers: &any,
            body: b"",
        };
        assert!(accepts_of(&req, &["application/json", "text/event-stream"]));
        let none: [(&str, &str); 0] = [];
        let req = HttpRequest {
            method: "GET",
            headers: &none,
            body: b"",
        };
        assert!(!accepts_of(&req, &["text/event-stream"]));
        // The usual value, read without parsing, says no more than the parse would.
        let usual = [("Accept", "application/json, text/event-stream")];
        let req = HttpRequest {
            method: "POST",
            headers: &usual,
            body: b"",
        };
        assert!(accepts_of(&req, &["application/json", "text/event-stream"]));
        assert!(accepts_of(&req, &["text/event-stream"]));
        assert!(!accepts_of(&req, &["application/json", "image/png"]));
    }

    /// "A weight of 0 means not acceptable" (RFC 9110 §12.4.2): the most specific range
    /// covering a type decides, whichever comes first and in however many headers.
    #[test]
    fn accept_weights_of_zero_refuse_their_types() {
        let both = ["application/json", "text/event-stream"];
        for (accept, json, sse) in [
            ("application/json;q=0, text/event-stream", false, true),
            ("application/json; q=0.000, text/event-stream", false, true),
            ("application/json;Q = 0.0 , text/event-stream", false, true),
            ("application/json;q=0.001, text/event-stream", true, true),
            ("application/json;q=0x, text/event-stream", true, true),
            ("*/*;q=0", false, false),
            ("*/*;q=0, application/json", true, false),
            ("application/json;q=0, */*", false, true),
            ("text/*;q=0, */*", true, false),
            ("text/event-stream, text/*;q=0, application/*", true, true),
            (
                "text/event-stream;q=0;level=1, text/event-stream",
                false,
                true,
            ),
            ("application/json;level=1;q=0", false, false),
        ] {
            let headers = [("Accept", accept)];
            let req = HttpRequest {
                method: "POST",
                headers: &headers,
                body: b"",
            };
            assert_eq!(accepts_of(&req, &both[..1]), json, "{accept}: json");
            assert_eq!(accepts_of(&req, &both[1..]), sse, "{accept}: sse");
            assert_eq!(accepts_of(&req, &both), json && sse, "{accept}: both");
        }
        // Across headers: a later exact refusal is not overruled by an earlier wildcard.
        let headers = [("Accept", "*/*"), ("accept", "application/json;q=0")];
        let req = HttpRequest {
            method: "POST",
            headers: &headers,
            body: b"",
        };
        assert!(!accepts_of(&req, &["application/json"]));
        assert!(accepts_of(&req, &["text/event-stream"]));
    }
}
