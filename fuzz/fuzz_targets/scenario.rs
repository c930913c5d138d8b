//! A scenario file as `roce check` (and `--fix`) reads it, its fixtures read from
//! a copy of `scenarios/fixtures/`; and the same text as a fixture that a
//! scenario uses.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let tree = roce_fuzz::tree();
    // The fixture first: a scenario that uses `fuzzed.toml` reads this input,
    // never the one before it.
    let fixture = std::fs::write(&tree.fixture, text).is_ok();
    let _ = roce::inputs::scenario(&tree.scenario, text);
    if fixture {
        let _ = roce::inputs::scenario(&tree.user, roce_fuzz::FIXTURE_USER);
    }
});
