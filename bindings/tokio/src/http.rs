//! Streamable HTTP over HTTP/1.1: [`serve`] runs an [`HttpServer`] and your [`Application`]
//! on a [`TcpListener`] until a shutdown future completes.
//!
//! How it is put together:
//!
//! - One [`Mutex`] holds the engine and the application. It is taken for a few microseconds at
//!   a time (one request, one drain of a stream, one timer step) and never held across an
//!   `await`.
//! - A [`Notify`] is woken after every change, so that SSE bodies waiting for bytes and the
//!   timer task (waiting for the earliest deadline) look again.
//! - hyper parses HTTP/1.1. It answers malformed framing itself (400 for two different
//!   `Content-Length`s or a `Transfer-Encoding` whose last coding is not `chunked`, 431 for a
//!   head over [`HostConfig::max_head_size`]) and closes the connection. A request carrying
//!   both `Transfer-Encoding: chunked` and `Content-Length` is read by its chunked framing, as
//!   RFC 9112 §6.1 allows, and hyper closes the connection after the answer, so nothing after
//!   it on that connection is ever read as a request. Any other `Transfer-Encoding` (`gzip,
//!   chunked`, …) gets 400 here: the engine takes plain bodies only.
//! - SSE responses are streaming bodies; when hyper drops one before its end (the client went
//!   away) the engine hears [`HttpServer::stream_closed`].

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::header::{
    CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER,
};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use mcpwire::Timestamp;
use mcpwire::http::{Body, HttpRequest, HttpResponse, HttpServer, HttpStreamId};
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

/// Your MCP server's logic: answers the events the engine hands out and runs its own timers.
///
/// Implement it for the state of your server and pass it to [`serve`]. Every method is called
/// with the engine's lock held, so keep them short and never block in them: anything slow
/// (a database, another service) should run on a task of its own and answer through the
/// [`HostHandle`] that [`started`](Self::started) gives.
///
/// A panic in [`drive`](Self::drive) or [`handle_timeout`](Self::handle_timeout) stops in the
/// host: the panic hook reports it, the HTTP request being served gets a 500 and the engine
/// drops that request's stream (as when a client goes away), and the host serves on, timers
/// included. Events the panicking call had already taken from the engine are lost with it.
/// A panic in [`poll_timeout`](Self::poll_timeout) counts as "no deadline" that time.
pub trait Application: Send + 'static {
    /// Answers every event [`HttpServer::poll_event`] has and then calls
    /// [`HttpServer::pump`]. Called after every request, after a stream closes and after the
    /// timers fire.
    fn drive(&mut self, now: Timestamp, server: &mut HttpServer);

    /// The next time [`handle_timeout`](Self::handle_timeout) has work, if any. The default has
    /// no timers.
    fn poll_timeout(&self) -> Option<Timestamp> {
        None
    }

    /// Runs the application's work that is due at `now`. The host calls
    /// [`drive`](Self::drive) right after it.
    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        let _ = (now, server);
    }

    /// Called once, as the host is made ([`serve`], [`McpService::new`]) and before any
    /// request, with the [`HostHandle`] that work ending outside the host's calls answers
    /// through: keep it, and give a clone to each task that answers later (a task started
    /// here may use it at once: its `with` waits until `started` has returned). The default
    /// drops it.
    fn started(&mut self, handle: HostHandle<Self>)
    where
        Self: Sized,
    {
        let _ = handle;
    }
}

/// The way back into a running host for work that ends outside its calls: a tool that
/// answers after a database query on a task of its own, a progress report, a notification
/// of the server's own. [`Application::started`] gives one ([`McpService::handle`] another);
/// clones are cheap and may go to any task. It does not keep the host alive: once [`serve`]
/// has returned (or the last [`McpService`] and its timers are gone), [`with`](Self::with)
/// returns `None`.
pub struct HostHandle<A: Application> {
    shared: Weak<Shared<A>>,
}

impl<A: Application> Clone for HostHandle<A> {
    fn clone(&self) -> Self {
        HostHandle {
            shared: self.shared.clone(),
        }
    }
}

impl<A: Application> HostHandle<A> {
    /// Runs `f` on the application and the engine, with the engine's lock held and the
    /// current time, then does what the host does after a request: [`Application::drive`],
    /// moving what was answered onto its SSE streams (waking them), and looking again at the
    /// deadlines (a change `f` makes to [`Application::poll_timeout`] takes effect). Answer a
    /// request with [`HttpServer::connection`] and the key its event came with; a client
    /// that left meanwhile makes that `None`. Returns what `f` returns, or `None` when the
    /// host is gone.
    ///
    /// Keep `f` short, as the application's own methods, and never call this from them, nor
    /// from `started` (they hold the lock already: it would wait for good). A panic in `f`
    /// goes on to the caller, after the streams it changed are woken.
    pub fn with<R>(&self, f: impl FnOnce(&mut A, &mut HttpServer, Timestamp) -> R) -> Option<R> {
        let shared = self.shared.upgrade()?;
        let (out, woken) = {
            let mut guard = shared.lock();
            let st = &mut *guard;
            let now = shared.now();
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                f(&mut st.app, &mut st.server, now)
            }));
            st.run_app(now, false);
            // (A store's panic is reported by the panic hook; the streams it changed wake at
            // the next change.)
            (out, contained(|| st.woken()).unwrap_or_default())
        };
        woken.into_iter().for_each(Waker::wake);
        shared.changed.notify_waiters();
        match out {
            Ok(r) => Some(r),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Limits and timeouts of the host. [`HostConfig::default`] suits a server exposed to
/// untrusted clients; tests shorten the timeouts.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The path the MCP endpoint is served on; any other path gets 404. Default `/mcp`.
    pub path: String,
    /// TCP connections served at once. At the cap, a new connection takes the place of the
    /// one that has been idle longest, which is closed: one between two requests (closed as
    /// a keep-alive connection is, after what it was sending, however slowly its client
    /// reads it, or at once when its client has read nothing of it for a second), or one
    /// that has not sent a byte since it was accepted. One whose next request began to
    /// arrive less than a second ago (on Linux, also one whose next request waits unread in
    /// the kernel) is passed over while another can go: closing it would lose that request
    /// (not a head that hyper read while the previous answer was still going out: HTTP
    /// pipelining, which MCP clients do not use). So sockets left open cannot lock other
    /// clients out. Only when every connection is serving a request (GET streams held open,
    /// say) does a new one get `503 Service Unavailable` with `Retry-After: 1`, at once,
    /// rather than wait unanswered in the kernel's accept queue. Default 1024.
    ///
    /// Keep it below the process's limit on open files (`ulimit -n`, often 1024 as a soft
    /// limit), with room for the other descriptors: `mcpwire serve` raises its soft limit
    /// (within the hard one) to fit, and lowers this where the hard limit is too low. When
    /// `accept` runs out of descriptors anyway, new clients wait in the kernel's queue until
    /// connections close.
    pub max_connections: usize,
    /// How long a response may make no progress: when the client stops reading and nothing
    /// more of an answer or an SSE stream can be written for this long, the connection is
    /// closed and what it held is freed (a stream's client resumes with `Last-Event-ID`). It
    /// is counted from the moment a write could not proceed, not over the whole response, so
    /// a long SSE stream is never cut while its client reads. A stalled write counts as going
    /// again once the client has taken 64 KiB ([`SEND_WINDOW`]), or all that was offered at
    /// once, within the timeout: a client that reads a trickle (a few KiB now and then, which
    /// would keep its connection and its answer's buffers for hours) is cut too. Default
    /// 30 s.
    pub send_timeout: Duration,
    /// How long a client may take to send a complete request head, counted from the moment
    /// the connection waits for one: right after it is accepted, and after each response on a
    /// kept-alive connection. So it is also the idle keep-alive timeout. The connection is
    /// closed without an answer when it passes. Default 10 s.
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request body, once its head is in. 408 and the
    /// connection closed when it passes. Default 30 s.
    pub body_read_timeout: Duration,
    /// The slowest pace a request body may keep, in bytes per second, once
    /// [`body_rate_grace`](Self::body_rate_grace) has passed: averaged from the moment its
    /// head was in, and also from any moment on, less what the body was ahead of the rate
    /// then, counting at most the grace's worth of it ahead (at least a second's): a body
    /// sent fast that stops before its end is cut a grace or two later, not when the bytes
    /// it sent stop carrying the average. A body that falls behind gets 408 and the
    /// connection closed, without waiting for `body_read_timeout`. A connection whose body
    /// is arriving is in a request, which [`max_connections`](Self::max_connections) never
    /// displaces, and its bytes count in [`max_body_total`](Self::max_body_total); without
    /// this, a cap's worth of bodies trickled a byte at a time (or sent almost whole and
    /// stalled) would lock new clients out for the whole body timeout. Lower it for clients
    /// on very slow links; 0 turns it off. Default 240 (the default of ASP.NET Core's
    /// Kestrel, which averages from the start only).
    pub min_body_rate: u64,
    /// How long a body may arrive at any pace before `min_body_rate` applies (TCP's slow
    /// start), and how long a body ahead of the rate may pause once it does. Default 5 s.
    pub body_rate_grace: Duration,
    /// The largest request head (request line and headers) in bytes; a larger one gets 431 and
    /// the connection closed. hyper reads into a buffer of at least 8192 bytes whatever this
    /// is, so up to that much may be buffered before a smaller limit is enforced. Default
    /// 64 KiB.
    pub max_head_size: usize,
    /// The most header lines in a request; more get 431. Default 100; at most 1,000 (a
    /// larger value is taken as that: hyper sets aside room for this many at every request).
    pub max_headers: usize,
    /// The largest request body in bytes; a larger one gets 413, and the connection is closed
    /// after it. The rest of such a body is read and dropped first, up to four times the
    /// limit (at least 16 MiB), so that a client still sending reads the 413 rather than a
    /// reset connection; a body declared (`Content-Length`) or grown larger than that is
    /// refused at once. Default 4 MiB.
    pub max_body: usize,
    /// The most bytes the request bodies being read may hold together, over all connections
    /// (each body counts until the engine has taken it). A body that would go past it gets
    /// `503 Service Unavailable` with `Retry-After: 1` and the connection closed, its rest
    /// read and dropped as for `max_body`. Without it, the peak is `max_connections` times
    /// `max_body` (4 GiB by default) from clients that each send one large body at once. At
    /// least `max_body`; default 64 MiB. (A body in several pieces is copied into one buffer
    /// that starts at no more than twice what has come, and doubles as it grows, declared
    /// length or not: a body's buffer may hold up to twice its size, for a moment three times
    /// while it grows, so the memory behind this total may reach about twice it.)
    pub max_body_total: usize,
    /// After the shutdown future completes: how long in-flight requests and SSE streams of
    /// POST requests may take to finish. A kept-alive connection is closed at once when
    /// idle, and once its answer is out when a request has begun to arrive on it (part of
    /// its head read, or bytes waiting): such a request is answered, not cut off. GET
    /// streams (a session's stream for unrelated messages) end as soon as what they hold is
    /// written; the client resumes them elsewhere with `Last-Event-ID`. 2026-07-28
    /// `subscriptions/listen` streams get their result and end likewise. When the grace
    /// period is over, every stream still open ends (a normal end of the chunked body, not a
    /// reset), and [`serve`] returns at most one second later, dropping connections that
    /// still have not finished. Default 10 s.
    pub shutdown_grace: Duration,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            path: "/mcp".to_owned(),
            max_connections: 1024,
            send_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            min_body_rate: 240,
            body_rate_grace: Duration::from_secs(5),
            max_head_size: 64 * 1024,
            max_headers: 100,
            max_body: 4 * 1024 * 1024,
            max_body_total: 64 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Far enough in the future to stand for "never" (`Duration::MAX` overflows a clock).
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The most header lines [`HostConfig::max_headers`] takes: hyper sets aside room for that
/// many (32 bytes each, twice) at every attempt to parse a head, whatever the head holds.
const MAX_HEADERS: usize = 1_000;

impl HostConfig {
    /// The values the host runs with: an extreme one (a limit of `usize::MAX`, a timeout of
    /// `Duration::MAX`) taken as the nearest that works, rather than a panic or an
    /// allocation of that size at every request.
    fn workable(mut self) -> Self {
        self.max_connections = self.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        self.max_headers = self.max_headers.min(MAX_HEADERS);
        self.header_read_timeout = self.header_read_timeout.min(FAR_FUTURE);
        self.max_body_total = self.max_body_total.max(self.max_body);
        self
    }
}

/// Where the host is in its life.
const RUNNING: u8 = 0;
/// The shutdown future completed: no new connections, GET and listen streams end.
const DRAINING: u8 = 1;
/// The grace period is over: every stream ends.
const GRACE_OVER: u8 = 2;

struct State<A> {
    server: HttpServer,
    app: A,
    /// The SSE bodies waiting for their stream to change, by stream: each is woken when the
    /// engine names its stream ([`HttpServer::poll_woken`]), so a request wakes the streams
    /// it gave bytes to, not every open one.
    parked: HashMap<HttpStreamId, Waker>,
}

impl<A: Application> State<A> {
    /// Moves what the application answered onto its streams, and takes the wakers of the
    /// streams that changed: wake them once the lock is released. Called before every
    /// release of the lock that may have changed a stream.
    fn woken(&mut self) -> Vec<Waker> {
        self.server.pump();
        std::iter::from_fn(|| self.server.poll_woken())
            .filter_map(|id| self.parked.remove(&id))
            .collect()
    }

    /// Runs application code on the engine (`drive`, or the timers' `handle_timeout` then
    /// `drive`). A panic in it stops here: the panic hook has reported it, the engine is as
    /// the application left it, and the host goes on, so one bad request cannot end the
    /// timers task or take a stream's cleanup with it. Returns whether the code returned.
    fn run_app(&mut self, now: Timestamp, timers: bool) -> bool {
        let State { server, app, .. } = self;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if timers {
                app.handle_timeout(now, server);
            }
            app.drive(now, server);
        }))
        .is_ok()
    }
}

