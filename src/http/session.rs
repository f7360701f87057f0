//! [`HttpClient`]: an MCP client connection over Streamable HTTP, sans-IO.
//!
//! The host makes the HTTP requests it is told to ([`HttpClient::poll_action`]) with any HTTP
//! library, and reports what came back ([`handle_response`](HttpClient::handle_response),
//! [`handle_body`](HttpClient::handle_body), [`handle_end`](HttpClient::handle_end),
//! [`handle_error`](HttpClient::handle_error)). The client turns each outgoing message into a
//! POST with the headers of its era, reads JSON and SSE answers, resumes broken streams, and
//! ends requests whose exchange failed.
//!
//! The rules it follows are listed on [`HttpClient`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use super::client::{StreamReader, request_headers};
use super::headers::{ToolHeaders, encode_value};
use crate::Timestamp;
use crate::conn::{Config, ConfigError, Connection, Event, State, StreamId, TransportFailure};
use crate::jsonrpc::{self, Decoded, Decoder, Id, Message, RawJson};
use crate::mcp::{Era, HEADER_MISMATCH, META_PROTOCOL_VERSION, ProtocolVersion};

/// One HTTP exchange of an [`HttpClient`]: a POST, or the GETs that resume its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub u64);

/// How an [`HttpClient`] resumes a stream that broke before its answers came. Data only: the
/// client asks the host for a GET when the time comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// The first delay when the server sent no `retry`. Default 500 ms.
    pub initial_delay: Duration,
    /// The longest delay; each attempt doubles the last. Default 30 s.
    pub max_delay: Duration,
    /// Resumptions tried per stream before its requests fail. Default 5. The session's GET
    /// stream, which carries no request, is then still opened again once per `max_delay`
    /// while the session lasts.
    pub max_attempts: u32,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_attempts: 5,
        }
    }
}

impl ReconnectPolicy {
    /// The delay before attempt `attempt` (1 for the first): the server's `retry` if it sent
    /// one (never less: clients must respect it), else `initial_delay`, but never less than
    /// [`MIN_RECONNECT_DELAY`]; doubled for each attempt after the first, capped at
    /// `max_delay`, then lengthened by up to a quarter by `jitter` (any value; uniform random
    /// from the host is best) so that clients dropped together do not return together. A
    /// server's `retry: 0` on streams it ends at once would otherwise have the client
    /// reconnect as fast as it can, for as long as each connection brings a new event.
    pub fn delay(&self, attempt: u32, server_retry: Option<Duration>, jitter: u32) -> Duration {
        let base = server_retry
            .unwrap_or(self.initial_delay)
            .max(MIN_RECONNECT_DELAY);
        let doubled = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let capped = doubled.min(self.max_delay.max(base));
        capped.saturating_add((capped / 4).mul_f64(f64::from(jitter) / f64::from(u32::MAX)))
    }
}

/// The shortest wait before a stream is resumed, whatever the server's `retry` and the
/// policy say.
pub const MIN_RECONNECT_DELAY: Duration = Duration::from_millis(100);

/// What the host must do next for an [`HttpClient`], from
/// [`poll_action`](HttpClient::poll_action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAction<'a> {
    /// Make this HTTP request to the server's MCP endpoint, then report its outcome.
    Send {
        /// Which exchange the outcome belongs to.
        exchange: ExchangeId,
        /// `POST`, `GET` or `DELETE`.
        method: &'static str,
        /// Every header to send (name, value).
        headers: &'a [(String, String)],
        /// The body (empty for a GET).
        body: &'a [u8],
    },
    /// Stop reading this exchange's response and close it. Report nothing more for it.
    ///
    /// Comes for a 2026-07-28 request the application cancelled (closing its stream is how
    /// that era cancels), for the exchanges of a session that expired, for the session's GET
    /// stream when the session ends or the connection closes, for an exchange with nothing to
    /// wait for that got no response head within [`UNAWAITED_HEAD_LIMIT`], and for a stream
    /// the server keeps open after every request it carried has ended (answered, timed out or
    /// cancelled): such a stream is let go [`LINGER`] after that, so that a server that never
    /// ends its streams cannot pile up open connections.
    Abort {
        /// Which exchange.
        exchange: ExchangeId,
    },
}

/// How the response to an exchange is being read.
#[derive(Debug)]
enum Reading {
    /// Not answered yet.
    Waiting,
    /// A JSON body, collected until it ends.
    Json(Vec<u8>),
    /// An SSE stream.
    Sse,
    /// 202, or an error status: the body is collected for a JSON-RPC answer it may hold.
    Other(Vec<u8>),
}

#[derive(Debug)]
struct Exchange {
    method: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Our requests whose answers this exchange should bring.
    awaiting: BTreeSet<i64>,
    /// The session's standalone GET stream (no answers expected; kept open).
    standalone: bool,
    /// It carried a session id (a 404 then means the session is gone).
    with_session: bool,
    status: u16,
    reading: Reading,
    reader: StreamReader,
    attempts: u32,
    /// When its last response head came.
    head_at: Option<Timestamp>,
    /// When the head of its current attempt came, until that attempt ends: a stream that
    /// lived a while before it ended starts its count of attempts again.
    opened_at: Option<Timestamp>,
    /// It was sent for requests of ours (so it ends once they all have).
    asked: bool,
    /// Those requests all ended: the exchange is let go at this time if the server has not
    /// ended it by then.
    linger: Option<Timestamp>,
    /// It carries our answer to a server's request (see [`MAX_RUNNING_REPLIES`]).
    reply: bool,
    /// It carries a notification of ours (see [`MAX_RUNNING_NOTIFICATIONS`]).
    note: bool,
    /// The host was asked to send it, and it is counted in `running_replies` (a reply),
    /// `running_notes` (a notification) or `running_requests` (one that carries requests of
    /// ours).
    running: bool,
    /// It carries requests of ours and waits in `held_requests` for a place among the
    /// [`MAX_RUNNING_REQUESTS`]: the host has never seen it.
    held: bool,
    /// A POST with nothing to wait for (a notification, an answer) that went out and has no
    /// response head yet: what it carries may not have reached the server, and the session's
    /// DELETE waits for it (see `held_delete`).
    unheard: bool,
    /// Its last response was a 429 or 503 whose `Retry-After` said when to come back.
    retry_after: Option<Duration>,
}

impl Exchange {
    /// Whether it waits for something in its response: answers to requests of ours, or the
    /// server's messages on the session's GET stream. The others (a notification, an answer
    /// of ours, the DELETE) take a short text at most, whatever the response's type.
    fn waits(&self) -> bool {
        self.asked || self.standalone
    }

    /// The bytes of its response it holds unfinished: a JSON body not yet ended, or an SSE
    /// event not yet complete (see [`HELD_BODY_FRAMES`]).
    fn held_unfinished(&self) -> usize {
        match &self.reading {
            Reading::Json(body) | Reading::Other(body) => body.len(),
            Reading::Sse => self.reader.buffered(),
            Reading::Waiting => 0,
        }
    }

    /// An exchange to send, for the requests in `awaiting` (none for a notification, an
    /// answer, a GET or a DELETE).
    fn new(
        method: &'static str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        awaiting: BTreeSet<i64>,
    ) -> Exchange {
        Exchange {
            method,
            headers,
            body,
            asked: !awaiting.is_empty(),
            awaiting,
            standalone: false,
            with_session: false,
            status: 0,
            reading: Reading::Waiting,
            reader: StreamReader::new(),
            attempts: 0,
            head_at: None,
            opened_at: None,
            linger: None,
            reply: false,
            note: false,
            running: false,
            held: false,
            unheard: false,
            retry_after: None,
        }
    }
}

/// A 2026-07-28 `tools/call` the server refused with `HeaderMismatch`, waiting for the tools'
/// current schemas to go again.
#[derive(Debug)]
struct HeldCall {
    /// The request's id.
    id: i64,
    /// The request, to send again.
    frame: Vec<u8>,
    /// The refusal, its answer if it cannot go again.
    refusal: Vec<u8>,
    /// The exchange that brought the refusal.
    exchange: ExchangeId,
}

/// The client's own `tools/list` walk for [`HeldCall`]s: one page at a time.
#[derive(Debug)]
struct Refresh {
    /// The id of the page's request (negative: never one of the connection's).
    id: i64,
    /// The `_meta` its requests carry (the era's keys of the first refused call's).
    meta: String,
    /// Pages asked for so far, at most [`MAX_REFRESH_PAGES`].
    pages: u32,
    /// Held tools not listed yet: the walk stops early once none is left.
    missing: HashSet<String>,
}

/// What a `HeaderMismatch` refusal is to [`HttpClient`] (rule 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// Held, to go again after `tools/list` (or held already).
    Held,
    /// A late copy for a call sent again on another exchange: it answers nothing.
    Stale,
    /// The call's answer.
    Answer,
}

/// How many refused `tools/call` requests may wait for a `tools/list` at once (rule 9); a
/// refusal past it is the request's answer.
pub const MAX_HELD_CALLS: usize = 64;

/// How many pages of `tools/list` the client reads to find the tools of refused calls
/// (rule 9) before it sends them again with what it learned.
pub const MAX_REFRESH_PAGES: u32 = 16;

/// How long requests wait for the session's GET stream to get its response head before they
/// go out anyway.
const GET_HEAD_WAIT: Duration = Duration::from_secs(1);

/// How long a response whose requests have all ended may stay open before the client closes
/// it. A server ends a stream right after its answer, so the wait is rarely seen; closing at
/// once would instead cost the HTTP connection's reuse, since its body was not read to the end.
pub const LINGER: Duration = Duration::from_secs(2);

/// How long an exchange with nothing to wait for (a notification, an answer to the server, a
/// DELETE) may go without its response head before the client closes it; once the head
/// came, the body gets [`LINGER`] to end. A server answers these at once (202).
pub const UNAWAITED_HEAD_LIMIT: Duration = Duration::from_secs(10);

/// How many POSTs carrying our answers to the server's requests may run at once; more wait
/// until one ends. A server that sends requests (pings, say) faster than it accepts the
/// answers would otherwise have the client open a connection for each.
pub const MAX_RUNNING_REPLIES: usize = 64;

/// How many POSTs carrying our notifications may run at once; more wait until one ends (or
/// the session ends). An application that notifies in a loop (progress, say) would
/// otherwise have the host open a connection for each, past the usual limit of open files.
pub const MAX_RUNNING_NOTIFICATIONS: usize = 64;

/// How many answers to the server's requests may wait for a place among the
/// [`MAX_RUNNING_REPLIES`]; past it the newest is not sent, and counted in
/// [`Stats::suppressed_responses`](crate::conn::Stats::suppressed_responses).
pub const MAX_WAITING_REPLIES: usize = 1024;

/// How many of the connection's largest messages ([`Limits::max_frame`]) the responses the
/// client is reading may hold together, unfinished: JSON bodies not yet ended, and SSE events
/// not yet complete. Each may hold one `max_frame`, and up to [`MAX_RUNNING_REQUESTS`] run at
/// once, so without this a server that starts every answer and never finishes it would make
/// the client hold 256 of them (4 GiB by default). A response whose bytes would take the
/// total past it fails as one over `max_frame` does
/// ([`TransportFailure::TooLarge`](crate::conn::TransportFailure::TooLarge)), and the host is
/// told to stop reading it. Responses holding less than [`SMALL_HELD_BODY`] are not counted
/// against it.
///
/// [`Limits::max_frame`]: crate::conn::Limits::max_frame
pub const HELD_BODY_FRAMES: usize = 4;

/// What a response may hold unfinished before it counts against [`HELD_BODY_FRAMES`]: the
/// total is only worked out for a response past it, so small answers cost nothing. (Up to
/// [`MAX_RUNNING_REQUESTS`] of them hold at most 16 MiB together.)
pub const SMALL_HELD_BODY: usize = 64 * 1024;

