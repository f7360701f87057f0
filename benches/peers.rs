//! mcpwire against its peers, in one criterion run, on the corpora of `corpus.rs`:
//!
//! - `peers_decode_{mixed,small}`: the whole stream decoded, by mcpwire (each backend, fed
//!   through the line framer in 64 KiB reads), by rmcp's typed messages
//!   (`serde_json::from_slice::<ClientJsonRpcMessage>` for requests and
//!   `ServerJsonRpcMessage` for the rest: what an rmcp server and client each parse), by
//!   serde_json into `Value`, and the memchr newline scan (the floor);
//! - `peers_encode_{mixed,small}`: every message encoded, by mcpwire from its views, by rmcp's
//!   typed messages through `serde_json::to_writer`, and by serde_json from `Value`;
//! - `peers_roundtrip`: a request encoded by a client, decoded by a server, answered, the answer
//!   decoded by the client and correlated: two handshaken mcpwire `Connection`s, against the
//!   same steps with rmcp's typed messages. Elements are messages (two per round trip);
//! - `peers_roundtrip_typed`: the same round trip with the user's own Rust types on both
//!   ends (feature `serde`): typed params serialized by the client, parsed by the server into
//!   a struct borrowing from the frame, a typed result serialized back and parsed by the
//!   client; against rmcp, whose round trip is typed already;
//! - `peers_correlate_{mixed,small}`: decode + correlate, what a client does with its answers:
//!   the corpus's results and errors, re-addressed to a handshaken client's requests in
//!   flight, decoded, matched to their requests and handed out as events; against the bare
//!   decode of the same stream (`bare_decode`) and rmcp's typed parse plus a `HashMap` lookup.
//!
//! Before timing it prints the memory of an idle connection and of each request in flight
//! (a counting allocator measures it) and checks that every baseline parses every line.
//! `.ci/bench-table` turns the results into the README's table of ratios.
//!
//! Run: `cargo bench --bench peers [--features simd]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput};
use mcpwire::Timestamp;
use mcpwire::conn::{Connection, Event};
use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::{
    Backend, Decoded, Decoder, DecoderConfig, Message, OwnedId, RawJson, encode_message,
};
use rmcp::model::{ClientJsonRpcMessage, NumberOrString, ServerJsonRpcMessage};

#[path = "common/conn.rs"]
mod conn_setup;
#[path = "corpus.rs"]
mod corpus;
use conn_setup::{answers, client_awaiting, client_config, correlate, handshaken_with, pipe};
use corpus::Corpus;

// ---- Counting allocator (this thread's live bytes; cheap enough to leave on) ---------------

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn account(delta: isize) {
    let _ = LIVE.try_with(|l| l.set(l.get() + delta));
}

struct Counting;

// Safety: forwards every call to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        // Safety: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-(layout.size() as isize));
        // Safety: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        account(new_size as isize - layout.size() as isize);
        // Safety: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.with(Cell::get)
}

// ---- Shared helpers -------------------------------------------------------------------------

/// The stream is fed to the line framer in reads of this size.
const CHUNK: usize = 64 * 1024;

fn throughput(corpus: &Corpus) -> Throughput {
    Throughput::ElementsAndBytes {
        elements: corpus.messages as u64,
        bytes: corpus.bytes.len() as u64,
    }
}

fn decoder(backend: Backend) -> Decoder {
    Decoder::new(DecoderConfig {
        backend,
        ..DecoderConfig::default()
    })
}

fn backend_label(backend: Backend) -> &'static str {
    match backend {
        Backend::Native => "mcpwire_native",
        #[cfg(feature = "simd")]
        Backend::Simd => "mcpwire_simd",
    }
}

/// Touches what a router reads (kind, id, method, payload length) so nothing is optimised
/// away.
fn weigh(m: &Message<'_>) -> usize {
    match m {
        Message::Request(r) => r.method.raw().len() + r.params.map_or(0, |p| p.get().len()),
        Message::Notification(n) => n.method.raw().len() + n.params.map_or(0, |p| p.get().len()),
        Message::Response(r) => r.result.get().len(),
        Message::Error(e) => e.error.message.raw().len() + e.error.code as usize,
    }
}

