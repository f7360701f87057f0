//! Capabilities: the raw JSON a side declared, plus compact flags for the engine's checks.

use std::fmt;

use crate::jsonrpc::{DuplicateMember, RawJson};

/// Capability flags, one bit per capability (or sub-capability) the engine checks.
///
/// Server and client capabilities share the type; each side only ever sets its own. Combine
/// flags with `|` and test with [`contains`](Self::contains).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Caps(u32);

impl Caps {
    /// No capabilities.
    pub const EMPTY: Caps = Caps(0);
    // -- server --
    /// Server: `tools`.
    pub const TOOLS: Caps = Caps(1 << 0);
    /// Server: `tools.listChanged`.
    pub const TOOLS_LIST_CHANGED: Caps = Caps(1 << 1);
    /// Server: `resources`.
    pub const RESOURCES: Caps = Caps(1 << 2);
    /// Server: `resources.subscribe`.
    pub const RESOURCES_SUBSCRIBE: Caps = Caps(1 << 3);
    /// Server: `resources.listChanged`.
    pub const RESOURCES_LIST_CHANGED: Caps = Caps(1 << 4);
    /// Server: `prompts`.
    pub const PROMPTS: Caps = Caps(1 << 5);
    /// Server: `prompts.listChanged`.
    pub const PROMPTS_LIST_CHANGED: Caps = Caps(1 << 6);
    /// Server: `logging`.
    pub const LOGGING: Caps = Caps(1 << 7);
    /// Server: `completions`.
    pub const COMPLETIONS: Caps = Caps(1 << 8);
    // -- client --
    /// Client: `roots`.
    pub const ROOTS: Caps = Caps(1 << 9);
    /// Client: `roots.listChanged`.
    pub const ROOTS_LIST_CHANGED: Caps = Caps(1 << 10);
    /// Client: `sampling`.
    pub const SAMPLING: Caps = Caps(1 << 11);
    /// Client: `sampling.tools`.
    pub const SAMPLING_TOOLS: Caps = Caps(1 << 12);
    /// Client: `sampling.context`.
    pub const SAMPLING_CONTEXT: Caps = Caps(1 << 13);
    /// Client: `elicitation`.
    pub const ELICITATION: Caps = Caps(1 << 14);
    /// Client: form-mode elicitation (`elicitation.form`, or an empty `elicitation` object).
    pub const ELICITATION_FORM: Caps = Caps(1 << 15);
    /// Client: `elicitation.url`.
    pub const ELICITATION_URL: Caps = Caps(1 << 16);
    // -- either side --
    /// `tasks` (2025-11-25).
    pub const TASKS: Caps = Caps(1 << 17);
    /// `tasks.list`.
    pub const TASKS_LIST: Caps = Caps(1 << 18);
    /// `tasks.cancel`.
    pub const TASKS_CANCEL: Caps = Caps(1 << 19);
    /// `experimental`.
    pub const EXPERIMENTAL: Caps = Caps(1 << 20);
    /// `extensions` (2026-07-28).
    pub const EXTENSIONS: Caps = Caps(1 << 21);
    /// The tasks extension (2026-07-28): `extensions` has the member
    /// `io.modelcontextprotocol/tasks` ([`TASKS_EXTENSION`](crate::tasks::TASKS_EXTENSION)).
    pub const TASKS_EXTENSION: Caps = Caps(1 << 22);
    /// Server, 2025-11-25: `tasks.requests.tools.call` (`tools/call` may be task-augmented).
    pub const TASKS_TOOLS_CALL: Caps = Caps(1 << 23);
    /// Client, 2025-11-25: `tasks.requests.sampling.createMessage`.
    pub const TASKS_SAMPLING: Caps = Caps(1 << 24);
    /// Client, 2025-11-25: `tasks.requests.elicitation.create`.
    pub const TASKS_ELICITATION: Caps = Caps(1 << 25);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits (stable within one build; for the C ABI and debugging).
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for Caps {
    type Output = Caps;
    fn bitor(self, rhs: Caps) -> Caps {
        Caps(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Caps {
    fn bitor_assign(&mut self, rhs: Caps) {
        self.0 |= rhs.0;
    }
}

const NAMES: &[(Caps, &str)] = &[
    (Caps::TOOLS, "tools"),
    (Caps::TOOLS_LIST_CHANGED, "tools.listChanged"),
    (Caps::RESOURCES, "resources"),
    (Caps::RESOURCES_SUBSCRIBE, "resources.subscribe"),
    (Caps::RESOURCES_LIST_CHANGED, "resources.listChanged"),
    (Caps::PROMPTS, "prompts"),
    (Caps::PROMPTS_LIST_CHANGED, "prompts.listChanged"),
    (Caps::LOGGING, "logging"),
    (Caps::COMPLETIONS, "completions"),
    (Caps::ROOTS, "roots"),
    (Caps::ROOTS_LIST_CHANGED, "roots.listChanged"),
    (Caps::SAMPLING, "sampling"),
    (Caps::SAMPLING_TOOLS, "sampling.tools"),
    (Caps::SAMPLING_CONTEXT, "sampling.context"),
    (Caps::ELICITATION, "elicitation"),
    (Caps::ELICITATION_FORM, "elicitation.form"),
    (Caps::ELICITATION_URL, "elicitation.url"),
    (Caps::TASKS, "tasks"),
    (Caps::TASKS_LIST, "tasks.list"),
    (Caps::TASKS_CANCEL, "tasks.cancel"),
    (Caps::EXPERIMENTAL, "experimental"),
    (Caps::EXTENSIONS, "extensions"),
    (
        Caps::TASKS_EXTENSION,
        "extensions.io.modelcontextprotocol/tasks",
    ),
    (Caps::TASKS_TOOLS_CALL, "tasks.requests.tools.call"),
    (
        Caps::TASKS_SAMPLING,
        "tasks.requests.sampling.createMessage",
    ),
    (Caps::TASKS_ELICITATION, "tasks.requests.elicitation.create"),
];

impl Caps {
    /// The dotted capability path of a single flag (`"resources.subscribe"`).
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, n)| *n)
            .unwrap_or("capabilities")
    }
}

impl fmt::Debug for Caps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_set();
        for (c, n) in NAMES {
            if self.contains(*c) {
                list.entry(n);
            }
        }
        list.finish()
    }
}

