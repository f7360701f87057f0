//! Real SDK clients complete sessions against our server engine (examples/stdio_server.rs).

mod common;

use std::time::Duration;

use common::stdio::{example_binary, python_client, run_client, ts_client};

fn server() -> String {
    example_binary("stdio_server").display().to_string()
}

#[test]
fn python_sdk_client_in_legacy_mode() {
    let (ok, out, _) = run_client(
        python_client(&["--mode", "legacy", "--expect-version", "2025-11-25"]),
        &[&server()],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("echo(text='hello from python') -> 'hello from python'"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("PY_CLIENT_OK 2025-11-25"), "{out}");
}

#[test]
fn python_sdk_client_in_auto_mode_ends_up_stateless() {
    // The SDK's default: probe with server/discover; our dual-era server answers it.
    let (ok, out, _) = run_client(
        python_client(&["--mode", "auto", "--expect-version", "2026-07-28"]),
        &[&server()],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("echo(text='hello from python') -> 'hello from python'"),
        "{out}"
    );
    assert!(
        out.contains("read mem://greeting -> 1 content item(s)"),
        "{out}"
    );
    assert!(out.contains("get greet({}) -> 1 message(s)"), "{out}");
    assert!(out.trim_end().ends_with("PY_CLIENT_OK 2026-07-28"), "{out}");
}

#[test]
fn python_sdk_client_in_auto_mode_falls_back_promptly_from_a_legacy_server() {
    // A legacy-only server must refuse server/discover at once, or the client waits 10 s
    // before falling back.
    let (ok, out, elapsed) =
        run_client(python_client(&["--mode", "auto"]), &[&server(), "--legacy"]);
    assert!(ok, "{out}");
    assert!(out.trim_end().ends_with("PY_CLIENT_OK 2025-11-25"), "{out}");
    assert!(
        elapsed < Duration::from_secs(8),
        "took {elapsed:?}: the probe was not refused promptly"
    );
}

#[test]
fn typescript_sdk_client() {
    let (ok, out, _) = run_client(ts_client(&[]), &[&server()]);
    assert!(ok, "{out}");
    assert!(out.trim_end().ends_with("TS_CLIENT_OK 2025-11-25"), "{out}");
}
