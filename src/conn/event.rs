//! Events: what the application must see, stored so that views can borrow from the engine.

use std::collections::VecDeque;

use crate::jsonrpc::{Id, JsonStr, RawJson, Reason};
use crate::mcp::ProtocolVersion;

/// The id of one of our own requests, as returned by
/// [`Connection::request`](super::Connection::request). It is also the JSON-RPC id on the wire:
/// integers, allocated in increasing order and never reused on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub i64);

/// Why a message transport could not carry one of our requests or its answer, as the host
/// reports it with [`Connection::handle_failed_exchange`](super::Connection::handle_failed_exchange).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportFailure {
    /// The server answered with this HTTP status and no JSON-RPC answer.
    Status(u16),
    /// The connection failed, or closed before the answer.
    Disconnected,
    /// The answer's stream ended without the answer, and resuming it gave up.
    StreamEnded,
    /// A message of the response (the JSON body, or an SSE event) was larger than the
    /// connection's largest message ([`Limits::max_frame`](super::Limits::max_frame)), or the
    /// responses being read held more than
    /// [`HELD_BODY_FRAMES`](crate::http::HELD_BODY_FRAMES) of those together, unfinished.
    TooLarge,
}

impl std::fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportFailure::Status(s) => write!(f, "HTTP status {s} without an answer"),
            TransportFailure::Disconnected => f.write_str("the connection failed"),
            TransportFailure::StreamEnded => f.write_str("the stream ended without the answer"),
            TransportFailure::TooLarge => {
                f.write_str("the response (or those being read together) went past max_frame")
            }
        }
    }
}

/// The longest error message [`CloseReason::InitializeRejected`] keeps, in bytes: enough for
/// any sentence a person reads, and a peer cannot make a closed connection hold megabytes.
pub const REFUSAL_MESSAGE_MAX: usize = 1024;

/// Why the connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// [`close`](super::Connection::close) finished: every request answered, or the grace
    /// period ran out.
    Local,
    /// The transport reported end of input.
    Eof,
    /// Client: the server chose a protocol version we do not speak (carried here).
    UnsupportedVersion(String),
    /// Client: the server answered `initialize` (or, for a client of the stateless era,
    /// `server/discover`) with an error: its code and its message, which says why (cut to
    /// [`REFUSAL_MESSAGE_MAX`] bytes). Show the message to whoever started the client.
    InitializeRejected {
        /// The JSON-RPC error code.
        code: i64,
        /// The error's message, unescaped.
        message: String,
    },
    /// Client: the initialize result was malformed.
    InvalidInitializeResult,
    /// Client: no answer to `initialize` in time.
    InitializeTimedOut,
    /// The peer kept sending traffic that needs replies while not reading ours, past
    /// [`Limits::max_buffered_output`](super::Limits::max_buffered_output).
    PeerNotReading,
    /// Client: the transport could not carry `initialize` (or, when the client speaks only
    /// the stateless era, `server/discover`) or its answer.
    TransportFailed(TransportFailure),
    /// Client: the server refused our protocol version (-32022 to `initialize` or
    /// `server/discover`); `supported` is the JSON array of the versions it named (`[]` if
    /// none, or if what it named is not an array of strings of at most
    /// [`REFUSAL_MESSAGE_MAX`] bytes).
    VersionRefused {
        /// The server's `supported` list, as JSON text.
        supported: String,
    },
}

