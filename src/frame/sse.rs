//! Server-Sent Events framing (`text/event-stream`), as Streamable HTTP uses it.
//!
//! [`SseDecoder`] turns a byte stream of any chunking into [`SseEvent`]s, following the WHATWG
//! rules for interpreting an event stream (HTML, "Server-sent events"): an optional leading
//! UTF-8 BOM; CR, LF and CRLF line endings; comment lines (a leading `:`) ignored; a field
//! name up to the first `:` and a value after it, less one leading space (a line without `:`
//! is a field with an empty value); `data` lines joined with `\n`; `event` (empty means the
//! default type); `id` ignored when it holds NUL; `retry` only when it is all ASCII digits;
//! an event dispatched by a blank line only when it had a `data` line; text decoded as UTF-8
//! with replacement characters; an unfinished last event never dispatched. Its one addition is
//! a cap on how much one event may hold. [`write_event`] and friends encode.

use std::borrow::Cow;
use std::collections::VecDeque;

/// The default cap on one event (its data plus field overhead): 16 MiB.
pub const DEFAULT_MAX_EVENT: usize = 16 * 1024 * 1024;

/// The smallest cap [`SseDecoder::with_max_event`] sets, whatever it is asked for.
pub const MIN_MAX_EVENT: usize = 64;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field (`None` means the default type, "message"; an empty field is `None`
    /// too, as the spec says).
    pub event: Option<String>,
    /// The data lines, joined with `\n`.
    pub data: String,
    /// The `id` field, if this event set one (empty when it reset the last event id).
    pub id: Option<String>,
}

/// Something to act on from an event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseItem {
    /// An event was dispatched.
    Event(SseEvent),
    /// A `retry` field set the reconnection delay, in milliseconds (a value too large for a
    /// `u64` is ignored).
    Retry(u64),
    /// An event grew past the cap; its lines are skipped up to the next blank line.
    TooLong,
}

/// The most decoded items whose room a drained decoder keeps.
const KEPT_ITEMS: usize = 64;

/// Decodes `text/event-stream` bytes.
///
/// Feed chunks with [`feed`](Self::feed) and collect items with [`next_item`](Self::next_item)
/// until it returns `None`. The decoder keeps the last event id (as the spec's "last event ID
/// string"), which is what a client sends back in `Last-Event-ID` when it reconnects.
///
/// The cap: every line of an event except comments counts its length plus one; once an event
/// would pass the cap (which a partial line can already tell), it is reported once as
/// [`SseItem::TooLong`] and its lines are skipped up to the blank line that ends it, `retry`
/// included. The decoder never holds more than the cap ([`buffered`](Self::buffered)); a
/// comment line is dropped as it arrives, however long. Items are the same for every chunking
/// of a stream.
#[derive(Debug)]
pub struct SseDecoder {
    /// The stream's first bytes while they may still be a BOM; `None` once past them.
    head: Option<Vec<u8>>,
    /// The current line, when it did not end in the bytes fed so far.
    line: Vec<u8>,
    /// The rest of the current line is dropped as it arrives: a comment, a line of an event
    /// being skipped, or the line that made its event too long.
    discarding: bool,
    /// A CR ended the last line; a following LF belongs to it.
    after_cr: bool,
    /// The fields of the event being decoded, as raw bytes (decoded when it is dispatched).
    event: Option<Vec<u8>>,
    data: Vec<u8>,
    has_data: bool,
    id: Option<Vec<u8>>,
    last_event_id: Option<String>,
    /// What the event's lines so far count against the cap.
    size: usize,
    max_event: usize,
    /// The event went past the cap: its lines are ignored up to the next blank line.
    skipping: bool,
    pending: VecDeque<SseItem>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_max_event(DEFAULT_MAX_EVENT)
    }
}

impl SseDecoder {
    /// A decoder with the default cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder whose events may hold at most `max_event` bytes (at least
    /// [`MIN_MAX_EVENT`]).
    pub fn with_max_event(max_event: usize) -> Self {
        SseDecoder {
            head: Some(Vec::new()),
            line: Vec::new(),
            discarding: false,
            after_cr: false,
            event: None,
            data: Vec::new(),
            has_data: false,
            id: None,
            last_event_id: None,
            size: 0,
            max_event: max_event.max(MIN_MAX_EVENT),
            skipping: false,
            pending: VecDeque::new(),
        }
    }

