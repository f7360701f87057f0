//! The C ABI: the whole engine behind opaque handles, for C, C++ and anything else with a C
//! FFI. `include/mcpwire.h` is generated from this module by cbindgen (see `cbindgen.toml`)
//! and checked in; `tests/c_header.rs` regenerates it and fails on any difference.
//!
//! The rules, stated once (the header's preamble repeats them for C readers):
//!
//! - Names are `mcpw_<object>_<verb>`. `mcpw_config`, `mcpw_conn`, the HTTP handles and
//!   `mcpw_tasks` are opaque handles made by `_new` and released by `_free`, which accepts
//!   NULL. A `const` handle argument means
//!   the call does not change the handle.
//! - Fallible functions return [`mcpw_result`]: codes grouped by range, never reused, turned
//!   into text by [`mcpw_result_message`]. "Nothing to do" is `MCPW_OK` with an empty answer.
//!   Outputs (`out_*` parameters, always last) are written only on success.
//! - Text and bytes travel as pointer + length; NULL with length 0 is the empty string, and
//!   for optional arguments NULL means "absent". Inputs are read during the call only.
//! - Views the library lends (events, transmit bytes, peer info) point into the handle and
//!   stay valid until the next call that takes that handle non-`const`.
//! - Every exported body runs inside one panic boundary (`boundary::catch`); a panic returns
//!   [`mcpw_result::MCPW_ERR_PANIC`] and poisons the handle, which then refuses every call with
//!   [`mcpw_result::MCPW_ERR_POISONED`].
//!
//! Rust programs should use [`mcpwire::conn`] instead; this module is public so that benches and
//! tests can call the exported functions directly.
#![allow(non_camel_case_types)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::missing_safety_doc)]

mod boundary;
mod codec;
mod config;
mod conn;
mod event;
mod http;
mod json;
mod result;
mod tasks;

use std::ffi::c_char;

