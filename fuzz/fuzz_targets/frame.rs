//! One frame's bytes under every link type and transport hint, printed every way
//! and every field written; the flow analyzer's fast path must read what the
//! decoder reads wherever it answers.
#![no_main]

use dissector::flow::Facts;
use dissector::frame::{self, Options};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    roce::inputs::frame(data);
    let opts = Options::default();
    for link in roce::inputs::LINK_TYPES {
        if let Some(p) = Facts::parse(link, data, &opts) {
            let fr = frame::decode(link, data, &opts);
            assert_eq!(Some(p), Facts::of(&fr, data), "fast path and decoder disagree");
        }
    }
});
