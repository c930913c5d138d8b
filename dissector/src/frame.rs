//! Lax decoding of one captured frame, from the link layer to the RoCE payload.
//!
//! [`decode`] never fails and never panics: it returns every layer that parsed, and
//! if something stopped it — a truncated capture, a malformed header — a [`Stop`]
//! saying which layer, at which byte offset, and why. An analyzer must not throw a
//! frame away for one bad header.
//!
//! Owns: [`Frame`], its layers, [`Stop`] and the decode options. Imports: the wire views
//! and reprs ([`crate::wire`]) and the link type.

use core::fmt;
use core::ops::Range;

use crate::wire::ethernet::{self, ethertype, Mac, VlanTag};
use crate::wire::ext::{
    AtomicAckEthPacket, AtomicEthPacket, AtomicEthRepr, DethPacket, DethRepr, FethPacket,
    RethPacket, RethRepr, Word32Packet,
};
use crate::wire::mad::{self, CmMessage, MadRepr};
use crate::wire::sll::SllRepr;
use crate::wire::{
    aeth, bth, icrc, ipv4, ipv6, tcp, udp, AethRepr, BthRepr, Error, Headers, Malformed, OpInfo,
    Transport,
};
use crate::LinkType;

/// Where decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    Link,
    Ethernet,
    Vlan,
    Sll,
    Ipv4,
    Ipv6,
    Udp,
    Grh,
    Bth,
    /// One of the extension headers; which one is in [`Stop::header`].
    ExtHeader,
    Payload,
    Icrc,
    Mad,
}

impl Layer {
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Link => "link layer",
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "802.1Q VLAN tag",
            Layer::Sll => "Linux cooked header",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Udp => "UDP",
            Layer::Grh => "GRH",
            Layer::Bth => "BTH",
            Layer::ExtHeader => "extension header",
            Layer::Payload => "payload",
            Layer::Icrc => "ICRC",
            Layer::Mad => "MAD",
        }
    }
}

/// Why and where decoding of a frame stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    pub layer: Layer,
    /// For [`Layer::ExtHeader`]: which header (`RETH`, `AETH`, …).
    pub header: Option<&'static str>,
    /// Byte offset of the layer in the frame.
    pub offset: usize,
    pub error: StopError,
}

/// The reason for a [`Stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopError {
    Wire(Error),
    /// The link type is not one we decode.
    UnsupportedLink(LinkType),
    /// An IPv4 fragment past the first, or a first fragment: UDP not reassembled.
    Fragment,
    /// The capture holds fewer bytes than the UDP datagram / GRH announced (snaplen).
    Snapped {
        captured: usize,
        expected: usize,
    },
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.header.unwrap_or(self.layer.name()))?;
        write!(f, " at offset {}: ", self.offset)?;
        match self.error {
            StopError::Wire(e) => e.fmt(f),
            StopError::UnsupportedLink(l) => write!(f, "link type {l} is not supported"),
            StopError::Fragment => f.write_str("IP fragment, not reassembled"),
            StopError::Snapped { captured, expected } => {
                write!(f, "capture cut short (snaplen): {captured} of {expected} bytes captured")
            }
        }
    }
}

/// The link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Ethernet {
        src: Mac,
        dst: Mac,
    },
    Sll(SllRepr),
    /// Raw IP (LINKTYPE_RAW, IPV4, IPV6).
    Raw,
    /// BSD loopback: address family in host byte order.
    Null {
        family: u32,
    },
    Unsupported(LinkType),
    /// The link header itself was cut short.
    Truncated(LinkType),
}

/// The network layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    None,
    Ipv4(ipv4::Repr),
    Ipv6(ipv6::Repr),
    /// RoCEv1's Global Route Header (IPv6 layout, next header 0x1B).
    Grh(ipv6::Repr),
    Arp,
    Other {
        ethertype: u16,
    },
}

/// RoCE version of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoceVersion {
    V1,
    V2,
}

