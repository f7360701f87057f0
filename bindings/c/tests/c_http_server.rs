//! The C HTTP server example (bindings/c/example_http_server.c, libmicrohttpd in external
//! select mode) as a process, built against the static library under test with strict warnings
//! and ASan+UBSan (and plain, under valgrind and for memory):
//!
//! - the Python SDK's Streamable HTTP client completes sessions in both eras, and the
//!   TypeScript SDK's in the handshake era;
//! - hostile HTTP input (oversized bodies, garbage, foreign hosts, clients that vanish
//!   mid-stream) gets the spec's answers and never stops the server;
//! - SIGTERM lets an answer in flight finish (under kept-alive load too: no answer is cut
//!   short), then exits 0 with nothing leaked;
//! - a request's body is not held while its stream lasts (a plain build's memory).
//!
//! The conformance scenarios against it run in .ci/conformance.

// The test is the IO layer: it reads the real clock for its deadlines.
#![allow(clippy::disallowed_methods)]

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::stdio::{python_client, python_site, ts_client};
use support::*;

program!(
    server_asan,
    "bindings/c/example_http_server.c",
    "example_http_server_asan",
    Lang::C,
    true,
    &["-lmicrohttpd"]
);
program!(
    server_plain,
    "bindings/c/example_http_server.c",
    "example_http_server",
    Lang::C,
    false,
    &["-lmicrohttpd"]
);

