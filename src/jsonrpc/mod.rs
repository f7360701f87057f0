//! JSON-RPC 2.0 as MCP uses it: borrowed message views, exact ids, strict validation, and an
//! encoder.
//!
//! Use [`Decoder::decode`] to turn one frame into a [`Decoded`] view that borrows from the
//! frame, and the `encode_*` functions to write messages into a reusable buffer. Nothing here
//! knows about MCP methods or connection state; whether a batch is acceptable, for instance, is
//! for the connection to decide by protocol version.

mod decode;
mod head;
mod index;
pub use head::{HeadFacts, scan_head};
mod encode;
mod scan;
pub(crate) use scan::skip_valid;
#[cfg(feature = "simd")]
mod simd;
mod text;
pub(crate) mod utf8;

use std::borrow::Cow;
use std::fmt;

pub(crate) use decode::ParamsIndex;
pub use decode::{Backend, Decoder, DecoderConfig};
pub(crate) use encode::has_line_break;
pub use encode::{
    BatchWriter, encode_error, encode_message, encode_notification, encode_request, encode_response,
};
pub use text::Unescaped;
pub(crate) use text::write_u64_padded;

/// Appends `s` as a JSON string, quotes included, escaping what JSON requires. Use it to build
/// JSON payloads by hand without a serializer.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    text::write_escaped(out, s);
    out.push(b'"');
}

// ---- Error codes -------------------------------------------------------------------------

/// JSON-RPC "Parse error": the frame is not valid JSON (or not valid UTF-8).
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request": valid JSON that is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC "Method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "Invalid params".
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "Internal error".
pub const INTERNAL_ERROR: i64 = -32603;

// ---- Borrowed text ------------------------------------------------------------------------

/// A JSON string as it appears on the wire, between its quotes, still escaped.
///
/// Use it wherever a message holds text (method names, string ids, error messages): reading
/// [`raw`](Self::raw) costs nothing, and unescaping happens only when you ask for it with
/// [`to_str`](Self::to_str), [`chars`](Self::chars) or [`eq_str`](Self::eq_str). Two `JsonStr`
/// compare equal when their *decoded* text is equal, so `"a"` and `"\u0061"` are the same
/// string; [`raw`](Self::raw) is what gets written back, byte for byte.
#[derive(Clone, Copy)]
pub struct JsonStr<'a> {
    raw: &'a str,
    escaped: bool,
}

impl<'a> JsonStr<'a> {
    /// Wraps `raw`, the text between the quotes of a JSON string, after checking that it is
    /// one (escapes valid, surrogates paired, no raw control characters or quotes). Use it to
    /// build a string [`Id`] from wire text you hold. Returns `None` when `raw` is not valid.
    pub fn from_raw(raw: &'a str) -> Option<Self> {
        let bytes = raw.as_bytes();
        let mut escaped = false;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'"' | 0x00..=0x1F => return None,
                b'\\' => {
                    escaped = true;
                    i = scan::escape(bytes, i).ok()?;
                }
                _ => i += 1,
            }
        }
        Some(JsonStr { raw, escaped })
    }

    /// Wraps text that a validator has already accepted.
    pub(crate) fn validated(raw: &'a str, escaped: bool) -> Self {
        JsonStr { raw, escaped }
    }

    /// The wire form, without the quotes: exactly the bytes that were received.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// Whether the wire form contains escapes (so that [`raw`](Self::raw) differs from the text).
    pub fn has_escapes(&self) -> bool {
        self.escaped
    }

    /// The decoded text. Borrows when there are no escapes, allocates otherwise.
    pub fn to_str(&self) -> Cow<'a, str> {
        if self.escaped {
            Cow::Owned(self.chars().collect())
        } else {
            Cow::Borrowed(self.raw)
        }
    }

    /// The decoded text, one `char` at a time, without allocating.
    pub fn chars(&self) -> Unescaped<'a> {
        Unescaped::new(self.raw)
    }

    /// Whether the decoded text equals `s`, without allocating.
    #[inline]
    pub fn eq_str(&self, s: &str) -> bool {
        if self.escaped {
            self.eq_str_escaped(s)
        } else {
            self.raw == s
        }
    }

    /// [`eq_str`](Self::eq_str) for text with escapes, kept out of line: keys are rarely
    /// escaped, and the plain compare is inlined where keys are matched.
    #[inline(never)]
    fn eq_str_escaped(&self, s: &str) -> bool {
        self.chars().eq(s.chars())
    }
}

