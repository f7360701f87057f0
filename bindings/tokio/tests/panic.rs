//! A panic in the application's code is the application's bug, but it must not take the host
//! with it: the request it hit gets a 500, the engine forgets that request, the other
//! requests are served, and the timers keep running; a panic in its `poll_timeout` costs
//! nothing but that deadline. The same holds for a store the engine's timers call. And a
//! `serve` future dropped takes its timers with it. (The panic hook prints each panic.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::http::{ConnKey, HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::{Config, Event, Timestamp};
use mcpwire_tokio::http::{Application, serve};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

#[derive(Default)]
struct Seen {
    /// Live engine connections at the end of each `drive` that returned.
    live: Vec<usize>,
}

/// Answers tools/call at once, except "boom", on which `drive` panics, and "hold", which it
/// answers when its timer fires 20 ms later. The first time the timer fires it panics right
/// after answering. After a "tick", the next look at its deadline panics.
struct Panicky {
    seen: Arc<Mutex<Seen>>,
    held: Vec<(ConnKey, OwnedId)>,
    timer: Option<Timestamp>,
    timer_panicked: bool,
    deadline_bomb: AtomicBool,
}

impl Application for Panicky {
    fn drive(&mut self, now: Timestamp, server: &mut HttpServer) {
        let mut calls: Vec<(ConnKey, OwnedId, String)> = Vec::new();
        while let Some((key, ev)) = server.poll_event() {
            if let Event::Request { id, params, .. } = ev {
                let params = params.map(|p| p.get().to_owned()).unwrap_or_default();
                calls.push((key, id.into(), params));
            }
        }
        for (key, id, params) in calls {
            assert!(!params.contains(r#""boom""#), "the app's bug");
            if params.contains(r#""tick""#) {
                self.deadline_bomb.store(true, Ordering::SeqCst);
            }
            if params.contains(r#""hold""#) {
                self.held.push((key, id));
                self.timer = Some(now.after(Duration::from_millis(20)));
                continue;
            }
            answer(server, key, &id);
        }
        server.pump();
        let live = server.connections().len();
        self.seen.lock().unwrap().live.push(live);
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        assert!(
            !self.deadline_bomb.swap(false, Ordering::SeqCst),
            "the app's deadline bug"
        );
        self.timer
    }

    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
            for (key, id) in std::mem::take(&mut self.held) {
                answer(server, key, &id);
            }
            if !self.timer_panicked {
                self.timer_panicked = true;
                panic!("the app's timer bug");
            }
        }
    }
}

fn answer(server: &mut HttpServer, key: ConnKey, id: &OwnedId) {
    if let Some(c) = server.connection(key) {
        c.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
            .unwrap();
    }
}

/// One stateless tools/call of `tool` on a connection of its own; the raw response (the
/// server ends it).
async fn call(addr: std::net::SocketAddr, tool: &str) -> String {
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(body.as_bytes()).await.unwrap();
    let (raw, closed) = common::read_to_close(&mut c, Duration::from_secs(5)).await;
    assert!(closed, "no end of the response in time");
    String::from_utf8(raw).unwrap()
}

