//! The `c_abi` target: the C ABI (`mcpwire_ffi`, declared in `include/mcpwire.h`) driven as a
//! C host drives it, mistakes included.
//!
//! An input is an [`AbiSetup`] and a sequence of [`AbiOp`]s, as `arbitrary` reads them. The
//! harness keeps config and connection handles in slots (an empty slot is passed as NULL), one
//! clock that never goes backwards, and a model of each handle; it checks every result against
//! what the header documents. Only valid memory is ever passed: NULL where the header allows
//! or must refuse it, and real buffers of the stated length otherwise.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{CStr, c_char, c_int};
use std::ptr;

use arbitrary::{Arbitrary, Unstructured};
use mcpwire::jsonrpc::{Decoded, Decoder, DecoderConfig, JsonStr, RawJson};
use mcpwire::mcp::ProtocolVersion;
use mcpwire_ffi::mcpw_result::{self, *};
use mcpwire_ffi::{
    MCPW_POLICY_DEFAULT, mcpw_close_reason, mcpw_config, mcpw_config_free, mcpw_config_get_limits,
    mcpw_config_get_policy, mcpw_config_new, mcpw_config_set_capabilities,
    mcpw_config_set_client_era, mcpw_config_set_discover_cache, mcpw_config_set_discover_timeout,
    mcpw_config_set_info, mcpw_config_set_instructions, mcpw_config_set_limits,
    mcpw_config_set_policy, mcpw_config_set_timeouts, mcpw_config_set_versions, mcpw_conn,
    mcpw_conn_cancel, mcpw_conn_close, mcpw_conn_consume, mcpw_conn_era, mcpw_conn_free,
    mcpw_conn_handle_eof, mcpw_conn_handle_frame, mcpw_conn_handle_input, mcpw_conn_handle_timeout,
    mcpw_conn_in_flight, mcpw_conn_input_piece, mcpw_conn_log, mcpw_conn_new, mcpw_conn_notify,
    mcpw_conn_peer_capabilities, mcpw_conn_peer_info, mcpw_conn_peer_instructions,
    mcpw_conn_poll_event, mcpw_conn_poll_timeout, mcpw_conn_progress, mcpw_conn_protocol_version,
    mcpw_conn_request, mcpw_conn_request_context, mcpw_conn_request_related, mcpw_conn_respond,
    mcpw_conn_respond_error, mcpw_conn_respond_input_required, mcpw_conn_retry, mcpw_conn_role,
    mcpw_conn_state, mcpw_conn_stats, mcpw_conn_transmit, mcpw_decode, mcpw_decode_reason,
    mcpw_era, mcpw_event, mcpw_event_kind, mcpw_id, mcpw_id_kind, mcpw_json_at, mcpw_json_get,
    mcpw_limits, mcpw_message, mcpw_message_kind, mcpw_request_context, mcpw_request_options,
    mcpw_result_message, mcpw_role, mcpw_state, mcpw_stats, mcpw_str, mcpw_version, mcpw_violation,
};

use super::{Blob, Frame, OpWriter, Rng, frame_text};

/// Config handles the harness keeps at once.
pub const CONFIGS: usize = 2;
/// Connection handles the harness keeps at once.
pub const CONNS: usize = 4;

/// The official 2026-07-28 example messages, as their files hold them (pretty-printed).
pub const EXAMPLES: [&str; 32] = [
    include_str!("../data/spec/2026-07-28/examples/CallToolRequest/call-tool-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/CallToolResultResponse/call-tool-result-response.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/CancelledNotification/user-requested-cancellation.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/CompleteRequest/completion-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/CompleteResultResponse/completion-result-response.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/DiscoverRequest/server-discover-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/DiscoverResultResponse/discover-result-response.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/GetPromptRequest/get-prompt-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/GetPromptResultResponse/get-prompt-result-response.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/HeaderMismatchError/header-mismatch.json"),
    include_str!("../data/spec/2026-07-28/examples/ListPromptsRequest/list-prompts-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/ListPromptsResultResponse/list-prompts-result-response.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ListResourceTemplatesRequest/list-resource-templates-request.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ListResourceTemplatesResultResponse/list-resource-templates-result-response.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ListResourcesRequest/list-resources-request.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ListResourcesResultResponse/list-resources-result-response.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/ListToolsRequest/list-tools-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/ListToolsResultResponse/list-tools-result-response.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/LoggingMessageNotification/log-database-connection-failed.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/MissingRequiredClientCapabilityError/missing-elicitation-capability.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/ProgressNotification/progress-message.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/PromptListChangedNotification/prompts-list-changed.json"
    ),
    include_str!("../data/spec/2026-07-28/examples/ReadResourceRequest/read-resource-request.json"),
    include_str!(
        "../data/spec/2026-07-28/examples/ReadResourceResultResponse/read-resource-result-response-with-ttl.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ReadResourceResultResponse/read-resource-result-response.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ResourceListChangedNotification/resources-list-changed.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ResourceUpdatedNotification/file-resource-updated-notification.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/SubscriptionsAcknowledgedNotification/listen-acknowledged.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/SubscriptionsListenRequest/listen-for-list-changes.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/SubscriptionsListenResultResponse/listen-closed-response.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/ToolListChangedNotification/tools-list-changed.json"
    ),
    include_str!(
        "../data/spec/2026-07-28/examples/UnsupportedProtocolVersionError/unsupported-version.json"
    ),
];

/// Texts for arguments that are UTF-8 text: names, messages, reasons, loggers, keys.
pub const WORDS: &[&str] = &[
    "fuzz",
    "1.0.0",
    "",
    "\u{e9}t\u{e9} \u{1F600}",
    "quote\" back\\slash",
    "nul\0inside",
    "line\nbreak\r",
    "jsonrpc",
    "id",
    "method",
    "params",
    "name",
    "state-1",
];

/// Methods for requests and notifications: valid ones of either direction, engine-owned ones,
/// unknown ones.
pub const METHODS: &[&str] = &[
    "ping",
    "tools/list",
    "tools/call",
    "resources/read",
    "resources/list",
    "resources/subscribe",
    "prompts/get",
    "prompts/list",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "roots/list",
    "sampling/createMessage",
    "elicitation/create",
    "tasks/list",
    "x/custom",
    "initialize",
    "server/discover",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "notifications/tools/list_changed",
    "notifications/resources/updated",
    "notifications/roots/list_changed",
    "notifications/prompts/list_changed",
    "",
];

/// JSON texts for params, results, data, capabilities, info, input requests and responses:
/// valid and not, objects and not, duplicate keys.
pub const JSONS: &[&str] = &[
    "{}",
    r#"{"name":"echo","arguments":{"x":1}}"#,
    r#"{"uri":"file:///a"}"#,
    r#"{"name":"p","arguments":{}}"#,
    r#"{"level":"info","data":"x"}"#,
    r#"{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}"#,
    r#"{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}"#,
    r#"{"message":"name?","requestedSchema":{"type":"object","properties":{}}}"#,
    r#"{"notifications":{"toolsListChanged":true}}"#,
    r#"{"requestId":1,"reason":"r"}"#,
    r#"{"_meta":{"progressToken":7}}"#,
    r#"{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}"#,
    r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"logging":{},"completions":{}}"#,
    r#"{"name":"n","version":"1","title":"T"}"#,
    r#"{"q":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}}"#,
    r#"{"r":{"method":"roots/list"}}"#,
    r#"{"r":{"roots":[]}}"#,
    r#"{"content":[{"type":"text","text":"ok"}]}"#,
    r#"{"a":1,"a":2}"#,
    r#"{"A":1,"a":{"b":[1,2,{"c":null}]}}"#,
    "[1,{\"a\":2},[]]",
    "[]",
    "1",
    "-0.5e-3",
    "null",
    "true",
    "\"text\"",
    "\"\\ud83d\\ude00\"",
    "{",
    "{}}",
    " ",
    "[1,]",
    "\"\\ud800\"",
    "01",
    "{\"a\":\"\u{1}\"}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
];

/// String ids in wire form (the text between the quotes): valid, escaped, and not valid.
pub const IDS: &[&str] = &[
    "abc",
    "",
    "\\u0041",
    "\\\"",
    "call-tool-example",
    "\u{e9}",
    "a\"b",
    "\\x",
    "\u{1}",
    "trailing\\",
];

/// Protocol versions for `mcpw_config_set_versions`: every known one, and two unknown.
pub const VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "2099-01-01",
    "",
];

/// JSON-RPC error codes for `mcpw_conn_respond_error`.
pub const CODES: &[i64] = &[
    -32700, -32600, -32601, -32602, -32603, -32002, -32042, -32022, -32020, -32000, 0, 1,
];

// ---- The input ---------------------------------------------------------------------------

/// Where the caller's clock starts (the header allows any origin).
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// At 0.
    Zero,
    /// At this many milliseconds.
    At(u32),
    /// A few hours before the clock's end, so that deadlines saturate.
    NearTheEnd,
}

/// How a session runs.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct AbiSetup {
    /// The clock's first reading.
    pub clock: Clock,
    /// Drain every connection's events after every operation (as the header says to); when
    /// false, only [`AbiOp::Drain`], timeouts and the end drain them.
    pub drain_always: bool,
    /// Seeds the choices made while draining (answering requests on the spot).
    pub seed: u8,
}

/// A pointer-and-length argument.
#[derive(Arbitrary, Debug, Clone)]
pub enum Text {
    /// NULL with length 0: absent, or the empty string.
    Absent,
    /// NULL with a non-zero length (`n + 1`, or `usize::MAX` for 255): refused.
    NullWithLength(u8),
    /// A valid pointer with length 0.
    Empty,
    /// An entry of the list the argument draws from (methods, JSON, words, ids).
    Pick(u8),
    /// Any bytes.
    Bytes(Blob),
}

/// A `mcpw_id` argument.
#[derive(Arbitrary, Debug, Clone)]
pub enum IdArg {
    /// A NULL `mcpw_id*`.
    Null,
    /// A copy of a request id the peer sent on this connection.
    Peer(u8),
    /// An integer id.
    Int(i64),
    /// A string id, its text from [`IDS`] (or any bytes).
    Str(Text),
    /// An id of this kind (unknown unless 1 or 2).
    Kind(u32),
}

/// An id written into a frame fed to a connection.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum IdPick {
    /// One of this connection's own requests.
    Own(u8),
    /// One of the peer's requests seen on this connection.
    Peer(u8),
    /// This integer.
    Int(i64),
    /// The string `"s<n>"`.
    Str(u8),
}

/// Which of our requests an operation names.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Own {
    /// One issued on this connection (even numbers prefer those awaiting a retry).
    Known(u8),
    /// Any id.
    Raw(i64),
}

/// `mcpw_request_options`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Options {
    /// NULL: the defaults.
    Null,
    /// Fields as given: `progress` above 1 and `reset_on_progress` above 2 are refused.
    Given {
        /// The timeout; `None` is 0, the config's.
        timeout_ms: Option<u16>,
        /// `mcpw_request_options.progress`.
        progress: u8,
        /// `mcpw_request_options.reset_on_progress`.
        reset_on_progress: u8,
    },
    /// A timeout of `u64::MAX` ms.
    HugeTimeout,
}

/// A progress number.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Number {
    /// This value.
    Int(u16),
    /// Not a number.
    NaN,
    /// Positive infinity.
    Infinite,
    /// -1.5.
    Negative,
}

/// `mcpw_limits`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum LimitsArg {
    /// A NULL pointer.
    Null,
    /// Small limits that sessions reach.
    Small,
    /// Each field as given (0 is refused).
    Given {
        /// `max_frame`.
        max_frame: u16,
        /// `max_outbound_in_flight`.
        outbound: u8,
        /// `max_inbound_in_flight`.
        inbound: u8,
        /// `max_buffered_output`.
        buffered: u16,
        /// `max_remembered_ids`.
        remembered: u8,
        /// `max_queued_events`.
        queued: u8,
    },
}

/// A list for `mcpw_config_set_versions`.
#[derive(Arbitrary, Debug, Clone)]
pub enum VersionsArg {
    /// NULL with count 0 (which `mcpw_conn_new` then refuses).
    None,
    /// NULL with a non-zero count (`n + 1`, or huge for 255).
    NullWithCount(u8),
    /// The [`VERSIONS`] whose bits are set in `mask`, then `extra` if given.
    List {
        /// Which of [`VERSIONS`].
        mask: u8,
        /// One more entry, any text.
        extra: Option<Text>,
    },
}

/// A config setter.
#[derive(Arbitrary, Debug, Clone)]
pub enum Setting {
    /// `mcpw_config_set_versions`.
    Versions(VersionsArg),
    /// `mcpw_config_set_info`.
    Info(Text),
    /// `mcpw_config_set_capabilities`.
    Capabilities(Text),
    /// `mcpw_config_set_instructions`.
    Instructions(Text),
    /// `mcpw_config_set_timeouts`: request timeout and maximum total timeout, in ms
    /// (`u32::MAX` means `u64::MAX`).
    Timeouts(u32, u32),
    /// `mcpw_config_set_limits`.
    Limits(LimitsArg),
    /// `mcpw_config_set_policy`: bits 0-4 are the policy flags; 5-7 become bits 5-6 and 31,
    /// which are refused.
    Policy(u8),
    /// `mcpw_config_set_client_era`.
    ClientEra(u8),
    /// `mcpw_config_set_discover_timeout`, in ms.
    DiscoverTimeout(u32),
    /// `mcpw_config_set_discover_cache`: the TTL in ms and the scope.
    DiscoverCache(u32, u8),
}

