//! The `mcpwire` command, run as a process: probe against real servers, serve under real
//! clients, tap between them, bad servers, and the demo.

// Some tests time how long a fallback takes: they read the clock.
#![allow(clippy::disallowed_methods)]

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::free_port;
use common::stdio::{
    answers_in_a_session, assert_unknown_cursors_are_invalid_params,
    assert_unknown_tools_and_prompts_are_invalid_params, node_modules, python_client, python_site,
    root, run_client, ts_client,
};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

fn mcpwire(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("PYTHONPATH", python_site())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory of this test process's own for a test's files (`mcpwire-<name>-<pid>` in the
/// system's temporary directory), created if need be.
/// A directory of the test's own under the system's temporary one, removed with it.
struct Scratch(std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("mcpwire-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn everything() -> String {
    node_modules()
        .join("@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

fn py_server() -> String {
    root()
        .join("tests/peers/py_server.py")
        .display()
        .to_string()
}

#[test]
fn probe_against_server_everything() {
    let (code, out, err) = mcpwire(&["probe", "--", "node", &everything(), "stdio"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("server        mcp-servers/everything"),
        "{out}"
    );
    assert!(
        out.contains("protocol      2025-11-25 (handshake era)"),
        "{out}"
    );
    assert!(out.contains("tools (13)"), "{out}");
    assert!(out.contains("  echo "), "{out}");
    assert!(out.contains("resourceTemplates (2)"), "{out}");
    assert!(out.contains("prompts (4)"), "{out}");
    assert!(out.contains("ping          ok ("), "{out}");
    for step in [
        "initialize",
        "tools/list",
        "resources/list",
        "prompts/list",
        "ping",
    ] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(step) && l.ends_with(" ms")),
            "{step}: {out}"
        );
    }
}

#[test]
fn probe_json_against_the_python_sdk_server_reaches_the_stateless_era() {
    let (code, out, err) = mcpwire(&[
        "probe",
        "--json",
        "--call",
        "add",
        r#"{"a":20,"b":22}"#,
        "--",
        "python3",
        &py_server(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["protocolVersion"], "2026-07-28");
    assert_eq!(v["era"], "stateless");
    assert_eq!(v["serverInfo"]["name"], "py-peer-server");
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"add"),
        "{tools:?}"
    );
    assert_eq!(v["resources"][0]["uri"], "mem://note");
    assert_eq!(v["prompts"][0]["name"], "greet");
    assert_eq!(v["call"]["content"][0]["text"], "42");
    assert!(v["ping"].is_null(), "no ping in the stateless era");
    assert!(v["latencies"].as_array().unwrap().len() >= 5);
}

/// A stdio server that takes longer than the 5 s discover wait to start (npx fetching it,
/// say) still gets the stateless era: probe falls back to `initialize` meanwhile, the
/// Python SDK's server answers the `server/discover` it read first and then refuses the
/// `initialize` with -32022, and probe discovers again.
#[test]
fn probe_waits_for_a_slow_starting_server_before_it_falls_back() {
    let server = format!("sleep 6; exec python3 {}", py_server());
    let (code, out, err) = mcpwire(&["probe", "--json", "--", "sh", "-c", &server]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["era"], "stateless", "{v}");
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
}

#[test]
fn probe_a_pinned_legacy_version() {
    let (code, out, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2025-06-18",
        "--",
        "python3",
        &py_server(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("protocol      2025-06-18 (handshake era)"),
        "{out}"
    );
}

/// probe quotes the line the server got wrong, also when more lines came after it in the same
/// read (it quoted the last line: a valid notification that followed, say).
#[test]
fn probe_quotes_the_offending_line_not_the_last_one() {
    let server = |bad: &str| {
        format!(
            r#"
import sys, json
note = json.dumps({{"jsonrpc": "2.0", "method": "notifications/message", "params": {{"level": "info", "data": "fine"}}}})
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        ok = json.dumps({{"jsonrpc":"2.0","id":m["id"],"result":{{"protocolVersion":m["params"]["protocolVersion"],"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"x","version":"1"}}}}}})
        sys.stdout.write(ok + "\n" + {bad:?} + "\n" + note + "\n")
        sys.stdout.flush()
"#
        )
    };
    for (bad, says) in [
        (
            r#"{"jsonrpc":"2.0","bogus":1}"#,
            "the server sent an invalid JSON-RPC message",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"nope","result":{}}"#,
            "the server answered a request that was never sent",
        ),
    ] {
        let script = server(bad);
        let (code, _, err) = mcpwire(&[
            "probe",
            "--protocol",
            "2025-11-25",
            "--timeout",
            "5",
            "--",
            "python3",
            "-c",
            &script,
        ]);
        assert_eq!(code, 4, "{err}");
        assert!(err.contains(says), "{err}");
        let quoted = format!("{bad:?}");
        assert!(err.contains(&quoted), "{err} should quote {quoted}");
    }
}

/// An argument that is not UTF-8 is a usage error (2), reported in `--json` too; the check for
/// `--json` panicked on it.
#[test]
fn probe_reports_an_argument_that_is_not_utf8_as_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new(BIN)
        .args(["probe", "--json"])
        .arg(std::ffi::OsStr::from_bytes(b"\xff"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["error"]["exitCode"], 2);
}

/// A server that exits while a process it started keeps its stdout open: no end of output
/// comes, yet the server is gone (5), not slow (6, until the twenty-seventh session).
#[test]
fn probe_reports_a_server_that_exited_behind_a_lingering_child() {
    let (code, _, err) = mcpwire(&[
        "probe",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        // (Its stderr elsewhere: it is probe's, which the test reads to its end.)
        "sleep 10.4711 2>/dev/null & exit 3",
    ]);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("exited (exit status: 3)") && err.contains("still holds its output open"),
        "{err}"
    );
    // What the server left in its process group goes with the probe (it outlived it). Only
    // without a terminal: in a terminal's foreground the server shares the probe's group.
    if std::fs::File::open("/dev/tty").is_err() {
        let lingering = || {
            std::process::Command::new("pgrep")
                .args(["-f", "sleep 10.4711"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while lingering() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(!lingering(), "the server's child outlived the probe");
    }
}

#[test]
fn bad_servers_get_exact_exit_codes_and_messages() {
    let (code, _, err) = mcpwire(&[
        "probe",
        "--timeout",
        "2",
        "--",
        "sh",
        "-c",
        "echo 'hello, I am not MCP'; sleep 5",
    ]);
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("error: the server wrote something that is not JSON on stdout"),
        "{err}"
    );
    assert!(err.contains("hello, I am not MCP"), "{err}");

    let crash = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc":"2.0","id":m["id"],"result":{"protocolVersion":m["params"]["protocolVersion"],"capabilities":{"tools":{}},"serverInfo":{"name":"crashy","version":"1"}}}), flush=True)
    elif m.get("method") == "tools/list":
        sys.exit(3)
    elif "id" in m and "method" in m:
        print(json.dumps({"jsonrpc":"2.0","id":m["id"],"error":{"code":-32601,"message":"no"}}), flush=True)
"#;
    let (code, _, err) = mcpwire(&["probe", "--timeout", "2", "--", "python3", "-c", crash]);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains(
            "error: the server closed its output before answering tools/list (exit status: 3)"
        ),
        "{err}"
    );

    let (code, _, err) = mcpwire(&["probe", "--timeout", "1", "--", "sleep", "30"]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("error: no answer to initialize"), "{err}");

    let (code, _, err) = mcpwire(&["probe", "--", "/nonexistent/server"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, _) = mcpwire(&["probe", "--protocol", "1999-01-01", "--", "true"]);
    assert_eq!(code, 2);
    let (code, _, err) = mcpwire(&[
        "probe",
        "--call",
        "nope",
        "{}",
        "--",
        "python3",
        &py_server(),
    ]);
    assert_eq!(code, 7, "{err}");
}

/// A stdin that cannot be read (a directory: EISDIR) is a failure, said on stderr, for both
/// stdio servers: the plain one took it for the end of input and exited 0 in silence (found
/// by a review of the CLI).
#[test]
fn serve_fails_when_stdin_cannot_be_read() {
    for args in [&["serve"][..], &["serve", "--tokio"][..]] {
        let out = Command::new(BIN)
            .args(args)
            .stdin(std::fs::File::open("/").unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("directory"), "{args:?}: {err}");
    }
}

/// A stdout that cannot be written (a full disk: `/dev/full`) is a failure, said on stderr,
/// for both stdio servers: the plain one lost every answer and exited 0 in silence (found by
/// a review of the CLI).
#[test]
fn serve_fails_when_stdout_cannot_be_written() {
    for args in [&["serve"][..], &["serve", "--tokio"][..]] {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
        );
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("No space left"), "{args:?}: {err}");
    }
}

#[test]
fn serve_under_the_python_and_typescript_sdk_clients() {
    let (ok, out, _) = run_client(
        python_client(&["--mode", "auto", "--expect-version", "2026-07-28"]),
        &[BIN, "serve"],
    );
    assert!(ok, "{out}");
    let (ok, out, _) = run_client(
        python_client(&["--mode", "legacy", "--expect-version", "2025-11-25"]),
        &[BIN, "serve"],
    );
    assert!(ok, "{out}");
    let (ok, out, _) = run_client(ts_client(&[]), &[BIN, "serve"]);
    assert!(ok, "{out}");
}

/// The Python SDK's `Client.listen` (2026-07-28) against the demo, over stdio (both loops) and
/// HTTP: the demo reviews listens and grants only its own resources, as `resources/subscribe`
/// accepts only them; the stream then hears the update of the granted one and not of the other.
/// Before, the engine granted `file:///etc/passwd` too.
#[test]
fn serve_grants_python_sdk_listens_only_its_own_resources() {
    let listen = || {
        let mut c = Command::new("python3");
        c.arg(root().join("tests/peers/py_listen.py"));
        c
    };
    for server in [&[BIN, "serve"][..], &[BIN, "serve", "--tokio"]] {
        let (ok, out, _) = run_client(listen(), server);
        assert!(
            ok && out.contains("PY_LISTEN_OK demo://readme"),
            "{server:?}: {out}"
        );
    }
    let (_server, url) = serve_http(&[]);
    let out = listen()
        .args(["--url", &url])
        .env("PYTHONPATH", python_site())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("PY_LISTEN_OK demo://readme"),
        "http: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `serve --tokio`, the same server on mcpwire-tokio's stdio driver: the SDK clients (Python
/// over pipes, TypeScript over Node's socket pairs) complete sessions in both eras.
#[test]
fn serve_on_tokio_under_the_python_and_typescript_sdk_clients() {
    let (ok, out, _) = run_client(
        python_client(&["--mode", "auto", "--expect-version", "2026-07-28"]),
        &[BIN, "serve", "--tokio"],
    );
    assert!(ok, "{out}");
    let (ok, out, _) = run_client(
        python_client(&["--mode", "legacy", "--expect-version", "2025-11-25"]),
        &[BIN, "serve", "--tokio", "--legacy"],
    );
    assert!(ok, "{out}");
    let (ok, out, _) = run_client(ts_client(&[]), &[BIN, "serve", "--tokio"]);
    assert!(ok, "{out}");
}

#[test]
fn tap_relays_every_byte_unchanged_and_logs_violations() {
    let dir = scratch_dir("tap");
    let log = dir.join("bytes.jsonl");
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n");
    input.extend_from_slice(b"not json at all\n");
    input.extend_from_slice(
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"t\":\"\u{e9}\\u00e9\"}}\n".as_bytes(),
    );
    input.extend_from_slice(&[0xff, 0xfe, b'\n', b' ', b'\n']);
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    let mut child = Command::new(BIN)
        .args(["tap", "--log", log.to_str().unwrap(), "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, input, "not one byte changed");
    let entries: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let violations = entries
        .iter()
        .filter(|e| e.get("violation").is_some())
        .count();
    assert!(
        violations >= 4,
        "both directions see the bad lines: {entries:#?}"
    );
    // cat echoes the ping back as a request from the "server", and the response as a response.
    assert!(
        entries.iter().any(|e| e["dir"] == "client->server"
            && e["kind"] == "request"
            && e["method"] == "ping")
    );
    assert!(entries.iter().all(|e| e["t_ms"].is_number()));
    // The last line has no newline: it is logged too, both ways (it passed unlogged).
    for dir in ["client->server", "server->client"] {
        assert!(
            entries
                .iter()
                .any(|e| e["dir"] == dir && e["kind"] == "response" && e["id"] == 1),
            "{dir}: {entries:#?}"
        );
    }
    // The exit entry names what was never answered with the ids as the requests had them
    // (`3` and `"3"` apart; they were both written as strings), oldest first.
    let log = dir.join("ids.jsonl");
    let mut child = tap_sh(&log, "cat >/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":\"3\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"b\"}\n",
        )
        .unwrap();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    let exit: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        exit["unanswered"],
        serde_json::json!([
            {"dir": "client->server", "id": "3", "method": "a"},
            {"dir": "client->server", "id": 3, "method": "b"},
        ]),
        "{exit}"
    );
}

#[test]
fn tap_between_a_real_client_and_server_records_latency() {
    let dir = scratch_dir("tap2");
    let log = dir.join("session.jsonl");
    let log_arg = log.display().to_string();
    let (ok, out, _) = run_client(
        python_client(&["--mode", "legacy"]),
        &[BIN, "tap", "--log", &log_arg, "--", BIN, "serve"],
    );
    assert!(ok, "{out}");
    let entries: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let answered: Vec<&Value> = entries
        .iter()
        .filter(|e| e["latency_ms"].is_number())
        .collect();
    for method in [
        "initialize",
        "tools/list",
        "tools/call",
        "resources/read",
        "prompts/get",
        "ping",
    ] {
        assert!(
            answered
                .iter()
                .any(|e| e["method"] == method && e["dir"] == "server->client"),
            "{method}: {entries:#?}"
        );
    }
    assert!(
        entries.iter().all(|e| e.get("violation").is_none()),
        "{entries:#?}"
    );
}

/// `mcpwire tap --log <log> -- sh -c <server>`.
fn tap_sh(log: &std::path::Path, server: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "tap",
        "--log",
        log.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        server,
    ]);
    cmd
}

/// `mcpwire tap --log <log> -- python3 -c <server>`, started with its stdin and stdout piped.
fn tap_python(log: &std::path::Path, server: &str) -> std::process::Child {
    Command::new(BIN)
        .args([
            "tap",
            "--log",
            log.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            server,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The entries of a tap log, checking that it is whole: every line a JSON object, the last one
/// ended by its newline, the `exit` entry last and only once.
fn tap_log(path: &std::path::Path) -> Vec<Value> {
    let raw = std::fs::read_to_string(path).unwrap();
    assert!(raw.ends_with('\n'), "the last entry is cut: {raw:?}");
    let entries: Vec<Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?} in {raw}")))
        .collect();
    let exits = entries.iter().filter(|e| e["kind"] == "exit").count();
    assert_eq!(exits, 1, "{raw}");
    assert_eq!(entries.last().unwrap()["kind"], "exit", "{raw}");
    entries
}

/// A request's method name is logged whole, but only its first 256 bytes are remembered
/// until the answer (whose entry names the method): a method name may be as long as a
/// frame, and 65,536 requests in flight are remembered.
#[test]
fn tap_remembers_at_most_256_bytes_of_a_method_name() {
    let dir = scratch_dir("tap-method");
    let log = dir.join("log.jsonl");
    // Multi-byte characters, so that the cut must fall on a character boundary.
    let method = "é".repeat(50_000);
    let mut child = Command::new(BIN)
        .args(["tap", "--log", log.to_str().unwrap(), "--"])
        .args([
            "sh",
            "-c",
            r#"head -n 1 >/dev/null; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; cat >/dev/null"#,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let request = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"{method}\"}}\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    let entries = tap_log(&log);
    let sent = entries.iter().find(|e| e["kind"] == "request").unwrap();
    assert_eq!(sent["method"].as_str().unwrap(), method, "logged whole");
    let answer = entries.iter().find(|e| e["kind"] == "response").unwrap();
    let kept = answer["method"].as_str().unwrap();
    assert_eq!(kept, "é".repeat(128), "{} bytes kept", kept.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each log entry is written whole, and the `exit` entry is the last: it was written while
/// the other thread still wrote the client's `eof` (forty-odd writes an entry), so the process
/// could end in the middle of that entry, leaving a line cut off after `exit`.
#[test]
fn tap_writes_each_log_entry_whole_and_exit_last() {
    let dir = scratch_dir("tap-whole");
    let log = dir.join("log.jsonl");
    // A server that ends at once while the client ends its input at once: a race each time.
    for _ in 0..40 {
        let mut child = Command::new(BIN)
            .args(["tap", "--log", log.to_str().unwrap(), "--", "true"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        tap_log(&log);
    }
    // A server that ends because the client did: the client's `eof` comes before `exit`.
    let input: String = (0..200)
        .map(|i| format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"))
        .collect();
    for _ in 0..10 {
        let mut child = Command::new(BIN)
            .args(["tap", "--log", log.to_str().unwrap(), "--"])
            .args(["sh", "-c", "cat >/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let entries = tap_log(&log);
        let kinds: Vec<&Value> = entries.iter().map(|e| &e["kind"]).collect();
        assert_eq!(kinds[kinds.len() - 2], "eof", "{kinds:?}");
        let unanswered = entries.last().unwrap()["unanswered"].as_array().unwrap();
        assert_eq!(unanswered.len(), 200);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cancelled request is no longer in flight, and tap's record of requests in flight is
/// bounded: it remembered every request until its answer, so a client that cancels all it
/// sends (or a server that never answers) grew tap without limit, and the exit entry with it.
#[test]
fn tap_forgets_cancelled_requests_and_bounds_what_it_remembers() {
    let dir = scratch_dir("tap-cancel");
    let run = |log: &std::path::Path, server: &str, input: &[u8]| {
        let mut child = tap_sh(log, server)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        assert!(child.wait().unwrap().success());
        tap_log(log)
    };
    // The server answers the cancelled request anyway, late (the cancel raced the answer):
    // that is matched, not a violation. A cancel for no request in flight changes nothing.
    let log = dir.join("cancel.jsonl");
    let entries = run(
        &log,
        r#"head -n 2 >/dev/null; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; cat >/dev/null"#,
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":"2","method":"ping"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#,
            "\n",
        )
        .as_bytes(),
    );
    let cancels: Vec<&Value> = entries
        .iter()
        .filter(|e| e["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancels.len(), 2, "{entries:#?}");
    assert_eq!(
        cancels[0]["cancels"],
        serde_json::json!({"id": 1, "method": "tools/call"}),
        "{entries:#?}"
    );
    assert!(cancels[1].get("cancels").is_none(), "{entries:#?}");
    let late = entries.iter().find(|e| e["kind"] == "response").unwrap();
    assert!(late.get("violation").is_none(), "{late}");
    assert_eq!(late["cancelled"], true, "{late}");
    assert_eq!(late["method"], "tools/call", "{late}");
    let exit = entries.last().unwrap();
    assert_eq!(
        exit["unanswered"],
        serde_json::json!([{"dir": "client->server", "id": "2", "method": "ping"}]),
        "{exit}"
    );
    assert_eq!(exit["unanswered_count"], 1, "{exit}");
    // Many cancelled requests: none is left over at the end.
    let mut input = String::new();
    for i in 0..20_000 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\"}}\n\
             {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{i}}}}}\n"
        ));
    }
    let exit = run(&log, "cat >/dev/null", input.as_bytes()).pop().unwrap();
    assert_eq!(exit["unanswered"], serde_json::json!([]), "{exit}");
    assert_eq!(exit["unanswered_count"], 0, "{exit}");
    // More requests than the bound, none answered: the oldest are forgotten and counted, and
    // the exit entry lists the oldest 1,000 of those remembered.
    let n = 65_536 + 2_000;
    let input: String = (0..n)
        .map(|i| format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"))
        .collect();
    let exit = run(&log, "cat >/dev/null", input.as_bytes()).pop().unwrap();
    let listed = exit["unanswered"].as_array().unwrap();
    assert_eq!(listed.len(), 1_000);
    assert_eq!(listed[0]["id"], 2_000);
    assert_eq!(listed[999]["id"], 2_999);
    assert_eq!(exit["unanswered_count"], n);
    assert_eq!(exit["forgotten"], 2_000);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that closes its stdin (stops reading): the client's writes to tap fail with a
/// broken pipe, as they would to the server itself, instead of blocking for as long as the
/// server lives once the pipe is full. What the server writes still reaches the client.
#[cfg(unix)]
#[test]
fn tap_closes_its_stdin_once_the_server_stops_reading() {
    use std::io::Read;
    let dir = scratch_dir("tap-epipe");
    let log = dir.join("log.jsonl");
    let go_on = dir.join("go-on");
    let _ = std::fs::remove_file(&go_on);
    // The server waits, its stdin closed, until the test has seen its writes fail.
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    let server = format!(
        "exec 0<&-; while [ ! -e '{}' ]; do sleep 0.05; done; echo '{answer}'",
        go_on.display()
    );
    let mut child = tap_sh(&log, &server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_tap = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Far more than the pipes between here and the server hold.
        let request = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".repeat(100_000);
        let _ = tx.send(to_tap.write_all(&request));
    });
    // Not a speed limit: a bound on waiting for what, unfixed, happens only when the server
    // ends (and the server ends only once the test lets it).
    let written = rx.recv_timeout(std::time::Duration::from_secs(60));
    std::fs::write(&go_on, b"").unwrap();
    let err = match written {
        Ok(Err(e)) => e,
        other => panic!("the client's writes did not fail while the server ran: {other:?}"),
    };
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, format!("{answer}\n"));
    assert!(child.wait().unwrap().success());
    let entries = tap_log(&log);
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "closed" && e["dir"] == "client->server"),
        "{entries:#?}"
    );
    assert!(entries.iter().all(|e| e["kind"] != "eof"), "{entries:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_demo_runs_both_eras() {
    let (code, out, err) = mcpwire(&["demo"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1. The handshake era (2025-11-25)"), "{out}");
    assert!(out.contains("negotiated 2025-11-25"), "{out}");
    assert!(out.contains("notifications/progress"), "{out}");
    assert!(out.contains("elicitation/create"), "{out}");
    assert!(out.contains("2. The stateless era (2026-07-28)"), "{out}");
    assert!(out.contains("adopted 2026-07-28"), "{out}");
    assert!(
        out.contains("notifications/subscriptions/acknowledged"),
        "{out}"
    );
    assert!(out.contains("forty-two"), "{out}");
}

/// A reader that goes away (`mcpwire probe … | head`, `mcpwire demo | head -3`) ends the
/// command quietly with 141, as SIGPIPE would end it in a shell: `println!` panicked on the
/// broken pipe and printed a backtrace.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let server = format!("{BIN} serve");
    for args in [
        vec!["probe", "--", "sh", "-c", server.as_str()],
        vec!["probe", "--json", "--", "sh", "-c", server.as_str()],
        vec!["demo"],
    ] {
        let mut child = std::process::Command::new(BIN)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start mcpwire");
        drop(child.stdout.take()); // the reader is gone before the first line
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // The help's exit codes say so.
    let (_, help, _) = mcpwire(&["probe", "--help"]);
    assert!(help.contains("141 stdout's reader went away"), "{help}");
}

/// A Redis password is not printed when the Redis cannot be reached, and it can come from
/// `MCPWIRE_REDIS_URL` instead of the command line (where `ps` shows it to every local user).
#[test]
fn a_redis_password_stays_out_of_the_messages() {
    let url = "redis://:sekrit@127.0.0.1:1/";
    let run = |args: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--http", "127.0.0.1:0", "--replica", "0"])
            .args(args)
            .env_remove("MCPWIRE_REDIS_URL");
        if let Some(url) = env {
            cmd.env("MCPWIRE_REDIS_URL", url);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (args, env) in [(&["--redis", url][..], None), (&[][..], Some(url))] {
        let (code, err) = run(args, env);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("redis://:***@127.0.0.1:1/"), "{err}");
        assert!(!err.contains("sekrit"), "{err}");
    }
    // Without a replica number the variable is not read (it may be set for every command):
    // a server that does not scale out starts as ever. A number without a URL is a usage
    // error.
    let mut plain = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("MCPWIRE_REDIS_URL", url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(plain.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
    let _ = plain.kill();
    let _ = plain.wait();
    let (code, err) = run(&[], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("MCPWIRE_REDIS_URL"),
        "{err}"
    );
}

#[test]
fn help_and_bad_usage() {
    let (code, out, _) = mcpwire(&["help"]);
    assert_eq!(code, 0);
    assert!(out.contains("mcpwire demo"));
    for bad in [
        &["frobnicate"][..],
        &["probe"],
        &["probe", "--url", "http://127.0.0.1:1/mcp", "--", "true"],
        &["tap", "--", "cat"],
        &["tap", "--log", "x.jsonl"],
        &["probe", "--timeout", "x", "--", "true"],
        &["serve", "--tokio", "--http", "127.0.0.1:0"],
        &["serve", "--redis", "redis://127.0.0.1:1/"],
        &["serve", "--touch-interval", "5", "--http", "127.0.0.1:0"],
        &["serve", "--replica", "70000"],
    ] {
        let (code, out, err) = mcpwire(bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(out.is_empty(), "{bad:?}: {out}");
        assert!(
            err.starts_with("error: ") && err.contains("--help"),
            "{bad:?}: {err}"
        );
    }
    // Every command explains itself, as command-line tools do, and the version is printed.
    for (args, want) in [
        (&["--help"][..], "tap"),
        (&["help", "probe"], "--timeout"),
        (&["probe", "--help"], "EXIT CODES"),
        (&["serve", "--help"], "--touch-interval"),
        (&["tap", "-h"], "--log"),
    ] {
        let (code, out, err) = mcpwire(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(want), "{args:?}: {out}");
    }
    let (code, out, _) = mcpwire(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), concat!("mcpwire ", env!("CARGO_PKG_VERSION")));
    // `--option=value` is taken as `--option value`; a probe that fails before it learns
    // anything prints no empty report.
    let (code, out, err) = mcpwire(&["probe", "--timeout=0.5", "--", "/nonexistent/server"]);
    assert_eq!(code, 3, "{err}");
    assert!(out.is_empty(), "{out}");
    // No option names that MCP launchers swallow (the Inspector CLI swallows flags named like its own options).
    for swallowed in ["--transport", "--server", "--config", "--method", " -e "] {
        assert!(!out.contains(swallowed), "{swallowed}");
    }
}

/// The resident memory of a process, from /proc (Linux).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `mcpwire serve` applies backpressure: a peer that writes 160 MiB of requests without
/// reading any answer finds the server stops reading (its memory stays under 64 MiB, where
/// a server keeping what it read would pass 160), and once the peer reads, every request is
/// answered.
#[test]
fn serve_applies_backpressure_and_answers_everything_once_read() {
    const PAD: usize = 64 * 1024;
    const REQUESTS: usize = 160 * 1024 * 1024 / PAD;
    let mut child = Command::new(BIN)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let pad = "x".repeat(PAD);
        for id in 0..REQUESTS {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{{\"_meta\":{{\"pad\":\"{pad}\"}}}}}}\n"
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                return id;
            }
        }
        REQUESTS
    });
    // Nobody reads yet: the writer stalls and the server holds little.
    let mut peak = 0;
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        peak = peak.max(rss_bytes(pid));
    }
    assert!(
        !writer.is_finished(),
        "160 MiB went in without anyone reading the answers"
    );
    assert!(
        peak > 0 && peak < 64 * 1024 * 1024,
        "RSS {peak} bytes while not read"
    );
    // Now read: every request gets its answer, in order.
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let mut answered = 0;
    while answered < REQUESTS {
        let line = lines.next().expect("an answer").unwrap();
        assert_eq!(
            line,
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{answered},\"result\":{{}}}}")
        );
        answered += 1;
        if answered % 512 == 0 {
            peak = peak.max(rss_bytes(pid));
        }
    }
    assert_eq!(writer.join().unwrap(), REQUESTS);
    assert!(peak < 64 * 1024 * 1024, "RSS {peak} bytes");
    let _ = child.kill();
    let _ = child.wait();
}

// ---- Streamable HTTP: probe --url and serve --http -------------------------------------------

/// A child process that is killed when the test ends, however it ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `mcpwire serve --http 127.0.0.1:0`, and the URL it printed once bound.
fn serve_http(extra: &[&str]) -> (Reaped, String) {
    let (server, url) = serve_http_at("127.0.0.1:0", extra);
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url:?}"
    );
    (server, url)
}

/// `mcpwire serve --http ADDR`, and the URL it printed once bound.
fn serve_http_at(addr: &str, extra: &[&str]) -> (Reaped, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--http", addr])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (Reaped(child), line.trim().to_owned())
}

/// `serve --http` on a loopback address other than 127.0.0.1 serves the URL it prints: every
/// client was refused with 403, since only the names `localhost`, `127.0.0.1` and `::1` were
/// taken for loopback (found by a review of the CLI).
#[test]
fn serve_http_on_another_loopback_address_serves_its_printed_url() {
    let (_server, url) = serve_http_at("127.0.0.2:0", &[]);
    assert!(url.starts_with("http://127.0.0.2:"), "{url:?}");
    let (code, out, err) = mcpwire(&["probe", "--url", &url]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A bad `TOKIO_WORKER_THREADS` is a usage error with a message (exit 2), not a panic
/// inside tokio (exit 101).
#[test]
fn serve_http_refuses_a_bad_worker_count() {
    for value in ["0", "many", "-1"] {
        let out = Command::new(BIN)
            .args(["serve", "--http", "127.0.0.1:0"])
            .env("TOKIO_WORKER_THREADS", value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains("TOKIO_WORKER_THREADS"), "{value}: {err}");
        assert!(!err.contains("panicked"), "{value}: {err}");
    }
}

/// `serve --http` stops cleanly (exit 0) on a SIGTERM that comes the moment it printed its
/// address: its handlers were installed only once the server first ran, after the address,
/// and a signal before that ended it by default (143, no drain, a Redis claim kept).
#[cfg(unix)]
#[test]
fn serve_http_stops_cleanly_on_a_signal_right_after_its_address() {
    for _ in 0..5 {
        let mut child = Command::new(BIN)
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(line.starts_with("http://"), "{line:?}");
        // SAFETY: kill(2) on our own child, not reaped yet.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{status:?}");
    }
}

/// A Python HTTP server made of `script` (which takes its port as its argument), running on
/// `port` until dropped.
fn python_http_server(script: &str, port: u16) -> Reaped {
    let server = Reaped(
        Command::new("python3")
            .args(["-c", script, &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    server
}

/// Waits until something accepts connections on `port` (a peer starting up).
fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("nothing listens on {port}");
}

#[test]
fn probe_url_against_serve_http_in_both_eras_with_a_call() {
    let (_server, url) = serve_http(&[]);
    let (code, out, err) = mcpwire(&["probe", "--url", &url]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("server        mcpwire-demo"), "{out}");
    assert!(
        out.contains("protocol      2026-07-28 (stateless era)"),
        "{out}"
    );
    assert!(out.contains("tools (5)"), "{out}");
    let (code, out, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2025-11-25",
        "--url",
        &url,
        "--json",
        "--call",
        "add",
        r#"{"a":2,"b":40}"#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["protocolVersion"], "2025-11-25", "{report}");
    assert_eq!(report["call"]["content"][0]["text"], "42", "{report}");
}

/// `--call` against a server that declares no tools: the call failed (exit 7, saying why),
/// not the protocol (it exited 4 with "cannot send tools/call").
#[test]
fn probe_call_against_a_server_without_tools_is_a_failed_call() {
    let script = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"prompts": {}},
             "serverInfo": {"name": "no-tools", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
    elif m.get("method") == "prompts/list":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"prompts": []}}), flush=True)
    elif "id" in m and "method" in m:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}), flush=True)
"#;
    let (code, out, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2025-11-25",
        "--call",
        "echo",
        "{}",
        "--",
        "python3",
        "-c",
        script,
    ]);
    assert_eq!(code, 7, "{out}{err}");
    assert!(err.contains("the server offers no tools"), "{err}");
}

/// A 2026-07-28 server (a few lines of Python) whose `tools/call` needs the client's input
/// (`input_required`): probe fails at once with exit 7 and says so. It ignored the event and
/// reported "no answer to tools/call in time" after the whole timeout (found by an audit).
#[test]
fn probe_says_at_once_that_a_call_needs_input_it_does_not_give() {
    const SERVER: &str = r#"
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        m = msg.get("method")
        if m == "server/discover":
            r = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                 "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "asks", "version": "1"}}}
        elif m == "tools/list":
            r = {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]}
        elif m == "tools/call":
            r = {"resultType": "input_required", "requestState": "s",
                 "inputRequests": {"a": {"method": "roots/list", "params": {}}}}
        else:
            r = {}
        r.setdefault("resultType", "complete")
        rid = 999 if m == "tools/list" and sys.argv[1:] == ["wrong-id"] else msg.get("id")
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": r}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let start = |mode: &str| {
        let mut child = Command::new("python3")
            .args(["-c", SERVER, mode])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut port,
        )
        .unwrap();
        (
            Reaped(child),
            format!("http://127.0.0.1:{}/mcp", port.trim()),
        )
    };
    let (_server, url) = start("asks");
    let started = std::time::Instant::now();
    let (code, out, err) = mcpwire(&[
        "probe",
        "--url",
        &url,
        "--timeout",
        "20",
        "--call",
        "ask",
        "{}",
    ]);
    assert_eq!(code, 7, "{out}{err}");
    assert!(err.contains("input_required"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "waited {:?} for an answer that was not coming",
        started.elapsed()
    );
    // An answer to a request never sent names its id over HTTP, where no copy of the
    // server's output is kept (the message ended in an empty quote: `never sent: ""`).
    let (_server, url) = start("wrong-id");
    let (code, out, err) = mcpwire(&["probe", "--url", &url]);
    assert_eq!(code, 4, "{out}{err}");
    assert!(
        err.contains("the server answered a request that was never sent (id 999)"),
        "{err}"
    );
}

/// The demo's `ask` tool, in a 2025-11-25 session over HTTP, asks the client on the tool
/// call's own SSE stream: a client that never opens the optional GET stream gets the
/// elicitation and then the answer. (It was sent on the GET stream: such a client waited for
/// good.)
#[test]
fn serve_http_asks_the_client_on_the_tool_calls_stream() {
    let (_server, url) = serve_http(&[]);
    let text = python_over_http(
        &url,
        r#"
sid = session({"elicitation": {}})
call = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "ask", "arguments": {"question": "colour?"}}}, sid)
stream = messages(call)
m = next(stream)
assert m.get("method") == "elicitation/create", m
print("asked", m["params"]["message"])
post({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {"answer": "blue"}}}, sid).read()
m = next(stream)
assert m.get("id") == 1, m
print("answer", json.dumps(m["result"]["content"][0]["text"]))
"#,
    );
    assert!(text.contains("asked colour?"), "{text}");
    assert!(text.contains("blue"), "{text}");
}

/// Helpers for the Python clients of these tests: `post(body, headers)`, a session's
/// `session(capabilities)` (its headers), and the JSON-RPC `messages` of an SSE response.
const PY_HTTP_PRELUDE: &str = r#"
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
def post(body, headers=None):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    c.request("POST", u.path, json.dumps(body), h)
    return c.getresponse()
def session(capabilities):
    r = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "1"}}})
    h = {"Mcp-Session-Id": r.getheader("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-11-25"}
    r.read()
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, h).read()
    return h
def messages(r):
    for line in r:
        line = line.decode().strip()
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])
"#;

/// Runs `script` after [`PY_HTTP_PRELUDE`] against `url`; it must succeed. Its output.
fn python_over_http(url: &str, script: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", &format!("{PY_HTTP_PRELUDE}{script}"), url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}{err}");
    text
}

/// The demo's `touch` over HTTP notifies the subscribers wherever they are: a 2026-07-28
/// listen stream (a request, so a connection, of its own) and another handshake-era session
/// that subscribed. Only the connection that made the call was notified: nobody, in both cases.
#[test]
fn serve_http_touch_reaches_listen_streams_and_other_sessions() {
    let (_server, url) = serve_http(&[]);
    let text = python_over_http(
        &url,
        r#"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
def modern(id, method, params, name=None):
    h = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name:
        h["Mcp-Name"] = name
    params = dict(params, _meta=META)
    return post({"jsonrpc": "2.0", "id": id, "method": method, "params": params}, h)
def text(r):
    return json.loads(r.read())["result"]["content"][0]["text"]

listen = messages(modern(1, "subscriptions/listen",
                         {"notifications": {"resourceSubscriptions": ["file:///etc/passwd", "demo://readme"]}}))
ack = next(listen)
print("ack", "subscriptionId" in json.dumps(ack), ack["params"]["notifications"])
print("touch", text(modern(2, "tools/call", {"name": "touch", "arguments": {"uri": "demo://readme"}}, "touch")))
m = next(listen)
print("listener got", m["method"], m["params"]["uri"])

a, b = session({}), session({})
post({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "demo://readme"}}, a).read()
c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
c.request("GET", u.path, headers=dict(a, Accept="text/event-stream"))
stream = messages(c.getresponse())
r = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "touch", "arguments": {"uri": "demo://readme"}}}, b)
if r.getheader("Content-Type").startswith("application/json"):
    answer = json.loads(r.read())
