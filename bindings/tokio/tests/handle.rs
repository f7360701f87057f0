//! Work that ends outside the host's calls comes back through a `HostHandle`: a tool answered
//! on a task of its own, a deadline the application moved from there; and a handle does not
//! keep a stopped host alive.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Client, open_session};
use mcpwire::http::{ConnKey, HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::{Config, OwnedEvent, Timestamp};
use mcpwire_tokio::http::{Application, HostConfig, HostHandle, serve};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Answers `tools/call` later: "task" from a task of its own after 20 ms, through the handle;
/// "timer" from its own timer, which that task sets through the handle. Everything else at
/// once.
#[derive(Default)]
struct Later {
    handle: Option<HostHandle<Later>>,
    /// The handle, for the test to keep after the host stops.
    shared: Arc<Mutex<Option<HostHandle<Later>>>>,
    due: Option<(Timestamp, ConnKey, OwnedId)>,
}

const RESULT: &str = r#"{"content":[{"type":"text","text":"later"}]}"#;

fn answer(server: &mut HttpServer, key: ConnKey, id: &OwnedId) {
    if let Some(conn) = server.connection(key) {
        let _ = conn.respond(id.as_id(), RawJson::new(RESULT).unwrap());
    }
}

impl Application for Later {
    fn started(&mut self, handle: HostHandle<Self>) {
        *self.shared.lock().unwrap() = Some(handle.clone());
        self.handle = Some(handle);
    }

    fn drive(&mut self, _now: Timestamp, server: &mut HttpServer) {
        while let Some((key, event)) = server.poll_event() {
            let OwnedEvent::Request { id, method, params } = event.to_owned_event() else {
                continue;
            };
            if method != "tools/call" {
                if let Some(conn) = server.connection(key) {
                    let _ = conn.respond(id.as_id(), RawJson::new("{}").unwrap());
                }
                continue;
            }
            let by_timer = params.as_deref().is_some_and(|p| p.contains("timer"));
            let handle = self.handle.clone().expect("started before any request");
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                handle.with(move |app, server, now| {
                    if by_timer {
                        app.due = Some((now.after(Duration::from_millis(20)), key, id));
                    } else {
                        answer(server, key, &id);
                    }
                });
            });
        }
        server.pump();
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        self.due.as_ref().map(|(at, _, _)| *at)
    }

    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        if self.due.as_ref().is_some_and(|(at, _, _)| *at <= now) {
            let (_, key, id) = self.due.take().unwrap();
            answer(server, key, &id);
        }
    }
}

struct Host {
    client: Client,
    session: String,
    handle: Arc<Mutex<Option<HostHandle<Later>>>>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn host() -> Host {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Config::server("handle-test", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let app = Later::default();
    let handle = app.shared.clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(
        listener,
        HttpServer::new(HttpServerConfig::new(config)),
        app,
        HostConfig::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let mut client = Client::over(tokio::net::TcpStream::connect(addr).await.unwrap());
    let session = open_session(&mut client, "{}").await;
    Host {
        client,
        session,
        handle,
        stop,
        task,
    }
}

/// Calls `tool` and returns its answer's body and how long it took. (The engine's keep-alive
/// comes every 15 s: an answer that waited for the next call into the host would take that.)
#[allow(clippy::disallowed_methods)] // a process test: it bounds its wait by the real clock
async fn call(host: &mut Host, tool: &str) -> (String, Duration) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
    );
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        host.client.post(Some(&host.session), &body),
    )
    .await
    .expect("an answer within 10 s");
    assert_eq!(r.status, 200, "{}", r.text());
    (r.text(), started.elapsed())
}

/// Calls `tool` on a fresh host: its answer must come, and well before a keep-alive would
/// have carried it.
async fn answered_soon(tool: &str) {
    let mut host = host().await;
    let (text, took) = call(&mut host, tool).await;
    assert!(
        text.contains(&format!(r#""id":2,"result":{RESULT}"#)),
        "{text}"
    );
    assert!(took < Duration::from_secs(5), "the answer took {took:?}");
}

#[tokio::test]
async fn a_task_answers_through_the_handle_at_once() {
    answered_soon("task").await;
}

#[tokio::test]
async fn a_deadline_moved_through_the_handle_fires() {
    answered_soon("timer").await;
}

#[tokio::test]
async fn a_handle_does_not_keep_a_stopped_host() {
    let host = host().await;
    let handle = host.handle.lock().unwrap().clone().expect("started");
    assert_eq!(handle.with(|_, _, _| 7), Some(7));
    drop(host.client);
    let _ = host.stop.send(());
    host.task.await.unwrap().unwrap();
    assert!(handle.with(|_, _, _| 7).is_none(), "the host lives on");
}

/// Sets off a thread that uses its handle at once, and takes a while to return.
struct Early {
    got: Arc<Mutex<Option<Option<u8>>>>,
}

impl Application for Early {
    fn started(&mut self, handle: HostHandle<Self>) {
        let got = self.got.clone();
        std::thread::spawn(move || {
            let answer = handle.with(|_, _, _| 7u8);
            *got.lock().unwrap() = Some(answer);
        });
        std::thread::sleep(Duration::from_millis(50));
    }

    fn drive(&mut self, _: Timestamp, server: &mut HttpServer) {
        server.pump();
    }
}

/// A task `started` sets off finds the host, however soon it uses the handle: it waits
/// until `started` has returned. `started` used to run before the host existed, and such a
/// task was told the host was gone (found by a review of this change).
#[test]
#[allow(clippy::disallowed_methods)] // it bounds its wait by the real clock
fn a_task_started_in_started_finds_the_host() {
    let got = Arc::new(Mutex::new(None));
    let config = Config::server("handle-test", "1.0");
    let (service, timers) = mcpwire_tokio::http::McpService::new(
        HttpServer::new(HttpServerConfig::new(config)),
        Early { got: got.clone() },
        HostConfig::default(),
    );
    let until = Instant::now() + Duration::from_secs(5);
    while got.lock().unwrap().is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*got.lock().unwrap(), Some(Some(7)));
    drop((service, timers));
}
