//! The `sse_framer` target: the Server-Sent Events decoder and encoder of
//! `mcpwire::frame::sse`, against an independent reading of the WHATWG rules.

use mcpwire::frame::sse::{
    MIN_MAX_EVENT, SseDecoder, SseEvent, SseItem, write_comment, write_event, write_retry,
};

use super::{Rng, chunks};

/// Header bytes in front of the stream: the cap (in units of [`SSE_CAP_UNIT`] bytes) and the
/// chunking seed.
pub const SSE_HEADER: usize = 2;

/// What one step of the cap byte is worth, in bytes: caps run from the decoder's floor to
/// about 2 KiB, so that whole example messages fit some and break others.
pub const SSE_CAP_UNIT: usize = 8;

/// What decoding one stream produced.
#[derive(Debug, PartialEq)]
struct Decoded {
    items: Vec<SseItem>,
    last_event_id: Option<String>,
}

/// Runs a decoder with cap `cap` over `pieces`, checking after every feed that it holds no
/// more than its cap.
fn decode(cap: usize, pieces: &[&[u8]]) -> Decoded {
    let mut decoder = SseDecoder::with_max_event(cap);
    let limit = decoder.max_event();
    assert_eq!(limit, cap.max(MIN_MAX_EVENT));
    let mut items = Vec::new();
    for piece in pieces {
        decoder.feed(piece);
        assert!(
            decoder.buffered() <= limit,
            "holds {} bytes, cap {limit}",
            decoder.buffered()
        );
        while let Some(item) = decoder.next_item() {
            items.push(item);
        }
    }
    Decoded {
        items,
        last_event_id: decoder.last_event_id().map(str::to_owned),
    }
}

