//! A Streamable HTTP client for the conformance suite's client scenarios, std only: one
//! `TcpStream` per HTTP request, a client `Connection` (handshake era, 2025-11-25), and the
//! `http::client` helpers for headers, JSON and SSE answers, 202/404/405, and resuming a
//! closed SSE stream with `Last-Event-ID` after the server's `retry`.
//!
//! Each HTTP exchange runs on its own thread and reports to one main loop that owns the
//! connection, so a POST's stream can stay open while the answer to a server request that
//! arrived on the GET stream goes out.
//!
//! Usage: `http_client URL` with `MCP_CONFORMANCE_SCENARIO` naming the scenario (`initialize`,
//! `tools_call`, `elicitation-sep1034-client-defaults`, `sse-retry`; anything else lists the
//! tools and stops). Exits 0 once the scenario's work is done.

// The example is the IO layer: it reads the real clock and passes it to the engine as data.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, OwnedEvent, RequestId, StreamId};
use mcpwire::http::client::{ResponseKind, StreamReader, classify, request_headers};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::ProtocolVersion;
use serde_json::{Value, json};

struct Url {
    host: String,
    port: u16,
    path: String,
}

fn parse_url(url: &str) -> Url {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().expect("a port")),
        None => (authority, 80),
    };
    Url {
        host: host.trim_matches(['[', ']']).to_owned(),
        port,
        path: path.to_owned(),
    }
}

/// An HTTP response whose body is read as it arrives.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    /// Bytes left: of the body (Content-Length) or of the current chunk.
    left: Option<usize>,
    done: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The next piece of the body; empty at its end.
    fn next_piece(&mut self) -> Vec<u8> {
        if self.done {
            return Vec::new();
        }
        let mut buf = vec![0u8; 16 * 1024];
        if self.chunked {
            if self.left.is_none_or(|n| n == 0) {
                if self.left == Some(0) {
                    let mut crlf = String::new();
                    let _ = self.reader.read_line(&mut crlf);
                }
                let mut line = String::new();
                if self.reader.read_line(&mut line).unwrap_or(0) == 0 {
                    self.done = true;
                    return Vec::new();
                }
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .unwrap_or(0);
                if size == 0 {
                    self.done = true;
                    return Vec::new();
                }
                self.left = Some(size);
            }
            let want = self.left.unwrap_or(0).min(buf.len());
            match self.reader.read(&mut buf[..want]) {
                Ok(0) | Err(_) => {
                    self.done = true;
                    Vec::new()
                }
                Ok(n) => {
                    self.left = self.left.map(|l| l - n);
                    buf.truncate(n);
                    buf
                }
            }
        } else {
            let want = self.left.map_or(buf.len(), |l| l.min(buf.len()));
            if want == 0 {
                self.done = true;
                return Vec::new();
            }
            match self.reader.read(&mut buf[..want]) {
                Ok(0) | Err(_) => {
                    self.done = true;
                    Vec::new()
                }
                Ok(n) => {
                    self.left = self.left.map(|l| l - n);
                    buf.truncate(n);
                    buf
                }
            }
        }
    }

    fn body(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        loop {
            let piece = self.next_piece();
            if piece.is_empty() {
                return all;
            }
            all.extend_from_slice(&piece);
        }
    }
}

fn http(
    url: &Url,
    method: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<Response> {
    let addrs: Vec<_> = (url.host.as_str(), url.port).to_socket_addrs()?.collect();
    // `localhost` may resolve to ::1 first while the harness listens on IPv4 only (or the
    // reverse): try each address.
    let mut last = None;
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, Duration::from_secs(5)) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut stream = match stream {
        Some(s) => s,
        None => return Err(last.unwrap_or_else(|| std::io::Error::other("no address"))),
    };
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!(
        "{method} {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
        url.path,
        url.host,
        url.port,
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;
    stream.write_all(body)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut r = Response {
        status,
        headers,
        reader,
        chunked: false,
        left: None,
        done: false,
    };
    r.chunked = r
        .header("Transfer-Encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if !r.chunked {
        r.left = r.header("Content-Length").and_then(|v| v.parse().ok());
    }
    if method == "HEAD" || status == 204 || status == 304 {
        r.done = true;
    }
    Ok(r)
}

/// What the scenario does next.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Starting,
    /// Handshake done; waiting for the server to answer the session's GET stream before the
    /// first request, so that stream is in place before any POST can need it.
    OpeningGet,
    Listing(RequestId),
    Calling(RequestId),
    Done,
}