/// A running server; SIGTERM and reaping when dropped (a failed test leaves no process).
struct Server {
    child: Child,
    url: String,
    port: u16,
    /// Reads the server's stderr as it comes: a pipe nobody drains would block the server
    /// once full (libmicrohttpd logs a line for every client that leaves mid-response).
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    fn start(mut command: Command) -> Server {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        command.env(
            "ASAN_OPTIONS",
            "detect_leaks=1:abort_on_error=0:exitcode=23",
        );
        command.env(
            "UBSAN_OPTIONS",
            "halt_on_error=1:print_stacktrace=1:exitcode=24",
        );
        let mut child = command.spawn().expect("start example_http_server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the first line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .expect("a port in the URL");
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = Some(std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stderr.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        }));
        Server {
            child,
            url,
            port,
            stderr,
        }
    }

    fn asan(args: &[&str]) -> Server {
        let mut c = Command::new(server_asan());
        c.args(args);
        Server::start(c)
    }

    /// SIGTERM, then the exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        terminate(self.child.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = (self.stderr.take())
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        (status, err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn terminate(pid: u32) {
    // SAFETY: kill(2) reads nothing of ours; the pid is a child this test started.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
}

fn run(mut client: Command) -> (bool, String) {
    client.env("PYTHONPATH", python_site());
    let out = client.output().expect("run the client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn assert_python_http_session(url: &str, mode: &str, version: &str) {
    let (ok, out) = run(python_client(&[
        "--mode",
        mode,
        "--expect-version",
        version,
        "--url",
        url,
    ]));
    assert!(ok, "{out}");
    assert!(
        out.contains("echo(text='hello from python') -> 'hello from python'"),
        "{out}"
    );
    assert!(
        out.contains("read mem://greeting -> 1 content item(s)"),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with(&format!("PY_CLIENT_OK {version}")),
        "{out}"
    );
}

/// One raw HTTP/1.1 exchange on a fresh connection: the whole response as text.
fn raw(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The text of a JSON POST to the endpoint with `headers` (each ending in CRLF) and `body`;
/// `close` asks for the connection to be closed after the answer.
fn post_text(port: u16, headers: &str, body: &str, close: bool) -> String {
    let close = if close { "Connection: close\r\n" } else { "" };
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{close}{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn post(port: u16, headers: &str, body: &str) -> String {
    raw(port, post_text(port, headers, body, true).as_bytes())
}

const MODERN: &str = "MCP-Protocol-Version: 2026-07-28\r\n";

fn modern_call(id: u32, tool: &str) -> (String, String) {
    let headers = format!("{MODERN}Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\n");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"hi"}},"_meta":{{"progressToken":"p{id}","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    (headers, body)
}

/// Reads one whole response (a JSON body of its Content-Length) from `s`, or what came
/// before the connection ended or its read timeout passed.
fn one_response(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, rest)) = text.split_once("\r\n\r\n")
            && let Some(len) = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse::<usize>().ok())
            && rest.len() >= len
        {
            return text;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return text,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// One response on `s`, waiting up to 5 s for it.
fn response_within_5s(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    one_response(s)
}

/// Whether the server closed `s` (an end, or a reset) within 3 s; false if it is still open
/// then, or if bytes came.
fn cut_within_3s(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

fn assert_clean_exit(server: Server) {
    let (status, err) = server.stop();
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(!err.contains("ERROR: AddressSanitizer"), "{err}");
    assert!(!err.contains("runtime error"), "{err}");
}

// ---- Real SDK clients ----------------------------------------------------------------------

/// A signal the server was started ignoring (a background job of a non-interactive shell
/// ignores SIGINT) stays ignored: it ended the server. SIGTERM, not ignored, still ends it.
/// `--port` takes digits only (`" 1"`, `"+1"` or a negative number wrapped to a port).
#[test]
fn an_ignored_sigint_stays_ignored_and_the_port_takes_digits_only() {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("trap '' INT; exec \"$0\" --port 0")
        .arg(server_asan());
    let server = Server::start(c);
    // SAFETY: kill(2) reads nothing of ours; the pid is a child this test started.
    unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(300));
    let answer = post(
        server.port,
        "",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
    let (status, err) = server.stop();
    assert!(status.success(), "{status:?} {err}");
    for bad in [" 1", "+1", "-18446744073709551615", "", "65536"] {
        let out = Command::new(server_asan())
            .args(["--port", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--port {bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("bad port"),
            "--port {bad:?}"
        );
    }
}

#[test]
fn python_sdk_http_client_completes_sessions_in_both_eras() {
    let server = Server::asan(&[]);
    assert_python_http_session(&server.url, "legacy", "2025-11-25");
    assert_python_http_session(&server.url, "auto", "2026-07-28");
    assert_clean_exit(server);
}

#[test]
fn python_sdk_http_client_in_auto_mode_falls_back_from_a_legacy_server() {
    let server = Server::asan(&["--legacy"]);
    assert_python_http_session(&server.url, "auto", "2025-11-25");
    assert_clean_exit(server);
}

#[test]
fn typescript_sdk_http_client_completes_a_session() {
    let server = Server::asan(&[]);
    let (ok, out) = run(ts_client(&["--url", &server.url]));
    assert!(ok, "{out}");
    assert!(
        out.contains(r#"echo(text="hello from typescript") -> "hello from typescript""#),
        "{out}"
    );
    assert!(out.trim_end().ends_with("TS_CLIENT_OK 2025-11-25"), "{out}");
    assert_clean_exit(server);
}

#[test]
fn sessions_and_shutdown_are_clean_under_valgrind() {
    let mut c = Command::new("valgrind");
    c.args(VALGRIND).arg(server_plain());
    let server = Server::start(c);
    assert_python_http_session(&server.url, "legacy", "2025-11-25");
    assert_python_http_session(&server.url, "auto", "2026-07-28");
    // valgrind's exit status carries its verdict (errors and definite or indirect leaks).
    let (status, err) = server.stop();
    assert!(status.success(), "exit {status:?}: {err}");
}

// ---- Hostile and unlucky HTTP --------------------------------------------------------------

#[test]
fn progress_streams_over_sse_and_the_answer_ends_the_stream() {
    let server = Server::asan(&[]);
    let (headers, body) = modern_call(7, "count");
    let out = post(server.port, &headers, &body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("text/event-stream"), "{out}");
    for step in 1..=3 {
        assert!(
            out.contains(&format!(
                r#""progressToken":"p7","progress":{step},"total":3"#
            )),
            "{out}"
        );
    }
    assert!(out.contains(r#""id":7,"result""#), "{out}");
    assert!(out.contains("counted to 3"), "{out}");
    assert_clean_exit(server);
}

/// The example reads a tool's name as text and its numbers as JSON numbers: `"\u0061dd"` is
/// `add` (it was an unknown tool), and a number of 70 characters is a number (it was refused).
#[test]
fn a_tool_name_is_read_as_text_and_numbers_of_any_length_are_numbers() {
    let server = Server::asan(&[]);
    let headers = format!("{MODERN}Mcp-Method: tools/call\r\nMcp-Name: add\r\n");
    let long = format!("1.{}1", "0".repeat(66));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"\u0061dd","arguments":{{"a":{long},"b":1}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let out = post(server.port, &headers, &body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains(r#""text":"2"}],"isError":false"#), "{out}");
    assert_clean_exit(server);
}

/// With an output bound smaller than one progress message, every step meets backpressure
/// (`MCPW_ERR_OUTPUT_FULL`) and is tried again: the answer still comes. (It was dropped when
/// the answer, right after the last progress, met the bound: the example repeated that
/// progress, which the engine refuses as not increasing, and took the refusal for a request
/// gone.)
#[test]
fn backpressure_delays_answers_but_never_drops_them() {
    let server = Server::asan(&["--max-output", "100"]);
    let (headers, body) = modern_call(8, "count");
    let out = post(server.port, &headers, &body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    for step in 1..=3 {
        assert!(
            out.contains(&format!(
                r#""progressToken":"p8","progress":{step},"total":3"#
            )),
            "{out}"
        );
    }
    assert!(out.contains("counted to 3"), "{out}");
    assert_clean_exit(server);
}

/// An answer given right after a log message that fills the output bound is refused for now
/// (`MCPW_ERR_OUTPUT_FULL`) and given again once there is room: the client gets both. (The
/// example only warned, and the request waited for an answer until its client gave up.)
#[test]
fn an_answer_refused_for_a_full_output_is_given_later() {
    let server = Server::asan(&["--max-output", "100"]);
    let headers = format!("{MODERN}Mcp-Method: tools/call\r\nMcp-Name: test_logging_tool\r\n");
    let body = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_logging_tool","arguments":{},"_meta":{"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let out = post(server.port, &headers, body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(
        out.contains("test_logging_tool ran"),
        "the log message: {out}"
    );
    assert!(out.contains("Logging tool completed"), "the answer: {out}");
    assert_clean_exit(server);
}

/// The example checks what its log call returns (it used to discard it; found by a review of
/// the C examples): a log refused for a full output, or for a request the client cancelled
/// meanwhile, is skipped quietly; any other refusal is reported. So is the progress tool's
/// first report for a request cancelled meanwhile (it was reported). Here the tool's request is
/// cancelled in the same 2025-03-26 batch, before the example handles it: the log is refused
/// (no such request in flight), which is normal and not worth a warning. The server goes on
/// and exits cleanly.
#[test]
fn a_log_for_a_request_cancelled_in_its_batch_is_skipped_quietly() {
    let server = Server::asan(&[]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let answer = post(server.port, "", init);
    let sid = answer
        .lines()
        .find_map(|l| l.strip_prefix("Mcp-Session-Id: "))
        .unwrap_or_else(|| panic!("no session: {answer}"))
        .trim()
        .to_owned();
    let session = format!("Mcp-Session-Id: {sid}\r\n");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let out = post(server.port, &session, initialized);
    assert!(out.starts_with("HTTP/1.1 202"), "{out}");
    let batch = r#"[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_logging_tool","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}]"#;
    let out = post(server.port, &session, batch);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    // The same for the progress tool's first report (it warned: a review of this change).
    let batch = r#"[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}]"#;
    let out = post(server.port, &session, batch);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    // The session goes on.
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    let out = post(server.port, &session, list);
    assert!(out.contains("test_logging_tool"), "{out}");
    let (status, err) = server.stop();
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(!err.contains("example_http_server: log: "), "{err}");
    assert!(!err.contains("example_http_server: progress: "), "{err}");
    assert!(!err.contains("ERROR: AddressSanitizer"), "{err}");
    assert!(!err.contains("runtime error"), "{err}");
}

#[test]
fn foreign_hosts_wrong_paths_and_bad_requests_get_the_spec_answers() {
    let server = Server::asan(&["--allow-host", "mcp.example"]);
    let port = server.port;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let list_headers = format!("{MODERN}Mcp-Method: tools/list\r\n");
    // DNS rebinding: a foreign Origin is refused, a listed one accepted.
    let out = post(
        port,
        &format!("{list_headers}Origin: http://evil.example\r\n"),
        list,
    );
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    let out = post(
        port,
        &format!("{list_headers}Origin: https://mcp.example\r\n"),
        list,
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    // Another path.
    let out = raw(
        port,
        format!("GET /other HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    // Headers that disagree with the body.
    let out = post(port, &format!("{MODERN}Mcp-Method: prompts/list\r\n"), list);
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert!(out.contains("-32020"), "{out}");
    // Not JSON.
    let out = post(port, &list_headers, "{not json");
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    // A body of unknown length (chunked) over the limit (4 MiB) is refused without the server
    // keeping it.
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(5 * 1024 * 1024));
    let mut chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{list_headers}Transfer-Encoding: chunked\r\n\r\n"
    );
    for piece in big.as_bytes().chunks(64 * 1024) {
        chunked.push_str(&format!(
            "{:x}\r\n{}\r\n",
            piece.len(),
            std::str::from_utf8(piece).unwrap()
        ));
    }
    chunked.push_str("0\r\n\r\n");
    let out = raw(port, chunked.as_bytes());
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    // Declared over the limit, within what is read and dropped (16 MiB): every byte is taken,
    // then 413. (The 413 came before the body and the connection closed under the client's
    // upload: Node's fetch reported EPIPE, httpx lost its session.)
    let size = 5 * 1024 * 1024;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{list_headers}Content-Length: {size}\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let piece = vec![b' '; 64 * 1024];
    for _ in 0..size / piece.len() {
        s.write_all(&piece)
            .expect("every byte of the body is taken");
    }
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("the answer, then a clean close");
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    // A body declared over that is refused before it is read: no wait for a body that
    // never comes (raw() would give up after 10 s with nothing).
    let started = std::time::Instant::now();
    let out = raw(
        port,
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{list_headers}Content-Length: 100000000\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "413 after {:?}",
        started.elapsed()
    );
    // More header fields than the example reads (128): refused whole, so that a repeated MCP
    // header past the cut cannot go unseen.
    let mut many: String = (0..200).map(|i| format!("X-Filler-{i}: {i}\r\n")).collect();
    many.push_str(&list_headers);
    many.push_str("Mcp-Method: tools/list\r\n");
    let out = post(port, &many, list);
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
    // Garbage that is not HTTP at all.
    let _ = raw(port, b"\x00\x01\x02 nonsense\r\n\r\n");
    // The server still answers.
    let out = post(port, &list_headers, list);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("test_simple_text"), "{out}");
    assert_clean_exit(server);
}

/// Framing two parsers could read two ways is refused, and the connection closed, so that
/// nothing after it is read as another request (RFC 9112 §6.1, §6.3): libmicrohttpd read the
/// first of two differing lengths and served the rest of the body as a second request, kept
/// the connection after Content-Length beside Transfer-Encoding, and left "gzip, chunked"
/// unanswered (found by a helper's audit); it framed a body by the first of two
/// Transfer-Encoding fields (found by another).
#[test]
fn ambiguous_request_framing_is_refused_and_the_connection_closed() {
    let server = Server::asan(&[]);
    let port = server.port;
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let smuggled = format!("GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let body = format!("{list}{smuggled}");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{MODERN}Mcp-Method: tools/list\r\n"
    );
    let statuses = |out: &str| -> Vec<String> {
        out.split("\r\n")
            .filter(|l| l.starts_with("HTTP/1.1 "))
            .map(|l| l[9..12].to_owned())
            .collect()
    };
    for lengths in [[list.len(), body.len()], [body.len(), list.len()]] {
        let request = format!(
            "{head}Content-Length: {}\r\nContent-Length: {}\r\n\r\n{body}",
            lengths[0], lengths[1]
        );
        let out = raw(port, request.as_bytes());
        assert_eq!(statuses(&out), ["400"], "{out}");
    }
    let chunked = format!("{:x}\r\n{list}\r\n0\r\n\r\n{smuggled}", list.len());
    let request = format!(
        "{head}Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}",
        chunked.len()
    );
    let out = raw(port, request.as_bytes());
    assert_eq!(statuses(&out), ["400"], "{out}");
    let request = format!("{head}Transfer-Encoding: gzip, chunked\r\n\r\n{chunked}");
    let out = raw(port, request.as_bytes());
    assert_eq!(statuses(&out), ["501"], "{out}");
    // Two fields make one list ("chunked, gzip": chunked not last; "chunked, chunked"):
    // libmicrohttpd framed the body by the first, and served what followed it.
    for second in ["gzip", "identity", "chunked"] {
        let request = format!(
            "{head}Transfer-Encoding: chunked\r\nTransfer-Encoding: {second}\r\n\r\n{chunked}"
        );
        let out = raw(port, request.as_bytes());
        assert_eq!(statuses(&out), ["400"], "{second}: {out}");
    }
    // Sound framing is served as before.
    let request = format!(
        "{head}Connection: close\r\nContent-Length: {}\r\n\r\n{list}",
        list.len()
    );
    let out = raw(port, request.as_bytes());
    assert_eq!(statuses(&out), ["200"], "{out}");
    assert_clean_exit(server);
}

/// Posts a call of the count tool (with `Connection: close` if `close`) and reads its answer
/// up to the first progress event (10 s at most): the connection and what was read.
fn call_until_progress(port: u16, headers: &str, body: &str, close: bool) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(post_text(port, headers, body, close).as_bytes())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("progress") {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    (s, seen)
}

#[test]
fn clients_that_vanish_mid_stream_never_stop_the_server() {
    let server = Server::asan(&[]);
    let port = server.port;
    for id in 0..20 {
        let (headers, body) = modern_call(id, "count");
        // Read the response head and the first progress event, then drop the connection.
        let _ = call_until_progress(port, &headers, &body, false);
    }
    // Every vanished stream was noticed; a new request is answered at once.
    let (headers, body) = modern_call(99, "echo");
    let out = post(port, &headers, &body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains(r#""text":"hi""#), "{out}");
    assert_clean_exit(server);
}

/// The server process's open sockets.
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's descriptors")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

#[test]
fn clients_that_leave_idle_streams_are_noticed() {
    // An idle SSE stream writes nothing, and libmicrohttpd does not watch a suspended
    // connection: without a look at the socket, a client that left a GET stream (or a
    // 2026-07-28 listen stream) would hold its connection, stream and session for good, and
    // a thousand of them would use up the server's connections.
    let server = Server::asan(&[]);
    let (port, pid) = (server.port, server.child.id());
    let before = sockets(pid);
    for i in 0..30 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let request = if i % 2 == 0 {
            let sid = open_session(port);
            format!(
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
            )
        } else {
            let body = r#"{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{MODERN}Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        s.write_all(request.as_bytes()).unwrap();
        // The stream's first event (priming, or the listen acknowledgement), then leave.
        read_ok_until(&mut s, "\n\n");
    }
    // Every stream's connection is closed once its departure is seen (at a heartbeat).
    let deadline = Instant::now() + Duration::from_secs(10);
    while sockets(pid) > before {
        assert!(
            Instant::now() < deadline,
            "{} sockets open, {before} before the streams",
            sockets(pid)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_clean_exit(server);
}

/// Opens a 2025-11-25 session on the server at `port`; returns its id.
fn open_session(port: u16) -> String {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let answer = post(port, "", init);
    answer
        .lines()
        .find_map(|l| l.strip_prefix("Mcp-Session-Id: "))
        .unwrap_or_else(|| panic!("no session: {answer}"))
        .trim()
        .to_owned()
}

/// Opens a 2025-11-25 session and its GET stream on the server at `port`; returns the
/// stream's socket and what was read of it once the head came.
fn open_get_stream(port: u16) -> (TcpStream, Vec<u8>) {
    let sid = open_session(port);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    .unwrap();
    let seen = read_ok_until(&mut s, "\r\n\r\n");
    (s, seen)
}

/// Reads from `s` until what came holds `marker`; asserts that it is a 200 response.
fn read_ok_until(s: &mut TcpStream, marker: &str) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(marker) {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    seen
}

#[test]
fn quiet_streams_get_keep_alive_comments() {
    // The engine wakes every quiet stream with a comment line; the example must write it out
    // of a suspended connection (proxies cut streams idle for about a minute). With
    // `--keepalive-ms 0` it writes none.
    let count = |args: &[&str], wait: Duration| {
        let server = Server::asan(args);
        let (mut s, mut seen) = open_get_stream(server.port);
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 4096];
        let comments = |seen: &[u8]| String::from_utf8_lossy(seen).matches(":\n\n").count();
        while Instant::now() < deadline && comments(&seen) < 3 {
            match s.read(&mut buf) {
                Ok(0) => panic!("the stream ended: {}", String::from_utf8_lossy(&seen)),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        drop(s);
        assert_clean_exit(server);
        comments(&seen)
    };
    let n = count(&["--keepalive-ms", "100"], Duration::from_secs(10));
    assert!(
        n >= 3,
        "{n} keep-alive comments within 10 s at one per 100 ms"
    );
    let n = count(&["--keepalive-ms", "0"], Duration::from_secs(1));
    assert_eq!(n, 0, "keep-alive comments with keep-alives off");
}

/// Raises this process's descriptor limit to its hard limit (at least `want`, else panics).
fn raise_descriptor_limit(want: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    assert!(
        limit.rlim_cur >= want,
        "this test needs {want} descriptors; the hard limit is {}",
        limit.rlim_max
    );
}

#[test]
fn more_clients_than_select_can_watch_are_served() {
    // select() watches at most FD_SETSIZE (1,024) descriptors; with epoll the example serves
    // as many clients as its descriptor limit allows. 1,100 clients hold 2026-07-28 listen
    // streams open, and one more still gets its answer; then they all leave.
    raise_descriptor_limit(1_300);
    let server = Server::asan(&[]);
    let port = server.port;
    let body = r#"{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{MODERN}Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut held = Vec::new();
    for i in 0..1_100 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("\n\n") {
            let n = s
                .read(&mut buf)
                .unwrap_or_else(|e| panic!("listen stream {i}: {e}"));
            assert!(n > 0, "listen stream {i} closed early");
            seen.extend_from_slice(&buf[..n]);
        }
        assert!(seen.starts_with(b"HTTP/1.1 200"), "stream {i}");
        held.push(s);
    }
    let (headers, body) = modern_call(7, "echo");
    let out = post(port, &headers, &body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains(r#""text":"hi""#), "{out}");
    drop(held);
    assert_clean_exit(server);
}

#[test]
fn sigterm_lets_an_answer_in_flight_finish() {
    // The default grace, and the largest the flag takes ("as long as it takes"): it wrapped
    // to none, and the call got -32603 at once.
    for flags in [&[][..], &["--shutdown-grace-ms", "18446744073709"][..]] {
        sigterm_during_a_call(flags);
    }
}

fn sigterm_during_a_call(flags: &[&str]) {
    let server = Server::asan(flags);
    let port = server.port;
    let pid = server.child.id();
    let (headers, body) = modern_call(5, "count");
    // The tool takes 150 ms: at its first progress event, ask the server to stop.
    let (mut s, mut seen) = call_until_progress(port, &headers, &body, true);
    terminate(pid);
    let _ = s.read_to_end(&mut seen);
    let out = String::from_utf8_lossy(&seen).into_owned();
    assert!(out.contains("counted to 3"), "{out}");
    // The SSE answer ends as an HTTP response must: with its last chunk (the server
    // stopped the daemon while libmicrohttpd still held it: "transfer closed").
    assert!(out.ends_with("0\r\n\r\n"), "{out:?}");
    assert_clean_exit(server);
}

/// A request still awaited when the shutdown grace is over gets an error answer (-32603) on
/// its stream before the server exits: its client learns at once that no answer will come.
/// The server cut the stream, and a stateless client waited for its own time-out (found by a
/// review of the example).
#[test]
fn past_the_shutdown_grace_a_request_still_awaited_gets_an_error_answer() {
    let server = Server::asan(&["--shutdown-grace-ms", "0"]);
    let port = server.port;
    let pid = server.child.id();
    let (headers, body) = modern_call(6, "count");
    // The tool takes 150 ms; at its first progress event the server is asked to stop, with
    // no grace at all.
    let (mut s, mut seen) = call_until_progress(port, &headers, &body, true);
    terminate(pid);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.read_to_end(&mut seen);
    let out = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        out.contains(r#""id":6,"error":{"code":-32603"#),
        "no error answer: {out}"
    );
    assert!(!out.contains("counted to 3"), "{out}");
    assert!(out.ends_with("0\r\n\r\n"), "the stream was cut: {out:?}");
    assert_clean_exit(server);
}

/// SIGTERM while kept-alive clients send calls one after another: the server went on taking
/// their next requests until its grace ran out, then stopped in the middle of an answer (found
/// by an audit: every client got a stream cut short). Now every answer that began ends whole,
/// and each connection is closed after the answer it was given.
#[test]
fn sigterm_under_kept_alive_load_cuts_no_answer_short() {
    let server = Server::asan(&[]);
    let (port, pid) = (server.port, server.child.id());
    let clients: Vec<_> = (0..4)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut answers = Vec::new();
                for id in 0.. {
                    let (headers, body) = modern_call(c * 1000 + id, "count");
                    if s.write_all(post_text(port, &headers, &body, false).as_bytes())
                        .is_err()
                    {
                        break;
                    }
                    // One SSE answer: up to its last chunk, or whatever came before the end.
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !seen.ends_with(b"0\r\n\r\n") {
                        match s.read(&mut buf) {
                            Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                            _ => break,
                        }
                    }
                    let done = seen.ends_with(b"0\r\n\r\n");
                    answers.push(String::from_utf8_lossy(&seen).into_owned());
                    if !done {
                        break;
                    }
                }
                answers
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(600));
    terminate(pid);
    for client in clients {
        let answers = client.join().unwrap();
        let (last, before) = answers.split_last().unwrap();
        assert!(!before.is_empty(), "no whole answer before the stop");
        for a in before {
            assert!(a.contains("counted to 3"), "{a}");
        }
        // The last request either got its whole answer (and the connection was closed after
        // it, with Connection: close), or nothing: sent as its idle connection was closed.
        assert!(
            last.is_empty()
                || (last.contains("counted to 3") && last.contains("Connection: close")),
            "an answer cut short or kept alive: {last:?}"
        );
    }
    assert_clean_exit(server);
}

/// A GET stream whose client sent a few bytes more and then closed the connection: a peek at
/// the socket saw the bytes and not the end behind them, so with keep-alive comments off the
/// stream, its connection and its session stayed for good (found by an audit).
#[test]
fn a_stream_whose_client_sent_more_before_it_left_is_noticed() {
    let server = Server::asan(&["--keepalive-ms", "0"]);
    let (port, pid) = (server.port, server.child.id());
    let before = sockets(pid);
    let (mut s, _) = open_get_stream(port);
    s.write_all(b"GET /mcp HTTP/1.1\r\n").unwrap();
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(5);
    while sockets(pid) > before {
        assert!(
            Instant::now() < deadline,
            "{} sockets open, {before} before the stream",
            sockets(pid)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_clean_exit(server);
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("the server's status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// A request's body was kept until its response ended: a long-lived stream (here
/// `subscriptions/listen`) held its request's 3 MB for as long as it lived, in a buffer grown
/// to 4 MiB (found by an audit: 40 slow readers took the server from 5 MB to 333 MB).
#[test]
fn a_streams_request_body_is_not_held_while_it_lasts() {
    let mut command = Command::new(server_plain());
    command.args(["--max-connections", "100"]);
    let server = Server::start(command);
    let (port, pid) = (server.port, server.child.id());
    let padding = "x".repeat(3_000_000);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},"padding":"{padding}","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{MODERN}Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let before = rss_kib(pid);
    let streams: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(request.as_bytes()).unwrap();
            read_ok_until(&mut s, "\n\n"); // the listen acknowledgement: the stream is open
            s
        })
        .collect();
    let grown = rss_kib(pid).saturating_sub(before);
    // Ten bodies held would be 30 MB and more.
    assert!(grown < 15 * 1024, "{grown} KiB more with the streams open");
    drop(streams);
    assert_clean_exit(server);
}

/// An answer of 3 MB read slowly, and a request whose body is still arriving, when SIGTERM
/// comes: both are answered whole before the server exits (it stopped as soon as the engine
/// had no stream open, with libmicrohttpd still sending: the answer was cut at 2.8 MB).
#[test]
fn sigterm_waits_for_answers_still_being_sent_and_bodies_still_arriving() {
    let server = Server::asan(&[]);
    let port = server.port;
    let pid = server.child.id();
    let text = "a".repeat(3_000_000);
    let headers = format!("{MODERN}Mcp-Method: tools/call\r\nMcp-Name: echo\r\n");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let request = |body: &str| post_text(port, &headers, body, true);
    // A small request whose body is not all there yet (given time to be taken in: a
    // connection still in the listen queue at SIGTERM goes with the listening socket).
    let small_body = body
        .replacen(&text, "hi", 1)
        .replacen(r#""id":1"#, r#""id":2"#, 1);
    let small_request = request(&small_body);
    let (head, tail) = small_request.split_at(small_request.len() - 10);
    let mut small = TcpStream::connect(("127.0.0.1", port)).unwrap();
    small.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The big answer: sent whole, then read 64 KiB at a time with pauses.
    let mut big = TcpStream::connect(("127.0.0.1", port)).unwrap();
    big.write_all(request(&body).as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    terminate(pid);
    std::thread::sleep(Duration::from_millis(300));
    small.write_all(tail.as_bytes()).unwrap();
    let mut out = Vec::new();
    small
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = small.read_to_end(&mut out);
    let small_out = String::from_utf8_lossy(&out).into_owned();
    assert!(small_out.contains(r#""text":"hi""#), "{small_out}");
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match big.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
        // Slowly, but well within the server's 2 s grace (about 0.1 s in all).
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = String::from_utf8_lossy(&out);
    let (head, body) = out.split_once("\r\n\r\n").expect("a response");
    let declared: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a JSON answer with its length")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(body.len(), declared, "the answer was cut");
    assert!(body.contains(&text));
    assert_clean_exit(server);
}

/// A kept-alive connection whose next request head has begun to arrive, split across two
/// writes, when SIGTERM comes, far below the connection cap: the request is answered before
/// the server exits. The server read the first part, and had not counted the connection's
/// bytes (it does that only near the cap), so it saw nothing on the socket and closed the
/// connection as idle.
#[test]
fn sigterm_answers_a_head_split_across_writes_on_a_kept_alive_connection() {
    let server = Server::asan(&[]);
    let (port, pid) = (server.port, server.child.id());
    let (headers, body) = modern_call(1, "echo");
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(post_text(port, &headers, &body, false).as_bytes())
        .unwrap();
    let first = response_within_5s(&mut s);
    assert!(first.contains(r#""text":"hi""#), "{first}");
    let (headers, body) = modern_call(2, "echo");
    let second = post_text(port, &headers, &body, false);
    let (head, rest) = second.split_at(second.find("Content-Type").unwrap());
    s.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // (read by the server by now)
    terminate(pid);
    std::thread::sleep(Duration::from_millis(300));
    let _ = s.write_all(rest.as_bytes());
    let out = response_within_5s(&mut s);
    assert!(
        out.contains(r#""id":2"#) && out.contains(r#""text":"hi""#),
        "the request was cut: {out:?}"
    );
    assert_clean_exit(server);
}

/// At `--max-connections`, a new client displaces the connection that has waited longest
/// for a request head; when every connection is in a request, it waits its turn and none is
/// cut. Before, libmicrohttpd stopped accepting at its cap, so a cap's worth of silent
/// sockets locked every client out until the head timeout (10 s by default, here 20 s).
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn at_the_cap_a_new_client_displaces_the_connection_idle_longest() {
    let server = Server::asan(&["--max-connections", "3", "--head-timeout-ms", "20000"]);
    let port = server.port;
    // Whether the server closed `s` within `wait`.
    let closed_within = |s: &mut TcpStream, wait: Duration| {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 4096];
        match s.read(&mut buf) {
            Ok(0) => true,
            Ok(n) => panic!("bytes came: {}", String::from_utf8_lossy(&buf[..n])),
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    };
    let mut silent: Vec<TcpStream> = (0..3)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let (headers, body) = modern_call(1, "echo");
    let started = Instant::now();
    let answer = post(port, &headers, &body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""text":"hi""#), "{answer}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "served after {took:?}");
    assert!(
        closed_within(&mut silent[0], Duration::from_secs(2)),
        "the connection idle longest was not the one displaced"
    );
    for s in &mut silent[1..] {
        assert!(
            !closed_within(s, Duration::from_millis(200)),
            "one too many displaced"
        );
    }

    // Three connections in a request (their bodies half sent): a new client waits.
    let whole = post_text(port, &headers, &body, false);
    let half = |s: &mut TcpStream| {
        s.write_all(&whole.as_bytes()[..whole.len() - (body.len() - 10)])
            .unwrap();
    };
    let mut busy = silent.split_off(1);
    busy.push(TcpStream::connect(("127.0.0.1", port)).unwrap());
    for s in &mut busy {
        half(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut waiting = TcpStream::connect(("127.0.0.1", port)).unwrap();
    waiting
        .write_all(post_text(port, &headers, &body, true).as_bytes())
        .unwrap();
    assert!(
        !closed_within(&mut waiting, Duration::from_secs(1)),
        "a client was served or refused past the cap while every connection was busy"
    );
    for s in &mut busy {
        assert!(
            !closed_within(s, Duration::from_millis(100)),
            "a busy connection was cut"
        );
    }
    // One request completes: its connection, idle now, makes room for the waiting client.
    busy[0].write_all(&body.as_bytes()[10..]).unwrap();
    let mut out = Vec::new();
    waiting
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = waiting.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains(r#""text":"hi""#), "{out}");
    drop(busy);
    assert_clean_exit(server);
}

/// A waiting connection whose next request has begun to arrive is not the one displaced,
/// even when the request and a new client come in the same turn of the loop (the server is
/// stopped while both arrive): it was cut, and its request went unanswered.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn a_connection_whose_next_request_has_begun_is_not_displaced() {
    let server = Server::asan(&["--max-connections", "2", "--head-timeout-ms", "20000"]);
    let port = server.port;
    let pid = server.child.id().to_string();
    let (headers, body) = modern_call(1, "echo");
    let request = post_text(port, &headers, &body, false);
    let response = |s: &mut TcpStream| {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        one_response(s)
    };
    // A: one request, then kept alive and waiting (the longest); B: silent, waiting after it.
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    a.write_all(request.as_bytes()).unwrap();
    assert!(response(&mut a).starts_with("HTTP/1.1 200"));
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // While the server is stopped: A's next request, and a new client at the cap.
    let signal = |sig: &str| {
        Command::new("kill").args([sig, &pid]).status().unwrap();
    };
    signal("-STOP");
    a.write_all(request.as_bytes()).unwrap();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    signal("-CONT");
    let second = response(&mut a);
    assert!(second.starts_with("HTTP/1.1 200"), "A was cut: {second:?}");
    let third = response(&mut c);
    assert!(third.starts_with("HTTP/1.1 200"), "{third:?}");
    b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(b.read(&mut buf), Ok(0)), "B, silent, makes room");
    drop((a, b, c));
    assert_clean_exit(server);
}

/// A waiting connection whose next head libmicrohttpd has read in part (the connection
/// waits until the head is whole, and nothing is left on its socket to peek at) is not the
/// one displaced for a second: it was cut, and its request lost. A head trickled for longer
/// is a slow one: its connection makes room, so slow heads cannot lock clients out.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn a_head_arriving_protects_its_connection_for_a_second() {
    let server = Server::asan(&["--max-connections", "2", "--head-timeout-ms", "20000"]);
    let port = server.port;
    let (headers, body) = modern_call(1, "echo");
    let request = post_text(port, &headers, &body, false);
    let (start, rest) = request.as_bytes().split_at(20);
    // A: served, then the start of its next head; B: silent, waiting after it.
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    a.write_all(request.as_bytes()).unwrap();
    assert!(response_within_5s(&mut a).starts_with("HTTP/1.1 200"));
    a.write_all(start).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    assert!(response_within_5s(&mut c).starts_with("HTTP/1.1 200"));
    assert!(cut_within_3s(&mut b), "B, silent, makes room");
    a.write_all(rest).unwrap();
    let second = response_within_5s(&mut a);
    assert!(second.starts_with("HTTP/1.1 200"), "A was cut: {second:?}");

    // C answered again (so A waits longest), then A's next head trickles for 2 s: well past
    // the grace of a second even when the server is slow to read it (ASAN, a loaded machine).
    c.write_all(request.as_bytes()).unwrap();
    assert!(response_within_5s(&mut c).starts_with("HTTP/1.1 200"));
    a.write_all(start).unwrap();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(200));
        a.write_all(b"X").unwrap();
    }
    let mut d = TcpStream::connect(("127.0.0.1", port)).unwrap();
    d.write_all(request.as_bytes()).unwrap();
    assert!(response_within_5s(&mut d).starts_with("HTTP/1.1 200"));
    assert!(cut_within_3s(&mut a), "the slow head makes room");
    c.write_all(request.as_bytes()).unwrap();
    assert!(
        response_within_5s(&mut c).starts_with("HTTP/1.1 200"),
        "C stays"
    );
    drop((a, b, c, d));
    assert_clean_exit(server);
}

/// After a chunked request (whose framing its body's length leaves out), a connection whose
/// next head has begun is still passed over at the cap: its bytes are measured when the
/// request is whole, not added up. And heads kept arriving cannot lock new clients out: when
/// every waiting connection has one arriving, the one waiting longest goes all the same.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn at_the_cap_chunked_requests_are_counted_and_arriving_heads_still_make_room() {
    let server = Server::asan(&["--max-connections", "2", "--head-timeout-ms", "20000"]);
    let port = server.port;
    let (headers, body) = modern_call(1, "echo");
    let request = post_text(port, &headers, &body, false);
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let start = &request.as_bytes()[..20];
    let rest = &request.as_bytes()[20..];
    // A: a chunked request; B: a plain one. Well past a second later, A's next head begins.
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    a.write_all(chunked.as_bytes()).unwrap();
    assert!(response_within_5s(&mut a).starts_with("HTTP/1.1 200"));
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    b.write_all(request.as_bytes()).unwrap();
    assert!(response_within_5s(&mut b).starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(1500));
    a.write_all(start).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    assert!(response_within_5s(&mut c).starts_with("HTTP/1.1 200"));
    assert!(cut_within_3s(&mut b), "B, idle, makes room");
    a.write_all(rest).unwrap();
    let second = response_within_5s(&mut a);
    assert!(second.starts_with("HTTP/1.1 200"), "A was cut: {second:?}");

    // Both waiting connections with a head arriving (C waits longest): a new client is
    // served in C's place at once, not once their second of grace has passed.
    c.write_all(start).unwrap();
    a.write_all(start).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let knocked = Instant::now();
    let mut d = TcpStream::connect(("127.0.0.1", port)).unwrap();
    d.write_all(request.as_bytes()).unwrap();
    let fourth = response_within_5s(&mut d);
    let took = knocked.elapsed();
    assert!(fourth.starts_with("HTTP/1.1 200"), "D: {fourth:?}");
    // (Their second of grace would end 900 ms after D came: 700 leaves room both ways.)
    assert!(took < Duration::from_millis(700), "D waited {took:?}");
    assert!(cut_within_3s(&mut c), "C, waiting longest, makes room");
    a.write_all(rest).unwrap();
    assert!(
        response_within_5s(&mut a).starts_with("HTTP/1.1 200"),
        "A stays"
    );
    drop((a, b, c, d));
    assert_clean_exit(server);
}

/// A request head trickled a line at a time is cut off once `--head-timeout-ms` has passed
/// (libmicrohttpd's own timeout restarts at every byte, so such a client held its slot for
/// good); so is a kept-alive connection that sends no next request. Requests in time are
/// served, two on one connection included.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn a_head_trickled_past_its_timeout_is_cut_off() {
    let server = Server::asan(&["--head-timeout-ms", "1500"]);
    let port = server.port;
    let closed = |s: &mut TcpStream| {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4096];
        let gone = matches!(s.read(&mut buf), Ok(0));
        s.set_nonblocking(false).unwrap();
        gone
    };
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes())
        .unwrap();
    let started = std::time::Instant::now();
    let mut cut = false;
    for n in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        if s.write_all(format!("X-Line-{n}: 1\r\n").as_bytes())
            .is_err()
            || closed(&mut s)
        {
            cut = true;
            break;
        }
    }
    assert!(cut, "the trickled head was never cut off");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "cut off after {took:?}");
    assert!(
        took >= Duration::from_millis(1000),
        "cut off early: {took:?}"
    );
    // Two requests in time on one connection are served; then, silent, it is closed.
    let (headers, body) = modern_call(3, "echo");
    let mut kept = TcpStream::connect(("127.0.0.1", port)).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = post_text(port, &headers, &body, false);
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(600));
        kept.write_all(request.as_bytes()).unwrap();
        let whole = one_response(&mut kept);
        assert!(whole.starts_with("HTTP/1.1 200"), "{whole}");
        assert!(whole.contains(r#""text":"hi""#), "{whole}");
    }
    let idle = std::time::Instant::now();
    let mut buf = [0u8; 64];
    assert!(
        matches!(kept.read(&mut buf), Ok(0)),
        "the idle connection was closed"
    );
    let took = idle.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_clean_exit(server);
}

/// A body trickled a byte at a time is cut off once `--body-timeout-ms` has passed since its
/// head (libmicrohttpd's own timeout restarts at every byte, so such a client held its slot
/// for as long as it liked); a body that comes in time is served.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn a_body_trickled_past_its_timeout_is_cut_off() {
    let server = Server::asan(&["--body-timeout-ms", "500"]);
    let port = server.port;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let mut cut = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        if s.write_all(b" ").is_err() {
            cut = true;
            break;
        }
        // A closed connection shows on the read side first.
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let gone = matches!(s.read(&mut buf), Ok(0));
        s.set_nonblocking(false).unwrap();
        if gone {
            cut = true;
            break;
        }
    }
    assert!(cut, "the trickled body was never cut off");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cut off after {:?}",
        started.elapsed()
    );
    // A request in time is served.
    let (headers, body) = modern_call(3, "echo");
    let out = post(port, &headers, &body);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert_clean_exit(server);
}

/// The head of a POST that declares a body of `length` bytes (none of which it sends).
fn head_of_body(port: u16, length: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{MODERN}Mcp-Method: tools/list\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// Whether the server has closed `s` (an end, or a reset), looking without waiting: what
/// bytes have come are read past.
fn gone(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let gone = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break true,
        }
    };
    s.set_nonblocking(false).unwrap();
    gone
}

/// Sends a few bytes of body on `s` (5 every 100 ms: 50 bytes a second) unless it was cut;
/// whether it was cut, by this write failing or the server's close seen.
fn trickle(s: &mut TcpStream) -> bool {
    s.write_all(b"     ").is_err() || gone(s)
}

const BELOW_THE_RATE: &[&str] = &[
    "--body-timeout-ms",
    "30000",
    "--min-body-rate",
    "1000",
    "--body-rate-grace-ms",
    "500",
];

/// A body that comes slower than `--min-body-rate` (here 1,000 bytes a second) is cut off
/// soon after its grace (500 ms), long before the body timeout (30 s): one trickled at 50
/// bytes a second, and one that stops after its first 100 bytes (no byte comes to wake a
/// check; the heartbeat's sweep finds it).
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn a_body_below_the_minimum_rate_is_cut_off_after_its_grace() {
    let server = Server::asan(BELOW_THE_RATE);
    let port = server.port;
    let head = head_of_body(port, 10_000);
    let mut trickled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    trickled.write_all(head.as_bytes()).unwrap();
    stalled.write_all(head.as_bytes()).unwrap();
    stalled.write_all(&[b' '; 100]).unwrap();
    let started = Instant::now();
    let mut cut = [None, None];
    while started.elapsed() < Duration::from_secs(4) && cut.contains(&None) {
        std::thread::sleep(Duration::from_millis(100));
        if cut[0].is_none() && trickle(&mut trickled) {
            cut[0] = Some(started.elapsed());
        }
        if cut[1].is_none() && gone(&mut stalled) {
            cut[1] = Some(started.elapsed());
        }
    }
    for (which, at) in ["trickled", "stalled"].into_iter().zip(cut) {
        let at = at.unwrap_or_else(|| panic!("the {which} body was not cut off within 4 s"));
        assert!(
            at >= Duration::from_millis(500) && at < Duration::from_secs(3),
            "the {which} body was cut off after {at:?}"
        );
    }
    assert_clean_exit(server);
}

/// A body that comes slowly but above `--min-body-rate` (2,000 bytes a second against
/// 1,000, for 2 s past the grace) is served whole; and an SSE stream open all the while is
/// not cut (the rate is for bodies still arriving, not for answers).
#[test]
#[allow(clippy::disallowed_methods)] // paced by the real clock
fn a_body_above_the_minimum_rate_is_served() {
    let server = Server::asan(BELOW_THE_RATE);
    let port = server.port;
    let (mut stream, _) = open_get_stream(port);
    let text = "a".repeat(6000);
    let headers = format!("{MODERN}Mcp-Method: tools/call\r\nMcp-Name: echo\r\n");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let request = post_text(port, &headers, &body, true);
    let (head, body) = request.as_bytes().split_at(request.len() - body.len());
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(head).unwrap();
    // Paced by the clock, not by the pieces: a late wake-up sends more, never less.
    let started = Instant::now();
    let mut sent = 0;
    while started.elapsed() < Duration::from_millis(2500) {
        std::thread::sleep(Duration::from_millis(20));
        let due = (started.elapsed().as_millis() as usize * 2).min(body.len());
        s.write_all(&body[sent..due]).expect("the body is taken");
        sent = due;
    }
    assert!(sent < body.len(), "the body went whole before the end");
    s.write_all(&body[sent..]).unwrap();
    let out = response_within_5s(&mut s);
    assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
    assert!(out.contains(&format!(r#""text":"{text}""#)), "{out}");
    assert!(!gone(&mut stream), "the SSE stream was cut");
    drop(stream);
    assert_clean_exit(server);
}

/// A client that sends a head and then no body at all is cut off once `--body-timeout-ms`
/// has passed (here without a minimum rate), not after libmicrohttpd's own 30 s: no byte
/// comes to wake the check made when one does.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn a_body_that_never_comes_is_cut_off_at_its_timeout() {
    let server = Server::asan(&["--body-timeout-ms", "1000", "--min-body-rate", "0"]);
    let port = server.port;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(head_of_body(port, 100).as_bytes()).unwrap();
    let started = Instant::now();
    assert!(cut_within_3s(&mut s), "the silent body was not cut off");
    // (The server's clock for the body starts a moment before ours: a little slack.)
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "cut off early: {took:?}"
    );
    assert_clean_exit(server);
}

/// At the cap, connections whose bodies come below `--min-body-rate` are cut once their grace
/// is over, and a new client is served within seconds: one trickled (cut when a piece comes)
/// and one stalled after its first bytes (cut by the heartbeat's sweep). A connection in a
/// request is never displaced: before, such bodies held every slot for the whole body
/// timeout (or, stalled, libmicrohttpd's own 30 s).
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn at_the_cap_bodies_below_the_minimum_rate_make_room() {
    let mut args = vec!["--max-connections", "2", "--head-timeout-ms", "20000"];
    args.extend_from_slice(BELOW_THE_RATE);
    let server = Server::asan(&args);
    let port = server.port;
    let head = head_of_body(port, 10_000);
    let mut slow: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(&[b' '; 100]).unwrap();
            s
        })
        .collect();
    // The first trickles on, the second sends nothing more; until both are cut (5 s at most).
    let slow = std::thread::spawn(move || {
        let started = Instant::now();
        let mut cut = [None, None];
        while started.elapsed() < Duration::from_secs(5) && cut.contains(&None) {
            std::thread::sleep(Duration::from_millis(100));
            if cut[0].is_none() && trickle(&mut slow[0]) {
                cut[0] = Some(started.elapsed());
            }
            if cut[1].is_none() && gone(&mut slow[1]) {
                cut[1] = Some(started.elapsed());
            }
        }
        cut
    });
    std::thread::sleep(Duration::from_millis(200));
    let (headers, body) = modern_call(1, "echo");
    let knocked = Instant::now();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(post_text(port, &headers, &body, true).as_bytes())
        .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
    let out = one_response(&mut c);
    let took = knocked.elapsed();
    assert!(out.starts_with("HTTP/1.1 200"), "after {took:?}: {out:?}");
    assert!(out.contains(r#""text":"hi""#), "{out}");
    assert!(took < Duration::from_secs(4), "served after {took:?}");
    let cut = slow.join().unwrap();
    assert!(
        cut.iter().all(Option::is_some),
        "trickled, stalled: cut after {cut:?}"
    );
    assert_clean_exit(server);
}

/// The rate flags take plain numbers only: anything else is refused with a message and
/// exit status 2, never read as 0 or as the number it starts with.
#[test]
fn bad_body_rate_flags_are_refused() {
    for (flag, value, message) in [
        ("--min-body-rate", "-1", "bad minimum body rate"),
        ("--min-body-rate", "+5", "bad minimum body rate"),
        ("--min-body-rate", "12x", "bad minimum body rate"),
        ("--min-body-rate", "", "bad minimum body rate"),
        ("--min-body-rate", "99999999999", "bad minimum body rate"),
        ("--body-rate-grace-ms", " 5", "bad body rate grace"),
        ("--body-rate-grace-ms", "5s", "bad body rate grace"),
        (
            "--body-rate-grace-ms",
            "99999999999999999999",
            "bad body rate grace",
        ),
    ] {
        let mut c = Command::new(server_asan());
        c.args([flag, value]);
        let out = run_sanitized(c);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag} {value:?}: {all}");
        assert!(all.contains(message), "{flag} {value:?}: {all}");
    }
    // Without its value, a flag gets the usage, which lists both.
    let mut c = Command::new(server_asan());
    c.arg("--min-body-rate");
    let out = run_sanitized(c);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("[--min-body-rate N] [--body-rate-grace-ms N]"),
        "{all}"
    );
}

/// The bodies being read share `--max-body-total` (here its least, MAX_BODY + 1): a body
/// still arriving whose buffer has grown to 4 MiB holds it, and any other request then gets
/// 503 with `Retry-After` (its body dropped) instead of adding to what the server holds. The
/// held body is still served, and gives its share back: the next request is served. Before
/// the shared bound, every connection could hold MAX_BODY at once.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real server took: the real clock
fn bodies_past_the_shared_bound_get_503_and_the_bound_is_given_back() {
    let server = Server::asan(&["--max-body-total", "4194305"]);
    let port = server.port;
    let (headers, call) = modern_call(1, "echo");
    let size = 2_600_000;
    let held_body = format!("{call}{}", " ".repeat(size - call.len()));
    let text = post_text(port, &headers, &held_body, true);
    let (head, rest) = text.split_at(text.len() - 100_000);
    let mut held = TcpStream::connect(("127.0.0.1", port)).unwrap();
    held.write_all(head.as_bytes()).unwrap();
    // Once the server has read past 2 MiB of it (its buffer at 4 MiB), a small call does not
    // fit (it may come first: retried).
    let (headers2, call2) = modern_call(2, "echo");
    let mut refused = None;
    for _ in 0..50 {
        let out = post(port, &headers2, &call2);
        if !out.starts_with("HTTP/1.1 200") {
            refused = Some(out);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let refused = refused.expect("a body past the shared bound");
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("\r\nRetry-After: 1\r\n"), "{refused}");
    // A body over MAX_BODY (4 MiB) that does not fit either gets its 413, not a 503 its
    // client would send it again after.
    let big = format!("{call2}{}", " ".repeat(5 * 1024 * 1024));
    let out = post(port, &headers2, &big);
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    held.write_all(rest.as_bytes()).unwrap();
    held.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = Vec::new();
    let _ = held.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let out = post(port, &headers2, &call2);
    assert!(
        out.starts_with("HTTP/1.1 200"),
        "the bound given back: {out}"
    );
    assert_clean_exit(server);
}
