//! An MCP server over stdio on tokio, in about 100 lines: the tool `echo` {text}, the resource
//! `mem://greeting` and the prompt `greet`, in both protocol eras. Params are read into a Rust
//! type with serde (`RawJson::parse`) and the answer is a typed result (`respond_typed`).
//!
//! `cargo run -p mcpwire-tokio --example tokio_stdio_server`, under any MCP client.
//!
//! SIGINT or SIGTERM closes gracefully: the answers given are written, within the close's
//! grace and a second more (a client that has stopped reading gets no longer), and a second
//! signal ends it at once.

use mcpwire::jsonrpc::RawJson;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::stdio::{self, Driver};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Deserialize)]
struct Call<'a> {
    // Borrowed from the frame where it can be, owned where it cannot (a name with escapes,
    // as clients that escape non-ASCII send it): a plain `&str` fails on those.
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let config = Config::server("mcpwire-tokio-example", "1.0")
        .with_capabilities(r#"{"tools":{},"resources":{},"prompts":{}}"#)
        .expect("capabilities");
    // stdio::stdin/stdout wait on the reactor (tokio::io's hand every read and write to a
    // thread pool); both leave the parent's descriptors as they were.
    let mut io = Driver::new(config, stdio::stdin(), stdio::stdout()).expect("config");
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    const GRACE: Duration = Duration::from_secs(2);
    // Armed by the first signal: the end of the wait for the close.
    let drained = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(drained);
    let mut stopping = false;
    loop {
        let event = tokio::select! {
            e = io.next_event() => match e? { Some(e) => e, None => break }, // cancel-safe
            _ = async { tokio::select! { _ = interrupt.recv() => {}, _ = terminate.recv() => {} } } => {
                if stopping {
                    std::process::exit(1); // a second signal: at once
                }
                stopping = true;
                io.close(GRACE); // then run until closed
                drained.as_mut().reset(tokio::time::Instant::now() + GRACE + Duration::from_secs(1));
                continue;
            }
            // The close waits for the answers given to be written: not for ever on a client
            // that stopped reading.
            _ = &mut drained, if stopping => {
                eprintln!("tokio_stdio_server: the client is not reading; exiting without the graceful close");
                std::process::exit(1);
            }
        };
        let OwnedEvent::Request { id, method, params } = event else {
            continue;
        };
        let params = params.as_deref().map(RawJson::new).and_then(Result::ok);
        // Ok(result), or Err((code, message)): the errors the spec's pages give for each case.
        let member = |name: &str| {
            params
                .and_then(|p| p.get_unique(name).ok().flatten())
                .and_then(|v| v.as_str())
                .map(|v| v.to_str().into_owned())
        };
        let result = match method.as_str() {
            // Every list fits on one page: a cursor is one this server never gave (the
            // spec's pagination page: -32602).
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list"
                if params.is_some_and(|p| !matches!(p.get_unique("cursor"), Ok(None))) =>
            {
                Err((-32602, "Invalid params: unknown cursor"))
            }
            "tools/list" => Ok(
                json!({"tools":[{"name":"echo","inputSchema":{"type":"object",
                "properties":{"text":{"type":"string"}},"required":["text"]}}]}),
            ),
            "tools/call" => match params.and_then(|p| p.parse::<Call<'_>>().ok()) {
                Some(call) if call.name == "echo" => {
                    // Arguments the tool cannot use are a tool error the model can read.
                    Ok(match call.arguments.get("text").and_then(|t| t.as_str()) {
                        Some(text) => {
                            json!({"content":[Text { kind: "text", text }],"isError":false})
                        }
                        None => json!({"content":[Text { kind: "text",
                            text: "echo needs a string argument 'text'" }],"isError":true}),
                    })
                }
                Some(_) => Err((-32602, "Unknown tool")),
                None => Err((-32602, "Invalid params")),
            },
            "resources/list" => {
                Ok(json!({"resources":[{"uri":"mem://greeting","name":"greeting"}]}))
            }
            "resources/templates/list" => Ok(json!({"resourceTemplates":[]})),
            "resources/read" if member("uri").as_deref() == Some("mem://greeting") => Ok(
                json!({"contents":[{"uri":"mem://greeting","mimeType":"text/plain",
                    "text":"Hello from mcpwire on tokio"}]}),
            ),
            // -32002 is sent as the version's "resource not found" code (-32602 in 2026-07-28).
            "resources/read" => Err((mcpwire::mcp::RESOURCE_NOT_FOUND, "Resource not found")),
            "prompts/list" => Ok(json!({"prompts":[{"name":"greet"}]})),
            "prompts/get" if member("name").as_deref() == Some("greet") => Ok(
                json!({"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}]}),
            ),
            "prompts/get" => Err((-32602, "Unknown prompt")),
            _ => Err((-32601, "Method not found")),
        };
        // Refused only when the request is gone (cancelled, or the session ended).
        let _sent = match result {
            Ok(result) => io.connection().respond_typed(id.as_id(), &result).is_ok(),
            Err((code, message)) => io
                .connection()
                .respond_error(id.as_id(), code, message, None)
                .is_ok(),
        };
    }
    // Everything is written. Where stdin is read on tokio's blocking pool (other systems than
    // Linux), a read that waits cannot be cancelled, and the runtime's end would wait for
    // input: the process ends here instead.
    std::process::exit(0)
}
