//! Human and machine output for decoded frames: the one-line summary (default
//! output and snapshot goldens) here, the `-V` header tree ([`verbose`], in `tree`)
//! and the JSON Lines object ([`json()`], in `json`). One printer feeds the CLI, the
//! snapshot tests and the fuzz target alike.
//!
//! Owns: every human- and script-readable rendering of one frame. Imports: the
//! per-frame context ([`crate::ctx`]), the decoded frame ([`crate::frame`]) and the
//! wire vocabulary ([`crate::wire`]).

use core::fmt::{self, Write as _};

use crate::ctx::Ctx;
use crate::frame::{Frame, Ib, Layer, Link, Mad, Net, OpName, RoceVersion};
use crate::text::hex_string as hex;
use crate::wire::ethernet::ethertype;
use crate::wire::mad::CmMessage;
use crate::wire::{icrc, Headers};

mod json;
mod tree;

pub use json::json;
pub use tree::verbose;

fn ether_name(t: u16) -> &'static str {
    match t {
        ethertype::IPV4 => "IPv4",
        ethertype::IPV6 => "IPv6",
        ethertype::ARP => "ARP",
        ethertype::LLDP => "LLDP",
        ethertype::ROCE_V1 => "RoCEv1",
        0x88F7 => "PTP",
        0x8809 => "Slow protocols (LACP)",
        0x8808 => "Ethernet flow control (PAUSE/PFC)",
        _ => "",
    }
}

fn ip_proto_name(p: u8) -> &'static str {
    match p {
        1 => "ICMP",
        6 => "TCP",
        17 => "UDP",
        58 => "ICMPv6",
        _ => "proto",
    }
}

/// A TCP segment in brief (the tools' out-of-band exchange shares the wire):
/// `TCP 43520 → 18515 [SYN, ACK] Len=0`.
struct Tcp {
    src: u16,
    dst: u16,
    flags: u8,
    len: usize,
}

impl Tcp {
    /// `seg` starts at the TCP header; `l4_len` is the segment length per the IP header.
    fn brief(seg: &[u8], l4_len: usize) -> Option<Tcp> {
        let h = seg.get(..14)?;
        let hlen = usize::from(h[12] >> 4) * 4;
        (hlen >= 20).then_some(Tcp {
            src: u16::from_be_bytes([h[0], h[1]]),
            dst: u16::from_be_bytes([h[2], h[3]]),
            flags: h[13],
            len: l4_len.saturating_sub(hlen),
        })
    }
}

impl fmt::Display for Tcp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TCP {} → {} [", self.src, self.dst)?;
        // Wireshark's order: [SYN, ACK], [PSH, ACK], [FIN, ACK].
        let names = [
            (0x01, "FIN"),
            (0x02, "SYN"),
            (0x04, "RST"),
            (0x08, "PSH"),
            (0x10, "ACK"),
            (0x20, "URG"),
            (0x40, "ECE"),
            (0x80, "CWR"),
        ];
        let set = names.iter().filter(|(bit, _)| self.flags & bit != 0);
        for (i, (_, name)) in set.enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        write!(f, "] Len={}", self.len)
    }
}

/// The one-line summary of a frame, without number and time:
/// `10.0.0.2 → 10.0.0.1  RC RDMA WRITE Only  QP=0x000011 PSN=5 AckReq VA=0x… R_Key=0x… Len=64`.
#[derive(Debug)]
pub struct Summary<'a> {
    pub frame: &'a Frame,
    pub data: &'a [u8],
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fr = self.frame;
        match fr.addrs() {
            Some((s, d)) => write!(f, "{s} → {d}  ")?,
            None => {
                if let Link::Ethernet { src, dst } = fr.link {
                    write!(f, "{src} → {dst}  ")?
                }
            }
        }
        Info { frame: fr, data: self.data }.fmt(f)
    }
}

