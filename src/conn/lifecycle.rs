//! The lifecycle: the one home of the connection's phase, its era, the negotiated version and
//! what we know of the peer; the handshake that sets them and the close that ends them.
//!
//! State: [`Lifecycle`] (`Core::lifecycle`). Every change of phase goes through its methods.
//!
//! Rules enforced here (spec: "Lifecycle" and "Cancellation" of 2024-11-05 … 2025-11-25,
//! "Versioning" of 2026-07-28; docs/rules.md lists every rule with its test):
//!
//! 1. (2024-11-05 … 2025-11-25) The client's first message is `initialize`; the engine sends it
//!    (`send_initialize`) and it can never be cancelled. The client answers a successful
//!    result with `notifications/initialized` (`on_initialize_result`).
//! 2. (2024-11-05 … 2025-11-25) Until the server has answered `initialize`, a client sends only
//!    pings. Until it has received `notifications/initialized`, a server sends only pings and
//!    logging, and before `initialize` arrives nothing at all (`Lifecycle::check_send`). A
//!    client whose `server/discover` probe is out sends nothing either. Without
//!    `strict_lifecycle`, only the last two hold (`Policy::strict_lifecycle`).
//! 3. (2024-11-05 … 2025-11-25) With `strict_lifecycle` (the default), the same rules hold for
//!    what we accept: a request that arrives too early is answered with -32600, a notification
//!    is dropped. Pings are always answered (`Lifecycle::admit`).
//! 4. (2024-11-05 … 2025-11-25) `initialize` is accepted once per connection; a second one is
//!    answered with -32600. In 2025-03-26 it must not be part of a batch (-32600)
//!    (`on_initialize`).
//! 5. (2024-11-05 … 2025-11-25) Version negotiation: the server answers with the version the
//!    client offered if it supports it, else its newest handshake-era version
//!    (`on_initialize`). A client closes if the result is an error, malformed, or names a
//!    version it does not support (`on_initialize_result`); an `initialize` that times out
//!    closes the connection (correlation.rs, `on_timeout`).
//! 6. (all) `close` stops new requests and notifications at once, lets answers and
//!    cancellations through, and waits for the requests in flight either way (ours, and the
//!    peer's the application answers; a batch being read is read to its end) until the grace
//!    deadline; then the connection is closed. End of input closes it at once, abandoning
//!    what is in flight (`close`, `maybe_finish_close`, `finish`).
//! 7. (all) Once closed, the connection accepts nothing and sends nothing (`Lifecycle::admit`,
//!    `Lifecycle::check_send`, and every command's `is_closed` check).
//! 8. (2026-07-28) There is no handshake: a client is operating once its `server/discover`
//!    probe succeeds, a server as soon as the first stateless request arrives
//!    (`Lifecycle::stateless_started`; the era is chosen in stateless.rs).

use std::time::Duration;

use super::config::Role;
use super::dispatch::Refusal;
use super::event::Stored;
use super::outbound::Answer;
use super::output::StreamId;
use super::tables::{PendingKind, TimerKey};
use super::time::Timestamp;
use super::{CloseReason, Core, Error, RequestId, ViolationKind};
use crate::jsonrpc::{self, Id, JsonStr, RawJson, Reason};
use crate::mcp::{self, Capabilities, Era, MethodKind, ProtocolVersion};

/// The externally visible state of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The handshake is under way.
    Initializing,
    /// The handshake is done; anything negotiated may flow.
    Operating,
    /// [`close`](super::Connection::close) was called; waiting for requests in flight.
    Closing,
    /// Ended; see the [`Closed`](super::Event::Closed) event for why.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Client: `initialize` sent, no answer yet.
    AwaitingInitResult,
    /// Server: nothing received yet.
    AwaitingInitialize,
    /// Server: `initialize` answered, `notifications/initialized` not yet received.
    AwaitingInitialized,
    Operating,
    Closing {
        deadline: Timestamp,
        /// Where the handshake stood when the close began: what arrives meanwhile is
        /// admitted by its rules (a close before the handshake ends opens nothing up).
        was: Before,
    },
    Closed,
}

