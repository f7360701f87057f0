//! JSON string text: decoding escapes on demand, and escaping text for output.

/// The decoded characters of a validated JSON string body, produced lazily.
///
/// Returned by [`JsonStr::chars`](super::JsonStr::chars); use it to compare or copy decoded
/// text without allocating.
#[derive(Clone, Debug)]
pub struct Unescaped<'a> {
    rest: &'a str,
}

impl<'a> Unescaped<'a> {
    pub(crate) fn new(raw: &'a str) -> Self {
        Unescaped { rest: raw }
    }
}

fn hex4(b: &[u8]) -> u32 {
    b.iter().take(4).fold(0u32, |acc, &d| {
        let n = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => 0,
        };
        (acc << 4) | n as u32
    })
}

impl Iterator for Unescaped<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let bytes = self.rest.as_bytes();
        if bytes.first() != Some(&b'\\') {
            let c = self.rest.chars().next()?;
            self.rest = &self.rest[c.len_utf8()..];
            return Some(c);
        }
        // The body was validated, so every escape is complete and surrogates are paired.
        // Should that ever not hold, decoding yields U+FFFD instead of panicking.
        let (c, used) = match bytes.get(1) {
            Some(b'"') => ('"', 2),
            Some(b'\\') => ('\\', 2),
            Some(b'/') => ('/', 2),
            Some(b'b') => ('\u{8}', 2),
            Some(b'f') => ('\u{c}', 2),
            Some(b'n') => ('\n', 2),
            Some(b'r') => ('\r', 2),
            Some(b't') => ('\t', 2),
            Some(b'u') if bytes.len() >= 6 => {
                let unit = hex4(&bytes[2..6]);
                if (0xD800..0xDC00).contains(&unit) && bytes.len() >= 12 {
                    let low = hex4(&bytes[8..12]);
                    let code =
                        0x10000 + ((unit - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
                    (char::from_u32(code).unwrap_or('\u{FFFD}'), 12)
                } else {
                    (char::from_u32(unit).unwrap_or('\u{FFFD}'), 6)
                }
            }
            _ => ('\u{FFFD}', bytes.len().min(2)),
        };
        self.rest = self.rest.get(used..).unwrap_or("");
        Some(c)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `b` must be escaped inside a JSON string.
#[inline(always)]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Appends `s` as the body of a JSON string (no quotes): `"`, `\` and control characters are
/// escaped; everything else, non-ASCII included, is copied as UTF-8. The output never holds a
/// raw newline.
pub(crate) fn write_escaped(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xF) as usize],
            ]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends the decimal form of `n`.
pub(crate) fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64_padded(out, n.unsigned_abs(), 1);
}

/// Appends the decimal form of `n`, with leading zeros up to `width` digits (at most 20).
pub(crate) fn write_u64_padded(out: &mut Vec<u8>, mut n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i.min(buf.len() - width.min(buf.len()))..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i64_extremes_round_trip() {
        for n in [0, 1, -1, 9, 10, 42, i64::MAX, i64::MIN, -1_000_000_007] {
            let mut out = Vec::new();
            write_i64(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
        }
    }

    #[test]
    fn escaping_covers_controls_quotes_and_keeps_unicode() {
        let mut out = Vec::new();
        write_escaped(&mut out, "a\"b\\c\n\r\t\u{1}\u{1f}\u{7f}é😀\u{2028}");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a\\\"b\\\\c\\n\\r\\t\\u0001\\u001f\u{7f}é😀\u{2028}"
        );
    }

    #[test]
    fn unescape_decodes_pairs_and_short_escapes() {
        let s: String = Unescaped::new(r#"a\n\u00e9\ud83d\ude00\/\"x"#).collect();
        assert_eq!(s, "a\né😀/\"x");
    }
}
