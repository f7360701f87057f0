//! Correlation and timers: our requests in flight, matched with the answers, progress and
//! deadlines that concern them.
//!
//! State: [`Correlation`] (`Core::corr`).
//!
//! Rules enforced here (spec: "Basic" / JSON-RPC responses, "Cancellation", "Progress" and
//! "Lifecycle" / timeouts; docs/rules.md lists every rule with its test):
//!
//! 1. (all) Our request ids are integers counting up from 1, never reused on a connection. A
//!    response whose id is a string never matches one of ours, whatever its digits
//!    (`on_response`).
//! 2. (all) A late answer to a cancelled request is dropped: an answer to a request we
//!    cancelled or that timed out (remembered up to `Limits::max_remembered_ids`) is dropped
//!    quietly and counted in `Stats::late_responses`; an answer to an id we never used, or
//!    one more answer to a request already answered (or ended by an invalid answer), is an
//!    `UnknownResponse` violation (`on_response`).
//! 3. (all) Every request has a timeout (`Config::request_timeout`, or per request; none for a
//!    2026-07-28 `subscriptions/listen` stream). When it passes, the request ends with
//!    `Event::TimedOut` and the peer gets `notifications/cancelled` with reason "timed out"
//!    (not with the output full, nor for a 2025-11-25 task-augmented request: rule 9).
//!    The engine's `initialize` timing out closes the connection; the auto-mode discover
//!    probe timing out falls back to the handshake era (`on_timeout`).
//! 4. (all) Progress is accepted only for our requests in flight that asked for it (the token
//!    is the request id); progress for anything else is dropped and counted. Under
//!    `ProgressPolicy::DropNonIncreasing` a value that does not increase is dropped and
//!    counted (`on_progress`).
//! 5. (2025-03-26 …, "MAY reset on progress") Progress restarts the timeout when asked, but
//!    never past `Config::max_total_timeout` from the start (`on_progress`).
//! 6. (all) The timer heap holds at most a constant factor of the requests in flight: stale
//!    entries are checked when they fire and compacted away (`Correlation::compact_timers`).
//! 7. (2026-07-28) A result is classified by `resultType` before it becomes an event
//!    (`on_response`, with stateless.rs `classify_result`).
//! 8. (2025-11-25) A task-augmented request's progress token outlives the task handle ("MUST
//!    continue to be used for progress notifications throughout the task's lifetime"): on
//!    both sides it stays with the task ([`TaskTokens`]) until the answer to a `tasks/result`
//!    or `tasks/cancel` for the task crosses (either means the task is terminal), at most
//!    `Limits::max_inbound_in_flight` tasks and 1 MiB of their ids and tokens (the oldest
//!    goes first), plus at most 16 watched request ids of up to 1 KiB each per task
//!    (`on_response`, `on_progress`; outbound.rs `progress`). Such requests that end
//!    unanswered (cancelled, timed out) are no longer watched ([`TaskTokens::watch`]).
//! 9. (2025-11-25) A task-augmented request of ours that ends before its task handle comes
//!    (timeout, cancellation, close) gets no `notifications/cancelled` ("the `tasks/cancel`
//!    request MUST be used instead", and there is no task id yet). If the handle still comes,
//!    the engine sends `tasks/cancel` for that task where the peer declared `tasks.cancel`,
//!    waits at most 30 s (or the request timeout, if shorter) and drops its answer
//!    (`cancel_late_task`; outbound.rs `send_cancelled_unless_task`).

use std::time::Duration;

use super::event::{Stored, TransportFailure};
use super::stateless::Classified;
use super::tables::{
    BoundedSet, HeapBytes, Pending, PendingKind, RetryBase, SeqMap, TimerKey, Timers,
};
use super::time::Timestamp;
use super::{CloseReason, Core, ProgressPolicy, RequestId, StreamId, ViolationKind};
use crate::jsonrpc::{self, Id, OwnedId, ParamsIndex, RawJson};

