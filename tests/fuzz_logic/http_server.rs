//! The `http_server` target: `mcpwire::http::HttpServer` driven by arbitrary sequences of HTTP
//! requests (methods, session ids, protocol and MCP headers, `Last-Event-ID`, `Mcp-Param-*`,
//! bodies from templates or raw bytes), stream drains and drops, application answers and the
//! passing of time.
//!
//! Invariants, checked after every step:
//!
//! - nothing panics;
//! - every request gets a response with a real status, and a JSON body that parses; a stream
//!   response names a stream the host can poll, and never one another response still holds
//!   (a `Last-Event-ID` GET taking over a held stream gets an id of its own);
//! - sessions stay within `max_sessions`, stored events within `max_sessions × event_store`
//!   (with a shared session store, where sessions outlive this server's copies, only the first);
//! - after `handle_timeout(now)` no deadline at or before `now` is left (everything due fired);
//!   called before any deadline (as a host calling it on every turn does), it ends no session;
//! - a held stream whose output changed (bytes, finished, ended) without the host draining or
//!   dropping it was reported by `poll_woken`: a host that wakes only those never leaves a
//!   stream waiting;
//! - what the host drains from a stream is SSE as a client reads it (a parser of the harness's
//!   own, not the engine's): `id:`, `data:`, `retry:` and comment lines only, each event's
//!   data one JSON-RPC message (or empty: a priming event), ids `STREAM-NUMBER` whose numbers
//!   increase per stream and, on a `Last-Event-ID` GET naming an event the client saw, start
//!   after it (an empty priming event may repeat it), and a stream that finishes ends at an
//!   event's end.
//!
//! In a third of the runs the server shares a [`SessionStore`] and its event store with another
//! replica, which the harness plays (`Foreign`): it opens sessions this server has never seen,
//! ends them, and stores events of streams this server never held, so that requests take
//! sessions over, resume other replicas' streams and delete other replicas' sessions.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::conn::{Config, OwnedEvent};
use mcpwire::http::{
    Body, ConnKey, EventStore, HttpRequest, HttpServer, HttpServerConfig, HttpStreamId,
    MemoryEventStore, SessionStore, StoreUnavailable,
};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::ProtocolVersion;

/// The server's setup, from the input's first bytes.
#[derive(Arbitrary, Debug)]
pub struct HttpSetup {
    max_sessions: u8,
    idle_secs: u8,
    event_store: u8,
    max_body: u16,
    versions: u8,
}

/// One step.
#[derive(Arbitrary, Debug)]
pub enum HttpOp {
    /// An HTTP request.
    Request(RequestSpec),
    /// The host writes up to `max` bytes of a stream it holds.
    Drain { stream: u8, max: u16 },
    /// The client of a stream goes away.
    Drop { stream: u8 },
    /// Time passes; the host fires the timers if due.
    Advance { millis: u16 },
    /// The application acts on the next event.
    Answer { how: u8 },
    /// The application ends every listen stream.
    EndListens,
    /// Another replica acts on the shared stores (when they are shared).
    Foreign { what: u8, pick: u8 },
}

/// An HTTP request, from small choices.
#[derive(Arbitrary, Debug)]
pub struct RequestSpec {
    method: u8,
    session: u8,
    version: u8,
    mcp_method: u8,
    name: u8,
    last_event_id: Option<(u8, u8)>,
    param: Option<u8>,
    duplicate: Option<u8>,
    accept: u8,
    content_type: u8,
    body: BodySpec,
}

/// A request body.
#[derive(Arbitrary, Debug)]
pub enum BodySpec {
    /// One of the templates, with an id.
    Template { which: u8, id: u8 },
    /// Anything.
    Raw(Vec<u8>),
}

const METHODS: [&str; 5] = ["POST", "GET", "DELETE", "PUT", "OPTIONS"];
const VERSIONS: [&str; 5] = ["2025-11-25", "2025-03-26", "2026-07-28", "1999-01-01", ""];
const MCP_METHODS: [&str; 5] = [
    "tools/call",
    "tools/list",
    "subscriptions/listen",
    "ping",
    "x",
];
const NAMES: [&str; 4] = ["sql", "  sql  ", "=?base64?c3Fs?=", "=?base64?c3F?="];
const PARAMS: [&str; 4] = ["eu", "=?base64?ZXU=?=", "=?base64?ZXU?=", "\u{1}"];
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

