//! Message → bytes, into a buffer the caller reuses.
//!
//! Every function appends one complete JSON-RPC message (no frame delimiter) to `out`. The
//! output never contains a raw newline or carriage return: text is escaped, and the newlines
//! that caller-supplied JSON may carry as whitespace are turned into spaces. That is what lets
//! the line framer promise one message per line whatever the caller passes.

use super::text::{write_escaped, write_i64};
use super::{Id, JsonStr, Message, RawJson};

#[inline]
fn write_id(out: &mut Vec<u8>, id: Id<'_>) {
    match id {
        Id::Int(n) => write_i64(out, n),
        Id::Str(s) => write_json_str(out, s),
    }
}

/// Writes `s` in its wire form. A string id the caller built (`OwnedId::Str` of bytes that
/// are no JSON string content: the decoded text of an id, say, with a quote or a newline in
/// it) is written as that text, escaped, so that the frame stays valid JSON on one line.
#[inline]
fn write_json_str(out: &mut Vec<u8>, s: JsonStr<'_>) {
    let raw = s.raw();
    let wire = if s.has_escapes() {
        JsonStr::from_raw(raw).is_some()
    } else {
        !raw.bytes().any(|b| b == b'"' || b < 0x20)
    };
    out.push(b'"');
    if wire {
        out.extend_from_slice(raw.as_bytes());
    } else {
        write_escaped(out, raw);
    }
    out.push(b'"');
}

#[inline]
fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    write_escaped(out, s);
    out.push(b'"');
}

/// Whether `bytes` holds a `\n` or `\r`.
#[inline]
pub(crate) fn has_line_break(bytes: &[u8]) -> bool {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline; each load reads 16 bytes at `i` or
        // `i + 16` with `i + 32 <= bytes.len()`.
        unsafe {
            let lf = _mm_set1_epi8(b'\n' as i8);
            let cr = _mm_set1_epi8(b'\r' as i8);
            while i + 32 <= bytes.len() {
                let p = bytes.as_ptr().add(i);
                let a = _mm_loadu_si128(p as *const __m128i);
                let b = _mm_loadu_si128(p.add(16) as *const __m128i);
                let hits = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(a, lf), _mm_cmpeq_epi8(a, cr)),
                    _mm_or_si128(_mm_cmpeq_epi8(b, lf), _mm_cmpeq_epi8(b, cr)),
                );
                if _mm_movemask_epi8(hits) != 0 {
                    return true;
                }
                i += 32;
            }
        }
    }
    bytes[i..].iter().any(|&b| b == b'\n' || b == b'\r')
}

/// Copies validated JSON, turning whitespace line breaks into spaces. Valid JSON can hold a
/// raw line break only as whitespace (inside strings they must be escaped), so the result
/// means exactly the same.
#[inline]
fn write_raw(out: &mut Vec<u8>, raw: RawJson<'_>) {
    let bytes = raw.get().as_bytes();
    let start = out.len();
    out.extend_from_slice(bytes);
    if has_line_break(bytes) {
        for b in &mut out[start..] {
            if *b == b'\n' || *b == b'\r' {
                *b = b' ';
            }
        }
    }
}

const HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\"";

/// Appends a request. Use it for every outgoing request; `method` is escaped as needed and
/// `params` (already validated) passes through.
pub fn encode_request(out: &mut Vec<u8>, id: Id<'_>, method: &str, params: Option<RawJson<'_>>) {
    out.extend_from_slice(HEAD);
    out.extend_from_slice(b",\"id\":");
    write_id(out, id);
    out.extend_from_slice(b",\"method\":");
    write_str(out, method);
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        write_raw(out, params);
    }
    out.push(b'}');
}

/// Appends a notification.
pub fn encode_notification(out: &mut Vec<u8>, method: &str, params: Option<RawJson<'_>>) {
    out.extend_from_slice(HEAD);
    out.extend_from_slice(b",\"method\":");
    write_str(out, method);
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        write_raw(out, params);
    }
    out.push(b'}');
}

/// Appends a success response; the id is written exactly as it was received.
pub fn encode_response(out: &mut Vec<u8>, id: Id<'_>, result: RawJson<'_>) {
    // One allocation for the whole message (ids are short; a long one grows the buffer once).
    out.reserve(HEAD.len() + 32 + result.get().len());
    out.extend_from_slice(HEAD);
    out.extend_from_slice(b",\"id\":");
    write_id(out, id);
    out.extend_from_slice(b",\"result\":");
    write_raw(out, result);
    out.push(b'}');
}

