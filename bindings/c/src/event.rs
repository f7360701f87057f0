//! Events as a tagged `#[repr(C)]` struct, and the views inside it.

use std::ffi::c_char;
use std::fmt::Write as _;
use std::ptr;

use super::boundary::chars_out;
use mcpwire::conn::{CloseReason, Event, TransportFailure, ViolationKind};
use mcpwire::jsonrpc::{Id, JsonStr, RawJson, Reason};

// ---- Views --------------------------------------------------------------------------------

/// A view of text owned by someone else: `len` bytes at `ptr`, UTF-8, not NUL-terminated.
///
/// `ptr == NULL` (with `len == 0`) means "absent"; text that is present but empty has a
/// non-NULL `ptr`. When the library fills one in, the text belongs to the library and lives
/// as long as the call that produced it says (for events: until the next call that takes the
/// connection handle non-`const`). When you pass one in, it is read during the call only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_str {
    /// The first byte, or NULL when absent.
    pub ptr: *const c_char,
    /// The number of bytes.
    pub len: usize,
}

impl mcpw_str {
    /// Absent.
    pub(crate) const NONE: mcpw_str = mcpw_str {
        ptr: ptr::null(),
        len: 0,
    };

    /// A view of `text`.
    pub(crate) fn of(text: &str) -> mcpw_str {
        mcpw_str {
            ptr: chars_out(text),
            len: text.len(),
        }
    }

    pub(crate) fn of_opt(text: Option<&str>) -> mcpw_str {
        text.map_or(mcpw_str::NONE, mcpw_str::of)
    }

    /// Whether the view is absent.
    pub fn is_none(&self) -> bool {
        self.ptr.is_null()
    }
}

/// The kinds of `mcpw_id`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_id_kind {
    /// No id (an event that carries none).
    MCPW_ID_NONE = 0,
    /// An integer id, in `integer`.
    MCPW_ID_INT = 1,
    /// A string id, in `string`.
    MCPW_ID_STRING = 2,
}

/// A JSON-RPC request id of the peer's: an integer or a string, which are never equal to each
/// other (`7` is not `"7"`).
///
/// A string id is given in its wire form: the exact bytes between the quotes, escapes and
/// all. Pass it back unchanged to answer the request; an id you build yourself must be valid
/// JSON string text (no raw `"`, `\` only as an escape, no control characters).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_id {
    /// One of `mcpw_id_kind` (kept as a plain integer because C writes it).
    pub kind: u32,
    /// The id when `kind` is `MCPW_ID_INT` (not read otherwise: it may be left unset).
    pub integer: i64,
    /// The id when `kind` is `MCPW_ID_STRING` (not read otherwise: it may be left unset).
    pub string: mcpw_str,
}

impl mcpw_id {
    /// No id.
    pub(crate) const NONE: mcpw_id = mcpw_id {
        kind: mcpw_id_kind::MCPW_ID_NONE as u32,
        integer: 0,
        string: mcpw_str::NONE,
    };

    pub(crate) fn of(id: Id<'_>) -> mcpw_id {
        match id {
            Id::Int(n) => mcpw_id {
                kind: mcpw_id_kind::MCPW_ID_INT as u32,
                integer: n,
                string: mcpw_str::NONE,
            },
            Id::Str(s) => mcpw_id {
                kind: mcpw_id_kind::MCPW_ID_STRING as u32,
                integer: 0,
                string: mcpw_str::of(s.raw()),
            },
        }
    }

    fn of_opt(id: Option<Id<'_>>) -> mcpw_id {
        id.map_or(mcpw_id::NONE, mcpw_id::of)
    }
}

// ---- Codes carried by events -------------------------------------------------------------

