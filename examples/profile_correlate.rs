//! A driver for profilers: decode + correlate, what a client does with its answers. The
//! corpus's results and errors are re-addressed to a handshaken client's requests in flight and
//! fed to it in 64 KiB reads, every event drained (the criterion group `peers_correlate_*` in
//! `cargo bench --bench peers` is the reference figure). With `bare` as the third argument it
//! runs the bare decode of the same stream instead, for comparison.
//!
//! `cargo build --release --example profile_correlate`, then for example
//! `valgrind --tool=callgrind target/release/examples/profile_correlate small 2`.
#![allow(clippy::disallowed_methods)]

#[path = "../benches/corpus.rs"]
mod corpus;

use std::time::Instant;

use mcpwire::conn::{Config, Connection, Event, State, Timestamp};
use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::{Decoded, Decoder, Id, Message, encode_message};
use mcpwire::mcp::ProtocolVersion;

const CHUNK: usize = 64 * 1024;

fn pipe(from: &mut Connection, to: &mut Connection, buf: &mut Vec<u8>, now: Timestamp) {
    buf.clear();
    while let Some(t) = from.poll_transmit() {
        buf.extend_from_slice(t.bytes);
        let n = t.bytes.len();
        from.consume_transmit(n);
    }
    to.handle_input(now, buf);
}

/// A handshaken client with `n` pings in flight, and the first one's id.
fn client_awaiting(n: usize) -> (Connection, i64) {
    let now = Timestamp::ZERO;
    let mut config = Config::client("profile-client", "1.0");
    config.versions = vec![ProtocolVersion::V2025_11_25];
    config.limits.max_outbound_in_flight = n;
    let server_config = Config::server("profile-server", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .expect("capabilities");
    let mut client = Connection::new(config, now).expect("client");
    let mut server = Connection::new(server_config, now).expect("server");
    let mut buf = Vec::new();
    for _ in 0..4 {
        pipe(&mut client, &mut server, &mut buf, now);
        pipe(&mut server, &mut client, &mut buf, now);
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
    }
    assert_eq!(client.state(), State::Operating);
    let mut first = None;
    for _ in 0..n {
        let id = client.request(now, "ping", None).expect("request");
        first.get_or_insert(id.0);
        while let Some(t) = client.poll_transmit() {
            let len = t.bytes.len();
            client.consume_transmit(len);
        }
    }
    (client, first.expect("one request at least"))
}

/// The corpus's answers re-addressed to `first`, `first + 1`, …; and how many.
fn answers(corpus: &corpus::Corpus, first: i64) -> (Vec<u8>, usize) {
    let mut d = Decoder::default();
    let mut out = Vec::new();
    let mut n = 0;
    for line in corpus.lines() {
        let id = Id::Int(first + n as i64);
        let m = match d.decode(line) {
            Ok(Decoded::Single(Message::Response(mut r))) => {
                r.id = id;
                Message::Response(r)
            }
            Ok(Decoded::Single(Message::Error(mut e))) => {
                e.id = Some(id);
                Message::Error(e)
            }
            _ => continue,
        };
        encode_message(&mut out, &m);
        out.push(b'\n');
        n += 1;
    }
    (out, n)
}

/// The timed part of a bare pass (callgrind: `--toggle-collect='*run_bare*'`).
#[inline(never)]
fn run_bare(stream: &[u8]) -> usize {
    let mut answered = 0;
    let mut lines = LineDecoder::new();
    let mut d = Decoder::default();
    for chunk in stream.chunks(CHUNK) {
        let mut input = chunk;
        while let Some(f) = lines.next_frame(&mut input) {
            answered += usize::from(d.decode(f.expect("frame")).is_ok());
        }
    }
    answered
}

/// The timed part of a decode + correlate pass (callgrind:
/// `--toggle-collect='*run_correlate*'`).
#[inline(never)]
fn run_correlate(client: &mut Connection, stream: &[u8]) -> usize {
    let mut answered = 0;
    for chunk in stream.chunks(CHUNK) {
        client.handle_input(Timestamp::ZERO, chunk);
        while let Some(event) = client.poll_event() {
            match event {
                Event::Response { result, .. } => {
                    std::hint::black_box(result.get().len());
                    answered += 1;
                }
                Event::Error { code, message, .. } => {
                    std::hint::black_box((code, message.raw().len()));
                    answered += 1;
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    }
    answered
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or("mixed".into());
    let passes: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let bare = std::env::args().nth(3).is_some_and(|a| a == "bare");
    let c = if which == "mixed" {
        corpus::mixed()
    } else {
        corpus::small()
    };
    let (_, first) = client_awaiting(1);
    let (stream, n) = answers(&c, first);
    let mut best = f64::INFINITY;
    let mut answered = 0usize;
    for _ in 0..passes {
        if bare {
            let started = Instant::now();
            answered += run_bare(&stream);
            best = best.min(started.elapsed().as_secs_f64());
            continue;
        }
        let (mut client, _) = client_awaiting(n);
        let started = Instant::now();
        answered += run_correlate(&mut client, &stream);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!("{answered} answers over {passes} passes ({n} a pass)");
    println!(
        "best pass: {:.2} M msg/s, {:.3} GB/s",
        n as f64 / best / 1e6,
        stream.len() as f64 / best / 1e9
    );
}
