//! The tokio stdio driver: the example server against the Python and TypeScript SDK clients,
//! the example child-process client against server-everything and the example server, and
//! the driver's own promises (every pipelined answer before the end, backpressure,
//! cancellation safety).

#[path = "../../../tests/common/mod.rs"]
mod root_common;

use std::process::Command;
use std::time::Duration;

use mcpwire::jsonrpc::RawJson;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::stdio::Driver;
use root_common::stdio::{
    answers_in_a_session, assert_python_session, assert_typescript_session,
    assert_unknown_cursors_are_invalid_params, assert_unknown_tools_and_prompts_are_invalid_params,
    everything_command, example_binary,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn server() -> String {
    example_binary("tokio_stdio_server").display().to_string()
}

#[test]
fn python_sdk_client_completes_sessions_in_both_eras() {
    assert_python_session(&[&server()], "legacy", "2025-11-25");
    assert_python_session(&[&server()], "auto", "2026-07-28");
}

#[test]
fn unknown_tools_and_prompts_are_invalid_params() {
    assert_unknown_tools_and_prompts_are_invalid_params(&[&server()]);
    assert_unknown_cursors_are_invalid_params(&[&server()]);
}

/// A tool name with an escape (as clients that escape non-ASCII send names) is the same name:
/// the example read it into a `&str`, which serde cannot borrow through an escape, and
/// answered -32602.
#[test]
fn a_tool_name_with_an_escape_is_served() {
    let server = server();
    let command = [server.as_str()];
    let answer = answers_in_a_session(
        &command,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ech\u006f","arguments":{"text":"hi"}}}"#,
        ],
    );
    let line = answer(1);
    assert!(line.contains(r#""text":"hi""#), "{line}");
}

#[test]
fn typescript_sdk_client_completes_a_session() {
    assert_typescript_session(&[&server()]);
}

fn child_client(arg: &str, server: &[String]) -> String {
    let out = Command::new(example_binary("tokio_child_client"))
        .arg(arg)
        .arg("--")
        .args(server)
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_child_client_completes_sessions_with_server_everything_and_the_example_server() {
    let everything = everything_command();
    let mut cmd = vec![everything.get_program().to_string_lossy().into_owned()];
    cmd.extend(
        everything
            .get_args()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    let out = child_client("message", &cmd);
    assert!(out.contains("Echo: hello from tokio"), "{out}");
    assert!(
        out.trim_end().ends_with("TOKIO_CLIENT_OK 2025-11-25"),
        "{out}"
    );
    let out = child_client("text", &[server()]);
    assert!(out.contains("hello from tokio"), "{out}");
    assert!(
        out.trim_end().ends_with("TOKIO_CLIENT_OK 2026-07-28"),
        "{out}"
    );
}

/// A tool that fails (here: the argument is misnamed) fails the client: it printed its
/// success line and exited 0 on an `isError` result.
#[test]
fn the_child_client_fails_when_the_tool_reports_an_error() {
    let out = Command::new(example_binary("tokio_child_client"))
        .arg("wrong")
        .arg("--")
        .arg(server())
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("TOKIO_CLIENT_OK"), "{stdout}");
    assert!(
        stderr.contains("the echo tool reported an error"),
        "{stderr}"
    );
}

/// An answer the engine cannot take (here both a result and an error: a violation) fails the
/// child client at once, saying so: it ignored the event and waited out its 30 s, then blamed
/// the timeout.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real process took: the real clock
fn the_child_client_fails_at_once_on_an_invalid_answer() {
    let fake = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"jsonrpc": "2.0", "id": m["id"]}
    if m["method"] == "initialize":
        r["result"] = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "fake", "version": "1"}}
    elif m["method"] == "tools/list":
        r["result"] = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif m["method"] == "tools/call":
        r["result"] = {"content": []}
        r["error"] = {"code": -32603, "message": "both"}
    else:
        r["error"] = {"code": -32601, "message": "Method not found"}
    print(json.dumps(r), flush=True)
"#;
    let started = std::time::Instant::now();
    let out = Command::new(example_binary("tokio_child_client"))
        .args(["text", "--", "python3", "-c", fake])
        .output()
        .expect("run the client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("broke the protocol: InvalidMessage(ResultAndError)"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

/// SIGINT while the client has stopped reading (its pipe full of answers): the example server
/// exits within the close's grace and a second, not for good. It waited for its output to be
/// written, which never happened, and a second SIGINT was swallowed too.
#[test]
#[allow(clippy::disallowed_methods)] // how long a real process took: the real clock
fn the_example_server_stops_on_a_signal_when_its_client_does_not_read() {
    use std::io::Write;
    use std::process::Stdio;
    use std::time::Instant;
    let mut child = Command::new(server())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped()) // never read
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example server");
    let mut input = INIT.as_bytes().to_vec();
    let text = "x".repeat(100_000);
    for i in 1..=40 {
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{text}\"}}}}}}\n")
                .as_bytes(),
        );
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        stdin // (kept open: the client has not gone, it only stopped reading)
    });
    std::thread::sleep(Duration::from_millis(500)); // (its output pipe is full by now)
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let signalled = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if signalled.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server still ran 10 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1), "{status:?}");
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("the client is not reading"), "{stderr}");
    drop(writer);
}

const INIT: &str = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

fn requests(n: usize) -> Vec<u8> {
    let mut input = INIT.as_bytes().to_vec();
    for i in 1..=n {
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n").as_bytes(),
        );
    }
    input
}

fn server_config() -> Config {
    Config::server("t", "1")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap()
}

/// Serves `input` through a duplex pipe of `pipe` bytes, the peer reading `chunk` bytes at a
/// time with a pause between reads; every `next_event` runs against a short timer that
/// cancels it when it fires (the driver must lose nothing). Returns the peer's output.
async fn serve(input: Vec<u8>, pipe: usize, chunk: usize, pause: Duration) -> Vec<u8> {
    serve_with(server_config(), input, pipe, chunk, pause).await
}