/// What an `mcpw_event` reports. Numbers are grouped (lifecycle 1-19, from the peer 20-39,
/// our requests 40-59, the peer's mistakes 60-79) with room for kinds added later; treat a
/// kind you do not know as informational and carry on.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_event_kind {
    /// Nothing happened: the queue is empty. Stop polling.
    MCPW_EVENT_NONE = 0,
    /// Lifecycle: the handshake finished; requests may flow both ways. Fields: `version`.
    /// Fires at most once.
    MCPW_EVENT_READY = 1,
    /// Lifecycle: the connection ended. Fields: `close_reason`, plus `code` and `version` as
    /// each `mcpw_close_reason` says (`MCPW_CLOSE_INITIALIZE_REJECTED`,
    /// `MCPW_CLOSE_UNSUPPORTED_VERSION`, `MCPW_CLOSE_TRANSPORT_FAILED`).
    /// Always the last event; every command fails with `MCPW_ERR_CLOSED` afterwards.
    MCPW_EVENT_CLOSED = 2,
    /// From the peer: a request. Fields: `id`, `method`, `params` (or absent). Answer it with
    /// `mcpw_conn_respond` or `mcpw_conn_respond_error`, now or later (keep a copy of the id).
    MCPW_EVENT_REQUEST = 20,
    /// From the peer: a notification the engine does not consume itself. Fields: `method`,
    /// `params` (or absent).
    MCPW_EVENT_NOTIFICATION = 21,
    /// From the peer: it cancelled one of its requests. Fields: `id`, `reason` (or absent).
    /// Stop working on it; an answer given afterwards is not sent.
    MCPW_EVENT_PEER_CANCELLED = 22,
    /// From the peer, 2025-11-25: the out-of-band interaction of a URL-mode elicitation we
    /// know of (from an `elicitation/create` in URL mode, or `MCPW_EVENT_URL_ELICITATION_REQUIRED`)
    /// finished. Fields: `message`, the `elicitationId` (decoded text). Once per elicitation id;
    /// completions of unknown or already-completed ids are dropped
    /// (`mcpw_stats.ignored_elicitation_completions`).
    MCPW_EVENT_ELICITATION_COMPLETE = 23,
    /// Our request: its result. Fields: `request`, `result`. Ends the request.
    MCPW_EVENT_RESPONSE = 40,
    /// Our request: its error answer. Fields: `request`, `code`, `message`, `data` (or
    /// absent). Ends the request.
    MCPW_EVENT_ERROR = 41,
    /// Our request: progress (only for requests sent with progress). Fields: `request`,
    /// `progress`, `total` when `has_total`, `message` (or absent). Repeats.
    MCPW_EVENT_PROGRESS = 42,
    /// Our request: no answer in time; the peer has been told it is cancelled. Fields:
    /// `request`. Ends the request.
    MCPW_EVENT_TIMED_OUT = 43,
    /// Our request: the connection ended (or began its graceful close, for our own
    /// `subscriptions/listen`, which the close cancels) before it was answered, or (2026-07-28,
    /// stdio) the server tore down our listen with `notifications/cancelled` (then listen again
    /// if still wanted). Fields: `request`. Ends the request.
    MCPW_EVENT_ABANDONED = 44,
    /// Our request, 2026-07-28: the server needs more input first. Fields: `request`,
    /// `input_requests` (or absent), `request_state` (or absent). Fulfil the input requests
    /// (elicitation, sampling, roots), then `mcpw_conn_retry` with the responses; the engine
    /// echoes `request_state` itself. Ends the request (the retry is a new one).
    MCPW_EVENT_INPUT_REQUIRED = 45,
    /// Our request: the peer answered with something invalid (a 2026-07-28 result with an
    /// unknown `resultType`, a malformed "input required"). Fields: `request`. Ends the
    /// request.
    MCPW_EVENT_INVALID_RESPONSE = 46,
    /// Our request, over HTTP: the transport could not carry it or its answer (an HTTP error
    /// status without a JSON-RPC answer, a failed connection, a stream that ended early and
    /// could not be resumed). Fields: `request`, `code` (the HTTP status, or 0), `message`
    /// (what went wrong, in English). Ends the request.
    MCPW_EVENT_FAILED = 47,
    /// Our request: the server answered it with a task handle instead of its result (2026-07-28
    /// with the tasks extension declared, or a 2025-11-25 task-augmented request). Fields:
    /// `request`, `result` (the `CreateTaskResult`, raw JSON: `{"resultType":"task","taskId":…}`
    /// in 2026-07-28, `{"task":{"taskId":…}}` in 2025-11-25). Poll `tasks/get` with the task's
    /// id (in 2025-11-25, `tasks/result` waits for its end). Ends the request.
    MCPW_EVENT_TASK_CREATED = 48,
    /// Our request, 2025-11-25: the server answered -32042, it needs the user to complete
    /// URL-mode elicitations first. Fields: `request`, `data` (the `elicitations` array, raw
    /// JSON: objects with `mode` `"url"`, `elicitationId`, `url` and `message`, checked). Show
    /// each URL to the user (open it only with their consent), then send the request again;
    /// each end may come as `MCPW_EVENT_ELICITATION_COMPLETE`. Ends the request.
    MCPW_EVENT_URL_ELICITATION_REQUIRED = 49,
    /// The peer broke a rule; the engine already answered as the spec says. Fields:
    /// `violation`, `decode_reason` (for `MCPW_VIOLATION_PARSE` and
    /// `MCPW_VIOLATION_INVALID_MESSAGE`), `id` and `method` when the message had them.
    MCPW_EVENT_VIOLATION = 60,
    /// Something this version of the C ABI has no kind for yet. No fields. Ignore it.
    MCPW_EVENT_OTHER = 999,
}

