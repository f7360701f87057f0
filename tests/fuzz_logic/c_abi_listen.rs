//! The reviewed-listen half of the `c_abi` target: `mcpw_conn_listen_items` and
//! `mcpw_conn_grant_listen` on a 2026-07-28 server under `MCPW_POLICY_REVIEW_LISTENS`, driven
//! with the arguments a C host may pass (NULL pointers, ids of a bad kind or not in flight,
//! capacities too small, flag arrays of the wrong length, flag bytes other than 0 and 1), side
//! by side with a Rust [`Connection`] given the same input and calls. An input of the `c_abi`
//! target that starts with [`LISTEN_MARKER`] comes here (the rest is read with `arbitrary`).
//!
//! Invariants checked on every call: no call panics or poisons the handle; a malformed
//! argument gets the documented code and changes nothing; otherwise the result is the Rust
//! connection's, the items lent equal its `listen_items` (read in full), and both write the
//! same bytes and the same number of events.

use std::ffi::c_char;
use std::ptr;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, ListenItem};
use mcpwire::jsonrpc::{Id, JsonStr, RawJson};
use mcpwire_ffi::mcpw_result::{self, *};
use mcpwire_ffi::{
    MCPW_POLICY_DEFAULT, MCPW_POLICY_REVIEW_LISTENS, mcpw_config, mcpw_config_free,
    mcpw_config_new, mcpw_config_set_capabilities, mcpw_config_set_policy, mcpw_conn,
    mcpw_conn_consume, mcpw_conn_free, mcpw_conn_grant_listen, mcpw_conn_handle_input,
    mcpw_conn_listen_items, mcpw_conn_new, mcpw_conn_notify, mcpw_conn_poll_event,
    mcpw_conn_transmit, mcpw_event, mcpw_event_kind, mcpw_id, mcpw_id_kind, mcpw_listen_item,
    mcpw_listen_item_kind, mcpw_role, mcpw_str,
};
use serde_json::json;

/// The first byte of a `c_abi` input that selects this harness.
pub const LISTEN_MARKER: u8 = 0xFD;

const CAPS: &str = r#"{"tools":{"listChanged":true},"resources":{"subscribe":true},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;
const URIS: [&str; 4] = ["file:///a", "file:///b", "demo://x", "h\u{e9}llo:\"q\""];
const TASKS: [&str; 3] = ["t1", "t2", "\u{2713}"];
const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A request id as a call names it.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum IdArg {
    Int(u8),
    Str(u8),
    /// A kind that is neither.
    BadKind,
    Null,
}

/// One step.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum ListenOp {
    /// A listen for the list changes (bit 0), URIs (bits 1-4) and task ids (bits 5-7).
    Listen {
        id: IdArg,
        wants: u8,
    },
    /// The client cancels request `id`.
    Cancel {
        id: IdArg,
    },
    Items {
        id: IdArg,
        capacity: u8,
        null_items: bool,
        null_count: bool,
        null_conn: bool,
    },
    /// Flags: `len % 9` bytes of `bits` (byte i is 0, 1 or 2 by bits 2i, 2i+1).
    Grant {
        id: IdArg,
        bits: u16,
        len: u8,
        null_keep: bool,
    },
    Refuse {
        id: IdArg,
    },
    /// A list change, or the update of URI or task `which`.
    Notify {
        which: u8,
    },
}

pub(super) fn id_text(id: IdArg) -> Option<String> {
    match id {
        IdArg::Int(n) => Some((n % 4).to_string()),
        IdArg::Str(n) => Some(format!("\"L{}\"", n % 4)),
        _ => None,
    }
}

/// The C id for `id` (its string stays in `text`), or NULL.
pub(super) fn c_id(id: IdArg, text: &mut String) -> (mcpw_id, bool) {
    let none = mcpw_str {
        ptr: ptr::null(),
        len: 0,
    };
    match id {
        IdArg::Int(n) => (
            mcpw_id {
                kind: mcpw_id_kind::MCPW_ID_INT as u32,
                integer: i64::from(n % 4),
                string: none,
            },
            false,
        ),
        IdArg::Str(n) => {
            *text = format!("L{}", n % 4);
            (
                mcpw_id {
                    kind: mcpw_id_kind::MCPW_ID_STRING as u32,
                    integer: 0,
                    string: mcpw_str {
                        ptr: text.as_ptr().cast::<c_char>(),
                        len: text.len(),
                    },
                },
                false,
            )
        }
        IdArg::BadKind => (
            mcpw_id {
                kind: 9,
                integer: 0,
                string: none,
            },
            false,
        ),
        IdArg::Null => (
            mcpw_id {
                kind: 0,
                integer: 0,
                string: none,
            },
            true,
        ),
    }
}

