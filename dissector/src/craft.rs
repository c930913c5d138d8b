//! Building RoCE frames from values: the emit side of [`crate::wire`], used for
//! synthetic captures, benchmarks, tests and (later) crafted-packet probes.
//!
//! [`build`] lays out link, VLAN tags, IP/GRH, UDP, BTH, the extension headers the
//! opcode table names, payload, pad and ICRC, computing every length and checksum.
//! [`Conversation`] keeps per-QP state (PSN, MSN, time) so a whole RC/UC/UD exchange
//! can be written as a list of operations.
//!
//! Owns: frame layout on the emit side, and per-QP conversation state. Imports: the wire
//! views and reprs ([`crate::wire`]), the RoCE version of [`crate::frame`], the link type.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::frame::RoceVersion;
use crate::wire::ethernet::{self, ethertype, Mac, VlanTag};
use crate::wire::ext::{
    AtomicAckEthPacket, AtomicEthPacket, AtomicEthRepr, DethPacket, DethRepr, RethPacket, RethRepr,
    Word32Packet,
};
use crate::wire::mad::{self, CmMessage, MadRepr};
use crate::wire::sll::SllRepr;
use crate::wire::{
    aeth, bth, icrc, ipv4, ipv6, udp, AethRepr, BthRepr, Headers, Opcode, Psn, Syndrome,
};
use crate::LinkType;

/// How the frame is wrapped below the BTH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encap {
    pub link: LinkType,
    /// VLAN IDs, outer first (two = QinQ with an 802.1ad outer tag).
    pub vlans: Vec<u16>,
    pub version: RoceVersion,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    pub ip_ident: u16,
    pub udp_src_port: u16,
    pub udp_dst_port: u16,
}

impl Default for Encap {
    fn default() -> Self {
        Encap {
            link: LinkType::ETHERNET,
            vlans: Vec::new(),
            version: RoceVersion::V2,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            ip_ident: 0,
            udp_src_port: 0xC000,
            udp_dst_port: udp::ROCE_V2_PORT,
        }
    }
}

/// One end of the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub mac: Mac,
    pub ip: IpAddr,
}

impl Host {
    /// Synthetic host number `last`: 10.0.0.`last`, MAC 02:00:00:00:00:`last`
    /// (locally administered), as the project's crafted captures have them.
    pub fn v4(last: u8) -> Host {
        Host { mac: mac(last), ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)) }
    }

    /// [`Host::v4`] over IPv6: fd00::`last`.
    pub fn v6(last: u8) -> Host {
        Host {
            mac: mac(last),
            ip: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last.into())),
        }
    }

    /// The host's GID: its IPv6 address, or the IPv4-mapped form (`::ffff:a.b.c.d`).
    pub fn gid(&self) -> Ipv6Addr {
        match self.ip {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        }
    }
}

/// What the ICRC field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IcrcMode {
    #[default]
    Correct,
    /// The correct value with one bit flipped.
    Corrupt,
}

/// The transport packet: BTH, the extension headers the opcode needs (others are
/// ignored), payload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transport {
    pub bth: BthRepr,
    pub xrceth: u32,
    /// `Some`: an mlx5 DC packet (RD-range opcode, DC layout as
    /// [`Opcode::dc_info`] gives it) with these 8 DCETH bytes, big-endian.
    pub dceth: Option<u64>,
    /// The DCCETH of a DC connect (opcode 0x55, SE clear).
    pub dcceth: [u8; 16],
    pub rdeth: u32,
    pub deth: DethRepr,
    pub feth: u32,
    pub reth: RethRepr,
    pub atomiceth: AtomicEthRepr,
    pub aeth: AethRepr,
    pub atomicacketh: u64,
    pub immdt: u32,
    pub ieth: u32,
    pub payload: Vec<u8>,
    /// `None`: pad to a multiple of 4 and set PadCnt accordingly.
    pub pad: Option<u8>,
    pub icrc: IcrcMode,
}

