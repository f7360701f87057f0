//! The 2026-07-28 header rules both roles share (SEP-2243): how a value travels in a header,
//! and which tool parameters a tool's `inputSchema` mirrors into `Mcp-Param-{Name}` headers.
//!
//! Rules (2026-07-28, Streamable HTTP, "Request Metadata"):
//!
//! 1. A value that is visible ASCII (spaces allowed inside, not at either end) travels as it
//!    is; any other value, and any value that itself looks like the encoded form, travels as
//!    `=?base64?{standard Base64 with padding}?=` ([`encode_value`]).
//! 2. A receiver trims optional whitespace around a field value, decodes the encoded form
//!    strictly (alphabet, padding, UTF-8) and rejects a value with characters outside visible
//!    ASCII, space and tab ([`decode_value`]). A value that lacks either end of the sentinel is
//!    a literal.
//! 3. `x-mcp-header` names are non-empty tokens, unique ignoring case within one schema, sit
//!    only on `integer`, `string` or `boolean` properties, and only where a chain of
//!    `properties` keys reaches them from the root. Anything else makes the whole tool
//!    invalid ([`param_headers`]).
//! 4. A header value matches a body value when the decoded text equals a string, names the
//!    same integer (compared as numbers: `42.0` equals `42`), or spells the boolean
//!    ([`value_matches`]).

use std::borrow::Cow;
use std::collections::HashMap;

use crate::jsonrpc::{DuplicateMember, RawJson};

/// Why a header value was refused by [`decode_value`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderValueError {
    /// A control character or a byte outside ASCII.
    InvalidCharacter,
    /// The `=?base64?…?=` form with a payload that is not strict Base64 (alphabet, padding).
    InvalidBase64,
    /// The decoded bytes are not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for HeaderValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HeaderValueError::InvalidCharacter => "invalid character in header value",
            HeaderValueError::InvalidBase64 => "invalid Base64 in header value",
            HeaderValueError::NotUtf8 => "Base64 header value is not UTF-8",
        })
    }
}

impl std::error::Error for HeaderValueError {}

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Whether `v` may travel in a header as it is: visible ASCII and inner spaces, no space at
/// either end, and not itself of the encoded form ("starts with `=?base64?` and ends with
/// `?=`", however short: `=?base64?=` does both).
fn plain_safe(v: &str) -> bool {
    let looks_encoded = v.starts_with(PREFIX) && v.ends_with(SUFFIX);
    let visible = v.bytes().all(|b| (0x20..0x7f).contains(&b));
    visible && !v.starts_with(' ') && !v.ends_with(' ') && !looks_encoded
}

/// Whether `v` arrives as an HTTP field value exactly as it is sent (RFC 9110 §5.5): no
/// control character other than tab, no DEL, and no space or tab at either end, which every
/// receiver strips (a client that sent `" 7"` would resume from `7`). Bytes above ASCII pass
/// as the grammar's `obs-text`. A value that fails is never put in a header the client sends
/// without an encoding (`Mcp-Method`, `Last-Event-ID`).
pub(crate) fn is_field_value(v: &str) -> bool {
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    !v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
        && !edge(v.as_bytes().first())
        && !edge(v.as_bytes().last())
}

/// A value as a header carries it: as is when header-safe, else `=?base64?…?=`. Use it for
/// `Mcp-Name` and `Mcp-Param-{Name}`. A plain value that looks like the encoded form is
/// encoded too, so the receiver never mistakes it for one.
pub fn encode_value(v: &str) -> String {
    if plain_safe(v) {
        return v.to_owned();
    }
    let mut out = String::with_capacity(PREFIX.len() + v.len().div_ceil(3) * 4 + SUFFIX.len());
    out.push_str(PREFIX);
    for chunk in v.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out.push_str(SUFFIX);
    out
}

/// Strict standard Base64: a multiple of four characters from the standard alphabet, with
/// `=` padding only at the end.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    if padding > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in &bytes[..bytes.len() - padding] {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// A header value as its sender meant it: optional whitespace around it trimmed, the encoded
/// form decoded. Use it on `Mcp-Name` and `Mcp-Param-{Name}` before comparing them with the
/// body.
pub fn decode_value(v: &str) -> Result<String, HeaderValueError> {
    decode_value_borrowed(v).map(Cow::into_owned)
}