/// One call (or a few) on the C ABI. `slot`, `config` and `conn` pick a handle slot (modulo
/// [`CONFIGS`] or [`CONNS`]); an empty slot is passed as NULL. `null_out` passes the out
/// pointer as NULL.
#[derive(Arbitrary, Debug, Clone)]
pub enum AbiOp {
    /// `mcpw_config_new` into `slot` (freeing what was there).
    ConfigNew {
        /// The slot.
        slot: u8,
        /// 1 and 2 are roles; 255 stands for `u32::MAX`.
        role: u8,
        /// `clientInfo` / `serverInfo` name.
        name: Text,
        /// And version.
        version: Text,
        /// NULL `out_config`.
        null_out: bool,
    },
    /// A config setter.
    ConfigSet {
        /// The slot.
        slot: u8,
        /// The setter and its arguments.
        setting: Setting,
    },
    /// `mcpw_config_get_limits` and `mcpw_config_get_policy`, compared with what was set.
    ConfigGet {
        /// The slot.
        slot: u8,
        /// NULL outputs.
        null_out: bool,
    },
    /// `mcpw_config_free` (of NULL when the slot is empty).
    ConfigFree {
        /// The slot.
        slot: u8,
    },
    /// `mcpw_conn_new` from config slot `config` into connection slot `conn`.
    ConnNew {
        /// The config slot.
        config: u8,
        /// The connection slot (freeing what was there).
        conn: u8,
        /// NULL `out_conn`.
        null_out: bool,
    },
    /// `mcpw_conn_free` (of NULL when the slot is empty).
    ConnFree {
        /// The slot.
        conn: u8,
    },
    /// `mcpw_conn_handle_input` with any bytes, or `mcpw_conn_handle_frame` on `stream`.
    Feed {
        /// The slot.
        conn: u8,
        /// The bytes (a pick from [`JSONS`] gets a newline).
        bytes: Text,
        /// Feed as one frame on this stream.
        stream: Option<u8>,
    },
    /// An official example, its id replaced, as a line or as a frame on `stream`.
    FeedExample {
        /// The slot.
        conn: u8,
        /// Which of [`EXAMPLES`].
        example: u8,
        /// The id (and progress token, cancelled request id) to write into it.
        id: Option<IdPick>,
        /// Feed the pretty-printed text as one frame on this stream.
        stream: Option<u8>,
    },
    /// A made-up frame naming an id, as a line or as a frame on `stream`.
    FeedFrame {
        /// The slot.
        conn: u8,
        /// Which frame.
        frame: Frame,
        /// The id it names.
        id: IdPick,
        /// Feed as one frame on this stream.
        stream: Option<u8>,
    },
    /// Output of `from` (up to `limit` bytes) fed to `to` (`mcpw_conn_transmit`,
    /// `mcpw_conn_handle_input`, `mcpw_conn_consume`).
    Deliver {
        /// The sending slot.
        from: u8,
        /// The receiving slot.
        to: u8,
        /// At most this many bytes.
        limit: Option<u16>,
    },
    /// Output taken and checked, up to `limit` bytes.
    Take {
        /// The slot.
        conn: u8,
        /// At most this many bytes.
        limit: Option<u16>,
        /// 1-3: first ask with that out pointer of `mcpw_conn_transmit` NULL.
        null_out: u8,
    },
    /// `mcpw_conn_consume` of more than was lent.
    ConsumeTooMuch {
        /// The slot.
        conn: u8,
        /// How much more.
        extra: u16,
    },
    /// `mcpw_conn_poll_event` until there is nothing.
    Drain {
        /// The slot.
        conn: u8,
        /// First ask with a NULL output.
        null_out: bool,
    },
    /// `mcpw_conn_handle_eof`.
    Eof {
        /// The slot.
        conn: u8,
    },
    /// The clock moves on.
    Advance {
        /// By this many milliseconds.
        ms: u32,
    },
    /// `mcpw_conn_handle_timeout` now, or first at the connection's deadline.
    Timeout {
        /// The slot.
        conn: u8,
        /// Move the clock to `mcpw_conn_poll_timeout`'s deadline first.
        to_deadline: bool,
    },
    /// `mcpw_conn_request`.
    Request {
        /// The slot.
        conn: u8,
        /// From [`METHODS`].
        method: Text,
        /// From [`JSONS`].
        params: Text,
        /// The options.
        options: Options,
        /// NULL `out_request_id`.
        null_out: bool,
    },
    /// `mcpw_conn_request_related`.
    RequestRelated {
        /// The slot.
        conn: u8,
        /// The peer's request it is on behalf of.
        parent: IdArg,
        /// From [`METHODS`].
        method: Text,
        /// From [`JSONS`].
        params: Text,
        /// The options.
        options: Options,
    },
    /// `mcpw_conn_notify`.
    Notify {
        /// The slot.
        conn: u8,
        /// From [`METHODS`].
        method: Text,
        /// From [`JSONS`].
        params: Text,
    },
    /// `mcpw_conn_respond`.
    Respond {
        /// The slot.
        conn: u8,
        /// The request answered.
        id: IdArg,
        /// From [`JSONS`].
        result: Text,
    },
    /// `mcpw_conn_respond_error`.
    RespondError {
        /// The slot.
        conn: u8,
        /// The request answered.
        id: IdArg,
        /// From [`CODES`]; 254 and 255 are `i64::MAX` and `i64::MIN`.
        code: u8,
        /// From [`WORDS`].
        message: Text,
        /// From [`JSONS`].
        data: Text,
    },
    /// `mcpw_conn_progress`.
    Progress {
        /// The slot.
        conn: u8,
        /// The request it is about.
        id: IdArg,
        /// The progress.
        progress: Number,
        /// The total, if any.
        total: Option<Number>,
        /// From [`WORDS`].
        message: Text,
    },
    /// `mcpw_conn_log`.
    Log {
        /// The slot.
        conn: u8,
        /// The request it is about.
        id: IdArg,
        /// 0-7 are levels; 255 stands for `u32::MAX`.
        level: u8,
        /// From [`WORDS`].
        logger: Text,
        /// From [`JSONS`].
        data: Text,
        /// NULL `out_sent`.
        null_out: bool,
    },
    /// `mcpw_conn_respond_input_required`.
    InputRequired {
        /// The slot.
        conn: u8,
        /// The request answered.
        id: IdArg,
        /// From [`JSONS`].
        requests: Text,
        /// From [`WORDS`].
        state: Text,
    },
    /// `mcpw_conn_retry`.
    Retry {
        /// The slot.
        conn: u8,
        /// The request retried.
        request: Own,
        /// From [`JSONS`].
        responses: Text,
        /// NULL `out_request_id`.
        null_out: bool,
    },
    /// `mcpw_conn_cancel`.
    Cancel {
        /// The slot.
        conn: u8,
        /// The request cancelled.
        request: Own,
        /// From [`WORDS`].
        reason: Text,
    },
    /// `mcpw_conn_close`.
    Close {
        /// The slot.
        conn: u8,
        /// The grace period in ms; `None` is `u64::MAX`.
        grace_ms: Option<u16>,
    },
    /// Every `const` getter.
    Getters {
        /// The slot.
        conn: u8,
        /// NULL outputs.
        null_out: bool,
    },
    /// `mcpw_conn_request_context`.
    RequestContext {
        /// The slot.
        conn: u8,
        /// The request asked about.
        id: IdArg,
        /// NULL `out_context`.
        null_out: bool,
    },
    /// `mcpw_json_get` and `mcpw_json_at`; and `mcpw_decode` on the text, on a request whose
    /// params it is, and on a batch of both (room for `index % 4` messages).
    Json {
        /// From [`JSONS`].
        text: Text,
        /// From [`WORDS`].
        key: Text,
        /// The array index (255 stands for `usize::MAX`).
        index: u8,
    },
    /// `mcpw_result_message` and `mcpw_version`.
    Message {
        /// Any number.
        code: i32,
    },
}

/// Parses a `c_abi` input.
pub fn parse_abi(data: &[u8]) -> Option<(AbiSetup, Vec<AbiOp>)> {
    let mut u = Unstructured::new(data);
    let setup = AbiSetup::arbitrary(&mut u).ok()?;
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 400 {
        match AbiOp::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    Some((setup, ops))
}

// ---- Writing inputs (for the seed generator) ----------------------------------------------

/// Writes what `arbitrary` reads back as the value (see [`super::encode_ops`] for the format).
trait Put {
    fn put(&self, w: &mut OpWriter);
}

impl Put for u8 {
    fn put(&self, w: &mut OpWriter) {
        w.u8(*self);
    }
}

impl Put for u16 {
    fn put(&self, w: &mut OpWriter) {
        w.u16(*self);
    }
}

impl Put for u32 {
    fn put(&self, w: &mut OpWriter) {
        w.0.extend_from_slice(&self.to_le_bytes());
    }
}

impl Put for i32 {
    fn put(&self, w: &mut OpWriter) {
        w.0.extend_from_slice(&self.to_le_bytes());
    }
}

impl Put for i64 {
    fn put(&self, w: &mut OpWriter) {
        w.0.extend_from_slice(&self.to_le_bytes());
    }
}

impl Put for bool {
    fn put(&self, w: &mut OpWriter) {
        w.bool(*self);
    }
}

impl<T: Put> Put for Option<T> {
    fn put(&self, w: &mut OpWriter) {
        w.bool(self.is_some());
        if let Some(v) = self {
            v.put(w);
        }
    }
}

impl Put for Blob {
    fn put(&self, w: &mut OpWriter) {
        let len = u16::try_from(self.0.len()).expect("a blob fits a u16 length");
        w.u16(len);
        w.0.extend_from_slice(&self.0);
    }
}

impl Put for Frame {
    fn put(&self, w: &mut OpWriter) {
        w.variant(*self as u32, 16);
    }
}

/// Writes a variant tag, then each field.
macro_rules! put_variant {
    ($w:expr, $index:expr, $count:expr $(, $field:expr)*) => {{
        $w.variant($index, $count);
        $( Put::put($field, $w); )*
    }};
}

impl Put for Clock {
    fn put(&self, w: &mut OpWriter) {
        match self {
            Clock::Zero => put_variant!(w, 0, 3),
            Clock::At(t) => put_variant!(w, 1, 3, t),
            Clock::NearTheEnd => put_variant!(w, 2, 3),
        }
    }
}

impl Put for AbiSetup {
    fn put(&self, w: &mut OpWriter) {
        self.clock.put(w);
        self.drain_always.put(w);
        self.seed.put(w);
    }
}

impl Put for Text {
    fn put(&self, w: &mut OpWriter) {
        match self {
            Text::Absent => put_variant!(w, 0, 5),
            Text::NullWithLength(n) => put_variant!(w, 1, 5, n),
            Text::Empty => put_variant!(w, 2, 5),
            Text::Pick(i) => put_variant!(w, 3, 5, i),
            Text::Bytes(b) => put_variant!(w, 4, 5, b),
        }
    }
}

impl Put for IdArg {
    fn put(&self, w: &mut OpWriter) {
        match self {
            IdArg::Null => put_variant!(w, 0, 5),
            IdArg::Peer(i) => put_variant!(w, 1, 5, i),
            IdArg::Int(n) => put_variant!(w, 2, 5, n),
            IdArg::Str(t) => put_variant!(w, 3, 5, t),
            IdArg::Kind(k) => put_variant!(w, 4, 5, k),
        }
    }
}

impl Put for IdPick {
    fn put(&self, w: &mut OpWriter) {
        match self {
            IdPick::Own(i) => put_variant!(w, 0, 4, i),
            IdPick::Peer(i) => put_variant!(w, 1, 4, i),
            IdPick::Int(n) => put_variant!(w, 2, 4, n),
            IdPick::Str(i) => put_variant!(w, 3, 4, i),
        }
    }
}

impl Put for Own {
    fn put(&self, w: &mut OpWriter) {
        match self {
            Own::Known(i) => put_variant!(w, 0, 2, i),
            Own::Raw(n) => put_variant!(w, 1, 2, n),
        }
    }
}

impl Put for Options {
    fn put(&self, w: &mut OpWriter) {
        match self {
            Options::Null => put_variant!(w, 0, 3),
            Options::Given {
                timeout_ms,
                progress,
                reset_on_progress,
            } => put_variant!(w, 1, 3, timeout_ms, progress, reset_on_progress),
            Options::HugeTimeout => put_variant!(w, 2, 3),
        }
    }
}

impl Put for Number {
    fn put(&self, w: &mut OpWriter) {
        match self {
            Number::Int(n) => put_variant!(w, 0, 4, n),
            Number::NaN => put_variant!(w, 1, 4),
            Number::Infinite => put_variant!(w, 2, 4),
            Number::Negative => put_variant!(w, 3, 4),
        }
    }
}

impl Put for LimitsArg {
    fn put(&self, w: &mut OpWriter) {
        match self {
            LimitsArg::Null => put_variant!(w, 0, 3),
            LimitsArg::Small => put_variant!(w, 1, 3),
            LimitsArg::Given {
                max_frame,
                outbound,
                inbound,
                buffered,
                remembered,
                queued,
            } => put_variant!(
                w, 2, 3, max_frame, outbound, inbound, buffered, remembered, queued
            ),
        }
    }
}

impl Put for VersionsArg {
    fn put(&self, w: &mut OpWriter) {
        match self {
            VersionsArg::None => put_variant!(w, 0, 3),
            VersionsArg::NullWithCount(n) => put_variant!(w, 1, 3, n),
            VersionsArg::List { mask, extra } => put_variant!(w, 2, 3, mask, extra),
        }
    }
}

impl Put for Setting {
    fn put(&self, w: &mut OpWriter) {
        const N: u32 = 10;
        match self {
            Setting::Versions(v) => put_variant!(w, 0, N, v),
            Setting::Info(t) => put_variant!(w, 1, N, t),
            Setting::Capabilities(t) => put_variant!(w, 2, N, t),
            Setting::Instructions(t) => put_variant!(w, 3, N, t),
            Setting::Timeouts(a, b) => put_variant!(w, 4, N, a, b),
            Setting::Limits(l) => put_variant!(w, 5, N, l),
            Setting::Policy(p) => put_variant!(w, 6, N, p),
            Setting::ClientEra(e) => put_variant!(w, 7, N, e),
            Setting::DiscoverTimeout(t) => put_variant!(w, 8, N, t),
            Setting::DiscoverCache(t, s) => put_variant!(w, 9, N, t, s),
        }
    }
}

impl Put for AbiOp {
    fn put(&self, w: &mut OpWriter) {
        const N: u32 = 31;
        match self {
            AbiOp::ConfigNew {
                slot,
                role,
                name,
                version,
                null_out,
            } => put_variant!(w, 0, N, slot, role, name, version, null_out),
            AbiOp::ConfigSet { slot, setting } => put_variant!(w, 1, N, slot, setting),
            AbiOp::ConfigGet { slot, null_out } => put_variant!(w, 2, N, slot, null_out),
            AbiOp::ConfigFree { slot } => put_variant!(w, 3, N, slot),
            AbiOp::ConnNew {
                config,
                conn,
                null_out,
            } => put_variant!(w, 4, N, config, conn, null_out),
            AbiOp::ConnFree { conn } => put_variant!(w, 5, N, conn),
            AbiOp::Feed {
                conn,
                bytes,
                stream,
            } => put_variant!(w, 6, N, conn, bytes, stream),
            AbiOp::FeedExample {
                conn,
                example,
                id,
                stream,
            } => put_variant!(w, 7, N, conn, example, id, stream),
            AbiOp::FeedFrame {
                conn,
                frame,
                id,
                stream,
            } => put_variant!(w, 8, N, conn, frame, id, stream),
            AbiOp::Deliver { from, to, limit } => put_variant!(w, 9, N, from, to, limit),
            AbiOp::Take {
                conn,
                limit,
                null_out,
            } => put_variant!(w, 10, N, conn, limit, null_out),
            AbiOp::ConsumeTooMuch { conn, extra } => put_variant!(w, 11, N, conn, extra),
            AbiOp::Drain { conn, null_out } => put_variant!(w, 12, N, conn, null_out),
            AbiOp::Eof { conn } => put_variant!(w, 13, N, conn),
            AbiOp::Advance { ms } => put_variant!(w, 14, N, ms),
            AbiOp::Timeout { conn, to_deadline } => put_variant!(w, 15, N, conn, to_deadline),
            AbiOp::Request {
                conn,
                method,
                params,
                options,
                null_out,
            } => put_variant!(w, 16, N, conn, method, params, options, null_out),
            AbiOp::RequestRelated {
                conn,
                parent,
                method,
                params,
                options,
            } => put_variant!(w, 17, N, conn, parent, method, params, options),
            AbiOp::Notify {
                conn,
                method,
                params,
            } => put_variant!(w, 18, N, conn, method, params),
            AbiOp::Respond { conn, id, result } => put_variant!(w, 19, N, conn, id, result),
            AbiOp::RespondError {
                conn,
                id,
                code,
                message,
                data,
            } => put_variant!(w, 20, N, conn, id, code, message, data),
            AbiOp::Progress {
                conn,
                id,
                progress,
                total,
                message,
            } => put_variant!(w, 21, N, conn, id, progress, total, message),
            AbiOp::Log {
                conn,
                id,
                level,
                logger,
                data,
                null_out,
            } => put_variant!(w, 22, N, conn, id, level, logger, data, null_out),
            AbiOp::InputRequired {
                conn,
                id,
                requests,
                state,
            } => put_variant!(w, 23, N, conn, id, requests, state),
            AbiOp::Retry {
                conn,
                request,
                responses,
                null_out,
            } => put_variant!(w, 24, N, conn, request, responses, null_out),
            AbiOp::Cancel {
                conn,
                request,
                reason,
            } => put_variant!(w, 25, N, conn, request, reason),
            AbiOp::Close { conn, grace_ms } => put_variant!(w, 26, N, conn, grace_ms),
            AbiOp::Getters { conn, null_out } => put_variant!(w, 27, N, conn, null_out),
            AbiOp::RequestContext { conn, id, null_out } => {
                put_variant!(w, 28, N, conn, id, null_out)
            }
            AbiOp::Json { text, key, index } => put_variant!(w, 29, N, text, key, index),
            AbiOp::Message { code } => put_variant!(w, 30, N, code),
        }
    }
}

/// Writes the bytes that [`parse_abi`] reads back as `setup` and `ops`.
pub fn encode_abi(setup: &AbiSetup, ops: &[AbiOp]) -> Vec<u8> {
    let mut w = OpWriter(Vec::new());
    setup.put(&mut w);
    for op in ops {
        op.put(&mut w);
    }
    w.0
}

// ---- Arguments ---------------------------------------------------------------------------

/// What an argument must be, besides not NULL with a length.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Bytes,
    Text,
    Json,
}

/// A pointer-and-length argument, its bytes owned here for the duration of the call.
struct Arg {
    bytes: Vec<u8>,
    /// NULL with this length.
    null: Option<usize>,
}

