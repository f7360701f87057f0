//! Correlation, timeouts, progress, cancellation, pings, batches and bounds, in simulated time,
//! across the handshake-era versions.

mod common;

use std::time::Duration;

use common::pair::{Ev, Pair, client_config, drain, server_config, take_output};
use mcpwire::Timestamp;
use mcpwire::conn::{
    CloseReason, Config, Connection, Error, ProgressPolicy, RequestId, RequestOptions,
    ViolationKind,
};
use mcpwire::jsonrpc::{Id, JsonStr, OwnedId, RawJson, Reason};
use mcpwire::mcp::ProtocolVersion;

fn raw(s: &str) -> RawJson<'_> {
    RawJson::new(s).unwrap()
}

fn ready(version: ProtocolVersion) -> Pair {
    Pair::ready(version, client_config(), server_config())
}

/// A server past a 2025-11-25 handshake fed `lines` (one message per line) at once: the
/// connection, and everything it wrote (the `initialize` answer first), as text and parsed.
fn handshaken_server(lines: &str) -> (Connection, String, Vec<serde_json::Value>) {
    let mut s = Connection::new(server_config(), Timestamp::ZERO).unwrap();
    let handshake = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#;
    s.handle_input(Timestamp::ZERO, format!("{handshake}{lines}").as_bytes());
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    let parsed = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (s, out, parsed)
}

/// The id of the single request the server saw.
fn only_request(events: &[Ev]) -> (OwnedId, String, Option<String>) {
    match events {
        [Ev::Request { id, method, params }] => (id.clone(), method.clone(), params.clone()),
        other => panic!("expected one request, got {other:?}"),
    }
}

#[test]
fn request_ids_are_monotonic_and_responses_match_exactly() {
    for version in ProtocolVersion::LEGACY {
        let mut p = ready(version);
        let a = p.client.request(p.now, "tools/list", None).unwrap();
        let b = p.client.request(p.now, "tools/list", None).unwrap();
        let c = p.client.request(p.now, "prompts/list", None).unwrap();
        assert!(a < b && b < c);
        p.step();
        let reqs = p.take_server_events();
        assert_eq!(reqs.len(), 3);
        // Answer out of order.
        for (i, e) in reqs.iter().enumerate().rev() {
            let Ev::Request { id, .. } = e else { panic!() };
            p.server
                .respond(id.as_id(), raw(&format!("{{\"n\":{i}}}")))
                .unwrap();
        }
        p.step();
        assert_eq!(
            p.take_client_events(),
            vec![
                Ev::Response {
                    request: c,
                    result: r#"{"n":2}"#.into()
                },
                Ev::Response {
                    request: b,
                    result: r#"{"n":1}"#.into()
                },
                Ev::Response {
                    request: a,
                    result: r#"{"n":0}"#.into()
                },
            ]
        );
        assert_eq!(p.client.requests_in_flight(), 0);
    }
}

#[test]
fn the_right_digits_in_the_wrong_type_never_match() {
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let a = p.client.request(p.now, "tools/list", None).unwrap();
    take_output(&mut p.client);
    let n = a.0;
    p.client.handle_input(
        p.now,
        format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{n}\",\"result\":{{}}}}\n").as_bytes(),
    );
    let e = drain(&mut p.client);
    assert!(
        matches!(&e[0], Ev::Violation { kind: ViolationKind::UnknownResponse, id: Some(id), .. } if *id == OwnedId::from(Id::Str(JsonStr::from_raw(&n.to_string()).unwrap()))),
        "{e:?}"
    );
    assert_eq!(p.client.requests_in_flight(), 1, "still waiting");
    // An id never issued.
    p.client
        .handle_input(p.now, b"{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n");
    assert!(matches!(
        &drain(&mut p.client)[0],
        Ev::Violation {
            kind: ViolationKind::UnknownResponse,
            ..
        }
    ));
    // The real answer still works, once; a duplicate is then unknown.
    let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{n},\"result\":{{\"ok\":true}}}}\n");
    p.client.handle_input(p.now, line.as_bytes());
    assert_eq!(
        drain(&mut p.client),
        vec![Ev::Response {
            request: a,
            result: r#"{"ok":true}"#.into()
        }]
    );
    p.client.handle_input(p.now, line.as_bytes());
    assert!(matches!(
        &drain(&mut p.client)[0],
        Ev::Violation {
            kind: ViolationKind::UnknownResponse,
            ..
        }
    ));
}

#[test]
fn inbound_requests_are_tracked_until_answered() {
    let mut p = ready(ProtocolVersion::V2025_06_18);
    p.client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"a"}"#)))
        .unwrap();
    p.step();
    let (id, method, params) = only_request(&p.take_server_events());
    assert_eq!(method, "tools/call");
    assert_eq!(params.as_deref(), Some(r#"{"name":"a"}"#));
    assert_eq!(p.server.peer_requests_in_flight(), 1);
    // Answering an unknown id, or twice, is a typed local error.
    assert_eq!(
        p.server.respond(Id::Int(12345), raw("{}")),
        Err(Error::UnknownRequest)
    );
    p.server.respond(id.as_id(), raw("{}")).unwrap();
    assert_eq!(
        p.server.respond(id.as_id(), raw("{}")),
        Err(Error::UnknownRequest)
    );
    assert_eq!(
        p.server.respond_error(id.as_id(), -32603, "x", None),
        Err(Error::UnknownRequest)
    );
    assert_eq!(p.server.peer_requests_in_flight(), 0);
}

#[test]
fn a_duplicate_in_flight_id_from_the_peer_is_rejected() {
    let (mut s, out, lines) = handshaken_server(
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}
{"jsonrpc":"2.0","id":"x","method":"tools/list"}
{"jsonrpc":"2.0","id":"\u0078","method":"tools/list"}
"#,
    );
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[1]["error"]["code"], -32600);
    assert_eq!(lines[1]["id"], "x");
    // "\u0078" is the same string id, written back exactly as received.
    assert!(out.lines().nth(2).unwrap().contains(r#""id":"\u0078""#));
    let events = drain(&mut s);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ev::Request { .. }))
            .count(),
        1
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(
                e,
                Ev::Violation {
                    kind: ViolationKind::DuplicateRequestId,
                    ..
                }
            ))
            .count(),
        2
    );
}

