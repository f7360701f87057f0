//! Inbound dispatch: every frame the peer sends is decoded, checked and routed here, and the
//! peer's requests stay in the table here until they are answered or cancelled.
//!
//! State: [`Dispatch`] (`Core::dispatch`).
//!
//! Rules enforced here (spec: "Basic" / JSON-RPC messages, "Lifecycle", "Cancellation" and the
//! per-version schema's method unions; docs/rules.md lists every rule with its test):
//!
//! 1. (all) A frame that is not JSON is answered with -32700 and no id; an invalid
//!    message with -32600 (and its id when one could be read), except a frame that looks like
//!    a response: a response is never answered (`on_decode_error`, `answers_decode_error`).
//! 2. (2025-03-26 only) Batches only in 2025-03-26: in any other version, or before a version
//!    is negotiated, a batch is refused whole with one -32600 and a `BatchNotAllowed`
//!    violation. A batch's answers go back as one array once every request in it is answered
//!    or cancelled; a batch of notifications gets no answer (`on_batch`; the array is written
//!    by outbound.rs, `emit_answer`).
//! 3. (all) A request whose id is already in flight from the peer, or was that of a request
//!    the peer cancelled, is refused with -32600 (`on_request`).
//! 4. (2024-11-05 … 2025-11-25) What arrives before the handshake allows it: a request gets
//!    -32600, a notification is dropped; both are violations (`on_request`, `on_notification`,
//!    with lifecycle.rs `Lifecycle::admit` deciding).
//! 5. (2026-07-28) A client in the stateless era never answers a request: one from the server
//!    is a `WrongEra` violation (`on_request`). Server-side stateless routing is in
//!    stateless.rs (`route_stateless`).
//! 6. (2024-11-05 … 2025-11-25) `ping` is answered with `{}` by the engine, whatever the phase
//!    (`on_request`, `Policy::answer_pings`).
//! 7. (all) Gating of requests: a known MCP method must exist in the version, travel our way
//!    and be backed by a capability we declared, else -32601 "Method not found"; a method MCP
//!    does not define goes to the application (`incoming_request_refused`).
//! 8. (all) Gating of notifications: a known MCP notification must exist in the version, travel
//!    our way and be backed by the sender's capability, else it is dropped with a
//!    `NotificationNotAllowed` violation (`incoming_notification_allowed`).
//! 9. (all) At most `Limits::max_inbound_in_flight` of the peer's requests wait for answers;
//!    one more is refused with -32603 (`accept_request`).
//! 10. (all) `_meta.progressToken` must be a string or an integer, else -32602
//!     (`accept_request`, `progress_token`).
//! 11. (all) `notifications/cancelled` for a request in flight ends it here (no answer will be
//!     sent: outbound.rs `respond` suppresses it) and becomes `Event::PeerCancelled`; one for
//!     an unknown or finished request is ignored and counted (`on_peer_cancel`).
//! 12. (all) An error response with no id matches nothing: an `UnknownResponse` violation
//!     (`on_message`). Responses with ids are correlated in correlation.rs.

use super::event::Stored;
use super::lifecycle::Admit;
use super::outbound::Answer;
use super::output::StreamId;
use super::stateless::MetaView;
use super::tables::{BoundedSet, FastMap, Inbound, ListenFilter, ModernContext, PeerKeys, PeerMap};
use super::time::Timestamp;
use super::{CloseReason, Core, Role, ViolationKind};
use crate::jsonrpc::{
    self, DecodeError, Decoded, Decoder, DecoderConfig, DuplicateMember, ErrorKind, Id, JsonStr,
    Message, OwnedId, ParamsIndex, RawJson, Reason,
};
use crate::mcp::{self, Era, Gate, MethodKind, ProtocolVersion};

/// The decoder, the batches being answered, and the peer's requests in flight.
pub(super) struct Dispatch {
    pub(super) decoder: Decoder,
    /// The peer's requests we have not answered yet.
    pub(super) inbound: PeerMap<OwnedId, Inbound>,
    /// The peer's requests it cancelled: our answers to them are suppressed.
    pub(super) peer_cancelled: BoundedSet<OwnedId, PeerKeys>,
    /// Batches (2025-03-26) whose answers are still being collected.
    pub(super) batches: FastMap<u32, BatchCollector>,
    next_batch: u32,
    /// A batch's members are being read: a graceful close does not end before its last (a
    /// member ending it would leave the requests after it unread, unanswered).
    pub(super) reading_batch: bool,
}

impl Dispatch {
    /// The bytes the answers of open batches hold: output not yet written, counted with it
    /// against `max_buffered_output`. (Summed when asked, not kept: batches are rare, and a
    /// field would cost every idle connection its bytes.)
    pub(super) fn batch_bytes(&self) -> usize {
        if self.batches.is_empty() {
            return 0;
        }
        self.batches.values().map(|c| c.buf.len()).sum()
    }

