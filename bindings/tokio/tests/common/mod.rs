//! Shared by the host's tests: a real server on 127.0.0.1 (the conformance fixture behind
//! `serve`, in this process), a raw HTTP/1.1 client over `TcpStream`, and /proc readings.

#![allow(dead_code)]

#[path = "../../../../examples/conformance/fixture.rs"]
pub mod fixture;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::http::HttpServer;
pub use mcpwire_tokio::http::HostConfig;
use mcpwire_tokio::http::{Application, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The fixture, noting how many SSE streams the engine holds after every change.
pub struct App {
    pub fixture: fixture::Fixture,
    pub open_streams: Arc<AtomicUsize>,
}

impl Application for App {
    fn drive(&mut self, now: Timestamp, server: &mut HttpServer) {
        self.fixture.drive(now, server);
        self.open_streams
            .store(server.open_streams(), Ordering::SeqCst);
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        self.fixture.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        self.fixture.handle_timeout(now, server);
    }
}

/// A host serving the fixture on a free loopback port.
pub struct Server {
    pub addr: SocketAddr,
    /// The engine's open SSE streams, as of the last change.
    pub open_streams: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

/// Short timeouts, small limits: what the tests run with unless they say otherwise.
pub fn test_config() -> HostConfig {
    HostConfig {
        header_read_timeout: Duration::from_secs(2),
        body_read_timeout: Duration::from_secs(2),
        max_body: 64 * 1024,
        shutdown_grace: Duration::from_secs(2),
        ..HostConfig::default()
    }
}

pub async fn start(config: HostConfig) -> Server {
    start_with(config, fixture::http_config()).await
}

/// [`start`] with the engine's HTTP configuration given.
pub async fn start_with(config: HostConfig, http: mcpwire::http::HttpServerConfig) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let open_streams = Arc::new(AtomicUsize::new(0));
    let app = App {
        fixture: fixture::Fixture::new([7; 16]),
        open_streams: open_streams.clone(),
    };
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(
        listener,
        HttpServer::new(http),
        app,
        config,
        async move {
            let _ = rx.await;
        },
    ));
    Server {
        addr,
        open_streams,
        stop: Some(tx),
        task: Some(task),
    }
}

impl Server {
    /// Asks for a graceful shutdown; the returned task ends when `serve` returns.
    pub fn shutdown(&mut self) -> JoinHandle<io::Result<()>> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.take().expect("not shut down yet")
    }

    pub async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr).await.expect("connect")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Reads everything until the server closes (EOF or reset), at most `limit`.
pub async fn read_to_close(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let closed = tokio::time::timeout(limit, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (out, closed)
}

/// Reads a `100 Continue` interim response whole (10 s at most): the host has taken the
/// request that asked for it in (`Expect: 100-continue`) and reads its body. Nothing past it
/// is read.
pub async fn read_100_continue(r: &mut (impl tokio::io::AsyncRead + Unpin)) {
    let mut seen = Vec::new();
    let mut b = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), r.read(&mut b))
            .await
            .expect("a 100 Continue")
            .expect("read");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&b[..n]);
    }
    assert_eq!(statuses(&seen), [100], "{}", String::from_utf8_lossy(&seen));
}

/// The status codes of every HTTP response in `raw` (responses start a line with `HTTP/1.1 `).
pub fn statuses(raw: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(raw);
    text.split("\r\n")
        .filter_map(|l| l.strip_prefix("HTTP/1.1 "))
        .filter_map(|l| l.get(..3)?.parse().ok())
        .collect()
}

/// One parsed response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was chunked and ended with its last chunk (a normal end).
    pub chunked_end: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A keep-alive HTTP/1.1 client on one connection.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub async fn new(server: &Server) -> Self {
        Self::over(server.connect().await)
    }

    /// A client on a connection of the caller's (to a host other than [`start`]'s).
    pub fn over(stream: TcpStream) -> Self {
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub async fn send(&mut self, method: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut req = format!("{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if method != "GET" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes).await.expect("write");
    }

    async fn fill(&mut self) -> bool {
        let mut b = [0u8; 8192];
        match tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut b)).await {
            Ok(Ok(n)) if n > 0 => {
                self.buf.extend_from_slice(&b[..n]);
                true
            }
            _ => false,
        }
    }

    async fn line(&mut self) -> Option<String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Some(line);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    async fn exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await {
                return None;
            }
        }
        Some(self.buf.drain(..n).collect())
    }

    /// The head of the next response.
    pub async fn head(&mut self) -> Option<(u16, Vec<(String, String)>)> {
        let status_line = self.line().await?;
        let status = status_line.get(9..12)?.parse().ok()?;
        let mut headers = Vec::new();
        loop {
            let l = self.line().await?;
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':')?;
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        Some((status, headers))
    }

    /// One chunk of a chunked body: `Some(empty)` for the last chunk, `None` if the connection
    /// ended first.
    pub async fn chunk(&mut self) -> Option<Vec<u8>> {
        let size = usize::from_str_radix(self.line().await?.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            self.line().await?;
            return Some(Vec::new());
        }
        let data = self.exact(size).await?;
        self.line().await?;
        Some(data)
    }

    /// The next whole response.
    pub async fn response(&mut self) -> Option<Response> {
        let (status, headers) = self.head().await?;
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        let mut chunked_end = false;
        if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                match self.chunk().await {
                    Some(c) if c.is_empty() => {
                        chunked_end = true;
                        break;
                    }
                    Some(c) => body.extend_from_slice(&c),
                    None => break,
                }
            }
        } else if let Some(n) = get("content-length").and_then(|v| v.parse().ok()) {
            body = self.exact(n).await?;
        }
        Some(Response {
            status,
            headers,
            body,
            chunked_end,
        })
    }

    /// POSTs one JSON-RPC message and reads the answer.
    pub async fn post(&mut self, session: Option<&str>, body: &str) -> Response {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        self.send("POST", &headers, body.as_bytes()).await;
        self.response().await.expect("a response")
    }
}

/// `initialize` and `notifications/initialized` on `client`; the session id.
pub async fn open_session(client: &mut Client, capabilities: &str) -> String {
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{capabilities},"clientInfo":{{"name":"test","version":"1"}}}}}}"#
    );
    let r = client.post(None, &init).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let session = r.header("Mcp-Session-Id").expect("a session").to_owned();
    assert!(r.text().contains("\"protocolVersion\":\"2025-11-25\""));
    let r = client
        .post(
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await;
    assert_eq!(r.status, 202);
    session
}

/// A field of /proc/self/status (the number before any unit): `VmRSS` in KiB, `Threads`.
pub fn proc_status(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("field")
}
