//! Frame → borrowed message: the envelope rules, over either validation backend.
//!
//! The envelope walk is written once, generic over [`Syntax`]: the native backend validates
//! while it walks; the simd backend lets simd-json validate the whole frame first and then
//! walks its structural index. Either way the rules below are the same code:
//!
//! - the frame must be valid JSON, fully (a bad byte deep in a payload is a parse error);
//! - a top-level array is a batch, kept as a list; an empty one is an invalid request;
//! - `jsonrpc` is exactly `"2.0"`; members the engine reads appear once, with exact case;
//! - ids are integers (full `i64`, no fraction or exponent) or strings, `null` only on errors;
//! - `result` xor `error`; `error.code` an integer, `error.message` a string;
//! - `params`, when present, is an object.

use super::scan::{self, Fault, fault, skip_ws};
use super::{
    DecodeError, Decoded, ErrorObject, ErrorResponse, Found, Id, JsonStr, Message, Notification,
    RawJson, Reason, Request, Response,
};

/// Which validator a [`Decoder`] uses. Both give the same views and the same rejections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// mcpwire's own single-pass validator (SSE2 string scanning). The default: it measured
    /// faster on both bench corpora (see the README).
    Native,
    /// simd-json validates the frame (with runtime CPU detection), then the envelope is read
    /// from its structural index. Needs the `simd` cargo feature. Frames over 1 MiB are
    /// validated by the native validator (simd-json's tape would take some 24 bytes per
    /// structural character), and scratch over 256 KiB is given back after each frame.
    #[cfg(feature = "simd")]
    Simd,
}

impl Backend {
    /// Every backend compiled into this build; tests and benches iterate over it.
    pub const ALL: &'static [Backend] = &[
        Backend::Native,
        #[cfg(feature = "simd")]
        Backend::Simd,
    ];
}

/// Settings for a [`Decoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderConfig {
    /// The deepest nesting of arrays and objects accepted, counting the message object itself.
    /// Default [`DecoderConfig::DEFAULT_MAX_DEPTH`]; values above 1024 are treated as 1024.
    pub max_depth: usize,
    /// The validator to use. Default [`Backend::Native`].
    pub backend: Backend,
    /// The most members a batch may have; a longer batch is refused whole as an invalid
    /// request ([`Reason::BatchTooLarge`]), after its JSON is checked. Default
    /// [`DecoderConfig::DEFAULT_MAX_BATCH`]; 0 is treated as 1. Each member kept costs about
    /// 72 bytes, so without a cap a 16 MiB frame of `[1,1,…]` would take over 500 MiB. (A
    /// `u32`, so that the setting adds nothing to the size of an idle connection.)
    pub max_batch: u32,
}

impl DecoderConfig {
    /// The default nesting limit: 128, the same as serde_json's.
    pub const DEFAULT_MAX_DEPTH: usize = 128;
    /// The default batch limit: 1024 members, four times the peer's requests a connection
    /// holds unanswered by default.
    pub const DEFAULT_MAX_BATCH: u32 = 1024;
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            max_depth: Self::DEFAULT_MAX_DEPTH,
            backend: Backend::Native,
            max_batch: Self::DEFAULT_MAX_BATCH,
        }
    }
}

/// Decodes frames into borrowed [`Decoded`] views.
///
/// Create one per connection (or per thread) and reuse it: it keeps the simd backend's
/// scratch buffers warm, so decoding a steady stream allocates nothing. The views it returns
/// borrow only from the frame, never from the decoder.
#[derive(Debug)]
pub struct Decoder {
    config: DecoderConfig,
    #[cfg(feature = "simd")]
    simd: super::simd::Scratch,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DecoderConfig::default())
    }
}

impl Decoder {
    /// A decoder with the given settings.
    pub fn new(config: DecoderConfig) -> Self {
        Decoder {
            config: DecoderConfig {
                max_depth: config.max_depth.clamp(1, scan::MAX_DEPTH_LIMIT),
                max_batch: config.max_batch.max(1),
                ..config
            },
            #[cfg(feature = "simd")]
            simd: super::simd::Scratch::default(),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &DecoderConfig {
        &self.config
    }

    /// Decodes one frame (one line of stdio, or one HTTP body).
    ///
    /// On success the views borrow from `frame`. On failure the error says whether to answer
    /// -32700 or -32600, why, and with which id.
    pub fn decode<'f>(&mut self, frame: &'f [u8]) -> Result<Decoded<'f>, DecodeError<'f>> {
        self.decode_into(frame, None)
    }

    /// [`decode`](Self::decode), recording in `index` (when given) the members of a single
    /// message's params; a frame that fails, or a batch, leaves it describing nothing.
    fn decode_into<'f>(
        &mut self,
        frame: &'f [u8],
        mut index: Option<&mut ParamsIndex>,
    ) -> Result<Decoded<'f>, DecodeError<'f>> {
        if let Some(index) = &mut index {
            index.len = 0;
        }
        let decoded = self.decode_with(frame, index.as_deref_mut());
        if decoded.is_err()
            && let Some(index) = index
        {
            index.len = 0; // params of a frame that failed describe nothing
        }
        decoded
    }

    fn decode_with<'f>(
        &mut self,
        frame: &'f [u8],
        index: Option<&mut ParamsIndex>,
    ) -> Result<Decoded<'f>, DecodeError<'f>> {
        match self.config.backend {
            Backend::Native => {
                super::utf8::validate(frame).map_err(DecodeError::parse)?;
                walk(
                    &mut NativeSyntax { buf: frame },
                    self.config.max_depth,
                    self.config.max_batch as usize,
                    index,
                )
            }
            #[cfg(feature = "simd")]
            Backend::Simd => {
                let decoded = match self.simd.validate(frame, self.config.max_depth) {
                    Ok(structural) => walk(
                        &mut super::simd::IndexedSyntax::new(frame, structural),
                        self.config.max_depth,
                        self.config.max_batch as usize,
                        index,
                    ),
                    Err(fault) => Err(DecodeError::parse(fault)),
                };
                // The index is read: a large frame's buffers go back now, not when the next
                // frame comes (an idle connection keeps what it held).
                self.simd.trim();
                decoded
            }
        }
    }
}

/// How many params members a [`ParamsIndex`] keeps. Requests and notifications the engine
/// reads have at most five (`name`, `arguments`, `_meta`, `task`, and a progress
/// notification's four); params with more members are looked up by a walk.
const PARAMS_INDEX_MEMBERS: usize = 8;

/// Where one member of a params object lies, as offsets into the params text.
#[derive(Clone, Copy, Debug, Default)]
struct MemberSpan {
    /// The key's body, between its quotes.
    key: (u32, u32),
    key_escaped: bool,
    /// The value.
    value: (u32, u32),
}

/// The top-level members of one params object, recorded by the envelope walk, which reads
/// each of them anyway. [`get_each`](Self::get_each) answers as [`RawJson::get_each`] does on
/// the same params, without walking them again: the connection reads `_meta` and `task` of
/// every request and the members of every progress notification this way.
///
/// It describes one params text only, named by its address and length. Asked about any
/// other (a batch member's, a frame decoded since), or when the params had more members
/// than it keeps, it walks the params as `RawJson::get_each` does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParamsIndex {
    /// The params text's address and length; `len == 0` when nothing is recorded (no
    /// params object is empty text).
    at: usize,
    len: usize,
    count: usize,
    members: [MemberSpan; PARAMS_INDEX_MEMBERS],
}