impl Arg {
    fn of(text: &Text, list: &[&str]) -> Arg {
        let (bytes, null) = match text {
            Text::Absent => (Vec::new(), Some(0)),
            Text::NullWithLength(n) => {
                let len = if *n == u8::MAX {
                    usize::MAX
                } else {
                    usize::from(*n) + 1
                };
                (Vec::new(), Some(len))
            }
            Text::Empty => (Vec::new(), None),
            Text::Pick(i) => (list[usize::from(*i) % list.len()].as_bytes().to_vec(), None),
            Text::Bytes(b) => (b.0.clone(), None),
        };
        Arg { bytes, null }
    }

    fn bytes(bytes: &[u8]) -> Arg {
        Arg {
            bytes: bytes.to_vec(),
            null: None,
        }
    }

    fn ptr(&self) -> *const c_char {
        match self.null {
            Some(_) => ptr::null(),
            None => self.bytes.as_ptr().cast(),
        }
    }

    fn len(&self) -> usize {
        self.null.unwrap_or(self.bytes.len())
    }

    fn is_absent(&self) -> bool {
        self.null == Some(0)
    }

    /// Adds the results the header gives this argument's problems, if it has any: NULL with
    /// a length (any length), text that is not UTF-8, JSON that is not one value. `optional`
    /// arguments may be absent.
    fn problems(&self, want: Want, optional: bool, out: &mut Vec<mcpw_result>) {
        match self.null {
            Some(0) if optional => return,
            Some(0) => {}
            Some(_) => {
                out.push(MCPW_ERR_NULL_ARGUMENT);
                return;
            }
            None => {}
        }
        if want == Want::Bytes {
            return;
        }
        match std::str::from_utf8(&self.bytes) {
            Err(_) => out.push(MCPW_ERR_INVALID_UTF8),
            Ok(text) if want == Want::Json && RawJson::new(text).is_err() => {
                out.push(MCPW_ERR_INVALID_JSON)
            }
            Ok(_) => {}
        }
    }

    /// The text, if it is a JSON object.
    fn object(&self) -> Option<RawJson<'_>> {
        let text = std::str::from_utf8(&self.bytes).ok()?;
        RawJson::new(text).ok().filter(|j| j.is_object())
    }
}

/// A peer's request id, copied out of its event.
#[derive(Clone, Debug)]
struct PeerId {
    kind: u32,
    integer: i64,
    string: Vec<u8>,
}

/// An `mcpw_id` argument and the bytes its string views.
struct IdIn {
    id: mcpw_id,
    _string: Vec<u8>,
    null: bool,
}

impl IdIn {
    fn ptr(&self) -> *const mcpw_id {
        if self.null { ptr::null() } else { &self.id }
    }
}

const INT: u32 = mcpw_id_kind::MCPW_ID_INT as u32;
const STRING: u32 = mcpw_id_kind::MCPW_ID_STRING as u32;

fn id_in(arg: &IdArg, peers: &[PeerId], problems: &mut Vec<mcpw_result>) -> IdIn {
    let none = mcpw_str {
        ptr: ptr::null(),
        len: 0,
    };
    let make = |kind: u32, integer: i64, string: Arg| {
        let view = mcpw_str {
            ptr: string.ptr(),
            len: string.len(),
        };
        IdIn {
            id: mcpw_id {
                kind,
                integer,
                string: if kind == STRING { view } else { none },
            },
            _string: string.bytes,
            null: false,
        }
    };
    match arg {
        IdArg::Null => {
            problems.push(MCPW_ERR_NULL_ARGUMENT);
            IdIn {
                id: make(INT, 0, Arg::bytes(b"")).id,
                _string: Vec::new(),
                null: true,
            }
        }
        IdArg::Peer(i) if !peers.is_empty() => {
            let p = &peers[usize::from(*i) % peers.len()];
            make(p.kind, p.integer, Arg::bytes(&p.string))
        }
        IdArg::Peer(i) => make(INT, i64::from(*i), Arg::bytes(b"")),
        IdArg::Int(n) => make(INT, *n, Arg::bytes(b"")),
        IdArg::Str(text) => {
            let string = Arg::of(text, IDS);
            match string.null {
                Some(n) if n > 0 => problems.push(MCPW_ERR_NULL_ARGUMENT),
                _ => {
                    let valid = std::str::from_utf8(&string.bytes)
                        .ok()
                        .and_then(JsonStr::from_raw)
                        .is_some();
                    if !valid {
                        problems.push(MCPW_ERR_INVALID_ID);
                    }
                }
            }
            make(STRING, 0, string)
        }
        IdArg::Kind(kind) => {
            if *kind != INT && *kind != STRING {
                problems.push(MCPW_ERR_INVALID_ID);
            }
            make(*kind, 7, Arg::bytes(b""))
        }
    }
}

/// The options to pass, and what they ask for: `(options, timeout in ms, progress)`.
fn options_in(
    options: &Options,
    problems: &mut Vec<mcpw_result>,
) -> (Option<mcpw_request_options>, Option<u64>, bool) {
    let o = match *options {
        Options::Null => return (None, None, false),
        Options::Given {
            timeout_ms,
            progress,
            reset_on_progress,
        } => mcpw_request_options {
            timeout_ms: timeout_ms.map_or(0, u64::from),
            progress: u32::from(progress),
            reset_on_progress: u32::from(reset_on_progress),
        },
        Options::HugeTimeout => mcpw_request_options {
            timeout_ms: u64::MAX,
            progress: 0,
            reset_on_progress: 0,
        },
    };
    if o.progress > 1 || o.reset_on_progress > 2 {
        problems.push(MCPW_ERR_INVALID_ARGUMENT);
    }
    (
        Some(o),
        (o.timeout_ms > 0).then_some(o.timeout_ms),
        o.progress == 1,
    )
}

fn number(n: Number) -> f64 {
    match n {
        Number::Int(n) => f64::from(n),
        Number::NaN => f64::NAN,
        Number::Infinite => f64::INFINITY,
        Number::Negative => -1.5,
    }
}

/// An out parameter, filled with a pattern first so that a write on failure shows.
struct OutParam<T>(std::mem::MaybeUninit<T>);

const PATTERN: u8 = 0xA5;

impl<T> OutParam<T> {
    fn new() -> Self {
        let mut v = std::mem::MaybeUninit::<T>::uninit();
        // Safety: writes `size_of::<T>()` bytes into memory we own.
        unsafe { ptr::write_bytes(v.as_mut_ptr(), PATTERN, 1) };
        OutParam(v)
    }

    fn ptr(&mut self, null: bool) -> *mut T {
        if null {
            ptr::null_mut()
        } else {
            self.0.as_mut_ptr()
        }
    }

    fn untouched(&self) -> bool {
        // Safety: every byte was written by `new` (or by the library, which writes a whole
        // value); reading them as bytes is fine.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), size_of::<T>()) };
        bytes.iter().all(|&b| b == PATTERN)
    }

    /// The value the library wrote.
    ///
    /// # Safety
    /// A call given this parameter returned `MCPW_OK`, so the library wrote a whole value.
    unsafe fn get(&self) -> &T {
        unsafe { self.0.assume_init_ref() }
    }
}

/// The bytes a view lends, checking that an absent view has no length.
///
/// # Safety
/// The view came from the library and is still valid.
unsafe fn view<'a>(s: &mcpw_str) -> Option<&'a [u8]> {
    if s.ptr.is_null() {
        assert_eq!(s.len, 0, "an absent view with a length");
        return None;
    }
    Some(unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) })
}

/// A view that must be UTF-8 text (or absent).
///
/// # Safety
/// As [`view`].
unsafe fn text_view(s: &mcpw_str, what: &str) -> Option<String> {
    unsafe { view(s) }.map(|b| {
        String::from_utf8(b.to_vec()).unwrap_or_else(|_| panic!("{what} is not UTF-8: {b:?}"))
    })
}

/// A view that must be one JSON value (or absent).
///
/// # Safety
/// As [`view`].
unsafe fn json_view(s: &mcpw_str, what: &str) -> Option<String> {
    let text = unsafe { text_view(s, what) }?;
    assert!(RawJson::new(&text).is_ok(), "{what} is not JSON: {text:?}");
    Some(text)
}

/// `text` without the whitespace outside its strings: one line.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !c.is_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// `example` with the value of its first `"id"`, `"progressToken"` and `"requestId"` members
/// replaced by `id` (JSON text).
fn with_id(example: &str, id: &str) -> String {
    let mut out = example.to_owned();
    for key in ["\"id\": ", "\"progressToken\": ", "\"requestId\": "] {
        let Some(at) = out.find(key) else { continue };
        let start = at + key.len();
        let rest = &out[start..];
        let end = if let Some(tail) = rest.strip_prefix('"') {
            tail.find('"').map_or(rest.len(), |i| i + 2)
        } else {
            rest.find(|c: char| !matches!(c, '-' | '0'..='9'))
                .unwrap_or(rest.len())
        };
        out.replace_range(start..start + end, id);
    }
    out
}

/// Checks one line of output: UTF-8, one JSON-RPC message (or a batch of them).
pub(crate) fn check_frame(line: &[u8]) {
    let text = std::str::from_utf8(line)
        .unwrap_or_else(|_| panic!("output is not UTF-8: {}", String::from_utf8_lossy(line)));
    let mut decoder = Decoder::new(DecoderConfig::default());
    match decoder.decode(line) {
        Ok(Decoded::Single(_)) => {}
        Ok(Decoded::Batch(members)) => {
            for member in members {
                assert!(member.is_ok(), "invalid batch member in output {text:?}");
            }
        }
        Err(e) => panic!("output frame {text:?} is not a JSON-RPC message: {e:?}"),
    }
}

fn known_version(text: &str) -> bool {
    ProtocolVersion::parse(text).is_some()
}

// ---- The harness -------------------------------------------------------------------------

/// Whether a handle may be called: NULL (an empty slot), poisoned by a panic, or live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    Null,
    Poisoned,
    Live,
}

/// What a call may return on a live handle.
struct Expect<'a> {
    /// The results of the arguments' problems; when there are any, the result is one of them.
    problems: Vec<mcpw_result>,
    /// Results that depend on more than the arguments (a JSON value of the wrong type).
    also: &'a [mcpw_result],
    /// A command: the engine may refuse it (300-399), and once the connection has reported
    /// `MCPW_EVENT_CLOSED` it must refuse it with `MCPW_ERR_CLOSED`.
    command: bool,
}

impl Expect<'_> {
    fn ok() -> Expect<'static> {
        Expect {
            problems: Vec::new(),
            also: &[],
            command: false,
        }
    }
}

/// What the harness knows of a config handle.
#[derive(Clone, Copy, Debug)]
struct ConfigModel {
    role: u32,
    versions: usize,
    request_timeout_ms: u64,
    max_total_ms: u64,
    limits: mcpw_limits,
    policy: u32,
}

struct ConfigSlot {
    handle: *mut mcpw_config,
    poisoned: bool,
    model: ConfigModel,
}

/// One of our requests awaiting its end.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// By then it has ended, at the latest.
    deadline: u64,
    progress: bool,
}

struct ConnSlot {
    handle: *mut mcpw_conn,
    poisoned: bool,
    model: ConfigModel,
    pending: HashMap<i64, Pending>,
    /// Every id `request`, `request_related` and `retry` returned.
    issued: HashSet<i64>,
    own: Vec<i64>,
    /// Requests that ended with "input required", and whether they had asked for progress.
    retryable: HashMap<i64, bool>,
    /// Requests retried before their `MCPW_EVENT_INPUT_REQUIRED` was polled (the engine
    /// handled the answer already): that event must still come, before `MCPW_EVENT_CLOSED`.
    retried_early: HashSet<i64>,
    peer_requests: Vec<PeerId>,
    /// `MCPW_EVENT_CLOSED` was seen.
    closed: bool,
    /// The deadline of the first `mcpw_conn_close`.
    close_deadline: Option<u64>,
    /// Output taken but not yet a whole line, per stream.
    unfinished: HashMap<u64, Vec<u8>>,
}

struct Harness {
    configs: [Option<ConfigSlot>; CONFIGS],
    conns: [Option<ConnSlot>; CONNS],
    now: u64,
    rng: Rng,
    drain_always: bool,
    panics: Vec<String>,
    /// How often each event kind and each call's result was seen, when asked for.
    tally: Option<BTreeMap<String, usize>>,
}

fn slot_of(slot: u8, n: usize) -> usize {
    usize::from(slot) % n
}

/// `mcpw_tools_refusals` on `tools`, into `room` bytes: the length always, the text only
/// when it fits (with a NUL when there is room), and nothing written past it. The text a
/// success gives, parsed.
fn refusals_of(
    tools: *const c_char,
    tools_len: usize,
    room: usize,
) -> (mcpw_result, Option<Vec<serde_json::Value>>) {
    let mut buf = vec![0xA5u8; room];
    let mut len = usize::MAX;
    // Safety: (caller) `tools` is valid for its length, or NULL; `buf` holds `room` writable
    // bytes (any pointer with 0), `len` is writable.
    let got = unsafe {
        mcpwire_ffi::mcpw_tools_refusals(tools, tools_len, buf.as_mut_ptr().cast(), room, &mut len)
    };
    assert_ne!(got, MCPW_ERR_PANIC, "mcpw_tools_refusals panicked");
    if got != MCPW_OK {
        assert_eq!(
            len,
            usize::MAX,
            "mcpw_tools_refusals wrote a length and failed"
        );
        assert!(
            buf.iter().all(|&b| b == 0xA5),
            "mcpw_tools_refusals wrote and failed"
        );
        return (got, None);
    }
    let untouched = if len <= room {
        if len < room {
            assert_eq!(buf[len], 0, "no NUL after the refusals");
        }
        &buf[(len + 1).min(room)..]
    } else {
        &buf[..]
    };
    assert!(
        untouched.iter().all(|&b| b == 0xA5),
        "mcpw_tools_refusals wrote past the text"
    );
    if len > room {
        return refusals_of(tools, tools_len, len);
    }
    let list: Vec<serde_json::Value> =
        serde_json::from_slice(&buf[..len]).expect("the refusals are a JSON array");
    for r in &list {
        let o = r.as_object().expect("each refusal is an object");
        assert_eq!(o.len(), 2, "a refusal has a name and a reason: {r}");
        assert!(o["name"].is_string() && o["reason"].as_str().is_some_and(|t| !t.is_empty()));
    }
    (got, Some(list))
}

/// `mcpw_tools_refusals` on arbitrary text (what is no tools list is the text's problem or
/// `MCPW_ERR_JSON_WRONG_TYPE`), then on one tool whose `x-mcp-header` annotation is that
/// text: refused exactly when the text is not a JSON string holding an HTTP token.
fn tools_refusals(text: &Arg, text_problems: &[mcpw_result], room: u8) {
    let value = std::str::from_utf8(&text.bytes)
        .ok()
        .and_then(|t| RawJson::new(t).ok());
    let listed = value.is_some_and(|v| {
        let list = if v.is_object() {
            v.get_unique("tools").ok().flatten()
        } else {
            Some(v)
        };
        list.is_some_and(|l| l.get().trim_start().starts_with('['))
    });
    let mut problems = text_problems.to_vec();
    if problems.is_empty() && !listed {
        problems.push(MCPW_ERR_JSON_WRONG_TYPE);
    }
    let expect = Expect {
        problems,
        also: &[],
        command: false,
    };
    let (got, _) = refusals_of(text.ptr(), text.len(), usize::from(room));
    verdict("mcpw_tools_refusals", Gate::Live, got, &expect, false);
    let Some(value) = value else { return };
    let tools = format!(
        r#"[{{"name":"t","inputSchema":{{"type":"object","properties":{{"a":{{"type":"string","x-mcp-header":{}}}}}}}}}]"#,
        value.get()
    );
    let (got, list) = refusals_of(tools.as_ptr().cast(), tools.len(), usize::from(room));
    assert_eq!(got, MCPW_OK, "mcpw_tools_refusals of a tools list: {tools}");
    let list = list.expect("a success gives the list");
    let token = value.as_str().is_some_and(|s| {
        let s = s.to_str();
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    });
    assert_eq!(
        list.is_empty(),
        token,
        "refusals of annotation {}: {list:?}",
        value.get()
    );
    if let [one] = &list[..] {
        assert_eq!(one["name"], "t");
    }
}