/// The longest the engine waits for the answer to its own `tasks/cancel` (rule 9).
const CANCEL_TASK_TIMEOUT: Duration = Duration::from_secs(30);

/// 2025-11-25: a task whose request's progress token is still in use after the task handle.
pub(super) struct TaskToken {
    /// The task's id.
    pub(super) task: Box<str>,
    /// The request that created the task: the peer's (server), ours (client).
    pub(super) request: OwnedId,
    /// Whether that request was ours (the peer runs the task) rather than the peer's (we run
    /// it). Both sides number their requests from 1, so an id alone names no entry.
    pub(super) ours: bool,
    /// Its progress token (the client's tokens are its request ids).
    pub(super) token: OwnedId,
    pub(super) last_progress: Option<f64>,
    /// The `tasks/result` and `tasks/cancel` requests about the task in flight: the answer to
    /// either means the task is terminal.
    pub(super) ends: Vec<OwnedId>,
}

/// The tasks whose progress tokens stay in use (rule 8), oldest first. Boxed, and allocated
/// with the first: most connections never see a task, and an idle connection stays under
/// 2 KiB (`tests/hostile.rs`).
#[derive(Default)]
pub(super) struct TaskTokens {
    // One pointer inline rather than a deque's four words.
    entries: Option<Box<KeptTasks>>,
}

#[derive(Default)]
struct KeptTasks {
    list: std::collections::VecDeque<TaskToken>,
    /// What the entries' ids and tokens hold on the heap, at most [`TaskTokens::MAX_BYTES`]
    /// (or one entry's weight past it): the peer's ids, tokens and task ids are as long as
    /// its frames allow, and outlive the requests that brought them.
    bytes: usize,
}

impl TaskToken {
    /// What it holds on the heap, but for `ends` (bounded by [`TaskTokens::MAX_END_ID`]).
    fn weight(&self) -> usize {
        self.task.len() + self.request.heap_bytes() + self.token.heap_bytes()
    }
}

impl TaskTokens {
    /// The most the kept tasks' ids and tokens may hold on the heap.
    const MAX_BYTES: usize = 1 << 20;
    /// The most `tasks/result` or `tasks/cancel` requests watched per task (rule 8).
    const MAX_ENDS: usize = 16;
    /// A longer id of a `tasks/result` or `tasks/cancel` request is not watched: its task's
    /// token then lives until the task is forgotten as the oldest, which only such a peer's
    /// own tasks pay for.
    const MAX_END_ID: usize = 1024;

    /// Keeps `entry`, dropping the oldest beyond `cap` entries or [`Self::MAX_BYTES`].
    pub(super) fn add(&mut self, entry: TaskToken, cap: usize) {
        let kept = self.entries.get_or_insert_default();
        let w = entry.weight();
        while (kept.list.len() >= cap.max(1) || kept.bytes + w > Self::MAX_BYTES)
            && let Some(old) = kept.list.pop_front()
        {
            kept.bytes -= old.weight();
        }
        kept.bytes += w;
        kept.list.push_back(entry);
    }

    /// The task created by `request`, ours (`ours`) or the peer's.
    pub(super) fn by_request(&mut self, request: &OwnedId, ours: bool) -> Option<&mut TaskToken> {
        (self.entries.as_mut()?)
            .list
            .iter_mut()
            .find(|e| e.ours == ours && e.request == *request)
    }

    /// Forgets the entries `gone` names.
    fn forget(&mut self, gone: impl Fn(&TaskToken) -> bool) {
        if let Some(kept) = self.entries.as_mut()
            && !kept.list.is_empty()
        {
            let mut bytes = kept.bytes;
            kept.list.retain(|e| {
                let drop = gone(e);
                if drop {
                    bytes -= e.weight();
                }
                !drop
            });
            kept.bytes = bytes;
        }
    }

