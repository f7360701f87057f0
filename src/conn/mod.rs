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

mod config;
mod event;
mod json_edit;
mod lifecycle;
mod modern;
mod output;
mod owned;
mod tables;
mod time;

use std::fmt;
use std::time::Duration;

pub use config::{CacheScope, ClientEra, Config, Limits, Policy, ProgressPolicy, Role};
pub use event::{CloseReason, Event, RequestId, ViolationKind};
pub use lifecycle::State;
pub use output::{StreamId, Transmit};
pub use owned::OwnedEvent;
pub use time::Timestamp;

use crate::frame::line::{FrameError, LineDecoder};
use crate::jsonrpc::{
    self, DecodeError, Decoded, Decoder, ErrorKind, Id, JsonStr, Message, OwnedId, RawJson, Reason,
};
use crate::mcp::{self, Capabilities, Caps, Era, Gate, LogLevel, MethodKind, ProtocolVersion};
use event::{EventQueue, Stored};
use lifecycle::{Admit, Lifecycle};
use output::Output;
use std::collections::VecDeque;
use tables::{
    BoundedSet, FastMap, Inbound, ListenFilter, ModernContext, Pending, PendingKind, RetryBase,
    SeqMap, TimerKey, Timers,
};

// ---- Errors --------------------------------------------------------------------------------

/// Why a command was refused. The connection is unchanged when a command returns an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The connection is closed.
    Closed,
    /// [`close`](Connection::close) was called: no new requests or notifications.
    Closing,
    /// The handshake is not finished, and the lifecycle allows only pings (and, from a server,
    /// logging) until it is.
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
    /// Params must be a JSON object (and may not carry a `progressToken` of their own when the
    /// engine is asked to add one).
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
    /// `initialize` cannot be cancelled.
    CannotCancelInitialize,
    /// The request carried no progress token, so no progress can be reported for it.
    NoProgressToken,
    /// Progress must increase with every notification.
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
            Error::NonIncreasingProgress => f.write_str("progress must increase"),
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
    /// Answers the application gave to requests the peer had cancelled (not sent).
    pub suppressed_responses: u64,
    /// Peer notifications dropped because the event queue was full.
    pub dropped_events: u64,
}

// ---- The connection -------------------------------------------------------------------------

/// One MCP connection, client or server. See the [module docs](self) for how to drive it.
pub struct Connection {
    framer: LineDecoder,
    core: Core,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.core.role)
            .field("state", &self.core.lifecycle.state())
            .field("version", &self.core.version)
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

impl Connection {
    /// Creates a connection. A client queues its `initialize` request at once, timed from `now`.
    pub fn new(config: Config, now: Timestamp) -> Result<Connection, ConfigError> {
        config.validate().map_err(ConfigError)?;
        let framer = LineDecoder::with_max_frame(config.limits.max_frame);
        let mut core = Core::new(config);
        if core.role == Role::Client {
            match core.config.client_start() {
                Some(Era::Legacy) => {
                    core.era = Some(Era::Legacy);
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
            core.lock_era(Era::Modern);
        }
        Ok(Connection { framer, core })
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
        self.core.version
    }

    /// The peer's capabilities, once known.
    pub fn peer_capabilities(&self) -> Option<&Capabilities> {
        self.core.peer_caps.as_ref()
    }

    /// The peer's `clientInfo` / `serverInfo` object, once known.
    pub fn peer_info(&self) -> Option<RawJson<'_>> {
        self.core.peer_info.as_deref().map(RawJson::validated)
    }

    /// Client: the server's `instructions`, if it sent any.
    pub fn peer_instructions(&self) -> Option<&str> {
        self.core.peer_instructions.as_deref()
    }

    /// The era in force: `None` while a client in auto mode is still probing or a dual-era
    /// server has not seen its first request.
    pub fn era(&self) -> Option<Era> {
        self.core.era
    }

    /// Server: what a 2026-07-28 request in flight declared in its `_meta` (`None` for an
    /// unknown id or a handshake-era request).
    pub fn request_context(&self, id: Id<'_>) -> Option<RequestContext> {
        let ctx = self.core.inbound.get(&OwnedId::from(id))?.modern?;
        Some(RequestContext {
            version: ctx.version,
            client_capabilities: ctx.client_caps,
            log_level: ctx.log_level,
        })
    }

    /// Counters of what was dropped quietly.
    pub fn stats(&self) -> Stats {
        let mut s = self.core.stats;
        s.dropped_events = self.core.events.dropped;
        s
    }

    /// How many timer entries the engine holds (live and stale); bounded by a constant factor
    /// of the requests in flight. For tests of the bounds.
    pub fn timer_entries(&self) -> usize {
        self.core.timers.len()
    }

    /// How many of our requests await an answer.
    pub fn requests_in_flight(&self) -> usize {
        self.core.pending.len()
    }

    /// How many of the peer's requests await our answer.
    pub fn peer_requests_in_flight(&self) -> usize {
        self.core.inbound.len()
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
                Err(FrameError::TooLong { .. }) => self.core.violation(ViolationKind::FrameTooLong),
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

    /// The transport reached end of input: a last unterminated line is processed, requests in
    /// flight are abandoned, and the connection closes.
    pub fn handle_eof(&mut self, now: Timestamp) {
        self.core.events.retire_current();
        if let Some(frame) = self.framer.finish()
            && !self.core.lifecycle.is_closed()
        {
            self.core.on_frame(now, StreamId::MAIN, frame);
        }
        self.core.finish(CloseReason::Eof);
    }

    /// Fires every timer due at `now`: request timeouts and the end of a graceful close.
    /// Calling it early does nothing.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.core.events.retire_current();
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
            .request(now, method, params, options, StreamId::MAIN)
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
        let stream = self
            .core
            .inbound
            .get(&OwnedId::from(parent))
            .map(|e| e.stream)
            .ok_or(Error::UnknownRequest)?;
        self.core.request(now, method, params, options, stream)
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Option<RawJson<'_>>) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.notify(method, params)
    }

    /// Answers one of the peer's requests with a result. Answering a request the peer has
    /// cancelled succeeds but sends nothing.
    pub fn respond(&mut self, id: Id<'_>, result: RawJson<'_>) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.respond(id, Answer::Result(result))
    }