impl PartialEq for JsonStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        if !self.escaped && !other.escaped {
            self.raw == other.raw
        } else {
            self.chars().eq(other.chars())
        }
    }
}
impl Eq for JsonStr<'_> {}

impl std::hash::Hash for JsonStr<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if self.escaped {
            for c in self.chars() {
                state.write_u32(c as u32);
            }
        } else {
            for c in self.raw.chars() {
                state.write_u32(c as u32);
            }
        }
        state.write_u8(0xff);
    }
}

impl fmt::Debug for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.raw)
    }
}

impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_str())
    }
}

/// How deep a JSON value you hand to the engine ([`RawJson::new`]) may nest: the decoder's
/// default limit ([`DecoderConfig::DEFAULT_MAX_DEPTH`]) less the levels a message puts around a
/// payload (the message, `error`, `data`; a task's result inside `result`), so that every
/// message the engine writes is one its own decoder, and a peer's with the same limit, reads.
pub const MAX_PAYLOAD_DEPTH: usize = DecoderConfig::DEFAULT_MAX_DEPTH - 4;

/// A JSON value that has been validated, as text: params, results and error data.
///
/// Use it to pass payloads through without building a tree. Values taken from a decoded
/// message are slices of the frame; [`RawJson::new`] validates text you bring yourself.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawJson<'a>(&'a str);

impl<'a> RawJson<'a> {
    /// Validates `text` as exactly one JSON value (surrounding whitespace allowed, nesting
    /// up to [`MAX_PAYLOAD_DEPTH`]). Use it before handing your own JSON to an encoder.
    pub fn new(text: &'a str) -> Result<Self, DecodeError<'static>> {
        match scan::validate_document(text.as_bytes(), MAX_PAYLOAD_DEPTH) {
            Ok(()) => Ok(RawJson(text)),
            Err(f) => Err(DecodeError::parse(f)),
        }
    }

    /// Wraps text that a validator has already accepted.
    pub(crate) fn validated(text: &'a str) -> Self {
        RawJson(text)
    }

    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }

    /// The first byte that is not whitespace (which says the value's type).
    fn lead(&self) -> u8 {
        let b = self.0.as_bytes();
        b.get(scan::skip_ws(b, 0)).copied().unwrap_or(0)
    }

    /// Whether the value is an object.
    pub fn is_object(&self) -> bool {
        self.lead() == b'{'
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        self.lead() == b'n'
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<JsonStr<'a>> {
        // The text is one valid JSON value: a string is everything between its first and last
        // byte, and it has escapes when it has a backslash. Nothing needs scanning again.
        let inner = self.0.trim_ascii().strip_prefix('"')?.strip_suffix('"')?;
        let escaped = inner.as_bytes().contains(&b'\\');
        debug_assert_eq!(
            {
                let b = self.0.as_bytes();
                let start = scan::skip_ws(b, 0);
                scan::string(b, start + 1).map(|(end, e)| (self.0.get(start + 1..end - 1), e))
            },
            Ok((Some(inner), escaped)),
            "as_str on {:?}",
            self.0
        );
        Some(JsonStr::validated(inner, escaped))
    }

