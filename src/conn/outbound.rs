//! Outbound commands: what the application asks the engine to send, checked, then written to
//! the output buffer; and the answers the engine writes on its own.
//!
//! State: [`Outbound`] (`Core::out`).
//!
//! Rules enforced here (spec: "Lifecycle" / operation, "Cancellation", "Progress", "Logging",
//! the per-version schema's method unions and error codes; docs/rules.md lists every rule with
//! its test):
//!
//! 1. (all) The engine alone sends `initialize`, `notifications/initialized`,
//!    `notifications/cancelled` and `notifications/progress` (`Error::EngineOwned`,
//!    `check_outgoing`).
//! 2. (all) A new request or notification must be allowed by the phase (lifecycle.rs
//!    `Lifecycle::check_send`), exist in the negotiated version (`NotInVersion`), travel our
//!    way (`WrongDirection`) and be backed by the receiver's capability for a request, ours
//!    for a notification (`NotNegotiated`) (`check_outgoing`; a SHOULD before 2025-06-18, a
//!    MUST from it, enforced in all).
//! 3. (2026-07-28) A server never sends requests (`WrongDirection`); its only free-standing
//!    notifications are list changes and resource updates, which go to the listen streams
//!    that asked for them; anything else is tied to a request (`RequestScoped`)
//!    (`check_outgoing`, `notify`).
//! 4. (all) Params are a JSON object (`InvalidParams`) (`request`, `notify`).
//! 5. (all) Bounds: at most `Limits::max_outbound_in_flight` of our requests
//!    (`TooManyInFlight`), at most `Limits::max_buffered_output` bytes waiting (`OutputFull`);
//!    when an automatic answer finds the output full, the peer is not reading and the
//!    connection closes (`emit_auto`).
//! 6. (all) Answers go only to the peer's requests in flight (`UnknownRequest`); an answer to
//!    a request the peer cancelled is not sent, and counted in `Stats::suppressed_responses`
//!    (`respond`). Error codes must exist in the negotiated version (mod.rs,
//!    `Connection::respond_error`).
//! 7. (2025-03-26) Answers to the members of a batch go out together as one array
//!    (`emit_answer`, with dispatch.rs collecting).
//! 8. (all) Progress goes only to a request that carried a progress token, with finite values
//!    that increase every time; `message` is sent from 2025-03-26 on (`progress`).
//! 9. (all) `cancel` ends one of our requests in flight and sends `notifications/cancelled`;
//!    `initialize` (and the discover probe) cannot be cancelled (`cancel`, `send_cancelled`).
//! 10. (2024-11-05 … 2025-11-25) Logging needs our `logging` capability; (2026-07-28) it goes
//!     only to a request whose `_meta` asked for that level or a lower one (`log`).
//! 11. (2026-07-28) A client writes no responses at all, not even an error about a frame it
//!     could not read (`emit_answer`, `writes_no_answers`).

use std::time::Duration;

use super::output::{Output, StreamId};
use super::stateless::ResultKind;
use super::stateless::{self, retryable_method};
use super::tables::{BoundedSet, PendingKind, RetryBase};
use super::time::Timestamp;
use super::{CloseReason, Core, Error, RequestId, RequestOptions, Role, json_edit};
use crate::jsonrpc::{self, Id, OwnedId, RawJson, write_json_string};
use crate::mcp::{self, Caps, Era, Gate, LogLevel, MethodKind, ProtocolVersion};

/// The bytes waiting for the transport, and scratch space to build messages in.
#[derive(Default)]
pub(super) struct Outbound {
    pub(super) output: Output,
    pub(super) scratch: Vec<u8>,
}

/// An answer to a peer's request.
#[derive(Clone, Copy)]
pub(super) enum Answer<'a> {
    Result(RawJson<'a>),
    Error {
        code: i64,
        message: &'a str,
        data: Option<RawJson<'a>>,
    },
}

