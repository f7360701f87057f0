//! The connection lifecycle, version negotiation and handshake-era gating, in simulated time.

mod common;

use std::time::Duration;

use common::pair::{Ev, Pair, client_config, drain, legacy, own, server_config, take_output};
use mcpwire::Timestamp;
use mcpwire::conn::{ClientEra, CloseReason, Config, Connection, Error, State, ViolationKind};
use mcpwire::jsonrpc::{Id, OwnedId, RawJson};
use mcpwire::mcp::{Caps, ProtocolVersion};

const T0: Timestamp = Timestamp::ZERO;

fn raw(s: &str) -> RawJson<'_> {
    RawJson::new(s).unwrap()
}

/// A server engine fed raw lines, returning what it wrote and its events.
struct RawServer {
    conn: Connection,
}

impl RawServer {
    fn new(config: Config) -> Self {
        RawServer {
            conn: Connection::new(config, T0).unwrap(),
        }
    }
    fn send(&mut self, line: &str) -> (Vec<serde_json::Value>, Vec<Ev>) {
        self.conn.handle_input(T0, format!("{line}\n").as_bytes());
        let out = take_output(&mut self.conn);
        let values = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (values, drain(&mut self.conn))
    }
    fn initialize(&mut self, version: &str) -> serde_json::Value {
        let (out, _) = self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{"roots":{{}}}},"clientInfo":{{"name":"raw","version":"0"}}}}}}"#
        ));
        assert_eq!(out.len(), 1);
        out[0].clone()
    }
}

#[test]
fn handshake_completes_in_every_legacy_version() {
    for version in ProtocolVersion::LEGACY {
        let p = Pair::ready(version, client_config(), server_config());
        assert_eq!(p.client.protocol_version(), Some(version));
        assert_eq!(p.server.protocol_version(), Some(version));
        assert_eq!(p.client.state(), State::Operating);
        assert_eq!(p.server.state(), State::Operating);
        let server_caps = p.client.peer_capabilities().unwrap();
        assert!(server_caps.has(Caps::TOOLS | Caps::RESOURCES_SUBSCRIBE | Caps::LOGGING));
        assert!(
            p.server
                .peer_capabilities()
                .unwrap()
                .has(Caps::ROOTS_LIST_CHANGED | Caps::SAMPLING)
        );
        assert_eq!(
            p.client.peer_info().unwrap().get(),
            r#"{"name":"test-server","version":"2.0.0"}"#
        );
        assert_eq!(
            p.server.peer_info().unwrap().get(),
            r#"{"name":"test-client","version":"1.0.0"}"#
        );
        assert_eq!(p.client.peer_instructions(), Some("be nice"));
    }
}

#[test]
fn the_wire_handshake_is_initialize_result_initialized() {
    let mut p = Pair::new(legacy(client_config()), server_config());
    p.step();
    let c = p.lines(true);
    let s = p.lines(false);
    assert_eq!(c.len(), 2, "{c:?}");
    let init: serde_json::Value = serde_json::from_str(&c[0]).unwrap();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["params"]["clientInfo"]["name"], "test-client");
    assert_eq!(
        c[1],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    let result: serde_json::Value = serde_json::from_str(&s[0]).unwrap();
    assert_eq!(result["id"], init["id"]);
    assert_eq!(result["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(result["result"]["instructions"], "be nice");
    assert_eq!(
        result["result"]["capabilities"]["resources"]["subscribe"],
        true
    );
}

#[test]
fn server_echoes_a_supported_version_and_otherwise_answers_its_latest() {
    for v in ProtocolVersion::LEGACY {
        let mut s = RawServer::new(server_config());
        let r = s.initialize(v.as_str());
        assert_eq!(r["result"]["protocolVersion"], v.as_str());
    }
    for offered in ["1999-01-01", "2099-12-31", "2026-07-28", "garbage"] {
        let mut s = RawServer::new(server_config());
        let r = s.initialize(offered);
        assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{offered}");
    }
    // A server configured for older versions only answers with its newest.
    let mut config = server_config();
    config.versions = vec![ProtocolVersion::V2024_11_05, ProtocolVersion::V2025_03_26];
    let mut s = RawServer::new(config);
    assert_eq!(
        s.initialize("2025-11-25")["result"]["protocolVersion"],
        "2025-03-26"
    );
}

#[test]
fn client_that_gets_an_unsupported_version_closes_with_a_clear_event() {
    let mut client = client_config();
    client.versions = vec![ProtocolVersion::V2025_11_25];
    let mut server = server_config();
    server.versions = vec![ProtocolVersion::V2024_11_05];
    let mut p = Pair::new(client, server);
    p.step();
    assert_eq!(
        p.client_events,
        vec![Ev::Closed {
            reason: CloseReason::UnsupportedVersion("2024-11-05".into())
        }]
    );
    assert_eq!(p.client.state(), State::Closed);
    assert_eq!(p.client.request(p.now, "ping", None), Err(Error::Closed));
    // The client never sent `initialized`.
    assert_eq!(p.lines(true).len(), 1);
}

/// 2026-07-28 has no handshake: an `initialize` answered with it is refused like any version
/// the client did not offer. (It was taken as negotiated, and the session then sent requests
/// without the `_meta` that version requires.)
#[test]
fn client_refuses_an_initialize_answered_with_the_stateless_version() {
    // Every version, both eras; `initialize` first (as after an auto-era probe fell back).
    let mut config = client_config();
    config.client_era = ClientEra::Legacy;
    let mut c = Connection::new(config, Timestamp::ZERO).unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&take_output(&mut c)).unwrap();
    assert_eq!(sent["method"], "initialize");
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"protocolVersion":"2026-07-28","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#,
        sent["id"]
    ) + "\n";
    c.handle_input(Timestamp::ZERO, answer.as_bytes());
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::UnsupportedVersion("2026-07-28".into())
        }]
    );
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn initialize_params_are_checked_case_sensitively_without_duplicates() {
    let bad = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"ProtocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":[],"clientInfo":{"name":"x","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tools":{}},"clientInfo":{"name":"x","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
        // clientInfo is an Implementation: a string name and version.
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":5,"version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1","version":"2"}}}"#,
    ];
    for line in bad {
        let mut s = RawServer::new(server_config());
        let (out, events) = s.send(line);
        assert_eq!(out[0]["error"]["code"], -32602, "{line}");
        assert_eq!(out[0]["id"], 1);
        assert!(events.iter().any(|e| matches!(
            e,
            Ev::Violation {
                kind: ViolationKind::InvalidParams,
                ..
            }
        )));
        assert_eq!(s.conn.state(), State::Initializing);
    }
}

