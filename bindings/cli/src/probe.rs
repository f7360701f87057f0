//! `mcpwire probe`: start any stdio MCP server and show what it offers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::driver::{Ev, Session, Stop};
use mcpwire::conn::{ClientEra, CloseReason, Config, TransportFailure, ViolationKind};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::{Era, ProtocolVersion};

/// Exit codes, documented in `mcpwire help`.
pub const EXIT_OK: i32 = 0;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_SPAWN: i32 = 3;
pub const EXIT_PROTOCOL: i32 = 4;
pub const EXIT_EXITED: i32 = 5;
pub const EXIT_TIMEOUT: i32 = 6;
pub const EXIT_CALL_FAILED: i32 = 7;
/// The server does not speak the protocol version or era asked for (it refused the
/// handshake's version, or has no stateless era): nothing is broken, the two just do not meet.
pub const EXIT_VERSION: i32 = 8;
/// The server refused what the probe asked: an HTTP error status without an answer
/// (credentials wanted, a Host it does not accept, an internal error), or a JSON-RPC error to
/// the handshake. The server works; it said no.
pub const EXIT_REFUSED: i32 = 9;

pub struct Options {
    /// `None` for auto.
    pub protocol: Option<ProtocolVersion>,
    pub timeout: Duration,
    pub json: bool,
    pub call: Option<(String, String)>,
    /// A stdio server to start, or…
    pub command: Vec<String>,
    /// …the URL of a Streamable HTTP server.
    pub url: Option<String>,
}

/// Why a probe stopped early: the exit code and a sentence naming what the server did.
pub struct Failure {
    pub code: i32,
    pub message: String,
}

fn fail(code: i32, message: impl Into<String>) -> Failure {
    Failure {
        code,
        message: message.into(),
    }
}

/// What the probe found, printed at the end (partially, on failure).
#[derive(Default)]
pub struct Report {
    pub version: Option<ProtocolVersion>,
    pub era: Option<Era>,
    pub server_info: Option<Value>,
    pub instructions: Option<String>,
    pub capabilities: Option<Value>,
    pub lists: Vec<(String, Vec<Value>, usize)>,
    pub ping_ms: Option<f64>,
    pub call: Option<Value>,
    pub latencies: Vec<(String, f64)>,
    pub warnings: Vec<String>,
    /// About how many bytes of JSON the kept list items hold (see [`MAX_LIST_BYTES`]).
    pub list_bytes: usize,
}

pub fn config(protocol: Option<ProtocolVersion>, timeout: Duration) -> Config {
    let mut config = Config::client("mcpwire-probe", env!("CARGO_PKG_VERSION"));
    if let Some(v) = protocol {
        config.versions = vec![v];
        config.client_era = if v.era() == Era::Modern {
            ClientEra::Modern
        } else {
            ClientEra::Legacy
        };
    }
    config.request_timeout = timeout;
    config.discover_timeout = timeout.min(Duration::from_secs(5));
    config
}

/// A short, printable excerpt of the line the server got wrong, from the end of its output
/// (which may hold more lines after it): the last line that is not JSON (`not_json`); else
/// the last one carrying `id`, when the message had one; else the last one that is no
/// JSON-RPC message; else the last non-blank one.
fn excerpt(bytes: &[u8], not_json: bool, id: Option<&mcpwire::jsonrpc::OwnedId>) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines = text.lines().rev().filter(|l| !l.trim().is_empty());
    let parsed = |l: &str| serde_json::from_str::<Value>(l).ok();
    let wanted = id.map(|id| match id {
        mcpwire::jsonrpc::OwnedId::Int(n) => Value::from(*n),
        mcpwire::jsonrpc::OwnedId::Str(_) => {
            serde_json::from_str(&id.as_id().to_string()).unwrap_or(Value::Null)
        }
    });
    let rpc_like = |v: &Value| {
        v["jsonrpc"] == "2.0"
            && (v["method"].is_string()
                || (v.get("id").is_some()
                    && (v.get("result").is_some() != v.get("error").is_some())))
    };
    let line = if not_json {
        lines.clone().find(|l| parsed(l).is_none())
    } else if let Some(wanted) = wanted {
        lines
            .clone()
            .find(|l| parsed(l).is_some_and(|v| v.get("id") == Some(&wanted)))
    } else {
        lines
            .clone()
            .find(|l| parsed(l).is_some_and(|v| !rpc_like(&v)))
    }
    .or_else(|| lines.clone().next())
    .unwrap_or("");
    let mut s: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        s.push('…');
    }
    s
}