/// Why a capabilities object could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapabilityError {
    /// Not valid JSON.
    InvalidJson,
    /// Not a JSON object.
    NotAnObject,
    /// A capability key appears twice.
    DuplicateKey,
    /// One of our own capabilities the specification defines (`tools`, `resources`, …) is
    /// not a JSON object (`"tools": true`), or a member of it is not of the schema's type (a
    /// `listChanged` or `subscribe` that is not a boolean, an `elicitation.form`, a
    /// `sampling.tools` or an extension's settings that is not an object); a peer validating
    /// against the schema would refuse the whole declaration.
    MemberNotAnObject,
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapabilityError::InvalidJson => "capabilities are not valid JSON",
            CapabilityError::NotAnObject => "capabilities must be a JSON object",
            CapabilityError::DuplicateKey => "a capability key appears twice",
            CapabilityError::MemberNotAnObject => {
                "a capability the specification defines must be a JSON object, with members of the schema's types"
            }
        })
    }
}

impl std::error::Error for CapabilityError {}

impl From<DuplicateMember> for CapabilityError {
    fn from(_: DuplicateMember) -> Self {
        CapabilityError::DuplicateKey
    }
}

/// One side's declared capabilities: the JSON as declared (for the application) and the flags
/// the engine checks.
#[derive(Clone, PartialEq, Eq)]
pub struct Capabilities {
    raw: String,
    flags: Caps,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            raw: "{}".to_owned(),
            flags: Caps::EMPTY,
        }
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capabilities")
            .field("flags", &self.flags)
            .field("raw", &self.raw)
            .finish()
    }
}

/// The capabilities the specification defines, in the order `from_raw` reads them.
const KNOWN: [&str; 11] = [
    "tools",
    "resources",
    "prompts",
    "logging",
    "completions",
    "roots",
    "sampling",
    "elicitation",
    "tasks",
    "experimental",
    "extensions",
];

/// Whether a capability member counts as declared: any value but `null` and `false`.
fn declared(v: Option<RawJson<'_>>) -> bool {
    v.is_some_and(|v| !v.is_null() && v.get().trim() != "false")
}

