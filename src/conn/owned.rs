//! [`OwnedEvent`]: an [`Event`] copied out of the engine.
//!
//! [`Event`]s borrow from the connection until the next `&mut` call, which keeps the hot path
//! free of allocations. Code that must issue commands while it still holds the event's data
//! (answer a request from a handler, queue events for another thread, keep them in a test)
//! copies the event once with [`Event::to_owned_event`] and works from the copy.

use super::event::{CloseReason, Event, RequestId, TransportFailure, ViolationKind};
use crate::jsonrpc::OwnedId;
use crate::mcp::ProtocolVersion;

/// An [`Event`] that owns its data: strings are decoded (escapes resolved), JSON values are
/// kept as their text as received (whitespace, line breaks in it included: over HTTP a body
/// may be pretty-printed). Variants and fields match [`Event`]'s one for one; see each
/// variant there for when it fires.
///
/// Use it when the event must outlive the next call on the connection; in a tight loop that
/// only reads the event, match on [`Event`] itself and allocate nothing.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
#[allow(missing_docs)] // every field is documented on the matching `Event` variant
pub enum OwnedEvent {
    // ---- lifecycle ----
    /// See [`Event::Ready`].
    Ready { version: ProtocolVersion },
    /// See [`Event::Closed`].
    Closed { reason: CloseReason },
    // ---- from the peer ----
    /// See [`Event::Request`]; `params` is the params object's JSON text.
    Request {
        id: OwnedId,
        method: String,
        params: Option<String>,
    },
    /// See [`Event::Notification`].
    Notification {
        method: String,
        params: Option<String>,
    },
    /// See [`Event::PeerCancelled`].
    PeerCancelled { id: OwnedId, reason: Option<String> },
    // ---- our requests ----
    /// See [`Event::Response`]; `result` is the result's JSON text.
    Response { request: RequestId, result: String },
    /// See [`Event::Error`]; `data` is the error data's JSON text.
    Error {
        request: RequestId,
        code: i64,
        message: String,
        data: Option<String>,
    },
    /// See [`Event::Progress`].
    Progress {
        request: RequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// See [`Event::InputRequired`].
    InputRequired {
        request: RequestId,
        input_requests: Option<String>,
        request_state: Option<String>,
    },
    /// See [`Event::UrlElicitationRequired`]; `elicitations` is the array's JSON text.
    UrlElicitationRequired {
        request: RequestId,
        elicitations: String,
    },
    /// See [`Event::ElicitationComplete`].
    ElicitationComplete { elicitation_id: String },
    /// See [`Event::TaskCreated`]; `task` is the handle's JSON text.
    TaskCreated { request: RequestId, task: String },
    /// See [`Event::InvalidResponse`].
    InvalidResponse { request: RequestId },
    /// See [`Event::TimedOut`].
    TimedOut { request: RequestId },
    /// See [`Event::Abandoned`].
    Abandoned { request: RequestId },
    /// See [`Event::Failed`].
    Failed {
        request: RequestId,
        reason: TransportFailure,
    },
    /// See [`Event::Violation`].
    Violation {
        kind: ViolationKind,
        id: Option<OwnedId>,
        method: Option<String>,
    },
}

impl Event<'_> {
    /// Copies the event out of the engine, so the connection can be used again while the copy
    /// is kept. Allocates for each string and JSON value the event carries.
    pub fn to_owned_event(&self) -> OwnedEvent {
        let text = |s: &crate::jsonrpc::JsonStr<'_>| s.to_str().into_owned();
        let json = |j: &crate::jsonrpc::RawJson<'_>| j.get().to_owned();
        match self {
            Event::Ready { version } => OwnedEvent::Ready { version: *version },
            Event::Closed { reason } => OwnedEvent::Closed {
                reason: (*reason).clone(),
            },
            Event::Request { id, method, params } => OwnedEvent::Request {
                id: (*id).into(),
                method: text(method),
                params: params.as_ref().map(json),
            },
            Event::Notification { method, params } => OwnedEvent::Notification {
                method: text(method),
                params: params.as_ref().map(json),
            },
            Event::PeerCancelled { id, reason } => OwnedEvent::PeerCancelled {
                id: (*id).into(),
                reason: reason.as_ref().map(text),
            },
            Event::Response { request, result } => OwnedEvent::Response {
                request: *request,
                result: json(result),
            },
            Event::Error {
                request,
                code,
                message,
                data,
            } => OwnedEvent::Error {
                request: *request,
                code: *code,
                message: text(message),
                data: data.as_ref().map(json),
            },
            Event::Progress {
                request,
                progress,
                total,
                message,
            } => OwnedEvent::Progress {
                request: *request,
                progress: *progress,
                total: *total,
                message: message.as_ref().map(text),
            },
            Event::InputRequired {
                request,
                input_requests,
                request_state,
            } => OwnedEvent::InputRequired {
                request: *request,
                input_requests: input_requests.as_ref().map(json),
                request_state: request_state.as_ref().map(text),
            },
            Event::UrlElicitationRequired {
                request,
                elicitations,
            } => OwnedEvent::UrlElicitationRequired {
                request: *request,
                elicitations: json(elicitations),
            },
            Event::TaskCreated { request, task } => OwnedEvent::TaskCreated {
                request: *request,
                task: json(task),
            },
            Event::ElicitationComplete { elicitation_id } => OwnedEvent::ElicitationComplete {
                elicitation_id: text(elicitation_id),
            },
            Event::InvalidResponse { request } => OwnedEvent::InvalidResponse { request: *request },
            Event::TimedOut { request } => OwnedEvent::TimedOut { request: *request },
            Event::Abandoned { request } => OwnedEvent::Abandoned { request: *request },
            Event::Failed { request, reason } => OwnedEvent::Failed {
                request: *request,
                reason: *reason,
            },
            Event::Violation { kind, id, method } => OwnedEvent::Violation {
                kind: *kind,
                id: id.map(Into::into),
                method: method.as_ref().map(text),
            },
        }
    }
}

impl From<Event<'_>> for OwnedEvent {
    fn from(event: Event<'_>) -> OwnedEvent {
        event.to_owned_event()
    }
}