/// The stream's lines, each without its line break (CRLF, CR or LF), and the unterminated
/// rest (empty when the stream ends with a line break).
fn split_lines(stream: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < stream.len() {
        match stream[i] {
            b'\r' => {
                lines.push(&stream[start..i]);
                i += if stream.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            b'\n' => {
                lines.push(&stream[start..i]);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    (lines, &stream[start..])
}

/// The WHATWG "interpret an event stream" algorithm written out the plain way, over the whole
/// stream at once: drop one leading BOM, cut lines at CRLF, CR or LF, decode each line as
/// UTF-8 with replacement characters, then per line: blank dispatches; a leading `:` is a
/// comment; otherwise the field name runs to the first `:` and the value follows, less one
/// leading space. `event` sets the type (empty is the default, `None`), `data` appends the
/// value and a LF, `id` without NUL sets the event's id, `retry` of ASCII digits (that fit a
/// `u64`) is reported at once. Dispatch sets the last event id from the event's id (empty
/// resets it), then, if the data buffer is not empty, drops its last LF and emits the event.
/// The unterminated rest is never dispatched.
///
/// Plus the decoder's documented cap: every non-comment line of an event counts its length
/// plus one; an event whose count passes `cap` (an unterminated last line included) is one
/// `TooLong`, and its lines up to the next blank line are ignored.
fn reference(stream: &[u8], cap: usize) -> Decoded {
    let stream = stream.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(stream);
    let (lines, rest) = split_lines(stream);
    let mut items = Vec::new();
    let mut last_event_id = String::new();
    let mut event_type = String::new();
    let mut data = String::new();
    let mut id: Option<String> = None;
    let mut size = 0usize;
    let mut skipping = false;
    for raw in lines {
        if raw.is_empty() {
            if !skipping {
                if let Some(id) = &id {
                    last_event_id = id.clone();
                }
                if !data.is_empty() {
                    data.pop();
                    items.push(SseItem::Event(SseEvent {
                        event: (!event_type.is_empty()).then(|| event_type.clone()),
                        data: std::mem::take(&mut data),
                        id: id.clone(),
                    }));
                }
            }
            skipping = false;
            (event_type, data, id, size) = (String::new(), String::new(), None, 0);
            continue;
        }
        if skipping || raw[0] == b':' {
            continue;
        }
        size += raw.len() + 1;
        if size > cap {
            items.push(SseItem::TooLong);
            skipping = true;
            continue;
        }
        let line = String::from_utf8_lossy(raw);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (&line[..], ""),
        };
        match field {
            "event" => event_type = value.to_owned(),
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "id" if !value.contains('\0') => id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    items.push(SseItem::Retry(ms));
                }
            }
            _ => {}
        }
    }
    if !skipping && !rest.is_empty() && rest[0] != b':' && size + rest.len() + 1 > cap {
        items.push(SseItem::TooLong);
    }
    Decoded {
        items,
        last_event_id: (!last_event_id.is_empty()).then_some(last_event_id),
    }
}

/// Decodes what the encoder wrote, in chunks, with a cap it cannot reach.
fn decode_encoded(rng: &mut Rng, encoded: &[u8]) -> Vec<SseItem> {
    let cap = encoded.len() + MIN_MAX_EVENT;
    decode(cap, &chunks(rng, encoded, 64)).items
}

/// `s` cut at two char boundaries the PRNG picks.
fn three_parts<'s>(rng: &mut Rng, s: &'s str) -> [&'s str; 3] {
    let mut cut = || {
        let mut at = rng.below(s.len() + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let (a, b) = (cut(), cut());
    let (a, b) = (a.min(b), a.max(b));
    [&s[..a], &s[a..b], &s[b..]]
}

/// `SseDecoder` with a small cap, fed the stream in arbitrary chunks, and the encoder.
///
/// Input: `[cap / SSE_CAP_UNIT, seed, stream…]`. Invariants: no panic; the decoder never holds more than its
/// cap (`buffered()` after every feed); the items (events with their ids, types and data,
/// retries, over-long events) and the last event id are the same for PRNG-picked chunks, one
/// chunk and (for short streams) byte by byte, and equal those of [`reference`], the plain
/// WHATWG reading (so an over-long event is reported once and decoding carries on). The
/// encoder round-trips: every decoded event and retry written back with `write_event` and
/// `write_retry` decodes to the same items, and arbitrary text cut into an id, a type, a
/// comment and data decodes to the event the encoder's documentation promises (line breaks
/// and, in ids, NUL as spaces; an empty type as the default; data line breaks as LF).
pub fn sse_framer(data: &[u8]) {
    let Some((header, stream)) = data.split_first_chunk::<SSE_HEADER>() else {
        return;
    };
    let cap = usize::from(header[0]) * SSE_CAP_UNIT;
    let effective = cap.max(MIN_MAX_EVENT);
    let mut rng = Rng::new(u64::from(header[1]));

    let whole = decode(cap, &[stream]);
    let expected = reference(stream, effective);
    assert_eq!(
        whole, expected,
        "one chunk vs the reference, cap {effective}"
    );
    let pieces = chunks(&mut rng, stream, 2 * effective + 2);
    assert_eq!(decode(cap, &pieces), whole, "arbitrary chunks vs one chunk");
    if stream.len() <= 1024 {
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode(cap, &bytes), whole, "byte by byte vs one chunk");
    }

    // Everything decoded, written back.
    let mut encoded = Vec::new();
    let mut again = Vec::new();
    for item in &whole.items {
        match item {
            SseItem::Event(e) => {
                write_event(&mut encoded, e.id.as_deref(), e.event.as_deref(), &e.data);
                again.push(item.clone());
            }
            SseItem::Retry(ms) => {
                write_retry(&mut encoded, *ms);
                again.push(item.clone());
            }
            SseItem::TooLong => {}
        }
    }
    assert_eq!(
        decode_encoded(&mut rng, &encoded),
        again,
        "re-encoded as {:?}",
        String::from_utf8_lossy(&encoded)
    );

    // Arbitrary text through the encoder.
    let text = String::from_utf8_lossy(stream);
    let [id, event, rest] = three_parts(&mut rng, &text);
    let [comment, body] = {
        let [a, b, c] = three_parts(&mut rng, rest);
        [a, if rng.one_in(2) { b } else { c }]
    };
    let id = (!rng.one_in(4)).then_some(id);
    let event = (!rng.one_in(4)).then_some(event);
    let mut encoded = Vec::new();
    write_comment(&mut encoded, comment);
    write_event(&mut encoded, id, event, body);
    let promised = SseEvent {
        id: id.map(|s| s.replace(['\r', '\n', '\0'], " ")),
        event: event
            .filter(|s| !s.is_empty())
            .map(|s| s.replace(['\r', '\n'], " ")),
        data: body.replace("\r\n", "\n").replace('\r', "\n"),
    };
    assert_eq!(
        decode_encoded(&mut rng, &encoded),
        vec![SseItem::Event(promised)],
        "encoded as {:?}",
        String::from_utf8_lossy(&encoded)
    );
}
