//! Small JSON readers for C, so that hosts can pick the few members they need out of params and
//! results without a JSON library. Views point into the caller's own text.

use std::ffi::c_char;

use mcpwire::jsonrpc::RawJson;

use super::boundary::{
    Out, TextOut, array_in, bytes_in, call, chars_as_bytes, json, required_mut, text_in, utf8,
};
use super::event::mcpw_str;
use super::result::mcpw_result::{self, *};

/// Looks up member `key` (UTF-8, compared after decoding escapes) of the JSON object `json`.
/// On success `*out_value` views the member's raw JSON text inside `json` (so it lives as long
/// as `json` does), or is absent (NULL) when there is no such member. A key that appears twice
/// is `MCPW_ERR_DUPLICATE_KEY`; a value that is not an object is `MCPW_ERR_JSON_WRONG_TYPE`.
/// The whole text is validated on every call.
///
/// # Safety
/// `json_text` and `key` point to their lengths in readable bytes (or are NULL with length 0);
/// `out_value` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_json_get(
    json_text: *const c_char,
    json_len: usize,
    key: *const c_char,
    key_len: usize,
    out_value: *mut mcpw_str,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_value) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let bytes = unsafe { bytes_in(chars_as_bytes(json_text), json_len) }?;
        let text = utf8(bytes)?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let key = match unsafe { text_in(key, key_len) } {
            Ok(key) => key,
            Err(e) => {
                json(bytes)?; // a fault of the text is reported before one of the key
                return Err(e);
            }
        };
        // One walk validates the object and finds the key, as in mcpw_json_get_each.
        let mut found = [None];
        match RawJson::object_each_into(text, &[key], &mut found) {
            Some(0) => {}
            Some(_) => return Err(MCPW_ERR_DUPLICATE_KEY),
            None => {
                let raw = json(bytes)?;
                if !raw.is_object() {
                    return Err(MCPW_ERR_JSON_WRONG_TYPE);
                }
                found[0] = raw.get_unique(key).map_err(|_| MCPW_ERR_DUPLICATE_KEY)?;
            }
        }
        out.write(mcpw_str::of_opt(found[0].map(|v| v.get())));
        Ok(())
    })
}