/// The Rust id for `id`, if it is a valid one.
pub(super) fn rust_id(id: IdArg, text: &str) -> Option<Id<'_>> {
    match id {
        IdArg::Int(n) => Some(Id::Int(i64::from(n % 4))),
        IdArg::Str(_) => JsonStr::from_raw(text).map(Id::Str),
        _ => None,
    }
}

/// A C server connection and its Rust twin, both declaring `caps` and, when `review_listens`,
/// handing 2026-07-28 listens to the application for review.
pub(super) fn server_twins(caps: &str, review_listens: bool) -> (*mut mcpw_conn, Connection) {
    let mut config: *mut mcpw_config = ptr::null_mut();
    let (name, version) = ("fuzz", "1");
    let policy = if review_listens {
        MCPW_POLICY_DEFAULT | MCPW_POLICY_REVIEW_LISTENS
    } else {
        MCPW_POLICY_DEFAULT
    };
    let mut c: *mut mcpw_conn = ptr::null_mut();
    // Safety: readable texts, writable out pointers; the config is freed once.
    unsafe {
        ok(
            mcpw_config_new(
                mcpw_role::MCPW_ROLE_SERVER as u32,
                name.as_ptr().cast(),
                name.len(),
                version.as_ptr().cast(),
                version.len(),
                &mut config,
            ),
            "config",
        );
        ok(
            mcpw_config_set_capabilities(config, caps.as_ptr().cast(), caps.len()),
            "caps",
        );
        ok(mcpw_config_set_policy(config, policy), "policy");
        ok(mcpw_conn_new(config, 0, &mut c), "conn");
        mcpw_config_free(config);
    }
    let mut rc = Config::server(name, version)
        .with_capabilities(caps)
        .expect("valid capabilities");
    rc.policy.review_listens = review_listens;
    (
        c,
        Connection::new(rc, Timestamp::ZERO).expect("valid config"),
    )
}

/// Feeds one line, at `now`, to a C connection and its Rust twin.
pub(super) fn feed_both(c: *mut mcpw_conn, rust: &mut Connection, now: u64, line: &str) {
    let line = format!("{line}\n");
    // Safety: a live handle, readable bytes.
    let rc = unsafe { mcpw_conn_handle_input(c, now, line.as_ptr(), line.len()) };
    ok(rc, "handle_input");
    rust.handle_input(Timestamp::from_nanos(now), line.as_bytes());
}

/// Drains a C connection and its Rust twin: their events (counted) and output (compared byte
/// for byte) must agree.
pub(super) fn drain_both(c: *mut mcpw_conn, rust: &mut Connection) {
    let mut c_events = 0;
    loop {
        let mut ev = std::mem::MaybeUninit::<mcpw_event>::uninit();
        // Safety: a live handle, a writable event.
        ok(
            unsafe { mcpw_conn_poll_event(c, ev.as_mut_ptr()) },
            "poll_event",
        );
        // Safety: written on success.
        if unsafe { ev.assume_init_ref() }.kind == mcpw_event_kind::MCPW_EVENT_NONE {
            break;
        }
        c_events += 1;
    }
    let mut rust_events = 0;
    while rust.poll_event().is_some() {
        rust_events += 1;
    }
    assert_eq!(c_events, rust_events, "events");
    let mut c_out = Vec::new();
    loop {
        let (mut bytes, mut len, mut stream) = (ptr::null(), 0usize, 0u64);
        // Safety: a live handle, writable outs.
        ok(
            unsafe { mcpw_conn_transmit(c, &mut bytes, &mut len, &mut stream) },
            "transmit",
        );
        if len == 0 {
            break;
        }
        // Safety: the handle lent `len` bytes until the next call.
        c_out.extend_from_slice(unsafe { std::slice::from_raw_parts(bytes, len) });
        // Safety: a live handle.
        ok(unsafe { mcpw_conn_consume(c, len) }, "consume");
    }
    let mut rust_out = Vec::new();
    while let Some(t) = rust.poll_transmit() {
        rust_out.extend_from_slice(t.bytes);
        let n = t.bytes.len();
        rust.consume_transmit(n);
    }
    assert_eq!(
        String::from_utf8_lossy(&c_out),
        String::from_utf8_lossy(&rust_out),
        "output"
    );
}

struct Harness {
    c: *mut mcpw_conn,
    rust: Connection,
    now: u64,
    grants: usize,
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Safety: our handle, freed once.
        unsafe { mcpw_conn_free(self.c) };
    }
}

fn ok(rc: mcpw_result, call: &str) {
    assert_eq!(rc, MCPW_OK, "{call}");
}

impl Harness {
    fn new() -> Harness {
        let (c, rust) = server_twins(CAPS, true);
        Harness {
            c,
            rust,
            now: 0,
            grants: 0,
        }
    }