impl ParamsIndex {
    /// Nothing recorded.
    pub(crate) const EMPTY: ParamsIndex = ParamsIndex {
        at: 0,
        len: 0,
        count: 0,
        members: [MemberSpan {
            key: (0, 0),
            key_escaped: false,
            value: (0, 0),
        }; PARAMS_INDEX_MEMBERS],
    };

    /// Whether this index describes exactly `params`.
    fn describes(&self, params: &str) -> bool {
        self.len != 0 && self.at == params.as_ptr() as usize && self.len == params.len()
    }

    /// [`RawJson::get_each`] on `params`, from the recorded members when they are those of
    /// `params`: the same values, and the same duplicates.
    pub(crate) fn get_each<'a, const N: usize>(
        &self,
        params: RawJson<'a>,
        keys: [&str; N],
    ) -> Found<'a, N> {
        let text = params.get();
        if !self.describes(text) {
            return params.get_each(keys);
        }
        let mut values = [None; N];
        let mut duplicated = 0u64;
        for m in &self.members[..self.count] {
            let key = JsonStr::validated(&text[m.key.0 as usize..m.key.1 as usize], m.key_escaped);
            if let Some(i) = keys.iter().position(|k| key.eq_str(k)) {
                let slot = &mut values[i];
                if slot.is_some() && i < 64 {
                    duplicated |= 1 << i;
                }
                *slot = Some(RawJson::validated(
                    &text[m.value.0 as usize..m.value.1 as usize],
                ));
            }
        }
        let found = Found { values, duplicated };
        if cfg!(debug_assertions) {
            // Under the tests and the fuzz targets, every lookup is checked against a walk.
            let walked = params.get_each(keys);
            assert!(
                walked.values == found.values && walked.duplicated == found.duplicated,
                "the params index disagrees with a walk of {text}"
            );
        }
        found
    }
}

/// Walks a params object member by member, as [`Syntax::value`] would walk it whole, and
/// records each member's key and value in `index` (up to its capacity; more members leave
/// it empty). Returns the position after the object, or a fault (whose reason and place the
/// caller takes from `Syntax::value`, the reference).
fn params_members<'f, S: Syntax<'f>>(
    s: &mut S,
    open: usize,
    depth_left: usize,
    index: &mut ParamsIndex,
) -> Result<usize, Fault> {
    let buf = s.buf();
    index.len = 0;
    if depth_left == 0 {
        return Err(fault(Reason::TooDeep, open));
    }
    let mut count = 0;
    let mut pos = skip_ws(buf, open + 1);
    if buf.get(pos) == Some(&b'}') {
        pos += 1;
    } else {
        loop {
            if buf.get(pos) != Some(&b'"') {
                return Err(fault(Reason::UnexpectedEnd, pos));
            }
            let (key_end, key_escaped) = s.string(pos)?;
            let vstart = skip_ws(buf, expect(buf, skip_ws(buf, key_end), b':')?);
            if vstart >= buf.len() {
                return Err(fault(Reason::UnexpectedEnd, vstart));
            }
            let vend = s.value(vstart, depth_left - 1)?;
            if let Some(m) = index.members.get_mut(count) {
                // Offsets into the params text; they fit in u32 when the params do (checked
                // below before the index is used).
                let at = |p: usize| (p - open) as u32;
                *m = MemberSpan {
                    key: (at(pos + 1), at(key_end - 1)),
                    key_escaped,
                    value: (at(vstart), at(vend)),
                };
            }
            count += 1;
            pos = skip_ws(buf, vend);
            match buf.get(pos) {
                Some(b',') => pos = skip_ws(buf, pos + 1),
                Some(b'}') => {
                    pos += 1;
                    break;
                }
                _ => return Err(fault(Reason::UnexpectedEnd, pos)),
            }
        }
    }
    let len = pos - open;
    if count <= PARAMS_INDEX_MEMBERS && u32::try_from(len).is_ok() {
        index.at = buf[open..].as_ptr() as usize;
        index.len = len;
        index.count = count;
    }
    Ok(pos)
}

impl Decoder {
    /// [`decode`](Self::decode), also handing back the frame as text: a frame that decodes
    /// has passed the backend's whole-frame UTF-8 check, so callers that keep it (the event
    /// queue) need not check it again.
    /// `index` gets the members of a single message's params (see [`ParamsIndex`]).
    pub(crate) fn decode_text<'f>(
        &mut self,
        frame: &'f [u8],
        index: &mut ParamsIndex,
    ) -> Result<(&'f str, Decoded<'f>), DecodeError<'f>> {
        let decoded = self.decode_into(frame, Some(index))?;
        // SAFETY: both backends validate the whole frame's UTF-8 before the walk (native:
        // `utf8::validate`; simd: simd-json's own check), and `decode` returns `Ok` only after
        // that check passed.
        Ok((unsafe { std::str::from_utf8_unchecked(frame) }, decoded))
    }
}

/// What the envelope walk needs from a backend. Positions are byte offsets into `buf()`.
pub(crate) trait Syntax<'f> {
    /// The frame.
    fn buf(&self) -> &'f [u8];
    /// The string whose opening quote is at `open`: returns the position after its closing
    /// quote and whether it holds escapes.
    fn string(&mut self, open: usize) -> Result<(usize, bool), Fault>;
    /// The value starting exactly at `start`: returns the position after it.
    fn value(&mut self, start: usize, depth_left: usize) -> Result<usize, Fault>;
    /// Whether the backend has already validated the frame (so trailing bytes need no check).
    fn prevalidated(&self) -> bool;
}

/// The native backend: validates as the walk goes.
struct NativeSyntax<'f> {
    buf: &'f [u8],
}

impl<'f> Syntax<'f> for NativeSyntax<'f> {
    #[inline(always)]
    fn buf(&self) -> &'f [u8] {
        self.buf
    }
    #[inline(always)]
    fn string(&mut self, open: usize) -> Result<(usize, bool), Fault> {
        scan::string(self.buf, open + 1)
    }
    #[inline(always)]
    fn value(&mut self, start: usize, depth_left: usize) -> Result<usize, Fault> {
        super::index::value(self.buf, start, depth_left)
    }
    fn prevalidated(&self) -> bool {
        false
    }
}