#[test]
fn before_initialize_the_server_answers_only_ping() {
    let mut s = RawServer::new(server_config());
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    assert_eq!(
        out[0],
        serde_json::json!({"jsonrpc":"2.0","id":"p","result":{}})
    );
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert_eq!(out[0]["error"]["code"], -32600);
    assert_eq!(out[0]["id"], 2);
    assert!(matches!(
        events[0],
        Ev::Violation {
            kind: ViolationKind::BeforeInitialization,
            ..
        }
    ));
    // A notification that early is dropped, with no reply.
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
    assert!(out.is_empty());
    assert!(matches!(
        events[0],
        Ev::Violation {
            kind: ViolationKind::BeforeInitialization,
            ..
        }
    ));
    // `initialized` before `initialize` is a violation too.
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert!(out.is_empty());
    assert!(matches!(
        events[0],
        Ev::Violation {
            kind: ViolationKind::BeforeInitialization,
            ..
        }
    ));
}

#[test]
fn lenient_policy_lets_early_requests_through() {
    let mut config = server_config();
    config.policy.strict_lifecycle = false;
    let mut s = RawServer::new(config);
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert!(out.is_empty());
    assert!(matches!(&events[0], Ev::Request { method, .. } if method == "tools/list"));
}

#[test]
fn a_second_initialize_is_refused() {
    let mut s = RawServer::new(server_config());
    s.initialize("2025-11-25");
    let (out, events) = s.send(
        r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
    );
    assert_eq!(out[0]["error"]["code"], -32600);
    assert_eq!(out[0]["id"], 9);
    assert!(matches!(
        events[0],
        Ev::Violation {
            kind: ViolationKind::AlreadyInitialized,
            ..
        }
    ));
    assert_eq!(
        s.conn.protocol_version(),
        Some(ProtocolVersion::V2025_11_25)
    );
}

