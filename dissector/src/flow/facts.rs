//! What the flow layer takes from one RoCE packet, obtained two ways.
//!
//! [`Facts::of`] reads them off a decoded [`Frame`]: it works for every frame the
//! decoder understands. [`Facts::parse`] reads them straight from the bytes for the
//! layout nearly every RoCEv2 capture is made of — Ethernet, up to two VLAN tags,
//! IPv4 without options or IPv6 without extension headers, UDP to a RoCE port, a
//! complete transport packet that is not a MAD — without building a `Frame`. For
//! anything else it returns `None` and the caller decodes the frame in full.
//!
//! Wherever `parse` returns `Some`, it returns exactly what `of` returns for the
//! decoded frame; a differential test over every capture and over mutated frames
//! holds the two to that.
//!
//! Owns: [`Facts`], [`Seen`] and the direct parse. Imports: the decoded frame, the wire
//! views (Ethernet, VLAN, IP, UDP, BTH, DETH, RETH, AETH, MAD), the opcode table, the
//! ICRC, the link type, and the [`Analyzer`](super::Analyzer) it feeds (its parent).

use std::net::IpAddr;

use crate::frame::{self, Frame, IcrcCheck, Mad};
use crate::wire::ethernet::{self, ethertype, VlanTag};
use crate::wire::ext::{DethPacket, RethPacket};
use crate::wire::{
    aeth, bth, icrc, ipv4, ipv6, mad, udp, Headers, OpInfo, Opcode, Psn, Syndrome, Transport,
};
use crate::LinkType;

/// The facts of one RoCE packet whose BTH decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<'a> {
    /// IP (or GRH) source and destination.
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The IP ECN bits (3 = Congestion Experienced).
    pub ecn: u8,
    pub opcode: Opcode,
    /// The opcode's row as the decoder read it: for the RD range, DC or RD (see
    /// [`frame::TransportHint`]); `None` for opcodes no table defines.
    pub info: Option<&'static OpInfo>,
    pub dest_qp: u32,
    pub psn: Psn,
    pub ack_req: bool,
    pub fecn: bool,
    pub becn: bool,
    /// The DETH's source QP (UD).
    pub src_qp: Option<u32>,
    /// The RETH's DMA length.
    pub dma_len: Option<u32>,
    /// The AETH's syndrome.
    pub syndrome: Option<Syndrome>,
    /// Payload bytes on the wire (what the headers announce for a frame cut short by
    /// the snaplen; 0 when the extension headers themselves were cut).
    pub payload_len: u64,
    /// `None` when the ICRC was not captured.
    pub icrc: Option<IcrcCheck>,
    pub mad: Option<&'a Mad>,
}

impl<'a> Facts<'a> {
    /// The facts of a decoded frame (`data` are its captured bytes); `None` when the
    /// frame holds no BTH.
    pub fn of(frame: &'a Frame, data: &[u8]) -> Option<Facts<'a>> {
        let ib = frame.ib.as_ref()?;
        let (src, dst) = frame.addrs()?;
        let b = ib.bth;
        Some(Facts {
            src,
            dst,
            ecn: frame.ecn()?,
            opcode: b.opcode,
            info: ib.info,
            dest_qp: b.dest_qp,
            psn: b.psn,
            ack_req: b.ack_req,
            fecn: b.fecn,
            becn: b.becn,
            src_qp: ib.deth.map(|d| d.src_qp),
            dma_len: ib.reth.map(|r| r.dma_len),
            syndrome: ib.aeth.map(|a| a.syndrome),
            payload_len: frame.payload_len_on_wire().unwrap_or(0) as u64,
            icrc: frame.icrc_check(data),
            mad: frame.mad.as_ref(),
        })
    }
}

impl<'a> Facts<'a> {
    /// These facts without the borrow of their frame: the MAD, if any, copied out
    /// beside them (boxed: MADs are rare and large).
    pub fn detached(&self) -> (Facts<'static>, Option<Box<Mad>>) {
        let f = Facts {
            src: self.src,
            dst: self.dst,
            ecn: self.ecn,
            opcode: self.opcode,
            info: self.info,
            dest_qp: self.dest_qp,
            psn: self.psn,
            ack_req: self.ack_req,
            fecn: self.fecn,
            becn: self.becn,
            src_qp: self.src_qp,
            dma_len: self.dma_len,
            syndrome: self.syndrome,
            payload_len: self.payload_len,
            icrc: self.icrc,
            mad: None,
        };
        (f, self.mad.map(|m| Box::new(*m)))
    }
}

/// What the flow analysis takes from one captured frame, found apart from the
/// [`Analyzer`](super::Analyzer) — on another thread, say — and handed to it in
/// frame order with [`Analyzer::add_seen`](super::Analyzer::add_seen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A RoCE packet, with its MAD if it carries one.
    Roce(Facts<'static>, Option<Box<Mad>>),
    /// Not a RoCE packet with a BTH: `undecodable` when it is RoCE whose decoding
    /// stopped.
    Other { undecodable: bool },
    /// Left out (by a display filter): not analysed, not counted.
    Skipped,
}

impl Seen {
    /// What a decoded frame gives (`data` are its captured bytes).
    pub fn of(frame: &Frame, data: &[u8]) -> Seen {
        match Facts::of(frame, data) {
            Some(p) => {
                let (f, mad) = p.detached();
                Seen::Roce(f, mad)
            }
            None => Seen::Other { undecodable: frame.stop.is_some() && frame.roce.is_some() },
        }
    }