/// [`serve`] for a server made from `config`.
async fn serve_with(
    config: Config,
    input: Vec<u8>,
    pipe: usize,
    chunk: usize,
    pause: Duration,
) -> Vec<u8> {
    let (ours, theirs) = tokio::io::duplex(pipe);
    let (reader, writer) = tokio::io::split(ours);
    let (mut peer_read, mut peer_write) = tokio::io::split(theirs);
    let feeder = tokio::spawn(async move {
        peer_write.write_all(&input).await.unwrap();
        peer_write.shutdown().await.unwrap();
    });
    let collector = tokio::spawn(async move {
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = peer_read.read(&mut buf).await.unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
            tokio::time::sleep(pause).await;
        }
    });
    let mut io = Driver::new(config, reader, writer).unwrap();
    let tools = RawJson::new(r#"{"tools":[]}"#).unwrap();
    let mut cancelled = 0;
    loop {
        let next = tokio::time::timeout(Duration::from_micros(200), io.next_event()).await;
        let Ok(event) = next else {
            cancelled += 1;
            continue;
        };
        match event.unwrap() {
            None => break,
            Some(OwnedEvent::Request { id, .. }) => {
                io.connection().respond(id.as_id(), tools).unwrap();
            }
            Some(_) => {}
        }
    }
    let (_, _, writer) = io.into_parts();
    drop(writer); // the peer's read ends
    feeder.await.unwrap();
    let out = collector.await.unwrap();
    assert!(
        cancelled > 0 || pause.is_zero(),
        "no next_event was cancelled"
    );
    out
}

fn assert_all_answered(out: &[u8], n: usize) {
    let text = String::from_utf8_lossy(out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n + 1, "initialize and {n} answers expected");
    for (i, line) in lines.iter().enumerate().skip(1) {
        assert!(
            line.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\"")),
            "answer {i}: {line}"
        );
    }
}

#[tokio::test]
async fn every_pipelined_request_is_answered_before_the_end() {
    let out = serve(requests(3000), 64 * 1024, 64 * 1024, Duration::ZERO).await;
    assert_all_answered(&out, 3000);
}

/// Under lowered limits the input goes to the engine in smaller pieces: with
/// `max_inbound_in_flight` 64, a 4 KiB piece held up to 85 requests, and those past 64 were
/// refused as too many in flight; with a 128 KiB output bound, the engine's error answers to
/// one piece of junk lines passed it, and the connection closed as if the peer did not read.
#[tokio::test]
async fn pipelined_requests_are_all_answered_under_lowered_limits() {
    let mut config = server_config();
    config.limits.max_inbound_in_flight = 64;
    let out = serve_with(config, requests(3000), 64 * 1024, 64 * 1024, Duration::ZERO).await;
    assert_all_answered(&out, 3000);

    let mut config = server_config();
    config.limits.max_buffered_output = 128 * 1024;
    let mut input = requests(200);
    input.extend_from_slice("x\n".repeat(3000).as_bytes());
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":999,\"method\":\"tools/list\"}\n");
    let out = serve_with(config, input, 64 * 1024, 64 * 1024, Duration::ZERO).await;
    let text = String::from_utf8_lossy(&out);
    assert_eq!(
        text.matches("\"result\":{\"tools\":[]}").count(),
        201,
        "{text:.300}"
    );
}

#[tokio::test]
async fn a_slow_reader_gets_every_answer_and_cancelled_calls_lose_nothing() {
    // A 1 KiB pipe read 256 bytes at a time, 1 ms apart: the driver waits on every write,
    // and the timer cancels its next_event again and again.
    let out = serve(requests(500), 1024, 256, Duration::from_millis(1)).await;
    assert_all_answered(&out, 500);
}

/// The example server's stdin and stdout are pipes, or socket pairs as Node gives its
/// children: it answers 2,000 pipelined requests and ends at end of input, its stdio waits on
/// the reactor (it holds a second descriptor of the same pipe or socket: the reopened or
/// duplicated one), and the descriptions it shares with us are still blocking afterwards.
#[cfg(target_os = "linux")]
#[test]
fn the_example_serves_pipes_and_sockets_on_the_reactor_and_leaves_shared_descriptors_blocking() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::process::Stdio;

    fn nonblocking(fd: BorrowedFd<'_>) -> bool {
        // SAFETY: F_GETFL only reads the flags of an open descriptor.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0);
        flags & libc::O_NONBLOCK != 0
    }
    /// How many of `pid`'s descriptors point where its descriptor `n` does.
    fn links_to_fd(pid: u32, n: u32) -> usize {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{n}")).unwrap();
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|t| *t == target)
            .count()
    }

    for socket in [false, true] {
        // (what the child gets, a copy we keep to look at its flags, our end)
        let (child_in, kept_in, mut to_child): (OwnedFd, OwnedFd, Box<dyn Write + Send>);
        let (child_out, kept_out, from_child): (OwnedFd, OwnedFd, Box<dyn Read + Send>);
        if socket {
            let (a, b) = UnixStream::pair().unwrap();
            (child_in, kept_in, to_child) = (a.try_clone().unwrap().into(), a.into(), Box::new(b));
            let (a, b) = UnixStream::pair().unwrap();
            (child_out, kept_out, from_child) =
                (a.try_clone().unwrap().into(), a.into(), Box::new(b));
        } else {
            let (r, w) = std::io::pipe().unwrap();
            (child_in, kept_in, to_child) = (r.try_clone().unwrap().into(), r.into(), Box::new(w));
            let (r, w) = std::io::pipe().unwrap();
            (child_out, kept_out, from_child) =
                (w.try_clone().unwrap().into(), w.into(), Box::new(r));
        }
        let mut command = Command::new(server());
        command
            .stdin(Stdio::from(child_in))
            .stdout(Stdio::from(child_out))
            .stderr(Stdio::inherit());
        let mut child = command.spawn().unwrap();
        drop(command); // its copies of the child's ends
        let what = if socket { "socket" } else { "pipe" };
        let n = 2000;
        let writer = std::thread::spawn(move || {
            to_child.write_all(&requests(n)).unwrap();
            to_child // kept open until the answers are in
        });
        let mut lines = BufReader::new(from_child).lines();
        for i in 0..=n {
            let line = lines.next().expect("the server ended early").unwrap();
            assert!(
                line.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\"")),
                "{what}: {line}"
            );
        }
        assert!(
            links_to_fd(child.id(), 0) >= 2,
            "{what}: stdin is not on the reactor"
        );
        assert!(
            links_to_fd(child.id(), 1) >= 2,
            "{what}: stdout is not on the reactor"
        );
        drop(writer.join().unwrap()); // end of input: the server exits
        assert!(child.wait().unwrap().success(), "{what}");
        assert!(
            !nonblocking(kept_in.as_fd()),
            "{what}: stdin's description was changed"
        );
        assert!(
            !nonblocking(kept_out.as_fd()),
            "{what}: stdout's description was changed"
        );
        drop((kept_in, kept_out)); // the last copies of the child's ends: now our read ends
        assert!(lines.next().is_none(), "{what}: output after the answers");
    }
}