/// `: "…"` with [`excerpt`]'s line; when there is none (over HTTP the driver keeps no copy
/// of what the server wrote), the message's id if it had one, else nothing.
fn quoted(bytes: &[u8], not_json: bool, id: Option<&mcpwire::jsonrpc::OwnedId>) -> String {
    let line = excerpt(bytes, not_json, id);
    match id {
        _ if !line.is_empty() => format!(": {line:?}"),
        Some(id) => format!(" (id {})", id.as_id()),
        None => String::new(),
    }
}

/// Turns an engine event that ends the session into a failure.
fn fatal(session: &mut Session, ev: &Ev, waiting_for: &str) -> Option<Failure> {
    match ev {
        Ev::Violation { kind, id, .. } => match kind {
            ViolationKind::Parse(reason) => Some(fail(
                EXIT_PROTOCOL,
                format!(
                    "the server wrote something that is not JSON on stdout ({reason:?}){}",
                    quoted(&session.last_input(), true, None)
                ),
            )),
            ViolationKind::InvalidMessage(reason) => Some(fail(
                EXIT_PROTOCOL,
                format!(
                    "the server sent an invalid JSON-RPC message ({reason:?}){}",
                    quoted(&session.last_input(), false, id.as_ref())
                ),
            )),
            ViolationKind::UnknownResponse => Some(fail(
                EXIT_PROTOCOL,
                format!(
                    "the server answered a request that was never sent{}",
                    quoted(&session.last_input(), false, id.as_ref())
                ),
            )),
            ViolationKind::FrameTooLong => Some(fail(
                EXIT_PROTOCOL,
                "the server sent a line longer than the frame limit",
            )),
            _ => None,
        },
        Ev::Failed { reason, .. } => Some(transport_failure(session, *reason, waiting_for)),
        Ev::Closed { reason } => Some(match reason {
            CloseReason::Eof => closed_early(session, waiting_for),
            CloseReason::UnsupportedVersion(v) => fail(
                EXIT_VERSION,
                format!("the server chose protocol version {v}, which was not offered"),
            ),
            CloseReason::VersionRefused { supported } => fail(
                EXIT_VERSION,
                format!(
                    "the server refused {waiting_for}: it does not support the protocol version \
                     asked for (-32022); it supports {supported}"
                ),
            ),
            CloseReason::InitializeRejected { code, message }
                if waiting_for == "server/discover" =>
            {
                // An unknown method (-32601), or "not before initialize" (-32600, as
                // handshake-era servers answer anything before it): no stateless era.
                let why = if *code == -32601 {
                    "as an unknown method (-32601)".to_owned()
                } else {
                    format!("with JSON-RPC error {code}")
                };
                fail(
                    EXIT_VERSION,
                    format!(
                        "the server does not speak the stateless era (2026-07-28): it refused \
                         server/discover {why}{}",
                        said(message)
                    ),
                )
            }
            CloseReason::InitializeRejected { code, message } => fail(
                EXIT_REFUSED,
                format!(
                    "the server refused {waiting_for} (JSON-RPC error {code}){}",
                    said(message)
                ),
            ),
            // A handshake-era server refuses the stateless request it does not know (400,
            // 404, 405, …); one that wants credentials (401, 403, 407) or less traffic (429)
            // refuses it for that, whatever it speaks.
            CloseReason::TransportFailed(TransportFailure::Status(status))
                if waiting_for == "server/discover"
                    && (400..500).contains(status)
                    && !matches!(status, 401 | 403 | 407 | 429) =>
            {
                fail(
                    EXIT_VERSION,
                    format!(
                        "the server does not speak the stateless era (2026-07-28): it refused \
                         server/discover with HTTP {status} and no JSON-RPC answer"
                    ),
                )
            }
            CloseReason::TransportFailed(reason) => {
                transport_failure(session, *reason, waiting_for)
            }
            CloseReason::InvalidInitializeResult => fail(
                EXIT_PROTOCOL,
                "the server's answer to initialize / server/discover is malformed",
            ),
            CloseReason::InitializeTimedOut => {
                gone_quietly(session, waiting_for).unwrap_or_else(|| {
                    fail(EXIT_TIMEOUT, format!("no answer to {waiting_for} in time"))
                })
            }
            other => fail(EXIT_PROTOCOL, format!("the connection ended: {other:?}")),
        }),
        Ev::InvalidResponse { .. } => Some(fail(
            EXIT_PROTOCOL,
            format!("the server's answer to {waiting_for} has an unknown resultType"),
        )),
        _ => None,
    }
}