/// The InfiniBand transport part of a RoCE packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ib {
    pub bth: BthRepr,
    /// The opcode table row; `None` for reserved or vendor opcodes. For an
    /// RD-range opcode read as DC (see [`TransportHint`]) the DC row, whose
    /// transport is [`Transport::Dc`].
    pub info: Option<&'static OpInfo>,
    pub xrceth: Option<u32>,
    /// DC: the 8 bytes after the BTH, as a big-endian number.
    pub dceth: Option<u64>,
    /// DC connect: the 16-byte DCCETH.
    pub dcceth: Option<[u8; 16]>,
    pub rdeth: Option<u32>,
    pub deth: Option<DethRepr>,
    pub feth: Option<u32>,
    pub reth: Option<RethRepr>,
    pub atomiceth: Option<AtomicEthRepr>,
    pub aeth: Option<AethRepr>,
    pub atomicacketh: Option<u64>,
    pub immdt: Option<u32>,
    pub ieth: Option<u32>,
    /// The extension headers read, in full, from the frame: those of the opcode's
    /// row ([`OpInfo::headers`]) up to where decoding stopped. A display filter's
    /// bare `infiniband.reth` asks this.
    pub decoded: Headers,
    /// Byte range of the payload in the frame (pad excluded).
    pub payload: Range<usize>,
    /// The four ICRC bytes as on the wire, if captured.
    pub icrc: Option<[u8; 4]>,
}

impl Ib {
    fn new(bth: BthRepr) -> Ib {
        Ib {
            bth,
            info: bth.opcode.info(),
            xrceth: None,
            dceth: None,
            dcceth: None,
            rdeth: None,
            deth: None,
            feth: None,
            reth: None,
            atomiceth: None,
            aeth: None,
            atomicacketh: None,
            immdt: None,
            ieth: None,
            decoded: Headers::NONE,
            payload: 0..0,
            icrc: None,
        }
    }
    pub fn payload_len(&self) -> usize {
        self.payload.len()
    }
    /// The packet was read with the DC layout.
    pub fn is_dc(&self) -> bool {
        self.info.is_some_and(|i| i.transport == Transport::Dc)
    }
}

/// The opcode's name as the frame was read: `RC SEND Only`, `DC Acknowledge`, or the
/// opcode's own `Display` for opcodes the table does not know.
#[derive(Debug, Clone, Copy)]
pub struct OpName<'a>(pub &'a Ib);

impl fmt::Display for OpName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.info {
            Some(i) => i.fmt(f),
            None => self.0.bth.opcode.fmt(f),
        }
    }
}

/// A decoded MAD (UD SEND to QP1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mad {
    pub header: MadRepr,
    pub cm: Option<CmMessage>,
}

/// Byte offsets kept for the ICRC check and the printers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offsets {
    /// Start of the IP header / GRH.
    pub net: usize,
    /// Start of what follows the fixed IP header (IPv6 extension headers, UDP).
    pub l4: usize,
    /// Start of the UDP or TCP header (after any IPv6 extension headers); 0 when the
    /// frame has neither.
    pub transport: usize,
    pub bth: usize,
    /// Where the ICRC starts (= end of the transport packet before the ICRC).
    pub icrc: usize,
}

/// One decoded frame. Fields are `None` past the layer where decoding stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub link: Link,
    /// Outer tag first.
    pub vlans: [Option<VlanTag>; 2],
    /// The ethertype after any VLAN tags (or the SLL protocol).
    pub ethertype: Option<u16>,
    pub net: Net,
    pub udp: Option<udp::Repr>,
    /// A TCP header (out-of-band connection setup shares the wire with RoCE).
    pub tcp: Option<tcp::Repr>,
    pub roce: Option<RoceVersion>,
    pub ib: Option<Ib>,
    pub mad: Option<Mad>,
    pub offsets: Offsets,
    pub stop: Option<Stop>,
}

/// How to read packets with an RD-range opcode (0x40–0x5F).
///
/// No RoCE hardware implements IBA's Reliable Datagram; mlx5's Dynamically Connected
/// (DC) transport reuses the RD opcodes with its own layout: 8 bytes (the DCETH)
/// after the BTH, then the RD headers (see [`crate::wire::Opcode::dc_info`]).
/// tshark 4.0 reads *every* RD-range opcode as DC, with no preference to turn it
/// off (packet-infiniband.c: `if ((opCode >> 5) == 0x2) { dctBthHeader = TRUE; … }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportHint {
    /// DC, as tshark reads it, unless the packet cannot be DC while it can be RD:
    /// too short for the DC headers, or a reserved byte where the DC layout puts one
    /// (first byte of the RDETH, fifth of the DETH) is not zero, while the RD layout
    /// fits on both counts. An opcode without payload must fill the packet exactly.
    #[default]
    Auto,
    /// Always IBA Reliable Datagram: RDETH (and DETH on requests) right after the BTH.
    Rd,
    /// Always mlx5 DC, as tshark 4.0 does.
    Dc,
}