    /// The value as an integer, if it is one that fits `i64` (no fraction, no exponent).
    pub fn as_i64(&self) -> Option<i64> {
        let t = self
            .0
            .trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        if t.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
            return None;
        }
        t.parse().ok()
    }

    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        let t = self
            .0
            .trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        match t.as_bytes().first() {
            Some(b'-' | b'0'..=b'9') => t.parse().ok(),
            _ => None,
        }
    }

    /// The value as a string or integer [`Id`] (the shape of ids and progress tokens).
    pub fn as_id(&self) -> Option<Id<'a>> {
        self.as_str()
            .map(Id::Str)
            .or_else(|| self.as_i64().map(Id::Int))
    }

    /// The members of an object, in order (empty for any other value). Use it to read the few
    /// keys an MCP layer needs without building a tree.
    pub fn members(&self) -> Members<'a> {
        let b = self.0.as_bytes();
        let start = scan::skip_ws(b, 0);
        Members {
            text: self.0,
            pos: if b.get(start) == Some(&b'{') {
                start + 1
            } else {
                b.len()
            },
        }
    }

    /// The items of an array, in order (empty for any other value).
    pub fn items(&self) -> Items<'a> {
        let b = self.0.as_bytes();
        let start = scan::skip_ws(b, 0);
        Items {
            text: self.0,
            pos: if b.get(start) == Some(&b'[') {
                start + 1
            } else {
                b.len()
            },
        }
    }

    /// The value of member `key` (compared by decoded text, case-sensitively). A key that
    /// appears twice is an error, since two readers could disagree about which one counts.
    pub fn get_unique(&self, key: &str) -> Result<Option<RawJson<'a>>, DuplicateMember> {
        self.get_each([key]).get(0)
    }

    /// The value of member `key` when it appears exactly once; `None` when it is absent or
    /// written twice. The engine's own reads use it where a repeated member counts as absent.
    pub(crate) fn unique(&self, key: &str) -> Option<RawJson<'a>> {
        self.get_unique(key).ok().flatten()
    }

    /// [`unique`](Self::unique) when the value is a string; `None` for any other value.
    pub(crate) fn unique_str(&self, key: &str) -> Option<JsonStr<'a>> {
        self.unique(key).and_then(|v| v.as_str())
    }

    /// The values of several members, in one pass over the object: use it instead of
    /// several [`get_unique`](Self::get_unique) calls, which each read the whole object.
    /// Up to 64 keys; a key repeated in `keys` is found at its first place only.
    #[inline]
    pub fn get_each<const N: usize>(&self, keys: [&str; N]) -> Found<'a, N> {
        let mut values = [None; N];
        let duplicated = self.get_each_into(&keys, &mut values);
        Found { values, duplicated }
    }

    /// [`get_each`](Self::get_each) for a number of keys known only at run time (a C host's
    /// list, say): the value of `keys[i]` goes to `values[i]` (`None` when absent; `values`
    /// should be as long as `keys`, and starts all `None`). Returns a mask with bit `i` set
    /// when `keys[i]` (among the first 64) appears twice in the object.
    #[inline]
    pub fn get_each_into(&self, keys: &[&str], values: &mut [Option<RawJson<'a>>]) -> u64 {
        let mut duplicated = 0;
        for (k, v) in self.members() {
            if let Some(i) = keys.iter().position(|key| k.eq_str(key))
                && let Some(slot) = values.get_mut(i)
            {
                if slot.is_some() && i < 64 {
                    duplicated |= 1 << i;
                }
                *slot = Some(v);
            }
        }
        duplicated
    }
}

