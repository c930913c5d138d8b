//! The `-V` tree (tshark `-V` style): one printer per header, each writing its own
//! lines, called in wire order by [`verbose`]. A header the frame lacks prints
//! nothing; where decoding stopped, the last line says why.
//!
//! Owns: the `-V` wording. Imports: the per-frame context, the decoded frame and the
//! wire vocabulary (names of ethertypes, syndromes, CM messages, the ICRC).

use core::fmt::Write as _;
use std::net::SocketAddr;

use super::ether_name;
use crate::ctx::Ctx;
use crate::frame::{Frame, Ib, Link, Mad, Net, OpName, RoceVersion};
use crate::text::hex_string as hex;
use crate::wire::ethernet::{ethertype, VlanTag};
use crate::wire::ext::{AtomicEthRepr, DethRepr, RethRepr};
use crate::wire::mad::{trim_zeros, RdmaCmHeader};
use crate::wire::{icrc, ipv4, ipv6, udp, AckKind, AethRepr, Headers, RNR_TIMER_US};

/// The `-V` tree of one frame: the frame line, then each layer it has, outermost first.
pub fn verbose(c: &Ctx<'_>, out: &mut String) {
    let fr = c.frame;
    frame(c, out);
    link(fr, out);
    for v in fr.vlans.iter().flatten() {
        vlan(v, out);
    }
    match fr.net {
        Net::Ipv4(r) => ipv4(&r, out),
        Net::Ipv6(r) => ipv6(&r, out),
        Net::Grh(r) => grh(&r, out),
        Net::Arp => out.push_str("Address Resolution Protocol\n"),
        Net::Other { ethertype } => {
            let _ =
                writeln!(out, "Ethertype {ethertype:#06x} {} (not decoded)", ether_name(ethertype));
        }
        Net::None => {}
    }
    if let Some(u) = fr.udp {
        udp(&u, out);
    }
    if let Some(ib) = &fr.ib {
        infiniband(c, ib, out);
    }
    if let Some(s) = fr.stop {
        let _ = writeln!(out, "[Decoding stopped: {s}]");
    }
}

fn frame(c: &Ctx<'_>, out: &mut String) {
    let _ = writeln!(
        out,
        "Frame {}: {} bytes on wire, {} bytes captured, interface {}, time {}.{:09}",
        c.number,
        c.orig_len,
        c.data.len(),
        c.interface,
        c.ts_ns / 1_000_000_000,
        c.ts_ns % 1_000_000_000
    );
}

fn link(fr: &Frame, out: &mut String) {
    match fr.link {
        Link::Ethernet { src, dst } => {
            let t = fr.vlans[0].map(|v| v.tpid).or(fr.ethertype).unwrap_or(0);
            if t <= ethertype::MAX_LEN {
                let _ = writeln!(out, "IEEE 802.3 Ethernet, Src: {src}, Dst: {dst}, Length: {t}");
            } else {
                let _ = writeln!(out, "Ethernet II, Src: {src}, Dst: {dst}, Type: {t:#06x}");
            }
        }
        Link::Sll(s) => {
            let _ = writeln!(
                out,
                "Linux cooked capture v{}, {} ({}), Protocol: {:#06x}{}",
                s.version,
                s.packet_type_name(),
                s.packet_type,
                s.protocol,
                s.ifindex.map(|i| format!(", ifindex {i}")).unwrap_or_default()
            );
        }
        Link::Raw => out.push_str("Raw IP\n"),
        Link::Null { family } => {
            let _ = writeln!(out, "Null/Loopback, family {family}");
        }
        Link::Unsupported(l) => {
            let _ = writeln!(out, "Link type {l} (not decoded)");
        }
        Link::Truncated(l) => {
            let _ = writeln!(out, "Link type {l}: header cut short");
        }
    }
}

fn vlan(v: &VlanTag, out: &mut String) {
    let _ = writeln!(
        out,
        "802.1Q Virtual LAN, TPID: {:#06x}, PRI: {}, DEI: {}, ID: {}, Type: {:#06x}",
        v.tpid, v.pcp, v.dei as u8, v.id, v.inner_type
    );
}

fn ipv4(r: &ipv4::Repr, out: &mut String) {
    let _ = writeln!(
        out,
        "Internet Protocol Version 4, Src: {}, Dst: {}\n    DSCP: {}, ECN: {}{}, Total Length: {}, Identification: {:#06x}, DF: {}, TTL: {}, Protocol: {}",
        r.src,
        r.dst,
        r.dscp,
        r.ecn,
        ecn_name(r.ecn),
        r.total_len,
        r.ident,
        r.dont_frag as u8,
        r.ttl,
        r.protocol
    );
}

fn ipv6(r: &ipv6::Repr, out: &mut String) {
    let _ = writeln!(
        out,
        "Internet Protocol Version 6, Src: {}, Dst: {}\n    Traffic Class: {:#04x} (ECN: {}{}), Flow Label: {:#07x}, Payload Length: {}, Next Header: {}, Hop Limit: {}",
        r.src, r.dst, r.traffic_class, r.ecn(), ecn_name(r.ecn()), r.flow_label, r.payload_len, r.next_header, r.hop_limit
    );
}

