//! The tokio HTTP client against a server scripted byte by byte (a plain TCP listener), for
//! what a well-behaved server never does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpwire::conn::ClientEra;
use mcpwire::http::ReconnectPolicy;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::client::{Client, IDLE_CONNECTION_TIMEOUT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads one request's head and body (by its Content-Length): the method and the body.
async fn read_request(s: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_end, length) = loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..p]).to_lowercase();
            let length = (head.lines())
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            break (p + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let method = String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == b' ')?]);
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]);
    Some((method.into_owned(), body.into_owned()))
}

/// A server scripted per request, on its own task: `initialize` gets a session (`s1`),
/// notifications get 202, GETs get 405, and the request `endless` picks gets a response head
/// followed by a chunked body that never ends. Its URL, and how many of those endless answers
/// have ended because the client closed their connection.
async fn scripted_server(
    endless: fn(&str, &str) -> Option<&'static [u8]>,
) -> (String, Arc<AtomicUsize>) {
    scripted_server_ending(endless, false).await
}

/// [`scripted_server`], where the picked answers end after all when `late` (their body's end
/// comes 200 ms after their head) and the connection goes on.
async fn scripted_server_ending(
    endless: fn(&str, &str) -> Option<&'static [u8]>,
    late: bool,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let closed = Arc::new(AtomicUsize::new(0));
    let closed_by_client = closed.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let closed = closed_by_client.clone();
            tokio::spawn(async move {
                // (hyper sends the next request on the same connection.)
                while let Some((method, body)) = read_request(&mut s).await {
                    let reply = if let Some(head) = endless(&method, &body) {
                        if late {
                            if s.write_all(head).await.is_err() {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            "0\r\n\r\n".to_owned()
                        } else {
                            if s.write_all(head).await.is_ok() {
                                while s.write_all(b"4\r\ngone\r\n").await.is_ok() {
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                            }
                            closed.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    } else {
                        plain_reply(&method, &body)
                    };
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, closed)
}

/// The scripted servers' answer to a request they do not pick: `initialize` gets a session
/// (`s1`), other POSTs get 202, other methods 405.
fn plain_reply(method: &str, body: &str) -> String {
    if method != "POST" {
        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_owned()
    } else if body.contains(r#""method":"initialize""#) {
        let id = request_id(body);
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
        );
        ok_reply("application/json", "Mcp-Session-Id: s1\r\n", &answer)
    } else {
        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
    }
}

/// A server answering every request with [`plain_reply`]: its URL, and how many of its
/// connections the client closed.
async fn counting_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let closed = Arc::new(AtomicUsize::new(0));
    let counter = closed.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let closed = counter.clone();
            tokio::spawn(async move {
                while let Some((method, body)) = read_request(&mut s).await {
                    let reply = plain_reply(&method, &body);
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
                closed.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (url, closed)
}

/// A handshake-era client that has reached `Ready` against `url`.
async fn ready_client(url: &str) -> Client {
    let mut config = Config::client("client-test", "1.0");
    config.client_era = ClientEra::Legacy;
    let mut client = Client::new(url, config, ReconnectPolicy::default()).unwrap();
    while !matches!(next(&mut client).await, OwnedEvent::Ready { .. }) {}
    client
}

/// Sends `tools/list` and waits for it to fail (the scripted server answers it 404).
async fn list_until_it_fails(client: &mut Client) {
    let now = client.now();
    let list = client
        .connection()
        .request(now, "tools/list", None)
        .unwrap();
    loop {
        match next(client).await {
            OwnedEvent::Failed { request, .. } if request == list => return,
            OwnedEvent::Response { request, .. } if request == list => panic!("an answer"),
            _ => {}
        }
    }
}

/// The client's next event, within 10 s.
async fn next(client: &mut Client) -> OwnedEvent {
    let event = tokio::time::timeout(Duration::from_secs(10), client.next_event());
    event
        .await
        .expect("an event in time")
        .expect("the client goes on")
}

/// A session whose server has forgotten it answers 404, as the spec says, but never ends
/// that answer's body. The request fails and a new session starts, and the 404's connection
/// is closed: the client kept reading it for as long as the server kept writing, one more
/// task and connection at each expiry (found by an audit of the clients).
#[tokio::test]
async fn the_404_that_expires_a_session_is_closed_even_when_its_body_never_ends() {
    let (url, closed) = scripted_server(|method, body| {
        // The session is gone, and this answer never ends.
        (method == "POST" && body.contains(r#""method":"tools/list""#)).then_some(
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\
            Transfer-Encoding: chunked\r\n\r\n",
        )
    })
    .await;
    let mut client = ready_client(&url).await;
    list_until_it_fails(&mut client).await;
    let expired = async {
        while closed.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    // (The client runs only while polled.)
    tokio::select! {
        _ = tokio::time::timeout(Duration::from_secs(5), expired) => {}
        _ = async { loop { next(&mut client).await; } } => {}
    }
    assert_eq!(
        closed.load(Ordering::SeqCst),
        1,
        "the 404's connection is still open"
    );
}

/// A session that expires (404) whose answer's body ends a little after its head: the new
/// session starts. The engine makes the new connection, and its `initialize`, when it hands
/// out the old session's last event; `next_event` then waited without sending it (the 404's
/// exchange, aborted, reported nothing more to wake it), and the client closed 60 s later
/// (`InitializeTimedOut`) instead of reaching `Ready` (found by a review of the client).
#[tokio::test]
async fn a_new_session_starts_after_a_404_whose_body_ends_late() {
    let (url, _) = scripted_server_ending(
        |method, body| {
            (method == "POST" && body.contains(r#""method":"tools/list""#)).then_some(
                b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
                Transfer-Encoding: chunked\r\n\r\n",
            )
        },
        true,
    )
    .await;
    let mut client = ready_client(&url).await;
    list_until_it_fails(&mut client).await;
    while !matches!(next(&mut client).await, OwnedEvent::Ready { .. }) {}
}

/// A client whose connection closed (without ending its session) closes its GET stream,
/// while the application keeps the client: it stayed open, on the server too, until the
/// client was dropped (found by a review of the client).
#[tokio::test]
async fn a_closed_client_closes_its_get_stream() {
    let (url, closed) = scripted_server(|method, _| {
        (method == "GET").then_some(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
            Transfer-Encoding: chunked\r\n\r\n",
        )
    })
    .await;
    let mut client = ready_client(&url).await;
    // (Driven a while, for the GET stream to open: nothing else comes.)
    let quiet = tokio::time::timeout(Duration::from_millis(500), client.next_event()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    let now = client.now();
    client.connection().close(now, Duration::ZERO);
    while tokio::time::timeout(Duration::from_secs(10), client.next_event())
        .await
        .expect("the close in time")
        .is_some()
    {}
    let gone = async {
        while closed.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(5), gone)
            .await
            .is_ok(),
        "the GET stream is still open"
    );
    drop(client);
}

/// A connection idle for [`IDLE_CONNECTION_TIMEOUT`] (4 s) is not used again, so no request
/// goes out on one that common servers (Node's and uvicorn's, after 5 s) are about to close:
/// a POST sent on a connection just as the server closes it fails, and is not sent again.
/// hyper's pool kept idle connections 90 s. (The pool also closes them unasked, but it looks
/// only every 4 s, so that takes up to 8 s: this test once waited 5 s for it, and failed.)
#[tokio::test]
async fn idle_connections_are_not_used_past_the_idle_timeout() {
    let (url, closed) = counting_server().await;
    let mut client = ready_client(&url).await;
    assert_eq!(closed.load(Ordering::SeqCst), 0);
    // (Driven meanwhile: nothing comes.)
    let wait = IDLE_CONNECTION_TIMEOUT + Duration::from_millis(500);
    let quiet = tokio::time::timeout(wait, client.next_event()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    // A request now takes a fresh connection: the idle one is closed, at the latest as the
    // request looks for one. (The server answers it 202, so it fails: what counts here is
    // that it went out.)
    let now = client.now();
    let list = client
        .connection()
        .request(now, "tools/list", None)
        .unwrap();
    while !matches!(next(&mut client).await, OwnedEvent::Failed { request, .. } if request == list)
    {
    }
    let gone = async {
        while closed.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(1), gone)
            .await
            .is_ok(),
        "a connection idle for {wait:?} was used again"
    );
}

/// A server whose `tools/call` answer is an SSE stream of log notifications written as fast
/// as the client reads them, and which never answers a DELETE (not even its head). Its URL.
async fn flooding_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                while let Some((method, body)) = read_request(&mut s).await {
                    let reply = if method == "DELETE" {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return;
                    } else if body.contains(r#""method":"tools/call""#) {
                        let event = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n";
                        let chunk = format!("{:x}\r\n{}\r\n", event.len() * 64, event.repeat(64));
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                                    Transfer-Encoding: chunked\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        while s.write_all(chunk.as_bytes()).await.is_ok() {}
                        return;
                    } else if method != "POST" {
                        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_owned()
                    } else if body.contains(r#""method":"initialize""#) {
                        let id = body.split(r#""id":"#).nth(1).unwrap();
                        let id: String = id.chars().take_while(char::is_ascii_digit).collect();
                        let answer = format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}},"logging":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
                        );
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\n\r\n{answer}",
                            answer.len()
                        )
                    } else {
                        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
                    };
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// `end_session(limit)` returns at its limit while another exchange's reports keep coming:
/// it looked at the limit only when its timer won a select biased to the reports, so under a
/// flood it returned when the engine let the unanswered DELETE go, 10 s later (found by a
/// review of the client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods)] // how long the call took: the real clock
async fn end_session_keeps_its_limit_while_a_stream_floods() {
    let url = flooding_server().await;
    let mut client = ready_client(&url).await;
    let now = client.now();
    let params = mcpwire::jsonrpc::RawJson::new(r#"{"name":"t","arguments":{}}"#).unwrap();
    client
        .connection()
        .request(now, "tools/call", Some(params))
        .unwrap();
    for _ in 0..10 {
        next(&mut client).await; // the flood has begun
    }
    let started = std::time::Instant::now();
    client.end_session(Duration::from_millis(500)).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// A DELETE that ends a session gets its response head, and then a body that never ends.
/// `end_session` with no limit of its own still returns, and closes that connection, once
/// the engine lets the exchange go ([`mcpwire::http::LINGER`] after its head): it waited on
/// the exchange's reports alone, without the engine's timers, so it waited for good.
#[tokio::test]
async fn end_session_lets_go_of_a_delete_whose_answer_never_ends() {
    let (url, closed) = scripted_server(|method, _| {
        (method == "DELETE")
            .then_some(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice())
    })
    .await;
    let mut client = ready_client(&url).await;
    let ended = tokio::time::timeout(Duration::from_secs(15), client.end_session(Duration::MAX));
    assert!(ended.await.is_ok(), "end_session still waits");
    // (The server's task sees the closed connection at its next write.)
    let mut waited = 0;
    while closed.load(Ordering::SeqCst) == 0 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    assert_eq!(
        closed.load(Ordering::SeqCst),
        1,
        "the DELETE's connection is still open"
    );
}

/// A server that records every request's body, gives `initialize` a session, never answers
/// `tools/call`, and answers anything else with 202.
async fn recording_server() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    recording_server_delaying(Duration::ZERO).await
}

/// [`recording_server`], answering `initialize` after `delay`.
async fn recording_server_delaying(
    delay: Duration,
) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                while let Some((method, body)) = read_request(&mut s).await {
                    log.lock().unwrap().push(format!("{method} {body}"));
                    let reply = if body.contains(r#""method":"tools/call""#) {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return;
                    } else if body.contains(r#""method":"initialize""#) {
                        tokio::time::sleep(delay).await;
                        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}"#;
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\n\r\n{answer}",
                            answer.len()
                        )
                    } else if method == "POST" {
                        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
                    } else {
                        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_owned()
                    };
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

/// The documented clean end (close, the last events, drop) lets the cancellation of a call in
/// flight reach the server: the drop cut it before its task ever ran (found by an audit of the
/// tokio client).
#[tokio::test]
async fn the_cancellations_of_a_close_reach_the_server_after_the_drop() {
    let (url, seen) = recording_server().await;
    let mut client = ready_client(&url).await;
    let now = client.now();
    let params = mcpwire::jsonrpc::RawJson::new(r#"{"name":"slow","arguments":{}}"#).unwrap();
    client
        .connection()
        .request(now, "tools/call", Some(params))
        .unwrap();
    let sent = |what: &str| seen.lock().unwrap().iter().any(|b| b.contains(what));
    while !sent(r#""method":"tools/call""#) {
        let _ = tokio::time::timeout(Duration::from_millis(20), client.next_event()).await;
    }
    let now = client.now();
    client.connection().close(now, Duration::ZERO);
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(5), client.next_event()).await
    {
    }
    drop(client);
    for _ in 0..100 {
        if sent(r#""method":"notifications/cancelled""#) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "no cancellation reached the server: {:?}",
        seen.lock().unwrap()
    );
}

/// Nothing listens: the connection closes as a transport failure, and the client says why.
/// Hyper's error text was dropped, so a person saw only `TransportFailed(Disconnected)`.
#[tokio::test]
async fn a_failed_connection_says_why() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut client =
        Client::new(&url, Config::client("t", "1"), ReconnectPolicy::default()).unwrap();
    assert_eq!(client.transport_error(), None);
    loop {
        match next(&mut client).await {
            OwnedEvent::Closed { .. } => break,
            OwnedEvent::Ready { .. } => panic!("nothing listens on {url}"),
            _ => {}
        }
    }
    let why = client.transport_error().expect("a cause");
    assert!(why.contains("Connection refused"), "{why}");
}

/// A server whose answer to each request is `reply`'s (sent after the delay it gives), or
/// [`plain_reply`]'s where it gives none: its URL.
async fn answering_server(
    reply: impl Fn(&str, &str) -> Option<(Duration, String)> + Send + Sync + 'static,
) -> String {
    let reply = Arc::new(reply);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let reply = reply.clone();
            tokio::spawn(async move {
                while let Some((method, body)) = read_request(&mut s).await {
                    let answer = match reply(&method, &body) {
                        Some((delay, answer)) => {
                            tokio::time::sleep(delay).await;
                            answer
                        }
                        None => plain_reply(&method, &body),
                    };
                    if s.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// The (numeric) id of the request in `body`.
fn request_id(body: &str) -> String {
    let id = body.split(r#""id":"#).nth(1).unwrap();
    id.chars().take_while(char::is_ascii_digit).collect()
}

/// A 200 response of `content_type` with `more` headers (each ending in CRLF) and `body`.
fn ok_reply(content_type: &str, more: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{more}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A server that answers `tools/call` with a JSON body 100 ms after it came, and everything
/// else as [`plain_reply`] does.
async fn slow_json_server() -> String {
    answering_server(|_, body| {
        body.contains(r#""method":"tools/call""#).then(|| {
            let id = request_id(body);
            let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#);
            (
                Duration::from_millis(100),
                ok_reply("application/json", "", &answer),
            )
        })
    })
    .await
}

/// An answer that came in time but was taken late (the application was busy) is handed out,
/// not timed out: its head, body and end all waited in the channel, and the timers fired
/// after the head alone, before the end that completes the answer (found by a review of the
/// tokio client).
#[tokio::test]
async fn an_answer_taken_late_is_not_timed_out() {
    let url = slow_json_server().await;
    let mut client = ready_client(&url).await;
    let now = client.now();
    let params = mcpwire::jsonrpc::RawJson::new(r#"{"name":"echo","arguments":{}}"#).unwrap();
    let options = mcpwire::conn::RequestOptions {
        timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let call = client
        .connection()
        .request_with(now, "tools/call", Some(params), options)
        .unwrap();
    // The POST goes out; the answer comes 100 ms later, while the application is busy.
    let _ = tokio::time::timeout(Duration::from_millis(20), client.next_event()).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    loop {
        match next(&mut client).await {
            OwnedEvent::Response { request, .. } if request == call => return,
            OwnedEvent::TimedOut { request } if request == call => {
                panic!("the answer that waited was timed out")
            }
            _ => {}
        }
    }
}

/// `end_session` while `initialize` has no answer yet waits for the answer and sends the
/// DELETE with the session id it brings: it returned at once, and the session the server
/// then made was never deleted (the CLI ends a session so on a signal during a slow
/// handshake; found by a review of the tokio client).
#[tokio::test]
async fn end_session_during_initialize_deletes_the_session_it_makes() {
    let (url, seen) = recording_server_delaying(Duration::from_millis(300)).await;
    let mut config = Config::client("client-test", "1.0");
    config.client_era = ClientEra::Legacy;
    let mut client = Client::new(&url, config, ReconnectPolicy::default()).unwrap();
    let sent = |what: &str| seen.lock().unwrap().iter().any(|b| b.starts_with(what));
    while !seen
        .lock()
        .unwrap()
        .iter()
        .any(|b| b.contains(r#""method":"initialize""#))
    {
        let _ = tokio::time::timeout(Duration::from_millis(20), client.next_event()).await;
    }
    assert!(client.http().session_id().is_none(), "no answer yet");
    tokio::time::timeout(
        Duration::from_secs(5),
        client.end_session(Duration::from_secs(3)),
    )
    .await
    .expect("end_session keeps its limit");
    assert!(
        sent("DELETE"),
        "no DELETE reached the server: {:?}",
        seen.lock().unwrap()
    );
}

/// A server whose `initialize` declares logging and whose `tools/call` answer is an event
/// stream of `logs` log messages, then the answer, in one write: its URL.
async fn logging_server(logs: usize) -> String {
    answering_server(move |_, body| {
        if body.contains(r#""method":"ping""#) {
            // Never answered in time: its timeout is a timer.
            return Some((Duration::from_secs(60), ok_reply("application/json", "", "{}")));
        }
        if !body.contains(r#""id":"#) {
            return None; // (a notification)
        }
        let id = request_id(body);
        if body.contains(r#""method":"tools/call""#) {
            let mut events = String::new();
            for n in 0..logs {
                events.push_str(&format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":{n}}}}}\n\n"
                ));
            }
            events.push_str(&format!(
                "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n\n"
            ));
            Some((Duration::ZERO, ok_reply("text/event-stream", "", &events)))
        } else if body.contains(r#""method":"initialize""#) {
            let answer = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}},"logging":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
            );
            let session = "Mcp-Session-Id: s1\r\n";
            Some((Duration::ZERO, ok_reply("application/json", session, &answer)))
        } else {
            None
        }
    })
    .await
}

/// A ready client of `url` (a `logging_server`) and its call of the chatty tool.
async fn chatty_call(url: &str) -> (Client, mcpwire::conn::RequestId) {
    let mut client = ready_client(url).await;
    let now = client.now();
    let params = mcpwire::jsonrpc::RawJson::new(r#"{"name":"chatty"}"#).unwrap();
    let call = client.connection().request(now, "tools/call", Some(params));
    (client, call.unwrap())
}

/// Thousands of server notifications in a burst of large body chunks wait for the application rather than
/// overflow the engine's queue of events (4,096): the chunk was fed whole, and the
/// notifications past the queue's bound were dropped (found by a review of the tokio client).
#[tokio::test]
async fn a_burst_of_notifications_in_one_chunk_waits_for_the_application() {
    let logs = 30_000;
    let url = logging_server(logs).await;
    let (mut client, call) = chatty_call(&url).await;
    let mut seen = 0;
    loop {
        match next(&mut client).await {
            OwnedEvent::Notification { method, .. } if method == "notifications/message" => {
                seen += 1
            }
            OwnedEvent::Response { request, .. } if request == call => break,
            _ => {}
        }
    }
    assert_eq!(seen, logs);
    assert_eq!(client.connection().stats().dropped_events, 0);
}

/// A request times out while a long burst of notifications streams in to an application that
/// takes its time: no timer fired while a body chunk was held for room, and reports kept
/// coming, so the timeout came only after the whole burst (found by a review of the Go
/// client, which had the same loop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_fires_during_a_long_burst_of_notifications() {
    let logs = 60_000;
    let url = logging_server(logs).await;
    let (mut client, call) = chatty_call(&url).await;
    let (mut seen, mut ping, mut seen_at_timeout) = (0, None, None);
    loop {
        match next(&mut client).await {
            OwnedEvent::Notification { method, .. } if method == "notifications/message" => {
                seen += 1;
                if seen == 1 {
                    // The burst has begun: a request whose timeout falls within it.
                    let options = mcpwire::conn::RequestOptions {
                        timeout: Some(Duration::from_millis(100)),
                        ..Default::default()
                    };
                    let now = client.now();
                    let request = client.connection().request_with(now, "ping", None, options);
                    ping = Some(request.unwrap());
                }
                if seen % 50 == 0 {
                    // An application that writes the lines somewhere.
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            OwnedEvent::TimedOut { request } if Some(request) == ping => {
                seen_at_timeout = Some(seen)
            }
            OwnedEvent::Response { request, .. } if request == call => break,
            _ => {}
        }
    }
    assert_eq!(seen, logs);
    let at = seen_at_timeout.expect("the ping timed out before the call's answer");
    assert!(
        at < logs / 2,
        "the ping timed out after {at} of {logs} notifications"
    );
}
