//! The strict JSON-RPC decoder on its own, without a connection: for hosts that route, log or
//! inspect messages (a proxy choosing a backend by method, a gateway checking ids) and need
//! the engine's rules but not its state.

use mcpwire::jsonrpc::{DecodeError, Decoded, Decoder, ErrorKind, JsonStr, Message};

use super::boundary::{Out, bytes_in, call};
use super::event::{decode_reason, mcpw_decode_reason, mcpw_id, mcpw_str};
use super::result::mcpw_result;

/// What an `mcpw_message` holds.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_message_kind {
    /// A request. Fields: `id`, `method`, `params` (or absent).
    MCPW_MESSAGE_REQUEST = 1,
    /// A notification. Fields: `method`, `params` (or absent).
    MCPW_MESSAGE_NOTIFICATION = 2,
    /// A success response. Fields: `id`, `result`.
    MCPW_MESSAGE_RESPONSE = 3,
    /// An error response. Fields: `id` (`MCPW_ID_NONE` when the peer sent `null` or none),
    /// `code`, `message`, `data` (or absent).
    MCPW_MESSAGE_ERROR = 4,
    /// Not JSON (JSON-RPC's parse error): the whole frame is refused. Fields: `code`
    /// (-32700, the code to answer with), `reason`, `offset`.
    MCPW_MESSAGE_PARSE_ERROR = 5,
    /// JSON, but not a valid JSON-RPC message (JSON-RPC's invalid request), a whole frame or
    /// one member of a batch. Fields: `code` (-32600, the code to answer with), `reason`,
    /// `offset`, and `id` when the message's id could be read (answer with it; else with
    /// `null`). A frame shaped like a response is `MCPW_MESSAGE_INVALID_RESPONSE` instead.
    MCPW_MESSAGE_INVALID = 6,
    /// JSON shaped like a response (a `result` or `error` member and no `method`) that is not
    /// a valid one (a duplicated member, no `"jsonrpc":"2.0"`, both `result` and `error`, …).
    /// Never answer it: its `id` is one of *your* request ids, and an error sent back with it
    /// would be taken by the peer for the answer to its own request of that id. Fields:
    /// `code` (-32600, for logs), `reason`, `offset`, and `id` when it could be read (the
    /// request of yours it claims to answer).
    MCPW_MESSAGE_INVALID_RESPONSE = 7,
    /// A valid JSON-RPC notification that only MCP's rules refuse (its `params` an array,
    /// where MCP wants an object, or a member named as a JSON-RPC one but for its case, such
    /// as `"Id"`). Never answer it: JSON-RPC forbids replying to a notification;
    /// log it, as the connection reports it as a violation. Fields: `code` (-32600, for
    /// logs), `reason`, `offset`.
    MCPW_MESSAGE_INVALID_NOTIFICATION = 8,
}

/// One JSON-RPC message decoded by `mcpw_decode`, or why it was refused.
///
/// `kind` says which fields mean something; the others are zero, absent or `MCPW_ID_NONE`.
/// Every non-empty view points into the frame given to `mcpw_decode` and lives as long as that
/// frame does (an empty one, such as the method `""`, points to a static empty string). `method` and `message` are the wire text between the quotes: when the matching
/// `*_escaped` flag is set it still holds JSON escapes (`\"`, `\u00e9`), which a host that
/// compares method names should treat as no match or decode first.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mcpw_message {
    /// One of `mcpw_message_kind` (a plain integer, so that a kind added later is not
    /// undefined behaviour in C).
    pub kind: u32,
    /// The id of a request or response, or the readable id of an invalid message.
    pub id: mcpw_id,
    /// The method of a request or notification, wire text.
    pub method: mcpw_str,
    /// Whether `method` holds escapes.
    pub method_escaped: bool,
    /// The params object, raw JSON text, or absent.
    pub params: mcpw_str,
    /// The result, raw JSON text.
    pub result: mcpw_str,
    /// The error code of an error response; -32700 or -32600 for a refused message.
    pub code: i64,
    /// The error message of an error response, wire text.
    pub message: mcpw_str,
    /// Whether `message` holds escapes.
    pub message_escaped: bool,
    /// The error data, raw JSON text, or absent.
    pub data: mcpw_str,
    /// Why a message was refused (`MCPW_DECODE_NONE` otherwise).
    pub reason: mcpw_decode_reason,
    /// Where in the frame the refusal was found, in bytes.
    pub offset: usize,
}

