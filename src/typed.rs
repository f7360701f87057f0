//! Typed payloads with serde (feature `serde`): read params and results into your own types,
//! and send any `T: Serialize` as params or a result.
//!
//! Reading borrows from the frame where the type allows: a `&'a str` field of `T` points into
//! the event's bytes, valid as long as the event is (so a JSON string with escapes needs a
//! `String` field, or a `Cow<'a, str>` marked `#[serde(borrow)]`). Writing serializes into a
//! buffer the connection keeps and reuses, validates them as [`RawJson::new`] does, then the
//! bytes join the output as the untyped commands' do; the engine checks and completes them
//! there (params must be an object; in 2026-07-28 it adds its `_meta` members to results).
//!
//! Both directions are serde_json's, with its rules: a NaN or infinite `f64` is written as
//! `null` (JSON has neither), and a float is read to within one unit in the last place
//! unless serde_json's `float_roundtrip` feature is on in your build (add
//! `serde_json = { version = "1", features = ["float_roundtrip"] }` to your `Cargo.toml`;
//! Cargo turns it on for this crate's use too). [`RawJson::as_f64`] always reads the
//! nearest double.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use mcpwire::jsonrpc::RawJson;
//!
//! #[derive(Deserialize)]
//! struct Call<'a> {
//!     name: &'a str,
//! }
//!
//! let params = RawJson::new(r#"{"name":"echo","arguments":{}}"#).unwrap();
//! let call: Call<'_> = params.parse().unwrap();
//! assert_eq!(call.name, "echo");
//! ```
//!
//! Without the feature none of this exists, and the untyped path allocates exactly as before.

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::conn::{Connection, Error, RequestId, RequestOptions};
use crate::jsonrpc::{Id, RawJson};

impl<'a> RawJson<'a> {
    /// Deserializes this JSON value into `T`. Borrowed fields (`&'a str`, and `&'a RawValue`
    /// with serde_json's `raw_value` feature) point into the frame, so no copy is made where
    /// the type allows. Use it on the `params` of a request event or the `result` of a
    /// response event. A member written twice fails a derived struct ("duplicate field"),
    /// and the last one wins in a map or a `serde_json::Value`: use
    /// [`get_unique`](RawJson::get_unique) where that matters. A number beyond `f64`
    /// (`1e400`) fails.
    pub fn parse<T: Deserialize<'a>>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }
}

/// Why a typed command failed.
#[derive(Debug)]
pub enum TypedError {
    /// The value could not be serialized (a map with non-string keys, a failing `Serialize`
    /// implementation).
    Serialize(serde_json::Error),
    /// The engine refused the command, as the untyped command would have (params that are
    /// not an object, a closed connection, ...), or the serialized text was not one JSON
    /// value [`RawJson::new`] accepts (`InvalidParams`: nested deeper than
    /// [`MAX_PAYLOAD_DEPTH`](crate::jsonrpc::MAX_PAYLOAD_DEPTH), or malformed by a
    /// hand-written `Serialize`).
    Refused(Error),
}

impl std::fmt::Display for TypedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypedError::Serialize(e) => write!(f, "cannot serialize: {e}"),
            TypedError::Refused(e) => write!(f, "refused: {e}"),
        }
    }
}

// (No `source`: the message already holds the cause's, and a chain printer would say it
// twice.)
impl std::error::Error for TypedError {}

impl From<Error> for TypedError {
    fn from(e: Error) -> Self {
        TypedError::Refused(e)
    }
}

impl Connection {
    /// Serializes `value` into the connection's reusable buffer and runs `send` with it as
    /// JSON. The buffer is taken out for the call, so `send` may use the connection.
    fn with_serialized<T: Serialize + ?Sized, R>(
        &mut self,
        value: &T,
        send: impl FnOnce(&mut Connection, RawJson<'_>) -> Result<R, Error>,
    ) -> Result<R, TypedError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let outcome = match serde_json::to_writer(&mut buf, value) {
            Err(e) => Err(TypedError::Serialize(e)),
            // Validated as text brought by hand is: serde_json does not bound the nesting
            // (a peer's decoder would refuse a value deeper than `MAX_PAYLOAD_DEPTH`), nor
            // check a hand-written `Serialize` that leaves a key without its value. What
            // fails is refused like invalid params.
            Ok(()) => match std::str::from_utf8(&buf).ok().map(RawJson::new) {
                Some(Ok(json)) => send(self, json).map_err(TypedError::Refused),
                _ => Err(TypedError::Refused(Error::InvalidParams)),
            },
        };
        // A large value does not keep its capacity.
        crate::frame::empty(&mut buf);
        self.scratch = buf;
        outcome
    }

    /// [`request_with`](Connection::request_with) with typed params (they must serialize to
    /// a JSON object). Use it when your params are a Rust type rather than JSON text.
    pub fn request_typed<P: Serialize + ?Sized>(
        &mut self,
        now: Timestamp,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<RequestId, TypedError> {
        self.with_serialized(params, |c, p| c.request_with(now, method, Some(p), options))
    }

    /// [`notify`](Connection::notify) with typed params (a JSON object once serialized). Use
    /// it when your notification's params are a Rust type rather than JSON text.
    pub fn notify_typed<P: Serialize + ?Sized>(
        &mut self,
        method: &str,
        params: &P,
    ) -> Result<(), TypedError> {
        self.with_serialized(params, |c, p| c.notify(method, Some(p)))
    }

    /// [`respond`](Connection::respond) with a typed result (MCP results are objects). Use it
    /// to answer a request event with your own result type.
    pub fn respond_typed<R: Serialize + ?Sized>(
        &mut self,
        id: Id<'_>,
        result: &R,
    ) -> Result<(), TypedError> {
        self.with_serialized(result, |c, r| c.respond(id, r))
    }
}