/// What a refusal's message adds to the sentence naming it: `: "the message"`, quoted with
/// control characters escaped (a server's text must not drive the terminal), or nothing when
/// the server said nothing.
fn said(message: &str) -> String {
    if message.trim().is_empty() {
        String::new()
    } else {
        format!(": {message:?}")
    }
}

/// The server's output ended before the answer to `waiting_for`: it exited, or was killed
/// because it stopped reading what we wrote (see `driver::Watch`).
fn closed_early(session: &mut Session, waiting_for: &str) -> Failure {
    let status = session
        .try_status()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    if session.stopped_reading() {
        return stopped_reading(waiting_for, &status);
    }
    fail(
        EXIT_EXITED,
        format!("the server closed its output before answering {waiting_for}{status}"),
    )
}

/// An HTTP exchange that failed without a JSON-RPC answer; with an error status, the start
/// of the body that came with it (an HTML page says more than its status).
fn transport_failure(session: &Session, reason: TransportFailure, waiting_for: &str) -> Failure {
    let mut failure = transport_failure_alone(reason, waiting_for);
    if let TransportFailure::Status(_) = reason
        && let Some(text) = session.failure_text()
    {
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut short: String = text.chars().take(160).collect();
        if text.chars().count() > 160 {
            short.push('…');
        }
        failure
            .message
            .push_str(&format!("; the body said {short:?}"));
    }
    failure
}

fn transport_failure_alone(reason: TransportFailure, waiting_for: &str) -> Failure {
    match reason {
        TransportFailure::Status(401) => fail(
            EXIT_REFUSED,
            format!(
                "{waiting_for} was refused with {reason}: the server wants credentials, and \
                 mcpwire probe sends none"
            ),
        ),
        TransportFailure::Status(403) => fail(
            EXIT_REFUSED,
            format!(
                "{waiting_for} was refused with {reason}: the server wants credentials (mcpwire \
                 probe sends none), or does not accept this Host (DNS rebinding protection: \
                 try the address the server was told to allow)"
            ),
        ),
        TransportFailure::Status(202) => fail(
            EXIT_PROTOCOL,
            format!(
                "{waiting_for} got HTTP 202 Accepted, which answers only notifications and \
                 responses: a request's answer comes as application/json or text/event-stream"
            ),
        ),
        TransportFailure::Status(200..=299) => fail(
            EXIT_PROTOCOL,
            format!(
                "{waiting_for} got {reason}: the body was neither application/json nor \
                 text/event-stream"
            ),
        ),
        TransportFailure::StreamEnded => fail(
            EXIT_PROTOCOL,
            format!(
                "{waiting_for} could not get through: {reason} (a body that holds no JSON-RPC \
                 answer, or one cut short)"
            ),
        ),
        TransportFailure::Status(400..=599) => fail(
            EXIT_REFUSED,
            format!("{waiting_for} was refused with {reason}"),
        ),
        TransportFailure::Disconnected => fail(
            EXIT_EXITED,
            format!(
                "{waiting_for} could not get through: {reason} (the server closed it, or exited)"
            ),
        ),
        _ => fail(
            EXIT_PROTOCOL,
            format!("{waiting_for} could not get through: {reason}"),
        ),
    }
}

/// Checks that the server at `url` (an `http://` URL) accepts a TCP connection within
/// `timeout`, so that an unreachable one is reported as such, with the system's reason (the
/// HTTP client only says that the connection failed).
fn reachable(url: &str, timeout: Duration) -> Result<(), Failure> {
    use std::net::{TcpStream, ToSocketAddrs};
    let Some(rest) = url.strip_prefix("http://") else {
        return Ok(()); // the client refuses it with its own message
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let has_port = match host_port.rfind(']') {
        Some(end) => host_port[end..].contains(':'),
        None => host_port.contains(':'),
    };
    let target = if has_port {
        host_port.to_owned()
    } else {
        format!("{host_port}:80")
    };
    // A URL with an `@` shows nothing before it: credentials with a `/` in them end the
    // authority early (`http://u:pass/word@host`), and the target is then part of them.
    let shown = if url.contains('@') {
        without_userinfo(url)
    } else {
        target.clone()
    };
    let unreachable = |e: std::io::Error| fail(EXIT_SPAWN, format!("cannot reach {shown}: {e}"));
    let addrs: Vec<_> = (target.to_socket_addrs())
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidInput {
                // (Not a host and port at all, `h:99999` say: the command line's fault.)
                fail(
                    EXIT_USAGE,
                    format!("--url {shown}: not a host and port: {e}"),
                )
            } else {
                unreachable(e)
            }
        })?
        .collect();
    let mut last = std::io::Error::other("the name has no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(unreachable(last))
}

