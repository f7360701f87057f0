//! A driver for profilers: client↔server round trips in memory through two handshaken
//! `Connection`s (a `tools/call` request encoded, decoded by the server, answered, the answer
//! decoded by the client and correlated), then the best rate seen.
//!
//! `cargo build --release --example profile_conn`, then for example
//! `valgrind --tool=callgrind target/release/examples/profile_conn 20000 1`. The criterion
//! bench `peers_roundtrip` (`cargo bench --bench peers`) is the reference figure.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use mcpwire::conn::{Config, Connection, Event, State, Timestamp};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::mcp::ProtocolVersion;

const PARAMS: &str = r#"{"name":"get_weather","arguments":{"city":"Paris","units":"metric"}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"Sunny, 21 C"}],"isError":false}"#;

fn pipe(from: &mut Connection, to: &mut Connection, buf: &mut Vec<u8>, now: Timestamp) {
    buf.clear();
    while let Some(t) = from.poll_transmit() {
        buf.extend_from_slice(t.bytes);
        let n = t.bytes.len();
        from.consume_transmit(n);
    }
    to.handle_input(now, buf);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut now = Timestamp::ZERO;
    let mut client_config = Config::client("profile-client", "1.0");
    client_config.versions = vec![ProtocolVersion::V2025_11_25];
    let server_config = Config::server("profile-server", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .expect("capabilities");
    let mut client = Connection::new(client_config, now).expect("client");
    let mut server = Connection::new(server_config, now).expect("server");
    let mut buf = Vec::with_capacity(4096);
    for _ in 0..4 {
        pipe(&mut client, &mut server, &mut buf, now);
        pipe(&mut server, &mut client, &mut buf, now);
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
    }
    assert_eq!(client.state(), State::Operating);
    assert_eq!(server.state(), State::Operating);
    let params = RawJson::new(PARAMS).expect("params");
    let result = RawJson::new(RESULT).expect("result");
    let mut best = f64::INFINITY;
    for _ in 0..passes {
        let started = Instant::now();
        for _ in 0..rounds {
            let id = client
                .request(now, "tools/call", Some(params))
                .expect("request");
            pipe(&mut client, &mut server, &mut buf, now);
            let Some(Event::Request { id: peer, .. }) = server.poll_event() else {
                panic!("the server saw no request");
            };
            let peer = OwnedId::from(peer);
            server.respond(peer.as_id(), result).expect("respond");
            pipe(&mut server, &mut client, &mut buf, now);
            let Some(Event::Response { request, .. }) = client.poll_event() else {
                panic!("the client saw no response");
            };
            assert_eq!(request, id);
            now = now.after(Duration::from_millis(1));
            for conn in [&mut client, &mut server] {
                if conn.poll_timeout().is_some_and(|t| t <= now) {
                    conn.handle_timeout(now);
                }
            }
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "best pass: {:.2} M round trips/s ({:.2} M msg/s)",
        rounds as f64 / best / 1e6,
        2.0 * rounds as f64 / best / 1e6
    );
}
