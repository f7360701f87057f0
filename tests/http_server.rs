//! The sans-IO Streamable HTTP server: every rule, in simulated time, no sockets.

mod common;

use common::pair::{Ev, own};
use mcpwire::Timestamp;
use mcpwire::conn::Config;
use mcpwire::http::client::{ResponseKind, StreamReader, classify, request_headers};
use mcpwire::http::{
    Body, ConnKey, HttpRequest, HttpResponse, HttpServer, HttpServerConfig, HttpStreamId,
};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::ProtocolVersion;
use serde_json::{Value, json};

const T0: Timestamp = Timestamp::ZERO;

fn server_config() -> Config {
    Config::server("http-test", "1.0")
        .with_capabilities(r#"{"tools":{"listChanged":true},"logging":{}}"#)
        .unwrap()
}

fn server() -> HttpServer {
    HttpServer::new(HttpServerConfig::new(server_config()))
}

/// A deterministic "random" source that never repeats across calls (a session id freed by
/// expiry or eviction must not come back for the next session).
fn rng() -> impl FnMut(&mut [u8]) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let mut n = NEXT.fetch_add(1 << 20, std::sync::atomic::Ordering::Relaxed);
    move |buf: &mut [u8]| {
        for b in buf {
            n = n
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (n >> 56) as u8;
        }
    }
}

/// Sends a request as a conforming client does: with `Content-Type` and `Accept` unless the
/// test gives its own.
fn send(s: &mut HttpServer, method: &str, headers: &[(&str, &str)], body: &str) -> HttpResponse {
    send_at(s, T0, method, headers, body)
}

fn send_at(
    s: &mut HttpServer,
    now: Timestamp,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> HttpResponse {
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("Host") {
        all.push(("Host", "127.0.0.1:3000"));
    }
    if method == "POST" && !has("Content-Type") {
        all.push(("Content-Type", "application/json"));
    }
    if !has("Accept") {
        all.push(("Accept", "application/json, text/event-stream"));
    }
    send_raw(s, now, method, &all, body)
}

/// Sends exactly these headers.
fn send_raw(
    s: &mut HttpServer,
    now: Timestamp,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> HttpResponse {
    let req = HttpRequest {
        method,
        headers,
        body: body.as_bytes(),
    };
    s.handle_request(now, &req, &mut rng())
}

fn header<'r>(r: &'r HttpResponse, name: &str) -> Option<&'r str> {
    r.headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A GET that resumes session `sid`'s stream after event `last`: its response's stream.
fn resumed_stream(s: &mut HttpServer, sid: &str, last: &str) -> HttpStreamId {
    let r = send(
        s,
        "GET",
        &[("Mcp-Session-Id", sid), ("Last-Event-ID", last)],
        "",
    );
    let Body::Stream(stream) = r.body else {
        panic!("a stream: {r:?}")
    };
    stream
}

fn json_body(r: &HttpResponse) -> Value {
    match &r.body {
        Body::Complete(_, b) => serde_json::from_slice(b).unwrap(),
        other => panic!("expected a JSON body, got {other:?}"),
    }
}

/// Opens session `sid`'s GET stream and reads what waits on it: the stream, its messages,
/// and whether it finished.
fn listen(s: &mut HttpServer, sid: &str) -> (HttpStreamId, Vec<Value>, bool) {
    let get = get_stream(
        s,
        &[("Mcp-Session-Id", sid), ("Accept", "text/event-stream")],
    );
    let (msgs, finished) = read_stream(s, get, &mut StreamReader::new());
    (get, msgs, finished)
}

/// Sends a GET with `headers` (an SSE stream is expected) and returns its stream.
fn get_stream(s: &mut HttpServer, headers: &[(&str, &str)]) -> HttpStreamId {
    let r = send(s, "GET", headers, "");
    assert_eq!(header(&r, "X-Accel-Buffering"), Some("no"), "{r:?}");
    // Settled as hosts settle every response, it keeps one such header (it got two).
    let settled = s.settle(r.clone());
    let count = |r: &HttpResponse| {
        r.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("X-Accel-Buffering"))
            .count()
    };
    assert_eq!(count(&settled), 1, "{settled:?}");
    let Body::Stream(stream) = r.body else {
        panic!("not a stream: {r:?}")
    };
    stream
}

/// Drains a stream; returns the messages and whether it finished.
fn read_stream(
    s: &mut HttpServer,
    id: HttpStreamId,
    reader: &mut StreamReader,
) -> (Vec<Value>, bool) {
    let mut out = Vec::new();
    let mut finished = false;
    while let Some(o) = s.poll_stream(id) {
        let bytes = o.bytes.to_vec();
        finished = o.finished;
        reader.feed(&bytes, |m| out.push(serde_json::from_slice(m).unwrap()));
        s.consume_stream(id, bytes.len());
        if bytes.is_empty() {
            break;
        }
    }
    (out, finished)
}

fn events(s: &mut HttpServer) -> Vec<(ConnKey, Ev)> {
    let mut out = Vec::new();
    while let Some((k, e)) = s.poll_event() {
        match own(e) {
            Ev::Ready { .. } => {}
            e => out.push((k, e)),
        }
    }
    out
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;

fn open_session(s: &mut HttpServer) -> String {
    let r = send(
        s,
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        INIT,
    );
    assert_eq!(r.status, 200);
    let sid = header(&r, "Mcp-Session-Id")
        .expect("a session id")
        .to_owned();
    assert!(sid.bytes().all(|b| (0x21..=0x7e).contains(&b)) && sid.len() >= 16);
    assert_eq!(json_body(&r)["result"]["protocolVersion"], "2025-11-25");
    let r = send(
        s,
        "POST",
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    assert_eq!(r.body, Body::Empty);
    sid
}

/// POSTs one request to an open session and returns the stream it gets, the connection it
/// reached and the request's id as the server saw it.
fn post_request(
    s: &mut HttpServer,
    sid: &str,
    body: &str,
) -> (HttpStreamId, ConnKey, mcpwire::jsonrpc::OwnedId) {
    let Body::Stream(stream) = send(s, "POST", &[("Mcp-Session-Id", sid)], body).body else {
        panic!("a request on a session gets a stream")
    };
    let evs = events(s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("the request reaches the server: {evs:?}")
    };
    (stream, *key, id.clone())
}

/// A `tools/call` (id 9) on session `sid`, left unanswered and unread.
fn post_call(s: &mut HttpServer, sid: &str) -> (HttpStreamId, ConnKey, mcpwire::jsonrpc::OwnedId) {
    post_request(
        s,
        sid,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}"#,
    )
}

/// A `tools/call` (id 9) on session `sid`, left unanswered, its stream read up to its priming
/// event.
fn call_and_prime(
    s: &mut HttpServer,
    sid: &str,
) -> (
    HttpStreamId,
    ConnKey,
    mcpwire::jsonrpc::OwnedId,
    StreamReader,
) {
    let (stream, key, id) = post_call(s, sid);
    let mut reader = StreamReader::new();
    let (none, finished) = read_stream(s, stream, &mut reader);
    assert!(none.is_empty() && !finished);
    (stream, key, id, reader)
}

/// A request the client cancels will get no answer: its POST stream ends at once, and a
/// later answer from the application goes nowhere. (The stream stayed open with keep-alives
/// until the client went away.) A cancellation of a request in flight on another stream, and
/// one naming no request, leave the stream alone.
#[test]
fn a_cancelled_request_ends_its_stream() {
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    let cancel = |n: i64| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{n}}}}}"#
        )
    };
    // Not this stream's request: it stays open.
    let r = send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], &cancel(77));
    assert_eq!(r.status, 202);
    let (msgs, finished) = read_stream(&mut s, stream, &mut reader);
    assert!(msgs.is_empty() && !finished);
    // Its own: it ends, with nothing in it.
    let r = send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], &cancel(9));
    assert_eq!(r.status, 202);
    assert!(woken(&mut s).contains(&stream));
    let (msgs, finished) = read_stream(&mut s, stream, &mut reader);
    assert!(msgs.is_empty(), "{msgs:?}");
    assert!(finished);
    assert_eq!(s.open_streams(), 0);
    // The application, told of the cancellation, may still answer: nothing is sent.
    answer_call(&mut s, key, &id);
    s.pump();
    assert_eq!(s.open_streams(), 0);
}

/// The application answers call `id` of connection `key`.
fn answer_call(s: &mut HttpServer, key: ConnKey, id: &mcpwire::jsonrpc::OwnedId) {
    s.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new("{\"content\":[]}").unwrap())
        .unwrap();
}

#[test]
fn foreign_host_or_origin_gets_403() {
    let mut s = server();
    for headers in [
        vec![("Host", "evil.example.com")],
        vec![
            ("Host", "127.0.0.1:3000"),
            ("Origin", "http://evil.example.com"),
        ],
        vec![("Host", "localhost.evil.com:80")],
    ] {
        let req = HttpRequest {
            method: "POST",
            headers: &headers,
            body: INIT.as_bytes(),
        };
        let r = s.handle_request(T0, &req, &mut rng());
        assert_eq!(r.status, 403, "{headers:?}");
    }
    for ok in [
        ("localhost:8080", "http://localhost:8080"),
        ("[::1]:1", "http://[::1]:1"),
        ("127.0.0.1", "null"),
    ] {
        let headers = [("Host", ok.0), ("Origin", ok.1)];
        assert_eq!(send(&mut s, "POST", &headers, INIT).status, 200, "{ok:?}");
    }
    // Two Origins, as two Hosts: which one a proxy in front read is anyone's guess (the first
    // passed the check whatever came after it).
    let headers = [
        ("Host", "127.0.0.1"),
        ("Origin", "http://localhost"),
        ("Origin", "https://evil.example"),
    ];
    let r = send(&mut s, "POST", &headers, INIT);
    assert_eq!(r.status, 400);
    assert_eq!(
        json_body(&r)["error"]["message"],
        "Bad Request: more than one Origin header"
    );
    // Two Content-Types too: a single value, whose first copy passed the check of the body's
    // type whatever came after it.
    let headers = [
        ("Content-Type", "application/json"),
        ("content-type", "text/plain"),
    ];
    let r = send(&mut s, "POST", &headers, INIT);
    assert_eq!(r.status, 400);
    assert_eq!(
        json_body(&r)["error"]["message"],
        "Bad Request: more than one Content-Type header"
    );
}

#[test]
fn sessions_come_from_the_hosts_random_source_and_end_with_delete() {
    let mut s = server();
    let a = open_session(&mut s);
    let b = open_session(&mut s);
    assert_ne!(a, b);
    assert_eq!(s.sessions(), 2);
    // Without a session id: 400; an unknown one: 404.
    let r = send(
        &mut s,
        "POST",
        &[],
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 400);
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", "nope")],
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 404);
    assert_eq!(
        send(&mut s, "DELETE", &[("Mcp-Session-Id", &a)], "").status,
        200
    );
    assert_eq!(
        send(
            &mut s,
            "POST",
            &[("Mcp-Session-Id", &a)],
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#
        )
        .status,
        404
    );
    assert_eq!(
        send(&mut s, "DELETE", &[("Mcp-Session-Id", &a)], "").status,
        404
    );
    assert_eq!(s.sessions(), 1);
    // The client side reads 404 on a session as "start again".
    assert_eq!(
        classify(404, Some("application/json"), true, false),
        ResponseKind::SessionExpired
    );
}

/// A random source that repeats itself gets the second `initialize` a 500, not a server that
/// spins for good looking for a fresh session id.
#[test]
fn a_random_source_that_repeats_itself_gets_500() {
    let mut s = server();
    let mut stuck = |b: &mut [u8]| b.fill(7);
    let mut send_init = |s: &mut HttpServer| {
        let headers = [
            ("Host", "127.0.0.1:3000"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        let req = HttpRequest {
            method: "POST",
            headers: &headers,
            body: INIT.as_bytes(),
        };
        s.handle_request(T0, &req, &mut stuck)
    };
    assert_eq!(send_init(&mut s).status, 200);
    let r = send_init(&mut s);
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(json_body(&r)["error"]["code"], -32603);
    assert_eq!(s.sessions(), 1);
}

#[test]
fn protocol_version_header_rules() {
    let mut s = server();
    let sid = open_session(&mut s);
    let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    assert_eq!(
        send(
            &mut s,
            "POST",
            &[
                ("Mcp-Session-Id", &sid),
                ("MCP-Protocol-Version", "2025-11-25")
            ],
            ping
        )
        .status,
        200
    );
    // Absent: assumed 2025-03-26 compatible, accepted.
    assert_eq!(
        send(
            &mut s,
            "POST",
            &[("Mcp-Session-Id", &sid)],
            r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#
        )
        .status,
        200
    );
    // Another version we serve is neither invalid nor unsupported (the official suite sends
    // 2025-03-26 on a 2025-11-25 session).
    for other in ["2025-06-18", "2025-03-26"] {
        let r = send(
            &mut s,
            "POST",
            &[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", other)],
            r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#,
        );
        assert_eq!(r.status, 200, "{other}");
    }
    for bad in ["1999-01-01", "2099-12-31", "nonsense", "2026-07-28"] {
        let r = send(
            &mut s,
            "POST",
            &[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", bad)],
            ping,
        );
        assert_eq!(r.status, 400, "{bad}");
        // The rule holds for every request of the session: a GET opened a stream and a
        // DELETE ended the session whatever version they named.
        let r = send(
            &mut s,
            "GET",
            &[
                ("Mcp-Session-Id", &sid),
                ("MCP-Protocol-Version", bad),
                ("Accept", "text/event-stream"),
            ],
            "",
        );
        assert_eq!(r.status, 400, "GET {bad}: {r:?}");
        let r = send(
            &mut s,
            "DELETE",
            &[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", bad)],
            "",
        );
        assert_eq!(r.status, 400, "DELETE {bad}: {r:?}");
    }
    // The session lives on, and takes a GET and a DELETE that name its version.
    let r = send(
        &mut s,
        "GET",
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Accept", "text/event-stream"),
        ],
        "",
    );
    assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
    let versioned = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    assert_eq!(send(&mut s, "DELETE", &versioned, "").status, 200);
    assert_eq!(send(&mut s, "DELETE", &versioned, "").status, 404);
    // `initialize` needs no header, but one that names no protocol version is invalid; a
    // known version is left to the negotiation in the body.
    let sessions = s.sessions();
    for bad in ["nonsense", "2099-12-31"] {
        let r = send(&mut s, "POST", &[("MCP-Protocol-Version", bad)], INIT);
        assert_eq!(r.status, 400, "{bad}: {r:?}");
    }
    assert_eq!(s.sessions(), sessions, "no session for them");
    let r = send(
        &mut s,
        "POST",
        &[("MCP-Protocol-Version", "2025-06-18")],
        INIT,
    );
    assert_eq!(r.status, 200, "{r:?}");
}

/// Opens a 2025-11-25 session on `s` and posts a `tools/call` (id "a") that asks for
/// progress: the response (an SSE stream) and the session's id.
fn post_slow_call_with_progress(s: &mut HttpServer) -> (HttpResponse, String) {
    let sid = open_session(s);
    let h = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let r = send(
        s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"p"}}}"#,
    );
    (r, sid)
}

#[test]
fn notifications_and_responses_get_202_and_requests_a_stream_on_the_post() {
    let mut s = server();
    let (r, sid) = post_slow_call_with_progress(&mut s);
    let h = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "Content-Type"), Some("text/event-stream"));
    // "servers SHOULD include the X-Accel-Buffering: no header" (2026-07-28), so that a
    // reverse proxy does not hold the stream's events back: on a response that stays a
    // stream once settled (a GET stream has it at once).
    let r = s.settle(r);
    assert_eq!(header(&r, "X-Accel-Buffering"), Some("no"));
    let Body::Stream(stream) = r.body else {
        panic!()
    };
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    // Progress and the answer travel on the POST's stream, which then ends.
    let conn = s.connection(*key).unwrap();
    conn.progress(id.as_id(), 1.0, Some(2.0), None).unwrap();
    conn.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    let mut reader = StreamReader::new();
    let (msgs, finished) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0]["method"], "notifications/progress");
    assert_eq!(msgs[1]["id"], "a");
    assert!(finished);
    // The priming event carried an id and a retry hint.
    assert!(reader.last_event_id().is_some());
    assert_eq!(reader.retry(), Some(std::time::Duration::from_millis(1000)));
    assert!(
        s.poll_stream(stream).is_none(),
        "a finished stream is forgotten"
    );
    // A response from the client (to a server request) is accepted with 202.
    let r = send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":77,"result":{}}"#,
    );
    assert_eq!(r.status, 202);
}

#[test]
fn concurrent_posts_get_their_own_streams_and_unrelated_messages_use_get() {
    let mut s = server();
    let sid = open_session(&mut s);
    let h = [("Mcp-Session-Id", sid.as_str())];
    let Body::Stream(one) = send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .body
    else {
        panic!()
    };
    let Body::Stream(two) = send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .body
    else {
        panic!()
    };
    let evs = events(&mut s);
    assert_eq!(evs.len(), 2);
    // Answer in reverse order: each lands on its own stream.
    for (key, e) in evs.iter().rev() {
        let Ev::Request { id, .. } = e else { panic!() };
        let body = format!(r#"{{"tools":[],"for":{}}}"#, id);
        s.connection(*key)
            .unwrap()
            .respond(id.as_id(), RawJson::new(&body).unwrap())
            .unwrap();
    }
    let (a, _) = read_stream(&mut s, one, &mut StreamReader::new());
    let (b, _) = read_stream(&mut s, two, &mut StreamReader::new());
    assert_eq!(
        (a[0]["id"].clone(), b[0]["id"].clone()),
        (json!(1), json!(2))
    );
    // An unrelated server notification waits for, then uses, the GET stream.
    let key = s.connections()[0];
    s.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    s.pump();
    let (_, msgs, finished) = listen(&mut s, &sid);
    assert_eq!(
        msgs,
        vec![json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})]
    );
    assert!(!finished, "the standalone stream stays open");
}

/// A session's `tools/call` whose stream carries one progress notification, read by the
/// client; then the stream drops, and meanwhile a progress notification goes out with each of
/// `messages` (numbered from 2) and the answer: the server, the session, and the client's
/// reader (its last event id the first progress notification's).
fn dropped_then_answered(messages: &[Option<&str>]) -> (HttpServer, String, StreamReader) {
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id) = post_request(
        &mut s,
        &sid,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":5}}}"#,
    );
    s.connection(key)
        .unwrap()
        .progress(id.as_id(), 1.0, None, None)
        .unwrap();
    let mut reader = StreamReader::new();
    let (first, _) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(first.len(), 1);
    // The connection drops; more happens meanwhile.
    s.stream_closed(T0, stream);
    for (n, message) in (2..).zip(messages) {
        s.connection(key)
            .unwrap()
            .progress(id.as_id(), f64::from(n), None, *message)
            .unwrap();
    }
    s.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new("{}").unwrap())
        .unwrap();
    s.pump();
    (s, sid, reader)
}

/// [`dropped_then_answered`], then the client resumes with `Last-Event-ID`: what the resumed
/// stream carries, and whether it finished.
fn resumed_after_a_drop(messages: &[Option<&str>]) -> (Vec<serde_json::Value>, bool) {
    let (mut s, sid, mut reader) = dropped_then_answered(messages);
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    read_stream(&mut s, resumed, &mut reader)
}

#[test]
fn a_dropped_stream_resumes_with_last_event_id_without_loss_or_duplicates() {
    let (rest, finished) = resumed_after_a_drop(&[None]);
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["params"]["progress"], 2);
    assert_eq!(rest[1]["id"], 5);
    assert!(finished);
}

/// A client that resumes a finished stream again (and again, reading nothing) holds one
/// replay: each earlier response ends, named by `poll_woken`. Each held its own copy of up
/// to the store's bytes for the session, without bound (found by a review of the SSE streams).
#[test]
fn resuming_a_finished_stream_again_ends_the_earlier_replay() {
    let (mut s, sid, mut reader) = dropped_then_answered(&[]);
    let last = reader.last_event_id().unwrap().to_owned();
    let headers = [("Mcp-Session-Id", sid.as_str()), ("Last-Event-ID", &last)];
    let replays: Vec<HttpStreamId> = (0..3).map(|_| get_stream(&mut s, &headers)).collect();
    let named = woken(&mut s);
    for earlier in &replays[..2] {
        assert!(
            s.poll_stream(*earlier).is_none(),
            "{earlier:?} still replays"
        );
        assert!(named.contains(earlier), "{earlier:?} not named: {named:?}");
    }
    let (rest, finished) = read_stream(&mut s, replays[2], &mut reader);
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], 5);
    assert!(finished);
}

/// The default store keeps at most 4 MiB of a session's events: resuming after six 1 MiB
/// progress messages replays only the latest that fit, and the answer, which is newest.
#[test]
fn the_default_event_store_keeps_a_sessions_latest_four_mib() {
    let big = "m".repeat(1024 * 1024);
    let (rest, finished) = resumed_after_a_drop(&[Some(big.as_str()); 6]);
    let progress: Vec<_> = rest
        .iter()
        .filter_map(|m| m["params"]["progress"].as_i64())
        .collect();
    assert_eq!(
        progress,
        [5, 6, 7],
        "the latest that fit in 4 MiB with the answer"
    );
    assert_eq!(rest.last().unwrap()["id"], 5);
    assert!(finished);
}

#[test]
fn messages_waiting_for_a_get_stream_keep_the_latest_four_mib() {
    let mut s = server();
    let sid = open_session(&mut s);
    let key = s.connections()[0];
    // Six messages of 1 MiB each while no GET stream is open, then a small one.
    let big = "m".repeat(1024 * 1024);
    for n in 1..=6 {
        let params = format!(r#"{{"level":"info","data":"{big}","n":{n}}}"#);
        s.connection(key)
            .unwrap()
            .notify(
                "notifications/message",
                Some(RawJson::new(&params).unwrap()),
            )
            .unwrap();
        s.pump();
    }
    s.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    s.pump();
    let (_, msgs, finished) = listen(&mut s, &sid);
    let numbers: Vec<_> = msgs
        .iter()
        .filter_map(|m| m["params"]["n"].as_i64())
        .collect();
    assert_eq!(numbers, [4, 5, 6], "the latest that fit in 4 MiB");
    assert_eq!(
        msgs.last().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    assert!(!finished);
}

/// What `poll_woken` gives until it is empty.
fn woken(s: &mut HttpServer) -> Vec<HttpStreamId> {
    let mut all: Vec<HttpStreamId> = std::iter::from_fn(|| s.poll_woken()).collect();
    all.sort();
    all
}

/// A host that parks one task per open stream wakes only the streams `poll_woken` names:
/// another session's answer, notification or end leaves the rest of the streams asleep.
#[test]
fn only_the_streams_whose_output_changed_are_woken() {
    let mut s = server();
    let (a, b) = (open_session(&mut s), open_session(&mut s));
    let (get_a, get_b) = (listen(&mut s, &a).0, listen(&mut s, &b).0);
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#;
    let (post_a, key_a, id) = post_request(&mut s, &a, call);
    read_stream(&mut s, post_a, &mut StreamReader::new());
    woken(&mut s);
    // A's notification: A's GET stream only.
    s.connection(key_a)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    s.pump();
    assert_eq!(woken(&mut s), [get_a]);
    // A's answer: the POST stream that carries it only.
    read_stream(&mut s, get_a, &mut StreamReader::new());
    s.connection(key_a)
        .unwrap()
        .respond(id.as_id(), RawJson::new("{}").unwrap())
        .unwrap();
    s.pump();
    assert_eq!(woken(&mut s), [post_a]);
    let (msgs, finished) = read_stream(&mut s, post_a, &mut StreamReader::new());
    assert_eq!((msgs.len(), finished), (1, true));
    // Requests on B wake nothing of A's.
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(
        send(&mut s, "POST", &[("Mcp-Session-Id", &b)], ping).status,
        200
    );
    assert!(!woken(&mut s).contains(&get_a));
    // B's DELETE finishes B's GET stream: woken, and it ends.
    send(&mut s, "DELETE", &[("Mcp-Session-Id", &b)], "");
    assert_eq!(woken(&mut s), [get_b]);
    assert!(read_stream(&mut s, get_b, &mut StreamReader::new()).1);
    // Nothing is left to take, and A's GET stream still waits.
    assert!(woken(&mut s).is_empty());
    let out = s.poll_stream(get_a).unwrap();
    assert!(out.bytes.is_empty() && !out.finished);
}

/// A batch in a session whose version has none (2025-06-18 and later, and 2024-11-05) is
/// refused with 400 at once. It opened an SSE stream that waited for answers its requests
/// would never get, and a batch of notifications got 202 with its error sent elsewhere.
#[test]
fn batches_in_sessions_without_them_are_refused_at_once() {
    for version in ["2025-11-25", "2025-06-18", "2024-11-05"] {
        let mut s = server();
        let r = send(&mut s, "POST", &[], &INIT.replace("2025-11-25", version));
        let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], initialized);
        for batch in [
            r#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
            r#"[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]"#,
        ] {
            let r = send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], batch);
            assert_eq!(r.status, 400, "{version} {batch}: {r:?}");
            let v = json_body(&r);
            assert_eq!(v["error"]["code"], -32600, "{version}: {v}");
        }
        // The session goes on.
        let ping = r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#;
        let r = send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], ping);
        assert_eq!(r.status, 200, "{version}: {r:?}");
    }
}