#[test]
fn timeouts_fire_with_a_cancellation_and_late_responses_are_dropped() {
    for version in ProtocolVersion::LEGACY {
        let mut p = ready(version);
        let slow = p.client.request(p.now, "tools/list", None).unwrap();
        let quick = p
            .client
            .request_with(
                p.now,
                "prompts/list",
                None,
                RequestOptions {
                    timeout: Some(Duration::from_secs(2)),
                    ..Default::default()
                },
            )
            .unwrap();
        p.step();
        let reqs = p.take_server_events();
        assert_eq!(
            p.client.poll_timeout(),
            Some(p.now.after(Duration::from_secs(2)))
        );
        assert!(p.drive());
        assert_eq!(
            p.take_client_events(),
            vec![Ev::TimedOut { request: quick }]
        );
        // The server was told, and its later answer is suppressed.
        let cancelled = p.take_server_events();
        let Ev::Request { id: quick_id, .. } = &reqs[1] else {
            panic!()
        };
        assert_eq!(
            cancelled,
            vec![Ev::PeerCancelled {
                id: quick_id.clone(),
                reason: Some("timed out".into())
            }]
        );
        assert_eq!(p.server.respond(quick_id.as_id(), raw("{}")), Ok(()));
        assert_eq!(p.server.stats().suppressed_responses, 1);
        // The default timeout for the other one.
        assert!(p.drive());
        assert_eq!(p.now, Timestamp::ZERO.after(Duration::from_secs(60)));
        assert_eq!(p.take_client_events(), vec![Ev::TimedOut { request: slow }]);
        // A late answer is dropped and counted, never delivered.
        let Ev::Request { id: slow_id, .. } = &reqs[0] else {
            panic!()
        };
        let _ = p.server.respond(slow_id.as_id(), raw("{}"));
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
            slow.0
        );
        p.client.handle_input(p.now, line.as_bytes());
        p.step();
        assert!(p.take_client_events().is_empty());
        assert_eq!(p.client.stats().late_responses, 1);
    }
}

#[test]
fn response_racing_a_cancel_is_dropped() {
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let r = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"x"}"#)))
        .unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_server_events());
    // The server answers; before the answer arrives, the client cancels.
    p.server
        .respond(id.as_id(), raw(r#"{"content":[]}"#))
        .unwrap();
    p.client.cancel(p.now, r, Some("user")).unwrap();
    assert_eq!(p.client.cancel(p.now, r, None), Err(Error::UnknownRequest));
    p.step();
    assert!(
        p.take_client_events().is_empty(),
        "the answer arrived after the cancel"
    );
    assert_eq!(p.client.stats().late_responses, 1);
    // The server got the cancel for a request it had already answered: ignored.
    assert!(p.take_server_events().is_empty());
    assert_eq!(p.server.stats().ignored_cancellations, 1);
}

#[test]
fn response_racing_a_timeout_is_dropped() {
    let mut p = ready(ProtocolVersion::V2025_03_26);
    let r = p
        .client
        .request_with(
            p.now,
            "tools/list",
            None,
            RequestOptions {
                timeout: Some(Duration::from_millis(10)),
                ..Default::default()
            },
        )
        .unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_server_events());
    p.server.respond(id.as_id(), raw("{}")).unwrap();
    // Time passes before the answer is delivered.
    p.now = p.now.after(Duration::from_millis(10));
    p.client.handle_timeout(p.now);
    p.step();
    assert_eq!(p.take_client_events(), vec![Ev::TimedOut { request: r }]);
    assert_eq!(p.client.stats().late_responses, 1);
}

#[test]
fn progress_is_tracked_per_request_and_dropped_after_completion() {
    for version in ProtocolVersion::LEGACY {
        let mut p = ready(version);
        let r = p
            .client
            .request_with(
                p.now,
                "tools/call",
                Some(raw(r#"{"name":"slow","_meta":{"trace":"t"}}"#)),
                RequestOptions {
                    progress: true,
                    ..Default::default()
                },
            )
            .unwrap();
        p.step();
        let (id, _, params) = only_request(&p.take_server_events());
        let params: serde_json::Value = serde_json::from_str(&params.unwrap()).unwrap();
        assert_eq!(
            params["_meta"]["progressToken"], r.0,
            "token added beside existing _meta keys"
        );
        assert_eq!(params["_meta"]["trace"], "t");
        assert_eq!(params["name"], "slow");
        p.server
            .progress(id.as_id(), 1.0, Some(3.0), Some("one"))
            .unwrap();
        p.server.progress(id.as_id(), 2.0, Some(3.0), None).unwrap();
        assert_eq!(
            p.server.progress(id.as_id(), 2.0, None, None),
            Err(Error::NonIncreasingProgress)
        );
        // A total that is not a number is refused, not left out unsaid.
        for total in [f64::NAN, f64::INFINITY] {
            assert_eq!(
                p.server.progress(id.as_id(), 5.0, Some(total), None),
                Err(Error::NonIncreasingProgress)
            );
        }
        p.step();
        let message = (version >= ProtocolVersion::V2025_03_26).then(|| "one".to_owned());
        assert_eq!(
            p.take_client_events(),
            vec![
                Ev::Progress {
                    request: r,
                    progress: 1.0,
                    total: Some(3.0),
                    message
                },
                Ev::Progress {
                    request: r,
                    progress: 2.0,
                    total: Some(3.0),
                    message: None
                },
            ]
        );
        // The four members are read in one pass, in any order; a duplicated token or progress
        // is not used (the notification is dropped).
        let t = r.0;
        for params in [
            format!(r#"{{"progressToken":{t},"progressToken":{t},"progress":2.2}}"#),
            format!(r#"{{"progressToken":{t},"progress":2.3,"progress":2.4}}"#),
            format!(r#"{{"message":"m","total":3,"progress":2.5,"progressToken":{t}}}"#),
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{params}}}"#
            );
            p.client.handle_input(p.now, format!("{line}\n").as_bytes());
        }
        assert_eq!(
            drain(&mut p.client),
            vec![Ev::Progress {
                request: r,
                progress: 2.5,
                total: Some(3.0),
                message: Some("m".to_owned())
            }]
        );
        assert_eq!(p.client.stats().dropped_progress, 2);
        p.server.respond(id.as_id(), raw("{}")).unwrap();
        assert_eq!(
            p.server.progress(id.as_id(), 3.0, None, None),
            Err(Error::UnknownRequest)
        );
        p.step();
        assert_eq!(
            p.take_client_events(),
            vec![Ev::Response {
                request: r,
                result: "{}".into()
            }]
        );
        // A peer that keeps sending progress after completion: dropped quietly.
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{},\"progress\":9}}}}\n",
            r.0
        );
        p.client.handle_input(p.now, line.as_bytes());
        p.client.handle_input(p.now, b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"nope\",\"progress\":1}}\n");
        assert!(drain(&mut p.client).is_empty());
        assert_eq!(p.client.stats().dropped_progress, 4);
    }
}

#[test]
fn non_increasing_progress_follows_the_policy() {
    for (policy, delivered) in [
        (ProgressPolicy::DropNonIncreasing, 2),
        (ProgressPolicy::DeliverAll, 3),
    ] {
        let mut client = client_config();
        client.policy.progress = policy;
        let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client, server_config());
        let r = p
            .client
            .request_with(
                p.now,
                "tools/call",
                Some(raw("{}")),
                RequestOptions {
                    progress: true,
                    ..Default::default()
                },
            )
            .unwrap();
        take_output(&mut p.client);
        for v in [1, 5, 5] {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{},\"progress\":{v}}}}}\n",
                r.0
            );
            p.client.handle_input(p.now, line.as_bytes());
        }
        let events = drain(&mut p.client);
        assert_eq!(events.len(), delivered, "{policy:?}");
    }
}