impl Capabilities {
    /// Reads a capabilities object (`{"tools":{"listChanged":true}, …}`) leniently, as the
    /// engine reads a peer's: any value but `null` and `false` counts as declared. For your
    /// own declaration in a config, use [`parse_own`](Self::parse_own), which holds it to the
    /// schema's types (a connection refuses to start with one that breaks them).
    pub fn parse(json: &str) -> Result<Capabilities, CapabilityError> {
        let raw = RawJson::new(json).map_err(|_| CapabilityError::InvalidJson)?;
        Self::from_raw(raw)
    }

    /// Reads our own declaration: [`parse`](Self::parse), and every capability the
    /// specification defines must be an object (the schema's type; a peer's declaration is
    /// read leniently, any value but `null` and `false` counting as declared).
    pub fn parse_own(json: &str) -> Result<Capabilities, CapabilityError> {
        let parsed = Self::parse(json)?;
        let raw = RawJson::new(json).map_err(|_| CapabilityError::InvalidJson)?;
        let top = raw.get_each(KNOWN);
        for (i, name) in KNOWN.iter().enumerate() {
            let Some(v) = top.get(i)? else { continue };
            if !v.is_object() {
                return Err(CapabilityError::MemberNotAnObject);
            }
            // The members the schemas type: flags are booleans, the others objects (a
            // `"listChanged":"no"` was taken as declared, and sent as it was).
            let (flags, objects): (&[&str], &[&str]) = match *name {
                "tools" | "prompts" | "roots" => (&["listChanged"], &[]),
                "resources" => (&["subscribe", "listChanged"], &[]),
                "sampling" => (&[], &["tools", "context"]),
                "elicitation" => (&[], &["form", "url"]),
                "tasks" => (&[], &["list", "cancel", "requests"]),
                _ => (&[], &[]),
            };
            for flag in flags {
                if v.get_unique(flag)?
                    .is_some_and(|f| !matches!(f.get().trim(), "true" | "false"))
                {
                    return Err(CapabilityError::MemberNotAnObject);
                }
            }
            for member in objects {
                if v.get_unique(member)?.is_some_and(|m| !m.is_object()) {
                    return Err(CapabilityError::MemberNotAnObject);
                }
            }
            // Each experimental capability and each extension's settings: an object.
            if matches!(*name, "experimental" | "extensions")
                && v.members().any(|(_, m)| !m.is_object())
            {
                return Err(CapabilityError::MemberNotAnObject);
            }
        }
        Ok(parsed)
    }

    /// Reads an already validated capabilities object.
    pub fn from_raw(raw: RawJson<'_>) -> Result<Capabilities, CapabilityError> {
        if !raw.is_object() {
            return Err(CapabilityError::NotAnObject);
        }
        let mut flags = Caps::EMPTY;
        let mut set = |on: bool, c: Caps| {
            if on {
                flags |= c;
            }
        };
        let sub = |v: Option<RawJson<'_>>, key: &str| -> Result<bool, CapabilityError> {
            match v {
                Some(v) if v.is_object() => Ok(declared(v.get_unique(key)?)),
                _ => Ok(false),
            }
        };
        // One pass over the object for every top-level key.
        let top = raw.get_each(KNOWN);
        let tools = top.get(0)?;
        set(declared(tools), Caps::TOOLS);
        set(sub(tools, "listChanged")?, Caps::TOOLS_LIST_CHANGED);
        let resources = top.get(1)?;
        set(declared(resources), Caps::RESOURCES);
        set(sub(resources, "subscribe")?, Caps::RESOURCES_SUBSCRIBE);
        set(sub(resources, "listChanged")?, Caps::RESOURCES_LIST_CHANGED);
        let prompts = top.get(2)?;
        set(declared(prompts), Caps::PROMPTS);
        set(sub(prompts, "listChanged")?, Caps::PROMPTS_LIST_CHANGED);
        set(declared(top.get(3)?), Caps::LOGGING);
        set(declared(top.get(4)?), Caps::COMPLETIONS);
        let roots = top.get(5)?;
        set(declared(roots), Caps::ROOTS);
        set(sub(roots, "listChanged")?, Caps::ROOTS_LIST_CHANGED);
        let sampling = top.get(6)?;
        set(declared(sampling), Caps::SAMPLING);
        set(sub(sampling, "tools")?, Caps::SAMPLING_TOOLS);
        set(sub(sampling, "context")?, Caps::SAMPLING_CONTEXT);
        let elicitation = top.get(7)?;
        let form = sub(elicitation, "form")?;
        let url = sub(elicitation, "url")?;
        set(declared(elicitation), Caps::ELICITATION);
        // An empty elicitation object means form mode only.
        set(
            declared(elicitation) && (form || !url),
            Caps::ELICITATION_FORM,
        );
        set(declared(elicitation) && url, Caps::ELICITATION_URL);
        let tasks = top.get(8)?;
        set(declared(tasks), Caps::TASKS);
        set(sub(tasks, "list")?, Caps::TASKS_LIST);
        set(sub(tasks, "cancel")?, Caps::TASKS_CANCEL);
        // tasks.requests.<area>.<method>
        let requests = match tasks {
            Some(t) if t.is_object() => t.get_unique("requests")?,
            _ => None,
        };
        let area = |name: &str| -> Result<Option<RawJson<'_>>, CapabilityError> {
            match requests {
                Some(r) if r.is_object() => Ok(r.get_unique(name)?),
                _ => Ok(None),
            }
        };
        set(sub(area("tools")?, "call")?, Caps::TASKS_TOOLS_CALL);
        set(
            sub(area("sampling")?, "createMessage")?,
            Caps::TASKS_SAMPLING,
        );
        set(
            sub(area("elicitation")?, "create")?,
            Caps::TASKS_ELICITATION,
        );
        set(declared(top.get(9)?), Caps::EXPERIMENTAL);
        let extensions = top.get(10)?;
        set(declared(extensions), Caps::EXTENSIONS);
        set(
            sub(extensions, crate::tasks::TASKS_EXTENSION)?,
            Caps::TASKS_EXTENSION,
        );
        Ok(Capabilities {
            raw: raw.get().to_owned(),
            flags,
        })
    }

    /// The flags.
    pub fn flags(&self) -> Caps {
        self.flags
    }

    /// Whether every flag of `c` is declared.
    pub fn has(&self, c: Caps) -> bool {
        self.flags.contains(c)
    }

    /// The JSON as declared.
    pub fn raw(&self) -> RawJson<'_> {
        RawJson::validated(&self.raw)
    }
}

