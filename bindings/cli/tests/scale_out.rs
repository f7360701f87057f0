//! Scale-out: three `mcpwire serve --http` replicas share sessions and resumable events
//! through one real Redis server, all on loopback. The test plays the client and the load
//! balancer: it picks the replica for every request.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::free_port;
use mcpwire::http::client::StreamReader;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

/// A child process killed and reaped when the test lets go of it.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's `redis-server` on a free loopback port, with persistence off. A port found free
/// may be taken before the server binds it (another test's listener or connection): the
/// server's own "ready" line tells, and another port is tried.
fn redis() -> (Reaped, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (.ci/setup-debian installs it)");
        let stdout = child.stdout.take().expect("piped");
        let child = Reaped(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                if line.contains("Ready to accept connections") {
                    let _ = tx.send(true);
                    lines.for_each(drop); // (drained, so it never blocks on its log)
                    return;
                }
            }
            let _ = tx.send(false); // it exited: the port was taken
        });
        if rx.recv_timeout(Duration::from_secs(10)) == Ok(true) {
            return (child, port);
        }
        eprintln!("redis-server did not start on port {port}; trying another");
    }
    panic!("redis-server did not start on any of five free ports");
}

/// Replica `n` of the demo server, sharing the Redis on `redis_port`; returns its address.
/// Replica 3 touches sessions in Redis at most every half second.
fn replica(n: u16, redis_port: u16) -> (Reaped, String) {
    let touch: &[&str] = if n == 3 {
        &["--touch-interval", "500"]
    } else {
        &[]
    };
    let mut child = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(["--redis", &format!("redis://127.0.0.1:{redis_port}/")])
        .args(["--replica", &n.to_string()])
        .args(touch)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| {
            // (Its stderr, inherited, says why; and whether it exited.)
            std::thread::sleep(std::time::Duration::from_millis(200));
            panic!(
                "replica {n} on Redis port {redis_port} printed {line:?}; exit: {:?}",
                child.try_wait()
            )
        })
        .to_owned();
    (Reaped(child), addr)
}

/// One HTTP/1.1 exchange on its own connection; the body is read as it arrives.
struct Exchange {
    status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    /// Bytes left in the current chunk, or in the whole body without chunking.
    left: Option<usize>,
    done: bool,
}

impl Exchange {
    fn send(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Exchange {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if method == "POST" {
            head.push_str("Content-Type: application/json\r\n");
            head.push_str("Accept: application/json, text/event-stream\r\n");
        } else {
            head.push_str("Accept: text/event-stream\r\n");
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        (&stream).write_all(head.as_bytes()).unwrap();
        (&stream).write_all(body.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').unwrap();
            headers.push((n.to_ascii_lowercase(), v.trim().to_owned()));
        }
        let get = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        let chunked = get("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let left = get("content-length").map(|v| v.parse().unwrap());
        Exchange {
            status,
            chunked,
            done: !chunked && left == Some(0),
            left: if chunked { Some(0) } else { left },
            headers,
            reader,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next piece of the body, or `None` at its end.
    fn read_some(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if self.chunked && self.left == Some(0) {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                // The CRLF after the previous chunk.
                line.clear();
                self.reader.read_line(&mut line).unwrap();
            }
            let size = usize::from_str_radix(line.trim(), 16).unwrap();
            if size == 0 {
                self.done = true;
                return None;
            }
            self.left = Some(size);
        }
        let mut buf = vec![0; 4096];
        let want = self.left.map_or(buf.len(), |l| l.min(buf.len()));
        let n = self.reader.read(&mut buf[..want]).unwrap();
        if n == 0 {
            self.done = true;
            return None;
        }
        if let Some(l) = self.left.as_mut() {
            *l -= n;
            if *l == 0 && !self.chunked {
                self.done = true;
            }
        }
        buf.truncate(n);
        Some(buf)
    }

    fn json(mut self) -> Value {
        let mut body = Vec::new();
        while let Some(piece) = self.read_some() {
            body.extend(piece);
        }
        serde_json::from_slice(&body).unwrap()
    }

    /// Reads SSE messages until `enough` says stop or the stream ends; returns whether it
    /// ended.
    fn read_events(
        &mut self,
        reader: &mut StreamReader,
        seen: &mut Vec<Value>,
        enough: impl Fn(&[Value]) -> bool,
    ) -> bool {
        while !enough(seen) {
            let Some(piece) = self.read_some() else {
                return true;
            };
            reader.feed(&piece, |m| seen.push(serde_json::from_slice(m).unwrap()));
        }
        false
    }
}

fn post(addr: &str, sid: &str, body: &Value) -> Exchange {
    Exchange::send(
        addr,
        "POST",
        &[
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        &body.to_string(),
    )
}

fn open_session(addr: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "scale-out-test", "version": "1"}}});
    let r = Exchange::send(addr, "POST", &[], &init.to_string());
    assert_eq!(r.status, 200);
    let sid = r.header("Mcp-Session-Id").unwrap().to_owned();
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(addr, &sid, &note).status, 202);
    sid
}

