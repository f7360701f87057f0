//! The sans-IO HTTP client (`mcpwire::http::HttpClient`) against the sans-IO HTTP server, in
//! memory with simulated time: both eras, tool header annotations, expired sessions,
//! resumption after a closed stream, and failed exchanges; and against scripted servers that
//! poll, expire sessions or ask for long retries.

mod common;

use std::time::Duration;

use common::pair::{Ev, client_config, legacy, modern, server_config};
use mcpwire::Timestamp;
use mcpwire::conn::{CloseReason, Config, Event, RequestId, State, TransportFailure};
use mcpwire::http::{
    Body, ClientAction, ExchangeId, HELD_BODY_FRAMES, HttpClient, HttpRequest, HttpServer,
    HttpServerConfig, HttpStreamId, ReconnectPolicy,
};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::ProtocolVersion;
use serde_json::{Value, json};

const TOOLS: &str = r#"{"tools":[
    {"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"query":{"type":"string"}}}},
    {"name":"broken","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}},
    {"name":"plain","inputSchema":{"type":"object"}}]}"#;

/// What the server application does with requests.
#[derive(Clone, Copy, PartialEq)]
enum App {
    /// Answers at once.
    Answer,
    /// Closes a `tools/call` stream for polling and answers on the next tick.
    Poll,
    /// 2026-07-28: answers a `tools/call` "input required" (with a `requestState` that needs
    /// escaping) unless it carries a `requestState`; then echoes that and `inputResponses`.
    AskFirst,
}

struct World {
    client: HttpClient,
    server: HttpServer,
    app: App,
    now: Timestamp,
    /// Open SSE responses: (client exchange, server stream).
    streams: Vec<(ExchangeId, HttpStreamId)>,
    /// tools/call requests to answer on the next tick: (connection, id).
    later: Vec<(mcpwire::http::ConnKey, mcpwire::jsonrpc::OwnedId)>,
    /// Every request the server saw: (method, headers).
    seen: Vec<(String, Vec<(String, String)>)>,
    events: Vec<Ev>,
    /// Make the server fail POSTs with this status, when set, `fail_count` times.
    fail_with: Option<u16>,
    fail_count: usize,
    seed: u64,
}

impl World {
    fn new(client: Config, server: HttpServerConfig, app: App) -> World {
        World {
            client: HttpClient::new(client, Timestamp::ZERO, ReconnectPolicy::default(), false)
                .unwrap(),
            server: HttpServer::new(server),
            app,
            now: Timestamp::ZERO,
            streams: Vec::new(),
            later: Vec::new(),
            seen: Vec::new(),
            events: Vec::new(),
            fail_with: None,
            fail_count: usize::MAX,
            seed: 7,
        }
    }

    fn jitter(&mut self) -> u32 {
        self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (self.seed >> 32) as u32
    }

    /// Runs the server application over the server's events.
    fn serve(&mut self) {
        while let Some((key, e)) = self.server.poll_event() {
            let e = e.to_owned_event();
            let Ev::Request { id, method, params } = e else {
                continue;
            };
            let params: Value = params
                .as_deref()
                .map(|p| serde_json::from_str(p).unwrap())
                .unwrap_or(Value::Null);
            let result = match method.as_str() {
                "tools/list" => TOOLS.to_owned(),
                "tools/call" if self.app == App::Poll => {
                    if self.server.close_stream_for_polling(key, id.as_id()) {
                        self.later.push((key, id));
                        continue;
                    }
                    json!({"content":[{"type":"text","text":"at once"}]}).to_string()
                }
                "tools/call" if self.app == App::AskFirst && params.get("requestState").is_none() => {
                    let asks = r#"{"who":{"method":"elicitation/create","params":{"mode":"form","message":"Who?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}}"#;
                    if let Some(conn) = self.server.connection(key) {
                        conn.respond_input_required(
                            id.as_id(),
                            Some(RawJson::new(asks).unwrap()),
                            Some("step 1: \"quoted\"\nline é"),
                        )
                        .unwrap();
                    }
                    continue;
                }
                "tools/call" if self.app == App::AskFirst => json!({"content":[{"type":"text",
                    "text":format!("state {} responses {}", params["requestState"], params["inputResponses"])}]})
                .to_string(),
                "tools/call" => json!({"content":[{"type":"text",
                    "text":format!("called {} with {}", params["name"], params["arguments"])}]})
                .to_string(),
                _ => "{}".to_owned(),
            };
            if let Some(conn) = self.server.connection(key) {
                let _ = conn.respond(id.as_id(), RawJson::new(&result).unwrap());
            }
        }
        self.server.pump();
    }

    /// One round of the hosts: the client's actions go to the server, streams flow back.
    fn step(&mut self) {
        while let Some(action) = self.client.poll_action() {
            match action {
                ClientAction::Abort { exchange } => {
                    if let Some(i) = self.streams.iter().position(|(e, _)| *e == exchange) {
                        let (_, s) = self.streams.remove(i);
                        self.server.stream_closed(self.now, s);
                    }
                }
                ClientAction::Send {
                    exchange,
                    method,
                    headers,
                    body,
                } => {
                    let owned: Vec<(String, String)> = headers.to_vec();
                    let body = body.to_vec();
                    self.seen.push((method.to_owned(), owned.clone()));
                    let mut views: Vec<(&str, &str)> = owned
                        .iter()
                        .map(|(n, v)| (n.as_str(), v.as_str()))
                        .collect();
                    views.push(("Host", "127.0.0.1:1"));
                    let fail = self
                        .fail_with
                        .filter(|_| method == "POST" && self.fail_count > 0);
                    if let Some(status) = fail {
                        self.fail_count -= 1;
                        self.client.handle_response(self.now, exchange, status, &[]);
                        let j = self.jitter();
                        self.client.handle_end(self.now, exchange, j);
                        continue;
                    }
                    let req = HttpRequest {
                        method,
                        headers: &views,
                        body: &body,
                    };
                    let mut seed = self.seed;
                    let r = self
                        .server
                        .handle_request(self.now, &req, &mut |b: &mut [u8]| {
                            for x in b {
                                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(3);
                                *x = (seed >> 56) as u8;
                            }
                        });
                    self.seed = seed;
                    self.serve();
                    let r = self.server.settle(r);
                    let headers: Vec<(&str, &str)> =
                        r.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
                    self.client
                        .handle_response(self.now, exchange, r.status, &headers);
                    match r.body {
                        Body::Empty => {
                            let j = self.jitter();
                            self.client.handle_end(self.now, exchange, j);
                        }
                        Body::Complete(_, bytes) => {
                            self.client.handle_body(self.now, exchange, &bytes);
                            let j = self.jitter();
                            self.client.handle_end(self.now, exchange, j);
                        }
                        Body::Stream(s) => self.streams.push((exchange, s)),
                    }
                }
            }
        }
        // Streams: whatever is there flows; a finished one ends.
        let streams = std::mem::take(&mut self.streams);
        for (exchange, s) in streams {
            let mut open = true;
            match self.server.poll_stream(s) {
                Some(out) => {
                    let bytes = out.bytes.to_vec();
                    let finished = out.finished;
                    self.server.consume_stream(s, bytes.len());
                    self.client.handle_body(self.now, exchange, &bytes);
                    if finished {
                        let j = self.jitter();
                        self.client.handle_end(self.now, exchange, j);
                        open = false;
                    }
                }
                None => {
                    let j = self.jitter();
                    self.client.handle_end(self.now, exchange, j);
                    open = false;
                }
            }
            if open {
                self.streams.push((exchange, s));
            }
        }
        while let Some(e) = self.client.poll_event() {
            self.events.push(e.to_owned_event());
        }
    }

    /// Steps until nothing moves, advancing time by `tick` when idle, for at most `limit`.
    fn run(&mut self, limit: Duration) {
        let end = self.now.after(limit);
        while self.now < end {
            for _ in 0..4 {
                self.step();
            }
            self.now = self.now.after(Duration::from_millis(50));
            let later = std::mem::take(&mut self.later);
            for (key, id) in later {
                if let Some(conn) = self.server.connection(key) {
                    let r = json!({"content":[{"type":"text","text":"after polling"}]}).to_string();
                    let _ = conn.respond(id.as_id(), RawJson::new(&r).unwrap());
                }
            }
            self.server.handle_timeout(self.now);
            self.server.pump();
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
        }
    }

    fn ready(&mut self) -> ProtocolVersion {
        self.run(Duration::from_millis(500));
        let v = self.events.iter().find_map(|e| match e {
            Ev::Ready { version } => Some(*version),
            _ => None,
        });
        v.unwrap_or_else(|| panic!("not ready: {:?}", self.events))
    }

    fn call(&mut self, method: &str, params: Value) -> Ev {
        let text = params.to_string();
        let id = self
            .client
            .connection()
            .request(self.now, method, Some(RawJson::new(&text).unwrap()))
            .unwrap();
        self.events.clear();
        self.run(Duration::from_secs(3));
        self.events
            .iter()
            .find(|e| match e {
                Ev::Response { request, .. }
                | Ev::Error { request, .. }
                | Ev::Failed { request, .. }
                | Ev::TimedOut { request } => *request == id,
                _ => false,
            })
            .cloned()
            .unwrap_or_else(|| panic!("no answer to {method}: {:?}", self.events))
    }
}

/// The value of header `name` (any case) among `headers`.
fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn result(e: &Ev) -> Value {
    match e {
        Ev::Response { result, .. } => serde_json::from_str(result).unwrap(),
        other => panic!("not a result: {other:?}"),
    }
}

fn http_server_config() -> HttpServerConfig {
    let mut c = HttpServerConfig::new(server_config());
    let _ = c.declare_tools(RawJson::new(TOOLS).unwrap());
    c
}

#[test]
fn a_session_in_the_handshake_era() {
    let mut w = World::new(legacy(client_config()), http_server_config(), App::Answer);
    assert_eq!(w.ready(), ProtocolVersion::V2025_11_25);
    assert!(w.client.session_id().is_some());
    let tools = result(&w.call("tools/list", json!({})));
    assert_eq!(
        tools["tools"].as_array().unwrap().len(),
        3,
        "every tool is kept: `x-mcp-header` is a 2026-07-28 rule: {tools}"
    );
    let r = result(&w.call(
        "tools/call",
        json!({"name":"sql","arguments":{"region":"eu"}}),
    ));
    assert!(r["content"][0]["text"].as_str().unwrap().contains("eu"));
    // Every request after initialize carried the session and the version.
    for (method, headers) in &w.seen[1..] {
        let has = |n: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        assert!(
            has("Mcp-Session-Id") && has("MCP-Protocol-Version"),
            "{method} {headers:?}"
        );
    }
}