#[test]
fn batches_travel_in_2025_03_26_sessions() {
    let mut s = server();
    let init = INIT.replace("2025-11-25", "2025-03-26");
    let r = send(&mut s, "POST", &[], &init);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
    );
    let v = json_body(&r);
    assert_eq!(v.as_array().unwrap().len(), 2);
    // A notification and an invalid member: the invalid member's error answers the POST
    // (it got 202, and the error went to the GET stream, which carries no responses).
    for invalid in [r#"{"jsonrpc":"2.0","id":7,"method":5}"#, "1"] {
        let body = format!(
            r#"[{{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}},{invalid}]"#
        );
        let r = send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], &body);
        assert_eq!(r.status, 200, "{invalid}: {r:?}");
        let v = json_body(&r);
        assert_eq!(v[0]["error"]["code"], -32600, "{invalid}: {v}");
    }
    let (_, on_get, _) = listen(&mut s, &sid);
    assert!(on_get.is_empty(), "{on_get:?}");
    // A request cancelled in its own batch gets no answer, and its stream ends.
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}]"#,
    );
    let Body::Stream(stream) = r.body else {
        panic!("{r:?}")
    };
    let (msgs, finished) = read_stream(&mut s, stream, &mut StreamReader::new());
    assert!(msgs.is_empty() && finished, "{msgs:?} {finished}");
    for (key, e) in events(&mut s) {
        if let Ev::Request { id, .. } = e {
            answer_call(&mut s, key, &id);
        }
    }
    s.pump();
    assert_eq!(s.open_streams(), 1, "only the GET stream is open");
}

// ---- 2026-07-28 -------------------------------------------------------------------------------

fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Content-Type", "application/json"),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name", n));
    }
    h
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// An `initialize` sent as a notification (no id) opens nothing and takes no session's room:
/// at the cap it evicted an idle session, and got 202.
#[test]
fn an_initialize_without_an_id_gets_400_and_evicts_nothing() {
    let mut config = HttpServerConfig::new(server_config());
    config.max_sessions = 1;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let body = r#"{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
    let r = send(&mut s, "POST", &[], body);
    assert_eq!(r.status, 400);
    assert_eq!(s.sessions(), 1);
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
    );
    assert_eq!(r.status, 200, "the session lives on");
}

/// A session whose connection closed while its `initialize` was handled (here: an output
/// bound of 0, so the engine's first answer closes it) leaves no entry behind that the
/// eviction at the session cap picks for good: the next `initialize` looped for ever.
#[test]
fn a_session_whose_connection_went_at_once_does_not_hang_the_next_initialize() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut server = server_config();
        server.limits.max_buffered_output = 0;
        let mut config = HttpServerConfig::new(server);
        config.max_sessions = 1;
        let mut s = HttpServer::new(config);
        let mut statuses = Vec::new();
        for _ in 0..2 {
            statuses.push(send(&mut s, "POST", &[], INIT).status);
            events(&mut s);
        }
        let _ = tx.send(statuses);
    });
    let statuses = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the second initialize returned");
    assert_eq!(statuses.len(), 2);
}

/// A 2026-07-28 notification the application is to see (one of its own, unknown to MCP) is
/// handed out after its 202: the request's connection went with the answer, its event with
/// it ("Accepted", then lost). The connection goes once the event is out.
#[test]
fn a_stateless_notification_reaches_the_application() {
    let mut s = server();
    let body =
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/acme/ping","params":{{{META}}}}}"#);
    let r = send(
        &mut s,
        "POST",
        &modern_headers("notifications/acme/ping", None),
        &body,
    );
    assert_eq!(r.status, 202);
    let evs = events(&mut s);
    assert!(
        matches!(&evs[..], [(_, Ev::Notification { method, .. })] if method == "notifications/acme/ping"),
        "{evs:?}"
    );
    assert!(
        s.connections().is_empty(),
        "the connection goes with its event"
    );
}

/// A notification the client never sends in its version (one of the server's, or one another
/// version has) cannot be accepted: 400, as "If the server cannot accept it, it MUST return an
/// HTTP error status code" says, not 202. Stateless requests and sessions alike; a
/// notification of the client's own still gets 202.
#[test]
fn a_notification_the_client_never_sends_gets_400() {
    let mut s = server();
    for method in [
        "notifications/progress",
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/tools/list_changed",
        "ping",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{{{META}}}}}"#);
        let r = send(&mut s, "POST", &modern_headers(method, None), &body);
        assert_eq!(r.status, 400, "{method}");
        assert_eq!(json_body(&r)["error"]["code"], -32600, "{method}");
        assert!(events(&mut s).is_empty(), "{method}");
        assert!(s.connections().is_empty(), "{method}");
    }
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":1,{META}}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("notifications/cancelled", None),
        &body,
    );
    assert_eq!(r.status, 202);
    let sid = open_session(&mut s);
    let session = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    for method in ["notifications/tools/list_changed", "notifications/message"] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#);
        assert_eq!(
            send(&mut s, "POST", &session, &body).status,
            400,
            "{method}"
        );
    }
    for method in [
        "notifications/roots/list_changed",
        "notifications/acme/ping",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#);
        assert_eq!(
            send(&mut s, "POST", &session, &body).status,
            202,
            "{method}"
        );
    }
    // A 2025-03-26 batch of notifications with one such is refused whole.
    let init = INIT.replace("2025-11-25", "2025-03-26");
    let r = send(&mut s, "POST", &[], &init);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    let session = [("Mcp-Session-Id", sid.as_str())];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(send(&mut s, "POST", &session, initialized).status, 202);
    events(&mut s);
    let refused = r#"[{"jsonrpc":"2.0","method":"notifications/acme/ping"},{"jsonrpc":"2.0","method":"notifications/message"}]"#;
    assert_eq!(send(&mut s, "POST", &session, refused).status, 400);
    assert!(events(&mut s).is_empty(), "nothing of it was taken");
    let taken = r#"[{"jsonrpc":"2.0","method":"notifications/acme/ping"}]"#;
    assert_eq!(send(&mut s, "POST", &session, taken).status, 202);
}

#[test]
fn stateless_requests_need_matching_headers() {
    let mut s = server();
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{META},"name":"echo"}}}}"#
    );
    for (headers, what) in [
        (modern_headers("tools/list", Some("echo")), "method"),
        (modern_headers("tools/call", Some("other")), "name"),
        (modern_headers("tools/call", None), "missing name"),
        (
            vec![("MCP-Protocol-Version", "2026-07-28")],
            "missing method",
        ),
        (
            vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            "dup",
        ),
    ] {
        let r = send(&mut s, "POST", &headers, &call);
        assert_eq!(r.status, 400, "{what}");
        let v = json_body(&r);
        assert_eq!(v["error"]["code"], -32020, "{what}");
        assert_eq!(v["id"], 1, "{what}");
    }
    // A version header that contradicts `_meta`.
    let mut h = modern_headers("tools/call", Some("echo"));
    h[0] = ("MCP-Protocol-Version", "2025-11-25");
    let r = send(&mut s, "POST", &h, &call);
    assert_eq!(
        (r.status, json_body(&r)["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // Matching headers: an SSE stream for the application's answer.
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("echo")),
        &call,
    );
    assert_eq!(r.status, 200);
    assert!(matches!(r.body, Body::Stream(_)));
    // Non-header-safe names travel base64-encoded.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{{META},"name":"caf\u00e9 tool"}}}}"#
    );
    let headers = request_headers(body.as_bytes(), Some(ProtocolVersion::V2026_07_28), None);
    let name = headers
        .iter()
        .find(|(k, _)| *k == "Mcp-Name")
        .unwrap()
        .1
        .clone();
    assert!(name.starts_with("=?base64?"), "{name}");
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(send(&mut s, "POST", &h, &body).status, 200);
}

/// An error the application gives once the stream's head is out (the host has drained it)
/// cannot change the status: it goes as an event of the `200` stream.
#[test]
fn a_stateless_error_given_after_the_head_goes_on_the_stream() {
    let mut s = server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{{META},"name":"slow"}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("slow")),
        &body,
    );
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    let r = s.settle(r);
    assert_eq!(r.status, 200);
    let Body::Stream(stream) = r.body else {
        panic!("a stream while the call is open")
    };
    let mut reader = StreamReader::new();
    read_stream(&mut s, stream, &mut reader);
    s.connection(*key)
        .unwrap()
        .respond_error(id.as_id(), -32602, "bad arguments", None)
        .unwrap();
    let (messages, finished) = read_stream(&mut s, stream, &mut reader);
    assert!(finished);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["id"], 4);
    assert_eq!(messages[0]["error"]["code"], -32602);
}

#[test]
fn stateless_refusals_map_to_http_statuses() {
    let mut s = server();
    let r = send(
        &mut s,
        "POST",
        &modern_headers("nope/nope", None),
        &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"nope/nope","params":{{{META}}}}}"#),
    );
    assert_eq!(
        r.status, 200,
        "an unknown custom method is the application's to answer"
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("ping", None),
        &format!(r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{{META}}}}}"#),
    );
    assert_eq!(
        (r.status, json_body(&r)["error"]["code"].clone()),
        (404, json!(-32601))
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/list", None),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    );
    assert_eq!(
        (r.status, json_body(&r)["error"]["code"].clone()),
        (400, json!(-32602))
    );
    let mut h = modern_headers("tools/list", None);
    h[0] = ("MCP-Protocol-Version", "2099-01-01");
    let r = send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    );
    assert_eq!(r.status, 400);
    let v = json_body(&r);
    assert_eq!(v["error"]["code"], -32022);
    assert!(
        v["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("server/discover", None),
        &format!(r#"{{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{{{META}}}}}"#),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        json_body(&r)["result"]["supportedVersions"][0],
        "2026-07-28"
    );
    // Notifications: 202. GET and DELETE: 405.
    let r = send(
        &mut s,
        "POST",
        &[("MCP-Protocol-Version", "2026-07-28")],
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
    );
    assert_eq!(r.status, 202);
    assert_eq!(
        send(&mut s, "GET", &[("MCP-Protocol-Version", "2026-07-28")], "").status,
        405
    );
    assert_eq!(
        send(
            &mut s,
            "DELETE",
            &[("MCP-Protocol-Version", "2026-07-28")],
            ""
        )
        .status,
        405
    );
    assert_eq!(s.sessions(), 0, "no sessions in this era");
    // A GET gets 405 whatever it accepts: it is never served, so its Accept is not asked for
    // (it got 406).
    let modern = ("MCP-Protocol-Version", "2026-07-28");
    for accept in ["application/json", "text/html"] {
        let r = send_raw(
            &mut s,
            T0,
            "GET",
            &[("Host", "127.0.0.1:3000"), ("Accept", accept), modern],
            "",
        );
        assert_eq!(r.status, 405, "{accept}: {r:?}");
    }
    let r = send_raw(&mut s, T0, "GET", &[("Host", "127.0.0.1:3000"), modern], "");
    assert_eq!(r.status, 405, "{r:?}");
}

/// A 405 names every method the endpoint takes (RFC 9110 says it MUST): GET and DELETE too
/// where sessions are served (it said only POST). There, a GET or DELETE without a session
/// that names a handshake-era version gets 400, as the spec asks of a server that requires
/// one (it got a 405 that allowed GET and DELETE); so does a DELETE without a version. A GET
/// without one (a 2024-11-05 client opening its SSE stream, which falls back on 405), or
/// either naming the stateless era (whose legacy traffic gets 405), gets 405.
#[test]
fn a_405_allows_get_and_delete_where_sessions_are_served() {
    let mut s = server();
    let r = send(&mut s, "PUT", &[], "");
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(header(&r, "Allow"), Some("GET, POST, DELETE"));
    let r = send(&mut s, "GET", &[], "");
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(header(&r, "Allow"), Some("GET, POST, DELETE"));
    let r = send(&mut s, "DELETE", &[], "");
    assert_eq!(r.status, 400, "{r:?}");
    for method in ["GET", "DELETE"] {
        let r = send(
            &mut s,
            method,
            &[("MCP-Protocol-Version", "2025-06-18")],
            "",
        );
        assert_eq!(r.status, 400, "{method}: {r:?}");
        assert!(
            json_body(&r)["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Mcp-Session-Id"),
            "{method}: {r:?}"
        );
        let r = send(
            &mut s,
            method,
            &[("MCP-Protocol-Version", "2025-11-25")],
            "",
        );
        assert_eq!(r.status, 400, "{method}: {r:?}");
        let r = send(
            &mut s,
            method,
            &[("MCP-Protocol-Version", "2026-07-28")],
            "",
        );
        assert_eq!(r.status, 405, "{method}: {r:?}");
        assert_eq!(header(&r, "Allow"), Some("GET, POST, DELETE"), "{method}");
    }
    // A server of the stateless era alone takes POST only.
    let mut config = HttpServerConfig::new(server_config());
    config.server.versions = vec![ProtocolVersion::V2026_07_28];
    let mut s = HttpServer::new(config);
    for method in ["PUT", "GET", "DELETE"] {
        let r = send(&mut s, method, &[], "");
        assert_eq!(r.status, 405, "{method}: {r:?}");
        assert_eq!(header(&r, "Allow"), Some("POST"), "{method}");
    }
}

#[test]
fn closing_a_stateless_stream_cancels_the_request() {
    let mut s = server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{{{META},"name":"slow"}}}}"#
    );
    let Body::Stream(stream) = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("slow")),
        &body,
    )
    .body
    else {
        panic!()
    };
    let evs = events(&mut s);
    assert!(matches!(evs[0].1, Ev::Request { .. }));
    let key = evs[0].0;
    s.stream_closed(T0, stream);
    assert_eq!(s.open_streams(), 0);
    // The application is told, on the request's own connection...
    let evs = events(&mut s);
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].0, key);
    assert!(
        matches!(&evs[0].1, Ev::PeerCancelled { id, .. } if format!("{id:?}").contains('x')),
        "{evs:?}"
    );
    // ...which is gone once that was handed out.
    assert!(
        s.connection(key).is_none(),
        "the request's connection is gone with its stream"
    );
}

/// A host giving up on streams at the end of its shutdown grace: each request still awaited
/// gets a `-32603` answer on its stream, which then finishes (a stateless request's and a
/// session's alike); a GET stream, awaiting nothing, is left as it is.
#[test]
fn an_abandoned_stream_answers_what_it_awaits_with_an_error() {
    let mut s = server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{{{META},"name":"slow"}}}}"#
    );
    let Body::Stream(stateless) = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("slow")),
        &body,
    )
    .body
    else {
        panic!()
    };
    let sid = open_session(&mut s);
    let (call, _, _, mut reader) = call_and_prime(&mut s, &sid);
    events(&mut s);
    for (stream, id) in [
        (stateless, serde_json::json!("x")),
        (call, serde_json::json!(9)),
    ] {
        assert_eq!(s.abandon_stream(stream), 1);
        let mut fresh = StreamReader::new();
        let reader = if stream == call {
            &mut reader
        } else {
            &mut fresh
        };
        let (messages, finished) = read_stream(&mut s, stream, reader);
        assert!(finished, "the stream finishes with its answer");
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(messages[0]["id"], id);
        assert_eq!(messages[0]["error"]["code"], -32603);
        assert_eq!(s.abandon_stream(stream), 0, "answered once");
    }
    let get = get_stream(
        &mut s,
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    assert_eq!(s.abandon_stream(get), 0);
    assert!(s.poll_stream(get).is_some_and(|o| !o.finished));
}

/// `abandon_streams` does the same for every stream at once, and names them in
/// `poll_woken`; the GET stream is left as it is.
#[test]
fn abandon_streams_answers_every_awaited_request() {
    let mut s = server();
    let sid = open_session(&mut s);
    let mut calls = Vec::new();
    for id in [9, 10] {
        let (stream, key, _) = post_request(
            &mut s,
            &sid,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x"}}}}"#
            ),
        );
        calls.push((stream, key, id));
    }
    let get = get_stream(
        &mut s,
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    events(&mut s);
    woken(&mut s);
    assert_eq!(s.abandon_streams(), 2);
    let named = woken(&mut s);
    for (stream, _, id) in calls {
        assert!(named.contains(&stream), "{stream:?} not woken: {named:?}");
        let (messages, finished) = read_stream(&mut s, stream, &mut StreamReader::new());
        assert!(finished);
        let answer = messages.iter().find(|m| m["id"] == id).expect("its answer");
        assert_eq!(answer["error"]["code"], -32603);
    }
    assert!(s.poll_stream(get).is_some_and(|o| !o.finished));
    assert_eq!(s.abandon_streams(), 0);
}

/// A session the application closes through its view (or whose connection closes for any
/// other reason) ends as if its client had deleted it: its streams finish, a later request
/// naming it gets 404, and the connection goes once its `Closed` event is handed out. (It
/// lingered: every later request got a stream that nothing would ever answer, held open by
/// keep-alives, and the open stream kept the session from expiring.)
#[test]
fn a_session_closed_through_its_view_ends() {
    let mut s = server();
    let sid = open_session(&mut s);
    let (pending, key, _id, mut reader) = call_and_prime(&mut s, &sid);
    s.connection(key)
        .unwrap()
        .close(T0, std::time::Duration::ZERO);
    s.pump();
    let (msgs, finished) = read_stream(&mut s, pending, &mut reader);
    assert!(finished, "the pending call's stream finishes: {msgs:?}");
    let r = send(
        &mut s,
        "POST",
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 404, "{r:?}");
    let evs = events(&mut s);
    assert!(
        evs.iter()
            .any(|(k, e)| *k == key && matches!(e, Ev::Closed { .. })),
        "{evs:?}"
    );
    assert!(s.connection(key).is_none());
    assert_eq!(s.sessions(), 0);
    s.stream_closed(T0, pending);
    assert_eq!(s.open_streams(), 0);
}

/// The same for a stateless request's connection: its stream finishes (without an answer:
/// the application closed it), and the connection goes.
#[test]
fn a_stateless_request_closed_through_its_view_ends() {
    let mut s = server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{{{META},"name":"slow"}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("slow")),
        &body,
    );
    let evs = events(&mut s);
    let key = evs[0].0;
    s.connection(key)
        .unwrap()
        .close(T0, std::time::Duration::ZERO);
    let settled = s.settle(r);
    if let Body::Stream(stream) = settled.body {
        let (_, finished) = read_stream(&mut s, stream, &mut StreamReader::new());
        assert!(finished, "the request's stream finishes");
        s.stream_closed(T0, stream);
    }
    events(&mut s);
    assert!(s.connection(key).is_none(), "the connection is gone");
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn each_stateless_request_stands_alone_and_is_forgotten_after_its_answer() {
    let mut s = server();
    let mut streams = Vec::new();
    for i in 0..3 {
        // The same id from different clients at once: no collision.
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META},"n":{i}}}}}"#
        );
        let Body::Stream(st) =
            send(&mut s, "POST", &modern_headers("tools/list", None), &body).body
        else {
            panic!()
        };
        streams.push(st);
    }
    let evs = events(&mut s);
    assert_eq!(evs.len(), 3);
    for (key, e) in &evs {
        let Ev::Request { id, .. } = e else { panic!() };
        s.connection(*key)
            .unwrap()
            .respond(id.as_id(), RawJson::new(r#"{"tools":[]}"#).unwrap())
            .unwrap();
    }
    for st in streams {
        let (msgs, finished) = read_stream(&mut s, st, &mut StreamReader::new());
        assert_eq!(msgs[0]["result"]["resultType"], "complete");
        assert!(finished);
    }
    assert!(s.connections().is_empty());
}

/// Each stateless connection takes over the memory of the one before it (its box and emptied
/// buffers): nothing of the earlier request may show through, whatever it left behind.
#[test]
fn a_stateless_request_sees_nothing_of_the_one_before_it() {
    let mut s = server();
    for (i, text) in ["first", "second", "third"].into_iter().enumerate() {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"n":{i}}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"progressToken":"p{i}"}}}}}}"#
        );
        let Body::Stream(st) = send(
            &mut s,
            "POST",
            &modern_headers("tools/call", Some("echo")),
            &body,
        )
        .body
        else {
            panic!()
        };
        let evs = events(&mut s);
        assert_eq!(evs.len(), 1, "request {i}: {evs:?}");
        let (key, Ev::Request { id, params, .. }) = &evs[0] else {
            panic!("{evs:?}")
        };
        assert_eq!(
            serde_json::from_str::<Value>(params.as_deref().unwrap()).unwrap()["arguments"]["n"],
            i
        );
        let conn = s.connection(*key).unwrap();
        if i == 0 {
            // Leave more behind than an answer: a progress notification before it.
            conn.progress(id.as_id(), 1.0, None, None).unwrap();
        }
        conn.respond(
            id.as_id(),
            RawJson::new(&format!(
                r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#
            ))
            .unwrap(),
        )
        .unwrap();
        let (msgs, finished) = read_stream(&mut s, st, &mut StreamReader::new());
        assert!(finished);
        let answers: Vec<&Value> = msgs.iter().filter(|m| m.get("id").is_some()).collect();
        assert_eq!(answers.len(), 1, "request {i}: {msgs:?}");
        assert_eq!(answers[0]["result"]["content"][0]["text"], text);
        let progress = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/progress");
        assert_eq!(
            progress.count(),
            usize::from(i == 0),
            "request {i}: {msgs:?}"
        );
        assert!(s.connections().is_empty());
    }
}

/// A handshake-era session whose client declared `elicitation`, with a `tools/call` (id
/// `"call"`) under way: the server, the session id, and the call's stream, connection and id.
fn elicitation_session_with_a_call() -> (
    HttpServer,
    String,
    (HttpStreamId, ConnKey, mcpwire::jsonrpc::OwnedId),
) {
    let mut s = server();
    let init = INIT.replace(
        r#""capabilities":{}"#,
        r#""capabilities":{"elicitation":{}}"#,
    );
    let r = send(&mut s, "POST", &[], &init);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    let (stream, key, id) = post_request(
        &mut s,
        &sid,
        r#"{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"ask"}}"#,
    );
    (s, sid, (stream, key, id))
}

#[test]
fn a_server_request_made_for_a_tool_call_travels_on_that_calls_stream() {
    let (mut s, sid, (stream, key, id)) = elicitation_session_with_a_call();
    let ask = s
        .connection(key)
        .unwrap()
        .request_related(
            T0,
            id.as_id(),
            "elicitation/create",
            Some(
                RawJson::new(
                    r#"{"message":"name?","requestedSchema":{"type":"object","properties":{}}}"#,
                )
                .unwrap(),
            ),
            Default::default(),
        )
        .unwrap();
    let mut reader = StreamReader::new();
    let (msgs, finished) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(msgs[0]["method"], "elicitation/create");
    assert!(!finished, "the call is still open");
    // The client answers with its own POST (202), and the tool call completes on the stream.
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"action":"accept","content":{{"name":"x"}}}}}}"#,
        ask.0
    );
    assert_eq!(
        send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], &answer).status,
        202
    );
    let evs = events(&mut s);
    assert!(matches!(evs[0].1, Ev::Response { .. }), "{evs:?}");
    s.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    let (msgs, finished) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(msgs[0]["id"], "call");
    assert!(finished);
}

