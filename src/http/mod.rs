//! Streamable HTTP, sans-IO: the engine decides, the host's HTTP server only moves bytes.
//!
//! [`HttpServer`] takes each HTTP request (method, headers, body) and says what to answer: a
//! status, headers, and either a JSON body or an SSE stream the host then drains with
//! [`HttpServer::poll_stream`]. Behind it sit ordinary [`Connection`](crate::Connection)s: one
//! per handshake-era session, one per stateless (2026-07-28) request. Output of a connection is
//! tagged with the HTTP stream it belongs to, so responses and related notifications travel on
//! the POST that carried the request, and unrelated server messages on the session's GET stream.
//!
//! [`HttpClient`] is the client side, as sans-IO as the server: it says which HTTP requests
//! to make (the era's headers, session ids, resuming broken streams) and reads what comes
//! back. [`client`] holds its helpers for hosts that build requests themselves: the headers
//! to send, and how to read an answer (JSON, or SSE with [`client::StreamReader`]).
//!
//! Servers that share sessions across processes plug in an [`EventStore`] (for resuming
//! streams) and a [`SessionStore`]; a store that cannot answer says [`StoreUnavailable`], and
//! the server answers 503 with `Retry-After`.

pub mod client;
pub mod headers;
mod kept;
mod server;
mod session;
mod store;

pub use server::{
    Body, ConnKey, HttpRequest, HttpResponse, HttpServer, HttpServerConfig, HttpStreamId,
    OriginCheck, StreamOutput, loopback_only,
};
pub use session::{
    ClientAction, ExchangeId, FAILURE_TEXT_MAX, HELD_BODY_FRAMES, HttpClient, LINGER,
    MAX_HELD_CALLS, MAX_REFRESH_PAGES, MAX_RETRY_AFTER, MAX_RUNNING_NOTIFICATIONS,
    MAX_RUNNING_REPLIES, MAX_RUNNING_REQUESTS, MAX_WAITING_REPLIES, MIN_RECONNECT_DELAY,
    ReconnectPolicy, SMALL_HELD_BODY, UNAWAITED_HEAD_LIMIT,
};
pub use store::{EventStore, MemoryEventStore, SessionStore, StoreUnavailable};

/// The header carrying the session id (handshake era).
pub const SESSION_HEADER: &str = "Mcp-Session-Id";
/// The header carrying the protocol version.
pub const VERSION_HEADER: &str = "MCP-Protocol-Version";
/// 2026-07-28: the header carrying the request's method.
pub const METHOD_HEADER: &str = "Mcp-Method";
/// 2026-07-28: the header carrying `params.name` or `params.uri`.
pub const NAME_HEADER: &str = "Mcp-Name";
/// The header a client sends to resume an SSE stream.
pub const LAST_EVENT_ID_HEADER: &str = "Last-Event-ID";
