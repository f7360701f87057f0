//! Session churn: 10,000 clients that initialize and vanish (never DELETE) never lock a new
//! client out, sessions stay within the cap, and once they expire the heap is back where it
//! started (a counting allocator; one test per binary, so nothing else allocates meanwhile).

use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::conn::Config;
use mcpwire::http::{HttpRequest, HttpServer, HttpServerConfig};

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const CAP: usize = 256;
const CLIENTS: u64 = 10_000;

#[test]
fn ten_thousand_abandoned_sessions_never_lock_out_a_new_client_and_memory_returns() {
    let server_config = Config::server("churn", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let mut config = HttpServerConfig::new(server_config);
    config.max_sessions = CAP;
    config.session_idle_timeout = Duration::from_secs(30);
    let mut server = HttpServer::new(config);
    let headers = [
        ("Host", "127.0.0.1:1"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let mut seed = 1u64;
    let mut random = move |buf: &mut [u8]| {
        for b in buf {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (seed >> 56) as u8;
        }
    };
    let mut init = |server: &mut HttpServer, now: Timestamp| {
        let req = HttpRequest {
            method: "POST",
            headers: &headers,
            body: INIT.as_bytes(),
        };
        let r = server.handle_request(now, &req, &mut random);
        server.settle(r).status
    };
    // Warm up once so lazily grown tables count in the baseline, then let it expire.
    assert_eq!(init(&mut server, Timestamp::ZERO), 200);
    server.handle_timeout(Timestamp::from_millis(60_000));
    assert_eq!(server.sessions(), 0);
    let baseline = counting::live();

    let start = Timestamp::from_millis(120_000);
    let mut peak = 0;
    for i in 0..CLIENTS {
        // One client a millisecond; each initializes and is never heard from again.
        let now = start.after(Duration::from_millis(i));
        assert_eq!(init(&mut server, now), 200, "client {i} was refused");
        if let Some(deadline) = server.poll_timeout()
            && deadline <= now
        {
            server.handle_timeout(now);
        }
        assert!(server.sessions() <= CAP);
        peak = peak.max(counting::live() - baseline);
    }
    // Everyone has left: the sessions expire through the timer, and memory comes back.
    let end = start.after(Duration::from_millis(CLIENTS));
    let deadline = server.poll_timeout().expect("sessions waiting to expire");
    assert!(deadline <= end.after(Duration::from_secs(30)));
    server.handle_timeout(end.after(Duration::from_secs(31)));
    assert_eq!(server.sessions(), 0);
    assert_eq!(server.poll_timeout(), None);
    let after = counting::live() - baseline;
    assert!(
        after <= 16 * 1024,
        "{after} bytes still live after every session expired (peak {peak})"
    );
    assert!(peak > 0);
    // A newcomer still gets a session.
    assert_eq!(init(&mut server, end.after(Duration::from_secs(32))), 200);
}
