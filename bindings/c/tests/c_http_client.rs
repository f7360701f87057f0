//! The C HTTP client example (bindings/c/example_http_client.c, libcurl's multi interface on
//! `mcpw_http_client`) against real Streamable HTTP servers, as a process:
//!
//! - the reference "everything" server (`streamableHttp`): the 2025-11-25 session, SSE
//!   progress, the DELETE that ends it, under ASan+UBSan;
//! - the Python SDK server (tests/peers/py_http_server.py) in both eras: a 2025-11-25 session
//!   and stateless 2026-07-28 requests, with SSE progress in each, under ASan+UBSan;
//! - a session under valgrind (no leaks, no errors);
//! - a scripted server that closes the tool call's SSE stream before the answer: the client
//!   resumes it with `GET` and `Last-Event-ID` after the server's `retry`;
//! - failures, each ending at once with a clear message and a non-zero status: nothing
//!   listening, a server answering 500, a server that never answers (`--timeout`);
//! - SIGTERM mid-call: the call cancelled, the session ended with DELETE, a clear failure
//!   (without a session, the client waits for the cancellation's answer before it exits);
//!   a DELETE the server never answers ends the run once the engine gives up on it.
//!
//! The client is linked against the static library this `cargo test` run built (see
//! support/mod.rs) and libcurl. Each server runs on a free loopback port; the server processes
//! are killed when their guard drops, also when an assertion fails.
// This is the IO layer of the tests: it reads the real clock to bound the runs.
#![allow(clippy::disallowed_methods)]

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;
use common::free_port;
use support::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::stdio::{node_modules, python_site};

program!(
    client_asan,
    "bindings/c/example_http_client.c",
    "example_http_client_asan",
    Lang::C,
    true,
    &["-lcurl"]
);
program!(
    client_plain,
    "bindings/c/example_http_client.c",
    "example_http_client",
    Lang::C,
    false,
    &["-lcurl"]
);

// ---- Servers on free ports, killed on drop ----------------------------------------------------

