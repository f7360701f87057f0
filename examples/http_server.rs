//! A Streamable HTTP server for the conformance suite's "everything-server" fixture, on the
//! tokio/hyper host of `mcpwire-tokio`: HTTP/1.1 with keep-alive, chunked SSE responses, the
//! engine's and the fixture's timers, limits on connections, heads, bodies and slow clients,
//! and a graceful exit. Both eras: 2025-11-25 sessions and 2026-07-28 stateless requests.
//!
//! Usage: `http_server PORT [IDLE_EXIT_SECS]` (port 0 picks a free one). Prints
//! `listening on http://127.0.0.1:PORT/mcp` once bound, and exits by itself after
//! `IDLE_EXIT_SECS` (default 600) with nothing going on (the idle time counts from the last
//! time the host drove the fixture: a request, or a timer of the engine's, such as an open
//! stream's keep-alive or a session's expiry, so a stream held open keeps it up), or on
//! SIGTERM or ctrl-c (gracefully: open answers finish first).

// The example is the IO layer: it reads the real clock for its idle exit.
#![allow(clippy::disallowed_methods)]

#[path = "conformance/fixture.rs"]
mod fixture;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::Timestamp;
use mcpwire::http::HttpServer;
use mcpwire_tokio::http::{Application, HostConfig, serve};

impl Application for fixture::Fixture {
    fn drive(&mut self, now: Timestamp, server: &mut HttpServer) {
        fixture::Fixture::drive(self, now, server);
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        fixture::Fixture::poll_timeout(self)
    }

    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        fixture::Fixture::handle_timeout(self, now, server);
    }
}

/// The fixture, noting when the host last drove it (for the idle exit: requests and timers
/// alike).
struct Watched {
    fixture: fixture::Fixture,
    last: Arc<Mutex<Instant>>,
}

impl Application for Watched {
    fn drive(&mut self, now: Timestamp, server: &mut HttpServer) {
        *self.last.lock().expect("lock") = Instant::now();
        self.fixture.drive(now, server);
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        self.fixture.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        self.fixture.handle_timeout(now, server);
    }
}

/// Completes on SIGTERM, ctrl-c, or once nothing happened for `idle`; a second signal then
/// ends the process at once. The signals are caught
/// from the call on, not from the future's first poll: call it before the address is
/// printed, or a signal that comes before `serve` runs ends the process without its drain.
fn stop(idle: Duration, last: Arc<Mutex<Instant>>) -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        let idle_exit = async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if last.lock().expect("lock").elapsed() > idle {
                    note(&format!("idle for {} s, exiting", idle.as_secs()));
                    return;
                }
            }
        };
        tokio::select! {
            _ = idle_exit => {}
            _ = term.recv() => note("SIGTERM, shutting down"),
            _ = interrupt.recv() => note("interrupted, shutting down"),
        }
        // A second signal does not wait for the drain.
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
            }
            note("a second signal: exiting at once");
            std::process::exit(1);
        });
    }
}

/// Writes `what` to stderr, if it can: `eprintln!` panics when stderr is a closed pipe, which
/// would end the process before its graceful shutdown, losing the answers in flight.
fn note(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "http_server: {what}");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A mistyped number is a usage error (exit 2), not the default in disguise.
    let number = |at: usize, default: u64, most: u64| match args.get(at) {
        None => default,
        Some(text) => match text.parse::<u64>() {
            Ok(n) if n <= most => n,
            _ => {
                note(&format!(
                    "not a number up to {most}: {text:?}\nusage: http_server PORT [IDLE_EXIT_SECS]"
                ));
                std::process::exit(2);
            }
        },
    };
    if args.len() > 2 {
        note("usage: http_server PORT [IDLE_EXIT_SECS]");
        std::process::exit(2);
    }
    let port = number(0, 0, u64::from(u16::MAX)) as u16;
    let idle = number(1, 600, u64::MAX / 2);
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            note(&format!("cannot listen on 127.0.0.1:{port}: {e}"));
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().expect("address").port();
    let last = Arc::new(Mutex::new(Instant::now()));
    let stopping = stop(Duration::from_secs(idle), last.clone());
    let mut secret = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut secret))
        .expect("/dev/urandom");
    println!("listening on http://127.0.0.1:{port}/mcp");
    let _ = std::io::stdout().flush();
    let app = Watched {
        // The host's clock starts (at zero) when `serve` starts, a moment from now.
        fixture: fixture::Fixture::new(secret)
            .with_wall_clock(mcpwire::Timestamp::ZERO, unix_ms())
            .with_random(random_source()),
        last: last.clone(),
    };
    let server = HttpServer::new(fixture::http_config());
    serve(listener, server, app, HostConfig::default(), stopping)
        .await
        .expect("serve");
}

/// The operating system's random source, for task ids (bearer handles a client must not
/// guess). A read that fails gives zeros, and the task table refuses an id it already holds:
/// at most one task gets that id, the next calls get an error.
fn random_source() -> impl FnMut(&mut [u8]) + Send + 'static {
    let mut urandom = std::fs::File::open("/dev/urandom").expect("/dev/urandom");
    move |buf: &mut [u8]| {
        if urandom.read_exact(buf).is_err() {
            buf.fill(0);
        }
    }
}

/// Milliseconds since 1970 on the wall clock, for the tasks' dates.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
