//! The 2026-07-28 stateless era and dual-era operation, in simulated time.

mod common;

use std::time::Duration;

use common::pair::{Ev, Pair, client_config, drain, legacy, modern, server_config, take_output};
use mcpwire::Timestamp;
use mcpwire::conn::{ClientEra, CloseReason, Config, Connection, Error, State, ViolationKind};
use mcpwire::jsonrpc::{Id, RawJson};
use mcpwire::mcp::{self, Caps, Era, LogLevel, ProtocolVersion};
use serde_json::{Value, json};

const T0: Timestamp = Timestamp::ZERO;
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;

fn raw(s: &str) -> RawJson<'_> {
    RawJson::new(s).unwrap()
}

struct Raw {
    conn: Connection,
}

impl Raw {
    fn server(config: Config) -> Raw {
        Raw {
            conn: Connection::new(config, T0).unwrap(),
        }
    }
    fn send(&mut self, line: &str) -> (Vec<Value>, Vec<Ev>) {
        self.conn.handle_input(T0, format!("{line}\n").as_bytes());
        let out = take_output(&mut self.conn);
        let values = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (values, drain(&mut self.conn))
    }
    fn out(&mut self) -> Vec<Value> {
        let out = take_output(&mut self.conn);
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    /// A stateless request line with our standard `_meta` plus `extra` params.
    fn request(&mut self, id: &str, method: &str, extra: &str) -> (Vec<Value>, Vec<Ev>) {
        let sep = if extra.is_empty() { "" } else { "," };
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{META}{sep}{extra}}}}}"#
        ))
    }
}

fn modern_server() -> Raw {
    Raw::server(server_config())
}

// ---- Server: per-request checks --------------------------------------------------------------

#[test]
fn server_discover_is_answered_from_configuration() {
    let mut config = server_config();
    config.discover_ttl = Duration::from_secs(60);
    config.discover_cache_scope = mcpwire::conn::CacheScope::Public;
    let mut s = Raw::server(config);
    let (out, events) = s.request("\"d1\"", "server/discover", "");
    assert_eq!(
        events,
        vec![Ev::Ready {
            version: ProtocolVersion::V2026_07_28
        }]
    );
    let r = &out[0]["result"];
    assert_eq!(out[0]["id"], "d1");
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(r["capabilities"]["resources"]["subscribe"], true);
    assert_eq!(r["instructions"], "be nice");
    assert_eq!(r["ttlMs"], 60000);
    assert_eq!(r["cacheScope"], "public");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "test-server"
    );
    assert_eq!(s.conn.era(), Some(Era::Modern));
    assert_eq!(s.conn.state(), State::Operating);
}

/// A cache lifetime past what JSON readers keep as an integer (`Duration::MAX` was written
/// as 18446744073709551615999) is sent as the largest they keep, 2^53 - 1 ms.
#[test]
fn server_discover_ttl_is_sent_as_an_integer_readers_keep() {
    let mut config = server_config();
    config.discover_ttl = Duration::MAX;
    let mut s = Raw::server(config);
    let (out, _) = s.request("\"d1\"", "server/discover", "");
    assert_eq!(out[0]["result"]["ttlMs"].as_u64(), Some((1 << 53) - 1));
}

#[test]
fn required_meta_keys_are_checked_on_every_request() {
    let mut s = modern_server();
    s.request("0", "server/discover", "");
    let cases = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        // clientInfo is optional, but when sent it is an Implementation: name and version.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x"}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x","version":1}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":"x"}}}"#,
    ];
    for line in cases {
        let (out, events) = s.send(line);
        assert_eq!(out[0]["error"]["code"], -32602, "{line}");
        assert_eq!(out[0]["id"], 1);
        assert!(matches!(
            events[0],
            Ev::Violation {
                kind: ViolationKind::InvalidParams,
                ..
            }
        ));
    }
    // Every request stands alone: a valid one right after works.
    let (out, events) = s.request("2", "tools/list", "");
    assert!(out.is_empty());
    assert!(matches!(&events[0], Ev::Request { method, .. } if method == "tools/list"));
    // With a whole clientInfo, and members the schema adds, it is accepted.
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1","title":"X"}}}}"#);
    assert!(out.is_empty(), "{out:?}");
    assert!(matches!(&events[0], Ev::Request { method, .. } if method == "tools/list"));
}

#[test]
fn an_unsupported_version_gets_32022_with_the_supported_list() {
    let mut s = modern_server();
    let (out, events) = s.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
    assert_eq!(out[0]["error"]["code"], -32022);
    assert_eq!(out[0]["error"]["data"]["requested"], "2099-01-01");
    let supported = out[0]["error"]["data"]["supported"]
        .as_array()
        .unwrap()
        .clone();
    // Only the stateless era's versions: a handshake-era version would not be accepted in
    // `_meta` either, so listing one would contradict the refusal.
    assert_eq!(supported, vec![json!("2026-07-28")]);
    assert!(matches!(
        events[0],
        Ev::Violation {
            kind: ViolationKind::UnsupportedVersion,
            ..
        }
    ));
    // A handshake-era version named in `_meta` is refused the same way, with the same list.
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
    assert_eq!(out[0]["error"]["code"], -32022);
    assert_eq!(out[0]["error"]["data"]["requested"], "2025-11-25");
    assert_eq!(out[0]["error"]["data"]["supported"], json!(["2026-07-28"]));
}