/// A server process. Dropping it kills it, so a failed assertion never leaves one behind.
struct ServerGuard {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ServerGuard {
    /// Starts `cmd` (which must listen on `port`) with its output in a log file, and waits
    /// until the port accepts connections.
    fn start(mut cmd: Command, port: u16, name: &str) -> ServerGuard {
        let log = out_dir().join(format!("{name}-{port}.log"));
        let file = std::fs::File::create(&log).expect("create the server log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let mut server = ServerGuard { child, port, log };
        server.wait_until_listening(Duration::from_secs(30));
        server
    }

    fn wait_until_listening(&mut self, limit: Duration) {
        let start = Instant::now();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the server exited early ({status}):\n{}", self.log_text());
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the server did not listen on port {} within {limit:?}:\n{}",
            self.port,
            self.log_text()
        );
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log once `done` holds for it, or as it is after 10 s. A server logs a request after
    /// it has answered it, so the client can be gone before the line is written.
    fn log_when(&self, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let log = self.log_text();
            if done(&log) || start.elapsed() > Duration::from_secs(10) {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `@modelcontextprotocol/server-everything` in `streamableHttp` mode.
fn start_everything() -> ServerGuard {
    let port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(node_modules().join("@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    ServerGuard::start(cmd, port, "server-everything")
}

/// The Python SDK's Streamable HTTP server (tests/peers/py_http_server.py: tools `echo(text)`
/// and `count(steps)`, which reports progress).
fn start_python() -> ServerGuard {
    let port = free_port();
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/peers/py_http_server.py"))
        .arg(port.to_string())
        .env("PYTHONPATH", python_site());
    ServerGuard::start(cmd, port, "py-http-server")
}

// ---- Running the client -------------------------------------------------------------------------

/// server-everything's echo (`message`, answered `Echo: …`) and progress tool.
const EVERYTHING_ARGS: &[&str] = &[
    "--echo-arg",
    "message",
    "--echo-expect",
    "Echo: hello from C",
    "--progress-tool",
    "trigger-long-running-operation",
    "--progress-args",
    r#"{"duration":1,"steps":3}"#,
];

/// The Python server's echo (`text`, answered unchanged: the client's defaults) and progress
/// tool.
const PYTHON_ARGS: &[&str] = &[
    "--progress-tool",
    "count",
    "--progress-args",
    r#"{"steps":3}"#,
];

fn client_command(program: &std::path::Path, args: &[&str], url: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args).arg(url);
    cmd
}

/// Runs the sanitized client; any sanitizer report fails the test.
fn run_asan(args: &[&str], url: &str) -> (Output, String) {
    let out = run_sanitized(client_command(client_asan(), args, url));
    let all = text(&out);
    assert!(!all.contains("Sanitizer"), "{all}");
    (out, all)
}

/// The whole session happened, in order, and ended on `version`.
fn assert_session(out: &Output, all: &str, echo: &str, version: &str, deleted: bool) {
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let expected_start = [
        format!("connect: protocolVersion={version} server="),
        "tools: ".to_owned(),
        format!("echo: \"{echo}\""),
        "progress: 3 notifications, then the result".to_owned(),
        if deleted {
            "session: ended with DELETE (HTTP 200)".to_owned()
        } else {
            "session: none to end (the server keeps no session)".to_owned()
        },
        format!("C_CLIENT_OK {version}"),
    ];
    assert_eq!(lines.len(), expected_start.len(), "{all}");
    for (line, start) in lines.iter().zip(&expected_start) {
        assert!(
            line.starts_with(start.as_str()),
            "{line:?} should start with {start:?}:\n{all}"
        );
    }
    assert!(!all.contains("C_CLIENT_FAIL"), "{all}");
}

// ---- Sessions -----------------------------------------------------------------------------------

#[test]
fn the_c_http_client_completes_a_session_with_server_everything() {
    let server = start_everything();
    // auto: server-everything refuses the server/discover probe (HTTP 400), so the client
    // falls back to initialize; legacy goes there directly. Both end the session with DELETE.
    for era in ["auto", "legacy"] {
        let mut args = vec!["--era", era, "--timeout", "60"];
        args.extend_from_slice(EVERYTHING_ARGS);
        let (out, all) = run_asan(&args, &server.url());
        assert_session(&out, &all, "Echo: hello from C", "2025-11-25", true);
        assert!(
            all.contains("server={\"name\":\"mcp-servers/everything\""),
            "{all}"
        );
    }
    let log = server.log_when(|l| l.matches("Received session termination request").count() >= 2);
    assert_eq!(
        log.matches("Received session termination request").count(),
        2,
        "each session ends with a DELETE:\n{log}"
    );
}

#[test]
fn the_c_http_client_completes_a_session_with_the_python_sdk_server_in_each_era() {
    let server = start_python();
    let runs: [(&str, &str, bool); 3] = [
        // The handshake era: a session (Mcp-Session-Id), ended with DELETE.
        ("legacy", "2025-11-25", true),
        // The Python SDK 2.3 serves 2026-07-28: the auto probe succeeds, and every request is
        // a stateless POST.
        ("auto", "2026-07-28", false),
        ("modern", "2026-07-28", false),
    ];
    for (era, version, deleted) in runs {
        let mut args = vec!["--era", era, "--timeout", "60"];
        args.extend_from_slice(PYTHON_ARGS);
        let (out, all) = run_asan(&args, &server.url());
        assert_session(&out, &all, "hello from C", version, deleted);
        assert!(all.contains("server={\"name\":\"py-peer-server\""), "{all}");
    }
    let log = server.log_when(|l| l.contains("\"DELETE /mcp HTTP/1.1\" 200"));
    assert!(log.contains("\"DELETE /mcp HTTP/1.1\" 200"), "{log}");
}

#[test]
fn the_c_http_client_completes_a_session_under_valgrind() {
    // The most varied path: the refused probe, the fallback, an SSE stream, the DELETE.
    let server = start_everything();
    let mut cmd = valgrind();
    cmd.arg(client_plain()).args(["--timeout", "120"]);
    cmd.args(EVERYTHING_ARGS).arg(server.url());
    let out = cmd
        .output()
        .expect("run valgrind (apt-get install valgrind)");
    let all = text(&out);
    assert_session(&out, &all, "Echo: hello from C", "2025-11-25", true);
}

// ---- Failures -----------------------------------------------------------------------------------

/// Runs the client and checks it failed, quickly (within `limit`), with exit status 1 and a
/// `C_CLIENT_FAIL <step>: …` line on stderr containing each of `causes`.
fn assert_fails_quickly(args: &[&str], url: &str, step: &str, causes: &[&str], limit: Duration) {
    let start = Instant::now();
    let (out, all) = run_asan(args, url);
    let elapsed = start.elapsed();
    assert!(!out.status.success(), "{all}");
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(elapsed < limit, "took {elapsed:?}:\n{all}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fail = stderr
        .lines()
        .find(|l| l.starts_with("C_CLIENT_FAIL "))
        .unwrap_or_else(|| panic!("no C_CLIENT_FAIL line:\n{all}"));
    assert!(
        fail.starts_with(&format!("C_CLIENT_FAIL {step}: ")),
        "{fail}"
    );
    for cause in causes {
        assert!(fail.contains(cause), "{fail:?} should name {cause:?}");
    }
    assert!(!all.contains("C_CLIENT_OK"), "{all}");
}

#[test]
fn the_c_http_client_fails_at_once_when_nothing_listens() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    // The handshake cannot be carried (MCPW_CLOSE_TRANSPORT_FAILED); the message also says
    // which HTTP request failed and curl's reason.
    for (era, request) in [
        ("auto", "POST initialize failed"), // the probe failed, then the fallback
        ("legacy", "POST initialize failed"),
        ("modern", "POST server/discover failed"),
    ] {
        assert_fails_quickly(
            &["--era", era],
            &url,
            "connect",
            &[
                "the connection closed: HTTP could not carry the handshake: the connection failed",
                request,
                "Couldn't connect to server",
            ],
            Duration::from_secs(10),
        );
    }
}

/// One request as the scripted server saw it.
#[derive(Clone, Debug)]
struct Request {
    at: Instant,
    method: String,
    headers: Vec<(String, String)>,
    /// The JSON-RPC message of a POST (`null` otherwise).
    message: serde_json::Value,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A scripted answer: status, headers, body.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Reply {
    fn new(status: u16, content_type: Option<&str>, body: String) -> Reply {
        let mut headers = vec![("Mcp-Session-Id", "fake-session".to_owned())];
        if let Some(t) = content_type {
            headers.push(("Content-Type", t.to_owned()));
        }
        Reply {
            status,
            headers,
            body,
        }
    }
    fn json(value: serde_json::Value) -> Reply {
        Reply::new(200, Some("application/json"), value.to_string())
    }
    fn sse(events: &str) -> Reply {
        Reply::new(200, Some("text/event-stream"), events.to_owned())
    }
    fn accepted() -> Reply {
        Reply::new(202, None, String::new())
    }
    /// No answer at all: the connection stays open and silent.
    fn hang() -> Reply {
        Reply::new(0, None, String::new())
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// A scripted HTTP/1.1 server on a free loopback port: a thread per connection, keep-alive,
/// every answer with a Content-Length. It records every request it gets.
struct FakeServer {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Request>>>,
}

impl FakeServer {
    fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let script: std::sync::Arc<Script> = std::sync::Arc::new(script);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (script, log) = (script.clone(), log.clone());
                std::thread::spawn(move || serve_connection(stream, &*script, &log));
            }
        });
        FakeServer { port, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve_connection(stream: TcpStream, script: &Script, log: &std::sync::Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let mut request = Request {
            at: Instant::now(),
            method: request_line.split(' ').next().unwrap_or("").to_owned(),
            headers,
            message: serde_json::Value::Null,
        };
        let length: usize = request
            .header("Content-Length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        request.message = serde_json::from_slice(&body).unwrap_or_default();
        log.lock().unwrap().push(request.clone());
        // A DELETE gets 200 unless the script hangs it.
        let reply = match script(&request) {
            r if r.status == 0 => {
                std::thread::sleep(Duration::from_secs(120));
                return;
            }
            _ if request.method == "DELETE" => Reply::new(200, None, String::new()),
            r => r,
        };
        let mut response = format!(
            "HTTP/1.1 {} Scripted\r\nContent-Length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (name, value) in reply.headers {
            response.push_str(&format!("{name}: {value}\r\n"));
        }
        response.push_str("\r\n");
        response.push_str(&reply.body);
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// The answer to `initialize` of a handshake-era server with tools.
fn initialize_result(id: &serde_json::Value) -> Reply {
    Reply::json(serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"}
        }
    }))
}

/// A handshake-era server whose tools fail: it answers the handshake, then HTTP 500 without a
/// JSON-RPC answer to every request.
fn handshake_then_500(request: &Request) -> Reply {
    let m = &request.message;
    match (m["method"].as_str(), m.get("id")) {
        (Some("initialize"), Some(id)) => initialize_result(id),
        (_, None) => Reply::accepted(), // notifications
        _ => Reply::new(
            500,
            Some("text/plain"),
            "Internal Server Error: the tool backend is down".to_owned(),
        ),
    }
}

#[test]
fn the_c_http_client_fails_at_once_when_the_server_answers_500() {
    let server = FakeServer::start(handshake_then_500);
    // The handshake works; tools/list gets a 500, and the client says so at once.
    assert_fails_quickly(
        &["--era", "legacy"],
        &server.url(),
        "tools",
        &[
            // MCPW_EVENT_FAILED for tools/list, with the status, the request and the body.
            "failed: HTTP status 500 without an answer",
            "POST tools/list was answered with HTTP 500: Internal Server Error: the tool backend is down",
        ],
        Duration::from_secs(10),
    );
    // auto: the probe gets the 500 too (a refusal, so the client falls back to initialize);
    // then the same failure.
    assert_fails_quickly(
        &[],
        &server.url(),
        "tools",
        &[
            "failed: HTTP status 500 without an answer",
            "POST tools/list was answered with HTTP 500",
        ],
        Duration::from_secs(10),
    );
}

/// A handshake-era server whose echo needs the user at a URL first: the call is answered with
/// -32042 (URL elicitation required).
fn echo_needs_a_url(request: &Request) -> Reply {
    let m = &request.message;
    match (m["method"].as_str(), m.get("id")) {
        (Some("initialize"), Some(id)) => initialize_result(id),
        (_, None) => Reply::accepted(),
        (Some("tools/list"), Some(id)) => Reply::json(serde_json::json!({
            "jsonrpc": "2.0", "id": id,
            "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        })),
        (_, Some(id)) => Reply::json(serde_json::json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32042, "message": "Sign in first", "data": {"elicitations": [{
                "mode": "url", "elicitationId": "e1",
                "url": "https://example.com/sign-in", "message": "Sign in"
            }]}}
        })),
    }
}

/// The call's -32042 ends the request: the client fails at once, and says why. It ignored
/// the event and waited out its timeout ("no outcome within 30 s"). (This client declared no
/// URL elicitation, so the engine hands it the error as it came, its URL in its data.)
#[test]
fn the_c_http_client_fails_at_once_when_the_call_needs_a_url_elicitation() {
    let server = FakeServer::start(echo_needs_a_url);
    assert_fails_quickly(
        &["--era", "legacy", "--timeout", "20"],
        &server.url(),
        "echo",
        &["error -32042", "https://example.com/sign-in"],
        Duration::from_secs(10),
    );
}

#[test]
fn the_c_http_client_gives_up_after_its_timeout_when_the_server_never_answers() {
    // Accepts connections and reads, but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let url = format!("http://127.0.0.1:{port}/mcp");
    // legacy: initialize times out (the engine's request timeout is the run's limit);
    // auto: the run's limit comes before the server/discover probe's 5 s timeout.
    for (era, cause) in [
        ("legacy", "no answer to the handshake within 2 s"),
        ("auto", "no outcome within 2 s"),
    ] {
        let start = Instant::now();
        assert_fails_quickly(
            &["--era", era, "--timeout", "2"],
            &url,
            "connect",
            &[cause],
            Duration::from_secs(10),
        );
        assert!(start.elapsed() >= Duration::from_secs(2));
    }
}

/// A handshake-era server that closes the echo call's SSE stream after a priming event (an
/// event id and `retry: 300`) and before the answer, which it gives on the GET that resumes
/// the stream with that `Last-Event-ID` (the conformance suite's sse-retry scenario). It
/// refuses the 2026-07-28 probe promptly with -32601, as a legacy server should.
fn closes_the_stream_before_the_answer() -> impl Fn(&Request) -> Reply + Send + Sync {
    let call_id = std::sync::Mutex::new(None::<serde_json::Value>);
    move |request: &Request| {
        let m = &request.message;
        if request.method == "GET" {
            let id = call_id.lock().unwrap().clone();
            return match (request.header("Last-Event-ID"), id) {
                (Some("call-1"), Some(id)) => {
                    let answer = serde_json::json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "result": {"content": [{"type": "text", "text": "hello from C"}]}
                    });
                    Reply::sse(&format!("id: call-2\ndata: {answer}\n\n"))
                }
                _ => Reply::new(400, Some("text/plain"), "unexpected GET".to_owned()),
            };
        }
        let Some(id) = m.get("id") else {
            return Reply::accepted(); // notifications
        };
        match m["method"].as_str() {
            Some("server/discover") => Reply::json(serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32601, "message": "Method not found"}
            })),
            Some("initialize") => initialize_result(id),
            Some("tools/list") => Reply::json(serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
            })),
            Some("tools/call") => {
                *call_id.lock().unwrap() = Some(id.clone());
                Reply::sse("id: call-1\nretry: 300\ndata: \n\n")
            }
            _ => Reply::new(500, Some("text/plain"), "unexpected request".to_owned()),
        }
    }
}