/// `url` with everything before its last `@` (up to any `?` or `#`, the scheme kept) replaced
/// by `***`, for messages: the credentials, whatever they hold (a token with a `/` in it) and
/// with or without the `//`. A path with an `@` is masked too, which costs nothing.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = match url.split_once("//") {
        Some((scheme, rest)) => (&url[..scheme.len() + 2], rest),
        None => ("", url),
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// Whether an `http://` URL carries credentials (`user:password@`).
fn has_userinfo(url: &str) -> bool {
    url.split_once("//")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .is_some_and(|authority| authority.contains('@'))
}

/// Answers what a server asks of the probe (it declares no capabilities, so nothing is owed).
fn refuse_server_requests(conn: &mut mcpwire::Connection, ev: &Ev) {
    if let Ev::Request { id, .. } = ev {
        let _ = conn.respond_error(
            id.as_id(),
            -32601,
            "the probe offers no client features",
            None,
        );
    }
}

/// Whether an event ends the probe (what `fatal` then explains).
fn is_fatal(ev: &Ev) -> bool {
    match ev {
        Ev::Violation { kind, .. } => matches!(
            kind,
            ViolationKind::Parse(_)
                | ViolationKind::InvalidMessage(_)
                | ViolationKind::UnknownResponse
                | ViolationKind::FrameTooLong
        ),
        Ev::Closed { .. } | Ev::InvalidResponse { .. } => true,
        _ => false,
    }
}

/// How waiting for an answer ended.
enum Outcome {
    Result(Value),
    /// An answer the engine took (valid JSON) that serde_json cannot hold (a number past
    /// `f64`, such as `1e400`): why.
    Unreadable(String),
    RpcError(i64, String),
    /// 2026-07-28: the server needs the client's input first (`input_required`).
    NeedsInput,
    Ended(Ev),
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}

/// Turns how a wait ended into the probe's verdict.
fn verdict(
    session: &mut Session,
    outcome: Result<Outcome, Stop>,
    waiting_for: &str,
    timeout: Duration,
) -> Result<Result<Value, (i64, String)>, Failure> {
    match outcome {
        Ok(Outcome::Result(v)) => Ok(Ok(v)),
        // (It read as `null`: a failed call's `isError` unseen, the probe said success.)
        Ok(Outcome::Unreadable(why)) => Err(fail(
            EXIT_PROTOCOL,
            format!("the answer to {waiting_for} cannot be read into a report: {why}"),
        )),
        Ok(Outcome::RpcError(code, message)) => Ok(Err((code, message))),
        Ok(Outcome::NeedsInput) => Err(fail(
            EXIT_CALL_FAILED,
            format!(
                "the server needs input from the client to answer {waiting_for} \
                 (input_required: elicitation, sampling or roots), which probe does not give"
            ),
        )),
        Ok(Outcome::Ended(Ev::TimedOut { .. })) => Err(gone_quietly(session, waiting_for)
            .unwrap_or_else(|| {
                fail(
                    EXIT_TIMEOUT,
                    format!(
                        "no answer to {waiting_for} within {} s",
                        timeout.as_secs_f64()
                    ),
                )
            })),
        Ok(Outcome::Ended(ev)) => Err(fatal(session, &ev, waiting_for).unwrap_or_else(|| {
            fail(
                EXIT_PROTOCOL,
                format!("the connection failed during {waiting_for}"),
            )
        })),
        Err(Stop::Eof) => Err(closed_early(session, waiting_for)),
        Err(Stop::Deadline) => Err(gone_quietly(session, waiting_for)
            .unwrap_or_else(|| fail(EXIT_TIMEOUT, format!("no answer to {waiting_for} in time")))),
        // (Reported as the signal it was, once the server is stopped.)
        Err(Stop::Signal) => Err(fail(
            EXIT_EXITED,
            format!("stopped by a signal during {waiting_for}"),
        )),
    }
}

