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

/// A session whose server has forgotten it answers 404, as the spec says, but never ends
/// that answer's body. The request fails and a new session starts, and the 404's connection
/// is closed: the client kept reading it for as long as the server kept writing, one more
/// task and connection at each expiry (found by an audit of the clients).
#[tokio::test]
async fn the_404_that_expires_a_session_is_closed_even_when_its_body_never_ends() {
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
                    let reply = if method != "POST" {
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
                    } else if !body.contains(r#""id":"#) {
                        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
                    } else {
                        // The session is gone, and this answer never ends.
                        let head = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\
                            Transfer-Encoding: chunked\r\n\r\n";
                        if s.write_all(head).await.is_ok() {
                            while s.write_all(b"4\r\ngone\r\n").await.is_ok() {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                        closed.fetch_add(1, Ordering::SeqCst);
                        return;
                    };
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut config = Config::client("client-test", "1.0");
    config.client_era = ClientEra::Legacy;
    let mut client = Client::new(&url, config, ReconnectPolicy::default()).unwrap();
    let next = async |client: &mut Client| {
        let event = tokio::time::timeout(Duration::from_secs(10), client.next_event());
        event
            .await
            .expect("an event in time")
            .expect("the client goes on")
    };
    while !matches!(next(&mut client).await, OwnedEvent::Ready { .. }) {}
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
