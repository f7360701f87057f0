//! The connection engine: one MCP connection, client or server, as a pure state machine.
//!
//! # Driving it
//!
//! Bytes and the current time go in; bytes to write, events and the next deadline come out.
//! The engine never blocks, never reads a clock and never does IO:
//!
//! - **inputs**: [`Connection::handle_input`] with bytes read from the transport,
//!   [`Connection::handle_eof`] when it ends, [`Connection::handle_timeout`] when the deadline
//!   from [`Connection::poll_timeout`] has passed;
//! - **commands**: [`request`](Connection::request), [`notify`](Connection::notify),
//!   [`respond`](Connection::respond), [`respond_error`](Connection::respond_error),
//!   [`progress`](Connection::progress), [`cancel`](Connection::cancel),
//!   [`close`](Connection::close). They only queue work and return at once;
//! - **outputs**: [`poll_transmit`](Connection::poll_transmit) (then
//!   [`consume_transmit`](Connection::consume_transmit) with what was written),
//!   [`poll_event`](Connection::poll_event) and [`poll_timeout`](Connection::poll_timeout).
//!
//! **Drain after every mutation.** After any input or command, drain the outputs in this order:
//! events until `None`, transmit until empty (or until the transport would block), then read
//! the timeout and arm your timer with it. Events may cause commands (answering a request), and
//! commands produce output, so loop until nothing changes.

// One file per concern, each with its own state struct in `Core` and a comment block listing
// the protocol rules it enforces (docs/rules.md has them all, with their tests):
mod correlation; // `Correlation`: our requests in flight, ids, timers, progress for them
mod dispatch; //    `Dispatch`: decoding, batches, gating, the peer's requests in flight
mod lifecycle; //   `Lifecycle`: phase, era, negotiated version, the handshake, close
mod outbound; //    `Outbound`: output buffer and the commands that write to it
mod stateless; //   `Stateless`: the 2026-07-28 era (per-request `_meta`, discover, retries)

mod config;
mod elicit; //      URL-mode elicitation ids awaiting completion (2025-11-25)
mod event;
pub(crate) mod json_edit;
mod output;
mod owned;
pub(crate) mod tables;
mod time;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use config::{CacheScope, ClientEra, Config, Limits, Policy, ProgressPolicy, Role};
pub use event::{
    CloseReason, Event, REFUSAL_MESSAGE_MAX, RequestId, TransportFailure, ViolationKind,
};
pub use lifecycle::State;
pub use output::{Frame, StreamId, Transmit};
pub use owned::OwnedEvent;
pub(crate) use stateless::MetaView;
pub use time::Timestamp;

use crate::frame::line::{FrameError, LineDecoder};
use crate::jsonrpc::{Decoded, Id, JsonStr, OwnedId, ParamsIndex, RawJson};
use crate::mcp::{self, Capabilities, Caps, Era, LogLevel, ProtocolVersion};
use correlation::Correlation;
pub(crate) use dispatch::answers_decode_error;
use dispatch::{Dispatch, ReadAhead};
pub(crate) use elicit::required_elicitations;
use event::{EventQueue, Stored};
use lifecycle::Lifecycle;
use outbound::{Answer, Outbound};
use stateless::Stateless;
pub(crate) use stateless::input_request_need;
pub(crate) use stateless::unsupported_data;

// ---- Errors --------------------------------------------------------------------------------

/// Why a command was refused. The connection is unchanged when a command returns an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The connection is closed.
    Closed,
    /// [`close`](Connection::close) was called: no new requests or notifications.
    Closing,
    /// The handshake is not finished, and the lifecycle allows only pings (and, from a server
    /// that has answered `initialize`, logging) until it is. Before `initialize` arrives, or
    /// while a client's `server/discover` probe is out, nothing may be sent.
    NotInitialized,
    /// The engine sends this method itself (`initialize`, `notifications/initialized`,
    /// `notifications/cancelled`, `notifications/progress`): use the handshake,
    /// [`cancel`](Connection::cancel) or [`progress`](Connection::progress).
    EngineOwned,
    /// The method does not exist in the negotiated protocol version.
    NotInVersion,
    /// Our role may not send this method.
    WrongDirection,
    /// The capability that gates the method was not negotiated (the peer's for a request, ours
    /// for a notification).
    NotNegotiated(Caps),
    /// Params must be a JSON object, without a `_meta.progressToken` of their own (ask with
    /// [`RequestOptions::progress`]: the engine adds the token) or a `_meta` written twice, and
    /// without a member the sub-capability rules read written twice (an elicitation `mode`,
    /// sampling `tools` or `toolChoice`, and in 2025-11-25 `task`).
    InvalidParams,
    /// The error code does not exist in the negotiated version (-32042 outside 2025-11-25,
    /// -32020..-32022 outside 2026-07-28, for example).
    CodeNotInVersion,
    /// [`Limits::max_outbound_in_flight`] requests are already waiting.
    TooManyInFlight,
    /// [`Limits::max_buffered_output`] bytes are waiting for the transport.
    OutputFull,
    /// No request with this id is in flight (never received, already answered, or, for
    /// [`cancel`](Connection::cancel), never sent or already finished).
    UnknownRequest,
    /// The request is one the engine sent on its own and sees through itself: `initialize`,
    /// the `server/discover` probe, or a `tasks/cancel` for a task whose handle came late.
    /// It cannot be cancelled.
    CannotCancelInitialize,
    /// The request carried no progress token, so no progress can be reported for it.
    NoProgressToken,
    /// Progress must be finite and increase with every notification (and a total, when
    /// given, be finite).
    NonIncreasingProgress,
    /// In the stateless era this must be tied to a request: log with
    /// [`log`](Connection::log), and list changes go to `subscriptions/listen` streams.
    RequestScoped,
    /// "Input required" is only an answer to `tools/call`, `prompts/get` and `resources/read`
    /// in 2026-07-28.
    NotEligible,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Closed => f.write_str("the connection is closed"),
            Error::Closing => f.write_str("the connection is closing"),
            Error::NotInitialized => f.write_str("not allowed before initialization completes"),
            Error::EngineOwned => f.write_str("this method is sent by the engine itself"),
            Error::NotInVersion => f.write_str("method not in the negotiated protocol version"),
            Error::WrongDirection => f.write_str("this role may not send this method"),
            Error::NotNegotiated(c) => write!(f, "capability {} was not negotiated", c.name()),
            Error::InvalidParams => f.write_str("params must be a JSON object"),
            Error::CodeNotInVersion => {
                f.write_str("error code not defined in the negotiated protocol version")
            }
            Error::TooManyInFlight => f.write_str("too many requests in flight"),
            Error::OutputFull => f.write_str("output buffer full"),
            Error::UnknownRequest => f.write_str("no such request in flight"),
            Error::CannotCancelInitialize => f.write_str("initialize cannot be cancelled"),
            Error::NoProgressToken => f.write_str("the request carried no progress token"),
            Error::NonIncreasingProgress => f.write_str("progress must be finite and increase"),
            Error::RequestScoped => {
                f.write_str("in the stateless era this must be tied to a request")
            }
            Error::NotEligible => f.write_str("input required is not allowed for this request"),
        }
    }
}