    /// What a captured frame gives: the fast path ([`Facts::parse`]) or, for
    /// anything else, a full decode into `scratch` (a reused [`Frame`]).
    #[inline]
    pub fn of_captured(
        link: LinkType,
        data: &[u8],
        opts: &frame::Options,
        scratch: &mut Frame,
    ) -> Seen {
        match Facts::parse(link, data, opts) {
            Some(p) => Seen::Roce(p, None),
            None => {
                frame::decode_into(scratch, link, data, opts);
                Seen::of(scratch, data)
            }
        }
    }
}

impl Facts<'static> {
    /// The fast path: the facts of a frame in the common layout (see the module
    /// docs), or `None`. The caller then decodes the frame ([`frame::decode_into`])
    /// and hands it to [`Analyzer::add`](super::Analyzer::add), which also counts
    /// the frames that are not RoCE.
    #[inline]
    pub fn parse(link: LinkType, data: &[u8], opts: &frame::Options) -> Option<Facts<'static>> {
        if link != LinkType::ETHERNET {
            return None;
        }
        // The header views of `wire`, over slices whose length is checked here.
        let mut t = ethernet::Frame::new_checked(data).ok()?.ethertype();
        let mut net = ethernet::HEADER_LEN;
        for _ in 0..2 {
            if !ethertype::is_vlan(t) {
                break;
            }
            t = VlanTag::parse(t, data.get(net..)?).ok()?.inner_type;
            net += ethernet::VLAN_TAG_LEN;
        }
        let (src, dst, ecn, kind, l4, ip_end) = match t {
            ethertype::IPV4 => {
                let ip = ipv4::Packet::new_unchecked(data.get(net..net + ipv4::HEADER_LEN)?);
                let total_len = usize::from(ip.total_len());
                // Version 4, no options, UDP, not a fragment.
                let fragment = ip.more_frags() || ip.frag_offset() != 0;
                if ip.version() != 4
                    || ip.ihl() != 5
                    || ip.protocol() != ipv4::PROTO_UDP
                    || total_len < ipv4::HEADER_LEN
                    || fragment
                {
                    return None;
                }
                let l4 = net + ipv4::HEADER_LEN;
                (
                    IpAddr::V4(ip.src()),
                    IpAddr::V4(ip.dst()),
                    ip.ecn(),
                    icrc::Net::Ipv4,
                    l4,
                    net + total_len,
                )
            }
            ethertype::IPV6 => {
                let ip = ipv6::Packet::new_unchecked(data.get(net..net + ipv6::HEADER_LEN)?);
                // Version 6, UDP straight after the fixed header.
                if ip.version() != 6 || ip.next_header() != ipv4::PROTO_UDP {
                    return None;
                }
                let l4 = net + ipv6::HEADER_LEN;
                let ip_end = l4 + usize::from(ip.payload_len());
                (IpAddr::V6(ip.src()), IpAddr::V6(ip.dst()), ip.ecn(), icrc::Net::Ipv6, l4, ip_end)
            }
            _ => return None,
        };
        let u = udp::Packet::new_unchecked(data.get(l4..l4 + udp::HEADER_LEN)?);
        let length = usize::from(u.length());
        if length < udp::HEADER_LEN || !opts.roce_ports.contains(&u.dst_port()) {
            return None;
        }
        let bth_at = l4 + udp::HEADER_LEN;
        let end = (l4 + length).min(ip_end.max(bth_at));
        // A frame cut short by the snaplen, or one too short for its BTH.
        let packet = data.get(..end)?;
        let b = bth::Packet::new_unchecked(packet.get(bth_at..bth_at + bth::HEADER_LEN)?);
        let opcode = b.opcode();
        // RD-range opcodes may be DC (frame::TransportHint): the decoder decides.
        if opcode.transport() == Transport::Rd {
            return None;
        }
        let headers = opcode.info().map_or(Headers::PAYLOAD, |i| i.headers);
        let mut off = bth_at + bth::HEADER_LEN;
        let (mut src_qp, mut dma_len, mut syndrome) = (None, None, None);
        for (h, len) in headers.iter() {
            let x = packet.get(off..off + len)?;
            match h {
                Headers::DETH => src_qp = Some(DethPacket::new_unchecked(x).src_qp()),
                Headers::RETH => dma_len = Some(RethPacket::new_unchecked(x).dma_len()),
                Headers::AETH => syndrome = Some(aeth::Packet::new_unchecked(x).syndrome()),
                _ => {}
            }
            off += len;
        }
        // MADs carry more than these facts; the decoder handles them.
        if b.dest_qp() == mad::GSI_QP && src_qp.is_some() {
            return None;
        }
        let icrc_at = end.checked_sub(4).filter(|&i| i >= off)?;
        let payload_len = (icrc_at - off).checked_sub(usize::from(b.pad_count()))? as u64;
        let wire = icrc::from_wire(packet[icrc_at..].try_into().ok()?);
        let computed = icrc::compute_covered(kind, &packet[net..icrc_at], l4 - net, bth_at - net);
        Some(Facts {
            src,
            dst,
            ecn,
            opcode,
            info: opcode.info(),
            dest_qp: b.dest_qp(),
            psn: b.psn(),
            ack_req: b.ack_req(),
            fecn: b.fecn(),
            becn: b.becn(),
            src_qp,
            dma_len,
            syndrome,
            payload_len,
            icrc: Some(IcrcCheck { wire, computed }),
            mad: None,
        })
    }
}
