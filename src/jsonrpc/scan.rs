//! The native JSON validator: one pass, no tree, no allocation.
//!
//! Everything here answers two questions about a byte slice: where does this JSON value end,
//! and is it valid? Given text already known to be UTF-8 (see `utf8.rs`), validation is
//! complete: grammar, control characters, escapes and surrogate pairs, nesting depth.

use super::Reason;

/// A validation failure: what went wrong and the byte offset where it was noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault {
    pub reason: Reason,
    pub offset: usize,
}

#[inline]
pub(crate) fn fault(reason: Reason, offset: usize) -> Fault {
    Fault { reason, offset }
}

/// The hard ceiling on nesting depth, whatever the configuration asks for. It sizes the
/// fixed bit stack used while skipping values, so deep input can never grow the call stack.
pub(crate) const MAX_DEPTH_LIMIT: usize = 1024;

/// The fault for a byte the grammar does not allow at `pos`. (The frame's UTF-8 has been
/// validated before any walk, so a non-ASCII byte here is valid UTF-8 in the wrong place.)
#[cold]
pub(crate) fn unexpected(_buf: &[u8], pos: usize) -> Fault {
    fault(Reason::UnexpectedByte, pos)
}

#[inline(always)]
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Returns the first position at or after `pos` that is not JSON whitespace. Every byte above
/// the space settles it in one compare; the loop runs only on whitespace (or a control byte,
/// or the end).
#[inline(always)]
pub(crate) fn skip_ws(buf: &[u8], pos: usize) -> usize {
    match buf.get(pos) {
        Some(&b) if b > b' ' => pos,
        _ => skip_ws_loop(buf, pos),
    }
}

#[inline(never)]
fn skip_ws_loop(buf: &[u8], mut pos: usize) -> usize {
    while pos < buf.len() && is_ws(buf[pos]) {
        pos += 1;
    }
    pos
}

/// Returns the index of the first byte at or after `i` that ends a run of plain string
/// content: `"`, `\\` or a control character (< 0x20); `buf.len()` if none.
#[cfg(not(target_arch = "x86_64"))]
fn find_string_special(buf: &[u8], mut i: usize) -> usize {
    while i < buf.len() {
        let b = buf[i];
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

#[inline]
fn hex4(buf: &[u8], i: usize) -> Option<u32> {
    let digits = buf.get(i..i + 4)?;
    let mut v = 0u32;
    for &d in digits {
        let n = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | n as u32;
    }
    Some(v)
}

/// Validates the escape that starts with the backslash at `i`; returns the position after it.
#[inline(never)]
pub(crate) fn escape(buf: &[u8], i: usize) -> Result<usize, Fault> {
    match buf.get(i + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
        Some(b'u') => {
            let unit = hex4(buf, i + 2).ok_or(fault(Reason::InvalidEscape, i))?;
            match unit {
                0xD800..=0xDBFF => {
                    // A high surrogate must be followed at once by an escaped low surrogate.
                    if buf.get(i + 6) == Some(&b'\\') && buf.get(i + 7) == Some(&b'u') {
                        match hex4(buf, i + 8) {
                            Some(0xDC00..=0xDFFF) => Ok(i + 12),
                            Some(_) => Err(fault(Reason::LoneSurrogate, i)),
                            None => Err(fault(Reason::InvalidEscape, i + 6)),
                        }
                    } else {
                        Err(fault(Reason::LoneSurrogate, i))
                    }
                }
                0xDC00..=0xDFFF => Err(fault(Reason::LoneSurrogate, i)),
                _ => Ok(i + 6),
            }
        }
        Some(_) => Err(fault(Reason::InvalidEscape, i)),
        None => Err(fault(Reason::UnexpectedEnd, buf.len())),
    }
}

/// For the 64 bytes at `buf[i..i + 64]`: one bit per byte that is a quote, a backslash, or a
/// control character (< 0x20).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn block_masks(buf: &[u8; 64], i: usize) -> (u64, u64, u64) {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_set1_epi8,
    };
    debug_assert!(i + 64 <= buf.len());
    let mut quotes = 0u64;
    let mut backslashes = 0u64;
    let mut controls = 0u64;
    // SAFETY: SSE2 is part of the x86_64 baseline; the four 16-byte loads cover
    // `buf[i..i + 64]`, which the caller guarantees is in bounds.
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let control_max = _mm_set1_epi8(0x1F);
        for k in 0..4 {
            let v = _mm_loadu_si128(buf.as_ptr().add(i + 16 * k) as *const __m128i);
            let shift = 16 * k;
            quotes |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) as u16 as u64) << shift;
            backslashes |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash)) as u16 as u64) << shift;
            // v <= 0x1F (unsigned) exactly when min(v, 0x1F) == v.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, control_max), v);
            controls |= (_mm_movemask_epi8(control) as u16 as u64) << shift;
        }
    }
    (quotes, backslashes, controls)
}

/// Positions in a 64-byte block that hold a character escaped by a backslash.
///
/// A backslash escapes the next character unless it is itself escaped, so what matters is the
/// parity of each run of backslashes. Runs starting on even and on odd positions are separated,
/// an addition carries each run's start to its end, and the parity of where it lands tells
/// whether the character after the run is escaped. `carry` holds whether the previous block
/// ended with an unpaired backslash; it is updated for the next block.
#[inline(always)]
pub(crate) fn escaped_positions(backslashes: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    // A backslash escaped by the previous block's last one starts nothing.
    let backslashes = backslashes & !*carry;
    let follows_backslash = (backslashes << 1) | *carry;
    let odd_starts = backslashes & !EVEN & !follows_backslash;
    let (from_odd, overflow) = odd_starts.overflowing_add(backslashes);
    *carry = overflow as u64;
    let invert = from_odd << 1;
    (EVEN ^ invert) & follows_backslash
}

/// Bits for the 64 bytes at `buf[i..]` whose value is one of the characters that may follow a
/// backslash (`"\/bfnrtu`), plus a separate mask for `u`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn escape_letter_masks(block: &[u8; 64]) -> (u64, u64) {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut valid = 0u64;
    let mut unicode = 0u64;
    // SAFETY: SSE2 is part of the x86_64 baseline; the loads cover the 64-byte array.
    unsafe {
        for k in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k) as *const __m128i);
            let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
            let u = eq(b'u');
            let any = _mm_or_si128(
                _mm_or_si128(
                    _mm_or_si128(
                        _mm_or_si128(eq(b'"'), eq(b'\\')),
                        _mm_or_si128(eq(b'/'), eq(b'b')),
                    ),
                    _mm_or_si128(
                        _mm_or_si128(eq(b'f'), eq(b'n')),
                        _mm_or_si128(eq(b'r'), eq(b't')),
                    ),
                ),
                u,
            );
            valid |= (_mm_movemask_epi8(any) as u16 as u64) << (16 * k);
            unicode |= (_mm_movemask_epi8(u) as u16 as u64) << (16 * k);
        }
    }
    (valid, unicode)
}

