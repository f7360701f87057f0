//! A Streamable HTTP host for the conformance suite's "everything-server" fixture, built on
//! std only: a `TcpListener` on 127.0.0.1, a thread per TCP connection (HTTP/1.1 keep-alive,
//! `Content-Length` request bodies, chunked SSE responses), one `HttpServer` behind a mutex, a
//! condition variable waking SSE writers, and a timer thread for the engine's and the
//! fixture's timers. Both eras: 2025-11-25 sessions and 2026-07-28 stateless requests.
//!
//! Usage: `http_server PORT [IDLE_EXIT_SECS]` (port 0 picks a free one). Prints
//! `listening on http://127.0.0.1:PORT/mcp` once bound, and exits by itself after
//! `IDLE_EXIT_SECS` (default 600) without requests.

// The example is the IO layer: it reads the real clock and passes it to the engine as data.
#![allow(clippy::disallowed_methods)]

#[path = "conformance/fixture.rs"]
mod fixture;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mcpwire::Timestamp;
use mcpwire::http::{Body, HttpRequest, HttpServer};

struct State {
    server: HttpServer,
    fixture: fixture::Fixture,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled after every change that may give a stream bytes.
    changed: Condvar,
    start: Instant,
    last_request: AtomicU64,
}

impl Shared {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64)
    }
}

fn urandom(buf: &mut [u8]) {
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .expect("/dev/urandom");
}

const MAX_BODY: usize = 16 * 1024 * 1024;
const MAX_HEAD: usize = 64 * 1024;

struct Request {
    method: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Reads one request; `None` at end of connection or on garbage.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    let mut head = 0;
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let method = line.split_whitespace().next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).ok()?;
        head += n;
        if n == 0 || head > MAX_HEAD {
            return None;
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if get("Transfer-Encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                // Trailers, then the blank line.
                loop {
                    line.clear();
                    if r.read_line(&mut line).ok()? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            if body.len() + size > MAX_BODY {
                return None;
            }
            let at = body.len();
            body.resize(at + size, 0);
            r.read_exact(&mut body[at..]).ok()?;
            line.clear();
            r.read_line(&mut line).ok()?;
        }
    } else if let Some(len) = get("Content-Length") {
        let len: usize = len.parse().ok()?;
        if len > MAX_BODY {
            return None;
        }
        body.resize(len, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some(Request {
        method,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Whether the client closed its end (checked while an SSE stream idles).
fn peer_gone(s: &TcpStream) -> bool {
    let _ = s.set_nonblocking(true);
    let mut b = [0u8; 1];
    let gone = matches!(s.peek(&mut b), Ok(0));
    let _ = s.set_nonblocking(false);
    gone
}

fn serve(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader) {
        shared
            .last_request
            .store(shared.start.elapsed().as_secs(), Ordering::Relaxed);
        let path_ok = true;
        let close = req
            .headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("Connection") && v.eq_ignore_ascii_case("close"));
        let headers: Vec<(&str, &str)> = req
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let response = {
            let mut st = shared.state.lock().expect("lock");
            let now = shared.now();
            let http = HttpRequest {
                method: &req.method,
                headers: &headers,
                body: &req.body,
            };
            let State { server, fixture } = &mut *st;
            let r = server.handle_request(now, &http, &mut urandom);
            fixture.drive(now, server);
            server.settle(r)
        };
        shared.changed.notify_all();
        let _ = path_ok;
        let mut head = format!(
            "HTTP/1.1 {} {}\r\n",
            response.status,
            reason(response.status)
        );
        for (k, v) in &response.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        match &response.body {
            Body::Empty => head.push_str("Content-Length: 0\r\n"),
            Body::Complete(_, b) => head.push_str(&format!("Content-Length: {}\r\n", b.len())),
            Body::Stream(_) => head.push_str("Transfer-Encoding: chunked\r\n"),
        }
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut ok = out.write_all(head.as_bytes()).is_ok();
        match response.body {
            Body::Empty => {}
            Body::Complete(_, b) => ok = ok && out.write_all(&b).is_ok(),
            Body::Stream(id) => ok = ok && pump_stream(&shared, &mut out, id),
        }
        let _ = out.flush();
        if !ok || close {
            break;
        }
    }
    let _ = out.shutdown(Shutdown::Both);
}

/// Writes an SSE stream as chunks until it finishes or the client goes away.
fn pump_stream(shared: &Shared, out: &mut TcpStream, id: mcpwire::http::HttpStreamId) -> bool {
    let mut st = shared.state.lock().expect("lock");
    loop {
        let (bytes, finished) = match st.server.poll_stream(id) {
            Some(o) => (o.bytes.to_vec(), o.finished),
            None => (Vec::new(), true),
        };
        if !bytes.is_empty() {
            st.server.consume_stream(id, bytes.len());
            drop(st);
            let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
            chunk.extend_from_slice(&bytes);
            chunk.extend_from_slice(b"\r\n");
            if out.write_all(&chunk).and_then(|_| out.flush()).is_err() {
                let mut st = shared.state.lock().expect("lock");
                let now = shared.now();
                st.server.stream_closed(now, id);
                let State { server, fixture } = &mut *st;
                fixture.drive(now, server);
                return false;
            }
            st = shared.state.lock().expect("lock");
            continue;
        }
        if finished {
            drop(st);
            return out.write_all(b"0\r\n\r\n").is_ok();
        }
        let (next, _) = shared
            .changed
            .wait_timeout(st, Duration::from_millis(200))
            .expect("lock");
        st = next;
        if peer_gone(out) {
            let now = shared.now();
            st.server.stream_closed(now, id);
            let State { server, fixture } = &mut *st;
            fixture.drive(now, server);
            drop(st);
            shared.changed.notify_all();
            return false;
        }
    }
}

fn timers(shared: Arc<Shared>) {
    loop {
        let wait = {
            let mut st = shared.state.lock().expect("lock");
            let now = shared.now();
            let State { server, fixture } = &mut *st;
            server.handle_timeout(now);
            fixture.handle_timeout(now, server);
            let next = [server.poll_timeout(), fixture.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            next.map(|t| t.since(now))
                .unwrap_or(Duration::from_millis(100))
        };
        shared.changed.notify_all();
        std::thread::sleep(wait.clamp(Duration::from_millis(1), Duration::from_millis(100)));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let idle: u64 = args.next().and_then(|p| p.parse().ok()).unwrap_or(600);
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("address").port();
    let mut secret = [0u8; 16];
    urandom(&mut secret);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            server: HttpServer::new(fixture::http_config()),
            fixture: fixture::Fixture::new(secret),
        }),
        changed: Condvar::new(),
        start: Instant::now(),
        last_request: AtomicU64::new(0),
    });
    println!("listening on http://127.0.0.1:{port}/mcp");
    let _ = std::io::stdout().flush();
    {
        let shared = shared.clone();
        std::thread::spawn(move || timers(shared));
    }
    {
        // Stop by ourselves once nobody has asked anything for a while.
        let shared = shared.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let last = shared.last_request.load(Ordering::Relaxed);
                if shared.start.elapsed().as_secs().saturating_sub(last) > idle {
                    eprintln!("http_server: idle for {idle} s, exiting");
                    std::process::exit(0);
                }
            }
        });
    }
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || serve(shared, conn));
    }
}