/// A handshake-era server that serves the example's session and never answers its DELETE.
fn never_answers_the_delete(request: &Request) -> Reply {
    let m = &request.message;
    if request.method == "DELETE" {
        return Reply::hang();
    }
    let Some(id) = m.get("id") else {
        return Reply::accepted();
    };
    let result = match m["method"].as_str() {
        Some("initialize") => return initialize_result(id),
        Some("tools/list") => {
            serde_json::json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
        }
        Some("tools/call") => {
            serde_json::json!({"content": [{"type": "text", "text": "hello from C"}]})
        }
        _ => {
            return Reply::json(serde_json::json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}
            }));
        }
    };
    Reply::json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// `never_answers_the_delete`, but the DELETE gets 200, and the echo call's stream carries a
/// request of the server's own right after the answer.
fn asks_after_the_last_answer(request: &Request) -> Reply {
    if request.method == "DELETE" {
        return Reply::accepted();
    }
    if request.message["method"] == "tools/call" {
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": request.message["id"],
            "result": {"content": [{"type": "text", "text": "hello from C"}]}});
        let ask = serde_json::json!({"jsonrpc": "2.0", "id": "s1", "method": "x/ask"});
        return Reply::sse(&format!("data: {answer}\n\ndata: {ask}\n\n"));
    }
    never_answers_the_delete(request)
}

