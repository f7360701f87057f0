//! Decode and encode throughput over the two generated corpora (see `corpus.rs`), against
//! serde_json baselines and the memchr newline-count floor.
//!
//! Every benchmark handles the whole corpus per iteration and reports both messages/s and
//! bytes/s. Before anything is timed, every line is checked to decode with every compiled
//! backend and with serde_json, and both encoders are checked to reproduce the corpus byte for
//! byte.
//!
//! Run: `cargo bench --bench decode [--features simd]`.

use std::borrow::Cow;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use mcpwire::frame::line::LineDecoder;
use mcpwire::jsonrpc::{
    Backend, Decoded, Decoder, DecoderConfig, Id, JsonStr, Message, RawJson, encode_error,
    encode_notification, encode_request, encode_response,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

mod corpus;
use corpus::Corpus;

/// The stream is fed to the line framer in reads of this size.
const CHUNK: usize = 64 * 1024;

fn throughput(corpus: &Corpus) -> Throughput {
    Throughput::ElementsAndBytes {
        elements: corpus.messages as u64,
        bytes: corpus.bytes.len() as u64,
    }
}

// ---- mcpwire ------------------------------------------------------------------------------

/// Touches every part of a message so none of the decoding can be optimised away.
fn weigh_message(m: &Message<'_>) -> usize {
    fn id_weight(id: Id<'_>) -> usize {
        match id {
            Id::Int(n) => n as usize,
            Id::Str(s) => s.raw().len(),
        }
    }
    match m {
        Message::Request(r) => {
            id_weight(r.id) + r.method.raw().len() + r.params.map_or(0, |p| p.get().len())
        }
        Message::Notification(n) => n.method.raw().len() + n.params.map_or(0, |p| p.get().len()),
        Message::Response(r) => id_weight(r.id) + r.result.get().len(),
        Message::Error(e) => {
            e.id.map_or(0, id_weight)
                + e.error.code as usize
                + e.error.message.raw().len()
                + e.error.data.map_or(0, |d| d.get().len())
        }
    }
}

fn weigh(d: &Decoded<'_>) -> usize {
    match d {
        Decoded::Single(m) => weigh_message(m),
        Decoded::Batch(members) => members
            .iter()
            .map(|m| m.as_ref().map_or(1, weigh_message))
            .sum(),
    }
}

/// Frames and decodes the whole stream, read in [`CHUNK`]-sized pieces.
fn mcpwire_stream(lines: &mut LineDecoder, decoder: &mut Decoder, bytes: &[u8]) -> usize {
    let mut sum = 0usize;
    for chunk in bytes.chunks(CHUNK) {
        let mut input = chunk;
        while let Some(frame) = lines.next_frame(&mut input) {
            let frame = frame.expect("frame within the cap");
            let decoded = decoder.decode(frame).expect("corpus frames are valid");
            sum = sum.wrapping_add(weigh(&decoded));
        }
    }
    sum
}

fn decoder(backend: Backend) -> Decoder {
    Decoder::new(DecoderConfig {
        backend,
        ..Default::default()
    })
}

// ---- serde_json baselines ----------------------------------------------------------------

/// Splits with memchr inside the timed loop, as a real reader would have to.
#[inline]
fn for_each_line(bytes: &[u8], mut f: impl FnMut(&[u8])) {
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', bytes) {
        let line = &bytes[start..nl];
        start = nl + 1;
        if !line.is_empty() {
            f(line);
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum EnvelopeId<'a> {
    Int(i64),
    Str(#[serde(borrow)] Cow<'a, str>),
}

/// The least a serde user would deserialize to route a message: the envelope, with the
/// payloads left as raw JSON.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Option<EnvelopeId<'a>>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

fn weigh_envelope(e: &Envelope<'_>) -> usize {
    let raw_len = |r: Option<&RawValue>| r.map_or(0, |r| r.get().len());
    let id = match &e.id {
        Some(EnvelopeId::Int(n)) => *n as usize,
        Some(EnvelopeId::Str(s)) => s.len(),
        None => 0,
    };
    e.jsonrpc.len()
        + id
        + e.method.as_ref().map_or(0, |m| m.len())
        + raw_len(e.params)
        + raw_len(e.result)
        + raw_len(e.error)
}

// ---- Checks -------------------------------------------------------------------------------

fn check_corpus(name: &str, corpus: &Corpus, avg_range: (f64, f64)) {
    let avg = corpus.average();
    let largest = corpus.lines().map(<[u8]>::len).max().unwrap_or(0);
    println!(
        "corpus {name}: {} messages, {} bytes ({:.2} MiB), average {avg:.1} B/message, largest {largest} B",
        corpus.messages,
        corpus.bytes.len(),
        corpus.bytes.len() as f64 / (1024.0 * 1024.0),
    );
    assert!(
        (avg_range.0..=avg_range.1).contains(&avg),
        "corpus {name}: average {avg:.1} B outside {avg_range:?}"
    );
    assert_eq!(corpus.lines().count(), corpus.messages);
    assert_eq!(corpus.bytes.last(), Some(&b'\n'));

    for &backend in Backend::ALL {
        let mut d = decoder(backend);
        for line in corpus.lines() {
            match d.decode(line) {
                Ok(Decoded::Single(_)) => {}
                other => panic!(
                    "{name}/{backend:?}: {other:?} for {}",
                    String::from_utf8_lossy(line)
                ),
            }
        }
        let mut framed = 0;
        let mut lines = LineDecoder::new();
        for chunk in corpus.bytes.chunks(CHUNK) {
            let mut input = chunk;
            while let Some(frame) = lines.next_frame(&mut input) {
                d.decode(frame.unwrap()).unwrap();
                framed += 1;
            }
        }
        assert_eq!(framed, corpus.messages, "{name}/{backend:?}: framing");
    }
    for line in corpus.lines() {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(line) {
            panic!(
                "{name}: serde_json rejects {}: {e}",
                String::from_utf8_lossy(line)
            );
        }
        let env: Envelope<'_> = serde_json::from_slice(line).expect("envelope");
        assert_eq!(env.jsonrpc, "2.0");
    }
}

// ---- Decode benches -----------------------------------------------------------------------

fn bench_decode(c: &mut Criterion, name: &str, corpus: &Corpus) {
    let bytes = &corpus.bytes[..];
    let mut group = c.benchmark_group(format!("decode_{name}"));
    group.throughput(throughput(corpus));

    for &backend in Backend::ALL {
        let label = match backend {
            Backend::Native => "mcpwire_native",
            #[cfg(feature = "simd")]
            Backend::Simd => "mcpwire_simd",
        };
        let mut lines = LineDecoder::new();
        let mut d = decoder(backend);
        group.bench_function(label, |b| {
            b.iter(|| black_box(mcpwire_stream(&mut lines, &mut d, black_box(bytes))))
        });
    }

    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for_each_line(black_box(bytes), |line| {
                let v: serde_json::Value = serde_json::from_slice(line).unwrap();
                n += v.as_object().map_or(0, |o| o.len());
                black_box(v);
            });
            black_box(n)
        })
    });

    group.bench_function("serde_json_envelope", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for_each_line(black_box(bytes), |line| {
                let env: Envelope<'_> = serde_json::from_slice(line).unwrap();
                n = n.wrapping_add(weigh_envelope(&env));
            });
            black_box(n)
        })
    });

    group.bench_function("serde_json_validate", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for_each_line(black_box(bytes), |line| {
                serde_json::from_slice::<serde::de::IgnoredAny>(line).unwrap();
                n += 1;
            });
            black_box(n)
        })
    });

    group.bench_function("memchr_lines", |b| {
        b.iter(|| black_box(memchr::memchr_iter(b'\n', black_box(bytes)).count()))
    });

    group.finish();
}