/// Looks up several members of the JSON object `json` at once: `keys` points to `keys_len`
/// keys (UTF-8, compared after decoding escapes, at most 64), and `out_values` to as many
/// views, written in the same order. Use it instead of several `mcpw_json_get` calls when a
/// handler needs more than one member of the same object (`name` and `arguments` of a
/// `tools/call`, say): the text is validated and read once, not once per key. Each view is
/// the member's raw JSON text inside `json`, or absent (NULL) when there is no such member.
/// A key asked for that appears twice in `json` is `MCPW_ERR_DUPLICATE_KEY`; more than 64
/// keys is `MCPW_ERR_INVALID_ARGUMENT`. Nothing is written unless the call succeeds.
/// `out_values` may be `keys` itself: the keys are read before any answer is written.
///
/// # Safety
/// `json_text` points to `json_len` readable bytes (or is NULL with length 0); `keys` points
/// to `keys_len` readable views, each readable for its length (or NULL with `keys_len` 0);
/// `out_values` is NULL or points to `keys_len` writable views.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_json_get_each(
    json_text: *const c_char,
    json_len: usize,
    keys: *const mcpw_str,
    keys_len: usize,
    out_values: *mut mcpw_str,
) -> mcpw_result {
    call(|| {
        let out = required_mut(out_values)?;
        if keys_len > 64 {
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        // The views are copied first: `out_values` may be `keys` itself (the same length by
        // design), and the answers are written over them.
        let mut local = [mcpw_str::NONE; 64];
        // Safety: (caller) `keys_len` readable views, or NULL with 0.
        local[..keys_len].copy_from_slice(unsafe { array_in(keys, keys_len) }?);
        let views = &local[..keys_len];
        // Safety: (caller) readable for its length (or NULL with length 0), and `out_values`
        // holds `keys_len` writable views.
        unsafe {
            if keys_len <= 8 {
                get_each::<8>(json_text, json_len, views, out)
            } else {
                get_each::<64>(json_text, json_len, views, out)
            }
        }
    })
}

/// `mcpw_json_get_each`'s work with tables for `N` keys: the usual few keys take small ones,
/// since setting up tables for 64 cost more than the lookup itself.
///
/// # Safety
/// As `mcpw_json_get_each`'s, with `views.len() <= N`.
unsafe fn get_each<const N: usize>(
    json_text: *const c_char,
    json_len: usize,
    views: &[mcpw_str],
    out: std::ptr::NonNull<mcpw_str>,
) -> Result<(), mcpw_result> {
    let n = views.len();
    let mut wanted: [&str; N] = [""; N];
    for (slot, k) in wanted.iter_mut().zip(views) {
        // Safety: (caller) each key is readable for its length (or NULL with length 0).
        *slot = unsafe { text_in(k.ptr, k.len) }?;
    }
    let wanted = &wanted[..n];
    // Safety: (caller) readable for its length, or NULL with length 0.
    let bytes = unsafe { bytes_in(chars_as_bytes(json_text), json_len) }?;
    let mut found = [None; N];
    // One walk validates the object and finds the keys; when it fails, the two-step path says
    // why (not UTF-8, not JSON, or not an object).
    let duplicated = match RawJson::object_each_into(utf8(bytes)?, wanted, &mut found[..n]) {
        Some(mask) => mask,
        None => {
            let raw = json(bytes)?;
            if !raw.is_object() {
                return Err(MCPW_ERR_JSON_WRONG_TYPE);
            }
            found = [None; N];
            raw.get_each_into(wanted, &mut found[..n])
        }
    };
    if duplicated != 0 {
        return Err(MCPW_ERR_DUPLICATE_KEY);
    }
    // A key asked for twice gets the same view at each place (get_each_into fills the first).
    for i in 1..n {
        if let Some(first) = wanted[..i].iter().position(|k| *k == wanted[i]) {
            found[i] = found[first];
        }
    }
    for (i, value) in found[..n].iter().enumerate() {
        // Safety: (caller) `out` holds `n` writable views; `i < n`.
        unsafe {
            out.as_ptr()
                .add(i)
                .write(mcpw_str::of_opt(value.map(|v| v.get())))
        };
    }
    Ok(())
}

/// Looks up element `index` (from 0) of the JSON array `json`. On success `*out_value` views
/// the element's raw JSON text inside `json` (so it lives as long as `json` does), or is
/// absent (NULL) past the end. A value that is not an array is `MCPW_ERR_JSON_WRONG_TYPE`. The
/// whole text is validated on every call: to walk an array, use `mcpw_json_items`.
///
/// # Safety
/// `json_text` points to `json_len` readable bytes (or is NULL with length 0); `out_value`
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_json_at(
    json_text: *const c_char,
    json_len: usize,
    index: usize,
    out_value: *mut mcpw_str,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_value) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let raw = json(unsafe { bytes_in(chars_as_bytes(json_text), json_len) }?)?;
        let element = element(raw.get(), index).map_err(|()| MCPW_ERR_JSON_WRONG_TYPE)?;
        out.write(mcpw_str::of_opt(element));
        Ok(())
    })
}