/// Something the peer did wrong. The engine has already answered as the spec prescribes
/// (an error reply where one is possible); this tells the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViolationKind {
    /// A frame that is not JSON; answered with -32700.
    Parse(Reason),
    /// JSON that is not a valid message; answered with -32600 when it could be a request.
    InvalidMessage(Reason),
    /// A frame over the size cap; skipped.
    FrameTooLong,
    /// A response whose id matches no request of ours in flight (never issued, already
    /// answered, or the right digits as the wrong type); dropped.
    UnknownResponse,
    /// A request reusing the id of one of its requests still in flight; answered with -32600.
    DuplicateRequestId,
    /// A message not allowed before initialization completes; requests answered with -32600,
    /// notifications dropped.
    BeforeInitialization,
    /// `initialize` on a connection that is already initialized; answered with -32600.
    AlreadyInitialized,
    /// A request for a method that does not exist in the negotiated version, goes the wrong
    /// way, or needs a capability we did not declare; answered with -32601.
    MethodNotAvailable,
    /// A notification the sender was not entitled to send (wrong version, direction or
    /// capability); dropped.
    NotificationNotAllowed,
    /// Parameters the engine reads were malformed (requests answered with -32602).
    InvalidParams,
    /// A batch where the protocol version has none; answered with -32600.
    BatchNotAllowed,
    /// More requests in flight than [`Limits::max_inbound_in_flight`](super::Limits); answered
    /// with an error.
    TooManyRequests,
    /// A 2026-07-28 request for a protocol version we do not support; answered with -32022.
    UnsupportedVersion,
    /// A message that does not belong to the era this connection is in (a response from a
    /// 2026-07-28 client, a request from a 2026-07-28 server, `initialize` after the stateless
    /// era began); answered where a request, dropped otherwise.
    WrongEra,
    /// A 2026-07-28 request that needs a client capability its `_meta` did not declare (the
    /// tasks methods without the tasks extension); answered with -32021 naming it.
    MissingClientCapability,
}