pub use codec::{mcpw_decode, mcpw_message, mcpw_message_kind};
pub use config::{
    MCPW_POLICY_ANSWER_PINGS, MCPW_POLICY_DEFAULT, MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS,
    MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS, MCPW_POLICY_REVIEW_LISTENS,
    MCPW_POLICY_STRICT_LIFECYCLE, mcpw_cache_scope, mcpw_client_era, mcpw_config, mcpw_config_free,
    mcpw_config_get_limits, mcpw_config_get_policy, mcpw_config_new, mcpw_config_set_capabilities,
    mcpw_config_set_client_era, mcpw_config_set_discover_cache, mcpw_config_set_discover_timeout,
    mcpw_config_set_info, mcpw_config_set_instructions, mcpw_config_set_limits,
    mcpw_config_set_policy, mcpw_config_set_timeouts, mcpw_config_set_versions, mcpw_limits,
    mcpw_role,
};
pub use conn::{
    MCPW_CAP_COMPLETIONS, MCPW_CAP_ELICITATION, MCPW_CAP_ELICITATION_FORM,
    MCPW_CAP_ELICITATION_URL, MCPW_CAP_EXPERIMENTAL, MCPW_CAP_EXTENSIONS, MCPW_CAP_LOGGING,
    MCPW_CAP_PROMPTS, MCPW_CAP_PROMPTS_LIST_CHANGED, MCPW_CAP_RESOURCES,
    MCPW_CAP_RESOURCES_LIST_CHANGED, MCPW_CAP_RESOURCES_SUBSCRIBE, MCPW_CAP_ROOTS,
    MCPW_CAP_ROOTS_LIST_CHANGED, MCPW_CAP_SAMPLING, MCPW_CAP_SAMPLING_CONTEXT,
    MCPW_CAP_SAMPLING_TOOLS, MCPW_CAP_TASKS, MCPW_CAP_TASKS_CANCEL, MCPW_CAP_TASKS_ELICITATION,
    MCPW_CAP_TASKS_EXTENSION, MCPW_CAP_TASKS_LIST, MCPW_CAP_TASKS_SAMPLING,
    MCPW_CAP_TASKS_TOOLS_CALL, MCPW_CAP_TOOLS, MCPW_CAP_TOOLS_LIST_CHANGED, mcpw_conn,
    mcpw_conn_cancel, mcpw_conn_close, mcpw_conn_consume, mcpw_conn_era, mcpw_conn_free,
    mcpw_conn_grant_listen, mcpw_conn_handle_eof, mcpw_conn_handle_frame, mcpw_conn_handle_input,
    mcpw_conn_handle_timeout, mcpw_conn_ignored_elicitation_completions, mcpw_conn_in_flight,
    mcpw_conn_input_piece, mcpw_conn_listen_items, mcpw_conn_log, mcpw_conn_new, mcpw_conn_notify,
    mcpw_conn_peer_capabilities, mcpw_conn_peer_info, mcpw_conn_peer_instructions,
    mcpw_conn_poll_event, mcpw_conn_poll_timeout, mcpw_conn_progress, mcpw_conn_protocol_version,
    mcpw_conn_refuse_peer_requests, mcpw_conn_request, mcpw_conn_request_context,
    mcpw_conn_request_related, mcpw_conn_respond, mcpw_conn_respond_error,
    mcpw_conn_respond_input_required, mcpw_conn_respond_url_elicitation_required, mcpw_conn_retry,
    mcpw_conn_role, mcpw_conn_state, mcpw_conn_stats, mcpw_conn_transmit, mcpw_era,
    mcpw_listen_item, mcpw_listen_item_kind, mcpw_log_level, mcpw_progress_reset,
    mcpw_request_context, mcpw_request_options, mcpw_state, mcpw_stats,
};
pub use event::{
    mcpw_close_reason, mcpw_decode_reason, mcpw_event, mcpw_event_kind, mcpw_id, mcpw_id_kind,
    mcpw_str, mcpw_violation,
};
pub use http::{
    mcpw_event_store, mcpw_http_action, mcpw_http_action_kind, mcpw_http_client,
    mcpw_http_client_conn, mcpw_http_client_end_session, mcpw_http_client_failure_text,
    mcpw_http_client_free, mcpw_http_client_handle_body, mcpw_http_client_handle_end,
    mcpw_http_client_handle_error, mcpw_http_client_handle_response,
    mcpw_http_client_handle_timeout, mcpw_http_client_has_unheard,
    mcpw_http_client_is_ending_session, mcpw_http_client_new, mcpw_http_client_options,
    mcpw_http_client_poll_action, mcpw_http_client_poll_event, mcpw_http_client_poll_timeout,
    mcpw_http_client_session_id, mcpw_http_header, mcpw_http_response, mcpw_http_server,
    mcpw_http_server_abandon_streams, mcpw_http_server_close_stream_for_polling,
    mcpw_http_server_conn, mcpw_http_server_consume_stream, mcpw_http_server_counts,
    mcpw_http_server_declare_tools, mcpw_http_server_end_listen_streams, mcpw_http_server_free,
    mcpw_http_server_handle_request, mcpw_http_server_handle_timeout, mcpw_http_server_new,
    mcpw_http_server_options, mcpw_http_server_poll_event, mcpw_http_server_poll_stream,
    mcpw_http_server_poll_timeout, mcpw_http_server_poll_woken, mcpw_http_server_session_id,
    mcpw_http_server_settle, mcpw_http_server_stream_closed, mcpw_replay_sink, mcpw_tools_refusals,
};
pub use json::{
    mcpw_json_at, mcpw_json_get, mcpw_json_get_each, mcpw_json_items, mcpw_json_number,
    mcpw_json_string,
};
pub use result::{mcpw_result, mcpw_result_message};
pub use tasks::{
    mcpw_conn_respond_task, mcpw_task_config, mcpw_task_config_default, mcpw_task_event,
    mcpw_task_event_kind, mcpw_task_result, mcpw_task_status, mcpw_tasks, mcpw_tasks_ask,
    mcpw_tasks_cancel, mcpw_tasks_cancel_requested, mcpw_tasks_complete, mcpw_tasks_create,
    mcpw_tasks_create_legacy, mcpw_tasks_fail, mcpw_tasks_free, mcpw_tasks_handle_timeout,
    mcpw_tasks_new, mcpw_tasks_poll_event, mcpw_tasks_poll_result, mcpw_tasks_poll_timeout,
    mcpw_tasks_resume, mcpw_tasks_serve, mcpw_tasks_serve_legacy, mcpw_tasks_set_message,
    mcpw_tasks_status, mcpw_tasks_status_notification, mcpw_tasks_write_result,
};

// ---- JSON-RPC and MCP error codes, for mcpw_conn_respond_error and mcpw_event.code ---------

/// JSON-RPC "Parse error" (the engine sends it itself for frames that are not JSON).
pub const MCPW_JSONRPC_PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request" (the engine sends it itself for invalid messages).
pub const MCPW_JSONRPC_INVALID_REQUEST: i64 = -32600;
/// JSON-RPC "Method not found".
pub const MCPW_JSONRPC_METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "Invalid params".
pub const MCPW_JSONRPC_INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "Internal error".
pub const MCPW_JSONRPC_INTERNAL_ERROR: i64 = -32603;
/// MCP "Resource not found" (2024-11-05 to 2025-11-25). Answer with it in any version:
/// `mcpw_conn_respond_error` sends -32602 in its place from 2026-07-28 on.
pub const MCPW_MCP_RESOURCE_NOT_FOUND: i64 = -32002;

/// The library's version (`"0.1.0"`), as a static NUL-terminated string that lives as long as
/// the program. Compare it with `MCPWIRE_VERSION` to check that the header matches the
/// library linked.
#[unsafe(no_mangle)]
pub extern "C" fn mcpw_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    boundary::catch(|| c"".as_ptr(), || VERSION.as_ptr().cast::<c_char>())
}

#[cfg(test)]
mod tests;