/// The cancellation of a server's request made for a tool call travels on that call's
/// stream, as the request did ("related to the originating client request"): it went to
/// the session's GET stream, or waited for one, and a client without one never learned that
/// its elicitation was withdrawn while the call ran. Once the call's stream has ended, a
/// cancellation goes where unrelated messages go (found by a review of the HTTP transport).
#[test]
fn a_server_requests_cancellation_travels_on_its_calls_stream() {
    let (mut s, sid, (stream, key, id)) = elicitation_session_with_a_call();
    let elicit = || {
        RawJson::new(r#"{"message":"name?","requestedSchema":{"type":"object","properties":{}}}"#)
            .unwrap()
    };
    let conn = s.connection(key).unwrap();
    let ask = conn
        .request_related(
            T0,
            id.as_id(),
            "elicitation/create",
            Some(elicit()),
            Default::default(),
        )
        .unwrap();
    conn.cancel(T0, ask, Some("not needed")).unwrap();
    let mut reader = StreamReader::new();
    let (msgs, finished) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(msgs[0]["method"], "elicitation/create", "{msgs:?}");
    assert_eq!(msgs[1]["method"], "notifications/cancelled", "{msgs:?}");
    assert_eq!(msgs[1]["params"]["requestId"], ask.0);
    assert!(!finished, "the call is still open");

    // A second one, cancelled after the call was answered and its stream ended: the
    // cancellation waits for the session's GET stream.
    let conn = s.connection(key).unwrap();
    let late = conn
        .request_related(
            T0,
            id.as_id(),
            "elicitation/create",
            Some(elicit()),
            Default::default(),
        )
        .unwrap();
    conn.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    let (_, finished) = read_stream(&mut s, stream, &mut reader);
    assert!(finished);
    s.connection(key)
        .unwrap()
        .cancel(T0, late, Some("the call ended"))
        .unwrap();
    let r = send(
        &mut s,
        "GET",
        &[("Mcp-Session-Id", &sid), ("Accept", "text/event-stream")],
        "",
    );
    let Body::Stream(get) = r.body else {
        panic!("no GET stream: {}", r.status)
    };
    let (msgs, _) = read_stream(&mut s, get, &mut StreamReader::new());
    assert!(
        msgs.iter().any(|m| m["method"] == "notifications/cancelled"
            && m["params"]["requestId"] == late.0),
        "{msgs:?}"
    );
}

#[test]
fn a_stream_cut_mid_event_resumes_without_the_torn_event() {
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id) = post_request(
        &mut s,
        &sid,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":5}}}"#,
    );
    let conn = s.connection(key).unwrap();
    conn.progress(id.as_id(), 1.0, None, None).unwrap();
    conn.progress(id.as_id(), 2.0, None, None).unwrap();
    // The host writes all of the first event but only half of the second, then the client
    // goes away; the answer comes while nobody holds the stream.
    let bytes = s.poll_stream(stream).unwrap().bytes.to_vec();
    let second = bytes.windows(2).rposition(|w| w == b"\n\n").unwrap();
    let cut = bytes[..second]
        .windows(2)
        .rposition(|w| w == b"\n\n")
        .unwrap()
        + 2
        + 10;
    let mut reader = StreamReader::new();
    let mut got = Vec::new();
    reader.feed(&bytes[..cut], |m| {
        got.push(serde_json::from_slice::<Value>(m).unwrap())
    });
    s.consume_stream(stream, cut);
    s.stream_closed(T0, stream);
    s.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new("{}").unwrap())
        .unwrap();
    s.pump();
    assert_eq!(
        s.open_streams(),
        0,
        "a stream nobody holds ends with its answer"
    );
    reader.reconnected();
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, finished) = read_stream(&mut s, resumed, &mut reader);
    got.extend(rest);
    assert!(finished);
    let progress: Vec<f64> = got
        .iter()
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert_eq!(progress, vec![1.0, 2.0], "{got:?}");
    assert_eq!(got.last().unwrap()["id"], 5);
}

#[test]
fn a_resumed_request_stream_keeps_carrying_its_later_answer() {
    // The sse-retry pattern: the stream closes after the priming event, the client resumes
    // by GET, and the answer comes afterwards on the resumed stream.
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    s.stream_closed(T0, stream);
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (none, finished) = read_stream(&mut s, resumed, &mut reader);
    assert!(none.is_empty() && !finished, "still waiting for the answer");
    answer_call(&mut s, key, &id);
    let (msgs, finished) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["id"], 9);
    assert!(finished);
    assert_eq!(s.open_streams(), 0);
}

/// A session of `s` with its GET stream open (the flood tests' log messages go there).
fn listening_session(mut s: HttpServer) -> (HttpServer, String) {
    let sid = open_session(&mut s);
    let _ = listen(&mut s, &sid);
    (s, sid)
}

/// Resumes `sid`'s stream from `last`: the resumption carries call 9's answer alone, and
/// finishes.
fn resumes_with_the_answer(s: &mut HttpServer, sid: &str, last: &str, reader: &mut StreamReader) {
    let resumed = get_stream(s, &[("Mcp-Session-Id", sid), ("Last-Event-ID", last)]);
    let (msgs, finished) = read_stream(s, resumed, reader);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 9);
    assert!(finished);
}

/// Sends `n` log messages to session `key`'s open GET stream: each one an event in the store.
fn flood_get_stream(s: &mut HttpServer, key: ConnKey, n: usize) {
    for i in 0..n {
        let params = format!(r#"{{"level":"info","data":"line {i}"}}"#);
        s.connection(key)
            .unwrap()
            .notify(
                "notifications/message",
                Some(RawJson::new(&params).unwrap()),
            )
            .unwrap();
        s.pump();
    }
}

/// How a request's client loses its stream before the answer reaches it.
#[derive(Clone, Copy, Debug)]
enum Away {
    /// The connection drops before the answer is given: the stream lives on detached.
    BeforeTheAnswer,
    /// The answer waits in the stream, unwritten, when the connection drops.
    WithTheAnswerUnwritten,
    /// The application closes the stream for polling before it answers.
    ClosedForPolling,
}

/// A server whose store keeps 32 events a session: `FLOOD` events push out any older one.
fn small_store_server() -> HttpServer {
    let mut config = HttpServerConfig::new(server_config());
    config.event_store = 32;
    HttpServer::new(config)
}

/// More events than `small_store_server` keeps for a session.
const FLOOD: usize = 100;

/// A call whose client goes away (`away`), then `FLOOD` other events of the session, then
/// the client resumes: what it gets, and whether the resumed stream finished.
fn resumed_after_a_flood(away: Away) -> (Vec<Value>, bool) {
    let (mut s, sid) = listening_session(small_store_server());
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    let last = reader.last_event_id().unwrap().to_owned();
    match away {
        Away::BeforeTheAnswer => {
            s.stream_closed(T0, stream);
            answer_call(&mut s, key, &id);
            s.pump();
        }
        Away::WithTheAnswerUnwritten => {
            answer_call(&mut s, key, &id);
            s.pump();
            s.stream_closed(T0, stream);
        }
        Away::ClosedForPolling => {
            assert!(s.close_stream_for_polling(key, id.as_id()));
            answer_call(&mut s, key, &id);
            s.pump();
            let (_, finished) = drain_raw(&mut s, stream);
            assert!(finished);
            s.stream_closed(T0, stream);
        }
    }
    flood_get_stream(&mut s, key, FLOOD);
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    read_stream(&mut s, resumed, &mut reader)
}

#[test]
fn an_answer_its_client_did_not_get_outlives_the_event_store_bounds() {
    // The store keeps a session's latest events (here 32): a burst of log messages on the GET stream
    // pushed out the answer of a stream whose client was away, and the resumption replayed
    // nothing, so the client waited until its timeout. The answer is kept aside as well.
    for away in [
        Away::BeforeTheAnswer,
        Away::WithTheAnswerUnwritten,
        Away::ClosedForPolling,
    ] {
        let (msgs, finished) = resumed_after_a_flood(away);
        assert_eq!(msgs.len(), 1, "{away:?}: {msgs:?}");
        assert_eq!(msgs[0]["id"], 9, "{away:?}");
        assert!(finished, "{away:?}");
    }
}

#[test]
fn an_answer_kept_aside_is_replayed_once_in_its_place_and_again_after_a_second_drop() {
    let (mut s, sid) = listening_session(small_store_server());
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    let last = reader.last_event_id().unwrap().to_owned();
    s.stream_closed(T0, stream);
    answer_call(&mut s, key, &id);
    s.pump();
    // Without a flood the store still has the answer: it comes once, not twice.
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (msgs, _) = read_stream(&mut s, resumed, &mut StreamReader::new());
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    // That response was written out: a later resumption after a flood finds nothing kept.
    flood_get_stream(&mut s, key, FLOOD);
    let again = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (msgs, _) = read_stream(&mut s, again, &mut StreamReader::new());
    assert!(msgs.is_empty(), "delivered answers are not kept: {msgs:?}");
    // A resumption whose response drops before it is written keeps the answer for the next.
    let (stream, key, id, _) = call_and_prime(&mut s, &sid);
    s.stream_closed(T0, stream);
    answer_call(&mut s, key, &id);
    s.pump();
    flood_get_stream(&mut s, key, FLOOD);
    // From the start of that stream ("<stream>-0"): the priming event is gone, the answer
    // kept aside is not.
    let from_start = format!("{}-0", stream.0);
    let first = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &from_start)],
    );
    let Some(out) = s.poll_stream(first) else {
        panic!("the resumption has bytes")
    };
    let mut msgs = Vec::new();
    StreamReader::new().feed(out.bytes, |m| msgs.push(m.to_vec()));
    assert_eq!(msgs.len(), 1, "the answer, kept aside");
    // Its connection drops with none of it written; more events push on.
    s.stream_closed(T0, first);
    flood_get_stream(&mut s, key, FLOOD);
    resumes_with_the_answer(&mut s, &sid, &from_start, &mut reader);
}

#[test]
fn an_answer_given_after_a_close_for_polling_before_any_write_is_kept() {
    // The application closes the stream for polling (and answers) before its host wrote a
    // byte of it: the host writes the priming event's id afterwards, so the client can
    // resume, and the answer must be kept aside too (it was not: nothing had been written
    // when it was routed).
    let (mut s, sid) = listening_session(small_store_server());
    let (stream, key, id) = post_call(&mut s, &sid);
    assert!(s.close_stream_for_polling(key, id.as_id()));
    answer_call(&mut s, key, &id);
    s.pump();
    let mut reader = StreamReader::new();
    let (none, finished) = read_stream(&mut s, stream, &mut reader);
    assert!(none.is_empty() && finished, "{none:?}");
    let last = reader.last_event_id().unwrap().to_owned();
    s.stream_closed(T0, stream);
    flood_get_stream(&mut s, key, FLOOD);
    resumes_with_the_answer(&mut s, &sid, &last, &mut reader);
}

#[test]
fn a_resumption_cut_short_does_not_push_out_the_answer_it_carried() {
    // A resumption's response carries the stream's events under their own ids; cut short,
    // its unwritten answer was kept again under the response's stream, a copy no client
    // can name, and with a byte bound of about one answer the copy pushed out the original.
    let mut config = HttpServerConfig::new(server_config());
    config.event_store = 32;
    config.event_store_bytes = 3000;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let (_get, _, _) = listen(&mut s, &sid);
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    let last = reader.last_event_id().unwrap().to_owned();
    s.stream_closed(T0, stream);
    let text = "t".repeat(2000);
    let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
    s.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(&result).unwrap())
        .unwrap();
    s.pump();
    flood_get_stream(&mut s, key, FLOOD);
    for _ in 0..2 {
        // The resumption's response gets a few bytes out, then its connection drops.
        let fresh = resumed_stream(&mut s, &sid, &last);
        let Some(out) = s.poll_stream(fresh) else {
            panic!("the resumption has bytes")
        };
        assert!(out.bytes.len() > 2000, "it carries the answer");
        s.consume_stream(fresh, 10);
        s.stream_closed(T0, fresh);
    }
    resumes_with_the_answer(&mut s, &sid, &last, &mut reader);
}

#[test]
fn the_store_of_the_flood_tests_does_lose_the_answer() {
    // The control for the tests above: the same flood with nothing kept aside (no event id of
    // the stream was ever written out, so its client could not resume it and nothing is
    // kept) leaves the store without the answer.
    let (mut s, sid) = listening_session(small_store_server());
    let (stream, key, id) = post_call(&mut s, &sid);
    answer_call(&mut s, key, &id);
    s.pump();
    let _ = s.poll_stream(stream);
    s.stream_closed(T0, stream);
    flood_get_stream(&mut s, key, FLOOD);
    let resumed = get_stream(
        &mut s,
        &[
            ("Mcp-Session-Id", &sid),
            ("Last-Event-ID", &format!("{}-0", stream.0)),
        ],
    );
    let (msgs, _) = read_stream(&mut s, resumed, &mut StreamReader::new());
    assert!(msgs.is_empty(), "{msgs:?}");
}

#[test]
fn a_resumption_taking_over_a_held_response_carries_its_unwritten_answer() {
    // The client saw its connection break before the host did: the response still holds the
    // answer, unwritten, when the `Last-Event-ID` GET takes the stream over, after a burst
    // that pushed the answer out of the store.
    let (mut s, sid) = listening_session(small_store_server());
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    let last = reader.last_event_id().unwrap().to_owned();
    answer_call(&mut s, key, &id);
    s.pump();
    flood_get_stream(&mut s, key, FLOOD);
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    assert!(s.poll_stream(stream).is_none(), "the stale response ends");
    let (msgs, finished) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 9);
    assert!(finished);
}

#[test]
fn naming_a_resumptions_own_stream_does_not_drop_what_it_carried() {
    // A resumption's response gets a stream of its own (numbers are sequential, so a client
    // can name it): taking that one over replaced its bytes, and once it drained, the answer
    // it had carried counted as written out and went, unwritten.
    let (mut s, sid) = listening_session(small_store_server());
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    let last = reader.last_event_id().unwrap().to_owned();
    s.stream_closed(T0, stream);
    answer_call(&mut s, key, &id);
    s.pump();
    flood_get_stream(&mut s, key, FLOOD);
    let fresh = resumed_stream(&mut s, &sid, &last);
    // Before anything of it is written, the client names that stream (its host has not
    // noticed the connection break): it is taken over, and drains.
    let other = get_stream(
        &mut s,
        &[
            ("Mcp-Session-Id", &sid),
            ("Last-Event-ID", &format!("{}-0", fresh.0)),
        ],
    );
    let _ = read_stream(&mut s, other, &mut StreamReader::new());
    // The answer is still there for the stream it belongs to.
    resumes_with_the_answer(&mut s, &sid, &last, &mut reader);
}

/// `consume_stream` with more than is waiting counts as all of it, however large (it
/// overflowed past `usize::MAX` after a partial write: a panic, or in release a cursor moved
/// back by one byte).
#[test]
fn consuming_more_than_a_stream_holds_counts_as_all_of_it() {
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id, _reader) = call_and_prime(&mut s, &sid);
    answer_call(&mut s, key, &id);
    let waiting = s.poll_stream(stream).unwrap().bytes.len();
    assert!(waiting > 1);
    s.consume_stream(stream, 1);
    s.consume_stream(stream, usize::MAX);
    assert!(
        s.poll_stream(stream).is_none_or(|o| o.bytes.is_empty()),
        "all of it is written"
    );
    assert_eq!(s.open_streams(), 0, "the finished stream is forgotten");
}

#[test]
fn a_stream_resumed_while_its_first_response_is_still_held_leaves_that_response() {
    // The client's connection broke, but the server has not noticed yet: its response is still
    // held when the client's `Last-Event-ID` GET arrives. The GET takes the stream over, and
    // the stale response must end without taking any of what follows, else the answer goes
    // to a dead socket and the resumed client waits for it forever.
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &sid);
    while s.poll_woken().is_some() {}
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    assert_ne!(resumed, stream, "the new response needs its own handle");
    // The host learns that the old response has something to do: end.
    let mut woken = Vec::new();
    while let Some(w) = s.poll_woken() {
        woken.push(w);
    }
    assert!(woken.contains(&stream), "{woken:?}");
    assert!(s.poll_stream(stream).is_none(), "the stale response ends");
    answer_call(&mut s, key, &id);
    // The stale response's host notices its client is gone only now: nothing changes.
    assert!(s.poll_stream(stream).is_none());
    s.consume_stream(stream, 1 << 20);
    s.stream_closed(T0, stream);
    let (msgs, finished) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 9);
    assert!(finished);
    assert_eq!(s.open_streams(), 0);
    // Event ids still name the stream the client knows.
    let again = reader.last_event_id().unwrap();
    assert_eq!(
        again.split_once('-').unwrap().0,
        last.split_once('-').unwrap().0
    );
}

#[test]
fn a_stream_resumed_before_the_host_first_polled_it_replays_its_answer() {
    // Until the host first drains a stream, its events are held back (the answer may still
    // become a plain JSON body). A resumption that comes first must find them in the store.
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, key, id) = post_call(&mut s, &sid);
    answer_call(&mut s, key, &id);
    s.pump();
    // Stream ids are sequential: a client can name this one before it saw any event of it.
    let last = format!("{}-0", stream.0);
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let mut reader = StreamReader::new();
    let (msgs, finished) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 9);
    assert!(finished);
    assert!(s.poll_stream(stream).is_none());
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn a_stream_that_finishes_empty_is_forgotten_once_polled() {
    // A host ends a response when the poll says it finished and nothing is left; it need not
    // report zero bytes written. Nothing may stay behind: not the stream, and not the hold it
    // keeps on its session (a held stream keeps a session from expiring).
    let mut config = HttpServerConfig::new(server_config());
    config.session_idle_timeout = std::time::Duration::from_secs(60);
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let listen = [("Mcp-Session-Id", sid.as_str())];
    // A second GET stream replaces the first, which finishes with nothing left.
    let first = get_stream(&mut s, &listen);
    let mut reader = StreamReader::new();
    read_stream(&mut s, first, &mut reader);
    let second = get_stream(&mut s, &listen);
    let out = s
        .poll_stream(first)
        .expect("the first still answers its poll");
    assert!(out.bytes.is_empty() && out.finished);
    // A `Last-Event-ID` naming a stream the server never had: a finished, empty stream.
    let never = format!("{}-0", second.0 + 1_000);
    let empty = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &never)],
    );
    let out = s.poll_stream(empty).expect("it answers its poll");
    assert!(out.bytes.is_empty() && out.finished);
    assert_eq!(s.open_streams(), 1, "only the second GET stream is held");
    assert!(s.poll_stream(first).is_none() && s.poll_stream(empty).is_none());
    // The second one's client leaves: the session's idle clock runs, and it expires.
    s.stream_closed(T0, second);
    assert_eq!(s.poll_timeout(), Some(Timestamp::from_millis(60_000)));
    s.handle_timeout(Timestamp::from_millis(60_000));
    assert_eq!(s.sessions(), 0);
    // A session deleted while its GET stream is held: the stream finishes empty.
    let sid = open_session(&mut s);
    let get = get_stream(&mut s, &[("Mcp-Session-Id", &sid)]);
    read_stream(&mut s, get, &mut StreamReader::new());
    assert_eq!(
        send(&mut s, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
        200
    );
    let out = s.poll_stream(get).expect("it answers its poll");
    assert!(out.bytes.is_empty() && out.finished);
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn resumptions_over_and_over_keep_a_bounded_list_of_responses_to_end() {
    // A client that resumes its stream again and again while the host never looks at
    // `poll_woken`: each resumption leaves a response for the host to end, and the list of
    // them stays bounded; each stale response still finds nothing to poll.
    let mut s = server();
    let sid = open_session(&mut s);
    let (stream, _, _, reader) = call_and_prime(&mut s, &sid);
    let last = reader.last_event_id().unwrap().to_owned();
    let mut held = vec![stream];
    for _ in 0..3_000 {
        held.push(get_stream(
            &mut s,
            &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
        ));
    }
    let current = held.pop().unwrap();
    assert!(s.poll_stream(current).is_some());
    assert!(held.iter().all(|&h| s.poll_stream(h).is_none()));
    let mut named = 0;
    while s.poll_woken().is_some() {
        named += 1;
    }
    assert!((1_000..=1_100).contains(&named), "{named} named");
    assert_eq!(s.open_streams(), 1);
}

#[test]
fn an_answer_that_is_complete_before_the_headers_settles_into_json() {
    let mut s = server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{{META},"name":"needs"}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("needs")),
        &body,
    );
    assert!(matches!(r.body, Body::Stream(_)));
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!()
    };
    s.connection(*key)
        .unwrap()
        .respond_error(
            id.as_id(),
            -32021,
            "Missing required client capability",
            Some(RawJson::new(r#"{"requiredCapabilities":{"sampling":{}}}"#).unwrap()),
        )
        .unwrap();
    let r = s.settle(r);
    assert_eq!(r.status, 400);
    assert_eq!(header(&r, "Content-Type"), Some("application/json"));
    assert_eq!(
        header(&r, "X-Accel-Buffering"),
        None,
        "a JSON body has no SSE headers"
    );
    assert_eq!(header(&r, "Cache-Control"), None);
    assert_eq!(json_body(&r)["error"]["code"], -32021);
    assert!(s.connections().is_empty());
    assert_eq!(s.open_streams(), 0);
    // Once the host drains a stream, it stays a stream.
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("needs")),
        &body,
    );
    let Body::Stream(st) = r.body else { panic!() };
    let _ = s.poll_stream(st);
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!()
    };
    s.connection(*key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    let r = s.settle(HttpResponse {
        status: 200,
        headers: Vec::new(),
        body: Body::Stream(st),
    });
    assert_eq!(r.body, Body::Stream(st));
}

#[test]
fn bodies_over_the_cap_get_413_and_the_cap_is_configurable() {
    let mut config = HttpServerConfig::new(server_config());
    config.max_body = 300;
    let mut s = HttpServer::new(config);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{}","version":"1"}}}}}}"#,
        "x".repeat(300)
    );
    let r = send(&mut s, "POST", &[], &big);
    assert_eq!(r.status, 413);
    assert_eq!(s.sessions(), 0);
    // At the cap exactly, it is fine.
    assert!(INIT.len() <= 300);
    assert_eq!(send(&mut s, "POST", &[], INIT).status, 200);
}

#[test]
fn a_duplicated_mcp_header_gets_400_even_with_equal_values() {
    let mut s = server();
    let sid = open_session(&mut s);
    for (name, a, b) in [
        ("Mcp-Session-Id", sid.as_str(), sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25", "2025-11-25"),
        ("mcp-method", "tools/list", "tools/list"),
    ] {
        let r = send(
            &mut s,
            "POST",
            &[
                ("Mcp-Session-Id", &sid),
                (name, a),
                (
                    if name == "Mcp-Session-Id" {
                        "mcp-session-id"
                    } else {
                        name
                    },
                    b,
                ),
            ],
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#,
        );
        assert_eq!(r.status, 400, "{name}");
        assert_eq!(json_body(&r)["id"], 9, "the request's id is kept");
        // A 2025-11-25 session has no -32020 (HeaderMismatch exists from 2026-07-28 on).
        assert_eq!(json_body(&r)["error"]["code"], -32600, "{name}");
    }
    // Stateless: a repeated Mcp-Name or Mcp-Param header is a header mismatch.
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    for extra in [("Mcp-Name", "t"), ("Mcp-Param-Region", "eu")] {
        let r = send(
            &mut s,
            "POST",
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "t"),
                ("Mcp-Param-Region", "eu"),
                extra,
            ],
            call,
        );
        assert_eq!(r.status, 400, "{extra:?}");
        assert_eq!(json_body(&r)["error"]["code"], -32020);
    }
}

/// A stateless request's `Mcp-Session-Id` and `Last-Event-ID` are ignored ("ignore it"),
/// however many there are: repeated, they got 400 as for the headers the engine reads.
#[test]
fn a_stateless_requests_repeated_session_headers_are_ignored() {
    let list =
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{{{META}}}}}"#);
    let mut headers = modern_headers("server/discover", None);
    headers.extend([
        ("Mcp-Session-Id", "a"),
        ("mcp-session-id", "b"),
        ("Last-Event-ID", "1"),
        ("last-event-id", "2"),
    ]);
    // On a server of both eras, and of the stateless era alone.
    let mut modern_only = HttpServerConfig::new(server_config());
    modern_only.server.versions = vec![ProtocolVersion::V2026_07_28];
    for config in [HttpServerConfig::new(server_config()), modern_only] {
        let mut s = HttpServer::new(config);
        let r = send(&mut s, "POST", &headers, &list);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(json_body(&r)["id"], 5);
    }
    // A session's request still may not repeat them, nor a GET or DELETE (routed by their
    // session, whatever version header they carry).
    let mut s = server();
    let sid = open_session(&mut s);
    let r = send(
        &mut s,
        "POST",
        &[
            ("Mcp-Session-Id", &sid),
            ("Last-Event-ID", "1"),
            ("Last-Event-ID", "2"),
        ],
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 400);
    for method in ["GET", "DELETE"] {
        let r = send(
            &mut s,
            method,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Session-Id", &sid),
                ("Mcp-Session-Id", "other"),
            ],
            "",
        );
        assert_eq!(r.status, 400, "{method}");
        assert!(
            json_body(&r)["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("duplicate")),
            "{r:?}"
        );
    }
}