/// Runs engine code that may run a store's (an `EventStore`, a `SessionStore`): `None` when
/// it panicked (the panic hook has reported it).
fn contained<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// The application's next deadline. A panic in its `poll_timeout` counts as none (the panic
/// hook has reported it), so that it cannot take a request or the timers task down with it.
fn app_timeout<A: Application>(app: &A) -> Option<Timestamp> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| app.poll_timeout()))
        .ok()
        .flatten()
}

struct Shared<A> {
    state: Mutex<State<A>>,
    /// Woken (`notify_waiters`) for the timer task: after every change that may move a
    /// deadline earlier than it sleeps until, and when the phase changes.
    changed: Arc<Notify>,
    /// The deadline (in [`Timestamp`] nanoseconds) the timer task sleeps until: `u64::MAX`
    /// for none, 0 while it is not asleep. Written and read under the lock.
    armed: AtomicU64,
    /// On tokio's clock, which the timer task sleeps on: with paused time (a test) the
    /// engine sees its deadlines pass when the sleeps end (on the system clock it did not,
    /// and the task spun).
    start: tokio::time::Instant,
    phase: AtomicU8,
    config: HostConfig,
    /// The bytes held by the request bodies being read ([`HostConfig::max_body_total`]).
    bodies: AtomicUsize,
}

impl<A: Application> Shared<A> {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// The lock. A panic in the application while it was held leaves the engine as it was at
    /// that point; the host carries on with it rather than failing every later request.
    fn lock(&self) -> MutexGuard<'_, State<A>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    /// Moves the host to `phase`: every waiting stream looks again (GET streams end while
    /// draining, and 2026-07-28 `subscriptions/listen` streams end with their result; all
    /// streams once the grace period is over).
    fn set_phase(&self, phase: u8) {
        self.phase.store(phase, Ordering::Release);
        let parked = {
            let mut st = self.lock();
            if phase == DRAINING {
                // (A store's panic is reported by the panic hook; the shutdown goes on.)
                let _ = contained(|| st.server.end_listen_streams());
            }
            std::mem::take(&mut st.parked)
        };
        parked.into_values().for_each(Waker::wake);
        self.changed.notify_waiters();
    }

    fn deadline(&self, t: Timestamp) -> tokio::time::Instant {
        self.start + Duration::from_nanos(t.as_nanos())
    }
}

/// Fills `buf` from the operating system's CSPRNG (session ids).
fn random_fill(buf: &mut [u8]) {
    if getrandom::fill(buf).is_err() {
        // getrandom(2) missing or failing: /dev/urandom is the same source.
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(buf))
            .expect("no random source for session ids");
    }
}

type HostBody<A> = Either<Full<Bytes>, SseBody<A>>;

/// The body of [`McpService`]'s responses: a complete body, or an SSE stream the engine feeds
/// (it ends when the stream finishes; dropping it unfinished tells the engine the client left).
pub struct McpBody<A: Application> {
    body: HostBody<A>,
    /// [`serve`]'s count of the connection's requests, held until the body goes.
    _active: Option<Active>,
}

impl<A: Application> HttpBody for McpBody<A> {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The MCP endpoint as a hyper [`Service`](hyper::service::Service), for a host that runs its
/// own hyper server (its own listener, TLS, HTTP/2, routing). [`serve`] is built on it. It
/// answers every request it is given as the MCP endpoint: route only the endpoint's path to
/// it. Clones share one engine.
///
/// ```no_run
/// # use mcpwire::http::{HttpServer, HttpServerConfig};
/// # use mcpwire_tokio::http::{Application, HostConfig, McpService};
/// # struct MyApp;
/// # impl Application for MyApp { fn drive(&mut self, _: mcpwire::Timestamp, s: &mut HttpServer) { s.pump() } }
/// # async fn run(config: mcpwire::Config, stream: tokio::net::TcpStream) {
/// let (service, timers) = McpService::new(HttpServer::new(HttpServerConfig::new(config)), MyApp, HostConfig::default());
/// let timers = tokio::spawn(timers); // abort it when the service is no longer used
/// let io = hyper_util::rt::TokioIo::new(stream);
/// let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service.clone()).await;
/// # }
/// ```
pub struct McpService<A: Application> {
    shared: Arc<Shared<A>>,
}

impl<A: Application> Clone for McpService<A> {
    fn clone(&self) -> Self {
        McpService {
            shared: self.shared.clone(),
        }
    }
}

impl<A: Application> McpService<A> {
    /// A service for the engine `server` and the application `app`, and the future that fires
    /// their timers: spawn it on the runtime, and abort it once the service is no longer used.
    /// Of `config`, only the body settings apply here (`max_body`, `max_body_total`,
    /// `body_read_timeout`, `min_body_rate`, `body_rate_grace`), and the engine's own
    /// (keep-alive, sessions). The path is not checked (route to the service yourself); the
    /// head limits (`header_read_timeout`, `max_head_size`, `max_headers`), `send_timeout`
    /// (a client that stops reading is cut off only by the server that writes to it),
    /// `max_connections` and `shutdown_grace` belong to the server that runs the service
    /// (yours; [`serve`] applies them to its own).
    pub fn new(
        server: HttpServer,
        app: A,
        mut config: HostConfig,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        config.path = String::new();
        Self::build(server, app, config)
    }

    /// [`new`](Self::new), checking the path when `config.path` is not empty.
    fn build(
        server: HttpServer,
        app: A,
        config: HostConfig,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                server,
                app,
                parked: HashMap::new(),
            }),
            changed: Arc::new(Notify::new()),
            armed: AtomicU64::new(0),
            start: tokio::time::Instant::now(),
            phase: AtomicU8::new(RUNNING),
            config: config.workable(),
            bodies: AtomicUsize::new(0),
        });
        // Once the host exists, so that a task `started` spawns finds it (it waits for the
        // lock until `started` returns).
        let handle = HostHandle {
            shared: Arc::downgrade(&shared),
        };
        shared.lock().app.started(handle);
        let timers = run_timers(shared.clone());
        (McpService { shared }, timers)
    }

    /// Begins a graceful shutdown: standalone GET streams end at once, `subscriptions/listen`
    /// streams end with their result, and answers in flight go on. [`end_streams`](Self::end_streams) then ends every stream.
    pub fn begin_shutdown(&self) {
        self.shared.set_phase(DRAINING);
    }

    /// A [`HostHandle`] on this service, for work that ends outside its calls (as
    /// [`Application::started`] gives).
    pub fn handle(&self) -> HostHandle<A> {
        HostHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Ends every SSE stream (the end of a shutdown's grace period).
    pub fn end_streams(&self) {
        self.shared.set_phase(GRACE_OVER);
    }

    /// With a shared `SessionStore` (replicas sharing sessions): call it once the server
    /// running the service has stopped for good, after [`end_streams`](Self::end_streams)
    /// and its connections' end, as [`serve`] does. Every request still awaited gets an error
    /// answer (`-32603`) in the shared events, so that a client resuming its stream on
    /// another replica learns at once that no answer will come, instead of waiting for its
    /// own time-out ([`HttpServer::abandon_requests`]). Returns how many it answered; without
    /// a shared store, none.
    pub fn abandon_requests(&self) -> usize {
        let mut st = self.shared.lock();
        // (A store's panic is reported by the panic hook; it answered none then.)
        contained(|| st.server.abandon_requests()).unwrap_or(0)
    }
}

/// What a request body must be for [`McpService`]: hyper's `Incoming`, axum's `Body`, any
/// `http_body::Body` whose errors are boxable.
pub trait RequestBody:
    HttpBody<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<B> RequestBody for B where
    B: HttpBody<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<A: Application, B: RequestBody> hyper::service::Service<Request<B>> for McpService<A> {
    type Response = Response<McpBody<A>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            handle(shared, req).await.map(|r| {
                r.map(|body| McpBody {
                    body,
                    _active: None,
                })
            })
        })
    }
}

