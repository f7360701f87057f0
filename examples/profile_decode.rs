//! A driver for profilers: decodes a bench corpus many times over with the native backend.
//!
//! `cargo build --release --example profile_decode`, then for example
//! `valgrind --tool=callgrind target/release/examples/profile_decode small 4` or
//! `perf record target/release/examples/profile_decode mixed 200`.

#[path = "../benches/corpus.rs"]
mod corpus;
use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::Decoder;
fn main() {
    let which = std::env::args().nth(1).unwrap_or("mixed".into());
    let c = if which == "mixed" {
        corpus::mixed()
    } else {
        corpus::small()
    };
    let mut d = Decoder::default();
    let mut n = 0usize;
    let iters: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for _ in 0..iters {
        let mut l = LineDecoder::new();
        for chunk in c.bytes.chunks(65536) {
            let mut input = chunk;
            while let Some(f) = l.next_frame(&mut input) {
                if d.decode(f.unwrap()).is_ok() {
                    n += 1;
                }
            }
        }
    }
    println!("{n}");
}