#[test]
fn input_required_then_a_retry_over_http_echoes_the_state_and_gets_the_answer() {
    let mut w = World::new(client_config(), http_server_config(), App::AskFirst);
    assert_eq!(w.ready(), ProtocolVersion::V2026_07_28);
    let tools = result(&w.call("tools/list", json!({})));
    assert_eq!(
        tools["tools"].as_array().unwrap().len(),
        2,
        "the tool with an invalid annotation is left out: {tools}"
    );
    let args = json!({"name":"sql","arguments":{"region":"eu","query":"select"}});
    let text = args.to_string();
    let first = (w.client.connection())
        .request(w.now, "tools/call", Some(RawJson::new(&text).unwrap()))
        .unwrap();
    w.events.clear();
    w.run(Duration::from_secs(1));
    let (asks, state) = w
        .events
        .iter()
        .find_map(|e| match e {
            Ev::InputRequired {
                request,
                input_requests,
                request_state,
            } if *request == first => Some((input_requests.clone(), request_state.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no input required: {:?}", w.events));
    let asks: Value = serde_json::from_str(&asks.expect("inputRequests")).unwrap();
    assert_eq!(asks["who"]["method"], "elicitation/create");
    assert_eq!(state.as_deref(), Some("step 1: \"quoted\"\nline é"));
    let retry = (w.client.connection())
        .retry(
            w.now,
            first,
            Some(RawJson::new(r#"{"who":{"action":"accept","content":{"name":"Ada"}}}"#).unwrap()),
        )
        .unwrap();
    assert_ne!(retry, first);
    w.events.clear();
    w.run(Duration::from_secs(1));
    let answer = w
        .events
        .iter()
        .find(|e| matches!(e, Ev::Response { request, .. } if *request == retry))
        .unwrap_or_else(|| panic!("no answer to the retry: {:?}", w.events));
    let text = result(answer)["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        text,
        r#"state "step 1: \"quoted\"\nline é" responses {"who":{"action":"accept","content":{"name":"Ada"}}}"#
    );
    // The retry is a request of its own, with the headers of the original.
    let (method, headers) = w.seen.last().unwrap();
    assert_eq!(method, "POST");
    let get = |n: &str| header(headers, n);
    assert_eq!(get("Mcp-Method"), Some("tools/call"));
    assert_eq!(get("Mcp-Name"), Some("sql"));
    assert_eq!(get("Mcp-Param-Region"), Some("eu"));
}

#[test]
fn ending_the_session_deletes_it_on_the_server() {
    let mut w = World::new(legacy(client_config()), http_server_config(), App::Answer);
    w.ready();
    assert_eq!(w.server.sessions(), 1);
    assert!(w.client.end_session().is_some());
    assert!(w.client.end_session().is_none(), "once");
    w.run(Duration::from_millis(100));
    assert!(w.seen.iter().any(|(m, _)| m == "DELETE"));
    assert_eq!(w.server.sessions(), 0);
}

/// An error whose id the server could not read answers the one request its POST carried,
/// with the server's own message: on the request's stream it was a violation and the request
/// later failed with "the stream ended without the answer"; in a 400's body the request failed
/// with the bare status ("HTTP status 400 without an answer").
#[test]
fn an_error_without_an_id_answers_the_posts_one_request() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let error = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"internal oops"}}"#;
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.stream(&s, &[], &format!("data: {error}\n\n"));
    let id2 = c.request("tools/list");
    let s2 = c.sent().remove(0);
    c.answer(&s2, 400, &[("Content-Type", "application/json")], error);
    for id in [id, id2] {
        match c.outcome(id) {
            Some(Ev::Error { code, message, .. }) => {
                assert_eq!((*code, message.as_str()), (-32000, "internal oops"));
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A message the connection holds when the session ends (the cancellation a timeout queues,
/// a notification) goes out in the session, before its DELETE: it went out later, without the
/// session id, and the server refused it with 400. And the DELETE waits for its response
/// head: sent beside it, the DELETE could reach the server first (which then refused the
/// cancellation with 404), and a host that exits once the DELETE is answered lost it.
#[test]
fn what_waits_when_the_session_ends_goes_out_in_the_session() {
    let (mut c, delete) = Scripted::ending_after_a_notification();
    let sent = c.sent();
    let methods: Vec<&str> = sent.iter().map(|s| s.method).collect();
    assert_eq!(methods, ["POST"], "the DELETE waits for the POST's head");
    assert!(c.client.has_exchange(delete), "held, not dropped");
    assert!(c.client.has_unheard());
    c.client.handle_response(c.now, sent[0].exchange, 202, &[]);
    assert!(!c.client.has_unheard());
    let after = c.sent();
    let methods: Vec<&str> = after.iter().map(|s| s.method).collect();
    assert_eq!(methods, ["DELETE"]);
    assert_eq!(after[0].exchange, delete);
    for s in sent.iter().chain(&after) {
        assert_eq!(s.header("Mcp-Session-Id"), Some("s1"), "{}", s.method);
    }
    c.answer(&after[0], 200, &[], "");
    assert!(!c.client.has_exchange(delete), "ended");
}

/// A notification that never gets its response head holds the DELETE back only until it is
/// let go ([`UNAWAITED_HEAD_LIMIT`]); one that failed holds it back no more.
#[test]
fn the_delete_waits_for_an_unheard_notification_only_until_it_is_let_go() {
    use mcpwire::http::UNAWAITED_HEAD_LIMIT;
    for fails in [false, true] {
        let (mut c, delete) = Scripted::ending_after_a_notification();
        let post = c.sent().remove(0);
        assert_eq!(post.method, "POST");
        c.wait(Duration::from_secs(1));
        assert!(c.sent().is_empty(), "still held");
        if fails {
            c.client.handle_error(c.now, post.exchange, 0);
        } else {
            c.wait(UNAWAITED_HEAD_LIMIT);
        }
        let sent = c.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!((sent[0].method, sent[0].exchange), ("DELETE", delete));
        if !fails {
            assert!(c.aborted.contains(&post.exchange), "the POST was let go");
        }
    }
}

/// A notification that the DELETE waits for is answered 404: the session is gone already,
/// so the DELETE is dropped rather than sent, and a host waiting for it stops.
#[test]
fn a_held_delete_is_dropped_when_the_session_turns_out_to_be_gone() {
    let (mut c, delete) = Scripted::ending_after_a_notification();
    let post = c.sent().remove(0);
    c.expire(&post);
    c.events();
    assert!(c.sent().is_empty(), "no DELETE for a session that is gone");
    assert!(!c.client.has_exchange(delete));
    c.wait(Duration::from_secs(30));
    assert!(c.sent().is_empty(), "nor later, nor a new session");
}

#[test]
fn stateless_requests_carry_the_standard_and_the_tools_param_headers() {
    let mut w = World::new(client_config(), http_server_config(), App::Answer);
    assert_eq!(w.ready(), ProtocolVersion::V2026_07_28);
    let _ = w.call("tools/list", json!({}));
    // The server checks Mcp-Param-Region against the body: an answer proves the header.
    let r = result(&w.call(
        "tools/call",
        json!({"name":"sql","arguments":{"region":"Hello, 世界","query":"select"}}),
    ));
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("世界"),
        "{r}"
    );
    let (_, headers) = w.seen.last().unwrap();
    let get = |n: &str| header(headers, n);
    assert_eq!(get("Mcp-Method"), Some("tools/call"));
    assert_eq!(get("Mcp-Name"), Some("sql"));
    assert_eq!(get("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(
        get("Mcp-Param-Region"),
        Some("=?base64?SGVsbG8sIOS4lueVjA==?=")
    );
    assert_eq!(get("Mcp-Session-Id"), None);
    // An annotated argument of a type no header can carry (a mistyped one) gets no header:
    // the call reaches the tool, whose own checks deal with it (the server refuses a header
    // that comes with such a value).
    let r = result(&w.call(
        "tools/call",
        json!({"name":"sql","arguments":{"region":["eu"],"query":"select"}}),
    ));
    assert!(r["content"][0]["text"].is_string(), "{r}");
    let (_, headers) = w.seen.last().unwrap();
    assert_eq!(header(headers, "Mcp-Param-Region"), None);
}

#[test]
fn an_expired_session_fails_its_requests_and_a_new_session_starts() {
    let mut config = http_server_config();
    config.session_idle_timeout = Duration::from_secs(60);
    let mut w = World::new(legacy(client_config()), config, App::Answer);
    w.ready();
    let first = w.client.session_id().unwrap().to_owned();
    // The client sits idle past the server's timeout; the session expires.
    w.now = w.now.after(Duration::from_secs(61));
    w.server.handle_timeout(w.now);
    assert_eq!(w.server.sessions(), 0);
    let failed = w.call("tools/list", json!({}));
    assert!(
        matches!(
            failed,
            Ev::Failed {
                reason: TransportFailure::Status(404),
                ..
            }
        ),
        "{failed:?}"
    );
    // A new connection, a new session: ready again after the failure, and requests work.
    let failed_at = w.events.iter().position(|e| matches!(e, Ev::Failed { .. }));
    let ready_at = w.events.iter().position(|e| matches!(e, Ev::Ready { .. }));
    assert!(
        ready_at > failed_at && failed_at.is_some(),
        "{:?}",
        w.events
    );
    assert!(
        w.events.iter().any(|e| matches!(e, Ev::Ready { .. })),
        "{:?}",
        w.events
    );
    let second = w.client.session_id().unwrap().to_owned();
    assert_ne!(first, second);
    assert_eq!(
        result(&w.call("tools/list", json!({})))["tools"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn a_stream_closed_for_polling_is_resumed_and_nothing_is_lost() {
    let mut w = World::new(legacy(client_config()), http_server_config(), App::Poll);
    w.ready();
    let r = result(&w.call("tools/call", json!({"name":"sql","arguments":{}})));
    assert_eq!(r["content"][0]["text"], "after polling");
    // The answer came on a GET with Last-Event-ID.
    let resumed = w.seen.iter().any(|(m, h)| {
        m == "GET"
            && h.iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("Last-Event-ID"))
    });
    assert!(resumed, "{:?}", w.seen);
}

#[test]
fn an_http_error_fails_the_request_at_once_and_an_auto_probe_falls_back() {
    let mut w = World::new(legacy(client_config()), http_server_config(), App::Answer);
    w.ready();
    w.fail_with = Some(503);
    let failed = w.call("tools/list", json!({}));
    assert!(
        matches!(
            failed,
            Ev::Failed {
                reason: TransportFailure::Status(503),
                ..
            }
        ),
        "{failed:?}"
    );
    // An auto-era client against a handshake-only server that refuses the probe with a bare
    // HTTP error: it falls back to initialize at once, not after the probe's timeout.
    let mut legacy_server = HttpServerConfig::new(server_config());
    legacy_server.server.versions = ProtocolVersion::LEGACY.to_vec();
    let mut w = World::new(client_config(), legacy_server, App::Answer);
    w.fail_with = Some(405);
    w.fail_count = 1;
    w.run(Duration::from_millis(200));
    assert!(
        w.events.iter().any(
            |e| matches!(e, Ev::Ready { version } if *version == ProtocolVersion::V2025_11_25)
        ),
        "{:?}",
        w.events
    );
    // A handshake that cannot get through closes the client.
    let mut w = World::new(legacy(client_config()), http_server_config(), App::Answer);
    w.fail_with = Some(500);
    w.run(Duration::from_millis(100));
    assert!(
        w.events.iter().any(|e| matches!(
            e,
            Ev::Closed {
                reason: CloseReason::TransportFailed(TransportFailure::Status(500))
            }
        )),
        "{:?}",
        w.events
    );
}

#[test]
fn the_reconnect_delay_follows_retry_backoff_and_jitter() {
    let p = ReconnectPolicy::default();
    let ms = Duration::from_millis;
    // The server's retry is the floor; jitter adds up to a quarter.
    assert_eq!(p.delay(1, Some(ms(1000)), 0), ms(1000));
    assert_eq!(p.delay(1, Some(ms(1000)), u32::MAX), ms(1250));
    // Doubling per attempt, capped before the jitter.
    assert_eq!(p.delay(3, None, 0), ms(2000));
    assert_eq!(p.delay(30, None, 0), Duration::from_secs(30));
    assert_eq!(p.delay(30, None, u32::MAX), Duration::from_millis(37_500));
}

/// What a host does next with a client driven by hand: drains the events, then takes one
/// action: (exchange, method, body, abort).
fn next_action(c: &mut HttpClient) -> Option<(ExchangeId, String, Value, bool)> {
    while c.poll_event().is_some() {}
    match c.poll_action()? {
        ClientAction::Send {
            exchange,
            method,
            body,
            ..
        } => Some((
            exchange,
            method.to_owned(),
            serde_json::from_slice(body).unwrap_or(Value::Null),
            false,
        )),
        ClientAction::Abort { exchange } => Some((exchange, String::new(), Value::Null, true)),
    }
}

/// A handshake-era client driven by hand through its handshake (session `s1`), with its GET
/// stream open; returns it and the GET stream's exchange.
fn legacy_client_by_hand() -> (HttpClient, ExchangeId) {
    let mut c = HttpClient::new(
        legacy(client_config()),
        Timestamp::ZERO,
        ReconnectPolicy::default(),
        true,
    )
    .unwrap();
    let t = Timestamp::ZERO;
    let json = [
        ("Content-Type", "application/json"),
        ("Mcp-Session-Id", "s1"),
    ];
    let (init, _, body, _) = next_action(&mut c).unwrap();
    assert_eq!(body["method"], "initialize");
    c.handle_response(t, init, 200, &json);
    let answer = json!({"jsonrpc":"2.0","id":body["id"],"result":{"protocolVersion":"2025-11-25",
        "capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}});
    c.handle_body(t, init, answer.to_string().as_bytes());
    c.handle_end(t, init, 0);
    // notifications/initialized, then the session's GET stream, which stays open.
    let mut get = None;
    while let Some((ex, method, body, abort)) = next_action(&mut c) {
        assert!(!abort);
        if method == "GET" {
            c.handle_response(t, ex, 200, &[("Content-Type", "text/event-stream")]);
            get = Some(ex);
        } else {
            assert_eq!(body["method"], "notifications/initialized");
            c.handle_response(t, ex, 202, &[]);
            c.handle_end(t, ex, 0);
        }
    }
    (c, get.expect("the GET stream was opened"))
}

/// A session that expires while the host still runs its GET stream: the client tells the host
/// to abort that exchange instead of leaving it open beside the new session's, and the one
/// that got the 404 too (its body may never end: the host kept its task and connection, one
/// more at each expiry).
#[test]
fn an_expired_session_aborts_the_exchanges_the_host_still_runs() {
    let (mut c, get) = legacy_client_by_hand();
    let t = Timestamp::ZERO;
    // A request meets a 404: the session is gone.
    c.connection()
        .request(t, "tools/list", None)
        .expect("tools/list");
    let (list, _, _, _) = next_action(&mut c).unwrap();
    // (Its body has not ended: a server may never end it.)
    c.handle_response(t, list, 404, &[]);
    let mut aborted = Vec::new();
    let mut restarted = false;
    while let Some((ex, _, body, abort)) = next_action(&mut c) {
        if abort {
            aborted.push(ex);
        } else if body["method"] == "initialize" {
            restarted = true;
            break;
        }
    }
    aborted.sort();
    assert_eq!(
        aborted,
        vec![get, list],
        "the old GET stream is aborted, and the exchange that got the 404 too"
    );
    assert!(restarted, "a new session starts");
}

/// A host that follows the documented loop in its order (actions until none, then the
/// responses, then the events, then the timer) starts the new session after a 404: handing
/// out the last old event makes the new connection, whose `initialize` is due at once. It
/// was left in the connection with the 60 s handshake timer armed for it, so the client
/// sent nothing and closed 60 s later (`InitializeTimedOut`), never reaching `Ready`.
#[test]
fn after_a_404_the_new_initialize_is_due_at_once_for_a_host_that_polls_actions_first() {
    let (mut c, _get) = legacy_client_by_hand();
    let t = Timestamp::ZERO;
    c.connection()
        .request(t, "tools/list", None)
        .expect("tools/list");
    let (list, _, _, _) = next_action(&mut c).unwrap();
    c.handle_response(t, list, 404, &[]);
    // Actions first (the aborts), then the events (the failure), as the docs order them.
    while c.poll_action().is_some() {}
    let mut failed = false;
    while let Some(ev) = c.poll_event() {
        failed |= matches!(ev, Event::Failed { .. });
    }
    assert!(failed, "the request failed with the session");
    let due = c.poll_timeout().expect("something is due");
    assert!(due <= t, "the new initialize waits until {due:?}");
    c.handle_timeout(due);
    let sent = next_action(&mut c).expect("an action");
    assert_eq!(sent.2["method"], "initialize", "{sent:?}");
    assert!(
        c.poll_timeout().is_none_or(|at| at > t),
        "nothing else is due"
    );
}

/// Once the connection has closed, its GET stream is closed too, not left open (on the
/// server as well) for as long as the host keeps the client (found by a review of the tokio
/// client).
#[test]
fn a_closed_connection_closes_its_get_stream() {
    let (mut c, get) = legacy_client_by_hand();
    let t = Timestamp::ZERO;
    c.connection().close(t, Duration::ZERO);
    let mut aborted = Vec::new();
    while let Some((ex, _, _, abort)) = next_action(&mut c) {
        assert!(abort, "nothing is sent");
        aborted.push(ex);
    }
    assert_eq!(c.connection().state(), State::Closed);
    assert_eq!(aborted, vec![get]);
    assert!(!c.has_exchange(get));
    // No GET stream opens again, and a DELETE still goes out for the session.
    let delete = c.end_session().expect("the session's DELETE");
    match c.poll_action() {
        Some(ClientAction::Send {
            exchange, method, ..
        }) => assert_eq!((exchange, method), (delete, "DELETE")),
        other => panic!("{:?}", other.map(|_| "another action")),
    }
    assert!(c.poll_action().is_none());
}

// ---- Found by a review of the client (fiftieth session) ------------------------------------

/// A server (or a load balancer without sticky sessions) that answers
/// `notifications/initialized` with 404 made the client start sessions for ever, as fast as
/// the server refused them, with no input from the application.
#[test]
fn a_server_that_refuses_initialized_with_404_does_not_make_sessions_for_ever() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let mut sessions = 0;
    for _ in 0..20 {
        let sent = c.sent();
        let Some(init) = sent.iter().find(|s| s.body["method"] == "initialize") else {
            break;
        };
        sessions += 1;
        let answer = initialize_answer(&init.body["id"]);
        c.answer(init, 200, &[("Mcp-Session-Id", "s")], &answer);
        for s in c.sent() {
            assert_eq!(s.body["method"], "notifications/initialized");
            c.expire(&s); // 404 to a POST that carried the session
        }
        c.events(); // hands out the old events, then builds the next session
    }
    // One new session after the first is forgotten (a server restart just then, say); after
    // the second, the client closes as a failed handshake does.
    assert_eq!(sessions, 2, "sessions none asked for by the application");
    assert!(
        c.events.iter().any(|e| matches!(
            e,
            Ev::Closed {
                reason: CloseReason::TransportFailed(TransportFailure::Status(404))
            }
        )),
        "{:?}",
        c.events
    );
}

/// A client that only listens (its GET stream open, no request made) keeps going across
/// server restarts: each 404 starts a new session with its GET stream again. Neither the
/// close after two empty sessions (the server took the GET stream) nor the rule that drops
/// a GET refused before anything was answered (it was open) applies to it.
#[test]
fn a_client_that_only_listens_outlives_server_restarts() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    c.handshake(Some("s1"));
    for restart in 0..3 {
        let get = c.gets.pop().expect("the session's GET stream");
        c.sse_head(get.exchange);
        // The server restarts: the stream ends, and its reopening gets 404.
        c.client.handle_end(c.now, get.exchange, 0);
        c.wait(Duration::from_secs(60));
        let again = c.sent().remove(0);
        assert_eq!(again.method, "GET", "round {restart}");
        c.expire(&again);
        c.events();
        c.handshake(Some("s2"));
        assert_eq!(
            c.gets.len(),
            1,
            "round {restart}: no GET stream in the new session"
        );
    }
    assert!(
        !c.events.iter().any(|e| matches!(e, Ev::Closed { .. })),
        "{:?}",
        c.events
    );
}

/// A request made after `end_session` fails at once for a host that takes its events before
/// its actions: `poll_action` makes that failure, and `poll_timeout` says it is due (it named
/// the request's own timeout, 60 s later).
#[test]
fn a_request_after_end_session_fails_at_once_for_a_host_that_takes_events_first() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    c.client.end_session().unwrap();
    let _ = c.sent(); // the DELETE
    let id = c.request("tools/list");
    c.events(); // events first: nothing yet
    let _ = c.sent(); // actions: take_output fails the request here -> Event::Failed queued
    // timer last
    let due = c.client.poll_timeout();
    assert!(
        due.is_some_and(|at| at <= c.now),
        "request {id:?} has a Failed event waiting, but the next wake-up is {due:?}"
    );
    c.wait(Duration::ZERO);
    assert!(
        matches!(
            c.outcome(id),
            Some(Ev::Failed {
                reason: TransportFailure::Status(404),
                ..
            })
        ),
        "{:?}",
        c.events
    );
    let next = c.client.poll_timeout();
    assert!(
        next.is_none_or(|at| at > c.now),
        "{next:?}: nothing more is due"
    );
}

/// A request cancelled while the GET that resumes its stream waits to go out: the cancellation
/// reaches the server. The waiting GET was taken for the request's unsent POST and
/// withdrawn with it, and the cancellation dropped, though the POST had reached the server
/// long before (which then ran the request to its end).
#[test]
fn a_cancel_after_the_resumption_fell_due_still_reaches_the_server() {
    let (mut c, id, post) = Scripted::in_session_with("tools/call");
    c.stream(&post, &[], "id: e1\nretry: 1000\ndata:\n\n"); // resumes in 1 s
    c.wait(Duration::from_millis(1500)); // handle_timeout + events, no actions yet
    c.client.connection().cancel(c.now, id, None).unwrap();
    let sent = c.sent();
    assert!(
        sent.iter()
            .any(|s| s.body["method"] == "notifications/cancelled"),
        "{:?}",
        sent.iter()
            .map(|s| (s.method, s.body.clone()))
            .collect::<Vec<_>>()
    );
}

/// `end_session` fails a request whose stream's resumption is due but not yet taken, as it
/// fails one still waiting for its time: that GET went out beside the DELETE, with the ended
/// session's id.
#[test]
fn end_session_fails_a_resumption_already_due() {
    let (mut c, id, post) = Scripted::in_session_with("tools/call");
    c.stream(&post, &[], "id: e1\nretry: 1000\ndata:\n\n"); // resumes in 1 s
    c.wait(Duration::from_millis(1500)); // due, not taken yet
    c.client.end_session().expect("the DELETE");
    c.events();
    let sent = c.sent();
    let methods: Vec<&str> = sent.iter().map(|s| s.method).collect();
    assert_eq!(methods, ["DELETE"]);
    assert!(
        matches!(
            c.outcome(id),
            Some(Ev::Failed {
                reason: TransportFailure::Status(404),
                ..
            })
        ),
        "{:?}",
        c.events
    );
}

/// A GET resuming a request's stream, refused for now (503) with a JSON-RPC error that names
/// the request, is tried again: the error answers no request, as the docs say (it ended the
/// request, whose answer the next GET would have brought).
#[test]
fn a_resuming_get_refused_for_now_is_tried_again_whatever_its_body_names() {
    let (mut c, id, post, get) = Scripted::resuming_after_a_break(1000);
    let n = post.body["id"].clone();
    let refusal = json!({"jsonrpc":"2.0","id":n,"error":{"code":-32000,"message":"busy"}});
    c.answer(
        &get,
        503,
        &[("Content-Type", "application/json")],
        &refusal.to_string(),
    );
    assert_eq!(c.outcome(id), None, "{:?}", c.events);
    c.wait(Duration::from_secs(5));
    let again = c.sent().remove(0);
    assert_eq!(again.method, "GET");
    c.resume_with_the_answer(&again, &post, id);
}

/// A POST of a request refused for now (503, or 429) with `Retry-After` in seconds goes again,
/// the same, once that time has passed, within the policy's attempts: the server did not take
/// it. It failed at once with the status (the tokio, Go and C hosts answer 503 with
/// `Retry-After: 1` past a connection cap or their bound on bodies being read).
#[test]
fn a_request_refused_with_retry_after_goes_again_then() {
    // (The engine's own 503s carry a JSON-RPC error without an id: the refusal's text, not
    // an answer.)
    let idless = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"too many sessions"}}"#;
    for (status, body) in [(503, "busy"), (429, "busy"), (503, idless)] {
        let (mut c, id, post) = Scripted::in_session_with("tools/call");
        c.answer(&post, status, &[("Retry-After", "3")], body);
        assert_eq!(c.outcome(id), None, "{status}: {:?}", c.events);
        c.wait(Duration::from_millis(2900));
        assert!(c.sent().is_empty(), "{status}: sent before the Retry-After");
        c.wait(Duration::from_millis(100));
        let again = c.sent().remove(0);
        assert_eq!(
            (again.method, &again.body),
            ("POST", &post.body),
            "{status}"
        );
        assert_eq!(again.header("Mcp-Session-Id"), Some("s1"));
        let answer = empty_result(&post);
        c.answer(
            &again,
            200,
            &[("Content-Type", "application/json")],
            &answer,
        );
        c.assert_answered(id);
    }
}

/// A notification refused for now with `Retry-After` goes again too (a lost `initialized`
/// or cancellation is worse than a late one), and the session's DELETE waits for it.
#[test]
fn a_notification_refused_with_retry_after_goes_again_before_the_delete() {
    let (mut c, delete) = Scripted::ending_after_a_notification();
    let post = c.sent().remove(0);
    assert_eq!(post.body["method"], "notifications/roots/list_changed");
    // (Head and end apart, with a look for work between them.)
    c.client
        .handle_response(c.now, post.exchange, 503, &[("Retry-After", "2")]);
    assert!(c.sent().is_empty(), "the DELETE went at the refusal's head");
    c.client.handle_end(c.now, post.exchange, 0);
    c.events();
    c.wait(Duration::from_secs(1));
    assert!(
        c.sent().is_empty(),
        "sent before the Retry-After, or the DELETE went first"
    );
    c.wait(Duration::from_secs(1));
    assert_sent_again_then_the_delete(&mut c, &post, delete);
}

/// The refused `post` went again (and only it); once it is accepted, the session's `delete`
/// goes.
fn assert_sent_again_then_the_delete(c: &mut Scripted, post: &Sent, delete: ExchangeId) {
    let again = c.sent();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].body, post.body);
    c.answer(&again[0], 202, &[], "");
    let last = c.sent();
    assert_eq!(
        (last.len(), last[0].method, last[0].exchange),
        (1, "DELETE", delete)
    );
}

/// A notification refused for now with a long page as the refusal's body (a proxy's HTML, some
/// KB) goes again too: its body used to be cut at 512 bytes, which let the POST go unsent.
#[test]
fn a_notification_refused_with_a_long_page_goes_again() {
    let (mut c, delete) = Scripted::ending_after_a_notification();
    let post = c.sent().remove(0);
    c.client.handle_response(
        c.now,
        post.exchange,
        429,
        &[("Retry-After", "1"), ("Content-Type", "text/html")],
    );
    let page = format!("<html><body>{}</body></html>", "slow down ".repeat(600));
    for piece in page.as_bytes().chunks(1000) {
        c.client.handle_body(c.now, post.exchange, piece);
    }
    c.client.handle_end(c.now, post.exchange, 0);
    c.events();
    assert!(c.sent().is_empty(), "sent before the Retry-After");
    c.wait(Duration::from_secs(1));
    assert_sent_again_then_the_delete(&mut c, &post, delete);
}

/// `initialized` refused for now goes again, and requests wait for its head again (they
/// went out at once, ahead of it: a strict server refuses a request before `initialized`).
#[test]
fn requests_wait_for_an_initialized_sent_again() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    let answer = initialize_answer(&init.body["id"]);
    c.answer(&init, 200, &[("Mcp-Session-Id", "s1")], &answer);
    let initialized = c.sent().remove(0);
    assert_eq!(initialized.body["method"], "notifications/initialized");
    let id = c.request("tools/list");
    // The refusal's head, then the host looks for work, then its end (as a real host does:
    // the request went out between the two).
    c.client
        .handle_response(c.now, initialized.exchange, 503, &[("Retry-After", "1")]);
    let mut sent = c.sent();
    c.client.handle_end(c.now, initialized.exchange, 0);
    c.events();
    sent.extend(c.sent());
    assert!(
        sent.iter().all(|s| s.body["method"] != "tools/list"),
        "a request ahead of initialized: {sent:?}"
    );
    c.wait(Duration::from_secs(1));
    let again = c.sent();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].body["method"], "notifications/initialized");
    c.answer(&again[0], 202, &[], "");
    let list = c.sent();
    assert!(
        list.iter().any(|s| s.body["method"] == "tools/list"),
        "{list:?}"
    );
    assert_eq!(c.outcome(id), None);
}

/// A notification refused for now before the session is ended still goes again, before the
/// DELETE: `end_session` failed it with the requests waiting to resume.
#[test]
fn a_notification_refused_before_end_session_still_goes_before_the_delete() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    c.client
        .connection()
        .notify("notifications/roots/list_changed", None)
        .unwrap();
    let post = c.sent().remove(0);
    c.answer(&post, 503, &[("Retry-After", "1")], "");
    let delete = c.client.end_session().unwrap();
    assert!(
        c.sent().is_empty(),
        "the DELETE went before the notification"
    );
    c.wait(Duration::from_secs(1));
    let again = c.sent();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].body, post.body);
    c.answer(&again[0], 202, &[], "");
    let last = c.sent();
    assert_eq!((last.len(), last[0].exchange), (1, delete));
}

