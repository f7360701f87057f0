//! The conformance fixture's exact content, checked directly (not through the suite, whose
//! checks can pass for the wrong reason): `HttpServer` plus the fixture in-process, simulated
//! time, no sockets.

#[path = "../examples/conformance/fixture.rs"]
mod fixture;

use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::http::client::StreamReader;
use mcpwire::http::{Body, HttpRequest, HttpResponse, HttpServer};
use serde_json::{Value, json};

struct Harness {
    server: HttpServer,
    fixture: fixture::Fixture,
    now: Timestamp,
    /// Requests sent: mixed into the random bytes, so that each session gets an id of its own.
    sent: u16,
}

fn rng(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(29).wrapping_add(7);
    }
}

impl Harness {
    fn new() -> Self {
        Self::with(fixture::http_config())
    }

    fn with(config: mcpwire::http::HttpServerConfig) -> Self {
        Harness {
            server: HttpServer::new(config),
            fixture: fixture::Fixture::new([7; 16]),
            now: Timestamp::ZERO,
            sent: 0,
        }
    }

    fn send(&mut self, method: &str, headers: &[(&str, &str)], body: &str) -> HttpResponse {
        // As a conforming client sends them.
        let mut all = vec![
            ("Host", "127.0.0.1:3000"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if method == "POST" {
            all.push(("Content-Type", "application/json"));
        }
        all.extend_from_slice(headers);
        let req = HttpRequest {
            method,
            headers: &all,
            body: body.as_bytes(),
        };
        let mut seed = 0u8;
        self.sent = self.sent.wrapping_add(1);
        let sent = self.sent.to_le_bytes();
        let mut random = |buf: &mut [u8]| {
            seed = seed.wrapping_add(1);
            rng(buf);
            buf[0] ^= seed;
            if let [_, a, b, ..] = buf {
                *a ^= sent[0];
                *b ^= sent[1];
            }
        };
        let r = self.server.handle_request(self.now, &req, &mut random);
        self.fixture.drive(self.now, &mut self.server);
        self.server.settle(r)
    }

    /// Advances simulated time, running the fixture's and the engine's timers.
    fn advance(&mut self, by: Duration) {
        self.now = self.now.after(by);
        self.server.handle_timeout(self.now);
        self.fixture.handle_timeout(self.now, &mut self.server);
    }

    /// Everything a response carries, as messages (JSON body or drained stream).
    fn messages(&mut self, r: &HttpResponse, reader: &mut StreamReader) -> (Vec<Value>, bool) {
        match &r.body {
            Body::Complete(_, b) => (vec![serde_json::from_slice(b).unwrap()], true),
            Body::Empty => (Vec::new(), true),
            Body::Stream(id) => {
                let mut out = Vec::new();
                let mut finished = false;
                while let Some(o) = self.server.poll_stream(*id) {
                    let bytes = o.bytes.to_vec();
                    finished = o.finished;
                    reader.feed(&bytes, |m| out.push(serde_json::from_slice(m).unwrap()));
                    self.server.consume_stream(*id, bytes.len());
                    if bytes.is_empty() || finished {
                        break;
                    }
                }
                (out, finished)
            }
        }
    }

    /// A request's final answer (runs timers until it comes).
    fn call(&mut self, headers: &[(&str, &str)], body: &str) -> (u16, Vec<Value>) {
        let r = self.send("POST", headers, body);
        let status = r.status;
        let mut reader = StreamReader::new();
        let mut all = Vec::new();
        for _ in 0..100 {
            let (msgs, finished) = self.messages(&r, &mut reader);
            all.extend(msgs);
            if finished {
                return (status, all);
            }
            self.advance(Duration::from_millis(10));
        }
        panic!("no answer to {body}: {all:?}");
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;

fn session(h: &mut Harness) -> String {
    let r = h.send("POST", &[], INIT);
    assert_eq!(r.status, 200);
    let sid = r
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("Mcp-Session-Id"))
        .unwrap()
        .1
        .clone();
    let r = h.send(
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    sid
}

fn result_of(msgs: &[Value], id: i64) -> Value {
    msgs.iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer {id} in {msgs:?}"))
        .clone()
}

fn rpc(id: i64, method: &str, params: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string()
}

#[test]
fn tools_resources_and_prompts_have_the_exact_content() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let s = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let call = |h: &mut Harness, id: i64, method: &str, params: Value| {
        let (status, msgs) = h.call(&s, &rpc(id, method, params));
        assert_eq!(status, 200);
        result_of(&msgs, id)
    };
    let r = call(&mut h, 2, "tools/call", json!({"name":"test_simple_text"}));
    assert_eq!(
        r["result"]["content"],
        json!([{"type":"text","text":"This is a simple text response for testing."}])
    );
    let r = call(
        &mut h,
        3,
        "tools/call",
        json!({"name":"test_error_handling"}),
    );
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(
        r["result"]["content"][0]["text"],
        "This tool intentionally returns an error for testing"
    );
    let r = call(
        &mut h,
        4,
        "tools/call",
        json!({"name":"test_embedded_resource"}),
    );
    assert_eq!(
        r["result"]["content"][0],
        json!({"type":"resource","resource":{"uri":"test://embedded-resource","mimeType":"text/plain","text":"This is an embedded resource content."}})
    );
    let r = call(
        &mut h,
        5,
        "tools/call",
        json!({"name":"test_image_content"}),
    );
    assert_eq!(r["result"]["content"][0]["mimeType"], "image/png");
    assert_eq!(r["result"]["content"][0]["data"], fixture::PNG);
    let r = call(
        &mut h,
        6,
        "tools/call",
        json!({"name":"test_audio_content"}),
    );
    assert_eq!(r["result"]["content"][0]["mimeType"], "audio/wav");
    // The audio really is a RIFF/WAVE file, the image a PNG.
    assert!(fixture::WAV.starts_with("UklGR"), "RIFF");
    assert!(fixture::PNG.starts_with("iVBORw0KGgo"), "PNG signature");
    let r = call(
        &mut h,
        7,
        "prompts/get",
        json!({"name":"test_prompt_with_arguments","arguments":{"arg1":"hello","arg2":"world"}}),
    );
    assert_eq!(
        r["result"]["messages"],
        json!([{"role":"user","content":{"type":"text","text":"Prompt with arguments: arg1='hello', arg2='world'"}}])
    );
    let r = call(
        &mut h,
        8,
        "prompts/get",
        json!({"name":"test_simple_prompt"}),
    );
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        "This is a simple prompt for testing."
    );
    let r = call(
        &mut h,
        9,
        "resources/read",
        json!({"uri":"test://static-text"}),
    );
    assert_eq!(
        r["result"]["contents"],
        json!([{"uri":"test://static-text","mimeType":"text/plain","text":"This is the content of the static text resource."}])
    );
    let r = call(
        &mut h,
        10,
        "resources/read",
        json!({"uri":"test://template/123/data"}),
    );
    let text: Value =
        serde_json::from_str(r["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text,
        json!({"id":"123","templateTest":true,"data":"Data for ID: 123"})
    );
    assert_eq!(r["result"]["contents"][0]["mimeType"], "application/json");
    let r = call(&mut h, 11, "resources/read", json!({"uri":"test://nope"}));
    assert_eq!(r["error"]["code"], -32002, "the handshake era's code");
    assert_eq!(r["error"]["data"]["uri"], "test://nope");
    let r = call(
        &mut h,
        12,
        "resources/subscribe",
        json!({"uri":"test://watched-resource"}),
    );
    assert_eq!(r["result"], json!({}));
    let r = call(&mut h, 13, "tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    let schema_tool = tools
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .unwrap();
    // Verbatim: every keyword survives the engine.
    assert_eq!(
        schema_tool["inputSchema"],
        fixture::json_schema_tool()["inputSchema"]
    );
    assert_eq!(
        schema_tool["inputSchema"]["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema_tool["inputSchema"]["additionalProperties"], false);
    assert!(schema_tool["inputSchema"]["$defs"]["address"].is_object());
    for t in tools {
        assert!(
            t["description"].is_string() && t["inputSchema"]["type"] == "object",
            "{t}"
        );
    }
    let r = call(&mut h, 14, "logging/setLevel", json!({"level":"info"}));
    assert_eq!(r["result"], json!({}));
    let r = call(
        &mut h,
        15,
        "completion/complete",
        json!({"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"he"}}),
    );
    assert!(r["result"]["completion"]["values"].is_array());
}

#[test]
fn progress_is_0_50_100_of_100_about_50_ms_apart_then_the_answer() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let body = rpc(
        2,
        "tools/call",
        json!({"name":"test_tool_with_progress","_meta":{"progressToken":"tok"}}),
    );
    let r = h.send("POST", &[("Mcp-Session-Id", &sid)], &body);
    let mut reader = StreamReader::new();
    let mut seen = Vec::new();
    let mut finished = false;
    for _ in 0..20 {
        let (msgs, done) = h.messages(&r, &mut reader);
        for m in msgs {
            seen.push((h.now, m));
        }
        if done {
            finished = true;
            break;
        }
        h.advance(Duration::from_millis(25));
    }
    assert!(finished);
    let progress: Vec<(f64, f64, Value)> = seen
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .map(|(_, m)| {
            (
                m["params"]["progress"].as_f64().unwrap(),
                m["params"]["total"].as_f64().unwrap(),
                m["params"]["progressToken"].clone(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        vec![
            (0.0, 100.0, json!("tok")),
            (50.0, 100.0, json!("tok")),
            (100.0, 100.0, json!("tok")),
        ]
    );
    let times: Vec<Timestamp> = seen.iter().map(|(t, _)| *t).collect();
    assert!(times[1].since(times[0]) >= Duration::from_millis(50));
    assert!(times[2].since(times[1]) >= Duration::from_millis(50));
    assert_eq!(
        result_of(&seen.into_iter().map(|(_, m)| m).collect::<Vec<_>>(), 2)["result"]["content"][0]
            ["type"],
        "text"
    );
}

#[test]
fn logging_sends_three_info_messages_during_the_call() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let (_, msgs) = h.call(
        &[("Mcp-Session-Id", &sid)],
        &rpc(2, "tools/call", json!({"name":"test_tool_with_logging"})),
    );
    let logs: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logs.len(), 3, "{msgs:?}");
    assert!(logs.iter().all(|m| m["params"]["level"] == "info"));
    assert_eq!(logs[0]["params"]["data"], "Tool execution started");
    assert_eq!(msgs.last().unwrap()["id"], 2);
}

/// Calls `test_sampling` (id 2) in session `sid`: its response, its reader, and the first
/// messages on its stream, which is still open (the sampling request first).
fn call_test_sampling(h: &mut Harness, sid: &str) -> (HttpResponse, StreamReader, Vec<Value>) {
    let r = h.send(
        "POST",
        &[("Mcp-Session-Id", sid)],
        &rpc(
            2,
            "tools/call",
            json!({"name":"test_sampling","arguments":{"prompt":"Say hi"}}),
        ),
    );
    let mut reader = StreamReader::new();
    let (msgs, finished) = h.messages(&r, &mut reader);
    assert!(!finished);
    assert_eq!(msgs[0]["method"], "sampling/createMessage");
    (r, reader, msgs)
}

#[test]
fn sampling_and_elicitation_go_to_the_client_on_the_calls_stream() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let s = [("Mcp-Session-Id", sid.as_str())];
    let (r, mut reader, msgs) = call_test_sampling(&mut h, &sid);
    let ask = &msgs[0];
    assert_eq!(
        ask["params"]["messages"],
        json!([{"role":"user","content":{"type":"text","text":"Say hi"}}])
    );
    assert_eq!(ask["params"]["maxTokens"], 100);
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"role":"assistant",
        "content":{"type":"text","text":"hi!"},"model":"m","stopReason":"endTurn"}});
    assert_eq!(h.send("POST", &s, &answer.to_string()).status, 202);
    let (msgs, finished) = h.messages(&r, &mut reader);
    assert!(finished);
    assert_eq!(
        result_of(&msgs, 2)["result"]["content"][0]["text"],
        "LLM response: hi!"
    );
    // SEP-1034 defaults, exactly.
    let r = h.send(
        "POST",
        &s,
        &rpc(
            3,
            "tools/call",
            json!({"name":"test_elicitation_sep1034_defaults"}),
        ),
    );
    let (msgs, _) = h.messages(&r, &mut StreamReader::new());
    let props = &msgs[0]["params"]["requestedSchema"]["properties"];
    assert_eq!(props["name"]["default"], "John Doe");
    assert_eq!(props["age"]["default"], 30);
    assert_eq!(props["score"]["default"], 95.5);
    assert_eq!(props["status"]["default"], "active");
    assert_eq!(
        props["status"]["enum"],
        json!(["active", "inactive", "pending"])
    );
    assert_eq!(props["verified"]["default"], true);
}

/// A sampling request the client never answers times out, and the tool call that made it is
/// answered with an error result. The fixture heard only answers and errors: the call waited
/// for good, its stream open and its slot taken.
#[test]
fn a_sampling_request_left_unanswered_ends_its_tool_call() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let (r, mut reader, _) = call_test_sampling(&mut h, &sid);
    h.advance(Duration::from_secs(61));
    h.fixture.drive(h.now, &mut h.server);
    let (msgs, finished) = h.messages(&r, &mut reader);
    assert!(finished, "{msgs:?}");
    let result = &result_of(&msgs, 2)["result"];
    assert_eq!(result["isError"], true, "{msgs:?}");
}

/// An unknown tool is a protocol error, -32602 (the tools page's "Unknown tool" example), in
/// both eras: the fixture answered it with an `isError` result, a tool's own failure.
#[test]
fn an_unknown_tool_is_invalid_params_in_both_eras() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let (_, msgs) = h.call(
        &[("Mcp-Session-Id", &sid)],
        &rpc(2, "tools/call", json!({"name":"no_such_tool"})),
    );
    assert_eq!(result_of(&msgs, 2)["error"]["code"], -32602, "{msgs:?}");
    let (_, r) = modern(
        &mut h,
        3,
        "tools/call",
        Some("no_such_tool"),
        json!({"name":"no_such_tool"}),
        json!({}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// A `tasks/*` request whose params are nested deeper than an application payload may be
/// (the engine takes messages 128 deep; `RawJson` payloads 124) gets an error answer: the
/// fixture re-serialised them and panicked, the request never answered (and with it every
/// event of that drive).
#[test]
fn tasks_params_nested_too_deep_get_an_error_not_a_panic() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(124), "]".repeat(124));
    let body = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/x","params":{deep}}}"#);
    let (_, msgs) = h.call(&[("Mcp-Session-Id", &sid)], &body);
    assert_eq!(result_of(&msgs, 2)["error"]["code"], -32602, "{msgs:?}");
}

/// An answer the engine refuses for a full output (here the progress tool's, right after its
/// last progress report filled a 64-byte output) is given again once the output has room:
/// it was dropped, and the call waited for good.
#[test]
fn an_answer_refused_for_a_full_output_is_given_again() {
    let mut config = fixture::http_config();
    config.server.limits.max_buffered_output = 64;
    let mut h = Harness::with(config);
    let sid = session(&mut h);
    let (_, msgs) = h.call(
        &[("Mcp-Session-Id", &sid)],
        &rpc(
            2,
            "tools/call",
            json!({"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}),
        ),
    );
    let answer = result_of(&msgs, 2);
    assert!(
        answer["result"]
            .to_string()
            .contains("Progress test completed"),
        "{msgs:?}"
    );
}

/// An unknown resource is -32002 in the handshake era (its resources page) and -32602 in
/// 2026-07-28 (SEP-2164, which forbids -32002): the fixture answered -32602 in both.
#[test]
fn an_unknown_resource_has_each_eras_code() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let (_, msgs) = h.call(
        &[("Mcp-Session-Id", &sid)],
        &rpc(
            2,
            "resources/read",
            json!({"uri":"test://no-such-resource"}),
        ),
    );
    assert_eq!(result_of(&msgs, 2)["error"]["code"], -32002, "{msgs:?}");
    let (_, r) = modern(
        &mut h,
        3,
        "resources/read",
        Some("test://no-such-resource"),
        json!({"uri":"test://no-such-resource"}),
        json!({}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// A session's resource subscriptions are bounded: a client subscribing to ever new URIs grew
/// the fixture's set for as long as its session lived.
#[test]
fn resource_subscriptions_are_bounded_per_session() {
    let mut h = Harness::new();
    let sid = session(&mut h);
    let s = [("Mcp-Session-Id", sid.as_str())];
    for i in 0..256 {
        let (_, msgs) = h.call(
            &s,
            &rpc(
                10 + i,
                "resources/subscribe",
                json!({"uri": format!("test://sub/{i}")}),
            ),
        );
        assert!(result_of(&msgs, 10 + i).get("result").is_some(), "{msgs:?}");
    }
    let (_, msgs) = h.call(
        &s,
        &rpc(300, "resources/subscribe", json!({"uri":"test://sub/more"})),
    );
    assert_eq!(result_of(&msgs, 300)["error"]["code"], -32602, "{msgs:?}");
    // One held already is still fine.
    let (_, msgs) = h.call(
        &s,
        &rpc(301, "resources/subscribe", json!({"uri":"test://sub/7"})),
    );
    assert!(result_of(&msgs, 301).get("result").is_some(), "{msgs:?}");
}

/// And over all sessions together, 16 MiB of URIs: 1,024 sessions of 256 URIs of 8 KiB each
/// could hold 2 GiB. A `slow_compute` label, kept for up to an hour, is at most 1 KiB.
#[test]
fn subscriptions_over_all_sessions_and_labels_are_bounded() {
    let mut h = Harness::new();
    let long = "u".repeat(8000);
    let mut refused = None;
    'sessions: for n in 0..9 {
        let sid = session(&mut h);
        let s = [("Mcp-Session-Id", sid.as_str())];
        for i in 0..256 {
            let id = 10 + i;
            let uri = format!("test://{n}/{i}/{long}");
            let (_, msgs) = h.call(&s, &rpc(id, "resources/subscribe", json!({"uri": uri})));
            if result_of(&msgs, id).get("error").is_some() {
                refused = Some((n, i));
                break 'sessions;
            }
        }
    }
    // About 2,094 URIs of 8,010 to 8,012 bytes fit in 16 MiB.
    let (n, i) = refused.expect("a subscription refused past 16 MiB");
    let held = n * 256 + i;
    assert!((2090..=2095).contains(&held), "refused after {held} URIs");

    let sid = session(&mut h);
    let s = [("Mcp-Session-Id", sid.as_str())];
    for (len, ok) in [(1024, true), (1025, false)] {
        let label = "l".repeat(len);
        let (_, msgs) = h.call(
            &s,
            &rpc(
                5,
                "tools/call",
                json!({"name":"slow_compute","arguments":{"seconds":0,"label":label}}),
            ),
        );
        let answer = result_of(&msgs, 5);
        assert_eq!(answer.get("result").is_some(), ok, "{len}: {answer}");
    }
}

// ---- 2026-07-28 ------------------------------------------------------------------------------

fn modern(
    h: &mut Harness,
    id: i64,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    caps: Value,
) -> (u16, Value) {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":caps});
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        headers.push(("Mcp-Name", n));
    }
    let (status, msgs) = h.call(&headers, &rpc(id, method, params));
    (status, result_of(&msgs, id))
}

#[test]
fn stateless_input_required_round_trips_and_refusals() {
    let mut h = Harness::new();
    let all = json!({"sampling":{},"elicitation":{},"roots":{}});
    let tool = "test_input_required_result_elicitation";
    let (status, r) = modern(
        &mut h,
        1,
        "tools/call",
        Some(tool),
        json!({"name":tool}),
        all.clone(),
    );
    assert_eq!(status, 200);
    assert_eq!(r["result"]["resultType"], "input_required");
    assert_eq!(
        r["result"]["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    assert_eq!(
        r["result"]["inputRequests"]["user_name"]["params"]["message"],
        "What is your name?"
    );
    let (_, r) = modern(
        &mut h,
        2,
        "tools/call",
        Some(tool),
        json!({"name":tool,
        "inputResponses":{"user_name":{"action":"accept","content":{"name":"Alice"}}}}),
        all.clone(),
    );
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["content"][0]["text"], "Hello, Alice!");
    // The legacy-style tools ask through input_required too, and a retry that carries the
    // answer completes (it used to ask again, forever).
    for (id, tool, args, answer) in [
        (
            10,
            "test_elicitation",
            json!({"message":"Who?"}),
            json!({"action":"accept","content":{"username":"a","email":"b"}}),
        ),
        (
            12,
            "test_sampling",
            json!({"prompt":"Hi"}),
            json!({"role":"assistant","content":{"type":"text","text":"Hello"},"model":"m"}),
        ),
    ] {
        let (_, r) = modern(
            &mut h,
            id,
            "tools/call",
            Some(tool),
            json!({"name":tool,"arguments":args}),
            all.clone(),
        );
        assert_eq!(r["result"]["resultType"], "input_required", "{tool}: {r}");
        let (_, r) = modern(
            &mut h,
            id + 1,
            "tools/call",
            Some(tool),
            json!({"name":tool,"arguments":args,"inputResponses":{"input":answer}}),
            all.clone(),
        );
        assert_eq!(r["result"]["resultType"], "complete", "{tool}: {r}");
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("Input received")
        );
    }
    // State round trip, and a tampered state refused.
    let tool = "test_input_required_result_tampered_state";
    let (_, r) = modern(
        &mut h,
        3,
        "tools/call",
        Some(tool),
        json!({"name":tool}),
        all.clone(),
    );
    let state = r["result"]["requestState"].as_str().unwrap().to_owned();
    let ok = json!({"confirm":{"action":"accept","content":{"ok":true}}});
    let (_, r) = modern(
        &mut h,
        4,
        "tools/call",
        Some(tool),
        json!({"name":tool,"inputResponses":ok,"requestState":state}),
        all.clone(),
    );
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("state-ok")
    );
    let (_, r) = modern(
        &mut h,
        5,
        "tools/call",
        Some(tool),
        json!({"name":tool,"inputResponses":ok,"requestState":format!("{state}-TAMPERED")}),
        all.clone(),
    );
    assert_eq!(r["error"]["code"], -32602);
    // Only what the request declared.
    let tool = "test_input_required_result_capabilities";
    let (_, r) = modern(
        &mut h,
        6,
        "tools/call",
        Some(tool),
        json!({"name":tool}),
        json!({"sampling":{}}),
    );
    let reqs = r["result"]["inputRequests"].as_object().unwrap();
    assert!(
        reqs.values()
            .all(|v| v["method"] == "sampling/createMessage"),
        "{reqs:?}"
    );
    // A tool that needs sampling, without it: -32021 and 400.
    let tool = "test_missing_capability";
    let (status, r) = modern(
        &mut h,
        7,
        "tools/call",
        Some(tool),
        json!({"name":tool}),
        json!({}),
    );
    assert_eq!(status, 400);
    assert_eq!(r["error"]["code"], -32021);
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"sampling":{}})
    );
    // Caching hints on cacheable results.
    let (_, r) = modern(&mut h, 8, "tools/list", None, json!({}), json!({}));
    assert!(r["result"]["ttlMs"].is_u64());
    assert!(matches!(
        r["result"]["cacheScope"].as_str(),
        Some("public" | "private")
    ));
    // Nothing stays behind.
    assert_eq!(h.server.connections().len(), 0);
    assert_eq!(h.server.open_streams(), 0);
    assert_eq!(h.fixture.pending(), 0);
}

