//! `mcpw_config`: everything a connection needs to know at creation.

use std::cell::Cell;
use std::ffi::c_char;
use std::time::Duration;

use super::boundary::{
    Handle, Out, array_in, call, chars_as_bytes, free_handle, into_handle, json, optional_bytes_in,
    read_in, text_in, utf8, with_mut, with_ref,
};
use super::event::mcpw_str;
use super::result::mcpw_result::{self, *};
use mcpwire::conn::{CacheScope, ClientEra, Config, Limits, ProgressPolicy, Role};
use mcpwire::mcp::{Capabilities, CapabilityError, ProtocolVersion};

/// A connection's settings: role, protocol versions, identity, capabilities, timeouts,
/// bounds and policies. Create it with `mcpw_config_new`, adjust it with the setters, pass it
/// to `mcpw_conn_new` (which copies it; one config can make many connections), and free it
/// with `mcpw_config_free`.
pub struct mcpw_config {
    config: Config,
    poisoned: Cell<bool>,
}

impl Handle for mcpw_config {
    fn poisoned(&self) -> &Cell<bool> {
        &self.poisoned
    }
}

impl mcpw_config {
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }
}

/// Which end of a connection to be (the `role` argument of `mcpw_config_new`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_role {
    /// The host side: sends `initialize`, calls tools.
    MCPW_ROLE_CLIENT = 1,
    /// The side offering tools, resources and prompts.
    MCPW_ROLE_SERVER = 2,
}

impl From<Role> for mcpw_role {
    fn from(role: Role) -> Self {
        match role {
            Role::Client => mcpw_role::MCPW_ROLE_CLIENT,
            Role::Server => mcpw_role::MCPW_ROLE_SERVER,
        }
    }
}

/// How a client picks the protocol era (`mcpw_config_set_client_era`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_client_era {
    /// Probe with `server/discover`; adopt 2026-07-28 on a valid result, fall back to the
    /// `initialize` handshake on any error or after the discover timeout. The default.
    MCPW_CLIENT_ERA_AUTO = 1,
    /// Only the `initialize` handshake (2024-11-05 to 2025-11-25).
    MCPW_CLIENT_ERA_LEGACY = 2,
    /// Only the stateless era: `server/discover`, then per-request metadata.
    MCPW_CLIENT_ERA_MODERN = 3,
}

/// Who may cache a server's 2026-07-28 results (`mcpw_config_set_discover_cache`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum mcpw_cache_scope {
    /// Shareable across authorization contexts.
    MCPW_CACHE_PUBLIC = 1,
    /// Only within the same authorization context. The default.
    MCPW_CACHE_PRIVATE = 2,
}

/// Resource bounds, for `mcpw_config_get_limits` / `mcpw_config_set_limits`. Every field must
/// be at least 1. Read the defaults with `mcpw_config_get_limits`, change what you need, and
/// set them back.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct mcpw_limits {
    /// The largest frame accepted, in bytes. Default 16 MiB.
    pub max_frame: usize,
    /// Our requests awaiting an answer at once; more are refused with
    /// `MCPW_ERR_TOO_MANY_IN_FLIGHT`. Default 1024.
    pub max_outbound_in_flight: usize,
    /// The peer's requests held unanswered at once; more get a JSON-RPC error. Default 256.
    pub max_inbound_in_flight: usize,
    /// Bytes of output waiting for the transport; past it commands fail with
    /// `MCPW_ERR_OUTPUT_FULL`. Default 16 MiB.
    pub max_buffered_output: usize,
    /// How many cancelled or timed-out ids are remembered. Default 1024.
    pub max_remembered_ids: usize,
    /// Events waiting for `mcpw_conn_poll_event`; past it, or once the waiting events hold
    /// more bytes of frames than `max_buffered_output` (or `max_frame`, if larger), the peer's
    /// further notifications are dropped (and counted). Default 4096.
    pub max_queued_events: usize,
}

/// Policy flag: enforce what may be sent before initialization completes, both ways (the
/// spec's rule). On by default.
pub const MCPW_POLICY_STRICT_LIFECYCLE: u32 = 1 << 0;
/// Policy flag: answer the peer's `ping` without involving the application. On by default.
pub const MCPW_POLICY_ANSWER_PINGS: u32 = 1 << 1;
/// Policy flag: deliver progress whose value does not increase (dropped and counted by
/// default, as the spec says progress must increase). Off by default.
pub const MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS: u32 = 1 << 2;
/// Policy flag: restart a request's timeout whenever progress arrives for it (bounded by the
/// maximum total timeout). Off by default; per request with `mcpw_request_options`.
pub const MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS: u32 = 1 << 3;
/// Policy flag, server, 2026-07-28: hand each `subscriptions/listen` request to the application as
/// `MCPW_EVENT_REQUEST`, to check access before granting it with `mcpw_conn_grant_listen` (or
/// refusing it with `mcpw_conn_respond_error`). Off by default: the engine grants every item
/// it can honour and the application never sees the listen.
pub const MCPW_POLICY_REVIEW_LISTENS: u32 = 1 << 4;
/// The policy flags of a new config.
pub const MCPW_POLICY_DEFAULT: u32 = MCPW_POLICY_STRICT_LIFECYCLE | MCPW_POLICY_ANSWER_PINGS;

