//! The C ABI from C and C++: builds bindings/c and bindings/cpp with strict warnings against
//! the static library `cargo test` just built, and runs
//!
//! - the C test program under ASan+UBSan and under valgrind (no leaks, no errors);
//! - the C++ wrapper's test and example under ASan+UBSan;
//! - the C example client against the C example server in both eras (and both under
//!   valgrind), and against the reference "everything" server;
//! - the Python and TypeScript SDK clients against the C example server.
//!
//! `cargo test` builds the library's `staticlib` crate type next to the test binaries, as
//! `target/<profile>/deps/libmcpwire_ffi.a`; the programs are linked against that file, so they
//! always test the code under test.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;

use common::stdio::{
    assert_python_session, assert_typescript_session, assert_unknown_cursors_are_invalid_params,
    assert_unknown_tools_and_prompts_are_invalid_params, everything_command,
};

mod support;

use support::*;

program!(
    c_test_asan,
    "bindings/c/test_mcpwire.c",
    "test_mcpwire_asan",
    Lang::C,
    true
);
program!(
    c_test_plain,
    "bindings/c/test_mcpwire.c",
    "test_mcpwire",
    Lang::C,
    false
);
program!(
    c_server_asan,
    "bindings/c/example_server.c",
    "example_server_asan",
    Lang::C,
    true
);
program!(
    c_server_plain,
    "bindings/c/example_server.c",
    "example_server",
    Lang::C,
    false
);
program!(
    c_client_asan,
    "bindings/c/example_client.c",
    "example_client_asan",
    Lang::C,
    true
);
program!(
    c_client_plain,
    "bindings/c/example_client.c",
    "example_client",
    Lang::C,
    false
);
program!(
    cpp_test_asan,
    "bindings/cpp/test_mcpwire.cpp",
    "test_mcpwire_cpp",
    Lang::Cxx,
    true
);
program!(
    cpp_http_example_asan,
    "bindings/cpp/example_http.cpp",
    "example_cpp_http",
    Lang::Cxx,
    true
);
program!(
    cpp_example_asan,
    "bindings/cpp/example.cpp",
    "example_cpp",
    Lang::Cxx,
    true
);

// ---- The test programs ----------------------------------------------------------------------

#[test]
fn c_test_program_passes_under_asan_and_ubsan() {
    let out = run_sanitized(Command::new(c_test_asan()));
    assert_test_program_passed(&out);
    assert!(!text(&out).contains("Sanitizer"), "{}", text(&out));
}

#[test]
fn c_test_program_passes_under_valgrind() {
    let mut cmd = valgrind();
    cmd.arg(c_test_plain());
    let out = cmd
        .output()
        .expect("run valgrind (apt-get install valgrind)");
    assert_test_program_passed(&out);
}

#[test]
fn c_test_program_calls_every_exported_function() {
    let header = std::fs::read_to_string(root().join("include/mcpwire.h")).unwrap();
    let test = std::fs::read_to_string(root().join("bindings/c/test_mcpwire.c")).unwrap();
    let mut names: Vec<&str> = header
        .lines()
        .filter(|l| !l.starts_with([' ', '*', '/', '#']) && l.contains('('))
        .filter_map(|l| l.split('(').next()?.rsplit([' ', '*']).next())
        .filter(|name| name.starts_with("mcpw_"))
        .collect();
    names.dedup();
    assert!(names.len() >= 39, "{names:?}");
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !test.contains(&format!("{n}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "not called by test_mcpwire.c: {missing:?}"
    );
}

#[test]
fn cpp_wrapper_test_and_example_pass_under_sanitizers() {
    let out = run_sanitized(Command::new(cpp_test_asan()));
    assert_test_program_passed(&out);
    let out = run_sanitized(Command::new(cpp_example_asan()));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("closed cleanly"), "{all}");
    // Its client's five requests, sent together, are each answered: fed whole, those past the
    // server's two in flight got "too many requests in flight".
    assert!(all.contains(r#""text":"hello from C++"}]}"#), "{all}");
    assert_cpp_example_answers_mistakes(&all);
    assert!(
        !all.contains("too many") && !all.contains("answer not given"),
        "{all}"
    );
}

/// A C++ example's server gives the tools list, and the errors the spec names for its client's
/// mistakes (an unknown tool was echo's answer, an unknown method the tools list or `{}`, a
/// cursor ignored).
fn assert_cpp_example_answers_mistakes(all: &str) {
    assert!(
        all.contains(r#""tools":[{"name":"echo","inputSchema":{"type":"object"}}"#)
            || all.contains(r#"tools: [{"name":"echo","inputSchema":{"type":"object"}}"#),
        "{all}"
    );
    assert!(all.contains("error -32602: Unknown tool: nope"), "{all}");
    assert!(all.contains("error -32601: Method not found"), "{all}");
    assert!(
        all.contains("error -32602: Invalid params: unknown cursor"),
        "{all}"
    );
}

// ---- The examples ---------------------------------------------------------------------------

#[test]
fn cpp_http_example_runs_a_session_under_sanitizers() {
    let out = run_sanitized(Command::new(cpp_http_example_asan()));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("ready: 2025-11-25, session "), "{all}");
    assert!(all.contains("progress: 1/2 echoing"), "{all}");
    assert!(all.contains(r#"echo: "hello from C++ over HTTP""#), "{all}");
    // A call that asked for no progress is answered too (progress() threw, and the example
    // ended).
    assert!(all.contains(r#"echo: "and again""#), "{all}");
    assert_eq!(all.matches("progress: ").count(), 1, "{all}");
    assert_cpp_example_answers_mistakes(&all);
    assert!(all.contains("sessions left on the server: 0"), "{all}");
    // The answer after the progress report finds the small output bound full: held, then
    // given once the client read (it was dropped, with this message).
    assert!(!all.contains("answer not given"), "{all}");
    // A call whose progress moves something every round still times out, and its server
    // hears of it: the loop fired timers only in rounds where nothing moved, so the slow
    // call's timeout never fired and the example gave up on "no answer" (found by a review
    // of the C++ example).
    assert!(all.contains("timed out: the slow call"), "{all}");
    assert!(
        all.contains("server: the client cancelled the slow call"),
        "{all}"
    );
}

#[test]
fn c_client_and_c_server_complete_a_session_in_each_era_under_sanitizers() {
    // The client's default (auto) meets a dual-era server in the stateless era; asked for the
    // handshake era, or meeting a legacy-only server, it uses initialize.
    let runs: [(&[&str], &[&str], &str); 3] = [
        (&[], &[], "2026-07-28"),
        (&["--era", "legacy"], &[], "2025-11-25"),
        (&[], &["--legacy"], "2025-11-25"),
    ];
    for (client_args, server_args, version) in runs {
        let mut cmd = Command::new(c_client_asan());
        cmd.args(client_args)
            .arg("--")
            .arg(c_server_asan())
            .args(server_args);
        let out = run_sanitized(cmd);
        let all = text(&out);
        assert!(out.status.success(), "{all}");
        assert!(all.contains("echo: \"hello from C\""), "{all}");
        assert!(all.contains("progress: 3 notifications"), "{all}");
        assert!(
            all.trim_end().ends_with(&format!("C_CLIENT_OK {version}")),
            "{all}"
        );
    }
}

/// Started with its stdin closed (`<&-`), the client still completes a session: its first
/// pipe landed on descriptor 0, and the child's dup2 and close then took the server's stdin
/// away ("the server closed its output").
#[test]
fn c_client_started_with_its_stdin_closed_completes_a_session() {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(c_client_asan());
    cmd.arg("--").arg(c_server_asan());
    // SAFETY: close(2) between fork and exec touches only this child's descriptor table.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(0);
            Ok(())
        });
    }
    let out = run_sanitized(cmd);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.trim_end().ends_with("C_CLIENT_OK 2026-07-28"), "{all}");
}

/// Started with its stdin closed (`example_server <&-`), the server sees its input end at once
/// and exits. Its wake-up pipe, made before anything reopened descriptor 0, landed there: its
/// "stdin" was its own pipe, which never ends, and it waited for ever (found by a review of
/// the C examples).
#[test]
fn c_server_started_with_its_stdin_closed_ends_by_itself() {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(c_server_plain());
    // SAFETY: close(2) between fork and exec touches only this child's descriptor table.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(0);
            Ok(())
        });
    }
    // output_within kills it and fails the test if it is still running after 10 s.
    let out = output_within(cmd, std::time::Duration::from_secs(10));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn c_client_and_c_server_complete_a_session_under_valgrind() {
    // Both ends under valgrind; the client fails when the server exits non-zero.
    let mut cmd = valgrind();
    cmd.arg(c_client_plain())
        .arg("--")
        .arg("valgrind")
        .args(VALGRIND);
    cmd.arg(c_server_plain());
    let out = cmd.output().expect("run valgrind");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.trim_end().ends_with("C_CLIENT_OK 2026-07-28"), "{all}");
}