else:
    answer = list(messages(r))[-1]
print("session touch", answer["result"]["content"][0]["text"])
m = next(stream)
print("session got", m["method"], m["params"]["uri"])
"#,
    );
    for want in [
        // Only the demo's own resources are granted.
        "ack True {'resourceSubscriptions': ['demo://readme']}",
        "touch subscribers notified",
        "listener got notifications/resources/updated demo://readme",
        "session touch subscribers notified",
        "session got notifications/resources/updated demo://readme",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
}

/// The demo's own timers over HTTP: `countdown` answers only after its steps have fired
/// (100 ms apart) through the host's timer, in a session and in stateless requests, with
/// several countdowns of different lengths running at once on one server.
#[test]
fn serve_http_fires_countdown_timers_in_both_eras_side_by_side() {
    let (_server, url) = serve_http(&[]);
    let runs: Vec<_> = [
        (None, 2),
        (Some("2025-11-25"), 4),
        (None, 6),
        (Some("2025-11-25"), 1),
    ]
    .into_iter()
    .map(|(protocol, steps)| {
        let url = url.clone();
        std::thread::spawn(move || {
            let params = format!(r#"{{"steps":{steps}}}"#);
            let mut args = vec!["probe", "--json", "--url", &url];
            if let Some(p) = protocol {
                args.extend(["--protocol", p]);
            }
            args.extend(["--call", "countdown", &params]);
            let started = std::time::Instant::now();
            let (code, out, err) = mcpwire(&args);
            (protocol, steps, code, out, err, started.elapsed())
        })
    })
    .collect();
    for run in runs {
        let (protocol, steps, code, out, err, took) = run.join().unwrap();
        assert_eq!(code, 0, "{protocol:?} {steps}: {out}{err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            report["call"]["content"][0]["text"],
            format!("countdown of {steps} finished"),
            "{protocol:?}: {report}"
        );
        assert!(
            took >= std::time::Duration::from_millis(100 * steps),
            "{protocol:?} {steps}: answered after {took:?}, before its steps"
        );
    }
}

#[test]
fn serve_http_under_the_python_sdk_http_client_in_both_eras() {
    let (_server, url) = serve_http(&[]);
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let out = python_client(&["--mode", mode, "--expect-version", version, "--url", &url])
            .env("PYTHONPATH", python_site())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(&format!("PY_CLIENT_OK {version}")),
            "{mode}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn probe_url_against_the_python_sdk_http_server_in_both_eras() {
    let port = free_port();
    let _server = Reaped(
        Command::new("python3")
            .arg(py_server())
            .args(["--http", &port.to_string()])
            .env("PYTHONPATH", python_site())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (code, out, err) = mcpwire(&["probe", "--url", &url, "--call", "add", r#"{"a":1,"b":2}"#]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("server        py-peer-server"), "{out}");
    assert!(
        out.contains("protocol      2026-07-28 (stateless era)"),
        "{out}"
    );
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("protocol      2025-11-25 (handshake era)"),
        "{out}"
    );
}

#[test]
fn probe_url_against_server_everything_over_http() {
    let port = free_port();
    let _server = Reaped(
        Command::new("node")
            .arg(everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    let url = format!("http://127.0.0.1:{port}/mcp");
    // Stateless only: the server does not speak that era, which is not a broken protocol.
    // (Its 400 carries a JSON-RPC error without an id, which answers the one request.)
    let (code, _, err) = mcpwire(&["probe", "--protocol", "2026-07-28", "--url", &url]);
    assert_eq!(code, 8, "{err}");
    assert!(
        err.contains("refused server/discover with JSON-RPC error -32000"),
        "{err}"
    );
    // The same probe in the handshake era from the start: what the one below takes, less its
    // fallback (measured on the server already warm, so that node's speed on a loaded
    // machine is not counted).
    let started = std::time::Instant::now();
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 0, "{out}{err}");
    let without_fallback = started.elapsed();
    // Auto: the stateless probe is refused with a bare HTTP 400, and the probe falls back at
    // once (not after its 5 s wait).
    let started = std::time::Instant::now();
    let (code, out, err) = mcpwire(&["probe", "--url", &url]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("server        mcp-servers/everything"),
        "{out}"
    );
    assert!(
        out.contains("protocol      2025-11-25 (handshake era)"),
        "{out}"
    );
    assert!(out.contains("tools (13)"), "{out}");
    assert!(
        started.elapsed() < without_fallback + std::time::Duration::from_secs(3),
        "{:?}, {without_fallback:?} without the fallback",
        started.elapsed()
    );
}

#[test]
fn probe_names_the_refused_request_and_the_supported_versions() {
    // A handshake-only stdio server: server/discover is an unknown method there.
    let everything_cmd = everything();
    let (code, _, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2026-07-28",
        "--",
        "node",
        &everything_cmd,
        "stdio",
    ]);
    assert_eq!(code, 8, "{err}");
    assert!(
        err.contains("server/discover") && err.contains("-32601"),
        "{err}"
    );
    assert!(!err.contains("initialize"), "no initialize was sent: {err}");
    // A server that answers -32022 with its supported list: the list is shown.
    let script = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" in m:
        print(json.dumps({"jsonrpc":"2.0","id":m["id"],"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2024-11-05"],"requested":"x"}}}), flush=True)
"#;
    let (code, _, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2025-11-25",
        "--",
        "python3",
        "-c",
        script,
    ]);
    assert_eq!(code, 8, "{err}");
    assert!(
        err.contains("refused initialize") && err.contains(r#"["2024-11-05"]"#),
        "{err}"
    );
    // Any other refusal: its message is shown, quoted, with its control characters escaped.
    let script = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" in m:
        print(json.dumps({"jsonrpc":"2.0","id":m["id"],"error":{"code":-32602,"message":"client lacks the \"roots\" capability\n\u001b[31m"}}), flush=True)
"#;
    let (code, _, err) = mcpwire(&["probe", "--", "python3", "-c", script]);
    assert_eq!(code, 9, "a refusal: {err}");
    assert!(
        err.contains(
            r#"refused initialize (JSON-RPC error -32602): "client lacks the \"roots\" capability\n\u{1b}[31m""#
        ),
        "{err}"
    );
}

