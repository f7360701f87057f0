//! A long batch costs the decoder no more memory than its limit allows: a peak-tracking global
//! allocator watches the bytes alive while a frame of a million members is decoded. Without the
//! limit every member kept takes about 72 bytes, so this frame would need about 70 MB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use mcpwire::jsonrpc::{Decoder, Reason};

struct Peak;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// Safety: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // Safety: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // Safety: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // Safety: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Peak = Peak;

#[test]
fn a_million_member_batch_is_refused_within_the_limits_memory() {
    let members = 1_000_000;
    let mut frame = Vec::with_capacity(2 * members + 1);
    frame.push(b'[');
    for i in 0..members {
        if i > 0 {
            frame.push(b',');
        }
        frame.push(b'1');
    }
    frame.push(b']');
    let mut d = Decoder::default();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let refused = d.decode(&frame).expect_err("too many members");
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(refused.reason(), Reason::BatchTooLarge);
    // 1024 members of 72 bytes, in a vector that doubles: under 256 KiB.
    assert!(peak < 256 * 1024, "{peak} bytes alive at the peak");
}