/// Slices validated text.
///
/// Every caller passes the bounds of a whole JSON value or of a string's body, found by the
/// walk, inside a frame whose UTF-8 was validated as a whole before the walk (by
/// `utf8::validate` or by simd-json). Such bounds always fall on character boundaries: they
/// sit next to ASCII grammar bytes (quotes, brackets, digits, letters of literals), and an
/// ASCII byte never occurs inside a multi-byte UTF-8 sequence.
#[inline(always)]
fn text(buf: &[u8], a: usize, b: usize) -> &str {
    let bytes = &buf[a..b];
    debug_assert!(
        std::str::from_utf8(bytes).is_ok(),
        "validated text was not UTF-8"
    );
    // SAFETY: `buf` was validated as UTF-8 as a whole before the walk, and `a`, `b` sit next to
    // ASCII grammar bytes, which never occur inside a multi-byte sequence: both are character
    // boundaries, so the slice is valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

#[inline(always)]
fn expect(buf: &[u8], pos: usize, want: u8) -> Result<usize, Fault> {
    match buf.get(pos) {
        Some(&b) if b == want => Ok(pos + 1),
        Some(_) => Err(scan::unexpected(buf, pos)),
        None => Err(fault(Reason::UnexpectedEnd, pos)),
    }
}

/// Decodes a key body (escapes resolved) into `scratch` when it is short enough to be a
/// member name; `None` means "certainly not a member name".
fn key_text<'k>(raw: &'k [u8], escaped: bool, scratch: &'k mut [u8; 16]) -> Option<&'k [u8]> {
    if !escaped {
        return Some(raw);
    }
    let raw = std::str::from_utf8(raw).ok()?;
    let mut n = 0;
    for c in super::Unescaped::new(raw) {
        let len = c.len_utf8();
        if n + len > scratch.len() {
            return None;
        }
        c.encode_utf8(&mut scratch[n..]);
        n += len;
    }
    Some(&scratch[..n])
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
}

const MEMBERS: [(&[u8], Member); 6] = [
    (b"jsonrpc", Member::Jsonrpc),
    (b"id", Member::Id),
    (b"method", Member::Method),
    (b"params", Member::Params),
    (b"result", Member::Result),
    (b"error", Member::Error),
];

enum KeyClass<T> {
    Exact(T),
    CaseVariant,
    Other,
}

/// The first `len` (at most 8) bytes at `buf[at..]` as a little-endian word, zero above them.
#[inline(always)]
fn word_at(buf: &[u8], at: usize, len: usize) -> u64 {
    debug_assert!(len <= 8);
    let w = match buf.get(at..at + 8) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => {
            let mut w = [0u8; 8];
            w[..len].copy_from_slice(&buf[at..at + len]);
            u64::from_le_bytes(w)
        }
    };
    if len == 8 {
        w
    } else {
        w & ((1u64 << (8 * len)) - 1)
    }
}

/// A member name (at most 8 bytes) as a word, for [`word_at`] comparisons.
const fn name_word(name: &[u8]) -> u64 {
    pattern(name).0 as u64
}

/// Sets bit 5 of every byte of a word: for the all-letter member names this folds ASCII
/// upper case onto lower case (and maps no other byte onto a lower-case letter).
const FOLD: u64 = 0x2020_2020_2020_2020;

/// [`classify`] for the message's own members, without escapes: the key body is
/// `buf[at..at + len]`. Every member name is at most 8 bytes and all letters, so one word
/// compare settles exact names, and one more (with case folded) settles case variants.
#[inline(always)]
fn classify_message_key(buf: &[u8], at: usize, len: usize) -> KeyClass<Member> {
    const JSONRPC: u64 = name_word(b"jsonrpc");
    const ID: u64 = name_word(b"id");
    const METHOD: u64 = name_word(b"method");
    const PARAMS: u64 = name_word(b"params");
    const RESULT: u64 = name_word(b"result");
    const ERROR: u64 = name_word(b"error");
    let (candidates, count): ([(u64, Member); 3], usize) = match len {
        7 => ([(JSONRPC, Member::Jsonrpc); 3], 1),
        2 => ([(ID, Member::Id); 3], 1),
        6 => (
            [
                (METHOD, Member::Method),
                (PARAMS, Member::Params),
                (RESULT, Member::Result),
            ],
            3,
        ),
        5 => ([(ERROR, Member::Error); 3], 1),
        _ => return KeyClass::Other,
    };
    let w = word_at(buf, at, len);
    for &(name, member) in &candidates[..count] {
        if w == name {
            return KeyClass::Exact(member);
        }
    }
    let mask = (1u64 << (8 * len)) - 1;
    let folded = w | (FOLD & mask);
    for &(name, _) in &candidates[..count] {
        if folded == name {
            return KeyClass::CaseVariant;
        }
    }
    KeyClass::Other
}

/// `text` as a little-endian 128-bit word and the mask of its bytes.
const fn pattern(text: &[u8]) -> (u128, u128) {
    let mut w = 0u128;
    let mut i = 0;
    while i < text.len() {
        w |= (text[i] as u128) << (8 * i);
        i += 1;
    }
    (w, (1u128 << (8 * text.len())) - 1)
}

/// A compact key spelling, `"name":`, as a [`pattern`] plus its length.
#[derive(Clone, Copy)]
struct CompactKey {
    word: u128,
    mask: u128,
    len: usize,
}

const fn compact(text: &[u8]) -> CompactKey {
    let (word, mask) = pattern(text);
    CompactKey {
        word,
        mask,
        len: text.len(),
    }
}

/// Compact key spellings (`"name":` with nothing in between) of one object's known members,
/// each read in one 16-byte compare: the key's first letter picks the candidate from a table,
/// so there is no branch on the letter. Index 0 is a sentinel that never matches (its mask
/// keeps nothing, its word is not zero). Anything else (whitespace, escapes, other names, the
/// frame's last 15 bytes) is left to the general path, which gives the same answer more
/// slowly.
struct CompactKeys<T: 'static> {
    keys: &'static [(CompactKey, T)],
    by_letter: [u8; 256],
}

const NEVER: CompactKey = CompactKey {
    word: 1,
    mask: 0,
    len: 0,
};

impl<T: Copy> CompactKeys<T> {
    /// The table for `keys`, whose first entry is [`NEVER`] and whose names start with
    /// different letters.
    const fn new(keys: &'static [(CompactKey, T)]) -> Self {
        let mut by_letter = [0u8; 256];
        let mut i = 1;
        while i < keys.len() {
            let letter = (keys[i].0.word >> 8) as u8 as usize;
            assert!(
                by_letter[letter] == 0,
                "two names start with the same letter"
            );
            by_letter[letter] = i as u8;
            i += 1;
        }
        CompactKeys { keys, by_letter }
    }

    /// The member whose compact spelling the frame has at `pos`, and the position after the
    /// colon.
    #[inline(always)]
    fn at(&self, buf: &[u8], pos: usize) -> Option<(T, usize)> {
        let bytes: &[u8; 16] = buf.get(pos..pos + 16)?.try_into().ok()?;
        let (key, member) = *self.keys.get(self.by_letter[bytes[1] as usize] as usize)?;
        (u128::from_le_bytes(*bytes) & key.mask == key.word).then_some((member, pos + key.len))
    }
}

/// The message's own members. A `const`, not a `static`, so that the compiler sees the keys at
/// each use (as a `static` the decoder measured 6% slower).
const MEMBER_KEYS: CompactKeys<Member> = CompactKeys::new(&[
    (NEVER, Member::Jsonrpc),
    (compact(b"\"jsonrpc\":"), Member::Jsonrpc),
    (compact(b"\"id\":"), Member::Id),
    (compact(b"\"method\":"), Member::Method),
    (compact(b"\"params\":"), Member::Params),
    (compact(b"\"result\":"), Member::Result),
    (compact(b"\"error\":"), Member::Error),
]);

#[inline(always)]
fn classify<T: Copy>(key: &[u8], table: &[(&[u8], T)]) -> KeyClass<T> {
    for &(name, member) in table {
        if key == name {
            return KeyClass::Exact(member);
        }
    }
    for &(name, _) in table {
        if key.eq_ignore_ascii_case(name) {
            return KeyClass::CaseVariant;
        }
    }
    if unicode_case_variant(key, table) {
        return KeyClass::CaseVariant;
    }
    KeyClass::Other
}

