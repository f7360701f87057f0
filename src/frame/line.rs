//! Newline-delimited framing: stdio, and any byte stream (TCP, Unix sockets, pipes).
//!
//! [`LineDecoder`] splits chunks of arbitrary size into frames. A frame that lies wholly inside
//! the chunk you pass is handed back as a slice of that chunk; only an incomplete tail is
//! copied, into a buffer that never grows beyond the frame cap. [`LineEncoder`] writes messages
//! as frames into a buffer it owns and lends out for writing.
//!
//! Like the rest of `frame`, this file knows nothing of JSON and imports nothing from the
//! layers above: the encoder's message methods (`request`, `notification`, …) are written
//! next to the JSON-RPC encoder, in `jsonrpc/encode.rs`, on top of `LineEncoder::push_frame`.

/// The default cap on one frame's size: 16 MiB. Large enough for big `resources/read`
/// results; change it with [`LineDecoder::with_max_frame`].
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// How many bytes of an over-long frame the decoder keeps for [`LineDecoder::too_long_head`].
pub const TOO_LONG_HEAD: usize = 256;

/// A problem with the framing itself (as opposed to the JSON inside a frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// A frame exceeded the cap. It is reported once; its bytes are skipped up to the next
    /// newline and decoding then carries on.
    TooLong {
        /// The cap in force.
        limit: usize,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong { limit } => write!(f, "frame longer than {limit} bytes"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Returns the index of the first `\n` in `bytes`.
///
/// Inputs of 64 bytes or more are searched 64 bytes per step with AVX2 when the CPU has it
/// (detected at run time); shorter ones, or any without AVX2, 32 bytes per step with SSE2.
#[inline]
pub(crate) fn find_newline(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= 64 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 support was just detected on this CPU.
            return unsafe { find_newline_avx2(bytes) };
        }
        find_newline_sse2(bytes)
    }
    #[cfg(not(target_arch = "x86_64"))]
    bytes.iter().position(|&b| b == b'\n')
}

/// [`find_newline`] with SSE2 (part of the x86_64 baseline), 32 bytes per step.
#[cfg(target_arch = "x86_64")]
#[inline]
fn find_newline_sse2(bytes: &[u8]) -> Option<usize> {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut i = 0;
    // SAFETY: SSE2 is part of the x86_64 baseline; each unaligned load reads 16 bytes that lie
    // inside `bytes` (checked by the loop condition).
    unsafe {
        let nl = _mm_set1_epi8(b'\n' as i8);
        while i + 32 <= bytes.len() {
            let p = bytes.as_ptr().add(i);
            let a = _mm_cmpeq_epi8(_mm_loadu_si128(p as *const __m128i), nl);
            let b = _mm_cmpeq_epi8(_mm_loadu_si128(p.add(16) as *const __m128i), nl);
            if _mm_movemask_epi8(_mm_or_si128(a, b)) != 0 {
                let lo = _mm_movemask_epi8(a) as u32;
                let hi = _mm_movemask_epi8(b) as u32;
                return Some(i + ((hi << 16) | lo).trailing_zeros() as usize);
            }
            i += 32;
        }
    }
    bytes[i..].iter().position(|&b| b == b'\n').map(|p| p + i)
}

/// [`find_newline`] with AVX2, 64 bytes per step; the last partial step rereads the final 64
/// bytes (so `bytes` must hold at least 64).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn find_newline_avx2(bytes: &[u8]) -> Option<usize> {
    use core::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8,
    };
    debug_assert!(bytes.len() >= 64);
    let nl = _mm256_set1_epi8(b'\n' as i8);
    // The 64-bit mask of newlines in `bytes[at..at + 64]`.
    let block = |at: usize| -> Option<u64> {
        // SAFETY: callers pass `at + 64 <= bytes.len()`, so both 32-byte loads are in bounds.
        unsafe {
            let p = bytes.as_ptr().add(at);
            let a = _mm256_cmpeq_epi8(_mm256_loadu_si256(p as *const __m256i), nl);
            let b = _mm256_cmpeq_epi8(_mm256_loadu_si256(p.add(32) as *const __m256i), nl);
            if _mm256_movemask_epi8(_mm256_or_si256(a, b)) == 0 {
                return None;
            }
            let lo = _mm256_movemask_epi8(a) as u32 as u64;
            let hi = _mm256_movemask_epi8(b) as u32 as u64;
            Some((hi << 32) | lo)
        }
    };
    let mut i = 0;
    while i + 64 <= bytes.len() {
        if let Some(mask) = block(i) {
            return Some(i + mask.trailing_zeros() as usize);
        }
        i += 64;
    }
    if i == bytes.len() {
        return None;
    }
    // The last bytes: the final 64, of which the first `i - last` were already searched.
    let last = bytes.len() - 64;
    let skip = i - last;
    block(last)
        .map(|mask| mask >> skip)
        .filter(|&mask| mask != 0)
        .map(|mask| i + mask.trailing_zeros() as usize)
}

