//! A driver for profilers: decodes a bench corpus many times over with the native backend
//! (or, built with `--features simd` and given `simd` as a third argument, the simd-json
//! one), then prints how many messages decoded and the rate it measured (best pass of the
//! run).
//!
//! `cargo build --release --example profile_decode`, then for example
//! `valgrind --tool=callgrind target/release/examples/profile_decode small 4` or
//! `perf record target/release/examples/profile_decode mixed 200`. The criterion benches
//! (`cargo bench --bench decode`) are the reference figures; this is for quick comparisons.
#![allow(clippy::disallowed_methods)]

#[path = "../benches/corpus.rs"]
mod corpus;
use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::Decoder;
use std::time::Instant;

fn main() {
    let which = std::env::args().nth(1).unwrap_or("mixed".into());
    let c = match which.as_str() {
        "mixed" => corpus::mixed(),
        "tools" => corpus::tools(),
        _ => corpus::small(),
    };
    let mut d = Decoder::default();
    #[cfg(feature = "simd")]
    if std::env::args().nth(3).as_deref() == Some("simd") {
        d = Decoder::new(mcpwire::jsonrpc::DecoderConfig {
            backend: mcpwire::jsonrpc::Backend::Simd,
            ..Default::default()
        });
    }
    let mut n = 0usize;
    let iters: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut best = f64::INFINITY;
    for _ in 0..iters {
        let started = Instant::now();
        let mut l = LineDecoder::new();
        for chunk in c.bytes.chunks(65536) {
            let mut input = chunk;
            while let Some(f) = l.next_frame(&mut input) {
                if d.decode(f.unwrap()).is_ok() {
                    n += 1;
                }
            }
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!("{n} messages decoded");
    if iters > 0 {
        println!(
            "best pass: {:.2} M msg/s, {:.3} GB/s",
            c.messages as f64 / best / 1e6,
            c.bytes.len() as f64 / best / 1e9
        );
    }
}
