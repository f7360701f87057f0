//! The bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*.rs` (each includes this file
//! with `#[path = "../../tests/fuzz_logic/mod.rs"] mod logic;`) and by `tests/fuzz_replay.rs`,
//! which replays every checked-in corpus file through them on stable Rust.
//!
//! Every target turns arbitrary bytes into calls on the library and panics when an invariant
//! breaks; the invariants are listed on each target. Choices the bytes do not spell out
//! directly (chunk sizes, time steps, how an answer is given) come from a small PRNG seeded by
//! a few header bytes, so a given input always replays the same way.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::conn::{
    ClientEra, Config, Connection, Error as ConnError, Event, Limits, ProgressPolicy, RequestId,
    RequestOptions, Role, State,
};
use mcpwire::frame::line::{FrameError, LineDecoder, TOO_LONG_HEAD};
use mcpwire::jsonrpc::{
    Backend, Decoded, Decoder, DecoderConfig, Id, JsonStr, Message, OwnedId, RawJson, Reason,
    encode_message,
};
use mcpwire::mcp::{LogLevel, ProtocolVersion};

pub mod c_abi;
pub mod c_abi_http;
pub mod c_abi_listen;
pub mod c_abi_serve;
pub mod c_abi_tasks;
pub mod http_client;
pub mod http_server;
pub mod sse_framer;
pub mod tasks;

pub use c_abi::c_abi;
pub use http_client::http_client;
pub use http_server::http_server;
pub use sse_framer::sse_framer;
pub use tasks::tasks;

/// A target's body: takes the fuzzer's bytes, panics when an invariant breaks.
pub type TargetFn = fn(&[u8]);

/// Every target, by the name of its directory under `fuzz/corpus/`.
pub const TARGETS: &[(&str, TargetFn)] = &[
    ("line_framer", line_framer),
    ("decode", decode),
    ("conn_server", conn_server),
    ("conn_client", conn_client),
    ("api_sequence", api_sequence),
    ("chunking", chunking),
    ("sse_framer", sse_framer),
    ("c_abi", c_abi),
    ("http_server", http_server),
    ("http_client", http_client),
    ("tasks", tasks),
];

/// Header bytes in front of the stream, per target (the seed generator writes them).
pub const LINE_FRAMER_HEADER: usize = 2;
pub const CONN_HEADER: usize = 4;
pub const CHUNKING_HEADER: usize = 2;

/// splitmix64: small, fast, and the same everywhere, so inputs replay exactly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6d63_7077_6972_6566)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

fn seed_of(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Splits `stream` into chunks whose sizes the PRNG picks (empty chunks included), at most
/// `max` bytes each.
fn chunks<'s>(rng: &mut Rng, stream: &'s [u8], max: usize) -> Vec<&'s [u8]> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let n = match rng.below(8) {
            0 => 0,
            1 => 1,
            2 => rest.len(),
            _ => rng.below(max.max(1)) + 1,
        };
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        out.push(chunk);
        rest = tail;
    }
    out
}

// ---- line_framer -----------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
enum Framed {
    Frame(Vec<u8>),
    /// An over-long line, with what `too_long_head` kept of it.
    TooLong(Vec<u8>),
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// What the framer must produce, computed line by line the obvious way, whatever the
/// chunking: each line (the last one may lack its `\n`) loses one trailing `\r`; longer than
/// the cap, it is one `TooLong` whose head is its first `min(cap, TOO_LONG_HEAD)` bytes;
/// blank, it is skipped; otherwise it is a frame.
fn reference_frames(stream: &[u8], cap: usize) -> Vec<Framed> {
    let mut out = Vec::new();
    for line in stream.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > cap {
            out.push(Framed::TooLong(line[..cap.min(TOO_LONG_HEAD)].to_vec()));
        } else if !is_blank(line) {
            out.push(Framed::Frame(line.to_vec()));
        }
    }
    out
}

/// `LineDecoder` with a small cap, fed the stream in arbitrary chunks.
///
/// Input: `[cap, seed, stream…]` (a cap byte under 128 gives caps 1 to 64; from 128 on, caps
/// 200 to 327, around the over-long head's own bound). Invariants: `buffered()` never exceeds
/// the cap; no frame is longer than the cap or holds a newline; all input is consumed; the
/// frames and errors are exactly those of the whole stream split line by line (so chunking
/// changes nothing), each error's `too_long_head` the line's first bytes.
pub fn line_framer(data: &[u8]) {
    let Some((header, stream)) = data.split_first_chunk::<LINE_FRAMER_HEADER>() else {
        return;
    };
    let cap = if header[0] < 128 {
        1 + usize::from(header[0] % 64)
    } else {
        200 + usize::from(header[0] - 128)
    };
    let mut rng = Rng::new(u64::from(header[1]));
    let mut framer = LineDecoder::with_max_frame(cap);
    let mut seen = Vec::new();
    for chunk in chunks(&mut rng, stream, 2 * cap + 2) {
        let mut input = chunk;
        while let Some(item) = framer.next_frame(&mut input) {
            match item {
                Ok(frame) => {
                    assert!(frame.len() <= cap, "frame of {} > cap {cap}", frame.len());
                    assert!(!frame.contains(&b'\n'));
                    seen.push(Framed::Frame(frame.to_vec()));
                }
                Err(FrameError::TooLong { limit }) => {
                    assert_eq!(limit, cap);
                    seen.push(Framed::TooLong(framer.too_long_head().to_vec()));
                }
                Err(e) => panic!("unexpected frame error {e:?}"),
            }
            assert!(
                framer.buffered() <= cap + 1,
                "buffered {}",
                framer.buffered()
            );
        }
        assert!(input.is_empty(), "next_frame returned None with input left");
        assert!(
            framer.buffered() <= cap + 1,
            "buffered {}",
            framer.buffered()
        );
    }
    if let Some(last) = framer.finish() {
        seen.push(Framed::Frame(last.to_vec()));
    }
    assert_eq!(framer.buffered(), 0);
    assert_eq!(seen, reference_frames(stream, cap), "cap {cap}");
}

// ---- decode ----------------------------------------------------------------------------------

/// The Debug rendering of a decoded view with whitespace line breaks as spaces: what the
/// encoder promises to preserve (strings can't hold raw line breaks, so only whitespace in
/// raw payloads is affected).
fn flat_debug(m: &Message<'_>) -> String {
    format!("{m:?}").replace(['\n', '\r'], " ")
}

