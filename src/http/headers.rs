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

use crate::jsonrpc::RawJson;

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
/// either end, and not itself of the encoded form.
fn plain_safe(v: &str) -> bool {
    let looks_encoded =
        v.starts_with(PREFIX) && v.ends_with(SUFFIX) && v.len() >= PREFIX.len() + SUFFIX.len();
    let visible = v.bytes().all(|b| (0x20..0x7f).contains(&b));
    visible && !v.starts_with(' ') && !v.ends_with(' ') && !looks_encoded
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

/// Whether a decoded header value matches the body's value at the annotated path. `None` when
/// the body value is not a primitive a header can carry (an object or array): the tool's own
/// argument checks deal with that.
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
    /// `null` (an absent or null value has no header).
    pub fn value_in<'a>(&self, arguments: RawJson<'a>) -> Option<RawJson<'a>> {
        let mut at = arguments;
        for key in &self.path {
            at = at.get_unique(key).ok().flatten()?;
        }
        (!at.is_null()).then_some(at)
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
}

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
];

/// The `x-mcp-header` annotations of one tool's `inputSchema`, checked against rule 3. Use it
/// (or [`ToolHeaders::declare`]) on every tool a server lists; a client excludes a tool this
/// refuses from what `tools/list` gave it.
pub fn param_headers(input_schema: RawJson<'_>) -> Result<Vec<ParamHeader>, AnnotationError> {
    let mut found = Vec::new();
    walk(input_schema, &mut Vec::new(), true, &mut found)?;
    let names: Vec<&str> = found.iter().map(|a| a.name.as_str()).collect();
    if first_repeat(&names).is_some() {
        return Err(AnnotationError::DuplicateName);
    }
    Ok(found)
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
    found: &mut Vec<ParamHeader>,
) -> Result<(), AnnotationError> {
    if !schema.is_object() {
        // Lists of subschemas (allOf, prefixItems, …): their members are unreachable.
        for item in schema.items() {
            walk(item, path, false, found)?;
        }
        return Ok(());
    }
    for (key, value) in schema.members() {
        let key = key.to_str();
        if key == "x-mcp-header" {
            if !reachable || path.is_empty() {
                return Err(AnnotationError::NotStaticallyReachable);
            }
            let name = value
                .as_str()
                .map(|s| s.to_str().into_owned())
                .filter(|n| is_token(n))
                .ok_or(AnnotationError::InvalidName)?;
            let primitive = schema
                .get_unique("type")
                .ok()
                .flatten()
                .and_then(|t| t.as_str())
                .is_some_and(|t| t.eq_str("string") || t.eq_str("integer") || t.eq_str("boolean"));
            if !primitive {
                return Err(AnnotationError::NotPrimitive);
            }
            found.push(ParamHeader {
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
}

impl ToolHeaders {
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
        self.add(tools)
    }

    /// As [`declare`](Self::declare), but keeps what was declared before: for a client
    /// reading a paginated `tools/list`, one page at a time.
    pub fn add(&mut self, tools: RawJson<'_>) -> Vec<(String, AnnotationError)> {
        let list = if tools.is_object() {
            tools.get_unique("tools").ok().flatten()
        } else {
            Some(tools)
        };
        let mut refused = Vec::new();
        for tool in list.into_iter().flat_map(|l| l.items()) {
            let Some(name) = tool
                .get_unique("name")
                .ok()
                .flatten()
                .and_then(|n| n.as_str())
                .map(|n| n.to_str().into_owned())
            else {
                continue;
            };
            let Some(schema) = tool.get_unique("inputSchema").ok().flatten() else {
                continue;
            };
            match param_headers(schema) {
                Ok(headers) if headers.is_empty() => {
                    self.tools.remove(&name);
                }
                Ok(headers) => {
                    self.tools.insert(name, headers);
                }
                Err(e) => {
                    self.tools.remove(&name);
                    refused.push((name, e));
                }
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

    /// A `tools/list` from the server may carry a tool with any number of annotations: a
    /// repeat is found among thousands (by sorting; every pair of 80,000 took 5.4 s).
    #[test]
    fn a_repeated_annotation_is_found_among_thousands() {
        let schema = |names: &[String]| {
            let properties: Vec<String> = (names.iter().enumerate())
                .map(|(i, n)| format!(r#""p{i}":{{"type":"string","x-mcp-header":"{n}"}}"#))
                .collect();
            format!(
                r#"{{"type":"object","properties":{{{}}}}}"#,
                properties.join(",")
            )
        };
        let mut names: Vec<String> = (0..5_000).map(|i| format!("H{i}")).collect();
        let text = schema(&names);
        assert_eq!(
            param_headers(RawJson::new(&text).unwrap()).unwrap().len(),
            5_000
        );
        names.push("h4321".into());
        let text = schema(&names);
        assert_eq!(
            param_headers(RawJson::new(&text).unwrap()).unwrap_err(),
            AnnotationError::DuplicateName
        );
        assert_eq!(first_repeat(&["a", "B", "c", "b", "A"]), Some(3));
        let many: Vec<String> = (0..40).map(|i| format!("n{}", i % 30)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(first_repeat(&many), Some(30));
        assert_eq!(first_repeat(&many[..30]), None);
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
        ];
        for (text, error) in bad {
            assert_eq!(schema(text), Err(error), "{text}");
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
            headers.for_tool("sql")[0].value_in(args).map(|v| v.get()),
            Some(r#""eu""#)
        );
        let null = RawJson::new(r#"{"region":null}"#).unwrap();
        assert!(headers.for_tool("sql")[0].value_in(null).is_none());
    }
}