/// Runs `cmd` (stdout and stderr piped) for at most `limit`; kills it and panics after that.
#[allow(clippy::disallowed_methods)] // a deadline for a real process: the real clock
fn output_within(mut cmd: Command, limit: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    std::process::Output {
        status,
        stdout: reader.join().unwrap().unwrap_or_default(),
        stderr,
    }
}

#[test]
fn c_client_ends_a_server_that_ignores_its_stdin_closing_and_sigterm() {
    // The spec's stdio shutdown: close the server's input, wait, SIGTERM, wait, SIGKILL. A
    // server that ignores the first two must not hold the client for ever.
    let mut cmd = Command::new(c_client_plain());
    cmd.args(["--", "sh", "-c", r#"trap "" TERM; "$0"; exec sleep 30"#])
        .arg(c_server_plain());
    let out = output_within(cmd, std::time::Duration::from_secs(30));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("did not exit within 5 s"), "{all}");
    assert!(all.trim_end().ends_with("C_CLIENT_OK 2026-07-28"), "{all}");
}

#[test]
fn a_failing_c_client_stops_its_server_by_closing_its_stdin_first() {
    // The spec's stdio shutdown holds on the way out of a failure too: a server that ends
    // when its input closes sees that, not SIGTERM (the client sent SIGTERM at once).
    let marker = std::env::temp_dir().join(format!("mcpwire-c-eof-{}", std::process::id()));
    let script = format!(
        r#"
import signal, sys
def term(*_):
    open({m:?}, "w").write("sigterm")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("not JSON", flush=True)
sys.stdin.read()
open({m:?}, "w").write("eof")
"#,
        m = marker.display().to_string()
    );
    let all = c_client_output(&["--", "python3", "-c", &script], 20);
    assert!(all.contains("C_CLIENT_FAIL"), "{all}");
    let seen = std::fs::read_to_string(&marker).unwrap_or_default();
    let _ = std::fs::remove_file(&marker);
    assert_eq!(seen, "eof", "{all}");
}

/// A failing client closes its end of the server's stdout too: a server that writes its last
/// answers as its input ends (as one that drains before exiting does) blocked on the full
/// pipe, and was ended by SIGTERM a second later (found by a review of the C examples).
#[test]
fn a_failing_c_client_does_not_leave_its_server_blocked_writing() {
    let marker = std::env::temp_dir().join(format!("mcpwire-c-drain-{}", std::process::id()));
    let script = format!(
        r#"
import signal, sys
def term(*_):
    open({m:?}, "w").write("sigterm")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("not JSON", flush=True)
sys.stdin.read()
try:
    for _ in range(300):
        sys.stdout.write("x" * 1000 + "\n")
    sys.stdout.flush()
except BrokenPipeError:
    pass
open({m:?}, "w").write("ended")
"#,
        m = marker.display().to_string()
    );
    let all = c_client_output(&["--", "python3", "-c", &script], 20);
    assert!(all.contains("C_CLIENT_FAIL"), "{all}");
    let seen = std::fs::read_to_string(&marker).unwrap_or_default();
    let _ = std::fs::remove_file(&marker);
    assert_eq!(seen, "ended", "{all}");
}

#[test]
fn c_client_stopped_by_a_signal_stops_its_server_and_says_why() {
    // SIGTERM to the client left its server running on its own (reparented to init), and a
    // server that never started was "connection closed (reason 2)".
    use std::io::Read;
    let pidfile = std::env::temp_dir().join(format!("mcpwire-c-client-{}.pid", std::process::id()));
    let server = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut client = Command::new(c_client_plain())
        .args(["--", "sh", "-c", &server])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = common::stdio::pid_from_file(&pidfile);
    std::thread::sleep(std::time::Duration::from_millis(200));
    Command::new("kill")
        .args(["-TERM", &client.id().to_string()])
        .status()
        .unwrap();
    let mut out = String::new();
    client
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = client.wait().unwrap();
    let _ = std::fs::remove_file(&pidfile);
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(
        out.contains("C_CLIENT_FAIL connect: stopped by signal 15"),
        "{out}"
    );
    assert!(
        !common::stdio::is_running(pid),
        "the server {pid} is still running"
    );

    let all = c_client_output(&["--", "true"], 30);
    assert!(
        all.contains("connection closed: the server closed its output"),
        "{all}"
    );

    // A server that prints something that is not JSON fails the session at once (it waited
    // for the 20 s handshake timeout, and did not say why).
    let all = c_client_output(
        &["--", "sh", "-c", "echo '<html>hello</html>'; exec sleep 30"],
        10,
    );
    assert!(
        all.contains("C_CLIENT_FAIL connect: the server wrote something that is not JSON"),
        "{all}"
    );
}

#[test]
fn c_client_stopped_with_a_call_in_flight_tells_the_server_before_closing_its_stdin() {
    // The spec: a sender that stops waiting for a request SHOULD cancel it. The client sent
    // the server SIGTERM at once and exited, leaving the call's cancellation unwritten.
    use std::io::{BufRead, BufReader, Read};
    let script = r#"
import json, sys
for line in sys.stdin:
    print(line, end="", file=sys.stderr, flush=True)
    m = json.loads(line)
    r = {"initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "stall", "version": "1"}},
         "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}}.get(m.get("method"))
    if "id" in m and r is not None:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
print("EOF", file=sys.stderr, flush=True)
"#;
    let mut client = Command::new(c_client_plain())
        .args(["--era", "legacy", "--", "python3", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The server's log (its stderr, through the client's): wait for the call.
    let mut log = BufReader::new(client.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains(r#""method":"tools/call""#) {
        let mut line = String::new();
        assert!(log.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    Command::new("kill")
        .args(["-TERM", &client.id().to_string()])
        .status()
        .unwrap();
    log.read_to_string(&mut seen).unwrap();
    let mut out = String::new();
    client
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(client.wait().unwrap().code(), Some(1), "{out}");
    assert!(out.contains("stopped by signal 15"), "{out}");
    let call: serde_json::Value = seen
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|m: &serde_json::Value| m["method"] == "tools/call")
        .unwrap();
    let cancelled = seen
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap_or_else(|| panic!("no cancellation reached the server:\n{seen}"));
    assert_eq!(cancelled["params"]["requestId"], call["id"], "{seen}");
    // ...before its input closed (it read to the end, rather than being killed).
    assert!(seen.trim_end().ends_with("EOF"), "{seen}");
}

/// Everything the C stdio client printed with `args`, which must end within `secs`.
fn c_client_output(args: &[&str], secs: u64) -> String {
    let mut cmd = Command::new(c_client_plain());
    cmd.args(args);
    text(&output_within(cmd, std::time::Duration::from_secs(secs)))
}

/// The server's text in the stdio client's failure line (an error's message) reaches the
/// terminal as one plain line: an escape sequence in it set the terminal's title and cleared
/// the screen (found by a review of the C examples).
#[test]
fn the_c_clients_failure_line_carries_no_control_characters() {
    let server = r#"
import sys, json
req = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32600,
    "message": "\u001b]0;PWNED\u0007\u001b[2Jrefused\nsecond line"}}) + "\n")
sys.stdout.flush()
sys.stdin.read()
"#;
    let all = c_client_output(&["--era", "legacy", "--", "python3", "-c", server], 20);
    let line = all
        .lines()
        .find(|l| l.contains("C_CLIENT_FAIL"))
        .unwrap_or_else(|| panic!("no failure line: {all}"));
    assert!(line.contains("refused second line"), "{line:?}");
    assert!(
        !all.contains(['\u{1b}', '\u{7}']),
        "a control character reached the terminal: {all:?}"
    );
}

/// A server that pipelines 3,000 requests of a method the client does not support, in one
/// write, and reads only after writing them all, gets 3,000 answers "not supported" (-32601).
/// The C stdio client fed each 64 KiB read whole, with none of its events handled, so the
/// engine refused those past `max_inbound_in_flight` as "too many requests in flight".
#[test]
fn c_client_answers_every_request_a_server_pipelines() {
    let flood = r#"
import sys, json
req = json.loads(sys.stdin.readline())
out = [json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
    "serverInfo": {"name": "flood", "version": "1"}}})]