/// What may follow a backslash, by byte: 0 nothing, 1 a one-letter escape, 2 `u`.
const ESCAPE_LETTER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut k = 0;
    let simple = b"\"\\/bfnrt";
    while k < simple.len() {
        t[simple[k] as usize] = 1;
        k += 1;
    }
    t[b'u' as usize] = 2;
    t
};

/// [`escape_letter_masks`] restricted to the positions in `escapes`, read one by one when
/// there are at most four of them (prose has a line break or a quote here and there); `None`
/// when there are more, for the vector version. The masks agree with the vector ones on every
/// position in `escapes`, which is all the caller reads.
#[inline(always)]
fn few_escape_letters(block: &[u8; 64], escapes: u64) -> Option<(u64, u64)> {
    let mut rest = escapes;
    let mut valid = 0u64;
    let mut unicode = 0u64;
    for _ in 0..4 {
        if rest == 0 {
            return Some((valid, unicode));
        }
        let at = rest.trailing_zeros();
        let kind = ESCAPE_LETTER[block[at as usize] as usize];
        valid |= u64::from(kind != 0) << at;
        unicode |= u64::from(kind == 2) << at;
        rest &= rest - 1;
    }
    (rest == 0).then_some((valid, unicode))
}

/// Checks the `\u` escapes of one block, in order. `skip_to` is the first position not yet
/// covered by an earlier escape (a surrogate pair covers its low half).
#[cold]
#[inline(never)]
pub(crate) fn unicode_escapes(
    buf: &[u8],
    base: usize,
    mut unicode: u64,
    skip_to: &mut usize,
) -> Result<(), Fault> {
    while unicode != 0 {
        let letter = base + unicode.trailing_zeros() as usize;
        unicode &= unicode - 1;
        let backslash = letter - 1;
        if backslash < *skip_to {
            continue;
        }
        *skip_to = escape(buf, backslash)?;
    }
    Ok(())
}

/// Validates a string whose opening quote is at `pos - 1` (UTF-8 already checked). Returns the
/// position just past the closing quote and whether the string contains escapes.
///
/// Strings of up to 64 bytes without escapes are settled 16 bytes per compare. The rest go to
/// the 64-byte block scanner (32-byte AVX2 lanes when the CPU has them, else SSE2): the block's
/// quotes, backslashes and control characters become bit masks, escaped positions are derived
/// from the backslash mask without a branch per escape, and only `\u` escapes are checked one
/// by one. Text full of line breaks and quotes costs the same per block as plain text.
#[inline]
pub(crate) fn string(buf: &[u8], pos: usize) -> Result<(usize, bool), Fault> {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // Up to four 16-byte steps: plain strings of up to 64 bytes end here. A step that would
        // run past the frame loads the frame's last 16 bytes instead and shifts out the ones
        // before it.
        let mut i = pos;
        while buf.len() >= 16 && i - pos < 64 && i < buf.len() {
            let start = i.min(buf.len() - 16);
            // SAFETY: SSE2 is baseline on x86_64; the load reads `buf[start..start + 16]`.
            let mask = unsafe {
                let v = _mm_loadu_si128(buf.as_ptr().add(start) as *const __m128i);
                let stop = _mm_or_si128(
                    _mm_or_si128(
                        _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
                        _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
                    ),
                    _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v),
                );
                (_mm_movemask_epi8(stop) as u32) >> (i - start)
            };
            if mask != 0 {
                let at = i + mask.trailing_zeros() as usize;
                if buf[at] == b'"' {
                    return Ok((at + 1, false));
                }
                // Every byte before `i` is plain, so the block scanner may start there.
                break;
            }
            i = start + 16;
        }
        string_blocks(buf, i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    string_scalar(buf, pos)
}

/// The block scanner, with 32-byte lanes when the CPU has AVX2 (detected at run time).
#[cfg(target_arch = "x86_64")]
fn string_blocks(buf: &[u8], pos: usize) -> Result<(usize, bool), Fault> {
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just detected on this CPU.
        unsafe { string_blocks_avx2(buf, pos) }
    } else {
        string_blocks_with::<false>(buf, pos)
    }
}

/// The block scanner compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn string_blocks_avx2(buf: &[u8], pos: usize) -> Result<(usize, bool), Fault> {
    string_blocks_with::<true>(buf, pos)
}

/// [`block_masks`] with two 32-byte AVX2 compares per mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn block_masks_avx2(block: &[u8; 64]) -> (u64, u64, u64) {
    let (mut quotes, mut backslashes, mut controls) = (0u64, 0u64, 0u64);
    for k in 0..2 {
        let (q, b, c) = half_masks_avx2(half_avx2(block, k));
        let shift = 32 * k;
        quotes |= (q as u64) << shift;
        backslashes |= (b as u64) << shift;
        controls |= (c as u64) << shift;
    }
    (quotes, backslashes, controls)
}

/// Half `k` (0 or 1) of a 64-byte block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn half_avx2(block: &[u8; 64], k: usize) -> core::arch::x86_64::__m256i {
    use core::arch::x86_64::{__m256i, _mm256_loadu_si256};
    debug_assert!(k < 2);
    // SAFETY: for k < 2 the 32-byte load lies inside the 64-byte array.
    unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * (k & 1)) as *const __m256i) }
}

/// The quote, backslash and control-character (< 0x20) masks of 32 bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn half_masks_avx2(v: core::arch::x86_64::__m256i) -> (u32, u32, u32) {
    use core::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_min_epu8, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let mask = |m| _mm256_movemask_epi8(m) as u32;
    let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
    (
        mask(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8))),
        mask(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8))),
        mask(control),
    )
}

/// [`escape_letter_masks`] with 32-byte AVX2 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn escape_letter_masks_avx2(block: &[u8; 64]) -> (u64, u64) {
    use core::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8,
    };
    let mut valid = 0u64;
    let mut unicode = 0u64;
    for k in 0..2 {
        // SAFETY: the two 32-byte loads cover the 64-byte array.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * k) as *const __m256i) };
        let eq = |c: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8));
        let u = eq(b'u');
        let any = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_or_si256(eq(b'"'), eq(b'\\')),
                    _mm256_or_si256(eq(b'/'), eq(b'b')),
                ),
                _mm256_or_si256(
                    _mm256_or_si256(eq(b'f'), eq(b'n')),
                    _mm256_or_si256(eq(b'r'), eq(b't')),
                ),
            ),
            u,
        );
        valid |= (_mm256_movemask_epi8(any) as u32 as u64) << (32 * k);
        unicode |= (_mm256_movemask_epi8(u) as u32 as u64) << (32 * k);
    }
    (valid, unicode)
}

