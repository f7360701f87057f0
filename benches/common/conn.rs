//! Connection setup and the decode + correlate loop shared by the peers bench
//! (`benches/peers.rs`) and the profiling examples (`examples/profile_conn.rs`,
//! `examples/profile_correlate.rs`), which include this file with `#[path]`; not a bench of its
//! own (cargo does not look for benches in subdirectories without a `main.rs`). Each includer
//! uses part of it.
#![allow(dead_code)]

use mcpwire::conn::{Config, Connection, Event, State, Timestamp};
use mcpwire::jsonrpc::{Decoded, Decoder, Id, Message, encode_message};
use mcpwire::mcp::ProtocolVersion;

/// A server declaring `tools`.
pub fn server_config() -> Config {
    Config::server("bench-server", "1.0")
        .with_capabilities(r#"{"tools":{}}"#)
        .expect("capabilities")
}

/// A client that offers 2025-11-25 only, so the handshake needs no era probe.
pub fn client_config() -> Config {
    let mut c = Config::client("bench-client", "1.0");
    c.versions = vec![ProtocolVersion::V2025_11_25];
    c
}

/// A server from `config` past a 2025-11-25 handshake with a raw client, every event and byte
/// of output drained.
pub fn server_past_handshake(config: Config) -> Connection {
    let now = Timestamp::ZERO;
    let mut s = Connection::new(config, now).expect("server");
    s.handle_input(
        now,
        concat!(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        )
        .as_bytes(),
    );
    while s.poll_event().is_some() {}
    while let Some(t) = s.poll_transmit() {
        let n = t.bytes.len();
        s.consume_transmit(n);
    }
    s
}

/// Moves everything `from` wants to write into `to`, through `buf`; returns the bytes moved.
pub fn pipe(
    from: &mut Connection,
    to: &mut Connection,
    buf: &mut Vec<u8>,
    now: Timestamp,
) -> usize {
    buf.clear();
    while let Some(t) = from.poll_transmit() {
        buf.extend_from_slice(t.bytes);
        let n = t.bytes.len();
        from.consume_transmit(n);
    }
    to.handle_input(now, buf);
    buf.len()
}

/// A client (with the configuration given) and a [`server_config`] server that have completed
/// the handshake, every event drained.
pub fn handshaken_with(client_config: Config) -> (Connection, Connection) {
    let now = Timestamp::ZERO;
    let mut client = Connection::new(client_config, now).expect("client");
    let mut server = Connection::new(server_config(), now).expect("server");
    let mut buf = Vec::new();
    for _ in 0..4 {
        pipe(&mut client, &mut server, &mut buf, now);
        pipe(&mut server, &mut client, &mut buf, now);
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
    }
    assert_eq!(client.state(), State::Operating);
    assert_eq!(server.state(), State::Operating);
    (client, server)
}

/// The answers among `lines` (results and errors, in order), re-addressed to the ids
/// `first`, `first + 1`, …, as one stream; and how many there are.
pub fn answers<'a>(lines: impl Iterator<Item = &'a [u8]>, first: i64) -> (Vec<u8>, usize) {
    let mut d = Decoder::default();
    let mut out = Vec::new();
    let mut n = 0;
    for line in lines {
        let id = Id::Int(first + n as i64);
        let readdressed = match d.decode(line) {
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
        encode_message(&mut out, &readdressed);
        out.push(b'\n');
        n += 1;
    }
    (out, n)
}

/// A handshaken client with `n` `ping` requests in flight (their output consumed); returns
/// it and the first request's id. Ids are allocated in order, so a fresh client always gets
/// the same ones.
pub fn client_awaiting(n: usize) -> (Connection, i64) {
    let now = Timestamp::ZERO;
    let mut config = client_config();
    config.limits.max_outbound_in_flight = n;
    let (mut client, _server) = handshaken_with(config);
    let mut first = None;
    for _ in 0..n {
        let id = client.request(now, "ping", None).expect("request");
        first.get_or_insert(id.0);
        while let Some(t) = client.poll_transmit() {
            let len = t.bytes.len();
            client.consume_transmit(len);
        }
    }
    (client, first.expect("at least one request"))
}

/// Feeds `stream` (answers, as from [`answers`]) to `client` in 64 KiB reads, draining its
/// events after each read; returns how many answers were correlated to a request. The
/// decode + correlate work the peers bench times and `profile_correlate` profiles.
pub fn correlate(client: &mut Connection, stream: &[u8]) -> usize {
    let mut answered = 0;
    for chunk in stream.chunks(64 * 1024) {
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