/// The phase a close began in ([`Phase::Closing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Before {
    AwaitingInitResult,
    AwaitingInitialize,
    AwaitingInitialized,
    Operating,
}

impl Before {
    fn phase(self) -> Phase {
        match self {
            Before::AwaitingInitResult => Phase::AwaitingInitResult,
            Before::AwaitingInitialize => Phase::AwaitingInitialize,
            Before::AwaitingInitialized => Phase::AwaitingInitialized,
            Before::Operating => Phase::Operating,
        }
    }
}

/// Whether an incoming message may be processed now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    Yes,
    /// Too early: requests get -32600, notifications are dropped.
    TooEarly,
    /// The connection is closed: ignore.
    Ignore,
}

/// The phase, the era and what the handshake (or the discover probe) established.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    phase: Phase,
    role: Role,
    strict: bool,
    /// The era in force, once known.
    pub(super) era: Option<Era>,
    /// The negotiated protocol version (for a stateless server, its newest).
    pub(super) version: Option<ProtocolVersion>,
    pub(super) peer_caps: Option<Capabilities>,
    pub(super) peer_info: Option<String>,
    pub(super) peer_instructions: Option<String>,
}

impl Lifecycle {
    pub(crate) fn new(role: Role, strict: bool) -> Self {
        let phase = match role {
            Role::Client => Phase::AwaitingInitResult,
            Role::Server => Phase::AwaitingInitialize,
        };
        Lifecycle {
            phase,
            role,
            strict,
            era: None,
            version: None,
            peer_caps: None,
            peer_info: None,
            peer_instructions: None,
        }
    }

