//! Fuzz target `http_client`: see `http_client` in tests/fuzz_logic/http_client.rs for the input
//! format and the invariants it checks. tests/fuzz_replay.rs replays this target's corpus on
//! stable Rust.
#![no_main]

#[path = "../../tests/fuzz_logic/mod.rs"]
mod logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| logic::http_client(data));
