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
use tokio::net::{TcpListener, TcpSocket};

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
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Config::server("big", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let host = HostConfig {
        send_timeout: Duration::from_millis(500),
        ..common::test_config()
    };
    tokio::spawn(serve(
        listener,
        HttpServer::new(HttpServerConfig::new(config)),
        Big,
        host,
        std::future::pending::<()>(),
    ));

    // A small receive window, so that the answer cannot all sit in socket buffers.
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
    // The client reads nothing for longer than the send timeout.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Then the connection has been closed under it: what it can still read ends early.
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
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