    /// Answers one of the peer's requests with a JSON-RPC error.
    pub fn respond_error(
        &mut self,
        id: Id<'_>,
        code: i64,
        message: &str,
        data: Option<RawJson<'_>>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        if let Some(v) = self.core.version
            && !mcp::error_code_allowed(code, v)
        {
            return Err(Error::CodeNotInVersion);
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

    /// Reports progress on one of the peer's requests that carried a progress token.
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
    /// only if the request asked for this level or a lower one with `logLevel`; in the
    /// handshake era, whenever we declared `logging`. Returns whether it was sent.
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
    /// request declared) and/or an opaque state to be echoed back on the retry.
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
    /// server's `requestState` echoed byte for byte.
    pub fn retry(
        &mut self,
        now: Timestamp,
        request: RequestId,
        input_responses: Option<RawJson<'_>>,
    ) -> Result<RequestId, Error> {
        self.core.events.retire_current();
        self.core
            .retry(now, request, input_responses, RequestOptions::default())
    }

    /// Cancels one of our requests: the peer is notified and the request ends here, with no
    /// event; an answer that arrives later is dropped.
    pub fn cancel(
        &mut self,
        now: Timestamp,
        request: RequestId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        self.core.events.retire_current();
        self.core.cancel(now, request, reason)
    }

    /// Begins a graceful close: no new requests or notifications; our requests in flight get
    /// until `now + grace` to be answered. Then the connection closes with
    /// [`CloseReason::Local`].
    pub fn close(&mut self, now: Timestamp, grace: Duration) {
        self.core.events.retire_current();
        self.core.close(now, grace);
    }

    // ---- outputs ----

    /// The next bytes to write, and the stream they belong to. The answer changes after any
    /// input or command, and after [`consume_transmit`](Self::consume_transmit).
    pub fn poll_transmit(&self) -> Option<Transmit<'_>> {
        self.core
            .output
            .peek()
            .map(|(stream, bytes)| Transmit { stream, bytes })
    }

    /// Reports that the first `n` bytes from [`poll_transmit`](Self::poll_transmit) were written.
    pub fn consume_transmit(&mut self, n: usize) {
        self.core.events.retire_current();
        self.core.output.consume(n);
    }

    /// The next event, borrowing from the engine until the next call that takes `&mut self`.
    /// New events appear after inputs and commands; call it until `None` every time.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        self.core.events.next()
    }

    /// The event handed out by the last [`poll_event`](Self::poll_event), again.
    pub(crate) fn current_event(&self) -> Option<Event<'_>> {
        self.core.events.current()
    }

    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout) has work, if
    /// any. It changes after inputs and commands. It may be slightly early (a request that
    /// finished leaves its timer behind); calling `handle_timeout` then is harmless.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if self.core.lifecycle.is_closed() {
            return None;
        }
        self.core.timers.earliest()
    }
}

// ---- The core -------------------------------------------------------------------------------

/// An answer to a peer's request.
#[derive(Clone, Copy)]
enum Answer<'a> {
    Result(RawJson<'a>),
    Error {
        code: i64,
        message: &'a str,
        data: Option<RawJson<'a>>,
    },
}

/// How a request is refused: what the application is told and what the peer is answered.
#[derive(Clone, Copy)]
struct Refusal<'a> {
    kind: ViolationKind,
    code: i64,
    message: &'a str,
    data: Option<RawJson<'a>>,
}

impl<'a> Refusal<'a> {
    fn new(kind: ViolationKind, code: i64, message: &'a str) -> Self {
        Refusal {
            kind,
            code,
            message,
            data: None,
        }
    }
}

/// Answers to the members of one batch, collected until every request in it is answered.
#[derive(Debug)]
struct BatchCollector {
    buf: Vec<u8>,
    written: usize,
    outstanding: usize,
    stream: StreamId,
}