/// What counts as RoCEv2 — UDP destination ports (4791 and any the user adds) —
/// and how to read RD-range opcodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub roce_ports: Vec<u16>,
    pub transport_hint: TransportHint,
}

impl Default for Options {
    fn default() -> Self {
        Options { roce_ports: vec![udp::ROCE_V2_PORT], transport_hint: TransportHint::Auto }
    }
}

impl Frame {
    fn reset(&mut self) {
        self.link = Link::Raw;
        self.vlans = [None, None];
        self.ethertype = None;
        self.net = Net::None;
        self.udp = None;
        self.tcp = None;
        self.roce = None;
        self.ib = None;
        self.mad = None;
        self.offsets = Offsets::default();
        self.stop = None;
    }

    fn empty(link: Link) -> Frame {
        Frame {
            link,
            vlans: [None, None],
            ethertype: None,
            net: Net::None,
            udp: None,
            tcp: None,
            roce: None,
            ib: None,
            mad: None,
            offsets: Offsets::default(),
            stop: None,
        }
    }

    /// The frame is a RoCE packet whose BTH parsed.
    pub fn is_roce(&self) -> bool {
        self.ib.is_some()
    }

    /// Verifies the ICRC against the frame's bytes. `None` when there is nothing to
    /// check (not RoCE, or the ICRC was not captured).
    pub fn icrc_check(&self, data: &[u8]) -> Option<IcrcCheck> {
        let ib = self.ib.as_ref()?;
        let wire = ib.icrc?;
        let o = self.offsets;
        let kind = match self.net {
            Net::Ipv4(_) => icrc::Net::Ipv4,
            Net::Ipv6(_) => icrc::Net::Ipv6,
            Net::Grh(_) => icrc::Net::Grh,
            _ => return None,
        };
        if !(o.net <= o.l4 && o.l4 <= o.bth && o.bth <= o.icrc) {
            return None;
        }
        let covered = data.get(o.net..o.icrc)?;
        let computed = icrc::compute_covered(kind, covered, o.l4 - o.net, o.bth - o.net);
        Some(IcrcCheck { wire: icrc::from_wire(wire), computed })
    }

    /// Source and destination addresses, when the frame has an IP layer or GRH.
    pub fn addrs(&self) -> Option<(std::net::IpAddr, std::net::IpAddr)> {
        match self.net {
            Net::Ipv4(r) => Some((r.src.into(), r.dst.into())),
            Net::Ipv6(r) | Net::Grh(r) => Some((r.src.into(), r.dst.into())),
            _ => None,
        }
    }

    /// The payload length the packet had on the wire: for a frame cut short by the
    /// snaplen, what the UDP/GRH length says, not what was captured.
    /// A CM message's private data, as far as it was captured (zero-padded on the
    /// wire to its field's size; see [`mad::private_data`]).
    pub fn cm_private_data<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        let m = self.mad.as_ref()?;
        m.cm?;
        let ib = self.ib.as_ref()?;
        let attr = data.get(ib.payload.start + mad::HEADER_LEN..ib.payload.end)?;
        mad::private_data(m.header.attribute_id, attr)
    }

    /// The rdma_cm header of a REQ from librdmacm: the IP addresses and ports the
    /// connection was made for.
    pub fn rdma_cm_header(&self, data: &[u8]) -> Option<mad::RdmaCmHeader> {
        match self.mad.as_ref()?.cm? {
            CmMessage::Req(r) => {
                mad::RdmaCmHeader::parse(r.service_id, self.cm_private_data(data)?)
            }
            _ => None,
        }
    }

    pub fn payload_len_on_wire(&self) -> Option<usize> {
        let ib = self.ib.as_ref()?;
        match self.stop {
            Some(Stop { error: StopError::Snapped { .. }, .. }) => {
                Some(self.offsets.icrc.saturating_sub(ib.payload.start + ib.bth.pad_count as usize))
            }
            Some(Stop { layer: Layer::Bth | Layer::ExtHeader, .. }) => None,
            _ => Some(ib.payload.len()),
        }
    }

    /// The IP DSCP (the traffic class's upper six bits).
    pub fn dscp(&self) -> Option<u8> {
        match self.net {
            Net::Ipv4(r) => Some(r.dscp),
            Net::Ipv6(r) | Net::Grh(r) => Some(r.traffic_class >> 2),
            _ => None,
        }
    }

    /// The IP ECN bits (3 = Congestion Experienced).
    pub fn ecn(&self) -> Option<u8> {
        match self.net {
            Net::Ipv4(r) => Some(r.ecn),
            Net::Ipv6(r) | Net::Grh(r) => Some(r.ecn()),
            _ => None,
        }
    }
}