fn template(which: u8, id: u8) -> String {
    match which % 12 {
        0 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"f","version":"1"}}}}}}"#
        ),
        1 => r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        2 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        3 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sql","arguments":{{"region":"eu"}},"_meta":{{"progressToken":{id}}}}}}}"#
        ),
        4 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sql","arguments":{{"region":"eu"}},{META}}}}}"#
        ),
        5 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{{META}}}}}"#),
        6 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
        ),
        7 => format!(
            r#"[{{"jsonrpc":"2.0","id":{id},"method":"ping"}},{{"jsonrpc":"2.0","method":"notifications/initialized"}}]"#
        ),
        8 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        9 => format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        ),
        10 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"f","version":"1"}}}}}}"#
        ),
        _ => "{\"jsonrpc\":\"2.0\",".to_owned(),
    }
}

/// A session store shared with another replica, which the harness plays.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<HashMap<String, String>>>);

impl SessionStore for Shared {
    fn create(&mut self, session: &str, initialize: &str) -> Result<(), StoreUnavailable> {
        // (Full, it fails: the session does not open.)
        let mut m = self.0.lock().unwrap();
        if m.len() >= 64 {
            return Err(StoreUnavailable);
        }
        m.insert(session.to_owned(), initialize.to_owned());
        Ok(())
    }
    fn load(&mut self, session: &str) -> Result<Option<String>, StoreUnavailable> {
        Ok(self.0.lock().unwrap().get(session).cloned())
    }
    fn touch(&mut self, session: &str) -> Result<bool, StoreUnavailable> {
        Ok(self.0.lock().unwrap().contains_key(session))
    }
    fn forget(&mut self, session: &str) -> Result<(), StoreUnavailable> {
        self.0.lock().unwrap().remove(session);
        Ok(())
    }
}

/// The first stream id of the other replica's range.
const FOREIGN_STREAMS: u64 = 1 << 40;

/// A store that counts what it holds, shared with the harness.
#[derive(Clone)]
struct Counted(Arc<Mutex<MemoryEventStore>>);

impl EventStore for Counted {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        self.0.lock().unwrap().append(session, stream, event, bytes);
    }
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreUnavailable> {
        self.0.lock().unwrap().replay(session, stream, after, out)
    }
    fn forget(&mut self, session: &str) {
        self.0.lock().unwrap().forget(session);
    }
}

struct Harness {
    server: HttpServer,
    store: Counted,
    /// The session store shared with the other replica, when there is one.
    shared: Option<Shared>,
    /// Sessions and events the other replica made.
    foreign: u64,
    max_sessions: usize,
    max_events: usize,
    now: Timestamp,
    sessions: Vec<String>,
    streams: Vec<HttpStreamId>,
    event_ids: Vec<String>,
    pending: Vec<(ConnKey, OwnedEvent)>,
    seed: u64,
    /// What each held stream showed at the last check: its waiting bytes and whether it
    /// finished, or `None` once the host can no longer poll it.
    seen: HashMap<HttpStreamId, Option<(usize, bool)>>,
    /// What the host has read from each held stream, as its client parses it.
    reads: HashMap<HttpStreamId, StreamRead>,
}

/// A client's reading of one stream response: the bytes of an event not yet complete, and the
/// last event number seen per stream named in the ids.
#[derive(Default)]
struct StreamRead {
    partial: Vec<u8>,
    last: HashMap<u64, u64>,
    /// The `Last-Event-ID` this response resumes: its events of that stream come after it.
    resumed: Option<(u64, u64)>,
}