    pub(super) fn new(decoder: DecoderConfig, remembered: usize) -> Dispatch {
        Dispatch {
            decoder: Decoder::new(decoder),
            inbound: PeerMap::default(),
            peer_cancelled: BoundedSet::new(remembered),
            batches: FastMap::default(),
            next_batch: 0,
            reading_batch: false,
        }
    }

    /// Opens a collector for a batch's answers, held open by one extra count until every
    /// member has been processed.
    fn open_batch(&mut self, stream: StreamId, outstanding: usize) -> u32 {
        let b = self.next_batch;
        self.next_batch = self.next_batch.wrapping_add(1);
        self.batches.insert(
            b,
            BatchCollector {
                buf: Vec::new(),
                written: 0,
                outstanding: outstanding + 1,
                stream,
            },
        );
        b
    }
}

/// Answers to the members of one batch, collected until every request in it is answered.
#[derive(Debug)]
pub(super) struct BatchCollector {
    pub(super) buf: Vec<u8>,
    pub(super) written: usize,
    pub(super) outstanding: usize,
    pub(super) stream: StreamId,
}

/// How a request is refused: what the application is told and what the peer is answered.
#[derive(Clone, Copy)]
pub(super) struct Refusal<'a> {
    pub(super) kind: ViolationKind,
    pub(super) code: i64,
    pub(super) message: &'a str,
    pub(super) data: Option<RawJson<'a>>,
}

impl<'a> Refusal<'a> {
    pub(super) fn new(kind: ViolationKind, code: i64, message: &'a str) -> Self {
        Refusal {
            kind,
            code,
            message,
            data: None,
        }
    }
}

/// What was read of a single message before the connection handles it, so that it is not
/// read again.
pub(super) struct ReadAhead<'a> {
    /// The decoder's record of the params' members.
    pub(super) params: &'a ParamsIndex,
    /// A stateless request's `_meta`, read by the HTTP host to check the headers (see
    /// [`Connection::handle_decoded_with_meta`](super::Connection::handle_decoded_with_meta)).
    pub(super) meta: Option<MetaView<'a>>,
}

impl ReadAhead<'_> {
    /// Nothing read ahead (a batch member): what is needed is read from the message.
    pub(super) const NOTHING: ReadAhead<'static> = ReadAhead {
        params: &ParamsIndex::EMPTY,
        meta: None,
    };
}

impl Core {
    pub(super) fn on_frame(&mut self, now: Timestamp, stream: StreamId, frame: &[u8]) {
        let mut index = ParamsIndex::EMPTY;
        let decoded = self.dispatch.decoder.decode_text(frame, &mut index);
        match decoded {
            Err(e) => self.on_decode_error(now, frame, stream, None, &e),
            Ok((frame, decoded)) => {
                let ahead = ReadAhead {
                    params: &index,
                    meta: None,
                };
                self.on_decoded(now, stream, frame, decoded, ahead)
            }
        }
    }

    /// A decoded frame: `frame` is the text `decoded` was decoded from, and its views point
    /// into it; `ahead` what was read of a single message before (by the decoder, and by an
    /// HTTP host, which had to read the frame to route it).
    pub(super) fn on_decoded(
        &mut self,
        now: Timestamp,
        stream: StreamId,
        frame: &str,
        decoded: Decoded<'_>,
        ahead: ReadAhead<'_>,
    ) {
        match decoded {
            Decoded::Single(m) => self.on_message(now, stream, frame, m, None, ahead),
            Decoded::Batch(members) => self.on_batch(now, stream, frame, members),
        }
    }