/// One RC packet from `src` to `dst`'s QP 0x11 (P_Key 0xffff): opcode `op`
/// at `psn`, with `payload` and what `enc` says of the headers below it: the
/// frame tests build most.
pub fn rc_packet(
    enc: &Encap,
    src: &Host,
    dst: &Host,
    op: Opcode,
    psn: u32,
    payload: &[u8],
) -> Vec<u8> {
    let bth = BthRepr {
        opcode: op,
        p_key: 0xffff,
        dest_qp: 0x11,
        psn: Psn::new(psn),
        ..Default::default()
    };
    build(enc, src, dst, &Transport { bth, payload: payload.to_vec(), ..Default::default() })
}

/// Builds one frame.
pub fn build(enc: &Encap, src: &Host, dst: &Host, t: &Transport) -> Vec<u8> {
    // Transport packet first: BTH .. payload, pad (ICRC appended later).
    let ib = transport_packet(t);
    let ib_len = ib.len() + 4;
    let (ethertype_net, net, l4, icrc_kind) = network(enc, src, dst, ib_len);
    let mut crc = icrc::compute(icrc_kind, &net, &l4, &ib);
    if t.icrc == IcrcMode::Corrupt {
        crc ^= 1;
    }
    // Link layer, then the rest in wire order.
    let mut out = Vec::with_capacity(64 + net.len() + l4.len() + ib_len);
    link(enc, src, dst, ethertype_net, &mut out);
    out.extend_from_slice(&net);
    out.extend_from_slice(&l4);
    out.extend_from_slice(&ib);
    out.extend_from_slice(&icrc::to_wire(crc));
    out
}

/// BTH, the extension headers the opcode table names (in wire order), payload and pad:
/// the transport packet without its ICRC.
fn transport_packet(t: &Transport) -> Vec<u8> {
    let info = match t.dceth {
        Some(_) => t.bth.opcode.dc_info(t.bth.solicited_event),
        None => t.bth.opcode.info(),
    };
    let headers = info.map_or(Headers::PAYLOAD, |i| i.headers);
    let pad = t.pad.unwrap_or(((4 - t.payload.len() % 4) % 4) as u8);
    let mut ib = vec![0u8; bth::HEADER_LEN + headers.len()];
    let mut b = t.bth;
    b.pad_count = pad & 3;
    b.emit(&mut bth::Packet::new_unchecked(&mut ib[..]));
    let mut off = bth::HEADER_LEN;
    for (h, len) in Headers::ORDER {
        if !headers.contains(h) {
            continue;
        }
        let s = &mut ib[off..off + len];
        match h {
            Headers::XRCETH => Word32Packet::new_unchecked(s).set_value(t.xrceth & 0xFF_FFFF),
            Headers::DCETH => s.copy_from_slice(&t.dceth.unwrap_or(0).to_be_bytes()),
            Headers::DCCETH => s.copy_from_slice(&t.dcceth),
            Headers::RDETH => Word32Packet::new_unchecked(s).set_value(t.rdeth & 0xFF_FFFF),
            Headers::DETH => t.deth.emit(&mut DethPacket::new_unchecked(s)),
            Headers::FETH => Word32Packet::new_unchecked(s).set_value(t.feth),
            Headers::RETH => t.reth.emit(&mut RethPacket::new_unchecked(s)),
            Headers::ATOMICETH => t.atomiceth.emit(&mut AtomicEthPacket::new_unchecked(s)),
            Headers::AETH => t.aeth.emit(&mut aeth::Packet::new_unchecked(s)),
            Headers::ATOMICACKETH => {
                AtomicAckEthPacket::new_unchecked(s).set_orig_remote_data(t.atomicacketh)
            }
            Headers::IMMDT => Word32Packet::new_unchecked(s).set_value(t.immdt),
            Headers::IETH => Word32Packet::new_unchecked(s).set_value(t.ieth),
            _ => {} // CNP: 16 reserved zero bytes
        }
        off += len;
    }
    ib.extend_from_slice(&t.payload);
    ib.extend(std::iter::repeat_n(0, pad as usize));
    ib
}

