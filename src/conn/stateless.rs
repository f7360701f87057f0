//! The stateless era (2026-07-28), and choosing between eras.
//!
//! State: [`Stateless`] (`Core::stateless`); the era itself is kept by lifecycle.rs.
//!
//! Rules enforced here, all 2026-07-28 unless marked (spec: "Versioning", "Basic" / `_meta`,
//! "server/discover", "Multi round-trip requests", "subscriptions/listen", and the stdio
//! transport's era fallback; docs/rules.md lists every rule with its test):
//!
//! Server
//! 1. A request is stateless when it is `server/discover` or its `params._meta` carries
//!    `io.modelcontextprotocol/protocolVersion`. The first one fixes the connection's era
//!    (stdio); `initialize` fixes the handshake era instead. Each stateless request is checked
//!    on its own: the required `_meta` keys (else -32602), a version we support (else -32022
//!    with our list), then the method table of *that* version (removed methods get -32601).
//! 2. `server/discover` is answered from the configuration; `subscriptions/listen` is answered
//!    with `notifications/subscriptions/acknowledged` for the subset we can honour (under
//!    `Policy::review_listens`, the part of it the application grants), and list, resource and
//!    task notifications then go to the listeners granted them, tagged with
//!    `io.modelcontextprotocol/subscriptionId`.
//! 3. Every result carries `resultType` (added as `"complete"` when missing) and our
//!    `serverInfo`. "Input required" is only for `tools/call`, `prompts/get` and
//!    `resources/read`, and may only ask for what the request's capabilities declare.
//! 4. Logging goes out only to a request whose `_meta` asked for it with `logLevel`, at or
//!    above that level. The server never sends requests.
//!
//! Client
//! 5. Every request gets `_meta` with the version, our capabilities and our info.
//! 6. A missing `resultType` means complete; an unknown one is an invalid answer.
//!    "Input required" becomes an event; `retry` re-sends with a new id, the input responses,
//!    and `requestState` exactly as received.
//! 7. In auto mode the client probes with `server/discover`: a valid result (or a -32022 naming
//!    a version we share, after one re-probe) means stateless; any other error, a result or a
//!    -32022 naming a handshake-era version we speak but no stateless one, or the probe timing
//!    out means the handshake era. A result or a -32022 naming no version we speak ends the
//!    connection (the server is stateless: "do not fall back"), and so does a result with an
//!    unknown `resultType`.
//! 8. (dual-era server) The first request fixes the era of the connection: `initialize`
//!    means the handshake era; `server/discover` or a request with the version in `_meta`
//!    means stateless. A modern-only server answers `initialize` with -32022 and the
//!    versions it supports, and a request without `_meta` with -32602 (`route_stateless`).
//! 9. Cacheable results (`tools/list`, `prompts/list`, `resources/list`,
//!    `resources/templates/list`, `resources/read`) carry `ttlMs` and `cacheScope`
//!    (`stamp_result`).

use super::correlation::TaskToken;
use super::dispatch::{ProgressToken, Refusal};
use super::event::{REFUSAL_MESSAGE_MAX, Stored};
use super::json_edit::{self, EditError};
use super::outbound::Answer;
use super::tables::{FastMap, ListenFilter, ModernContext, PendingKind, RetryBase};
use super::{
    CacheScope, CloseReason, Config, Core, Error, ListenItem, RequestId, Role, StreamId, Timestamp,
    ViolationKind,
};
use crate::jsonrpc::{
    self, DuplicateMember, Found, Id, OwnedId, ParamsIndex, RawJson, write_json_string,
};
use crate::mcp::{
    self, Capabilities, Caps, Era, LogLevel, META_CLIENT_CAPABILITIES, META_CLIENT_INFO,
    META_LOG_LEVEL, META_PROTOCOL_VERSION, META_SERVER_INFO, META_SUBSCRIPTION_ID, ProtocolVersion,
};
use std::collections::VecDeque;

/// The stateless era's per-request state.
#[derive(Default)]
pub(super) struct Stateless {
    /// Client: what "input required" answers need for a retry, by old request id.
    retryable: FastMap<i64, (RetryBase, Option<String>)>,
    retry_order: VecDeque<i64>,
    /// Client: the bytes of the servers' `requestState` strings kept in `retryable`.
    retry_state_bytes: usize,
    /// Client: what each request in flight that may come back "input required" needs for a
    /// retry, by request id. Kept apart from the requests in flight, whose entries stay small
    /// for the lookup every answer makes.
    pub(super) retry_bases: FastMap<i64, RetryBase>,
    /// Client: spare strings for the params a retry would need, so that keeping them for
    /// every eligible request allocates nothing in steady state.
    retry_pool: Vec<String>,
    /// The capacity held by `retry_pool`, in bytes.
    retry_pool_bytes: usize,
    /// Client, auto mode: a -32022 already triggered the one re-probe allowed.
    reprobed: bool,
    /// Server: the client capabilities the last request declared. A client sends the same
    /// object with every request, so it is parsed (and copied) once.
    pub(super) last_client_caps: Option<Capabilities>,
}

impl Stateless {
    /// `text` in a string from the retry pool (or a new one).
    pub(super) fn pooled_string(&mut self, text: &str) -> String {
        let mut s = self.retry_pool.pop().unwrap_or_default();
        self.retry_pool_bytes -= s.capacity();
        s.clear();
        s.push_str(text);
        s
    }

    /// What request `n` kept for a retry, taken out now that it has ended.
    pub(super) fn take_retry(&mut self, n: i64) -> Option<RetryBase> {
        if self.retry_bases.is_empty() {
            return None;
        }
        self.retry_bases.remove(&n)
    }

    /// Gives the params kept for a retry back to the pool once the request has ended.
    pub(super) fn recycle_retry(&mut self, retry: Option<RetryBase>) {
        if let Some(RetryBase {
            params: Some(s), ..
        }) = retry
            && s.capacity() <= RETRY_POOL_BYTES - self.retry_pool_bytes
        {
            self.retry_pool_bytes += s.capacity();
            self.retry_pool.push(s);
        }
    }

    /// Keeps what a retry of request `id` needs: the newest `limit` of them, and of their
    /// `requestState` strings (the server's, up to a frame each) no more than `budget` bytes
    /// beyond the newest, so that answers the application never retries cannot pin memory.
    fn remember_retry(
        &mut self,
        (limit, budget): (usize, usize),
        id: i64,
        base: RetryBase,
        state: Option<String>,
    ) {
        let limit = limit.max(1);
        let len = state.as_ref().map_or(0, String::len);
        while self.retry_order.len() >= limit
            || (!self.retry_order.is_empty() && self.retry_state_bytes + len > budget)
        {
            if let Some(old) = self.retry_order.pop_front() {
                self.drop_retryable(old);
            }
        }
        self.retry_order.push_back(id);
        self.retry_state_bytes += len;
        if let Some((_, old)) = self.retryable.insert(id, (base, state)) {
            self.retry_state_bytes -= old.map_or(0, |s| s.len());
        }
    }

    /// Forgets what a retry of request `id` needed.
    fn drop_retryable(&mut self, id: i64) {
        if let Some((_, state)) = self.retryable.remove(&id) {
            self.retry_state_bytes -= state.map_or(0, |s| s.len());
        }
    }

    /// Every retry base of the requests in flight is gone (the connection closed).
    pub(super) fn clear_in_flight(&mut self) {
        self.retry_bases.clear();
    }
}

/// What a result is, by its `resultType`.
pub(super) enum Classified<'f> {
    Complete,
    InputRequired {
        requests: Option<RawJson<'f>>,
        state: Option<jsonrpc::JsonStr<'f>>,
    },
    /// A task handle (SEP-2663) answering a `tools/call` we sent with the extension declared.
    Task,
    Invalid,
}

/// `params._meta` of a request (`None`: params is absent or not an object), looked up once
/// and shared by the checks that read it: each lookup walks every member of params.
pub(crate) type MetaLookup<'a> = Option<Result<Option<RawJson<'a>>, DuplicateMember>>;