/// What a reader thread reports about one HTTP exchange.
enum Msg {
    Head {
        stream: u64,
        status: u16,
        content_type: Option<String>,
        session: Option<String>,
    },
    Piece {
        stream: u64,
        bytes: Vec<u8>,
    },
    End {
        stream: u64,
    },
}

/// One HTTP exchange in flight, as the main loop sees it.
struct Exchange {
    /// The id of the request the POST carried (its answer ends the stream's purpose).
    awaited: Option<Value>,
    answered: bool,
    was_get: bool,
    had_session: bool,
    kind: Option<ResponseKind>,
    body: Vec<u8>,
    reader: StreamReader,
    resumes: u32,
}

/// Runs one HTTP exchange on its own thread, reporting to the main loop.
fn spawn(
    url: &Url,
    tx: &Sender<Msg>,
    stream: u64,
    method: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
) {
    let url = Url {
        host: url.host.clone(),
        port: url.port,
        path: url.path.clone(),
    };
    let tx = tx.clone();
    std::thread::spawn(move || {
        let mut resp = match http(&url, method, &headers, &body) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("http_client: {method} failed: {e}");
                let _ = tx.send(Msg::End { stream });
                return;
            }
        };
        let head = Msg::Head {
            stream,
            status: resp.status,
            content_type: resp.header("Content-Type").map(str::to_owned),
            session: resp.header("Mcp-Session-Id").map(str::to_owned),
        };
        if tx.send(head).is_err() {
            return;
        }
        loop {
            let bytes = resp.next_piece();
            if bytes.is_empty() {
                let _ = tx.send(Msg::End { stream });
                return;
            }
            if tx.send(Msg::Piece { stream, bytes }).is_err() {
                return;
            }
        }
    });
}

struct Client {
    url: Url,
    conn: Connection,
    session: Option<String>,
    scenario: String,
    phase: Phase,
    start: Instant,
    tx: Sender<Msg>,
    exchanges: HashMap<u64, Exchange>,
    next_stream: u64,
    /// Open the session's GET stream once the handshake is done.
    want_get: bool,
    /// The exchange carrying the session's GET stream, once opened.
    get_stream: Option<u64>,
    /// (when, stream to resume).
    resumes: Vec<(Instant, u64)>,
    /// Why the session failed, if it did: the exit status says so.
    failure: Option<String>,
}

