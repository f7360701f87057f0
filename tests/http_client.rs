//! The sans-IO HTTP client (`mcpwire::http::HttpClient`) against the sans-IO HTTP server, in
//! memory with simulated time: both eras, tool header annotations, expired sessions,
//! resumption after a closed stream, and failed exchanges.

mod common;

use std::time::Duration;

use common::pair::{Ev, client_config, legacy, server_config};
use mcpwire::Timestamp;
use mcpwire::conn::{CloseReason, Config, TransportFailure};
use mcpwire::http::{
    Body, ClientAction, ExchangeId, HttpClient, HttpRequest, HttpServer, HttpServerConfig,
    HttpStreamId, ReconnectPolicy,
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
        2,
        "the invalid tool is left out: {tools}"
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
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("Mcp-Method"), Some("tools/call"));
    assert_eq!(get("Mcp-Name"), Some("sql"));
    assert_eq!(get("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(
        get("Mcp-Param-Region"),
        Some("=?base64?SGVsbG8sIOS4lueVjA==?=")
    );
    assert_eq!(get("Mcp-Session-Id"), None);
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
        2
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

/// A session that expires while the host still runs its GET stream: the client tells the host
/// to abort that exchange instead of leaving it open beside the new session's.
#[test]
fn an_expired_session_aborts_the_exchanges_the_host_still_runs() {
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
    // Sends: (exchange, method, body). Drains events too, as a host does.
    let next = |c: &mut HttpClient| -> Option<(ExchangeId, String, Value, bool)> {
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
    };
    let (init, _, body, _) = next(&mut c).unwrap();
    assert_eq!(body["method"], "initialize");
    c.handle_response(t, init, 200, &json);
    let answer = json!({"jsonrpc":"2.0","id":body["id"],"result":{"protocolVersion":"2025-11-25",
        "capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}});
    c.handle_body(t, init, answer.to_string().as_bytes());
    c.handle_end(t, init, 0);
    // notifications/initialized, then the session's GET stream, which stays open.
    let mut get = None;
    while let Some((ex, method, body, abort)) = next(&mut c) {
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
    let get = get.expect("the GET stream was opened");
    // A request meets a 404: the session is gone.
    c.connection()
        .request(t, "tools/list", None)
        .expect("tools/list");
    let (list, _, _, _) = next(&mut c).unwrap();
    c.handle_response(t, list, 404, &[]);
    c.handle_end(t, list, 0);
    let mut aborted = Vec::new();
    let mut restarted = false;
    while let Some((ex, _, body, abort)) = next(&mut c) {
        if abort {
            aborted.push(ex);
        } else if body["method"] == "initialize" {
            restarted = true;
            break;
        }
    }
    assert_eq!(aborted, vec![get], "the old GET stream is aborted");
    assert!(restarted, "a new session starts");
}
