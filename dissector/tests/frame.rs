//! Whole-frame decoding: every opcode of the table, every encapsulation, built by our
//! emit side and read back; outer headers cross-checked with etherparse; truncation
//! at every length never panics and names the layer that stopped.

use std::net::{IpAddr, Ipv4Addr};

use dissector::craft::{self, Encap, Host, IcrcMode, Transport};
use dissector::frame::{self, Layer, Net, Options, RoceVersion, StopError, TransportHint};
use dissector::wire::ethernet::Mac;
use dissector::wire::ext::{AtomicEthRepr, DethRepr, RethRepr};
use dissector::wire::{AethRepr, BthRepr, Headers, OpInfo, Opcode, Psn, Syndrome, Transport as Tr};
use dissector::LinkType;

fn hosts(v6: bool) -> (Host, Host) {
    let (a, b): (IpAddr, IpAddr) = if v6 {
        ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
    } else {
        (Ipv4Addr::new(10, 0, 0, 1).into(), Ipv4Addr::new(10, 0, 0, 2).into())
    };
    (Host { mac: Mac([2, 0, 0, 0, 0, 1]), ip: a }, Host { mac: Mac([2, 0, 0, 0, 0, 2]), ip: b })
}

/// A transport packet with every header field set to a recognisable value.
fn full(op: Opcode, payload: usize) -> Transport {
    Transport {
        bth: BthRepr {
            opcode: op,
            solicited_event: true,
            p_key: 0xFFFF,
            dest_qp: 0x00AB_CDEF & 0xFF_FFFF,
            ack_req: true,
            psn: Psn::new(0xFF_FFFE),
            ..Default::default()
        },
        xrceth: 0x33,
        dceth: None,
        dcceth: [0xdc; 16],
        rdeth: 0x44,
        deth: DethRepr { q_key: 0x1111_1111, src_qp: 0x55 },
        feth: 0x12,
        reth: RethRepr { va: 0x0000_7f00_dead_b000, r_key: 0x1234, dma_len: payload as u32 },
        atomiceth: AtomicEthRepr { va: 0x1000, r_key: 0x99, swap_add: 7, compare: 3 },
        aeth: AethRepr { syndrome: Syndrome(0x62), msn: 42 },
        atomicacketh: 0xFEED,
        immdt: 0xCAFE_BABE,
        ieth: 0x77,
        payload: (0..payload).map(|i| i as u8).collect(),
        pad: None,
        icrc: IcrcMode::Correct,
    }
}

fn check_all_headers(t: &Transport, ib: &frame::Ib, h: Headers) {
    assert_eq!(ib.deth.is_some(), h.contains(Headers::DETH));
    assert_eq!(ib.reth.is_some(), h.contains(Headers::RETH));
    assert_eq!(ib.aeth.is_some(), h.contains(Headers::AETH));
    assert_eq!(ib.immdt.is_some(), h.contains(Headers::IMMDT));
    assert_eq!(ib.ieth.is_some(), h.contains(Headers::IETH));
    assert_eq!(ib.atomiceth.is_some(), h.contains(Headers::ATOMICETH));
    assert_eq!(ib.atomicacketh.is_some(), h.contains(Headers::ATOMICACKETH));
    assert_eq!(ib.xrceth.is_some(), h.contains(Headers::XRCETH));
    assert_eq!(ib.rdeth.is_some(), h.contains(Headers::RDETH));
    assert_eq!(ib.feth.is_some(), h.contains(Headers::FETH));
    assert_eq!(ib.dceth, t.dceth.filter(|_| h.contains(Headers::DCETH)));
    assert_eq!(ib.dcceth, h.contains(Headers::DCCETH).then_some(t.dcceth));
    if let Some(d) = ib.deth {
        assert_eq!(d, t.deth);
    }
    if let Some(r) = ib.reth {
        assert_eq!(r, t.reth);
    }
    if let Some(a) = ib.aeth {
        assert_eq!(a, t.aeth);
    }
    if let Some(a) = ib.atomiceth {
        assert_eq!(a, t.atomiceth);
    }
    assert_eq!(ib.immdt.unwrap_or(t.immdt), t.immdt);
    assert_eq!(ib.ieth.unwrap_or(t.ieth), t.ieth);
    assert_eq!(ib.xrceth.unwrap_or(t.xrceth), t.xrceth);
    assert_eq!(ib.rdeth.unwrap_or(t.rdeth), t.rdeth);
    assert_eq!(ib.atomicacketh.unwrap_or(t.atomicacketh), t.atomicacketh);
}