/// Why the connection ended (`MCPW_EVENT_CLOSED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_close_reason {
    /// Not a `MCPW_EVENT_CLOSED` event.
    MCPW_CLOSE_NONE = 0,
    /// `mcpw_conn_close` finished: every request answered, or the grace period ran out.
    MCPW_CLOSE_LOCAL = 1,
    /// `mcpw_conn_handle_eof`: the transport ended.
    MCPW_CLOSE_EOF = 2,
    /// Client: the server chose a protocol version we do not speak (in `version`).
    MCPW_CLOSE_UNSUPPORTED_VERSION = 3,
    /// Client: the server answered `initialize` (or `server/discover`) with an error (its code
    /// in `code`). For -32022 (unsupported protocol version), `version` holds the versions the
    /// server named, as a JSON array; for any other code, the error's message (up to
    /// 1,024 bytes, UTF-8, possibly empty), which says why: show it to the user.
    MCPW_CLOSE_INITIALIZE_REJECTED = 4,
    /// Client: the `initialize` result was malformed.
    MCPW_CLOSE_INVALID_INITIALIZE_RESULT = 5,
    /// Client: no answer to `initialize` in time.
    MCPW_CLOSE_INITIALIZE_TIMED_OUT = 6,
    /// The peer kept sending traffic that needs replies while not reading ours.
    MCPW_CLOSE_PEER_NOT_READING = 7,
    /// Client over HTTP: the transport failed during the handshake (`initialize` or the
    /// `server/discover` probe could not be carried). `code` holds the HTTP status, or 0;
    /// `version` the reason in English.
    MCPW_CLOSE_TRANSPORT_FAILED = 8,
    /// A reason this version of the C ABI has no code for yet.
    MCPW_CLOSE_OTHER = 999,
}

/// What rule the peer broke (`MCPW_EVENT_VIOLATION`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_violation {
    /// Not a `MCPW_EVENT_VIOLATION` event.
    MCPW_VIOLATION_NONE = 0,
    /// A frame that is not JSON; answered with -32700. See `decode_reason`.
    MCPW_VIOLATION_PARSE = 1,
    /// JSON that is not a valid message; answered with -32600 when it could be a request.
    /// See `decode_reason`.
    MCPW_VIOLATION_INVALID_MESSAGE = 2,
    /// A frame over `mcpw_limits.max_frame`; skipped.
    MCPW_VIOLATION_FRAME_TOO_LONG = 3,
    /// A response whose id matches no request of ours in flight; dropped.
    MCPW_VIOLATION_UNKNOWN_RESPONSE = 4,
    /// A request reusing the id of one of the peer's requests still in flight; answered
    /// with -32600.
    MCPW_VIOLATION_DUPLICATE_REQUEST_ID = 5,
    /// A message not allowed before initialization completes; requests answered with -32600,
    /// notifications dropped.
    MCPW_VIOLATION_BEFORE_INITIALIZATION = 6,
    /// `initialize` on a connection already initialized; answered with -32600.
    MCPW_VIOLATION_ALREADY_INITIALIZED = 7,
    /// A request for a method that does not exist in the negotiated version, goes the wrong
    /// way, or needs a capability we did not declare; answered with -32601.
    MCPW_VIOLATION_METHOD_NOT_AVAILABLE = 8,
    /// A notification the sender was not entitled to send; dropped.
    MCPW_VIOLATION_NOTIFICATION_NOT_ALLOWED = 9,
    /// Parameters the engine reads were malformed; requests answered with -32602.
    MCPW_VIOLATION_INVALID_PARAMS = 10,
    /// A batch where the protocol version has none; answered with -32600.
    MCPW_VIOLATION_BATCH_NOT_ALLOWED = 11,
    /// More of the peer's requests in flight than `mcpw_limits.max_inbound_in_flight`;
    /// answered with an error.
    MCPW_VIOLATION_TOO_MANY_REQUESTS = 12,
    /// A 2026-07-28 request for a protocol version we do not support; answered with -32022.
    MCPW_VIOLATION_UNSUPPORTED_VERSION = 13,
    /// A message that does not belong to the connection's era; answered where a request,
    /// dropped otherwise.
    MCPW_VIOLATION_WRONG_ERA = 14,
    /// A 2026-07-28 request that needs a client capability its `_meta` did not declare (the
    /// tasks methods without the tasks extension); answered with -32021.
    MCPW_VIOLATION_MISSING_CLIENT_CAPABILITY = 15,
    /// A violation this version of the C ABI has no code for yet.
    MCPW_VIOLATION_OTHER = 999,
}