/// Result of an ICRC verification. Both values are the CRC as a number (the wire
/// carries it least significant byte first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcrcCheck {
    pub wire: u32,
    pub computed: u32,
}

impl IcrcCheck {
    pub fn ok(&self) -> bool {
        self.wire == self.computed
    }
}

/// Decodes one frame captured with link type `link`.
pub fn decode(link: LinkType, data: &[u8], opts: &Options) -> Frame {
    let mut fr = Frame::empty(Link::Raw);
    decode_into(&mut fr, link, data, opts);
    fr
}

/// Like [`decode`], reusing `fr` (a hot loop decodes into one `Frame`).
#[inline]
pub fn decode_into(fr: &mut Frame, link: LinkType, data: &[u8], opts: &Options) {
    fr.reset();
    Decoder { data, opts, fr }.frame(link);
}

/// The first `N` bytes of `b`, which the caller has checked holds them.
fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Whether the transport packet `start..end` (after the BTH; `end` as UDP or the GRH
/// announce it, which a capture may not hold) can have `info`'s layout: room for its
/// headers, pad and ICRC (exactly, when the opcode has no payload), and zeros in the
/// reserved bytes of its RDETH (byte 0) and DETH (byte 4) where captured.
fn fits(info: &OpInfo, pad: u8, data: &[u8], start: usize, end: usize) -> bool {
    let need = info.headers.len() + 4;
    let len = end.saturating_sub(start);
    let room = if info.headers.contains(Headers::PAYLOAD) {
        len >= need + usize::from(pad)
    } else {
        len == need
    };
    if !room {
        return false;
    }
    let mut off = start;
    for (h, n) in info.headers.iter() {
        let reserved = match h {
            Headers::RDETH => data.get(off),
            Headers::DETH => data.get(off + 4),
            _ => None,
        };
        if reserved.is_some_and(|&b| b != 0) {
            return false;
        }
        off += n;
    }
    true
}

struct Decoder<'a> {
    data: &'a [u8],
    opts: &'a Options,
    fr: &'a mut Frame,
}

fn stop(layer: Layer, offset: usize, e: Error) -> Stop {
    Stop { layer, header: None, offset, error: StopError::Wire(e) }
}