impl StreamRead {
    /// Reads drained bytes; checks each complete event.
    fn read(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.partial.drain(..end + 2).collect();
            self.event(&event[..end + 1]);
        }
    }

    /// One event's lines, each ending in `\n`.
    fn event(&mut self, event: &[u8]) {
        let text = std::str::from_utf8(event)
            .unwrap_or_else(|_| panic!("a stream event that is not UTF-8: {event:?}"));
        let mut id = None;
        let mut data: Option<String> = None;
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                assert!(id.is_none(), "two ids in one event: {text:?}");
                id = Some(v);
            } else if let Some(v) = line.strip_prefix("data: ") {
                let d = data.get_or_insert_with(String::new);
                if !d.is_empty() {
                    d.push('\n');
                }
                d.push_str(v);
            } else if let Some(v) = line.strip_prefix("retry: ") {
                assert!(v.parse::<u64>().is_ok(), "retry is not a number: {text:?}");
            } else if !line.starts_with(':') {
                panic!("a stream line a client does not expect: {line:?} in {text:?}");
            }
        }
        let data = data.unwrap_or_default();
        if !data.is_empty() {
            let value: serde_json::Value = serde_json::from_str(&data)
                .unwrap_or_else(|e| panic!("stream event data is not JSON ({e}): {data:?}"));
            check_message(&value, &data);
        }
        let Some(id) = id else {
            return;
        };
        // (A session's GET stream marks its ids: `gSTREAM-NUMBER`.)
        let (stream, number) = (id.strip_prefix('g').unwrap_or(id))
            .split_once('-')
            .and_then(|(s, n)| Some((s.parse::<u64>().ok()?, n.parse::<u64>().ok()?)))
            .unwrap_or_else(|| panic!("an event id that is not [g]STREAM-NUMBER: {id:?}"));
        let floor = self
            .last
            .get(&stream)
            .copied()
            .or_else(|| self.resumed.filter(|(s, _)| *s == stream).map(|(_, n)| n));
        if let Some(floor) = floor {
            // (An empty priming event may repeat the `Last-Event-ID` it answers.)
            let repeats_resumed =
                data.is_empty() && !self.last.contains_key(&stream) && number == floor;
            assert!(
                number > floor || repeats_resumed,
                "event {id} after {stream}-{floor} in one response"
            );
        }
        self.last.insert(stream, number);
    }
}

/// A JSON-RPC 2.0 message as a client checks one: a request, a notification or a response.
fn check_message(value: &serde_json::Value, text: &str) {
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("not one JSON-RPC message: {text:?}"));
    assert_eq!(
        object.get("jsonrpc").and_then(|v| v.as_str()),
        Some("2.0"),
        "no jsonrpc 2.0: {text:?}"
    );
    if let Some(method) = object.get("method") {
        assert!(method.is_string(), "method not a string: {text:?}");
        assert!(
            !object.contains_key("result") && !object.contains_key("error"),
            "a request with a result: {text:?}"
        );
    } else {
        // (An error whose request's id could not be read has none: MCP's `id?`.)
        match object.get("id") {
            Some(id) => assert!(
                id.is_string() || id.is_i64() || id.is_u64(),
                "a response id of the wrong type: {text:?}"
            ),
            None => assert!(
                object.contains_key("error"),
                "a result without an id: {text:?}"
            ),
        }
        assert!(
            object.contains_key("result") != object.contains_key("error"),
            "a response needs exactly one of result and error: {text:?}"
        );
    }
}

