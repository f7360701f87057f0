//! `mcpwire demo`: the whole protocol at work, with nothing to install. A client engine talks to
//! this binary's own `serve` over real OS pipes, once in each era, and prints the transcript.

use std::time::Duration;

use serde_json::{Value, json};

use crate::driver::{Dir, Ev, Session, Transcript};
use mcpwire::conn::{ClientEra, Config, RequestOptions};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::ProtocolVersion;

const LIMIT: Duration = Duration::from_secs(10);

/// Prints one line per message that crossed the pipes.
fn printer() -> Transcript {
    let mut partial: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    Box::new(move |dir, bytes| {
        let slot = &mut partial[dir as usize];
        slot.extend_from_slice(bytes);
        while let Some(nl) = slot.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = slot.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            let arrow = match dir {
                Dir::Sent => "  client → server ",
                Dir::Received => "  client ← server ",
            };
            let label = serde_json::from_str::<Value>(text)
                .ok()
                .map(|v| match (v.get("method"), v.get("id")) {
                    (Some(m), Some(id)) => format!("{} #{}", m.as_str().unwrap_or("?"), id),
                    (Some(m), None) => m.as_str().unwrap_or("?").to_owned(),
                    (None, Some(id)) if v.get("error").is_some() => format!("error #{id}"),
                    (None, Some(id)) => format!("result #{id}"),
                    _ => "?".to_owned(),
                })
                .unwrap_or_else(|| "(not JSON)".to_owned());
            let body: String = text.chars().take(100).collect();
            let more = if text.chars().count() > 100 {
                "…"
            } else {
                ""
            };
            crate::out::line(format_args!("{arrow}{label:<34} {body}{more}"));
        }
    })
}

fn heading(text: &str) {
    crate::out::line(format_args!("\n── {text} ──"));
}

fn note(text: &str) {
    crate::out::line(format_args!("   · {text}"));
}

/// Sends a request, answers what the server asks meanwhile, and returns the result.
fn call(
    s: &mut Session,
    method: &str,
    params: &str,
    options: RequestOptions,
) -> Result<Value, String> {
    let now = s.now();
    let id = s
        .conn()
        .request_with(
            now,
            method,
            Some(RawJson::new(params).map_err(|e| e.to_string())?),
            options,
        )
        .map_err(|e| format!("{method}: {e}"))?;
    let mut input_required = None;
    let out = s
        .run_until(LIMIT, |conn, _, ev| match ev {
            Ev::Request { id: rid, method: m, .. } => {
                let answer = match m.as_str() {
                    "elicitation/create" => r#"{"action":"accept","content":{"answer":"forty-two"}}"#,
                    "sampling/createMessage" => r#"{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"demo","stopReason":"endTurn"}"#,
                    "roots/list" => r#"{"roots":[]}"#,
                    _ => "{}",
                };
                if let Ok(raw) = RawJson::new(answer) {
                    let _ = conn.respond(rid.as_id(), raw);
                }
                None
            }
            Ev::Response { request, result } if request == id => Some(Ok(result)),
            Ev::Error { request, code, message, .. } if request == id => Some(Err(format!("{code} {message}"))),
            Ev::InputRequired { request, input_requests, .. } if request == id => {
                input_required = input_requests;
                Some(Ok(String::new()))
            }
            Ev::TimedOut { request: r } | Ev::Abandoned { request: r } if r == id => Some(Err(format!("{method}: no answer"))),
            Ev::Closed { reason } => Some(Err(format!("closed: {reason:?}"))),
            _ => None,
        })
        .map_err(|e| format!("{method}: {e:?}"))??;
    if let Some(requests) = input_required {
        return Ok(
            json!({"inputRequired": serde_json::from_str::<Value>(&requests).unwrap_or(Value::Null), "request": id.0}),
        );
    }
    serde_json::from_str(&out).map_err(|e| e.to_string())
}

fn spawn_self(config: Config) -> Result<Session, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let argv = vec![me.display().to_string(), "serve".to_owned()];
    let mut s = Session::spawn(&argv, config, true).map_err(|e| e.to_string())?;
    s.set_transcript(printer());
    Ok(s)
}

fn ready(s: &mut Session) -> Result<ProtocolVersion, String> {
    s.run_until(LIMIT, |_, _, ev| match ev {
        Ev::Ready { version: v } => Some(Ok(v)),
        Ev::Closed { reason: r } => Some(Err(format!("{r:?}"))),
        _ => None,
    })
    .map_err(|e| format!("{e:?}"))?
}

