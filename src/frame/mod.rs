//! Framing: bytes ⇄ frames.
//!
//! The lowest layer. It knows nothing of JSON: it finds where one message ends and the next
//! begins, with a hard cap on how much it will buffer.

pub mod line;
pub mod sse;

/// The most capacity an emptied buffer keeps for reuse. Steady traffic in frames below it
/// reuses one allocation; a larger frame's capacity is given back once the frame is done
/// with, so that one big message does not leave an idle connection holding its size. Hosts and
/// bindings that keep buffers of their own next to the engine use it (with [`empty`]) to follow
/// the same rule.
pub const KEEP_WHEN_EMPTY: usize = 256 * 1024;

/// Empties `buf`, and frees it when its capacity is above [`KEEP_WHEN_EMPTY`].
#[inline]
pub fn empty(buf: &mut Vec<u8>) {
    buf.clear();
    if buf.capacity() > KEEP_WHEN_EMPTY {
        *buf = Vec::new();
    }
}

/// [`empty`] for text buffers.
#[inline]
pub fn empty_text(buf: &mut String) {
    buf.clear();
    if buf.capacity() > KEEP_WHEN_EMPTY {
        *buf = String::new();
    }
}