/// One thing that happened, from [`Connection::poll_event`](super::Connection::poll_event).
///
/// Borrowed views (`JsonStr`, `RawJson`, `Id`) point into the engine and stay valid until the
/// next call that takes the connection mutably. Each variant's doc says whether it is an edge
/// (fires once) or repeats.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event<'a> {
    // ---- lifecycle ----
    /// The handshake finished; requests may flow both ways. Edge, at most once.
    Ready {
        /// The negotiated version.
        version: ProtocolVersion,
    },
    /// The connection ended. Edge, always the last event; every command fails afterwards.
    Closed {
        /// Why.
        reason: &'a CloseReason,
    },
    // ---- from the peer ----
    /// A request from the peer. Answer it with [`respond`](super::Connection::respond) or
    /// [`respond_error`](super::Connection::respond_error). Once per request. A 2026-07-28
    /// `subscriptions/listen` comes only under
    /// [`Policy::review_listens`](super::Policy::review_listens): grant it with
    /// [`grant_listen`](super::Connection::grant_listen) or refuse it with `respond_error`.
    Request {
        /// Its id (keep it with [`OwnedId::from`](crate::jsonrpc::OwnedId)).
        id: Id<'a>,
        /// The method.
        method: JsonStr<'a>,
        /// The params object.
        params: Option<RawJson<'a>>,
    },
    /// A notification from the peer that the engine does not consume itself. Once per
    /// notification.
    Notification {
        /// The method.
        method: JsonStr<'a>,
        /// The params object.
        params: Option<RawJson<'a>>,
    },
    /// The peer cancelled one of its requests still in flight. Stop working on it: an answer
    /// given afterwards is not sent. Edge per request. Not for a 2026-07-28
    /// `subscriptions/listen` the engine granted itself, which never came as a request (see
    /// [`Policy::review_listens`](super::Policy::review_listens)).
    PeerCancelled {
        /// The cancelled request's id.
        id: Id<'a>,
        /// The peer's reason, if it gave one.
        reason: Option<JsonStr<'a>>,
    },
    // ---- our requests ----
    /// The result of one of our requests. Ends the request.
    Response {
        /// Which request.
        request: RequestId,
        /// The result.
        result: RawJson<'a>,
    },
    /// The error answer to one of our requests. Ends the request.
    Error {
        /// Which request.
        request: RequestId,
        /// The JSON-RPC error code.
        code: i64,
        /// The error message.
        message: JsonStr<'a>,
        /// The error data.
        data: Option<RawJson<'a>>,
    },
    /// Progress on one of our requests (one that asked for progress). Repeats.
    Progress {
        /// Which request.
        request: RequestId,
        /// Progress so far (increasing).
        progress: f64,
        /// The total, if known.
        total: Option<f64>,
        /// A human-readable message.
        message: Option<JsonStr<'a>>,
    },
    /// 2026-07-28: the server needs more input before it can answer one of our requests. Fulfil
    /// the input requests (elicitation, sampling, roots), then call
    /// [`retry`](super::Connection::retry) with the responses; `request_state` is echoed back
    /// for you. Ends the request (the retry is a new one).
    InputRequired {
        /// Which request.
        request: RequestId,
        /// The `inputRequests` object (keys chosen by the server, values request objects).
        input_requests: Option<RawJson<'a>>,
        /// The opaque `requestState`, if the server sent one.
        request_state: Option<JsonStr<'a>>,
    },
    /// 2026-07-28, tasks extension: the server answered one of our `tools/call` requests (sent
    /// with the extension declared in our capabilities) with a task handle instead of its
    /// result. Poll `tasks/get` with its `taskId` (at most every `pollIntervalMs`) until the
    /// task is terminal; its result comes inlined there. Ends the request.
    TaskCreated {
        /// Which request.
        request: RequestId,
        /// The `CreateTaskResult`: `taskId`, `status`, `createdAt`, `ttlMs`, … (the engine
        /// checked that the `Task` members are there and of their types; a malformed handle is
        /// [`Event::InvalidResponse`]).
        task: RawJson<'a>,
    },
    /// 2025-11-25: the server answered one of our requests with `-32042`: it needs the user to
    /// complete URL-mode elicitations first. Show each URL to the user (and open it only with
    /// their consent), then send the request again; the server may announce each one's end
    /// with [`Event::ElicitationComplete`]. Ends the request.
    UrlElicitationRequired {
        /// Which request.
        request: RequestId,
        /// The `elicitations` array: objects with `mode` `"url"`, `elicitationId`, `url` and
        /// `message` (checked).
        elicitations: RawJson<'a>,
    },
    /// 2025-11-25: the server says the out-of-band interaction of a URL-mode elicitation we
    /// know of (from an `elicitation/create` in URL mode, or a `-32042` answer) finished.
    /// Completions of unknown or already-completed ids are dropped, as the spec requires. Once
    /// per elicitation id.
    ElicitationComplete {
        /// The `elicitationId`.
        elicitation_id: JsonStr<'a>,
    },
    /// The peer answered one of our requests with something invalid (a frame that is not a
    /// valid JSON-RPC response but names the request's id, an answer over the frame size
    /// limit, a 2026-07-28 result with an unknown `resultType`, an "input required" result that
    /// is malformed or not allowed for the method, a task handle that is malformed or was not
    /// ours to get). Ends the request.
    InvalidResponse {
        /// Which request.
        request: RequestId,
    },
    /// One of our requests got no answer in time; the peer has been sent a cancellation,
    /// unless the output was full or the request was a 2025-11-25 task-augmented one (see
    /// [`Connection::cancel`](super::Connection::cancel)). Ends the request.
    TimedOut {
        /// Which request.
        request: RequestId,
    },
    /// The connection ended (or began its graceful close, for our own 2026-07-28
    /// `subscriptions/listen` streams, which the close cancels) before one of our requests was
    /// answered, or (2026-07-28, stdio) the server tore down one of our listen streams with
    /// `notifications/cancelled`: then listen again if its notifications are still wanted.
    /// Ends the request.
    Abandoned {
        /// Which request.
        request: RequestId,
    },
    /// The transport could not carry one of our requests or its answer (an HTTP error
    /// status, a failed connection, a stream that ended early), as the host reported with
    /// [`handle_failed_exchange`](super::Connection::handle_failed_exchange). Ends the request.
    Failed {
        /// Which request.
        request: RequestId,
        /// What went wrong.
        reason: TransportFailure,
    },
    /// The peer broke a rule; see [`ViolationKind`]. Repeats.
    Violation {
        /// What it did.
        kind: ViolationKind,
        /// The message's id, when it had one.
        id: Option<Id<'a>>,
        /// The message's method, when it had one.
        method: Option<JsonStr<'a>>,
    },
}