/// The summary without the addresses: what `_ws.col.Info` shows. (tshark's Info
/// column has its own wording, e.g. `RC Send Only QP=0x000012 `; ours is the same
/// text as the one-line summary, so the two outputs agree with each other.)
#[derive(Debug)]
pub struct Info<'a> {
    pub frame: &'a Frame,
    pub data: &'a [u8],
}

impl fmt::Display for Info<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fr = self.frame;
        match &fr.ib {
            Some(ib) => {
                self.transport(f, ib)?;
                if let Some(m) = &fr.mad {
                    mad(f, m)?;
                }
                self.marks(f)?;
            }
            None => self.not_roce(f)?,
        }
        if let Some(s) = fr.stop {
            write!(f, " [stopped: {s}]")?;
        }
        Ok(())
    }
}

impl Info<'_> {
    /// Opcode, QP and PSN, the BTH flags that are set, each extension header's
    /// fields, and the payload length.
    fn transport(&self, f: &mut fmt::Formatter<'_>, ib: &Ib) -> fmt::Result {
        let fr = self.frame;
        let b = ib.bth;
        if fr.roce == Some(RoceVersion::V1) {
            f.write_str("RoCEv1 ")?;
        }
        write!(f, "{}  QP={:#08x} PSN={}", OpName(ib), b.dest_qp, b.psn)?;
        if b.solicited_event {
            f.write_str(" SE")?;
        }
        if b.ack_req {
            f.write_str(" AckReq")?;
        }
        if b.fecn {
            f.write_str(" FECN")?;
        }
        if b.becn {
            f.write_str(" BECN")?;
        }
        if b.p_key != 0xFFFF {
            write!(f, " P_Key={:#06x}", b.p_key)?;
        }
        extension_headers(f, ib)?;
        let has_payload = ib.info.is_none_or(|i| i.headers.contains(Headers::PAYLOAD));
        // Cut inside the headers: the payload's length is unknown, not zero.
        let headers_cut = fr.stop.is_some_and(|s| matches!(s.layer, Layer::Bth | Layer::ExtHeader));
        if has_payload && !headers_cut {
            let wire = fr.payload_len_on_wire().unwrap_or(0);
            write!(f, " Len={wire}")?;
            if wire != ib.payload_len() {
                write!(f, " ({} captured)", ib.payload_len())?;
            }
        }
        Ok(())
    }

    /// What a reader must not miss: congestion experienced, a bad ICRC.
    fn marks(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fr = self.frame;
        if fr.ecn() == Some(3) {
            f.write_str(" [ECN CE]")?;
        }
        if let Some(c) = fr.icrc_check(self.data) {
            if !c.ok() {
                write!(
                    f,
                    " [BAD ICRC {:#010x}, expected {:#010x}]",
                    u32::from_be_bytes(icrc::to_wire(c.wire)),
                    u32::from_be_bytes(icrc::to_wire(c.computed))
                )?;
            }
        }
        Ok(())
    }

    /// A frame without InfiniBand transport: UDP or TCP in brief, else the network
    /// layer's protocol.
    fn not_roce(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fr = self.frame;
        let tcp = |proto: u8, l4_len: usize| {
            let seg = self.data.get(fr.offsets.l4..)?;
            (proto == 6).then(|| Tcp::brief(seg, l4_len)).flatten()
        };
        match fr.net {
            Net::Ipv4(r) => match (
                fr.udp,
                tcp(r.protocol, r.total_len.saturating_sub(r.header_len.into()).into()),
            ) {
                (Some(u), _) => write!(f, "UDP {} → {} len={}", u.src_port, u.dst_port, u.length),
                (None, Some(t)) if r.frag_offset == 0 => write!(f, "{t}"),
                _ => write!(f, "IPv4 {} ({})", ip_proto_name(r.protocol), r.protocol),
            },
            Net::Ipv6(r) => match (fr.udp, tcp(r.next_header, r.payload_len.into())) {
                (Some(u), _) => write!(f, "UDP {} → {} len={}", u.src_port, u.dst_port, u.length),
                (None, Some(t)) => write!(f, "{t}"),
                _ => write!(f, "IPv6 {} ({})", ip_proto_name(r.next_header), r.next_header),
            },
            Net::Arp => f.write_str("ARP"),
            Net::Other { ethertype } => {
                write!(f, "Ethertype {ethertype:#06x} {}", ether_name(ethertype))
            }
            Net::Grh(_) | Net::None if fr.stop.is_none() => f.write_str("(no network layer)"),
            Net::Grh(_) | Net::None => Ok(()),
        }
    }
}