/// How many POSTs carrying requests of ours may run at once; more wait, in order, until one
/// ends. Over HTTP/1 each runs on its own connection, so without a bound a burst of requests
/// (up to the connection's `max_outbound_in_flight`, 1,024 by default) would open as many
/// sockets and fail on a process's usual limit of 1,024 open files instead of waiting. A
/// request that waits keeps its timeout running; cancelled or timed out, it is withdrawn
/// without going out. Answers to the server's requests, notifications, the session's GET
/// stream and its DELETE never wait behind these: an answer the server waits for may be what
/// lets a running request end.
pub const MAX_RUNNING_REQUESTS: usize = 256;

/// An MCP client over Streamable HTTP, both eras, without IO. The loop: after every input
/// and command, take [`poll_action`](Self::poll_action) until `None` and make those HTTP
/// requests; report responses with the `handle_*` calls; drain
/// [`poll_event`](Self::poll_event); arm a timer at [`poll_timeout`](Self::poll_timeout).
///
/// Rules (Streamable HTTP, 2025-03-26 … 2026-07-28):
///
/// 1. Every message is its own POST, with `Accept` listing JSON and SSE. Handshake era: the
///    `Mcp-Session-Id` the server gave on `initialize` (visible ASCII, at most
///    [`MAX_SESSION_ID`](super::client::MAX_SESSION_ID) bytes) goes on every later request, and
///    `MCP-Protocol-Version` once negotiated. 2026-07-28: `MCP-Protocol-Version`, `Mcp-Method`
///    and `Mcp-Name` mirror the body, and so do the `Mcp-Param-{Name}` headers of the tool's
///    `x-mcp-header` annotations, learned from `tools/list` (values encoded as
///    [`encode_value`](super::headers::encode_value) says).
/// 2. A tool whose annotations are invalid is left out of the `tools/list` result the
///    application sees.
/// 3. A 404 to a request that carried a session id means the session is gone: its requests
///    fail, and a new connection starts a new session. After two sessions in a row that
///    expired before the server took anything of theirs (a 2xx head to a request, a
///    notification or the GET stream that carried the session id), the connection closes instead
///    ([`CloseReason::TransportFailed`](crate::conn::CloseReason::TransportFailed)).
/// 4. An HTTP error status without a JSON-RPC answer, a failed connection, or a stream that
///    ends without its answers and cannot be resumed ends the affected requests at once
///    ([`Connection::handle_failed_exchange`]). An auto-era probe that fails this way falls
///    back to `initialize` at once.
/// 5. A stream that breaks before its answers is resumed with `GET` and `Last-Event-ID` (the
///    last event id seen on it, kept across drops) after the server's `retry` or the policy's
///    backoff, with jitter from a random value the host supplies, up to the policy's number of
///    attempts. The session's GET stream is opened again whenever it ends or breaks (plainly
///    when it brought no event id); one that lived [`ReconnectPolicy::max_delay`] or more
///    starts its count again. A resuming GET refused for now (408, 409, 425, 429, 500, 502,
///    503, 504) is tried again the same way, never sooner than a 429's or 503's
///    `Retry-After` (in seconds) asks; its error body answers no request. A POST (requests,
///    a notification, an answer) refused with 429 or 503 and a `Retry-After` in seconds goes
///    again once it has passed (at most [`MAX_RETRY_AFTER`]), within the policy's attempts:
///    the server did not take it. A request cancelled meanwhile is withdrawn.
/// 6. 2026-07-28: cancelling a request closes its stream ([`ClientAction::Abort`]) instead
///    of sending `notifications/cancelled`; the core protocol has no other notification
///    from the client, and one an extension sends is POSTed like a request (answered 202).
/// 7. Our answers to the server's requests go out at most [`MAX_RUNNING_REPLIES`] at a time
///    and wait their turn beyond, up to [`MAX_WAITING_REPLIES`]; our requests and
///    notifications never wait behind them. Our notifications go out at most
///    [`MAX_RUNNING_NOTIFICATIONS`] at a time and wait their turn beyond (the application's
///    own: it sends no more than it made), all at once when the session ends, its DELETE
///    waiting for them. POSTs of our requests run at most
///    [`MAX_RUNNING_REQUESTS`] at a time and wait their turn beyond (a request cancelled or
///    timed out meanwhile never goes out); nothing else waits behind them. An exchange with
///    nothing to wait for is let go [`UNAWAITED_HEAD_LIMIT`] after it went out without a
///    response head.
/// 8. The session's DELETE ([`end_session`](Self::end_session)) goes out only once every
///    notification and answer POSTed before it has its response head (or was let go), so
///    that it cannot overtake them.
/// 9. 2026-07-28: a `tools/call` the server refuses with `HeaderMismatch` (-32020: its
///    `Mcp-Param-*` headers were missing or did not match, as when the tool's schema changed
///    or was never listed) is held while the client reads `tools/list` itself, page by page
///    until the tool is listed (at most [`MAX_REFRESH_PAGES`]), then goes again once with the
///    headers learned; the application sees only the call's answer. A second refusal, a
///    `tools/list` that fails, or more than [`MAX_HELD_CALLS`] held, and the refusal is the
///    call's answer. These `tools/list` requests have negative ids, which the connection
///    never uses, and their results are the client's own.
#[derive(Debug)]
pub struct HttpClient {
    conn: Connection,
    policy: ReconnectPolicy,
    session: Option<String>,
    /// The era the first answer showed, for the GET stream and headers.
    tools: ToolHeaders,
    /// Ids of our `tools/list` requests, whose results teach us the tools' annotations.
    tools_list: HashSet<i64>,
    /// 2026-07-28 `tools/call` requests the server refused with `HeaderMismatch`, held while
    /// the client reads `tools/list` again (rule 9), at most [`MAX_HELD_CALLS`].
    held_calls: Vec<HeldCall>,
    /// That reading of `tools/list`, while it runs.
    refresh: Option<Refresh>,
    /// The id the next refresh request takes: negative, so never one of the connection's.
    next_refresh_id: i64,
    /// Requests sent again after a `HeaderMismatch`: a second one is their answer.
    resent: HashMap<i64, ExchangeId>,
    exchanges: BTreeMap<ExchangeId, Exchange>,
    next_exchange: u64,
    /// Actions for the host, oldest first.
    queue: VecDeque<(ExchangeId, bool)>,
    /// Resumptions waiting for their time.
    resumes: Vec<(Timestamp, ExchangeId)>,
    /// Replies sent and not yet ended, at most [`MAX_RUNNING_REPLIES`].
    running_replies: usize,
    /// Replies made and not yet sent (in `queue` or `held`), at most [`MAX_WAITING_REPLIES`].
    waiting_replies: usize,
    /// Replies that found [`MAX_RUNNING_REPLIES`] running, oldest first.
    held: VecDeque<ExchangeId>,
    /// Notifications sent and not yet ended, at most [`MAX_RUNNING_NOTIFICATIONS`].
    running_notes: usize,
    /// Notifications that found [`MAX_RUNNING_NOTIFICATIONS`] running, oldest first.
    held_notes: VecDeque<ExchangeId>,
    /// POSTs carrying requests of ours that were sent and have not ended, at most
    /// [`MAX_RUNNING_REQUESTS`].
    running_requests: usize,
    /// Those that found [`MAX_RUNNING_REQUESTS`] running, oldest first (`Exchange::held`; an
    /// entry whose exchange ended or was withdrawn meanwhile is skipped).
    held_requests: VecDeque<ExchangeId>,
    /// Exchanges to let go at their time unless the server ends them first: those whose
    /// requests have all ended ([`LINGER`]), and those that carry nothing to wait for
    /// ([`UNAWAITED_HEAD_LIMIT`], then [`LINGER`] after their head). Each exchange has at
    /// most one entry, the time in its `linger`.
    lingering: BTreeSet<(Timestamp, ExchangeId)>,
    /// Requests may have ended (an answer came, a timer fired, a request was cancelled) since
    /// the exchanges were last checked for ones with nothing left to bring.
    sweep: bool,
    decoder: Decoder,
    /// Open a standalone GET stream once the session is ready (`want_get`: for every session).
    open_get: bool,
    want_get: bool,
    /// Requests wait for this exchange's response head: the session's GET stream, so that a
    /// server that answers "the next GET" with pending messages cannot take a request's own
    /// answer off its stream.
    get_pending: Option<ExchangeId>,
    /// And for this one's: the `initialized` notification, so that no request overtakes it
    /// (beside the GET stream, one could once the GET's head came).
    initialized_pending: Option<ExchangeId>,
    /// The handshake's `initialized` notification has gone out (this connection).
    initialized_out: bool,
    /// Until when requests wait for the GET stream's response head: a server that holds it
    /// back until it has a message would otherwise hold them until they time out.
    get_pending_until: Timestamp,
    /// The session expired: start a new connection once the old one's events are out.
    restart: bool,
    /// The GET streams were ended because the connection closed.
    gets_ended: bool,
    /// A new session's connection was just made (by `poll_event`): its `initialize` is due,
    /// and [`HttpClient::poll_timeout`] says so until the host takes actions or a timeout.
    restarted: bool,
    /// A new session's connection whose `initialize` has not gone out yet: ending the session
    /// now ends that one too.
    restart_unsent: bool,
    /// `end_session` was called before any `initialize` went out, the era not yet known to
    /// be 2026-07-28 (an auto-era probe under way, or a first `poll_action` not yet made): an
    /// `initialize` the connection makes later fails unsent, so the server makes no session
    /// nobody would end. A probe answered in the 2026-07-28 era makes it moot (no sessions).
    end_before_initialize: bool,
    /// `poll_action` failed requests made after the session ended (they never go out): their
    /// events wait, which no input or command brought, until `poll_event` has handed out all.
    failed_unsent: bool,
    /// How many sessions in a row expired unused (no request of the application's answered
    /// in them, and not kept a while after the server took an exchange of theirs): a server
    /// that forgets every new session at once (a load balancer without sticky sessions,
    /// say) would have the client start sessions as fast as it refuses them.
    empty_expiries: u32,
    /// The server took an exchange of this session (a 2xx head to one with its id).
    session_taken: bool,
    /// When this session's id came.
    session_started: Timestamp,
    /// The session's GET stream got a 2xx head in this session.
    get_opened: bool,
    /// The session is over for good: the application ended it, or it expired after the
    /// application closed the connection. No new one starts, and requests made since fail
    /// without going out (without the session's id, a server refuses them).
    ended: bool,
    /// A request of this session was answered with success (see `skip_get`).
    session_answered: bool,
    /// The next session opens no GET stream: this one's was refused before anything else
    /// succeeded.
    skip_get: bool,
    /// The exchange carrying `initialize`: the session id is taken from its answer only (not
    /// from a 2026-07-28 answer, nor from a late answer of a session that ended).
    initialize: Option<ExchangeId>,
    /// Exchanges that went out since the host last gave the time, which had their
    /// [`UNAWAITED_HEAD_LIMIT`] counted from that time (see [`clock`](Self::clock)).
    unclocked: Vec<ExchangeId>,
    /// The session's DELETE, held back while POSTs sent before it have no response head
    /// (`Exchange::unheard`): sent beside them, it could reach the server first, which then
    /// refuses the cancellation or last answer they carry (or the host, its work done once
    /// the DELETE is answered, exits before they leave).
    held_delete: Option<ExchangeId>,
    /// The start of the last error body that held no JSON-RPC answer ([`failure_text`]).
    ///
    /// [`failure_text`]: Self::failure_text
    failure_text: Option<String>,
    now: Timestamp,
}

/// The wait a `Retry-After` header asks for, in seconds (at most [`MAX_RETRY_AFTER`]); `None`
/// for an HTTP date, which a client without the time of day cannot read.
fn retry_after(value: &str) -> Option<Duration> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // (More digits than a u64 holds: as long as it may be.)
    let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// The longest wait a `Retry-After` is followed for: a request must not wait longer than
/// this for a server that asks for more (its own timeout usually ends it sooner).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Whether an error status to a GET may pass if the GET is tried again: a timeout, a conflict
/// (a server that still holds the stream's broken connection), too many requests, or a
/// server or gateway error.
fn transient(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429 | 500 | 502 | 503 | 504)
}