/// The same service for tower stacks (axum's `Router::route_service`, tower middleware).
/// Always ready.
impl<A: Application, B: RequestBody> tower_service::Service<Request<B>> for McpService<A> {
    type Response = Response<McpBody<A>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        hyper::service::Service::call(self, req)
    }
}

/// Runs the MCP endpoint on `listener` until `shutdown` completes, then shuts down gracefully
/// (see [`HostConfig::shutdown_grace`]) and returns. With a shared session store, requests
/// still unanswered then are answered with an error in the shared events
/// ([`HttpServer::abandon_requests`]), for the clients that resume them on another replica.
///
/// `server` is the engine (its configuration decides the eras, sessions and Origin policy),
/// `app` your logic. Call it from a tokio runtime with the `time` and `net` drivers enabled;
/// connections run as tasks on that runtime, so a multi-threaded runtime serves them on all its
/// workers. Errors of single connections and of `accept` (out of file descriptors, for
/// example, which is retried with a growing pause of up to one second) never end it.
///
/// The end of a client's side of the connection is taken as the client leaving: an SSE
/// stream then ends at once (in 2026-07-28 that cancels its request, as the specification
/// says of a closed stream), rather than at the next keep-alive write. So a client that only
/// half-closes once its request is sent (`nc -N`, `socat`, a script's `shutdown(SHUT_WR)`)
/// gets no answer that is not ready at once; such clients keep their side open until they
/// have read it.
///
/// ```no_run
/// # use mcpwire::http::{HttpServer, HttpServerConfig};
/// # use mcpwire_tokio::http::{Application, HostConfig, serve};
/// # struct MyApp;
/// # impl Application for MyApp { fn drive(&mut self, _: mcpwire::Timestamp, s: &mut HttpServer) { s.pump() } }
/// # async fn run(config: mcpwire::Config) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let server = HttpServer::new(HttpServerConfig::new(config));
/// // `stop.send(())`, from a signal handler for example, shuts the host down.
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// # drop(stop);
/// serve(listener, server, MyApp, HostConfig::default(), async {
///     let _ = stopped.await;
/// })
/// .await
/// # }
/// ```
pub async fn serve<A: Application>(
    listener: TcpListener,
    server: HttpServer,
    app: A,
    config: HostConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let (service, timers) = McpService::build(server, app, config);
    let shared = service.shared.clone();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.config.header_read_timeout)
        .max_header_size(shared.config.max_head_size)
        .max_buf_size(shared.config.max_head_size.max(8192))
        .max_headers(shared.config.max_headers)
        .keep_alive(true);
    // (Aborted when `serve` returns, and also when its future is dropped: a caller that
    // races it against a signal instead of passing `shutdown` must not leave the timers, the
    // engine and the application running for the life of the process.)
    let mut timers = AbortOnDrop(tokio::spawn(timers));
    // Every connection's task watches this: true begins the graceful shutdown.
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let mut conns = JoinSet::new();
    let permits = Arc::new(Semaphore::new(shared.config.max_connections.max(1)));
    // The connections being served, for the choice of one to close at the cap.
    let mut tracked: Vec<Arc<Tracked>> = Vec::new();
    let epoch = Instant::now();
    // Connections being turned away (503), at most this many at once; beyond, they are
    // closed without a word.
    let shedding = Arc::new(Semaphore::new(SHED_AT_ONCE));
    let mut pause = Duration::ZERO;
    tokio::pin!(shutdown);
    loop {
        // Finished connections' results.
        while conns.try_join_next().is_some() {}
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    pause = Duration::ZERO;
                    stream
                }
                Err(e) if connection_error(&e) => continue,
                Err(_) => {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM: retrying at once would spin. Wait for
                    // connections to close.
                    pause = (pause * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    tokio::select! {
                        _ = &mut shutdown => break,
                        _ = tokio::time::sleep(pause) => continue,
                    }
                }
            },
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            // At the cap: the connection idle longest makes room, if there is one.
            Err(_) => displace(&mut tracked, &permits).await,
        };
        let Some(permit) = permit else {
            if let Ok(shed) = shedding.clone().try_acquire_owned() {
                conns.spawn(async move {
                    turn_away(stream).await;
                    drop(shed);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let input = Input::of(&stream);
        let conn_state = Arc::new(Tracked::new(epoch));
        let stream = SendGuard::new(stream, shared.config.send_timeout, conn_state.clone());
        tracked.push(conn_state.clone());
        if tracked.len() > 2 * shared.config.max_connections.max(1) {
            // Forget the ended ones now and then, below the cap too (at most the cap live).
            tracked.retain(|t| Arc::strong_count(t) > 1);
        }
        let service = Tracking {
            inner: service.clone(),
            conn: conn_state.clone(),
        };
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let mut stop = stop.clone();
        conns.spawn(async move {
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = async { drop(stop.wait_for(|stopping| *stopping).await) } => {
                        // A request that has begun to arrive is let in first: hyper closes
                        // a connection it holds idle at once, and the request is lost.
                        let finished = conn_state.finished.load(Ordering::Acquire);
                        let mut ended = false;
                        while arriving_at_stop(&conn_state, input, finished) {
                            tokio::select! {
                                _ = conn.as_mut() => {
                                    ended = true; // (a finished future is not polled again)
                                    break;
                                }
                                () = tokio::time::sleep(Duration::from_millis(5)) => {}
                            }
                        }
                        if !ended {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                    _ = conn_state.evict.notified() => {
                        // (`conn` holds the socket `input` asks until the task ends.)
                        if !agrees_to_close(&conn_state, input) {
                            continue;
                        }
                        // A connection that never had a request is simply dropped (hyper
                        // would wait for its first head), and so is one whose client has
                        // read nothing of the answer it was sent for a while (a graceful
                        // close would wait for it for up to the send timeout, holding the
                        // slot); one between requests closes as keep-alive connections do,
                        // after it has written everything, a slow client's download too
                        // (its answer, out of the engine's hands, would be lost).
                        if conn_state.served.load(Ordering::Acquire)
                            && !conn_state.not_reading(millis_since(conn_state.epoch))
                        {
                            conn.as_mut().graceful_shutdown();
                            // One with nothing left to write closes at once. One still
                            // sending (its client downloads a large answer) frees no slot
                            // soon: the accept loop is told to ask another (as by a refusal),
                            // and it closes once it has sent everything. One whose client
                            // stops reading meanwhile is dropped once it counts as not
                            // reading: a graceful close would hold the slot for up to the
                            // send timeout.
                            // (Whether it reads is also told by what the kernel holds for it.)
                            let mut told = false;
                            let mut unsent = input.unsent();
                            loop {
                                let wait = if told { NOT_READING_CHECK } else { STILL_SENDING };
                                tokio::select! {
                                    _ = conn.as_mut() => break,
                                    () = tokio::time::sleep(wait) => {
                                        if !told {
                                            told = true;
                                            conn_state.sending.store(true, Ordering::Relaxed);
                                            conn_state.declined.notify_waiters();
                                        }
                                        let now = millis_since(conn_state.epoch);
                                        let before = std::mem::replace(&mut unsent, input.unsent());
                                        conn_state.read_since(before, unsent, now);
                                        if conn_state.not_reading(now) {
                                            break;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                break;
            }
            drop(conn_state);
            drop(permit);
        });
    }
    // Stop accepting: connections still in the kernel's queue are refused.
    drop(listener);
    shared.set_phase(DRAINING);
    let _ = stopping.send(true);
    let grace = shared.config.shutdown_grace;
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        shared.set_phase(GRACE_OVER);
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while conns.join_next().await.is_some() {}
        })
        .await;
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
    timers.0.abort();
    let _ = (&mut timers.0).await;
    // Replicas sharing sessions: requests this process will never answer are answered with
    // an error for the clients that resume them elsewhere.
    let mut st = shared.lock();
    // (A store's panic is reported by the panic hook: `serve` still returns.)
    let _ = contained(|| st.server.abandon_requests());
    drop(st);
    Ok(())
}

/// A task aborted when its handle is dropped (tokio's detaches it).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Connections past [`HostConfig::max_connections`] answered 503 at the same time.
const SHED_AT_ONCE: usize = 64;

/// How long a new connection at the cap waits for the idle one it displaces to close (a
/// few microseconds when the runtime is not overloaded); past it, 503.
const MAKE_ROOM_WAIT: Duration = Duration::from_millis(250);

/// How many idle connections a new connection at the cap may ask in turn to make room, when
/// the ones asked decline (their next request had begun); past it, 503.
const MAKE_ROOM_TRIES: usize = 4;

/// At the cap: asks the connections idle longest, one at a time, to make room for a new
/// one, and takes the slot the first to close frees; `None` (503) when every connection is
/// in a request, or none closed in time.
async fn displace(
    tracked: &mut Vec<Arc<Tracked>>,
    permits: &Arc<Semaphore>,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let deadline = tokio::time::Instant::now() + MAKE_ROOM_WAIT;
    // A connection asked that closes only once it has sent a large answer frees its slot
    // later: another is asked, but only one that can go at once (one silent, or between
    // requests), never one made to close with its next request arriving; else the newcomer
    // waits for the slot to come free, within the wait.
    let mut one_is_closing = false;
    for _ in 0..MAKE_ROOM_TRIES {
        if let Ok(permit) = permits.clone().try_acquire_owned() {
            return Some(permit);
        }
        let Some(chosen) = make_room(tracked, !one_is_closing) else {
            if !one_is_closing {
                return None;
            }
            tokio::select! {
                permit = permits.clone().acquire_owned() => return permit.ok(),
                () = tokio::time::sleep_until(deadline) => return None,
            }
        };
        // Listening before asking: a connection declines at once, maybe before this waits.
        // (Its own refusal only: one asked before that declines late cuts no wait short.)
        let refusal = chosen.declined.notified();
        tokio::pin!(refusal);
        refusal.as_mut().enable();
        chosen.evict.notify_one();
        tokio::select! {
            permit = permits.clone().acquire_owned() => return permit.ok(),
            () = refusal => one_is_closing |= chosen.sending.load(Ordering::Relaxed),
            () = tokio::time::sleep_until(deadline) => return None,
        }
    }
    None
}

/// Whether a connection chosen to make room closes: chosen while idle, its next request may
/// have arrived since (read, or still in the kernel), and closing then would lose it; or it
/// may have been served since, and is no longer the one idle longest. Then it declines
/// (its `declined` tells the accept loop, which chooses another) and goes on.
fn agrees_to_close(conn: &Tracked, input: Input) -> bool {
    if conn.forced.load(Ordering::Relaxed) {
        return true;
    }
    let now = millis_since(conn.epoch);
    // Chosen as the one idle longest, it may have been served since (the accept loop chose
    // before this task ran): it is no longer idle longest, and another should make room.
    let served_since = conn.active.load(Ordering::Acquire) > 0
        || conn.finished.load(Ordering::Acquire)
            != conn.finished_when_chosen.load(Ordering::Relaxed);
    let arriving = if served_since {
        true
    } else if conn.begun() {
        conn.begun_recently(now)
    } else if input.pending() {
        // Counted as a read: begun, so not chosen again while it arrives.
        conn.note_input();
        true
    } else {
        false
    };
    if arriving {
        conn.evicting.store(false, Ordering::Relaxed);
        // Only to an accept loop waiting for this connection's answer.
        conn.declined.notify_waiters();
        return false;
    }
    true
}

/// Whether a connection idle when the server began to stop has a request arriving (read in
/// part, or waiting in the kernel) that has not reached the service yet, nor been served
/// since (`finished` was its count of ended requests then). The wait for it is bounded by
/// the shutdown's grace, after which the connection is dropped.
fn arriving_at_stop(conn: &Tracked, input: Input, finished: u64) -> bool {
    conn.active.load(Ordering::Acquire) == 0
        && conn.finished.load(Ordering::Acquire) == finished
        && (conn.begun() || input.pending())
}

/// How long a connection's writes must have been unable to proceed before its client counts
/// as not reading: making room, such a connection is dropped with what it was sending, where
/// one whose client reads (however slowly) closes once it has sent everything.
const NOT_READING_MS: u64 = 1000;

/// How often a connection closing to make room looks whether its client has stopped
/// reading (see [`NOT_READING_MS`]).
const NOT_READING_CHECK: Duration = Duration::from_millis(250);

/// How long a connection closing to make room may take before the accept loop asks another
/// as well: one between requests with nothing left to send closes at once; one still sending
/// a large answer to a client that reads will take as long as the download.
const STILL_SENDING: Duration = Duration::from_millis(10);

/// How long a request head that has begun to arrive protects its connection from being
/// closed to make room: a client's head comes in one round trip or a few; one that takes
/// longer is slow (trickled, perhaps on purpose), and its connection may be displaced.
const HEAD_GRACE_MS: u64 = 1000;

/// One connection of [`serve`], as the accept loop sees it.
struct Tracked {
    /// Requests between the service's call and the end of their response's body.
    active: AtomicUsize,
    /// Whether a request ever reached the service.
    served: AtomicBool,
    /// When it last became idle (accepted, or its last response ended), in milliseconds
    /// since `epoch`.
    idle_since: AtomicU64,
    /// Reads that brought bytes (and input seen waiting), all told, and when it last became
    /// idle: more now than then means its next request has begun to arrive.
    reads: AtomicU64,
    reads_when_idle: AtomicU64,
    /// When the first of those bytes came, in milliseconds since `epoch`.
    began_at: AtomicU64,
    /// Requests whose responses ended, all told, and that count when it was chosen to make
    /// room: more now than then means it was served after it was chosen.
    finished: AtomicU64,
    finished_when_chosen: AtomicU64,
    /// Chosen to make room: never chosen twice.
    evicting: AtomicBool,
    /// Chosen to make room with no right to decline.
    forced: AtomicBool,
    /// Since when (milliseconds since `epoch`, plus one; 0: not stalled) no write could
    /// proceed: see [`not_reading`](Tracked::not_reading).
    stalled_since: AtomicU64,
    /// Asks the connection's task to close it (see `agrees_to_close`).
    evict: Notify,
    /// Tells the accept loop that the connection declined to close, or that it closes only
    /// once a large answer is sent (`sending`): either way another should make room.
    declined: Notify,
    /// Closing to make room, it still sends a large answer: its slot comes free later.
    sending: AtomicBool,
    epoch: Instant,
}

impl Tracked {
    fn new(epoch: Instant) -> Self {
        Tracked {
            active: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            idle_since: AtomicU64::new(millis_since(epoch)),
            reads: AtomicU64::new(0),
            reads_when_idle: AtomicU64::new(0),
            began_at: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            finished_when_chosen: AtomicU64::new(0),
            evicting: AtomicBool::new(false),
            forced: AtomicBool::new(false),
            stalled_since: AtomicU64::new(0),
            evict: Notify::new(),
            declined: Notify::new(),
            sending: AtomicBool::new(false),
            epoch,
        }
    }

    /// Whether its client has read nothing of what was sent for [`NOT_READING_MS`] or more
    /// (at `now`, in milliseconds since `epoch`): a write could not proceed since then. A
    /// client that downloads a large answer slowly makes the writes wait too, but briefly,
    /// each time until it reads a little more (with a large send buffer, for seconds: see
    /// [`read_since`](Tracked::read_since)).
    fn not_reading(&self, now: u64) -> bool {
        let since = self.stalled_since.load(Ordering::Relaxed);
        since != 0 && now + 1 >= since + NOT_READING_MS
    }

    /// The client read since the last look (what the kernel holds for it, `unsent`, is less
    /// than `before`): a stall counts from `now`. A slow reader's writes may wait for seconds
    /// though it reads all along: the socket counts as writable again only once a good part
    /// of a large send buffer is free.
    fn read_since(&self, before: Option<u64>, unsent: Option<u64>, now: u64) {
        if let (Some(before), Some(unsent)) = (before, unsent)
            && unsent < before
        {
            let since = self.stalled_since.load(Ordering::Relaxed);
            if since != 0 {
                let _ = self.stalled_since.compare_exchange(
                    since,
                    now + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// Whether bytes arrived since it last became idle: a request has begun.
    fn begun(&self) -> bool {
        self.reads.load(Ordering::Acquire) != self.reads_when_idle.load(Ordering::Acquire)
    }

    /// Whether a request has begun less than [`HEAD_GRACE_MS`] before `now`.
    fn begun_recently(&self, now: u64) -> bool {
        self.begun() && now.saturating_sub(self.began_at.load(Ordering::Relaxed)) < HEAD_GRACE_MS
    }

    /// Bytes arrived (read, or seen waiting): the first since it became idle begins a request.
    fn note_input(&self) {
        if !self.begun() {
            self.began_at
                .store(millis_since(self.epoch), Ordering::Relaxed);
        }
        self.reads.fetch_add(1, Ordering::AcqRel);
    }
}

fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Chooses the connection idle longest to close (the caller asks it, with `evict`),
/// forgetting the connections that ended; `None` when every connection is serving a request
/// (or already closing). One whose next request
/// is arriving is passed over, and the one asked may decline if its request turns out to
/// have arrived; when every idle connection has a request arriving, the one idle longest is
/// made to close all the same, so that heads kept arriving cannot lock new clients out.
fn make_room(tracked: &mut Vec<Arc<Tracked>>, may_force: bool) -> Option<Arc<Tracked>> {
    // A connection's task holds the other reference while it runs.
    tracked.retain(|t| Arc::strong_count(t) > 1);
    let now = millis_since(tracked.first()?.epoch);
    let idle = || {
        tracked.iter().filter(|t| {
            t.active.load(Ordering::Acquire) == 0 && !t.evicting.load(Ordering::Relaxed)
        })
    };
    let longest = |t: &&Arc<Tracked>| t.idle_since.load(Ordering::Relaxed);
    let (chosen, force) = match idle()
        .filter(|t| !t.begun_recently(now))
        .min_by_key(longest)
    {
        Some(chosen) => (chosen, false),
        None if !may_force => return None,
        None => match idle().min_by_key(longest) {
            Some(chosen) => (chosen, true),
            None => return None,
        },
    };
    chosen
        .finished_when_chosen
        .store(chosen.finished.load(Ordering::Acquire), Ordering::Relaxed);
    chosen.forced.store(force, Ordering::Relaxed);
    chosen.evicting.store(true, Ordering::Relaxed);
    Some(chosen.clone())
}

/// The service of one connection of [`serve`]: [`McpService`], counting the connection's
/// requests until their responses end.
struct Tracking<A: Application> {
    inner: McpService<A>,
    conn: Arc<Tracked>,
}

/// Holds its connection's count of requests up until dropped with the response's body
/// ([`McpBody`] of a connection [`serve`] runs).
struct Active(Arc<Tracked>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0
            .idle_since
            .store(millis_since(self.0.epoch), Ordering::Relaxed);
        self.0
            .reads_when_idle
            .store(self.0.reads.load(Ordering::Acquire), Ordering::Release);
        self.0.finished.fetch_add(1, Ordering::AcqRel);
        self.0.active.fetch_sub(1, Ordering::Release);
    }
}

impl<A: Application> hyper::service::Service<Request<hyper::body::Incoming>> for Tracking<A> {
    type Response = Response<McpBody<A>>;
    type Error = Infallible;
    type Future = TrackedAnswer<A>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        self.conn.active.fetch_add(1, Ordering::AcqRel);
        self.conn.served.store(true, Ordering::Release);
        TrackedAnswer {
            answer: hyper::service::Service::call(&self.inner, req),
            active: Some(Active(self.conn.clone())),
        }
    }
}

/// The answer of [`Tracking`]: [`McpService`]'s, its body then holding the count until it is
/// dropped (no second boxed future per request).
struct TrackedAnswer<A: Application> {
    answer: <McpService<A> as hyper::service::Service<Request<hyper::body::Incoming>>>::Future,
    active: Option<Active>,
}

impl<A: Application> Future for TrackedAnswer<A> {
    type Output = Result<Response<McpBody<A>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Poll::Ready(Ok(response)) = this.answer.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        let active = this.active.take();
        Poll::Ready(Ok(response.map(|body| McpBody {
            body: body.body,
            _active: active,
        })))
    }
}

/// Answers a connection past [`HostConfig::max_connections`] with a 503 and closes it. Its
/// request is read (and dropped) for a moment first, so that closing does not reset the
/// connection under a client still sending, which would lose the answer.
async fn turn_away(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
        Content-Type: text/plain\r\nContent-Length: 21\r\nConnection: close\r\n\r\n\
        too many connections\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(BUSY).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        io::Result::Ok(())
    })
    .await;
}

/// What a client whose writes stalled must take within [`HostConfig::send_timeout`] for the
/// stall to end (or all that was offered at once): about 2 KiB/s at the default timeout.
pub const SEND_WINDOW: usize = 64 * 1024;

/// A connection whose writes fail once they could not go on for `limit`
/// ([`HostConfig::send_timeout`]): hyper then closes it, and the responses it carried end as
/// if their client had gone. Reads pass through untouched.
struct SendGuard {
    inner: tokio::net::TcpStream,
    limit: Duration,
    /// Armed when a write could not proceed; disarmed once [`SEND_WINDOW`] bytes went since,
    /// or a write took all it was offered.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The bytes written since `stalled` was armed.
    since_stall: usize,
    /// Told of the reads that bring bytes.
    conn: Arc<Tracked>,
}

impl SendGuard {
    fn new(inner: tokio::net::TcpStream, limit: Duration, conn: Arc<Tracked>) -> Self {
        SendGuard {
            inner,
            limit,
            stalled: None,
            since_stall: 0,
            conn,
        }
    }

    /// After a write that could not proceed: `Ready(Err)` once the stall passed the limit,
    /// else `Pending` (the timer wakes the task at the limit).
    fn stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let limit = self.limit;
        let conn = &self.conn;
        if self.stalled.is_none() {
            self.since_stall = 0;
        }
        let timer = self.stalled.get_or_insert_with(|| {
            let now = millis_since(conn.epoch);
            conn.stalled_since.store(now + 1, Ordering::Relaxed);
            Box::pin(tokio::time::sleep(limit))
        });
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for the send timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Passes on the result of a write of `offered` bytes, timing a write that could not
    /// proceed until the client has taken enough since.
    fn progressed(
        &mut self,
        r: Poll<io::Result<usize>>,
        offered: usize,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Pending => self.stall(cx),
            Poll::Ready(Ok(n)) if self.stalled.is_some() => {
                self.since_stall = self.since_stall.saturating_add(n);
                if self.since_stall >= SEND_WINDOW || n >= offered {
                    self.stalled = None;
                    self.conn.stalled_since.store(0, Ordering::Relaxed);
                }
                Poll::Ready(Ok(n))
            }
            ready => ready,
        }
    }
}

impl tokio::io::AsyncRead for SendGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.note_input();
        }
        r
    }
}

impl tokio::io::AsyncWrite for SendGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(r, buf.len(), cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        let offered = bufs.iter().map(|b| b.len()).sum();
        self.progressed(r, offered, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connection's socket, asked whether bytes wait in the kernel unread.
#[derive(Clone, Copy)]
struct Input {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fd: std::os::fd::RawFd,
}

impl Input {
    fn of(stream: &tokio::net::TcpStream) -> Self {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return Input {
            fd: std::os::fd::AsRawFd::as_raw_fd(stream),
        };
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = stream;
            Input {}
        }
    }

    /// Whether bytes wait to be read (false where it cannot be asked). Only while the
    /// stream it was made of is open.
    fn pending(self) -> bool {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let mut byte = 0u8;
            // SAFETY: one byte of `byte` is valid for writing; the caller keeps the socket
            // open, and a peek leaves its input as it was.
            let n = unsafe {
                libc::recv(
                    self.fd,
                    (&raw mut byte).cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            n > 0
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        false
    }
}

impl Input {
    /// The bytes the kernel holds that the client has not acknowledged (`None` where it
    /// cannot be asked). Only while the stream it was made of is open.
    fn unsent(self) -> Option<u64> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let mut unsent: libc::c_int = 0;
            // SAFETY: TIOCOUTQ writes one int to `unsent`; the caller keeps the socket open.
            let rc = unsafe { libc::ioctl(self.fd, libc::TIOCOUTQ, &raw mut unsent) };
            (rc == 0).then(|| u64::try_from(unsent).unwrap_or(0))
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        None
    }
}

/// An `accept` error that concerns one connection only: accept the next one at once.
fn connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Fires the engine's and the application's timers at the earliest of their deadlines.
async fn run_timers<A: Application>(shared: Arc<Shared<A>>) {
    let mut fired_last = false;
    // Firings in a row whose code panicked (see the pause below).
    let mut panicked = 0u32;
    loop {
        // Armed before looking, so a change made after the look wakes us.
        let changed = shared.changed.clone().notified_owned();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let mut woken = Vec::new();
        let (deadline, fired, clean) = {
            let mut st = shared.lock();
            let now = shared.now();
            let next = |st: &State<A>| {
                [st.server.poll_timeout(), app_timeout(&st.app)]
                    .into_iter()
                    .flatten()
                    .min()
            };
            let mut deadline = next(&st);
            let fired = deadline.is_some_and(|d| d <= now);
            let mut clean = true;
            if fired {
                // The engine's timers run the stores' code (a session store's touch, an event
                // store's forget and appends): a panic there stops here, as the application's
                // does in `run_app`, rather than end this task, and with it every later
                // expiry, keep-alive and application timer. A panic leaves the deadline due:
                // the 1 ms pause below keeps it from spinning.
                let server = &mut st.server;
                let engine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    server.handle_timeout(now)
                }));
                let app = st.run_app(now, true);
                let stored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.woken()));
                clean = engine.is_ok() && app && stored.is_ok();
                woken = stored.unwrap_or_default();
                deadline = next(&st);
            }
            // While it loops again at once, every change wakes it.
            let armed = match deadline {
                _ if fired => 0,
                Some(d) => d.as_nanos(),
                None => u64::MAX,
            };
            shared.armed.store(armed, Ordering::Relaxed);
            (deadline, fired, clean)
        };
        woken.into_iter().for_each(Waker::wake);
        panicked = if clean { 0 } else { panicked.saturating_add(1) };
        if fired {
            if fired_last {
                // A deadline that stays due after firing: do not spin on it; and while the
                // code it runs panics every time, back off to a second between tries (each
                // panic is reported, with the lock held: a thousand a second held up every
                // request).
                let pause = Duration::from_millis(1 << panicked.min(10));
                tokio::time::sleep(pause).await;
            }
            fired_last = true;
            continue;
        }
        fired_last = false;
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(shared.deadline(d)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {}
            _ = changed => {}
        }
    }
}

