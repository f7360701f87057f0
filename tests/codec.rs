//! The JSON-RPC codec: every decoding rule, the malformed-input table, and encoding.
//! Every test runs against every compiled backend.

mod common;

use common::decoder;
use mcpwire::jsonrpc::{
    Backend, BatchWriter, DecodeError, Decoded, Decoder, DecoderConfig, ErrorKind, Id, JsonStr,
    Message, OwnedId, RawJson, Reason, encode_error, encode_message, encode_notification,
    encode_request, encode_response,
};

fn each_backend(mut f: impl FnMut(Backend, &mut Decoder)) {
    for &b in Backend::ALL {
        let mut d = decoder(b);
        f(b, &mut d);
    }
}

fn single<'f>(d: &mut Decoder, frame: &'f [u8]) -> Message<'f> {
    match d.decode(frame) {
        Ok(Decoded::Single(m)) => m,
        other => panic!(
            "{}: expected one message, got {other:?}",
            String::from_utf8_lossy(frame)
        ),
    }
}

fn rejected<'f>(d: &mut Decoder, frame: &'f [u8]) -> DecodeError<'f> {
    match d.decode(frame) {
        Err(e) => e,
        Ok(v) => panic!(
            "{}: expected rejection, got {v:?}",
            String::from_utf8_lossy(frame)
        ),
    }
}

fn s(raw: &str) -> JsonStr<'_> {
    JsonStr::from_raw(raw).unwrap()
}

// ---- The four kinds -----------------------------------------------------------------------

#[test]
fn decodes_each_kind_as_borrowed_slices() {
    each_backend(|b, d| {
        let frame = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2]}}}"#;
        let Message::Request(r) = single(d, frame) else {
            panic!("{b:?}")
        };
        assert_eq!(r.id, Id::Int(1));
        assert!(r.method.eq_str("tools/call"));
        let params = r.params.unwrap().get();
        assert_eq!(params, r#"{"name":"x","arguments":{"a":[1,2]}}"#);
        // A slice of the frame, not a copy.
        let range = frame.as_ptr_range();
        assert!(range.contains(&params.as_ptr()));
        assert!(range.contains(&r.method.raw().as_ptr()));

        let Message::Notification(n) = single(
            d,
            br#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#,
        ) else {
            panic!()
        };
        assert!(n.method.eq_str("notifications/initialized"));
        assert!(n.params.is_none());

        let Message::Response(r) = single(d, br#"{"jsonrpc":"2.0","id":"a","result":{"x":[]}}"#)
        else {
            panic!()
        };
        assert_eq!(r.id, Id::Str(s("a")));
        assert_eq!(r.result.get(), r#"{"x":[]}"#);

        let Message::Error(e) = single(
            d,
            br#"{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found","data":{"m":"x"}}}"#,
        ) else {
            panic!()
        };
        assert_eq!(e.id, Some(Id::Int(5)));
        assert_eq!(e.error.code, -32601);
        assert!(e.error.message.eq_str("Method not found"));
        assert_eq!(e.error.data.unwrap().get(), r#"{"m":"x"}"#);
    });
}

#[test]
fn results_may_be_any_json_value() {
    each_backend(|_, d| {
        for v in ["{}", "[]", "1", "\"s\"", "null", "true", "-1.5e3"] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{v}}}"#);
            let Message::Response(r) = single(d, frame.as_bytes()) else {
                panic!()
            };
            assert_eq!(r.result.get(), v);
        }
    });
}

#[test]
fn whitespace_and_unknown_members_are_tolerated() {
    each_backend(|_, d| {
        let frame = b" \t{ \"jsonrpc\" : \"2.0\" ,\r\n \"id\" : 3 , \"x-extra\": {\"deep\":[1]}, \"method\":\"ping\" } \r\n";
        let Message::Request(r) = single(d, frame) else {
            panic!()
        };
        assert_eq!(r.id, Id::Int(3));
    });
}

// ---- Ids ----------------------------------------------------------------------------------

#[test]
fn integer_ids_use_the_full_i64_range() {
    each_backend(|_, d| {
        for n in [0i64, -1, i64::MAX, i64::MIN, 9_007_199_254_740_993] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"m"}}"#);
            let Message::Request(r) = single(d, frame.as_bytes()) else {
                panic!()
            };
            assert_eq!(r.id, Id::Int(n), "{frame}");
            // Round trip keeps every digit (no float on the way).
            let mut out = Vec::new();
            encode_request(&mut out, r.id, "m", None);
            assert!(
                String::from_utf8(out)
                    .unwrap()
                    .contains(&format!("\"id\":{n},"))
            );
        }
    });
}