    fn feed(&mut self, line: &str) {
        self.now += 1_000_000;
        feed_both(self.c, &mut self.rust, self.now, line);
    }

    /// Both sides' events (counted) and output (compared byte for byte).
    fn drain(&mut self) {
        drain_both(self.c, &mut self.rust);
    }

    fn step(&mut self, op: ListenOp) {
        match op {
            ListenOp::Listen { id, wants } => {
                let Some(id) = id_text(id) else { return };
                let mut filter = serde_json::Map::new();
                if wants & 1 != 0 {
                    filter.insert("toolsListChanged".into(), json!(true));
                }
                let uris: Vec<&str> = (0..4)
                    .filter(|i| wants & (2 << i) != 0)
                    .map(|i| URIS[i])
                    .collect();
                if !uris.is_empty() {
                    filter.insert("resourceSubscriptions".into(), json!(uris));
                }
                let tasks: Vec<&str> = (0..3)
                    .filter(|i| wants & (32 << i) != 0)
                    .map(|i| TASKS[i])
                    .collect();
                if !tasks.is_empty() {
                    filter.insert("taskIds".into(), json!(tasks));
                }
                let line = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"_meta":{META},"notifications":{}}}}}"#,
                    serde_json::Value::Object(filter)
                );
                self.feed(&line);
            }
            ListenOp::Cancel { id } => {
                let Some(id) = id_text(id) else { return };
                self.feed(&format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"_meta":{META}}}}}"#
                ));
            }
            ListenOp::Items {
                id,
                capacity,
                null_items,
                null_count,
                null_conn,
            } => self.items(
                id,
                usize::from(capacity % 6),
                null_items,
                null_count,
                null_conn,
            ),
            ListenOp::Grant {
                id,
                bits,
                len,
                null_keep,
            } => self.grant(id, bits, usize::from(len % 9), null_keep),
            ListenOp::Refuse { id } => {
                let mut text = String::new();
                let (cid, null) = c_id(id, &mut text);
                let Some(rid) = rust_id(id, &text).filter(|_| !null) else {
                    return;
                };
                let message = "not yours";
                // Safety: a live handle, a readable id and message.
                let rc = unsafe {
                    mcpwire_ffi::mcpw_conn_respond_error(
                        self.c,
                        &cid,
                        -32602,
                        message.as_ptr().cast(),
                        message.len(),
                        ptr::null(),
                        0,
                    )
                };
                let want = self.rust.respond_error(rid, -32602, message, None);
                assert_eq!(
                    rc,
                    want.map_or_else(mcpw_result::from, |()| MCPW_OK),
                    "refuse"
                );
            }
            ListenOp::Notify { which } => {
                let (method, params) = match which % 8 {
                    0 => ("notifications/tools/list_changed", None),
                    n @ 1..=4 => (
                        "notifications/resources/updated",
                        Some(json!({ "uri": URIS[usize::from(n - 1)] }).to_string()),
                    ),
                    n => (
                        "notifications/tasks",
                        Some(
                            json!({ "taskId": TASKS[usize::from(n - 5)], "status": "working",
                                "createdAt": "2026-12-03T00:00:00Z",
                                "lastUpdatedAt": "2026-12-03T00:00:00Z", "ttlMs": null })
                            .to_string(),
                        ),
                    ),
                };
                let (pp, pl) = params
                    .as_deref()
                    .map_or((ptr::null(), 0), |p| (p.as_ptr().cast::<c_char>(), p.len()));
                // Safety: a live handle, readable texts.
                let rc = unsafe {
                    mcpw_conn_notify(self.c, method.as_ptr().cast(), method.len(), pp, pl)
                };
                let raw = params.as_deref().map(|p| RawJson::new(p).expect("JSON"));
                let want = self.rust.notify(method, raw);
                assert_eq!(
                    rc,
                    want.map_or_else(mcpw_result::from, |()| MCPW_OK),
                    "notify"
                );
            }
        }
        self.drain();
    }

    fn items(
        &mut self,
        id: IdArg,
        capacity: usize,
        null_items: bool,
        null_count: bool,
        null_conn: bool,
    ) {
        let mut text = String::new();
        let (cid, null_id) = c_id(id, &mut text);
        let blank = mcpw_listen_item {
            kind: 0,
            text: mcpw_str {
                ptr: ptr::null(),
                len: 0,
            },
        };
        let mut room = vec![blank; capacity];
        let mut count = 77usize;
        let items_ptr = if null_items {
            ptr::null_mut()
        } else {
            room.as_mut_ptr()
        };
        let count_ptr: *mut usize = if null_count {
            ptr::null_mut()
        } else {
            &mut count
        };
        let conn = if null_conn {
            ptr::null()
        } else {
            self.c.cast_const()
        };
        let id_ptr: *const mcpw_id = if null_id { ptr::null() } else { &cid };
        // Safety: NULL or live/readable/writable as the flags say; `room` holds `capacity`.
        let rc = unsafe { mcpw_conn_listen_items(conn, id_ptr, items_ptr, capacity, count_ptr) };
        if null_conn || null_id || null_count || (null_items && capacity > 0) {
            assert_eq!(rc, MCPW_ERR_NULL_ARGUMENT, "listen_items with NULL");
            assert_eq!(count, 77, "written on a refusal");
            return;
        }
        let Some(rid) = rust_id(id, &text) else {
            assert_eq!(rc, MCPW_ERR_INVALID_ID, "listen_items with a bad id");
            return;
        };
        let Some(want) = self.rust.listen_items(rid) else {
            assert_eq!(
                rc, MCPW_ERR_UNKNOWN_REQUEST,
                "listen_items of no waiting listen"
            );
            assert_eq!(count, 77, "written on a refusal");
            return;
        };
        assert_eq!(rc, MCPW_OK, "listen_items");
        assert_eq!(count, want.len(), "count");
        for (got, want) in room.iter().zip(&want) {
            let text = if got.text.ptr.is_null() {
                None
            } else {
                // Safety: the handle lent `len` bytes, valid until the next change.
                let bytes =
                    unsafe { std::slice::from_raw_parts(got.text.ptr.cast::<u8>(), got.text.len) };
                Some(std::str::from_utf8(bytes).expect("UTF-8").to_owned())
            };
            use mcpw_listen_item_kind::*;
            let expected = match *want {
                ListenItem::ToolsListChanged => (MCPW_LISTEN_TOOLS_LIST_CHANGED, None),
                ListenItem::PromptsListChanged => (MCPW_LISTEN_PROMPTS_LIST_CHANGED, None),
                ListenItem::ResourcesListChanged => (MCPW_LISTEN_RESOURCES_LIST_CHANGED, None),
                ListenItem::Resource(u) => (MCPW_LISTEN_RESOURCE, Some(u.to_owned())),
                ListenItem::Task(t) => (MCPW_LISTEN_TASK, Some(t.to_owned())),
            };
            assert_eq!((got.kind, text), (expected.0 as u32, expected.1), "item");
        }
    }

    fn grant(&mut self, id: IdArg, bits: u16, len: usize, null_keep: bool) {
        let mut text = String::new();
        let (cid, null_id) = c_id(id, &mut text);
        // Bytes 0, 1 or 2: C may hand any byte through a cast; nonzero is true.
        let flags: Vec<u8> = (0..len)
            .map(|i| ((bits >> (2 * i)) & 3).min(2) as u8)
            .collect();
        let keep_ptr: *const bool = if null_keep {
            ptr::null()
        } else {
            flags.as_ptr().cast::<bool>()
        };
        let id_ptr: *const mcpw_id = if null_id { ptr::null() } else { &cid };
        // Safety: a live handle; the id and `len` flag bytes readable, or NULL. The harness
        // hands bytes of 2 on purpose: the C ABI reads them as bytes, never as Rust bools.
        let rc = unsafe { mcpw_conn_grant_listen(self.c, id_ptr, keep_ptr, len) };
        if null_id || (null_keep && len > 0) {
            assert_eq!(rc, MCPW_ERR_NULL_ARGUMENT, "grant_listen with NULL");
            return;
        }
        let Some(rid) = rust_id(id, &text) else {
            assert_eq!(rc, MCPW_ERR_INVALID_ID, "grant_listen with a bad id");
            return;
        };
        let want = match self.rust.listen_items(rid) {
            Some(items) if items.len() != len => Err(MCPW_ERR_INVALID_ARGUMENT),
            _ => {
                let mut next = flags.iter().map(|&b| b != 0);
                self.rust
                    .grant_listen(rid, |_| next.next().unwrap_or(false))
                    .map_err(mcpw_result::from)
            }
        };
        if want.is_ok() {
            self.grants += 1;
        }
        assert_eq!(rc, want.err().unwrap_or(MCPW_OK), "grant_listen");
    }
}

/// How far a run got, for the check that random inputs reach the grants.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListenAbiReached {
    pub steps: usize,
    pub grants: usize,
}

/// The harness: see the module docs.
pub fn c_abi_listen(data: &[u8]) {
    c_abi_listen_reached(data);
}

/// [`c_abi_listen`], returning how far the run got.
pub fn c_abi_listen_reached(data: &[u8]) -> ListenAbiReached {
    let mut u = Unstructured::new(data);
    let mut h = Harness::new();
    let mut steps = 0;
    while !u.is_empty() && steps < 256 {
        let Ok(op) = ListenOp::arbitrary(&mut u) else {
            break;
        };
        h.step(op);
        steps += 1;
    }
    ListenAbiReached {
        steps,
        grants: h.grants,
    }
}