impl Harness {
    fn new(setup: &HttpSetup) -> Harness {
        let mut server = Config::server("fuzz", "1")
            .with_capabilities(r#"{"tools":{"listChanged":true},"logging":{}}"#)
            .expect("valid capabilities");
        server.versions = match setup.versions % 3 {
            0 => ProtocolVersion::ALL.to_vec(),
            1 => ProtocolVersion::LEGACY.to_vec(),
            _ => vec![ProtocolVersion::V2026_07_28],
        };
        let mut config = HttpServerConfig::new(server);
        config.max_sessions = usize::from(setup.max_sessions % 8) + 1;
        config.session_idle_timeout = Duration::from_secs(u64::from(setup.idle_secs % 30) + 1);
        config.event_store = usize::from(setup.event_store % 16);
        config.max_body = usize::from(setup.max_body).max(64);
        // Half the runs with streams that fill after a few messages: an unread stream's bound
        // (a GET stream ended, a request's stream closed for polling, backpressure) is reached.
        if (setup.versions / 3) % 2 == 1 {
            config.server.limits.max_buffered_output = 1024;
        }
        let _ = config.declare_tools(
            RawJson::new(
                r#"[{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]"#,
            )
            .expect("valid JSON"),
        );
        let store = Counted(Arc::new(Mutex::new(MemoryEventStore::new(
            config.event_store,
        ))));
        config.events = Some(Box::new(store.clone()));
        let shared = (setup.idle_secs % 3 == 2).then(Shared::default);
        if let Some(shared) = &shared {
            config.sessions = Some(Box::new(shared.clone()));
        }
        let (max_sessions, max_events) = (config.max_sessions, config.event_store);
        Harness {
            server: HttpServer::new(config),
            store,
            shared,
            foreign: 0,
            max_sessions,
            max_events: max_sessions * max_events,
            now: Timestamp::ZERO,
            sessions: Vec::new(),
            streams: Vec::new(),
            event_ids: Vec::new(),
            pending: Vec::new(),
            seed: 1,
            seen: HashMap::new(),
            reads: HashMap::new(),
        }
    }

    fn request(&mut self, spec: &RequestSpec) {
        let mut headers: Vec<(String, String)> = vec![("Host".into(), "127.0.0.1:1".into())];
        let method = METHODS[usize::from(spec.method) % METHODS.len()];
        if !spec.content_type.is_multiple_of(4) {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        match spec.accept % 4 {
            0 => {}
            1 => headers.push(("Accept".into(), "text/event-stream".into())),
            _ => headers.push((
                "Accept".into(),
                "application/json, text/event-stream".into(),
            )),
        }
        if !self.sessions.is_empty() && !spec.session.is_multiple_of(4) {
            let sid = self.sessions[usize::from(spec.session) % self.sessions.len()].clone();
            headers.push(("Mcp-Session-Id".into(), sid));
        } else if spec.session % 8 == 4 {
            headers.push(("Mcp-Session-Id".into(), "unknown".into()));
        }
        let version = VERSIONS[usize::from(spec.version) % VERSIONS.len()];
        if !version.is_empty() {
            headers.push(("MCP-Protocol-Version".into(), version.into()));
        }
        if spec.mcp_method % 6 != 5 {
            let m = MCP_METHODS[usize::from(spec.mcp_method) % MCP_METHODS.len()];
            headers.push(("Mcp-Method".into(), m.into()));
        }
        if spec.name % 5 != 4 {
            headers.push((
                "Mcp-Name".into(),
                NAMES[usize::from(spec.name) % NAMES.len()].into(),
            ));
        }
        if let Some(p) = spec.param {
            headers.push((
                "Mcp-Param-Region".into(),
                PARAMS[usize::from(p) % PARAMS.len()].into(),
            ));
        }
        // A `Last-Event-ID` a client really saw (not one made up, which may name an event
        // still to come): the events of its stream that the response carries come after it.
        // Only a GET resumes: a POST's is ignored, and its new stream's number may be that of
        // a stream another replica's process had, whose event the id names.
        let mut resumed = None;
        if let Some((pick, event)) = spec.last_event_id {
            let id = if self.event_ids.is_empty() || pick % 3 == 0 {
                // (Made up as a GET stream's too: a listen resumed where nobody held it.)
                let mark = if pick % 2 == 0 { "g" } else { "" };
                format!("{mark}{pick}-{event}")
            } else {
                let id = self.event_ids[usize::from(pick) % self.event_ids.len()].clone();
                resumed = (method == "GET")
                    .then(|| id.strip_prefix('g').unwrap_or(&id))
                    .and_then(|id| id.split_once('-'))
                    .and_then(|(s, n)| Some((s.parse::<u64>().ok()?, n.parse::<u64>().ok()?)));
                id
            };
            headers.push(("Last-Event-ID".into(), id));
        }
        if let Some(d) = spec.duplicate
            && !headers.is_empty()
        {
            let copy = headers[usize::from(d) % headers.len()].clone();
            headers.push(copy);
        }
        let body = match &spec.body {
            BodySpec::Template { which, id } => template(*which, *id).into_bytes(),
            BodySpec::Raw(bytes) => bytes.clone(),
        };
        let views: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let req = HttpRequest {
            method,
            headers: &views,
            body: &body,
        };
        let mut seed = self.seed;
        let mut random = |buf: &mut [u8]| {
            for b in buf {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *b = (seed >> 56) as u8;
            }
        };
        let response = self.server.handle_request(self.now, &req, &mut random);
        self.seed = seed;
        self.collect_events();
        let response = self.server.settle(response);
        assert!(
            (200..600).contains(&response.status),
            "status {}",
            response.status
        );
        if let Some((_, sid)) = response
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("Mcp-Session-Id"))
            && !self.sessions.contains(sid)
        {
            self.sessions.push(sid.clone());
        }
        match response.body {
            Body::Complete(_, bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let value = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .unwrap_or_else(|_| panic!("a body that is not JSON: {text:?}"));
                match &value {
                    serde_json::Value::Array(members) => {
                        for member in members {
                            check_message(member, &text);
                        }
                    }
                    one => check_message(one, &text),
                }
            }
            Body::Stream(id) => {
                assert!(
                    self.server.poll_stream(id).is_some(),
                    "a stream response names a stream the host cannot poll"
                );
                // A `Last-Event-ID` GET that takes over a stream still held gets an id of
                // its own: two responses never poll one id.
                assert!(
                    !self.streams.contains(&id),
                    "stream {id:?} handed to a second response"
                );
                self.streams.push(id);
                self.reads.insert(
                    id,
                    StreamRead {
                        resumed,
                        ..StreamRead::default()
                    },
                );
            }
            Body::Empty => {}
        }
    }

    fn collect_events(&mut self) {
        while let Some((key, event)) = self.server.poll_event() {
            let event = event.to_owned_event();
            if self.pending.len() < 64 {
                self.pending.push((key, event));
            }
        }
    }

    /// Drains up to `max` bytes of a held stream; returns it.
    fn drain(&mut self, pick: u8, max: u16) -> Option<HttpStreamId> {
        if self.streams.is_empty() {
            return None;
        }
        let id = self.streams[usize::from(pick) % self.streams.len()];
        let Some(out) = self.server.poll_stream(id) else {
            self.streams.retain(|s| *s != id);
            return Some(id);
        };
        let n = out.bytes.len().min(usize::from(max));
        self.reads.entry(id).or_default().read(&out.bytes[..n]);
        let text = String::from_utf8_lossy(&out.bytes[..n]).into_owned();
        for line in text.lines() {
            if let Some(id) = line.strip_prefix("id: ")
                && self.event_ids.len() < 64
            {
                self.event_ids.push(id.to_owned());
            }
        }
        self.server.consume_stream(id, n);
        Some(id)
    }

    fn answer(&mut self, how: u8) {
        if self.pending.is_empty() {
            return;
        }
        let (key, event) = self.pending.remove(0);
        let OwnedEvent::Request { id, .. } = event else {
            return;
        };
        match how % 5 {
            0 => {
                if let Some(conn) = self.server.connection(key) {
                    let _ = conn.respond(id.as_id(), RawJson::new("{}").expect("JSON"));
                }
            }
            1 => {
                if let Some(conn) = self.server.connection(key) {
                    let _ = conn.respond_error(id.as_id(), -32603, "failed", None);
                }
            }
            2 => {
                if let Some(conn) = self.server.connection(key) {
                    let _ = conn.progress(id.as_id(), 1.0, None, None);
                    let _ = conn.notify("notifications/tools/list_changed", None);
                }
                self.pending.push((
                    key,
                    OwnedEvent::Request {
                        id,
                        method: String::new(),
                        params: None,
                    },
                ));
            }
            3 => {
                let _ = self.server.close_stream_for_polling(key, id.as_id());
                self.pending.push((
                    key,
                    OwnedEvent::Request {
                        id,
                        method: String::new(),
                        params: None,
                    },
                ));
            }
            // Half the rest: the application closes the connection (a session then ends).
            _ if how & 0x80 != 0 => {
                if let Some(conn) = self.server.connection(key) {
                    let grace = Duration::from_millis(u64::from(how & 0x7f) * 10);
                    conn.close(self.now, grace);
                }
            }
            _ => {}
        }
        self.server.pump();
    }

    fn advance(&mut self, millis: u16) {
        self.now = self
            .now
            .after(Duration::from_millis(u64::from(millis) * 10));
        if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
            self.server.handle_timeout(self.now);
            assert!(
                self.server.poll_timeout().is_none_or(|t| t > self.now),
                "a deadline at or before now survived handle_timeout"
            );
        } else {
            // Hosts may call it on every turn of their loop: early, it ends no session and
            // leaves nothing due.
            let sessions = self.server.sessions();
            self.server.handle_timeout(self.now);
            assert_eq!(
                self.server.sessions(),
                sessions,
                "an early handle_timeout ended a session"
            );
            assert!(
                self.server.poll_timeout().is_none_or(|t| t > self.now),
                "an early handle_timeout left a deadline due"
            );
        }
        self.collect_events();
    }