/// A request cancelled while its refused POST waits to go again is withdrawn: neither it nor
/// its cancellation is sent (the server never had it).
#[test]
fn a_request_cancelled_while_its_refused_post_waits_is_withdrawn() {
    let (mut c, id, post) = Scripted::in_session_with("tools/call");
    c.answer(&post, 503, &[("Retry-After", "2")], "");
    let now = c.now;
    c.client
        .connection()
        .cancel(now, id, Some("changed my mind"))
        .unwrap();
    c.events();
    assert!(
        c.sent().is_empty(),
        "a cancellation of a request the server never had"
    );
    c.wait(Duration::from_secs(3));
    assert!(c.sent().is_empty(), "the withdrawn request went again");
}

/// Without `Retry-After` (or with an HTTP date, which a client without the time of day cannot
/// read) a refused request fails at once, as before; with it, it fails once the policy's
/// attempts are used up.
#[test]
fn a_refused_request_without_retry_after_or_past_its_attempts_fails() {
    for headers in [
        vec![],
        vec![("Retry-After", "Fri, 31 Dec 2027 23:59:59 GMT")],
    ] {
        let (mut c, id, post) = Scripted::in_session_with("tools/call");
        c.answer(&post, 503, &headers, "busy");
        assert!(
            matches!(c.outcome(id), Some(Ev::Failed { .. })),
            "{headers:?}: {:?}",
            c.events
        );
    }
    let (mut c, id, mut post) = Scripted::in_session_with("tools/call");
    for attempt in 0..=ReconnectPolicy::default().max_attempts {
        c.answer(&post, 503, &[("Retry-After", "1")], "busy");
        if attempt < ReconnectPolicy::default().max_attempts {
            assert_eq!(c.outcome(id), None, "attempt {attempt}: {:?}", c.events);
            c.wait(Duration::from_secs(1));
            post = c.sent().remove(0);
        }
    }
    assert!(
        matches!(c.outcome(id), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
}

/// A resuming GET refused with a `Retry-After` longer than the policy's backoff waits for
/// it (it was tried again after the backoff, 0.5 s, whatever the server asked).
#[test]
fn a_resuming_get_waits_for_its_refusals_retry_after() {
    let (mut c, id, post, get) = Scripted::resuming_after_a_break(500);
    c.answer(&get, 503, &[("Retry-After", "10")], "");
    c.wait(Duration::from_secs(9));
    assert!(c.sent().is_empty(), "tried again before the Retry-After");
    c.wait(Duration::from_millis(1500));
    let again = c.sent().remove(0);
    assert_eq!(again.method, "GET");
    assert_eq!(again.header("Last-Event-ID"), Some("e1"));
    c.resume_with_the_answer(&again, &post, id);
}

/// `end_session` called once `poll_event` has made the new session's connection, before its
/// `initialize` went out: no new session starts. One did, which nobody would end.
#[test]
fn ending_the_session_right_after_the_restart_began_starts_none() {
    let (mut c, _id, post) = Scripted::in_session_with("tools/list");
    c.expire(&post);
    c.events(); // the failure; the last poll_event builds the new connection
    assert_eq!(c.client.end_session(), None);
    let sent = c.sent();
    assert!(
        !initializes(&sent),
        "a new session after end_session: {sent:?}"
    );
}

/// `end_session` while `initialize` is out (its answer not come): the session the server
/// then makes is ended at once (the DELETE goes out with its id), and no request goes out in
/// it. (Before, `end_session` did nothing then, and the session started as if never ended.)
#[test]
fn ending_the_session_while_initialize_is_out_deletes_the_session_it_makes() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    assert_eq!(init.body["method"], "initialize");
    assert_eq!(c.client.end_session(), None, "no session yet");
    assert!(
        c.client.is_ending_session(),
        "a DELETE is owed: drive the client"
    );
    let answer = initialize_answer(&init.body["id"]);
    c.answer(&init, 200, &[("Mcp-Session-Id", "s1")], &answer);
    let sent = c.sent();
    let deletes: Vec<&Sent> = sent.iter().filter(|s| s.method == "DELETE").collect();
    assert_eq!(deletes.len(), 1, "{sent:?}");
    assert!(c.client.is_ending_session());
    assert!(
        deletes[0]
            .headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("Mcp-Session-Id") && v == "s1")
    );
    assert!(
        sent.iter().all(|s| s.method == "DELETE"),
        "nothing but the DELETE for an ended session (no GET stream, no POST without its \
         id): {sent:?}"
    );
    assert_eq!(c.client.session_id(), None);
    // Requests made now fail at once, without going out.
    c.request("tools/list");
    assert!(c.sent().is_empty());
}

/// `end_session` while `initialize` is out owes no DELETE once `initialize` is answered
/// without a session, or fails: `is_ending_session`, which a host drives the client by,
/// ends then (found by a review of the tokio client: its `end_session` returned at once, and
/// the session that `initialize` then made was never deleted).
#[test]
fn the_delete_owed_during_initialize_ends_with_an_answer_without_a_session_or_a_failure() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    assert_eq!(c.client.end_session(), None);
    assert!(c.client.is_ending_session());
    let answer = initialize_answer(&init.body["id"]);
    c.answer(&init, 200, &[], &answer);
    assert!(!c.client.is_ending_session(), "no session, no DELETE");
    assert!(c.sent().iter().all(|s| s.method != "DELETE"));

    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    assert_eq!(c.client.end_session(), None);
    assert!(c.client.is_ending_session());
    c.answer(&init, 500, &[], "");
    assert!(!c.client.is_ending_session(), "initialize failed");
    assert!(c.sent().iter().all(|s| s.method != "DELETE"));
}

/// `end_session` before any `initialize` went out, while an auto-era client's
/// `server/discover` probe is out: a handshake-era server refuses the probe, and the
/// fallback `initialize` never goes out, so the server makes no session that nobody would
/// end. (Before, `end_session` did nothing then: the session started and was never
/// deleted.) The same before a handshake-era client's first `poll_action`.
#[test]
fn ending_the_session_before_initialize_went_out_starts_none() {
    let mut c = Scripted::new(client_config(), ReconnectPolicy::default());
    let discover = c.sent().remove(0);
    assert_eq!(discover.body["method"], "server/discover");
    assert_eq!(c.client.end_session(), None, "no session yet");
    assert!(!c.client.is_ending_session(), "no DELETE will be owed");
    c.answer(&discover, 404, &[], "");
    c.wait(Duration::from_millis(10));
    let sent = c.sent();
    assert!(!initializes(&sent), "a session after end_session: {sent:?}");
    c.events();
    assert!(
        c.events.iter().any(|e| matches!(e, Ev::Closed { .. })),
        "the handshake cannot go on: {:?}",
        c.events
    );
    assert!(!c.client.is_ending_session());

    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    assert_eq!(c.client.end_session(), None);
    let sent = c.sent();
    assert!(!initializes(&sent), "a session after end_session: {sent:?}");
}

/// `end_session` during the auto-era probe changes nothing when the server answers it in
/// the 2026-07-28 era, which has no sessions: requests go out as before.
#[test]
fn ending_the_session_during_a_probe_answered_statelessly_changes_nothing() {
    let mut c = Scripted::new(client_config(), ReconnectPolicy::default());
    let discover = c.sent().remove(0);
    assert_eq!(c.client.end_session(), None);
    let answer = json!({"jsonrpc":"2.0","id":discover.body["id"],"result":{
        "supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},
        "serverInfo":{"name":"scripted","version":"1"}}})
    .to_string();
    c.answer(&discover, 200, &[], &answer);
    assert!(
        c.events.iter().any(|e| matches!(e, Ev::Ready { .. })),
        "{:?}",
        c.events
    );
    c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].body["method"], "tools/list");
}

/// A session that expires aborts only exchanges the host was given: not a DELETE still held
/// behind a notification (the host was told to abort an exchange it never had).
#[test]
fn an_expired_session_aborts_only_exchanges_the_host_was_given() {
    let (mut c, delete) = Scripted::ending_after_a_notification();
    let post = c.sent().remove(0); // the notification; the DELETE is held
    c.expire(&post);
    c.events();
    let _ = c.sent();
    assert!(
        !c.aborted.contains(&delete),
        "Abort for an exchange never sent"
    );
}

// ---- Against scripted servers ----------------------------------------------------------------

/// An empty tools/call result answering the request `post` carried.
fn empty_result(post: &Sent) -> String {
    json!({"jsonrpc":"2.0","id":post.body["id"],"result":{"content":[]}}).to_string()
}

/// A client driven by hand: the test plays the server, answering each action as it likes.
struct Scripted {
    client: HttpClient,
    now: Timestamp,
    events: Vec<Ev>,
    /// GET streams the handshake left unanswered.
    gets: Vec<Sent>,
    /// Exchanges the client asked the host to abort.
    aborted: Vec<ExchangeId>,
}

/// One request the client asked the host to make.
#[derive(Debug)]
struct Sent {
    exchange: ExchangeId,
    method: &'static str,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Sent {
    fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Scripted {
    fn new(config: Config, policy: ReconnectPolicy) -> Scripted {
        Scripted::with_get(config, policy, false)
    }

    /// `open_get_stream` as given.
    fn with_get(config: Config, policy: ReconnectPolicy, open_get_stream: bool) -> Scripted {
        Scripted {
            client: HttpClient::new(config, Timestamp::ZERO, policy, open_get_stream).unwrap(),
            now: Timestamp::ZERO,
            events: Vec::new(),
            gets: Vec::new(),
            aborted: Vec::new(),
        }
    }

    /// The requests the client wants made now (aborts go to `aborted`).
    fn sent(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        while let Some(action) = self.client.poll_action() {
            match action {
                ClientAction::Send {
                    exchange,
                    method,
                    headers,
                    body,
                } => out.push(Sent {
                    exchange,
                    method,
                    headers: headers.to_vec(),
                    body: serde_json::from_slice(body).unwrap_or(Value::Null),
                }),
                ClientAction::Abort { exchange } => self.aborted.push(exchange),
            }
        }
        self.client.check_counts().unwrap();
        out
    }

    fn events(&mut self) {
        while let Some(e) = self.client.poll_event() {
            self.events.push(e.to_owned_event());
        }
    }

    /// Answers `s` with a complete response.
    fn answer(&mut self, s: &Sent, status: u16, headers: &[(&str, &str)], body: &str) {
        self.client
            .handle_response(self.now, s.exchange, status, headers);
        self.client
            .handle_body(self.now, s.exchange, body.as_bytes());
        self.client.handle_end(self.now, s.exchange, 0);
        self.events();
    }

    /// The head of an SSE response to `exchange`, its body still to come.
    fn sse_head(&mut self, exchange: ExchangeId) {
        self.client.handle_response(
            self.now,
            exchange,
            200,
            &[("Content-Type", "text/event-stream")],
        );
    }

    /// Answers `s` with an SSE stream holding `body`, which then ends.
    fn stream(&mut self, s: &Sent, headers: &[(&str, &str)], body: &str) {
        let mut all = vec![("Content-Type", "text/event-stream")];
        all.extend_from_slice(headers);
        self.answer(s, 200, &all, body);
    }

    /// The handshake of a 2025-11-25 session (`sid`, when given).
    fn handshake(&mut self, sid: Option<&str>) {
        let init = self.sent().remove(0);
        assert_eq!(init.body["method"], "initialize");
        let answer = initialize_answer(&init.body["id"]);
        let headers: Vec<(&str, &str)> = sid.map(|s| ("Mcp-Session-Id", s)).into_iter().collect();
        self.answer(&init, 200, &headers, &answer);
        for s in self.sent() {
            if s.method == "GET" {
                self.gets.push(s);
                continue;
            }
            assert_eq!(s.body["method"], "notifications/initialized");
            self.answer(&s, 202, &[], "");
        }
        assert!(
            self.events.iter().any(|e| matches!(e, Ev::Ready { .. })),
            "{:?}",
            self.events
        );
    }

    /// A handshake-era client in session `s1` that has sent `method`: the client, the
    /// request's id and its POST.
    fn in_session_with(method: &str) -> (Scripted, mcpwire::conn::RequestId, Sent) {
        let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
        c.handshake(Some("s1"));
        let id = c.request(method);
        let post = c.sent().remove(0);
        (c, id, post)
    }

    /// A handshake-era client in session `s1` whose `tools/call` stream brought event `e1`
    /// with `retry: retry_ms`, then ended: the client, the request's id, its POST and the
    /// GET that resumes it.
    fn resuming_after_a_break(retry_ms: u64) -> (Scripted, mcpwire::conn::RequestId, Sent, Sent) {
        let (mut c, id, post) = Scripted::in_session_with("tools/call");
        c.stream(&post, &[], &format!("id: e1\nretry: {retry_ms}\ndata:\n\n"));
        c.wait(Duration::from_millis(retry_ms * 3 / 2));
        let get = c.sent().remove(0);
        assert_eq!(get.method, "GET");
        (c, id, post, get)
    }

    /// A handshake-era client in session `s1` that gave a notification, then ended the
    /// session: the client and the DELETE's exchange (nothing sent yet).
    fn ending_after_a_notification() -> (Scripted, ExchangeId) {
        let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
        c.handshake(Some("s1"));
        c.client
            .connection()
            .notify("notifications/roots/list_changed", None)
            .unwrap();
        let delete = c.client.end_session().unwrap();
        (c, delete)
    }

    /// The server has forgotten the session: `post` gets a 404 with an empty body.
    fn expire(&mut self, post: &Sent) {
        self.client
            .handle_response(self.now, post.exchange, 404, &[]);
        self.client.handle_end(self.now, post.exchange, 0);
    }

    fn request(&mut self, method: &str) -> mcpwire::conn::RequestId {
        self.client
            .connection()
            .request(self.now, method, None)
            .unwrap()
    }

    /// Moves time on by `d` and fires what is due.
    fn wait(&mut self, d: Duration) {
        self.now = self.now.after(d);
        self.client.handle_timeout(self.now);
        self.events();
    }

    /// Waits until request `id` times out, and accepts the `notifications/cancelled` POST
    /// that the timeout sends.
    fn time_out(&mut self, id: mcpwire::conn::RequestId) {
        self.wait(Duration::from_secs(120));
        assert!(
            matches!(self.outcome(id), Some(Ev::TimedOut { .. })),
            "{:?}",
            self.events
        );
        for s in self.sent() {
            assert_eq!(s.body["method"], "notifications/cancelled");
            self.answer(&s, 202, &[], "");
        }
    }

    /// Answers the resuming GET `get` of `post`'s stream with its request's (`id`) answer,
    /// an empty result, which must end that request.
    fn resume_with_the_answer(&mut self, get: &Sent, post: &Sent, id: mcpwire::conn::RequestId) {
        let answer = empty_result(post);
        self.stream(get, &[], &format!("id: e2\ndata: {answer}\n\n"));
        self.assert_answered(id);
    }

    /// Request `id` got its answer (a result).
    fn assert_answered(&self, id: mcpwire::conn::RequestId) {
        assert!(
            matches!(self.outcome(id), Some(Ev::Response { .. })),
            "{:?}",
            self.events
        );
    }

    /// The event that ends request `id`, if any came.
    fn outcome(&self, id: mcpwire::conn::RequestId) -> Option<&Ev> {
        self.events.iter().find(|e| match e {
            Ev::Response { request, .. }
            | Ev::Error { request, .. }
            | Ev::Failed { request, .. }
            | Ev::TimedOut { request } => *request == id,
            _ => false,
        })
    }
}

fn initialize_answer(id: &Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"result":{
        "protocolVersion":"2025-11-25","capabilities":{"tools":{}},
        "serverInfo":{"name":"scripted","version":"1"}}})
    .to_string()
}

fn tools_answer(id: &Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"result":{"tools":[]}}).to_string()
}

#[test]
fn a_request_made_while_the_session_restarts_is_not_lost() {
    // The application answers the 404's failure by asking again, on the connection whose
    // session just ended: that request must end somehow, not vanish with the old connection.
    let (mut c, first, post) = Scripted::in_session_with("tools/list");
    c.expire(&post);
    let mut again = None;
    while let Some(e) = c.client.poll_event() {
        let e = e.to_owned_event();
        if matches!(&e, Ev::Failed { request, .. } if *request == first) {
            again = Some(
                c.client
                    .connection()
                    .request(c.now, "tools/list", None)
                    .unwrap(),
            );
        }
        c.events.push(e);
    }
    let again = again.expect("the first request failed");
    // The new session, served fully; its own requests answered.
    c.handshake(Some("s2"));
    for s in c.sent() {
        let answer = tools_answer(&s.body["id"]);
        c.answer(&s, 200, &[], &answer);
    }
    c.wait(Duration::from_secs(600));
    assert!(c.outcome(again).is_some(), "{:?}", c.events);
}

#[test]
fn a_new_session_numbers_its_requests_after_the_old_sessions() {
    // An application that still holds an old session's request id (say, in a map of calls
    // it gave up on) must not take a new session's answer for it.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let old: Vec<_> = (0..3).map(|_| c.request("tools/list")).collect();
    let posts = c.sent();
    assert_eq!(posts.len(), 3);
    for post in &posts {
        c.expire(post);
    }
    while let Some(e) = c.client.poll_event() {
        c.events.push(e.to_owned_event());
    }
    for id in &old {
        assert!(
            matches!(c.outcome(*id), Some(Ev::Failed { .. })),
            "{:?}",
            c.events
        );
    }
    c.handshake(Some("s2"));
    let new = c.request("tools/list");
    assert!(!old.contains(&new), "{new:?} reuses an id of {old:?}");
    let post = c.sent().remove(0);
    let id = post.body["id"].as_i64().unwrap();
    assert!(
        old.iter().all(|o| o.0 < id),
        "the wire id {id} is not after {old:?}"
    );
}

/// Whether any of `sent` is an `initialize` POST (a new session starting).
fn initializes(sent: &[Sent]) -> bool {
    sent.iter().any(|s| s.body["method"] == "initialize")
}