/// Looks `_meta` up in `params`.
pub(super) fn lookup_meta(params: Option<RawJson<'_>>) -> MetaLookup<'_> {
    params
        .filter(|p| p.is_object())
        .map(|p| p.get_unique("_meta"))
}

/// The members of `_meta` the stateless era reads, by their places in [`MetaView::found`].
const META_KEYS: [&str; 5] = [
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    "progressToken",
];
const VERSION: usize = 0;
const CAPS: usize = 1;
const INFO: usize = 2;
const LEVEL: usize = 3;
const TOKEN: usize = 4;

/// A request's `_meta` and, when it is an object, its [`META_KEYS`], each read in one pass:
/// what makes the request stateless and what `read_meta` checks.
pub(crate) struct MetaView<'a> {
    meta: MetaLookup<'a>,
    found: Option<Found<'a, 5>>,
}

impl<'a> MetaView<'a> {
    /// The view of a `_meta` looked up in params elsewhere: `None` when params are absent or
    /// not an object, else what `get_unique("_meta")` (or `get_each`) gave. The HTTP server
    /// reads params once for its header checks and hands this to the connection.
    pub(crate) fn of(meta: MetaLookup<'a>) -> Self {
        let found = match meta {
            Some(Ok(Some(m))) if m.is_object() => Some(m.get_each(META_KEYS)),
            _ => None,
        };
        MetaView { meta, found }
    }

    /// `_meta`'s protocol version, when it has exactly one.
    pub(crate) fn version(&self) -> Option<RawJson<'a>> {
        self.found.and_then(|f| f.get(VERSION).ok().flatten())
    }
}

/// Reads the `_meta` of `params` for the stateless checks.
pub(super) fn view_meta(params: Option<RawJson<'_>>) -> MetaView<'_> {
    MetaView::of(lookup_meta(params))
}

/// What a stateless request's `_meta` said, or why it is malformed.
pub(super) enum RequestMeta {
    /// The context, and `_meta.progressToken` as [`accept_request`](Core::accept_request)
    /// takes it.
    Valid(ModernContext, ProgressToken),
    /// A required key is missing or malformed (-32602).
    Malformed(&'static str),
    /// A version we do not support (-32022), with what was requested.
    Unsupported(String),
}

/// The `resultType` besides `"complete"` that an answer may carry: each has its own way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ResultKind {
    /// `respond`: complete results only.
    Complete,
    /// `respond_task`: a task handle.
    Task,
    /// `respond_input_required`.
    InputRequired,
}

impl ResultKind {
    fn result_type(self) -> &'static str {
        match self {
            ResultKind::Complete => "complete",
            ResultKind::Task => "task",
            ResultKind::InputRequired => "input_required",
        }
    }
}

/// Whether `params._meta` carries a protocol version (what makes a request stateless).
pub(super) fn has_modern_meta(view: &MetaView<'_>) -> bool {
    view.found
        .is_some_and(|f| matches!(f.get(VERSION), Ok(Some(_))))
}

/// Reads a stateless request's `_meta`. `last_caps` holds the client capabilities seen last:
/// the same object again is not parsed (nor copied) again.
pub(super) fn read_meta(
    config: &Config,
    last_caps: &mut Option<Capabilities>,
    view: MetaView<'_>,
) -> RequestMeta {
    let Some(meta) = view.meta else {
        return RequestMeta::Malformed("params with _meta are required");
    };
    let found = match (meta, view.found) {
        (Ok(Some(_)), Some(found)) => found,
        (Ok(Some(_)), None) => return RequestMeta::Malformed("_meta must be an object"),
        (Ok(None), _) => return RequestMeta::Malformed("_meta is required"),
        (Err(_), _) => return RequestMeta::Malformed("duplicate _meta"),
    };
    let get = |i| found.get(i);
    let Ok(version) = get(VERSION) else {
        return RequestMeta::Malformed("duplicate protocolVersion");
    };
    let Some(version) = version.and_then(|v| v.as_str()) else {
        return RequestMeta::Malformed("_meta io.modelcontextprotocol/protocolVersion is required");
    };
    // The version first: a client of a later version may shape the rest of `_meta`
    // differently, and must learn which versions we support (-32022), not get -32602.
    let text = version.to_str();
    let Some(version) = ProtocolVersion::parse(&text)
        .filter(|v| v.era() == Era::Modern && config.versions.contains(v))
    else {
        return RequestMeta::Unsupported(text.into_owned());
    };
    let caps = match get(CAPS) {
        Ok(Some(c)) => match last_caps {
            Some(last) if last.raw().get() == c.get() => last.flags(),
            _ => match Capabilities::from_raw(c) {
                Ok(parsed) => last_caps.insert(parsed).flags(),
                Err(_) => return RequestMeta::Malformed("invalid clientCapabilities"),
            },
        },
        Ok(None) => {
            return RequestMeta::Malformed(
                "_meta io.modelcontextprotocol/clientCapabilities is required",
            );
        }
        Err(_) => return RequestMeta::Malformed("duplicate clientCapabilities"),
    };
    match get(INFO) {
        Ok(Some(i)) if !i.is_object() => {
            return RequestMeta::Malformed("clientInfo must be an object");
        }
        Ok(Some(i)) if !crate::mcp::is_implementation(i) => {
            return RequestMeta::Malformed("clientInfo needs a string name and version");
        }
        Ok(_) => {}
        Err(_) => return RequestMeta::Malformed("duplicate clientInfo"),
    }
    let log_level = match get(LEVEL) {
        Ok(None) => None,
        Ok(Some(l)) => match l.as_str().and_then(|s| LogLevel::parse(&s.to_str())) {
            Some(level) => Some(level),
            None => return RequestMeta::Malformed("invalid logLevel"),
        },
        Err(_) => return RequestMeta::Malformed("duplicate logLevel"),
    };
    RequestMeta::Valid(
        ModernContext {
            version,
            client_caps: caps,
            log_level,
        },
        match get(TOKEN) {
            Ok(None) => Ok(None),
            Ok(Some(t)) => t.as_id().map(|id| Some(OwnedId::from(id))).ok_or(()),
            Err(_) => Err(()),
        },
    )
}

/// Our capabilities as the 2026-07-28 era writes them (`server/discover`, a request's
/// `clientCapabilities`): without the legacy `tasks` member, 2025-11-25's experimental tasks,
/// which that era's schema does not have and SEP-2663 forbids advertising "under any protocol
/// version that includes this extension" (a dual-era peer declares
/// `io.modelcontextprotocol/tasks` under `extensions` there). Borrowed when there is none.
fn modern_capabilities(caps: RawJson<'_>) -> std::borrow::Cow<'_, str> {
    if !caps.members().any(|(k, _)| k.eq_str("tasks")) {
        return std::borrow::Cow::Borrowed(caps.get());
    }
    let mut out = Vec::with_capacity(caps.get().len());
    out.push(b'{');
    for (k, v) in caps.members().filter(|(k, _)| !k.eq_str("tasks")) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(k.raw().as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(v.get().as_bytes());
    }
    out.push(b'}');
    std::borrow::Cow::Owned(String::from_utf8(out).unwrap_or_else(|_| "{}".to_owned()))
}

/// The stateless-era versions we serve, newest first, as a JSON array (for `server/discover`
/// and for a -32022's `supported`).
fn write_modern_versions(out: &mut Vec<u8>, config: &Config) {
    let mut versions: Vec<ProtocolVersion> = config
        .versions
        .iter()
        .copied()
        .filter(|v| v.era() == Era::Modern)
        .collect();
    versions.sort_unstable_by(|a, b| b.cmp(a));
    versions.dedup();
    out.push(b'[');
    for (i, v) in versions.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(out, v.as_str());
    }
    out.push(b']');
}

