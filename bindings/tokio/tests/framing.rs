//! Request framing on a real connection: ambiguous lengths and codings (request smuggling),
//! bodies over the cap, slow bodies, wrong paths. Each case checks the status, that the
//! connection is closed where it must be, and that bytes hidden in a body are never served as
//! a request of their own.

mod common;

use std::time::Duration;

use common::{Client, HostConfig, read_100_continue, read_to_close, start, statuses, test_config};
use tokio::io::AsyncWriteExt;

/// A 2025-11-25 `initialize` request.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// A request hidden in a chunk: if it were ever parsed as a request, its 404 would show.
const HIDDEN: &str = "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// Sends `raw` on a fresh connection, then a second, innocent request; returns what came back
/// before the server closed (it must close within 5 s).
async fn exchange(raw: &str) -> Vec<u8> {
    let server = start(test_config()).await;
    let mut s = server.connect().await;
    s.write_all(raw.as_bytes()).await.expect("write");
    // A follow-up that a keep-alive connection would answer: it must not be.
    let _ = s
        .write_all(b"GET /after HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await;
    let (out, closed) = read_to_close(&mut s, Duration::from_secs(5)).await;
    assert!(
        closed,
        "the connection stays open: {}",
        String::from_utf8_lossy(&out)
    );
    out
}

fn chunked(body: &str) -> String {
    format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
}

#[tokio::test]
async fn chunked_with_content_length_is_read_by_chunks_and_closes_the_connection() {
    // Content-Length before and after Transfer-Encoding. A server going by Content-Length
    // would take "2c\r\n" as the body and serve HIDDEN as the next request.
    for (first, second) in [
        ("Content-Length: 4", "Transfer-Encoding: chunked"),
        ("Transfer-Encoding: chunked", "Content-Length: 4"),
    ] {
        let raw = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{first}\r\n{second}\r\n\r\n{}",
            chunked(HIDDEN)
        );
        let out = exchange(&raw).await;
        let got = statuses(&out);
        // hyper decodes by Transfer-Encoding (RFC 9112 §6.1) and closes after the answer: one
        // response (the engine's refusal of a body that is not JSON), nothing for HIDDEN or
        // the follow-up.
        assert_eq!(got.len(), 1, "{}", String::from_utf8_lossy(&out));
        assert!((400..500).contains(&got[0]), "{got:?}");
        assert!(!got.contains(&404), "{got:?}");
        let text = String::from_utf8_lossy(&out).to_ascii_lowercase();
        assert!(text.contains("connection: close"), "{text}");
    }
}

#[tokio::test]
async fn a_coding_other_than_chunked_gets_400_and_closes() {
    // `gzip, chunked` is valid framing, but the engine takes plain bodies only.
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\
         Content-Length: 4\r\n\r\n{}",
        chunked(HIDDEN)
    );
    assert_eq!(statuses(&exchange(&raw).await), [400]);
    // Two Transfer-Encoding lines.
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\
         Transfer-Encoding: chunked\r\n\r\n{}",
        chunked(HIDDEN)
    );
    assert_eq!(statuses(&exchange(&raw).await), [400]);
}

#[tokio::test]
async fn chunked_not_last_gets_400_from_hyper_and_closes() {
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n{}",
        chunked(HIDDEN)
    );
    assert_eq!(statuses(&exchange(&raw).await), [400]);
}

#[tokio::test]
async fn two_different_content_lengths_get_400_from_hyper_and_close() {
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nContent-Length: {}\r\n\r\n\
         abcd{HIDDEN}",
        4 + HIDDEN.len()
    );
    assert_eq!(statuses(&exchange(&raw).await), [400]);
    // One line with two values.
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4, {}\r\n\r\nabcd{HIDDEN}",
        4 + HIDDEN.len()
    );
    assert_eq!(statuses(&exchange(&raw).await), [400]);
}

/// Reads until the server closes; fails on a reset (the client would not see the answer).
async fn read_to_clean_close(s: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => panic!("{e} after {}", String::from_utf8_lossy(&out)),
            }
        }
    })
    .await
    .expect("the server closes");
    out
}

