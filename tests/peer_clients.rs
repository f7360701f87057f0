//! Real SDK clients complete sessions against our server engine (examples/stdio_server.rs).

mod common;

use std::time::Duration;

use common::stdio::{
    assert_python_session, assert_typescript_session, assert_unknown_cursors_are_invalid_params,
    assert_unknown_tools_and_prompts_are_invalid_params, example_binary,
};

fn server() -> String {
    example_binary("stdio_server").display().to_string()
}

#[test]
fn python_sdk_client_in_legacy_mode() {
    assert_python_session(&[&server()], "legacy", "2025-11-25");
}

#[test]
fn python_sdk_client_in_auto_mode_ends_up_stateless() {
    // The SDK's default: probe with server/discover; our dual-era server answers it.
    assert_python_session(&[&server()], "auto", "2026-07-28");
}

#[test]
fn python_sdk_client_in_auto_mode_falls_back_promptly_from_a_legacy_server() {
    // A legacy-only server must refuse server/discover at once, or the client waits 10 s
    // before falling back. Compared with the same session without the probe, so that the
    // interpreter's start (seconds on a loaded machine) is not counted.
    let without_probe = assert_python_session(&[&server(), "--legacy"], "legacy", "2025-11-25");
    let elapsed = assert_python_session(&[&server(), "--legacy"], "auto", "2025-11-25");
    assert!(
        elapsed < without_probe + Duration::from_secs(5),
        "took {elapsed:?}, {without_probe:?} without the probe: the probe was not refused promptly"
    );
}

#[test]
fn typescript_sdk_client() {
    assert_typescript_session(&[&server()]);
}

#[test]
fn unknown_tools_and_prompts_are_invalid_params() {
    assert_unknown_tools_and_prompts_are_invalid_params(&[&server()]);
    assert_unknown_cursors_are_invalid_params(&[&server()]);
}