// ---- Storage ----------------------------------------------------------------------------

/// A string inside an event's copy of its frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    start: u32,
    len: u32,
    escaped: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum StoredId {
    Int(i64),
    Str(Span),
}

#[derive(Debug)]
pub(crate) enum Stored {
    Ready(ProtocolVersion),
    Closed(CloseReason),
    Request {
        id: StoredId,
        method: Span,
        params: Option<Span>,
    },
    Notification {
        method: Span,
        params: Option<Span>,
    },
    PeerCancelled {
        id: StoredId,
        reason: Option<Span>,
    },
    Response {
        request: RequestId,
        result: Span,
    },
    Error {
        request: RequestId,
        code: i64,
        message: Span,
        data: Option<Span>,
    },
    Progress {
        request: RequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<Span>,
    },
    InputRequired {
        request: RequestId,
        input_requests: Option<Span>,
        request_state: Option<Span>,
    },
    UrlElicitationRequired {
        request: RequestId,
        elicitations: Span,
    },
    TaskCreated {
        request: RequestId,
        task: Span,
    },
    ElicitationComplete(Span),
    InvalidResponse(RequestId),
    TimedOut(RequestId),
    Abandoned(RequestId),
    Failed(RequestId, TransportFailure),
    Violation {
        kind: ViolationKind,
        id: Option<StoredId>,
        method: Option<Span>,
    },
}

impl Stored {
    /// Whether this event may be dropped when the queue is full (peer notifications only:
    /// everything else resolves a request or changes state).
    fn droppable(&self) -> bool {
        matches!(
            self,
            Stored::Notification { .. } | Stored::Progress { .. } | Stored::Violation { .. }
        )
    }
}

#[derive(Debug)]
struct Entry {
    stored: Stored,
    /// Where the event's copy of its frame lies in the queue's arena.
    frame: FrameCopy,
}

/// A frame copy in the arena, by logical offset (see [`EventQueue::origin`]). Events that
/// borrow nothing get an empty one at the arena's end, so that the entries of the queue always
/// have non-decreasing starts.
#[derive(Clone, Copy, Debug)]
struct FrameCopy {
    start: usize,
    len: usize,
}

/// A frame copied into the event queue, for building spans.
pub(crate) struct Capture<'q> {
    queue: &'q mut EventQueue,
    frame: FrameCopy,
    origin: usize,
}

impl Capture<'_> {
    fn offset(&self, s: &str) -> u32 {
        (s.as_ptr() as usize).wrapping_sub(self.origin) as u32
    }

    /// The span of `s`, which must lie inside the captured frame.
    pub(crate) fn str(&self, s: JsonStr<'_>) -> Span {
        Span {
            start: self.offset(s.raw()),
            len: s.raw().len() as u32,
            escaped: s.has_escapes(),
        }
    }

    pub(crate) fn raw(&self, r: RawJson<'_>) -> Span {
        Span {
            start: self.offset(r.get()),
            len: r.get().len() as u32,
            escaped: false,
        }
    }

    pub(crate) fn id(&self, id: Id<'_>) -> StoredId {
        match id {
            Id::Int(n) => StoredId::Int(n),
            Id::Str(s) => StoredId::Str(self.str(s)),
        }
    }

    /// Queues the event with its frame copy.
    pub(crate) fn push(self, stored: Stored) {
        self.queue.push_entry(Entry {
            stored,
            frame: self.frame,
        });
    }
}

/// Below this many bytes of consumed frames at the front of the arena, they are not cut off
/// while events are still queued behind them.
const ARENA_RECLAIM: usize = 64 * 1024;