#[test]
fn ids_out_of_range_or_not_integers_are_invalid_requests() {
    each_backend(|b, d| {
        for (id, reason) in [
            ("9223372036854775808", Reason::IdOutOfRange),
            ("-9223372036854775809", Reason::IdOutOfRange),
            ("100000000000000000000000", Reason::IdOutOfRange),
            ("1.0", Reason::FractionalId),
            ("1e3", Reason::FractionalId),
            ("1E+2", Reason::FractionalId),
            ("-0.5", Reason::FractionalId),
            ("true", Reason::InvalidId),
            ("{}", Reason::InvalidId),
            ("[1]", Reason::InvalidId),
        ] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
            let e = rejected(d, frame.as_bytes());
            assert_eq!(
                (e.kind(), e.reason(), e.id()),
                (ErrorKind::InvalidRequest, reason, None),
                "{b:?} {frame}"
            );
            assert_eq!(e.code(), -32600);
        }
    });
}

#[test]
fn string_and_integer_ids_never_match() {
    each_backend(|_, d| {
        let a = single(d, br#"{"jsonrpc":"2.0","id":7,"result":1}"#);
        let b = single(d, br#"{"jsonrpc":"2.0","id":"7","result":1}"#);
        let (Message::Response(a), Message::Response(b)) = (a, b) else {
            panic!()
        };
        assert_ne!(a.id, b.id);
        assert_eq!(a.id, Id::Int(7));
        assert_eq!(b.id, Id::Str(s("7")));
    });
}

#[test]
fn string_ids_are_kept_byte_exact_and_compared_by_text() {
    each_backend(|_, d| {
        let frame = br#"{"jsonrpc":"2.0","id":"caf\u00e9 \"x\"","result":{}}"#;
        let Message::Response(r) = single(d, frame) else {
            panic!()
        };
        let Id::Str(id) = r.id else { panic!() };
        assert_eq!(id.raw(), r#"caf\u00e9 \"x\""#);
        assert_eq!(id.to_str(), "café \"x\"");
        assert_eq!(r.id, Id::Str(s(r#"café \"x\""#)));
        let mut out = Vec::new();
        encode_response(&mut out, r.id, r.result);
        assert_eq!(out, frame);
    });
}

#[test]
fn null_id_only_on_error_responses() {
    each_backend(|_, d| {
        let e = rejected(d, br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#);
        assert_eq!((e.code(), e.reason()), (-32600, Reason::NullId));
        let e = rejected(d, br#"{"jsonrpc":"2.0","id":null,"result":{}}"#);
        assert_eq!((e.code(), e.reason()), (-32600, Reason::NullId));
        let Message::Error(err) = single(
            d,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(err.id, None);
        // An absent id on an error response is allowed too (2025-11-25 and later).
        let Message::Error(err) = single(
            d,
            br#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"x"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(err.id, None);
    });
}

// ---- Strings --------------------------------------------------------------------------------

#[test]
fn escapes_are_decoded_only_on_demand() {
    each_backend(|_, d| {
        let frame = br#"{"jsonrpc":"2.0","method":"a\/b\u0041\n","params":{}}"#;
        let Message::Notification(n) = single(d, frame) else {
            panic!()
        };
        assert!(n.method.has_escapes());
        assert_eq!(n.method.raw(), r#"a\/b\u0041\n"#);
        assert_eq!(n.method.to_str(), "a/bA\n");
        assert!(n.method.eq_str("a/bA\n"));
        assert!(!n.method.eq_str("a/bA"));
    });
}

#[test]
fn escaped_member_names_are_recognised_by_their_text() {
    each_backend(|_, d| {
        // "\u006dethod" is "method": it must not slip past as an unknown member.
        let Message::Request(r) = single(d, br#"{"jsonrpc":"2.0","id":1,"\u006dethod":"ping"}"#)
        else {
            panic!()
        };
        assert!(r.method.eq_str("ping"));
        let e = rejected(
            d,
            br#"{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}"#,
        );
        assert_eq!((e.code(), e.reason()), (-32600, Reason::DuplicateKey));
        assert!(matches!(
            single(d, br#"{"jsonrpc":"2\u002e0","id":1,"method":"m"}"#),
            Message::Request(_)
        ));
    });
}

// ---- Envelope rules ------------------------------------------------------------------------

#[test]
fn duplicate_and_case_variant_members_are_rejected() {
    each_backend(|_, d| {
        let cases: &[(&[u8], Reason, Option<Id>)] = &[
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
                Reason::DuplicateKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#,
                Reason::DuplicateKey,
                None,
            ),
            (
                br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"a"}"#,
                Reason::DuplicateKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"a","params":{},"params":{}}"#,
                Reason::DuplicateKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
                Reason::DuplicateKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}"#,
                Reason::CaseVariantKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","ID":1,"method":"a"}"#,
                Reason::CaseVariantKey,
                None,
            ),
            (
                br#"{"JSONRPC":"2.0","id":1,"method":"a"}"#,
                Reason::CaseVariantKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{},"Error":{}}"#,
                Reason::CaseVariantKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2,"message":"m"}}"#,
                Reason::DuplicateKey,
                Some(Id::Int(1)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"Message":"m","message":"m"}}"#,
                Reason::CaseVariantKey,
                Some(Id::Int(1)),
            ),
        ];
        for (frame, reason, id) in cases {
            let e = rejected(d, frame);
            assert_eq!(
                (e.kind(), e.reason(), e.id()),
                (ErrorKind::InvalidRequest, *reason, *id),
                "{}",
                String::from_utf8_lossy(frame)
            );
        }
    });
}

#[test]
fn jsonrpc_must_be_exactly_2_0() {
    each_backend(|_, d| {
        for v in [r#""2.0 ""#, r#""2""#, r#""1.0""#, "2.0", "null", r#""""#] {
            let frame = format!(r#"{{"jsonrpc":{v},"id":1,"method":"m"}}"#);
            let e = rejected(d, frame.as_bytes());
            assert_eq!(
                (e.reason(), e.id()),
                (Reason::WrongVersion, Some(Id::Int(1))),
                "{frame}"
            );
        }
        let e = rejected(d, br#"{"id":1,"method":"m"}"#);
        assert_eq!(
            (e.reason(), e.id()),
            (Reason::MissingVersion, Some(Id::Int(1)))
        );
    });
}

#[test]
fn result_xor_error_and_kind_rules() {
    each_backend(|_, d| {
        let cases: &[(&[u8], Reason)] = &[
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
                Reason::ResultAndError,
            ),
            (br#"{"jsonrpc":"2.0","id":1}"#, Reason::NotAMessage),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
                Reason::AmbiguousKind,
            ),
            (
                br#"{"jsonrpc":"2.0","method":"m","error":{"code":1,"message":"m"}}"#,
                Reason::AmbiguousKind,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{},"params":{}}"#,
                Reason::AmbiguousKind,
            ),
            (br#"{"jsonrpc":"2.0","result":{}}"#, Reason::MissingId),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":5}"#,
                Reason::MethodNotString,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}"#,
                Reason::ParamsNotObject,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
                Reason::ParamsNotObject,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}"#,
                Reason::ParamsNotObject,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
                Reason::ErrorNotObject,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"m"}}"#,
                Reason::ErrorCodeNotInteger,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}"#,
                Reason::ErrorCodeNotInteger,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":1e2,"message":"m"}}"#,
                Reason::ErrorCodeNotInteger,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}"#,
                Reason::ErrorCodeNotInteger,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":7}}"#,
                Reason::ErrorMessageNotString,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
                Reason::ErrorMessageNotString,
            ),
        ];
        for (frame, reason) in cases {
            let e = rejected(d, frame);
            assert_eq!(
                (e.kind(), e.reason()),
                (ErrorKind::InvalidRequest, *reason),
                "{}",
                String::from_utf8_lossy(frame)
            );
        }
    });
}