/// Checks a result code: what the header documents for the call, given the handle and the
/// arguments, and that `mcpw_result_message` knows it.
/// `mcpw_json_string` and `mcpw_json_number` on arbitrary text: a string decodes as serde_json
/// decodes it (written only when it fits in `room`, with a NUL after it when there is room),
/// a number reads as Rust's own parsing of its text; anything else is the text's problem or
/// `MCPW_ERR_JSON_WRONG_TYPE`, with nothing written.
fn json_scalars(text: &Arg, text_problems: &[mcpw_result], room: u8) {
    let value = std::str::from_utf8(&text.bytes)
        .ok()
        .and_then(|t| RawJson::new(t).ok());
    let decoded = value.and_then(|v| {
        v.as_str()?;
        let s: String = serde_json::from_str(v.get()).expect("serde_json decodes a valid string");
        Some(s)
    });
    let expect = |fits: bool| {
        let mut problems = text_problems.to_vec();
        if problems.is_empty() && !fits {
            problems.push(MCPW_ERR_JSON_WRONG_TYPE);
        }
        Expect {
            problems,
            also: &[],
            command: false,
        }
    };
    let room = usize::from(room);
    let mut buf = vec![0xA5u8; room];
    let mut len = usize::MAX;
    // Safety: the text is valid for its length; `buf` holds `room` writable bytes (any pointer
    // with 0), `len` is writable.
    let got = unsafe {
        mcpwire_ffi::mcpw_json_string(
            text.ptr(),
            text.len(),
            buf.as_mut_ptr().cast(),
            room,
            &mut len,
        )
    };
    assert_ne!(got, MCPW_ERR_PANIC, "mcpw_json_string panicked");
    verdict(
        "mcpw_json_string",
        Gate::Live,
        got,
        &expect(decoded.is_some()),
        false,
    );
    match (got, &decoded) {
        (MCPW_OK, Some(want)) => {
            assert_eq!(len, want.len(), "mcpw_json_string's length");
            // What must be left as it was: past the text and its NUL, or all when it did not fit.
            let untouched = if len <= room {
                assert_eq!(&buf[..len], want.as_bytes(), "mcpw_json_string's text");
                if len < room {
                    assert_eq!(buf[len], 0, "no NUL after the text");
                }
                &buf[(len + 1).min(room)..]
            } else {
                &buf[..]
            };
            assert!(
                untouched.iter().all(|&b| b == 0xA5),
                "mcpw_json_string wrote past the text"
            );
        }
        _ => {
            assert_eq!(
                len,
                usize::MAX,
                "mcpw_json_string wrote a length and failed"
            );
            assert!(
                buf.iter().all(|&b| b == 0xA5),
                "mcpw_json_string wrote and failed"
            );
        }
    }
    let number = value.and_then(|v| {
        let t = v
            .get()
            .trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        let lead = t.as_bytes().first()?;
        if *lead != b'-' && !lead.is_ascii_digit() {
            return None;
        }
        let n: f64 = t.parse().expect("a valid JSON number parses");
        n.is_finite().then_some(n)
    });
    let mut out = f64::NAN;
    // Safety: the text is valid for its length; `out` is writable.
    let got = unsafe { mcpwire_ffi::mcpw_json_number(text.ptr(), text.len(), &mut out) };
    assert_ne!(got, MCPW_ERR_PANIC, "mcpw_json_number panicked");
    verdict(
        "mcpw_json_number",
        Gate::Live,
        got,
        &expect(number.is_some()),
        false,
    );
    match (got, number) {
        (MCPW_OK, Some(want)) => assert_eq!(out.to_bits(), want.to_bits(), "mcpw_json_number"),
        _ => assert!(out.is_nan(), "mcpw_json_number wrote and failed"),
    }
}

fn verdict(call: &str, gate: Gate, got: mcpw_result, expect: &Expect<'_>, closed: bool) {
    let code = got as i32;
    let fine = match gate {
        Gate::Null => got == MCPW_ERR_NULL_ARGUMENT,
        Gate::Poisoned => got == MCPW_ERR_POISONED,
        Gate::Live if !expect.problems.is_empty() => expect.problems.contains(&got),
        Gate::Live if closed && expect.command => got == MCPW_ERR_CLOSED,
        Gate::Live => {
            got == MCPW_OK
                || expect.also.contains(&got)
                || (expect.command && (300..400).contains(&code))
        }
    };
    assert!(
        fine,
        "{call} returned {got:?} ({gate:?}, closed {closed}, argument problems {:?})",
        expect.problems
    );
    // Safety: any number is accepted; the answer is a static NUL-terminated string.
    let message = unsafe { CStr::from_ptr(mcpw_result_message(code as c_int)) };
    assert_ne!(message.to_str(), Ok("unknown result code"), "{got:?}");
}

impl Harness {
    fn conn_gate(&self, i: usize) -> (*mut mcpw_conn, Gate, bool) {
        match &self.conns[i] {
            None => (ptr::null_mut(), Gate::Null, false),
            Some(c) if c.poisoned => (c.handle, Gate::Poisoned, c.closed),
            Some(c) => (c.handle, Gate::Live, c.closed),
        }
    }

    /// Calls `f` with connection slot `i`'s handle (NULL when empty), checks the result and
    /// returns whether the call succeeded.
    fn conn_call(
        &mut self,
        i: usize,
        call: &str,
        expect: &Expect<'_>,
        f: impl FnOnce(*mut mcpw_conn) -> mcpw_result,
    ) -> bool {
        let (handle, gate, closed) = self.conn_gate(i);
        let got = f(handle);
        if got == MCPW_ERR_PANIC {
            self.panics.push(call.to_owned());
            if let Some(c) = &mut self.conns[i] {
                c.poisoned = true;
            }
            return false;
        }
        verdict(call, gate, got, expect, closed);
        self.count(|| format!("{call} {got:?}"));
        gate == Gate::Live && got == MCPW_OK
    }

    /// [`conn_call`](Self::conn_call) for config slot `i`.
    fn config_call(
        &mut self,
        i: usize,
        call: &str,
        expect: &Expect<'_>,
        f: impl FnOnce(*mut mcpw_config) -> mcpw_result,
    ) -> bool {
        let (handle, gate) = match &self.configs[i] {
            None => (ptr::null_mut(), Gate::Null),
            Some(c) if c.poisoned => (c.handle, Gate::Poisoned),
            Some(c) => (c.handle, Gate::Live),
        };
        let got = f(handle);
        if got == MCPW_ERR_PANIC {
            self.panics.push(call.to_owned());
            if let Some(c) = &mut self.configs[i] {
                c.poisoned = true;
            }
            return false;
        }
        verdict(call, gate, got, expect, false);
        self.count(|| format!("{call} {got:?}"));
        gate == Gate::Live && got == MCPW_OK
    }

    fn count(&mut self, key: impl FnOnce() -> String) {
        if let Some(tally) = &mut self.tally {
            *tally.entry(key()).or_default() += 1;
        }
    }

    fn conn(&mut self, i: usize) -> Option<&mut ConnSlot> {
        self.conns[i].as_mut()
    }

    fn peers(&self, i: usize) -> Vec<PeerId> {
        self.conns[i]
            .as_ref()
            .map_or_else(Vec::new, |c| c.peer_requests.clone())
    }

    /// A request id came back from `request`, `request_related` or `retry`. `listen`: the
    /// method was `subscriptions/listen`, which without a timeout of its own has none (the
    /// header says so), so it never times out.
    fn issued(&mut self, i: usize, id: i64, timeout_ms: Option<u64>, progress: bool, listen: bool) {
        let now = self.now;
        let c = self.conns[i].as_mut().expect("a live connection");
        assert!(c.issued.insert(id), "request id {id} issued twice");
        c.own.push(id);
        let deadline = if listen && timeout_ms.is_none() {
            u64::MAX
        } else {
            let timeout = timeout_ms
                .unwrap_or(c.model.request_timeout_ms)
                .max(c.model.max_total_ms);
            now.saturating_add(timeout.saturating_mul(1_000_000))
        };
        c.pending.insert(id, Pending { deadline, progress });
    }

    /// One of our requests ended (by an event or a successful cancel).
    fn ended(&mut self, i: usize, id: i64, how: &str) -> Pending {
        let c = self.conns[i].as_mut().expect("a live connection");
        let Some(p) = c.pending.remove(&id) else {
            panic!(
                "{how} for request {id}, which is not pending ({})",
                if c.issued.contains(&id) {
                    "it already ended"
                } else {
                    "never issued"
                }
            );
        };
        p
    }

    fn drain_all(&mut self) {
        if self.drain_always {
            for i in 0..CONNS {
                self.drain(i);
            }
        }
    }

    /// Polls every event of connection slot `i`, checking each.
    fn drain(&mut self, i: usize) {
        if self.conns[i].is_none() {
            return;
        }
        for _ in 0..100_000 {
            let mut event = OutParam::<mcpw_event>::new();
            let out = event.ptr(false);
            // Safety: `h` is NULL or live; `out` is writable.
            let ok = self.conn_call(i, "mcpw_conn_poll_event", &Expect::ok(), |h| unsafe {
                mcpw_conn_poll_event(h, out)
            });
            if !ok {
                assert!(event.untouched(), "poll_event wrote its output and failed");
                return;
            }
            // Safety: the call succeeded.
            let event = *unsafe { event.get() };
            if event.kind == mcpw_event_kind::MCPW_EVENT_NONE {
                assert_eq!(event.request, 0);
                // Safety: views of the event just polled.
                assert!(unsafe { view(&event.method) }.is_none());
                break;
            }
            self.on_event(i, &event);
        }
        self.check_in_flight(i, true);
    }

    /// Checks one event and what it means for the model; may answer a request on the spot,
    /// passing the event's views straight back.
    fn on_event(&mut self, i: usize, e: &mcpw_event) {
        use mcpw_event_kind::*;
        let kind = e.kind;
        self.count(|| format!("{kind:?}"));
        let c = self.conns[i].as_mut().expect("a live connection");
        assert!(!c.closed, "{kind:?} after MCPW_EVENT_CLOSED");
        // Safety (for every view below): the event was just polled and nothing was called on
        // the handle since.
        let method = unsafe { text_view(&e.method, "method") };
        let message = unsafe { text_view(&e.message, "message") };
        let _reason = unsafe { text_view(&e.reason, "reason") };
        let version = unsafe { text_view(&e.version, "version") };
        let _state = unsafe { text_view(&e.request_state, "request_state") };
        let params = unsafe { json_view(&e.params, "params") };
        let result = unsafe { json_view(&e.result, "result") };
        let _data = unsafe { json_view(&e.data, "data") };
        let _input = unsafe { json_view(&e.input_requests, "input_requests") };
        let id = match e.id.kind {
            0 => {
                assert!(unsafe { view(&e.id.string) }.is_none());
                None
            }
            INT => {
                assert!(unsafe { view(&e.id.string) }.is_none());
                Some(PeerId {
                    kind: INT,
                    integer: e.id.integer,
                    string: Vec::new(),
                })
            }
            STRING => {
                let text = unsafe { text_view(&e.id.string, "string id") }
                    .expect("a string id has a string");
                assert!(
                    JsonStr::from_raw(&text).is_some(),
                    "string id {text:?} is not JSON string text"
                );
                Some(PeerId {
                    kind: STRING,
                    integer: 0,
                    string: text.into_bytes(),
                })
            }
            k => panic!("id kind {k}"),
        };
        if kind != MCPW_EVENT_CLOSED {
            assert_eq!(e.close_reason, mcpw_close_reason::MCPW_CLOSE_NONE);
        }
        if kind != MCPW_EVENT_VIOLATION {
            assert_eq!(e.violation, mcpw_violation::MCPW_VIOLATION_NONE);
            assert_eq!(e.decode_reason, mcpw_decode_reason::MCPW_DECODE_NONE);
        }
        if kind != MCPW_EVENT_PROGRESS {
            assert!(!e.has_total);
        }
        match kind {
            MCPW_EVENT_READY => {
                let v = version.expect("READY carries the version");
                assert!(known_version(&v), "READY with version {v:?}");
            }
            MCPW_EVENT_CLOSED => {
                assert_ne!(e.close_reason, mcpw_close_reason::MCPW_CLOSE_NONE);
                assert!(
                    c.pending.is_empty(),
                    "CLOSED with requests never ended: {:?}",
                    c.pending
                );
                assert!(
                    c.retried_early.is_empty(),
                    "retried {:?}, which never ended with INPUT_REQUIRED",
                    c.retried_early
                );
                c.closed = true;
            }
            MCPW_EVENT_REQUEST => {
                assert!(method.is_some(), "a request without a method");
                let id = id.expect("a request has an id");
                c.peer_requests.push(id);
                if c.peer_requests.len() > 64 {
                    c.peer_requests.remove(0);
                }
                self.answer_on_the_spot(i, e, params.is_some());
            }
            MCPW_EVENT_NOTIFICATION => {
                assert!(method.is_some() && id.is_none());
            }
            MCPW_EVENT_PEER_CANCELLED => {
                assert!(id.is_some(), "a cancellation without an id");
            }
            MCPW_EVENT_RESPONSE => {
                assert!(result.is_some(), "a response without a result");
                self.ended(i, e.request, "RESPONSE");
            }
            MCPW_EVENT_ERROR => {
                assert!(message.is_some(), "an error without a message");
                self.ended(i, e.request, "ERROR");
            }
            MCPW_EVENT_PROGRESS => {
                let p = c.pending.get(&e.request).unwrap_or_else(|| {
                    panic!("PROGRESS for request {}, which is not pending", e.request)
                });
                assert!(p.progress, "PROGRESS for {}, sent without", e.request);
                assert!(e.progress.is_finite());
            }
            MCPW_EVENT_TIMED_OUT => {
                self.ended(i, e.request, "TIMED_OUT");
            }
            MCPW_EVENT_ABANDONED => {
                self.ended(i, e.request, "ABANDONED");
            }
            MCPW_EVENT_INVALID_RESPONSE => {
                self.ended(i, e.request, "INVALID_RESPONSE");
            }
            MCPW_EVENT_INPUT_REQUIRED => {
                let p = self.ended(i, e.request, "INPUT_REQUIRED");
                let c = self.conns[i].as_mut().expect("live");
                c.retryable.insert(e.request, p.progress);
                c.retried_early.remove(&e.request);
            }
            MCPW_EVENT_VIOLATION => {
                use mcpw_violation::*;
                assert_ne!(e.violation, MCPW_VIOLATION_NONE);
                let reason = e.decode_reason as i32;
                match e.violation {
                    MCPW_VIOLATION_PARSE => assert!(matches!(reason, 1..=99 | 999), "{reason}"),
                    MCPW_VIOLATION_INVALID_MESSAGE => {
                        assert!(matches!(reason, 100..=199 | 999), "{reason}")
                    }
                    _ => assert_eq!(reason, 0),
                }
            }
            _ => {}
        }
    }

    /// Answers the request event `e` now, or not, as the PRNG picks, passing its id (and
    /// params or method) views straight back as the header allows.
    fn answer_on_the_spot(&mut self, i: usize, e: &mcpw_event, has_params: bool) {
        let choice = self.rng.below(8);
        let command = Expect {
            problems: Vec::new(),
            also: &[],
            command: true,
        };
        let id: *const mcpw_id = &e.id;
        match choice {
            0 | 1 => {
                let result = b"{}";
                // Safety: the id views memory of the handle, which the call copies first.
                self.conn_call(i, "mcpw_conn_respond", &command, |h| unsafe {
                    mcpw_conn_respond(h, id, result.as_ptr().cast(), result.len())
                });
            }
            2 if has_params => {
                let params = e.params;
                // Safety: as above; the params view too.
                self.conn_call(i, "mcpw_conn_respond", &command, |h| unsafe {
                    mcpw_conn_respond(h, id, params.ptr, params.len)
                });
            }
            3 => {
                let method = e.method;
                // Safety: as above; the method view too, as the message.
                self.conn_call(i, "mcpw_conn_respond_error", &command, |h| unsafe {
                    mcpw_conn_respond_error(h, id, -32603, method.ptr, method.len, ptr::null(), 0)
                });
            }
            _ => {}
        }
    }