#[test]
fn a_closed_client_starts_no_new_session_when_a_request_gets_404() {
    let (mut c, id, post) = Scripted::in_session_with("tools/list");
    c.client.connection().close(c.now, Duration::from_secs(10));
    c.answer(&post, 404, &[], "");
    c.wait(Duration::from_secs(1));
    let later = c.sent();
    assert!(!initializes(&later), "a new session after close: {later:?}");
    assert!(
        matches!(c.outcome(id), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
    assert_eq!(c.client.connection().state(), State::Closed);
}

#[test]
fn an_ended_session_is_not_replaced_when_its_delete_or_a_request_gets_404() {
    for delete_first in [true, false] {
        let (mut c, id, post) = Scripted::in_session_with("tools/list");
        assert!(c.client.end_session().is_some());
        let delete = c.sent().remove(0);
        assert_eq!(delete.method, "DELETE");
        // The server dropped the session already: the DELETE (then the request), or the
        // request alone, gets 404.
        if delete_first {
            c.answer(&delete, 404, &[], "");
        }
        c.answer(&post, 404, &[], "");
        c.wait(Duration::from_secs(1));
        let later = c.sent();
        assert!(!initializes(&later), "a new session: {later:?}");
        assert!(
            matches!(c.outcome(id), Some(Ev::Failed { .. })),
            "{:?}",
            c.events
        );
        // A request made now fails at once, and nothing goes out without the session's id.
        let after = c.request("tools/list");
        let later = c.sent();
        assert!(later.is_empty(), "{later:?}");
        c.events();
        assert!(
            matches!(
                c.outcome(after),
                Some(Ev::Failed {
                    reason: TransportFailure::Status(404),
                    ..
                })
            ),
            "{:?}",
            c.events
        );
    }
}

#[test]
fn closing_or_ending_while_a_new_session_is_due_starts_none() {
    // The application answers the 404's failure by closing the connection, or by ending the
    // session: the new session that was about to start must not.
    for end in [false, true] {
        let (mut c, first, post) = Scripted::in_session_with("tools/list");
        c.expire(&post);
        let mut after = None;
        while let Some(e) = c.client.poll_event() {
            let e = e.to_owned_event();
            if matches!(&e, Ev::Failed { request, .. } if *request == first) {
                if end {
                    assert_eq!(c.client.end_session(), None, "no session to end");
                    after = Some(c.request("tools/list"));
                } else {
                    c.client.connection().close(c.now, Duration::from_secs(1));
                }
            }
            c.events.push(e);
        }
        c.wait(Duration::from_secs(5));
        let sent = c.sent();
        assert!(!initializes(&sent), "a new session: {sent:?}");
        assert!(sent.is_empty(), "{sent:?}");
        c.events();
        if let Some(after) = after {
            assert!(
                matches!(
                    c.outcome(after),
                    Some(Ev::Failed {
                        reason: TransportFailure::Status(404),
                        ..
                    })
                ),
                "{:?}",
                c.events
            );
        } else {
            assert_eq!(c.client.connection().state(), State::Closed);
        }
    }
}

#[test]
fn a_stream_that_breaks_after_end_session_is_not_resumed_without_the_session() {
    let (mut c, call, post) = Scripted::in_session_with("tools/call");
    c.sse_head(post.exchange);
    c.client
        .handle_body(c.now, post.exchange, b"id: 1\ndata: \n\n");
    assert!(c.client.end_session().is_some());
    let delete = c.sent().remove(0);
    assert_eq!(delete.method, "DELETE");
    c.client.handle_end(c.now, post.exchange, 0);
    c.wait(Duration::from_secs(5));
    let sent = c.sent();
    assert!(sent.is_empty(), "{sent:?}");
    assert!(
        matches!(c.outcome(call), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
}

#[test]
fn a_message_sent_after_a_quiet_spell_gets_its_full_time() {
    // The server has sent nothing for 11 s when the application cancels its call (or answers
    // a server's request a person took a while over). `poll_action` takes no time, so the
    // message's 10 s for a response head were counted from the last time the host gave: it
    // was aborted before it left.
    let (mut c, call, post) = Scripted::in_session_with("tools/call");
    c.sse_head(post.exchange);
    c.now = c.now.after(Duration::from_secs(11));
    c.client.connection().cancel(c.now, call, None).unwrap();
    let sent = c.sent();
    let cancel = sent
        .iter()
        .find(|s| s.body["method"] == "notifications/cancelled")
        .expect("the cancellation goes out");
    // The host arms its timer from `poll_timeout` and fires what is due.
    let due = c.client.poll_timeout().expect("a deadline");
    c.client.handle_timeout(due.max(c.now));
    c.sent();
    assert!(
        !c.aborted.contains(&cancel.exchange),
        "aborted before it left"
    );
    // It is let go 10 s after it went out without a head, not before.
    c.wait(Duration::from_secs(9));
    c.sent();
    assert!(!c.aborted.contains(&cancel.exchange), "aborted after 9 s");
    c.wait(Duration::from_secs(2));
    c.sent();
    assert!(
        c.aborted.contains(&cancel.exchange),
        "kept beyond its limit"
    );
}

#[test]
fn a_request_made_before_the_restart_never_goes_out_without_the_session() {
    let (mut c, first, post) = Scripted::in_session_with("tools/list");
    c.expire(&post);
    // The application sees the failure and asks again at once, then makes what is due (as
    // the docs say, after every command) before it polls the next event.
    let failed = c.client.poll_event().map(|e| e.to_owned_event());
    assert!(
        matches!(&failed, Some(Ev::Failed { request, .. }) if *request == first),
        "{failed:?}"
    );
    let again = c.request("tools/list");
    let sent = c.sent();
    assert!(
        sent.iter().all(|s| s.header("Mcp-Session-Id").is_some()),
        "sent without the session: {sent:?}"
    );
    assert!(
        sent.iter().all(|s| s.body["id"] != json!(again.0)),
        "{sent:?}"
    );
    c.events();
    assert!(
        matches!(c.outcome(again), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
    // The new session starts clean: nothing of the old connection answers into it.
    c.handshake(Some("s2"));
    assert!(
        !c.events.iter().any(|e| matches!(e, Ev::Violation { .. })),
        "{:?}",
        c.events
    );
}

#[test]
fn a_stream_ended_twice_by_the_host_is_resumed_once() {
    let (mut c, _id, post) = Scripted::in_session_with("tools/call");
    c.sse_head(post.exchange);
    c.client
        .handle_body(c.now, post.exchange, b"id: 1\ndata: \n\n");
    c.client.handle_end(c.now, post.exchange, 0);
    c.client.handle_end(c.now, post.exchange, 0);
    c.wait(Duration::from_secs(5));
    let gets: Vec<_> = c.sent().into_iter().filter(|s| s.method == "GET").collect();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert_eq!(gets[0].header("Last-Event-ID"), Some("1"));
}

/// A client in the auto era whose session expires (404) starts the new one with
/// `initialize`, as the transport requires ("MUST start a new session by sending a new
/// InitializeRequest without a session ID attached"): it probed with `server/discover`
/// again, though a session proves a handshake-era server.
#[test]
fn an_expired_session_is_followed_by_initialize_in_the_auto_era() {
    let mut c = Scripted::new(client_config(), ReconnectPolicy::default());
    let discover = c.sent().remove(0);
    assert_eq!(discover.body["method"], "server/discover");
    c.answer(&discover, 404, &[], "");
    c.handshake(Some("s1"));
    let first = c.request("tools/list");
    let post = c.sent().remove(0);
    assert_eq!(post.header("Mcp-Session-Id"), Some("s1"));
    c.expire(&post);
    c.events();
    assert!(
        matches!(c.outcome(first), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
    let next = c.sent();
    assert_eq!(next[0].body["method"], "initialize", "{:?}", next[0].body);
    assert_eq!(next[0].header("Mcp-Session-Id"), None);
}

/// No request overtakes `initialized`: with a GET stream opened beside it, requests waited
/// for the GET's response head only, so a quick 405 to the GET let them go while
/// `initialized` could still be on its way (a server then saw `tools/list` first).
#[test]
fn requests_wait_for_initialized_beside_the_get_stream() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    let init = c.sent().remove(0);
    assert_eq!(init.body["method"], "initialize");
    let answer = initialize_answer(&init.body["id"]);
    c.answer(&init, 200, &[("Mcp-Session-Id", "s1")], &answer);
    let id = c.request("tools/list");
    let sent = c.sent();
    let initialized = sent
        .iter()
        .find(|s| s.body["method"] == "notifications/initialized")
        .expect("initialized");
    let get = sent
        .iter()
        .find(|s| s.method == "GET")
        .expect("the GET stream");
    assert_eq!(sent.len(), 2, "tools/list waits: {:?}", sent.len());
    // The GET is refused at once: tools/list still waits for initialized's head.
    c.answer(get, 405, &[], "");
    assert!(
        c.sent().is_empty(),
        "tools/list went before initialized's head"
    );
    c.answer(initialized, 202, &[], "");
    let sent = c.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["method"], "tools/list");
    assert_eq!(sent[0].body["id"], json!(id.0));
}

#[test]
fn a_server_that_polls_again_and_again_still_gets_its_answer_through() {
    // SEP-1699: the server closes the stream after each event and the client comes back with
    // `Last-Event-ID`. Every resumption that brings a new event is progress: the attempts
    // count again from one, so a long poll does not run out of them.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let id = c.request("tools/list");
    let mut s = c.sent().remove(0);
    for n in 0..12 {
        c.stream(&s, &[], &format!("id: e{n}\nretry: 100\ndata:\n\n"));
        c.wait(Duration::from_secs(2));
        assert!(c.outcome(id).is_none(), "after {n} polls: {:?}", c.events);
        s = c.sent().remove(0);
        assert_eq!(s.method, "GET");
        assert_eq!(s.header("Last-Event-ID"), Some(format!("e{n}").as_str()));
    }
    let answer = tools_answer(&json!(id.0));
    c.stream(&s, &[], &format!("id: e12\ndata: {answer}\n\n"));
    c.assert_answered(id);
}

#[test]
fn a_server_without_sessions_that_closes_for_polling_is_resumed() {
    // 2025-11-25 without session management: event ids are unique across the client's
    // streams, and a stream closed before its answer is resumed all the same.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(None);
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.stream(&s, &[], "id: ev-1\nretry: 100\ndata:\n\n");
    assert!(c.outcome(id).is_none(), "{:?}", c.events);
    c.wait(Duration::from_secs(1));
    let get = c.sent().remove(0);
    assert_eq!(get.method, "GET");
    assert_eq!(get.header("Last-Event-ID"), Some("ev-1"));
    assert_eq!(get.header("Mcp-Session-Id"), None);
    let answer = tools_answer(&json!(id.0));
    c.stream(&get, &[], &format!("id: ev-2\ndata: {answer}\n\n"));
    c.assert_answered(id);
}

#[test]
fn a_stream_whose_requests_ended_is_not_resumed() {
    // The server asks for a long `retry`; the request times out meanwhile. Nothing is kept
    // for it, and no GET goes out when the retry time comes.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.stream(&s, &[], "id: r1\nretry: 600000\ndata:\n\n");
    c.time_out(id);
    c.wait(Duration::from_secs(3600));
    let sent = c.sent();
    assert!(
        sent.is_empty(),
        "{:?}",
        sent.iter().map(|s| s.method).collect::<Vec<_>>()
    );
    assert_eq!(c.client.poll_timeout(), None);
}

#[test]
fn the_session_id_comes_from_the_initialize_answer_only() {
    // A session id on any other answer is not adopted: not on a 2026-07-28 request (that era
    // has no sessions), and not on the late answer of the old session after a 404.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let (a, b) = (c.request("tools/list"), c.request("tools/list"));
    let mut posts = c.sent();
    let (pa, pb) = (posts.remove(0), posts.remove(0));
    // A's 404 ends the session; B's head, from the old session, is reported afterwards.
    c.client.handle_response(c.now, pa.exchange, 404, &[]);
    c.client
        .handle_response(c.now, pb.exchange, 200, &[("Mcp-Session-Id", "s1")]);
    c.client.handle_end(c.now, pa.exchange, 0);
    c.client.handle_end(c.now, pb.exchange, 0);
    c.events();
    assert!(c.outcome(a).is_some() && c.outcome(b).is_some());
    let init = c.sent().remove(0);
    assert_eq!(init.body["method"], "initialize");
    assert_eq!(init.header("Mcp-Session-Id"), None, "{:?}", init.headers);

    let mut c = Scripted::new(modern(client_config()), ReconnectPolicy::default());
    let discover = c.sent().remove(0);
    let answer = json!({"jsonrpc":"2.0","id":discover.body["id"],"result":{
        "supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},
        "serverInfo":{"name":"scripted","version":"1"}}})
    .to_string();
    c.answer(&discover, 200, &[("Mcp-Session-Id", "junk")], &answer);
    c.request("tools/list");
    let next = c.sent().remove(0);
    assert_eq!(next.header("Mcp-Session-Id"), None, "{:?}", next.headers);
    assert_eq!(c.client.session_id(), None);
}

#[test]
fn reconnect_delays_saturate_instead_of_overflowing() {
    let policy = ReconnectPolicy {
        max_delay: Duration::MAX,
        max_attempts: 20,
        ..ReconnectPolicy::default()
    };
    let retry = Some(Duration::from_millis(u64::MAX));
    for attempt in 1..=20 {
        assert!(policy.delay(attempt, retry, u32::MAX) >= Duration::from_millis(u64::MAX));
    }
}

#[test]
fn a_server_that_replays_the_event_it_was_named_is_not_believed_twice() {
    // Resumed with `Last-Event-ID: 1`, a server starts again at event 1 rather than after it:
    // its request (already handed to the application, and answered) is not handed out again.
    let (mut c, id, post) = Scripted::in_session_with("tools/list");
    let roots = "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"roots/list\"}\n\n";
    c.sse_head(post.exchange);
    c.client.handle_body(c.now, post.exchange, roots.as_bytes());
    c.events();
    // The application answers it; then the stream breaks.
    let srv = (c.events.iter())
        .find_map(|e| match e {
            Ev::Request { id, .. } => Some(id.clone()),
            _ => None,
        })
        .expect("the server's request");
    (c.client.connection())
        .respond(srv.as_id(), RawJson::new(r#"{"roots":[]}"#).unwrap())
        .unwrap();
    for s in c.sent() {
        c.answer(&s, 202, &[], "");
    }
    c.client.handle_error(c.now, post.exchange, 0);
    c.events();
    c.wait(Duration::from_secs(2));
    let get = c.sent().into_iter().find(|s| s.method == "GET").unwrap();
    assert_eq!(get.header("Last-Event-ID"), Some("1"));
    let answer = tools_answer(&json!(id.0));
    c.stream(&get, &[], &format!("{roots}id: 2\ndata: {answer}\n\n"));
    let asked = (c.events.iter())
        .filter(|e| matches!(e, Ev::Request { method, .. } if method == "roots/list"))
        .count();
    assert_eq!(asked, 1, "{:?}", c.events);
    c.assert_answered(id);
}

#[test]
fn a_server_that_refuses_every_get_with_404_does_not_make_sessions_for_ever() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    let mut initializes = 0;
    for round in 0..50 {
        for s in c.sent() {
            match (s.method, s.body["method"].as_str()) {
                ("GET", _) => c.answer(&s, 404, &[], ""),
                (_, Some("initialize")) => {
                    initializes += 1;
                    let answer = initialize_answer(&s.body["id"]);
                    let sid = format!("s{round}");
                    c.answer(&s, 200, &[("Mcp-Session-Id", &sid)], &answer);
                }
                (_, Some("tools/list")) => {
                    let answer = tools_answer(&s.body["id"]);
                    c.answer(&s, 200, &[], &answer);
                }
                _ => c.answer(&s, 202, &[], ""),
            }
        }
        c.events();
    }
    assert!(initializes <= 2, "{initializes} sessions");
    let again = c.request("tools/list");
    for _ in 0..3 {
        for s in c.sent() {
            let answer = tools_answer(&s.body["id"]);
            c.answer(&s, 200, &[], &answer);
        }
    }
    c.assert_answered(again);
}

#[test]
fn requests_wait_for_the_get_streams_head_at_most_a_second() {
    // Requests wait for the session's GET stream to get its response head, so that the
    // server has somewhere to send what belongs to no request. A server that holds the head
    // back until it has a message must not hold them until they time out.
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    c.handshake(Some("s1"));
    assert_eq!(c.gets.len(), 1, "the GET stream first");
    let id = c.request("tools/list");
    assert!(c.sent().is_empty(), "the request waits for the GET's head");
    c.wait(Duration::from_millis(500));
    assert!(c.sent().is_empty(), "it still waits half a second later");
    let due = c.client.poll_timeout().expect("a deadline for the wait");
    c.wait(Duration::from_nanos(due.as_nanos() - c.now.as_nanos()));
    // The wait is over once the timers fired, before the host asks for its actions: a host
    // that arms its timer first must not find the deadline still due (it would spin).
    let next = c.client.poll_timeout();
    assert!(next.is_none_or(|t| t > c.now), "{next:?} at {:?}", c.now);
    let post = c.sent().remove(0);
    assert_eq!(post.body["method"], "tools/list");
    let answer = tools_answer(&post.body["id"]);
    c.answer(&post, 200, &[], &answer);
    c.assert_answered(id);
}

#[test]
fn a_stream_the_server_keeps_open_after_its_answer_is_let_go() {
    // A server that never ends its SSE responses would otherwise hold one open connection per
    // request for ever. The client waits `LINGER` for the server to end it, then aborts it;
    // a stream that ends right after its answer is never aborted (its connection is reused).
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let (kept, ended) = (c.request("tools/list"), c.request("tools/list"));
    let posts = c.sent();
    assert_eq!(posts.len(), 2);
    let sse = [("Content-Type", "text/event-stream")];
    for p in &posts {
        c.client.handle_response(c.now, p.exchange, 200, &sse);
        let event = format!(
            "id: e{}\ndata: {}\n\n",
            p.exchange.0,
            tools_answer(&p.body["id"])
        );
        c.client.handle_body(c.now, p.exchange, event.as_bytes());
    }
    c.client.handle_end(c.now, posts[1].exchange, 0); // the second one ends as it should
    c.events();
    c.assert_answered(kept);
    c.assert_answered(ended);
    assert!(c.sent().is_empty());
    assert!(
        c.aborted.is_empty(),
        "not at once: the server may be about to end it"
    );
    let due = c
        .client
        .poll_timeout()
        .expect("a deadline to let the stream go");
    assert_eq!(due, c.now.after(mcpwire::http::LINGER));
    c.wait(mcpwire::http::LINGER - Duration::from_millis(1));
    assert!(c.sent().is_empty() && c.aborted.is_empty());
    c.wait(Duration::from_millis(1));
    assert!(c.sent().is_empty());
    assert_eq!(
        c.aborted,
        vec![posts[0].exchange],
        "only the stream left open"
    );
    // The host's late report of the aborted stream is ignored.
    c.client.handle_end(c.now, posts[0].exchange, 0);
    c.events();
    assert!(c.sent().is_empty());
    let next = c.client.poll_timeout();
    assert!(
        next.is_none_or(|t| t > c.now.after(mcpwire::http::LINGER)),
        "{next:?}"
    );
}

#[test]
fn a_stream_whose_request_timed_out_is_let_go() {
    // The request times out on a stream that brings nothing: the stream is closed too, rather
    // than left open for as long as the server likes.
    let (mut c, id, post) = Scripted::in_session_with("tools/list");
    c.sse_head(post.exchange);
    c.time_out(id);
    assert!(c.aborted.is_empty());
    c.wait(mcpwire::http::LINGER);
    assert!(c.sent().is_empty());
    assert_eq!(c.aborted, vec![post.exchange]);
}

#[test]
fn many_streams_left_open_do_not_pile_up() {
    // 2,000 requests, each answered on a stream the server never ends: at most the requests
    // of the last `LINGER` keep theirs.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let sse = [("Content-Type", "text/event-stream")];
    let mut open = std::collections::HashSet::new();
    let mut most = 0;
    for _ in 0..2_000 {
        c.request("tools/list");
        for p in c.sent() {
            c.client.handle_response(c.now, p.exchange, 200, &sse);
            let event = format!("data: {}\n\n", tools_answer(&p.body["id"]));
            c.client.handle_body(c.now, p.exchange, event.as_bytes());
            open.insert(p.exchange);
        }
        c.wait(Duration::from_millis(10));
        c.sent();
        for a in c.aborted.drain(..) {
            assert!(open.remove(&a), "aborted once, and only what was open");
        }
        most = most.max(open.len());
    }
    assert!((150..=210).contains(&most), "{most} streams open at most");
}

#[test]
fn a_server_that_asks_for_no_wait_does_not_get_a_reconnect_storm() {
    // `retry: 0`, and every resumption ends at once after one new event: the client comes
    // back every `MIN_RECONNECT_DELAY` (100 ms), not as fast as it can.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    c.request("tools/list");
    let post = c.sent().remove(0);
    c.stream(&post, &[], "id: e0\nretry: 0\ndata:\n\n");
    let start = c.now;
    let mut gets = 0;
    for n in 1..=1000 {
        let Some(due) = c.client.poll_timeout() else {
            break;
        };
        if due.as_nanos() - start.as_nanos() > 10_000_000_000 {
            break;
        }
        c.wait(Duration::from_nanos(
            due.as_nanos().saturating_sub(c.now.as_nanos()),
        ));
        for s in c.sent() {
            assert_eq!(s.method, "GET");
            gets += 1;
            c.stream(&s, &[], &format!("id: e{n}\ndata:\n\n"));
        }
    }
    assert!((50..=101).contains(&gets), "{gets} resumptions in 10 s");
}

/// A client with its session's GET stream open (200, SSE), and that stream's exchange.
fn with_open_get_stream() -> (Scripted, ExchangeId) {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    c.handshake(Some("s1"));
    let get = c.gets.remove(0);
    c.sse_head(get.exchange);
    (c, get.exchange)
}

/// The server sends `ping` with id `id` on stream `get`.
fn ping(c: &mut Scripted, get: ExchangeId, id: &str) {
    let ping = format!("data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n\n");
    c.client.handle_body(c.now, get, ping.as_bytes());
    c.events();
}

/// A POST that waits for nothing (here the automatic reply to a server's ping) keeps at most
/// a short text of its body: a server streaming junk into each of the 64 that may run at once
/// made the client hold up to 64 frames (1 GiB with the defaults) for the 2 s each lingers.
/// Past `FAILURE_TEXT_MAX` the exchange is let go, and the text of the last real failure
/// stays what it was. An event stream there (the spec has 202) counts as such a body.
#[test]
fn a_body_that_answers_nothing_is_not_kept_past_a_short_text() {
    let (mut c, get) = with_open_get_stream();
    // A real failure first: its text is what `failure_text` says.
    c.request("tools/list");
    let sent = c.sent();
    c.answer(
        &sent[0],
        500,
        &[("Content-Type", "text/plain")],
        "the database is down",
    );
    assert_eq!(c.client.failure_text(), Some("the database is down"));
    // (An event stream too: it was read as events, one as long as a frame held.)
    for (status, content_type) in [
        (202, None),
        (200, Some("application/json")),
        (200, Some("text/event-stream")),
    ] {
        ping(&mut c, get, "\"p\"");
        let reply = c.sent().remove(0);
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| vec![("Content-Type", t)])
            .unwrap_or_default();
        c.client
            .handle_response(c.now, reply.exchange, status, &headers);
        let junk = [b'x'; 100];
        let mut fed = 0;
        while !c.aborted.contains(&reply.exchange) && fed < 1 << 20 {
            c.client.handle_body(c.now, reply.exchange, &junk);
            fed += junk.len();
            c.sent();
        }
        assert!(
            c.aborted.contains(&reply.exchange) && fed <= mcpwire::http::FAILURE_TEXT_MAX + 100,
            "{status}: let go after {fed} bytes"
        );
        assert_eq!(c.client.failure_text(), Some("the database is down"));
        c.aborted.clear();
    }
}

/// An SSE event is read by the connection's decoder, with its limits: an answer nested 126
/// levels deep (within the decoder's 128) was dropped by a stricter check on the stream, and
/// a JSON body with the same answer was taken. Data that is not JSON is a violation the host
/// hears of, not an event skipped without a word.
#[test]
fn sse_events_are_read_with_the_decoders_limits() {
    let (mut c, id, post) = Scripted::in_session_with("tools/list");
    let deep = format!("{}{}", "[".repeat(124), "]".repeat(124));
    let answer = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"tools\":[],\"x\":{deep}}}}}",
        post.body["id"]
    );
    c.stream(&post, &[], &format!("id: e1\ndata: {answer}\n\n"));
    assert!(
        (c.events.iter()).any(|e| matches!(e, Ev::Response { request, .. } if *request == id)),
        "{:?}",
        c.events
    );
    let id = c.request("tools/list");
    let post = c.sent().remove(0);
    c.sse_head(post.exchange);
    c.client
        .handle_body(c.now, post.exchange, b"id: e2\ndata: {\"jsonrpc\":\n\n");
    c.events();
    assert!(
        (c.events.iter()).any(|e| matches!(e, Ev::Violation { .. })),
        "{:?}",
        c.events
    );
    // (The stream goes on: the request still waits for its answer.)
    assert!(
        !(c.events.iter()).any(|e| matches!(e, Ev::Failed { request, .. } | Ev::Response { request, .. } if *request == id)),
        "{:?}",
        c.events
    );
}

#[test]
fn posts_with_nothing_to_wait_for_are_let_go_when_the_server_never_answers_them() {
    // The server pings on the session's GET stream every 10 ms and never answers the POSTs
    // that carry the replies: each is closed `UNAWAITED_HEAD_LIMIT` after it went out, and
    // the next reply takes its place (before: every one stayed open, for good).
    let (mut c, get) = with_open_get_stream();
    // A reply whose 202 came but whose body never ends is closed `LINGER` later.
    ping(&mut c, get, "\"first\"");
    let reply = c.sent().remove(0);
    c.client.handle_response(c.now, reply.exchange, 202, &[]);
    c.wait(mcpwire::http::LINGER - Duration::from_millis(1));
    c.sent();
    assert!(!c.aborted.contains(&reply.exchange));
    c.wait(Duration::from_millis(1));
    c.sent();
    assert_eq!(c.aborted, [reply.exchange]);
    c.aborted.clear();

    let mut open = std::collections::HashMap::new();
    let mut most = 0;
    let mut replies = 0;
    for n in 0..2_000 {
        ping(&mut c, get, &n.to_string());
        for round in 0..2 {
            if round == 1 {
                c.wait(Duration::from_millis(10));
            }
            for s in c.sent() {
                assert_eq!(s.body["id"], replies, "the replies go out in order");
                replies += 1;
                open.insert(s.exchange, c.now);
            }
            for a in c.aborted.drain(..) {
                let since = open
                    .remove(&a)
                    .expect("aborted once, and only what was open");
                assert!(c.now.since(since) >= mcpwire::http::UNAWAITED_HEAD_LIMIT);
            }
        }
        most = most.max(open.len());
    }
    // 64 at once from the first ping on, each closed 10 s after it went out and followed by
    // the next: 64 more at 10 s, and the third 64 from 20 s. (The 10 s count from the host's
    // first time after a reply went out, here the next 10 ms tick: the third 64 begin at
    // 20.02 s, just after the loop's end.)
    let running = mcpwire::http::MAX_RUNNING_REPLIES;
    assert_eq!(most, running);
    assert_eq!(replies, 2 * running as u64);
    let suppressed = c.client.connection().stats().suppressed_responses;

    // Our own messages do not wait behind the replies: a request, and its cancel.
    let id = c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["method"], "tools/list");
    c.client
        .connection()
        .cancel(c.now, id, Some("changed my mind"))
        .unwrap();
    let sent = c.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["method"], "notifications/cancelled");

    // A server that takes its answers again gets every waiting one, in order.
    let mut next = replies;
    for exchange in open.into_keys() {
        c.client.handle_response(c.now, exchange, 202, &[]);
        c.client.handle_end(c.now, exchange, 0);
    }
    loop {
        let sent = c.sent();
        if sent.is_empty() {
            break;
        }
        for s in sent {
            assert_eq!(s.body["id"], next);
            next += 1;
            c.answer(&s, 202, &[], "");
        }
    }
    // The rest: 1,024 waited their turn, and the newer ones were not sent, and counted.
    let waited = next - replies;
    assert_eq!(waited, mcpwire::http::MAX_WAITING_REPLIES as u64);
    assert_eq!(suppressed, 2_000 - replies - waited);
}

/// Answers to the server's requests made before `end_session` go out before its DELETE,
/// those waiting for a place among the `MAX_RUNNING_REPLIES` too: they went after it, with
/// the ended session's id, and the server refused them (404).
#[test]
fn replies_waiting_for_a_place_go_out_before_the_delete() {
    let (mut c, get) = with_open_get_stream();
    let running = mcpwire::http::MAX_RUNNING_REPLIES;
    for n in 0..running + 6 {
        ping(&mut c, get, &n.to_string());
    }
    let mut pending = c.sent();
    assert_eq!(pending.len(), running);
    let delete = c.client.end_session().expect("a session");
    let mut order: Vec<(&str, Value)> = Vec::new();
    while !pending.is_empty() {
        for s in &pending {
            order.push((s.method, s.body["id"].clone()));
            assert_eq!(s.header("Mcp-Session-Id"), Some("s1"), "{}", s.method);
        }
        // Every response head comes first, then the bodies end.
        let answered = std::mem::take(&mut pending);
        for s in &answered {
            let status = if s.method == "DELETE" { 200 } else { 202 };
            c.client.handle_response(c.now, s.exchange, status, &[]);
        }
        pending.extend(c.sent());
        for s in &answered {
            c.client.handle_end(c.now, s.exchange, 0);
            pending.extend(c.sent());
        }
    }
    let expected: Vec<(&str, Value)> = (0..running + 6)
        .map(|n| ("POST", json!(n)))
        .chain([("DELETE", Value::Null)])
        .collect();
    assert_eq!(order, expected);
    assert!(!c.client.has_exchange(delete), "ended");
}

/// An application that notifies in a loop has at most `MAX_RUNNING_NOTIFICATIONS` POSTs of
/// them running; the rest go as those end, or all at once when the session ends, requests
/// never wait behind them, and the DELETE waits for them all. Each went out at once, a connection apiece for the host, past
/// the usual limit of open files (found by a review of the tokio client).
#[test]
fn notifications_go_out_a_bounded_number_at_a_time() {
    let (mut c, _get) = with_open_get_stream();
    let running = mcpwire::http::MAX_RUNNING_NOTIFICATIONS;
    let total = running + 10;
    for _ in 0..total {
        c.client
            .connection()
            .notify("notifications/roots/list_changed", None)
            .unwrap();
    }
    let mut pending = c.sent();
    assert_eq!(pending.len(), running);
    c.client.check_counts().unwrap();
    c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "a request does not wait behind them");
    assert_eq!(sent[0].body["method"], "tools/list");
    // Three end: three more go.
    let mut notes = 0;
    for s in pending.drain(..3) {
        c.client.handle_response(c.now, s.exchange, 202, &[]);
        c.client.handle_end(c.now, s.exchange, 0);
        notes += 1;
    }
    let next = c.sent();
    assert_eq!(next.len(), 3, "one for each that ended");
    pending.extend(next);
    c.client.check_counts().unwrap();
    c.client.end_session().expect("a session");
    // The session ends: the waiting ones go at once, and the DELETE waits for them all.
    let rest = c.sent();
    assert_eq!(
        rest.len(),
        total - running - 3,
        "the waiting notifications go"
    );
    pending.extend(rest);
    let mut deleted = false;
    while !pending.is_empty() {
        let s = pending.remove(0);
        if s.method == "DELETE" {
            assert_eq!(notes, total, "the DELETE came after every notification");
            deleted = true;
            c.client.handle_response(c.now, s.exchange, 200, &[]);
        } else {
            assert_eq!(s.body["method"], "notifications/roots/list_changed");
            notes += 1;
            c.client.handle_response(c.now, s.exchange, 202, &[]);
        }
        c.client.handle_end(c.now, s.exchange, 0);
        pending.extend(c.sent());
        c.client.check_counts().unwrap();
    }
    assert!(deleted);
}

#[test]
fn no_request_overtakes_initialized() {
    // Every POST travels on its own connection: a request made as soon as the session is
    // ready waits for the `initialized` notification's response head, so that a strict
    // server (the Python SDK's refuses requests before it) never sees it first.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    let answer = initialize_answer(&init.body["id"]);
    c.answer(&init, 200, &[("Mcp-Session-Id", "s1")], &answer);
    assert!(c.events.iter().any(|e| matches!(e, Ev::Ready { .. })));
    let id = c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "only `initialized` goes out first");
    assert_eq!(sent[0].body["method"], "notifications/initialized");
    c.client.handle_response(c.now, sent[0].exchange, 202, &[]);
    let next = c.sent();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].body["method"], "tools/list");
    let answer = tools_answer(&next[0].body["id"]);
    c.answer(&next[0], 200, &[], &answer);
    c.assert_answered(id);
}

