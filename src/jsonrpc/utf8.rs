//! Whole-frame UTF-8 validation, vectorised when the CPU allows.
//!
//! The JSON walk then only has to look for quotes, backslashes and control characters inside
//! strings. On x86-64 with AVX2 (detected at run time, so one build runs on any x86-64) this
//! uses the nibble-lookup method of Keiser and Lemire ("Validating UTF-8 in less than one
//! instruction per byte", 2021): three 16-entry tables, indexed by the high and low nibble of
//! the previous byte and the high nibble of the current one, flag every invalid two-byte
//! pattern, and the continuation bytes of 3- and 4-byte sequences are checked by position.
//! Elsewhere it falls back to the standard library's validator. Either way an invalid frame is
//! re-checked with the standard library to find the exact offset of the first bad byte.

use super::Reason;
use super::scan::{Fault, fault};

/// Validates `buf` as UTF-8; on failure, the offset of the first invalid byte.
///
/// With AVX2, a frame of 64 bytes or more goes through the vector validator whole: skipping an
/// ASCII prefix first would save work on plain frames, but the loop that looks for the prefix's
/// end exits at a different place in every frame, and the mispredicted exit cost more than the
/// work saved (measured on the small corpus). Shorter frames, or any without AVX2, skip their
/// ASCII prefix 16 bytes per compare and validate the rest with the standard library.
pub(crate) fn validate(buf: &[u8]) -> Result<(), Fault> {
    #[cfg(target_arch = "x86_64")]
    {
        if buf.len() >= 64 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 support was just detected on this CPU.
            if unsafe { avx2::is_valid(buf) } {
                return Ok(());
            }
            return Err(first_error(buf));
        }
    }
    let start = ascii_prefix(buf);
    if start == buf.len() {
        return Ok(());
    }
    let rest = &buf[start..];
    #[cfg(target_arch = "x86_64")]
    {
        if rest.len() >= 64 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 support was just detected on this CPU.
            if unsafe { avx2::is_valid(rest) } {
                return Ok(());
            }
            return Err(first_error(buf));
        }
    }
    if std::str::from_utf8(rest).is_ok() {
        Ok(())
    } else {
        Err(first_error(buf))
    }
}

/// A position up to which `buf` is certainly ASCII: `buf.len()` when all of it is, else the
/// start of a 16-byte chunk that holds a non-ASCII byte (every byte before it being ASCII, no
/// multi-byte sequence can start before it).
#[inline]
fn ascii_prefix(buf: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_movemask_epi8};
        if buf.len() >= 16 {
            let high = |at: usize| {
                // SAFETY: SSE2 is baseline on x86_64; callers pass `at + 16 <= buf.len()`.
                unsafe {
                    _mm_movemask_epi8(_mm_loadu_si128(buf.as_ptr().add(at) as *const __m128i))
                }
            };
            let mut i = 0;
            while i + 16 <= buf.len() {
                if high(i) != 0 {
                    return i;
                }
                i += 16;
            }
            // The last bytes, in one load that overlaps the checked ones.
            let last = buf.len() - 16;
            return if i == buf.len() || high(last) == 0 {
                buf.len()
            } else {
                last
            };
        }
    }
    if buf.is_ascii() { buf.len() } else { 0 }
}