/// `printf '%s' ... | mcpwire serve`: a last request without a newline is answered, on both
/// stdio hosts (the blocking loop and tokio), and the server exits 0.
#[test]
fn serve_answers_a_last_request_that_has_no_newline() {
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    for extra in [&[][..], &["--tokio"][..]] {
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":["#)),
            "{extra:?}: {text}"
        );
    }
}

/// The demo answers what it cannot serve as the spec's tools and prompts pages show: an
/// unknown tool or prompt is -32602 (it was a tool result with `isError`, and any prompt name
/// got the greeting), and echo's text that is not a string is a tool error (it echoed "").
#[test]
fn serve_refuses_unknown_tools_and_prompts_with_invalid_params() {
    assert_unknown_tools_and_prompts_are_invalid_params(&[BIN, "serve"]);
    assert_unknown_cursors_are_invalid_params(&[BIN, "serve"]);
    let answer = answers_in_a_session(
        &[BIN, "serve"],
        &[
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":5}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"greet","arguments":{"name":"Ada"}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"nope"},"argument":{"name":"name","value":""}}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"name","value":"A"}}}"#,
        ],
    );
    let json = |id| serde_json::from_str::<Value>(&answer(id)).unwrap();
    assert_eq!(json(3)["result"]["isError"], true, "{}", answer(3));
    // Completion of a prompt it does not have is -32602 too (it got the names all the same).
    assert_eq!(json(5)["error"]["code"], -32602, "{}", answer(5));
    assert!(
        json(6)["result"]["completion"]["values"]
            .as_array()
            .is_some_and(|v| !v.is_empty()),
        "{}",
        answer(6)
    );
    assert!(
        json(4)["result"]["messages"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ada")),
        "{}",
        answer(4)
    );
}

/// `resources/subscribe` takes the demo's own resources only, a bounded number per session:
/// any URI was kept (a megabyte each, without end), and a missing one was answered `{}`.
#[test]
fn serve_subscribes_to_its_own_resources_only_and_boundedly() {
    let big = format!("demo://{}", "x".repeat(1 << 20));
    let mut requests = vec![
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{{"uri":"{big}"}}}}"#),
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///etc/passwd"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"demo://readme"}}"#.to_owned(),
    ];
    for i in 0..1024 {
        requests.push(format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"resources/subscribe","params":{{"uri":"demo://items/{i}"}}}}"#,
            10 + i
        ));
    }
    let requests: Vec<&str> = requests.iter().map(String::as_str).collect();
    let answer = answers_in_a_session(&[BIN, "serve"], &requests);
    let json = |id| serde_json::from_str::<Value>(&answer(id)).unwrap();
    assert_eq!(json(1)["error"]["code"], -32002);
    assert_eq!(json(2)["error"]["code"], -32002);
    assert_eq!(json(3)["error"]["code"], -32602);
    assert_eq!(json(4)["result"], serde_json::json!({}));
    assert_eq!(json(10 + 1022)["result"], serde_json::json!({}));
    // The readme and 1,023 items make 1,024: the last item is one too many.
    assert_eq!(
        json(10 + 1023)["error"]["code"],
        -32603,
        "{}",
        answer(10 + 1023)
    );
}

