//! `mcpwire serve`: a small but complete demo MCP server over stdio, in both eras.
//!
//! Tools: `echo {text}`, `add {a, b}`, `countdown {steps}` (progress and logging while it runs),
//! `ask {question}` (asks the client: elicitation or sampling, a server→client request in the
//! handshake era and an "input required" round trip in the stateless era), `touch {uri}` (sends
//! a resource-updated notification to subscribers). Resources: `demo://readme`, the template
//! `demo://items/{id}`, subscriptions. Prompts: `greet {name}`. Completions for `greet`'s `name`.
//! Logging: `logging/setLevel` (handshake era) or `logLevel` per request (stateless era).

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::driver::Ev;
use mcpwire::Timestamp;
use mcpwire::blocking::{Io, Stop};
use mcpwire::conn::{Config, Connection, Event, ListenItem, RequestId};
use mcpwire::http::{ConnKey, HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::mcp::{Caps, Era, LogLevel};
use mcpwire_redis::{
    CLAIM_TTL, RedisEventStore, RedisOptions, RedisSessionStore, ReplicaClaim, StoreError,
    StoreHealth,
};
use mcpwire_tokio::http::{Application, HostConfig, serve};

const README: &str = "mcpwire demo server: a sans-IO MCP engine driven by a std loop.";
const NAMES: [&str; 5] = ["Ada", "Alan", "Barbara", "Grace", "Linus"];

/// Work scheduled for later (a countdown step).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: std::cmp::Reverse<Timestamp>,
    id: Vec<u8>,
    step: u64,
    of: u64,
}

/// The demo server's state for one MCP connection: stdio has one connection, HTTP one per
/// session or stateless request. Every method is given the connection it acts on.
#[derive(Default)]
struct Server {
    timers: BinaryHeap<Timer>,
    /// Handshake era: the level set with logging/setLevel.
    level: Option<LogLevel>,
    subscriptions: HashSet<String>,
    /// Handshake era: our sampling/elicitation requests, by the tool call waiting on them.
    asking: HashMap<RequestId, OwnedId>,
    /// Countdown tool calls in progress, by the id's text.
    pending_countdowns: HashMap<String, OwnedId>,
    /// Over HTTP, the subscribers of a resource may be on any connection (another session,
    /// or a 2026-07-28 listen stream, which is a connection of its own): `touch` calls are
    /// left here, with their URIs, for the host to notify every connection and answer them.
    /// On stdio the one connection is notified at once.
    broadcast: bool,
    touched: Vec<(OwnedId, String)>,
    /// Answers the engine refused because the client is behind in reading (`OutputFull`;
    /// the request is still in flight), given again at their time: (when, id, the answer).
    unsent: Vec<(Timestamp, OwnedId, Answer)>,
    /// The latest time an input or a timer gave (for an answer to try again later).
    now: Timestamp,
}

/// An answer to a request of the client's, kept to be given again while the output is full.
enum Answer {
    /// A result's JSON text.
    Result(String),
    /// An error: its code, message and `data` (JSON text).
    Error(i64, String, Option<String>),
    /// 2026-07-28: "input required", with the input requests (JSON text) and the state.
    InputRequired(String, String),
    /// 2026-07-28: a reviewed `subscriptions/listen` granted (its items filtered).
    GrantListen,
}

impl From<Result<String, (i64, String)>> for Answer {
    fn from(answer: Result<String, (i64, String)>) -> Answer {
        match answer {
            Ok(text) => Answer::Result(text),
            Err((code, message)) => Answer::Error(code, message, None),
        }
    }
}

/// How long an answer refused for a full output waits before it is given again.
const RETRY_ANSWER: Duration = Duration::from_millis(50);

/// Says on stderr why an answer was not sent, unless nobody is left to want it (the
/// connection closed, or the client cancelled the request). (An answer refused because the
/// client is behind in reading is given again later: see `Server::give`.)
fn report_unsent(sent: Result<(), mcpwire::conn::Error>) {
    use mcpwire::conn::Error;
    match sent {
        Ok(()) | Err(Error::Closed | Error::UnknownRequest) => {}
        Err(e) => say!("mcpwire serve: an answer was not sent: {e}"),
    }
}

/// How many resources one session may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 1024;

/// Whether `uri` names one of the demo's resources: `demo://readme`, or an item
/// `demo://items/{id}` with a short id.
fn is_our_resource(uri: &str) -> bool {
    uri == "demo://readme"
        || uri
            .strip_prefix("demo://items/")
            .is_some_and(|id| !id.is_empty() && id.len() <= 128 && !id.contains('/'))
}

/// The error for a URI that names none of the demo's resources, with the version's code
/// (-32002 in the handshake era, -32602 from 2026-07-28).
fn resource_not_found(conn: &Connection) -> (i64, String) {
    let code = conn
        .protocol_version()
        .map(mcpwire::mcp::resource_not_found_code)
        .unwrap_or(-32002);
    (code, "Resource not found".to_owned())
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn tools() -> Value {
    json!({"tools": [
        {"name": "echo", "description": "Returns its text argument",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "add", "description": "Adds two integers",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
        {"name": "countdown", "description": "Counts down, reporting progress every 100 ms",
         "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer", "minimum": 1, "maximum": 20}}}},
        {"name": "ask", "description": "Asks the client a question (elicitation, or sampling)",
         "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}},
        {"name": "touch", "description": "Marks a resource as updated (notifies subscribers)",
         "inputSchema": {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}}
    ]})
}

/// `echo` and `add` answered from the request's raw JSON, without building a `Value`: what
/// the zero-copy API is for. `None` sends the call the general way (other tools, arguments
/// of the wrong type, which get the general way's answers). `params` is a view of an event
/// the engine has validated; [`quick_tool_text`] takes text that was copied out of one.
fn quick_tool(params: RawJson<'_>) -> Option<String> {
    let found = params.get_each(["name", "arguments"]);
    quick_answer(found.get(0).ok()??, found.get(1).ok()??)
}

/// [`quick_tool`] for params held as text (an owned event's): validated again, in the same
/// single walk that finds `name` and `arguments`.
fn quick_tool_text(params: &str) -> Option<String> {
    let mut found = [None; 2];
    if RawJson::object_each_into(params, &["name", "arguments"], &mut found)? != 0 {
        return None; // a duplicated member: the general way refuses it
    }
    quick_answer(found[0]?, found[1]?)
}

