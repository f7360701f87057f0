//! The `http_client` target: `mcpwire::http::HttpClient` against a server the input invents.
//! The harness is the host: it makes the HTTP requests the client asks for and hands back
//! whatever the input says the server answered (any status; JSON, SSE, HTML or no
//! `Content-Type`; session ids, SSE ids and `retry` fields of every kind; answers to our
//! requests, to other ids or twice; the server's own requests and notifications; bodies cut
//! anywhere), transport errors, reports out of turn (on exchanges ended, aborted or never
//! made, a second head, a body before the head), and the passing of time. The application
//! makes requests (with names and arguments that reach the `Mcp-Name` and `Mcp-Param-*`
//! headers), notifications and cancellations, answers the server's requests and ends the
//! session.
//!
//! Invariants:
//!
//! - nothing panics;
//! - every request the application made ends exactly once (an answer, an error, a failure, a
//!   time-out or its cancellation), and none vanishes: at the end, with every exchange failed
//!   and time run past every deadline, none is left; one whose answer came whole (a 200
//!   response that then ended) is no longer waiting;
//! - no header the client asks the host to send carries a control character (a server's
//!   session id or SSE event id must not smuggle a line break, or a byte HTTP libraries
//!   refuse, into the client's next requests);
//! - the session id is adopted only from a 2xx answer to the exchange that carried
//!   `initialize`, and only as the server sent it;
//! - at most `MAX_RUNNING_REPLIES` answers to the server's requests are out at once, and at
//!   most `MAX_RUNNING_REQUESTS` POSTs of our requests, and the client's own counts of them
//!   match the exchanges they count (`HttpClient::check_counts`);
//! - after `handle_timeout(now)` no deadline at or before `now` is left.

use std::collections::HashMap;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::conn::{ClientEra, Config, Event, RequestId, RequestOptions};
use mcpwire::http::{
    ClientAction, ExchangeId, HttpClient, MAX_RUNNING_REPLIES, MAX_RUNNING_REQUESTS,
    ReconnectPolicy,
};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::mcp::ProtocolVersion;

/// The client's setup, from the input's first bytes.
#[derive(Arbitrary, Debug)]
pub struct ClientSetup {
    pub era: u8,
    pub open_get: bool,
    pub timeout_secs: u8,
}

/// One step.
#[derive(Arbitrary, Debug)]
pub enum ClientOp {
    /// The application sends a request.
    Request { method: u8, progress: bool },
    /// The application sends a notification.
    Notify,
    /// The application cancels one of its requests.
    Cancel { which: u8 },
    /// The application answers one of the server's requests. With none to answer, it
    /// retries a request that came back "input required" (2026-07-28), with `inputResponses`
    /// when `error` is false. (The retry came later; it lives in this step so that the
    /// corpus and the regression inputs decode as they did.)
    Answer { which: u8, error: bool },
    /// The server's response head for an exchange.
    Head(HeadSpec),
    /// Body bytes for an exchange that has its head.
    Body(BodySpec),
    /// The server ends an exchange's response.
    End { which: u8, jitter: u32 },
    /// The exchange failed (connection refused, reset).
    Fail { which: u8, jitter: u32 },
    /// Time passes; the host fires the timers if due.
    Advance { millis: u16 },
    /// The application ends the session.
    EndSession,
    /// The server answers every request an exchange carries, properly, and ends it.
    Complete { which: u8, sse: bool },
    /// The host reports out of turn: on an exchange already ended, aborted or never made, a
    /// second head, or a body before the head. The client must take it calmly.
    Stray { which: u8, kind: u8 },
}

/// A response head.
#[derive(Arbitrary, Debug)]
pub struct HeadSpec {
    pub which: u8,
    pub status: u8,
    pub media: u8,
    pub session: Option<u8>,
}

/// Body bytes.
#[derive(Arbitrary, Debug)]
pub struct BodySpec {
    pub which: u8,
    /// What the message is.
    pub what: u8,
    /// Which id it names: one the exchange carried, or another.
    pub id: u8,
    /// How it is framed: bare JSON, an SSE event (with an id, a retry, a type), or raw bytes.
    pub frame: u8,
    pub event_id: u8,
    /// Where the bytes are cut: a prefix only, or all.
    pub cut: u8,
    pub raw: Vec<u8>,
}

