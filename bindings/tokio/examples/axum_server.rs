//! An MCP server over Streamable HTTP inside an axum app: `McpService` is routed at `/mcp`
//! next to the app's own routes. It serves the tool `echo` {text}, the resource
//! `mem://greeting` and the prompt `greet`, in both protocol eras, and shuts down gracefully on
//! Ctrl-C or SIGTERM.
//!
//! `cargo run -p mcpwire-tokio --example axum_server -- 127.0.0.1:8080`, then point any MCP
//! client at the URL it prints.

use std::time::Duration;

use axum::{Router, routing::get};
use mcpwire::http::{HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::RawJson;
use mcpwire::{Config, OwnedEvent, Timestamp};
use mcpwire_tokio::http::{Application, HostConfig, McpService};
use serde_json::{Value, json};

/// The MCP side of the app: answers every request as it arrives.
struct Mcp;

impl Application for Mcp {
    fn drive(&mut self, _now: Timestamp, server: &mut HttpServer) {
        while let Some((key, event)) = server.poll_event() {
            let OwnedEvent::Request { id, method, params } = event.to_owned_event() else {
                continue;
            };
            let result = answer(&method, params.as_deref());
            if let Some(conn) = server.connection(key) {
                let _ = conn.respond_typed(id.as_id(), &result); // refused: the client left
            }
        }
        server.pump();
    }
}

fn answer(method: &str, params: Option<&str>) -> Value {
    let params: Value = params
        .and_then(|p| RawJson::new(p).ok()?.parse().ok())
        .unwrap_or_default();
    match method {
        "tools/list" => json!({"tools":[{"name":"echo","inputSchema":{"type":"object",
            "properties":{"text":{"type":"string"}},"required":["text"]}}]}),
        "tools/call" if params["name"] == "echo" => {
            json!({"content":[{"type":"text","text":params["arguments"]["text"]}]})
        }
        "tools/call" => json!({"content":[{"type":"text","text":"unknown tool"}],"isError":true}),
        "resources/list" => json!({"resources":[{"uri":"mem://greeting","name":"greeting"}]}),
        "resources/read" => json!({"contents":[{"uri":"mem://greeting","text":"Hello from axum"}]}),
        "prompts/list" => json!({"prompts":[{"name":"greet"}]}),
        "prompts/get" => {
            json!({"messages":[{"role":"user","content":{"type":"text","text":"Hi"}}]})
        }
        _ => json!({}),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let config = Config::server("mcpwire-axum-example", "1.0")
        .with_capabilities(r#"{"tools":{},"resources":{},"prompts":{}}"#)
        .expect("capabilities");
    let engine = HttpServer::new(HttpServerConfig::new(config));
    let (mcp, timers) = McpService::new(engine, Mcp, HostConfig::default());
    let timers = tokio::spawn(timers);
    let app = Router::new()
        .route_service("/mcp", mcp.clone())
        .route("/healthz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            stop_signal().await;
            mcp.begin_shutdown(); // GET streams end now, answers in flight go on
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                mcp.end_streams(); // the grace period is over
            });
        })
        .await?;
    timers.abort();
    Ok(())
}

async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