    /// Reads the in-flight counts and checks them against the limits (and, right after a
    /// full drain, against the model).
    fn check_in_flight(&mut self, i: usize, drained: bool) {
        let mut ours = OutParam::<usize>::new();
        let mut peers = OutParam::<usize>::new();
        let (o, p) = (ours.ptr(false), peers.ptr(false));
        // Safety: `h` is NULL or live; the outputs are writable.
        if !self.conn_call(i, "mcpw_conn_in_flight", &Expect::ok(), |h| unsafe {
            mcpw_conn_in_flight(h, o, p)
        }) {
            return;
        }
        // Safety: the call succeeded.
        let (ours, peers) = unsafe { (*ours.get(), *peers.get()) };
        let c = self.conns[i].as_ref().expect("live");
        let limits = c.model.limits;
        assert!(
            ours <= limits.max_outbound_in_flight,
            "{ours} requests in flight, limit {}",
            limits.max_outbound_in_flight
        );
        assert!(
            peers <= limits.max_inbound_in_flight,
            "{peers} peer requests in flight, limit {}",
            limits.max_inbound_in_flight
        );
        if drained {
            // The engine's own `initialize` or `server/discover` may be in flight too.
            assert!(
                c.pending.len() <= ours && ours <= c.pending.len() + 1,
                "{ours} requests in flight, {} pending",
                c.pending.len()
            );
        }
        if c.closed {
            assert_eq!((ours, peers), (0, 0), "requests in flight after CLOSED");
        }
    }
}

// ---- Operations --------------------------------------------------------------------------

fn default_model(role: u32) -> ConfigModel {
    ConfigModel {
        role,
        versions: ProtocolVersion::ALL.len(),
        request_timeout_ms: 60_000,
        max_total_ms: 600_000,
        limits: mcpw_limits {
            max_frame: 0,
            max_outbound_in_flight: 0,
            max_inbound_in_flight: 0,
            max_buffered_output: 0,
            max_remembered_ids: 0,
            max_queued_events: 0,
        },
        policy: MCPW_POLICY_DEFAULT,
    }
}

fn small_limits() -> mcpw_limits {
    mcpw_limits {
        max_frame: 4096,
        max_outbound_in_flight: 3,
        max_inbound_in_flight: 2,
        max_buffered_output: 8192,
        max_remembered_ids: 3,
        max_queued_events: 8,
    }
}

impl Harness {
    fn new(setup: &AbiSetup) -> Harness {
        Harness {
            configs: Default::default(),
            conns: Default::default(),
            now: match setup.clock {
                Clock::Zero => 0,
                Clock::At(t) => u64::from(t) * 1_000_000,
                Clock::NearTheEnd => u64::MAX - 3 * 3_600 * 1_000_000_000,
            },
            rng: Rng::new(u64::from(setup.seed)),
            drain_always: setup.drain_always,
            panics: Vec::new(),
            tally: None,
        }
    }

    fn free_config(&mut self, i: usize) {
        if let Some(c) = self.configs[i].take() {
            // Safety: a handle from `mcpw_config_new`, freed once (the slot forgets it).
            unsafe { mcpw_config_free(c.handle) };
        }
    }

    fn free_conn(&mut self, i: usize) {
        if let Some(c) = self.conns[i].take() {
            // Safety: a handle from `mcpw_conn_new`, freed once (the slot forgets it).
            unsafe { mcpw_conn_free(c.handle) };
        }
    }

    fn apply(&mut self, op: &AbiOp) {
        match op {
            AbiOp::ConfigNew {
                slot,
                role,
                name,
                version,
                null_out,
            } => self.config_new(*slot, *role, name, version, *null_out),
            AbiOp::ConfigSet { slot, setting } => self.config_set(slot_of(*slot, CONFIGS), setting),
            AbiOp::ConfigGet { slot, null_out } => {
                self.config_get(slot_of(*slot, CONFIGS), *null_out)
            }
            AbiOp::ConfigFree { slot } => {
                let i = slot_of(*slot, CONFIGS);
                if self.configs[i].is_none() {
                    // Safety: NULL does nothing.
                    unsafe { mcpw_config_free(ptr::null_mut()) };
                }
                self.free_config(i);
            }
            AbiOp::ConnNew {
                config,
                conn,
                null_out,
            } => self.conn_new(slot_of(*config, CONFIGS), slot_of(*conn, CONNS), *null_out),
            AbiOp::ConnFree { conn } => {
                let i = slot_of(*conn, CONNS);
                if self.conns[i].is_none() {
                    // Safety: NULL does nothing.
                    unsafe { mcpw_conn_free(ptr::null_mut()) };
                }
                self.free_conn(i);
            }
            AbiOp::Feed {
                conn,
                bytes,
                stream,
            } => {
                let mut arg = Arg::of(bytes, JSONS);
                if let Text::Pick(_) = bytes {
                    arg.bytes.push(b'\n');
                }
                self.feed(slot_of(*conn, CONNS), &arg, *stream);
            }
            AbiOp::FeedExample {
                conn,
                example,
                id,
                stream,
            } => {
                let i = slot_of(*conn, CONNS);
                let mut text = EXAMPLES[usize::from(*example) % EXAMPLES.len()].to_owned();
                if let Some(pick) = id {
                    text = with_id(&text, &self.id_text(i, *pick));
                }
                if stream.is_none() {
                    text = one_line(&text);
                    text.push('\n');
                }
                self.feed(i, &Arg::bytes(text.as_bytes()), *stream);
            }
            AbiOp::FeedFrame {
                conn,
                frame,
                id,
                stream,
            } => {
                let i = slot_of(*conn, CONNS);
                let mut text = frame_text(*frame, &self.id_text(i, *id));
                if stream.is_none() {
                    text.push('\n');
                }
                self.feed(i, &Arg::bytes(text.as_bytes()), *stream);
            }
            AbiOp::Deliver { from, to, limit } => {
                let to = slot_of(*to, CONNS);
                self.take(slot_of(*from, CONNS), limit.map(usize::from), 0, Some(to));
            }
            AbiOp::Take {
                conn,
                limit,
                null_out,
            } => self.take(
                slot_of(*conn, CONNS),
                limit.map(usize::from),
                *null_out,
                None,
            ),
            AbiOp::ConsumeTooMuch { conn, extra } => {
                self.consume_too_much(slot_of(*conn, CONNS), usize::from(*extra))
            }
            AbiOp::Drain { conn, null_out } => {
                let i = slot_of(*conn, CONNS);
                if *null_out {
                    let expect = Expect {
                        problems: vec![MCPW_ERR_NULL_ARGUMENT],
                        also: &[],
                        command: false,
                    };
                    // Safety: `h` is NULL or live; a NULL output is refused.
                    self.conn_call(i, "mcpw_conn_poll_event", &expect, |h| unsafe {
                        mcpw_conn_poll_event(h, ptr::null_mut())
                    });
                }
                self.drain(i);
            }
            AbiOp::Eof { conn } => {
                let (i, now) = (slot_of(*conn, CONNS), self.now);
                // Safety: `h` is NULL or live.
                self.conn_call(i, "mcpw_conn_handle_eof", &Expect::ok(), |h| unsafe {
                    mcpw_conn_handle_eof(h, now)
                });
                self.drain(i);
                if self.conn(i).is_some_and(|c| !c.poisoned && !c.closed) {
                    // A last unterminated line had events: they came out first, and the end
                    // of input is due at once, at the next timer call.
                    self.timeout(i, false);
                }
                if let Some(c) = self.conn(i)
                    && !c.poisoned
                {
                    assert!(c.closed, "EOF must close the connection");
                }
            }
            AbiOp::Advance { ms } => {
                self.now = self
                    .now
                    .saturating_add(u64::from(*ms).saturating_mul(1_000_000));
            }
            AbiOp::Timeout { conn, to_deadline } => {
                self.timeout(slot_of(*conn, CONNS), *to_deadline)
            }
            AbiOp::Request {
                conn,
                method,
                params,
                options,
                null_out,
            } => self.request(
                slot_of(*conn, CONNS),
                None,
                method,
                params,
                options,
                *null_out,
            ),
            AbiOp::RequestRelated {
                conn,
                parent,
                method,
                params,
                options,
            } => self.request(
                slot_of(*conn, CONNS),
                Some(parent),
                method,
                params,
                options,
                false,
            ),
            AbiOp::Notify {
                conn,
                method,
                params,
            } => {
                let i = slot_of(*conn, CONNS);
                let (method, params) = (Arg::of(method, METHODS), Arg::of(params, JSONS));
                let mut expect = command();
                method.problems(Want::Text, false, &mut expect.problems);
                params.problems(Want::Json, true, &mut expect.problems);
                // Safety: `h` is NULL or live; the arguments are valid for their lengths.
                self.conn_call(i, "mcpw_conn_notify", &expect, |h| unsafe {
                    mcpw_conn_notify(h, method.ptr(), method.len(), params.ptr(), params.len())
                });
            }
            AbiOp::Respond { conn, id, result } => {
                let i = slot_of(*conn, CONNS);
                let mut expect = command();
                let id = id_in(id, &self.peers(i), &mut expect.problems);
                let result = Arg::of(result, JSONS);
                result.problems(Want::Json, false, &mut expect.problems);
                let idp = id.ptr();
                // Safety: as above; the id is NULL or readable.
                self.conn_call(i, "mcpw_conn_respond", &expect, |h| unsafe {
                    mcpw_conn_respond(h, idp, result.ptr(), result.len())
                });
            }
            AbiOp::RespondError {
                conn,
                id,
                code,
                message,
                data,
            } => {
                let i = slot_of(*conn, CONNS);
                let mut expect = command();
                let id = id_in(id, &self.peers(i), &mut expect.problems);
                let code = match code {
                    255 => i64::MIN,
                    254 => i64::MAX,
                    c => CODES[usize::from(*c) % CODES.len()],
                };
                let (message, data) = (Arg::of(message, WORDS), Arg::of(data, JSONS));
                message.problems(Want::Text, false, &mut expect.problems);
                data.problems(Want::Json, true, &mut expect.problems);
                let idp = id.ptr();
                // Safety: as above.
                self.conn_call(i, "mcpw_conn_respond_error", &expect, |h| unsafe {
                    mcpw_conn_respond_error(
                        h,
                        idp,
                        code,
                        message.ptr(),
                        message.len(),
                        data.ptr(),
                        data.len(),
                    )
                });
            }
            AbiOp::Progress {
                conn,
                id,
                progress,
                total,
                message,
            } => {
                let i = slot_of(*conn, CONNS);
                let mut expect = command();
                let id = id_in(id, &self.peers(i), &mut expect.problems);
                let message = Arg::of(message, WORDS);
                message.problems(Want::Text, true, &mut expect.problems);
                let (progress, total) = (number(*progress), total.map(number));
                let idp = id.ptr();
                // Safety: as above.
                self.conn_call(i, "mcpw_conn_progress", &expect, |h| unsafe {
                    mcpw_conn_progress(
                        h,
                        idp,
                        progress,
                        total.unwrap_or(f64::NAN),
                        total.is_some(),
                        message.ptr(),
                        message.len(),
                    )
                });
            }
            AbiOp::Log {
                conn,
                id,
                level,
                logger,
                data,
                null_out,
            } => {
                let i = slot_of(*conn, CONNS);
                let mut expect = command();
                if *null_out {
                    expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
                }
                let id = id_in(id, &self.peers(i), &mut expect.problems);
                let level = if *level == u8::MAX {
                    u32::MAX
                } else {
                    u32::from(*level)
                };
                if level > 7 {
                    expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                }
                let (logger, data) = (Arg::of(logger, WORDS), Arg::of(data, JSONS));
                logger.problems(Want::Text, true, &mut expect.problems);
                data.problems(Want::Json, false, &mut expect.problems);
                let mut sent = OutParam::<bool>::new();
                let (idp, out) = (id.ptr(), sent.ptr(*null_out));
                // Safety: as above; the output is NULL or writable.
                let ok = self.conn_call(i, "mcpw_conn_log", &expect, |h| unsafe {
                    mcpw_conn_log(
                        h,
                        idp,
                        level,
                        logger.ptr(),
                        logger.len(),
                        data.ptr(),
                        data.len(),
                        out,
                    )
                });
                if !ok {
                    assert!(
                        sent.untouched(),
                        "mcpw_conn_log wrote its output and failed"
                    );
                }
            }
            AbiOp::InputRequired {
                conn,
                id,
                requests,
                state,
            } => {
                let i = slot_of(*conn, CONNS);
                let mut expect = command();
                let id = id_in(id, &self.peers(i), &mut expect.problems);
                let (requests, state) = (Arg::of(requests, JSONS), Arg::of(state, WORDS));
                requests.problems(Want::Json, true, &mut expect.problems);
                state.problems(Want::Text, true, &mut expect.problems);
                let idp = id.ptr();
                // Safety: as above.
                self.conn_call(i, "mcpw_conn_respond_input_required", &expect, |h| unsafe {
                    mcpw_conn_respond_input_required(
                        h,
                        idp,
                        requests.ptr(),
                        requests.len(),
                        state.ptr(),
                        state.len(),
                    )
                });
            }
            AbiOp::Retry {
                conn,
                request,
                responses,
                null_out,
            } => self.retry(slot_of(*conn, CONNS), *request, responses, *null_out),
            AbiOp::Cancel {
                conn,
                request,
                reason,
            } => {
                let i = slot_of(*conn, CONNS);
                let id = self.own_request(i, *request);
                let mut expect = command();
                let reason = Arg::of(reason, WORDS);
                reason.problems(Want::Text, true, &mut expect.problems);
                let now = self.now;
                // Safety: as above.
                if self.conn_call(i, "mcpw_conn_cancel", &expect, |h| unsafe {
                    mcpw_conn_cancel(h, now, id, reason.ptr(), reason.len())
                }) {
                    self.ended(i, id, "a successful cancel");
                }
            }
            AbiOp::Close { conn, grace_ms } => {
                let i = slot_of(*conn, CONNS);
                let grace = grace_ms.map_or(u64::MAX, u64::from);
                self.close(i, grace);
            }
            AbiOp::Getters { conn, null_out } => self.getters(slot_of(*conn, CONNS), *null_out),
            AbiOp::RequestContext { conn, id, null_out } => {
                let i = slot_of(*conn, CONNS);
                let mut expect = Expect::ok();
                if *null_out {
                    expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
                }
                let id = id_in(id, &self.peers(i), &mut expect.problems);
                let mut context = OutParam::<mcpw_request_context>::new();
                let (idp, out) = (id.ptr(), context.ptr(*null_out));
                // Safety: as above.
                let ok = self.conn_call(i, "mcpw_conn_request_context", &expect, |h| unsafe {
                    mcpw_conn_request_context(h, idp, out)
                });
                if ok {
                    // Safety: the call succeeded.
                    let context = unsafe { context.get() };
                    // Safety: a static string.
                    let version = unsafe { text_view(&context.version, "context version") };
                    if context.known {
                        assert!(version.is_some_and(|v| known_version(&v)));
                    } else {
                        assert!(version.is_none() && context.client_capabilities == 0);
                    }
                    assert!(context.log_level <= 7);
                } else {
                    assert!(context.untouched());
                }
            }
            AbiOp::Json { text, key, index } => {
                self.json(text, key, *index);
                decode_frames(text, *index);
            }
            AbiOp::Message { code } => {
                // Safety: any number is accepted.
                let message = unsafe { CStr::from_ptr(mcpw_result_message(*code)) };
                let message = message.to_str().expect("messages are UTF-8");
                assert!(!message.is_empty());
                // Safety: a static NUL-terminated string.
                let version = unsafe { CStr::from_ptr(mcpw_version()) };
                let version = version.to_str().expect("UTF-8");
                assert_eq!(version.split('.').count(), 3, "{version}");
            }
        }
        self.drain_all();
    }
}

fn command() -> Expect<'static> {
    Expect {
        problems: Vec::new(),
        also: &[],
        command: true,
    }
}

