//! A driver for profilers: decode + correlate, what a client does with its answers. The
//! corpus's results and errors are re-addressed to a handshaken client's requests in flight and
//! fed to it in 64 KiB reads, every event drained (the criterion group `peers_correlate_*` in
//! `cargo bench --bench peers` is the reference figure). With `bare` as the third argument it
//! runs the bare decode of the same stream instead, for comparison.
//!
//! `cargo build --release --example profile_correlate`, then for example
//! `valgrind --tool=callgrind target/release/examples/profile_correlate small 2`.
#![allow(clippy::disallowed_methods)]

#[path = "../benches/common/conn.rs"]
mod conn_setup;
#[path = "../benches/corpus.rs"]
mod corpus;

use std::time::Instant;

use conn_setup::{answers, client_awaiting, correlate};
use mcpwire::conn::Connection;
use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::Decoder;

const CHUNK: usize = 64 * 1024;

/// The timed part of a bare pass (callgrind: `--toggle-collect='*run_bare*'`).
#[inline(never)]
fn run_bare(stream: &[u8]) -> usize {
    let mut answered = 0;
    let mut lines = LineDecoder::new();
    let mut d = Decoder::default();
    for chunk in stream.chunks(CHUNK) {
        let mut input = chunk;
        while let Some(f) = lines.next_frame(&mut input) {
            answered += usize::from(d.decode(f.expect("frame")).is_ok());
        }
    }
    answered
}

/// The timed part of a decode + correlate pass (callgrind:
/// `--toggle-collect='*run_correlate*'`).
#[inline(never)]
fn run_correlate(client: &mut Connection, stream: &[u8]) -> usize {
    correlate(client, stream)
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or("mixed".into());
    let passes: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let bare = std::env::args().nth(3).is_some_and(|a| a == "bare");
    let c = match which.as_str() {
        "mixed" => corpus::mixed(),
        "tools" => corpus::tools(),
        _ => corpus::small(),
    };
    let (_, first) = client_awaiting(1);
    let (stream, n) = answers(c.lines(), first);
    let mut best = f64::INFINITY;
    let mut answered = 0usize;
    for _ in 0..passes {
        if bare {
            let started = Instant::now();
            answered += run_bare(&stream);
            best = best.min(started.elapsed().as_secs_f64());
            continue;
        }
        let (mut client, _) = client_awaiting(n);
        let started = Instant::now();
        answered += run_correlate(&mut client, &stream);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!("{answered} answers over {passes} passes ({n} a pass)");
    println!(
        "best pass: {:.2} M msg/s, {:.3} GB/s",
        n as f64 / best / 1e6,
        stream.len() as f64 / best / 1e9
    );
}
