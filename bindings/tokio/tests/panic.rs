//! A panic in the application's code is the application's bug, but it must not take the host
//! with it: the request it hit gets a 500, the engine forgets that request, the other
//! requests are served, and the timers keep running; a panic in its `poll_timeout` costs
//! nothing but that deadline. (The panic hook prints each panic.)

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