    /// A batch: allowed only in 2025-03-26; its members are processed in order and their
    /// answers collected into one array.
    fn on_batch(
        &mut self,
        now: Timestamp,
        stream: StreamId,
        frame: &str,
        members: Vec<Result<Message<'_>, DecodeError<'_>>>,
    ) {
        let allowed = self
            .lifecycle
            .version
            .is_some_and(ProtocolVersion::has_batches);
        if !allowed {
            self.violation(ViolationKind::BatchNotAllowed);
            // Answers among the members end the requests they name, as a malformed answer
            // does (left alone, those would wait for their timeout). An error answers only a
            // batch holding something else: a frame of answers is never answered.
            let mut answers = Vec::new();
            let mut only_answers = true;
            for m in &members {
                let id = match m {
                    Ok(Message::Response(r)) => Some(r.id),
                    Ok(Message::Error(e)) => e.id,
                    Err(e) if e.is_response_shaped() => e.id(),
                    _ => {
                        only_answers = false;
                        continue;
                    }
                };
                if let Some(Id::Int(n)) = id {
                    answers.push(n);
                }
            }
            for n in answers {
                self.end_with_invalid_response(now, n);
            }
            // (Ending them may have closed the connection: its `initialize`, or the last
            // request a graceful close waited for. Nothing is written after that.)
            if only_answers || self.writes_no_answers() || self.lifecycle.is_closed() {
                return;
            }
            self.emit_auto(stream, |out| {
                jsonrpc::encode_error(
                    out,
                    None,
                    jsonrpc::INVALID_REQUEST,
                    "batches are not supported in this protocol version",
                    None,
                )
            });
            return;
        }
        // Every member that expects an answer: requests and invalid members.
        let outstanding = members
            .iter()
            .filter(|m| match m {
                Ok(Message::Request(_)) => true,
                Ok(_) => false,
                Err(e) => answers_decode_error(e),
            })
            .count();
        let b = self.dispatch.open_batch(stream, outstanding);
        // Each member's events keep a copy of the member's own text, not of the whole frame:
        // a copy of the frame per member would let a batch of n members take n times its size.
        self.dispatch.reading_batch = true;
        for member in members {
            // A member may close the connection (an automatic answer that found no room): the
            // rest are not looked at. (Not the last answer a graceful close waited for: the
            // close ends after the batch, if its requests leave nothing to wait for.)
            if self.lifecycle.is_closed() {
                break;
            }
            match member {
                Ok(m) => {
                    let text = member_text(frame, &m);
                    self.on_message(now, stream, text, m, Some(b), ReadAhead::NOTHING)
                }
                Err(e) => {
                    let id = match e.id() {
                        Some(Id::Str(s)) => Some(s.raw()),
                        _ => None,
                    };
                    let text = covering(frame, id.into_iter());
                    self.on_decode_error(now, text.as_bytes(), stream, Some(b), &e)
                }
            }
        }
        self.dispatch.reading_batch = false;
        // Release the guard that kept the batch open while members were processed.
        self.batch_member_dropped(b);
        self.maybe_finish_close();
    }

    /// An answer to our request `n` that could not be read: the request ends with
    /// [`Event::InvalidResponse`](super::Event::InvalidResponse) rather than waiting for its
    /// timeout (no valid answer will come: the peer has answered). The engine's own requests
    /// end as their timeouts would end them, without the wait
    /// ([`end_own_request`](Self::end_own_request)), `initialize` with
    /// `InvalidInitializeResult`.
    fn end_with_invalid_response(&mut self, now: Timestamp, n: i64) {
        let Some(kind) = self.corr.pending.get(&n).map(|p| p.kind) else {
            return;
        };
        self.corr.pending.remove(&n);
        let retry = self.stateless.take_retry(n);
        self.stateless.recycle_retry(retry);
        if !self.end_own_request(now, n, kind, CloseReason::InvalidInitializeResult) {
            self.events
                .push(Stored::InvalidResponse(super::RequestId(n)));
            self.maybe_finish_close();
        }
    }

    /// A frame over the cap (stdio): it is skipped, but not ignored. A request gets an error
    /// naming its id when the frame's first bytes show it (else without one), since JSON-RPC wants
    /// every request answered; an answer to one of our requests ends that request with
    /// [`Event::InvalidResponse`](super::Event::InvalidResponse) instead of leaving it to time
    /// out.
    pub(super) fn on_frame_too_long(&mut self, now: Timestamp, head: &[u8]) {
        self.violation(ViolationKind::FrameTooLong);
        let facts = jsonrpc::scan_head(head);
        if facts.response {
            if let Some(OwnedId::Int(n)) = facts.id {
                self.end_with_invalid_response(now, n);
            }
            return;
        }
        if self.writes_no_answers() {
            return;
        }
        let id = facts.id;
        self.emit_auto(StreamId::MAIN, |out| {
            jsonrpc::encode_error(
                out,
                id.as_ref().map(OwnedId::as_id),
                jsonrpc::INVALID_REQUEST,
                "the message is over the frame size limit",
                None,
            )
        });
    }

    pub(super) fn on_decode_error(
        &mut self,
        now: Timestamp,
        frame: &[u8],
        stream: StreamId,
        batch: Option<u32>,
        e: &DecodeError<'_>,
    ) {
        let kind = match e.kind() {
            ErrorKind::Parse => ViolationKind::Parse(e.reason()),
            ErrorKind::InvalidRequest => ViolationKind::InvalidMessage(e.reason()),
        };
        // A rejected frame may not be UTF-8: the checking capture copies it only if it is.
        let cap = self.events.capture_checked(frame);
        let stored = Stored::Violation {
            kind,
            id: e.id().map(|i| cap.id(i)),
            method: None,
        };
        cap.push(stored);
        if e.is_response_shaped() {
            // A malformed answer to one of our requests: it is not answered, and it ends that
            // request.
            if let Some(Id::Int(n)) = e.id() {
                self.end_with_invalid_response(now, n);
            }
            return;
        }
        if answers_decode_error(e) {
            self.emit_answer(
                batch,
                stream,
                e.id(),
                Answer::Error {
                    code: e.code(),
                    message: e.message(),
                    data: None,
                },
                true,
            );
        }
    }