fn mcpwire_stream(lines: &mut LineDecoder, decoder: &mut Decoder, bytes: &[u8]) -> usize {
    let mut sum = 0usize;
    for chunk in bytes.chunks(CHUNK) {
        let mut input = chunk;
        while let Some(frame) = lines.next_frame(&mut input) {
            match decoder.decode(frame.expect("frame within the cap")) {
                Ok(Decoded::Single(m)) => sum = sum.wrapping_add(weigh(&m)),
                other => panic!("corpus frame: {other:?}"),
            }
        }
    }
    sum
}

/// The corpus lines and, for each, whether a server receives it (a request, parsed as
/// `ClientJsonRpcMessage`) or a client (everything else, as `ServerJsonRpcMessage`).
fn directions(corpus: &Corpus) -> Vec<bool> {
    let mut d = decoder(Backend::Native);
    corpus
        .lines()
        .map(|line| matches!(d.decode(line), Ok(Decoded::Single(Message::Request(_)))))
        .collect()
}

/// rmcp's typed parse of one line, by direction; returns something that depends on it.
#[inline]
fn rmcp_decode(line: &[u8], to_server: bool) -> usize {
    if to_server {
        let m: ClientJsonRpcMessage = serde_json::from_slice(line).expect("rmcp parses requests");
        black_box(&m);
        matches!(m, ClientJsonRpcMessage::Request(_)) as usize
    } else {
        let m: ServerJsonRpcMessage = serde_json::from_slice(line).expect("rmcp parses the rest");
        black_box(&m);
        matches!(m, ServerJsonRpcMessage::Response(_)) as usize
    }
}

/// Splits with memchr inside the timed loop, as a real reader has to.
#[inline]
fn for_each_line(bytes: &[u8], mut f: impl FnMut(usize, &[u8])) {
    let mut start = 0;
    for (i, nl) in memchr::memchr_iter(b'\n', bytes).enumerate() {
        f(i, &bytes[start..nl]);
        start = nl + 1;
    }
}

// ---- Checks ---------------------------------------------------------------------------------

fn check(name: &str, corpus: &Corpus, dirs: &[bool]) {
    assert_eq!(dirs.len(), corpus.messages);
    for &backend in Backend::ALL {
        let mut lines = LineDecoder::new();
        let mut d = decoder(backend);
        mcpwire_stream(&mut lines, &mut d, &corpus.bytes);
    }
    let mut failures = 0;
    for (line, &to_server) in corpus.lines().zip(dirs) {
        let ok = if to_server {
            serde_json::from_slice::<ClientJsonRpcMessage>(line).is_ok()
        } else {
            serde_json::from_slice::<ServerJsonRpcMessage>(line).is_ok()
        };
        if !ok && failures < 3 {
            eprintln!(
                "{name}: rmcp rejects {}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            );
        }
        failures += usize::from(!ok);
        serde_json::from_slice::<serde_json::Value>(line).expect("serde_json parses the corpus");
    }
    assert_eq!(failures, 0, "{name}: rmcp rejected {failures} corpus lines");
}

// ---- Decode ---------------------------------------------------------------------------------

fn bench_decode(c: &mut Criterion, name: &str, corpus: &Corpus, dirs: &[bool]) {
    let bytes = &corpus.bytes[..];
    let mut group = c.benchmark_group(format!("peers_decode_{name}"));
    group.throughput(throughput(corpus));
    for &backend in Backend::ALL {
        let mut lines = LineDecoder::new();
        let mut d = decoder(backend);
        group.bench_function(backend_label(backend), |b| {
            b.iter(|| black_box(mcpwire_stream(&mut lines, &mut d, black_box(bytes))))
        });
    }
    group.bench_function("rmcp", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for_each_line(black_box(bytes), |i, line| n += rmcp_decode(line, dirs[i]));
            black_box(n)
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for_each_line(black_box(bytes), |_, line| {
                let v: serde_json::Value = serde_json::from_slice(line).unwrap();
                n += v.as_object().map_or(0, |o| o.len());
                black_box(v);
            });
            black_box(n)
        })
    });
    group.bench_function("memchr_lines", |b| {
        b.iter(|| black_box(memchr::memchr_iter(b'\n', black_box(bytes)).count()))
    });
    group.finish();
}