/// `Decoder::decode` with every backend.
///
/// Input: one frame. Invariants: all backends agree exactly (the same `Ok` views or the same
/// error kind, reason, offset and id, compared through `Debug`); every decoded message
/// re-encodes to one line that decodes to an equal message. Built with debug assertions (as
/// `cargo fuzz` builds by default), the native backend validates every object and array with
/// the two-stage validator and asserts that the one-pass validator gives the same answer.
pub fn decode(data: &[u8]) {
    let mut results = Vec::new();
    for &backend in Backend::ALL {
        let mut decoder = Decoder::new(DecoderConfig {
            backend,
            ..DecoderConfig::default()
        });
        let decoded = decoder.decode(data);
        if let Err(e) = &decoded {
            assert!(matches!(e.code(), -32700 | -32600));
            assert!(
                e.offset() <= data.len(),
                "offset {} past the end",
                e.offset()
            );
        }
        results.push((backend, format!("{decoded:?}")));
        let messages: Vec<Message<'_>> = match decoded {
            Ok(Decoded::Single(m)) => vec![m],
            Ok(Decoded::Batch(members)) => {
                assert!(!members.is_empty());
                members.into_iter().filter_map(Result::ok).collect()
            }
            Err(_) => Vec::new(),
        };
        let mut out = Vec::new();
        for m in &messages {
            out.clear();
            encode_message(&mut out, m);
            assert!(
                !out.contains(&b'\n') && !out.contains(&b'\r'),
                "line break in {:?}",
                String::from_utf8_lossy(&out)
            );
            match decoder.decode(&out) {
                Ok(Decoded::Single(again)) => assert_eq!(
                    flat_debug(&again),
                    flat_debug(m),
                    "re-encoded as {:?}",
                    String::from_utf8_lossy(&out)
                ),
                other => panic!(
                    "{backend:?}: {m:?} re-encoded as {:?}, which decodes to {other:?}",
                    String::from_utf8_lossy(&out)
                ),
            }
        }
    }
    let (first, expected) = &results[0];
    for (backend, got) in &results[1..] {
        assert_eq!(got, expected, "{backend:?} disagrees with {first:?}");
    }
    grammar_agrees_with_serde_json(data);
    if let Ok(text) = std::str::from_utf8(data) {
        object_each_agrees(text);
    }
}

/// The grammar verdict against independent references, since the backends share the envelope
/// walk and a native verdict stands for simd-json's refusals: a frame decoded is UTF-8 (as
/// the standard library judges it) and JSON (as serde_json parses it), and a frame refused
/// for its JSON (not its depth or its envelope) is not JSON to serde_json either.
fn grammar_agrees_with_serde_json(data: &[u8]) {
    let verdict = Decoder::new(DecoderConfig::default()).decode(data);
    let serde = serde_json::from_slice::<serde_json::Value>(data);
    // serde_json's own limits, not JSON's: 128 levels (as deep as the decoder's default
    // goes), and numbers a double cannot hold (`1e400` is JSON).
    let beyond_serde = serde.as_ref().is_err_and(|e| {
        let e = e.to_string();
        e.contains("recursion limit") || e.contains("number out of range")
    });
    match &verdict {
        Ok(_) => {
            assert!(std::str::from_utf8(data).is_ok(), "decoded, but not UTF-8");
            assert!(
                serde.is_ok() || beyond_serde,
                "decoded, but serde_json refuses it: {serde:?}"
            );
        }
        Err(e) if e.code() == -32700 && e.reason() != Reason::TooDeep => {
            assert!(
                serde.is_err(),
                "refused as {:?}, but serde_json parses it",
                e.reason()
            );
        }
        Err(_) => {}
    }
}

/// `RawJson::object_each_into` (validation and lookup in one walk) accepts exactly the JSON
/// objects that `RawJson::new` accepts, and finds what `get_each_into` finds in them.
pub fn object_each_agrees(text: &str) {
    const KEYS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "a"];
    let mut fused = [None; 6];
    let got = RawJson::object_each_into(text, &KEYS, &mut fused);
    let want = RawJson::new(text)
        .ok()
        .filter(RawJson::is_object)
        .map(|raw| {
            let mut values = [None; 6];
            (raw.get_each_into(&KEYS, &mut values), values)
        });
    let view = |v: [Option<RawJson<'_>>; 6]| v.map(|v| v.map(|r| r.get().to_owned()));
    match (got, want) {
        (None, None) => {}
        (Some(mask), Some((want_mask, values))) => {
            assert_eq!(mask, want_mask, "duplicate mask of {text:?}");
            assert_eq!(view(fused), view(values), "values of {text:?}");
        }
        (got, want) => panic!("{text:?}: one walk says {got:?}, two walks {want:?}"),
    }
}

// ---- Connections: shared pieces --------------------------------------------------------------

const CLIENT_CAPS: &str = r#"{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}"#;
const SERVER_CAPS: &str = r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"logging":{},"completions":{}}"#;
/// [`SERVER_CAPS`] with 2025-11-25 tasks for `tools/call` (api_sequence's server).
const SERVER_CAPS_TASKS: &str = r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"logging":{},"completions":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}"#;
/// A 2025-11-25 task handle, as a server answers a task-augmented request.
const TASK_HANDLE: &str = r#"{"task":{"taskId":"t-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}}"#;

fn versions_for(choice: u8) -> Vec<ProtocolVersion> {
    match choice % 6 {
        0 | 1 => ProtocolVersion::ALL.to_vec(),
        2 => ProtocolVersion::LEGACY.to_vec(),
        3 => vec![ProtocolVersion::V2026_07_28],
        4 => vec![ProtocolVersion::V2025_03_26],
        _ => vec![ProtocolVersion::V2024_11_05, ProtocolVersion::V2026_07_28],
    }
}

/// Small bounds, so that the targets reach them.
fn small_limits() -> Limits {
    Limits {
        max_frame: 2048,
        max_outbound_in_flight: 4,
        max_inbound_in_flight: 3,
        max_buffered_output: 8192,
        max_remembered_ids: 4,
        max_queued_events: 16,
    }
}

/// A configuration picked by one byte: era, bounds, strictness. The seed generator uses it
/// too, so recorded transcripts replay against the same configuration.
pub fn config(role: Role, choice: u8) -> Config {
    let mut c = match role {
        Role::Client => Config::client("fuzz-client", "1.0")
            .with_capabilities(CLIENT_CAPS)
            .expect("valid capabilities"),
        Role::Server => Config::server("fuzz-server", "1.0")
            .with_capabilities(SERVER_CAPS)
            .expect("valid capabilities"),
    };
    c.versions = versions_for(choice);
    c.client_era = match (choice >> 3) % 3 {
        0 => ClientEra::Auto,
        1 => ClientEra::Legacy,
        _ => ClientEra::Modern,
    };
    if choice & 0x20 != 0 {
        c.limits = small_limits();
    }
    c.policy.strict_lifecycle = choice & 0x40 == 0;
    if choice & 0x80 != 0 {
        c.policy.progress = ProgressPolicy::DeliverAll;
        c.policy.reset_timeout_on_progress = true;
    }
    c.request_timeout = Duration::from_secs(30);
    c.max_total_timeout = Duration::from_secs(120);
    c
}

/// One request the peer sent us, kept for answering.
struct PeerRequest {
    id: OwnedId,
    method: String,
}