/// The network header (and UDP for RoCEv2) for a transport packet of `ib_len` bytes
/// with its ICRC: the ethertype that announces it, the header, the UDP header (empty
/// for RoCEv1), and which masking the ICRC uses.
fn network(
    enc: &Encap,
    src: &Host,
    dst: &Host,
    ib_len: usize,
) -> (u16, Vec<u8>, Vec<u8>, icrc::Net) {
    match enc.version {
        RoceVersion::V2 => {
            let udp_len = (udp::HEADER_LEN + ib_len) as u16;
            let mut u = [0u8; udp::HEADER_LEN];
            udp::Repr {
                src_port: enc.udp_src_port,
                dst_port: enc.udp_dst_port,
                length: udp_len,
                checksum: 0,
            }
            .emit(&mut udp::Packet::new_unchecked(&mut u[..]));
            match (src.ip, dst.ip) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    let mut ip = vec![0u8; ipv4::HEADER_LEN];
                    ipv4::Repr {
                        src: s,
                        dst: d,
                        dscp: enc.dscp,
                        ecn: enc.ecn,
                        total_len: (ipv4::HEADER_LEN + udp_len as usize) as u16,
                        ident: enc.ip_ident,
                        dont_frag: true,
                        more_frags: false,
                        frag_offset: 0,
                        ttl: enc.ttl,
                        protocol: ipv4::PROTO_UDP,
                        checksum: 0,
                        header_len: 20,
                    }
                    .emit(&mut ipv4::Packet::new_unchecked(&mut ip[..]));
                    (ethertype::IPV4, ip, u.to_vec(), icrc::Net::Ipv4)
                }
                _ => {
                    let mut ip = vec![0u8; ipv6::HEADER_LEN];
                    ipv6::Repr {
                        src: Host::gid(src),
                        dst: Host::gid(dst),
                        traffic_class: enc.dscp << 2 | (enc.ecn & 3),
                        flow_label: 0,
                        payload_len: udp_len,
                        next_header: ipv4::PROTO_UDP,
                        hop_limit: enc.ttl,
                    }
                    .emit(&mut ip);
                    (ethertype::IPV6, ip, u.to_vec(), icrc::Net::Ipv6)
                }
            }
        }
        RoceVersion::V1 => {
            let mut grh = vec![0u8; ipv6::HEADER_LEN];
            ipv6::Repr {
                src: src.gid(),
                dst: dst.gid(),
                traffic_class: enc.dscp << 2 | (enc.ecn & 3),
                flow_label: 0,
                payload_len: ib_len as u16,
                next_header: ipv6::NEXT_HEADER_IBA,
                hop_limit: enc.ttl,
            }
            .emit(&mut grh);
            (ethertype::ROCE_V1, grh, Vec::new(), icrc::Net::Grh)
        }
    }
}

/// The link-layer header (and VLAN tags) announcing `ethertype_net`, appended to `out`.
fn link(enc: &Encap, src: &Host, dst: &Host, ethertype_net: u16, out: &mut Vec<u8>) {
    match enc.link {
        LinkType::LINUX_SLL | LinkType::LINUX_SLL2 => {
            let mut addr = [0u8; 8];
            addr[..6].copy_from_slice(&src.mac.0);
            let s = SllRepr {
                version: if enc.link == LinkType::LINUX_SLL { 1 } else { 2 },
                packet_type: 4,
                hatype: 1,
                halen: 6,
                addr,
                protocol: ethertype_net,
                ifindex: (enc.link == LinkType::LINUX_SLL2).then_some(2),
            };
            let mut h = vec![0u8; s.header_len()];
            s.emit(&mut h);
            out.extend_from_slice(&h);
        }
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => {}
        _ => {
            let mut e = [0u8; ethernet::HEADER_LEN];
            let mut f = ethernet::Frame::new_unchecked(&mut e[..]);
            f.set_dst(dst.mac);
            f.set_src(src.mac);
            let first = match enc.vlans.len() {
                0 => ethertype_net,
                1 => ethertype::VLAN,
                _ => ethertype::QINQ,
            };
            f.set_ethertype(first);
            out.extend_from_slice(&e);
            for (i, &id) in enc.vlans.iter().enumerate().take(2) {
                let inner =
                    if i + 1 < enc.vlans.len().min(2) { ethertype::VLAN } else { ethertype_net };
                let mut tag = [0u8; 4];
                VlanTag { tpid: 0, pcp: 3, dei: false, id, inner_type: inner }.emit(&mut tag);
                out.extend_from_slice(&tag);
            }
        }
    }
}

