//! Sub-capabilities (elicitation modes, tool use and context in sampling, 2025-11-25 task
//! augmentation) in both directions, and URL-mode elicitation (2025-11-25): the `-32042`
//! answer, its event, and completions correlated by `elicitationId`.

mod common;

use common::pair::{Ev, Pair, server_config};
use mcpwire::conn::{Config, Error, RequestId};
use mcpwire::jsonrpc::RawJson;
use mcpwire::mcp::{Caps, ProtocolVersion, SubCapability, sub_capabilities};
use serde_json::{Value, json};

const V: ProtocolVersion = ProtocolVersion::V2025_11_25;

fn raw(s: &str) -> RawJson<'_> {
    RawJson::new(s).unwrap()
}

fn client(caps: &str) -> Config {
    Config::client("c", "1").with_capabilities(caps).unwrap()
}

fn pair(client_caps: &str) -> Pair {
    Pair::ready(V, client(client_caps), server_config())
}

/// The server asks the client `method` with `params` (as a request related to nothing).
fn server_asks(p: &mut Pair, method: &str, params: &str) -> Result<RequestId, Error> {
    p.server.request(p.now, method, Some(raw(params)))
}

const FORM: &str = r#"{"message":"Name?","requestedSchema":{"type":"object","properties":{}}}"#;
const URL: &str = r#"{"mode":"url","message":"Connect","elicitationId":"e-1","url":"https://example.com/connect"}"#;
const TOOLS: &str =
    r#"{"messages":[],"maxTokens":5,"tools":[{"name":"t","inputSchema":{"type":"object"}}]}"#;
const CONTEXT: &str = r#"{"messages":[],"maxTokens":5,"includeContext":"thisServer"}"#;