#[tokio::test]
async fn a_body_over_the_cap_gets_413() {
    let server = start(test_config()).await;
    let cap = test_config().max_body;

    // Declared larger than what is read to drop (16 MiB here): refused before any body byte.
    let mut c = Client::new(&server).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        (16 << 20) + 1
    );
    c.stream.write_all(head.as_bytes()).await.expect("write");
    let r = c.response().await.expect("an answer before the body");
    assert_eq!(r.status, 413);
    assert_eq!(r.header("connection"), Some("close"));

    // Declared over the cap, within that: the body is read and dropped, then 413, so a client
    // still sending gets every write through and reads the answer. (The 413 came at once and
    // the connection closed under the client's writes: Node's fetch and httpx reported a
    // broken connection.)
    let mut s = server.connect().await;
    let size = cap * 64;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {size}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.expect("write");
    let piece = vec![b' '; 16 * 1024];
    for _ in 0..size / piece.len() {
        s.write_all(&piece)
            .await
            .expect("every byte of the body is taken");
    }
    let out = read_to_clean_close(&mut s).await;
    assert_eq!(statuses(&out), [413]);

    // Chunked, growing past the cap: the same, once it ends.
    let mut s = server.connect().await;
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    s.write_all(head.as_bytes()).await.expect("write");
    let chunk = format!("{:x}\r\n{}\r\n", 4096, "a".repeat(4096));
    for _ in 0..=cap / 4096 * 4 {
        s.write_all(chunk.as_bytes()).await.expect("write");
    }
    s.write_all(b"0\r\n\r\n").await.expect("write");
    let out = read_to_clean_close(&mut s).await;
    assert_eq!(statuses(&out), [413]);

    // Chunked past the drop limit too: refused once it gets there.
    let mut s = server.connect().await;
    s.write_all(head.as_bytes()).await.expect("write");
    let big = format!("{:x}\r\n{}\r\n", 1 << 20, "a".repeat(1 << 20));
    for _ in 0..20 {
        if s.write_all(big.as_bytes()).await.is_err() {
            break;
        }
    }
    let (out, closed) = read_to_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed);
    assert_eq!(statuses(&out), [413]);

    // A body at the cap is read (and refused by the engine as not JSON, which is fine).
    let mut c = Client::new(&server).await;
    c.send(
        "POST",
        &[("Content-Type", "application/json")],
        &vec![b' '; cap],
    )
    .await;
    let r = c.response().await.expect("an answer");
    assert_ne!(r.status, 413);
}

#[tokio::test]
async fn a_body_that_does_not_come_gets_408() {
    let server = start(test_config()).await;
    let mut s = server.connect().await;
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        .await
        .expect("write");
    // body_read_timeout is 2 s in the test configuration.
    let (out, closed) = read_to_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed);
    assert_eq!(statuses(&out), [408]);
}

/// An `initialize` request's head and body, the body padded with spaces to `len` bytes.
fn padded_initialize(len: usize) -> (String, Vec<u8>) {
    let mut body = INITIALIZE.as_bytes().to_vec();
    body.resize(len, b' ');
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Content-Length: {len}\r\n\r\n"
    );
    (head, body)
}

/// Writes `body` after `head` at `rate` bytes a second, on its own task, while the caller
/// reads; stops at the first failed write. Paced by the clock, not by its wake-ups: a late
/// one sends what is due, never less. The task returns the write half unless a write failed:
/// dropped, it would close the sending side, which ends the exchange for hyper.
fn trickle(
    mut w: tokio::net::tcp::OwnedWriteHalf,
    head: String,
    body: Vec<u8>,
    rate: u64,
) -> tokio::task::JoinHandle<Option<tokio::net::tcp::OwnedWriteHalf>> {
    tokio::spawn(async move {
        w.write_all(head.as_bytes()).await.ok()?;
        let started = tokio::time::Instant::now();
        let mut sent = 0;
        while sent < body.len() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let due = (started.elapsed().as_millis() as u64 * rate / 1000) as usize;
            let due = due.min(body.len());
            w.write_all(&body[sent..due]).await.ok()?;
            sent = due;
        }
        Some(w)
    })
}

/// Reads `r` until the server closes the connection, for at most `within`: what came, and
/// whether it closed.
async fn read_until_closed(
    r: &mut tokio::net::tcp::OwnedReadHalf,
    within: Duration,
) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let closed = tokio::time::timeout(within, read_while(r, &mut out, |_| true))
        .await
        .is_ok();
    (out, closed)
}