    /// Forgets the task of `ours` (see [`TaskToken::ours`]) that keeps progress token `token`,
    /// if one does.
    pub(super) fn release(&mut self, token: &OwnedId, ours: bool) {
        self.forget(|e| e.ours == ours && e.token == *token);
    }

    /// Notes request `id` (`method` with `params`) if it is a `tasks/result` or `tasks/cancel`
    /// about a task we keep: its answer ends the task's token. `ours`: the request is ours,
    /// about a task the peer runs for a request of ours; else the peer's, about one we run.
    /// `live` says whether an earlier such request is still in flight: one that ended
    /// unanswered (cancelled by the peer, timed out, failed) is no longer watched, so that
    /// the requests that did so never fill the task's list. Costs a request nothing more (no
    /// owned id) while no task is kept.
    pub(super) fn watch(
        &mut self,
        method: &str,
        params: Option<RawJson<'_>>,
        id: Id<'_>,
        ours: bool,
        live: impl Fn(&OwnedId) -> bool,
    ) {
        let Some(kept) = self.entries.as_mut() else {
            return;
        };
        if kept.list.is_empty() || !matches!(method, "tasks/result" | "tasks/cancel") {
            return;
        }
        let task = params.and_then(|p| p.unique_str("taskId"));
        let long = matches!(id, Id::Str(s) if s.raw().len() > Self::MAX_END_ID);
        if let Some(task) = task
            && !long
            && let Some(e) = kept
                .list
                .iter_mut()
                .find(|e| e.ours == ours && task.eq_str(&e.task))
        {
            e.ends.retain(|end| live(end));
            if e.ends.len() >= Self::MAX_ENDS {
                e.ends.remove(0);
            }
            e.ends.push(OwnedId::from(id));
        }
    }

    /// The answer to request `id` (ours when `ours`, else the peer's) crossed: a task it was
    /// about is terminal.
    pub(super) fn answered(&mut self, id: &OwnedId, ours: bool) {
        self.forget(|e| e.ours == ours && e.ends.contains(id));
    }
}

/// Whether `progress` moves on from `last`, or `policy` takes it anyway; it is noted as the
/// last when taken.
fn advances(last: &mut Option<f64>, progress: f64, policy: ProgressPolicy) -> bool {
    if last.is_some_and(|l| progress <= l) && policy == ProgressPolicy::DropNonIncreasing {
        return false;
    }
    *last = Some(progress);
    true
}

/// Our requests in flight, the ids we hand out, and the deadlines.
pub(super) struct Correlation {
    pub(super) pending: SeqMap<Pending>,
    /// Our requests that timed out or were cancelled: answers to them are late.
    pub(super) our_finished: BoundedSet<i64>,
    /// Those of them that were 2025-11-25 task-augmented requests: a task handle that still
    /// comes for one gets `tasks/cancel` (rule 9). Made when the first such request ends
    /// (rare), so that a connection without one stays small.
    pub(super) abandoned_tasks: Option<Box<BoundedSet<i64>>>,
    pub(super) timers: Timers,
    /// The id of our next request.
    pub(super) next_id: i64,
}

impl Correlation {
    pub(super) fn new(remembered: usize) -> Correlation {
        Correlation {
            pending: SeqMap::default(),
            our_finished: BoundedSet::new(remembered),
            abandoned_tasks: None,
            timers: Timers::default(),
            next_id: 1,
        }
    }

    /// Rebuilds the timer heap from the live deadlines when finished requests' stale entries
    /// dominate, so it stays within a constant factor of what is in flight (amortized O(1)).
    pub(super) fn compact_timers(&mut self, closing: Option<Timestamp>) {
        let close = closing.map(|d| (d, TimerKey::CloseGrace));
        let live = self
            .pending
            .iter()
            .filter(|(_, p)| p.timeout != Duration::MAX)
            .map(|(n, p)| (p.deadline, TimerKey::Request(*n)))
            .chain(close);
        self.timers.compact(live, self.pending.len() + 1);
    }

