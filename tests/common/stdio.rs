//! A small blocking loop that drives a connection engine against a child process over stdio,
//! the way an application's event loop would: write what the engine lends, feed what arrives,
//! fire timers at the deadline the engine asks for.
#![allow(dead_code)]
// This is the IO layer of the tests: it reads the real clock and passes it in as data.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use super::pair::{Ev, own};
use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
    stdin: Option<ChildStdin>,
    rx: Receiver<Option<Vec<u8>>>,
    start: Instant,
    eof: bool,
}

impl StdioPeer {
    pub fn spawn(mut command: Command, config: Config) -> StdioPeer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the peer");
        let mut stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(None);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Some(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let start = Instant::now();
        let conn = Connection::new(config, Timestamp::ZERO).unwrap();
        StdioPeer {
            conn,
            stdin: child.stdin.take(),
            child,
            rx,
            start,
            eof: false,
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
        let give_up = Instant::now() + limit;
        loop {
            // Drain outputs after every mutation: events, then bytes.
            let mut busy = false;
            while let Some(e) = self.conn.poll_event() {
                let ev = own(e);
                busy = true;
                let now = self.now();
                if on_event(&mut self.conn, now, &ev) {
                    self.flush();
                    return Ok(());
                }
            }
            busy |= self.flush();
            if busy {
                continue;
            }
            if self.eof {
                return Err("the peer closed its output".into());
            }
            let now = Instant::now();
            if now >= give_up {
                return Err(format!("gave up after {limit:?}"));
            }
            let mut wait = give_up - now;
            if let Some(deadline) = self.conn.poll_timeout() {
                let until =
                    Duration::from_nanos(deadline.as_nanos().saturating_sub(self.now().as_nanos()));
                wait = wait.min(until);
            }
            match self.rx.recv_timeout(wait) {
                Ok(Some(bytes)) => {
                    let now = self.now();
                    self.conn.handle_input(now, &bytes);
                }
                Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                    self.eof = true;
                    let now = self.now();
                    self.conn.handle_eof(now);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = self.now();
            self.conn.handle_timeout(now);
        }
    }

    /// Writes everything the engine has for the peer. Returns whether anything was written.
    fn flush(&mut self) -> bool {
        let mut wrote = false;
        while let Some(t) = self.conn.poll_transmit() {
            let n = t.bytes.len();
            if let Some(stdin) = self.stdin.as_mut() {
                if stdin.write_all(t.bytes).is_err() {
                    self.stdin = None;
                }
                let _ = stdin_flush(&mut self.stdin);
            }
            self.conn.consume_transmit(n);
            wrote = true;
        }
        wrote
    }

    /// The spec's stdio shutdown: close the server's stdin, wait, then terminate it.
    pub fn shutdown(mut self) -> std::process::ExitStatus {
        self.stdin = None;
        let until = Instant::now() + Duration::from_secs(2);
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

fn stdin_flush(stdin: &mut Option<ChildStdin>) -> std::io::Result<()> {
    match stdin {
        Some(s) => s.flush(),
        None => Ok(()),
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
