//! An MCP server over Streamable HTTP inside an axum app: `McpService` is routed at `/mcp`
//! next to the app's own routes. It serves the tool `echo` {text}, the resource
//! `mem://greeting` and the prompt `greet`, in both protocol eras, and shuts down gracefully on
//! Ctrl-C or SIGTERM.
//!
//! `cargo run -p mcpwire-tokio --example axum_server -- 127.0.0.1:8080`, then point any MCP
//! client at the URL it prints. Only loopback Host and Origin headers are accepted (DNS
//! rebinding protection, `HttpServerConfig::check_origin`): bound to `0.0.0.0`, accept there
//! the names clients use to reach it.
//!
//! `axum::serve` sets no timeouts of its own: no limit on the time to send a request head, no
//! idle limit on kept-alive connections, no connection cap. Behind a reverse proxy that has
//! them, that is fine; facing clients directly, serve `McpService` with
//! `mcpwire_tokio::http::serve`, which applies `HostConfig`'s limits. Either way the shutdown
//! here is bounded: a client that holds a connection open (a head sent in part, a stream it
//! does not read) cannot keep the process from exiting.

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
            let Some(conn) = server.connection(key) else {
                continue;
            };
            // Refused only when the client left.
            let _sent = match answer(&method, params.as_deref()) {
                Ok(result) => conn.respond_typed(id.as_id(), &result).is_ok(),
                Err((code, message)) => conn.respond_error(id.as_id(), code, message, None).is_ok(),
            };
        }
        server.pump();
    }
}

/// The result of one request, or the error the spec's pages give for it: `(code, message)`.
fn answer(method: &str, params: Option<&str>) -> Result<Value, (i64, &'static str)> {
    let params: Value = params
        .and_then(|p| RawJson::new(p).ok()?.parse().ok())
        .unwrap_or_default();
    match method {
        // Every list fits on one page: a cursor is one this server never gave (the spec's
        // pagination page: -32602).
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list"
            if params.get("cursor").is_some() =>
        {
            Err((-32602, "Invalid params: unknown cursor"))
        }
        "tools/list" => Ok(
            json!({"tools":[{"name":"echo","inputSchema":{"type":"object",
            "properties":{"text":{"type":"string"}},"required":["text"]}}]}),
        ),
        // Arguments the tool cannot use are a tool error the model can read.
        "tools/call" if params["name"] == "echo" => Ok(match &params["arguments"]["text"] {
            Value::String(text) => json!({"content":[{"type":"text","text":text}]}),
            _ => json!({"content":[{"type":"text","text":"echo needs a string argument 'text'"}],
                "isError":true}),
        }),
        "tools/call" => Err((-32602, "Unknown tool")),
        "resources/list" => Ok(json!({"resources":[{"uri":"mem://greeting","name":"greeting"}]})),
        "resources/templates/list" => Ok(json!({"resourceTemplates":[]})),
        "resources/read" if params["uri"] == "mem://greeting" => {
            Ok(json!({"contents":[{"uri":"mem://greeting","text":"Hello from axum"}]}))
        }
        // -32002 is sent as the version's "resource not found" code (-32602 in 2026-07-28).
        "resources/read" => Err((mcpwire::mcp::RESOURCE_NOT_FOUND, "Resource not found")),
        "prompts/list" => Ok(json!({"prompts":[{"name":"greet"}]})),
        "prompts/get" if params["name"] == "greet" => {
            Ok(json!({"messages":[{"role":"user","content":{"type":"text","text":"Hi"}}]}))
        }
        "prompts/get" => Err((-32602, "Unknown prompt")),
        _ => Err((-32601, "Method not found")),
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
    let signalled = stop_signal();
    println!("http://{}/mcp", listener.local_addr()?);
    let stopping = std::sync::Arc::new(tokio::sync::Notify::new());
    let told = stopping.clone();
    let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
        signalled.await;
        told.notify_one();
        mcp.begin_shutdown(); // GET streams end now, answers in flight go on
        tokio::spawn(async move {
            tokio::time::sleep(GRACE).await;
            mcp.end_streams(); // the grace period is over
        });
    });
    // axum waits for every connection to close, which a client that does not read (or sends
    // half a head) never does: a little after the grace, the process exits anyway.
    let deadline = async {
        stopping.notified().await;
        tokio::time::sleep(GRACE + Duration::from_secs(2)).await;
    };
    tokio::select! {
        served = serving => served?,
        () = deadline => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "axum_server: connections open after the grace; exiting");
        }
    }
    timers.abort();
    Ok(())
}

/// How long answers in flight get once a shutdown begins.
const GRACE: Duration = Duration::from_secs(5);

/// Completes on SIGTERM or ctrl-c, caught from the call on (not from the future's first
/// poll): called before the address is printed, a signal that comes before the server runs
/// still gets its graceful shutdown. A second signal ends the process at once.
fn stop_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("a SIGINT handler");
    async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = term.recv() => {}
            }
            std::process::exit(1);
        });
    }
}