/// A progress reset never brings a request's deadline earlier than it was: with a timeout
/// (60 s) past the maximum total (30 s), progress at 5 s computed 30 s while the timer
/// stayed at 60 s, and the request timed out at 60 s, or at 30 s once the timer heap had
/// been compacted from the recorded deadlines (here by 200 answered pings): which, depended
/// on the other requests (found by a review of the connection core).
#[test]
fn a_progress_reset_never_brings_the_deadline_earlier() {
    let mut client = client_config();
    client.max_total_timeout = Duration::from_secs(30);
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client, server_config());
    let start = p.now;
    let r = p
        .client
        .request_with(
            p.now,
            "tools/call",
            Some(raw("{}")),
            RequestOptions {
                timeout: Some(Duration::from_secs(60)),
                progress: true,
                reset_on_progress: Some(true),
            },
        )
        .unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_server_events());
    p.advance(Duration::from_secs(5));
    p.server.progress(id.as_id(), 1.0, None, None).unwrap();
    p.step();
    assert_eq!(p.take_client_events().len(), 1, "the progress");
    for _ in 0..200 {
        p.client.request(p.now, "ping", None).unwrap();
        p.step();
    }
    p.take_client_events();
    p.advance(Duration::from_secs(30));
    assert!(
        p.take_client_events().is_empty(),
        "timed out at {:?}",
        p.now.since(start)
    );
    while p.take_client_events().is_empty() {
        assert!(p.drive());
    }
    assert_eq!(p.now.since(start), Duration::from_secs(60));
    let _ = r;
}

#[test]
fn progress_can_reset_the_timeout_up_to_a_maximum() {
    let mut client = client_config();
    client.max_total_timeout = Duration::from_secs(25);
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client, server_config());
    let start = p.now;
    let r = p
        .client
        .request_with(
            p.now,
            "tools/call",
            Some(raw("{}")),
            RequestOptions {
                timeout: Some(Duration::from_secs(10)),
                progress: true,
                reset_on_progress: Some(true),
            },
        )
        .unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_server_events());
    // Progress every 8 s keeps it alive past its 10 s timeout…
    for i in 1..=3 {
        p.advance(Duration::from_secs(8));
        assert!(p.take_client_events().is_empty(), "alive at {:?}", p.now);
        p.server.progress(id.as_id(), i as f64, None, None).unwrap();
        p.step();
        assert_eq!(p.take_client_events().len(), 1);
    }
    // …but never beyond the maximum total time (25 s).
    while p.take_client_events().is_empty() {
        assert!(p.drive());
    }
    assert_eq!(p.now.since(start), Duration::from_secs(25));
    // Without reset, progress does not extend anything.
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let r2 = p
        .client
        .request_with(
            p.now,
            "tools/call",
            Some(raw("{}")),
            RequestOptions {
                timeout: Some(Duration::from_secs(10)),
                progress: true,
                ..Default::default()
            },
        )
        .unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_server_events());
    p.advance(Duration::from_secs(8));
    p.server.progress(id.as_id(), 1.0, None, None).unwrap();
    p.step();
    p.take_client_events();
    p.advance(Duration::from_secs(2));
    assert_eq!(p.take_client_events(), vec![Ev::TimedOut { request: r2 }]);
    let _ = r;
}