struct Core {
    role: Role,
    /// The era in force, once known.
    era: Option<Era>,
    /// Client, 2026-07-28: what "input required" answers need for a retry, by old request id.
    retryable: FastMap<i64, (RetryBase, Option<String>)>,
    retry_order: VecDeque<i64>,
    /// Client, 2026-07-28: what each request in flight that may come back "input required"
    /// needs for a retry, by request id. Kept apart from `pending`, whose entries stay small
    /// for the lookup every answer makes.
    retry_bases: FastMap<i64, RetryBase>,
    /// Client, 2026-07-28: spare strings for the params a retry would need, so that keeping
    /// them for every eligible request allocates nothing in steady state.
    retry_pool: Vec<String>,
    /// The capacity held by `retry_pool`, in bytes.
    retry_pool_bytes: usize,
    /// Client, auto mode: a -32022 already triggered the one re-probe allowed.
    reprobed: bool,
    config: Config,
    lifecycle: Lifecycle,
    decoder: Decoder,
    output: Output,
    events: EventQueue,
    version: Option<ProtocolVersion>,
    peer_caps: Option<Capabilities>,
    peer_info: Option<String>,
    peer_instructions: Option<String>,
    pending: SeqMap<Pending>,
    inbound: FastMap<OwnedId, Inbound>,
    /// Our requests that timed out or were cancelled: answers to them are late.
    our_finished: BoundedSet<i64>,
    /// The peer's requests it cancelled: our answers to them are suppressed.
    peer_cancelled: BoundedSet<OwnedId>,
    timers: Timers,
    next_id: i64,
    batches: FastMap<u32, BatchCollector>,
    next_batch: u32,
    scratch: Vec<u8>,
    /// A second scratch buffer, for edits made in two passes (2026-07-28 results).
    edit_scratch: Vec<u8>,
    /// Server, 2026-07-28: the client capabilities the last request declared. A client sends
    /// the same object with every request, so it is parsed (and copied) once.
    last_client_caps: Option<Capabilities>,
    stats: Stats,
    closed_reason: Option<CloseReason>,
}

