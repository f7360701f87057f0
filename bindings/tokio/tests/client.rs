//! The tokio HTTP client against a server scripted byte by byte (a plain TCP listener), for
//! what a well-behaved server never does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpwire::conn::ClientEra;
use mcpwire::http::ReconnectPolicy;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::client::Client;
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
                        if s.write_all(head).await.is_ok() {
                            while s.write_all(b"4\r\ngone\r\n").await.is_ok() {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                        closed.fetch_add(1, Ordering::SeqCst);
                        return;
                    } else if method != "POST" {
                        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_owned()
                    } else if body.contains(r#""method":"initialize""#) {
                        let id = body.split(r#""id":"#).nth(1).unwrap();
                        let id: String = id.chars().take_while(char::is_ascii_digit).collect();
                        let answer = format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
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
    let now = client.now();
    let list = client
        .connection()
        .request(now, "tools/list", None)
        .unwrap();
    loop {
        match next(&mut client).await {
            OwnedEvent::Failed { request, .. } if request == list => break,
            OwnedEvent::Response { request, .. } if request == list => panic!("an answer"),
            _ => {}
        }
    }
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
