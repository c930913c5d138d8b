//! The display filter's promise (`dissector::filter`): evaluating a compiled filter
//! allocates nothing per frame. A counting allocator watches filters of every kind —
//! protocols read as bytes, `matches` on bytes and MACs, masks, the new fields —
//! evaluated on frames of every kind, after one evaluation each (the regular
//! expressions' caches, the filter's text buffer) has warmed them up.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use dissector::craft::{Conversation, Dir};
use dissector::ctx::Ctx;
use dissector::filter::Filter;
use dissector::frame::{self, Options};
use dissector::wire::Syndrome;
use dissector::LinkType;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; only a count is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn evaluating_allocates_nothing_per_frame() {
    let mut c = Conversation::new();
    let p = c.write(Dir::AtoB, 0x1000, 0x42, 64, Some(0x1234));
    c.ack(Dir::BtoA, p, Syndrome(0x62), 0);
    let p = c.send(Dir::AtoB, 5, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let frames: Vec<Vec<u8>> = c.frames.into_iter().map(|t| t.data).collect();
    let decoded: Vec<_> =
        frames.iter().map(|d| frame::decode(LinkType::ETHERNET, d, &Options::default())).collect();
    let filters: Vec<Filter> = [
        r#"frame contains "rdma-ping" || eth contains 00:01 || ip contains 45:00"#,
        r#"udp contains "ABC" || infiniband contains ff:ff || data contains "ABC""#,
        "eth == 02:00:00:00:00:02:02:00:00:00:00:01:08:00 || ip < 46 || udp > 00",
        r#"frame matches "abc$" || ipv6 matches "x" || data matches "^\\x41""#,
        r#"eth.src matches "\\x01$" || eth.addr contains 00:02"#,
        r#"udp.payload contains 11:00 || data.data matches "abc" || data.len > 4"#,
        "infiniband.aeth.syndrome & 0x60 == 0x60 || infiniband.aeth.syndrome & 0x60",
        "udp.port & 0xff00 != 0x1200 || infiniband.aeth.syndrome & 0xff == infiniband.aeth.syndrome",
        "infiniband.aeth.syndrome.opcode == 3 || infiniband.aeth.syndrome.credit_count",
        r#"frame.protocols contains "data" && _ws.col.Info matches "ack""#,
        "frame[0:1,12-13] == 02:08:00 || eth.src[-3:] & 00:00:01 || ip.addr[3] == 2",
        r#"infiniband[0:4,8:] contains 11 || frame.protocols[0:3] == "eth" || data[0] & 1"#,
    ]
    .iter()
    .map(|t| Filter::compile(t).unwrap_or_else(|e| panic!("{e}")))
    .collect();
    let ctx = |i: usize| Ctx {
        number: i as u64 + 1,
        ts_ns: 1_000 * i as u64,
        first_ts_ns: 0,
        prev_ts_ns: 0,
        orig_len: frames[i].len() as u32,
        interface: 0,
        data: &frames[i],
        frame: &decoded[i],
        comment: None,
    };
    let mut kept = 0;
    for f in &filters {
        for i in 0..frames.len() {
            kept += usize::from(f.matches(&ctx(i)));
        }
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut again = 0;
    for _ in 0..10 {
        for f in &filters {
            for i in 0..frames.len() {
                again += usize::from(f.matches(&ctx(i)));
            }
        }
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(again, 10 * kept);
    assert!(kept > 10, "{kept}");
    assert_eq!(allocated, 0, "allocations while evaluating warmed-up filters");
}
