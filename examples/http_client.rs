//! An MCP client over Streamable HTTP: mcpwire's sans-IO `HttpClient` driven by hyper
//! (`mcpwire_tokio::client::Client`), in both eras. It is also the client the official
//! conformance suite runs.
//!
//! Usage: `http_client URL`. With `MCP_CONFORMANCE_SCENARIO` set (as the suite does), it
//! plays that scenario; `MCP_CONFORMANCE_PROTOCOL_VERSION=2026-07-28` makes it a stateless
//! client, anything else a handshake-era one; `MCP_CONFORMANCE_CONTEXT` may list tool calls
//! to make. Without a scenario it lists the tools. It answers the server's elicitation,
//! sampling, roots and ping requests (and the same as 2026-07-28 input requests), and exits 0
//! only when every step succeeded.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use mcpwire::conn::{Config, Connection, OwnedEvent, RequestId};
use mcpwire::http::ReconnectPolicy;
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::{Caps, ProtocolVersion};
use mcpwire_tokio::client::Client;
use serde_json::{Value, json};

/// What the client does after `tools/list`.
#[derive(Debug)]
enum Step {
    /// Call a tool with these arguments.
    Call(String, Value),
    /// List resources, then read the first.
    Resources,
    /// List prompts, then get the first.
    Prompts,
}

/// A request in flight and what it was for.
#[derive(Debug, Clone)]
enum Pending {
    ListTools,
    Call(String),
    ListResources,
    ReadResource,
    ListPrompts,
    GetPrompt,
}

/// Field values from a JSON Schema's defaults (SEP-1034): what the user "accepts".
fn defaults(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (k, p) in schema["properties"].as_object().into_iter().flatten() {
        if let Some(d) = p.get("default") {
            out.insert(k.clone(), d.clone());
        } else if p["type"] == "string" {
            out.insert(k.clone(), json!("mcpwire"));
        }
    }
    Value::Object(out)
}

/// The answer to a server request (also used for 2026-07-28 input requests).
fn answer(method: &str, params: &Value) -> Option<Value> {
    match method {
        "elicitation/create" => {
            Some(json!({"action":"accept","content":defaults(&params["requestedSchema"])}))
        }
        "sampling/createMessage" => Some(json!({"role":"assistant",
            "content":{"type":"text","text":"Hello from the mcpwire example client"},
            "model":"mcpwire-example","stopReason":"endTurn"})),
        "roots/list" => Some(json!({"roots":[]})),
        "ping" => Some(json!({})),
        _ => None,
    }
}

struct Session {
    scenario: String,
    context: Value,
    pending: BTreeMap<RequestId, Pending>,
    steps: Vec<Step>,
    failures: Vec<String>,
    /// The tools `tools/list` gave.
    tools: Vec<Value>,
}

impl Session {
    fn request(
        &mut self,
        conn: &mut Connection,
        now: mcpwire::Timestamp,
        method: &str,
        params: Value,
        what: Pending,
    ) {
        let text = params.to_string();
        let Ok(raw) = RawJson::new(&text) else {
            self.failures.push(format!(
                "{method}: params nested deeper than a payload may be"
            ));
            return;
        };
        match conn.request(now, method, Some(raw)) {
            Ok(id) => {
                self.pending.insert(id, what);
            }
            Err(e) => self.failures.push(format!("{method}: {e}")),
        }
    }

    /// The steps of the scenario, once the tools are known.
    fn plan(&mut self) {
        let tools = self.tools.clone();
        let names: Vec<String> = tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        self.steps = match self.scenario.as_str() {
            "list" | "initialize" | "json-schema-ref-no-deref" | "request-metadata" => Vec::new(),
            "tools_call" => vec![Step::Call("add_numbers".into(), json!({"a":5,"b":3}))],
            "json-schema-2020-12-preservation" => {
                let focal = tools
                    .iter()
                    .find(|t| t["name"] == "json_schema_2020_12_tool")
                    .map(|t| t["inputSchema"].clone())
                    .unwrap_or(Value::Null);
                vec![Step::Call(
                    "json_schema_echo".into(),
                    json!({"schema": focal}),
                )]
            }
            "http-standard-headers" => {
                let mut s: Vec<Step> = names
                    .first()
                    .map(|n| Step::Call(n.clone(), json!({})))
                    .into_iter()
                    .collect();
                s.push(Step::Resources);
                s.push(Step::Prompts);
                s
            }
            _ => {
                if let Some(calls) = self.context["toolCalls"].as_array() {
                    calls
                        .iter()
                        .map(|c| {
                            Step::Call(
                                c["name"].as_str().unwrap_or("").to_owned(),
                                c["arguments"].clone(),
                            )
                        })
                        .collect()
                } else if matches!(
                    self.scenario.as_str(),
                    "http-invalid-tool-headers" | "sep-2322-client-request-state"
                ) {
                    names
                        .iter()
                        .map(|n| Step::Call(n.clone(), json!({})))
                        .collect()
                } else {
                    names
                        .first()
                        .map(|n| Step::Call(n.clone(), json!({})))
                        .into_iter()
                        .collect()
                }
            }
        };
    }