/// A writer that keeps what is written until it is flushed, as `tokio::io::BufWriter` may,
/// and counts writes and flushes.
struct Held<W> {
    inner: W,
    held: Vec<u8>,
    counts: std::sync::Arc<std::sync::Mutex<(usize, usize)>>, // (writes, flushes)
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Held<W> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.held.extend_from_slice(bytes);
        this.counts.lock().unwrap().0 += 1;
        std::task::Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        while !this.held.is_empty() {
            let n =
                std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_write(cx, &this.held))?;
            this.held.drain(..n);
        }
        std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_flush(cx))?;
        this.counts.lock().unwrap().1 += 1;
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::ready!(self.as_mut().poll_flush(cx))?;
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The driver flushes its writer before it waits for input, and only then: a peer that sends
/// 500 requests at once and keeps its side open gets every answer (the driver is waiting for
/// more input by then, so only that flush can have released them). The answers leave in
/// writes of about 4 KiB, not one write each, and take a few flushes rather than one each (a
/// writer such as `tokio::io::stdout`, whose flush waits for the blocking thread pool, would
/// otherwise pay that wait per answer).
#[tokio::test]
async fn answers_are_written_in_batches_and_flushed_before_waiting() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (reader, writer) = tokio::io::split(ours);
    let (mut peer_read, mut peer_write) = tokio::io::split(theirs);
    let counts = std::sync::Arc::new(std::sync::Mutex::new((0, 0)));
    let writer = Held {
        inner: writer,
        held: Vec::new(),
        counts: counts.clone(),
    };
    let server = tokio::spawn(async move {
        let mut io = Driver::new(server_config(), reader, writer).unwrap();
        let tools = RawJson::new(r#"{"tools":[]}"#).unwrap();
        while let Some(event) = io.next_event().await.unwrap() {
            if let OwnedEvent::Request { id, .. } = event {
                io.connection().respond(id.as_id(), tools).unwrap();
            }
        }
    });
    let n = 500;
    peer_write.write_all(&requests(n)).await.unwrap(); // and the side stays open
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while out.iter().filter(|&&b| b == b'\n').count() < n + 1 {
        let read = tokio::time::timeout(Duration::from_secs(10), peer_read.read(&mut buf)).await;
        let got = read
            .expect("answers held back: no flush before waiting")
            .unwrap();
        assert!(got > 0, "the driver ended early");
        out.extend_from_slice(&buf[..got]);
    }
    assert_all_answered(&out, n);
    let (writes, flushes) = *counts.lock().unwrap();
    // Each write takes at least 4 KiB, except the last of each batch (one per read, and a
    // 1 MiB pipe takes the requests in a few reads).
    let batches = out.len() / 4096 + 1;
    assert!(
        writes <= batches + 10,
        "{writes} writes for {n} answers ({} bytes)",
        out.len()
    );
    assert!(
        flushes <= 10,
        "{flushes} flushes for {n} answers in one read"
    );
    peer_write.shutdown().await.unwrap(); // end of input: the driver ends
    server.await.unwrap();
}

/// `write_pending` sends the answers given so far at once: an application that answers the
/// first of two pipelined requests and then does slow work inline does not hold that answer
/// back until the slow work is done.
#[tokio::test]
async fn write_pending_sends_given_answers_before_slow_work() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (reader, writer) = tokio::io::split(ours);
    let (mut peer_read, mut peer_write) = tokio::io::split(theirs);
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let mut io = Driver::new(server_config(), reader, writer).unwrap();
        let tools = RawJson::new(r#"{"tools":[]}"#).unwrap();
        let mut released = Some(released);
        while let Some(event) = io.next_event().await.unwrap() {
            if let OwnedEvent::Request { id, .. } = event {
                io.connection().respond(id.as_id(), tools).unwrap();
                if let Some(slow_work) = released.take() {
                    io.write_pending().await.unwrap();
                    let _ = slow_work.await; // until the peer has the first answer
                }
            }
        }
    });
    peer_write.write_all(&requests(2)).await.unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4096];
    while out.iter().filter(|&&b| b == b'\n').count() < 2 {
        let got = tokio::time::timeout(Duration::from_secs(10), peer_read.read(&mut buf))
            .await
            .expect("the first answer was held back by the slow work")
            .unwrap();
        assert!(got > 0, "the driver ended early");
        out.extend_from_slice(&buf[..got]);
    }
    assert!(
        String::from_utf8_lossy(&out).contains(r#""id":1,"result""#),
        "{}",
        String::from_utf8_lossy(&out)
    );
    release.send(()).unwrap();
    while out.iter().filter(|&&b| b == b'\n').count() < 3 {
        let got = peer_read.read(&mut buf).await.unwrap();
        assert!(got > 0, "the driver ended early");
        out.extend_from_slice(&buf[..got]);
    }
    assert_all_answered(&out, 2);
    peer_write.shutdown().await.unwrap();
    server.await.unwrap();
}

/// Outside a tokio runtime nothing can be registered with a reactor: `stdin()` and `stdout()`
/// fall back to tokio's own types (which need a runtime only when they are used).
#[test]
fn outside_a_runtime_stdio_falls_back_to_the_blocking_pool() {
    assert!(!mcpwire_tokio::stdio::stdin().is_polled());
    assert!(!mcpwire_tokio::stdio::stdout().is_polled());
}

/// `event_time` is the time the driver read when it fed the input whose events it hands out:
/// one clock read per batch, so the events of one read share it, however long the
/// application takes between them; the next read gets a later one.
#[tokio::test]
async fn event_time_is_read_once_per_batch() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (reader, writer) = tokio::io::split(ours);
    let (_peer_read, mut peer_write) = tokio::io::split(theirs);
    peer_write.write_all(&requests(3)).await.unwrap();
    let mut io = Driver::new(server_config(), reader, writer).unwrap();
    assert_eq!(
        io.event_time(),
        mcpwire::Timestamp::ZERO,
        "nothing read yet"
    );
    let tools = RawJson::new(r#"{"tools":[]}"#).unwrap();
    let mut times = Vec::new();
    while times.len() < 3 {
        let event = io
            .next_event()
            .await
            .unwrap()
            .expect("the connection ended early");
        if let OwnedEvent::Request { id, .. } = event {
            assert!(io.event_time() <= io.now());
            times.push(io.event_time());
            io.connection().respond(id.as_id(), tools).unwrap();
            std::thread::sleep(Duration::from_millis(5)); // slow work between two events
        }
    }
    assert!(times[0] > mcpwire::Timestamp::ZERO);
    assert!(times.iter().all(|&t| t == times[0]), "{times:?}");
    assert!(io.now().as_nanos() - times[0].as_nanos() >= 15_000_000);
    // The next batch, read after that work, carries the time of its own read.
    peer_write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}\n")
        .await
        .unwrap();
    let before = io.now();
    loop {
        let event = io
            .next_event()
            .await
            .unwrap()
            .expect("the connection ended early");
        if let OwnedEvent::Request { .. } = event {
            break;
        }
    }
    assert!(
        io.event_time() >= before,
        "{:?} < {before:?}",
        io.event_time()
    );
}