/// The queue. The frames that queued events borrow from are copied back to back into one
/// arena, oldest first, so a burst of events costs no allocation per event; the arena is
/// emptied whenever the queue is, and its consumed front is cut off when it grows large.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    queue: VecDeque<Entry>,
    current: Option<Entry>,
    /// The frame copies, always UTF-8 (only frames that pass the UTF-8 check are copied).
    arena: String,
    /// The logical offset of the arena's first byte: it grows as consumed copies are cut off.
    origin: usize,
    pub(crate) limit: usize,
    /// Bytes of frame copies the queued events may hold before peer notifications are
    /// dropped: a count alone let a peer queue `limit` frames of the largest size.
    byte_limit: usize,
    pub(crate) dropped: u64,
}

impl EventQueue {
    /// Events waiting to be handed out.
    pub(crate) fn pending(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn new(limit: usize, byte_limit: usize) -> Self {
        EventQueue {
            limit: limit.max(16),
            byte_limit,
            ..Default::default()
        }
    }

    /// Takes over the queue and arena of `old`, emptied, when this queue has none yet (a
    /// fresh connection reusing a finished one's memory). No event of `old` stays readable.
    pub(crate) fn adopt_buffers(&mut self, old: &mut EventQueue) {
        old.queue.clear();
        old.arena.clear();
        if self.queue.capacity() == 0 && self.arena.capacity() == 0 && self.current.is_none() {
            std::mem::swap(&mut self.queue, &mut old.queue);
            std::mem::swap(&mut self.arena, &mut old.arena);
        }
    }

    /// The bytes its queue and arena hold on to.
    pub(crate) fn capacity(&self) -> usize {
        self.queue.capacity() * size_of::<Entry>() + self.arena.capacity()
    }

    /// The logical offset one past the arena's last byte.
    fn end(&self) -> usize {
        self.origin + self.arena.len()
    }

    fn push_entry(&mut self, entry: Entry) {
        // (The entry's own copy is already in the arena; one event always fits.)
        let oldest = self.current.as_ref().or(self.queue.front());
        let held = oldest.map_or(0, |e| self.end() - e.frame.start);
        let full = self.queue.len() >= self.limit || held > self.byte_limit;
        if full && entry.stored.droppable() {
            self.dropped += 1;
            // Its copy, if any, is the arena's last: take it back.
            if entry.frame.len > 0 && entry.frame.start + entry.frame.len == self.end() {
                self.arena.truncate(entry.frame.start - self.origin);
            }
            return;
        }
        self.queue.push_back(entry);
    }

    /// Queues an event that borrows nothing.
    pub(crate) fn push(&mut self, stored: Stored) {
        let frame = FrameCopy {
            start: self.end(),
            len: 0,
        };
        self.push_entry(Entry { stored, frame });
    }

    /// Copies `frame` so that views into it can be stored with the next event. `frame` must be
    /// the text the views were decoded from (the decoder hands it out once it has checked the
    /// frame's UTF-8, so it is not checked again here).
    pub(crate) fn capture(&mut self, frame: &str) -> Capture<'_> {
        self.reclaim();
        let start = self.end();
        self.arena.push_str(frame);
        Capture {
            queue: self,
            frame: FrameCopy {
                start,
                len: frame.len(),
            },
            origin: frame.as_ptr() as usize,
        }
    }

