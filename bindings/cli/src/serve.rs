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
use mcpwire::conn::{Config, Connection, RequestId};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::mcp::{Caps, Era, LogLevel};

const README: &str = "mcpwire demo server: a sans-IO MCP engine driven by a std loop.";
const NAMES: [&str; 5] = ["Ada", "Alan", "Barbara", "Grace", "Linus"];

/// Work scheduled for later (a countdown step).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: std::cmp::Reverse<Instant>,
    id: Vec<u8>,
    step: u64,
    of: u64,
}

struct Server {
    conn: Connection,
    start: Instant,
    timers: BinaryHeap<Timer>,
    /// Handshake era: the level set with logging/setLevel.
    level: Option<LogLevel>,
    subscriptions: HashSet<String>,
    /// Handshake era: our sampling/elicitation requests, by the tool call waiting on them.
    asking: HashMap<RequestId, OwnedId>,
    /// Countdown tool calls in progress, by the id's text.
    pending_countdowns: HashMap<String, OwnedId>,
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

impl Server {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    fn answer(&mut self, id: &OwnedId, result: Result<Value, (i64, String)>) {
        let _ = match result {
            Ok(v) => {
                let text = v.to_string();
                match RawJson::new(&text) {
                    Ok(raw) => self.conn.respond(id.as_id(), raw),
                    Err(_) => self
                        .conn
                        .respond_error(id.as_id(), -32603, "internal error", None),
                }
            }
            Err((code, message)) => self.conn.respond_error(id.as_id(), code, &message, None),
        };
    }

    fn log(&mut self, id: &OwnedId, level: LogLevel, data: &str) {
        let data = json!(data).to_string();
        let Ok(raw) = RawJson::new(&data) else { return };
        match self.conn.era() {
            Some(Era::Modern) => {
                let _ = self.conn.log(id.as_id(), level, Some("demo"), raw);
            }
            _ => {
                if self.level.is_some_and(|min| level >= min) {
                    let _ = self.conn.log(id.as_id(), level, Some("demo"), raw);
                }
            }
        }
    }