#[test]
fn server_sends_only_ping_and_logging_before_initialized() {
    let mut s = RawServer::new(server_config());
    s.initialize("2025-06-18");
    assert_eq!(s.conn.state(), State::Initializing);
    assert_eq!(
        s.conn.request(T0, "roots/list", None),
        Err(Error::NotInitialized)
    );
    assert_eq!(
        s.conn.notify("notifications/tools/list_changed", None),
        Err(Error::NotInitialized)
    );
    assert!(s.conn.request(T0, "ping", None).is_ok());
    assert!(
        s.conn
            .notify(
                "notifications/message",
                Some(raw(r#"{"level":"info","data":"hi"}"#))
            )
            .is_ok()
    );
    let (_, events) = s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(
        events,
        vec![Ev::Ready {
            version: ProtocolVersion::V2025_06_18
        }]
    );
    assert!(s.conn.request(T0, "roots/list", None).is_ok());
}

/// "The initialization phase MUST be the first interaction": before `initialize` arrives a
/// server sends nothing, not even a ping or a log. A dual-era server does not yet know
/// whether the client speaks 2026-07-28, where servers send no requests and log only within
/// one. Likewise a client whose `server/discover` probe is out does not know the era yet.
#[test]
fn nothing_goes_out_before_the_era_is_known() {
    let log = || Some(raw(r#"{"level":"info","data":"early"}"#));
    for config in [legacy(server_config()), server_config()] {
        let mut s = RawServer::new(config);
        assert_eq!(s.conn.request(T0, "ping", None), Err(Error::NotInitialized));
        assert_eq!(
            s.conn.notify("notifications/message", log()),
            Err(Error::NotInitialized)
        );
        assert!(take_output(&mut s.conn).is_empty());
        // Once `initialize` is answered, pings and logs may go before `initialized`.
        s.initialize("2025-11-25");
        assert!(s.conn.request(T0, "ping", None).is_ok());
        assert!(s.conn.notify("notifications/message", log()).is_ok());
    }
    // Not a matter of strictness: the lenient policy holds back too.
    let mut config = server_config();
    config.policy.strict_lifecycle = false;
    let mut s = RawServer::new(config);
    assert_eq!(s.conn.request(T0, "ping", None), Err(Error::NotInitialized));
    assert_eq!(
        s.conn.notify("notifications/tools/list_changed", None),
        Err(Error::NotInitialized)
    );
    // Nor through a ping the application answers itself: no log, no progress on it.
    let mut config = legacy(server_config());
    config.policy.answer_pings = false;
    let mut s = RawServer::new(config);
    s.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping","params":{"_meta":{"progressToken":1}}}"#);
    let ping = Id::Str(mcpwire::jsonrpc::JsonStr::from_raw("p").unwrap());
    assert_eq!(
        s.conn
            .log(ping, mcpwire::mcp::LogLevel::Info, None, raw("\"x\"")),
        Err(Error::NotInitialized)
    );
    assert_eq!(
        s.conn.progress(ping, 1.0, None, None),
        Err(Error::NotInitialized)
    );
    assert!(take_output(&mut s.conn).is_empty());
    s.conn.respond(ping, raw("{}")).unwrap();
    assert!(!take_output(&mut s.conn).is_empty(), "the ping is answered");
    for strict in [true, false] {
        let mut config = client_config();
        config.policy.strict_lifecycle = strict;
        let mut c = Connection::new(config, T0).unwrap();
        let probe = String::from_utf8(take_output(&mut c)).unwrap();
        assert!(probe.contains("server/discover"), "{probe}");
        assert_eq!(c.request(T0, "ping", None), Err(Error::NotInitialized));
        assert!(take_output(&mut c).is_empty());
    }
}

#[test]
fn client_sends_only_ping_before_the_result_and_accepts_only_ping_and_logging() {
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    assert_eq!(c.state(), State::Initializing);
    assert_eq!(
        c.request(T0, "tools/list", None),
        Err(Error::NotInitialized)
    );
    assert_eq!(
        c.notify("notifications/roots/list_changed", None),
        Err(Error::NotInitialized)
    );
    assert!(c.request(T0, "ping", None).is_ok());
    let init = take_output(&mut c);
    assert!(String::from_utf8_lossy(&init).contains("\"initialize\""));
    // The server pings and logs early: fine. A roots/list request: refused with -32600.
    c.handle_input(
        T0,
        br#"{"jsonrpc":"2.0","id":"s1","method":"ping"}
{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"early"}}
{"jsonrpc":"2.0","id":"s2","method":"roots/list"}
"#,
    );
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({"jsonrpc":"2.0","id":"s1","result":{}})
    );
    assert_eq!(lines[1]["id"], "s2");
    assert_eq!(lines[1]["error"]["code"], -32600);
    let events = drain(&mut c);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        matches!(&events[0], Ev::Notification { method, .. } if method == "notifications/message")
    );
    assert!(
        matches!(&events[1], Ev::Violation { kind: ViolationKind::BeforeInitialization, method: Some(m), .. } if m == "roots/list")
    );
}

#[test]
fn initialize_can_never_be_cancelled_and_is_engine_owned() {
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    // The initialize request has id 1.
    assert_eq!(
        c.cancel(T0, mcpwire::conn::RequestId(1), None),
        Err(Error::CannotCancelInitialize)
    );
    assert_eq!(c.request(T0, "initialize", None), Err(Error::EngineOwned));
    assert_eq!(
        c.notify("notifications/initialized", None),
        Err(Error::EngineOwned)
    );
    assert_eq!(
        c.notify("notifications/cancelled", None),
        Err(Error::EngineOwned)
    );
    // A peer's cancellation of initialize is ignored by the server.
    let mut s = RawServer::new(server_config());
    let (out, events) =
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}"#);
    assert!(out.is_empty() && events.is_empty());
}

#[test]
fn initialize_that_times_out_or_fails_closes_the_client() {
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    take_output(&mut c);
    let deadline = c.poll_timeout().unwrap();
    assert_eq!(deadline, T0.after(Duration::from_secs(60)));
    c.handle_timeout(T0.after(Duration::from_secs(59)));
    assert!(drain(&mut c).is_empty(), "an early timeout does nothing");
    c.handle_timeout(deadline);
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::InitializeTimedOut
        }]
    );
    assert_eq!(c.poll_timeout(), None);

    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    take_output(&mut c);
    c.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"no \\\"roots\\\" \\u00e9\"}}\n",
    );
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::InitializeRejected {
                code: -32602,
                message: "no \"roots\" \u{e9}".into()
            }
        }]
    );

    // A message past the bound is cut on a character boundary.
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    take_output(&mut c);
    let long = format!("a{}", "\u{e9}".repeat(mcpwire::conn::REFUSAL_MESSAGE_MAX));
    c.handle_input(
        T0,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{{\"code\":-32000,\"message\":\"{long}\"}}}}\n"
        )
        .as_bytes(),
    );
    let cut = &long[..mcpwire::conn::REFUSAL_MESSAGE_MAX - 1];
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::InitializeRejected {
                code: -32000,
                message: cut.into()
            }
        }]
    );

    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    take_output(&mut c);
    c.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\"}}\n",
    );
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::InvalidInitializeResult
        }]
    );
}

