//! Property: however a stream is split into chunks, the frames and messages that come out are
//! exactly those of the one-chunk run.

mod common;

use common::{Rng, run_stream};
use mcpwire::jsonrpc::Backend;

/// A stream with every kind of line the framer and decoder distinguish.
fn mixed_stream() -> Vec<u8> {
    let mut s = Vec::new();
    let lines: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        b"",
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        b"   ",
        br#"{"jsonrpc":"2.0","id":"s-1","result":{"content":[{"type":"text","text":"caf\u00e9 \u65e5\u672c \"q\" \\ \ud83d\ude00"}]}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"text\":\"é 日本 😀\"}}".as_bytes(),
        br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}"#,
        br#"[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]"#,
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"\xff\"}",
        br#"{"jsonrpc":"2.0","id":6,"method":"m","method":"n"}"#,
        br#"{not json"#,
        &[b'x'; 300],
        br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#,
    ];
    for (i, line) in lines.iter().enumerate() {
        s.extend_from_slice(line);
        s.extend_from_slice(if i % 3 == 0 { b"\r\n" } else { b"\n" });
    }
    s
}

#[test]
fn byte_by_byte_equals_one_chunk() {
    let stream = mixed_stream();
    for &backend in Backend::ALL {
        let whole = run_stream(backend, 256, &stream, &[]);
        assert_eq!(whole.len(), 11, "{whole:#?}");
        assert!(whole.contains(&common::Seen::FrameError(
            mcpwire::frame::line::FrameError::TooLong { limit: 256 }
        )));
        let cuts: Vec<usize> = (1..stream.len()).collect();
        assert_eq!(
            run_stream(backend, 256, &stream, &cuts),
            whole,
            "{backend:?}"
        );
    }
}

#[test]
fn any_random_split_equals_one_chunk() {
    let stream = mixed_stream();
    let mut rng = Rng(0x5eed);
    for &backend in Backend::ALL {
        let whole = run_stream(backend, 256, &stream, &[]);
        for _ in 0..2000 {
            let n = rng.below(12);
            let mut cuts: Vec<usize> = (0..n).map(|_| rng.below(stream.len() + 1)).collect();
            cuts.sort();
            cuts.dedup();
            assert_eq!(
                run_stream(backend, 256, &stream, &cuts),
                whole,
                "cuts {cuts:?}"
            );
        }
    }
}

#[test]
fn every_single_cut_point_equals_one_chunk() {
    let stream = mixed_stream();
    for &backend in Backend::ALL {
        let whole = run_stream(backend, 256, &stream, &[]);
        for cut in 0..=stream.len() {
            assert_eq!(
                run_stream(backend, 256, &stream, &[cut]),
                whole,
                "cut {cut}"
            );
        }
    }
}