/// The sub-capabilities of `declared` that count in `version`. Before 2025-11-25 there is no
/// URL-mode elicitation and no tool use in sampling, whatever a peer that also speaks
/// 2025-11-25 declared, and no capability gates `includeContext` (`sampling.context` came
/// with 2025-11-25 too); and elicitation, declared at all, is form mode, the only one then
/// (a declaration of URL mode alone took it away).
pub(crate) fn sub_capabilities_in(declared: Caps, version: super::ProtocolVersion) -> Caps {
    if version < super::ProtocolVersion::V2025_11_25 {
        let absent = Caps::ELICITATION_URL.0 | Caps::SAMPLING_TOOLS.0;
        let form = if declared.contains(Caps::ELICITATION) {
            Caps::ELICITATION_FORM
        } else {
            Caps(0)
        };
        Caps(declared.0 & !absent) | Caps::SAMPLING_CONTEXT | form
    } else {
        declared
    }
}

/// The flags [`sub_capabilities`] may ask for, in the order a refusal names the first one
/// missing.
const SUB_FLAGS: [Caps; 7] = [
    Caps::ELICITATION_FORM,
    Caps::ELICITATION_URL,
    Caps::SAMPLING_TOOLS,
    Caps::SAMPLING_CONTEXT,
    Caps::TASKS_TOOLS_CALL,
    Caps::TASKS_SAMPLING,
    Caps::TASKS_ELICITATION,
];

impl SubCapability {
    /// Checks the needs against `declared`: `Err(Needs(flag))` names the first flag missing,
    /// `Err(Malformed)` passes malformed params on. Task augmentation is only checked where
    /// `tasks_apply` (2025-11-25: later versions have no `task` member).
    pub fn check(self, declared: Caps, tasks_apply: bool) -> Result<(), SubCapability> {
        let SubCapability::Needs(needs) = self else {
            return Err(self);
        };
        let missing = SUB_FLAGS.into_iter().find(|&f| {
            let is_task = matches!(
                f,
                Caps::TASKS_TOOLS_CALL | Caps::TASKS_SAMPLING | Caps::TASKS_ELICITATION
            );
            needs.contains(f) && !declared.contains(f) && (tasks_apply || !is_task)
        });
        match missing {
            Some(flag) => Err(SubCapability::Needs(flag)),
            None => Ok(()),
        }
    }
}

