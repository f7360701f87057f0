//! The axum example (`McpService` routed inside an axum app) against the Python and
//! TypeScript SDK HTTP clients, in both eras, next to the app's own route; then a graceful
//! stop on SIGTERM.

#[path = "../../../tests/common/mod.rs"]
mod root_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use root_common::stdio::{example_binary, python_client, python_site, ts_client};

fn assert_client(mut client: Command, url: &str, ok_line: &str, expect: &[&str]) {
    let out = client
        .args(["--url", url])
        .env("PYTHONPATH", python_site())
        .output()
        .expect("run the client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for e in expect {
        assert!(text.contains(e), "{e:?} missing from {text}");
    }
    assert!(text.trim_end().ends_with(ok_line), "{text}");
}

#[test]
fn the_axum_example_serves_sdk_clients_beside_its_own_routes_and_stops_gracefully() {
    let (mut server, url) = start_example(Stdio::inherit());

    let python = |mode: &str, version: &str| {
        assert_client(
            python_client(&["--mode", mode, "--expect-version", version]),
            &url,
            &format!("PY_CLIENT_OK {version}"),
            &[
                "echo(text='hello from python') -> 'hello from python'",
                "read mem://greeting -> 1 content item(s)",
                "get greet({}) -> 1 message(s)",
            ],
        )
    };
    python("legacy", "2025-11-25");
    python("auto", "2026-07-28");
    assert_client(
        ts_client(&[]),
        &url,
        "TS_CLIENT_OK 2025-11-25",
        &[r#"echo(text="hello from typescript") -> "hello from typescript""#],
    );

    // The app's own route lives beside the MCP endpoint.
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let mut health = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        health,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    health.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("ok"), "{reply}");

    // An unknown tool is -32602 (it was a result with isError): a stateless 2026-07-28 call
    // gets it with HTTP 400.
    let body = concat!(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","#,
        r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
        r#""io.modelcontextprotocol/clientCapabilities":{}}}}"#
    );
    let mut call = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        call,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: nope\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    call.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains(r#""code":-32602"#), "{reply}");

    let status = stop_example(&mut server, Duration::from_secs(10));
    assert!(status.success(), "exits cleanly on SIGTERM: {status}");
}

/// Starts the example on a free port: the process and its MCP URL.
fn start_example(stderr: Stdio) -> (Child, String) {
    let mut server = Command::new(example_binary("axum_server"))
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    assert!(url.ends_with("/mcp"), "{url:?}");
    (server, url)
}

/// Sends the example SIGTERM and waits up to `limit` for it to exit (killing it after that,
/// and failing).
fn stop_example(server: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let pid = server.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let step = Duration::from_millis(50);
    for _ in 0..=limit.as_millis() / step.as_millis() {
        if let Some(status) = server.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(step);
    }
    let _ = server.kill();
    panic!("still running {limit:?} after SIGTERM");
}

/// A client that sent half a request head and holds its connection cannot keep the example
/// from exiting on SIGTERM: axum's graceful shutdown waits for every connection to close,
/// which that one never does, and the example waited with it for good.
#[test]
fn the_axum_example_exits_on_sigterm_despite_a_stalled_client() {
    let (mut server, url) = start_example(Stdio::null());
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let mut stalled = std::net::TcpStream::connect(&addr).unwrap();
    write!(stalled, "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    stop_example(&mut server, Duration::from_secs(15));
    drop(stalled);
}
