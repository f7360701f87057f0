//! Our client engine, driven by a small blocking loop, completes a full session with the
//! reference "everything" server over stdio, in each handshake-era version.

mod common;

use std::time::Duration;

use common::pair::Ev;
use common::stdio::{StdioPeer, everything_command};
use mcpwire::conn::{Config, RequestId, RequestOptions};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::ProtocolVersion;

const LIMIT: Duration = Duration::from_secs(20);

fn raw(s: &str) -> RawJson<'_> {
    RawJson::new(s).unwrap()
}

/// Answers the server's own requests the way a host would.
fn answer_server_requests(
    conn: &mut mcpwire::Connection,
    ev: &Ev,
    sampled: &mut usize,
    roots: &mut usize,
) {
    if let Ev::Request { id, method, .. } = ev {
        match method.as_str() {
            "roots/list" => {
                *roots += 1;
                conn.respond(
                    id.as_id(),
                    raw(r#"{"roots":[{"uri":"file:///tmp/mcpwire","name":"scratch"}]}"#),
                )
                .unwrap();
            }
            "sampling/createMessage" => {
                *sampled += 1;
                conn.respond(
                    id.as_id(),
                    raw(r#"{"role":"assistant","content":{"type":"text","text":"sampled by mcpwire"},"model":"test-model","stopReason":"endTurn"}"#),
                )
                .unwrap();
            }
            other => {
                conn.respond_error(id.as_id(), -32601, &format!("no {other} here"), None)
                    .unwrap();
            }
        }
    }
}

struct Session {
    peer: StdioPeer,
    sampled: usize,
    roots: usize,
}

impl Session {
    /// Sends a request and runs until its answer; returns the result JSON.
    fn call(&mut self, method: &str, params: Option<&str>) -> serde_json::Value {
        self.call_with(method, params, RequestOptions::default(), |_| {})
    }

    fn call_with(
        &mut self,
        method: &str,
        params: Option<&str>,
        options: RequestOptions,
        mut on_progress: impl FnMut(f64),
    ) -> serde_json::Value {
        let now = self.peer.now();
        let id = self
            .peer
            .conn
            .request_with(now, method, params.map(raw), options)
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        let mut result = None;
        let (sampled, roots) = (&mut self.sampled, &mut self.roots);
        self.peer
            .run_until(LIMIT, |conn, _, ev| {
                answer_server_requests(conn, ev, sampled, roots);
                match ev {
                    Ev::Response { request, result: r } if *request == id => {
                        result = Some(serde_json::from_str(r).unwrap());
                        true
                    }
                    Ev::Error {
                        request,
                        code,
                        message,
                        ..
                    } if *request == id => {
                        panic!("{method} failed: {code} {message}")
                    }
                    Ev::Progress {
                        request, progress, ..
                    } if *request == id => {
                        on_progress(*progress);
                        false
                    }
                    Ev::TimedOut { request: r } | Ev::Abandoned { request: r } if *r == id => {
                        panic!("{method}: no answer")
                    }
                    Ev::Closed { reason } => panic!("closed: {reason:?}"),
                    _ => false,
                }
            })
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        result.unwrap()
    }
}

fn session(version: ProtocolVersion) {
    let mut config = Config::client("mcpwire-test", "0.1.0")
        .with_capabilities(r#"{"roots":{"listChanged":true},"sampling":{}}"#)
        .unwrap();
    config.versions = vec![version];
    let mut s = Session {
        peer: StdioPeer::spawn(everything_command(), config),
        sampled: 0,
        roots: 0,
    };

    // initialize → initialized; the server then asks for our roots.
    let (sampled, roots) = (&mut s.sampled, &mut s.roots);
    s.peer
        .run_until(LIMIT, |conn, _, ev| {
            answer_server_requests(conn, ev, sampled, roots);
            if let Ev::Closed { reason: r } = ev {
                panic!("{r:?}")
            }
            *roots > 0
        })
        .unwrap();
    assert_eq!(s.peer.conn.protocol_version(), Some(version));
    let info = s.peer.conn.peer_info().unwrap().get().to_owned();
    assert!(info.contains("everything"), "{info}");

    // tools/list (the sampling tool appears once the server has seen our capabilities: up
    // to 10 s for a server slow on a loaded machine).
    let mut names = Vec::new();
    for _ in 0..100 {
        let tools = s.call("tools/list", None);
        names = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        if names.iter().any(|n| n == "trigger-sampling-request") {
            break;
        }
        let until = s.peer.now().after(Duration::from_millis(100));
        let _ = s
            .peer
            .run_until(Duration::from_millis(150), |_, now, _| now >= until);
    }
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");

    // tools/call echo.
    let echo = s.call(
        "tools/call",
        Some(r#"{"name":"echo","arguments":{"message":"hello from mcpwire"}}"#),
    );
    assert_eq!(echo["content"][0]["text"], "Echo: hello from mcpwire");

    // A long-running tool with progress.
    let mut seen = Vec::new();
    let done = s.call_with(
        "tools/call",
        Some(r#"{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":4}}"#),
        RequestOptions {
            progress: true,
            ..Default::default()
        },
        |p| seen.push(p),
    );
    assert!(
        done["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Long running operation completed")
    );
    assert_eq!(seen, vec![1.0, 2.0, 3.0, 4.0]);

    // Another one, cancelled after its first progress: no answer ever arrives for it, and
    // its later progress is dropped quietly.
    let now = s.peer.now();
    let doomed: RequestId = s
        .peer
        .conn
        .request_with(
            now,
            "tools/call",
            Some(raw(
                r#"{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":4}}"#,
            )),
            RequestOptions {
                progress: true,
                ..Default::default()
            },
        )
        .unwrap();
    s.peer
        .run_until(LIMIT, |conn, now, ev| match ev {
            Ev::Progress { request, .. } if *request == doomed => {
                conn.cancel(now, doomed, Some("no longer needed")).unwrap();
                true
            }
            _ => false,
        })
        .unwrap();
    // Wait out the rest of its 2 s run (the closure sees only events, so the limit is the
    // wait); the run must end there, not at the server's end of output.
    let waited = s.peer.run_until(Duration::from_millis(2500), |_, _, ev| {
        match ev {
            Ev::Response { request, .. }
            | Ev::Error { request, .. }
            | Ev::Progress { request, .. }
                if *request == doomed =>
            {
                panic!("an event for a cancelled request: {ev:?}")
            }
            _ => {}
        }
        false
    });
    assert_eq!(waited, Err("gave up after 2.5s".to_owned()));
    assert!(
        s.peer.conn.stats().dropped_progress >= 1,
        "{:?}",
        s.peer.conn.stats()
    );

    // Resources, prompts, ping.
    let resources = s.call("resources/list", None);
    let uri = resources["resources"][0]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = s.call("resources/read", Some(&format!(r#"{{"uri":"{uri}"}}"#)));
    assert!(!read["contents"].as_array().unwrap().is_empty());
    let prompts = s.call("prompts/list", None);
    assert!(
        prompts["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "simple-prompt")
    );
    let prompt = s.call("prompts/get", Some(r#"{"name":"simple-prompt"}"#));
    assert!(!prompt["messages"].as_array().unwrap().is_empty());
    assert_eq!(s.call("ping", None), serde_json::json!({}));

    // The server asks us to sample; we answer; its tool reports our answer.
    assert!(
        names.iter().any(|n| n == "trigger-sampling-request"),
        "{names:?}"
    );
    let sampled = s.call(
        "tools/call",
        Some(r#"{"name":"trigger-sampling-request","arguments":{"prompt":"hi","maxTokens":10}}"#),
    );
    assert!(
        sampled["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sampled by mcpwire"),
        "{sampled}"
    );
    assert_eq!(s.sampled, 1);
    assert!(s.roots >= 1);

    // The spec's stdio shutdown: the server exits by itself once its input ends.
    let status = s.peer.shutdown();
    assert!(status.success(), "server-everything ended with {status}");
}

#[test]
fn session_2024_11_05() {
    session(ProtocolVersion::V2024_11_05);
}

#[test]
fn session_2025_03_26() {
    session(ProtocolVersion::V2025_03_26);
}

#[test]
fn session_2025_06_18() {
    session(ProtocolVersion::V2025_06_18);
}

#[test]
fn session_2025_11_25() {
    session(ProtocolVersion::V2025_11_25);
}
