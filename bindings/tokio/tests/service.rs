//! `McpService` in a hyper server of the test's own (its own accept loop, any path): the
//! tokio HTTP client completes sessions in both eras through it, with progress over SSE.

mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use common::{App, fixture};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use mcpwire::conn::ClientEra;
use mcpwire::http::{HttpServer, ReconnectPolicy};
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::client::Client;
use mcpwire_tokio::http::{HostConfig, McpService};
use tokio::net::TcpListener;

/// The test's own accept loop, handing every connection to the service.
async fn host() -> (String, McpService<App>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/anything", listener.local_addr().unwrap());
    let app = App {
        fixture: fixture::Fixture::new([7; 16]),
        open_streams: Arc::new(AtomicUsize::new(0)),
    };
    let (service, timers) = McpService::new(
        HttpServer::new(fixture::http_config()),
        app,
        HostConfig::default(),
    );
    let timers = tokio::spawn(timers);
    let svc = service.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let svc = svc.clone();
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (url, service, timers)
}

/// One session: ready, then a tools/call with progress; returns the version and how many
/// progress events came.
async fn session(url: &str, era: ClientEra) -> (String, usize) {
    let mut config = Config::client("service-test", "1.0");
    config.client_era = era;
    let mut client = Client::new(url, config, ReconnectPolicy::default()).unwrap();
    let mut version = String::new();
    let mut progress = 0;
    let deadline = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(deadline);
    loop {
        let event = tokio::select! {
            e = client.next_event() => e.expect("the connection closed"),
            () = &mut deadline => panic!("no answer in time"),
        };
        match event {
            OwnedEvent::Ready { version: v } => {
                version = v.as_str().to_owned();
                let now = client.now();
                let params = mcpwire::jsonrpc::RawJson::new(
                    r#"{"name":"test_tool_with_progress","arguments":{}}"#,
                )
                .unwrap();
                client
                    .connection()
                    .request_with(
                        now,
                        "tools/call",
                        Some(params),
                        mcpwire::conn::RequestOptions {
                            progress: true,
                            ..Default::default()
                        },
                    )
                    .unwrap();
            }
            OwnedEvent::Progress { .. } => progress += 1,
            OwnedEvent::Response { result, .. } => {
                assert!(result.contains("Progress test completed"), "{result}");
                return (version, progress);
            }
            other @ (OwnedEvent::Error { .. } | OwnedEvent::Closed { .. }) => {
                panic!("{other:?}")
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hyper_server_of_ones_own_serves_sessions_in_both_eras() {
    let (url, service, timers) = host().await;
    let (version, progress) = session(&url, ClientEra::Auto).await;
    assert_eq!(version, "2026-07-28");
    assert!(progress >= 2, "{progress} progress events");
    let (version, progress) = session(&url, ClientEra::Legacy).await;
    assert_eq!(version, "2025-11-25");
    assert!(progress >= 2, "{progress} progress events");
    timers.abort();
    drop(service);
}

#[tokio::test]
async fn as_a_tower_service_it_takes_any_body_type() {
    use http_body_util::{BodyExt, Full};
    use tower_service::Service;
    let app = App {
        fixture: fixture::Fixture::new([7; 16]),
        open_streams: Arc::new(AtomicUsize::new(0)),
    };
    let (mut service, timers) = McpService::new(
        HttpServer::new(fixture::http_config()),
        app,
        HostConfig::default(),
    );
    let timers = tokio::spawn(timers);
    std::future::poll_fn(|cx| {
        Service::<hyper::Request<Full<bytes::Bytes>>>::poll_ready(&mut service, cx)
    })
    .await
    .unwrap();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let request = hyper::Request::post("/mcp")
        .header("Host", "127.0.0.1:1")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(Full::new(bytes::Bytes::from_static(init.as_bytes())))
        .unwrap();
    let response = Service::call(&mut service, request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("mcp-session-id"));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains(r#""protocolVersion":"2025-11-25""#), "{text}");
    timers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_arrives_while_the_session_ends_is_still_handed_out() {
    // `end_session` waits for its DELETE; what other exchanges report meanwhile (here the
    // answer to a call the application has not polled for yet) must be taken in, not thrown
    // away: the request would otherwise end as a timeout a minute later.
    let (url, _service, _task) = host().await;
    let mut config = Config::client("service-test", "1.0");
    config.client_era = ClientEra::Legacy;
    let mut client = Client::new(&url, config, ReconnectPolicy::default()).unwrap();
    let call = loop {
        match tokio::time::timeout(Duration::from_secs(10), client.next_event()).await {
            Ok(Some(OwnedEvent::Ready { .. })) => {
                let now = client.now();
                let params = mcpwire::jsonrpc::RawJson::new(
                    r#"{"name":"test_tool_with_progress","arguments":{}}"#,
                )
                .unwrap();
                break client
                    .connection()
                    .request(now, "tools/call", Some(params))
                    .unwrap();
            }
            Ok(Some(_)) => {}
            other => panic!("no session: {other:?}"),
        }
    };
    // The call goes out; then the application looks away while the answer arrives.
    let _ = tokio::time::timeout(Duration::from_millis(20), client.next_event()).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // (No limit, `Duration::MAX`: the DELETE's answer ends the wait. It overflowed the clock.)
    tokio::time::timeout(Duration::from_secs(10), client.end_session(Duration::MAX))
        .await
        .expect("the DELETE was answered");
    loop {
        match tokio::time::timeout(Duration::from_secs(5), client.next_event()).await {
            Ok(Some(OwnedEvent::Response {
                request, result, ..
            })) if request == call => {
                assert!(result.contains("Progress test completed"), "{result}");
                break;
            }
            Ok(Some(OwnedEvent::Progress { .. })) => {}
            other => panic!("the call's answer was lost: {other:?}"),
        }
    }
}

/// A piece of a [`Scripted`] body, with what tells its sender that the service took it.
type Piece = (bytes::Bytes, tokio::sync::oneshot::Sender<()>);

/// A request body the test hands out piece by piece: each piece's sender hears once the
/// service has taken it.
struct Scripted(tokio::sync::mpsc::UnboundedReceiver<Piece>);

impl hyper::body::Body for Scripted {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|piece| {
            piece.map(|(bytes, taken)| {
                let _ = taken.send(());
                Ok(hyper::body::Frame::data(bytes))
            })
        })
    }
}

/// A POST to `service` whose body comes through the returned sender (dropped: the end), and
/// its response's status and `Retry-After`.
fn scripted_post(
    service: &McpService<App>,
) -> (
    tokio::sync::mpsc::UnboundedSender<Piece>,
    tokio::task::JoinHandle<(u16, Option<String>)>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let request = hyper::Request::post("/mcp")
        .header("Host", "127.0.0.1")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(Scripted(rx))
        .unwrap();
    let answer = hyper::service::Service::call(service, request);
    let answer = tokio::spawn(async move {
        let response = answer.await.unwrap();
        let retry = (response.headers().get("retry-after")).map(|v| v.to_str().unwrap().to_owned());
        (response.status().as_u16(), retry)
    });
    (tx, answer)
}

/// Sends `bytes` as one piece of a scripted body and waits until the service has it.
async fn give(body: &tokio::sync::mpsc::UnboundedSender<Piece>, bytes: &[u8]) {
    let (taken, heard) = tokio::sync::oneshot::channel();
    body.send((bytes::Bytes::copy_from_slice(bytes), taken))
        .unwrap();
    heard.await.unwrap();
}

/// The bodies being read share `max_body_total`: two large bodies still arriving hold most
/// of it, and a third that does not fit gets 503 with `Retry-After` instead of adding to the
/// memory the host holds. Once the two are in and answered, their share is given back: the
/// next large body is served. Before the shared bound, each connection could hold
/// `max_body` at once. (On one thread, a piece the service took is counted before the test
/// goes on.)
#[tokio::test]
async fn bodies_past_the_shared_bound_get_503_and_the_bound_is_given_back() {
    let app = App {
        fixture: fixture::Fixture::new([7; 16]),
        open_streams: Arc::new(AtomicUsize::new(0)),
    };
    let config = HostConfig {
        max_body: 64 * 1024,
        max_body_total: 128 * 1024,
        ..HostConfig::default()
    };
    let (service, timers) = McpService::new(HttpServer::new(fixture::http_config()), app, config);
    let _timers = tokio::spawn(timers);
    // An initialize request padded with spaces to 60,000 bytes.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let body = format!("{init}{}", " ".repeat(60_000 - init.len()));
    let body = body.as_bytes();
    // Two bodies, 50,000 of their 60,000 bytes in: 100,000 of the 131,072 held.
    let mut held = Vec::new();
    for _ in 0..2 {
        let (tx, answer) = scripted_post(&service);
        give(&tx, &body[..50_000]).await;
        held.push((tx, answer));
    }
    let (tx, refused) = scripted_post(&service);
    give(&tx, body).await;
    drop(tx);
    assert_eq!(refused.await.unwrap(), (503, Some("1".to_owned())));
    // The two held bodies are still served, and give their share back.
    for (tx, answer) in held {
        give(&tx, &body[50_000..]).await;
        drop(tx);
        assert_eq!(answer.await.unwrap().0, 200);
    }
    let (tx, answer) = scripted_post(&service);
    give(&tx, body).await;
    drop(tx);
    assert_eq!(answer.await.unwrap().0, 200, "the bound is given back");
}

/// Events and sessions shared with other replicas (a stand-in for Redis): what was appended.
#[derive(Clone, Default)]
struct SharedStore {
    events: Arc<std::sync::Mutex<Vec<String>>>,
    sessions: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

impl mcpwire::http::EventStore for SharedStore {
    fn append(&mut self, _: &str, _: mcpwire::http::HttpStreamId, _: u64, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes).into_owned();
        self.events.lock().unwrap().push(text);
    }
    fn replay(
        &mut self,
        _: &str,
        _: mcpwire::http::HttpStreamId,
        _: u64,
        _: &mut dyn FnMut(&[u8]),
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        Ok(())
    }
    fn forget(&mut self, _: &str) {}
}

impl mcpwire::http::SessionStore for SharedStore {
    fn create(
        &mut self,
        session: &str,
        initialize: &str,
    ) -> Result<(), mcpwire::http::StoreUnavailable> {
        let mut sessions = self.sessions.lock().unwrap();
        sessions.insert(session.to_owned(), initialize.to_owned());
        Ok(())
    }
    fn load(&mut self, session: &str) -> Result<Option<String>, mcpwire::http::StoreUnavailable> {
        Ok(self.sessions.lock().unwrap().get(session).cloned())
    }
    fn touch(&mut self, session: &str) -> Result<bool, mcpwire::http::StoreUnavailable> {
        Ok(self.sessions.lock().unwrap().contains_key(session))
    }
    fn forget(&mut self, session: &str) -> Result<(), mcpwire::http::StoreUnavailable> {
        self.sessions.lock().unwrap().remove(session);
        Ok(())
    }
}

/// An application that never answers.
struct NeverAnswers;

impl mcpwire_tokio::http::Application for NeverAnswers {
    fn drive(&mut self, _: mcpwire::Timestamp, server: &mut HttpServer) {
        while server.poll_event().is_some() {}
        server.pump();
    }
}

/// With replicas sharing sessions, a service whose server has stopped answers the requests
/// it never will with an error in the shared events (`abandon_requests`), as `serve` does: an
/// application running `McpService` had no way to, and a client resuming elsewhere waited
/// for its own time-out (found by a review of the host).
#[tokio::test]
async fn a_stopped_service_answers_what_it_never_will_for_the_other_replicas() {
    use http_body_util::{BodyExt, Full};
    use tower_service::Service;
    let store = SharedStore::default();
    let server_config = Config::server("replica", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let mut config = mcpwire::http::HttpServerConfig::new(server_config);
    config.events = Some(Box::new(store.clone()));
    config.sessions = Some(Box::new(store.clone()));
    let (mut service, timers) =
        McpService::new(HttpServer::new(config), NeverAnswers, HostConfig::default());
    let timers = tokio::spawn(timers);
    std::future::poll_fn(|cx| {
        Service::<hyper::Request<Full<bytes::Bytes>>>::poll_ready(&mut service, cx)
    })
    .await
    .unwrap();
    let post = |sid: Option<&str>, body: &'static str| {
        let mut request = hyper::Request::post("/mcp")
            .header("Host", "127.0.0.1:1")
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if let Some(sid) = sid {
            request = request
                .header("Mcp-Session-Id", sid)
                .header("MCP-Protocol-Version", "2025-06-18");
        }
        request
            .body(Full::new(bytes::Bytes::from_static(body.as_bytes())))
            .unwrap()
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let response = Service::call(&mut service, post(None, init)).await.unwrap();
    let sid = (response.headers().get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .expect("a session")
        .to_owned();
    let _ = response.into_body().collect().await;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let response = Service::call(&mut service, post(Some(&sid), initialized))
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let call =
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{}}}"#;
    let response = Service::call(&mut service, post(Some(&sid), call))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The client waits a little on the stream (2025-06-18 has no priming event), then goes
    // away; the call is never answered.
    let mut body = response.into_body();
    let _ = tokio::time::timeout(Duration::from_millis(100), body.frame()).await;
    drop(body);
    service.begin_shutdown();
    service.end_streams();
    assert_eq!(service.abandon_requests(), 1);
    let events = store.events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|e| e.contains(r#""id":2"#) && e.contains("-32603")),
        "{events:?}"
    );
    timers.abort();
}
