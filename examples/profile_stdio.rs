//! A driver for profilers: what a stdio server's engine does under `loadgen stdio` (the
//! end-to-end bench's load), without the pipes. Batches of `tools/call` requests (`echo` and
//! `add`, alternating, as the load generator sends them) go to a server `Connection` past its
//! handshake; each request is answered with a fixed tool result, and the output is drained
//! after each batch.
//!
//! `cargo build --profile profiling --example profile_stdio`, then
//! `target/profiling/examples/profile_stdio 128 20000 5` (requests per batch, batches,
//! passes: wall clock, best pass) or
//! `valgrind --tool=callgrind --toggle-collect='*serve_batches*' target/profiling/examples/profile_stdio 128 2000 1`
//! (instructions: divide by the requests).
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

#[path = "../benches/common/conn.rs"]
mod conn_setup;

use mcpwire::conn::{Connection, Event, Timestamp};
use mcpwire::jsonrpc::{OwnedId, RawJson};

fn main() {
    let mut args = std::env::args().skip(1);
    let per_batch: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(128);
    let batches: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut best = f64::INFINITY;
    let mut answered = 0;
    for _ in 0..passes {
        let mut server = server();
        let started = Instant::now();
        answered = serve_batches(&mut server, per_batch, batches);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "{answered} requests in batches of {per_batch}: best pass {:.0} ns per request ({:.2} M/s)",
        best * 1e9 / answered as f64,
        answered as f64 / best / 1e6
    );
}

/// A server past its handshake, with the default limits (as `mcpwire serve` has).
fn server() -> Connection {
    conn_setup::server_past_handshake(conn_setup::server_config())
}

/// The load generator's request number `id`.
fn request(out: &mut Vec<u8>, id: u64) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.to_string().as_bytes());
    if id.is_multiple_of(2) {
        out.extend_from_slice(
            br#","method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}"#,
        );
    } else {
        out.extend_from_slice(
            br#","method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}"#,
        );
    }
    out.push(b'\n');
}

#[inline(never)]
fn serve_batches(server: &mut Connection, per_batch: u64, batches: u64) -> u64 {
    let answer =
        RawJson::new(r#"{"content":[{"type":"text","text":"hello, world"}],"isError":false}"#)
            .expect("answer");
    // One batch, sent again and again: every request is answered before the next batch, so
    // its ids are free again by then.
    let mut input = Vec::new();
    for id in 3..3 + per_batch {
        request(&mut input, id);
    }
    let mut answered = 0;
    for _ in 0..batches {
        // Fed 4 KiB at a time and answered as it goes, as the hosts do.
        for piece in input.chunks(4096) {
            server.handle_input(Timestamp::ZERO, piece);
            while let Some(ev) = server.poll_event() {
                if let Event::Request { id, .. } = ev {
                    let id = OwnedId::from(id);
                    let _ = server.respond(id.as_id(), answer);
                    answered += 1;
                }
            }
            while let Some(t) = server.poll_transmit() {
                let n = std::hint::black_box(t.bytes).len();
                server.consume_transmit(n);
            }
        }
    }
    answered
}