#[tokio::test]
async fn a_panicking_application_costs_one_request_not_the_host() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let config = Config::server("panicky", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let app = Panicky {
        seen: seen.clone(),
        held: Vec::new(),
        timer: None,
        timer_panicked: false,
        deadline_bomb: AtomicBool::new(false),
    };
    tokio::spawn(serve(
        listener,
        HttpServer::new(HttpServerConfig::new(config)),
        app,
        common::test_config(),
        std::future::pending::<()>(),
    ));

    for tool in ["boom", "fine", "boom", "boom", "fine", "tick", "fine"] {
        let raw = call(addr, tool).await;
        if tool == "boom" {
            assert!(raw.starts_with("HTTP/1.1 500 "), "{raw}");
        } else {
            assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
            assert!(raw.contains(r#""content":[]"#), "{raw}");
        }
    }
    // The engine forgot the requests the app panicked on: at the end of the last request's
    // drive, that request is the only live connection (it ends when its answer is taken).
    assert_eq!(seen.lock().unwrap().live.last(), Some(&1));

    // A held call answered by the timer just before it panicked still gets its answer, and
    // the timers go on: the next held call is answered too.
    for _ in 0..2 {
        let raw = call(addr, "hold").await;
        assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
        assert!(raw.contains(r#""content":[]"#), "{raw}");
    }
}

/// An event store that panics the first time one of its calls is made: `forget` (user code
/// the engine's own timers run: a session's expiry forgets its events), `replay` (user code
/// on a request's path: a `Last-Event-ID` GET), or `append` once the application armed it.
struct OnceBadly {
    inner: mcpwire::http::MemoryEventStore,
    panicked: Arc<AtomicBool>,
    at: Site,
}

enum Site {
    Forget,
    Replay,
    /// `append`, once this is set (it is cleared as the store panics).
    Append(Arc<AtomicBool>),
}

impl OnceBadly {
    fn bug(&self, site: Site) {
        let armed = match &self.at {
            Site::Append(armed) => {
                matches!(site, Site::Append(_)) && armed.swap(false, Ordering::SeqCst)
            }
            at => matches!(
                (at, site),
                (Site::Forget, Site::Forget) | (Site::Replay, Site::Replay)
            ),
        };
        if armed && !self.panicked.swap(true, Ordering::SeqCst) {
            panic!("the store's bug");
        }
    }
}

impl mcpwire::http::EventStore for OnceBadly {
    fn append(
        &mut self,
        session: &str,
        stream: mcpwire::http::HttpStreamId,
        event: u64,
        bytes: &[u8],
    ) {
        self.bug(Site::Append(Arc::default()));
        self.inner.append(session, stream, event, bytes);
    }

    fn replay(
        &mut self,
        session: &str,
        stream: mcpwire::http::HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        self.bug(Site::Replay);
        self.inner.replay(session, stream, after, out)
    }

    fn forget(&mut self, session: &str) {
        self.bug(Site::Forget);
        self.inner.forget(session);
    }
}

/// A panic in a store that the engine's timers call (here a session's expiry) does not end
/// the timers task: it did, and from then on no session expired, no keep-alive went out and
/// no application timer fired (a held call was never answered).
#[tokio::test]
async fn a_store_panicking_under_the_timers_does_not_stop_them() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let panicked = Arc::new(AtomicBool::new(false));
    let config = Config::server("panicky", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let mut http = HttpServerConfig::new(config);
    http.session_idle_timeout = Duration::from_millis(100);
    http.events = Some(Box::new(OnceBadly {
        inner: mcpwire::http::MemoryEventStore::new(256),
        panicked: panicked.clone(),
        at: Site::Forget,
    }));
    let app = Panicky {
        seen: Arc::new(Mutex::new(Seen::default())),
        held: Vec::new(),
        timer: None,
        timer_panicked: true, // (only the store panics here)
        deadline_bomb: AtomicBool::new(false),
    };
    tokio::spawn(serve(
        listener,
        HttpServer::new(http),
        app,
        common::test_config(),
        std::future::pending::<()>(),
    ));
    // A session, left to expire.
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(body.as_bytes()).await.unwrap();
    let (raw, _) = common::read_to_close(&mut c, Duration::from_secs(5)).await;
    assert!(String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 200 "));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !panicked.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session never expired"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The application's timer still fires: a held call is answered.
    let raw = call(addr, "hold").await;
    assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
    assert!(raw.contains(r#""content":[]"#), "{raw}");
}

/// An application that notes when it is dropped, and keeps a timer 10 ms ahead.
struct Ticking {
    dropped: Arc<AtomicBool>,
    next: Timestamp,
}

impl Application for Ticking {
    fn drive(&mut self, _: Timestamp, server: &mut HttpServer) {
        while server.poll_event().is_some() {}
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        Some(self.next)
    }

    fn handle_timeout(&mut self, now: Timestamp, _: &mut HttpServer) {
        self.next = now.after(Duration::from_millis(10));
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// A `serve` future dropped (raced against a signal rather than given it as `shutdown`, or
/// under a timeout) takes its timers task with it, and so the engine and the application:
/// the task ran on, detached, for the life of the process.
#[tokio::test]
async fn dropping_the_serve_future_stops_its_timers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let config = Config::server("ticking", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let app = Ticking {
        dropped: dropped.clone(),
        next: Timestamp::ZERO,
    };
    let served = tokio::time::timeout(
        Duration::from_millis(100),
        serve(
            listener,
            HttpServer::new(HttpServerConfig::new(config)),
            app,
            common::test_config(),
            std::future::pending::<()>(),
        ),
    )
    .await;
    assert!(served.is_err(), "serve returned");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !dropped.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the application lives on behind a detached timers task"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An application whose timer is always due and panics every time it fires, counting its
/// firings; it answers calls at once.
struct AlwaysDueAndPanicking {
    fired: Arc<std::sync::atomic::AtomicUsize>,
}

impl Application for AlwaysDueAndPanicking {
    fn drive(&mut self, _: Timestamp, server: &mut HttpServer) {
        let mut calls = Vec::new();
        while let Some((key, ev)) = server.poll_event() {
            if let Event::Request { id, .. } = ev {
                calls.push((key, OwnedId::from(id)));
            }
        }
        for (key, id) in calls {
            answer(server, key, &id);
        }
        server.pump();
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        Some(Timestamp::ZERO)
    }

    fn handle_timeout(&mut self, _: Timestamp, _: &mut HttpServer) {
        self.fired.fetch_add(1, Ordering::SeqCst);
        panic!("the app's timer bug, every time");
    }
}

/// A timer whose code panics every time it fires, and stays due, is tried again less and
/// less often (at most every second), not every millisecond: each panic is reported with the
/// engine's lock held, and a thousand a second held up every request. Calls are served
/// meanwhile.
#[tokio::test]
async fn a_timer_that_panics_every_time_is_tried_less_and_less_often() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fired = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let config = Config::server("panicky", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    tokio::spawn(serve(
        listener,
        HttpServer::new(HttpServerConfig::new(config)),
        AlwaysDueAndPanicking {
            fired: fired.clone(),
        },
        common::test_config(),
        std::future::pending::<()>(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let raw = call(addr, "fine").await;
    assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
    let n = fired.load(Ordering::SeqCst);
    assert!((2..=20).contains(&n), "fired {n} times in a second");
}

/// A panic in a store on a request's path gets that request a 500, and the host goes on
/// serving the session: the connection's task panicked, and its client got no status.
#[tokio::test]
async fn a_store_panicking_on_a_request_costs_that_request_a_500() {
    let panicked = Arc::new(AtomicBool::new(false));
    let mut http = common::fixture::http_config();
    http.events = Some(Box::new(OnceBadly {
        inner: mcpwire::http::MemoryEventStore::new(16),
        panicked: panicked.clone(),
        at: Site::Replay,
    }));
    let server = common::start_with(common::test_config(), http).await;
    let mut c = common::Client::new(&server).await;
    let session = common::open_session(&mut c, "{}").await;
    let mut first = common::Client::new(&server).await;
    assert_eq!(resume(&mut first, &session).await, Some(500));
    assert!(panicked.load(Ordering::SeqCst));
    // The host, and the session, go on.
    let mut second = common::Client::new(&server).await;
    assert_eq!(resume(&mut second, &session).await, Some(200));
}

/// Answers every request at once; on tools/call it answers, arms the store, and panics.
struct AnswersThenPanics {
    armed: Arc<AtomicBool>,
}

impl Application for AnswersThenPanics {
    fn drive(&mut self, _: Timestamp, server: &mut HttpServer) {
        let mut calls = Vec::new();
        while let Some((key, ev)) = server.poll_event() {
            if let Event::Request { id, method, .. } = ev {
                calls.push((key, OwnedId::from(id), method.eq_str("tools/call")));
            }
        }
        for (key, id, call) in calls {
            answer(server, key, &id);
            if call {
                self.armed.store(true, Ordering::SeqCst);
                panic!("the app's bug");
            }
        }
        server.pump();
    }
}

/// The application panics with a session request's answer given, and then the store panics
/// as the engine stores that answer: the request still gets a 500 and the host serves on.
/// The engine was called outside the host's guard on that path, so the second panic ended
/// the connection's task and its client got no status (found by a review of the host).
#[tokio::test]
async fn a_store_panicking_after_the_application_did_costs_that_request_a_500() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (armed, panicked) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let config = Config::server("panicky", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let mut http = HttpServerConfig::new(config);
    http.events = Some(Box::new(OnceBadly {
        inner: mcpwire::http::MemoryEventStore::new(16),
        panicked: panicked.clone(),
        at: Site::Append(armed.clone()),
    }));
    tokio::spawn(serve(
        listener,
        HttpServer::new(http),
        AnswersThenPanics { armed },
        common::test_config(),
        std::future::pending::<()>(),
    ));
    let mut c = common::Client::over(tokio::net::TcpStream::connect(addr).await.unwrap());
    let session = common::open_session(&mut c, "{}").await;
    let call =
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}"#;
    let mut first = common::Client::over(tokio::net::TcpStream::connect(addr).await.unwrap());
    assert_eq!(first.post(Some(&session), call).await.status, 500);
    assert!(
        panicked.load(Ordering::SeqCst),
        "the store was never reached"
    );
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    assert_eq!(c.post(Some(&session), list).await.status, 200);
}

/// A `Last-Event-ID` GET of `session`; the response's status.
async fn resume(c: &mut common::Client, session: &str) -> Option<u16> {
    c.send(
        "GET",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", "1-0"),
        ],
        b"",
    )
    .await;
    c.head().await.map(|(status, _)| status)
}

/// A shared session store, in memory, whose `forget` panics the first time.
#[derive(Default)]
struct ForgetsBadly {
    sessions: std::collections::HashMap<String, String>,
    panicked: Arc<AtomicBool>,
}

impl mcpwire::http::SessionStore for ForgetsBadly {
    fn create(
        &mut self,
        session: &str,
        initialize: &str,
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        self.sessions.insert(session.into(), initialize.into());
        Ok(())
    }
    fn load(&mut self, session: &str) -> Result<Option<String>, mcpwire::http::StoreUnavailable> {
        Ok(self.sessions.get(session).cloned())
    }
    fn touch(&mut self, session: &str) -> Result<bool, mcpwire::http::StoreUnavailable> {
        Ok(self.sessions.contains_key(session))
    }
    fn forget(&mut self, session: &str) -> Result<(), mcpwire::http::StoreUnavailable> {
        if !self.panicked.swap(true, Ordering::SeqCst) {
            panic!("the store's bug");
        }
        self.sessions.remove(session);
        Ok(())
    }
}

/// A DELETE whose shared session store panics in `forget`: the DELETE gets a 500, and the
/// session goes on whole, its GET stream open (the store is told first, so that a DELETE it
/// cannot pass on ends nothing). The DELETE made again ends the session and its stream at
/// once. (The engine ended the session first once: its stream's end then went unannounced
/// to the host after the panic, and the stream hung until some later request woke it.)
#[tokio::test]
async fn a_session_store_panicking_on_a_delete_leaves_the_session_whole() {
    let panicked = Arc::new(AtomicBool::new(false));
    let mut http = common::fixture::http_config();
    http.sessions = Some(Box::new(ForgetsBadly {
        panicked: panicked.clone(),
        ..ForgetsBadly::default()
    }));
    delete_with_a_stream_open(http, &panicked, true).await;
}

/// The same with the event store panicking in `forget` (no shared session store): the engine
/// called it before it ended the session's streams, so the session went but its GET stream
/// stayed open for good.
#[tokio::test]
async fn an_event_store_panicking_on_a_delete_still_ends_the_streams() {
    let panicked = Arc::new(AtomicBool::new(false));
    let mut http = common::fixture::http_config();
    http.events = Some(Box::new(OnceBadly {
        inner: mcpwire::http::MemoryEventStore::new(16),
        panicked: panicked.clone(),
        at: Site::Forget,
    }));
    delete_with_a_stream_open(http, &panicked, false).await;
}

/// Reads a chunked response to its end: true at its last chunk, false if cut before.
async fn stream_end(listen: &mut common::Client) -> bool {
    loop {
        match listen.chunk().await {
            Some(c) if c.is_empty() => return true,
            Some(_) => {}
            None => return false,
        }
    }
}

/// Opens a session and its GET stream on a host with `http` (no keep-alive), DELETEs the
/// session, which must get a 500 with `panicked` set, and then the stream must end within
/// two seconds; or, when the session `survives` the panic, stay open, and end once a second
/// DELETE got 200.
async fn delete_with_a_stream_open(
    mut http: HttpServerConfig,
    panicked: &AtomicBool,
    survives: bool,
) {
    http.keepalive = None;
    let server = common::start_with(common::test_config(), http).await;
    let mut c = common::Client::new(&server).await;
    let session = common::open_session(&mut c, "{}").await;
    let mut listen = common::Client::new(&server).await;
    let headers = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    listen.send("GET", &headers, b"").await;
    assert_eq!(listen.head().await.map(|(status, _)| status), Some(200));
    // The stream is open and waiting before the DELETE.
    while server.open_streams.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut del = common::Client::new(&server).await;
    del.send("DELETE", &headers[1..], b"").await;
    assert_eq!(del.response().await.map(|r| r.status), Some(500));
    assert!(
        panicked.load(Ordering::SeqCst),
        "the store was never reached"
    );
    if survives {
        let ended = tokio::time::timeout(Duration::from_millis(300), stream_end(&mut listen)).await;
        assert!(ended.is_err(), "the GET stream ended: {ended:?}");
        let mut again = common::Client::new(&server).await;
        again.send("DELETE", &headers[1..], b"").await;
        assert_eq!(again.response().await.map(|r| r.status), Some(200));
    }
    let ended = tokio::time::timeout(Duration::from_secs(2), stream_end(&mut listen)).await;
    assert_eq!(ended, Ok(true), "the GET stream did not end");
}