// ---- Encode ---------------------------------------------------------------------------------

enum Typed {
    ToServer(ClientJsonRpcMessage),
    ToClient(ServerJsonRpcMessage),
}

fn bench_encode(c: &mut Criterion, name: &str, corpus: &Corpus, dirs: &[bool]) {
    let mut d = decoder(Backend::Native);
    let views: Vec<Message<'_>> = corpus
        .lines()
        .map(|line| match d.decode(line) {
            Ok(Decoded::Single(m)) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    let typed: Vec<Typed> = corpus
        .lines()
        .zip(dirs)
        .map(|(line, &to_server)| {
            if to_server {
                Typed::ToServer(serde_json::from_slice(line).unwrap())
            } else {
                Typed::ToClient(serde_json::from_slice(line).unwrap())
            }
        })
        .collect();
    let values: Vec<serde_json::Value> = corpus
        .lines()
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect();

    let mut out = Vec::with_capacity(corpus.bytes.len() * 2);
    let ours = |out: &mut Vec<u8>| {
        for m in &views {
            encode_message(out, m);
            out.push(b'\n');
        }
    };
    ours(&mut out);
    assert!(out == corpus.bytes, "{name}: mcpwire re-encoding differs");

    let mut group = c.benchmark_group(format!("peers_encode_{name}"));
    group.throughput(throughput(corpus));
    group.bench_function("mcpwire", |b| {
        b.iter(|| {
            out.clear();
            ours(&mut out);
            black_box(out.len())
        })
    });
    group.bench_function("rmcp", |b| {
        b.iter(|| {
            out.clear();
            for m in black_box(&typed) {
                match m {
                    Typed::ToServer(m) => serde_json::to_writer(&mut out, m).unwrap(),
                    Typed::ToClient(m) => serde_json::to_writer(&mut out, m).unwrap(),
                }
                out.push(b'\n');
            }
            black_box(out.len())
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            out.clear();
            for v in black_box(&values) {
                serde_json::to_writer(&mut out, v).unwrap();
                out.push(b'\n');
            }
            black_box(out.len())
        })
    });
    group.finish();
}

// ---- Round trip -----------------------------------------------------------------------------

const PARAMS: &str =
    r#"{"name":"get_weather","arguments":{"location":"New York","units":"metric"}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"Sunny, 21 C"}],"isError":false}"#;
/// Round trips per timed iteration.
const BATCH: usize = 100;

/// The mcpwire round trip: `BATCH` requests, each answered and correlated before the next.
/// Time moves 1 ms per round trip and `handle_timeout` runs when the deadline passes, as in a
/// run loop. Returns the wire bytes moved.
struct OurPair {
    client: Connection,
    server: Connection,
    now: Timestamp,
    buf: Vec<u8>,
}

impl OurPair {
    fn round_trips(&mut self, params: RawJson<'_>, result: RawJson<'_>, n: usize) -> usize {
        let mut bytes = 0;
        for _ in 0..n {
            let now = self.now;
            let id = self
                .client
                .request(now, "tools/call", Some(params))
                .expect("request");
            bytes += pipe(&mut self.client, &mut self.server, &mut self.buf, now);
            let Some(Event::Request { id: peer, .. }) = self.server.poll_event() else {
                panic!("the server saw no request");
            };
            let peer = OwnedId::from(peer);
            self.server.respond(peer.as_id(), result).expect("respond");
            bytes += pipe(&mut self.server, &mut self.client, &mut self.buf, now);
            let Some(Event::Response { request, .. }) = self.client.poll_event() else {
                panic!("the client saw no response");
            };
            assert_eq!(request, id);
            self.now = now.after(Duration::from_millis(1));
            for conn in [&mut self.client, &mut self.server] {
                if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                    conn.handle_timeout(self.now);
                }
            }
        }
        bytes
    }
}

// The typed round trip's types: what an application would declare.
#[derive(serde::Serialize, serde::Deserialize)]
struct Args<'a> {
    #[serde(borrow)]
    location: &'a str,
    #[serde(borrow)]
    units: &'a str,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(borrow)]
    arguments: Args<'a>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct TextContent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    text: &'a str,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CallResult<'a> {
    #[serde(borrow)]
    content: Vec<TextContent<'a>>,
    #[serde(rename = "isError")]
    is_error: bool,
}