/// What an engine produced, checked as it is drained.
#[derive(Default)]
struct Watch {
    closed: bool,
    peer_requests: Vec<PeerRequest>,
    /// Events, rendered, in order (for comparisons).
    log: Vec<String>,
    /// Our requests' ids by how they ended.
    resolved: Vec<(RequestId, &'static str)>,
    /// Input-required requests that may be retried.
    retryable: Vec<RequestId>,
    /// Progress reports on our requests: the request, the value, and how many entries of
    /// `resolved` came before it.
    progress: Vec<(RequestId, f64, usize)>,
    /// The peer's requests it cancelled (`PeerCancelled`), in order.
    peer_cancelled: Vec<OwnedId>,
    /// What the connection wrote, not yet a whole line.
    output: Vec<u8>,
}

impl Watch {
    /// Drains every event of `conn`, checking that nothing follows `Closed`.
    fn drain(&mut self, conn: &mut Connection) {
        while let Some(event) = conn.poll_event() {
            assert!(!self.closed, "event after Closed: {event:?}");
            self.log.push(format!("{event:?}"));
            match event {
                Event::Closed { .. } => self.closed = true,
                Event::Request { id, method, .. } => self.peer_requests.push(PeerRequest {
                    id: OwnedId::from(id),
                    method: method.to_str().into_owned(),
                }),
                Event::Response { request, .. } => self.resolved.push((request, "response")),
                Event::Error { request, .. } => self.resolved.push((request, "error")),
                Event::TimedOut { request } => self.resolved.push((request, "timed out")),
                Event::Abandoned { request } => self.resolved.push((request, "abandoned")),
                Event::InvalidResponse { request } => self.resolved.push((request, "invalid")),
                Event::TaskCreated { request, .. } => self.resolved.push((request, "task created")),
                Event::InputRequired { request, .. } => {
                    self.resolved.push((request, "input required"));
                    self.retryable.push(request);
                }
                Event::Progress {
                    request, progress, ..
                } if self.progress.len() < 4096 => {
                    self.progress.push((request, progress, self.resolved.len()));
                }
                Event::PeerCancelled { id, .. } if self.peer_cancelled.len() < 4096 => {
                    self.peer_cancelled.push(OwnedId::from(id));
                }
                _ => {}
            }
        }
        if self.closed {
            assert_eq!(conn.state(), State::Closed);
            assert_eq!(
                conn.poll_timeout(),
                None,
                "a closed connection has no deadline"
            );
        }
    }
}

/// Checks the bounds every connection keeps, whatever the peer does.
fn check_bounds(conn: &Connection, limits: &Limits) {
    assert!(
        conn.requests_in_flight() <= limits.max_outbound_in_flight,
        "{} of our requests in flight, limit {}",
        conn.requests_in_flight(),
        limits.max_outbound_in_flight
    );
    assert!(
        conn.peer_requests_in_flight() <= limits.max_inbound_in_flight,
        "{} peer requests in flight, limit {}",
        conn.peer_requests_in_flight(),
        limits.max_inbound_in_flight
    );
}

/// Answers one peer request in a way the PRNG picks. Refusals (`Err`) are fine: the point is
/// that every path runs.
/// Answers one of the peer's requests (reporting progress and logging on it first, now and
/// then), checking that every refusal is one the docs name for the case at hand. `cancelled`:
/// the peer cancelled it already (answers are taken and dropped; progress and logs refused).
fn answer(conn: &mut Connection, rng: &mut Rng, request: &PeerRequest, cancelled: bool) {
    let id = request.id.as_id();
    let version = conn.protocol_version();
    let client = conn.role() == Role::Client;
    let modern = conn.request_context(id).is_some();
    // A server before `initialize` (under a lax lifecycle) takes requests but sends nothing new.
    let era_unknown = conn.era().is_none();
    if rng.one_in(6) {
        let r = conn.progress(id, rng.below(100) as f64, Some(100.0), Some("working"));
        refused_as_documented("progress", request, r, |e| match e {
            ConnError::NoProgressToken => true,
            ConnError::NotInitialized => era_unknown,
            ConnError::UnknownRequest => cancelled,
            _ => false,
        });
    }
    if rng.one_in(8) {
        let r = conn.log(id, LogLevel::Info, Some("fuzz"), json(r#"{"msg":"hi"}"#));
        refused_as_documented("log", request, r, |e| match e {
            ConnError::WrongDirection => client,
            ConnError::NotNegotiated(_) => !client,
            ConnError::NotInitialized => era_unknown,
            ConnError::UnknownRequest => cancelled,
            _ => false,
        });
    }
    let eligible = matches!(
        request.method.as_str(),
        "tools/call" | "prompts/get" | "resources/read"
    );
    // The first try may be refused only for what its docs name; the fallback (a plain result
    // or -32603, valid for every request in every version) only for a full or closed output.
    let first = match rng.below(8) {
        7 if eligible => {
            let r = conn.respond_input_required(
                id,
                Some(json(r#"{"a":{"method":"roots/list"}}"#)),
                Some("state-1"),
            );
            refused_as_documented("input required", request, r, |e| match e {
                ConnError::NotNegotiated(_) => modern,
                ConnError::NotInVersion => !modern,
                _ => false,
            })
        }
        0..=3 => refused_as_documented("respond", request, conn.respond(id, json("{}")), |_| false),
        4 => {
            let text = r#"{"content":[{"type":"text","text":"ok"}]}"#;
            refused_as_documented("respond", request, conn.respond(id, json(text)), |_| false)
        }
        5 => {
            let r = conn.respond_error(id, -32603, "internal", None);
            refused_as_documented("respond_error", request, r, |_| false)
        }
        6 => {
            let data = r#"{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://example.com/e","message":"sign in"}]}"#;
            let r = conn.respond_error(id, -32042, "url elicitation required", Some(json(data)));
            // Before a version is negotiated (a lax lifecycle), by the version the engine
            // would speak; -32042 goes out as `respond_url_elicitation_required` writes it.
            let v2025 = version == Some(ProtocolVersion::V2025_11_25);
            refused_as_documented("-32042", request, r, |e| match e {
                ConnError::CodeNotInVersion => !v2025,
                ConnError::NotNegotiated(_) => v2025 || version.is_none(),
                ConnError::NotInVersion => version.is_none(),
                _ => false,
            })
        }
        _ => {
            let r = conn.respond_input_required(id, None, Some("s"));
            refused_as_documented("input required", request, r, |e| match e {
                ConnError::NotEligible => modern && !eligible,
                ConnError::NotInVersion => !modern,
                _ => false,
            })
        }
    };
    if !first {
        let r = if rng.one_in(2) {
            conn.respond(id, json("{}"))
        } else {
            conn.respond_error(id, -32603, "internal", None)
        };
        refused_as_documented("fallback answer", request, r, |_| false);
    }
}

/// Whether a command on a peer request went through; panics on a refusal that neither
/// `documented` allows nor every command may give (a full output, a closed connection).
fn refused_as_documented<T>(
    what: &str,
    request: &PeerRequest,
    result: Result<T, ConnError>,
    documented: impl Fn(ConnError) -> bool,
) -> bool {
    match result {
        Ok(_) => true,
        Err(ConnError::OutputFull | ConnError::Closed) => false,
        Err(e) => {
            assert!(
                documented(e),
                "{what} on {} {:?} refused with {e:?}",
                request.method,
                request.id
            );
            false
        }
    }
}

fn json(text: &str) -> RawJson<'_> {
    RawJson::new(text).expect("valid JSON")
}

/// Takes what `conn` wants to write, in partial writes of PRNG-picked sizes; sometimes stops
/// early (a peer that is slow to read). Returns what was taken.
fn take_output(conn: &mut Connection, rng: &mut Rng, out: &mut Vec<u8>) {
    if rng.one_in(8) {
        return;
    }
    for _ in 0..64 {
        let Some(t) = conn.poll_transmit() else {
            return;
        };
        assert!(!t.bytes.is_empty(), "poll_transmit lent no bytes");
        let n = match rng.below(4) {
            0 => 1 + rng.below(t.bytes.len()),
            _ => t.bytes.len(),
        };
        out.extend_from_slice(&t.bytes[..n]);
        conn.consume_transmit(n);
    }
}

/// Drains everything after a call: events (answering requests), output, the deadline.
fn pump(conn: &mut Connection, watch: &mut Watch, rng: &mut Rng, limits: &Limits) {
    loop {
        let before = watch.peer_requests.len();
        watch.drain(conn);
        let new: Vec<PeerRequest> = watch.peer_requests.drain(before..).collect();
        if new.is_empty() {
            break;
        }
        for request in &new {
            let cancelled = watch.peer_cancelled.contains(&request.id);
            answer(conn, rng, request, cancelled);
        }
        watch.peer_requests.extend(new);
    }
    check_bounds(conn, limits);
    take_output(conn, rng, &mut watch.output);
    // Each line written is one JSON-RPC message (or batch of them), whatever came in.
    while let Some(end) = watch.output.iter().position(|&b| b == b'\n') {
        c_abi::check_frame(&watch.output[..end]);
        watch.output.drain(..=end);
    }
    let _ = conn.poll_timeout();
}

// ---- conn_server / conn_client ---------------------------------------------------------------

/// A connection of `role` fed arbitrary bytes as if from its peer.
///
/// Input: `[config, seed×3, stream…]`. The stream goes in PRNG-sized chunks; between chunks
/// time advances by PRNG-picked steps (sometimes exactly to the deadline) with
/// `handle_timeout`; after every call every poll is drained, requests are answered in a
/// PRNG-picked way and output is consumed in partial writes. Invariants: no panic, nothing
/// after `Closed`, the in-flight tables within their limits, and EOF closes the connection.
/// Returns the events, rendered (the seed tests check that seeds get somewhere).
pub fn conn_bytes(role: Role, data: &[u8]) -> Vec<String> {
    let Some((header, stream)) = data.split_first_chunk::<CONN_HEADER>() else {
        return Vec::new();
    };
    let config = config(role, header[0]);
    let limits = config.limits;
    let mut rng = Rng::new(seed_of(&header[1..]));
    let mut now = Timestamp::ZERO;
    let mut conn = Connection::new(config, now).expect("valid config");
    let mut watch = Watch::default();
    pump(&mut conn, &mut watch, &mut rng, &limits);
    for chunk in chunks(&mut rng, stream, 300) {
        conn.handle_input(now, chunk);
        pump(&mut conn, &mut watch, &mut rng, &limits);
        let step = match rng.below(8) {
            0..=3 => None,
            4 => Some(Duration::from_millis(rng.below(1000) as u64)),
            5 => Some(Duration::from_secs(rng.below(200) as u64)),
            _ => conn.poll_timeout().map(|t| t.since(now)),
        };
        if let Some(step) = step {
            now = now.after(step);
            conn.handle_timeout(now);
            pump(&mut conn, &mut watch, &mut rng, &limits);
        }
    }
    conn.handle_eof(now);
    pump(&mut conn, &mut watch, &mut rng, &limits);
    if !watch.closed {
        // A last unterminated line had events: they were handed out (and answered) first,
        // and the end of input is due at once.
        assert_eq!(conn.poll_timeout(), Some(Timestamp::ZERO));
        conn.handle_timeout(now);
        pump(&mut conn, &mut watch, &mut rng, &limits);
    }
    assert!(watch.closed, "EOF must close the connection");
    assert_eq!(
        watch.log.iter().filter(|e| e.starts_with("Closed")).count(),
        1
    );
    assert_eq!(conn.requests_in_flight(), 0);
    assert_eq!(conn.peer_requests_in_flight(), 0);
    watch.log
}

/// A server connection fed arbitrary client bytes. See [`conn_bytes`].
pub fn conn_server(data: &[u8]) {
    conn_bytes(Role::Server, data);
}

/// A client connection fed arbitrary server bytes. See [`conn_bytes`].
pub fn conn_client(data: &[u8]) {
    conn_bytes(Role::Client, data);
}

// ---- chunking --------------------------------------------------------------------------------

/// Everything a server produced for one way of feeding a stream.
#[derive(Debug, PartialEq)]
struct Transcript {
    events: Vec<String>,
    answers: Vec<String>,
    output: Vec<u8>,
}

/// Drains events (collecting requests) and all output.
fn drain_all(conn: &mut Connection, t: &mut Transcript, requests: &mut Vec<OwnedId>) {
    while let Some(e) = conn.poll_event() {
        t.events.push(format!("{e:?}"));
        if let Event::Request { id, .. } = e {
            requests.push(OwnedId::from(id));
        }
    }
    while let Some(out) = conn.poll_transmit() {
        t.output.extend_from_slice(out.bytes);
        let n = out.bytes.len();
        conn.consume_transmit(n);
    }
}

fn run_chunked(config: &Config, chunks: &[&[u8]]) -> Transcript {
    let now = Timestamp::from_millis(1);
    let mut conn = Connection::new(config.clone(), Timestamp::ZERO).expect("valid config");
    let mut t = Transcript {
        events: Vec::new(),
        answers: Vec::new(),
        output: Vec::new(),
    };
    let mut requests = Vec::new();
    for chunk in chunks {
        conn.handle_input(now, chunk);
        drain_all(&mut conn, &mut t, &mut requests);
    }
    // Answers come after all input, so that their place in the output does not depend on
    // where the chunks were cut.
    for (i, id) in std::mem::take(&mut requests).iter().enumerate() {
        let r = if i % 3 == 2 {
            conn.respond_error(id.as_id(), -32603, "no", None)
        } else {
            conn.respond(id.as_id(), json(r#"{"n":1}"#))
        };
        t.answers.push(format!("{id:?}: {r:?}"));
    }
    drain_all(&mut conn, &mut t, &mut requests);
    conn.handle_eof(now);
    drain_all(&mut conn, &mut t, &mut requests);
    if conn.state() != State::Closed {
        conn.handle_timeout(now); // the end of input, after a last line's events
        drain_all(&mut conn, &mut t, &mut requests);
    }
    t
}

/// The same stream fed to server connections in one chunk, in arbitrary chunks and byte by
/// byte.
///
/// Input: `[config, seed, stream…]`. Invariant: identical events (as `Debug` strings), answers
/// and output bytes. The frame cap is sometimes tiny, so over-long frames are split too.
pub fn chunking(data: &[u8]) {
    let Some((header, stream)) = data.split_first_chunk::<CHUNKING_HEADER>() else {
        return;
    };
    if stream.len() > 16 * 1024 {
        return;
    }
    let mut config = config(Role::Server, header[0] & !0x20);
    config.limits.max_frame = match header[1] % 4 {
        0 => 24,
        1 => 200,
        _ => config.limits.max_frame,
    };
    let mut rng = Rng::new(u64::from(header[1]));
    let whole = run_chunked(&config, &[stream]);
    let pieces = chunks(&mut rng, stream, 64);
    let chunked = run_chunked(&config, &pieces);
    assert_eq!(chunked, whole, "arbitrary chunks differ from one chunk");
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    let bytewise = run_chunked(&config, &bytes);
    assert_eq!(bytewise, whole, "byte by byte differs from one chunk");
}

// ---- api_sequence ----------------------------------------------------------------------------

/// Which end an operation acts on.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// The protocol versions both ends speak.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Versions {
    Dual,
    Latest,
    Batches,
    Oldest,
    Modern,
}

#[derive(Arbitrary, Debug)]
pub struct Setup {
    pub versions: Versions,
    /// Run the handshake before the first operation.
    pub handshake: bool,
    pub strict: bool,
    pub reset_on_progress: bool,
}

/// The requests an operation may send.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Method {
    Ping,
    ToolsList,
    ToolsCall,
    ResourcesRead,
    PromptsGet,
    Complete,
    SetLevel,
    Listen,
    RootsList,
    Sampling,
    Elicit,
    Custom,
    Initialize,
    /// A 2025-11-25 task-augmented `tools/call` (a plain one in other versions).
    ToolsCallTask,
}

impl Method {
    fn call(self) -> (&'static str, Option<&'static str>) {
        match self {
            Method::Ping => ("ping", None),
            Method::ToolsList => ("tools/list", Some("{}")),
            Method::ToolsCall => ("tools/call", Some(r#"{"name":"echo","arguments":{"x":1}}"#)),
            Method::ResourcesRead => ("resources/read", Some(r#"{"uri":"file:///a"}"#)),
            Method::PromptsGet => ("prompts/get", Some(r#"{"name":"p"}"#)),
            Method::Complete => (
                "completion/complete",
                Some(
                    r#"{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}"#,
                ),
            ),
            Method::SetLevel => ("logging/setLevel", Some(r#"{"level":"info"}"#)),
            Method::Listen => (
                "subscriptions/listen",
                Some(
                    r#"{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]}}"#,
                ),
            ),
            Method::RootsList => ("roots/list", None),
            Method::Sampling => (
                "sampling/createMessage",
                Some(
                    r#"{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}"#,
                ),
            ),
            Method::Elicit => (
                "elicitation/create",
                Some(r#"{"message":"name?","requestedSchema":{"type":"object","properties":{}}}"#),
            ),
            Method::Custom => ("x/custom", Some(r#"{"k":[1,2,3]}"#)),
            Method::Initialize => ("initialize", Some("{}")),
            Method::ToolsCallTask => (
                "tools/call",
                Some(r#"{"name":"echo","arguments":{"x":1},"task":{"ttl":60000}}"#),
            ),
        }
    }
}

/// The notifications an operation may send.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Notice {
    ToolsChanged,
    ResourceUpdated,
    Message,
    RootsChanged,
    Custom,
    Cancelled,
}

impl Notice {
    fn call(self) -> (&'static str, Option<&'static str>) {
        match self {
            Notice::ToolsChanged => ("notifications/tools/list_changed", None),
            Notice::ResourceUpdated => (
                "notifications/resources/updated",
                Some(r#"{"uri":"file:///a"}"#),
            ),
            Notice::Message => (
                "notifications/message",
                Some(r#"{"level":"info","data":"x"}"#),
            ),
            Notice::RootsChanged => ("notifications/roots/list_changed", None),
            Notice::Custom => ("x/notice", Some("{}")),
            Notice::Cancelled => ("notifications/cancelled", Some(r#"{"requestId":1}"#)),
        }
    }
}

/// Which id an operation names: one the side knows about, or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Target {
    Known(u8),
    Int(i64),
    Str(u8),
}

/// How a side answers a request of its peer's.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Reply {
    Result,
    Error,
    CodeOfAnotherVersion,
    InputRequired,
    StateOnly,
    /// A 2025-11-25 task handle (`CreateTaskResult`).
    TaskHandle,
}

/// Frames a test peer could send, with an id filled in from a [`Target`].
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Frame {
    Result,
    ResultStringId,
    ResultFloatId,
    ErrorReply,
    ErrorNullId,
    InputRequired,
    BadResultType,
    CancelIt,
    ProgressFor,
    Ping,
    ToolsCall,
    DuplicateKey,
    CaseVariant,
    Batch,
    Initialized,
    Garbage,
}

/// Bytes with an explicit length in front (so that inputs read from front to back and the
/// seed generator can write them).
#[derive(Debug, Clone)]
pub struct Blob(pub Vec<u8>);

impl<'a> Arbitrary<'a> for Blob {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let len = usize::from(u16::arbitrary(u)?).min(u.len());
        Ok(Blob(u.bytes(len)?.to_vec()))
    }
}

/// One call on the client–server pair.
#[derive(Arbitrary, Debug, Clone)]
pub enum Op {
    Request {
        side: Side,
        method: Method,
        progress: bool,
        timeout_ms: Option<u16>,
    },
    Notify {
        side: Side,
        notice: Notice,
    },
    Respond {
        side: Side,
        target: Target,
        reply: Reply,
    },
    Progress {
        side: Side,
        target: Target,
        value: u8,
    },
    Log {
        target: Target,
        level: u8,
    },
    Cancel {
        side: Side,
        target: Target,
    },
    Retry {
        target: Target,
        responses: bool,
    },
    Close {
        side: Side,
        grace_ms: u16,
    },
    Advance {
        ms: u16,
    },
    Drive,
    Deliver {
        to: Side,
        limit: Option<u16>,
    },
    Step,
    Feed {
        to: Side,
        bytes: Blob,
    },
    FeedFrame {
        to: Side,
        frame: Frame,
        target: Target,
    },
    Eof {
        side: Side,
    },
}

/// Writes the bytes that [`parse_ops`] reads back as a setup and operations, mirroring what
/// `derive(Arbitrary)` reads: a `u32` tag per enum (mapped to a variant as `tag * count >> 32`),
/// integers little-endian, a byte per `bool`, `Option` as a `bool` then the value. The seed
/// generator writes api_sequence seeds with it and checks the round trip.
pub fn encode_ops(setup: &Setup, ops: &[Op]) -> Vec<u8> {
    let mut w = OpWriter(Vec::new());
    w.variant(setup.versions as u32, 5)
        .bool(setup.handshake)
        .bool(setup.strict)
        .bool(setup.reset_on_progress);
    for op in ops {
        w.op(op);
    }
    w.0
}

struct OpWriter(Vec<u8>);

impl OpWriter {
    fn variant(&mut self, index: u32, count: u32) -> &mut Self {
        let tag = (u64::from(index) << 32).div_ceil(u64::from(count)) as u32;
        self.0.extend_from_slice(&tag.to_le_bytes());
        self
    }
    fn bool(&mut self, b: bool) -> &mut Self {
        self.0.push(u8::from(b));
        self
    }
    fn u8(&mut self, n: u8) -> &mut Self {
        self.0.push(n);
        self
    }
    fn u16(&mut self, n: u16) -> &mut Self {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }
    fn opt_u16(&mut self, n: Option<u16>) -> &mut Self {
        self.bool(n.is_some());
        if let Some(n) = n {
            self.u16(n);
        }
        self
    }
    fn side(&mut self, side: Side) -> &mut Self {
        self.variant(side as u32, 2)
    }
    fn target(&mut self, target: Target) -> &mut Self {
        match target {
            Target::Known(i) => self.variant(0, 3).u8(i),
            Target::Int(n) => {
                self.variant(1, 3);
                self.0.extend_from_slice(&n.to_le_bytes());
                self
            }
            Target::Str(i) => self.variant(2, 3).u8(i),
        }
    }
    fn op(&mut self, op: &Op) {
        const OPS: u32 = 15;
        match op {
            Op::Request {
                side,
                method,
                progress,
                timeout_ms,
            } => {
                self.variant(0, OPS)
                    .side(*side)
                    .variant(*method as u32, 14)
                    .bool(*progress)
                    .opt_u16(*timeout_ms);
            }
            Op::Notify { side, notice } => {
                self.variant(1, OPS).side(*side).variant(*notice as u32, 6);
            }
            Op::Respond {
                side,
                target,
                reply,
            } => {
                self.variant(2, OPS)
                    .side(*side)
                    .target(*target)
                    .variant(*reply as u32, 6);
            }
            Op::Progress {
                side,
                target,
                value,
            } => {
                self.variant(3, OPS).side(*side).target(*target).u8(*value);
            }
            Op::Log { target, level } => {
                self.variant(4, OPS).target(*target).u8(*level);
            }
            Op::Cancel { side, target } => {
                self.variant(5, OPS).side(*side).target(*target);
            }
            Op::Retry { target, responses } => {
                self.variant(6, OPS).target(*target).bool(*responses);
            }
            Op::Close { side, grace_ms } => {
                self.variant(7, OPS).side(*side).u16(*grace_ms);
            }
            Op::Advance { ms } => {
                self.variant(8, OPS).u16(*ms);
            }
            Op::Drive => {
                self.variant(9, OPS);
            }
            Op::Deliver { to, limit } => {
                self.variant(10, OPS).side(*to).opt_u16(*limit);
            }
            Op::Step => {
                self.variant(11, OPS);
            }
            Op::Feed { to, bytes } => {
                let len = u16::try_from(bytes.0.len()).expect("a blob fits a u16 length");
                self.variant(12, OPS).side(*to).u16(len);
                self.0.extend_from_slice(&bytes.0);
            }
            Op::FeedFrame { to, frame, target } => {
                self.variant(13, OPS)
                    .side(*to)
                    .variant(*frame as u32, 16)
                    .target(*target);
            }
            Op::Eof { side } => {
                self.variant(14, OPS).side(*side);
            }
        }
    }
}

/// Parses the operations of an `api_sequence` input.
pub fn parse_ops(data: &[u8]) -> Option<(Setup, Vec<Op>)> {
    let mut u = Unstructured::new(data);
    let setup = Setup::arbitrary(&mut u).ok()?;
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 512 {
        match Op::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    Some((setup, ops))
}

/// One end of the pair, with what the harness knows about it.
struct End {
    conn: Connection,
    watch: Watch,
    /// Ids returned by `request`/`retry`, in order.
    issued: Vec<RequestId>,
    /// How each issued request ended: an event, or a successful local `cancel`.
    ended: HashMap<RequestId, &'static str>,
    /// When `close` was first called, the deadline it set.
    close_deadline: Option<Timestamp>,
    /// Issued requests that asked for progress (a retry asks as its original did).
    with_progress: HashSet<RequestId>,
    /// The last progress value reported per request.
    last_progress: HashMap<RequestId, f64>,
    /// How many times the peer's requests came in, per id (an id may come again once its
    /// request has ended), and how many answers the engine took for each.
    received: HashMap<OwnedId, usize>,
    answered: HashMap<OwnedId, usize>,
    /// Peer requests answered with a 2025-11-25 task handle: their progress goes on.
    task_handles: HashSet<OwnedId>,
    /// Peer requests the peer cancelled: an answer to one is taken and dropped (`Ok`, no
    /// answer sent), until a request with that id comes again.
    cancelled: HashSet<OwnedId>,
}

impl End {
    fn new(config: Config, now: Timestamp) -> End {
        End {
            conn: Connection::new(config, now).expect("valid config"),
            watch: Watch::default(),
            issued: Vec::new(),
            ended: HashMap::new(),
            close_deadline: None,
            with_progress: HashSet::new(),
            last_progress: HashMap::new(),
            received: HashMap::new(),
            answered: HashMap::new(),
            task_handles: HashSet::new(),
            cancelled: HashSet::new(),
        }
    }

    fn drain(&mut self, limits: &Limits) {
        let from = self.watch.resolved.len();
        let from_progress = self.watch.progress.len();
        let from_requests = self.watch.peer_requests.len();
        let from_cancelled = self.watch.peer_cancelled.len();
        self.watch.drain(&mut self.conn);
        for request in &self.watch.peer_requests[from_requests..] {
            *self.received.entry(request.id.clone()).or_default() += 1;
            self.cancelled.remove(&request.id);
        }
        for id in &self.watch.peer_cancelled[from_cancelled..] {
            self.cancelled.insert(id.clone());
        }
        let progress = self.watch.progress[from_progress..].to_vec();
        let mut progress = progress.into_iter().peekable();
        for i in from..self.watch.resolved.len() {
            while let Some((request, value, _)) = progress.next_if(|p| p.2 <= i) {
                self.progress_came(request, value);
            }
            let (request, how) = self.watch.resolved[i];
            assert!(
                self.issued.contains(&request),
                "{how} for {request:?}, which `request` never returned"
            );
            if let Some(before) = self.ended.insert(request, how) {
                panic!("{request:?} ended twice: {before}, then {how}");
            }
        }
        for (request, value, _) in progress {
            self.progress_came(request, value);
        }
        check_bounds(&self.conn, limits);
    }

    /// A progress report on one of our requests: it asked for progress, has not ended (a
    /// 2025-11-25 task's goes on after its handle), and the value went up.
    fn progress_came(&mut self, request: RequestId, value: f64) {
        assert!(
            self.with_progress.contains(&request),
            "progress {value} for {request:?}, which did not ask for it"
        );
        if let Some(how) = self.ended.get(&request) {
            assert_eq!(
                *how, "task created",
                "progress {value} for {request:?} after it ended ({how})"
            );
        }
        assert!(value.is_finite(), "progress {value} for {request:?}");
        if let Some(last) = self.last_progress.insert(request, value) {
            assert!(
                value > last,
                "progress for {request:?} went from {last} to {value}"
            );
        }
    }

    /// The engine took an answer (or a task handle) to the peer's request `id`: the peer sent
    /// a request with it that has no answer yet.
    fn answer_taken(&mut self, id: &OwnedId, task: bool) {
        if self.cancelled.contains(id) {
            return; // (suppressed: the peer cancelled it)
        }
        let received = self.received.get(id).copied().unwrap_or(0);
        let answered = self.answered.entry(id.clone()).or_default();
        assert!(
            *answered < received,
            "answer {} to {id:?}, which came {received} times",
            *answered + 1
        );
        *answered += 1;
        if task {
            self.task_handles.insert(id.clone());
        }
    }

    fn issued(&mut self, id: RequestId) {
        assert!(!self.issued.contains(&id), "{id:?} issued twice");
        self.issued.push(id);
    }

    fn own_request(&self, target: Target) -> RequestId {
        match target {
            Target::Known(i) if !self.issued.is_empty() => {
                self.issued[usize::from(i) % self.issued.len()]
            }
            Target::Known(i) | Target::Str(i) => RequestId(i64::from(i)),
            Target::Int(n) => RequestId(n),
        }
    }
}

/// Renders the id a [`Target`] names for an answer or cancel of `end`'s peer requests.
fn peer_id(end: &End, target: Target) -> OwnedId {
    match target {
        Target::Known(i) if !end.watch.peer_requests.is_empty() => {
            let list = &end.watch.peer_requests;
            list[usize::from(i) % list.len()].id.clone()
        }
        Target::Known(i) => OwnedId::Int(i64::from(i)),
        Target::Int(n) => OwnedId::Int(n),
        Target::Str(i) => {
            let text = i.to_string();
            OwnedId::from(Id::Str(JsonStr::from_raw(&text).expect("digits")))
        }
    }
}

/// A frame from the peer's side, as JSON text, naming `id`.
fn frame_text(frame: Frame, id: &str) -> String {
    match frame {
        Frame::Result => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        Frame::ResultStringId => format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{{}}}}"#),
        Frame::ResultFloatId => format!(r#"{{"jsonrpc":"2.0","id":{id}.0,"result":{{}}}}"#),
        Frame::ErrorReply => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"nope","data":[1]}}}}"#
        ),
        Frame::ErrorNullId => {
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#.to_owned()
        }
        Frame::InputRequired => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"r":{{"method":"roots/list"}}}},"requestState":"s\u00e9"}}}}"#
        ),
        Frame::BadResultType => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"later"}}}}"#)
        }
        Frame::CancelIt => format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"r"}}}}"#
        ),
        Frame::ProgressFor => format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":{id},"total":1e3,"message":"m"}}}}"#
        ),
        Frame::Ping => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        Frame::ToolsCall => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","_meta":{{"progressToken":{id},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"roots":{{}}}}}}}}}}"#
        ),
        Frame::DuplicateKey => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"id":{id},"method":"ping"}}"#)
        }
        Frame::CaseVariant => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","Method":"tools/call"}}"#)
        }
        Frame::Batch => format!(
            r#"[{{"jsonrpc":"2.0","id":{id},"method":"ping"}},{{"jsonrpc":"2.0","id":"b{id}","method":"tools/list"}},{{"jsonrpc":"2.0","method":"x/n"}},1]"#
        ),
        Frame::Initialized => {
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned()
        }
        Frame::Garbage => format!(r#"{{"jsonrpc":"2.0","id":{id},"#),
    }
}