    pub(super) fn on_message(
        &mut self,
        now: Timestamp,
        stream: StreamId,
        frame: &str,
        message: Message<'_>,
        batch: Option<u32>,
        ahead: ReadAhead<'_>,
    ) {
        if self.lifecycle.is_closed() {
            return;
        }
        match message {
            Message::Request(r) => self.on_request(now, stream, frame, r, batch, ahead),
            Message::Notification(n) => self.on_notification(now, frame, n, ahead.params),
            Message::Response(r) => self.on_response(now, frame, r.id, Ok(r.result)),
            Message::Error(e) => match e.id {
                Some(id) => self.on_response(now, frame, id, Err(e.error)),
                None => self.violation_in(frame, ViolationKind::UnknownResponse, None, None),
            },
        }
    }

    pub(super) fn reject(
        &mut self,
        frame: &str,
        (stream, batch): (StreamId, Option<u32>),
        r: &jsonrpc::Request<'_>,
        refusal: Refusal<'_>,
    ) {
        self.violation_in(frame, refusal.kind, Some(r.id), Some(r.method));
        self.emit_answer(
            batch,
            stream,
            Some(r.id),
            Answer::Error {
                code: refusal.code,
                message: refusal.message,
                data: refusal.data,
            },
            true,
        );
    }

    pub(super) fn on_request(
        &mut self,
        _now: Timestamp,
        stream: StreamId,
        frame: &str,
        r: jsonrpc::Request<'_>,
        batch: Option<u32>,
        ahead: ReadAhead<'_>,
    ) {
        let method = r.method.to_str();
        let method: &str = &method;
        let key = OwnedId::from(r.id);
        // A request the peer cancelled may still be answered late by the application: a new
        // request under its id ("MUST NOT have been previously used by the requestor within
        // the same session") would take that stale answer.
        if self.dispatch.inbound.contains_key(&key) || self.dispatch.peer_cancelled.contains(&key) {
            return self.reject(
                frame,
                (stream, batch),
                &r,
                Refusal::new(
                    ViolationKind::DuplicateRequestId,
                    jsonrpc::INVALID_REQUEST,
                    "request id already in use",
                ),
            );
        }
        if self.role == Role::Server
            && self.route_stateless(stream, frame, &r, batch, method, ahead.meta)
        {
            return;
        }
        match self.lifecycle.admit(MethodKind::Request, method) {
            Admit::Ignore => return,
            Admit::TooEarly => {
                // A method that none of our versions has is unknown rather than early: a
                // legacy-only server probed with `server/discover` says so (-32601).
                let refusal = if self.speaks_no_version_of(method) {
                    Refusal::new(
                        ViolationKind::MethodNotAvailable,
                        jsonrpc::METHOD_NOT_FOUND,
                        "Method not found",
                    )
                } else {
                    Refusal::new(
                        ViolationKind::BeforeInitialization,
                        jsonrpc::INVALID_REQUEST,
                        "not allowed before initialization completes",
                    )
                };
                return self.reject(frame, (stream, batch), &r, refusal);
            }
            Admit::Yes => {}
        }
        if self.role == Role::Client && self.lifecycle.era == Some(Era::Modern) {
            // A stateless-era server never sends requests, and the client never answers.
            return self.violation_in(frame, ViolationKind::WrongEra, Some(r.id), Some(r.method));
        }
        if method == "initialize" && self.role == Role::Server {
            return self.on_initialize(stream, frame, &r, batch);
        }
        if method == "ping" && self.config.policy.answer_pings {
            let answer = Answer::Result(RawJson::validated("{}"));
            return self.emit_answer(batch, stream, Some(r.id), answer, true);
        }
        // Gating: a known MCP method must exist in this version, go our way, and be backed by
        // a capability we declared.
        if self.incoming_request_refused(method, self.effective_version()) {
            return self.reject(
                frame,
                (stream, batch),
                &r,
                Refusal::new(
                    ViolationKind::MethodNotAvailable,
                    jsonrpc::METHOD_NOT_FOUND,
                    "Method not found",
                ),
            );
        }
        // Sub-capabilities we did not declare: an elicitation mode (-32602, as the spec
        // prescribes) or tool use in sampling. Task augmentation is not refused: "Receivers
        // that do not declare the task capability for a request type MUST process requests of
        // that type normally".
        // Before 2025-11-25 a URL mode or tool use is undeclared whatever we declared: that
        // version has neither.
        let ours =
            mcp::sub_capabilities_in(self.config.capabilities.flags(), self.effective_version());
        let invalid = if matches!(method, "elicitation/create" | "sampling/createMessage")
            && mcp::sub_capabilities_with(method, r.params, || Some(false))
                .check(ours | crate::mcp::Caps::SAMPLING_CONTEXT, false)
                .is_err()
        {
            Some(
                "the request needs a capability we did not declare (elicitation mode or sampling tools), or repeats a member that says which",
            )
        } else if method == "elicitation/create" && super::elicit::incomplete_url_request(r.params)
        {
            Some("a URL-mode elicitation needs one string each of elicitationId, url and message")
        } else {
            None
        };
        if let Some(message) = invalid {
            let refusal = Refusal::new(
                ViolationKind::InvalidParams,
                jsonrpc::INVALID_PARAMS,
                message,
            );
            return self.reject(frame, (stream, batch), &r, refusal);
        }
        let key = OwnedId::from(r.id);
        let before = self.dispatch.inbound.contains_key(&key);
        self.accept_request(stream, frame, &r, batch, None, false, None, ahead.params);
        // Known once the request is ours to answer: a refused one (the inbound limit, a bad
        // progress token) creates no elicitation, so its completion is an unknown id's.
        if method == "elicitation/create"
            && !before
            && self.dispatch.inbound.contains_key(&key)
            && let Some(id) = r.params.and_then(super::elicit::url_elicitation_id)
        {
            self.elicitations.insert(&id);
        }
    }