/// Whitespace around a header's value is not part of it (RFC 9110 §5.5; SEP-2243: "Extra
/// whitespace in header: Server MUST accept"). `Mcp-Name` was trimmed, `Mcp-Method` and
/// `MCP-Protocol-Version` were compared as they came, for a host that passes values on
/// untrimmed.
#[test]
fn whitespace_around_header_values_is_not_part_of_them() {
    let mut s = server();
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{META},"name":"echo"}}}}"#
    );
    let headers = [
        ("MCP-Protocol-Version", " 2026-07-28\t"),
        ("Mcp-Method", "tools/call "),
        ("Mcp-Name", "\techo"),
        ("Content-Type", "application/json"),
    ];
    let r = send(&mut s, "POST", &headers, &call);
    assert_eq!(r.status, 200, "{r:?}");
}

/// An `Mcp-Method` with a control character is refused ("A header value contains invalid
/// characters"), even when the body's method, escaped, has the same: it was compared and
/// passed. (No HTTP parser lets one through; a host may hand it over as it is.)
#[test]
fn an_mcp_method_with_a_control_character_is_refused() {
    let mut s = server();
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x/a\u0001b","params":{{{META}}}}}"#);
    let r = send(&mut s, "POST", &modern_headers("x/a\u{1}b", None), &body);
    assert_eq!(r.status, 400, "{r:?}");
    let v = json_body(&r);
    assert_eq!(v["error"]["code"], -32020, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid character"),
        "{v}"
    );
}

/// An `initialize` that names the stateless era in its `_meta` is a stateless request for a
/// method that era removed (as on stdio), with the version header or without it: without
/// it, it opened a session.
#[test]
fn an_initialize_naming_the_stateless_era_opens_no_session() {
    let mut s = server();
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{{META},"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
    );
    for headers in [vec![], modern_headers("initialize", None)] {
        let r = send(&mut s, "POST", &headers, &init);
        assert_eq!(r.status, 404, "{r:?}");
        assert_eq!(json_body(&r)["error"]["code"], -32601);
        assert!(header(&r, "Mcp-Session-Id").is_none());
        assert_eq!(s.sessions(), 0);
    }
}

/// Go's `net/http` accepts a megabyte of headers: some 50,000 `Mcp-Param-*` lines. They are
/// checked for repeats by sorting, not pair by pair (2.1 s for 50,000 headers before, 10 ms
/// after, in a release build: `docs/hostile-input.md`); the answer is the same.
#[test]
fn tens_of_thousands_of_param_headers_are_checked_for_repeats() {
    let mut s = server();
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let names: Vec<String> = (0..20_000).map(|i| format!("Mcp-Param-P{i}")).collect();
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "t"),
    ];
    headers.extend(names.iter().map(|n| (n.as_str(), "v")));
    let r = send(&mut s, "POST", &headers, call);
    assert_eq!(r.status, 200, "{r:?}");
    // The same name again, in another case, at the end: the repeat is named.
    headers.push(("mcp-param-p7", "v"));
    let r = send(&mut s, "POST", &headers, call);
    assert_eq!(r.status, 400);
    let body = json_body(&r);
    assert_eq!(body["error"]["code"], -32020);
    assert_eq!(body["error"]["message"], "duplicate mcp-param-p7 header");
    assert_eq!(body["id"], 3);
}

#[test]
fn content_type_and_accept_are_checked() {
    let mut s = server();
    let host = ("Host", "127.0.0.1:1");
    let json = ("Content-Type", "application/json; charset=utf-8");
    let both = ("Accept", "application/json, text/event-stream");
    // POST: JSON in, both answers accepted.
    let cases: [(&[(&str, &str)], u16); 12] = [
        (&[host, both], 415),
        (&[host, ("Content-Type", "text/plain"), both], 415),
        // One media type, not a list: a browser sends `text/plain;x=1,application/json`
        // from any page without a preflight (it passed, JSON found after the comma).
        (
            &[
                host,
                ("Content-Type", "text/plain;x=1,application/json"),
                both,
            ],
            415,
        ),
        (
            &[host, ("Content-Type", "application/json, text/plain"), both],
            415,
        ),
        (&[host, json], 406),
        (&[host, json, ("Accept", "application/json")], 406),
        (&[host, json, ("Accept", "text/event-stream")], 406),
        (&[host, json, ("Accept", "*/*")], 200),
        // A weight of 0 means "not acceptable" (RFC 9110 §12.4.2).
        (&[host, json, ("Accept", "*/*;q=0")], 406),
        (
            &[
                host,
                json,
                ("Accept", "application/json;q=0, text/event-stream"),
            ],
            406,
        ),
        (
            &[host, json, ("Accept", "application/json;q=0.5, */*;q=0")],
            406,
        ),
        (
            &[
                host,
                json,
                ("Accept", "application/json"),
                ("Accept", "text/event-stream;q=0.9"),
            ],
            200,
        ),
    ];
    for (headers, status) in cases {
        assert_eq!(
            send_raw(&mut s, T0, "POST", headers, INIT).status,
            status,
            "{headers:?}"
        );
    }
    // GET: an event stream must be acceptable.
    let sid = open_session(&mut s);
    let r = send_raw(
        &mut s,
        T0,
        "GET",
        &[
            host,
            ("Mcp-Session-Id", &sid),
            ("Accept", "application/json"),
        ],
        "",
    );
    assert_eq!(r.status, 406);
    let r = send_raw(
        &mut s,
        T0,
        "GET",
        &[
            host,
            ("Mcp-Session-Id", &sid),
            ("Accept", "text/event-stream"),
        ],
        "",
    );
    assert_eq!(r.status, 200);
}

fn open_session_at(s: &mut HttpServer, now: Timestamp) -> String {
    let r = send_at(s, now, "POST", &[], INIT);
    assert_eq!(r.status, 200, "{r:?}");
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    let r = send_at(
        s,
        now,
        "POST",
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    sid
}

#[test]
fn idle_sessions_expire_through_the_timer_and_then_get_404() {
    let mut config = HttpServerConfig::new(server_config());
    config.session_idle_timeout = std::time::Duration::from_secs(60);
    let mut s = HttpServer::new(config);
    let idle = open_session_at(&mut s, T0);
    let active = open_session_at(&mut s, T0);
    // The deadline is the idle one's expiry.
    assert_eq!(s.poll_timeout(), Some(Timestamp::from_millis(60_000)));
    // `active` makes a request at 50 s; `idle` says nothing.
    let t50 = Timestamp::from_millis(50_000);
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    let r = send_at(&mut s, t50, "POST", &[("Mcp-Session-Id", &active)], ping);
    assert_eq!(r.status, 200);
    // An early timeout does nothing.
    s.handle_timeout(Timestamp::from_millis(59_999));
    assert_eq!(s.sessions(), 2);
    let t60 = Timestamp::from_millis(60_000);
    s.handle_timeout(t60);
    assert_eq!(s.sessions(), 1);
    let r = send_at(&mut s, t60, "POST", &[("Mcp-Session-Id", &idle)], ping);
    assert_eq!(
        r.status, 404,
        "an expired session is not found: the client re-initializes"
    );
    assert_eq!(s.poll_timeout(), Some(Timestamp::from_millis(110_000)));
    let r = send_at(&mut s, t60, "POST", &[("Mcp-Session-Id", &active)], ping);
    assert_eq!(r.status, 200);
}

/// `handle_timeout` called on every turn of a loop, as a host may: sessions opened a
/// millisecond apart end exactly at their own expiry, one a millisecond, never early, and a
/// session its client used meanwhile lives on to its later expiry.
#[test]
fn handle_timeout_on_every_turn_ends_each_session_exactly_when_due() {
    let mut config = HttpServerConfig::new(server_config());
    config.session_idle_timeout = std::time::Duration::from_secs(60);
    let mut s = HttpServer::new(config);
    let ms = Timestamp::from_millis;
    let sids: Vec<String> = (0..100).map(|i| open_session_at(&mut s, ms(i))).collect();
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    let r = send_at(
        &mut s,
        ms(30_000),
        "POST",
        &[("Mcp-Session-Id", &sids[50])],
        ping,
    );
    assert_eq!(r.status, 200);
    let mut t = 0;
    while t <= 60_200 {
        s.handle_timeout(ms(t));
        // Sessions 0..=t-60000 have expired, except session 50.
        let gone = (t + 1).saturating_sub(60_000).min(100);
        let gone = gone - u64::from(gone > 50);
        assert_eq!(s.sessions(), 100 - gone as usize, "at {t} ms");
        t += if t < 59_000 { 997 } else { 1 };
    }
    assert_eq!(s.poll_timeout(), Some(ms(90_000)));
    s.handle_timeout(ms(89_999));
    assert_eq!(s.sessions(), 1);
    let r = send_at(
        &mut s,
        ms(89_999),
        "POST",
        &[("Mcp-Session-Id", &sids[50])],
        ping,
    );
    assert_eq!(r.status, 200, "session 50 is still there");
    let r = send_at(
        &mut s,
        ms(89_999),
        "POST",
        &[("Mcp-Session-Id", &sids[49])],
        ping,
    );
    assert_eq!(r.status, 404, "session 49 expired at 60,049 ms");
    s.handle_timeout(ms(149_999));
    assert_eq!(s.sessions(), 0);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_session_whose_client_holds_a_stream_never_expires_and_is_never_evicted() {
    let mut config = HttpServerConfig::new(server_config());
    config.keepalive = None; // exact deadlines: the sessions' own only
    config.session_idle_timeout = std::time::Duration::from_secs(1);
    config.max_sessions = 1;
    let mut s = HttpServer::new(config);
    let sid = open_session_at(&mut s, T0);
    let r = send_at(&mut s, T0, "GET", &[("Mcp-Session-Id", &sid)], "");
    let Body::Stream(get) = r.body else {
        panic!("a GET stream")
    };
    let late = Timestamp::from_millis(3_600_000);
    s.handle_timeout(late);
    assert_eq!(s.sessions(), 1);
    assert_eq!(
        s.poll_timeout(),
        None,
        "nothing to wait for while the stream is held"
    );
    // At the cap with only busy sessions, a newcomer is told to come back.
    let r = send_at(&mut s, late, "POST", &[], INIT);
    assert_eq!(r.status, 503);
    assert!(header(&r, "Retry-After").is_some());
    // The client lets go: the idle clock starts then.
    s.stream_closed(late, get);
    assert_eq!(
        s.poll_timeout(),
        Some(late.after(std::time::Duration::from_secs(1)))
    );
    // And now a newcomer evicts it.
    let r = send_at(&mut s, late, "POST", &[], INIT);
    assert_eq!(r.status, 200);
    assert_eq!(s.sessions(), 1);
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    assert_eq!(
        send_at(&mut s, late, "POST", &[("Mcp-Session-Id", &sid)], ping).status,
        404
    );
}

#[test]
fn at_the_cap_the_least_recently_used_idle_session_is_evicted() {
    let mut config = HttpServerConfig::new(server_config());
    config.max_sessions = 3;
    let mut s = HttpServer::new(config);
    let ms = Timestamp::from_millis;
    let a = open_session_at(&mut s, ms(1));
    let b = open_session_at(&mut s, ms(2));
    let c = open_session_at(&mut s, ms(3));
    // `a` is used again, so `b` is now the least recently used.
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    assert_eq!(
        send_at(&mut s, ms(4), "POST", &[("Mcp-Session-Id", &a)], ping).status,
        200
    );
    let d = open_session_at(&mut s, ms(5));
    assert_eq!(s.sessions(), 3);
    for (sid, status) in [(&a, 200), (&b, 404), (&c, 200), (&d, 200)] {
        assert_eq!(
            send_at(&mut s, ms(6), "POST", &[("Mcp-Session-Id", sid)], ping).status,
            status
        );
    }
}

fn declared_server() -> HttpServer {
    let mut config = HttpServerConfig::new(server_config());
    let refused = config.declare_tools(
        RawJson::new(
            r#"[{"name":"sql","inputSchema":{"type":"object","properties":{
                "region":{"type":"string","x-mcp-header":"Region"},
                "shard":{"type":"integer","x-mcp-header":"Shard"},
                "query":{"type":"string"}}}}]"#,
        )
        .unwrap(),
    );
    assert!(refused.is_empty());
    HttpServer::new(config)
}

fn call_sql(s: &mut HttpServer, arguments: &str, params: &[(&str, &str)]) -> HttpResponse {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"sql","arguments":{arguments},{META}}}}}"#
    );
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "sql"),
    ];
    headers.extend_from_slice(params);
    send(s, "POST", &headers, &body)
}

/// Tools declared while the server runs (added, changed or gone, as a server announces with
/// `notifications/tools/list_changed`) are checked from then on: only those declared before
/// it started were.
#[test]
fn tools_declared_while_the_server_runs_are_checked_from_then_on() {
    let mut s = server();
    let mismatch = |r: &HttpResponse| r.status == 400 && json_body(r)["error"]["code"] == -32020;
    // Not declared yet: nothing to check against.
    let r = call_sql(&mut s, r#"{"region":"eu"}"#, &[]);
    assert!(!mismatch(&r), "{r:?}");
    while s.poll_event().is_some() {}
    let sql = |header: &str| {
        format!(
            r#"{{"tools":[{{"name":"sql","inputSchema":{{"type":"object","properties":{{"region":{{"type":"string","x-mcp-header":"{header}"}}}}}}}}]}}"#
        )
    };
    assert!(
        s.declare_tools(RawJson::new(&sql("Region")).unwrap())
            .is_empty()
    );
    assert!(mismatch(&call_sql(&mut s, r#"{"region":"eu"}"#, &[])));
    let r = call_sql(&mut s, r#"{"region":"eu"}"#, &[("Mcp-Param-Region", "eu")]);
    assert!(!mismatch(&r), "{r:?}");
    while s.poll_event().is_some() {}
    // Changed: the new annotation is the one asked for.
    assert!(
        s.declare_tools(RawJson::new(&sql("Zone")).unwrap())
            .is_empty()
    );
    assert!(mismatch(&call_sql(
        &mut s,
        r#"{"region":"eu"}"#,
        &[("Mcp-Param-Region", "eu")]
    )));
    // Gone: nothing is asked for any more; an invalid annotation is named.
    let refused = s.declare_tools(
        RawJson::new(r#"[{"name":"bad","inputSchema":{"properties":{"v":{"type":"object","x-mcp-header":"V"}}}}]"#)
            .unwrap(),
    );
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, "bad");
    let r = call_sql(&mut s, r#"{"region":"eu"}"#, &[]);
    assert!(!mismatch(&r), "{r:?}");
}

#[test]
fn mcp_param_headers_are_checked_against_the_declared_annotations() {
    let mut s = declared_server();
    let mismatch = |r: &HttpResponse| r.status == 400 && json_body(r)["error"]["code"] == -32020;
    // Matching values (plain, Base64, a number compared as a number) are accepted.
    for (args, params) in [
        (
            r#"{"region":"eu","shard":7}"#,
            vec![("Mcp-Param-Region", "eu"), ("Mcp-Param-Shard", "7")],
        ),
        (
            r#"{"region":"eu","shard":7}"#,
            vec![("mcp-param-region", " eu "), ("Mcp-Param-Shard", "7.0")],
        ),
        (
            r#"{"region":"Hello"}"#,
            vec![("Mcp-Param-Region", "=?base64?SGVsbG8=?=")],
        ),
        (
            r#"{"region":"SGVsbG8="}"#,
            vec![("Mcp-Param-Region", "SGVsbG8=")],
        ),
        (r#"{"query":"no annotated values"}"#, vec![]),
        (r#"{"region":null}"#, vec![]),
        // What no annotation reads may repeat: the tool's own business.
        (
            r#"{"region":"eu","query":"a","query":"b"}"#,
            vec![("Mcp-Param-Region", "eu")],
        ),
    ] {
        let r = call_sql(&mut s, args, &params);
        assert!(!mismatch(&r), "{args} {params:?}: {r:?}");
        while s.poll_event().is_some() {}
    }
    // Missing, different, or badly encoded values are refused with -32020.
    for (args, params) in [
        (r#"{"region":"eu"}"#, vec![]),
        (r#"{"region":"eu"}"#, vec![("Mcp-Param-Region", "us")]),
        (
            r#"{"region":"Hello"}"#,
            vec![("Mcp-Param-Region", "=?base64?SGVsbG8?=")],
        ),
        (
            r#"{"region":"Hello"}"#,
            vec![("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=")],
        ),
        (
            r#"{"region":"eu","shard":7}"#,
            vec![("Mcp-Param-Region", "eu"), ("Mcp-Param-Shard", "8")],
        ),
        (
            r#"{"region":"eu","shard":7}"#,
            vec![("Mcp-Param-Region", "eu")],
        ),
        // A header whose value the body lacks, or holds as a value no header can carry: a
        // router would act on what the tool never receives.
        (r#"{}"#, vec![("Mcp-Param-Region", "us-west1")]),
        (r#"{"region":null}"#, vec![("Mcp-Param-Region", "us-west1")]),
        (
            r#"{"region":"eu","shard":[7]}"#,
            vec![("Mcp-Param-Region", "eu"), ("Mcp-Param-Shard", "7")],
        ),
        // An annotated argument, or `arguments` itself, written twice: the tool's parser
        // picks one, and a router reading the header (or its absence) may act on the other.
        (r#"{"region":"us-west1","region":"eu-west1"}"#, vec![]),
        (
            r#"{"region":"eu","region":"eu"}"#,
            vec![("Mcp-Param-Region", "eu")],
        ),
        (r#"{"region":"us"},"arguments":{"region":"eu"}"#, vec![]),
        (
            r#"{"region":"eu"},"arguments":{"region":"eu"}"#,
            vec![("Mcp-Param-Region", "eu")],
        ),
    ] {
        let r = call_sql(&mut s, args, &params);
        assert!(mismatch(&r), "{args} {params:?}: {r:?}");
        assert_eq!(json_body(&r)["id"], 4);
    }
}

/// "If the server does not implement the requested protocol version ... it MUST respond with
/// 400 Bad Request and an UnsupportedProtocolVersionError listing its supported versions":
/// checked before any other header, so a client of another version learns ours (it got
/// -32020 for a missing `Mcp-Method`, with no versions).
#[test]
fn an_unsupported_version_header_is_named_before_the_other_headers() {
    let mut s = modern_only_server();
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}"#;
    for headers in [
        vec![("MCP-Protocol-Version", "2099-01-01")],
        vec![
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        vec![
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Session-Id", "s1"),
        ],
    ] {
        let r = send(&mut s, "POST", &headers, body);
        assert_eq!(r.status, 400, "{headers:?}: {r:?}");
        let v = json_body(&r);
        assert_eq!(v["error"]["code"], -32022, "{headers:?}: {v}");
        assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
        assert_eq!(v["error"]["data"]["requested"], headers[0].1);
        assert_eq!(v["id"], 3);
    }
}

#[test]
fn mcp_name_is_trimmed_and_decoded_before_comparing() {
    let mut s = declared_server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"sql","arguments":{{}},{META}}}}}"#
    );
    for (name, ok) in [
        ("  sql  ", true),
        ("=?base64?c3Fs?=", true),
        ("SQL", false),
        ("=?base64?c3F?=", false),
    ] {
        let r = send(
            &mut s,
            "POST",
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", name),
            ],
            &body,
        );
        assert_eq!(r.status != 400, ok, "{name:?}: {r:?}");
        while s.poll_event().is_some() {}
    }
}

/// The raw SSE text of a stream, drained.
fn drain_raw(s: &mut HttpServer, id: HttpStreamId) -> (String, bool) {
    let mut text = String::new();
    let mut finished = false;
    while let Some(o) = s.poll_stream(id) {
        let bytes = o.bytes.to_vec();
        finished = o.finished;
        text.push_str(&String::from_utf8(bytes.clone()).unwrap());
        s.consume_stream(id, bytes.len());
        if bytes.is_empty() {
            break;
        }
    }
    (text, finished)
}

#[test]
fn the_application_closes_a_request_stream_for_polling_and_the_client_resumes_with_get() {
    let mut s = server();
    let sid = open_session(&mut s);
    let h = [("Mcp-Session-Id", sid.as_str())];
    let call = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":5}}}"#;
    let r = send(&mut s, "POST", &h, call);
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    let (key, id) = (*key, id.clone());
    // Not a request in flight on this connection: nothing happens.
    assert!(!s.close_stream_for_polling(key, mcpwire::jsonrpc::Id::Int(99)));
    assert!(s.close_stream_for_polling(key, id.as_id()));
    // It stays a stream (never settles into JSON), primed, with `retry`, and finishes.
    let r = s.settle(r);
    let Body::Stream(stream) = r.body else {
        panic!("{r:?}")
    };
    let mut reader = StreamReader::new();
    let (text, finished) = drain_raw(&mut s, stream);
    assert!(finished, "the stream ends before the answer");
    assert!(text.contains("retry: "), "{text:?}");
    reader.feed(text.as_bytes(), |m| panic!("no message yet: {m:?}"));
    let last = reader
        .last_event_id()
        .expect("the priming event's id")
        .to_owned();
    // The host ends the response; the session lives on, and so does the request.
    s.stream_closed(T0, stream);
    assert_eq!(s.sessions(), 1);
    // Work goes on while the client is away: progress, then the answer.
    let conn = s.connection(key).unwrap();
    conn.progress(id.as_id(), 1.0, None, None).unwrap();
    conn.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    s.pump();
    // The client comes back after `retry` with the last id it saw: nothing is lost.
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, finished) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["method"], "notifications/progress");
    assert_eq!(rest[1]["id"], 5);
    assert_eq!(rest[1]["result"]["content"], json!([]));
    assert!(finished);
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn closing_for_polling_needs_a_resumable_stream() {
    // A 2025-06-18 session has no priming event id to resume from.
    let mut s = server();
    let init = INIT.replace("2025-11-25", "2025-06-18");
    let r = send(&mut s, "POST", &[], &init);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    let h = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}"#,
    );
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    assert!(!s.close_stream_for_polling(*key, id.as_id()));
    // Nor does a stateless request (closing its stream would cancel it).
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"x",{META}}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "x"),
        ],
        &body,
    );
    assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    assert!(!s.close_stream_for_polling(*key, id.as_id()));
}

#[test]
fn the_application_ends_listen_streams_with_their_result() {
    let mut s = server();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ],
        &body,
    );
    let r = s.settle(r);
    let Body::Stream(stream) = r.body else {
        panic!("{r:?}")
    };
    let mut reader = StreamReader::new();
    let (first, finished) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(
        first[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert!(!finished, "a listen stream stays open");
    assert_eq!(s.end_listen_streams(), 1);
    let (rest, finished) = read_stream(&mut s, stream, &mut reader);
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], "L");
    assert_eq!(
        rest[0]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
    assert!(finished);
    assert_eq!(s.open_streams(), 0);
    assert_eq!(s.connections().len(), 0, "the stateless connection is gone");
}

/// A listen whose end found its connection's output full when the server began to shut down
/// (its client behind on reading) ends once that client has read: `end_listen` asks to be
/// called again then, and nothing did, so the stream stayed open, empty, until the
/// shutdown's grace was over and it was cut without its result (found by a review of the
/// tokio host).
#[test]
fn a_listen_whose_end_found_the_output_full_ends_once_its_client_reads() {
    let mut config = server_config();
    config.limits.max_buffered_output = 8 * 1024;
    let mut s = HttpServer::new(HttpServerConfig::new(config));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ],
        &body,
    );
    let r = s.settle(r);
    let Body::Stream(stream) = r.body else {
        panic!("{r:?}")
    };
    // The client reads nothing while the server notifies, until the output is full.
    let key = s.connections()[0];
    let mut sent = 0;
    while let Some(conn) = s.connection(key) {
        if conn
            .notify("notifications/tools/list_changed", None)
            .is_err()
        {
            break;
        }
        sent += 1;
        s.pump();
        assert!(sent < 10_000, "the output never filled");
    }
    assert_eq!(s.end_listen_streams(), 0, "its end did not fit");
    let mut reader = StreamReader::new();
    let (got, finished) = read_stream(&mut s, stream, &mut reader);
    let last = got.last().unwrap();
    assert_eq!(last["id"], "L", "the listen's result comes last");
    assert!(finished, "and ends the stream");
    assert_eq!(
        got.len(),
        sent + 2,
        "the acknowledgement, every notification, the result"
    );
}