#[test]
fn a_session_id_on_a_refused_initialize_is_not_taken() {
    // An error status on `initialize` carries no session, whatever its headers say: the id
    // would otherwise go out on the DELETE and requests of the next attempt.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    let refusal = json!({"jsonrpc":"2.0","id":init.body["id"],
        "error":{"code":-32600,"message":"no"}})
    .to_string();
    c.answer(&init, 400, &[("Mcp-Session-Id", "planted")], &refusal);
    assert_eq!(c.client.session_id(), None);
}

#[test]
fn a_session_id_that_is_not_visible_ascii_is_not_taken() {
    // The spec allows only 0x21 to 0x7E in a session id. One with a control character would
    // go out in every later request: refused by the host's HTTP library (Go's net/http,
    // hyper), or sent as is (libcurl). The client ignores it, as if the server gave none.
    for bad in ["s\u{1}1", "s 1", "s\u{7f}", "caf\u{e9}", "s\t1"] {
        let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
        c.handshake(Some(bad));
        assert_eq!(c.client.session_id(), None, "{bad:?}");
        c.request("tools/list");
        let next = c.sent().remove(0);
        assert_eq!(next.header("Mcp-Session-Id"), None, "{bad:?}");
    }
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s-1.~!"));
    assert_eq!(c.client.session_id(), Some("s-1.~!"));
}

/// A session id longer than `MAX_SESSION_ID` is not taken: the client would send it back with
/// every request, and keep a copy per request it has out (a hostile server's 400 KB id, times
/// a thousand answers of ours it never reads, was 400 MB).
#[test]
fn a_session_id_longer_than_the_bound_is_not_taken() {
    use mcpwire::http::client::MAX_SESSION_ID;
    let longest = "s".repeat(MAX_SESSION_ID);
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some(&longest));
    assert_eq!(c.client.session_id(), Some(longest.as_str()));
    let too_long = "s".repeat(MAX_SESSION_ID + 1);
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some(&too_long));
    assert_eq!(c.client.session_id(), None);
    c.request("tools/list");
    assert_eq!(c.sent().remove(0).header("Mcp-Session-Id"), None);
}

#[test]
fn a_method_name_with_a_line_break_never_reaches_a_header() {
    // 2026-07-28 copies the method into Mcp-Method, which has no encoded form. An
    // application's method with a line break must not become a header line of its own (the C
    // example's libcurl would send it as is): the request goes without Mcp-Method.
    let mut c = Scripted::new(modern(client_config()), ReconnectPolicy::default());
    let discover = c.sent().remove(0);
    let answer = json!({"jsonrpc":"2.0","id":discover.body["id"],"result":{
        "supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},
        "serverInfo":{"name":"scripted","version":"1"}}})
    .to_string();
    c.answer(&discover, 200, &[], &answer);
    c.request("x/line\r\nX-Injected: 1");
    let post = c.sent().remove(0);
    assert_eq!(post.body["method"], "x/line\r\nX-Injected: 1");
    assert_eq!(post.header("Mcp-Method"), None, "{:?}", post.headers);
    for (name, value) in &post.headers {
        assert!(
            !value.bytes().any(|b| b < 0x20 && b != b'\t'),
            "{name}: {value:?}"
        );
    }
    c.request("x/caf\u{e9}");
    let post = c.sent().remove(0);
    assert_eq!(post.header("Mcp-Method"), Some("x/caf\u{e9}"));
    // A space at either end would be stripped on the way: the server would read another
    // method than the body's, so such a method goes without the header too.
    for method in [" x/lead", "x/trail ", "x/tab\t"] {
        c.request(method);
        let post = c.sent().remove(0);
        assert_eq!(post.header("Mcp-Method"), None, "{method:?}");
    }
}

#[test]
fn an_event_id_with_a_space_at_either_end_does_not_resume_a_stream() {
    // A receiver strips the spaces around a header value: `Last-Event-ID: 7 ` would name
    // event 7, not `7 `. Such an id counts as none, as one with a control character does.
    for line in ["id: 7 \n", "id:  7\n", "id: 7\t\n"] {
        let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
        c.handshake(Some("s1"));
        let id = c.request("tools/list");
        let s = c.sent().remove(0);
        c.stream(&s, &[], &format!("{line}data:\n\n"));
        assert!(
            matches!(c.outcome(id), Some(Ev::Failed { .. })),
            "{line:?}: {:?}",
            c.events
        );
        c.wait(Duration::from_secs(5));
        assert!(
            c.sent().iter().all(|s| s.header("Last-Event-ID").is_none()),
            "{line:?}"
        );
    }
}