fn handshake_era() -> Result<(), String> {
    heading("1. The handshake era (2025-11-25): one session, both directions");
    let mut config = Config::client("mcpwire-demo-client", env!("CARGO_PKG_VERSION"))
        .with_capabilities(r#"{"elicitation":{},"roots":{}}"#)
        .map_err(|e| e.to_string())?;
    config.versions = vec![ProtocolVersion::V2025_11_25];
    let mut s = spawn_self(config)?;
    let v = ready(&mut s)?;
    note(&format!(
        "initialize → result → initialized: negotiated {v}"
    ));
    let tools = call(&mut s, "tools/list", "{}", RequestOptions::default())?;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    note(&format!("tools: {}", names.join(", ")));
    let echo = call(
        &mut s,
        "tools/call",
        r#"{"name":"echo","arguments":{"text":"héllo, wire"}}"#,
        RequestOptions::default(),
    )?;
    note(&format!("echo answered {}", echo["content"][0]["text"]));
    call(
        &mut s,
        "logging/setLevel",
        r#"{"level":"info"}"#,
        RequestOptions::default(),
    )?;
    note("logging/setLevel info: the countdown below logs as it runs");
    let done = call(
        &mut s,
        "tools/call",
        r#"{"name":"countdown","arguments":{"steps":3}}"#,
        RequestOptions {
            progress: true,
            ..Default::default()
        },
    )?;
    note(&format!(
        "countdown with a progress token: {}",
        done["content"][0]["text"]
    ));
    let asked = call(
        &mut s,
        "tools/call",
        r#"{"name":"ask","arguments":{"question":"What is the answer?"}}"#,
        RequestOptions::default(),
    )?;
    note(&format!(
        "ask: the server sent elicitation/create to the client mid-call; {}",
        asked["content"][0]["text"]
    ));
    let item = call(
        &mut s,
        "resources/read",
        r#"{"uri":"demo://items/7"}"#,
        RequestOptions::default(),
    )?;
    note(&format!(
        "resources/read on the template demo://items/{{id}}: {}",
        item["contents"][0]["text"]
    ));
    call(
        &mut s,
        "resources/subscribe",
        r#"{"uri":"demo://readme"}"#,
        RequestOptions::default(),
    )?;
    call(
        &mut s,
        "tools/call",
        r#"{"name":"touch","arguments":{"uri":"demo://readme"}}"#,
        RequestOptions::default(),
    )?;
    note("subscribed to demo://readme, then touched it: notifications/resources/updated");
    let prompt = call(
        &mut s,
        "prompts/get",
        r#"{"name":"greet","arguments":{"name":"Ada"}}"#,
        RequestOptions::default(),
    )?;
    note(&format!(
        "prompt: {}",
        prompt["messages"][0]["content"]["text"]
    ));
    let completion = call(
        &mut s,
        "completion/complete",
        r#"{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"name","value":"a"}}"#,
        RequestOptions::default(),
    )?;
    note(&format!(
        "completions for \"a\": {}",
        completion["completion"]["values"]
    ));
    call(&mut s, "ping", "{}", RequestOptions::default())?;
    note("ping answered");
    let _ = s.shutdown();
    note("closed the server's stdin: it exits, as the spec asks");
    Ok(())
}

fn stateless_era() -> Result<(), String> {
    heading("2. The stateless era (2026-07-28): no handshake, every request stands alone");
    let mut config = Config::client("mcpwire-demo-client", env!("CARGO_PKG_VERSION"))
        .with_capabilities(r#"{"elicitation":{}}"#)
        .map_err(|e| e.to_string())?;
    config.client_era = ClientEra::Auto;
    let mut s = spawn_self(config)?;
    let v = ready(&mut s)?;
    note(&format!(
        "auto mode probed with server/discover and adopted {v}"
    ));
    let listen = s.now();
    let _ = s.conn().request(listen, "subscriptions/listen", RawJson::new(r#"{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["demo://readme"]}}"#).ok());
    s.run_until(LIMIT, |_, _, ev| matches!(ev, Ev::Notification { ref method, .. } if method == "notifications/subscriptions/acknowledged").then_some(()))
        .map_err(|e| format!("{e:?}"))?;
    note("subscriptions/listen: acknowledged; notifications now carry its subscriptionId");
    call(
        &mut s,
        "tools/call",
        r#"{"name":"touch","arguments":{"uri":"demo://readme"}}"#,
        RequestOptions::default(),
    )?;
    note("touch: the update went to the listen stream");
    let first = call(
        &mut s,
        "tools/call",
        r#"{"name":"ask","arguments":{"question":"What is the answer?"}}"#,
        RequestOptions::default(),
    )?;
    let request = first["request"].as_i64().unwrap_or(0);
    note("ask: the server answered \"input required\" with an elicitation request");
    let now = s.now();
    let retry = s
        .conn()
        .retry(
            now,
            mcpwire::conn::RequestId(request),
            RawJson::new(r#"{"answer":{"action":"accept","content":{"answer":"forty-two"}}}"#).ok(),
        )
        .map_err(|e| e.to_string())?;
    let result = s
        .run_until(LIMIT, |_, _, ev| match ev {
            Ev::Response { request, result } if request == retry => Some(result),
            _ => None,
        })
        .map_err(|e| format!("{e:?}"))?;
    let result: Value = serde_json::from_str(&result).unwrap_or(Value::Null);
    note(&format!(
        "retried with a new id, the input responses and requestState: {}",
        result["content"][0]["text"]
    ));
    let _ = s.shutdown();
    Ok(())
}

pub fn run() -> i32 {
    crate::out::line(format_args!(
        "mcpwire demo: a client engine drives `mcpwire serve` over OS pipes."
    ));
    crate::out::line(format_args!(
        "Each line is one message on the wire; notes (·) say what just happened."
    ));
    for part in [handshake_era as fn() -> Result<(), String>, stateless_era] {
        if let Err(e) = part() {
            // Stopped by a signal (passed on to the demo server): end as a shell reports it.
            if let Some(signal) = crate::signals::caught() {
                say!("demo stopped by signal {signal}");
                return 128 + signal;
            }
            say!("demo failed: {e}");
            return 1;
        }
    }
    crate::out::line(format_args!(
        "\nDone. Next: `mcpwire probe -- <your server command>` inspects any stdio server."
    ));
    0
}