impl OurPair {
    /// [`round_trips`](Self::round_trips) with typed params and results on both ends.
    fn typed_round_trips(&mut self, n: usize) -> usize {
        let params = CallParams {
            name: "get_weather",
            arguments: Args {
                location: "New York",
                units: "metric",
            },
        };
        let result = CallResult {
            content: vec![TextContent {
                kind: "text",
                text: "Sunny, 21 C",
            }],
            is_error: false,
        };
        let mut bytes = 0;
        for _ in 0..n {
            let now = self.now;
            let id = self
                .client
                .request_typed(now, "tools/call", &params, Default::default())
                .expect("request");
            bytes += pipe(&mut self.client, &mut self.server, &mut self.buf, now);
            let peer = {
                let Some(Event::Request {
                    id: peer,
                    params: Some(p),
                    ..
                }) = self.server.poll_event()
                else {
                    panic!("the server saw no request");
                };
                let call: CallParams<'_> = p.parse().expect("params");
                black_box(&call);
                OwnedId::from(peer)
            };
            self.server
                .respond_typed(peer.as_id(), &result)
                .expect("respond");
            bytes += pipe(&mut self.server, &mut self.client, &mut self.buf, now);
            let Some(Event::Response { request, result }) = self.client.poll_event() else {
                panic!("the client saw no response");
            };
            let parsed: CallResult<'_> = result.parse().expect("result");
            black_box(&parsed);
            assert_eq!(request, id);
            self.now = now.after(Duration::from_millis(1));
            for conn in [&mut self.client, &mut self.server] {
                if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                    conn.handle_timeout(self.now);
                }
            }
        }
        bytes
    }
}

/// The same round trip with rmcp's typed messages and serde_json (no transport, no tasks:
/// only the protocol layer): the client serializes a typed request, the server parses it as a
/// `ClientJsonRpcMessage`, serializes a typed response, the client parses it as a
/// `ServerJsonRpcMessage` and correlates its id in a map of requests in flight.
struct RmcpPair {
    request: ClientJsonRpcMessage,
    result: rmcp::model::ServerResult,
    pending: HashMap<NumberOrString, ()>,
    next_id: i64,
    wire: Vec<u8>,
}

impl RmcpPair {
    fn new() -> RmcpPair {
        let request =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{PARAMS}}}"#);
        let response = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{RESULT}}}"#);
        let response: ServerJsonRpcMessage = serde_json::from_str(&response).unwrap();
        let (result, _) = response.into_response().expect("a response");
        RmcpPair {
            request: serde_json::from_str(&request).unwrap(),
            result,
            pending: HashMap::new(),
            next_id: 1,
            wire: Vec::with_capacity(4096),
        }
    }

    fn round_trips(&mut self, n: usize) -> usize {
        let mut bytes = 0;
        for _ in 0..n {
            // Client: a new id, the typed request, serialized.
            let id = NumberOrString::Number(self.next_id);
            self.next_id += 1;
            if let ClientJsonRpcMessage::Request(r) = &mut self.request {
                r.id = id.clone();
            }
            self.pending.insert(id, ());
            self.wire.clear();
            serde_json::to_writer(&mut self.wire, &self.request).unwrap();
            self.wire.push(b'\n');
            bytes += self.wire.len();
            // Server: parse, answer.
            let line = &self.wire[..self.wire.len() - 1];
            let incoming: ClientJsonRpcMessage = serde_json::from_slice(line).unwrap();
            let (request, id) = incoming.into_request().expect("a request");
            black_box(&request);
            let answer = ServerJsonRpcMessage::response(self.result.clone(), id);
            self.wire.clear();
            serde_json::to_writer(&mut self.wire, &answer).unwrap();
            self.wire.push(b'\n');
            bytes += self.wire.len();
            // Client: parse, correlate.
            let line = &self.wire[..self.wire.len() - 1];
            let incoming: ServerJsonRpcMessage = serde_json::from_slice(line).unwrap();
            let (result, id) = incoming.into_response().expect("a response");
            black_box(&result);
            assert!(self.pending.remove(&id).is_some(), "uncorrelated response");
        }
        bytes
    }
}

