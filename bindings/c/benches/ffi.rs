//! Throughput through the C ABI against the Rust API, on the decode bench's corpora.
//!
//! A server `Connection` that has completed the handshake is fed the requests and
//! notifications of `corpus::mixed()` and `corpus::small()` (responses are left out: a server
//! would only report them as violations) in 64 KiB reads, and runs a server's whole loop after
//! each read: drain the events, answering every request with a small result, then drain and
//! consume the output. The same work is done through
//!
//! - `rust_api`: `Connection::handle_input`, `poll_event`, `respond`, `poll_transmit`,
//!   `consume_transmit`;
//! - `c_abi`: the exported `mcpw_conn_handle_input`, `mcpw_conn_poll_event`,
//!   `mcpw_conn_respond`, `mcpw_conn_transmit`, `mcpw_conn_consume`, exactly as a C host calls
//!   them (answering with the event's own id view).
//!
//! Both report messages/s and bytes/s; before anything is timed, both paths are checked to
//! see the same events and write the same bytes.
//!
//! Run: `cargo bench -p mcpwire-ffi --bench ffi`.

use std::hint::black_box;
use std::ptr;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use mcpwire::conn::{Config, Connection, Event, Timestamp};
use mcpwire::jsonrpc::{Decoded, Decoder, DecoderConfig, Message, OwnedId, RawJson};
use mcpwire_ffi::{
    mcpw_config, mcpw_config_free, mcpw_config_new, mcpw_config_set_capabilities, mcpw_conn,
    mcpw_conn_consume, mcpw_conn_free, mcpw_conn_handle_input, mcpw_conn_new, mcpw_conn_poll_event,
    mcpw_conn_respond, mcpw_conn_transmit, mcpw_event, mcpw_event_kind, mcpw_result, mcpw_role,
};

#[path = "../../../benches/corpus.rs"]
mod corpus;

/// The stream is fed in reads of this size, as in the decode bench.
const CHUNK: usize = 64 * 1024;

/// What the server answers every request with.
const RESULT: &str = r#"{"content":[{"type":"text","text":"ok"}],"isError":false}"#;
const CAPABILITIES: &str = r#"{"tools":{}}"#;
const HANDSHAKE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

/// The corpus lines a client sends a server: requests and notifications.
struct Traffic {
    bytes: Vec<u8>,
    messages: usize,
}

fn client_traffic(corpus: &corpus::Corpus) -> Traffic {
    let mut decoder = Decoder::new(DecoderConfig::default());
    let mut bytes = Vec::with_capacity(corpus.bytes.len());
    let mut messages = 0;
    for line in corpus.lines() {
        let keep = matches!(
            decoder.decode(line),
            Ok(Decoded::Single(
                Message::Request(_) | Message::Notification(_)
            ))
        );
        if keep {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
            messages += 1;
        }
    }
    Traffic { bytes, messages }
}

fn throughput(t: &Traffic) -> Throughput {
    Throughput::ElementsAndBytes {
        elements: t.messages as u64,
        bytes: t.bytes.len() as u64,
    }
}

/// What one pass observed, to check that both paths do the same work.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    events: usize,
    requests: usize,
    written: usize,
}

// ---- The Rust API -------------------------------------------------------------------------

fn rust_server() -> Connection {
    let config = Config::server("bench", "1")
        .with_capabilities(CAPABILITIES)
        .unwrap();
    let mut conn = Connection::new(config, Timestamp::ZERO).unwrap();
    rust_pass(&mut conn, HANDSHAKE);
    conn
}

fn rust_pass(conn: &mut Connection, bytes: &[u8]) -> Seen {
    let mut seen = Seen::default();
    let now = Timestamp::from_millis(1);
    for chunk in bytes.chunks(CHUNK) {
        conn.handle_input(now, chunk);
        while let Some(event) = conn.poll_event() {
            seen.events += 1;
            if let Event::Request { id, .. } = event {
                seen.requests += 1;
                let id = OwnedId::from(id);
                let result = RawJson::new(black_box(RESULT)).unwrap();
                conn.respond(id.as_id(), result).unwrap();
            }
        }
        while let Some(t) = conn.poll_transmit() {
            let n = black_box(t.bytes).len();
            seen.written += n;
            conn.consume_transmit(n);
        }
    }
    seen
}