/// A frame and its capture timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed {
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// One side of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Side {
    pub host: Host,
    pub qpn: u32,
    /// Next PSN this side sends requests with.
    pub psn: Psn,
    /// Responder state for requests coming in: expected PSN and MSN.
    pub epsn: Psn,
    pub msn: u32,
}

/// Which way a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AtoB,
    BtoA,
}

/// A synthetic exchange between two QPs, written as operations.
///
/// Requests advance the sender's PSN by the number of packets; responses carry the
/// PSN of the request they answer, as an RC responder does.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub a: Side,
    pub b: Side,
    pub encap: Encap,
    pub transport: crate::wire::Transport,
    pub mtu: usize,
    pub now_ns: u64,
    /// Time between consecutive packets.
    pub gap_ns: u64,
    /// With `transport` [`Dc`](crate::wire::Transport::Dc): the DCETH every packet
    /// carries (unless the packet sets its own).
    pub dceth: u64,
    pub frames: Vec<Timed>,
}

fn mac(last: u8) -> Mac {
    Mac([0x02, 0, 0, 0, 0, last])
}

impl Conversation {
    /// Two hosts 10.0.0.1 (QP 0x11) and 10.0.0.2 (QP 0x12) over RoCEv2/IPv4, RC, MTU 1024.
    pub fn new() -> Conversation {
        Conversation::between(Host::v4(1), 0x11, Host::v4(2), 0x12)
    }

    pub fn between(a: Host, a_qpn: u32, b: Host, b_qpn: u32) -> Conversation {
        let side =
            |host, qpn, psn| Side { host, qpn, psn: Psn::new(psn), epsn: Psn::new(0), msn: 0 };
        let mut c = Conversation {
            a: side(a, a_qpn, 100),
            b: side(b, b_qpn, 5000),
            encap: Encap::default(),
            transport: crate::wire::Transport::Rc,
            mtu: 1024,
            now_ns: 1_700_000_000_000_000_000,
            gap_ns: 2_000,
            dceth: 0x0000_0000_dc00_0001,
            frames: Vec::new(),
        };
        c.a.epsn = c.b.psn;
        c.b.epsn = c.a.psn;
        c
    }

    fn sides(&mut self, d: Dir) -> (&mut Side, &mut Side) {
        match d {
            Dir::AtoB => (&mut self.a, &mut self.b),
            Dir::BtoA => (&mut self.b, &mut self.a),
        }
    }

    fn opcode(&self, low: u8) -> Opcode {
        let base = match self.transport {
            crate::wire::Transport::Uc => 0x20,
            crate::wire::Transport::Ud => 0x60,
            crate::wire::Transport::Rd | crate::wire::Transport::Dc => 0x40,
            crate::wire::Transport::Xrc => 0xA0,
            _ => 0x00,
        };
        Opcode(base | low)
    }

    /// Appends a frame sent in direction `d`, built from `t` (whose BTH DestQP is
    /// filled in with the peer's QPN unless already set).
    pub fn push(&mut self, d: Dir, mut t: Transport) -> &mut Timed {
        let (from, to) = match d {
            Dir::AtoB => (self.a, self.b),
            Dir::BtoA => (self.b, self.a),
        };
        if t.bth.dest_qp == 0 {
            t.bth.dest_qp = to.qpn;
        }
        if t.bth.p_key == 0 {
            t.bth.p_key = 0xFFFF;
        }
        if self.transport == crate::wire::Transport::Dc {
            t.dceth = t.dceth.or(Some(self.dceth));
            // The DETH names the sending QP (the DCI); QP 0 or 1 would make it a MAD.
            if t.deth.src_qp == 0 {
                t.deth.src_qp = from.qpn;
            }
        }
        let mut enc = self.encap.clone();
        // rxe derives the UDP source port from the QP numbers: keep one per direction.
        enc.udp_src_port = 0xC000 | ((from.qpn ^ to.qpn) as u16 & 0x3FFF);
        let data = build(&enc, &from.host, &to.host, &t);
        self.encap.ip_ident = self.encap.ip_ident.wrapping_add(1);
        self.now_ns += self.gap_ns;
        self.frames.push(Timed { ts_ns: self.now_ns, data });
        self.frames.last_mut().expect("just pushed")
    }

