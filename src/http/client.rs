//! The client role of Streamable HTTP: what to send, and how to read what comes back.
//!
//! Each outgoing message is one POST. [`request_headers`] gives its headers for the era in
//! force; [`classify`] says what a response means; [`StreamReader`] turns an SSE body into
//! messages for [`Connection::handle_frame`](crate::Connection::handle_frame) and remembers the
//! last event id and `retry` for reconnecting with `Last-Event-ID`.

use std::time::Duration;

use crate::frame::sse::{SseDecoder, SseItem};
use crate::jsonrpc::{Decoded, Decoder, Message};
use crate::mcp::{Era, ProtocolVersion};

/// The most body bytes the SSE decoder takes before the events it made are handed out.
const FEED_PIECE: usize = 4096;

/// The headers for POSTing `message` (one encoded JSON-RPC message).
///
/// Always `Content-Type` and `Accept` (both JSON and SSE); `MCP-Protocol-Version` once a
/// version is known; `Mcp-Session-Id` in a session; and in 2026-07-28 `Mcp-Method`, plus
/// `Mcp-Name` for `tools/call`, `prompts/get`, `resources/read` and the tasks methods
/// (`tasks/get`, `tasks/update`, `tasks/cancel`: the `taskId`), as `=?base64?…?=` when the
/// value is not header-safe. No value ever holds a control character: a method name
/// with one gets no `Mcp-Method` (the server then refuses the request).
pub fn request_headers(
    message: &[u8],
    version: Option<ProtocolVersion>,
    session: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
    ];
    if let Some(v) = version {
        h.push(("MCP-Protocol-Version", v.as_str().to_owned()));
    }
    if let Some(s) = session {
        h.push(("Mcp-Session-Id", s.to_owned()));
    }
    if version.is_some_and(|v| v.era() == Era::Modern)
        && let Ok(Decoded::Single(Message::Request(r))) = Decoder::default().decode(message)
    {
        let method = r.method.to_str().into_owned();
        let key = match method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
            _ => None,
        };
        if let Some(key) = key
            && let Some(value) = r.params.and_then(|p| p.unique_str(key))
        {
            h.push(("Mcp-Name", super::headers::encode_value(&value.to_str())));
        }
        // A method that is no field value as it is (a control character, a space at either
        // end) has no header form (the spec gives `Mcp-Method` no encoding): it goes without
        // the header, and the server refuses the request.
        if super::headers::is_field_value(&method) {
            h.push(("Mcp-Method", method));
        }
    }
    h
}

/// What an HTTP response to a POST (or GET) means, for a host that drives a [`Connection`]
/// over HTTP itself; [`HttpClient`](super::HttpClient) does all of this (and resumes streams,
/// retries refusals) for you.
///
/// [`Connection`]: crate::Connection
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseKind {
    /// 202: a notification or response was accepted; nothing to read. To a POST that carried
    /// requests it means no answer will come: those requests have failed.
    Accepted,
    /// A JSON body holding one message (or a batch): feed it to the connection.
    Json,
    /// An SSE body: read it with a [`StreamReader`].
    EventStream,
    /// 404 on a request that carried a session: the session is gone; start a new one with
    /// `initialize`.
    SessionExpired,
    /// 405 on a GET: the server offers no standalone stream.
    NoStandaloneStream,
    /// Any other status; a JSON-RPC error body, if present, may say why.
    Failed(u16),
}

/// Classifies a response from its status and `Content-Type` (the media type before any
/// `;`, compared ignoring case): only a 200 carries a body to read.
pub fn classify(
    status: u16,
    content_type: Option<&str>,
    had_session: bool,
    was_get: bool,
) -> ResponseKind {
    let media = content_type
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    match status {
        202 => ResponseKind::Accepted,
        404 if had_session => ResponseKind::SessionExpired,
        405 if was_get => ResponseKind::NoStandaloneStream,
        200 if media.eq_ignore_ascii_case("text/event-stream") => ResponseKind::EventStream,
        200 if media.eq_ignore_ascii_case("application/json") => ResponseKind::Json,
        s => ResponseKind::Failed(s),
    }
}

/// The longest SSE event id a client resumes from, in bytes (see
/// [`StreamReader::last_event_id`]): servers' ids are numbers, UUIDs or short tokens, and a
/// request head of many kilobytes is refused by most servers anyway.
pub const MAX_EVENT_ID: usize = 1024;