out += [json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "x/probe"}) for i in range(3000)]
sys.stdout.write("\n".join(out) + "\n")
sys.stdout.flush()
codes = {}
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if isinstance(m.get("id"), int) and m["id"] >= 1000 and "error" in m:
        codes[m["error"]["code"]] = codes.get(m["error"]["code"], 0) + 1
    if sum(codes.values()) == 3000:
        break
sys.stderr.write("FLOOD %s\n" % json.dumps(codes, sort_keys=True))
"#;
    let out = c_client_output(&["--era", "legacy", "--", "python3", "-c", flood], 60);
    assert!(out.contains(r#"FLOOD {"-32601": 3000}"#), "{out}");
}

/// A server that writes requests faster than it reads the answers (a writer thread, and a
/// reader that takes at most 64 KiB every 10 ms) is slowed down, not cut off: the C stdio client
/// stops reading while half of its output bound waits. It read on until the engine's
/// output passed the bound and closed the connection as if the server did not read.
#[test]
fn c_client_slows_a_server_that_writes_faster_than_it_reads() {
    let flood = r#"
import sys, json, threading, time
req = json.loads(sys.stdin.readline())
n = 300000
head = json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
    "serverInfo": {"name": "flood", "version": "1"}}}) + "\n"
body = "".join('{"jsonrpc":"2.0","id":%d,"method":"x/probe"}\n' % (1000 + i) for i in range(n))
def write():
    sys.stdout.write(head + body)
    sys.stdout.flush()
threading.Thread(target=write, daemon=True).start()
seen, rest = 0, b""
inp = sys.stdin.buffer
while seen < n:
    chunk = inp.read1(65536)
    if not chunk:
        break
    data = rest + chunk
    seen += data.count(b"-32601")
    rest = data[-5:]
    time.sleep(0.01)
sys.stderr.write("SLOW answered=%d\n" % seen)
"#;
    let out = c_client_output(&["--era", "legacy", "--", "python3", "-c", flood], 120);
    assert!(out.contains("SLOW answered=300000"), "{out}");
}

/// The client ignores SIGPIPE for itself, not for the server it runs: an ignored signal
/// stays ignored across exec, and the server inherited it (a server relying on SIGPIPE to
/// end when its reader goes kept running).
#[test]
fn c_client_gives_its_server_the_default_sigpipe() {
    let out = c_client_output(&["--", "sh", "-c", "grep SigIgn /proc/$$/status >&2"], 10);
    let mask = out
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line: {out}"));
    assert_eq!(
        mask & (1 << (libc::SIGPIPE - 1)),
        0,
        "SIGPIPE ignored: {out}"
    );
}

