//! Fuzzing in the test suite: mutated real frames and arbitrary bytes through every
//! printer, the display filters (over every field and relation) and the flow
//! analyzer, each frame read as RD, as DC and as guessed; a bounded number of cases.
//! Nothing may panic, and
//! the flow fast path (`Facts::parse`) must agree with the decoder wherever it answers.

use dissector::capture;
use dissector::ctx::Ctx;
use dissector::fields::{self, Field};
use dissector::filter::Filter;
use dissector::flow::{Analyzer, Facts};
use dissector::frame::{self, Options, TransportHint};
use dissector::print;
use dissector::LinkType;
use proptest::prelude::*;

fn corpus() -> Vec<(LinkType, Vec<u8>)> {
    let mut v = Vec::new();
    for p in roce_tests::captures() {
        let Ok(mut r) = capture::open(&p) else { continue };
        while let Ok(Some(rec)) = r.next_packet() {
            v.push((rec.link, rec.data.to_vec()));
        }
    }
    assert!(v.len() > 100, "corpus from captures/ is too small: {}", v.len());
    v
}

/// Filters that between them read every kind of field and relation.
const FILTERS: &[&str] = &[
    "infiniband && infiniband.aeth.syndrome != 0",
    "ip.addr == 10.0.0.0/24 || ipv6.addr == fd00::/64 || eth.addr == 02:00:00:00:00:01",
    "infiniband.bth.opcode in {4 10 0x11..0x13 0x40..0x5f} and not roce.dc",
    "frame.protocols contains \"data\" or _ws.col.Info matches \"NAK|DC\"",
    "infiniband.immdt contains 12 or roce.dcceth or roce.dceth > 0 or frame.time_delta_displayed > 0.5",
    "frame.cap_len < frame.len or ip.src == ip.dst or udp.srcport >= udp.dstport",
    "ip.addr === 10.0.0.1 or ip.addr ~= 10.0.0.2 or tcp.port != 18515",
];

fn exercise(link: LinkType, data: &[u8], an: &mut Analyzer) {
    thread_local!(static COMPILED: Vec<Filter> = FILTERS.iter().map(|f| Filter::compile(f).unwrap_or_else(|e| panic!("{e}"))).collect());
    // Every way to read RD-range opcodes; the default last, for the analyzer below.
    for hint in [TransportHint::Rd, TransportHint::Dc, TransportHint::Auto] {
        let fr = frame::decode(link, data, &Options { transport_hint: hint, ..Options::default() });
        let ctx = Ctx {
            number: 1,
            ts_ns: 5,
            first_ts_ns: 1,
            prev_ts_ns: 2,
            orig_len: data.len() as u32,
            interface: 0,
            data,
            frame: &fr,
            comment: None,
        };
        let mut s = String::new();
        print::line(&ctx, &mut s);
        print::verbose(&ctx, &mut s);
        let _ = print::json(&ctx).to_string();
        let mut out = Vec::new();
        for (f, _, _) in Field::ALL {
            fields::write(*f, &ctx, &mut out);
        }
        COMPILED.with(|fs| {
            fs.iter().for_each(|f| {
                let _ = f.matches(&ctx);
            })
        });
    }
    let fr = frame::decode(link, data, &Options::default());
    an.add(1, 5, data.len() as u32, &fr, data);
    // The flow fast path reads what the decoder reads, or leaves the frame to it.
    if let Some(p) = Facts::parse(link, data, &Options::default()) {
        assert_eq!(Some(p), Facts::of(&fr, data), "fast path and decoder disagree on {data:02x?}");
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, xor: u8 },
    Truncate { at: usize },
    Insert { at: usize, byte: u8 },
    Delete { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Delete { at }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_frames_never_panic(pick in any::<prop::sample::Index>(), muts in prop::collection::vec(mutation(), 1..6)) {
        thread_local!(static CORPUS: Vec<(LinkType, Vec<u8>)> = corpus());
        let (link, mut data) = CORPUS.with(|c| c[pick.index(c.len())].clone());
        for m in muts {
            let n = data.len().max(1);
            match m {
                Mutation::Flip { at, xor } => if !data.is_empty() { data[at % n] ^= xor },
                Mutation::Truncate { at } => data.truncate(at % n),
                Mutation::Insert { at, byte } => data.insert(at % (data.len() + 1), byte),
                Mutation::Delete { at } => if !data.is_empty() { data.remove(at % n); },
            }
        }
        let mut an = Analyzer::new();
        exercise(link, &data, &mut an);
        let _ = an.report().to_string();
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300), l in 0usize..5) {
        let link = [LinkType::ETHERNET, LinkType::RAW, LinkType::LINUX_SLL, LinkType::LINUX_SLL2, LinkType::NULL][l];
        let mut an = Analyzer::new();
        exercise(link, &data, &mut an);
        let _ = an.report().to_string();
    }

    #[test]
    fn arbitrary_capture_files_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(mut r) = capture::Reader::new(&data[..]) {
            for _ in 0..64 {
                match r.next_packet() { Ok(Some(_)) => {}, _ => break }
            }
        }
    }
}
