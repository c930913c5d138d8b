//! A device profile as `roce run --profile FILE` loads it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = roce::inputs::profile(std::path::Path::new("profiles/fuzzed.toml"), text);
    }
});