/// `{"supported":[…],"requested":"…"}` for a -32022. Every -32022 here refuses a request of
/// the stateless era, so `supported` lists the stateless-era versions we serve: the ones the
/// client can put in `_meta` instead (a handshake-era version there would be refused too).
pub(crate) fn unsupported_data(config: &Config, requested: &str) -> String {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"supported\":");
    write_modern_versions(&mut out, config);
    out.extend_from_slice(b",\"requested\":");
    write_json_string(&mut out, requested);
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// Why a refused `initialize` or `server/discover` ends the connection: a -32022 keeps the
/// versions the server named, anything else its code.
pub(super) fn refusal(e: &jsonrpc::ErrorObject<'_>) -> CloseReason {
    if e.code == mcp::UNSUPPORTED_PROTOCOL_VERSION {
        // An array of strings (the schema's `string[]`), as the peer wrote it, within the
        // bound of a refusal's message: anything else, or more, is `[]` (a closed connection
        // holds no megabytes the peer chose).
        let supported = e
            .data
            .and_then(|d| d.unique("supported"))
            .filter(|s| s.get().len() <= REFUSAL_MESSAGE_MAX)
            .filter(|s| {
                s.items().all(|v| v.as_str().is_some()) && s.get().trim_start().starts_with('[')
            })
            .map_or_else(|| "[]".to_owned(), |s| s.get().to_owned());
        return CloseReason::VersionRefused { supported };
    }
    let mut message = e.message.to_str().into_owned();
    if message.len() > REFUSAL_MESSAGE_MAX {
        let mut end = REFUSAL_MESSAGE_MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    CloseReason::InitializeRejected {
        code: e.code,
        message,
    }
}

/// The capability an input request needs from the client.
fn input_request_cap(method: &str) -> Option<Caps> {
    match method {
        "elicitation/create" => Some(Caps::ELICITATION),
        "sampling/createMessage" => Some(Caps::SAMPLING),
        "roots/list" => Some(Caps::ROOTS),
        _ => None,
    }
}

/// What the input request `request` (`{"method":…,"params":…}`) needs that `declared` lacks,
/// if anything: "Servers MUST NOT send an inputRequests that the client has not declared
/// support for in its capabilities". `Err` for no input request of Multi Round-Trip Requests:
/// not an object, `method` or `params` absent where required or written twice (a receiver
/// whose parser keeps the last one would read what was not checked), params that are not an
/// object (`params` is required for `elicitation/create` and `sampling/createMessage`,
/// optional for `roots/list`), or params its method cannot take.
pub(crate) fn input_request_need(request: RawJson<'_>, declared: Caps) -> Result<Option<Caps>, ()> {
    if !request.is_object() {
        return Err(());
    }
    let found = request.get_each(["method", "params"]);
    let method = (found.get(0).map_err(|_| ())?)
        .and_then(|m| m.as_str())
        .map(|m| m.to_str().into_owned())
        .unwrap_or_default();
    let cap = input_request_cap(&method).ok_or(())?;
    let params = found.get(1).map_err(|_| ())?;
    if params.is_some_and(|p| !p.is_object()) || (params.is_none() && cap != Caps::ROOTS) {
        return Err(());
    }
    if !declared.contains(cap) {
        return Ok(Some(cap));
    }
    match mcp::sub_capabilities_with(&method, params, || Some(false)).check(declared, false) {
        Ok(()) => Ok(None),
        Err(mcp::SubCapability::Needs(cap)) => Ok(Some(cap)),
        Err(mcp::SubCapability::Malformed) => Err(()),
    }
}

/// Whether the resource `uri` is `subscribed` or one of its sub-resources ("This might be a
/// sub-resource of the one that the client actually subscribed to"): `subscribed` followed by
/// a path, query or fragment (`file:///project` covers `file:///project/a.json`, not
/// `file:///projects`), or anything under a `subscribed` that ends with `/`.
fn is_same_or_under(uri: &str, subscribed: &str) -> bool {
    match uri.strip_prefix(subscribed) {
        Some("") => true,
        Some(rest) => subscribed.ends_with('/') || rest.starts_with(['/', '?', '#']),
        None => false,
    }
}

/// Whether every input request of the `inputRequests` member of `params` (if any) goes to a
/// client that declared `declared`.
fn input_requests_declared(params: Option<RawJson<'_>>, declared: Caps) -> bool {
    let Some(requests) = params.and_then(|p| p.unique("inputRequests")) else {
        return true;
    };
    requests
        .members()
        .all(|(_, request)| matches!(input_request_need(request, declared), Ok(None)))
}

impl Core {
    pub(super) fn serves_modern(&self) -> bool {
        self.role == Role::Server && self.config.speaks(Era::Modern)
    }

    pub(super) fn serves_legacy(&self) -> bool {
        self.config.speaks(Era::Legacy)
    }

    /// Fixes the connection's era (once).
    pub(super) fn lock_era(&mut self, era: Era) {
        self.lock_era_with(era, true);
    }

    /// [`lock_era`](Self::lock_era) for a connection being created: it has had no handshake
    /// and has nothing to give back, so the buffers it starts with (see
    /// [`Core::adopt_buffers`]) stay for its requests.
    pub(super) fn lock_era_at_creation(&mut self, era: Era) {
        self.lock_era_with(era, false);
    }

    fn lock_era_with(&mut self, era: Era, release: bool) {
        if self.lifecycle.era.is_some() {
            return;
        }
        self.lifecycle.era = Some(era);
        if era == Era::Modern && self.role == Role::Server {
            let version = self
                .config
                .latest_modern()
                .unwrap_or(ProtocolVersion::V2026_07_28);
            self.lifecycle.version = Some(version);
            self.lifecycle.stateless_started();
            self.events.push(Stored::Ready(version));
            if release {
                self.release_handshake_memory();
            }
        }
    }

    /// Server: a request that belongs to the stateless era, or `initialize` / a request without
    /// metadata after the stateless era began. Returns `false` when the request is not the
    /// stateless layer's business (legacy processing goes on).
    pub(super) fn route_stateless(
        &mut self,
        stream: StreamId,
        frame: &str,
        r: &jsonrpc::Request<'_>,
        batch: Option<u32>,
        method: &str,
        meta: Option<MetaView<'_>>,
    ) -> bool {
        if !self.serves_modern() || self.lifecycle.era == Some(Era::Legacy) {
            return false;
        }
        let meta = meta.unwrap_or_else(|| view_meta(r.params));
        // `initialize` with the stateless `_meta` on it is a stateless request for a method
        // 2026-07-28 removed: -32601 (404 over HTTP), as the official conformance suite's
        // `server-stateless` scenario requires.
        let modern = method == "server/discover" || has_modern_meta(&meta);
        if !modern {
            if self.lifecycle.era.is_none() && self.serves_legacy() {
                return false;
            }
            // Stateless era (or a modern-only server): there is no handshake.
            let (kind, code, message) = if method == "initialize" {
                (
                    ViolationKind::WrongEra,
                    mcp::UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version: this server speaks the stateless protocol",
                )
            } else {
                (
                    ViolationKind::InvalidParams,
                    jsonrpc::INVALID_PARAMS,
                    "_meta io.modelcontextprotocol/protocolVersion is required",
                )
            };
            let requested = r
                .params
                .and_then(|p| p.unique_str("protocolVersion"))
                .map(|v| v.to_str().into_owned())
                .unwrap_or_default();
            let data = unsupported_data(&self.config, &requested);
            let data = (code == mcp::UNSUPPORTED_PROTOCOL_VERSION).then_some(data.as_str());
            let mut refusal = Refusal::new(kind, code, message);
            refusal.data = data.map(RawJson::validated);
            self.reject(frame, (stream, batch), r, refusal);
            return true;
        }
        self.on_stateless_request(stream, frame, r, batch, method, meta);
        true
    }

    fn on_stateless_request(
        &mut self,
        stream: StreamId,
        frame: &str,
        r: &jsonrpc::Request<'_>,
        batch: Option<u32>,
        method: &str,
        meta: MetaView<'_>,
    ) {
        let (ctx, token) = match read_meta(&self.config, &mut self.stateless.last_client_caps, meta)
        {
            RequestMeta::Valid(ctx, token) => (ctx, token),
            RequestMeta::Malformed(message) => {
                let refusal = Refusal::new(
                    ViolationKind::InvalidParams,
                    jsonrpc::INVALID_PARAMS,
                    message,
                );
                return self.reject(frame, (stream, batch), r, refusal);
            }
            RequestMeta::Unsupported(requested) => {
                let data = unsupported_data(&self.config, &requested);
                let mut refusal = Refusal::new(
                    ViolationKind::UnsupportedVersion,
                    mcp::UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version",
                );
                refusal.data = Some(RawJson::validated(&data));
                return self.reject(frame, (stream, batch), r, refusal);
            }
        };
        self.lock_era(Era::Modern);
        if self.incoming_request_refused(method, ctx.version) {
            let refusal = Refusal::new(
                ViolationKind::MethodNotAvailable,
                jsonrpc::METHOD_NOT_FOUND,
                "Method not found",
            );
            return self.reject(frame, (stream, batch), r, refusal);
        }
        if matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel")
            && !ctx.client_caps.contains(Caps::TASKS_EXTENSION)
        {
            return self.reject(frame, (stream, batch), r, tasks_extension_required());
        }
        match method {
            "server/discover" => {
                let result = self.discover_result();
                let answer = Answer::Result(RawJson::validated(&result));
                self.emit_answer(batch, stream, Some(r.id), answer, true);
            }
            "subscriptions/listen" => {
                // Only a server with the extension asks for it (SEP-2663); one without it
                // omits what it does not support, as for any notification type. An empty
                // list asks for nothing.
                let wants_tasks = r
                    .params
                    .and_then(|p| p.unique("notifications"))
                    .and_then(|f| f.unique("taskIds"))
                    .is_some_and(|ids| array_items(ids.get()).next().is_some());
                if wants_tasks
                    && self
                        .config
                        .capabilities
                        .flags()
                        .contains(Caps::TASKS_EXTENSION)
                    && !ctx.client_caps.contains(Caps::TASKS_EXTENSION)
                {
                    return self.reject(frame, (stream, batch), r, tasks_extension_required());
                }
                self.open_listen(stream, frame, r, batch)
            }
            _ => {
                let eligible = matches!(method, "tools/call" | "prompts/get" | "resources/read");
                let modern = Some((ctx, token));
                let index = &ParamsIndex::EMPTY; // the token was read with `_meta`
                self.accept_request(stream, frame, r, batch, modern, eligible, None, index);
            }
        }
    }

    /// The `server/discover` result, from configuration.
    fn discover_result(&self) -> String {
        let mut out = Vec::new();
        out.extend_from_slice(b"{\"resultType\":\"complete\",\"supportedVersions\":");
        write_modern_versions(&mut out, &self.config);
        out.extend_from_slice(b",\"capabilities\":");
        out.extend_from_slice(modern_capabilities(self.config.capabilities.raw()).as_bytes());
        if let Some(instructions) = &self.config.instructions {
            out.extend_from_slice(b",\"instructions\":");
            write_json_string(&mut out, instructions);
        }
        out.extend_from_slice(b",\"ttlMs\":");
        out.extend_from_slice(wire_ttl(&self.config).to_string().as_bytes());
        out.extend_from_slice(b",\"cacheScope\":");
        write_json_string(&mut out, self.config.discover_cache_scope.as_str());
        out.extend_from_slice(b",\"_meta\":{");
        write_json_string(&mut out, META_SERVER_INFO);
        out.push(b':');
        out.extend_from_slice(self.config.info.as_bytes());
        out.extend_from_slice(b"}}");
        String::from_utf8(out).unwrap_or_default()
    }

    /// `subscriptions/listen`: acknowledge what we can honour and keep the stream open.
    fn open_listen(
        &mut self,
        stream: StreamId,
        frame: &str,
        r: &jsonrpc::Request<'_>,
        batch: Option<u32>,
    ) {
        let filter = r
            .params
            .and_then(|p| p.unique("notifications"))
            .filter(|f| f.is_object());
        let Some(filter) = filter else {
            let refusal = Refusal::new(
                ViolationKind::InvalidParams,
                jsonrpc::INVALID_PARAMS,
                "notifications filter object is required",
            );
            return self.reject(frame, (stream, batch), r, refusal);
        };
        let ours = self.config.capabilities.flags();
        let flag = |key: &str, cap: Caps| {
            ours.contains(cap) && filter.unique(key).is_some_and(|v| v.get().trim() == "true")
        };
        let mut granted = ListenFilter {
            tools: flag("toolsListChanged", Caps::TOOLS_LIST_CHANGED),
            prompts: flag("promptsListChanged", Caps::PROMPTS_LIST_CHANGED),
            resources: flag("resourcesListChanged", Caps::RESOURCES_LIST_CHANGED),
            resource_uris: Vec::new(),
            task_ids: Vec::new(),
            pending: false,
            seen: false,
        };
        // Task status notifications (SEP-2663): every id asked, bounded. The engine cannot
        // tell which ids the caller may follow: under `review_listens` the application
        // decides (`grant_listen`); without it an unknown id simply never gets a notification.
        // (A request without the extension was refused before.)
        if ours.contains(Caps::TASKS_EXTENSION)
            && let Some(ids) = filter.unique("taskIds")
        {
            keep_listen_strings(ids.get(), &mut granted.task_ids);
        }
        if ours.contains(Caps::RESOURCES_SUBSCRIBE)
            && let Some(uris) = filter.unique("resourceSubscriptions")
        {
            // Bounded like the task ids: each URI kept is scanned on every resource update.
            keep_listen_strings(uris.get(), &mut granted.resource_uris);
        }
        // (Not one that comes during a graceful close: it is ended at once below, and the
        // application would be asked to grant a listen already answered.)
        let closing = self.lifecycle.closing_deadline().is_some();
        let review = self.config.policy.review_listens && !closing;
        granted.pending = review;
        granted.seen = review;
        let meta = view_meta(r.params);
        let ctx = match read_meta(&self.config, &mut self.stateless.last_client_caps, meta) {
            RequestMeta::Valid(ctx, token) => Some((ctx, token)),
            _ => None,
        };
        // Without a valid `_meta` (so no context) the params are walked for the token.
        let index = &ParamsIndex::EMPTY;
        let key = OwnedId::from(r.id);
        let before = self.dispatch.inbound.contains_key(&key);
        self.accept_request(stream, frame, r, batch, ctx, false, Some(granted), index);
        // Acknowledged once established, never before a refusal (the inbound limit, a bad
        // progress token): "sent ... to acknowledge that a subscriptions/listen subscription
        // has been established". Nothing else has gone out on the stream yet.
        let established = !before && self.dispatch.inbound.contains_key(&key);
        if established && !review {
            self.acknowledge_listen(&key);
        }
        // During a graceful close it ends at once, with its result, as the close ended those
        // open when it began: kept, it would hold the close for its whole grace.
        if established && closing {
            let _ = self.end_listen(key.as_id());
        }
    }

    /// Sends `notifications/subscriptions/acknowledged` for the listen `key`: the granted
    /// subset, tagged with the stream's id.
    fn acknowledge_listen(&mut self, key: &OwnedId) {
        let Some(entry) = self.dispatch.inbound.get(key) else {
            return;
        };
        let (Some(granted), stream) = (entry.listen.as_deref(), entry.stream) else {
            return;
        };
        let mut ack = Vec::new();
        ack.extend_from_slice(b"{\"_meta\":{");
        write_json_string(&mut ack, META_SUBSCRIPTION_ID);
        ack.push(b':');
        write_id(&mut ack, key.as_id());
        ack.extend_from_slice(b"},\"notifications\":{");
        let mut first = true;
        for (on, key) in [
            (granted.tools, "toolsListChanged"),
            (granted.prompts, "promptsListChanged"),
            (granted.resources, "resourcesListChanged"),
        ] {
            if on {
                if !first {
                    ack.push(b',');
                }
                first = false;
                write_json_string(&mut ack, key);
                ack.extend_from_slice(b":true");
            }
        }
        for (list, key) in [
            (&granted.resource_uris, "resourceSubscriptions"),
            (&granted.task_ids, "taskIds"),
        ] {
            if list.is_empty() {
                continue;
            }
            if !first {
                ack.push(b',');
            }
            first = false;
            write_json_string(&mut ack, key);
            ack.extend_from_slice(b":[");
            for (i, item) in list.iter().enumerate() {
                if i > 0 {
                    ack.push(b',');
                }
                write_json_string(&mut ack, item);
            }
            ack.push(b']');
        }
        ack.extend_from_slice(b"}}");
        if let Ok(text) = std::str::from_utf8(&ack) {
            let params = RawJson::validated(text);
            self.emit_auto(stream, |out| {
                jsonrpc::encode_notification(
                    out,
                    "notifications/subscriptions/acknowledged",
                    Some(params),
                )
            });
        }
    }

    /// Server, stateless era: the filter of the listen `id` while it waits for its grant.
    pub(super) fn pending_listen(&self, id: Id<'_>) -> Option<&ListenFilter> {
        let entry = self.dispatch.inbound.get(&OwnedId::from(id))?;
        entry.listen.as_deref().filter(|l| l.pending)
    }

    /// Server, stateless era: grants the listen `id` that waits for the application
    /// ([`Policy::review_listens`](super::Policy::review_listens)), keeping the items `keep`
    /// allows, and acknowledges it.
    pub(super) fn grant_listen(
        &mut self,
        id: Id<'_>,
        keep: &mut dyn FnMut(ListenItem<'_>) -> bool,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let key = OwnedId::from(id);
        let Some(entry) = self.dispatch.inbound.get(&key) else {
            if self.dispatch.peer_cancelled.contains(&key) {
                return Ok(());
            }
            return Err(Error::UnknownRequest);
        };
        if !entry.listen.as_ref().is_some_and(|l| l.pending) {
            return Err(Error::UnknownRequest);
        }
        if !self.output_has_room() {
            return Err(Error::OutputFull);
        }
        let Some(listen) = self
            .dispatch
            .inbound
            .get_mut(&key)
            .and_then(|e| e.listen.as_deref_mut())
        else {
            return Err(Error::UnknownRequest);
        };
        let decisions: Vec<bool> = listen.items().map(&mut *keep).collect();
        listen.retain(&decisions);
        listen.pending = false;
        // (Under the request's own id, as it came: see `respond_as`.)
        if let Some((stored, _)) = self.dispatch.inbound.get_key_value(&key) {
            let stored = stored.clone();
            self.acknowledge_listen(&stored);
        }
        Ok(())
    }

    /// Server, stateless era: the ids of the `subscriptions/listen` requests in flight.
    pub(super) fn listen_subscriptions(&self) -> Vec<OwnedId> {
        let mut ids: Vec<OwnedId> = self
            .dispatch
            .inbound
            .iter()
            .filter(|(_, entry)| entry.listen.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort_by_key(|id| id.to_string());
        ids
    }

    /// Server, stateless era: ends a `subscriptions/listen` subscription gracefully by
    /// answering its request with the listen result, which carries the subscription id in
    /// `_meta` (the request's id). Over HTTP that answer ends the listen request's stream.
    pub(super) fn end_listen(&mut self, id: Id<'_>) -> Result<(), Error> {
        let listening = self
            .dispatch
            .inbound
            .get(&OwnedId::from(id))
            .is_some_and(|entry| entry.listen.is_some());
        if !listening {
            return Err(Error::UnknownRequest);
        }
        // Still waiting for its grant: acknowledged first, with nothing granted, since "The
        // server MUST send notifications/subscriptions/acknowledged as the first message".
        if self.pending_listen(id).is_some() {
            self.grant_listen(id, &mut |_| false)?;
        }
        // (The request's own id, as it came: see `respond_as`.)
        let stored = (self.dispatch.inbound)
            .get_key_value(&OwnedId::from(id))
            .map(|(k, _)| k.clone());
        let id = stored.as_ref().map_or(id, OwnedId::as_id);
        let mut result = Vec::with_capacity(64);
        result.extend_from_slice(b"{\"_meta\":{\"");
        result.extend_from_slice(mcp::META_SUBSCRIPTION_ID.as_bytes());
        result.extend_from_slice(b"\":");
        match id {
            Id::Int(n) => result.extend_from_slice(n.to_string().as_bytes()),
            Id::Str(s) => {
                result.push(b'"');
                result.extend_from_slice(s.raw().as_bytes());
                result.push(b'"');
            }
        }
        result.extend_from_slice(b"}}");
        let text = String::from_utf8(result).map_err(|_| Error::InvalidParams)?;
        self.respond(id, Answer::Result(RawJson::validated(&text)))
    }

    /// Server, stateless era: sends a list-changed or resource-updated notification to every
    /// listener that opted in. Returns how many streams it went to.
    pub(super) fn notify_listeners(
        &mut self,
        method: &str,
        params: Option<RawJson<'_>>,
    ) -> Result<usize, Error> {
        let key = if method == "notifications/tasks" {
            "taskId"
        } else {
            "uri"
        };
        let uri = params
            .and_then(|p| p.unique_str(key))
            .map(|u| u.to_str().into_owned());
        let targets: Vec<(OwnedId, StreamId)> = self
            .dispatch
            .inbound
            .iter()
            .filter_map(|(id, entry)| {
                // A listen the application has not granted yet hears nothing.
                let listen = entry.listen.as_ref().filter(|l| !l.pending)?;
                let wanted = match method {
                    "notifications/tools/list_changed" => listen.tools,
                    "notifications/prompts/list_changed" => listen.prompts,
                    "notifications/resources/list_changed" => listen.resources,
                    "notifications/resources/updated" => uri.as_ref().is_some_and(|u| {
                        listen.resource_uris.iter().any(|l| is_same_or_under(u, l))
                    }),
                    // The full DetailedTask, input requests included: only to a listener that
                    // declared what they need, as `tasks/get` answers only such a requestor.
                    "notifications/tasks" => {
                        uri.as_ref()
                            .is_some_and(|t| listen.task_ids.iter().any(|l| l == t))
                            && input_requests_declared(
                                params,
                                entry.modern.map_or(Caps::EMPTY, |m| m.client_caps),
                            )
                    }
                    _ => false,
                };
                wanted.then(|| (id.clone(), entry.stream))
            })
            .collect();
        for (id, stream) in &targets {
            let mut tag = Vec::new();
            write_id(&mut tag, id.as_id());
            let mut buf = std::mem::take(&mut self.out.scratch);
            buf.clear();
            let edited = json_edit::set_meta(&mut buf, params, &[(META_SUBSCRIPTION_ID, &tag)]);
            if edited.is_ok()
                && let Ok(text) = std::str::from_utf8(&buf)
            {
                let out = self.out.output.begin();
                jsonrpc::encode_notification(out, method, Some(RawJson::validated(text)));
                self.out.output.end_frame(*stream);
            }
            self.out.scratch = buf;
            if edited.is_err() {
                return Err(Error::InvalidParams);
            }
        }
        Ok(targets.len())
    }

    /// Writes a stateless-era result: `resultType` added when missing, our `serverInfo` in
    /// `_meta` unless present, and for cacheable complete results (lists, reads) the
    /// configured `ttlMs` and `cacheScope` unless the application set its own ("Interim
    /// results with resultType: input_required ... carry no caching hints"). A `resultType`
    /// other than `kind`'s or `"complete"` is refused.
    pub(super) fn stamp_result(
        &self,
        out: &mut Vec<u8>,
        result: RawJson<'_>,
        cacheable: bool,
        kind: ResultKind,
    ) -> Result<(), EditError> {
        if !result.is_object() {
            return Err(EditError::NotAnObject);
        }
        // One pass over the result for the members looked at below.
        let found = result.get_each(["resultType", "ttlMs", "cacheScope", "_meta"]);
        let has = |i: usize| found.get(i).map(|v| v.is_some());
        // The application's own cache hints go out as given, so they must be valid ("Servers
        // MUST provide a ttlMs value that is >= 0", an integer in the schema's cacheable
        // results; a scope is one of the two). (A task's `ttlMs`, in a `tasks/get` result,
        // may be null: no limit.)
        let ttl_ok = |t: RawJson<'_>| {
            if cacheable {
                t.as_i64().is_some_and(|n| n >= 0)
            } else {
                t.get() == "null" || t.as_f64().is_some_and(|n| n >= 0.0)
            }
        };
        let scope_ok = |c: RawJson<'_>| {
            c.as_str()
                .is_some_and(|c| matches!(&*c.to_str(), "public" | "private"))
        };
        if found.get(1).ok().flatten().is_some_and(|t| !ttl_ok(t))
            || found.get(2).ok().flatten().is_some_and(|c| !scope_ok(c))
        {
            return Err(EditError::NotAnObject);
        }
        let scope: &[u8] = match self.config.discover_cache_scope {
            CacheScope::Public => b"\"public\"",
            CacheScope::Private => b"\"private\"",
        };
        let mut add: [(&str, &[u8]); 3] = [("", b""); 3];
        let mut added = 0;
        let mut push = |member| {
            add[added] = member;
            added += 1;
        };
        // A task handle goes out through `respond_task` only, which checks that the request
        // may get one (SEP-2663: never to a client without the extension); "input required"
        // through `respond_input_required` only, which checks the method, that there is
        // something to retry with, and the client's capabilities (mrtr.mdx's MUSTs).
        let complete = match found.get(0).map_err(|_| EditError::Exists)? {
            None => {
                push(("resultType", b"\"complete\""));
                true
            }
            Some(t) => match t.as_str().map(|t| t.to_str()) {
                Some(t) if t == "complete" => true,
                Some(t) if t == kind.result_type() => false,
                _ => return Err(EditError::NotAnObject),
            },
        };
        let cacheable = cacheable && complete;
        // Formatted only for the results that carry it.
        let ttl = cacheable.then(|| json_edit::IntText::new(wire_ttl(&self.config)));
        if let Some(ttl) = &ttl
            && !has(1).map_err(|_| EditError::Exists)?
        {
            push(("ttlMs", ttl.as_bytes()));
        }
        if cacheable && !has(2).map_err(|_| EditError::Exists)? {
            push(("cacheScope", scope));
        }
        let add = &add[..added];
        let meta = found.get(3).map_err(|_| EditError::Exists)?;
        let has_info = match meta {
            Some(m) if !m.is_object() => return Err(EditError::NotAnObject),
            Some(m) => m
                .get_unique(META_SERVER_INFO)
                .map_err(|_| EditError::Exists)?
                .is_some(),
            None => false,
        };
        if has_info {
            // Nothing of `add` is present (checked above): `replace` skips that check.
            json_edit::set_members(out, Some(result), add, true)
        } else {
            json_edit::set_members_and_meta(
                out,
                result,
                add,
                &[(META_SERVER_INFO, self.config.info.as_bytes())],
                meta,
            );
            Ok(())
        }
    }

    /// Server, tasks extension: answers a `tools/call` with a `CreateTaskResult`.
    pub(super) fn respond_task(&mut self, id: Id<'_>, task: RawJson<'_>) -> Result<(), Error> {
        let Some(entry) = self.dispatch.inbound.get(&OwnedId::from(id)) else {
            return self.respond(id, Answer::Result(task));
        };
        let Some(ctx) = entry.modern else {
            // 2025-11-25 tasks: `{"task":{…}}` answers a request that asked for a task.
            if self.effective_version() != crate::mcp::ProtocolVersion::V2025_11_25 {
                return Err(Error::NotInVersion);
            }
            if !entry.task_eligible {
                return Err(Error::NotEligible);
            }
            let task_id = task.unique("task").and_then(|t| t.unique_str("taskId"));
            let Some(task_id) = task_id else {
                return Err(Error::InvalidParams);
            };
            // The request's progress token stays with the task (correlation.rs rule 8).
            let kept = entry.progress_token.clone().map(|token| TaskToken {
                task: task_id.to_str().into(),
                request: OwnedId::from(id),
                ours: false,
                token,
                last_progress: entry.last_progress,
                ends: Vec::new(),
            });
            self.respond(id, Answer::Result(task))?;
            if let Some(kept) = kept {
                let cap = self.config.limits.max_inbound_in_flight;
                self.task_tokens.add(kept, cap);
            }
            return Ok(());
        };
        if !entry.task_eligible {
            return Err(Error::NotEligible);
        }
        // Both sides: a server that did not declare the extension refuses the tasks methods
        // that would poll the task.
        if !self.config.capabilities.has(Caps::TASKS_EXTENSION)
            || !ctx.client_caps.contains(Caps::TASKS_EXTENSION)
        {
            return Err(Error::NotNegotiated(Caps::TASKS_EXTENSION));
        }
        let is_task = task.is_object()
            && task
                .unique_str("resultType")
                .is_some_and(|t| t.to_str() == "task")
            && task.unique("taskId").is_some_and(|t| t.as_str().is_some());
        if !is_task {
            return Err(Error::InvalidParams);
        }
        self.respond_as(id, Answer::Result(task), ResultKind::Task)
    }

    /// Server: answers a stateless request with "input required".
    pub(super) fn respond_input_required(
        &mut self,
        id: Id<'_>,
        input_requests: Option<RawJson<'_>>,
        request_state: Option<&str>,
    ) -> Result<(), Error> {
        if self.lifecycle.is_closed() {
            return Err(Error::Closed);
        }
        let key = OwnedId::from(id);
        let Some(entry) = self.dispatch.inbound.get(&key) else {
            // As for any answer: one to a request the peer cancelled is taken, and not sent.
            if self.dispatch.peer_cancelled.contains(&key) {
                self.stats.suppressed_responses += 1;
                return Ok(());
            }
            return Err(Error::UnknownRequest);
        };
        let Some(ctx) = entry.modern else {
            return Err(Error::NotInVersion);
        };
        if !entry.input_eligible {
            return Err(Error::NotEligible);
        }
        if input_requests.is_none() && request_state.is_none() {
            return Err(Error::InvalidParams);
        }
        if let Some(requests) = input_requests {
            if !requests.is_object() {
                return Err(Error::InvalidParams);
            }
            // "inputRequests keys ... MUST be unique within the scope of the request".
            let mut keys = std::collections::HashSet::new();
            for (key, request) in requests.members() {
                if !keys.insert(key.to_str()) {
                    return Err(Error::InvalidParams);
                }
                match input_request_need(request, ctx.client_caps) {
                    Ok(None) => {}
                    Ok(Some(cap)) => return Err(Error::NotNegotiated(cap)),
                    Err(()) => return Err(Error::InvalidParams),
                }
            }
        }
        let mut result = Vec::new();
        result.extend_from_slice(b"{\"resultType\":\"input_required\"");
        if let Some(requests) = input_requests {
            result.extend_from_slice(b",\"inputRequests\":");
            result.extend_from_slice(requests.get().as_bytes());
        }
        if let Some(state) = request_state {
            result.extend_from_slice(b",\"requestState\":");
            write_json_string(&mut result, state);
        }
        result.push(b'}');
        let text = String::from_utf8(result).map_err(|_| Error::InvalidParams)?;
        self.respond_as(
            id,
            Answer::Result(RawJson::validated(&text)),
            ResultKind::InputRequired,
        )
    }

    // ---- client ----

    /// Sends the `server/discover` probe.
    pub(super) fn send_discover(
        &mut self,
        now: Timestamp,
        version: ProtocolVersion,
        retried: bool,
    ) {
        let mut params = Vec::new();
        params.extend_from_slice(b"{\"_meta\":{");
        self.write_client_meta(&mut params, version);
        params.extend_from_slice(b"}}");
        let timeout = if self.config.client_start().is_none() {
            self.config.discover_timeout
        } else {
            self.config.request_timeout
        };
        // The one re-probe a -32022 allows is spent, whichever answer led to it (a probe's, or
        // the fallback `initialize`'s): another -32022 ends the handshake.
        self.stateless.reprobed |= retried;
        let kind = PendingKind::Discover { retried };
        self.send_own_request(now, "server/discover", &params, kind, timeout);
    }

    /// The three `_meta` members every stateless request carries.
    fn write_client_meta(&self, out: &mut Vec<u8>, version: ProtocolVersion) {
        write_json_string(out, META_PROTOCOL_VERSION);
        out.push(b':');
        write_json_string(out, version.as_str());
        out.push(b',');
        write_json_string(out, META_CLIENT_CAPABILITIES);
        out.push(b':');
        out.extend_from_slice(modern_capabilities(self.config.capabilities.raw()).as_bytes());
        out.push(b',');
        write_json_string(out, META_CLIENT_INFO);
        out.push(b':');
        out.extend_from_slice(self.config.info.as_bytes());
    }

    /// Writes params for a stateless request: the application's params with our `_meta` (and
    /// the progress token) added.
    pub(super) fn stateless_params(
        &self,
        out: &mut Vec<u8>,
        params: Option<RawJson<'_>>,
        progress_token: Option<i64>,
    ) -> Result<(), Error> {
        let version = self
            .lifecycle
            .version
            .unwrap_or(ProtocolVersion::V2026_07_28);
        let caps = modern_capabilities(self.config.capabilities.raw());
        let token = progress_token.map(json_edit::IntText::new);
        let add: [(&str, &[u8]); 4] = [
            (META_PROTOCOL_VERSION, version_json(version)),
            (META_CLIENT_CAPABILITIES, caps.as_bytes()),
            (META_CLIENT_INFO, self.config.info.as_bytes()),
            (
                "progressToken",
                token.as_ref().map_or(&[], |t| t.as_bytes()),
            ),
        ];
        let add = if token.is_some() { &add[..] } else { &add[..3] };
        out.clear();
        json_edit::set_meta(out, params, add).map_err(|_| Error::InvalidParams)
    }

    /// Client: the answer to the discover probe.
    pub(super) fn on_discover_result(
        &mut self,
        now: Timestamp,
        retried: bool,
        outcome: Result<RawJson<'_>, jsonrpc::ErrorObject<'_>>,
    ) {
        let auto = self.config.client_start().is_none();
        match outcome {
            // "A resultType of any value unrecognized by the client MUST be considered
            // invalid": a stateless server's broken answer, not a handshake-era one.
            // (Written twice, it is unreadable, so not recognized either.)
            Ok(result)
                if result.get_unique("resultType").is_err()
                    || result
                        .unique("resultType")
                        .is_some_and(|t| !t.as_str().is_some_and(|t| t.eq_str("complete"))) =>
            {
                self.finish(CloseReason::InvalidInitializeResult)
            }
            Ok(result) => {
                let supported = result.unique("supportedVersions");
                let shared =
                    supported.map(|list| self.versions_we_speak(Some(list), Era::Modern).max());
                let caps = result
                    .unique("capabilities")
                    .and_then(|c| Capabilities::from_raw(c).ok());
                match (shared.flatten(), caps) {
                    (Some(version), Some(caps)) => {
                        self.lifecycle.version = Some(version);
                        self.lifecycle.peer_caps = Some(caps);
                        self.lifecycle.peer_info = result
                            .unique("_meta")
                            .and_then(|m| m.unique(META_SERVER_INFO))
                            .filter(|i| i.is_object())
                            .map(|i| i.get().to_owned());
                        self.lifecycle.peer_instructions = result
                            .unique_str("instructions")
                            .map(|s| s.to_str().into_owned());
                        self.lifecycle.era = Some(Era::Modern);
                        self.lifecycle.handshake_done();
                        self.events.push(Stored::Ready(version));
                        self.release_handshake_memory();
                    }
                    // A discover result listing no stateless version we share but a
                    // handshake-era one is an advertisement of that era. Listing neither,
                    // the server is stateless and shares no version with us: the spec's
                    // "select a mutually supported version" has nothing to select, and
                    // falling back to `initialize` would only fail later.
                    (None, Some(_)) if auto && self.names_a_legacy_version(supported) => {
                        self.fall_back(now)
                    }
                    (None, Some(_)) => self.finish(CloseReason::UnsupportedVersion(
                        supported.map(|l| l.get().to_owned()).unwrap_or_default(),
                    )),
                    (_, None) => {
                        if auto {
                            self.fall_back(now)
                        } else {
                            self.finish(CloseReason::InvalidInitializeResult)
                        }
                    }
                }
            }
            Err(e) => {
                // -32022 naming a stateless version we share: probe once more at it.
                if !retried && let Some(version) = self.modern_version_named(&e) {
                    return self.send_discover(now, version, true);
                }
                // -32022 is a stateless server's answer: "Do not fall back to `initialize`",
                // unless the versions it names include a handshake-era one we speak. So are
                // -32020 (header mismatch) and -32021 (missing capability): "a recognized
                // modern JSON-RPC error ... identifies a modern server: the client retries
                // with a supported version rather than falling back", and there is nothing
                // to retry with. Any other error is a handshake-era server's.
                let stateless_refusal = match e.code {
                    mcp::UNSUPPORTED_PROTOCOL_VERSION => {
                        !self.names_a_legacy_version(e.data.and_then(|d| d.unique("supported")))
                    }
                    mcp::HEADER_MISMATCH | mcp::MISSING_REQUIRED_CLIENT_CAPABILITY => true,
                    _ => false,
                };
                if auto && !stateless_refusal {
                    self.fall_back(now)
                } else {
                    self.finish(refusal(&e))
                }
            }
        }
    }

    /// Client, auto mode or stateless only: the stateless version we share that a -32022
    /// error names, if any (the caller re-probes once with it: "retry using the advertised
    /// supported versions").
    pub(super) fn modern_version_named(
        &self,
        e: &jsonrpc::ErrorObject<'_>,
    ) -> Option<ProtocolVersion> {
        if e.code != mcp::UNSUPPORTED_PROTOCOL_VERSION
            || self.config.client_start() == Some(Era::Legacy)
            || self.stateless.reprobed
        {
            return None;
        }
        e.data
            .and_then(|d| d.unique("supported"))
            .and_then(|list| self.versions_we_speak(Some(list), Era::Modern).max())
    }

    /// The versions of `era` that `list` (a JSON array of version strings, as a discover
    /// result or a -32022 names them) shares with us.
    fn versions_we_speak<'a>(
        &'a self,
        list: Option<RawJson<'a>>,
        era: Era,
    ) -> impl Iterator<Item = ProtocolVersion> + 'a {
        list.into_iter()
            .flat_map(|list| array_items(list.get()))
            .filter_map(|v| v.as_str())
            .filter_map(|v| ProtocolVersion::parse(&v.to_str()))
            .filter(move |v| v.era() == era && self.config.versions.contains(v))
    }

    /// Whether `list` names a handshake-era version we speak.
    fn names_a_legacy_version(&self, list: Option<RawJson<'_>>) -> bool {
        self.versions_we_speak(list, Era::Legacy).next().is_some()
    }

    /// Client, auto mode: the server is not stateless; use the handshake.
    pub(super) fn fall_back(&mut self, now: Timestamp) {
        if self.lifecycle.closing_deadline().is_some() {
            // Closed during the probe: no `initialize` after `close`.
            return self.finish(CloseReason::Local);
        }
        self.lifecycle.era = Some(Era::Legacy);
        self.send_initialize(now);
    }

    /// Client: reads `resultType`, and records what a retry needs.
    pub(super) fn classify_result<'f>(
        &mut self,
        request: RequestId,
        retry: &mut Option<RetryBase>,
        result: RawJson<'f>,
    ) -> Classified<'f> {
        if self.lifecycle.era != Some(Era::Modern) {
            return Classified::Complete;
        }
        let kind = match result.get_unique("resultType") {
            Ok(None) => return Classified::Complete,
            Ok(Some(k)) => k.as_str(),
            Err(_) => return Classified::Invalid,
        };
        let is = |name: &str| kind.is_some_and(|k| k.eq_str(name));
        if is("complete") {
            return Classified::Complete;
        }
        if is("task") {
            // Only where we could get one ("A client that receives CreateTaskResult in
            // response to an unsupported request type MUST interpret this as an invalid
            // response"), and only a well-formed one (the `Task` members of
            // `CreateTaskResult = Result & Task`).
            let eligible = retry.as_ref().is_some_and(|b| b.method == "tools/call")
                && self.config.capabilities.has(Caps::TASKS_EXTENSION);
            let well_formed = crate::tasks::handle_task_id(result, false).is_some();
            return if eligible && well_formed {
                Classified::Task
            } else {
                Classified::Invalid
            };
        }
        if !is("input_required") || retry.is_none() {
            return Classified::Invalid;
        }
        self.classify_input_required(request, retry, result)
    }

    /// [`classify_result`](Self::classify_result) for an "input required" answer to a
    /// request that may get one; out of line, so that the common answers' path stays short.
    #[inline(never)]
    fn classify_input_required<'f>(
        &mut self,
        request: RequestId,
        retry: &mut Option<RetryBase>,
        result: RawJson<'f>,
    ) -> Classified<'f> {
        // Written twice, either is unreadable: which state to echo, which inputs to build?
        let found = result.get_each(["inputRequests", "requestState"]);
        let (Ok(requests), Ok(state)) = (found.get(0), found.get(1)) else {
            return Classified::Invalid;
        };
        let state_str = state.and_then(|s| s.as_str());
        let valid = (requests.is_some() || state.is_some())
            && requests.is_none_or(|r| r.is_object())
            && (state.is_none() || state_str.is_some());
        let Some(base) = retry.take().filter(|_| valid) else {
            return Classified::Invalid;
        };
        let limits = &self.config.limits;
        let bounds = (limits.max_remembered_ids, limits.max_buffered_output);
        self.stateless.remember_retry(
            bounds,
            request.0,
            base,
            state_str.map(|s| s.raw().to_owned()),
        );
        Classified::InputRequired {
            requests,
            state: state_str,
        }
    }

    /// Client: re-sends a request that came back "input required".
    pub(super) fn retry(
        &mut self,
        now: Timestamp,
        request: RequestId,
        input_responses: Option<RawJson<'_>>,
    ) -> Result<RequestId, Error> {
        if input_responses.is_some_and(|r| !r.is_object()) {
            return Err(Error::InvalidParams);
        }
        let Some((base, state)) = self.stateless.retryable.get(&request.0).cloned() else {
            return Err(Error::UnknownRequest);
        };
        // The new params: the original ones, with the responses and the state echoed exactly.
        let mut state_json = Vec::new();
        if let Some(state) = &state {
            state_json.push(b'"');
            state_json.extend_from_slice(state.as_bytes());
            state_json.push(b'"');
        }
        let mut add: Vec<(&str, &[u8])> = Vec::new();
        if let Some(responses) = input_responses {
            add.push(("inputResponses", responses.get().as_bytes()));
        }
        if state.is_some() {
            add.push(("requestState", &state_json));
        }
        let original = base.params.as_deref().map(RawJson::validated);
        let mut params = Vec::new();
        json_edit::set_members(&mut params, original, &add, true)
            .map_err(|_| Error::InvalidParams)?;
        let params_text = String::from_utf8(params).map_err(|_| Error::InvalidParams)?;
        // The same options as the first round: its timeout, its progress.
        let id = self.request(
            now,
            base.method,
            Some(RawJson::validated(&params_text)),
            base.options,
            StreamId::MAIN,
            None,
        )?;
        // A later round starts from the original params again, not from this round's: "If
        // the InputRequiredResult does not contain a requestState field, the client MUST NOT
        // include one in the retry", and these responses answered this round's requests.
        if let Some(slot) = self.stateless.retry_bases.get_mut(&id.0) {
            let sent = std::mem::replace(slot, base);
            self.stateless.recycle_retry(Some(sent));
        }
        self.stateless.drop_retryable(request.0);
        self.stateless.retry_order.retain(|&n| n != request.0);
        Ok(id)
    }
}