/// LATIN SMALL LETTER LONG S (U+017F) in UTF-8. Under Unicode simple case folding it is a form
/// of `s`, and it is the only non-ASCII character that folds onto a letter of any member name
/// (the other one that folds onto ASCII, the Kelvin sign, folds onto `k`, which no name has).
const LONG_S: [u8; 2] = [0xC5, 0xBF];

/// Whether `key` equals a member name under Unicode simple case folding, as decoders that
/// fold keys (Go's `encoding/json`, for one) would match it: `paramſ` is `params` to them, so
/// it must be rejected as a case variant here, not ignored as an unknown member.
#[cold]
#[inline(never)]
fn unicode_case_variant<T>(key: &[u8], table: &[(&[u8], T)]) -> bool {
    if !key.windows(2).any(|w| w == LONG_S) {
        return false;
    }
    let mut folded = [0u8; 16];
    let mut n = 0;
    let mut i = 0;
    while i < key.len() {
        if n == folded.len() {
            return false;
        }
        if key[i..].starts_with(&LONG_S) {
            folded[n] = b's';
            i += 2;
        } else {
            folded[n] = key[i];
            i += 1;
        }
        n += 1;
    }
    table
        .iter()
        .any(|(name, _)| folded[..n].eq_ignore_ascii_case(name))
}

/// Parses the integer that validation has accepted at `buf[a..b]` (no fraction, no exponent).
fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (neg, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    // Accumulate negatively so that i64::MIN is representable.
    let mut v: i64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_sub((d - b'0') as i64)?;
    }
    if neg { Some(v) } else { v.checked_neg() }
}

/// How many of the eight bytes of `word` (read little-endian, so the first byte is the lowest)
/// are ASCII digits before the first that is not.
#[inline(always)]
fn leading_digits(word: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_NIBBLES: u64 = 0xF0 * ONES;
    // A byte is a digit when its high nibble is 3 and stays 3 after adding 6 (which carries
    // into the high nibble for 0x3A..=0x3F). A carry out of a byte of 0xFA or more disturbs
    // only the bytes after it, and such a byte is already a non-digit.
    let off = ((word & HIGH_NIBBLES) ^ (0x30 * ONES))
        | ((word.wrapping_add(0x06 * ONES) & HIGH_NIBBLES) ^ (0x30 * ONES));
    // The top bit of each byte of `off` that is not zero.
    let nonzero = (((off & (0x7F * ONES)) + 0x7F * ONES) | off) & (0x80 * ONES);
    (nonzero.trailing_zeros() / 8) as usize
}