#[test]
fn graceful_close_waits_for_requests_in_flight_up_to_the_deadline() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    let b = p.client.request(p.now, "prompts/list", None).unwrap();
    p.step();
    p.client.close(p.now, Duration::from_secs(5));
    assert_eq!(p.client.state(), State::Closing);
    assert_eq!(
        p.client.request(p.now, "tools/list", None),
        Err(Error::Closing)
    );
    assert_eq!(
        p.client.notify("notifications/roots/list_changed", None),
        Err(Error::Closing)
    );
    // The server answers one; the client stays open for the other.
    let reqs = p.take_server_events();
    let Ev::Request { id, .. } = &reqs[0] else {
        panic!("{reqs:?}")
    };
    let Ev::Request { id: unanswered, .. } = &reqs[1] else {
        panic!("{reqs:?}")
    };
    let unanswered = unanswered.clone();
    p.server
        .respond(id.as_id(), raw(r#"{"tools":[]}"#))
        .unwrap();
    p.step();
    assert_eq!(
        p.take_client_events(),
        vec![Ev::Response {
            request: a,
            result: r#"{"tools":[]}"#.into()
        }]
    );
    assert_eq!(p.client.state(), State::Closing);
    // The grace period runs out.
    p.advance(Duration::from_secs(5));
    assert_eq!(
        p.take_client_events(),
        vec![
            Ev::Abandoned { request: b },
            Ev::Closed {
                reason: CloseReason::Local
            }
        ]
    );
    assert_eq!(p.client.state(), State::Closed);
    assert_eq!(p.client.poll_timeout(), None);
    // The server was told the client stopped waiting (the spec's SHOULD for a request given
    // up on), so it can stop working on it.
    assert_eq!(
        p.take_server_events(),
        vec![Ev::PeerCancelled {
            id: unanswered,
            reason: Some("shutting down".into())
        }]
    );
}

/// `Closed` is the last event, and nothing is written after it, however the connection
/// closed (found by a review of the connection core):
/// - a client whose output is full when the `initialize` result comes closes (no room for
///   `initialized`), and `Ready` no longer follows `Closed`;
/// - a 2025-03-26 batch whose first member is the last answer a graceful close waited for is
///   read to its end before the close ends: its invalid member is reported and answered
///   before `Closed` (they came after it; then they were ignored; now the close waits for
///   the batch, so that a request in it is not left unanswered).
#[test]
fn closed_is_the_last_event_and_nothing_is_written_after_it() {
    let mut config = legacy(client_config());
    config.limits.max_buffered_output = 4096;
    let mut client = Connection::new(config, Timestamp::ZERO).unwrap();
    let first = client.poll_transmit().map(|t| t.bytes.to_vec()).unwrap();
    let init: serde_json::Value =
        serde_json::from_slice(first.split(|&b| b == b'\n').next().unwrap()).unwrap();
    // The server sends lines the client cannot read (each answered -32700) until the
    // client's output holds its bound, then the result.
    while client.poll_transmit().map_or(0, |t| t.bytes.len()) < 4096 {
        client.handle_input(Timestamp::ZERO, b"x\n");
    }
    let result = serde_json::json!({"jsonrpc":"2.0","id":init["id"],"result":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "serverInfo":{"name":"s","version":"1"}}});
    client.handle_input(Timestamp::ZERO, format!("{result}\n").as_bytes());
    let events = drain(&mut client);
    assert_eq!(
        events.last(),
        Some(&Ev::Closed {
            reason: CloseReason::PeerNotReading
        }),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Ready { .. })),
        "{events:?}"
    );

    let mut p = Pair::ready(
        ProtocolVersion::V2025_03_26,
        client_config(),
        server_config(),
    );
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    p.step();
    p.take_server_events();
    p.client.close(p.now, Duration::from_secs(5));
    p.step();
    take_output(&mut p.client);
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","id":{},"result":{{"tools":[]}}}},1]"#,
        a.0
    );
    p.client
        .handle_input(p.now, format!("{batch}\n").as_bytes());
    let events = drain(&mut p.client);
    assert_eq!(
        events.last(),
        Some(&Ev::Closed {
            reason: CloseReason::Local
        }),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, Ev::Violation { .. })),
        "the invalid member is reported before the close: {events:?}"
    );
    let out = String::from_utf8(take_output(&mut p.client)).unwrap();
    let array: serde_json::Value = serde_json::from_str(out.trim_end()).expect(&out);
    assert_eq!(array[0]["error"]["code"], -32600, "{out}");
    assert!(
        take_output(&mut p.client).is_empty(),
        "nothing written after the close"
    );

    // - a batch where batches are not allowed, whose answer to `initialize` ends the client
    //   (an answer in a batch is invalid there): its -32600 was still written after `Closed`.
    let mut client = Connection::new(legacy(client_config()), Timestamp::ZERO).unwrap();
    let first = take_output(&mut client);
    let init: serde_json::Value =
        serde_json::from_slice(first.split(|&b| b == b'\n').next().unwrap()).unwrap();
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","id":{},"result":{{}}}},{{"jsonrpc":"2.0","id":"s","method":"ping"}}]"#,
        init["id"]
    );
    client.handle_input(Timestamp::ZERO, format!("{batch}\n").as_bytes());
    let events = drain(&mut client);
    assert!(
        matches!(events.last(), Some(Ev::Closed { .. })),
        "{events:?}"
    );
    assert!(
        take_output(&mut client).is_empty(),
        "written after the close"
    );
}

#[test]
fn close_with_nothing_in_flight_is_immediate() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_03_26,
        client_config(),
        server_config(),
    );
    p.client.close(p.now, Duration::from_secs(5));
    assert_eq!(
        p.take_client_events_now(),
        vec![Ev::Closed {
            reason: CloseReason::Local
        }]
    );
}