impl std::error::Error for Error {}

/// Per-request options for [`Connection::request_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// Overrides [`Config::request_timeout`]. Without it, a `subscriptions/listen` request has
    /// no timeout at all: its stream lasts until it is cancelled or the connection closes.
    pub timeout: Option<Duration>,
    /// Ask for progress: the engine adds `_meta.progressToken` (the request's id) to the
    /// params and turns matching progress notifications into [`Event::Progress`].
    pub progress: bool,
    /// Restart the timeout whenever progress arrives (bounded by
    /// [`Config::max_total_timeout`]). `None` follows [`Policy::reset_timeout_on_progress`].
    pub reset_on_progress: Option<bool>,
}

/// What a 2026-07-28 request declared about itself in `_meta`, from
/// [`Connection::request_context`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestContext {
    /// The request's protocol version.
    pub version: ProtocolVersion,
    /// The client capabilities the request declared (they hold for this request only).
    pub client_capabilities: Caps,
    /// The log level the request asked for, if any.
    pub log_level: Option<LogLevel>,
}

/// Counters for things the engine dropped quietly, as the spec asks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Responses to our requests that arrived after a timeout or cancel.
    pub late_responses: u64,
    /// Progress notifications for unknown or finished requests.
    pub dropped_progress: u64,
    /// Progress notifications whose value did not increase (under
    /// [`ProgressPolicy::DropNonIncreasing`]).
    pub non_increasing_progress: u64,
    /// Cancellations for requests not in flight.
    pub ignored_cancellations: u64,
    /// Answers not sent: to requests the peer had cancelled, and (HTTP client) answers past
    /// [`MAX_WAITING_REPLIES`](crate::http::MAX_WAITING_REPLIES) that a server asking faster
    /// than it takes them left waiting.
    pub suppressed_responses: u64,
    /// Peer notifications dropped because the event queue was full.
    pub dropped_events: u64,
    /// `notifications/elicitation/complete` for unknown or already-completed elicitation ids.
    pub ignored_elicitation_completions: u64,
}

/// The counters behind [`Stats`] that the core keeps itself (the others are read where they
/// live), kept apart so that an idle connection stays small.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    late_responses: u64,
    dropped_progress: u64,
    non_increasing_progress: u64,
    ignored_cancellations: u64,
    suppressed_responses: u64,
    ignored_elicitation_completions: u32,
}

/// One thing a 2026-07-28 `subscriptions/listen` request asks to hear, as
/// [`Connection::grant_listen`] shows it to the application for its access check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenItem<'a> {
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/resources/updated` for this resource URI.
    Resource(&'a str),
    /// `notifications/tasks` for this task id (the tasks extension).
    Task(&'a str),
}

// ---- The connection -------------------------------------------------------------------------

/// One MCP connection, client or server. See the [module docs](self) for how to drive it.
pub struct Connection {
    framer: LineDecoder,
    core: Core,
    /// Where typed payloads are serialized before they join the output (feature `serde`);
    /// reused, so a steady stream of typed commands allocates nothing here.
    #[cfg(feature = "serde")]
    pub(crate) scratch: Vec<u8>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.core.role)
            .field("state", &self.core.lifecycle.state())
            .field("version", &self.core.lifecycle.version)
            .finish_non_exhaustive()
    }
}

/// Why a [`Config`] was refused by [`Connection::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError(&'static str);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub(crate) fn new(why: &'static str) -> Self {
        ConfigError(why)
    }
}

impl Connection {
    /// Creates a connection. A client queues its `initialize` request at once, timed from `now`.
    pub fn new(config: Config, now: Timestamp) -> Result<Connection, ConfigError> {
        config.validate().map_err(ConfigError)?;
        Ok(Connection::with_validated(Arc::new(config), now, None))
    }

    /// A connection on a configuration shared with others and already validated: the HTTP
    /// server makes one per session and per stateless request from the same `Config`, and
    /// neither copies it nor checks it again each time. With `reuse`, a finished connection
    /// about to be dropped, it takes over that one's emptied buffers before it starts (see
    /// [`Core::adopt_buffers`]).
    pub(crate) fn with_validated(
        config: Arc<Config>,
        now: Timestamp,
        reuse: Option<&mut Connection>,
    ) -> Connection {
        let framer = LineDecoder::with_max_frame(config.limits.max_frame);
        let mut core = Core::new(config);
        if let Some(old) = reuse {
            core.adopt_buffers(&mut old.core);
        }
        if core.role == Role::Client {
            match core.config.client_start() {
                Some(Era::Legacy) => {
                    core.lifecycle.era = Some(Era::Legacy);
                    core.send_initialize(now);
                }
                Some(Era::Modern) | None => {
                    let version = core
                        .config
                        .latest_modern()
                        .unwrap_or(ProtocolVersion::V2026_07_28);
                    core.send_discover(now, version, false);
                }
            }
        } else if core.config.latest_legacy().is_none() {
            // A modern-only server has no handshake to wait for.
            core.lock_era_at_creation(Era::Modern);
        }
        Connection {
            framer,
            core,
            #[cfg(feature = "serde")]
            scratch: Vec::new(),
        }
    }

