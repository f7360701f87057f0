//! Replays every checked-in fuzz input on stable Rust, through the same code the cargo-fuzz
//! targets run (`tests/fuzz_logic`), and keeps the seed corpora in step with their generator.
//!
//! - `fuzz/corpus/<target>/`: seeds (`seed-*`, written by [`seed_corpora_are_current`]) and
//!   any inputs worth keeping from fuzzing runs;
//! - `fuzz/regressions/<target>/`: minimized inputs that once crashed a target.
//!
//! To (re)write the seeds after changing the generator or the examples:
//! `MCPWIRE_WRITE_SEEDS=1 cargo test --test fuzz_replay seed_corpora`.

mod common;
mod fuzz_logic;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::pair::Pair;
use fuzz_logic::sse_framer::{SSE_CAP_UNIT, SSE_HEADER};
use fuzz_logic::{
    CHUNKING_HEADER, CONN_HEADER, Frame, LINE_FRAMER_HEADER, Method, Notice, Op, Reply, Setup,
    Side, TARGETS, Target, Versions, encode_ops, parse_ops,
};
use fuzz_logic::{c_abi, http_client};
use mcpwire::conn::{Event, RequestOptions, Role};
use mcpwire::frame::sse;
use mcpwire::jsonrpc::{OwnedId, RawJson};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target` on every file of `dir`; returns how many ran and the failures.
fn replay_dir(target: fn(&[u8]), dir: &Path) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let files = files_in(dir);
    for file in &files {
        let data = std::fs::read(file).expect("readable corpus file");
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{}: {message}", file.display()));
        }
    }
    (files.len(), failures)
}

fn replay(name: &str, kind: &str) -> (usize, Vec<String>) {
    let (_, target) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a known target");
    replay_dir(*target, &fuzz_dir().join(kind).join(name))
}

fn replay_corpus(name: &str) {
    let (ran, failures) = replay(name, "corpus");
    assert!(ran > 0, "fuzz/corpus/{name} is empty");
    assert!(
        failures.is_empty(),
        "{} failing:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn replay_corpus_line_framer() {
    replay_corpus("line_framer");
}

#[test]
fn replay_corpus_decode() {
    replay_corpus("decode");
}

#[test]
fn replay_corpus_conn_server() {
    replay_corpus("conn_server");
}

#[test]
fn replay_corpus_conn_client() {
    replay_corpus("conn_client");
}

#[test]
fn replay_corpus_api_sequence() {
    replay_corpus("api_sequence");
}

#[test]
fn replay_corpus_chunking() {
    replay_corpus("chunking");
}

#[test]
fn replay_corpus_sse_framer() {
    replay_corpus("sse_framer");
}

#[test]
fn replay_corpus_c_abi() {
    replay_corpus("c_abi");
}

#[test]
fn replay_corpus_http_server() {
    replay_corpus("http_server");
}

#[test]
fn replay_corpus_http_client() {
    replay_corpus("http_client");
}

#[test]
fn replay_corpus_tasks() {
    replay_corpus("tasks");
}

/// The `http_client` steps that came after its corpus (the 0xFF bodies and the retry inside
/// `Answer`) reach what they are for: a 2026-07-28 `tools/call` answered "input required" in
/// each shape, retried, and the retry's `requestState` checked when it goes out. The scripts
/// go through `encode` and the target's own decoding, as the seeds built from them do.
#[test]
fn http_client_steps_reach_input_required_and_its_retry() {
    for (name, setup, ops) in http_client_scripts() {
        let stats = http_client::decode_and_run(&http_client::encode(&setup, &ops));
        assert_eq!(stats.retries, 1, "{name}: {stats:?}");
        assert_eq!(stats.checked_retries, 1, "{name}: {stats:?}");
    }
}

/// Scripted `http_client` sessions: a 2026-07-28 client whose `tools/call` is answered
/// "input required" (with each `requestState`, and without one), then retried and answered.
fn http_client_scripts() -> Vec<(String, http_client::ClientSetup, Vec<http_client::ClientOp>)> {
    use http_client::{BodySpec, ClientOp, ClientSetup, HeadSpec};
    // pick % 6 chooses the shape (0: with a state, 1: without), pick / 8 the state (5).
    [0u8, 48, 96, 144, 192, 1]
        .into_iter()
        .map(|pick| {
            let setup = ClientSetup {
                era: 1,
                open_get: false,
                timeout_secs: 20,
            };
            let ops = vec![
                // server/discover answered, then a tools/call answered "input required".
                ClientOp::Complete {
                    which: 0,
                    sse: false,
                },
                ClientOp::Request {
                    method: 0,
                    progress: false,
                },
                ClientOp::Head(HeadSpec {
                    which: 0,
                    status: 0,
                    media: 0,
                    session: None,
                }),
                ClientOp::Body(BodySpec {
                    which: 0,
                    what: 11,
                    id: 1,
                    frame: 0,
                    event_id: 0,
                    cut: 1,
                    raw: vec![0xff, pick],
                }),
                ClientOp::End {
                    which: 0,
                    jitter: 0,
                },
                // Nothing from the server to answer: the application retries instead.
                ClientOp::Answer {
                    which: 0,
                    error: pick % 2 == 1,
                },
                ClientOp::Complete {
                    which: 0,
                    sse: true,
                },
            ];
            (format!("input-required-{pick}"), setup, ops)
        })
        .collect()
}

/// Every input that once crashed a target, kept under `fuzz/regressions/<target>/`.
#[test]
fn replay_regressions() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for (name, _) in TARGETS {
        let (n, failed) = replay(name, "regressions");
        ran += n;
        failures.extend(failed);
    }
    assert!(ran > 0, "no regression input found under fuzz/regressions");
    assert!(
        failures.is_empty(),
        "{} failing:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_fuzz_binary() {
    for (name, _) in TARGETS {
        let path = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&path).expect("a target file per target");
        assert!(
            text.contains(&format!("logic::{name}(")),
            "{} does not call logic::{name}",
            path.display()
        );
    }
    // And the other way: a target file left out of TARGETS would go unreplayed.
    for path in files_in(&fuzz_dir().join("fuzz_targets")) {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        assert!(
            TARGETS.iter().any(|(name, _)| *name == stem),
            "{} is not in tests/fuzz_logic TARGETS",
            path.display()
        );
    }
}

// ---- Seeds --------------------------------------------------------------------------------

/// Strips the whitespace outside strings from valid JSON (keeps member order, unlike a
/// round trip through a map).
fn compact(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            if b == b'"' {
                in_string = true;
            }
            out.push(b);
        }
    }
    out
}

/// The official 2026-07-28 examples, compacted to one line each: (name, is a whole message,
/// bytes).
fn examples() -> Vec<(String, bool, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/spec/2026-07-28/examples");
    let mut out = Vec::new();
    let mut dirs = files_or_dirs(&root);
    dirs.sort();
    for dir in dirs {
        for file in files_in(&dir) {
            if file.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read(&file).expect("readable example");
            let value: serde_json::Value = serde_json::from_slice(&text).expect("valid example");
            let message = value.get("jsonrpc").is_some();
            let name = file.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((name, message, compact(&text)));
        }
    }
    out
}

fn files_or_dirs(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .expect("examples copied into tests/data")
        .map(|e| e.unwrap().path())
        .collect()
}

/// Lines joined with `\n`, each terminated.
fn lines<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for item in items {
        out.extend_from_slice(item);
        out.push(b'\n');
    }
    out
}

/// What crossed the wire in one recorded session: (client → server, server → client).
struct Transcript {
    to_server: Vec<u8>,
    to_client: Vec<u8>,
}

/// Records a session between engines configured as the conn targets configure them (so the
/// client side replays exactly): the handshake or probe, a few requests both ways with
/// progress, a cancellation, and a ping.
fn record(client_choice: u8, server_choice: u8) -> Transcript {
    let client = fuzz_logic::config(Role::Client, client_choice);
    let server = fuzz_logic::config(Role::Server, server_choice);
    let mut p = Pair::new(client, server);
    p.step();
    let progress = RequestOptions {
        progress: true,
        ..RequestOptions::default()
    };
    let now = p.now;
    let call = RawJson::new(r#"{"name":"get_weather","arguments":{"location":"New York"}}"#);
    let _ = p
        .client
        .request_with(now, "tools/call", Some(call.unwrap()), progress);
    let _ = p.client.request(now, "tools/list", None);
    let slow = p
        .client
        .request(now, "prompts/get", RawJson::new(r#"{"name":"p"}"#).ok());
    let _ = p.client.request(now, "ping", None);
    let _ = p.server.request(now, "roots/list", None);
    p.step();
    let requests: Vec<(OwnedId, String)> = p
        .take_server_events()
        .into_iter()
        .filter_map(|e| match e {
            common::pair::Ev::Request { id, method, .. } => Some((id, method)),
            _ => None,
        })
        .collect();
    for (id, method) in &requests {
        let _ = p
            .server
            .progress(id.as_id(), 50.0, Some(100.0), Some("half"));
        if method != "prompts/get" {
            let result = RawJson::new(r#"{"content":[{"type":"text","text":"72\u00b0F"}]}"#);
            let _ = p.server.respond(id.as_id(), result.unwrap());
        }
    }
    for e in p.take_client_events() {
        if let common::pair::Ev::Request { id, .. } = e {
            let _ = p
                .client
                .respond(id.as_id(), RawJson::new(r#"{"roots":[]}"#).unwrap());
        }
    }
    if let Ok(slow) = slow {
        let _ = p.client.cancel(p.now, slow, Some("no longer needed"));
    }
    p.step();
    p.advance(Duration::from_millis(5));
    let mut to_server = Vec::new();
    let mut to_client = Vec::new();
    for (from_client, bytes) in &p.wire {
        if *from_client {
            to_server.extend_from_slice(bytes);
        } else {
            to_client.extend_from_slice(bytes);
        }
    }
    // Just in case a poll was not drained by the last step.
    while let Some(e) = p.client.poll_event() {
        let _: Event<'_> = e;
    }
    Transcript {
        to_server,
        to_client,
    }
}

/// (client choice, server choice, label) of the recorded sessions: every era and version, a
/// fallback from the probe, small limits, lax lifecycle.
const SESSIONS: &[(u8, u8, &str)] = &[
    (0, 0, "auto-modern"),
    (0x08, 0, "legacy-2025-11-25"),
    (2, 0, "legacy-versions"),
    (3, 3, "modern-only"),
    (4, 0, "2025-03-26"),
    (5, 0, "2024-11-05-or-modern"),
    (0, 2, "auto-fallback"),
    (0x28, 0x20, "small-limits"),
    (0x48, 0x40, "lax-lifecycle"),
];

/// The conn-target input for `stream` whose PRNG seed (one of 32 tried) gets the furthest:
/// the most events, so that time steps do not cut the session short before it starts.
fn deepest(role: Role, choice: u8, salt: u8, stream: &[u8]) -> Vec<u8> {
    (0..32u8)
        .map(|s| with_header(&[choice, salt, s, 1], stream))
        .max_by_key(|input| {
            let log = fuzz_logic::conn_bytes(role, input);
            let ready = log.iter().any(|e| e.starts_with("Ready"));
            (ready, log.len())
        })
        .expect("some seed")
}

fn with_header(header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = header.to_vec();
    out.extend_from_slice(body);
    out
}

/// Every seed file, by target and file name.
fn seeds() -> BTreeMap<(&'static str, String), Vec<u8>> {
    const MAX: usize = 4096;
    let mut seeds = BTreeMap::new();
    let mut add = |target: &'static str, name: String, bytes: Vec<u8>| {
        let bytes = if bytes.len() > MAX {
            bytes[..MAX].to_vec()
        } else {
            bytes
        };
        seeds.insert((target, format!("seed-{name}")), bytes);
    };
    let examples = examples();
    let messages: Vec<&(String, bool, Vec<u8>)> = examples.iter().filter(|e| e.1).collect();

    // decode: every example (messages and not), a few batches, and hand-made edge cases.
    for (name, _, bytes) in &examples {
        add("decode", format!("example-{name}"), bytes.clone());
    }
    for (i, pair) in messages.chunks(3).enumerate().take(4) {
        let mut batch = b"[".to_vec();
        for (j, (_, _, bytes)) in pair.iter().enumerate() {
            if j > 0 {
                batch.push(b',');
            }
            batch.extend_from_slice(bytes);
        }
        batch.extend_from_slice(b",1]");
        add("decode", format!("batch-{i}"), batch);
    }
    let edge: &[(&str, &[u8])] = &[
        ("deep", &[b'['; 200]),
        (
            "surrogates",
            br#"{"jsonrpc":"2.0","id":"\ud83d\ude00\ud800","method":"m"}"#,
        ),
        (
            "big-id",
            br#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
        ),
        ("float-id", br#"{"jsonrpc":"2.0","id":1e0,"result":{}}"#),
        (
            "case-key",
            br#"{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}"#,
        ),
        (
            "dup-key",
            br#"{"jsonrpc":"2.0","id":1,"method":"a","m\u0065thod":"b"}"#,
        ),
        (
            "bad-utf8",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xed\xa0\x80\"}",
        ),
        ("nul", b"{\"jsonrpc\":\"2.0\",\"method\":\"a\x00\"}"),
        (
            "numbers",
            br#"{"jsonrpc":"2.0","method":"n","params":{"a":-0.0e-999,"b":1E+400,"c":[0,-1,2.5]}}"#,
        ),
        (
            "ws",
            b" \t{ \"jsonrpc\" : \"2.0\" ,\r\n \"method\" : \"m\" , \"params\" : { } }\r\n ",
        ),
    ];
    for (name, bytes) in edge {
        add("decode", (*name).to_owned(), bytes.to_vec());
    }

    // line_framer: the examples as lines, with \r\n, blank lines and a long line, at a few caps.
    let all_lines = lines(messages.iter().map(|m| &m.2[..]));
    for (i, chunk) in all_lines.chunks(700).take(6).enumerate() {
        let cap = [63u8, 40, 20, 5, 63, 1][i];
        let mut body = chunk.to_vec();
        if i % 2 == 1 {
            body = String::from_utf8_lossy(&body)
                .replace('\n', "\r\n\n \t\n")
                .into_bytes();
        }
        add(
            "line_framer",
            format!("examples-{i}"),
            with_header(&[cap, i as u8], &body),
        );
    }
    add(
        "line_framer",
        "edges".to_owned(),
        with_header(
            &[9, 7],
            b"0123456789\r\n0123456789\n012345678\r\n\r\n          \n \r\n12345\r",
        ),
    );
    // Caps around the over-long head's bound (256 bytes): a cap byte from 128 on gives 200
    // to 327; lines over the cap, some longer than the head keeps.
    for (i, cap_byte) in [128u8, 184, 255].into_iter().enumerate() {
        let cap = 200 + usize::from(cap_byte - 128);
        let mut body = Vec::new();
        for len in [cap - 1, cap, cap + 1, cap + 60, 700] {
            body.extend((0..len).map(|k| b'a' + (k % 26) as u8));
            body.extend_from_slice(b"\r\n");
        }
        add(
            "line_framer",
            format!("long-head-{i}"),
            with_header(&[cap_byte, i as u8], &body),
        );
    }

    // conn_server, conn_client and chunking: the recorded sessions, each side's stream.
    for (i, &(client_choice, server_choice, label)) in SESSIONS.iter().enumerate() {
        let t = record(client_choice, server_choice);
        let server = deepest(Role::Server, server_choice, i as u8, &t.to_server);
        let client = deepest(Role::Client, client_choice, i as u8, &t.to_client);
        add("conn_server", label.to_owned(), server);
        add("conn_client", label.to_owned(), client);
        add(
            "chunking",
            label.to_owned(),
            with_header(&[server_choice, i as u8], &t.to_server),
        );
    }
    // After a handshake, the example messages, a few at a time.
    let handshake = record(0x08, 0).to_server;
    let first_line = handshake
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or(&[])
        .to_vec();
    let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    for (i, group) in messages.chunks(4).enumerate() {
        let mut body = lines([&first_line[..], &initialized[..]]);
        body.extend(lines(group.iter().map(|m| &m.2[..])));
        add(
            "conn_server",
            format!("examples-{i}"),
            with_header(&[0x08, i as u8, 0, 0], &body),
        );
        add(
            "chunking",
            format!("examples-{i}"),
            with_header(&[0, i as u8], &body),
        );
        // The same messages as a modern client's first words (no handshake).
        let body = lines(group.iter().map(|m| &m.2[..]));
        add(
            "conn_server",
            format!("modern-{i}"),
            with_header(&[0, i as u8, 1, 1], &body),
        );
        add(
            "conn_client",
            format!("examples-{i}"),
            with_header(&[0x08, i as u8, 0, 0], &body),
        );
    }

    // api_sequence: scripted sessions, and example messages fed to either side.
    for (name, setup, ops) in api_scripts(&messages) {
        add("api_sequence", name, encode_ops(&setup, &ops));
    }

    for (name, bytes) in sse_seeds() {
        add("sse_framer", name, bytes);
    }
    // http_server: every field of its input is a small choice, so plain pseudo-random bytes
    // already make varied request sequences; the fuzzer takes it from there.
    let mut state = 0x6874_7470_u64;
    // The same bytes on every machine, so the seeds stay current.
    let mut random = |len: usize| xorshift_bytes(&mut state, len);
    for (i, len) in [96usize, 256, 512, 1024, 2048, 4000]
        .into_iter()
        .enumerate()
    {
        add("http_server", format!("random-{i}"), random(len));
    }
    // c_abi's HTTP harness: the marker byte, then pseudo-random bytes (every field of its
    // input is a small choice, as for http_server).
    for (i, len) in [128usize, 512, 2048, 4000].into_iter().enumerate() {
        let mut bytes = vec![fuzz_logic::c_abi_http::HTTP_MARKER];
        bytes.extend(random(len));
        add("c_abi", format!("http-random-{i}"), bytes);
    }
    // http_client: small choices too, for each era and with or without a GET stream.
    for (i, len) in [64usize, 256, 1024, 2048, 4000, 4000]
        .into_iter()
        .enumerate()
    {
        add("http_client", format!("random-{i}"), random(len));
    }
    for (name, setup, ops) in http_client_scripts() {
        add("http_client", name, http_client::encode(&setup, &ops));
    }
    // c_abi's task-table harness: the marker byte, then pseudo-random bytes.
    for (i, len) in [128usize, 1024, 4000].into_iter().enumerate() {
        let mut bytes = vec![fuzz_logic::c_abi_tasks::TASKS_MARKER];
        bytes.extend(random(len));
        add("c_abi", format!("tasks-random-{i}"), bytes);
    }
    // tasks: small choices as well; a third of the ops reach a task the model knows.
    for (i, len) in [64usize, 256, 1024, 2048, 4000, 4000]
        .into_iter()
        .enumerate()
    {
        add("tasks", format!("random-{i}"), random(len));
    }
    // c_abi's reviewed-listen harness (after the others, which keep their bytes).
    for (i, len) in [256usize, 2048].into_iter().enumerate() {
        let mut bytes = vec![fuzz_logic::c_abi_listen::LISTEN_MARKER];
        bytes.extend(random(len));
        add("c_abi", format!("listen-random-{i}"), bytes);
    }
    // c_abi's connection-side task and elicitation calls (after the others too).
    for (i, len) in [512usize, 3000].into_iter().enumerate() {
        let mut bytes = vec![fuzz_logic::c_abi_serve::SERVE_MARKER];
        bytes.extend(random(len));
        add("c_abi", format!("serve-random-{i}"), bytes);
    }
    for (name, setup, ops) in abi_scripts() {
        let bytes = c_abi::encode_abi(&setup, &ops);
        assert!(
            bytes.len() <= MAX,
            "c_abi seed {name} has {} bytes",
            bytes.len()
        );
        add("c_abi", name, bytes);
    }
    seeds
}

/// The official examples that are messages, as their files hold them (pretty-printed, so
/// several lines each).
fn example_texts() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/spec/2026-07-28/examples");
    let mut dirs = files_or_dirs(&root);
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        for file in files_in(&dir) {
            let text = std::fs::read_to_string(&file).expect("readable example");
            if file.extension().is_some_and(|e| e == "json") && text.contains("\"jsonrpc\"") {
                out.push(text);
            }
        }
    }
    out
}

/// The cap byte of an sse_framer input for a cap of about `bytes`.
fn sse_cap(bytes: usize) -> u8 {
    u8::try_from(bytes.div_ceil(SSE_CAP_UNIT)).unwrap_or(u8::MAX)
}

/// sse_framer inputs: the examples as event streams the way MCP servers send them (ids,
/// priming events, retry, keep-alive comments), pretty-printed and compact, with each line
/// ending, at caps that fit them and caps that do not; and hand-made edge cases.
fn sse_seeds() -> Vec<(String, Vec<u8>)> {
    let texts = example_texts();
    let mut seeds = Vec::new();
    for (i, group) in texts.chunks(4).enumerate() {
        let mut stream = Vec::new();
        if i % 4 == 0 {
            stream.extend_from_slice(b"\xEF\xBB\xBF");
        }
        // A priming event: an id and empty data.
        sse::write_event(&mut stream, Some(&format!("{i}-0")), None, "");
        sse::write_retry(&mut stream, 1000 + i as u64);
        for (j, text) in group.iter().enumerate() {
            let data = if j % 2 == 0 {
                text.trim_end().to_owned()
            } else {
                String::from_utf8(compact(text.as_bytes())).expect("UTF-8")
            };
            let id = format!("{i}-{}", j + 1);
            let event = (j == 1).then_some("message");
            sse::write_event(&mut stream, Some(&id), event, &data);
            if j == 2 {
                sse::write_comment(&mut stream, "keep-alive");
            }
        }
        let ending: &[u8] = [&b"\n"[..], b"\r\n", b"\r"][i % 3];
        let stream = if ending == b"\n" {
            stream
        } else {
            String::from_utf8(stream)
                .expect("UTF-8")
                .replace('\n', std::str::from_utf8(ending).unwrap())
                .into_bytes()
        };
        let longest = group.iter().map(String::len).max().unwrap_or(0);
        let cap = if i % 3 == 2 {
            sse_cap(longest / 2)
        } else {
            sse_cap(longest + 200)
        };
        seeds.push((
            format!("examples-{i}"),
            with_header(&[cap, i as u8], &stream),
        ));
    }
    let mut long_line = b"data: ".to_vec();
    long_line.extend(std::iter::repeat_n(b'x', 300));
    long_line.extend_from_slice(b"\ndata: tail\n\ndata: next\n\n");
    let edges: &[(&str, u8, &[u8])] = &[
        (
            "fields",
            32,
            b"\xEF\xBB\xBF: c\r\nretry: 500\r\nid: 1\r\ndata: {\"a\":1}\r\n\r\nevent: message\ndata: one\ndata:two\nid: 2\n\n\rdata\r\rid: 3\rdata: x\r\r: k\n\ndata: no id\n\n",
        ),
        ("long-line", 0, &long_line),
        (
            "empty-fields",
            16,
            b"event:\ndata: {}\n\nevent\ndata\n\nid\ndata: b\n\nid: 8\n\nretry:\nretry: 99999999999999999999999\nretry: 1x\n\n",
        ),
        (
            "nul-and-bytes",
            16,
            b"id: a\0b\ndata: \xFF\xE2\x82\n:\xFF\ndata\xFF: x\n\x00: y\ndata:  two spaces\n\ndata: unfinished",
        ),
        (
            "bom-split",
            8,
            b"\xEF\xBB\xEF\xBB\xBFdata: a\r\r\n\n\r\ndata: b\r",
        ),
    ];
    for (name, cap, stream) in edges {
        seeds.push(((*name).to_owned(), with_header(&[*cap, 3], stream)));
    }
    seeds
}

fn setup(versions: Versions) -> Setup {
    Setup {
        versions,
        handshake: true,
        strict: true,
        reset_on_progress: false,
    }
}

/// Scripted api_sequence inputs: a session of each era that uses every operation, and the
/// example messages fed to each side.
fn api_scripts(messages: &[&(String, bool, Vec<u8>)]) -> Vec<(String, Setup, Vec<Op>)> {
    use Op::*;
    let session = |client_method: Method, server_method: Method| {
        vec![
            Request {
                side: Side::Client,
                method: client_method,
                progress: true,
                timeout_ms: Some(5000),
            },
            Request {
                side: Side::Client,
                method: Method::ToolsList,
                progress: false,
                timeout_ms: None,
            },
            Request {
                side: Side::Server,
                method: server_method,
                progress: false,
                timeout_ms: Some(100),
            },
            Step,
            Progress {
                side: Side::Server,
                target: Target::Known(0),
                value: 10,
            },
            Log {
                target: Target::Known(0),
                level: 3,
            },
            Respond {
                side: Side::Server,
                target: Target::Known(0),
                reply: Reply::InputRequired,
            },
            Respond {
                side: Side::Server,
                target: Target::Known(1),
                reply: Reply::Result,
            },
            Deliver {
                to: Side::Client,
                limit: Some(40),
            },
            Deliver {
                to: Side::Client,
                limit: None,
            },
            Retry {
                target: Target::Known(0),
                responses: true,
            },
            Cancel {
                side: Side::Client,
                target: Target::Known(1),
            },
            Notify {
                side: Side::Server,
                notice: Notice::ToolsChanged,
            },
            Notify {
                side: Side::Client,
                notice: Notice::RootsChanged,
            },
            Step,
            Respond {
                side: Side::Client,
                target: Target::Known(0),
                reply: Reply::Error,
            },
            FeedFrame {
                to: Side::Client,
                frame: Frame::ResultStringId,
                target: Target::Known(2),
            },
            FeedFrame {
                to: Side::Server,
                frame: Frame::Batch,
                target: Target::Int(77),
            },
            Advance { ms: 200 },
            Step,
            Drive,
            Close {
                side: Side::Client,
                grace_ms: 300,
            },
            Step,
            Drive,
        ]
    };
    let mut scripts = vec![
        (
            "session-latest".to_owned(),
            setup(Versions::Latest),
            session(Method::ToolsCall, Method::RootsList),
        ),
        (
            "session-modern".to_owned(),
            setup(Versions::Modern),
            session(Method::ToolsCall, Method::Sampling),
        ),
        (
            "session-dual".to_owned(),
            setup(Versions::Dual),
            session(Method::PromptsGet, Method::Elicit),
        ),
        (
            "session-batches".to_owned(),
            setup(Versions::Batches),
            session(Method::ResourcesRead, Method::Ping),
        ),
        (
            "session-oldest-lax".to_owned(),
            Setup {
                versions: Versions::Oldest,
                handshake: false,
                strict: false,
                reset_on_progress: true,
            },
            session(Method::Listen, Method::Custom),
        ),
    ];
    let timeouts = vec![
        Request {
            side: Side::Client,
            method: Method::Custom,
            progress: true,
            timeout_ms: Some(50),
        },
        Request {
            side: Side::Client,
            method: Method::Complete,
            progress: false,
            timeout_ms: None,
        },
        Request {
            side: Side::Client,
            method: Method::SetLevel,
            progress: false,
            timeout_ms: Some(60),
        },
        Deliver {
            to: Side::Server,
            limit: None,
        },
        FeedFrame {
            to: Side::Client,
            frame: Frame::ProgressFor,
            target: Target::Known(0),
        },
        Advance { ms: 40 },
        FeedFrame {
            to: Side::Client,
            frame: Frame::ProgressFor,
            target: Target::Known(0),
        },
        Drive,
        Drive,
        Step,
        Eof { side: Side::Server },
        Step,
    ];
    scripts.push(("timeouts".to_owned(), setup(Versions::Latest), timeouts));
    // 2026-07-28 listens under review (`reset_on_progress` turns the policy on): one
    // granted, then told of a list change; one refused.
    let listen = |reply| {
        [
            Request {
                side: Side::Client,
                method: Method::Listen,
                progress: false,
                timeout_ms: None,
            },
            Step,
            Respond {
                side: Side::Server,
                target: Target::Known(0),
                reply,
            },
            Step,
        ]
    };
    let mut review = listen(Reply::InputRequired).to_vec();
    review.extend([
        Notify {
            side: Side::Server,
            notice: Notice::ToolsChanged,
        },
        Step,
    ]);
    review.extend(listen(Reply::Error));
    review.extend([
        Close {
            side: Side::Client,
            grace_ms: 100,
        },
        Step,
        Drive,
    ]);
    let reviewing = Setup {
        versions: Versions::Modern,
        handshake: true,
        strict: true,
        reset_on_progress: true,
    };
    scripts.push(("listen-review".to_owned(), reviewing, review));
    // 2025-11-25 tasks: one call answered with its handle in time, one whose handle comes
    // after it timed out (the client then sends `tasks/cancel`, which the server answers).
    let tasks = vec![
        Request {
            side: Side::Client,
            method: Method::ToolsCallTask,
            progress: false,
            timeout_ms: None,
        },
        Request {
            side: Side::Client,
            method: Method::ToolsCallTask,
            progress: true,
            timeout_ms: Some(50),
        },
        Deliver {
            to: Side::Server,
            limit: None,
        },
        Respond {
            side: Side::Server,
            target: Target::Known(0),
            reply: Reply::TaskHandle,
        },
        Advance { ms: 100 },
        Respond {
            side: Side::Server,
            target: Target::Known(1),
            reply: Reply::TaskHandle,
        },
        Step,
        Respond {
            side: Side::Server,
            target: Target::Known(2),
            reply: Reply::Result,
        },
        Step,
    ];
    scripts.push(("late-task".to_owned(), setup(Versions::Latest), tasks));
    for (i, group) in messages.chunks(8).enumerate() {
        let mut ops = Vec::new();
        for (j, (_, _, bytes)) in group.iter().enumerate() {
            let to = if j % 2 == 0 {
                Side::Server
            } else {
                Side::Client
            };
            let mut line = bytes.clone();
            line.push(b'\n');
            ops.push(Feed {
                to,
                bytes: fuzz_logic::Blob(line),
            });
            ops.push(Respond {
                side: to,
                target: Target::Known(j as u8),
                reply: Reply::Result,
            });
            ops.push(Step);
        }
        let versions = if i % 2 == 0 {
            Versions::Modern
        } else {
            Versions::Dual
        };
        scripts.push((format!("examples-{i}"), setup(versions), ops));
    }
    scripts
}

/// The seed files on disk match the generator (or are rewritten, with
/// `MCPWIRE_WRITE_SEEDS=1`); the api_sequence writer round-trips through `arbitrary`.
#[test]
fn seed_corpora_are_current() {
    let seeds = seeds();
    for ((target, name), bytes) in &seeds {
        if *target == "api_sequence" {
            let (_, ops) = parse_ops(bytes).expect("a setup");
            let again = encode_ops(&parse_ops(bytes).unwrap().0, &ops);
            assert_eq!(
                &again, bytes,
                "{name}: the op writer and arbitrary disagree"
            );
        }
        let marked = [
            fuzz_logic::c_abi_http::HTTP_MARKER,
            fuzz_logic::c_abi_tasks::TASKS_MARKER,
            fuzz_logic::c_abi_listen::LISTEN_MARKER,
            fuzz_logic::c_abi_serve::SERVE_MARKER,
        ];
        if *target == "c_abi" && !bytes.first().is_some_and(|b| marked.contains(b)) {
            let (setup, ops) = c_abi::parse_abi(bytes).expect("a setup");
            let again = c_abi::encode_abi(&setup, &ops);
            assert_eq!(
                &again, bytes,
                "{name}: the c_abi writer and arbitrary disagree"
            );
        }
    }
    let write = std::env::var_os("MCPWIRE_WRITE_SEEDS").is_some();
    let mut problems = Vec::new();
    let mut total = 0;
    for (target, _) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        let wanted: BTreeMap<&String, &Vec<u8>> = seeds
            .iter()
            .filter(|((t, _), _)| t == target)
            .map(|((_, n), b)| (n, b))
            .collect();
        assert!(!wanted.is_empty(), "no seeds for {target}");
        if write {
            std::fs::create_dir_all(&dir).unwrap();
        }
        for file in files_in(&dir) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("seed-") && !wanted.contains_key(&name) {
                if write {
                    std::fs::remove_file(&file).unwrap();
                } else {
                    problems.push(format!("stale {}", file.display()));
                }
            }
        }
        for (name, bytes) in wanted {
            total += bytes.len();
            let path = dir.join(name);
            if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                if write {
                    std::fs::write(&path, bytes).unwrap();
                } else {
                    problems.push(format!("missing or different {}", path.display()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "seed corpora out of date (MCPWIRE_WRITE_SEEDS=1 cargo test --test fuzz_replay seed_corpora):\n{}",
        problems.join("\n")
    );
    assert!(total < 1024 * 1024, "seed corpora too large: {total} bytes");
    // Keep the headers in step with the targets.
    assert_eq!(
        (LINE_FRAMER_HEADER, CONN_HEADER, CHUNKING_HEADER, SSE_HEADER),
        (2, 4, 2, 2)
    );
}

/// The C ABI's HTTP harness runs many pseudo-random inputs clean, and they reach the places
/// it is there for: streams drained into the client, sessions, views refused when stale.
#[test]
fn c_abi_http_harness_runs_clean_on_random_inputs() {
    let mut state = 0x6d63_7077_u64;
    let mut total = fuzz_logic::c_abi_http::Reached::default();
    for round in 0..300 {
        let len = 64 + (round * 37) % 3000;
        let mut bytes = vec![fuzz_logic::c_abi_http::HTTP_MARKER];
        bytes.extend(xorshift_bytes(&mut state, len));
        let r = fuzz_logic::c_abi_http::c_abi_http_reached(&bytes[1..]);
        total.ok_responses += r.ok_responses;
        total.served += r.served;
        total.stream_bytes += r.stream_bytes;
        total.stale_refused += r.stale_refused;
        total.client_events += r.client_events;
    }
    let t = total;
    assert!(
        t.ok_responses > 100
            && t.served > 10
            && t.stream_bytes > 100
            && t.stale_refused > 20
            && t.client_events > 50,
        "the harness stays shallow: {t:?}"
    );
}

/// The seeds get past the handshake and exercise what they were written for, so fuzzing
/// starts from deep states.
#[test]
fn seeds_reach_deep_states() {
    let read = |target: &str, name: &str| {
        std::fs::read(fuzz_dir().join("corpus").join(target).join(name)).expect("seed file")
    };
    for (_, _, label) in SESSIONS {
        let seed = format!("seed-{label}");
        let server = fuzz_logic::conn_bytes(Role::Server, &read("conn_server", &seed)).join("\n");
        let client = fuzz_logic::conn_bytes(Role::Client, &read("conn_client", &seed)).join("\n");
        assert!(
            server.contains("Ready") && server.contains("Request {"),
            "{label} server:\n{server}"
        );
        assert!(client.contains("Ready"), "{label} client:\n{client}");
    }
    let ended = |name: &str| {
        let [client, server] = fuzz_logic::api_sequence_summary(&read("api_sequence", name));
        let hows = |v: Vec<(i64, &'static str)>| v.into_iter().map(|(_, h)| h).collect::<Vec<_>>();
        (hows(client), hows(server))
    };
    let (client, _) = ended("seed-session-modern");
    assert!(
        client.contains(&"input required") && client.contains(&"response"),
        "{client:?}"
    );
    let (client, server) = ended("seed-session-latest");
    assert!(
        client.contains(&"response") && server.contains(&"timed out"),
        "{client:?} {server:?}"
    );
    let tally = |name: &str| c_abi::c_abi_tally(&read("c_abi", &format!("seed-{name}")));
    for name in [
        "session-dual",
        "session-legacy",
        "session-modern",
        "session-near-the-end",
    ] {
        let t = tally(name);
        for key in [
            "MCPW_EVENT_READY",
            "MCPW_EVENT_REQUEST",
            "MCPW_EVENT_RESPONSE",
            "MCPW_EVENT_CLOSED",
            "mcpw_conn_respond MCPW_OK",
        ] {
            assert!(t.contains_key(key), "{name}: no {key} in {t:#?}");
        }
        assert!(
            t.contains_key("MCPW_EVENT_TIMED_OUT") || t.contains_key("MCPW_EVENT_ABANDONED"),
            "{name}: every request answered in {t:#?}"
        );
    }
    let t = tally("session-modern");
    assert!(
        t.contains_key("MCPW_EVENT_INPUT_REQUIRED") && t.contains_key("mcpw_conn_retry MCPW_OK"),
        "{t:#?}"
    );
    let t = tally("mistakes");
    for code in [
        "MCPW_ERR_NULL_ARGUMENT",
        "MCPW_ERR_INVALID_UTF8",
        "MCPW_ERR_JSON_WRONG_TYPE",
        "MCPW_ERR_INVALID_ID",
        "MCPW_ERR_UNKNOWN_VERSION",
        "MCPW_ERR_INVALID_ARGUMENT",
        "MCPW_ERR_CONSUME_TOO_MUCH",
        "MCPW_ERR_CLOSED",
    ] {
        assert!(
            t.keys().any(|k| k.ends_with(code)),
            "mistakes: no {code} in {t:#?}"
        );
    }
    let (client, _) = ended("seed-late-task");
    assert_eq!(client, ["task created", "timed out"], "{client:?}");
    let [_, server_received] =
        fuzz_logic::api_sequence_requests_received(&read("api_sequence", "seed-late-task"));
    assert_eq!(
        server_received,
        ["tools/call", "tools/call", "tasks/cancel"],
        "the late handle's task is cancelled"
    );
    let seed = read("api_sequence", "seed-listen-review");
    assert_eq!(fuzz_logic::api_sequence_listen_grants(&seed), 1);
    let [_, server_received] = fuzz_logic::api_sequence_requests_received(&seed);
    assert!(
        server_received.len() >= 2 && server_received.iter().all(|m| m == "subscriptions/listen"),
        "{server_received:?}"
    );
    let (client, _) = ended("seed-timeouts");
    assert!(
        client.contains(&"timed out") && client.contains(&"abandoned"),
        "{client:?}"
    );
}

// ---- c_abi seeds --------------------------------------------------------------------------

/// The official example messages, parsed: requests as (method, params without `_meta`, which
/// the engine writes itself) and results.
fn example_calls() -> (Vec<(String, String)>, Vec<String>) {
    let mut requests = Vec::new();
    let mut results = Vec::new();
    for text in c_abi::EXAMPLES {
        let mut value: serde_json::Value = serde_json::from_str(text).expect("valid example");
        if let Some(result) = value.get("result") {
            results.push(result.to_string());
        }
        if value.get("id").is_some()
            && let Some(method) = value.get("method").and_then(|m| m.as_str())
        {
            let method = method.to_owned();
            let params = value.get_mut("params").map(|p| {
                if let Some(o) = p.as_object_mut() {
                    o.remove("_meta");
                }
                p.to_string()
            });
            requests.push((method, params.unwrap_or_else(|| "{}".to_owned())));
        }
    }
    (requests, results)
}

fn bytes(text: &str) -> c_abi::Text {
    c_abi::Text::Bytes(fuzz_logic::Blob(text.as_bytes().to_vec()))
}

/// The index of `entry` in one of the target's pick lists.
fn pick_of(list: &[&str], entry: &str) -> c_abi::Text {
    let i = list.iter().position(|e| *e == entry).expect("in the list");
    c_abi::Text::Pick(i as u8)
}

/// A client (config 0, connection 0) and a server (config 1, connection 1) speaking the
/// versions of `mask`, wired together: the handshake, half of the example requests (`half`
/// 0 or 1) with half of the example results, progress, logging, "input required" and its retry, a cancel, a request
/// the other way, getters, time-outs, a close and EOF.
fn abi_session(mask: u8, era: u8, small: bool, half: usize) -> Vec<c_abi::AbiOp> {
    use c_abi::{AbiOp::*, IdArg, LimitsArg, Number, Options, Own, Setting, Text, VersionsArg};
    let (requests, results) = example_calls();
    let mut ops = Vec::new();
    for (slot, role, caps) in [(0u8, 1u8, 11u8), (1, 2, 12)] {
        ops.push(ConfigNew {
            slot,
            role,
            name: Text::Pick(0),
            version: Text::Pick(1),
            null_out: false,
        });
        ops.push(ConfigSet {
            slot,
            setting: Setting::Versions(VersionsArg::List { mask, extra: None }),
        });
        ops.push(ConfigSet {
            slot,
            setting: Setting::Capabilities(Text::Pick(caps)),
        });
        if small {
            ops.push(ConfigSet {
                slot,
                setting: Setting::Limits(LimitsArg::Small),
            });
            ops.push(ConfigSet {
                slot,
                setting: Setting::Timeouts(2_000, 3_000),
            });
        }
    }
    ops.push(ConfigSet {
        slot: 0,
        setting: Setting::ClientEra(era),
    });
    ops.push(ConfigSet {
        slot: 1,
        setting: Setting::Instructions(Text::Pick(3)),
    });
    ops.push(ConnNew {
        config: 0,
        conn: 0,
        null_out: false,
    });
    ops.push(ConnNew {
        config: 1,
        conn: 1,
        null_out: false,
    });
    for _ in 0..2 {
        ops.push(Deliver {
            from: 0,
            to: 1,
            limit: None,
        });
        ops.push(Deliver {
            from: 1,
            to: 0,
            limit: None,
        });
    }
    // First a tools/call, which a 2026-07-28 server may answer with "input required".
    ops.push(Request {
        conn: 0,
        method: pick_of(c_abi_methods(), "tools/call"),
        params: Text::Pick(1),
        options: Options::Null,
        null_out: false,
    });
    for (k, (method, params)) in requests.iter().skip(half).step_by(2).enumerate() {
        ops.push(Request {
            conn: 0,
            method: bytes(method),
            params: bytes(params),
            options: Options::Given {
                timeout_ms: Some(5_000),
                progress: u8::from(k % 3 == 0),
                reset_on_progress: (k % 3) as u8,
            },
            null_out: false,
        });
    }
    ops.push(Deliver {
        from: 0,
        to: 1,
        limit: Some(700),
    });
    ops.push(Deliver {
        from: 0,
        to: 1,
        limit: None,
    });
    // (Sessions that do not drain after every call drain here.)
    ops.push(Drain {
        conn: 1,
        null_out: false,
    });
    ops.push(Progress {
        conn: 1,
        id: IdArg::Peer(0),
        progress: Number::Int(50),
        total: Some(Number::Int(100)),
        message: Text::Pick(3),
    });
    ops.push(Log {
        conn: 1,
        id: IdArg::Peer(1),
        level: 6,
        logger: Text::Pick(0),
        data: Text::Pick(26),
        null_out: false,
    });
    ops.push(RequestContext {
        conn: 1,
        id: IdArg::Peer(0),
        null_out: false,
    });
    ops.push(InputRequired {
        conn: 1,
        id: IdArg::Peer(0),
        requests: Text::Pick(15),
        state: Text::Pick(12),
    });
    for (k, result) in results.iter().skip(half).step_by(2).enumerate() {
        ops.push(Respond {
            conn: 1,
            id: IdArg::Peer(k as u8),
            result: bytes(result),
        });
    }
    ops.push(RespondError {
        conn: 1,
        id: IdArg::Peer(3),
        code: 4,
        message: Text::Pick(0),
        data: Text::Pick(20),
    });
    ops.push(Request {
        conn: 1,
        method: pick_of(c_abi_methods(), "roots/list"),
        params: Text::Absent,
        options: Options::Null,
        null_out: false,
    });
    ops.push(Notify {
        conn: 1,
        method: pick_of(c_abi_methods(), "notifications/tools/list_changed"),
        params: Text::Absent,
    });
    ops.push(Deliver {
        from: 1,
        to: 0,
        limit: None,
    });
    ops.push(Drain {
        conn: 0,
        null_out: false,
    });
    ops.push(Retry {
        conn: 0,
        request: Own::Known(0),
        responses: Text::Pick(16),
        null_out: false,
    });
    ops.push(Cancel {
        conn: 0,
        request: Own::Known(3),
        reason: Text::Pick(0),
    });
    ops.push(Deliver {
        from: 0,
        to: 1,
        limit: None,
    });
    ops.push(Deliver {
        from: 1,
        to: 0,
        limit: None,
    });
    ops.push(Getters {
        conn: 0,
        null_out: false,
    });
    ops.push(Getters {
        conn: 1,
        null_out: false,
    });
    ops.push(Advance { ms: 6_000 });
    ops.push(Timeout {
        conn: 0,
        to_deadline: false,
    });
    ops.push(Timeout {
        conn: 1,
        to_deadline: true,
    });
    ops.push(Close {
        conn: 0,
        grace_ms: Some(100),
    });
    ops.push(Deliver {
        from: 0,
        to: 1,
        limit: None,
    });
    ops.push(Eof { conn: 1 });
    ops.push(Take {
        conn: 1,
        limit: None,
        null_out: 0,
    });
    ops
}

fn c_abi_methods() -> &'static [&'static str] {
    c_abi::METHODS
}

/// c_abi inputs: sessions of each era, the examples fed to each side as lines and frames,
/// every mistake the header says it refuses, and the JSON helpers on the examples.
fn abi_scripts() -> Vec<(String, c_abi::AbiSetup, Vec<c_abi::AbiOp>)> {
    use c_abi::{
        AbiOp::*, AbiSetup, Clock, IdArg, IdPick, LimitsArg, Number, Options, Own, Setting, Text,
        VersionsArg,
    };
    let setup = |drain_always: bool, seed: u8| AbiSetup {
        clock: Clock::At(1_000),
        drain_always,
        seed,
    };
    // Each session with the PRNG seed (for answers given on the spot) that gets the furthest:
    // the most kinds of events and of successful calls.
    let richest = |clock: Clock, drain_always: bool, ops: Vec<c_abi::AbiOp>| {
        let setup = (0..32u8)
            .map(|seed| AbiSetup {
                clock,
                drain_always,
                seed,
            })
            .max_by_key(|setup| {
                let tally = c_abi::c_abi_tally(&c_abi::encode_abi(setup, &ops));
                tally
                    .keys()
                    .filter(|k| k.starts_with("MCPW_EVENT") || k.ends_with("MCPW_OK"))
                    .count()
            })
            .expect("some seed");
        (setup, ops)
    };
    let at = Clock::At(1_000);
    let mut scripts = Vec::new();
    for (name, clock, drain_always, ops) in [
        ("session-dual", at, true, abi_session(0x1f, 1, false, 0)),
        ("session-legacy", at, true, abi_session(0x0f, 2, true, 1)),
        ("session-modern", at, false, abi_session(0x10, 3, false, 1)),
        (
            "session-near-the-end",
            Clock::NearTheEnd,
            true,
            abi_session(0x08, 2, true, 0),
        ),
    ] {
        let (setup, ops) = richest(clock, drain_always, ops);
        scripts.push((name.to_owned(), setup, ops));
    }

    // The examples fed to a server and a client, as lines and as frames.
    let mut ops = vec![
        ConfigNew {
            slot: 0,
            role: 2,
            name: Text::Pick(0),
            version: Text::Pick(1),
            null_out: false,
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Capabilities(Text::Pick(12)),
        },
        ConnNew {
            config: 0,
            conn: 0,
            null_out: false,
        },
        ConfigNew {
            slot: 1,
            role: 1,
            name: Text::Pick(0),
            version: Text::Pick(1),
            null_out: false,
        },
        ConnNew {
            config: 1,
            conn: 1,
            null_out: false,
        },
    ];
    for k in 0..c_abi::EXAMPLES.len() as u8 {
        ops.push(FeedExample {
            conn: 0,
            example: k,
            id: (k % 2 == 0).then_some(IdPick::Int(i64::from(k))),
            stream: (k % 3 == 0).then_some(k),
        });
        ops.push(FeedExample {
            conn: 1,
            example: k,
            id: Some(IdPick::Own(0)),
            stream: None,
        });
        ops.push(Take {
            conn: k % 2,
            limit: Some(100),
            null_out: 0,
        });
    }
    for (k, frame) in [
        fuzz_logic::Frame::Result,
        fuzz_logic::Frame::ErrorReply,
        fuzz_logic::Frame::InputRequired,
        fuzz_logic::Frame::ProgressFor,
        fuzz_logic::Frame::Batch,
        fuzz_logic::Frame::CancelIt,
    ]
    .into_iter()
    .enumerate()
    {
        ops.push(FeedFrame {
            conn: (k % 2) as u8,
            frame,
            id: IdPick::Peer(0),
            stream: (k == 4).then_some(2),
        });
    }
    ops.push(Drain {
        conn: 0,
        null_out: false,
    });
    scripts.push(("examples".to_owned(), setup(true, 5), ops));

    // Every mistake the header names, on NULL, live and closed handles.
    let nul = Text::NullWithLength(3);
    let huge = Text::NullWithLength(u8::MAX);
    let bad_utf8 = Text::Bytes(fuzz_logic::Blob(vec![b'a', 0xFF, 0xC0]));
    let mut ops = vec![
        Request {
            conn: 2,
            method: Text::Pick(0),
            params: Text::Absent,
            options: Options::Null,
            null_out: false,
        },
        ConfigNew {
            slot: 0,
            role: 0,
            name: Text::Pick(0),
            version: Text::Pick(1),
            null_out: false,
        },
        ConfigNew {
            slot: 0,
            role: u8::MAX,
            name: nul.clone(),
            version: bad_utf8.clone(),
            null_out: true,
        },
        ConnNew {
            config: 1,
            conn: 0,
            null_out: false,
        },
        ConfigNew {
            slot: 0,
            role: 1,
            name: Text::Pick(4),
            version: Text::Empty,
            null_out: false,
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Versions(VersionsArg::NullWithCount(2)),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Versions(VersionsArg::NullWithCount(u8::MAX)),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Versions(VersionsArg::List {
                mask: 0x60,
                extra: Some(bad_utf8.clone()),
            }),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Info(Text::Pick(21)),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Capabilities(Text::Pick(18)),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Instructions(huge.clone()),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Timeouts(0, u32::MAX),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Limits(LimitsArg::Null),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Limits(LimitsArg::Given {
                max_frame: 100,
                outbound: 0,
                inbound: 1,
                buffered: 1,
                remembered: 1,
                queued: 1,
            }),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::Policy(0xff),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::ClientEra(9),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::DiscoverTimeout(0),
        },
        ConfigSet {
            slot: 0,
            setting: Setting::DiscoverCache(10, 7),
        },
        ConfigGet {
            slot: 0,
            null_out: true,
        },
        ConfigGet {
            slot: 1,
            null_out: false,
        },
        ConnNew {
            config: 0,
            conn: 0,
            null_out: true,
        },
        ConnNew {
            config: 0,
            conn: 0,
            null_out: false,
        },
        Feed {
            conn: 0,
            bytes: huge.clone(),
            stream: None,
        },
        Feed {
            conn: 0,
            bytes: nul.clone(),
            stream: Some(1),
        },
        Feed {
            conn: 0,
            bytes: Text::Empty,
            stream: None,
        },
        Feed {
            conn: 0,
            bytes: bad_utf8.clone(),
            stream: None,
        },
        Request {
            conn: 0,
            method: bad_utf8.clone(),
            params: Text::Pick(28),
            options: Options::Given {
                timeout_ms: None,
                progress: 5,
                reset_on_progress: 9,
            },
            null_out: true,
        },
        Request {
            conn: 0,
            method: Text::Pick(0),
            params: Text::Pick(22),
            options: Options::HugeTimeout,
            null_out: false,
        },
        RequestRelated {
            conn: 0,
            parent: IdArg::Kind(9),
            method: Text::Pick(11),
            params: Text::Absent,
            options: Options::Null,
        },
        Notify {
            conn: 0,
            method: Text::Pick(19),
            params: Text::Pick(9),
        },
        Respond {
            conn: 0,
            id: IdArg::Str(Text::Pick(6)),
            result: Text::Absent,
        },
        Respond {
            conn: 0,
            id: IdArg::Null,
            result: Text::Pick(0),
        },
        RespondError {
            conn: 0,
            id: IdArg::Str(nul.clone()),
            code: u8::MAX,
            message: bad_utf8.clone(),
            data: Text::Pick(30),
        },
        Progress {
            conn: 0,
            id: IdArg::Int(-1),
            progress: Number::NaN,
            total: Some(Number::Infinite),
            message: nul.clone(),
        },
        Log {
            conn: 0,
            id: IdArg::Int(1),
            level: u8::MAX,
            logger: Text::Absent,
            data: Text::Absent,
            null_out: true,
        },
        InputRequired {
            conn: 0,
            id: IdArg::Str(Text::Pick(2)),
            requests: Text::Pick(22),
            state: bad_utf8.clone(),
        },
        Retry {
            conn: 0,
            request: Own::Raw(i64::MIN),
            responses: Text::Pick(21),
            null_out: true,
        },
        Cancel {
            conn: 0,
            request: Own::Known(0),
            reason: huge.clone(),
        },
        Take {
            conn: 0,
            limit: Some(3),
            null_out: 1,
        },
        Take {
            conn: 0,
            limit: Some(0),
            null_out: 2,
        },
        Take {
            conn: 0,
            limit: None,
            null_out: 3,
        },
        ConsumeTooMuch { conn: 0, extra: 10 },
        Drain {
            conn: 0,
            null_out: true,
        },
        Getters {
            conn: 0,
            null_out: true,
        },
        RequestContext {
            conn: 0,
            id: IdArg::Null,
            null_out: true,
        },
        Close {
            conn: 0,
            grace_ms: None,
        },
        Close {
            conn: 0,
            grace_ms: Some(0),
        },
        Timeout {
            conn: 0,
            to_deadline: true,
        },
        Request {
            conn: 0,
            method: Text::Pick(0),
            params: Text::Absent,
            options: Options::Null,
            null_out: false,
        },
        Eof { conn: 0 },
        Eof { conn: 0 },
        Respond {
            conn: 0,
            id: IdArg::Int(1),
            result: Text::Pick(0),
        },
        Getters {
            conn: 0,
            null_out: false,
        },
        ConnFree { conn: 0 },
        ConnFree { conn: 0 },
        Getters {
            conn: 0,
            null_out: false,
        },
        ConfigFree { slot: 0 },
        ConfigFree { slot: 0 },
        Message { code: 0 },
        Message { code: 901 },
        Message { code: -1 },
        Message { code: i32::MAX },
    ];
    for k in 0..8 {
        ops.push(Json {
            text: Text::Pick(k * 5),
            key: Text::Pick(k),
            index: k,
        });
    }
    scripts.push(("mistakes".to_owned(), setup(true, 6), ops));

    // The JSON helpers on every example.
    for (part, examples) in c_abi::EXAMPLES.chunks(8).enumerate() {
        let ops = examples
            .iter()
            .enumerate()
            .map(|(k, text)| Json {
                text: bytes(text),
                key: Text::Pick(7 + (k % 4) as u8),
                index: k as u8,
            })
            .collect();
        scripts.push((format!("json-{part}"), setup(true, 7), ops));
    }
    scripts
}

/// The tasks harness runs many pseudo-random inputs clean, and they reach what it is there
/// for: full tables, evictions, expiries, answered input requests and waiting `tasks/result`
/// requests, and waits the client cancels on the connection.
#[test]
fn tasks_harness_runs_clean_on_random_inputs() {
    let mut state = 0x7461_736b_u64;
    let mut total = fuzz_logic::tasks::TasksReached::default();
    for i in 0..400 {
        let len = 64 + (i * 37) % 4000;
        let bytes = xorshift_bytes(&mut state, len);
        total.add(&fuzz_logic::tasks::tasks_reached(&bytes));
    }
    eprintln!("{total:?}");
    let t = total;
    for (what, n) in [
        ("created", t.created),
        ("full", t.full),
        ("evicted", t.evicted),
        ("expired", t.expired),
        ("input events", t.input_events),
        ("answered waiters", t.answered_waiters),
        ("served waits", t.served_waits),
        ("cancelled waits", t.cancelled_waits),
        ("ended", t.ended),
    ] {
        assert!(n > 0, "random inputs never reach {what}: {t:?}");
    }
}

/// The C ABI's task-table harness runs many pseudo-random inputs clean, and they reach
/// successful calls, the table's refusals, arguments refused at the boundary and events.
#[test]
fn c_abi_tasks_harness_runs_clean_on_random_inputs() {
    let mut state = 0x7461_626a_u64;
    let mut total = fuzz_logic::c_abi_tasks::TasksAbiReached::default();
    for i in 0..400 {
        let len = 64 + (i * 41) % 4000;
        let bytes = xorshift_bytes(&mut state, len);
        let r = fuzz_logic::c_abi_tasks::c_abi_tasks_reached(&bytes);
        total.ok += r.ok;
        total.refused_by_table += r.refused_by_table;
        total.refused_argument += r.refused_argument;
        total.events += r.events;
    }
    eprintln!("{total:?}");
    assert!(
        total.ok > 0
            && total.refused_by_table > 0
            && total.refused_argument > 0
            && total.events > 0,
        "{total:?}"
    );
}

/// The C ABI's reviewed-listen harness runs many pseudo-random inputs clean, and they reach
/// successful grants.
#[test]
fn c_abi_listen_harness_runs_clean_on_random_inputs() {
    let mut state = 0x6c69_7374_u64;
    let (mut steps, mut grants) = (0, 0);
    for i in 0..300 {
        let len = 64 + (i * 53) % 3000;
        let bytes = xorshift_bytes(&mut state, len);
        let r = fuzz_logic::c_abi_listen::c_abi_listen_reached(&bytes);
        steps += r.steps;
        grants += r.grants;
    }
    eprintln!("steps {steps}, grants {grants}");
    assert!(steps > 1000 && grants > 0, "steps {steps}, grants {grants}");
}

/// The C ABI's connection-side task and elicitation harness runs many pseudo-random inputs
/// clean, and they reach a success of each call it compares.
#[test]
fn c_abi_serve_harness_runs_clean_on_random_inputs() {
    let mut state = 0x7365_7276_u64;
    let mut total = fuzz_logic::c_abi_serve::ServeAbiReached::default();
    for i in 0..300 {
        let len = 64 + (i * 47) % 3000;
        let bytes = xorshift_bytes(&mut state, len);
        let r = fuzz_logic::c_abi_serve::c_abi_serve_reached(&bytes);
        total.steps += r.steps;
        total.tasks_responded += r.tasks_responded;
        total.served += r.served;
        total.results_written += r.results_written;
        total.elicitations += r.elicitations;
        total.task_events += r.task_events;
    }
    eprintln!("{total:?}");
    assert!(
        total.steps > 1000
            && total.tasks_responded > 0
            && total.served > 0
            && total.results_written > 0
            && total.elicitations > 0
            && total.task_events > 0,
        "{total:?}"
    );
}

/// `len` pseudo-random bytes from xorshift64 (`state` goes on from one call to the next):
/// the same bytes on every machine.
fn xorshift_bytes(state: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            (*state >> 24) as u8
        })
        .collect()
}