/// Writes an error response for a frame that could not be decoded, unless it looked like a
/// response (answering a response could start a loop).
fn answers_decode_error(e: &DecodeError<'_>) -> bool {
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

impl Core {
    fn new(config: Config) -> Core {
        let limits = config.limits;
        Core {
            role: config.role,
            era: None,
            retryable: FastMap::default(),
            retry_bases: FastMap::default(),
            retry_order: VecDeque::new(),
            retry_pool: Vec::new(),
            retry_pool_bytes: 0,
            reprobed: false,
            lifecycle: Lifecycle::new(config.role, config.policy.strict_lifecycle),
            decoder: Decoder::new(config.decoder),
            output: Output::default(),
            events: EventQueue::new(limits.max_queued_events),
            version: None,
            peer_caps: None,
            peer_info: None,
            peer_instructions: None,
            pending: SeqMap::default(),
            inbound: FastMap::default(),
            our_finished: BoundedSet::new(limits.max_remembered_ids),
            peer_cancelled: BoundedSet::new(limits.max_remembered_ids),
            timers: Timers::default(),
            next_id: 1,
            batches: FastMap::default(),
            next_batch: 0,
            scratch: Vec::new(),
            edit_scratch: Vec::new(),
            last_client_caps: None,
            stats: Stats::default(),
            closed_reason: None,
            config,
        }
    }

    /// The version that governs method lookups: the negotiated one, or before that the one
    /// we offer (client) or our newest (server).
    fn effective_version(&self) -> ProtocolVersion {
        self.version.unwrap_or_else(|| {
            match self.era {
                Some(Era::Modern) => self.config.latest_modern(),
                _ => self.config.latest_legacy(),
            }
            .or_else(|| self.config.latest_modern())
            .unwrap_or(ProtocolVersion::LATEST_LEGACY)
        })
    }

    fn output_has_room(&self) -> bool {
        self.output.buffered() < self.config.limits.max_buffered_output
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

    // ---- output helpers ----

    /// Writes a frame produced by the engine on its own (an automatic answer). If the peer is
    /// not reading, the connection ends instead.
    fn emit_auto(&mut self, stream: StreamId, write: impl FnOnce(&mut Vec<u8>)) {
        if !self.output_has_room() {
            self.finish(CloseReason::PeerNotReading);
            return;
        }
        write(self.output.begin());
        self.output.end_frame(stream);
    }

    /// Sends an answer to a request of the peer's, to its batch or its stream.
    fn emit_answer(
        &mut self,
        batch: Option<u32>,
        stream: StreamId,
        id: Option<Id<'_>>,
        answer: Answer<'_>,
        automatic: bool,
    ) {
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
        if let Some(b) = batch
            && let Some(collector) = self.batches.get_mut(&b)
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
            write(self.output.begin());
            self.output.end_frame(stream);
        }
    }

    /// A batch member will never be answered (the peer cancelled it).
    fn batch_member_dropped(&mut self, batch: u32) {
        if let Some(c) = self.batches.get_mut(&batch) {
            c.outstanding = c.outstanding.saturating_sub(1);
        }
        self.flush_batch_if_done(batch);
    }

    fn flush_batch_if_done(&mut self, batch: u32) {
        let done = self.batches.get(&batch).is_some_and(|c| c.outstanding == 0);
        if !done {
            return;
        }
        let Some(c) = self.batches.remove(&batch) else {
            return;
        };
        if c.written > 0 {
            let out = self.output.begin();
            out.push(b'[');
            out.extend_from_slice(&c.buf);
            out.push(b']');
            self.output.end_frame(c.stream);
        }
    }

    // ---- inbound ----

    fn on_frame(&mut self, now: Timestamp, stream: StreamId, frame: &[u8]) {
        let decoded = self.decoder.decode_text(frame);
        match decoded {
            Err(e) => self.on_decode_error(frame, stream, None, &e),
            Ok((frame, Decoded::Single(m))) => self.on_message(now, stream, frame, m, None),
            Ok((frame, Decoded::Batch(members))) => {
                let allowed = self.version.is_some_and(ProtocolVersion::has_batches);
                if !allowed {
                    self.violation(ViolationKind::BatchNotAllowed);
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
                let b = self.next_batch;
                self.next_batch = self.next_batch.wrapping_add(1);
                // Every member that expects an answer: requests and invalid members.
                let outstanding = members
                    .iter()
                    .filter(|m| match m {
                        Ok(Message::Request(_)) => true,
                        Ok(_) => false,
                        Err(e) => answers_decode_error(e),
                    })
                    .count();
                self.batches.insert(
                    b,
                    BatchCollector {
                        buf: Vec::new(),
                        written: 0,
                        outstanding: outstanding + 1,
                        stream,
                    },
                );
                for member in members {
                    match member {
                        Ok(m) => self.on_message(now, stream, frame, m, Some(b)),
                        Err(e) => self.on_decode_error(frame.as_bytes(), stream, Some(b), &e),
                    }
                }
                // Release the guard that kept the batch open while members were processed.
                self.batch_member_dropped(b);
            }
        }
    }

    fn on_decode_error(
        &mut self,
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

    fn on_message(
        &mut self,
        now: Timestamp,
        stream: StreamId,
        frame: &str,
        message: Message<'_>,
        batch: Option<u32>,
    ) {
        if self.lifecycle.is_closed() {
            return;
        }
        match message {
            Message::Request(r) => self.on_request(now, stream, frame, r, batch),
            Message::Notification(n) => self.on_notification(now, frame, n),
            Message::Response(r) => self.on_response(now, frame, r.id, Ok(r.result)),
            Message::Error(e) => match e.id {
                Some(id) => self.on_response(now, frame, id, Err(e.error)),
                None => self.violation_in(frame, ViolationKind::UnknownResponse, None, None),
            },
        }
    }

    fn reject(
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

    fn on_request(
        &mut self,
        _now: Timestamp,
        stream: StreamId,
        frame: &str,
        r: jsonrpc::Request<'_>,
        batch: Option<u32>,
    ) {
        let method = r.method.to_str();
        let method: &str = &method;
        let key = OwnedId::from(r.id);
        if self.inbound.contains_key(&key) {
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
        if self.role == Role::Server && self.route_stateless(stream, frame, &r, batch, method) {
            return;
        }
        match self.lifecycle.admit(MethodKind::Request, method) {
            Admit::Ignore => return,
            Admit::TooEarly => {
                return self.reject(
                    frame,
                    (stream, batch),
                    &r,
                    Refusal::new(
                        ViolationKind::BeforeInitialization,
                        jsonrpc::INVALID_REQUEST,
                        "not allowed before initialization completes",
                    ),
                );
            }
            Admit::Yes => {}
        }
        if self.role == Role::Client && self.era == Some(Era::Modern) {
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
        self.accept_request(stream, frame, &r, batch, None, false, None);
    }

    /// Records a request the application will answer and hands it over as an event (or, for a
    /// listen stream, keeps it open for notifications).
    #[allow(clippy::too_many_arguments)]
    fn accept_request(
        &mut self,
        stream: StreamId,
        frame: &str,
        r: &jsonrpc::Request<'_>,
        batch: Option<u32>,
        modern: Option<ModernContext>,
        input_eligible: bool,
        listen: Option<ListenFilter>,
    ) {
        if self.inbound.len() >= self.config.limits.max_inbound_in_flight {
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
        let progress_token = match progress_token(r.params) {
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
        let is_listen = listen.is_some();
        self.inbound.insert(
            OwnedId::from(r.id),
            Inbound {
                progress_token,
                last_progress: None,
                input_eligible,
                cacheable: modern.is_some()
                    && matches!(
                        r.method.raw(),
                        "tools/list"
                            | "prompts/list"
                            | "resources/list"
                            | "resources/templates/list"
                            | "resources/read"
                    ),
                modern,
                listen,
                batch,
                stream,
            },
        );
        if is_listen {
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

    /// Whether an incoming request for `method` must be refused with -32601.
    fn incoming_request_refused(&self, method: &str, version: ProtocolVersion) -> bool {
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

    fn on_initialize(
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
        self.version = Some(chosen);
        self.peer_caps = Some(caps);
        self.peer_info = Some(info);
        // Build the result.
        let mut result = std::mem::take(&mut self.scratch);
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
        self.scratch = result;
        self.lifecycle.initialize_answered();
    }

    fn on_notification(&mut self, now: Timestamp, frame: &str, n: jsonrpc::Notification<'_>) {
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
                if self.lifecycle.awaiting_initialized() {
                    self.lifecycle.handshake_done();
                    if let Some(v) = self.version {
                        self.events.push(Stored::Ready(v));
                        self.release_handshake_memory();
                    }
                } else {
                    self.violation_in(
                        frame,
                        ViolationKind::BeforeInitialization,
                        None,
                        Some(n.method),
                    );
                }
            }
            "notifications/cancelled" => self.on_peer_cancel(frame, n.params),
            "notifications/progress" => self.on_progress(now, frame, n.params),
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

    fn incoming_notification_allowed(&self, method: &str) -> bool {
        let version = self.effective_version();
        let from_client = self.role == Role::Server;
        match mcp::lookup(method, version) {
            Some(info) => {
                info.kind == MethodKind::Notification
                    && info.direction.allows(from_client)
                    && match (info.gate, &self.peer_caps) {
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

    fn on_peer_cancel(&mut self, frame: &str, params: Option<RawJson<'_>>) {
        let target = params
            .and_then(|p| p.get_unique("requestId").ok().flatten())
            .and_then(|v| v.as_id());
        let Some(id) = target else {
            self.stats.ignored_cancellations += 1;
            return;
        };
        let key = OwnedId::from(id);
        let Some(entry) = self.inbound.get(&key) else {
            self.stats.ignored_cancellations += 1;
            return;
        };
        let batch = entry.batch;
        self.inbound.remove(&key);
        self.peer_cancelled.insert(key);
        if let Some(b) = batch {
            self.batch_member_dropped(b);
        }
        let reason = params
            .and_then(|p| p.get_unique("reason").ok().flatten())
            .and_then(|r| r.as_str());
        let cap = self.events.capture(frame);
        let stored = Stored::PeerCancelled {
            id: cap.id(id),
            reason: reason.map(|r| cap.str(r)),
        };
        cap.push(stored);
    }

    fn on_progress(&mut self, now: Timestamp, frame: &str, params: Option<RawJson<'_>>) {
        let Some(params) = params else {
            self.stats.dropped_progress += 1;
            return;
        };
        let token = params.get_unique("progressToken").ok().flatten();
        let progress = params.get_unique("progress").ok().flatten();
        let (Some(Id::Int(n)), Some(progress)) = (
            token.and_then(|t| t.as_id()),
            progress.and_then(|p| p.as_f64()),
        ) else {
            self.stats.dropped_progress += 1;
            return;
        };
        let total = params
            .get_unique("total")
            .ok()
            .flatten()
            .and_then(|t| t.as_f64());
        let message = params
            .get_unique("message")
            .ok()
            .flatten()
            .and_then(|m| m.as_str());
        let policy = self.config.policy.progress;
        let max_total = self.config.max_total_timeout;
        let Some(p) = self.pending.get_mut(&n).filter(|p| p.wants_progress) else {
            self.stats.dropped_progress += 1;
            return;
        };
        if p.last_progress.is_some_and(|last| progress <= last)
            && policy == ProgressPolicy::DropNonIncreasing
        {
            self.stats.non_increasing_progress += 1;
            return;
        }
        p.last_progress = Some(progress);
        if p.reset_on_progress {
            let cap = p.started.after(max_total);
            p.deadline = now.after(p.timeout).min(cap);
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

    fn on_response(
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
        let Some(pending) = self.pending.remove(&n) else {
            if self.our_finished.contains(&n) {
                self.stats.late_responses += 1;
            } else {
                self.violation_in(frame, ViolationKind::UnknownResponse, Some(id), None);
            }
            return;
        };
        match pending.kind {
            PendingKind::Initialize => return self.on_initialize_result(now, outcome),
            PendingKind::Discover { retried } => {
                return self.on_discover_result(now, retried, outcome);
            }
            PendingKind::Normal => {}
        }
        let request = RequestId(n);
        let mut retry = self.take_retry(n);
        let classified = match outcome {
            Ok(result) => Some(self.classify_result(request, &mut retry, result)),
            Err(_) => None,
        };
        self.recycle_retry(retry);
        let cap = self.events.capture(frame);
        let stored = match (outcome, classified) {
            (Ok(result), Some(modern::Classified::Complete)) | (Ok(result), None) => {
                Stored::Response {
                    request,
                    result: cap.raw(result),
                }
            }
            (Ok(_), Some(modern::Classified::InputRequired { requests, state })) => {
                Stored::InputRequired {
                    request,
                    input_requests: requests.map(|r| cap.raw(r)),
                    request_state: state.map(|s| cap.str(s)),
                }
            }
            (Ok(_), Some(modern::Classified::Invalid)) => Stored::InvalidResponse(request),
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

    fn on_initialize_result(
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
                    self.era = None;
                    return self.send_discover(now, version, true);
                }
                return self.finish(CloseReason::InitializeRejected(e.code));
            }
        };
        let Ok(parsed) = parse_initialize_result(result) else {
            return self.finish(CloseReason::InvalidInitializeResult);
        };
        let Some(version) =
            ProtocolVersion::parse(&parsed.version).filter(|v| self.config.versions.contains(v))
        else {
            return self.finish(CloseReason::UnsupportedVersion(parsed.version));
        };
        self.version = Some(version);
        self.peer_caps = Some(parsed.caps);
        self.peer_info = Some(parsed.info);
        self.peer_instructions = parsed.instructions;
        self.emit_auto(StreamId::MAIN, |out| {
            jsonrpc::encode_notification(out, "notifications/initialized", None)
        });
        self.lifecycle.handshake_done();
        self.events.push(Stored::Ready(version));
        self.release_handshake_memory();
    }

    // ---- timers ----

    fn on_timeout(&mut self, now: Timestamp) {
        while let Some(key) = self.timers.pop_due(now) {
            match key {
                TimerKey::Request(n) => {
                    let Some(p) = self.pending.get(&n) else {
                        continue;
                    };
                    if p.deadline > now {
                        // Progress moved the deadline: wait for the new one.
                        let at = p.deadline;
                        self.timers.push(at, key);
                        continue;
                    }
                    let kind = p.kind;
                    if self.pending.remove(&n).is_some() {
                        let retry = self.take_retry(n);
                        self.recycle_retry(retry);
                    }
                    match kind {
                        PendingKind::Initialize => {
                            self.finish(CloseReason::InitializeTimedOut);
                            return;
                        }
                        // A probe that times out means the handshake era (auto mode).
                        PendingKind::Discover { .. } => {
                            self.our_finished.insert(n);
                            if self.config.client_start().is_none() {
                                self.fall_back(now);
                            } else {
                                self.finish(CloseReason::InitializeTimedOut);
                                return;
                            }
                            continue;
                        }
                        PendingKind::Normal => {}
                    }
                    self.our_finished.insert(n);
                    self.events.push(Stored::TimedOut(RequestId(n)));
                    self.send_cancelled(n, Some("timed out"));
                    self.maybe_finish_close();
                }
                TimerKey::CloseGrace => {
                    if self.lifecycle.closing_deadline().is_some_and(|d| d <= now) {
                        self.finish(CloseReason::Local);
                        return;
                    }
                }
            }
        }
        self.compact_timers();
    }

    // ---- commands ----

    fn send_initialize(&mut self, now: Timestamp) {
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
        let id = self.next_id;
        self.next_id += 1;
        if let Ok(text) = std::str::from_utf8(&params) {
            let out = self.output.begin();
            jsonrpc::encode_request(
                out,
                Id::Int(id),
                "initialize",
                Some(RawJson::validated(text)),
            );
            self.output.end_frame(StreamId::MAIN);
        }
        let timeout = self.config.request_timeout;
        self.track(
            now,
            id,
            PendingKind::Initialize,
            timeout,
            None,
            false,
            false,
        );
    }

    /// The handshake is over: give back what it needed (its pending entry, scratch space, the
    /// output it wrote) so an idle connection stays small.
    fn release_handshake_memory(&mut self) {
        if self.pending.is_empty() {
            self.pending = SeqMap::default();
        } else {
            self.pending.shrink_to_fit();
        }
        self.scratch = Vec::new();
        self.output.release_when_drained();
        // Drop the finished handshake's timer, so the next deadline is a real one.
        let close = self
            .lifecycle
            .closing_deadline()
            .map(|d| (d, TimerKey::CloseGrace));
        let live = self
            .pending
            .iter()
            .filter(|(_, p)| p.timeout != Duration::MAX)
            .map(|(n, p)| (p.deadline, TimerKey::Request(*n)))
            .chain(close);
        self.timers.rebuild(live);
    }

    /// Rebuilds the timer heap from the live deadlines when finished requests' stale entries
    /// dominate, so it stays within a constant factor of what is in flight (amortized O(1)).
    fn compact_timers(&mut self) {
        let close = self
            .lifecycle
            .closing_deadline()
            .map(|d| (d, TimerKey::CloseGrace));
        let live = self
            .pending
            .iter()
            .filter(|(_, p)| p.timeout != Duration::MAX)
            .map(|(n, p)| (p.deadline, TimerKey::Request(*n)))
            .chain(close);
        self.timers.compact(live, self.pending.len() + 1);
    }

    /// Records one of our requests as in flight, with its timer (none for
    /// `Duration::MAX`: a `subscriptions/listen` stream lives until cancelled).
    #[allow(clippy::too_many_arguments)]
    fn track(
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
            self.retry_bases.insert(id, retry);
        }
        self.pending.insert(
            id,
            Pending {
                kind,
                started: now,
                timeout,
                deadline,
                reset_on_progress,
                wants_progress,
                last_progress: None,
            },
        );
        if timeout != Duration::MAX {
            self.timers.push(deadline, TimerKey::Request(id));
            self.compact_timers();
        }
    }

    /// `text` in a string from the retry pool (or a new one).
    fn pooled_string(&mut self, text: &str) -> String {
        let mut s = self.retry_pool.pop().unwrap_or_default();
        self.retry_pool_bytes -= s.capacity();
        s.clear();
        s.push_str(text);
        s
    }

    /// What request `n` kept for a retry, taken out now that it has ended.
    fn take_retry(&mut self, n: i64) -> Option<RetryBase> {
        if self.retry_bases.is_empty() {
            return None;
        }
        self.retry_bases.remove(&n)
    }

    /// Gives the params kept for a retry back to the pool once the request has ended.
    fn recycle_retry(&mut self, retry: Option<RetryBase>) {
        if let Some(RetryBase {
            params: Some(s), ..
        }) = retry
            && s.capacity() <= RETRY_POOL_BYTES - self.retry_pool_bytes
        {
            self.retry_pool_bytes += s.capacity();
            self.retry_pool.push(s);
        }
    }

    /// Checks that we may send `method` as a new request or notification.
    fn check_outgoing(&self, kind: MethodKind, method: &str) -> Result<(), Error> {
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
        if self.role == Role::Server && self.era == Some(Era::Modern) {
            // The stateless era: a server never sends requests, and its notifications are
            // tied to a request (logging, progress) or to a listen stream (list changes).
            return match (kind, method) {
                (MethodKind::Request, _) => Err(Error::WrongDirection),
                (
                    MethodKind::Notification,
                    "notifications/tools/list_changed"
                    | "notifications/prompts/list_changed"
                    | "notifications/resources/list_changed"
                    | "notifications/resources/updated",
                ) => Ok(()),
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
                        // A request needs the receiver's capability…
                        MethodKind::Request => self.peer_caps.as_ref().is_some_and(|p| p.has(c)),
                        // …a notification the sender's.
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

    fn request(
        &mut self,
        now: Timestamp,
        method: &str,
        params: Option<RawJson<'_>>,
        options: RequestOptions,
        stream: StreamId,
    ) -> Result<RequestId, Error> {
        self.check_outgoing(MethodKind::Request, method)?;
        if params.is_some_and(|p| !p.is_object()) {
            return Err(Error::InvalidParams);
        }
        if self.pending.len() >= self.config.limits.max_outbound_in_flight {
            return Err(Error::TooManyInFlight);
        }
        if !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        let id = self.next_id;
        let stateless = self.role == Role::Client && self.era == Some(Era::Modern);
        let mut scratch = std::mem::take(&mut self.scratch);
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
                self.scratch = scratch;
                return Err(e);
            }
        };
        let out = self.output.begin();
        jsonrpc::encode_request(out, Id::Int(id), method, sent);
        self.output.end_frame(stream);
        crate::frame::empty(&mut scratch);
        self.scratch = scratch;
        self.next_id += 1;
        // A request that may come back "input required" keeps what a retry needs.
        let retry = match retryable_method(method) {
            Some(method) if stateless => Some(RetryBase {
                method,
                params: params.map(|p| self.pooled_string(p.get())),
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
        Ok(RequestId(id))
    }

    fn notify(&mut self, method: &str, params: Option<RawJson<'_>>) -> Result<(), Error> {
        self.check_outgoing(MethodKind::Notification, method)?;
        if params.is_some_and(|p| !p.is_object()) {
            return Err(Error::InvalidParams);
        }
        if !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        if self.role == Role::Server && self.era == Some(Era::Modern) {
            return self.notify_listeners(method, params).map(|_| ());
        }
        let out = self.output.begin();
        jsonrpc::encode_notification(out, method, params);
        self.output.end_frame(StreamId::MAIN);
        Ok(())
    }

    fn respond(&mut self, id: Id<'_>, answer: Answer<'_>) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let key = OwnedId::from(id);
        let Some(entry) = self.inbound.get(&key) else {
            if self.peer_cancelled.contains(&key) {
                self.stats.suppressed_responses += 1;
                return Ok(());
            }
            return Err(Error::UnknownRequest);
        };
        if entry.batch.is_none() && !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        let (batch, stream, modern) = (entry.batch, entry.stream, entry.modern.is_some());
        let cacheable = entry.cacheable;
        if modern && let Answer::Result(result) = answer {
            // 2026-07-28: every result carries `resultType` and our `serverInfo`.
            let mut stamped = std::mem::take(&mut self.scratch);
            let mut typed = std::mem::take(&mut self.edit_scratch);
            stamped.clear();
            let ok = self
                .stamp_result(&mut stamped, &mut typed, result, cacheable)
                .is_ok();
            crate::frame::empty(&mut typed);
            self.edit_scratch = typed;
            if ok && let Ok(text) = std::str::from_utf8(&stamped) {
                self.inbound.remove(&key);
                let answer = Answer::Result(RawJson::validated(text));
                self.emit_answer(batch, stream, Some(id), answer, false);
            }
            crate::frame::empty(&mut stamped);
            self.scratch = stamped;
            return if ok {
                Ok(())
            } else {
                Err(Error::InvalidParams)
            };
        }
        self.inbound.remove(&key);
        self.emit_answer(batch, stream, Some(id), answer, false);
        Ok(())
    }

    fn progress(
        &mut self,
        id: Id<'_>,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let key = OwnedId::from(id);
        let room = self.output_has_room();
        let Some(entry) = self.inbound.get_mut(&key) else {
            return Err(Error::UnknownRequest);
        };
        let Some(token) = entry.progress_token.clone() else {
            return Err(Error::NoProgressToken);
        };
        if !progress.is_finite() || entry.last_progress.is_some_and(|last| progress <= last) {
            return Err(Error::NonIncreasingProgress);
        }
        if !room {
            return Err(Error::OutputFull);
        }
        entry.last_progress = Some(progress);
        let stream = entry.stream;
        let with_message = self.effective_version() >= ProtocolVersion::V2025_03_26;
        let mut params = std::mem::take(&mut self.scratch);
        params.clear();
        params.extend_from_slice(b"{\"progressToken\":");
        modern::write_id(&mut params, token.as_id());
        params.extend_from_slice(b",\"progress\":");
        json_edit::write_number(&mut params, progress);
        if let Some(total) = total.filter(|t| t.is_finite()) {
            params.extend_from_slice(b",\"total\":");
            json_edit::write_number(&mut params, total);
        }
        if let (Some(m), true) = (message, with_message) {
            params.extend_from_slice(b",\"message\":");
            jsonrpc::write_json_string(&mut params, m);
        }
        params.push(b'}');
        if let Ok(text) = std::str::from_utf8(&params) {
            let out = self.output.begin();
            jsonrpc::encode_notification(
                out,
                "notifications/progress",
                Some(RawJson::validated(text)),
            );
            self.output.end_frame(stream);
        }
        self.scratch = params;
        Ok(())
    }

    fn send_cancelled(&mut self, id: i64, reason: Option<&str>) {
        let mut params = std::mem::take(&mut self.scratch);
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
            self.emit_auto(StreamId::MAIN, |out| {
                jsonrpc::encode_notification(out, "notifications/cancelled", Some(raw))
            });
        }
        self.scratch = params;
    }

    fn cancel(
        &mut self,
        _now: Timestamp,
        request: RequestId,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let Some(p) = self.pending.get(&request.0) else {
            return Err(Error::UnknownRequest);
        };
        if p.kind != PendingKind::Normal {
            return Err(Error::CannotCancelInitialize);
        }
        if !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        if self.pending.remove(&request.0).is_some() {
            let retry = self.take_retry(request.0);
            self.recycle_retry(retry);
        }
        self.our_finished.insert(request.0);
        self.send_cancelled(request.0, reason);
        self.maybe_finish_close();
        Ok(())
    }

    fn close(&mut self, now: Timestamp, grace: Duration) {
        if self.lifecycle.is_closed() {
            return;
        }
        let deadline = now.after(grace);
        self.lifecycle.begin_close(deadline);
        self.timers.push(deadline, TimerKey::CloseGrace);
        self.maybe_finish_close();
    }

    /// Closing ends as soon as none of our requests is in flight.
    fn maybe_finish_close(&mut self) {
        if self.lifecycle.closing_deadline().is_some() && self.pending.is_empty() {
            self.finish(CloseReason::Local);
        }
    }

    /// Ends the connection: every request in flight is abandoned, then `Closed` is the last
    /// event.
    fn finish(&mut self, reason: CloseReason) {
        if self.lifecycle.is_closed() {
            return;
        }
        self.lifecycle.closed();
        let mut ids: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.kind == PendingKind::Normal)
            .map(|(n, _)| *n)
            .collect();
        ids.sort_unstable();
        for n in ids {
            self.events.push(Stored::Abandoned(RequestId(n)));
        }
        self.pending.clear();
        self.retry_bases.clear();
        self.inbound.clear();
        self.batches.clear();
        self.events.push(Stored::Closed(reason.clone()));
        self.closed_reason = Some(reason);
    }
}

/// How many bytes of spare strings the retry pool keeps: enough for the params of hundreds of
/// requests in flight at once, so a burst of them allocates nothing once warm.
const RETRY_POOL_BYTES: usize = 256 * 1024;

/// The methods whose requests may come back "input required" (2026-07-28), as the static
/// name a retry re-sends.
fn retryable_method(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" => Some("tools/call"),
        "prompts/get" => Some("prompts/get"),
        "resources/read" => Some("resources/read"),
        _ => None,
    }
}

// ---- Params the engine reads ---------------------------------------------------------------

/// `_meta.progressToken` of a request's params: `Ok(None)` when absent, `Err` when malformed
/// (duplicated keys, or a token that is neither a string nor an integer).
fn progress_token(params: Option<RawJson<'_>>) -> Result<Option<OwnedId>, ()> {
    let Some(params) = params else {
        return Ok(None);
    };
    let Some(meta) = params.get_unique("_meta").map_err(|_| ())? else {
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