// ---- The malformed-input table -------------------------------------------------------------

/// Each row: input, expected classification, expected reason, expected id.
#[allow(clippy::type_complexity)]
const MALFORMED: &[(&[u8], ErrorKind, Reason, Option<i64>)] = &[
    // Not JSON at all.
    (b"", ErrorKind::Parse, Reason::UnexpectedEnd, None),
    (b"   ", ErrorKind::Parse, Reason::UnexpectedEnd, None),
    (b"{", ErrorKind::Parse, Reason::UnexpectedEnd, None),
    (
        b"{\"jsonrpc\":\"2.0\",",
        ErrorKind::Parse,
        Reason::UnexpectedEnd,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"",
        ErrorKind::Parse,
        Reason::UnexpectedEnd,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m}",
        ErrorKind::Parse,
        Reason::UnexpectedEnd,
        None,
    ),
    (b"nope", ErrorKind::Parse, Reason::UnexpectedByte, None),
    (
        b"{'jsonrpc':'2.0'}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\" \"id\":1}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":tru}}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"m\"}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1,]}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":-}",
        ErrorKind::Parse,
        Reason::InvalidNumber,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1.}",
        ErrorKind::Parse,
        Reason::InvalidNumber,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1e}",
        ErrorKind::Parse,
        Reason::InvalidNumber,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"} {}",
        ErrorKind::Parse,
        Reason::TrailingCharacters,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}x",
        ErrorKind::Parse,
        Reason::TrailingCharacters,
        None,
    ),
    // Bad bytes deep inside a payload are parse errors too, even after a readable id.
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xc0\xaf\"}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xed\xa0\x80\"}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xf4\x90\x80\x80\"}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xe6\x97\"}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\\ud800\"}}",
        ErrorKind::Parse,
        Reason::LoneSurrogate,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\\udc00\"}}",
        ErrorKind::Parse,
        Reason::LoneSurrogate,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\\ud800\\u0041\"}}",
        ErrorKind::Parse,
        Reason::LoneSurrogate,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\\x41\"}}",
        ErrorKind::Parse,
        Reason::InvalidEscape,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\\u12\"}}",
        ErrorKind::Parse,
        Reason::InvalidEscape,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"tab\there\"}}",
        ErrorKind::Parse,
        Reason::ControlCharacter,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"nul\x00\"}}",
        ErrorKind::Parse,
        Reason::ControlCharacter,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"\xff\":1}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    (
        b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}",
        ErrorKind::Parse,
        Reason::UnexpectedByte,
        None,
    ),
    // A parse error wins over an envelope problem found earlier in the frame.
    (
        b"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}",
        ErrorKind::Parse,
        Reason::InvalidUtf8,
        None,
    ),
    // Valid JSON, not a message.
    (b"42", ErrorKind::InvalidRequest, Reason::NotAnObject, None),
    (
        b"\"ping\"",
        ErrorKind::InvalidRequest,
        Reason::NotAnObject,
        None,
    ),
    (
        b"null",
        ErrorKind::InvalidRequest,
        Reason::NotAnObject,
        None,
    ),
    (b"[]", ErrorKind::InvalidRequest, Reason::EmptyBatch, None),
    (
        b" [ ] ",
        ErrorKind::InvalidRequest,
        Reason::EmptyBatch,
        None,
    ),
    (
        b"{}",
        ErrorKind::InvalidRequest,
        Reason::MissingVersion,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\"}",
        ErrorKind::InvalidRequest,
        Reason::NotAMessage,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"m\",\"result\":1}",
        ErrorKind::InvalidRequest,
        Reason::AmbiguousKind,
        Some(9),
    ),
    (
        b"{\"jsonrpc\":\"2.1\",\"id\":9,\"method\":\"m\"}",
        ErrorKind::InvalidRequest,
        Reason::WrongVersion,
        Some(9),
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"m\",\"params\":[]}",
        ErrorKind::InvalidRequest,
        Reason::ParamsNotObject,
        Some(9),
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"m\"}",
        ErrorKind::InvalidRequest,
        Reason::FractionalId,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"id\":9,\"method\":\"m\"}",
        ErrorKind::InvalidRequest,
        Reason::DuplicateKey,
        None,
    ),
    (
        b"{\"jsonrpc\":\"2.0\",\"Id\":9,\"id\":9,\"method\":\"m\"}",
        ErrorKind::InvalidRequest,
        Reason::CaseVariantKey,
        Some(9),
    ),
];