#[test]
fn every_opcode_every_encapsulation() {
    let encaps: Vec<(Encap, bool)> = vec![
        (Encap::default(), false),
        (Encap::default(), true),
        (Encap { vlans: vec![100], ..Default::default() }, false),
        (Encap { vlans: vec![10, 20], ..Default::default() }, true),
        (Encap { link: LinkType::LINUX_SLL, ..Default::default() }, false),
        (Encap { link: LinkType::LINUX_SLL2, ..Default::default() }, true),
        (Encap { link: LinkType::RAW, ..Default::default() }, false),
        (Encap { link: LinkType::RAW, ..Default::default() }, true),
        (Encap { version: RoceVersion::V1, ..Default::default() }, false),
        (Encap { version: RoceVersion::V1, vlans: vec![7], ..Default::default() }, true),
    ];
    let mut checked = 0;
    let dc_se = [Opcode(0x55).dc_info(true).expect("0x55 with SE set")];
    for info in Opcode::all().chain(Opcode::all_dc()).chain(dc_se) {
        let has_payload = info.headers.contains(Headers::PAYLOAD);
        let dc = info.transport == Tr::Dc;
        for payload in [0usize, 1, 5, 64] {
            if !has_payload && payload > 0 {
                continue;
            }
            let mut t = full(info.opcode, payload);
            if dc {
                t.dceth = Some(0x0102_0304_0506_0708);
                t.bth.solicited_event = !info.headers.contains(Headers::DCCETH);
            }
            // RD opcodes as RD; DC rows both forced and guessed (`full` zeroes the
            // reserved bytes the DC layout checks).
            let hints: &[TransportHint] = match (info.transport, dc) {
                (_, true) => &[TransportHint::Dc, TransportHint::Auto],
                (Tr::Rd, _) => &[TransportHint::Rd],
                _ => &[TransportHint::Auto, TransportHint::Rd, TransportHint::Dc],
            };
            for ((enc, v6), &hint) in encaps.iter().flat_map(|e| hints.iter().map(move |h| (e, h)))
            {
                let (a, b) = hosts(*v6);
                let bytes = craft::build(enc, &a, &b, &t);
                let link = if enc.link == LinkType::RAW { LinkType::RAW } else { enc.link };
                let opts = Options { transport_hint: hint, ..Options::default() };
                let f = frame::decode(link, &bytes, &opts);
                assert_eq!(f.stop, None, "{} {enc:?}", info.opcode);
                assert_eq!(f.roce, Some(enc.version));
                let ib = f.ib.as_ref().expect("RoCE");
                let mut want_bth = t.bth;
                want_bth.pad_count = ((4 - payload % 4) % 4) as u8;
                assert_eq!(ib.bth, want_bth);
                assert_eq!(ib.info, Some(info), "{hint:?}");
                check_all_headers(&t, ib, info.headers);
                assert_eq!(&bytes[ib.payload.clone()], &t.payload[..]);
                let c = f.icrc_check(&bytes).expect("ICRC captured");
                assert!(c.ok(), "{} {enc:?}: {c:?}", info.opcode);
                assert_eq!(f.vlans.iter().flatten().map(|v| v.id).collect::<Vec<_>>(), enc.vlans);
                checked += 1;
            }
        }
    }
    assert!(checked > 2500, "{checked}");
}

