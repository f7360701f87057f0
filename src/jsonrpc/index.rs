//! The two-stage validator for objects and arrays.
//!
//! Stage 1 reads the value 64 bytes at a time and turns each block into bit masks with a few
//! vector instructions: quotes, backslashes, control characters, whitespace and the six
//! structural characters `{}[]:,`. From those it derives, without a branch per byte, which
//! bytes lie inside strings, whether every escape and control character in them is allowed,
//! and the block's structural index: one bit per structural character outside strings, per
//! opening quote, and per first byte of a number or literal.
//!
//! Stage 2 walks the index's bits in order through the grammar's states (value, key, colon,
//! after a value; `BY_CLASS`) with the nesting on a bit stack. Only numbers and literals are
//! read byte by byte, and `\u` escapes that a block cannot settle one by one. A string that
//! ends in its block costs one bit. A string that runs on past its block is finished by the
//! string scanner (`scan::string`, made for long text), and the next block starts after it,
//! so blocks never start inside a string.
//!
//! The walk stops at the value's closing bracket. Any failure is handed to the one-pass
//! validator (`scan::skip_value`), which reports the fault (reason and offset) exactly as
//! before: errors are rare, and this keeps one definition of every fault. With debug
//! assertions on (tests and fuzzing), every object and array takes this walk and the answer is
//! checked against the one-pass validator.
//!
//! Values shorter than [`SHORT`] bytes, and CPUs without AVX2, BMI1/2 and carry-less
//! multiplication (detected at run time), use the one-pass validator.
// Elsewhere the tables and helpers below are unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use super::scan::{self, Fault};

/// Validates the JSON value at `pos` (after optional whitespace) and returns the position just
/// past it, like `scan::skip_value`: objects and arrays that may be long with the two-stage
/// validator, the rest with the one-pass one.
#[inline(always)]
pub(crate) fn value(buf: &[u8], pos: usize, depth_left: usize) -> Result<usize, Fault> {
    if buf.len() - pos.min(buf.len()) >= SHORT {
        let start = scan::skip_ws(buf, pos);
        if let Some(b'{' | b'[') = buf.get(start) {
            return container(buf, start, depth_left);
        }
    }
    scan::skip_value(buf, pos, depth_left)
}

/// Values that start fewer bytes than this before the frame's end go to the one-pass
/// validator: for a few short tokens it costs less than indexing a block (measured with
/// `profile_correlate small`: the two-stage walk pays off from about this size). With debug
/// assertions on, every object and array takes the two-stage walk and is checked against the
/// one-pass validator, so that the tests and the fuzz targets (whose inputs are mostly short)
/// compare the two on everything they decode.
const SHORT: usize = if cfg!(debug_assertions) { 1 } else { 384 };

/// Validates the object or array whose opening bracket is at `start`.
pub(crate) fn container(buf: &[u8], start: usize, depth_left: usize) -> Result<usize, Fault> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
        && std::is_x86_feature_detected!("pclmulqdq")
    {
        // SAFETY: these features were just detected on this CPU.
        let walked = unsafe { walk_avx2(buf, start, depth_left) };
        return match walked {
            Some(end) => {
                debug_assert_eq!(
                    scan::skip_value(buf, start, depth_left),
                    Ok(end),
                    "two-stage validator accepted {:?}",
                    String::from_utf8_lossy(buf)
                );
                Ok(end)
            }
            None => {
                let fault = scan::skip_value(buf, start, depth_left);
                debug_assert!(
                    fault.is_err(),
                    "two-stage validator rejected {:?}",
                    String::from_utf8_lossy(buf)
                );
                fault
            }
        };
    }
    scan::skip_value(buf, start, depth_left)
}

/// By low nibble, the one whitespace byte with that nibble (0 where there is none, which no
/// byte with a non-zero low nibble equals).
#[cfg(target_arch = "x86_64")]
const WS_BY_NIBBLE: [u8; 16] = [
    b' ', 0, 0, 0, 0, 0, 0, 0, 0, b'\t', b'\n', 0, 0, b'\r', 0, 0,
];

/// By low nibble, the structural character with that nibble once bit 0x20 is set (which
/// folds `[` onto `{` and `]` onto `}`). Bytes 0x0C and 0x1A fold onto `,` and `:` too; they
/// are control characters and are removed by the caller.
#[cfg(target_arch = "x86_64")]
const OP_BY_NIBBLE: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b':', b'{', b',', b'}', 0, 0];