    fn start_steps(&mut self, conn: &mut Connection, now: mcpwire::Timestamp) {
        let steps = std::mem::take(&mut self.steps);
        for step in steps {
            match step {
                Step::Call(name, arguments) => self.request(
                    conn,
                    now,
                    "tools/call",
                    json!({"name":name,"arguments":arguments}),
                    Pending::Call(name),
                ),
                Step::Resources => self.request(
                    conn,
                    now,
                    "resources/list",
                    json!({}),
                    Pending::ListResources,
                ),
                Step::Prompts => {
                    self.request(conn, now, "prompts/list", json!({}), Pending::ListPrompts)
                }
            }
        }
    }

    fn on_result(
        &mut self,
        conn: &mut Connection,
        now: mcpwire::Timestamp,
        what: Pending,
        result: Value,
    ) {
        match what {
            Pending::ListTools => {
                self.tools = result["tools"].as_array().cloned().unwrap_or_default();
                note(&format!("{} tools", self.tools.len()));
                self.plan();
                self.start_steps(conn, now);
            }
            Pending::Call(name) => {
                // (The server's text is escaped: a tool name could drive the terminal.)
                let name = name.escape_debug();
                note(&format!("{name} -> {result}"));
                if result["isError"] == json!(true) {
                    self.failures
                        .push(format!("{name} reported an error: {result}"));
                }
            }
            Pending::ListResources => {
                if let Some(uri) = result["resources"][0]["uri"].as_str() {
                    let uri = uri.to_owned();
                    self.request(
                        conn,
                        now,
                        "resources/read",
                        json!({"uri":uri}),
                        Pending::ReadResource,
                    );
                }
            }
            Pending::ListPrompts => {
                if let Some(name) = result["prompts"][0]["name"].as_str() {
                    let name = name.to_owned();
                    self.request(
                        conn,
                        now,
                        "prompts/get",
                        json!({"name":name,"arguments":{}}),
                        Pending::GetPrompt,
                    );
                }
            }
            Pending::ReadResource | Pending::GetPrompt => {}
        }
    }
}

/// What the client knows of a failure's cause, to show next to it: the start of the server's
/// last error body, and why the last exchange that failed below HTTP did.
fn why(client: &Client) -> String {
    let mut why = String::new();
    if let Some(text) = client.http().failure_text() {
        why.push_str(&format!(" ({})", text.escape_debug()));
    }
    if let Some(text) = client.transport_error() {
        why.push_str(&format!(" ({text})"));
    }
    why
}