fn bench_roundtrip(c: &mut Criterion) {
    let params = RawJson::new(PARAMS).unwrap();
    let result = RawJson::new(RESULT).unwrap();
    let (client, server) = handshaken_with(client_config());
    let mut ours = OurPair {
        client,
        server,
        now: Timestamp::ZERO,
        buf: Vec::with_capacity(4096),
    };
    let mut theirs = RmcpPair::new();
    // Wire bytes per batch, for the byte throughput (ids grow, so take the average of a batch).
    let our_bytes = ours.round_trips(params, result, BATCH) as u64;
    let their_bytes = theirs.round_trips(BATCH) as u64;
    println!(
        "round trip: {:.0} B per round trip on the wire (mcpwire), {:.0} B (rmcp)",
        our_bytes as f64 / BATCH as f64,
        their_bytes as f64 / BATCH as f64
    );

    let mut group = c.benchmark_group("peers_roundtrip");
    group.throughput(Throughput::ElementsAndBytes {
        elements: 2 * BATCH as u64,
        bytes: our_bytes,
    });
    group.bench_function("mcpwire", |b| {
        b.iter(|| black_box(ours.round_trips(params, result, BATCH)))
    });
    group.throughput(Throughput::ElementsAndBytes {
        elements: 2 * BATCH as u64,
        bytes: their_bytes,
    });
    group.bench_function("rmcp", |b| b.iter(|| black_box(theirs.round_trips(BATCH))));
    group.finish();

    // Typed on both ends: what a Rust application coming from rmcp writes.
    let (client, server) = handshaken_with(client_config());
    let mut typed = OurPair {
        client,
        server,
        now: Timestamp::ZERO,
        buf: Vec::with_capacity(4096),
    };
    let typed_bytes = typed.typed_round_trips(BATCH) as u64;
    let mut group = c.benchmark_group("peers_roundtrip_typed");
    group.throughput(Throughput::ElementsAndBytes {
        elements: 2 * BATCH as u64,
        bytes: typed_bytes,
    });
    group.bench_function("mcpwire_typed", |b| {
        b.iter(|| black_box(typed.typed_round_trips(BATCH)))
    });
    group.throughput(Throughput::ElementsAndBytes {
        elements: 2 * BATCH as u64,
        bytes: their_bytes,
    });
    group.bench_function("rmcp", |b| b.iter(|| black_box(theirs.round_trips(BATCH))));
    group.finish();
}

// ---- Decode + correlate ---------------------------------------------------------------------

/// rmcp's typed parse of each answer, correlated by id in a map of requests in flight.
fn rmcp_correlate(pending: &mut HashMap<NumberOrString, ()>, stream: &[u8]) -> usize {
    let mut answered = 0;
    for_each_line(stream, |_, line| {
        let m: ServerJsonRpcMessage = serde_json::from_slice(line).expect("rmcp parses answers");
        let id = match m {
            ServerJsonRpcMessage::Response(r) => {
                black_box(&r.result);
                r.id
            }
            ServerJsonRpcMessage::Error(e) => {
                black_box(&e.error);
                e.id.expect("answers carry ids")
            }
            _ => panic!("not an answer"),
        };
        answered += usize::from(pending.remove(&id).is_some());
    });
    answered
}