/// [`decode_value`], borrowing `v` when it is plain text (the usual case).
pub(crate) fn decode_value_borrowed(v: &str) -> Result<Cow<'_, str>, HeaderValueError> {
    let v = v.trim_matches([' ', '\t']);
    if !v
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b))
    {
        return Err(HeaderValueError::InvalidCharacter);
    }
    match v
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
    {
        Some(payload) => {
            let bytes = base64_decode(payload).ok_or(HeaderValueError::InvalidBase64)?;
            String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| HeaderValueError::NotUtf8)
        }
        None => Ok(Cow::Borrowed(v)),
    }
}

/// The JavaScript safe-integer range that integer parameters mirrored into headers must keep
/// to.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The text an `Mcp-Param-{Name}` header carries for a body value, before
/// [`encode_value`]: a string's decoded text, `true` or `false`, and an integer in decimal
/// (`42` for `42.0` or `4.2e1`, `0` for `-0`: "Convert to decimal string representation").
/// Use it when building a request's parameter headers.
pub fn header_text(value: RawJson<'_>) -> String {
    if let Some(s) = value.as_str() {
        return s.to_str().into_owned();
    }
    let text = value.get().trim();
    if text.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) {
        let plain = !text.contains(['.', 'e', 'E']);
        if plain && text != "-0" {
            return text.to_owned();
        }
        if let Some(n) = value.as_f64()
            && n.fract() == 0.0
            && n.abs() <= MAX_SAFE_INTEGER
        {
            return format!("{}", n as i64);
        }
    }
    text.to_owned()
}

/// Whether a decoded header value matches the body's value at the annotated path. `None` when
/// the body value is not a primitive a header can carry (an object or array): a client sends
/// no header for it (the tool's own argument checks deal with the value), and a server refuses
/// a header that comes with one.
pub fn value_matches(header: &str, body: RawJson<'_>) -> Option<bool> {
    let text = body.get();
    if let Some(s) = body.as_str() {
        return Some(s.eq_str(header));
    }
    match text {
        "true" | "false" => return Some(header == text),
        _ => {}
    }
    if text.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) {
        let body_number = body.as_f64()?;
        let Ok(header_number) = header.trim().parse::<f64>() else {
            return Some(false);
        };
        return Some(
            header_number.is_finite()
                && body_number.abs() <= MAX_SAFE_INTEGER
                && header_number == body_number,
        );
    }
    None
}

/// One `x-mcp-header` annotation: the header `Mcp-Param-{name}` mirrors the argument at
/// `path` (a chain of property names from the arguments object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamHeader {
    /// The name part of the header (`Region` for `Mcp-Param-Region`).
    pub name: String,
    /// The property names leading from the arguments object to the value.
    pub path: Vec<String>,
}

impl ParamHeader {
    /// The full header name, `Mcp-Param-{name}`.
    pub fn header_name(&self) -> String {
        format!("Mcp-Param-{}", self.name)
    }

    /// The value at this annotation's path in a tool call's `arguments`, if present and not
    /// `null` (an absent or null value has no header). A member of the path written twice is
    /// [`DuplicateMember`]: which of the two the tool reads is up to its parser, so no header
    /// can be said to match it.
    pub fn value_in<'a>(
        &self,
        arguments: RawJson<'a>,
    ) -> Result<Option<RawJson<'a>>, DuplicateMember> {
        let mut at = arguments;
        for key in &self.path {
            match at.get_unique(key)? {
                Some(value) => at = value,
                None => return Ok(None),
            }
        }
        Ok((!at.is_null()).then_some(at))
    }
}

/// Why a tool's `x-mcp-header` annotations were refused by [`param_headers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotationError {
    /// The value is not a string, or empty, or not an HTTP token.
    InvalidName,
    /// Two annotations differ only in case.
    DuplicateName,
    /// The annotated property is not `integer`, `string` or `boolean`.
    NotPrimitive,
    /// The annotation is not reached from the root through `properties` alone.
    NotStaticallyReachable,
    /// More annotations than are kept: over [`MAX_ANNOTATIONS`] in the tool, or over
    /// [`MAX_ANNOTATION_BYTES`] of header names and property paths in the tool, or past what
    /// a [`ToolHeaders`] keeps in all ([`ToolHeaders::MAX_BYTES`]). The specification lets
    /// each side set such limits; a tool beyond them is refused like an invalid one.
    TooLarge,
}