#[test]
fn a_server_request_after_the_last_answer_does_not_fail_a_finished_session() {
    // The answer ends the session (its close finishes at once), and the request read with it
    // can no longer be answered: the refusal (closed) failed the run, with no DELETE.
    let server = FakeServer::start(asks_after_the_last_answer);
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "20"], &server.url());
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("session: ended with DELETE (HTTP 200)"),
        "{all}"
    );
}

/// `never_answers_the_delete`, but the echo call is answered `101 Switching Protocols` (and
/// the connection then stays open and silent).
fn switches_protocols_on_the_call(request: &Request) -> Reply {
    if request.method == "DELETE" {
        return Reply::accepted();
    }
    if request.message["method"] == "tools/call" {
        return Reply::new(101, None, String::new());
    }
    never_answers_the_delete(request)
}

#[test]
fn a_101_to_the_call_fails_it_at_once_with_its_status() {
    // libcurl takes a 101 it did not ask for as the final head and reads a body until the
    // connection closes; the example skipped it as an interim head, and the call hung until
    // --timeout with no cause named.
    let server = FakeServer::start(switches_protocols_on_the_call);
    // (Built first: a build under load is no part of the time measured.)
    client_asan();
    let started = Instant::now();
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "20"], &server.url());
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("101"), "{all}");
    assert!(started.elapsed() < Duration::from_secs(10), "{all}");
}