#[test]
fn malformed_table_is_classified_exactly() {
    each_backend(|b, d| {
        for (frame, kind, reason, id) in MALFORMED {
            let e = rejected(d, frame);
            assert_eq!(
                (e.kind(), e.reason(), e.id()),
                (*kind, *reason, id.map(Id::Int)),
                "{b:?}: {}",
                String::from_utf8_lossy(frame)
            );
            let code = match kind {
                ErrorKind::Parse => -32700,
                ErrorKind::InvalidRequest => -32600,
            };
            assert_eq!(e.code(), code);
            assert!(e.offset() <= frame.len());
            assert!(!e.to_string().is_empty());
        }
    });
}

/// The decoder reads member keys written compactly (`"id":`, with at least 16 bytes of frame
/// left) in one compare and every other key through the general path. Both must classify
/// alike: every invalid-request row of the table, and the duplicate and case-variant rules,
/// give the same answer when a long unknown member at the end gives each key the room for the
/// fast path, and when whitespace around the colons rules it out.
#[test]
fn compact_and_spaced_keys_classify_alike() {
    let dup_and_case: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
        br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#,
        br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"a"}"#,
        br#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}"#,
        br#"{"jsonrpc":"2.0","id":1,"methods":"a","idx":2,"jsonrpcs":3}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"a","params":{"id":1,"method":2}}"#,
        br#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}"#,
    ];
    let frames = MALFORMED
        .iter()
        .filter(|(_, kind, _, _)| *kind == ErrorKind::InvalidRequest)
        .map(|(f, ..)| *f)
        .chain(dup_and_case.iter().copied());
    each_backend(|b, d| {
        for frame in frames.clone() {
            if frame.first() != Some(&b'{') || frame.last() != Some(&b'}') {
                continue;
            }
            // Payloads keep their own spelling, so spaces are left out of the comparison.
            let outcome = |d: &mut Decoder, f: &[u8]| {
                match d.decode(f) {
                    Ok(Decoded::Single(m)) => format!("{m:?}"),
                    Ok(other) => format!("{other:?}"),
                    Err(e) => format!("{:?} {:?} {:?}", e.kind(), e.reason(), e.id()),
                }
                .replace(' ', "")
            };
            let plain = outcome(d, frame);
            let mut padded = frame[..frame.len() - 1].to_vec();
            if padded.len() > 1 {
                padded.push(b',');
            }
            padded.extend_from_slice(br#""zz":"a long unknown member at the end"}"#);
            let spaced = String::from_utf8_lossy(frame).replace("\":", "\" : ");
            assert_eq!(
                outcome(d, &padded),
                plain,
                "{b:?}: {}",
                String::from_utf8_lossy(&padded)
            );
            assert_eq!(outcome(d, spaced.as_bytes()), plain, "{b:?}: {spaced}");
        }
    });
}