/// The longest `Mcp-Session-Id` a client adopts, in bytes: servers' ids are UUIDs or signed
/// tokens, well under it. The client sends the id back with every request and keeps a copy
/// in each request it has out, so a server handing out megabytes would have it hold and send
/// megabytes per request; a longer id is ignored as if none had come.
pub const MAX_SESSION_ID: usize = 4096;

/// Reads an SSE response body: messages out, resumption state kept.
#[derive(Debug, Default)]
pub struct StreamReader {
    sse: SseDecoder,
    retry: Option<Duration>,
    /// Events dispatched so far (messages or not), for telling a stream that moved on.
    events: u64,
    /// The id sent as `Last-Event-ID` on the reconnection now being read, until its first
    /// event: a server that replays that very event (which the client already had) is not
    /// believed twice.
    resumed_from: Option<String>,
    /// Events dropped for being over the cap.
    too_long: u64,
    /// The longest message taken (`None`: only the decoder's cap on events).
    max_message: Option<usize>,
}

impl StreamReader {
    /// A reader for a new stream, taking events of up to 16 MiB.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reader for a new stream whose messages may be `max_message` bytes long (the
    /// connection's [`max_frame`](crate::conn::Limits::max_frame)): an event holding a
    /// longer one is dropped and counted ([`too_long`](Self::too_long)).
    pub fn with_max_message(max_message: usize) -> Self {
        StreamReader {
            // The event's fields (`data: `, line ends, its id) come on top of the message.
            sse: SseDecoder::with_max_event(max_message.saturating_add(4096)),
            max_message: Some(max_message),
            ..Self::default()
        }
    }

    /// How many events were dropped for being over the cap. A client fails the requests the
    /// stream carries once one is: resuming would only bring the same event again.
    pub fn too_long(&self) -> u64 {
        self.too_long
    }

    /// The bytes it holds of an event not yet complete.
    pub(crate) fn buffered(&self) -> usize {
        self.sse.buffered()
    }

    /// How many events (priming ones included) the reader has dispatched.
    pub(crate) fn events_seen(&self) -> u64 {
        self.events
    }

    /// Feeds body bytes; calls `on_message` with the data of each message event (priming
    /// events with empty data, and events of another type, are skipped). Data that is not
    /// valid JSON is passed on too: the decoder it goes to refuses it with its own limits,
    /// and says so, where dropping it here would lose an answer without a word.
    pub fn feed(&mut self, bytes: &[u8], mut on_message: impl FnMut(&[u8])) {
        // In pieces, each drained before the next: a chunk of many tiny events (`data\n\n`
        // is 6 bytes, an event of its own) would otherwise queue them all at once, at many
        // times the chunk's size.
        for piece in bytes.chunks(FEED_PIECE) {
            self.feed_piece(piece, &mut on_message);
        }
    }

    /// [`feed`](Self::feed) for one piece of at most [`FEED_PIECE`] bytes.
    fn feed_piece(&mut self, bytes: &[u8], on_message: &mut impl FnMut(&[u8])) {
        self.sse.feed(bytes);
        while let Some(item) = self.sse.next_item() {
            match item {
                SseItem::Event(e) => {
                    let resumed_from = self.resumed_from.take();
                    if resumed_from.is_some() && e.id == resumed_from {
                        // Already delivered before the reconnection: no progress (a server
                        // that replays only it, and closes, would reset the attempts for
                        // ever).
                        continue;
                    }
                    self.events += 1;
                    let is_message = e.event.as_deref().is_none_or(|t| t == "message");
                    if self.max_message.is_some_and(|max| e.data.len() > max) {
                        self.too_long += 1;
                    } else if is_message && !e.data.trim().is_empty() {
                        on_message(e.data.as_bytes());
                    }
                }
                SseItem::Retry(ms) => self.retry = Some(Duration::from_millis(ms)),
                SseItem::TooLong => self.too_long += 1,
            }
        }
        if self
            .sse
            .last_event_id()
            .is_some_and(|id| id.len() > MAX_EVENT_ID)
        {
            // No id to resume from (see `last_event_id`), and not kept: it may be as long as
            // an event.
            self.sse.set_last_event_id(None);
        }
    }

