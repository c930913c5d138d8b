//! The project's synthetic captures (`roce craft` writes them into `captures/`):
//! realistic RC/UC/UD conversations, NAKs, congestion, every encapsulation and a
//! set of malformed frames, built with the emit side ([`crate::craft`]); and the
//! large benchmark file.
//!
//! Every capture is deterministic (fixed timestamps, PSNs and payloads), so the
//! snapshot and tshark differential tests that read `captures/` are reproducible:
//! regenerate with `roce craft --out captures` and review the snapshot diff.
//!
//! Owns: what the synthetic captures hold. Imports: the emit side ([`crate::craft`]),
//! the capture writers, the wire vocabulary (opcodes, PSNs, syndromes, CM messages) and
//! the RoCE version of [`crate::frame`].
use std::io::{self, Write};

use crate::capture::{OutPacket, PcapWriter, PcapngWriter};
use crate::craft::{self, Conversation, Dir, Encap, Host, IcrcMode, Timed};
use crate::frame::RoceVersion;
use crate::wire::ext::{DethRepr, RethRepr};
use crate::wire::mad::{CmMessage, CmRep, CmReq};
use crate::wire::{BthRepr, Opcode, Psn, Syndrome, Transport as Tr};
use crate::LinkType;

/// One synthetic capture.
#[derive(Debug)]
pub struct Capture {
    pub name: &'static str,
    pub what: &'static str,
    pub link: LinkType,
    pub snaplen: u32,
    pub frames: Vec<Timed>,
}

fn cm_setup(c: &mut Conversation) {
    let req = CmMessage::Req(CmReq {
        local_comm_id: 0x1a2b_3c4d,
        service_id: 0x0000_0106_0000_4e20,
        local_qkey: 0,
        local_qpn: c.a.qpn,
        responder_resources: 16,
        initiator_depth: 16,
        transport_type: 0,
        // The REQ announces the PSN the active side will receive (B's sends)...
        starting_psn: c.b.psn,
        retry_count: 7,
        p_key: 0xffff,
        path_mtu: 3,
        rnr_retry_count: 7,
        srq: false,
        primary_local_gid: c.a.host.gid(),
        primary_remote_gid: c.b.host.gid(),
    });
    c.cm(Dir::AtoB, req, 0x1000);
    c.wait(150_000);
    let rep = CmMessage::Rep(CmRep {
        local_comm_id: 0x5e6f_7081,
        remote_comm_id: 0x1a2b_3c4d,
        local_qkey: 0,
        local_qpn: c.b.qpn,
        // ...and the REP the one the passive side will receive (A's sends).
        starting_psn: c.a.psn,
        responder_resources: 16,
        initiator_depth: 16,
        rnr_retry_count: 7,
        srq: false,
    });
    c.cm(Dir::BtoA, rep, 0x1000);
    c.wait(80_000);
    c.cm(
        Dir::AtoB,
        CmMessage::Rtu { local_comm_id: 0x1a2b_3c4d, remote_comm_id: 0x5e6f_7081 },
        0x1001,
    );
}

fn cm_teardown(c: &mut Conversation) {
    c.wait(500_000);
    c.cm(
        Dir::AtoB,
        CmMessage::Dreq {
            local_comm_id: 0x1a2b_3c4d,
            remote_comm_id: 0x5e6f_7081,
            remote_qpn: c.b.qpn,
        },
        0x1002,
    );
    c.cm(
        Dir::BtoA,
        CmMessage::Drep { local_comm_id: 0x5e6f_7081, remote_comm_id: 0x1a2b_3c4d },
        0x1002,
    );
}