/// The extension headers' fields, in wire order.
fn extension_headers(f: &mut fmt::Formatter<'_>, ib: &Ib) -> fmt::Result {
    if let Some(x) = ib.xrceth {
        write!(f, " XRC_SRQ={x:#08x}")?;
    }
    if let Some(x) = ib.dceth {
        write!(f, " DCETH={x:#018x}")?;
    }
    if let Some(x) = &ib.dcceth {
        write!(f, " DCCETH={}", hex(x))?;
    }
    if let Some(x) = ib.rdeth {
        write!(f, " EEC={x:#08x}")?;
    }
    if let Some(d) = ib.deth {
        write!(f, " Q_Key={:#010x} SrcQP={:#08x}", d.q_key, d.src_qp)?;
    }
    if let Some(x) = ib.feth {
        write!(f, " FETH={x:#010x}")?;
    }
    if let Some(r) = ib.reth {
        write!(f, " VA={:#018x} R_Key={:#010x} DMALen={}", r.va, r.r_key, r.dma_len)?;
    }
    if let Some(a) = ib.atomiceth {
        write!(f, " VA={:#018x} R_Key={:#010x}", a.va, a.r_key)?;
        if ib.bth.opcode.0 & 0x1F == 0x13 {
            write!(f, " Swap={:#x} Compare={:#x}", a.swap_add, a.compare)?;
        } else {
            write!(f, " Add={:#x}", a.swap_add)?;
        }
    }
    if let Some(a) = ib.aeth {
        write!(f, " {} MSN={}", a.syndrome, a.msn)?;
    }
    if let Some(v) = ib.atomicacketh {
        write!(f, " OrigData={v:#x}")?;
    }
    if let Some(v) = ib.immdt {
        write!(f, " Imm={v:#010x}")?;
    }
    if let Some(v) = ib.ieth {
        write!(f, " InvR_Key={v:#010x}")?;
    }
    Ok(())
}

/// A MAD in brief: the CM message with the numbers that tie a connection
/// together, or the class and attribute of any other MAD.
fn mad(f: &mut fmt::Formatter<'_>, m: &Mad) -> fmt::Result {
    let Some(cm) = m.cm else {
        return write!(f, "  MAD {} attr={:#06x}", m.header.class_name(), m.header.attribute_id);
    };
    write!(f, "  CM {}", cm.name())?;
    match cm {
        CmMessage::Req(r) => write!(
            f,
            " QPN={:#08x} PSN={} ServiceID={:#018x}",
            r.local_qpn, r.starting_psn, r.service_id
        )?,
        CmMessage::Rep(r) => write!(f, " QPN={:#08x} PSN={}", r.local_qpn, r.starting_psn)?,
        CmMessage::Rej { reason, .. } => write!(f, " reason={reason}")?,
        CmMessage::Dreq { remote_qpn, .. } => write!(f, " RemoteQPN={remote_qpn:#08x}")?,
        _ => {}
    }
    write!(f, " CommID={:#010x}", cm.local_comm_id())
}

/// The summary line with frame number and relative time, as the default output prints it.
pub fn line(c: &Ctx<'_>, out: &mut String) {
    let rel = c.ts_ns.saturating_sub(c.first_ts_ns);
    let _ = write!(
        out,
        "{:>5} {:>4}.{:06}  {}",
        c.number,
        rel / 1_000_000_000,
        (rel % 1_000_000_000) / 1000,
        Summary { frame: c.frame, data: c.data }
    );
    if let Some(s) = c.comment {
        let _ = write!(out, "  [comment: {s}]");
    }
}