    /// Every held stream whose output changed since the last check, other than `own` (which
    /// the host itself drained or dropped in this step), is among the streams `poll_woken`
    /// gives. Pumps first, as a host does after answering events.
    fn check_woken(&mut self, own: Option<HttpStreamId>) {
        self.server.pump();
        let mut woken = HashSet::new();
        while let Some(id) = self.server.poll_woken() {
            woken.insert(id);
        }
        for &id in &self.streams {
            let now = self
                .server
                .poll_stream(id)
                .map(|out| (out.bytes.len(), out.finished));
            let before = self.seen.insert(id, now);
            if Some(id) != own
                && let Some(before) = before
            {
                assert!(
                    before == now || woken.contains(&id),
                    "stream {id:?} went from {before:?} to {now:?} and was not woken"
                );
            }
        }
        // What these polls themselves marked (a recorded stream rendered) is the host's own.
        while self.server.poll_woken().is_some() {}
        // A stream the host can no longer poll, or that finished with nothing left, ends its
        // response: the host lets go of it (its id may come back later for another response:
        // a `Last-Event-ID` GET may name an id the server had not handed out yet).
        let ended: Vec<HttpStreamId> = (self.seen.iter())
            .filter(|(_, now)| matches!(now, None | Some((0, true))))
            .map(|(id, _)| *id)
            .collect();
        for (id, now) in &self.seen {
            if *now == Some((0, true)) {
                let partial = self.reads.get(id).map_or(0, |r| r.partial.len());
                assert_eq!(partial, 0, "stream {id:?} finished inside an event");
            }
        }
        self.streams.retain(|id| !ended.contains(id));
        self.seen.retain(|id, _| self.streams.contains(id));
        self.reads.retain(|id, _| self.streams.contains(id));
    }