    /// The handshake is over: shrink the table its entry was in, and drop its timer so the
    /// next deadline is a real one.
    pub(super) fn release_handshake_memory(&mut self, closing: Option<Timestamp>) {
        if self.pending.is_empty() {
            self.pending = SeqMap::default();
        } else {
            self.pending.shrink_to_fit();
        }
        let close = closing.map(|d| (d, TimerKey::CloseGrace));
        let live = self
            .pending
            .iter()
            .filter(|(_, p)| p.timeout != Duration::MAX)
            .map(|(n, p)| (p.deadline, TimerKey::Request(*n)))
            .chain(close);
        self.timers.rebuild(live);
    }
}

impl Core {
    pub(super) fn on_response(
        &mut self,
        now: Timestamp,
        frame: &str,
        id: Id<'_>,
        outcome: Result<RawJson<'_>, jsonrpc::ErrorObject<'_>>,
    ) {
        let Id::Int(n) = id else {
            // Our ids are integers: a string id never matches, whatever its digits.
            return self.violation_in(frame, ViolationKind::UnknownResponse, Some(id), None);
        };
        let Some(pending) = self.corr.pending.remove(&n) else {
            if self.corr.our_finished.contains(&n) {
                self.stats.late_responses += 1;
                if self
                    .corr
                    .abandoned_tasks
                    .as_mut()
                    .is_some_and(|set| set.remove(&n))
                    && let Ok(result) = outcome
                {
                    self.cancel_late_task(now, result);
                }
            } else {
                self.violation_in(frame, ViolationKind::UnknownResponse, Some(id), None);
            }
            return;
        };
        // A close begun during the handshake ends with its answer: nothing new is sent after
        // `close` (not `notifications/initialized`, not a fallback `initialize`). Unless a
        // ping (or, under a lenient lifecycle, another request) went out before the answer:
        // it keeps its grace, as any request in flight at a close does.
        if matches!(
            pending.kind,
            PendingKind::Initialize | PendingKind::Discover { .. }
        ) && self.lifecycle.closing_deadline().is_some()
        {
            return self.maybe_finish_close();
        }
        match pending.kind {
            PendingKind::Initialize => return self.on_initialize_result(now, outcome),
            PendingKind::Discover { retried } => {
                return self.on_discover_result(now, retried, outcome);
            }
            PendingKind::CancelTask => return self.maybe_finish_close(),
            PendingKind::Normal => {}
        }
        let request = RequestId(n);
        self.task_tokens.answered(&OwnedId::Int(n), true);
        // 2025-11-25: a task-augmented request of ours answered with a task handle
        // (`CreateTaskResult`, `{"task":{…}}`); a malformed one is invalid. A result without
        // `task` is the request's own (the receiver ran it without a task).
        let handle = match outcome {
            Ok(result) if pending.task_augmented => match result.get_unique("task") {
                Ok(None) => None,
                Ok(Some(task)) => Some(crate::tasks::handle_task_id(task, true)),
                Err(_) => Some(None),
            },
            _ => None,
        };
        if let Some(None) = handle {
            self.events.push(Stored::InvalidResponse(request));
            return self.maybe_finish_close();
        }
        if let Ok(result) = outcome
            && let Some(Some(task)) = handle
        {
            if pending.wants_progress {
                // Its progress keeps coming under the same token (rule 8).
                let entry = TaskToken {
                    task: task.to_str().into(),
                    request: OwnedId::Int(n),
                    ours: true,
                    token: OwnedId::Int(n),
                    last_progress: pending.last_progress,
                    ends: Vec::new(),
                };
                let cap = self.config.limits.max_inbound_in_flight;
                self.task_tokens.add(entry, cap);
            }
            let cap = self.events.capture(frame);
            let stored = Stored::TaskCreated {
                request,
                task: cap.raw(result),
            };
            cap.push(stored);
            return self.maybe_finish_close();
        }
        let mut retry = self.stateless.take_retry(n);
        let classified = match outcome {
            Ok(result) => Some(self.classify_result(request, &mut retry, result)),
            Err(_) => None,
        };
        self.stateless.recycle_retry(retry);
        let url_era = self.effective_version() == crate::mcp::ProtocolVersion::V2025_11_25;
        let cap = self.events.capture(frame);
        let stored = match (outcome, classified) {
            (Ok(result), Some(Classified::Complete)) | (Ok(result), None) => Stored::Response {
                request,
                result: cap.raw(result),
            },
            (Ok(_), Some(Classified::InputRequired { requests, state })) => Stored::InputRequired {
                request,
                input_requests: requests.map(|r| cap.raw(r)),
                request_state: state.map(|s| cap.str(s)),
            },
            (Ok(_), Some(Classified::Invalid)) => Stored::InvalidResponse(request),
            (Ok(result), Some(Classified::Task)) => Stored::TaskCreated {
                request,
                task: cap.raw(result),
            },
            (Err(e), _)
                if e.code == crate::mcp::URL_ELICITATION_REQUIRED
                    && url_era
                    // (Only for a client that declared URL elicitation: the completions it
                    // waits for would be refused otherwise.)
                    && self.config.capabilities.has(crate::mcp::Caps::ELICITATION_URL)
                    && let Some(list) = e.data.and_then(|d| d.unique("elicitations"))
                    && let Some(ids) = super::elicit::required_elicitations(list) =>
            {
                for id in &ids {
                    self.elicitations.insert(id);
                }
                Stored::UrlElicitationRequired {
                    request,
                    elicitations: cap.raw(list),
                }
            }
            (Err(e), _) => Stored::Error {
                request: RequestId(n),
                code: e.code,
                message: cap.str(e.message),
                data: e.data.map(|d| cap.raw(d)),
            },
        };
        cap.push(stored);
        self.maybe_finish_close();
    }