/// A Python server that answers the handshake, then runs `rest` (Python, after reading one
/// more line is up to it); the driver past the handshake, and the child.
async fn python_server(
    rest: &str,
) -> (
    Driver<tokio::process::ChildStdout, tokio::process::ChildStdin>,
    tokio::process::Child,
) {
    python_server_grouped(rest, false).await
}

/// [`python_server`], leading a process group of its own when `group`.
async fn python_server_grouped(
    rest: &str,
    group: bool,
) -> (
    Driver<tokio::process::ChildStdout, tokio::process::ChildStdin>,
    tokio::process::Child,
) {
    let script = format!(
        r#"
import sys, json, time
req = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": req["id"], "result": {{
    "protocolVersion": "2025-11-25", "capabilities": {{"tools": {{}}}},
    "serverInfo": {{"name": "py", "version": "1"}}}}}}) + "\n")
sys.stdout.flush()
{rest}
"#
    );
    let mut config = Config::client("stop-test", "1.0");
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    let mut command = tokio::process::Command::new("python3");
    command.arg("-c").arg(script);
    if group {
        command.process_group(0);
    }
    let (mut driver, child) = mcpwire_tokio::stdio::spawn(&mut command, config).unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), driver.next_event()).await {
            Ok(Ok(Some(OwnedEvent::Ready { .. }))) => break,
            Ok(Ok(Some(_))) => {}
            other => panic!("no handshake: {other:?}"),
        }
    }
    (driver, child)
}

/// `stop` with `grace`, which must return within 10 s with the child's status.
async fn stopped(
    driver: Driver<tokio::process::ChildStdout, tokio::process::ChildStdin>,
    child: tokio::process::Child,
    grace: Duration,
) -> std::process::ExitStatus {
    tokio::time::timeout(
        Duration::from_secs(10),
        mcpwire_tokio::stdio::stop(driver, child, grace),
    )
    .await
    .expect("stop returned")
    .expect("the child's status")
}

/// Gives `driver` a call of 256 KiB to send: more than a pipe holds.
fn request_more_than_a_pipe_holds<R, W>(driver: &mut Driver<R, W>)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let big = format!(
        r#"{{"name":"echo","arguments":{{"text":"{}"}}}}"#,
        "x".repeat(256 * 1024)
    );
    let now = driver.now();
    driver
        .connection()
        .request(now, "tools/call", Some(RawJson::new(&big).unwrap()))
        .unwrap();
}

/// `stop` with a grace of `Duration::MAX` (no limit: a child that exits at the end of its
/// input) returns once the child has exited; adding its extra second overflowed.
#[tokio::test]
async fn stop_with_no_limit_waits_for_the_child_to_exit() {
    let (driver, child) = python_server("for line in sys.stdin:\n    pass").await;
    let status = stopped(driver, child, Duration::MAX).await;
    assert!(status.success(), "{status:?}");
}

/// `stop` refuses the child's requests that nobody answered (-32603), those handed out
/// before it and those that come during it, so that its close waits only for ours: since a
/// close waits for the answers to the peer's requests too, it waited its whole grace for
/// answers that could not come (found by a review of the close's change). The child exits 0
/// only if it got the refusals.
#[tokio::test]
async fn stop_refuses_the_childs_requests_instead_of_waiting_out_the_grace() {
    let (mut driver, child) = python_server(
        r#"sys.stdin.readline()
def ask(i):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": "x/ask"}) + "\n")
    sys.stdout.flush()
ask("first")
refused = set()
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "tools/call":
        # Asked during the stop, whose close waits for this call's answer.
        ask("second")
        time.sleep(0.2)
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"],
            "result": {"content": []}}) + "\n")
        sys.stdout.flush()
    if m.get("error", {}).get("code") == -32603:
        refused.add(m["id"])
sys.exit(0 if refused == {"first", "second"} else 3)"#,
    )
    .await;
    // The first request is handed out, and not answered; a call of ours is in flight.
    loop {
        match tokio::time::timeout(Duration::from_secs(10), driver.next_event()).await {
            Ok(Ok(Some(OwnedEvent::Request { .. }))) => break,
            Ok(Ok(Some(_))) => {}
            other => panic!("no request: {other:?}"),
        }
    }
    let now = driver.now();
    let call = RawJson::new(r#"{"name":"slow","arguments":{}}"#).unwrap();
    driver
        .connection()
        .request(now, "tools/call", Some(call))
        .unwrap();
    let started = tokio::time::Instant::now();
    let status = stopped(driver, child, Duration::from_secs(3)).await;
    assert!(
        status.success(),
        "the child was not refused both: {status:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "stop waited out the grace: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn stop_ends_a_child_that_no_longer_reads() {
    // A server that answers the handshake, then never reads again: what is left to write
    // (more than a pipe holds) must not hold `stop` up for ever; the child is killed once
    // the grace periods are over.
    let (mut driver, child) = python_server("sys.stdin.readline()\ntime.sleep(1000)").await;
    let pid = child.id().expect("a pid");
    request_more_than_a_pipe_holds(&mut driver);
    let grace = Duration::from_millis(300);
    let started = tokio::time::Instant::now();
    let stopped = tokio::time::timeout(
        Duration::from_secs(10),
        mcpwire_tokio::stdio::stop(driver, child, grace),
    )
    .await
    .expect("stop returned");
    assert!(stopped.is_ok(), "{stopped:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}/status")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/status"))
                .is_ok_and(|s| s.contains("State:\tZ")),
        "the child still runs"
    );
}

/// Whether process `pid` is gone (or a zombie about to be reaped).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(true, |s| s.contains("State:\tZ"))
}