/// Exactly what was wrong with a frame (`MCPW_VIOLATION_PARSE`: 1-99,
/// `MCPW_VIOLATION_INVALID_MESSAGE`: 100-199).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_decode_reason {
    /// Not a decoding violation.
    MCPW_DECODE_NONE = 0,
    /// Bytes that are not UTF-8 (or encode a surrogate, or an overlong form).
    MCPW_DECODE_INVALID_UTF8 = 1,
    /// The frame ended in the middle of a value.
    MCPW_DECODE_UNEXPECTED_END = 2,
    /// A byte the JSON grammar does not allow where it stands.
    MCPW_DECODE_UNEXPECTED_BYTE = 3,
    /// A raw control character inside a string.
    MCPW_DECODE_CONTROL_CHARACTER = 4,
    /// A malformed escape sequence.
    MCPW_DECODE_INVALID_ESCAPE = 5,
    /// A `\u` escape of an unpaired UTF-16 surrogate.
    MCPW_DECODE_LONE_SURROGATE = 6,
    /// A malformed number.
    MCPW_DECODE_INVALID_NUMBER = 7,
    /// More than one value, or other bytes after the value.
    MCPW_DECODE_TRAILING_CHARACTERS = 8,
    /// Nesting deeper than the decoder's limit.
    MCPW_DECODE_TOO_DEEP = 9,
    /// The frame (or a batch member) is not a JSON object.
    MCPW_DECODE_NOT_AN_OBJECT = 100,
    /// An empty batch `[]`.
    MCPW_DECODE_EMPTY_BATCH = 101,
    /// A member the engine reads appears twice.
    MCPW_DECODE_DUPLICATE_KEY = 102,
    /// A member name differing from a JSON-RPC member only in letter case.
    MCPW_DECODE_CASE_VARIANT_KEY = 103,
    /// No `jsonrpc` member.
    MCPW_DECODE_MISSING_VERSION = 104,
    /// `jsonrpc` is not exactly `"2.0"`.
    MCPW_DECODE_WRONG_VERSION = 105,
    /// An id that is neither an integer nor a string.
    MCPW_DECODE_INVALID_ID = 106,
    /// A numeric id with a fraction or exponent.
    MCPW_DECODE_FRACTIONAL_ID = 107,
    /// An integer id outside the 64-bit range.
    MCPW_DECODE_ID_OUT_OF_RANGE = 108,
    /// A `null` id on anything but an error response.
    MCPW_DECODE_NULL_ID = 109,
    /// A response without an id.
    MCPW_DECODE_MISSING_ID = 110,
    /// `method` is not a string.
    MCPW_DECODE_METHOD_NOT_STRING = 111,
    /// `params` is present but not an object.
    MCPW_DECODE_PARAMS_NOT_OBJECT = 112,
    /// Both `result` and `error`.
    MCPW_DECODE_RESULT_AND_ERROR = 113,
    /// A mixture of request and response members.
    MCPW_DECODE_AMBIGUOUS_KIND = 114,
    /// None of `method`, `result` or `error`.
    MCPW_DECODE_NOT_A_MESSAGE = 115,
    /// `error` is not an object.
    MCPW_DECODE_ERROR_NOT_OBJECT = 116,
    /// `error.code` is missing or not an integer.
    MCPW_DECODE_ERROR_CODE_NOT_INTEGER = 117,
    /// `error.message` is missing or not a string.
    MCPW_DECODE_ERROR_MESSAGE_NOT_STRING = 118,
    /// A batch with more members than the decoder takes (1024 by default).
    MCPW_DECODE_BATCH_TOO_LARGE = 119,
    /// A reason this version of the C ABI has no code for yet.
    MCPW_DECODE_OTHER = 999,
}