/// A graceful close whose grace runs out answers the peer's requests still in flight with
/// -32603: nobody will answer them now, and the peer waited for its own timeout. In a
/// 2025-03-26 batch that also sends the answers the application already gave (`respond`
/// said `Ok`, and they were lost with the batch; found by a review of the correlation
/// layer).
#[test]
fn a_close_answers_what_the_peer_still_awaits_and_sends_a_batchs_answers() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_03_26,
        client_config(),
        server_config(),
    );
    p.server.handle_input(
        p.now,
        concat!(
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"prompts/list"}]"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#,
            "\n"
        )
        .as_bytes(),
    );
    assert_eq!(drain(&mut p.server).len(), 3);
    p.server
        .respond(Id::Int(1), RawJson::new(r#"{"tools":[]}"#).unwrap())
        .unwrap();
    assert!(take_output(&mut p.server).is_empty(), "the array waits");
    p.server.close(p.now, Duration::from_secs(5));
    assert_eq!(p.server.state(), State::Closing, "the grace is for them");
    let end = p.now.after(Duration::from_secs(5));
    assert_eq!(p.server.poll_timeout(), Some(end));
    p.server.handle_timeout(end);
    assert_eq!(
        drain(&mut p.server).last(),
        Some(&Ev::Closed {
            reason: CloseReason::Local
        })
    );
    let out = String::from_utf8(take_output(&mut p.server)).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let batch = lines
        .iter()
        .find(|v| v.is_array())
        .expect("the batch's array");
    assert_eq!(batch[0]["id"], 1);
    assert_eq!(batch[0]["result"]["tools"], serde_json::json!([]));
    assert_eq!(batch[1]["id"], 2);
    assert_eq!(batch[1]["error"]["code"], -32603);
    let lone = lines
        .iter()
        .find(|v| v["id"] == 3)
        .expect("the lone request's answer");
    assert_eq!(lone["error"]["code"], -32603);

    // A batch read while closing, holding a request and the answer to the last request of
    // ours: the close now waits for the request's answer, and the array goes out with it.
    let mut p = Pair::ready(
        ProtocolVersion::V2025_03_26,
        client_config(),
        server_config(),
    );
    let ours = p.server.request(p.now, "roots/list", None).unwrap();
    take_output(&mut p.server);
    p.server.close(p.now, Duration::from_secs(5));
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","id":7,"method":"tools/list"}},{{"jsonrpc":"2.0","id":{},"result":{{"roots":[]}}}}]"#,
        ours.0
    );
    p.server
        .handle_input(p.now, format!("{batch}\n").as_bytes());
    assert!(matches!(
        drain(&mut p.server).as_slice(),
        [Ev::Request { .. }, Ev::Response { .. }]
    ));
    assert_eq!(p.server.state(), State::Closing);
    p.server
        .respond(Id::Int(7), RawJson::new(r#"{"tools":[]}"#).unwrap())
        .unwrap();
    assert_eq!(
        drain(&mut p.server),
        [Ev::Closed {
            reason: CloseReason::Local
        }]
    );
    let out = String::from_utf8(take_output(&mut p.server)).unwrap();
    let array: serde_json::Value = serde_json::from_str(out.trim_end()).expect(&out);
    assert_eq!(array[0]["id"], 7);
    assert_eq!(array[0]["result"]["tools"], serde_json::json!([]));
}

/// A 2025-03-26 batch read during a close, whose first member cancels the last request the
/// close waited for: the request after it is still handed out and answered, and the close
/// ends after that. The close ended at the cancel, and the request was never read nor
/// answered (found by a review of the close's change).
#[test]
fn a_batch_that_ends_what_a_close_waited_for_is_read_to_its_end() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_03_26,
        client_config(),
        server_config(),
    );
    p.server.handle_input(
        p.now,
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}\n",
    );
    assert_eq!(drain(&mut p.server).len(), 1);
    p.server.close(p.now, Duration::from_secs(5));
    assert_eq!(p.server.state(), State::Closing);
    p.server.handle_input(
        p.now,
        concat!(
            r#"[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}},"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"prompts/list"}]"#,
            "\n"
        )
        .as_bytes(),
    );
    let events = drain(&mut p.server);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ev::Request { method, .. } if method == "prompts/list")),
        "{events:?}"
    );
    assert_eq!(p.server.state(), State::Closing);
    p.server
        .respond(Id::Int(7), RawJson::new(r#"{"prompts":[]}"#).unwrap())
        .unwrap();
    assert_eq!(p.server.state(), State::Closed);
    let out = String::from_utf8(take_output(&mut p.server)).unwrap();
    let array: serde_json::Value = serde_json::from_str(out.trim_end()).expect(&out);
    assert_eq!(array[0]["id"], 7);
    assert_eq!(array[0]["result"]["prompts"], serde_json::json!([]));
}

/// `refuse_peer_requests` answers every request of the peer's in flight with -32603 and its
/// message: a close then waits only for ours, and ends at once without them.
#[test]
fn refusing_the_peers_requests_lets_a_close_end_at_once() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    p.client.request(p.now, "tools/list", None).unwrap();
    p.client.request(p.now, "prompts/list", None).unwrap();
    p.step();
    assert_eq!(p.take_server_events().len(), 2);
    assert_eq!(p.server.refuse_peer_requests("stopping"), 2);
    assert_eq!(p.server.refuse_peer_requests("stopping"), 0, "none left");
    p.server.close(p.now, Duration::from_secs(5));
    assert_eq!(p.server.state(), State::Closed);
    let out = String::from_utf8(take_output(&mut p.server)).unwrap();
    let refusals: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(refusals.len(), 2, "{out}");
    assert!(
        refusals
            .iter()
            .all(|r| r["error"]["code"] == -32603 && r["error"]["message"] == "stopping"),
        "{out}"
    );
}