    /// The bytes [`Core::adopt_buffers`] would take over (about): a host
    /// keeping a finished connection for reuse keeps only a small one.
    pub(crate) fn reusable_bytes(&self) -> usize {
        self.core.out.output.capacity()
            + self.core.out.scratch.capacity()
            + self.core.events.capacity()
    }

    // ---- getters ----

    /// Client or server.
    pub fn role(&self) -> Role {
        self.core.role
    }

    /// Where the lifecycle stands.
    pub fn state(&self) -> State {
        self.core.lifecycle.state()
    }

    /// The negotiated protocol version, once the handshake has chosen one.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.core.lifecycle.version
    }

    /// The peer's capabilities, once known.
    pub fn peer_capabilities(&self) -> Option<&Capabilities> {
        self.core.lifecycle.peer_caps.as_ref()
    }

    /// The peer's `clientInfo` / `serverInfo` object, once known.
    pub fn peer_info(&self) -> Option<RawJson<'_>> {
        self.core
            .lifecycle
            .peer_info
            .as_deref()
            .map(RawJson::validated)
    }

    /// Client: the server's `instructions`, if it sent any.
    pub fn peer_instructions(&self) -> Option<&str> {
        self.core.lifecycle.peer_instructions.as_deref()
    }

    /// The era in force: `None` while a client in auto mode is still probing or a dual-era
    /// server has not seen its first request.
    pub fn era(&self) -> Option<Era> {
        self.core.lifecycle.era
    }

    /// Server: what a 2026-07-28 request in flight declared in its `_meta` (`None` for an
    /// unknown id or a handshake-era request).
    pub fn request_context(&self, id: Id<'_>) -> Option<RequestContext> {
        let ctx = self.core.dispatch.inbound.get(&OwnedId::from(id))?.modern?;
        Some(RequestContext {
            version: ctx.version,
            client_capabilities: ctx.client_caps,
            log_level: ctx.log_level,
        })
    }

    /// Whether the peer's request `id` is in flight here: received and not yet answered or
    /// cancelled.
    pub(crate) fn awaits_answer_to(&self, id: Id<'_>) -> bool {
        self.core.dispatch.inbound.contains_key(&OwnedId::from(id))
    }

    /// Whether the peer never sends notification `method` in this version: the version's
    /// method table has it only from our side (or as a request), or has it not at all while
    /// another version does. Fed, it would be dropped as a `NotificationNotAllowed` violation;
    /// the HTTP server refuses such a POST with 400 instead ("If the server cannot accept it,
    /// it MUST return an HTTP error status code"). A notification whose capability the peer
    /// did not declare is not refused here: it is a violation as before, and the POST still
    /// gets 202 (an SDK client that sends one should not fail for it).
    pub(crate) fn refuses_notification(&self, method: &str) -> bool {
        let from_client = self.core.role == Role::Server;
        match crate::mcp::lookup(method, self.core.effective_version()) {
            Some(info) => {
                info.kind != crate::mcp::MethodKind::Notification
                    || !info.direction.allows(from_client)
            }
            None => crate::mcp::is_known_method(method),
        }
    }

    /// Whether the output is under its bound: commands that write are refused with
    /// `OutputFull` while it is not.
    pub(crate) fn output_has_room(&self) -> bool {
        self.core.output_has_room()
    }

    /// Counters of what was dropped quietly.
    pub fn stats(&self) -> Stats {
        let c = self.core.stats;
        Stats {
            late_responses: c.late_responses,
            dropped_progress: c.dropped_progress,
            non_increasing_progress: c.non_increasing_progress,
            ignored_cancellations: c.ignored_cancellations,
            suppressed_responses: c.suppressed_responses,
            dropped_events: self.core.events.dropped,
            ignored_elicitation_completions: u64::from(c.ignored_elicitation_completions),
        }
    }

    /// How many timer entries the engine holds (live and stale); bounded by a constant factor
    /// of the requests in flight. For tests of the bounds.
    pub fn timer_entries(&self) -> usize {
        self.core.corr.timers.len()
    }

    /// How many of our requests await an answer.
    pub fn requests_in_flight(&self) -> usize {
        self.core.corr.pending.len()
    }

    /// Whether our request `n` still awaits an answer (the HTTP client drops what it keeps
    /// for a stream once none of its requests does).
    pub(crate) fn awaits_answer(&self, n: i64) -> bool {
        self.core.corr.pending.get(&n).is_some()
    }

    /// Numbers this connection's later requests after `old`'s, so that a request of a new
    /// session never has the id of one the application made in the old session.
    pub(crate) fn continue_request_ids(&mut self, old: &Connection) {
        let corr = &mut self.core.corr;
        corr.next_id = corr.next_id.max(old.core.corr.next_id);
    }

    /// The ids of our requests that await an answer.
    pub(crate) fn our_requests(&self) -> Vec<i64> {
        self.core.corr.pending.iter().map(|(n, _)| *n).collect()
    }

    /// How many of the peer's requests await our answer.
    pub fn peer_requests_in_flight(&self) -> usize {
        self.core.dispatch.inbound.len()
    }

    // ---- inputs ----

    /// Feeds bytes read from a byte-stream transport (stdio, a socket). Consumes all of them;
    /// an incomplete last line is kept (up to the frame cap) for the next call.
    pub fn handle_input(&mut self, now: Timestamp, bytes: &[u8]) {
        self.core.events.retire_current();
        let mut input = bytes;
        while let Some(frame) = self.framer.next_frame(&mut input) {
            if self.core.lifecycle.is_closed() {
                return;
            }
            match frame {
                Ok(frame) => self.core.on_frame(now, StreamId::MAIN, frame),
                Err(FrameError::TooLong { .. }) => {
                    self.core
                        .on_frame_too_long(now, self.framer.too_long_head());
                }
            }
        }
    }

    /// Feeds one whole message from a message-oriented transport (an HTTP body), tagged with
    /// the stream that answers to it should go to.
    pub fn handle_frame(&mut self, now: Timestamp, stream: StreamId, frame: &[u8]) {
        self.core.events.retire_current();
        if !self.core.lifecycle.is_closed() {
            self.core.on_frame(now, stream, frame);
        }
    }

    /// [`handle_frame`](Self::handle_frame) for a message the HTTP layer has decoded already
    /// (to route it), so a body is decoded once. `frame` must be the text `decoded` came from,
    /// and `index` what the HTTP layer's decoder recorded of its params.
    pub(crate) fn handle_decoded(
        &mut self,
        now: Timestamp,
        stream: StreamId,
        frame: &str,
        decoded: Decoded<'_>,
        index: &ParamsIndex,
    ) {
        self.core.events.retire_current();
        if !self.core.lifecycle.is_closed() {
            let ahead = ReadAhead {
                params: index,
                meta: None,
            };
            self.core.on_decoded(now, stream, frame, decoded, ahead);
        }
    }

    /// [`handle_decoded`](Self::handle_decoded) for a single request whose `_meta` the host
    /// has already read from its params (`meta`, made by [`MetaView::of`]); the connection
    /// does not look it up again.
    pub(crate) fn handle_decoded_with_meta(
        &mut self,
        now: Timestamp,
        stream: StreamId,
        frame: &str,
        decoded: Decoded<'_>,
        index: &ParamsIndex,
        meta: MetaView<'_>,
    ) {
        self.core.events.retire_current();
        if !self.core.lifecycle.is_closed() {
            let ahead = ReadAhead {
                params: index,
                meta: Some(meta),
            };
            self.core.on_decoded(now, stream, frame, decoded, ahead);
        }
    }

    /// A message transport (an HTTP client host) could not carry our message with id `id`,
    /// or its answer: the POST got an HTTP error status, the connection failed, or the answer's
    /// stream ended and could not be resumed. The request ends at once instead of timing out:
    /// [`Event::Failed`] for the application's requests; an auto-era probe falls back to the
    /// handshake; a failed handshake closes the connection
    /// ([`CloseReason::TransportFailed`]). Ids that are not ours in flight are ignored.
    pub fn handle_failed_exchange(&mut self, now: Timestamp, id: Id<'_>, reason: TransportFailure) {
        self.core.events.retire_current();
        if self.core.lifecycle.is_closed() {
            return;
        }
        if let Id::Int(n) = id {
            self.core.on_failed_exchange(now, n, reason);
        }
    }

    /// The transport cannot go on (an HTTP client whose server forgets every new session):
    /// requests in flight are abandoned, and the connection closes with
    /// [`CloseReason::TransportFailed`].
    pub(crate) fn fail_transport(&mut self, reason: TransportFailure) {
        self.core.events.retire_current();
        self.core.finish(CloseReason::TransportFailed(reason));
    }

    /// Counts an answer the transport did not send (`Stats::suppressed_responses`).
    pub(crate) fn count_suppressed_response(&mut self) {
        self.core.stats.suppressed_responses += 1;
    }

    /// Input ended with an unterminated last line whose events were still to be handed out
    /// and answered: the connection closes at the next `handle_timeout` after they are out
    /// (see [`handle_eof`](Self::handle_eof)).
    fn eof_after_events(&self) -> bool {
        self.framer.ended() && !self.core.lifecycle.is_closed()
    }

    /// The transport reached end of input: requests in flight are abandoned, and the
    /// connection closes.
    ///
    /// A last unterminated line is processed first, as if it had ended with a newline, and
    /// its request can be answered like any other: its events come out as usual, then
    /// [`poll_timeout`](Self::poll_timeout) says "now", and the
    /// [`handle_timeout`](Self::handle_timeout) after every event was handed out closes the
    /// connection. (A host that stops at end of input after writing its output needs no
    /// more.)
    pub fn handle_eof(&mut self, now: Timestamp) {
        self.core.events.retire_current();
        let again = self.framer.ended();
        if let Some(frame) = self.framer.finish()
            && !self.core.lifecycle.is_closed()
            && !again
        {
            self.core.on_frame(now, StreamId::MAIN, frame);
            if self.core.events.pending() > 0 {
                return; // closed by `handle_timeout` once they are out (`eof_after_events`)
            }
        }
        self.core.finish(CloseReason::Eof);
    }

    /// Fires every timer due at `now`: request timeouts and the end of a graceful close.
    /// Calling it early does nothing.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.core.events.retire_current();
        if self.eof_after_events() && self.core.events.pending() == 0 {
            // The last line's events are out (and answered, if the handler answered them at
            // once): the end of input closes the connection now.
            self.core.finish(CloseReason::Eof);
            return;
        }
        self.core.on_timeout(now);
    }

    // ---- commands ----

    /// Sends a request with the default options. Returns its id, which the answer's event
    /// carries.
    pub fn request(
        &mut self,
        now: Timestamp,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Result<RequestId, Error> {
        self.request_with(now, method, params, RequestOptions::default())
    }

    /// Sends a request with per-request options (timeout, progress).
    pub fn request_with(
        &mut self,
        now: Timestamp,
        method: &str,
        params: Option<RawJson<'_>>,
        options: RequestOptions,
    ) -> Result<RequestId, Error> {
        self.core.events.retire_current();
        self.core
            .request(now, method, params, options, StreamId::MAIN, None)
    }

    /// Sends a request on behalf of one of the peer's requests in flight (a server asking the
    /// client to sample or elicit while a tool runs). On Streamable HTTP it travels on the
    /// stream of `parent`, as the spec asks of related messages; on stdio it is an ordinary
    /// request.
    pub fn request_related(
        &mut self,
        now: Timestamp,
        parent: Id<'_>,
        method: &str,
        params: Option<RawJson<'_>>,
        options: RequestOptions,
    ) -> Result<RequestId, Error> {
        self.core.events.retire_current();
        let parent = OwnedId::from(parent);
        let stream = (self.core.dispatch.inbound.get(&parent))
            .map(|e| e.stream)
            .ok_or(Error::UnknownRequest)?;
        (self.core).request(now, method, params, options, stream, Some(&parent))
    }

    /// Sends a notification. A 2026-07-28 server has no session to send it on: a list change,
    /// a resource update (for the subscribed URI or one under it) or a task status goes to
    /// each `subscriptions/listen` stream that asked for it, tagged with its subscription id,
    /// and to none when none did (`Ok` all the same).
    pub fn notify(&mut self, method: &str, params: Option<RawJson<'_>>) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.notify(method, params)
    }

    /// Answers one of the peer's requests with a result, a JSON object (anything else gets
    /// [`Error::InvalidParams`]: every MCP version's `Result` is one). Answering a request the
    /// peer has cancelled succeeds but sends nothing. A `subscriptions/listen` request's result ends
    /// its stream and holds nothing but its subscription id (2026-07-28: "The result body is
    /// otherwise empty"): it goes out as [`end_listen`](Self::end_listen) writes it, whatever
    /// `result` holds (so `respond` does not grant a listen waiting for
    /// [`grant_listen`](Self::grant_listen): it ends it, granted nothing). In 2026-07-28 it
    /// sends complete results only: a `resultType` other than `"complete"` gets
    /// [`Error::InvalidParams`] (use [`respond_input_required`](Self::respond_input_required)
    /// or [`respond_task`](Self::respond_task), which check the request may get one), and so
    /// do cache hints of its own that are not valid (a `ttlMs` that is not a number `>= 0`,
    /// or in a cacheable result such as `tools/list` not an integer `>= 0`; null only outside
    /// cacheable results, as a task's `ttlMs`; a `cacheScope` other than `"public"` or
    /// `"private"`).
    pub fn respond(&mut self, id: Id<'_>, result: RawJson<'_>) -> Result<(), Error> {
        self.core.events.retire_current();
        if !result.is_object() {
            return Err(Error::InvalidParams);
        }
        let key = OwnedId::from(id);
        if self
            .core
            .dispatch
            .inbound
            .get(&key)
            .is_some_and(|e| e.listen.is_some())
        {
            return self.core.end_listen(id);
        }
        self.core.respond(id, Answer::Result(result))
    }

    /// 2025-11-25 server: answers the peer's request `id` with `-32042` (URL elicitation
    /// required): the user must complete the URL-mode `elicitations` (a JSON array of objects
    /// with `mode` `"url"`, `elicitationId`, `url` and `message`) before the request can
    /// succeed. Send `notifications/elicitation/complete` with [`notify`](Self::notify) when
    /// each one finishes. [`Error::NotInVersion`] in other versions,
    /// [`Error::NotNegotiated`] when the client did not declare `elicitation.url`,
    /// [`Error::InvalidParams`] for anything but such an array.
    pub fn respond_url_elicitation_required(
        &mut self,
        id: Id<'_>,
        elicitations: RawJson<'_>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        if self.core.effective_version() != ProtocolVersion::V2025_11_25 {
            return Err(Error::NotInVersion);
        }
        let declared = self
            .core
            .lifecycle
            .peer_caps
            .as_ref()
            .is_some_and(|c| c.has(Caps::ELICITATION_URL));
        if !declared {
            return Err(Error::NotNegotiated(Caps::ELICITATION_URL));
        }
        if elicit::required_elicitations(elicitations).is_none() {
            return Err(Error::InvalidParams);
        }
        let mut data = String::with_capacity(elicitations.get().len() + 20);
        data.push_str("{\"elicitations\":");
        data.push_str(elicitations.get());
        data.push('}');
        self.core.respond(
            id,
            outbound::Answer::Error {
                code: crate::mcp::URL_ELICITATION_REQUIRED,
                message: "URL elicitation required",
                data: Some(RawJson::validated(&data)),
            },
        )
    }

    /// Answers a request with a task handle instead of its result (`task` is a
    /// `CreateTaskResult`, from [`Tasks::create_result`](crate::tasks::Tasks::create_result)).
    ///
    /// 2026-07-28 (the tasks extension): a `tools/call`; refused with
    /// [`Error::NotNegotiated`] when the request, or our own configuration, did not declare
    /// the extension ([`Caps::TASKS_EXTENSION`](crate::mcp::Caps::TASKS_EXTENSION)), so a task
    /// never goes to a client that cannot poll it (without our declaration we refuse
    /// `tasks/get`), and [`Error::InvalidParams`] unless `task` has
    /// `resultType` `"task"`. 2025-11-25 (experimental tasks): a request that carried `task`,
    /// for a method we declared `tasks.requests.<method>` for; `task` is `{"task":{…}}`.
    /// [`Error::NotEligible`] for any other request, [`Error::NotInVersion`] in other
    /// versions.
    pub fn respond_task(&mut self, id: Id<'_>, task: RawJson<'_>) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.respond_task(id, task)
    }

    /// 2026-07-28 server: what the `subscriptions/listen` request `id` asks to hear and we can
    /// honour (the list changes our capabilities declare, then at most 256 resource URIs, then
    /// at most 256 task ids), while it waits for [`grant_listen`](Self::grant_listen) under
    /// [`Policy::review_listens`]; `None` for any other id. Use it to show or check the items
    /// before granting; `grant_listen` asks about the same items in the same order.
    pub fn listen_items(&self, id: Id<'_>) -> Option<Vec<ListenItem<'_>>> {
        Some(self.core.pending_listen(id)?.items().collect())
    }

    /// 2026-07-28 server: grants the `subscriptions/listen` request `id`, which came as an
    /// [`Event::Request`] because [`Policy::review_listens`] is on, and sends the
    /// acknowledgement. `keep` is asked about each of the [`listen_items`](Self::listen_items),
    /// in order; the stream carries those it returns `true` for. Check access here: a client must not
    /// follow a task or resource it may not read. A listen granted nothing stays open until
    /// [`end_listen`](Self::end_listen); to refuse it outright, answer it with
    /// [`respond_error`](Self::respond_error) instead. Granting a listen the peer cancelled
    /// succeeds but sends nothing. [`Error::UnknownRequest`] when `id` is not a listen waiting
    /// for its grant, [`Error::OutputFull`] when the output is past its limit.
    pub fn grant_listen(
        &mut self,
        id: Id<'_>,
        mut keep: impl FnMut(ListenItem<'_>) -> bool,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.grant_listen(id, &mut keep)
    }

    /// Answers every request of the peer's still in flight with an internal error (-32603)
    /// carrying `message`, and returns how many it answered: all but 2026-07-28 listens, which
    /// [`end_listen`](Self::end_listen) ends. Use it when nothing will answer them any more
    /// (a host that stops, or an application that stops taking requests) before a graceful
    /// [`close`](Self::close), which would otherwise wait its whole grace for those answers.
    /// One the output has no room for is not answered (its peer is not reading).
    pub fn refuse_peer_requests(&mut self, message: &str) -> usize {
        self.core.events.retire_current();
        self.core.refuse_peer_requests(message)
    }

    /// 2026-07-28 server: the ids of the peer's `subscriptions/listen` requests in flight,
    /// granted or waiting for [`grant_listen`](Self::grant_listen) (the engine answers and tags
    /// them itself; they come as [`Event::Request`] only under [`Policy::review_listens`]).
    /// Use it with [`end_listen`](Connection::end_listen).
    pub fn listen_subscriptions(&self) -> Vec<OwnedId> {
        self.core.listen_subscriptions()
    }

    /// 2026-07-28 server: ends one of the peer's `subscriptions/listen` subscriptions
    /// gracefully (at shutdown, or when the subscription can no longer be served). The listen
    /// request gets its result, with the subscription id in `_meta`; over HTTP that ends its SSE
    /// stream. A listen still waiting for [`grant_listen`](Self::grant_listen) is first
    /// acknowledged with nothing granted: the acknowledgement must be the stream's first
    /// message (should the output fill up between the two, the call fails with
    /// [`Error::OutputFull`] and the listen stays, acknowledged: call again once it drained).
    /// [`Error::UnknownRequest`] when `id` is not a listen request in flight.
    pub fn end_listen(&mut self, id: Id<'_>) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.end_listen(id)
    }

    /// Answers one of the peer's requests with a JSON-RPC error. A code the negotiated
    /// version does not define (before a version is negotiated: that none of
    /// [`Config::versions`] defines) is refused with [`Error::CodeNotInVersion`], except
    /// [`mcp::RESOURCE_NOT_FOUND`] (-32002), which is written as the version's code for a
    /// missing resource: -32602 from 2026-07-28 on, which replaced it (see
    /// [`mcp::resource_not_found_code`]). So one app answers "not found" right in every era.
    /// -32021 and -32022 need the data the schema requires (`requiredCapabilities`, an
    /// object; `supported`, an array, and `requested`, a string), else [`Error::InvalidParams`].
    /// -32042 goes out as [`respond_url_elicitation_required`](Self::respond_url_elicitation_required)
    /// writes it, from `data.elicitations`: its own message, and no other member of `data`.
    pub fn respond_error(
        &mut self,
        id: Id<'_>,
        code: i64,
        message: &str,
        data: Option<RawJson<'_>>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        let mut code = code;
        if let Some(v) = self.core.lifecycle.version {
            if code == mcp::RESOURCE_NOT_FOUND {
                code = mcp::resource_not_found_code(v);
            }
            if !mcp::error_code_allowed(code, v) {
                return Err(Error::CodeNotInVersion);
            }
        } else if !self
            .core
            .config
            .versions
            .iter()
            .any(|v| mcp::error_code_allowed(code, *v))
        {
            // Nothing negotiated yet: the code must exist in a version we speak.
            return Err(Error::CodeNotInVersion);
        }
        if !mcp::has_required_data(code, data) {
            return Err(Error::InvalidParams);
        }
        if code == mcp::URL_ELICITATION_REQUIRED {
            // Only with its well-formed data, to a client that can follow it.
            let elicitations = data
                .and_then(|d| d.unique("elicitations"))
                .ok_or(Error::InvalidParams)?;
            return self.respond_url_elicitation_required(id, elicitations);
        }
        self.core.respond(
            id,
            Answer::Error {
                code,
                message,
                data,
            },
        )
    }

    /// Reports progress on one of the peer's requests that carried a progress token:
    /// `progress` finite and above the last one reported, `total` (if any) finite, else
    /// [`Error::NonIncreasingProgress`]. A `subscriptions/listen` stream takes no progress
    /// ([`Error::NoProgressToken`]). A server that took a request before `initialize` came
    /// (under a lax [`Policy::strict_lifecycle`]) sends no progress until it does
    /// ([`Error::NotInitialized`]).
    pub fn progress(
        &mut self,
        id: Id<'_>,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.progress(id, progress, total, message)
    }

    /// Server: sends a log message about one of the peer's requests. In 2026-07-28 it goes out
    /// only if the request asked for this level or a lower one with `logLevel`, and never on a
    /// `subscriptions/listen` stream; in the handshake era, whenever. Either way we must have
    /// declared `logging` ([`Error::NotNegotiated`]).
    /// Returns whether it was sent. A client gets [`Error::WrongDirection`], and a server
    /// before `initialize` came [`Error::NotInitialized`], as for progress. Like
    /// [`progress`](Self::progress), it still goes out during a graceful close, for requests
    /// not yet answered.
    pub fn log(
        &mut self,
        id: Id<'_>,
        level: LogLevel,
        logger: Option<&str>,
        data: RawJson<'_>,
    ) -> Result<bool, Error> {
        self.core.events.retire_current();
        self.core.log(id, level, logger, data)
    }

    /// Server, 2026-07-28: answers a `tools/call`, `prompts/get` or `resources/read` with "input
    /// required": the input requests the client must fulfil (each needing a capability the
    /// request declared) and/or an opaque state to be echoed back on the retry. Like any
    /// answer, one to a request the peer cancelled is taken and not sent.
    ///
    /// Refused with [`Error::NotInVersion`] for a request of the handshake era,
    /// [`Error::NotEligible`] for any other method, [`Error::NotNegotiated`] when an input
    /// request needs a client capability the request did not declare, and
    /// [`Error::InvalidParams`] when neither is given, `input_requests` is not an object, or
    /// one of its entries is not a valid input request.
    ///
    /// The retry is an ordinary request: its `requestState` and `inputResponses` reach the
    /// application in its params, unchecked. The state comes back from the client, so treat
    /// it as the client's input ("servers MUST treat requestState as an attacker-controlled
    /// input"): when it carries anything that decides access or what the tool does, seal it
    /// (an HMAC with a key of the server's, over the state and the request it belongs to)
    /// and refuse a retry whose seal does not verify.
    pub fn respond_input_required(
        &mut self,
        id: Id<'_>,
        input_requests: Option<RawJson<'_>>,
        request_state: Option<&str>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core
            .respond_input_required(id, input_requests, request_state)
    }

    /// Client, 2026-07-28: re-sends a request that came back with
    /// [`Event::InputRequired`], with a new id, the original params, `inputResponses` and the
    /// server's `requestState` echoed byte for byte, and the original [`RequestOptions`] (its
    /// timeout, restarted now, and its progress).
    pub fn retry(
        &mut self,
        now: Timestamp,
        request: RequestId,
        input_responses: Option<RawJson<'_>>,
    ) -> Result<RequestId, Error> {
        self.core.events.retire_current();
        self.core.retry(now, request, input_responses)
    }

    /// Cancels one of our requests: the peer is notified and the request ends here, with no
    /// event; an answer that arrives later is dropped. A 2025-11-25 task-augmented request
    /// whose task handle has not come yet ends here too, but the peer is not told: the
    /// specification requires `tasks/cancel` for tasks, and there is no task id yet (the same
    /// holds when such a request times out). If the handle still comes, the engine sends
    /// `tasks/cancel` for that task itself, where the peer declared `tasks.cancel`; that
    /// request counts in [`requests_in_flight`](Self::requests_in_flight) until answered, and
    /// its answer is no event. Once the handle has come, cancel the task with `tasks/cancel`.
    pub fn cancel(
        &mut self,
        now: Timestamp,
        request: RequestId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.cancel(now, request, reason)
    }

    /// Begins a graceful close: no new requests or notifications; the requests in flight
    /// either way get until `now + grace` to be answered (ours by the peer, the peer's by the
    /// application, which goes on answering them as usual; a peer's request that arrives
    /// meanwhile is handed out too). The close ends as soon as none is left. When the grace
    /// runs out first, the peer is sent a cancellation for each of ours still unanswered, the
    /// peer's own still unanswered get an error (-32603), and the connection closes with
    /// [`CloseReason::Local`]: write out what [`poll_transmit`](Self::poll_transmit) still
    /// holds before dropping it. Use [`refuse_peer_requests`](Self::refuse_peer_requests)
    /// first for the peer's requests nothing will answer. (A
    /// 2025-11-25 task-augmented request gets no cancellation: see [`cancel`](Self::cancel).)
    /// With a zero grace that happens within this call: the cancellations are in the output
    /// when it returns. A 2026-07-28 server first ends the peer's `subscriptions/listen`
    /// subscriptions with their results, as [`end_listen`](Self::end_listen) does; a client
    /// cancels its own at once (each reported [`Abandoned`](Event::Abandoned)), since nothing
    /// else ends them.
    /// Calling it again while closing can only end it sooner: a deadline earlier than the
    /// first replaces it (a host asked to stop while the application's own long close runs;
    /// a zero grace ends it within the call), a later one changes nothing.
    pub fn close(&mut self, now: Timestamp, grace: Duration) {
        self.core.events.retire_current();
        self.core.close(now, grace);
    }

    // ---- outputs ----

    /// The next bytes to write, and the stream they belong to. The answer changes after any
    /// input or command, and after [`consume_transmit`](Self::consume_transmit).
    pub fn poll_transmit(&self) -> Option<Transmit<'_>> {
        self.core
            .out
            .output
            .peek()
            .map(|(stream, bytes)| Transmit { stream, bytes })
    }

    /// Reports that the first `n` bytes from [`poll_transmit`](Self::poll_transmit) were written.
    pub fn consume_transmit(&mut self, n: usize) {
        self.core.events.retire_current();
        self.core.out.output.consume(n);
    }

    /// For message-oriented transports (an HTTP host): the next whole message to send, and
    /// the stream it belongs to, without the newline stdio framing adds. Call
    /// [`consume_frame`](Self::consume_frame) once it is taken. The same output queue as
    /// [`poll_transmit`](Self::poll_transmit): use one or the other on a connection.
    pub fn poll_frame(&self) -> Option<Frame<'_>> {
        self.core
            .out
            .output
            .peek_frame()
            .map(|(stream, bytes)| Frame { stream, bytes })
    }

    /// Reports that the message from [`poll_frame`](Self::poll_frame) was taken.
    pub fn consume_frame(&mut self) {
        self.core.events.retire_current();
        self.core.out.output.consume_frame();
    }

    /// The next event, borrowing from the engine until the next call that takes `&mut self`.
    /// New events appear after inputs and commands; call it until `None` every time.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        self.core.events.next()
    }

    /// How many events are waiting for [`poll_event`](Self::poll_event). Use it to know
    /// whether a connection you are about to drop still has something to say.
    pub fn pending_events(&self) -> usize {
        self.core.events.pending()
    }

    /// The configuration the connection was made from (a host that starts over, after an
    /// HTTP session expired, makes the next connection from it).
    pub fn config(&self) -> &Config {
        &self.core.config
    }

    /// The event handed out by the last [`poll_event`](Self::poll_event), again.
    /// Server, stateless era: swaps the client capabilities parsed last with `caps`. An HTTP
    /// server makes a connection per stateless request; handing the parse from one to the
    /// next spares each request parsing the same `clientCapabilities` again.
    pub(crate) fn swap_client_caps(&mut self, caps: &mut Option<crate::mcp::Capabilities>) {
        std::mem::swap(&mut self.core.stateless.last_client_caps, caps);
    }

    pub(crate) fn current_event(&self) -> Option<Event<'_>> {
        self.core.events.current()
    }

    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout) has work, if
    /// any. It changes after inputs and commands. It may be early (a request that finished
    /// leaves its timer behind; progress that moved a deadline later leaves the old one, up to
    /// `max_total_timeout` early); calling `handle_timeout` then is harmless.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if self.core.lifecycle.is_closed() {
            return None;
        }
        // The end of input closes the connection once the last line's events are out: "now"
        // then, and not while they wait. A host that holds events back while its output is
        // full would otherwise find a deadline always due, and spin until the peer read.
        if self.eof_after_events() && self.core.events.pending() == 0 {
            return Some(Timestamp::ZERO);
        }
        self.core.corr.timers.earliest()
    }
}