fn version_json(v: ProtocolVersion) -> &'static [u8] {
    match v {
        ProtocolVersion::V2024_11_05 => b"\"2024-11-05\"",
        ProtocolVersion::V2025_03_26 => b"\"2025-03-26\"",
        ProtocolVersion::V2025_06_18 => b"\"2025-06-18\"",
        ProtocolVersion::V2025_11_25 => b"\"2025-11-25\"",
        ProtocolVersion::V2026_07_28 => b"\"2026-07-28\"",
    }
}

/// Writes an id (or progress token) exactly as received.
pub(super) fn write_id(out: &mut Vec<u8>, id: Id<'_>) {
    match id {
        Id::Int(n) => json_edit::write_int(out, n),
        Id::Str(s) => {
            out.push(b'"');
            out.extend_from_slice(s.raw().as_bytes());
            out.push(b'"');
        }
    }
}

/// The items of a validated JSON array text (none for anything else).
fn array_items(text: &str) -> impl Iterator<Item = RawJson<'_>> {
    RawJson::validated(text).items()
}

/// How many bytes of spare strings the retry pool keeps: enough for the params of hundreds of
/// requests in flight at once, so a burst of them allocates nothing once warm.
const RETRY_POOL_BYTES: usize = 256 * 1024;

/// The methods whose requests may come back "input required" (2026-07-28), as the static
/// name a retry re-sends.
pub(super) fn retryable_method(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" => Some("tools/call"),
        "prompts/get" => Some("prompts/get"),
        "resources/read" => Some("resources/read"),
        _ => None,
    }
}