#[test]
fn the_stdio_example_refuses_arguments_it_does_not_know() {
    // `example_server --bogus` served as if nothing was wrong.
    for args in [&["--bogus"][..], &["--legacy", "extra"]] {
        let out = Command::new(c_server_plain()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("usage:"),
            "{args:?}"
        );
    }
}

#[test]
#[allow(clippy::disallowed_methods)] // how long a real process took: the real clock
fn the_stdio_client_escapes_its_arguments_and_checks_progress_args_first() {
    // `--echo-arg` with a control character went into the request raw, which is not JSON:
    // the library refused the request and the client failed. A server that echoes the
    // argument's name back shows it arrived intact.
    let script = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, r = m["method"], None
    if method == "initialize":
        caps = {"tools": {}, "resources": {}, "prompts": {}}
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": caps,
             "serverInfo": {"name": "keys", "version": "1"}}
    elif method == "resources/list":
        r = {"resources": [{"uri": "test://r", "name": "r"}]}
    elif method == "resources/read":
        r = {"contents": [{"uri": "test://r", "text": "r"}]}
    elif method == "prompts/list":
        r = {"prompts": [{"name": "p"}]}
    elif method == "prompts/get":
        r = {"messages": [{"role": "user", "content": {"type": "text", "text": "p"}}]}
    elif method == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        (key, value), = m["params"]["arguments"].items()
        r = {"content": [{"type": "text", "text": key + "=" + value}]}
    elif method == "ping":
        r = {}
    if r is None:
        out = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}
    else:
        out = {"jsonrpc": "2.0", "id": m["id"], "result": r}
    print(json.dumps(out), flush=True)
"#;
    // The echo is compared as text, not as JSON: Python writes "é" as "\u00e9" and "/" raw,
    // where the client's own JSON has "é" raw (the client reported a mismatch).
    for (arg, expect, printed) in [
        (
            "a\u{1}\"b",
            "a\u{1}\"b=hello from C",
            r#"echo: "a\u0001\"b=hello from C""#,
        ),
        (
            "é/ü",
            "é/ü=hello from C",
            r#"echo: "\u00e9/\u00fc=hello from C""#,
        ),
    ] {
        let args = ["--echo-arg", arg, "--echo-expect", expect];
        let all = c_client_output(&[&args[..], &["--", "python3", "-c", script]].concat(), 30);
        assert!(all.contains("C_CLIENT_OK"), "{all}");
        assert!(all.contains(printed), "{all}");
    }

    // --progress-args that are not a JSON object are refused before the server starts (the
    // client used to start it and fail at the progress step, minutes of a slow server later).
    let started = std::time::Instant::now();
    for bad in ["{bad", "[1]"] {
        let out = Command::new(c_client_plain())
            .args(["--progress-args", bad, "--", "sleep", "30"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--progress-args"), "{bad}: {err}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
#[allow(clippy::disallowed_methods)] // how long a real process took: the real clock
fn c_client_fails_at_once_on_an_answer_it_cannot_read() {
    // A server that answers tools/list with a line over the frame limit (16 MiB): the engine
    // ends the request as an invalid response, and the client says so at once instead of
    // waiting for its request timeout.
    let script = r#"
import json, sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "big", "version": "1"}}
        out.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}).encode() + b"\n")
    elif m["method"] == "tools/list":
        out.write(b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[],"pad":"' % m["id"])
        out.write(b"a" * (17 << 20) + b'"}}\n')
    else:
        out.write(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                              "error": {"code": -32601, "message": "no"}}).encode() + b"\n")
    out.flush()
"#;
    let start = std::time::Instant::now();
    let mut cmd = Command::new(c_client_asan());
    cmd.args(["--", "python3", "-c", script]);
    let out = output_within(cmd, std::time::Duration::from_secs(60));
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("C_CLIENT_FAIL") && all.contains("not a valid result"),
        "{all}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(15),
        "took {:?}: {all}",
        start.elapsed()
    );
}

/// A handshake-era server that writes its ping result and a request of its own in one write:
/// the ping result makes the client close, which with nothing in flight completes at once
/// (the engine answers the server's request itself, -32603), and the request event still
/// comes. The client's own answer is then refused as MCPW_ERR_CLOSED, which is no failure:
/// it ended a good session with "C_CLIENT_FAIL" and exit 1 (found by a review of the C
/// examples).
#[test]
fn c_client_succeeds_when_a_request_comes_with_the_last_answer_it_needed() {
    let script = r#"
import json, sys
out = sys.stdout.buffer
def line(m):
    return json.dumps(dict(m, jsonrpc="2.0")).encode() + b"\n"
results = {
    "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
    "tools/call": {"content": [{"type": "text", "text": "hello from C"}]},
    "resources/list": {"resources": [{"uri": "mem://a", "name": "a"}]},
    "resources/read": {"contents": [{"uri": "mem://a", "text": "a"}]},
    "prompts/list": {"prompts": [{"name": "greet"}]},
    "prompts/get": {"messages": [{"role": "user",
                                  "content": {"type": "text", "text": "hi"}}]},
    "ping": {},
}
for raw in sys.stdin.buffer:
    m = json.loads(raw)
    if "method" not in m or "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"],
             "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
             "serverInfo": {"name": "eager", "version": "1"}}
        out.write(line({"id": m["id"], "result": r}))
    elif m["method"] == "ping":
        # The ping result and a request of ours, in one write.
        out.write(line({"id": m["id"], "result": {}}) +
                  line({"id": "s1", "method": "x/custom", "params": {}}))
    elif m["method"] in results:
        out.write(line({"id": m["id"], "result": results[m["method"]]}))
    else:
        out.write(line({"id": m["id"], "error": {"code": -32601, "message": "no"}}))
    out.flush()
"#;
    let mut cmd = Command::new(c_client_asan());
    cmd.args(["--era", "legacy", "--", "python3", "-c", script]);
    let out = output_within(cmd, std::time::Duration::from_secs(60));
    let all = text(&out);
    assert!(all.contains("ping: ok"), "{all}");
    assert!(out.status.success(), "{all}");
    assert!(all.trim_end().ends_with("C_CLIENT_OK 2025-11-25"), "{all}");
}