/// The server was killed because a write to it waited past the timeout (`driver::Watch`).
fn stopped_reading(waiting_for: &str, status: &str) -> Failure {
    fail(
        EXIT_TIMEOUT,
        format!(
            "the server stopped reading its input while we wrote to it (waiting for \
             {waiting_for}); it was stopped{status}"
        ),
    )
}

/// At a timeout: a stdio server that exited without its output closing (a process it
/// started still holds it open) has gone, not run slow. One killed because it stopped
/// reading is reported as that: the write that waited keeps the timers from firing, so the
/// request's timeout may come due before the end of its output is read.
fn gone_quietly(session: &mut Session, waiting_for: &str) -> Option<Failure> {
    if session.stopped_reading() {
        // (Killed: its status comes in a moment, if not yet.)
        let status = session
            .try_status()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        return Some(stopped_reading(waiting_for, &status));
    }
    let status = session.exited()?;
    // Its output may have ended with it, its end not read yet (the loop came late): a moment
    // tells which, and only an output still open is a lingering process's.
    let ended = session.run_until(Duration::from_millis(300), |_, _, _| None::<()>);
    if matches!(ended, Err(Stop::Eof)) {
        return Some(closed_early(session, waiting_for));
    }
    Some(fail(
        EXIT_EXITED,
        format!(
            "the server exited ({status}) before answering {waiting_for}; a process it started \
             still holds its output open"
        ),
    ))
}

/// Waits for the handshake (or discovery).
pub fn connect(
    session: &mut Session,
    timeout: Duration,
    report: &mut Report,
) -> Result<(), Failure> {
    let started = session.elapsed();
    // Auto mode may probe, time out and fall back: allow for both waits.
    let limit = timeout * 2 + Duration::from_secs(6);
    let outcome = session.run_until(limit, |conn, _, ev| {
        refuse_server_requests(conn, &ev);
        match ev {
            Ev::Ready { version: v } => Some(Outcome::Result(json!(v.as_str()))),
            ev if is_fatal(&ev) => Some(Outcome::Ended(ev)),
            _ => None,
        }
    });
    // The request that opened the session: the stateless era's probe, or the handshake.
    let waiting_for = if session.conn().config().client_start_era() == Some(Era::Modern) {
        "server/discover"
    } else {
        "initialize"
    };
    verdict(session, outcome, waiting_for, timeout)?.map_err(|(code, message)| {
        fail(EXIT_PROTOCOL, format!("handshake failed: {code} {message}"))
    })?;
    let v = session
        .conn()
        .protocol_version()
        .unwrap_or(ProtocolVersion::LATEST_LEGACY);
    report.version = Some(v);
    report.era = session.conn().era();
    let step = if v.era() == Era::Modern {
        "server/discover"
    } else {
        "initialize"
    };
    report
        .latencies
        .push((step.into(), ms(session.elapsed() - started)));
    report.server_info = session
        .conn()
        .peer_info()
        .and_then(|i| serde_json::from_str(i.get()).ok());
    report.instructions = session.conn().peer_instructions().map(str::to_owned);
    // Unreadable (a number past `f64`), they were dropped, and with them every list.
    report.capabilities = match session.conn().peer_capabilities() {
        Some(c) => Some(serde_json::from_str(c.raw().get()).map_err(|e| {
            fail(
                EXIT_PROTOCOL,
                format!("the server's capabilities cannot be read into a report: {e}"),
            )
        })?),
        None => None,
    };
    Ok(())
}