    /// The cap in force on one event.
    pub fn max_event(&self) -> usize {
        self.max_event
    }

    /// How many bytes the decoder holds for the event under way (its fields so far and an
    /// unfinished line): never more than [`max_event`](Self::max_event). Items waiting for
    /// [`next_item`](Self::next_item) are not counted.
    pub fn buffered(&self) -> usize {
        self.head.as_ref().map_or(0, Vec::len)
            + self.line.len()
            + self.event.as_ref().map_or(0, Vec::len)
            + self.data.len()
            + self.id.as_ref().map_or(0, Vec::len)
    }

    /// The id of the last event dispatched that set one: send it as `Last-Event-ID` when
    /// reconnecting. `None` before any, and after an empty `id` field reset it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// Carries the last event id over to a decoder for a new connection that resumes the
    /// stream (the one sent as `Last-Event-ID`), so that it stays in force until an event
    /// sets or resets it.
    pub fn set_last_event_id(&mut self, id: Option<&str>) {
        self.last_event_id = id.filter(|id| !id.is_empty()).map(str::to_owned);
    }

    /// Adds bytes from the stream. Complete lines are processed at once; of an unfinished one,
    /// only what fits the cap is kept. The items they make wait for
    /// [`next_item`](Self::next_item), as many as the bytes hold (an event can take as few as
    /// six bytes, and each costs more than that to keep): feed a large read in pieces (a few
    /// KiB) and take the items between them to bound what waits.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if let Some(head) = &mut self.head {
            // A UTF-8 BOM may open the stream; it can arrive split across chunks.
            let take = (BOM.len() - head.len()).min(bytes.len());
            head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if head.len() < BOM.len() && BOM.starts_with(head) {
                return;
            }
            let head = self.head.take().unwrap_or_default();
            if head != BOM {
                self.scan(&head);
            }
        }
        self.scan(bytes);
    }

    /// The next item decoded so far, if any.
    pub fn next_item(&mut self) -> Option<SseItem> {
        let item = self.pending.pop_front();
        if item.is_none() && self.pending.capacity() > KEPT_ITEMS {
            // Drained after a burst (one chunk of many short items, such as `retry` lines):
            // the room goes back instead of staying with the stream.
            self.pending = VecDeque::new();
        }
        item
    }

    /// Splits `input` into lines, finishing the buffered one first.
    fn scan(&mut self, mut input: &[u8]) {
        while !input.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if input[0] == b'\n' {
                    input = &input[1..];
                    continue;
                }
            }
            let Some(end) = input.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.partial(input);
                return;
            };
            self.after_cr = input[end] == b'\r';
            self.end_of_line(&input[..end]);
            input = &input[end + 1..];
        }
    }

    /// The current line goes on with `piece` and does not end yet.
    fn partial(&mut self, piece: &[u8]) {
        if self.discarding || piece.is_empty() {
            return;
        }
        if self.line.is_empty() && piece[0] == b':' {
            // A comment: nothing of it is kept.
            self.discarding = true;
            return;
        }
        if self.skipping || self.size + self.line.len() + piece.len() + 1 > self.max_event {
            // Not blank, so ignored while skipping; or it already takes the event past the cap.
            self.over_cap();
            super::empty(&mut self.line); // (it may hold up to the cap)
            self.discarding = true;
            return;
        }
        self.line.extend_from_slice(piece);
    }

    /// The current line ends with `piece`.
    fn end_of_line(&mut self, piece: &[u8]) {
        if self.discarding {
            self.discarding = false;
            return;
        }
        if self.line.is_empty() {
            self.line_done(piece);
            return;
        }
        // A buffered line never starts with `:` (see `partial`), so it counts against the cap.
        if self.line.len() + piece.len() >= self.max_event {
            self.over_cap();
            super::empty(&mut self.line);
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        line.extend_from_slice(piece);
        self.line_done(&line);
        crate::frame::empty(&mut line);
        self.line = line;
    }

    /// The event is (or already was) past the cap.
    fn over_cap(&mut self) {
        if !self.skipping {
            self.pending.push_back(SseItem::TooLong);
            self.skipping = true;
            self.reset_event();
        }
    }

    fn reset_event(&mut self) {
        self.event = None;
        super::empty(&mut self.data);
        self.has_data = false;
        self.id = None;
        self.size = 0;
    }

    /// One whole line, without its line break.
    fn line_done(&mut self, line: &[u8]) {
        if line.is_empty() {
            if self.skipping {
                self.skipping = false;
            } else {
                self.dispatch();
            }
            self.reset_event();
            return;
        }
        if self.skipping || line[0] == b':' {
            return;
        }
        self.size += line.len() + 1;
        if self.size > self.max_event {
            self.over_cap();
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"event" => self.event = Some(value.to_vec()),
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            // An id with a NUL is ignored, as the spec says.
            b"id" if !value.contains(&0) => self.id = Some(value.to_vec()),
            b"retry" => {
                if !value.is_empty()
                    && value.iter().all(u8::is_ascii_digit)
                    && let Ok(ms) = text(value).parse()
                {
                    self.pending.push_back(SseItem::Retry(ms));
                }
            }
            _ => {}
        }
    }

    /// A blank line: the event's id becomes the last event id, and an event with data is
    /// dispatched.
    fn dispatch(&mut self) {
        if let Some(id) = &self.id {
            self.last_event_id = (!id.is_empty()).then(|| text(id).into_owned());
        }
        if !self.has_data {
            return;
        }
        let data = std::mem::take(&mut self.data);
        let data = String::from_utf8(data)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        let event = SseEvent {
            event: self
                .event
                .take()
                .filter(|e| !e.is_empty())
                .map(|e| text(&e).into_owned()),
            data,
            id: self.id.take().map(|id| text(&id).into_owned()),
        };
        self.pending.push_back(SseItem::Event(event));
    }
}