/// A server that does not exit at the end of its input gets SIGTERM before SIGKILL, as the
/// MCP lifecycle says: one that exits cleanly on it has its exit status returned. `stop`
/// went straight to SIGKILL (found by a review of the tokio host).
#[tokio::test]
async fn stop_sends_sigterm_before_sigkill() {
    let (driver, child) = python_server(
        "import signal\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n\
         for line in sys.stdin:\n    pass\ntime.sleep(1000)",
    )
    .await;
    let status = stopped(driver, child, Duration::from_millis(300)).await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// A server that leads a process group of its own (a wrapper, here one that started a
/// grandchild) has the signals sent to the whole group: the grandchild does not outlive it.
#[tokio::test]
async fn stop_signals_the_group_a_wrapper_leads() {
    let dir = std::env::temp_dir().join(format!("mcpwire-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("grandchild");
    let (driver, child) = python_server_grouped(
        &format!(
            "import subprocess\nquiet = subprocess.DEVNULL\n\
             p = subprocess.Popen(['sleep', '1000'], stdin=quiet, stdout=quiet, stderr=quiet)\n\
             open({file:?}, 'w').write(str(p.pid))\n\
             for line in sys.stdin:\n    pass\ntime.sleep(1000)"
        ),
        true,
    )
    .await;
    let grandchild: u32 = loop {
        if let Ok(pid) = std::fs::read_to_string(&file)
            && let Ok(pid) = pid.parse()
        {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!gone(grandchild));
    stopped(driver, child, Duration::from_millis(300)).await;
    let mut waited = 0;
    while !gone(grandchild) && waited < 100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let outlived = !gone(grandchild);
    if outlived {
        let _ = std::process::Command::new("kill")
            .args(["-9", &grandchild.to_string()])
            .status();
    }
    assert!(!outlived, "the grandchild {grandchild} outlived stop");
}

/// A writer whose reader has gone: every write fails as a broken pipe does.
struct BrokenPipe;

impl tokio::io::AsyncWrite for BrokenPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Drives `driver` (whose peer said "not json" and went) to its write error: the parse
/// error and the close must come first, and the error is the broken pipe.
async fn heard_to_its_end<R, W>(driver: &mut Driver<R, W>)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let (mut parse, mut closed) = (false, false);
    let broken = loop {
        match tokio::time::timeout(Duration::from_secs(10), driver.next_event())
            .await
            .expect("an event")
        {
            Ok(Some(OwnedEvent::Violation { kind, .. })) => {
                parse |= matches!(kind, mcpwire::conn::ViolationKind::Parse(_));
            }
            Ok(Some(OwnedEvent::Closed { .. })) => closed = true,
            Ok(Some(_)) => {}
            Ok(None) => panic!("None before the write error"),
            Err(e) => break e,
        }
    };
    assert_eq!(broken.kind(), std::io::ErrorKind::BrokenPipe);
    assert!(
        parse && closed,
        "parse error heard {parse}, closed {closed}"
    );
}

/// A peer that stopped reading (it exited) said why in what it wrote last: the driver writes
/// nothing more, reads that to the end and hands it out with the close, then returns the
/// broken pipe once, then `None`. It returned the broken pipe at once, and again on every
/// call, so the peer's last words and the close were never heard (the C and Go hosts had
/// been fixed for this).
#[tokio::test]
async fn a_peer_that_stopped_reading_is_heard_to_its_end() {
    let mut config = Config::client("t", "1.0");
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    let input: &[u8] = b"not json\n";
    let mut driver = Driver::new(config, input, BrokenPipe).unwrap();
    heard_to_its_end(&mut driver).await;
    assert!(matches!(driver.next_event().await, Ok(None)));
}

/// An input that gives `data`, then fails once as a reset connection does, then ends.
struct ThenReset(&'static [u8], u8);

impl tokio::io::AsyncRead for ThenReset {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let step = self.1;
        self.1 += 1;
        std::task::Poll::Ready(match step {
            0 => {
                buf.put_slice(self.0);
                Ok(())
            }
            1 => Err(std::io::ErrorKind::ConnectionReset.into()),
            _ => Ok(()),
        })
    }
}

/// The same over one socket for both directions (socat's `EXEC`, inetd): a peer that exits
/// with our answers unread resets the connection, and the read fails with a reset after its
/// last words. Its last words and the close are still heard, then the write error, as with
/// two pipes; the reset was returned instead, the close never came, and an unterminated last
/// line was lost. (Found by a review of the host.)
#[tokio::test]
async fn a_peer_that_reset_the_connection_is_heard_to_its_end() {
    let mut config = Config::client("t", "1.0");
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    let mut driver = Driver::new(config, ThenReset(b"not json\n", 0), BrokenPipe).unwrap();
    heard_to_its_end(&mut driver).await;
}

/// `stop` on a child that closed its stdin and exited (the pipe to it broken) returns its
/// exit status; it returned the broken pipe, and the status was lost.
#[tokio::test]
async fn stop_returns_the_status_of_a_child_that_exited_first() {
    let (mut driver, child) =
        python_server("sys.stdin.close()\ntime.sleep(0.2)\nsys.exit(3)").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    request_more_than_a_pipe_holds(&mut driver);
    // (A grace that a slow start cannot outlast: `stop` returns once the child has exited.)
    let status = stopped(driver, child, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(3), "{status:?}");
}

/// A peer that stops reading cannot hold the engine's timers up: with the write to it
/// blocked, a request still times out and the application hears it. `next_event` waited in
/// the write for good, so no timeout fired and no close's grace ended.
#[tokio::test]
async fn a_blocked_write_does_not_hold_the_timers_up() {
    let (input, _keep_input_open) = tokio::io::duplex(64);
    let (output, _never_read) = tokio::io::duplex(64);
    let mut config = Config::client("t", "1.0");
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    config.request_timeout = Duration::from_millis(200);
    // The initialize request is more than the pipe holds: its write blocks.
    let mut driver = Driver::new(config, input, output).unwrap();
    let started = tokio::time::Instant::now();
    let event = tokio::time::timeout(Duration::from_secs(5), driver.next_event())
        .await
        .expect("an event while the write is blocked")
        .expect("no IO error");
    assert!(
        matches!(
            event,
            Some(OwnedEvent::TimedOut { .. } | OwnedEvent::Closed { .. })
        ),
        "{event:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// A handshake-era client over `input` and `output` whose requests time out after 100 ms,
/// its initialize request written.
async fn initializing_client<R: tokio::io::AsyncRead + Unpin>(
    input: R,
    output: tokio::io::DuplexStream,
) -> Driver<R, tokio::io::DuplexStream> {
    let mut config = Config::client("t", "1.0");
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    config.request_timeout = Duration::from_millis(100);
    let mut driver = Driver::new(config, input, output).unwrap();
    driver
        .write_pending()
        .await
        .expect("the initialize request out");
    driver
}

/// The application works past the request's 100 ms deadline (this thread busy), then the
/// driver's next event is the answer that came meanwhile, not a timeout.
async fn answered_though_the_deadline_passed<R: tokio::io::AsyncRead + Unpin>(
    driver: &mut Driver<R, tokio::io::DuplexStream>,
) {
    std::thread::sleep(Duration::from_millis(150));
    let event = tokio::time::timeout(Duration::from_secs(5), driver.next_event())
        .await
        .expect("an event")
        .expect("no IO error");
    assert!(
        matches!(event, Some(OwnedEvent::Response { .. })),
        "{event:?}"
    );
}

/// An answer that is already here when the driver comes to it past its request's deadline
/// (a loaded machine, a handler that took long) is taken, not timed out: the read and the
/// deadline were a coin toss, and a timed-out request's answer is dropped as late.
#[tokio::test]
async fn an_answer_already_here_beats_a_deadline_that_passed_meanwhile() {
    for round in 0..20 {
        let (input, mut peer_out) = tokio::io::duplex(64 * 1024);
        let (output, _peer_in) = tokio::io::duplex(64 * 1024);
        let mut driver = initializing_client(input, output).await;
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#;
        // Once the driver waits (for the answer, and for the deadline), the answer comes,
        // and the runtime's one thread is then busy past the deadline: the driver wakes to
        // both at once.
        let late = tokio::spawn(async move {
            tokio::task::yield_now().await;
            peer_out
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
            std::thread::sleep(Duration::from_millis(150));
            peer_out
        });
        let event = driver.next_event().await.expect("no IO error");
        drop(late.await.unwrap());
        assert!(
            matches!(event, Some(OwnedEvent::Ready { .. })),
            "round {round}: {event:?}"
        );
    }
}

/// The same when the answer came while the application worked on the last event handed out
/// (the runtime's thread busy past the deadline), behind a burst of pings whose answers fill
/// an output nobody reads. The timers that wait for the last read to be fed fired first,
/// without a look at the input that was ready: the request timed out with its answer in
/// the pipe.
#[tokio::test]
async fn an_answer_that_came_while_the_application_worked_beats_a_deadline() {
    let (input, mut peer_out) = tokio::io::duplex(256 * 1024);
    // Room for the handshake, then the pings' answers fill it: nobody reads.
    let (output, mut peer_in) = tokio::io::duplex(2048);
    let mut driver = initializing_client(input, output).await;
    let init = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}"#;
    peer_out
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let ready = driver.next_event().await.unwrap();
    assert!(matches!(ready, Some(OwnedEvent::Ready { .. })), "{ready:?}");
    driver
        .write_pending()
        .await
        .expect("notifications/initialized out");
    let mut sink = vec![0u8; 4096];
    let _ = peer_in.read(&mut sink).await.unwrap();
    let now = driver.now();
    let id = driver
        .connection()
        .request(now, "tools/list", None)
        .unwrap();
    driver.write_pending().await.expect("the request out");
    let _ = peer_in.read(&mut sink).await.unwrap();
    // One write of the peer: 600 pings (answered as they are fed: about 30 KiB, past the
    // 2 KiB our peer takes), then the answer; then this thread is busy past the deadline.
    let mut burst = String::new();
    for n in 0..600 {
        burst.push_str(&format!(
            r#"{{"jsonrpc":"2.0","id":"p{n}","method":"ping"}}"#
        ));
        burst.push('\n');
    }
    burst.push_str(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[]}}}}"#,
        id.0
    ));
    burst.push('\n');
    peer_out.write_all(burst.as_bytes()).await.unwrap();
    answered_though_the_deadline_passed(&mut driver).await;
    drop(peer_in);
}