/// The most `x-mcp-header` annotations kept for one tool; a tool with more is refused
/// ([`AnnotationError::TooLarge`]).
pub const MAX_ANNOTATIONS: usize = 64;

/// The most bytes of header names and property paths kept for one tool's annotations.
pub const MAX_ANNOTATION_BYTES: usize = 16 * 1024;

impl std::fmt::Display for AnnotationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AnnotationError::InvalidName => "x-mcp-header is not a non-empty HTTP token",
            AnnotationError::DuplicateName => "x-mcp-header names repeat (ignoring case)",
            AnnotationError::NotPrimitive => {
                "x-mcp-header is only allowed on integer, string or boolean properties"
            }
            AnnotationError::NotStaticallyReachable => {
                "x-mcp-header is only allowed where a chain of properties keys reaches it"
            }
            AnnotationError::TooLarge => {
                "more x-mcp-header annotations (or longer property paths) than are kept"
            }
        })
    }
}

impl std::error::Error for AnnotationError {}

/// Whether `name` is an HTTP token (`1*tchar`, RFC 9110 §5.6.2).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Keywords whose values are subschemas (or maps or lists of them): an annotation inside one
/// of them, other than `properties` itself, is not statically reachable.
const SUBSCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "dependentSchemas",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$defs",
    "definitions",
    "dependencies",
    "contentSchema",
];

/// The `x-mcp-header` annotations of one tool's `inputSchema`, checked against rule 3. Use it
/// (or [`ToolHeaders::declare`]) on every tool a server lists; a client excludes a tool this
/// refuses from what `tools/list` gave it.
pub fn param_headers(input_schema: RawJson<'_>) -> Result<Vec<ParamHeader>, AnnotationError> {
    let mut found = Found::default();
    walk(input_schema, &mut Vec::new(), true, &mut found)?;
    let names: Vec<&str> = found.list.iter().map(|a| a.name.as_str()).collect();
    if first_repeat(&names).is_some() {
        return Err(AnnotationError::DuplicateName);
    }
    Ok(found.list)
}

/// The annotations a walk has found, and what they weigh.
#[derive(Default)]
struct Found {
    list: Vec<ParamHeader>,
    bytes: usize,
}

/// What one annotation weighs against [`MAX_ANNOTATION_BYTES`] and [`ToolHeaders::MAX_BYTES`]:
/// its texts, and a word or so of bookkeeping for each.
fn weight(name: &str, path: &[String]) -> usize {
    const OVERHEAD: usize = 32;
    name.len() + OVERHEAD + path.iter().map(|p| p.len() + OVERHEAD).sum::<usize>()
}

/// The position of the first name in `names` equal (ASCII case aside) to one before it.
///
/// The peer decides how many names there are (a client's `Mcp-Param-*` headers, a server's
/// `x-mcp-header` annotations in `tools/list`), so this does not compare every pair past a
/// few: more than 16 names are sorted, which keeps a hostile list of 100,000 to milliseconds
/// where every pair took minutes.
pub(crate) fn first_repeat(names: &[&str]) -> Option<usize> {
    if names.len() <= 16 {
        return (1..names.len()).find(|&i| {
            names[..i]
                .iter()
                .any(|earlier| earlier.eq_ignore_ascii_case(names[i]))
        });
    }
    // Positions sorted by name regardless of case, then by position: in a run of one name,
    // every entry after the first repeats it, and the earliest of those is the answer.
    let folded = |i: usize| names[i].bytes().map(|c| c.to_ascii_lowercase());
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        (names[a].len().cmp(&names[b].len()))
            .then_with(|| folded(a).cmp(folded(b)))
            .then(a.cmp(&b))
    });
    order
        .windows(2)
        .filter(|w| names[w[0]].eq_ignore_ascii_case(names[w[1]]))
        .map(|w| w[1])
        .min()
}