    /// [`capture`](Self::capture) for a frame the decoder rejected, which may not be UTF-8:
    /// then nothing is copied, and views into it come out empty rather than wrong.
    pub(crate) fn capture_checked(&mut self, frame: &[u8]) -> Capture<'_> {
        match crate::jsonrpc::utf8::validate(frame) {
            // SAFETY: `frame` was just checked to be UTF-8 by the validator the decoder relies
            // on; `utf8.rs` tests it against the standard library's.
            Ok(()) => self.capture(unsafe { std::str::from_utf8_unchecked(frame) }),
            Err(_) => {
                self.reclaim();
                let start = self.end();
                Capture {
                    queue: self,
                    frame: FrameCopy { start, len: 0 },
                    origin: frame.as_ptr() as usize,
                }
            }
        }
    }

    /// Drops the arena's copies that no queued event borrows any more: all of them when the
    /// queue is empty (the arena then keeps at most
    /// [`KEEP_WHEN_EMPTY`](crate::frame::KEEP_WHEN_EMPTY) of capacity), else the front once it
    /// is large and at least half the arena.
    fn reclaim(&mut self) {
        let oldest = self.current.as_ref().or(self.queue.front());
        match oldest.map(|e| e.frame.start) {
            None => {
                self.origin = self.end();
                crate::frame::empty_text(&mut self.arena);
            }
            Some(start) => {
                let dead = start.saturating_sub(self.origin);
                if dead >= ARENA_RECLAIM && dead >= self.arena.len() / 2 {
                    // `dead` ends a whole frame copy, so it is a character boundary.
                    self.arena.drain(..dead);
                    self.origin = start;
                }
            }
        }
    }

    /// Retires the event handed out last and hands out the next one.
    pub(crate) fn next(&mut self) -> Option<Event<'_>> {
        self.current = self.queue.pop_front();
        if self.current.is_none() {
            // Drained: the copies are dead, and a huge frame's capacity goes back now rather
            // than at the next frame, which may be long in coming.
            self.reclaim();
            return None;
        }
        let entry = self.current.as_ref()?;
        Some(view(&self.arena, self.origin, entry))
    }

    /// The event handed out last, again.
    pub(crate) fn current(&self) -> Option<Event<'_>> {
        self.current
            .as_ref()
            .map(|entry| view(&self.arena, self.origin, entry))
    }

    /// Forgets the event handed out last (the caller mutated the connection, so its views are
    /// dead anyway) without handing out another.
    pub(crate) fn retire_current(&mut self) {
        self.current = None;
    }
}

fn text(frame: &str, span: Span) -> JsonStr<'_> {
    // The span was taken from a validated view of this very frame.
    let s = frame
        .get(span.start as usize..(span.start + span.len) as usize)
        .unwrap_or("");
    JsonStr::validated(s, span.escaped)
}

fn raw(frame: &str, span: Span) -> RawJson<'_> {
    RawJson::validated(text(frame, span).raw())
}

fn id(frame: &str, id: StoredId) -> Id<'_> {
    match id {
        StoredId::Int(n) => Id::Int(n),
        StoredId::Str(span) => Id::Str(text(frame, span)),
    }
}

