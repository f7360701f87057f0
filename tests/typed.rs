//! The `serde` feature: typed params and results, both ways, in both eras, borrowing from the
//! frame where the type allows; refusals as typed errors.

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;

use common::pair::{Pair, client_config, legacy, modern, server_config, take_output};
use mcpwire::conn::{Error, Event, RequestOptions};
use mcpwire::jsonrpc::OwnedId;
use mcpwire::mcp::ProtocolVersion;
use mcpwire::typed::TypedError;
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct CallOut<'a> {
    name: &'a str,
    arguments: BTreeMap<&'a str, &'a str>,
}

#[derive(Deserialize, Debug)]
struct CallIn<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(borrow)]
    arguments: BTreeMap<&'a str, Cow<'a, str>>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Serialize, Deserialize, Debug)]
struct ToolResult<'a> {
    #[serde(borrow)]
    content: Vec<Text<'a>>,
    #[serde(rename = "isError")]
    is_error: bool,
}

fn typed_round_trip(version: ProtocolVersion) {
    let (client, server) = match version {
        ProtocolVersion::V2026_07_28 => (modern(client_config()), modern(server_config())),
        _ => (legacy(client_config()), legacy(server_config())),
    };
    let mut p = Pair::ready(version, client, server);
    let now = p.now;
    let mut arguments = BTreeMap::new();
    arguments.insert("city", "Zürich \"centre\"");
    let call = CallOut {
        name: "weather",
        arguments,
    };
    let id = p
        .client
        .request_typed(now, "tools/call", &call, RequestOptions::default())
        .expect("typed request");
    let bytes = take_output(&mut p.client);
    p.server.handle_input(now, &bytes);
    let peer = {
        let Some(Event::Request { id, params, .. }) = p.server.poll_event() else {
            panic!("no request");
        };
        let params = params.expect("params");
        let text = params.get();
        let parsed: CallIn<'_> = params.parse().expect("parse params");
        // Borrowed from the frame: the name points into the event's bytes.
        assert_eq!(parsed.name, "weather");
        let name_at = parsed.name.as_ptr() as usize;
        let range = text.as_ptr() as usize..text.as_ptr() as usize + text.len();
        assert!(range.contains(&name_at), "the name was copied");
        // An escaped string needs a copy (Cow::Owned); the value is exact.
        assert_eq!(parsed.arguments["city"], "Zürich \"centre\"");
        OwnedId::from(id)
    };
    let answer = ToolResult {
        content: vec![Text {
            kind: "text",
            text: Cow::Borrowed("Sunny, 21 C"),
        }],
        is_error: false,
    };
    p.server
        .respond_typed(peer.as_id(), &answer)
        .expect("typed respond");
    let bytes = take_output(&mut p.server);
    p.client.handle_input(now, &bytes);
    let Some(Event::Response { request, result }) = p.client.poll_event() else {
        panic!("no response");
    };
    assert_eq!(request, id);
    let parsed: ToolResult<'_> = result.parse().expect("parse result");
    assert!(!parsed.is_error);
    assert_eq!(
        parsed.content,
        vec![Text {
            kind: "text",
            text: Cow::Borrowed("Sunny, 21 C")
        }]
    );
}

#[test]
fn typed_params_and_results_travel_in_the_handshake_era() {
    typed_round_trip(ProtocolVersion::V2025_11_25);
}

#[test]
fn typed_params_and_results_travel_in_the_stateless_era() {
    typed_round_trip(ProtocolVersion::V2026_07_28);
}

#[test]
fn refusals_and_serialization_failures_are_typed_errors() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        legacy(client_config()),
        legacy(server_config()),
    );
    let now = p.now;
    // Params must be an object: refused as the untyped request would be.
    let err = p
        .client
        .request_typed(now, "tools/call", &[1, 2, 3], RequestOptions::default())
        .unwrap_err();
    assert!(
        matches!(err, TypedError::Refused(Error::InvalidParams)),
        "{err:?}"
    );
    // Its message holds the engine error's.
    assert_eq!(
        err.to_string(),
        format!("refused: {}", Error::InvalidParams)
    );
    // JSON object keys must be strings.
    let mut bad = BTreeMap::new();
    bad.insert((1, 2), 3);
    let err = p
        .client
        .notify_typed("notifications/roots/list_changed", &bad)
        .unwrap_err();
    assert!(matches!(err, TypedError::Serialize(_)), "{err:?}");
    assert!(err.to_string().starts_with("cannot serialize: "), "{err}");
    // A result nested deeper than any peer's decoder reads, and a hand-written `Serialize`
    // that leaves a key without its value: refused, as `RawJson::new` refuses such text.
    // Both went out unchecked.
    let mut deep = serde_json::json!({});
    for _ in 0..200 {
        deep = serde_json::json!({ "a": deep });
    }
    let err = p
        .client
        .notify_typed("notifications/roots/list_changed", &deep)
        .unwrap_err();
    assert!(
        matches!(err, TypedError::Refused(Error::InvalidParams)),
        "{err:?}"
    );
    struct KeyWithoutValue;
    impl Serialize for KeyWithoutValue {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(None)?;
            map.serialize_key("a")?;
            map.end()
        }
    }
    let err = p
        .client
        .notify_typed("notifications/roots/list_changed", &KeyWithoutValue)
        .unwrap_err();
    assert!(
        matches!(err, TypedError::Refused(Error::InvalidParams)),
        "{err:?}"
    );
    // Nothing was sent by any of them.
    assert!(take_output(&mut p.client).is_empty());
    // A typed notification that is fine goes out.
    p.client
        .notify_typed(
            "notifications/roots/list_changed",
            &BTreeMap::<String, u8>::new(),
        )
        .expect("notify");
    let out = String::from_utf8(take_output(&mut p.client)).unwrap();
    assert!(out.contains("notifications/roots/list_changed"), "{out}");
}
