//! One frame's bytes, its first byte choosing the link type and transport hint
//! (`roce::inputs::frame_choice`), printed every way and every field written;
//! the flow analyzer's fast path must read what the decoder reads wherever it
//! answers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    roce::inputs::frame(data);
});
