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
use fuzz_logic::{
    CHUNKING_HEADER, CONN_HEADER, Frame, LINE_FRAMER_HEADER, Method, Notice, Op, Reply, Setup,
    Side, TARGETS, Target, Versions, encode_ops, parse_ops,
};
use mcpwire::conn::{Event, RequestOptions, Role};
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

/// Every input that once crashed a target, kept under `fuzz/regressions/<target>/`.
#[test]
fn replay_regressions() {
    let mut failures = Vec::new();
    for (name, _) in TARGETS {
        failures.extend(replay(name, "regressions").1);
    }
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
        (LINE_FRAMER_HEADER, CONN_HEADER, CHUNKING_HEADER),
        (2, 4, 2)
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
    let (client, _) = ended("seed-timeouts");
    assert!(
        client.contains(&"timed out") && client.contains(&"abandoned"),
        "{client:?}"
    );
}