const STATUSES: [u16; 12] = [200, 200, 429, 202, 400, 401, 404, 405, 500, 503, 302, 204];
/// A 429's or 503's `Retry-After` (none, seconds, or an HTTP date the client cannot read),
/// picked by what of `HeadSpec::status` the status did not use.
const RETRY_AFTER: [Option<&str>; 5] = [
    None,
    Some("0"),
    Some("1"),
    Some("30"),
    Some("Fri, 31 Dec 2027 23:59:59 GMT"),
];
const MEDIA: [Option<&str>; 7] = [
    Some("application/json"),
    Some("text/event-stream"),
    Some("text/event-stream; charset=utf-8"),
    None,
    Some("text/html"),
    Some("application/problem+json"),
    Some("TEXT/EVENT-STREAM"),
];
const SESSIONS: [&str; 8] = [
    "s-1",
    "s-2",
    "",
    "  padded  ",
    "bad\u{1}id",
    "tab\tinside",
    "del\u{7f}",
    "caf\u{e9}",
];
const EVENT_IDS: [&str; 8] = [
    "1",
    "2",
    "",
    "stream-7",
    "x\u{1}y",
    "nul\u{0}id",
    "\u{7f}",
    "\u{e9}t\u{e9}",
];
const METHODS: [&str; 8] = [
    "tools/call",
    "tools/list",
    "ping",
    "resources/read",
    "prompts/get",
    "x/unknown",
    // The application's own method names reach the Mcp-Method header.
    "x/line\r\nX-Injected: 1",
    "x/caf\u{e9}",
];

/// Tool names and argument texts, as JSON string contents: plain, and with what a header
/// cannot carry as is.
const TEXTS: [&str; 8] = [
    "echo",
    "hi",
    "line\\nbreak",
    "bell\\u0007",
    " padded ",
    "=?base64?aGk=?=",
    "caf\u{e9}",
    "cr\\r\\nX-Injected: 1",
];

/// The `requestState` values of "input required" answers, as JSON string contents: plain,
/// escaped, and long.
const STATES: [&str; 5] = [
    "s1",
    "",
    "line\\nbreak \\\"quoted\\\" \\u0000",
    "caf\u{e9} \\ud83d\\ude00",
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
];

/// What the host knows of an exchange the client asked it to make.
struct Sent {
    exchange: ExchangeId,
    /// The ids of the requests in its body (ours to the server), with their methods.
    ids: Vec<(i64, String)>,
    /// Its body holds `initialize`.
    initialize: bool,
    /// Its body is an answer to a server request.
    reply: bool,
    /// The head was handed over.
    head: bool,
}

struct Host {
    client: HttpClient,
    now: Timestamp,
    rng: super::Rng,
    sent: Vec<Sent>,
    /// Our requests not ended yet, by id.
    open: HashMap<i64, &'static str>,
    /// Requests that ended "input required", with the `requestState` the server gave
    /// (decoded), for a retry.
    retryable: Vec<(i64, Option<String>)>,
    /// Retries not yet sent, by their new id: the `requestState` their params must echo.
    retried: HashMap<i64, Option<String>>,
    /// Retries made, and how many of their sends had their `requestState` checked.
    retries: usize,
    checked_retries: usize,
    /// Server requests not answered yet.
    peer: Vec<OwnedId>,
    /// The session id the client had after the last step.
    session: Option<String>,
    /// Every session id a 2xx head of an `initialize` exchange carried (trimmed).
    offered: Vec<String>,
    next_server_id: i64,
    /// The exchanges that carried `initialize`.
    initialize: Vec<ExchangeId>,
    /// Exchanges ended or aborted (the last 64), for stray reports.
    gone: Vec<ExchangeId>,
}

/// The `http_client` target.
pub fn http_client(data: &[u8]) {
    let _ = decode_and_run(data);
}