#[test]
fn c_client_completes_a_session_with_server_everything() {
    let everything = everything_command();
    let mut cmd = Command::new(c_client_asan());
    cmd.args([
        "--echo-arg",
        "message",
        "--echo-expect",
        "Echo: hello from C",
    ])
    .args(["--progress-tool", "trigger-long-running-operation"])
    .args(["--progress-args", r#"{"duration":1,"steps":3}"#])
    .arg("--")
    .arg(everything.get_program())
    .args(everything.get_args());
    let out = run_sanitized(cmd);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("progress: 3 notifications"), "{all}");
    // server-everything refuses server/discover, so the client falls back to initialize.
    assert!(all.contains("C_CLIENT_OK 2025-11-25"), "{all}");
}

// ---- Real SDK clients against the C server -------------------------------------------------

fn c_server() -> String {
    c_server_asan().display().to_string()
}

#[test]
fn python_sdk_client_against_the_c_server() {
    assert_python_session(&[&c_server()], "legacy", "2025-11-25");
}

#[test]
fn python_sdk_client_in_auto_mode_against_the_c_server_ends_up_stateless() {
    assert_python_session(&[&c_server()], "auto", "2026-07-28");
}

#[test]
fn python_sdk_client_in_auto_mode_falls_back_promptly_from_a_legacy_c_server() {
    // Promptly: about as fast as the same session without the probe, not after the SDK's
    // 10 s discover wait (compared with that run, so a slow machine slows both).
    let elapsed = assert_python_session(&[&c_server(), "--legacy"], "auto", "2025-11-25");
    let without = assert_python_session(&[&c_server(), "--legacy"], "legacy", "2025-11-25");
    assert!(
        elapsed < without + std::time::Duration::from_secs(5),
        "took {elapsed:?}, {without:?} without the probe"
    );
}

#[test]
fn typescript_sdk_client_against_the_c_server() {
    assert_typescript_session(&[&c_server()]);
}

// ---- The stdio example never loses an answer ----------------------------------------------

const C_INIT: &str = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

/// An unknown tool or prompt gets -32602, as the spec's tools and prompts pages show (an
/// unknown tool was a result with `isError`).
#[test]
fn the_stdio_example_refuses_unknown_tools_and_prompts_with_invalid_params() {
    assert_unknown_tools_and_prompts_are_invalid_params(&[&c_server()]);
    assert_unknown_cursors_are_invalid_params(&[&c_server()]);
}

/// The resident memory of a process, from /proc (Linux).
fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn spawn_stdio_example(program: &Path) -> std::process::Child {
    Command::new(program)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// 3,000 requests, then end of input: 3,000 whole answers, under ASan too. The last request
/// has no newline (`printf '%s' ... | server`): it is answered like the others.
#[test]
fn the_stdio_example_answers_every_request_before_eof_ends_it() {
    for program in [c_server_plain(), c_server_asan()] {
        let mut input = C_INIT.to_owned();
        for i in 1..=3000 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n"
            ));
        }
        input.pop();
        let mut child = spawn_stdio_example(program);
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            stdin.write_all(input.as_bytes()).unwrap();
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.ends_with('\n'), "no half line");
        let answers: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("\"result\":{\"tools\""))
            .collect();
        assert_eq!(answers.len(), 3000, "{}", program.display());
        for (i, line) in answers.iter().enumerate() {
            assert!(
                line.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{},", i + 1)),
                "{line}"
            );
        }
    }
}

