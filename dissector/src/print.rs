//! Human and machine output for decoded frames: the one-line summary (default
//! output and snapshot goldens) here, the `-V` header tree ([`verbose`], in `tree`)
//! and the JSON Lines object ([`json()`]). One printer feeds the CLI, the
//! snapshot tests and the fuzz target alike.
//!
//! Owns: every human- and script-readable rendering of one frame. Imports: the
//! per-frame context ([`crate::ctx`]), the decoded frame ([`crate::frame`]) and the
//! wire vocabulary ([`crate::wire`]).

use core::fmt::{self, Write as _};
use std::net::SocketAddr;

use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::frame::{Frame, Ib, Layer, Link, Mad, Net, OpName, RoceVersion};
use crate::wire::aeth::AckKind;
use crate::wire::ethernet::ethertype;
use crate::wire::mad::{trim_zeros, CmMessage};
use crate::wire::{icrc, Headers, RNR_TIMER_US};

mod tree;

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

/// The bytes as lower-case hex digits, two a byte, no separators.
fn hex(b: &[u8]) -> String {
    b.iter().fold(String::with_capacity(b.len() * 2), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The JSON Lines object of a frame. Schema (stable; fields absent when the layer is):
///
/// `{"frame":{"number","time_epoch_ns","len","cap_len","interface","comment"?}, "eth":{"src","dst","type"},
///   "vlan":[{"id","pcp","dei","etype"}], "sll":{"version","pkttype","protocol"},
///   "ip":{"version","src","dst","dscp","ecn","ttl"}, "udp":{"srcport","dstport","length"},
///   "roce":{"version","transport" (RC UC RD DC UD XRC CNP VENDOR),"opcode","opcode_name","bth":{…},
///           "dceth" (hex text),"dcceth" (hex text),"rdeth","deth","feth","reth",
///           "atomiceth","aeth":{"syndrome","msn","type","credits"|"rnr_timer_us"|"nak"},
///           "atomicacketh","immdt","ieth","xrceth","payload_len",
///           "icrc":{"wire","computed","ok"}},
///   "mad":{"mgmt_class","method","attribute_id","transaction_id","cm":{"type",…},"private_data"?,"rdma_cm":{"src","dst","port_space"}?},
///   "summary": "...", "stop":{"layer","offset","error"}}`
pub fn json(c: &Ctx<'_>) -> Value {
    let fr = c.frame;
    let mut o = Map::new();
    let mut frame = json!({"number": c.number, "time_epoch_ns": c.ts_ns, "len": c.orig_len, "cap_len": c.data.len(), "interface": c.interface});
    if let (Some(s), Value::Object(m)) = (c.comment, &mut frame) {
        m.insert("comment".into(), s.into());
    }
    o.insert("frame".into(), frame);
    match fr.link {
        Link::Ethernet { src, dst } => {
            let t = fr.vlans[0].map(|v| v.tpid).or(fr.ethertype);
            o.insert(
                "eth".into(),
                json!({"src": src.to_string(), "dst": dst.to_string(), "type": t}),
            );
        }
        Link::Sll(s) => {
            o.insert(
                "sll".into(),
                json!({"version": s.version, "pkttype": s.packet_type, "protocol": s.protocol}),
            );
        }
        _ => {}
    }
    let vlans: Vec<Value> = fr
        .vlans
        .iter()
        .flatten()
        .map(|v| json!({"id": v.id, "pcp": v.pcp, "dei": v.dei, "etype": v.inner_type}))
        .collect();
    if !vlans.is_empty() {
        o.insert("vlan".into(), Value::Array(vlans));
    }
    match fr.net {
        Net::Ipv4(r) => {
            o.insert(
                "ip".into(),
                json!({"version": 4, "src": r.src.to_string(), "dst": r.dst.to_string(), "dscp": r.dscp, "ecn": r.ecn, "ttl": r.ttl, "proto": r.protocol}),
            );
        }
        Net::Ipv6(r) => {
            o.insert(
                "ip".into(),
                json!({"version": 6, "src": r.src.to_string(), "dst": r.dst.to_string(), "dscp": r.traffic_class >> 2, "ecn": r.ecn(), "ttl": r.hop_limit, "proto": r.next_header}),
            );
        }
        Net::Grh(r) => {
            o.insert(
                "grh".into(),
                json!({"sgid": r.src.to_string(), "dgid": r.dst.to_string(), "tclass": r.traffic_class, "flowlabel": r.flow_label, "paylen": r.payload_len, "hoplmt": r.hop_limit}),
            );
        }
        _ => {}
    }
    if let Some(u) = fr.udp {
        o.insert(
            "udp".into(),
            json!({"srcport": u.src_port, "dstport": u.dst_port, "length": u.length}),
        );
    }
    if let Some(ib) = &fr.ib {
        let b = ib.bth;
        let mut r = Map::new();
        r.insert("version".into(), json!(if fr.roce == Some(RoceVersion::V1) { 1 } else { 2 }));
        let transport = ib.info.map_or(b.opcode.transport(), |i| i.transport);
        r.insert("transport".into(), json!(transport.abbrev()));
        r.insert("opcode".into(), json!(b.opcode.0));
        r.insert("opcode_name".into(), json!(OpName(ib).to_string()));
        r.insert(
            "bth".into(),
            json!({"se": b.solicited_event, "m": b.mig_req, "padcnt": b.pad_count, "tver": b.tver, "p_key": b.p_key,
                   "fecn": b.fecn, "becn": b.becn, "destqp": b.dest_qp, "a": b.ack_req, "psn": b.psn.value()}),
        );
        if let Some(x) = ib.rdeth {
            r.insert("rdeth".into(), json!({"eecnxt": x}));
        }
        if let Some(x) = ib.xrceth {
            r.insert("xrceth".into(), json!({"srq": x}));
        }
        if let Some(x) = ib.dceth {
            r.insert("dceth".into(), json!(format!("{x:#018x}")));
        }
        if let Some(x) = &ib.dcceth {
            r.insert("dcceth".into(), json!(hex(x)));
        }
        if let Some(d) = ib.deth {
            r.insert("deth".into(), json!({"q_key": d.q_key, "srcqp": d.src_qp}));
        }
        if let Some(x) = ib.feth {
            r.insert("feth".into(), json!({"selectivity": (x >> 4) & 3, "placement": x & 0xF}));
        }
        if let Some(x) = ib.reth {
            r.insert("reth".into(), json!({"va": x.va, "r_key": x.r_key, "dmalen": x.dma_len}));
        }
        if let Some(a) = ib.atomiceth {
            r.insert(
                "atomiceth".into(),
                json!({"va": a.va, "r_key": a.r_key, "swapdt": a.swap_add, "cmpdt": a.compare}),
            );
        }
        if let Some(a) = ib.aeth {
            let mut m = Map::new();
            m.insert("syndrome".into(), json!(a.syndrome.0));
            m.insert("msn".into(), json!(a.msn));
            match a.syndrome.kind() {
                AckKind::Ack { credits } => {
                    m.insert("type".into(), json!("ACK"));
                    m.insert("credits".into(), json!(credits));
                }
                AckKind::RnrNak { timer } => {
                    m.insert("type".into(), json!("RNR NAK"));
                    m.insert("rnr_timer_us".into(), json!(RNR_TIMER_US[timer as usize]));
                }
                AckKind::Nak(n) => {
                    m.insert("type".into(), json!("NAK"));
                    m.insert("nak".into(), json!(n.name()));
                }
                AckKind::Reserved => {
                    m.insert("type".into(), json!("Reserved"));
                }
            }
            r.insert("aeth".into(), Value::Object(m));
        }
        if let Some(v) = ib.atomicacketh {
            r.insert("atomicacketh".into(), json!({"origremdt": v}));
        }
        if let Some(v) = ib.immdt {
            r.insert("immdt".into(), json!(v));
        }
        if let Some(v) = ib.ieth {
            r.insert("ieth".into(), json!(v));
        }
        r.insert("payload_len".into(), json!(fr.payload_len_on_wire()));
        r.insert("payload_captured".into(), json!(ib.payload_len()));
        if let Some(chk) = fr.icrc_check(c.data) {
            r.insert(
                "icrc".into(),
                json!({"wire": format!("{:#010x}", u32::from_be_bytes(icrc::to_wire(chk.wire))),
                       "computed": format!("{:#010x}", u32::from_be_bytes(icrc::to_wire(chk.computed))),
                       "ok": chk.ok()}),
            );
        }
        o.insert("roce".into(), Value::Object(r));
    }
    if let Some(m) = &fr.mad {
        let h = m.header;
        let mut mm = json!({"mgmt_class": h.mgmt_class, "class_version": h.class_version, "method": h.method,
                            "status": h.status, "attribute_id": h.attribute_id, "transaction_id": h.transaction_id});
        if let Some(cm) = m.cm {
            let v = match cm {
                CmMessage::Req(r) => {
                    json!({"type": "REQ", "local_comm_id": r.local_comm_id, "service_id": r.service_id,
                    "local_qpn": r.local_qpn, "starting_psn": r.starting_psn.value(), "p_key": r.p_key,
                    "path_mtu": r.path_mtu, "retry_count": r.retry_count, "rnr_retry_count": r.rnr_retry_count,
                    "local_gid": r.primary_local_gid.to_string(), "remote_gid": r.primary_remote_gid.to_string()})
                }
                CmMessage::Rep(r) => {
                    json!({"type": "REP", "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
                    "local_qpn": r.local_qpn, "starting_psn": r.starting_psn.value()})
                }
                CmMessage::Rtu { local_comm_id, remote_comm_id } => {
                    json!({"type": "RTU", "local_comm_id": local_comm_id, "remote_comm_id": remote_comm_id})
                }
                CmMessage::Rej { local_comm_id, remote_comm_id, reason, .. } => {
                    json!({"type": "REJ", "local_comm_id": local_comm_id, "remote_comm_id": remote_comm_id, "reason": reason})
                }
                CmMessage::Mra { local_comm_id, remote_comm_id, .. } => {
                    json!({"type": "MRA", "local_comm_id": local_comm_id, "remote_comm_id": remote_comm_id})
                }
                CmMessage::Dreq { local_comm_id, remote_comm_id, remote_qpn } => {
                    json!({"type": "DREQ", "local_comm_id": local_comm_id, "remote_comm_id": remote_comm_id, "remote_qpn": remote_qpn})
                }
                CmMessage::Drep { local_comm_id, remote_comm_id } => {
                    json!({"type": "DREP", "local_comm_id": local_comm_id, "remote_comm_id": remote_comm_id})
                }
            };
            mm["cm"] = v;
        }
        if let Some(p) = fr.cm_private_data(c.data) {
            mm["private_data"] = hex(trim_zeros(p)).into();
            if let Some(h) = fr.rdma_cm_header(c.data) {
                mm["rdma_cm"] = json!({"src": SocketAddr::new(h.src, h.src_port).to_string(),
                                        "dst": SocketAddr::new(h.dst, h.dst_port).to_string(), "port_space": h.port_space});
            }
        }
        o.insert("mad".into(), mm);
    }
    o.insert("summary".into(), json!(Summary { frame: fr, data: c.data }.to_string()));
    if let Some(s) = fr.stop {
        o.insert(
            "stop".into(),
            json!({"layer": s.header.unwrap_or(s.layer.name()), "offset": s.offset, "error": s.to_string()}),
        );
    }
    Value::Object(o)
}
