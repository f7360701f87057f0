//! A panic in the application's code is the application's bug, but it must not take the host
//! with it: the request it hit gets a 500, the engine forgets that request, the other
//! requests are served, and the timers keep running. (The panic hook prints each panic.)

mod common;

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
    /// `handle_timeout` calls that returned.
    timers_done: usize,
}

/// Answers tools/call, except "boom", on which `drive` panics; its timer panics the first
/// time it fires, then fires again 10 ms later and returns.
struct Panicky {
    seen: Arc<Mutex<Seen>>,
    timer: Option<Timestamp>,
    timer_panicked: bool,
}

impl Application for Panicky {
    fn drive(&mut self, _now: Timestamp, server: &mut HttpServer) {
        let mut calls: Vec<(ConnKey, OwnedId, bool)> = Vec::new();
        while let Some((key, ev)) = server.poll_event() {
            if let Event::Request { id, params, .. } = ev {
                let boom = params.is_some_and(|p| p.get().contains(r#""boom""#));
                calls.push((key, id.into(), boom));
            }
        }
        for (key, id, boom) in calls {
            assert!(!boom, "the app's bug");
            if let Some(c) = server.connection(key) {
                c.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
                    .unwrap();
            }
        }
        server.pump();
        let live = server.connections().len();
        self.seen.lock().unwrap().live.push(live);
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        self.timer
    }

    fn handle_timeout(&mut self, now: Timestamp, _server: &mut HttpServer) {
        if self.timer.is_some_and(|t| t <= now) {
            if !self.timer_panicked {
                self.timer_panicked = true;
                self.timer = Some(now.after(Duration::from_millis(10)));
                panic!("the app's timer bug");
            }
            self.timer = None;
            self.seen.lock().unwrap().timers_done += 1;
        }
    }
}

/// One stateless tools/call of `tool` on a connection of its own; the raw response.
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
        // Due at once: the timers task fires it as soon as it starts.
        timer: Some(Timestamp::ZERO),
        timer_panicked: false,
    };
    tokio::spawn(serve(
        listener,
        HttpServer::new(HttpServerConfig::new(config)),
        app,
        common::test_config(),
        std::future::pending::<()>(),
    ));

    for tool in ["boom", "fine", "boom", "boom", "fine"] {
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

    // The timer that panicked fired again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().timers_done == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the timers task ended with the panic"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