    /// Takes progress token `token` for a new request of the peer's: false when one of its
    /// requests in flight has it. One a 2025-11-25 task we run still keeps passes to the new
    /// request: the engine does not see a task end unless its result is asked for, and the
    /// peer reusing the token says the task is over for it (the task's later progress is then
    /// refused, `UnknownRequest`).
    fn claim_token(&mut self, token: &OwnedId) -> bool {
        if self
            .dispatch
            .inbound
            .values()
            .any(|e| e.progress_token.as_ref() == Some(token))
        {
            return false;
        }
        self.task_tokens.release(token, false);
        true
    }

    /// Records a request the application will answer and hands it over as an event (or, for a
    /// listen stream, keeps it open for notifications). `index`: what the decoder recorded of
    /// its params, for a session request's `_meta` and `task`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn accept_request(
        &mut self,
        stream: StreamId,
        frame: &str,
        r: &jsonrpc::Request<'_>,
        batch: Option<u32>,
        modern: Option<(ModernContext, ProgressToken)>,
        input_eligible: bool,
        listen: Option<ListenFilter>,
        index: &ParamsIndex,
    ) {
        if self.dispatch.inbound.len() >= self.config.limits.max_inbound_in_flight {
            return self.reject(
                frame,
                (stream, batch),
                r,
                Refusal::new(
                    ViolationKind::TooManyRequests,
                    jsonrpc::INTERNAL_ERROR,
                    "too many requests in flight",
                ),
            );
        }
        // A stateless request's token was read with the rest of its `_meta`.
        let (modern, token, asks_for_task) = match modern {
            Some((ctx, token)) => (Some(ctx), token, false),
            None => {
                let (token, task) = session_params(index, r.params);
                (None, token, task)
            }
        };
        let progress_token = match token {
            Ok(t) => t,
            Err(()) => {
                return self.reject(
                    frame,
                    (stream, batch),
                    r,
                    Refusal::new(
                        ViolationKind::InvalidParams,
                        jsonrpc::INVALID_PARAMS,
                        "invalid _meta.progressToken",
                    ),
                );
            }
        };
        // "The progress token MUST be unique across all active requests": a second request
        // with a token in use would have us send two progress streams under one token, whose
        // values need not increase.
        if let Some(token) = &progress_token
            && !self.claim_token(token)
        {
            return self.reject(
                frame,
                (stream, batch),
                r,
                Refusal::new(
                    ViolationKind::InvalidParams,
                    jsonrpc::INVALID_PARAMS,
                    "_meta.progressToken is already in use by another request",
                ),
            );
        }
        // Compared as decoded text: `tools\/call` is `tools/call`.
        let method = r.method.to_str();
        let method: &str = &method;
        // A listen comes to the application only for review (`Policy::review_listens`).
        let engine_listen = listen.as_ref().is_some_and(|l| !l.pending);
        if modern.is_none() {
            // A tasks/result or tasks/cancel whose answer will end a task's progress token.
            let inbound = &self.dispatch.inbound;
            let live = |end: &OwnedId| inbound.contains_key(end);
            self.task_tokens.watch(method, r.params, r.id, false, live);
        }
        self.dispatch.inbound.insert(
            OwnedId::from(r.id),
            Inbound {
                progress_token,
                last_progress: None,
                input_eligible,
                task_eligible: match modern {
                    Some(_) => method == "tools/call",
                    // 2025-11-25: the request asked for a task, on a method we declared
                    // `tasks.requests.<method>` for.
                    None => {
                        matches!(
                            method,
                            "tools/call" | "sampling/createMessage" | "elicitation/create"
                        ) && self.effective_version() == crate::mcp::ProtocolVersion::V2025_11_25
                            && asks_for_task
                            && mcp::sub_capabilities_with(method, r.params, || Some(true))
                                // (`includeContext` is tolerated above: it does not keep a
                                // task away.)
                                .check(
                                    self.config.capabilities.flags()
                                        | crate::mcp::Caps::SAMPLING_CONTEXT,
                                    true,
                                )
                                .is_ok()
                    }
                },
                cacheable: modern.is_some()
                    && matches!(
                        method,
                        "tools/list"
                            | "prompts/list"
                            | "resources/list"
                            | "resources/templates/list"
                            | "resources/read"
                    ),
                modern,
                listen: listen.map(Box::new),
                batch,
                stream,
            },
        );
        if engine_listen {
            return;
        }
        let cap = self.events.capture(frame);
        let stored = Stored::Request {
            id: cap.id(r.id),
            method: cap.str(r.method),
            params: r.params.map(|p| cap.raw(p)),
        };
        cap.push(stored);
    }

    /// Whether `method` is an MCP method that none of the versions we speak has.
    fn speaks_no_version_of(&self, method: &str) -> bool {
        mcp::is_known_method(method)
            && !self
                .config
                .versions
                .iter()
                .any(|v| mcp::lookup(method, *v).is_some())
    }

    /// Whether an incoming request for `method` must be refused with -32601.
    pub(super) fn incoming_request_refused(&self, method: &str, version: ProtocolVersion) -> bool {
        let from_client = self.role == Role::Server;
        match mcp::lookup(method, version) {
            Some(info) => {
                info.kind != MethodKind::Request
                    || !info.direction.allows(from_client)
                    || matches!(info.gate, Gate::Cap(c) if !self.config.capabilities.has(c))
            }
            // A method of another version is unknown here; anything else is the
            // application's to answer.
            None => mcp::is_known_method(method),
        }
    }

    pub(super) fn on_notification(
        &mut self,
        now: Timestamp,
        frame: &str,
        n: jsonrpc::Notification<'_>,
        index: &ParamsIndex,
    ) {
        let method = n.method.to_str();
        let method: &str = &method;
        match self.lifecycle.admit(MethodKind::Notification, method) {
            Admit::Ignore => return,
            Admit::TooEarly => {
                return self.violation_in(
                    frame,
                    ViolationKind::BeforeInitialization,
                    None,
                    Some(n.method),
                );
            }
            Admit::Yes => {}
        }
        match method {
            "notifications/initialized" if self.role == Role::Server => {
                self.on_initialized(frame, n.method)
            }
            "notifications/cancelled" => self.on_peer_cancel(frame, n.params),
            // (Unless the version has it only from our side, as 2026-07-28 has it only from
            // servers: then it is refused below, as over HTTP.)
            "notifications/progress" if self.incoming_notification_allowed(method) => {
                self.on_progress(now, frame, n.params, index)
            }
            "notifications/elicitation/complete"
                if self.role == Role::Client
                    && self.effective_version() == ProtocolVersion::V2025_11_25 =>
            {
                // Its gate is our own `elicitation.url`: the receiver's, unlike other
                // notifications.
                if !self
                    .config
                    .capabilities
                    .has(crate::mcp::Caps::ELICITATION_URL)
                {
                    return self.violation_in(
                        frame,
                        ViolationKind::NotificationNotAllowed,
                        None,
                        Some(n.method),
                    );
                }
                let id = n.params.and_then(|p| p.unique_str("elicitationId"));
                match id {
                    Some(id) if self.elicitations.complete(&id.to_str()) => {
                        let cap = self.events.capture(frame);
                        let stored = Stored::ElicitationComplete(cap.str(id));
                        cap.push(stored);
                    }
                    _ => {
                        let n = &mut self.stats.ignored_elicitation_completions;
                        *n = n.saturating_add(1);
                    }
                }
            }
            _ => {
                if !self.incoming_notification_allowed(method) {
                    return self.violation_in(
                        frame,
                        ViolationKind::NotificationNotAllowed,
                        None,
                        Some(n.method),
                    );
                }
                let cap = self.events.capture(frame);
                let stored = Stored::Notification {
                    method: cap.str(n.method),
                    params: n.params.map(|p| cap.raw(p)),
                };
                cap.push(stored);
            }
        }
    }

    pub(super) fn incoming_notification_allowed(&self, method: &str) -> bool {
        let version = self.effective_version();
        let from_client = self.role == Role::Server;
        match mcp::lookup(method, version) {
            Some(info) => {
                info.kind == MethodKind::Notification
                    && info.direction.allows(from_client)
                    && match (info.gate, &self.lifecycle.peer_caps) {
                        (Gate::Cap(c), Some(peer)) => peer.has(c),
                        // Before the handshake the sender's capabilities are not known yet;
                        // the lifecycle has already limited what may arrive (logging).
                        (Gate::Cap(_), None) => true,
                        (Gate::None, _) => true,
                    }
            }
            None => !mcp::is_known_method(method),
        }
    }

    pub(super) fn on_peer_cancel(&mut self, frame: &str, params: Option<RawJson<'_>>) {
        let target = params
            .and_then(|p| p.unique("requestId"))
            .and_then(|v| v.as_id());
        let Some(id) = target else {
            self.stats.ignored_cancellations += 1;
            return;
        };
        let key = OwnedId::from(id);
        let Some(entry) = self.dispatch.inbound.get(&key) else {
            if !self.on_listen_torn_down(id) {
                self.stats.ignored_cancellations += 1;
            }
            return;
        };
        let batch = entry.batch;
        // A listen the engine granted never came to the application: nothing to tell it.
        let unseen = entry.listen.as_ref().is_some_and(|l| !l.seen);
        let Some((key, _)) = self.dispatch.inbound.remove_entry(&key) else {
            return;
        };
        if let Some(b) = batch {
            self.batch_member_dropped(b);
        }
        if !unseen {
            let reason = params.and_then(|p| p.unique_str("reason"));
            self.push_peer_cancelled(frame, id, &key, reason);
        }
        self.dispatch.peer_cancelled.insert(key);
        self.maybe_finish_close();
    }

    /// The event for a request the peer cancelled, naming it as the request did: a cancel may
    /// spell a string id with other escapes (`"\u0061"` for `"a"`), which the engine takes
    /// for the same id, but a host comparing the bytes (Go's `ID`, a C `memcmp`) would not.
    fn push_peer_cancelled(
        &mut self,
        frame: &str,
        id: Id<'_>,
        request: &OwnedId,
        reason: Option<JsonStr<'_>>,
    ) {
        let asked = match request.as_id() {
            Id::Str(asked) if !matches!(id, Id::Str(said) if said.raw() == asked.raw()) => asked,
            // (The same spelling, or an integer id: the cancel's frame holds it.)
            _ => {
                let cap = self.events.capture(frame);
                let stored = Stored::PeerCancelled {
                    id: cap.id(id),
                    reason: reason.map(|r| cap.str(r)),
                };
                return cap.push(stored);
            }
        };
        // The request's spelling and the reason, side by side in a text of their own.
        let reason_raw = reason.map(|r| r.raw());
        let text = [asked.raw(), reason_raw.unwrap_or("")].concat();
        let (id_text, reason_text) = text.split_at(asked.raw().len());
        let escaped = |t: &str| t.contains('\\');
        let cap = self.events.capture(&text);
        let stored = Stored::PeerCancelled {
            id: cap.id(Id::Str(JsonStr::validated(id_text, escaped(id_text)))),
            reason: reason_raw
                .map(|_| cap.str(JsonStr::validated(reason_text, escaped(reason_text)))),
        };
        cap.push(stored);
    }

    /// Client, 2026-07-28: the server ended our `subscriptions/listen` `id` with
    /// `notifications/cancelled` ("A server MUST send notifications/cancelled referencing a
    /// subscriptions/listen request ID when it tears down that subscription stream"): the
    /// listen ends as [`Event::Abandoned`](super::Event::Abandoned), so the application can
    /// listen again. Whether `id` was such a listen.
    fn on_listen_torn_down(&mut self, id: Id<'_>) -> bool {
        let Id::Int(n) = id else {
            return false;
        };
        if self.role != Role::Client || !self.corr.pending.get(&n).is_some_and(|p| p.listen) {
            return false;
        }
        self.corr.pending.remove(&n);
        self.corr.our_finished.insert(n);
        self.events.push(Stored::Abandoned(super::RequestId(n)));
        self.maybe_finish_close();
        true
    }

    /// A batch member will never be answered (the peer cancelled it).
    pub(super) fn batch_member_dropped(&mut self, batch: u32) {
        if let Some(c) = self.dispatch.batches.get_mut(&batch) {
            c.outstanding = c.outstanding.saturating_sub(1);
        }
        self.flush_batch_if_done(batch);
    }

    pub(super) fn flush_batch_if_done(&mut self, batch: u32) {
        let done = self
            .dispatch
            .batches
            .get(&batch)
            .is_some_and(|c| c.outstanding == 0);
        if !done {
            return;
        }
        let Some(c) = self.dispatch.batches.remove(&batch) else {
            return;
        };
        if c.written > 0 {
            let out = self.out.output.begin();
            out.push(b'[');
            out.extend_from_slice(&c.buf);
            out.push(b']');
            self.out.output.end_frame(c.stream);
        }
    }
}