/// Under `Policy::review_listens` a stateless listen POST waits for the application: a grant
/// sends the acknowledgement on its stream, and a refusal settles as a plain JSON error.
#[test]
fn a_reviewed_listen_over_http_is_granted_or_refused_by_the_application() {
    let mut config = server_config();
    config.policy.review_listens = true;
    let mut s = HttpServer::new(HttpServerConfig::new(config));
    let post = |s: &mut HttpServer, id: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
        );
        let headers = [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ];
        send(s, "POST", &headers, &body)
    };
    for (id, grant) in [("yes", true), ("no", false)] {
        let r = post(&mut s, id);
        let evs = events(&mut s);
        let [
            (
                key,
                Ev::Request {
                    id: rid, method, ..
                },
            ),
        ] = &evs[..]
        else {
            panic!("{evs:?}")
        };
        assert_eq!(method, "subscriptions/listen");
        let conn = s.connection(*key).unwrap();
        if grant {
            conn.grant_listen(rid.as_id(), |_| true).unwrap();
        } else {
            conn.respond_error(rid.as_id(), -32602, "not allowed", None)
                .unwrap();
        }
        let r = s.settle(r);
        if grant {
            let Body::Stream(stream) = r.body else {
                panic!("{r:?}")
            };
            let (msgs, finished) = read_stream(&mut s, stream, &mut StreamReader::new());
            assert_eq!(msgs.len(), 1, "{msgs:?}");
            assert_eq!(
                msgs[0]["method"],
                "notifications/subscriptions/acknowledged"
            );
            assert!(!finished, "a granted listen stays open");
        } else {
            assert_eq!(r.status, 400, "{r:?}");
            assert_eq!(json_body(&r)["error"]["message"], "not allowed");
        }
    }
    assert_eq!(s.end_listen_streams(), 1);
}

#[test]
fn ending_listen_streams_finishes_the_sessions_get_streams_too() {
    // At shutdown a handshake-era GET stream, which never ends by itself, must end as a
    // listen stream does: a host that waits for its open streams (net/http's Shutdown)
    // would otherwise wait for ever. A stream carrying an answer is left to finish.
    let mut s = server();
    let sid = open_session(&mut s);
    let (get, _, finished) = listen(&mut s, &sid);
    assert!(!finished, "a GET stream stays open");
    let call_body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}"#;
    let (call, _, _) = post_request(&mut s, &sid, call_body);
    assert_eq!(s.end_listen_streams(), 1);
    assert!(
        woken(&mut s).contains(&get),
        "the host is told to look at it"
    );
    let (_, finished) = read_stream(&mut s, get, &mut StreamReader::new());
    assert!(finished, "the GET stream finishes once drained");
    let (_, finished) = read_stream(&mut s, call, &mut StreamReader::new());
    assert!(!finished, "the call's stream waits for its answer");
    assert_eq!(s.end_listen_streams(), 0, "nothing left to end");
}

/// A store the test can look into, shared with the server.
#[derive(Clone)]
struct SharedStore(
    std::sync::Arc<std::sync::Mutex<(mcpwire::http::MemoryEventStore, Vec<String>)>>,
);

impl mcpwire::http::EventStore for SharedStore {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        let mut inner = self.0.lock().unwrap();
        inner.1.push(format!("append {event}"));
        inner.0.append(session, stream, event, bytes);
    }
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        let mut inner = self.0.lock().unwrap();
        inner.1.push(format!("replay after {after}"));
        inner.0.replay(session, stream, after, out)
    }
    fn forget(&mut self, session: &str) {
        let mut inner = self.0.lock().unwrap();
        inner.1.push("forget".into());
        inner.0.forget(session);
    }
}

#[test]
fn resumption_goes_through_the_event_store_the_host_supplies() {
    let store = SharedStore(std::sync::Arc::new(std::sync::Mutex::new((
        mcpwire::http::MemoryEventStore::new(16),
        Vec::new(),
    ))));
    let mut config = HttpServerConfig::new(server_config());
    config.events = Some(Box::new(store.clone()));
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let (stream, key, id) = post_request(
        &mut s,
        &sid,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}"#,
    );
    let mut reader = StreamReader::new();
    let _ = read_stream(&mut s, stream, &mut reader);
    s.stream_closed(T0, stream);
    s.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new("{}").unwrap())
        .unwrap();
    s.pump();
    assert!(
        store
            .0
            .lock()
            .unwrap()
            .1
            .iter()
            .any(|op| op.starts_with("append"))
    );
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, _) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(rest[0]["id"], 5, "replayed from the supplied store");
    assert!(
        store
            .0
            .lock()
            .unwrap()
            .1
            .iter()
            .any(|op| op.starts_with("replay"))
    );
    assert_eq!(
        send(&mut s, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
        200
    );
    let inner = store.0.lock().unwrap();
    assert_eq!(inner.1.last().map(String::as_str), Some("forget"));
    assert!(inner.0.is_empty(), "the session's events are gone with it");
}

#[test]
fn a_stateless_post_of_a_response_is_refused_and_leaves_nothing_behind() {
    let mut s = server();
    let r = send(
        &mut s,
        "POST",
        &[("MCP-Protocol-Version", "2026-07-28")],
        &format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{{META}}}}}"#),
    );
    assert_eq!(r.status, 400);
    assert_eq!(s.connections().len(), 0);
    assert_eq!(s.open_streams(), 0);
}

/// A `tools/list` on session `sid`, answered at once by the application: the answer reaches
/// its client (no other stream of the session holds it back).
fn another_request_is_answered(s: &mut HttpServer, sid: &str) {
    let r = send(
        s,
        "POST",
        &[
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#,
    );
    let evs = events(s);
    let Some((k, Ev::Request { id, .. })) = evs.into_iter().next() else {
        panic!("no request event")
    };
    s.connection(k)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"tools":[]}"#).unwrap())
        .expect("the answer is not held back");
    let settled = s.settle(r);
    let answer = match &settled.body {
        Body::Complete(_, b) => serde_json::from_slice::<Value>(b).unwrap(),
        Body::Stream(st) => {
            let (msgs, _) = read_stream(s, *st, &mut StreamReader::new());
            msgs.into_iter()
                .find(|m| m["id"] == 7)
                .expect("the answer is not held back")
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(answer["result"]["tools"], serde_json::json!([]), "{answer}");
}

/// A session's GET stream whose client does not read ends once what waits on it reaches the
/// bound, as if that client had gone away: the answers to the session's requests, on their
/// own streams, do not wait behind it (they did: every answer of the session then failed
/// with `OutputFull`, and an application that let the error go never answered). The client
/// resumes it with `Last-Event-ID` and gets what came after, up to the event store's bound.
#[test]
fn an_unread_get_stream_ends_at_its_bound_and_holds_no_answer_back() {
    let mut config = HttpServerConfig::new(server_config());
    config.server.limits.max_buffered_output = 64 * 1024;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let get = get_stream(&mut s, &[("Mcp-Session-Id", &sid)]);
    let key = s.connections()[0];
    let notify = |s: &mut HttpServer| {
        s.connection(key)
            .unwrap()
            .notify("notifications/tools/list_changed", None)
            .unwrap();
        s.pump();
    };
    // Until the stream is over its bound; then a few more, which wait for the next GET.
    let mut sent = 0;
    while s.poll_stream(get).unwrap().bytes.len() < 64 * 1024 {
        notify(&mut s);
        sent += 1;
        assert!(sent < 100_000, "the stream never filled");
    }
    for _ in 0..10 {
        notify(&mut s);
        sent += 1;
    }
    let waiting = s.poll_stream(get).unwrap().bytes.len();
    assert!(
        waiting <= 64 * 1024 + 256,
        "{waiting} bytes wait on the stream"
    );
    // A request of the same session is answered on its own stream.
    another_request_is_answered(&mut s, &sid);
    // Its last event says when to come back (a `retry` field, as the priming event did).
    let held = s.poll_stream(get).unwrap().bytes.to_vec();
    let tail = &held[held.windows(6).rposition(|w| w == b"data: ").unwrap()..];
    assert!(
        tail.windows(7).any(|w| w == b"retry: "),
        "{}",
        String::from_utf8_lossy(tail)
    );
    // The ended stream gives what it held, then finishes; a GET resuming from its last event
    // gets the rest: every notification arrives once.
    let mut reader = StreamReader::new();
    let (first, finished) = read_stream(&mut s, get, &mut reader);
    assert!(finished, "the unread stream ended");
    let last = reader.last_event_id().unwrap().to_owned();
    s.stream_closed(T0, get);
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, _) = read_stream(&mut s, resumed, &mut StreamReader::new());
    let count = |m: &[Value]| {
        m.iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
    };
    assert_eq!(count(&first) + count(&rest), sent);
}

/// A GET stream that ended at its bound, resumed with `Last-Event-ID` before its host
/// noticed the end: the resumed stream stays open, and later messages come on it. It ended
/// right after the replay, and they waited for yet another GET (found by a review).
#[test]
fn a_get_stream_that_ended_at_its_bound_resumes_as_an_open_stream() {
    let mut config = HttpServerConfig::new(server_config());
    config.server.limits.max_buffered_output = 64 * 1024;
    config.keepalive = None;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let get = get_stream(&mut s, &[("Mcp-Session-Id", &sid)]);
    let key = s.connections()[0];
    let notify = |s: &mut HttpServer| {
        s.connection(key)
            .unwrap()
            .notify("notifications/tools/list_changed", None)
            .unwrap();
        s.pump();
    };
    let mut sent = 0;
    while s.poll_stream(get).unwrap().bytes.len() < 64 * 1024 {
        notify(&mut s);
        sent += 1;
        assert!(sent < 100_000, "the stream never filled");
    }
    notify(&mut s); // over its bound: it ends, and this one waits for the next GET
    // The client read a little of it, then lost the connection; it comes back before its
    // host has drained the old stream or reported it closed.
    let mut reader = StreamReader::new();
    let head = s.poll_stream(get).unwrap().bytes[..4096].to_vec();
    reader.feed(&head, |_| {});
    s.consume_stream(get, head.len());
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let mut reader = StreamReader::new();
    let (_, finished) = read_stream(&mut s, resumed, &mut reader);
    assert!(!finished, "the resumed GET stream ended at once");
    notify(&mut s);
    let (later, _) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(later.len(), 1, "{later:?}");
}

/// The same for a request's stream in a 2025-11-25 session: once what waits on it reaches
/// the bound, it is closed for polling (SEP-1699), and the answers to the session's other
/// requests go on (they waited behind it). Its client resumes it with `Last-Event-ID` and
/// gets the rest, then the answer, each message once.
#[test]
fn an_unread_request_stream_is_closed_for_polling_and_holds_no_answer_back() {
    let mut config = HttpServerConfig::new(server_config());
    config.server.limits.max_buffered_output = 64 * 1024;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let (slow, key, slow_id) = post_request(
        &mut s,
        &sid,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}"#,
    );
    let mut reader = StreamReader::new();
    read_stream(&mut s, slow, &mut reader);
    let mut sent = 0;
    let mut progress = |s: &mut HttpServer| {
        sent += 1;
        s.connection(key)
            .unwrap()
            .progress(slow_id.as_id(), f64::from(sent), None, None)
            .unwrap();
        s.pump();
    };
    while s.poll_stream(slow).unwrap().bytes.len() < 64 * 1024 {
        progress(&mut s);
        assert!(s.poll_stream(slow).is_some(), "the stream ended early");
    }
    for _ in 0..10 {
        progress(&mut s);
    }
    another_request_is_answered(&mut s, &sid);
    // The slow call's answer comes after its stream was closed.
    s.connection(key)
        .unwrap()
        .respond(slow_id.as_id(), RawJson::new("{}").unwrap())
        .unwrap();
    s.pump();
    let (first, finished) = read_stream(&mut s, slow, &mut reader);
    assert!(finished, "the unread stream was closed");
    s.stream_closed(T0, slow);
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, finished) = read_stream(&mut s, resumed, &mut reader);
    assert!(finished, "the resumed stream ends with the answer");
    let all: Vec<&Value> = first.iter().chain(&rest).collect();
    let progress: Vec<f64> = all
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress.len(), sent as usize, "each notification once");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "in order");
    assert_eq!(all.last().unwrap()["id"], 9, "the answer comes last");
    assert_eq!(s.open_streams(), 0);
}

/// A server with a 2 KiB output bound and no keep-alives, and a 2025-06-18 session opened on
/// it (one output for every stream): the server and the session's id.
fn small_output_session() -> (HttpServer, String) {
    let mut config = HttpServerConfig::new(server_config());
    config.keepalive = None;
    config.server.limits.max_buffered_output = 2048;
    let mut s = HttpServer::new(config);
    let r = send(&mut s, "POST", &[], INIT_WITH_SAMPLING);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    (s, sid)
}

/// In a 2025-06-18 session (one output for every stream), a stream whose client stops
/// reading holds the others' messages back at the output bound. When its client leaves, the
/// way is clear at once: the stream held back is named by `poll_woken`. It was named only at
/// the next input or timer, up to the keep-alive's 15 s later, or never without one (found
/// by a review of the server).
#[test]
fn a_stream_whose_client_left_lets_the_others_go_at_once() {
    let (mut s, sid) = small_output_session();
    let v = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let r = send(
        &mut s,
        "POST",
        &v,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x","_meta":{{"progressToken":"p{id}"}}}}}}"#
        )
    };
    let (slow, key, id2) = post_request(&mut s, &sid, &call(2));
    let (other, _, id3) = post_request(&mut s, &sid, &call(3));
    // Both are streams now; `slow`'s client reads nothing from here on.
    let _ = (
        s.poll_stream(slow).is_some(),
        s.poll_stream(other).is_some(),
    );
    // Past the stream's bound (2 KiB): the last of these wait in the connection's output.
    let message = "m".repeat(300);
    for step in 1..=8 {
        s.connection(key)
            .unwrap()
            .progress(id2.as_id(), f64::from(step), None, Some(&message))
            .expect("room in the connection's output");
        s.pump();
    }
    // The answer to the other request waits behind `slow`'s messages.
    s.connection(key)
        .unwrap()
        .respond(id3.as_id(), RawJson::new("{}").unwrap())
        .expect("room for the answer");
    s.pump();
    let held: Vec<HttpStreamId> = std::iter::from_fn(|| s.poll_woken()).collect();
    assert!(!held.contains(&other), "held back: {held:?}");
    s.stream_closed(T0, slow);
    let woken: Vec<HttpStreamId> = std::iter::from_fn(|| s.poll_woken()).collect();
    assert!(woken.contains(&other), "{woken:?}");
    let (msgs, _) = read_stream(&mut s, other, &mut StreamReader::new());
    assert!(msgs.iter().any(|m| m["id"] == 3), "{msgs:?}");
}

/// In a 2025-06-18 session whose output is full (a stream whose client does not read holds
/// it), a new request is refused for now (503, `Retry-After: 1`) instead of taken: its answer
/// could not be written, and the hosts kept every refused answer to give it later, as many as
/// the client sent (a review of the C example traced 200 MB held). Notifications still go
/// in, and once the stream's client leaves, requests are taken again.
#[test]
fn requests_into_a_session_whose_output_is_full_are_refused_for_now() {
    let (mut s, sid) = small_output_session();
    let v = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(send(&mut s, "POST", &v, initialized).status, 202);
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x","_meta":{{"progressToken":"p{id}"}}}}}}"#
        )
    };
    let (slow, key, id2) = post_request(&mut s, &sid, &call(2));
    let _ = s.poll_stream(slow).is_some(); // its client reads nothing from here on
    let message = "m".repeat(300);
    let mut step = 0;
    let full = loop {
        step += 1;
        let sent =
            s.connection(key)
                .unwrap()
                .progress(id2.as_id(), f64::from(step), None, Some(&message));
        s.pump();
        if let Err(e) = sent {
            break e;
        }
        assert!(step < 1000, "never full");
    };
    assert_eq!(full, mcpwire::conn::Error::OutputFull);
    let r = send(&mut s, "POST", &v, &call(3));
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(header(&r, "Retry-After"), Some("1"));
    assert!(
        events(&mut s).is_empty(),
        "the refused request reached the application"
    );
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#;
    assert_eq!(send(&mut s, "POST", &v, cancel).status, 202);
    let evs = events(&mut s);
    assert!(
        matches!(&evs[..], [(_, Ev::PeerCancelled { .. })]),
        "the notification went in: {evs:?}"
    );
    s.stream_closed(T0, slow);
    s.pump();
    let (_, _, id4) = post_request(&mut s, &sid, &call(4));
    assert_eq!(id4, mcpwire::jsonrpc::OwnedId::Int(4));
}

/// A stateless request's stream keeps its messages as frames until the host drains it (so
/// that a lone answer can become a JSON body): they count against the same bound, and once
/// the host drains the stream they all come, in order, as SSE events without ids.
#[test]
fn a_stateless_stream_not_yet_drained_is_bounded_and_loses_nothing() {
    let mut config = HttpServerConfig::new(server_config());
    config.server.limits.max_buffered_output = 64 * 1024;
    let mut s = HttpServer::new(config);
    let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"t"}}}"#;
    let Body::Stream(st) = send(
        &mut s,
        "POST",
        &modern_headers("tools/call", Some("slow")),
        body,
    )
    .body
    else {
        panic!()
    };
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    let mut sent = 0;
    let full = loop {
        match s
            .connection(*key)
            .unwrap()
            .progress(id.as_id(), f64::from(sent + 1), None, None)
        {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        s.pump();
        assert!(sent < 100_000, "never refused");
    };
    assert_eq!(full, mcpwire::conn::Error::OutputFull);
    let mut reader = StreamReader::new();
    let mut last_progress = 0.0;
    let mut got = 0;
    let mut ids = Vec::new();
    let mut answered = false;
    while let Some(o) = s.poll_stream(st) {
        let bytes = o.bytes.to_vec();
        if bytes.is_empty() {
            // The client reads; the application answers once it has caught up.
            if !answered && got == sent {
                s.connection(*key)
                    .unwrap()
                    .respond(id.as_id(), RawJson::new("{}").unwrap())
                    .unwrap();
                answered = true;
                continue;
            }
            break;
        }
        let mut msgs = Vec::new();
        reader.feed(&bytes, |m| {
            msgs.push(serde_json::from_slice::<Value>(m).unwrap())
        });
        ids.push(reader.last_event_id().map(str::to_owned));
        s.consume_stream(st, bytes.len());
        for m in msgs {
            if m["method"] == "notifications/progress" {
                let p = m["params"]["progress"].as_f64().unwrap();
                assert!(p > last_progress, "out of order: {p} after {last_progress}");
                last_progress = p;
                got += 1;
            } else {
                assert_eq!(m["id"], 9);
                assert_eq!(got, sent, "the answer came before every notification");
            }
        }
    }
    assert_eq!(got, sent);
    assert!(answered);
    // 2026-07-28 removed SSE event ids with resumption (SEP-2575): a client that saw some
    // would try a `Last-Event-ID` GET after a cut, which can only fail.
    assert!(!ids.is_empty());
    assert!(ids.iter().all(Option::is_none), "event ids: {ids:?}");
}

/// Session and event stores that several servers (replicas) share, as Redis would be.
#[derive(Clone, Default)]
struct Replicated(std::sync::Arc<std::sync::Mutex<Shared>>);

/// The events, the sessions' `initialize` requests, how many touches came, whether the
/// store is down (its reads fail), and whether it refuses to record sessions.
#[derive(Default)]
struct Shared(
    Option<mcpwire::http::MemoryEventStore>,
    std::collections::HashMap<String, String>,
    usize,
    bool,
    bool,
);

impl mcpwire::http::EventStore for Replicated {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        let mut inner = self.0.lock().unwrap();
        let events = inner
            .0
            .get_or_insert_with(|| mcpwire::http::MemoryEventStore::new(64));
        events.append(session, stream, event, bytes);
    }
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        let mut inner = self.0.lock().unwrap();
        if inner.3 {
            return Err(mcpwire::http::StoreUnavailable);
        }
        match inner.0.as_mut() {
            Some(events) => events.replay(session, stream, after, out),
            None => Ok(()),
        }
    }
    fn forget(&mut self, session: &str) {
        if let Some(events) = self.0.lock().unwrap().0.as_mut() {
            events.forget(session);
        }
    }
}

impl mcpwire::http::SessionStore for Replicated {
    fn create(
        &mut self,
        session: &str,
        initialize: &str,
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        let mut inner = self.0.lock().unwrap();
        if inner.4 {
            return Err(mcpwire::http::StoreUnavailable);
        }
        inner.1.insert(session.to_owned(), initialize.to_owned());
        Ok(())
    }
    fn load(&mut self, session: &str) -> Result<Option<String>, mcpwire::http::StoreUnavailable> {
        let inner = self.0.lock().unwrap();
        if inner.3 {
            return Err(mcpwire::http::StoreUnavailable);
        }
        Ok(inner.1.get(session).cloned())
    }
    fn touch(&mut self, session: &str) -> Result<bool, mcpwire::http::StoreUnavailable> {
        let mut inner = self.0.lock().unwrap();
        inner.2 += 1;
        if inner.3 {
            return Err(mcpwire::http::StoreUnavailable);
        }
        Ok(inner.1.contains_key(session))
    }
    fn forget(&mut self, session: &str) -> Result<(), mcpwire::http::StoreUnavailable> {
        let mut inner = self.0.lock().unwrap();
        if inner.3 {
            return Err(mcpwire::http::StoreUnavailable);
        }
        inner.1.remove(session);
        Ok(())
    }
}

impl Replicated {
    /// Makes the store's reads fail (`true`), or work again.
    fn set_down(&self, down: bool) {
        self.0.lock().unwrap().3 = down;
    }

    fn touches(&self) -> usize {
        self.0.lock().unwrap().2
    }

    fn stored_events(&self) -> usize {
        self.0.lock().unwrap().0.as_ref().map_or(0, |e| e.len())
    }
}

/// The configuration of replica `n` of a deployment sharing `stores`.
fn replica_config(stores: &Replicated, n: u64) -> HttpServerConfig {
    let mut config = HttpServerConfig::new(server_config());
    config.events = Some(Box::new(stores.clone()));
    config.sessions = Some(Box::new(stores.clone()));
    config.first_stream_id = n << 48;
    config
}

/// Replica `n` of a deployment sharing `stores`.
fn replica(stores: &Replicated, n: u64) -> HttpServer {
    let mut config = replica_config(stores, n);
    config.keepalive = None; // the tests here check the sessions' own deadlines
    HttpServer::new(config)
}

const INIT_WITH_SAMPLING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"moving-client","version":"7"}}}"#;

#[test]
fn a_session_opened_on_one_replica_is_served_by_another() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let r = send(&mut a, "POST", &[], INIT_WITH_SAMPLING);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    assert_eq!(
        send(
            &mut a,
            "POST",
            &[("Mcp-Session-Id", &sid)],
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        )
        .status,
        202
    );
    // B never saw the handshake; without the shared store it would answer 404.
    assert_eq!(b.sessions(), 0);
    let (stream, key, id) = post_request(
        &mut b,
        &sid,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#,
    );
    assert!(stream.0 >= 2 << 48, "B's stream ids come from B's range");
    assert_eq!(b.sessions(), 1);
    let conn = b.connection(key).unwrap();
    assert_eq!(conn.protocol_version(), Some(ProtocolVersion::V2025_06_18));
    let info: Value = serde_json::from_str(conn.peer_info().unwrap().get()).unwrap();
    assert_eq!(
        info["name"], "moving-client",
        "the client's identity moved too"
    );
    assert!(
        conn.peer_capabilities()
            .unwrap()
            .has(mcpwire::mcp::Caps::SAMPLING),
        "and its capabilities"
    );
    conn.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    b.pump();
    let (msgs, finished) = read_stream(&mut b, stream, &mut StreamReader::new());
    assert_eq!(msgs.len(), 1, "exactly the answer: {msgs:?}");
    assert_eq!(msgs[0]["id"], 2);
    assert!(finished);
    // A's copy keeps serving too.
    let (_, _, _) = post_request(
        &mut a,
        &sid,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
    );
    // An unknown session is still 404 on every replica.
    assert_eq!(
        send(&mut b, "POST", &[("Mcp-Session-Id", "feedface")], INIT).status,
        404
    );
}

#[test]
fn a_stream_dropped_on_one_replica_resumes_on_another_without_loss_or_duplicates() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    let (stream, key, id) = post_request(
        &mut a,
        &sid,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}"#,
    );
    let log = |s: &mut HttpServer, text: &str| {
        s.connection(key)
            .unwrap()
            .log(
                id.as_id(),
                mcpwire::mcp::LogLevel::Info,
                None,
                RawJson::new(text).unwrap(),
            )
            .unwrap();
        s.pump();
    };
    log(&mut a, "\"one\"");
    let mut reader = StreamReader::new();
    let (seen, _) = read_stream(&mut a, stream, &mut reader);
    assert_eq!(seen.len(), 1, "the client saw the first message on A");
    // The client's connection to A drops; A goes on working on the request.
    a.stream_closed(T0, stream);
    log(&mut a, "\"two\"");
    a.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    a.pump();
    // The client reconnects through the load balancer, which picks B.
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut b,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, finished) = read_stream(&mut b, resumed, &mut reader);
    assert_eq!(rest.len(), 2, "what the client missed, once: {rest:?}");
    assert_eq!(rest[0]["params"]["data"], "two");
    assert_eq!(rest[1]["id"], 4);
    assert!(finished, "B has nothing more for A's stream");
    // Resuming again from the last event seen replays nothing.
    let last = reader.last_event_id().unwrap().to_owned();
    let Body::Stream(again) = send(
        &mut b,
        "GET",
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
        "",
    )
    .body
    else {
        panic!()
    };
    let (none, finished) = read_stream(&mut b, again, &mut reader);
    assert!(none.is_empty() && finished);
}