/// Sends one request and waits for its answer; records its latency.
pub fn call(
    session: &mut Session,
    report: &mut Report,
    method: &str,
    params: Option<&str>,
    timeout: Duration,
) -> Result<Result<Value, (i64, String)>, Failure> {
    let params = match params {
        Some(p) => {
            Some(RawJson::new(p).map_err(|e| fail(EXIT_USAGE, format!("invalid JSON: {e}")))?)
        }
        None => None,
    };
    let now = session.now();
    let started = session.elapsed();
    let id = session
        .conn()
        .request(now, method, params)
        .map_err(|e| fail(EXIT_PROTOCOL, format!("cannot send {method}: {e}")))?;
    let outcome = session.run_until(timeout + Duration::from_secs(1), |conn, _, ev| {
        refuse_server_requests(conn, &ev);
        match ev {
            Ev::Response { request, result } if request == id => {
                Some(match serde_json::from_str(&result) {
                    Ok(v) => Outcome::Result(v),
                    Err(e) => Outcome::Unreadable(e.to_string()),
                })
            }
            Ev::Error {
                request,
                code,
                message,
                ..
            } if request == id => Some(Outcome::RpcError(code, message)),
            // Nothing more comes for it: waiting out the timeout would report a timeout.
            Ev::InputRequired { request: r, .. } if r == id => Some(Outcome::NeedsInput),
            Ev::TimedOut { request: r } if r == id => {
                Some(Outcome::Ended(Ev::TimedOut { request: r }))
            }
            Ev::Abandoned { request: r } if r == id => Some(Outcome::Ended(Ev::Closed {
                reason: CloseReason::Eof,
            })),
            // Over HTTP: an error status without an answer, a failed connection, a stream
            // that ended early. The engine says so at once; waiting out the timeout would
            // only hide why.
            Ev::Failed { request: r, reason } if r == id => {
                Some(Outcome::Ended(Ev::Failed { request: r, reason }))
            }
            ev if is_fatal(&ev) => Some(Outcome::Ended(ev)),
            _ => None,
        }
    });
    let answer = verdict(session, outcome, method, timeout)?;
    report
        .latencies
        .push((method.to_owned(), ms(session.elapsed() - started)));
    Ok(answer)
}

/// The most pages of one list followed (a server may page for ever).
const MAX_PAGES: usize = 100;

/// The most items of one list kept: each page may be as large as a frame (16 MiB), and a
/// frame of empty objects parses into millions of values.
const MAX_ITEMS: usize = 100_000;

/// The most bytes of list items kept over the whole probe (about: see [`json_size`]). The
/// item count alone let a server that pages large items (a description just under the
/// frame's 16 MiB, on each of 100 pages) hold gigabytes; the report needs far less.
const MAX_LIST_BYTES: usize = 32 << 20;

/// About what keeping `v` costs, and printing it in the report at nesting `depth`: a `Value`
/// for each node, its text (escapes not counted), and the indentation of its line in the
/// `--json` report. (Its text alone let an item of a million empty arrays, 3 MB, take 32 MB
/// as `Value`s and over 10 MB pretty-printed: the budget let the report reach gigabytes.)
fn json_size(v: &Value, depth: usize) -> usize {
    let node = std::mem::size_of::<Value>() + 2 * depth + 2;
    node + match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(|v| json_size(v, depth + 1)).sum::<usize>(),
        Value::Object(o) => (o.iter())
            .map(|(k, v)| k.len() + 4 + json_size(v, depth + 1))
            .sum::<usize>(),
    }
}

/// Lists everything a list method returns, following `nextCursor`.
fn list_all(
    session: &mut Session,
    report: &mut Report,
    method: &str,
    key: &str,
    timeout: Duration,
) -> Result<(), Failure> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }).to_string());
        let result = call(session, report, method, params.as_deref(), timeout)?;
        pages += 1;
        let result = match result {
            Ok(result) => result,
            // (See `explore`: a server may have no templates to list.)
            Err((code, message)) if method == "resources/templates/list" => {
                report
                    .warnings
                    .push(format!("{method} failed: {code} {message}"));
                break;
            }
            Err((code, message)) => {
                return Err(fail(
                    EXIT_PROTOCOL,
                    format!("{method} failed: {code} {message}"),
                ));
            }
        };
        match result.get(key).and_then(Value::as_array) {
            Some(list) => {
                let mut full = None;
                for item in list {
                    if items.len() >= MAX_ITEMS {
                        full = Some(format!("{MAX_ITEMS} items"));
                        break;
                    }
                    let size = json_size(item, 2); // (the report's lists are at depth 2)
                    if report.list_bytes + size > MAX_LIST_BYTES {
                        full = Some(format!("{} MiB of lists", MAX_LIST_BYTES >> 20));
                        break;
                    }
                    report.list_bytes += size;
                    items.push(item.clone());
                }
                if let Some(what) = full {
                    report.warnings.push(format!(
                        "{method}: stopped after {what}; the server offers more"
                    ));
                    break;
                }
            }
            None => {
                return Err(fail(
                    EXIT_PROTOCOL,
                    format!("the server's {method} result has no {key} array"),
                ));
            }
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
        if pages >= MAX_PAGES {
            report.warnings.push(format!(
                "{method}: stopped after {MAX_PAGES} pages; the server offers more"
            ));
            break;
        }
    }
    report.lists.push((key.to_owned(), items, pages));
    Ok(())
}