// ---- The event ---------------------------------------------------------------------------

/// One thing that happened, filled in by `mcpw_conn_poll_event`.
///
/// `kind` says which fields mean something (see `mcpw_event_kind`); the others are zero,
/// NULL or `*_NONE`. Every view (`mcpw_str`, and the string of `id`) points into memory owned
/// by the connection handle and stays valid until the next call that takes that handle
/// non-`const` (another poll, an input, a command, `mcpw_conn_consume`, `mcpw_conn_free`);
/// copy what you need to keep. Passing a view straight back into a call on the same handle
/// (answering a request with its `id`, say) is fine: the call copies it before the view dies.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_event {
    /// What happened.
    pub kind: mcpw_event_kind,
    /// Our request this is about (the id `mcpw_conn_request` returned).
    pub request: i64,
    /// The peer's request id (`MCPW_ID_NONE` when there is none).
    pub id: mcpw_id,
    /// The method, decoded text.
    pub method: mcpw_str,
    /// The params object, raw JSON text.
    pub params: mcpw_str,
    /// The result, raw JSON text.
    pub result: mcpw_str,
    /// The JSON-RPC error code of an error answer, or the code that rejected `initialize`.
    pub code: i64,
    /// The error or progress message, decoded text.
    pub message: mcpw_str,
    /// The error data, raw JSON text.
    pub data: mcpw_str,
    /// The peer's reason for cancelling, decoded text.
    pub reason: mcpw_str,
    /// Progress so far.
    pub progress: f64,
    /// The total, when `has_total`.
    pub total: f64,
    /// Whether `total` is known.
    pub has_total: bool,
    /// A protocol version: the negotiated one (`MCPW_EVENT_READY`) or the one the server
    /// chose and we do not speak (`MCPW_CLOSE_UNSUPPORTED_VERSION`). On other
    /// `MCPW_EVENT_CLOSED` reasons, the text that reason names (a refusal's message, a
    /// transport failure in words).
    pub version: mcpw_str,
    /// Why the connection ended (`MCPW_EVENT_CLOSED`).
    pub close_reason: mcpw_close_reason,
    /// What rule the peer broke (`MCPW_EVENT_VIOLATION`).
    pub violation: mcpw_violation,
    /// What was wrong with the frame, for parse and invalid-message violations.
    pub decode_reason: mcpw_decode_reason,
    /// The `inputRequests` object of `MCPW_EVENT_INPUT_REQUIRED`, raw JSON text.
    pub input_requests: mcpw_str,
    /// The opaque `requestState` of `MCPW_EVENT_INPUT_REQUIRED`, decoded text.
    pub request_state: mcpw_str,
}

impl mcpw_event {
    /// The "nothing happened" event, every field empty.
    pub(crate) const NONE: mcpw_event = mcpw_event {
        kind: mcpw_event_kind::MCPW_EVENT_NONE,
        request: 0,
        id: mcpw_id::NONE,
        method: mcpw_str::NONE,
        params: mcpw_str::NONE,
        result: mcpw_str::NONE,
        code: 0,
        message: mcpw_str::NONE,
        data: mcpw_str::NONE,
        reason: mcpw_str::NONE,
        progress: 0.0,
        total: 0.0,
        has_total: false,
        version: mcpw_str::NONE,
        close_reason: mcpw_close_reason::MCPW_CLOSE_NONE,
        violation: mcpw_violation::MCPW_VIOLATION_NONE,
        decode_reason: mcpw_decode_reason::MCPW_DECODE_NONE,
        input_requests: mcpw_str::NONE,
        request_state: mcpw_str::NONE,
    };
}

impl Default for mcpw_event {
    /// The "nothing happened" event (`MCPW_EVENT_NONE`, every field empty).
    fn default() -> Self {
        mcpw_event::NONE
    }
}

/// Decoded copies of the current event's strings that had escapes, owned by the connection
/// handle so that their views live as long as the event's.
#[derive(Debug, Default)]
pub(crate) struct EventTexts {
    method: String,
    message: String,
    reason: String,
    request_state: String,
}

impl EventTexts {
    /// The capacity the decoded copies hold.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.method.capacity()
            + self.message.capacity()
            + self.reason.capacity()
            + self.request_state.capacity()
    }

    /// Frees the decoded copies whose capacity is above what emptied buffers keep
    /// ([`KEEP_WHEN_EMPTY`](mcpwire::frame::KEEP_WHEN_EMPTY)); for when no event borrows them.
    pub(crate) fn release_large(&mut self) {
        for s in [
            &mut self.method,
            &mut self.message,
            &mut self.reason,
            &mut self.request_state,
        ] {
            mcpwire::frame::empty_text(s);
        }
    }
}

