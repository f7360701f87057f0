//! A client that stops reading an answer: once nothing more of it can be written for
//! `send_timeout`, the host closes the connection, and what it held is freed. Without it the answer (here 8 MiB) stayed in the host's and the engine's buffers for
//! as long as the client kept the connection open (found by a helper's audit: 50 such clients
//! held 265 MB for good).

mod common;

use std::time::Duration;

use mcpwire::http::{HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::{Config, Event, Timestamp};
use mcpwire_tokio::http::{Application, HostConfig, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Answers every tools/call with a text of 8 MiB.
struct Big;

impl Application for Big {
    fn drive(&mut self, _now: Timestamp, server: &mut HttpServer) {
        let mut calls = Vec::new();
        while let Some((key, ev)) = server.poll_event() {
            if let Event::Request { id, .. } = ev {
                calls.push((key, OwnedId::from(id)));
            }
        }
        for (key, id) in calls {
            let text = "a".repeat(8 << 20);
            let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
            if let Some(c) = server.connection(key) {
                c.respond(id.as_id(), RawJson::new(&result).unwrap())
                    .unwrap();
            }
        }
        server.pump();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_after_the_send_timeout() {
    let addr = serve_app(
        Big,
        HostConfig {
            send_timeout: Duration::from_millis(500),
            ..common::test_config()
        },
    )
    .await;
    let mut c = call_big(addr).await;
    // Once the answer has begun to come (making 8 MiB takes a while in a debug build on a
    // busy machine: a fixed wait from the request could end before the first byte was
    // written, and the client then read the whole answer as it came), the client reads
    // nothing for longer than the send timeout.
    let mut buf = vec![0u8; 1 << 16];
    let mut got = tokio::time::timeout(Duration::from_secs(30), c.read(&mut buf))
        .await
        .expect("the answer begins")
        .unwrap();
    assert!(got > 0, "the connection closed before the answer");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Then the connection has been closed under it: what it can still read ends early.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection was never closed");
    assert!(got < 8 << 20, "the whole answer came ({got} bytes)");
}

/// A host serving `app` (a server with tools) with `host`'s settings; its address.
async fn serve_app(app: impl Application, host: HostConfig) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Config::server("big", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    tokio::spawn(serve(
        listener,
        HttpServer::new(HttpServerConfig::new(config)),
        app,
        host,
        std::future::pending::<()>(),
    ));
    addr
}

/// A stateless tools/call to `addr` on a connection of its own, with a small receive window
/// so that the answer cannot all sit in socket buffers; the connection.
async fn call_big(addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut c = socket.connect(addr).await.unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(body.as_bytes()).await.unwrap();
    c
}

/// Reports progress on every tools/call, then answers it: with a text of 3 MiB for "big",
/// 1.5 MiB otherwise. Every answer goes on its call's SSE stream.
struct ProgressThenAnswer;

impl Application for ProgressThenAnswer {
    fn drive(&mut self, _now: Timestamp, server: &mut HttpServer) {
        let mut calls = Vec::new();
        while let Some((key, ev)) = server.poll_event() {
            if let Event::Request { id, params, .. } = ev {
                let big = params.is_some_and(|p| p.get().contains(r#""big""#));
                calls.push((key, OwnedId::from(id), big));
            }
        }
        for (key, id, big) in calls {
            let text = "a".repeat(if big { 3 << 20 } else { 3 << 19 });
            let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
            if let Some(c) = server.connection(key) {
                c.progress(id.as_id(), 1.0, None, None).unwrap();
                c.respond(id.as_id(), RawJson::new(&result).unwrap())
                    .unwrap();
            }
        }
        server.pump();
    }
}

/// A POST to `addr` in session `sid` (none: `initialize`) on a connection of its own, with a
/// small receive window; the connection.
async fn session_post(
    addr: std::net::SocketAddr,
    sid: Option<&str>,
    body: &str,
) -> tokio::net::TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut c = socket.connect(addr).await.unwrap();
    let session = sid.map_or(String::new(), |s| {
        format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")
    });
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(body.as_bytes()).await.unwrap();
    c
}

/// Reads from `c` until `text` has come (10 s at most); what came.
async fn read_until(c: &mut tokio::net::TcpStream, text: &str) -> String {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while !String::from_utf8_lossy(&got).contains(text) {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&got).into_owned()
}

/// A large answer on a session's SSE stream, its client gone before it had it all, is still
/// there for its resumption after the event store dropped it. The host handed the whole
/// answer to hyper at once and counted it delivered: the session's next answer pushed it out
/// of the store (4 MiB a session), and the resumption found nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_answer_cut_off_mid_transfer_is_resumed_after_the_store_dropped_it() {
    let addr = serve_app(ProgressThenAnswer, common::test_config()).await;
    let mut c = session_post(
        addr,
        None,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    )
    .await;
    let init = read_until(&mut c, "serverInfo").await;
    let sid = (init.lines())
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session")
        .trim()
        .to_owned();
    let call = |id: u32, tool: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"progressToken":"p{id}"}}}}}}"#
        )
    };
    // The big call: its progress event (with an id), then the client leaves mid-answer.
    let mut c = session_post(addr, Some(&sid), &call(1, "big")).await;
    let start = read_until(&mut c, "notifications/progress").await;
    // (Of the last event that came whole: a client takes an event's id at its end.)
    let whole = &start[..start.rfind("\n\n").expect("a whole event")];
    let last_id = (whole.lines())
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .expect("an event id before the answer")
        .trim()
        .to_owned();
    assert!(start.len() < 3 << 20, "the answer came whole");
    drop(c);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A medium answer pushes the big one out of the store.
    let mut c = session_post(addr, Some(&sid), &call(2, "medium")).await;
    let small = read_until(&mut c, r#""id":2,"result""#).await;
    assert!(small.contains(r#""id":2,"result""#), "{small}");
    drop(c);
    // The resumption still carries the big answer.
    let mut c = TcpStream::connect(addr).await.unwrap();
    let get = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\nLast-Event-ID: {last_id}\r\n\r\n"
    );
    c.write_all(get.as_bytes()).await.unwrap();
    let resumed = read_until(&mut c, r#""id":1,"result""#).await;
    assert!(
        resumed.contains(r#""id":1,"result""#),
        "{}",
        &resumed[..resumed.len().min(2000)]
    );
}

/// At the cap, the connection idle longest may be one still sending a large answer to a
/// client that reads it (the engine gave the whole answer up, so the connection counts as
/// idle): asked to make room, it closes only once the download ends. The new client got 503
/// after a quarter of a second while a silent connection could have made room at once (found
/// by a review of the host). Now the silent one makes room, and the download goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_connection_still_sending_lets_a_silent_one_make_room() {
    let addr = serve_app(
        Big,
        HostConfig {
            max_connections: 2,
            header_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            ..common::test_config()
        },
    )
    .await;
    // A stateless call whose 8 MiB answer is read slowly (every 10 ms what a small receive
    // window holds: under 1 MB/s).
    let mut slow = call_big(addr).await;
    let mut buf = vec![0u8; 1 << 16];
    let first = tokio::time::timeout(Duration::from_secs(30), slow.read(&mut buf))
        .await
        .expect("the answer begins")
        .unwrap();
    assert!(first > 0);
    let download = tokio::spawn(async move {
        let mut got = first;
        while got < 4 << 20 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            match slow.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        got
    });
    // Served after the download began, then silent: idle since later than the slow one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let get = b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let mut silent = TcpStream::connect(addr).await.unwrap();
    silent.write_all(get).await.unwrap();
    let mut small = [0u8; 256];
    let n = silent.read(&mut small).await.unwrap();
    assert!(common::statuses(&small[..n]) == [404]);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut third = TcpStream::connect(addr).await.unwrap();
    third.write_all(get).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), third.read(&mut small))
        .await
        .expect("answered")
        .unwrap();
    assert_eq!(
        common::statuses(&small[..n]),
        [404],
        "served, not turned away"
    );
    // The slow one, closing once it has sent everything, is not taken for a client that stopped
    // reading: its writes wait for seconds at a time (the socket counts as writable again only
    // once a good part of a large send buffer is free), yet it reads all along. It was cut.
    let got = tokio::time::timeout(Duration::from_secs(60), download)
        .await
        .expect("the download goes on")
        .unwrap();
    assert!(got >= 4 << 20, "the slow download was cut at {got} bytes");
}
