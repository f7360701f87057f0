//! A counting global allocator shows that decoding a warm stream performs zero heap
//! allocations per message, for both backends, and that encoding into a warm buffer does too.

#[path = "../benches/corpus.rs"]
mod corpus;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::{Backend, Decoded, Decoder, DecoderConfig, Message, encode_message};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// Safety: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // Safety: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Safety: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // Safety: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Feeds the stream in 4 KiB chunks; returns (messages, bytes of output re-encoded).
fn pass(lines: &mut LineDecoder, dec: &mut Decoder, out: &mut Vec<u8>, stream: &[u8]) -> usize {
    let mut messages = 0;
    for chunk in stream.chunks(4096) {
        let mut input = chunk;
        while let Some(frame) = lines.next_frame(&mut input) {
            let Ok(Decoded::Single(m)) = dec.decode(frame.expect("corpus frames fit the cap"))
            else {
                panic!("corpus frame did not decode");
            };
            if let Message::Request(_) | Message::Response(_) = m {
                out.clear();
                encode_message(out, &m);
            }
            messages += 1;
        }
    }
    messages
}

#[test]
fn warm_decode_and_encode_allocate_nothing_per_message() {
    let small = corpus::small();
    for &backend in Backend::ALL {
        let mut lines = LineDecoder::new();
        let mut dec = Decoder::new(DecoderConfig {
            backend,
            ..DecoderConfig::default()
        });
        let mut out = Vec::new();
        // Warm up: buffers reach their steady-state sizes.
        let n = pass(&mut lines, &mut dec, &mut out, &small.bytes);
        assert_eq!(n, small.messages);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let n = pass(&mut lines, &mut dec, &mut out, &small.bytes);
        let after = ALLOCATIONS.load(Ordering::Relaxed);
        assert_eq!(n, small.messages);
        assert_eq!(
            after - before,
            0,
            "{backend:?}: {} allocations for {n} messages",
            after - before
        );
    }
}