/// A response with an empty body and `Connection: close` (hyper closes the connection after
/// it).
fn refuse<A: Application>(status: StatusCode) -> Response<HostBody<A>> {
    let mut r = Response::new(Either::Left(Full::new(Bytes::new())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Finishes a body read whose first poll found it still arriving, within
/// [`HostConfig::body_read_timeout`] and no slower than [`HostConfig::min_body_rate`] once
/// its grace has passed; `None` when the client took too long (408). `received` is the
/// count of bytes `read` has taken so far.
async fn finish_body_read(
    mut read: Pin<&mut impl Future<Output = BodyRead>>,
    received: &AtomicU64,
    config: &HostConfig,
) -> Option<BodyRead> {
    let start = tokio::time::Instant::now();
    // (`Duration::MAX`, "never", must not overflow: far in the future instead, as tokio's
    // own `timeout` does.)
    let after = |d: Duration| start + d.min(FAR_FUTURE);
    let end = after(config.body_read_timeout);
    let rate = config.min_body_rate;
    if rate == 0 {
        return tokio::time::timeout_at(end, read).await.ok();
    }
    // Two rules, once the grace has passed. The average from the start must keep the rate
    // (a trickle from the first byte). And the body may get no more than the grace's worth
    // of the rate ahead of it (at least a second's): what it sent beyond that buys no pause,
    // so a body sent fast up to its last bytes and then stopped is cut about a grace or two
    // later, not at the body timeout (while it held its share of `max_body_total` and a
    // connection that the cap never displaces). A body the bytes so far fall short for is
    // cut at the check that sees it: at the grace's end, then when either rule would next
    // fail, no more often than every 250 ms (so a client sending exactly at the rate does not
    // wake this at every byte).
    let rate_ms = i128::from(rate); // millibytes per millisecond
    let millis = |d: Duration| i128::try_from(d.min(FAR_FUTURE).as_millis()).unwrap_or(i128::MAX);
    let ahead_most =
        rate_ms.saturating_mul(millis(config.body_rate_grace.max(Duration::from_secs(1))));
    // How far ahead of the rate the body is, in millibytes, and when and at what count of
    // bytes it was last looked at (`None` before the grace's end).
    let mut ahead: Option<(i128, tokio::time::Instant, u64)> = None;
    let mut check = after(config.body_rate_grace);
    loop {
        let wake = check.min(end);
        match tokio::time::timeout_at(wake, read.as_mut()).await {
            Ok(done) => return Some(done),
            Err(_) if wake >= end => return None,
            Err(_) => {
                let now = tokio::time::Instant::now();
                let got = received.load(Ordering::Relaxed);
                let elapsed = millis(now.saturating_duration_since(start));
                let sent = i128::from(got).saturating_mul(1000);
                if sent < rate_ms.saturating_mul(elapsed) {
                    return None;
                }
                let lead = match ahead {
                    // (No pace is asked of the grace itself.)
                    None => sent,
                    Some((lead, at, was)) => {
                        let came = i128::from(got.saturating_sub(was)).saturating_mul(1000);
                        let owed =
                            rate_ms.saturating_mul(millis(now.saturating_duration_since(at)));
                        lead.saturating_add(came).saturating_sub(owed)
                    }
                }
                .min(ahead_most);
                if lead < 0 {
                    return None;
                }
                ahead = Some((lead, now, got));
                // The average holds until `got / rate` after the start; the lead lasts
                // `lead / rate` from now.
                let average_until = start
                    + Duration::from_millis(u64::try_from(sent / rate_ms).unwrap_or(u64::MAX))
                        .min(FAR_FUTURE);
                let lead_until = now
                    + Duration::from_millis(u64::try_from(lead / rate_ms).unwrap_or(u64::MAX))
                        .min(FAR_FUTURE);
                check = average_until
                    .min(lead_until)
                    .max(now + Duration::from_millis(250));
            }
        }
    }
}

/// How much of a body over `max_body` is read and dropped before the 413: four times the
/// limit, at least 16 MiB. A body declared larger is refused before any of it is read.
fn discard_limit(max_body: usize) -> u64 {
    (max_body as u64).saturating_mul(4).max(16 << 20)
}

/// What became of a request body.
enum BodyRead {
    /// All of it, within the limit.
    Complete(Bytes),
    /// Over the limit: read to its end and dropped, or cut at the discard limit.
    TooLarge,
    /// Past [`HostConfig::max_body_total`] with the other bodies being read: dropped like
    /// `TooLarge`.
    Busy,
    /// A broken chunked body, or a connection gone mid-body.
    Broken,
}

/// A body's share of [`HostConfig::max_body_total`], given back when dropped.
struct BodyShare<'a> {
    held: &'a AtomicUsize,
    limit: usize,
    taken: usize,
}

impl<'a> BodyShare<'a> {
    fn new(held: &'a AtomicUsize, limit: usize) -> Self {
        BodyShare {
            held,
            limit,
            taken: 0,
        }
    }

    /// Takes `n` more bytes, or nothing when they would go past the limit.
    fn take(&mut self, n: usize) -> bool {
        let grown = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(n).filter(|&total| total <= self.limit)
            });
        if grown.is_ok() {
            self.taken += n;
        }
        grown.is_ok()
    }

    /// Gives back everything taken.
    fn release(&mut self) {
        self.held.fetch_sub(self.taken, Ordering::Relaxed);
        self.taken = 0;
    }
}