/// What [`plain_block_avx2`] found in a 64-byte block of string content.
#[cfg(target_arch = "x86_64")]
enum PlainBlock {
    /// The string goes on past the block, which holds only plain bytes and escapes settled
    /// here.
    Open { escapes: bool },
    /// The string closes at offset `at`; everything before it is plain or escapes settled here.
    Closed { at: usize, escapes: bool },
    /// Before the closing quote, a control character or an escape this block cannot settle
    /// (an invalid one, a possible surrogate, a `\u` whose digits run past the block), or,
    /// in the frame's last block, no closing quote: the careful path must settle the block.
    Trouble,
}

/// The common case of [`string_blocks_with`], settled without a branch per escape: a block of
/// string content whose escapes (if any) are one-letter ones or `\u` escapes that
/// [`unicode_escapes_avx2`] settles. Escape letters are classified 32 at a time by two nibble
/// lookups (`ESCAPE_NIBBLE_LO`, `ESCAPE_NIBBLE_HI`): a byte is one of `"\/bfnrt` exactly when
/// the class bits of its low and its high nibble share a bit.
/// The string's content starts `skip` bytes into the block (the frame's last 64 bytes, read
/// again so that no load runs past the frame); offsets in the result count from there. A
/// block that skips bytes is the frame's last, so the string must close in it.
/// `carry` is updated as by [`escaped_positions`]; the caller restores it on
/// [`PlainBlock::Trouble`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn plain_block_avx2<const TAIL: bool>(block: &[u8; 64], skip: u32, carry: &mut u64) -> PlainBlock {
    let skip = if TAIL { skip } else { 0 };
    let lo_table = nibble_table(&ESCAPE_NIBBLE_LO);
    let hi_table = nibble_table(&ESCAPE_NIBBLE_HI);
    let (mut quotes, mut backslashes, mut controls) = (0u64, 0u64, 0u64);
    let mut not_simple = 0u64;
    for k in 0..2 {
        let v = half_avx2(block, k);
        let (q, b, c) = half_masks_avx2(v);
        let shift = 32 * k;
        quotes |= (q as u64) << shift;
        backslashes |= (b as u64) << shift;
        controls |= (c as u64) << shift;
        not_simple |= (outside_class(v, lo_table, hi_table) as u64) << shift;
    }
    // Bits past the frame's end read as zero: plain bytes, never a quote.
    let (quotes, backslashes) = (quotes >> skip, backslashes >> skip);
    let (controls, not_simple) = (controls >> skip, not_simple >> skip);
    let escaped = escaped_positions(backslashes, carry);
    let closing = quotes & !escaped;
    // Every position up to and including the first closing quote (all of them if none).
    let upto = closing ^ closing.wrapping_sub(1);
    let escapes = escaped & upto;
    let mut trouble = controls & upto;
    let odd = escapes & not_simple;
    if odd != 0 {
        // SAFETY: this function runs with AVX2 enabled.
        trouble |= odd & !unicode_escapes_avx2(block, skip, odd);
    }
    if trouble != 0 || (skip != 0 && closing == 0) {
        return PlainBlock::Trouble;
    }
    if closing != 0 {
        PlainBlock::Closed {
            at: closing.trailing_zeros() as usize,
            escapes: escapes != 0,
        }
    } else {
        PlainBlock::Open {
            escapes: escapes != 0,
        }
    }
}

/// One bit per byte of the 64-byte `block` that is not one of the one-letter escapes
/// `"\/bfnrt`: at an escaped position, a `\u` escape or an invalid one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn not_simple_escapes_avx2(block: &[u8; 64]) -> u64 {
    let lo_table = nibble_table(&ESCAPE_NIBBLE_LO);
    let hi_table = nibble_table(&ESCAPE_NIBBLE_HI);
    let lo = outside_class(half_avx2(block, 0), lo_table, hi_table) as u64;
    let hi = outside_class(half_avx2(block, 1), lo_table, hi_table) as u64;
    lo | hi << 32
}

/// A 32-byte table of class bits by nibble (the same 16 entries in both lanes), for
/// [`outside_class`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn nibble_table(table: &[u8; 32]) -> core::arch::x86_64::__m256i {
    use core::arch::x86_64::{__m256i, _mm256_loadu_si256};
    // SAFETY: the load reads the 32-byte array.
    unsafe { _mm256_loadu_si256(table.as_ptr() as *const __m256i) }
}

/// One bit per byte of `v` that lies outside the class two [`nibble_table`]s describe: the
/// class bits looked up by its low nibble (`lo`) and by its high nibble (`hi`) share none.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn outside_class(
    v: core::arch::x86_64::__m256i,
    lo: core::arch::x86_64::__m256i,
    hi: core::arch::x86_64::__m256i,
) -> u32 {
    use core::arch::x86_64::{
        _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_movemask_epi8, _mm256_set1_epi8,
        _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_srli_epi16,
    };
    let nibble = _mm256_set1_epi8(0x0F);
    let by_low = _mm256_shuffle_epi8(lo, _mm256_and_si256(v, nibble));
    let by_high = _mm256_shuffle_epi8(hi, _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble));
    let none = _mm256_cmpeq_epi8(_mm256_and_si256(by_low, by_high), _mm256_setzero_si256());
    _mm256_movemask_epi8(none) as u32
}

/// Of the escaped letters at `letters` (positions after a backslash), the `\u` escapes this
/// block settles on its own: four hex digits follow within the block, and the first digit is
/// not `d`/`D` (which might begin a surrogate, left to the careful path with every other case).
/// Positions count from `skip`, as in [`plain_block_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn unicode_escapes_avx2(block: &[u8; 64], skip: u32, letters: u64) -> u64 {
    use core::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8,
    };
    let lo_table = nibble_table(&HEX_NIBBLE_LO);
    let hi_table = nibble_table(&HEX_NIBBLE_HI);
    let mut u = 0u64;
    let mut hex = 0u64;
    let mut d = 0u64;
    for k in 0..2 {
        // SAFETY: the two 32-byte loads cover the 64-byte array.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * k) as *const __m256i) };
        let shift = 32 * k;
        u |= (_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'u' as i8))) as u32
            as u64)
            << shift;
        let lower = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        d |= (_mm256_movemask_epi8(_mm256_cmpeq_epi8(lower, _mm256_set1_epi8(b'd' as i8))) as u32
            as u64)
            << shift;
        hex |= (!outside_class(v, lo_table, hi_table) as u64) << shift;
    }
    let (u, hex, d) = (u >> skip, hex >> skip, d >> skip);
    let u = letters & u & (u64::MAX >> 4);
    let needs_hex = (u << 1) | (u << 2) | (u << 3) | (u << 4);
    if needs_hex & !hex != 0 || (u << 1) & d != 0 {
        return 0;
    }
    u
}