impl<'a> RawJson<'a> {
    /// Validates `text` as one JSON object and reads the values of `keys` in the same walk,
    /// as [`new`](Self::new) then [`get_each_into`](Self::get_each_into) would, with the same
    /// rules, results and duplicate mask. Use it when the text is not yet validated and only a
    /// few top-level members are wanted (a C or Go host reading a tool call's `name` and
    /// `arguments`): the object is read once instead of twice. Returns `None` when `text` is
    /// not a valid JSON object; [`new`](Self::new) then says why.
    pub fn object_each_into(
        text: &'a str,
        keys: &[&str],
        values: &mut [Option<RawJson<'a>>],
    ) -> Option<u64> {
        let b = text.as_bytes();
        let depth_left = MAX_PAYLOAD_DEPTH - 1;
        let mut pos = scan::skip_ws(b, 0);
        if b.get(pos) != Some(&b'{') {
            return None;
        }
        pos = scan::skip_ws(b, pos + 1);
        let mut duplicated = 0;
        if b.get(pos) == Some(&b'}') {
            pos += 1;
        } else {
            loop {
                if b.get(pos) != Some(&b'"') {
                    return None;
                }
                let (key_end, escaped) = scan::string(b, pos + 1).ok()?;
                let colon = scan::skip_ws(b, key_end);
                if b.get(colon) != Some(&b':') {
                    return None;
                }
                let vstart = scan::skip_ws(b, colon + 1);
                let vend = index::value(b, vstart, depth_left).ok()?;
                let key = JsonStr::validated(text.get(pos + 1..key_end - 1)?, escaped);
                if let Some(i) = keys.iter().position(|k| key.eq_str(k))
                    && let Some(slot) = values.get_mut(i)
                {
                    if slot.is_some() && i < 64 {
                        duplicated |= 1 << i;
                    }
                    *slot = Some(RawJson(text.get(vstart..vend)?));
                }
                pos = scan::skip_ws(b, vend);
                match b.get(pos) {
                    Some(b',') => pos = scan::skip_ws(b, pos + 1),
                    Some(b'}') => {
                        pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if scan::skip_ws(b, pos) != b.len() {
            return None;
        }
        Some(duplicated)
    }
}

/// What [`RawJson::get_each`] found: the value of each key asked for, in the order asked.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a, const N: usize> {
    values: [Option<RawJson<'a>>; N],
    duplicated: u64,
}

impl<'a, const N: usize> Found<'a, N> {
    /// The value of key `i` (what [`RawJson::get_unique`] gives for it): `Err` when the key
    /// appears twice.
    pub fn get(&self, i: usize) -> Result<Option<RawJson<'a>>, DuplicateMember> {
        if i < 64 && self.duplicated >> i & 1 == 1 {
            return Err(DuplicateMember);
        }
        Ok(self.values.get(i).copied().flatten())
    }
}

/// A member name appeared twice in an object where the engine reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuplicateMember;

impl fmt::Display for DuplicateMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("duplicate member")
    }
}

impl std::error::Error for DuplicateMember {}

/// The items of a JSON array, from [`RawJson::items`].
#[derive(Clone, Debug)]
pub struct Items<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Items<'a> {
    type Item = RawJson<'a>;

    fn next(&mut self) -> Option<RawJson<'a>> {
        let b = self.text.as_bytes();
        let mut pos = scan::skip_ws(b, self.pos);
        if b.get(pos) == Some(&b',') {
            pos = scan::skip_ws(b, pos + 1);
        }
        if pos >= b.len() || b[pos] == b']' {
            self.pos = b.len();
            return None;
        }
        // The text was validated when this RawJson was made; no progress ends iteration.
        match scan::skip_valid(b, pos) {
            end if end > pos => {
                self.pos = end;
                self.text.get(pos..end).map(RawJson)
            }
            _ => {
                self.pos = b.len();
                None
            }
        }
    }
}

/// The members of a JSON object, from [`RawJson::members`].
#[derive(Clone, Debug)]
pub struct Members<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (JsonStr<'a>, RawJson<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.text.as_bytes();
        let mut pos = scan::skip_ws(b, self.pos);
        if b.get(pos) == Some(&b',') {
            pos = scan::skip_ws(b, pos + 1);
        }
        if b.get(pos) != Some(&b'"') {
            self.pos = b.len();
            return None;
        }
        // The text was validated when this RawJson was made; a failure here ends iteration.
        let step = (|| {
            let (key_end, escaped) = scan::string(b, pos + 1).ok()?;
            let colon = scan::skip_ws(b, key_end);
            let vstart = scan::skip_ws(b, colon + 1);
            let vend = scan::skip_valid(b, vstart);
            if vend <= vstart {
                return None;
            }
            let key = JsonStr::validated(self.text.get(pos + 1..key_end - 1)?, escaped);
            let value = RawJson(self.text.get(vstart..vend)?);
            Some((vend, key, value))
        })();
        match step {
            Some((vend, key, value)) => {
                self.pos = vend;
                Some((key, value))
            }
            None => {
                self.pos = b.len();
                None
            }
        }
    }
}

