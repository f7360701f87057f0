//! Fuzz target `sse_framer`: see `sse_framer` in tests/fuzz_logic/sse_framer.rs for the input format
//! and the invariants it checks. tests/fuzz_replay.rs replays this target's corpus on stable Rust.
#![no_main]

#[path = "../../tests/fuzz_logic/mod.rs"]
mod logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| logic::sse_framer(data));