#[inline]
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\r'))
}

#[inline]
fn strip_cr(line: &[u8]) -> &[u8] {
    match line.split_last() {
        Some((b'\r', rest)) => rest,
        _ => line,
    }
}

/// Splits a byte stream into newline-delimited frames.
///
/// Feed it whatever the transport delivered, in any chunking, with [`next_frame`]: frames come
/// out one at a time, `\r\n` is accepted, blank lines are skipped, and a frame longer than the
/// cap is reported once and skipped. What it keeps stays within the cap (and one byte: a
/// line ending's `\r`) whatever the peer sends.
///
/// [`next_frame`]: LineDecoder::next_frame
#[derive(Debug)]
pub struct LineDecoder {
    /// The incomplete tail of the stream, or the last frame assembled from it.
    tail: Vec<u8>,
    /// `tail` holds a frame already handed out; clear it before the next call uses it.
    tail_handed_out: bool,
    /// Inside an over-long frame that has been reported: skip to the next newline.
    discarding: bool,
    /// [`finish`](Self::finish) was called: the input has ended.
    ended: bool,
    max_frame: usize,
    /// The first bytes of the frame last reported as too long.
    head: Vec<u8>,
}

impl Default for LineDecoder {
    fn default() -> Self {
        LineDecoder::with_max_frame(DEFAULT_MAX_FRAME)
    }
}

impl LineDecoder {
    /// A decoder with the default cap, [`DEFAULT_MAX_FRAME`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder whose frames may be at most `max_frame` bytes (excluding the line ending);
    /// 0 is taken as 1. Use it to bound what one peer may make you hold.
    pub fn with_max_frame(max_frame: usize) -> Self {
        LineDecoder {
            tail: Vec::new(),
            tail_handed_out: false,
            ended: false,
            discarding: false,
            max_frame: max_frame.max(1),
            head: Vec::new(),
        }
    }

    /// The frame cap in force.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// The first bytes (the cap or [`TOO_LONG_HEAD`], whichever is less) of the frame last
    /// reported as
    /// [`FrameError::TooLong`], for whoever wants to name it in a reply (a message's id usually
    /// comes first). Valid until the next call.
    pub fn too_long_head(&self) -> &[u8] {
        &self.head
    }

    /// Keeps the first bytes of an over-long frame: `first`, then `second`. Always the same
    /// number of them, whatever the chunking: the frame is reported once more than the cap has
    /// arrived, so the first `min(cap, TOO_LONG_HEAD)` bytes are there in every case.
    fn keep_head(&mut self, first: &[u8], second: &[u8]) {
        let keep = TOO_LONG_HEAD.min(self.max_frame);
        self.head.clear();
        let a = first.len().min(keep);
        self.head.extend_from_slice(&first[..a]);
        let b = second.len().min(keep - a);
        self.head.extend_from_slice(&second[..b]);
    }

    /// How many bytes of an incomplete frame are buffered: at most the cap, plus one for a
    /// trailing `\r` that may start the line's `\r\n`.
    pub fn buffered(&self) -> usize {
        if self.tail_handed_out {
            0
        } else {
            self.tail.len()
        }
    }

