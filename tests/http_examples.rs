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