/// End of input while answers wait for a slow reader: every request is still answered. The
/// example read stdin again once a partial write brought its output under its high-water
/// mark, with request events still queued, and so handled the end of input before them:
/// their answers were refused (the connection had closed) and lost without a word.
#[test]
fn the_stdio_example_answers_everything_when_input_ends_while_its_reader_lags() {
    use std::io::{Read, Write};
    let program = c_server_plain();
    let count = 20_000;
    let mut input = C_INIT.to_owned();
    for i in 1..=count {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n"
        ));
    }
    let mut child = spawn_stdio_example(program);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    // The reader lags, then reads in small pieces: many writes are partial.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut text = Vec::new();
    let mut piece = [0u8; 4 * 1024];
    loop {
        let n = stdout.read(&mut piece).unwrap();
        if n == 0 {
            break;
        }
        text.extend_from_slice(&piece[..n]);
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    writer.join().unwrap().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(text).unwrap();
    let answers = text
        .lines()
        .filter(|l| l.contains("\"result\":{\"tools\""))
        .count();
    assert_eq!(
        answers,
        count,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `add` tool of the stdio example (the end-to-end bench's second tool), under ASan:
/// whole sums print without a fraction, and anything that is not two finite numbers is a
/// tool error, never a crash.
#[test]
fn the_stdio_example_adds_numbers_and_refuses_what_is_not_one() {
    let cases = [
        (r#"{"a":2,"b":3}"#, r#""text":"5"}],"isError":false"#),
        (r#"{"a":-0.5,"b":2}"#, r#""text":"1.5"}],"isError":false"#),
        (
            r#"{"a":0.1,"b":0.2}"#,
            r#""text":"0.30000000000000004"}],"isError":false"#,
        ),
        (
            r#"{"a":1e300,"b":1e300}"#,
            r#""text":"2.0000000000000001e+300"}],"isError":false"#,
        ),
        (r#"{"a":"2","b":3}"#, r#""isError":true"#),
        (r#"{"a":2}"#, r#""isError":true"#),
        (r#"{"a":1e400,"b":1}"#, r#""isError":true"#),
        // A valid number of any length (the example's own parsing refused 64 characters).
        (
            r#"{"a":1.00000000000000000000000000000000000000000000000000000000000000001,"b":1}"#,
            r#""text":"2"}],"isError":false"#,
        ),
        (
            r#"{"a":25e-1,"b":-0.5e0}"#,
            r#""text":"2"}],"isError":false"#,
        ),
        (r#"{"a":[1],"b":{"c":2}}"#, r#""isError":true"#),
    ];
    let mut input = C_INIT.to_owned();
    for (i, (arguments, _)) in cases.iter().enumerate() {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{{\"name\":\"add\",\"arguments\":{arguments}}}}}\n",
            i + 1
        ));
    }
    // A tool's name is compared as text: "\u0061dd" is "add" (it was an unknown tool).
    input.push_str(
        r#"{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"\u0061dd","arguments":{"a":2,"b":3}}}"#,
    );
    input.push('\n');
    let mut child = spawn_stdio_example(c_server_asan());
    let mut stdin = child.stdin.take().unwrap();
    {
        use std::io::Write;
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for (i, (arguments, want)) in cases.iter().enumerate() {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{},", i + 1)))
            .unwrap_or_else(|| panic!("no answer to add {arguments}:\n{text}"));
        assert!(line.contains(want), "add {arguments}: {line}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with(r#"{"jsonrpc":"2.0","id":100,"#)
                && l.contains(r#""text":"5"}],"isError":false"#)),
        "{text}"
    );
}

/// 200,000 requests to a server whose client reads slowly: every one is answered, in order;
/// the server slows the client's writes down rather than failing.
#[test]
fn a_slow_reader_gets_all_200000_answers() {
    const N: usize = 200_000;
    let mut child = spawn_stdio_example(c_server_plain());
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(C_INIT.as_bytes()).unwrap();
        let mut batch = String::new();
        for i in 1..=N {
            batch.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"
            ));
            if i % 10_000 == 0 {
                stdin.write_all(batch.as_bytes()).unwrap();
                batch.clear();
            }
        }
    });
    let stdout = child.stdout.take().unwrap();
    let mut reader = std::io::BufReader::with_capacity(4096, stdout);
    let mut line = String::new();
    let mut pings = 0;
    let mut lines = 0;
    while pings < N {
        line.clear();
        let n = std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
        assert!(n > 0, "the server stopped after {pings} answers");
        lines += 1;
        if lines % 2_000 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2)); // a slow reader
        }
        if line.contains("\"result\":{}") {
            pings += 1;
            assert!(
                line.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{pings},")),
                "{line}"
            );
        }
    }
    writer.join().unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("output buffer full"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Answers that add up past the engine's output bound (16 MiB) all get out, to a client that
/// reads: requests read together after one large answer, and `count` calls whose steps meet
/// a full output while the client is slow. The example handed out every event of a read
/// before writing, then died on `OUTPUT_FULL` ("respond: output buffer full") and lost even
/// the answers it had given; its count jobs died the same way (found by an audit).
#[test]
fn answers_adding_up_past_the_output_bound_all_get_out() {
    let big = "y".repeat(16 * 1024 * 1024 - 4_000);
    let mut input = C_INIT.to_owned();
    input.push_str(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"echo\",\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{big}\"}}}}}}\n"
    ));
    for i in 1..=60 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n"
        ));
    }
    for i in 100..200 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"_meta\":{{\"progressToken\":{i}}},\"name\":\"count\",\"arguments\":{{}}}}}}\n"
        ));
    }
    input.push_str(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"echo2\",\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{big}\"}}}}}}\n"
    ));
    let mut child = spawn_stdio_example(c_server_plain());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Input stays open until every answer has come (the counts answer from a timer, and the
    // end of input drops jobs still running), for a minute at most; a server stuck for two
    // minutes is killed, so that the test fails instead of hanging.
    let (all_in, wait_all_in) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(input.as_bytes()); // a server that died is reported below
        let _ = wait_all_in.recv_timeout(std::time::Duration::from_secs(60));
    });
    let (finished, wait_finished) = std::sync::mpsc::channel::<()>();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        if wait_finished
            .recv_timeout(std::time::Duration::from_secs(120))
            .is_err()
        {
            // SAFETY: kill(2) reads nothing of ours; the pid is our child, not yet reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    });
    // A slow start: the counts' steps meet a full output meanwhile.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut missing: std::collections::BTreeSet<String> =
        ["\"echo\"".to_owned(), "\"echo2\"".to_owned()]
            .into_iter()
            .chain((1..=60).map(|i| i.to_string()))
            .chain((100..200).map(|i| i.to_string()))
            .collect();
    let mut lines = std::io::BufReader::new(stdout);
    let mut line = String::new();
    while !missing.is_empty() {
        line.clear();
        if std::io::BufRead::read_line(&mut lines, &mut line).unwrap() == 0 {
            break; // the server ended: what is missing is reported below
        }
        let answer = line.strip_prefix("{\"jsonrpc\":\"2.0\",\"id\":");
        if let Some((id, _)) = answer.and_then(|rest| rest.split_once(",\"result\"")) {
            missing.remove(id);
        }
    }
    let _ = all_in.send(());
    writer.join().unwrap();
    std::io::Read::read_to_end(&mut lines, &mut Vec::new()).unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = finished.send(());
    watchdog.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(missing.is_empty(), "unanswered: {missing:?}; {stderr}");
}

/// A client that writes and never reads: the server stops reading too (its memory stays
/// small) instead of buffering answers without end.
/// A client that writes all its pipelined requests before it reads any answer (as many
/// scripts do): 48 echo calls of 8 KiB, more than the two pipes hold, answered at the same
/// size. The server stopped reading while its output waited, and the two blocked each other
/// for good; it now reads on while less than its high-water mark (1 MiB) of output waits.
#[test]
fn a_client_that_writes_every_request_before_reading_gets_every_answer() {
    for program in [c_server_plain(), c_server_asan()] {
        let mut child = spawn_stdio_example(program);
        // Kills the server if the two block each other (the write below would never end).
        let watchdog = common::stdio::kill_after(child.id(), std::time::Duration::from_secs(20));
        let mut stdin = child.stdin.take().unwrap();
        let pad = "x".repeat(8 * 1024);
        let mut input = C_INIT.to_owned();
        for i in 1..=48 {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{pad}\"}}}}}}\n"
            ));
        }
        {
            use std::io::Write;
            // On this thread, as the client would: nothing is read until this is done.
            let written = stdin.write_all(input.as_bytes());
            assert!(
                written.is_ok(),
                "{written:?}: the server was killed, blocked"
            );
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        drop(watchdog);
        let text = String::from_utf8_lossy(&out.stdout);
        let answers = text.lines().filter(|l| l.contains(&pad)).count();
        assert_eq!(answers, 48, "{}: {:?}", program.display(), out.status);
    }
}

