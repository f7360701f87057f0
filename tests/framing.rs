//! Newline-delimited framing: the decoder's rules, its bounds, and the encoder's promise.

mod common;

use common::{Rng, Seen, run_stream};
use mcpwire::frame::line::{DEFAULT_MAX_FRAME, FrameError, LineDecoder, LineEncoder};
use mcpwire::jsonrpc::{Backend, Decoded, Id, Message, RawJson, Reason};

/// Collects the frames of `chunks`, fed in order.
fn frames(dec: &mut LineDecoder, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, FrameError>> {
    let mut out = Vec::new();
    for chunk in chunks {
        let mut input = *chunk;
        while let Some(f) = dec.next_frame(&mut input) {
            out.push(f.map(<[u8]>::to_vec));
        }
    }
    out
}

#[test]
fn complete_lines_inside_a_chunk_are_not_copied() {
    let chunk = b"{\"a\":1}\n{\"b\":2}\n{\"c\"";
    let mut dec = LineDecoder::new();
    let mut input = &chunk[..];
    let first = dec.next_frame(&mut input).unwrap().unwrap();
    assert_eq!(first, b"{\"a\":1}");
    assert_eq!(
        first.as_ptr(),
        chunk.as_ptr(),
        "borrowed from the caller's chunk"
    );
    let second = dec.next_frame(&mut input).unwrap().unwrap();
    assert_eq!(second.as_ptr(), chunk[8..].as_ptr());
    assert!(dec.next_frame(&mut input).is_none());
    assert!(input.is_empty());
    // Only the incomplete tail was kept.
    assert_eq!(dec.buffered(), 4);
    let mut rest = &b":3}\n"[..];
    assert_eq!(dec.next_frame(&mut rest).unwrap().unwrap(), b"{\"c\":3}");
}

/// A frame limit of `usize::MAX` ("no limit") takes frames that arrive in pieces (a debug
/// check of the limit overflowed on them).
#[test]
fn a_frame_limit_of_usize_max_takes_frames_in_pieces() {
    let mut dec = LineDecoder::with_max_frame(usize::MAX);
    let got = frames(&mut dec, &[b"{\"a\":", b"1}\n"]);
    assert_eq!(got, vec![Ok(b"{\"a\":1}".to_vec())]);
}

#[test]
fn crlf_is_accepted_and_blank_lines_are_skipped() {
    let mut dec = LineDecoder::new();
    let got = frames(
        &mut dec,
        &[
            b"\n\r\n  \t \n{\"a\":1}\r\n\r\n",
            b"\r",
            b"\n{\"b\":2}\n \r\n",
        ],
    );
    assert_eq!(
        got,
        vec![Ok(b"{\"a\":1}".to_vec()), Ok(b"{\"b\":2}".to_vec())]
    );
    // A CRLF split across chunks.
    let got = frames(&mut dec, &[b"{\"c\":3}\r", b"\n"]);
    assert_eq!(got, vec![Ok(b"{\"c\":3}".to_vec())]);
}

#[test]
fn stopping_early_loses_nothing() {
    let mut dec = LineDecoder::new();
    let mut input = &b"one\ntwo\nthree\n"[..];
    assert_eq!(dec.next_frame(&mut input).unwrap().unwrap(), b"one");
    // The caller stops here: what is left is still in `input`.
    assert_eq!(input, b"two\nthree\n");
    let rest = frames(&mut dec, &[input]);
    assert_eq!(rest, vec![Ok(b"two".to_vec()), Ok(b"three".to_vec())]);
}

#[test]
fn the_default_cap_is_documented_and_configurable() {
    assert_eq!(LineDecoder::new().max_frame(), DEFAULT_MAX_FRAME);
    assert_eq!(DEFAULT_MAX_FRAME, 16 * 1024 * 1024);
    assert_eq!(LineDecoder::with_max_frame(10).max_frame(), 10);
}

#[test]
fn a_frame_at_the_cap_passes_and_one_byte_more_is_refused() {
    let mut dec = LineDecoder::with_max_frame(8);
    let got = frames(&mut dec, &[b"12345678\n123456789\n12345678\r\n"]);
    assert_eq!(
        got,
        vec![
            Ok(b"12345678".to_vec()),
            Err(FrameError::TooLong { limit: 8 }),
            Ok(b"12345678".to_vec()),
        ]
    );
    // The same across a chunk boundary (the tail path).
    let got = frames(&mut dec, &[b"1234", b"5678\n1234", b"56789\n", b"ok\n"]);
    assert_eq!(
        got,
        vec![
            Ok(b"12345678".to_vec()),
            Err(FrameError::TooLong { limit: 8 }),
            Ok(b"ok".to_vec()),
        ]
    );
}

#[test]
fn an_over_long_frame_is_reported_once_skipped_and_memory_stays_bounded() {
    let cap = 1024;
    let mut dec = LineDecoder::with_max_frame(cap);
    let mut errors = 0;
    let mut ok = Vec::new();
    // 10 MiB of one line, in 4 KiB chunks, then a good frame.
    let junk = vec![b'x'; 4096];
    for _ in 0..2560 {
        let mut input = &junk[..];
        while let Some(f) = dec.next_frame(&mut input) {
            match f {
                Err(FrameError::TooLong { limit }) => {
                    assert_eq!(limit, cap);
                    errors += 1;
                }
                Ok(f) => ok.push(f.to_vec()),
                Err(other) => panic!("{other:?}"),
            }
        }
        assert!(dec.buffered() <= cap, "buffer grew past the cap");
    }
    let mut input = &b"still junk\n{\"good\":true}\n"[..];
    while let Some(f) = dec.next_frame(&mut input) {
        ok.push(f.unwrap().to_vec());
    }
    assert_eq!(errors, 1, "reported exactly once");
    assert_eq!(ok, vec![b"{\"good\":true}".to_vec()]);
}

#[test]
fn finish_returns_an_unterminated_last_line() {
    let mut dec = LineDecoder::new();
    assert!(frames(&mut dec, &[b"{\"a\":1}\n{\"b\""]).len() == 1);
    assert_eq!(dec.finish(), Some(&b"{\"b\""[..]));
    assert_eq!(dec.finish(), None);
    assert!(frames(&mut dec, &[b"  \r"]).is_empty());
    assert_eq!(dec.finish(), None);
}

#[test]
fn invalid_utf8_is_an_error_never_a_panic_and_decoding_continues() {
    for &backend in Backend::ALL {
        let stream = b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\xfe\"}\n\xc3\x28\n{\"jsonrpc\":\"2.0\",\"method\":\"ok\"}\n";
        let seen = run_stream(backend, 1024, stream, &[]);
        assert_eq!(seen.len(), 3);
        for s in &seen[..2] {
            let Seen::Frame(_, r) = s else { panic!() };
            assert!(r.contains("InvalidUtf8"), "{r}");
        }
        let Seen::Frame(_, r) = &seen[2] else {
            panic!()
        };
        assert!(r.starts_with("Ok(Single(Notification"), "{r}");
    }
    // And directly:
    let mut d = common::decoder(Backend::Native);
    assert_eq!(
        d.decode(b"\"\xff\"").unwrap_err().reason(),
        Reason::InvalidUtf8
    );
}

#[test]
fn encoder_writes_one_frame_per_message_and_supports_partial_writes() {
    let mut enc = LineEncoder::new();
    let pretty = RawJson::new("{\n \"a\": [1,\r\n 2]\n}").unwrap();
    enc.request(Id::Int(1), "tools/call\n", Some(pretty));
    enc.notification("notifications/progress", Some(pretty));
    enc.response(Id::Int(1), pretty);
    enc.error(None, -32700, "bad\nline", Some(pretty));
    let all = enc.pending().to_vec();
    assert_eq!(all.iter().filter(|&&b| b == b'\n').count(), 4);
    assert!(!all.contains(&b'\r'));

    // Write it out three bytes at a time and decode what arrives.
    let mut written = Vec::new();
    while !enc.pending().is_empty() {
        let n = enc.pending().len().min(3);
        written.extend_from_slice(&enc.pending()[..n]);
        enc.consume(n);
    }
    assert_eq!(written, all);
    let mut dec = LineDecoder::new();
    let mut d = common::decoder(Backend::Native);
    let got = frames(&mut dec, &[&written]);
    assert_eq!(got.len(), 4);
    for f in got {
        let f = f.unwrap();
        assert!(d.decode(&f).is_ok(), "{}", String::from_utf8_lossy(&f));
    }
    // Re-encoding a decoded message keeps it one line.
    let mut dec2 = d;
    let frame = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"k\":\"v\"}}";
    let Ok(Decoded::Single(m @ Message::Response(_))) = dec2.decode(frame) else {
        panic!()
    };
    enc.message(&m);
    assert_eq!(enc.pending(), [&frame[..], b"\n"].concat());
    enc.consume(usize::MAX);
    assert!(enc.pending().is_empty());
}

#[test]
fn nul_bytes_and_binary_junk_never_panic() {
    let mut rng = Rng(7);
    for &backend in Backend::ALL {
        for _ in 0..200 {
            let len = rng.below(300);
            let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let cuts: Vec<usize> = {
                let mut c: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(len + 1)).collect();
                c.sort();
                c
            };
            let _ = run_stream(backend, 64, &junk, &cuts);
        }
    }
}