impl Core {
    /// Whether the output is under its bound, counting the answers collected for batches
    /// still open (they are output not yet written: a peer that keeps batches open with one
    /// slow request each and fills them with members the engine refuses held them outside
    /// the bound, up to `max_inbound_in_flight` arrays).
    pub(super) fn output_has_room(&self) -> bool {
        self.out.output.buffered() + self.dispatch.batch_bytes()
            < self.config.limits.max_buffered_output
    }

    /// Whether a notification about the peer's request `key` (its progress, a log), or a
    /// request made for it, has room.
    /// For a member of a batch still open, the answers collected for batches are not counted:
    /// they go out only once every member is answered, this one included, so an application
    /// that waits for room to report on it before answering (as `OutputFull` asks) would wait
    /// for good. What does count, the output itself, drains as the peer reads.
    pub(super) fn room_for_notice_of(&self, key: &OwnedId) -> bool {
        match self.dispatch.inbound.get(key) {
            Some(entry) if entry.batch.is_some() => {
                self.out.output.buffered() < self.config.limits.max_buffered_output
            }
            _ => self.output_has_room(),
        }
    }

    /// Writes a frame produced by the engine on its own (an automatic answer). If the peer is
    /// not reading, the connection ends instead.
    pub(super) fn emit_auto(&mut self, stream: StreamId, write: impl FnOnce(&mut Vec<u8>)) {
        if !self.output_has_room() {
            self.finish(CloseReason::PeerNotReading);
            return;
        }
        write(self.out.output.begin());
        self.out.output.end_frame(stream);
    }

    /// Whether nothing we write may be a response: a client in the stateless era ("The client
    /// MUST NOT write JSON-RPC responses", stdio, 2026-07-28), not even an error about a frame
    /// it could not read. A client that starts stateless and cannot fall back to the handshake
    /// is in that era from its first byte, while its discover probe is out too.
    pub(super) fn writes_no_answers(&self) -> bool {
        self.role == Role::Client
            && match self.lifecycle.era {
                Some(era) => era == Era::Modern,
                None => self.config.client_start() == Some(Era::Modern),
            }
    }

    /// Sends an answer to a request of the peer's, to its batch or its stream.
    pub(super) fn emit_answer(
        &mut self,
        batch: Option<u32>,
        stream: StreamId,
        id: Option<Id<'_>>,
        answer: Answer<'_>,
        automatic: bool,
    ) {
        if self.writes_no_answers() {
            return;
        }
        let write = |out: &mut Vec<u8>| match answer {
            Answer::Result(result) => {
                if let Some(id) = id {
                    jsonrpc::encode_response(out, id, result)
                }
            }
            Answer::Error {
                code,
                message,
                data,
            } => jsonrpc::encode_error(out, id, code, message, data),
        };
        // An automatic answer going into a batch's array (an invalid member's error, a ping's
        // answer) finds room as one written alone does: a peer that sends batches and never
        // reads grew our output without bound, the array written with no look at the room.
        if automatic
            && batch.is_some_and(|b| self.dispatch.batches.contains_key(&b))
            && !self.output_has_room()
        {
            self.finish(CloseReason::PeerNotReading);
            return;
        }
        if let Some(b) = batch
            && let Some(collector) = self.dispatch.batches.get_mut(&b)
        {
            if collector.written > 0 {
                collector.buf.push(b',');
            }
            write(&mut collector.buf);
            collector.written += 1;
            collector.outstanding = collector.outstanding.saturating_sub(1);
            self.flush_batch_if_done(b);
            return;
        }
        if automatic {
            self.emit_auto(stream, write);
        } else {
            write(self.out.output.begin());
            self.out.output.end_frame(stream);
        }
    }

    /// Checks that we may send `method` as a new request or notification.
    pub(super) fn check_outgoing(&self, kind: MethodKind, method: &str) -> Result<(), Error> {
        if matches!(
            method,
            "initialize"
                | "notifications/initialized"
                | "notifications/cancelled"
                | "notifications/progress"
        ) {
            return Err(Error::EngineOwned);
        }
        self.lifecycle.check_send(kind, method)?;
        self.check_method(kind, method)
    }

