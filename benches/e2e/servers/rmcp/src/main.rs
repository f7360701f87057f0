//! rmcp peer server for the end-to-end benchmark: the tools `echo` and `add`, served by rmcp
//! 3.9 on tokio over stdio or Streamable HTTP.
//!
//! ```text
//! rmcp-e2e-server stdio [--blocking-stdio]
//! rmcp-e2e-server http PORT [--stateless]
//! ```
//!
//! * `stdio`: newline-delimited JSON-RPC on stdin/stdout through `rmcp::transport::stdio_pipes`
//!   (what rmcp recommends when both streams are pipes; it falls back to tokio's blocking
//!   stdin/stdout otherwise, and `--blocking-stdio` forces those). Exits at stdin EOF, after
//!   rmcp has drained the answers still in flight.
//! * `http PORT`: `StreamableHttpService` under axum on 127.0.0.1:PORT at `/mcp`. By default
//!   it keeps handshake-era sessions (`LocalSessionManager`; rmcp answers those POSTs with SSE
//!   whatever the configuration says); stateless 2026-07-28 requests are served on the same
//!   endpoint with JSON bodies. `--stateless` turns sessions off (`NeverSessionManager`,
//!   `legacy_session_mode: false`), and every request is answered with a JSON body.
//!   Prints `listening on http://127.0.0.1:PORT/mcp` once the socket accepts connections.
//!
//! No tracing subscriber is installed, so rmcp logs nothing. SIGINT and SIGTERM stop the server.

use std::{
    io::Write as _,
    net::SocketAddr,
    process::ExitCode,
    sync::{Arc, LazyLock},
    time::Duration,
};

use axum::serve::ListenerExt as _;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt as _,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        Tool,
    },
    service::RequestContext,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::{
            SessionManager,
            session::{local::LocalSessionManager, never::NeverSessionManager},
        },
    },
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

const ECHO_SCHEMA: &str =
    r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#;
const ADD_SCHEMA: &str = r#"{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}"#;

/// The tools, built once: the HTTP service builds a handler per request (stateless) or per
/// session, and `get_tool` runs on every 2026-07-28 tools/call.
static TOOLS: LazyLock<[Tool; 2]> = LazyLock::new(|| {
    let schema = |text: &str| -> Arc<JsonObject> {
        Arc::new(serde_json::from_str(text).expect("tool schema is a JSON object"))
    };
    [
        Tool::new(
            "echo",
            "Returns its input text as one text content.",
            schema(ECHO_SCHEMA),
        ),
        Tool::new(
            "add",
            "Returns the sum a+b as one text content.",
            schema(ADD_SCHEMA),
        ),
    ]
});

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize)]
struct AddArgs {
    a: f64,
    b: f64,
}

/// The server handler: tools/list, tools/call and the defaults for everything else.
#[derive(Clone, Copy)]
struct Bench;

/// Decodes a tool's arguments, or the tool-level error a client sees for bad ones.
fn arguments<T: serde::de::DeserializeOwned>(
    args: Option<JsonObject>,
) -> Result<T, CallToolResult> {
    serde_json::from_value(serde_json::Value::Object(args.unwrap_or_default())).map_err(|e| {
        CallToolResult::error(vec![ContentBlock::text(format!("invalid arguments: {e}"))])
    })
}

fn text_result(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

impl ServerHandler for Bench {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-e2e-server", "1.0.0"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match &*request.name {
            "echo" => match arguments::<EchoArgs>(request.arguments) {
                Ok(args) => text_result(args.text),
                Err(error) => error,
            },
            // f64's Display prints integral values without a decimal point (5, not 5.0) and
            // others in their shortest round-trip form, as Go's FormatFloat(v, 'f', -1, 64).
            "add" => match arguments::<AddArgs>(request.arguments) {
                Ok(args) => text_result((args.a + args.b).to_string()),
                Err(error) => error,
            },
            name => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {name}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(TOOLS.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        TOOLS.iter().find(|tool| tool.name == name).cloned()
    }
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called (inside the
/// runtime), not when the future is first polled, so no signal is lost in between.
fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}

async fn serve_stdio(blocking: bool) -> Result<(), Box<dyn std::error::Error>> {
    let signal = shutdown_signal();
    tokio::pin!(signal);
    // A signal during the initialize handshake ends the server too.
    let running = tokio::select! {
        running = async {
            if blocking {
                Bench.serve(rmcp::transport::stdio()).await
            } else {
                Bench.serve(rmcp::transport::stdio_pipes()).await
            }
        } => running?,
        _ = &mut signal => return Ok(()),
    };
    let ct = running.cancellation_token();
    tokio::select! {
        quit = running.waiting() => { quit?; }
        _ = &mut signal => { ct.cancel(); }
    }
    Ok(())
}

async fn serve_http<M: SessionManager>(
    port: u16,
    session_manager: M,
    legacy_session_mode: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let signal = shutdown_signal();
    let ct = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(legacy_session_mode)
        // JSON bodies wherever rmcp allows them: all stateless answers (both modes serve
        // 2026-07-28 requests statelessly). Session-bound answers are SSE regardless.
        .with_json_response(true)
        .with_cancellation_token(ct.child_token());
    let service = StreamableHttpService::new(|| Ok(Bench), Arc::new(session_manager), config);
    let app = axum::Router::new().route_service("/mcp", service);

    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let addr = listener.local_addr()?;
    // TCP_NODELAY, as Go's net/http sets on every connection: rmcp writes an SSE answer in
    // several small chunks, and without it Nagle's algorithm holds the last one back until
    // the client's delayed ACK (~40 ms per request on a kept-alive connection).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}/mcp")?;
        out.flush()?;
    }

    let shutdown = {
        let ct = ct.clone();
        async move {
            signal.await;
            // Ends the session workers and their open SSE streams.
            ct.cancel();
        }
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(shutdown);
    let server = tokio::spawn(async move { server.await });
    tokio::select! {
        result = server => { result??; }
        // Do not wait forever for clients that keep connections open after the signal.
        _ = async { ct.cancelled().await; tokio::time::sleep(Duration::from_secs(2)).await } => {}
    }
    Ok(())
}

fn usage() -> ExitCode {
    eprintln!("usage: rmcp-e2e-server stdio [--blocking-stdio] | http PORT [--stateless]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    let result = match args.as_slice() {
        ["stdio"] => runtime.block_on(serve_stdio(false)),
        ["stdio", "--blocking-stdio"] => runtime.block_on(serve_stdio(true)),
        ["http", port, rest @ ..] => {
            let Ok(port) = port.parse::<u16>() else {
                return usage();
            };
            match rest {
                [] => runtime.block_on(serve_http(port, LocalSessionManager::default(), true)),
                ["--stateless"] => {
                    runtime.block_on(serve_http(port, NeverSessionManager::default(), false))
                }
                _ => return usage(),
            }
        }
        _ => return usage(),
    };
    // Handler tasks still parked on a blocking stdin read must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rmcp-e2e-server: {error}");
            ExitCode::FAILURE
        }
    }
}