/// The decoder reads the usual head of a message, `{"jsonrpc":"2.0","id":` and a short
/// integer then a comma, in a few compares. Every id shape and every tail must come out as
/// they do when a space after the opening brace sends the same message through the general
/// path: the same message or the same error (kind, reason, id, and offset, one byte further
/// when past the space), in a batch too.
#[test]
fn the_usual_head_decodes_as_the_general_path_does() {
    const IDS: &[&str] = &[
        "0",
        "7",
        "-0",
        "-7",
        "01",
        "00",
        "1234567",
        "-1234567",
        "12345678",
        "-12345678",
        "1.5",
        "1e3",
        "1E3",
        "7.",
        "-",
        "--1",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "1234567.0",
        "\"7\"",
        "null",
        "true",
        "{}",
        "",
    ];
    const TAILS: &[&str] = &[
        r#","result":{}}"#,
        r#","error":{"code":-32601,"message":"m"}}"#,
        r#","method":"ping"}"#,
        r#","method":"ping","params":{"a":[1,2]}}"#,
        r#","id":2,"result":{}}"#,
        r#","jsonrpc":"2.0","result":{}}"#,
        r#","Id":2,"result":{}}"#,
        r#","JSONRPC":"2.0","result":{}}"#,
        r#","result":{},"error":{"code":1,"message":"m"}}"#,
        r#","result":{}"#,
        r#",}"#,
        r#","#,
        r#"}"#,
        r#" ,"result":{}}"#,
        r#","result":{},}"#,
        r#", "result" : {} }"#,
        r#","result":{}}x"#,
        "\u{0},\"result\":{}}",
    ];
    // `shift` is where the spaced variant's extra byte sits: offsets past it move back one.
    fn error(e: &DecodeError<'_>, shift: Option<usize>) -> String {
        let at = match shift {
            Some(space) if e.offset() >= space => e.offset() - 1,
            _ => e.offset(),
        };
        format!("{:?} {:?} {:?} at {at}", e.kind(), e.reason(), e.id())
    }
    let outcome = |d: &mut Decoder, f: &[u8], shift: Option<usize>| match d.decode(f) {
        Ok(Decoded::Batch(members)) => {
            let members: Vec<String> = members
                .iter()
                .map(|m| match m {
                    Ok(m) => format!("{m:?}"),
                    Err(e) => error(e, shift),
                })
                .collect();
            format!("Batch({members:?})")
        }
        Ok(decoded) => format!("{decoded:?}"),
        Err(e) => error(&e, shift),
    };
    each_backend(|b, d| {
        let mut fast_taken = 0;
        for id in IDS {
            for tail in TAILS {
                let usual = format!(r#"{{"jsonrpc":"2.0","id":{id}{tail}"#);
                let spaced = format!(r#"{{ "jsonrpc":"2.0","id":{id}{tail}"#);
                let want = outcome(d, spaced.as_bytes(), Some(1));
                assert_eq!(outcome(d, usual.as_bytes(), None), want, "{b:?}: {usual}");
                // As the first member of a batch (offsets one byte further in both).
                let batch = format!("[{usual}]");
                let spaced_batch = format!("[{spaced}]");
                assert_eq!(
                    outcome(d, batch.as_bytes(), None),
                    outcome(d, spaced_batch.as_bytes(), Some(2)),
                    "{b:?}: {batch}"
                );
                if want.starts_with("Single(") {
                    fast_taken += 1;
                }
            }
        }
        assert!(fast_taken > 50, "{fast_taken}");
    });
}

#[test]
fn parse_error_offsets_point_at_the_problem() {
    each_backend(|_, d| {
        let frame = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}";
        let at = frame.iter().position(|&b| b == 0xff).unwrap();
        assert_eq!(rejected(d, frame).offset(), at);
    });
}

/// Invalid UTF-8 is a parse error at its first bad byte wherever it sits: in a short string, in
/// a long one (the block scanners, either lane width), in a key, outside any string, and
/// whatever other fault or envelope problem the frame also has. Valid non-ASCII text in the
/// same places decodes.
#[test]
fn invalid_utf8_is_reported_at_its_first_bad_byte_wherever_it_sits() {
    const BAD: &[&[u8]] = &[
        b"\xff",
        b"\xc3",
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xe6\x97",
        b"\xf4\x90\x80\x80",
        b"\x80",
    ];
    const GOOD: &[&str] = &["é", "日本", "😀", "\u{7ff}", "\u{10ffff}"];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    each_backend(|b, d| {
        for round in 0..4000 {
            // A request whose params hold a string of 0..300 bytes, mostly ASCII, with
            // escapes now and then so that some strings take the block scanner early.
            let len = next(300);
            let mut text = Vec::new();
            while text.len() < len {
                match next(20) {
                    0 => text.extend_from_slice(b"\\n"),
                    1 => text.extend_from_slice(GOOD[next(GOOD.len())].as_bytes()),
                    _ => text.push(b'a' + next(26) as u8),
                }
            }
            let mut frame =
                b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"m\",\"params\":{\"k\":\"".to_vec();
            let body_at = frame.len();
            frame.extend_from_slice(&text);
            frame.extend_from_slice(b"\",\"n\":1}}");
            if round % 4 == 0 {
                // Valid non-ASCII only: decodes, and the text comes back as it went in.
                let Message::Request(r) = single(d, &frame) else {
                    panic!("{b:?}: not a request");
                };
                let raw = r.params.unwrap().get();
                assert!(raw.contains(std::str::from_utf8(&text).unwrap()), "{b:?}");
                continue;
            }
            // Somewhere in the frame (string body, key, grammar, even past the end of the
            // object), a bad sequence; sometimes a grammar fault too.
            let at = match next(3) {
                0 => body_at + next(text.len() + 1),
                1 => next(frame.len() + 1),
                _ => body_at - 3, // inside the key "k"
            };
            let bad = BAD[next(BAD.len())];
            frame.splice(at..at, bad.iter().copied());
            if next(3) == 0 {
                let fault_at = next(frame.len());
                frame.insert(fault_at, b'}');
            }
            let want = match std::str::from_utf8(&frame) {
                Err(e) => e.valid_up_to(),
                // The sequence completed a valid character with its neighbours.
                Ok(_) => continue,
            };
            let e = rejected(d, &frame);
            assert_eq!(
                (e.kind(), e.reason(), e.offset()),
                (ErrorKind::Parse, Reason::InvalidUtf8, want),
                "{b:?}: {}",
                String::from_utf8_lossy(&frame)
            );
        }
    });
}

// ---- Nesting --------------------------------------------------------------------------------

fn nested(depth: usize) -> Vec<u8> {
    // The message object is level 1, params level 2, then `depth - 2` arrays.
    let inner = depth.saturating_sub(2);
    let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"#);
    s.push_str(&"[".repeat(inner));
    s.push_str(&"]".repeat(inner));
    if inner == 0 {
        s.push('0');
    }
    s.push_str("}}");
    s.into_bytes()
}

#[test]
fn nesting_limit_is_exact_and_configurable() {
    for &backend in Backend::ALL {
        for limit in [4usize, 16, 128] {
            let mut d = Decoder::new(DecoderConfig {
                max_depth: limit,
                backend,
                ..DecoderConfig::default()
            });
            let ok = nested(limit);
            assert!(
                d.decode(&ok).is_ok(),
                "{backend:?} depth {limit} within limit {limit}"
            );
            let deep = nested(limit + 1);
            let e = d.decode(&deep).unwrap_err();
            assert_eq!(
                (e.kind(), e.reason()),
                (ErrorKind::Parse, Reason::TooDeep),
                "{backend:?}"
            );
        }
        // Far past any limit: still an error, never a stack overflow.
        let mut d = decoder(backend);
        let bomb = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            d.decode(bomb.as_bytes()).unwrap_err().reason(),
            Reason::TooDeep
        );
    }
}