impl fmt::Debug for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

// ---- Ids --------------------------------------------------------------------------------

/// A request id, with its exact JSON type and value.
///
/// MCP ids are integers or strings. `7` and `"7"` are different ids and never compare equal;
/// integers cover the whole `i64` range; a string id keeps its wire bytes, so it is written
/// back exactly as it was received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Id<'a> {
    /// An integer id.
    Int(i64),
    /// A string id.
    Str(JsonStr<'a>),
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Int(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "\"{}\"", s.raw()),
        }
    }
}

/// An [`Id`] that owns its text, for keeping an id beyond the frame it came in.
///
/// String ids of up to 22 bytes are stored inline, so keeping one does not allocate. The wire
/// form is kept byte for byte (use [`as_id`](Self::as_id) to answer with it), and comparison
/// and hashing go by the decoded text, as for [`Id`].
#[derive(Clone)]
pub enum OwnedId {
    /// An integer id.
    Int(i64),
    /// A string id, in its wire (escaped) form. Bytes that are valid wire form are read as
    /// such: the six bytes `C:\new` are the text "C:", a newline and "ew". A host holding
    /// an id's decoded text must escape it first ([`write_json_string`]). Bytes that are no
    /// valid wire form (a raw quote or newline, say) are not refused: the encoders write
    /// them escaped, so the frame stays valid.
    Str(smallvec::SmallVec<[u8; 22]>),
}

impl OwnedId {
    /// The borrowed form, for encoding or comparing.
    pub fn as_id(&self) -> Id<'_> {
        match self {
            OwnedId::Int(n) => Id::Int(*n),
            OwnedId::Str(raw) => {
                // The bytes were copied from a validated `JsonStr`, so they are UTF-8.
                let raw = std::str::from_utf8(raw).unwrap_or("");
                Id::Str(JsonStr::validated(raw, raw.contains('\\')))
            }
        }
    }
}

impl From<Id<'_>> for OwnedId {
    fn from(id: Id<'_>) -> Self {
        match id {
            Id::Int(n) => OwnedId::Int(n),
            Id::Str(s) => OwnedId::Str(s.raw().as_bytes().into()),
        }
    }
}

impl PartialEq for OwnedId {
    fn eq(&self, other: &Self) -> bool {
        self.as_id() == other.as_id()
    }
}

impl Eq for OwnedId {}

impl std::hash::Hash for OwnedId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_id().hash(state);
    }
}

impl fmt::Debug for OwnedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.as_id(), f)
    }
}

impl fmt::Display for OwnedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.as_id(), f)
    }
}

// ---- Messages ---------------------------------------------------------------------------

/// A request: it has an id and expects a response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request<'a> {
    /// The id the response must carry.
    pub id: Id<'a>,
    /// The method name.
    pub method: JsonStr<'a>,
    /// The params object, if present. Always a JSON object.
    pub params: Option<RawJson<'a>>,
}

/// A notification: no id, no response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Notification<'a> {
    /// The method name.
    pub method: JsonStr<'a>,
    /// The params object, if present. Always a JSON object.
    pub params: Option<RawJson<'a>>,
}

/// A success response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Response<'a> {
    /// The id of the request this answers.
    pub id: Id<'a>,
    /// The result value.
    pub result: RawJson<'a>,
}

/// The `error` member of an error response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorObject<'a> {
    /// The error code (an integer on the wire).
    pub code: i64,
    /// The error message.
    pub message: JsonStr<'a>,
    /// The optional `data` value.
    pub data: Option<RawJson<'a>>,
}

/// An error response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorResponse<'a> {
    /// The id of the request this answers; `None` when the peer sent `null` or no id
    /// (allowed when the request's id could not be read).
    pub id: Option<Id<'a>>,
    /// The error.
    pub error: ErrorObject<'a>,
}

