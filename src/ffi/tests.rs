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
    use crate::conn::Error;
    use crate::mcp::Caps;
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
fn the_version_matches_the_crate() {
    // Safety: a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(mcpw_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_error_code_constants_match_the_engine() {
    use crate::{jsonrpc, mcp};
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