// ---- Encode benches -----------------------------------------------------------------------

/// A message as an application would hold it before sending: owned text, payloads as raw JSON.
enum Owned {
    Request {
        id: OwnedId,
        method: String,
        params: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    Response {
        id: OwnedId,
        result: Box<RawValue>,
    },
    Error {
        id: Option<OwnedId>,
        code: i64,
        message: String,
        data: Option<Box<RawValue>>,
    },
}

enum OwnedId {
    Int(i64),
    /// The wire form (for mcpwire's `JsonStr`) and the decoded text (for serde).
    Str {
        raw: String,
        text: String,
    },
}

fn own_id(id: Id<'_>) -> OwnedId {
    match id {
        Id::Int(n) => OwnedId::Int(n),
        Id::Str(s) => OwnedId::Str {
            raw: s.raw().to_owned(),
            text: s.to_str().into_owned(),
        },
    }
}

fn own_raw(r: RawJson<'_>) -> Box<RawValue> {
    RawValue::from_string(r.get().to_owned()).expect("validated JSON")
}

fn own(m: &Message<'_>) -> Owned {
    match m {
        Message::Request(r) => Owned::Request {
            id: own_id(r.id),
            method: r.method.to_str().into_owned(),
            params: r.params.map(own_raw),
        },
        Message::Notification(n) => Owned::Notification {
            method: n.method.to_str().into_owned(),
            params: n.params.map(own_raw),
        },
        Message::Response(r) => Owned::Response {
            id: own_id(r.id),
            result: own_raw(r.result),
        },
        Message::Error(e) => Owned::Error {
            id: e.id.map(own_id),
            code: e.error.code,
            message: e.error.message.to_str().into_owned(),
            data: e.error.data.map(own_raw),
        },
    }
}

/// What mcpwire's encoder takes, built (and validated) before timing.
enum Ours<'a> {
    Request(Id<'a>, &'a str, Option<RawJson<'a>>),
    Notification(&'a str, Option<RawJson<'a>>),
    Response(Id<'a>, RawJson<'a>),
    Error(Option<Id<'a>>, i64, &'a str, Option<RawJson<'a>>),
}

fn ours_id(id: &OwnedId) -> Id<'_> {
    match id {
        OwnedId::Int(n) => Id::Int(*n),
        OwnedId::Str { raw, .. } => Id::Str(JsonStr::from_raw(raw).expect("valid string id")),
    }
}

fn ours_raw(r: &RawValue) -> RawJson<'_> {
    RawJson::new(r.get()).expect("valid JSON")
}