/// The demo's `ask` needs the client's elicitation or sampling: without either, 2026-07-28's
/// -32021 naming the capability (it answered a plain text result), and in a session a tool
/// error.
#[test]
fn serve_ask_without_the_capability_is_refused_as_the_spec_says() {
    let answer = answers_in_a_session(
        &[BIN, "serve"],
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{}}}"#,
        ],
    );
    let session: Value = serde_json::from_str(&answer(1)).unwrap();
    assert_eq!(session["result"]["isError"], true, "{session}");

    let (_server, url) = serve_http(&[]);
    let text = python_over_http(
        &url,
        r#"
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
r = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "ask", "arguments": {}, "_meta": meta}},
         {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ask"})
print("status", r.status)
print(r.read().decode())
"#,
    );
    assert!(text.contains("status 400"), "{text}");
    let body: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"]["elicitation"],
        serde_json::json!({}),
        "{body}"
    );
}

/// A server that fails `tools/list` with a bare HTTP 500: the probe says so at once (the
/// engine's `Failed`), instead of waiting out its timeout and calling it one.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real process took: the real clock
fn probe_url_reports_an_http_failure_at_once() {
    let script = r#"
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        m = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if m.get("method") == "initialize":
            body = json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
                "protocolVersion": m["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "h", "version": "1"}}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Mcp-Session-Id", "s1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif "id" not in m:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_response(STATUS)
            self.send_header("Content-Length", "0")
            self.end_headers()
    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;
    // A 202 to a request says so (it was "the stream ended without the answer (a body that
    // holds no JSON-RPC answer, or one cut short)").
    // An error status is a refusal (9), a 202 a broken protocol (4).
    for (status, says, want) in [
        ("500", "HTTP status 500", 9),
        (
            "202",
            "HTTP 202 Accepted, which answers only notifications",
            4,
        ),
    ] {
        let port = free_port();
        let _server = python_http_server(&script.replace("STATUS", status), port);
        let url = format!("http://127.0.0.1:{port}/mcp");
        let started = std::time::Instant::now();
        let (code, out, err) = mcpwire(&[
            "probe",
            "--protocol",
            "2025-11-25",
            "--timeout",
            "20",
            "--url",
            &url,
        ]);
        assert_eq!(code, want, "{out}{err}");
        assert!(err.contains(says), "{out}{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
    }
}

/// A server that takes the connection and closes it without an answer has gone away (5), not
/// broken the protocol (4, until the twenty-seventh session).
#[test]
fn probe_reports_a_connection_closed_without_an_answer_as_the_server_gone() {
    let script = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        c.recv(65536)
    except OSError:
        pass
    c.close()
"#;
    let port = free_port();
    let _server = python_http_server(script, port);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("the connection failed"), "{err}");
}

/// What a helper's audit of the command found, each fixed: a huge `--timeout` panicked,
/// `--json` printed nothing when the server could not be started or the URL was unusable,
/// `--call`'s arguments were checked only after the server had answered (and an array was
/// sent as `arguments`), an unreachable server was "a protocol violation" with no reason, a
/// handshake-era server refusing `server/discover` with -32600 was one too, and a 401 did
/// not say that credentials were wanted.
#[test]
fn probe_reports_bad_options_and_unreachable_servers_as_documented() {
    let (code, _, err) = mcpwire(&["probe", "--timeout", "1e30", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("at most 86400"), "{err}");

    for (args, want) in [
        (&["probe", "--json", "--", "/nonexistent/server"][..], 3),
        (
            &["probe", "--json", "--url", "https://example.com/mcp"][..],
            2,
        ),
        (
            &["probe", "--json", "--url", "http://127.0.0.1:1/mcp"][..],
            3,
        ),
        // Usage errors too (clap's and --call's): the report says why there is none.
        (
            &["probe", "--json", "--timeout", "abc", "--", "true"][..],
            2,
        ),
        (&["probe", "--json", "--bogus", "--", "true"][..], 2),
        (
            &["probe", "--json", "--call", "echo", "[1]", "--", "true"][..],
            2,
        ),
        // One tool a run: a second --call panicked (clap appended its values).
        (
            &[
                "probe", "--json", "--call", "a", "{}", "--call", "b", "{}", "--", "true",
            ][..],
            2,
        ),
    ] {
        let (code, out, err) = mcpwire(args);
        assert_eq!(code, want, "{args:?}: {out}{err}");
        let json: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
        assert_eq!(json["error"]["exitCode"], want, "{args:?}: {out}");
    }
    let (_, _, err) = mcpwire(&["probe", "--url", "http://127.0.0.1:1/mcp"]);
    assert!(err.contains("cannot reach 127.0.0.1:1"), "{err}");
    assert!(err.contains("refused"), "{err}");

    let started = std::time::Instant::now();
    for args in [r#"[1,2]"#, r#""text""#, "{bad"] {
        let (code, _, err) = mcpwire(&["probe", "--call", "echo", args, "--", "sleep", "30"]);
        assert_eq!(code, 2, "{args}: {err}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "the server was started before the arguments were checked ({:?})",
        started.elapsed()
    );

    let (code, _, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2026-07-28",
        "--",
        BIN,
        "serve",
        "--legacy",
    ]);
    assert_eq!(code, 8, "{err}");
    assert!(err.contains("does not speak the stateless era"), "{err}");

    // A bad line written in two pieces is named whole (the excerpt was the last piece: "").
    let split = "import sys, time\nsys.stdout.write('hello, not MCP'); sys.stdout.flush()\n\
                 time.sleep(0.1)\nsys.stdout.write('\\n'); sys.stdout.flush()\ntime.sleep(5)";
    let (code, _, err) = mcpwire(&["probe", "--timeout", "2", "--", "python3", "-c", split]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains(r#": "hello, not MCP""#), "{err}");

    // A list that pages for ever is cut, and the report says so.
    let pages = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "pages", "version": "1"}}
    elif m.get("method") == "tools/list":
        n = int((m.get("params") or {}).get("cursor") or 0)
        r = {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}}], "nextCursor": str(n + 1)}
    elif "id" in m:
        r = {}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;
    let (code, out, err) = mcpwire(&[
        "probe",
        "--json",
        "--protocol",
        "2025-11-25",
        "--",
        "python3",
        "-c",
        pages,
    ]);
    assert_eq!(code, 0, "{err}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["tools"].as_array().map(Vec::len), Some(100), "{out}");
    assert!(
        json["warnings"]
            .to_string()
            .contains("stopped after 100 pages"),
        "{out}"
    );

    let port = free_port();
    let script = r#"
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/html":
            body = b"<html><body>a login page</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/down":
            body = b"<html>\n<head><title>502 Bad Gateway</title></head>\n</html>\n"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/forbidden":
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer resource_metadata="x"')
        self.send_header("Content-Length", "0")
        self.end_headers()
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;
    let _server = python_http_server(script, port);
    let url = format!("http://user:secret@127.0.0.1:{port}/mcp");
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 9, "a refusal: {out}{err}");
    assert!(
        err.contains("HTTP status 401") && err.contains("wants credentials"),
        "{err}"
    );
    assert!(out.contains("credentials in the URL are not sent"), "{out}");
    // Asked for the stateless era, a 401 is still a refusal for want of credentials, not a
    // sign of the wrong era (exit 8 and no hint, found by a review of the CLI).
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2026-07-28", "--url", &url]);
    assert_eq!(code, 9, "a refusal: {out}{err}");
    assert!(
        err.contains("HTTP status 401") && err.contains("wants credentials"),
        "{err}"
    );
    // A 403 may also be a Host the server does not accept (DNS rebinding protection).
    let url = format!("http://127.0.0.1:{port}/forbidden");
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 9, "a refusal: {out}{err}");
    assert!(
        err.contains("HTTP status 403") && err.contains("does not accept this Host"),
        "{err}"
    );
    let url = format!("http://127.0.0.1:{port}/html");
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 4, "{out}{err}");
    assert!(
        err.contains("HTTP status 200") && err.contains("neither application/json nor"),
        "{err}"
    );
    // An error page's text is shown with its status, on one line.
    let url = format!("http://127.0.0.1:{port}/down");
    let (code, out, err) = mcpwire(&["probe", "--protocol", "2025-11-25", "--url", &url]);
    assert_eq!(code, 9, "{out}{err}");
    assert!(
        err.contains(
            r#"HTTP status 502 without an answer; the body said "<html> <head><title>502 Bad Gateway</title></head> </html>""#
        ),
        "{err}"
    );
}