/// The value of the first `n` (1 to 8) bytes of `word`, which are ASCII digits, the first one
/// the most significant.
#[inline(always)]
fn digits_value(word: u64, n: usize) -> u64 {
    debug_assert!((1..=8).contains(&n));
    // Digits to values, then move them to the top bytes: the bytes below become leading zeros.
    let v = (word.wrapping_sub(0x3030_3030_3030_3030)) << (8 * (8 - n));
    // Combine neighbours: pairs (two-digit numbers in every other byte), then pairs of pairs
    // (four-digit numbers in the 32-bit halves), then the halves.
    let pairs = (v * 10 + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let quads = (pairs * 100 + (pairs >> 16)) & 0x0000_FFFF_0000_FFFF;
    (quads & 0xFFFF) * 10_000 + (quads >> 32)
}

/// Reads a number value at `start`: `Ok(Ok(n))` for an in-range integer, `Ok(Err(reason))` for
/// a valid number that is not one, `Err` for invalid JSON.
#[inline(always)]
fn integer<'f, S: Syntax<'f>>(
    s: &mut S,
    start: usize,
    fractional: Reason,
    out_of_range: Reason,
) -> Result<(usize, Result<i64, Reason>), Fault> {
    let buf = s.buf();
    // The common case: an optional minus, 1 to 18 digits without a leading zero, and no
    // fraction or exponent after them. Such a number always fits an i64; anything else takes
    // the general path.
    if let Some((end, v)) = short_integer(buf, start) {
        return Ok((end, Ok(v)));
    }
    let negative = buf.get(start) == Some(&b'-');
    let digits = start + negative as usize;
    let mut i = digits;
    let mut v: u64 = 0;
    while let Some(&d) = buf.get(i) {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 || i - digits == 18 {
            break;
        }
        v = v * 10 + digit as u64;
        i += 1;
    }
    let simple = i > digits
        && (buf[digits] != b'0' || i == digits + 1)
        && !matches!(buf.get(i), Some(b'.' | b'e' | b'E' | b'0'..=b'9'));
    if simple {
        let v = v as i64;
        return Ok((i, Ok(if negative { -v } else { v })));
    }
    integer_general(s, start, fractional, out_of_range)
}

#[inline(never)]
fn integer_general<'f, S: Syntax<'f>>(
    s: &mut S,
    start: usize,
    fractional: Reason,
    out_of_range: Reason,
) -> Result<(usize, Result<i64, Reason>), Fault> {
    let buf = s.buf();
    let shape = scan::number(buf, start)?;
    if !shape.integer {
        return Ok((shape.end, Err(fractional)));
    }
    match parse_i64(&buf[start..shape.end]) {
        Some(n) => Ok((shape.end, Ok(n))),
        None => Ok((shape.end, Err(out_of_range))),
    }
}

/// [`integer`]'s common case without a loop: an optional minus, then 1 to 7 digits without a
/// leading zero, followed by anything but a fraction or an exponent, with eight bytes to read
/// after the minus. (Ids and error codes are short.) `None` leaves the number to the general
/// path.
#[inline(always)]
fn short_integer(buf: &[u8], start: usize) -> Option<(usize, i64)> {
    let negative = buf.get(start) == Some(&b'-');
    let digits = start + negative as usize;
    let chunk = buf.get(digits..digits + 8)?;
    let word = u64::from_le_bytes(chunk.try_into().ok()?);
    let n = leading_digits(word);
    if n > 0 && n < 8 && (chunk[0] != b'0' || n == 1) && !matches!(chunk[n], b'.' | b'e' | b'E') {
        let v = digits_value(word, n) as i64;
        return Some((digits + n, if negative { -v } else { v }));
    }
    None
}

/// How most messages begin, ours included: the version, then an integer id.
const USUAL_HEAD: &[u8; 22] = br#"{"jsonrpc":"2.0","id":"#;

/// The first envelope problem seen, kept while the walk goes on to validate the rest.
struct Problems {
    first: Option<(Reason, usize)>,
    /// More than one problem was noted.
    more: bool,
}

impl Problems {
    #[inline(always)]
    fn note(&mut self, reason: Reason, at: usize) {
        if self.first.is_none() {
            self.first = Some((reason, at));
        } else {
            self.more = true;
        }
    }
}

enum IdSlot<'f> {
    Absent,
    Null,
    Value(Id<'f>),
    Invalid,
}

/// Walks one object that starts at `open` (`{`). Returns the position after it and the
/// message or the envelope problem. Parse faults abort the walk.
fn object<'f, S: Syntax<'f>>(
    s: &mut S,
    open: usize,
    depth_left: usize,
    mut index: Option<&mut ParamsIndex>,
) -> Result<(usize, Result<Message<'f>, DecodeError<'f>>), Fault> {
    let buf = s.buf();
    if depth_left == 0 {
        return Err(fault(Reason::TooDeep, open));
    }
    let inner_depth = depth_left - 1;
    let mut problems = Problems {
        first: None,
        more: false,
    };
    let mut params_array = false;
    let mut seen = [false; 6];
    let mut version_ok = false;
    let mut id = IdSlot::Absent;
    let mut id_ambiguous = false;
    let mut method: Option<JsonStr<'f>> = None;
    let mut params: Option<RawJson<'f>> = None;
    let mut result: Option<RawJson<'f>> = None;
    let mut error: Option<Option<ErrorObject<'f>>> = None;

    let mut pos = skip_ws(buf, open + 1);
    // The usual head, `{"jsonrpc":"2.0","id":` and a short integer then a comma, is read in a
    // few compares, with the same outcome the loop below would reach for its two members; the
    // loop goes on from the key after the comma.
    let mut after_head = false;
    if buf.get(open..open + USUAL_HEAD.len()) == Some(USUAL_HEAD)
        && let Some((end, n)) = short_integer(buf, open + USUAL_HEAD.len())
        && buf.get(end) == Some(&b',')
    {
        seen[Member::Jsonrpc as usize] = true;
        seen[Member::Id as usize] = true;
        version_ok = true;
        id = IdSlot::Value(Id::Int(n));
        pos = skip_ws(buf, end + 1);
        after_head = true;
    }
    if !after_head && buf.get(pos) == Some(&b'}') {
        pos += 1;
    } else {
        loop {
            // Key.
            let key_at = pos;
            if buf.get(pos) != Some(&b'"') {
                return Err(match buf.get(pos) {
                    Some(_) => scan::unexpected(buf, pos),
                    None => fault(Reason::UnexpectedEnd, pos),
                });
            }
            let class = if let Some((member, after_colon)) = MEMBER_KEYS.at(buf, pos) {
                pos = after_colon;
                KeyClass::Exact(member)
            } else {
                let (key_end, key_escaped) = s.string(pos)?;
                let class = if key_escaped {
                    let mut scratch = [0u8; 16];
                    match key_text(&buf[pos + 1..key_end - 1], key_escaped, &mut scratch) {
                        Some(key) => classify(key, &MEMBERS),
                        None => KeyClass::Other,
                    }
                } else {
                    match classify_message_key(buf, pos + 1, key_end - pos - 2) {
                        KeyClass::Other if buf[pos + 1..key_end - 1].contains(&LONG_S[0]) => {
                            classify(&buf[pos + 1..key_end - 1], &MEMBERS)
                        }
                        class => class,
                    }
                };
                pos = expect(buf, skip_ws(buf, key_end), b':')?;
                class
            };
            let vstart = skip_ws(buf, pos);
            let Some(&first) = buf.get(vstart) else {
                return Err(fault(Reason::UnexpectedEnd, vstart));
            };

            // Value.
            let member = match class {
                KeyClass::Exact(m) => {
                    let slot = &mut seen[m as usize];
                    if *slot {
                        problems.note(Reason::DuplicateKey, key_at);
                        if m == Member::Id {
                            id_ambiguous = true;
                        }
                    }
                    *slot = true;
                    Some(m)
                }
                KeyClass::CaseVariant => {
                    problems.note(Reason::CaseVariantKey, key_at);
                    None
                }
                KeyClass::Other => None,
            };
            pos = match member {
                Some(Member::Jsonrpc) => {
                    if buf.get(vstart..vstart + 5) == Some(b"\"2.0\"") {
                        version_ok = true;
                        vstart + 5
                    } else if first == b'"' {
                        let (end, esc) = s.string(vstart)?;
                        let body = JsonStr::validated(text(buf, vstart + 1, end - 1), esc);
                        if body.eq_str("2.0") {
                            version_ok = true;
                        } else {
                            problems.note(Reason::WrongVersion, vstart);
                        }
                        end
                    } else {
                        problems.note(Reason::WrongVersion, vstart);
                        s.value(vstart, inner_depth)?
                    }
                }
                Some(Member::Id) => match first {
                    b'"' => {
                        let (end, esc) = s.string(vstart)?;
                        id = IdSlot::Value(Id::Str(JsonStr::validated(
                            text(buf, vstart + 1, end - 1),
                            esc,
                        )));
                        end
                    }
                    b'-' | b'0'..=b'9' => {
                        let (end, n) =
                            integer(s, vstart, Reason::FractionalId, Reason::IdOutOfRange)?;
                        match n {
                            Ok(n) => id = IdSlot::Value(Id::Int(n)),
                            Err(reason) => {
                                id = IdSlot::Invalid;
                                problems.note(reason, vstart);
                            }
                        }
                        end
                    }
                    b'n' => {
                        let end = s.value(vstart, inner_depth)?;
                        id = IdSlot::Null;
                        end
                    }
                    _ => {
                        id = IdSlot::Invalid;
                        problems.note(Reason::InvalidId, vstart);
                        s.value(vstart, inner_depth)?
                    }
                },
                Some(Member::Method) => {
                    if first == b'"' {
                        let (end, esc) = s.string(vstart)?;
                        method = Some(JsonStr::validated(text(buf, vstart + 1, end - 1), esc));
                        end
                    } else {
                        problems.note(Reason::MethodNotString, vstart);
                        s.value(vstart, inner_depth)?
                    }
                }
                Some(Member::Params) => {
                    let end = match &mut index {
                        Some(index) if first == b'{' => {
                            let walked = params_members(s, vstart, inner_depth, index);
                            if cfg!(debug_assertions)
                                && let Ok(end) = walked
                            {
                                // The member walk accepts only what the whole walk accepts,
                                // and ends where it ends.
                                assert_eq!(s.value(vstart, inner_depth).ok(), Some(end));
                            }
                            match walked {
                                Ok(end) => end,
                                // The reference walk names the fault.
                                Err(_) => s.value(vstart, inner_depth)?,
                            }
                        }
                        _ => s.value(vstart, inner_depth)?,
                    };
                    if first == b'{' {
                        params = Some(RawJson::validated(text(buf, vstart, end)));
                    } else {
                        params_array = first == b'[';
                        problems.note(Reason::ParamsNotObject, vstart);
                    }
                    end
                }
                Some(Member::Result) => {
                    let end = s.value(vstart, inner_depth)?;
                    result = Some(RawJson::validated(text(buf, vstart, end)));
                    end
                }
                Some(Member::Error) => {
                    if first == b'{' {
                        let (end, obj) = error_object(s, vstart, inner_depth, &mut problems)?;
                        error = Some(obj);
                        end
                    } else {
                        problems.note(Reason::ErrorNotObject, vstart);
                        error = Some(None);
                        s.value(vstart, inner_depth)?
                    }
                }
                None => s.value(vstart, inner_depth)?,
            };

            pos = skip_ws(buf, pos);
            match buf.get(pos) {
                Some(b',') => pos = skip_ws(buf, pos + 1),
                Some(b'}') => {
                    pos += 1;
                    break;
                }
                Some(_) => return Err(scan::unexpected(buf, pos)),
                None => return Err(fault(Reason::UnexpectedEnd, pos)),
            }
        }
    }

    let readable_id = match (&id, id_ambiguous) {
        (IdSlot::Value(v), false) => Some(*v),
        _ => None,
    };
    // A frame with `result` or `error` and no `method` is a response, however malformed: its
    // id is one of the receiver's own request ids, so it must never be answered. (Worked out
    // on the error path only.)
    let invalid = |reason: Reason, at: usize| {
        let response_shaped = !seen[Member::Method as usize]
            && (seen[Member::Result as usize] || seen[Member::Error as usize]);
        DecodeError::invalid(reason, at, readable_id).of_response_shape(response_shaped)
    };
    if let Some((reason, at)) = problems.first {
        // Its only fault an array of params, or a member named as a JSON-RPC one but for its
        // case (`"Id"`: JSON-RPC reads no such member), with a method, the right version and
        // no id: a valid JSON-RPC notification, which must not be answered.
        let mcp_only = match reason {
            Reason::ParamsNotObject => params_array,
            Reason::CaseVariantKey => true,
            _ => false,
        };
        let notification = mcp_only
            && !problems.more
            && method.is_some()
            && matches!(id, IdSlot::Absent)
            && !seen[Member::Result as usize]
            && !seen[Member::Error as usize]
            && seen[Member::Jsonrpc as usize];
        return Ok((
            pos,
            Err(invalid(reason, at).of_jsonrpc_notification(notification)),
        ));
    }
    if !seen[Member::Jsonrpc as usize] {
        return Ok((pos, Err(invalid(Reason::MissingVersion, open))));
    }
    debug_assert!(version_ok);
    let message = if let Some(method) = method {
        if result.is_some() || error.is_some() {
            Err(invalid(Reason::AmbiguousKind, open))
        } else {
            match id {
                IdSlot::Absent => Ok(Message::Notification(Notification { method, params })),
                IdSlot::Value(id) => Ok(Message::Request(Request { id, method, params })),
                IdSlot::Null => Err(invalid(Reason::NullId, open)),
                IdSlot::Invalid => Err(invalid(Reason::InvalidId, open)),
            }
        }
    } else if params.is_some() {
        Err(invalid(Reason::AmbiguousKind, open))
    } else {
        match (result, error) {
            (Some(_), Some(_)) => Err(invalid(Reason::ResultAndError, open)),
            (Some(result), None) => match id {
                IdSlot::Value(id) => Ok(Message::Response(Response { id, result })),
                IdSlot::Null => Err(invalid(Reason::NullId, open)),
                IdSlot::Absent => Err(invalid(Reason::MissingId, open)),
                IdSlot::Invalid => Err(invalid(Reason::InvalidId, open)),
            },
            (None, Some(Some(error))) => match id {
                IdSlot::Value(id) => Ok(Message::Error(ErrorResponse {
                    id: Some(id),
                    error,
                })),
                IdSlot::Null | IdSlot::Absent => {
                    Ok(Message::Error(ErrorResponse { id: None, error }))
                }
                IdSlot::Invalid => Err(invalid(Reason::InvalidId, open)),
            },
            // A malformed error object has already noted its problem.
            (None, Some(None)) => Err(invalid(Reason::ErrorNotObject, open)),
            (None, None) => Err(invalid(Reason::NotAMessage, open)),
        }
    };
    Ok((pos, message))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ErrorMember {
    Code,
    Message,
    Data,
}

const ERROR_MEMBERS: [(&[u8], ErrorMember); 3] = [
    (b"code", ErrorMember::Code),
    (b"message", ErrorMember::Message),
    (b"data", ErrorMember::Data),
];

/// The members of an error object.
const ERROR_KEYS: CompactKeys<ErrorMember> = CompactKeys::new(&[
    (NEVER, ErrorMember::Code),
    (compact(b"\"code\":"), ErrorMember::Code),
    (compact(b"\"message\":"), ErrorMember::Message),
    (compact(b"\"data\":"), ErrorMember::Data),
]);

/// Walks the `error` object at `open`.
fn error_object<'f, S: Syntax<'f>>(
    s: &mut S,
    open: usize,
    depth_left: usize,
    problems: &mut Problems,
) -> Result<(usize, Option<ErrorObject<'f>>), Fault> {
    let buf = s.buf();
    if depth_left == 0 {
        return Err(fault(Reason::TooDeep, open));
    }
    let inner_depth = depth_left - 1;
    let mut seen = [false; 3];
    let mut code: Option<i64> = None;
    let mut message: Option<JsonStr<'f>> = None;
    let mut data: Option<RawJson<'f>> = None;
    let mut bad = false;

    let mut pos = skip_ws(buf, open + 1);
    if buf.get(pos) == Some(&b'}') {
        pos += 1;
    } else {
        loop {
            let key_at = pos;
            if buf.get(pos) != Some(&b'"') {
                return Err(match buf.get(pos) {
                    Some(_) => scan::unexpected(buf, pos),
                    None => fault(Reason::UnexpectedEnd, pos),
                });
            }
            let class = if let Some((member, after_colon)) = ERROR_KEYS.at(buf, pos) {
                pos = after_colon;
                KeyClass::Exact(member)
            } else {
                let (key_end, key_escaped) = s.string(pos)?;
                let mut scratch = [0u8; 16];
                let class = match key_text(&buf[pos + 1..key_end - 1], key_escaped, &mut scratch) {
                    Some(key) => classify(key, &ERROR_MEMBERS),
                    None => KeyClass::Other,
                };
                pos = expect(buf, skip_ws(buf, key_end), b':')?;
                class
            };
            let vstart = skip_ws(buf, pos);
            let Some(&first) = buf.get(vstart) else {
                return Err(fault(Reason::UnexpectedEnd, vstart));
            };
            let member = match class {
                KeyClass::Exact(m) => {
                    if seen[m as usize] {
                        problems.note(Reason::DuplicateKey, key_at);
                        bad = true;
                    }
                    seen[m as usize] = true;
                    Some(m)
                }
                KeyClass::CaseVariant => {
                    problems.note(Reason::CaseVariantKey, key_at);
                    bad = true;
                    None
                }
                KeyClass::Other => None,
            };
            pos = match member {
                Some(ErrorMember::Code) => {
                    if matches!(first, b'-' | b'0'..=b'9') {
                        let (end, n) = integer(
                            s,
                            vstart,
                            Reason::ErrorCodeNotInteger,
                            Reason::ErrorCodeNotInteger,
                        )?;
                        match n {
                            Ok(n) => code = Some(n),
                            Err(reason) => {
                                problems.note(reason, vstart);
                                bad = true;
                            }
                        }
                        end
                    } else {
                        problems.note(Reason::ErrorCodeNotInteger, vstart);
                        bad = true;
                        s.value(vstart, inner_depth)?
                    }
                }
                Some(ErrorMember::Message) => {
                    if first == b'"' {
                        let (end, esc) = s.string(vstart)?;
                        message = Some(JsonStr::validated(text(buf, vstart + 1, end - 1), esc));
                        end
                    } else {
                        problems.note(Reason::ErrorMessageNotString, vstart);
                        bad = true;
                        s.value(vstart, inner_depth)?
                    }
                }
                Some(ErrorMember::Data) => {
                    let end = s.value(vstart, inner_depth)?;
                    data = Some(RawJson::validated(text(buf, vstart, end)));
                    end
                }
                None => s.value(vstart, inner_depth)?,
            };
            pos = skip_ws(buf, pos);
            match buf.get(pos) {
                Some(b',') => pos = skip_ws(buf, pos + 1),
                Some(b'}') => {
                    pos += 1;
                    break;
                }
                Some(_) => return Err(scan::unexpected(buf, pos)),
                None => return Err(fault(Reason::UnexpectedEnd, pos)),
            }
        }
    }
    if bad {
        return Ok((pos, None));
    }
    match (code, message) {
        (Some(code), Some(message)) => Ok((
            pos,
            Some(ErrorObject {
                code,
                message,
                data,
            }),
        )),
        (None, _) => {
            problems.note(Reason::ErrorCodeNotInteger, open);
            Ok((pos, None))
        }
        (_, None) => {
            problems.note(Reason::ErrorMessageNotString, open);
            Ok((pos, None))
        }
    }
}

/// Decodes a whole frame.
fn walk<'f, S: Syntax<'f>>(
    s: &mut S,
    max_depth: usize,
    max_batch: usize,
    index: Option<&mut ParamsIndex>,
) -> Result<Decoded<'f>, DecodeError<'f>> {
    let buf = s.buf();
    let start = skip_ws(buf, 0);
    let (end, decoded) = match buf.get(start) {
        Some(b'{') => {
            let (end, msg) = object(s, start, max_depth, index).map_err(DecodeError::parse)?;
            (end, msg.map(Decoded::Single))
        }
        Some(b'[') => batch(s, start, max_depth, max_batch).map_err(DecodeError::parse)?,
        Some(_) => {
            let end = s.value(start, max_depth).map_err(DecodeError::parse)?;
            (
                end,
                Err(DecodeError::invalid(Reason::NotAnObject, start, None)),
            )
        }
        None => return Err(DecodeError::parse(fault(Reason::UnexpectedEnd, start))),
    };
    if !s.prevalidated() {
        let end = skip_ws(buf, end);
        if end != buf.len() {
            return Err(DecodeError::parse(fault(Reason::TrailingCharacters, end)));
        }
    }
    decoded
}

type BatchOutcome<'f> = (usize, Result<Decoded<'f>, DecodeError<'f>>);

/// Walks a batch. Past `max_batch` members the rest is still walked (a parse fault anywhere
/// in the frame wins) but nothing more is kept, and the batch is refused whole.
fn batch<'f, S: Syntax<'f>>(
    s: &mut S,
    open: usize,
    max_depth: usize,
    max_batch: usize,
) -> Result<BatchOutcome<'f>, Fault> {
    let buf = s.buf();
    if max_depth == 0 {
        return Err(fault(Reason::TooDeep, open));
    }
    let depth_left = max_depth - 1;
    let mut pos = skip_ws(buf, open + 1);
    if buf.get(pos) == Some(&b']') {
        return Ok((
            pos + 1,
            Err(DecodeError::invalid(Reason::EmptyBatch, open, None)),
        ));
    }
    let mut members = Vec::new();
    let mut too_large = false;
    loop {
        let Some(&first) = buf.get(pos) else {
            return Err(fault(Reason::UnexpectedEnd, pos));
        };
        if too_large {
            pos = s.value(pos, depth_left)?;
        } else if members.len() == max_batch {
            too_large = true;
            members = Vec::new(); // what was kept is not needed any more
            pos = s.value(pos, depth_left)?;
        } else if first == b'{' {
            let (end, msg) = object(s, pos, depth_left, None)?;
            members.push(msg);
            pos = end;
        } else {
            let end = s.value(pos, depth_left)?;
            members.push(Err(DecodeError::invalid(Reason::NotAnObject, pos, None)));
            pos = end;
        }
        pos = skip_ws(buf, pos);
        match buf.get(pos) {
            Some(b',') => pos = skip_ws(buf, pos + 1),
            Some(b']') if too_large => {
                let refused = DecodeError::invalid(Reason::BatchTooLarge, open, None);
                return Ok((pos + 1, Err(refused)));
            }
            Some(b']') => return Ok((pos + 1, Ok(Decoded::Batch(members)))),
            Some(_) => return Err(scan::unexpected(buf, pos)),
            None => return Err(fault(Reason::UnexpectedEnd, pos)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        CompactKeys, ERROR_KEYS, ERROR_MEMBERS, MEMBER_KEYS, MEMBERS, digits_value, leading_digits,
    };

    /// Every compact spelling matches, with its length, whatever follows it; changing any one
    /// of its bytes to any other value (which covers the letters that start no member, and so
    /// the table's sentinel) matches nothing; and so does a frame too short for the compare.
    fn check_compact_keys<T: Copy + PartialEq + std::fmt::Debug>(
        keys: &CompactKeys<T>,
        names: &[(&[u8], T)],
    ) {
        for &(name, member) in names {
            let spelling = format!("\"{}\":", String::from_utf8_lossy(name));
            for tail in [b'x', b' ', b'"', 0xFF] {
                let mut buf = spelling.clone().into_bytes();
                buf.resize(16, tail);
                assert_eq!(
                    keys.at(&buf, 0),
                    Some((member, spelling.len())),
                    "{spelling}"
                );
                let mut shifted = b"  ".to_vec();
                shifted.extend_from_slice(&buf);
                assert_eq!(keys.at(&shifted, 2), Some((member, spelling.len() + 2)));
                assert_eq!(keys.at(&buf[..15], 0), None);
                for i in 0..spelling.len() {
                    for v in 0..=255u8 {
                        if v == buf[i] {
                            continue;
                        }
                        let mut bad = buf.clone();
                        bad[i] = v;
                        assert_eq!(
                            keys.at(&bad, 0),
                            None,
                            "{:?}",
                            String::from_utf8_lossy(&bad)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn compact_keys_match_exactly_their_spellings() {
        check_compact_keys(&MEMBER_KEYS, &MEMBERS);
        check_compact_keys(&ERROR_KEYS, &ERROR_MEMBERS);
    }

    fn word(bytes: &[u8; 8]) -> u64 {
        u64::from_le_bytes(*bytes)
    }

    #[test]
    fn leading_digits_stops_at_the_first_non_digit_whatever_follows() {
        // Every byte value in every position after a run of digits, including those whose
        // +6 carries out of the byte (0xFA..=0xFF) and the neighbours of '0'..='9'.
        for run in 0..8 {
            for stop in 0..=255u8 {
                let mut bytes = [b'7'; 8];
                bytes[run] = stop;
                for (k, b) in bytes.iter_mut().enumerate().skip(run + 1) {
                    *b = 0xF0u8.wrapping_add(k as u8 * 3);
                }
                let want = if stop.is_ascii_digit() {
                    run + 1
                        + bytes[run + 1..]
                            .iter()
                            .take_while(|b| b.is_ascii_digit())
                            .count()
                } else {
                    run
                };
                assert_eq!(leading_digits(word(&bytes)), want, "{bytes:?}");
            }
        }
        assert_eq!(leading_digits(word(b"12345678")), 8);
    }

    #[test]
    fn digits_value_matches_the_standard_parser_for_every_length() {
        let mut next = crate::xorshift(0x2545_F491_4F6C_DD1D);
        for _ in 0..20_000 {
            let state = next();
            let n = 1 + (state % 8) as usize;
            let value = (state >> 8) % 10u64.pow(n as u32);
            let text = format!("{value:0n$},\"x\":[1]");
            let bytes: [u8; 8] = text.as_bytes()[..8].try_into().unwrap();
            assert_eq!(digits_value(word(&bytes), n), value, "{text}");
        }
        assert_eq!(digits_value(word(b"99999999"), 8), 99_999_999);
        assert_eq!(digits_value(word(b"0}      "), 1), 0);
    }

    use super::{Decoder, DecoderConfig, ParamsIndex};
    use crate::jsonrpc::{Decoded, Message};

    const KEYS: [&str; 6] = ["_meta", "task", "progressToken", "a", "b\u{e9}", "missing"];

    /// What the index answers for each key, as text (`Err` for a duplicate).
    fn lookups(index: &ParamsIndex, params: super::RawJson<'_>) -> Vec<Result<Option<String>, ()>> {
        let found = index.get_each(params, KEYS);
        (0..KEYS.len())
            .map(|i| {
                found
                    .get(i)
                    .map(|v| v.map(|v| v.get().to_owned()))
                    .map_err(|_| ())
            })
            .collect()
    }

    fn walked(params: super::RawJson<'_>) -> Vec<Result<Option<String>, ()>> {
        lookups(&ParamsIndex::EMPTY, params)
    }

    fn request_params<'f>(decoded: &Decoded<'f>) -> super::RawJson<'f> {
        match decoded {
            Decoded::Single(Message::Request(r)) => r.params.expect("params"),
            Decoded::Single(Message::Notification(n)) => n.params.expect("params"),
            other => panic!("not a request: {other:?}"),
        }
    }

    /// The decoder's index of a message's params answers every lookup as a walk of the same
    /// params does: escaped keys, duplicates, whitespace, nested objects with the same keys,
    /// more members than the index keeps, and empty params. Both backends.
    #[test]
    fn params_index_answers_as_a_walk_does() {
        let params = [
            r#"{"_meta":{"progressToken":7},"name":"echo","arguments":{"a":1,"_meta":2}}"#,
            r#"{ "a" : [1,{"a":2}] , "task" : {"ttl":1} , "_meta" : null }"#,
            r#"{"a":1,"a":2,"task":{}}"#,
            r#"{"\u0061":"escaped key","b\u00e9":true,"task":1,"ta\u0073k":2}"#,
            r#"{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"a":"ninth"}"#,
            r#"{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"a":"eighth"}"#,
            r#"{}"#,
            "{\n\t\"progressToken\" :\"p\" ,\r\n \"missing\"\n:\n[ ]\n}",
            r#"{"a":"x\"}","_meta":{"a":{"b":[{}]}}}"#,
        ];
        for &backend in super::Backend::ALL {
            let config = DecoderConfig {
                backend,
                ..DecoderConfig::default()
            };
            let mut d = Decoder::new(config);
            for p in params {
                for frame in [
                    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{p}}}"#),
                    format!(r#"{{"params":{p},"method":"m","jsonrpc":"2.0"}}"#),
                    format!(r#"  {{ "jsonrpc" : "2.0" , "method" : "m" , "params" :  {p}  }} "#),
                ] {
                    let mut index = ParamsIndex::EMPTY;
                    let (_, decoded) = d.decode_text(frame.as_bytes(), &mut index).expect(&frame);
                    let params = request_params(&decoded);
                    let index = &index;
                    let overflow = p.contains("ninth");
                    assert_eq!(index.describes(params.get()), !overflow, "{frame}");
                    assert_eq!(lookups(index, params), walked(params), "{frame}");
                }
            }
        }
    }

    /// The index answers only for the params it was made from: another frame's params at
    /// another address, a batch member's, or the params of a frame decoded before this one
    /// are walked.
    #[test]
    fn params_index_describes_only_its_own_params() {
        let mut d = Decoder::default();
        let a = br#"{"jsonrpc":"2.0","method":"m","params":{"a":1}}"#.to_vec();
        let b = br#"{"jsonrpc":"2.0","method":"m","params":{"a":2}}"#.to_vec();
        let mut index_a = ParamsIndex::EMPTY;
        let (_, decoded_a) = d.decode_text(&a, &mut index_a).unwrap();
        let pa = request_params(&decoded_a);
        assert!(index_a.describes(pa.get()));
        let mut index = ParamsIndex::EMPTY;
        let (_, decoded_b) = d.decode_text(&b, &mut index).unwrap();
        let pb = request_params(&decoded_b);
        assert!(!index_a.describes(pb.get()), "same length, other address");
        assert_eq!(lookups(&index_a, pb), walked(pb));
        assert_eq!(walked(pb)[3], Ok(Some("2".to_owned())));

        // A batch leaves nothing recorded, and its members' params are walked.
        let batch = br#"[{"jsonrpc":"2.0","method":"m","params":{"a":3,"a":4}}]"#;
        let Ok((_, Decoded::Batch(members))) = d.decode_text(batch, &mut index) else {
            panic!("not a batch")
        };
        let Ok(Message::Notification(n)) = &members[0] else {
            panic!("not a notification")
        };
        let p = n.params.unwrap();
        assert_eq!(index.len, 0);
        assert_eq!(lookups(&index, p)[3], Err(()), "a duplicated key");

        // A frame that fails leaves nothing recorded either, even when its params were read
        // before the fault.
        for bad in [
            &br#"{"jsonrpc":"2.0","method":"m","params":{"a":1},}"#[..],
            br#"{"jsonrpc":"2.0","method":"m","params":{"a":1,}}"#,
            br#"{"params":{"a":1},"method":"m"}"#,
        ] {
            d.decode_text(&a, &mut index).unwrap();
            assert_ne!(index.len, 0);
            assert!(d.decode_text(bad, &mut index).is_err());
            assert_eq!(index.len, 0);
        }
    }

    /// Params the member walk must reject are rejected with the reason and place the whole
    /// walk gives (the reference), and nothing is recorded for them.
    #[test]
    fn params_faults_are_named_by_the_reference_walk() {
        let bad = [
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":}"#,
            r#"{1:1}"#,
            r#"{"a":1"b":2}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1"#,
            r#"{"a"#,
            r#"{"#,
        ];
        let mut d = Decoder::default();
        let mut index = ParamsIndex::EMPTY;
        for p in bad {
            let frame = format!(r#"{{"jsonrpc":"2.0","method":"m","params":{p}}}"#);
            let err = d
                .decode_text(frame.as_bytes(), &mut index)
                .expect_err(&frame);
            // The walk without an index takes the reference walk over the params.
            let reference = super::walk(
                &mut super::NativeSyntax {
                    buf: frame.as_bytes(),
                },
                DecoderConfig::default().max_depth,
                DecoderConfig::default().max_batch as usize,
                None,
            )
            .expect_err(&frame);
            assert_eq!(err.reason(), reference.reason(), "{frame}");
            assert_eq!(err.offset(), reference.offset(), "{frame}");
            assert_eq!(index.len, 0);
        }
        // Too deep: the params object itself is the container past the limit.
        let mut shallow = Decoder::new(DecoderConfig {
            max_depth: 1,
            ..DecoderConfig::default()
        });
        let err = shallow
            .decode_text(br#"{"jsonrpc":"2.0","method":"m","params":{}}"#, &mut index)
            .unwrap_err();
        assert_eq!(err.reason(), crate::jsonrpc::Reason::TooDeep);
    }
}