#[test]
fn progress_tokens_keep_their_type() {
    let mut s = Connection::new(server_config(), Timestamp::ZERO).unwrap();
    let t = Timestamp::ZERO;
    s.handle_input(t, br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"7"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":7}}}
"#);
    take_output(&mut s);
    drain(&mut s);
    s.progress(Id::Int(2), 0.5, None, None).unwrap();
    s.progress(Id::Int(3), 0.5, None, None).unwrap();
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    assert!(
        out.contains(r#""progressToken":"7","progress":0.5"#),
        "{out}"
    );
    assert!(out.contains(r#""progressToken":7,"progress":0.5"#), "{out}");
}

#[test]
fn extreme_progress_values_reach_the_peer_exactly() {
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let options = RequestOptions {
        progress: true,
        ..Default::default()
    };
    let r = p
        .client
        .request_with(p.now, "tools/call", Some(raw("{}")), options)
        .unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_server_events());
    // Written with an exponent (not 309 digits), so serde_json and our own decoder read it.
    p.server
        .progress(id.as_id(), 1e-300, Some(f64::MAX), None)
        .unwrap();
    p.server.progress(id.as_id(), f64::MAX, None, None).unwrap();
    p.wire.clear();
    p.step();
    let lines = p.lines(false);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert!(line.len() < 160, "{line}");
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    let events = p.take_client_events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        matches!(&events[0], Ev::Progress { request, progress, total: Some(total), .. }
            if *request == r && *progress == 1e-300 && *total == f64::MAX),
        "{events:?}"
    );
    assert!(
        matches!(&events[1], Ev::Progress { progress, total: None, .. } if *progress == f64::MAX),
        "{events:?}"
    );
}

#[test]
fn peer_cancellation_surfaces_and_suppresses_our_answer() {
    for version in ProtocolVersion::LEGACY {
        let mut p = ready(version);
        let r = p
            .client
            .request(p.now, "tools/call", Some(raw("{}")))
            .unwrap();
        p.step();
        let (id, _, _) = only_request(&p.take_server_events());
        p.client.cancel(p.now, r, Some("changed my mind")).unwrap();
        p.step();
        assert_eq!(
            p.take_server_events(),
            vec![Ev::PeerCancelled {
                id: id.clone(),
                reason: Some("changed my mind".into())
            }]
        );
        assert_eq!(p.server.respond(id.as_id(), raw("{}")), Ok(()));
        assert!(
            p.server.poll_transmit().is_none(),
            "nothing sent for a cancelled request"
        );
        // Cancels for unknown ids are ignored.
        p.server.handle_input(p.now, b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":424242}}\n");
        assert!(drain(&mut p.server).is_empty());
        assert!(
            p.take_client_events().is_empty(),
            "local cancel resolves without an event"
        );
        assert_eq!(p.client.requests_in_flight(), 0);
    }
}

#[test]
fn remembered_cancelled_ids_are_bounded() {
    let mut server = server_config();
    server.limits.max_remembered_ids = 4;
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client_config(), server);
    let mut ids = Vec::new();
    for _ in 0..10 {
        let r = p.client.request(p.now, "tools/list", None).unwrap();
        p.step();
        let (id, _, _) = only_request(&p.take_server_events());
        p.client.cancel(p.now, r, None).unwrap();
        p.step();
        p.take_server_events();
        ids.push(id);
    }
    // The oldest are forgotten (answering them is now an unknown request); the newest are not.
    assert_eq!(
        p.server.respond(ids[0].as_id(), raw("{}")),
        Err(Error::UnknownRequest)
    );
    for id in &ids[6..] {
        assert_eq!(p.server.respond(id.as_id(), raw("{}")), Ok(()));
    }
}

#[test]
fn pings_are_answered_automatically_unless_the_app_opts_out() {
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let r = p.client.request(p.now, "ping", None).unwrap();
    p.step();
    assert!(p.take_server_events().is_empty());
    assert_eq!(
        p.take_client_events(),
        vec![Ev::Response {
            request: r,
            result: "{}".into()
        }]
    );
    let r = p.server.request(p.now, "ping", None).unwrap();
    p.step();
    assert_eq!(
        p.take_server_events(),
        vec![Ev::Response {
            request: r,
            result: "{}".into()
        }]
    );

    let mut server = server_config();
    server.policy.answer_pings = false;
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client_config(), server);
    p.client.request(p.now, "ping", None).unwrap();
    p.step();
    let (_, method, _) = only_request(&p.take_server_events());
    assert_eq!(method, "ping");
}

fn handshake_raw_server(version: &str) -> Connection {
    let mut s = Connection::new(server_config(), Timestamp::ZERO).unwrap();
    let init = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"{version}\",\"capabilities\":{{}},\"clientInfo\":{{\"name\":\"c\",\"version\":\"1\"}}}}}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n"
    );
    s.handle_input(Timestamp::ZERO, init.as_bytes());
    take_output(&mut s);
    drain(&mut s);
    s
}

#[test]
fn batches_in_2025_03_26_are_answered_with_a_batch() {
    let mut s = handshake_raw_server("2025-03-26");
    let t = Timestamp::ZERO;
    s.handle_input(t, br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":3,"method":"nope/nope"},42]
"#);
    assert!(
        s.poll_transmit().is_none(),
        "held until every member is answered"
    );
    let events = drain(&mut s);
    let requests: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Ev::Request { .. }))
        .collect();
    assert_eq!(requests.len(), 2, "{events:?}");
    s.respond_error(Id::Int(3), -32601, "Method not found", None)
        .unwrap();
    assert!(s.poll_transmit().is_none());
    s.respond(Id::Int(2), raw(r#"{"tools":[]}"#)).unwrap();
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    assert_eq!(out.lines().count(), 1);
    let batch: serde_json::Value = serde_json::from_str(&out).unwrap();
    let batch = batch.as_array().unwrap();
    assert_eq!(batch.len(), 4, "{out}");
    assert_eq!(
        batch[0],
        serde_json::json!({"jsonrpc":"2.0","id":1,"result":{}})
    );
    assert_eq!(batch[1]["error"]["code"], -32600, "the member 42");
    assert!(
        batch
            .iter()
            .any(|m| m["id"] == 2 && m["result"]["tools"].is_array())
    );
    assert!(
        batch
            .iter()
            .any(|m| m["id"] == 3 && m["error"]["code"] == -32601)
    );
}

#[test]
fn a_batch_past_the_decoders_limit_is_refused_whole_with_one_error() {
    let mut s = handshake_raw_server("2025-03-26");
    let ping = r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#;
    let batch = |n: usize| format!("[{}]\n", vec![ping; n].join(","));
    // At the limit (1024 by default) the batch is taken, member by member.
    s.handle_input(Timestamp::ZERO, batch(1024).as_bytes());
    let events = drain(&mut s);
    assert_eq!(events.len(), 1024, "every notification is an event");
    assert!(s.poll_transmit().is_none(), "notifications get no answer");
    // One more member, and none of it reaches the application: one invalid-request error.
    s.handle_input(Timestamp::ZERO, batch(1025).as_bytes());
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["error"]["code"], -32600, "{out}");
    assert!(v["id"].is_null());
    let events = drain(&mut s);
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Notification { .. })),
        "{events:?}"
    );
    assert_eq!(
        s.state(),
        mcpwire::conn::State::Operating,
        "the connection goes on"
    );
}

#[test]
fn a_batch_of_only_notifications_gets_no_answer_and_cancelled_members_are_left_out() {
    let mut s = handshake_raw_server("2025-03-26");
    let t = Timestamp::ZERO;
    s.handle_input(
        t,
        b"[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}]\n",
    );
    assert!(s.poll_transmit().is_none());
    s.handle_input(t, br#"[{"jsonrpc":"2.0","id":5,"method":"tools/list"},{"jsonrpc":"2.0","id":6,"method":"tools/list"}]
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}
"#);
    s.respond(Id::Int(6), raw("{}")).unwrap();
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    assert_eq!(out, "[{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}]\n");
}