/// A JSON string as decoded text: the wire bytes when there are no escapes, else a decoded
/// copy in `buf`.
fn text(s: JsonStr<'_>, buf: &mut String) -> mcpw_str {
    if !s.has_escapes() {
        return mcpw_str::of(s.raw());
    }
    buf.clear();
    buf.extend(s.chars());
    mcpw_str::of(buf)
}

fn text_opt(s: Option<JsonStr<'_>>, buf: &mut String) -> mcpw_str {
    s.map_or(mcpw_str::NONE, |s| text(s, buf))
}

fn raw(json: Option<RawJson<'_>>) -> mcpw_str {
    mcpw_str::of_opt(json.map(|j| j.get()))
}

/// Lays an engine event out for C. The views point into the engine's event storage and into
/// `texts`.
pub(crate) fn to_c(event: Event<'_>, texts: &mut EventTexts) -> mcpw_event {
    use mcpw_event_kind::*;
    let base = mcpw_event::NONE;
    // `Event` grows with the protocol; until the C ABI has a kind for a new variant, it
    // surfaces as `MCPW_EVENT_OTHER`.
    #[allow(unreachable_patterns)]
    match event {
        Event::Ready { version } => mcpw_event {
            kind: MCPW_EVENT_READY,
            version: mcpw_str::of(version.as_str()),
            ..base
        },
        Event::Closed {
            reason: CloseReason::TransportFailed(failure),
        } => {
            texts.message.clear();
            let _ = write!(texts.message, "{failure}");
            mcpw_event {
                kind: MCPW_EVENT_CLOSED,
                close_reason: mcpw_close_reason::MCPW_CLOSE_TRANSPORT_FAILED,
                code: failure_status(failure),
                version: mcpw_str::of(&texts.message),
                ..base
            }
        }
        Event::Failed { request, reason } => {
            texts.message.clear();
            let _ = write!(texts.message, "{reason}");
            mcpw_event {
                kind: MCPW_EVENT_FAILED,
                request: request.0,
                code: failure_status(&reason),
                message: mcpw_str::of(&texts.message),
                ..base
            }
        }
        Event::Closed { reason } => {
            let (close_reason, code, version) = close(reason);
            mcpw_event {
                kind: MCPW_EVENT_CLOSED,
                close_reason,
                code,
                version,
                ..base
            }
        }
        Event::Request { id, method, params } => mcpw_event {
            kind: MCPW_EVENT_REQUEST,
            id: mcpw_id::of(id),
            method: text(method, &mut texts.method),
            params: raw(params),
            ..base
        },
        Event::Notification { method, params } => mcpw_event {
            kind: MCPW_EVENT_NOTIFICATION,
            method: text(method, &mut texts.method),
            params: raw(params),
            ..base
        },
        Event::PeerCancelled { id, reason } => mcpw_event {
            kind: MCPW_EVENT_PEER_CANCELLED,
            id: mcpw_id::of(id),
            reason: text_opt(reason, &mut texts.reason),
            ..base
        },
        Event::Response { request, result } => mcpw_event {
            kind: MCPW_EVENT_RESPONSE,
            request: request.0,
            result: mcpw_str::of(result.get()),
            ..base
        },
        Event::Error {
            request,
            code,
            message,
            data,
        } => mcpw_event {
            kind: MCPW_EVENT_ERROR,
            request: request.0,
            code,
            message: text(message, &mut texts.message),
            data: raw(data),
            ..base
        },
        Event::Progress {
            request,
            progress,
            total,
            message,
        } => mcpw_event {
            kind: MCPW_EVENT_PROGRESS,
            request: request.0,
            progress,
            total: total.unwrap_or(0.0),
            has_total: total.is_some(),
            message: text_opt(message, &mut texts.message),
            ..base
        },
        Event::InputRequired {
            request,
            input_requests,
            request_state,
        } => mcpw_event {
            kind: MCPW_EVENT_INPUT_REQUIRED,
            request: request.0,
            input_requests: raw(input_requests),
            request_state: text_opt(request_state, &mut texts.request_state),
            ..base
        },
        Event::TaskCreated { request, task } => mcpw_event {
            kind: MCPW_EVENT_TASK_CREATED,
            request: request.0,
            result: mcpw_str::of(task.get()),
            ..base
        },
        Event::UrlElicitationRequired {
            request,
            elicitations,
        } => mcpw_event {
            kind: MCPW_EVENT_URL_ELICITATION_REQUIRED,
            request: request.0,
            data: mcpw_str::of(elicitations.get()),
            ..base
        },
        Event::ElicitationComplete { elicitation_id } => mcpw_event {
            kind: MCPW_EVENT_ELICITATION_COMPLETE,
            message: text(elicitation_id, &mut texts.message),
            ..base
        },
        Event::InvalidResponse { request } => mcpw_event {
            kind: MCPW_EVENT_INVALID_RESPONSE,
            request: request.0,
            ..base
        },
        Event::TimedOut { request } => mcpw_event {
            kind: MCPW_EVENT_TIMED_OUT,
            request: request.0,
            ..base
        },
        Event::Abandoned { request } => mcpw_event {
            kind: MCPW_EVENT_ABANDONED,
            request: request.0,
            ..base
        },
        Event::Violation { kind, id, method } => {
            let (violation, decode_reason) = violation(kind);
            mcpw_event {
                kind: MCPW_EVENT_VIOLATION,
                id: mcpw_id::of_opt(id),
                method: text_opt(method, &mut texts.method),
                violation,
                decode_reason,
                ..base
            }
        }
        _ => mcpw_event {
            kind: MCPW_EVENT_OTHER,
            ..base
        },
    }
}