/// Walks one schema. `path` is the chain of `properties` keys to it; `reachable` whether that
/// chain is all there is.
fn walk(
    schema: RawJson<'_>,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Found,
) -> Result<(), AnnotationError> {
    if !schema.is_object() {
        // Lists of subschemas (allOf, prefixItems, …): their members are unreachable.
        for item in schema.items() {
            walk(item, path, false, found)?;
        }
        return Ok(());
    }
    let mut annotated = false;
    for (key, value) in schema.members() {
        let key = key.to_str();
        if key == "x-mcp-header" {
            if !reachable || path.is_empty() {
                return Err(AnnotationError::NotStaticallyReachable);
            }
            // Two on one property: two names for one value (and the `type` lookup below
            // would be repeated for each, over the whole object).
            if std::mem::replace(&mut annotated, true) {
                return Err(AnnotationError::DuplicateName);
            }
            let name = value
                .as_str()
                .map(|s| s.to_str().into_owned())
                .filter(|n| is_token(n))
                .ok_or(AnnotationError::InvalidName)?;
            let primitive = schema
                .unique_str("type")
                .is_some_and(|t| t.eq_str("string") || t.eq_str("integer") || t.eq_str("boolean"));
            if !primitive {
                return Err(AnnotationError::NotPrimitive);
            }
            // Checked before the path is copied: each annotation keeps its own.
            found.bytes += weight(&name, path);
            if found.list.len() >= MAX_ANNOTATIONS || found.bytes > MAX_ANNOTATION_BYTES {
                return Err(AnnotationError::TooLarge);
            }
            found.list.push(ParamHeader {
                name,
                path: path.clone(),
            });
        } else if key == "properties" && value.is_object() {
            for (property, subschema) in value.members() {
                path.push(property.to_str().into_owned());
                let result = walk(subschema, path, reachable, found);
                path.pop();
                result?;
            }
        } else if SUBSCHEMA_KEYWORDS.contains(&key.as_ref()) {
            if key == "patternProperties"
                || key == "dependentSchemas"
                || key == "dependencies"
                || key == "$defs"
                || key == "definitions"
            {
                for (_, subschema) in value.members() {
                    walk(subschema, path, false, found)?;
                }
            } else {
                walk(value, path, false, found)?;
            }
        }
    }
    Ok(())
}

/// The `x-mcp-header` annotations of a server's tools, by tool name. A server declares its
/// tools once (and again when they change); the HTTP layer then checks every 2026-07-28
/// `tools/call` against them.
#[derive(Clone, Debug, Default)]
pub struct ToolHeaders {
    tools: HashMap<String, Vec<ParamHeader>>,
    /// What the kept annotations weigh ([`weight`]), their tools' names included.
    bytes: usize,
}

impl ToolHeaders {
    /// The most bytes of tool names, header names and property paths kept in all: a client
    /// reading page after page of a server's `tools/list` keeps at most this much, and a tool
    /// past it is refused ([`AnnotationError::TooLarge`]).
    pub const MAX_BYTES: usize = 4 * 1024 * 1024;

    /// No annotations.
    pub fn new() -> Self {
        ToolHeaders::default()
    }

    /// Reads a `tools/list` result's `tools` array (or the whole result object) and keeps
    /// every tool's annotations, replacing what was declared before. Returns the tools whose
    /// annotations break rule 3, with the reason: such a tool is invalid, and clients will not
    /// call it; fix its schema.
    pub fn declare(&mut self, tools: RawJson<'_>) -> Vec<(String, AnnotationError)> {
        self.tools.clear();
        self.bytes = 0;
        self.add(tools)
    }

    /// Forgets one tool's annotations.
    fn remove(&mut self, name: &str) {
        if let Some(old) = self.tools.remove(name) {
            self.bytes -= Self::tool_weight(name, &old);
        }
    }

    fn tool_weight(name: &str, headers: &[ParamHeader]) -> usize {
        name.len()
            + headers
                .iter()
                .map(|h| weight(&h.name, &h.path))
                .sum::<usize>()
    }

    /// As [`declare`](Self::declare), but keeps what was declared before: for a client
    /// reading a paginated `tools/list`, one page at a time.
    pub fn add(&mut self, tools: RawJson<'_>) -> Vec<(String, AnnotationError)> {
        let list = if tools.is_object() {
            tools.unique("tools")
        } else {
            Some(tools)
        };
        let mut refused = Vec::new();
        for tool in list.into_iter().flat_map(|l| l.items()) {
            let Some(name) = tool.unique_str("name").map(|n| n.to_str().into_owned()) else {
                continue;
            };
            let Some(schema) = tool.unique("inputSchema") else {
                continue;
            };
            // A new definition replaces the old one, whatever it is.
            self.remove(&name);
            match param_headers(schema) {
                Ok(headers) if headers.is_empty() => {}
                Ok(headers) => {
                    let weight = Self::tool_weight(&name, &headers);
                    if self.bytes + weight > Self::MAX_BYTES {
                        refused.push((name, AnnotationError::TooLarge));
                    } else {
                        self.bytes += weight;
                        self.tools.insert(name, headers);
                    }
                }
                Err(e) => refused.push((name, e)),
            }
        }
        refused
    }