    /// The rules of [`check_outgoing`](Self::check_outgoing) that depend on the method (its
    /// era, direction and capability), not on the lifecycle's phase.
    pub(super) fn check_method(&self, kind: MethodKind, method: &str) -> Result<(), Error> {
        if self.role == Role::Server && self.lifecycle.era == Some(Era::Modern) {
            // The stateless era: a server never sends requests, and its notifications are
            // tied to a request (logging, progress) or to a listen stream (list changes).
            return match (kind, method) {
                (MethodKind::Request, _) => Err(Error::WrongDirection),
                (
                    MethodKind::Notification,
                    "notifications/tools/list_changed"
                    | "notifications/prompts/list_changed"
                    | "notifications/resources/list_changed"
                    | "notifications/resources/updated"
                    | "notifications/tasks",
                ) => {
                    // Ours to send only when we declared its capability, as in any era (a
                    // listen is granted only what we declared, so it would reach no one).
                    match mcp::lookup(method, self.effective_version()).map(|i| i.gate) {
                        Some(Gate::Cap(c)) if !self.config.capabilities.has(c) => {
                            Err(Error::NotNegotiated(c))
                        }
                        _ => Ok(()),
                    }
                }
                _ => Err(Error::RequestScoped),
            };
        }
        let version = self.effective_version();
        let from_client = self.role == Role::Client;
        match mcp::lookup(method, version) {
            Some(info) => {
                if info.kind != kind || !info.direction.allows(from_client) {
                    return Err(Error::WrongDirection);
                }
                if let Gate::Cap(c) = info.gate {
                    let declared = match kind {
                        // The tasks extension's requests need both sides' declarations: a
                        // server refuses them from a client that did not declare it (-32021).
                        MethodKind::Request if c == Caps::TASKS_EXTENSION => {
                            self.config.capabilities.has(c)
                                && self.lifecycle.peer_caps.as_ref().is_some_and(|p| p.has(c))
                        }
                        // A request needs the receiver's capability…
                        MethodKind::Request => {
                            self.lifecycle.peer_caps.as_ref().is_some_and(|p| p.has(c))
                        }
                        // …a notification the sender's, but for the completion of a URL-mode
                        // elicitation, which needs the client's `elicitation.url`.
                        MethodKind::Notification
                            if method == "notifications/elicitation/complete" =>
                        {
                            self.lifecycle.peer_caps.as_ref().is_some_and(|p| p.has(c))
                        }
                        MethodKind::Notification => self.config.capabilities.has(c),
                    };
                    if !declared {
                        return Err(Error::NotNegotiated(c));
                    }
                }
                Ok(())
            }
            None if mcp::is_known_method(method) => Err(Error::NotInVersion),
            None => Ok(()),
        }
    }