/// The whole probe, after the handshake.
pub fn explore(session: &mut Session, opts: &Options, report: &mut Report) -> Result<(), Failure> {
    let caps = report.capabilities.clone().unwrap_or(Value::Null);
    let has = |k: &str| caps.get(k).is_some_and(|v| !v.is_null());
    if has("tools") {
        list_all(session, report, "tools/list", "tools", opts.timeout)?;
    }
    if has("resources") {
        list_all(session, report, "resources/list", "resources", opts.timeout)?;
        // Optional: many servers with resources have no templates, and some answer -32601
        // (the SDKs' low-level servers without a handler for it). Their error is a warning,
        // not a failure that would leave the prompts unlisted and the call unmade.
        list_all(
            session,
            report,
            "resources/templates/list",
            "resourceTemplates",
            opts.timeout,
        )?;
    }
    if has("prompts") {
        list_all(session, report, "prompts/list", "prompts", opts.timeout)?;
    }
    if report.era == Some(Era::Legacy) {
        let started = session.elapsed();
        match call(session, report, "ping", None, opts.timeout)? {
            Ok(_) => report.ping_ms = Some(ms(session.elapsed() - started)),
            Err((code, message)) => report
                .warnings
                .push(format!("ping failed: {code} {message}")),
        }
    }
    if let Some((name, args)) = &opts.call {
        // Sent as written: read into a `Value` and written again, a large integer became a
        // float, and duplicate keys and the order of keys changed.
        RawJson::new(args)
            .map_err(|e| fail(EXIT_USAGE, format!("--call arguments are not JSON: {e:?}")))?;
        // A server without tools cannot run the call: the call failed (7); the engine's
        // refusal to send it read as a protocol failure (4), which the server did not commit.
        if !has("tools") {
            return Err(fail(
                EXIT_CALL_FAILED,
                format!("cannot call {name:?}: the server offers no tools (no tools capability)"),
            ));
        }
        let name = Value::String(name.clone());
        let params = format!(r#"{{"name":{name},"arguments":{args}}}"#);
        match call(session, report, "tools/call", Some(&params), opts.timeout)? {
            Ok(result) => {
                let is_error = result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                report.call = Some(result);
                if is_error {
                    return Err(fail(
                        EXIT_CALL_FAILED,
                        format!("the tool {name} reported an error"),
                    ));
                }
            }
            Err((code, message)) => {
                return Err(fail(
                    EXIT_CALL_FAILED,
                    format!("tools/call {name} failed: {code} {message}"),
                ));
            }
        }
    }
    Ok(())
}

pub fn print_human(report: &Report) {
    crate::out::print(&human(report));
}

/// The report as `print_human` prints it.
/// `text` from the server, safe to print on a terminal: control characters (an escape
/// sequence that would set the title or move the cursor, a carriage return that would
/// overwrite the line, a newline that would fake one) are written as escapes.
fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().collect()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

fn human(report: &Report) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let t = &mut text;
    let line = |t: &mut String, k: &str, v: &str| {
        let _ = writeln!(t, "{k:<14}{v}");
    };
    if let Some(info) = &report.server_info {
        let name = clean(info.get("name").and_then(Value::as_str).unwrap_or("?"));
        let version = clean(info.get("version").and_then(Value::as_str).unwrap_or("?"));
        line(t, "server", &format!("{name} {version}"));
    }
    if let Some(v) = report.version {
        let era = match v.era() {
            Era::Legacy => "handshake era",
            Era::Modern => "stateless era",
        };
        line(t, "protocol", &format!("{v} ({era})"));
    }
    if let Some(i) = &report.instructions {
        let first: String = i.lines().next().unwrap_or("").chars().take(100).collect();
        line(t, "instructions", &clean(&first));
    }
    if let Some(c) = &report.capabilities {
        // (JSON escapes C0 controls only: DEL and C1 ones, such as CSI, would reach the
        // terminal.)
        line(t, "capabilities", &clean(&c.to_string()));
    }
    for (key, items, pages) in &report.lists {
        let pages = if *pages > 1 {
            format!(", {pages} pages")
        } else {
            String::new()
        };
        let _ = writeln!(t, "{key} ({}{pages})", items.len());
        for item in items {
            let name = item
                .get("name")
                .or_else(|| item.get("uri"))
                .or_else(|| item.get("uriTemplate"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            let desc = item
                .get("description")
                .or_else(|| item.get("uri"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let desc: String = desc.lines().next().unwrap_or("").chars().take(70).collect();
            let (name, desc) = (clean(name), clean(&desc));
            let _ = writeln!(t, "  {name:<32}{desc}");
        }
    }
    if let Some(p) = report.ping_ms {
        line(t, "ping", &format!("ok ({p} ms)"));
    }
    if let Some(c) = &report.call {
        line(t, "call result", &clean(&c.to_string()));
    }
    if !report.latencies.is_empty() {
        let _ = writeln!(t, "latency");
    }
    for (method, ms) in &report.latencies {
        let _ = writeln!(t, "  {method:<32}{ms} ms");
    }
    for w in &report.warnings {
        let _ = writeln!(t, "warning: {}", clean(w));
    }
    text
}

pub fn to_json(report: &Report, error: Option<&Failure>) -> Value {
    let mut out = json!({
        "protocolVersion": report.version.map(|v| v.as_str()),
        "era": report.era.map(|e| match e { Era::Legacy => "handshake", Era::Modern => "stateless" }),
        "serverInfo": report.server_info,
        "instructions": report.instructions,
        "capabilities": report.capabilities,
        "ping": report.ping_ms.map(|ms| json!({"ok": true, "ms": ms})),
        "call": report.call,
        "latencies": report.latencies.iter().map(|(m, ms)| json!({"method": m, "ms": ms})).collect::<Vec<_>>(),
        "warnings": report.warnings,
    });
    for (key, items, _) in &report.lists {
        out[key] = Value::Array(items.clone());
    }
    if let Some(f) = error {
        out["error"] = json!({"exitCode": f.code, "message": f.message});
    }
    out
}

pub fn run(opts: Options) -> i32 {
    let config = config(opts.protocol, opts.timeout);
    let mut report = Report::default();
    let session = match &opts.url {
        Some(url) => Session::connect_http(url, config)
            .map_err(|e| {
                let url = without_userinfo(url);
                fail(EXIT_USAGE, format!("cannot use {url}: {e}"))
            })
            .and_then(|session| {
                if has_userinfo(url) {
                    report.warnings.push(
                        "the credentials in the URL are not sent (mcpwire probe sends none)"
                            .to_owned(),
                    );
                }
                reachable(url, opts.timeout).map(|()| session)
            }),
        None => Session::spawn(&opts.command, config, false).map_err(|e| {
            fail(
                EXIT_SPAWN,
                format!("cannot start {:?}: {e}", opts.command.join(" ")),
            )
        }),
    };
    let mut signalled = None;
    let outcome = session.and_then(|mut session| {
        let outcome = connect(&mut session, opts.timeout, &mut report)
            .and_then(|()| explore(&mut session, &opts, &mut report));
        // (Looked at before the shutdown's wait: a signal that ends that wait, the user
        // tired of a server slow to exit, does not replace the verdict already reached.)
        signalled = crate::signals::caught();
        let _ = session.shutdown();
        outcome
    });
    // Stopped by a signal (passed on to the server, whose end then ended the probe): say so
    // rather than blame the server, and end as a shell reports it.
    let outcome = match (outcome, signalled) {
        (Err(_), Some(signal)) => Err(fail(
            128 + signal,
            if opts.url.is_some() {
                format!("stopped by signal {signal}")
            } else {
                format!("stopped by signal {signal} (passed on to the server)")
            },
        )),
        (outcome, _) => outcome,
    };
    match outcome {
        Ok(()) => {
            if opts.json {
                crate::out::line(format_args!(
                    "{}",
                    serde_json::to_string_pretty(&to_json(&report, None)).unwrap_or_default()
                ));
            } else {
                print_human(&report);
            }
            EXIT_OK
        }
        Err(f) => {
            if opts.json {
                crate::out::line(format_args!(
                    "{}",
                    serde_json::to_string_pretty(&to_json(&report, Some(&f))).unwrap_or_default()
                ));
            } else {
                print_human(&report);
            }
            say!("error: {}", clean(&f.message));
            f.code
        }
    }
}