/// A 32-byte vector holding `t` in both 16-byte lanes (the lookup table of a byte shuffle).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn lane_table(t: &[u8; 16]) -> core::arch::x86_64::__m256i {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_broadcastsi128_si256};
    // SAFETY: the load reads the 16-byte array.
    _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(t.as_ptr() as *const __m128i) })
}

/// Stage 1's other masks: whitespace, and the six structural characters `{}[]:,` (with
/// control characters 0x0C and 0x1A among them, which the caller removes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn structure_classes(block: &[u8; 64]) -> (u64, u64) {
    use core::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
        _mm256_shuffle_epi8,
    };
    let (lo, hi) = (scan::half_avx2(block, 0), scan::half_avx2(block, 1));
    let (ws_table, op_table) = (lane_table(&WS_BY_NIBBLE), lane_table(&OP_BY_NIBBLE));
    // A byte with its top bit set looks up 0, which it never equals.
    let ws = |v| _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(ws_table, v), v));
    let op = |v| {
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(
            _mm256_shuffle_epi8(op_table, folded),
            folded,
        ))
    };
    (
        opaque(ws(lo) as u32 as u64 | (ws(hi) as u32 as u64) << 32),
        opaque(op(lo) as u32 as u64 | (op(hi) as u32 as u64) << 32),
    )
}

/// `x`, through a register the optimizer cannot see into. Without it, LLVM reads the masks as
/// vectors of 64 booleans and turns the shifts and ORs that follow into per-byte extractions
/// (hundreds of instructions per block instead of a few).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    // SAFETY: an empty assembly block that only names `x`'s register: no memory, no effect.
    unsafe {
        core::arch::asm!("/* {0} */", inout(reg) x, options(pure, nomem, nostack, preserves_flags))
    };
    x
}

/// Bit `i` is the XOR of bits `0..=i` of `x`, by one carry-less multiplication with all ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq")]
#[inline]
fn prefix_xor_clmul(x: u64) -> u64 {
    use core::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x, _mm_set1_epi8,
    };
    _mm_cvtsi128_si64(_mm_clmulepi64_si128::<0>(
        _mm_set_epi64x(0, x as i64),
        _mm_set1_epi8(-1),
    )) as u64
}

// The grammar's states between two bits of the index. A value's state knows its container,
// so that the state after the value needs no look at the nesting stack. Eight states, so that
// one `u64` holds a byte class's transitions from all of them.
/// Just after `[`: a value or `]`.
const VALUE_OR_CLOSE: u8 = 0;
/// After `,` in an array, and at the value's own opening bracket: a value.
const VALUE_IN_ARRAY: u8 = 1;
/// After `:`: a value.
const VALUE_IN_OBJECT: u8 = 2;
/// Just after `{`: a key or `}`.
const KEY_OR_CLOSE: u8 = 3;
/// After `,` in an object: a key.
const KEY: u8 = 4;
/// After a key: `:`.
const COLON: u8 = 5;
/// After a value in an array: `,` or `]`.
const AFTER_IN_ARRAY: u8 = 6;
/// After a value in an object: `,` or `}`.
const AFTER_IN_OBJECT: u8 = 7;
const STATES: usize = 8;

// What a transition does besides moving to the state in its low three bits.
/// Open a container (which one is the byte's).
const PUSH: u8 = 0x10;
/// Close the innermost container; the next state comes from the one around it.
const POP: u8 = 0x20;
/// Validate a number or literal here first.
const SCALAR: u8 = 0x40;
/// The byte does not belong here.
const FAULT: u8 = 0x80;

// Byte classes of the index's bits.
const OPEN_OBJECT: usize = 0;
const OPEN_ARRAY: usize = 1;
const CLOSE_OBJECT: usize = 2;
const CLOSE_ARRAY: usize = 3;
const COLON_BYTE: usize = 4;
const COMMA: usize = 5;
const QUOTE: usize = 6;
/// The first byte of a number or a literal.
const SCALAR_START: usize = 7;
/// Anything else (a byte no value starts with).
const OTHER: usize = 8;
const CLASSES: usize = 9;