/// RoCEv1's Global Route Header (the IPv6 layout).
fn grh(r: &ipv6::Repr, out: &mut String) {
    let _ = writeln!(
        out,
        "Global Route Header (RoCEv1)\n    Traffic Class: {}, Flow Label: {}, Payload Length: {}, Next Header: {:#04x}, Hop Limit: {}\n    Source GID: {}\n    Destination GID: {}",
        r.traffic_class, r.flow_label, r.payload_len, r.next_header, r.hop_limit, r.src, r.dst
    );
}

fn udp(u: &udp::Repr, out: &mut String) {
    let _ = writeln!(
        out,
        "User Datagram Protocol, Src Port: {}, Dst Port: {}, Length: {}, Checksum: {:#06x}",
        u.src_port, u.dst_port, u.length, u.checksum
    );
}

/// The InfiniBand transport: BTH, the extension headers in the order the opcode
/// table gives them, a MAD, the payload and the ICRC.
fn infiniband(c: &Ctx<'_>, ib: &Ib, out: &mut String) {
    let fr = c.frame;
    let _ = writeln!(
        out,
        "InfiniBand (RoCE{})",
        if fr.roce == Some(RoceVersion::V1) { "v1" } else { "v2" }
    );
    bth(ib, out);
    if let Some(x) = ib.xrceth {
        let _ = writeln!(out, "    XRC Extended Transport Header\n        XRC SRQ: {x:#08x}");
    }
    if let Some(x) = ib.dceth {
        let _ = writeln!(out, "    DC Extended Transport Header (8 bytes; tshark 4.0 shows no fields for them)\n        {x:#018x}");
    }
    if let Some(x) = &ib.dcceth {
        let _ = writeln!(out, "    DC Connect Extended Transport Header\n        {}", hex(x));
    }
    if let Some(x) = ib.rdeth {
        let _ = writeln!(
            out,
            "    Reliable Datagram Extended Transport Header\n        EE Context: {x:#08x}"
        );
    }
    if let Some(d) = ib.deth {
        deth(&d, out);
    }
    if let Some(x) = ib.feth {
        feth(x, out);
    }
    if let Some(r) = ib.reth {
        reth(&r, out);
    }
    if let Some(a) = ib.atomiceth {
        atomiceth(&a, out);
    }
    if let Some(a) = ib.aeth {
        aeth(&a, out);
    }
    if let Some(v) = ib.atomicacketh {
        let _ = writeln!(
            out,
            "    Atomic ACK Extended Transport Header\n        Original Remote Data: {v:#018x}"
        );
    }
    if let Some(v) = ib.immdt {
        let _ = writeln!(out, "    Immediate Data: {v:#010x}");
    }
    if let Some(v) = ib.ieth {
        let _ = writeln!(out, "    Invalidate Extended Transport Header\n        R_Key: {v:#010x}");
    }
    if let Some(m) = &fr.mad {
        mad(c, m, out);
    }
    payload(c, ib, out);
    icrc(c, out);
}

fn bth(ib: &Ib, out: &mut String) {
    let b = ib.bth;
    let _ = writeln!(out, "    Base Transport Header");
    let _ = writeln!(out, "        Opcode: {} ({})", b.opcode.0, OpName(ib));
    let _ = writeln!(
        out,
        "        Solicited Event: {}, MigReq: {}, Pad Count: {}, Header Version: {}",
        b.solicited_event as u8, b.mig_req as u8, b.pad_count, b.tver
    );
    let _ = writeln!(out, "        Partition Key: {:#06x}", b.p_key);
    let _ = writeln!(
        out,
        "        FECN: {}, BECN: {}, Reserved: {:#04x}",
        b.fecn as u8, b.becn as u8, b.resv6
    );
    let _ = writeln!(out, "        Destination QP: {:#08x}", b.dest_qp);
    let _ =
        writeln!(out, "        Acknowledge Request: {}, Reserved: {}", b.ack_req as u8, b.resv7);
    let _ = writeln!(out, "        Packet Sequence Number: {}", b.psn);
    if ib.info.is_none() {
        let _ = writeln!(
            out,
            "        (opcode not in the IBA tables: bytes after the BTH shown as payload)"
        );
    }
    if ib.is_dc() {
        let _ = writeln!(
            out,
            "        (an RD-range opcode read as mlx5 Dynamically Connected transport, as tshark 4.0 reads it)"
        );
    }
}

fn deth(d: &DethRepr, out: &mut String) {
    let _ = writeln!(
        out,
        "    Datagram Extended Transport Header\n        Queue Key: {:#010x}\n        Source QP: {:#08x}",
        d.q_key, d.src_qp
    );
}

fn feth(x: u32, out: &mut String) {
    let _ = writeln!(
        out,
        "    FLUSH Extended Transport Header\n        Selectivity Level: {}, Placement Type: {:#x}",
        (x >> 4) & 3,
        x & 0xF
    );
}

