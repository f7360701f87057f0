//! Small edits of JSON objects the engine must make to caller payloads: adding `_meta` keys,
//! `resultType`, retry fields. The object is rebuilt member by member from validated text (no
//! tree), so every value passes through byte for byte.

use std::io::Write as _;

use crate::jsonrpc::{JsonStr, RawJson};

/// Appends the decimal text of `n` (no allocation: `Vec<u8>` is an `io::Write`).
pub(crate) fn write_int(out: &mut Vec<u8>, n: i64) {
    // Writing to a `Vec<u8>` cannot fail.
    let _ = write!(out, "{n}");
}

/// Appends a finite number as JSON: integral values without a fraction, others as Rust prints
/// them (the shortest text that reads back exactly). Magnitudes from 1e21 up and below 1e-6
/// take an exponent, as JavaScript writes them: plain digits would run to 309 of them for
/// `f64::MAX`, more than most JSON readers accept in one number.
pub(crate) fn write_number(out: &mut Vec<u8>, n: f64) {
    let magnitude = n.abs();
    if n.fract() == 0.0 && magnitude < 9.0e15 {
        write_int(out, n as i64);
    } else if !(1e-6..1e21).contains(&magnitude) {
        let _ = write!(out, "{n:e}");
    } else {
        let _ = write!(out, "{n}");
    }
}

/// The decimal text of an integer, on the stack, for members added to an object.
pub(crate) struct IntText {
    /// Room for any `i128` or `u128`.
    buf: [u8; 40],
    len: usize,
}

impl IntText {
    /// `n` must be an integer type (its `Display` is at most 40 bytes).
    pub(crate) fn new(n: impl std::fmt::Display) -> IntText {
        let mut buf = [0; 40];
        let mut rest = &mut buf[..];
        let _ = write!(rest, "{n}");
        let len = 40 - rest.len();
        IntText { buf, len }
    }

    /// The digits (and sign).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Why an edit could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EditError {
    /// The value is not a JSON object (or `_meta` is not one).
    NotAnObject,
    /// A key the engine must set is already present.
    Exists,
}

fn write_key(out: &mut Vec<u8>, key: JsonStr<'_>) {
    out.push(b'"');
    out.extend_from_slice(key.raw().as_bytes());
    out.push(b'"');
}