/// A log that does not keep up (here a FIFO whose reader never reads) does not hold the
/// traffic up: tap logged each message before passing it on, with a blocking write, so the
/// session froze once the FIFO was full, and tap could not even end.
#[cfg(unix)]
#[test]
fn tap_passes_traffic_on_while_its_log_does_not_keep_up() {
    use std::io::{BufRead, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let dir = scratch_dir("tap-fifo");
    let fifo = dir.join("log.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // A reader that never reads: opening for writing then succeeds at once.
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let mut child = Command::new(BIN)
        .args(["tap", "--log", fifo.to_str().unwrap(), "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let watchdog = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(30));
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..2000 {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n");
            if stdin.write_all(line.as_bytes()).is_err() {
                return i;
            }
        }
        2000
    });
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let echoed = stdout.lines().map_while(Result::ok).count();
    let sent = writer.join().unwrap();
    let status = child.wait().unwrap();
    drop(watchdog);
    assert_eq!((sent, echoed), (2000, 2000), "{status:?}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The end of the server's output reaches the host at once, while the server still reads
/// its input: tap kept its own stdout open until the server exited, so a host waiting for
/// the output to end before closing the server's input waited for good.
#[test]
fn tap_passes_the_end_of_the_servers_output_on_at_once() {
    use std::io::Read;
    let dir = scratch_dir("tap-eof");
    let log = dir.join("tap.jsonl");
    let mut child = Command::new(BIN)
        .args(["tap", "--log", log.to_str().unwrap(), "--"])
        .args(["sh", "-c", "exec 1>&-; cat >/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
    let stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = tx.send(stdout.read_to_end(&mut all).map(|_| all));
    });
    let out = rx.recv_timeout(std::time::Duration::from_secs(3));
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        matches!(&out, Ok(Ok(bytes)) if bytes.is_empty()),
        "the end of the output did not come while the input was open: {out:?}"
    );
    assert_eq!(status.code(), Some(0));
}

/// A signal the command was started ignoring (`nohup`'s SIGHUP) stays ignored: tap caught it
/// anyway, passed it to a server that ignored it too, and killed that server four seconds
/// later (exit 137), which is what nohup is there to prevent.
#[cfg(unix)]
#[test]
fn tap_leaves_a_signal_it_was_started_ignoring_ignored() {
    use std::io::Write;
    let dir = scratch_dir("nohup");
    let log = dir.join("tap.jsonl");
    let pidfile = dir.join("tap.pid");
    let _ = std::fs::remove_file(&pidfile);
    // The shell ignores SIGHUP and execs tap (which keeps the disposition), as nohup does.
    let script = format!(
        "trap '' HUP; echo $$ > {}; exec {BIN} tap --log {} -- cat",
        pidfile.display(),
        log.display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = common::stdio::pid_from_file(&pidfile);
    std::thread::sleep(std::time::Duration::from_millis(300));
    Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(5)); // past tap's 4 s before SIGKILL
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n");
}

/// Stopping `tap` or `probe` with SIGTERM or SIGINT stops the server they run: the signal is
/// passed on, the command ends as a shell reports a signal (128 + N), and no server is left
/// running on its own (they were, reparented to init). `tap` logs its end either way, and a
/// server killed by a signal is reported as such (it was exit code 1).
#[cfg(unix)]
#[test]
fn tap_and_probe_pass_signals_on_and_leave_no_server_running() {
    use std::time::{Duration, Instant};
    let dir = scratch_dir("signals");
    let wait = |child: &mut std::process::Child| {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() >= until {
                let _ = child.kill();
                panic!("the command did not end");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for (n, (command, signal, want)) in [
        ("tap", "TERM", 143),
        ("probe", "INT", 130),
        ("probe", "TERM", 143),
    ]
    .into_iter()
    .enumerate()
    {
        let pidfile = dir.join(format!("server-{n}.pid"));
        let log = dir.join(format!("tap-{n}.jsonl"));
        let server = format!("echo $$ > {}; exec sleep 30", pidfile.display());
        let mut cmd = if command == "tap" {
            tap_sh(&log, &server)
        } else {
            let mut cmd = Command::new(BIN);
            cmd.args(["probe", "--timeout", "30", "--", "sh", "-c", &server]);
            cmd
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = common::stdio::pid_from_file(&pidfile);
        std::thread::sleep(Duration::from_millis(200));
        Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        let status = wait(&mut child);
        assert_eq!(status.code(), Some(want), "{command} {signal}");
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !common::stdio::is_running(pid),
            "{command} {signal}: the server {pid} is still running"
        );
        if command == "tap" {
            let last = std::fs::read_to_string(&log).unwrap();
            let last: Value = serde_json::from_str(last.lines().last().unwrap()).unwrap();
            assert_eq!(last["kind"], "exit", "{last}");
            assert_eq!(last["signal"], 15, "{last}");
            assert_eq!(last["code"], 143, "{last}");
        }
    }
    // A server that ignores the signal passed on: each command still ends soon after it,
    // and the server with it (probe waited for its request's timeout, tap for good).
    //
    // And one that ignores the signal and keeps sending notifications while it never
    // answers: probe still ends soon after the signal. Its stdio loop handed out event after
    // event and looked for the signal (and its timeout) only once no input was left: it ran
    // for as long as the notifications came (found by a review of the CLI).
    let flood = |pidfile: &std::path::Path| {
        format!(
            r#"
import json, os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
open({pidfile:?}, "w").write(str(os.getpid()))
m = json.loads(sys.stdin.readline())
print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{
    "protocolVersion": m["params"]["protocolVersion"],
    "capabilities": {{"tools": {{}}, "logging": {{}}}},
    "serverInfo": {{"name": "flood", "version": "1"}}}}}}), flush=True)
note = '{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"x"}}}}\n'
while True:
    sys.stdout.write(note * 50)
    sys.stdout.flush()
"#,
            pidfile = pidfile.display().to_string()
        )
    };
    for (n, command) in ["probe", "tap", "flood"].into_iter().enumerate() {
        let pidfile = dir.join(format!("stubborn-{n}.pid"));
        let log = dir.join(format!("stubborn-{n}.jsonl"));
        let server = format!(
            "trap '' INT TERM HUP; echo $$ > {}; while :; do sleep 1; done",
            pidfile.display()
        );
        let mut cmd = if command == "tap" {
            tap_sh(&log, &server)
        } else {
            Command::new(BIN)
        };
        match command {
            "probe" => cmd.args(["probe", "--timeout", "60", "--", "sh", "-c", &server]),
            "flood" => cmd
                .args(["probe", "--protocol", "2025-11-25", "--timeout", "60", "--"])
                .args(["python3", "-c", &flood(&pidfile)]),
            _ => &mut cmd,
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = common::stdio::pid_from_file(&pidfile);
        std::thread::sleep(Duration::from_millis(300));
        let signalled = Instant::now();
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        let status = wait(&mut child);
        assert!(
            // (About 4 s: the kill comes that long after the signal. Before, probe waited
            // for its 60 s timeout (for good under the flood) and tap for good.)
            signalled.elapsed() < Duration::from_secs(15),
            "{command} ended {:?} after the signal",
            signalled.elapsed()
        );
        if command != "tap" {
            assert_eq!(status.code(), Some(130), "{command}");
        }
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !common::stdio::is_running(pid),
            "{command}: the stubborn server {pid} is still running"
        );
    }
    // A server that dies from a signal of its own: tap reports it as a shell would.
    let log = dir.join("tap-kill.jsonl");
    let (code, _, _) = mcpwire(&[
        "tap",
        "--log",
        log.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    assert_eq!(code, 137);
    let last = std::fs::read_to_string(&log).unwrap();
    assert!(
        last.lines().last().unwrap().contains(r#""signal":9"#),
        "{last}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Some parents (Node's libuv, say) leave the pipes they hand a child non-blocking: reads of
/// an empty stdin and writes to a full stdout then answer `WouldBlock` instead of waiting.
/// The server (and `tap` in front of it) must wait, not take it for the end: every request
/// gets its answer when the client writes late and reads late.
#[cfg(unix)]
#[test]
fn serve_and_tap_under_a_parent_that_left_the_pipes_non_blocking() {
    use std::io::Read;
    use std::os::fd::{AsFd, AsRawFd};
    fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) {
        // SAFETY: F_GETFL and F_SETFL on an open descriptor.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            assert!(flags >= 0);
            assert_eq!(
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK),
                0
            );
        }
    }
    let mut input = String::from(concat!(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
    ));
    for i in 1..=3000 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n"
        ));
    }
    let log =
        std::env::temp_dir().join(format!("mcpwire-tap-nonblock-{}.jsonl", std::process::id()));
    let log = log.to_str().unwrap().to_owned();
    let runs: [&[&str]; 3] = [
        &["serve"],
        &["serve", "--tokio"],
        &["tap", "--log", &log, "--", BIN, "serve"],
    ];
    for args in runs {
        let (child_in, mut to_child) = std::io::pipe().unwrap();
        let (mut from_child, child_out) = std::io::pipe().unwrap();
        set_nonblocking(child_in.as_fd());
        set_nonblocking(child_out.as_fd());
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::from(child_in))
            .stdout(Stdio::from(child_out))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The requests come after the server has started and found its stdin empty; the
        // answers are read only once they have filled the pipe.
        let text = input.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            to_child.write_all(text.as_bytes()).unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(800));
        let mut out = String::new();
        from_child.read_to_string(&mut out).unwrap();
        writer.join().unwrap();
        let status = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let answers = out.lines().filter(|l| l.contains(r#""result""#)).count();
        assert_eq!(answers, 3001, "{args:?}: {err}");
        assert!(status.success(), "{args:?}: {status:?} {err}");
    }
    let _ = std::fs::remove_file(&log);
}

/// probe's report goes out whole to a stdout its parent left non-blocking and reads late: a
/// report larger than the pipe met `WouldBlock`, and probe said "cannot write to stdout" and
/// exited with 1, the report cut.
#[cfg(unix)]
#[test]
fn probe_writes_a_large_report_to_a_non_blocking_stdout() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let server = r#"
import sys, json
tools = [{"name": "tool%d" % i, "description": "d" * 200, "inputSchema": {"type": "object"}}
         for i in range(1000)]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"jsonrpc": "2.0", "id": m["id"], "result": {}}
    if m["method"] == "initialize":
        r["result"] = {"protocolVersion": m["params"]["protocolVersion"],
                       "capabilities": {"tools": {}}, "serverInfo": {"name": "big", "version": "1"}}
    elif m["method"] == "tools/list":
        r["result"] = {"tools": tools}
    print(json.dumps(r), flush=True)
"#;
    let (mut from_child, child_out) = std::io::pipe().unwrap();
    // SAFETY: F_GETFL and F_SETFL on an open descriptor.
    unsafe {
        let flags = libc::fcntl(child_out.as_raw_fd(), libc::F_GETFL);
        assert_eq!(
            libc::fcntl(
                child_out.as_raw_fd(),
                libc::F_SETFL,
                flags | libc::O_NONBLOCK
            ),
            0
        );
    }
    let mut child = Command::new(BIN)
        .args(["probe", "--json", "--protocol", "2025-11-25", "--"])
        .args(["python3", "-c", server])
        .stdout(Stdio::from(child_out))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500)); // the pipe fills first
    let mut out = String::new();
    from_child.read_to_string(&mut out).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(out.len() > 200_000, "{} bytes", out.len());
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["tools"].as_array().unwrap().len(), 1000);
}

/// `serve --http` beyond loopback still refuses a Host or Origin that names a host it was not
/// told about (DNS rebinding protection: it accepted any, 200 for `Host: evil.example.com`);
/// IP addresses and `--allow-host` names pass, on loopback too. An Origin passes when it is
/// loopback, allowed, or the request's own Host: not any IP address.
/// `--allow-host NAME:PORT` is refused at once: the Host header's port is not compared, so it
/// matched no request, and every one got 403 without a word (found by a review of the CLI).
/// A bracketed or bare IPv6 address is a name.
#[test]
fn serve_http_refuses_an_allowed_host_with_a_port() {
    for bad in ["proxy.example.com:8443", "http://proxy.example.com", ""] {
        assert!(!host_name_accepted(bad), "{bad} accepted");
    }
    assert!(host_name_accepted("[::1]") && host_name_accepted("fe80::1"));
}

/// Whether `serve --allow-host NAME` gets past its arguments and serves; else it must have
/// exited with the usage error (2) and said why.
#[allow(clippy::disallowed_methods)] // a process test: it bounds its wait by the real clock
fn host_name_accepted(name: &str) -> bool {
    let mut child = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0", "--allow-host", name])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(2) {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            assert_eq!(status.code(), Some(2), "{name}: {err}");
            assert!(err.contains("without a port"), "{name}: {err}");
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    true
}

#[test]
fn serve_http_checks_host_and_origin_beyond_loopback_too() {
    let status = |port: u16, host: &str, origin: Option<&str>| -> u16 {
        use std::io::{Read, Write};
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let origin = origin
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
    };
    let port = free_port();
    let (_server, url) = serve_http_at(
        &format!("0.0.0.0:{port}"),
        &["--allow-host", "mcp.example.com"],
    );
    assert!(url.ends_with(&format!(":{port}/mcp")), "{url}");
    assert_eq!(status(port, "evil.example.com", None), 403);
    assert_eq!(
        status(port, "127.0.0.1", Some("http://evil.example.com")),
        403
    );
    assert_eq!(status(port, &format!("127.0.0.1:{port}"), None), 200);
    assert_eq!(
        status(port, "10.1.2.3:8000", Some("http://10.1.2.3:8000")),
        200
    );
    assert_eq!(status(port, "[fe80::1]:8000", None), 200);
    // An Origin at another address is another site's page: refused (any address passed).
    assert_eq!(status(port, "10.1.2.3:8000", Some("http://6.6.6.6")), 403);
    assert_eq!(status(port, "127.0.0.1", Some("http://6.6.6.6:8000")), 403);
    assert_eq!(
        status(port, "127.0.0.1", Some("http://localhost:3000")),
        200
    );
    assert_eq!(
        status(port, "MCP.example.com", Some("https://mcp.example.com")),
        200
    );
    // On loopback: loopback names, and the allowed ones (a proxy in front, say).
    let (_server, url) = serve_http(&["--allow-host", "mcp.example.com"]);
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    assert_eq!(status(port, "mcp.example.com", None), 200);
    assert_eq!(status(port, "localhost", None), 200);
    assert_eq!(status(port, "10.1.2.3", None), 403);
    assert_eq!(status(port, "evil.example.com", None), 403);
}

