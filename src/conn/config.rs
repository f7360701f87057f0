//! Connection settings: who we are, what we support, and every bound.

use std::time::Duration;

use crate::jsonrpc::{DecoderConfig, RawJson};
use crate::mcp::{Capabilities, CapabilityError, Era, ProtocolVersion};

/// Which end of the connection this engine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The host side: sends `initialize`, calls tools.
    Client,
    /// The side offering tools, resources and prompts.
    Server,
}

/// How a client picks the protocol era.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientEra {
    /// Probe with `server/discover`; adopt 2026-07-28 on a valid result, fall back to the
    /// `initialize` handshake on any error or on [`Config::discover_timeout`] (the spec's
    /// detection rule: never keyed to one error code). The default.
    Auto,
    /// Only the `initialize` handshake (2024-11-05 … 2025-11-25).
    Legacy,
    /// Only the stateless era: `server/discover`, then per-request metadata.
    Modern,
}

/// The `cacheScope` a server puts on `server/discover` results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheScope {
    /// Shareable across authorization contexts.
    Public,
    /// Only within the same authorization context (the default).
    Private,
}

impl CacheScope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// Resource bounds. Each has a default; a peer that pushes past one gets errors, never our
/// memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest frame accepted, in bytes. Default 16 MiB.
    pub max_frame: usize,
    /// Our requests awaiting an answer at once; more is refused with
    /// [`Error::TooManyInFlight`](super::Error::TooManyInFlight). Default 1024.
    pub max_outbound_in_flight: usize,
    /// The peer's requests we hold unanswered at once; more get a JSON-RPC error. Default 256.
    pub max_inbound_in_flight: usize,
    /// Bytes of output waiting for the transport; past it commands fail with
    /// [`Error::OutputFull`](super::Error::OutputFull), and a peer whose traffic needs replies
    /// while it does not read ours ends the connection. Default 16 MiB. The answers collected
    /// for 2025-03-26 batches still open count as output (an answer to a batch member is
    /// taken whatever the room: the array goes out only once complete). An
    /// [`HttpServer`](crate::http::HttpServer) bounds each SSE stream by it too: a stream's
    /// client that does not read holds its connection's output back (commands then fail with
    /// `OutputFull`), except a session's GET stream, which ends instead, and a request's
    /// stream in a 2025-11-25 session, which is closed for polling (their clients resume them
    /// with `Last-Event-ID`), so that the session's other answers never wait behind them.
    pub max_buffered_output: usize,
    /// How many cancelled or timed-out ids (ours and the peer's) are remembered, to drop late
    /// responses and suppress answers to cancelled requests. Default 1024.
    pub max_remembered_ids: usize,
    /// Events waiting for [`poll_event`](super::Connection::poll_event); past it, or once the
    /// waiting events hold more bytes of frames than `max_buffered_output` (or `max_frame`, if
    /// larger), the peer's further notifications are dropped (and counted) until the
    /// application catches up. Default 4096.
    pub max_queued_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame: crate::frame::line::DEFAULT_MAX_FRAME,
            max_outbound_in_flight: 1024,
            max_inbound_in_flight: 256,
            max_buffered_output: 16 * 1024 * 1024,
            max_remembered_ids: 1024,
            max_queued_events: 4096,
        }
    }
}

impl Limits {
    /// How much input a host should give [`handle_input`](super::Connection::handle_input)
    /// at a time, handing out every event (and answering) between pieces, when it reads more
    /// at once: 4 KiB, less when these limits are lowered. The requests one piece can hold
    /// (36 bytes is the smallest a request can be) then stay within half of
    /// `max_inbound_in_flight`, and the error answers the engine writes for it unasked (one
    /// per line of junk: 2 bytes of input, about 100 of output) within half of
    /// `max_buffered_output`, and the messages it can hold (31 bytes is the smallest, a
    /// notification) within half of `max_queued_events`. So a peer that pipelines thousands of
    /// requests in one write gets every one answered, instead of "too many requests" or a
    /// close for output it did read, and none of its notifications is dropped. The hosts in
    /// this project feed this way; use it in a loop of your own. (Never less than 64 bytes:
    /// with `max_inbound_in_flight` under 4 one piece may still complete more requests than
    /// that allows.)
    pub fn input_piece(&self) -> usize {
        (self.max_inbound_in_flight / 2)
            .saturating_mul(36)
            .min(self.max_buffered_output / 2 / 64)
            .min((self.max_queued_events / 2).saturating_mul(31))
            .clamp(64, 4096)
    }
}

