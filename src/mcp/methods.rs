//! The method table: one row per method or notification and version range, written by hand
//! from the official schemas (a test checks it against them).

use super::{Caps, ProtocolVersion};

/// Request or notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MethodKind {
    /// Expects a response.
    Request,
    /// One-way.
    Notification,
}

/// Who may send a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Only the client sends it.
    ClientToServer,
    /// Only the server sends it.
    ServerToClient,
    /// Either side.
    Both,
}

impl Direction {
    /// Whether a client (`from_client`) or a server may send it.
    pub fn allows(self, from_client: bool) -> bool {
        match self {
            Direction::Both => true,
            Direction::ClientToServer => from_client,
            Direction::ServerToClient => !from_client,
        }
    }
}

/// The capability that gates a method.
///
/// For a request it must have been declared by the side that *receives* it; for a
/// notification, by the side that *sends* it (a server sends `notifications/tools/list_changed`
/// only if it declared `tools.listChanged`), with one exception:
/// `notifications/elicitation/complete`, which the server sends, is gated by the *client's*
/// `elicitation.url` (the receiver's), since only a client that takes URL-mode elicitations
/// can be told one completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// No capability needed.
    None,
    /// This capability flag.
    Cap(Caps),
}

/// One row of the method table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    /// The method name.
    pub name: &'static str,
    /// Request or notification.
    pub kind: MethodKind,
    /// Who may send it.
    pub direction: Direction,
    /// The capability that gates it.
    pub gate: Gate,
    versions: u8,
}

impl MethodInfo {
    /// Whether the method exists in `version`.
    pub fn in_version(&self, version: ProtocolVersion) -> bool {
        self.versions & version.bit() != 0
    }
}

const A: u8 = 1 << ProtocolVersion::V2024_11_05 as u8;
const B: u8 = 1 << ProtocolVersion::V2025_03_26 as u8;
const C: u8 = 1 << ProtocolVersion::V2025_06_18 as u8;
const D: u8 = 1 << ProtocolVersion::V2025_11_25 as u8;
const E: u8 = 1 << ProtocolVersion::V2026_07_28 as u8;
const LEGACY: u8 = A | B | C | D;
const ALL: u8 = LEGACY | E;

const fn row(
    name: &'static str,
    kind: MethodKind,
    direction: Direction,
    gate: Gate,
    versions: u8,
) -> MethodInfo {
    MethodInfo {
        name,
        kind,
        direction,
        gate,
        versions,
    }
}

use Direction::{Both, ClientToServer as C2S, ServerToClient as S2C};
use MethodKind::{Notification as N, Request as R};

const fn cap(c: Caps) -> Gate {
    Gate::Cap(c)
}
const NONE: Gate = Gate::None;

