//! Idle and slow connections: 2,000 of them cost tasks, not threads, and are closed by the
//! header-read timeout; at the connection cap a new connection displaces the one idle longest,
//! and gets 503 when every connection is in a request.

// The test measures how long the server takes to close connections, on the real clock.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use common::{
    Client, HostConfig, Server, proc_status, read_100_continue, read_to_close, start, statuses,
    test_config,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections_use_few_threads_and_are_closed_by_the_timeout() {
    let config = HostConfig {
        header_read_timeout: Duration::from_secs(1),
        max_connections: 4096,
        ..test_config()
    };
    let server = start(config).await;
    let mut conns = Vec::with_capacity(2000);
    for i in 0..2000 {
        let mut s = server.connect().await;
        // Half say nothing; half start a head and stall (slowloris).
        if i % 2 == 1 {
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow:")
                .await
                .expect("write");
        }
        conns.push(s);
    }
    let opened = Instant::now();
    // Let the server accept them all.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The harness's threads (one per core running a test) and the tests' runtimes (two
    // workers each, plus blocking threads): a bound that holds on a machine with many cores,
    // where a thread per connection would be 2,000 more.
    let threads = proc_status("Threads");
    assert!(
        threads <= 128,
        "{threads} threads with 2000 connections open"
    );
    // Every one is closed by the server (EOF or reset) once the header timeout passes.
    let closers = conns.into_iter().map(|mut s| {
        tokio::spawn(async move {
            let mut b = [0u8; 64];
            let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await;
            matches!(r, Ok(Ok(0)) | Ok(Err(_)))
        })
    });
    let mut closed = 0;
    for c in closers.collect::<Vec<_>>() {
        closed += usize::from(c.await.expect("task"));
    }
    assert_eq!(closed, 2000);
    let took = opened.elapsed();
    assert!(took < Duration::from_secs(4), "closing took {took:?}");
    assert!(proc_status("Threads") <= 128);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let config = HostConfig {
        header_read_timeout: Duration::from_millis(500),
        ..test_config()
    };
    let server = start(config).await;
    let mut c = Client::new(&server).await;
    // Timed from before the request: the host's timer starts once its answer has gone out,
    // which this client may notice late.
    let idle = Instant::now();
    c.stream
        .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    assert_eq!(c.response().await.expect("answer").status, 404);
    let (out, closed) = read_to_close(&mut c.stream, Duration::from_secs(6)).await;
    assert!(closed && out.is_empty(), "{out:?}");
    let took = idle.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// A connection over the cap, when every connection is in a request, is answered 503 at
/// once and closed, and served again once a slot is free. It waited unanswered in the accept
/// queue: a thousand clients holding GET streams open locked every other client out (found
/// by a helper's audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_503_at_once_when_all_are_busy() {
    let config = HostConfig {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(5),
        body_read_timeout: Duration::from_secs(5),
        ..test_config()
    };
    let server = start(config).await;
    // Two requests whose bodies are still to come: both connections are busy. Each asks
    // for a 100 Continue, which says that the host has taken its request in.
    let busy = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n";
    let mut first = server.connect().await;
    first.write_all(busy).await.expect("write");
    let mut second = server.connect().await;
    second.write_all(busy).await.expect("write");
    read_100_continue(&mut first).await;
    read_100_continue(&mut second).await;
    let mut third = server.connect().await;
    third
        .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let (raw, closed) = read_to_close(&mut third, Duration::from_secs(2)).await;
    assert_eq!(statuses(&raw), [503], "{}", String::from_utf8_lossy(&raw));
    assert!(closed);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("Retry-After: 1"), "{text}");
    // One closes: the next connection is served, once the host has seen the close (503
    // until then).
    drop(first);
    let served_at = Instant::now() + Duration::from_secs(5);
    loop {
        let mut fourth = server.connect().await;
        fourth
            .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        // Its status line, whole (or what came before the connection ended).
        let mut seen = Vec::new();
        let mut b = [0u8; 256];
        while !seen.windows(2).any(|w| w == b"\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(2), fourth.read(&mut b))
                .await
                .expect("an answer")
                .expect("read");
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&b[..n]);
        }
        let status = statuses(&seen);
        if status == [404] {
            break;
        }
        assert_eq!(status, [503], "{}", String::from_utf8_lossy(&seen));
        assert!(
            Instant::now() < served_at,
            "not served 5 s after a slot was freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The busy one was never disturbed: its body completes its request.
    second.write_all(b"{\"a\":1}   ").await.expect("write");
    let mut b = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(2), second.read(&mut b))
        .await
        .expect("answered")
        .expect("read");
    assert_eq!(
        statuses(&b[..n]).len(),
        1,
        "{}",
        String::from_utf8_lossy(&b[..n])
    );
}