/// Decode + correlate: what a client does with its answers. The corpus's results and errors
/// (re-addressed to the client's ids) are fed to a handshaken client with that many requests
/// in flight, which decodes each, matches it to its request and hands out the event. Against
/// mcpwire's bare decode of the same stream (`bare_decode`), and rmcp's typed parse plus a
/// `HashMap` lookup.
/// Setting up the requests in flight is not timed.
fn bench_correlate(c: &mut Criterion, name: &str, corpus: &Corpus) {
    let (_, first) = client_awaiting(1);
    let (stream, n) = answers(corpus.lines(), first);
    {
        let (mut client, first_again) = client_awaiting(n);
        assert_eq!(first_again, first);
        assert_eq!(
            correlate(&mut client, &stream),
            n,
            "every answer correlated"
        );
        assert_eq!(client.requests_in_flight(), 0);
        let mut pending = (0..n)
            .map(|k| (NumberOrString::Number(first + k as i64), ()))
            .collect::<HashMap<_, _>>();
        assert_eq!(rmcp_correlate(&mut pending, &stream), n);
    }
    let mut group = c.benchmark_group(format!("peers_correlate_{name}"));
    group.throughput(Throughput::ElementsAndBytes {
        elements: n as u64,
        bytes: stream.len() as u64,
    });
    group.bench_function("mcpwire", |b| {
        b.iter_batched(
            || client_awaiting(n).0,
            |mut client| black_box(correlate(&mut client, &stream)),
            BatchSize::LargeInput,
        )
    });
    let mut lines = LineDecoder::new();
    let mut d = decoder(Backend::Native);
    group.bench_function("bare_decode", |b| {
        b.iter(|| black_box(mcpwire_stream(&mut lines, &mut d, &stream)))
    });
    group.bench_function("rmcp", |b| {
        b.iter_batched(
            || {
                (0..n)
                    .map(|k| (NumberOrString::Number(first + k as i64), ()))
                    .collect::<HashMap<_, _>>()
            },
            |mut pending| black_box(rmcp_correlate(&mut pending, &stream)),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

// ---- Memory ---------------------------------------------------------------------------------

/// Prints what an idle connection and each request in flight cost (inline size plus heap).
fn report_memory() {
    let inline = std::mem::size_of::<Connection>();
    // Idle, after the handshake, every poll drained: heap measured from before the configs.
    let before = live();
    let (client, server) = handshaken_with(client_config());
    let both = live() - before;
    drop(server);
    let client_heap = live() - before;
    drop(client);
    let server_heap = both - client_heap;
    println!(
        "memory: idle client {} B ({inline} inline + {client_heap} heap), idle server {} B ({inline} inline + {server_heap} heap)",
        inline as isize + client_heap,
        inline as isize + server_heap,
    );

    // Requests in flight: 1000 of ours (output written), and 200 of the peer's held by the
    // server (events polled, not answered).
    let (mut client, mut server) = handshaken_with(client_config());
    let mut buf = Vec::with_capacity(1 << 20);
    let now = Timestamp::ZERO;
    let params = RawJson::new(PARAMS).unwrap();
    let before = live();
    for _ in 0..1000 {
        client.request(now, "tools/call", Some(params)).unwrap();
        while let Some(t) = client.poll_transmit() {
            buf.extend_from_slice(t.bytes);
            let n = t.bytes.len();
            client.consume_transmit(n);
        }
    }
    let ours = (live() - before) as f64 / 1000.0;
    let mut first = Vec::new();
    for line in buf.split(|&b| b == b'\n').take(200) {
        first.extend_from_slice(line);
        first.push(b'\n');
    }
    let before = live();
    server.handle_input(now, &first);
    while server.poll_event().is_some() {}
    let peers = (live() - before) as f64 / 200.0;
    assert_eq!(server.peer_requests_in_flight(), 200);
    println!(
        "memory: {ours:.0} B per request of ours in flight (client), {peers:.0} B per peer request held (server)"
    );
}

// ---- Main -----------------------------------------------------------------------------------

fn main() {
    let mixed = corpus::mixed();
    let small = corpus::small();
    let tools = corpus::tools();
    let mixed_dirs = directions(&mixed);
    let small_dirs = directions(&small);
    let tools_dirs = directions(&tools);
    check("mixed", &mixed, &mixed_dirs);
    check("small", &small, &small_dirs);
    check("tools", &tools, &tools_dirs);
    report_memory();

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    bench_decode(&mut c, "mixed", &mixed, &mixed_dirs);
    bench_decode(&mut c, "small", &small, &small_dirs);
    bench_decode(&mut c, "tools", &tools, &tools_dirs);
    bench_encode(&mut c, "mixed", &mixed, &mixed_dirs);
    bench_encode(&mut c, "small", &small, &small_dirs);
    bench_roundtrip(&mut c);
    bench_correlate(&mut c, "mixed", &mixed);
    bench_correlate(&mut c, "small", &small);
    bench_correlate(&mut c, "tools", &tools);

    c.final_summary();
}