impl mcpw_message {
    const EMPTY: mcpw_message = mcpw_message {
        kind: 0,
        id: mcpw_id::NONE,
        method: mcpw_str::NONE,
        method_escaped: false,
        params: mcpw_str::NONE,
        result: mcpw_str::NONE,
        code: 0,
        message: mcpw_str::NONE,
        message_escaped: false,
        data: mcpw_str::NONE,
        reason: mcpw_decode_reason::MCPW_DECODE_NONE,
        offset: 0,
    };

    fn of(message: &Message<'_>) -> mcpw_message {
        use mcpw_message_kind::*;
        let wire = |s: &JsonStr<'_>| mcpw_str::of(s.raw());
        let mut m = mcpw_message::EMPTY;
        match message {
            Message::Request(r) => {
                m.kind = MCPW_MESSAGE_REQUEST as u32;
                m.id = mcpw_id::of(r.id);
                m.method = wire(&r.method);
                m.method_escaped = r.method.has_escapes();
                m.params = mcpw_str::of_opt(r.params.map(|p| p.get()));
            }
            Message::Notification(n) => {
                m.kind = MCPW_MESSAGE_NOTIFICATION as u32;
                m.method = wire(&n.method);
                m.method_escaped = n.method.has_escapes();
                m.params = mcpw_str::of_opt(n.params.map(|p| p.get()));
            }
            Message::Response(r) => {
                m.kind = MCPW_MESSAGE_RESPONSE as u32;
                m.id = mcpw_id::of(r.id);
                m.result = mcpw_str::of(r.result.get());
            }
            Message::Error(e) => {
                m.kind = MCPW_MESSAGE_ERROR as u32;
                m.id = e.id.map_or(mcpw_id::NONE, mcpw_id::of);
                m.code = e.error.code;
                m.message = wire(&e.error.message);
                m.message_escaped = e.error.message.has_escapes();
                m.data = mcpw_str::of_opt(e.error.data.map(|d| d.get()));
            }
        }
        m
    }

    fn refused(error: &DecodeError<'_>) -> mcpw_message {
        let mut m = mcpw_message::EMPTY;
        m.kind = match error.kind() {
            ErrorKind::Parse => mcpw_message_kind::MCPW_MESSAGE_PARSE_ERROR,
            _ if error.is_response_shaped() => mcpw_message_kind::MCPW_MESSAGE_INVALID_RESPONSE,
            _ if error.is_jsonrpc_notification() => {
                mcpw_message_kind::MCPW_MESSAGE_INVALID_NOTIFICATION
            }
            _ => mcpw_message_kind::MCPW_MESSAGE_INVALID,
        } as u32;
        m.code = error.code();
        m.reason = decode_reason(error.reason());
        m.offset = error.offset();
        m.id = error.id().map_or(mcpw_id::NONE, mcpw_id::of);
        m
    }
}