/// At the cap, a new connection takes the place of the one idle longest, never one in a
/// request: silent sockets left open (or slowloris heads) cannot lock clients out. Before,
/// a cap's worth of them got every later client 503 until the header timeout closed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_connection_idle_longest_makes_room() {
    let config = HostConfig {
        max_connections: 3,
        header_read_timeout: Duration::from_secs(30),
        body_read_timeout: Duration::from_secs(30),
        ..test_config()
    };
    let server = start(config).await;
    let get = b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let read_status = |mut s: tokio::net::TcpStream| async move {
        let mut b = [0u8; 256];
        let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut b))
            .await
            .expect("answered in time")
            .expect("read");
        (statuses(&b[..n]), s)
    };
    // Silent since it was accepted.
    let mut silent = server.connect().await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Served once, then idle on keep-alive.
    let mut kept = server.connect().await;
    kept.write_all(get).await.expect("write");
    let (status, mut kept) = read_status(kept).await;
    assert_eq!(status, [404]);
    // In a request (its body is still to come).
    let mut busy = server.connect().await;
    busy.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;

    // A fourth is served in the place of the silent one, closed without a word.
    let mut fourth = server.connect().await;
    fourth.write_all(get).await.expect("write");
    let (status, fourth) = read_status(fourth).await;
    assert_eq!(status, [404], "served, not turned away");
    let (out, closed) = read_to_close(&mut silent, Duration::from_secs(2)).await;
    assert!(
        closed && out.is_empty(),
        "the silent one is closed: {out:?}"
    );

    // A fifth takes the place of the one idle longest now: the kept-alive one, whose first
    // answer it had in full.
    let mut fifth = server.connect().await;
    fifth.write_all(get).await.expect("write");
    let (status, _fifth) = read_status(fifth).await;
    assert_eq!(status, [404]);
    let (out, closed) = read_to_close(&mut kept, Duration::from_secs(2)).await;
    assert!(
        closed && out.is_empty(),
        "the kept-alive one is closed: {out:?}"
    );

    // The busy one was never chosen: its request completes.
    drop(fourth);
    busy.write_all(b"{\"a\":1}   ").await.expect("write");
    let (status, _busy) = read_status(busy).await;
    assert_eq!(status.len(), 1);
    assert_ne!(status, [503]);
}

/// A kept-alive connection whose next request has begun to arrive (hyper holds part of its
/// head) is never the one closed to make room, though it has been idle longest: it was
/// closed, and its request lost. The one silent since it was accepted makes room instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_connection_whose_next_request_has_begun_is_not_closed() {
    let server = capped_at_two().await;
    // Served once, idle since, then the first half of its next request's head.
    let mut begun = served(&server).await;
    begun.write_all(&GET[..20]).await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Silent since it was accepted, after the first became idle.
    let mut silent = server.connect().await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let _third = served(&server).await;
    assert_closed_quietly(&mut silent, "the silent one makes room").await;
    // The begun request completes and is answered.
    begun.write_all(&GET[20..]).await.expect("write");
    assert_eq!(status_of(&mut begun).await, [404], "its request was lost");
}

/// A head that has been arriving for longer than a client's would (a second) does not
/// protect its connection: at the cap, a trickling connection idle longest makes room, so a
/// cap's worth of slowloris heads cannot lock clients out until the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_head_trickling_for_over_a_second_makes_room() {
    let server = capped_at_two().await;
    let mut slow = server.connect().await;
    slow.write_all(b"GET /other HTTP/1.1\r\nX-Slow: ")
        .await
        .expect("write");
    for _ in 0..10 {
        // 2 s: well past the grace of a second even when the host is slow to read it
        tokio::time::sleep(Duration::from_millis(200)).await;
        slow.write_all(b"X").await.expect("write");
    }
    // Served, and idle since: after the slow one.
    let mut kept = served(&server).await;

    let _third = served(&server).await;
    assert_closed_quietly(&mut slow, "the slow head makes room").await;
    kept.write_all(GET).await.expect("write");
    assert_eq!(status_of(&mut kept).await, [404], "the kept one stays");
}

/// Heads kept arriving cannot lock new clients out: when every idle connection at the cap
/// has a request arriving, the one idle longest is closed all the same (before, every new
/// client got 503 while the heads were renewed faster than once a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_arriving_heads_everywhere_still_make_room() {
    let server = capped_at_two().await;
    let mut first = served(&server).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut second = served(&server).await;
    for c in [&mut first, &mut second] {
        c.write_all(&GET[..20]).await.expect("write");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    let _third = served(&server).await;
    assert_closed_quietly(&mut first, "the one idle longest went").await;
    second.write_all(&GET[20..]).await.expect("write");
    assert_eq!(status_of(&mut second).await, [404], "the other stays");
}

/// A request the server answers 404 (not its endpoint).
const GET: &[u8] = b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// A server of at most two connections, with time enough for slow heads.
async fn capped_at_two() -> Server {
    start(HostConfig {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(30),
        ..test_config()
    })
    .await
}

/// A new connection with one request answered (404), not turned away (503).
async fn served(server: &Server) -> tokio::net::TcpStream {
    let mut s = server.connect().await;
    s.write_all(GET).await.expect("write");
    assert_eq!(status_of(&mut s).await, [404], "served, not turned away");
    s
}

/// Asserts that the server closed `s` within 2 s without a word.
async fn assert_closed_quietly(s: &mut tokio::net::TcpStream, what: &str) {
    let (out, closed) = read_to_close(s, Duration::from_secs(2)).await;
    assert!(closed && out.is_empty(), "{what}: {out:?}");
}

/// The statuses of what one read brings, within 2 s.
async fn status_of(s: &mut tokio::net::TcpStream) -> Vec<u16> {
    let mut b = [0u8; 256];
    let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut b))
        .await
        .expect("answered in time")
        .expect("read");
    statuses(&b[..n])
}