    /// The host could not carry our message `n` or its answer (HTTP status, connection,
    /// stream). The request ends at once: an application request with
    /// [`Event::Failed`](super::Event::Failed), an auto-era probe by falling back to the
    /// handshake, the handshake itself by closing. An answer that still comes later is dropped
    /// as late.
    pub(super) fn on_failed_exchange(&mut self, now: Timestamp, n: i64, reason: TransportFailure) {
        let Some(pending) = self.corr.pending.remove(&n) else {
            return;
        };
        let retry = self.stateless.take_retry(n);
        self.stateless.recycle_retry(retry);
        self.corr.our_finished.insert(n);
        match pending.kind {
            PendingKind::Initialize => self.finish(CloseReason::TransportFailed(reason)),
            PendingKind::Discover { .. } if self.config.client_start().is_none() => {
                self.fall_back(now)
            }
            PendingKind::Discover { .. } => self.finish(CloseReason::TransportFailed(reason)),
            PendingKind::CancelTask => self.maybe_finish_close(),
            PendingKind::Normal => {
                self.events.push(Stored::Failed(RequestId(n), reason));
                // A session's server may still be working on it (an HTTP error status means
                // it was refused, and a stateless request is cancelled by the closed stream).
                if !matches!(reason, TransportFailure::Status(_))
                    && self.lifecycle.era == Some(crate::mcp::Era::Legacy)
                {
                    self.send_cancelled_unless_task(
                        n,
                        pending.task_augmented,
                        pending.stream,
                        Some("the transport lost the answer"),
                    );
                }
                self.maybe_finish_close();
            }
        }
    }