const POLICY_ALL: u32 = MCPW_POLICY_STRICT_LIFECYCLE
    | MCPW_POLICY_ANSWER_PINGS
    | MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS
    | MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS
    | MCPW_POLICY_REVIEW_LISTENS;

fn capability_error(e: CapabilityError) -> mcpw_result {
    match e {
        CapabilityError::InvalidJson => MCPW_ERR_INVALID_JSON,
        CapabilityError::NotAnObject => MCPW_ERR_JSON_WRONG_TYPE,
        CapabilityError::DuplicateKey => MCPW_ERR_DUPLICATE_KEY,
        CapabilityError::MemberNotAnObject => MCPW_ERR_JSON_WRONG_TYPE,
    }
}

/// Creates a config for a client or a server named `name`, version `version` (the
/// `clientInfo` / `serverInfo` it sends), with no capabilities, a 60 s request timeout, a
/// 10 min maximum total timeout, the default limits and `MCPW_POLICY_DEFAULT`. It speaks every
/// protocol version of both eras: a server answers `initialize` and `server/discover` alike,
/// and a client probes with `server/discover` and falls back to `initialize`
/// (`MCPW_CLIENT_ERA_AUTO`); `mcpw_config_set_versions` narrows that.
///
/// `role` is `MCPW_ROLE_CLIENT` or `MCPW_ROLE_SERVER`. `name` and `version` are UTF-8, read
/// during the call only. On success `*out_config` receives a new handle that the caller owns
/// and must free exactly once with `mcpw_config_free`.
///
/// # Safety
/// `name` and `version` point to their lengths in readable bytes (or are NULL with length 0);
/// `out_config` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_new(
    role: u32,
    name: *const c_char,
    name_len: usize,
    version: *const c_char,
    version_len: usize,
    out_config: *mut *mut mcpw_config,
) -> mcpw_result {
    call(|| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_config) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let name = unsafe { text_in(name, name_len) }?;
        // Safety: (caller) readable for its length, or NULL with length 0.
        let version = unsafe { text_in(version, version_len) }?;
        let config = match role {
            r if r == mcpw_role::MCPW_ROLE_CLIENT as u32 => Config::client(name, version),
            r if r == mcpw_role::MCPW_ROLE_SERVER as u32 => Config::server(name, version),
            _ => return Err(MCPW_ERR_INVALID_ARGUMENT),
        };
        out.write(into_handle(mcpw_config {
            config,
            poisoned: Cell::new(false),
        }));
        Ok(())
    })
}

/// Frees a config, exactly once. NULL does nothing. Connections made from it are unaffected.
///
/// # Safety
/// `config` is NULL or a handle from `mcpw_config_new` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_free(config: *mut mcpw_config) {
    // Safety: (caller) NULL or a live handle from `mcpw_config_new`, freed only here.
    unsafe { free_handle(config) }
}

