//! What a stranger sends a listening agent before the key is proved, taken as
//! its poll loop takes it; no input may end in a session.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    assert!(
        roce::inputs::handshake(data).is_err(),
        "a handshake without the agent's nonce succeeded"
    );
});