/// The same over a real pipe (tokio's `ChildStdout` and `pipe::Receiver`, which `spawn`
/// reads): a read shorter than the buffer clears the descriptor's readiness, and the reactor
/// is not polled while the application holds the thread. The look before the timers asked
/// the reader only, which said "nothing yet" with the answer in the pipe: the request timed
/// out. It now lets the reactor look first. (On one thread: on several, another worker
/// polls the reactor meanwhile.)
#[tokio::test]
async fn an_answer_that_came_over_a_pipe_while_the_application_worked_beats_a_deadline() {
    let (mut peer_out, input) = tokio::net::unix::pipe::pipe().unwrap();
    let (output, mut peer_in) = tokio::io::duplex(256 * 1024);
    let mut driver = initializing_client(input, output).await;
    let init = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"}}}"#;
    peer_out
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let ready = driver.next_event().await.unwrap();
    assert!(matches!(ready, Some(OwnedEvent::Ready { .. })), "{ready:?}");
    driver.write_pending().await.unwrap();
    let now = driver.now();
    let id = driver
        .connection()
        .request(now, "tools/list", None)
        .unwrap();
    driver.write_pending().await.unwrap();
    let mut sink = vec![0u8; 4096];
    let _ = peer_in.read(&mut sink).await.unwrap();
    // A notification, read short: the pipe's readiness is cleared.
    peer_out
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n")
        .await
        .unwrap();
    let event = driver.next_event().await.unwrap();
    assert!(
        matches!(event, Some(OwnedEvent::Notification { .. })),
        "{event:?}"
    );
    // The application works past the deadline; the answer comes meanwhile.
    peer_out
        .write_all(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"tools\":[]}}}}\n",
                id.0
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    answered_though_the_deadline_passed(&mut driver).await;
}

/// A Python server that reads its next request only once it has written the last answer
/// whole, echoing each call's `text` back.
const HALF_DUPLEX_ECHO: &str = r#"
for line in sys.stdin:
    req = json.loads(line)
    if "id" in req and "method" in req:
        text = req["params"]["arguments"]["text"]
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
            "content": [{"type": "text", "text": text}]}}) + "\n")
        sys.stdout.flush()
"#;

/// Reads the six large answers of [`HALF_DUPLEX_ECHO`], then stops the child cleanly.
async fn six_echoes_then_stop(
    mut driver: Driver<tokio::process::ChildStdout, tokio::process::ChildStdin>,
    child: tokio::process::Child,
) {
    let mut answered = 0;
    while answered < 6 {
        match tokio::time::timeout(Duration::from_secs(20), driver.next_event()).await {
            Ok(Ok(Some(OwnedEvent::Response { result, .. }))) => {
                assert!(result.len() > 256 * 1024, "{} bytes", result.len());
                answered += 1;
            }
            Ok(Ok(Some(_))) => {}
            other => panic!("after {answered} answers: {other:?}"),
        }
    }
    let status = mcpwire_tokio::stdio::stop(driver, child, Duration::from_secs(5))
        .await
        .expect("the child's status");
    assert!(status.success(), "{status:?}");
}