    /// Takes the next frame out of `input`, advancing `input` past what it used.
    ///
    /// Call it in a loop until it returns `None`; by then all of `input` has been consumed and
    /// an incomplete tail, if any, is buffered for the next call. Stopping earlier is fine:
    /// what remains in `input` is simply still yours. The returned frame borrows from `input`
    /// when it lay wholly inside it, and from the decoder when it had to be assembled from a
    /// buffered tail; either way it lives until the next call.
    pub fn next_frame<'s, 'i: 's>(
        &'s mut self,
        input: &mut &'i [u8],
    ) -> Option<Result<&'s [u8], FrameError>> {
        if self.tail_handed_out {
            super::empty(&mut self.tail);
            self.tail_handed_out = false;
        }
        loop {
            if input.is_empty() {
                return None;
            }
            let Some(nl) = find_newline(input) else {
                // An incomplete frame: keep it, within the cap.
                let chunk = std::mem::take(input);
                if self.discarding {
                    return None;
                }
                // A trailing `\r` may be the first half of a `\r\n`: not part of the frame.
                let cr = usize::from(chunk.last() == Some(&b'\r'));
                if self.tail.len() + chunk.len() - cr > self.max_frame {
                    let tail = std::mem::take(&mut self.tail);
                    self.keep_head(&tail, chunk);
                    self.tail = tail;
                    super::empty(&mut self.tail);
                    self.discarding = true;
                    return Some(Err(FrameError::TooLong {
                        limit: self.max_frame,
                    }));
                }
                self.tail.extend_from_slice(chunk);
                return None;
            };
            let current: &'i [u8] = input;
            let line = &current[..nl];
            *input = &current[nl + 1..];
            if self.discarding {
                // The end of a frame already reported as too long.
                self.discarding = false;
                continue;
            }
            if self.tail.is_empty() {
                let line = strip_cr(line);
                // Length first, as when the line arrives in pieces.
                if line.len() > self.max_frame {
                    self.keep_head(line, &[]);
                    return Some(Err(FrameError::TooLong {
                        limit: self.max_frame,
                    }));
                }
                if is_blank(line) {
                    continue;
                }
                return Some(Ok(line));
            }
            // Complete the buffered tail.
            let total = self.tail.len() + line.len();
            if strip_cr_len(&self.tail, line) > self.max_frame {
                let tail = std::mem::take(&mut self.tail);
                self.keep_head(&tail, line);
                self.tail = tail;
                super::empty(&mut self.tail);
                return Some(Err(FrameError::TooLong {
                    limit: self.max_frame,
                }));
            }
            debug_assert!(total <= self.max_frame.saturating_add(1));
            self.tail.extend_from_slice(line);
            if is_blank(&self.tail) {
                super::empty(&mut self.tail);
                continue;
            }
            self.tail_handed_out = true;
            return Some(Ok(strip_cr(&self.tail)));
        }
    }

    /// Whether [`finish`](Self::finish) was called (the input has ended).
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Ends the stream (the transport reached EOF). Returns the unterminated last line, if it
    /// holds anything but whitespace, as a final frame; the decoder is then empty. Peers should
    /// end every message with a newline, but some omit the last one before exiting.
    pub fn finish(&mut self) -> Option<&[u8]> {
        self.ended = true;
        if self.tail_handed_out {
            super::empty(&mut self.tail);
            self.tail_handed_out = false;
        }
        self.discarding = false;
        if is_blank(&self.tail) {
            super::empty(&mut self.tail);
            return None;
        }
        self.tail_handed_out = true;
        Some(strip_cr(&self.tail))
    }
}

/// The length of `tail + line` once a trailing `\r` is stripped.
#[inline]
fn strip_cr_len(tail: &[u8], line: &[u8]) -> usize {
    let total = tail.len() + line.len();
    let last = line.last().or(tail.last());
    if last == Some(&b'\r') {
        total - 1
    } else {
        total
    }
}

/// How many written bytes at the front of a [`LineEncoder`]'s buffer may stand before a new
/// frame moves the rest down (when they are at least half of it).
const COMPACT_AFTER: usize = 64 * 1024;

/// Writes messages as newline-terminated frames into a buffer it owns, and lends the bytes
/// out for writing, so partial writes work.
///
/// Use it for any newline-delimited transport: encode with the message methods, write
/// [`pending`](Self::pending) to the stream, then report what was written with
/// [`consume`](Self::consume). No frame it writes contains a raw newline, whatever JSON the
/// caller passes: line breaks in caller JSON can only be whitespace and become spaces.
#[derive(Debug, Default)]
pub struct LineEncoder {
    buf: Vec<u8>,
    read: usize,
}

