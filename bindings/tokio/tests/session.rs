//! MCP over the host: a whole session (JSON and SSE answers, the fixture's timers), a client
//! leaving an SSE stream, graceful shutdown with streams open, and a session's idle time
//! counted from the end of a long call.

// The shutdown tests time how long draining takes, on the real clock.
#![allow(clippy::disallowed_methods)]

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{
    Client, HostConfig, Server, open_session, read_to_close, start, start_with, statuses,
    test_config,
};
use tokio::io::AsyncWriteExt;

const PROGRESS_CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p1"}}}"#;

/// Opens the session's GET stream on a new connection and reads its priming event.
async fn open_get_stream(server: &Server, session: &str) -> Client {
    let mut c = Client::new(server).await;
    c.send(
        "GET",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        b"",
    )
    .await;
    let (status, headers) = c.head().await.expect("a head");
    assert_eq!(status, 200);
    assert!(
        headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v == "text/event-stream")
    );
    let priming = c.chunk().await.expect("the priming event");
    assert!(String::from_utf8_lossy(&priming).contains("retry:"));
    c
}

/// Sends the progress tool's call (its answer is ~100 ms away) on a new connection of session
/// `session`, and reads the head of its SSE response.
async fn start_progress_call(server: &Server, session: &str) -> Client {
    let mut call = Client::new(server).await;
    call.send(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Session-Id", session),
        ],
        PROGRESS_CALL.as_bytes(),
    )
    .await;
    let (status, _) = call.head().await.expect("the call's head");
    assert_eq!(status, 200);
    call
}

/// Reads an SSE body to its normal end (the last chunk), failing with `cut` if the
/// connection closes before it.
async fn read_until_ended(c: &mut Client, cut: &str) -> Vec<u8> {
    let mut text = Vec::new();
    loop {
        match c.chunk().await {
            Some(chunk) if chunk.is_empty() => return text,
            Some(chunk) => text.extend_from_slice(&chunk),
            None => panic!("{cut}"),
        }
    }
}