fn countdown(id: u64, steps: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "countdown", "arguments": {"steps": steps},
        "_meta": {"progressToken": format!("p{id}")}}})
}

fn progress_steps(messages: &[Value]) -> Vec<u64> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_u64().unwrap())
        .collect()
}

fn resume(addr: &str, sid: &str, last_event_id: &str) -> Exchange {
    let r = Exchange::send(
        addr,
        "GET",
        &[
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", last_event_id),
        ],
        "",
    );
    assert_eq!(r.status, 200);
    r
}

#[test]
fn three_replicas_share_sessions_and_streams_through_redis() {
    let (_redis, redis_port) = redis();
    let (_a, a) = replica(1, redis_port);
    let (_b, b) = replica(2, redis_port);
    let (c_proc, c) = replica(3, redis_port);
    let mut c_proc = Some(c_proc);

    // A session opened on A is served on B and C.
    let sid = open_session(&a);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    for addr in [&b, &c] {
        let r = post(addr, &sid, &list);
        assert_eq!(r.status, 200, "replica {addr} serves the session");
        let answer = r.json();
        assert_eq!(answer["id"], 2);
        assert!(answer["result"]["tools"].as_array().unwrap().len() >= 3);
    }
    let add = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 40}}});
    let answer = post(&b, &sid, &add).json();
    assert_eq!(answer["result"]["content"][0]["text"], "42", "{answer}");

    // A stream dropped on A resumes on B: nothing lost, nothing twice.
    let mut call = post(&a, &sid, &countdown(4, 6));
    assert_eq!(call.status, 200);
    assert!(
        call.header("Content-Type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut reader = StreamReader::new();
    let mut seen = Vec::new();
    let ended = call.read_events(&mut reader, &mut seen, |m| progress_steps(m).len() >= 2);
    assert!(!ended);
    drop(call);
    // A finishes the countdown with nobody listening; its events go to Redis. B replays
    // what is stored so far and ends its response (the stream is A's), so the client
    // resumes again from its last event, as a polling client does, until the answer came
    // (10 s at most: on a loaded machine A may store the end after the first resume).
    std::thread::sleep(Duration::from_millis(1200));
    let mut rest = Vec::new();
    for _ in 0..50 {
        let last = reader.last_event_id().unwrap().to_owned();
        let mut resumed = resume(&b, &sid, &last);
        assert!(resumed.read_events(&mut reader, &mut rest, |_| false));
        if rest.iter().any(|m| m["id"] == 4) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let all: Vec<Value> = seen.iter().chain(&rest).cloned().collect();
    assert_eq!(progress_steps(&all), vec![1, 2, 3, 4, 5, 6], "{all:#?}");
    let answers: Vec<&Value> = all.iter().filter(|m| m["id"] == 4).collect();
    assert_eq!(answers.len(), 1, "the answer exactly once: {all:#?}");
    assert_eq!(
        answers[0]["result"]["content"][0]["text"],
        "countdown of 6 finished"
    );

    // Killing a replica mid-stream loses no event it stored: everything the client saw
    // from C replays from Redis on B.
    let mut call = post(&c, &sid, &countdown(5, 20));
    let mut reader = StreamReader::new();
    let mut raw = Vec::new();
    let mut saw = Vec::new();
    while progress_steps(&saw).len() < 3 {
        let piece = call.read_some().expect("C streams the countdown");
        raw.extend_from_slice(&piece);
        reader.feed(&piece, |m| saw.push(serde_json::from_slice(m).unwrap()));
    }
    drop(c_proc.take());
    drop(call);
    // The stream's first event is the priming event: resuming from it asks for all the rest.
    let raw = String::from_utf8(raw).unwrap();
    let priming = raw
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .expect("a priming event")
        .trim()
        .to_owned();
    let mut replay = resume(&b, &sid, &priming);
    let mut replayed = Vec::new();
    assert!(replay.read_events(&mut StreamReader::new(), &mut replayed, |_| false));
    // Everything the client saw replays, in order (more may have been stored between the
    // client's last read and the kill; never less).
    assert!(
        replayed.len() >= saw.len() && replayed[..saw.len()] == saw[..],
        "replayed {replayed:#?}\nsaw {saw:#?}"
    );
    assert!(
        replayed.iter().all(|m| m["id"] != 5),
        "C died before answering"
    );

    // Stateless 2026-07-28 requests spread over the replicas left.
    for i in 0..20u64 {
        let addr = if i % 2 == 0 { &a } else { &b };
        let body = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": format!("n{i}")},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}});
        let r = Exchange::send(
            addr,
            "POST",
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
            ],
            &body.to_string(),
        );
        assert_eq!(r.status, 200);
        let answer = r.json();
        assert_eq!(answer["id"], 100 + i);
        assert_eq!(answer["result"]["content"][0]["text"], format!("n{i}"));
    }

    // DELETE on B ends the session on A too.
    let r = Exchange::send(
        &b,
        "DELETE",
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        "",
    );
    assert_eq!(r.status, 200);
    assert_eq!(post(&a, &sid, &list).status, 404);
}

#[test]
#[allow(clippy::disallowed_methods)] // (the test reads the clock for how long startup took)
fn a_replica_number_in_use_is_refused_and_freed_when_its_server_stops() {
    // Two replicas given the same number would write the same stream keys, and a resumption
    // on one would replay the other's events: the second is refused (after waiting out a
    // claim a stopped server could have left), and a stopped server frees its number at once.
    let (_redis, port) = redis();
    let (first, _) = replica(5, port);
    let started = std::time::Instant::now();
    let second = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(["--redis", &format!("redis://127.0.0.1:{port}/")])
        .args(["--replica", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("held by another"), "{err}");
    assert!(started.elapsed() >= mcpwire_redis::CLAIM_TTL);
    // SIGTERM: the first stops gracefully and releases the number.
    let pid = first.0.id();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut first = first;
    let _ = first.0.wait();
    let started = std::time::Instant::now();
    let (_third, _) = replica(5, port);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the freed number took {:?}",
        started.elapsed()
    );
}

/// A signal while the server waits to claim its number (another server holds it, or a
/// stopped one left its claim) ends it at once, 128 + N: it was ignored until the wait was
/// over, up to `CLAIM_TTL`.
#[test]
#[allow(clippy::disallowed_methods)] // (the test reads the clock for how long the exit took)
fn a_signal_while_the_number_is_claimed_ends_the_wait() {
    let (_redis, port) = redis();
    let (_first, _) = replica(6, port);
    let mut second = Reaped(
        Command::new(BIN)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(["--redis", &format!("redis://127.0.0.1:{port}/")])
            .args(["--replica", "6"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500)); // waiting for the number
    let status = Command::new("kill")
        .args(["-INT", &second.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = std::time::Instant::now();
    let code = loop {
        if let Some(status) = second.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "still waiting for its number after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(130));
}

/// A replica stopped gracefully (SIGTERM, as in a rolling deploy) while a call it will never
/// finish runs answers that call with an error in Redis: the client, resuming on another
/// replica, gets it. It was sent back with `retry` for as long as it waited (the replica
/// with nothing to replay cannot tell a stream whose owner is gone).
#[test]
fn a_replica_stopped_gracefully_answers_its_unfinished_calls_for_the_others() {
    let (_redis, redis_port) = redis();
    let (a_proc, a) = replica(1, redis_port);
    let (_b, b) = replica(2, redis_port);
    let sid = open_session(&a);
    // 20 steps of 100 ms; the replica stops after the second. (With no client connected
    // the drain ends at once, and with it the countdown's timers.)
    let mut call = post(&a, &sid, &countdown(7, 20));
    assert_eq!(call.status, 200);
    let mut reader = StreamReader::new();
    let mut seen = Vec::new();
    let ended = call.read_events(&mut reader, &mut seen, |m| progress_steps(m).len() >= 2);
    assert!(!ended);
    drop(call);
    let status = Command::new("kill")
        .args(["-TERM", &a_proc.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut a_proc = a_proc;
    let exit = a_proc.0.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let last = reader.last_event_id().unwrap().to_owned();
    let mut resumed = resume(&b, &sid, &last);
    let mut rest = Vec::new();
    assert!(resumed.read_events(&mut reader, &mut rest, |_| false));
    let answers: Vec<&Value> = rest.iter().filter(|m| m["id"] == 7).collect();
    assert_eq!(answers.len(), 1, "{rest:#?}");
    assert_eq!(answers[0]["error"]["code"], -32603, "{rest:#?}");
}