impl Harness {
    fn config_new(&mut self, slot: u8, role: u8, name: &Text, version: &Text, null_out: bool) {
        let i = slot_of(slot, CONFIGS);
        self.free_config(i);
        let role = if role == u8::MAX {
            u32::MAX
        } else {
            u32::from(role)
        };
        let (name, version) = (Arg::of(name, WORDS), Arg::of(version, WORDS));
        let mut expect = Expect::ok();
        if null_out {
            expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
        }
        name.problems(Want::Text, false, &mut expect.problems);
        version.problems(Want::Text, false, &mut expect.problems);
        if role != mcpw_role::MCPW_ROLE_CLIENT as u32 && role != mcpw_role::MCPW_ROLE_SERVER as u32
        {
            expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
        }
        let mut out = OutParam::<*mut mcpw_config>::new();
        // Safety: the arguments are valid for their lengths; the output is NULL or writable.
        let got = unsafe {
            mcpw_config_new(
                role,
                name.ptr(),
                name.len(),
                version.ptr(),
                version.len(),
                out.ptr(null_out),
            )
        };
        assert_ne!(got, MCPW_ERR_PANIC, "mcpw_config_new panicked");
        verdict("mcpw_config_new", Gate::Live, got, &expect, false);
        if got != MCPW_OK {
            assert!(
                out.untouched(),
                "mcpw_config_new wrote its output and failed"
            );
            return;
        }
        // Safety: the call succeeded.
        let handle = *unsafe { out.get() };
        assert!(!handle.is_null());
        self.configs[i] = Some(ConfigSlot {
            handle,
            poisoned: false,
            model: default_model(role),
        });
        let mut limits = OutParam::<mcpw_limits>::new();
        let lp = limits.ptr(false);
        // Safety: a live handle; the output is writable.
        if self.config_call(i, "mcpw_config_get_limits", &Expect::ok(), |h| unsafe {
            mcpw_config_get_limits(h, lp)
        }) {
            // Safety: the call succeeded.
            let limits = *unsafe { limits.get() };
            assert_eq!(limits.max_outbound_in_flight, 1024, "default limits");
            if let Some(c) = &mut self.configs[i] {
                c.model.limits = limits;
            }
        }
    }

    fn config_set(&mut self, i: usize, setting: &Setting) {
        let mut expect = Expect::ok();
        let mut model = self.configs[i].as_ref().map(|c| c.model);
        let ok = match setting {
            Setting::Versions(arg) => {
                let mut texts: Vec<Arg> = Vec::new();
                let (list_null, count) = match arg {
                    VersionsArg::None => (true, 0),
                    // NULL with any non-zero count, huge ones too (the header's rule).
                    VersionsArg::NullWithCount(n) => {
                        expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
                        if *n == u8::MAX {
                            (true, usize::MAX)
                        } else {
                            (true, usize::from(*n) + 1)
                        }
                    }
                    VersionsArg::List { mask, extra } => {
                        for (bit, v) in VERSIONS.iter().enumerate() {
                            if mask & (1 << bit) != 0 {
                                texts.push(Arg::bytes(v.as_bytes()));
                            }
                        }
                        if let Some(extra) = extra {
                            texts.push(Arg::of(extra, VERSIONS));
                        }
                        (false, texts.len())
                    }
                };
                let mut known = HashSet::new();
                for t in &texts {
                    let before = expect.problems.len();
                    t.problems(Want::Text, false, &mut expect.problems);
                    if expect.problems.len() == before {
                        match std::str::from_utf8(&t.bytes)
                            .ok()
                            .and_then(ProtocolVersion::parse)
                        {
                            Some(v) => {
                                known.insert(v);
                            }
                            None => expect.problems.push(MCPW_ERR_UNKNOWN_VERSION),
                        }
                    }
                }
                let views: Vec<mcpw_str> = texts
                    .iter()
                    .map(|t| mcpw_str {
                        ptr: t.ptr(),
                        len: t.len(),
                    })
                    .collect();
                let list = if list_null {
                    ptr::null()
                } else {
                    views.as_ptr()
                };
                if let Some(m) = &mut model {
                    m.versions = known.len();
                }
                // Safety: `list` is NULL or `count` readable views, each valid for its length.
                self.config_call(i, "mcpw_config_set_versions", &expect, |h| unsafe {
                    mcpw_config_set_versions(h, list, count)
                })
            }
            Setting::Info(text) => {
                let arg = Arg::of(text, JSONS);
                arg.problems(Want::Json, false, &mut expect.problems);
                // An `Implementation`: string `name` and `version`.
                let implementation = arg.object().is_some_and(|o| {
                    let found = o.get_each(["name", "version"]);
                    (0..2).all(|i| matches!(found.get(i), Ok(Some(v)) if v.as_str().is_some()))
                });
                if expect.problems.is_empty() && !implementation {
                    expect.problems.push(MCPW_ERR_JSON_WRONG_TYPE);
                }
                // Safety: valid for its length.
                self.config_call(i, "mcpw_config_set_info", &expect, |h| unsafe {
                    mcpw_config_set_info(h, arg.ptr(), arg.len())
                })
            }
            Setting::Capabilities(text) => {
                let arg = Arg::of(text, JSONS);
                arg.problems(Want::Json, false, &mut expect.problems);
                if expect.problems.is_empty() && arg.object().is_none() {
                    expect.problems.push(MCPW_ERR_JSON_WRONG_TYPE);
                }
                expect.also = &[MCPW_ERR_DUPLICATE_KEY];
                // Safety: valid for its length.
                self.config_call(i, "mcpw_config_set_capabilities", &expect, |h| unsafe {
                    mcpw_config_set_capabilities(h, arg.ptr(), arg.len())
                })
            }
            Setting::Instructions(text) => {
                let arg = Arg::of(text, WORDS);
                arg.problems(Want::Text, true, &mut expect.problems);
                // Safety: valid for its length.
                self.config_call(i, "mcpw_config_set_instructions", &expect, |h| unsafe {
                    mcpw_config_set_instructions(h, arg.ptr(), arg.len())
                })
            }
            Setting::Timeouts(a, b) => {
                let ms = |v: u32| {
                    if v == u32::MAX {
                        u64::MAX
                    } else {
                        u64::from(v)
                    }
                };
                let (a, b) = (ms(*a), ms(*b));
                if a == 0 || b == 0 {
                    expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                }
                if let Some(m) = &mut model {
                    m.request_timeout_ms = a;
                    m.max_total_ms = b;
                }
                // Safety: a config handle or NULL.
                self.config_call(i, "mcpw_config_set_timeouts", &expect, |h| unsafe {
                    mcpw_config_set_timeouts(h, a, b)
                })
            }
            Setting::Limits(arg) => {
                let limits = match arg {
                    LimitsArg::Null => None,
                    LimitsArg::Small => Some(small_limits()),
                    LimitsArg::Given {
                        max_frame,
                        outbound,
                        inbound,
                        buffered,
                        remembered,
                        queued,
                    } => Some(mcpw_limits {
                        max_frame: usize::from(*max_frame),
                        max_outbound_in_flight: usize::from(*outbound),
                        max_inbound_in_flight: usize::from(*inbound),
                        max_buffered_output: usize::from(*buffered),
                        max_remembered_ids: usize::from(*remembered),
                        max_queued_events: usize::from(*queued),
                    }),
                };
                match limits {
                    None => expect.problems.push(MCPW_ERR_NULL_ARGUMENT),
                    Some(l) => {
                        let fields = [
                            l.max_frame,
                            l.max_outbound_in_flight,
                            l.max_inbound_in_flight,
                            l.max_buffered_output,
                            l.max_remembered_ids,
                            l.max_queued_events,
                        ];
                        if fields.contains(&0) {
                            expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                        }
                        if let Some(m) = &mut model {
                            m.limits = l;
                        }
                    }
                }
                let lp: *const mcpw_limits = limits.as_ref().map_or(ptr::null(), |l| l);
                // Safety: `lp` is NULL or readable.
                self.config_call(i, "mcpw_config_set_limits", &expect, |h| unsafe {
                    mcpw_config_set_limits(h, lp)
                })
            }
            Setting::Policy(bits) => {
                let flags = u32::from(bits & 0x7f) | (u32::from(bits >> 7) << 31);
                if flags & !0x1f != 0 {
                    expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                }
                if let Some(m) = &mut model {
                    m.policy = flags;
                }
                // Safety: a config handle or NULL.
                self.config_call(i, "mcpw_config_set_policy", &expect, |h| unsafe {
                    mcpw_config_set_policy(h, flags)
                })
            }
            Setting::ClientEra(era) => {
                let era = u32::from(*era);
                if !(1..=3).contains(&era) {
                    expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                }
                // Safety: a config handle or NULL.
                self.config_call(i, "mcpw_config_set_client_era", &expect, |h| unsafe {
                    mcpw_config_set_client_era(h, era)
                })
            }
            Setting::DiscoverTimeout(ms) => {
                if *ms == 0 {
                    expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                }
                let ms = u64::from(*ms);
                // Safety: a config handle or NULL.
                self.config_call(i, "mcpw_config_set_discover_timeout", &expect, |h| unsafe {
                    mcpw_config_set_discover_timeout(h, ms)
                })
            }
            Setting::DiscoverCache(ttl, scope) => {
                let scope = u32::from(*scope);
                if !(1..=2).contains(&scope) {
                    expect.problems.push(MCPW_ERR_INVALID_ARGUMENT);
                }
                let ttl = u64::from(*ttl);
                // Safety: a config handle or NULL.
                self.config_call(i, "mcpw_config_set_discover_cache", &expect, |h| unsafe {
                    mcpw_config_set_discover_cache(h, ttl, scope)
                })
            }
        };
        if ok && let (Some(c), Some(m)) = (&mut self.configs[i], model) {
            c.model = m;
        }
    }

    fn config_get(&mut self, i: usize, null_out: bool) {
        let mut expect = Expect::ok();
        if null_out {
            expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
        }
        let mut limits = OutParam::<mcpw_limits>::new();
        let lp = limits.ptr(null_out);
        // Safety: NULL or a live handle; the output is NULL or writable.
        if self.config_call(i, "mcpw_config_get_limits", &expect, |h| unsafe {
            mcpw_config_get_limits(h, lp)
        }) {
            let model = self.configs[i].as_ref().expect("live").model;
            // Safety: the call succeeded.
            assert_eq!(*unsafe { limits.get() }, model.limits);
        } else {
            assert!(limits.untouched());
        }
        let mut policy = OutParam::<u32>::new();
        let pp = policy.ptr(null_out);
        // Safety: as above.
        if self.config_call(i, "mcpw_config_get_policy", &expect, |h| unsafe {
            mcpw_config_get_policy(h, pp)
        }) {
            let model = self.configs[i].as_ref().expect("live").model;
            // Safety: the call succeeded.
            assert_eq!(*unsafe { policy.get() }, model.policy);
        } else {
            assert!(policy.untouched());
        }
    }

    fn conn_new(&mut self, config: usize, i: usize, null_out: bool) {
        self.free_conn(i);
        let model = self.configs[config].as_ref().map(|c| c.model);
        let mut expect = Expect::ok();
        if null_out {
            expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
        }
        if model.is_some_and(|m| m.versions == 0) {
            expect.problems.push(MCPW_ERR_CONFIG_REFUSED);
        }
        let mut out = OutParam::<*mut mcpw_conn>::new();
        let (op, now) = (out.ptr(null_out), self.now);
        // Safety: NULL or a live config; the output is NULL or writable.
        let ok = self.config_call(config, "mcpw_conn_new", &expect, |h| unsafe {
            mcpw_conn_new(h, now, op)
        });
        if !ok {
            assert!(out.untouched(), "mcpw_conn_new wrote its output and failed");
            return;
        }
        let model = model.expect("a live config");
        // Safety: the call succeeded.
        let handle = *unsafe { out.get() };
        assert!(!handle.is_null());
        self.conns[i] = Some(ConnSlot {
            handle,
            poisoned: false,
            model,
            pending: HashMap::new(),
            issued: HashSet::new(),
            own: Vec::new(),
            retryable: HashMap::new(),
            retried_early: HashSet::new(),
            peer_requests: Vec::new(),
            closed: false,
            close_deadline: None,
            unfinished: HashMap::new(),
        });
        let mut role = OutParam::<mcpw_role>::new();
        let rp = role.ptr(false);
        // Safety: a live handle; the output is writable.
        if self.conn_call(i, "mcpw_conn_role", &Expect::ok(), |h| unsafe {
            mcpw_conn_role(h, rp)
        }) {
            // Safety: the call succeeded.
            assert_eq!(*unsafe { role.get() } as u32, model.role);
        }
    }

    /// The JSON text of an id for a frame fed to connection slot `i`.
    fn id_text(&self, i: usize, pick: IdPick) -> String {
        let c = self.conns[i].as_ref();
        match pick {
            IdPick::Own(k) => match c.filter(|c| !c.own.is_empty()) {
                Some(c) => c.own[usize::from(k) % c.own.len()].to_string(),
                None => k.to_string(),
            },
            IdPick::Peer(k) => match c.filter(|c| !c.peer_requests.is_empty()) {
                Some(c) => {
                    let p = &c.peer_requests[usize::from(k) % c.peer_requests.len()];
                    if p.kind == STRING {
                        format!("\"{}\"", String::from_utf8_lossy(&p.string))
                    } else {
                        p.integer.to_string()
                    }
                }
                None => k.to_string(),
            },
            IdPick::Int(n) => n.to_string(),
            IdPick::Str(k) => format!("\"s{k}\""),
        }
    }

    /// `mcpw_conn_handle_input`, or `mcpw_conn_handle_frame` on `stream`.
    fn feed(&mut self, i: usize, arg: &Arg, stream: Option<u8>) {
        let mut expect = Expect::ok();
        arg.problems(Want::Bytes, false, &mut expect.problems);
        let now = self.now;
        let (bytes, len) = (arg.ptr().cast::<u8>(), arg.len());
        match stream {
            // Safety: `h` is NULL or live; the bytes are NULL or readable for `len`.
            None => self.conn_call(i, "mcpw_conn_handle_input", &expect, |h| unsafe {
                mcpw_conn_handle_input(h, now, bytes, len)
            }),
            // Safety: as above.
            Some(s) => self.conn_call(i, "mcpw_conn_handle_frame", &expect, |h| unsafe {
                mcpw_conn_handle_frame(h, now, u64::from(s), bytes, len)
            }),
        };
    }

    /// Takes up to `limit` bytes of output from slot `i` (all of it when `None`), checking
    /// that it is whole JSON-RPC lines, and feeds it to slot `to` if given. `null_out` 1-3
    /// first asks with that out pointer NULL.
    fn take(&mut self, i: usize, limit: Option<usize>, null_out: u8, to: Option<usize>) {
        if (1..=3).contains(&null_out) {
            let expect = Expect {
                problems: vec![MCPW_ERR_NULL_ARGUMENT],
                also: &[],
                command: false,
            };
            let mut bytes = OutParam::<*const u8>::new();
            let mut len = OutParam::<usize>::new();
            let mut stream = OutParam::<u64>::new();
            let (b, l, s) = (
                bytes.ptr(null_out == 1),
                len.ptr(null_out == 2),
                stream.ptr(null_out == 3),
            );
            // Safety: `h` is NULL or live; each output is NULL or writable.
            self.conn_call(i, "mcpw_conn_transmit", &expect, |h| unsafe {
                mcpw_conn_transmit(h, b, l, s)
            });
            assert!(bytes.untouched() && len.untouched() && stream.untouched());
        }
        let mut budget = limit.unwrap_or(usize::MAX);
        for _ in 0..256 {
            let mut bytes = OutParam::<*const u8>::new();
            let mut len = OutParam::<usize>::new();
            let mut stream = OutParam::<u64>::new();
            let (b, l, s) = (bytes.ptr(false), len.ptr(false), stream.ptr(false));
            // Safety: as above.
            if !self.conn_call(i, "mcpw_conn_transmit", &Expect::ok(), |h| unsafe {
                mcpw_conn_transmit(h.cast_const(), b, l, s)
            }) {
                assert!(bytes.untouched() && len.untouched() && stream.untouched());
                return;
            }
            // Safety: the call succeeded.
            let (bytes, len, stream) = unsafe { (*bytes.get(), *len.get(), *stream.get()) };
            if len == 0 {
                assert!(
                    bytes.is_null() && stream == 0,
                    "nothing lent, but not NULL/0"
                );
                return;
            }
            assert!(!bytes.is_null());
            let n = len.min(budget);
            // Safety: the library lends `len` bytes, valid until the next non-const call on
            // slot `i`'s handle.
            let lent = unsafe { std::slice::from_raw_parts(bytes, n) };
            self.output(i, stream, lent);
            if let Some(to) = to {
                let now = self.now;
                let mut expect = Expect::ok();
                if to == i {
                    // The header forbids feeding a handle its own lent bytes: copy them.
                    let copy = lent.to_vec();
                    self.consume(i, n);
                    expect.problems.clear();
                    // Safety: `h` is NULL or live; `copy` is readable.
                    self.conn_call(to, "mcpw_conn_handle_input", &expect, |h| unsafe {
                        mcpw_conn_handle_input(h, now, copy.as_ptr(), copy.len())
                    });
                } else {
                    let p = lent.as_ptr();
                    // Safety: `h` is NULL or live; the bytes are another handle's, which
                    // nothing changes during the call.
                    self.conn_call(to, "mcpw_conn_handle_input", &expect, |h| unsafe {
                        mcpw_conn_handle_input(h, now, p, n)
                    });
                    self.consume(i, n);
                }
            } else {
                self.consume(i, n);
            }
            budget -= n;
            if budget == 0 {
                return;
            }
        }
    }