fn ours(m: &Owned) -> Ours<'_> {
    match m {
        Owned::Request { id, method, params } => {
            Ours::Request(ours_id(id), method, params.as_deref().map(ours_raw))
        }
        Owned::Notification { method, params } => {
            Ours::Notification(method, params.as_deref().map(ours_raw))
        }
        Owned::Response { id, result } => Ours::Response(ours_id(id), ours_raw(result)),
        Owned::Error {
            id,
            code,
            message,
            data,
        } => Ours::Error(
            id.as_ref().map(ours_id),
            *code,
            message,
            data.as_deref().map(ours_raw),
        ),
    }
}

fn encode_ours(out: &mut Vec<u8>, messages: &[Ours<'_>]) {
    for m in messages {
        match *m {
            Ours::Request(id, method, params) => encode_request(out, id, method, params),
            Ours::Notification(method, params) => encode_notification(out, method, params),
            Ours::Response(id, result) => encode_response(out, id, result),
            Ours::Error(id, code, message, data) => encode_error(out, id, code, message, data),
        }
        out.push(b'\n');
    }
}

/// The serde_json equivalent: one struct per message kind, payloads as `&RawValue`.
#[derive(Serialize)]
#[serde(untagged)]
enum SerId<'a> {
    Int(i64),
    Str(&'a str),
}

#[derive(Serialize)]
struct SerRequest<'a> {
    jsonrpc: &'static str,
    id: SerId<'a>,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct SerNotification<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct SerResponse<'a> {
    jsonrpc: &'static str,
    id: SerId<'a>,
    result: &'a RawValue,
}

#[derive(Serialize)]
struct SerErrorObject<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct SerError<'a> {
    jsonrpc: &'static str,
    id: Option<SerId<'a>>,
    error: SerErrorObject<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum SerMessage<'a> {
    Request(SerRequest<'a>),
    Notification(SerNotification<'a>),
    Response(SerResponse<'a>),
    Error(SerError<'a>),
}

fn ser_id(id: &OwnedId) -> SerId<'_> {
    match id {
        OwnedId::Int(n) => SerId::Int(*n),
        OwnedId::Str { text, .. } => SerId::Str(text),
    }
}

fn ser(m: &Owned) -> SerMessage<'_> {
    const V: &str = "2.0";
    match m {
        Owned::Request { id, method, params } => SerMessage::Request(SerRequest {
            jsonrpc: V,
            id: ser_id(id),
            method,
            params: params.as_deref(),
        }),
        Owned::Notification { method, params } => SerMessage::Notification(SerNotification {
            jsonrpc: V,
            method,
            params: params.as_deref(),
        }),
        Owned::Response { id, result } => SerMessage::Response(SerResponse {
            jsonrpc: V,
            id: ser_id(id),
            result,
        }),
        Owned::Error {
            id,
            code,
            message,
            data,
        } => SerMessage::Error(SerError {
            jsonrpc: V,
            id: id.as_ref().map(ser_id),
            error: SerErrorObject {
                code: *code,
                message,
                data: data.as_deref(),
            },
        }),
    }
}

fn encode_serde(out: &mut Vec<u8>, messages: &[SerMessage<'_>]) {
    for m in messages {
        serde_json::to_writer(&mut *out, m).unwrap();
        out.push(b'\n');
    }
}

fn bench_encode(c: &mut Criterion, name: &str, corpus: &Corpus) {
    let mut d = decoder(Backend::Native);
    let owned: Vec<Owned> = corpus
        .lines()
        .map(|line| match d.decode(line) {
            Ok(Decoded::Single(m)) => own(&m),
            other => panic!("{other:?}"),
        })
        .collect();
    let ours: Vec<Ours<'_>> = owned.iter().map(ours).collect();
    let sers: Vec<SerMessage<'_>> = owned.iter().map(ser).collect();

    // Both encoders must reproduce the corpus exactly (it is written in their member order).
    let mut out = Vec::with_capacity(corpus.bytes.len() + 1024);
    encode_ours(&mut out, &ours);
    assert!(out == corpus.bytes, "{name}: mcpwire re-encoding differs");
    out.clear();
    encode_serde(&mut out, &sers);
    assert!(
        out == corpus.bytes,
        "{name}: serde_json re-encoding differs"
    );

    let mut group = c.benchmark_group(format!("encode_{name}"));
    group.throughput(throughput(corpus));
    group.bench_function("mcpwire", |b| {
        b.iter(|| {
            out.clear();
            encode_ours(&mut out, black_box(&ours));
            black_box(out.len())
        })
    });
    group.bench_function("serde_json", |b| {
        b.iter(|| {
            out.clear();
            encode_serde(&mut out, black_box(&sers));
            black_box(out.len())
        })
    });
    group.finish();
}

// ---- Main ---------------------------------------------------------------------------------

fn main() {
    let mixed = corpus::mixed();
    let small = corpus::small();
    check_corpus("mixed", &mixed, (1100.0, 1300.0));
    check_corpus("small", &small, (140.0, 170.0));

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    bench_decode(&mut c, "mixed", &mixed);
    bench_decode(&mut c, "small", &small);
    bench_encode(&mut c, "mixed", &mixed);
    bench_encode(&mut c, "small", &small);

    c.final_summary();
}