/// The target's work: decodes the setup and up to 400 steps from `data`, and runs them.
pub fn decode_and_run(data: &[u8]) -> RunStats {
    let mut u = Unstructured::new(data);
    let Ok(setup) = ClientSetup::arbitrary(&mut u) else {
        return RunStats::default();
    };
    let ops = std::iter::from_fn(|| ClientOp::arbitrary(&mut u).ok()).take(400);
    run(&setup, ops)
}

/// The bytes that decode to `setup` and `ops` (the inverse of [`decode_and_run`]'s decoding,
/// as `arbitrary` 1.x reads them: integers little-endian, a bool as a byte's low bit, an
/// enum's variant from a `u32`, each element of a `Vec` after a byte saying there is one).
/// The seed corpus uses it for scripted sessions that random bytes rarely reach.
pub fn encode(setup: &ClientSetup, ops: &[ClientOp]) -> Vec<u8> {
    const VARIANTS: u64 = 12;
    let mut out = vec![setup.era, u8::from(setup.open_get), setup.timeout_secs];
    for op in ops {
        let (variant, fields): (u64, Vec<u8>) = match op {
            ClientOp::Request { method, progress } => (0, vec![*method, u8::from(*progress)]),
            ClientOp::Notify => (1, vec![]),
            ClientOp::Cancel { which } => (2, vec![*which]),
            ClientOp::Answer { which, error } => (3, vec![*which, u8::from(*error)]),
            ClientOp::Head(h) => {
                let mut f = vec![h.which, h.status, h.media];
                match h.session {
                    Some(s) => f.extend([1, s]),
                    None => f.push(0),
                }
                (4, f)
            }
            ClientOp::Body(b) => {
                let mut f = vec![b.which, b.what, b.id, b.frame, b.event_id, b.cut];
                for &byte in &b.raw {
                    f.extend([1, byte]);
                }
                f.push(0);
                (5, f)
            }
            ClientOp::End { which, jitter } | ClientOp::Fail { which, jitter } => {
                let variant = if matches!(op, ClientOp::End { .. }) {
                    6
                } else {
                    7
                };
                let mut f = vec![*which];
                f.extend(jitter.to_le_bytes());
                (variant, f)
            }
            ClientOp::Advance { millis } => (8, millis.to_le_bytes().to_vec()),
            ClientOp::EndSession => (9, vec![]),
            ClientOp::Complete { which, sse } => (10, vec![*which, u8::from(*sse)]),
            ClientOp::Stray { which, kind } => (11, vec![*which, *kind]),
        };
        // The smallest u32 whose (x * VARIANTS) >> 32 is `variant`.
        let tag = ((variant << 32).div_ceil(VARIANTS)) as u32;
        out.extend(tag.to_le_bytes());
        out.extend(fields);
    }
    out
}

/// What a run did that the invariants alone do not show, for the tests that script one.
#[derive(Debug, Default)]
pub struct RunStats {
    /// "Input required" retries the application made.
    pub retries: usize,
    /// Retries whose request, once sent, had its `requestState` checked.
    pub checked_retries: usize,
}