/// A notification whose params are an array, or with a member named as a JSON-RPC one but for
/// its case, is valid JSON-RPC and invalid MCP: it is a violation, and gets no answer ("The Server MUST NOT reply to a Notification"), alone or
/// as a batch's only member. It got an id-less -32600 (found by a review of the connection
/// core). A request so shaped, or a notification whose params are not even JSON-RPC's (a
/// string), still gets -32600.
#[test]
fn a_notification_with_array_params_is_refused_without_an_answer() {
    let mut s = handshake_raw_server("2025-03-26");
    let t = Timestamp::ZERO;
    s.handle_input(
        t,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"custom/thing\",\"params\":[1,2]}\n",
    );
    assert!(drain(&mut s).iter().any(|e| matches!(
        e,
        Ev::Violation {
            kind: ViolationKind::InvalidMessage(Reason::ParamsNotObject),
            ..
        }
    )));
    s.handle_input(
        t,
        b"[{\"jsonrpc\":\"2.0\",\"method\":\"custom/thing\",\"params\":[1]}]\n",
    );
    assert_eq!(take_output(&mut s), b"", "a notification is never answered");
    // Nor is one with a member named as a JSON-RPC one but for its case (it got -32600).
    s.handle_input(
        t,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"custom/thing\",\"Id\":1}\n",
    );
    assert!(drain(&mut s).iter().any(|e| matches!(
        e,
        Ev::Violation {
            kind: ViolationKind::InvalidMessage(Reason::CaseVariantKey),
            ..
        }
    )));
    assert_eq!(take_output(&mut s), b"", "a notification is never answered");
    for refused in [
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"custom/thing\",\"params\":[1]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"custom/thing\",\"params\":\"bar\"}",
        "{\"jsonrpc\":\"1.0\",\"method\":\"custom/thing\",\"params\":[1]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"custom/thing\",\"params\":[1],\"params\":[2]}",
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"custom/thing\",\"ID\":4}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"custom/thing\",\"Id\":1,\"params\":\"bar\"}",
    ] {
        s.handle_input(t, format!("{refused}\n").as_bytes());
        let out = String::from_utf8(take_output(&mut s)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
        assert_eq!(v["error"]["code"], -32600, "{refused}: {out}");
    }
}

#[test]
fn batches_outside_2025_03_26_and_initialize_in_a_batch_are_refused() {
    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut s = handshake_raw_server(version);
        s.handle_input(
            Timestamp::ZERO,
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n",
        );
        let out = String::from_utf8(take_output(&mut s)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["error"]["code"], -32600, "{version}");
        assert!(v["id"].is_null());
        assert!(drain(&mut s).iter().any(|e| matches!(
            e,
            Ev::Violation {
                kind: ViolationKind::BatchNotAllowed,
                ..
            }
        )));
    }
    // Before negotiation there is no version with batches, so initialize can't hide in one.
    let mut s = Connection::new(server_config(), Timestamp::ZERO).unwrap();
    s.handle_input(Timestamp::ZERO, br#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}]
"#);
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    assert!(out.contains("-32600"));
    assert_eq!(s.protocol_version(), None);
}

/// Outside 2025-03-26 a batch is refused, but answers in it still end the requests they name
/// (`InvalidResponse`, as a malformed answer does), and a frame of answers gets no error back:
/// a client answering our ping in an array left it waiting for its 60 s timeout, then saw a
/// cancellation for what it had answered.
#[test]
fn a_refused_batch_of_answers_ends_their_requests_at_once() {
    for version in [ProtocolVersion::V2024_11_05, ProtocolVersion::V2025_06_18] {
        let p = Pair::ready(version, client_config(), server_config());
        let (now, mut server) = (p.now, p.server);
        let ping = server.request(now, "ping", None).unwrap();
        let other = server.request(now, "ping", None).unwrap();
        take_output(&mut server);
        let frame = format!(
            "[{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}},{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-1,\"message\":\"no\"}}}}]\n",
            ping.0, other.0
        );
        server.handle_input(now, frame.as_bytes());
        let events = drain(&mut server);
        for id in [ping, other] {
            assert!(
                events.contains(&Ev::InvalidResponse { request: id }),
                "{version:?}: {events:?}"
            );
        }
        assert!(
            take_output(&mut server).is_empty(),
            "{version:?}: a frame of answers is not answered"
        );
        // Their timeout, come: nothing times out, and no cancellation goes out.
        server.handle_timeout(now.after(Duration::from_secs(61)));
        assert!(
            drain(&mut server)
                .iter()
                .all(|e| !matches!(e, Ev::TimedOut { .. })),
            "{version:?}"
        );
        assert!(take_output(&mut server).is_empty(), "{version:?}");
    }
}

#[test]
fn undecodable_frames_get_the_prescribed_errors() {
    let mut s = handshake_raw_server("2025-11-25");
    let t = Timestamp::ZERO;
    s.handle_input(t, b"{not json\n{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"a\",\"method\":\"b\"}\n{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}\n");
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "a malformed response gets no answer: {out}");
    assert_eq!(
        lines[0],
        // Without an id, as MCP writes it (a null id fails its schemas).
        serde_json::json!({"jsonrpc":"2.0","error":{"code":-32700,"message":"unexpected character"}})
    );
    assert_eq!(lines[1]["id"], 4);
    assert_eq!(lines[1]["error"]["code"], -32600);
    assert_eq!(drain(&mut s).len(), 3);
}

#[test]
fn inbound_and_outbound_in_flight_are_bounded() {
    let mut server = server_config();
    server.limits.max_inbound_in_flight = 3;
    let mut client = client_config();
    client.limits.max_outbound_in_flight = 5;
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client, server);
    for _ in 0..5 {
        p.client.request(p.now, "tools/list", None).unwrap();
    }
    assert_eq!(
        p.client.request(p.now, "tools/list", None),
        Err(Error::TooManyInFlight)
    );
    p.step();
    let events = p.take_server_events();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ev::Request { .. }))
            .count(),
        3
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(
                e,
                Ev::Violation {
                    kind: ViolationKind::TooManyRequests,
                    ..
                }
            ))
            .count(),
        2
    );
    let errors = p.take_client_events();
    assert_eq!(
        errors
            .iter()
            .filter(|e| matches!(e, Ev::Error { code: -32603, .. }))
            .count(),
        2
    );
    assert_eq!(p.client.requests_in_flight(), 3);
}