/// Whether a frame that could not be decoded gets an error response: not when it looked like
/// a response (answering a response could start a loop).
pub(crate) fn answers_decode_error(e: &DecodeError<'_>) -> bool {
    // Neither a response nor a valid JSON-RPC notification is ever answered.
    if e.is_response_shaped() || e.is_jsonrpc_notification() {
        return false;
    }
    match e.kind() {
        ErrorKind::Parse => true,
        ErrorKind::InvalidRequest => !matches!(
            e.reason(),
            Reason::ResultAndError
                | Reason::MissingId
                | Reason::ErrorNotObject
                | Reason::ErrorCodeNotInteger
                | Reason::ErrorMessageNotString
        ),
    }
}

/// `_meta.progressToken` of a request's params: `Ok(None)` when absent, `Err` when malformed
/// (duplicated keys, or a token that is neither a string nor an integer).
pub(super) type ProgressToken = Result<Option<OwnedId>, ()>;

/// Reads a session request's params (from the decoder's index of them when it has one, else in
/// one pass): its [`ProgressToken`], and whether it has a `task` member (2025-11-25 task
/// augmentation; a duplicated one counts as absent).
fn session_params(index: &ParamsIndex, params: Option<RawJson<'_>>) -> (ProgressToken, bool) {
    let Some(params) = params else {
        return (Ok(None), false);
    };
    let found = index.get_each(params, ["_meta", "task"]);
    let asks_for_task = found.get(1).ok().flatten().is_some();
    (progress_token(found.get(0)), asks_for_task)
}