    /// Lets `ns` nanoseconds pass.
    pub fn wait(&mut self, ns: u64) {
        self.now_ns += ns;
    }

    fn request(&mut self, d: Dir, low: u8, ack_req: bool, f: impl FnOnce(&mut Transport)) -> Psn {
        let op = self.opcode(low);
        let (from, _) = self.sides(d);
        let psn = from.psn;
        from.psn = psn.add(1);
        let mut t = Transport {
            bth: BthRepr { opcode: op, psn, ack_req, ..Default::default() },
            ..Default::default()
        };
        f(&mut t);
        self.push(d, t);
        psn
    }

    /// Splits `len` bytes into MTU-sized packets: (first, middle…, last) opcodes.
    fn segments(&self, len: usize) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        let mut at = 0;
        loop {
            let n = (len - at).min(self.mtu);
            v.push((at, n));
            at += n;
            if at >= len {
                break;
            }
        }
        v
    }

    fn payload(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    /// A SEND of `len` bytes (First/Middle/Last or Only), optionally with immediate
    /// data. Returns the PSN of the last packet.
    pub fn send(&mut self, d: Dir, len: usize, imm: Option<u32>) -> Psn {
        let data = Self::payload(len, 0x41);
        let segs = self.segments(len);
        let n = segs.len();
        let mut last = Psn::new(0);
        for (i, (at, l)) in segs.into_iter().enumerate() {
            let low = match (n, i, imm) {
                (1, _, None) => 0x04,
                (1, _, Some(_)) => 0x05,
                (_, 0, _) => 0x00,
                (_, i, None) if i + 1 == n => 0x02,
                (_, i, Some(_)) if i + 1 == n => 0x03,
                _ => 0x01,
            };
            let reliable = self.transport != crate::wire::Transport::Uc
                && self.transport != crate::wire::Transport::Ud;
            let pl = data[at..at + l].to_vec();
            last = self.request(d, low, reliable && i + 1 == n, |t| {
                t.payload = pl;
                t.immdt = imm.unwrap_or(0);
                t.deth = DethRepr { q_key: 0x1111_1111, src_qp: 0 };
            });
        }
        last
    }

    /// A UD SEND Only carrying a datagram from QP `src_qp`.
    pub fn ud_send(&mut self, d: Dir, len: usize, imm: Option<u32>, q_key: u32) -> Psn {
        let src_qp = match d {
            Dir::AtoB => self.a.qpn,
            Dir::BtoA => self.b.qpn,
        };
        let pl = Self::payload(len, 0x61);
        self.request(d, if imm.is_some() { 0x05 } else { 0x04 }, false, |t| {
            t.bth.opcode = Opcode(t.bth.opcode.0 & 0x1F | 0x60);
            t.payload = pl;
            t.immdt = imm.unwrap_or(0);
            t.deth = DethRepr { q_key, src_qp };
        })
    }

    /// An RDMA WRITE of `len` bytes to `va`/`rkey`. Returns the last PSN.
    pub fn write(&mut self, d: Dir, va: u64, rkey: u32, len: usize, imm: Option<u32>) -> Psn {
        let data = Self::payload(len, 0x30);
        let segs = self.segments(len);
        let n = segs.len();
        let mut last = Psn::new(0);
        let reliable = self.transport != crate::wire::Transport::Uc;
        for (i, (at, l)) in segs.into_iter().enumerate() {
            let low = match (n, i, imm) {
                (1, _, None) => 0x0A,
                (1, _, Some(_)) => 0x0B,
                (_, 0, _) => 0x06,
                (_, i, None) if i + 1 == n => 0x08,
                (_, i, Some(_)) if i + 1 == n => 0x09,
                _ => 0x07,
            };
            let pl = data[at..at + l].to_vec();
            last = self.request(d, low, reliable && i + 1 == n, |t| {
                t.payload = pl;
                t.reth = RethRepr { va, r_key: rkey, dma_len: len as u32 };
                t.immdt = imm.unwrap_or(0);
            });
        }
        last
    }

    /// An RDMA WRITE of `len` bytes whose packet `lost` (0-based) never reaches the
    /// capture point: the responder NAKs the PSN it expected (PSN Sequence Error)
    /// and the requester goes back to it and resends the rest, 3 µs apart
    /// (go-back-N). Returns the last PSN (the caller acknowledges it).
    pub fn write_losing(&mut self, d: Dir, va: u64, rkey: u32, len: usize, lost: usize) -> Psn {
        let first = self.sides(d).0.psn;
        let last = self.write(d, va, rkey, len, None);
        let k = self.segments(len).len();
        let lost = lost.min(k - 1);
        let n = self.frames.len();
        let sent: Vec<Vec<u8>> = self.frames[n - k..].iter().map(|f| f.data.clone()).collect();
        self.frames.remove(n - k + lost);
        let back = match d {
            Dir::AtoB => Dir::BtoA,
            Dir::BtoA => Dir::AtoB,
        };
        self.ack(back, first.add(lost as u32), Syndrome::nak(0), 0);
        for data in &sent[lost..] {
            self.wait(3_000);
            self.frames.push(Timed { ts_ns: self.now_ns, data: data.clone() });
        }
        last
    }

    /// An RDMA READ request for `len` bytes; the PSN advances by the number of
    /// response packets. Returns the request's PSN.
    pub fn read_request(&mut self, d: Dir, va: u64, rkey: u32, len: usize) -> Psn {
        let packets = self.segments(len).len() as u32;
        let psn = self
            .request(d, 0x0C, true, |t| t.reth = RethRepr { va, r_key: rkey, dma_len: len as u32 });
        let (from, _) = self.sides(d);
        from.psn = psn.add(packets);
        psn
    }

    /// The responder's READ responses to a request at `psn` for `len` bytes.
    pub fn read_response(&mut self, d: Dir, psn: Psn, len: usize) {
        let data = Self::payload(len, 0x72);
        let segs = self.segments(len);
        let n = segs.len();
        let (responder, _) = self.sides(d);
        responder.msn = (responder.msn + 1) & 0xFF_FFFF;
        let msn = responder.msn;
        for (i, (at, l)) in segs.into_iter().enumerate() {
            let low = match (n, i) {
                (1, _) => 0x10,
                (_, 0) => 0x0D,
                (_, i) if i + 1 == n => 0x0F,
                _ => 0x0E,
            };
            let t = Transport {
                bth: BthRepr {
                    opcode: self.opcode(low),
                    psn: psn.add(i as u32),
                    ..Default::default()
                },
                aeth: AethRepr { syndrome: Syndrome::ACK, msn },
                payload: data[at..at + l].to_vec(),
                ..Default::default()
            };
            self.push(d, t);
        }
    }

    /// An atomic request (CmpSwap when `compare` is given, else FetchAdd).
    pub fn atomic(
        &mut self,
        d: Dir,
        va: u64,
        rkey: u32,
        swap_add: u64,
        compare: Option<u64>,
    ) -> Psn {
        let low = if compare.is_some() { 0x13 } else { 0x14 };
        self.request(d, low, true, |t| {
            t.atomiceth = AtomicEthRepr { va, r_key: rkey, swap_add, compare: compare.unwrap_or(0) }
        })
    }

    /// The ATOMIC Acknowledge carrying the original remote value.
    pub fn atomic_ack(&mut self, d: Dir, psn: Psn, original: u64) {
        let (responder, _) = self.sides(d);
        responder.msn = (responder.msn + 1) & 0xFF_FFFF;
        let msn = responder.msn;
        let t = Transport {
            bth: BthRepr { opcode: self.opcode(0x12), psn, ..Default::default() },
            aeth: AethRepr { syndrome: Syndrome::ACK, msn },
            atomicacketh: original,
            ..Default::default()
        };
        self.push(d, t);
    }

    /// An Acknowledge for `psn` with `syndrome`; a positive ACK completes `messages`
    /// more messages at the responder (MSN).
    pub fn ack(&mut self, d: Dir, psn: Psn, syndrome: Syndrome, messages: u32) {
        let (responder, _) = self.sides(d);
        responder.msn = (responder.msn + messages) & 0xFF_FFFF;
        let msn = responder.msn;
        let t = Transport {
            bth: BthRepr { opcode: self.opcode(0x11), psn, ..Default::default() },
            aeth: AethRepr { syndrome, msn },
            ..Default::default()
        };
        self.push(d, t);
    }

    /// A DC connect (opcode 0x55 with SE clear) carrying `dcceth`; with any
    /// transport the packet is laid out as DC.
    pub fn dc_connect(&mut self, d: Dir, dcceth: [u8; 16]) {
        let (from, _) = self.sides(d);
        let psn = from.psn;
        let t = Transport {
            bth: BthRepr { opcode: Opcode(0x55), psn, ..Default::default() },
            dceth: Some(self.dceth),
            dcceth,
            ..Default::default()
        };
        self.push(d, t);
    }

    /// Rewinds the sender's PSN to `psn` (go-back-N after a NAK or timeout).
    pub fn rewind(&mut self, d: Dir, psn: Psn) {
        self.sides(d).0.psn = psn;
    }

    /// A CNP (0x81) sent to the QP whose traffic was marked.
    pub fn cnp(&mut self, d: Dir) {
        let t = Transport {
            bth: BthRepr {
                opcode: Opcode::CNP,
                becn: true,
                psn: Psn::new(0),
                ..Default::default()
            },
            pad: Some(0),
            ..Default::default()
        };
        self.push(d, t);
    }

    /// A CM MAD (UD SEND Only to QP1 from QP1) carrying `msg`.
    pub fn cm(&mut self, d: Dir, msg: CmMessage, tid: u64) {
        let mut pl = vec![0u8; mad::MAD_LEN];
        MadRepr {
            base_version: 1,
            mgmt_class: mad::CLASS_CM,
            class_version: 2,
            method: 0x03,
            status: 0,
            class_specific: 0,
            transaction_id: tid,
            attribute_id: msg.attribute_id(),
            attribute_modifier: 0,
        }
        .emit(&mut pl);
        msg.emit(&mut pl[mad::HEADER_LEN..]);
        let t = Transport {
            bth: BthRepr {
                opcode: Opcode::UD_SEND_ONLY,
                dest_qp: mad::GSI_QP,
                psn: Psn::new(tid as u32),
                ..Default::default()
            },
            deth: DethRepr { q_key: 0x8001_0000, src_qp: mad::GSI_QP },
            payload: pl,
            ..Default::default()
        };
        self.push(d, t);
    }
}