#[test]
fn an_event_id_no_header_can_carry_does_not_resume_a_stream() {
    // SSE allows control characters in an event id; a Last-Event-ID header cannot carry them.
    // A stream whose last id is such cannot be resumed: its request fails when it breaks,
    // and nothing goes out with the byte in a header.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.stream(&s, &[], "id: ev\u{1}1\ndata:\n\n");
    assert!(
        matches!(c.outcome(id), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
    c.wait(Duration::from_secs(5));
    for s in c.sent() {
        assert!(
            s.headers.iter().all(|(_, v)| !v.contains('\u{1}')),
            "{:?}",
            s.headers
        );
    }
    // An id with characters above ASCII is an obs-text header value: still resumed.
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.stream(&s, &[], "id: \u{e9}v\ndata:\n\n");
    c.wait(Duration::from_secs(1));
    let get = c.sent().remove(0);
    assert_eq!(get.header("Last-Event-ID"), Some("\u{e9}v"));
    let answer = tools_answer(&json!(id.0));
    c.stream(&get, &[], &format!("id: 2\ndata: {answer}\n\n"));
    c.assert_answered(id);
}

#[test]
fn a_200_that_is_neither_json_nor_sse_fails_with_its_status() {
    // A proxy's HTML page with status 200: the request fails naming the status, not "the
    // stream ended without the answer". A JSON-RPC answer in a body labelled otherwise is
    // still taken.
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let (html, labelled) = (c.request("tools/list"), c.request("tools/list"));
    let posts = c.sent();
    c.answer(
        &posts[0],
        200,
        &[("Content-Type", "text/html; charset=utf-8")],
        "<html><body>Sign in</body></html>",
    );
    let answer = tools_answer(&posts[1].body["id"]);
    c.answer(&posts[1], 200, &[("Content-Type", "text/plain")], &answer);
    assert!(
        matches!(
            c.outcome(html),
            Some(Ev::Failed {
                reason: TransportFailure::Status(200),
                ..
            })
        ),
        "{:?}",
        c.events
    );
    c.assert_answered(labelled);
    // The page's text is kept for whoever explains the failure (a status alone says little).
    assert_eq!(
        c.client.failure_text(),
        Some("<html><body>Sign in</body></html>")
    );
    // A proxy's long error page: its start, lossy at the cut.
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    let page = format!("\n  Bad gateway: {}", "\u{e9}".repeat(400));
    c.answer(&s, 502, &[("Content-Type", "text/plain")], &page);
    assert!(matches!(
        c.outcome(id),
        Some(Ev::Failed {
            reason: TransportFailure::Status(502),
            ..
        })
    ));
    let text = c.client.failure_text().unwrap();
    assert!(text.starts_with("Bad gateway: \u{e9}"), "{text}");
    assert!(
        text.len() <= mcpwire::http::FAILURE_TEXT_MAX + 3,
        "{}",
        text.len()
    );
    // The next failure's text, or none: never an earlier one's.
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.answer(&s, 500, &[], "");
    assert!(matches!(
        c.outcome(id),
        Some(Ev::Failed {
            reason: TransportFailure::Status(500),
            ..
        })
    ));
    assert_eq!(c.client.failure_text(), None);
}

/// A final head with an informational status (a host whose HTTP library hands over `101
/// Switching Protocols`, or any 1xx, as the response) is no answer: the request fails at once
/// with that status and the host is told to stop reading, instead of reading a body that may
/// be the raw connection and never end. A notification's POST answered so is let go too.
#[test]
fn a_final_informational_head_fails_its_request_at_once() {
    for status in [100, 101, 103, 199] {
        let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
        c.handshake(Some("s1"));
        let id = c.request("tools/list");
        let s = c.sent().remove(0);
        c.client
            .handle_response(c.now, s.exchange, status, &[("Upgrade", "websocket")]);
        c.events();
        match c.outcome(id) {
            Some(Ev::Failed { reason, .. }) => {
                assert_eq!(*reason, TransportFailure::Status(status))
            }
            other => panic!("{status}: {other:?}"),
        }
        c.sent();
        assert_eq!(
            c.aborted,
            vec![s.exchange],
            "{status}: the host stops reading"
        );
        // Whatever the host still reports of that exchange changes nothing.
        c.client
            .handle_body(c.now, s.exchange, b"\x16\x03\x01 raw bytes");
        c.client.handle_end(c.now, s.exchange, 0);
        c.events();
        assert!(c.sent().is_empty(), "{status}");
        // The session goes on: the next request is answered.
        let next = c.request("tools/list");
        let s = c.sent().remove(0);
        let answer = tools_answer(&s.body["id"]);
        c.answer(&s, 200, &[("Content-Type", "application/json")], &answer);
        c.assert_answered(next);
        // A notification's POST: aborted, and the session's DELETE is not held for it.
        c.client
            .connection()
            .notify("notifications/roots/list_changed", None)
            .unwrap();
        let n = c.sent().remove(0);
        c.client.handle_response(c.now, n.exchange, status, &[]);
        c.sent();
        assert!(c.aborted.contains(&n.exchange), "{status}");
        assert!(!c.client.has_exchange(n.exchange), "{status}");
        assert!(!c.client.has_unheard(), "{status}");
    }
}

/// An abort the host was to be told of survives the session's expiry: a 404 on another
/// exchange, fed before the host polled, cleared the queue with it, and the host kept
/// reading a response the engine had forgotten (a 101's raw connection, a body that never
/// ends).
#[test]
fn an_abort_queued_before_the_session_expires_still_reaches_the_host() {
    let (mut c, _, first) = Scripted::in_session_with("tools/list");
    c.request("tools/list");
    let second = c.sent().remove(0);
    c.client.handle_response(c.now, first.exchange, 101, &[]);
    // No poll between the two: the 404 comes in the same turn of the host's loop.
    c.expire(&second);
    c.sent();
    assert!(
        c.aborted.contains(&first.exchange),
        "aborted {:?}, want {:?} among them",
        c.aborted,
        first.exchange
    );
}

/// A server's request on the `initialize` answer's stream, before the answer, is answered
/// first; `initialized` still goes out before any request, alone. The answer (a pong) was
/// taken for `initialized`: requests waited for its head instead, then went out together
/// with `initialized`, and a strict server refused the one that overtook it.
#[test]
fn a_request_never_overtakes_initialized_after_a_ping_on_the_initialize_stream() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    c.sse_head(init.exchange);
    let answer = initialize_answer(&init.body["id"]);
    let body = format!(
        "data: {{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}}\n\ndata: {answer}\n\n"
    );
    c.client.handle_response(
        c.now,
        init.exchange,
        200,
        &[
            ("Content-Type", "text/event-stream"),
            ("Mcp-Session-Id", "s1"),
        ],
    );
    c.client.handle_body(c.now, init.exchange, body.as_bytes());
    c.client.handle_end(c.now, init.exchange, 0);
    c.events();
    c.request("tools/list");
    let mut seen = Vec::new();
    for _ in 0..4 {
        let sent = c.sent();
        if sent.is_empty() {
            break;
        }
        let methods: Vec<String> = sent
            .iter()
            .map(|s| {
                s.body["method"]
                    .as_str()
                    .map_or_else(|| "answer".to_owned(), str::to_owned)
            })
            .collect();
        seen.push(methods);
        for s in &sent {
            if s.method == "POST" && s.body["method"] != "tools/list" {
                c.answer(s, 202, &[], "");
            }
        }
    }
    let flat: Vec<&String> = seen.iter().flatten().collect();
    let initialized = flat.iter().position(|m| *m == "notifications/initialized");
    let list = flat.iter().position(|m| *m == "tools/list");
    assert!(
        initialized.is_some() && list.is_some() && initialized < list,
        "{seen:?}"
    );
    // And never in the same batch of sends.
    assert!(
        !seen.iter().any(
            |batch| batch.contains(&"notifications/initialized".to_owned())
                && batch.contains(&"tools/list".to_owned())
        ),
        "{seen:?}"
    );
}

/// A request cancelled before its POST went out is never sent (nor is its cancellation, in
/// the handshake era: the server never had it). It was sent, and its cancellation raced it:
/// a cancel that arrived first was ignored, and the server ran the tool to its end.
#[test]
fn a_request_cancelled_before_it_went_out_is_never_sent() {
    let (mut c, _, _) = Scripted::in_session_with("tools/list");
    let id = c
        .client
        .connection()
        .request(c.now, "tools/call", None)
        .unwrap();
    c.client.connection().cancel(c.now, id, None).unwrap();
    let sent = c.sent();
    assert!(
        sent.iter().all(|s| s.body["method"] != "tools/call"),
        "{:?}",
        sent.iter().map(|s| &s.body).collect::<Vec<_>>()
    );
    assert!(c.aborted.is_empty(), "{:?}", c.aborted);
}

/// A request whose stream broke (and waits to be resumed) when the application ends the
/// session fails then: its resumption would go out after the DELETE with the ended
/// session's id, to be refused 404 half a second later, or longer.
#[test]
fn a_stream_waiting_to_resume_when_the_session_ends_fails_at_once() {
    let (mut c, id, post) = Scripted::in_session_with("tools/call");
    c.sse_head(post.exchange);
    c.client
        .handle_body(c.now, post.exchange, b"id: 1\ndata: \n\n");
    c.client.handle_error(c.now, post.exchange, 0);
    c.events();
    assert!(c.outcome(id).is_none(), "waits to resume");
    let delete = c.client.end_session().unwrap();
    c.events();
    assert!(
        matches!(
            c.outcome(id),
            Some(Ev::Failed {
                reason: TransportFailure::Status(404),
                ..
            })
        ),
        "{:?}",
        c.events
    );
    let sent = c.sent();
    assert!(
        sent.iter().any(|s| s.exchange == delete),
        "the DELETE goes: {:?}",
        sent.iter().map(|s| s.method).collect::<Vec<_>>()
    );
    for s in sent.iter().filter(|s| s.exchange == delete) {
        c.answer(s, 200, &[], "");
    }
    c.wait(Duration::from_secs(5));
    let later = c.sent();
    assert!(
        later.iter().all(|s| s.method != "GET"),
        "{:?}",
        later
            .iter()
            .map(|s| (s.method, s.headers.clone()))
            .collect::<Vec<_>>()
    );
}

/// An answer batched in an SSE event (2025-03-26, the one version with batches) is noted as
/// the answer, so the stream that carried it is let go once it lingers; it was handed to the
/// application but not noted, and the exchange stayed open for good on a server that kept
/// the stream open.
#[test]
fn a_batched_answer_on_a_stream_lets_the_stream_go() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    let init = c.sent().remove(0);
    let answer = json!({"jsonrpc":"2.0","id":init.body["id"],"result":{
        "protocolVersion":"2025-03-26","capabilities":{"tools":{}},
        "serverInfo":{"name":"scripted","version":"1"}}})
    .to_string();
    c.answer(
        &init,
        200,
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", "s1"),
        ],
        &answer,
    );
    for s in c.sent() {
        c.answer(&s, 202, &[], "");
    }
    let id = c.request("tools/list");
    let post = c.sent().remove(0);
    c.sse_head(post.exchange);
    let batch = format!("data: [{}]\n\n", tools_answer(&post.body["id"]));
    c.client.handle_body(c.now, post.exchange, batch.as_bytes());
    c.events();
    c.assert_answered(id);
    assert!(c.sent().is_empty());
    c.wait(mcpwire::http::LINGER + Duration::from_millis(1));
    c.sent();
    assert!(c.aborted.contains(&post.exchange), "{:?}", c.aborted);
}

/// Outside 2025-03-26 a batch from the server is refused as over stdio: a batched answer (in
/// a JSON body or an SSE event) ends its request with `InvalidResponse`, a batched request
/// gets no answer, and nothing waits for a timeout. (The client split every batch in every
/// version, answering requests and taking answers a stdio client refuses.)
#[test]
fn a_batch_outside_2025_03_26_is_refused_as_over_stdio() {
    let (mut c, id, post) = Scripted::in_session_with("tools/list");
    c.answer(
        &post,
        200,
        &[("Content-Type", "application/json")],
        &format!("[{}]", tools_answer(&post.body["id"])),
    );
    assert!(
        c.events.contains(&Ev::InvalidResponse { request: id }),
        "{:?}",
        c.events
    );
    assert!(
        !c.events.iter().any(|e| matches!(e, Ev::Response { .. })),
        "{:?}",
        c.events
    );
    // A request in a batch on a stream: refused, never answered (no POST of a reply).
    let id = c.request("tools/list");
    let post = c.sent().remove(0);
    c.sse_head(post.exchange);
    let batch = format!(
        "data: [{},{{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}}]\n\n",
        tools_answer(&post.body["id"])
    );
    c.client.handle_body(c.now, post.exchange, batch.as_bytes());
    c.events();
    assert!(
        c.events.contains(&Ev::InvalidResponse { request: id }),
        "{:?}",
        c.events
    );
    assert!(
        c.sent().iter().all(|s| s.body.get("result").is_none()),
        "the ping is not answered"
    );
}