fn quick_answer(name: RawJson<'_>, arguments: RawJson<'_>) -> Option<String> {
    let name = name.as_str()?;
    if name.eq_str("echo") {
        // The JSON string as it arrived, escapes and all: the same text.
        let text = arguments.get_each(["text"]).get(0).ok()??;
        text.as_str()?;
        Some(format!(
            r#"{{"content":[{{"type":"text","text":{}}}],"isError":false}}"#,
            text.get()
        ))
    } else if name.eq_str("add") {
        let found = arguments.get_each(["a", "b"]);
        let (a, b) = (found.get(0).ok()??, found.get(1).ok()??);
        // (A sum out of range takes the slow path, which says so.)
        let sum = a.as_i64()?.checked_add(b.as_i64()?)?;
        Some(format!(
            r#"{{"content":[{{"type":"text","text":"{sum}"}}],"isError":false}}"#
        ))
    } else {
        None
    }
}

impl Server {
    /// Acts on one event of `conn`.
    fn on_event(&mut self, conn: &mut Connection, now: Timestamp, ev: Ev) {
        match ev {
            Ev::Request { id, method, params } => self.on_request(conn, now, id, &method, params),
            Ev::Response { request, result } => self.on_answer(conn, request, Ok(result)),
            Ev::Error {
                request, message, ..
            } => self.on_answer(conn, request, Err(message)),
            Ev::TimedOut { request } | Ev::Failed { request, .. } => {
                self.on_answer(conn, request, Err("no answer".into()))
            }
            Ev::PeerCancelled { id, .. } => {
                self.pending_countdowns.remove(&id.to_string());
                // An answer waiting for a retry is not wanted any more.
                self.unsent.retain(|(_, waiting, _)| *waiting != id);
            }
            _ => {}
        }
    }

    /// When [`fire_timers`](Self::fire_timers) has work next.
    fn next_timer(&self) -> Option<Timestamp> {
        let retry = self.unsent.iter().map(|u| u.0).min();
        [self.timers.peek().map(|t| t.at.0), retry]
            .into_iter()
            .flatten()
            .min()
    }

    fn answer(
        &mut self,
        conn: &mut Connection,
        id: &OwnedId,
        result: Result<Value, (i64, String)>,
    ) {
        self.give(conn, id, result.map(|v| v.to_string()).into());
    }

    /// Gives an answer (a result's JSON text, or an error); one the engine refuses because
    /// the client is behind in reading (`OutputFull`) is given again [`RETRY_ANSWER`]
    /// later, and again, until it fits: nothing is dropped.
    fn give(&mut self, conn: &mut Connection, id: &OwnedId, answer: Answer) {
        let internal =
            |conn: &mut Connection| conn.respond_error(id.as_id(), -32603, "internal error", None);
        let sent = match &answer {
            Answer::Result(text) => match RawJson::new(text) {
                Ok(raw) => conn.respond(id.as_id(), raw),
                Err(_) => internal(conn),
            },
            Answer::Error(code, message, data) => {
                let data = data.as_deref().and_then(|d| RawJson::new(d).ok());
                conn.respond_error(id.as_id(), *code, message, data)
            }
            Answer::InputRequired(requests, state) => match RawJson::new(requests) {
                Ok(raw) => conn.respond_input_required(id.as_id(), Some(raw), Some(state)),
                Err(_) => internal(conn),
            },
            Answer::GrantListen => conn.grant_listen(id.as_id(), |item| match item {
                ListenItem::Resource(uri) => is_our_resource(uri),
                _ => true,
            }),
        };
        if matches!(sent, Err(mcpwire::conn::Error::OutputFull)) {
            let at = self.now.after(RETRY_ANSWER);
            self.unsent.push((at, id.clone(), answer));
            return;
        }
        if let (Answer::InputRequired(..), Err(e)) = (&answer, &sent)
            && !matches!(
                e,
                mcpwire::conn::Error::Closed | mcpwire::conn::Error::UnknownRequest
            )
        {
            // The question could not go out as one: the call still gets an answer.
            let text = text_result("could not ask the client").to_string();
            return self.give(conn, id, Answer::Result(text));
        }
        report_unsent(sent);
    }

    fn log(&mut self, conn: &mut Connection, id: &OwnedId, level: LogLevel, data: &str) {
        let data = json!(data).to_string();
        let Ok(raw) = RawJson::new(&data) else { return };
        match conn.era() {
            Some(Era::Modern) => {
                let _ = conn.log(id.as_id(), level, Some("demo"), raw);
            }
            _ => {
                if self.level.is_some_and(|min| level >= min) {
                    let _ = conn.log(id.as_id(), level, Some("demo"), raw);
                }
            }
        }
    }