/// Field bytes as text, invalid UTF-8 replaced.
fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Appends one event: an optional `id`, an optional `event` name (an empty one is the default
/// type, so it is left out), and `data` split into one `data:` line per line of text (at CRLF,
/// CR or LF, so multi-line payloads survive; the decoder joins them back with LF), then the
/// blank line. Line breaks in `id` and `event`, and NUL in `id` (which would make the decoder
/// ignore it), become spaces.
pub fn write_event(out: &mut Vec<u8>, id: Option<&str>, event: Option<&str>, data: &str) {
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(sanitize(id, &['\n', '\r', '\0']).as_bytes());
        out.push(b'\n');
    }
    if let Some(event) = event.filter(|e| !e.is_empty()) {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(sanitize(event, &['\n', '\r']).as_bytes());
        out.push(b'\n');
    }
    let mut rest = data;
    loop {
        // JSON from our encoder has no line breaks: a vector check settles most payloads
        // at once.
        let end = if crate::jsonrpc::has_line_break(rest.as_bytes()) {
            rest.find(['\n', '\r']).unwrap_or(rest.len())
        } else {
            rest.len()
        };
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&rest.as_bytes()[..end]);
        out.push(b'\n');
        if end == rest.len() {
            break;
        }
        let brk = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + brk..];
    }
    out.push(b'\n');
}