/// Sets the protocol versions spoken, as wire strings (`"2025-06-18"`, `"2026-07-28"`), in
/// any order. Only handshake-era versions make a legacy-only endpoint, only `"2026-07-28"` a
/// stateless one. A client's `initialize` offers the newest handshake-era version listed; a
/// server accepts any listed version and otherwise answers with its newest. `count` may be 0 (with `versions` NULL), which `mcpw_conn_new` then refuses with
/// `MCPW_ERR_CONFIG_REFUSED`. All or nothing: on error the config is unchanged. The strings
/// are read during the call only.
///
/// # Safety
/// `config` is NULL or a live config handle; `versions` points to `count` readable `mcpw_str`
/// (or is NULL with count 0), each pointing to its length in readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_versions(
    config: *mut mcpw_config,
    versions: *const mcpw_str,
    count: usize,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        // Safety: (caller) `count` readable `mcpw_str` during this call, or NULL with 0.
        let list = unsafe { array_in(versions, count) }?;
        let mut parsed = Vec::with_capacity(list.len());
        for v in list {
            // Safety: (caller) each view is readable for its length.
            let text = unsafe { text_in(v.ptr, v.len) }?;
            let version = ProtocolVersion::parse(text).ok_or(MCPW_ERR_UNKNOWN_VERSION)?;
            if !parsed.contains(&version) {
                parsed.push(version);
            }
        }
        parsed.sort();
        c.config.versions = parsed;
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Replaces the whole `clientInfo` / `serverInfo` object (to add `title`, `icons`, ...): a JSON
/// object with string `name` and `version` (else `MCPW_ERR_JSON_WRONG_TYPE`), UTF-8, read
/// during the call only.
///
/// # Safety
/// `config` is NULL or a live config handle; `json_text` points to `json_len` readable bytes (or
/// is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_info(
    config: *mut mcpw_config,
    json_text: *const c_char,
    json_len: usize,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let raw = json(unsafe { super::boundary::bytes_in(chars_as_bytes(json_text), json_len) }?)?;
        // Every schema's `Implementation` has string `name` and `version`: a peer refuses
        // one without.
        if !mcpwire::mcp::is_implementation(raw) {
            return Err(MCPW_ERR_JSON_WRONG_TYPE);
        }
        c.config.info = raw.get().to_owned();
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Sets our capabilities from a JSON object (`{"tools":{},"resources":{"subscribe":true}}`),
/// read during the call only. Each capability the specification defines must be an object,
/// and its members of the schema's types (`"tools":true` or `"listChanged":"yes"` is
/// `MCPW_ERR_JSON_WRONG_TYPE`). The engine answers the peer's requests for anything not
/// declared with -32601, and refuses to send notifications that need an undeclared one.
///
/// # Safety
/// `config` is NULL or a live config handle; `json_text` points to `json_len` readable bytes (or
/// is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_capabilities(
    config: *mut mcpw_config,
    json_text: *const c_char,
    json_len: usize,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let text = unsafe { text_in(json_text, json_len) }?;
        c.config.capabilities = Capabilities::parse_own(text).map_err(capability_error)?;
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Server: sets the `instructions` sent in the initialize result (UTF-8, read during the call
/// only). NULL (with length 0) removes them.
///
/// # Safety
/// `config` is NULL or a live config handle; `text` points to `text_len` readable bytes (or
/// is NULL with length 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_instructions(
    config: *mut mcpw_config,
    text: *const c_char,
    text_len: usize,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        // Safety: (caller) readable for its length, or NULL with length 0.
        let bytes = unsafe { optional_bytes_in(text, text_len) }?;
        c.config.instructions = bytes.map(utf8).transpose()?.map(str::to_owned);
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Sets how long each request waits for its answer unless it says otherwise
/// (`request_timeout_ms`, default 60 000) and the longest a request may run when progress
/// keeps resetting its timeout (`max_total_timeout_ms`, default 600 000). Both must be at
/// least 1.
///
/// # Safety
/// `config` is NULL or a live config handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_timeouts(
    config: *mut mcpw_config,
    request_timeout_ms: u64,
    max_total_timeout_ms: u64,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        if request_timeout_ms == 0 || max_total_timeout_ms == 0 {
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        c.config.request_timeout = Duration::from_millis(request_timeout_ms);
        c.config.max_total_timeout = Duration::from_millis(max_total_timeout_ms);
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Reads the config's limits into `*out_limits`.
///
/// # Safety
/// `config` is NULL or a live config handle; `out_limits` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_get_limits(
    config: *const mcpw_config,
    out_limits: *mut mcpw_limits,
) -> mcpw_result {
    let body = |c: &mcpw_config| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_limits) }?;
        let l = c.config.limits;
        out.write(mcpw_limits {
            max_frame: l.max_frame,
            max_outbound_in_flight: l.max_outbound_in_flight,
            max_inbound_in_flight: l.max_inbound_in_flight,
            max_buffered_output: l.max_buffered_output,
            max_remembered_ids: l.max_remembered_ids,
            max_queued_events: l.max_queued_events,
        });
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_ref(config, body) }
}