/// One JSON-RPC message, borrowed from its frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Message<'a> {
    /// A request.
    Request(Request<'a>),
    /// A notification.
    Notification(Notification<'a>),
    /// A success response.
    Response(Response<'a>),
    /// An error response.
    Error(ErrorResponse<'a>),
}

/// What one frame decoded to: a single message or a batch.
///
/// A batch keeps every member in order, each either a message or the reason that member is
/// invalid, so the connection can answer each as JSON-RPC prescribes, or refuse the batch
/// when its protocol version has none.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded<'a> {
    /// A single message object.
    Single(Message<'a>),
    /// A non-empty JSON array of members.
    Batch(Vec<Result<Message<'a>, DecodeError<'a>>>),
}

// ---- Errors -----------------------------------------------------------------------------

/// Which JSON-RPC error a rejected frame calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Not valid JSON: answer with -32700 and a null id.
    Parse,
    /// Valid JSON, but not a valid JSON-RPC message: answer with -32600.
    InvalidRequest,
}

/// Exactly what was wrong with a rejected frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    // -- Not JSON (parse errors) --
    /// Bytes that are not UTF-8, or UTF-8 that encodes a surrogate or an overlong form.
    InvalidUtf8,
    /// The frame ended in the middle of a value.
    UnexpectedEnd,
    /// A byte that JSON's grammar does not allow where it stands.
    UnexpectedByte,
    /// A raw control character (below U+0020) inside a string.
    ControlCharacter,
    /// A malformed escape sequence.
    InvalidEscape,
    /// A `\u` escape of an unpaired UTF-16 surrogate.
    LoneSurrogate,
    /// A malformed number.
    InvalidNumber,
    /// More than one value, or other bytes after the value.
    TrailingCharacters,
    /// Nesting deeper than the decoder's limit.
    TooDeep,
    // -- Not a JSON-RPC message (invalid requests) --
    /// The frame (or a batch member) is not a JSON object.
    NotAnObject,
    /// An empty batch `[]`.
    EmptyBatch,
    /// A batch with more members than the decoder's limit
    /// ([`DecoderConfig::max_batch`](super::jsonrpc::DecoderConfig::max_batch)).
    BatchTooLarge,
    /// A member the engine reads appears twice.
    DuplicateKey,
    /// A member whose name differs from a JSON-RPC member only in letter case.
    CaseVariantKey,
    /// No `jsonrpc` member.
    MissingVersion,
    /// `jsonrpc` is not exactly `"2.0"`.
    WrongVersion,
    /// An id that is neither an integer nor a string.
    InvalidId,
    /// A numeric id with a fraction or exponent (MCP ids are integers).
    FractionalId,
    /// An integer id outside the `i64` range.
    IdOutOfRange,
    /// A `null` id on anything but an error response.
    NullId,
    /// A response without an id.
    MissingId,
    /// `method` is not a string.
    MethodNotString,
    /// `params` is present but not an object.
    ParamsNotObject,
    /// Both `result` and `error`.
    ResultAndError,
    /// A mixture of request and response members (`method` with `result`, say).
    AmbiguousKind,
    /// None of `method`, `result` or `error`.
    NotAMessage,
    /// `error` is not an object.
    ErrorNotObject,
    /// `error.code` is missing or not an integer.
    ErrorCodeNotInteger,
    /// `error.message` is missing or not a string.
    ErrorMessageNotString,
}

/// Why a frame (or batch member) was rejected, and what to answer.
///
/// Use [`code`](Self::code) for the JSON-RPC error to send back, with [`id`](Self::id) when it
/// could be read; [`reason`](Self::reason) and [`offset`](Self::offset) say precisely what was
/// wrong and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError<'a> {
    kind: ErrorKind,
    reason: Reason,
    offset: usize,
    id: Option<Id<'a>>,
    response_shaped: bool,
    jsonrpc_notification: bool,
}

impl<'a> DecodeError<'a> {
    pub(crate) fn parse(f: scan::Fault) -> Self {
        DecodeError {
            kind: ErrorKind::Parse,
            reason: f.reason,
            offset: f.offset,
            id: None,
            response_shaped: false,
            jsonrpc_notification: false,
        }
    }