/// What tshark 4.0 shows for a DC packet, read off `tshark -V` on frames like these:
/// the RDETH and DETH come after the 8 DCETH bytes, an Acknowledge has no RDETH.
#[test]
fn dc_layout_and_the_auto_guess() {
    let (a, b) = hosts(false);
    let write = |dceth: Option<u64>| {
        let mut t = full(Opcode(0x4A), 8);
        t.dceth = dceth;
        craft::build(&Encap::default(), &a, &b, &t)
    };
    let dc_bytes = write(Some(0x1122_3344_5566_7788));
    let opts = |transport_hint| Options { transport_hint, ..Options::default() };
    for hint in [TransportHint::Auto, TransportHint::Dc] {
        let f = frame::decode(LinkType::ETHERNET, &dc_bytes, &opts(hint));
        let ib = f.ib.as_ref().unwrap();
        assert!(ib.is_dc(), "{hint:?}");
        assert_eq!(ib.dceth, Some(0x1122_3344_5566_7788));
        assert_eq!(ib.rdeth, Some(0x44));
        assert_eq!(ib.deth.unwrap().src_qp, 0x55);
        assert_eq!(ib.reth.unwrap().va, 0x0000_7f00_dead_b000);
        assert_eq!(frame::OpName(ib).to_string(), "DC RDMA WRITE Only");
        assert!(f.icrc_check(&dc_bytes).unwrap().ok());
    }
    // Forced RD reads the DCETH as RDETH and DETH: wrong, but what was asked.
    let f = frame::decode(LinkType::ETHERNET, &dc_bytes, &opts(TransportHint::Rd));
    let ib = f.ib.as_ref().unwrap();
    assert!(!ib.is_dc());
    assert_eq!(ib.rdeth, Some(0x22_3344));
    assert_eq!(frame::OpName(ib).to_string(), "RD RDMA WRITE Only");

    // A true RD packet whose DETH would sit on payload bytes under the DC reading
    // (a non-zero reserved byte) is guessed RD.
    let rd_bytes = write(None);
    let f = frame::decode(LinkType::ETHERNET, &rd_bytes, &opts(TransportHint::Auto));
    assert!(!f.ib.as_ref().unwrap().is_dc());
    assert_eq!(f.ib.as_ref().unwrap().reth.unwrap().dma_len, 8);
    // An RD Acknowledge is 4 bytes too short to be a DC one: RD.
    let mut ack = full(Opcode(0x51), 0);
    ack.aeth = AethRepr { syndrome: Syndrome::ACK, msn: 9 };
    let ack_rd = craft::build(&Encap::default(), &a, &b, &ack);
    assert!(!frame::decode(LinkType::ETHERNET, &ack_rd, &opts(TransportHint::Auto))
        .ib
        .unwrap()
        .is_dc());
    ack.dceth = Some(7);
    let ack_dc = craft::build(&Encap::default(), &a, &b, &ack);
    let ib = frame::decode(LinkType::ETHERNET, &ack_dc, &opts(TransportHint::Auto)).ib.unwrap();
    assert!(ib.is_dc());
    assert_eq!((ib.rdeth, ib.aeth.map(|a| a.msn)), (None, Some(9)));
    // The connect: 0x55 with SE clear carries a DCCETH.
    let mut conn = full(Opcode(0x55), 0);
    (conn.dceth, conn.bth.solicited_event) = (Some(1), false);
    let bytes = craft::build(&Encap::default(), &a, &b, &conn);
    let ib = frame::decode(LinkType::ETHERNET, &bytes, &opts(TransportHint::Auto)).ib.unwrap();
    assert_eq!(ib.dcceth, Some([0xdc; 16]));
    assert_eq!(frame::OpName(&ib).to_string(), "DC CONNECT");
    let _: Option<&OpInfo> = ib.info;
}