#[test]
fn output_is_bounded_and_a_peer_that_never_reads_is_cut_off() {
    let mut server = server_config();
    server.limits.max_buffered_output = 4096;
    let mut s = Connection::new(server, Timestamp::ZERO).unwrap();
    s.handle_input(Timestamp::ZERO, br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
"#);
    drain(&mut s);
    // Our own sends fail once the buffer is full…
    let big = format!("{{\"level\":\"info\",\"data\":\"{}\"}}", "x".repeat(5000));
    assert!(s.notify("notifications/message", Some(raw(&big))).is_ok());
    assert_eq!(
        s.notify("notifications/message", Some(raw(&big))),
        Err(Error::OutputFull)
    );
    assert_eq!(s.respond(Id::Int(2), raw("{}")), Err(Error::OutputFull));
    // …and a peer that floods pings without reading our answers ends the connection.
    let mut flood = Vec::new();
    for i in 0..100 {
        flood.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":\"p{i}\",\"method\":\"ping\"}}\n").as_bytes(),
        );
    }
    s.handle_input(Timestamp::ZERO, &flood);
    let events = drain(&mut s);
    assert_eq!(
        events.last(),
        Some(&Ev::Closed {
            reason: CloseReason::PeerNotReading
        })
    );
    let buffered: usize = std::iter::from_fn(|| {
        let n = s.poll_transmit()?.bytes.len();
        s.consume_transmit(n);
        Some(n)
    })
    .sum();
    assert!(buffered <= 4096 + 5100, "{buffered}");
}

#[test]
fn request_ids_are_never_reused_across_a_session() {
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let r = p.client.request(p.now, "tools/list", None).unwrap();
        assert!(seen.insert(r));
        let _ = p.client.cancel(p.now, r, None);
    }
    assert_eq!(seen.len(), 200);
    let _ = RequestId(0);
    let _ = Config::client("x", "y");
}

#[test]
fn the_timer_heap_stays_bounded_when_answers_come_fast() {
    // A million quick round trips must not leave a million stale timers behind.
    let mut p = ready(ProtocolVersion::V2025_11_25);
    for _ in 0..5000 {
        let r = p.client.request(p.now, "tools/list", None).unwrap();
        let _ = p.client.cancel(p.now, r, None);
        assert!(p.client.timer_entries() <= 2 * (p.client.requests_in_flight() + 2) + 64);
    }
    // Closing keeps its own timer through compaction.
    p.client.request(p.now, "tools/list", None).unwrap();
    p.client.close(p.now, Duration::from_secs(1));
    for _ in 0..200 {
        let r = p.client.request(p.now, "ping", None);
        assert!(r.is_err());
    }
    p.advance(Duration::from_secs(1));
    assert!(p.take_client_events().contains(&Ev::Closed {
        reason: CloseReason::Local
    }));
}