    pub(crate) fn state(&self) -> State {
        match self.phase {
            Phase::AwaitingInitResult | Phase::AwaitingInitialize | Phase::AwaitingInitialized => {
                State::Initializing
            }
            Phase::Operating => State::Operating,
            Phase::Closing { .. } => State::Closing,
            Phase::Closed => State::Closed,
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    pub(crate) fn closing_deadline(&self) -> Option<Timestamp> {
        match self.phase {
            Phase::Closing { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    /// Server: whether `initialize` is expected now.
    pub(crate) fn awaiting_initialize(&self) -> bool {
        self.phase == Phase::AwaitingInitialize
    }

    /// Server: whether `notifications/initialized` is expected now.
    pub(crate) fn awaiting_initialized(&self) -> bool {
        matches!(
            self.phase,
            Phase::AwaitingInitialized
                | Phase::Closing {
                    was: Before::AwaitingInitialized,
                    ..
                }
        )
    }

    // ---- transitions ----

    /// Server: `initialize` was answered successfully.
    pub(crate) fn initialize_answered(&mut self) {
        if self.phase == Phase::AwaitingInitialize {
            self.phase = Phase::AwaitingInitialized;
        }
    }

    /// Server: `notifications/initialized` arrived. Client: the initialize result was accepted.
    pub(crate) fn handshake_done(&mut self) {
        match &mut self.phase {
            Phase::AwaitingInitialized | Phase::AwaitingInitResult => {
                self.phase = Phase::Operating;
            }
            // Closing: what arrives from now on is admitted as in operation.
            Phase::Closing { was, .. } => *was = Before::Operating,
            _ => {}
        }
    }

    /// Server: a stateless-era (2026-07-28) request arrived first: there is no handshake.
    pub(crate) fn stateless_started(&mut self) {
        if matches!(
            self.phase,
            Phase::AwaitingInitialize | Phase::AwaitingInitialized
        ) {
            self.phase = Phase::Operating;
        }
    }

    /// Closing: the grace ends at `deadline` instead, if that is sooner.
    pub(crate) fn close_sooner(&mut self, deadline: Timestamp) {
        if let Phase::Closing { deadline: d, .. } = &mut self.phase {
            *d = (*d).min(deadline);
        }
    }

    pub(crate) fn begin_close(&mut self, deadline: Timestamp) {
        let was = match self.phase {
            Phase::AwaitingInitResult => Before::AwaitingInitResult,
            Phase::AwaitingInitialize => Before::AwaitingInitialize,
            Phase::AwaitingInitialized => Before::AwaitingInitialized,
            Phase::Operating => Before::Operating,
            Phase::Closing { .. } | Phase::Closed => return,
        };
        self.phase = Phase::Closing { deadline, was };
    }

    pub(crate) fn closed(&mut self) {
        self.phase = Phase::Closed;
    }

    // ---- rules ----

    /// May we send a new request or notification `method` now? Answers, cancellations and
    /// progress are not "new" and are checked by their own commands.
    /// Whether nothing at all may be sent yet, because the era is not known: a server before
    /// `initialize` arrives ("The initialization phase MUST be the first interaction"; a
    /// dual-era server does not know whether its client's era lets a server send requests or
    /// free-standing logs at all), a client whose `server/discover` probe is out.
    pub(crate) fn era_unknown(&self) -> bool {
        match self.role {
            Role::Server => self.phase == Phase::AwaitingInitialize,
            Role::Client => self.era.is_none() && self.phase == Phase::AwaitingInitResult,
        }
    }

    pub(crate) fn check_send(&self, kind: MethodKind, method: &str) -> Result<(), Error> {
        match self.phase {
            Phase::Closed => return Err(Error::Closed),
            Phase::Closing { .. } => return Err(Error::Closing),
            Phase::Operating => return Ok(()),
            _ => {}
        }
        // Whatever the policy: not knowing the era is not a matter of strictness.
        if self.era_unknown() {
            return Err(Error::NotInitialized);
        }
        if !self.strict {
            return Ok(());
        }
        let allowed = match (self.role, kind) {
            (_, MethodKind::Request) => method == "ping",
            (Role::Server, MethodKind::Notification) => method == "notifications/message",
            (Role::Client, MethodKind::Notification) => false,
        };
        if allowed {
            Ok(())
        } else {
            Err(Error::NotInitialized)
        }
    }

    /// May an incoming request or notification `method` be processed now?
    pub(crate) fn admit(&self, kind: MethodKind, method: &str) -> Admit {
        // Closing, by the rules of the phase it began in.
        let phase = match self.phase {
            Phase::Closing { was, .. } => was.phase(),
            phase => phase,
        };
        match phase {
            Phase::Closed => return Admit::Ignore,
            Phase::Operating => return Admit::Yes,
            _ => {}
        }
        if kind == MethodKind::Request && (method == "ping" || method == "initialize") {
            return Admit::Yes;
        }
        if method == "notifications/initialized" || method == "notifications/cancelled" {
            return Admit::Yes;
        }
        if !self.strict {
            return Admit::Yes;
        }
        let allowed = match (self.role, phase) {
            // A client may use the session once it has our answer; its requests can then
            // arrive before `notifications/initialized` only by reordering, which stdio rules
            // out, so accept them.
            (Role::Server, Phase::AwaitingInitialized) => true,
            // Before our answer the client sends nothing else.
            (Role::Server, _) => false,
            // A server may log before the handshake is done.
            (Role::Client, _) => {
                kind == MethodKind::Notification && method == "notifications/message"
            }
        };
        if allowed { Admit::Yes } else { Admit::TooEarly }
    }
}

// ---- The handshake and the close -----------------------------------------------------------

impl Core {
    pub(super) fn send_initialize(&mut self, now: Timestamp) {
        let version = self
            .config
            .latest_legacy()
            .unwrap_or(ProtocolVersion::LATEST_LEGACY);
        let mut params = Vec::new();
        params.extend_from_slice(b"{\"protocolVersion\":");
        jsonrpc::write_json_string(&mut params, version.as_str());
        params.extend_from_slice(b",\"capabilities\":");
        params.extend_from_slice(self.config.capabilities.raw().get().as_bytes());
        params.extend_from_slice(b",\"clientInfo\":");
        params.extend_from_slice(self.config.info.as_bytes());
        params.push(b'}');
        let timeout = self.config.request_timeout;
        self.send_own_request(now, "initialize", &params, PendingKind::Initialize, timeout);
    }

    /// Sends a request the engine makes itself (`initialize`, `server/discover`) with `params`
    /// (JSON the engine wrote) on the main stream, and tracks it as `kind`.
    pub(super) fn send_own_request(
        &mut self,
        now: Timestamp,
        method: &str,
        params: &[u8],
        kind: PendingKind,
        timeout: Duration,
    ) {
        let id = self.corr.next_id;
        self.corr.next_id += 1;
        if let Ok(text) = std::str::from_utf8(params) {
            let out = self.out.output.begin();
            jsonrpc::encode_request(out, Id::Int(id), method, Some(RawJson::validated(text)));
            self.out.output.end_frame(StreamId::MAIN);
        }
        self.track(now, id, kind, timeout, None, false, false);
    }

    pub(super) fn on_initialize(
        &mut self,
        stream: StreamId,
        frame: &str,
        r: &jsonrpc::Request<'_>,
        batch: Option<u32>,
    ) {
        if batch.is_some() {
            return self.reject(
                frame,
                (stream, batch),
                r,
                Refusal::new(
                    ViolationKind::InvalidMessage(Reason::NotAMessage),
                    jsonrpc::INVALID_REQUEST,
                    "initialize must not be part of a batch",
                ),
            );
        }
        if !self.lifecycle.awaiting_initialize() {
            return self.reject(
                frame,
                (stream, batch),
                r,
                Refusal::new(
                    ViolationKind::AlreadyInitialized,
                    jsonrpc::INVALID_REQUEST,
                    "already initialized",
                ),
            );
        }
        let parsed = parse_initialize(r.params);
        let Ok((offered, caps, info)) = parsed else {
            let message = parsed.err().unwrap_or("invalid initialize params");
            return self.reject(
                frame,
                (stream, batch),
                r,
                Refusal::new(
                    ViolationKind::InvalidParams,
                    jsonrpc::INVALID_PARAMS,
                    message,
                ),
            );
        };
        let chosen = offered
            .filter(|v| self.config.versions.contains(v) && v.era() == mcp::Era::Legacy)
            .unwrap_or_else(|| {
                self.config
                    .versions
                    .iter()
                    .copied()
                    .filter(|v| v.era() == mcp::Era::Legacy)
                    .max()
                    .unwrap_or(ProtocolVersion::LATEST_LEGACY)
            });
        self.lock_era(Era::Legacy);
        self.lifecycle.version = Some(chosen);
        self.lifecycle.peer_caps = Some(caps);
        self.lifecycle.peer_info = Some(info);
        // Build the result.
        let mut result = std::mem::take(&mut self.out.scratch);
        result.clear();
        result.extend_from_slice(b"{\"protocolVersion\":");
        jsonrpc::write_json_string(&mut result, chosen.as_str());
        result.extend_from_slice(b",\"capabilities\":");
        result.extend_from_slice(self.config.capabilities.raw().get().as_bytes());
        result.extend_from_slice(b",\"serverInfo\":");
        result.extend_from_slice(self.config.info.as_bytes());
        if let Some(instructions) = &self.config.instructions {
            result.extend_from_slice(b",\"instructions\":");
            jsonrpc::write_json_string(&mut result, instructions);
        }
        result.push(b'}');
        if let Ok(text) = std::str::from_utf8(&result) {
            let answer = Answer::Result(RawJson::validated(text));
            self.emit_answer(None, stream, Some(r.id), answer, true);
        }
        crate::frame::empty(&mut result);
        self.out.scratch = result;
        self.lifecycle.initialize_answered();
    }

    /// Server: `notifications/initialized` ends the handshake, once our answer to `initialize`
    /// is out; any other time it is a violation.
    pub(super) fn on_initialized(&mut self, frame: &str, method: JsonStr<'_>) {
        if self.lifecycle.awaiting_initialized() {
            // (During a close begun before it came, the handshake ends without `Ready`: the
            // application is shutting the session down.)
            let closing = self.lifecycle.closing_deadline().is_some();
            self.lifecycle.handshake_done();
            if let Some(v) = self.lifecycle.version {
                if !closing {
                    self.events.push(Stored::Ready(v));
                }
                self.release_handshake_memory();
            }
        } else {
            self.violation_in(
                frame,
                ViolationKind::BeforeInitialization,
                None,
                Some(method),
            );
        }
    }

    pub(super) fn on_initialize_result(
        &mut self,
        now: Timestamp,
        outcome: Result<RawJson<'_>, jsonrpc::ErrorObject<'_>>,
    ) {
        let result = match outcome {
            Ok(r) => r,
            Err(e) => {
                // Auto mode: a -32022 to the fallback `initialize` names the server's versions,
                // which is evidence of the stateless era (a probe answered too late, say):
                // probe once more at a version we share.
                if let Some(version) = self.modern_version_named(&e) {
                    self.lifecycle.era = None;
                    return self.send_discover(now, version, true);
                }
                return self.finish(super::stateless::refusal(&e));
            }
        };
        let Ok(parsed) = parse_initialize_result(result) else {
            return self.finish(CloseReason::InvalidInitializeResult);
        };
        // A handshake-era version we speak: 2026-07-28 has no handshake, so an `initialize`
        // cannot end on it (the session would then send requests without their `_meta`).
        let Some(version) = ProtocolVersion::parse(&parsed.version)
            .filter(|v| v.era() == Era::Legacy && self.config.versions.contains(v))
        else {
            return self.finish(CloseReason::UnsupportedVersion(parsed.version));
        };
        self.lifecycle.version = Some(version);
        self.lifecycle.peer_caps = Some(parsed.caps);
        self.lifecycle.peer_info = Some(parsed.info);
        self.lifecycle.peer_instructions = parsed.instructions;
        self.emit_auto(StreamId::MAIN, |out| {
            jsonrpc::encode_notification(out, "notifications/initialized", None)
        });
        if self.lifecycle.is_closed() {
            // No room for `initialized` (a peer that does not read): closed, and `Closed` is
            // the last event, never followed by `Ready`.
            return;
        }
        self.lifecycle.handshake_done();
        self.events.push(Stored::Ready(version));
        self.release_handshake_memory();
    }

    /// The handshake is over: give back what it needed (its pending entry, scratch space, the
    /// output it wrote) so an idle connection stays small.
    pub(super) fn release_handshake_memory(&mut self) {
        let closing = self.lifecycle.closing_deadline();
        self.corr.release_handshake_memory(closing);
        self.out.scratch = Vec::new();
        self.out.output.release_when_drained();
    }

    pub(super) fn close(&mut self, now: Timestamp, grace: Duration) {
        if self.lifecycle.is_closed() {
            return;
        }
        if let Some(first) = self.lifecycle.closing_deadline() {
            // Closing already: only a sooner end changes anything (a host told to stop while
            // the application's own long close runs). A later one does not, and pushes no
            // timer for a host that calls this on every turn.
            let deadline = now.after(grace);
            if deadline >= first {
                return;
            }
            self.lifecycle.close_sooner(deadline);
            if grace.is_zero() {
                return self.end_close_grace();
            }
            self.corr.timers.push(deadline, TimerKey::CloseGrace);
            return;
        }
        // 2026-07-28 server: the peer's subscriptions end with their listen results ("the
        // server SHOULD respond to the original subscriptions/listen request with a completion
        // result"), not cut off by the close. One the output has no room for just ends with
        // the connection.
        for id in self.listen_subscriptions() {
            let _ = self.end_listen(id.as_id());
        }
        // 2026-07-28 client: our own listens end only when cancelled (the server ends them
        // only when it stops), so the grace would always run out waiting for them. They are
        // cancelled now, as the grace's end would (and abandoned, as the close's end would),
        // and the close waits for the rest only.
        let listens: Vec<i64> = (self.corr.pending.iter())
            .filter(|(_, p)| p.listen)
            .map(|(n, _)| *n)
            .collect();
        for n in listens {
            // Abandoned, as requests the close ends are: the application learns it is over.
            // (Even with the output full: the cancellation is then left out, and the close
            // does not wait out its grace for a listen nothing else ends.)
            self.end_ours(n, Some("shutting down"));
            self.events.push(Stored::Abandoned(RequestId(n)));
        }
        let deadline = now.after(grace);
        self.lifecycle.begin_close(deadline);
        if grace.is_zero() {
            // No grace: what the grace's end does, now. The cancellations are in the output
            // when this returns, for a host that writes it out and stops without running
            // timers again.
            return self.end_close_grace();
        }
        self.corr.timers.push(deadline, TimerKey::CloseGrace);
        self.maybe_finish_close();
    }

    /// The close's grace is over: our requests still in flight are cancelled (the peer is told
    /// which ones nobody waits for any more, as after a timeout), and the connection closes.
    pub(super) fn end_close_grace(&mut self) {
        self.cancel_all_in_flight("shutting down");
        self.answer_what_the_peer_awaits();
        self.finish(CloseReason::Local);
    }

    /// Closing ends as soon as no request is in flight either way: none of ours awaits the
    /// peer's answer, and the application has answered (or the peer cancelled) every one of
    /// the peer's. (Ending when ours alone were done cut the application's answers to the
    /// peer's calls off at once, with -32603, when it had no request of its own out: a server
    /// mostly has none.)
    pub(super) fn maybe_finish_close(&mut self) {
        if self.lifecycle.closing_deadline().is_some()
            && self.corr.pending.is_empty()
            && self.dispatch.inbound.is_empty()
            && !self.dispatch.reading_batch
        {
            self.answer_what_the_peer_awaits();
            self.finish(CloseReason::Local);
        }
    }

    /// Answers each of the peer's requests in flight but its listens with -32603 and
    /// `message`; how many.
    pub(super) fn refuse_peer_requests(&mut self, message: &str) -> usize {
        let ids: Vec<_> = (self.dispatch.inbound.iter())
            .filter(|(_, entry)| entry.listen.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        let refusal = Answer::Error {
            code: jsonrpc::INTERNAL_ERROR,
            message,
            data: None,
        };
        (ids.iter())
            .filter(|id| self.respond(id.as_id(), refusal).is_ok())
            .count()
    }

    /// A graceful close ends: the peer's requests still in flight get an internal error
    /// (-32603), since nobody will answer them now. The peer need not wait for its own
    /// timeout, and a 2025-03-26 batch's array goes out with the answers the application
    /// already gave its other members (they were taken, and would be lost with it). An
    /// answer outside a batch that the output has no room for is not written (its peer is
    /// not reading); a batch's answers were taken whatever the room.
    fn answer_what_the_peer_awaits(&mut self) {
        let ids: Vec<_> = self.dispatch.inbound.keys().cloned().collect();
        for id in ids {
            let _ = self.respond(
                id.as_id(),
                Answer::Error {
                    code: jsonrpc::INTERNAL_ERROR,
                    message: "the connection is closing",
                    data: None,
                },
            );
        }
        let open: Vec<u32> = self.dispatch.batches.keys().copied().collect();
        for b in open {
            if let Some(c) = self.dispatch.batches.get_mut(&b) {
                c.outstanding = 0;
            }
            self.flush_batch_if_done(b);
        }
    }

    /// Sends a cancellation for each of our requests in flight that may be cancelled (not
    /// `initialize` or a discover probe), in the order they were sent. They stay in flight:
    /// [`finish`](Self::finish) abandons them.
    pub(super) fn cancel_all_in_flight(&mut self, reason: &str) {
        for n in self.ordinary_in_flight() {
            let Some(p) = self.corr.pending.get(&n) else {
                continue;
            };
            let (task_augmented, stream) = (p.task_augmented, p.stream);
            self.send_cancelled_unless_task(n, task_augmented, stream, Some(reason));
        }
    }

    /// Our requests in flight other than `initialize` and discover probes, oldest first.
    fn ordinary_in_flight(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .corr
            .pending
            .iter()
            .filter(|(_, p)| p.kind == PendingKind::Normal)
            .map(|(n, _)| *n)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Ends the connection: every request in flight is abandoned, then `Closed` is the last
    /// event.
    pub(super) fn finish(&mut self, reason: CloseReason) {
        if self.lifecycle.is_closed() {
            return;
        }
        self.lifecycle.closed();
        for n in self.ordinary_in_flight() {
            self.events.push(Stored::Abandoned(RequestId(n)));
        }
        self.corr.pending.clear();
        self.stateless.clear_in_flight();
        self.dispatch.inbound.clear();
        self.dispatch.batches.clear();
        self.events.push(Stored::Closed(reason));
    }
}

// ---- Params the handshake reads ------------------------------------------------------------

type InitializeParams = (Option<ProtocolVersion>, Capabilities, String);

/// Reads `initialize` params: the offered version (`None` if we do not know it), the client's
/// capabilities and info.
fn parse_initialize(params: Option<RawJson<'_>>) -> Result<InitializeParams, &'static str> {
    let params = params.ok_or("initialize requires params")?;
    let dup = |_| "duplicate key in initialize params";
    let version = params
        .get_unique("protocolVersion")
        .map_err(dup)?
        .and_then(|v| v.as_str())
        .ok_or("protocolVersion must be a string")?;
    let caps = params
        .get_unique("capabilities")
        .map_err(dup)?
        .ok_or("capabilities is required")?;
    let caps = Capabilities::from_raw(caps).map_err(|_| "invalid capabilities")?;
    let info = params
        .get_unique("clientInfo")
        .map_err(dup)?
        .filter(|i| i.is_object())
        .ok_or("clientInfo must be an object")?;
    if !crate::mcp::is_implementation(info) {
        return Err("clientInfo needs a string name and version");
    }
    Ok((
        ProtocolVersion::parse(&version.to_str()),
        caps,
        info.get().to_owned(),
    ))
}

struct InitializeResult {
    version: String,
    caps: Capabilities,
    info: String,
    instructions: Option<String>,
}

fn parse_initialize_result(result: RawJson<'_>) -> Result<InitializeResult, ()> {
    let version = result
        .get_unique("protocolVersion")
        .map_err(|_| ())?
        .and_then(|v| v.as_str())
        .ok_or(())?;
    let caps = result
        .get_unique("capabilities")
        .map_err(|_| ())?
        .ok_or(())?;
    let caps = Capabilities::from_raw(caps).map_err(|_| ())?;
    let info = result
        .get_unique("serverInfo")
        .map_err(|_| ())?
        .filter(|i| i.is_object())
        .ok_or(())?;
    let instructions = result
        .get_unique("instructions")
        .map_err(|_| ())?
        .and_then(|i| i.as_str())
        .map(|s| s.to_str().into_owned());
    Ok(InitializeResult {
        version: version.to_str().into_owned(),
        caps,
        info: info.get().to_owned(),
        instructions,
    })
}