/// Reads `r` until a JSON-RPC result has come (or the connection ends), for at most
/// `within`: what came.
async fn read_until_result(r: &mut tokio::net::tcp::OwnedReadHalf, within: Duration) -> Vec<u8> {
    let mut out = Vec::new();
    let wanted = |out: &[u8]| !String::from_utf8_lossy(out).contains("\"result\"");
    let _ = tokio::time::timeout(within, read_while(r, &mut out, wanted)).await;
    out
}

/// Reads `r` into `out` while `go_on(out)` holds and the connection is open.
async fn read_while(
    r: &mut tokio::net::tcp::OwnedReadHalf,
    out: &mut Vec<u8>,
    go_on: impl Fn(&[u8]) -> bool,
) {
    let mut buf = [0u8; 4096];
    while go_on(out) {
        match tokio::io::AsyncReadExt::read(r, &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Slow enough for the rate below, fast enough for the tests: 1,000 bytes/s after 500 ms.
fn rated_config() -> HostConfig {
    HostConfig {
        body_read_timeout: Duration::from_secs(30),
        min_body_rate: 1000,
        body_rate_grace: Duration::from_millis(500),
        ..test_config()
    }
}

/// A body trickled below `min_body_rate` gets 408 once the grace has passed, long before the
/// body timeout (30 s here): before, it held its request (and, at the cap, a connection slot
/// that no new client could take) for the whole timeout.
#[tokio::test]
async fn a_body_slower_than_the_minimum_rate_gets_408_after_the_grace() {
    let server = start(rated_config()).await;
    let (mut r, w) = server.connect().await.into_split();
    let (head, body) = padded_initialize(10_000);
    let started = tokio::time::Instant::now();
    // 200 bytes/s: a fifth of the minimum.
    let writer = trickle(w, head, body, 200);
    let (out, closed) = read_until_closed(&mut r, Duration::from_secs(5)).await;
    let waited = started.elapsed();
    writer.abort();
    assert!(closed, "still open after 5 s");
    assert_eq!(statuses(&out), [408], "{}", String::from_utf8_lossy(&out));
    assert!(
        waited >= Duration::from_millis(500),
        "cut within the grace: {waited:?}"
    );
}

/// A body sent fast up to its last bytes, then stopped, gets 408 about a second after it
/// stops (the most it may get ahead of the rate here): before, the bytes it had sent carried
/// the average for 19 s here (up to the body timeout by default), and a few such bodies held
/// `max_body_total`, or a cap's worth of connections, at almost no cost.
#[tokio::test]
async fn a_body_that_stops_after_a_fast_start_gets_408_soon() {
    let server = start(rated_config()).await;
    let (mut r, mut w) = server.connect().await.into_split();
    let (head, body) = padded_initialize(20_000);
    w.write_all(head.as_bytes()).await.expect("head");
    w.write_all(&body[..19_000])
        .await
        .expect("most of the body");
    let started = tokio::time::Instant::now();
    let (out, closed) = read_until_closed(&mut r, Duration::from_secs(6)).await;
    let waited = started.elapsed();
    drop(w);
    assert!(closed, "still open after 6 s");
    assert_eq!(statuses(&out), [408], "{}", String::from_utf8_lossy(&out));
    assert!(
        waited >= Duration::from_millis(900),
        "cut before its lead ran out: {waited:?}"
    );
}

/// A body that keeps the minimum rate after a fast start is served: only a pause longer
/// than its lead is cut. Here 4,000 bytes at once, then 1,500 bytes/s (the minimum is
/// 1,000) for 2 s.
#[tokio::test]
async fn a_body_that_keeps_the_rate_after_a_fast_start_is_served() {
    let server = start(rated_config()).await;
    let (mut r, mut w) = server.connect().await.into_split();
    let (head, body) = padded_initialize(7_000);
    w.write_all(head.as_bytes()).await.expect("head");
    w.write_all(&body[..4_000]).await.expect("the start");
    let writer = trickle(w, String::new(), body[4_000..].to_vec(), 1500);
    let out = read_until_result(&mut r, Duration::from_secs(6)).await;
    assert!(writer.await.is_ok_and(|w| w.is_some()), "a write failed");
    let text = String::from_utf8_lossy(&out);
    assert_eq!(statuses(&out), [200], "{text}");
}

/// A body above the minimum rate is served however long it takes within the body timeout:
/// here 2,500 bytes/s against a minimum of 1,000, arriving for 1.6 s, three times the grace.
#[tokio::test]
async fn a_body_faster_than_the_minimum_rate_is_served() {
    let server = start(rated_config()).await;
    let (mut r, w) = server.connect().await.into_split();
    let (head, body) = padded_initialize(4_000);
    let writer = trickle(w, head, body, 2500);
    let out = read_until_result(&mut r, Duration::from_secs(5)).await;
    assert!(writer.await.is_ok_and(|w| w.is_some()), "a write failed");
    let text = String::from_utf8_lossy(&out);
    assert_eq!(statuses(&out), [200], "{text}");
    assert!(text.contains("protocolVersion"), "{text}");
}

/// At the cap, connections whose bodies trickle are in a request and never displaced; the
/// minimum rate cuts them after the grace, so new clients are served again within about a
/// second of it instead of getting 503 for the whole body timeout. (A grace of 2 s here: the
/// first new client must come while the cap is still full, on a loaded machine too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_trickled_bodies_give_way_after_the_grace() {
    let server = start(HostConfig {
        max_connections: 2,
        body_rate_grace: Duration::from_secs(2),
        ..rated_config()
    })
    .await;
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (mut r, w) = server.connect().await.into_split();
        let (head, body) = padded_initialize(10_000);
        // (The 100 Continue says that the host took the request in: the cap is full.)
        let head = head.replace("\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n");
        // 10 bytes/s.
        writers.push(trickle(w, head, body, 10));
        read_100_continue(&mut r).await;
        readers.push(r);
    }
    let started = tokio::time::Instant::now();
    let mut refused = 0;
    let served = loop {
        let mut c = Client::new(&server).await;
        c.stream
            .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        match c.response().await.map(|r| r.status) {
            Some(404) => break true,
            _ if started.elapsed() > Duration::from_secs(6) => break false,
            _ => refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    writers.iter().for_each(|w| w.abort());
    assert!(served, "still turned away after 6 s");
    assert!(refused > 0, "the trickled bodies never filled the cap");
}

/// `Duration::MAX` for the body timeout and the grace means "never": a body still arriving
/// at the handler's first poll is read to its end (adding it to the clock overflowed, and
/// the connection's task panicked).
#[tokio::test]
async fn a_body_timeout_of_duration_max_means_never() {
    let server = start(HostConfig {
        body_read_timeout: Duration::MAX,
        body_rate_grace: Duration::MAX,
        ..rated_config()
    })
    .await;
    let (mut r, w) = server.connect().await.into_split();
    let (head, body) = padded_initialize(1_000);
    let writer = trickle(w, head, body, 5_000);
    let out = read_until_result(&mut r, Duration::from_secs(5)).await;
    assert!(writer.await.is_ok_and(|w| w.is_some()), "a write failed");
    assert_eq!(statuses(&out), [200], "{}", String::from_utf8_lossy(&out));
}

/// Limits and timeouts at their types' largest ("no limit") are served with: the cap took
/// `usize::MAX` permits (a panic before the first accept), hyper set aside room for
/// `usize::MAX` headers at every request (a panic, or an abort for a smaller huge value), and
/// added `Duration::MAX` to its clock (a panic at every connection).
#[tokio::test]
async fn limits_of_usize_max_and_duration_max_are_served_with() {
    let server = start(HostConfig {
        max_connections: usize::MAX,
        max_headers: usize::MAX,
        max_body: usize::MAX,
        header_read_timeout: Duration::MAX,
        body_read_timeout: Duration::MAX,
        send_timeout: Duration::MAX,
        ..test_config()
    })
    .await;
    // A body declared larger than any memory, coming in two pieces: the host reserved room
    // for all of it at the second, and the failed allocation aborted the process (found by
    // a review of the host).
    let mut huge = server.connect().await;
    huge.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Accept: application/json, text/event-stream\r\n\
          Content-Length: 4611686018427387904\r\n\r\n{",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    huge.write_all(b" ").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut c = Client::new(&server).await;
    let r = c.post(None, INITIALIZE).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn other_paths_get_404_and_the_connection_stays_usable() {
    let server = start(test_config()).await;
    let mut c = Client::new(&server).await;
    c.stream
        .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    assert_eq!(c.response().await.expect("answer").status, 404);
    c.stream
        .write_all(b"GET /mcp/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    assert_eq!(c.response().await.expect("answer").status, 404);
    // Same connection, the endpoint: the engine answers.
    let r = c.post(None, INITIALIZE).await;
    assert_eq!(r.status, 200);
}