// ---- The core -------------------------------------------------------------------------------

/// The engine behind [`Connection`]: configuration, one state struct per concern, and the two
/// queues every concern writes to (events for the application, counters of what was dropped).
/// The methods live with the concern they serve: see the `mod` lines above.
struct Core {
    role: Role,
    /// Shared by every connection an HTTP server makes; never changed after creation.
    config: Arc<Config>,
    /// Phase, era, negotiated version and what we know of the peer.
    lifecycle: Lifecycle,
    /// The decoder, open batches, the peer's requests in flight and the ones it cancelled.
    dispatch: Dispatch,
    /// Our requests in flight, the ids we allocate, the timers.
    corr: Correlation,
    /// Bytes waiting for the transport, and scratch space to build messages in.
    out: Outbound,
    /// The stateless era's per-request state (retries after "input required", the last
    /// client capabilities seen).
    stateless: Stateless,
    events: EventQueue,
    stats: Counters,
    /// Client: URL-mode elicitations awaiting their completion notification.
    elicitations: elicit::KnownElicitations,
    /// 2025-11-25: tasks whose requests' progress tokens are still in use.
    task_tokens: correlation::TaskTokens,
}

impl Core {
    fn new(config: Arc<Config>) -> Core {
        let limits = config.limits;
        Core {
            role: config.role,
            lifecycle: Lifecycle::new(config.role, config.policy.strict_lifecycle),
            dispatch: Dispatch::new(config.decoder, limits.max_remembered_ids),
            corr: Correlation::new(limits.max_remembered_ids),
            out: Outbound::default(),
            stateless: Stateless::default(),
            events: EventQueue::new(
                limits.max_queued_events,
                limits.max_frame.max(limits.max_buffered_output),
            ),
            stats: Counters::default(),
            elicitations: elicit::KnownElicitations::default(),
            task_tokens: correlation::TaskTokens::default(),
            config,
        }
    }