/// Task ids one listen stream may follow, and resource URIs (each list on its own); the
/// ones past it are not granted (the acknowledgement lists what was).
const MAX_LISTEN_TASKS: usize = 256;

/// The bytes of task ids, and of resource URIs, one listen stream keeps (each list on its
/// own): a listen lives as long as its client wants, so the strings it pins are bounded in
/// size too, not only in number (256 URIs of a frame each would be gigabytes). An id or URI
/// that would pass it is not granted.
const MAX_LISTEN_BYTES: usize = 64 * 1024;

/// The strings of the JSON array `list` that a listen keeps, into `out`: up to
/// [`MAX_LISTEN_TASKS`] of them, within [`MAX_LISTEN_BYTES`].
fn keep_listen_strings(list: &str, out: &mut Vec<String>) {
    let mut bytes = 0;
    for item in array_items(list).take(MAX_LISTEN_TASKS) {
        let Some(s) = item.as_str() else { continue };
        let s = s.to_str();
        if bytes + s.len() > MAX_LISTEN_BYTES {
            continue;
        }
        bytes += s.len();
        out.push(s.into_owned());
    }
}

/// The -32021 refusal of a tasks method (or a listen for task notifications) from a request
/// that did not declare the tasks extension (SEP-2663), naming what is missing.
fn tasks_extension_required() -> Refusal<'static> {
    let mut refusal = Refusal::new(
        ViolationKind::MissingClientCapability,
        mcp::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability: the io.modelcontextprotocol/tasks extension",
    );
    refusal.data = Some(RawJson::validated(
        r#"{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#,
    ));
    refusal
}

/// [`Config::discover_ttl`] as sent: milliseconds, at most
/// [`MAX_WIRE_MILLIS`](crate::tasks::MAX_WIRE_MILLIS), the largest integer JSON readers keep.
fn wire_ttl(config: &Config) -> u64 {
    u64::try_from(config.discover_ttl.as_millis())
        .unwrap_or(u64::MAX)
        .min(crate::tasks::MAX_WIRE_MILLIS)
}