/// `never_answers_the_delete`, but the echo call gets an error whose message holds control
/// characters (a terminal's escape sequence, a line break).
fn errs_with_control_characters(request: &Request) -> Reply {
    if request.method == "DELETE" {
        return Reply::accepted();
    }
    if request.message["method"] == "tools/call" {
        return Reply::json(
            serde_json::json!({"jsonrpc": "2.0", "id": request.message["id"],
            "error": {"code": -32603, "message": "bad\u{1b}]2;owned\u{7}\nC_CLIENT_OK fake"}}),
        );
    }
    never_answers_the_delete(request)
}

#[test]
fn the_server_text_in_a_failure_line_reaches_the_terminal_as_one_plain_line() {
    let server = FakeServer::start(errs_with_control_characters);
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "20"], &server.url());
    assert_eq!(out.status.code(), Some(1), "{all}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("C_CLIENT_FAIL"))
        .unwrap_or_else(|| panic!("{all}"));
    assert!(line.contains("bad ]2;owned  C_CLIENT_OK fake"), "{line:?}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
}

/// `never_answers_the_delete`, but the echo call's answer comes with 300 header lines.
fn answers_with_a_huge_head(request: &Request) -> Reply {
    let mut reply = never_answers_the_delete(request);
    if request.message["method"] == "tools/call" {
        for _ in 0..300 {
            reply.headers.push(("X-Filler", "y".to_owned()));
        }
    }
    reply
}

#[test]
fn a_response_head_of_too_many_lines_fails_its_exchange() {
    // libcurl before 8.3.0 bounds no head: the example kept every line it was sent.
    let server = FakeServer::start(answers_with_a_huge_head);
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "20"], &server.url());
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("the response head to POST tools/call is over 256 lines or 64 KiB"),
        "{all}"
    );
}

#[test]
fn a_refusal_for_now_that_went_through_is_not_quoted_in_a_later_failure() {
    // `tools/list` is refused once with 503 and Retry-After, then answered; the call then
    // never comes back. The failure quoted the 503, which explained nothing any more.
    let refused = std::sync::atomic::AtomicBool::new(false);
    let server = FakeServer::start(move |request: &Request| {
        if request.message["method"] == "tools/list"
            && !refused.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let mut reply = Reply::new(503, Some("text/plain"), "busy".to_owned());
            reply.headers.push(("Retry-After", "1".to_owned()));
            return reply;
        }
        never_answers_the_call(request)
    });
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "4"], &server.url());
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("tools: 1 tools listed"), "{all}");
    assert!(
        all.contains("C_CLIENT_FAIL echo: no outcome within 4 s"),
        "{all}"
    );
    assert!(!all.contains("503"), "{all}");
}