/// What to do with a progress notification whose `progress` does not increase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressPolicy {
    /// Drop it and count it (the default: the spec says progress MUST increase).
    DropNonIncreasing,
    /// Deliver it anyway.
    DeliverAll,
}

/// Where the spec says SHOULD, how strict to be. The defaults follow the spec exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Enforce what may be sent before initialization completes, both ways: only `ping` (and,
    /// from a server that has answered `initialize`, logging) until the handshake is done.
    /// Our API refuses the rest with [`Error::NotInitialized`](super::Error::NotInitialized);
    /// the peer's requests get a -32600 error and its notifications are dropped. Before the
    /// era is known (a server before `initialize` arrives, a client while its
    /// `server/discover` probe is out) nothing goes out, whatever this says. Default `true`.
    pub strict_lifecycle: bool,
    /// Answer the peer's `ping` without involving the application. Default `true`.
    pub answer_pings: bool,
    /// Non-increasing progress. Default [`ProgressPolicy::DropNonIncreasing`].
    pub progress: ProgressPolicy,
    /// Restart a request's timeout whenever progress arrives for it (bounded by
    /// [`Config::max_total_timeout`]). Default `false`; per request with
    /// [`RequestOptions::reset_on_progress`](super::RequestOptions::reset_on_progress).
    pub reset_timeout_on_progress: bool,
    /// 2026-07-28 server: hand each `subscriptions/listen` request to the application as an
    /// [`Event::Request`](super::Event::Request) instead of granting it in the engine. Turn it
    /// on when listeners must pass an access check: the tasks extension says servers MUST
    /// check that a client may access a task on every task-related request, and a listen
    /// names task ids (and resource URIs). The application then grants the items it allows
    /// with [`Connection::grant_listen`](super::Connection::grant_listen), which sends the
    /// acknowledgement, or refuses the whole listen with
    /// [`respond_error`](super::Connection::respond_error). The engine has already refused a
    /// malformed filter and dropped what we cannot honour. Default `false`: the engine grants
    /// every item it can honour, and the application never sees the listen.
    pub review_listens: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            strict_lifecycle: true,
            answer_pings: true,
            progress: ProgressPolicy::DropNonIncreasing,
            reset_timeout_on_progress: false,
            review_listens: false,
        }
    }
}

/// Everything a [`Connection`](super::Connection) needs to know at creation.
///
/// Start from [`Config::client`] or [`Config::server`], then adjust the public fields.
#[derive(Clone, Debug)]
pub struct Config {
    /// Client or server.
    pub role: Role,
    /// The protocol versions we speak. Default: all of them, which makes a server dual-era and
    /// lets a client in [`ClientEra::Auto`] use either era. A client's `initialize` offers the
    /// newest handshake-era version listed; a server answers `initialize` with the offered
    /// version when listed, otherwise its newest handshake-era one. Listing only handshake-era
    /// versions makes a legacy-only endpoint; only 2026-07-28, a modern-only one.
    pub versions: Vec<ProtocolVersion>,
    /// Client only: how to choose the era. Default [`ClientEra::Auto`]. Ignored when
    /// [`versions`](Self::versions) holds only one era.
    pub client_era: ClientEra,
    /// Client only: how long the `server/discover` probe may take before [`ClientEra::Auto`]
    /// falls back to `initialize`. Default 5 s.
    pub discover_timeout: Duration,
    /// Server only, 2026-07-28: the `ttlMs` of `server/discover` results, and of cacheable
    /// results (lists, `resources/read`) that do not set their own. Default 0 (do not cache).
    /// At most [`MAX_WIRE_MILLIS`](crate::tasks::MAX_WIRE_MILLIS) milliseconds (longer is
    /// sent as that: a larger number is no integer to most JSON readers).
    pub discover_ttl: Duration,
    /// Server only, 2026-07-28: the `cacheScope` that goes with
    /// [`discover_ttl`](Self::discover_ttl). Default private.
    pub discover_cache_scope: CacheScope,
    /// Our `clientInfo` / `serverInfo` object, as JSON: an object with string `name` and
    /// `version` (a connection refuses to start without them). Set it to add `title`,
    /// `icons` or `websiteUrl`.
    pub info: String,
    /// Our capabilities.
    pub capabilities: Capabilities,
    /// Server only: the `instructions` string sent in the initialize result.
    pub instructions: Option<String>,
    /// How long to wait for an answer to each request, unless the request says otherwise.
    /// Default 60 s. A `subscriptions/listen` request without a timeout of its own has none
    /// (see [`RequestOptions::timeout`](super::RequestOptions::timeout)).
    pub request_timeout: Duration,
    /// The longest any request may run when progress keeps resetting its timeout (a reset
    /// never brings a deadline earlier: a request whose own timeout is longer keeps it).
    /// Default 10 minutes.
    pub max_total_timeout: Duration,
    /// Bounds.
    pub limits: Limits,
    /// Strictness where the spec leaves room.
    pub policy: Policy,
    /// The JSON validator and its nesting limit.
    pub decoder: DecoderConfig,
}