/// RC SEND both ways, as a ping-pong does, set up and torn down by rdma_cm.
fn rc_send() -> Vec<Timed> {
    let mut c = Conversation::new();
    cm_setup(&mut c);
    for i in 0..3u32 {
        c.wait(20_000);
        let p = c.send(Dir::AtoB, 64, None);
        c.wait(8_000 + 1_000 * i as u64);
        c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
        let p = c.send(Dir::BtoA, 64, None);
        c.ack(Dir::AtoB, p, Syndrome::ACK, 1);
    }
    // A 2500-byte message at MTU 1024: First, Middle, Last; one ACK covers all three.
    let p = c.send(Dir::AtoB, 2500, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.send(Dir::AtoB, 16, Some(0x0000_beef));
    c.ack(Dir::BtoA, p, Syndrome(0x05), 1); // ACK with 5 credits
    cm_teardown(&mut c);
    c.frames
}

/// RDMA WRITE (Only, First/Middle/Last, with immediate), READ, atomics, SEND with Invalidate.
fn rc_rdma() -> Vec<Timed> {
    let mut c = Conversation::new();
    let va = 0x0000_7f3a_1c00_0000;
    let p = c.write(Dir::AtoB, va, 0x0001_2345, 64, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.write(Dir::AtoB, va, 0x0001_2345, 4000, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.write(Dir::AtoB, va + 4096, 0x0001_2345, 32, Some(0x1234_5678));
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.read_request(Dir::AtoB, va, 0x0001_2345, 2100);
    c.wait(12_000);
    c.read_response(Dir::BtoA, p, 2100);
    let p = c.read_request(Dir::AtoB, va, 0x0001_2345, 8);
    c.read_response(Dir::BtoA, p, 8);
    let p = c.atomic(Dir::AtoB, va, 0x0001_2345, 0x2a, Some(0));
    c.atomic_ack(Dir::BtoA, p, 0);
    let p = c.atomic(Dir::AtoB, va + 8, 0x0001_2345, 1, None);
    c.atomic_ack(Dir::BtoA, p, 41);
    let psn = c.a.psn;
    c.a.psn = psn.add(1);
    c.push(
        Dir::AtoB,
        craft::Transport {
            bth: BthRepr {
                opcode: Opcode(0x17),
                psn,
                ack_req: true,
                solicited_event: true,
                ..Default::default()
            },
            ieth: 0x0001_2345,
            payload: b"bye".to_vec(),
            ..Default::default()
        },
    );
    c.ack(Dir::BtoA, psn, Syndrome::ACK, 1);
    c.frames
}

/// Every way a responder says no: NAK Remote Access Error, Invalid Request, Remote
/// Operational Error, RNR NAKs until a receive is posted, and a lost packet answered
/// by a PSN Sequence Error NAK and a go-back-N resend.
fn rc_naks() -> Vec<Timed> {
    let mut c = Conversation::new();
    let p = c.write(Dir::AtoB, 0x1000, 0x0000_0bad, 64, None);
    c.wait(9_000);
    c.ack(Dir::BtoA, p, Syndrome::nak(2), 0);
    // A new connection would be needed after an error; keep going on fresh PSNs.
    let p = c.write(Dir::AtoB, 0x1000, 0x0000_1111, 64, None);
    c.ack(Dir::BtoA, p, Syndrome::nak(1), 0);
    let p = c.send(Dir::AtoB, 32, None);
    c.ack(Dir::BtoA, p, Syndrome::nak(3), 0);
    // SEND with no receive posted: RNR NAK (timer 12 = 0.64 ms), wait, resend.
    let p = c.send(Dir::AtoB, 32, None);
    for _ in 0..2 {
        c.ack(Dir::BtoA, p, Syndrome::rnr_nak(12), 0);
        c.wait(640_000);
        c.rewind(Dir::AtoB, p);
        c.send(Dir::AtoB, 32, None);
    }
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    // A 4-packet WRITE whose second packet was lost before the capture point.
    c.mtu = 256;
    let last = c.write_losing(Dir::AtoB, 0x2000, 0x0000_1111, 1024, 1);
    c.ack(Dir::BtoA, last, Syndrome::ACK, 1);
    c.frames
}

/// UC WRITE and SEND (no ACKs), UD SENDs with and without immediate.
fn uc_ud() -> Vec<Timed> {
    let mut c = Conversation::new();
    c.transport = Tr::Uc;
    c.write(Dir::AtoB, 0x3000, 0x77, 1500, None);
    c.send(Dir::AtoB, 100, None);
    c.send(Dir::BtoA, 100, Some(9));
    let mut u = Conversation::between(Host::v4(1), 0x0000_00c1, Host::v4(2), 0x0000_00c2);
    u.transport = Tr::Ud;
    u.now_ns = c.now_ns;
    u.ud_send(Dir::AtoB, 256, None, 0x1111_1111);
    u.ud_send(Dir::BtoA, 256, Some(0xabcd), 0x1111_1111);
    u.ud_send(Dir::AtoB, 1, None, 0x1111_1111);
    let mut f = c.frames;
    f.extend(u.frames);
    f
}

/// ECN: CE-marked WRITEs, the CNPs the receiver sends back, and DSCP 26 traffic.
fn congestion() -> Vec<Timed> {
    let mut c = Conversation::new();
    c.encap.dscp = 26;
    c.encap.ecn = 2; // ECT(0)
    for i in 0..6 {
        if i == 2 || i == 3 {
            c.encap.ecn = 3; // a switch marked these
        }
        let p = c.write(Dir::AtoB, 0x4000, 0x99, 512, None);
        c.encap.ecn = 2;
        if i == 2 || i == 3 {
            c.cnp(Dir::BtoA);
        }
        c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    }
    c.frames
}

fn simple_exchange(c: &mut Conversation) {
    let p = c.send(Dir::AtoB, 40, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.write(Dir::BtoA, 0x5000, 0x42, 100, None);
    c.ack(Dir::AtoB, p, Syndrome::ACK, 1);
}

fn with_encap(encap: Encap, a: Host, b: Host) -> Vec<Timed> {
    let mut c = Conversation::between(a, 0x11, b, 0x12);
    c.encap = encap;
    simple_exchange(&mut c);
    c.frames
}

/// Frames that stop early or break rules: decoding must go on and say where.
fn malformed() -> Vec<Timed> {
    let mut c = Conversation::new();
    let a = c.a.host;
    let b = c.b.host;
    let base = |op: u8| craft::Transport {
        bth: BthRepr {
            opcode: Opcode(op),
            dest_qp: 0x12,
            psn: Psn::new(7),
            p_key: 0xffff,
            ..Default::default()
        },
        payload: vec![0xee; 12],
        ..Default::default()
    };
    let mut frames = Vec::new();
    let mut push = |data: Vec<u8>| {
        c.now_ns += 1_000;
        frames.push(Timed { ts_ns: c.now_ns, data });
    };
    let enc = Encap::default();
    // Bad ICRC.
    push(craft::build(&enc, &a, &b, &craft::Transport { icrc: IcrcMode::Corrupt, ..base(0x04) }));
    // Reserved, CNP-range and vendor opcodes.
    for op in [0x18, 0x80, 0xC5] {
        push(craft::build(&enc, &a, &b, &base(op)));
    }
    // Opcodes beyond tshark 4.0: XRC SEND Only, RD SEND Only, FLUSH, ATOMIC WRITE.
    push(craft::build(&enc, &a, &b, &craft::Transport { xrceth: 0x44, ..base(0xA4) }));
    push(craft::build(
        &enc,
        &a,
        &b,
        &craft::Transport { rdeth: 3, deth: DethRepr { q_key: 1, src_qp: 2 }, ..base(0x44) },
    ));
    push(craft::build(
        &enc,
        &a,
        &b,
        &craft::Transport {
            feth: 0x11,
            reth: RethRepr { va: 0x1000, r_key: 5, dma_len: 64 },
            payload: vec![],
            ..base(0x1C)
        },
    ));
    push(craft::build(
        &enc,
        &a,
        &b,
        &craft::Transport {
            reth: RethRepr { va: 0x1000, r_key: 5, dma_len: 8 },
            payload: vec![1; 8],
            ..base(0x1D)
        },
    ));
    // Truncated RETH: the frame ends 6 bytes into it (UDP length says more).
    let w = craft::build(
        &enc,
        &a,
        &b,
        &craft::Transport { reth: RethRepr { va: 1, r_key: 2, dma_len: 3 }, ..base(0x0A) },
    );
    push(w[..14 + 20 + 8 + 12 + 6].to_vec());
    // Pad count larger than the payload.
    let mut p = craft::build(
        &enc,
        &a,
        &b,
        &craft::Transport { payload: vec![], pad: Some(0), ..base(0x04) },
    );
    p[14 + 20 + 8 + 1] |= 0x30;
    push(p);
    // Bad IP version, UDP length below 8, garbage after an Ethernet header.
    let mut v = craft::build(&enc, &a, &b, &base(0x04));
    v[14] = 0x55;
    push(v);
    let mut u = craft::build(&enc, &a, &b, &base(0x04));
    u[14 + 20 + 4] = 0;
    u[14 + 20 + 5] = 4;
    push(u);
    let mut g = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    g.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0x01]);
    push(g);
    // A 10-byte runt.
    push(vec![0xff; 10]);
    // Non-RoCE neighbours: ARP, LLDP, TCP, UDP to another port, an IPv4 fragment.
    let mut arp = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06];
    arp.extend_from_slice(&[
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    push(arp);
    let mut lldp = vec![0x01, 0x80, 0xc2, 0, 0, 0x0e, 0x02, 0, 0, 0, 0, 1, 0x88, 0xcc];
    lldp.extend_from_slice(&[0x02, 0x07, 0x04, 0x02, 0, 0, 0, 0, 1, 0, 0]);
    push(lldp);
    let mut tcp = craft::build(&enc, &a, &b, &base(0x04));
    tcp[14 + 9] = 6;
    push(tcp);
    push(craft::build(&Encap { udp_dst_port: 53, ..Encap::default() }, &a, &b, &base(0x04)));
    let mut frag = craft::build(&enc, &a, &b, &base(0x04));
    frag[14 + 6] = 0x20; // more fragments
    push(frag);
    frames
}

/// Every synthetic capture, in the order `roce craft` writes them.
pub fn all() -> Vec<Capture> {
    let eth = LinkType::ETHERNET;
    let cap = |name, what, link, frames| Capture { name, what, link, snaplen: 65535, frames };
    vec![
        cap("rc_send_cm.pcapng", "RC SEND both ways, rdma_cm REQ/REP/RTU and DREQ/DREP", eth, rc_send()),
        cap("rc_rdma.pcap", "RC WRITE, READ, atomics, SEND with Invalidate", eth, rc_rdma()),
        cap("rc_naks.pcap", "NAKs (0x61, 0x62, 0x63), RNR NAKs, lost packet with PSN error NAK and go-back-N", eth, rc_naks()),
        cap("uc_ud.pcap", "UC WRITE/SEND and UD SENDs", eth, uc_ud()),
        cap("dc.pcap", "mlx5 Dynamically Connected: connect, SENDs, WRITEs, a READ, an atomic and their ACKs", eth, craft::dc_exchange()),
        cap("congestion.pcap", "ECN CE marks and CNPs", eth, congestion()),
        cap(
            "vlan.pcap",
            "802.1Q VLAN 100",
            eth,
            with_encap(Encap { vlans: vec![100], ..Default::default() }, Host::v4(1), Host::v4(2)),
        ),
        cap(
            "qinq.pcap",
            "QinQ: 802.1ad 10 over 802.1Q 20",
            eth,
            with_encap(Encap { vlans: vec![10, 20], ..Default::default() }, Host::v4(1), Host::v4(2)),
        ),
        cap("ipv6.pcap", "RoCEv2 over IPv6", eth, with_encap(Encap::default(), Host::v6(1), Host::v6(2))),
        cap(
            "rocev1.pcap",
            "RoCEv1: GRH over ethertype 0x8915",
            eth,
            with_encap(Encap { version: RoceVersion::V1, ..Default::default() }, Host::v6(1), Host::v6(2)),
        ),
        cap(
            "sll.pcap",
            "Linux cooked capture v1 (tcpdump -i any)",
            LinkType::LINUX_SLL,
            with_encap(Encap { link: LinkType::LINUX_SLL, ..Default::default() }, Host::v4(1), Host::v4(2)),
        ),
        cap(
            "sll2.pcap",
            "Linux cooked capture v2",
            LinkType::LINUX_SLL2,
            with_encap(Encap { link: LinkType::LINUX_SLL2, ..Default::default() }, Host::v4(1), Host::v4(2)),
        ),
        cap(
            "raw_ip.pcap",
            "Raw IP link type",
            LinkType::RAW,
            with_encap(Encap { link: LinkType::RAW, ..Default::default() }, Host::v4(1), Host::v4(2)),
        ),
        Capture {
            name: "snaplen64.pcap",
            what: "RC WRITE/READ captured with a 64-byte snaplen",
            link: eth,
            snaplen: 64,
            frames: rc_rdma(),
        },
        cap("malformed.pcap", "bad ICRC, unknown/vendor/XRC/RD/FLUSH/ATOMIC WRITE opcodes, truncated and malformed headers, non-RoCE frames", eth, malformed()),
    ]
}

impl Capture {
    /// The capture as a file: pcapng when its name says so, else pcap; frames cut
    /// to the snap length.
    pub fn write(&self, w: impl Write) -> io::Result<()> {
        if self.name.ends_with(".pcapng") {
            let mut w = PcapngWriter::new(w, "roce craft")?;
            let id = w.add_interface(self.link, self.snaplen, Some("crafted"))?;
            for t in &self.frames {
                let n = t.data.len().min(self.snaplen as usize);
                w.write_packet(&OutPacket {
                    interface: id,
                    ts_ns: t.ts_ns,
                    data: &t.data[..n],
                    orig_len: t.data.len() as u32,
                    direction: None,
                    comment: None,
                })?;
            }
            w.flush()
        } else {
            let mut w = PcapWriter::new(w, self.link, self.snaplen)?;
            for t in &self.frames {
                let n = t.data.len().min(self.snaplen as usize);
                w.write_packet(t.ts_ns, &t.data[..n], t.data.len() as u32)?;
            }
            w.flush()
        }
    }
}

/// A large RoCEv2 pcap for benchmarks: RDMA WRITE Only (64-byte payload) + ACK
/// pairs over 8 QP pairs, `packets` frames in all.
pub fn write_bench(w: impl Write, packets: u64) -> io::Result<()> {
    let mut w = PcapWriter::new(w, LinkType::ETHERNET, 65535)?;
    let mut convs: Vec<Conversation> = (0..8u32)
        .map(|i| Conversation::between(Host::v4(1), 0x100 + i, Host::v4(2), 0x200 + i))
        .collect();
    let mut n = 0u64;
    let mut ts = 1_700_000_000_000_000_000u64;
    'outer: loop {
        for c in convs.iter_mut() {
            c.frames.clear();
            let p = c.write(Dir::AtoB, 0x7f00_0000_0000, 0x1234, 64, None);
            c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
            for t in &c.frames {
                ts += 500;
                w.write_packet(ts, &t.data, t.data.len() as u32)?;
                n += 1;
                if n >= packets {
                    break 'outer;
                }
            }
        }
    }
    w.flush()
}
