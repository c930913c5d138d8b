//! A controller's framed messages as the agent reads them: plain, injected into
//! an authenticated stream (nothing may pass), and sealed with the session key
//! (the same messages as plain).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let m = roce::inputs::messages(data);
    assert!(!matches!(m.injected, Ok(1..)), "an unsealed message passed authentication: {m:?}");
    if let Ok(n) = m.plain {
        assert_eq!(m.sealed, Ok(n), "sealing changed what was read");
    }
});