/// Class bits of hex digits by low nibble (both lanes): bit 0 a decimal digit (high nibble 3),
/// bit 1 a letter `a`-`f` or `A`-`F` (high nibble 4 or 6).
const HEX_NIBBLE_LO: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut lane = 0;
    while lane < 2 {
        let mut lo = 0;
        while lo < 16 {
            let digit = if lo <= 9 { 1 } else { 0 };
            let letter = if lo >= 1 && lo <= 6 { 2 } else { 0 };
            t[16 * lane + lo] = digit | letter;
            lo += 1;
        }
        lane += 1;
    }
    t
};

/// Class bits of hex digits by high nibble; see [`HEX_NIBBLE_LO`].
const HEX_NIBBLE_HI: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut lane = 0;
    while lane < 2 {
        t[16 * lane + 0x3] = 1;
        t[16 * lane + 0x4] = 2;
        t[16 * lane + 0x6] = 2;
        lane += 1;
    }
    t
};

/// [`plain_block_avx2`] for the frame's last block, kept out of line so that the full-block
/// loop keeps its constant shift of zero.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn plain_tail_avx2(block: &[u8; 64], skip: u32, carry: &mut u64) -> PlainBlock {
    plain_block_avx2::<true>(block, skip, carry)
}

/// Class bits of the one-letter escapes `"\/bfnrt` by low nibble (repeated for both 16-byte
/// lanes of a `vpshufb`): bit 0 `"` and `/` (high nibble 2), bit 1 `\` (5), bit 2 `b`, `f`,
/// `n` (6), bit 3 `r`, `t` (7).
const ESCAPE_NIBBLE_LO: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut lane = 0;
    while lane < 2 {
        let o = 16 * lane;
        t[o + 0x2] = 0b1101; // `"` `b` `r`
        t[o + 0x4] = 0b1000; // `t`
        t[o + 0x6] = 0b0100; // `f`
        t[o + 0xC] = 0b0010; // `\`
        t[o + 0xE] = 0b0100; // `n`
        t[o + 0xF] = 0b0001; // `/`
        lane += 1;
    }
    t
};

/// Class bits by high nibble; see [`ESCAPE_NIBBLE_LO`].
const ESCAPE_NIBBLE_HI: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut lane = 0;
    while lane < 2 {
        let o = 16 * lane;
        t[o + 0x2] = 0b0001;
        t[o + 0x5] = 0b0010;
        t[o + 0x6] = 0b0100;
        t[o + 0x7] = 0b1000;
        lane += 1;
    }
    t
};

/// The block scanner's body; `AVX2` selects the lane width (and may only be `true` when the
/// CPU has AVX2).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn string_blocks_with<const AVX2: bool>(buf: &[u8], pos: usize) -> Result<(usize, bool), Fault> {
    let mut i = pos;
    let mut carry = 0u64;
    let mut escaped_any = false;
    // The first position not covered by an already checked `\u` escape.
    let mut unicode_done = pos;
    let mut block = [b' '; 64];
    loop {
        if i >= buf.len() {
            return Err(fault(Reason::UnexpectedEnd, buf.len()));
        }
        if AVX2 && buf.len() - i >= 64 {
            let window: &[u8; 64] = buf[i..i + 64].try_into().unwrap_or(&block);
            let before = carry;
            // SAFETY: `AVX2` is only true inside `string_blocks_avx2`, after detection.
            match unsafe { plain_block_avx2::<false>(window, 0, &mut carry) } {
                PlainBlock::Open { escapes } => {
                    escaped_any |= escapes;
                    i += 64;
                    continue;
                }
                PlainBlock::Closed { at, escapes } => {
                    return Ok((i + at + 1, escaped_any | escapes));
                }
                // Something the careful path below must look at: it starts over on this block.
                PlainBlock::Trouble => carry = before,
            }
        } else if AVX2 && buf.len() >= 64 {
            // The frame's last bytes: read its last 64 and skip the ones before `i`.
            let start = buf.len() - 64;
            let window: &[u8; 64] = buf[start..].try_into().unwrap_or(&block);
            let mut tail_carry = carry;
            // SAFETY: `AVX2` is only true inside `string_blocks_avx2`, which its caller enters
            // after detecting AVX2 on this CPU; the function reads only the 64-byte `window`.
            let tail = unsafe { plain_tail_avx2(window, (i - start) as u32, &mut tail_carry) };
            if let PlainBlock::Closed { at, escapes } = tail {
                return Ok((i + at + 1, escaped_any | escapes));
            }
        }
        let avail = (buf.len() - i).min(64);
        let window: &[u8; 64] = if avail == 64 {
            buf[i..i + 64].try_into().unwrap_or(&block)
        } else {
            // The frame's last bytes: pad with plain characters and mask the padding out.
            block = [b' '; 64];
            block[..avail].copy_from_slice(&buf[i..]);
            &block
        };
        let (quotes, backslashes, controls) = if AVX2 {
            // SAFETY: `AVX2` is only true inside `string_blocks_avx2`, after detection.
            unsafe { block_masks_avx2(window) }
        } else {
            block_masks(window, 0)
        };
        let live = if avail == 64 {
            !0u64
        } else {
            (1u64 << avail) - 1
        };
        let escaped = escaped_positions(backslashes & live, &mut carry);
        let closing = quotes & !escaped & live;
        // Everything before the closing quote (or the whole block) belongs to the string.
        let inside = if closing != 0 {
            (closing & closing.wrapping_neg()) - 1
        } else {
            live
        };
        let bad_control = controls & inside;
        let escapes = escaped & (inside | (closing & closing.wrapping_neg()));
        let mut first_error = None;
        if bad_control != 0 {
            first_error = Some(fault(
                Reason::ControlCharacter,
                i + bad_control.trailing_zeros() as usize,
            ));
        }
        if escapes != 0 {
            escaped_any = true;
            let (valid, unicode) = if let Some(masks) = few_escape_letters(window, escapes) {
                masks
            } else if AVX2 {
                // SAFETY: `AVX2` is only true inside `string_blocks_avx2`, after AVX2 was
                // detected on this CPU; the function reads only the 64-byte `window`.
                unsafe { escape_letter_masks_avx2(window) }
            } else {
                escape_letter_masks(window)
            };
            let bad_escape = escapes & !valid;
            if bad_escape != 0 {
                let at = i + bad_escape.trailing_zeros() as usize - 1;
                if first_error.is_none_or(|f| at < f.offset) {
                    first_error = Some(fault(Reason::InvalidEscape, at));
                }
            }
            let unicode = escapes & unicode;
            if unicode != 0
                && let Err(f) = unicode_escapes(buf, i, unicode, &mut unicode_done)
                && first_error.is_none_or(|e| f.offset < e.offset)
            {
                first_error = Some(f);
            }
        }
        if let Some(f) = first_error {
            return Err(f);
        }
        if closing != 0 {
            let end = i + closing.trailing_zeros() as usize + 1;
            // A `\u` escape checked above may not run past the closing quote.
            if unicode_done > end {
                return Err(fault(Reason::InvalidEscape, end - 1));
            }
            return Ok((end, escaped_any));
        }
        if avail < 64 {
            return Err(fault(Reason::UnexpectedEnd, buf.len()));
        }
        i += 64;
    }
}