#[test]
fn progress_tokens_are_the_engines_own() {
    // "MUST be unique across all active requests": a token of the application's own could
    // repeat the one the engine gave another request (its id), so it is refused, in both eras,
    // written plainly or with escapes, with or without the progress option.
    for version in [ProtocolVersion::V2025_11_25, ProtocolVersion::V2026_07_28] {
        let mut p = ready(version);
        let a = p
            .client
            .request_with(
                p.now,
                "tools/call",
                Some(raw(r#"{"name":"a"}"#)),
                RequestOptions {
                    progress: true,
                    ..Default::default()
                },
            )
            .unwrap();
        for params in [
            format!(r#"{{"name":"b","_meta":{{"progressToken":{}}}}}"#, a.0),
            r#"{"name":"b","_meta":{"progress\u0054oken":"x"}}"#.to_owned(),
            r#"{"name":"b","_meta":{},"_meta":{"progressToken":"x"}}"#.to_owned(),
            // `_meta` twice, whatever is in it: the receiver may read either.
            r#"{"name":"b","_meta":{"k":1},"_meta":{"k":2}}"#.to_owned(),
            r#"{"name":"a\nb","_meta":{"k":1},"_meta":{"k":2}}"#.to_owned(),
        ] {
            assert_eq!(
                p.client.request(p.now, "tools/call", Some(raw(&params))),
                Err(Error::InvalidParams),
                "{version:?} {params}"
            );
        }
        // The word elsewhere is no token.
        assert!(
            p.client
                .request(
                    p.now,
                    "tools/call",
                    Some(raw(
                        r#"{"name":"progressToken","arguments":{"progressToken":1}}"#
                    )),
                )
                .is_ok()
        );
    }
}

#[test]
fn only_a_server_logs() {
    // notifications/message goes from server to client: a client's `log` about a request the
    // server sent it is refused (it went out, and the server counted a violation).
    let client = Config::client("c", "1")
        .with_capabilities(r#"{"roots":{},"logging":{}}"#)
        .unwrap();
    let mut p = Pair::ready(ProtocolVersion::V2025_11_25, client, server_config());
    p.server.request(p.now, "roots/list", None).unwrap();
    p.step();
    let (id, _, _) = only_request(&p.take_client_events());
    assert_eq!(
        p.client
            .log(id.as_id(), mcpwire::mcp::LogLevel::Info, None, raw("1")),
        Err(Error::WrongDirection)
    );
    assert!(take_output(&mut p.client).is_empty());
}

/// Every MCP version's `Result` is an object: `respond` refuses anything else, and the
/// request stays open for a proper answer.
#[test]
fn a_result_must_be_an_object() {
    for version in ProtocolVersion::ALL {
        let mut p = ready(version);
        p.client
            .request(p.now, "tools/list", Some(raw("{}")))
            .unwrap();
        p.step();
        let (id, _, _) = only_request(&p.take_server_events());
        for bad in ["1", "[]", "\"x\"", "null"] {
            assert_eq!(
                p.server.respond(id.as_id(), raw(bad)),
                Err(Error::InvalidParams),
                "{version} {bad}"
            );
        }
        p.server
            .respond(id.as_id(), raw(r#"{"tools":[]}"#))
            .unwrap();
        p.step();
        assert!(
            matches!(&p.take_client_events()[..], [Ev::Response { .. }]),
            "{version}"
        );
    }
}

/// A frame shaped like a response (`result` or `error`, no `method`) is never answered, however
/// malformed: its id is one of our request ids, and an error sent back with it would be taken
/// by the peer for the answer to its own request of that id. The request it names ends with
/// `InvalidResponse` instead of waiting for its timeout.
#[test]
fn a_malformed_answer_is_never_answered_and_ends_the_request_it_names() {
    let malformed = [
        // A duplicated member, no `jsonrpc`, a wrong one, a case variant of a member.
        r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]},"result":{"tools":[]}}"#,
        r#"{"id":2,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"1.0","id":2,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":2,"Result":{},"error":{"code":1,"message":"m"}}"#,
    ];
    for version in [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
    ] {
        for frame in malformed {
            let mut p = ready(version);
            // The server has a request 2 of its own in flight (a ping, then `roots/list`,
            // which the client's application has not answered).
            p.server.request(p.now, "ping", None).unwrap();
            p.server.request(p.now, "roots/list", None).unwrap();
            p.step();
            p.take_server_events();
            p.take_client_events();
            let mine = p.client.request(p.now, "tools/list", None).unwrap();
            assert_eq!(mine, RequestId(2));
            take_output(&mut p.client);
            p.client
                .handle_input(p.now, format!("{frame}\n").as_bytes());
            assert!(
                take_output(&mut p.client).is_empty(),
                "{version:?}: {frame} was answered"
            );
            let events = drain(&mut p.client);
            assert!(
                events.contains(&Ev::InvalidResponse { request: mine }),
                "{version:?}: {frame}: {events:?}"
            );
            assert!(
                events.iter().any(|e| matches!(e, Ev::Violation { .. })),
                "{version:?}: {frame}: {events:?}"
            );
            // Nothing is left to time out, so nothing is cancelled later.
            p.advance(Duration::from_secs(3600));
            assert!(
                take_output(&mut p.client).is_empty(),
                "{version:?}: {frame}"
            );
        }
    }
    // A frame with `method` stays a request, and a malformed one is answered as ever.
    let mut p = ready(ProtocolVersion::V2025_11_25);
    p.client.handle_input(
        p.now,
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"method\":\"ping\"}\n",
    );
    let out = String::from_utf8(take_output(&mut p.client)).unwrap();
    assert!(out.contains(r#""id":9,"error":{"code":-32600"#), "{out}");
}

/// "The progress token MUST be unique across all active requests": a request whose token is
/// already that of another request in flight is refused with -32602, so the engine never
/// sends two progress streams under one token. Once the first is answered, the token is free.
#[test]
fn a_progress_token_already_in_use_is_refused() {
    let (mut s, out, lines) = handshaken_server(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"t"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"b","_meta":{"progressToken":"t"}}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"c","_meta":{"progressToken":2}}}
"#,
    );
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[1]["id"], 3);
    assert_eq!(lines[1]["error"]["code"], -32602);
    let events = drain(&mut s);
    let requests: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ev::Request { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    // Token 2 is not request 2's id in use as a token: ids and tokens are apart.
    assert_eq!(requests, [OwnedId::Int(2), OwnedId::Int(4)]);
    s.progress(Id::Int(2), 5.0, None, None).unwrap();
    s.respond(Id::Int(2), raw("{}")).unwrap();
    take_output(&mut s);
    s.handle_input(
        Timestamp::ZERO,
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"b\",\"_meta\":{\"progressToken\":\"t\"}}}\n",
    );
    assert!(take_output(&mut s).is_empty());
    s.progress(Id::Int(5), 1.0, None, None).unwrap();
}

/// The id of a request the peer cancelled stays used: the application may still answer the
/// cancelled request late, and a new request under that id would take the stale answer
/// ("MUST NOT have been previously used by the requestor within the same session").
#[test]
fn the_id_of_a_cancelled_request_is_not_taken_again() {
    let (mut s, out, lines) = handshaken_server(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"old"}}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}
{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"new"}}
"#,
    );
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[1]["id"], 5);
    assert_eq!(lines[1]["error"]["code"], -32600);
    let events = drain(&mut s);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ev::Request { .. }))
            .count(),
        1,
        "{events:?}"
    );
    // The late answer to the cancelled request goes nowhere.
    s.respond(Id::Int(5), raw(r#"{"content":[]}"#)).unwrap();
    assert!(take_output(&mut s).is_empty());
}

/// A cancel that spells the request's string id with other escapes (`"a"` for `"\u0061"`)
/// cancels it (the ids are equal as JSON), and the event names the request as the request
/// did: a host that compares ids byte for byte (Go's `ID`, a C `memcmp`) finds the work to
/// stop. The event named the cancel's spelling before.
#[test]
fn a_cancel_spelling_the_id_otherwise_is_reported_with_the_requests_spelling() {
    let p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        client_config(),
        server_config(),
    );
    let (now, mut server) = (p.now, p.server);
    for (asked, said, reason) in [
        (r#""\u0061""#, r#""a""#, Some(r#""caf\u00e9""#)),
        (r#""b""#, r#""\u0062""#, None),
        (r#""c""#, r#""c""#, Some(r#""plain""#)),
    ] {
        let reason_member = reason.map_or(String::new(), |r| format!(r#","reason":{r}"#));
        let lines = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{asked},\"method\":\"tools/list\"}}\n\
             {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{said}{reason_member}}}}}\n"
        );
        server.handle_input(now, lines.as_bytes());
        let mut seen = 0;
        while let Some(e) = server.poll_event() {
            match e {
                mcpwire::Event::Request { .. } => seen += 1,
                mcpwire::Event::PeerCancelled { id, reason: got } => {
                    let Id::Str(id) = id else { panic!("{id:?}") };
                    assert_eq!(format!("\"{}\"", id.raw()), asked, "the request's spelling");
                    let got = got.map(|r| (format!("\"{}\"", r.raw()), r.to_str().into_owned()));
                    let want =
                        reason.map(|r| (r.to_owned(), serde_json::from_str::<String>(r).unwrap()));
                    assert_eq!(got, want, "the reason as sent");
                    seen += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, 2);
        // Answered now, nothing goes out: the request was cancelled.
        take_output(&mut server);
        let raw_id = &asked[1..asked.len() - 1];
        let _ = server.respond(
            Id::Str(JsonStr::from_raw(raw_id).unwrap()),
            RawJson::new("{}").unwrap(),
        );
        assert!(take_output(&mut server).is_empty());
    }
}

/// A client past a 2025-11-25 handshake whose output holds at most `max_buffered` bytes, and
/// whose requests time out after a second.
fn handshaken_client(max_buffered: usize) -> Connection {
    let mut config = client_config();
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    config.request_timeout = Duration::from_secs(1);
    config.limits.max_buffered_output = max_buffered;
    let mut c = Connection::new(config, Timestamp::ZERO).unwrap();
    take_output(&mut c);
    c.handle_input(
        Timestamp::ZERO,
        br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}
"#,
    );
    assert!(matches!(drain(&mut c).as_slice(), [Ev::Ready { .. }]));
    take_output(&mut c);
    c
}

/// The engine's own `notifications/cancelled` (a time-out's, a close's) is a courtesy: when
/// the output is at its bound (one large message written by a reading peer's slow side) it
/// is left out. It ended the connection as `PeerNotReading`, every request with it.
#[test]
fn a_time_out_with_the_output_full_ends_the_request_not_the_connection() {
    let mut c = handshaken_client(4096);
    let id = c.request(Timestamp::ZERO, "tools/list", None).unwrap();
    let other = c.request(Timestamp::ZERO, "ping", None).unwrap();
    // One large notification: accepted (there was room), and now over the bound.
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(8192));
    c.notify("x/big", Some(raw(&big))).unwrap();
    let at = c.poll_timeout().expect("the requests' deadline");
    c.handle_timeout(at);
    let events = drain(&mut c);
    assert!(events.contains(&Ev::TimedOut { request: id }), "{events:?}");
    assert!(
        events.contains(&Ev::TimedOut { request: other }),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Closed { .. })),
        "closed: {events:?}"
    );
    assert_eq!(c.state(), mcpwire::conn::State::Operating);
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(
        !out.contains("notifications/cancelled"),
        "no room, no cancellation: {out}"
    );
    // With room again, the engine's cancellations go out as before.
    let third = c.request(at, "tools/list", None).unwrap();
    let later = c.poll_timeout().expect("its deadline");
    c.handle_timeout(later);
    assert!(drain(&mut c).contains(&Ev::TimedOut { request: third }));
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(out.contains("notifications/cancelled"), "{out}");
}

/// A close whose grace runs out with the output at its bound ends as the close it is
/// (`Local`), its cancellations left out.
#[test]
fn a_close_with_the_output_full_ends_as_a_local_close() {
    let mut c = handshaken_client(4096);
    let id = c.request(Timestamp::ZERO, "tools/list", None).unwrap();
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(8192));
    c.notify("x/big", Some(raw(&big))).unwrap();
    c.close(Timestamp::ZERO, Duration::from_millis(100));
    let at = c.poll_timeout().expect("the close's deadline");
    c.handle_timeout(at);
    let events = drain(&mut c);
    assert!(
        events.contains(&Ev::Abandoned { request: id }),
        "{events:?}"
    );
    assert!(
        events.contains(&Ev::Closed {
            reason: CloseReason::Local
        }),
        "{events:?}"
    );
}

/// A close begun while `initialize` is out ends with its answer only when nothing else is in
/// flight: a ping sent before the answer (allowed) keeps its grace. It was abandoned at once.
#[test]
fn a_close_during_the_handshake_keeps_the_grace_of_a_ping_in_flight() {
    let mut config = client_config();
    config.client_era = mcpwire::conn::ClientEra::Legacy;
    let mut c = Connection::new(config, Timestamp::ZERO).unwrap();
    let ping = c.request(Timestamp::ZERO, "ping", None).unwrap();
    take_output(&mut c);
    c.close(Timestamp::ZERO, Duration::from_secs(5));
    // (A second close with a later end changes nothing: the first deadline stands.)
    c.close(Timestamp::ZERO, Duration::from_secs(10));
    c.handle_input(
        Timestamp::ZERO,
        br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}
"#,
    );
    let events = drain(&mut c);
    assert!(events.is_empty(), "{events:?}");
    let out = String::from_utf8(take_output(&mut c)).unwrap();
    assert!(
        !out.contains("initialized"),
        "nothing new after close: {out}"
    );
    assert_eq!(
        c.poll_timeout(),
        Some(Timestamp::ZERO.after(Duration::from_secs(5)))
    );
    c.handle_input(
        Timestamp::ZERO,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
            ping.0
        )
        .as_bytes(),
    );
    let events = drain(&mut c);
    assert!(
        matches!(
            events.as_slice(),
            [
                Ev::Response { request, .. },
                Ev::Closed {
                    reason: CloseReason::Local
                }
            ] if *request == ping
        ),
        "{events:?}"
    );
}