/// A shared store that cannot be read just now gets the client 503 with `Retry-After`, not
/// an answer that loses what is stored: a session opened on another replica was answered 404
/// (its client threw it away and started over), a DELETE too, and a resumed stream whose
/// answer was stored ended empty (the request was over for the client, without its answer).
/// Once the store answers again, the same requests are served, the answer included.
#[test]
fn a_shared_store_that_cannot_be_read_gets_503_and_loses_nothing() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let (sid, key, id, mut reader) = a_call_seen_once_then_dropped(&mut a, "\"one\"");
    log_on(&mut a, key, &id, "\"two\"");
    a.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    a.pump();
    let last = reader.last_event_id().unwrap().to_owned();
    let resume = [
        ("Mcp-Session-Id", sid.as_str()),
        ("Last-Event-ID", last.as_str()),
    ];
    let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    stores.set_down(true);
    for (on_a, method, headers, body) in [
        (true, "GET", &resume[..], ""),
        (false, "GET", &resume[..], ""),
        (false, "POST", &resume[..1], ping),
        (false, "DELETE", &resume[..1], ""),
    ] {
        let server = if on_a { &mut a } else { &mut b };
        let r = send(server, method, headers, body);
        assert_eq!(r.status, 503, "{method} {headers:?}: {r:?}");
        assert_eq!(header(&r, "Retry-After"), Some("1"), "{method}");
    }
    assert_eq!(
        b.sessions(),
        0,
        "nothing taken over from a store that did not answer"
    );
    stores.set_down(false);
    // The client comes back: B has the rest of the stream, the answer included.
    let resumed = get_stream(&mut b, &resume);
    let (rest, finished) = read_stream(&mut b, resumed, &mut reader);
    assert_eq!(rest.len(), 2, "what the client missed: {rest:?}");
    assert_eq!(rest[0]["params"]["data"], "two");
    assert_eq!(rest[1]["id"], 4);
    assert!(finished);
    assert_eq!(send(&mut b, "POST", &resume[..1], ping).status, 200);
    assert_eq!(send(&mut b, "DELETE", &resume[..1], "").status, 200);
}

/// On replica `a`: a session, a tools/call (id 4) whose stream carries one log message
/// (`text`) that its client reads before its connection drops. The session, where the call
/// reached the app, and the client's reader (its last event id).
fn a_call_seen_once_then_dropped(
    a: &mut HttpServer,
    text: &str,
) -> (String, ConnKey, mcpwire::jsonrpc::OwnedId, StreamReader) {
    let sid = open_session(a);
    let (stream, key, id) = post_request(
        a,
        &sid,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}"#,
    );
    log_on(a, key, &id, text);
    let mut reader = StreamReader::new();
    let (seen, _) = read_stream(a, stream, &mut reader);
    assert_eq!(seen.len(), 1, "{seen:?}");
    a.stream_closed(T0, stream);
    (sid, key, id, reader)
}

/// A client that resumes on another replica before the request's next message is stored
/// keeps its place: the replica has nothing to replay, so it sends the client's own event id
/// back (an event without data) and a `retry`, and the client comes back later (SEP-1699
/// polling) and gets the rest. The stream ended with no bytes at all: the TypeScript SDK took
/// that for a finished stream, forgot its cursor and never got the answer (found by a
/// helper's audit with two replicas and the real SDK).
#[test]
fn a_resumption_on_another_replica_before_anything_new_keeps_the_clients_place() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let (sid, key, id, reader) = a_call_seen_once_then_dropped(&mut a, "\"one\"");
    let last = reader.last_event_id().unwrap().to_owned();
    // Nothing new yet: B replays nothing, but keeps the cursor and says when to retry.
    let mut on_b = StreamReader::new();
    let resumed = get_stream(
        &mut b,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (none, finished) = read_stream(&mut b, resumed, &mut on_b);
    assert!(none.is_empty() && finished, "{none:?}");
    assert_eq!(
        on_b.last_event_id(),
        Some(last.as_str()),
        "the client's place"
    );
    assert!(on_b.retry().is_some(), "and when to come back");
    // A goes on; the client comes back to B and gets the rest.
    log_on(&mut a, key, &id, "\"two\"");
    a.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    a.pump();
    let again = get_stream(
        &mut b,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, finished) = read_stream(&mut b, again, &mut on_b);
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["params"]["data"], "two");
    assert_eq!(rest[1]["id"], 4);
    assert!(finished);
}

/// A DELETE on a replica at its session cap, every session of its own busy, still ends a
/// session another replica opened: it was taken over first, which needed room (503, and the
/// session lived on everywhere).
#[test]
fn a_delete_on_a_full_replica_ends_another_replicas_session() {
    let stores = Replicated::default();
    let mut a = replica(&stores, 1);
    let mut config = replica_config(&stores, 2);
    config.max_sessions = 1;
    let mut b = HttpServer::new(config);
    let on_a = open_session(&mut a);
    let on_b = open_session(&mut b);
    let _held = get_stream(&mut b, &[("Mcp-Session-Id", &on_b)]);
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    assert_eq!(
        send(&mut b, "POST", &[("Mcp-Session-Id", &on_a)], ping).status,
        503,
        "B is full: it cannot serve A's session"
    );
    assert_eq!(
        send(&mut b, "DELETE", &[("Mcp-Session-Id", &on_a)], "").status,
        200
    );
    assert_eq!(
        send(&mut a, "POST", &[("Mcp-Session-Id", &on_a)], ping).status,
        404,
        "gone everywhere"
    );
    assert_eq!(
        send(&mut b, "DELETE", &[("Mcp-Session-Id", &on_a)], "").status,
        404
    );
    assert_eq!(b.sessions(), 1, "B's own session stays");
}

#[test]
fn a_delete_on_one_replica_ends_the_session_on_every_replica() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    let (stream, key, id) = post_request(
        &mut a,
        &sid,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}"#,
    );
    log_on(&mut a, key, &id, "\"working\"");
    let _ = read_stream(&mut a, stream, &mut StreamReader::new());
    assert!(stores.stored_events() > 0);
    assert_eq!(
        send(&mut b, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
        200
    );
    assert_eq!(stores.stored_events(), 0, "its events went with it");
    // A still holds a copy, but the shared store says the session is gone.
    let r = send(
        &mut a,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 404);
    assert_eq!(a.sessions(), 0, "and A let its copy go");
    assert_eq!(
        send(&mut b, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
        404
    );
}

#[test]
fn a_replica_letting_an_idle_copy_expire_leaves_the_shared_session_alone() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let (sid, _, _, reader) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    let later = T0.after(std::time::Duration::from_secs(3600));
    a.handle_timeout(later);
    assert_eq!(a.sessions(), 0, "A's idle copy expired");
    assert!(stores.stored_events() > 0, "the shared events stay");
    // The client carries on, on B.
    let last = reader.last_event_id().unwrap().to_owned();
    let r = send_at(
        &mut b,
        later,
        "GET",
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
        "",
    );
    assert_eq!(r.status, 200);
    // And back on A, which takes the session over again.
    let r = send_at(
        &mut a,
        later,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#,
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(json_body(&r)["id"], 6);
}

/// A replica that lets its copy of a session go (idle expiry, or eviction at its cap) while a
/// request of it is still awaited answers that request with an error in the shared events:
/// the client, resuming on another replica, gets it and its stream ends. The answer could no
/// longer come: the other replica had nothing to replay and sent the client back for ever.
#[test]
fn a_replica_letting_a_busy_copy_go_answers_its_requests_for_the_other_replicas() {
    for evicted in [false, true] {
        let stores = Replicated::default();
        let mut config = replica_config(&stores, 1);
        config.keepalive = None;
        config.max_sessions = 1;
        let (mut a, mut b) = (HttpServer::new(config), replica(&stores, 2));
        let (sid, key, id, reader) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
        let later = T0.after(std::time::Duration::from_secs(3600));
        if evicted {
            // Another client's session takes A's only slot.
            open_session_at(&mut a, T0);
        } else {
            a.handle_timeout(later);
        }
        assert!(a.connection(key).is_none(), "A let its copy go");
        let last = reader.last_event_id().unwrap().to_owned();
        let mut on_b = StreamReader::new();
        let resumed = get_stream(
            &mut b,
            &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
        );
        let (rest, finished) = read_stream(&mut b, resumed, &mut on_b);
        assert_eq!(rest.len(), 1, "evicted {evicted}: {rest:?}");
        assert_eq!(rest[0]["id"], 4, "{id}");
        assert_eq!(rest[0]["error"]["code"], -32603, "{rest:?}");
        assert!(finished, "the stream ends with its answer");
    }
}

/// A replica that stops for good (a rolling deploy) answers the requests it will never
/// answer, for the clients that resume them elsewhere; answers already given go out as they
/// are. Its clients were sent back with `retry` for as long as they waited.
#[test]
fn a_replica_that_stops_answers_what_it_never_will() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let (sid, _, _, reader) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    let (other, key, id, other_reader) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    a.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    assert_eq!(a.abandon_requests(), 1);
    assert_eq!(a.abandon_requests(), 0, "once");
    for (sid, reader, answer) in [(&sid, &reader, "error"), (&other, &other_reader, "result")] {
        let last = reader.last_event_id().unwrap().to_owned();
        let resumed = get_stream(&mut b, &[("Mcp-Session-Id", sid), ("Last-Event-ID", &last)]);
        let (rest, finished) = read_stream(&mut b, resumed, &mut StreamReader::new());
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert!(rest[0].get(answer).is_some(), "{rest:?}");
        assert!(finished);
    }
    // Without a shared store there is nobody to tell.
    let mut alone = server();
    a_call_seen_once_then_dropped(&mut alone, "\"working\"");
    assert_eq!(alone.abandon_requests(), 0);
}

/// Replica 1 of `stores` with room for `max_sessions` sessions, no keep-alives.
fn small_replica(stores: &Replicated, max_sessions: usize) -> HttpServer {
    let mut config = replica_config(stores, 1);
    config.keepalive = None;
    config.max_sessions = max_sessions;
    HttpServer::new(config)
}

/// An answer the application gave before the replica let the session go (not yet taken out
/// of the connection) reaches the client, not the error for an abandoned request.
#[test]
fn an_answer_given_before_the_copy_goes_is_not_abandoned() {
    let stores = Replicated::default();
    let (mut a, mut b) = (small_replica(&stores, 1), replica(&stores, 2));
    let (sid, key, id, reader) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    a.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    open_session_at(&mut a, T0); // evicts the session, its answer not yet pumped
    let last = reader.last_event_id().unwrap().to_owned();
    let resumed = get_stream(
        &mut b,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    let (rest, finished) = read_stream(&mut b, resumed, &mut StreamReader::new());
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(
        rest[0]["result"]["content"],
        serde_json::json!([]),
        "{rest:?}"
    );
    assert!(finished);
}

/// A session deleted on another replica gets no abandoned answers from the replica that let
/// its copy go later: nobody would read them, and nothing would forget them.
#[test]
fn a_copy_of_a_session_deleted_elsewhere_leaves_nothing_in_the_store() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let (sid, key, _, _) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    let r = send(&mut b, "DELETE", &[("Mcp-Session-Id", &sid)], "");
    assert_eq!(r.status, 200);
    assert_eq!(stores.stored_events(), 0);
    a.handle_timeout(T0.after(std::time::Duration::from_secs(3600)));
    assert!(a.connection(key).is_none(), "A let its copy go");
    assert_eq!(
        stores.stored_events(),
        0,
        "no answer for a session gone everywhere"
    );
}

/// A session store that panics when it is touched for one session (`bad`), and otherwise is
/// `Replicated`: host code with a bug that the engine's timers run.
struct PanicsTouching(Replicated, std::sync::Arc<std::sync::Mutex<String>>);

impl mcpwire::http::SessionStore for PanicsTouching {
    fn create(
        &mut self,
        session: &str,
        initialize: &str,
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        self.0.create(session, initialize)
    }
    fn load(&mut self, session: &str) -> Result<Option<String>, mcpwire::http::StoreUnavailable> {
        self.0.load(session)
    }
    fn touch(&mut self, session: &str) -> Result<bool, mcpwire::http::StoreUnavailable> {
        let bad = self.1.lock().unwrap().clone();
        assert_ne!(bad, session, "the store's bug");
        self.0.touch(session)
    }
    fn forget(&mut self, session: &str) -> Result<(), mcpwire::http::StoreUnavailable> {
        mcpwire::http::SessionStore::forget(&mut self.0, session)
    }
}

/// A session the shared store could not record does not open: its `initialize` gets 503
/// with `Retry-After`, and the client comes back. It opened, and got 404 from every other
/// replica (and from this one at its first touch), so that its client opened another, over
/// and over, for as long as the store refused (a Redis full under `noeviction`, an
/// `initialize` over the store's record size).
#[test]
fn a_session_the_store_could_not_record_does_not_open() {
    let stores = Replicated::default();
    let mut a = replica(&stores, 1);
    stores.0.lock().unwrap().4 = true;
    let r = send(&mut a, "POST", &[], INIT_WITH_SAMPLING);
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(header(&r, "Retry-After"), Some("1"));
    assert!(header(&r, "Mcp-Session-Id").is_none());
    assert_eq!(a.sessions(), 0);
    assert_eq!(a.poll_timeout(), None, "nothing left of it");
    assert_eq!(a.open_streams(), 0, "not even its stream");
    // Once the store records again, the same request opens a session.
    stores.0.lock().unwrap().4 = false;
    let r = send(&mut a, "POST", &[], INIT_WITH_SAMPLING);
    assert_eq!(r.status, 200);
    let sid = header(&r, "Mcp-Session-Id").unwrap().to_owned();
    assert_eq!(a.sessions(), 1);
    let mut b = replica(&stores, 2);
    let r = send(
        &mut b,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202, "the other replica knows it");
}

/// Replica 1 of `stores`, no keep-alives, whose session store panics when touched for the
/// session id put in the returned cell (none at first).
fn touch_panicking_replica(
    stores: &Replicated,
) -> (HttpServerConfig, std::sync::Arc<std::sync::Mutex<String>>) {
    let bad = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut config = replica_config(stores, 1);
    config.sessions = Some(Box::new(PanicsTouching(stores.clone(), bad.clone())));
    config.keepalive = None;
    (config, bad)
}

/// A session whose ending panicked, and whose client then came back, is a session like any
/// other when it ends later: its awaited requests get their -32603 in the shared events.
/// It stayed marked, and ended without the stores' calls.
#[test]
fn a_session_whose_ending_panicked_ends_normally_once_active_again() {
    let stores = Replicated::default();
    let (config, bad) = touch_panicking_replica(&stores);
    let mut a = HttpServer::new(config);
    let (sid, key, _, _) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    *bad.lock().unwrap() = sid.clone();
    let later = T0.after(std::time::Duration::from_secs(3600));
    let expired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        a.handle_timeout(later);
    }));
    assert!(expired.is_err(), "the store panicked under the expiry");
    // The store is mended, and the client comes back.
    bad.lock().unwrap().clear();
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let r = send_at(&mut a, later, "POST", &[("Mcp-Session-Id", &sid)], ping);
    assert_eq!(r.status, 200, "{r:?}");
    let stored = stores.stored_events();
    a.handle_timeout(later.after(std::time::Duration::from_secs(3600)));
    assert!(a.connection(key).is_none(), "expired");
    assert_eq!(
        stores.stored_events(),
        stored + 1,
        "the awaited call's -32603 is stored for the client that resumes it"
    );
}

/// The same at the session cap: a session whose eviction panicked in the store is evicted
/// without the store's calls the next time. It was picked first again by every
/// `initialize`, which panicked again, and no session could open on this replica.
#[test]
fn a_store_panicking_on_an_eviction_does_not_lock_the_sessions_out() {
    let stores = Replicated::default();
    let (mut config, bad) = touch_panicking_replica(&stores);
    config.max_sessions = 1;
    let mut a = HttpServer::new(config);
    let (first, k1, _, _) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    *bad.lock().unwrap() = first;
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        send(&mut a, "POST", &[], INIT_WITH_SAMPLING)
    }));
    assert!(opened.is_err(), "the store panics under the eviction");
    let r = send(&mut a, "POST", &[], INIT_WITH_SAMPLING);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        a.connection(k1).is_none(),
        "the working session was evicted"
    );
    assert_eq!(a.sessions(), 1);
}

/// An event store whose `append` panics for one session, every time (`bad`): host code with
/// a bug that `pump` runs. Otherwise `Replicated`.
struct PanicsAppending(Replicated, std::sync::Arc<std::sync::Mutex<String>>);

impl mcpwire::http::EventStore for PanicsAppending {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        let bad = self.1.lock().unwrap().clone();
        assert_ne!(bad, session, "the store's bug");
        self.0.append(session, stream, event, bytes);
    }
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        self.0.replay(session, stream, after, out)
    }
    fn forget(&mut self, session: &str) {
        mcpwire::http::EventStore::forget(&mut self.0, session);
    }
}

/// An event store that panics on one session's answers, every time, while `pump` routes
/// them holds nobody's answers for good, that session's included. `pump` took its whole
/// list of connections with output at once: after the panic, the ones not yet visited were
/// off the list but still marked as on it, and their answers never went out; and as every
/// host call pumps, the panicking session made every call panic, the timers' too. Now the
/// others stay listed, and that session's events go out live, unstored, from the next pump.
#[test]
fn a_store_panicking_in_pump_holds_no_answer_for_good() {
    let stores = Replicated::default();
    let bad = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut config = replica_config(&stores, 1);
    config.events = Some(Box::new(PanicsAppending(stores.clone(), bad.clone())));
    config.keepalive = None;
    let mut a = HttpServer::new(config);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let sid = open_session(&mut a);
            let (stream, key, id) = post_call(&mut a, &sid);
            let mut reader = StreamReader::new();
            let (primed, _) = read_stream(&mut a, stream, &mut reader);
            assert!(primed.is_empty(), "{primed:?}");
            (sid, stream, key, id, reader)
        })
        .collect();
    for (_, _, key, id, _) in &calls {
        a.connection(*key)
            .unwrap()
            .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
            .unwrap();
    }
    // The last session's answer is the first one routed (the list is taken from its end):
    // the others are still to be routed when it panics.
    *bad.lock().unwrap() = calls[2].0.clone();
    let pumped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.pump()));
    assert!(pumped.is_err(), "the store panicked");
    a.pump();
    for (_, stream, _, _, mut reader) in calls {
        let (msgs, finished) = read_stream(&mut a, stream, &mut reader);
        assert_eq!(msgs.len(), 1, "{stream:?}: {msgs:?}");
        assert_eq!(msgs[0]["id"], 9);
        assert!(finished);
    }
    // And the timers run: the sessions' idle time starts at the host's next time, and ends.
    a.handle_timeout(T0.after(std::time::Duration::from_secs(3600)));
    a.handle_timeout(T0.after(std::time::Duration::from_secs(7200)));
    assert_eq!(a.sessions(), 0);
}

/// A store that panics every time one session's expiry calls it does not stall the other
/// sessions' expiry behind it: the host catches the panic and calls again, and the session
/// whose ending panicked ends without the store's calls the second time. Before, it came
/// first every time, panicked again, and no session after it ever expired.
#[test]
fn a_store_panicking_on_one_sessions_expiry_does_not_stall_the_others() {
    let stores = Replicated::default();
    let (config, bad) = touch_panicking_replica(&stores);
    let mut a = HttpServer::new(config);
    let (first, k1, _, _) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    let (_, k2, _, _) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    *bad.lock().unwrap() = first;
    let later = T0.after(std::time::Duration::from_secs(3600));
    let fired = |a: &mut HttpServer| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.handle_timeout(later))).is_ok()
    };
    assert!(!fired(&mut a), "the store panics under the first expiry");
    assert!(fired(&mut a), "the second call goes through");
    assert!(a.connection(k2).is_none(), "the other session expired");
    assert!(
        a.connection(k1).is_none(),
        "and so did the one whose store panicked"
    );
    assert_eq!(a.sessions(), 0);
    assert_eq!(a.poll_timeout(), None, "nothing left due");
}

/// At the cap, an idle session with a request still at work is evicted only after those
/// without: evicting it ends that work.
#[test]
fn eviction_spares_a_session_with_work_in_flight() {
    let stores = Replicated::default();
    let mut a = small_replica(&stores, 2);
    let (_, working, _, _) = a_call_seen_once_then_dropped(&mut a, "\"working\"");
    let later = T0.after(std::time::Duration::from_secs(1));
    open_session_at(&mut a, later);
    open_session_at(&mut a, later.after(std::time::Duration::from_secs(1)));
    // The newest stays, and of the other two the idle one went, though it is the younger.
    assert_eq!(a.sessions(), 2);
    assert!(
        a.connection(working).is_some(),
        "the older, working session stays"
    );
}