/// The demo's tools refuse what they cannot do instead of answering something else: a sum out
/// of range was the largest integer, and a countdown of `"x"` or 50 steps ran 3 or 20.
#[test]
fn the_demo_tools_refuse_arguments_they_cannot_honour() {
    for (tool, args, text) in [
        (
            "add",
            r#"{"a":9223372036854775807,"b":1}"#,
            "the sum is out of range",
        ),
        ("countdown", r#"{"steps":"x"}"#, "steps must be an integer"),
        ("countdown", r#"{"steps":50}"#, "steps must be an integer"),
    ] {
        let (code, out, err) =
            mcpwire(&["probe", "--json", "--call", tool, args, "--", BIN, "serve"]);
        assert_eq!(code, 7, "{tool} {args}: {out}{err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["call"]["isError"], true, "{report}");
        assert!(
            report["call"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains(text)),
            "{report}"
        );
    }
}

/// `serve --http --max-connections 2`: at the cap a new client takes the place of the one
/// silent since it was accepted, not of the kept-alive one idle longer whose next request
/// arrived while the server was stopped (in the kernel, or read, when the server looks): that
/// one was closed and its request lost. A bad cap is a usage error.
#[test]
fn serve_http_at_its_connection_cap_closes_a_silent_connection_not_a_begun_request() {
    use std::io::Read;
    use std::net::TcpStream;
    use std::time::Duration;
    let (server, url) = serve_http(&["--max-connections", "2"]);
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let get = format!("GET /other HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    // One response's status, read through its head and Content-Length body.
    let status = |s: &mut TcpStream| -> String {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let text = String::from_utf8_lossy(&got).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    return text.get(9..12).unwrap_or_default().to_owned();
                }
            }
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return format!("closed after {text:?}"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    a.write_all(get.as_bytes()).unwrap();
    assert_eq!(status(&mut a), "404");
    std::thread::sleep(Duration::from_millis(50));
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // While the server is stopped: A's next request, and a new client at the cap.
    let pid = server.0.id().to_string();
    let signal = |sig: &str| {
        Command::new("kill").args([sig, &pid]).status().unwrap();
    };
    signal("-STOP");
    a.write_all(get.as_bytes()).unwrap();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(get.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    signal("-CONT");
    assert_eq!(status(&mut a), "404", "A's second request");
    assert_eq!(status(&mut c), "404", "the new client");
    b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(b.read(&mut buf), Ok(0)), "B, silent, makes room");

    let (code, _, err) = mcpwire(&["serve", "--http", "127.0.0.1:0", "--max-connections", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-connections"), "{err}");
}

/// Under a limit on open files below the connection cap, `serve` raises its soft limit to
/// the hard one, caps its connections to what fits and says so; silent connections past that
/// then make room for a client, which is answered. With the soft limit at 100 and the cap at
/// 1024, `accept` failed for want of descriptors from about the 90th connection on, and the
/// client waited unanswered in the kernel's queue, nothing said (found by a review of the
/// tokio host).
#[test]
fn serve_http_fits_its_cap_to_the_limit_on_open_files() {
    let mut child = Command::new("sh")
        .args([
            "-c",
            &format!("ulimit -S -n 100 && ulimit -H -n 200 && exec {BIN} serve --http 127.0.0.1:0"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Reaped(child);
    let addr = line
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // More than fit (200 less the reserve), fewer than the test's own limit.
    let silent: Vec<std::net::TcpStream> = (0..180)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    std::io::Write::write_all(
        &mut c,
        format!("GET /other HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut head = [0u8; 12];
    let read = std::io::Read::read_exact(&mut c, &mut head);
    drop(silent);
    drop(server);
    let mut said = String::new();
    std::io::Read::read_to_string(&mut { stderr }, &mut said).unwrap();
    assert!(read.is_ok(), "no answer: {read:?}; {said}");
    assert_eq!(&head, b"HTTP/1.1 404", "{said}");
    assert!(
        said.contains("serving at most 136 connections at once"),
        "{said}"
    );
}

/// A port in use is not a usage error (exit 1, as any failure to run), where a mistyped
/// address is (exit 2): both exited 2, so a supervisor could not tell a configuration it
/// must fix from a port it may try again (found by a review of the tokio host).
#[test]
fn serve_http_tells_a_port_in_use_from_a_bad_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, _, err) = mcpwire(&["serve", "--http", &addr]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot listen on"), "{err}");
    let (code, _, err) = mcpwire(&["serve", "--http", "127.0.0.1:notaport"]);
    assert_eq!(code, 2, "{err}");
}

/// A server that stops reading while probe writes to it (a large --call) is stopped once the
/// write has waited for the timeout, and probe says why: the write waited for good, past
/// --timeout and Ctrl-C, until the server happened to exit.
#[test]
fn probe_stops_a_server_that_stopped_reading_its_input() {
    let server = r#"
import sys, json, time
for _ in range(4):
    m = json.loads(sys.stdin.readline())
    if m.get("method") == "ping":
        r = {}
    elif m.get("method") == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "deaf", "version": "1"}}
    elif m.get("method") == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
time.sleep(30)
"#;
    let args = format!(r#"{{"text":"{}"}}"#, "x".repeat(100 * 1024));
    let started = std::time::Instant::now();
    let (code, _, err) = mcpwire(&[
        "probe",
        "--timeout",
        "3",
        "--protocol",
        "2025-11-25",
        "--call",
        "echo",
        &args,
        "--",
        "python3",
        "-c",
        server,
    ]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("stopped reading its input"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// Ctrl-C in a terminal reaches the whole foreground process group: tap and its server
/// alike. tap then does not pass the SIGINT on as well (the server got two, which a server
/// with a graceful shutdown takes as "force quit"). A SIGINT sent to tap alone still is.
#[cfg(target_os = "linux")]
#[test]
fn tap_passes_on_a_terminals_ctrl_c_only_once() {
    let dir = scratch_dir("ctrl-c");
    let server = r#"
import signal, sys, time
out = sys.argv[1]
def hit(n, f):
    with open(out, "a") as f:
        f.write("INT\n")
signal.signal(signal.SIGINT, hit)
with open(out, "a") as f:
    f.write("up\n")
time.sleep(3)
"#;
    // A terminal of its own (a pty), tap in its foreground group, and ^C typed into it; or,
    // with "kill", a SIGINT from kill(2) to tap alone.
    let driver = r#"
import os, pty, sys, time, signal
bin, log, server, out, how = sys.argv[1:6]
try:
    pid, fd = pty.fork()
except OSError:
    sys.exit(77)  # no terminals here (a container without /dev/pts)
if pid == 0:
    os.execv(bin, [bin, "tap", "--log", log, "--", "python3", "-c", server, out])
until = time.time() + 10
while time.time() < until and not (os.path.exists(out) and open(out).read()):
    time.sleep(0.02)
time.sleep(0.2)
if how == "tty":
    os.write(fd, b"\x03")
else:
    os.kill(pid, signal.SIGINT)
while True:
    try:
        if not os.read(fd, 4096):
            break
    except OSError:
        break
os.waitpid(pid, 0)
"#;
    for how in ["tty", "kill"] {
        let out = dir.join(format!("signals-{how}"));
        let log = dir.join(format!("tap-{how}.jsonl"));
        let _ = std::fs::remove_file(&out);
        let status = Command::new("python3")
            .args(["-c", driver, BIN])
            .arg(&log)
            .arg(server)
            .arg(&out)
            .arg(how)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        if status.code() == Some(77) {
            // (Failing rather than passing untested, unless skipping is asked for.)
            assert!(
                std::env::var_os("MCPWIRE_ALLOW_SKIP").is_some(),
                "this machine gives no pseudo-terminal: set MCPWIRE_ALLOW_SKIP=1 to skip"
            );
            eprintln!("skipped: this machine gives no pseudo-terminal");
            return;
        }
        assert!(status.success(), "{how}: {status:?}");
        let seen = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            seen, "up\nINT\n",
            "{how}: the server's record of what it got"
        );
    }
}

/// A signal that comes while probe waits for a server to exit, its verdict already reached
/// (here: the server wrote no JSON), does not replace that verdict: it was reported as
/// "stopped by signal 2" (130), and the reason was lost.
#[cfg(unix)]
#[test]
fn probe_keeps_its_verdict_when_a_signal_ends_the_wait_for_the_server() {
    use std::time::Duration;
    let dir = scratch_dir("verdict");
    let pidfile = dir.join("server.pid");
    let _ = std::fs::remove_file(&pidfile);
    // Ignores stdin's end and the signals passed on: probe waits 2 s, sends SIGTERM, waits
    // 2 s more, then kills it.
    let server = format!(
        "trap '' INT TERM; echo $$ > {}; echo 'this is no JSON'; while :; do sleep 1; done",
        pidfile.display()
    );
    let child = Command::new(BIN)
        .args(["probe", "--timeout", "30", "--", "sh", "-c", &server])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _guard = common::stdio::kill_after(child.id(), Duration::from_secs(30));
    common::stdio::pid_from_file(&pidfile);
    std::thread::sleep(Duration::from_secs(1));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("this is no JSON"), "{err}");
}

/// A server that pages for ever with large pages is followed only so far: at most 100,000
/// items of a list are kept (a 16 MiB page of empty objects parses into millions of
/// values, and 100 pages of them took gigabytes).
#[test]
fn probe_keeps_at_most_100000_items_of_a_list() {
    let server = endless_pager(
        r#"page = [{"name": "t", "inputSchema": {"type": "object"}}] * 60000"#,
        "page",
    );
    let (report, _) = probe_report(&server);
    assert_eq!(report["tools"].as_array().unwrap().len(), 100_000);
    assert_warned(&report, "stopped after 100000 items");
}

/// A server with resources that answers `resources/templates/list` with an error (-32601, as
/// the SDKs' low-level servers without a handler for it do) gets a warning: the probe went no
/// further (exit 4), the prompts unlisted and the call unmade. And `--call`'s arguments reach
/// the server as written: read into a `Value` and written again, a large integer became a
/// float and duplicate keys were merged (found by a review of the CLI).
#[test]
fn probe_goes_on_past_a_failed_templates_list_and_sends_call_arguments_as_written() {
    let dir = scratch_dir("probe-templates");
    let seen = dir.join("arguments");
    let server = r#"
import sys, json
seen = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"jsonrpc": "2.0", "id": m["id"], "result": {}}
    if m["method"] == "initialize":
        r["result"] = {"protocolVersion": m["params"]["protocolVersion"],
                       "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                       "serverInfo": {"name": "templateless", "version": "1"}}
    elif m["method"] == "tools/list":
        r["result"] = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    elif m["method"] == "resources/list":
        r["result"] = {"resources": []}
    elif m["method"] == "resources/templates/list":
        r = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}}
    elif m["method"] == "prompts/list":
        r["result"] = {"prompts": [{"name": "p"}]}
    elif m["method"] == "tools/call":
        text = line[line.index('"arguments":') + len('"arguments":'):]
        open(seen, "w").write(text[:text.rindex("}}")])
        r["result"] = {"content": [{"type": "text", "text": "ok"}]}
    print(json.dumps(r), flush=True)
"#;
    let arguments = r#"{"big":123456789012345678901234567890,"d":1,"d":2}"#;
    let seen_arg = seen.display().to_string();
    let (code, out, err) = mcpwire(&[
        "probe",
        "--json",
        "--protocol",
        "2025-11-25",
        "--call",
        "t",
        arguments,
        "--",
        "python3",
        "-c",
        server,
        &seen_arg,
    ]);
    assert_eq!(code, 0, "{err}{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["prompts"][0]["name"], "p", "{out}");
    assert_warned(&report, "resources/templates/list failed: -32601");
    let sent = std::fs::read_to_string(&seen).unwrap_or_default();
    assert_eq!(sent, arguments);
}

/// A Python stdio server that declares tools and answers every `tools/list` with the page
/// `page` (a Python expression over what `defs` defines) and `nextCursor` "more": it pages
/// for ever.
fn endless_pager(defs: &str, page: &str) -> String {
    format!(
        r#"
import sys, json
{defs}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {{"jsonrpc": "2.0", "id": m["id"], "result": {{}}}}
    if m["method"] == "initialize":
        r["result"] = {{"protocolVersion": m["params"]["protocolVersion"],
                       "capabilities": {{"tools": {{}}}}, "serverInfo": {{"name": "pager", "version": "1"}}}}
    elif m["method"] == "tools/list":
        r["result"] = {{"tools": {page}, "nextCursor": "more"}}
    print(json.dumps(r), flush=True)
"#
    )
}

/// `mcpwire probe --json --protocol 2025-11-25` against the Python stdio server `script`: its
/// exit code, stdout and stderr.
/// The `--json` report of `probe_json` on a server it must succeed with, and its length.
fn probe_report(script: &str) -> (Value, usize) {
    let (code, out, err) = probe_json(script);
    assert_eq!(code, 0, "{err}");
    (serde_json::from_str(&out).unwrap(), out.len())
}

/// Asserts that a probe report's warnings say `text`.
fn assert_warned(report: &Value, text: &str) {
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains(text), "{warnings}");
}

fn probe_json(script: &str) -> (i32, String, String) {
    mcpwire(&[
        "probe",
        "--json",
        "--protocol",
        "2025-11-25",
        "--",
        "python3",
        "-c",
        script,
    ])
}

/// Nor does it keep more than 32 MiB of list items: a server that pages one tool with a
/// 1 MiB description at a time, for ever, stops being followed there. (The item count alone
/// let 100 pages of one item just under the frame's 16 MiB each hold gigabytes.)
#[test]
fn probe_keeps_at_most_32_mib_of_lists() {
    let server = endless_pager(
        r#"tool = {"name": "t", "description": "d" * (1 << 20), "inputSchema": {"type": "object"}}"#,
        "[tool]",
    );
    let (report, _) = probe_report(&server);
    let kept = report["tools"].as_array().unwrap().len();
    assert_eq!(kept, 31, "1 MiB and a little each");
    assert_warned(&report, "stopped after 32 MiB of lists");
}

/// An answer holding a number serde_json cannot hold (`1e400`, valid JSON) is a failure, not
/// `null`: a failed tool call read as `null` and the probe said success (exit 0), and such
/// capabilities were dropped with every list (found by a review of the CLI).
#[test]
fn probe_fails_on_an_answer_it_cannot_read_into_its_report() {
    let server = r#"
import sys, json
where = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"jsonrpc": "2.0", "id": m["id"], "result": {}}
    if m["method"] == "initialize":
        caps = '{"tools":{"x":1e400}}' if where == "caps" else '{"tools":{}}'
        text = ('{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":%s,'
                '"serverInfo":{"name":"big","version":"1"}}}'
                % (json.dumps(m["id"]), m["params"]["protocolVersion"], caps))
        print(text, flush=True)
        continue
    if m["method"] == "tools/list":
        r["result"] = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    elif m["method"] == "tools/call":
        print('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"isError":true,"_meta":{"x":1e400}}}'
              % json.dumps(m["id"]), flush=True)
        continue
    print(json.dumps(r), flush=True)
"#;
    for place in ["caps", "call"] {
        let (code, out, err) = mcpwire(&[
            "probe",
            "--protocol",
            "2025-11-25",
            "--call",
            "t",
            "{}",
            "--",
            "python3",
            "-c",
            server,
            place,
        ]);
        assert_eq!(code, 4, "{place}: {out}{err}");
        assert!(err.contains("cannot be read"), "{place}: {err}");
    }
}

/// The 32 MiB of lists count what the items cost to keep and print, not their text: a tool
/// whose schema holds 300,000 empty arrays (900 KB) costs tens of bytes each as a `Value` and
/// a line each in the `--json` report. Counted as text, 35 such pages were kept, and the report
/// reached over 100 MB (about 1 GB at the peak; found by a review of the CLI).
#[test]
fn probe_counts_what_list_items_cost_to_keep_and_print() {
    let server = endless_pager(
        r#"tool = {"name": "t", "inputSchema": {"type": "object", "x": [[]] * 300000}}"#,
        "[tool]",
    );
    let (report, size) = probe_report(&server);
    assert!(size < 40 << 20, "a report of {size} bytes");
    assert_warned(&report, "stopped after 32 MiB of lists");
}

/// What a server says reaches the terminal escaped: a tool's description with an escape
/// sequence (setting the window title), a name with a carriage return and a failed ping's
/// message with a newline were printed raw, and drove the terminal.
#[test]
fn probe_prints_the_servers_text_escaped() {
    let server = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"jsonrpc": "2.0", "id": m["id"]}
    if m["method"] == "initialize":
        r["result"] = {"protocolVersion": m["params"]["protocolVersion"],
                       "capabilities": {"tools": {}, "experimental": {"x": {"y": "\u009b2J"}}},
                       "serverInfo": {"name": "evil\x1b[2J", "version": "1"}}
    elif m["method"] == "tools/list":
        r["result"] = {"tools": [{"name": "t\rX", "description": "d\x1b]0;pwned\x07",
                                  "inputSchema": {"type": "object"}}]}
    elif m["method"] == "tools/call":
        r["result"] = {"content": [{"type": "text", "text": "\u009b1;1H\x7f"}]}
    else:
        r["error"] = {"code": -32603, "message": "no\nerror: fake"}
    print(json.dumps(r), flush=True)
"#;
    let (_, out, err) = mcpwire(&[
        "probe",
        "--protocol",
        "2025-11-25",
        "--",
        "python3",
        "-c",
        server,
    ]);
    // (C1 controls too, CSI among them, which JSON leaves unescaped: in the capabilities
    // and a call's result.)
    let (_, called, _) = mcpwire(&[
        "probe",
        "--protocol",
        "2025-11-25",
        "--call",
        "t\rX",
        "{}",
        "--",
        "python3",
        "-c",
        server,
    ]);
    assert!(called.contains("call result"), "{called}");
    for text in [&out, &err, &called] {
        assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
        assert!(
            !text.contains('\u{9b}') && !text.contains('\x7f'),
            "{text:?}"
        );
    }
    assert!(
        out.contains(r"t\rX") && out.contains(r"d\u{1b}]0;pwned\u{7}"),
        "{out}"
    );
    assert!(!out.contains("\nerror: fake"), "{out:?}");
}

/// The credentials in a URL probe cannot use are not printed (the client's error named the
/// whole URL, twice, on stderr and in the JSON report a CI job keeps); a stderr that cannot
/// be written (here `/dev/full`) leaves the documented exit code alone (`eprintln!`
/// panicked: 101); and a `--timeout` that rounds to nothing is refused (every request timed
/// out at once). Found by a review of the command line.
#[test]
fn probe_hides_url_credentials_survives_a_full_stderr_and_refuses_a_zero_timeout() {
    let (code, out, err) = mcpwire(&[
        "probe",
        "--json",
        "--url",
        "https://user:TOKEN@mcp.example.com/mcp",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        !out.contains("TOKEN") && !err.contains("TOKEN"),
        "{out}{err}"
    );
    assert!(err.contains("https://***@mcp.example.com/mcp"), "{err}");
    // A token with a `/` in it (over https, refused at once; over http, where the part before
    // the `/` read as a host and a port was shown in the error, with exit 3), and a URL
    // without its `//`.
    for url in [
        "https://u:abc/def+==@host/mcp",
        "http://u:SECRET3/def@host/mcp",
        "u:TOKEN2@host/mcp",
    ] {
        let (code, out, err) = mcpwire(&["probe", "--json", "--url", url]);
        assert_eq!(code, 2, "{out}{err}");
        for secret in ["abc/def", "SECRET3", "TOKEN2"] {
            assert!(!out.contains(secret) && !err.contains(secret), "{out}{err}");
        }
    }
    // A port that is no port is the command line's fault too.
    let (code, out, err) = mcpwire(&["probe", "--json", "--url", "http://127.0.0.1:99999/mcp"]);
    assert_eq!(code, 2, "{out}{err}");

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let status = Command::new(BIN)
        .args(["probe", "--", "/nonexistent/server"])
        .stdout(Stdio::null())
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3), "the spawn failure's code");

    let (code, _, err) = mcpwire(&["probe", "--timeout", "1e-10", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--timeout"), "{err}");
}

/// The start of the Python scripts of the tests at the connection cap: connects socket `a`
/// (with a 4 KiB receive window) to `mcpwire serve` on `sys.argv[1]` and sends a stateless
/// `tools/call` of `echo` with 3.5 MB of text, whose answer is as large.
const BIG_ECHO: &str = r#"
import socket, json, sys, time
port = int(sys.argv[1])
text = "x" * 3_500_000
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "echo", "arguments": {"text": text},
    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
a = socket.socket()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
a.connect(("127.0.0.1", port))
head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        "Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: %d\r\n\r\n"
        % (port, len(body))).encode()
a.sendall(head + body)
"#;

/// At the cap, a connection whose client does not read the answer it was sent makes room at
/// once: it counted as idle (its answer had left the service for hyper's buffer), agreed to
/// close, and closed gracefully only once the answer was out, so the new client waited
/// 250 ms and got 503 (and a cap full of such clients locked new ones out for 30 s each).
#[test]
fn serve_http_at_its_cap_drops_a_connection_whose_client_does_not_read() {
    let (_server, url) = serve_http(&["--max-connections", "1"]);
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .to_owned();
    let script = BIG_ECHO.to_owned()
        + r#"
# The answer has begun (a peek, which takes nothing from the buffer), then fills the
# buffers: this client never reads it, for longer than the second that counts.
a.settimeout(30)
a.recv(1, socket.MSG_PEEK)
time.sleep(1.5)
b = socket.create_connection(("127.0.0.1", port))
b.sendall(("GET /other HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port).encode())
b.settimeout(5)
print(b.recv(200).split(b"\r\n")[0].decode())
"#;
    let out = Command::new("python3")
        .args(["-c", &script, &port])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("HTTP/1.1 404"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// At the cap, a connection whose client downloads a large answer slowly (reading all the
/// while) is not the one dropped to make room: its writes wait each time until the client
/// reads a little more, which counted as "not reading", and the answer, out of the engine's
/// hands, was cut off (found by a review of the tokio host). It finishes sending, then
/// closes; the new client gets 503 meanwhile.
#[test]
fn serve_http_at_its_cap_lets_a_slow_download_finish() {
    let (_server, url) = serve_http(&["--max-connections", "1"]);
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .to_owned();
    let script = BIG_ECHO.to_owned()
        + r#"
import threading
got = bytearray()
def download():
    a.settimeout(30)
    while True:
        chunk = a.recv(4096)
        if not chunk:
            return
        got.extend(chunk)
        time.sleep(0.002)  # a slow reader, never a stopped one
reader = threading.Thread(target=download)
reader.start()
time.sleep(1.0)
b = socket.create_connection(("127.0.0.1", port))
b.sendall(("GET /other HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port).encode())
b.settimeout(5)
print(b.recv(200).split(b"\r\n")[0].decode())
reader.join(40)
answer = bytes(got).partition(b"\r\n\r\n")[2]
print("the whole text" if text.encode() in answer else "cut after %d bytes" % len(answer))
"#;
    let out = Command::new("python3")
        .args(["-c", &script, &port])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    // (503 while the download holds the slot; 404 when the machine was slow enough that
    // the answer had all left for the kernel's buffers and the connection closed first.)
    assert!(
        text.starts_with("HTTP/1.1 503") || text.starts_with("HTTP/1.1 404"),
        "{all}"
    );
    assert!(text.contains("the whole text"), "{all}");
}

/// At the cap, a connection that was closing gracefully to make room (its client still
/// reading) and whose client then stops reading is dropped once it counts as not reading:
/// it held the slot for the whole send timeout (30 s), and every new client got 503 (found
/// by a review of this session's changes).
#[test]
fn serve_http_at_its_cap_drops_a_closing_connection_whose_client_stops_reading() {
    let (_server, url) = serve_http(&["--max-connections", "1"]);
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .to_owned();
    let script = BIG_ECHO.to_owned()
        + r#"
import threading
start = time.time()
def download():
    a.settimeout(30)
    while time.time() < start + 1.1:  # reads, then stops reading for good
        if not a.recv(4096):
            return
        time.sleep(0.002)
reader = threading.Thread(target=download)
reader.start()
def status():
    b = socket.create_connection(("127.0.0.1", port))
    b.sendall(("GET /other HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port).encode())
    b.settimeout(5)
    return b.recv(200).split(b"\r\n")[0].decode()
time.sleep(1.0)
print("while it reads:", status())
reader.join()
time.sleep(2.4)
print("once it stopped:", status())
"#;
    let out = Command::new("python3")
        .args(["-c", &script, &port])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    // (While it reads, 503; or 404 on a machine so slow that the answer had all left for
    // the kernel's buffers by then, and the connection closed: the point is the second.)
    assert!(
        text.contains("while it reads: HTTP/1.1 503")
            || text.contains("while it reads: HTTP/1.1 404"),
        "{all}"
    );
    assert!(text.contains("once it stopped: HTTP/1.1 404"), "{all}");
}

/// probe ends a server that outlives the end of its input with SIGTERM, as it says, before
/// it kills it: even where no `kill` program is on PATH (slim images), which it ran to send
/// the signal, so the server lost its clean-up and was killed 2 s later.
#[test]
fn probe_ends_a_lingering_server_with_sigterm_without_a_kill_program() {
    let dir = scratch_dir("probe-term");
    let marker = dir.join("terminated");
    let _ = std::fs::remove_file(&marker);
    let server = r#"
import sys, json, signal, time
marker = sys.argv[1]
def term(*_):
    open(marker, "w").write("term")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    result = {}
    if m.get("method") == "initialize":
        result = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {},
                  "serverInfo": {"name": "lingering", "version": "1"}}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
while True:
    time.sleep(1)
"#;
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("python3 at an absolute path");
    let out = Command::new(BIN)
        .args(["probe", "--protocol", "2025-11-25", "--timeout", "5", "--"])
        .args([python, "-c", server, marker.to_str().unwrap()])
        .env("PATH", &*dir) // (an empty directory: no `kill` program)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("term"),
        "the server got no SIGTERM: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server started through a shell wrapper (`sh -c 'python3 server.py; echo done'`, the
/// shape of `bash -c "source venv/bin/activate; python server.py"`) is stopped with the
/// shell when probe gives up: the signals went to the shell alone, which died, and the server,
/// which ignores the end of its input, ran on for its ten minutes (found by a review).
#[test]
fn probe_stops_a_server_behind_a_shell_wrapper() {
    let dir = scratch_dir("probe-wrapper");
    let pid_file = dir.join("pid");
    let _ = std::fs::remove_file(&pid_file);
    // (It ignores SIGTERM too: once the shell is gone, what is left of the group gets the
    // rest of the grace, then SIGKILL.)
    let server = format!(
        "python3 -c 'import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(\"{}\", \"w\").write(str(os.getpid())); time.sleep(600)'; echo done",
        pid_file.display()
    );
    // (Its output goes to a file: a pipe would stay open for as long as the server lives.)
    // (And in a process group of its own: run from a terminal, the test would otherwise
    // put probe in its foreground, where the server stays in probe's group.)
    let log = dir.join("stderr");
    let status = std::os::unix::process::CommandExt::process_group(
        Command::new(BIN)
            .args(["probe", "--timeout", "1", "--", "sh", "-c", &server])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap()),
        0,
    )
    .status()
    .unwrap();
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(6), "a timeout: {err}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    // Gone, or a zombie no one has reaped yet (a container's first process may not).
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
        })
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let still = alive();
    if still {
        let _ = Command::new("kill").args(["-9", &pid]).status();
    }
    assert!(!still, "the server behind the shell outlived probe: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `tap` with `server` (a shell command) until it ends, 15 s at most: its exit code, how
/// long it took, and its log. `signal_after`: SIGTERM to tap that long after its log began
/// (the server started). Its stdout is piped and never read.
fn tap_until_it_ends(
    name: &str,
    server: &str,
    signal_after: Option<std::time::Duration>,
) -> (Option<i32>, std::time::Duration, Vec<Value>) {
    use std::time::{Duration, Instant};
    let log = std::env::temp_dir().join(format!("mcpwire-tap-{name}-{}.jsonl", std::process::id()));
    let started = Instant::now();
    let mut child = tap_sh(&log, server)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut signalled = false;
    let mut began: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if began.is_none() && std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
            began = Some(Instant::now());
        }
        if !signalled && signal_after.is_some_and(|d| began.is_some_and(|b| b.elapsed() >= d)) {
            signalled = true;
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        if started.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let entries = if status.is_some() {
        tap_log(&log)
    } else {
        Vec::new()
    };
    let _ = std::fs::remove_file(&log);
    (status.and_then(|s| s.code()), took, entries)
}

/// A server that exits while a process it started keeps its output open ends tap all the
/// same, with its exit code and the exit entry, a moment after (tap waited for the end of that
/// output, here for 30 s, and for good behind a daemon).
#[test]
fn tap_ends_with_a_server_that_exits_behind_a_lingering_child() {
    let (code, took, log) = tap_until_it_ends("linger", "sleep 30 & exit 3", None);
    assert_eq!(code, Some(3), "took {took:?}");
    assert!(took < std::time::Duration::from_secs(8), "{took:?}");
    assert_eq!(log.last().unwrap()["code"], 3, "{log:?}");
}

/// A host that stopped reading and then signals tap gets it to end: the signal ends the
/// server, and tap's write of the server's last output to the host, which makes no progress,
/// is given up a few seconds later (it stayed blocked, and tap with it, until the host read).
#[test]
fn tap_ends_on_a_signal_while_its_host_does_not_read() {
    let (code, took, log) = tap_until_it_ends(
        "stalled",
        "exec head -c 4000000 /dev/zero",
        Some(std::time::Duration::from_millis(300)),
    );
    assert_eq!(code, Some(143), "took {took:?}");
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    assert_eq!(log.last().unwrap()["signal"], 15, "{log:?}");
}

/// A host that signals tap and then reads the rest of the output slowly (12 KiB/s) gets all of
/// it: tap gave up on a write to the host that made no progress for 4 s, and a write was a
/// whole 64 KiB read of the server's, which a host reading that slowly took 5 s over, so
/// tap ended in the middle of a line (found by a review of `tap`).
#[cfg(target_os = "linux")]
#[test]
fn tap_after_a_signal_gives_a_host_that_reads_slowly_all_of_the_output() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let total = 96 * 1024;
    let dir = scratch_dir("tap-slow-reader");
    let log = dir.join("tap.jsonl");
    let server = format!(
        "trap 'exit 0' TERM; yes '{{\"jsonrpc\":\"2.0\",\"method\":\"x\"}}' | head -c {total}; \
         while :; do sleep 0.1; done"
    );
    let mut child = tap_sh(&log, &server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(60));
    let _stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // The smallest pipe, so that tap's writes wait on this reader at once.
    // SAFETY: F_SETPIPE_SZ on a pipe descriptor `stdout` keeps open.
    unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: kill(2) on the pid of a child not yet waited for.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut got = Vec::new();
    let mut piece = [0u8; 3 * 1024];
    loop {
        let n = stdout.read(&mut piece).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&piece[..n]);
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let status = child.wait().unwrap();
    assert_eq!(got.len(), total, "tap's status {status:?}");
    assert_eq!(status.code(), Some(0));
}

/// A request and its answer over the 16 MiB tap decodes pass through whole, are logged from
/// their first bytes, and are matched: MCP sets no size limit. Both were logged as `invalid`
/// violations, and the exit entry counted the request unanswered (found by a review of
/// `tap`).
#[test]
fn tap_matches_a_request_and_an_answer_longer_than_it_decodes() {
    use std::io::Read;
    let dir = scratch_dir("tap-too-long");
    let log = dir.join("tap.jsonl");
    let server = r#"
import json, sys
line = sys.stdin.readline()
id = json.loads(line)["id"]
sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n' % (json.dumps(id), "y" * (17 << 20)))
sys.stdout.flush()
"#;
    let mut child = tap_python(&log, server);
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(60));
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        stdout.read_to_end(&mut all).unwrap();
        all
    });
    let request = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"tools/call\",\"params\":{{\"name\":\"x\",\"arguments\":{{\"s\":\"{}\"}}}}}}\n",
        "x".repeat(17 << 20)
    );
    stdin.write_all(request.as_bytes()).unwrap();
    let out = reader.join().unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(
        out.len() > 17 << 20 && out.ends_with(b"}}\n"),
        "{} bytes",
        out.len()
    );
    let entries = tap_log(&log);
    for e in &entries {
        assert!(e.get("violation").is_none(), "{e}");
    }
    let request = entries
        .iter()
        .find(|e| e["kind"] == "request")
        .expect("the request");
    assert_eq!(request["too_long"], true, "{request}");
    assert_eq!(request["method"], "tools/call", "{request}");
    let answer = entries
        .iter()
        .find(|e| e["kind"] == "response")
        .expect("the answer");
    assert_eq!(answer["id"], "big", "{answer}");
    assert_eq!(answer["method"], "tools/call", "{answer}");
    assert!(answer.get("latency_ms").is_some(), "{answer}");
    assert_eq!(entries.last().unwrap()["unanswered_count"], 0);
}

/// A long string id that the answer spells with other escapes (Python's `json.dumps` writes
/// `é` as `\u00e9`) is matched: ids over 256 bytes were remembered by their wire form, so the
/// answer was called a violation and the request unanswered (found by a review of `tap`).
#[test]
fn tap_matches_a_long_id_written_with_other_escapes() {
    let dir = scratch_dir("tap-escaped-id");
    let log = dir.join("tap.jsonl");
    let server = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}), flush=True)
"#;
    let mut child = tap_python(&log, server);
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(30));
    let mut stdin = child.stdin.take().unwrap();
    let ids = [
        "é".repeat(150),
        format!("{}{}", "a".repeat(200), "é".repeat(40)),
    ];
    for id in &ids {
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"method\":\"ping\"}}\n");
        stdin.write_all(line.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\\u00e9"));
    let entries = tap_log(&log);
    let answers: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "response").collect();
    assert_eq!(answers.len(), 2, "{entries:#?}");
    for answer in answers {
        assert!(answer.get("violation").is_none(), "{answer}");
        assert_eq!(answer["method"], "ping", "{answer}");
    }
    assert_eq!(entries.last().unwrap()["unanswered_count"], 0);
}

/// A server that answers the second request it gets, and no other.
const ANSWER_THE_SECOND: &str = r#"
import sys
for i, line in enumerate(sys.stdin):
    if i == 1:
        sys.stdout.write(line.replace('"method":"ping"', '"result":{}'))
        sys.stdout.flush()
"#;

/// Long string ids are remembered by a short key while their requests are in flight: 200
/// requests with 256 KiB ids, never answered, do not cost tap 100 MB (each id was kept whole,
/// twice), and the exit entry names them by that key. An answer under a long id is still
/// matched with its request.
#[test]
fn tap_remembers_long_ids_by_a_short_key() {
    let log = std::env::temp_dir().join(format!("mcpwire-tap-ids-{}.jsonl", std::process::id()));
    let mut child = Command::new(BIN)
        .args(["tap", "--log", log.to_str().unwrap(), "--"])
        .args(["python3", "-c", ANSWER_THE_SECOND])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let long = |i: usize| format!("{i}-{}", "x".repeat(256 << 10));
    let mut peak = 0;
    for i in 0..200 {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"{}\",\"method\":\"ping\"}}\n",
            long(i)
        );
        stdin.write_all(line.as_bytes()).unwrap();
        if i % 20 == 19 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let rss = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
                .unwrap_or(0);
            peak = peak.max(rss);
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let entries = tap_log(&log);
    let _ = std::fs::remove_file(&log);
    assert!(peak < 60 * 1024, "tap grew to {peak} kB");
    // The second request was answered: matched.
    let answer = entries
        .iter()
        .find(|e| e["kind"] == "response")
        .expect("the answer");
    assert!(answer.get("violation").is_none(), "{}", answer["violation"]);
    assert_eq!(answer["method"], "ping");
    let exit = entries.last().unwrap();
    assert_eq!(
        exit["unanswered_count"], 199,
        "{}",
        exit["unanswered_count"]
    );
    let first = exit["unanswered"][0]["id"].as_str().unwrap();
    assert!(
        first.starts_with("0-xxx") && first.contains('\u{2026}'),
        "{first:.100}"
    );
    assert!(first.len() < 200, "{}", first.len());
}

/// A 2025-11-25 server that keeps no session (as the TypeScript SDK's stateless mode does),
/// never answers `tools/list`, and reports the notifications POSTed to it; each request on a
/// connection of its own. Its URL.
fn sessionless_server_that_never_lists(notifications: std::sync::mpsc::Sender<String>) -> String {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut line, mut length, mut method) = (String::new(), 0, String::new());
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if method.is_empty() {
                    method = line.split(' ').next().unwrap_or("").to_owned();
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let reply = |status: &str, body: &str| {
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n\
                     Content-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            };
            let out = match (method.as_str(), message["method"].as_str()) {
                ("POST", Some("initialize")) => reply(
                    "200 OK",
                    &format!(
                        r#"{{"jsonrpc":"2.0","id":{},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#,
                        message["id"]
                    ),
                ),
                ("POST", Some("tools/list")) => {
                    held.push(stream); // never answered
                    continue;
                }
                ("POST", Some(m)) if message.get("id").is_none() => {
                    let _ = notifications.send(m.to_owned());
                    reply("202 Accepted", "")
                }
                ("GET", _) => reply("405 Method Not Allowed", ""),
                _ => reply("400 Bad Request", ""),
            };
            let _ = stream.write_all(out.as_bytes());
        }
    });
    url
}

/// `probe --url` against a server without sessions: the cancellation of the request that
/// timed out reaches the server before the probe exits. With no session to end, the probe
/// exited at once, and the task sending the cancellation died with its runtime: the server
/// ran the request to its end.
#[test]
fn probe_url_sends_the_cancellation_of_a_timed_out_request_before_it_exits() {
    let (tx, notifications) = std::sync::mpsc::channel();
    let url = sessionless_server_that_never_lists(tx);
    let (code, out, err) = mcpwire(&["probe", "--url", &url, "--timeout", "1"]);
    assert_ne!(code, 0, "{out}{err}");
    let seen: Vec<String> = notifications.try_iter().collect();
    assert!(
        seen.iter().any(|m| m == "notifications/cancelled"),
        "{seen:?}\n{out}{err}"
    );
}

/// `serve --http` on a hang-up drains and exits 0 as on SIGTERM (it was killed by it, with
/// no drain and its Redis number still claimed), unless it was started ignoring hang-ups
/// (nohup). During a drain a second signal, a second or more after the first, ends it at
/// once, 128+N (it was swallowed: the user waited out the grace period).
#[cfg(unix)]
#[test]
fn serve_http_drains_on_a_hangup_and_a_second_signal_ends_the_drain() {
    use std::os::unix::process::CommandExt;
    let start_with_signal = |which: libc::c_int, hangup: libc::sighandler_t| {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // SAFETY: signal(2) only, between fork and exec.
        unsafe {
            command.pre_exec(move || {
                libc::signal(which, hangup);
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let addr = line
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        (child, addr)
    };
    let start_with = |hangup| start_with_signal(libc::SIGHUP, hangup);
    let start = || start_with(libc::SIG_DFL);
    let (mut child, _) = start();
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
    // SAFETY: kill(2) on our own child, not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // Under nohup, a hang-up is left to be ignored.
    let (mut child, _) = start_with(libc::SIG_IGN);
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended by an ignored hang-up"
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // So is an interrupt it was started ignoring (a background job of a shell without job
    // control: the Ctrl-C meant for the script's foreground command stopped the server).
    let (mut child, _) = start_with_signal(libc::SIGINT, libc::SIG_IGN);
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended by an ignored interrupt"
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));

    // A request whose body is still arriving keeps the drain going (its 10 s grace).
    let (mut child, addr) = start();
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(30));
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{{\"a\":"
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid = child.id() as i32;
    let signal = |n| {
        // SAFETY: kill(2) on our own child, not reaped yet.
        unsafe { libc::kill(pid, n) };
    };
    signal(libc::SIGINT);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // A second one within a second (a wrapper passing one Ctrl-C on twice) is no insistence.
    signal(libc::SIGINT);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "no drain");
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert!(child.try_wait().unwrap().is_none(), "the drain ended early");
    let second = std::time::Instant::now();
    signal(libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(
        second.elapsed() < std::time::Duration::from_secs(3),
        "the second signal was not heeded: {:?}",
        second.elapsed()
    );
    drop(s);
}

/// A client that stops reading (closes the server's stdout) and then ends its input gets the
/// same exit from both stdio loops: 0, the session over. `--tokio` exited 1 with the broken
/// pipe printed.
#[test]
fn serve_exits_0_when_its_client_stops_reading_then_ends_its_input() {
    for args in [&["serve"][..], &["serve", "--tokio"]] {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
        );
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `probe --url` stopped by SIGTERM ends as a failure does: its JSON report names the
/// signal, the request it waited for is cancelled, and it exits 128+15. It was killed
/// outright, with no report, no cancellation and no DELETE.
#[cfg(unix)]
#[test]
fn probe_url_stopped_by_a_signal_reports_it() {
    let (tx, notifications) = std::sync::mpsc::channel();
    let url = sessionless_server_that_never_lists(tx);
    let child = Command::new(BIN)
        .args(["probe", "--json", "--url", &url, "--timeout", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _guard = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
    std::thread::sleep(std::time::Duration::from_millis(1000));
    // SAFETY: kill(2) on our own child, not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(143), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["error"]["exitCode"], 143, "{report}");
    // The request it was waiting for is cancelled (the server would run it to its end).
    let seen: Vec<String> = notifications.try_iter().collect();
    assert!(
        seen.iter().any(|m| m == "notifications/cancelled"),
        "{seen:?}"
    );
}