/// The portable fallback: stop at every quote, backslash or control character.
#[cfg(not(target_arch = "x86_64"))]
fn string_scalar(buf: &[u8], pos: usize) -> Result<(usize, bool), Fault> {
    let mut i = pos;
    let mut escaped = false;
    loop {
        i = find_string_special(buf, i);
        let Some(&b) = buf.get(i) else {
            return Err(fault(Reason::UnexpectedEnd, buf.len()));
        };
        match b {
            b'"' => return Ok((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                i = escape(buf, i)?;
            }
            _ => return Err(fault(Reason::ControlCharacter, i)),
        }
    }
}

/// The shape of a number that [`number`] accepted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NumberShape {
    pub end: usize,
    /// No fraction and no exponent.
    pub integer: bool,
}

/// Validates a JSON number starting at `pos`.
#[inline]
pub(crate) fn number(buf: &[u8], pos: usize) -> Result<NumberShape, Fault> {
    let digit = |i: usize| buf.get(i).is_some_and(u8::is_ascii_digit);
    let mut i = pos;
    if buf.get(i) == Some(&b'-') {
        i += 1;
    }
    match buf.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            i += 1;
            while digit(i) {
                i += 1;
            }
        }
        _ => return Err(fault(Reason::InvalidNumber, i)),
    }
    let mut integer = true;
    if buf.get(i) == Some(&b'.') {
        integer = false;
        i += 1;
        if !digit(i) {
            return Err(fault(Reason::InvalidNumber, i));
        }
        while digit(i) {
            i += 1;
        }
    }
    if matches!(buf.get(i), Some(b'e' | b'E')) {
        integer = false;
        i += 1;
        if matches!(buf.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digit(i) {
            return Err(fault(Reason::InvalidNumber, i));
        }
        while digit(i) {
            i += 1;
        }
    }
    Ok(NumberShape { end: i, integer })
}

#[inline]
fn literal(buf: &[u8], pos: usize, word: &[u8]) -> Result<usize, Fault> {
    if buf.get(pos..pos + word.len()) == Some(word) {
        Ok(pos + word.len())
    } else {
        Err(unexpected(buf, pos))
    }
}

/// One bit per open container (1 = object), on the stack, never on the heap.
struct Nesting {
    bits: [u64; MAX_DEPTH_LIMIT / 64],
    depth: usize,
    limit: usize,
}

impl Nesting {
    fn new(limit: usize) -> Self {
        Nesting {
            bits: [0; MAX_DEPTH_LIMIT / 64],
            depth: 0,
            limit: limit.min(MAX_DEPTH_LIMIT),
        }
    }
    #[inline]
    fn push(&mut self, object: bool, at: usize) -> Result<(), Fault> {
        if self.depth >= self.limit {
            return Err(fault(Reason::TooDeep, at));
        }
        let (word, bit) = (self.depth / 64, self.depth % 64);
        if object {
            self.bits[word] |= 1 << bit;
        } else {
            self.bits[word] &= !(1 << bit);
        }
        self.depth += 1;
        Ok(())
    }
    #[inline]
    fn top_is_object(&self) -> bool {
        let d = self.depth - 1;
        self.bits[d / 64] & (1 << (d % 64)) != 0
    }
}

/// Validates `"key"` (possibly after whitespace) and the colon after it; returns the
/// position after the colon.
///
/// Compact JSON has no whitespace, so the byte expected next is checked first and whitespace
/// is skipped only when that check fails.
#[inline(always)]
fn key_and_colon(buf: &[u8], pos: usize) -> Result<usize, Fault> {
    let pos = if buf.get(pos) == Some(&b'"') {
        pos
    } else {
        let pos = skip_ws(buf, pos);
        match buf.get(pos) {
            Some(b'"') => pos,
            Some(_) => return Err(unexpected(buf, pos)),
            None => return Err(fault(Reason::UnexpectedEnd, pos)),
        }
    };
    let (end, _) = string(buf, pos + 1)?;
    if buf.get(end) == Some(&b':') {
        return Ok(end + 1);
    }
    let end = skip_ws(buf, end);
    match buf.get(end) {
        Some(b':') => Ok(end + 1),
        Some(_) => Err(unexpected(buf, end)),
        None => Err(fault(Reason::UnexpectedEnd, end)),
    }
}

