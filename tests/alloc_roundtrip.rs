//! A counting global allocator shows that a warm client and server, wired together in memory,
//! perform zero heap allocations per message in steady state, in both protocol eras
//! (2025-11-25 with its handshake, and the stateless 2026-07-28):
//!
//! - a request answered with a result and correlated by the client;
//! - notifications each way: the server's progress and log message on a request that asked for
//!   progress, and (handshake era) the client's `notifications/roots/list_changed`;
//! - a request answered with an error;
//! - a request the client cancels (the client's `notifications/cancelled`; the server's answer
//!   to it is suppressed). In 2026-07-28 a cancellation is the only notification a client
//!   sends, so this is the client-to-server notification of that era.
//!
//! Each case first runs [`WARM_UP`] times (buffers, tables and the sets of remembered
//! cancelled ids reach their steady sizes), then counts the allocations of [`MEASURED`] more
//! on the test's own thread. Every step asserts what the peer saw, so nothing passes vacuously.
//!
//! When a count is not zero, run with `MCPWIRE_ALLOC_TRACE=1` (and `--nocapture`) to print a
//! backtrace of the first few allocations in the measured window.

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, Event, RequestId, RequestOptions, State};
use mcpwire::jsonrpc::{Backend, OwnedId, RawJson};
use mcpwire::mcp::{Era, LogLevel, ProtocolVersion};

// ---- Counting allocator (this thread only, while a measurement is on) ----------------------

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// How many backtraces may still be printed (set from `MCPWIRE_ALLOC_TRACE`).
    static TRACES_LEFT: Cell<usize> = const { Cell::new(0) };
    /// Set while a backtrace is captured, whose own allocations are not counted.
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

fn record() {
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    let tracing = TRACING.try_with(Cell::get).unwrap_or(true);
    if !counting || tracing {
        return;
    }
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    let left = TRACES_LEFT.try_with(Cell::get).unwrap_or(0);
    if left > 0 {
        TRACES_LEFT.with(|n| n.set(left - 1));
        TRACING.with(|t| t.set(true));
        eprintln!("allocation while counting:\n{}", Backtrace::force_capture());
        TRACING.with(|t| t.set(false));
    }
}

struct Counting;

// Safety: forwards every call to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record();
        // Safety: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Safety: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record();
        // Safety: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns how many allocations this thread made meanwhile.
fn allocations_during(f: impl FnOnce()) -> usize {
    let traces = std::env::var_os("MCPWIRE_ALLOC_TRACE").map_or(0, |_| 5);
    TRACES_LEFT.with(|n| n.set(traces));
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

// ---- Two engines in memory ------------------------------------------------------------------

/// Rounds of each case before counting: more than the default
/// `Limits::max_remembered_ids` (1024), so the sets of cancelled ids are full and recycle.
const WARM_UP: usize = 2000;
/// Rounds counted.
const MEASURED: usize = 1000;

const ARGUMENTS: &str = r#"{"location":"New York","units":"metric"}"#;
const PARAMS: &str =
    r#"{"name":"get_weather","arguments":{"location":"New York","units":"metric"}}"#;
/// Params that also ask for log messages at `info` and above (2026-07-28 reads this key; the
/// handshake era ignores it).
const PARAMS_WITH_LOG_LEVEL: &str = r#"{"_meta":{"io.modelcontextprotocol/logLevel":"info"},"name":"get_weather","arguments":{"location":"New York","units":"metric"}}"#;
const CONTENT: &str = r#"[{"type":"text","text":"Sunny, 21 C"}]"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"Sunny, 21 C"}],"isError":false}"#;
const LOG_DATA: &str = r#"{"step":"fetching forecast"}"#;
const ERROR_DATA: &str = r#"{"tool":"get_weather"}"#;

fn raw(text: &str) -> RawJson<'_> {
    RawJson::new(text).expect("test JSON is valid")
}

struct Peers {
    client: Connection,
    server: Connection,
    era: Era,
    now: Timestamp,
    /// The bytes in transit, reused.
    wire: Vec<u8>,
}