/// Decodes one frame (a line of stdio without its newline, or an HTTP body) with the same
/// rules a connection applies, without a connection: use it to route or inspect messages
/// (a proxy that picks a backend by method, a log that records ids) where `mcpw_conn_*` would
/// also run the protocol.
///
/// Writes the frame's messages to `out_messages[0 .. min(count, capacity)]` and their number
/// to `*out_count`: 1 for a single message, the number of members for a batch (then
/// `*out_is_batch` is true). When the count is larger than `capacity`, only the first
/// `capacity` were written: call again with room for all (a batch is rare; most hosts pass
/// room for one, or a few). A batch has at most 1024 members: a longer one is refused whole
/// (`MCPW_DECODE_BATCH_TOO_LARGE`).
/// A frame that is refused as a whole is one message of kind `MCPW_MESSAGE_PARSE_ERROR`,
/// `MCPW_MESSAGE_INVALID`, `MCPW_MESSAGE_INVALID_RESPONSE` or
/// `MCPW_MESSAGE_INVALID_NOTIFICATION`; a batch member that is invalid is one of those last
/// three kinds among the others (answer the first of them, never the other two). Either way the call returns `MCPW_OK`: a refusal
/// is an answer, not a failure of the call. Non-empty views point into `frame`.
///
/// Fails with `MCPW_ERR_NULL_ARGUMENT`, writing nothing, when `out_count` or `out_is_batch`
/// is NULL, or `out_messages` is NULL with a non-zero `capacity`, or `frame` is NULL with a
/// non-zero `len`.
///
/// # Safety
/// `frame` points to `len` readable bytes (or is NULL with `len` 0) that stay unchanged while
/// the views are used; `out_messages` points to `capacity` writable `mcpw_message` (or is
/// NULL with `capacity` 0); `out_count` and `out_is_batch` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_decode(
    frame: *const u8,
    len: usize,
    out_messages: *mut mcpw_message,
    capacity: usize,
    out_count: *mut usize,
    out_is_batch: *mut bool,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let count = unsafe { Out::new(out_count) }?;
        // Safety: as for `out_count`.
        let is_batch = unsafe { Out::new(out_is_batch) }?;
        let messages = out_messages;
        if messages.is_null() && capacity != 0 {
            return Err(mcpw_result::MCPW_ERR_NULL_ARGUMENT);
        }
        // Safety: (caller) readable for its length, or NULL with length 0.
        let bytes = unsafe { bytes_in(frame, len) }?;
        let put = |at: usize, m: mcpw_message| {
            if at < capacity {
                // Safety: `at < capacity`, and (caller) `messages` holds `capacity` writable
                // entries; `write` neither reads nor drops what was there.
                unsafe { messages.add(at).write(m) };
            }
        };
        let (n, batch) = match Decoder::default().decode(bytes) {
            Ok(Decoded::Single(m)) => {
                put(0, mcpw_message::of(&m));
                (1, false)
            }
            Ok(Decoded::Batch(members)) => {
                for (at, member) in members.iter().enumerate() {
                    put(
                        at,
                        match member {
                            Ok(m) => mcpw_message::of(m),
                            Err(e) => mcpw_message::refused(e),
                        },
                    );
                }
                (members.len(), true)
            }
            Err(e) => {
                put(0, mcpw_message::refused(&e));
                (1, false)
            }
        };
        is_batch.write(batch);
        count.write(n);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::mcpw_message_kind::*;
    use super::*;
    use crate::event::mcpw_id_kind::*;
    use crate::result::mcpw_result::*;

    fn text(s: mcpw_str) -> Option<String> {
        if s.ptr.is_null() {
            return None;
        }
        // Safety: the library made the view from text inside the frame, which is still alive.
        let b = unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) };
        Some(String::from_utf8(b.to_vec()).expect("views are UTF-8"))
    }

    /// Decodes `frame` with room for `capacity` messages; the count, the batch flag and the
    /// messages written.
    fn decode(frame: &[u8], capacity: usize) -> (usize, bool, Vec<mcpw_message>) {
        let mut out = vec![mcpw_message::EMPTY; capacity];
        let (mut count, mut batch) = (usize::MAX, false);
        // Safety: every pointer is to live memory of the stated size.
        let rc = unsafe {
            mcpw_decode(
                frame.as_ptr(),
                frame.len(),
                out.as_mut_ptr(),
                capacity,
                &mut count,
                &mut batch,
            )
        };
        assert_eq!(rc, MCPW_OK);
        out.truncate(count.min(capacity));
        (count, batch, out)
    }

    fn one(frame: &str) -> mcpw_message {
        let (count, batch, out) = decode(frame.as_bytes(), 4);
        assert_eq!((count, batch), (1, false), "{frame}");
        out[0]
    }

    #[test]
    fn each_kind_of_message_gives_its_fields_as_views_into_the_frame() {
        let r = one(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#);
        assert_eq!(r.kind, MCPW_MESSAGE_REQUEST as u32);
        assert_eq!((r.id.kind, r.id.integer), (MCPW_ID_INT as u32, 7));
        assert_eq!(text(r.method).as_deref(), Some("tools/call"));
        assert!(!r.method_escaped);
        assert_eq!(text(r.params).as_deref(), Some(r#"{"name":"x"}"#));
        assert_eq!(text(r.result), None);

        let n = one(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(n.kind, MCPW_MESSAGE_NOTIFICATION as u32);
        assert_eq!(n.id.kind, MCPW_ID_NONE as u32);
        assert_eq!(text(n.params), None);

        let ok = one(r#"{"id":"a\"b","result":[1,2],"jsonrpc":"2.0"}"#);
        assert_eq!(ok.kind, MCPW_MESSAGE_RESPONSE as u32);
        assert_eq!(ok.id.kind, MCPW_ID_STRING as u32);
        assert_eq!(text(ok.id.string).as_deref(), Some(r#"a\"b"#));
        assert_eq!(text(ok.result).as_deref(), Some("[1,2]"));

        let e = one(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no \u00e9","data":{"k":1}}}"#,
        );
        assert_eq!(e.kind, MCPW_MESSAGE_ERROR as u32);
        assert_eq!(e.id.kind, MCPW_ID_NONE as u32);
        assert_eq!(e.code, -32601);
        assert_eq!(text(e.message).as_deref(), Some(r#"no \u00e9"#));
        assert!(e.message_escaped);
        assert_eq!(text(e.data).as_deref(), Some(r#"{"k":1}"#));
        assert_eq!(e.reason, mcpw_decode_reason::MCPW_DECODE_NONE);

        let empty = one(r#"{"jsonrpc":"2.0","method":""}"#);
        assert!(!empty.method.ptr.is_null() && empty.method.len == 0); // present, and empty

        let esc = one(r#"{"jsonrpc":"2.0","method":"p\u0069ng"}"#);
        assert_eq!(text(esc.method).as_deref(), Some(r#"p\u0069ng"#));
        assert!(esc.method_escaped);
    }

    #[test]
    fn refusals_say_the_code_to_answer_the_reason_the_offset_and_the_readable_id() {
        let p = one(r#"{"jsonrpc":"2.0","id":1,"method":"ping""#);
        assert_eq!(p.kind, MCPW_MESSAGE_PARSE_ERROR as u32);
        assert_eq!(p.code, -32700);
        assert_eq!(p.reason, mcpw_decode_reason::MCPW_DECODE_UNEXPECTED_END);
        assert_eq!(p.offset, 39); // the end of the frame
        assert_eq!(p.id.kind, MCPW_ID_NONE as u32);

        let i = one(r#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#);
        assert_eq!(i.kind, MCPW_MESSAGE_INVALID as u32);
        assert_eq!(i.code, -32600);
        assert_eq!(i.reason, mcpw_decode_reason::MCPW_DECODE_WRONG_VERSION);
        assert_eq!((i.id.kind, i.id.integer), (MCPW_ID_INT as u32, 9));
        assert_eq!(text(i.method), None);

        let bad_utf8 = decode(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}", 1).2[0];
        assert_eq!(bad_utf8.kind, MCPW_MESSAGE_PARSE_ERROR as u32);
        assert_eq!(
            bad_utf8.reason,
            mcpw_decode_reason::MCPW_DECODE_INVALID_UTF8
        );
        assert_eq!(bad_utf8.offset, 27);

        let empty = decode(b"", 1).2[0];
        assert_eq!(empty.kind, MCPW_MESSAGE_PARSE_ERROR as u32);
    }

    #[test]
    fn a_batch_gives_every_member_in_order_and_says_how_much_room_it_needs() {
        let frame = br#"[{"jsonrpc":"2.0","id":1,"method":"a"},7,{"jsonrpc":"2.0","method":"b"}]"#;
        let (count, batch, out) = decode(frame, 8);
        assert_eq!((count, batch, out.len()), (3, true, 3));
        assert_eq!(out[0].kind, MCPW_MESSAGE_REQUEST as u32);
        assert_eq!(out[1].kind, MCPW_MESSAGE_INVALID as u32);
        assert_eq!(out[1].reason, mcpw_decode_reason::MCPW_DECODE_NOT_AN_OBJECT);
        assert_eq!(out[1].offset, 39);
        assert_eq!(text(out[2].method).as_deref(), Some("b"));

        // Too little room: the count is still the whole batch, and only what fits is written.
        let (count, batch, out) = decode(frame, 2);
        assert_eq!((count, batch, out.len()), (3, true, 2));
        assert_eq!(out[1].kind, MCPW_MESSAGE_INVALID as u32);
        // No room at all (a NULL array): a query of the count.
        let (mut count, mut batch) = (0, false);
        // Safety: the frame is live; no messages are written with capacity 0.
        let rc = unsafe {
            mcpw_decode(
                frame.as_ptr(),
                frame.len(),
                std::ptr::null_mut(),
                0,
                &mut count,
                &mut batch,
            )
        };
        assert_eq!((rc, count, batch), (MCPW_OK, 3, true));

        let (count, batch, out) = decode(b"[]", 1);
        assert_eq!((count, batch), (1, false));
        assert_eq!(out[0].reason, mcpw_decode_reason::MCPW_DECODE_EMPTY_BATCH);
    }

    #[test]
    fn missing_pointers_are_refused_before_anything_is_written() {
        let frame = br#"{"jsonrpc":"2.0","method":"x"}"#;
        let mut out = [mcpw_message::EMPTY; 1];
        let (mut count, mut batch) = (42, true);
        let null = std::ptr::null_mut();
        let (f, n) = (frame.as_ptr(), frame.len());
        // Safety: each call passes a NULL where one is refused, and live memory elsewhere.
        unsafe {
            let o = out.as_mut_ptr();
            assert_eq!(
                mcpw_decode(f, n, o, 1, null, &mut batch),
                MCPW_ERR_NULL_ARGUMENT
            );
            assert_eq!(
                mcpw_decode(f, n, o, 1, &mut count, null.cast()),
                MCPW_ERR_NULL_ARGUMENT
            );
            let nul = std::ptr::null_mut();
            assert_eq!(
                mcpw_decode(f, n, nul, 1, &mut count, &mut batch),
                MCPW_ERR_NULL_ARGUMENT
            );
            assert_eq!(
                mcpw_decode(std::ptr::null(), 5, o, 1, &mut count, &mut batch),
                MCPW_ERR_NULL_ARGUMENT
            );
        }
        assert!(batch);
        assert_eq!(count, 42);
        assert_eq!(out[0].kind, 0);
    }

    /// The C call agrees with the Rust decoder on the kind, ids and views of every frame of a
    /// mixed set, valid and not.
    #[test]
    fn the_call_agrees_with_the_rust_decoder() {
        let frames: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":-3,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":"s","method":"x","params":[]}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"x","method":"y"}"#,
            br#"[{"jsonrpc":"2.0","id":2,"result":1},{"jsonrpc":"2.0","error":{"code":5,"message":""}}]"#,
            b"  {\"jsonrpc\":\"2.0\",\"method\":\"x\"}  ",
            br#"{"jsonrpc":"2.0","method":"x"} x"#,
            br#"nul"#,
            br#""just a string""#,
        ];
        for &frame in frames {
            let (count, batch, out) = decode(frame, 4);
            let name = String::from_utf8_lossy(frame);
            match Decoder::default().decode(frame) {
                Ok(Decoded::Single(m)) => {
                    assert_eq!((count, batch), (1, false), "{name}");
                    assert_eq!(out[0].kind, mcpw_message::of(&m).kind, "{name}");
                }
                Ok(Decoded::Batch(members)) => {
                    assert_eq!((count, batch), (members.len(), true), "{name}");
                    for (m, c) in members.iter().zip(&out) {
                        let want = match m {
                            Ok(m) => mcpw_message::of(m).kind,
                            Err(_) => MCPW_MESSAGE_INVALID as u32,
                        };
                        assert_eq!(c.kind, want, "{name}");
                    }
                }
                Err(e) => {
                    assert_eq!((count, batch), (1, false), "{name}");
                    assert_eq!(out[0].code, e.code(), "{name}");
                    assert_eq!(out[0].offset, e.offset(), "{name}");
                    assert_eq!(out[0].reason, decode_reason(e.reason()), "{name}");
                }
            }
        }
    }
}
