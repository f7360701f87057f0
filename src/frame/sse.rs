//! Server-Sent Events framing (`text/event-stream`), as Streamable HTTP uses it.
//!
//! [`SseDecoder`] turns a byte stream of any chunking into [`SseEvent`]s: the `event`, `data`,
//! `id` and `retry` fields, multi-line data, comments, CR, LF and CRLF line endings and a leading
//! BOM, with a cap on how much one event may hold. [`write_event`] and friends encode.

/// The default cap on one event (its data plus field overhead): 16 MiB.
pub const DEFAULT_MAX_EVENT: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field (`None` means the default type, "message").
    pub event: Option<String>,
    /// The data lines, joined with `\n`.
    pub data: String,
    /// The `id` field, if this event set one.
    pub id: Option<String>,
}

/// Something to act on from an event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseItem {
    /// An event was dispatched.
    Event(SseEvent),
    /// A `retry` field set the reconnection delay, in milliseconds.
    Retry(u64),
    /// An event grew past the cap; its lines are skipped up to the next blank line.
    TooLong,
}

/// Decodes `text/event-stream` bytes.
///
/// Feed chunks with [`feed`](Self::feed) and collect items with [`next_item`](Self::next_item)
/// until it returns `None`. The decoder keeps the last event id (as the spec's "last event ID
/// buffer"), which is what a client sends back in `Last-Event-ID` when it reconnects.
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    pos: usize,
    started: bool,
    /// A CR ended the last line; a following LF belongs to it.
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    last_event_id: Option<String>,
    size: usize,
    max_event: usize,
    skipping: bool,
    pending: std::collections::VecDeque<SseItem>,
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

    /// A decoder whose events may hold at most `max_event` bytes.
    pub fn with_max_event(max_event: usize) -> Self {
        SseDecoder {
            buf: Vec::new(),
            pos: 0,
            started: false,
            after_cr: false,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            last_event_id: None,
            size: 0,
            max_event: max_event.max(64),
            skipping: false,
            pending: Default::default(),
        }
    }

    /// The id of the last event that carried one: send it as `Last-Event-ID` when reconnecting.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// Adds bytes from the stream. Complete lines are processed at once; an incomplete one is
    /// kept (within the cap).
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if !self.started {
            // A UTF-8 BOM may open the stream; it can arrive split across chunks.
            let have = self.buf.len() - self.pos;
            let probe: Vec<u8> = self.buf[self.pos..]
                .iter()
                .chain(bytes)
                .take(3)
                .copied()
                .collect();
            if probe.len() < 3 && b"\xEF\xBB\xBF".starts_with(&probe) {
                self.buf.extend_from_slice(bytes);
                return;
            }
            self.started = true;
            if probe == b"\xEF\xBB\xBF" {
                let from_buf = have.min(3);
                self.pos += from_buf;
                bytes = &bytes[3 - from_buf..];
            }
        }
        self.buf.extend_from_slice(bytes);
        self.process();
        if self.buf.len() - self.pos > self.max_event {
            // One line longer than the cap: drop it and skip to the end of the event.
            self.buf.clear();
            self.pos = 0;
            self.start_skipping();
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    fn start_skipping(&mut self) {
        if !self.skipping {
            self.pending.push_back(SseItem::TooLong);
        }
        self.skipping = true;
        self.reset_event();
    }

    fn reset_event(&mut self) {
        self.event = None;
        self.data.clear();
        self.has_data = false;
        self.id = None;
        self.size = 0;
    }

    fn process(&mut self) {
        loop {
            let rest = &self.buf[self.pos..];
            if self.after_cr {
                if rest.first() == Some(&b'\n') {
                    self.pos += 1;
                    self.after_cr = false;
                    continue;
                }
                if rest.is_empty() {
                    return;
                }
                self.after_cr = false;
            }
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                return;
            };
            let line = rest[..end].to_vec();
            self.after_cr = rest[end] == b'\r';
            self.pos += end + 1;
            self.line(&line);
        }
    }

    fn line(&mut self, line: &[u8]) {
        if line.is_empty() {
            if self.skipping {
                self.skipping = false;
                self.reset_event();
                return;
            }
            if let Some(id) = self.id.take() {
                self.last_event_id = Some(id.clone());
                self.id = Some(id);
            }
            if self.has_data {
                let event = SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                    id: self.id.take(),
                };
                self.pending.push_back(SseItem::Event(event));
            }
            self.reset_event();
            return;
        }
        if self.skipping {
            return;
        }
        self.size += line.len() + 1;
        if self.size > self.max_event {
            self.start_skipping();
            return;
        }
        if line[0] == b':' {
            return; // a comment
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"event" => self.event = Some(value.into_owned()),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            // An id with a NUL is ignored, as the spec says.
            b"id" if !value.contains('\0') => {
                self.id = Some(value.into_owned());
            }
            b"retry" => {
                if !value.is_empty()
                    && value.bytes().all(|b| b.is_ascii_digit())
                    && let Ok(ms) = value.parse()
                {
                    self.pending.push_back(SseItem::Retry(ms));
                }
            }
            _ => {}
        }
    }

    /// The next item decoded so far, if any.
    pub fn next_item(&mut self) -> Option<SseItem> {
        self.pending.pop_front()
    }
}

/// Appends one event: an optional `id`, an optional `event` name, and `data` split into one
/// `data:` line per line of text (so multi-line payloads survive), then the blank line.
pub fn write_event(out: &mut Vec<u8>, id: Option<&str>, event: Option<&str>, data: &str) {
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(sanitize(id).as_bytes());
        out.push(b'\n');
    }
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(sanitize(event).as_bytes());
        out.push(b'\n');
    }
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix('\r').unwrap_or(line).as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// Appends a `retry:` field (the client's reconnection delay, in milliseconds).
pub fn write_retry(out: &mut Vec<u8>, millis: u64) {
    out.extend_from_slice(b"retry: ");
    out.extend_from_slice(millis.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Appends a comment line (keeps idle connections alive).
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b": ");
    out.extend_from_slice(sanitize(text).as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Field values may not contain line breaks.
fn sanitize(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains(['\n', '\r']) {
        std::borrow::Cow::Owned(s.replace(['\n', '\r'], " "))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> (Vec<SseItem>, Option<String>) {
        let mut d = SseDecoder::with_max_event(256);
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c);
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

    #[test]
    fn encoder_round_trips_through_the_decoder() {
        let mut out = Vec::new();
        write_retry(&mut out, 250);
        write_event(&mut out, Some("s1-7"), None, "{\"jsonrpc\":\"2.0\"}");
        write_event(&mut out, None, Some("message"), "two\nlines");
        write_comment(&mut out, "ping\nping");
        write_event(&mut out, Some("bad\nid"), None, "");
        let (items, last) = decode_all(&[&out]);
        assert_eq!(
            items,
            vec![
                SseItem::Retry(250),
                ev(Some("s1-7"), None, "{\"jsonrpc\":\"2.0\"}"),
                ev(None, Some("message"), "two\nlines"),
                ev(Some("bad id"), None, ""),
            ]
        );
        assert_eq!(last.as_deref(), Some("bad id"));
    }
}