impl LineEncoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one frame: `write` appends the message (which must hold no raw newline), and
    /// the terminating newline follows.
    #[inline]
    pub(crate) fn push_frame(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        if self.read == self.buf.len() {
            self.buf.clear();
            self.read = 0;
        } else if self.read >= COMPACT_AFTER && self.read >= self.buf.len() / 2 {
            // A writer that never takes everything (a slow socket left with a few bytes each
            // time) would keep every frame ever written: what was written goes, when it is
            // most of the buffer.
            self.buf.drain(..self.read);
            self.read = 0;
        }
        write(&mut self.buf);
        self.buf.push(b'\n');
    }

    /// The bytes not yet reported written.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.read..]
    }

    /// Reports that the first `n` pending bytes were written. `n` larger than what is pending
    /// counts as all of it. Once all is written, a buffer grown over
    /// [`KEEP_WHEN_EMPTY`](super::KEEP_WHEN_EMPTY) by a large frame is given back.
    pub fn consume(&mut self, n: usize) {
        self.read = self.read.saturating_add(n).min(self.buf.len());
        if self.read == self.buf.len() {
            super::empty(&mut self.buf);
            self.read = 0;
        }
    }
}

#[cfg(test)]
mod newline_tests {
    use super::*;

    /// A writer that always leaves a few bytes behind: the buffer holds what waits, not every
    /// frame ever pushed (it grew by a frame a round, for good).
    #[test]
    fn an_encoder_never_drained_whole_keeps_only_what_waits() {
        let mut enc = LineEncoder::new();
        let frame = vec![b'x'; 1000];
        for _ in 0..10_000 {
            enc.push_frame(|out| out.extend_from_slice(&frame));
            let n = enc.pending().len() - 10;
            enc.consume(n);
        }
        assert!(
            enc.buf.len() < 4 * COMPACT_AFTER,
            "{} bytes held",
            enc.buf.len()
        );
        assert_eq!(enc.pending().len(), 10);
    }

    /// Every length up to 300 and every newline position (and none), against a plain search:
    /// covers the short path, the SSE2 and AVX2 steps, and the reread final block.
    #[test]
    fn find_newline_agrees_with_a_plain_search() {
        for len in 0..300 {
            let mut bytes = vec![b'x'; len];
            assert_eq!(find_newline(&bytes), None, "len {len}");
            #[cfg(target_arch = "x86_64")]
            assert_eq!(find_newline_sse2(&bytes), None);
            for at in 0..len {
                bytes[at] = b'\n';
                // A second newline later must not win.
                if at + 7 < len {
                    bytes[at + 7] = b'\n';
                }
                assert_eq!(find_newline(&bytes), Some(at), "len {len} at {at}");
                #[cfg(target_arch = "x86_64")]
                assert_eq!(find_newline_sse2(&bytes), Some(at), "len {len} at {at}");
                bytes[at] = b'x';
                if at + 7 < len {
                    bytes[at + 7] = b'x';
                }
            }
        }
    }
}

#[cfg(test)]
mod encoder_tests {
    use super::*;

    /// A large frame's room is given back once it is all written; a small one's is kept, so
    /// a steady stream of small frames allocates nothing.
    #[test]
    fn a_large_frames_room_is_given_back_once_written() {
        let mut e = LineEncoder::new();
        e.push_frame(|out| out.resize(1 << 20, b'x'));
        assert_eq!(e.pending().len(), (1 << 20) + 1);
        e.consume(1000);
        assert!(
            e.buf.capacity() > crate::frame::KEEP_WHEN_EMPTY,
            "still writing: kept"
        );
        e.consume(usize::MAX);
        assert!(e.pending().is_empty());
        assert_eq!(e.buf.capacity(), 0);
        e.push_frame(|out| out.extend_from_slice(b"{}"));
        e.consume(3);
        assert!(e.pending().is_empty() && e.buf.capacity() >= 3);
    }
}