    /// The id to send as `Last-Event-ID` when reconnecting: that of the last event dispatched
    /// whole (an event cut off by a dropped connection does not count, since its id line may
    /// have arrived without the rest), even one without data; `None` before any id and after
    /// an empty `id` field. An id no HTTP header can carry as it is counts as none, and the
    /// stream cannot be resumed from it: one with control characters, or with a space or tab
    /// at either end (SSE allows both; a receiver strips the second), or one longer than
    /// [`MAX_EVENT_ID`] bytes (SSE allows any length; a server sending megabytes had the
    /// client send them back in a header, a copy at each step on the way).
    pub fn last_event_id(&self) -> Option<&str> {
        (self.sse.last_event_id())
            .filter(|id| id.len() <= MAX_EVENT_ID && super::headers::is_field_value(id))
    }

    /// The old connection is gone and a new one (the `Last-Event-ID` GET) begins: an event cut
    /// off mid-way is discarded (the server replays it whole), while the last event id and
    /// `retry` are kept. If the new connection's first event is the one named in
    /// `Last-Event-ID` (a server that replays from it, not after it), it is skipped.
    pub fn reconnected(&mut self) {
        let mut fresh = SseDecoder::with_max_event(self.sse.max_event());
        fresh.set_last_event_id(self.last_event_id());
        self.resumed_from = self.last_event_id().map(str::to_owned);
        self.sse = fresh;
    }

    /// How long to wait before reconnecting, if the server said (`retry`). The client must
    /// respect it.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// The headers of the GET that resumes this stream.
    pub fn resume_headers(
        &self,
        version: Option<ProtocolVersion>,
        session: Option<&str>,
    ) -> Vec<(&'static str, String)> {
        let mut h = vec![("Accept", "text/event-stream".to_owned())];
        if let Some(v) = version {
            h.push(("MCP-Protocol-Version", v.as_str().to_owned()));
        }
        if let Some(s) = session {
            h.push(("Mcp-Session-Id", s.to_owned()));
        }
        if let Some(id) = self.last_event_id() {
            h.push(("Last-Event-ID", id.to_owned()));
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_id_means_no_last_event_id_header() {
        let mut reader = StreamReader::new();
        let mut seen = Vec::new();
        reader.feed(
            b"id: 7\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\n",
            |m| seen.push(m.to_vec()),
        );
        assert_eq!(seen.len(), 1);
        assert_eq!(reader.last_event_id(), Some("7"));
        let has_header = |r: &StreamReader| {
            r.resume_headers(None, None)
                .iter()
                .any(|(name, _)| *name == "Last-Event-ID")
        };
        assert!(has_header(&reader));
        reader.feed(
            b"id\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\n",
            |m| seen.push(m.to_vec()),
        );
        assert_eq!(seen.len(), 2);
        assert_eq!(reader.last_event_id(), None);
        assert!(!has_header(&reader));
        // An event without an id field keeps the last one.
        reader.feed(
            b"id: 9\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\n",
            |_| {},
        );
        assert_eq!(reader.last_event_id(), Some("9"));
        // A reconnection keeps it; an event cut off by the drop does not count.
        reader.feed(b"id: 10\ndata: {\"jsonrpc\"", |_| {});
        reader.reconnected();
        assert_eq!(reader.last_event_id(), Some("9"));
        reader.feed(b": primed\n\n", |_| {});
        assert_eq!(reader.last_event_id(), Some("9"));
    }

    /// An id longer than `MAX_EVENT_ID` is no id to resume from: a hostile server's 15 MiB
    /// id came back as a 15 MiB `Last-Event-ID` header (found by an audit of the clients).
    #[test]
    fn an_id_too_long_for_a_header_is_not_resumed_from() {
        let mut reader = StreamReader::new();
        let event =
            |id: &str| format!("id: {id}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"m\"}}\n\n");
        let longest = "7".repeat(MAX_EVENT_ID);
        reader.feed(event(&longest).as_bytes(), |_| {});
        assert_eq!(reader.last_event_id(), Some(longest.as_str()));
        let over = "7".repeat(MAX_EVENT_ID + 1);
        reader.feed(event(&over).as_bytes(), |_| {});
        assert_eq!(reader.last_event_id(), None);
        assert_eq!(reader.sse.last_event_id(), None, "nor kept");
        assert!(
            reader
                .resume_headers(None, None)
                .iter()
                .all(|(name, _)| *name != "Last-Event-ID")
        );
        reader.reconnected();
        assert_eq!(reader.last_event_id(), None, "nor after a reconnection");
    }
}