/// Writes the members of `obj` except those named in `skip`, each preceded by a comma when
/// `*first` is false.
fn copy_members(
    out: &mut Vec<u8>,
    obj: RawJson<'_>,
    skip: impl Fn(JsonStr<'_>) -> bool,
    first: &mut bool,
) {
    for (k, v) in obj.members() {
        if skip(k) {
            continue;
        }
        if !*first {
            out.push(b',');
        }
        *first = false;
        write_key(out, k);
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
}

/// Writes the members `add`. Their keys are the engine's own constants, which need no
/// escaping: they are written as they are.
fn write_added(out: &mut Vec<u8>, add: &[(&str, &[u8])], first: &mut bool) {
    for (k, v) in add {
        if !*first {
            out.push(b',');
        }
        *first = false;
        debug_assert!(
            k.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'),
            "an added key needs escaping: {k}"
        );
        out.push(b'"');
        out.extend_from_slice(k.as_bytes());
        out.push(b'"');
        out.push(b':');
        out.extend_from_slice(v);
    }
}

/// Writes `obj` (or `{}` when `None`) with the members `add` set. With `replace`, existing
/// members of those names are dropped first; otherwise their presence is an error.
pub(crate) fn set_members(
    out: &mut Vec<u8>,
    obj: Option<RawJson<'_>>,
    add: &[(&str, &[u8])],
    replace: bool,
) -> Result<(), EditError> {
    if let Some(obj) = obj {
        if !obj.is_object() {
            return Err(EditError::NotAnObject);
        }
        if !replace
            && obj
                .members()
                .any(|(k, _)| add.iter().any(|(a, _)| k.eq_str(a)))
        {
            return Err(EditError::Exists);
        }
    }
    out.push(b'{');
    let mut first = true;
    write_added(out, add, &mut first);
    if let Some(obj) = obj {
        let added = |k: JsonStr<'_>| add.iter().any(|(a, _)| k.eq_str(a));
        copy_members(out, obj, added, &mut first);
    }
    out.push(b'}');
    Ok(())
}

/// Writes `obj` (or `{}`) with the keys `add` set inside its `_meta` object (created when
/// absent). A key already present in `_meta` is an error.
pub(crate) fn set_meta(
    out: &mut Vec<u8>,
    obj: Option<RawJson<'_>>,
    add: &[(&str, &[u8])],
) -> Result<(), EditError> {
    edit_meta(out, obj, add, false)
}

/// [`set_meta`] where the keys `add` replace members of those names in `_meta`, and a `_meta`
/// that is not an object is replaced by one.
pub(crate) fn replace_meta(
    out: &mut Vec<u8>,
    obj: RawJson<'_>,
    add: &[(&str, &[u8])],
) -> Result<(), EditError> {
    edit_meta(out, Some(obj), add, true)
}

fn edit_meta(
    out: &mut Vec<u8>,
    obj: Option<RawJson<'_>>,
    add: &[(&str, &[u8])],
    replace: bool,
) -> Result<(), EditError> {
    let meta = match obj {
        Some(o) if !o.is_object() => return Err(EditError::NotAnObject),
        Some(o) => o.get_unique("_meta").map_err(|_| EditError::Exists)?,
        None => None,
    };
    let added = |k: JsonStr<'_>| add.iter().any(|(a, _)| k.eq_str(a));
    let meta = match meta {
        Some(m) if !m.is_object() && replace => None,
        Some(m) if !m.is_object() => return Err(EditError::NotAnObject),
        Some(m) if !replace && m.members().any(|(k, _)| added(k)) => {
            return Err(EditError::Exists);
        }
        m => m,
    };
    out.push(b'{');
    out.extend_from_slice(b"\"_meta\":{");
    let mut first = true;
    write_added(out, add, &mut first);
    if let Some(meta) = meta {
        copy_members(out, meta, added, &mut first);
    }
    out.push(b'}');
    let mut first = false;
    if let Some(obj) = obj {
        copy_members(out, obj, |k| k.eq_str("_meta"), &mut first);
    }
    out.push(b'}');
    Ok(())
}

/// Writes `obj` with `_meta` first (the members `meta_add`, then those of `obj`'s own
/// `_meta`, given as `meta`: `None` when `obj` has none), then the members `add`, then
/// `obj`'s other members: what [`set_members`] followed by [`set_meta`] write, in one pass
/// over `obj`. The caller has checked that none of the added keys is present. Without a
/// `_meta` to leave out, `obj`'s members are copied as one run of text, spacing included.
pub(crate) fn set_members_and_meta(
    out: &mut Vec<u8>,
    obj: RawJson<'_>,
    add: &[(&str, &[u8])],
    meta_add: &[(&str, &[u8])],
    meta: Option<RawJson<'_>>,
) {
    let added: usize = add
        .iter()
        .chain(meta_add)
        .map(|(k, v)| k.len() + v.len() + 4)
        .sum();
    out.reserve(obj.get().len() + added + 12);
    out.extend_from_slice(b"{\"_meta\":{");
    let mut first = true;
    write_added(out, meta_add, &mut first);
    if let Some(meta) = meta {
        copy_members(out, meta, |_| false, &mut first);
    }
    out.push(b'}');
    let mut first = false;
    write_added(out, add, &mut first);
    match meta {
        Some(_) => copy_members(out, obj, |k| k.eq_str("_meta"), &mut first),
        None => {
            let members = object_body(obj);
            if !members.is_empty() {
                out.push(b',');
                out.extend_from_slice(members.as_bytes());
            }
        }
    }
    out.push(b'}');
}

/// The text between an object's braces, without the whitespace at either end: its members
/// as they were written.
fn object_body(obj: RawJson<'_>) -> &str {
    let ws = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    let text = obj.get().trim_matches(ws);
    debug_assert!(text.starts_with('{') && text.ends_with('}'));
    text.get(1..text.len().saturating_sub(1))
        .unwrap_or("")
        .trim_matches(ws)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(f: impl FnOnce(&mut Vec<u8>) -> Result<(), EditError>) -> Result<String, EditError> {
        let mut out = Vec::new();
        f(&mut out)?;
        let s = String::from_utf8(out).unwrap();
        RawJson::new(&s).expect("edits produce valid JSON");
        Ok(s)
    }

    #[test]
    fn members_are_added_first_and_the_rest_kept_verbatim() {
        let obj = RawJson::new(r#"{ "a" : [1, 2] , "b\u0063":"x" }"#).unwrap();
        let s = edit(|o| set_members(o, Some(obj), &[("resultType", b"\"complete\"")], false));
        assert_eq!(
            s.unwrap(),
            r#"{"resultType":"complete","a":[1, 2],"b\u0063":"x"}"#
        );
        assert_eq!(
            edit(|o| set_members(o, Some(obj), &[("a", b"1")], false)),
            Err(EditError::Exists)
        );
        assert_eq!(
            edit(|o| set_members(o, Some(obj), &[("a", b"1")], true)).unwrap(),
            r#"{"a":1,"b\u0063":"x"}"#
        );
        assert_eq!(
            edit(|o| set_members(o, None, &[("k", b"null")], false)).unwrap(),
            r#"{"k":null}"#
        );
        let arr = RawJson::new("[1]").unwrap();
        assert_eq!(
            edit(|o| set_members(o, Some(arr), &[], false)),
            Err(EditError::NotAnObject)
        );
    }

    #[test]
    fn numbers_are_written_without_a_string() {
        assert_eq!(IntText::new(i64::MIN).as_bytes(), b"-9223372036854775808");
        assert_eq!(
            IntText::new(u128::MAX).as_bytes(),
            u128::MAX.to_string().as_bytes()
        );
        assert_eq!(IntText::new(0u8).as_bytes(), b"0");
        let mut out = Vec::new();
        for n in [2.0, -3.0, 0.5, 1e20, 9.0e15] {
            write_number(&mut out, n);
            out.push(b' ');
        }
        write_int(&mut out, 42);
        assert_eq!(out, b"2 -3 0.5 100000000000000000000 9000000000000000 42");
        // The extremes stay short, and read back exactly.
        for (n, text) in [
            (f64::MAX, "1.7976931348623157e308"),
            (-1e300, "-1e300"),
            (1e21, "1e21"),
            (5e-324, "5e-324"),
            (1.5e-7, "1.5e-7"),
            (0.000_001, "0.000001"),
        ] {
            let mut out = Vec::new();
            write_number(&mut out, n);
            assert_eq!(std::str::from_utf8(&out).unwrap(), text);
            assert!(RawJson::new(text).is_ok(), "{text}");
            assert_eq!(text.parse::<f64>().unwrap(), n);
        }
    }

    #[test]
    fn meta_keys_merge_into_an_existing_meta() {
        let obj = RawJson::new(r#"{"name":"x","_meta":{"trace":"t"}}"#).unwrap();
        let s = edit(|o| set_meta(o, Some(obj), &[("progressToken", b"7")])).unwrap();
        assert_eq!(s, r#"{"_meta":{"progressToken":7,"trace":"t"},"name":"x"}"#);
        assert_eq!(
            edit(|o| set_meta(o, None, &[("k", b"1")])).unwrap(),
            r#"{"_meta":{"k":1}}"#
        );
        let taken = RawJson::new(r#"{"_meta":{"progressToken":1}}"#).unwrap();
        assert_eq!(
            edit(|o| set_meta(o, Some(taken), &[("progressToken", b"7")])),
            Err(EditError::Exists)
        );
        let bad = RawJson::new(r#"{"_meta":5}"#).unwrap();
        assert_eq!(
            edit(|o| set_meta(o, Some(bad), &[("k", b"1")])),
            Err(EditError::NotAnObject)
        );
        let dup = RawJson::new(r#"{"_meta":{},"_meta":{}}"#).unwrap();
        assert!(edit(|o| set_meta(o, Some(dup), &[("k", b"1")])).is_err());
    }

    /// `text` without the whitespace outside strings (the test texts have none inside).
    fn spaceless(text: &str) -> String {
        text.chars().filter(|c| !c.is_ascii_whitespace()).collect()
    }

    #[test]
    fn the_one_pass_edit_writes_what_the_two_edits_wrote() {
        let add: &[(&str, &[u8])] = &[("resultType", b"\"complete\""), ("ttlMs", b"5")];
        let meta_add: &[(&str, &[u8])] = &[("io.x/serverInfo", br#"{"name":"s"}"#)];
        for text in [
            "{}",
            r#"{"content":[]}"#,
            r#"{ "_meta" : { "a" : 1 } , "b\u0063" : [1, {"_meta":2}] }"#,
            r#"{"x":"_meta","_meta":{}}"#,
            r#"{"isError":false,"_meta":{"k":{"n":[1,2]}},"z":null}"#,
            " { \"content\" : [ 1 ] ,\n\t\"isError\":true } ",
            "{ }",
        ] {
            let obj = RawJson::new(text).unwrap();
            let mut first = Vec::new();
            set_members(&mut first, Some(obj), add, false).unwrap();
            let mut two = Vec::new();
            let first = RawJson::new(std::str::from_utf8(&first).unwrap()).unwrap();
            set_meta(&mut two, Some(first), meta_add).unwrap();
            let meta = obj.get_unique("_meta").unwrap();
            let one = edit(|o| {
                set_members_and_meta(o, obj, add, meta_add, meta);
                Ok(())
            })
            .unwrap();
            // The same members, in the same order, with the same values; the spacing between
            // members may differ (kept as written when there is no `_meta` to leave out).
            let two = std::str::from_utf8(&two).unwrap();
            assert_eq!(spaceless(&one), spaceless(two), "{text}");
            if meta.is_some() || !text.contains(' ') {
                assert_eq!(one, two, "{text}");
            }
        }
    }
}