/// Reads every element of the JSON array `json` in one pass: use it to walk an array (a
/// `tools/list` result's `tools`, a result's `content`), where calling `mcpw_json_at` for
/// each index would validate and walk the whole text again each time (1,000 elements then
/// cost 500 times one pass; 16,000, 8,000 times).
///
/// Writes views of the first `min(count, capacity)` elements to `out_items` (each the
/// element's raw JSON text inside `json`, living as long as `json` does) and the number of
/// elements to `*out_count`. When the count is larger than `capacity`, call again with room
/// for all (a call with capacity 0 asks for the count). A value that is not an array is
/// `MCPW_ERR_JSON_WRONG_TYPE`; nothing is written unless the call succeeds.
///
/// # Safety
/// `json_text` points to `json_len` readable bytes (or is NULL with length 0);
/// `out_items` points to `capacity` writable views (or is NULL with `capacity` 0);
/// `out_count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_json_items(
    json_text: *const c_char,
    json_len: usize,
    out_items: *mut mcpw_str,
    capacity: usize,
    out_count: *mut usize,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let count = unsafe { Out::new(out_count) }?;
        if out_items.is_null() && capacity != 0 {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        }
        // Safety: (caller) readable for its length, or NULL with length 0.
        let raw = json(unsafe { bytes_in(chars_as_bytes(json_text), json_len) }?)?;
        if !raw.get().trim_start().starts_with('[') {
            return Err(MCPW_ERR_JSON_WRONG_TYPE);
        }
        let mut n = 0;
        for item in raw.items() {
            if n < capacity {
                // Safety: `n < capacity`, and (caller) `out_items` holds `capacity` writable
                // views; `write` neither reads nor drops what was there.
                unsafe { out_items.add(n).write(mcpw_str::of_opt(Some(item.get()))) };
            }
            n += 1;
        }
        count.write(n);
        Ok(())
    })
}

/// Decodes the JSON string `json` (one value with its quotes, such as `mcpw_json_get` finds)
/// into its text, escapes decoded, as UTF-8. Use it where a handler needs the text itself (a
/// path to open, a name to compare, text to print); to copy a string into an answer, the raw
/// view is already JSON.
///
/// Writes the text's length in bytes to `*out_len`. When it fits in `capacity`, the text is
/// written to `out_text`, followed by a NUL when there is room for one; when it does not fit,
/// nothing is written to `out_text`: call again with room for `*out_len + 1` bytes. The text
/// holds a NUL byte wherever the string has a `\u0000` escape: use `*out_len`, not
/// `strlen`, where that matters. A value that is not a string is `MCPW_ERR_JSON_WRONG_TYPE`.
/// `out_text` may overlap `json_text` (decoding in place: the text is never longer).
///
/// # Safety
/// `json_text` points to `json_len` readable bytes (or is NULL with length 0); `out_text`
/// points to `capacity` writable bytes (or is NULL with `capacity` 0); `out_len` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_json_string(
    json_text: *const c_char,
    json_len: usize,
    out_text: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) `out_text` holds `capacity` writable bytes or is NULL with
        // `capacity` 0; `out_len` is writable or NULL, which is refused.
        let out = unsafe { TextOut::new(out_text, capacity, out_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let bytes = unsafe { bytes_in(chars_as_bytes(json_text), json_len) }?;
        // Most strings (names, URIs) have no escape: their text lies between the quotes, and
        // one pass tells, without parsing the value.
        let text = match plain_string(bytes) {
            Some(text) => std::borrow::Cow::Borrowed(text),
            None => json(bytes)?
                .as_str()
                .ok_or(MCPW_ERR_JSON_WRONG_TYPE)?
                .to_str(),
        };
        // Decoding in place (`out_text` inside `json_text`): the text still lies in the input,
        // so it is copied out before anything is written over it.
        let text = if out.overlaps(bytes) {
            std::borrow::Cow::Owned(text.into_owned())
        } else {
            text
        };
        out.write(text.as_bytes());
        Ok(())
    })
}

/// The text of `bytes` when they are a JSON string without escapes (quote, UTF-8 text with
/// no quote, backslash or control character, quote); `None` for anything else, which the
/// parser then judges.
fn plain_string(bytes: &[u8]) -> Option<&str> {
    let inner = bytes.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if inner.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
        return None;
    }
    std::str::from_utf8(inner).ok()
}