impl Drop for BodyShare<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// Reads a body of at most `max` bytes, its bytes counted in `share`. Past `max`, or past
/// what `share` may take, it keeps reading, and drops what it reads, until the body ends
/// (`TooLarge` or `Busy`: the client then reads the 413 or 503) or `discard` bytes have come
/// (at once).
async fn read_body<B>(
    body: B,
    max: usize,
    discard: u64,
    received: &AtomicU64,
    share: &mut BodyShare<'_>,
) -> BodyRead
where
    B: HttpBody,
{
    use bytes::Buf as _;
    let mut body = std::pin::pin!(body);
    // A body in one piece is kept as hyper gave it (no copy). From the second piece on, the
    // pieces are copied into one buffer: each one hyper gives shares its whole read buffer
    // (8 KiB or more), so keeping them would let a client sending a byte at a time hold
    // thousands of times its body's size.
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    let mut len: u64 = 0;
    let mut busy = false;
    while let Some(frame) = body.as_mut().frame().await {
        let Ok(frame) = frame else {
            return BodyRead::Broken;
        };
        let Ok(mut data) = frame.into_data() else {
            continue; // trailers
        };
        len += data.remaining() as u64;
        received.store(len, Ordering::Relaxed);
        busy = busy || (len <= max as u64 && !share.take(data.remaining()));
        if len > max as u64 || busy {
            (first, rest) = (None, Vec::new());
            share.release();
            if len > discard {
                return if busy {
                    BodyRead::Busy
                } else {
                    BodyRead::TooLarge
                };
            }
            continue;
        }
        if first.is_none() && rest.is_empty() {
            let n = data.remaining();
            first = Some(data.copy_to_bytes(n));
            continue;
        }
        if let Some(first) = first.take() {
            // With a declared length (the hint is what is still to come), room for more of it
            // at once, so that a body coming fast is copied fewer times; but at most twice
            // what came (and 64 KiB): a declared length is only a claim, and room reserved
            // for it would count nowhere (`max_body_total` counts bytes received), or fail
            // for a length past all memory, which aborts the process.
            let whole = len.saturating_add(body.size_hint().lower());
            let ahead = whole.min(len.saturating_mul(2).max(64 << 10));
            rest.reserve_exact(usize::try_from(ahead).unwrap_or(usize::MAX).min(max));
            rest.extend_from_slice(&first);
        }
        while data.has_remaining() {
            let piece = data.chunk();
            let n = piece.len();
            rest.extend_from_slice(piece);
            data.advance(n);
        }
    }
    if len > max as u64 {
        return BodyRead::TooLarge;
    }
    if busy {
        return BodyRead::Busy;
    }
    BodyRead::Complete(first.unwrap_or_else(|| rest.into()))
}

