//! A driver for profilers: client↔server round trips in memory through two handshaken
//! `Connection`s (a `tools/call` request encoded, decoded by the server, answered, the answer
//! decoded by the client and correlated), then the best rate seen.
//!
//! `cargo build --release --example profile_conn`, then for example
//! `valgrind --tool=callgrind target/release/examples/profile_conn 20000 1`. The criterion
//! bench `peers_roundtrip` (`cargo bench --bench peers`) is the reference figure.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

#[path = "../benches/common/conn.rs"]
mod conn_setup;
use conn_setup::{client_config, handshaken_with, pipe};

use mcpwire::conn::{Event, Timestamp};
use mcpwire::jsonrpc::{OwnedId, RawJson};

const PARAMS: &str = r#"{"name":"get_weather","arguments":{"city":"Paris","units":"metric"}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"Sunny, 21 C"}],"isError":false}"#;

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut now = Timestamp::ZERO;
    let (mut client, mut server) = handshaken_with(client_config());
    let mut buf = Vec::with_capacity(4096);
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