/// The class of every byte.
const CLASS: [u8; 256] = {
    let mut t = [OTHER as u8; 256];
    t[b'{' as usize] = OPEN_OBJECT as u8;
    t[b'[' as usize] = OPEN_ARRAY as u8;
    t[b'}' as usize] = CLOSE_OBJECT as u8;
    t[b']' as usize] = CLOSE_ARRAY as u8;
    t[b':' as usize] = COLON_BYTE as u8;
    t[b',' as usize] = COMMA as u8;
    t[b'"' as usize] = QUOTE as u8;
    let starts = b"-0123456789tfn";
    let mut k = 0;
    while k < starts.len() {
        t[starts[k] as usize] = SCALAR_START as u8;
        k += 1;
    }
    t
};

/// The transitions, by state and class.
const TRANSITION_ROWS: [[u8; CLASSES]; STATES] = {
    let mut t = [[FAULT; CLASSES]; STATES];
    // Where a value may start, and the state after it.
    let values = [
        (VALUE_OR_CLOSE, AFTER_IN_ARRAY),
        (VALUE_IN_ARRAY, AFTER_IN_ARRAY),
        (VALUE_IN_OBJECT, AFTER_IN_OBJECT),
    ];
    let mut k = 0;
    while k < values.len() {
        let (state, after) = values[k];
        let row = &mut t[state as usize];
        row[OPEN_OBJECT] = PUSH | KEY_OR_CLOSE;
        row[OPEN_ARRAY] = PUSH | VALUE_OR_CLOSE;
        row[QUOTE] = after;
        row[SCALAR_START] = SCALAR | after;
        k += 1;
    }
    t[VALUE_OR_CLOSE as usize][CLOSE_ARRAY] = POP;
    t[KEY_OR_CLOSE as usize][QUOTE] = COLON;
    t[KEY_OR_CLOSE as usize][CLOSE_OBJECT] = POP;
    t[KEY as usize][QUOTE] = COLON;
    t[COLON as usize][COLON_BYTE] = VALUE_IN_OBJECT;
    t[AFTER_IN_ARRAY as usize][COMMA] = VALUE_IN_ARRAY;
    t[AFTER_IN_ARRAY as usize][CLOSE_ARRAY] = POP;
    t[AFTER_IN_OBJECT as usize][COMMA] = KEY;
    t[AFTER_IN_OBJECT as usize][CLOSE_OBJECT] = POP;
    t
};

/// [`TRANSITION_ROWS`] by class: byte `k` of entry `class` is the transition from state `k`.
/// The entry can be loaded as soon as the byte is known, so the walk's chain from one state
/// to the next is a shift, not a load. Indexed by a class masked to four bits: no bounds check.
const BY_CLASS: [u64; 16] = {
    let mut t = [u64::MAX; 16];
    let mut class = 0;
    while class < CLASSES {
        let mut row = 0u64;
        let mut state = 0;
        while state < STATES {
            row |= (TRANSITION_ROWS[state][class] as u64) << (8 * state);
            state += 1;
        }
        t[class] = row;
        class += 1;
    }
    t
};

/// The byte just past a number or literal must end it: whitespace, a structural character,
/// a quote (which the walk then rejects where it does not belong), or the frame's end.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ends_scalar(buf: &[u8], end: usize) -> bool {
    matches!(
        buf.get(end),
        None | Some(b' ' | b'\t' | b'\n' | b'\r' | b',' | b':' | b'[' | b']' | b'{' | b'}' | b'"')
    )
}

/// Validates the number or literal at `at`, whose first byte is `c`.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn scalar_ok(buf: &[u8], at: usize, c: u8) -> bool {
    let end = match c {
        b't' => at + 4 * usize::from(buf.get(at..at + 4) == Some(b"true")),
        b'f' => at + 5 * usize::from(buf.get(at..at + 5) == Some(b"false")),
        b'n' => at + 4 * usize::from(buf.get(at..at + 4) == Some(b"null")),
        _ => match scan::number(buf, at) {
            Ok(n) => n.end,
            Err(_) => return false,
        },
    };
    end > at && ends_scalar(buf, end)
}

