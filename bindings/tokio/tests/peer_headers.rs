//! The tokio HTTP client against a real peer that checks `Mcp-Param-*` headers: the Python
//! SDK's Streamable HTTP server (tests/peers/py_http_server.py, installed by
//! `.ci/setup-peers`), whose tool `locate` mirrors its `region` argument in
//! `Mcp-Param-Region` (`x-mcp-header`). A 2026-07-28 call that comes without the header
//! (the client never listed the tools) is refused with `HeaderMismatch`; the client then
//! reads `tools/list` itself and sends the call again with the header.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcpwire::conn::ClientEra;
use mcpwire::http::ReconnectPolicy;
use mcpwire::jsonrpc::RawJson;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::client::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Python server on a free port, killed when dropped.
struct PythonServer(Child, u16);

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Starts tests/peers/py_http_server.py and waits, up to 30 s, for it to listen.
#[allow(clippy::disallowed_methods)] // a process test: it bounds its wait by the real clock
fn start_python() -> PythonServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .arg(root().join("tests/peers/py_http_server.py"))
        .arg(port.to_string())
        .env("PYTHONPATH", root().join("tests/peers/python/site"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let server = PythonServer(child, port);
    let until = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the Python server never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;

/// A 2026-07-28 `tools/call` of `locate` POSTed by hand, without `Mcp-Param-Region`: the
/// status and body of the answer.
async fn call_without_the_header(port: u16) -> (String, String) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"locate","arguments":{{"region":"eu-west"}},{META}}}}}"#
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: locate\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut answer));
    read.await.expect("an answer in time").unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// The client's next event, within 20 s.
async fn next(client: &mut Client) -> OwnedEvent {
    let event = tokio::time::timeout(Duration::from_secs(20), client.next_event());
    event
        .await
        .expect("an event in time")
        .expect("the client goes on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_python_sdk_refuses_for_its_param_headers_goes_again_after_tools_list() {
    let server = start_python();
    // The peer does check: without the header, 400 and HeaderMismatch.
    let (status, body) = call_without_the_header(server.1).await;
    assert!(status.contains(" 400 "), "{status}\n{body}");
    assert!(body.contains("-32020"), "{status}\n{body}");

    let mut config = Config::client("peer-headers-test", "1.0");
    config.client_era = ClientEra::Modern;
    let url = format!("http://127.0.0.1:{}/mcp", server.1);
    let mut client = Client::new(&url, config, ReconnectPolicy::default()).unwrap();
    loop {
        match next(&mut client).await {
            OwnedEvent::Ready { .. } => break,
            OwnedEvent::Closed { reason } => panic!("closed: {reason:?}"),
            _ => {}
        }
    }
    // Called at once, without listing the tools first: no header goes with it.
    let now = client.now();
    let params = r#"{"name":"locate","arguments":{"region":"eu-west"}}"#;
    let call = client
        .connection()
        .request(now, "tools/call", Some(RawJson::new(params).unwrap()))
        .unwrap();
    loop {
        match next(&mut client).await {
            OwnedEvent::Response { request, result } if request == call => {
                assert!(result.contains("located in eu-west"), "{result}");
                break;
            }
            OwnedEvent::Response { request, result } => {
                panic!("an answer to {request:?}, which the application never asked: {result}")
            }
            OwnedEvent::Error {
                request,
                code,
                message,
                ..
            } => panic!("request {request:?} failed: {code} {message}"),
            OwnedEvent::Failed { request, reason } => panic!("{request:?} failed: {reason:?}"),
            OwnedEvent::TimedOut { request } => panic!("{request:?} timed out"),
            OwnedEvent::Violation { .. } => panic!("a violation"),
            _ => {}
        }
    }
    let now = client.now();
    client.connection().close(now, Duration::ZERO);
    client.flush(Duration::from_secs(2)).await;
}