    pub(super) fn on_progress(
        &mut self,
        now: Timestamp,
        frame: &str,
        params: Option<RawJson<'_>>,
        index: &ParamsIndex,
    ) {
        let Some(params) = params else {
            self.stats.dropped_progress += 1;
            return;
        };
        // The four members from the decoder's index of the params, or one pass over them (a
        // duplicated one counts as absent).
        let found = index.get_each(params, ["progressToken", "progress", "total", "message"]);
        let member = |i| found.get(i).ok().flatten();
        let token = member(0);
        let progress = member(1);
        // (A number too large for an f64, `1e400`, reads as infinity: no progress value, or
        // it would stop every later report of the request as not increasing.)
        let (Some(Id::Int(n)), Some(progress)) = (
            token.and_then(|t| t.as_id()),
            progress.and_then(|p| p.as_f64()).filter(|p| p.is_finite()),
        ) else {
            self.stats.dropped_progress += 1;
            return;
        };
        let total = member(2).and_then(|t| t.as_f64()).filter(|t| t.is_finite());
        let message = member(3).and_then(|m| m.as_str());
        let policy = self.config.policy.progress;
        let max_total = self.config.max_total_timeout;
        // Our request's progress, or a task's after its handle (rule 8).
        let advanced = match self.corr.pending.get_mut(&n).filter(|p| p.wants_progress) {
            Some(p) => {
                let advanced = advances(&mut p.last_progress, progress, policy);
                if advanced && p.reset_on_progress {
                    // Later, up to the cap, never earlier: a timeout past the cap would
                    // otherwise bring it forward, and which deadline held depended on
                    // whether the timer heap was rebuilt from the recorded ones meanwhile.
                    let cap = p.started.after(max_total);
                    p.deadline = p.deadline.max(now.after(p.timeout).min(cap));
                }
                Some(advanced)
            }
            None => (self.task_tokens.by_request(&OwnedId::Int(n), true))
                .map(|t| advances(&mut t.last_progress, progress, policy)),
        };
        match advanced {
            None => {
                self.stats.dropped_progress += 1;
                return;
            }
            Some(false) => {
                self.stats.non_increasing_progress += 1;
                return;
            }
            Some(true) => {}
        }
        let cap = self.events.capture(frame);
        let stored = Stored::Progress {
            request: RequestId(n),
            progress,
            total,
            message: message.map(|m| cap.str(m)),
        };
        cap.push(stored);
    }

    /// Ends one of the engine's own requests that got no usable answer (it timed out, or its
    /// answer could not be read), already taken out of the requests in flight: `initialize`
    /// closes with `reason`; a probe falls back to `initialize` in auto mode (a server of the
    /// stateless era answers it readably and in time: "any other error ... the server is
    /// legacy", stdio), else closes with `reason`; a late `tasks/cancel` is simply over.
    /// Returns `false`, doing nothing, for an application's request, which the caller ends
    /// with its own event.
    pub(super) fn end_own_request(
        &mut self,
        now: Timestamp,
        n: i64,
        kind: PendingKind,
        reason: CloseReason,
    ) -> bool {
        match kind {
            PendingKind::Normal => return false,
            PendingKind::Initialize => self.finish(reason),
            PendingKind::Discover { .. } => {
                self.corr.our_finished.insert(n);
                if self.config.client_start().is_none() {
                    self.fall_back(now);
                } else {
                    self.finish(reason);
                }
            }
            PendingKind::CancelTask => {
                self.corr.our_finished.insert(n);
                self.maybe_finish_close();
            }
        }
        true
    }

    pub(super) fn on_timeout(&mut self, now: Timestamp) {
        while let Some(key) = self.corr.timers.pop_due(now) {
            match key {
                TimerKey::Request(n) => {
                    let Some(p) = self.corr.pending.get(&n) else {
                        continue;
                    };
                    if p.deadline > now {
                        // Progress moved the deadline: wait for the new one.
                        let at = p.deadline;
                        self.corr.timers.push(at, key);
                        continue;
                    }
                    let kind = p.kind;
                    let task_augmented = p.task_augmented;
                    let stream = p.stream;
                    if self.corr.pending.remove(&n).is_some() {
                        let retry = self.stateless.take_retry(n);
                        self.stateless.recycle_retry(retry);
                    }
                    // (A probe that times out means the handshake era, in auto mode.)
                    if self.end_own_request(now, n, kind, CloseReason::InitializeTimedOut) {
                        if self.lifecycle.is_closed() {
                            return;
                        }
                        continue;
                    }
                    self.corr.our_finished.insert(n);
                    self.events.push(Stored::TimedOut(RequestId(n)));
                    self.send_cancelled_unless_task(n, task_augmented, stream, Some("timed out"));
                    self.maybe_finish_close();
                }
                TimerKey::CloseGrace => {
                    if self.lifecycle.closing_deadline().is_some_and(|d| d <= now) {
                        self.end_close_grace();
                        return;
                    }
                }
            }
        }
        self.compact_timers();
    }