impl Client {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    fn exchange(&mut self, awaited: Option<Value>, was_get: bool) -> u64 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.exchanges.insert(
            id,
            Exchange {
                awaited,
                answered: false,
                was_get,
                had_session: self.session.is_some(),
                kind: None,
                body: Vec::new(),
                reader: StreamReader::new(),
                resumes: 0,
            },
        );
        id
    }

    /// Handles events and sends whatever the connection wants to send, until quiet.
    fn pump(&mut self) {
        loop {
            while let Some(e) = self.conn.poll_event() {
                let e = e.to_owned_event();
                self.on_event(e);
            }
            let mut frames = Vec::new();
            while let Some(t) = self.conn.poll_transmit() {
                frames.extend(
                    t.bytes
                        .split(|&b| b == b'\n')
                        .filter(|f| !f.is_empty())
                        .map(|f| f.to_vec()),
                );
                let n = t.bytes.len();
                self.conn.consume_transmit(n);
            }
            if frames.is_empty() {
                break;
            }
            for f in frames {
                let awaited = serde_json::from_slice::<Value>(&f)
                    .ok()
                    .filter(|v| v.get("method").is_some())
                    .and_then(|v| v.get("id").cloned());
                let headers =
                    request_headers(&f, self.conn.protocol_version(), self.session.as_deref());
                let id = self.exchange(awaited, false);
                spawn(&self.url, &self.tx, id, "POST", headers, f);
            }
        }
        if self.want_get && self.session.is_some() {
            self.want_get = false;
            let mut headers = vec![("Accept", "text/event-stream".to_owned())];
            if let Some(v) = self.conn.protocol_version() {
                headers.push(("MCP-Protocol-Version", v.as_str().to_owned()));
            }
            if let Some(s) = &self.session {
                headers.push(("Mcp-Session-Id", s.clone()));
            }
            let id = self.exchange(None, true);
            self.get_stream = Some(id);
            spawn(&self.url, &self.tx, id, "GET", headers, Vec::new());
        }
    }

    /// The scenario's first request, `tools/list`.
    fn start_listing(&mut self) {
        let now = self.now();
        if let Ok(r) = self.conn.request(now, "tools/list", None) {
            self.phase = Phase::Listing(r);
        }
    }

    /// The GET stream got its answer (or failed): the scenario's requests may start.
    fn get_settled(&mut self, stream: u64) {
        if self.phase == Phase::OpeningGet && self.get_stream == Some(stream) {
            self.start_listing();
        }
    }

    fn feed(&mut self, message: &[u8]) {
        let now = self.now();
        self.conn.handle_frame(now, StreamId::MAIN, message);
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Head {
                stream,
                status,
                content_type,
                session,
            } => {
                let Some(x) = self.exchanges.get_mut(&stream) else {
                    return;
                };
                let kind = classify(status, content_type.as_deref(), x.had_session, x.was_get);
                x.kind = Some(kind);
                if let Some(s) = session
                    && !x.was_get
                {
                    self.session = Some(s);
                }
                if kind == ResponseKind::SessionExpired {
                    eprintln!("http_client: the session expired (404)");
                    self.session = None;
                }
                self.get_settled(stream);
            }
            Msg::Piece { stream, bytes } => {
                let Some(x) = self.exchanges.get_mut(&stream) else {
                    return;
                };
                if x.kind == Some(ResponseKind::EventStream) {
                    let mut messages = Vec::new();
                    x.reader.feed(&bytes, |m| messages.push(m.to_vec()));
                    for m in &messages {
                        if let Some(id) = &x.awaited
                            && serde_json::from_slice::<Value>(m)
                                .is_ok_and(|v| v.get("id") == Some(id) && v.get("method").is_none())
                        {
                            x.answered = true;
                        }
                    }
                    for m in messages {
                        self.feed(&m);
                    }
                } else {
                    x.body.extend_from_slice(&bytes);
                }
            }
            Msg::End { stream } => {
                self.get_settled(stream);
                let Some(x) = self.exchanges.get(&stream) else {
                    return;
                };
                match x.kind {
                    Some(ResponseKind::Json) => {
                        let body = x.body.clone();
                        self.exchanges.remove(&stream);
                        self.feed(&body);
                    }
                    // Closed before the answer: wait as the server asked (`retry`), then resume
                    // with a GET carrying Last-Event-ID.
                    Some(ResponseKind::EventStream)
                        if x.awaited.is_some()
                            && !x.answered
                            && x.reader.last_event_id().is_some()
                            && x.resumes < 5 =>
                    {
                        let wait = x.reader.retry().unwrap_or(Duration::from_secs(1));
                        self.resumes.push((Instant::now() + wait, stream));
                    }
                    Some(ResponseKind::Failed(status)) => {
                        let body = x.body.clone();
                        self.exchanges.remove(&stream);
                        eprintln!(
                            "http_client: HTTP {status}: {}",
                            String::from_utf8_lossy(&body)
                        );
                        if serde_json::from_slice::<Value>(&body)
                            .is_ok_and(|v| v.get("id").is_some_and(|i| !i.is_null()))
                        {
                            self.feed(&body);
                        }
                    }
                    _ => {
                        self.exchanges.remove(&stream);
                    }
                }
            }
        }
    }

    fn resume_due(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.resumes.drain(..).partition(|(at, _)| *at <= now);
        self.resumes = later;
        for (_, stream) in due {
            let Some(x) = self.exchanges.get_mut(&stream) else {
                continue;
            };
            x.resumes += 1;
            x.kind = None;
            x.reader.reconnected();
            x.was_get = true;
            let headers = x
                .reader
                .resume_headers(self.conn.protocol_version(), self.session.as_deref());
            spawn(&self.url, &self.tx, stream, "GET", headers, Vec::new());
        }
    }

    fn failed(&mut self, r: RequestId, why: &str) {
        eprintln!("http_client: request {r:?} failed: {why}");
        if self.phase == Phase::Listing(r) || self.phase == Phase::Calling(r) {
            self.failure = Some(format!("request {r:?} failed: {why}"));
            self.phase = Phase::Done;
        }
    }

    fn on_event(&mut self, e: OwnedEvent) {
        let now = self.now();
        match e {
            OwnedEvent::Ready { .. } => {
                self.want_get = true;
                if self.scenario == "initialize" {
                    self.phase = Phase::Done;
                } else if self.session.is_some() {
                    // The sse-retry server answers a pending tool call on whichever GET
                    // arrives next; a GET racing the call would take the answer before the
                    // call's own stream closes, and the resumption would never be exercised.
                    self.phase = Phase::OpeningGet;
                } else {
                    self.start_listing();
                }
            }
            OwnedEvent::Response { request: r, result } if self.phase == Phase::Listing(r) => {
                let result = parse(Some(&result));
                let tools = result["tools"].as_array().cloned().unwrap_or_default();
                let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
                let (name, args) = match self.scenario.as_str() {
                    "tools_call" => ("add_numbers", json!({"a":5,"b":3})),
                    _ => match names.first() {
                        Some(n) if self.scenario != "list" => (*n, json!({})),
                        _ => {
                            self.phase = Phase::Done;
                            return;
                        }
                    },
                };
                let params = json!({"name":name,"arguments":args}).to_string();
                if let Ok(r) = self.conn.request(
                    now,
                    "tools/call",
                    Some(RawJson::new(&params).expect("JSON")),
                ) {
                    self.phase = Phase::Calling(r);
                }
            }
            OwnedEvent::Response { request: r, result } if self.phase == Phase::Calling(r) => {
                eprintln!("http_client: tool result {result}");
                if parse(Some(&result))["isError"] == json!(true) {
                    self.failure = Some(format!("the tool reported an error: {result}"));
                }
                self.phase = Phase::Done;
            }
            OwnedEvent::Error {
                request: r,
                message: why,
                ..
            } => self.failed(r, &why),
            OwnedEvent::TimedOut { request: r } => self.failed(r, "timed out"),
            OwnedEvent::Abandoned { request: r } => self.failed(r, "abandoned"),
            OwnedEvent::Closed { reason } => eprintln!("http_client: closed: {reason:?}"),
            OwnedEvent::Request { id, method, params } => {
                let params = parse(params.as_deref());
                let answer = match method.as_str() {
                    "elicitation/create" => Ok(
                        json!({"action":"accept","content":defaults(&params["requestedSchema"])}),
                    ),
                    "roots/list" => Ok(json!({"roots":[]})),
                    "ping" => Ok(json!({})),
                    _ => Err(()),
                };
                match answer {
                    Ok(v) => {
                        let text = v.to_string();
                        let _ = self
                            .conn
                            .respond(id.as_id(), RawJson::new(&text).expect("JSON"));
                    }
                    Err(()) => {
                        let _ =
                            self.conn
                                .respond_error(id.as_id(), -32601, "Method not found", None);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Accepting a form: every property with a `default` gets it (SEP-1034).
fn defaults(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (k, p) in schema["properties"].as_object().into_iter().flatten() {
        if let Some(d) = p.get("default") {
            out.insert(k.clone(), d.clone());
        }
    }
    Value::Object(out)
}

/// A JSON text from an event, parsed (`null` when absent or unparsable).
fn parse(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

fn main() {
    let url = std::env::args().nth(1).expect("usage: http_client URL");
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_else(|_| "list".into());
    let start = Instant::now();
    let mut config = Config::client("mcpwire-conformance-client", env!("CARGO_PKG_VERSION"))
        .with_capabilities(r#"{"elicitation":{}}"#)
        .expect("valid capabilities");
    config.versions = ProtocolVersion::LEGACY.to_vec();
    let conn = Connection::new(config, Timestamp::ZERO).expect("valid config");
    let (tx, rx) = channel();
    let mut client = Client {
        url: parse_url(&url),
        conn,
        session: None,
        scenario,
        phase: Phase::Starting,
        start,
        tx,
        exchanges: HashMap::new(),
        next_stream: 1,
        want_get: false,
        get_stream: None,
        resumes: Vec::new(),
        failure: None,
    };
    let deadline = start + Duration::from_secs(25);
    client.pump();
    while client.phase != Phase::Done && Instant::now() < deadline {
        let wake = client
            .resumes
            .iter()
            .map(|(at, _)| *at)
            .min()
            .unwrap_or(Instant::now() + Duration::from_millis(100));
        let wait = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        match rx.recv_timeout(wait) {
            Ok(msg) => client.on_msg(msg),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        client.resume_due();
        let now = client.now();
        client.conn.handle_timeout(now);
        client.pump();
    }
    if client.phase != Phase::Done {
        eprintln!("http_client: stopped in {:?}", client.phase);
    }
    // End the session (a server may answer 405).
    if let Some(sid) = client.session.clone() {
        let mut h = vec![("Mcp-Session-Id", sid)];
        if let Some(v) = client.conn.protocol_version() {
            h.push(("MCP-Protocol-Version", v.as_str().to_owned()));
        }
        let _ = http(&client.url, "DELETE", &h, b"").map(|mut r| r.body());
    }
    // Any failure, of the session or of the tool, is a failed run.
    if let Some(why) = &client.failure {
        eprintln!("http_client: FAILED: {why}");
    }
    let ok = client.phase == Phase::Done && client.failure.is_none();
    std::process::exit(if ok { 0 } else { 1 });
}
