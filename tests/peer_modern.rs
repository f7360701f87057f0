//! Era detection against real servers: our client in auto mode reaches 2026-07-28 with the
//! Python SDK server, and falls back to the handshake with server-everything without waiting
//! out a timeout.

// Real processes, real time: this test is an IO layer and reads the clock.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use common::pair::Ev;
use common::stdio::{StdioPeer, everything_command, python_server_command};
use mcpwire::conn::{ClientEra, Config};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::{Era, ProtocolVersion};

const LIMIT: Duration = Duration::from_secs(20);

fn auto_client() -> Config {
    let config = Config::client("mcpwire-test", "0.1.0")
        .with_capabilities("{}")
        .unwrap();
    assert_eq!(config.client_era, ClientEra::Auto);
    config
}

fn wait_ready(peer: &mut StdioPeer) -> ProtocolVersion {
    let mut version = None;
    peer.run_until(LIMIT, |_, _, ev| match ev {
        Ev::Ready { version: v } => {
            version = Some(*v);
            true
        }
        Ev::Closed { reason: r } => panic!("closed: {r:?}"),
        _ => false,
    })
    .unwrap();
    version.unwrap()
}

fn call(peer: &mut StdioPeer, method: &str, params: &str) -> serde_json::Value {
    let now = peer.now();
    let id = peer
        .conn
        .request(now, method, Some(RawJson::new(params).unwrap()))
        .unwrap();
    let mut out = None;
    peer.run_until(LIMIT, |_, _, ev| match ev {
        Ev::Response { request, result } if *request == id => {
            out = Some(serde_json::from_str(result).unwrap());
            true
        }
        Ev::Error {
            request,
            code,
            message,
            ..
        } if *request == id => panic!("{method}: {code} {message}"),
        _ => false,
    })
    .unwrap();
    out.unwrap()
}

#[test]
fn auto_client_reaches_the_stateless_era_with_the_python_sdk_server() {
    let mut peer = StdioPeer::spawn(python_server_command(), auto_client());
    assert_eq!(wait_ready(&mut peer), ProtocolVersion::V2026_07_28);
    assert_eq!(peer.conn.era(), Some(Era::Modern));
    assert!(
        peer.conn
            .peer_info()
            .unwrap()
            .get()
            .contains("py-peer-server")
    );
    let tools = call(&mut peer, "tools/list", "{}");
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    let echo = call(
        &mut peer,
        "tools/call",
        r#"{"name":"echo","arguments":{"text":"stateless hello"}}"#,
    );
    assert_eq!(echo["content"][0]["text"], "stateless hello");
    let sum = call(
        &mut peer,
        "tools/call",
        r#"{"name":"add","arguments":{"a":2,"b":40}}"#,
    );
    assert_eq!(sum["content"][0]["text"], "42");
    let read = call(&mut peer, "resources/read", r#"{"uri":"mem://note"}"#);
    assert_eq!(
        read["contents"][0]["text"],
        "a note from the Python SDK server"
    );
    let prompt = call(
        &mut peer,
        "prompts/get",
        r#"{"name":"greet","arguments":{"name":"mcpwire"}}"#,
    );
    assert!(
        prompt["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("mcpwire")
    );
    let status = peer.shutdown();
    assert!(
        status.success(),
        "the Python SDK server ended with {status}"
    );
}

#[test]
fn auto_client_falls_back_to_the_handshake_with_server_everything_at_once() {
    let start = Instant::now();
    // A probe timeout far beyond the time node takes to start on a loaded machine: a
    // fallback on the timeout would take at least that long.
    let mut config = auto_client();
    config.discover_timeout = Duration::from_secs(30);
    let mut peer = StdioPeer::spawn(everything_command(), config);
    assert_eq!(wait_ready(&mut peer), ProtocolVersion::V2025_11_25);
    assert_eq!(peer.conn.era(), Some(Era::Legacy));
    // server-everything refuses server/discover at once; the probe timeout never runs.
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "took {:?}",
        start.elapsed()
    );
    let echo = call(
        &mut peer,
        "tools/call",
        r#"{"name":"echo","arguments":{"message":"legacy hello"}}"#,
    );
    assert_eq!(echo["content"][0]["text"], "Echo: legacy hello");
    let status = peer.shutdown();
    assert!(status.success(), "server-everything ended with {status}");
}