/// A JSON answer over the largest frame that arrives in pieces fails its request at once
/// (`TooLarge`), and the host is told to stop reading it. The piece that did not fit was
/// skipped and later ones appended: a body with its middle left out, valid JSON by chance, was
/// delivered as the answer.
#[test]
fn a_json_answer_over_the_largest_frame_in_pieces_is_never_taken() {
    let mut config = legacy(client_config());
    config.limits.max_frame = 4096;
    let mut c = Scripted::new(config, ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[],"pad":"{}"#,
        s.body["id"],
        "a".repeat(4000)
    );
    c.client.handle_response(
        c.now,
        s.exchange,
        200,
        &[("Content-Type", "application/json")],
    );
    c.client.handle_body(c.now, s.exchange, head.as_bytes());
    c.client
        .handle_body(c.now, s.exchange, "b".repeat(200).as_bytes());
    c.client.handle_body(c.now, s.exchange, br#""}}"#);
    c.client.handle_end(c.now, s.exchange, 0);
    c.events();
    match c.outcome(id) {
        Some(Ev::Failed { reason, .. }) => assert_eq!(*reason, TransportFailure::TooLarge),
        other => panic!("{other:?}"),
    }
    c.sent();
    assert_eq!(c.aborted, vec![s.exchange], "the host stops reading");
}

/// Answers the server begins and never finishes hold at most `HELD_BODY_FRAMES` frames
/// together: each could hold one `max_frame`, and with 256 requests running a server that
/// stalls every answer made the client hold 4 GiB. The answer that would take the total past
/// it fails (`TooLarge`) and is no longer read; the others, finished, are taken, and so is a
/// later one.
#[test]
fn unfinished_answers_hold_a_few_frames_together_at_most() {
    const FRAME: usize = 1 << 20;
    let mut config = legacy(client_config());
    config.limits.max_frame = FRAME;
    let mut c = Scripted::new(config, ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let n = HELD_BODY_FRAMES + 1;
    let ids: Vec<_> = (0..n).map(|_| c.request("tools/list")).collect();
    let sent = c.sent();
    assert_eq!(sent.len(), n);
    let pad = FRAME - FRAME / 8;
    let head = |s: &Sent| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[],"pad":"{}"#,
            s.body["id"],
            "a".repeat(pad)
        )
    };
    // The first answer comes as an SSE event (its unfinished event counts the same).
    for (i, s) in sent.iter().enumerate() {
        if i == 0 {
            c.sse_head(s.exchange);
            let event = format!("id: 1\ndata: {}", head(s));
            c.client.handle_body(c.now, s.exchange, event.as_bytes());
            continue;
        }
        c.client.handle_response(
            c.now,
            s.exchange,
            200,
            &[("Content-Type", "application/json")],
        );
        c.client.handle_body(c.now, s.exchange, head(s).as_bytes());
    }
    c.events();
    c.sent();
    let last = sent.last().unwrap();
    assert_eq!(
        c.aborted,
        vec![last.exchange],
        "the host stops reading the last one"
    );
    match c.outcome(*ids.last().unwrap()) {
        Some(Ev::Failed { reason, .. }) => assert_eq!(*reason, TransportFailure::TooLarge),
        other => panic!("{other:?}"),
    }
    for (i, s) in sent[..n - 1].iter().enumerate() {
        let tail: &[u8] = if i == 0 { b"\"}}\n\n" } else { br#""}}"# };
        c.client.handle_body(c.now, s.exchange, tail);
        c.client.handle_end(c.now, s.exchange, 0);
    }
    c.events();
    for id in &ids[..n - 1] {
        assert!(
            matches!(c.outcome(*id), Some(Ev::Response { .. })),
            "{:?}",
            c.outcome(*id)
        );
    }
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    let body = format!("{}\"}}}}", head(&s));
    c.answer(&s, 200, &[("Content-Type", "application/json")], &body);
    assert!(matches!(c.outcome(id), Some(Ev::Response { .. })));
}

/// The same over SSE: an event over the largest frame fails the requests its stream carries at
/// once (it was dropped without a word, the stream resumed and brought it again, and the
/// request waited for its timeout), and `max_frame` is the limit there too (SSE took 16 MiB
/// whatever it said).
#[test]
fn an_sse_answer_over_the_largest_frame_fails_its_request_at_once() {
    let mut config = legacy(client_config());
    config.limits.max_frame = 4096;
    let mut c = Scripted::new(config, ReconnectPolicy::default());
    c.handshake(Some("s1"));
    for (size, taken) in [(3000, true), (6000, false)] {
        let id = c.request("tools/list");
        let s = c.sent().remove(0);
        let answer =
            json!({"jsonrpc":"2.0","id":s.body["id"],"result":{"tools":[],"pad":"x".repeat(size)}});
        c.sse_head(s.exchange);
        c.client.handle_body(
            c.now,
            s.exchange,
            format!("id: 1-{size}\ndata: {answer}\n\n").as_bytes(),
        );
        c.events();
        match c.outcome(id) {
            Some(Ev::Response { .. }) => assert!(taken, "{size} bytes taken"),
            Some(Ev::Failed { reason, .. }) => {
                assert!(!taken, "{size} bytes refused");
                assert_eq!(*reason, TransportFailure::TooLarge);
                c.sent();
                assert!(c.aborted.contains(&s.exchange), "not resumed");
            }
            other => panic!("{size}: {other:?}"),
        }
    }
}

/// A JSON answer longer than the connection's largest frame fails its request, as it would
/// over stdio (the client took up to 64 MiB, whatever `max_frame` said); one within it is
/// taken.
#[test]
fn a_json_answer_over_the_largest_frame_fails_its_request() {
    let mut config = legacy(client_config());
    config.limits.max_frame = 4096;
    let mut c = Scripted::new(config, ReconnectPolicy::default());
    c.handshake(Some("s1"));
    for (size, taken) in [(1000, true), (5000, false)] {
        let id = c.request("tools/list");
        let s = c.sent().remove(0);
        let body =
            json!({"jsonrpc":"2.0","id":s.body["id"],"result":{"tools":[],"pad":"x".repeat(size)}});
        c.answer(
            &s,
            200,
            &[("Content-Type", "application/json")],
            &body.to_string(),
        );
        match c.outcome(id) {
            Some(Ev::Response { .. }) => assert!(taken, "{size} bytes taken"),
            Some(Ev::Failed { .. }) => assert!(!taken, "{size} bytes refused"),
            other => panic!("{size}: {other:?}"),
        }
    }
}

/// A 2026-07-28 client's notification other than a cancellation (an extension's) is POSTed,
/// as the transport says of every client message, and its 202 ends the exchange. It was
/// dropped without a trace, `notify` having said `Ok` (found by a review of the stateless
/// era). A cancellation still only closes its request's stream.
#[test]
fn a_stateless_clients_notification_is_posted() {
    let mut c = modern_scripted();
    c.client
        .connection()
        .notify(
            "com.example/ping",
            Some(RawJson::new(r#"{"n":1}"#).unwrap()),
        )
        .unwrap();
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].method, "POST");
    assert_eq!(sent[0].body["method"], "com.example/ping");
    assert_eq!(sent[0].header("MCP-Protocol-Version"), Some("2026-07-28"));
    c.answer(&sent[0], 202, &[], "");
    assert!(!c.client.has_exchange(sent[0].exchange));

    let id = c.request("tools/list");
    let post = c.sent().remove(0);
    c.client.connection().cancel(c.now, id, None).unwrap();
    let after: Vec<Sent> = c.sent();
    assert!(
        after.iter().all(|s| s.method != "POST"),
        "no cancellation POSTed: {after:?}"
    );
    assert!(c.aborted.contains(&post.exchange), "its stream is closed");
}

/// A 2026-07-28 `tools/list` result whose tools cannot be read for sure is filtered as the
/// transport requires ("MUST exclude the invalid tool"): a tool whose `inputSchema` or `name`
/// is written twice (a parser keeping the last one reads a schema never checked) is left
/// out, and a result whose `tools` is written twice keeps none. A result nested as deep as
/// the decoder takes is still filtered. Each was delivered whole, with the invalid tool
/// (found by a review of the stateless era).
#[test]
fn tools_that_cannot_be_read_for_sure_are_left_out_of_tools_list() {
    let bad = r#"{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}"#;
    let good = r#"{"name":"plain","inputSchema":{"type":"object"}}"#;
    let deep = format!("{}1{}", "[".repeat(122), "]".repeat(122));
    for (what, result, kept) in [
        (
            "inputSchema twice",
            format!(
                r#"{{"tools":[{{"name":"bad","inputSchema":{{"type":"object"}},"inputSchema":{bad}}},{good}]}}"#
            ),
            1,
        ),
        (
            "name twice",
            format!(r#"{{"tools":[{{"name":"bad","name":"bad","inputSchema":{bad}}},{good}]}}"#),
            1,
        ),
        (
            "tools twice",
            format!(r#"{{"tools":[],"tools":[{{"name":"bad","inputSchema":{bad}}},{good}]}}"#),
            0,
        ),
        (
            "deep",
            format!(
                r#"{{"tools":[{{"name":"bad","inputSchema":{bad}}},{{"name":"plain","inputSchema":{{"type":"object","default":{deep}}}}}]}}"#
            ),
            1,
        ),
    ] {
        let mut c = modern_scripted();
        let list = c.request("tools/list");
        let s = c.sent().remove(0);
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
            s.body["id"]
        );
        c.answer(&s, 200, &[("Content-Type", "application/json")], &answer);
        let Some(Ev::Response { result, .. }) = c.outcome(list) else {
            panic!("{what}: {:?}", c.events)
        };
        assert!(!result.contains("\"bad\""), "{what}: {result}");
        let tools: Value = serde_json::from_str(result).unwrap();
        assert_eq!(
            tools["tools"].as_array().unwrap().len(),
            kept,
            "{what}: {tools}"
        );
    }
}

/// Three handshake-era rules the client kept wrong (a helper's audit of the HTTP transport):
/// a `tools/list` answer keeps every tool (`x-mcp-header` annotations are a 2026-07-28 rule);
/// a request whose `_meta` names 2026-07-28 still goes in the session, with its id and the
/// negotiated version; and a 404 to a resumption that carried no session id (there is none)
/// fails that stream only, without starting a new session.
#[test]
fn handshake_era_sessions_keep_their_own_rules() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    let list = c.request("tools/list");
    let s = c.sent().remove(0);
    let answer = json!({"jsonrpc":"2.0","id":list.0,"result":{"tools":[
        {"name":"broken","inputSchema":{"type":"object","properties":{
            "n":{"type":"number","x-mcp-header":"N"}}}},
        {"name":"plain","inputSchema":{"type":"object"}}]}});
    c.answer(
        &s,
        200,
        &[("Content-Type", "application/json")],
        &answer.to_string(),
    );
    let Some(Ev::Response { result, .. }) = c.outcome(list) else {
        panic!("{:?}", c.events)
    };
    let tools: Value = serde_json::from_str(result).unwrap();
    assert_eq!(tools["tools"].as_array().unwrap().len(), 2, "{tools}");

    let params = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#;
    c.client
        .connection()
        .request(c.now, "tools/list", Some(RawJson::new(params).unwrap()))
        .unwrap();
    let s = c.sent().remove(0);
    assert_eq!(s.header("Mcp-Session-Id"), Some("s1"));
    assert_eq!(s.header("MCP-Protocol-Version"), Some("2025-11-25"));

    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(None);
    let id = c.request("tools/list");
    let s = c.sent().remove(0);
    c.stream(&s, &[], "id: ev-1\nretry: 100\ndata:\n\n");
    c.wait(Duration::from_secs(1));
    let get = c.sent().remove(0);
    assert_eq!(get.header("Mcp-Session-Id"), None);
    c.answer(&get, 404, &[], "");
    assert!(
        matches!(c.outcome(id), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
    let after = c.sent();
    assert!(
        after.iter().all(|s| s.body["method"] != "initialize"),
        "no new session: {:?}",
        after.iter().map(|s| &s.body).collect::<Vec<_>>()
    );
}

/// The session's GET stream carries the server's requests and notifications for the whole
/// session: one that breaks before its first event (the TypeScript and Python SDK servers
/// send none when it opens) is opened again, plainly, after the policy's delay, and what the
/// server then sends on it arrives. (It was lost for good, and a server's request that
/// travelled on it left the call waiting for its timeout.) A GET refused for now (503) is
/// tried again too, within the policy's attempts; a 405 (no GET stream offered) is not.
#[test]
fn the_sessions_get_stream_is_opened_again_when_it_breaks_before_an_event() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    c.handshake(Some("s1"));
    let get = c.gets.remove(0);
    // Its head, then the connection breaks with nothing in it.
    c.sse_head(get.exchange);
    c.client.handle_error(c.now, get.exchange, 0);
    c.events();
    c.wait(Duration::from_secs(1));
    let again = c.sent();
    assert_eq!(again.len(), 1, "reopened");
    assert_eq!(again[0].method, "GET");
    assert_eq!(again[0].header("Mcp-Session-Id"), Some("s1"));
    assert_eq!(again[0].header("Last-Event-ID"), None);
    // Refused for now: tried again.
    c.answer(&again[0], 503, &[], "");
    c.wait(Duration::from_secs(3));
    let third = c.sent();
    assert_eq!(third.len(), 1, "tried again after a 503");
    assert_eq!(third[0].method, "GET");
    // This time it carries a request of the server's, which is answered.
    c.sse_head(third[0].exchange);
    c.client.handle_body(
        c.now,
        third[0].exchange,
        b"data: {\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}\n\n",
    );
    c.events();
    let reply = c.sent();
    assert!(
        reply
            .iter()
            .any(|s| s.method == "POST" && s.body["id"] == 77),
        "the server's ping was answered"
    );
    // A server that offers no GET stream says so with 405: not asked again.
    c.client.handle_error(c.now, third[0].exchange, 0);
    c.wait(Duration::from_secs(1));
    let fourth = c.sent();
    assert_eq!(fourth.len(), 1);
    c.answer(&fourth[0], 405, &[], "");
    c.wait(Duration::from_secs(60));
    assert!(c.sent().is_empty(), "no GET after a 405");
}

/// An error status to the GET that resumes a call's stream is not the call's answer, even
/// with an error body without an id (the TypeScript SDK's 409 "Stream already has an active
/// connection" while it still holds the broken connection): the GET is tried again, and the
/// answer it then brings ends the call. (The 409's error was delivered as the call's answer.)
#[test]
fn an_error_status_to_a_resumption_is_not_the_calls_answer() {
    let (mut c, id, post) = Scripted::in_session_with("tools/list");
    c.stream(&post, &[], "id: e1\nretry: 1000\ndata:\n\n");
    c.wait(Duration::from_millis(1500));
    let get = c.sent().remove(0);
    assert_eq!(get.header("Last-Event-ID"), Some("e1"));
    c.answer(
        &get,
        409,
        &[("Content-Type", "application/json")],
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Conflict: Stream already has an active connection"},"id":null}"#,
    );
    assert_eq!(c.outcome(id), None, "{:?}", c.events);
    c.wait(Duration::from_secs(5));
    let again = c.sent().remove(0);
    assert_eq!(again.method, "GET");
    assert_eq!(again.header("Last-Event-ID"), Some("e1"));
    let answer = tools_answer(&json!(id.0));
    c.stream(&again, &[], &format!("id: e2\ndata: {answer}\n\n"));
    c.assert_answered(id);
}

/// Ending the session closes its GET stream, which is not opened again: without the session
/// it would be a GET of no session.
#[test]
fn ending_the_session_closes_its_get_stream_for_good() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    c.handshake(Some("s1"));
    let get = c.gets.remove(0);
    c.sse_head(get.exchange);
    assert!(c.client.end_session().is_some());
    let sent = c.sent();
    assert_eq!(
        sent.iter().map(|s| s.method).collect::<Vec<_>>(),
        ["DELETE"]
    );
    assert!(c.aborted.contains(&get.exchange), "the GET is closed");
    // Its end, reported anyway, changes nothing.
    c.client.handle_end(c.now, get.exchange, 0);
    c.wait(Duration::from_secs(60));
    assert!(c.sent().iter().all(|s| s.method != "GET"));
    // One that broke and waits to be opened again is dropped too, before or after its time.
    for wait in [Duration::ZERO, Duration::from_secs(5)] {
        let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
        c.handshake(Some("s1"));
        let get = c.gets.remove(0);
        c.client.handle_error(c.now, get.exchange, 0);
        c.wait(wait);
        assert!(c.client.end_session().is_some());
        c.wait(Duration::from_secs(60));
        let sent = c.sent();
        assert_eq!(
            sent.iter().map(|s| s.method).collect::<Vec<_>>(),
            ["DELETE"],
            "{wait:?}"
        );
        assert!(c.aborted.is_empty(), "nothing to abort: it never went out");
    }
}

/// A GET stream that lived long before it broke starts its count of attempts again, but the
/// reopenings that then fail before their head count: against a server that is gone, the
/// client tries the policy's attempts with the delay doubling (it went on every half second
/// for the whole session), then once per longest delay while the session lasts (it gave the
/// stream up, and the server's requests and notifications were lost without a word after
/// an outage of fifteen seconds).
#[test]
fn reopening_the_get_stream_of_a_server_that_is_gone_slows_to_once_per_longest_delay() {
    let policy = ReconnectPolicy::default();
    let mut c = Scripted::with_get(legacy(client_config()), policy, true);
    c.handshake(Some("s1"));
    let get = c.gets.remove(0);
    c.sse_head(get.exchange);
    c.wait(Duration::from_secs(31));
    let broke = c.now;
    c.client.handle_error(c.now, get.exchange, 0);
    let mut at = Vec::new();
    for _ in 0..600 {
        c.wait(Duration::from_secs(1));
        for s in c.sent() {
            assert_eq!(s.method, "GET");
            at.push(c.now.since(broke).as_secs());
            c.client.handle_error(c.now, s.exchange, 0);
        }
    }
    let attempts = policy.max_attempts as usize;
    let gaps: Vec<u64> = at.windows(2).map(|w| w[1] - w[0]).collect();
    // 0.5 s, then doubling: 1, 2, 4, 8 s (to the second above).
    assert!(gaps[..attempts - 1].iter().all(|&g| g <= 8), "{at:?}");
    assert!(gaps[attempts - 1..].iter().all(|&g| g == 30), "{at:?}");
    assert!(at.len() >= attempts + 18, "{at:?}");
    // A reopening that works ends the slow pace: the session's stream is back.
    c.wait(Duration::from_secs(30));
    let get = c.sent().remove(0);
    c.sse_head(get.exchange);
    c.wait(Duration::from_secs(31));
    c.client.handle_error(c.now, get.exchange, 0);
    c.wait(Duration::from_secs(1));
    assert_eq!(
        c.sent().len(),
        1,
        "attempts counted afresh: the first after 0.5 s"
    );
}

/// A request's stream that a server ends now and then for the client to poll (replaying no
/// event, as the TypeScript SDK does), or that a proxy cuts, is resumed for as long as each
/// reconnection lives a while: its count of attempts starts again, as the GET stream's
/// does. (After five reconnections that all worked, the request failed with `StreamEnded`,
/// the delay doubling each time.) Reconnections that end at once still use the attempts up.
#[test]
fn a_request_stream_that_keeps_reconnecting_is_resumed_while_each_lives() {
    let (mut c, id, _post, mut get) = Scripted::resuming_after_a_break(1000);
    let ended = |c: &Scripted| {
        (c.events.iter()).any(
            |e| matches!(e, Ev::Failed { request, .. } | Ev::Response { request, .. } if *request == id),
        )
    };
    // (Six rounds: more than the policy's five attempts.)
    for round in 0..6 {
        assert_eq!(get.method, "GET", "round {round}");
        c.sse_head(get.exchange);
        c.wait(Duration::from_millis(1500));
        c.client.handle_end(c.now, get.exchange, 0);
        c.wait(Duration::from_millis(1000));
        let mut sent = c.sent();
        assert!(!ended(&c), "round {round}: {:?}", c.events);
        assert_eq!(sent.len(), 1, "round {round}");
        get = sent.remove(0);
    }
    // Now each reconnection ends as soon as it opens: the attempts run out (within the
    // request's timeout) and the request fails.
    let mut gets = vec![get];
    for _ in 0..40 {
        for get in gets.drain(..) {
            c.sse_head(get.exchange);
            c.client.handle_end(c.now, get.exchange, 0);
        }
        c.wait(Duration::from_secs(1));
        gets = c.sent();
        if ended(&c) {
            break;
        }
    }
    assert!(
        (c.events.iter()).any(|e| matches!(e, Ev::Failed { request, .. } if *request == id)),
        "{:?}",
        c.events
    );
}

/// A 2026-07-28 client whose `server/discover` was answered: a server with tools.
fn modern_scripted() -> Scripted {
    let mut c = Scripted::new(modern(client_config()), ReconnectPolicy::default());
    let discover = c.sent().remove(0);
    let answer = json!({"jsonrpc":"2.0","id":discover.body["id"],"result":{
        "supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},
        "serverInfo":{"name":"scripted","version":"1"}}})
    .to_string();
    c.answer(&discover, 200, &[], &answer);
    assert!(
        matches!(c.events.as_slice(), [Ev::Ready { .. }]),
        "{:?}",
        c.events
    );
    c.events.clear();
    c
}

impl Scripted {
    /// Calls tool `sql` with `region`; returns the request's id and its POST.
    fn call_sql(&mut self, region: &str) -> (mcpwire::conn::RequestId, Sent) {
        let params = json!({"name":"sql","arguments":{"region":region}}).to_string();
        let id = (self.client.connection())
            .request(self.now, "tools/call", Some(RawJson::new(&params).unwrap()))
            .unwrap();
        (id, self.sent().remove(0))
    }

    /// Refuses `post` as a server does whose `Mcp-Param-*` headers did not match.
    fn refuse_headers(&mut self, post: &Sent) {
        let refusal = json!({"jsonrpc":"2.0","id":post.body["id"],
            "error":{"code":-32020,"message":"Header mismatch: Mcp-Param-Region"}})
        .to_string();
        self.answer(post, 400, &[("Content-Type", "application/json")], &refusal);
    }

    /// Answers the `tools/list` request `list` with `result`.
    fn list_tools(&mut self, list: &Sent, result: Value) {
        let answer = json!({"jsonrpc":"2.0","id":list.body["id"],"result":result}).to_string();
        self.answer(list, 200, &[("Content-Type", "application/json")], &answer);
    }
}

fn sql_tool(header: &str) -> Value {
    json!({"name":"sql","inputSchema":{"type":"object","properties":{
        "region":{"type":"string","x-mcp-header":header}}}})
}

/// The client's own `tools/list` answered in a batch (refused outside 2025-03-26): the
/// refresh fails at once, and the held call gets its refusal as its answer (it would have
/// waited on a refresh whose answer never came).
#[test]
fn a_refresh_answered_in_a_batch_fails_and_the_refusal_answers_the_call() {
    let mut c = modern_scripted();
    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    assert_eq!(list.body["method"], "tools/list");
    let answer =
        json!([{"jsonrpc":"2.0","id":list.body["id"],"result":{"tools":[sql_tool("Region")]}}])
            .to_string();
    c.answer(&list, 200, &[("Content-Type", "application/json")], &answer);
    assert!(
        matches!(c.outcome(id), Some(Ev::Error { code: -32020, .. })),
        "{:?}",
        c.events
    );
    assert!(
        c.sent().iter().all(|s| s.body["method"] != "tools/call"),
        "not sent again"
    );
}

/// "If the server rejects a request with a HeaderMismatch error because required
/// Mcp-Param-* headers are missing or do not match the body, the client SHOULD call
/// tools/list to check for changes to the tool's inputSchema, then retry the original
/// request" (2026-07-28): the refusal is held, `tools/list` is read page by page until the
/// tool is found, and the call goes again once with the headers learned. The application
/// sees the call's answer only.
#[test]
fn a_call_refused_for_its_param_headers_goes_again_after_tools_list() {
    let mut c = modern_scripted();
    let (id, post) = c.call_sql("eu");
    assert_eq!(
        post.header("Mcp-Param-Region"),
        None,
        "never listed: no header"
    );
    c.refuse_headers(&post);
    assert_eq!(c.outcome(id), None, "held: {:?}", c.events);
    let list = c.sent().remove(0);
    assert_eq!(list.body["method"], "tools/list");
    assert_eq!(list.header("Mcp-Method"), Some("tools/list"));
    assert_eq!(list.header("MCP-Protocol-Version"), Some("2026-07-28"));
    let meta = &list.body["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "test-client"
    );
    assert!(list.body["params"].get("cursor").is_none());
    let list_id = list.body["id"].as_i64().unwrap();
    assert!(list_id < 0, "never one of the connection's ids: {list_id}");
    // The tool is on the second page.
    c.list_tools(
        &list,
        json!({"tools":[{"name":"other","inputSchema":{"type":"object"}}],"nextCursor":"p2"}),
    );
    let list = c.sent().remove(0);
    assert_eq!(list.body["method"], "tools/list");
    assert_eq!(list.body["params"]["cursor"], "p2");
    assert_ne!(list.body["id"].as_i64().unwrap(), list_id);
    c.list_tools(&list, json!({"tools":[sql_tool("Region")]}));
    let again = c.sent().remove(0);
    assert_eq!(again.body, post.body, "the same request");
    assert_eq!(again.header("Mcp-Param-Region"), Some("eu"));
    c.answer(
        &again,
        200,
        &[("Content-Type", "application/json")],
        &empty_result(&again),
    );
    c.assert_answered(id);
    assert_eq!(
        c.events.len(),
        1,
        "the tools/list answers are the client's own: {:?}",
        c.events
    );
    // What it learned stays: the next call carries the header at once.
    let (_, post) = c.call_sql("us");
    assert_eq!(post.header("Mcp-Param-Region"), Some("us"));
}

/// A call goes again once: a second `HeaderMismatch` is its answer, and so is the first when
/// the server refuses the `tools/list`. A handshake-era refusal is the answer at once.
#[test]
fn a_header_mismatch_is_the_answer_after_one_retry_or_a_refused_tools_list() {
    let mut c = modern_scripted();
    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    c.list_tools(&list, json!({"tools":[sql_tool("Region")]}));
    let again = c.sent().remove(0);
    c.refuse_headers(&again);
    assert!(
        matches!(c.outcome(id), Some(Ev::Error { code: -32020, .. })),
        "{:?}",
        c.events
    );
    assert!(c.sent().is_empty(), "no more tools/list");

    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    let refusal = json!({"jsonrpc":"2.0","id":list.body["id"],
        "error":{"code":-32603,"message":"listing failed"}})
    .to_string();
    c.answer(
        &list,
        500,
        &[("Content-Type", "application/json")],
        &refusal,
    );
    assert!(
        matches!(c.outcome(id), Some(Ev::Error { code: -32020, .. })),
        "{:?}",
        c.events
    );
    assert!(c.sent().is_empty());
    // A tools/list whose exchange fails (no connection) ends the same way.
    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    c.client.handle_error(c.now, list.exchange, 0);
    c.events();
    assert!(
        matches!(c.outcome(id), Some(Ev::Error { code: -32020, .. })),
        "{:?}",
        c.events
    );
    assert!(c.sent().is_empty());

    // The handshake era has no such headers.
    let (mut c, id, post) = Scripted::in_session_with("tools/call");
    c.refuse_headers(&post);
    assert!(
        matches!(c.outcome(id), Some(Ev::Error { code: -32020, .. })),
        "{:?}",
        c.events
    );
    assert!(c.sent().is_empty());
}

/// A call cancelled, or timed out, while the client reads `tools/list` is not sent again, and
/// a `tools/list` read for calls that all ended is let go.
#[test]
fn a_call_that_ended_while_tools_list_was_read_is_not_sent_again() {
    let mut c = modern_scripted();
    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    c.client
        .connection()
        .cancel(c.now, id, Some("changed my mind"))
        .unwrap();
    c.events();
    let sent = c.sent();
    assert!(
        sent.iter().all(|s| s.body["method"] != "tools/call"),
        "{sent:?}"
    );
    c.list_tools(&list, json!({"tools":[sql_tool("Region")]}));
    assert!(c.sent().is_empty(), "not sent again");
    // The late page is the client's own: the application never hears of it (it got it as
    // an answer to an unknown request, a protocol violation).
    c.events();
    assert!(
        !(c.events.iter()).any(|e| matches!(e, Ev::Violation { .. })),
        "{:?}",
        c.events
    );

    // Timed out, the tools/list never answered: its exchange is let go.
    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    c.wait(Duration::from_secs(120));
    assert!(
        matches!(c.outcome(id), Some(Ev::TimedOut { .. })),
        "{:?}",
        c.events
    );
    let _ = c.sent();
    c.wait(Duration::from_secs(5));
    let _ = c.sent();
    assert!(
        c.aborted.contains(&list.exchange),
        "the tools/list is let go"
    );
    c.list_tools(&list, json!({"tools":[sql_tool("Region")]}));
    assert!(c.sent().is_empty(), "not sent again");
    // The late page is the client's own: the application never hears of it (it got it as
    // an answer to an unknown request, a protocol violation).
    c.events();
    assert!(
        !(c.events.iter()).any(|e| matches!(e, Ev::Violation { .. })),
        "{:?}",
        c.events
    );
}

/// The client's `tools/list` refused with an error that names no request (a 500 whose body
/// has `"id":null`, as many servers send) gives the held call its refusal at once: taken for
/// the application's, it left the walk waiting for a page that would never come, and the
/// call waited for its timeout. A refusal that comes twice holds the call once, and it goes
/// again once (twice, the tool ran twice).
#[test]
fn a_refused_tools_list_or_a_repeated_refusal_never_strands_or_doubles_a_call() {
    let mut c = modern_scripted();
    let (id, post) = c.call_sql("eu");
    c.refuse_headers(&post);
    let list = c.sent().remove(0);
    let idless = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"down"}}"#;
    c.answer(&list, 500, &[("Content-Type", "application/json")], idless);
    assert!(
        matches!(c.outcome(id), Some(Ev::Error { code: -32020, .. })),
        "{:?}",
        c.events
    );
    assert!(
        !(c.events.iter()).any(|e| matches!(e, Ev::Violation { .. })),
        "{:?}",
        c.events
    );

    let (id, post) = c.call_sql("eu");
    let refusal = json!({"jsonrpc":"2.0","id":post.body["id"],
        "error":{"code":-32020,"message":"Header mismatch"}})
    .to_string();
    c.stream(
        &post,
        &[],
        &format!("data: {refusal}\n\ndata: {refusal}\n\n"),
    );
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "one tools/list: {sent:?}");
    c.list_tools(&sent[0], json!({"tools":[sql_tool("Region")]}));
    let again = c.sent();
    assert_eq!(again.len(), 1, "sent again once: {again:?}");
    c.answer(
        &again[0],
        200,
        &[("Content-Type", "application/json")],
        &empty_result(&again[0]),
    );
    c.assert_answered(id);
}

