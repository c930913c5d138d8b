//! Each relation and value kind on frames built by `craft`, the error messages, and
//! a property: no text makes the compiler panic.
//!
//! Owns: tests only. Imports: its parent; [`crate::craft`] and [`crate::frame`] to build
//! and decode frames; proptest.

use proptest::prelude::*;

use super::*;
use crate::craft::{self, Conversation, Dir, Encap, Host, Transport};
use crate::frame::{self, Frame, Options};
use crate::wire::ethernet::Mac;
use crate::wire::{BthRepr, Opcode, Psn, Syndrome};
use crate::LinkType;

/// A few frames of one RC conversation 10.0.0.1 (QP 0x11) ↔ 10.0.0.2 (QP 0x12):
/// 1 WRITE Only (A→B, AckReq), 2 ACK, 3 SEND with immediate 0x1234 (A→B),
/// 4 NAK Remote Access Error (0x62), 5 an ECN-CE WRITE.
fn frames() -> Vec<(u64, Vec<u8>)> {
    let mut c = Conversation::new();
    let p = c.write(Dir::AtoB, 0x7f00_0000_1000, 0x1234, 64, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.send(Dir::AtoB, 8, Some(0x1234));
    c.ack(Dir::BtoA, p, Syndrome(0x62), 0);
    c.encap.ecn = 3;
    c.write(Dir::AtoB, 0x7f00_0000_2000, 0x1234, 16, None);
    c.frames.into_iter().map(|t| (t.ts_ns, t.data)).collect()
}

const NONE: [u64; 0] = [];

/// The numbers (from 1) of the frames `filter` keeps.
fn kept(filter: &str, frames: &[(u64, Vec<u8>)]) -> Vec<u64> {
    let f = Filter::compile(filter).unwrap_or_else(|e| panic!("{e}"));
    let first = frames[0].0;
    let mut prev = first;
    let mut out = Vec::new();
    for (i, (ts, data)) in frames.iter().enumerate() {
        let fr = frame::decode(LinkType::ETHERNET, data, &Options::default());
        let c = ctx(i as u64 + 1, *ts, first, prev, data, &fr);
        if f.matches(&c) {
            out.push(i as u64 + 1);
        }
        prev = *ts;
    }
    out
}

fn ctx<'a>(number: u64, ts: u64, first: u64, prev: u64, data: &'a [u8], fr: &'a Frame) -> Ctx<'a> {
    Ctx {
        number,
        ts_ns: ts,
        first_ts_ns: first,
        prev_ts_ns: prev,
        orig_len: data.len() as u32,
        interface: 0,
        data,
        frame: fr,
        comment: None,
    }
}

fn err(filter: &str) -> FilterError {
    match Filter::compile(filter) {
        Ok(_) => panic!("`{filter}` compiled"),
        Err(e) => e,
    }
}

#[test]
fn comparisons_of_numbers() {
    let f = frames();
    assert_eq!(kept("infiniband.bth.opcode == 0x11", &f), [2, 4]);
    assert_eq!(kept("infiniband.bth.opcode eq 17", &f), [2, 4]);
    assert_eq!(kept("infiniband.bth.opcode != 0x11", &f), [1, 3, 5]);
    assert_eq!(kept("infiniband.bth.opcode ne 0x11", &f), [1, 3, 5]);
    // The ACK's syndrome is 0x1F (no credit count), the NAK's 0x62.
    assert_eq!(kept("infiniband.aeth.syndrome > 0x1f", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome gt 0x61", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome < 0x62", &f), [2]);
    assert_eq!(kept("infiniband.aeth.syndrome lt 0x62", &f), [2]);
    assert_eq!(kept("infiniband.aeth.syndrome >= 0x62", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome ge 98", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome <= 0x1f", &f), [2]);
    assert_eq!(kept("infiniband.aeth.syndrome le 31", &f), [2]);
    assert_eq!(kept("infiniband.bth.opcode == 0x11 && infiniband.aeth.syndrome >= 0x60", &f), [4]);
    assert_eq!(kept("frame.number == 010", &f), NONE, "octal 8: there are 5 frames");
    assert_eq!(kept("frame.number == 04", &f), [4]);
    assert_eq!(kept("ip.dsfield.ecn == 3", &f), [5]);
}

#[test]
fn absent_fields_satisfy_nothing() {
    let f = frames();
    // The WRITEs and the SEND have no AETH: neither `==` nor `!=` holds for them.
    assert_eq!(kept("infiniband.aeth.syndrome != 0x1f", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome == 0x1f", &f), [2]);
    assert_eq!(kept("!(infiniband.aeth.syndrome == 0x1f)", &f), [1, 3, 4, 5]);
    assert!(
        matches!(err("infiniband.aeth.credits").kind, ErrorKind::UnknownField { .. }),
        "not a field of ours (roce.aeth.credits is)"
    );
}

#[test]
fn multi_occurrence_fields_follow_tshark_4_0() {
    let f = frames();
    // Every frame is between 10.0.0.1 and 10.0.0.2.
    assert_eq!(kept("ip.addr == 10.0.0.1", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("ip.addr != 10.0.0.1", &f), NONE, "!= is all-not-equal in 4.0");
    assert_eq!(kept("ip.addr ~= 10.0.0.1", &f), [1, 2, 3, 4, 5], "~= is any-not-equal");
    assert_eq!(kept("ip.addr !== 10.0.0.1", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("ip.addr any_ne 10.0.0.1", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("ip.addr === 10.0.0.1", &f), NONE);
    assert_eq!(kept("ip.addr all_eq 10.0.0.1", &f), NONE);
    assert_eq!(kept("ip.addr != 10.0.0.9", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("ip.src != 10.0.0.1", &f), [2, 4]);
    assert_eq!(kept("udp.port == 4791", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("udp.port != 4791", &f), NONE);
    assert_eq!(kept("udp.port > 49154", &f), [1, 2, 3, 4, 5], "the source port 0xC003");
    assert_eq!(kept("udp.srcport > 49155", &f), NONE);
    assert_eq!(kept("ip.addr == 10.0.0.1 && ip.addr == 10.0.0.2", &f), [1, 2, 3, 4, 5]);
}

#[test]
fn subnets_macs_flags_bytes_times() {
    let f = frames();
    assert_eq!(kept("ip.addr == 10.0.0.0/24", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("ip.dst == 10.0.0.0/31", &f), [2, 4], "10.0.0.0 and .1");
    assert_eq!(kept("ip.dst == 10.0.0.2/32", &f), [1, 3, 5]);
    assert_eq!(kept("ip.addr == 11.0.0.0/8", &f), NONE);
    assert_eq!(kept("ip.addr == 0.0.0.0/0", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("eth.src == 02:00:00:00:00:01", &f), [1, 3, 5]);
    assert_eq!(kept("eth.dst == 02-00-00-00-00-01", &f), [2, 4]);
    assert_eq!(kept("eth.addr == 0200.0000.0002", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("eth.src != 020000000002", &f), [1, 3, 5]);
    assert_eq!(kept("infiniband.bth.a == 1", &f), [1, 3, 5]);
    assert_eq!(kept("infiniband.bth.a == True", &f), [1, 3, 5]);
    assert_eq!(kept("infiniband.bth.a == false", &f), [2, 4]);
    assert_eq!(kept("infiniband.bth.a", &f), [1, 2, 3, 4, 5], "present, whatever its value");
    assert_eq!(kept("infiniband.immdt == 00:00:12:34", &f), [3]);
    assert_eq!(kept("infiniband.immdt == 00001234", &f), [3]);
    assert_eq!(kept("infiniband.immdt contains 12:34", &f), [3]);
    assert_eq!(kept("infiniband.immdt contains 34:12", &f), NONE);
    // Frames 2 µs apart; the first has delta 0.
    assert_eq!(kept("frame.time_delta > 0.000001", &f), [2, 3, 4, 5]);
    assert_eq!(kept("frame.time_delta == 0.000002", &f), [2, 3, 4, 5]);
    assert_eq!(kept("frame.time_relative >= 0.000006", &f), [4, 5]);
    assert_eq!(kept("frame.time_epoch > 1700000000.000004", &f), [3, 4, 5]);
}

#[test]
fn sets_and_ranges() {
    let f = frames();
    assert_eq!(kept("infiniband.bth.opcode in {4 10 0x11..0x13}", &f), [1, 2, 4, 5]);
    assert_eq!(kept("infiniband.bth.opcode in {5, 0x11}", &f), [2, 3, 4]);
    assert_eq!(kept("infiniband.bth.opcode in {0 .. 9}", &f), [3]);
    assert_eq!(kept("not infiniband.bth.opcode in {0x11}", &f), [1, 3, 5]);
    assert_eq!(kept("ip.dst in {10.0.0.1 10.0.0.9}", &f), [2, 4]);
    assert_eq!(kept("ip.dst in {10.0.0.0/31}", &f), [2, 4]);
    assert_eq!(kept("frame.number in {2..3, 5}", &f), [2, 3, 5]);
}

#[test]
fn logic_parentheses_and_protocols() {
    let f = frames();
    assert_eq!(kept("frame.number == 1 or frame.number == 2 and frame.number == 3", &f), [1]);
    assert_eq!(kept("(frame.number == 1 or frame.number == 2) and frame.number == 2", &f), [2]);
    assert_eq!(kept("!(frame.number == 1 || frame.number == 2)", &f), [3, 4, 5]);
    assert_eq!(kept("not not frame.number == 1", &f), [1]);
    assert_eq!(
        kept("infiniband && udp && ip && eth && !tcp && !ipv6 && !vlan", &f),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(kept("data", &f), [1, 3, 5], "a payload");
    assert_eq!(kept("roce && roce.icrc && !roce.dc && frame", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("", &f), [1, 2, 3, 4, 5], "an empty filter keeps everything");
}

#[test]
fn text_fields_contains_and_matches() {
    let f = frames();
    assert_eq!(kept(r#"frame.protocols contains "data""#, &f), [1, 3, 5]);
    assert_eq!(kept(r#"frame.protocols == "eth:ethertype:ip:udp:infiniband""#, &f), [2, 4]);
    assert_eq!(
        kept(r#"frame.protocols matches "UDP:INFINIBAND$""#, &f),
        [2, 4],
        "matches ignores case"
    );
    assert_eq!(kept(r#"frame.protocols contains "UDP""#, &f), NONE, "contains does not");
    assert_eq!(kept(r#"roce.opcode.name contains "WRITE""#, &f), [1, 5]);
    assert_eq!(kept(r#"roce.aeth.nak == "Remote Access Error""#, &f), [4]);
    assert_eq!(kept(r#"_ws.col.Protocol == "RRoCE""#, &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept(r#"_ws.col.Info matches "NAK.*remote access""#, &f), [4]);
    assert_eq!(kept("roce.transport == RC", &f), [1, 2, 3, 4, 5], "an unquoted word is text too");
}

#[test]
fn field_against_field() {
    let f = frames();
    assert_eq!(kept("frame.cap_len == frame.len", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("frame.cap_len < frame.len", &f), NONE);
    assert_eq!(kept("ip.src == ip.dst", &f), NONE);
    assert_eq!(kept("ip.src < ip.dst", &f), [1, 3, 5]);
    assert_eq!(kept("udp.srcport > udp.dstport", &f), [1, 2, 3, 4, 5]);
    assert!(matches!(err("ip.src == eth.src").kind, ErrorKind::FieldTypesDiffer { .. }));
    assert!(matches!(
        err("frame.protocols == _ws.col.Info").kind,
        ErrorKind::FieldPairNotSupported { .. }
    ));
}

#[test]
fn dc_frames_filter_on_what_tshark_shows() {
    let mut c = Conversation::new();
    c.transport = crate::wire::Transport::Dc;
    let p = c.write(Dir::AtoB, 0x1000, 0x55, 32, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let f: Vec<_> = c.frames.into_iter().map(|t| (t.ts_ns, t.data)).collect();
    assert_eq!(kept("roce.dc", &f), [1, 2]);
    assert_eq!(kept("infiniband.bth.opcode == 0x51 && infiniband.aeth.syndrome == 0x1f", &f), [2]);
    assert_eq!(kept(r#"roce.transport == "DC" && infiniband.reth.r_key == 0x55"#, &f), [1]);
    assert_eq!(kept("roce.dceth == 0xdc000001", &f), [1, 2]);
}

#[test]
fn time_delta_displayed_needs_the_callers_view() {
    let f = frames();
    let filter = Filter::compile("frame.time_delta_displayed >= 0.000004").unwrap();
    let fr = frame::decode(LinkType::ETHERNET, &f[3].1, &Options::default());
    let (first, ts) = (f[0].0, f[3].0);
    let c = ctx(4, ts, first, f[2].0, &f[3].1, &fr);
    assert!(!filter.matches(&c), "every frame shown: 2 µs since frame 3");
    assert!(filter.matches_shown(&c, Shown { prev_ts_ns: Some(f[1].0) }), "4 µs since frame 2");
    assert!(
        !filter.matches_shown(&c, Shown { prev_ts_ns: None }),
        "the first displayed frame has delta 0"
    );
}

/// tshark's header names alone test presence; the decoded headers, not a list per
/// opcode, say which a frame has.
#[test]
fn header_names_test_presence() {
    let f = frames();
    assert_eq!(kept("infiniband.bth", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("infiniband.reth", &f), [1, 5], "the WRITE Only frames");
    assert_eq!(kept("!infiniband.reth", &f), [2, 3, 4]);
    assert_eq!(kept("infiniband.aeth", &f), [2, 4]);
    assert_eq!(kept("infiniband.aeth && infiniband.aeth.syndrome == 0", &f), NONE);
    assert_eq!(kept("infiniband.aeth && infiniband.aeth.syndrome >= 0x60", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome", &f), [2, 4], "a field alone is present");
    assert_eq!(kept("infiniband.immdt", &f), [3]);
    assert_eq!(
        kept("infiniband.grh or infiniband.deth or infiniband.rdeth or infiniband.mad", &f),
        NONE
    );
    assert_eq!(kept("infiniband.atomiceth or infiniband.atomicacketh", &f), NONE);
    for (name, h, _) in Header::ALL {
        assert_eq!(Header::lookup(name), Some(*h));
        assert!(Field::lookup(name).is_err(), "{name} is a field too");
        assert!(Filter::compile(&format!("!{name} || {name}")).is_ok(), "{name}");
    }
    // A typo still gets the closest name, headers included.
    let e = err("infiniband.rethh");
    assert!(
        matches!(&e.kind, ErrorKind::UnknownField { suggestion: Some("infiniband.reth"), .. }),
        "{e}"
    );
    let e = err("infiniband.reth == 00:01");
    assert!(matches!(e.kind, ErrorKind::ProtocolCompared { .. }), "{e}");
    assert!(e.to_string().contains("is a header"), "{e}");
}

/// tshark's CM names for what the CM decoder reads, each alone a presence test: the
/// DREP has its own (`infiniband.cm.drsp.*`), a REQ's private data is `ip_cm` under an
/// IP CM service ID and `private` under any other, its GIDs are `…_ipv4` over IPv4;
/// and a UD SEND to QP1 shorter than a MAD holds no MAD.
#[test]
fn cm_names_follow_tshark() {
    use crate::wire::mad::{CmMessage, CmReq, RdmaCmHeader};
    let mut c = Conversation::new();
    let req = |service_id| {
        CmMessage::Req(CmReq {
            local_comm_id: 0x1a2b_3c4d,
            service_id,
            local_qkey: 0,
            local_qpn: 0x11,
            responder_resources: 16,
            initiator_depth: 16,
            transport_type: 0,
            starting_psn: Psn::new(100),
            retry_count: 7,
            p_key: 0xffff,
            path_mtu: 3,
            rnr_retry_count: 7,
            srq: false,
            primary_local_gid: "::ffff:10.0.0.1".parse().unwrap(),
            primary_remote_gid: "::ffff:10.0.0.2".parse().unwrap(),
        })
    };
    let (l, r) = (0x1a2b_3c4d, 0x5e6f_7081);
    c.cm(Dir::AtoB, req(RdmaCmHeader::service_id(0x06, 7174)), 1);
    c.cm(Dir::AtoB, req(0x0000_0106_0000_4e20), 2);
    c.cm(
        Dir::BtoA,
        CmMessage::Rej { local_comm_id: r, remote_comm_id: l, msg_rejected: 1, reason: 28 },
        2,
    );
    c.cm(Dir::AtoB, CmMessage::Dreq { local_comm_id: l, remote_comm_id: r, remote_qpn: 0x12 }, 3);
    c.cm(Dir::BtoA, CmMessage::Drep { local_comm_id: r, remote_comm_id: l }, 3);
    // A UD SEND to QP1 of 100 bytes: no MAD.
    c.push(
        Dir::AtoB,
        Transport {
            bth: BthRepr { opcode: Opcode::UD_SEND_ONLY, dest_qp: 1, ..Default::default() },
            deth: crate::wire::ext::DethRepr { q_key: 0x8001_0000, src_qp: 1 },
            payload: vec![1, 7, 2, 3],
            ..Default::default()
        },
    );
    let f: Vec<_> = c.frames.into_iter().map(|t| (t.ts_ns, t.data)).collect();
    assert_eq!(kept("infiniband.mad", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("infiniband.mad.data", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("infiniband.deth && !infiniband.mad", &f), [6]);
    let short = frame::decode(LinkType::ETHERNET, &f[5].1, &Options::default());
    assert!(short.mad.is_none());
    assert!(
        short.stop.is_some_and(|s| s.to_string().contains("a MAD is 256 bytes")),
        "{:?}",
        short.stop
    );
    assert_eq!(kept("infiniband.cm.drsp.localcommid", &f), [5]);
    assert_eq!(kept("infiniband.cm.drsp.remotecommid == 0x1a2b3c4d", &f), [5]);
    assert_eq!(kept("infiniband.cm.drsp.private && !infiniband.cm.dreq.private", &f), [5]);
    assert_eq!(kept("infiniband.cm.req.remoteqpneecn == 0x12", &f), [4]);
    assert_eq!(kept("infiniband.cm.rej.msgrej == 1 && infiniband.cm.rej.ari", &f), [3]);
    assert_eq!(kept("infiniband.cm.req", &f), [1, 2]);
    assert_eq!(kept("infiniband.cm.req.ip_cm", &f), [1]);
    assert_eq!(kept("infiniband.cm.req.serviceid.dport == 7174", &f), [1]);
    // No rdma_cm header in the private data: its IP version nibble is 0, so tshark
    // reads IPv6 addresses (all zero).
    assert_eq!(
        kept("infiniband.cm.req.ip_cm.sip6 == :: && !infiniband.cm.req.ip_cm.sip4", &f),
        [1]
    );
    assert_eq!(kept("infiniband.cm.req.private", &f), [2]);
    assert_eq!(kept("infiniband.cm.req.prim_localgid_ipv4 == 10.0.0.1", &f), [1, 2]);
    assert_eq!(kept("infiniband.cm.req.prim_localgid", &f), NONE, "over IPv4, the _ipv4 name");
    assert_eq!(
        kept(r#"infiniband.cm.req.pppmtu == 3 && infiniband.cm.req.pkey == 0xffff"#, &f),
        [1, 2]
    );
    let e = err("infiniband.cm.drsp.localcomid");
    assert!(
        matches!(
            &e.kind,
            ErrorKind::UnknownField { suggestion: Some("infiniband.cm.drsp.localcommid"), .. }
        ),
        "{e}"
    );
}

/// `aa:bb:…` for bytes, as a filter writes them.
fn colons(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":")
}

/// The frames of `frames()` and four more: a SEND of 5 bytes (pad count 3), a SEND
/// whose pad fills the bytes before the ICRC (no payload), a SEND whose payload ends
/// in two newlines, and the ACK (frame 2) with six bytes of Ethernet padding after it.
fn frames_with_pads() -> Vec<(u64, Vec<u8>)> {
    let mut f = frames();
    let mut c = Conversation::new();
    c.send(Dir::AtoB, 5, None);
    c.push(
        Dir::AtoB,
        Transport {
            bth: BthRepr { opcode: Opcode(0x04), psn: Psn::new(7), ..Default::default() },
            pad: Some(3),
            ..Default::default()
        },
    );
    c.push(
        Dir::AtoB,
        Transport {
            bth: BthRepr { opcode: Opcode(0x04), psn: Psn::new(8), ..Default::default() },
            payload: b"abc ok\n\n".to_vec(),
            ..Default::default()
        },
    );
    f.extend(c.frames.into_iter().map(|t| (t.ts_ns + 100, t.data)));
    let mut padded = f[1].1.clone();
    padded.extend_from_slice(&[0xee; 6]);
    f.push((f[7].0 + 2, padded));
    f
}

/// A protocol's name as a byte string, as tshark 4.0 reads it: `contains` and
/// `matches` search from the protocol's first byte to the end of what it covers
/// (`eth` and `frame` the whole frame, `ip` to its total length, `udp` to the end of
/// the IP payload, `infiniband` BTH to ICRC, `data` the payload and its pad), and
/// `==`, `<`, … read its own bytes (`eth` 14, `ip` its header, `udp` 8), the shorter
/// value ordered first.
#[test]
fn protocols_read_as_bytes() {
    let f = frames_with_pads();
    let decoded: Vec<Frame> =
        f.iter().map(|(_, d)| frame::decode(LinkType::ETHERNET, d, &Options::default())).collect();
    // Frames 1 and 3 carry "ABCDEFGH" (the WRITE's payload counts up from 0x30).
    for p in ["frame", "eth", "ip", "udp", "infiniband", "data", "udp.payload", "data.data"] {
        assert_eq!(kept(&format!(r#"{p} contains "ABCDEFGH""#), &f), [1, 3], "{p}");
    }
    assert_eq!(kept(r#"ipv6 contains "ABCDEFGH""#, &f), NONE);
    // The ICRC is the end of `infiniband` (and `udp`, `ip`), not of `data`.
    let icrc =
        |n: usize| colons(&decoded[n - 1].ib.as_ref().and_then(|i| i.icrc).unwrap_or_default());
    assert_eq!(kept(&format!("infiniband contains {}", icrc(2)), &f), [2, 9]);
    assert_eq!(kept(&format!("udp.payload contains {}", icrc(3)), &f), [3]);
    assert_eq!(kept(&format!("data contains {}", icrc(3)), &f), NONE);
    // Ethernet padding is the frame's and `eth`'s, not `ip`'s, `udp`'s or `infiniband`'s.
    assert_eq!(kept("eth contains ee:ee:ee:ee:ee:ee", &f), [9]);
    assert_eq!(kept("frame contains ee:ee", &f), [9]);
    for p in ["ip", "udp", "infiniband", "udp.payload"] {
        assert_eq!(kept(&format!("{p} contains ee:ee"), &f), NONE, "{p}");
    }
    // `data` is the payload and its pad: 5 bytes and 3 of pad; 3 of pad alone.
    assert_eq!(kept("data.len == 8", &f), [3, 6, 8]);
    assert_eq!(kept("data.len == 3", &f), [7], "a pad alone is data");
    assert_eq!(kept("roce.payload.len == 5", &f), [6]);
    assert_eq!(kept("data.data == 41:42:43:44:45:00:00:00", &f), [6]);
    assert_eq!(kept("data == 41:42:43:44:45:00:00:00", &f), [6]);
    assert_eq!(kept("data && !data.data", &f), NONE);
    assert_eq!(kept("data", &f), [1, 3, 5, 6, 7, 8]);
    // The comparisons read the protocol's own bytes; the shorter orders first.
    let eth = colons(&f[0].1[..14]);
    assert_eq!(kept(&format!("eth == {eth}"), &f), [1, 3, 5, 6, 7, 8]);
    assert_eq!(kept(&format!("eth != {eth}"), &f), [2, 4, 9]);
    let ip = colons(&f[0].1[14..34]);
    assert_eq!(kept(&format!("ip == {ip}"), &f), [1]);
    assert_eq!(kept(&format!("ip in {{00, {ip}}}"), &f), [1]);
    assert_eq!(kept("ip < 46", &f), NONE, "20 bytes are more than one");
    assert_eq!(kept("udp > ff:ff:ff:ff:ff:ff:ff", &f), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(kept(&format!("frame == {}", colons(&f[1].1)), &f), [2]);
    assert_eq!(kept(&format!("infiniband == {}", colons(&f[1].1[42..])), &f), [2, 9]);
    assert_eq!(kept("infiniband.immdt < 00:00:12:34:00", &f), [3], "bytes: shorter first");
    assert_eq!(kept("infiniband.immdt > ff:ff:ff", &f), [3]);
    // `matches` on bytes: bytes (not UTF-8), case ignored, `$` also before a final
    // newline (PCRE's), `.` not a newline.
    assert_eq!(kept(r#"infiniband matches "^\\x11""#, &f), [2, 4, 9]);
    assert_eq!(kept(r#"frame matches "abcdefgh""#, &f), [1, 3]);
    assert_eq!(kept(r#"data matches "ok\\n$""#, &f), [8], "before the final newline");
    assert_eq!(kept(r#"data matches "ok\\n\\n$""#, &f), [8]);
    assert_eq!(kept(r#"data.data matches "ok\\n\\n\\z""#, &f), [8]);
    assert_eq!(kept(r#"data.data matches "ok$""#, &f), NONE);
    assert_eq!(kept(r#"data.data matches "ok\\n\\Z""#, &f), [8]);
    assert_eq!(kept(r#"data.data matches "ok.\\n""#, &f), NONE, "`.` is no newline");
    assert_eq!(kept(r#"udp.payload matches "\\xff\\xff""#, &f), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // `udp.payload`: BTH to ICRC here.
    assert_eq!(kept(&format!("udp.payload == {}", colons(&f[1].1[42..62])), &f), [2, 9]);
}

/// tshark 4.0's `matches` on a MAC reads its six bytes; `contains` looks for bytes.
#[test]
fn macs_match_as_bytes() {
    let f = frames();
    assert_eq!(kept(r#"eth.src matches "\\x01$""#, &f), [1, 3, 5]);
    assert_eq!(kept(r#"eth.addr matches "^\\x02\\x00""#, &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept(r#"eth.dst matches "02:00""#, &f), NONE, "not its text");
    assert_eq!(kept("eth.src contains 00:01", &f), [1, 3, 5]);
    assert_eq!(kept("eth.addr contains 00:00:02", &f), [1, 2, 3, 4, 5]);
    assert!(matches!(err(r#"eth.src contains "02""#).kind, ErrorKind::QuotedValue { .. }));
}

/// The syndrome's bit fields under tshark's names: bit 7, the kind (bits 6-5) and
/// bits 4-0 under the kind's name.
#[test]
fn aeth_syndrome_bit_fields() {
    let mut c = Conversation::new();
    let p = c.send(Dir::AtoB, 8, None);
    for s in [0x1F, 0x2C, 0x45, 0x62, 0xE1] {
        c.ack(Dir::BtoA, p, Syndrome(s), 1);
    }
    let f: Vec<_> = c.frames.into_iter().map(|t| (t.ts_ns, t.data)).collect();
    assert_eq!(kept("infiniband.aeth.syndrome.reserved == 0", &f), [2, 3, 4, 5]);
    assert_eq!(kept("infiniband.aeth.syndrome.reserved == 1", &f), [6]);
    assert_eq!(kept("infiniband.aeth.syndrome.opcode == 3", &f), [5, 6]);
    assert_eq!(kept("infiniband.aeth.syndrome.credit_count == 31", &f), [2]);
    assert_eq!(kept("infiniband.aeth.syndrome.timer == 12", &f), [3]);
    assert_eq!(kept("infiniband.aeth.syndrome.reserved_value == 5", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome.error_code", &f), [5, 6]);
    assert_eq!(kept("infiniband.aeth.syndrome.error_code == 1", &f), [6]);
    assert_eq!(
        kept("infiniband.aeth.syndrome.credit_count or infiniband.aeth.syndrome.timer", &f),
        [2, 3]
    );
}

/// tshark 4.0's bitwise and: `field & mask` holds when the AND is not zero;
/// `field & mask REL value` compares the AND. Masks and the values compared with a
/// masked field must fit the field's type; no `in`, `contains` or `matches` after a
/// mask, no mask on the value's side.
#[test]
fn bitwise_and() {
    let f = frames();
    // The ACK's syndrome is 0x1F, the NAK's 0x62.
    assert_eq!(kept("infiniband.aeth.syndrome & 0x60", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome bitwise_and 0x60", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome&0x60==0x60", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome & 0x60 == 0", &f), [2]);
    assert_eq!(kept("infiniband.aeth.syndrome & 0x60 != 0x60", &f), [2], "absent: no frame");
    assert_eq!(kept("!infiniband.aeth.syndrome & 0x60", &f), [1, 2, 3, 5]);
    assert_eq!(kept("infiniband.aeth.syndrome & 0x60 & 0x20", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome & 0x60 & 0x1f", &f), NONE);
    assert_eq!(kept("infiniband.aeth.syndrome & 0xe0 >= 0x60 and udp", &f), [4]);
    assert_eq!(kept("infiniband.aeth.syndrome & 96 == 0140", &f), [4], "decimal and octal");
    assert_eq!(kept("infiniband.aeth.syndrome & 0xff == infiniband.aeth.syndrome", &f), [2, 4]);
    assert_eq!(kept("infiniband.aeth.syndrome & 0x60 == infiniband.aeth.syndrome", &f), NONE);
    // udp.port is 0xC003 and 4791 (0x12B7): `==` any, `!=` all.
    assert_eq!(kept("udp.port & 0xff00 == 0x1200", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("udp.port & 0xff00 != 0x1200", &f), NONE);
    assert_eq!(kept("udp.port & 0xff00 ~= 0x1200", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("udp.dstport & 0x8000", &f), NONE);
    assert_eq!(kept("frame.number & 1", &f), [1, 3, 5]);

    let e = err(r#"infiniband.aeth.syndrome & "x""#);
    assert_eq!(
        e.to_string(),
        "error: `x` is not a mask: a mask is a number, not text\n --> display filter:1:28\n  |\n1 | infiniband.aeth.syndrome & \"x\"\n  |                            ^^^\n  |\n  = hint: a mask is a number in decimal, 0x hex or octal: `infiniband.aeth.syndrome & 0x60`"
    );
    let e = err("infiniband.aeth.syndrome & 0x1ff");
    assert_eq!(
        (e.kind.clone(), e.span.clone()),
        (
            ErrorKind::TooBig { text: "0x1ff".into(), field: "infiniband.aeth.syndrome", max: 255 },
            27..32
        )
    );
    let e = err("infiniband.aeth.syndrome & 0x60 == 0x100");
    assert!(matches!(e.kind, ErrorKind::TooBig { max: 255, .. }), "{e}");
    assert!(matches!(err("udp.port & 0x10000").kind, ErrorKind::TooBig { max: 65535, .. }));
    assert!(Filter::compile("udp.port & 0xffff").is_ok());
    let e = err("infiniband.bth.a & 1");
    assert_eq!(e.span, 0..16);
    assert!(matches!(e.kind, ErrorKind::MaskNotForType { what: "boolean", .. }), "{e}");
    assert!(matches!(err("ip & 1").kind, ErrorKind::MaskNotForType { what: "protocol", .. }));
    assert!(matches!(err("ip.src & 1").kind, ErrorKind::MaskNotForType { .. }));
    assert!(matches!(err("infiniband.aeth.syndrome & 1a").kind, ErrorKind::BadMask { .. }));
    let e = err("infiniband.aeth.syndrome & infiniband.aeth.msn");
    assert!(matches!(e.kind, ErrorKind::BadMask { .. }), "{e}");
    let e = err("infiniband.aeth.syndrome & 0x60 == 0x60 & 0x60");
    assert_eq!((e.kind.clone(), e.span.clone()), (ErrorKind::MaskOnValue, 40..41));
    let e = err("infiniband.aeth.syndrome & 0x60 in {0x20, 0x60}");
    assert_eq!(e.span, 32..34);
    assert!(e.to_string().contains("a comparison (`==`, `!=`, `<`, …) after a mask"), "{e}");
    // Not tshark 4.0's word: refused, as tshark refuses it, with the caret under it.
    let e = err("infiniband.aeth.syndrome bitand 0x60");
    assert_eq!(e.span, 25..31);
    assert!(e.to_string().contains("`&` or `bitwise_and` (tshark 4.0 has no `bitand`)"), "{e}");
    let e = err("(infiniband.aeth.syndrome & 0x60) == 0x60");
    assert_eq!(e.span, 34..36, "tshark 4.0 refuses it too");
}

/// Slices and byte masks, on the frames of [`frames`]: 10.0.0.1 → 10.0.0.2 are 1,
/// 3 and 5; the BTH's first byte is the opcode (WRITE Only 0x0A, ACK 0x11, SEND
/// Only with Immediate 0x05).
#[test]
fn slices_and_byte_masks() {
    let f = frames();
    assert_eq!(kept("ip.src[3] == 1", &f), [1, 3, 5]);
    assert_eq!(kept("ip.src[-1:] == 02 and ip.dst[0:2] == 0a:00", &f), [2, 4]);
    assert_eq!(kept("ip.addr[3] != 1", &f), NONE, "`!=`: every occurrence");
    assert_eq!(kept("infiniband[0] == 0x0a", &f), [1, 5]);
    assert_eq!(kept("frame[12:2] == 08:00 && frame[14] == 45", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("frame[0:1,12-13] == 02:08:00", &f), [1, 2, 3, 4, 5]);
    assert_eq!(
        kept("frame[0:1,9999:1] == 02", &f),
        [1, 2, 3, 4, 5],
        "stops at the part past the end"
    );
    assert_eq!(kept("frame[9999:1,0:1] == \"\"", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("infiniband.immdt[-2:] == 12:34 && infiniband.immdt[0-1] == 00:00", &f), [3]);
    assert_eq!(kept("udp[8]", &f), NONE, "udp's own bytes are its 8-byte header");
    assert_eq!(kept("udp[7]", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("roce.opcode.name[3:4] == \"RDMA\"", &f), [1, 5]);
    // Masks on bytes: ANDed byte by byte, as long as the shorter.
    assert_eq!(kept("infiniband[0] & 0xf0 == 0x10", &f), [2, 4]);
    assert_eq!(kept("infiniband[0:2] & 0f", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("infiniband[0] & 0xe0", &f), NONE);
    assert_eq!(kept("eth.dst & 01:00:00:00:00:00", &f), NONE, "no multicast");
    assert_eq!(kept("!eth.dst[0] & 1", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("infiniband.immdt & 00:00:00:04", &f), [3]);

    let e = err("infiniband[0] in {0x0a}");
    assert_eq!((e.kind.clone(), e.span.clone()), (ErrorKind::InNeedsField, 14..16));
    let e = err("udp.port[0:1] == 12");
    assert_eq!(e.span, 0..8);
    assert_eq!(
        e.to_string().lines().next(),
        Some("error: udp.port (unsigned integer) cannot be sliced into bytes")
    );
    let e = err("eth.src[0:1, 2-1]");
    assert_eq!(e.span, 13..16, "the caret is under the part");
    assert!(
        e.to_string().contains("`2-1` is not a slice: the end (1) must come after the start (2)"),
        "{e}"
    );
    assert!(e.to_string().contains("hint: a slice is `[start:length]`"), "{e}");
    assert_eq!(err("eth.src[0:3 == 1").kind, ErrorKind::UnclosedBracket);
    assert_eq!(err("eth.src[0:3 == 1").span, 7..8);
    assert_eq!(err("frame[0:2] == eth.src[0:2]").kind, ErrorKind::SliceOnValue);
    assert_eq!(err("frame[0:6] == eth.dst").kind, ErrorKind::SliceOnValue);
    assert!(matches!(
        err("_ws.col.Info[0:2] == \"RC\"").kind,
        ErrorKind::SliceNotForType { what: "a column", .. }
    ));
    assert!(matches!(err("infiniband.reth[0]").kind, ErrorKind::SliceNotForType { .. }));
    assert!(matches!(err("tcp[0]").kind, ErrorKind::SliceNotForType { .. }));
    assert!(matches!(err("nosuch[0]").kind, ErrorKind::UnknownField { .. }));
    assert!(
        matches!(err("eth.dst & 1").kind, ErrorKind::BadValue { .. }),
        "a whole MAC's mask is a MAC"
    );
    assert!(matches!(err("eth.dst[0] & \"x\"").kind, ErrorKind::BadMask { .. }));
    assert!(matches!(err("frame.protocols & 1").kind, ErrorKind::MaskNotForType { .. }));
}

/// Functions on the frames of [`frames`]: 1 a WRITE of 64 bytes, 3 a SEND of 8
/// with immediate data, 2 and 4 ACKs (4 a NAK).
#[test]
fn functions() {
    let f = frames();
    assert_eq!(kept("len(data.data) == 64", &f), [1]);
    assert_eq!(kept("len(infiniband.immdt) == 4 && len(infiniband.bth.psn) == 3", &f), [3]);
    assert_eq!(
        kept("len(udp) == 8 and len(eth.src) == 6 and len(ip.src) == 4", &f),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(kept("len(infiniband.bth.a) == 0 && len(udp.port) == 2", &f), [1, 2, 3, 4, 5]);
    assert_eq!(kept("len(frame) > 100", &f), [1]);
    assert_eq!(kept("count(ip.addr) == 2 && count(udp) == 1", &f), [1, 2, 3, 4, 5]);
    assert_eq!(
        kept("count(infiniband.aeth.syndrome) == 0", &f),
        NONE,
        "nothing to count: no value"
    );
    assert_eq!(kept("count(infiniband.reth.va) ~= count(infiniband.bth.opcode)", &f), NONE);
    assert_eq!(kept("string(infiniband.bth.destqp) == \"18\"", &f), [1, 3, 5]);
    assert_eq!(kept("string(ip.src) == \"10.0.0.2\"", &f), [2, 4]);
    assert_eq!(kept("upper(roce.opcode.name) contains \"ACKNOWLEDGE\"", &f), [2, 4]);
    assert_eq!(kept("lower(roce.opcode.name) matches \"^rc send\"", &f), [3]);
    assert_eq!(kept("max(udp.srcport, udp.dstport) == 4791", &f), NONE);
    assert_eq!(
        kept("min(udp.port) == 4791 and max(ip.src, ip.dst) == 10.0.0.2", &f),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(kept("abs(infiniband.aeth.syndrome) > 0x60", &f), [4]);
    assert_eq!(kept("data.len == len(data.data) && len(data.data) > data.len", &f), NONE);
    assert_eq!(kept("len(data.data) == data.len", &f), [1, 3, 5]);
    assert_eq!(kept("len(data.data) & 0x40", &f), [1]);
    assert_eq!(kept("len(data.data) & 0x40 == 0", &f), [3, 5]);

    let e = err("len(data.data)");
    assert_eq!((e.kind.clone(), e.span.clone()), (ErrorKind::FunctionAlone, 0..14));
    let e = err("lenn(data.data) > 1");
    assert_eq!(e.kind, ErrorKind::UnknownFunction { name: "lenn".into(), suggestion: Some("len") });
    assert_eq!(e.span, 0..4);
    let e = err("len(ip.addr, ip.src) == 4");
    assert_eq!(e.span, 13..19);
    assert!(e.to_string().contains("it takes one argument"), "{e}");
    assert!(matches!(err("len(1) == 1").kind, ErrorKind::BadArgument { .. }));
    assert!(matches!(err("upper(eth.src) == \"x\"").kind, ErrorKind::BadArgument { .. }));
    assert!(matches!(err("lower(_ws.col.Info) == \"x\"").kind, ErrorKind::BadArgument { .. }));
    assert!(matches!(err("max(udp.port, ip.src) > 0").kind, ErrorKind::BadArgument { .. }));
    assert!(matches!(err("len(tcp) > 0").kind, ErrorKind::BadArgument { .. }));
    assert!(matches!(err("len(nosuch) > 0").kind, ErrorKind::UnknownField { .. }));
    assert_eq!(err("len(data.data) in {1, 2}").kind, ErrorKind::InNeedsField);
    assert!(matches!(err("len(data.data) contains 1").kind, ErrorKind::RelNotForType { .. }));
    assert!(matches!(
        err("upper(frame.protocols) == len(data.data)").kind,
        ErrorKind::FieldTypesDiffer { .. }
    ));
    assert!(matches!(err("len(data.data").kind, ErrorKind::EndTooSoon { .. }));
    // A filter that reads a field through a function uses it.
    let f = Filter::compile("len(data.data) > 0 || count(frame.time_delta_displayed) > 0").unwrap();
    assert!(f.uses(Field::FrameTimeDeltaDisplayed));
}

#[test]
fn errors_name_the_column_and_show_a_caret() {
    let e = err("infiniband.bth.destqpn == 5");
    assert_eq!(e.column(), 1);
    assert_eq!(
        e.to_string(),
        "error: unknown field or protocol `infiniband.bth.destqpn`\n --> display filter:1:1\n  |\n1 | infiniband.bth.destqpn == 5\n  | ^^^^^^^^^^^^^^^^^^^^^^\n  |\n  = hint: did you mean `infiniband.bth.destqp`? (`roce decode -G fields` lists the fields)"
    );
    let e = err("udp && ip.src == 10.0.0.300");
    assert_eq!((e.column(), e.span.clone()), (18, 17..27));
    assert!(e.to_string().contains("`10.0.0.300` is not a valid IPv4 address for ip.src"), "{e}");
    assert!(e.to_string().contains(" --> display filter:1:18\n"), "{e}");
    assert!(e.to_string().ends_with("\n  |                  ^^^^^^^^^^\n  |\n  = hint: write an address like 10.0.0.1 or a subnet like 10.0.0.0/24"), "{e}");
    // Where the filter came from, when the caller says.
    let e = FilterError { origin: Some("-Y"), ..e };
    assert!(e.to_string().contains(" --> -Y:1:18\n"), "{e}");
    assert!(matches!(
        err(r#"ip.src == "10.0.0.1""#).kind,
        ErrorKind::QuotedValue { ty: Ty::Ipv4, .. }
    ));
    assert!(matches!(
        err("ip.src contains 10").kind,
        ErrorKind::RelNotForType { rel: Rel::Contains, .. }
    ));
    assert!(matches!(
        err("infiniband.bth.psn matches 1").kind,
        ErrorKind::RelNotForType { rel: Rel::Matches, .. }
    ));
    let e = err("tcp == 00");
    assert!(matches!(e.kind, ErrorKind::ProtocolCompared { .. }), "{e}");
    assert!(e.to_string().contains("frame, eth, ip, ipv6, udp, infiniband and data can"), "{e}");
    assert!(matches!(err("ip.addr > 10.0.0.0/8").kind, ErrorKind::SubnetOrdered));
    assert!(matches!(err("ip.addr in {10.0.0.0/8..10.0.0.9}").kind, ErrorKind::SubnetOrdered));
    assert!(matches!(err("frame.number == x1").kind, ErrorKind::BadValue { ty: Ty::Uint, .. }));
    assert!(matches!(err("frame.number == 09").kind, ErrorKind::BadValue { .. }), "9 is not octal");
    assert!(matches!(
        err("ip.addr == 10.0.0.0/33").kind,
        ErrorKind::BadValue { why: "the prefix length must be 0 to 32", .. }
    ));
    assert!(matches!(
        err("ipv6.addr == fd00::/129").kind,
        ErrorKind::BadValue { why: "the prefix length must be 0 to 128", .. }
    ));
    assert!(matches!(
        err("ip.addr == 10.0.0.0/x").kind,
        ErrorKind::BadValue { why: "the prefix length must be 0 to 32", .. }
    ));
    assert!(matches!(
        err("eth.src == 02:00:00:00:00").kind,
        ErrorKind::BadValue { ty: Ty::Mac, .. }
    ));
    assert!(matches!(
        err("infiniband.bth.a == yes").kind,
        ErrorKind::BadValue { ty: Ty::Bool, .. }
    ));
    assert!(matches!(
        err("frame.time_delta > 1e-3").kind,
        ErrorKind::BadValue { ty: Ty::Time, .. }
    ));
    assert!(matches!(err(r#"frame.protocols matches "(""#).kind, ErrorKind::BadRegex { .. }));
    assert!(matches!(err(r#""ip""#).kind, ErrorKind::QuotedName));
    let e = err("ip.ttl = 64");
    assert_eq!(e.column(), 8);
    assert!(e.to_string().contains("hint: write `==`"), "{e}");
    // A tab in the filter does not shift the caret.
    let e = err("ip\t&& zzz");
    assert!(e.to_string().contains("1 | ip    && zzz\n  |          ^^^"), "{e}");
    // Columns count characters, not bytes.
    let e = err("frame.comment == \"é\" && zz");
    assert_eq!(e.column(), 25);
    assert!(e.to_string().contains(" --> display filter:1:25\n"), "{e}");
    assert!(e.to_string().contains("\n  |                         ^^\n"), "{e}");
}

#[test]
fn literals() {
    assert_eq!(number("0x1F"), Some(31));
    assert_eq!(number("017"), Some(15));
    assert_eq!(number("0"), Some(0));
    assert_eq!(number("1_000"), Some(1000));
    assert_eq!(number("08"), None);
    assert_eq!(mac("02:00:00:00:00:0a"), Some(0x0200_0000_000a));
    assert_eq!(mac("2:0:0:0:0:a"), Some(0x0200_0000_000a));
    assert_eq!(mac("0200.0000.000a"), Some(0x0200_0000_000a));
    assert_eq!(mac("02:00:00:00:00:00:01"), None);
    assert_eq!(mac("02:00:00:00:00:0g"), None);
    assert_eq!(seconds("1.5"), Some(1_500_000_000));
    assert_eq!(seconds(".000002"), Some(2_000));
    assert_eq!(seconds("3"), Some(3_000_000_000));
    assert_eq!(seconds("0.1234567891"), Some(123_456_789), "past nanoseconds: cut");
    assert_eq!(seconds("."), None);
    assert_eq!(seconds("-1"), Some(-1_000_000_000));
    assert_eq!(seconds("--1"), None);
    assert_eq!(seconds("1-"), None);
}

#[test]
fn compiled_filters_keep_their_text() {
    let f = Filter::compile("  udp.port == 4791 ").unwrap();
    assert_eq!(f.text(), "  udp.port == 4791 ");
    // Protocol names are those `frame.protocols` uses, plus ours; all resolve.
    for (name, _) in PROTOCOLS {
        assert!(Filter::compile(name).is_ok(), "{name}");
    }
    // Every field compiles alone and against a value of its type.
    for (field, name, _) in Field::ALL {
        let value = match field.ty() {
            Ty::Uint => "1",
            Ty::Bool => "1",
            Ty::Ipv4 => "10.0.0.1",
            Ty::Ipv6 => "::1",
            Ty::Mac => "02:00:00:00:00:01",
            Ty::Time => "0.5",
            Ty::Bytes => "00:01",
            Ty::Str => "\"x\"",
        };
        Filter::compile(&format!("{name} == {value} || {name}")).unwrap_or_else(|e| panic!("{e}"));
        // A number field takes a mask as large as its type holds, and no larger.
        if field.ty() == Ty::Uint {
            let max = field.max();
            Filter::compile(&format!("{name} & {max:#x} == 1 || {name} & 1"))
                .unwrap_or_else(|e| panic!("{e}"));
            if let Some(more) = max.checked_add(1) {
                let e = err(&format!("{name} & {more}"));
                assert!(matches!(e.kind, ErrorKind::TooBig { .. }), "{e}");
            }
        } else if field.ty() == Ty::Bytes {
            // Bytes ANDed byte by byte, as tshark 4.0 does.
            Filter::compile(&format!("{name} & 1 || {name} & 00:ff == 00"))
                .unwrap_or_else(|e| panic!("{e}"));
        } else if field.ty() == Ty::Mac {
            Filter::compile(&format!("{name} & 01:00:00:00:00:00"))
                .unwrap_or_else(|e| panic!("{e}"));
        } else {
            assert!(matches!(err(&format!("{name} & 1")).kind, ErrorKind::MaskNotForType { .. }));
        }
    }
    // Each protocol read as bytes compiles with each relation.
    for (name, _) in ProtoBytes::ALL {
        for rel in ["==", "!=", "~=", "===", "<", ">", "<=", ">=", "contains"] {
            Filter::compile(&format!("{name} {rel} 00:01")).unwrap_or_else(|e| panic!("{e}"));
        }
        Filter::compile(&format!(r#"{name} matches "^\\x00" || {name} in {{00, 01:02}}"#))
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A frame of every kind through every field: each value has its field's type.
#[test]
fn values_have_their_fields_type() {
    let (a, b) = (
        Host { mac: Mac([2, 0, 0, 0, 0, 1]), ip: "fd00::1".parse().unwrap() },
        Host { mac: Mac([2, 0, 0, 0, 0, 2]), ip: "fd00::2".parse().unwrap() },
    );
    let t = Transport {
        bth: BthRepr { opcode: Opcode(0x0B), psn: Psn::new(1), ..Default::default() },
        payload: vec![1, 2, 3],
        ..Default::default()
    };
    let mut all: Vec<Vec<u8>> = frames().into_iter().map(|(_, d)| d).collect();
    all.push(craft::build(&Encap { vlans: vec![5], ..Encap::default() }, &a, &b, &t));
    all.push(craft::build(
        &Encap { version: crate::frame::RoceVersion::V1, ..Encap::default() },
        &a,
        &b,
        &t,
    ));
    let mut seen = 0;
    for data in &all {
        let fr = frame::decode(LinkType::ETHERNET, data, &Options::default());
        let c = ctx(1, 5, 1, 2, data, &fr);
        for (field, name, _) in Field::ALL {
            fields::visit(*field, &c, Shown::every(&c), |v| {
                assert_eq!(v.ty(), field.ty(), "{name}: {v:?}");
                seen += 1;
            });
        }
    }
    assert!(seen > 300, "{seen}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary text: an answer, never a panic.
    #[test]
    fn any_text_compiles_or_errs(s in "\\PC{0,40}") {
        match Filter::compile(&s) {
            Ok(f) => {
                let data = &frames()[0].1;
                let fr = frame::decode(LinkType::ETHERNET, data, &Options::default());
                let _ = f.matches(&ctx(1, 2, 1, 1, data, &fr));
            }
            Err(e) => {
                prop_assert!(e.span.end <= s.len());
                let _ = e.to_string();
            }
        }
    }

    /// Text made of the filter language's own pieces reaches the compiler's deeper
    /// paths more often than arbitrary text.
    #[test]
    fn filter_shaped_text_compiles_or_errs(parts in prop::collection::vec(prop::sample::select(vec![
        "ip.addr", "udp.port", "infiniband.bth.opcode", "eth.src", "frame.protocols", "infiniband.immdt", "frame.time_delta",
        "==", "!=", "~=", "===", "<", ">=", "contains", "matches", "in", "{", "}", "..", ",", "(", ")", "!", "&&", "||",
        "and", "not", "4", "0x11", "010", "10.0.0.0/24", "02:00:00:00:00:01", "\"data\"", "\"(\"", "0.5", "ip", "tcp", "zz",
        "&", "bitwise_and", "0x1ff", "frame", "eth", "infiniband", "data.data", "udp.payload", "\"$\\\\Z\"",
        "[0:3]", "[-1]", "[1-2]", "[:]", "[0:1,9:2]", "[2-1]", "[",
        "len(", "count(", "max(", "upper(", "foo(",
    ]), 0..12)) {
        let s = parts.join(" ");
        if let Err(e) = Filter::compile(&s) {
            prop_assert!(e.span.end <= s.len());
            prop_assert!(e.column() >= 1);
            let _ = e.to_string();
        }
    }
}

#[test]
fn not_a_panic_on_deep_nesting() {
    let deep = format!("{}frame{}", "(".repeat(200), ")".repeat(200));
    assert!(Filter::compile(&deep).is_ok());
    let nots = format!("{}frame", "! ".repeat(200));
    assert!(Filter::compile(&nots).is_ok());
    // Past the limit: an error under the first `(` too many, not a stack overflow.
    let max = parse::MAX_DEPTH;
    let e = err(&format!("{}frame{}", "(".repeat(100_000), ")".repeat(100_000)));
    assert_eq!((e.kind.clone(), e.span.clone()), (ErrorKind::TooDeep { max }, max..max + 1));
    assert!(matches!(err(&"!".repeat(100_000)).kind, ErrorKind::TooDeep { .. }));
    assert!(Filter::compile(&format!("{}frame{}", "(".repeat(max), ")".repeat(max))).is_ok());
    // A chain of any length is a list: compiled, evaluated and dropped flat.
    let f = frames();
    let chain = vec!["frame.number == 99"; 20_000].join(" or ") + " or frame.number == 2";
    assert_eq!(kept(&chain, &f), [2]);
    let chain = vec!["frame"; 20_000].join(" && ") + " && !(frame.number == 2)";
    assert_eq!(kept(&chain, &f), [1, 3, 4, 5]);
}

#[test]
fn filter_is_cheap_to_keep() {
    // Compiling the issue's filters once and evaluating them on a frame works and the
    // compiled form is independent of the text's lifetime.
    let f = frames();
    let fr = frame::decode(LinkType::ETHERNET, &f[3].1, &Options::default());
    let c = ctx(4, f[3].0, f[0].0, f[2].0, &f[3].1, &fr);
    let filters: Vec<Filter> = ["infiniband", "infiniband.aeth.syndrome != 0", "udp.port == 4791"]
        .iter()
        .map(|t| {
            let text = t.to_string();
            Filter::compile(&text).unwrap()
        })
        .collect();
    assert!(filters.iter().all(|x| x.matches(&c)));
}
