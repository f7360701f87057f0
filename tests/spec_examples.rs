//! Every official 2026-07-28 example that is a whole JSON-RPC message decodes, and re-encodes to
//! equal JSON. The examples are copied from the specification into tests/data/spec.

mod common;

use std::path::{Path, PathBuf};

use mcpwire::jsonrpc::{Backend, Decoded, Message, encode_message};

fn example_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/spec/2026-07-28/examples");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).expect("examples copied into tests/data") {
        let dir = dir.unwrap().path();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "json") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn whole_message_examples_decode_and_round_trip() {
    let files = example_files();
    assert!(
        files.len() >= 100,
        "expected the full example set, found {}",
        files.len()
    );
    let mut messages = 0;
    let mut kinds = [0usize; 4];
    for &backend in Backend::ALL {
        let mut dec = common::decoder(backend);
        for file in &files {
            let text = std::fs::read(file).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
            if value.get("jsonrpc").is_none() {
                continue;
            }
            messages += 1;
            // The files are pretty-printed: decode them as they are (an HTTP body may be).
            let decoded = dec.decode(&text);
            let Ok(Decoded::Single(message)) = decoded else {
                panic!("{}: {decoded:?}", file.display());
            };
            kinds[match message {
                Message::Request(_) => 0,
                Message::Notification(_) => 1,
                Message::Response(_) => 2,
                Message::Error(_) => 3,
            }] += 1;
            let mut out = Vec::new();
            encode_message(&mut out, &message);
            assert!(!out.contains(&b'\n'), "{}", file.display());
            let again: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(again, value, "{}", file.display());
        }
    }
    assert_eq!(messages, 32 * Backend::ALL.len());
    // The set covers requests, notifications and responses.
    assert!(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0, "{kinds:?}");
}

#[test]
fn non_message_examples_are_rejected_as_invalid_requests_not_parse_errors() {
    let mut dec = common::decoder(Backend::Native);
    for file in example_files() {
        let text = std::fs::read(&file).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
        if value.get("jsonrpc").is_some() {
            continue;
        }
        let e = dec.decode(&text).unwrap_err();
        assert_eq!(e.code(), -32600, "{}", file.display());
    }
}