/// The stdio example makes stdin and stdout non-blocking, and those descriptions are shared
/// (a terminal, the parent's pipes): ended by SIGTERM (or Ctrl-C's SIGINT) it puts their
/// flags back. It died with them non-blocking, and the next program on the terminal got
/// EAGAIN.
#[test]
fn the_stdio_example_restores_its_shared_descriptors_when_signalled() {
    use std::os::fd::AsRawFd;
    let (reader, _writer) = std::io::pipe().unwrap();
    let shared = reader.try_clone().unwrap(); // the same open description
    let nonblocking = |fd: &std::io::PipeReader| {
        // SAFETY: F_GETFL on a descriptor this test owns.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        flags & libc::O_NONBLOCK != 0
    };
    assert!(!nonblocking(&shared));
    for signal in ["-TERM", "-INT"] {
        let mut child = Command::new(c_server_plain())
            .stdin(reader.try_clone().unwrap())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut waited = 0;
        while !nonblocking(&shared) && waited < 500 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            waited += 1;
        }
        assert!(nonblocking(&shared), "the server set no O_NONBLOCK");
        Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success(), "{status:?}");
        assert!(!nonblocking(&shared), "{signal}: stdin left non-blocking");
    }
    // Started ignoring SIGTERM (as a background job or under nohup), it still ignores it:
    // its handler replaced the ignored disposition, and the server ended.
    let script = format!("trap '' TERM; exec {}", c_server_plain().display());
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGTERM, ignored, ended it"
    );
    drop(child.stdin.take()); // the end of input ends it
    assert!(child.wait().unwrap().success());

    // A second signal during the grace (answers wait for a client that does not read) ends
    // it at once, the flags put back too: glibc's signal() under -std=c11 gave a handler
    // that ran once, and the second signal took the default end with the flags left
    // non-blocking (found by a review of the C examples).
    let (reader, mut writer) = std::io::pipe().unwrap();
    let shared = reader.try_clone().unwrap();
    let mut child = Command::new(c_server_plain())
        .stdin(reader.try_clone().unwrap())
        .stdout(std::process::Stdio::piped()) // never read
        .spawn()
        .unwrap();
    let mut input = C_INIT.to_owned();
    for i in 1..=2000 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"
        ));
    }
    std::io::Write::write_all(&mut writer, input.as_bytes()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(nonblocking(&shared), "the server set no O_NONBLOCK");
    for _ in 0..2 {
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    assert!(
        !nonblocking(&shared),
        "a second SIGTERM left stdin non-blocking"
    );
}

/// A SIGTERM ends the stdio example gracefully: every answer it already gave is written
/// before it ends (by that signal). It ended at once, and the answers waiting in the engine
/// for a client that had not read them yet were lost.
#[test]
fn the_stdio_example_writes_the_answers_it_gave_before_a_signal_ends_it() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::process::ExitStatusExt;
    let mut child = spawn_stdio_example(c_server_plain());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut input = C_INIT.to_owned();
    for i in 1..=2000 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"
        ));
    }
    stdin.write_all(input.as_bytes()).unwrap();
    // Every request read (the pipe to it empty), and answered; the answers wait, unread,
    // beyond the pipe's 64 KiB.
    let unread = || {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD on a pipe this test owns, into a c_int.
        unsafe { libc::ioctl(stdin.as_raw_fd(), libc::FIONREAD, &mut n) };
        n
    };
    let mut waited = 0;
    while unread() > 0 && waited < 500 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    assert_eq!(unread(), 0, "the server read its input");
    std::thread::sleep(std::time::Duration::from_millis(200));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    let answered = out.lines().filter(|l| l.contains("\"result\":{}")).count();
    assert_eq!(answered, 2000, "{} bytes of output", out.len());
    drop(stdin);
}

/// A SIGTERM to the stdio example while a "count" call runs, its client still reading: the
/// call is refused (-32603) before the server ends by that signal. It was dropped without a
/// word, as at the end of input, where the client has gone (found by a review of the C
/// examples).
#[test]
fn a_signal_to_the_stdio_example_refuses_the_calls_still_running() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::ExitStatusExt;
    let mut child = spawn_stdio_example(c_server_plain());
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    writeln!(stdin, "{C_INIT}{call}").unwrap();
    // The first progress: the call is running (two steps, about 100 ms, still to go).
    loop {
        let line = lines.next().expect("the server's output").unwrap();
        if line.contains("notifications/progress") {
            break;
        }
    }
    // Stopped at once, so that no step of the count passes before the signal is seen (on a
    // loaded machine); the SIGTERM is then taken first thing when it goes on.
    let pid = child.id() as libc::pid_t;
    for signal in [libc::SIGSTOP, libc::SIGTERM, libc::SIGCONT] {
        // SAFETY: kill(2) on our own child's pid, which has not been waited for.
        unsafe { libc::kill(pid, signal) };
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    let answer = rest
        .iter()
        .find(|l| l.contains("\"id\":9"))
        .unwrap_or_else(|| panic!("the call got no answer: {rest:?}"));
    let answer: serde_json::Value = serde_json::from_str(answer).unwrap();
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    drop(stdin);
}

/// A SIGTERM to the stdio example whose client has stopped reading (its answers fill the
/// pipe): it ends by that signal within its grace, not when the client reads again (it waited
/// on its output for good, and only a second signal or SIGKILL ended it). So it does when
/// its input has ended before (it was writing its last answers then, blocking, and the
/// signal was not looked at; found by a review of the C examples).
#[test]
fn the_stdio_example_ends_after_a_signal_when_its_client_does_not_read() {
    for input_ended in [false, true] {
        signal_a_server_whose_client_does_not_read(input_ended);
    }
}

#[allow(clippy::disallowed_methods)] // how long a real process took: the real clock
fn signal_a_server_whose_client_does_not_read(input_ended: bool) {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let mut child = spawn_stdio_example(c_server_plain());
    let mut stdin = child.stdin.take();
    let _stdout = child.stdout.take().unwrap(); // kept open, never read
    let mut input = C_INIT.to_owned();
    for i in 1..=2000 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"
        ));
    }
    stdin.as_mut().unwrap().write_all(input.as_bytes()).unwrap();
    if input_ended {
        stdin = None; // the end of its input: it writes its last answers, to nobody reading
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sent = std::time::Instant::now();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut status = None;
    while sent.elapsed() < std::time::Duration::from_secs(10) {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("still running 10 s after SIGTERM (input ended: {input_ended})");
    };
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(
        sent.elapsed() >= std::time::Duration::from_secs(2),
        "the answers had their grace: {:?}",
        sent.elapsed()
    );
    drop(stdin);
}

/// The answers collected for 2025-03-26 batches still open count as output: an answer outside
/// them may find it full, though the client reads everything. The stdio example died then
/// ("respond: output buffer full", exit 1, every answer lost); it now gives that answer again
/// once the batches are answered and written (found by a review of the C examples).
#[test]
fn the_stdio_example_gives_an_answer_refused_while_batches_fill_the_output_again() {
    give_an_answer_refused_while_batches_fill_the_output("99");
}

