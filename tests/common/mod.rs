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
pub mod pair;
pub mod stdio;