/// The [`ProgressToken`] in a request's `_meta` member, as `get_unique("_meta")` gave it.
fn progress_token(meta: Result<Option<RawJson<'_>>, DuplicateMember>) -> ProgressToken {
    let Some(meta) = meta.map_err(|_| ())? else {
        return Ok(None);
    };
    if !meta.is_object() {
        return Err(());
    }
    match meta.get_unique("progressToken").map_err(|_| ())? {
        None => Ok(None),
        Some(t) => t.as_id().map(|id| Some(OwnedId::from(id))).ok_or(()),
    }
}

/// The part of a batch's `frame` that holds every view of member `m`: what its events copy.
fn member_text<'f, 'm>(frame: &'f str, m: &Message<'m>) -> &'f str {
    fn id<'m>(id: &Id<'m>) -> Option<&'m str> {
        match id {
            Id::Str(s) => Some(s.raw()),
            Id::Int(_) => None,
        }
    }
    match m {
        Message::Request(r) => covering(
            frame,
            [id(&r.id), Some(r.method.raw()), r.params.map(|p| p.get())]
                .into_iter()
                .flatten(),
        ),
        Message::Notification(n) => covering(
            frame,
            [Some(n.method.raw()), n.params.map(|p| p.get())]
                .into_iter()
                .flatten(),
        ),
        Message::Response(r) => covering(
            frame,
            [id(&r.id), Some(r.result.get())].into_iter().flatten(),
        ),
        Message::Error(e) => covering(
            frame,
            [
                e.id.as_ref().and_then(id),
                Some(e.error.message.raw()),
                e.error.data.map(|d| d.get()),
            ]
            .into_iter()
            .flatten(),
        ),
    }
}

/// The shortest part of `frame` that holds every one of `views` (each a slice of `frame`);
/// empty when there are none. A view from elsewhere (never, from the decoder) gives the whole
/// frame, the copy that is always right.
fn covering<'f, 'v>(frame: &'f str, views: impl Iterator<Item = &'v str>) -> &'f str {
    let base = frame.as_ptr() as usize;
    let mut span: Option<(usize, usize)> = None;
    for v in views {
        let start = (v.as_ptr() as usize).wrapping_sub(base);
        let end = start.wrapping_add(v.len());
        if start > frame.len() || end > frame.len() || end < start {
            debug_assert!(false, "a member's view outside its batch");
            return frame;
        }
        span = Some(span.map_or((start, end), |(a, b)| (a.min(start), b.max(end))));
    }
    match span {
        // Both ends are ends of views, so character boundaries; `get` checks it anyway.
        Some((start, end)) => frame.get(start..end).unwrap_or(frame),
        None => &frame[..0],
    }
}