/// Appends an error response. `id` is `None` when the request's id could not be read; the
/// response then has no `id`, as MCP's schemas from 2025-11-25 on write it (`id?: string |
/// number`; a `null` id, JSON-RPC's form, fails them, and the earlier schemas accept
/// neither).
pub fn encode_error(
    out: &mut Vec<u8>,
    id: Option<Id<'_>>,
    code: i64,
    message: &str,
    data: Option<RawJson<'_>>,
) {
    out.extend_from_slice(HEAD);
    if let Some(id) = id {
        out.extend_from_slice(b",\"id\":");
        write_id(out, id);
    }
    out.extend_from_slice(b",\"error\":{\"code\":");
    write_i64(out, code);
    out.extend_from_slice(b",\"message\":");
    write_str(out, message);
    if let Some(data) = data {
        out.extend_from_slice(b",\"data\":");
        write_raw(out, data);
    }
    out.extend_from_slice(b"}}");
}

/// Appends a decoded message again, keeping every string's wire form byte for byte. Use it to
/// forward or log a message you received. An error without an id (`null` or absent: the
/// decoder reads both as `None`) is written with JSON-RPC's `"id":null`.
pub fn encode_message(out: &mut Vec<u8>, message: &Message<'_>) {
    out.extend_from_slice(HEAD);
    match message {
        Message::Request(r) => {
            out.extend_from_slice(b",\"id\":");
            write_id(out, r.id);
            out.extend_from_slice(b",\"method\":");
            write_json_str(out, r.method);
            if let Some(params) = r.params {
                out.extend_from_slice(b",\"params\":");
                write_raw(out, params);
            }
        }
        Message::Notification(n) => {
            out.extend_from_slice(b",\"method\":");
            write_json_str(out, n.method);
            if let Some(params) = n.params {
                out.extend_from_slice(b",\"params\":");
                write_raw(out, params);
            }
        }
        Message::Response(r) => {
            out.extend_from_slice(b",\"id\":");
            write_id(out, r.id);
            out.extend_from_slice(b",\"result\":");
            write_raw(out, r.result);
        }
        Message::Error(e) => {
            out.extend_from_slice(b",\"id\":");
            match e.id {
                Some(id) => write_id(out, id),
                None => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(b",\"error\":{\"code\":");
            write_i64(out, e.error.code);
            out.extend_from_slice(b",\"message\":");
            write_json_str(out, e.error.message);
            if let Some(data) = e.error.data {
                out.extend_from_slice(b",\"data\":");
                write_raw(out, data);
            }
            out.push(b'}');
        }
    }
    out.push(b'}');
}

/// Writes a JSON-RPC batch: `[`, the members separated by commas, `]`.
///
/// Use it when a batch must be answered with a batch (protocol 2025-03-26): call
/// [`member`](Self::member) before encoding each message into the returned buffer, then
/// [`finish`](Self::finish). A batch with no members is never written: `finish` removes the
/// opening bracket again and returns `false`, since JSON-RPC sends nothing in that case.
pub struct BatchWriter<'o> {
    out: &'o mut Vec<u8>,
    start: usize,
    members: usize,
}

impl<'o> BatchWriter<'o> {
    /// Starts a batch at the end of `out`.
    pub fn new(out: &'o mut Vec<u8>) -> Self {
        let start = out.len();
        out.push(b'[');
        BatchWriter {
            out,
            start,
            members: 0,
        }
    }

    /// Prepares for the next member and returns the buffer to encode it into.
    pub fn member(&mut self) -> &mut Vec<u8> {
        if self.members > 0 {
            self.out.push(b',');
        }
        self.members += 1;
        self.out
    }

    /// Closes the batch. Returns whether anything was written.
    pub fn finish(self) -> bool {
        if self.members == 0 {
            self.out.truncate(self.start);
            false
        } else {
            self.out.push(b']');
            true
        }
    }
}

// ---- Line frames ----------------------------------------------------------------------------

/// The message methods of the newline framer. `frame` knows nothing of JSON, so what turns a
/// message into a line lives here, next to the encoder that guarantees the line holds no raw
/// newline.
impl crate::frame::line::LineEncoder {
    /// Appends a request frame.
    pub fn request(&mut self, id: Id<'_>, method: &str, params: Option<RawJson<'_>>) {
        self.push_frame(|out| encode_request(out, id, method, params));
    }

    /// Appends a notification frame.
    pub fn notification(&mut self, method: &str, params: Option<RawJson<'_>>) {
        self.push_frame(|out| encode_notification(out, method, params));
    }

    /// Appends a success response frame.
    pub fn response(&mut self, id: Id<'_>, result: RawJson<'_>) {
        self.push_frame(|out| encode_response(out, id, result));
    }

    /// Appends an error response frame (`id: None` leaves the `id` out, as
    /// [`encode_error`] does).
    pub fn error(
        &mut self,
        id: Option<Id<'_>>,
        code: i64,
        message: &str,
        data: Option<RawJson<'_>>,
    ) {
        self.push_frame(|out| encode_error(out, id, code, message, data));
    }

    /// Appends a decoded message again, as a frame.
    pub fn message(&mut self, message: &Message<'_>) {
        self.push_frame(|out| encode_message(out, message));
    }
}