    /// The annotations of one tool (empty for a tool without any, or unknown).
    pub fn for_tool(&self, name: &str) -> &[ParamHeader] {
        self.tools.get(name).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_the_sentinel_form_is_never_sent_plain() {
        for v in [
            "us-west1",
            "Hello, 世界",
            " padded ",
            "line1\nline2",
            "=?base64?literal?=",
            "",
            "tab\there",
        ] {
            let encoded = encode_value(v);
            assert!(
                encoded.bytes().all(|b| (0x20..0x7f).contains(&b)),
                "{encoded}"
            );
            assert_eq!(
                decode_value(&encoded).as_deref(),
                Ok(v),
                "{v:?} as {encoded}"
            );
        }
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(
            encode_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        // Both markers, sharing a `?`: it matches the pattern, so it is encoded too.
        assert_eq!(encode_value("=?base64?="), "=?base64?PT9iYXNlNjQ/PQ==?=");
        assert_eq!(
            decode_value("=?base64?PT9iYXNlNjQ/PQ==?=").as_deref(),
            Ok("=?base64?=")
        );
    }

    #[test]
    fn field_values_are_what_arrives_as_sent() {
        for good in ["7", "a b", "tab\there", "caf\u{e9}", "x/y"] {
            assert!(is_field_value(good), "{good:?}");
        }
        for bad in [
            " 7", "7 ", "\t7", "7\t", "a\nb", "a\rb", "a\u{0}", "a\u{7f}",
        ] {
            assert!(!is_field_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn decoding_is_strict_and_trims_optional_whitespace() {
        assert_eq!(decode_value("  tool  ").as_deref(), Ok("tool"));
        assert_eq!(decode_value("=?base64?SGVsbG8=?=").as_deref(), Ok("Hello"));
        assert_eq!(
            decode_value("=?base64?SGVsbG8?="),
            Err(HeaderValueError::InvalidBase64)
        );
        assert_eq!(
            decode_value("=?base64?SGVs!!!bG8=?="),
            Err(HeaderValueError::InvalidBase64)
        );
        assert_eq!(
            decode_value("=?base64?SGVs_bG8=?="),
            Err(HeaderValueError::InvalidBase64)
        );
        assert_eq!(
            decode_value("=?base64?/w==?="),
            Err(HeaderValueError::NotUtf8)
        );
        // Either end of the sentinel missing: a literal.
        assert_eq!(decode_value("SGVsbG8=").as_deref(), Ok("SGVsbG8="));
        assert_eq!(
            decode_value("=?base64?SGVsbG8=").as_deref(),
            Ok("=?base64?SGVsbG8=")
        );
        assert_eq!(
            decode_value("a\u{1}b"),
            Err(HeaderValueError::InvalidCharacter)
        );
        assert_eq!(
            decode_value("caf\u{e9}"),
            Err(HeaderValueError::InvalidCharacter)
        );
    }

    #[test]
    fn values_compare_by_type() {
        let j = |t| RawJson::new(t).unwrap();
        assert_eq!(value_matches("abc", j(r#""abc""#)), Some(true));
        assert_eq!(value_matches("abd", j(r#""abc""#)), Some(false));
        assert_eq!(value_matches("42.0", j("42")), Some(true));
        assert_eq!(value_matches("42", j("43")), Some(false));
        assert_eq!(value_matches("true", j("true")), Some(true));
        assert_eq!(value_matches("True", j("true")), Some(false));
        assert_eq!(value_matches("x", j("{}")), None);
        assert_eq!(value_matches("", j("7")), Some(false));
    }

    fn schema(text: &str) -> Result<Vec<ParamHeader>, AnnotationError> {
        param_headers(RawJson::new(text).unwrap())
    }

    /// A schema with `n` annotated properties, the i-th named `prefix{i}` with header `names[i]`.
    fn annotated(names: &[String], prefix: &str) -> String {
        let properties: Vec<String> = (names.iter().enumerate())
            .map(|(i, n)| format!(r#""{prefix}{i}":{{"type":"string","x-mcp-header":"{n}"}}"#))
            .collect();
        format!(
            r#"{{"type":"object","properties":{{{}}}}}"#,
            properties.join(",")
        )
    }

    /// A `tools/list` comes from the server, which may send a tool with any number of
    /// annotations: at most 64 are kept (a tool with more is refused), so each copy of a
    /// property path is one of few (80,000 annotations took 5.4 s to check pairwise, and
    /// their paths could hold gigabytes).
    #[test]
    fn a_tool_with_too_many_annotations_is_refused() {
        let headers = |n: usize| -> Vec<String> { (0..n).map(|i| format!("H{i}")).collect() };
        let text = annotated(&headers(MAX_ANNOTATIONS), "p");
        let kept = param_headers(RawJson::new(&text).unwrap()).unwrap();
        assert_eq!(kept.len(), MAX_ANNOTATIONS);
        let text = annotated(&headers(MAX_ANNOTATIONS + 1), "p");
        assert_eq!(
            param_headers(RawJson::new(&text).unwrap()).unwrap_err(),
            AnnotationError::TooLarge
        );
        // A few annotations under a very long property name: the paths' bytes count too.
        let text = annotated(&headers(3), &"p".repeat(MAX_ANNOTATION_BYTES / 2));
        assert_eq!(
            param_headers(RawJson::new(&text).unwrap()).unwrap_err(),
            AnnotationError::TooLarge
        );
        // Within the limit, a repeat is still found, ignoring case.
        let mut names = headers(40);
        names.push("h17".into());
        let text = annotated(&names, "p");
        assert_eq!(
            param_headers(RawJson::new(&text).unwrap()).unwrap_err(),
            AnnotationError::DuplicateName
        );
    }

    /// Two `x-mcp-header` members on one property are refused at the second: each used to
    /// look up the property's `type` across the whole object again (16,000 of them: 2.7 s).
    #[test]
    fn a_property_annotated_twice_is_refused_at_once() {
        let twice = format!(
            r#"{{"type":"object","properties":{{"p":{{"type":"string"{}}}}}}}"#,
            r#","x-mcp-header":"H""#.repeat(16_000)
        );
        assert_eq!(
            param_headers(RawJson::new(&twice).unwrap()).unwrap_err(),
            AnnotationError::DuplicateName
        );
    }

    /// A client reading page after page keeps at most `ToolHeaders::MAX_BYTES`; a definition
    /// read again replaces the old one without counting twice.
    #[test]
    fn tool_headers_keep_a_bounded_amount() {
        let long: Vec<String> = (0..60).map(|i| format!("H{i}")).collect();
        let schema = annotated(&long, &"q".repeat(200));
        let page = |first: usize, n: usize| {
            let tools: Vec<String> = (first..first + n)
                .map(|t| format!(r#"{{"name":"t{t}","inputSchema":{schema}}}"#))
                .collect();
            format!(r#"{{"tools":[{}]}}"#, tools.join(","))
        };
        let mut kept = ToolHeaders::new();
        let one = page(0, 1);
        assert!(kept.add(RawJson::new(&one).unwrap()).is_empty());
        let per_tool = kept.bytes;
        assert!(
            per_tool > 10_000 && per_tool <= MAX_ANNOTATION_BYTES + 8,
            "{per_tool}"
        );
        // The same page again: replaced, not added.
        assert!(kept.add(RawJson::new(&one).unwrap()).is_empty());
        assert_eq!(kept.bytes, per_tool);
        // Tools t0 … t{offered - 1}, 50 a page: the first `fit` are kept, the rest refused.
        let (fit, offered) = (
            ToolHeaders::MAX_BYTES / per_tool,
            ToolHeaders::MAX_BYTES / per_tool + 70,
        );
        let mut refused = Vec::new();
        for first in (0..offered).step_by(50) {
            let n = 50.min(offered - first);
            refused.extend(kept.add(RawJson::new(&page(first, n)).unwrap()));
        }
        assert_eq!(kept.tools.len(), fit);
        assert!(kept.bytes <= ToolHeaders::MAX_BYTES);
        assert_eq!(refused.len(), offered - fit);
        assert!(refused.iter().all(|(_, e)| *e == AnnotationError::TooLarge));
        assert_eq!(kept.for_tool("t0").len(), 60);
        assert!(kept.for_tool(&format!("t{}", fit + 10)).is_empty());
        // Declaring starts afresh.
        assert!(kept.declare(RawJson::new(&one).unwrap()).is_empty());
        assert_eq!(kept.bytes, per_tool);
    }

    #[test]
    fn the_first_repeat_is_found_among_thousands() {
        assert_eq!(first_repeat(&["a", "B", "c", "b", "A"]), Some(3));
        let many: Vec<String> = (0..5_000).map(|i| format!("n{}", i % 4_321)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(first_repeat(&many), Some(4_321));
        assert_eq!(first_repeat(&many[..4_321]), None);
    }

    #[test]
    fn annotations_follow_the_schema_rules() {
        let ok = schema(
            r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},
            "opts":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}},
            "plain":{"type":"string","default":{"x-mcp-header":"data, not an annotation"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            ok,
            vec![
                ParamHeader {
                    name: "Region".into(),
                    path: vec!["region".into()]
                },
                ParamHeader {
                    name: "N".into(),
                    path: vec!["opts".into(), "n".into()]
                },
            ]
        );
        let bad = [
            (
                r#"{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}"#,
                AnnotationError::NotPrimitive,
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":""}}}"#,
                AnnotationError::InvalidName,
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}"#,
                AnnotationError::InvalidName,
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}"#,
                AnnotationError::DuplicateName,
            ),
            (
                r#"{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}"#,
                AnnotationError::NotStaticallyReachable,
            ),
            (
                r#"{"oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}"#,
                AnnotationError::NotStaticallyReachable,
            ),
            (
                r#"{"$defs":{"d":{"type":"string","x-mcp-header":"A"}}}"#,
                AnnotationError::NotStaticallyReachable,
            ),
            (
                r#"{"type":"string","x-mcp-header":"Root"}"#,
                AnnotationError::NotStaticallyReachable,
            ),
            // Draft-07's `dependencies` and 2020-12's `contentSchema` hold schemas too.
            (
                r#"{"properties":{"n":{"type":"string"}},"dependencies":{"n":{"properties":{"z":{"type":"string","x-mcp-header":"Z"}}}}}"#,
                AnnotationError::NotStaticallyReachable,
            ),
            (
                r#"{"properties":{"n":{"type":"string","contentSchema":{"type":"string","x-mcp-header":"Z"}}}}"#,
                AnnotationError::NotStaticallyReachable,
            ),
        ];
        for (text, error) in bad {
            assert_eq!(schema(text), Err(error), "{text}");
        }
    }

    /// "integer: Convert to decimal string representation (e.g., 42, -7)", whatever form the
    /// JSON number takes.
    #[test]
    fn header_text_writes_integers_in_decimal() {
        for (json, text) in [
            ("42", "42"),
            ("-7", "-7"),
            ("42.0", "42"),
            ("1e2", "100"),
            ("4.2E1", "42"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("12345678901234567890", "12345678901234567890"),
            ("true", "true"),
            (r#""a\u0062c""#, "abc"),
        ] {
            assert_eq!(header_text(RawJson::new(json).unwrap()), text, "{json}");
        }
    }

    #[test]
    fn declared_tools_keep_their_annotations_and_refuse_invalid_ones() {
        let mut headers = ToolHeaders::new();
        let refused = headers.declare(
            RawJson::new(
                r#"{"tools":[{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},
                {"name":"bad","inputSchema":{"properties":{"v":{"type":"number","x-mcp-header":"V"}}}},
                {"name":"none","inputSchema":{"type":"object"}}]}"#,
            )
            .unwrap(),
        );
        assert_eq!(
            refused,
            vec![("bad".to_owned(), AnnotationError::NotPrimitive)]
        );
        assert_eq!(headers.for_tool("sql")[0].header_name(), "Mcp-Param-Region");
        assert!(headers.for_tool("none").is_empty());
        let args = RawJson::new(r#"{"region":"eu","other":1}"#).unwrap();
        assert_eq!(
            headers.for_tool("sql")[0]
                .value_in(args)
                .unwrap()
                .map(|v| v.get()),
            Some(r#""eu""#)
        );
        let null = RawJson::new(r#"{"region":null}"#).unwrap();
        assert!(headers.for_tool("sql")[0].value_in(null).unwrap().is_none());
    }
}