    pub(super) fn request(
        &mut self,
        now: Timestamp,
        method: &str,
        params: Option<RawJson<'_>>,
        options: RequestOptions,
        stream: StreamId,
        parent: Option<&OwnedId>,
    ) -> Result<RequestId, Error> {
        self.check_outgoing(MethodKind::Request, method)?;
        // With the progress option, `set_meta` below refuses a token of the application's.
        if params.is_some_and(|p| !p.is_object() || (!options.progress && own_progress_token(p))) {
            return Err(Error::InvalidParams);
        }
        // Sub-capabilities (elicitation modes, sampling tools and context, task augmentation):
        // what the peer declared must cover what the params ask for.
        let peer = self
            .lifecycle
            .peer_caps
            .as_ref()
            .map(|c| c.flags())
            .unwrap_or_default();
        let version = self.effective_version();
        // Before 2025-11-25 no URL mode or sampling tools exist, and nothing gates
        // `includeContext`.
        let peer = mcp::sub_capabilities_in(peer, version);
        let tasks_apply = version == ProtocolVersion::V2025_11_25;
        // A `task` member twice is malformed (`None`) wherever it is read.
        let task_member = match params {
            Some(p)
                if tasks_apply
                    && matches!(
                        method,
                        "tools/call" | "sampling/createMessage" | "elicitation/create"
                    ) =>
            {
                p.get_unique("task").ok().map(|t| t.is_some())
            }
            _ => Some(false),
        };
        let task_augmented = task_member == Some(true);
        // Task flags count only where tasks apply, so elsewhere the params need no second look.
        match mcp::sub_capabilities_with(method, params, || task_member).check(peer, tasks_apply) {
            Ok(()) => {}
            Err(mcp::SubCapability::Needs(cap)) => return Err(Error::NotNegotiated(cap)),
            Err(mcp::SubCapability::Malformed) => return Err(Error::InvalidParams),
        }
        if method == "elicitation/create" && super::elicit::incomplete_url_request(params) {
            return Err(Error::InvalidParams);
        }
        if self.corr.pending.len() >= self.config.limits.max_outbound_in_flight {
            return Err(Error::TooManyInFlight);
        }
        // A request made for one of the peer's (sampling for a tool call, say) has the room
        // that request's reports have: one in a batch may not wait for its siblings' answers.
        let room = parent.map_or_else(|| self.output_has_room(), |p| self.room_for_notice_of(p));
        if !room {
            return Err(Error::OutputFull);
        }
        let id = self.corr.next_id;
        let stateless = self.role == Role::Client && self.lifecycle.era == Some(Era::Modern);
        let mut scratch = std::mem::take(&mut self.out.scratch);
        scratch.clear();
        let edited = if stateless {
            self.stateless_params(&mut scratch, params, options.progress.then_some(id))
                .map(|()| true)
        } else if options.progress {
            let token = json_edit::IntText::new(id);
            json_edit::set_meta(&mut scratch, params, &[("progressToken", token.as_bytes())])
                .map(|()| true)
                .map_err(|_| Error::InvalidParams)
        } else {
            Ok(false)
        };
        let sent = match edited {
            Ok(true) => std::str::from_utf8(&scratch).ok().map(RawJson::validated),
            Ok(false) => params,
            Err(e) => {
                self.out.scratch = scratch;
                return Err(e);
            }
        };
        let out = self.out.output.begin();
        jsonrpc::encode_request(out, Id::Int(id), method, sent);
        self.out.output.end_frame(stream);
        crate::frame::empty(&mut scratch);
        self.out.scratch = scratch;
        self.corr.next_id += 1;
        // A request that may come back "input required" keeps what a retry needs.
        let retry = match retryable_method(method) {
            Some(method) if stateless => Some(RetryBase {
                method,
                params: params.map(|p| self.stateless.pooled_string(p.get())),
                options,
            }),
            _ => None,
        };
        let timeout = match options.timeout {
            Some(t) => t,
            // A listen stream lasts until it is cancelled.
            None if method == "subscriptions/listen" => Duration::MAX,
            None => self.config.request_timeout,
        };
        let reset = options
            .reset_on_progress
            .unwrap_or(self.config.policy.reset_timeout_on_progress);
        self.track(
            now,
            id,
            PendingKind::Normal,
            timeout,
            retry,
            options.progress,
            reset,
        );
        if let Some(p) = self.corr.pending.get_mut(&id) {
            p.task_augmented = task_augmented;
            p.listen = method == "subscriptions/listen";
            p.stream = stream;
        }
        if tasks_apply {
            let pending = &self.corr.pending;
            let live = |end: &OwnedId| matches!(end, OwnedId::Int(n) if pending.get(n).is_some());
            self.task_tokens
                .watch(method, params, Id::Int(id), true, live);
        }
        Ok(RequestId(id))
    }