/// A second copy of the refusal that comes on the first exchange after the call went again
/// answers nothing: it was the call's answer (the application got -32020 while the call ran
/// again on the server), and the exchange carrying the call again stopped waiting for its
/// real answer (found by a review of this session's changes).
#[test]
fn a_late_copy_of_the_refusal_does_not_answer_the_call_sent_again() {
    let mut c = modern_scripted();
    let (id, post) = c.call_sql("eu");
    let refusal = json!({"jsonrpc":"2.0","id":post.body["id"],
        "error":{"code":-32020,"message":"Header mismatch"}})
    .to_string();
    c.sse_head(post.exchange);
    let event = format!("data: {refusal}\n\n");
    c.client.handle_body(c.now, post.exchange, event.as_bytes());
    c.events();
    let list = c.sent().remove(0);
    c.list_tools(&list, json!({"tools":[sql_tool("Region")]}));
    let again = c.sent().remove(0);
    assert_eq!(again.header("Mcp-Param-Region"), Some("eu"));
    // The first stream, still open, brings the refusal again.
    c.client.handle_body(c.now, post.exchange, event.as_bytes());
    c.events();
    assert_eq!(c.outcome(id), None, "{:?}", c.events);
    c.answer(
        &again,
        200,
        &[("Content-Type", "application/json")],
        &empty_result(&again),
    );
    c.assert_answered(id);
}

/// Against the sans-IO server: a client that never listed the tools gets its call through
/// (the server refuses it without `Mcp-Param-Region`, the client lists the tools and sends it
/// again).
#[test]
fn a_client_that_never_listed_the_tools_gets_its_call_through() {
    let mut w = World::new(client_config(), http_server_config(), App::Answer);
    assert_eq!(w.ready(), ProtocolVersion::V2026_07_28);
    let r = result(&w.call(
        "tools/call",
        json!({"name":"sql","arguments":{"region":"eu","query":"select"}}),
    ));
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("eu"),
        "{r}"
    );
    let methods: Vec<(Option<&str>, Option<&str>)> = (w.seen.iter())
        .filter(|(m, _)| m == "POST")
        .map(|(_, h)| (header(h, "Mcp-Method"), header(h, "Mcp-Param-Region")))
        .skip_while(|(m, _)| *m != Some("tools/call"))
        .collect();
    assert_eq!(
        methods,
        [
            (Some("tools/call"), None),
            (Some("tools/list"), None),
            (Some("tools/call"), Some("eu")),
        ]
    );
}

/// A notification the connection still holds, while messages wait for the session's GET
/// stream to get its head, has not reached the server either: `has_unheard` says so, and a
/// host that drains before it exits (driving the timers) sees it go out. It said no, and the
/// host exited with the notification never sent.
#[test]
fn a_notification_held_for_the_get_streams_head_is_unheard() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    c.handshake(Some("s1"));
    assert!(!c.client.has_unheard());
    (c.client.connection())
        .notify("notifications/roots/list_changed", None)
        .unwrap();
    assert!(c.sent().is_empty(), "held for the GET stream's head");
    assert!(c.client.has_unheard());
    c.wait(Duration::from_secs(1));
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].body["method"], "notifications/roots/list_changed");
    assert!(c.client.has_unheard(), "sent, no head yet");
    c.answer(&sent[0], 202, &[], "");
    assert!(!c.client.has_unheard());
}

/// `is_ending_session` holds while the session's DELETE is held back, queued or under way,
/// and ends when it ended, and when it was dropped unsent because the session turned out to
/// be gone (the notification it waited for got 404): a host without the DELETE's exchange
/// id (C, Go) waited for it until its own time limit.
#[test]
fn is_ending_session_follows_the_delete_to_its_end_or_its_drop() {
    let (mut c, delete) = Scripted::ending_after_a_notification();
    assert!(c.client.is_ending_session());
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "the DELETE waits: {sent:?}");
    assert!(c.client.is_ending_session());
    c.expire(&sent[0]);
    c.events();
    assert!(!c.client.has_exchange(delete));
    assert!(!c.client.is_ending_session());
    assert!(c.sent().iter().all(|s| s.method != "DELETE"), "never sent");

    let (mut c, _) = Scripted::ending_after_a_notification();
    let sent = c.sent();
    c.answer(&sent[0], 202, &[], "");
    let sent = c.sent();
    assert_eq!(sent[0].method, "DELETE");
    assert!(c.client.is_ending_session());
    c.answer(&sent[0], 200, &[], "");
    assert!(!c.client.is_ending_session());

    // No session, no DELETE.
    let mut c = modern_scripted();
    assert!(c.client.end_session().is_none());
    assert!(!c.client.is_ending_session());
}

/// `n` requests made at once on a handshake-era session with its GET stream open: the
/// client, the GET stream, the requests' ids, and the POSTs that went out.
fn past_the_running_cap(n: usize) -> (Scripted, ExchangeId, Vec<RequestId>, Vec<Sent>) {
    let (mut c, get) = with_open_get_stream();
    let ids: Vec<RequestId> = (0..n).map(|_| c.request("tools/list")).collect();
    let running = c.sent();
    (c, get, ids, running)
}

/// POSTs of our requests run at most `MAX_RUNNING_REQUESTS` at once: over HTTP/1 each holds a
/// connection, and a burst of 1,024 requests opened 1,024 sockets (failing on the usual limit
/// of 1,024 open files instead of waiting). The rest wait their turn, in order; an answer to
/// the server's request and a notification do not wait behind them.
#[test]
fn requests_past_the_running_cap_wait_their_turn_in_order() {
    let cap = mcpwire::http::MAX_RUNNING_REQUESTS;
    let (mut c, get, ids, mut running) = past_the_running_cap(cap + 3);
    assert_eq!(running.len(), cap);
    for (s, id) in running.iter().zip(&ids) {
        assert_eq!((s.method, &s.body["id"]), ("POST", &json!(id.0)));
    }
    ping(&mut c, get, "\"p1\"");
    c.client
        .connection()
        .notify("notifications/roots/list_changed", None)
        .unwrap();
    let sent = c.sent();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0].body["id"], "p1");
    assert_eq!(sent[1].body["method"], "notifications/roots/list_changed");
    for s in &sent {
        c.answer(s, 202, &[], "");
    }
    // Each request that ends lets the oldest waiting one go.
    for waiting in &ids[cap..] {
        let done = running.remove(0);
        c.answer(&done, 200, &[], &tools_answer(&done.body["id"]));
        let next = c.sent();
        assert_eq!(next.len(), 1, "{next:?}");
        assert_eq!(next[0].body["id"], json!(waiting.0));
        running.extend(next);
    }
    assert!(c.sent().is_empty());
    for s in std::mem::take(&mut running) {
        c.answer(&s, 200, &[], &tools_answer(&s.body["id"]));
    }
    for &id in &ids {
        c.assert_answered(id);
    }
    assert!(c.aborted.is_empty());
}

/// A request that waits for its place and is cancelled, or times out, or is answered all
/// the same (a server that answers on its GET stream what it was never sent) is withdrawn:
/// neither it nor a cancellation for it goes out, and the host is never told to abort
/// anything of it.
#[test]
fn a_request_waiting_for_its_place_never_goes_out_once_it_ended() {
    let cap = mcpwire::http::MAX_RUNNING_REQUESTS;
    let (mut c, get, ids, mut running) = past_the_running_cap(cap + 4);
    assert_eq!(running.len(), cap);
    let (answered, promoted, cancelled, timed_out) =
        (ids[cap], ids[cap + 1], ids[cap + 2], ids[cap + 3]);
    let answer = tools_answer(&json!(answered.0));
    c.client
        .handle_body(c.now, get, format!("data: {answer}\n\n").as_bytes());
    c.events();
    c.assert_answered(answered);
    let done = running.remove(0);
    c.answer(&done, 200, &[], &tools_answer(&done.body["id"]));
    let next = c.sent();
    assert_eq!(next.len(), 1);
    assert_eq!(
        next[0].body["id"],
        json!(promoted.0),
        "the answered one was skipped"
    );
    running.extend(next);
    c.client
        .connection()
        .cancel(c.now, cancelled, Some("not now"))
        .unwrap();
    assert!(c.sent().is_empty(), "nothing goes out for it");
    // Every request times out: the running ones get their cancellations (at most
    // `MAX_RUNNING_NOTIFICATIONS` at a time, in order), the waiting one nothing.
    c.wait(Duration::from_secs(120));
    assert!(matches!(c.outcome(timed_out), Some(Ev::TimedOut { .. })));
    let mut cancels = Vec::new();
    loop {
        let sent = c.sent();
        if sent.is_empty() {
            break;
        }
        assert!(sent.len() <= mcpwire::http::MAX_RUNNING_NOTIFICATIONS);
        for s in &sent {
            c.answer(s, 202, &[], "");
        }
        cancels.extend(sent);
    }
    assert_eq!(cancels.len(), cap);
    for (s, running) in cancels.iter().zip(&running) {
        assert_eq!(s.body["method"], "notifications/cancelled");
        assert_eq!(s.body["params"]["requestId"], running.body["id"]);
    }
    // The running POSTs are let go after they linger; nothing else is aborted.
    c.wait(mcpwire::http::LINGER);
    assert!(c.sent().is_empty());
    let mut aborted = std::mem::take(&mut c.aborted);
    aborted.sort();
    let mut expected: Vec<ExchangeId> = running.iter().map(|s| s.exchange).collect();
    expected.sort();
    assert_eq!(aborted, expected);
    // A place is free again: a new request goes at once.
    let id = c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["id"], json!(id.0));
}

/// A request still waiting for its place when the session ends would go out after the
/// DELETE, with the ended session's id: it fails at once (404) and never goes out. The host
/// never had it, so a session that expires does not tell the host to abort it either.
#[test]
fn requests_waiting_for_their_place_fail_when_the_session_ends_or_expires() {
    let cap = mcpwire::http::MAX_RUNNING_REQUESTS;
    let (mut c, _get, ids, running) = past_the_running_cap(cap + 1);
    assert_eq!(running.len(), cap);
    c.client.end_session().expect("a session");
    let sent = c.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "DELETE");
    c.events();
    assert!(
        matches!(
            c.outcome(ids[cap]),
            Some(Ev::Failed {
                reason: TransportFailure::Status(404),
                ..
            })
        ),
        "{:?}",
        c.outcome(ids[cap])
    );
    c.answer(&sent[0], 200, &[], "");
    for s in &running {
        c.answer(s, 200, &[], &tools_answer(&s.body["id"]));
    }
    assert!(c.sent().is_empty());

    let (mut c, get, ids, running) = past_the_running_cap(cap + 1);
    c.expire(&running[0]);
    c.events();
    assert!(matches!(
        c.outcome(ids[cap]),
        Some(Ev::Failed {
            reason: TransportFailure::Status(404),
            ..
        })
    ));
    let sent = c.sent();
    assert!(
        sent.iter().all(|s| s.body["method"] == "initialize"),
        "{sent:?}"
    );
    let mut aborted = std::mem::take(&mut c.aborted);
    aborted.sort();
    let mut expected: Vec<ExchangeId> = running.iter().map(|s| s.exchange).collect();
    expected.push(get);
    expected.sort();
    assert_eq!(
        aborted, expected,
        "the GET stream and the running POSTs only"
    );
}

/// A request whose stream broke and waits to be resumed, cancelled meanwhile, gives back its
/// place among the `MAX_RUNNING_REQUESTS`: the waiting resumption was forgotten without it,
/// and after 256 such cancellations every new request waited for a place that never came,
/// until it timed out.
#[test]
fn a_cancelled_resumption_gives_back_its_place_among_the_running_requests() {
    let mut c = Scripted::new(legacy(client_config()), ReconnectPolicy::default());
    c.handshake(Some("s1"));
    for _ in 0..mcpwire::http::MAX_RUNNING_REQUESTS + 4 {
        let id = c.request("tools/call");
        let post = c.sent().remove(0);
        c.stream(&post, &[], "id: e1\nretry: 60000\ndata:\n\n");
        c.client.connection().cancel(c.now, id, None).unwrap();
        for s in c.sent() {
            assert_eq!(s.body["method"], "notifications/cancelled");
            c.answer(&s, 202, &[], "");
        }
    }
    let id = c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "the request waits for a place: {sent:?}");
    c.answer(&sent[0], 200, &[], &tools_answer(&sent[0].body["id"]));
    c.assert_answered(id);
    // The same when the waiting requests time out instead.
    for _ in 0..mcpwire::http::MAX_RUNNING_REQUESTS + 4 {
        let id = c.request("tools/call");
        let post = c.sent().remove(0);
        c.stream(&post, &[], "id: e1\nretry: 600000\ndata:\n\n");
        c.time_out(id);
    }
    let id = c.request("tools/list");
    let sent = c.sent();
    assert_eq!(sent.len(), 1, "the request waits for a place: {sent:?}");
    c.answer(&sent[0], 200, &[], &tools_answer(&sent[0].body["id"]));
    c.assert_answered(id);
}

/// The session's GET stream resumed from an event id the server does not know (400: one that
/// forgot it, or a replica of another version, which reads ids otherwise) is opened again
/// plainly. The session went on without a GET stream, hearing none of the server's requests
/// and notifications.
#[test]
fn a_get_stream_whose_resumption_is_refused_as_unknown_is_opened_again_plainly() {
    let (mut c, get) = with_open_get_stream();
    c.client
        .handle_body(c.now, get, b"id: g7-3\nretry: 10\ndata:\n\n");
    c.client.handle_end(c.now, get, 0);
    c.events();
    c.wait(Duration::from_secs(1));
    let resume = c.sent().remove(0);
    assert_eq!(resume.method, "GET");
    assert_eq!(resume.header("Last-Event-ID"), Some("g7-3"));
    c.answer(
        &resume,
        400,
        &[("Content-Type", "application/json")],
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"unknown Last-Event-ID"}}"#,
    );
    c.wait(Duration::from_secs(5));
    let again = c.sent();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].method, "GET");
    assert_eq!(again[0].header("Last-Event-ID"), None);
    assert_eq!(again[0].header("Mcp-Session-Id"), Some("s1"));
}

/// A server that answers every resumption with the event it was named, again, and closes:
/// the client has that event already, so it is no progress, and the stream gives up after
/// `max_attempts` resumptions like any that brings nothing. (The replayed event counted as
/// progress and reset the attempts: the client asked again at the server's `retry` until
/// the request timed out, and a session's GET stream, which has no timeout, for ever. Found
/// by a review of the client.)
#[test]
fn a_resumption_that_only_replays_the_named_event_is_no_progress() {
    let (mut c, id, post) = Scripted::in_session_with("tools/call");
    c.stream(&post, &[], "id: e1\nretry: 100\ndata:\n\n");
    let mut gets = 0;
    for _ in 0..600 {
        c.wait(Duration::from_millis(200));
        for s in c.sent() {
            if s.method == "GET" {
                gets += 1;
                c.stream(&s, &[], "id: e1\ndata:\n\n");
            }
        }
        if c.outcome(id).is_some() {
            break;
        }
    }
    assert_eq!(gets, ReconnectPolicy::default().max_attempts as usize);
    assert!(
        matches!(c.outcome(id), Some(Ev::Failed { .. })),
        "{:?}",
        c.events
    );
}

/// A server that takes each new session (its `initialized`, its GET stream), ends the GET
/// stream at once and answers its reopening 404: the client gives up after two such
/// sessions in a row, as it does when sessions are refused outright. (It started a new
/// session every second for ever, with nothing asked of any: the server's taking them
/// reset the count. Found by a review of the client.) A session the server keeps a while is
/// replaced every time: a client that only listens is not cut off by its server's restarts.
#[test]
fn sessions_forgotten_each_time_right_after_they_open_end_the_connection() {
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    let mut sessions = 0;
    for i in 0..50 {
        if c.client.connection().state() == mcpwire::conn::State::Closed {
            break;
        }
        c.handshake(Some(&format!("s{i}")));
        sessions += 1;
        let get = c.gets.remove(0);
        c.stream(&get, &[], ": hi\n\n");
        c.wait(Duration::from_secs(1));
        let Some(again) = c.sent().into_iter().find(|s| s.method == "GET") else {
            break;
        };
        c.expire(&again);
        c.events();
    }
    assert_eq!(sessions, 2, "{:?}", c.events);
    assert_eq!(
        c.client.connection().state(),
        mcpwire::conn::State::Closed,
        "{:?}",
        c.events
    );

    // The same sessions, each kept longer than the longest backoff before it is forgotten:
    // replaced every time.
    let mut c = Scripted::with_get(legacy(client_config()), ReconnectPolicy::default(), true);
    for i in 0..5 {
        c.handshake(Some(&format!("s{i}")));
        let get = c.gets.remove(0);
        c.stream(&get, &[("Content-Type", "text/event-stream")], ": hi\n\n");
        c.wait(Duration::from_secs(40));
        let again = c.sent().into_iter().find(|s| s.method == "GET").unwrap();
        c.expire(&again);
        c.events();
    }
    assert_ne!(c.client.connection().state(), mcpwire::conn::State::Closed);
}