    pub(crate) fn invalid(reason: Reason, offset: usize, id: Option<Id<'a>>) -> Self {
        DecodeError {
            kind: ErrorKind::InvalidRequest,
            reason,
            offset,
            id,
            response_shaped: false,
            jsonrpc_notification: false,
        }
    }

    /// Marks the error as one of a frame shaped like a response.
    pub(crate) fn of_response_shape(mut self, shaped: bool) -> Self {
        self.response_shaped = shaped;
        self
    }

    /// Marks the error as one of a valid JSON-RPC 2.0 notification that MCP refuses.
    pub(crate) fn of_jsonrpc_notification(mut self, notification: bool) -> Self {
        self.jsonrpc_notification = notification;
        self
    }

    /// Whether the rejected object is a valid JSON-RPC 2.0 notification that only MCP's rules
    /// refuse (`params` an array, where MCP wants an object; or a member named as a JSON-RPC
    /// one but for its case, such as `"Id"`). Check it, as
    /// [`is_response_shaped`](Self::is_response_shaped), before answering a decode error
    /// yourself over a byte stream: JSON-RPC forbids replying to a notification ("The Server
    /// MUST NOT reply to a Notification"), and MCP says its receiver "MUST NOT send a
    /// response". (Over HTTP the POST still gets its error status.)
    pub fn is_jsonrpc_notification(&self) -> bool {
        self.jsonrpc_notification
    }

    /// Whether the rejected object had the shape of a response: a `result` or `error` member
    /// and no `method`. Check it before answering a decode error yourself: such a frame must
    /// not be answered, because its id is one of *your* request ids, and an error sent back
    /// with it would be taken by the peer as the answer to its own request of that id.
    pub fn is_response_shaped(&self) -> bool {
        self.response_shaped
    }

    /// Parse error or invalid request.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The JSON-RPC error code to answer with: -32700 or -32600.
    pub fn code(&self) -> i64 {
        match self.kind {
            ErrorKind::Parse => PARSE_ERROR,
            ErrorKind::InvalidRequest => INVALID_REQUEST,
        }
    }

    /// What exactly was wrong.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// The byte offset in the frame where the problem was noticed.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The message's id, when it could be read unambiguously (never for parse errors).
    pub fn id(&self) -> Option<Id<'a>> {
        self.id
    }

    /// A short English description of the reason, suitable for an error reply's message.
    pub fn message(&self) -> &'static str {
        match self.reason {
            Reason::InvalidUtf8 => "invalid UTF-8",
            Reason::UnexpectedEnd => "unexpected end of input",
            Reason::UnexpectedByte => "unexpected character",
            Reason::ControlCharacter => "control character in string",
            Reason::InvalidEscape => "invalid escape sequence",
            Reason::LoneSurrogate => "unpaired surrogate in escape",
            Reason::InvalidNumber => "invalid number",
            Reason::TrailingCharacters => "trailing characters after JSON value",
            Reason::TooDeep => "nesting too deep",
            Reason::NotAnObject => "message is not a JSON object",
            Reason::EmptyBatch => "empty batch",
            Reason::BatchTooLarge => "batch too large",
            Reason::DuplicateKey => "duplicate member",
            Reason::CaseVariantKey => "member name differs from a JSON-RPC member only in case",
            Reason::MissingVersion => "missing \"jsonrpc\" member",
            Reason::WrongVersion => "\"jsonrpc\" must be exactly \"2.0\"",
            Reason::InvalidId => "id must be an integer or a string",
            Reason::FractionalId => "id must be an integer, without fraction or exponent",
            Reason::IdOutOfRange => "integer id out of 64-bit range",
            Reason::NullId => "null id is only allowed on error responses",
            Reason::MissingId => "response without id",
            Reason::MethodNotString => "method must be a string",
            Reason::ParamsNotObject => "params must be an object",
            Reason::ResultAndError => "response has both result and error",
            Reason::AmbiguousKind => "message mixes request and response members",
            Reason::NotAMessage => "no method, result or error member",
            Reason::ErrorNotObject => "error must be an object",
            Reason::ErrorCodeNotInteger => "error code must be an integer",
            Reason::ErrorMessageNotString => "error message must be a string",
        }
    }
}

