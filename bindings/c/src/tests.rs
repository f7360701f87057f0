//! What C cannot reach: the panic boundary and poisoning, and the result table's invariants.

use std::cell::Cell;
use std::ffi::CStr;
use std::ptr;

use super::boundary::{Handle, with_mut, with_ref};
use super::*;
use mcpw_result::*;

struct Probe {
    poisoned: Cell<bool>,
    calls: u32,
}

impl Handle for Probe {
    fn poisoned(&self) -> &Cell<bool> {
        &self.poisoned
    }
}

#[test]
fn a_panic_becomes_a_code_and_poisons_the_handle() {
    let mut probe = Probe {
        poisoned: Cell::new(false),
        calls: 0,
    };
    let p: *mut Probe = &mut probe;
    // Safety: `p` points to a live `Probe` used by nothing else during these calls.
    unsafe {
        assert_eq!(
            with_mut(p, |h| {
                h.calls += 1;
                Ok(())
            }),
            MCPW_OK
        );
        assert_eq!(
            with_mut(p, |_| -> Result<(), mcpw_result> {
                panic!("boom (expected by this test)")
            }),
            MCPW_ERR_PANIC
        );
        assert_eq!(
            with_mut(p, |h| {
                h.calls += 1;
                Ok(())
            }),
            MCPW_ERR_POISONED
        );
        assert_eq!(with_ref(p, |_| Ok(())), MCPW_ERR_POISONED);
        assert_eq!(
            with_ref(ptr::null::<Probe>(), |_| Ok(())),
            MCPW_ERR_NULL_ARGUMENT
        );
    }
    assert_eq!(probe.calls, 1);
    assert!(probe.poisoned.get());
}

#[test]
fn a_panic_in_a_const_call_poisons_too() {
    let probe = Probe {
        poisoned: Cell::new(false),
        calls: 0,
    };
    let p: *const Probe = &probe;
    // Safety: `p` points to a live `Probe`.
    unsafe {
        assert_eq!(
            with_ref(p, |_| -> Result<(), mcpw_result> {
                panic!("boom (expected by this test)")
            }),
            MCPW_ERR_PANIC
        );
        assert_eq!(with_ref(p, |_| Ok(())), MCPW_ERR_POISONED);
    }
}

#[test]
fn result_codes_are_distinct_grouped_and_described() {
    let mut seen = std::collections::HashSet::new();
    for code in mcpw_result::ALL {
        let n = code as i32;
        assert!(seen.insert(n), "{code:?} reuses {n}");
        let in_range = n == 0
            || (100..200).contains(&n)
            || (200..300).contains(&n)
            || (300..400).contains(&n)
            || (900..1000).contains(&n);
        assert!(in_range, "{code:?} = {n} is outside the ranges");
        // Safety: the message is a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr(mcpw_result_message(n)) };
        assert!(
            !text.is_empty() && text != c"unknown result code",
            "{code:?}"
        );
    }
    // Safety: as above.
    let unknown = unsafe { CStr::from_ptr(mcpw_result_message(12345)) };
    assert_eq!(unknown, c"unknown result code");
}

#[test]
fn every_engine_error_has_its_own_code() {
    use mcpwire::conn::Error;
    use mcpwire::mcp::Caps;
    let errors = [
        Error::Closed,
        Error::Closing,
        Error::NotInitialized,
        Error::EngineOwned,
        Error::NotInVersion,
        Error::WrongDirection,
        Error::NotNegotiated(Caps::TOOLS),
        Error::InvalidParams,
        Error::CodeNotInVersion,
        Error::TooManyInFlight,
        Error::OutputFull,
        Error::UnknownRequest,
        Error::CannotCancelInitialize,
        Error::NoProgressToken,
        Error::NonIncreasingProgress,
        Error::RequestScoped,
        Error::NotEligible,
    ];
    let codes: std::collections::HashSet<_> = errors
        .iter()
        .map(|e| mcpw_result::from(*e) as i32)
        .collect();
    assert_eq!(codes.len(), errors.len());
    assert!(codes.iter().all(|c| (300..399).contains(c)));
}

#[test]
fn every_task_error_has_its_own_code() {
    use mcpwire::tasks::TaskError;
    let errors = [
        TaskError::Full,
        TaskError::UnknownTask,
        TaskError::Terminal,
        TaskError::KeyReused,
        TaskError::TooManyInputRequests,
        TaskError::InvalidPayload,
        TaskError::RandomRepeats,
    ];
    let codes: std::collections::HashSet<_> = errors
        .iter()
        .map(|e| mcpw_result::from(*e) as i32)
        .collect();
    assert_eq!(codes.len(), errors.len());
    // Refusals that change nothing, like the engine's, and none shared with a connection's.
    assert!(codes.iter().all(|c| (317..399).contains(c)), "{codes:?}");
}