/// The most of an error response's body [`HttpClient::failure_text`] keeps, in bytes.
pub const FAILURE_TEXT_MAX: usize = 512;

/// The start of an error body, for [`HttpClient::failure_text`]; `None` when blank.
fn failure_text_of(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&body[..body.len().min(FAILURE_TEXT_MAX)]);
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

impl HttpClient {
    /// A client for `config` (client role). Its first POST (`initialize`, or the
    /// `server/discover` probe) is ready at once. `open_get_stream` also opens the session's
    /// standalone GET stream once a handshake-era session is ready, for server messages that
    /// belong to no request.
    pub fn new(
        config: Config,
        now: Timestamp,
        policy: ReconnectPolicy,
        open_get_stream: bool,
    ) -> Result<HttpClient, ConfigError> {
        let decoder = Decoder::new(config.decoder);
        Ok(HttpClient {
            conn: Connection::new(config, now)?,
            policy,
            session: None,
            tools: ToolHeaders::new(),
            tools_list: HashSet::new(),
            held_calls: Vec::new(),
            refresh: None,
            next_refresh_id: -1,
            resent: HashMap::new(),
            exchanges: BTreeMap::new(),
            next_exchange: 1,
            queue: VecDeque::new(),
            resumes: Vec::new(),
            running_replies: 0,
            waiting_replies: 0,
            held: VecDeque::new(),
            running_requests: 0,
            held_requests: VecDeque::new(),
            running_notes: 0,
            held_notes: VecDeque::new(),
            lingering: BTreeSet::new(),
            sweep: false,
            decoder,
            open_get: open_get_stream,
            want_get: open_get_stream,
            get_pending: None,
            initialized_pending: None,
            initialized_out: false,
            get_pending_until: now,
            restart: false,
            gets_ended: false,
            restarted: false,
            restart_unsent: false,
            end_before_initialize: false,
            failed_unsent: false,
            empty_expiries: 0,
            session_taken: false,
            session_started: now,
            get_opened: false,
            ended: false,
            session_answered: false,
            skip_get: false,
            initialize: None,
            unclocked: Vec::new(),
            held_delete: None,
            failure_text: None,
            now,
        })
    }

    /// The start of the body of the last response that failed requests without a JSON-RPC
    /// answer (an HTML page from a proxy, a framework's plain text), up to
    /// [`FAILURE_TEXT_MAX`] bytes as lossy UTF-8, trimmed; `None` when that body was empty. A
    /// request it failed gets only [`TransportFailure::Status`]: show this next to the status
    /// when you tell a person why. Escape its control characters before
    /// printing it to a terminal; it is the server's text.
    pub fn failure_text(&self) -> Option<&str> {
        self.failure_text.as_deref()
    }

    /// The MCP connection, for commands (`request`, `respond`, …). Its output is sent by
    /// [`poll_action`](Self::poll_action); do not drain it yourself.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The handshake-era session id, once the server gave one with its answer to
    /// `initialize`. An id that is not all visible ASCII (0x21 to 0x7E), as the spec requires,
    /// is not taken: the session goes on without one.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Ends the handshake-era session: queues a `DELETE` with its id (the server frees it at
    /// once instead of at its idle timeout); returns its exchange, `None` without a session.
    /// Requests still in flight are left to end as they will (those whose stream broke and
    /// waits to be resumed fail at once: [`TransportFailure::Status`] 404); close the
    /// connection first for a clean end. The DELETE goes out once the notifications and answers sent before it
    /// (the cancellations of that close, say) have their response heads, or were let go
    /// ([`UNAWAITED_HEAD_LIMIT`]): sent beside them, it could reach the server first. Wait
    /// for it while [`has_exchange`](Self::has_exchange) says so. Called while `initialize`
    /// has no answer yet, it returns `None` and owes the DELETE: it goes out once the
    /// answer brings the session id, and [`is_ending_session`](Self::is_ending_session)
    /// holds until then (drive the client while it does). Called before any `initialize`
    /// went out (an auto-era client's `server/discover` probe under way, or no
    /// `poll_action` yet), it returns `None` and no session starts: an `initialize` made later
    /// fails unsent and the connection closes, unless the server answers the probe in the
    /// 2026-07-28 era, which has no sessions to end. The client starts no new
    /// session after this, even when the DELETE or a request still in flight is answered 404,
    /// and requests made later fail at once ([`TransportFailure::Status`] 404) without going
    /// out.
    pub fn end_session(&mut self) -> Option<ExchangeId> {
        // Asked while a new session was about to replace one that expired (its connection
        // made or not, its `initialize` not sent): none starts.
        if self.restart || self.restart_unsent {
            self.restart = false;
            self.restart_unsent = false;
            self.ended = true;
        }
        // Asked while `initialize` is out, its answer's head not come: the session the server
        // makes for it is ended as soon as its id comes (the DELETE goes out then).
        if self.session.is_none() && self.initialize_unanswered() {
            self.ended = true;
        }
        // Asked before any `initialize` went out, the era still open (a `server/discover`
        // probe out, or nothing taken yet): a handshake-era session never starts.
        if self.session.is_none()
            && self.initialize.is_none()
            && self.conn.state() == State::Initializing
            && self.conn.era() != Some(Era::Modern)
        {
            self.end_before_initialize = true;
        }
        self.session.as_ref()?;
        // What the connection holds already (a cancellation, say) goes out first, in this
        // session: made into POSTs later, it would carry no session id (and get 400). Nothing
        // waits for response heads any more: the session is ending.
        self.get_pending = None;
        self.initialized_pending = None;
        self.take_output();
        let sid = self.session.take()?;
        self.ended = true;
        // The session's GET stream ends with it (it would otherwise go out again without the
        // session).
        self.end_get_streams();
        // A request's stream waiting to be resumed (its time come or not) would go out after
        // the DELETE, with the ended session's id, to be refused: its requests fail now, as
        // later ones do.
        let exchanges = &self.exchanges;
        let due: Vec<ExchangeId> = (self.queue.iter())
            .filter(|&&(e, abort)| {
                !abort
                    && exchanges
                        .get(&e)
                        .is_some_and(|x| x.method == "GET" && !x.standalone)
            })
            .map(|&(e, _)| e)
            .collect();
        self.queue.retain(|(e, _)| !due.contains(e));
        // (Not a notification or an answer refused for now, which goes again before the
        // DELETE: it never carried a request to fail.)
        let (kept, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.resumes)
            .into_iter()
            .partition(|(_, e)| {
                exchanges
                    .get(e)
                    .is_some_and(|x| x.method == "POST" && !x.asked)
            });
        self.resumes = kept;
        let waiting = waiting.into_iter().map(|(_, e)| e);
        // Requests waiting for a place among the running ones would also go out after it:
        // they fail now too.
        let held: Vec<ExchangeId> = (self.exchanges.iter())
            .filter(|(_, x)| x.held)
            .map(|(e, _)| *e)
            .collect();
        for resume in waiting.chain(due).chain(held) {
            self.finish(self.now, resume, TransportFailure::Status(404));
        }
        let mut headers = vec![(super::SESSION_HEADER.to_owned(), sid)];
        if let Some(v) = self.conn.protocol_version() {
            headers.push((super::VERSION_HEADER.to_owned(), v.as_str().to_owned()));
        }
        let delete = Exchange::new("DELETE", headers, Vec::new(), BTreeSet::new());
        Some(self.new_exchange(delete))
    }

    /// Ends the session's GET stream: closed if it runs, dropped if it waits to be opened
    /// (again) or to go out; and no other is opened.
    fn end_get_streams(&mut self) {
        self.open_get = false;
        let gets: Vec<ExchangeId> = (self.exchanges.iter())
            .filter(|(_, ex)| ex.standalone)
            .map(|(id, _)| *id)
            .collect();
        for get in gets {
            let unsent = self.resumes.iter().any(|(_, e)| *e == get)
                || self.queue.iter().any(|&(e, abort)| e == get && !abort);
            if unsent {
                self.resumes.retain(|(_, e)| *e != get);
                self.queue.retain(|(e, _)| *e != get);
                self.drop_exchange(get);
            } else {
                self.queue.push_back((get, true));
            }
        }
    }

    /// Whether `exchange` is still under way: waiting to go out (or to be resumed), or sent
    /// and not yet ended, failed or let go. Use it to wait for the DELETE of
    /// [`end_session`](Self::end_session), which may wait for other exchanges before it is
    /// sent.
    pub fn has_exchange(&self, exchange: ExchangeId) -> bool {
        self.exchanges.contains_key(&exchange)
    }

    /// Whether a notification or answer has not reached the server yet: it went out and has
    /// no response head, it is an answer to the server waiting for a place among the
    /// [`MAX_RUNNING_REPLIES`], or the connection still holds it (messages, requests too,
    /// wait for the session's GET stream or `initialized` to get its response head: about a
    /// second at most, longer after a refused `initialized` goes again; the host's timer
    /// ends that wait). What it carries (a cancellation, say) may be lost. A
    /// host about to exit keeps driving the client while this holds, timers included (within
    /// a bound of its own), so as not to cut it off.
    pub fn has_unheard(&self) -> bool {
        // (Only while messages wait for those heads does the connection keep any once the
        // host has taken its actions.)
        self.unheard_exchanges()
            || (!self.restart && self.waiting_for_heads() && self.conn.poll_frame().is_some())
    }

    /// Whether an exchange that carries a notification or answer has not reached the server
    /// yet (see [`has_unheard`](Self::has_unheard)): what the DELETE waits for.
    fn unheard_exchanges(&self) -> bool {
        (self.exchanges.values()).any(|x| x.unheard || ((x.reply || x.note) && !x.running))
    }

    /// Whether the session's DELETE ([`end_session`](Self::end_session)) is still to go out
    /// or under way: owed to a session whose `initialize` has no answer yet (it goes once the
    /// session id comes), held back for the POSTs before it, queued, or sent and not yet
    /// ended. False once it ended, failed or was let go, when `initialize` was answered
    /// without a session or failed, and when the session turned out to be gone before the
    /// DELETE went out (a 404 to another exchange: it is then never sent). A host that ends
    /// the session keeps driving the client while this holds (whatever `end_session`
    /// returned); one that only has the C API or Go has no [`ExchangeId`] of the DELETE to
    /// ask [`has_exchange`](Self::has_exchange) about.
    pub fn is_ending_session(&self) -> bool {
        self.held_delete.is_some()
            || (self.exchanges.values()).any(|x| x.method == "DELETE")
            || (self.ended && self.session.is_none() && self.initialize_unanswered())
    }

    /// Whether `initialize` is out and its answer's head has not come.
    fn initialize_unanswered(&self) -> bool {
        (self.initialize)
            .and_then(|e| self.exchanges.get(&e))
            .is_some_and(|x| x.head_at.is_none())
    }