#[test]
fn what_the_rules_ask_for() {
    let needs = |m: &str, p: &str| sub_capabilities(m, Some(raw(p)));
    assert_eq!(
        needs("elicitation/create", FORM),
        SubCapability::Needs(Caps::ELICITATION_FORM)
    );
    assert_eq!(
        needs("elicitation/create", URL),
        SubCapability::Needs(Caps::ELICITATION_URL)
    );
    assert_eq!(
        needs("elicitation/create", r#"{"mode":"voice"}"#),
        SubCapability::Malformed
    );
    assert_eq!(
        needs("sampling/createMessage", TOOLS),
        SubCapability::Needs(Caps::SAMPLING_TOOLS)
    );
    assert_eq!(
        needs(
            "sampling/createMessage",
            r#"{"toolChoice":{"mode":"auto"},"includeContext":"allServers"}"#
        ),
        SubCapability::Needs(Caps::SAMPLING_TOOLS | Caps::SAMPLING_CONTEXT)
    );
    assert_eq!(
        needs("sampling/createMessage", r#"{"includeContext":"none"}"#),
        SubCapability::Needs(Caps::EMPTY)
    );
    assert_eq!(
        needs("tools/call", r#"{"name":"x","task":{"ttl":1000}}"#),
        SubCapability::Needs(Caps::TASKS_TOOLS_CALL)
    );
    // Declared in a capabilities object.
    let caps = mcpwire::mcp::Capabilities::parse(
        r#"{"tasks":{"requests":{"tools":{"call":{}}}},"elicitation":{"url":{}}}"#,
    )
    .unwrap();
    assert!(caps.has(Caps::TASKS_TOOLS_CALL) && caps.has(Caps::ELICITATION_URL));
    assert!(!caps.has(Caps::ELICITATION_FORM), "url only: no form mode");
}

#[test]
fn our_requests_need_the_peers_sub_capabilities() {
    // A client with form-mode elicitation and plain sampling only.
    let mut p = pair(r#"{"elicitation":{},"sampling":{}}"#);
    assert!(server_asks(&mut p, "elicitation/create", FORM).is_ok());
    assert_eq!(
        server_asks(&mut p, "elicitation/create", URL),
        Err(Error::NotNegotiated(Caps::ELICITATION_URL))
    );
    assert_eq!(
        server_asks(
            &mut p,
            "elicitation/create",
            r#"{"mode":"voice","message":"m"}"#
        ),
        Err(Error::InvalidParams)
    );
    assert_eq!(
        server_asks(&mut p, "sampling/createMessage", TOOLS),
        Err(Error::NotNegotiated(Caps::SAMPLING_TOOLS))
    );
    assert_eq!(
        server_asks(&mut p, "sampling/createMessage", CONTEXT),
        Err(Error::NotNegotiated(Caps::SAMPLING_CONTEXT))
    );
    assert!(
        server_asks(
            &mut p,
            "sampling/createMessage",
            r#"{"messages":[],"maxTokens":5}"#
        )
        .is_ok()
    );
    // Task augmentation needs the receiver's tasks.requests.<method>.
    assert_eq!(
        p.client.request(
            p.now,
            "tools/call",
            Some(raw(r#"{"name":"x","task":{"ttl":1000}}"#)),
        ),
        Err(Error::NotNegotiated(Caps::TASKS_TOOLS_CALL))
    );

    // A client declaring everything gets them all.
    let mut p =
        pair(r#"{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{},"context":{}}}"#);
    for (m, params) in [
        ("elicitation/create", FORM),
        ("elicitation/create", URL),
        ("sampling/createMessage", TOOLS),
        ("sampling/createMessage", CONTEXT),
    ] {
        assert!(server_asks(&mut p, m, params).is_ok(), "{m} {params}");
    }
}

/// A peer that ignores the rules: the raw line a server would write.
fn raw_server_request(p: &mut Pair, id: u64, method: &str, params: &str) -> Value {
    let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
    p.client.handle_input(p.now, format!("{line}\n").as_bytes());
    p.step();
    let out = String::from_utf8(common::pair::take_output(&mut p.client)).unwrap();
    let answers: Vec<Value> = p
        .lines(true)
        .iter()
        .chain(out.lines().map(str::to_owned).collect::<Vec<_>>().iter())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["id"] == id)
        .collect();
    answers.into_iter().next().unwrap_or(Value::Null)
}

#[test]
fn requests_beyond_our_sub_capabilities_get_invalid_params() {
    let mut p = pair(r#"{"elicitation":{},"sampling":{}}"#);
    // "Server sends an elicitation/create request with a mode not declared in client
    // capabilities: -32602".
    let answer = raw_server_request(&mut p, 70, "elicitation/create", URL);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let answer = raw_server_request(&mut p, 71, "sampling/createMessage", TOOLS);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        !p.take_client_events()
            .iter()
            .any(|e| matches!(e, Ev::Request { .. })),
        "the application never sees them"
    );
    // includeContext is a SHOULD NOT for the server: tolerated. Task augmentation we did not
    // declare is processed normally, the task member ignored.
    raw_server_request(&mut p, 72, "sampling/createMessage", CONTEXT);
    raw_server_request(
        &mut p,
        73,
        "elicitation/create",
        r#"{"message":"m","requestedSchema":{"type":"object","properties":{}},"task":{"ttl":5}}"#,
    );
    let requests = p
        .take_client_events()
        .into_iter()
        .filter(|e| matches!(e, Ev::Request { .. }))
        .count();
    assert_eq!(requests, 2);
}

fn url_pair() -> Pair {
    pair(r#"{"elicitation":{"url":{}}}"#)
}

const REQUIRED: &str = r#"[{"mode":"url","elicitationId":"e-7","url":"https://example.com/authorize","message":"Authorize access"}]"#;

#[test]
fn a_url_elicitation_required_answer_becomes_its_event_and_completion_is_correlated() {
    let mut p = url_pair();
    let request = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"files"}"#)))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    p.server
        .respond_url_elicitation_required(id.as_id(), raw(REQUIRED))
        .unwrap();
    p.step();
    let wire: Value = serde_json::from_str(p.lines(false).last().unwrap()).unwrap();
    assert_eq!(wire["error"]["code"], -32042);
    assert_eq!(
        wire["error"]["data"]["elicitations"][0]["elicitationId"],
        "e-7"
    );
    let evs = p.take_client_events();
    assert_eq!(
        evs,
        vec![Ev::UrlElicitationRequired {
            request,
            elicitations: REQUIRED.to_owned()
        }]
    );
    // The completion of an id we never saw is ignored; ours comes once.
    for id in ["nobody", "e-7", "e-7"] {
        p.server
            .notify(
                "notifications/elicitation/complete",
                Some(raw(&json!({ "elicitationId": id }).to_string())),
            )
            .unwrap();
    }
    p.step();
    assert_eq!(
        p.take_client_events(),
        vec![Ev::ElicitationComplete {
            elicitation_id: "e-7".into()
        }]
    );
    assert_eq!(p.client.stats().ignored_elicitation_completions, 2);
}

/// A -32042 to a client that did not declare URL elicitation is a plain error (its data as it
/// came): as `UrlElicitationRequired` its ids were remembered for completions that the
/// client then refused as not negotiated, so they never came.
#[test]
fn a_url_elicitation_required_answer_to_a_client_without_url_mode_is_a_plain_error() {
    let mut p = pair(r#"{"elicitation":{}}"#);
    let request = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"files"}"#)))
        .unwrap();
    p.step();
    p.take_server_events();
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32042,"message":"URL elicitation required","data":{{"elicitations":{REQUIRED}}}}}}}"#,
        request.0
    );
    p.client.handle_input(p.now, format!("{line}\n").as_bytes());
    let evs = common::pair::drain(&mut p.client);
    assert!(
        matches!(&evs[..], [Ev::Error { request: r, code: -32042, .. }] if *r == request),
        "{evs:?}"
    );
}

#[test]
fn a_url_mode_elicitation_request_is_remembered_for_its_completion() {
    let mut p = url_pair();
    server_asks(&mut p, "elicitation/create", URL).unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_client_events().into_iter().next() else {
        panic!()
    };
    // "accept" means consent, not completion.
    p.client
        .respond(id.as_id(), raw(r#"{"action":"accept"}"#))
        .unwrap();
    p.server
        .notify(
            "notifications/elicitation/complete",
            Some(raw(r#"{"elicitationId":"e-1"}"#)),
        )
        .unwrap();
    p.step();
    assert!(p.take_client_events().contains(&Ev::ElicitationComplete {
        elicitation_id: "e-1".into()
    }));
}

#[test]
fn url_elicitation_is_gated_by_version_capability_and_shape() {
    // A client without elicitation.url: no -32042, no completion notification.
    let mut p = pair(r#"{"elicitation":{}}"#);
    p.client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"x"}"#)))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    assert_eq!(
        p.server
            .respond_url_elicitation_required(id.as_id(), raw(REQUIRED)),
        Err(Error::NotNegotiated(Caps::ELICITATION_URL))
    );
    assert_eq!(
        p.server.respond_error(
            id.as_id(),
            -32042,
            "more needed",
            Some(raw(&format!(r#"{{"elicitations":{REQUIRED}}}"#)))
        ),
        Err(Error::NotNegotiated(Caps::ELICITATION_URL)),
        "respond_error cannot go around the check"
    );
    assert_eq!(
        p.server.notify(
            "notifications/elicitation/complete",
            Some(raw(r#"{"elicitationId":"e"}"#))
        ),
        Err(Error::NotNegotiated(Caps::ELICITATION_URL))
    );

    // Malformed elicitations are refused.
    let mut p = url_pair();
    p.client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"x"}"#)))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    for bad in [
        "[]",
        r#"[{"mode":"form","message":"m"}]"#,
        r#"{"mode":"url"}"#,
    ] {
        assert_eq!(
            p.server
                .respond_url_elicitation_required(id.as_id(), raw(bad)),
            Err(Error::InvalidParams),
            "{bad}"
        );
    }
    assert_eq!(
        p.server.respond_error(id.as_id(), -32042, "m", None),
        Err(Error::InvalidParams)
    );

    // Before 2025-11-25 there is no URL mode.
    let mut old = Pair::ready(
        ProtocolVersion::V2025_06_18,
        client(r#"{"elicitation":{"url":{}}}"#),
        server_config(),
    );
    old.client
        .request(old.now, "tools/call", Some(raw(r#"{"name":"x"}"#)))
        .unwrap();
    old.step();
    let Some(Ev::Request { id, .. }) = old.take_server_events().into_iter().next() else {
        panic!()
    };
    assert_eq!(
        old.server
            .respond_url_elicitation_required(id.as_id(), raw(REQUIRED)),
        Err(Error::NotInVersion)
    );
}

/// Our own declaration is held to the schema: each capability the specification defines is
/// an object (`"tools": true` went out as declared, and a peer validating the initialize
/// result refused it whole). Members of our own are free; a peer's declaration stays lenient.
#[test]
fn our_own_capabilities_the_spec_defines_must_be_objects() {
    use mcpwire::mcp::{Capabilities, CapabilityError};
    for bad in [
        r#"{"tools":true}"#,
        r#"{"tools":{},"resources":5}"#,
        r#"{"logging":null}"#,
        r#"{"experimental":[]}"#,
        r#"{"extensions":"x"}"#,
    ] {
        assert_eq!(
            Config::server("s", "1").with_capabilities(bad).err(),
            Some(CapabilityError::MemberNotAnObject),
            "{bad}"
        );
    }
    assert!(
        Config::server("s", "1")
            .with_capabilities(r#"{"tools":{},"x-ours":5}"#)
            .is_ok()
    );
    // A peer's `"tools": true` still counts as declared.
    let peer = Capabilities::parse(r#"{"tools":true}"#).unwrap();
    assert!(peer.has(Caps::TOOLS));
}

/// Our own declaration's members are held to the schema too: flags are booleans, the other
/// members objects (`"listChanged":"no"` was taken as declared and sent as written).
#[test]
fn our_own_capabilities_members_have_the_schemas_types() {
    use mcpwire::mcp::CapabilityError;
    for bad in [
        r#"{"tools":{"listChanged":"no"}}"#,
        r#"{"resources":{"subscribe":1}}"#,
        r#"{"sampling":{"tools":true}}"#,
        r#"{"elicitation":{"url":[]}}"#,
        r#"{"tasks":{"list":true}}"#,
        r#"{"experimental":{"x":5}}"#,
        r#"{"extensions":{"io.modelcontextprotocol/tasks":true}}"#,
    ] {
        assert_eq!(
            Config::server("s", "1").with_capabilities(bad).err(),
            Some(CapabilityError::MemberNotAnObject),
            "{bad}"
        );
    }
    for good in [
        r#"{"tools":{"listChanged":true},"resources":{"subscribe":false,"listChanged":true}}"#,
        r#"{"sampling":{"tools":{},"context":{}},"elicitation":{"form":{},"url":{}}}"#,
        r#"{"experimental":{"x":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
    ] {
        assert!(
            Config::server("s", "1").with_capabilities(good).is_ok(),
            "{good}"
        );
    }
}

/// The server completes `ids` in order; the ids whose completion reached the application.
fn completed(p: &mut Pair, ids: &[String]) -> Vec<String> {
    for id in ids {
        p.server
            .notify(
                "notifications/elicitation/complete",
                Some(raw(&json!({ "elicitationId": id }).to_string())),
            )
            .unwrap();
    }
    p.step();
    p.take_client_events()
        .into_iter()
        .filter_map(|e| match e {
            Ev::ElicitationComplete { elicitation_id } => Some(elicitation_id),
            _ => None,
        })
        .collect()
}

/// A URL-mode `elicitation/create` the client refused (here its inbound limit, one request)
/// creates no elicitation: its completion is an unknown id's, ignored ("Clients MUST ignore
/// notifications referencing unknown or already-completed IDs"). Its id was remembered
/// before the request was accepted, so the completion reached the application.
#[test]
fn a_refused_url_elicitation_request_is_not_remembered() {
    let mut c = client(r#"{"elicitation":{"url":{}}}"#);
    c.limits.max_inbound_in_flight = 1;
    let mut p = Pair::ready(V, c, server_config());
    let second = URL.replace("e-1", "e-2");
    server_asks(&mut p, "elicitation/create", URL).unwrap();
    server_asks(&mut p, "elicitation/create", &second).unwrap();
    p.step();
    let requests = p
        .take_client_events()
        .into_iter()
        .filter(|e| matches!(e, Ev::Request { .. }))
        .count();
    assert_eq!(requests, 1, "the second is refused");
    let ids = ["e-2".to_owned(), "e-1".to_owned()];
    assert_eq!(completed(&mut p, &ids), vec!["e-1".to_owned()]);
}

/// The ids a client remembers for their completion are bounded in bytes, not only in number:
/// 256 ids of 256 KiB held 128 MiB (twice each) before. An id over 64 KiB is not remembered
/// (its completion is ignored), and past 64 KiB of ids the oldest are forgotten.
#[test]
fn remembered_url_elicitation_ids_are_bounded_in_bytes() {
    let mut p = url_pair();
    let huge = "h".repeat(64 * 1024 + 1);
    let ids: Vec<String> = std::iter::once(huge)
        .chain((0..20).map(|i| format!("{i:02}{}", "x".repeat(4 * 1024 - 2))))
        .collect();
    for id in &ids {
        let params =
            json!({"mode":"url","message":"m","elicitationId":id,"url":"https://example.com/a"});
        server_asks(&mut p, "elicitation/create", &params.to_string()).unwrap();
        p.step();
        let Some(Ev::Request { id, .. }) = p.take_client_events().into_iter().next() else {
            panic!()
        };
        p.client
            .respond(id.as_id(), raw(r#"{"action":"accept"}"#))
            .unwrap();
        p.step();
    }
    // 20 ids of 4 KiB: the 16 newest fit in 64 KiB.
    let got = completed(&mut p, &ids);
    assert_eq!(got, ids[5..].to_vec());
}

#[test]
fn include_context_needs_no_capability_before_2025_11_25() {
    // `sampling.context` arrived in 2025-11-25; before it, `includeContext` has no gate.
    for v in [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
    ] {
        let mut p = Pair::ready(v, client(r#"{"sampling":{}}"#), server_config());
        assert!(
            server_asks(&mut p, "sampling/createMessage", CONTEXT).is_ok(),
            "{v:?}"
        );
    }
}

/// URL-mode elicitation and tool use in sampling arrived in 2025-11-25. A client that also
/// speaks 2025-11-25 declares them before a version is negotiated; in an older session they
/// count as undeclared both ways: not sent, and -32602 when received.
#[test]
fn url_mode_and_sampling_tools_exist_from_2025_11_25() {
    const ALL: &str =
        r#"{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{},"context":{}}}"#;
    for v in [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
    ] {
        let mut p = Pair::ready(v, client(ALL), server_config());
        assert_eq!(
            server_asks(&mut p, "sampling/createMessage", TOOLS),
            Err(Error::NotNegotiated(Caps::SAMPLING_TOOLS)),
            "{v:?}"
        );
        assert!(
            server_asks(&mut p, "sampling/createMessage", CONTEXT).is_ok(),
            "{v:?}"
        );
        let answer = raw_server_request(&mut p, 90, "sampling/createMessage", TOOLS);
        assert_eq!(answer["error"]["code"], -32602, "{v:?} {answer}");
        if v == ProtocolVersion::V2025_06_18 {
            assert_eq!(
                server_asks(&mut p, "elicitation/create", URL),
                Err(Error::NotNegotiated(Caps::ELICITATION_URL))
            );
            assert!(server_asks(&mut p, "elicitation/create", FORM).is_ok());
            let answer = raw_server_request(&mut p, 91, "elicitation/create", URL);
            assert_eq!(answer["error"]["code"], -32602, "{answer}");
        }
    }
    // In 2025-11-25 the same declaration allows both.
    let mut p = pair(ALL);
    assert!(server_asks(&mut p, "sampling/createMessage", TOOLS).is_ok());
    assert!(server_asks(&mut p, "elicitation/create", URL).is_ok());
    // A client that declared URL mode alone, in a 2025-06-18 session, declared elicitation:
    // form mode, the only one then, both ways (it was refused -32602, as undeclared).
    let mut p = Pair::ready(
        ProtocolVersion::V2025_06_18,
        client(r#"{"elicitation":{"url":{}}}"#),
        server_config(),
    );
    assert!(server_asks(&mut p, "elicitation/create", FORM).is_ok());
    let answer = raw_server_request(&mut p, 92, "elicitation/create", FORM);
    assert!(
        answer.is_null(),
        "it reached the client's application: {answer}"
    );
    // In 2025-11-25 it is URL mode only.
    let mut p = pair(r#"{"elicitation":{"url":{}}}"#);
    assert_eq!(
        server_asks(&mut p, "elicitation/create", FORM),
        Err(Error::NotNegotiated(Caps::ELICITATION_FORM))
    );
}

#[test]
fn a_member_the_rules_read_twice_is_malformed_both_ways() {
    const MODES: &str = r#"{"mode":"form","mode":"url","message":"m","elicitationId":"e","url":"https://x.example/"}"#;
    const TOOLS_TWICE: &str = r#"{"messages":[],"maxTokens":5,"tools":[],"tools":[{"name":"t","inputSchema":{"type":"object"}}]}"#;
    const CONTEXT_TWICE: &str =
        r#"{"messages":[],"maxTokens":5,"includeContext":"none","includeContext":"allServers"}"#;
    const TASK_TWICE: &str = r#"{"name":"x","task":{"ttl":1},"task":{"ttl":2}}"#;
    for (m, params) in [
        ("elicitation/create", MODES),
        ("sampling/createMessage", TOOLS_TWICE),
        ("tools/call", TASK_TWICE),
    ] {
        assert_eq!(
            sub_capabilities(m, Some(raw(params))),
            SubCapability::Malformed,
            "{params}"
        );
    }
    // `includeContext` twice needs the capability (one of them might), and is not malformed:
    // every receiver before 2025-11-25 tolerates it.
    assert_eq!(
        sub_capabilities("sampling/createMessage", Some(raw(CONTEXT_TWICE))),
        SubCapability::Needs(Caps::SAMPLING_CONTEXT)
    );
    // Sending: refused, whatever the peer declared.
    let mut p =
        pair(r#"{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{},"context":{}}}"#);
    for (m, params) in [
        ("elicitation/create", MODES),
        ("sampling/createMessage", TOOLS_TWICE),
    ] {
        assert_eq!(
            server_asks(&mut p, m, params),
            Err(Error::InvalidParams),
            "{params}"
        );
    }
    assert!(server_asks(&mut p, "sampling/createMessage", CONTEXT_TWICE).is_ok());
    assert_eq!(
        p.client.request(p.now, "tools/call", Some(raw(TASK_TWICE))),
        Err(Error::InvalidParams)
    );
    // Receiving: -32602, and the application never sees them (a parser where the last one
    // wins would read the undeclared URL mode or tool use).
    let mut p = pair(r#"{"elicitation":{},"sampling":{}}"#);
    let answer = raw_server_request(&mut p, 80, "elicitation/create", MODES);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let answer = raw_server_request(&mut p, 81, "sampling/createMessage", TOOLS_TWICE);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        !p.take_client_events()
            .iter()
            .any(|e| matches!(e, Ev::Request { .. }))
    );
    // `includeContext` twice is tolerated like one, in every version.
    for v in [ProtocolVersion::V2024_11_05, V] {
        let mut p = Pair::ready(v, client(r#"{"sampling":{}}"#), server_config());
        raw_server_request(&mut p, 82, "sampling/createMessage", CONTEXT_TWICE);
        assert_eq!(
            p.take_client_events()
                .iter()
                .filter(|e| matches!(e, Ev::Request { .. }))
                .count(),
            1,
            "{v:?}"
        );
    }
}

/// A 2025-11-25 URL-mode `elicitation/create` must carry one string each of `elicitationId`,
/// `url` and `message` (its schema requires them; "URL mode elicitation requests MUST
/// specify `mode: "url"`, a `message`, and include these additional parameters"). One without
/// a single `elicitationId` reached the application, which was never told of its completion:
/// the id was not remembered, and the server's `notifications/elicitation/complete` was
/// dropped as unknown. Now -32602 when received, `InvalidParams` when sent.
#[test]
fn a_url_elicitation_without_one_string_of_each_required_member_is_invalid() {
    let incomplete = [
        r#"{"mode":"url","message":"Connect","url":"https://example.com/connect"}"#,
        r#"{"mode":"url","message":"Connect","elicitationId":"a","elicitationId":"a","url":"https://example.com/connect"}"#,
        r#"{"mode":"url","message":"Connect","elicitationId":7,"url":"https://example.com/connect"}"#,
        r#"{"mode":"url","elicitationId":"a","url":"https://example.com/connect"}"#,
        r#"{"mode":"url","message":"Connect","elicitationId":"a"}"#,
    ];
    let mut p = pair(r#"{"elicitation":{"form":{},"url":{}}}"#);
    for (n, params) in incomplete.iter().enumerate() {
        assert_eq!(
            server_asks(&mut p, "elicitation/create", params),
            Err(Error::InvalidParams),
            "{params}"
        );
        let answer = raw_server_request(&mut p, 90 + n as u64, "elicitation/create", params);
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
    assert!(
        !p.take_client_events()
            .iter()
            .any(|e| matches!(e, Ev::Request { .. }))
    );
    // Whole, it goes through both ways.
    assert!(server_asks(&mut p, "elicitation/create", URL).is_ok());
    raw_server_request(&mut p, 99, "elicitation/create", URL);
    assert!(
        p.take_client_events()
            .iter()
            .any(|e| matches!(e, Ev::Request { .. }))
    );
}