#[test]
fn the_c_http_client_ends_soon_after_the_engine_gives_up_on_the_delete() {
    // The engine lets a DELETE go after 10 s without a head; the example stayed in its last
    // phase until its overall --timeout (here 60 s), and then named no cause.
    let server = FakeServer::start(never_answers_the_delete);
    // (Built first: a build under load is no part of the time measured.)
    client_asan();
    let started = Instant::now();
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "60"], &server.url());
    let took = started.elapsed();
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("echo: \"hello from C\"\n"), "{all}");
    assert!(
        stdout.contains("session: the DELETE got no complete answer"),
        "{all}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}: {all}");
    let requests = server.requests();
    assert_eq!(requests.last().map(|r| r.method.as_str()), Some("DELETE"));
}

/// A handshake-era server whose echo tool never answers (its DELETE gets 200).
fn never_answers_the_call(request: &Request) -> Reply {
    if request.method == "DELETE" {
        return Reply::accepted();
    }
    if request.message["method"] == "tools/call" {
        return Reply::hang();
    }
    never_answers_the_delete(request)
}

/// A failure once the session is ready (here the call that never comes back, at the run's
/// --timeout) ends the session as a signal does before the client exits: the call is
/// cancelled and the session ended with DELETE, the first error still the one reported. It
/// exited at once and left both on the server until their own timeouts.
#[test]
fn a_failure_cancels_the_call_and_ends_the_session_before_the_exit() {
    let server = FakeServer::start(never_answers_the_call);
    // (Built first: a build under load is no part of the time measured.)
    client_asan();
    let started = Instant::now();
    let (out, all) = run_asan(&["--era", "legacy", "--timeout", "3"], &server.url());
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("C_CLIENT_FAIL echo: no outcome within 3 s"),
        "{all}"
    );
    assert!(started.elapsed() < Duration::from_secs(8), "{all}");
    let methods = methods_of(&server.requests());
    let call = methods.iter().position(|m| m == "tools/call").unwrap();
    let after = &methods[call + 1..];
    assert!(
        after.iter().any(|m| m == "notifications/cancelled"),
        "{methods:?} {all}"
    );
    assert_eq!(
        after.last().map(String::as_str),
        Some("DELETE"),
        "{methods:?} {all}"
    );
}

/// `never_answers_the_call`, with the answer to `initialize` two seconds late (later than
/// the grace the client gives requests in flight when it closes).
fn answers_initialize_late(request: &Request) -> Reply {
    if request.message["method"] == "initialize" {
        std::thread::sleep(Duration::from_secs(2));
    }
    never_answers_the_call(request)
}

#[test]
fn sigterm_ends_the_c_http_clients_session_before_it_exits() {
    // Killed mid-call, the client left its session on the server and said nothing (exit 143).
    // Now it cancels the call, ends the session with DELETE, and fails with a clear line.
    sigterm_when(never_answers_the_call, "tools/call", true, End::Deleted);
    // During the handshake: it waits for the session the answer brings, then ends it.
    sigterm_when(answers_initialize_late, "initialize", false, End::Deleted);
}

/// `never_answers_the_call` on a server that lost the session by the time the cancellation
/// came (it restarted, say): the cancellation gets 404.
fn forgets_the_session_before_the_cancellation(request: &Request) -> Reply {
    if request.message["method"] == "notifications/cancelled" {
        return Reply::new(404, None, String::new());
    }
    never_answers_the_call(request)
}

#[test]
fn sigterm_ends_at_once_when_the_cancellation_finds_the_session_gone() {
    // The engine drops the DELETE that waited for the cancellation, unsent, once the 404
    // says the session is gone; the client waited for that DELETE until its --timeout, then
    // failed with "no outcome" (found by a review of the client hosts).
    sigterm_when(
        forgets_the_session_before_the_cancellation,
        "tools/call",
        true,
        End::Gone,
    );
}

/// `never_answers_the_call` on a server that keeps no session (no `Mcp-Session-Id`), and
/// answers a cancellation only after 300 ms.
fn never_answers_the_call_and_has_no_sessions(request: &Request) -> Reply {
    if request.message["method"] == "notifications/cancelled" {
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut reply = never_answers_the_call(request);
    reply.headers.retain(|(name, _)| *name != "Mcp-Session-Id");
    reply
}

#[test]
fn sigterm_on_a_server_without_sessions_waits_for_the_cancellation() {
    // No session, so no DELETE that waits for the cancellation: the client reached its end
    // right after the close and freed the transfer carrying it, which never left.
    let (requests, exited) = sigterm_when(
        never_answers_the_call_and_has_no_sessions,
        "tools/call",
        true,
        End::NoSession,
    );
    let cancel = requests
        .iter()
        .find(|r| r.message["method"] == "notifications/cancelled")
        .unwrap();
    // It waited for the answer's head.
    assert!(
        exited >= cancel.at + Duration::from_millis(300),
        "exited {:?} after the cancellation came",
        exited - cancel.at
    );
}

/// `never_answers_the_call`, but the call's stream, half a second on (after the test's
/// SIGTERM), carries a request of the server's (`x/ask`, id `srv-1`) and then the answer.
fn asks_during_the_close(request: &Request) -> Reply {
    if request.message["method"] == "tools/call" {
        std::thread::sleep(Duration::from_millis(500));
        let ask = serde_json::json!({"jsonrpc": "2.0", "id": "srv-1", "method": "x/ask"});
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": request.message["id"],
            "result": {"content": [{"type": "text", "text": "hello from C"}]}});
        return Reply::sse(&format!("data: {ask}\n\ndata: {answer}\n\n"));
    }
    never_answers_the_call(request)
}

