//! Helpers shared by the integration tests.
#![allow(dead_code)]

use mcpwire::frame::line::{FrameError, LineDecoder};
use mcpwire::jsonrpc::{Backend, Decoder, DecoderConfig};

/// A decoder for `backend` with default limits.
pub fn decoder(backend: Backend) -> Decoder {
    Decoder::new(DecoderConfig {
        backend,
        ..DecoderConfig::default()
    })
}

/// One observable outcome of feeding a stream: a frame error, or a decoded frame's
/// debug rendering (views compare by content, so equal renderings mean equal results).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Frame(Vec<u8>, String),
    FrameError(FrameError),
}

/// Feeds `stream` split at `cuts` (sorted offsets) and returns everything observed,
/// including the final unterminated line when `finish` is set.
pub fn run_stream(backend: Backend, max_frame: usize, stream: &[u8], cuts: &[usize]) -> Vec<Seen> {
    let mut lines = LineDecoder::with_max_frame(max_frame);
    let mut dec = decoder(backend);
    let mut seen = Vec::new();
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(stream.len());
    for end in bounds {
        let mut input = &stream[start..end];
        start = end;
        while let Some(item) = lines.next_frame(&mut input) {
            match item {
                Ok(frame) => {
                    let rendered = format!("{:?}", dec.decode(frame));
                    seen.push(Seen::Frame(frame.to_vec(), rendered));
                }
                Err(e) => seen.push(Seen::FrameError(e)),
            }
        }
        assert!(input.is_empty());
    }
    seen
}

/// A small deterministic PRNG (splitmix64), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A loopback TCP port that nothing listens on right now, for a server process that takes its
/// port as an argument (a peer SDK's server, redis, the CLI's `serve --http`).
///
/// Binding port 0 and closing the listener would hand out a port from the kernel's ephemeral
/// range, where every outgoing connection of a parallel test also takes its local port: one
/// could take it before the server binds it. So the port comes from below that range, and
/// this process never hands out the same one twice (other processes start elsewhere in it).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOWEST: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    if ephemeral > LOWEST + 1_000 {
        let span = ephemeral - LOWEST;
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = (LOWEST + (start + n) % span) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    // No room below the ephemeral range: the kernel's choice.
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .unwrap()
        .port()
}

pub mod pair;
pub mod stdio;