#[test]
fn outer_headers_agree_with_etherparse() {
    let (a, b) = hosts(false);
    for vlans in [vec![], vec![5], vec![5, 6]] {
        let enc = Encap { vlans: vlans.clone(), ecn: 3, dscp: 26, ..Default::default() };
        let t = full(Opcode(0x0A), 33);
        let bytes = craft::build(&enc, &a, &b, &t);
        let p =
            etherparse::SlicedPacket::from_ethernet(&bytes).expect("etherparse parses our frame");
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("no IPv4: {p:?}") };
        let h = ip.header().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 checksum");
        assert_eq!(h.source, [10, 0, 0, 1]);
        assert_eq!(h.ecn.value(), 3);
        let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else { panic!("no UDP") };
        assert_eq!(u.destination_port(), 4791);
        let f = frame::decode(LinkType::ETHERNET, &bytes, &Options::default());
        let ib = f.ib.clone().unwrap();
        // The UDP payload etherparse sees is exactly BTH .. ICRC as we laid it out.
        assert_eq!(u.payload().len(), 12 + 16 + 33 + 3 + 4);
        assert_eq!(&bytes[ib.payload.clone()], &u.payload()[28..61]);
        assert_eq!(f.ecn(), Some(3));
        assert_eq!(p.link_exts.len(), vlans.len());
    }
}

#[test]
fn bad_icrc_is_flagged_not_fatal() {
    let (a, b) = hosts(false);
    let t = Transport { icrc: IcrcMode::Corrupt, ..full(Opcode(0x04), 8) };
    let bytes = craft::build(&Encap::default(), &a, &b, &t);
    let f = frame::decode(LinkType::ETHERNET, &bytes, &Options::default());
    assert_eq!(f.stop, None);
    let c = f.icrc_check(&bytes).unwrap();
    assert!(!c.ok());
    assert_eq!(c.wire ^ c.computed, 1);
}

#[test]
fn unknown_and_vendor_opcodes_decode_on() {
    let (a, b) = hosts(false);
    for op in [0x18u8, 0x2C, 0x66, 0x80, 0xC5, 0xFF] {
        let t = full(Opcode(op), 12);
        let bytes = craft::build(&Encap::default(), &a, &b, &t);
        let f = frame::decode(LinkType::ETHERNET, &bytes, &Options::default());
        let ib = f.ib.as_ref().unwrap();
        assert!(ib.info.is_none());
        assert_eq!(&bytes[ib.payload.clone()], &t.payload[..], "bytes after BTH shown as payload");
        assert!(f.icrc_check(&bytes).unwrap().ok());
    }
}

#[test]
fn truncation_at_every_length_names_the_layer() {
    let (a, b) = hosts(false);
    let t = full(Opcode(0x0B), 40); // RETH + ImmDt + payload
    let bytes = craft::build(&Encap { vlans: vec![3], ..Default::default() }, &a, &b, &t);
    for n in 0..bytes.len() {
        let f = frame::decode(LinkType::ETHERNET, &bytes[..n], &Options::default());
        let s = f.stop.unwrap_or_else(|| panic!("length {n} decoded without a stop"));
        let expect = match n {
            0..=13 => Layer::Ethernet,
            14..=17 => Layer::Vlan,
            18..=37 => Layer::Ipv4,
            38..=45 => Layer::Udp,
            _ => Layer::Bth,
        };
        if n < 58 {
            assert_eq!(s.layer, expect, "length {n}: {s}");
        } else if n < 78 {
            assert_eq!(s.layer, Layer::ExtHeader, "length {n}: {s}");
            assert_eq!(s.header, Some(if n < 74 { "RETH" } else { "ImmDt" }));
        } else {
            assert_eq!(s.layer, Layer::Payload, "length {n}: {s}");
            assert!(matches!(s.error, StopError::Snapped { .. }));
        }
        assert!(!s.to_string().is_empty());
    }
}

#[test]
fn snapped_frame_keeps_headers() {
    let (a, b) = hosts(false);
    let t = full(Opcode(0x0A), 1000);
    let bytes = craft::build(&Encap::default(), &a, &b, &t);
    let f = frame::decode(LinkType::ETHERNET, &bytes[..128], &Options::default());
    let ib = f.ib.as_ref().unwrap();
    assert_eq!(ib.reth.unwrap().dma_len, 1000);
    assert_eq!(f.icrc_check(&bytes[..128]), None);
    assert_eq!(
        f.stop.unwrap().to_string(),
        "payload at offset 70: capture cut short (snaplen): 86 of 1032 bytes captured"
    );
}