fn view<'a>(arena: &'a str, origin: usize, entry: &'a Entry) -> Event<'a> {
    let at = entry.frame.start.wrapping_sub(origin);
    let f = at
        .checked_add(entry.frame.len)
        .and_then(|end| arena.get(at..end))
        .unwrap_or("");
    match &entry.stored {
        Stored::Ready(version) => Event::Ready { version: *version },
        Stored::Closed(reason) => Event::Closed { reason },
        Stored::Request {
            id: i,
            method,
            params,
        } => Event::Request {
            id: id(f, *i),
            method: text(f, *method),
            params: params.map(|p| raw(f, p)),
        },
        Stored::Notification { method, params } => Event::Notification {
            method: text(f, *method),
            params: params.map(|p| raw(f, p)),
        },
        Stored::PeerCancelled { id: i, reason } => Event::PeerCancelled {
            id: id(f, *i),
            reason: reason.map(|r| text(f, r)),
        },
        Stored::Response { request, result } => Event::Response {
            request: *request,
            result: raw(f, *result),
        },
        Stored::Error {
            request,
            code,
            message,
            data,
        } => Event::Error {
            request: *request,
            code: *code,
            message: text(f, *message),
            data: data.map(|d| raw(f, d)),
        },
        Stored::Progress {
            request,
            progress,
            total,
            message,
        } => Event::Progress {
            request: *request,
            progress: *progress,
            total: *total,
            message: message.map(|m| text(f, m)),
        },
        Stored::InputRequired {
            request,
            input_requests,
            request_state,
        } => Event::InputRequired {
            request: *request,
            input_requests: input_requests.map(|r| raw(f, r)),
            request_state: request_state.map(|s| text(f, s)),
        },
        Stored::UrlElicitationRequired {
            request,
            elicitations,
        } => Event::UrlElicitationRequired {
            request: *request,
            elicitations: raw(f, *elicitations),
        },
        Stored::TaskCreated { request, task } => Event::TaskCreated {
            request: *request,
            task: raw(f, *task),
        },
        Stored::ElicitationComplete(id) => Event::ElicitationComplete {
            elicitation_id: text(f, *id),
        },
        Stored::InvalidResponse(request) => Event::InvalidResponse { request: *request },
        Stored::TimedOut(request) => Event::TimedOut { request: *request },
        Stored::Abandoned(request) => Event::Abandoned { request: *request },
        Stored::Failed(request, reason) => Event::Failed {
            request: *request,
            reason: *reason,
        },
        Stored::Violation {
            kind,
            id: i,
            method,
        } => Event::Violation {
            kind: *kind,
            id: i.map(|i| id(f, i)),
            method: method.map(|m| text(f, m)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(k: usize) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{k},"result":{{"n":{k},"pad":"{}"}}}}"#,
            "x".repeat(90)
        )
    }

    /// Queues the answer in `text` to request `k`.
    fn push_answer(q: &mut EventQueue, k: usize, text: &str) {
        let start = text.find(r#"{"n""#).expect("a result");
        let result = RawJson::new(&text[start..text.len() - 1]).expect("valid JSON");
        let cap = q.capture(text);
        let span = cap.raw(result);
        cap.push(Stored::Response {
            request: RequestId(k as i64),
            result: span,
        });
    }

    fn expect_answer(q: &mut EventQueue, k: usize) {
        match q.next() {
            Some(Event::Response { request, result }) => {
                assert_eq!(request, RequestId(k as i64));
                assert!(result.get().starts_with(&format!(r#"{{"n":{k},"#)));
            }
            other => panic!("expected the answer to {k}, got {other:?}"),
        }
    }

    #[test]
    fn views_survive_later_pushes_and_the_arena_empties_with_the_queue() {
        let mut q = EventQueue::new(4096, usize::MAX);
        for k in 0..500 {
            push_answer(&mut q, k, &frame(k));
        }
        q.push(Stored::TimedOut(RequestId(9999)));
        for k in 0..500 {
            expect_answer(&mut q, k);
        }
        assert!(matches!(q.next(), Some(Event::TimedOut { .. })));
        assert!(q.next().is_none());
        // The next capture finds nothing queued and starts the arena over.
        push_answer(&mut q, 7, &frame(7));
        assert_eq!(q.arena.len(), frame(7).len());
        expect_answer(&mut q, 7);
    }

    #[test]
    fn a_consumer_that_lags_by_one_event_keeps_the_arena_bounded() {
        let mut q = EventQueue::new(4096, usize::MAX);
        push_answer(&mut q, 0, &frame(0));
        let mut high_water = 0;
        for k in 1..20_000 {
            // One more queued, one handed out: one event always waits.
            push_answer(&mut q, k, &frame(k));
            expect_answer(&mut q, k - 1);
            high_water = high_water.max(q.arena.len());
        }
        assert!(
            high_water <= 2 * ARENA_RECLAIM + 2 * frame(0).len(),
            "arena grew to {high_water} bytes"
        );
    }

    #[test]
    fn a_dropped_notification_takes_its_copy_back() {
        let mut q = EventQueue::new(16, usize::MAX);
        for k in 0..16 {
            push_answer(&mut q, k, &frame(k));
        }
        let before = q.arena.len();
        let text = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
        let method = JsonStr::from_raw("notifications/message").expect("a string body");
        let cap = q.capture(text);
        // The span is never read: the event is dropped, the queue being full.
        let span = Span {
            start: 0,
            len: method.raw().len() as u32,
            escaped: false,
        };
        cap.push(Stored::Notification {
            method: span,
            params: None,
        });
        assert_eq!(q.dropped, 1);
        assert_eq!(q.arena.len(), before);
        for k in 0..16 {
            expect_answer(&mut q, k);
        }
    }
}
