//! MCP vocabulary: protocol versions, the method table, capabilities and error codes.
//!
//! Pure data and lookups, no state. The connection consults it for every rule that depends
//! on the protocol version or on what either side declared.

mod caps;
mod methods;

pub(crate) use caps::sub_capabilities_in;
pub(crate) use caps::sub_capabilities_with;
pub use caps::{Capabilities, CapabilityError, Caps, SubCapability, sub_capabilities};
pub(crate) use methods::is_known_method;
pub use methods::{Direction, Gate, MethodInfo, MethodKind, lookup, methods_of};

use std::fmt;

// ---- Versions ---------------------------------------------------------------------------

/// A released MCP protocol version.
///
/// Versions order by release date, so `a < b` means `a` is older.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    /// 2024-11-05, the first release.
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, batches, completions capability.
    V2025_03_26,
    /// 2025-06-18: batches removed, elicitation, structured tool output.
    V2025_06_18,
    /// 2025-11-25: tasks, URL elicitation, SSE priming.
    V2025_11_25,
    /// 2026-07-28: the stateless era (no handshake; per-request metadata).
    V2026_07_28,
}

/// Which of MCP's two models a version belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize` handshake and a session (2024-11-05 … 2025-11-25).
    Legacy,
    /// Per-request metadata, no handshake (2026-07-28 and later).
    Modern,
}

impl ProtocolVersion {
    /// Every released version, oldest first.
    pub const ALL: [ProtocolVersion; 5] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2026_07_28,
    ];

    /// The handshake-era versions, oldest first.
    pub const LEGACY: [ProtocolVersion; 4] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
    ];

    /// The newest handshake-era version.
    pub const LATEST_LEGACY: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// The version string used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parses a wire version string (exact match).
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The era this version belongs to.
    pub fn era(self) -> Era {
        if self >= ProtocolVersion::V2026_07_28 {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// Whether JSON-RPC batches exist in this version (only 2025-03-26).
    pub fn has_batches(self) -> bool {
        self == ProtocolVersion::V2025_03_26
    }

    /// This version's bit in a version mask.
    pub(crate) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ---- Error codes -------------------------------------------------------------------------

/// MCP's "resource not found" (2024-11-05 … 2025-11-25; 2026-07-28 uses -32602 instead).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// URL elicitation required (2025-11-25 only).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// A Streamable HTTP header contradicts the body (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request lacks a client capability the server needs (2026-07-28).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The request's protocol version is not supported (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Whether an error with `code` carries the `data` the 2026-07-28 schema requires of it:
/// -32021 its `requiredCapabilities` (an object), -32022 its `supported` versions (an array)
/// and the `requested` one (a string). Other codes need none.
pub(crate) fn has_required_data(code: i64, data: Option<crate::jsonrpc::RawJson<'_>>) -> bool {
    match code {
        MISSING_REQUIRED_CLIENT_CAPABILITY => data.is_some_and(|d| {
            d.get_unique("requiredCapabilities")
                .is_ok_and(|c| c.is_some_and(|c| c.is_object()))
        }),
        UNSUPPORTED_PROTOCOL_VERSION => data.is_some_and(|d| {
            let found = d.get_each(["supported", "requested"]);
            found
                .get(0)
                .is_ok_and(|s| s.is_some_and(|s| s.get().starts_with('[')))
                && found
                    .get(1)
                    .is_ok_and(|r| r.is_some_and(|r| r.as_str().is_some()))
        }),
        _ => true,
    }
}

/// The code to use for "resource not found" under `version`.
pub fn resource_not_found_code(version: ProtocolVersion) -> i64 {
    if version >= ProtocolVersion::V2026_07_28 {
        crate::jsonrpc::INVALID_PARAMS
    } else {
        RESOURCE_NOT_FOUND
    }
}

/// Whether `code` may be sent under `version`: the MCP-specific codes exist only in the
/// versions that define them.
pub fn error_code_allowed(code: i64, version: ProtocolVersion) -> bool {
    match code {
        URL_ELICITATION_REQUIRED => version == ProtocolVersion::V2025_11_25,
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION => {
            version >= ProtocolVersion::V2026_07_28
        }
        RESOURCE_NOT_FOUND => version < ProtocolVersion::V2026_07_28,
        // 2026-07-28 reserves -32020..-32099 for codes the specification defines.
        -32099..=-32020 => version < ProtocolVersion::V2026_07_28,
        _ => true,
    }
}

/// Whether `info` is an `Implementation` as every schema defines it (`clientInfo`, and
/// 2026-07-28's `_meta` `io.modelcontextprotocol/clientInfo`): an object whose `name` and
/// `version` are strings, each once. Other members are not looked at. Use it to check an
/// info object before it goes into a [`Config`](crate::conn::Config) (a connection refuses
/// to start with one that fails it).
pub fn is_implementation(info: crate::jsonrpc::RawJson<'_>) -> bool {
    if !info.is_object() {
        return false;
    }
    let found = info.get_each(["name", "version"]);
    let string = |i| matches!(found.get(i), Ok(Some(v)) if v.as_str().is_some());
    string(0) && string(1)
}

// ---- 2026-07-28 request metadata ------------------------------------------------------------

/// `_meta` key carrying a request's protocol version (2026-07-28, required).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying a request's client capabilities (2026-07-28, required).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key carrying the client's implementation info (2026-07-28).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key asking for log messages at or above a level (2026-07-28).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key carrying the server's implementation info on results (2026-07-28).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key tagging notifications delivered on a `subscriptions/listen` stream.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// A log severity (RFC 5424 order): `Debug` is the least severe, `Emergency` the most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    /// Parses a wire name (exact match).
    pub fn parse(s: &str) -> Option<LogLevel> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}