#[test]
fn a_replica_streaming_to_a_quiet_client_keeps_the_shared_session_alive() {
    // The client only listens on its GET stream: no requests touch the session, so the
    // replica touches the shared store itself, every half idle timeout, and notices a DELETE
    // made elsewhere.
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    let r = send(&mut a, "GET", &[("Mcp-Session-Id", &sid)], "");
    assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
    let touches = stores.touches();
    let idle = HttpServerConfig::new(server_config()).session_idle_timeout;
    let due = a.poll_timeout().expect("a refresh is scheduled");
    assert_eq!(due, T0.after(idle / 2));
    a.handle_timeout(due);
    assert_eq!(stores.touches(), touches + 1);
    assert_eq!(a.sessions(), 1, "still alive, and streaming");
    let next = a.poll_timeout().unwrap();
    assert_eq!(next, due.after(idle / 2));
    // Before the next refresh, the client's other tab deletes the session through B.
    assert_eq!(
        send_at(&mut b, due, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
        200
    );
    a.handle_timeout(next);
    assert_eq!(a.sessions(), 0, "A noticed and ended its copy");
}

/// A refresh of the shared store that fails (Redis restarting, a failover, a timeout) is
/// tried again an eighth of the idle timeout later, not at the next regular refresh: the
/// store's expiry (often the idle timeout itself) runs from the last touch that went through,
/// so a missed refresh let the record lapse just before the next one, and the session ended
/// with 404 under its client's open stream (found by a review of the Redis store). A request
/// whose touch fails is served all the same, and its touch too is tried again soon.
#[test]
fn a_touch_of_the_shared_store_that_fails_is_tried_again_soon() {
    let stores = Replicated::default();
    let mut config = replica_config(&stores, 1);
    config.keepalive = None;
    config.session_idle_timeout = std::time::Duration::from_secs(2);
    let mut a = HttpServer::new(config);
    let sid = open_session(&mut a);
    let r = send(&mut a, "GET", &[("Mcp-Session-Id", &sid)], "");
    assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
    let at = Timestamp::from_millis;
    assert_eq!(a.poll_timeout(), Some(at(1_000)), "the regular refresh");
    let touches = stores.touches();
    stores.set_down(true);
    a.handle_timeout(at(1_000));
    assert_eq!(stores.touches(), touches + 1);
    assert_eq!(
        a.sessions(),
        1,
        "a failure is no verdict: the session goes on"
    );
    assert_eq!(a.poll_timeout(), Some(at(1_250)), "tried again soon");
    a.handle_timeout(at(1_250));
    assert_eq!(
        a.poll_timeout(),
        Some(at(1_500)),
        "and again while it fails"
    );
    stores.set_down(false);
    a.handle_timeout(at(1_500));
    assert_eq!(stores.touches(), touches + 3);
    assert_eq!(
        a.poll_timeout(),
        Some(at(2_500)),
        "back to the regular refresh, from the touch that went through"
    );

    // A request's touch that fails: served, and the touch tried again soon.
    stores.set_down(true);
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let r = send_at(&mut a, at(1_600), "POST", &[("Mcp-Session-Id", &sid)], ping);
    assert_eq!(r.status, 200);
    assert_eq!(a.poll_timeout(), Some(at(1_850)));
}

/// A DELETE that the shared store cannot pass on gets 503 and leaves the session as it was:
/// it got 200 while the record stayed in the store, and the next request naming the session,
/// on any replica (this one included), restored it, so a session the client ended stayed
/// good for good (found by a review of the Redis store).
#[test]
fn a_delete_the_shared_store_cannot_pass_on_gets_503_and_keeps_the_session() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    stores.set_down(true);
    for server in [&mut a, &mut b] {
        let r = send(server, "DELETE", &[("Mcp-Session-Id", &sid)], "");
        assert_eq!(r.status, 503, "{r:?}");
        assert!(header(&r, "Retry-After").is_some(), "{r:?}");
    }
    assert_eq!(a.sessions(), 1, "the session goes on here");
    stores.set_down(false);
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    assert_eq!(
        send(&mut a, "POST", &[("Mcp-Session-Id", &sid)], ping).status,
        200
    );
    // Tried again, the DELETE ends it everywhere.
    assert_eq!(
        send(&mut b, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
        200
    );
    for server in [&mut a, &mut b] {
        let r = send(server, "POST", &[("Mcp-Session-Id", &sid)], ping);
        assert_eq!(r.status, 404, "{r:?}");
    }
}

#[test]
fn tasks_requests_carry_the_task_id_in_mcp_name() {
    // SEP-2663: `tasks/get`, `tasks/update` and `tasks/cancel` route by task over HTTP.
    let mut config = HttpServerConfig::new(
        Config::server("tasks", "1")
            .with_capabilities(r#"{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#)
            .unwrap(),
    );
    config.server.versions = vec![ProtocolVersion::V2026_07_28];
    let mut s = HttpServer::new(config);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#;
    for (name, ok) in [(None, false), (Some("t-2"), false), (Some(" t-1 "), true)] {
        let mut headers = modern_headers("tasks/get", name);
        if name.is_none() {
            headers.retain(|(n, _)| *n != "Mcp-Name");
        }
        let r = send(&mut s, "POST", &headers, body);
        if ok {
            assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
            let evs = events(&mut s);
            assert!(
                matches!(&evs[..], [(_, Ev::Request { method, .. })] if method == "tasks/get"),
                "{evs:?}"
            );
        } else {
            assert_eq!(r.status, 400, "{name:?}");
            assert_eq!(json_body(&r)["error"]["code"], -32020);
        }
    }
}

/// The application logs on the stream of request `id`.
fn log_on(s: &mut HttpServer, key: ConnKey, id: &mcpwire::jsonrpc::OwnedId, data: &str) {
    s.connection(key)
        .unwrap()
        .log(
            id.as_id(),
            mcpwire::mcp::LogLevel::Info,
            None,
            RawJson::new(data).unwrap(),
        )
        .unwrap();
    s.pump();
}

#[test]
fn an_answer_given_as_json_costs_no_event_store_write() {
    // Only streams that are really SSE are stored: an immediate answer never is resumed.
    let stores = Replicated::default();
    let mut a = replica(&stores, 1);
    let sid = open_session(&mut a);
    assert_eq!(
        stores.stored_events(),
        0,
        "the initialize answer was a JSON body"
    );
    let r = send(
        &mut a,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    );
    assert!(matches!(r.body, Body::Complete(..)), "{r:?}");
    assert_eq!(stores.stored_events(), 0);
    // A streamed one is stored, once the host drains it (before it sees the bytes).
    let (stream, key, id) = post_request(
        &mut a,
        &sid,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
    );
    log_on(&mut a, key, &id, "\"one\"");
    assert_eq!(stores.stored_events(), 0, "still held back");
    let mut reader = StreamReader::new();
    let (seen, _) = read_stream(&mut a, stream, &mut reader);
    assert_eq!(seen.len(), 1);
    assert_eq!(
        stores.stored_events(),
        1,
        "stored before the host had the bytes"
    );
    log_on(&mut a, key, &id, "\"two\"");
    assert_eq!(
        stores.stored_events(),
        2,
        "later events go straight to the store"
    );
}

#[test]
fn a_touch_interval_spares_store_round_trips_and_bounds_how_late_a_delete_is_seen() {
    let stores = Replicated::default();
    let mut config = replica_config(&stores, 1);
    config.shared_touch_interval = std::time::Duration::from_secs(1);
    let mut a = HttpServer::new(config);
    let mut b = replica(&stores, 2);
    let sid = open_session(&mut a);
    let ping = |s: &mut HttpServer, ms: u64, id: u64| {
        send_at(
            s,
            Timestamp::from_millis(ms),
            "POST",
            &[("Mcp-Session-Id", &sid)],
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        )
        .status
    };
    let before = stores.touches();
    for i in 0..10 {
        assert_eq!(ping(&mut a, 100 + i * 50, i), 200);
    }
    assert_eq!(
        stores.touches(),
        before,
        "within the interval: no round trip"
    );
    assert_eq!(ping(&mut a, 1100, 20), 200);
    assert_eq!(stores.touches(), before + 1, "one per interval");
    // Deleted through B: A serves on until its next touch, then answers 404.
    assert_eq!(
        send_at(
            &mut b,
            Timestamp::from_millis(1200),
            "DELETE",
            &[("Mcp-Session-Id", &sid)],
            ""
        )
        .status,
        200
    );
    assert_eq!(ping(&mut a, 1300, 21), 200, "not seen yet");
    assert_eq!(ping(&mut a, 2200, 22), 404, "seen within the interval");
}

/// A stream that ends without its answer (the application closed the connection after one
/// progress notification) stays a stream when settled: its one frame, a notification, was
/// sent as the JSON "answer" (200, `application/json`, a body with a `method`).
#[test]
fn a_stream_whose_one_frame_is_no_answer_is_not_settled_as_json() {
    let mut s = server();
    let (r, _) = post_slow_call_with_progress(&mut s);
    let evs = events(&mut s);
    let (key, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    let conn = s.connection(*key).unwrap();
    conn.progress(id.as_id(), 1.0, Some(2.0), None).unwrap();
    conn.close(T0, std::time::Duration::ZERO);
    let r = s.settle(r);
    if let Body::Complete(_, body) = &r.body {
        let v: Value = serde_json::from_slice(body).unwrap();
        panic!("settled into a JSON body: {v}");
    }
    assert!(matches!(r.body, Body::Stream(_)), "{:?}", r.status);
}

/// A host name compares ignoring case: `LOCALHOST` is loopback (Go's client sends the host as
/// the URL spells it). It got 403.
#[test]
fn a_loopback_host_in_capitals_is_loopback() {
    for host in ["LOCALHOST:3000", "LocalHost", "localhost"] {
        assert!(mcpwire::http::loopback_only(Some(host), None), "{host}");
    }
    assert!(mcpwire::http::loopback_only(
        None,
        Some("http://LOCALHOST:3000")
    ));
    assert!(!mcpwire::http::loopback_only(
        Some("LOCALHOST.evil.example"),
        None
    ));
    let mut s = HttpServer::new(HttpServerConfig::new(server_config()));
    let r = send_at(&mut s, T0, "POST", &[("Host", "LOCALHOST:3000")], INIT);
    assert_eq!(r.status, 200, "{r:?}");
}

/// Every address of 127.0.0.0/8 is loopback, and the IPv6 loopback in its long form too: a
/// server bound to 127.0.0.2 printed a URL that every client got 403 on. Other addresses,
/// and names that merely start like one, are not.
#[test]
fn every_loopback_address_is_loopback() {
    for host in [
        "127.0.0.2:8000",
        "127.1.2.3",
        "[0:0:0:0:0:0:0:1]:80",
        "[::1]",
        "::1",
    ] {
        assert!(mcpwire::http::loopback_only(Some(host), None), "{host}");
    }
    assert!(mcpwire::http::loopback_only(
        None,
        Some("http://127.0.0.2:8000")
    ));
    for host in [
        "128.0.0.1",
        "127.0.0.1.evil.example",
        "[::2]",
        "10.0.0.1:80",
        "0.0.0.0",
    ] {
        assert!(!mcpwire::http::loopback_only(Some(host), None), "{host}");
    }
    let mut s = HttpServer::new(HttpServerConfig::new(server_config()));
    let r = send_at(&mut s, T0, "POST", &[("Host", "127.0.0.2:8000")], INIT);
    assert_eq!(r.status, 200, "{r:?}");
}

/// An idle timeout of zero with shared sessions does not keep a deadline due for ever (the
/// shared record's refresh, due at half the timeout, was due at once again after each
/// `handle_timeout`: the host spun, with a store round trip each turn). It is taken as 1 ms.
#[test]
fn an_idle_timeout_of_zero_keeps_no_deadline_due() {
    let stores = Replicated::default();
    let mut config = replica_config(&stores, 1);
    config.keepalive = None;
    config.session_idle_timeout = std::time::Duration::ZERO;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let _stream = get_stream(&mut s, &[("Mcp-Session-Id", &sid)]);
    s.handle_timeout(T0);
    let before = stores.touches();
    for _ in 0..100 {
        match s.poll_timeout() {
            Some(at) if at <= T0 => s.handle_timeout(T0),
            _ => break,
        }
    }
    assert!(
        s.poll_timeout().is_none_or(|at| at > T0),
        "still due at {:?}",
        s.poll_timeout()
    );
    assert!(
        stores.touches() - before < 5,
        "{} touches",
        stores.touches() - before
    );
}

/// A request within the touch interval, which does not touch the store, gets its touch when
/// the interval ends: the store's expiry (which may be just the idle timeout) runs from then,
/// not from the touch before the request. It ran from that earlier touch, so an idle session
/// expired in the store up to an interval before its idle timeout, and the next request got
/// 404 (found by a review of the server).
#[test]
fn a_request_within_the_touch_interval_is_touched_when_the_interval_ends() {
    let stores = Replicated::default();
    let mut config = replica_config(&stores, 1);
    config.keepalive = None;
    config.session_idle_timeout = std::time::Duration::from_secs(10);
    config.shared_touch_interval = std::time::Duration::from_secs(1);
    let mut a = HttpServer::new(config);
    let sid = open_session(&mut a); // touched at T0 (the handshake)
    let before = stores.touches();
    let at = Timestamp::from_millis;
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let r = send_at(&mut a, at(500), "POST", &[("Mcp-Session-Id", &sid)], ping);
    assert_eq!(r.status, 200);
    assert_eq!(
        stores.touches(),
        before,
        "within the interval: no round trip"
    );
    assert_eq!(
        a.poll_timeout(),
        Some(at(1_000)),
        "the touch is due when it ends"
    );
    a.handle_timeout(at(1_000));
    assert_eq!(stores.touches(), before + 1);
    // Then nothing until the session's own expiry, 10 s after the request.
    assert_eq!(a.poll_timeout(), Some(at(10_500)));
}

/// Without a touch interval, a request touches the store once: its stream ending later (which
/// starts the session's idle clock again) costs no second round trip.
#[test]
fn without_a_touch_interval_a_streamed_answer_costs_one_touch() {
    let stores = Replicated::default();
    let mut a = replica(&stores, 1);
    let sid = open_session(&mut a);
    let before = stores.touches();
    let (stream, key, id, mut reader) = call_and_prime(&mut a, &sid);
    a.connection(key)
        .unwrap()
        .respond(id.as_id(), RawJson::new("{}").unwrap())
        .unwrap();
    a.pump();
    let (answers, finished) = read_stream(&mut a, stream, &mut reader);
    assert!(finished && answers.len() == 1, "{answers:?}");
    let later = Timestamp::from_millis(1_000);
    a.stream_closed(later, stream);
    a.handle_timeout(later);
    assert_eq!(stores.touches(), before + 1);
}

/// A touch interval longer than the store's expiry allows is held to half the idle timeout
/// (which the store's expiry is at least): a session busy on one replica is touched in the
/// store in time. It was not touched for the whole interval, so it expired in the store and
/// the other replicas answered its client 404.
#[test]
fn a_touch_interval_is_held_within_the_idle_timeout() {
    let stores = Replicated::default();
    let mut config = replica_config(&stores, 1);
    config.session_idle_timeout = std::time::Duration::from_secs(2);
    config.shared_touch_interval = std::time::Duration::from_secs(900);
    let mut a = HttpServer::new(config);
    let sid = open_session(&mut a);
    let before = stores.touches();
    for ms in [100, 600, 1_150, 1_700] {
        let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        let r = send_at(
            &mut a,
            Timestamp::from_millis(ms),
            "POST",
            &[("Mcp-Session-Id", &sid)],
            ping,
        );
        assert_eq!(r.status, 200);
    }
    assert_eq!(
        stores.touches(),
        before + 1,
        "touched once the interval, held to 1 s, had passed"
    );
}

#[test]
fn the_earliest_deadline_stays_right_among_many_sessions() {
    let mut config = HttpServerConfig::new(server_config());
    config.keepalive = None; // exact deadlines: the sessions' own only
    config.session_idle_timeout = std::time::Duration::from_secs(60);
    let mut s = HttpServer::new(config);
    let at = Timestamp::from_millis;
    let sids: Vec<String> = (0..300).map(|i| open_session_at(&mut s, at(i))).collect();
    assert_eq!(s.poll_timeout(), Some(at(60_000)));
    // The first hundred make a request at 30 s: each expiry moves later, so the earliest is
    // now the 101st session's.
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    for sid in &sids[..100] {
        let r = send_at(&mut s, at(30_000), "POST", &[("Mcp-Session-Id", sid)], ping);
        assert_eq!(r.status, 200);
    }
    assert_eq!(s.poll_timeout(), Some(at(60_100)));
    // A client holding a stream does not expire; letting go at 40 s starts its clock then.
    let r = send_at(
        &mut s,
        at(30_000),
        "GET",
        &[("Mcp-Session-Id", &sids[100])],
        "",
    );
    let Body::Stream(get) = r.body else {
        panic!("a GET stream")
    };
    assert_eq!(s.poll_timeout(), Some(at(60_101)));
    s.stream_closed(at(40_000), get);
    assert_eq!(s.poll_timeout(), Some(at(60_101)));
    // Everything due at 60.2 s goes; the rest stays, the next deadline right behind.
    s.handle_timeout(at(60_200));
    assert_eq!(s.sessions(), 300 - 100);
    assert_eq!(s.poll_timeout(), Some(at(60_201)));
    s.handle_timeout(at(60_299));
    assert_eq!(s.poll_timeout(), Some(at(90_000)));
    s.handle_timeout(at(90_000));
    assert_eq!(s.sessions(), 1, "the one whose client let go at 40 s");
    assert_eq!(s.poll_timeout(), Some(at(100_000)));
}

#[test]
fn a_stream_resumed_under_an_id_not_yet_handed_out_is_never_given_to_another_request() {
    // Found by the `http_server` fuzz target through the deadline heap's debug check: a
    // `Last-Event-ID` may name a stream id this server has not allocated yet, and the stream
    // it resumed was later replaced by a new request's stream of the same id, whose answers
    // then went to the client holding the resumed one.
    let mut config = HttpServerConfig::new(server_config());
    config.keepalive = None; // exact deadlines: the sessions' own only
    config.session_idle_timeout = std::time::Duration::from_secs(60);
    let mut s = HttpServer::new(config);
    let sid = open_session_at(&mut s, T0);
    let call = |id: u32| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x"}}}}"#)
    };
    let r = send_at(&mut s, T0, "POST", &[("Mcp-Session-Id", &sid)], &call(1));
    let Body::Stream(first) = r.body else {
        panic!("a stream for the call")
    };
    let future = format!("{}-0", first.0 + 1);
    let headers = [
        ("Mcp-Session-Id", sid.as_str()),
        ("Last-Event-ID", future.as_str()),
    ];
    let r = send_at(&mut s, T0, "GET", &headers, "");
    let Body::Stream(resumed) = r.body else {
        panic!("a resumed stream")
    };
    // The response has an id of its own; the stream keeps the number the client named.
    assert_ne!(resumed, first);
    let named = HttpStreamId(first.0 + 1);
    let r = send_at(&mut s, T0, "POST", &[("Mcp-Session-Id", &sid)], &call(2));
    let Body::Stream(second) = r.body else {
        panic!("a stream for the second call")
    };
    for held in [resumed, named, first] {
        assert_ne!(
            second, held,
            "a stream in use was handed to another request"
        );
    }
    // The idle clock is stopped while the client holds its streams.
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn quiet_streams_get_a_keepalive_comment_every_period() {
    // "servers are encouraged to periodically emit an SSE comment line ... as a keep-alive"
    // (2026-07-28), so that proxies and idle timeouts do not cut a quiet stream.
    let mut s = server();
    let sid = open_session(&mut s);
    let (get, _, finished) = listen(&mut s, &sid);
    assert!(!finished);
    // A POST whose answer the host has not started to drain: it may still become a JSON
    // body, so it never gets a comment.
    let h = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let r = send(
        &mut s,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow"}}"#,
    );
    let Body::Stream(held) = r.body else {
        panic!("{r:?}")
    };
    let evs = events(&mut s);
    let key = evs[0].0;
    let period = std::time::Duration::from_secs(15);
    while s.poll_woken().is_some() {} // what the requests woke
    assert_eq!(s.poll_timeout(), Some(T0.after(period)));
    s.handle_timeout(T0.after(period - std::time::Duration::from_millis(1)));
    assert_eq!(s.poll_woken(), None, "not before its time");
    s.handle_timeout(T0.after(period));
    let woken: Vec<HttpStreamId> = std::iter::from_fn(|| s.poll_woken()).collect();
    assert_eq!(woken, vec![get]);
    let o = s.poll_stream(get).unwrap();
    assert_eq!((o.bytes, o.finished), (&b":\n\n"[..], false));
    s.consume_stream(get, 3);
    // The next one a period later. A stream with bytes waiting gets none: the client is
    // not keeping up, and the bytes keep the connection busy anyway.
    let next = T0.after(period * 2);
    assert_eq!(s.poll_timeout(), Some(next));
    s.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    s.handle_timeout(next);
    let o = s.poll_stream(get).unwrap();
    let text = String::from_utf8(o.bytes.to_vec()).unwrap();
    assert!(
        text.contains("list_changed") && !text.contains(":\n\n"),
        "{text:?}"
    );
    // The held POST stream got nothing but its own events.
    let o = s.poll_stream(held).unwrap();
    let text = String::from_utf8(o.bytes.to_vec()).unwrap();
    assert!(
        !text.starts_with(':') && !text.contains("\n:\n"),
        "{text:?}"
    );
}

#[test]
fn keepalive_comments_can_be_turned_off() {
    let mut config = HttpServerConfig::new(server_config());
    config.keepalive = None;
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let (get, _, _) = listen(&mut s, &sid);
    assert_eq!(
        s.poll_timeout(),
        None,
        "a held stream stops the idle clock; nothing else"
    );
    while s.poll_woken().is_some() {} // what the requests woke
    s.handle_timeout(T0.after(std::time::Duration::from_secs(3600)));
    assert_eq!(s.poll_woken(), None);
    assert_eq!(s.poll_stream(get).map(|o| o.bytes.len()), Some(0));
}

/// RFC 9110/9112: a header name is a token and a request has one Host. A server behind a
/// lenient HTTP stack saw `Content-Length : 5` as some other header (a proxy in front may take
/// it as the length: request smuggling), and read the first of two Host headers for its
/// DNS-rebinding check (a proxy may route by the other).
#[test]
fn header_names_that_are_not_tokens_and_a_second_host_are_refused() {
    let mut s = server();
    let call = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
    let modern = modern_headers("tools/list", None);
    for extra in [
        &[("Content-Length ", "5")][..],
        &[("", "x")],
        &[("X Y", "1")],
        &[("Host", "127.0.0.1:3000"), ("Host", "evil.example")],
    ] {
        let mut headers = modern.clone();
        headers.extend_from_slice(extra);
        let r = send(&mut s, "POST", &headers, &call);
        assert_eq!(r.status, 400, "{extra:?}: {r:?}");
        assert_eq!(json_body(&r)["error"]["code"], -32600, "{extra:?}");
    }
    // Names of any token characters pass.
    let mut headers = modern.clone();
    headers.push(("X-Odd!#$%&'*+.^_`|~9", "1"));
    assert_eq!(send(&mut s, "POST", &headers, &call).status, 200);
}

/// A first stream id of `u64::MAX` and a keep-alive period of zero work: the first stream
/// overflowed the id counter (a panic in debug builds, id 0 otherwise; the ids now go on from
/// 1), and the keep-alive timer stayed due at every `now`, so a host that runs due timers
/// until none is due never stopped (zero is now taken as 1 ms).
#[test]
fn extreme_stream_ids_and_keepalive_are_taken_as_workable() {
    let mut config = HttpServerConfig::new(server_config());
    config.first_stream_id = u64::MAX;
    config.keepalive = Some(std::time::Duration::ZERO);
    let mut s = HttpServer::new(config);
    let sid = open_session(&mut s);
    let first = get_stream(
        &mut s,
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    // The `initialize` POST's stream took `u64::MAX`.
    assert_eq!(first.0, 1);
    let now = T0.after(std::time::Duration::from_secs(1));
    s.handle_timeout(now);
    assert!(
        s.poll_timeout().is_some_and(|at| at > now),
        "a timer still due: {:?}",
        s.poll_timeout()
    );
}

fn modern_only_server() -> HttpServer {
    let mut config = HttpServerConfig::new(server_config());
    config.server.versions = vec![ProtocolVersion::V2026_07_28];
    HttpServer::new(config)
}

#[test]
fn a_modern_only_server_names_its_versions_to_initialize_over_http() {
    // "SHOULD name the protocol versions it supports in any error it returns to an initialize
    // request, on any transport": a handshake-era client sends no MCP-Protocol-Version there.
    let mut s = modern_only_server();
    let r = send(
        &mut s,
        "POST",
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
    );
    let body = match r.body {
        Body::Stream(_) => {
            let evs = events(&mut s);
            panic!("initialize reached the application: {evs:?}")
        }
        _ => json_body(&r),
    };
    assert_eq!(r.status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32022, "{body}");
    assert_eq!(body["error"]["data"]["supported"], json!(["2026-07-28"]));
}

#[test]
fn a_modern_only_server_ignores_a_session_id() {
    // "An Mcp-Session-Id header on a request: ignore it" (a server of the stateless era alone).
    let mut s = modern_only_server();
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
    let mut headers = modern_headers("tools/list", None);
    headers.push(("Mcp-Session-Id", "abc"));
    let r = send(&mut s, "POST", &headers, &body);
    assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
    // Without the version header it is the stateless era's 400, not a session's 404.
    headers.retain(|(n, _)| *n != "MCP-Protocol-Version");
    let r = send(&mut s, "POST", &headers, &body);
    assert_eq!(r.status, 400);
    assert_eq!(json_body(&r)["error"]["code"], -32020);
}

#[test]
fn an_initialize_with_the_2026_headers_is_checked_like_any_request() {
    // Only a handshake-era `initialize` (no MCP-Protocol-Version) skips the header checks.
    let mut s = modern_only_server();
    let r = send(
        &mut s,
        "POST",
        &modern_headers("tools/list", None),
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(json_body(&r)["error"]["code"], -32020);
}

/// A 2025-11-25 task's progress, after its task handle ended the `tools/call`'s POST stream,
/// goes where unrelated messages go: the session's GET stream (it went to the finished
/// stream, and was lost). And another session that names that stream in `Last-Event-ID`
/// gets nothing of it: a stream number is no key to another session's messages.
#[test]
fn task_progress_after_the_handle_uses_the_get_stream_and_no_other_session_sees_it() {
    let config = Config::server("http-test", "1.0")
        .with_capabilities(r#"{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}}"#)
        .unwrap();
    let mut s = HttpServer::new(HttpServerConfig::new(config));
    let a = open_session(&mut s);
    let b = open_session(&mut s);
    let (stream, key, id) = post_request(
        &mut s,
        &a,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000},"_meta":{"progressToken":"p"}}}"#,
    );
    let handle = r#"{"task":{"taskId":"t-1","status":"working","createdAt":"2026-12-03T00:00:00Z","lastUpdatedAt":"2026-12-03T00:00:00Z","ttl":60000}}"#;
    s.connection(key)
        .unwrap()
        .respond_task(id.as_id(), RawJson::new(handle).unwrap())
        .unwrap();
    s.pump();
    let (msgs, finished) = read_stream(&mut s, stream, &mut StreamReader::new());
    assert_eq!(msgs[0]["result"]["task"]["taskId"], "t-1");
    assert!(finished);
    // Session B takes the finished stream's number; A's GET stream is open.
    let last = format!("{}-0", stream.0);
    let stolen = get_stream(&mut s, &[("Mcp-Session-Id", &b), ("Last-Event-ID", &last)]);
    let (a_get, _, _) = listen(&mut s, &a);
    s.connection(key)
        .unwrap()
        .progress(id.as_id(), 0.5, None, Some("secret-of-a"))
        .unwrap();
    s.pump();
    let (seen_by_b, _) = read_stream(&mut s, stolen, &mut StreamReader::new());
    assert!(seen_by_b.is_empty(), "{seen_by_b:?}");
    let (seen_by_a, _) = read_stream(&mut s, a_get, &mut StreamReader::new());
    assert_eq!(seen_by_a.len(), 1, "{seen_by_a:?}");
    assert_eq!(seen_by_a[0]["params"]["progressToken"], "p");
    assert_eq!(seen_by_a[0]["params"]["message"], "secret-of-a");
}

/// The guard itself: whatever puts a frame of session A on a stream number that session B
/// holds (here A's connection is handed a ping on the number of B's GET stream directly, as
/// no public flow does any more), the frame never reaches B's stream; it is only stored, for
/// A. (It named a stream B did not hold, and could not fail.)
#[test]
fn a_stream_another_session_holds_never_carries_this_sessions_frames() {
    let mut s = server();
    let a = open_session(&mut s);
    let b = open_session(&mut s);
    let held = get_stream(
        &mut s,
        &[
            ("Mcp-Session-Id", &b),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    let mut reader = StreamReader::new();
    read_stream(&mut s, held, &mut reader);
    let (_, a_key, _) = post_request(
        &mut s,
        &a,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    s.connection(a_key).unwrap().handle_frame(
        T0,
        mcpwire::conn::StreamId(held.0),
        br#"{"jsonrpc":"2.0","id":"secret-of-a","method":"ping"}"#,
    );
    s.pump();
    assert!(s.poll_stream(held).is_some(), "B still holds its stream");
    let (seen_by_b, _) = read_stream(&mut s, held, &mut reader);
    assert!(
        !seen_by_b
            .iter()
            .any(|m| m.to_string().contains("secret-of-a")),
        "{seen_by_b:?}"
    );
}

/// A `Last-Event-ID` GET that names a finished stream gets its replay on a response of its
/// own, and the number stays free: another session naming it first cannot make the owner's
/// own resumption fail (it got 400 while the other held the number).
#[test]
fn naming_another_sessions_finished_stream_does_not_take_it_from_its_owner() {
    let mut s = server();
    let a = open_session(&mut s);
    let b = open_session(&mut s);
    let (stream, key, id, mut reader) = call_and_prime(&mut s, &a);
    let primed = reader.last_event_id().unwrap().to_owned();
    answer_call(&mut s, key, &id);
    s.pump();
    // A's client loses the connection before it reads the answer; the host lets go of it.
    s.stream_closed(T0, stream);
    // B names A's stream first, and holds its response without reading it.
    let theirs = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &b), ("Last-Event-ID", &primed)],
    );
    // A resumes and gets its answer.
    let r = send(
        &mut s,
        "GET",
        &[
            ("Mcp-Session-Id", &a),
            ("Last-Event-ID", &primed),
            ("Accept", "text/event-stream"),
        ],
        "",
    );
    let Body::Stream(resumed) = r.body else {
        panic!("{r:?}")
    };
    let (msgs, finished) = read_stream(&mut s, resumed, &mut reader);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 9);
    assert!(finished);
    let (seen_by_b, _) = read_stream(&mut s, theirs, &mut StreamReader::new());
    assert!(seen_by_b.is_empty(), "{seen_by_b:?}");
}

/// A malformed response POSTed to a session is refused with 400 and an error without an id:
/// its id is one of the server's own requests, and "the HTTP response body MAY comprise a
/// JSON-RPC error response that has no id". A malformed request keeps its id in the error.
#[test]
fn a_malformed_response_is_refused_without_its_id() {
    let mut s = server();
    let sid = open_session(&mut s);
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":3,"result":{},"result":{}}"#,
    );
    assert_eq!(r.status, 400);
    let body = json_body(&r);
    assert_eq!(body["error"]["code"], -32600);
    assert!(body["id"].is_null(), "{body}");
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        r#"{"jsonrpc":"2.0","id":3,"method":"ping","method":"ping"}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(json_body(&r)["id"], 3);
    // One that names a request of the server's ends it, as over stdio.
    let key = s.connections()[0];
    let ping = s
        .connection(key)
        .unwrap()
        .request(T0, "ping", None)
        .unwrap();
    s.pump();
    let r = send(
        &mut s,
        "POST",
        &[("Mcp-Session-Id", &sid)],
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}},"result":{{}}}}"#,
            ping.0
        ),
    );
    assert_eq!(r.status, 400);
    assert!(json_body(&r)["id"].is_null());
    let evs = events(&mut s);
    assert!(
        evs.iter()
            .any(|(_, e)| matches!(e, Ev::InvalidResponse { request } if *request == ping)),
        "{evs:?}"
    );
}