/// Runs `ops` against a client set up by `setup`, checking the invariants throughout. The
/// fuzz target decodes both from its input; `tests/fuzz_replay.rs` scripts them to show that
/// the steps reach what they claim to.
pub fn run(setup: &ClientSetup, ops: impl IntoIterator<Item = ClientOp>) -> RunStats {
    let mut config = Config::client("fuzz", "1")
        .with_capabilities(r#"{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}"#)
        .expect("valid capabilities");
    match setup.era % 3 {
        0 => {
            config.client_era = ClientEra::Legacy;
            config.versions = ProtocolVersion::LEGACY.to_vec();
        }
        1 => {
            config.client_era = ClientEra::Modern;
            config.versions = vec![ProtocolVersion::V2026_07_28];
        }
        _ => {}
    }
    config.request_timeout = Duration::from_secs(u64::from(setup.timeout_secs % 30) + 1);
    let Ok(client) = HttpClient::new(
        config,
        Timestamp::ZERO,
        ReconnectPolicy::default(),
        setup.open_get,
    ) else {
        return RunStats::default();
    };
    let mut host = Host {
        client,
        now: Timestamp::ZERO,
        rng: super::Rng::new(u64::from(setup.timeout_secs)),
        sent: Vec::new(),
        open: HashMap::new(),
        retryable: Vec::new(),
        retried: HashMap::new(),
        retries: 0,
        checked_retries: 0,
        peer: Vec::new(),
        session: None,
        offered: Vec::new(),
        next_server_id: 1,
        initialize: Vec::new(),
        gone: Vec::new(),
    };
    host.settle();
    for op in ops {
        host.step(op);
        host.settle();
    }
    host.finish();
    RunStats {
        retries: host.retries,
        checked_retries: host.checked_retries,
    }
}

impl Host {
    fn step(&mut self, op: ClientOp) {
        match op {
            ClientOp::Request { method, progress } => {
                let text = TEXTS[usize::from(method / 16) % TEXTS.len()];
                let method = METHODS[usize::from(method) % METHODS.len()];
                // Names and arguments reach Mcp-Name and the Mcp-Param-* headers of the
                // tools a tools/list answer annotated.
                let params = match method {
                    "tools/call" => Some(format!(
                        r#"{{"name":"{text}","arguments":{{"text":"{text}","n":7}}}}"#
                    )),
                    "resources/read" => Some(format!(r#"{{"uri":"{text}"}}"#)),
                    "prompts/get" => Some(format!(r#"{{"name":"{text}"}}"#)),
                    _ => None,
                };
                let params = params
                    .as_deref()
                    .map(|p| RawJson::new(p).expect("valid params"));
                let options = RequestOptions {
                    progress,
                    ..RequestOptions::default()
                };
                let now = self.now;
                if let Ok(RequestId(id)) =
                    (self.client.connection()).request_with(now, method, params, options)
                {
                    let before = self.open.insert(id, method);
                    assert!(
                        before.is_none(),
                        "request {id} was handed out again while {before:?} with that id had not ended"
                    );
                }
            }
            ClientOp::Notify => {
                let _ = (self.client.connection()).notify("notifications/roots/list_changed", None);
            }
            ClientOp::Cancel { which } => {
                let mut ids: Vec<i64> = self.open.keys().copied().collect();
                ids.sort_unstable();
                if ids.is_empty() {
                    return;
                }
                let id = ids[usize::from(which) % ids.len()];
                let now = self.now;
                if (self.client.connection())
                    .cancel(now, RequestId(id), Some("fuzz"))
                    .is_ok()
                {
                    self.open.remove(&id);
                }
            }
            ClientOp::Answer { which, error } => {
                if self.peer.is_empty() {
                    self.retry(which, !error);
                    return;
                }
                let id = self.peer.remove(usize::from(which) % self.peer.len());
                let conn = self.client.connection();
                let _ = if error {
                    conn.respond_error(id.as_id(), -32601, "no", None)
                } else {
                    conn.respond(id.as_id(), RawJson::new("{}").expect("valid"))
                };
            }
            ClientOp::Head(h) => self.head(h),
            ClientOp::Body(b) => self.body(b),
            ClientOp::End { which, jitter } => {
                if let Some(i) = self.pick(which, true) {
                    let s = self.sent.remove(i);
                    self.client.handle_end(self.now, s.exchange, jitter);
                    self.gone.push(s.exchange);
                }
            }
            ClientOp::Fail { which, jitter } => {
                if let Some(i) = self.pick(which, false) {
                    let s = self.sent.remove(i);
                    self.client.handle_error(self.now, s.exchange, jitter);
                    self.gone.push(s.exchange);
                }
            }
            ClientOp::Advance { millis } => {
                let step = if millis > 60_000 {
                    Duration::from_secs(u64::from(millis))
                } else {
                    Duration::from_millis(u64::from(millis))
                };
                self.now = self.now.after(step);
                if self.client.poll_timeout().is_some_and(|at| at <= self.now) {
                    self.fire();
                }
            }
            ClientOp::EndSession => {
                let _ = self.client.end_session();
            }
            ClientOp::Stray { which, kind } => self.stray(which, kind),
            ClientOp::Complete { which, sse } => self.complete(which, sse),
        }
    }

    /// Retries a request that came back "input required"; its new id must end like any.
    fn retry(&mut self, which: u8, responses: bool) {
        if self.retryable.is_empty() {
            return;
        }
        let (id, state) = self
            .retryable
            .remove(usize::from(which) % self.retryable.len());
        let responses = responses
            .then(|| RawJson::new(r#"{"a":{"action":"accept","content":{}}}"#).expect("valid"));
        let now = self.now;
        if let Ok(RequestId(new)) = (self.client.connection()).retry(now, RequestId(id), responses)
        {
            let before = self.open.insert(new, "retry");
            assert!(
                before.is_none(),
                "retry {new} was handed an id still in flight"
            );
            self.retried.insert(new, state);
            self.retries += 1;
        }
    }

    /// An exchange in flight: any (`with_head` false) or one that has its head.
    fn pick(&self, which: u8, with_head: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.sent.len())
            .filter(|&i| !with_head || self.sent[i].head)
            .collect();
        (!candidates.is_empty()).then(|| candidates[usize::from(which) % candidates.len()])
    }

    fn head(&mut self, h: HeadSpec) {
        let Some(i) = self.pick(h.which, false) else {
            return;
        };
        if self.sent[i].head {
            return;
        }
        self.sent[i].head = true;
        // (0xFF: a final informational head, which a host's HTTP library may hand over.)
        let status = match h.status {
            0xFF => 101,
            s => STATUSES[usize::from(s) % STATUSES.len()],
        };
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(media) = MEDIA[usize::from(h.media) % MEDIA.len()] {
            headers.push(("Content-Type", media));
        }
        if matches!(status, 429 | 503)
            && let Some(wait) =
                RETRY_AFTER[usize::from(h.status) / STATUSES.len() % RETRY_AFTER.len()]
        {
            headers.push(("Retry-After", wait));
        }
        if let Some(s) = h.session {
            let sid = SESSIONS[usize::from(s) % SESSIONS.len()];
            headers.push(("mcp-session-id", sid));
            if self.sent[i].initialize && (200..300).contains(&status) {
                self.offered.push(sid.trim().to_owned());
            }
        }
        let exchange = self.sent[i].exchange;
        self.client
            .handle_response(self.now, exchange, status, &headers);
    }

    fn body(&mut self, b: BodySpec) {
        let Some(i) = self.pick(b.which, true) else {
            return;
        };
        let s = &self.sent[i];
        let id = if !s.ids.is_empty() && !b.id.is_multiple_of(4) {
            s.ids[usize::from(b.id) % s.ids.len()].0
        } else {
            let mut all: Vec<i64> = self.open.keys().copied().collect();
            all.sort_unstable();
            match all.get(usize::from(b.id) % all.len().max(1)) {
                Some(&id) if !b.id.is_multiple_of(8) => id,
                _ => i64::from(b.id),
            }
        };
        let server_id = self.next_server_id;
        let message = match b.what % 12 {
            0 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#),
            1 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}},"resources":{{}},"prompts":{{}}}},"serverInfo":{{"name":"f","version":"1"}}}}}}"#
            ),
            2 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"f","version":"1"}}}}}}"#
            ),
            3 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#
            ),
            4 => {
                self.next_server_id += 1;
                format!(r#"{{"jsonrpc":"2.0","id":"srv-{server_id}","method":"ping"}}"#)
            }
            5 => {
                self.next_server_id += 1;
                format!(
                    r#"{{"jsonrpc":"2.0","id":{server_id},"method":"sampling/createMessage","params":{{"messages":[],"maxTokens":1}}}}"#
                )
            }
            6 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":1}}}}"#
            ),
            7 => r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#.to_owned(),
            8 => format!(
                r#"[{{"jsonrpc":"2.0","id":{id},"result":{{}}}},{{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}]"#
            ),
            9 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","content":[]}}}}"#
            ),
            10 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{server_id}}}}}"#
            ),
            11 if b.raw.first() == Some(&0xff) => {
                self.later_shape(b.raw.get(1).copied().unwrap_or(0), id)
            }
            _ => String::from_utf8_lossy(&b.raw).into_owned(),
        };
        let event_id = EVENT_IDS[usize::from(b.event_id) % EVENT_IDS.len()];
        let bytes: Vec<u8> = match b.frame % 6 {
            0 => message.into_bytes(),
            1 => format!("data: {message}\n\n").into_bytes(),
            2 => format!("id: {event_id}\ndata: {message}\n\n").into_bytes(),
            3 => format!("id: {event_id}\nretry: {}\n\n", b.cut).into_bytes(),
            4 => format!("event: other\nid: {event_id}\ndata: {message}\r\n\r\n").into_bytes(),
            _ => b.raw,
        };
        let keep = match b.cut % 4 {
            0 => bytes.len() / 2,
            _ => bytes.len(),
        };
        let exchange = self.sent[i].exchange;
        self.client.handle_body(self.now, exchange, &bytes[..keep]);
    }

    /// The messages added after the corpus was grown, picked by a raw body's second byte
    /// when its first is 0xFF (bytes no text holds, so older inputs decode as they did):
    /// "input required" answers (with a `requestState` to echo, or with none), a task the
    /// client never asked for, an unknown kind of result or a header mismatch, a 2025-11-25
    /// URL elicitation required, and the server's own URL elicitation.
    fn later_shape(&mut self, pick: u8, id: i64) -> String {
        let state = STATES[usize::from(pick / 8) % STATES.len()];
        let server_id = self.next_server_id;
        match pick % 6 {
            0 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"a":{{"method":"elicitation/create","params":{{"mode":"form","message":"m","requestedSchema":{{"type":"object","properties":{{}}}}}}}}}},"requestState":"{state}"}}}}"#
            ),
            1 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{}}}}}}"#
            ),
            2 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"task","taskId":"t-1","status":"working"}}}}"#
            ),
            // (A refusal of the `Mcp-Param-*` headers, which a 2026-07-28 `tools/call` gets
            // past once by reading `tools/list`, came later: in half of this shape's bytes.)
            3 if pick & 0x40 != 0 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32020,"message":"Header mismatch"}}}}"#
            ),
            3 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"later"}}}}"#),
            4 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32042,"message":"go","data":{{"elicitations":[{{"mode":"url","elicitationId":"e-1","url":"https://example.com/x","message":"m"}}]}}}}}}"#
            ),
            _ => {
                self.next_server_id += 1;
                format!(
                    r#"{{"jsonrpc":"2.0","id":{server_id},"method":"elicitation/create","params":{{"mode":"url","elicitationId":"e-{server_id}","url":"https://example.com/{state}","message":"m"}}}}"#
                )
            }
        }
    }

    /// Answers every request exchange `which` carries with a result fit for its method, in
    /// one 200 response that then ends: afterwards none of them may still be waiting (an
    /// answer that arrives must end its request, one way or another).
    fn complete(&mut self, which: u8, sse: bool) {
        let Some(i) = self.pick(which, false) else {
            return;
        };
        if self.sent[i].head || self.sent[i].ids.is_empty() {
            return;
        }
        let s = self.sent.remove(i);
        self.gone.push(s.exchange);
        let mut body = String::new();
        for (id, method) in &s.ids {
            let result = match method.as_str() {
                "initialize" => {
                    r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"f","version":"1"}}"#
                }
                "server/discover" => {
                    r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"f","version":"1"}}"#
                }
                "tools/list" => {
                    r#"{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"},"n":{"type":"number","x-mcp-header":"N"}}}}]}"#
                }
                "resources/read" => r#"{"contents":[]}"#,
                "prompts/get" => r#"{"messages":[]}"#,
                _ => r#"{"content":[]}"#,
            };
            let message = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
            if sse {
                body.push_str(&format!("data: {message}\n\n"));
            } else {
                body = message; // (one request per POST: the last one)
            }
        }
        let media = if sse {
            "text/event-stream"
        } else {
            "application/json"
        };
        let headers = [("Content-Type", media)];
        self.client
            .handle_response(self.now, s.exchange, 200, &headers);
        self.client
            .handle_body(self.now, s.exchange, body.as_bytes());
        self.client.handle_end(self.now, s.exchange, 0);
        self.settle();
        for (id, method) in &s.ids {
            assert!(
                !self.open.contains_key(id),
                "request {id} ({method}) got its answer and is still waiting"
            );
        }
    }

    /// A report out of turn. An exchange the client handed out again (a resumption) is in
    /// flight once more, so it is not stray: those are skipped.
    fn stray(&mut self, which: u8, kind: u8) {
        if self.gone.len() > 64 {
            self.gone.drain(..32);
        }
        let in_flight = |e: ExchangeId, sent: &[Sent]| sent.iter().any(|s| s.exchange == e);
        let exchange = match kind % 6 {
            // One never made.
            0 => ExchangeId(u64::from(which) << 32 | 0xffff),
            // One ended or aborted.
            1..=3 if !self.gone.is_empty() => self.gone[usize::from(which) % self.gone.len()],
            // One in flight: a second head, or a body before its head.
            _ => match self.pick(which, false) {
                Some(i) => {
                    let s = &self.sent[i];
                    if kind.is_multiple_of(2) && !s.head {
                        // A body before the head.
                        let e = s.exchange;
                        self.client.handle_body(self.now, e, b"data: {}\n\n");
                        return;
                    }
                    if !s.head {
                        return;
                    }
                    let e = s.exchange;
                    let headers = [("Content-Type", "text/event-stream")];
                    self.client.handle_response(self.now, e, 200, &headers);
                    return;
                }
                None => return,
            },
        };
        if in_flight(exchange, &self.sent) {
            return;
        }
        match which % 4 {
            0 => self.client.handle_response(self.now, exchange, 200, &[]),
            1 => self.client.handle_body(
                self.now,
                exchange,
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            ),
            2 => self.client.handle_end(self.now, exchange, 0),
            _ => self.client.handle_error(self.now, exchange, 0),
        }
    }

    /// Fires the client's timers at `now`, and checks that nothing due is left.
    fn fire(&mut self) {
        self.client.handle_timeout(self.now);
        if let Some(at) = self.client.poll_timeout() {
            assert!(
                at > self.now,
                "after handle_timeout({:?}) a deadline at {at:?} is still due",
                self.now
            );
        }
    }

    /// Takes every action and event the client has, checking them.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            while let Some(action) = self.client.poll_action() {
                moved = true;
                match action {
                    ClientAction::Send {
                        exchange,
                        method: _,
                        headers,
                        body,
                    } => {
                        for (name, value) in headers {
                            assert!(
                                !name.bytes().chain(value.bytes()).any(control),
                                "a header with a control character: {name:?}: {value:?}"
                            );
                        }
                        let text = String::from_utf8_lossy(body);
                        let ids = request_ids(body);
                        self.checked_retries += check_retries(&mut self.retried, body);
                        let reply = text.contains(r#""result""#) || text.contains(r#""error""#);
                        // A resumed exchange (a GET after its POST's stream broke) keeps
                        // carrying what its POST carried: the initialize answer may come on it.
                        if text.contains(r#""method":"initialize""#) {
                            self.initialize.push(exchange);
                        }
                        self.sent.push(Sent {
                            exchange,
                            initialize: self.initialize.contains(&exchange),
                            ids,
                            reply: reply && !text.contains(r#""method""#),
                            head: false,
                        });
                    }
                    ClientAction::Abort { exchange } => {
                        self.sent.retain(|s| s.exchange != exchange);
                        self.gone.push(exchange);
                    }
                }
                if let Err(e) = self.client.check_counts() {
                    panic!("the client's counts drifted: {e}");
                }
                let replies = self.sent.iter().filter(|s| s.reply).count();
                assert!(
                    replies <= MAX_RUNNING_REPLIES,
                    "{replies} answers to server requests out at once"
                );
                let carrying: std::collections::HashSet<ExchangeId> = (self.sent.iter())
                    .filter(|s| !s.ids.is_empty())
                    .map(|s| s.exchange)
                    .collect();
                assert!(
                    carrying.len() <= MAX_RUNNING_REQUESTS,
                    "{} POSTs of requests out at once",
                    carrying.len()
                );
            }
            while let Some(event) = self.client.poll_event() {
                moved = true;
                if let Event::InputRequired {
                    request,
                    request_state,
                    ..
                } = &event
                {
                    let state = request_state.map(|s| s.to_str().into_owned());
                    self.retryable.push((request.0, state));
                    if self.retryable.len() > 16 {
                        self.retryable.remove(0);
                    }
                }
                let ended = match event {
                    Event::Response { request, .. }
                    | Event::Error { request, .. }
                    | Event::InputRequired { request, .. }
                    | Event::TaskCreated { request, .. }
                    | Event::UrlElicitationRequired { request, .. }
                    | Event::InvalidResponse { request }
                    | Event::TimedOut { request }
                    | Event::Abandoned { request }
                    | Event::Failed { request, .. } => Some(request.0),
                    Event::Request { id, .. } => {
                        self.peer.push(OwnedId::from(id));
                        None
                    }
                    _ => None,
                };
                if let Some(id) = ended {
                    assert!(
                        self.open.remove(&id).is_some(),
                        "request {id} ended, but it was not in flight (twice, or never made)"
                    );
                }
            }
            if !moved {
                break;
            }
        }
        let session = self.client.session_id().map(str::to_owned);
        if session != self.session {
            if let Some(sid) = &session {
                assert!(
                    self.offered.iter().any(|o| o == sid),
                    "session id {sid:?} adopted, but no 2xx answer to initialize offered it"
                );
            }
            self.session = session;
        }
    }

    /// Fails every exchange in flight and runs time past every deadline: every request made
    /// must have ended.
    fn finish(&mut self) {
        for _ in 0..64 {
            while let Some(s) = self.sent.pop() {
                self.client.handle_error(self.now, s.exchange, 0);
            }
            self.settle();
            if self.open.is_empty() {
                return;
            }
            let next = self
                .client
                .poll_timeout()
                .unwrap_or(self.now)
                .max(self.now.after(Duration::from_secs(1)));
            self.now = next;
            self.fire();
            self.settle();
        }
        assert!(
            self.open.is_empty(),
            "requests never ended: {:?}",
            self.open
        );
    }
}