    fn consume(&mut self, i: usize, n: usize) {
        // Safety: `h` is NULL or live.
        self.conn_call(i, "mcpw_conn_consume", &Expect::ok(), |h| unsafe {
            mcpw_conn_consume(h, n)
        });
    }

    /// Output taken from slot `i`: complete lines must be JSON-RPC messages.
    fn output(&mut self, i: usize, stream: u64, bytes: &[u8]) {
        let c = self.conns[i].as_mut().expect("live");
        let buf = c.unfinished.entry(stream).or_default();
        buf.extend_from_slice(bytes);
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            check_frame(&line[..end]);
        }
    }

    fn consume_too_much(&mut self, i: usize, extra: usize) {
        let mut len = OutParam::<usize>::new();
        let mut bytes = OutParam::<*const u8>::new();
        let mut stream = OutParam::<u64>::new();
        let (b, l, s) = (bytes.ptr(false), len.ptr(false), stream.ptr(false));
        // Safety: `h` is NULL or live; the outputs are writable.
        if !self.conn_call(i, "mcpw_conn_transmit", &Expect::ok(), |h| unsafe {
            mcpw_conn_transmit(h, b, l, s)
        }) {
            return;
        }
        // Safety: the call succeeded.
        let lent = *unsafe { len.get() };
        let expect = Expect {
            problems: vec![MCPW_ERR_CONSUME_TOO_MUCH],
            also: &[],
            command: false,
        };
        let n = lent.saturating_add(extra).saturating_add(1);
        // Safety: `h` is live.
        self.conn_call(i, "mcpw_conn_consume", &expect, |h| unsafe {
            mcpw_conn_consume(h, n)
        });
        let mut again = OutParam::<usize>::new();
        let l = again.ptr(false);
        // Safety: as above.
        if self.conn_call(i, "mcpw_conn_transmit", &Expect::ok(), |h| unsafe {
            mcpw_conn_transmit(h, b, l, s)
        }) {
            // Safety: the call succeeded.
            assert_eq!(*unsafe { again.get() }, lent, "a refused consume consumed");
        }
    }

    /// `mcpw_conn_handle_timeout` now (or first at the connection's deadline), then checks
    /// that nothing is left past its deadline.
    fn timeout(&mut self, i: usize, to_deadline: bool) {
        if to_deadline && let Some(deadline) = self.deadline(i) {
            self.now = self.now.max(deadline);
        }
        let now = self.now;
        // Safety: `h` is NULL or live.
        let ok = self.conn_call(i, "mcpw_conn_handle_timeout", &Expect::ok(), |h| unsafe {
            mcpw_conn_handle_timeout(h, now)
        });
        self.drain(i);
        if !ok {
            return;
        }
        let c = self.conns[i].as_ref().expect("live");
        if c.poisoned {
            return;
        }
        for (id, p) in &c.pending {
            assert!(
                p.deadline > now,
                "request {id} still pending at {now}, past {}",
                p.deadline
            );
        }
        if let Some(deadline) = c.close_deadline {
            assert!(
                deadline > now || c.closed,
                "not closed at {now}, past the close deadline {deadline}"
            );
        }
    }

    /// `mcpw_conn_poll_timeout`, checked.
    fn deadline(&mut self, i: usize) -> Option<u64> {
        let mut has = OutParam::<bool>::new();
        let mut at = OutParam::<u64>::new();
        let (hp, ap) = (has.ptr(false), at.ptr(false));
        // Safety: `h` is NULL or live; the outputs are writable.
        if !self.conn_call(i, "mcpw_conn_poll_timeout", &Expect::ok(), |h| unsafe {
            mcpw_conn_poll_timeout(h, hp, ap)
        }) {
            assert!(has.untouched() && at.untouched());
            return None;
        }
        // Safety: the call succeeded.
        let (has, at) = unsafe { (*has.get(), *at.get()) };
        if !has {
            assert_eq!(at, 0);
        }
        has.then_some(at)
    }

    fn request(
        &mut self,
        i: usize,
        parent: Option<&IdArg>,
        method: &Text,
        params: &Text,
        options: &Options,
        null_out: bool,
    ) {
        let mut expect = command();
        if null_out {
            expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
        }
        let parent = parent.map(|p| id_in(p, &self.peers(i), &mut expect.problems));
        let (method, params) = (Arg::of(method, METHODS), Arg::of(params, JSONS));
        method.problems(Want::Text, false, &mut expect.problems);
        params.problems(Want::Json, true, &mut expect.problems);
        let (options, timeout, progress) = options_in(options, &mut expect.problems);
        let op: *const mcpw_request_options = options.as_ref().map_or(ptr::null(), |o| o);
        let mut out = OutParam::<i64>::new();
        let (outp, now) = (out.ptr(null_out), self.now);
        let ok = match &parent {
            // Safety: `h` is NULL or live; every argument is NULL or valid for its length;
            // the output is NULL or writable.
            None => self.conn_call(i, "mcpw_conn_request", &expect, |h| unsafe {
                mcpw_conn_request(
                    h,
                    now,
                    method.ptr(),
                    method.len(),
                    params.ptr(),
                    params.len(),
                    op,
                    outp,
                )
            }),
            Some(parent) => {
                let pp = parent.ptr();
                // Safety: as above; the parent id is NULL or readable.
                self.conn_call(i, "mcpw_conn_request_related", &expect, |h| unsafe {
                    mcpw_conn_request_related(
                        h,
                        now,
                        pp,
                        method.ptr(),
                        method.len(),
                        params.ptr(),
                        params.len(),
                        op,
                        outp,
                    )
                })
            }
        };
        if ok {
            // Safety: the call succeeded.
            let id = *unsafe { out.get() };
            let listen = method.null.is_none() && method.bytes == b"subscriptions/listen";
            self.issued(i, id, timeout, progress, listen);
        } else {
            assert!(out.untouched(), "a failed request wrote its id");
        }
    }

    fn own_request(&self, i: usize, pick: Own) -> i64 {
        match (pick, self.conns[i].as_ref()) {
            (Own::Known(k), Some(c)) if !c.retryable.is_empty() && k % 2 == 0 => {
                let mut ids: Vec<i64> = c.retryable.keys().copied().collect();
                ids.sort_unstable();
                ids[usize::from(k / 2) % ids.len()]
            }
            (Own::Known(k), Some(c)) if !c.own.is_empty() => c.own[usize::from(k) % c.own.len()],
            (Own::Known(k), _) => i64::from(k),
            (Own::Raw(n), _) => n,
        }
    }

    fn retry(&mut self, i: usize, request: Own, responses: &Text, null_out: bool) {
        let request = self.own_request(i, request);
        let mut expect = command();
        if null_out {
            expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
        }
        let responses = Arg::of(responses, JSONS);
        responses.problems(Want::Json, true, &mut expect.problems);
        let mut out = OutParam::<i64>::new();
        let (outp, now) = (out.ptr(null_out), self.now);
        // Safety: as for requests.
        if self.conn_call(i, "mcpw_conn_retry", &expect, |h| unsafe {
            mcpw_conn_retry(h, now, request, responses.ptr(), responses.len(), outp)
        }) {
            let c = self.conns[i].as_mut().expect("live");
            // Retried once the engine handled its "input required" answer, which may be
            // before the harness polled that event: then the request is still pending here,
            // and the event must still come.
            let progress = match c.retryable.get(&request) {
                Some(&progress) => progress,
                None => {
                    let p = c
                        .pending
                        .get(&request)
                        .unwrap_or_else(|| panic!("retried {request}, which did not need input"));
                    let progress = p.progress;
                    c.retried_early.insert(request);
                    progress
                }
            };
            // Safety: the call succeeded.
            let id = *unsafe { out.get() };
            self.issued(i, id, None, progress, false);
        } else {
            assert!(out.untouched(), "a failed retry wrote its id");
        }
    }

    fn close(&mut self, i: usize, grace_ms: u64) {
        let now = self.now;
        // Safety: `h` is NULL or live.
        if self.conn_call(i, "mcpw_conn_close", &Expect::ok(), |h| unsafe {
            mcpw_conn_close(h, now, grace_ms)
        }) && let Some(c) = self.conn(i)
            && c.close_deadline.is_none()
            && !c.closed
        {
            c.close_deadline = Some(now.saturating_add(grace_ms.saturating_mul(1_000_000)));
        }
    }

    /// Every `const` getter, checked against the model.
    fn getters(&mut self, i: usize, null_out: bool) {
        let mut expect = Expect::ok();
        if null_out {
            expect.problems.push(MCPW_ERR_NULL_ARGUMENT);
        }
        let live = self.conns[i].as_ref().is_some_and(|c| !c.poisoned);
        let closed = self.conns[i].as_ref().is_some_and(|c| c.closed);

        let mut state = OutParam::<mcpw_state>::new();
        let sp = state.ptr(null_out);
        // Safety: `h` is NULL or live; the output is NULL or writable.
        if self.conn_call(i, "mcpw_conn_state", &expect, |h| unsafe {
            mcpw_conn_state(h, sp)
        }) {
            // Safety: the call succeeded.
            let state = *unsafe { state.get() };
            if closed {
                assert_eq!(state, mcpw_state::MCPW_STATE_CLOSED);
            }
        } else {
            assert!(state.untouched());
        }

        let mut era = OutParam::<mcpw_era>::new();
        let ep = era.ptr(null_out);
        // Safety: as above.
        if !self.conn_call(i, "mcpw_conn_era", &expect, |h| unsafe {
            mcpw_conn_era(h, ep)
        }) {
            assert!(era.untouched());
        }

        let strs: [(
            &str,
            unsafe extern "C" fn(*const mcpw_conn, *mut mcpw_str) -> mcpw_result,
        ); 4] = [
            ("mcpw_conn_protocol_version", mcpw_conn_protocol_version),
            ("mcpw_conn_peer_info", mcpw_conn_peer_info),
            ("mcpw_conn_peer_capabilities", mcpw_conn_peer_capabilities),
            ("mcpw_conn_peer_instructions", mcpw_conn_peer_instructions),
        ];
        for (k, (name, getter)) in strs.into_iter().enumerate() {
            let mut s = OutParam::<mcpw_str>::new();
            let p = s.ptr(null_out);
            // Safety: as above.
            if self.conn_call(i, name, &expect, |h| unsafe { getter(h.cast_const(), p) }) {
                // Safety: the call succeeded; the view lives until the next non-const call.
                let s = *unsafe { s.get() };
                match k {
                    0 => {
                        // Safety: as above.
                        if let Some(v) = unsafe { text_view(&s, name) } {
                            assert!(known_version(&v), "{v:?}");
                        }
                    }
                    1 | 2 => {
                        // Safety: as above.
                        if let Some(j) = unsafe { json_view(&s, name) } {
                            assert!(RawJson::new(&j).is_ok_and(|j| j.is_object()), "{j}");
                        }
                    }
                    // Safety: as above.
                    _ => drop(unsafe { text_view(&s, name) }),
                }
            } else {
                assert!(s.untouched());
            }
        }

        let mut stats = OutParam::<mcpw_stats>::new();
        let stp = stats.ptr(null_out);
        // Safety: as above.
        if !self.conn_call(i, "mcpw_conn_stats", &expect, |h| unsafe {
            mcpw_conn_stats(h, stp)
        }) {
            assert!(stats.untouched());
        }

        let mut piece = OutParam::<usize>::new();
        let pp = piece.ptr(null_out);
        // Safety: as above.
        if self.conn_call(i, "mcpw_conn_input_piece", &expect, |h| unsafe {
            mcpw_conn_input_piece(h.cast_const(), pp)
        }) {
            // Safety: the call succeeded.
            let piece = *unsafe { piece.get() };
            let limits = self.conns[i].as_ref().expect("live").model.limits;
            // Half the inbound limit in small requests (36 bytes each), and no more than a
            // 64th of half the output budget, within 64 B..4 KiB: what the header promises.
            let want = (limits.max_inbound_in_flight / 2 * 36)
                .min(limits.max_buffered_output / 128)
                .clamp(64, 4096);
            assert_eq!(piece, want, "input piece under {limits:?}");
        } else {
            assert!(piece.untouched());
        }

        if null_out {
            let mut ours = OutParam::<usize>::new();
            let op = ours.ptr(false);
            // Safety: as above; one output NULL.
            self.conn_call(i, "mcpw_conn_in_flight", &expect, |h| unsafe {
                mcpw_conn_in_flight(h, op, ptr::null_mut())
            });
            assert!(ours.untouched(), "in_flight wrote an output and failed");
            let mut has = OutParam::<bool>::new();
            let hp = has.ptr(false);
            // Safety: as above.
            self.conn_call(i, "mcpw_conn_poll_timeout", &expect, |h| unsafe {
                mcpw_conn_poll_timeout(h, hp, ptr::null_mut())
            });
            assert!(has.untouched(), "poll_timeout wrote an output and failed");
        } else if live {
            self.check_in_flight(i, false);
            let deadline = self.deadline(i);
            if closed {
                assert_eq!(deadline, None, "a closed connection has a deadline");
            }
        }
    }

    /// `mcpw_json_get` and `mcpw_json_at` on arbitrary text.
    fn json(&mut self, text: &Text, key: &Text, index: u8) {
        let (text, key) = (Arg::of(text, JSONS), Arg::of(key, WORDS));
        let mut expect = Expect::ok();
        text.problems(Want::Json, false, &mut expect.problems);
        let text_problems = expect.problems.clone();
        key.problems(Want::Text, false, &mut expect.problems);
        let value = std::str::from_utf8(&text.bytes)
            .ok()
            .and_then(|t| RawJson::new(t).ok());
        let mut also = Vec::new();
        if expect.problems.is_empty() && !value.is_some_and(|v| v.is_object()) {
            expect.problems.push(MCPW_ERR_JSON_WRONG_TYPE);
        }
        also.push(MCPW_ERR_DUPLICATE_KEY);
        expect.also = &[MCPW_ERR_DUPLICATE_KEY];
        let within = |s: &mcpw_str| {
            // Safety: a view into `text`'s bytes, which are alive.
            if let Some(v) = unsafe { view(s) } {
                let start = text.bytes.as_ptr() as usize;
                let at = v.as_ptr() as usize;
                assert!(at >= start && at + v.len() <= start + text.bytes.len());
                let v = std::str::from_utf8(v).expect("a view of UTF-8 text");
                assert!(RawJson::new(v).is_ok(), "member {v:?} is not JSON");
            }
        };
        let mut out = OutParam::<mcpw_str>::new();
        let p = out.ptr(false);
        // Safety: the arguments are valid for their lengths; the output is writable.
        let got = unsafe { mcpw_json_get(text.ptr(), text.len(), key.ptr(), key.len(), p) };
        assert_ne!(got, MCPW_ERR_PANIC, "mcpw_json_get panicked");
        verdict("mcpw_json_get", Gate::Live, got, &expect, false);
        if got == MCPW_OK {
            // Safety: the call succeeded.
            within(unsafe { out.get() });
        } else {
            assert!(out.untouched());
        }
        self.json_get_each(&text, &key, &expect.problems);
        json_scalars(&text, &text_problems, index);
        tools_refusals(&text, &text_problems, index);
        let mut expect = Expect {
            problems: text_problems,
            also: &[],
            command: false,
        };
        if expect.problems.is_empty() && !value.is_some_and(|v| v.get().starts_with('[')) {
            expect.problems.push(MCPW_ERR_JSON_WRONG_TYPE);
        }
        let mut out = OutParam::<mcpw_str>::new();
        let p = out.ptr(false);
        let index = if index == u8::MAX {
            usize::MAX
        } else {
            usize::from(index)
        };
        // Safety: as above.
        let got = unsafe { mcpw_json_at(text.ptr(), text.len(), index, p) };
        assert_ne!(got, MCPW_ERR_PANIC, "mcpw_json_at panicked");
        verdict("mcpw_json_at", Gate::Live, got, &expect, false);
        let at = (got == MCPW_OK).then(|| {
            // Safety: the call succeeded.
            let v = unsafe { out.get() };
            within(v);
            // Safety: a view into `text`'s bytes, which are alive.
            unsafe { view(v) }.map(<[u8]>::to_vec)
        });
        if got != MCPW_OK {
            assert!(out.untouched());
        }
        // The whole array in one call agrees with `mcpw_json_at`, element by element.
        const ROOM: usize = 4;
        let mut items = [mcpw_str {
            ptr: ptr::null(),
            len: 0,
        }; ROOM];
        let mut count = usize::MAX;
        // Safety: the text is valid for its length; `items` holds ROOM writable views and
        // `count` is writable.
        let got = unsafe {
            mcpwire_ffi::mcpw_json_items(
                text.ptr(),
                text.len(),
                items.as_mut_ptr(),
                ROOM,
                &mut count,
            )
        };
        assert_ne!(got, MCPW_ERR_PANIC, "mcpw_json_items panicked");
        verdict("mcpw_json_items", Gate::Live, got, &expect, false);
        if got != MCPW_OK {
            assert_eq!(
                count,
                usize::MAX,
                "mcpw_json_items wrote a count and failed"
            );
            return;
        }
        for (i, item) in items.iter().enumerate().take(count.min(ROOM)) {
            within(item);
            let mut one = mcpw_str {
                ptr: ptr::null(),
                len: 0,
            };
            // Safety: as above; `one` is writable.
            let got = unsafe { mcpw_json_at(text.ptr(), text.len(), i, &mut one) };
            assert_eq!(got, MCPW_OK);
            // Safety: views into `text`'s bytes, which are alive.
            let (one, item) = unsafe { (view(&one), view(item)) };
            assert_eq!(
                one, item,
                "mcpw_json_items and mcpw_json_at disagree at {i}"
            );
        }
        if let Some(at) = at {
            assert_eq!(
                at.is_some(),
                index < count,
                "mcpw_json_at and the count disagree"
            );
        }
    }

    /// `mcpw_json_get_each` with the key, a fixed key and the key again must agree with one
    /// `mcpw_json_get` per key: the same views when every one succeeds, else a failure with
    /// one of their codes (or one the arguments' problems allow: the keys are checked before
    /// the text) and nothing written.
    fn json_get_each(&mut self, text: &Arg, key: &Arg, problems: &[mcpw_result]) {
        let keys = [
            mcpw_str {
                ptr: key.ptr(),
                len: key.len(),
            },
            mcpw_str {
                ptr: c"name".as_ptr(),
                len: 4,
            },
            mcpw_str {
                ptr: key.ptr(),
                len: key.len(),
            },
        ];
        let mut each = Vec::new();
        for k in &keys {
            let mut out = OutParam::<mcpw_str>::new();
            let p = out.ptr(false);
            // Safety: the arguments are valid for their lengths; the output is writable.
            let got = unsafe { mcpw_json_get(text.ptr(), text.len(), k.ptr, k.len, p) };
            // Safety: read only when the call succeeded.
            each.push((got, (got == MCPW_OK).then(|| unsafe { *out.get() })));
        }
        let none = mcpw_str {
            ptr: c"untouched".as_ptr(),
            len: 9,
        };
        let mut values = [none; 3];
        // Safety: three readable keys (each valid for its length, or NULL as the harness
        // chose) and three writable views.
        let got = unsafe {
            mcpwire_ffi::mcpw_json_get_each(
                text.ptr(),
                text.len(),
                keys.as_ptr(),
                keys.len(),
                values.as_mut_ptr(),
            )
        };
        assert_ne!(got, MCPW_ERR_PANIC, "mcpw_json_get_each panicked");
        if each.iter().all(|(rc, _)| *rc == MCPW_OK) {
            assert_eq!(
                got, MCPW_OK,
                "mcpw_json_get_each failed where mcpw_json_get did not"
            );
            for (v, (_, one)) in values.iter().zip(&each) {
                let one = one.expect("a value from a successful call");
                assert_eq!(
                    (v.ptr, v.len),
                    (one.ptr, one.len),
                    "get_each and get disagree"
                );
            }
        } else {
            assert!(
                each.iter().any(|(rc, _)| *rc == got) || problems.contains(&got),
                "mcpw_json_get_each returned {got:?}; mcpw_json_get returned {:?}",
                each.iter().map(|(rc, _)| *rc).collect::<Vec<_>>()
            );
            assert!(
                values
                    .iter()
                    .all(|v| v.ptr == none.ptr && v.len == none.len),
                "mcpw_json_get_each wrote its outputs and failed"
            );
        }
    }

    /// The end: every connection closed gracefully and driven past every deadline; then
    /// every request must have ended and all output must be whole lines.
    fn finish(&mut self) {
        for i in 0..CONNS {
            if self.conns[i].as_ref().is_none_or(|c| c.poisoned) {
                self.free_conn(i);
                continue;
            }
            self.close(i, 1000);
            for _ in 0..1000 {
                self.take(i, None, 0, None);
                self.drain(i);
                if self.conns[i].as_ref().is_some_and(|c| c.closed) {
                    break;
                }
                match self.deadline(i) {
                    Some(at) => {
                        self.now = self.now.max(at);
                        self.timeout(i, false);
                    }
                    None => break,
                }
            }
            self.take(i, None, 0, None);
            let c = self.conns[i].as_ref().expect("live");
            assert!(c.closed, "connection {i} did not close");
            assert!(
                c.pending.is_empty(),
                "requests never ended: {:?}",
                c.pending
            );
            for (stream, rest) in &c.unfinished {
                assert!(
                    rest.is_empty(),
                    "stream {stream} output ends mid-line: {:?}",
                    String::from_utf8_lossy(rest)
                );
            }
            self.free_conn(i);
        }
        for i in 0..CONFIGS {
            self.free_config(i);
        }
        assert!(
            self.panics.is_empty(),
            "the library panicked in {:?}",
            self.panics
        );
    }
}