/// The end of the JSON value at `pos` (after any whitespace) in text a validator has
/// already accepted, such as a [`RawJson`](super::RawJson). Nothing is checked: objects and
/// arrays are skipped 64 bytes at a time by counting the brackets outside strings
/// ([`skip_container`]), strings with [`string`], numbers and literals to the next
/// delimiter. On text that is not valid JSON it still ends, at a position no further than
/// `buf.len()`.
pub(crate) fn skip_valid(buf: &[u8], pos: usize) -> usize {
    let mut pos = skip_ws(buf, pos);
    match buf.get(pos) {
        None => buf.len(),
        Some(b'{' | b'[') => skip_container(buf, pos),
        Some(b'"') => string(buf, pos + 1).map_or(buf.len(), |(end, _)| end),
        Some(_) => {
            while let Some(&c) = buf.get(pos) {
                if matches!(c, b',' | b':' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                pos += 1;
            }
            pos
        }
    }
}

/// Bit `i` of each mask says what byte `i` of a 64-byte block is.
struct StructureMasks {
    quote: u64,
    backslash: u64,
    /// `{` or `[`.
    open: u64,
    /// `}` or `]`.
    close: u64,
}

fn structure_masks(block: &[u8; 64]) -> StructureMasks {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let mut m = StructureMasks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for k in 0..4 {
            // SAFETY: SSE2 is baseline on x86_64; the load reads `block[16k..16k + 16]`.
            let (q, b, o, c) = unsafe {
                let v = _mm_loadu_si128(block.as_ptr().add(16 * k) as *const __m128i);
                // `{` and `[` differ only in bit 0x20, as do `}` and `]`.
                let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
                let bits = |x| _mm_movemask_epi8(x) as u32 as u64;
                (
                    bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8))),
                    bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))),
                    bits(_mm_cmpeq_epi8(folded, _mm_set1_epi8(b'{' as i8))),
                    bits(_mm_cmpeq_epi8(folded, _mm_set1_epi8(b'}' as i8))),
                )
            };
            m.quote |= q << (16 * k);
            m.backslash |= b << (16 * k);
            m.open |= o << (16 * k);
            m.close |= c << (16 * k);
        }
        m
    }
    #[cfg(not(target_arch = "x86_64"))]
    structure_masks_scalar(block)
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn structure_masks_scalar(block: &[u8; 64]) -> StructureMasks {
    let mut m = StructureMasks {
        quote: 0,
        backslash: 0,
        open: 0,
        close: 0,
    };
    for (i, &c) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match c {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            b'{' | b'[' => m.open |= bit,
            b'}' | b']' => m.close |= bit,
            _ => {}
        }
    }
    m
}

/// Bit `i` is the XOR of bits `0..=i`: set from an opening quote up to (not including) the
/// quote that closes it.
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// The end of the object or array at `start` in validated text, 64 bytes at a time: the
/// first stage of a structural index (quotes not escaped by an odd run of backslashes delimit
/// strings; brackets outside them are counted), used to skip a value.
fn skip_container(buf: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    // Whether the block starts inside a string, and whether its first byte is escaped.
    let mut in_string = 0u64;
    let mut escape_carry = 0u64;
    let mut pos = start;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let n = rest.len().min(64);
        let mut tail = [b' '; 64];
        let block: &[u8; 64] = match rest.first_chunk::<64>() {
            Some(block) => block,
            None => {
                // The text's last bytes, padded with spaces.
                tail[..n].copy_from_slice(rest);
                &tail
            }
        };
        let m = structure_masks(block);
        let escaped = if m.backslash == 0 && escape_carry == 0 {
            0
        } else {
            escaped_positions(m.backslash, &mut escape_carry)
        };
        let inside = prefix_xor(m.quote & !escaped) ^ in_string;
        let mut structural = (m.open | m.close) & !inside;
        while structural != 0 {
            let i = structural.trailing_zeros();
            if m.open >> i & 1 == 1 {
                depth += 1;
            } else if depth <= 1 {
                return (pos + i as usize + 1).min(buf.len());
            } else {
                depth -= 1;
            }
            structural &= structural - 1;
        }
        in_string = if inside >> 63 == 1 { u64::MAX } else { 0 };
        pos += n;
    }
    buf.len()
}

/// Validates the JSON value that starts at `pos` (after optional whitespace) and returns the
/// position just past it. `depth_left` is how many more containers may be opened.
pub(crate) fn skip_value(buf: &[u8], mut pos: usize, depth_left: usize) -> Result<usize, Fault> {
    let mut nesting = Nesting::new(depth_left);
    loop {
        let Some(&c) = buf.get(pos) else {
            return Err(fault(Reason::UnexpectedEnd, pos));
        };
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                pos = skip_ws(buf, pos);
                continue;
            }
            b'{' => {
                nesting.push(true, pos)?;
                pos += 1;
                if matches!(buf.get(pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    pos = skip_ws(buf, pos);
                }
                if buf.get(pos) == Some(&b'}') {
                    nesting.depth -= 1;
                    pos += 1;
                } else {
                    pos = key_and_colon(buf, pos)?;
                    continue;
                }
            }
            b'[' => {
                nesting.push(false, pos)?;
                pos += 1;
                if matches!(buf.get(pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    pos = skip_ws(buf, pos);
                }
                if buf.get(pos) == Some(&b']') {
                    nesting.depth -= 1;
                    pos += 1;
                } else {
                    continue;
                }
            }
            b'"' => pos = string(buf, pos + 1)?.0,
            b't' => pos = literal(buf, pos, b"true")?,
            b'f' => pos = literal(buf, pos, b"false")?,
            b'n' => pos = literal(buf, pos, b"null")?,
            b'-' | b'0'..=b'9' => pos = number(buf, pos)?.end,
            _ => return Err(unexpected(buf, pos)),
        }
        // A value is complete: close containers until one wants another element.
        loop {
            if nesting.depth == 0 {
                return Ok(pos);
            }
            match buf.get(pos) {
                Some(b' ' | b'\t' | b'\n' | b'\r') => pos = skip_ws(buf, pos),
                Some(b',') => {
                    pos += 1;
                    if nesting.top_is_object() {
                        pos = key_and_colon(buf, pos)?;
                    }
                    break;
                }
                Some(b'}') if nesting.top_is_object() => {
                    nesting.depth -= 1;
                    pos += 1;
                }
                Some(b']') if !nesting.top_is_object() => {
                    nesting.depth -= 1;
                    pos += 1;
                }
                Some(_) => return Err(unexpected(buf, pos)),
                None => return Err(fault(Reason::UnexpectedEnd, pos)),
            }
        }
    }
}