    /// The next event of the connection. After a session expired, the old connection's
    /// events (its failed requests) come first, and requests made on it meanwhile fail too
    /// (`Status(404)`: ask again once the new session is `Ready`); then a new connection
    /// starts a new session, which brings an [`Event::Ready`] of its own (one per session, not
    /// one per client), unless the connection was closed, the session was ended, or this is
    /// the second session in a row to expire unused: before the server answered a request
    /// of the application's in it, and before it had kept it a second (or the policy's
    /// longest backoff, if longer) after taking an exchange of it (the connection then closes
    /// with `TransportFailed`). Its requests are numbered after the old session's, so a
    /// [`RequestId`](crate::conn::RequestId) of the old session never names one of the new.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        // The application closed the connection while a new session was about to replace one
        // that expired: none starts (its requests fail in `take_output`).
        if self.restart && matches!(self.conn.state(), State::Closing | State::Closed) {
            self.restart = false;
            self.ended = true;
        }
        if self.restart && self.conn.pending_events() == 0 {
            // Requests the application made on the old connection after its session ended
            // (while it handled the failures) were never sent, and cannot be on the new one:
            // they fail too, before it starts, rather than vanish with the old connection.
            for n in self.conn.our_requests() {
                self.conn.handle_failed_exchange(
                    self.now,
                    Id::Int(n),
                    TransportFailure::Status(404),
                );
            }
            if self.conn.pending_events() > 0 {
                return self.conn.poll_event();
            }
            self.restart = false;
            // "MUST start a new session by sending a new InitializeRequest": sessions belong to
            // the handshake era, so the new connection does not probe with `server/discover`
            // first, as an auto-era one would.
            let mut config = self.conn.config().clone();
            if config.latest_legacy().is_some() {
                config.client_era = crate::conn::ClientEra::Legacy;
            }
            if let Ok(mut conn) = Connection::new(config, self.now) {
                conn.continue_request_ids(&self.conn);
                self.conn = conn;
                self.restarted = true;
                self.restart_unsent = true;
                self.open_get = self.want_get && !std::mem::take(&mut self.skip_get);
                self.session_answered = false;
                self.session_taken = false;
                self.get_opened = false;
                self.initialized_out = false;
            }
        }
        if self.conn.pending_events() == 0 {
            self.failed_unsent = false;
        }
        self.conn.poll_event()
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) has work: the connection's
    /// timers, the resumptions waiting, the end of the requests' wait for the GET stream's
    /// response head, and the streams to let go ([`LINGER`]). It is the last time given while
    /// the host has work that no input or command brought, until it takes it (or a timeout):
    /// the `initialize` of a new session, which [`poll_event`](Self::poll_event) starts once
    /// it has handed out the expired one's events (for a host that takes its actions before
    /// its events), and the failures of requests made after the session ended, which
    /// [`poll_action`](Self::poll_action) makes (for one that takes its events first).
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if self.restarted || self.failed_unsent {
            return Some(self.now);
        }
        let get_wait = self.waiting_for_heads().then_some(self.get_pending_until);
        let resume = (self.resumes.iter().map(|(at, _)| *at))
            .chain(self.lingering.first().map(|(at, _)| *at))
            .chain(get_wait)
            .min();
        match (self.conn.poll_timeout(), resume) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires what is due: the connection's timers, resumptions whose time has come, and
    /// streams to let go.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        // Due at once no more: the host takes its actions, and its events, after this timeout.
        self.restarted = false;
        self.failed_unsent = false;
        self.clock(now);
        self.conn.handle_timeout(now);
        // Here too, not only in `take_output`: no deadline is left in the past for a host that
        // arms its timer before it polls actions.
        self.end_get_wait();
        self.sweep = true;
        self.forget_ended();
        let (due, later): (Vec<_>, Vec<_>) =
            self.resumes.iter().copied().partition(|(at, _)| *at <= now);
        self.resumes = later;
        for (_, exchange) in due {
            self.queue.push_back((exchange, false));
        }
        while let Some(&(at, exchange)) = self.lingering.first()
            && at <= now
        {
            // Still open (the server has not ended it): close it.
            self.lingering.pop_first();
            if let Some(ex) = self.exchanges.get_mut(&exchange) {
                ex.linger = None;
                self.queue.push_back((exchange, true));
            }
        }
    }

    /// The next thing for the host to do, if any: an HTTP request to make, or a response to
    /// abandon. Call it after every input and command, until `None`.
    pub fn poll_action(&mut self) -> Option<ClientAction<'_>> {
        if !self.gets_ended && !self.restart && self.conn.state() == State::Closed {
            // Nothing is to come for a closed connection: its GET stream is closed rather
            // than left open (on the server, too) for as long as the host keeps the client.
            self.gets_ended = true;
            self.get_pending = None;
            self.end_get_streams();
        }
        self.take_output();
        self.find_done();
        if self.ended && !self.held_notes.is_empty() {
            // The session is ending, and its DELETE waits for these: they go now, whatever
            // runs (a batch at a time, each let go after its wait, held the DELETE for
            // minutes).
            let held = std::mem::take(&mut self.held_notes);
            self.queue.extend(held.into_iter().map(|e| (e, false)));
        }
        if self.held_delete.is_some() && !self.unheard_exchanges() {
            // What went out before the DELETE was heard (or let go): it goes now.
            if let Some(delete) = self.held_delete.take() {
                self.queue.push_front((delete, false));
            }
        }
        let (exchange, abort) = loop {
            let (exchange, abort) = self.queue.pop_front()?;
            if abort {
                if self.exchanges.get(&exchange).is_some_and(|x| x.held) {
                    // Never sent: it goes without a word to the host.
                    self.drop_exchange(exchange);
                    continue;
                }
                break (exchange, abort);
            }
            // (One that ended before it went out is skipped.)
            let Some(method) = self.exchanges.get(&exchange).map(|x| x.method) else {
                continue;
            };
            if method == "DELETE" && self.unheard_exchanges() {
                self.held_delete = Some(exchange);
                continue;
            }
            let Some(ex) = self.exchanges.get_mut(&exchange) else {
                continue;
            };
            if ex.reply && !ex.running {
                if self.running_replies >= MAX_RUNNING_REPLIES {
                    self.held.push_back(exchange); // its turn comes when a reply ends
                    continue;
                }
                ex.running = true;
                self.running_replies += 1;
                self.waiting_replies -= 1;
            } else if ex.note && !ex.running {
                if self.running_notes >= MAX_RUNNING_NOTIFICATIONS && !self.ended {
                    self.held_notes.push_back(exchange); // its turn comes when one ends
                    continue;
                }
                ex.running = true;
                self.running_notes += 1;
            } else if ex.asked && !ex.running && !ex.held {
                if self.running_requests >= MAX_RUNNING_REQUESTS {
                    ex.held = true;
                    self.held_requests.push_back(exchange); // its turn comes when one ends
                    continue;
                }
                ex.running = true;
                self.running_requests += 1;
            } else if ex.held {
                continue; // (queued again while it waits for its place: it keeps that place)
            }
            break (exchange, abort);
        };
        if abort {
            self.drop_exchange(exchange);
            return Some(ClientAction::Abort { exchange });
        }
        if let Some(ex) = self.exchanges.get_mut(&exchange)
            && !ex.asked
            && !ex.standalone
        {
            // Nothing to wait for (a notification, an answer, a DELETE): a server that never
            // answers it, or never ends its answer, must not keep it open for good.
            let at = self.now.after(UNAWAITED_HEAD_LIMIT);
            linger_until(&mut self.lingering, exchange, ex, at);
            self.unclocked.push(exchange);
            ex.unheard = ex.method == "POST";
        }
        let ex = self.exchanges.get(&exchange)?;
        Some(ClientAction::Send {
            exchange,
            method: ex.method,
            headers: &ex.headers,
            body: &ex.body,
        })
    }

    /// The response's status and headers arrived for `exchange`. Names compare ignoring case.
    /// Report the final head only: an informational status (1xx) given here fails the
    /// exchange's requests with [`TransportFailure::Status`] and queues an abort of it.
    pub fn handle_response(
        &mut self,
        now: Timestamp,
        exchange: ExchangeId,
        status: u16,
        headers: &[(&str, &str)],
    ) {
        self.clock(now);
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        };
        if let Some(sid) = header(super::SESSION_HEADER)
            && self.session.is_none()
            && self.initialize == Some(exchange)
            && (200..300).contains(&status)
            && valid_session_id(sid)
        {
            self.session = Some(sid.to_owned());
            self.session_started = now;
            if self.ended {
                // The application ended the session while `initialize` was out: it ends now.
                let _ = self.end_session();
            }
        }
        let media = header("Content-Type").map(|t| t.split(';').next().unwrap_or("").trim());
        let sse = media.is_some_and(|m| m.eq_ignore_ascii_case("text/event-stream"));
        // A JSON body, or none said: anything else (an HTML page from a proxy, say) is read
        // as an error's body, so the request fails with the status instead of "the stream
        // ended without the answer".
        let json = media.is_none_or(|m| {
            m.eq_ignore_ascii_case("application/json")
                || m.rsplit_once('+')
                    .is_some_and(|(_, s)| s.eq_ignore_ascii_case("json"))
        });
        let wait = match status {
            429 | 503 => header("Retry-After").and_then(retry_after),
            _ => None,
        };
        // A POST refused for now may go again (decided at its end): what waits for its head
        // (requests for `initialized`'s, the DELETE for a notification's) waits on until then.
        let refusal =
            wait.is_some() && (self.exchanges.get(&exchange)).is_some_and(|x| x.method == "POST");
        if !refusal {
            self.head_came(exchange);
        }
        let Some(ex) = self.exchanges.get_mut(&exchange) else {
            return;
        };
        ex.status = status;
        ex.head_at = Some(now);
        ex.retry_after = wait;
        if status < 200 {
            // An informational status is never the final answer; an HTTP library that hands
            // one over as the response (`101 Switching Protocols`, whose "body" is the raw
            // connection) has nothing more to read that could answer. The exchange fails
            // now, and the host stops reading it.
            if !ex.awaiting.is_empty() {
                self.failure_text = None;
            }
            self.finish(now, exchange, TransportFailure::Status(status));
            self.queue.push_back((exchange, true));
            return;
        }
        ex.reading = match status {
            // An exchange that waits for nothing (a notification, an answer of ours) reads an
            // event stream as any other body, cut to a short text: the spec has 202 for it,
            // and a server streaming there made the client hold a frame per exchange, with
            // no answer it could bring.
            200 if sse && ex.waits() => {
                ex.opened_at = Some(now);
                ex.reader.reconnected();
                Reading::Sse
            }
            200 if json => Reading::Json(Vec::new()),
            _ => Reading::Other(Vec::new()),
        };
        if !ex.asked && !ex.standalone {
            // Its head came: the body (202's is empty) gets a little while to end.
            linger_until(&mut self.lingering, exchange, ex, now.after(LINGER));
        }
        if status == 404 && ex.with_session {
            // The session is gone: its requests fail, and the next connection starts over. A
            // GET stream refused this way before it was ever open in this session, and before
            // the session answered anything else, is not asked for in the next session: a
            // server that answers every GET with 404 would otherwise start a new session for
            // ever, and hold every request behind its GET. (One that was open, a client that
            // only listens, gets it again after its server restarted.)
            if ex.standalone && !self.session_answered && !self.get_opened {
                self.skip_get = true;
            }
            self.expire_session(now);
        } else if ex.with_session && (200..300).contains(&status) {
            self.session_taken = true;
            self.get_opened |= ex.standalone;
            if !ex.awaiting.is_empty() {
                self.session_answered = true;
            }
        }
    }

    /// Bytes of the response body of `exchange`.
    pub fn handle_body(&mut self, now: Timestamp, exchange: ExchangeId, bytes: &[u8]) {
        self.clock(now);
        // A JSON body is one message: the largest one taken is the connection's largest frame
        // (as over stdio); a larger one fails its exchange, the rest of it unread.
        let max_frame = self.conn.config().limits.max_frame;
        let Some(ex) = self.exchanges.get_mut(&exchange) else {
            return;
        };
        let status = ex.status;
        // An exchange that waits for nothing (a notification, an answer of ours, the DELETE)
        // has no use for a body beyond a short text: up to 64 of them run at once, and a
        // server streaming junk into each must not make the client hold 64 frames.
        let waits = ex.waits();
        let max_body = if waits { max_frame } else { FAILURE_TEXT_MAX };
        // A JSON body past a small size must fit with the other answers being read (an SSE
        // stream is looked at once its complete events are out: see `over_held_budget`).
        if matches!(ex.reading, Reading::Json(_) | Reading::Other(_))
            && self.over_held_budget(exchange, bytes.len(), max_frame)
        {
            self.finish(now, exchange, TransportFailure::TooLarge);
            self.queue.push_back((exchange, true));
            return;
        }
        let Some(ex) = self.exchanges.get_mut(&exchange) else {
            return;
        };
        match &mut ex.reading {
            Reading::Json(body) | Reading::Other(body) => {
                if body.len() + bytes.len() <= max_body {
                    body.extend_from_slice(bytes);
                    return;
                }
                if !waits && ex.method == "POST" && ex.retry_after.is_some() {
                    // A refusal for now (429 or 503 with a time to come back) of a POST that
                    // waits for nothing: what it carried goes again once its body ends, so a
                    // long page (a proxy's HTML) is read to its end, its first bytes kept.
                    let room = max_body.saturating_sub(body.len());
                    body.extend_from_slice(&bytes[..room.min(bytes.len())]);
                    return;
                }
                // Over the limit: the exchange fails now and the host stops reading it (a
                // body with a piece left out must never be taken for the answer). Its text
                // explains a failure only when it failed requests.
                let failure = match &ex.reading {
                    Reading::Json(_) if waits => TransportFailure::TooLarge,
                    Reading::Other(body) if !ex.awaiting.is_empty() => {
                        self.failure_text =
                            failure_text_of(if body.is_empty() { bytes } else { body });
                        TransportFailure::Status(status)
                    }
                    _ => TransportFailure::Status(status),
                };
                self.finish(now, exchange, failure);
                self.queue.push_back((exchange, true));
            }
            Reading::Sse => {
                let mut messages = Vec::new();
                let seen = ex.reader.events_seen();
                let too_long = ex.reader.too_long();
                ex.reader.feed(bytes, |m| messages.push(m.to_vec()));
                if ex.reader.events_seen() != seen {
                    // The stream moved on (a polling server's new event counts): its next
                    // break is a first one again, not one more failed attempt.
                    ex.attempts = 0;
                }
                // (On the session's GET stream, which answers nothing, it is only skipped.)
                let dropped = ex.reader.too_long() != too_long && !ex.standalone;
                for m in messages {
                    // A batch (2025-03-26) member by member, so that its answers are noted.
                    if m.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
                        && matches!(self.decoder.decode(&m), Ok(Decoded::Batch(_)))
                    {
                        self.deliver_body(now, exchange, &m);
                    } else {
                        self.deliver(now, exchange, &m);
                    }
                }
                // An event over the limit was dropped, maybe an answer: the requests the stream
                // carries fail now, and it is not resumed (that would bring the same event
                // again). So does one whose unfinished event takes the answers being read past
                // their budget (what it brought complete was delivered above).
                if dropped || self.over_held_budget(exchange, 0, max_frame) {
                    self.finish(now, exchange, TransportFailure::TooLarge);
                    self.queue.push_back((exchange, true));
                }
            }
            Reading::Waiting => {}
        }
    }

    /// The response body of `exchange` ended normally. Requests it should have answered and
    /// did not are resumed (SSE with an event id) or fail. `jitter` is a random value for
    /// the resumption delay.
    pub fn handle_end(&mut self, now: Timestamp, exchange: ExchangeId, jitter: u32) {
        self.clock(now);
        let Some(ex) = self.exchanges.get_mut(&exchange) else {
            return;
        };
        let status = ex.status;
        match std::mem::replace(&mut ex.reading, Reading::Waiting) {
            Reading::Json(body) => {
                self.deliver_body(now, exchange, &body);
                self.settle(now, exchange, TransportFailure::StreamEnded, jitter);
            }
            Reading::Other(body) => {
                // An error status may still carry a JSON-RPC answer (400 with -32020, say):
                // delivered when it answers one of this exchange's requests, or is an error
                // without an id and the POST carried one request. Anything else (an HTML
                // page, say) only explains the status.
                let only = self.only_request(exchange);
                let ours = |n: i64| {
                    (self.exchanges.get(&exchange)).is_some_and(|x| x.awaiting.contains(&n))
                };
                // (One without an id answers the POST's one request: see `deliver`.)
                let (names_ours, idless) = match self.decoder.decode(&body) {
                    Ok(Decoded::Single(Message::Error(e))) => match e.id {
                        Some(Id::Int(n)) => (ours(n), false),
                        None => (false, true),
                        Some(_) => (false, false),
                    },
                    Ok(Decoded::Single(Message::Response(r))) => {
                        (matches!(r.id, Id::Int(n) if ours(n)), false)
                    }
                    _ => (false, false),
                };
                let answers_ours = names_ours || (idless && only.is_some());
                let awaited =
                    (self.exchanges.get(&exchange)).is_some_and(|x| !x.awaiting.is_empty());
                let resuming = (self.exchanges.get(&exchange)).is_some_and(|x| x.method == "GET");
                // A POST refused for now (503 or 429) with a time to come back, and no answer
                // naming its request (an error without an id, as the engine's own 503s
                // carry, is the refusal's text): the server did not take what it carried,
                // which goes again then. Requests, notifications and answers alike: a lost
                // `initialized` or cancellation would be worse than a late one.
                let refused_for_now = !resuming
                    && !names_ours
                    && (self.exchanges.get(&exchange))
                        .is_some_and(|x| x.method == "POST" && x.retry_after.is_some());
                if refused_for_now && self.send_again(now, exchange) {
                    return;
                }
                // (Not going again: what waited for its head waits no more.)
                self.head_came(exchange);
                if resuming && transient(status) {
                    // A GET that resumes a stream, or reopens the session's, refused for now
                    // (409 while the server still holds the broken connection, 503, ...): it
                    // is tried again like a broken stream, within the policy's attempts. Its
                    // body answers no request, whatever id it names: the GET carried none.
                    return self.settle(now, exchange, TransportFailure::Status(status), jitter);
                }
                let max_frame = self.conn.config().limits.max_frame;
                if status == 400
                    && let Some(ex) = self.exchanges.get_mut(&exchange)
                    && ex.standalone
                    && ex.reader.last_event_id().is_some()
                {
                    // The session's GET stream resumed from an id the server does not know
                    // (one that forgot it, or a replica of another version): it is opened
                    // again plainly, rather than the session going on without it.
                    ex.reader = StreamReader::with_max_message(max_frame);
                    return self.settle(now, exchange, TransportFailure::Status(status), jitter);
                }
                if answers_ours {
                    self.deliver_body(now, exchange, &body);
                } else if awaited {
                    // The text of this failure, or none: never an earlier one's.
                    self.failure_text = failure_text_of(&body);
                }
                // (A 202 to a request, which no answer can follow, is its status too.)
                self.finish(now, exchange, TransportFailure::Status(status));
            }
            Reading::Sse => self.settle(now, exchange, TransportFailure::StreamEnded, jitter),
            Reading::Waiting => self.settle(now, exchange, TransportFailure::Disconnected, jitter),
        }
    }

    /// The exchange failed: no connection, or it broke. Like [`handle_end`](Self::handle_end),
    /// a stream with an event id is resumed, else its requests fail.
    pub fn handle_error(&mut self, now: Timestamp, exchange: ExchangeId, jitter: u32) {
        self.clock(now);
        self.head_came(exchange);
        if let Some(ex) = self.exchanges.get_mut(&exchange) {
            ex.reading = Reading::Waiting;
        }
        self.settle(now, exchange, TransportFailure::Disconnected, jitter);
    }

    // ---- inside ----------------------------------------------------------------------------

    /// Turns the connection's output into POST exchanges.
    fn take_output(&mut self) {
        self.end_get_wait();
        // A session that expired is being replaced: what the old connection wrote since would
        // go out without a session id. `poll_event` fails its requests before the new
        // session starts.
        if self.restart {
            return;
        }
        self.restarted = false;
        while !self.waiting_for_heads()
            && let Some(frame) = self.conn.poll_frame()
        {
            let bytes = frame.bytes.to_vec();
            self.conn.consume_frame();
            let posted = self.post(&bytes);
            if self.end_before_initialize && posted.is_some() && posted == self.initialize {
                self.ended = true;
            }
            if self.ended {
                // The session is over: its requests fail here, never sent.
                if let Some(exchange) = posted {
                    self.queue.retain(|(e, _)| *e != exchange);
                    self.finish(self.now, exchange, TransportFailure::Status(404));
                    self.failed_unsent |= self.conn.pending_events() > 0;
                }
                continue;
            }
            if !self.initialized_out
                && self.conn.era() == Some(Era::Legacy)
                && self.conn.state() == crate::conn::State::Operating
                && matches!(
                    self.decoder.decode(&bytes),
                    Ok(Decoded::Single(Message::Notification(n)))
                        if n.method.eq_str("notifications/initialized")
                )
            {
                // The handshake just finished: this was `initialized` (an answer to a
                // server's request made during the handshake may have gone before it).
                self.initialized_out = true;
                // Requests wait for its head: every POST travels on its own, and a strict
                // server refuses a request that overtakes `initialized` on the way.
                self.initialized_pending = posted;
                if self.open_get && self.session.is_some() {
                    // And for the GET stream's.
                    self.open_get = false;
                    self.get_pending = Some(self.get_stream());
                }
                self.get_pending_until = self.now.after(GET_HEAD_WAIT);
            }
        }
    }

    /// Takes the host's time. The exchanges that went out since it last gave one get their
    /// [`UNAWAITED_HEAD_LIMIT`] again, counted from `now`: `poll_action` takes no time, so it
    /// counted from the last one the host gave, which may lie long before they went out (an
    /// answer to a server's request a person took a minute over was let go before it left).
    fn clock(&mut self, now: Timestamp) {
        self.now = now;
        if self.unclocked.is_empty() {
            return;
        }
        let at = now.after(UNAWAITED_HEAD_LIMIT);
        for exchange in std::mem::take(&mut self.unclocked) {
            if let Some(ex) = self.exchanges.get_mut(&exchange)
                && ex.head_at.is_none()
                && ex.linger.is_some_and(|old| old < at)
            {
                linger_until(&mut self.lingering, exchange, ex, at);
            }
        }
    }

    /// Whether requests wait for a response head (the GET stream's, `initialized`'s).
    fn waiting_for_heads(&self) -> bool {
        self.get_pending.is_some() || self.initialized_pending.is_some()
    }

    /// The response head of `exchange` came (or it failed): requests stop waiting for it.
    fn head_came(&mut self, exchange: ExchangeId) {
        if let Some(ex) = self.exchanges.get_mut(&exchange) {
            ex.unheard = false;
        }
        if self.get_pending == Some(exchange) {
            self.get_pending = None;
        }
        if self.initialized_pending == Some(exchange) {
            self.initialized_pending = None;
        }
    }

    /// Requests stop waiting for the GET stream's head once they waited long enough: they go
    /// out beside it.
    fn end_get_wait(&mut self) {
        if self.waiting_for_heads() && self.now >= self.get_pending_until {
            self.get_pending = None;
            self.initialized_pending = None;
        }
    }

    fn new_exchange(&mut self, mut ex: Exchange) -> ExchangeId {
        ex.reader = StreamReader::with_max_message(self.conn.config().limits.max_frame);
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        self.exchanges.insert(id, ex);
        self.queue.push_back((id, false));
        id
    }

    /// Makes the POST exchange that carries `frame`; `None` when it goes out as none (a
    /// 2026-07-28 notification).
    fn post(&mut self, frame: &[u8]) -> Option<ExchangeId> {
        let decoded = self.decoder.decode(frame);
        let mut awaiting = BTreeSet::new();
        let mut initialize = false;
        let mut modern_version = None;
        let mut cancelled = None;
        let mut param_headers = Vec::new();
        let reply = matches!(
            decoded,
            Ok(Decoded::Single(Message::Response(_) | Message::Error(_)))
        );
        if reply && self.waiting_replies >= MAX_WAITING_REPLIES {
            // The server asks faster than it takes our answers: this one is not sent.
            self.conn.count_suppressed_response();
            return None;
        }
        if let Ok(Decoded::Single(m)) = &decoded {
            match m {
                Message::Request(r) => {
                    initialize = r.method.eq_str("initialize");
                    // A handshake-era session's requests stay in it, whatever `_meta` says.
                    modern_version = r
                        .params
                        .filter(|_| self.conn.era() != Some(Era::Legacy))
                        .and_then(|p| p.unique("_meta"))
                        .and_then(|m| m.unique_str(META_PROTOCOL_VERSION))
                        .and_then(|v| ProtocolVersion::parse(&v.to_str()));
                    if let Id::Int(n) = r.id {
                        awaiting.insert(n);
                        // Tool annotations (`x-mcp-header`) are a 2026-07-28 rule.
                        if r.method.eq_str("tools/list") && modern_version.is_some() {
                            // (One whose answer never came, failed or cancelled, is let go
                            // here: the set lives as long as the client.)
                            if self.tools_list.len() >= 64 {
                                let conn = &self.conn;
                                self.tools_list.retain(|&n| conn.awaits_answer(n));
                            }
                            self.tools_list.insert(n);
                        }
                    }
                    if modern_version.is_some() && r.method.eq_str("tools/call") {
                        param_headers = self.param_headers(r.params);
                    }
                }
                Message::Notification(n) if n.method.eq_str("notifications/cancelled") => {
                    self.sweep = true;
                    cancelled = n
                        .params
                        .and_then(|p| p.unique("requestId"))
                        .and_then(|v| v.as_i64());
                }
                _ => {}
            }
        }
        // A request cancelled before its POST went out is withdrawn: it never reaches the
        // server, so neither does its cancellation (sent after it, the cancellation could
        // arrive first and be ignored, and the server would run the request to its end).
        // Not a GET waiting to resume the request's stream: its POST reached the server.
        // So is one whose POST was refused for now and waits to go again.
        if let Some(n) = cancelled
            && let Some((&id, _)) = (self.exchanges.iter()).find(|(_, e)| {
                e.method == "POST" && e.awaiting.len() == 1 && e.awaiting.contains(&n)
            })
            && (self.queue.contains(&(id, false))
                || self.resumes.iter().any(|&(_, e)| e == id)
                || self.exchanges.get(&id).is_some_and(|x| x.held))
        {
            self.queue.retain(|&(e, _)| e != id);
            self.resumes.retain(|&(_, e)| e != id);
            self.drop_exchange(id);
            return None;
        }
        if self.conn.era() == Some(Era::Modern) {
            // 2026-07-28: a cancellation is no message over HTTP: it closes the request's
            // stream. Any other notification (an extension's) is POSTed as the transport
            // says, to be answered 202.
            let is_cancel = matches!(&decoded, Ok(Decoded::Single(Message::Notification(n)))
                if n.method.eq_str("notifications/cancelled"));
            if is_cancel {
                if let Some(n) = cancelled
                    && let Some((&id, _)) =
                        self.exchanges.iter().find(|(_, e)| e.awaiting.contains(&n))
                {
                    self.queue.push_back((id, true));
                }
                return None;
            }
        }
        let version = modern_version.or(self.conn.protocol_version());
        let session = if modern_version.is_some() {
            None
        } else {
            self.session.clone()
        };
        let mut headers = owned(request_headers(frame, version, session.as_deref()));
        headers.extend(param_headers);
        let mut ex = Exchange::new("POST", headers, frame.to_vec(), awaiting);
        ex.with_session = session.is_some();
        ex.reply = reply;
        ex.note = matches!(&decoded, Ok(Decoded::Single(Message::Notification(_))));
        self.waiting_replies += usize::from(reply);
        let exchange = self.new_exchange(ex);
        if initialize {
            self.initialize = Some(exchange);
            self.restart_unsent = false;
        }
        Some(exchange)
    }

    /// `Mcp-Param-*` headers for a `tools/call`, from the tool's annotations.
    fn param_headers(&self, params: Option<RawJson<'_>>) -> Vec<(String, String)> {
        let Some(params) = params else {
            return Vec::new();
        };
        let Some(name) = params.unique_str("name") else {
            return Vec::new();
        };
        let arguments = params.unique("arguments");
        let mut out = Vec::new();
        for annotation in self.tools.for_tool(&name.to_str()) {
            // No header for a value none can carry (an object or array, a mistyped
            // argument): the server would refuse the header, not the argument.
            let Some(value) = arguments
                .and_then(|a| annotation.value_in(a).ok().flatten())
                .filter(|v| super::headers::value_matches("", *v).is_some())
            else {
                continue;
            };
            let text = super::headers::header_text(value);
            out.push((annotation.header_name(), encode_value(&text)));
        }
        out
    }

    fn get_stream(&mut self) -> ExchangeId {
        let mut headers = vec![("Accept".to_owned(), "text/event-stream".to_owned())];
        if let Some(s) = &self.session {
            headers.push((super::SESSION_HEADER.to_owned(), s.clone()));
        }
        if let Some(v) = self.conn.protocol_version() {
            headers.push((super::VERSION_HEADER.to_owned(), v.as_str().to_owned()));
        }
        let mut ex = Exchange::new("GET", headers, Vec::new(), BTreeSet::new());
        ex.standalone = true;
        ex.with_session = self.session.is_some();
        self.new_exchange(ex)
    }

    fn deliver_body(&mut self, now: Timestamp, exchange: ExchangeId, body: &[u8]) {
        if body.is_empty() {
            return;
        }
        match self.decoder.decode(body) {
            Ok(Decoded::Single(Message::Response(_) | Message::Error(_)))
            | Ok(Decoded::Single(Message::Request(_) | Message::Notification(_))) => {
                let body = body.to_vec();
                self.deliver(now, exchange, &body);
            }
            Ok(Decoded::Batch(members)) => {
                if !(self.conn.protocol_version()).is_some_and(ProtocolVersion::has_batches) {
                    // Outside 2025-03-26 the connection refuses the batch, as over stdio, and
                    // ends the requests its answers name (`InvalidResponse`): no exchange
                    // waits for them any more.
                    let named: Vec<i64> = (members.iter())
                        .filter_map(|m| match m {
                            Ok(Message::Response(r)) => Some(r.id),
                            Ok(Message::Error(e)) => e.id,
                            Err(e) if e.is_response_shaped() => e.id(),
                            _ => None,
                        })
                        .filter_map(|id| match id {
                            Id::Int(n) => Some(n),
                            Id::Str(_) => None,
                        })
                        .collect();
                    for n in named {
                        if n < 0 {
                            // The client's own `tools/list` (rule 9), answered unreadably:
                            // failed, so the refusal it waited on is the call's answer.
                            self.own_answer(now, n, None);
                        } else {
                            self.note_answered(n);
                        }
                    }
                    let body = body.to_vec();
                    self.conn.handle_frame(now, StreamId(exchange.0), &body);
                    return;
                }
                // A batch answer (2025-03-26): each member on its own.
                let texts: Vec<Vec<u8>> = members
                    .into_iter()
                    .flatten()
                    .map(|m| {
                        let mut out = Vec::new();
                        jsonrpc::encode_message(&mut out, &m);
                        out
                    })
                    .collect();
                for t in texts {
                    self.deliver(now, exchange, &t);
                }
            }
            Err(_) => {}
        }
    }

    /// One message from the server: notes the answer, learns tool annotations from
    /// `tools/list`, and feeds it to the connection.
    fn deliver(&mut self, now: Timestamp, exchange: ExchangeId, message: &[u8]) {
        let mut answered = None;
        let mut filtered = None;
        let only = self.only_request(exchange);
        if let Ok(Decoded::Single(m)) = self.decoder.decode(message) {
            match m {
                Message::Response(r) => {
                    if let Id::Int(n) = r.id {
                        if n < 0 {
                            return self.own_answer(now, n, Some(r.result));
                        }
                        answered = Some(n);
                        if self.tools_list.remove(&n) {
                            filtered = self.learn_tools(r.id, r.result);
                        }
                    }
                }
                Message::Error(e) => {
                    // (One without an id answers the POST's one request: see below.)
                    let named = match e.id {
                        Some(Id::Int(n)) => Some(n),
                        None => only,
                        Some(_) => None,
                    };
                    if let Some(n) = named.filter(|&n| n < 0) {
                        return self.own_answer(now, n, None);
                    }
                    if let Some(Id::Int(n)) = e.id {
                        if e.error.code == HEADER_MISMATCH {
                            match self.hold_call(exchange, n, message) {
                                Refusal::Held => return self.note_answered(n),
                                Refusal::Stale => {
                                    // (Only this exchange stops waiting: the call is on another.)
                                    if let Some(ex) = self.exchanges.get_mut(&exchange) {
                                        ex.awaiting.remove(&n);
                                    }
                                    self.sweep = true;
                                    return;
                                }
                                Refusal::Answer => {}
                            }
                        }
                        answered = Some(n);
                        self.tools_list.remove(&n);
                    } else if e.id.is_none()
                        && let Some(n) = only
                    {
                        // An error whose id the server could not read, in answer to a POST
                        // that carried one request: it is that request's answer, and its
                        // message says what went wrong (it was a violation, and the request
                        // failed later without a reason).
                        let mut out = Vec::new();
                        jsonrpc::encode_error(
                            &mut out,
                            Some(Id::Int(n)),
                            e.error.code,
                            &e.error.message.to_str(),
                            e.error.data,
                        );
                        answered = Some(n);
                        self.tools_list.remove(&n);
                        filtered = Some(out);
                    }
                }
                _ => {}
            }
        }
        if let Some(n) = answered {
            // (Almost always empty: no hashing then.)
            if !self.resent.is_empty() {
                self.resent.remove(&n);
            }
            self.note_answered(n);
        }
        let message = filtered.as_deref().unwrap_or(message);
        self.conn.handle_frame(now, StreamId(exchange.0), message);
    }

    /// The answer to one of the client's own requests (a negative id: the `tools/list` of
    /// rule 9), `None` for an error: never the application's, whether it belongs to the
    /// refresh under way or came late, for one that was let go.
    fn own_answer(&mut self, now: Timestamp, n: i64, result: Option<RawJson<'_>>) {
        self.note_answered(n);
        if self.refresh.as_ref().is_some_and(|f| f.id == n) {
            self.refreshed(now, result);
        }
    }

    /// Request `n` has its answer: no exchange waits for it any more.
    fn note_answered(&mut self, n: i64) {
        for ex in self.exchanges.values_mut() {
            ex.awaiting.remove(&n);
        }
        self.sweep = true;
    }

    /// Holds request `n`, refused with `HeaderMismatch` on `exchange`, until the client has
    /// read `tools/list` again (rule 9): [`Refusal::Answer`] when it is not one to send
    /// again (not a 2026-07-28 `tools/call`, sent again already, or too many held).
    fn hold_call(&mut self, exchange: ExchangeId, n: i64, refusal: &[u8]) -> Refusal {
        if self.held_calls.iter().any(|h| h.id == n) {
            // The same refusal again (a server that sent it twice): held once, sent once.
            return Refusal::Held;
        }
        if let Some(&sent_on) = self.resent.get(&n) {
            // Sent again already: a refusal that comes late on the first exchange (sent
            // twice) answers nothing; the call is on `sent_on`, whose refusal is its answer.
            return if sent_on == exchange {
                Refusal::Answer
            } else {
                Refusal::Stale
            };
        }
        if self.held_calls.len() >= MAX_HELD_CALLS || !self.conn.awaits_answer(n) {
            return Refusal::Answer;
        }
        let Some(ex) = (self.exchanges.get(&exchange)).filter(|x| x.method == "POST") else {
            return Refusal::Answer;
        };
        let Ok(Decoded::Single(Message::Request(r))) = self.decoder.decode(&ex.body) else {
            return Refusal::Answer;
        };
        if r.id != Id::Int(n) || !r.method.eq_str("tools/call") {
            return Refusal::Answer;
        }
        let params = r.params;
        let (Some(tool), Some(meta)) = (
            params.and_then(|p| p.unique_str("name")),
            params.and_then(|p| p.unique("_meta")),
        ) else {
            return Refusal::Answer;
        };
        if meta.unique_str(META_PROTOCOL_VERSION).is_none() {
            return Refusal::Answer;
        }
        let tool = tool.to_str().into_owned();
        let held = HeldCall {
            id: n,
            frame: ex.body.clone(),
            refusal: refusal.to_vec(),
            exchange,
        };
        if let Some(refresh) = &mut self.refresh {
            refresh.missing.insert(tool);
        } else {
            // The era's own keys only (not a progress token, say): the version, the client's
            // name and capabilities, its log level.
            let mut text = String::from("{");
            for (key, value) in meta.members() {
                if key.to_str().starts_with("io.modelcontextprotocol/") {
                    if text.len() > 1 {
                        text.push(',');
                    }
                    text.push('"');
                    text.push_str(key.raw());
                    text.push_str("\":");
                    text.push_str(value.get());
                }
            }
            text.push('}');
            self.refresh = Some(Refresh {
                id: 0,
                meta: text,
                pages: 0,
                missing: HashSet::from([tool]),
            });
            if !self.ask_tools_page(None) {
                self.refresh = None;
                return Refusal::Answer;
            }
        }
        self.held_calls.push(held);
        Refusal::Held
    }

    /// Sends the refresh's next `tools/list` request, after `cursor` when given; false when
    /// it could not be made.
    fn ask_tools_page(&mut self, cursor: Option<&str>) -> bool {
        let id = self.next_refresh_id;
        self.next_refresh_id = id.checked_sub(1).unwrap_or(-1);
        let Some(refresh) = &mut self.refresh else {
            return false;
        };
        refresh.id = id;
        refresh.pages += 1;
        let mut params = format!("{{\"_meta\":{}", refresh.meta);
        if let Some(cursor) = cursor {
            params.push_str(",\"cursor\":");
            params.push_str(cursor);
        }
        params.push('}');
        let Ok(params) = RawJson::new(&params) else {
            return false;
        };
        let mut frame = Vec::new();
        jsonrpc::encode_request(&mut frame, Id::Int(id), "tools/list", Some(params));
        let posted = self.post(&frame).is_some();
        // (Its answer is taken by id, in `deliver`.)
        self.tools_list.remove(&id);
        posted
    }

    /// The refresh's `tools/list` page came (`None`: refused): learns its tools, then asks
    /// for the next page while held tools are still missing, or sends the held calls again.
    /// A refused page gives the held calls their refusals.
    fn refreshed(&mut self, now: Timestamp, result: Option<RawJson<'_>>) {
        let Some(result) = result else {
            return self.end_refresh(now, false);
        };
        self.tools.add(result);
        let Some(refresh) = &mut self.refresh else {
            return;
        };
        let listed = result.unique("tools");
        for tool in listed.into_iter().flat_map(|l| l.items()) {
            if let Some(name) = tool.unique_str("name") {
                refresh.missing.remove(name.to_str().as_ref());
            }
        }
        let cursor = result.unique("nextCursor").filter(|c| c.as_str().is_some());
        if let Some(cursor) = cursor
            && !refresh.missing.is_empty()
            && refresh.pages < MAX_REFRESH_PAGES
            && self.ask_tools_page(Some(cursor.get()))
        {
            return;
        }
        self.end_refresh(now, true);
    }

    /// Ends the refresh: the held calls still awaited go again (`resend`), or get their
    /// refusals.
    fn end_refresh(&mut self, now: Timestamp, resend: bool) {
        self.refresh = None;
        self.sweep = true;
        for held in std::mem::take(&mut self.held_calls) {
            if !self.conn.awaits_answer(held.id) {
                continue;
            }
            if resend {
                if self.resent.len() >= MAX_HELD_CALLS {
                    let conn = &self.conn;
                    self.resent.retain(|&n, _| conn.awaits_answer(n));
                }
                if let Some(sent_on) = self.post(&held.frame) {
                    self.resent.insert(held.id, sent_on);
                    continue;
                }
            }
            self.conn
                .handle_frame(now, StreamId(held.exchange.0), &held.refusal);
        }
    }

    /// The one request a POST exchange carried and still awaits, if it carried exactly one. (A
    /// GET that resumes its stream carried none: an error without an id there, such as a 409
    /// for a stream the server still holds, answers nothing.)
    fn only_request(&self, exchange: ExchangeId) -> Option<i64> {
        let ex = self.exchanges.get(&exchange)?;
        if ex.standalone || ex.method != "POST" || ex.awaiting.len() != 1 {
            return None;
        }
        ex.awaiting.first().copied()
    }

    /// Reads a `tools/list` result's annotations; returns the message rewritten without the
    /// tools the transport requires the client to reject, if there were any: those whose
    /// annotations are invalid, and those that cannot be read for sure, because their `name`
    /// or `inputSchema` is written twice (an application's parser that keeps the last one
    /// would read a schema never checked). A result whose `tools` is written twice keeps none
    /// of them, for the same reason.
    fn learn_tools(&mut self, id: Id<'_>, result: RawJson<'_>) -> Option<Vec<u8>> {
        let refused = self.tools.add(result);
        let repeated = |tool: &RawJson<'_>, key: &str| tool.get_unique(key).is_err();
        let lists = || (result.members()).filter(|(key, _)| key.eq_str("tools"));
        let ambiguous = lists().nth(1).is_some();
        let unreadable = lists()
            .flat_map(|(_, list)| list.items())
            .any(|tool| repeated(&tool, "name") || repeated(&tool, "inputSchema"));
        if refused.is_empty() && !ambiguous && !unreadable {
            return None;
        }
        let refused: HashSet<&str> = refused.iter().map(|(name, _)| name.as_str()).collect();
        let mut text = String::from("{");
        for (i, (key, value)) in result.members().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push('"');
            text.push_str(key.raw());
            text.push_str("\":");
            if key.eq_str("tools") {
                text.push('[');
                let mut first = true;
                for tool in value.items().filter(|_| !ambiguous) {
                    if repeated(&tool, "name") || repeated(&tool, "inputSchema") {
                        continue;
                    }
                    let name = tool
                        .unique_str("name")
                        .map(|n| n.to_str().into_owned())
                        .unwrap_or_default();
                    if refused.contains(name.as_str()) {
                        continue;
                    }
                    if !first {
                        text.push(',');
                    }
                    first = false;
                    text.push_str(tool.get());
                }
                text.push(']');
            } else {
                text.push_str(value.get());
            }
        }
        text.push('}');
        // (Valid JSON: the result's own members and items, as they were. Not checked again:
        // `RawJson::new` allows less nesting than the decoder that took the result, and a
        // result it refused was delivered whole, with the tools it must not hold.)
        let result = RawJson::validated(&text);
        let mut out = Vec::new();
        jsonrpc::encode_response(&mut out, id, result);
        Some(out)
    }

    /// Sends a refused POST again once the `Retry-After` of its refusal has passed, within
    /// the policy's attempts; false when they are used up.
    fn send_again(&mut self, now: Timestamp, exchange: ExchangeId) -> bool {
        let Some(ex) = self.exchanges.get_mut(&exchange) else {
            return false;
        };
        if ex.attempts >= self.policy.max_attempts {
            return false;
        }
        ex.attempts += 1;
        let delay = (ex.retry_after.take().unwrap_or_default()).max(MIN_RECONNECT_DELAY);
        ex.reading = Reading::Waiting;
        ex.head_at = None;
        ex.opened_at = None;
        // One with nothing to wait for is not let go while it waits (its limit starts again
        // when it goes out), and a DELETE still waits for it.
        if let Some(at) = ex.linger.take() {
            self.lingering.remove(&(at, exchange));
        }
        ex.unheard = !ex.asked;
        let initialized = matches!(
            self.decoder.decode(&ex.body),
            Ok(Decoded::Single(Message::Notification(n)))
                if n.method.eq_str("notifications/initialized")
        );
        self.resumes.push((now.after(delay), exchange));
        if initialized {
            // Requests wait for its head again: one that overtook it would be refused by a
            // strict server.
            self.initialized_pending = Some(exchange);
            self.get_pending_until = now.after(delay).after(GET_HEAD_WAIT);
        }
        true
    }

    /// After an exchange's body ended or broke: resume it if it can be, else end it.
    fn settle(
        &mut self,
        now: Timestamp,
        exchange: ExchangeId,
        failure: TransportFailure,
        jitter: u32,
    ) {
        // Ended twice by the host: it waits to go out again already.
        let waiting = self.resumes.iter().any(|(_, e)| *e == exchange)
            || self.queue.iter().any(|&(e, abort)| e == exchange && !abort);
        let Some(ex) = self.exchanges.get_mut(&exchange).filter(|_| !waiting) else {
            return;
        };
        let open = !ex.awaiting.is_empty() || ex.standalone;
        // 2026-07-28 streams are not resumed (a broken stream loses its request); handshake-era
        // ones are, with or without a session (event ids are unique per session, or per
        // client without one). The session's GET stream is opened again even without an
        // event id (plainly, then): it carries the server's requests and notifications for the
        // whole session ("Disconnection MAY occur at any time"), and one that broke before
        // its first event was lost for good. A stream that lived a while before it ended
        // starts its count of attempts again: a proxy that cuts idle streams, or a server
        // that ends a request's stream now and then for the client to poll (replaying no
        // event), must not use them up while each reconnection works. A while is a second for
        // a request's stream, whose request times out anyway, and the longest delay for the
        // GET stream, which lasts as long as the session.
        // (Not once the session ended: a resumption would go out without its id.)
        let handshake_era =
            (self.session.is_some() || self.conn.era() == Some(Era::Legacy)) && !self.ended;
        let resumable = (ex.reader.last_event_id().is_some() || ex.standalone) && handshake_era;
        // (Measured from this attempt's own head: a reopening that fails before its head
        // counts, however long the stream before it lived.)
        let lived = if ex.standalone {
            self.policy.max_delay.max(Duration::from_secs(1))
        } else {
            self.policy.initial_delay.max(Duration::from_secs(1))
        };
        if ex.opened_at.take().is_some_and(|t| now >= t.after(lived)) {
            ex.attempts = 0;
        }
        let attempt = if !(open && resumable) {
            None
        } else if ex.attempts < self.policy.max_attempts {
            ex.attempts += 1;
            Some(ex.attempts)
        } else if ex.standalone {
            // Its attempts used up, the session's GET stream is still opened again, once
            // per longest delay, for as long as the session lasts: given up, the server's
            // requests and notifications were lost without a word after an outage of a few
            // seconds (or a server that answers 409 while it holds the broken connection).
            Some(u32::MAX)
        } else {
            None
        };
        if let Some(attempt) = attempt {
            // (Never sooner than a refusal's `Retry-After` asked.)
            let delay = (self.policy.delay(attempt, ex.reader.retry(), jitter))
                .max(ex.retry_after.take().unwrap_or_default());
            let session = self.session.as_deref();
            let version = self.conn.protocol_version();
            ex.method = "GET";
            ex.body = Vec::new();
            ex.headers = owned(ex.reader.resume_headers(version, session));
            // Only a 404 to a request that named the session ends it.
            ex.with_session = session.is_some();
            ex.reading = Reading::Waiting;
            self.resumes.push((now.after(delay), exchange));
            return;
        }
        self.finish(now, exchange, failure);
    }

    /// Drops the resumptions whose requests all ended meanwhile (timed out, or cancelled): a
    /// server's long `retry` must not keep their exchanges (and their bodies) for nothing.
    fn forget_ended(&mut self) {
        let conn = &self.conn;
        let refresh = self.refresh.as_ref().map(|r| r.id);
        let exchanges = &mut self.exchanges;
        let mut ended = Vec::new();
        self.resumes.retain(|(_, e)| {
            let Some(ex) = exchanges.get_mut(e) else {
                return false;
            };
            ex.awaiting
                .retain(|&n| Some(n) == refresh || conn.awaits_answer(n));
            // (Nor a notification or an answer refused for now: it never waited for any.)
            if ex.standalone || !ex.asked || !ex.awaiting.is_empty() {
                return true;
            }
            ended.push(*e);
            false
        });
        // (A resumption is never lingering: it has requests to wait for.) It gives back its
        // place among the running requests.
        for e in ended {
            self.drop_exchange(e);
        }
    }

    /// Marks the exchanges that were sent for requests of ours which have all ended (answered
    /// on this stream or another, timed out, cancelled): each is let go [`LINGER`] later if
    /// the server has not ended it by then.
    fn find_done(&mut self) {
        if !std::mem::take(&mut self.sweep) {
            return;
        }
        // A refresh whose held calls all ended (timed out, cancelled) is needed no more: its
        // exchange is let go like any other whose requests ended.
        if self.refresh.is_some()
            && !(self.held_calls.iter()).any(|h| self.conn.awaits_answer(h.id))
        {
            self.refresh = None;
            self.held_calls.clear();
        }
        // One whose page no exchange waits for any more will not come: the held calls get
        // their refusals. (Every way an exchange ends is meant to say so; this is the net.)
        if let Some(id) = self.refresh.as_ref().map(|r| r.id)
            && !(self.exchanges.values()).any(|x| x.awaiting.contains(&id))
        {
            self.end_refresh(self.now, false);
        }
        // (Resumptions still waiting keep only open requests, or are dropped here.)
        self.forget_ended();
        let until = self.now.after(LINGER);
        let conn = &self.conn;
        let refresh = self.refresh.as_ref().map(|r| r.id);
        let mut withdrawn = Vec::new();
        for (&id, ex) in self.exchanges.iter_mut() {
            if !ex.asked || ex.standalone || ex.linger.is_some() {
                continue;
            }
            ex.awaiting
                .retain(|&n| Some(n) == refresh || conn.awaits_answer(n));
            if ex.awaiting.is_empty() {
                if ex.held {
                    // Its requests ended while it waited for a place: it never goes out.
                    withdrawn.push(id);
                } else {
                    linger_until(&mut self.lingering, id, ex, until);
                }
            }
        }
        for id in withdrawn {
            self.drop_exchange(id);
        }
    }

    /// Checks the client's own bookkeeping: the running and waiting counts against the
    /// exchanges they count, and that only exchanges that carry requests wait for a place.
    /// For tests and fuzzing; `Err` says what does not hold.
    #[doc(hidden)]
    pub fn check_counts(&self) -> Result<(), String> {
        let count =
            |f: &dyn Fn(&Exchange) -> bool| self.exchanges.values().filter(|x| f(x)).count();
        let requests = count(&|x| x.running && !x.reply && !x.note);
        let replies = count(&|x| x.running && x.reply);
        let notes = count(&|x| x.running && x.note);
        let waiting = count(&|x| x.reply && !x.running);
        let misplaced = count(&|x| x.held && (x.running || !x.asked));
        if (requests, replies, notes, waiting, misplaced)
            != (
                self.running_requests,
                self.running_replies,
                self.running_notes,
                self.waiting_replies,
                0,
            )
            || (notes > MAX_RUNNING_NOTIFICATIONS && !self.ended)
        {
            return Err(format!(
                "requests running {requests} (counted {}), replies running {replies} (counted \
                 {}), notifications running {notes} (counted {}), replies waiting {waiting} \
                 (counted {}), held but running or asking nothing {misplaced}",
                self.running_requests,
                self.running_replies,
                self.running_notes,
                self.waiting_replies
            ));
        }
        Ok(())
    }

    /// Forgets an exchange, with its entry in `lingering`.
    fn drop_exchange(&mut self, exchange: ExchangeId) -> Option<Exchange> {
        let ex = self.exchanges.remove(&exchange)?;
        if let Some(refresh) = &self.refresh
            && ex.awaiting.contains(&refresh.id)
        {
            // The refresh's page will not come: the held calls get their refusals.
            self.end_refresh(self.now, false);
        }
        if let Some(at) = ex.linger {
            self.lingering.remove(&(at, exchange));
        }
        if ex.running && ex.reply {
            self.running_replies -= 1;
            // The oldest reply waiting goes next.
            while let Some(next) = self.held.pop_front() {
                if self.exchanges.contains_key(&next) {
                    self.queue.push_back((next, false));
                    break;
                }
            }
        } else if ex.running && ex.note {
            self.running_notes -= 1;
            // The oldest notification waiting goes next.
            while let Some(next) = self.held_notes.pop_front() {
                if self.exchanges.contains_key(&next) {
                    self.queue.push_back((next, false));
                    break;
                }
            }
        } else if ex.running {
            self.running_requests -= 1;
            // The oldest request waiting goes next (one whose requests all ended meanwhile,
            // answered or not, never goes).
            let refresh = self.refresh.as_ref().map(|r| r.id);
            while let Some(next) = self.held_requests.pop_front() {
                let Some(x) = self.exchanges.get_mut(&next) else {
                    continue;
                };
                if !x.held {
                    continue;
                }
                x.held = false;
                let conn = &self.conn;
                if (x.awaiting.iter()).any(|&n| Some(n) == refresh || conn.awaits_answer(n)) {
                    self.queue.push_back((next, false));
                    break;
                }
                self.drop_exchange(next);
            }
        } else if ex.reply {
            self.waiting_replies -= 1;
        }
        Some(ex)
    }

    /// Whether `exchange`, with `more` bytes added to what it holds unfinished, takes the
    /// answers being read past [`HELD_BODY_FRAMES`] frames together. Only responses that bring
    /// answers count (the session's GET stream holds one event at most, and the others'
    /// bodies are cut to a short text), and only once this one holds more than
    /// [`SMALL_HELD_BODY`]: small answers cost no count.
    fn over_held_budget(&self, exchange: ExchangeId, more: usize, max_frame: usize) -> bool {
        let held = |x: &Exchange| if x.asked { x.held_unfinished() } else { 0 };
        let Some(ex) = self.exchanges.get(&exchange) else {
            return false;
        };
        held(ex).saturating_add(more) > SMALL_HELD_BODY
            && (self.exchanges.values())
                .map(held)
                .sum::<usize>()
                .saturating_add(more)
                > HELD_BODY_FRAMES.saturating_mul(max_frame).max(max_frame)
    }

    /// Ends an exchange: requests it still owed an answer fail.
    fn finish(&mut self, now: Timestamp, exchange: ExchangeId, failure: TransportFailure) {
        let Some(ex) = self.drop_exchange(exchange) else {
            return;
        };
        for n in ex.awaiting {
            self.conn.handle_failed_exchange(now, Id::Int(n), failure);
        }
        if ex.standalone && self.session.is_some() && !self.restart {
            // The GET stream could not be kept: the session goes on without it.
        }
    }

    /// The session is gone (an exchange got the 404): every exchange ends, and those the host
    /// is still running are aborted: a GET stream, POSTs in flight, and the one with the 404,
    /// whose body is still to come (a server that never ends it kept the host's task and
    /// connection for good, one more at each expiry).
    fn expire_session(&mut self, now: Timestamp) {
        self.session = None;
        let unsent: HashSet<ExchangeId> = self.queue.iter().map(|(e, _)| *e).collect();
        let waiting: HashSet<ExchangeId> = self.resumes.iter().map(|(_, e)| *e).collect();
        let ids: Vec<ExchangeId> = self.exchanges.keys().copied().collect();
        // (Nor replies or requests held for a place, nor the held DELETE: the host never had
        // them.)
        let held: HashSet<ExchangeId> = (self.held.iter().copied())
            .chain(self.held_notes.iter().copied())
            .chain(self.held_delete)
            .chain(
                self.exchanges
                    .iter()
                    .filter(|(_, x)| x.held)
                    .map(|(e, _)| *e),
            )
            .collect();
        let running: Vec<ExchangeId> = ids
            .iter()
            .copied()
            .filter(|e| !unsent.contains(e) && !waiting.contains(e) && !held.contains(e))
            .collect();
        for id in ids {
            self.finish(now, id, TransportFailure::Status(404));
        }
        // Aborts the host was still to be told of stay (a 101's exchange, one over the size
        // limit): only what was never sent goes.
        self.queue.retain(|&(_, abort)| abort);
        self.held_delete = None;
        self.queue.extend(running.into_iter().map(|e| (e, true)));
        self.held.clear();
        self.held_notes.clear();
        self.held_requests.clear();
        self.resumes.clear();
        self.tools_list.clear();
        // (Held calls got their refusals as the refresh's exchange ended above; the old
        // connection's other requests fail before the new one starts.)
        self.held_calls.clear();
        self.refresh = None;
        self.get_pending = None;
        self.initialized_pending = None;
        // A connection the application closed (or that ended) starts no new session, nor
        // does one whose session the application ended (a DELETE, or a request still in
        // flight, answered 404).
        // A session counts as used when the server answered a request of the application's
        // in it, or took an exchange of it and kept it a while: one it forgets again at once
        // each time, right after it took its `initialized` and opened its GET stream (then
        // refused the stream's reopening with 404), would otherwise be replaced for ever, a
        // new session a second with nothing asked of it.
        let lived = self.policy.max_delay.max(Duration::from_secs(1));
        let used = self.session_answered
            || (self.session_taken && now >= self.session_started.after(lived));
        self.empty_expiries = if used {
            0
        } else {
            self.empty_expiries.saturating_add(1)
        };
        if self.ended || matches!(self.conn.state(), State::Closing | State::Closed) {
            self.ended = true;
        } else if self.empty_expiries >= 2 {
            // Two new sessions in a row forgotten before anything was answered in them: a
            // third would only repeat it. The connection closes, as a failed handshake does.
            self.ended = true;
            self.conn.fail_transport(TransportFailure::Status(404));
        } else {
            self.restart = true;
        }
    }
}

