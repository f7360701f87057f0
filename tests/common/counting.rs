//! A global allocator that counts the heap bytes live, for tests that check memory returns to
//! its baseline. Include it with `#[path = "common/counting.rs"] mod counting;` and install it
//! with `#[global_allocator] static GLOBAL: counting::Counting = counting::Counting;`; keep one
//! test per binary, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Forwards to the system allocator and counts.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

/// Heap bytes allocated and not yet freed, process-wide.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The most heap bytes live at once since the last [`reset_peak`].
#[allow(dead_code)] // (not every binary that counts looks at the peak)
pub fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts the count of [`peak`] again from what is live now.
#[allow(dead_code)]
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

/// Notes `live` bytes for [`peak`].
fn note(live: isize) {
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed) + layout.size() as isize);
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` through `alloc`/`realloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size as isize - layout.size() as isize;
        note(LIVE.fetch_add(grown, Ordering::Relaxed) + grown);
        // SAFETY: as for `dealloc`; `new_size` is checked by the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
