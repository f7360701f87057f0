//! A driver for profilers: the small or mixed corpus fed to a server `Connection` past its
//! handshake in 64 KiB reads, every event drained and all output dropped after each read.
//! The same workload as the Go binding's `BenchmarkDecode*` and the C loop beside it
//! (`bindings/go/internal/cbench`), in Rust, so the connection's own cost can be profiled.
//!
//! `cargo build --profile profiling --example profile_server`, then
//! `target/profiling/examples/profile_server small 20` (wall clock, best pass) or
//! `valgrind --tool=callgrind --toggle-collect='*feed_pass*' target/profiling/examples/profile_server small 1`.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

#[path = "../benches/common/conn.rs"]
mod conn_setup;
#[path = "../benches/corpus.rs"]
mod corpus;

use mcpwire::conn::{Connection, Timestamp};

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "small".into());
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let c = match which.as_str() {
        "mixed" => corpus::mixed(),
        _ => corpus::small(),
    };
    let mut best = f64::INFINITY;
    let mut events = 0;
    for _ in 0..passes {
        let mut server = server();
        let started = Instant::now();
        events = feed_pass(&mut server, &c.bytes);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "{which}: best pass {:.2} M msg/s ({:.0} MB/s), {events} events per pass",
        c.messages as f64 / best / 1e6,
        c.bytes.len() as f64 / best / 1e6
    );
}

/// A server past its handshake whose bounds the one-way corpus will not reach.
fn server() -> Connection {
    let mut cfg = conn_setup::server_config();
    cfg.limits.max_inbound_in_flight = 1 << 20;
    cfg.limits.max_queued_events = 1 << 20;
    cfg.limits.max_buffered_output = 1 << 30;
    conn_setup::server_past_handshake(cfg)
}

#[inline(never)]
fn feed_pass(server: &mut Connection, bytes: &[u8]) -> usize {
    let mut events = 0;
    for chunk in bytes.chunks(64 * 1024) {
        server.handle_input(Timestamp::ZERO, chunk);
        while let Some(ev) = server.poll_event() {
            std::hint::black_box(&ev);
            events += 1;
        }
        while let Some(t) = server.poll_transmit() {
            let n = t.bytes.len();
            server.consume_transmit(n);
        }
    }
    events
}