/// Both stages, block by block, from the bracket at `start`. Returns the position just past
/// the closing bracket, or `None` on any fault (the caller asks the one-pass validator which).
///
/// # Safety
/// The CPU must support AVX2, BMI1, BMI2 and PCLMULQDQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,pclmulqdq")]
fn walk_avx2(buf: &[u8], start: usize, depth_left: usize) -> Option<usize> {
    let limit = depth_left.min(scan::MAX_DEPTH_LIMIT);
    // One bit per open container (1 = object).
    let mut nesting = [0u64; scan::MAX_DEPTH_LIMIT / 64];
    let mut depth = 0usize;
    // The state, times 8: the shift that selects its byte in a `BY_CLASS` entry.
    let mut shift = u32::from(VALUE_IN_ARRAY) * 8;
    // Whether the last byte before the block belongs to a number or literal. Nothing else is
    // carried from block to block: a string that runs past its block is finished by the string
    // scanner, and the next block starts after it.
    let mut scalar_carry = 0u64;
    // The first position where stage 1 found a fault inside a string; it matters only if it
    // lies before the value's end.
    let mut first_bad = usize::MAX;
    // `{}` and `[]` (empty results, empty lists) need no block, once they may be opened.
    if limit > 0
        && let Some(&[open, close]) = buf.get(start..start + 2)
        && close == open + 2
    {
        return Some(start + 2);
    }
    let mut pad;
    let mut base = start;
    while base < buf.len() {
        let window: &[u8; 64] = match buf.get(base..base + 64) {
            Some(w) => w.try_into().ok()?,
            None => {
                // The frame's last bytes, padded with spaces (whitespace: they end a number and
                // index nothing).
                pad = [b' '; 64];
                pad[..buf.len() - base].copy_from_slice(&buf[base..]);
                &pad
            }
        };
        // The scanner's string masks, through `opaque` (see there).
        let (quote, backslash, control) = scan::block_masks_avx2(window);
        let (quote, backslash, control) = (opaque(quote), opaque(backslash), opaque(control));
        let escaped = if backslash == 0 {
            0
        } else {
            scan::escaped_positions(backslash, &mut 0)
        };
        let real_quote = quote & !escaped;
        // From each opening quote up to, not including, its closing quote.
        let inside = prefix_xor_clmul(real_quote);
        let bad = control & inside;
        let escapes = escaped & inside;
        if escapes != 0 {
            // One-letter escapes are settled by a lookup; `\u` escapes with four hex digits in
            // the block (and no surrogate) by a vector check; the rest one by one.
            let odd = escapes & scan::not_simple_escapes_avx2(window);
            if odd != 0 {
                let hard = odd & !scan::unicode_escapes_avx2(window, 0, odd);
                // The first position not covered by an escape checked here (a surrogate pair
                // covers its low half). Blocks start outside strings, so nothing before `base`
                // is covered.
                let mut checked_to = base;
                if hard != 0
                    && let Err(f) = scan::unicode_escapes(buf, base, hard, &mut checked_to)
                {
                    first_bad = first_bad.min(f.offset);
                }
            }
        }
        if bad != 0 {
            first_bad = first_bad.min(base + bad.trailing_zeros() as usize);
        }
        let (ws, op) = structure_classes(window);
        let op = op & !control;
        let scalar = !(ws | op | quote | inside);
        let scalar_starts = scalar & !((scalar << 1) | scalar_carry);
        scalar_carry = scalar >> 63;
        let mut index = (op & !inside) | (real_quote & inside) | scalar_starts;
        // The last bit: when the block ends inside a string, that string's opening quote.
        let last = index.checked_ilog2().unwrap_or(0) as usize;

        while index != 0 {
            let bit = index.trailing_zeros() as usize & 63;
            index &= index - 1;
            let c = window[bit];
            let step = (BY_CLASS[(CLASS[c as usize] & 15) as usize] >> shift) as u8;
            if step < PUSH {
                shift = u32::from(step) * 8;
                continue;
            }
            let at = base + bit;
            if step & SCALAR != 0 {
                if !scalar_ok(buf, at, c) {
                    return None;
                }
                shift = u32::from(step & 7) * 8;
            } else if step & PUSH != 0 {
                if depth >= limit {
                    return None;
                }
                let mask = 1u64 << (depth % 64);
                if c == b'{' {
                    nesting[depth / 64] |= mask;
                } else {
                    nesting[depth / 64] &= !mask;
                }
                depth += 1;
                shift = u32::from(step & 7) * 8;
            } else if step & POP != 0 {
                depth -= 1;
                if depth == 0 {
                    return (first_bad > at).then_some(at + 1);
                }
                let top = depth - 1;
                shift = u32::from(if nesting[top / 64] >> (top % 64) & 1 == 1 {
                    AFTER_IN_OBJECT
                } else {
                    AFTER_IN_ARRAY
                }) * 8;
            } else {
                return None;
            }
        }
        if inside >> 63 == 1 {
            // A string runs on past the block: the string scanner, made for long text, finds
            // its end, and the next block starts there. (Starting it at the block's end, past
            // the part already checked, measured slower.)
            let (end, _) = scan::string(buf, base + last + 1).ok()?;
            base = end;
            scalar_carry = 0;
        } else {
            base += 64;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-stage answer and the one-pass answer for `text` at offset 0, side by side.
    fn both(text: &[u8], depth: usize) -> (Result<usize, Fault>, Result<usize, Fault>) {
        (value(text, 0, depth), scan::skip_value(text, 0, depth))
    }

    #[test]
    fn agrees_with_the_one_pass_validator_on_hand_picked_cases() {
        let cases: &[&str] = &[
            "{}",
            "[]",
            "[1,2,3]",
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            r#"{ "a" : [ 1 , -2.5e+3 , "x\"y" ] }  "#,
            r#"{"a":"\u00e9\ud83d\ude00\n\t\\"}"#,
            r#"[1 2]"#,
            r#"{"a" 1}"#,
            r#"{"a":}"#,
            r#"[1,]"#,
            r#"{"a":1,}"#,
            r#"[truex]"#,
            r#"[tru]"#,
            r#"[01]"#,
            r#"[1.]"#,
            r#"[-]"#,
            r#"["a"1]"#,
            r#"["a""b"]"#,
            r#"[\"a"]"#,
            "[\"a\u{1}\"]",
            "[1\u{1a}]",
            "[1\u{c}2]",
            r#"["\x"]"#,
            r#"["\ud800"]"#,
            r#"["\udc00"]"#,
            r#"["\u12"]"#,
            r#"{"a":1]"#,
            r#"[1}"#,
            r#"["abc"#,
            r#"[{"a":[1,{"b":2}]}],"rest""#,
            "[é]",
            r#"{"é":"ü"}"#,
        ];
        for case in cases {
            let (two, one) = both(case.as_bytes(), 64);
            assert_eq!(two, one, "{case}");
        }
    }

    #[test]
    fn faults_after_the_value_do_not_count() {
        // A control character and a bad escape after the closing bracket, inside what stage 1
        // takes for a string, in the same block.
        let text = "[\"ok\"] \"\u{1}\\x";
        assert_eq!(value(text.as_bytes(), 0, 8), Ok(6));
    }

    #[test]
    fn depth_limits_match() {
        for depth in 0..6 {
            for text in ["[[[[[1]]]]]", "[[[[[]]]]]", "[[{}]]", "{}", "[]"] {
                let (two, one) = both(text.as_bytes(), depth);
                assert_eq!(two, one, "{text} at depth {depth}");
            }
        }
        let deep = "[".repeat(2000) + &"]".repeat(2000);
        let (two, one) = both(deep.as_bytes(), 4096);
        assert_eq!(two, one);
        assert!(two.is_err());
    }

    /// Every value of a generated family, shifted across block boundaries and cut at every
    /// length, gets the same answer from both validators.
    #[test]
    fn agrees_across_block_boundaries_and_cuts() {
        let pieces = [
            r#"{"name":"echo","description":"Echoes \"text\" back\n","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}"#,
            r#"[1,-0.5,2e10,true,false,null,"\u00e9\ud83d\ude00",{"k":[[],{}]}]"#,
            r#"{"a\\":"b\\\\","c":"\\\"","d":[ 1 , 2 ]}"#,
        ];
        for piece in pieces {
            for shift in 0..70 {
                let mut text = " ".repeat(shift);
                text.push_str(piece);
                let bytes = text.as_bytes();
                for cut in shift..=bytes.len() {
                    let (two, one) = both(&bytes[..cut], 64);
                    assert_eq!(two, one, "shift {shift}, cut {cut}");
                }
                // One byte changed at every position, to a byte of each class.
                for at in shift..bytes.len() {
                    for b in [b'"', b'\\', b'{', b']', b',', b':', b' ', b'1', b'x', 0x01] {
                        let mut changed = bytes.to_vec();
                        changed[at] = b;
                        if std::str::from_utf8(&changed).is_err() {
                            continue;
                        }
                        let (two, one) = both(&changed, 64);
                        assert_eq!(two, one, "shift {shift}, byte {at} -> {b:#x}");
                    }
                }
            }
        }
    }
}
