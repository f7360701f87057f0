//! Soak: many concurrent sessions and streams through `HttpServer` and the conformance fixture,
//! in-process with simulated time and simulated connection drops (bounded well under 30 s).
//!
//! Asserts that nothing is lost or duplicated when a stream drops (even mid-event) and is
//! resumed with `Last-Event-ID`, that sessions, streams, connections and fixture work return to
//! zero after DELETE, and that live heap bytes (a counting allocator) do not grow round over
//! round.

// The test reports its own wall time: it reads the clock (the engine never does).
#![allow(clippy::disallowed_methods)]

#[path = "../examples/conformance/fixture.rs"]
mod fixture;

use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::http::client::StreamReader;
use mcpwire::http::{Body, HttpRequest, HttpResponse, HttpServer, HttpStreamId};
use serde_json::{Value, json};

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const SESSIONS: usize = 48;
const CALLS_PER_SESSION: usize = 4;
const STATELESS_PER_ROUND: usize = 64;
const ROUNDS: usize = 12;

struct Sim {
    server: HttpServer,
    fixture: fixture::Fixture,
    now: Timestamp,
    seed: u64,
}

impl Sim {
    fn rand(&mut self) -> u64 {
        // xorshift: deterministic drops.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed
    }

    fn send(&mut self, method: &str, headers: &[(&str, &str)], body: &str) -> HttpResponse {
        let mut all = vec![
            ("Host", "localhost:9"),
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
        let mut counter = self.rand();
        let mut random = |buf: &mut [u8]| {
            for b in buf {
                counter = counter
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *b = (counter >> 56) as u8;
            }
        };
        let r = self.server.handle_request(self.now, &req, &mut random);
        self.fixture.drive(self.now, &mut self.server);
        self.server.settle(r)
    }

    fn tick(&mut self) {
        self.now = self.now.after(Duration::from_millis(10));
        self.server.handle_timeout(self.now);
        self.fixture.handle_timeout(self.now, &mut self.server);
    }
}

/// One tool call as a client sees it.
struct Call {
    session: usize,
    id: i64,
    stream: Option<HttpStreamId>,
    reader: StreamReader,
    messages: Vec<Value>,
    finished: bool,
    drops: u32,
}

fn session(sim: &mut Sim) -> String {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}"#;
    let r = sim.send("POST", &[], init);
    assert_eq!(r.status, 200);
    let sid = r
        .headers
        .iter()
        .find(|(k, _)| *k == "Mcp-Session-Id")
        .unwrap()
        .1
        .clone();
    let r = sim.send(
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    sid
}

fn round(sim: &mut Sim) {
    let sids: Vec<String> = (0..SESSIONS).map(|_| session(sim)).collect();
    let mut calls = Vec::new();
    for (si, sid) in sids.iter().enumerate() {
        for c in 0..CALLS_PER_SESSION {
            let id = (si * 100 + c) as i64 + 1;
            let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
                "name":"test_tool_with_progress","_meta":{"progressToken":id}}})
            .to_string();
            let r = sim.send("POST", &[("Mcp-Session-Id", sid)], &body);
            let Body::Stream(stream) = r.body else {
                panic!("{r:?}")
            };
            calls.push(Call {
                session: si,
                id,
                stream: Some(stream),
                reader: StreamReader::new(),
                messages: Vec::new(),
                finished: false,
                drops: 0,
            });
        }
    }
    // Stateless requests alongside.
    for i in 0..STATELESS_PER_ROUND {
        let body = json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"test_simple_text",
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})
        .to_string();
        let r = sim.send(
            "POST",
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "test_simple_text"),
            ],
            &body,
        );
        match r.body {
            Body::Complete(_, b) => {
                let v: Value = serde_json::from_slice(&b).unwrap();
                assert_eq!(v["result"]["content"][0]["text"], fixture::SIMPLE_TEXT);
            }
            other => panic!("{other:?}"),
        }
    }
    // Drain, dropping connections at random (sometimes mid-event) and resuming them.
    for _ in 0..200 {
        if calls.iter().all(|c| c.finished) {
            break;
        }
        for c in calls.iter_mut() {
            if c.finished {
                continue;
            }
            let Some(stream) = c.stream else {
                // Dropped: reconnect with Last-Event-ID.
                c.reader.reconnected();
                let last = c
                    .reader
                    .last_event_id()
                    .expect("the priming event had an id")
                    .to_owned();
                let sid = sids[c.session].clone();
                let r = sim.send(
                    "GET",
                    &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
                    "",
                );
                let Body::Stream(s) = r.body else {
                    panic!("{r:?}")
                };
                c.stream = Some(s);
                continue;
            };
            let Some(out) = sim.server.poll_stream(stream) else {
                panic!("stream {stream:?} vanished");
            };
            let mut bytes = out.bytes.to_vec();
            let finished = out.finished;
            // Only once the priming event (an id) is in: before it, a client can only re-issue.
            let drop_now = !bytes.is_empty()
                && c.reader.last_event_id().is_some()
                && sim.rand().is_multiple_of(3)
                && c.drops < 4;
            if drop_now {
                // Write only part, then the connection breaks.
                let part = (sim.rand() as usize) % bytes.len();
                bytes.truncate(part);
            }
            let msgs = &mut c.messages;
            c.reader
                .feed(&bytes, |m| msgs.push(serde_json::from_slice(m).unwrap()));
            sim.server.consume_stream(stream, bytes.len());
            if drop_now {
                sim.server.stream_closed(sim.now, stream);
                c.stream = None;
                c.drops += 1;
            } else if finished {
                c.finished = true;
            }
        }
        sim.tick();
    }
    // Exactly progress 0, 50, 100 and one answer per call: nothing lost, nothing twice.
    let mut drops = 0;
    for c in &calls {
        assert!(c.finished, "call {} did not finish: {:?}", c.id, c.messages);
        let progress: Vec<f64> = c
            .messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"]["progress"].as_f64().unwrap())
            .collect();
        assert_eq!(
            progress,
            vec![0.0, 50.0, 100.0],
            "call {}: {:?}",
            c.id,
            c.messages
        );
        let answers = c.messages.iter().filter(|m| m["id"] == c.id).count();
        assert_eq!(answers, 1, "call {}: {:?}", c.id, c.messages);
        assert_eq!(c.messages.len(), 4);
        drops += c.drops;
    }
    assert!(drops > 0, "the soak dropped no stream");
    for sid in &sids {
        assert_eq!(
            sim.send("DELETE", &[("Mcp-Session-Id", sid)], "").status,
            200
        );
    }
    sim.tick();
    assert_eq!(sim.server.sessions(), 0);
    assert_eq!(sim.server.open_streams(), 0);
    assert!(sim.server.connections().is_empty());
    assert_eq!(sim.fixture.pending(), 0);
}

#[test]
fn many_sessions_and_dropped_streams_stay_bounded_and_lose_nothing() {
    let mut sim = Sim {
        server: HttpServer::new(fixture::http_config()),
        fixture: fixture::Fixture::new([1; 16]),
        now: Timestamp::ZERO,
        seed: 0x9e37_79b9_7f4a_7c15,
    };
    let mut live = Vec::new();
    for _ in 0..ROUNDS {
        round(&mut sim);
        live.push(counting::live());
    }
    // Warm after two rounds; later rounds may not grow the heap (some slack for what the
    // allocator and the test's own bookkeeping hold).
    let warm = live[1];
    let last = *live.last().unwrap();
    assert!(
        last - warm < 512 * 1024,
        "live bytes grew from {warm} to {last}: {live:?}"
    );
}