#[test]
fn methods_removed_in_2026_07_28_are_refused() {
    let mut s = modern_server();
    for method in [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "initialize",
        "tasks/get",
        "elicitation/create",
    ] {
        let (out, _) = s.request("9", method, r#""uri":"x","level":"info""#);
        let code = out[0]["error"]["code"].as_i64().unwrap();
        assert!(code == -32601, "{method}: {out:?}");
    }
    // A removed notification from the client is dropped; so is progress, which only servers
    // send in 2026-07-28 (it was dropped without a word, where HTTP refused it with 400).
    for n in [
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
    ] {
        let (out, events) = s.send(n);
        assert!(out.is_empty());
        assert!(
            matches!(
                events[..],
                [Ev::Violation {
                    kind: ViolationKind::NotificationNotAllowed,
                    ..
                }]
            ),
            "{n}: {events:?}"
        );
    }
}

#[test]
fn every_result_carries_a_result_type_and_server_info() {
    let mut s = modern_server();
    s.request("1", "tools/list", "");
    s.request("2", "tools/call", r#""name":"x""#);
    s.request("3", "resources/read", r#""uri":"mem://a""#);
    s.conn.respond(Id::Int(1), raw(r#"{"tools":[]}"#)).unwrap();
    s.conn
        .respond(
            Id::Int(2),
            raw(r#"{"content":[],"resultType":"complete","_meta":{"k":1}}"#),
        )
        .unwrap();
    s.conn
        .respond(
            Id::Int(3),
            raw(r#"{"contents":[],"ttlMs":5,"cacheScope":"public"}"#),
        )
        .unwrap();
    let out = s.out();
    assert_eq!(out[0]["result"]["resultType"], "complete");
    assert_eq!(
        out[0]["result"]["ttlMs"], 0,
        "cacheable results get the configured ttl"
    );
    assert_eq!(out[0]["result"]["cacheScope"], "private");
    assert_eq!(
        out[0]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "test-server"
    );
    assert_eq!(out[1]["result"]["_meta"]["k"], 1);
    assert_eq!(
        out[1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"],
        "2.0.0"
    );
    assert!(
        out[1]["result"].get("ttlMs").is_none(),
        "tool results are not cacheable"
    );
    assert_eq!(
        out[2]["result"]["ttlMs"], 5,
        "the application's own values are kept"
    );
    assert_eq!(out[2]["result"]["cacheScope"], "public");
    // Results must be objects in this era.
    s.request("4", "tools/list", "");
    assert_eq!(
        s.conn.respond(Id::Int(4), raw("[1]")),
        Err(Error::InvalidParams)
    );
    // The application's own cache hints must be valid ("Servers MUST provide a ttlMs value
    // that is >= 0"; a scope is public or private): a negative ttl went out as given.
    // A cacheable result's ttlMs is an integer (`"ttlMs":{"minimum":0,"type":"integer"}` in
    // ListToolsResult): null or a fraction went out as given.
    for bad in [
        r#"{"tools":[],"ttlMs":-5}"#,
        r#"{"tools":[],"ttlMs":"60"}"#,
        r#"{"tools":[],"cacheScope":"shared"}"#,
        r#"{"tools":[],"ttlMs":null}"#,
        r#"{"tools":[],"ttlMs":1.5}"#,
    ] {
        assert_eq!(
            s.conn.respond(Id::Int(4), raw(bad)),
            Err(Error::InvalidParams),
            "{bad}"
        );
    }
    s.conn
        .respond(Id::Int(4), raw(r#"{"tools":[],"ttlMs":0}"#))
        .unwrap();
    assert_eq!(s.out()[0]["result"]["ttlMs"], 0);
    // (A task's ttlMs, in a tasks/get result, may be null: no limit. Results that are not
    // cached keep what the application gives.)
    s.request("5", "tools/call", r#""name":"t""#);
    s.conn
        .respond(Id::Int(5), raw(r#"{"content":[],"ttlMs":null}"#))
        .unwrap();
    assert!(s.out()[0]["result"]["ttlMs"].is_null());
}

/// A close ends the peer's subscriptions with their listen results ("the server SHOULD
/// respond to the original subscriptions/listen request with a completion result"): over
/// stdio, where nothing else ends them, they were cut off with no message.
#[test]
fn a_close_ends_each_listen_with_its_result() {
    let mut s = modern_server();
    s.request(
        "\"L1\"",
        "subscriptions/listen",
        r#""notifications":{"toolsListChanged":true}"#,
    );
    s.request(
        "7",
        "subscriptions/listen",
        r#""notifications":{"resourcesListChanged":true}"#,
    );
    assert_eq!(s.conn.listen_subscriptions().len(), 2);
    s.conn.close(T0, Duration::from_secs(1));
    let out = s.out();
    let ended: Vec<&Value> = out
        .iter()
        .filter(|m| m.get("result").is_some())
        .map(|m| &m["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"])
        .collect();
    assert_eq!(ended, [&json!("L1"), &json!(7)], "{out:?}");
    assert_eq!(s.conn.state(), State::Closed);
}

/// A listen that arrives while a graceful close waits for the application's answer to a call
/// is acknowledged and ended at once with its result, as those open when the close began
/// were: kept, it held the close for its whole grace, then got -32603 (found by a review of
/// the close's change to wait for the peer's requests).
#[test]
fn a_listen_that_arrives_during_a_close_ends_at_once() {
    let mut s = modern_server();
    s.request("3", "tools/call", r#""name":"slow""#);
    s.out();
    s.conn.close(T0, Duration::from_secs(30));
    assert_eq!(s.conn.state(), State::Closing, "the call is awaited");
    let (out, _) = s.request(
        "\"L\"",
        "subscriptions/listen",
        r#""notifications":{"toolsListChanged":true}"#,
    );
    assert_eq!(
        out.last()
            .map(|m| &m["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"]),
        Some(&json!("L")),
        "{out:?}"
    );
    s.conn
        .respond(Id::Int(3), raw(r#"{"content":[]}"#))
        .unwrap();
    assert_eq!(s.conn.state(), State::Closed, "nothing else held it");

    // Under `review_listens` too, and the application is not asked to grant it (it was
    // handed a listen already answered, whose grant then failed).
    let mut s = reviewing_server();
    s.request("3", "tools/call", r#""name":"slow""#);
    s.out();
    s.conn.close(T0, Duration::from_secs(30));
    let (out, events) = s.send(&listen_line("5", "", r#"{"toolsListChanged":true}"#));
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(
        out.last()
            .map(|m| &m["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"]),
        Some(&json!(5)),
        "{out:?}"
    );
}

/// A resource update goes to a listener subscribed to that URI or to one above it ("This
/// might be a sub-resource of the one that the client actually subscribed to"): an update for
/// `file:///project/config.json` reached no one subscribed to `file:///project/`.
#[test]
fn a_resource_update_reaches_listeners_of_the_resource_above_it() {
    let mut s = modern_server();
    s.request(
        "\"dir\"",
        "subscriptions/listen",
        r#""notifications":{"resourceSubscriptions":["file:///project/"]}"#,
    );
    s.request(
        "\"bare\"",
        "subscriptions/listen",
        r#""notifications":{"resourceSubscriptions":["file:///project"]}"#,
    );
    s.out();
    let tagged = |s: &mut Raw, uri: &str| -> Vec<Value> {
        s.conn
            .notify(
                "notifications/resources/updated",
                Some(raw(&json!({ "uri": uri }).to_string())),
            )
            .unwrap();
        let mut ids: Vec<Value> = s
            .out()
            .iter()
            .map(|m| m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone())
            .collect();
        ids.sort_by_key(|v| v.to_string());
        ids
    };
    assert_eq!(
        tagged(&mut s, "file:///project/config.json"),
        [json!("bare"), json!("dir")]
    );
    assert_eq!(tagged(&mut s, "file:///project"), [json!("bare")]);
    assert_eq!(tagged(&mut s, "file:///project?rev=2"), [json!("bare")]);
    assert!(tagged(&mut s, "file:///projects/x").is_empty());
    assert!(tagged(&mut s, "file:///other").is_empty());
}

/// A 2026-07-28 server's list-change or update notification needs the capability it
/// declares, as in every era: `prompts` without `listChanged` gets `NotNegotiated` (the call
/// returned `Ok` and sent nothing: no listen is granted what we did not declare).
#[test]
fn a_stateless_servers_notification_needs_its_capability() {
    let mut s = modern_server();
    s.request("0", "server/discover", "");
    assert_eq!(
        s.conn.notify("notifications/prompts/list_changed", None),
        Err(Error::NotNegotiated(Caps::PROMPTS_LIST_CHANGED))
    );
    assert_eq!(
        s.conn.notify("notifications/tools/list_changed", None),
        Ok(())
    );
}

#[test]
fn subscriptions_listen_acknowledges_and_tags_notifications() {
    let mut s = modern_server();
    let (out, events) = s.request("\"L1\"", "subscriptions/listen", r#""notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["file:///a","file:///b"]}"#);
    assert!(
        events.iter().all(|e| !matches!(e, Ev::Request { .. })),
        "the engine holds the stream open itself"
    );
    let ack = &out[0];
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L1"
    );
    // prompts has no listChanged capability here: not acknowledged.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged":true,"resourceSubscriptions":["file:///a","file:///b"]})
    );
    let (out, _) = s.request(
        "\"L2\"",
        "subscriptions/listen",
        r#""notifications":{"resourcesListChanged":true}"#,
    );
    assert_eq!(
        out[0]["params"]["notifications"],
        json!({"resourcesListChanged":true})
    );

    s.conn
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    s.conn
        .notify(
            "notifications/resources/updated",
            Some(raw(r#"{"uri":"file:///b"}"#)),
        )
        .unwrap();
    s.conn
        .notify(
            "notifications/resources/updated",
            Some(raw(r#"{"uri":"file:///other"}"#)),
        )
        .unwrap();
    s.conn
        .notify("notifications/resources/list_changed", None)
        .unwrap();
    let out = s.out();
    assert_eq!(out.len(), 3, "{out:?}");
    assert_eq!(
        out[0],
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}}})
    );
    assert_eq!(out[1]["params"]["uri"], "file:///b");
    assert_eq!(
        out[1]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L1"
    );
    assert_eq!(
        out[2]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L2"
    );
    // Cancelling a listen stream ends it.
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L1"}}"#);
    s.conn
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    assert!(s.out().is_empty());
}

#[test]
fn logging_goes_out_only_at_the_requested_level() {
    let mut s = modern_server();
    s.request("1", "tools/call", r#""name":"quiet""#);
    assert_eq!(
        s.conn
            .log(Id::Int(1), LogLevel::Error, None, raw(r#""boom""#)),
        Ok(false)
    );
    let loud = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"warning"},"name":"loud"}}"#;
    s.send(loud);
    assert_eq!(
        s.conn
            .log(Id::Int(2), LogLevel::Info, None, raw(r#""fine""#)),
        Ok(false)
    );
    assert_eq!(
        s.conn
            .log(Id::Int(2), LogLevel::Warning, Some("db"), raw(r#"{"a":1}"#)),
        Ok(true)
    );
    assert_eq!(
        s.conn.log(Id::Int(2), LogLevel::Emergency, None, raw("1")),
        Ok(true)
    );
    let out = s.out();
    assert_eq!(out.len(), 2);
    assert_eq!(
        out[0],
        json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"db","data":{"a":1}}})
    );
    // Connection-level logging does not exist in this era.
    assert_eq!(
        s.conn.notify(
            "notifications/message",
            Some(raw(r#"{"level":"info","data":1}"#))
        ),
        Err(Error::RequestScoped)
    );
    assert_eq!(
        s.conn.request_context(Id::Int(2)).unwrap().log_level,
        Some(LogLevel::Warning)
    );
}

#[test]
fn the_server_never_sends_requests_in_this_era() {
    let mut s = modern_server();
    s.request("1", "tools/list", "");
    for method in [
        "ping",
        "roots/list",
        "sampling/createMessage",
        "elicitation/create",
        "x/custom",
    ] {
        assert_eq!(
            s.conn.request(T0, method, None),
            Err(Error::WrongDirection),
            "{method}"
        );
    }
}

/// "Input required" to a request the client cancelled is taken and not sent, as any answer
/// to it is (`Error::UnknownRequest` before, and the suppressed answer went uncounted).
#[test]
fn input_required_to_a_cancelled_request_is_taken_and_not_sent() {
    let mut s = modern_server();
    s.request("1", "tools/call", r#""name":"needs-input""#);
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
    let state = Some("s");
    assert_eq!(
        s.conn.respond_input_required(Id::Int(1), None, state),
        Ok(())
    );
    assert!(s.out().is_empty());
    assert_eq!(s.conn.stats().suppressed_responses, 1);
    // A request never seen is still unknown.
    assert_eq!(
        s.conn.respond_input_required(Id::Int(9), None, state),
        Err(Error::UnknownRequest)
    );
}

#[test]
fn input_required_is_only_for_three_methods_and_declared_capabilities() {
    let mut s = modern_server();
    s.request("1", "tools/call", r#""name":"needs-input""#);
    s.request("2", "tools/list", "");
    let elicit = raw(
        r#"{"login":{"method":"elicitation/create","params":{"message":"who?","requestedSchema":{"type":"object","properties":{}}}}}"#,
    );
    let sample =
        raw(r#"{"q":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}}"#);
    assert_eq!(
        s.conn
            .respond_input_required(Id::Int(2), Some(elicit), None),
        Err(Error::NotEligible)
    );
    // The request declared elicitation but not sampling.
    assert_eq!(
        s.conn
            .respond_input_required(Id::Int(1), Some(sample), None),
        Err(Error::NotNegotiated(Caps::SAMPLING))
    );
    assert_eq!(
        s.conn.respond_input_required(Id::Int(1), None, None),
        Err(Error::InvalidParams)
    );
    // Input requests whose shape the rules cannot read are refused, not sent unchecked: no
    // `params` where the schema requires them, `params` written twice (the second asking
    // for URL mode, which the client did not declare; a parser keeping the last one reads
    // it), a key written twice ("inputRequests keys ... MUST be unique").
    for bad in [
        r#"{"a":{"method":"elicitation/create"}}"#,
        r#"{"a":{"method":"elicitation/create","params":5}}"#,
        r#"{"a":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}},"params":{"mode":"url","message":"m","url":"https://x","elicitationId":"e"}}}"#,
        r#"{"a":{"method":"elicitation/create","method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}}"#,
        r#"{"login":{"method":"elicitation/create","params":{"message":"who?","requestedSchema":{"type":"object","properties":{}}}},"login":{"method":"elicitation/create","params":{"message":"who?","requestedSchema":{"type":"object","properties":{}}}}}"#,
        r#"{"a":5}"#,
    ] {
        assert_eq!(
            s.conn
                .respond_input_required(Id::Int(1), Some(raw(bad)), None),
            Err(Error::InvalidParams),
            "{bad}"
        );
    }
    s.conn
        .respond_input_required(Id::Int(1), Some(elicit), Some("st\"ate\\1"))
        .unwrap();
    let out = s.out();
    assert_eq!(out[0]["result"]["resultType"], "input_required");
    assert_eq!(
        out[0]["result"]["inputRequests"]["login"]["method"],
        "elicitation/create"
    );
    assert_eq!(out[0]["result"]["requestState"], "st\"ate\\1");
    // -32021 is available in this era for a capability the server needs.
    s.request("3", "tools/call", r#""name":"needs-sampling""#);
    s.conn
        .respond_error(
            Id::Int(3),
            mcp::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "needs sampling",
            Some(raw(r#"{"requiredCapabilities":{"sampling":{}}}"#)),
        )
        .unwrap();
    assert_eq!(s.out()[0]["error"]["code"], -32021);
}

// ---- Client ---------------------------------------------------------------------------------

fn modern_pair() -> Pair {
    let mut p = Pair::new(modern(client_config()), server_config());
    p.step();
    assert_eq!(
        p.take_client_events(),
        vec![Ev::Ready {
            version: ProtocolVersion::V2026_07_28
        }]
    );
    assert_eq!(
        p.take_server_events(),
        vec![Ev::Ready {
            version: ProtocolVersion::V2026_07_28
        }]
    );
    p.wire.clear();
    p
}

#[test]
fn the_client_adds_meta_to_every_request() {
    let mut p = modern_pair();
    assert_eq!(
        p.client.peer_info().unwrap().get(),
        r#"{"name":"test-server","version":"2.0.0"}"#
    );
    assert_eq!(p.client.peer_instructions(), Some("be nice"));
    p.client
        .request(
            p.now,
            "tools/call",
            Some(raw(r#"{"name":"x","_meta":{"trace":"t"}}"#)),
        )
        .unwrap();
    p.client.request(p.now, "tools/list", None).unwrap();
    p.step();
    for line in p.lines(true) {
        let v: Value = serde_json::from_str(&line).unwrap();
        let meta = &v["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"]["roots"]["listChanged"],
            true
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "test-client"
        );
    }
    let v: Value = serde_json::from_str(&p.lines(true)[0]).unwrap();
    assert_eq!(v["params"]["_meta"]["trace"], "t");
    // The server saw the request's own capabilities.
    let reqs = p.take_server_events();
    let Ev::Request { id, .. } = &reqs[0] else {
        panic!()
    };
    assert!(
        p.server
            .request_context(id.as_id())
            .unwrap()
            .client_capabilities
            .contains(Caps::ROOTS | Caps::SAMPLING)
    );
    // The application may not set the engine's keys itself.
    let own = raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#);
    assert_eq!(
        p.client.request(p.now, "tools/list", Some(own)),
        Err(Error::InvalidParams)
    );
}

#[test]
fn result_types_missing_complete_or_unknown() {
    let mut p = modern_pair();
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    let b = p.client.request(p.now, "prompts/list", None).unwrap();
    take_output(&mut p.client);
    p.client.handle_input(p.now, format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"tools\":[]}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"resultType\":\"later\"}}}}\n", a.0, b.0).as_bytes());
    assert_eq!(
        drain(&mut p.client),
        vec![
            Ev::Response {
                request: a,
                result: r#"{"tools":[]}"#.into()
            },
            Ev::InvalidResponse { request: b }
        ]
    );
}

/// An input-required answer with `requestState` or `inputRequests` written twice cannot be
/// followed ("MUST echo back the exact value"; "MUST construct the requested inputs"): which
/// one? It is an invalid response (each read as absent, and the retry went without the state,
/// or without the inputs asked for).
#[test]
fn an_input_required_answer_with_a_member_written_twice_is_invalid() {
    let mut p = modern_pair();
    let params = raw(r#"{"name":"t"}"#);
    let a = p.client.request(p.now, "tools/call", Some(params)).unwrap();
    let b = p.client.request(p.now, "tools/call", Some(params)).unwrap();
    take_output(&mut p.client);
    let roots = r#"{"q":{"method":"roots/list"}}"#;
    p.client.handle_input(
        p.now,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"resultType\":\"input_required\",\"inputRequests\":{roots},\"requestState\":\"a\",\"requestState\":\"b\"}}}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"resultType\":\"input_required\",\"inputRequests\":{roots},\"inputRequests\":{roots},\"requestState\":\"s\"}}}}\n",
            a.0, b.0
        )
        .as_bytes(),
    );
    assert_eq!(
        drain(&mut p.client),
        vec![
            Ev::InvalidResponse { request: a },
            Ev::InvalidResponse { request: b }
        ]
    );
}

/// The `requestState` strings kept for retries the application may never make are bounded in
/// bytes (`max_buffered_output`), not only in number (`max_remembered_ids`): a server could
/// pin 1,024 frames of 16 MiB. The oldest go first; the newest is always kept.
#[test]
fn request_states_kept_for_retries_are_bounded_in_bytes() {
    let mut client = modern(client_config());
    client.limits.max_buffered_output = 64 * 1024;
    let mut p = Pair::new(client, server_config());
    p.step();
    p.take_client_events();
    p.take_server_events();
    let state = "s".repeat(20 * 1024);
    let elicit = r#"{"login":{"method":"elicitation/create","params":{"message":"who?","requestedSchema":{"type":"object","properties":{}}}}}"#;
    let mut asked = Vec::new();
    for _ in 0..6 {
        let id = p
            .client
            .request(p.now, "tools/call", Some(raw(r#"{"name":"login"}"#)))
            .unwrap();
        p.step();
        let reqs = p.take_server_events();
        let Ev::Request { id: theirs, .. } = &reqs[0] else {
            panic!("{reqs:?}")
        };
        p.server
            .respond_input_required(theirs.as_id(), Some(raw(elicit)), Some(&state))
            .unwrap();
        p.step();
        assert!(
            matches!(&p.take_client_events()[0], Ev::InputRequired { .. }),
            "input required"
        );
        asked.push(id);
    }
    // Three of 20 KiB fit in 64 KiB: the first three are gone.
    for (i, id) in asked.iter().enumerate() {
        let retried = p.client.retry(p.now, *id, None);
        if i < 3 {
            assert_eq!(retried, Err(Error::UnknownRequest), "request {i}");
        } else {
            assert!(retried.is_ok(), "request {i}: {retried:?}");
        }
    }
}

#[test]
fn input_required_round_trip_echoes_request_state_byte_for_byte() {
    let mut p = modern_pair();
    let first = p
        .client
        .request(
            p.now,
            "tools/call",
            Some(raw(r#"{"name":"login","arguments":{"x":1}}"#)),
        )
        .unwrap();
    p.step();
    let reqs = p.take_server_events();
    let Ev::Request { id, .. } = &reqs[0] else {
        panic!()
    };
    let state = "caf\u{e9} \"quoted\" \\ \u{1f600}";
    p.server
        .respond_input_required(id.as_id(), Some(raw(r#"{"login":{"method":"elicitation/create","params":{"message":"who?","requestedSchema":{"type":"object","properties":{}}}}}"#)), Some(state))
        .unwrap();
    p.step();
    let events = p.take_client_events();
    let Ev::InputRequired {
        request,
        input_requests,
        request_state,
    } = &events[0]
    else {
        panic!("{events:?}")
    };
    assert_eq!(*request, first);
    assert!(
        input_requests
            .as_deref()
            .unwrap()
            .contains("elicitation/create")
    );
    assert_eq!(request_state.as_deref(), Some(state));
    let wire_state = {
        let line = p.lines(false).last().unwrap().clone();
        let at = line.find("\"requestState\":\"").unwrap() + 16;
        let end = line[at..].find("\"}").unwrap();
        line[at..at + end].to_owned()
    };
    p.wire.clear();
    let second = p
        .client
        .retry(
            p.now,
            first,
            Some(raw(
                r#"{"login":{"action":"accept","content":{"name":"octocat"}}}"#,
            )),
        )
        .unwrap();
    assert_ne!(second, first, "a new id");
    assert_eq!(
        p.client.retry(p.now, first, None),
        Err(Error::UnknownRequest),
        "once"
    );
    p.step();
    let line = p.lines(true)[0].clone();
    assert!(
        line.contains(&format!("\"requestState\":\"{wire_state}\"")),
        "echoed byte for byte: {line}"
    );
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["params"]["name"], "login");
    assert_eq!(v["params"]["arguments"]["x"], 1);
    assert_eq!(
        v["params"]["inputResponses"]["login"]["content"]["name"],
        "octocat"
    );
    assert_eq!(
        v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let reqs = p.take_server_events();
    let Ev::Request { id, .. } = &reqs[0] else {
        panic!()
    };
    p.server
        .respond(
            id.as_id(),
            raw(r#"{"content":[{"type":"text","text":"hi octocat"}]}"#),
        )
        .unwrap();
    p.step();
    assert!(
        matches!(&p.take_client_events()[0], Ev::Response { request, .. } if *request == second)
    );
}

#[test]
fn no_request_state_is_sent_when_none_was_given() {
    let mut p = modern_pair();
    let first = p
        .client
        .request(p.now, "prompts/get", Some(raw(r#"{"name":"p"}"#)))
        .unwrap();
    p.step();
    let Ev::Request { id, .. } = &p.take_server_events()[0] else {
        panic!()
    };
    p.server
        .respond_input_required(
            id.as_id(),
            Some(raw(r#"{"r":{"method":"roots/list","params":{}}}"#)),
            None,
        )
        .unwrap();
    p.step();
    p.take_client_events();
    p.wire.clear();
    p.client
        .retry(p.now, first, Some(raw(r#"{"r":{"roots":[]}}"#)))
        .unwrap();
    p.step();
    assert!(!p.lines(true)[0].contains("requestState"));
}

#[test]
fn cancelling_a_stateless_request_works() {
    let mut p = modern_pair();
    let r = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"slow"}"#)))
        .unwrap();
    p.step();
    let Ev::Request { id, .. } = &p.take_server_events()[0] else {
        panic!()
    };
    p.client.cancel(p.now, r, Some("stop")).unwrap();
    p.step();
    assert_eq!(
        p.take_server_events(),
        vec![Ev::PeerCancelled {
            id: id.clone(),
            reason: Some("stop".into())
        }]
    );
    assert_eq!(p.server.respond(id.as_id(), raw("{}")), Ok(()));
    assert!(p.server.poll_transmit().is_none());
}

/// A stateless pair whose client listens for tool list changes: the pair (the listen's
/// acknowledgement among the client's events) and the listen's id.
fn listening_pair() -> (Pair, mcpwire::conn::RequestId) {
    let mut p = modern_pair();
    let listen = p
        .client
        .request(
            p.now,
            "subscriptions/listen",
            Some(raw(r#"{"notifications":{"toolsListChanged":true}}"#)),
        )
        .unwrap();
    p.step();
    (p, listen)
}

#[test]
fn a_listen_stream_has_no_timeout_and_receives_tagged_notifications() {
    let (mut p, listen) = listening_pair();
    let events = p.take_client_events();
    assert!(
        matches!(&events[0], Ev::Notification { method, .. } if method == "notifications/subscriptions/acknowledged")
    );
    p.server
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    p.advance(Duration::from_secs(3600));
    let events = p.take_client_events();
    assert_eq!(events.len(), 1, "{events:?}");
    let Ev::Notification {
        params: Some(params),
        ..
    } = &events[0]
    else {
        panic!()
    };
    assert!(params.contains(&format!(
        "\"io.modelcontextprotocol/subscriptionId\":{}",
        listen.0
    )));
    assert_eq!(
        p.client.requests_in_flight(),
        1,
        "still listening an hour later"
    );
}

/// A client's graceful close does not wait out its grace for its own listen streams, which
/// the server ends only when it stops: they are cancelled at once (stdio: MUST send
/// `notifications/cancelled`), and the close ends as soon as nothing else is in flight. It
/// always waited for the whole grace (found by a review of the correlation layer).
#[test]
fn a_client_close_cancels_its_listens_at_once() {
    let (mut p, listen) = listening_pair();
    p.take_client_events();
    p.client.close(p.now, Duration::from_secs(30));
    assert_eq!(p.client.state(), State::Closed);
    let events = drain(&mut p.client);
    assert!(
        events.contains(&Ev::Abandoned { request: listen }),
        "the application learns the listen is over: {events:?}"
    );
    let out = String::from_utf8(take_output(&mut p.client)).unwrap();
    assert!(
        out.contains("notifications/cancelled")
            && out.contains(&format!("\"requestId\":{}", listen.0)),
        "{out}"
    );
}

#[test]
fn the_server_ends_a_listen_stream_with_its_result_and_the_subscription_id() {
    let (mut p, listen) = listening_pair();
    let _ = p.take_client_events();
    // The engine answers listen requests itself; the application finds them here.
    let ids = p.server.listen_subscriptions();
    assert_eq!(ids.len(), 1);
    let id = ids[0].clone();
    assert_eq!(id.as_id(), mcpwire::jsonrpc::Id::Int(listen.0));
    // Only a listen request can be ended this way.
    assert_eq!(
        p.server.end_listen(mcpwire::jsonrpc::Id::Int(999)),
        Err(mcpwire::conn::Error::UnknownRequest)
    );
    p.server.end_listen(id.as_id()).unwrap();
    p.step();
    let sent = p.lines(false);
    let last = sent.last().expect("the listen result");
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["id"], listen.0);
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen.0
    );
    assert!(v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
    let events = p.take_client_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ev::Response { request, .. } if *request == listen)),
        "{events:?}"
    );
    assert_eq!(p.client.requests_in_flight(), 0, "the subscription is over");
    // Later list changes go nowhere, and ending it twice is refused.
    assert_eq!(
        p.server.end_listen(id.as_id()),
        Err(mcpwire::conn::Error::UnknownRequest)
    );
}

// ---- Era detection ---------------------------------------------------------------------------

#[test]
fn auto_client_adopts_the_stateless_era_from_a_dual_server() {
    let mut p = Pair::new(client_config(), server_config());
    p.step();
    assert_eq!(
        p.take_client_events(),
        vec![Ev::Ready {
            version: ProtocolVersion::V2026_07_28
        }]
    );
    assert_eq!(p.client.era(), Some(Era::Modern));
    assert!(p.lines(true)[0].contains("server/discover"));
    assert!(!p.lines(true).iter().any(|l| l.contains("\"initialize\"")));
}

#[test]
fn auto_client_falls_back_on_any_error_from_a_legacy_server() {
    let mut p = Pair::new(client_config(), legacy(server_config()));
    p.step();
    assert_eq!(
        p.take_client_events(),
        vec![Ev::Ready {
            version: ProtocolVersion::V2025_11_25
        }]
    );
    assert_eq!(p.client.era(), Some(Era::Legacy));
    let c = p.lines(true);
    assert!(c[0].contains("server/discover") && c[1].contains("\"initialize\""));
    // The legacy server answered the probe at once with an error.
    let answer: Value = serde_json::from_str(&p.lines(false)[0]).unwrap();
    assert!(answer["error"]["code"].as_i64().is_some());
    assert_eq!(p.now, T0, "no time passed");
    for code in [-32601, -32600, -32603, -32000, 42] {
        let mut c = Connection::new(client_config(), T0).unwrap();
        take_output(&mut c);
        c.handle_input(T0, format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{{\"code\":{code},\"message\":\"no\"}}}}\n").as_bytes());
        assert!(
            String::from_utf8(take_output(&mut c))
                .unwrap()
                .contains("\"initialize\""),
            "{code}"
        );
        assert_eq!(c.era(), Some(Era::Legacy));
    }
}

#[test]
fn auto_client_treats_a_probe_timeout_as_legacy() {
    let mut c = Connection::new(client_config(), T0).unwrap();
    take_output(&mut c);
    let deadline = c.poll_timeout().unwrap();
    assert_eq!(deadline, T0.after(Duration::from_secs(5)));
    c.handle_timeout(deadline);
    assert!(
        String::from_utf8(take_output(&mut c))
            .unwrap()
            .contains("\"initialize\"")
    );
    // A late answer to the probe is dropped.
    c.handle_input(deadline, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\",\"supportedVersions\":[\"2026-07-28\"],\"capabilities\":{}}}\n");
    assert_eq!(c.era(), Some(Era::Legacy));
    assert_eq!(c.stats().late_responses, 1);
}

#[test]
fn auto_client_re_probes_once_after_32022_naming_a_shared_version() {
    let mut c = Connection::new(client_config(), T0).unwrap();
    take_output(&mut c);
    c.handle_input(T0, br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}
"#);
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(out.contains("server/discover"), "{out}");
    c.handle_input(T0, br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}
"#);
    // After one re-probe it ends: the server is stateless ("Do not fall back to
    // `initialize`"), and refuses what it claims to speak.
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(!out.contains("\"initialize\""), "{out}");
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::VersionRefused {
                supported: r#"["2026-07-28"]"#.into()
            }
        }]
    );
}

/// The answers to the probe that name the versions a server speaks decide the era by them:
/// a stateless server sharing no version with us ends the connection (it fell back to
/// `initialize`, which such a server refuses), a handshake-era version we share leads to
/// `initialize`, and a result with an unknown `resultType` is invalid (it was accepted).
#[test]
fn auto_client_follows_the_versions_the_probe_names() {
    let answer = |line: &str| {
        let mut c = Connection::new(client_config(), T0).unwrap();
        take_output(&mut c);
        c.handle_input(T0, format!("{line}\n").as_bytes());
        let out = String::from_utf8(take_output(&mut c)).unwrap();
        (out.contains("\"initialize\""), drain(&mut c))
    };
    let refused = |supported: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32022,"message":"no","data":{{"supported":{supported},"requested":"2026-07-28"}}}}}}"#
        )
    };
    let discovered = |versions: &str, result_type: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"{result_type}","supportedVersions":{versions},"capabilities":{{}}}}}}"#
        )
    };
    assert_eq!(
        answer(&refused(r#"["2099-01-01"]"#)),
        (
            false,
            vec![Ev::Closed {
                reason: CloseReason::VersionRefused {
                    supported: r#"["2099-01-01"]"#.into()
                }
            }]
        )
    );
    assert_eq!(answer(&refused(r#"["2025-11-25"]"#)), (true, vec![]));
    assert_eq!(
        answer(&discovered(r#"["2099-01-01"]"#, "complete")),
        (
            false,
            vec![Ev::Closed {
                reason: CloseReason::UnsupportedVersion(r#"["2099-01-01"]"#.into())
            }]
        )
    );
    assert_eq!(
        answer(&discovered(r#"["2025-06-18"]"#, "complete")),
        (true, vec![])
    );
    assert_eq!(
        answer(&discovered(r#"["2026-07-28"]"#, "weird")),
        (
            false,
            vec![Ev::Closed {
                reason: CloseReason::InvalidInitializeResult
            }]
        )
    );
    // Written twice, resultType is unreadable, so not recognized (it read as absent, and the
    // client took the server for a stateless one).
    assert_eq!(
        answer(&discovered(
            r#"["2026-07-28"]"#,
            r#"weird","resultType":"complete"#
        )),
        (
            false,
            vec![Ev::Closed {
                reason: CloseReason::InvalidInitializeResult
            }]
        )
    );
    // "A recognized modern JSON-RPC error ... identifies a modern server: the client retries
    // with a supported version rather than falling back": -32020 and -32021 are modern
    // errors too (the client sent initialize after them); anything else means a handshake-era
    // server.
    for code in [-32020, -32021] {
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"no"}}}}"#);
        let (initialize, events) = answer(&line);
        assert!(!initialize, "{code}: fell back");
        assert!(
            matches!(events.as_slice(), [Ev::Closed { .. }]),
            "{code}: {events:?}"
        );
    }
    let line = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#;
    assert_eq!(answer(line), (true, vec![]));
}

#[test]
fn a_stateless_only_client_re_probes_once_after_32022_then_closes() {
    let mut c = Connection::new(modern(client_config()), T0).unwrap();
    take_output(&mut c);
    c.handle_input(T0, br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}
"#);
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(
        out.contains("server/discover"),
        "retries with the advertised version: {out}"
    );
    assert!(drain(&mut c).is_empty());
    c.handle_input(T0, br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}
"#);
    assert!(take_output(&mut c).is_empty(), "only once");
    assert!(matches!(
        drain(&mut c)[..],
        [Ev::Closed {
            reason: CloseReason::VersionRefused { .. }
        }]
    ));
}

#[test]
fn a_discover_result_without_a_shared_stateless_version_means_legacy() {
    let mut c = Connection::new(client_config(), T0).unwrap();
    take_output(&mut c);
    c.handle_input(T0, br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2025-11-25"],"capabilities":{}}}
"#);
    assert!(
        String::from_utf8(take_output(&mut c))
            .unwrap()
            .contains("\"initialize\"")
    );
}

#[test]
fn a_legacy_only_client_never_probes_and_a_modern_only_client_never_falls_back() {
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(
        out.contains("\"initialize\"") && !out.contains("server/discover"),
        "{out}"
    );
    let mut config = client_config();
    config.client_era = ClientEra::Legacy;
    let mut c = Connection::new(config, T0).unwrap();
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(
        out.contains("\"initialize\"") && !out.contains("server/discover"),
        "{out}"
    );
    let mut c = Connection::new(modern(client_config()), T0).unwrap();
    take_output(&mut c);
    c.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"no\"}}\n",
    );
    assert!(take_output(&mut c).is_empty());
    assert!(matches!(drain(&mut c)[..], [Ev::Closed { .. }]));
}

#[test]
fn a_dual_server_serves_either_era_by_the_first_message() {
    // Handshake first: stateless metadata is then just metadata.
    let mut s = Raw::server(server_config());
    s.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#);
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(s.conn.era(), Some(Era::Legacy));
    let (out, events) = s.request("1", "tools/list", "");
    assert!(out.is_empty());
    assert!(matches!(&events[0], Ev::Request { .. }));
    s.conn.respond(Id::Int(1), raw(r#"{"tools":[]}"#)).unwrap();
    assert!(
        s.out()[0]["result"].get("resultType").is_none(),
        "no stateless stamping in a session"
    );
    // Stateless first: initialize is then refused with -32022 naming the versions.
    let mut s = Raw::server(server_config());
    s.request("1", "server/discover", "");
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#);
    assert_eq!(out[0]["error"]["code"], -32022);
    assert!(
        out[0]["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    // A request without metadata in the stateless era: -32602.
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    assert_eq!(out[0]["error"]["code"], -32602);
}

#[test]
fn a_legacy_only_server_refuses_discover_promptly() {
    let mut s = Raw::server(legacy(server_config()));
    let (out, _) = s.request("1", "server/discover", "");
    // Unknown in every version it speaks: -32601, not "too early" (-32600).
    assert_eq!(out[0]["error"]["code"], -32601);
    assert_eq!(out[0]["id"], 1);
    assert_eq!(s.conn.era(), None);
    let (out, _) = s.request("3", "subscriptions/listen", "");
    assert_eq!(out[0]["error"]["code"], -32601);
    // A method of its versions is still too early before the handshake.
    let (out, _) = s.request("4", "tools/list", "");
    assert_eq!(out[0]["error"]["code"], -32600);
    // ...and still accepts the handshake afterwards.
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#);
    assert_eq!(out[0]["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn a_modern_only_server_names_its_versions_when_sent_initialize() {
    let mut s = Raw::server(modern(server_config()));
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#);
    assert_eq!(out[0]["error"]["code"], -32022);
    assert_eq!(out[0]["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(out[0]["error"]["data"]["requested"], "2025-11-25");
}

// ---- Error codes by version -------------------------------------------------------------------

#[test]
fn error_codes_follow_the_version() {
    use ProtocolVersion::*;
    assert_eq!(mcp::resource_not_found_code(V2025_11_25), -32002);
    assert_eq!(mcp::resource_not_found_code(V2024_11_05), -32002);
    assert_eq!(mcp::resource_not_found_code(V2026_07_28), -32602);
    for v in ProtocolVersion::ALL {
        assert_eq!(mcp::error_code_allowed(-32042, v), v == V2025_11_25, "{v}");
        for code in [-32020, -32021, -32022] {
            assert_eq!(
                mcp::error_code_allowed(code, v),
                v == V2026_07_28,
                "{code} {v}"
            );
        }
        assert_eq!(mcp::error_code_allowed(-32002, v), v != V2026_07_28);
        assert!(mcp::error_code_allowed(-32601, v));
    }
    // The engine enforces it on answers. "Resource not found" is the exception: 2026-07-28
    // replaced -32002 with -32602, so the engine writes the version's code for it. (It was
    // refused, and every example app, which sent -32002 and logged the refusal, left the
    // request unanswered for good.)
    let mut s = modern_server();
    s.request("1", "resources/read", r#""uri":"nope""#);
    assert_eq!(
        s.conn.respond_error(Id::Int(1), -32042, "url", None),
        Err(Error::CodeNotInVersion)
    );
    s.conn
        .respond_error(Id::Int(1), -32002, "Resource not found", None)
        .unwrap();
    let out = s.out();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["error"]["code"], -32602, "{out:?}");
    assert_eq!(out[0]["error"]["message"], "Resource not found", "{out:?}");
    s.request("2", "resources/read", r#""uri":"nope""#);
    s.conn
        .respond_error(
            Id::Int(2),
            mcp::resource_not_found_code(V2026_07_28),
            "Resource not found",
            None,
        )
        .unwrap();
    assert_eq!(s.out()[0]["error"]["code"], -32602);
    for version in ProtocolVersion::LEGACY {
        let mut p = Pair::ready(version, client_config(), server_config());
        p.client
            .request(p.now, "resources/read", Some(raw(r#"{"uri":"nope"}"#)))
            .unwrap();
        p.step();
        let Ev::Request { id, .. } = &p.take_server_events()[0] else {
            panic!()
        };
        assert_eq!(
            p.server.respond_error(id.as_id(), -32022, "x", None),
            Err(Error::CodeNotInVersion)
        );
        // -32042 exists in 2025-11-25 only, and there only with its elicitations for a
        // client that declared URL mode (tests/subcaps.rs): this client did not.
        assert_eq!(
            p.server.respond_error(id.as_id(), -32042, "url", None),
            Err(if version == V2025_11_25 {
                Error::InvalidParams
            } else {
                Error::CodeNotInVersion
            })
        );
        p.server
            .respond_error(id.as_id(), -32002, "Resource not found", None)
            .unwrap();
    }
    // Before any version is negotiated (a lenient legacy-only server answering a request that
    // came before `initialize`), a code must exist in one of the versions it speaks.
    let mut config = legacy(server_config());
    config.policy.strict_lifecycle = false;
    let mut s = Raw::server(config);
    s.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    let data = raw(r#"{"supported":["2025-11-25"],"requested":"x"}"#);
    assert_eq!(
        s.conn.respond_error(Id::Int(3), -32022, "x", Some(data)),
        Err(Error::CodeNotInVersion)
    );
    s.conn
        .respond_error(Id::Int(3), -32601, "no", None)
        .unwrap();
    assert_eq!(s.out()[0]["error"]["code"], -32601);
}

#[test]
fn a_32022_to_the_fallback_initialize_triggers_one_re_probe() {
    // The probe was answered too late (after the fallback): the server, now stateless, refuses
    // initialize with -32022 naming its versions. That is modern evidence: probe again.
    let mut c = Connection::new(client_config(), T0).unwrap();
    take_output(&mut c);
    let deadline = c.poll_timeout().unwrap();
    c.handle_timeout(deadline);
    assert!(
        String::from_utf8(take_output(&mut c))
            .unwrap()
            .contains("\"initialize\"")
    );
    c.handle_input(deadline, br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}
"#);
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(out.contains("server/discover"), "{out}");
    c.handle_input(deadline, br#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}}
"#);
    assert_eq!(
        drain(&mut c),
        vec![Ev::Ready {
            version: ProtocolVersion::V2026_07_28
        }]
    );
    assert_eq!(c.era(), Some(Era::Modern));
    // Only once: a second -32022 closes, without `initialize`.
    let mut c = Connection::new(client_config(), T0).unwrap();
    take_output(&mut c);
    let refuse = |id: u8| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32022,\"message\":\"no\",\"data\":{{\"supported\":[\"2026-07-28\"],\"requested\":\"x\"}}}}}}\n"
        )
    };
    c.handle_input(T0, refuse(1).as_bytes());
    c.handle_input(T0, refuse(2).as_bytes());
    assert!(
        !String::from_utf8(take_output(&mut c))
            .unwrap()
            .contains("\"initialize\"")
    );
    assert_eq!(c.state(), State::Closed);
}

/// The one re-probe is one for the whole handshake: a server that refuses the probe with an
/// error of the handshake era (so the client falls back) and then `initialize` with -32022
/// (so the client probes again) ends the handshake on the second round. The flag recording
/// the re-probe was never set, and the client went on sending probes and `initialize`
/// without end, never handing out `Ready` or `Closed`.
#[test]
fn probe_and_fallback_do_not_alternate_without_end() {
    let mut c = Connection::new(client_config(), T0).unwrap();
    let mut probes = 0;
    let mut initializes = 0;
    for _ in 0..10 {
        let out = String::from_utf8(take_output(&mut c)).unwrap();
        let Some(line) = out.lines().last() else {
            break;
        };
        let id = serde_json::from_str::<serde_json::Value>(line).unwrap()["id"].clone();
        let answer = if line.contains("server/discover") {
            probes += 1;
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32602,\"message\":\"clientInfo needs a version\"}}}}\n"
            )
        } else {
            assert!(line.contains("\"initialize\""), "{line}");
            initializes += 1;
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32022,\"message\":\"no\",\"data\":{{\"supported\":[\"2026-07-28\"],\"requested\":\"2025-11-25\"}}}}}}\n"
            )
        };
        c.handle_input(T0, answer.as_bytes());
    }
    assert_eq!(c.state(), State::Closed);
    assert_eq!((probes, initializes), (2, 2));
    assert!(
        drain(&mut c).iter().any(|e| matches!(e, Ev::Closed { .. })),
        "no Closed event"
    );
}

/// A close begun during the handshake ends with the handshake's answer, sending nothing new:
/// a probe refused by a handshake-era server sent the fallback `initialize` after `close`,
/// and an answered `initialize` sent `notifications/initialized` and `Ready`; either way the
/// connection then stayed closing until the grace ran out.
#[test]
fn a_close_during_the_handshake_ends_with_its_answer() {
    let mut c = Connection::new(client_config(), T0).unwrap();
    take_output(&mut c);
    c.close(T0, Duration::from_secs(30));
    c.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"no\"}}\n",
    );
    assert_eq!(String::from_utf8(take_output(&mut c)).unwrap(), "");
    assert_eq!(c.state(), State::Closed);
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::Local
        }]
    );
    let mut c = Connection::new(legacy(client_config()), T0).unwrap();
    take_output(&mut c);
    c.close(T0, Duration::from_secs(30));
    c.handle_input(
        T0,
        br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}
"#,
    );
    assert_eq!(String::from_utf8(take_output(&mut c)).unwrap(), "");
    assert_eq!(
        drain(&mut c),
        vec![Ev::Closed {
            reason: CloseReason::Local
        }]
    );
}

/// An unreadable answer to the engine's own requests ends them at once, as one to an
/// application's request does: a malformed error to the probe (auto mode) is a handshake-era
/// server's, so the client falls back now; a malformed answer to `initialize` closes with
/// `InvalidInitializeResult`. They waited out the probe's 5 s and `initialize`'s 60 s.
#[test]
fn an_unreadable_answer_to_the_probe_or_initialize_ends_it_at_once() {
    let mut c = Connection::new(client_config(), T0).unwrap();
    assert!(
        String::from_utf8(take_output(&mut c))
            .unwrap()
            .contains("server/discover")
    );
    // An error without its message is not a JSON-RPC error object.
    c.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601}}\n",
    );
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(out.contains("\"initialize\""), "{out}");
    assert_eq!(c.state(), State::Initializing);
    c.handle_input(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":\"x\"}}\n",
    );
    assert_eq!(c.state(), State::Closed);
    assert!(
        drain(&mut c).contains(&Ev::Closed {
            reason: CloseReason::InvalidInitializeResult
        }),
        "no InvalidInitializeResult"
    );
    // Over the frame cap, likewise.
    let mut config = legacy(client_config());
    config.limits.max_frame = 256;
    let mut c = Connection::new(config, T0).unwrap();
    take_output(&mut c);
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"x\":\"{}\"}}}}\n",
        "y".repeat(400)
    );
    c.handle_input(T0, long.as_bytes());
    assert_eq!(c.state(), State::Closed);
}

/// A listen request with this `_meta` (which may carry a log level and a progress token).
fn listen_line(id: &str, meta_extra: &str, notifications: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}{meta_extra}}},"notifications":{notifications}}}}}"#
    )
}

/// A listen stream carries what it asked for and nothing else: "the server MUST NOT deliver
/// it [a log message] on a subscriptions/listen stream", and progress belongs to requests
/// doing work. Both went out on the stream when the listen's `_meta` asked for them.
#[test]
fn a_listen_stream_carries_no_log_messages_or_progress() {
    let mut s = modern_server();
    let extra = r#","io.modelcontextprotocol/logLevel":"debug","progressToken":"p1""#;
    let (out, _) = s.send(&listen_line("7", extra, r#"{"toolsListChanged":true}"#));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["method"], "notifications/subscriptions/acknowledged");
    let listen = Id::Int(7);
    assert_eq!(
        s.conn.log(listen, LogLevel::Emergency, None, raw(r#""x""#)),
        Ok(false)
    );
    assert_eq!(
        s.conn.progress(listen, 1.0, None, None),
        Err(Error::NoProgressToken)
    );
    assert!(s.out().is_empty());
    // What it asked for still comes.
    s.conn
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    assert_eq!(s.out().len(), 1);
}

/// A listen the server refuses (its inbound limit, a bad progress token) gets its error only:
/// the acknowledgement, which says the subscription "has been established", went out first.
#[test]
fn a_refused_listen_is_not_acknowledged() {
    let mut config = server_config();
    config.limits.max_inbound_in_flight = 1;
    let mut s = Raw::server(config);
    s.request("1", "tools/call", r#""name":"slow""#);
    let (out, _) = s.send(&listen_line("2", "", r#"{"toolsListChanged":true}"#));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["error"]["code"], -32603);
    let mut s = modern_server();
    let bad_token = r#","progressToken":{}"#;
    let (out, _) = s.send(&listen_line("3", bad_token, r#"{"toolsListChanged":true}"#));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["error"]["code"], -32602);
    s.conn
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    assert!(s.out().is_empty(), "a refused listen gets notifications");
}

/// The resource URIs one listen stream follows are bounded like its task ids (256): a listen
/// naming a million held 6.5 times its frame, and every resource update scanned them all.
#[test]
fn a_listen_follows_at_most_256_resources() {
    let mut s = modern_server();
    let uris: Vec<String> = (0..300).map(|i| format!("file:///{i}")).collect();
    let filter = json!({ "resourceSubscriptions": uris }).to_string();
    let (out, _) = s.send(&listen_line(r#""L""#, "", &filter));
    let granted = out[0]["params"]["notifications"]["resourceSubscriptions"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(granted, 256);
    for (uri, delivered) in [("file:///255", 1), ("file:///256", 0)] {
        s.conn
            .notify(
                "notifications/resources/updated",
                Some(raw(&json!({ "uri": uri }).to_string())),
            )
            .unwrap();
        assert_eq!(s.out().len(), delivered, "{uri}");
    }
    // And in bytes: 64 KiB of URIs per listen. Three of 30 KiB pinned 90 KiB (and 256 of a
    // frame each, gigabytes, for as long as the listen lived).
    let uris: Vec<String> = (0..3)
        .map(|i| format!("file:///{i}{}", "x".repeat(30 * 1024)))
        .collect();
    let filter = json!({ "resourceSubscriptions": uris }).to_string();
    let (out, _) = s.send(&listen_line(r#""M""#, "", &filter));
    let granted = &out[0]["params"]["notifications"]["resourceSubscriptions"];
    let count = granted.as_array().map(Vec::len);
    assert!(*granted == json!(uris[..2]), "{count:?} URIs granted");
}

/// Answering a listen request with `respond` ends it as `end_listen` does: "Like every other
/// message on the stream, the response carries `io.modelcontextprotocol/subscriptionId`", and
/// "The result body is otherwise empty". It went out without the id, with the body given.
#[test]
fn respond_to_a_listen_ends_it_with_its_subscription_id() {
    let mut s = modern_server();
    s.send(&listen_line("9", "", r#"{"toolsListChanged":true}"#));
    s.conn.respond(Id::Int(9), raw(r#"{"extra":1}"#)).unwrap();
    let out = s.out();
    assert_eq!(out.len(), 1, "{out:?}");
    let result = &out[0]["result"];
    assert_eq!(result["_meta"]["io.modelcontextprotocol/subscriptionId"], 9);
    assert_eq!(result["resultType"], "complete");
    assert!(result.get("extra").is_none(), "{result}");
    assert!(s.conn.listen_subscriptions().is_empty());
}

fn reviewing_server() -> Raw {
    let mut config = server_config();
    config.policy.review_listens = true;
    Raw::server(config)
}

/// Under `Policy::review_listens` a listen comes to the application, which checks access to
/// each item: nothing goes out on the stream until `grant_listen`, and the stream then hears
/// only what the application kept.
#[test]
fn a_reviewed_listen_hears_only_what_the_application_grants() {
    let mut s = reviewing_server();
    let filter = json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourceSubscriptions": ["file:///mine", "file:///theirs"],
    })
    .to_string();
    let (out, events) = s.send(&listen_line("5", "", &filter));
    assert!(out.is_empty(), "acknowledged before the grant: {out:?}");
    let Some(Ev::Request { id, method, .. }) = events.last() else {
        panic!("the listen did not come to the application: {events:?}");
    };
    assert_eq!(
        (id.as_id(), method.as_str()),
        (Id::Int(5), "subscriptions/listen")
    );
    assert_eq!(s.conn.listen_subscriptions().len(), 1);
    // Not granted yet: hears nothing.
    s.conn
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    assert!(s.out().is_empty());
    // The application is asked about what the listen asked for and we can honour (we do not
    // declare prompts.listChanged), and keeps the tools and one resource.
    use mcpwire::conn::ListenItem;
    assert_eq!(
        s.conn.listen_items(Id::Int(5)),
        Some(vec![
            ListenItem::ToolsListChanged,
            ListenItem::Resource("file:///mine"),
            ListenItem::Resource("file:///theirs"),
        ])
    );
    let mut asked = Vec::new();
    s.conn
        .grant_listen(Id::Int(5), |item| {
            asked.push(format!("{item:?}"));
            matches!(
                item,
                mcpwire::conn::ListenItem::ToolsListChanged
                    | mcpwire::conn::ListenItem::Resource("file:///mine")
            )
        })
        .unwrap();
    assert_eq!(
        asked,
        [
            "ToolsListChanged",
            r#"Resource("file:///mine")"#,
            r#"Resource("file:///theirs")"#
        ]
    );
    let out = s.out();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        out[0]["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///mine"]})
    );
    for (uri, delivered) in [("file:///theirs", 0), ("file:///mine", 1)] {
        let params = json!({ "uri": uri }).to_string();
        s.conn
            .notify("notifications/resources/updated", Some(raw(&params)))
            .unwrap();
        assert_eq!(s.out().len(), delivered, "{uri}");
    }
    // Granted once only.
    assert_eq!(s.conn.listen_items(Id::Int(5)), None);
    assert_eq!(
        s.conn.grant_listen(Id::Int(5), |_| true),
        Err(Error::UnknownRequest)
    );
}

/// A reviewed listen the application refuses gets its error and nothing else; `grant_listen`
/// is only for listens waiting for their grant, and succeeds silently for one the client has
/// cancelled.
#[test]
fn a_reviewed_listen_can_be_refused_and_only_waiting_listens_are_granted() {
    let mut s = reviewing_server();
    s.send(&listen_line("1", "", r#"{"toolsListChanged":true}"#));
    s.conn
        .respond_error(Id::Int(1), -32602, "not yours", None)
        .unwrap();
    let out = s.out();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["error"]["code"], -32602);
    s.conn
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    assert!(s.out().is_empty(), "a refused listen gets notifications");
    assert_eq!(
        s.conn.grant_listen(Id::Int(1), |_| true),
        Err(Error::UnknownRequest)
    );
    // An ordinary request is not a listen.
    s.request("2", "tools/call", r#""name":"slow""#);
    assert_eq!(
        s.conn.grant_listen(Id::Int(2), |_| true),
        Err(Error::UnknownRequest)
    );
    // Cancelled by the client while the application checked it.
    s.send(&listen_line("3", "", r#"{"toolsListChanged":true}"#));
    s.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    );
    assert_eq!(s.conn.grant_listen(Id::Int(3), |_| true), Ok(()));
    assert!(s.out().is_empty());
    // Without the policy the engine grants the listen and the application cannot.
    let mut s = modern_server();
    let (out, events) = s.send(&listen_line("4", "", r#"{"toolsListChanged":true}"#));
    assert_eq!(out.len(), 1);
    assert!(!events.iter().any(|e| matches!(e, Ev::Request { .. })));
    assert_eq!(
        s.conn.grant_listen(Id::Int(4), |_| false),
        Err(Error::UnknownRequest)
    );
}

/// The client cancels its listen: the application hears of it only if it saw the listen
/// (under review). A listen the engine granted came as no event, and its cancellation came as
/// a `PeerCancelled` for an id the application never saw.
#[test]
fn a_cancelled_listen_is_reported_only_to_an_application_that_saw_it() {
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    for (mut s, reviewed) in [(modern_server(), false), (reviewing_server(), true)] {
        s.send(&listen_line("8", "", r#"{"toolsListChanged":true}"#));
        let (_, events) = s.send(cancel);
        let told = events.iter().any(|e| matches!(e, Ev::PeerCancelled { .. }));
        assert_eq!(told, reviewed, "{events:?}");
        assert!(s.conn.listen_subscriptions().is_empty());
        s.conn
            .notify("notifications/tools/list_changed", None)
            .unwrap();
        assert!(s.out().is_empty(), "a cancelled listen hears on");
    }
}

/// A listen waiting for its grant and ended by `respond` or `end_listen` (an application that
/// took `respond` for a grant, a shutdown during the access check) still gets its
/// acknowledgement first, with nothing granted: "The server MUST send
/// notifications/subscriptions/acknowledged as the first message". The result came alone.
#[test]
fn a_reviewed_listen_ended_before_its_grant_is_acknowledged_first() {
    for by_respond in [true, false] {
        let mut s = reviewing_server();
        s.send(&listen_line("7", "", r#"{"toolsListChanged":true}"#));
        if by_respond {
            s.conn.respond(Id::Int(7), raw("{}")).unwrap();
        } else {
            s.conn.end_listen(Id::Int(7)).unwrap();
        }
        let out = s.out();
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0]["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(out[0]["params"]["notifications"], json!({}));
        assert_eq!(
            out[1]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            7
        );
    }
}

/// A listen the application granted is the application's: the client's cancellation of it
/// comes as `PeerCancelled`, as for any request it saw.
#[test]
fn a_granted_listen_the_client_cancels_is_reported() {
    let mut s = reviewing_server();
    s.send(&listen_line("9", "", r#"{"toolsListChanged":true}"#));
    s.conn.grant_listen(Id::Int(9), |_| true).unwrap();
    assert_eq!(s.out().len(), 1);
    let (_, events) = s.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    );
    assert!(
        matches!(events.as_slice(), [Ev::PeerCancelled { id, .. }] if id.as_id() == Id::Int(9)),
        "{events:?}"
    );
}

/// A second round starts from the original params: "If the InputRequiredResult does not
/// contain a requestState field, the client MUST NOT include one in the retry", and the first
/// round's responses answered the first round's requests. The second retry carried both.
#[test]
fn a_second_round_retries_from_the_original_params() {
    let mut p = modern_pair();
    let ask = |key: &str| {
        format!(
            r#"{{"{key}":{{"method":"elicitation/create","params":{{"message":"?","requestedSchema":{{"type":"object","properties":{{}}}}}}}}}}"#
        )
    };
    let mut request = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"t"}"#)))
        .unwrap();
    for (round, state) in [(1, Some("s1")), (2, None), (3, None)] {
        p.step();
        let reqs = p.take_server_events();
        let Some(Ev::Request { id, params, .. }) = reqs.last() else {
            panic!("{reqs:?}")
        };
        let params: Value = serde_json::from_str(params.as_deref().unwrap()).unwrap();
        assert_eq!(params["name"], "t");
        match round {
            1 => assert!(params.get("inputResponses").is_none(), "{params}"),
            2 => {
                assert_eq!(params["requestState"], "s1", "{params}");
                assert!(params["inputResponses"].get("a").is_some(), "{params}");
            }
            _ => {
                assert!(params.get("requestState").is_none(), "{params}");
                let responses = params["inputResponses"].as_object().unwrap();
                assert_eq!(responses.keys().collect::<Vec<_>>(), ["b"], "{params}");
                break;
            }
        }
        let key = if round == 1 { "a" } else { "b" };
        p.server
            .respond_input_required(id.as_id(), Some(raw(&ask(key))), state)
            .unwrap();
        p.step();
        assert!(matches!(
            p.take_client_events().last(),
            Some(Ev::InputRequired { .. })
        ));
        let answer = format!(r#"{{"{key}":{{"action":"decline"}}}}"#);
        request = p.client.retry(p.now, request, Some(raw(&answer))).unwrap();
    }
}

/// "A server MUST send notifications/cancelled referencing a subscriptions/listen request ID
/// when it tears down that subscription stream": the client's listen ends (as `Abandoned`,
/// so the application can listen again). It stayed in flight for good, its cancellation
/// counted as ignored. A cancellation naming any other request of ours is still ignored.
#[test]
fn a_listen_the_server_cancels_ends_on_the_client() {
    let mut p = modern_pair();
    let filter = r#"{"notifications":{"toolsListChanged":true}}"#;
    let listen = p
        .client
        .request(p.now, "subscriptions/listen", Some(raw(filter)))
        .unwrap();
    let call = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"t"}"#)))
        .unwrap();
    p.step();
    p.take_client_events();
    let cancel = |id: i64| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        )
    };
    for id in [call.0, listen.0] {
        p.client
            .handle_input(p.now, format!("{}\n", cancel(id)).as_bytes());
    }
    let events = drain(&mut p.client);
    assert_eq!(events, vec![Ev::Abandoned { request: listen }]);
    assert_eq!(p.client.stats().ignored_cancellations, 1, "the call's");
    assert_eq!(p.client.requests_in_flight(), 1, "the call goes on");
}

#[test]
fn the_version_is_checked_before_the_rest_of_meta() {
    // "If the server does not implement the requested version ... it MUST respond with an
    // UnsupportedProtocolVersionError": a later client's `_meta` may differ in other members,
    // and it must still learn our versions rather than get -32602.
    let mut s = modern_server();
    for (id, meta) in [
        (
            1,
            r#""io.modelcontextprotocol/protocolVersion":"2099-01-01""#,
        ),
        (
            2,
            r#""io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"trace""#,
        ),
        (
            3,
            r#""io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":"new""#,
        ),
    ] {
        let (out, _) = s.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"server/discover","params":{{"_meta":{{{meta}}}}}}}"#
        ));
        assert_eq!(out[0]["error"]["code"], -32022, "{meta}");
        assert_eq!(out[0]["error"]["data"]["requested"], "2099-01-01");
    }
    // A supported version with a bad rest is still -32602.
    let (out, _) = s.send(r#"{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#);
    assert_eq!(out[0]["error"]["code"], -32602);
}

#[test]
fn only_the_ways_out_for_them_send_other_result_types() {
    // "Servers MUST NOT send InputRequiredResult responses on any other client requests", and
    // its inputRequests only as the client declared: `respond` takes complete results only.
    let mut s = modern_server();
    s.request("1", "tools/list", "");
    s.request("2", "tools/call", r#""name":"x""#);
    for result in [
        r#"{"resultType":"input_required","requestState":"s"}"#,
        r#"{"resultType":"input_required","inputRequests":{"q":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}}}"#,
        r#"{"resultType":7,"tools":[]}"#,
        r#"{"resultType":"later","tools":[]}"#,
        r#"{"resultType":"task","task":{}}"#,
    ] {
        for id in [1, 2] {
            assert_eq!(
                s.conn.respond(Id::Int(id), raw(result)),
                Err(Error::InvalidParams),
                "{result}"
            );
        }
    }
    assert!(s.out().is_empty());
    s.conn
        .respond(Id::Int(1), raw(r#"{"resultType":"complete","tools":[]}"#))
        .unwrap();
    assert_eq!(s.out()[0]["result"]["resultType"], "complete");
}

#[test]
fn an_input_required_answer_carries_no_cache_hints() {
    // "Interim results with resultType: input_required ... are not cacheable and carry no
    // caching hints"; the complete answer to the retry carries them.
    let mut s = modern_server();
    s.request("1", "resources/read", r#""uri":"file:///x""#);
    s.conn
        .respond_input_required(Id::Int(1), None, Some("st"))
        .unwrap();
    let out = s.out();
    let r = &out[0]["result"];
    assert_eq!(r["resultType"], "input_required");
    assert!(
        r.get("ttlMs").is_none() && r.get("cacheScope").is_none(),
        "{r}"
    );
    s.request("2", "resources/read", r#""uri":"file:///x""#);
    s.conn
        .respond(Id::Int(2), raw(r#"{"contents":[]}"#))
        .unwrap();
    let out = s.out();
    assert!(out[0]["result"]["ttlMs"].is_u64(), "{}", out[0]);
}

#[test]
fn per_request_logging_needs_the_logging_capability() {
    // "Servers that emit log message notifications MUST declare the logging capability".
    let config = Config::server("s", "1")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let mut s = Raw::server(config);
    s.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"},"name":"t"}}"#);
    assert_eq!(
        s.conn.log(Id::Int(1), LogLevel::Info, None, raw(r#""hi""#)),
        Err(Error::NotNegotiated(Caps::LOGGING))
    );
    assert!(s.out().is_empty());
}

#[test]
fn errors_32021_and_32022_need_their_data() {
    let mut s = modern_server();
    for (id, code, data) in [
        (1, -32021, None),
        (2, -32021, Some(r#"{"requiredCapabilities":"sampling"}"#)),
        (3, -32022, Some(r#"{"supported":["2026-07-28"]}"#)),
        (
            4,
            -32022,
            Some(r#"{"supported":"2026-07-28","requested":"x"}"#),
        ),
    ] {
        s.request(&id.to_string(), "tools/call", r#""name":"x""#);
        assert_eq!(
            s.conn
                .respond_error(Id::Int(id), code, "no", data.map(|d| raw(d))),
            Err(Error::InvalidParams),
            "{code} {data:?}"
        );
    }
    assert!(s.out().is_empty());
    s.conn
        .respond_error(
            Id::Int(4),
            -32022,
            "no",
            Some(raw(r#"{"supported":["2026-07-28"],"requested":"x"}"#)),
        )
        .unwrap();
    assert_eq!(s.out()[0]["error"]["code"], -32022);
}

/// "The client MUST NOT write JSON-RPC responses" (stdio, 2026-07-28): not to a request, and
/// not as an error about a frame it could not read either. Each such frame is a violation.
#[test]
fn a_stateless_client_writes_no_response_even_to_what_it_cannot_read() {
    for frame in [
        r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"ping","method":"ping"}"#,
        r#"{"id":2,"result":{}}"#,
        r#"{not json"#,
        r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
    ] {
        let mut p = modern_pair();
        assert_eq!(p.client.state(), State::Operating);
        p.client
            .handle_input(p.now, format!("{frame}\n").as_bytes());
        let out = take_output(&mut p.client);
        assert!(
            out.is_empty(),
            "{frame} got {}",
            String::from_utf8_lossy(&out)
        );
        let events = drain(&mut p.client);
        assert!(
            events.iter().any(|e| matches!(e, Ev::Violation { .. })),
            "{frame}: {events:?}"
        );
    }
    // Over the frame size limit, a request is not answered either.
    let mut client = modern(client_config());
    client.limits.max_frame = 4096;
    let mut p = Pair::new(client, server_config());
    p.step();
    assert_eq!(p.client.state(), State::Operating);
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}\n",
        "a".repeat(5000)
    );
    p.client.handle_input(p.now, long.as_bytes());
    assert!(take_output(&mut p.client).is_empty());
}

/// A client that can only speak the stateless era writes no response while its discover probe
/// is still out either: it is in that era from its first byte ("The client MUST NOT write
/// JSON-RPC responses", stdio, 2026-07-28). So is a dual-era client told to start stateless
/// (`ClientEra::Modern`), which never falls back to the handshake.
#[test]
fn a_stateless_client_writes_no_response_before_its_probe_is_answered() {
    let mut dual = client_config();
    dual.client_era = ClientEra::Modern;
    for config in [modern(client_config()), dual] {
        for frame in [
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"roots/list"}"#,
            r#"{not json"#,
            r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#,
        ] {
            let mut client = Connection::new(config.clone(), Timestamp::ZERO).unwrap();
            let probe = take_output(&mut client);
            assert!(String::from_utf8_lossy(&probe).contains("server/discover"));
            client.handle_input(Timestamp::ZERO, format!("{frame}\n").as_bytes());
            let out = take_output(&mut client);
            assert!(
                out.is_empty(),
                "{frame} got {}",
                String::from_utf8_lossy(&out)
            );
        }
    }
}

/// A retry after "input required" keeps what the first round asked for: its timeout
/// (restarted at the retry) and its progress.
#[test]
fn a_retry_keeps_the_requests_timeout_and_progress() {
    let mut p = modern_pair();
    let first = p
        .client
        .request_with(
            p.now,
            "tools/call",
            Some(raw(r#"{"name":"login"}"#)),
            mcpwire::conn::RequestOptions {
                timeout: Some(Duration::from_secs(600)),
                progress: true,
                ..Default::default()
            },
        )
        .unwrap();
    p.step();
    let reqs = p.take_server_events();
    let Ev::Request { id, .. } = &reqs[0] else {
        panic!()
    };
    p.server
        .respond_input_required(id.as_id(), None, Some("s"))
        .unwrap();
    p.step();
    assert!(matches!(
        &p.take_client_events()[..],
        [Ev::InputRequired { .. }]
    ));
    let second = p.client.retry(p.now, first, None).unwrap();
    p.step();
    let line = p.lines(true).last().unwrap().clone();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["params"]["_meta"]["progressToken"],
        json!(second.0),
        "{line}"
    );
    let reqs = p.take_server_events();
    let Ev::Request { id, .. } = &reqs[0] else {
        panic!("{reqs:?}")
    };
    p.server.progress(id.as_id(), 1.0, None, None).unwrap();
    // Past the default timeout (60 s), within the request's own.
    p.advance(Duration::from_secs(120));
    let events = p.take_client_events();
    assert!(
        matches!(&events[..], [Ev::Progress { request, .. }] if *request == second),
        "{events:?}"
    );
    assert_eq!(p.client.requests_in_flight(), 1);
}

/// A -32022's `supported` is kept only as the schema has it, an array of strings, and within
/// a refusal's bound: anything else (a string, an object, megabytes of versions) is `[]`. It
/// was copied whole, whatever it was.
#[test]
fn a_refusals_supported_list_is_kept_only_as_an_array_of_strings() {
    let refused = |supported: &str| {
        let mut c = Connection::new(modern(client_config()), T0).unwrap();
        take_output(&mut c);
        c.handle_input(
            T0,
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{{\"code\":-32022,\"message\":\"no\",\"data\":{{\"supported\":{supported},\"requested\":\"2026-07-28\"}}}}}}\n"
            )
            .as_bytes(),
        );
        match drain(&mut c).as_slice() {
            [
                Ev::Closed {
                    reason: CloseReason::VersionRefused { supported },
                },
            ] => supported.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(refused(r#"["2099-01-01"]"#), r#"["2099-01-01"]"#);
    assert_eq!(refused(r#""2099-01-01""#), "[]");
    assert_eq!(refused(r#"{"a":1}"#), "[]");
    assert_eq!(refused(r#"[1]"#), "[]");
    let many = format!("[{}]", vec![r#""2099-01-01""#; 200].join(","));
    assert_eq!(refused(&many), "[]");
}

/// With the output full (a server that does not read), a client's close still ends its
/// listens at once, leaving the cancellation out as a timeout does. The close's cancel was
/// refused for want of room, so the listen stayed in flight and the close waited out its
/// whole grace (found by a review of correlation).
#[test]
fn a_client_close_ends_its_listens_even_with_the_output_full() {
    let (mut p, listen) = listening_pair();
    p.take_client_events();
    let big = format!(
        r#"{{"name":"echo","arguments":{{"text":"{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    let mut sent = 0;
    while p
        .client
        .request(p.now, "tools/call", Some(raw(&big)))
        .is_ok()
    {
        sent += 1;
        assert!(sent < 100, "the output never filled");
    }
    let in_flight = p.client.requests_in_flight();
    p.client.close(p.now, Duration::from_secs(30));
    let events = drain(&mut p.client);
    assert!(
        events.contains(&Ev::Abandoned { request: listen }),
        "{events:?}"
    );
    assert_eq!(p.client.requests_in_flight(), in_flight - 1);
}