/// A retry's params echo the `requestState` its "input required" answer gave, exactly
/// (and carry none when there was none).
fn check_retries(retried: &mut HashMap<i64, Option<String>>, body: &[u8]) -> usize {
    if retried.is_empty() {
        return 0;
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return 0;
    };
    let mut checked = 0;
    let messages = match value {
        serde_json::Value::Array(all) => all,
        one => vec![one],
    };
    for m in &messages {
        let Some(id) = m.get("id").and_then(serde_json::Value::as_i64) else {
            continue;
        };
        if m.get("method").is_none() {
            continue;
        }
        let Some(state) = retried.remove(&id) else {
            continue;
        };
        let sent = m
            .get("params")
            .and_then(|p| p.get("requestState"))
            .map(|s| s.as_str().map(str::to_owned));
        assert_eq!(
            sent,
            state.map(Some),
            "retry {id} did not echo the requestState it was given"
        );
        checked += 1;
    }
    checked
}

/// A byte HTTP header values may not hold: the controls but tab, and DEL.
fn control(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// The integer ids of the requests in a JSON-RPC body (ours are integers), with their methods.
fn request_ids(body: &[u8]) -> Vec<(i64, String)> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let messages = match value {
        serde_json::Value::Array(all) => all,
        one => vec![one],
    };
    messages
        .iter()
        .filter_map(|m| {
            let method = m.get("method")?.as_str()?.to_owned();
            Some((m.get("id")?.as_i64()?, method))
        })
        .collect()
}