fn info_json(name: &str, version: &str) -> String {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"name\":");
    crate::jsonrpc::write_json_string(&mut out, name);
    out.extend_from_slice(b",\"version\":");
    crate::jsonrpc::write_json_string(&mut out, version);
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

impl Config {
    fn new(role: Role, name: &str, version: &str) -> Self {
        Config {
            role,
            versions: ProtocolVersion::ALL.to_vec(),
            client_era: ClientEra::Auto,
            discover_timeout: Duration::from_secs(5),
            discover_ttl: Duration::ZERO,
            discover_cache_scope: CacheScope::Private,
            info: info_json(name, version),
            capabilities: Capabilities::default(),
            instructions: None,
            request_timeout: Duration::from_secs(60),
            max_total_timeout: Duration::from_secs(600),
            limits: Limits::default(),
            policy: Policy::default(),
            decoder: DecoderConfig::default(),
        }
    }

    /// A client called `name`, version `version`, with no capabilities.
    pub fn client(name: &str, version: &str) -> Self {
        Self::new(Role::Client, name, version)
    }

    /// A server called `name`, version `version`, with no capabilities.
    pub fn server(name: &str, version: &str) -> Self {
        Self::new(Role::Server, name, version)
    }

    /// Sets the capabilities from JSON (`{"tools":{"listChanged":true}}`): an object whose
    /// members the specification defines are objects too.
    pub fn with_capabilities(mut self, json: &str) -> Result<Self, CapabilityError> {
        self.capabilities = Capabilities::parse_own(json)?;
        Ok(self)
    }

    /// Checks the settings: at least one version, capabilities of the schema's types, and
    /// `info` a JSON object with string `name` and `version` (every schema's
    /// `Implementation`: a peer refuses one without).
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if self.versions.is_empty() {
            return Err("no protocol versions configured");
        }
        if Capabilities::parse_own(self.capabilities.raw().get()).is_err() {
            return Err("capabilities break the schema's types (see Capabilities::parse_own)");
        }
        match RawJson::new(&self.info) {
            Ok(raw) if crate::mcp::is_implementation(raw) => Ok(()),
            _ => Err("info must be a JSON object with string name and version"),
        }
    }

    /// Whether we speak any version of `era` (stops at the first: cheaper than
    /// [`latest_legacy`](Self::latest_legacy) and [`latest_modern`](Self::latest_modern) on a
    /// request's path).
    pub(crate) fn speaks(&self, era: Era) -> bool {
        self.versions.iter().any(|v| v.era() == era)
    }

    /// The newest handshake-era version we speak.
    pub(crate) fn latest_legacy(&self) -> Option<ProtocolVersion> {
        self.versions
            .iter()
            .copied()
            .filter(|v| v.era() == Era::Legacy)
            .max()
    }

    /// The newest stateless-era version we speak.
    pub(crate) fn latest_modern(&self) -> Option<ProtocolVersion> {
        self.versions
            .iter()
            .copied()
            .filter(|v| v.era() == Era::Modern)
            .max()
    }

    /// The era a client starts in: `None` to probe.
    /// For a client: the era it starts in, from [`versions`](Self::versions) and
    /// [`client_era`](Self::client_era): the handshake (`Some(Era::Legacy)`), the stateless
    /// probe only (`Some(Era::Modern)`), or auto (`None`: probe, then fall back). Use it to
    /// name the first request in messages.
    pub fn client_start_era(&self) -> Option<Era> {
        self.client_start()
    }

    pub(crate) fn client_start(&self) -> Option<Era> {
        match (self.latest_legacy(), self.latest_modern(), self.client_era) {
            (Some(_), None, _) | (Some(_), Some(_), ClientEra::Legacy) => Some(Era::Legacy),
            (None, Some(_), _) | (Some(_), Some(_), ClientEra::Modern) => Some(Era::Modern),
            _ => None,
        }
    }
}