    fn on_request(
        &mut self,
        conn: &mut Connection,
        now: Timestamp,
        id: OwnedId,
        method: &str,
        params: Option<String>,
    ) {
        self.now = self.now.max(now);
        if method == "subscriptions/listen" {
            // 2026-07-28 listens are reviewed (see `demo_config`): a listen follows only this
            // server's resources, as `resources/subscribe` accepts only them. (Given again
            // later, as an answer is, when the output is full.)
            self.give(conn, &id, Answer::GrantListen);
            return;
        }
        if method == "tools/call"
            && let Some(result) = params.as_deref().and_then(quick_tool_text)
        {
            self.give(conn, &id, Answer::Result(result));
            return;
        }
        let params: Value = params
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        let arg = |k: &str| params.get("arguments").and_then(|a| a.get(k)).cloned();
        let result: Result<Value, (i64, String)> = match method {
            // Every list fits on one page: a cursor is one this server never gave (the
            // spec's pagination page: -32602).
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list"
                if params.get("cursor").is_some() =>
            {
                Err((-32602, "Invalid params: unknown cursor".to_owned()))
            }
            "tools/list" => Ok(tools()),
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                match name {
                    // Arguments the tool cannot use are a tool error the model can read and
                    // correct (the fast path above took every well-formed call).
                    "echo" => match arg("text") {
                        Some(Value::String(text)) => Ok(text_result(&text)),
                        _ => Ok(
                            json!({"content": [{"type": "text", "text": "echo needs a string argument 'text'"}], "isError": true}),
                        ),
                    },
                    "add" => match (
                        arg("a").and_then(|v| v.as_i64()),
                        arg("b").and_then(|v| v.as_i64()),
                    ) {
                        (Some(a), Some(b)) => Ok(match a.checked_add(b) {
                            Some(sum) => text_result(&sum.to_string()),
                            None => {
                                json!({"content": [{"type": "text", "text": "the sum is out of range (64-bit integers)"}], "isError": true})
                            }
                        }),
                        _ => Ok(
                            json!({"content": [{"type": "text", "text": "a and b must be integers"}], "isError": true}),
                        ),
                    },
                    "countdown" => {
                        // Absent: 3; anything but an integer from 1 to 20 (the schema's) is
                        // refused, not guessed at.
                        let steps = match arg("steps") {
                            None => 3,
                            Some(v) => match v.as_u64().filter(|n| (1..=20).contains(n)) {
                                Some(n) => n,
                                None => {
                                    let refusal = json!({"content": [{"type": "text", "text": "steps must be an integer from 1 to 20"}], "isError": true});
                                    self.answer(conn, &id, Ok(refusal));
                                    return;
                                }
                            },
                        };
                        self.log(conn, &id, LogLevel::Info, "countdown started");
                        self.timers.push(Timer {
                            at: std::cmp::Reverse(now.after(Duration::from_millis(100))),
                            id: id.to_string().into_bytes(),
                            step: 1,
                            of: steps,
                        });
                        self.pending_countdowns.insert(id.to_string(), id.clone());
                        return;
                    }
                    "ask" => return self.ask(conn, now, id, &params),
                    "touch" => {
                        let uri = arg("uri")
                            .and_then(|u| u.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        if self.broadcast {
                            self.touched.push((id, uri));
                            return;
                        }
                        let p = json!({"uri": uri}).to_string();
                        let notified = if conn.era() == Some(Era::Modern)
                            || self.subscriptions.contains(&uri)
                        {
                            RawJson::new(&p)
                                .ok()
                                .map(|raw| {
                                    conn.notify("notifications/resources/updated", Some(raw))
                                        .is_ok()
                                })
                                .unwrap_or(false)
                        } else {
                            false
                        };
                        Ok(text_result(if notified {
                            "subscribers notified"
                        } else {
                            "no subscribers"
                        }))
                    }
                    // An unknown tool is a protocol error (-32602), as the spec's tools page
                    // lists it, not a tool result.
                    other => Err((-32602, format!("Unknown tool: {other}"))),
                }
            }
            "resources/list" => Ok(json!({"resources": [
                {"uri": "demo://readme", "name": "readme", "mimeType": "text/plain", "description": "About this server"}
            ]})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": [
                {"uriTemplate": "demo://items/{id}", "name": "item", "mimeType": "application/json", "description": "An item by id"}
            ]})),
            "resources/read" => {
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
                if uri == "demo://readme" {
                    Ok(
                        json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": README}]}),
                    )
                } else if is_our_resource(uri)
                    && let Some(item) = uri.strip_prefix("demo://items/")
                {
                    Ok(
                        json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": json!({"id": item, "label": format!("item {item}")}).to_string()}]}),
                    )
                } else {
                    Err(resource_not_found(conn))
                }
            }
            "resources/subscribe" => match params.get("uri").and_then(Value::as_str) {
                None => Err((-32602, "Invalid params: uri must be a string".to_owned())),
                // Only this server's resources, and a bounded number of them: a client
                // cannot make a session hold what it likes (a megabyte per URI, without end).
                Some(uri) if !is_our_resource(uri) => Err(resource_not_found(conn)),
                Some(uri)
                    if self.subscriptions.len() >= MAX_SUBSCRIPTIONS
                        && !self.subscriptions.contains(uri) =>
                {
                    Err((-32603, format!("at most {MAX_SUBSCRIPTIONS} subscriptions")))
                }
                Some(uri) => {
                    self.subscriptions.insert(uri.to_owned());
                    Ok(json!({}))
                }
            },
            "resources/unsubscribe" => {
                if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                    self.subscriptions.remove(uri);
                }
                Ok(json!({}))
            }
            "prompts/list" => Ok(json!({"prompts": [
                {"name": "greet", "description": "Greets someone", "arguments": [{"name": "name", "description": "Who to greet", "required": false}]}
            ]})),
            "prompts/get" if params.get("name").and_then(Value::as_str) != Some("greet") => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                Err((-32602, format!("Unknown prompt: {name}")))
            }
            "prompts/get" => {
                let name = params
                    .get("arguments")
                    .and_then(|a| a.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("world");
                Ok(
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("Please greet {name} warmly.")}}]}),
                )
            }
            // Only the greeting's `name` argument completes: any other reference or argument
            // is -32602, as the completion page lists (it got the names all the same).
            "completion/complete"
                if params.pointer("/ref/type").and_then(Value::as_str) != Some("ref/prompt")
                    || params.pointer("/ref/name").and_then(Value::as_str) != Some("greet")
                    || params.pointer("/argument/name").and_then(Value::as_str) != Some("name") =>
            {
                Err((-32602, "Invalid completion reference or argument".into()))
            }
            "completion/complete" => {
                let prefix = params
                    .get("argument")
                    .and_then(|a| a.get("value"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let values: Vec<&str> = NAMES
                    .iter()
                    .copied()
                    .filter(|n| n.to_lowercase().starts_with(&prefix.to_lowercase()))
                    .collect();
                Ok(
                    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
                )
            }
            "logging/setLevel" => {
                self.level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .and_then(LogLevel::parse);
                if self.level.is_some() {
                    Ok(json!({}))
                } else {
                    Err((-32602, "unknown log level".to_owned()))
                }
            }
            _ => Err((-32601, "Method not found".to_owned())),
        };
        self.answer(conn, &id, result);
    }

    /// `ask`: elicitation if the client supports it, else sampling.
    fn ask(&mut self, conn: &mut Connection, now: Timestamp, id: OwnedId, params: &Value) {
        let question = params
            .get("arguments")
            .and_then(|a| a.get("question"))
            .and_then(Value::as_str)
            .unwrap_or("What is your name?")
            .to_owned();
        if conn.era() == Some(Era::Modern) {
            // Stateless: a retry carries the answers.
            if let Some(responses) = params.get("inputResponses") {
                let answer = responses.get("answer").cloned().unwrap_or(Value::Null);
                return self.answer(
                    conn,
                    &id,
                    Ok(text_result(&format!("the client answered: {answer}"))),
                );
            }
            let caps = conn
                .request_context(id.as_id())
                .map(|c| c.client_capabilities)
                .unwrap_or(Caps::EMPTY);
            let request = if caps.contains(Caps::ELICITATION) {
                json!({"answer": {"method": "elicitation/create", "params": {"mode": "form", "message": question,
                    "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}})
            } else if caps.contains(Caps::SAMPLING) {
                json!({"answer": {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": question}}], "maxTokens": 100}}})
            } else {
                // The spec (2026-07-28): a request that needs a capability the client did
                // not declare gets -32021, naming it (HTTP 400).
                let data = r#"{"requiredCapabilities":{"elicitation":{}}}"#;
                let refusal = Answer::Error(
                    mcpwire::mcp::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "ask needs the client's elicitation (or sampling) capability".to_owned(),
                    Some(data.to_owned()),
                );
                return self.give(conn, &id, refusal);
            };
            let asked = Answer::InputRequired(request.to_string(), "ask-1".to_owned());
            return self.give(conn, &id, asked);
        }
        let caps = conn
            .peer_capabilities()
            .map(|c| c.flags())
            .unwrap_or(Caps::EMPTY);
        let (method, body) = if caps.contains(Caps::ELICITATION) {
            (
                "elicitation/create",
                json!({"message": question, "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}),
            )
        } else if caps.contains(Caps::SAMPLING) {
            (
                "sampling/createMessage",
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": question}}], "maxTokens": 100}),
            )
        } else {
            // (The handshake era has no code for it: a tool error.)
            return self.answer(
                conn,
                &id,
                Ok(json!({"content": [{"type": "text", "text": "ask needs the client's elicitation or sampling capability"}], "isError": true})),
            );
        };
        let text = body.to_string();
        match RawJson::new(&text)
            .ok()
            // On the stream of the tool call it serves (over HTTP: that call's SSE stream, which
            // the client reads, not the session's optional GET stream).
            .map(|raw| conn.request_related(now, id.as_id(), method, Some(raw), Default::default()))
        {
            Some(Ok(request)) => {
                self.asking.insert(request, id);
            }
            _ => self.answer(conn, &id, Ok(text_result("could not ask the client"))),
        }
    }

    fn on_answer(
        &mut self,
        conn: &mut Connection,
        request: RequestId,
        outcome: Result<String, String>,
    ) {
        if let Some(id) = self.asking.remove(&request) {
            let text = match outcome {
                Ok(result) => format!("the client answered: {result}"),
                Err(e) => format!("the client declined: {e}"),
            };
            self.answer(conn, &id, Ok(text_result(&text)));
        }
    }

    fn fire_timers(&mut self, conn: &mut Connection, now: Timestamp) {
        self.now = self.now.max(now);
        // Answers refused for a full output, once more (those refused again go back).
        if self.unsent.iter().any(|u| u.0 <= now) {
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unsent)
                .into_iter()
                .partition(|u| u.0 <= now);
            self.unsent = later;
            for (_, id, answer) in due {
                self.give(conn, &id, answer);
            }
        }
        while self.timers.peek().is_some_and(|t| t.at.0 <= now) {
            let Some(t) = self.timers.pop() else { break };
            let key = String::from_utf8_lossy(&t.id).into_owned();
            let Some(id) = self.pending_countdowns.get(&key).cloned() else {
                continue;
            };
            let _ = conn.progress(
                id.as_id(),
                t.step as f64,
                Some(t.of as f64),
                Some(&format!("step {} of {}", t.step, t.of)),
            );
            self.log(conn, &id, LogLevel::Debug, &format!("step {}", t.step));
            if t.step >= t.of {
                self.pending_countdowns.remove(&key);
                self.answer(
                    conn,
                    &id,
                    Ok(text_result(&format!("countdown of {} finished", t.of))),
                );
            } else {
                self.timers.push(Timer {
                    at: std::cmp::Reverse(now.after(Duration::from_millis(100))),
                    id: t.id,
                    step: t.step + 1,
                    of: t.of,
                });
            }
        }
    }
}

/// The demo server's configuration (both eras unless `legacy_only`).
fn demo_config(legacy_only: bool) -> Config {
    let mut config = Config::server("mcpwire-demo", env!("CARGO_PKG_VERSION"));
    config.capabilities = mcpwire::mcp::Capabilities::parse(
        r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"completions":{},"logging":{}}"#,
    )
    .expect("valid capabilities");
    config.instructions = Some("A demo server: try the countdown and ask tools.".to_owned());
    // Listens come to `on_request`, which grants only the demo's own resources.
    config.policy.review_listens = true;
    if legacy_only {
        config.versions = mcpwire::mcp::ProtocolVersion::LEGACY.to_vec();
    }
    config
}

pub fn run(legacy_only: bool) -> i32 {
    let start = Instant::now();
    let Ok(mut conn) = Connection::new(demo_config(legacy_only), Timestamp::ZERO) else {
        return 1;
    };
    let mut server = Server::default();
    // The library's blocking loop: answers are written before more input is read (so a
    // client that does not read our output is slowed down, not buffered; one that reads
    // only after writing more than the pipes hold blocks with us: `--tokio` serves it), and
    // every answer already given is written before the loop reports the end of input.
    let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
    let mut io = Io::stdio(clock);
    // One clock read per batch of events (the loop's event_time), not one per event.
    let mut now = io.now();
    // A write that failed other than by the client going away (a full disk, an I/O error):
    // every later answer would be lost too, so the session ends as a failure, at the next
    // input or its end (`--tokio` ends the same way). Only for a client that went away (a
    // broken pipe, a reset) does the loop go on reading, to the end of its input, and end
    // well.
    let write_failed = |io: &Io<std::io::Stdout>| match io.output_error() {
        Some(e)
            if !matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            say!("mcpwire serve: writing stdout: {e}");
            true
        }
        _ => false,
    };
    loop {
        if write_failed(&io) {
            return 1;
        }
        server.fire_timers(&mut conn, now);
        // Wake for our own timers (the countdown) as well as the engine's.
        let next = io.next_event(&mut conn, server.next_timer());
        now = io.event_time();
        match next {
            // The end of input (the connection closes at it), or a read that failed: a
            // client that went away (a reset) ended the session, as `--tokio` takes it; any
            // other failure is one.
            Ok(Ev::Closed { .. }) | Err(Stop::Eof) => match io.input_error() {
                Some(e) if e.kind() != std::io::ErrorKind::ConnectionReset => {
                    say!("mcpwire serve: reading stdin: {e}");
                    return 1;
                }
                _ => return i32::from(write_failed(&io)),
            },
            Ok(ev) => server.on_event(&mut conn, now, ev),
            Err(Stop::Deadline) => {}
        }
    }
}

/// A runtime from `builder` with IO and timers, or `None` after saying on stderr why not.
fn runtime(builder: &mut tokio::runtime::Builder) -> Option<tokio::runtime::Runtime> {
    builder
        .enable_all()
        .build()
        .map_err(|e| say!("mcpwire serve: cannot start the runtime: {e}"))
        .ok()
}

/// `mcpwire serve --tokio`: the same server on stdio, driven by `mcpwire-tokio`'s
/// [`Driver`](mcpwire_tokio::stdio::Driver) on a current-thread runtime, with stdin and stdout
/// waited on by tokio's reactor (`mcpwire_tokio::stdio::stdin`/`stdout`). What an application
/// that already runs tokio would do; the plain `serve` needs no runtime at all.
pub fn run_tokio(legacy_only: bool) -> i32 {
    let Some(runtime) = runtime(&mut tokio::runtime::Builder::new_current_thread()) else {
        return 1;
    };
    runtime.block_on(async {
        let (stdin, stdout) = (
            mcpwire_tokio::stdio::stdin(),
            mcpwire_tokio::stdio::stdout(),
        );
        let Ok(mut io) = mcpwire_tokio::stdio::Driver::new(demo_config(legacy_only), stdin, stdout)
        else {
            return 1;
        };
        let mut server = Server::default();
        // One clock read per batch of events (the driver's event_time), not one per event;
        // a fresh one after waking for our own timer.
        let mut now = io.now();
        loop {
            server.fire_timers(io.connection(), now);
            // Wake for our own timers (the countdown) as well as the engine's; next_event is
            // cancellation-safe, so losing the race to the timer loses nothing.
            let timer = server
                .next_timer()
                .map(|at| Duration::from_nanos(at.as_nanos().saturating_sub(now.as_nanos())));
            let sleep = async move {
                match timer {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = io.next_event() => match ev {
                    Ok(Some(ev)) => {
                        now = io.event_time();
                        server.on_event(io.connection(), now, ev);
                    }
                    Ok(None) => return 0,
                    // A client that stopped reading (it closed our stdout) ended the session,
                    // as the blocking loop takes it: not a failure.
                    Err(e) if matches!(
                        e.kind(),
                        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                    ) => return 0,
                    Err(e) => {
                        say!("mcpwire serve: {e}");
                        return 1;
                    }
                },
                () = sleep => now = io.now(),
            }
        }
    })
}

/// The next of `signals` (SIGINT, SIGTERM and SIGHUP, each if caught) to come: its number.
async fn any_signal(signals: &mut [Option<tokio::signal::unix::Signal>; 3]) -> i32 {
    async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    let [a, b, c] = signals;
    tokio::select! {
        _ = one(a) => libc::SIGINT,
        _ = one(b) => libc::SIGTERM,
        _ = one(c) => libc::SIGHUP,
    }
}

/// Whether this process was started ignoring `signal` (nohup's SIGHUP).
fn ignored_at_start(signal: libc::c_int) -> bool {
    // SAFETY: a query only (no new action); `old` is a zeroed sigaction alive for the call.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The demo server's logic over Streamable HTTP: one [`Server`] state per connection of the
/// HTTP server (a session, or a stateless request) that needs one. Every step costs the same
/// with ten sessions open or ten thousand, but the `touch` tool's, which looks at every
/// connection for subscribers (as a broadcast must; bounded by the session cap).
#[derive(Default)]
struct HttpDemo {
    servers: HashMap<ConnKey, Server>,
    /// No later than the earliest timer of any state (possibly earlier, after a timer went
    /// away: that costs one early wake-up, which puts it right).
    next_timer: Option<Timestamp>,
    /// States of connections that have ended are swept out once there are this many.
    sweep_at: usize,
}

impl HttpDemo {
    /// `touch {uri}` over HTTP: `notifications/resources/updated` to every handshake-era
    /// session subscribed to `uri` and to every 2026-07-28 listen stream (the engine sends it
    /// only to the listeners that opted in to `uri`), then the answer to call `id` of `from`.
    fn touch(&mut self, server: &mut HttpServer, from: ConnKey, id: &OwnedId, uri: &str) {
        let params = json!({"uri": uri}).to_string();
        let Ok(raw) = RawJson::new(&params) else {
            return;
        };
        let mut notified = false;
        for key in server.connections() {
            let Some(conn) = server.connection(key) else {
                continue;
            };
            let wants = match conn.era() {
                Some(Era::Modern) => !conn.listen_subscriptions().is_empty(),
                _ => self
                    .servers
                    .get(&key)
                    .is_some_and(|s| s.subscriptions.contains(uri)),
            };
            if wants {
                notified |= conn
                    .notify("notifications/resources/updated", Some(raw))
                    .is_ok();
            }
        }
        if let (Some(conn), Some(state)) = (server.connection(from), self.servers.get_mut(&from)) {
            let text = if notified {
                "subscribers notified"
            } else {
                "no subscribers"
            };
            state.answer(conn, id, Ok(text_result(text)));
        }
    }
}

impl Application for HttpDemo {
    fn drive(&mut self, now: Timestamp, server: &mut HttpServer) {
        while let Some((key, ev)) = server.poll_event() {
            // `echo` and `add` are answered from the event's own params, which the engine
            // has validated: nothing is copied, and the connection needs no state here.
            if let Event::Request {
                id,
                method,
                params: Some(params),
            } = ev
                && method.eq_str("tools/call")
                && let Some(result) = quick_tool(params)
            {
                let id = OwnedId::from(id);
                if let (Some(conn), Ok(raw)) = (server.connection(key), RawJson::new(&result)) {
                    match conn.respond(id.as_id(), raw) {
                        // The client is behind in reading: the connection's state gives it
                        // again later.
                        Err(mcpwire::conn::Error::OutputFull) => {
                            let state = self.servers.entry(key).or_insert_with(|| Server {
                                broadcast: true,
                                ..Server::default()
                            });
                            state.now = state.now.max(now);
                            state.give(conn, &id, Answer::Result(result));
                            self.next_timer = [self.next_timer, state.next_timer()]
                                .into_iter()
                                .flatten()
                                .min();
                        }
                        sent => report_unsent(sent),
                    }
                }
                continue;
            }
            let ev = ev.to_owned_event();
            let closed = matches!(ev, Ev::Closed { .. });
            let mut touched = Vec::new();
            if let Some(conn) = server.connection(key) {
                let state = self.servers.entry(key).or_insert_with(|| Server {
                    broadcast: true,
                    ..Server::default()
                });
                state.on_event(conn, now, ev);
                self.next_timer = [self.next_timer, state.next_timer()]
                    .into_iter()
                    .flatten()
                    .min();
                touched = std::mem::take(&mut state.touched);
            }
            for (id, uri) in touched {
                self.touch(server, key, &id, &uri);
            }
            // `touch` answers the caller, and an answer refused for a full output waits for
            // a retry: its time counts too.
            if let Some(state) = self.servers.get(&key) {
                self.next_timer = [self.next_timer, state.next_timer()]
                    .into_iter()
                    .flatten()
                    .min();
            }
            if closed {
                self.servers.remove(&key);
            }
        }
        // A stateless request's connection ends without an event: the states of those that
        // have gone are dropped in one pass once they could be half of all, so each request
        // pays a constant share of it.
        if self.servers.len() > self.sweep_at {
            let live: HashSet<ConnKey> = server.connections().into_iter().collect();
            self.servers.retain(|key, _| live.contains(key));
            self.sweep_at = 2 * self.servers.len() + 64;
        }
        server.pump();
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        self.next_timer
    }

    fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        if self.next_timer.is_some_and(|at| at <= now) {
            // A due state whose connection has gone goes with it (its timers would
            // otherwise stay due, and wake the host at once again and again).
            self.servers.retain(|key, state| {
                if state.next_timer().is_none_or(|at| at > now) {
                    return true;
                }
                match server.connection(*key) {
                    Some(conn) => {
                        state.fire_timers(conn, now);
                        true
                    }
                    None => false,
                }
            });
            self.next_timer = self.servers.values().filter_map(Server::next_timer).min();
        }
        server.pump();
    }
}

/// `url` as it may be shown: a password in it (`redis://user:password@host`, or a unix
/// socket's `?pass=`) replaced by `***`, so that an error message does not hand it to
/// whoever reads the logs.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // Everything up to the last `@` is taken for the credentials, even past a `/`, `?` or
    // `#`: a password holding one (unencoded) makes the URL invalid, and that error shows the
    // URL. A path with an `@` is masked too, which costs nothing.
    let rest = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let shown = match userinfo.split_once(':') {
                Some((user, _)) if !user.contains(['/', '?', '#']) => format!("{user}:***"),
                None if !userinfo.contains(['/', '?', '#']) => userinfo.to_owned(),
                _ => "***".to_owned(),
            };
            format!("{shown}{}", &rest[at..])
        }
        None => rest.to_owned(),
    };
    let Some((path, query)) = rest.split_once('?') else {
        return format!("{scheme}://{rest}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if matches!(name, "pass" | "password") => format!("{name}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{scheme}://{path}?{}", query.join("&"))
}

/// `--redis URL --replica N`: this server is replica `N` of a deployment whose replicas share
/// sessions and resumable events through the Redis at `url`.
pub struct ScaleOut {
    pub url: String,
    pub replica: u16,
    pub touch_interval: Duration,
}

impl ScaleOut {
    /// Claims this replica's number, puts the shared stores into `config`, and gives this
    /// process stream ids no other has had. A number another running replica holds is
    /// refused.
    fn configure(
        &self,
        config: &mut HttpServerConfig,
    ) -> Result<([StoreHealth; 2], ReplicaClaim), StoreError> {
        let options = RedisOptions {
            ttl: config.session_idle_timeout,
            events_per_stream: config.event_store,
            bytes_per_stream: config.event_store_bytes,
            bytes_per_session: config.event_store_bytes,
            ..RedisOptions::default()
        };
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let token = format!("{}:{}:{since_epoch}", host.trim(), std::process::id());
        let claim = ReplicaClaim::acquire(
            &self.url,
            &options,
            u64::from(self.replica),
            &token,
            CLAIM_TTL + Duration::from_secs(1),
        )?;
        let mut events = RedisEventStore::connect(&self.url, options.clone())?;
        // A block of stream ids no process has had: a restarted replica must not reuse the
        // ids its sessions' stored events carry.
        config.first_stream_id = events.first_stream_id()?;
        let sessions = RedisSessionStore::connect(&self.url, options)?;
        let health = [events.health(), sessions.health()];
        config.events = Some(Box::new(events));
        config.sessions = Some(Box::new(sessions));
        config.shared_touch_interval = self.touch_interval;
        Ok((health, claim))
    }
}

/// Renews the replica's claim on its number every few seconds, and says so on stderr when it
/// was lost (another server took the number, or Redis could not be reached).
async fn renew_claim(claim: std::sync::Arc<std::sync::Mutex<ReplicaClaim>>) {
    loop {
        tokio::time::sleep(CLAIM_TTL / 3).await;
        let claim = claim.clone();
        let held = tokio::task::spawn_blocking(move || {
            claim
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .renew()
        })
        .await
        .unwrap_or(false);
        if !held {
            say!(
                "mcpwire serve: this replica's number could not be renewed in Redis (another \
                 server may now hold it and go by the same name)"
            );
        }
    }
}

/// Reports the shared stores' failures on stderr as they happen (the server itself goes on:
/// see `mcpwire_redis` for what each failure costs), checking every second.
async fn report_store_failures(health: [StoreHealth; 2]) {
    let mut reported = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let errors: u64 = health.iter().map(StoreHealth::errors).sum();
        if errors > reported {
            reported = errors;
            let last: Vec<String> = health.iter().filter_map(StoreHealth::last_error).collect();
            say!(
                "mcpwire serve: {errors} Redis call(s) failed so far; last: {}",
                last.join("; ")
            );
        }
    }
}

/// `mcpwire serve --http ADDR`: the demo server over Streamable HTTP on `addr` (port 0 picks
/// a free one). Prints the URL it serves once bound; stops on Ctrl-C or SIGTERM, letting open
/// streams finish.
/// Whether a Host (or an Origin's authority) may reach the server: a loopback name, a name
/// given with `--allow-host`, or, when bound beyond loopback, an IP address (DNS rebinding
/// needs a name that resolves to us; a client that dials an address sends the address).
fn host_allowed(authority: &str, allowed: &[String], ip_literals: bool) -> bool {
    let host = match authority.rsplit_once(':') {
        Some((h, port))
            if !h.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') =>
        {
            h
        }
        _ => authority,
    };
    // (An IPv6 literal is bracketed in a Host header; --allow-host takes it with or without.)
    fn unbracket(h: &str) -> &str {
        h.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h)
    }
    let bare = unbracket(host);
    mcpwire::http::loopback_only(Some(authority), None)
        || allowed
            .iter()
            .any(|a| unbracket(a).eq_ignore_ascii_case(bare))
        || (ip_literals && bare.parse::<std::net::IpAddr>().is_ok())
}

/// Descriptors kept for what is not a connection: stdio, the listener, the runtime's own,
/// the Redis connections, with room to spare.
const FD_RESERVE: u64 = 64;

/// Raises the limit on open files (the soft limit, up to the hard one, as Go's runtime does
/// at its start) so that `max` connections and [`FD_RESERVE`] fit, and returns the cap that
/// fits: a smaller one, said on stderr, where the hard limit is lower. At the common soft
/// limit of 1024 the default cap of 1024 was never reached: `accept` failed first (EMFILE),
/// new clients waited unanswered in the kernel's queue instead of displacing an idle
/// connection or getting 503, and nothing said why.
fn fit_descriptor_limit(max: usize) -> usize {
    let to_rlim = |n: u64| libc::rlim_t::try_from(n).unwrap_or(libc::rlim_t::MAX);
    let want = to_rlim((max as u64).saturating_add(FD_RESERVE));
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return max;
    }
    if limit.rlim_cur < want {
        let raised = libc::rlimit {
            rlim_cur: want.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = raised.rlim_cur;
        }
    }
    let soft = limit.rlim_cur;
    if soft >= want {
        return max;
    }
    let fits = usize::try_from(soft.saturating_sub(to_rlim(FD_RESERVE)))
        .unwrap_or(1)
        .max(1);
    say!(
        "mcpwire serve: serving at most {fits} connections at once: the limit on open files \
         is {soft} (ulimit -n)"
    );
    fits
}

pub fn run_http(
    addr: &str,
    legacy_only: bool,
    scale_out: Option<ScaleOut>,
    allowed: Vec<String>,
    max_connections: Option<u32>,
) -> i32 {
    // One worker per core, or TOKIO_WORKER_THREADS. Read here: tokio panics on a value that
    // is not a positive number, and a bad setting is a usage error like a bad argument.
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(value) = std::env::var_os("TOKIO_WORKER_THREADS") {
        match value.to_str().and_then(|v| v.trim().parse::<usize>().ok()) {
            Some(n) if n > 0 => {
                builder.worker_threads(n);
            }
            _ => {
                say!(
                    "mcpwire serve: TOKIO_WORKER_THREADS must be a positive number, not {value:?}"
                );
                return 2;
            }
        }
    }
    let Some(runtime) = runtime(&mut builder) else {
        return 1;
    };
    runtime.block_on(async {
        // Caught from now on, before the store is claimed and the address printed: a signal
        // that came before the server ran ended the process by default, without the drain
        // and with its replica number still claimed.
        use tokio::signal::unix::{SignalKind, signal};
        // A signal the server was started ignoring stays ignored (a background job of a
        // shell without job control ignores SIGINT: the Ctrl-C meant for the script's
        // foreground command stopped the server), as `tap` and `probe` keep them.
        let caught = |which: libc::c_int, kind: SignalKind| {
            (!ignored_at_start(which))
                .then(|| signal(kind).ok())
                .flatten()
        };
        let interrupt = caught(libc::SIGINT, SignalKind::interrupt());
        let term = caught(libc::SIGTERM, SignalKind::terminate());
        // A terminal's hang-up drains too (it killed the server, its Redis number still
        // claimed), unless the server was started ignoring it (under nohup).
        let hangup = caught(libc::SIGHUP, SignalKind::hangup());
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                say!("mcpwire serve: cannot listen on {addr}: {e}");
                // A mistyped address is the command line's fault; a port in use, or one
                // that needs privileges, is not (a supervisor may retry it).
                return if e.kind() == std::io::ErrorKind::InvalidInput {
                    crate::probe::EXIT_USAGE
                } else {
                    1
                };
            }
        };
        let local = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                say!("mcpwire serve: {e}");
                return 1;
            }
        };
        let mut host = HostConfig::default();
        if let Some(max) = max_connections {
            host.max_connections = max as usize;
        }
        host.max_connections = fit_descriptor_limit(host.max_connections);
        let mut config = HttpServerConfig::new(demo_config(legacy_only));
        let tools = tools().to_string();
        if let Ok(raw) = RawJson::new(&tools) {
            let _ = config.declare_tools(raw);
        }
        let mut signals = [interrupt, term, hangup];
        let mut health = None;
        let mut claim = None;
        if let Some(scale_out) = scale_out {
            let url = without_password(&scale_out.url);
            // Off the runtime, and raced against the signals: claiming the number may wait
            // out a claim a stopped server left (up to CLAIM_TTL), and a Ctrl-C then did
            // nothing until that wait was over.
            let claiming = tokio::task::spawn_blocking(move || {
                let configured = scale_out.configure(&mut config);
                (config, configured)
            });
            let configured;
            (config, configured) = tokio::select! {
                done = claiming => match done {
                    Ok(done) => done,
                    Err(e) => {
                        say!("mcpwire serve: Redis at {url}: {e}");
                        return 1;
                    }
                },
                // (Exited at once: the runtime would wait for the claim's thread as it
                // drops. Nothing is served yet; a claim that thread may still take lapses.)
                n = any_signal(&mut signals) => std::process::exit(128 + n),
            };
            match configured {
                Ok((h, c)) => {
                    health = Some(h);
                    claim = Some(std::sync::Arc::new(std::sync::Mutex::new(c)));
                }
                Err(e) => {
                    say!("mcpwire serve: Redis at {url}: {e}");
                    return 1;
                }
            }
        }
        if let Some(health) = health {
            tokio::spawn(report_store_failures(health));
        }
        // The claim is released when the last handle goes, as the server stops.
        let renewing = claim.clone().map(|c| tokio::spawn(renew_claim(c)));
        crate::out::line(format_args!("http://{local}{}", host.path));
        let _ = std::io::Write::flush(&mut std::io::stdout());
        let beyond_loopback = !local.ip().is_loopback();
        if beyond_loopback || !allowed.is_empty() {
            // An Origin names the site of the page that sends the request: loopback, an
            // allowed name, or the server itself as the request's Host names it (a page it
            // served). Not any IP address, as a Host may be: that would let a page from any
            // address through.
            config.check_origin = Box::new(move |host, origin| {
                let ok = |authority: &str| host_allowed(authority, &allowed, beyond_loopback);
                host.is_none_or(ok)
                    && origin.is_none_or(|o| {
                        o == "null"
                            || o.split_once("://").is_some_and(|(_, rest)| {
                                let rest = rest.trim_end_matches('/');
                                host_allowed(rest, &allowed, false)
                                    || host.is_some_and(|h| h.eq_ignore_ascii_case(rest))
                            })
                    })
            });
        }
        let shutdown = async move {
            any_signal(&mut signals).await;
            let first = tokio::time::Instant::now();
            // A second one during the drain ends the process at once, 128+N: the user
            // insists. Not one within a second of the first: a wrapper that passes a
            // terminal's Ctrl-C on (npm, concurrently) sends it twice.
            tokio::spawn(async move {
                loop {
                    let n = any_signal(&mut signals).await;
                    if first.elapsed() >= Duration::from_secs(1) {
                        // (Not `eprintln!`, which panics when stderr is gone, as after a
                        // terminal's hang-up: the exit must happen.)
                        let _ = std::io::Write::write_all(
                            &mut std::io::stderr(),
                            b"mcpwire serve: a second signal: exiting without the drain\n",
                        );
                        std::process::exit(128 + n);
                    }
                }
            });
        };
        let served = serve(
            listener,
            HttpServer::new(config),
            HttpDemo::default(),
            host,
            shutdown,
        )
        .await;
        if let Some(task) = renewing {
            task.abort();
            let _ = task.await;
        }
        drop(claim); // the number is free again at once
        match served {
            Ok(()) => 0,
            Err(e) => {
                say!("mcpwire serve: {e}");
                1
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv6 address given to `--allow-host` with or without its brackets matches the Host
    /// header's form, which has them: without them it never matched, and every request got
    /// 403 (found by a review of the CLI).
    #[test]
    fn an_allowed_ipv6_host_matches_with_or_without_brackets() {
        for allowed in ["2001:db8::5", "[2001:db8::5]"] {
            let allowed = vec![allowed.to_owned()];
            assert!(host_allowed("[2001:db8::5]:443", &allowed, false));
            assert!(host_allowed("[2001:DB8::5]", &allowed, false));
            assert!(!host_allowed("[2001:db8::6]:443", &allowed, false));
        }
    }

    #[test]
    fn a_redis_urls_password_is_not_shown() {
        for (url, shown) in [
            (
                "redis://:sekrit@10.0.0.1:6379/0",
                "redis://:***@10.0.0.1:6379/0",
            ),
            ("redis://app:sekrit@host/", "redis://app:***@host/"),
            ("redis://app@host/", "redis://app@host/"),
            ("redis://host:6379/", "redis://host:6379/"),
            ("redis://:p@ss@host", "redis://:***@host"),
            // A password with a `/`, `?` or `#` (unencoded base64, say) was shown whole.
            (
                "redis://default:ab/cd@host:6379/",
                "redis://default:***@host:6379/",
            ),
            ("redis://:ab?cd@host/0", "redis://:***@host/0"),
            (
                "redis://u:a#b@host/0?pass=x",
                "redis://u:***@host/0?pass=***",
            ),
            ("redis://ab/cd@host", "redis://***@host"),
            (
                "redis+unix:///run/redis.sock?db=1",
                "redis+unix:///run/redis.sock?db=1",
            ),
            (
                "redis+unix:///run/redis.sock?db=1&pass=sekrit",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "unix:///s.sock?password=sekrit",
                "unix:///s.sock?password=***",
            ),
            ("not a url", "not a url"),
        ] {
            assert_eq!(without_password(url), shown);
        }
    }

    /// Feeds one line to the demo server's connection, and its events to the server.
    fn feed(conn: &mut Connection, server: &mut Server, line: &str) {
        conn.handle_input(Timestamp::ZERO, format!("{line}\n").as_bytes());
        while let Some(ev) = conn.poll_event() {
            let ev = ev.to_owned_event();
            server.on_event(conn, Timestamp::ZERO, ev);
        }
    }

    /// The demo server after a 2025-11-25 handshake, its output bound lowered to 100 bytes
    /// and empty.
    fn ready_with_a_100_byte_output() -> (Connection, Server) {
        let mut config = demo_config(false);
        config.limits.max_buffered_output = 100;
        let mut conn = Connection::new(config, Timestamp::ZERO).unwrap();
        let mut server = Server::default();
        feed(
            &mut conn,
            &mut server,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        );
        feed(
            &mut conn,
            &mut server,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert!(written(&mut conn).contains(r#""id":0,"result""#));
        (conn, server)
    }

    /// Everything the connection has written, as text.
    fn written(conn: &mut Connection) -> String {
        let mut out = Vec::new();
        while let Some(t) = conn.poll_transmit() {
            out.extend_from_slice(t.bytes);
            let n = t.bytes.len();
            conn.consume_transmit(n);
        }
        String::from_utf8(out).unwrap()
    }

    /// The countdown's answer, refused because its progress report filled the output
    /// (`OutputFull`), is given again once the client has read: it was reported on stderr
    /// and lost, and the call waited for its client's timeout.
    #[test]
    fn an_answer_refused_for_a_full_output_is_given_later() {
        let (mut conn, mut server) = ready_with_a_100_byte_output();
        feed(
            &mut conn,
            &mut server,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countdown","arguments":{"steps":1},"_meta":{"progressToken":"p"}}}"#,
        );
        // The step: its progress report crosses the 100-byte bound, and the answer after it
        // is refused for now.
        let step = server.next_timer().expect("the countdown's step");
        server.fire_timers(&mut conn, step);
        let first = written(&mut conn);
        assert!(first.contains(r#""progressToken":"p""#), "{first}");
        assert!(!first.contains(r#""id":7"#), "{first}");
        // The client has read it: the answer comes at the retry.
        let retry = server.next_timer().expect("the answer's retry");
        assert_eq!(retry, step.after(RETRY_ANSWER));
        server.fire_timers(&mut conn, retry);
        let second = written(&mut conn);
        assert!(
            second.contains(r#""id":7,"result""#) && second.contains("countdown of 1 finished"),
            "{second}"
        );
        assert_eq!(server.next_timer(), None);
    }

    /// In 2026-07-28, the answers that are not results are given again too: an `ask` call's
    /// "input required" and a missing capability's -32021 were dropped when the output was
    /// full (and a reviewed listen's grant, which goes the same way).
    #[test]
    fn an_input_required_answer_refused_for_a_full_output_is_given_later() {
        let mut config = demo_config(false);
        config.limits.max_buffered_output = 100;
        let mut conn = Connection::new(config, Timestamp::ZERO).unwrap();
        let mut server = Server::default();
        let meta = |caps: &str| {
            format!(
                r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{caps}}}"#
            )
        };
        // An answer that fills the output (there was room for it).
        let fill = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}},{}}}}}"#,
            "x".repeat(200),
            meta("{}")
        );
        feed(&mut conn, &mut server, &fill);
        for (id, caps, expect) in [
            (
                2,
                r#"{"elicitation":{}}"#,
                r#""resultType":"input_required""#,
            ),
            (3, "{}", r#""code":-32021"#),
        ] {
            feed(
                &mut conn,
                &mut server,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ask","arguments":{{}},{}}}}}"#,
                    meta(caps)
                ),
            );
            let first = written(&mut conn);
            assert!(!first.contains(&format!(r#""id":{id}"#)), "{first}");
            let retry = server.next_timer().expect("the answer's retry");
            server.fire_timers(&mut conn, retry);
            let second = written(&mut conn);
            assert!(
                second.contains(&format!(r#""id":{id}"#)) && second.contains(expect),
                "{second}"
            );
            // Full again for the next one.
            feed(
                &mut conn,
                &mut server,
                &fill.replace(r#""id":1"#, &format!(r#""id":{}"#, id + 10)),
            );
        }
    }

    /// A request cancelled while its answer waits for a retry takes the retry with it.
    #[test]
    fn a_cancelled_request_drops_its_answers_retry() {
        let (mut conn, mut server) = ready_with_a_100_byte_output();
        // Quick answers until one is refused (the one that crosses the 100-byte bound is
        // taken, the next waits for a retry).
        let mut id = 0;
        while server.next_timer().is_none() {
            id += 1;
            assert!(id < 10, "no answer was refused");
            feed(
                &mut conn,
                &mut server,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"t"}}}}}}"#
                ),
            );
        }
        feed(
            &mut conn,
            &mut server,
            &format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
            ),
        );
        assert_eq!(server.next_timer(), None);
    }
}