/// Once the server shuts down (`end_listen_streams`), streams that would only wait for server
/// messages end as they open: a new GET gets its priming event and ends, a GET resuming the
/// session's GET stream gets its replay and ends, and a new `subscriptions/listen` gets its
/// result at once. A host waiting for its streams is never held by one opened late. A request
/// stream still waits for its answer.
#[test]
fn after_end_listen_streams_listen_streams_end_as_they_open() {
    let mut s = server();
    let sid = open_session(&mut s);
    // The session's GET stream, which the client leaves (its connection broke).
    let get = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Accept", "text/event-stream")],
    );
    let mut reader = StreamReader::new();
    assert!(!read_stream(&mut s, get, &mut reader).1);
    let last = reader
        .last_event_id()
        .expect("the priming event's id")
        .to_owned();
    s.stream_closed(T0, get);
    s.end_listen_streams();
    // Resumed: the replay, then the end.
    let resumed = get_stream(
        &mut s,
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
    );
    assert!(
        read_stream(&mut s, resumed, &mut StreamReader::new()).1,
        "a GET stream resumed during the shutdown ends"
    );
    // A new GET: priming, then the end.
    let (_, _, finished) = listen(&mut s, &sid);
    assert!(finished, "a GET opened during the shutdown ends");
    // A call still gets its stream, which waits for the answer.
    let (call, _, _) = post_request(
        &mut s,
        &sid,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}"#,
    );
    let (_, finished) = read_stream(&mut s, call, &mut StreamReader::new());
    assert!(!finished, "the call's stream waits for its answer");
    // A 2026-07-28 listen: its result at once.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    );
    let r = send(
        &mut s,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ],
        &body,
    );
    let r = s.settle(r);
    let msgs = match r.body {
        Body::Stream(stream) => {
            let (msgs, finished) = read_stream(&mut s, stream, &mut StreamReader::new());
            assert!(finished, "a listen opened during the shutdown ends");
            msgs
        }
        _ => vec![json_body(&r)],
    };
    assert_eq!(msgs.last().unwrap()["id"], "L", "{msgs:?}");
    assert!(msgs.last().unwrap().get("result").is_some(), "{msgs:?}");
}

/// A session's idle time starts when its client's last stream has been written out to the
/// end, even though `poll_stream` and `consume_stream` take no time: it started at the last
/// request instead, so a tool call that ran longer than the idle timeout lost its session
/// the moment its answer was written (the next request got 404), and a stream closed for
/// polling lost it before the client's `Last-Event-ID` GET (found by an audit, on the tokio
/// host too).
#[test]
fn a_session_idles_from_when_its_last_stream_was_written_out() {
    for polling in [false, true] {
        let mut config = HttpServerConfig::new(server_config());
        config.keepalive = None; // no other time given than the test's
        config.session_idle_timeout = std::time::Duration::from_secs(60);
        let mut s = HttpServer::new(config);
        let sid = open_session(&mut s);
        let (stream, key, id, _) = call_and_prime(&mut s, &sid);
        let s_ = |ms: u64| Timestamp::from_millis(ms);
        for t in [30_000, 59_000, 90_000] {
            s.handle_timeout(s_(t));
            assert_eq!(s.sessions(), 1, "held at {t} ms");
        }
        // At 120 s: the answer (or the close for polling), written out to the end.
        if polling {
            assert!(s.close_stream_for_polling(key, id.as_id()));
        } else {
            answer_call(&mut s, key, &id);
            s.pump();
        }
        let (_, finished) = drain_raw(&mut s, stream);
        assert!(finished);
        // The session's deadline waits for the host's time; it is at most now.
        let due = s.poll_timeout().expect("a deadline to learn the time");
        assert!(due <= s_(120_000), "{due:?}");
        s.handle_timeout(s_(120_001));
        assert_eq!(s.sessions(), 1, "polling: {polling}");
        assert_eq!(s.poll_timeout(), Some(s_(180_001)));
        let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
        let r = send_at(
            &mut s,
            s_(121_000),
            "POST",
            &[("Mcp-Session-Id", &sid)],
            ping,
        );
        assert_eq!(r.status, 200, "polling: {polling}");
    }
}

/// `classify` reads the media type exactly (before any `;`, ignoring case) and only a 200's
/// body: `application/jsonx` is no JSON, and a 201 carries nothing to read.
#[test]
fn classify_reads_the_exact_media_type_of_a_200() {
    assert_eq!(
        classify(200, Some("Application/JSON; charset=utf-8"), false, false),
        ResponseKind::Json
    );
    assert_eq!(
        classify(200, Some("text/event-stream"), true, true),
        ResponseKind::EventStream
    );
    assert_eq!(
        classify(200, Some("application/jsonx"), false, false),
        ResponseKind::Failed(200)
    );
    assert_eq!(
        classify(201, Some("application/json"), false, false),
        ResponseKind::Failed(201)
    );
    assert_eq!(classify(202, None, true, false), ResponseKind::Accepted);
}

/// A session's GET stream resumed through a replica that never held it (the load balancer
/// sent the client elsewhere, or the replica that held it restarted) becomes that replica's
/// GET stream: what was stored, then its own messages, and it stays open. It was taken for a
/// request's stream held elsewhere: replayed, then ended with a `retry`, so the client came
/// back with the same id for ever and never heard that replica's messages (they waited for a
/// GET stream until its bound dropped them).
#[test]
fn a_get_stream_resumed_on_another_replica_becomes_its_get_stream() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    let headers = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Accept", "text/event-stream"),
    ];
    let changed = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
    let get = get_stream(&mut a, &headers);
    let key = a.connections()[0];
    a.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    a.pump();
    let mut reader = StreamReader::new();
    let (msgs, finished) = read_stream(&mut a, get, &mut reader);
    assert_eq!((msgs, finished), (vec![changed.clone()], false));
    let last = reader.last_event_id().unwrap().to_owned();
    assert!(last.starts_with('g'), "a GET stream's ids say so: {last}");
    a.stream_closed(T0, get);

    let mut resume = headers.to_vec();
    resume.push(("Last-Event-ID", &last));
    let resumed = get_stream(&mut b, &resume);
    let key = b.connections()[0];
    b.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    b.pump();
    let (msgs, finished) = read_stream(&mut b, resumed, &mut reader);
    assert_eq!(msgs, vec![changed], "B's own message, on B's GET stream");
    assert!(!finished, "B's GET stream stays open");
    let now = reader.last_event_id().unwrap().to_owned();
    assert!(now.starts_with('g') && now != last, "{now}");
    // Resumed on B (its own stream), or opened plainly, it goes on as B's GET stream.
    b.stream_closed(T0, resumed);
    let mut resume = headers.to_vec();
    resume.push(("Last-Event-ID", &now));
    let again = get_stream(&mut b, &resume);
    let (msgs, finished) = read_stream(&mut b, again, &mut reader);
    assert!(msgs.is_empty() && !finished, "{msgs:?}");
}

/// `Last-Event-ID` naming stream 0, which no server hands out, is unknown (400) on every
/// replica. With shared stores it was taken for a stream another replica holds: a `retry`,
/// every time, for a stream nobody would ever continue (and each visit kept the session
/// alive).
#[test]
fn a_last_event_id_of_stream_0_is_unknown_on_every_replica() {
    let stores = Replicated::default();
    let (mut a, mut b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    for s in [&mut a, &mut b] {
        for id in ["0-0", "0-7", "g0-0"] {
            let r = send(
                s,
                "GET",
                &[("Mcp-Session-Id", &sid), ("Last-Event-ID", id)],
                "",
            );
            assert_eq!(r.status, 400, "{id}: {r:?}");
        }
    }
}

#[test]
fn an_empty_last_event_id_opens_the_get_stream_as_if_it_were_absent() {
    // An empty last event ID is the SSE standard's "none"; it got 400 "unknown Last-Event-ID".
    let mut s = server();
    let sid = open_session(&mut s);
    let r = send(
        &mut s,
        "GET",
        &[("Mcp-Session-Id", &sid), ("Last-Event-ID", "")],
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(matches!(r.body, Body::Stream(_)), "{r:?}");
    assert_eq!(header(&r, "Content-Type"), Some("text/event-stream"));
}

/// Two replicas sharing stores; a session on the first, whose GET stream (never drained)
/// got a `tools/list_changed`: the stores, both replicas, the session and that stream.
fn a_notification_on_replica_1s_get_stream()
-> (Replicated, HttpServer, HttpServer, String, HttpStreamId) {
    let stores = Replicated::default();
    let (mut a, b) = (replica(&stores, 1), replica(&stores, 2));
    let sid = open_session(&mut a);
    let get = get_stream(
        &mut a,
        &[("Mcp-Session-Id", &sid), ("Accept", "text/event-stream")],
    );
    let key = a.connections()[0];
    a.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    a.pump();
    (stores, a, b, sid, get)
}

#[test]
fn a_get_streams_messages_are_stored_before_its_host_first_drains_it() {
    // A GET stream never becomes a JSON body: its messages go to the store as they come.
    // They waited (held three times over) until the host's first poll, so a client that came
    // back on another replica before then found nothing to replay.
    let (_stores, _a, mut b, sid, get) = a_notification_on_replica_1s_get_stream();
    let resumed = resumed_stream(&mut b, &sid, &format!("g{}-0", get.0));
    let (msgs, _) = read_stream(&mut b, resumed, &mut StreamReader::new());
    assert_eq!(
        msgs,
        vec![json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})]
    );
}

/// A client repeating its resumption of a GET stream another process held holds one replay:
/// each earlier response ends at once, named by `poll_woken`. They were only marked done, and
/// each kept its replay until its host wrote it out (found by a review of the SSE streams).
#[test]
fn resuming_another_replicas_get_stream_again_ends_the_earlier_replay() {
    let (_stores, _a, mut b, sid, get) = a_notification_on_replica_1s_get_stream();
    let last = format!("g{}-0", get.0);
    let replays: Vec<HttpStreamId> = (0..3)
        .map(|_| resumed_stream(&mut b, &sid, &last))
        .collect();
    let named = woken(&mut b);
    for earlier in &replays[..2] {
        assert!(
            b.poll_stream(*earlier).is_none(),
            "{earlier:?} still replays"
        );
        assert!(named.contains(earlier), "{earlier:?} not named: {named:?}");
    }
    let (msgs, finished) = read_stream(&mut b, replays[2], &mut StreamReader::new());
    assert_eq!(
        msgs,
        vec![json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})]
    );
    assert!(!finished, "the session's GET stream stays open");
}

/// The default event store, whose `append` panics while `bad` is set: host code with a bug,
/// for the paths on which the server calls the store after it made or changed a stream.
#[derive(Clone)]
struct FlakyStore(
    std::sync::Arc<std::sync::Mutex<mcpwire::http::MemoryEventStore>>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
);

impl FlakyStore {
    fn server() -> (HttpServer, std::sync::Arc<std::sync::atomic::AtomicBool>) {
        let store = FlakyStore(
            std::sync::Arc::new(std::sync::Mutex::new(mcpwire::http::MemoryEventStore::new(
                64,
            ))),
            std::sync::Arc::default(),
        );
        let bad = store.1.clone();
        let mut config = HttpServerConfig::new(server_config());
        config.events = Some(Box::new(store));
        config.keepalive = None;
        (HttpServer::new(config), bad)
    }
}

impl mcpwire::http::EventStore for FlakyStore {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        let bad = self.1.load(std::sync::atomic::Ordering::SeqCst);
        assert!(!bad, "the store's bug");
        self.0.lock().unwrap().append(session, stream, event, bytes);
    }
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        self.0.lock().unwrap().replay(session, stream, after, out)
    }
    fn forget(&mut self, session: &str) {
        self.0.lock().unwrap().forget(session);
    }
}

/// Sets `bad`, runs `f` (which must panic in the store's code), clears `bad`.
fn panics_in_the_store(bad: &std::sync::atomic::AtomicBool, f: impl FnOnce()) {
    bad.store(true, std::sync::atomic::Ordering::SeqCst);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    bad.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(ran.is_err(), "the store panicked");
}

/// Twice the idle timeout later: every session that nothing holds has expired.
fn long_after(s: &mut HttpServer) {
    let hour = std::time::Duration::from_secs(3600);
    s.handle_timeout(T0.after(hour));
    s.handle_timeout(T0.after(hour).after(hour));
}

/// A session whose call (id 9) was read and then dropped by its client, and then answered
/// by the application without a pump: the next pump, in whatever request, stores it.
fn an_answer_waiting_to_be_stored(s: &mut HttpServer) -> String {
    let sid = open_session(s);
    let (stream, key, id, _) = call_and_prime(s, &sid);
    s.stream_closed(T0, stream);
    answer_call(s, key, &id);
    sid
}

/// A request during which the store panics (on an earlier answer, routed by the request's
/// pump) made a stream, or a connection, that its response never handed to the
/// host: nobody would close it, and it held its session open for good (the session never
/// expired), or sat outside every session (an `initialize`'s connection). The next request
/// or timer closes them. (Found by a review of the server.)
#[test]
fn what_a_request_made_before_its_store_panicked_is_closed_after() {
    // A call on an open session, and an `initialize`.
    for initialize in [false, true] {
        let (mut s, bad) = FlakyStore::server();
        let sid = an_answer_waiting_to_be_stored(&mut s);
        panics_in_the_store(&bad, || {
            if initialize {
                send(&mut s, "POST", &[], INIT);
            } else {
                let call =
                    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"y"}}"#;
                send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], call);
            }
        });
        while s.poll_event().is_some() {}
        long_after(&mut s);
        assert_eq!(s.sessions(), 0, "initialize {initialize}");
        assert_eq!(s.open_streams(), 0, "initialize {initialize}");
        assert!(s.connections().is_empty(), "initialize {initialize}");
        assert_eq!(s.poll_timeout(), None);
    }
}

/// The same for a `Last-Event-ID` GET that resumed the session's GET stream, whose waiting
/// messages the store panicked on: the resumed stream, given a new response nobody got,
/// held the session open for good.
#[test]
fn a_resumption_whose_store_panicked_holds_no_session_open() {
    let (mut s, bad) = FlakyStore::server();
    let sid = open_session(&mut s);
    let get = get_stream(&mut s, &[("Mcp-Session-Id", &sid)]);
    let mut reader = StreamReader::new();
    read_stream(&mut s, get, &mut reader);
    s.stream_closed(T0, get);
    let key = s.connections()[0];
    s.connection(key)
        .unwrap()
        .notify("notifications/tools/list_changed", None)
        .unwrap();
    s.pump();
    let last = format!("g{}-1", get.0);
    panics_in_the_store(&bad, || {
        send(
            &mut s,
            "GET",
            &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
            "",
        );
    });
    long_after(&mut s);
    assert_eq!((s.sessions(), s.open_streams()), (0, 0));
}

/// A stream its client left before the host first polled it, whose waiting events the store
/// panics on as it is closed: the stream is closed all the same (it stayed, attached, and
/// its session never expired).
#[test]
fn a_stream_closed_while_its_store_panics_is_closed() {
    let (mut s, bad) = FlakyStore::server();
    let sid = open_session(&mut s);
    let (stream, key, id) = post_call(&mut s, &sid);
    answer_call(&mut s, key, &id);
    s.pump();
    panics_in_the_store(&bad, || s.stream_closed(T0, stream));
    assert!(!s.holds_stream(stream));
    long_after(&mut s);
    assert_eq!((s.sessions(), s.open_streams()), (0, 0));
}

/// Once the store panicked on a session's output, that session's events go out live without
/// the store on every path: a later call's stream, given a log message before the host first
/// polled it, called the store as it was polled, panicked there again, and its client never
/// got the answer.
#[test]
fn a_session_whose_store_panicked_goes_on_without_it() {
    let (mut s, bad) = FlakyStore::server();
    let sid = open_session(&mut s);
    let (first, key, id, mut reader) = call_and_prime(&mut s, &sid);
    answer_call(&mut s, key, &id);
    panics_in_the_store(&bad, || s.pump());
    bad.store(true, std::sync::atomic::Ordering::SeqCst);
    let (msgs, finished) = read_stream(&mut s, first, &mut reader);
    assert!(msgs.len() == 1 && finished, "{msgs:?}");
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"y"}}"#;
    let r = send(&mut s, "POST", &[("Mcp-Session-Id", &sid)], call);
    let evs = events(&mut s);
    let (_, Ev::Request { id, .. }) = &evs[0] else {
        panic!("{evs:?}")
    };
    let c = s.connection(key).unwrap();
    c.log(
        id.as_id(),
        mcpwire::mcp::LogLevel::Info,
        None,
        RawJson::new("\"working\"").unwrap(),
    )
    .unwrap();
    c.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
        .unwrap();
    let Body::Stream(second) = s.settle(r).body else {
        panic!("two messages: a stream")
    };
    let (msgs, finished) = read_stream(&mut s, second, &mut StreamReader::new());
    bad.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(msgs.len() == 2 && finished, "{msgs:?}");
    assert_eq!(msgs[1]["id"], 3);
}

/// A shared session store whose `create` panics: the session it was opening is one of the
/// server's sessions (counted against the cap, evicted, expiring), not a connection outside
/// them, one more for every such `initialize`.
#[test]
fn a_session_whose_shared_create_panicked_counts_against_the_cap() {
    struct CreatePanics;
    impl mcpwire::http::SessionStore for CreatePanics {
        fn create(&mut self, _: &str, _: &str) -> Result<(), mcpwire::http::StoreUnavailable> {
            panic!("the store's bug")
        }
        fn load(&mut self, _: &str) -> Result<Option<String>, mcpwire::http::StoreUnavailable> {
            Ok(None)
        }
        fn touch(&mut self, _: &str) -> Result<bool, mcpwire::http::StoreUnavailable> {
            Ok(true)
        }
        fn forget(&mut self, _: &str) -> Result<(), mcpwire::http::StoreUnavailable> {
            Ok(())
        }
    }
    let mut config = HttpServerConfig::new(server_config());
    config.sessions = Some(Box::new(CreatePanics));
    config.keepalive = None;
    config.max_sessions = 2;
    let mut s = HttpServer::new(config);
    for _ in 0..10 {
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            send(&mut s, "POST", &[], INIT)
        }));
        assert!(opened.is_err(), "the store panicked");
    }
    while s.poll_event().is_some() {}
    assert_eq!(s.sessions(), 2, "at the cap, the older ones evicted");
    assert_eq!(s.connections().len(), 2, "{:?}", s.connections());
    long_after(&mut s);
    assert_eq!(
        (s.sessions(), s.connections().len()),
        (0, 0),
        "and they expire"
    );
}

/// A store that panics as a stream's first poll stores what waited on it: that session goes
/// on without the store from then on, as after a panic in the pump. (The answer routed next
/// called the store again, and panicked again.)
#[test]
fn a_store_panicking_on_a_first_poll_is_left_out_after() {
    let (mut s, bad) = FlakyStore::server();
    let sid = open_session(&mut s);
    let (stream, key, id) = post_call(&mut s, &sid);
    s.connection(key)
        .unwrap()
        .log(
            id.as_id(),
            mcpwire::mcp::LogLevel::Info,
            None,
            RawJson::new("\"working\"").unwrap(),
        )
        .unwrap();
    s.pump();
    panics_in_the_store(&bad, || {
        s.poll_stream(stream);
    });
    bad.store(true, std::sync::atomic::Ordering::SeqCst);
    answer_call(&mut s, key, &id);
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_stream(&mut s, stream, &mut StreamReader::new())
    }));
    bad.store(false, std::sync::atomic::Ordering::SeqCst);
    let (msgs, finished) = read.expect("the store is left out");
    assert!(finished, "{msgs:?}");
    assert_eq!(msgs.last().unwrap()["id"], 9, "{msgs:?}");
}

/// An invalid server configuration is reported when the server is made: it was accepted,
/// and every request then got 500 without a word.
#[test]
fn an_invalid_server_configuration_is_refused_when_the_server_is_made() {
    let mut config = server_config();
    config.info = r#"{"name":"s"}"#.into();
    assert!(HttpServer::try_new(HttpServerConfig::new(config.clone())).is_err());
    let made = std::panic::catch_unwind(|| HttpServer::new(HttpServerConfig::new(config)));
    assert!(made.is_err(), "new panics");
    let client = Config::client("c", "1");
    assert!(HttpServer::try_new(HttpServerConfig::new(client)).is_err());
    assert!(HttpServer::try_new(HttpServerConfig::new(server_config())).is_ok());
}