    pub(super) fn notify(
        &mut self,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Result<(), Error> {
        self.check_outgoing(MethodKind::Notification, method)?;
        if params.is_some_and(|p| !p.is_object()) {
            return Err(Error::InvalidParams);
        }
        if !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        if self.role == Role::Server && self.lifecycle.era == Some(Era::Modern) {
            return self.notify_listeners(method, params).map(|_| ());
        }
        let out = self.out.output.begin();
        jsonrpc::encode_notification(out, method, params);
        self.out.output.end_frame(StreamId::MAIN);
        Ok(())
    }

    pub(super) fn respond(&mut self, id: Id<'_>, answer: Answer<'_>) -> Result<(), Error> {
        self.respond_as(id, answer, ResultKind::Complete)
    }

    /// [`respond`](Self::respond); `kind` lets a `resultType` of `"task"` or
    /// `"input_required"` through (the one way each goes out is `respond_task` or
    /// `respond_input_required`, which checked that the request may get it).
    pub(super) fn respond_as(
        &mut self,
        id: Id<'_>,
        answer: Answer<'_>,
        kind: ResultKind,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let key = OwnedId::from(id);
        let Some(entry) = self.dispatch.inbound.get(&key) else {
            if self.dispatch.peer_cancelled.contains(&key) {
                self.stats.suppressed_responses += 1;
                return Ok(());
            }
            return Err(Error::UnknownRequest);
        };
        // (A batch member's answer is taken whatever the room: its array goes out only once
        // every member is answered, so refusing it could leave the batch waiting for good.)
        if entry.batch.is_none() && !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        let (batch, stream, modern) = (entry.batch, entry.stream, entry.modern.is_some());
        let cacheable = entry.cacheable;
        if modern && let Answer::Result(result) = answer {
            // 2026-07-28: every result carries `resultType` and our `serverInfo`.
            let mut stamped = std::mem::take(&mut self.out.scratch);
            stamped.clear();
            let ok = self
                .stamp_result(&mut stamped, result, cacheable, kind)
                .is_ok();
            if ok && let Ok(text) = std::str::from_utf8(&stamped) {
                let stored = self.dispatch.inbound.remove_entry(&key).map(|(k, _)| k);
                let answer = Answer::Result(RawJson::validated(text));
                let id = stored.as_ref().map_or(id, OwnedId::as_id);
                self.emit_answer(batch, stream, Some(id), answer, false);
            }
            crate::frame::empty(&mut stamped);
            self.out.scratch = stamped;
            if ok {
                self.maybe_finish_close();
            }
            return if ok {
                Ok(())
            } else {
                Err(Error::InvalidParams)
            };
        }
        // A 2025-11-25 tasks/result or tasks/cancel answered: its task is terminal.
        self.task_tokens.answered(&key, false);
        // Written with the request's own id, as it came: the caller's names the same request
        // (ids compare decoded), but one it built itself (an `OwnedId::Str` of decoded text,
        // say) need not be valid JSON string content, and would break the frame.
        let stored = self.dispatch.inbound.remove_entry(&key).map(|(k, _)| k);
        let id = stored.as_ref().map_or(id, OwnedId::as_id);
        self.emit_answer(batch, stream, Some(id), answer, false);
        // The last answer a graceful close waited for ends it.
        self.maybe_finish_close();
        Ok(())
    }

    pub(super) fn progress(
        &mut self,
        id: Id<'_>,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        // A ping with a progress token may come before `initialize`: nothing goes out yet.
        if self.lifecycle.era_unknown() {
            return Err(Error::NotInitialized);
        }
        let key = OwnedId::from(id);
        let room = self.room_for_notice_of(&key);
        // A request in flight, or one answered with a 2025-11-25 task handle whose token
        // stays with the task (correlation.rs rule 8).
        // `related`: the task whose progress this is ("All requests, notifications, and
        // responses related to a task MUST include the io.modelcontextprotocol/related-task
        // key in their _meta", 2025-11-25).
        let (token, last_progress, stream, related) = match self.dispatch.inbound.get_mut(&key) {
            // A listen stream carries the notifications it asked for and nothing else: a
            // token in its `_meta` is not one to report progress on.
            Some(entry) if entry.listen.is_some() => return Err(Error::NoProgressToken),
            Some(entry) => (
                entry.progress_token.clone(),
                &mut entry.last_progress,
                entry.stream,
                None,
            ),
            // A task's: its request's own stream ended with the task handle (over HTTP, the
            // POST response), so the progress goes where unrelated messages go (the
            // session's GET stream).
            None => match self.task_tokens.by_request(&key, false) {
                Some(t) => (
                    Some(t.token.clone()),
                    &mut t.last_progress,
                    StreamId::MAIN,
                    Some(t.task.clone()),
                ),
                None => return Err(Error::UnknownRequest),
            },
        };
        let Some(token) = token else {
            return Err(Error::NoProgressToken);
        };
        if !progress.is_finite()
            || total.is_some_and(|t| !t.is_finite())
            || last_progress.is_some_and(|last| progress <= last)
        {
            return Err(Error::NonIncreasingProgress);
        }
        if !room {
            return Err(Error::OutputFull);
        }
        *last_progress = Some(progress);
        let with_message = self.effective_version() >= ProtocolVersion::V2025_03_26;
        let mut params = std::mem::take(&mut self.out.scratch);
        params.clear();
        params.extend_from_slice(b"{\"progressToken\":");
        stateless::write_id(&mut params, token.as_id());
        params.extend_from_slice(b",\"progress\":");
        json_edit::write_number(&mut params, progress);
        if let Some(total) = total {
            params.extend_from_slice(b",\"total\":");
            json_edit::write_number(&mut params, total);
        }
        if let (Some(m), true) = (message, with_message) {
            params.extend_from_slice(b",\"message\":");
            jsonrpc::write_json_string(&mut params, m);
        }
        if let Some(task) = related {
            params.extend_from_slice(b",\"_meta\":{");
            jsonrpc::write_json_string(&mut params, crate::tasks::RELATED_TASK);
            params.extend_from_slice(b":{\"taskId\":");
            jsonrpc::write_json_string(&mut params, &task);
            params.extend_from_slice(b"}}");
        }
        params.push(b'}');
        if let Ok(text) = std::str::from_utf8(&params) {
            let out = self.out.output.begin();
            jsonrpc::encode_notification(
                out,
                "notifications/progress",
                Some(RawJson::validated(text)),
            );
            self.out.output.end_frame(stream);
        }
        self.out.scratch = params;
        Ok(())
    }

    /// Tells the peer that nobody awaits our request `id` any more, with
    /// `notifications/cancelled`; except a 2025-11-25 task-augmented request whose task handle
    /// has not come: for those "the `tasks/cancel` request MUST be used instead", and there is
    /// no task id to name yet. It is remembered instead: if its handle still comes, the task
    /// gets `tasks/cancel` (correlation.rs, rule 9).
    pub(super) fn send_cancelled_unless_task(
        &mut self,
        id: i64,
        task_augmented: bool,
        stream: StreamId,
        reason: Option<&str>,
    ) {
        if task_augmented {
            let remembered = self.config.limits.max_remembered_ids;
            self.corr
                .abandoned_tasks
                .get_or_insert_with(|| Box::new(BoundedSet::new(remembered)))
                .insert(id);
        } else {
            self.send_cancelled(id, stream, reason);
        }
    }

    /// Sends `notifications/cancelled` for our request `id`. The engine's own (a time-out's, a
    /// failed exchange's, a close's) is a courtesy the spec only recommends: with the output
    /// at its bound it is left out (the request ends all the same, and a late answer is
    /// dropped), rather than ending the connection as a peer that does not read; the output
    /// may be over its bound because of one large message a reading peer is still taking. It
    /// goes on `stream`, the request's own.
    pub(super) fn send_cancelled(&mut self, id: i64, stream: StreamId, reason: Option<&str>) {
        if !self.output_has_room() {
            return;
        }
        let mut params = std::mem::take(&mut self.out.scratch);
        params.clear();
        params.extend_from_slice(b"{\"requestId\":");
        json_edit::write_int(&mut params, id);
        if let Some(r) = reason {
            params.extend_from_slice(b",\"reason\":");
            jsonrpc::write_json_string(&mut params, r);
        }
        params.push(b'}');
        if let Ok(text) = std::str::from_utf8(&params) {
            let raw = RawJson::validated(text);
            self.emit_auto(stream, |out| {
                jsonrpc::encode_notification(out, "notifications/cancelled", Some(raw))
            });
        }
        self.out.scratch = params;
    }

    pub(super) fn cancel(
        &mut self,
        _now: Timestamp,
        request: RequestId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let Some(p) = self.corr.pending.get(&request.0) else {
            return Err(Error::UnknownRequest);
        };
        if p.kind != PendingKind::Normal {
            return Err(Error::CannotCancelInitialize);
        }
        if !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        self.end_ours(request.0, reason);
        self.maybe_finish_close();
        Ok(())
    }

    /// Ends our request `n` in flight as [`cancel`](Self::cancel) does, whatever room the
    /// output has (the cancellation is then left out, as a timeout's is).
    pub(super) fn end_ours(&mut self, n: i64, reason: Option<&str>) {
        let Some(p) = self.corr.pending.remove(&n) else {
            return;
        };
        let retry = self.stateless.take_retry(n);
        self.stateless.recycle_retry(retry);
        self.corr.our_finished.insert(n);
        self.send_cancelled_unless_task(n, p.task_augmented, p.stream, reason);
    }

    /// Server: sends a log message for a request, if the request asked for that level.
    pub(super) fn log(
        &mut self,
        id: Id<'_>,
        level: LogLevel,
        logger: Option<&str>,
        data: RawJson<'_>,
    ) -> Result<bool, Error> {
        // `notifications/message` goes from server to client only. Like progress, a log about
        // a request not yet answered still goes out during a graceful close.
        if self.role == Role::Client {
            return Err(Error::WrongDirection);
        }
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        // A ping the application answers may come before `initialize`: nothing goes out yet.
        if self.lifecycle.era_unknown() {
            return Err(Error::NotInitialized);
        }
        let key = OwnedId::from(id);
        let Some(entry) = self.dispatch.inbound.get(&key) else {
            return Err(Error::UnknownRequest);
        };
        let stream = entry.stream;
        // "Servers that emit log message notifications MUST declare the logging capability",
        // in both eras.
        if !self.config.capabilities.has(Caps::LOGGING) {
            return Err(Error::NotNegotiated(Caps::LOGGING));
        }
        let allowed = match entry.modern {
            // "MUST NOT deliver it on a subscriptions/listen stream" (2026-07-28 logging).
            Some(_) if entry.listen.is_some() => false,
            Some(ctx) => ctx.log_level.is_some_and(|min| level >= min),
            // Handshake era: logging is per connection.
            None => true,
        };
        if !allowed {
            return Ok(false);
        }
        if !self.room_for_notice_of(&key) {
            return Err(Error::OutputFull);
        }
        let mut params = std::mem::take(&mut self.out.scratch);
        params.clear();
        params.extend_from_slice(b"{\"level\":");
        write_json_string(&mut params, level.as_str());
        if let Some(logger) = logger {
            params.extend_from_slice(b",\"logger\":");
            write_json_string(&mut params, logger);
        }
        params.extend_from_slice(b",\"data\":");
        params.extend_from_slice(data.get().as_bytes());
        params.push(b'}');
        if let Ok(text) = std::str::from_utf8(&params) {
            let out = self.out.output.begin();
            jsonrpc::encode_notification(
                out,
                "notifications/message",
                Some(RawJson::validated(text)),
            );
            self.out.output.end_frame(stream);
        }
        self.out.scratch = params;
        Ok(true)
    }
}

/// Whether request params carry a `_meta.progressToken` of the application's own, or a `_meta`
/// twice (which the receiver may read as either). The engine owns progress tokens: it uses
/// the request's id ([`RequestOptions::progress`]), and a token of the application's could
/// repeat another active request's ("MUST be unique across all active requests",
/// progress.mdx) or go uncorrelated. Params with no `_meta` and no escape (a key may be
/// written with escapes) cost two SIMD searches and no walk.
fn own_progress_token(params: RawJson<'_>) -> bool {
    let text = params.get();
    if !text.contains("_meta") && !text.contains('\\') {
        return false;
    }
    match params.get_unique("_meta") {
        Ok(Some(meta)) => meta
            .get_unique("progressToken")
            .map_or(true, |t| t.is_some()),
        Ok(None) => false,
        Err(_) => true,
    }
}