/// A server that reads its next request only once it has written the last answer whole (as
/// `mcpwire serve`'s blocking loop, Go's `Serve` and many hand-written servers do) gets
/// pipelined calls larger than a pipe, each answered at the same size. The driver used to
/// stop reading while its own write waited: the server, blocked writing an answer, stopped
/// reading too, and the two waited for each other for good.
#[tokio::test]
async fn pipelined_large_calls_to_a_half_duplex_server_all_complete() {
    let (mut driver, child) = python_server(HALF_DUPLEX_ECHO).await;
    for _ in 0..6 {
        request_more_than_a_pipe_holds(&mut driver);
    }
    six_echoes_then_stop(driver, child).await;
}

/// `write_pending` against the same half-duplex server: it reads (and feeds) while its write
/// waits, as `next_event` does. It waited in a plain write: the server, blocked writing the
/// first answer, stopped reading, and the two waited for each other for good.
#[tokio::test]
async fn write_pending_to_a_half_duplex_server_completes() {
    let (mut driver, child) = python_server(HALF_DUPLEX_ECHO).await;
    for _ in 0..6 {
        request_more_than_a_pipe_holds(&mut driver);
    }
    tokio::time::timeout(Duration::from_secs(20), driver.write_pending())
        .await
        .expect("write_pending waited for a peer that waited for it")
        .expect("written");
    // The answers read meanwhile are events, handed out next.
    six_echoes_then_stop(driver, child).await;
}

/// A peer that writes all its requests before it reads anything (`n` of them, each padded to
/// about 4 KiB: more than the 64 KiB pipe holds) against our server, which answers each with
/// `answer` bytes, and closes (no grace) on the request `close_at` if given. Returns the
/// answers the peer read, or panics if the two block each other.
async fn serve_a_peer_that_writes_before_reading(
    n: usize,
    answer: usize,
    close_at: Option<usize>,
) -> usize {
    serve_a_peer_that_writes_before_reading_with(n, answer, close_at, |w| w).await
}