/// Writes `what` to stderr, if it can: `eprintln!` panics when stderr is a closed pipe, which
/// would end the process before its close, leaving the session on the server.
fn note(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "http_client: {what}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let url = match std::env::args().nth(1) {
        Some(u) => u,
        None => {
            note("usage: http_client URL");
            return ExitCode::from(2);
        }
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_else(|_| "list".into());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let stateless =
        std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() == Ok("2026-07-28");
    let mut config = Config::client("mcpwire-example-client", env!("CARGO_PKG_VERSION"))
        .with_capabilities(r#"{"elicitation":{},"sampling":{},"roots":{}}"#)
        .expect("valid capabilities");
    config.versions = if stateless {
        vec![ProtocolVersion::V2026_07_28]
    } else {
        ProtocolVersion::LEGACY.to_vec()
    };
    let mut client = match Client::new(&url, config, ReconnectPolicy::default()) {
        Ok(c) => c,
        Err(e) => {
            note(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let mut s = Session {
        scenario,
        context,
        pending: BTreeMap::new(),
        steps: Vec::new(),
        failures: Vec::new(),
        tools: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(25);
    let mut ready = false;
    // Ctrl-C or SIGTERM ends the session as the deadline does: requests in flight are
    // cancelled and the session is ended with DELETE.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    loop {
        if ready && s.pending.is_empty() {
            break;
        }
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, client.next_event()) => next,
            _ = tokio::signal::ctrl_c() => {
                s.failures.push("interrupted (SIGINT)".into());
                break;
            }
            _ = terminate.recv() => {
                s.failures.push("interrupted (SIGTERM)".into());
                break;
            }
        };
        let event = match next {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(_) => {
                s.failures.push("no answer within 25 s".into());
                break;
            }
        };
        let now = client.now();
        match event {
            OwnedEvent::Ready { version } => {
                note(&format!("ready, {}", version.as_str()));
                ready = true;
                let has_tools = client
                    .connection()
                    .peer_capabilities()
                    .is_some_and(|c| c.flags().contains(Caps::TOOLS));
                if s.scenario != "initialize" && has_tools {
                    s.request(
                        client.connection(),
                        now,
                        "tools/list",
                        json!({}),
                        Pending::ListTools,
                    );
                }
            }
            OwnedEvent::Response { request, result } => {
                if let Some(what) = s.pending.remove(&request) {
                    let result = serde_json::from_str(&result).unwrap_or(Value::Null);
                    s.on_result(client.connection(), now, what, result);
                }
            }
            OwnedEvent::InputRequired {
                request,
                input_requests,
                ..
            } => {
                // 2026-07-28: answer each input request, then retry with the answers.
                let asked: Value = input_requests
                    .as_deref()
                    .and_then(|t| serde_json::from_str(t).ok())
                    .unwrap_or(Value::Null);
                let mut responses = serde_json::Map::new();
                for (key, req) in asked.as_object().into_iter().flatten() {
                    let method = req["method"].as_str().unwrap_or("");
                    if let Some(a) = answer(method, &req["params"]) {
                        responses.insert(key.clone(), a);
                    }
                }
                let text = Value::Object(responses).to_string();
                let what = s.pending.remove(&request);
                match client.connection().retry(
                    now,
                    request,
                    Some(RawJson::new(&text).expect("JSON")),
                ) {
                    Ok(next) => {
                        if let Some(what) = what {
                            s.pending.insert(next, what);
                        }
                    }
                    Err(e) => s.failures.push(format!("retry: {e}")),
                }
            }
            OwnedEvent::Request { id, method, params } => {
                let params: Value = params
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p).ok())
                    .unwrap_or(Value::Null);
                let conn = client.connection();
                let text = answer(&method, &params).map(|v| v.to_string());
                // (The server's own values copied into the answer may nest deeper than a
                // payload may: an error then, not a panic that loses the session's end.)
                let sent = match text.as_deref().map(RawJson::new) {
                    Some(Ok(raw)) => conn.respond(id.as_id(), raw),
                    Some(Err(_)) => conn.respond_error(id.as_id(), -32603, "cannot answer", None),
                    None => conn.respond_error(id.as_id(), -32601, "Method not found", None),
                };
                if let Err(e) = sent {
                    let method = method.escape_debug();
                    s.failures.push(format!("answer to {method}: {e}"));
                }
            }
            OwnedEvent::Error {
                request,
                code,
                message,
                ..
            } => {
                if let Some(what) = s.pending.remove(&request) {
                    let message = message.escape_debug();
                    s.failures.push(format!("{what:?}: error {code} {message}"));
                }
            }
            OwnedEvent::Failed { request, reason } => {
                if let Some(what) = s.pending.remove(&request) {
                    let why = why(&client);
                    s.failures.push(format!("{what:?}: {reason}{why}"));
                }
            }
            OwnedEvent::TimedOut { request } | OwnedEvent::InvalidResponse { request } => {
                if let Some(what) = s.pending.remove(&request) {
                    s.failures.push(format!("{what:?}: no valid answer"));
                }
            }
            OwnedEvent::Closed { reason } => {
                if !ready || !s.pending.is_empty() {
                    let why = why(&client);
                    s.failures.push(format!("closed: {reason:?}{why}"));
                }
                break;
            }
            _ => {}
        }
    }
    // Close the connection (requests still in flight are cancelled: those messages go out
    // while the last events are taken), then end the session (a server that keeps none
    // answers 404 or 405, which is fine).
    if client.connection().state() != mcpwire::conn::State::Closed {
        let now = client.now();
        client.connection().close(now, Duration::ZERO);
        let last = tokio::time::Instant::now() + Duration::from_secs(2);
        while let Ok(Some(_)) = tokio::time::timeout_at(last, client.next_event()).await {}
    }
    client.end_session(Duration::from_secs(2)).await;
    // A server that keeps no session got no DELETE to wait for: the cancellations still on
    // their way are waited for here, before the runtime ends and cuts them off.
    client.flush(Duration::from_secs(2)).await;
    if !ready && s.failures.is_empty() {
        s.failures.push("the session never became ready".into());
    }
    if s.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for f in &s.failures {
            note(&format!("FAILED: {f}"));
        }
        ExitCode::from(1)
    }
}