/// An mlx5 DC exchange, as tshark 4.0 lays DC packets out (see
/// [`Opcode::dc_info`]): a connect, SENDs, WRITEs with and without immediate, a
/// 3-packet READ, an atomic, their acknowledgements, and a 0x55 with SE set. What
/// `roce craft` can write as `captures/dc.pcap`.
pub fn dc_exchange() -> Vec<Timed> {
    let mut c = Conversation::new();
    c.transport = crate::wire::Transport::Dc;
    c.dceth = 0x0000_1234_dc00_0001;
    c.dc_connect(Dir::AtoB, [0x5a; 16]);
    let p = c.send(Dir::AtoB, 32, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.send(Dir::AtoB, 10, Some(0x0bad_cafe));
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.write(Dir::AtoB, 0x7f00_0000_1000, 0x4321, 64, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.write(Dir::AtoB, 0x7f00_0000_2000, 0x4321, 16, Some(7));
    c.ack(Dir::BtoA, p, Syndrome(0x62), 0);
    c.mtu = 256;
    let p = c.read_request(Dir::AtoB, 0x7f00_0000_3000, 0x4321, 600);
    c.read_response(Dir::BtoA, p, 600);
    let p = c.atomic(Dir::AtoB, 0x7f00_0000_4000, 0x4321, 5, Some(1));
    c.atomic_ack(Dir::BtoA, p, 1);
    let psn = c.a.psn;
    c.push(
        Dir::AtoB,
        Transport {
            bth: BthRepr { opcode: Opcode(0x55), solicited_event: true, psn, ..Default::default() },
            payload: b"se set".to_vec(),
            ..Default::default()
        },
    );
    c.frames
}

impl Default for Conversation {
    fn default() -> Self {
        Conversation::new()
    }
}