/// [`serve_a_peer_that_writes_before_reading`] with our writer made by `wrap`.
async fn serve_a_peer_that_writes_before_reading_with<W>(
    n: usize,
    answer: usize,
    close_at: Option<usize>,
    wrap: impl FnOnce(tokio::io::WriteHalf<tokio::io::DuplexStream>) -> W,
) -> usize
where
    W: tokio::io::AsyncWrite + Unpin,
{
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (reader, writer) = tokio::io::split(ours);
    let (mut peer_read, mut peer_write) = tokio::io::split(theirs);
    let pad = "p".repeat(4000);
    let mut input = INIT.as_bytes().to_vec();
    for i in 1..=n {
        input.extend_from_slice(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"pad\":\"{pad}\"}}}}}}\n"
            )
            .as_bytes(),
        );
    }
    let peer = tokio::spawn(async move {
        peer_write.write_all(&input).await.unwrap();
        peer_write.shutdown().await.unwrap();
        let mut out = Vec::new();
        peer_read.read_to_end(&mut out).await.unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .filter(|l| l.contains("\"description\":\"d"))
            .count()
    });
    let description = "d".repeat(answer);
    let tools = format!(
        r#"{{"tools":[{{"name":"t","description":"{description}","inputSchema":{{"type":"object"}}}}]}}"#
    );
    let mut io = Driver::new(server_config(), reader, wrap(writer)).unwrap();
    let served = async {
        while let Some(event) = io.next_event().await.unwrap() {
            if let OwnedEvent::Request { id, .. } = event {
                let conn = io.connection();
                conn.respond(id.as_id(), RawJson::new(&tools).unwrap())
                    .unwrap();
                if close_at.is_some_and(|at| id.to_string() == at.to_string()) {
                    conn.close(mcpwire::Timestamp::ZERO, Duration::ZERO);
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), served)
        .await
        .expect("the driver and a peer writing before it reads blocked each other");
    drop(io);
    tokio::time::timeout(Duration::from_secs(20), peer)
        .await
        .expect("the peer got its answers")
        .unwrap()
}

/// The requests come in reads larger than the piece the engine gets at a time; their answers
/// fill the pipe while part of a read is still to be fed, and the peer, still writing, reads
/// nothing until it is done. The driver fed nothing more and read nothing while its write
/// waited (it did only for input read during a write), and the two blocked each other.
#[tokio::test]
async fn a_peer_that_writes_all_its_requests_before_reading_gets_every_answer() {
    assert_eq!(
        serve_a_peer_that_writes_before_reading(256, 8 * 1024, None).await,
        256
    );
}

/// The same peer, and the server closes in the middle of a read with more output than the
/// pipe holds: the last write finished only if the peer read, and the peer read only once it
/// had written everything, which the driver no longer read (the rest of its read was unfed).
#[tokio::test]
async fn a_close_in_the_middle_of_a_read_drains_a_peer_that_writes_before_reading() {
    let answered = serve_a_peer_that_writes_before_reading(256, 8 * 1024, Some(40)).await;
    assert!((40..256).contains(&answered), "{answered} answers");
}

/// The same peer behind a writer that buffers more than the pipe holds: the answers wait in
/// it, and its flush, not a write, is what waits for the peer. The flush waited alone (no
/// read, no feeding, no timers), and the two blocked each other.
#[tokio::test]
async fn a_flush_that_waits_for_a_peer_that_writes_before_reading_does_not_block_it() {
    let answered = serve_a_peer_that_writes_before_reading_with(256, 8 * 1024, None, |w| {
        tokio::io::BufWriter::with_capacity(4 << 20, w)
    })
    .await;
    assert_eq!(answered, 256);
}

/// `write_pending` waiting for a peer that reads only after it has written all its requests
/// feeds them to the engine as `next_event` does, but only while the engine can take them:
/// fed past `max_inbound_in_flight` with none handed out, the rest were refused as "too many
/// requests in flight" (-32603). It returns early instead, leaving them for `next_event`.
#[tokio::test]
async fn write_pending_feeds_no_more_requests_than_the_engine_takes() {
    let mut config = server_config();
    config.limits.max_inbound_in_flight = 8;
    let (ours, theirs) = tokio::io::duplex(4096);
    let (reader, writer) = tokio::io::split(ours);
    let (mut peer_read, mut peer_write) = tokio::io::split(theirs);
    let n = 40;
    let feeder = tokio::spawn(async move {
        peer_write.write_all(&requests(n)).await.unwrap();
        peer_write.shutdown().await.unwrap();
    });
    let collector = tokio::spawn(async move {
        let mut out = Vec::new();
        peer_read.read_to_end(&mut out).await.unwrap();
        out
    });
    let mut io = Driver::new(config, reader, writer).unwrap();
    let big = format!(
        r#"{{"tools":[{{"name":"t","description":"{}","inputSchema":{{"type":"object"}}}}]}}"#,
        "d".repeat(70 * 1024)
    );
    let big = RawJson::new(&big).unwrap();
    let small = RawJson::new(r#"{"tools":[]}"#).unwrap();
    while let Some(event) = io.next_event().await.unwrap() {
        if let OwnedEvent::Request { id, .. } = event {
            let first = id.as_id() == mcpwire::jsonrpc::Id::Int(1);
            let result = if first { big } else { small };
            io.connection().respond(id.as_id(), result).unwrap();
            if first {
                io.write_pending().await.unwrap();
            }
        }
    }
    let (_, _, writer) = io.into_parts();
    drop(writer);
    feeder.await.unwrap();
    let out = collector.await.unwrap();
    let text = String::from_utf8_lossy(&out);
    for i in 1..=n {
        let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\"");
        assert!(
            text.lines().any(|l| l.starts_with(&answer)),
            "request {i} got no result: {}",
            text.lines()
                .find(|l| l.contains(&format!("\"id\":{i},")))
                .unwrap_or("no answer")
        );
    }
}

/// `stop` keeps reading (and dropping) what the child writes while it waits for it to exit:
/// a server that says a last word at the end of its input (a log line, the answer to a
/// request it was still on) exits as it means to. The child's stdout was closed with its
/// stdin, and such a write broke the pipe (a Python server exited with an error, a C or Go
/// one by SIGPIPE).
#[tokio::test]
async fn stop_reads_what_the_child_says_after_its_input_ended() {
    let (driver, child) = python_server(
        "for line in sys.stdin:\n    pass\ntime.sleep(0.2)\n\
         print('{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\
         \"params\":{\"level\":\"info\",\"data\":\"bye\"}}', flush=True)\nsys.exit(0)",
    )
    .await;
    let status = stopped(driver, child, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// Input that arrives in one read, then fails (EIO from a terminal, say).
struct FailsAfter(Option<Vec<u8>>);

impl tokio::io::AsyncRead for FailsAfter {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(match self.get_mut().0.take() {
            Some(bytes) => {
                buf.put_slice(&bytes);
                Ok(())
            }
            None => Err(std::io::Error::other("input/output error")),
        })
    }
}

/// A writer whose every other write waits (it wakes its task at once), into a shared buffer.
#[derive(Default)]
struct Stalls {
    out: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    stall: bool,
}

impl tokio::io::AsyncWrite for Stalls {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.stall = !this.stall;
        if this.stall {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        this.out.lock().unwrap().extend_from_slice(bytes);
        std::task::Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A read error while a write waits ends the input as its end does: the answers already
/// given are written, the close comes, and the error is returned once, in place of the
/// first `None`. It was returned at once, and the answers the engine held were lost.
#[tokio::test]
async fn a_read_error_loses_no_answer_given() {
    let writer = Stalls::default();
    let out = writer.out.clone();
    let mut io = Driver::new(server_config(), FailsAfter(Some(requests(1))), writer).unwrap();
    let tools = RawJson::new(r#"{"tools":[]}"#).unwrap();
    let mut events = Vec::new();
    let failed = loop {
        match io.next_event().await {
            Ok(Some(event)) => {
                if let OwnedEvent::Request { id, .. } = &event {
                    io.connection().respond(id.as_id(), tools).unwrap();
                }
                events.push(event);
            }
            Ok(None) => panic!("the error was not returned: {events:?}"),
            Err(e) => break e,
        }
    };
    assert_eq!(failed.to_string(), "input/output error");
    assert!(
        matches!(events.last(), Some(OwnedEvent::Closed { .. })),
        "{events:?}"
    );
    let out = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    assert!(
        out.contains("\"id\":0") && out.contains("\"id\":1"),
        "{out}"
    );
}

/// A configuration the engine refuses is reported before the child starts: refused after
/// the spawn, the child was killed alone, and a wrapper's real server could live on.
#[tokio::test]
async fn spawn_refuses_a_bad_configuration_before_starting_anything() {
    let mut config = Config::client("c", "1");
    config.info = r#"{"name":"c"}"#.into();
    // Each fork writes a byte into a pipe (in the child, before the command runs).
    let mut fds = [0; 2];
    // Safety: a valid array of two descriptors.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
        0
    );
    let writer = fds[1];
    let mut command = tokio::process::Command::new("cat");
    // Safety: write(2) is async-signal-safe, and the closure touches nothing else.
    unsafe {
        command.pre_exec(move || {
            libc::write(writer, b"x".as_ptr().cast(), 1);
            Ok(())
        });
    }
    let spawned = mcpwire_tokio::stdio::spawn(&mut command, config);
    assert!(spawned.is_err());
    let mut byte = [0u8; 1];
    // Safety: the pipe's read end, one byte of room.
    let read = unsafe { libc::read(fds[0], byte.as_mut_ptr().cast(), 1) };
    // Safety: both ends are ours.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert_eq!(read, -1, "a child was started");
}

/// On a runtime with paused time (how tokio programs test timeouts), a request's timeout
/// fires once tokio's clock passes it: the driver read the system clock, so every sleep
/// ended at once, the engine saw no deadline pass, and the loop spun for the real minute.
#[tokio::test(start_paused = true)]
#[allow(clippy::disallowed_methods)] // the real clock, against tokio's paused one
async fn a_timeout_fires_on_tokios_paused_clock() {
    let real = std::time::Instant::now();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (reader, writer) = tokio::io::split(ours);
    let (peer_read, mut peer_write) = tokio::io::split(theirs);
    // The server answers `initialize`, then nothing.
    tokio::spawn(async move {
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(peer_read));
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(r#""method":"initialize""#) {
                let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}"#;
                peer_write
                    .write_all(format!("{answer}\n").as_bytes())
                    .await
                    .unwrap();
            }
        }
    });
    let mut config = Config::client("c", "1");
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    let mut io = Driver::new(config, reader, writer).unwrap();
    let mut list = None;
    loop {
        match io.next_event().await.unwrap().expect("an event") {
            OwnedEvent::Ready { .. } => {
                let now = io.now();
                list = Some(io.connection().request(now, "tools/list", None).unwrap());
            }
            OwnedEvent::TimedOut { request } if Some(request) == list => break,
            _ => {}
        }
    }
    // (The default timeout is a minute of tokio's time; the system clock barely moved.)
    assert!(
        real.elapsed() < Duration::from_secs(20),
        "{:?}",
        real.elapsed()
    );
}
