//! A minimal MCP server over stdio, built on the mcpwire engine and its blocking loop
//! (`mcpwire::blocking`, feature `blocking`).
//!
//! It offers one tool (`echo`, which returns its `text` argument), a `count` tool that reports
//! progress, one resource and one prompt, in both protocol eras (`--legacy` for the handshake
//! era only). Run it under any MCP client, e.g. `cargo run --example stdio_server`.

// The example is the IO layer: it reads the real clock and passes it to the engine as data.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use mcpwire::Timestamp;
use mcpwire::blocking::{Io, Stop};
use mcpwire::conn::{Config, Connection, OwnedEvent};
use mcpwire::jsonrpc::{Id, RawJson, write_json_string};

fn text_result(text: &str) -> String {
    let mut out = Vec::new();
    out.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
    write_json_string(&mut out, text);
    out.extend_from_slice(br#"}],"isError":false}"#);
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// What to do with one request: `Ok(result JSON)` or `Err((code, message))`.
fn handle(
    conn: &mut Connection,
    id: Id<'_>,
    method: &str,
    params: Option<RawJson<'_>>,
) -> Result<String, (i64, String)> {
    let arg = |name: &str| -> Option<String> {
        let p = params?;
        let v = p.get_unique(name).ok()??;
        Some(v.as_str()?.to_str().into_owned())
    };
    match method {
        // Every list fits on one page: a cursor is one this server never gave (the spec's
        // pagination page: -32602).
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list"
            if params.is_some_and(|p| !matches!(p.get_unique("cursor"), Ok(None))) =>
        {
            Err((-32602, "Invalid params: unknown cursor".into()))
        }
        "tools/list" => Ok(r#"{"tools":[
            {"name":"echo","description":"Returns its text argument","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},
            {"name":"count","description":"Counts to three, reporting progress","inputSchema":{"type":"object","properties":{}}}]}"#
            .into()),
        "tools/call" => {
            let name = arg("name").unwrap_or_default();
            let arguments = params.and_then(|p| p.get_unique("arguments").ok().flatten());
            match name.as_str() {
                "echo" => {
                    let text = arguments
                        .and_then(|a| a.get_unique("text").ok().flatten())
                        .and_then(|t| t.as_str())
                        .map(|t| t.to_str().into_owned());
                    // Arguments the tool cannot use are a tool error the model can read.
                    Ok(match text {
                        Some(text) => text_result(&text),
                        None => r#"{"content":[{"type":"text","text":"echo needs a string argument 'text'"}],"isError":true}"#.into(),
                    })
                }
                "count" => {
                    for step in 1..=3 {
                        // Progress is only possible when the client asked for it.
                        let _ = conn.progress(id, step as f64, Some(3.0), Some("counting"));
                    }
                    Ok(text_result("counted to 3"))
                }
                // An unknown tool is a protocol error, as the spec's tools page shows.
                _ => Err((-32602, format!("Unknown tool: {name}"))),
            }
        }
        "resources/list" => Ok(r#"{"resources":[{"uri":"mem://greeting","name":"greeting","mimeType":"text/plain"}]}"#.into()),
        "resources/templates/list" => Ok(r#"{"resourceTemplates":[]}"#.into()),
        "resources/read" => match arg("uri").as_deref() {
            Some("mem://greeting") => Ok(r#"{"contents":[{"uri":"mem://greeting","mimeType":"text/plain","text":"Hello from mcpwire"}]}"#.into()),
            _ => Err((-32002, "Resource not found".into())),
        },
        "prompts/list" => Ok(r#"{"prompts":[{"name":"greet","description":"Say hello"}]}"#.into()),
        "prompts/get" => match arg("name").as_deref() {
            Some("greet") => Ok(r#"{"messages":[{"role":"user","content":{"type":"text","text":"Say hello to mcpwire."}}]}"#.into()),
            _ => Err((-32602, "Unknown prompt".into())),
        },
        _ => Err((-32601, "Method not found".into())),
    }
}

fn main() {
    let start = Instant::now();
    let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
    let mut config = Config::server("mcpwire-example", env!("CARGO_PKG_VERSION"))
        .with_capabilities(r#"{"tools":{},"resources":{},"prompts":{}}"#)
        .expect("valid capabilities");
    // Both eras by default; `--legacy` serves only the initialize handshake.
    if std::env::args().any(|a| a == "--legacy") {
        config.versions = mcpwire::mcp::ProtocolVersion::LEGACY.to_vec();
    }
    let mut conn = Connection::new(config, Timestamp::ZERO).expect("valid config");
    // The library's blocking loop: it writes what the engine lends (blocking while the client
    // does not read, which stops our reading too), feeds input and fires timers. At end of
    // input it writes every answer already given before it reports `Stop::Eof`.
    let mut io = Io::stdio(clock);
    loop {
        match io.next_event(&mut conn, None) {
            Ok(OwnedEvent::Request { id, method, params }) => {
                let params = params.as_deref().and_then(|p| RawJson::new(p).ok());
                match handle(&mut conn, id.as_id(), &method, params) {
                    Ok(result) => {
                        let result = RawJson::new(&result).expect("valid JSON");
                        let _ = conn.respond(id.as_id(), result);
                    }
                    Err((code, message)) => {
                        let _ = conn.respond_error(id.as_id(), code, &message, None);
                    }
                }
            }
            Ok(OwnedEvent::Closed { .. }) | Err(Stop::Eof) => return,
            Ok(_) | Err(Stop::Deadline) => {}
        }
    }
}