    /// Takes over the emptied buffers of `old`, a finished connection about to be dropped:
    /// its output, event queue, scratch space and table of requests in flight. The HTTP
    /// server makes a connection per stateless request, and this saves their allocations.
    /// Only memory moves: every buffer is cleared first, and this core must be fresh (not
    /// started), so all state is its own.
    fn adopt_buffers(&mut self, old: &mut Core) {
        self.out.output.adopt_buffers(&mut old.out.output);
        self.events.adopt_buffers(&mut old.events);
        old.out.scratch.clear();
        if self.out.scratch.capacity() == 0 {
            std::mem::swap(&mut self.out.scratch, &mut old.out.scratch);
        }
        old.dispatch.inbound.clear();
        if self.dispatch.inbound.capacity() == 0 {
            std::mem::swap(&mut self.dispatch.inbound, &mut old.dispatch.inbound);
        }
    }

    /// The version that governs method lookups: the negotiated one, or before that the one
    /// we offer (client) or our newest (server).
    fn effective_version(&self) -> ProtocolVersion {
        self.lifecycle.version.unwrap_or_else(|| {
            match self.lifecycle.era {
                Some(Era::Modern) => self.config.latest_modern(),
                _ => self.config.latest_legacy(),
            }
            .or_else(|| self.config.latest_modern())
            .unwrap_or(ProtocolVersion::LATEST_LEGACY)
        })
    }