/// A session id the client may adopt: not empty, at most
/// [`MAX_SESSION_ID`](super::client::MAX_SESSION_ID) bytes, and only visible ASCII (0x21 to
/// 0x7E), as the spec requires of servers. Any other is ignored as if none had come: echoed
/// in every later request, a control character would be refused by the host's HTTP library,
/// or worse, sent.
fn valid_session_id(sid: &str) -> bool {
    !sid.is_empty()
        && sid.len() <= super::client::MAX_SESSION_ID
        && sid.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// Sets when `ex` is let go, replacing the time it had.
fn linger_until(
    lingering: &mut BTreeSet<(Timestamp, ExchangeId)>,
    id: ExchangeId,
    ex: &mut Exchange,
    at: Timestamp,
) {
    if let Some(old) = ex.linger.replace(at) {
        lingering.remove(&(old, id));
    }
    lingering.insert((at, id));
}

fn owned(headers: Vec<(&'static str, String)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Config;

    /// The ids of 2026-07-28 `tools/list` requests awaiting their answer (whose tools' header
    /// annotations are kept) do not pile up: those that failed are let go. Every failed one
    /// stayed for the life of the client.
    #[test]
    fn failed_tools_lists_are_not_remembered_for_ever() {
        let mut config = Config::client("t", "1");
        config.versions = vec![ProtocolVersion::V2026_07_28];
        let mut now = Timestamp::ZERO;
        let mut c = HttpClient::new(config, now, ReconnectPolicy::default(), false).unwrap();
        let Some(ClientAction::Send { exchange, body, .. }) = c.poll_action() else {
            panic!("no server/discover");
        };
        let id: serde_json::Value =
            serde_json::from_slice::<serde_json::Value>(body).unwrap()["id"].clone();
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
        );
        let json = [("Content-Type", "application/json")];
        c.handle_response(now, exchange, 200, &json);
        c.handle_body(now, exchange, answer.as_bytes());
        c.handle_end(now, exchange, 0);
        while c.poll_event().is_some() {}
        for _ in 0..1_000 {
            now = now.after(Duration::from_millis(1));
            c.connection().request(now, "tools/list", None).unwrap();
            while let Some(action) = c.poll_action() {
                if let ClientAction::Send { exchange, .. } = action {
                    c.handle_response(now, exchange, 500, &[]);
                    c.handle_end(now, exchange, 0);
                }
            }
            while c.poll_event().is_some() {}
        }
        assert!(
            c.tools_list.len() <= 64,
            "{} remembered",
            c.tools_list.len()
        );
    }
}
