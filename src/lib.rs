//! # mcpwire
//!
//! A zero-copy, sans-IO engine for the Model Context Protocol (MCP). It owns no sockets,
//! threads, timers or clock: bytes and the current time go in; bytes to write, events and the
//! next deadline come out. Your event loop does the IO.
//!
//! ## The run loop
//!
//! Inputs are `handle_*`, outputs are `poll_*`, and everything else is a command that only
//! queues work. After **every** input or command, drain the outputs in this order: events until
//! `None` (acting on them may issue commands), bytes until the transport would block, then arm
//! your timer with [`Connection::poll_timeout`].
//!
//! ```
//! use mcpwire::{Config, Connection, Event, Timestamp};
//! use mcpwire::jsonrpc::RawJson;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A server; its transport here is just a pair of byte buffers.
//! let config = Config::server("demo", "1.0").with_capabilities(r#"{"tools":{}}"#)?;
//! let mut conn = Connection::new(config, Timestamp::ZERO)?;
//! let mut wire_out = Vec::new();
//! let incoming: [&[u8]; 3] = [
//!     br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
//! {"jsonrpc":"2.0","method":"notifications/initialized"}
//! "#,
//!     br#"{"jsonrpc":"2.0","id":2,"method":"tools/li"#,
//!     b"st\"}\n",
//! ];
//! for (ms, bytes) in incoming.into_iter().enumerate() {
//!     let now = Timestamp::from_millis(ms as u64);    // your clock, passed in
//!     conn.handle_input(now, bytes);                   // 1. input
//!     while let Some(event) = conn.poll_event() {      // 2. events
//!         if let Event::Request { id, .. } = event {
//!             let id = mcpwire::jsonrpc::OwnedId::from(id);
//!             conn.respond(id.as_id(), RawJson::new(r#"{"tools":[]}"#)?)?;
//!         }
//!     }
//!     while let Some(t) = conn.poll_transmit() {       // 3. bytes to write
//!         wire_out.extend_from_slice(t.bytes);
//!         let n = t.bytes.len();
//!         conn.consume_transmit(n);                     //    (report partial writes)
//!     }
//!     let _deadline = conn.poll_timeout();              // 4. re-arm your timer
//! }
//! let text = String::from_utf8(wire_out)?;
//! assert!(text.ends_with("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[]}}\n"));
//! # Ok(())
//! # }
//! ```
//!
//! ## Layers
//!
//! - [`frame`]: newline-delimited framing for stdio and any byte stream, with a frame cap;
//! - [`jsonrpc`]: strict JSON-RPC 2.0 decoding into views that borrow from the frame, exact
//!   ids, and an encoder that writes into a reusable buffer;
//! - [`mcp`]: protocol versions, the per-version method table, capabilities, error codes;
//! - [`conn`]: the connection state machine, client or server: lifecycle, negotiation,
//!   capability gating, correlation, timeouts, progress, cancellation, bounds;
//! - [`http`]: Streamable HTTP, server ([`http::HttpServer`]) and client
//!   ([`http::HttpClient`]), both eras, sessions, SSE, resumption;
//! - [`tasks`]: a server's task table (the 2026-07-28 tasks extension, and 2025-11-25 tasks);
//! - `blocking` (feature `blocking`): a blocking run loop over any `Read`/`Write` pair;
//! - `typed` (feature `serde`): typed params and results with serde.
//!
//! Events borrow from the engine and stay valid until the next call that takes the connection
//! mutably. Time is a [`Timestamp`] you pass in; the library never reads a clock.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// Every `unsafe` block says why it is sound, in a `// SAFETY:` comment just above it, and every
// public `unsafe fn` documents its contract in a `# Safety` section.
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::missing_safety_doc)]

#[cfg(feature = "blocking")]
pub mod blocking;
pub mod conn;
pub mod frame;
pub mod http;
pub mod jsonrpc;
pub mod mcp;
pub mod tasks;
#[cfg(feature = "serde")]
pub mod typed;

/// A small deterministic generator (xorshift64) for the crate's randomised unit tests.
#[cfg(test)]
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

pub use conn::{Config, Connection, Event, OwnedEvent, Timestamp};