/// The table. A method may have several rows when its gate changed between versions.
static TABLE: &[MethodInfo] = &[
    // ---- lifecycle and utilities ----
    row("initialize", R, C2S, NONE, LEGACY),
    row("ping", R, Both, NONE, LEGACY),
    row("server/discover", R, C2S, NONE, E),
    row("notifications/initialized", N, C2S, NONE, LEGACY),
    row("notifications/cancelled", N, Both, NONE, LEGACY),
    row("notifications/cancelled", N, Both, NONE, E),
    row("notifications/progress", N, Both, NONE, LEGACY),
    row("notifications/progress", N, S2C, NONE, E),
    // ---- server features ----
    row("tools/list", R, C2S, cap(Caps::TOOLS), ALL),
    row("tools/call", R, C2S, cap(Caps::TOOLS), ALL),
    row("resources/list", R, C2S, cap(Caps::RESOURCES), ALL),
    row(
        "resources/templates/list",
        R,
        C2S,
        cap(Caps::RESOURCES),
        ALL,
    ),
    row("resources/read", R, C2S, cap(Caps::RESOURCES), ALL),
    row(
        "resources/subscribe",
        R,
        C2S,
        cap(Caps::RESOURCES_SUBSCRIBE),
        LEGACY,
    ),
    row(
        "resources/unsubscribe",
        R,
        C2S,
        cap(Caps::RESOURCES_SUBSCRIBE),
        LEGACY,
    ),
    row("subscriptions/listen", R, C2S, NONE, E),
    row("prompts/list", R, C2S, cap(Caps::PROMPTS), ALL),
    row("prompts/get", R, C2S, cap(Caps::PROMPTS), ALL),
    row("completion/complete", R, C2S, NONE, A),
    row(
        "completion/complete",
        R,
        C2S,
        cap(Caps::COMPLETIONS),
        B | C | D | E,
    ),
    row("logging/setLevel", R, C2S, cap(Caps::LOGGING), LEGACY),
    row(
        "notifications/tools/list_changed",
        N,
        S2C,
        cap(Caps::TOOLS_LIST_CHANGED),
        ALL,
    ),
    row(
        "notifications/prompts/list_changed",
        N,
        S2C,
        cap(Caps::PROMPTS_LIST_CHANGED),
        ALL,
    ),
    row(
        "notifications/resources/list_changed",
        N,
        S2C,
        cap(Caps::RESOURCES_LIST_CHANGED),
        ALL,
    ),
    row(
        "notifications/resources/updated",
        N,
        S2C,
        cap(Caps::RESOURCES_SUBSCRIBE),
        ALL,
    ),
    row("notifications/message", N, S2C, cap(Caps::LOGGING), ALL),
    row("notifications/subscriptions/acknowledged", N, S2C, NONE, E),
    // ---- client features ----
    row(
        "sampling/createMessage",
        R,
        S2C,
        cap(Caps::SAMPLING),
        LEGACY,
    ),
    row("roots/list", R, S2C, cap(Caps::ROOTS), LEGACY),
    row("elicitation/create", R, S2C, cap(Caps::ELICITATION), C | D),
    row(
        "notifications/roots/list_changed",
        N,
        C2S,
        cap(Caps::ROOTS_LIST_CHANGED),
        LEGACY,
    ),
    row(
        "notifications/elicitation/complete",
        N,
        S2C,
        cap(Caps::ELICITATION_URL),
        D,
    ),
    // ---- tasks (2025-11-25) ----
    row("tasks/get", R, Both, cap(Caps::TASKS), D),
    row("tasks/result", R, Both, cap(Caps::TASKS), D),
    row("tasks/list", R, Both, cap(Caps::TASKS_LIST), D),
    row("tasks/cancel", R, Both, cap(Caps::TASKS_CANCEL), D),
    row("notifications/tasks/status", N, Both, cap(Caps::TASKS), D),
    // ---- the tasks extension (2026-07-28, SEP-2663): no tasks/result, no tasks/list ----
    row("tasks/get", R, C2S, cap(Caps::TASKS_EXTENSION), E),
    row("tasks/update", R, C2S, cap(Caps::TASKS_EXTENSION), E),
    row("tasks/cancel", R, C2S, cap(Caps::TASKS_EXTENSION), E),
    row("notifications/tasks", N, S2C, cap(Caps::TASKS_EXTENSION), E),
];

/// The row for `name` in `version`, if the method exists there. Use it to decide whether a
/// method may be sent or received, and under which capability.
pub fn lookup(name: &str, version: ProtocolVersion) -> Option<&'static MethodInfo> {
    TABLE
        .iter()
        .find(|m| m.name == name && m.in_version(version))
}

/// Every method that exists in `version`, in table order.
pub fn methods_of(version: ProtocolVersion) -> impl Iterator<Item = &'static MethodInfo> {
    TABLE.iter().filter(move |m| m.in_version(version))
}

/// Whether `name` is an MCP method of any version (so an unknown name is a custom method).
pub(crate) fn is_known_method(name: &str) -> bool {
    TABLE.iter().any(|m| m.name == name)
}