fn reth(r: &RethRepr, out: &mut String) {
    let _ = writeln!(
        out,
        "    RDMA Extended Transport Header\n        Virtual Address: {:#018x}\n        Remote Key: {:#010x}\n        DMA Length: {}",
        r.va, r.r_key, r.dma_len
    );
}

fn atomiceth(a: &AtomicEthRepr, out: &mut String) {
    let _ = writeln!(
        out,
        "    Atomic Extended Transport Header\n        Virtual Address: {:#018x}\n        Remote Key: {:#010x}\n        Swap (or Add) Data: {:#018x}\n        Compare Data: {:#018x}",
        a.va, a.r_key, a.swap_add, a.compare
    );
}

/// The AETH, with what its syndrome means to the requester.
fn aeth(a: &AethRepr, out: &mut String) {
    let _ = writeln!(out, "    ACK Extended Transport Header");
    let _ = writeln!(out, "        Syndrome: {:#04x} ({})", a.syndrome.0, a.syndrome);
    match a.syndrome.kind() {
        AckKind::Nak(n) => {
            if let Some(wc) = n.wc_status() {
                let _ =
                    writeln!(out, "            the requester's work completion fails with {wc}");
            }
        }
        AckKind::RnrNak { timer } => {
            let _ = writeln!(
                out,
                "            receiver not ready: no receive WQE posted; retry after ≥ {} µs",
                RNR_TIMER_US[timer as usize]
            );
        }
        AckKind::Ack { .. } | AckKind::Reserved => {}
    }
    let _ = writeln!(out, "        Message Sequence Number: {}", a.msn);
}

/// A Management Datagram: its common header, the CM message, and the CM private
/// data (with the rdma_cm header when the connection was made through librdmacm).
fn mad(c: &Ctx<'_>, m: &Mad, out: &mut String) {
    let fr = c.frame;
    let h = m.header;
    let _ = writeln!(
        out,
        "    Management Datagram: class {:#04x} ({}), version {}, method {:#04x}, status {:#06x}, TID {:#018x}, attribute {:#06x}",
        h.mgmt_class, h.class_name(), h.class_version, h.method, h.status, h.transaction_id, h.attribute_id
    );
    if let Some(cm) = m.cm {
        let _ = writeln!(out, "        {}: {:?}", cm.name(), cm);
    }
    let Some(p) = fr.cm_private_data(c.data) else { return };
    let mut rest = p;
    let _ = writeln!(out, "        Private Data: {} bytes", p.len());
    if let Some(h) = fr.rdma_cm_header(c.data) {
        let _ = writeln!(
            out,
            "            rdma_cm: {} → {} (port space {:#04x}), {} bytes left for the application",
            SocketAddr::new(h.src, h.src_port),
            SocketAddr::new(h.dst, h.dst_port),
            h.port_space,
            p.len() - RdmaCmHeader::LEN
        );
        rest = &p[RdmaCmHeader::LEN..];
    }
    let used = trim_zeros(rest);
    if used.is_empty() {
        let _ = writeln!(out, "            (all zero)");
    } else {
        hexdump(used, 256, out);
    }
}

/// The payload's length (on the wire, and captured when less) and its first bytes.
fn payload(c: &Ctx<'_>, ib: &Ib, out: &mut String) {
    let pl = c.data.get(ib.payload.clone()).unwrap_or(&[]);
    if pl.is_empty() && !ib.info.is_some_and(|i| i.headers.contains(Headers::PAYLOAD)) {
        return;
    }
    let _ = match c.frame.payload_len_on_wire() {
        Some(w) if w != pl.len() => writeln!(out, "    Payload: {w} bytes ({} captured)", pl.len()),
        _ => writeln!(out, "    Payload: {} bytes", pl.len()),
    };
    hexdump(pl, 64, out);
}

fn icrc(c: &Ctx<'_>, out: &mut String) {
    match c.frame.icrc_check(c.data) {
        Some(chk) => {
            let _ = writeln!(
                out,
                "    Invariant CRC: {:#010x} [{}]",
                u32::from_be_bytes(icrc::to_wire(chk.wire)),
                if chk.ok() {
                    "correct".to_string()
                } else {
                    format!(
                        "BAD, should be {:#010x}",
                        u32::from_be_bytes(icrc::to_wire(chk.computed))
                    )
                }
            );
        }
        None => out.push_str("    Invariant CRC: not captured\n"),
    }
}

/// The ECN codepoint's name, with its leading space: ` (ECT(0))`.
fn ecn_name(e: u8) -> &'static str {
    match e {
        0 => " (Not-ECT)",
        1 => " (ECT(1))",
        2 => " (ECT(0))",
        _ => " (CE)",
    }
}

/// Indented hex dump of at most `max` bytes, 16 a line, then how many were left out.
fn hexdump(b: &[u8], max: usize, out: &mut String) {
    for (i, chunk) in b[..b.len().min(max)].chunks(16).enumerate() {
        let _ = write!(out, "        {:04x} ", i * 16);
        for x in chunk {
            let _ = write!(out, " {x:02x}");
        }
        out.push('\n');
    }
    if b.len() > max {
        let _ = writeln!(out, "        … {} more bytes", b.len() - max);
    }
}
