//! `roce flows` reads most packets through `Facts::parse`, a fast path straight from
//! the bytes, and decodes the rest in full (`Facts::of` a decoded frame). On every
//! capture in `captures/` — crafted and from the lab — the two must agree wherever the
//! fast path answers, the flow report must not depend on which path a frame took, and
//! the fast path may decline a RoCE frame only for one of the reasons it documents.
//! (Mutated frames go through the same comparison in `fuzz.rs`.)

use std::path::Path;

use dissector::capture;
use dissector::flow::{Analyzer, Facts};
use dissector::frame::{self, Frame, Net, Options};
use dissector::LinkType;

/// Why the fast path may leave a RoCE frame to the decoder, or `None`.
fn documented_reason(link: LinkType, f: &Frame) -> Option<&'static str> {
    if link != LinkType::ETHERNET {
        return Some("link type other than Ethernet");
    }
    if f.stop.is_some() {
        return Some("decoding stopped early");
    }
    if f.mad.is_some() {
        return Some("MAD");
    }
    if f.ib.as_ref().is_some_and(|i| i.bth.opcode.transport() == dissector::wire::Transport::Rd) {
        return Some("RD-range opcode: RD or DC, as the decoder's transport hint decides");
    }
    match f.net {
        Net::Grh(_) => Some("RoCEv1"),
        Net::Ipv4(r) if r.header_len != 20 => Some("IPv4 options"),
        Net::Ipv6(_) if f.offsets.bth - f.offsets.l4 != 8 => Some("IPv6 extension headers"),
        _ => None,
    }
}

struct Tally {
    roce: usize,
    fast: usize,
}

fn check(path: &Path) -> Tally {
    let name = path.strip_prefix(roce_tests::root()).unwrap_or(path).display().to_string();
    let mut src = capture::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let opts = Options::default();
    let (mut mixed, mut decoded) = (Analyzer::new(), Analyzer::new());
    let mut t = Tally { roce: 0, fast: 0 };
    while let Some(r) = src.next_packet().unwrap_or_else(|e| panic!("{name}: {e}")) {
        let f = frame::decode(r.link, r.data, &opts);
        let of = Facts::of(&f, r.data);
        t.roce += of.is_some() as usize;
        match Facts::parse(r.link, r.data, &opts) {
            Some(p) => {
                assert_eq!(
                    Some(p),
                    of,
                    "{name} frame {}: the fast path disagrees with the decoder",
                    r.number
                );
                mixed.add_facts(r.number, r.ts_ns, r.orig_len, &p);
                t.fast += 1;
            }
            None => {
                if of.is_some() {
                    assert!(
                        documented_reason(r.link, &f).is_some(),
                        "{name} frame {}: the fast path declined a RoCE frame it should read: {f:?}",
                        r.number
                    );
                }
                mixed.add(r.number, r.ts_ns, r.orig_len, &f, r.data);
            }
        }
        decoded.add(r.number, r.ts_ns, r.orig_len, &f, r.data);
    }
    let json = |a: &Analyzer| serde_json::to_string_pretty(&a.report()).expect("report serializes");
    assert_eq!(
        json(&mixed),
        json(&decoded),
        "{name}: the flow report depends on the path frames took"
    );
    t
}

#[test]
fn fast_path_agrees_with_the_decoder_on_every_capture() {
    for p in roce_tests::captures() {
        let t = check(&p);
        // rxe's traffic is the fast path's layout: lab captures made without CM
        // (so without MADs) must take it for every frame.
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if matches!(
            name,
            "rc_pingpong.pcapng" | "uc_pingpong.pcapng" | "write_bw.pcapng" | "read_bw.pcapng"
        ) {
            assert!(t.roce > 0, "{}: no RoCE frames", p.display());
            assert_eq!(
                t.fast,
                t.roce,
                "{}: every RoCE frame should take the fast path",
                p.display()
            );
        }
    }
}
