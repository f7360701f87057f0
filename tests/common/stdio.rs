//! A connection engine against a child process over stdio, on the library's blocking loop
//! (`mcpwire::blocking`), plus the paths of the installed peers.
#![allow(dead_code)]
// This is the IO layer of the tests: it reads the real clock and passes it in as data.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::pair::Ev;
use mcpwire::Timestamp;
use mcpwire::blocking::{Io, Stop};
use mcpwire::conn::{Config, Connection};

/// The repository root (these helpers are shared by the crates in `bindings/` too).
pub fn root() -> PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|dir| dir.join(".ci/test").is_file())
        .unwrap_or(here)
        .to_path_buf()
}

/// The installed peers (see .ci/setup-peers); panics with instructions when missing.
pub fn node_modules() -> PathBuf {
    let nm = root().join("tests/peers/node/node_modules");
    assert!(
        nm.join("@modelcontextprotocol/server-everything").exists(),
        "the npm peers are not installed: run .ci/setup-peers (the test command does)"
    );
    nm
}

pub fn everything_command() -> Command {
    let mut c = Command::new("node");
    c.arg(node_modules().join("@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("stdio");
    c
}

pub fn python_site() -> PathBuf {
    let site = root().join("tests/peers/python/site");
    assert!(
        site.join("mcp").exists(),
        "the Python peers are not installed: run .ci/setup-peers (the test command does)"
    );
    site
}

pub struct StdioPeer {
    pub conn: Connection,
    child: Child,
    io: Io<ChildStdin>,
    start: Instant,
}

impl StdioPeer {
    pub fn spawn(mut command: Command, config: Config) -> StdioPeer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the peer");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let start = Instant::now();
        let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
        let conn = Connection::new(config, Timestamp::ZERO).unwrap();
        StdioPeer {
            conn,
            io: Io::new(stdout, stdin, clock),
            child,
            start,
        }
    }

    pub fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// Runs the loop, handing every event to `on_event` (which may issue commands), until it
    /// returns `true`. Fails after `limit`.
    pub fn run_until(
        &mut self,
        limit: Duration,
        mut on_event: impl FnMut(&mut Connection, Timestamp, &Ev) -> bool,
    ) -> Result<(), String> {
        let give_up = Timestamp::from_nanos(self.now().as_nanos() + limit.as_nanos() as u64);
        self.io
            .run_until(&mut self.conn, Some(give_up), |conn, now, ev| {
                on_event(conn, now, &ev).then_some(())
            })
            .map_err(|stop| match stop {
                Stop::Eof => "the peer closed its output".to_owned(),
                Stop::Deadline => format!("gave up after {limit:?}"),
            })
    }

    /// The spec's stdio shutdown: close the server's stdin, wait, then terminate it. (Ten
    /// seconds for the server to exit by itself: tests assert that it did, on a loaded
    /// machine too.)
    pub fn shutdown(mut self) -> std::process::ExitStatus {
        self.io.close_output();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }
}

impl Drop for StdioPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The path of an example binary built by this `cargo test` run (examples are built with the
/// tests, next to them).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let path = dir.join("examples").join(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// Runs a peer client script against `server` and returns (success, output, elapsed).
pub fn run_client(mut client: Command, server: &[&str]) -> (bool, String, Duration) {
    client.arg("--").args(server);
    client.env("PYTHONPATH", python_site());
    let start = Instant::now();
    let out = client.output().expect("run the client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text, start.elapsed())
}

pub fn python_client(extra: &[&str]) -> Command {
    let mut c = Command::new("python3");
    c.arg(root().join("tests/peers/py_client.py")).args(extra);
    c
}

pub fn ts_client(extra: &[&str]) -> Command {
    node_modules();
    let mut c = Command::new("node");
    c.arg(root().join("tests/peers/ts_client.mjs")).args(extra);
    c
}

/// The Python SDK server of tests/peers/py_server.py.
pub fn python_server_command() -> Command {
    let mut c = Command::new("python3");
    c.arg(root().join("tests/peers/py_server.py"))
        .env("PYTHONPATH", python_site());
    c
}

/// The Python SDK client in `mode` completes a session against `server` (tools, resources,
/// prompts) and ends on `version`. Returns how long it took.
pub fn assert_python_session(server: &[&str], mode: &str, version: &str) -> Duration {
    let (ok, out, elapsed) = run_client(
        python_client(&["--mode", mode, "--expect-version", version]),
        server,
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("echo(text='hello from python') -> 'hello from python'"),
        "{out}"
    );
    assert!(
        out.contains("read mem://greeting -> 1 content item(s)"),
        "{out}"
    );
    assert!(out.contains("get greet({}) -> 1 message(s)"), "{out}");
    assert!(
        out.trim_end().ends_with(&format!("PY_CLIENT_OK {version}")),
        "{out}"
    );
    elapsed
}

/// The TypeScript SDK client completes a session against `server` (2025-11-25).
pub fn assert_typescript_session(server: &[&str]) {
    let (ok, out, _) = run_client(ts_client(&[]), server);
    assert!(ok, "{out}");
    assert!(
        out.contains(r#"echo(text="hello from typescript") -> "hello from typescript""#),
        "{out}"
    );
    assert!(out.trim_end().ends_with("TS_CLIENT_OK 2025-11-25"), "{out}");
}

/// The pid a test's server wrote to `path` (`echo $$ > path; exec …`), waiting for it up to
/// 10 s.
pub fn pid_from_file(path: &std::path::Path) -> u32 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            return pid;
        }
        assert!(Instant::now() < until, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills process `pid` (SIGKILL) if the returned guard is still alive after `limit`: for a
/// test whose subject could block for good (a deadlock), so that it fails instead of hanging.
/// Dropping the guard, once the process has been waited for, calls that off.
pub fn kill_after(pid: u32, limit: Duration) -> KillAfter {
    let (done, watched) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        if watched.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    });
    KillAfter {
        done: Some(done),
        thread: Some(thread),
    }
}

/// See [`kill_after`].
pub struct KillAfter {
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for KillAfter {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether process `pid` is still running (a zombie is not: it has ended, unreaped).
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

/// Runs a 2025-11-25 session on the stdio server `server`: the handshake, then `requests`
/// (JSON-RPC requests as text, one per line), then the end of input. Returns the answer to
/// each request with id `n`, as `answer(n)` reads it: the line the server wrote for it.
pub fn answers_in_a_session(server: &[&str], requests: &[&str]) -> impl Fn(i64) -> String {
    use std::io::Write;
    let mut input = String::from(concat!(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","#,
        r#""capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n"
    ));
    for r in requests {
        input.push_str(r);
        input.push('\n');
    }
    let mut child = Command::new(server[0])
        .args(&server[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let out = child.wait_with_output().expect("the server's output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    move |id| {
        text.lines()
            .find(|l| l.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"#)))
            .unwrap_or_else(|| panic!("no answer to {id}:\n{text}"))
            .to_owned()
    }
}

/// An unknown tool and an unknown prompt get -32602 from the stdio server `server`, as the
/// spec's tools and prompts pages show (the example servers answered an unknown tool with a
/// result carrying `isError`, and some any prompt name with their one prompt).
pub fn assert_unknown_tools_and_prompts_are_invalid_params(server: &[&str]) {
    let answer = answers_in_a_session(
        server,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"nope"}}"#,
        ],
    );
    for id in [1, 2] {
        let line = answer(id);
        assert!(line.contains(r#""code":-32602"#), "{server:?}: {line}");
    }
}

/// Every list of the stdio server `server` fits on one page, so a `cursor` is one it never
/// gave: -32602, as the spec's pagination page says of an invalid cursor (the example servers
/// ignored it and listed the first page again). Without one, each list is answered.
pub fn assert_unknown_cursors_are_invalid_params(server: &[&str]) {
    let lists = [
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    ];
    let mut requests = Vec::new();
    for (i, method) in lists.iter().enumerate() {
        requests.push(format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{{"cursor":"bm90LWdpdmVu"}}}}"#,
            i + 1
        ));
        requests.push(format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}"}}"#,
            i + 11
        ));
    }
    let requests: Vec<&str> = requests.iter().map(String::as_str).collect();
    let answer = answers_in_a_session(server, &requests);
    for (i, method) in lists.iter().enumerate() {
        let refused = answer(i as i64 + 1);
        assert!(
            refused.contains(r#""code":-32602"#),
            "{server:?} {method} with a cursor: {refused}"
        );
        let listed = answer(i as i64 + 11);
        assert!(
            listed.contains(r#""result""#),
            "{server:?} {method}: {listed}"
        );
    }
}