/// Appends a `retry:` field (the client's reconnection delay, in milliseconds).
pub fn write_retry(out: &mut Vec<u8>, millis: u64) {
    out.extend_from_slice(b"retry: ");
    out.extend_from_slice(millis.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Appends a comment line (keeps idle connections alive). Line breaks become spaces.
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b": ");
    out.extend_from_slice(sanitize(text, &['\n', '\r']).as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// `s` with each of `banned` replaced by a space (field values may not hold line breaks).
fn sanitize<'s>(s: &'s str, banned: &[char]) -> Cow<'s, str> {
    if s.contains(banned) {
        Cow::Owned(s.replace(banned, " "))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line cut at the cap (whether it ended or not) gives its room back; so does the
    /// queue of items after a burst of short ones (a hostile server's 16 MiB line or chunk of
    /// `retry` lines stayed allocated for the stream's life).
    #[test]
    fn room_taken_by_a_line_past_the_cap_or_a_burst_of_items_goes_back() {
        let cap = 4 * super::super::KEEP_WHEN_EMPTY;
        let long = vec![b'x'; cap - 100];
        for end in [&b""[..], b"\n"] {
            let mut d = SseDecoder::with_max_event(cap);
            d.feed(b"data: ");
            d.feed(&long);
            assert!(d.line.capacity() >= long.len());
            d.feed(&long[..200]);
            d.feed(end);
            assert!(
                d.line.capacity() <= super::super::KEEP_WHEN_EMPTY,
                "{}",
                d.line.capacity()
            );
            d.feed(b"\n\ndata: 1\n\n");
            let items: Vec<_> = std::iter::from_fn(|| d.next_item()).collect();
            assert_eq!(items.len(), 2, "{items:?}");
            assert_eq!(items[0], SseItem::TooLong);
        }
        let mut d = SseDecoder::with_max_event(cap);
        d.feed(&b"retry: 1\n".repeat(10_000));
        assert_eq!(std::iter::from_fn(|| d.next_item()).count(), 10_000);
        assert!(
            d.pending.capacity() <= KEPT_ITEMS,
            "{}",
            d.pending.capacity()
        );
    }

    fn decode_all(chunks: &[&[u8]]) -> (Vec<SseItem>, Option<String>) {
        let mut d = SseDecoder::with_max_event(256);
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c);
            assert!(d.buffered() <= d.max_event(), "buffered {}", d.buffered());
            while let Some(i) = d.next_item() {
                out.push(i);
            }
        }
        (out, d.last_event_id().map(str::to_owned))
    }

    fn ev(id: Option<&str>, event: Option<&str>, data: &str) -> SseItem {
        SseItem::Event(SseEvent {
            id: id.map(str::to_owned),
            event: event.map(str::to_owned),
            data: data.to_owned(),
        })
    }

    const STREAM: &[u8] = b"\xEF\xBB\xBF: a comment\r\nretry: 500\r\nid: 1\r\ndata: {\"a\":1}\r\n\r\nevent: message\ndata: line one\ndata:line two\nid: 2\n\n\rdata\r\rid: 3\rdata: x\r\r: keepalive\n\ndata: no id\n\n";

    fn expected() -> Vec<SseItem> {
        vec![
            SseItem::Retry(500),
            ev(Some("1"), None, "{\"a\":1}"),
            ev(Some("2"), Some("message"), "line one\nline two"),
            ev(None, None, ""),
            ev(Some("3"), None, "x"),
            ev(None, None, "no id"),
        ]
    }

    #[test]
    fn fields_comments_line_endings_and_bom() {
        let (items, last) = decode_all(&[STREAM]);
        assert_eq!(items, expected());
        assert_eq!(last.as_deref(), Some("3"));
    }

    #[test]
    fn any_chunking_gives_the_same_items() {
        for split in 0..STREAM.len() {
            let (items, _) = decode_all(&[&STREAM[..split], &STREAM[split..]]);
            assert_eq!(items, expected(), "split at {split}");
        }
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(decode_all(&bytes).0, expected());
    }

    #[test]
    fn an_oversized_event_is_reported_once_and_skipped() {
        let mut big = b"data: ".to_vec();
        big.extend(std::iter::repeat_n(b'x', 1000));
        big.extend_from_slice(b"\ndata: more\n\ndata: ok\n\n");
        for chunk in [big.len(), 7] {
            let chunks: Vec<&[u8]> = big.chunks(chunk).collect();
            let (items, _) = decode_all(&chunks);
            assert_eq!(
                items,
                vec![SseItem::TooLong, ev(None, None, "ok")],
                "chunk {chunk}"
            );
        }
    }

    /// Found by the `sse_framer` fuzz target: an over-long line dropped while unfinished used
    /// to leave its line break behind, which then read as the blank line ending the event, so
    /// the rest of the skipped event was dispatched.
    #[test]
    fn an_over_long_line_cut_by_chunking_keeps_its_event_skipped() {
        let mut first = b"data: ".to_vec();
        first.extend(std::iter::repeat_n(b'x', 300));
        let second = b"\ndata: tail of the big event\n\ndata: next\n\n";
        let expected = vec![SseItem::TooLong, ev(None, None, "next")];
        assert_eq!(decode_all(&[&first, second]).0, expected);
        let mut whole = first.clone();
        whole.extend_from_slice(second);
        assert_eq!(decode_all(&[&whole]).0, expected);
    }

    #[test]
    fn the_decoder_holds_no_more_than_the_cap() {
        let mut d = SseDecoder::with_max_event(100);
        let mut huge = b"data: ".to_vec();
        huge.extend(std::iter::repeat_n(b'y', 100_000));
        d.feed(&huge);
        assert!(d.buffered() <= 100, "buffered {}", d.buffered());
        for _ in 0..50 {
            d.feed(b"data: 0123456789\n");
            assert!(d.buffered() <= 100, "buffered {}", d.buffered());
        }
        d.feed(b"\ndata: after\n\n");
        assert_eq!(d.next_item(), Some(SseItem::TooLong));
        assert_eq!(d.next_item(), Some(ev(None, None, "after")));
        assert_eq!(d.next_item(), None);
        assert_eq!(SseDecoder::with_max_event(1).max_event(), MIN_MAX_EVENT);
    }

    #[test]
    fn comments_are_not_kept_or_counted() {
        let mut stream = b": ".to_vec();
        stream.extend(std::iter::repeat_n(b'c', 1000));
        stream.extend_from_slice(b"\ndata: ok\n\n");
        for chunk in [stream.len(), 7, 1] {
            let chunks: Vec<&[u8]> = stream.chunks(chunk).collect();
            assert_eq!(
                decode_all(&chunks).0,
                vec![ev(None, None, "ok")],
                "chunk {chunk}"
            );
        }
    }

    /// The spec: an empty `event` field means the default type, which MCP clients read as a
    /// message (a `Some("")` here used to make the HTTP client drop the message).
    #[test]
    fn an_empty_event_field_is_the_default_type() {
        let (items, _) =
            decode_all(&[b"event:\ndata: {}\n\nevent\ndata: 1\n\nevent: \ndata: 2\n\n"]);
        assert_eq!(
            items,
            vec![
                ev(None, None, "{}"),
                ev(None, None, "1"),
                ev(None, None, "2")
            ]
        );
    }

    #[test]
    fn ids_update_the_last_event_id_at_dispatch_and_an_empty_one_resets_it() {
        let (items, last) = decode_all(&[b"id: 7\ndata: a\n\nid: 8\n\n"]);
        assert_eq!(items, vec![ev(Some("7"), None, "a")]);
        assert_eq!(
            last.as_deref(),
            Some("8"),
            "an event without data still sets it"
        );
        let (items, last) = decode_all(&[b"id: 7\ndata: a\n\nid\ndata: b\n\n"]);
        assert_eq!(
            items,
            vec![ev(Some("7"), None, "a"), ev(Some(""), None, "b")]
        );
        assert_eq!(last, None);
        let (_, last) = decode_all(&[b"id: 7\ndata: a\n\nid: 9\ndata: unfinished\n"]);
        assert_eq!(
            last.as_deref(),
            Some("7"),
            "an unfinished event does not count"
        );
        let (items, last) = decode_all(&[b"id: 5\nid: a\0b\ndata: c\n\n"]);
        assert_eq!(
            items,
            vec![ev(Some("5"), None, "c")],
            "an id with NUL is ignored"
        );
        assert_eq!(last.as_deref(), Some("5"));
    }

    #[test]
    fn retry_takes_only_digits_that_fit() {
        let (items, _) = decode_all(&[
            b"retry: 10\nretry: -1\nretry: 1x\nretry:\nretry: 99999999999999999999999\nretry:7\n\n",
        ]);
        assert_eq!(items, vec![SseItem::Retry(10), SseItem::Retry(7)]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        let (items, _) = decode_all(&[b"data: a\xFFb\xE2\x82\ndata: \xF0\x9F\x98\x80\n\n"]);
        assert_eq!(items, vec![ev(None, None, "a\u{FFFD}b\u{FFFD}\n\u{1F600}")]);
    }

    #[test]
    fn encoder_round_trips_through_the_decoder() {
        let mut out = Vec::new();
        write_retry(&mut out, 250);
        write_event(&mut out, Some("s1-7"), None, "{\"jsonrpc\":\"2.0\"}");
        write_event(&mut out, None, Some("message"), "two\nlines");
        write_comment(&mut out, "ping\nping");
        write_event(&mut out, Some("bad\nid"), None, "");
        write_event(&mut out, Some("nul\0id"), Some(""), "cr\ronly\r\nand crlf");
        let (items, last) = decode_all(&[&out]);
        assert_eq!(
            items,
            vec![
                SseItem::Retry(250),
                ev(Some("s1-7"), None, "{\"jsonrpc\":\"2.0\"}"),
                ev(None, Some("message"), "two\nlines"),
                ev(Some("bad id"), None, ""),
                ev(Some("nul id"), None, "cr\nonly\nand crlf"),
            ]
        );
        assert_eq!(last.as_deref(), Some("nul id"));
    }
}
