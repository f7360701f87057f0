//! A message transport reports a failed exchange (`Connection::handle_failed_exchange`): the
//! request ends at once with a typed reason instead of waiting for its timeout.

mod common;

use common::pair::{Ev, Pair, client_config, drain, legacy, server_config, take_output};
use mcpwire::Timestamp;
use mcpwire::conn::{CloseReason, Config, Connection, TransportFailure};
use mcpwire::jsonrpc::Id;
use mcpwire::mcp::ProtocolVersion;

#[test]
fn a_failed_exchange_ends_the_request_at_once_and_a_late_answer_is_dropped() {
    let mut p = Pair::ready(
        ProtocolVersion::V2025_11_25,
        legacy(client_config()),
        legacy(server_config()),
    );
    let request = p.client.request(p.now, "tools/list", None).unwrap();
    let _ = take_output(&mut p.client);
    p.client
        .handle_failed_exchange(p.now, Id::Int(request.0), TransportFailure::Status(502));
    let events = drain(&mut p.client);
    assert_eq!(
        events,
        vec![Ev::Failed {
            request,
            reason: TransportFailure::Status(502)
        }]
    );
    assert_eq!(p.client.requests_in_flight(), 0);
    assert!(
        take_output(&mut p.client).is_empty(),
        "a refusal is not cancelled"
    );
    // Its timer (kept lazily) fires nothing.
    if let Some(deadline) = p.client.poll_timeout() {
        p.client.handle_timeout(deadline);
        assert!(drain(&mut p.client).is_empty(), "no TimedOut after Failed");
    }
    // The answer still arrives (say, on a resumed stream): dropped quietly, counted.
    let answer = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"tools\":[]}}}}\n",
        request.0
    );
    p.client.handle_input(p.now, answer.as_bytes());
    assert!(drain(&mut p.client).is_empty());
    assert_eq!(p.client.stats().late_responses, 1);
    // A lost answer (not a refusal) is cancelled, so the server can stop working on it.
    let again = p.client.request(p.now, "tools/list", None).unwrap();
    let _ = take_output(&mut p.client);
    p.client
        .handle_failed_exchange(p.now, Id::Int(again.0), TransportFailure::StreamEnded);
    let sent = String::from_utf8(take_output(&mut p.client)).unwrap();
    assert!(
        sent.contains("\"method\":\"notifications/cancelled\"")
            && sent.contains(&format!("\"requestId\":{}", again.0)),
        "{sent}"
    );
    let _ = drain(&mut p.client);
    // Ids that are not ours in flight change nothing.
    p.client
        .handle_failed_exchange(p.now, Id::Int(999), TransportFailure::Disconnected);
    assert!(drain(&mut p.client).is_empty());
}

#[test]
fn an_auto_era_probe_that_fails_falls_back_to_initialize_at_once() {
    let mut client = Connection::new(client_config(), Timestamp::ZERO).unwrap();
    let probe = String::from_utf8(take_output(&mut client)).unwrap();
    assert!(probe.contains("\"method\":\"server/discover\""), "{probe}");
    let id: i64 = serde_json::from_str::<serde_json::Value>(probe.trim()).unwrap()["id"]
        .as_i64()
        .unwrap();
    // The server answered the POST with 404 and no JSON-RPC body (a legacy-only server).
    client.handle_failed_exchange(
        Timestamp::from_millis(3),
        Id::Int(id),
        TransportFailure::Status(404),
    );
    let next = String::from_utf8(take_output(&mut client)).unwrap();
    assert!(
        next.contains("\"method\":\"initialize\""),
        "fell back at once: {next}"
    );
    assert!(drain(&mut client).is_empty());
}

#[test]
fn a_failed_handshake_closes_with_the_transport_reason() {
    for config in [legacy(client_config()), {
        let mut c: Config = client_config();
        c.versions = vec![ProtocolVersion::V2026_07_28];
        c
    }] {
        let mut client = Connection::new(config, Timestamp::ZERO).unwrap();
        let first = String::from_utf8(take_output(&mut client)).unwrap();
        let id = serde_json::from_str::<serde_json::Value>(first.trim()).unwrap()["id"]
            .as_i64()
            .unwrap();
        client.handle_failed_exchange(Timestamp::ZERO, Id::Int(id), TransportFailure::Disconnected);
        assert_eq!(
            drain(&mut client),
            vec![Ev::Closed {
                reason: CloseReason::TransportFailed(TransportFailure::Disconnected)
            }],
            "{first}"
        );
    }
}

#[test]
fn server_config_is_unaffected() {
    // The input exists for clients; a server given one ignores it.
    let mut server = Connection::new(server_config(), Timestamp::ZERO).unwrap();
    server.handle_failed_exchange(Timestamp::ZERO, Id::Int(1), TransportFailure::StreamEnded);
    assert!(drain(&mut server).is_empty());
}
