//! Framing: bytes ⇄ frames.
//!
//! The lowest layer. It knows nothing of JSON: it finds where one message ends and the next
//! begins, with a hard cap on how much it will buffer.

pub mod line;
pub mod sse;