/// Validates that `buf` holds exactly one JSON value, surrounded by optional whitespace.
/// `buf` must already be known to be UTF-8 (a `&str`, or a frame checked by `utf8::validate`).
pub(crate) fn validate_document(buf: &[u8], max_depth: usize) -> Result<(), Fault> {
    let end = super::index::value(buf, 0, max_depth)?;
    let end = skip_ws(buf, end);
    if end != buf.len() {
        return Err(fault(Reason::TrailingCharacters, end));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On valid JSON, the trusting skip ends where the validating one does, whatever follows
    /// the value; on any bytes at all it ends within them.
    #[test]
    fn skip_valid_agrees_with_skip_value_on_valid_json() {
        let values = [
            "0",
            "-12.5e+3",
            "true",
            "false",
            "null",
            r#""""#,
            r#""a\"b\\""#,
            r#""{[,:]}""#,
            "[]",
            "{}",
            r#"[1,[2,[3]],{"a":[]}]"#,
            r#"{"k":"v}","n":{"m":[1,2,{"x":null}]},"s":"\u0041"}"#,
            "[ 1 , { \"a\" : [ true ] } ]",
            "  7",
            "\t{\"a\":1}",
        ];
        for value in values {
            for tail in ["", ",", "}", "]", " ,", ":", "\n"] {
                let doc = format!("{value}{tail}");
                let b = doc.as_bytes();
                let start = skip_ws(b, 0);
                let want = skip_value(b, start, MAX_DEPTH_LIMIT).unwrap();
                assert_eq!(skip_valid(b, 0), want, "{doc:?}");
            }
        }
        // Random documents: nesting, strings with escaped quotes, runs of backslashes and
        // brackets, long enough to cross 64-byte blocks anywhere.
        fn value(seed: &mut u64, depth: u32, out: &mut String) {
            let mut next = |n: u64| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                *seed % n
            };
            match if depth > 4 { 4 + next(3) } else { next(7) } {
                0 | 1 => {
                    out.push('{');
                    for k in 0..next(5) {
                        if k > 0 {
                            out.push(',');
                        }
                        out.push_str(&format!("\"k{k}\":"));
                        let mut inner = *seed;
                        value(&mut inner, depth + 1, out);
                        *seed = inner;
                    }
                    out.push('}');
                }
                2 | 3 => {
                    out.push('[');
                    for k in 0..next(5) {
                        if k > 0 {
                            out.push_str(", ");
                        }
                        let mut inner = *seed;
                        value(&mut inner, depth + 1, out);
                        *seed = inner;
                    }
                    out.push(']');
                }
                4 => {
                    out.push('"');
                    for _ in 0..next(40) {
                        out.push_str(
                            ["a", "\\\"", "\\\\", "{", "]", "\\n", " ", "\\u00e9"]
                                [next(8) as usize],
                        );
                    }
                    out.push('"');
                }
                5 => out.push_str(&format!("-{}.5e3", next(1000))),
                _ => out.push_str(["true", "false", "null"][next(3) as usize]),
            }
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut long_with_escapes = 0;
        for _ in 0..3_000 {
            let mut doc = String::new();
            value(&mut seed, 0, &mut doc);
            let want = doc.len();
            if want > 128 && doc.contains("\\\\\\\"") {
                long_with_escapes += 1;
            }
            doc.push_str(",\"tail\":[1]}");
            let b = doc.as_bytes();
            assert_eq!(skip_value(b, 0, MAX_DEPTH_LIMIT).unwrap(), want, "{doc}");
            assert_eq!(skip_valid(b, 0), want, "{doc}");
        }
        assert!(long_with_escapes > 100, "{long_with_escapes}");
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let len = (seed >> 60) as usize + 1;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    b"{}[]\",:\\ 0at"[(seed % 12) as usize]
                })
                .collect();
            assert!(skip_valid(&bytes, 0) <= bytes.len(), "{bytes:?}");
        }
    }

    /// What serde_json (an independent validator) says about `"` + body + `"` + tail.
    fn reference(body: &[u8]) -> bool {
        let mut doc = vec![b'"'];
        doc.extend_from_slice(body);
        doc.push(b'"');
        serde_json::from_slice::<serde_json::Value>(&doc).is_ok()
    }

    /// Our verdict on the same document: valid, and the string ends exactly at its quote.
    fn ours(body: &[u8]) -> bool {
        let mut doc = vec![b'"'];
        doc.extend_from_slice(body);
        doc.push(b'"');
        let tail = b"  ,  ";
        let mut padded = doc.clone();
        padded.extend_from_slice(tail);
        let a = string(&doc, 1);
        let b = string(&padded, 1);
        // Both lane widths of the block scanner agree with the dispatching entry point.
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(string_blocks_with::<false>(&doc, 1), a, "SSE2: {body:?}");
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 support was just detected.
                assert_eq!(unsafe { string_blocks_avx2(&doc, 1) }, a, "AVX2: {body:?}");
            }
        }
        // The result cannot depend on what follows the string.
        assert_eq!(a.ok(), b.ok(), "{body:?}");
        match a {
            Ok((end, escaped)) => {
                if end == doc.len() {
                    assert_eq!(escaped, body.contains(&b'\\'));
                }
                end == doc.len()
            }
            Err(_) => false,
        }
    }

    #[test]
    fn agrees_with_an_independent_validator_across_block_boundaries() {
        let pieces: &[&[u8]] = &[
            b"a",
            b"bc",
            b"\\n",
            b"\\\\",
            b"\\\"",
            b"\\/",
            b"\\u00e9",
            b"\\u00E9",
            b"\\uABCD",
            b"\\uD7FF",
            b"\\ud83d\\uDE00",
            b"\\u00g0",
            b"\\u/000",
            b"\\u:000",
            b"\\u@000",
            b"\\uG000",
            b"\\u`000",
            b"\\ud83d\\ude00",
            b"\\ud800",
            b"\\udc00",
            b"\\u12",
            b"\\uzzzz",
            b"\\x",
            b"\\a",
            b"\\N",
            b"\\R",
            b"\\'",
            b"\\.",
            b"\\|",
            b"\\v",
            b"\\0",
            "\\é".as_bytes(),
            b"\t",
            b"\x01",
            b"\"",
            "é".as_bytes(),
            "日本".as_bytes(),
            b"\\ud83d",
            b"\\",
            b"\\\\\\",
        ];
        let mut next = crate::xorshift(0x243f_6a88_85a3_08d3);
        for round in 0..40_000 {
            let mut body = vec![b'x'; (next() % 130) as usize];
            // Up to ten pieces: blocks with few escapes and with many (two code paths).
            let n = 1 + next() % 10;
            for _ in 0..n {
                let at = (next() as usize) % (body.len() + 1);
                let piece = pieces[(next() as usize) % pieces.len()];
                // Mostly valid pieces, so both verdicts are exercised.
                if round % 3 != 0 && !reference(piece) {
                    continue;
                }
                body.splice(at..at, piece.iter().copied());
            }
            if std::str::from_utf8(&body).is_err() {
                continue;
            }
            assert_eq!(
                ours(&body),
                reference(&body),
                "{:?}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    /// The nibble lookups of the AVX2 fast path accept exactly the one-letter escapes.
    #[test]
    fn escape_nibble_tables_match_the_escape_letters() {
        for b in 0..=255u8 {
            let lo = ESCAPE_NIBBLE_LO[usize::from(b & 0x0F)];
            let hi = ESCAPE_NIBBLE_HI[usize::from(b >> 4)];
            assert_eq!(lo & hi != 0, ESCAPE_LETTER[usize::from(b)] == 1, "{b:#04x}");
            let hex_lo = HEX_NIBBLE_LO[usize::from(b & 0x0F)];
            let hex_hi = HEX_NIBBLE_HI[usize::from(b >> 4)];
            assert_eq!(hex_lo & hex_hi != 0, b.is_ascii_hexdigit(), "{b:#04x}");
            // Both 16-byte lanes hold the same table.
            assert_eq!(ESCAPE_NIBBLE_LO[..16], ESCAPE_NIBBLE_LO[16..]);
            assert_eq!(ESCAPE_NIBBLE_HI[..16], ESCAPE_NIBBLE_HI[16..]);
            assert_eq!(HEX_NIBBLE_LO[..16], HEX_NIBBLE_LO[16..]);
            assert_eq!(HEX_NIBBLE_HI[..16], HEX_NIBBLE_HI[16..]);
        }
    }

    /// Every byte after a backslash, at every offset of a long string: the verdict matches the
    /// escape rules (the fast path defers `\u` and invalid letters to the careful one).
    #[test]
    fn every_escape_letter_at_every_offset() {
        for b in 0..=127u8 {
            for at in 0..140 {
                let mut body = vec![b'y'; 150];
                body[at] = b'\\';
                body[at + 1] = b;
                let valid = ESCAPE_LETTER[usize::from(b)] == 1;
                assert_eq!(ours(&body), valid, "{b:#04x} at {at}");
            }
        }
    }

    /// `\u` with every byte in each of its four digit places, at every offset.
    #[test]
    fn every_unicode_escape_digit_at_every_offset() {
        for b in 0..=127u8 {
            for place in 0..4 {
                for at in 0..140 {
                    let mut body = vec![b'y'; 150];
                    body[at..at + 6].copy_from_slice(b"\\u00e9");
                    body[at + 2 + place] = b;
                    assert_eq!(
                        ours(&body),
                        b.is_ascii_hexdigit(),
                        "{b:#04x}/{place} at {at}"
                    );
                }
            }
        }
    }

    /// Random documents, valid ones with whitespace anywhere it may go and then with one
    /// token dropped, repeated or swapped: `validate_document` agrees with serde_json.
    #[test]
    fn documents_with_whitespace_agree_with_an_independent_validator() {
        const WS: [&str; 6] = ["", "", "", " ", "\t\r\n ", "\n"];
        const SCALARS: [&str; 8] = [
            "0",
            "-12.5e3",
            "true",
            "false",
            "null",
            "\"k\"",
            "\"a\\nb\\u00e9\"",
            "\"\"",
        ];
        let mut rng = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut next = move |n: usize| (rng() % n as u64) as usize;
        fn value(tokens: &mut Vec<String>, next: &mut dyn FnMut(usize) -> usize, depth: usize) {
            let ws = |next: &mut dyn FnMut(usize) -> usize| WS[next(WS.len())].to_string();
            match if depth > 5 { 2 } else { next(3) } {
                0 => {
                    tokens.push("{".into());
                    for k in 0..next(4) {
                        if k > 0 {
                            tokens.push(",".into());
                        }
                        tokens.push(ws(next));
                        tokens.push(format!("\"m{k}\""));
                        tokens.push(ws(next));
                        tokens.push(":".into());
                        tokens.push(ws(next));
                        value(tokens, next, depth + 1);
                        tokens.push(ws(next));
                    }
                    tokens.push(ws(next));
                    tokens.push("}".into());
                }
                1 => {
                    tokens.push("[".into());
                    for k in 0..next(4) {
                        if k > 0 {
                            tokens.push(",".into());
                        }
                        tokens.push(ws(next));
                        value(tokens, next, depth + 1);
                        tokens.push(ws(next));
                    }
                    tokens.push(ws(next));
                    tokens.push("]".into());
                }
                _ => tokens.push(SCALARS[next(SCALARS.len())].into()),
            }
        }
        let (mut valid, mut invalid) = (0, 0);
        for round in 0..20_000 {
            let mut tokens = vec![WS[next(WS.len())].to_string()];
            value(&mut tokens, &mut next, 0);
            tokens.push(WS[next(WS.len())].to_string());
            if round % 2 == 1 {
                let at = next(tokens.len());
                match next(3) {
                    0 => {
                        tokens.remove(at);
                    }
                    1 => {
                        let t = tokens[at].clone();
                        tokens.insert(at, t);
                    }
                    _ => {
                        let other = next(tokens.len());
                        tokens.swap(at, other);
                    }
                }
            }
            let doc = tokens.concat();
            let expected = serde_json::from_str::<serde_json::Value>(&doc).is_ok();
            assert_eq!(
                validate_document(doc.as_bytes(), 64).is_ok(),
                expected,
                "{doc:?}"
            );
            if expected {
                valid += 1;
            } else {
                invalid += 1;
            }
        }
        assert!(
            valid > 5_000 && invalid > 2_000,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn unterminated_strings_report_the_end() {
        for len in [0, 1, 15, 16, 17, 63, 64, 65, 200] {
            let mut doc = vec![b'"'];
            doc.extend(std::iter::repeat_n(b'a', len));
            assert_eq!(
                string(&doc, 1),
                Err(fault(Reason::UnexpectedEnd, doc.len()))
            );
            doc.push(b'\\');
            assert!(string(&doc, 1).is_err());
        }
    }

    #[test]
    fn closing_brackets_must_match_at_every_depth() {
        // Containers alternate by a pattern that differs across the 64-level word boundaries;
        // each document closes them all, and one variant swaps the bracket at one depth.
        let kinds: Vec<bool> = (0..300).map(|d| (d * 7 + d / 64) % 3 == 0).collect();
        let doc = |swap: Option<usize>| {
            let mut out = Vec::new();
            for &object in &kinds {
                out.extend_from_slice(if object { b"{\"k\":" } else { b"[" });
            }
            out.push(b'1');
            for (d, &object) in kinds.iter().enumerate().rev() {
                let close = object != (swap == Some(d));
                out.push(if close { b'}' } else { b']' });
            }
            out
        };
        assert_eq!(validate_document(&doc(None), 1024), Ok(()));
        for d in [0, 1, 63, 64, 65, 127, 128, 200, 299] {
            let bad = doc(Some(d));
            assert_eq!(
                validate_document(&bad, 1024).map_err(|f| f.reason),
                Err(Reason::UnexpectedByte),
                "depth {d}"
            );
        }
        assert_eq!(
            validate_document(&doc(None), 299).map_err(|f| f.reason),
            Err(Reason::TooDeep)
        );
    }
}
