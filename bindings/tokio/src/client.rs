//! An MCP client over Streamable HTTP, on tokio and hyper.
//!
//! [`mcpwire::http::HttpClient`] decides which HTTP requests to make and what their answers
//! mean; [`Client`] makes them with hyper, one task per exchange, and feeds back statuses,
//! headers, body chunks, ends and failures, plus the time and jitter for reconnecting. Use it
//! for a command-line client, a test, or any tokio program that talks to an MCP server over
//! HTTP; [`Client::connection`] takes the commands, [`Client::next_event`] gives the events.
//!
//! It speaks plain `http://` only: no TLS, no headers of the application's own (an
//! `Authorization` for a protected server), and redirects are not followed (a 307 fails the
//! request with its status). Reach such a server through a local proxy, or drive
//! [`HttpClient`] with an HTTP stack that has them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use mcpwire::{Config, OwnedEvent};
//! use mcpwire::http::ReconnectPolicy;
//! use mcpwire_tokio::client::Client;
//!
//! let config = Config::client("my-host", "1.0");
//! let mut client = Client::new("http://127.0.0.1:3000/mcp", config, ReconnectPolicy::default())?;
//! while let Some(event) = client.next_event().await {
//!     match event {
//!         OwnedEvent::Ready { .. } => {
//!             let now = client.now();
//!             client.connection().request(now, "tools/list", None)?;
//!         }
//!         OwnedEvent::Response { result, .. } => {
//!             println!("{result}");
//!             break;
//!         }
//!         _ => {}
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcpwire::Timestamp;
use mcpwire::conn::{Config, ConfigError, Connection, OwnedEvent, State};
use mcpwire::http::{ClientAction, ExchangeId, HttpClient, ReconnectPolicy};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Why a [`Client`] could not be made.
#[derive(Debug)]
pub enum ClientError {
    /// The URL is not an `http://` URL hyper can use.
    Url(String),
    /// The configuration was refused.
    Config(ConfigError),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Url(u) => write!(f, "not a usable http:// URL: {u}"),
            ClientError::Config(e) => write!(f, "configuration refused: {e:?}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Reports (statuses, body chunks, ends) that may wait for the application.
const REPORTS_IN_FLIGHT: usize = 64;

/// The most body the client takes in, at the application's pace, between an engine deadline
/// and its timers (see [`Client::before_timer`]).
const BEFORE_TIMER_BYTES: usize = 256 << 10;

/// What an exchange's task reports.
enum Report {
    Response(ExchangeId, u16, Vec<(String, String)>),
    Body(ExchangeId, Bytes),
    End(ExchangeId),
    /// The exchange failed; the text says why (hyper's error and its causes).
    Failed(ExchangeId, String),
}

/// An MCP client connection over Streamable HTTP: the sans-IO [`HttpClient`] driven by
/// hyper on the current tokio runtime.
pub struct Client {
    http: HttpClient,
    url: hyper::Uri,
    hyper: HyperClient<HttpConnector, Full<Bytes>>,
    tasks: HashMap<ExchangeId, JoinHandle<()>>,
    /// The running POSTs and DELETEs without a response head yet: what they carry (a
    /// cancellation, a last answer, the session's end) may not have reached the server.
    unheard: HashSet<ExchangeId>,
    /// Why the last exchange that failed did (see [`Client::transport_error`]).
    transport_error: Option<String>,
    tx: mpsc::Sender<Report>,
    rx: mpsc::Receiver<Report>,
    /// The rest of a body chunk not fed yet, while the events its first pieces made wait for
    /// the application (a chunk may carry thousands). Fed before any later report.
    held: Option<(ExchangeId, Bytes)>,
    /// An engine deadline passed while a chunk was held: the timers fire once that chunk
    /// went in, and the reports that were waiting behind it then (this many, with at most
    /// [`BEFORE_TIMER_BYTES`] of body) after it, each a piece at a time. An answer already
    /// received is not timed out for the application's pace, and a stream whose chunks keep
    /// coming cannot hold the timers off (waiting for every report behind the chunk, it held
    /// them off until it ended).
    before_timer: Option<(usize, usize)>,
    /// How much of a chunk is fed at a time: a piece, and no more while the events it made
    /// wait, so that the server's notifications wait for the application (backpressure)
    /// instead of being dropped from a full queue (the engine bounds it by count and bytes).
    piece: usize,
    /// On tokio's clock, so that a runtime with paused time (a test) sees the engine's
    /// deadlines pass when its sleeps end.
    start: tokio::time::Instant,
}

/// How long the client keeps an idle connection for its next request: less than the 5 s after
/// which Node's and uvicorn's servers (the TypeScript and Python SDKs) close one. A POST sent
/// on a connection just as the server closes it fails (`Disconnected`), and a POST is not
/// sent again; hyper's default kept idle connections 90 s.
pub const IDLE_CONNECTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("exchanges", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of the MCP endpoint at `url` (`http://host:port/path`). The first request
    /// goes out with the first [`next_event`](Self::next_event).
    pub fn new(url: &str, config: Config, policy: ReconnectPolicy) -> Result<Client, ClientError> {
        let url: hyper::Uri = url.parse().map_err(|_| ClientError::Url(url.to_owned()))?;
        if url.scheme_str() != Some("http") || url.host().is_none() {
            return Err(ClientError::Url(url.to_string()));
        }
        let piece = config.limits.input_piece();
        let http =
            HttpClient::new(config, Timestamp::ZERO, policy, true).map_err(ClientError::Config)?;
        // Bounded: while the application does not ask for events, the exchanges stop reading
        // their bodies, and TCP slows the server down (backpressure, not buffering).
        let (tx, rx) = mpsc::channel(REPORTS_IN_FLIGHT);
        Ok(Client {
            http,
            url,
            hyper: HyperClient::builder(TokioExecutor::new())
                .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
                .pool_timer(TokioTimer::new())
                .build_http(),
            tasks: HashMap::new(),
            unheard: HashSet::new(),
            transport_error: None,
            tx,
            rx,
            held: None,
            before_timer: None,
            piece,
            start: tokio::time::Instant::now(),
        })
    }

    /// The time on the client's clock (since it was made), for commands that take one.
    pub fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// The MCP connection, for commands (`request`, `respond`, `cancel`, …). Their messages
    /// go out with the next [`next_event`](Self::next_event).
    pub fn connection(&mut self) -> &mut Connection {
        self.http.connection()
    }

    /// The sans-IO client underneath (session id, …).
    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    /// Why the last HTTP exchange that failed below HTTP did (no connection, a reset, a
    /// body cut short), as hyper's error and its causes: "client error (Connect): tcp connect
    /// error: Connection refused (os error 111)". `None` until one failed. Such a failure
    /// reaches the events only as [`TransportFailure::Disconnected`](mcpwire::conn::TransportFailure)
    /// or a stream that ended: show this next to it when you tell a person why.
    pub fn transport_error(&self) -> Option<&str> {
        self.transport_error.as_deref()
    }

    /// Sends what is due, then waits for the next event: answers, server requests, failures,
    /// the connection's end. `None` once the connection is closed and every event was given.
    /// Cancel-safe: dropping the future loses nothing (reports wait in the channel).
    pub async fn next_event(&mut self) -> Option<OwnedEvent> {
        loop {
            self.send_due();
            if let Some(event) = self.http.poll_event() {
                let event = event.to_owned_event();
                self.send_due();
                return Some(event);
            }
            if self.http.connection().state() == State::Closed {
                return None;
            }
            if self.held.is_some() {
                // The events were taken: the rest of the chunk, then the reports behind it
                // and the timers due meanwhile.
                let now = self.now();
                self.feed_held(now, false);
                if self.held.is_none() {
                    self.apply_waiting(now);
                }
                continue;
            }
            let wait = self.http.poll_timeout().map(|t| {
                std::time::Duration::from_nanos(t.as_nanos().saturating_sub(self.now().as_nanos()))
            });
            let report = match wait {
                Some(wait) => tokio::select! {
                    // What the exchanges reported first: an answer already here is taken
                    // before the deadline it came late for (`apply_then_timers`).
                    biased;
                    r = self.rx.recv() => r,
                    () = tokio::time::sleep(wait) => None,
                },
                None => self.rx.recv().await,
            };
            let now = self.now();
            match report {
                Some(report) => self.apply_then_timers(now, report),
                None => self.http.handle_timeout(now),
            }
        }
    }

    /// Ends a handshake-era session politely: its `DELETE` goes out (once the notifications
    /// and answers sent before it, a `close`'s cancellations say, have reached the server)
    /// and is waited for, up to `limit`, or until the engine lets it go (a server that never
    /// answers it, or never ends its answer:
    /// [`UNAWAITED_HEAD_LIMIT`](mcpwire::http::UNAWAITED_HEAD_LIMIT) and
    /// [`LINGER`](mcpwire::http::LINGER)). Called while `initialize` has no answer yet, it
    /// waits for that answer and sends the DELETE with the session id it brings. Without a
    /// session it returns at once (see [`flush`](Self::flush)). What the
    /// other exchanges report and the engine's timers do meanwhile is taken in as usual:
    /// answers that arrive and requests that time out are handed out by
    /// [`next_event`](Self::next_event). Dropping the client afterwards closes every exchange
    /// still open.
    pub async fn end_session(&mut self, limit: std::time::Duration) {
        // The engine holds the DELETE back until the POSTs sent before it have their heads
        // (a cancellation must not be overtaken), and forgets it once it ends or fails, or
        // once it lets it go. One owed to a session that `initialize` is about to make has
        // no exchange yet.
        match self.http.end_session() {
            Some(delete) => {
                self.drive_while(limit, |http| http.has_exchange(delete))
                    .await;
            }
            None => self.drive_while(limit, HttpClient::is_ending_session).await,
        }
    }

    /// Waits, up to `limit`, until every notification and answer sent has reached the server
    /// (its response head came), or the engine let it go: the cancellations that a `close`
    /// sent, say. Call it before the program exits: dropped with the runtime, those still on
    /// their way are cut off. [`end_session`](Self::end_session) does this for a session;
    /// a server that keeps none needs this. Events that come meanwhile wait for
    /// [`next_event`](Self::next_event).
    pub async fn flush(&mut self, limit: std::time::Duration) {
        self.drive_while(limit, HttpClient::has_unheard).await;
    }

    /// Sends what is due and takes in reports and timers while `busy` holds, up to `limit`.
    async fn drive_while(
        &mut self,
        limit: std::time::Duration,
        busy: impl Fn(&HttpClient) -> bool,
    ) {
        self.send_due();
        // (`Duration::MAX` means no limit, not an overflow.)
        let deadline = tokio::time::Instant::now() + limit.min(crate::http::FAR_FUTURE);
        while busy(&self.http) {
            // Checked here too: while the other exchanges' reports keep coming, the biased
            // select below takes them and never the timer.
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            // A chunk held back for room goes in whole: the events wait for `next_event`,
            // which this loop does not hand out (a full queue then drops notifications).
            if self.held.is_some() {
                let now = self.now();
                self.feed_held(now, true);
            }
            let timer = self.http.poll_timeout().map_or(deadline, |at| {
                let wait = at.as_nanos().saturating_sub(self.now().as_nanos());
                let at =
                    tokio::time::Instant::now().checked_add(std::time::Duration::from_nanos(wait));
                at.map_or(deadline, |at| at.min(deadline))
            });
            tokio::select! {
                biased;
                report = self.rx.recv() => {
                    if let Some(report) = report {
                        let now = self.now();
                        self.apply_then_timers(now, report);
                    }
                }
                () = tokio::time::sleep_until(timer) => {
                    if timer >= deadline {
                        break;
                    }
                    let now = self.now();
                    self.http.handle_timeout(now);
                }
            }
            self.send_due();
        }
    }

    /// Applies `report` and the reports already waiting behind it (at most a channel's
    /// worth), then fires the timers already due. An answer takes several reports (head,
    /// body, end) and is only complete at its end: when the loop comes late, all of them are
    /// here, and the answer is taken rather than timed out for the loop's lateness. Reports
    /// that keep coming cannot hold the timers off.
    fn apply_then_timers(&mut self, now: Timestamp, report: Report) {
        self.apply(now, report);
        self.apply_waiting(now);
    }

    /// Applies the reports already waiting (at most a channel's worth, and none past a chunk
    /// held back for room), then fires the timers already due: an answer already received
    /// is not timed out for the loop's lateness. While a chunk is held, the timers wait for
    /// it and, within a bound, for the reports behind it ([`Client::before_timer`]).
    fn apply_waiting(&mut self, now: Timestamp) {
        let mut budget = self.before_timer.take();
        let mut taken = 0;
        while self.held.is_none() {
            match budget {
                Some((0, _) | (_, 0)) => break,
                None if taken + 1 >= REPORTS_IN_FLIGHT => break,
                _ => {}
            }
            let Ok(report) = self.rx.try_recv() else {
                break;
            };
            let body = match &report {
                Report::Body(_, bytes) => bytes.len(),
                _ => 0,
            };
            self.apply(now, report);
            taken += 1;
            if let Some((reports, bytes)) = budget.as_mut() {
                *reports -= 1;
                *bytes = bytes.saturating_sub(body);
            }
        }
        let due = budget.is_some() || self.http.poll_timeout().is_some_and(|at| at <= now);
        if self.held.is_some() {
            if budget.is_some() {
                self.before_timer = budget;
            } else if due {
                self.before_timer = Some((self.rx.len(), BEFORE_TIMER_BYTES));
            }
            return;
        }
        if due {
            self.http.handle_timeout(now);
        }
    }

    /// Feeds `bytes` of `exchange`'s body a piece at a time while no event waits, holding
    /// the rest back (see [`Client::held`]).
    fn feed_body(&mut self, now: Timestamp, exchange: ExchangeId, mut bytes: Bytes) {
        while !bytes.is_empty() {
            if self.http.connection().pending_events() > 0 {
                self.held = Some((exchange, bytes));
                return;
            }
            let piece = bytes.split_to(self.piece.min(bytes.len()));
            self.http.handle_body(now, exchange, &piece);
        }
    }

    /// Feeds the chunk held back, as far as no event waits, or whole when `all`.
    fn feed_held(&mut self, now: Timestamp, all: bool) {
        let Some((exchange, bytes)) = self.held.take() else {
            return;
        };
        if all {
            self.http.handle_body(now, exchange, &bytes);
        } else {
            self.feed_body(now, exchange, bytes);
        }
    }

    fn apply(&mut self, now: Timestamp, report: Report) {
        match report {
            Report::Response(exchange, status, headers) => {
                self.unheard.remove(&exchange);
                let views: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                self.http.handle_response(now, exchange, status, &views);
            }
            Report::Body(exchange, bytes) => self.feed_body(now, exchange, bytes),
            Report::End(exchange) => {
                self.tasks.remove(&exchange);
                self.unheard.remove(&exchange);
                self.http.handle_end(now, exchange, jitter());
            }
            Report::Failed(exchange, why) => {
                self.transport_error = Some(why);
                self.tasks.remove(&exchange);
                self.unheard.remove(&exchange);
                self.http.handle_error(now, exchange, jitter());
            }
        }
    }

    /// Starts every request the client wants made, and aborts what it gave up.
    fn send_due(&mut self) {
        while let Some(action) = self.http.poll_action() {
            match action {
                ClientAction::Abort { exchange } => {
                    self.unheard.remove(&exchange);
                    if let Some(task) = self.tasks.remove(&exchange) {
                        task.abort();
                    }
                }
                ClientAction::Send {
                    exchange,
                    method,
                    headers,
                    body,
                } => {
                    let mut request = Request::builder().method(method).uri(self.url.clone());
                    for (name, value) in headers {
                        request = request.header(name.as_str(), value.as_str());
                    }
                    let request = request.body(Full::new(Bytes::copy_from_slice(body)));
                    if method != "GET" {
                        self.unheard.insert(exchange);
                    }
                    let hyper = self.hyper.clone();
                    let tx = self.tx.clone();
                    let task = tokio::spawn(async move {
                        let request = match request {
                            Ok(r) => r,
                            Err(e) => {
                                let why = format!("the request could not be built: {e}");
                                let _ = tx.send(Report::Failed(exchange, why)).await;
                                return;
                            }
                        };
                        exchange_task(hyper, request, exchange, tx).await;
                    });
                    if let Some(old) = self.tasks.insert(exchange, task) {
                        old.abort();
                    }
                }
            }
        }
    }
}

/// How long a POST or DELETE without a response head goes on after its client is dropped.
const UNHEARD_AFTER_DROP: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for Client {
    /// Closes every exchange, except that a POST or DELETE without a response head yet goes
    /// on alone for up to two seconds (while the runtime runs): cut at once, the cancellations
    /// that a `close` sent for requests in flight, or a last answer, would not reach the
    /// server (a connection closed with unread data is reset). Each ends as its head comes.
    fn drop(&mut self) {
        let runtime = tokio::runtime::Handle::try_current().ok();
        for (exchange, task) in self.tasks.drain() {
            match &runtime {
                Some(runtime) if self.unheard.contains(&exchange) => {
                    runtime.spawn(async move {
                        tokio::time::sleep(UNHEARD_AFTER_DROP).await;
                        task.abort();
                    });
                }
                _ => task.abort(),
            }
        }
    }
}

/// One HTTP exchange: the request, then the status, headers and body chunks as they come.
async fn exchange_task(
    hyper: HyperClient<HttpConnector, Full<Bytes>>,
    request: Request<Full<Bytes>>,
    exchange: ExchangeId,
    tx: mpsc::Sender<Report>,
) {
    let response = match hyper.request(request).await {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Report::Failed(exchange, causes(&e))).await;
            return;
        }
    };
    let headers = response
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let status = response.status().as_u16();
    if tx
        .send(Report::Response(exchange, status, headers))
        .await
        .is_err()
    {
        return;
    }
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data()
                    && tx.send(Report::Body(exchange, data)).await.is_err()
                {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Report::Failed(exchange, causes(&e))).await;
                return;
            }
        }
    }
    let _ = tx.send(Report::End(exchange)).await;
}

/// An error and its causes, joined with ": " (hyper's own message rarely says what broke).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// A random value for reconnection jitter.
fn jitter() -> u32 {
    getrandom::u32().unwrap_or(u32::MAX / 2)
}