impl fmt::Display for DecodeError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ErrorKind::Parse => "parse error",
            ErrorKind::InvalidRequest => "invalid request",
        };
        write!(f, "{kind} at byte {}: {}", self.offset, self.message())
    }
}

impl std::error::Error for DecodeError<'_> {}

#[cfg(test)]
mod tests {
    use super::RawJson;

    /// The one-walk lookup agrees with validation then lookup, on objects and on near misses
    /// (bad keys and separators, trailing text, other types, the depth limit).
    #[test]
    fn object_each_into_agrees_with_new_then_get_each_into() {
        let deep = |n: usize| format!(r#"{{"a":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
        let mut cases: Vec<String> = [
            r#"{"name":"echo","arguments":{"text":"hi"}}"#,
            r#" { "a" : 1 , "b" : [2] } "#,
            r#"{"b":1,"a":[2],"b":3,"c\u0061":4}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{}"#,
            "{\n}",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{a:1}"#,
            r#"{"a":01}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":1}x"#,
            r#"{"a":1}}"#,
            r#"{"a":1"#,
            r#"{"a":"#,
            r#"{"#,
            r#"[1]"#,
            r#""a""#,
            "1",
            "",
            " ",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":\"tab\there\"}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for n in [116, 122, 123, 124, 127, 128, 200] {
            cases.push(deep(n));
        }
        let keys = ["a", "b", "ca", "name", "arguments"];
        for text in &cases {
            let mut fused = [None; 5];
            let got = RawJson::object_each_into(text, &keys, &mut fused);
            let want = RawJson::new(text)
                .ok()
                .filter(RawJson::is_object)
                .map(|raw| {
                    let mut values = [None; 5];
                    (raw.get_each_into(&keys, &mut values), values)
                });
            match (got, want) {
                (None, None) => {}
                (Some(mask), Some((want_mask, values))) => {
                    assert_eq!(mask, want_mask, "{text:?}");
                    let view =
                        |v: [Option<RawJson<'_>>; 5]| v.map(|v| v.map(|r| r.get().to_owned()));
                    assert_eq!(view(fused), view(values), "{text:?}");
                }
                (got, want) => panic!("{text:?}: {got:?} against {want:?}"),
            }
        }
        // The limit is MAX_PAYLOAD_DEPTH (124) levels: the object and 123 arrays pass, one
        // more array does not.
        assert!(RawJson::object_each_into(&deep(123), &keys, &mut [None; 5]).is_some());
        assert!(RawJson::object_each_into(&deep(124), &keys, &mut [None; 5]).is_none());
    }

    #[test]
    fn get_each_into_agrees_with_get_each_and_marks_duplicates() {
        let raw = RawJson::new(r#"{"b":1,"a":[2],"b":3,"c\u0061":4}"#).unwrap();
        let keys = ["a", "b", "ca", "missing"];
        let mut values = [None; 4];
        let duplicated = raw.get_each_into(&keys, &mut values);
        assert_eq!(duplicated, 0b10, "only b appears twice");
        let text: Vec<_> = values.iter().map(|v| v.map(|v| v.get())).collect();
        assert_eq!(text, [Some("[2]"), Some("3"), Some("4"), None]);
        let found = raw.get_each(keys);
        for (i, want) in values.iter().enumerate() {
            if i == 1 {
                assert!(found.get(i).is_err());
            } else {
                assert_eq!(
                    found.get(i).unwrap().map(|v| v.get()),
                    want.map(|v| v.get())
                );
            }
        }
        // Fewer places than keys: the keys without a place are not looked up.
        let mut short = [None; 1];
        assert_eq!(raw.get_each_into(&keys, &mut short), 0);
        assert_eq!(short[0].map(|v| v.get()), Some("[2]"));
    }
}