/// A panic inside a call on two handles poisons both: neither is trusted afterwards.
#[test]
fn a_panic_in_a_call_on_two_handles_poisons_both() {
    use super::boundary::{with_mut_and_ref, with_mut_pair};
    let new = || Probe {
        poisoned: Cell::new(false),
        calls: 0,
    };
    let (mut a, mut b, c) = (new(), new(), new());
    let (pa, pb): (*mut Probe, *mut Probe) = (&mut a, &mut b);
    // Safety: the pointers are live `Probe`s used by nothing else during these calls, or NULL.
    unsafe {
        assert_eq!(
            with_mut_pair(pa, pb, |x, y| {
                x.calls += 1;
                y.calls += 1;
                Ok(())
            }),
            MCPW_OK
        );
        assert_eq!(
            with_mut_pair(pa, ptr::null_mut::<Probe>(), |_, _| Ok(())),
            MCPW_ERR_NULL_ARGUMENT
        );
        // The same object twice is refused before the body runs.
        assert_eq!(
            with_mut_pair(pa, pa, |_, _| Ok(())),
            MCPW_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            with_mut_pair(pa, pb, |_, _| -> Result<(), mcpw_result> {
                panic!("boom (expected by this test)")
            }),
            MCPW_ERR_PANIC
        );
        assert_eq!(with_mut(pa, |_| Ok(())), MCPW_ERR_POISONED);
        assert_eq!(with_ref(pb, |_| Ok(())), MCPW_ERR_POISONED);
        let (mut d, pc): (Probe, *const Probe) = (new(), &c);
        let pd: *mut Probe = &mut d;
        assert_eq!(
            with_mut_and_ref(pd, pc, |_, _| -> Result<(), mcpw_result> {
                panic!("boom (expected by this test)")
            }),
            MCPW_ERR_PANIC
        );
        assert_eq!(with_mut(pd, |_| Ok(())), MCPW_ERR_POISONED);
        assert_eq!(with_ref(pc, |_| Ok(())), MCPW_ERR_POISONED);
        // A poisoned second handle refuses the call too.
        let mut e = new();
        let pe: *mut Probe = &mut e;
        assert_eq!(with_mut_and_ref(pe, pc, |_, _| Ok(())), MCPW_ERR_POISONED);
    }
    assert_eq!((a.calls, b.calls), (1, 1));
}

#[test]
fn the_version_matches_the_crate() {
    // Safety: a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(mcpw_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_error_code_constants_match_the_engine() {
    use mcpwire::{jsonrpc, mcp};
    assert_eq!(MCPW_JSONRPC_PARSE_ERROR, jsonrpc::PARSE_ERROR);
    assert_eq!(MCPW_JSONRPC_INVALID_REQUEST, jsonrpc::INVALID_REQUEST);
    assert_eq!(MCPW_JSONRPC_METHOD_NOT_FOUND, jsonrpc::METHOD_NOT_FOUND);
    assert_eq!(MCPW_JSONRPC_INVALID_PARAMS, jsonrpc::INVALID_PARAMS);
    assert_eq!(MCPW_JSONRPC_INTERNAL_ERROR, jsonrpc::INTERNAL_ERROR);
    assert_eq!(MCPW_MCP_RESOURCE_NOT_FOUND, mcp::RESOURCE_NOT_FOUND);
}

#[test]
fn capability_flags_match_the_engine() {
    let mut all = 0u32;
    for (flag, caps) in super::conn::CAPS {
        assert_eq!(flag, caps.bits(), "{caps:?}");
        assert_eq!(all & flag, 0);
        all |= flag;
    }
}