/// The same with a string id: the answer given again carries exactly that id. The example
/// kept a pointer into the request event and copied the id only once the engine had refused
/// the answer, after a call that ends the event's views (mcpwire.h); it now copies the id
/// before it answers (found by a review of the C examples).
#[test]
fn the_stdio_example_gives_an_answer_refused_while_batches_fill_the_output_again_with_a_string_id()
{
    give_an_answer_refused_while_batches_fill_the_output(r#""late-99""#);
}

/// Two 2025-03-26 batches hold the output until their "count" members are answered; a
/// tools/list with id `late_id` (JSON) comes behind them. Every answer must come out, that one
/// with `late_id` exactly.
#[allow(clippy::disallowed_methods)] // a process test: it bounds its wait by the real clock
fn give_an_answer_refused_while_batches_fill_the_output(late_id: &str) {
    use std::io::{BufRead, Write};
    let mut child = spawn_stdio_example(c_server_plain());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let summary = if line.starts_with('[') {
                "array".to_owned()
            } else {
                serde_json::from_str::<serde_json::Value>(&line)
                    .map(|v| v["id"].to_string())
                    .unwrap_or_default()
            };
            if tx.send(summary).is_err() {
                return;
            }
        }
    });
    let mut input = C_INIT.replace("2025-11-25", "2025-03-26");
    let text = "y".repeat(9 << 20);
    for name in ["a1", "a2"] {
        input.push_str(&format!(
            r#"[{{"jsonrpc":"2.0","id":"{name}","method":"tools/call","params":{{"name":"count","arguments":{{}}}}}},{{"jsonrpc":"2.0","id":"{name}-echo","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}]"#
        ));
        input.push('\n');
    }
    input.push_str(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{late_id},\"method\":\"tools/list\"}}\n"
    ));
    stdin.write_all(input.as_bytes()).unwrap();
    let started = std::time::Instant::now();
    let (mut arrays, mut listed) = (0, false);
    while arrays < 2 || !listed {
        let left = std::time::Duration::from_secs(30).saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(s) if s == "array" => arrays += 1,
            Ok(s) if s == late_id => listed = true,
            // (the initialize result, and notifications)
            Ok(s) if s == "0" || s == "null" => {}
            Ok(s) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("an answer with id {s}, where {late_id} was asked");
            }
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "{arrays} arrays, tools/list answered: {listed}; {:?}",
                    child.wait()
                );
            }
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_client_that_never_reads_leaves_the_server_small() {
    let mut child = spawn_stdio_example(c_server_plain());
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let _stdout = child.stdout.take().unwrap(); // kept open, never read
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(C_INIT.as_bytes());
        let pad = "x".repeat(60 * 1024);
        for i in 1..=2_000 {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{pad}\"}}}}}}\n"
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let mut peak = 0;
    for _ in 0..30 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        peak = peak.max(rss_of(pid));
    }
    assert!(
        !done.load(std::sync::atomic::Ordering::SeqCst),
        "120 MB of echo requests went in with nobody reading the answers"
    );
    assert!(peak > 0 && peak < 32 * 1024 * 1024, "RSS {peak} bytes");
    let _ = child.kill();
    let _ = child.wait();
}

/// `mcpwire.hpp` refuses to compile a view of something about to be freed: a connection
/// view of a temporary connection (the conversion compiled, and the view dangled at the end of
/// the statement), and the text or headers of a `const` temporary string or vector (the
/// guard caught only the non-const ones). The same calls on lvalues compile.
#[test]
fn views_of_temporaries_do_not_compile() {
    let dir = out_dir();
    let prelude = "#include \"mcpwire.hpp\"\n#include <string>\n#include <vector>\n\
                   const std::string text() { return \"{}\"; }\n\
                   const std::vector<mcpw_http_header> list() { return {}; }\n\
                   int main() {\n    mcpw::config c(mcpw::role::server, \"s\", \"1\");\n";
    let compile = |name: &str, body: &str| {
        let src = dir.join(format!("temporaries_{name}.cpp"));
        std::fs::write(&src, format!("{prelude}    {body}\n    return 0;\n}}\n")).unwrap();
        Command::new("c++")
            .args(["-std=c++17", "-fsyntax-only", "-x", "c++"])
            .arg("-I")
            .arg(root().join("include"))
            .arg("-I")
            .arg(root().join("bindings/cpp"))
            .arg(&src)
            .output()
            .expect("run the compiler")
    };
    for (name, body) in [
        (
            "conversion",
            "mcpw::connection_view v = mcpw::connection(c, 0); (void)v;",
        ),
        ("view", "auto v = mcpw::connection(c, 0).view(); (void)v;"),
        ("json", "auto v = mcpw::json_get(text(), \"a\"); (void)v;"),
        ("headers", "mcpw::http_headers h(list()); (void)h;"),
    ] {
        let out = compile(name, body);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("deleted"),
            "{name} compiled, or failed for another reason: {err}"
        );
    }
    let out = compile(
        "lvalues",
        "mcpw::connection conn(c, 0); mcpw::connection_view v = conn; auto w = conn.view();\n    \
         const std::string t = text(); auto j = mcpw::json_get(t, \"a\");\n    \
         const std::vector<mcpw_http_header> l = list(); mcpw::http_headers h(l);\n    \
         (void)v; (void)w; (void)j; (void)h;",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The headers compile wherever they say they do: `mcpwire.h` as C99 and later and as C++11
/// and later with every warning an error; `mcpwire.hpp` as C++17 and C++20, and before C++17
/// it stops with one clear error (it gave about 250, from the first `std::optional`).
#[test]
fn the_headers_compile_under_the_standards_they_name() {
    let dir = out_dir();
    let c_src = dir.join("header_only.c");
    std::fs::write(
        &c_src,
        "#include \"mcpwire.h\"\nint main(void) { return 0; }\n",
    )
    .unwrap();
    let cxx_src = dir.join("header_only.cpp");
    std::fs::write(
        &cxx_src,
        "#include \"mcpwire.hpp\"\nint main() { return 0; }\n",
    )
    .unwrap();
    let compile = |compiler: &str, std: &str, src: &Path| {
        let mut cmd = Command::new(compiler);
        cmd.args([
            std,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
        ])
        .arg("-I")
        .arg(root().join("include"))
        .arg("-I")
        .arg(root().join("bindings/cpp"));
        if compiler != "cc" {
            cmd.args(["-x", "c++"]);
        }
        cmd.arg(src).output().expect("run the compiler")
    };
    for std in ["-std=c99", "-std=c11", "-std=c17"] {
        let out = compile("cc", std, &c_src);
        assert!(
            out.status.success(),
            "mcpwire.h as {std}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for std in ["-std=c++11", "-std=c++17", "-std=c++20"] {
        let out = compile("c++", std, &c_src);
        assert!(
            out.status.success(),
            "mcpwire.h as {std}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for std in ["-std=c++17", "-std=c++20"] {
        let out = compile("c++", std, &cxx_src);
        assert!(
            out.status.success(),
            "mcpwire.hpp as {std}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = compile("c++", "-std=c++14", &cxx_src);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
    assert!(first.contains("needs C++17"), "{err}");
}