// ---- Batches --------------------------------------------------------------------------------

/// A batch may hold `max_batch` members; one more and it is refused whole as an invalid
/// request (at its `[`), once its JSON has been checked to the end: a parse fault after the
/// limit is still a parse error.
#[test]
fn batches_past_the_limit_are_refused_whole() {
    let member = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let batch = |n: usize| format!(" [{}]", vec![member; n].join(","));
    for &backend in Backend::ALL {
        let mut d = Decoder::new(DecoderConfig {
            backend,
            max_batch: 3,
            ..DecoderConfig::default()
        });
        let ok = batch(3);
        assert!(matches!(d.decode(ok.as_bytes()), Ok(Decoded::Batch(m)) if m.len() == 3));
        let long = batch(4);
        let e = d.decode(long.as_bytes()).expect_err("4 members");
        assert_eq!(
            (e.kind(), e.reason(), e.offset(), e.id()),
            (ErrorKind::InvalidRequest, Reason::BatchTooLarge, 1, None)
        );
        assert_eq!(e.code(), -32600);
        let broken = format!("{},{{\"a\":}}]", &long[..long.len() - 1]);
        let e = d.decode(broken.as_bytes()).expect_err("broken");
        assert_eq!(e.kind(), ErrorKind::Parse, "{broken}");
        // Nested arrays past the limit are only walked; their depth still counts.
        let deep = format!(" [{},{}]", [member; 3].join(","), "[".repeat(200));
        assert_eq!(
            d.decode(deep.as_bytes()).expect_err("deep").reason(),
            Reason::TooDeep
        );
    }
    let mut d = Decoder::default();
    assert_eq!(d.config().max_batch, DecoderConfig::DEFAULT_MAX_BATCH);
    let at_limit = batch(DecoderConfig::DEFAULT_MAX_BATCH as usize);
    assert!(d.decode(at_limit.as_bytes()).is_ok());
    let past = batch(DecoderConfig::DEFAULT_MAX_BATCH as usize + 1);
    assert_eq!(
        d.decode(past.as_bytes()).expect_err("past").reason(),
        Reason::BatchTooLarge
    );
    // 0 means 1.
    let mut one = Decoder::new(DecoderConfig {
        max_batch: 0,
        ..DecoderConfig::default()
    });
    assert!(one.decode(batch(1).as_bytes()).is_ok());
    assert!(one.decode(batch(2).as_bytes()).is_err());
}