/// Sets every limit from `*limits` (read during the call only). Every field must be at
/// least 1; on error the config is unchanged.
///
/// # Safety
/// `config` is NULL or a live config handle; `limits` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_limits(
    config: *mut mcpw_config,
    limits: *const mcpw_limits,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        // Safety: (caller) readable or NULL, which is refused; the struct is plain numbers.
        let l = unsafe { read_in(limits) }?;
        let fields = [
            l.max_frame,
            l.max_outbound_in_flight,
            l.max_inbound_in_flight,
            l.max_buffered_output,
            l.max_remembered_ids,
            l.max_queued_events,
        ];
        if fields.contains(&0) {
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        let limits: &mut Limits = &mut c.config.limits;
        limits.max_frame = l.max_frame;
        limits.max_outbound_in_flight = l.max_outbound_in_flight;
        limits.max_inbound_in_flight = l.max_inbound_in_flight;
        limits.max_buffered_output = l.max_buffered_output;
        limits.max_remembered_ids = l.max_remembered_ids;
        limits.max_queued_events = l.max_queued_events;
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Reads the policy flags (`MCPW_POLICY_*`) into `*out_flags`: to change one flag with
/// `mcpw_config_set_policy` and keep the others.
///
/// # Safety
/// `config` is NULL or a live config handle; `out_flags` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_get_policy(
    config: *const mcpw_config,
    out_flags: *mut u32,
) -> mcpw_result {
    let body = |c: &mcpw_config| {
        // Safety: (caller) writable or NULL, which is refused.
        let out = unsafe { Out::new(out_flags) }?;
        let p = c.config.policy;
        let flag = |on: bool, f: u32| if on { f } else { 0 };
        out.write(
            flag(p.strict_lifecycle, MCPW_POLICY_STRICT_LIFECYCLE)
                | flag(p.answer_pings, MCPW_POLICY_ANSWER_PINGS)
                | flag(
                    p.progress == ProgressPolicy::DeliverAll,
                    MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS,
                )
                | flag(
                    p.reset_timeout_on_progress,
                    MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS,
                )
                | flag(p.review_listens, MCPW_POLICY_REVIEW_LISTENS),
        );
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_ref(config, body) }
}

/// Sets the policy flags: any combination of `MCPW_POLICY_*` (start from
/// `MCPW_POLICY_DEFAULT`). Unknown bits are refused with `MCPW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` is NULL or a live config handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_policy(
    config: *mut mcpw_config,
    flags: u32,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        if flags & !POLICY_ALL != 0 {
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        let p = &mut c.config.policy;
        p.strict_lifecycle = flags & MCPW_POLICY_STRICT_LIFECYCLE != 0;
        p.answer_pings = flags & MCPW_POLICY_ANSWER_PINGS != 0;
        p.progress = if flags & MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS != 0 {
            ProgressPolicy::DeliverAll
        } else {
            ProgressPolicy::DropNonIncreasing
        };
        p.reset_timeout_on_progress = flags & MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS != 0;
        p.review_listens = flags & MCPW_POLICY_REVIEW_LISTENS != 0;
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Client: sets how the protocol era is chosen, one of `mcpw_client_era` (default
/// `MCPW_CLIENT_ERA_AUTO`). Ignored when the versions hold only one era.
///
/// # Safety
/// `config` is NULL or a live config handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_client_era(
    config: *mut mcpw_config,
    era: u32,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        c.config.client_era = match era {
            e if e == mcpw_client_era::MCPW_CLIENT_ERA_AUTO as u32 => ClientEra::Auto,
            e if e == mcpw_client_era::MCPW_CLIENT_ERA_LEGACY as u32 => ClientEra::Legacy,
            e if e == mcpw_client_era::MCPW_CLIENT_ERA_MODERN as u32 => ClientEra::Modern,
            _ => return Err(MCPW_ERR_INVALID_ARGUMENT),
        };
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Client: sets how long the `server/discover` probe may take before `MCPW_CLIENT_ERA_AUTO`
/// falls back to `initialize` (default 5000 ms; at least 1).
///
/// # Safety
/// `config` is NULL or a live config handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_discover_timeout(
    config: *mut mcpw_config,
    timeout_ms: u64,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        if timeout_ms == 0 {
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        c.config.discover_timeout = Duration::from_millis(timeout_ms);
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}

/// Server, 2026-07-28: sets the `ttlMs` of `server/discover` results and of cacheable results
/// (lists, `resources/read`) that do not set their own (`ttl_ms`, default 0: do not cache),
/// and the `cacheScope` that goes with it, one of `mcpw_cache_scope` (default
/// `MCPW_CACHE_PRIVATE`).
///
/// # Safety
/// `config` is NULL or a live config handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpw_config_set_discover_cache(
    config: *mut mcpw_config,
    ttl_ms: u64,
    scope: u32,
) -> mcpw_result {
    let body = |c: &mut mcpw_config| {
        let scope = match scope {
            s if s == mcpw_cache_scope::MCPW_CACHE_PUBLIC as u32 => CacheScope::Public,
            s if s == mcpw_cache_scope::MCPW_CACHE_PRIVATE as u32 => CacheScope::Private,
            _ => return Err(MCPW_ERR_INVALID_ARGUMENT),
        };
        c.config.discover_ttl = Duration::from_millis(ttl_ms);
        c.config.discover_cache_scope = scope;
        Ok(())
    };
    // Safety: (caller) NULL or a live config handle.
    unsafe { with_mut(config, body) }
}