/// The fixture's tasks that ask through elicitation (`confirm_delete`): a client that did not
/// declare form elicitation is refused with -32021 before a task starts, and a `tasks/get`
/// whose requestor did not declare it gets -32021 instead of the task's `inputRequests`
/// ("Servers MUST NOT send an inputRequests that the client has not declared support for").
#[test]
fn tasks_that_ask_through_elicitation_need_it_declared() {
    let mut h = Harness::new();
    let tasks_only = json!({"extensions":{"io.modelcontextprotocol/tasks":{}}});
    let with_elicitation =
        json!({"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}});
    let call = json!({"name":"confirm_delete","arguments":{"filename":"a.txt"}});
    let (_, r) = modern(
        &mut h,
        1,
        "tools/call",
        Some("confirm_delete"),
        call.clone(),
        tasks_only.clone(),
    );
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"requiredCapabilities":{"elicitation":{}}})
    );
    let (_, r) = modern(
        &mut h,
        2,
        "tools/call",
        Some("confirm_delete"),
        call,
        with_elicitation.clone(),
    );
    let task = r["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    let task = task.to_owned();
    let task = task.as_str();
    let get = json!({ "taskId": task });
    let mut asked = Value::Null;
    for id in 3..50 {
        h.advance(Duration::from_millis(20));
        let (_, r) = modern(
            &mut h,
            id,
            "tasks/get",
            Some(task),
            get.clone(),
            with_elicitation.clone(),
        );
        if r["result"]["status"] == "input_required" {
            asked = r;
            break;
        }
    }
    assert_eq!(
        asked["result"]["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{asked}"
    );
    let (_, r) = modern(&mut h, 60, "tasks/get", Some(task), get, tasks_only);
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"requiredCapabilities":{"elicitation":{}}})
    );
}

/// Task ids come from the host's random source when it gives one (`with_random`), as a server
/// must ("sufficient entropy that a third party cannot enumerate or guess them"); the seeded
/// default is for tests.
#[test]
fn task_ids_come_from_the_hosts_random_source() {
    let mut h = Harness::new();
    h.fixture = fixture::Fixture::new([7; 16]).with_random(|buf: &mut [u8]| buf.fill(0xab));
    let caps = json!({"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}});
    let call = json!({"name":"confirm_delete","arguments":{"filename":"a.txt"}});
    let (_, r) = modern(&mut h, 1, "tools/call", Some("confirm_delete"), call, caps);
    assert_eq!(r["result"]["taskId"], "ab".repeat(16), "{r}");
}