/// The HTTP status of a transport failure, or 0.
fn failure_status(failure: &TransportFailure) -> i64 {
    match failure {
        TransportFailure::Status(status) => i64::from(*status),
        _ => 0,
    }
}

fn close(reason: &CloseReason) -> (mcpw_close_reason, i64, mcpw_str) {
    use mcpw_close_reason::*;
    #[allow(unreachable_patterns)]
    match reason {
        CloseReason::Local => (MCPW_CLOSE_LOCAL, 0, mcpw_str::NONE),
        CloseReason::Eof => (MCPW_CLOSE_EOF, 0, mcpw_str::NONE),
        CloseReason::UnsupportedVersion(v) => (MCPW_CLOSE_UNSUPPORTED_VERSION, 0, mcpw_str::of(v)),
        CloseReason::InitializeRejected { code, message } => {
            (MCPW_CLOSE_INITIALIZE_REJECTED, *code, mcpw_str::of(message))
        }
        CloseReason::InvalidInitializeResult => {
            (MCPW_CLOSE_INVALID_INITIALIZE_RESULT, 0, mcpw_str::NONE)
        }
        CloseReason::InitializeTimedOut => (MCPW_CLOSE_INITIALIZE_TIMED_OUT, 0, mcpw_str::NONE),
        CloseReason::PeerNotReading => (MCPW_CLOSE_PEER_NOT_READING, 0, mcpw_str::NONE),
        CloseReason::VersionRefused { supported } => (
            MCPW_CLOSE_INITIALIZE_REJECTED,
            mcpwire::mcp::UNSUPPORTED_PROTOCOL_VERSION,
            mcpw_str::of(supported),
        ),
        _ => (MCPW_CLOSE_OTHER, 0, mcpw_str::NONE),
    }
}

