//! The HTTP examples against each other, as processes: `http_client` reports the outcome of a
//! session in its exit status, a failed tool call included.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::stdio::example_binary;

/// `http_server` on a free loopback port, and its URL.
fn start_server() -> (Child, String) {
    let mut child = Command::new(example_binary("http_server"))
        .args(["0", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start http_server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}

fn client(url: &str, scenario: &str) -> (i32, String) {
    let out = Command::new(example_binary("http_client"))
        .arg(url)
        .env("MCP_CONFORMANCE_SCENARIO", scenario)
        .output()
        .expect("run http_client");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_client_exits_non_zero_when_the_tool_call_fails() {
    let (mut server, url) = start_server();
    // Listing tools works: success.
    let (code, err) = client(&url, "list");
    assert_eq!(code, 0, "{err}");
    // `tools_call` calls `add_numbers`, which the fixture does not have: the server answers
    // with an error result, and the client must say so.
    let (code, err) = client(&url, "tools_call");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("FAILED"), "{err}");
    // A tool that exists and succeeds: success.
    let (code, err) = client(&url, "call");
    assert_eq!(code, 0, "{err}");
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn the_client_says_why_when_nothing_listens() {
    // It said only "closed: TransportFailed(Disconnected)". A port just freed may be taken
    // by another test's server before the client connects: then another one is tried.
    let (code, err) = (0..5)
        .map(|_| {
            let port = {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                listener.local_addr().unwrap().port()
            };
            client(&format!("http://127.0.0.1:{port}/mcp"), "list")
        })
        .find(|(_, err)| err.contains("Connection refused"))
        .expect("a free port refuses the client, and the client says so");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("FAILED: closed: TransportFailed"), "{err}");
}

/// A handshake-era server on a thread per connection: it records each request (method and
/// body), gives `initialize` a session (unless `sessions` is false), lists one tool `slow`
/// whose call it never answers, and answers notifications and the DELETE. It answers a
/// cancellation only after 300 ms, and records it then.
fn hanging_call_server(sessions: bool) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let method = line.split(' ').next().unwrap_or("").to_owned();
                    let mut length = 0;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end().to_ascii_lowercase();
                        if h.is_empty() {
                            break;
                        }
                        if let Some(v) = h.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    let name = body["method"].as_str().unwrap_or(&method).to_owned();
                    if name == "notifications/cancelled" {
                        std::thread::sleep(std::time::Duration::from_millis(300));
                    }
                    log.lock().unwrap().push(name.clone());
                    let result = match name.as_str() {
                        "initialize" => serde_json::json!({"protocolVersion":"2025-11-25",
                            "capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}),
                        "tools/list" => {
                            serde_json::json!({"tools":[{"name":"slow","inputSchema":{"type":"object"}}]})
                        }
                        "tools/call" => {
                            std::thread::sleep(std::time::Duration::from_secs(60));
                            return;
                        }
                        _ => {
                            let status = if method == "GET" {
                                "405 No"
                            } else {
                                "202 Accepted"
                            };
                            let reply = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                            if writer.write_all(reply.as_bytes()).is_err() {
                                return;
                            }
                            continue;
                        }
                    };
                    let answer =
                        serde_json::json!({"jsonrpc":"2.0","id":body["id"],"result":result})
                            .to_string();
                    let session = if sessions {
                        "Mcp-Session-Id: s1\r\n"
                    } else {
                        ""
                    };
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{session}Content-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn sigterm_cancels_the_clients_call_and_ends_its_session() {
    // The example died at once on SIGINT or SIGTERM: no cancellation, no DELETE, and the
    // session stayed on the server (found by an audit of the tokio client). Then its DELETE
    // could overtake the cancellation, and the example exit before the cancellation left
    // (CI caught that).
    let seen = interrupt_a_hanging_call(true);
    let call = seen.iter().position(|m| m == "tools/call").unwrap();
    let cancel = seen.iter().position(|m| m == "notifications/cancelled");
    let delete = seen.iter().position(|m| m == "DELETE");
    assert!(
        matches!((cancel, delete), (Some(c), Some(d)) if call < c && c < d),
        "{seen:?}"
    );
}

#[test]
fn sigterm_cancels_the_clients_call_on_a_server_without_sessions() {
    // No session, so no DELETE to wait for: the example exited before its cancellation
    // reached the server.
    let seen = interrupt_a_hanging_call(false);
    let call = seen.iter().position(|m| m == "tools/call").unwrap();
    assert!(
        seen[call + 1..]
            .iter()
            .any(|m| m == "notifications/cancelled"),
        "{seen:?}"
    );
    assert!(!seen.iter().any(|m| m == "DELETE"), "{seen:?}");
}

/// Runs the example client against [`hanging_call_server`], sends it SIGTERM once its tool
/// call is out, checks that it says so and fails, and returns what the server saw by then.
#[allow(clippy::disallowed_methods)] // a process test: it bounds its wait by the real clock
fn interrupt_a_hanging_call(sessions: bool) -> Vec<String> {
    let (url, seen) = hanging_call_server(sessions);
    let child = Command::new(example_binary("http_client"))
        .arg(&url)
        .env("MCP_CONFORMANCE_SCENARIO", "call-slow")
        .env(
            "MCP_CONFORMANCE_CONTEXT",
            r#"{"toolCalls":[{"name":"slow","arguments":{}}]}"#,
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run http_client");
    let started = std::time::Instant::now();
    while !seen.lock().unwrap().iter().any(|m| m == "tools/call") {
        assert!(
            started.elapsed().as_secs() < 20,
            "no call: {:?}",
            seen.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted (SIGTERM)"), "{err}");
    seen.lock().unwrap().clone()
}

/// A client whose stderr is a closed pipe still ends its session: `eprintln!` panicked on the
/// first line it wrote ("N tools"), and the process exited (101) without its DELETE, leaving
/// the session on the server until it expired (found by a review of the tokio host).
#[test]
fn a_closed_stderr_does_not_cut_the_clients_close() {
    let (url, seen) = hanging_call_server(true);
    let mut child = Command::new(example_binary("http_client"))
        .arg(&url)
        .env("MCP_CONFORMANCE_SCENARIO", "list")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run http_client");
    drop(child.stderr.take()); // (closed before the client writes a line)
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{:?}", seen.lock().unwrap());
    assert!(
        seen.lock().unwrap().iter().any(|m| m == "DELETE"),
        "{:?}",
        seen.lock().unwrap()
    );
}