#[test]
fn batches_are_kept_as_lists_with_per_member_outcomes() {
    each_backend(|_, d| {
        let frame = br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 7, {"jsonrpc":"2.0","method":"n"}, {"jsonrpc":"2.0","id":2}]"#;
        let Ok(Decoded::Batch(members)) = d.decode(frame) else {
            panic!()
        };
        assert_eq!(members.len(), 4);
        assert!(matches!(members[0], Ok(Message::Request(_))));
        assert_eq!(
            members[1].as_ref().unwrap_err().reason(),
            Reason::NotAnObject
        );
        assert!(matches!(members[2], Ok(Message::Notification(_))));
        let e = members[3].as_ref().unwrap_err();
        assert_eq!(
            (e.reason(), e.id()),
            (Reason::NotAMessage, Some(Id::Int(2)))
        );
        // A parse error anywhere makes the whole batch a parse error.
        let e = rejected(d, br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, {"#);
        assert_eq!(e.kind(), ErrorKind::Parse);
    });
}

// ---- Encoding --------------------------------------------------------------------------------

#[test]
fn encodes_all_four_kinds() {
    let mut out = Vec::new();
    let params = RawJson::new(r#"{"name":"echo"}"#).unwrap();
    encode_request(&mut out, Id::Int(-3), "tools/call", Some(params));
    out.push(b'\n');
    encode_notification(&mut out, "notifications/initialized", None);
    out.push(b'\n');
    encode_response(&mut out, Id::Str(s("x\\ny")), RawJson::new("{}").unwrap());
    out.push(b'\n');
    encode_error(
        &mut out,
        None,
        -32700,
        "Parse error",
        Some(RawJson::new("[1]").unwrap()),
    );
    out.push(b'\n');
    assert_eq!(
        String::from_utf8(out).unwrap(),
        concat!(
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"echo"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":"x\ny","result":{}}"#,
            "\n",
            // No id (MCP's `id?`), not JSON-RPC's null, which MCP's schemas refuse.
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error","data":[1]}}"#,
            "\n",
        )
    );
}

#[test]
fn encoded_text_is_escaped_and_decodes_back() {
    each_backend(|_, d| {
        let nasty =
            "quote\" backslash\\ nl\n cr\r tab\t nul\u{0} bell\u{7} del\u{7f} é 日本 😀 \u{2028}";
        let mut out = Vec::new();
        encode_notification(&mut out, nasty, None);
        assert!(!out.contains(&b'\n') && !out.contains(&b'\r'));
        let Message::Notification(n) = single(d, &out) else {
            panic!()
        };
        assert_eq!(n.method.to_str(), nasty);
        let mut out = Vec::new();
        encode_error(&mut out, Some(Id::Int(1)), -1, nasty, None);
        let Message::Error(e) = single(d, &out) else {
            panic!()
        };
        assert_eq!(e.error.message.to_str(), nasty);
    });
}

#[test]
fn caller_json_with_newlines_never_breaks_a_frame() {
    each_backend(|_, d| {
        let pretty = "{\n  \"text\": \"a\\nb\",\r\n  \"list\": [\n    1,\n    2\n  ]\n}\n";
        let raw = RawJson::new(pretty).unwrap();
        let mut out = Vec::new();
        encode_request(&mut out, Id::Int(1), "m", Some(raw));
        encode_response(&mut { Vec::new() }, Id::Int(1), raw);
        assert!(!out.contains(&b'\n') && !out.contains(&b'\r'));
        let Message::Request(r) = single(d, &out) else {
            panic!()
        };
        let a: serde_json::Value = serde_json::from_str(pretty).unwrap();
        let b: serde_json::Value = serde_json::from_str(r.params.unwrap().get()).unwrap();
        assert_eq!(a, b);
    });
}

#[test]
fn raw_json_is_validated_before_it_can_be_encoded() {
    for bad in [
        "",
        "{",
        "{\"a\":1,}",
        "[1] [2]",
        "\"\\ud800\"",
        "nul",
        "{\"a\":\"\u{1}\"}",
    ] {
        assert!(RawJson::new(bad).is_err(), "{bad:?}");
    }
    for good in [
        "{}",
        " [1, 2.5e-3, \"x\", null, true] ",
        "\"\\ud83d\\ude00\"",
    ] {
        assert_eq!(RawJson::new(good).unwrap().get(), good);
    }
}

#[test]
fn string_ids_from_raw_are_checked() {
    assert!(JsonStr::from_raw("ok \\\" \\u00e9").is_some());
    for bad in ["a\"b", "a\\", "a\\x", "\\ud800", "a\nb", "\\udc00x"] {
        assert!(JsonStr::from_raw(bad).is_none(), "{bad:?}");
    }
}

#[test]
fn a_string_id_the_caller_built_from_decoded_text_is_written_escaped() {
    // `OwnedId::Str` is public: a host may fill it with an id's decoded text. Its quote and
    // newline went out raw, breaking the frame and the line framing.
    for (text, wire) in [
        ("a\"\nb", r#""a\"\nb""#),
        ("tab\there", r#""tab\there""#),
        (r"back\slash", r#""back\\slash""#),
        (r"ok\u0041", r#""ok\u0041""#),
        ("plain", r#""plain""#),
    ] {
        let id = OwnedId::Str(text.as_bytes().into());
        let mut out = Vec::new();
        encode_response(&mut out, id.as_id(), RawJson::new("{}").unwrap());
        let line = String::from_utf8(out).unwrap();
        assert!(!line.contains('\n'), "{line:?}");
        assert_eq!(
            line,
            format!(r#"{{"jsonrpc":"2.0","id":{wire},"result":{{}}}}"#)
        );
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(parsed["id"].is_string(), "{line}");
    }
}

#[test]
fn decoded_messages_re_encode_byte_for_byte_when_compact() {
    each_backend(|_, d| {
        for frame in [
            &br#"{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{"name":"x","arguments":{"t":"\u00e9\n"}}}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#,
            br#"{"jsonrpc":"2.0","id":-9223372036854775808,"result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid \"x\"","data":{"k":[1]}}}"#,
        ] {
            let m = single(d, frame);
            let mut out = Vec::new();
            encode_message(&mut out, &m);
            assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(frame));
        }
    });
}

#[test]
fn batch_writer_writes_members_and_nothing_for_none() {
    let mut out = b"x".to_vec();
    let mut batch = BatchWriter::new(&mut out);
    encode_response(batch.member(), Id::Int(1), RawJson::new("{}").unwrap());
    encode_error(batch.member(), Some(Id::Int(2)), -32601, "nope", None);
    assert!(batch.finish());
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        r#"x[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}]"#
    );
    let empty = BatchWriter::new(&mut out);
    assert!(!empty.finish());
    assert!(out.ends_with(b"}]"));
}

/// A rejected frame with `result` or `error` and no `method` is response-shaped: its id is the
/// receiver's own, and it must never be answered.
#[test]
fn rejected_frames_say_whether_they_look_like_responses() {
    each_backend(|b, d| {
        for (frame, shaped) in [
            (r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#, true),
            (r#"{"id":1,"result":{}}"#, true),
            (r#"{"jsonrpc":"2.0","result":{}}"#, true),
            (r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#, true),
            (r#"{"jsonrpc":"2.0","id":1,"error":7}"#, true),
            (r#"{"jsonrpc":"2.0","id":null,"result":{}}"#, true),
            (r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#, true),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"method":7,"result":{}}"#, false),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","method":"m"}"#,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":1}"#, false),
            (r#"[]"#, false),
            (r#"{"jsonrpc":"2.0","id":1,"result":"#, false),
        ] {
            let e = rejected(d, frame.as_bytes());
            assert_eq!(e.is_response_shaped(), shaped, "{b:?}: {frame}: {e:?}");
        }
    });
}

/// A payload `RawJson::new` accepts fits in any message the engine writes around it, for a
/// decoder with the default depth: the deepest such place is `error.data`.
#[test]
fn a_payload_the_engine_accepts_makes_a_message_its_own_decoder_reads() {
    use mcpwire::jsonrpc::MAX_PAYLOAD_DEPTH;
    let nested = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
    assert!(RawJson::new(&nested(MAX_PAYLOAD_DEPTH)).is_ok());
    assert!(RawJson::new(&nested(MAX_PAYLOAD_DEPTH + 1)).is_err());
    let deepest = nested(MAX_PAYLOAD_DEPTH);
    let payload = RawJson::new(&deepest).unwrap();
    let object = format!("{{\"a\":{}}}", nested(MAX_PAYLOAD_DEPTH - 1));
    let params = RawJson::new(&object).unwrap();
    let mut frames = Vec::new();
    let mut out = Vec::new();
    encode_error(&mut out, Some(Id::Int(1)), -32000, "m", Some(payload));
    frames.push(std::mem::take(&mut out));
    encode_response(&mut out, Id::Int(1), payload);
    frames.push(std::mem::take(&mut out));
    encode_request(&mut out, Id::Int(1), "tools/call", Some(params));
    frames.push(std::mem::take(&mut out));
    for frame in frames {
        assert!(
            Decoder::default().decode(&frame).is_ok(),
            "{}",
            String::from_utf8_lossy(&frame[..60])
        );
    }
}