/// Reads the JSON number `json` (one value, such as `mcpw_json_get` finds) as a double, the
/// nearest to its decimal value: use it for a tool's numeric arguments instead of `strtod`,
/// which needs a NUL-terminated copy and follows the C locale's decimal point (`2.5` reads as
/// 2 under a locale that writes `2,5`). A value that is not a number, or one beyond a double's
/// range (`1e400`), is `MCPW_ERR_JSON_WRONG_TYPE`; nothing is written unless the call
/// succeeds.
///
/// # Safety
/// `json_text` points to `json_len` readable bytes (or is NULL with length 0); `out_value` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_json_number(
    json_text: *const c_char,
    json_len: usize,
    out_value: *mut f64,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_value) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let raw = json(unsafe { bytes_in(chars_as_bytes(json_text), json_len) }?)?;
        let value = raw
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or(MCPW_ERR_JSON_WRONG_TYPE)?;
        out.write(value);
        Ok(())
    })
}

/// Element `index` of the array `text` (already validated), `Err` when `text` is no array.
fn element(text: &str, index: usize) -> Result<Option<&str>, ()> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'[') {
        return Err(());
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok(None);
    }
    for n in 0.. {
        let end = value_end(b, i);
        if n == index {
            return Ok(text.get(i..end));
        }
        i = skip_ws(b, end);
        if b.get(i) != Some(&b',') {
            break;
        }
        i = skip_ws(b, i + 1);
    }
    Ok(None)
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the value starting at `i` in validated JSON.
fn value_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    let mut in_string = false;
    while let Some(&c) = b.get(i) {
        i += 1;
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            // A scalar ends where the container's punctuation or whitespace starts.
            b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return i - 1,
            _ => {}
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::{element, json, plain_string};

    #[test]
    fn elements_of_arrays() {
        let t = r#" [ 1 , "a\"]" , {"k":[2,3]}, [], true,null ,-1.5e3 ] "#;
        let all: Vec<_> = (0..8).map(|i| element(t, i).unwrap()).collect();
        assert_eq!(
            all,
            [
                Some("1"),
                Some(r#""a\"]""#),
                Some(r#"{"k":[2,3]}"#),
                Some("[]"),
                Some("true"),
                Some("null"),
                Some("-1.5e3"),
                None
            ]
        );
        assert_eq!(element("[]", 0), Ok(None));
        assert_eq!(element("[7]", 0), Ok(Some("7")));
        assert_eq!(element("{}", 0), Err(()));
        assert_eq!(element("\"x\"", 0), Err(()));
    }

    /// The one-pass reading of strings without escapes agrees with the parser: it reads
    /// what the parser reads, and leaves everything else to it.
    #[test]
    fn plain_strings_read_as_the_parser_reads_them() {
        let parsed = |bytes: &[u8]| {
            json(bytes)
                .ok()
                .and_then(|raw| raw.as_str().map(|s| s.to_str().into_owned()))
        };
        let cases: [&[u8]; 12] = [
            b"\"\"",
            b"\"echo\"",
            b"\"caf\xc3\xa9 \x7f\"",
            b"\"ech\\u006f\"",
            b"\"a\"b\"",
            b"\"tab\there\"",
            b"\"\xff\"",
            b"\"",
            b"\"open",
            b" \"spaced\" ",
            b"7",
            b"\"a\\\"",
        ];
        for bytes in cases {
            if let Some(text) = plain_string(bytes) {
                assert_eq!(Some(text.to_owned()), parsed(bytes), "{bytes:?}");
            }
        }
        assert_eq!(plain_string(b"\"echo\""), Some("echo"));
        assert_eq!(plain_string(b"\"\""), Some(""));
        assert_eq!(plain_string(b"\"ech\\u006f\""), None);
        assert_eq!(plain_string(b"\"a\"b\""), None);
        assert_eq!(plain_string(b"\"tab\there\""), None);
        assert_eq!(plain_string(b"\"\xff\""), None);
        assert_eq!(plain_string(b"\""), None);
    }
}