#[cold]
fn first_error(buf: &[u8]) -> Fault {
    match std::str::from_utf8(buf) {
        Ok(_) => fault(Reason::InvalidUtf8, buf.len()),
        Err(e) => fault(Reason::InvalidUtf8, e.valid_up_to()),
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    // Error classes of a (previous byte, current byte) pair.
    const TOO_SHORT: u8 = 1 << 0; // lead byte followed by a non-continuation
    const TOO_LONG: u8 = 1 << 1; // ASCII followed by a continuation
    const OVERLONG_3: u8 = 1 << 2; // E0 followed by 80..9F
    const TOO_LARGE: u8 = 1 << 3; // F4 followed by 90..BF, or F5..FF
    const SURROGATE: u8 = 1 << 4; // ED followed by A0..BF
    const OVERLONG_2: u8 = 1 << 5; // C0 or C1
    const TOO_LARGE_1000: u8 = 1 << 6; // F5..FF followed by 80..8F
    const OVERLONG_4: u8 = 1 << 6; // F0 followed by 80..8F
    const TWO_CONTS: u8 = 1 << 7; // two continuations in a row (may be fine: checked by position)
    const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;

    /// Indexed by the high nibble of the previous byte.
    const PREV_HIGH: [u8; 16] = [
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TWO_CONTS,
        TWO_CONTS,
        TWO_CONTS,
        TWO_CONTS,
        TOO_SHORT | OVERLONG_2,
        TOO_SHORT,
        TOO_SHORT | OVERLONG_3 | SURROGATE,
        TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4,
    ];

    /// Indexed by the low nibble of the previous byte.
    const PREV_LOW: [u8; 16] = [
        CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4,
        CARRY | OVERLONG_2,
        CARRY,
        CARRY,
        CARRY | TOO_LARGE,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
    ];

    /// Indexed by the high nibble of the current byte.
    const CUR_HIGH: [u8; 16] = [
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
    ];

    #[inline(always)]
    unsafe fn table(t: &[u8; 16]) -> __m256i {
        // SAFETY: both halves read 16 bytes from a 16-byte array.
        unsafe {
            let half = _mm_loadu_si128(t.as_ptr() as *const __m128i);
            _mm256_broadcastsi128_si256(half)
        }
    }

    /// The 32 bytes "one (or `N`) position(s) earlier": `prev` supplies the bytes that fall
    /// off the start of `cur`.
    macro_rules! earlier {
        ($cur:expr, $prev:expr, $n:literal) => {{
            let joined = _mm256_permute2x128_si256($prev, $cur, 0x21);
            _mm256_alignr_epi8($cur, joined, 16 - $n)
        }};
    }

    struct Tables {
        prev_high: __m256i,
        prev_low: __m256i,
        cur_high: __m256i,
    }

    /// The error flags for the 32 bytes of `cur`, given the block before it.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn check(cur: __m256i, prev: __m256i, t: &Tables) -> __m256i {
        let low_nibble = _mm256_set1_epi8(0x0F);
        let prev1 = earlier!(cur, prev, 1);
        let a = _mm256_shuffle_epi8(
            t.prev_high,
            _mm256_and_si256(_mm256_srli_epi16(prev1, 4), low_nibble),
        );
        let b = _mm256_shuffle_epi8(t.prev_low, _mm256_and_si256(prev1, low_nibble));
        let c = _mm256_shuffle_epi8(
            t.cur_high,
            _mm256_and_si256(_mm256_srli_epi16(cur, 4), low_nibble),
        );
        let special = _mm256_and_si256(_mm256_and_si256(a, b), c);
        // A continuation is required two bytes after a lead >= E0 and three after one >= F0.
        let prev2 = earlier!(cur, prev, 2);
        let prev3 = earlier!(cur, prev, 3);
        let third = _mm256_subs_epu8(prev2, _mm256_set1_epi8(0xDFu8 as i8));
        let fourth = _mm256_subs_epu8(prev3, _mm256_set1_epi8(0xEFu8 as i8));
        let required = _mm256_and_si256(
            _mm256_cmpgt_epi8(_mm256_or_si256(third, fourth), _mm256_setzero_si256()),
            _mm256_set1_epi8(0x80u8 as i8),
        );
        _mm256_xor_si256(required, special)
    }

    /// Whether all of `buf` is valid UTF-8. `buf` must hold at least 64 bytes (it panics
    /// otherwise).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn is_valid(buf: &[u8]) -> bool {
        assert!(buf.len() >= 64, "the caller checks short inputs");
        // SAFETY: AVX2 is enabled for this function by the caller's contract; every load reads
        // 32 bytes inside `buf` (the loop's by its condition, the last two because `buf` holds
        // at least 64).
        unsafe {
            // The last block may end mid-sequence only if more bytes follow.
            let incomplete_max = _mm256_setr_epi8(
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                (0xF0u8 - 1) as i8,
                (0xE0u8 - 1) as i8,
                (0xC0u8 - 1) as i8,
            );

            let tables = Tables {
                prev_high: table(&PREV_HIGH),
                prev_low: table(&PREV_LOW),
                cur_high: table(&CUR_HIGH),
            };
            let mut error = _mm256_setzero_si256();
            let mut prev = _mm256_setzero_si256();
            // Every block is checked the same way, ASCII or not: in text that mixes the two a
            // branch on it would be mispredicted more often than the check costs.
            let mut i = 0;
            while i + 32 <= buf.len() {
                let cur = _mm256_loadu_si256(buf.as_ptr().add(i) as *const __m256i);
                error = _mm256_or_si256(error, check(cur, prev, &tables));
                prev = cur;
                i += 32;
            }
            if i < buf.len() {
                // The last 32 bytes, overlapping some already checked, with the 32 before them
                // as context (`buf` holds at least 64): checking a byte twice finds nothing new,
                // and no load runs outside `buf`.
                let end = buf.len();
                prev = _mm256_loadu_si256(buf.as_ptr().add(end - 64) as *const __m256i);
                let cur = _mm256_loadu_si256(buf.as_ptr().add(end - 32) as *const __m256i);
                error = _mm256_or_si256(error, check(cur, prev, &tables));
                prev = cur;
            }
            // The last sequence must be complete.
            let prev_incomplete = _mm256_subs_epu8(prev, incomplete_max);
            error = _mm256_or_si256(error, prev_incomplete);
            _mm256_testz_si256(error, error) == 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agree(bytes: &[u8]) {
        let ours = validate(bytes);
        let std = std::str::from_utf8(bytes);
        assert_eq!(ours.is_ok(), std.is_ok(), "{bytes:x?}");
        if let (Err(f), Err(e)) = (ours, std) {
            assert_eq!(f.offset, e.valid_up_to());
        }
    }

    #[test]
    fn agrees_with_std_on_edge_sequences_at_every_alignment() {
        let samples: &[&[u8]] = &[
            b"plain ascii",
            "é日本😀Ω→".as_bytes(),
            b"\xc0\xaf",
            b"\xc1\xbf",
            b"\xc2\x80",
            b"\xdf\xbf",
            b"\xe0\x80\x80",
            b"\xe0\x9f\xbf",
            b"\xe0\xa0\x80",
            b"\xed\x9f\xbf",
            b"\xed\xa0\x80",
            b"\xed\xbf\xbf",
            b"\xee\x80\x80",
            b"\xef\xbf\xbf",
            b"\xf0\x80\x80\x80",
            b"\xf0\x8f\xbf\xbf",
            b"\xf0\x90\x80\x80",
            b"\xf4\x8f\xbf\xbf",
            b"\xf4\x90\x80\x80",
            b"\xf5\x80\x80\x80",
            b"\xff",
            b"\x80",
            b"\xbf\x80",
            b"\xc2",
            b"\xe6\x97",
            b"\xf0\x9f\x98",
            b"\xc2\x41",
            b"\xe6\x41\x41",
            b"\xf0\x9f\x41\x41",
            b"\xe6\x97\xa5\x80",
        ];
        for s in samples {
            for pad in 0..70 {
                let mut v = vec![b'a'; pad];
                v.extend_from_slice(s);
                agree(&v);
                v.extend(std::iter::repeat_n(b'b', 70 - pad));
                agree(&v);
                let mut w = "日本".repeat(pad % 7).into_bytes();
                w.extend_from_slice(&v);
                agree(&w);
            }
        }
    }

    #[test]
    fn agrees_with_std_on_random_mutations() {
        let base = "ascii é 日本語 😀 text → Ω and more ascii to cross blocks ".repeat(4);
        let mut next = crate::xorshift(0x1234_5678_9abc_def0);
        for _ in 0..20_000 {
            let mut v = base.clone().into_bytes();
            for _ in 0..(next() % 3) {
                let i = (next() as usize) % v.len();
                v[i] = next() as u8;
            }
            let cut = (next() as usize) % v.len();
            agree(&v[..cut]);
            agree(&v);
        }
    }
}