async fn handle<A: Application, B>(
    shared: Arc<Shared<A>>,
    req: Request<B>,
) -> Result<Response<HostBody<A>>, Infallible>
where
    B: HttpBody,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let config = &shared.config;
    if !config.path.is_empty() && req.uri().path() != config.path {
        let mut r = Response::new(Either::Left(Full::new(Bytes::new())));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return Ok(r);
    }
    // hyper has refused a Transfer-Encoding whose last coding is not `chunked`; the engine
    // takes no other coding either.
    let mut te = req
        .headers()
        .get_all(hyper::header::TRANSFER_ENCODING)
        .iter();
    if let Some(first) = te.next()
        && (te.next().is_some() || !first.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return Ok(refuse(StatusCode::BAD_REQUEST));
    }
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // A body over the limit is still read (and dropped), up to `discard_limit`: a client
    // that is still sending when the 413 comes and the connection closes gets a reset, and
    // many (Node's fetch, httpx) then report a broken connection instead of the 413.
    let discard = discard_limit(config.max_body);
    // A client that waits for `100 Continue` before it sends its body is told at once: it
    // sends nothing (hyper says `100 Continue` only once the body is read), instead of
    // uploading up to the discard limit to be thrown away, or timing out on the way.
    let expects_continue = (req.headers().get(hyper::header::EXPECT))
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if declared.is_some_and(|n| n > discard || (expects_continue && n > config.max_body as u64)) {
        return Ok(refuse(StatusCode::PAYLOAD_TOO_LARGE));
    }
    // Nor is one whose head alone the engine refuses (a bad Origin, a body that is not
    // JSON): it is told so before it sends a byte of its body.
    if expects_continue && let Some(refusal) = refuse_head(&shared, &req) {
        let mut r = hyper_response(&shared, refusal);
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return Ok(r);
    }
    let (parts, body) = req.into_parts();
    // Most bodies are in by the time hyper calls us: a first poll takes them without the
    // timer (arming and disarming it cost about 2% of the CPU of a stateless request).
    let received = AtomicU64::new(0);
    // (Held until the engine has taken the body, at the end of this function.)
    let mut share = BodyShare::new(&shared.bodies, config.max_body_total);
    let read = read_body(body, config.max_body, discard, &received, &mut share);
    tokio::pin!(read);
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    let read = match first {
        Poll::Ready(done) => Some(done),
        Poll::Pending => finish_body_read(read, &received, config).await,
    };
    let body = match read {
        Some(BodyRead::Complete(body)) => body,
        Some(BodyRead::TooLarge) => return Ok(refuse(StatusCode::PAYLOAD_TOO_LARGE)),
        Some(BodyRead::Busy) => {
            let mut r = refuse(StatusCode::SERVICE_UNAVAILABLE);
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(r);
        }
        // A broken chunked body or a connection gone mid-body.
        Some(BodyRead::Broken) => return Ok(refuse(StatusCode::BAD_REQUEST)),
        None => return Ok(refuse(StatusCode::REQUEST_TIMEOUT)),
    };
    // The authority of an absolute-form target (`POST http://host/mcp`) stands for Host,
    // which is then ignored (RFC 9112, 3.2.2), as is an HTTP/2 request's `:authority`: the
    // engine's Host check reads the host the request is really for.
    let authority = parts.uri.authority().map(|a| a.as_str());
    // A value with bytes outside ASCII (obs-text: a Latin-1 name a proxy adds, say) is read
    // lossily, as the C and Go hosts do: no MCP header may hold such bytes, and the engine
    // refuses one that does as a mismatch; any other header it never reads.
    let lossy: Vec<String> = (parts.headers.values())
        .filter(|v| v.to_str().is_err() && std::str::from_utf8(v.as_bytes()).is_err())
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    let mut lossy = lossy.iter();
    let mut headers = Vec::with_capacity(parts.headers.len() + 1);
    if let Some(authority) = authority {
        headers.push(("Host", authority));
    }
    for (name, value) in &parts.headers {
        let value = match std::str::from_utf8(value.as_bytes()) {
            Ok(value) => value,
            // (In the order of the first pass, which found every such value.)
            Err(_) => lossy.next().map_or("", String::as_str),
        };
        if authority.is_some() && name == hyper::header::HOST {
            continue;
        }
        headers.push((name.as_str(), value));
    }
    let response = {
        let mut st = shared.lock();
        let now = shared.now();
        let request = HttpRequest {
            method: parts.method.as_str(),
            headers: &headers,
            body: &body,
        };
        // The engine runs the stores' code here (a `Last-Event-ID` GET's replay, a session's
        // create and touch, appends): a panic in it costs this request a 500, as the
        // application's does, not the connection's task (its client got no status).
        let Some(r) = contained(|| st.server.handle_request(now, &request, &mut random_fill))
        else {
            // What the engine did before the panic may have given other streams bytes.
            let woken = contained(|| st.woken()).unwrap_or_default();
            drop(st);
            woken.into_iter().for_each(Waker::wake);
            shared.changed.notify_waiters();
            return Ok(refuse(StatusCode::INTERNAL_SERVER_ERROR));
        };
        if !st.run_app(now, false) {
            // The application panicked with this request's events in hand. The engine drops
            // the request's stream as if its client had gone (a session's answers stay
            // resumable), which ends a stateless request; the client gets a 500.
            // (That runs the stores' code too: a panic there costs nothing more.)
            if let Body::Stream(id) = r.body {
                contained(|| st.server.stream_closed(now, id));
            }
            let woken = contained(|| st.woken()).unwrap_or_default();
            drop(st);
            woken.into_iter().for_each(Waker::wake);
            shared.changed.notify_waiters();
            return Ok(refuse(StatusCode::INTERNAL_SERVER_ERROR));
        }
        let stream = match r.body {
            Body::Stream(id) => Some(id),
            _ => None,
        };
        let settled = contained(|| st.server.settle(r));
        // The streams this request gave bytes to (other sessions' GET streams, say) wake;
        // the timer task must look again only when a deadline came before the one it
        // sleeps until.
        let woken = contained(|| st.woken());
        let (response, woken) = match (settled, woken) {
            (Some(response), Some(woken)) => (response, woken),
            (_, woken) => {
                // The streams already taken from the engine's list are woken all the same
                // (no later look names them again: their tasks would wait for good), and so
                // are those the stream's close changes.
                let mut woken = woken.unwrap_or_default();
                if let Some(id) = stream {
                    contained(|| st.server.stream_closed(now, id));
                }
                woken.extend(contained(|| st.woken()).unwrap_or_default());
                drop(st);
                woken.into_iter().for_each(Waker::wake);
                shared.changed.notify_waiters();
                return Ok(refuse(StatusCode::INTERNAL_SERVER_ERROR));
            }
        };
        let State { server, app, .. } = &mut *st;
        let timer = [server.poll_timeout(), app_timeout(app)]
            .into_iter()
            .flatten()
            .min()
            .is_some_and(|d| d.as_nanos() < shared.armed.load(Ordering::Relaxed));
        (response, woken, timer)
    };
    let (response, woken, timer) = response;
    woken.into_iter().for_each(Waker::wake);
    if timer {
        shared.changed.notify_waiters();
    }

    Ok(hyper_response(&shared, response))
}