/// A graceful close gives the peer's requests the grace too: a server with none of its own
/// out (the common case) answered every tool call in flight with -32603 within `close`, and
/// the application's answer a moment later was refused (found by a review of the Go `Serve`
/// loop, whose cancellation "closes gracefully"). The close ends with the last answer; one
/// the peer cancels counts as answered.
#[test]
fn a_graceful_close_waits_for_the_answers_to_the_peers_requests() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    let b = p.client.request(p.now, "prompts/list", None).unwrap();
    p.step();
    assert_eq!(p.take_server_events().len(), 2);
    p.server.close(p.now, Duration::from_secs(5));
    assert_eq!(p.server.state(), State::Closing);
    p.advance(Duration::from_millis(100));
    p.server
        .respond(Id::Int(a.0), RawJson::new(r#"{"tools":[]}"#).unwrap())
        .unwrap();
    assert_eq!(p.server.state(), State::Closing, "b is still awaited");
    p.client.cancel(p.now, b, Some("not needed")).unwrap();
    p.step();
    assert_eq!(p.server.state(), State::Closed);
    assert!(
        p.take_client_events()
            .iter()
            .any(|e| matches!(e, Ev::Response { request, .. } if *request == a)),
        "the answer given within the grace reached the client"
    );
}

/// A close with no grace cancels what is in flight and closes at once: the cancellations are
/// in the output when `close` returns. They waited for a timer at "now", which a host that
/// writes out its output and stops never ran (the Go HTTP client's `Shutdown(now, 0)` then
/// `Close` sent none).
#[test]
fn a_close_with_no_grace_cancels_what_is_in_flight_at_once() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    p.step();
    assert!(matches!(&p.take_server_events()[..], [Ev::Request { .. }]));
    p.client.close(p.now, Duration::ZERO);
    assert_eq!(p.client.state(), State::Closed);
    assert_eq!(
        p.take_client_events_now(),
        vec![
            Ev::Abandoned { request: a },
            Ev::Closed {
                reason: CloseReason::Local
            }
        ]
    );
    let out = String::from_utf8(common::pair::take_output(&mut p.client)).unwrap();
    assert!(
        out.contains(r#""method":"notifications/cancelled""#) && out.contains("shutting down"),
        "{out}"
    );
    assert_eq!(p.client.poll_timeout(), None);
}

/// A close asked again with a sooner end ends sooner: a host told to stop (its context
/// cancelled) while the application's own close, with an hour of grace, waits for a request
/// the server never answers. The first deadline stood, and the host waited the hour. A later
/// end changes nothing.
#[test]
fn a_second_close_may_end_sooner_never_later() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    let hour = Duration::from_secs(3600);
    let long = mcpwire::conn::RequestOptions {
        timeout: Some(hour * 4),
        ..Default::default()
    };
    p.client
        .request_with(p.now, "tools/list", None, long)
        .unwrap();
    p.step();
    p.client.close(p.now, hour);
    assert_eq!(p.client.poll_timeout(), Some(p.now.after(hour)));
    p.client.close(p.now, hour * 2);
    assert_eq!(p.client.poll_timeout(), Some(p.now.after(hour)));
    let soon = Duration::from_millis(100);
    p.client.close(p.now, soon);
    assert_eq!(p.client.poll_timeout(), Some(p.now.after(soon)));
    p.client.handle_timeout(p.now.after(soon));
    assert_eq!(p.client.state(), State::Closed);
    // With no grace, within the call.
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    p.client
        .request_with(p.now, "tools/list", None, long)
        .unwrap();
    p.step();
    p.client.close(p.now, hour);
    p.client.close(p.now, Duration::ZERO);
    assert_eq!(p.client.state(), State::Closed);
    assert_eq!(p.client.poll_timeout(), None);
}

trait Now {
    fn take_client_events_now(&mut self) -> Vec<Ev>;
}
impl Now for Pair {
    fn take_client_events_now(&mut self) -> Vec<Ev> {
        drain(&mut self.client)
    }
}

#[test]
fn eof_abandons_requests_and_closes() {
    let mut p = Pair::ready(
        ProtocolVersion::V2024_11_05,
        client_config(),
        server_config(),
    );
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    p.client.handle_eof(p.now);
    assert_eq!(
        drain(&mut p.client),
        vec![
            Ev::Abandoned { request: a },
            Ev::Closed {
                reason: CloseReason::Eof
            }
        ]
    );
    // Nothing more is accepted or sent.
    p.client.handle_input(
        p.now,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
    );
    assert!(
        p.client.poll_transmit().is_some(),
        "the request written before EOF is still there"
    );
    take_output(&mut p.client);
    assert!(drain(&mut p.client).is_empty());
    assert_eq!(p.client.respond(Id::Int(1), raw("{}")), Err(Error::Closed));
}