/// An answer goes out under the request's own id, as it came: a host that rebuilt the id
/// from its decoded text (a raw newline, a raw quote) names the same request, and its
/// bytes went into the frame unescaped (two lines, or members injected into our answer).
#[test]
fn an_answer_carries_the_requests_own_id_whatever_the_host_rebuilt() {
    let (mut s, _, _) = handshaken_server(
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\\nb\\\"c\",\"method\":\"tools/list\"}\n",
    );
    let events = drain(&mut s);
    let id = events
        .iter()
        .find_map(|e| match e {
            Ev::Request { id, .. } => Some(id.clone()),
            _ => None,
        })
        .expect("the request");
    assert_eq!(id.to_string(), "\"a\\nb\\\"c\"");
    // The decoded text, as a host keeping ids as strings would hold it.
    let rebuilt = OwnedId::Str("a\nb\"c".as_bytes().into());
    s.respond(rebuilt.as_id(), raw(r#"{"tools":[]}"#)).unwrap();
    let out = String::from_utf8(take_output(&mut s)).unwrap();
    assert_eq!(out.lines().count(), 1, "{out:?}");
    let answer: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(answer["id"], "a\nb\"c");
    assert_eq!(answer["result"], serde_json::json!({"tools": []}));
}

/// Progress values too large for an f64 (`1e400`) are no values: such a report is dropped
/// (a `total` of it left out), and the request's later reports still count. It was handed
/// out as infinity, and every later report was dropped as not increasing.
#[test]
fn progress_too_large_for_a_float_is_dropped() {
    let mut p = ready(ProtocolVersion::V2025_11_25);
    let r = p
        .client
        .request_with(
            p.now,
            "tools/call",
            Some(raw(r#"{"name":"slow"}"#)),
            RequestOptions {
                progress: true,
                ..Default::default()
            },
        )
        .unwrap();
    p.step();
    p.take_server_events();
    let report = |progress: &str, total: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{},\"progress\":{progress},\"total\":{total}}}}}\n",
            r.0
        )
    };
    p.client
        .handle_input(p.now, report("1e400", "5").as_bytes());
    p.client
        .handle_input(p.now, report("1", "1e400").as_bytes());
    p.client.handle_input(p.now, report("2", "5").as_bytes());
    assert_eq!(
        drain(&mut p.client),
        vec![
            Ev::Progress {
                request: r,
                progress: 1.0,
                total: None,
                message: None
            },
            Ev::Progress {
                request: r,
                progress: 2.0,
                total: Some(5.0),
                message: None
            },
        ]
    );
    assert_eq!(p.client.stats().dropped_progress, 1);
}