/// Arbitrary sequences of C ABI calls on up to [`CONFIGS`] configs and [`CONNS`]
/// connections, wired to each other or fed arbitrary bytes and the official examples.
///
/// Input: an [`AbiSetup`] and [`AbiOp`]s, as `arbitrary` reads them. Invariants: no panic
/// inside the library (a panic would come back as `MCPW_ERR_PANIC`, after which the handle
/// must answer only `MCPW_ERR_POISONED`); every call returns what the header documents for
/// its handle and arguments (NULL handle: `MCPW_ERR_NULL_ARGUMENT`; NULL with a length,
/// non-UTF-8 text, non-JSON, a bad id, out-of-range numbers and enums: their codes; a command
/// the engine refuses: 300-399, and `MCPW_ERR_CLOSED` after `MCPW_EVENT_CLOSED`; otherwise
/// `MCPW_OK`), and every code has a message; outputs are written only on success; getters
/// agree with what was set; every event's views are UTF-8 (JSON where raw) and its fields
/// fit its kind; nothing follows `MCPW_EVENT_CLOSED`; output is whole UTF-8 JSON-RPC lines
/// ending in `\n`; every request id is returned once and ends exactly once (an answer, a
/// time-out, abandonment, "input required", an invalid answer, or a successful cancel), by its
/// timeout at the latest, and all by the end, when every connection is closed and time is run
/// past every deadline; the in-flight counts stay within the limits and match the requests
/// pending; a graceful close ends by its deadline.
pub fn c_abi(data: &[u8]) {
    // The HTTP handles have a harness of their own (tests/fuzz_logic/c_abi_http.rs).
    if let Some((&super::c_abi_http::HTTP_MARKER, rest)) = data.split_first() {
        super::c_abi_http::c_abi_http(rest);
        return;
    }
    // So have the task tables (tests/fuzz_logic/c_abi_tasks.rs) and reviewed listens
    // (tests/fuzz_logic/c_abi_listen.rs).
    if let Some((&super::c_abi_tasks::TASKS_MARKER, rest)) = data.split_first() {
        super::c_abi_tasks::c_abi_tasks(rest);
        return;
    }
    if let Some((&super::c_abi_listen::LISTEN_MARKER, rest)) = data.split_first() {
        super::c_abi_listen::c_abi_listen(rest);
        return;
    }
    // And the connection-side task and elicitation calls (tests/fuzz_logic/c_abi_serve.rs).
    if let Some((&super::c_abi_serve::SERVE_MARKER, rest)) = data.split_first() {
        super::c_abi_serve::c_abi_serve(rest);
        return;
    }
    run(data, false);
}

/// [`c_abi`], returning how often each event kind and each call's result was seen
/// (`"MCPW_EVENT_READY"`, `"mcpw_conn_request MCPW_OK"`).
pub fn c_abi_tally(data: &[u8]) -> BTreeMap<String, usize> {
    run(data, true).unwrap_or_default()
}

fn run(data: &[u8], tally: bool) -> Option<BTreeMap<String, usize>> {
    let (setup, ops) = parse_abi(data)?;
    let mut h = Harness::new(&setup);
    if tally {
        h.tally = Some(BTreeMap::new());
    }
    for op in &ops {
        h.apply(op);
    }
    h.finish();
    h.tally
}

/// `mcpw_decode` on `text` as a frame (NULL pointers included), on a request that carries it
/// as params, and on a batch of that request and the text, with room for `index % 4`
/// messages. Each call must agree with the Rust decoder: the count, the batch flag, each
/// written message's kind, views (inside the frame) and refusal, and nothing written past
/// the room given.
fn decode_frames(text: &Text, index: u8) {
    let text = Arg::of(text, JSONS);
    let capacity = usize::from(index % 4);
    let request = [
        format!(r#"{{"jsonrpc":"2.0","id":{index},"method":"m","params":"#).as_bytes(),
        &text.bytes,
        b"}",
    ]
    .concat();
    let batch = [b"[".as_slice(), &request, b",", &text.bytes, b"]"].concat();
    decode_one(&text, capacity);
    decode_one(&Arg::bytes(&request), capacity);
    decode_one(&Arg::bytes(&batch), capacity);
}

fn decode_one(frame: &Arg, capacity: usize) {
    const UNTOUCHED: u32 = 0xDEAD;
    // Safety: every field of `mcpw_message` is valid all zeroes (NULL views, 0 kinds and
    // codes, `MCPW_DECODE_NONE`, false).
    let mut blank: mcpw_message = unsafe { std::mem::zeroed() };
    blank.kind = UNTOUCHED;
    let mut out = vec![blank; 4];
    let (mut count, mut is_batch) = (usize::MAX, false);
    let messages = if capacity == 0 {
        ptr::null_mut()
    } else {
        out.as_mut_ptr()
    };
    // Safety: `frame` is readable for its length (or NULL, which is refused); `out` holds 4
    // messages, at least `capacity`; the counts are writable.
    let got = unsafe {
        mcpw_decode(
            frame.ptr().cast::<u8>(),
            frame.len(),
            messages,
            capacity,
            &mut count,
            &mut is_batch,
        )
    };
    let mut refusals = Vec::new();
    frame.problems(Want::Bytes, false, &mut refusals);
    if !refusals.is_empty() {
        // NULL with a length; one beyond `isize::MAX` may be refused for its length first.
        assert!(
            refusals.contains(&got),
            "mcpw_decode took a NULL frame: {got:?}"
        );
        assert_eq!(count, usize::MAX, "mcpw_decode wrote a count on a refusal");
        assert!(out.iter().all(|m| m.kind == UNTOUCHED));
        return;
    }
    assert_eq!(got, MCPW_OK, "mcpw_decode failed");
    let bytes = &frame.bytes;
    let inside = |v: &mcpw_str| {
        // Safety: the view was made by the library from `bytes`, which are alive.
        if let Some(b) = unsafe { view(v) }
            && !b.is_empty()
        {
            let (start, at) = (bytes.as_ptr() as usize, b.as_ptr() as usize);
            assert!(
                at >= start && at + b.len() <= start + bytes.len(),
                "a view outside the frame"
            );
        }
        // Safety: as above.
        unsafe { view(v) }.map(|b| std::str::from_utf8(b).expect("a UTF-8 view").to_owned())
    };
    let check =
        |m: &mcpw_message,
         want: &Result<mcpwire::jsonrpc::Message<'_>, mcpwire::jsonrpc::DecodeError<'_>>| {
            use mcpw_message_kind::*;
            use mcpwire::jsonrpc::Message;
            let (method, params, result, message, data) = (
                inside(&m.method),
                inside(&m.params),
                inside(&m.result),
                inside(&m.message),
                inside(&m.data),
            );
            let id = inside(&m.id.string);
            match want {
                Ok(Message::Request(r)) => {
                    assert_eq!(m.kind, MCPW_MESSAGE_REQUEST as u32);
                    assert_eq!(method.as_deref(), Some(r.method.raw()));
                    assert_eq!(params.as_deref(), r.params.map(|p| p.get()));
                    assert_eq!(
                        m.id.kind == mcpw_id_kind::MCPW_ID_STRING as u32,
                        id.is_some()
                    );
                }
                Ok(Message::Notification(n)) => {
                    assert_eq!(m.kind, MCPW_MESSAGE_NOTIFICATION as u32);
                    assert_eq!(method.as_deref(), Some(n.method.raw()));
                    assert_eq!(params.as_deref(), n.params.map(|p| p.get()));
                }
                Ok(Message::Response(r)) => {
                    assert_eq!(m.kind, MCPW_MESSAGE_RESPONSE as u32);
                    assert_eq!(result.as_deref(), Some(r.result.get()));
                }
                Ok(Message::Error(e)) => {
                    assert_eq!(m.kind, MCPW_MESSAGE_ERROR as u32);
                    assert_eq!(m.code, e.error.code);
                    assert_eq!(message.as_deref(), Some(e.error.message.raw()));
                    assert_eq!(data.as_deref(), e.error.data.map(|d| d.get()));
                }
                Err(e) => {
                    let kind = if e.code() == -32700 {
                        MCPW_MESSAGE_PARSE_ERROR
                    } else if e.is_response_shaped() {
                        MCPW_MESSAGE_INVALID_RESPONSE
                    } else {
                        MCPW_MESSAGE_INVALID
                    };
                    assert_eq!(m.kind, kind as u32);
                    assert_eq!((m.code, m.offset), (e.code(), e.offset()));
                    assert_ne!(m.reason, mcpw_decode_reason::MCPW_DECODE_NONE);
                    assert_eq!(
                        m.id.kind == mcpw_id_kind::MCPW_ID_NONE as u32,
                        e.id().is_none()
                    );
                }
            }
        };
    let (wants, batch): (Vec<_>, bool) = match Decoder::default().decode(bytes) {
        Ok(Decoded::Single(m)) => (vec![Ok(m)], false),
        Ok(Decoded::Batch(members)) => (members, true),
        Err(e) => (vec![Err(e)], false),
    };
    assert_eq!(
        (count, is_batch),
        (wants.len(), batch),
        "mcpw_decode's count"
    );
    for (at, m) in out.iter().enumerate() {
        if at < capacity.min(count) {
            check(m, &wants[at]);
        } else {
            assert_eq!(m.kind, UNTOUCHED, "mcpw_decode wrote past the room given");
        }
    }
}