impl Decoder<'_> {
    fn at(&self, off: usize) -> &[u8] {
        self.data.get(off..).unwrap_or(&[])
    }

    fn stop(&mut self, layer: Layer, offset: usize, e: Error) {
        self.fr.stop = Some(stop(layer, offset, e));
    }

    #[inline(always)]
    fn frame(mut self, link: LinkType) {
        match link {
            LinkType::ETHERNET => {
                let f = match ethernet::Frame::new_checked(self.data) {
                    Ok(f) => f,
                    Err(e) => {
                        self.fr.link = Link::Truncated(link);
                        return self.stop(Layer::Ethernet, 0, e);
                    }
                };
                self.fr.link = Link::Ethernet { src: f.src(), dst: f.dst() };
                let mut t = f.ethertype();
                let mut off = ethernet::HEADER_LEN;
                for slot in 0..2 {
                    if !ethertype::is_vlan(t) {
                        break;
                    }
                    match VlanTag::parse(t, self.at(off)) {
                        Ok(tag) => {
                            self.fr.vlans[slot] = Some(tag);
                            t = tag.inner_type;
                            off += ethernet::VLAN_TAG_LEN;
                        }
                        Err(e) => return self.stop(Layer::Vlan, off, e),
                    }
                }
                self.ethertype(t, off)
            }
            LinkType::LINUX_SLL | LinkType::LINUX_SLL2 => {
                let parsed = if link == LinkType::LINUX_SLL {
                    SllRepr::parse_v1(self.data)
                } else {
                    SllRepr::parse_v2(self.data)
                };
                match parsed {
                    Ok(s) => {
                        self.fr.link = Link::Sll(s);
                        self.ethertype(s.protocol, s.header_len())
                    }
                    Err(e) => {
                        self.fr.link = Link::Truncated(link);
                        self.stop(Layer::Sll, 0, e)
                    }
                }
            }
            LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => {
                self.fr.link = Link::Raw;
                match self.data.first().map(|b| b >> 4) {
                    Some(6) => self.ethertype(ethertype::IPV6, 0),
                    _ => self.ethertype(ethertype::IPV4, 0),
                }
            }
            LinkType::NULL => {
                let Some(b) = self.data.get(..4) else {
                    self.fr.link = Link::Null { family: 0 };
                    let available = self.data.len();
                    return self.stop(Layer::Link, 0, Error::Truncated { needed: 4, available });
                };
                // Host byte order of the capturing machine: accept either.
                let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let family =
                    if le < 0x100 { le } else { u32::from_be_bytes([b[0], b[1], b[2], b[3]]) };
                self.fr.link = Link::Null { family };
                let t = match family {
                    2 => ethertype::IPV4,
                    24 | 28 | 30 => ethertype::IPV6,
                    _ => 0,
                };
                self.ethertype(t, 4)
            }
            other => {
                self.fr.link = Link::Unsupported(other);
                self.fr.stop = Some(Stop {
                    layer: Layer::Link,
                    header: None,
                    offset: 0,
                    error: StopError::UnsupportedLink(other),
                });
            }
        }
    }

    fn ethertype(&mut self, t: u16, off: usize) {
        self.fr.ethertype = Some(t);
        match t {
            ethertype::IPV4 => self.ipv4(off),
            ethertype::IPV6 => self.ipv6(off),
            ethertype::ROCE_V1 => self.grh(off),
            ethertype::ARP => self.fr.net = Net::Arp,
            other => self.fr.net = Net::Other { ethertype: other },
        }
    }

    fn ipv4(&mut self, off: usize) {
        let p = match ipv4::Packet::new_checked(self.at(off)) {
            Ok(p) => p,
            Err(e) => return self.stop(Layer::Ipv4, off, e),
        };
        let r = ipv4::Repr::parse(&p);
        let l4 = off + p.header_len();
        self.fr.net = Net::Ipv4(r);
        self.fr.offsets.net = off;
        self.fr.offsets.l4 = l4;
        if r.protocol != ipv4::PROTO_UDP && r.protocol != tcp::PROTO_TCP {
            return;
        }
        if r.is_fragment() {
            self.fr.stop = Some(Stop {
                layer: Layer::Ipv4,
                header: None,
                offset: off,
                error: StopError::Fragment,
            });
            return;
        }
        if r.protocol == tcp::PROTO_TCP {
            return self.tcp(l4);
        }
        self.udp(l4, l4, off + r.total_len as usize)
    }

    fn ipv6(&mut self, off: usize) {
        let p = match ipv6::Packet::new_checked(self.at(off)) {
            Ok(p) => p,
            Err(e) => return self.stop(Layer::Ipv6, off, e),
        };
        let r = ipv6::Repr::parse(&p);
        self.fr.net = Net::Ipv6(r);
        self.fr.offsets.net = off;
        let l4_start = off + ipv6::HEADER_LEN;
        self.fr.offsets.l4 = l4_start;
        let ip_end = l4_start + r.payload_len as usize;
        let mut next = r.next_header;
        let mut at = l4_start;
        // Skip a bounded number of extension headers.
        for _ in 0..8 {
            match ipv6::extension_len(next, self.at(at)) {
                None => break,
                Some(Ok((nh, len))) => {
                    next = nh;
                    at += len;
                }
                Some(Err(e)) => return self.stop(Layer::Ipv6, at, e),
            }
        }
        if next == 44 {
            self.fr.stop = Some(Stop {
                layer: Layer::Ipv6,
                header: None,
                offset: at,
                error: StopError::Fragment,
            });
            return;
        }
        if next == ipv4::PROTO_UDP {
            self.udp(l4_start, at, ip_end)
        } else if next == tcp::PROTO_TCP {
            self.tcp(at)
        }
    }

    /// TCP is not ours to judge: a short or odd header leaves `tcp` empty (or keeps
    /// the ports of a header with a bad data offset, as tshark shows them) and does
    /// not stop the frame.
    fn tcp(&mut self, off: usize) {
        self.fr.offsets.transport = off;
        match tcp::Packet::new_checked(self.at(off)) {
            Ok(p) => self.fr.tcp = Some(tcp::Repr::parse(&p)),
            Err(Error::Malformed(_)) => {
                self.fr.tcp = Some(tcp::Repr::parse(&tcp::Packet::new_unchecked(self.at(off))))
            }
            Err(_) => {}
        }
    }

    fn udp(&mut self, l4_start: usize, off: usize, ip_end: usize) {
        self.fr.offsets.transport = off;
        let p = match udp::Packet::new_checked(self.at(off)) {
            Ok(p) => p,
            Err(e @ Error::Malformed(_)) => {
                // The ports are still worth showing (tshark does).
                self.fr.udp = Some(udp::Repr::parse(&udp::Packet::new_unchecked(self.at(off))));
                return self.stop(Layer::Udp, off, e);
            }
            Err(e) => return self.stop(Layer::Udp, off, e),
        };
        let r = udp::Repr::parse(&p);
        self.fr.udp = Some(r);
        self.fr.offsets.l4 = l4_start;
        if !self.opts.roce_ports.contains(&r.dst_port) {
            return;
        }
        self.fr.roce = Some(RoceVersion::V2);
        let bth = off + udp::HEADER_LEN;
        // The datagram ends where UDP says; IP's total length bounds it, and anything
        // past it in the frame (Ethernet padding) is not ours.
        let end = (off + r.length as usize).min(ip_end.max(bth));
        self.transport(bth, end)
    }

    fn grh(&mut self, off: usize) {
        let p = match ipv6::Packet::new_checked(self.at(off)) {
            Ok(p) => p,
            Err(Error::Malformed(Malformed::Ipv6Version { version })) => {
                return self.stop(
                    Layer::Grh,
                    off,
                    Error::Malformed(Malformed::GrhVersion { version }),
                )
            }
            Err(e) => return self.stop(Layer::Grh, off, e),
        };
        let r = ipv6::Repr::parse(&p);
        self.fr.net = Net::Grh(r);
        self.fr.roce = Some(RoceVersion::V1);
        self.fr.offsets.net = off;
        let bth = off + ipv6::HEADER_LEN;
        self.fr.offsets.l4 = bth;
        // PayLen counts from the BTH through the ICRC. A zero PayLen (some captures)
        // falls back to the end of the frame.
        let end = match r.payload_len as usize {
            0 => self.data.len(),
            n => bth + n,
        };
        self.transport(bth, end)
    }

    /// Decodes BTH .. ICRC, where the transport packet spans `bth..end` (`end` as
    /// announced by UDP or the GRH; the capture may hold less).
    fn transport(&mut self, bth: usize, end: usize) {
        self.fr.offsets.bth = bth;
        let p = match bth::Packet::new_checked(self.at(bth)) {
            Ok(p) => p,
            Err(e) => return self.stop(Layer::Bth, bth, e),
        };
        let data = self.data;
        let ib = self.fr.ib.insert(Ib::new(BthRepr::parse(&p)));
        let captured_end = end.min(data.len());
        let mut off = bth + bth::HEADER_LEN;
        if ib.bth.opcode.transport() == Transport::Rd {
            if let Some(dc) = ib.bth.opcode.dc_info(ib.bth.solicited_event) {
                let read_dc = match self.opts.transport_hint {
                    TransportHint::Rd => false,
                    TransportHint::Dc => true,
                    TransportHint::Auto => {
                        let pad = ib.bth.pad_count;
                        fits(dc, pad, data, off, end)
                            || !ib.info.is_some_and(|rd| fits(rd, pad, data, off, end))
                    }
                };
                if read_dc {
                    ib.info = Some(dc);
                }
            }
        }
        // Unknown opcodes: the bytes up to the ICRC are shown as payload.
        let headers = ib.info.map_or(Headers::PAYLOAD, |i| i.headers);
        if !headers.is_empty() {
            for (h, len) in headers.iter() {
                // Never read extension headers out of the ICRC or past the datagram.
                let avail = captured_end.saturating_sub(off);
                if avail < len {
                    self.fr.stop = Some(Stop {
                        layer: Layer::ExtHeader,
                        header: Some(h.name()),
                        offset: off,
                        error: StopError::Wire(Error::Truncated { needed: len, available: avail }),
                    });
                    return;
                }
                let b = &data[off..captured_end];
                match h {
                    Headers::XRCETH => ib.xrceth = Some(Word32Packet::new_unchecked(b).value24()),
                    Headers::DCETH => ib.dceth = Some(u64::from_be_bytes(array(b))),
                    Headers::DCCETH => ib.dcceth = Some(array(b)),
                    Headers::RDETH => ib.rdeth = Some(Word32Packet::new_unchecked(b).value24()),
                    Headers::DETH => ib.deth = Some(DethRepr::parse(&DethPacket::new_unchecked(b))),
                    Headers::FETH => ib.feth = Some(FethPacket::new_unchecked(b).raw()),
                    Headers::RETH => ib.reth = Some(RethRepr::parse(&RethPacket::new_unchecked(b))),
                    Headers::ATOMICETH => {
                        ib.atomiceth =
                            Some(AtomicEthRepr::parse(&AtomicEthPacket::new_unchecked(b)))
                    }
                    Headers::AETH => {
                        ib.aeth = Some(AethRepr::parse(&aeth::Packet::new_unchecked(b)))
                    }
                    Headers::ATOMICACKETH => {
                        ib.atomicacketh =
                            Some(AtomicAckEthPacket::new_unchecked(b).orig_remote_data())
                    }
                    Headers::IMMDT => ib.immdt = Some(Word32Packet::new_unchecked(b).value()),
                    Headers::IETH => ib.ieth = Some(Word32Packet::new_unchecked(b).value()),
                    _ => {} // CNP reserved bytes
                }
                ib.decoded = ib.decoded.union(h);
                off += len;
            }
        }
        // Payload: what is left before pad and ICRC.
        let pad = ib.bth.pad_count as usize;
        if end > data.len() {
            // Snapped capture: show what we have, no ICRC.
            ib.payload = off.min(data.len())..data.len();
            self.fr.offsets.icrc = end.saturating_sub(4);
            self.fr.stop = Some(Stop {
                layer: Layer::Payload,
                header: None,
                offset: off.min(data.len()),
                error: StopError::Snapped { captured: data.len() - bth, expected: end - bth },
            });
            return;
        }
        let left = end.saturating_sub(off);
        if left < 4 {
            ib.payload = off.min(end)..end;
            return self.stop(
                Layer::Icrc,
                off,
                Error::Malformed(Malformed::NoRoomForIcrc { left }),
            );
        }
        let icrc_at = end - 4;
        let payload_len = icrc_at - off;
        self.fr.offsets.icrc = icrc_at;
        ib.icrc = Some([data[icrc_at], data[icrc_at + 1], data[icrc_at + 2], data[icrc_at + 3]]);
        if pad > payload_len {
            ib.payload = off..icrc_at;
            return self.stop(
                Layer::Payload,
                off,
                Error::Malformed(Malformed::PadExceedsPayload { pad: pad as u8, payload_len }),
            );
        }
        ib.payload = off..icrc_at - pad;
        // MADs: UD SEND Only to QP1.
        if ib.bth.dest_qp == mad::GSI_QP && ib.deth.is_some() {
            let payload = ib.payload.clone();
            self.mad(payload);
        }
    }

    /// Decodes the MAD that fills `payload` (a UD SEND to QP1), and the CM message in
    /// it when its class is CM.
    fn mad(&mut self, payload: Range<usize>) {
        let start = payload.start;
        let pl = &self.data[payload];
        if pl.len() < mad::MAD_LEN {
            let e = Error::Malformed(Malformed::MadLength { len: pl.len() });
            self.fr.stop = Some(stop(Layer::Mad, start, e));
            return;
        }
        match MadRepr::parse(pl) {
            Ok(h) => {
                let cm = if h.mgmt_class == mad::CLASS_CM {
                    match CmMessage::parse(h.attribute_id, &pl[mad::HEADER_LEN..]) {
                        Ok(cm) => cm,
                        Err(e) => {
                            self.fr.stop = Some(stop(Layer::Mad, start + mad::HEADER_LEN, e));
                            None
                        }
                    }
                } else {
                    None
                };
                self.fr.mad = Some(Mad { header: h, cm });
            }
            Err(e) => self.fr.stop = Some(stop(Layer::Mad, start, e)),
        }
    }
}