/// Found by the `c_abi` fuzz target: after `MCPW_EVENT_CLOSED` some commands failed with the
/// reason the engine checks first (an id no longer in flight, an engine-owned method) rather
/// than `MCPW_ERR_CLOSED`, which the header promises for every command.
#[test]
fn every_command_fails_with_closed_after_the_closed_event() {
    let text = |s: &str| (s.as_ptr().cast::<std::ffi::c_char>(), s.len());
    let (name, name_len) = text("t");
    let (method, method_len) = text("notifications/initialized");
    let (ping, ping_len) = text("ping");
    let (obj, obj_len) = text("{}");
    let id = mcpw_id {
        kind: mcpw_id_kind::MCPW_ID_INT as u32,
        integer: 1,
        string: mcpw_str {
            ptr: ptr::null(),
            len: 0,
        },
    };
    // Safety: every pointer is NULL where allowed or valid for its length; the handles are
    // used here only and freed once.
    unsafe {
        let mut config = ptr::null_mut();
        assert_eq!(
            mcpw_config_new(2, name, name_len, name, name_len, &mut config),
            MCPW_OK
        );
        let mut conn = ptr::null_mut();
        assert_eq!(mcpw_conn_new(config, 0, &mut conn), MCPW_OK);
        assert_eq!(mcpw_conn_handle_eof(conn, 1), MCPW_OK);
        let mut event = mcpw_event::default();
        assert_eq!(mcpw_conn_poll_event(conn, &mut event), MCPW_OK);
        assert_eq!(event.kind, mcpw_event_kind::MCPW_EVENT_CLOSED);
        let (mut out_id, mut sent) = (0i64, false);
        let results = [
            mcpw_conn_notify(conn, method, method_len, ptr::null(), 0),
            mcpw_conn_request(
                conn,
                2,
                ping,
                ping_len,
                ptr::null(),
                0,
                ptr::null(),
                &mut out_id,
            ),
            mcpw_conn_request_related(
                conn,
                2,
                &id,
                ping,
                ping_len,
                ptr::null(),
                0,
                ptr::null(),
                &mut out_id,
            ),
            mcpw_conn_respond(conn, &id, obj, obj_len),
            mcpw_conn_respond_error(conn, &id, -32603, name, name_len, ptr::null(), 0),
            mcpw_conn_progress(conn, &id, 1.0, 0.0, false, ptr::null(), 0),
            mcpw_conn_log(conn, &id, 6, ptr::null(), 0, obj, obj_len, &mut sent),
            mcpw_conn_respond_input_required(conn, &id, obj, obj_len, ptr::null(), 0),
            mcpw_conn_respond_url_elicitation_required(conn, &id, obj, obj_len),
            mcpw_conn_retry(conn, 2, 1, ptr::null(), 0, &mut out_id),
            mcpw_conn_cancel(conn, 2, 1, ptr::null(), 0),
        ];
        assert_eq!(results, [MCPW_ERR_CLOSED; 11]);
        // Arguments are still checked first; closing again does nothing.
        assert_eq!(mcpw_conn_respond(conn, &id, obj, 0), MCPW_ERR_INVALID_JSON);
        assert_eq!(mcpw_conn_close(conn, 3, 0), MCPW_OK);
        mcpw_conn_free(conn);
        mcpw_config_free(config);
    }
}

#[test]
fn transport_failures_reach_c_with_their_status_and_reason() {
    use mcpwire::conn::{CloseReason, Event, RequestId, TransportFailure};
    let mut texts = event::EventTexts::default();
    let text = |s: mcpw_str| {
        // Safety: the view points into `texts`, alive here.
        String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) })
            .into_owned()
    };
    let failed = event::to_c(
        Event::Failed {
            request: RequestId(3),
            reason: TransportFailure::Status(502),
        },
        &mut texts,
    );
    assert_eq!(failed.kind, mcpw_event_kind::MCPW_EVENT_FAILED);
    assert_eq!((failed.request, failed.code), (3, 502));
    assert!(
        text(failed.message).contains("502"),
        "{}",
        text(failed.message)
    );
    let closed = event::to_c(
        Event::Closed {
            reason: &CloseReason::TransportFailed(TransportFailure::Disconnected),
        },
        &mut texts,
    );
    assert_eq!(closed.kind, mcpw_event_kind::MCPW_EVENT_CLOSED);
    assert_eq!(
        closed.close_reason,
        mcpw_close_reason::MCPW_CLOSE_TRANSPORT_FAILED
    );
    assert_eq!(closed.code, 0);
    assert!(!text(closed.version).is_empty());
}

/// A panic in a call on a view poisons its lender too (the lender's connection may be half
/// changed; only the view was poisoned, and the next lending cleared even that). A panic in
/// a call on the lender ends the views it lent (that call may have freed their connections
/// and skipped the staling that follows every call).
#[test]
fn a_panic_passes_between_a_lender_and_its_views() {
    let name = c"t".as_ptr();
    // Safety: every pointer is valid for its length; the handles are used here only and
    // freed once; the views are used only while their lender lives.
    unsafe {
        let mut config = ptr::null_mut();
        assert_eq!(mcpw_config_new(1, name, 1, name, 1, &mut config), MCPW_OK);
        let new_client =
            |out: &mut *mut mcpw_http_client| mcpw_http_client_new(config, 0, ptr::null(), out);
        let (mut client, mut view) = (ptr::null_mut(), ptr::null_mut());
        assert_eq!(new_client(&mut client), MCPW_OK);
        assert_eq!(mcpw_http_client_conn(client, &mut view), MCPW_OK);
        assert_eq!(
            with_mut(view, |_| -> Result<(), mcpw_result> {
                panic!("boom (expected by this test)")
            }),
            MCPW_ERR_PANIC
        );
        assert_eq!(mcpw_http_client_conn(client, &mut view), MCPW_ERR_POISONED);
        mcpw_http_client_free(client);

        assert_eq!(new_client(&mut client), MCPW_OK);
        assert_eq!(mcpw_http_client_conn(client, &mut view), MCPW_OK);
        let mut state = mcpw_state::MCPW_STATE_INITIALIZING;
        assert_eq!(mcpw_conn_state(view, &mut state), MCPW_OK);
        assert_eq!(
            with_mut(client, |_| -> Result<(), mcpw_result> {
                panic!("boom (expected by this test)")
            }),
            MCPW_ERR_PANIC
        );
        assert_eq!(mcpw_conn_state(view, &mut state), MCPW_ERR_STALE_VIEW);
        mcpw_http_client_free(client);
        mcpw_config_free(config);
    }
}