#[test]
fn pad_count_larger_than_payload_is_reported() {
    let (a, b) = hosts(false);
    let t = Transport { pad: Some(3), ..full(Opcode(0x04), 0) };
    let mut bytes = craft::build(&Encap::default(), &a, &b, &t);
    // 3 pad bytes were appended; drop them and fix the lengths so pad > payload.
    let n = bytes.len();
    bytes.drain(n - 7..n - 4);
    let udp_len = u16::from_be_bytes([bytes[38], bytes[39]]) - 3;
    bytes[38..40].copy_from_slice(&udp_len.to_be_bytes());
    let ip_len = u16::from_be_bytes([bytes[16], bytes[17]]) - 3;
    bytes[16..18].copy_from_slice(&ip_len.to_be_bytes());
    let f = frame::decode(LinkType::ETHERNET, &bytes, &Options::default());
    let s = f.stop.unwrap();
    assert_eq!(s.layer, Layer::Payload);
    assert_eq!(
        s.to_string(),
        "payload at offset 54: BTH pad count 3 exceeds the 0 bytes left for payload"
    );
}

#[test]
fn other_ports_need_opting_in() {
    let (a, b) = hosts(false);
    let enc = Encap { udp_dst_port: 4792, ..Default::default() };
    let bytes = craft::build(&enc, &a, &b, &full(Opcode(0x04), 4));
    let f = frame::decode(LinkType::ETHERNET, &bytes, &Options::default());
    assert!(f.ib.is_none() && f.udp.is_some());
    let f = frame::decode(
        LinkType::ETHERNET,
        &bytes,
        &Options { roce_ports: vec![4791, 4792], ..Options::default() },
    );
    assert!(f.ib.is_some());
    assert!(matches!(f.net, Net::Ipv4(_)));
}

#[test]
fn cm_mads_are_decoded() {
    use dissector::wire::mad::{CmMessage, CmRep};
    let mut c = craft::Conversation::new();
    let rep = CmMessage::Rep(CmRep {
        local_comm_id: 5,
        remote_comm_id: 6,
        local_qkey: 0,
        local_qpn: 0x12,
        starting_psn: Psn::new(5000),
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        srq: false,
    });
    c.cm(craft::Dir::BtoA, rep, 0x99);
    let f = frame::decode(LinkType::ETHERNET, &c.frames[0].data, &Options::default());
    assert_eq!(f.stop, None);
    let m = f.mad.unwrap();
    assert_eq!(m.header.mgmt_class, 7);
    assert_eq!(m.cm, Some(rep));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), link in 0usize..6) {
        let l = [LinkType::ETHERNET, LinkType::RAW, LinkType::LINUX_SLL, LinkType::LINUX_SLL2, LinkType::NULL, LinkType(147)][link];
        let f = frame::decode(l, &bytes, &Options::default());
        let _ = f.icrc_check(&bytes);
        if let Some(s) = f.stop { let _ = s.to_string(); }
    }
}

/// The tools' out-of-band TCP exchange shares the lab wire: it is summarised with
/// ports, flags (in Wireshark's order) and payload length, and a cut TCP header
/// falls back to the IP protocol name.
#[test]
fn tcp_frames_are_summarised_briefly() {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4([10, 0, 0, 2], [10, 0, 0, 1], 64)
        .tcp(42364, 18515, 1, 502)
        .psh()
        .ack(7);
    let mut data = Vec::new();
    b.write(&mut data, b"0000:000011:2bd9ef:0:::ffff:10.0.0.2\0").unwrap();
    let text = |d: &[u8]| {
        let fr = frame::decode(LinkType::ETHERNET, d, &Options::default());
        dissector::print::Summary { frame: &fr, data: d }.to_string()
    };
    assert_eq!(text(&data), "10.0.0.2 → 10.0.0.1  TCP 42364 → 18515 [PSH, ACK] Len=37");
    assert_eq!(text(&data[..14 + 20 + 10]), "10.0.0.2 → 10.0.0.1  IPv4 TCP (6)");
}