    /// 2025-11-25: the answer to a task-augmented request of ours that had already ended
    /// (timed out, cancelled, given up at close). If it is a task handle, the peer runs a
    /// task nobody waits for: it gets `tasks/cancel`, the way the specification cancels a
    /// task, where the peer declared that capability and the output has room (rule 9). The
    /// answer to that request is dropped.
    fn cancel_late_task(&mut self, now: Timestamp, result: RawJson<'_>) {
        let Ok(Some(task)) = result.get_unique("task") else {
            return;
        };
        let Some(task_id) = crate::tasks::handle_task_id(task, true) else {
            return;
        };
        // Also while a graceful close runs, which waits for it as for our other requests (the
        // task would otherwise run for nobody until its ttl).
        let kind = crate::mcp::MethodKind::Request;
        if self.lifecycle.is_closed()
            || !matches!(
                self.lifecycle.check_send(kind, "tasks/cancel"),
                Ok(()) | Err(super::Error::Closing)
            )
            || self.check_method(kind, "tasks/cancel").is_err()
            || self.corr.pending.len() >= self.config.limits.max_outbound_in_flight
            || !self.output_has_room()
        {
            return;
        }
        let mut params = std::mem::take(&mut self.out.scratch);
        params.clear();
        params.extend_from_slice(b"{\"taskId\":\"");
        params.extend_from_slice(task_id.raw().as_bytes());
        params.extend_from_slice(b"\"}");
        let id = self.corr.next_id;
        if let Ok(text) = std::str::from_utf8(&params) {
            let out = self.out.output.begin();
            jsonrpc::encode_request(
                out,
                Id::Int(id),
                "tasks/cancel",
                Some(RawJson::validated(text)),
            );
            self.out.output.end_frame(StreamId::MAIN);
            self.corr.next_id += 1;
            // Bounded even where requests have no default timeout: nobody can cancel this one,
            // and unanswered it would hold a slot and every graceful close's grace.
            let timeout = self.config.request_timeout.min(CANCEL_TASK_TIMEOUT);
            self.track(
                now,
                id,
                PendingKind::CancelTask,
                timeout,
                None,
                false,
                false,
            );
        }
        self.out.scratch = params;
    }

    /// Records one of our requests as in flight, with its timer (none for
    /// `Duration::MAX`: a `subscriptions/listen` stream lives until cancelled).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn track(
        &mut self,
        now: Timestamp,
        id: i64,
        kind: PendingKind,
        timeout: Duration,
        retry: Option<RetryBase>,
        wants_progress: bool,
        reset_on_progress: bool,
    ) {
        let deadline = now.after(timeout);
        if let Some(retry) = retry {
            self.stateless.retry_bases.insert(id, retry);
        }
        self.corr.pending.insert(
            id,
            Pending {
                kind,
                started: now,
                timeout,
                deadline,
                reset_on_progress,
                wants_progress,
                last_progress: None,
                task_augmented: false,
                listen: false,
                stream: StreamId::MAIN,
            },
        );
        if timeout != Duration::MAX {
            self.corr.timers.push(deadline, TimerKey::Request(id));
            self.compact_timers();
        }
    }

    /// [`Correlation::compact_timers`], with the close deadline if one is set.
    pub(super) fn compact_timers(&mut self) {
        let closing = self.lifecycle.closing_deadline();
        self.corr.compact_timers(closing);
    }
}