    /// A violation with no frame to point into (a frame too long, a batch refused).
    fn violation(&mut self, kind: ViolationKind) {
        self.events.push(Stored::Violation {
            kind,
            id: None,
            method: None,
        });
    }

    /// A violation whose id and method are views into `frame`.
    fn violation_in(
        &mut self,
        frame: &str,
        kind: ViolationKind,
        id: Option<Id<'_>>,
        method: Option<JsonStr<'_>>,
    ) {
        let cap = self.events.capture(frame);
        let stored = Stored::Violation {
            kind,
            id: id.map(|i| cap.id(i)),
            method: method.map(|m| cap.str(m)),
        };
        cap.push(stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection taking over a finished one's buffers starts with nothing of it: not its
    /// queued events, not its unsent output, not its requests in flight.
    #[test]
    fn adopted_buffers_carry_no_state() {
        let config = Arc::new(
            Config::server("t", "1")
                .with_capabilities(r#"{"tools":{}}"#)
                .unwrap(),
        );
        let now = Timestamp::ZERO;
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
        let mut old = Connection::with_validated(config.clone(), now, None);
        old.handle_frame(now, StreamId::MAIN, init);
        old.handle_frame(
            now,
            StreamId::MAIN,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        old.handle_frame(now, StreamId::MAIN, call);
        // Left as it is: events not polled, the initialize answer not sent, the call open.
        assert!(old.pending_events() > 0);
        assert!(old.poll_frame().is_some());
        assert!(old.reusable_bytes() > 0);

        let mut new = Connection::with_validated(config, now, Some(&mut old));
        assert_eq!(new.pending_events(), 0);
        assert!(new.poll_frame().is_none());
        assert!(new.reusable_bytes() > 0, "the buffers were taken over");
        // The same ids again are new requests here, answered as such.
        new.handle_frame(now, StreamId::MAIN, init);
        let mut answers = 0;
        while let Some(frame) = new.poll_frame() {
            let text = std::str::from_utf8(frame.bytes).unwrap();
            assert!(text.contains(r#""id":1"#), "{text}");
            answers += 1;
            new.consume_frame();
        }
        assert_eq!(answers, 1);
        new.handle_frame(
            now,
            StreamId::MAIN,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        new.handle_frame(now, StreamId::MAIN, call);
        let mut requests = 0;
        while let Some(event) = new.poll_event() {
            if let Event::Request { id, .. } = event {
                assert_eq!(id, crate::jsonrpc::Id::Int(2));
                requests += 1;
            }
        }
        assert_eq!(requests, 1, "the call is new here, not a duplicate");
    }

    /// A host calling `close` again and again while closing (without `handle_timeout` in
    /// between) does not pile up timer entries: each call pushed one.
    #[test]
    fn repeated_closes_push_no_timers() {
        let mut config = Config::client("c", "1");
        config.client_era = ClientEra::Legacy;
        let mut conn = Connection::new(config, Timestamp::ZERO).unwrap();
        conn.close(Timestamp::ZERO, Duration::from_secs(5));
        let after_first = conn.core.corr.timers.len();
        for n in 0..1000 {
            conn.close(Timestamp::from_nanos(n), Duration::from_secs(5));
        }
        assert_eq!(conn.core.corr.timers.len(), after_first);
    }
}