fn violation(kind: ViolationKind) -> (mcpw_violation, mcpw_decode_reason) {
    use mcpw_decode_reason::MCPW_DECODE_NONE;
    use mcpw_violation::*;
    #[allow(unreachable_patterns)]
    match kind {
        ViolationKind::Parse(r) => (MCPW_VIOLATION_PARSE, decode_reason(r)),
        ViolationKind::InvalidMessage(r) => (MCPW_VIOLATION_INVALID_MESSAGE, decode_reason(r)),
        ViolationKind::FrameTooLong => (MCPW_VIOLATION_FRAME_TOO_LONG, MCPW_DECODE_NONE),
        ViolationKind::UnknownResponse => (MCPW_VIOLATION_UNKNOWN_RESPONSE, MCPW_DECODE_NONE),
        ViolationKind::DuplicateRequestId => {
            (MCPW_VIOLATION_DUPLICATE_REQUEST_ID, MCPW_DECODE_NONE)
        }
        ViolationKind::BeforeInitialization => {
            (MCPW_VIOLATION_BEFORE_INITIALIZATION, MCPW_DECODE_NONE)
        }
        ViolationKind::AlreadyInitialized => (MCPW_VIOLATION_ALREADY_INITIALIZED, MCPW_DECODE_NONE),
        ViolationKind::MethodNotAvailable => {
            (MCPW_VIOLATION_METHOD_NOT_AVAILABLE, MCPW_DECODE_NONE)
        }
        ViolationKind::NotificationNotAllowed => {
            (MCPW_VIOLATION_NOTIFICATION_NOT_ALLOWED, MCPW_DECODE_NONE)
        }
        ViolationKind::InvalidParams => (MCPW_VIOLATION_INVALID_PARAMS, MCPW_DECODE_NONE),
        ViolationKind::BatchNotAllowed => (MCPW_VIOLATION_BATCH_NOT_ALLOWED, MCPW_DECODE_NONE),
        ViolationKind::TooManyRequests => (MCPW_VIOLATION_TOO_MANY_REQUESTS, MCPW_DECODE_NONE),
        ViolationKind::UnsupportedVersion => (MCPW_VIOLATION_UNSUPPORTED_VERSION, MCPW_DECODE_NONE),
        ViolationKind::WrongEra => (MCPW_VIOLATION_WRONG_ERA, MCPW_DECODE_NONE),
        ViolationKind::MissingClientCapability => {
            (MCPW_VIOLATION_MISSING_CLIENT_CAPABILITY, MCPW_DECODE_NONE)
        }
        _ => (MCPW_VIOLATION_OTHER, MCPW_DECODE_NONE),
    }
}

pub(crate) fn decode_reason(reason: Reason) -> mcpw_decode_reason {
    use mcpw_decode_reason::*;
    #[allow(unreachable_patterns)]
    match reason {
        Reason::InvalidUtf8 => MCPW_DECODE_INVALID_UTF8,
        Reason::UnexpectedEnd => MCPW_DECODE_UNEXPECTED_END,
        Reason::UnexpectedByte => MCPW_DECODE_UNEXPECTED_BYTE,
        Reason::ControlCharacter => MCPW_DECODE_CONTROL_CHARACTER,
        Reason::InvalidEscape => MCPW_DECODE_INVALID_ESCAPE,
        Reason::LoneSurrogate => MCPW_DECODE_LONE_SURROGATE,
        Reason::InvalidNumber => MCPW_DECODE_INVALID_NUMBER,
        Reason::TrailingCharacters => MCPW_DECODE_TRAILING_CHARACTERS,
        Reason::TooDeep => MCPW_DECODE_TOO_DEEP,
        Reason::NotAnObject => MCPW_DECODE_NOT_AN_OBJECT,
        Reason::EmptyBatch => MCPW_DECODE_EMPTY_BATCH,
        Reason::DuplicateKey => MCPW_DECODE_DUPLICATE_KEY,
        Reason::CaseVariantKey => MCPW_DECODE_CASE_VARIANT_KEY,
        Reason::MissingVersion => MCPW_DECODE_MISSING_VERSION,
        Reason::WrongVersion => MCPW_DECODE_WRONG_VERSION,
        Reason::InvalidId => MCPW_DECODE_INVALID_ID,
        Reason::FractionalId => MCPW_DECODE_FRACTIONAL_ID,
        Reason::IdOutOfRange => MCPW_DECODE_ID_OUT_OF_RANGE,
        Reason::NullId => MCPW_DECODE_NULL_ID,
        Reason::MissingId => MCPW_DECODE_MISSING_ID,
        Reason::MethodNotString => MCPW_DECODE_METHOD_NOT_STRING,
        Reason::ParamsNotObject => MCPW_DECODE_PARAMS_NOT_OBJECT,
        Reason::ResultAndError => MCPW_DECODE_RESULT_AND_ERROR,
        Reason::AmbiguousKind => MCPW_DECODE_AMBIGUOUS_KIND,
        Reason::NotAMessage => MCPW_DECODE_NOT_A_MESSAGE,
        Reason::ErrorNotObject => MCPW_DECODE_ERROR_NOT_OBJECT,
        Reason::ErrorCodeNotInteger => MCPW_DECODE_ERROR_CODE_NOT_INTEGER,
        Reason::ErrorMessageNotString => MCPW_DECODE_ERROR_MESSAGE_NOT_STRING,
        Reason::BatchTooLarge => MCPW_DECODE_BATCH_TOO_LARGE,
        _ => MCPW_DECODE_OTHER,
    }
}
