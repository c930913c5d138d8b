//! A capture file (pcap or pcapng, any byte order, truncated or hostile) read,
//! decoded and printed as `roce decode` does, and analysed as `roce flows` does.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = roce::inputs::capture(data);
});
