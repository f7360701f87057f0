//! A driver for profilers: stateless 2026-07-28 `tools/call` requests (or, with `session`,
//! requests in one 2025-11-25 session) through an `HttpServer` in memory, each answered at
//! once and settled into a JSON body, then the server's next deadline read, as an HTTP host
//! does per request; then the best rate.
//!
//! `cargo build --profile profiling --example profile_http`, then for example
//! `valgrind --tool=callgrind target/profiling/examples/profile_http 20000 1 stateless`.
//!
//! With `THRASH_KB=N`, N KiB of other memory are written between requests and only the
//! engine's part is timed: the engine as a host sees it, whose own work (net/http, a garbage
//! collector) evicts the engine's code and data from the caches between two requests.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use mcpwire::conn::{Config, Event, Timestamp};
use mcpwire::http::{Body, HttpRequest, HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::{OwnedId, RawJson};

const RESULT: &str = r#"{"content":[{"type":"text","text":"hello, world"}],"isError":false}"#;
const STATELESS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
const SESSION: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}"#;

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let session_mode = args.next().as_deref() == Some("session");
    let config = Config::server("profile", "1")
        .with_capabilities(r#"{"tools":{}}"#)
        .expect("capabilities");
    let mut server = HttpServer::new(HttpServerConfig::new(config));
    let mut random = |buf: &mut [u8]| buf.fill(7);
    let now = Timestamp::ZERO;
    let base: Vec<(&str, &str)> = vec![
        ("Host", "127.0.0.1:8080"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let mut session = String::new();
    if session_mode {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"p","version":"1"}}}"#;
        let r = server.handle_request(
            now,
            &HttpRequest {
                method: "POST",
                headers: &base,
                body: init.as_bytes(),
            },
            &mut random,
        );
        let r = server.settle(r);
        session = r
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("Mcp-Session-Id"))
            .map(|(_, v)| v.clone())
            .expect("a session id");
        let mut headers = base.clone();
        headers.push(("Mcp-Session-Id", &session));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
        server.handle_request(
            now,
            &HttpRequest {
                method: "POST",
                headers: &headers,
                body: br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            },
            &mut random,
        );
        while server.poll_event().is_some() {}
    }
    let mut headers = base.clone();
    if session_mode {
        headers.push(("Mcp-Session-Id", &session));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
    } else {
        headers.push(("MCP-Protocol-Version", "2026-07-28"));
        headers.push(("Mcp-Method", "tools/call"));
        headers.push(("Mcp-Name", "echo"));
    }
    let body = if session_mode { SESSION } else { STATELESS };
    let result = RawJson::new(RESULT).expect("result");
    let mut best = f64::INFINITY;
    let mut bytes = 0usize;
    let thrash_kb: usize = std::env::var("THRASH_KB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut junk = vec![0u8; thrash_kb * 1024];
    for _ in 0..passes {
        let started = Instant::now();
        let mut thrashing = std::time::Duration::ZERO;
        for _ in 0..rounds {
            if thrash_kb > 0 {
                let t = Instant::now();
                thrash(&mut junk);
                thrashing += t.elapsed();
            }
            let r = server.handle_request(
                now,
                &HttpRequest {
                    method: "POST",
                    headers: &headers,
                    body: body.as_bytes(),
                },
                &mut random,
            );
            let mut answered = None;
            while let Some((key, ev)) = server.poll_event() {
                if let Event::Request { id, .. } = ev {
                    answered = Some((key, OwnedId::from(id)));
                }
            }
            let (key, id) = answered.expect("the request reached the application");
            server
                .connection(key)
                .expect("its connection")
                .respond(id.as_id(), result)
                .expect("respond");
            let Body::Complete(_, out) = server.settle(r).body else {
                panic!("not settled into a JSON body");
            };
            bytes += out.len();
            std::hint::black_box(server.poll_timeout());
        }
        let engine = started.elapsed().saturating_sub(thrashing);
        best = best.min(engine.as_secs_f64() / rounds as f64);
    }
    println!(
        "{} requests: {:.0} ns each ({:.0} k req/s); {} bytes out",
        if session_mode { "session" } else { "stateless" },
        best * 1e9,
        1e-3 / best,
        bytes
    );
}

/// Writes one byte in each cache line of `junk`.
#[inline(never)]
fn thrash(junk: &mut [u8]) {
    for b in junk.iter_mut().step_by(64) {
        *b = b.wrapping_add(1);
    }
    std::hint::black_box(junk);
}