#[test]
fn eof_processes_a_last_unterminated_line() {
    let mut s = RawServer::new(server_config());
    s.conn
        .handle_input(T0, br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    assert!(take_output(&mut s.conn).is_empty());
    s.conn.handle_eof(T0);
    let out = String::from_utf8(take_output(&mut s.conn)).unwrap();
    assert_eq!(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n");
    assert_eq!(
        drain(&mut s.conn),
        vec![Ev::Closed {
            reason: CloseReason::Eof
        }]
    );
}

#[test]
fn a_request_on_a_last_unterminated_line_can_be_answered() {
    // `printf '%s' '{...}' | server`: the line is processed at end of input, and its request
    // is answered like any other; the connection closes once its events are out.
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    take_output(&mut p.server);
    p.server.handle_input(
        p.now,
        br#"{"jsonrpc":"2.0","id":"last","method":"tools/list"}"#,
    );
    assert!(drain(&mut p.server).is_empty());
    p.server.handle_eof(p.now);
    // Not due while its event waits: a host holding events back (its output full) would
    // find the deadline always due, and spin. (`Pair::ready` leaves no timer of its own.)
    assert_eq!(p.server.poll_timeout(), None);
    p.server.handle_timeout(p.now);
    let id = match p.server.poll_event().map(own) {
        Some(Ev::Request { id, method, .. }) => {
            assert_eq!(method, "tools/list");
            assert_eq!(id.to_string(), r#""last""#);
            id
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(p.server.respond(id.as_id(), raw(r#"{"tools":[]}"#)), Ok(()));
    // The end of input is due now, and closes at the next timer call.
    assert!(drain(&mut p.server).is_empty());
    assert_eq!(p.server.poll_timeout(), Some(Timestamp::ZERO));
    p.server.handle_timeout(p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![Ev::Closed {
            reason: CloseReason::Eof
        }]
    );
    let out = String::from_utf8(take_output(&mut p.server)).unwrap();
    assert_eq!(
        out,
        "{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"result\":{\"tools\":[]}}\n"
    );
    // A second end of input changes nothing.
    p.server.handle_eof(p.now);
    assert!(drain(&mut p.server).is_empty());
}

#[test]
fn methods_follow_the_negotiated_version() {
    use ProtocolVersion::*;
    // elicitation/create exists from 2025-06-18.
    let mut p = Pair::ready(V2025_03_26, client_config(), server_config());
    assert_eq!(
        p.server.request(p.now, "elicitation/create", None),
        Err(Error::NotInVersion)
    );
    let mut p = Pair::ready(V2025_06_18, client_config(), server_config());
    assert!(
        p.server
            .request(
                p.now,
                "elicitation/create",
                Some(raw(
                    r#"{"message":"m","requestedSchema":{"type":"object","properties":{}}}"#
                ))
            )
            .is_ok()
    );
    p.step();
    assert!(
        matches!(&p.client_events[0], Ev::Request { method, .. } if method == "elicitation/create")
    );
    // tasks/* only in 2025-11-25, and only when the receiver declared tasks.
    let mut p = Pair::ready(V2025_06_18, client_config(), server_config());
    assert_eq!(
        p.client.request(p.now, "tasks/list", None),
        Err(Error::NotInVersion)
    );
    let mut p = Pair::ready(V2025_11_25, client_config(), server_config());
    assert_eq!(
        p.client.request(p.now, "tasks/list", None),
        Err(Error::NotNegotiated(Caps::TASKS_LIST))
    );
    // server/discover does not exist in the handshake era.
    assert_eq!(
        p.client.request(p.now, "server/discover", None),
        Err(Error::NotInVersion)
    );
}

#[test]
fn our_api_refuses_what_the_peer_did_not_negotiate() {
    let mut server = Config::server("bare", "1")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    server.instructions = None;
    let client = Config::client("bare", "1");
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client, server);
    assert_eq!(
        p.client
            .request(p.now, "resources/subscribe", Some(raw(r#"{"uri":"x"}"#))),
        Err(Error::NotNegotiated(Caps::RESOURCES_SUBSCRIBE))
    );
    assert_eq!(
        p.client.request(p.now, "prompts/list", None),
        Err(Error::NotNegotiated(Caps::PROMPTS))
    );
    assert_eq!(
        p.client
            .request(p.now, "logging/setLevel", Some(raw(r#"{"level":"info"}"#))),
        Err(Error::NotNegotiated(Caps::LOGGING))
    );
    assert!(p.client.request(p.now, "tools/list", None).is_ok());
    // The client declared nothing: the server may not sample, list roots or elicit.
    assert_eq!(
        p.server
            .request(p.now, "sampling/createMessage", Some(raw("{}"))),
        Err(Error::NotNegotiated(Caps::SAMPLING))
    );
    assert_eq!(
        p.server.request(p.now, "roots/list", None),
        Err(Error::NotNegotiated(Caps::ROOTS))
    );
    // Notifications are gated by the sender's own capabilities.
    assert_eq!(
        p.server.notify("notifications/tools/list_changed", None),
        Err(Error::NotNegotiated(Caps::TOOLS_LIST_CHANGED))
    );
    assert_eq!(
        p.server.notify(
            "notifications/message",
            Some(raw(r#"{"level":"info","data":1}"#))
        ),
        Err(Error::NotNegotiated(Caps::LOGGING))
    );
    assert_eq!(
        p.client.notify("notifications/roots/list_changed", None),
        Err(Error::NotNegotiated(Caps::ROOTS_LIST_CHANGED))
    );
    // Wrong direction.
    assert_eq!(
        p.client.request(p.now, "roots/list", None),
        Err(Error::WrongDirection)
    );
    assert_eq!(
        p.server.request(p.now, "tools/call", Some(raw("{}"))),
        Err(Error::WrongDirection)
    );
    // Custom methods are the application's business.
    assert!(p.client.request(p.now, "x-vendor/thing", None).is_ok());
    // Params must be objects.
    assert_eq!(
        p.client.request(p.now, "tools/list", Some(raw("[1]"))),
        Err(Error::InvalidParams)
    );
}

#[test]
fn incoming_requests_we_did_not_declare_get_method_not_found_and_never_reach_the_app() {
    let server = Config::server("bare", "1")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let mut s = RawServer::new(server);
    s.initialize("2025-11-25");
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (i, method) in [
        "resources/list",
        "prompts/get",
        "logging/setLevel",
        "completion/complete",
        "resources/subscribe",
        "sampling/createMessage",
        "tasks/get",
        "server/discover",
    ]
    .iter()
    .enumerate()
    {
        let (out, events) = s.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"{method}","params":{{}}}}"#
        ));
        assert_eq!(out[0]["error"]["code"], -32601, "{method}");
        assert_eq!(out[0]["id"], i);
        assert_eq!(events.len(), 1);
        assert!(
            matches!(&events[0], Ev::Violation { kind: ViolationKind::MethodNotAvailable, method: Some(m), .. } if m == method)
        );
    }
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","id":"t","method":"tools/list"}"#);
    assert!(out.is_empty());
    assert!(
        matches!(&events[0], Ev::Request { id, method, .. } if *id == OwnedId::from(Id::Int(0)) || method == "tools/list")
    );
    // Notifications the sender was not entitled to send are dropped.
    let mut c = Connection::new(legacy(Config::client("c", "1")), T0).unwrap();
    take_output(&mut c);
    c.handle_input(T0, br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x"}}
{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}
{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1}}
"#);
    let events = drain(&mut c);
    assert_eq!(
        events[0],
        Ev::Ready {
            version: ProtocolVersion::V2025_11_25
        }
    );
    assert_eq!(events.len(), 4);
    for e in &events[1..] {
        assert!(
            matches!(
                e,
                Ev::Violation {
                    kind: ViolationKind::NotificationNotAllowed,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

#[test]
fn keys_the_engine_reads_are_exact_and_unique() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    // A progress token under a case variant of _meta is not a progress token.
    p.client.handle_input(p.now, b"");
    let mut s = RawServer::new(server_config());
    s.initialize("2025-11-25");
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let (_, events) = s.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_META":{"progressToken":"t"},"name":"x"}}"#);
    assert!(matches!(&events[0], Ev::Request { .. }));
    assert_eq!(
        s.conn.progress(Id::Int(1), 1.0, None, None),
        Err(Error::NoProgressToken)
    );
    // Duplicated _meta or progressToken is refused with -32602.
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"a","progressToken":"b"},"name":"x"}}"#);
    assert_eq!(out[0]["error"]["code"], -32602);
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{},"_meta":{"progressToken":"b"},"name":"x"}}"#);
    assert_eq!(out[0]["error"]["code"], -32602);
    let _ = &mut p;
}

/// Every schema's `Implementation` requires string `name` and `version`: a connection whose
/// own info lacks them was made, and a peer then refused its `initialize` (-32602) or read a
/// schema-invalid `serverInfo`.
#[test]
fn our_own_info_needs_a_string_name_and_version() {
    for info in [
        r#"{"title":"x"}"#,
        r#"{"name":"n"}"#,
        r#"{"name":"n","version":1}"#,
        "[]",
    ] {
        let mut config = client_config();
        config.info = info.into();
        assert!(Connection::new(config, T0).is_err(), "{info}");
    }
    let mut config = client_config();
    config.info = r#"{"name":"n","version":"1","title":"T"}"#.into();
    assert!(Connection::new(config, T0).is_ok());
}

/// Our own capabilities are held to the schema's types even when set with the lenient
/// parser: `"tools":true` was counted as declared and sent as it was, schema-invalid.
#[test]
fn our_own_capabilities_set_leniently_are_still_checked() {
    let mut config = server_config();
    config.capabilities = mcpwire::mcp::Capabilities::parse(r#"{"tools":true}"#).unwrap();
    assert!(Connection::new(config, T0).is_err());
    let mut config = server_config();
    config.capabilities = mcpwire::mcp::Capabilities::parse(r#"{"tools":{}}"#).unwrap();
    assert!(Connection::new(config, T0).is_ok());
}

/// A close begun before the handshake ended keeps its early rules: what the server sends
/// before its `initialize` result is still refused. The close let everything in, and a
/// server's `roots/list` or `tools/list_changed` reached the application.
#[test]
fn a_client_closing_before_the_initialize_result_still_refuses_early_messages() {
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    assert!(String::from_utf8_lossy(&take_output(&mut c)).contains("\"initialize\""));
    c.close(T0, Duration::from_secs(5));
    assert_eq!(c.state(), State::Closing);
    c.handle_input(
        T0,
        br#"{"jsonrpc":"2.0","id":"s2","method":"roots/list"}
{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}
"#,
    );
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    let answer: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(answer["id"], "s2");
    assert_eq!(answer["error"]["code"], -32600, "{out}");
    let events = drain(&mut c);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Ev::Request { .. } | Ev::Notification { .. })),
        "{events:?}"
    );
}

/// A server's close begun while it awaited `notifications/initialized`, with a client request
/// in flight (HTTP may reorder POSTs): the late `initialized` ends the handshake quietly. It
/// was a `BeforeInitialization` violation.
#[test]
fn initialized_during_a_close_begun_before_it_is_no_violation() {
    let mut s = Connection::new(legacy(server_config()), T0).unwrap();
    s.handle_input(
        T0,
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}
{"jsonrpc":"2.0","id":1,"method":"tools/list"}
"#,
    );
    take_output(&mut s);
    let events = drain(&mut s);
    let Some(Ev::Request { id, .. }) = events.into_iter().next() else {
        panic!("the request")
    };
    s.close(T0, Duration::from_secs(5));
    s.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
    );
    let events = drain(&mut s);
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Violation { .. })),
        "{events:?}"
    );
    s.respond(id.as_id(), RawJson::new(r#"{"tools":[]}"#).unwrap())
        .unwrap();
    assert_eq!(s.state(), State::Closed);
}