/// Why a request's params need more than its method's capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubCapability {
    /// The receiver must have declared these flags (all of them).
    Needs(Caps),
    /// The params are malformed where the rule reads them: an unknown elicitation mode, or a
    /// member the rule reads (`mode`, `tools`, `toolChoice`, `task`) twice.
    Malformed,
}

/// The sub-capabilities the receiver of request `method` with `params` must have declared,
/// beyond the method's own capability (2025-11-25 on; also the 2026-07-28 input requests):
///
/// - `elicitation/create`: `elicitation.form` for form mode (`mode` absent or `"form"`),
///   `elicitation.url` for `"url"` ("Servers MUST NOT send elicitation requests with modes that
///   are not supported by the client");
/// - `sampling/createMessage`: `sampling.tools` with `tools` or `toolChoice` ("Servers MUST NOT
///   send tool-enabled sampling requests to Clients that have not declared support"), and
///   `sampling.context` for an `includeContext` other than `"none"` (a SHOULD NOT);
/// - a task-augmented request (a `task` member, 2025-11-25): `tasks.requests.<method>`.
///
/// The engine checks what it sends against the peer's declaration (a typed error,
/// [`Error::NotNegotiated`](crate::conn::Error::NotNegotiated)) and what it receives against
/// ours (the JSON-RPC error the spec names); in a session before 2025-11-25 it counts URL
/// mode and sampling tools as undeclared and `includeContext` as free, since those versions
/// have no such capabilities (this function, which knows no version, does not). Use it to
/// check a request of your own making.
pub fn sub_capabilities(method: &str, params: Option<RawJson<'_>>) -> SubCapability {
    sub_capabilities_with(method, params, || {
        params.map_or(Some(false), |p| {
            p.get_unique("task").ok().map(|t| t.is_some())
        })
    })
}

/// [`sub_capabilities`] with the caller's answer to "do the params have a `task` member"
/// (`None`: a duplicated one, malformed), asked only for the methods a task may augment:
/// callers that already know it, or for which tasks do not apply, save a walk over the params.
/// A member this reads that appears twice makes the params malformed: the receiver's reading
/// (last one wins, for many JSON parsers) could differ from ours.
pub(crate) fn sub_capabilities_with(
    method: &str,
    params: Option<RawJson<'_>>,
    has_task: impl FnOnce() -> Option<bool>,
) -> SubCapability {
    let member = |key: &str| match params {
        Some(p) => p.get_unique(key).map_err(|_| ()),
        None => Ok(None),
    };
    let mut needs = Caps::EMPTY;
    match method {
        "elicitation/create" => match member("mode") {
            Err(()) => return SubCapability::Malformed,
            Ok(None) => needs |= Caps::ELICITATION_FORM,
            Ok(Some(m)) => match m.as_str().map(|m| m.to_str()) {
                Some(m) if m == "form" => needs |= Caps::ELICITATION_FORM,
                Some(m) if m == "url" => needs |= Caps::ELICITATION_URL,
                _ => return SubCapability::Malformed,
            },
        },
        "sampling/createMessage" => {
            let Some(params) = params else {
                return SubCapability::Needs(Caps::EMPTY);
            };
            let found = params.get_each(["tools", "toolChoice", "includeContext"]);
            let (Ok(tools), Ok(choice)) = (found.get(0), found.get(1)) else {
                return SubCapability::Malformed;
            };
            if tools.is_some() || choice.is_some() {
                needs |= Caps::SAMPLING_TOOLS;
            }
            // `includeContext` twice needs the capability, as one of them might: a receiver
            // that tolerates it (every one before 2025-11-25) has nothing to refuse.
            if found.get(2).map_or(true, |c| {
                c.and_then(|c| c.as_str())
                    .is_some_and(|c| c.to_str() != "none")
            }) {
                needs |= Caps::SAMPLING_CONTEXT;
            }
        }
        _ => {}
    }
    let task_flag = match method {
        "tools/call" => Caps::TASKS_TOOLS_CALL,
        "sampling/createMessage" => Caps::TASKS_SAMPLING,
        "elicitation/create" => Caps::TASKS_ELICITATION,
        // Nothing else reads params here: the common case costs no scan.
        _ => return SubCapability::Needs(needs),
    };
    match has_task() {
        Some(true) => needs |= task_flag,
        Some(false) => {}
        None => return SubCapability::Malformed,
    }
    SubCapability::Needs(needs)
}
