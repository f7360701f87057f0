//! A real network host for mcpwire's sans-IO Streamable HTTP server, on tokio and hyper.
//!
//! [`mcpwire::http::HttpServer`] decides what every HTTP request gets, but moves no bytes and
//! reads no clock. This crate is the IO around it: [`http::serve`] accepts TCP connections,
//! parses HTTP/1.1 with hyper (request smuggling, oversized heads, slow clients and connection
//! floods are refused here, before the engine sees anything), hands each request to the
//! engine, streams SSE answers, fires the engine's timers and shuts down gracefully. Your MCP
//! logic implements [`http::Application`].
//!
//! [`client::Client`] is the other side: an MCP client over Streamable HTTP, with hyper making
//! the requests the sans-IO [`mcpwire::http::HttpClient`] asks for.
//!
//! [`stdio::Driver`] drives a [`mcpwire::Connection`] over any `AsyncRead` + `AsyncWrite`
//! (stdio, pipes, sockets), and [`stdio::spawn`] over a child process: a server on stdin and
//! stdout, or a client of a server command.
//!
//! Use it when you want an MCP server on a TCP port with tokio. If you already run a
//! tower-based HTTP framework (axum, say), route [`http::McpService`] in it
//! (`examples/axum_server.rs`); with another framework, call the engine from your own
//! handlers, as this crate's source does.

// This crate is an IO layer: it reads the real clock (one `Instant` at start) and passes the
// time to the engine as data. The workspace's clippy.toml forbids clocks for the sans-IO core.
#![allow(clippy::disallowed_methods)]
#![warn(missing_docs)]

pub mod client;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod fdio;
pub mod http;
pub mod stdio;