    /// The other replica opens a session, ends one, or stores an event of a stream of its own
    /// (whose id then goes to `event_ids`, for a `Last-Event-ID` to name).
    fn foreign(&mut self, what: u8, pick: u8) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        self.foreign += 1;
        match what % 3 {
            0 => {
                let sid = format!("f{:x}", self.foreign);
                let version = if what & 0x80 != 0 { 0 } else { 10 };
                // (When the store is full, the session is not there: requests naming it
                // get 404, as for any unknown one.)
                let _ = shared.create(&sid, &template(version, 1));
                if self.sessions.len() < 64 {
                    self.sessions.push(sid);
                }
            }
            1 if !self.sessions.is_empty() => {
                let sid = &self.sessions[usize::from(pick) % self.sessions.len()];
                shared
                    .forget(sid)
                    .expect("the in-memory store is always there");
                self.store.forget(sid);
            }
            _ if !self.sessions.is_empty() => {
                let sid = self.sessions[usize::from(pick) % self.sessions.len()].clone();
                let stream = HttpStreamId(FOREIGN_STREAMS + u64::from(pick % 4));
                let event = self.foreign;
                let bytes = format!(
                    "id: {}-{event}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":{event}}}}}\n\n",
                    stream.0
                );
                self.store.append(&sid, stream, event, bytes.as_bytes());
                if self.event_ids.len() < 64 {
                    self.event_ids.push(format!("{}-{}", stream.0, event - 1));
                }
            }
            _ => {}
        }
    }

    fn check(&self) {
        assert!(
            self.server.sessions() <= self.max_sessions,
            "sessions over the cap"
        );
        if self.shared.is_some() {
            return; // (events outlive this server's copies of their sessions)
        }
        let stored = self.store.0.lock().expect("store").len();
        assert!(
            stored <= self.max_events,
            "{stored} stored events over the bound"
        );
    }
}

/// The target: an [`HttpSetup`] and [`HttpOp`]s, as `arbitrary` reads them.
pub fn http_server(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(setup) = HttpSetup::arbitrary(&mut u) else {
        return;
    };
    let mut h = Harness::new(&setup);
    for _ in 0..256 {
        let Ok(op) = HttpOp::arbitrary(&mut u) else {
            break;
        };
        let mut own = None;
        match &op {
            HttpOp::Request(spec) => h.request(spec),
            HttpOp::Drain { stream, max } => own = h.drain(*stream, *max),
            HttpOp::Drop { stream } => {
                if !h.streams.is_empty() {
                    let id = h.streams[usize::from(*stream) % h.streams.len()];
                    h.server.stream_closed(h.now, id);
                    h.streams.retain(|s| *s != id);
                    h.reads.remove(&id);
                }
            }
            HttpOp::Advance { millis } => h.advance(*millis),
            HttpOp::Answer { how } => h.answer(*how),
            HttpOp::EndListens => {
                h.server.end_listen_streams();
            }
            HttpOp::Foreign { what, pick } => h.foreign(*what, *pick),
        }
        h.collect_events();
        h.check_woken(own);
        h.check();
    }
}
