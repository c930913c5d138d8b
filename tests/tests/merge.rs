//! `roce merge` as a user meets it, on what two hosts would have captured of a
//! real lab exchange: each lab capture recorded at the switch is split into the
//! capture host a would have taken (all it sent, what reached it) and host b's
//! (its clock 2.5 s ahead, each frame arriving 30 µs after it was sent). Merged
//! back, the two give the switch's recording: every frame once, each direction
//! in its sender's order, a frame the switch dropped seen at its sender only,
//! the times on a's clock, and the same flow analysis.

use std::net::Ipv4Addr;
use std::path::Path;

use dissector::capture::{self, OutPacket, PcapngWriter};
use dissector::frame::{self, Net};
use dissector::LinkType;
use lab::mark::Marks;
use roce_tests::{roce, root, scratch};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const AHEAD_NS: u64 = 2_500_000_000;
const DELAY_NS: u64 = 30_000;

/// One frame of the switch's recording.
struct Recorded {
    ts_ns: u64,
    link: LinkType,
    data: Vec<u8>,
    /// Its IPv4 source and destination (none: not IPv4).
    ip: Option<(Ipv4Addr, Ipv4Addr)>,
    dropped: bool,
}

fn recording(path: &Path) -> Vec<Recorded> {
    let mut r = capture::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        let f = frame::decode(p.link, p.data, &frame::Options::default());
        let ip = match f.net {
            Net::Ipv4(h) => Some((h.src, h.dst)),
            _ => None,
        };
        let dropped = p.comment.is_some_and(|c| Marks::parse(c).dropped());
        out.push(Recorded { ts_ns: p.ts_ns, link: p.link, data: p.data.to_vec(), ip, dropped });
    }
    out
}

/// What the host at `me` would have captured: what it sent (all of it), what
/// reached it, and (host a only) the frames that are not IPv4; its clock
/// `ahead` ns ahead.
fn taken_at(rec: &[Recorded], me: Ipv4Addr, ahead: u64, path: &Path) {
    let mut pc = PcapngWriter::new(std::fs::File::create(path).unwrap(), "test").unwrap();
    let id = pc.add_interface(LinkType::ETHERNET, 0, Some("eth0")).unwrap();
    for f in rec {
        let ts = match f.ip {
            Some((src, _)) if src == me => f.ts_ns,
            Some((_, dst)) if dst == me && !f.dropped => f.ts_ns + DELAY_NS,
            None if me == A => f.ts_ns,
            _ => continue,
        };
        assert_eq!(f.link, LinkType::ETHERNET);
        pc.write_packet(&OutPacket::new(id, ts + ahead, &f.data)).unwrap();
    }
    pc.flush().unwrap();
}

/// Each direction's frames (their bytes), in order.
fn directions(frames: &[Recorded]) -> [Vec<&[u8]>; 2] {
    let from = |h: Ipv4Addr| {
        frames
            .iter()
            .filter(|f| f.ip.is_some_and(|(s, _)| s == h))
            .map(|f| f.data.as_slice())
            .collect()
    };
    [from(A), from(B)]
}

#[test]
fn two_hosts_captures_merge_back_into_the_switchs_recording() {
    let tmp = scratch();
    for name in ["rc_drop_retransmit.pcapng", "requester_nak_psn_seq.pcapng", "rc_pingpong.pcapng"]
    {
        let switch = root().join("captures/lab").join(name);
        let rec = recording(&switch);
        let (at_a, at_b, merged) =
            (tmp.join("a.pcapng"), tmp.join("b.pcapng"), tmp.join("m.pcapng"));
        taken_at(&rec, A, 0, &at_a);
        taken_at(&rec, B, AHEAD_NS, &at_b);
        let p = |x: &Path| x.to_str().unwrap().to_string();
        let r = roce(&["merge", &p(&at_a), &p(&at_b), "-w", &p(&merged)]);
        assert_eq!(r.code, 0, "{name}: {}{}", r.out, r.err);
        assert!(r.out.contains("hosts (found from the frames): a 10.0.0.1"), "{name}: {}", r.out);
        assert!(r.out.contains("b's clock against a's: +2500.000 ms"), "{name}: {}", r.out);
        assert!(r.out.contains("least one-way delay 0.030 ms"), "{name}: {}", r.out);

        // Every frame once; each direction in its order; the times the switch's.
        let back = recording(&merged);
        assert_eq!(back.len(), rec.len(), "{name}");
        assert_eq!(directions(&back), directions(&rec), "{name}");
        let sent = |v: &[Recorded]| -> Vec<u64> {
            v.iter().filter(|f| f.ip.is_some()).map(|f| f.ts_ns).collect::<Vec<_>>()
        };
        let (mut t0, mut t1) = (sent(&rec), sent(&back));
        t0.sort_unstable();
        t1.sort_unstable();
        assert_eq!(t0, t1, "{name}: each frame at its sending time, on a's clock");

        // What the switch dropped is seen at its sender only, and only that.
        let mut r = capture::open(&merged).unwrap();
        let mut lost = 0;
        while let Some(p) = r.next_packet().unwrap() {
            if let Some(c) = p.comment {
                assert!(c.contains("only: never reached"), "{name}: {c}");
                lost += 1;
            }
        }
        assert_eq!(lost, rec.iter().filter(|f| f.dropped).count(), "{name}");

        // The flow analysis reads the merge as it reads the switch's recording.
        let flows = |x: &Path| {
            let r = roce(&["flows", "--json", &p(x)]);
            assert_eq!(r.code, 0, "{}", r.err);
            let mut v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
            v.as_object_mut().map(|o| o.remove("capture"));
            v
        };
        assert_eq!(flows(&merged), flows(&switch), "{name}");
    }
}

/// Bad input says what and what to do: a capture that is not there, two
/// captures with nothing seen at both ends (the hosts cannot be found), a host
/// named twice.
#[test]
fn merge_refuses_what_it_cannot_merge() {
    let tmp = scratch();
    let cap = |n: &str| root().join("captures").join(n).to_str().unwrap().to_string();
    let out = tmp.join("m.pcapng");
    let o = out.to_str().unwrap();
    let r = roce(&["merge", "/nonexistent/a.pcapng", &cap("rc_rdma.pcap"), "-w", o]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("/nonexistent/a.pcapng"), "{}", r.err);
    let r = roce(&["merge", &cap("rc_rdma.pcap"), &cap("uc_ud.pcap"), "-w", o]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("hint: say them: --hosts"), "{}", r.err);
    let r = roce(&[
        "merge",
        &cap("rc_rdma.pcap"),
        &cap("uc_ud.pcap"),
        "-w",
        o,
        "--hosts",
        "10.0.0.1,10.0.0.1",
    ]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("both captures are said to be taken at 10.0.0.1"), "{}", r.err);
    assert!(!out.exists(), "nothing written");
}