/// Waits until the engine holds `n` SSE streams.
async fn wait_streams(server: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while server.open_streams.load(Ordering::SeqCst) != n {
        assert!(
            Instant::now() < deadline,
            "the engine still holds {} streams, not {n}",
            server.open_streams.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_session_over_one_connection() {
    let server = start(test_config()).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;

    let r = c
        .post(
            Some(&session),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(
        r.text().contains("\"test_tool_with_progress\""),
        "{}",
        r.text()
    );

    // Answered by the fixture's timers (50 ms steps): an SSE stream on the same connection.
    let r = c.post(Some(&session), PROGRESS_CALL).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.chunked_end, "the stream did not end normally");
    let text = r.text();
    for p in ["\"progress\":0", "\"progress\":50", "\"progress\":100"] {
        assert!(text.contains(p), "{p} missing: {text}");
    }
    assert!(text.contains("Progress test completed"), "{text}");
    let result = text.find("\"id\":3").expect("the result");
    assert!(text.find("\"progress\":100").expect("progress") < result);

    // The connection is still good: end the session.
    c.send(
        "DELETE",
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        b"",
    )
    .await;
    assert_eq!(c.response().await.expect("answer").status, 200);
    let r = c
        .post(
            Some(&session),
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
        )
        .await;
    assert_eq!(r.status, 404);
    wait_streams(&server, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_an_sse_stream_is_reported_to_the_engine() {
    let server = start(test_config()).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;
    let get = open_get_stream(&server, &session).await;
    wait_streams(&server, 1).await;
    drop(get);
    // hyper notices the EOF while the body idles and drops it: stream_closed.
    wait_streams(&server, 0).await;
    // The session lives on: a new GET stream opens.
    let _again = open_get_stream(&server, &session).await;
    wait_streams(&server, 1).await;
}

/// A request that has begun to arrive on a kept-alive connection when the shutdown comes
/// (part of its head read, or the rest still on its way) is answered: the connection was
/// idle to hyper, which closed it at once, and the client's request failed with the
/// connection reset. One with nothing arriving is closed at once, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_arriving_on_an_idle_connection_at_shutdown_is_answered() {
    let config = HostConfig {
        shutdown_grace: Duration::from_secs(5),
        ..test_config()
    };
    let mut server = start(config).await;
    let mut c = Client::new(&server).await;
    let mut quiet = Client::new(&server).await;
    for client in [&mut c, &mut quiet] {
        client
            .stream
            .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        assert_eq!(client.response().await.expect("answer").status, 404);
    }
    // The next request's head, in part: the host reads it, hyper waits for the rest.
    c.stream
        .write_all(b"GET /other HTTP/1.1\r\nHo")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let began = Instant::now();
    let serve = server.shutdown();
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.stream
        .write_all(b"st: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let (raw, closed) = read_to_close(&mut c.stream, Duration::from_secs(5)).await;
    assert!(closed, "the connection stays open after its answer");
    assert_eq!(statuses(&raw), [404], "{}", String::from_utf8_lossy(&raw));
    // The quiet one was closed at once.
    let (raw, closed) = read_to_close(&mut quiet.stream, Duration::from_secs(1)).await;
    assert!(
        closed && raw.is_empty(),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    tokio::time::timeout(Duration::from_secs(10), serve)
        .await
        .expect("serve returned")
        .expect("task")
        .expect("serve");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_ends_get_streams_and_lets_answers_finish() {
    // A grace far longer than the call: serve returns when the work is done, not at its end.
    let config = HostConfig {
        shutdown_grace: Duration::from_secs(10),
        ..test_config()
    };
    let mut server = start(config.clone()).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;
    let mut get = open_get_stream(&server, &session).await;
    // A tool call in flight.
    let mut call = start_progress_call(&server, &session).await;

    let began = Instant::now();
    let serve = server.shutdown();
    // The GET stream ends normally (the last chunk), then the connection closes.
    assert_eq!(get.chunk().await, Some(Vec::new()), "GET stream not ended");
    // The call's stream carries on to its answer and ends normally.
    let text = read_until_ended(&mut call, "the call's stream was cut").await;
    assert!(String::from_utf8_lossy(&text).contains("Progress test completed"));
    // Everything done: serve returns well within the grace period.
    tokio::time::timeout(Duration::from_secs(2), serve)
        .await
        .expect("serve returned")
        .expect("task")
        .expect("serve");
    assert!(began.elapsed() < config.shutdown_grace);
    // Nothing is accepted any more.
    match tokio::net::TcpStream::connect(server.addr).await {
        Err(_) => {}
        Ok(mut s) => {
            let (out, closed) = common::read_to_close(&mut s, Duration::from_secs(1)).await;
            assert!(closed && out.is_empty());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_end_of_the_grace_period_open_streams_end_normally() {
    let config = HostConfig {
        shutdown_grace: Duration::from_millis(500),
        ..test_config()
    };
    let mut server = start(config).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, r#"{"sampling":{}}"#).await;
    // A call waiting for our answer to its sampling request, which never comes.
    c.send(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Session-Id", &session),
        ],
        br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"hi"}}}"#,
    )
    .await;
    let (status, _) = c.head().await.expect("head");
    assert_eq!(status, 200);
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("sampling/createMessage") {
        let chunk = c.chunk().await.expect("the sampling request");
        assert!(!chunk.is_empty());
        seen.extend_from_slice(&chunk);
    }

    let began = Instant::now();
    let serve = server.shutdown();
    // Within the grace period the stream stays open; at its end, an error answer to the call
    // (its client learns at once that no answer will come), then the last chunk.
    let mut after = Vec::new();
    loop {
        match c.chunk().await {
            Some(chunk) if chunk.is_empty() => break,
            Some(chunk) => after.extend_from_slice(&chunk),
            None => panic!("the stream was cut, not ended"),
        }
    }
    let after = String::from_utf8_lossy(&after);
    assert!(
        after.contains(r#""id":5,"error":{"code":-32603"#),
        "no error answer at the end: {after}"
    );
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(2),
        "{took:?}"
    );
    tokio::time::timeout(Duration::from_secs(3), serve)
        .await
        .expect("serve returned")
        .expect("task")
        .expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumption_while_the_first_response_is_still_held_ends_that_response() {
    // The client saw its connection break before the server did: its `Last-Event-ID` GET
    // arrives while the host still holds the first response. The answer must reach the GET,
    // and the first response end, not the other way round.
    let server = start(test_config()).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;
    let mut call = start_progress_call(&server, &session).await;
    let priming = String::from_utf8(call.chunk().await.expect("the priming event")).unwrap();
    let last = priming
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .expect("an event id")
        .trim()
        .to_owned();
    let mut resumed = Client::new(&server).await;
    resumed
        .send(
            "GET",
            &[
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Last-Event-ID", &last),
            ],
            b"",
        )
        .await;
    let (status, _) = resumed.head().await.expect("the resumption's head");
    assert_eq!(status, 200);
    // The first response ends at once, without the answer.
    let mut stale = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            match call.chunk().await {
                Some(c) if c.is_empty() => return true,
                Some(c) => stale.extend_from_slice(&c),
                None => return false,
            }
        }
    })
    .await
    .expect("the first response still open");
    assert!(ended, "the first response was cut instead of ended");
    assert!(
        !String::from_utf8_lossy(&stale).contains("Progress test completed"),
        "the answer went to the first response: {}",
        String::from_utf8_lossy(&stale)
    );
    // The resumed stream carries the answer, then ends.
    let text = read_until_ended(&mut resumed, "the resumed stream was cut").await;
    assert!(String::from_utf8_lossy(&text).contains("Progress test completed"));
    // Nothing is left behind (a request makes the fixture read the count again).
    let r = c
        .post(
            Some(&session),
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    wait_streams(&server, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_ends_listen_streams_with_their_result() {
    // 2026-07-28: a `subscriptions/listen` stream is the stateless era's GET stream. A
    // shutdown ends it at once, with the listen request's result, instead of cutting it at
    // the end of the grace period.
    let mut server = start(test_config()).await;
    let mut c = Client::new(&server).await;
    c.send(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ],
        br#"{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    )
    .await;
    let (status, _) = c.head().await.expect("the listen head");
    assert_eq!(status, 200);
    let mut text = c.chunk().await.expect("the acknowledgement");
    assert!(String::from_utf8_lossy(&text).contains("acknowledged"));
    wait_streams(&server, 1).await;

    let began = Instant::now();
    let serve = server.shutdown();
    loop {
        match c.chunk().await {
            Some(chunk) if chunk.is_empty() => break,
            Some(chunk) => text.extend_from_slice(&chunk),
            None => panic!("the listen stream was cut"),
        }
    }
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains(r#""id":"L""#) && text.contains("result"),
        "{text}"
    );
    assert!(began.elapsed() < test_config().shutdown_grace / 2);
    tokio::time::timeout(Duration::from_secs(3), serve)
        .await
        .expect("serve returned")
        .expect("task")
        .expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_get_stream_gets_keepalive_comments() {
    // The engine's keep-alive comment reaches the client through the host: the stream is
    // woken at the engine's deadline and the comment written.
    let mut http = common::fixture::http_config();
    http.keepalive = Some(Duration::from_millis(50));
    let server = start_with(test_config(), http).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;
    let mut get = open_get_stream(&server, &session).await;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&seen).contains(":\n\n:\n\n") {
        assert!(Instant::now() < deadline, "no comments: {seen:?}");
        let chunk = tokio::time::timeout(Duration::from_secs(5), get.chunk())
            .await
            .expect("a chunk in time")
            .expect("the stream is open");
        seen.extend_from_slice(&chunk);
    }
}

/// A GET that resumed a call's stream (`Last-Event-ID`) carries an answer, not only server
/// messages: a shutdown lets it finish like the call's own stream. (It was ended with the
/// session's GET streams, and the answer was lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_a_resumed_call_stream_finish() {
    let mut server = start(test_config()).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;
    let mut call = start_progress_call(&server, &session).await;
    // The priming event names the stream; then the client leaves.
    let first = String::from_utf8(call.chunk().await.expect("the priming event")).unwrap();
    let last_id = first
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .expect("an event id")
        .trim()
        .to_owned();
    drop(call);
    let mut resumed = Client::new(&server).await;
    resumed
        .send(
            "GET",
            &[
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Last-Event-ID", &last_id),
            ],
            b"",
        )
        .await;
    let (status, _) = resumed.head().await.expect("a head");
    assert_eq!(status, 200);
    let serve = server.shutdown();
    let text = read_until_ended(&mut resumed, "the resumed stream was cut").await;
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("Progress test completed"), "{text}");
    tokio::time::timeout(Duration::from_secs(2), serve)
        .await
        .expect("serve returned")
        .expect("task")
        .expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_idles_from_the_end_of_a_call_longer_than_its_idle_timeout() {
    // The engine counted a session's idle time from its last request: a call that ran longer
    // than the idle timeout lost its session as its answer went out, at the host's next timer
    // (here the keep-alive's). The host must give the engine a time once the stream ends, and
    // re-arm its timer, for the count to start there.
    let mut http = common::fixture::http_config();
    http.session_idle_timeout = Duration::from_millis(2500);
    http.keepalive = Some(Duration::from_millis(200));
    let server = start_with(test_config(), http).await;
    let mut c = Client::new(&server).await;
    let session = open_session(&mut c, "{}").await;

    let r = c
        .post(
            Some(&session),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":3}}}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("Computed"), "{}", r.text());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    let r = c.post(Some(&session), ping).await;
    assert_eq!(
        r.status,
        200,
        "the session expired after the answer: {}",
        r.text()
    );

    // Idle for longer than the timeout now: it expires. (The host closed the idle connection
    // meanwhile: `header_read_timeout` is 2 s.)
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let mut c = Client::new(&server).await;
    let r = c.post(Some(&session), ping).await;
    assert_eq!(r.status, 404, "{}", r.text());
}