#[test]
fn a_server_request_during_the_close_after_a_signal_is_answered_at_once() {
    // Interrupted, the client ignored the server's requests: its close, which waits for the
    // answers to them too, waited out its grace, and the server got the engine's -32603 at
    // its end. It now answers (method not found) at once. (The call is answered within the
    // close's grace: nothing to cancel.)
    let (requests, _) = sigterm_when(asks_during_the_close, "tools/call", false, End::Deleted);
    let answer = requests
        .iter()
        .find(|r| r.message["id"] == "srv-1")
        .expect("the server's request answered");
    assert_eq!(
        answer.message["error"]["code"], -32601,
        "{:?}",
        answer.message
    );
}

/// What each request was: its JSON-RPC method, or its HTTP method (a DELETE).
fn methods_of(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .map(|r| match r.message["method"].as_str() {
            Some(m) => m.to_owned(),
            None => r.method.clone(),
        })
        .collect()
}

/// How the session ends after the signal, as the client tells it.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// With a DELETE answered 200.
    Deleted,
    /// The server keeps no session: nothing to end.
    NoSession,
    /// The session turned out to be gone before the DELETE went out: none is sent.
    Gone,
}

/// Runs the sanitized client against a server scripted by `script`, sends it SIGTERM once the
/// server got `method`, and checks that it cancelled that call (when `cancels`), ended the
/// session as `end` says, and failed with a clear line, within a few seconds. Returns what
/// the server got and when the client had exited.
fn sigterm_when(
    script: fn(&Request) -> Reply,
    method: &str,
    cancels: bool,
    end: End,
) -> (Vec<Request>, Instant) {
    let deletes = end == End::Deleted;
    let server = FakeServer::start(script);
    let mut cmd = client_command(
        client_asan(),
        &["--era", "legacy", "--timeout", "60"],
        &server.url(),
    );
    cmd.env(
        "ASAN_OPTIONS",
        "detect_leaks=1:abort_on_error=0:exitcode=23",
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start the client");
    let called = Instant::now();
    while !server
        .requests()
        .iter()
        .any(|r| r.message["method"] == method)
    {
        assert!(called.elapsed() < Duration::from_secs(20), "no call came");
        std::thread::sleep(Duration::from_millis(20));
    }
    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let exited = Instant::now();
    let all = text(&out);
    assert!(!all.contains("Sanitizer"), "{all}");
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(signalled.elapsed() < Duration::from_secs(10), "{all}");
    assert!(
        all.contains("C_CLIENT_FAIL interrupted: stopped by a signal"),
        "{all}"
    );
    let said = match end {
        End::Deleted => "session: ended with DELETE (HTTP 200)",
        End::NoSession => "session: none to end (the server keeps no session)",
        End::Gone => "session: already gone (the server answered 404 before the DELETE)",
    };
    assert!(all.contains(said), "{all}");
    let requests = server.requests();
    let methods = methods_of(&requests);
    let call = methods.iter().position(|m| m == method).unwrap();
    let after = &methods[call + 1..];
    assert_eq!(
        after.iter().any(|m| m == "notifications/cancelled"),
        cancels,
        "{methods:?}"
    );
    assert_eq!(after.iter().any(|m| m == "DELETE"), deletes, "{methods:?}");
    if deletes {
        assert_eq!(
            after.last().map(String::as_str),
            Some("DELETE"),
            "{methods:?}"
        );
    }
    (requests, exited)
}

#[test]
fn the_c_http_client_resumes_a_stream_the_server_closed_before_the_answer() {
    for era in ["legacy", "auto"] {
        let server = FakeServer::start(closes_the_stream_before_the_answer());
        let (out, all) = run_asan(&["--era", era, "--timeout", "20"], &server.url());
        assert!(out.status.success(), "{all}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("echo: \"hello from C\"\n"), "{all}");
        assert!(
            stdout.contains("session: ended with DELETE (HTTP 200)\n"),
            "{all}"
        );
        assert!(
            stdout.trim_end().ends_with("C_CLIENT_OK 2025-11-25"),
            "{all}"
        );

        let requests = server.requests();
        let call = requests
            .iter()
            .find(|r| r.message["method"] == "tools/call")
            .expect("the echo call");
        let gets: Vec<&Request> = requests.iter().filter(|r| r.method == "GET").collect();
        assert_eq!(gets.len(), 1, "one resumption: {requests:#?}");
        let get = gets[0];
        assert_eq!(get.header("Last-Event-ID"), Some("call-1"), "{get:#?}");
        assert_eq!(
            get.header("Mcp-Session-Id"),
            Some("fake-session"),
            "{get:#?}"
        );
        assert!(
            get.at.duration_since(call.at) >= Duration::from_millis(300),
            "the server's retry (300 ms) was not respected: {:?}",
            get.at.duration_since(call.at)
        );
        let delete = requests.last().expect("requests");
        assert_eq!(delete.method, "DELETE", "{requests:#?}");
        assert_eq!(delete.header("Mcp-Session-Id"), Some("fake-session"));
    }
}