    fn on_request(&mut self, id: OwnedId, method: &str, params: Option<String>) {
        let params: Value = params
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        let arg = |k: &str| params.get("arguments").and_then(|a| a.get(k)).cloned();
        let result: Result<Value, (i64, String)> = match method {
            "tools/list" => Ok(tools()),
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                match name {
                    "echo" => Ok(text_result(
                        arg("text")
                            .and_then(|t| t.as_str().map(str::to_owned))
                            .as_deref()
                            .unwrap_or(""),
                    )),
                    "add" => match (
                        arg("a").and_then(|v| v.as_i64()),
                        arg("b").and_then(|v| v.as_i64()),
                    ) {
                        (Some(a), Some(b)) => Ok(text_result(&a.saturating_add(b).to_string())),
                        _ => Ok(
                            json!({"content": [{"type": "text", "text": "a and b must be integers"}], "isError": true}),
                        ),
                    },
                    "countdown" => {
                        let steps = arg("steps")
                            .and_then(|v| v.as_u64())
                            .unwrap_or(3)
                            .clamp(1, 20);
                        self.log(&id, LogLevel::Info, "countdown started");
                        self.timers.push(Timer {
                            at: std::cmp::Reverse(Instant::now() + Duration::from_millis(100)),
                            id: id.to_string().into_bytes(),
                            step: 1,
                            of: steps,
                        });
                        self.pending_countdowns.insert(id.to_string(), id.clone());
                        return;
                    }
                    "ask" => return self.ask(id, &params),
                    "touch" => {
                        let uri = arg("uri")
                            .and_then(|u| u.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        let p = json!({"uri": uri}).to_string();
                        let notified = if self.conn.era() == Some(Era::Modern)
                            || self.subscriptions.contains(&uri)
                        {
                            RawJson::new(&p)
                                .ok()
                                .map(|raw| {
                                    self.conn
                                        .notify("notifications/resources/updated", Some(raw))
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
                    other => Ok(
                        json!({"content": [{"type": "text", "text": format!("unknown tool {other}")}], "isError": true}),
                    ),
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
                } else if let Some(item) = uri.strip_prefix("demo://items/") {
                    Ok(
                        json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": json!({"id": item, "label": format!("item {item}")}).to_string()}]}),
                    )
                } else {
                    let code = self
                        .conn
                        .protocol_version()
                        .map(mcpwire::mcp::resource_not_found_code)
                        .unwrap_or(-32002);
                    Err((code, format!("Resource not found: {uri}")))
                }
            }
            "resources/subscribe" => {
                if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                    self.subscriptions.insert(uri.to_owned());
                }
                Ok(json!({}))
            }
            "resources/unsubscribe" => {
                if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                    self.subscriptions.remove(uri);
                }
                Ok(json!({}))
            }
            "prompts/list" => Ok(json!({"prompts": [
                {"name": "greet", "description": "Greets someone", "arguments": [{"name": "name", "description": "Who to greet", "required": false}]}
            ]})),
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
        self.answer(&id, result);
    }

    /// `ask`: elicitation if the client supports it, else sampling.
    fn ask(&mut self, id: OwnedId, params: &Value) {
        let question = params
            .get("arguments")
            .and_then(|a| a.get("question"))
            .and_then(Value::as_str)
            .unwrap_or("What is your name?")
            .to_owned();
        if self.conn.era() == Some(Era::Modern) {
            // Stateless: a retry carries the answers.
            if let Some(responses) = params.get("inputResponses") {
                let answer = responses.get("answer").cloned().unwrap_or(Value::Null);
                return self.answer(
                    &id,
                    Ok(text_result(&format!("the client answered: {answer}"))),
                );
            }
            let caps = self
                .conn
                .request_context(id.as_id())
                .map(|c| c.client_capabilities)
                .unwrap_or(Caps::EMPTY);
            let request = if caps.contains(Caps::ELICITATION) {
                json!({"answer": {"method": "elicitation/create", "params": {"mode": "form", "message": question,
                    "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}})
            } else if caps.contains(Caps::SAMPLING) {
                json!({"answer": {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": question}}], "maxTokens": 100}}})
            } else {
                return self.answer(
                    &id,
                    Ok(text_result("the client can neither elicit nor sample")),
                );
            };
            let text = request.to_string();
            let raw = RawJson::new(&text).ok();
            if self
                .conn
                .respond_input_required(id.as_id(), raw, Some("ask-1"))
                .is_err()
            {
                self.answer(&id, Ok(text_result("could not ask the client")));
            }
            return;
        }
        let caps = self
            .conn
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
            return self.answer(
                &id,
                Ok(text_result("the client can neither elicit nor sample")),
            );
        };
        let text = body.to_string();
        let now = self.now();
        match RawJson::new(&text)
            .ok()
            .map(|raw| self.conn.request(now, method, Some(raw)))
        {
            Some(Ok(request)) => {
                self.asking.insert(request, id);
            }
            _ => self.answer(&id, Ok(text_result("could not ask the client"))),
        }
    }

    fn on_answer(&mut self, request: RequestId, outcome: Result<String, String>) {
        if let Some(id) = self.asking.remove(&request) {
            let text = match outcome {
                Ok(result) => format!("the client answered: {result}"),
                Err(e) => format!("the client declined: {e}"),
            };
            self.answer(&id, Ok(text_result(&text)));
        }
    }

    fn fire_timers(&mut self) {
        while self.timers.peek().is_some_and(|t| t.at.0 <= Instant::now()) {
            let Some(t) = self.timers.pop() else { break };
            let key = String::from_utf8_lossy(&t.id).into_owned();
            let Some(id) = self.pending_countdowns.get(&key).cloned() else {
                continue;
            };
            let _ = self.conn.progress(
                id.as_id(),
                t.step as f64,
                Some(t.of as f64),
                Some(&format!("step {} of {}", t.step, t.of)),
            );
            self.log(&id, LogLevel::Debug, &format!("step {}", t.step));
            if t.step >= t.of {
                self.pending_countdowns.remove(&key);
                self.answer(
                    &id,
                    Ok(text_result(&format!("countdown of {} finished", t.of))),
                );
            } else {
                self.timers.push(Timer {
                    at: std::cmp::Reverse(Instant::now() + Duration::from_millis(100)),
                    id: t.id,
                    step: t.step + 1,
                    of: t.of,
                });
            }
        }
    }
}

pub fn run(legacy_only: bool) -> i32 {
    let mut config = Config::server("mcpwire-demo", env!("CARGO_PKG_VERSION"));
    config.capabilities = mcpwire::mcp::Capabilities::parse(
        r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"completions":{},"logging":{}}"#,
    )
    .expect("valid capabilities");
    config.instructions = Some("A demo server: try the countdown and ask tools.".to_owned());
    if legacy_only {
        config.versions = mcpwire::mcp::ProtocolVersion::LEGACY.to_vec();
    }
    let start = Instant::now();
    let Ok(conn) = Connection::new(config, Timestamp::ZERO) else {
        return 1;
    };
    let mut server = Server {
        conn,
        start,
        timers: BinaryHeap::new(),
        level: None,
        subscriptions: HashSet::new(),
        asking: HashMap::new(),
        pending_countdowns: HashMap::new(),
    };
    // The library's blocking loop: answers are written before more input is read (so a
    // client that does not read our output is slowed down, not buffered), and every answer
    // already given is written before the loop reports the end of input.
    let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
    let mut io = Io::new(std::io::stdin(), std::io::stdout(), clock);
    loop {
        server.fire_timers();
        // Wake for our own timers (the countdown) as well as the engine's.
        let until = server.timers.peek().map(|t| {
            let wait = t.at.0.saturating_duration_since(Instant::now());
            Timestamp::from_nanos(server.now().as_nanos() + wait.as_nanos() as u64)
        });
        match io.next_event(&mut server.conn, until) {
            Ok(Ev::Request { id, method, params }) => server.on_request(id, &method, params),
            Ok(Ev::Response { request, result }) => server.on_answer(request, Ok(result)),
            Ok(Ev::Error {
                request, message, ..
            }) => server.on_answer(request, Err(message)),
            Ok(Ev::TimedOut { request }) => server.on_answer(request, Err("no answer".into())),
            Ok(Ev::PeerCancelled { id, .. }) => {
                server.pending_countdowns.remove(&id.to_string());
            }
            Ok(Ev::Closed { .. }) | Err(Stop::Eof) => return 0,
            Ok(_) | Err(Stop::Deadline) => {}
        }
    }
}
