//! An MCP server over stdio on tokio, in about 50 lines: the tool `echo` {text}, the resource
//! `mem://greeting` and the prompt `greet`, in both protocol eras. Params are read into a Rust
//! type with serde (`RawJson::parse`) and the answer is a typed result (`respond_typed`).
//!
//! `cargo run -p mcpwire-tokio --example tokio_stdio_server`, under any MCP client.

use mcpwire::jsonrpc::RawJson;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::stdio::{self, Driver};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize)]
struct Call<'a> {
    name: &'a str,
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
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut stopping = false;
    loop {
        let event = tokio::select! {
            e = io.next_event() => match e? { Some(e) => e, None => break }, // cancel-safe
            _ = &mut ctrl_c, if !stopping => {
                stopping = true;
                io.close(std::time::Duration::from_secs(2)); // then run until closed
                continue;
            }
        };
        let OwnedEvent::Request { id, method, params } = event else {
            continue;
        };
        let params = params.as_deref().map(RawJson::new).and_then(Result::ok);
        let result = match method.as_str() {
            "tools/list" => json!({"tools":[{"name":"echo","inputSchema":{"type":"object",
                "properties":{"text":{"type":"string"}},"required":["text"]}}]}),
            "tools/call" => match params.and_then(|p| p.parse::<Call<'_>>().ok()) {
                Some(call) if call.name == "echo" => {
                    let text = call
                        .arguments
                        .get("text")
                        .and_then(|t| t.as_str())
                        .unwrap_or("");
                    json!({"content":[Text { kind: "text", text }],"isError":false})
                }
                _ => {
                    json!({"content":[Text { kind: "text", text: "unknown tool" }],"isError":true})
                }
            },
            "resources/list" => json!({"resources":[{"uri":"mem://greeting","name":"greeting"}]}),
            "resources/read" => json!({"contents":[{"uri":"mem://greeting","mimeType":"text/plain",
                "text":"Hello from mcpwire on tokio"}]}),
            "prompts/list" => json!({"prompts":[{"name":"greet"}]}),
            "prompts/get" => {
                json!({"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}]})
            }
            _ => json!({}),
        };
        let _ = io.connection().respond_typed(id.as_id(), &result); // refused: the request is gone
    }
    Ok(())
}