impl Peers {
    /// A client speaking only `version` and a dual-era server, both validating with `backend`,
    /// past the handshake (or, in 2026-07-28, the `server/discover` probe), every event
    /// drained.
    fn ready(version: ProtocolVersion, backend: Backend) -> Peers {
        let now = Timestamp::ZERO;
        let mut client = Config::client("alloc-client", "1.0")
            .with_capabilities(r#"{"roots":{"listChanged":true}}"#)
            .unwrap();
        client.versions = vec![version];
        client.decoder.backend = backend;
        let mut server = Config::server("alloc-server", "1.0")
            .with_capabilities(r#"{"tools":{},"logging":{}}"#)
            .unwrap();
        server.decoder.backend = backend;
        let mut p = Peers {
            client: Connection::new(client, now).unwrap(),
            server: Connection::new(server, now).unwrap(),
            era: version.era(),
            now,
            wire: Vec::new(),
        };
        let (mut client_ready, mut server_ready) = (false, false);
        while p.client.poll_transmit().is_some() || p.server.poll_transmit().is_some() {
            if p.client.poll_transmit().is_some() {
                p.client_to_server();
            }
            while let Some(e) = p.server.poll_event() {
                server_ready |= e == Event::Ready { version };
            }
            if p.server.poll_transmit().is_some() {
                p.server_to_client();
            }
            while let Some(e) = p.client.poll_event() {
                client_ready |= e == Event::Ready { version };
            }
        }
        assert!(client_ready && server_ready, "{version:?}: no handshake");
        assert_eq!(p.client.state(), State::Operating);
        assert_eq!(p.server.state(), State::Operating);
        assert_eq!(p.client.era(), Some(p.era));
        assert_eq!(p.server.era(), Some(p.era));
        p
    }

    fn client_to_server(&mut self) {
        transfer(&mut self.client, &mut self.server, &mut self.wire, self.now);
    }

    fn server_to_client(&mut self) {
        transfer(&mut self.server, &mut self.client, &mut self.wire, self.now);
    }

    /// Checks that nothing is left over, then moves time on by 1 ms and fires any timer that is
    /// due, as a run loop would.
    fn end_round(&mut self) {
        assert!(self.client.poll_event().is_none(), "client: an extra event");
        assert!(self.server.poll_event().is_none(), "server: an extra event");
        assert!(self.client.poll_transmit().is_none(), "client: output left");
        assert!(self.server.poll_transmit().is_none(), "server: output left");
        assert_eq!(self.client.requests_in_flight(), 0);
        assert_eq!(self.server.peer_requests_in_flight(), 0);
        self.now = self.now.after(Duration::from_millis(1));
        for conn in [&mut self.client, &mut self.server] {
            if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                conn.handle_timeout(self.now);
            }
        }
    }

    /// The server's next event must be a `tools/call` request with our arguments, carrying the
    /// id the client chose; returns that id.
    fn server_gets_request(&mut self, id: RequestId) -> OwnedId {
        match self.server.poll_event() {
            Some(Event::Request {
                id: peer,
                method,
                params: Some(params),
            }) => {
                assert!(method.eq_str("tools/call"));
                let arguments = params.get_unique("arguments").unwrap().unwrap();
                assert_eq!(arguments.get(), ARGUMENTS);
                let peer = OwnedId::from(peer);
                assert_eq!(
                    peer,
                    OwnedId::Int(id.0),
                    "the id on the wire is the client's"
                );
                peer
            }
            other => panic!("server: expected the request, got {other:?}"),
        }
    }

    /// The client's next event must be the result of `id`.
    fn client_gets_result(&mut self, id: RequestId) {
        let era = self.era;
        match self.client.poll_event() {
            Some(Event::Response { request, result }) => {
                assert_eq!(request, id, "the response correlates to its request");
                if era == Era::Legacy {
                    assert_eq!(result.get(), RESULT);
                } else {
                    // 2026-07-28: the server's engine stamps `resultType` and its `serverInfo`.
                    let content = result.get_unique("content").unwrap().unwrap();
                    assert_eq!(content.get(), CONTENT);
                    let kind = result.get_unique("resultType").unwrap().unwrap();
                    assert!(kind.as_str().unwrap().eq_str("complete"));
                    assert!(result.get_unique("_meta").unwrap().is_some());
                }
            }
            other => panic!("client: expected the response, got {other:?}"),
        }
    }
}

/// Moves everything `from` wants to write into `to`, through `wire`.
fn transfer(from: &mut Connection, to: &mut Connection, wire: &mut Vec<u8>, now: Timestamp) {
    wire.clear();
    while let Some(t) = from.poll_transmit() {
        wire.extend_from_slice(t.bytes);
        let n = t.bytes.len();
        from.consume_transmit(n);
    }
    assert!(!wire.is_empty(), "nothing to transfer");
    to.handle_input(now, wire);
}

// ---- The cases --------------------------------------------------------------------------------

/// A request, its result, and the client correlating one to the other.
fn round_trip(p: &mut Peers) {
    let id = p
        .client
        .request(p.now, "tools/call", Some(raw(PARAMS)))
        .unwrap();
    p.client_to_server();
    let peer = p.server_gets_request(id);
    p.server.respond(peer.as_id(), raw(RESULT)).unwrap();
    p.server_to_client();
    p.client_gets_result(id);
    p.end_round();
}

/// A request that asks for progress; the server reports progress and logs before answering,
/// and (handshake era) the client notifies a change of its roots meanwhile.
fn notifications(p: &mut Peers) {
    let options = RequestOptions {
        progress: true,
        ..RequestOptions::default()
    };
    let params = Some(raw(PARAMS_WITH_LOG_LEVEL));
    let id = p
        .client
        .request_with(p.now, "tools/call", params, options)
        .unwrap();
    let legacy = p.era == Era::Legacy;
    if legacy {
        p.client
            .notify("notifications/roots/list_changed", None)
            .unwrap();
    }
    p.client_to_server();
    let peer = p.server_gets_request(id);
    if legacy {
        match p.server.poll_event() {
            Some(Event::Notification { method, params }) => {
                assert!(method.eq_str("notifications/roots/list_changed"));
                assert!(params.is_none());
            }
            other => panic!("server: expected the notification, got {other:?}"),
        }
    }
    p.server
        .progress(peer.as_id(), 1.0, Some(2.0), Some("halfway"))
        .unwrap();
    let logged = p
        .server
        .log(peer.as_id(), LogLevel::Info, Some("weather"), raw(LOG_DATA));
    assert_eq!(logged, Ok(true));
    p.server.respond(peer.as_id(), raw(RESULT)).unwrap();
    p.server_to_client();
    match p.client.poll_event() {
        Some(Event::Progress {
            request,
            progress,
            total,
            message,
        }) => {
            assert_eq!(request, id);
            assert_eq!((progress, total), (1.0, Some(2.0)));
            assert!(message.unwrap().eq_str("halfway"));
        }
        other => panic!("client: expected progress, got {other:?}"),
    }
    match p.client.poll_event() {
        Some(Event::Notification {
            method,
            params: Some(params),
        }) => {
            assert!(method.eq_str("notifications/message"));
            let data = params.get_unique("data").unwrap().unwrap();
            assert_eq!(data.get(), LOG_DATA);
        }
        other => panic!("client: expected the log message, got {other:?}"),
    }
    p.client_gets_result(id);
    p.end_round();
}

/// A request answered with a JSON-RPC error.
fn error_response(p: &mut Peers) {
    let id = p
        .client
        .request(p.now, "tools/call", Some(raw(PARAMS)))
        .unwrap();
    p.client_to_server();
    let peer = p.server_gets_request(id);
    let data = Some(raw(ERROR_DATA));
    p.server
        .respond_error(peer.as_id(), -32602, "unknown tool", data)
        .unwrap();
    p.server_to_client();
    match p.client.poll_event() {
        Some(Event::Error {
            request,
            code,
            message,
            data,
        }) => {
            assert_eq!(request, id);
            assert_eq!(code, -32602);
            assert!(message.eq_str("unknown tool"));
            assert_eq!(data.map(|d| d.get()), Some(ERROR_DATA));
        }
        other => panic!("client: expected the error, got {other:?}"),
    }
    p.end_round();
}

/// A request the client cancels after the server has seen it; the server's late answer is
/// suppressed.
fn cancelled(p: &mut Peers) {
    let id = p
        .client
        .request(p.now, "tools/call", Some(raw(PARAMS)))
        .unwrap();
    p.client_to_server();
    let peer = p.server_gets_request(id);
    p.client.cancel(p.now, id, Some("user cancelled")).unwrap();
    p.client_to_server();
    match p.server.poll_event() {
        Some(Event::PeerCancelled {
            id: cancelled,
            reason,
        }) => {
            assert_eq!(OwnedId::from(cancelled), peer);
            assert!(reason.unwrap().eq_str("user cancelled"));
        }
        other => panic!("server: expected the cancellation, got {other:?}"),
    }
    let suppressed = p.server.stats().suppressed_responses;
    p.server.respond(peer.as_id(), raw(RESULT)).unwrap();
    assert_eq!(p.server.stats().suppressed_responses, suppressed + 1);
    p.end_round();
}

/// Warms `case` up, then asserts that [`MEASURED`] more rounds allocate nothing, with each
/// validation backend of this build.
/// How many requests a burst sends before any answer comes back: more than a handful, within
/// the server's default limit on peer requests held (256).
const BURST: usize = 200;

/// `BURST` requests in one write, answered by the server in one write, whose answers the client
/// reads in one go: each side queues hundreds of events from a single read.
fn burst(p: &mut Peers) {
    let mut ids = [RequestId(0); BURST];
    for slot in ids.iter_mut() {
        *slot = p
            .client
            .request(p.now, "tools/call", Some(raw(PARAMS)))
            .unwrap();
    }
    p.client_to_server();
    for &id in &ids {
        let peer = p.server_gets_request(id);
        p.server.respond(peer.as_id(), raw(RESULT)).unwrap();
    }
    p.server_to_client();
    for &id in &ids {
        p.client_gets_result(id);
    }
    p.end_round();
}

fn steady(version: ProtocolVersion, name: &str, case: fn(&mut Peers)) {
    for &backend in Backend::ALL {
        let mut p = Peers::ready(version, backend);
        for _ in 0..WARM_UP {
            case(&mut p);
        }
        let n = allocations_during(|| {
            for _ in 0..MEASURED {
                case(&mut p);
            }
        });
        assert_eq!(
            n, 0,
            "{version:?} {name} ({backend:?}): {n} allocations in {MEASURED} rounds \
             (MCPWIRE_ALLOC_TRACE=1 shows where)"
        );
        // The connections are still healthy afterwards.
        round_trip(&mut p);
    }
}

#[test]
fn handshake_era_round_trip_allocates_nothing() {
    steady(ProtocolVersion::V2025_11_25, "round trip", round_trip);
}

#[test]
fn handshake_era_notifications_allocate_nothing() {
    steady(ProtocolVersion::V2025_11_25, "notifications", notifications);
}

#[test]
fn handshake_era_error_response_allocates_nothing() {
    steady(
        ProtocolVersion::V2025_11_25,
        "error response",
        error_response,
    );
}

#[test]
fn handshake_era_cancellation_allocates_nothing() {
    steady(ProtocolVersion::V2025_11_25, "cancellation", cancelled);
}

#[test]
fn stateless_era_round_trip_allocates_nothing() {
    steady(ProtocolVersion::V2026_07_28, "round trip", round_trip);
}

#[test]
fn stateless_era_notifications_allocate_nothing() {
    steady(ProtocolVersion::V2026_07_28, "notifications", notifications);
}

#[test]
fn stateless_era_error_response_allocates_nothing() {
    steady(
        ProtocolVersion::V2026_07_28,
        "error response",
        error_response,
    );
}

#[test]
fn stateless_era_cancellation_allocates_nothing() {
    steady(ProtocolVersion::V2026_07_28, "cancellation", cancelled);
}

#[test]
fn the_counter_sees_the_engines_allocations() {
    // Guards against a vacuous zero: building and handshaking a pair allocates, and the
    // counter must see it.
    let n = allocations_during(|| {
        drop(std::hint::black_box(Peers::ready(
            ProtocolVersion::V2025_11_25,
            Backend::Native,
        )))
    });
    assert!(n > 0, "the counting allocator saw nothing");
}

#[test]
fn a_burst_of_requests_and_answers_allocates_nothing() {
    for version in [ProtocolVersion::V2025_11_25, ProtocolVersion::V2026_07_28] {
        for &backend in Backend::ALL {
            let mut p = Peers::ready(version, backend);
            for _ in 0..20 {
                burst(&mut p);
            }
            let n = allocations_during(|| {
                for _ in 0..10 {
                    burst(&mut p);
                }
            });
            assert_eq!(
                n, 0,
                "{version:?} burst of {BURST} ({backend:?}): {n} allocations in 10 bursts \
                 (MCPWIRE_ALLOC_TRACE=1 shows where)"
            );
        }
    }
}