/// The engine's refusal of a request from its head alone ([`HttpServer::refuse_head`]), with
/// the target's authority standing for Host as in the request proper.
fn refuse_head<A: Application, B>(
    shared: &Arc<Shared<A>>,
    req: &Request<B>,
) -> Option<HttpResponse> {
    let authority = req.uri().authority().map(|a| a.as_str());
    let mut headers: Vec<(&str, &str)> = authority.map(|a| ("Host", a)).into_iter().collect();
    for (name, value) in req.headers() {
        if authority.is_some() && name == hyper::header::HOST {
            continue;
        }
        // (A value that is not text is left out: no header the head's checks read may hold
        // one, and the request proper is refused for it.)
        if let Ok(value) = std::str::from_utf8(value.as_bytes()) {
            headers.push((name.as_str(), value));
        }
    }
    let st = shared.lock();
    contained(|| st.server.refuse_head(req.method().as_str(), &headers)).flatten()
}

/// The engine's response as hyper's: its headers, and its body (a stream's is read from the
/// engine as it comes). A header hyper cannot send (the engine writes none such) makes it a
/// 500, and its stream, dropped here, is closed in the engine as a departed client's is.
fn hyper_response<A: Application>(
    shared: &Arc<Shared<A>>,
    response: HttpResponse,
) -> Response<HostBody<A>> {
    let mut out_headers = hyper::HeaderMap::with_capacity(response.headers.len() + 1);
    let mut headers_ok = true;
    for (name, value) in &response.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(n), Ok(v)) => {
                out_headers.append(n, v);
            }
            _ => headers_ok = false,
        }
    }
    let body = match response.body {
        Body::Empty => Either::Left(Full::new(Bytes::new())),
        Body::Complete(content_type, bytes) => {
            if !out_headers.contains_key(CONTENT_TYPE)
                && let Ok(v) = HeaderValue::from_str(content_type)
            {
                out_headers.insert(CONTENT_TYPE, v);
            }
            Either::Left(Full::new(Bytes::from(bytes)))
        }
        Body::Stream(id) => Either::Right(SseBody::new(shared, id)),
    };
    if !headers_ok {
        drop(body);
        return refuse(StatusCode::INTERNAL_SERVER_ERROR);
    }
    let mut r = Response::new(body);
    *r.status_mut() =
        StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    *r.headers_mut() = out_headers;
    r
}

/// An SSE response body: the bytes of one engine stream, as they come.
struct SseBody<A: Application> {
    shared: Arc<Shared<A>>,
    id: HttpStreamId,
    /// Ended: nothing more to send, and the engine needs no `stream_closed`.
    done: bool,
    /// The bytes of the last frame handed to hyper, not yet consumed from the engine: they
    /// are, once hyper asks for the next one (it took that one). A client that goes first
    /// leaves them unconsumed, and the engine keeps the answers in them for its resumption.
    handed: usize,
    /// The shutdown grace ran out while it waited, and the requests it awaited were answered
    /// with an error (`HttpServer::abandon_stream`), which it writes before it ends.
    abandoned: bool,
}

/// The most bytes of a stream in one frame: a large answer is consumed from the engine as
/// hyper takes it, a frame at a time, not at once (which counted it delivered, and gave up
/// what a resumption needs, as soon as hyper had it, however little reached the client).
const SSE_FRAME: usize = 64 * 1024;

impl<A: Application> SseBody<A> {
    fn new(shared: &Arc<Shared<A>>, id: HttpStreamId) -> Self {
        SseBody {
            shared: shared.clone(),
            id,
            done: false,
            handed: 0,
            abandoned: false,
        }
    }