// ---- The C ABI ----------------------------------------------------------------------------

/// A server handle made and driven through the exported functions only.
struct CServer(*mut mcpw_conn);

impl Drop for CServer {
    fn drop(&mut self) {
        // Safety: made by `mcpw_conn_new`, freed once here.
        unsafe { mcpw_conn_free(self.0) }
    }
}

fn ok(rc: mcpw_result) {
    assert_eq!(rc, mcpw_result::MCPW_OK);
}

fn c_server() -> CServer {
    let mut config: *mut mcpw_config = ptr::null_mut();
    let mut conn: *mut mcpw_conn = ptr::null_mut();
    // Safety: every pointer is valid for the call; the config is freed once.
    unsafe {
        ok(mcpw_config_new(
            mcpw_role::MCPW_ROLE_SERVER as u32,
            c"bench".as_ptr(),
            5,
            c"1".as_ptr(),
            1,
            &mut config,
        ));
        ok(mcpw_config_set_capabilities(
            config,
            CAPABILITIES.as_ptr().cast(),
            CAPABILITIES.len(),
        ));
        ok(mcpw_conn_new(config, 0, &mut conn));
        mcpw_config_free(config);
    }
    let mut server = CServer(conn);
    c_pass(&mut server, HANDSHAKE);
    server
}

fn c_pass(server: &mut CServer, bytes: &[u8]) -> Seen {
    let conn = server.0;
    let mut seen = Seen::default();
    let now = 1_000_000;
    let mut event = mcpw_event::default();
    let mut out: *const u8 = ptr::null();
    let mut len = 0usize;
    let mut stream = 0u64;
    // Safety: `conn` is a live handle; every other pointer is valid for its call, and the
    // event's id view is passed back before the next call that would invalidate it.
    unsafe {
        for chunk in bytes.chunks(CHUNK) {
            ok(mcpw_conn_handle_input(
                conn,
                now,
                chunk.as_ptr(),
                chunk.len(),
            ));
            loop {
                ok(mcpw_conn_poll_event(conn, &mut event));
                if event.kind == mcpw_event_kind::MCPW_EVENT_NONE {
                    break;
                }
                seen.events += 1;
                if event.kind == mcpw_event_kind::MCPW_EVENT_REQUEST {
                    seen.requests += 1;
                    let result = black_box(RESULT);
                    ok(mcpw_conn_respond(
                        conn,
                        &event.id,
                        result.as_ptr().cast(),
                        result.len(),
                    ));
                }
            }
            loop {
                ok(mcpw_conn_transmit(conn, &mut out, &mut len, &mut stream));
                if len == 0 {
                    break;
                }
                black_box(out);
                seen.written += len;
                ok(mcpw_conn_consume(conn, len));
            }
        }
    }
    seen
}

// ---- Main ---------------------------------------------------------------------------------

fn bench(c: &mut Criterion, name: &str, traffic: &Traffic) {
    // Same work both ways, and the connection stays healthy across passes (every request is
    // answered, so ids can repeat in the next pass).
    let mut rust = rust_server();
    let mut ffi = c_server();
    let first = rust_pass(&mut rust, &traffic.bytes);
    assert_eq!(first, c_pass(&mut ffi, &traffic.bytes), "{name}");
    assert_eq!(first, rust_pass(&mut rust, &traffic.bytes), "{name}");
    assert!(first.requests > 0 && first.written > 0, "{first:?}");

    let mut group = c.benchmark_group(format!("ffi_{name}"));
    group.throughput(throughput(traffic));
    group.bench_function("rust_api", |b| {
        b.iter(|| rust_pass(&mut rust, black_box(&traffic.bytes)))
    });
    group.bench_function("c_abi", |b| {
        b.iter(|| c_pass(&mut ffi, black_box(&traffic.bytes)))
    });
    group.finish();
}

fn main() {
    let mixed = client_traffic(&corpus::mixed());
    let small = client_traffic(&corpus::small());

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    bench(&mut c, "mixed", &mixed);
    bench(&mut c, "small", &small);

    c.final_summary();
}
