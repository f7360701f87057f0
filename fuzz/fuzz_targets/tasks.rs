//! Fuzz target `tasks`: see `tasks` in tests/fuzz_logic/tasks.rs for the input format and the
//! invariants it checks. tests/fuzz_replay.rs replays this target's corpus on stable Rust.
#![no_main]

#[path = "../../tests/fuzz_logic/mod.rs"]
mod logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| logic::tasks(data));