    /// One look at the stream, under the lock: its next bytes, its end, or (with nothing
    /// yet) the task parked until the engine names the stream.
    fn look(&mut self, st: &mut State<A>, cx: &Context<'_>) -> Poll<Option<Bytes>> {
        if self.handed > 0 {
            // hyper asks again: it has the last frame.
            st.server
                .consume_stream(self.id, std::mem::take(&mut self.handed));
        }
        match st.server.poll_stream(self.id) {
            None => {
                self.done = true;
                Poll::Ready(None)
            }
            Some(out) if !out.bytes.is_empty() => {
                let n = out.bytes.len().min(SSE_FRAME);
                self.handed = n;
                Poll::Ready(Some(Bytes::copy_from_slice(&out.bytes[..n])))
            }
            Some(out) if out.finished => {
                st.server.consume_stream(self.id, 0);
                self.done = true;
                Poll::Ready(None)
            }
            Some(_) => {
                let phase = self.shared.phase();
                // Streams that only wait for server messages were ended by the engine
                // (`end_listen_streams`) when the shutdown began; a GET that resumed a call's
                // stream carries an answer, and has the grace period like the call.
                if phase == GRACE_OVER {
                    // Its requests get an error answer rather than nothing (a stateless
                    // request's client cannot resume it): written, it finishes the stream.
                    // (Once: the host ends in a second, written or not.)
                    if !self.abandoned {
                        self.abandoned = true;
                        if st.server.abandon_stream(self.id) > 0 {
                            cx.waker().wake_by_ref();
                            return Poll::Pending;
                        }
                    }
                    let now = self.shared.now();
                    st.server.stream_closed(now, self.id);
                    st.run_app(now, false);
                    self.done = true;
                    return Poll::Ready(None);
                }
                // Parked under the lock that every change to the stream takes: a change
                // after this look finds the waker.
                st.parked.insert(self.id, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<A: Application> HttpBody for SseBody<A> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let shared = this.shared.clone();
        let (polled, woken, timer) = {
            let mut st = shared.lock();
            // The engine may run a store's code here (draining a stream pumps every
            // connection): a panic in it ends this response, and is reported by the panic
            // hook, instead of ending this connection's task (and another request's answer).
            // The body's drop then tells the engine that the stream's client is gone.
            let polled = contained(|| this.look(&mut st, cx)).unwrap_or(Poll::Ready(None));
            // A stream written out to the end may let its session's idle time start: the
            // engine then wants the time, and the timer task must look again.
            let timer = this.done
                && st
                    .server
                    .poll_timeout()
                    .is_some_and(|d| d.as_nanos() < shared.armed.load(Ordering::Relaxed));
            if this.done {
                st.parked.remove(&this.id);
            }
            // Draining this stream (or ending it) can move other streams along.
            (polled, contained(|| st.woken()).unwrap_or_default(), timer)
        };
        woken.into_iter().for_each(Waker::wake);
        if timer {
            shared.changed.notify_waiters();
        }
        polled.map(|bytes| bytes.map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

impl<A: Application> Drop for SseBody<A> {
    /// hyper drops a body it did not finish when the client went away.
    fn drop(&mut self) {
        let woken = {
            let mut st = self.shared.lock();
            st.parked.remove(&self.id);
            if self.done {
                return;
            }
            let now = self.shared.now();
            // Not a panic out of a drop, which would abort the process during an unwind
            // (a store's, in the engine, as the application's).
            contained(|| st.server.stream_closed(now, self.id));
            st.run_app(now, false);
            contained(|| st.woken()).unwrap_or_default()
        };
        woken.into_iter().for_each(Waker::wake);
        self.shared.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write that stalled counts as going again only once the client has taken
    /// [`SEND_WINDOW`] bytes within the send timeout: a client that reads a trickle is cut.
    /// (Any progress used to end the stall: such a client kept its connection and the
    /// answer's buffers for as long as it went on; found by a review of the host.) Small
    /// socket buffers on both sides, as on a real network, where a few KiB read make the
    /// socket writable again; on loopback the kernel's own buffers hide it.
    #[tokio::test]
    async fn a_client_that_reads_a_trickle_is_cut_after_the_send_timeout() {
        let listen = tokio::net::TcpSocket::new_v4().unwrap();
        listen.set_recv_buffer_size(4096).unwrap();
        listen.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = listen.listen(8).unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_send_buffer_size(4096).unwrap();
        let server = socket
            .connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut client, _) = listener.accept().await.unwrap();
        let tracked = Arc::new(Tracked::new(Instant::now()));
        let mut guard = SendGuard::new(server, Duration::from_millis(500), tracked);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            guard.write_all(&vec![b'a'; 8 << 20]).await
        });
        // 4 KiB every 100 ms: 20 KiB per send timeout, under the window.
        let mut buf = vec![0u8; 4096];
        let mut read = 0;
        for _ in 0..50 {
            if writer.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            use tokio::io::AsyncReadExt;
            read += client.read(&mut buf).await.unwrap();
        }
        assert!(
            writer.is_finished(),
            "a trickling client kept its connection ({read} bytes read)"
        );
        let err = writer.await.unwrap().expect_err("the whole answer went");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    }

    /// At the cap, the connection idle longest is asked first; when its next request is
    /// waiting in the kernel unread, it declines and the next one makes room.
    #[tokio::test]
    async fn a_connection_with_unread_input_declines_and_the_next_makes_room() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut clients = Vec::new();
        let mut conns = Vec::new();
        let epoch = Instant::now();
        let permits = Arc::new(Semaphore::new(0));
        for idle_since in [0, 5] {
            clients.push(tokio::net::TcpStream::connect(addr).await.unwrap());
            let (stream, _) = listener.accept().await.unwrap();
            let tracked = Arc::new(Tracked::new(epoch));
            tracked.idle_since.store(idle_since, Ordering::Relaxed);
            let (conn, permits) = (tracked.clone(), permits.clone());
            tokio::spawn(async move {
                let input = Input::of(&stream);
                loop {
                    conn.evict.notified().await;
                    if agrees_to_close(&conn, input) {
                        drop(stream);
                        permits.add_permits(1);
                        return;
                    }
                }
            });
            conns.push(tracked);
        }
        // The first one's next request: in its kernel buffer, not read.
        tokio::io::AsyncWriteExt::write_all(&mut clients[0], b"POST /mcp HTTP/1.1\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!conns[0].begun());

        let mut tracked = conns.clone();
        let permit = displace(&mut tracked, &permits).await;
        assert!(permit.is_some(), "no room made");
        assert!(
            !conns[0].evicting.load(Ordering::Relaxed),
            "the first stays"
        );
        assert!(
            conns[1].evicting.load(Ordering::Relaxed),
            "the second made room"
        );
        let mut byte = [0u8; 1];
        let n = tokio::io::AsyncReadExt::read(&mut clients[1], &mut byte).await;
        assert!(matches!(n, Ok(0) | Err(_)), "the second is closed");
    }

    /// A body that comes a byte at a time keeps none of the pieces hyper hands over: each
    /// shares a whole read buffer, and keeping them held 8 KiB or more per byte until the
    /// body ended.
    #[tokio::test]
    async fn a_body_in_tiny_pieces_keeps_none_of_them() {
        struct Pieces {
            buffers: Vec<Bytes>,
            next: usize,
            retained: Arc<AtomicBool>,
        }
        impl HttpBody for Pieces {
            type Data = Bytes;
            type Error = Infallible;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
                let k = self.next;
                // Every piece before the last one given is no longer held (the first
                // alone may be, until a second comes).
                if k >= 2 && self.buffers[..k - 1].iter().any(|b| !b.is_unique()) {
                    self.retained.store(true, Ordering::Relaxed);
                }
                let Some(buffer) = self.buffers.get(k) else {
                    return Poll::Ready(None);
                };
                let piece = buffer.slice(k % 8..k % 8 + 1);
                self.next += 1;
                Poll::Ready(Some(Ok(Frame::data(piece))))
            }
        }
        let buffers: Vec<Bytes> = (0..100u8)
            .map(|i| Bytes::from(vec![b'a' + i % 26; 8192]))
            .collect();
        let retained = Arc::new(AtomicBool::new(false));
        let body = Pieces {
            buffers, // (the only handles on them: no other keeps them from being unique)
            next: 0,
            retained: retained.clone(),
        };
        let held = AtomicUsize::new(0);
        let mut share = BodyShare::new(&held, usize::MAX);
        let BodyRead::Complete(read) =
            read_body(body, 1 << 20, 1 << 24, &AtomicU64::new(0), &mut share).await
        else {
            panic!("not complete");
        };
        let want: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        assert_eq!(&read[..], &want[..]);
        assert!(!retained.load(Ordering::Relaxed), "pieces were kept");
        // One piece alone is kept as given (no copy).
        let one = Pieces {
            buffers: vec![Bytes::from(vec![b'a'; 8192])],
            next: 0,
            retained: Arc::new(AtomicBool::new(false)),
        };
        let BodyRead::Complete(read) =
            read_body(one, 1 << 20, 1 << 24, &AtomicU64::new(0), &mut share).await
        else {
            panic!("not complete");
        };
        assert_eq!(&read[..], b"a");
        // Both bodies' bytes stay counted until the share goes.
        assert_eq!(held.load(Ordering::Relaxed), 101);
        drop(share);
        assert_eq!(held.load(Ordering::Relaxed), 0);
    }

    /// A body whose bytes do not fit in what the other bodies leave of the shared bound is
    /// read to its end and dropped (`Busy`), and what it had taken is given back at once.
    #[tokio::test]
    async fn a_body_past_the_shared_bound_is_dropped_and_gives_its_share_back() {
        let held = AtomicUsize::new(0);
        let mut other = BodyShare::new(&held, 100);
        assert!(other.take(60));
        /// Five pieces of ten bytes.
        struct Tens(u8);
        impl HttpBody for Tens {
            type Data = Bytes;
            type Error = Infallible;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
                if self.0 == 5 {
                    return Poll::Ready(None);
                }
                self.0 += 1;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&[b' '; 10])))))
            }
        }
        let body = || Tens(0);
        let mut share = BodyShare::new(&held, 100);
        let read = read_body(body(), 1 << 20, 1 << 24, &AtomicU64::new(0), &mut share).await;
        assert!(matches!(read, BodyRead::Busy));
        assert_eq!(
            held.load(Ordering::Relaxed),
            60,
            "its own share is given back"
        );
        drop(other);
        let read = read_body(body(), 1 << 20, 1 << 24, &AtomicU64::new(0), &mut share).await;
        assert!(matches!(read, BodyRead::Complete(b) if b.len() == 50));
        assert_eq!(held.load(Ordering::Relaxed), 50);
    }

    /// A connection chosen while idle that was served before its task saw the choice (a
    /// loaded runtime) declines: the silent connection should make room, not the busy one.
    #[tokio::test]
    async fn a_connection_served_after_it_was_chosen_declines() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        // A second ago: the busy one's answer makes it idle later than the silent one.
        let now = Instant::now();
        let epoch = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
        let busy = Arc::new(Tracked::new(epoch));
        let silent = Arc::new(Tracked::new(epoch));
        busy.idle_since.store(0, Ordering::Relaxed);
        silent.idle_since.store(1, Ordering::Relaxed);
        let mut tracked = vec![busy.clone(), silent.clone()];
        // The task holding each connection's other reference.
        let _held = (busy.clone(), silent.clone());
        assert!(make_room(&mut tracked, true).is_some_and(|c| Arc::ptr_eq(&c, &busy)));
        assert!(
            busy.evicting.load(Ordering::Relaxed),
            "idle longest is chosen"
        );
        // Its next request is read, served and answered before it looks at the choice.
        busy.note_input();
        busy.active.fetch_add(1, Ordering::AcqRel);
        drop(Active(busy.clone()));
        assert!(!agrees_to_close(&busy, Input::of(&stream)));
        assert!(!busy.evicting.load(Ordering::Relaxed));
        // The next choice is the silent one, and it agrees.
        assert!(make_room(&mut tracked, true).is_some_and(|c| Arc::ptr_eq(&c, &silent)));
        assert!(silent.evicting.load(Ordering::Relaxed));
        assert!(agrees_to_close(&silent, Input::of(&stream)));
    }

    /// At the cap, a connection asked to make room that still sends a large answer (its client
    /// reads) says so, and frees its slot once sent: another is asked only if it can go at
    /// once, never one made to close with its next request arriving (that request was lost);
    /// else the newcomer waits for the slot (found by a review of this session's changes:
    /// it was forced, or the newcomer got 503 at once).
    #[tokio::test]
    async fn a_connection_still_sending_lets_the_newcomer_wait_for_its_slot() {
        let now = Instant::now();
        let epoch = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
        let sending = Arc::new(Tracked::new(epoch));
        let arriving = Arc::new(Tracked::new(epoch));
        sending.idle_since.store(0, Ordering::Relaxed);
        arriving.idle_since.store(1, Ordering::Relaxed);
        arriving.note_input(); // its next request has begun to arrive
        let mut tracked = vec![sending.clone(), arriving.clone()];
        let _held = (sending.clone(), arriving.clone());
        let permits = Arc::new(Semaphore::new(0));
        let slot = permits.clone();
        let task = sending.clone();
        tokio::spawn(async move {
            task.evict.notified().await;
            task.sending.store(true, Ordering::Relaxed);
            task.declined.notify_waiters();
            tokio::time::sleep(Duration::from_millis(50)).await;
            slot.add_permits(1); // sent, and closed
        });
        assert!(displace(&mut tracked, &permits).await.is_some(), "503");
        assert!(
            !arriving.evicting.load(Ordering::Relaxed),
            "the one with a request arriving was made to close"
        );
    }

    /// A connection asked to make room by an earlier new client, that declines only once
    /// that client has given up (its task ran late), does not cut short the wait of the next
    /// one: that wait is for its own choice. The late refusal woke it, and a third
    /// connection was asked as well, two closed for one new client.
    #[tokio::test]
    async fn a_late_refusal_does_not_cut_short_the_next_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let input = Input::of(&stream);
        let epoch = Instant::now();
        let permits = Arc::new(Semaphore::new(0));
        let conns: Vec<Arc<Tracked>> = (0..3u64)
            .map(|i| {
                let t = Arc::new(Tracked::new(epoch));
                t.idle_since.store(i, Ordering::Relaxed);
                t
            })
            .collect();
        let mut tracked = conns.clone();
        let _held = conns.clone(); // (their tasks' references)
        // The first is asked, and its task does not run in time: 503.
        assert!(displace(&mut tracked, &permits).await.is_none());
        assert!(conns[0].evicting.load(Ordering::Relaxed));
        // The second is asked next; it agrees after 100 ms. Meanwhile the first declines.
        let (second, room) = (conns[1].clone(), permits.clone());
        tokio::spawn(async move {
            second.evict.notified().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            room.add_permits(1);
        });
        let first = conns[0].clone();
        let declined = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            first.note_input(); // its next request has begun
            agrees_to_close(&first, input)
        });
        assert!(displace(&mut tracked, &permits).await.is_some());
        assert!(!declined.await.unwrap(), "the first declined");
        assert!(conns[1].evicting.load(Ordering::Relaxed));
        assert!(
            !conns[2].evicting.load(Ordering::Relaxed),
            "the third was asked too"
        );
        drop(stream);
    }
}
