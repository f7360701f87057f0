//! # mcpwire
//!
//! A zero-copy, sans-IO engine for the Model Context Protocol (MCP). It owns no sockets,
//! threads, timers or clock: bytes go in, frames and messages come out, and your event loop
//! does the IO.
//!
//! This release holds the bottom two layers:
//!
//! - [`frame`]: newline-delimited framing for stdio and any byte stream, with a frame cap;
//! - [`jsonrpc`]: strict JSON-RPC 2.0 decoding into views that borrow from the frame, with
//!   exact ids, and an encoder that writes into a reusable buffer.
//!
//! ```
//! use mcpwire::frame::line::{LineDecoder, LineEncoder};
//! use mcpwire::jsonrpc::{Decoded, Decoder, Id, Message, RawJson};
//!
//! let mut lines = LineDecoder::new();
//! let mut decoder = Decoder::default();
//! let mut encoder = LineEncoder::new();
//!
//! // Bytes arrive in whatever chunks the transport delivers.
//! let chunks: [&[u8]; 2] = [b"{\"jsonrpc\":\"2.0\",\"id\":7,\"meth", b"od\":\"ping\"}\n"];
//! for chunk in chunks {
//!     let mut input = chunk;
//!     while let Some(frame) = lines.next_frame(&mut input) {
//!         let frame = frame.expect("within the frame cap");
//!         match decoder.decode(frame) {
//!             Ok(Decoded::Single(Message::Request(req))) if req.method.eq_str("ping") => {
//!                 encoder.response(req.id, RawJson::new("{}").unwrap());
//!             }
//!             Ok(_) => {}
//!             Err(e) => encoder.error(e.id(), e.code(), e.message(), None),
//!         }
//!     }
//! }
//! assert_eq!(encoder.pending(), b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n");
//! # let _ = Id::Int(0);
//! ```
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod conn;
pub mod frame;
pub mod jsonrpc;
pub mod mcp;

pub use conn::{Config, Connection, Event, Timestamp};
