//! A display filter (`-Y`) compiled and, when it compiles, run over the frames of
//! `captures/malformed.pcap`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = roce::inputs::filter(text, roce_fuzz::FILTER_CAPTURE);
    }
});