/// The harness: two ends, the time, and the bounds they were configured with.
struct Harness {
    client: End,
    server: End,
    now: Timestamp,
    limits: Limits,
    /// Listens granted by `grant_listen` (for the replay's reach check).
    listen_grants: usize,
}

impl Harness {
    fn end(&mut self, side: Side) -> &mut End {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    fn drain(&mut self) {
        self.client.drain(&self.limits);
        self.server.drain(&self.limits);
    }

    /// Moves up to `limit` bytes of `from`'s output to its peer.
    fn deliver(&mut self, to: Side, limit: Option<usize>) -> bool {
        let now = self.now;
        let (from, into) = match to {
            Side::Client => (&mut self.server, &mut self.client),
            Side::Server => (&mut self.client, &mut self.server),
        };
        let mut budget = limit.unwrap_or(usize::MAX);
        let mut moved = false;
        while budget > 0 {
            let Some(t) = from.conn.poll_transmit() else {
                break;
            };
            let n = t.bytes.len().min(budget);
            let bytes = t.bytes[..n].to_vec();
            from.conn.consume_transmit(n);
            budget -= n;
            into.conn.handle_input(now, &bytes);
            moved = true;
            into.drain(&self.limits);
        }
        from.drain(&self.limits);
        moved
    }

    /// Delivers both ways until nothing moves (bounded).
    fn step(&mut self) {
        for _ in 0..64 {
            let a = self.deliver(Side::Server, None);
            let b = self.deliver(Side::Client, None);
            if !a && !b {
                break;
            }
        }
    }

    fn advance_to(&mut self, at: Timestamp) {
        if at > self.now {
            self.now = at;
        }
        let now = self.now;
        self.client.conn.handle_timeout(now);
        self.server.conn.handle_timeout(now);
        self.drain();
        // A graceful close ends by its deadline at the latest.
        for end in [&self.client, &self.server] {
            if let Some(deadline) = end.close_deadline
                && deadline <= now
            {
                assert!(
                    end.watch.closed,
                    "{:?} still {:?} at {now:?}, past its close deadline {deadline:?}",
                    end.conn.role(),
                    end.conn.state()
                );
            }
        }
    }

    fn drive(&mut self) -> bool {
        let next = [
            self.client.conn.poll_timeout(),
            self.server.conn.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(at) => {
                self.advance_to(at);
                true
            }
            None => false,
        }
    }

    fn apply(&mut self, op: Op) {
        let now = self.now;
        match op {
            Op::Request {
                side,
                method,
                progress,
                timeout_ms,
            } => {
                let (name, params) = method.call();
                let options = RequestOptions {
                    timeout: timeout_ms.map(|ms| Duration::from_millis(u64::from(ms))),
                    progress,
                    reset_on_progress: None,
                };
                let end = self.end(side);
                if let Ok(id) = end.conn.request_with(now, name, params.map(json), options) {
                    end.issued(id);
                    if progress {
                        end.with_progress.insert(id);
                    }
                }
            }
            Op::Notify { side, notice } => {
                let (name, params) = notice.call();
                let _ = self.end(side).conn.notify(name, params.map(json));
            }
            Op::Respond {
                side,
                target,
                reply,
            } => {
                let end = self.end(side);
                let id = peer_id(end, target);
                let id = id.as_id();
                // A listen waiting for its grant (`Policy::review_listens`): the answers
                // that cannot end a listen grant it instead, keeping every other item.
                if matches!(reply, Reply::InputRequired | Reply::StateOnly)
                    && end.conn.listen_items(id).is_some()
                {
                    let mut keep = matches!(reply, Reply::InputRequired);
                    let granted = end.conn.grant_listen(id, |_| {
                        keep = !keep;
                        keep
                    });
                    match granted {
                        Ok(()) => {
                            assert!(end.conn.listen_items(id).is_none(), "still waiting");
                            self.listen_grants += 1;
                        }
                        Err(e) => assert!(
                            matches!(
                                e,
                                mcpwire::conn::Error::OutputFull | mcpwire::conn::Error::Closed
                            ),
                            "a listen waiting for its grant refused it: {e:?}"
                        ),
                    }
                } else {
                    // (A listen the engine granted on its own came as no `Request` event: an
                    // answer to it ends it, as `end_listen` does.)
                    let listening = end.conn.listen_subscriptions().contains(&OwnedId::from(id));
                    // (And an answer to a request the peer cancelled is taken and dropped: the
                    // engine counts it, also for a listen of its own, which came as no event.)
                    let suppressed = end.conn.stats().suppressed_responses;
                    let taken = match reply {
                        Reply::Result => end.conn.respond(id, json(r#"{"ok":true}"#)),
                        Reply::Error => end.conn.respond_error(id, -32601, "no such thing", None),
                        Reply::CodeOfAnotherVersion => {
                            end.conn.respond_error(id, -32022, "v", None)
                        }
                        Reply::InputRequired => end.conn.respond_input_required(
                            id,
                            Some(json(r#"{"q":{"method":"elicitation/create","params":{}}}"#)),
                            Some("opaque\"state"),
                        ),
                        Reply::StateOnly => end.conn.respond_input_required(id, None, Some("s")),
                        Reply::TaskHandle => end.conn.respond_task(id, json(TASK_HANDLE)),
                    };
                    let dropped = end.conn.stats().suppressed_responses > suppressed;
                    if taken.is_ok() && !listening && !dropped {
                        let owned = OwnedId::from(id);
                        end.answer_taken(&owned, matches!(reply, Reply::TaskHandle));
                    }
                }
            }
            Op::Progress {
                side,
                target,
                value,
            } => {
                let end = self.end(side);
                let id = peer_id(end, target);
                let sent = end.conn.progress(
                    id.as_id(),
                    f64::from(value),
                    (value % 2 == 0).then_some(255.0),
                    Some("step"),
                );
                // Progress goes only on a request that came and has no answer yet (or one
                // whose answer was a 2025-11-25 task handle).
                if sent.is_ok() && !end.cancelled.contains(&id) {
                    let received = end.received.get(&id).copied().unwrap_or(0);
                    let answered = end.answered.get(&id).copied().unwrap_or(0);
                    assert!(
                        answered < received || end.task_handles.contains(&id),
                        "progress on {id:?}: came {received} times, answered {answered}"
                    );
                }
            }
            Op::Log { target, level } => {
                let end = &mut self.server;
                let id = peer_id(end, target);
                let level = LogLevel::ALL[usize::from(level) % LogLevel::ALL.len()];
                let _ = end
                    .conn
                    .log(id.as_id(), level, Some("fuzz"), json(r#""line""#));
            }
            Op::Cancel { side, target } => {
                let end = self.end(side);
                let request = end.own_request(target);
                if end
                    .conn
                    .cancel(now, request, Some("changed my mind"))
                    .is_ok()
                {
                    assert!(
                        end.issued.contains(&request),
                        "cancelled {request:?}, never issued"
                    );
                    if let Some(before) = end.ended.insert(request, "cancel") {
                        panic!("cancel succeeded for {request:?}, which already ended: {before}");
                    }
                }
            }
            Op::Retry { target, responses } => {
                let end = &mut self.client;
                let request = match target {
                    Target::Known(i) if !end.watch.retryable.is_empty() => {
                        end.watch.retryable[usize::from(i) % end.watch.retryable.len()]
                    }
                    _ => end.own_request(target),
                };
                let input = responses.then(|| json(r#"{"r":{"roots":[]}}"#));
                if let Ok(id) = end.conn.retry(now, request, input) {
                    end.issued(id);
                    if end.with_progress.contains(&request) {
                        end.with_progress.insert(id);
                    }
                }
            }
            Op::Close { side, grace_ms } => {
                let grace = Duration::from_millis(u64::from(grace_ms));
                let end = self.end(side);
                if !end.watch.closed && end.close_deadline.is_none() {
                    end.close_deadline = Some(now.after(grace));
                }
                end.conn.close(now, grace);
            }
            Op::Advance { ms } => {
                let at = now.after(Duration::from_millis(u64::from(ms)));
                self.advance_to(at);
            }
            Op::Drive => {
                self.drive();
            }
            Op::Deliver { to, limit } => {
                self.deliver(to, limit.map(usize::from));
            }
            Op::Step => self.step(),
            Op::Feed { to, bytes } => self.end(to).conn.handle_input(now, &bytes.0),
            Op::FeedFrame { to, frame, target } => {
                let end = self.end(to);
                // Answers name the receiver's own requests; everything else the target.
                let id = match (frame, target) {
                    (
                        Frame::Result
                        | Frame::ResultStringId
                        | Frame::ResultFloatId
                        | Frame::ErrorReply
                        | Frame::InputRequired
                        | Frame::BadResultType
                        | Frame::ProgressFor,
                        Target::Known(_),
                    ) => end.own_request(target).0.to_string(),
                    (_, Target::Str(i)) => format!("\"s{i}\""),
                    _ => peer_id(end, target).to_string(),
                };
                let mut text = frame_text(frame, &id).into_bytes();
                text.push(b'\n');
                end.conn.handle_input(now, &text);
            }
            Op::Eof { side } => self.end(side).conn.handle_eof(now),
        }
        self.drain();
    }
}

/// Arbitrary sequences of API calls on a client and a server wired together in memory.
///
/// Input: a [`Setup`] and [`Op`]s, as `arbitrary` reads them. Invariants: no panic; every id
/// `request` (or `retry`) returns ends exactly once, in a `Response`, `Error`, `TimedOut`,
/// `Abandoned`, `InvalidResponse`, `InputRequired` or `TaskCreated` event or a successful `cancel`, and at
/// the end, once both sides are closed and time has passed every grace period, none is left
/// unresolved; no resolution names an id `request` never returned; progress comes only for
/// requests that asked for it, before they end (a 2025-11-25 task's also after its handle),
/// with increasing values; the engine takes an answer, or progress, only for a peer request
/// that came and has no answer yet (answers per id never outnumber its arrivals; one to a
/// request the peer cancelled is taken and dropped); the in-flight tables stay within their
/// (small) limits; nothing follows `Closed`; a graceful
/// close ends by its deadline.
pub fn api_sequence(data: &[u8]) {
    api_sequence_summary(data);
}

/// [`api_sequence`], returning how each request ended, per side, as `(request, how)`.
pub fn api_sequence_summary(data: &[u8]) -> [Vec<(i64, &'static str)>; 2] {
    let Some(h) = run_api_sequence(data) else {
        return [Vec::new(), Vec::new()];
    };
    [&h.client, &h.server].map(|end| {
        let mut ended: Vec<(i64, &'static str)> =
            end.ended.iter().map(|(id, how)| (id.0, *how)).collect();
        ended.sort_unstable();
        ended
    })
}

/// [`api_sequence`], returning how many listens the server's application granted.
pub fn api_sequence_listen_grants(data: &[u8]) -> usize {
    run_api_sequence(data).map_or(0, |h| h.listen_grants)
}

/// [`api_sequence`], returning the methods of the requests each side received from the
/// other (client, server), in order.
pub fn api_sequence_requests_received(data: &[u8]) -> [Vec<String>; 2] {
    let Some(h) = run_api_sequence(data) else {
        return [Vec::new(), Vec::new()];
    };
    [&h.client, &h.server].map(|end| {
        end.watch
            .peer_requests
            .iter()
            .map(|r| r.method.clone())
            .collect()
    })
}

/// Runs an `api_sequence` input to its end, checking the invariants; the harness after it.
fn run_api_sequence(data: &[u8]) -> Option<Harness> {
    let (setup, ops) = parse_ops(data)?;
    let versions = match setup.versions {
        Versions::Dual => ProtocolVersion::ALL.to_vec(),
        Versions::Latest => vec![ProtocolVersion::V2025_11_25],
        Versions::Batches => vec![ProtocolVersion::V2025_03_26],
        Versions::Oldest => vec![ProtocolVersion::V2024_11_05],
        Versions::Modern => vec![ProtocolVersion::V2026_07_28],
    };
    let limits = small_limits();
    let make = |role| {
        let mut c = config(role, 0);
        if role == Role::Server {
            // 2025-11-25 tasks for tools/call, so that task-augmented calls, their handles and
            // the engine's `tasks/cancel` for a handle that comes too late all run.
            c = c
                .with_capabilities(SERVER_CAPS_TASKS)
                .expect("valid capabilities");
        }
        c.versions = versions.clone();
        c.limits = limits;
        c.policy.strict_lifecycle = setup.strict;
        c.policy.reset_timeout_on_progress = setup.reset_on_progress;
        // Tied to another bit so that the input format stays as it was: listens come to the
        // server's application, which grants them below.
        c.policy.review_listens = setup.reset_on_progress;
        c.request_timeout = Duration::from_secs(10);
        c.discover_timeout = Duration::from_secs(2);
        End::new(c, Timestamp::ZERO)
    };
    let mut h = Harness {
        client: make(Role::Client),
        server: make(Role::Server),
        now: Timestamp::ZERO,
        limits,
        listen_grants: 0,
    };
    h.drain();
    if setup.handshake {
        h.step();
    }
    for op in ops {
        h.apply(op);
    }
    // The end: close both, then let time run past every grace period.
    for side in [Side::Client, Side::Server] {
        h.apply(Op::Close {
            side,
            grace_ms: 1000,
        });
    }
    for _ in 0..1000 {
        if h.client.watch.closed && h.server.watch.closed {
            break;
        }
        h.step();
        if !h.drive() {
            break;
        }
    }
    for end in [&h.client, &h.server] {
        assert!(
            end.watch.closed,
            "{:?} not closed: {:?}",
            end.conn.role(),
            end.conn.state()
        );
        let unresolved: HashSet<RequestId> = end
            .issued
            .iter()
            .copied()
            .filter(|id| !end.ended.contains_key(id))
            .collect();
        assert!(
            unresolved.is_empty(),
            "{:?}: requests that never ended: {unresolved:?}",
            end.conn.role()
        );
    }
    Some(h)
}