/// A CONNECT proxy on a free port, as `HTTPS_PROXY` names one: it answers every CONNECT with
/// "200 Connection established", then closes the tunnel (nothing behind it speaks TLS).
fn start_connect_proxy() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        // One tunnel per request the client makes; the run is short.
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            if !head.starts_with(b"CONNECT ") {
                return;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            // The tunnel ends: the client's TLS handshake meets a closed connection.
        }
    });
    (port, handle)
}

/// Through a proxy (`HTTPS_PROXY`), the proxy's answer to CONNECT is not taken for the
/// server's: libcurl handed it to the header callback, which reported it to the engine as the
/// response (status 0), so every request through a proxy failed with "HTTP status 0" whatever the
/// server said, and the server's real head was skipped. Here the tunnel leads nowhere, so the
/// run fails, and it must fail for that reason.
#[test]
fn the_c_http_client_does_not_take_a_proxys_connect_answer_for_the_servers() {
    let (proxy, _thread) = start_connect_proxy();
    let url = format!("https://127.0.0.1:{}/mcp", free_port());
    let mut cmd = client_command(client_asan(), &["--era", "legacy", "--timeout", "10"], &url);
    cmd.env("HTTPS_PROXY", format!("http://127.0.0.1:{proxy}"))
        .env("https_proxy", format!("http://127.0.0.1:{proxy}"))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    let out = cmd.output().unwrap();
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    let fail = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| l.starts_with("C_CLIENT_FAIL "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no C_CLIENT_FAIL line:\n{all}"));
    assert!(!fail.contains("status 0"), "{fail}");
    assert!(
        fail.contains("SSL") || fail.contains("TLS"),
        "the failure should be the TLS handshake's: {fail}"
    );
}

/// `never_answers_the_delete`, but the DELETE gets 200, and a second tool, `burst`, whose
/// call is answered with `PROGRESS_BURST` progress notifications in one SSE body, then its
/// result.
fn answers_with_a_burst_of_progress(request: &Request) -> Reply {
    if request.method == "DELETE" {
        return Reply::accepted();
    }
    let m = &request.message;
    match (m["method"].as_str(), m.get("id")) {
        (Some("tools/list"), Some(id)) => Reply::json(serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}},
                {"name": "burst", "inputSchema": {"type": "object"}}
            ]}
        })),
        (Some("tools/call"), Some(id)) if m["params"]["name"] == "burst" => {
            let token = &m["params"]["_meta"]["progressToken"];
            let mut events = String::new();
            for n in 1..=PROGRESS_BURST {
                let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": n}});
                events.push_str(&format!("data: {note}\n\n"));
            }
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": "done"}]}});
            events.push_str(&format!("data: {answer}\n\n"));
            Reply::sse(&events)
        }
        _ => never_answers_the_delete(request),
    }
}

/// How many notifications `answers_with_a_burst_of_progress` sends at once.
const PROGRESS_BURST: usize = 10_000;

/// Ten thousand progress notifications in one response body all reach the application: curl
/// brought them in a few large pieces within one `curl_multi_perform`, each fed whole before
/// any event was taken, and the engine's queue of 4,096 events dropped the rest (4,096 of
/// the 10,000 seen; found by a review of the C examples).
#[test]
fn a_burst_of_notifications_in_one_body_all_reach_the_client() {
    let server = FakeServer::start(answers_with_a_burst_of_progress);
    let args = [
        "--era",
        "legacy",
        "--progress-tool",
        "burst",
        "--timeout",
        "30",
    ];
    let (out, all) = run_asan(&args, &server.url());
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains(&format!(
            "progress: {PROGRESS_BURST} notifications, then the result"
        )),
        "{all}"
    );
    assert!(
        all.contains("session: ended with DELETE (HTTP 200)"),
        "{all}"
    );
}
