//! The JSON Lines object of a frame: one `Serialize` type per layer, each made from
//! the decoded header by its `of`, and [`json`] putting them together.
//!
//! The shape is a promise to scripts (see [`json`]): keys come out sorted (the
//! object goes through a [`serde_json::Value`]), a layer the frame lacks is absent,
//! and only `roce.payload_len` and `eth.type` are ever `null`. Addresses, GIDs and
//! 64-bit identifiers written as hex are strings; everything else is a number or a
//! boolean.
//!
//! Owns: the JSON shape. Imports: the per-frame context, the decoded frame, the wire
//! vocabulary and the one-line summary.

use core::fmt::Display;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::Summary;
use crate::ctx::Ctx;
use crate::frame::{self, Frame, Ib, Link, Net, OpName, RoceVersion};
use crate::text::hex_string as hex;
use crate::wire::ethernet::{Mac, VlanTag};
use crate::wire::mad::{trim_zeros, CmMessage};
use crate::wire::{icrc, ipv4, ipv6, udp, AckKind, AethRepr, RNR_TIMER_US};

/// The JSON Lines object of a frame. Schema (stable; a key is absent when its layer is):
///
/// `{"frame":{"number","time_epoch_ns","len","cap_len","interface","comment"?},
///   "eth":{"src","dst","type" (null when no ethertype)}, "vlan":[{"id","pcp","dei","etype"}],
///   "sll":{"version","pkttype","protocol"},
///   "ip":{"version","src","dst","dscp","ecn","ttl","proto"},
///   "grh":{"sgid","dgid","tclass","flowlabel","paylen","hoplmt"},
///   "udp":{"srcport","dstport","length"},
///   "roce":{"version","transport" (RC UC RD DC UD XRC CNP VENDOR),"opcode","opcode_name","bth":{…},
///           "dceth" (hex text),"dcceth" (hex text),"rdeth","deth","feth","reth",
///           "atomiceth","aeth":{"syndrome","msn","type","credits"|"rnr_timer_us"|"nak"},
///           "atomicacketh","immdt","ieth","xrceth","payload_len" (null when unknown),
///           "payload_captured","icrc":{"wire","computed","ok"}},
///   "mad":{"mgmt_class","class_version","method","status","attribute_id","transaction_id",
///          "cm":{"type",…}?,"private_data"?,"rdma_cm":{"src","dst","port_space"}?},
///   "summary": "...", "stop":{"layer","offset","error"}}`
pub fn json(c: &Ctx<'_>) -> Value {
    // Every type below serialises to an object with text keys: this cannot fail.
    serde_json::to_value(Record::of(c)).unwrap_or(Value::Null)
}

/// Serialises a value as its `Display` text (addresses, GIDs, names).
fn text<T: Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

#[derive(Serialize)]
struct Record<'a> {
    frame: FrameMeta<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    eth: Option<Eth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sll: Option<Sll>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    vlan: Vec<Vlan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip: Option<Ip>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grh: Option<Grh>,
    #[serde(skip_serializing_if = "Option::is_none")]
    udp: Option<Udp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    roce: Option<Roce<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mad: Option<Mad>,
    #[serde(serialize_with = "text")]
    summary: Summary<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop: Option<Stop>,
}

impl<'a> Record<'a> {
    fn of(c: &Ctx<'a>) -> Record<'a> {
        let fr = c.frame;
        Record {
            frame: FrameMeta::of(c),
            eth: Eth::of(fr),
            sll: match fr.link {
                Link::Sll(s) => {
                    Some(Sll { version: s.version, pkttype: s.packet_type, protocol: s.protocol })
                }
                _ => None,
            },
            vlan: fr.vlans.iter().flatten().map(Vlan::of).collect(),
            ip: match fr.net {
                Net::Ipv4(r) => Some(Ip::v4(&r)),
                Net::Ipv6(r) => Some(Ip::v6(&r)),
                _ => None,
            },
            grh: match fr.net {
                Net::Grh(r) => Some(Grh::of(&r)),
                _ => None,
            },
            udp: fr.udp.as_ref().map(Udp::of),
            roce: fr.ib.as_ref().map(|ib| Roce::of(c, ib)),
            mad: fr.mad.as_ref().map(|m| Mad::of(c, m)),
            summary: Summary { frame: fr, data: c.data },
            stop: fr.stop.map(Stop::of),
        }
    }
}

/// The capture's record of the frame.
#[derive(Serialize)]
struct FrameMeta<'a> {
    number: u64,
    time_epoch_ns: u64,
    len: u32,
    cap_len: usize,
    interface: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<&'a str>,
}

impl<'a> FrameMeta<'a> {
    fn of(c: &Ctx<'a>) -> FrameMeta<'a> {
        FrameMeta {
            number: c.number,
            time_epoch_ns: c.ts_ns,
            len: c.orig_len,
            cap_len: c.data.len(),
            interface: c.interface,
            comment: c.comment,
        }
    }
}

#[derive(Serialize)]
struct Eth {
    #[serde(serialize_with = "text")]
    src: Mac,
    #[serde(serialize_with = "text")]
    dst: Mac,
    /// The first tag's TPID, else the ethertype (or 802.3 length).
    #[serde(rename = "type")]
    ty: Option<u16>,
}

impl Eth {
    fn of(fr: &Frame) -> Option<Eth> {
        match fr.link {
            Link::Ethernet { src, dst } => {
                Some(Eth { src, dst, ty: fr.vlans[0].map(|v| v.tpid).or(fr.ethertype) })
            }
            _ => None,
        }
    }
}

#[derive(Serialize)]
struct Sll {
    version: u8,
    pkttype: u16,
    protocol: u16,
}

#[derive(Serialize)]
struct Vlan {
    id: u16,
    pcp: u8,
    dei: bool,
    etype: u16,
}

impl Vlan {
    fn of(v: &VlanTag) -> Vlan {
        Vlan { id: v.id, pcp: v.pcp, dei: v.dei, etype: v.inner_type }
    }
}

/// IPv4 or IPv6, under tshark-like common names (`ttl` is IPv6's hop limit).
#[derive(Serialize)]
struct Ip {
    version: u8,
    #[serde(serialize_with = "text")]
    src: IpAddr,
    #[serde(serialize_with = "text")]
    dst: IpAddr,
    dscp: u8,
    ecn: u8,
    ttl: u8,
    proto: u8,
}

impl Ip {
    fn v4(r: &ipv4::Repr) -> Ip {
        Ip {
            version: 4,
            src: r.src.into(),
            dst: r.dst.into(),
            dscp: r.dscp,
            ecn: r.ecn,
            ttl: r.ttl,
            proto: r.protocol,
        }
    }

    fn v6(r: &ipv6::Repr) -> Ip {
        Ip {
            version: 6,
            src: r.src.into(),
            dst: r.dst.into(),
            dscp: r.traffic_class >> 2,
            ecn: r.ecn(),
            ttl: r.hop_limit,
            proto: r.next_header,
        }
    }
}

/// RoCEv1's Global Route Header, under tshark's `infiniband.grh.*` names.
#[derive(Serialize)]
struct Grh {
    #[serde(serialize_with = "text")]
    sgid: Ipv6Addr,
    #[serde(serialize_with = "text")]
    dgid: Ipv6Addr,
    tclass: u8,
    flowlabel: u32,
    paylen: u16,
    hoplmt: u8,
}

impl Grh {
    fn of(r: &ipv6::Repr) -> Grh {
        Grh {
            sgid: r.src,
            dgid: r.dst,
            tclass: r.traffic_class,
            flowlabel: r.flow_label,
            paylen: r.payload_len,
            hoplmt: r.hop_limit,
        }
    }
}

#[derive(Serialize)]
struct Udp {
    srcport: u16,
    dstport: u16,
    length: u16,
}

impl Udp {
    fn of(u: &udp::Repr) -> Udp {
        Udp { srcport: u.src_port, dstport: u.dst_port, length: u.length }
    }
}

/// The InfiniBand transport: BTH, extension headers (absent when the packet has
/// none), payload lengths and the ICRC.
#[derive(Serialize)]
struct Roce<'a> {
    version: u8,
    transport: &'static str,
    opcode: u8,
    #[serde(serialize_with = "text")]
    opcode_name: OpName<'a>,
    bth: Bth,
    #[serde(skip_serializing_if = "Option::is_none")]
    rdeth: Option<Rdeth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    xrceth: Option<Xrceth>,
    /// Hex text: tshark 4.0 shows no fields for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    dceth: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dcceth: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deth: Option<Deth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    feth: Option<Feth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reth: Option<Reth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    atomiceth: Option<AtomicEth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aeth: Option<Aeth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    atomicacketh: Option<AtomicAckEth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    immdt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ieth: Option<u32>,
    /// On the wire; `null` when the headers were cut short and it is unknown.
    payload_len: Option<usize>,
    payload_captured: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    icrc: Option<Icrc>,
}

impl<'a> Roce<'a> {
    fn of(c: &Ctx<'a>, ib: &'a Ib) -> Roce<'a> {
        let fr = c.frame;
        let b = ib.bth;
        Roce {
            version: if fr.roce == Some(RoceVersion::V1) { 1 } else { 2 },
            transport: ib.info.map_or(b.opcode.transport(), |i| i.transport).abbrev(),
            opcode: b.opcode.0,
            opcode_name: OpName(ib),
            bth: Bth::of(ib),
            rdeth: ib.rdeth.map(|eecnxt| Rdeth { eecnxt }),
            xrceth: ib.xrceth.map(|srq| Xrceth { srq }),
            dceth: ib.dceth.map(|x| format!("{x:#018x}")),
            dcceth: ib.dcceth.as_ref().map(|x| hex(x)),
            deth: ib.deth.map(|d| Deth { q_key: d.q_key, srcqp: d.src_qp }),
            feth: ib.feth.map(|x| Feth { selectivity: (x >> 4) & 3, placement: x & 0xF }),
            reth: ib.reth.map(|r| Reth { va: r.va, r_key: r.r_key, dmalen: r.dma_len }),
            atomiceth: ib.atomiceth.map(|a| AtomicEth {
                va: a.va,
                r_key: a.r_key,
                swapdt: a.swap_add,
                cmpdt: a.compare,
            }),
            aeth: ib.aeth.as_ref().map(Aeth::of),
            atomicacketh: ib.atomicacketh.map(|origremdt| AtomicAckEth { origremdt }),
            immdt: ib.immdt,
            ieth: ib.ieth,
            payload_len: fr.payload_len_on_wire(),
            payload_captured: ib.payload_len(),
            icrc: fr.icrc_check(c.data).map(Icrc::of),
        }
    }
}

/// The BTH under tshark's `infiniband.bth.*` names.
#[derive(Serialize)]
struct Bth {
    se: bool,
    m: bool,
    padcnt: u8,
    tver: u8,
    p_key: u16,
    fecn: bool,
    becn: bool,
    destqp: u32,
    a: bool,
    psn: u32,
}

impl Bth {
    fn of(ib: &Ib) -> Bth {
        let b = ib.bth;
        Bth {
            se: b.solicited_event,
            m: b.mig_req,
            padcnt: b.pad_count,
            tver: b.tver,
            p_key: b.p_key,
            fecn: b.fecn,
            becn: b.becn,
            destqp: b.dest_qp,
            a: b.ack_req,
            psn: b.psn.value(),
        }
    }
}

#[derive(Serialize)]
struct Rdeth {
    eecnxt: u32,
}

#[derive(Serialize)]
struct Xrceth {
    srq: u32,
}

#[derive(Serialize)]
struct Deth {
    q_key: u32,
    srcqp: u32,
}

#[derive(Serialize)]
struct Feth {
    selectivity: u32,
    placement: u32,
}

#[derive(Serialize)]
struct Reth {
    va: u64,
    r_key: u32,
    dmalen: u32,
}

#[derive(Serialize)]
struct AtomicEth {
    va: u64,
    r_key: u32,
    swapdt: u64,
    cmpdt: u64,
}

#[derive(Serialize)]
struct AtomicAckEth {
    origremdt: u64,
}

/// The AETH: syndrome and MSN, and what the syndrome means (`type` and the one
/// field that type carries).
#[derive(Serialize)]
struct Aeth {
    syndrome: u8,
    msn: u32,
    #[serde(flatten)]
    kind: AckJson,
}

#[derive(Serialize)]
#[serde(tag = "type")]
enum AckJson {
    #[serde(rename = "ACK")]
    Ack {
        credits: u8,
    },
    #[serde(rename = "RNR NAK")]
    RnrNak {
        rnr_timer_us: u32,
    },
    #[serde(rename = "NAK")]
    Nak {
        nak: &'static str,
    },
    Reserved,
}

impl Aeth {
    fn of(a: &AethRepr) -> Aeth {
        let kind = match a.syndrome.kind() {
            AckKind::Ack { credits } => AckJson::Ack { credits },
            AckKind::RnrNak { timer } => {
                AckJson::RnrNak { rnr_timer_us: RNR_TIMER_US[timer as usize] }
            }
            AckKind::Nak(n) => AckJson::Nak { nak: n.name() },
            AckKind::Reserved => AckJson::Reserved,
        };
        Aeth { syndrome: a.syndrome.0, msn: a.msn, kind }
    }
}

/// The ICRC as sent and as computed, each as it reads on the wire.
#[derive(Serialize)]
struct Icrc {
    wire: String,
    computed: String,
    ok: bool,
}

impl Icrc {
    fn of(chk: frame::IcrcCheck) -> Icrc {
        let wire = |v: u32| format!("{:#010x}", u32::from_be_bytes(icrc::to_wire(v)));
        Icrc { wire: wire(chk.wire), computed: wire(chk.computed), ok: chk.ok() }
    }
}

/// A Management Datagram: the common header, the CM message, the CM private data
/// (trailing zeros trimmed, as hex) and the rdma_cm header in it.
#[derive(Serialize)]
struct Mad {
    mgmt_class: u8,
    class_version: u8,
    method: u8,
    status: u16,
    attribute_id: u16,
    transaction_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cm: Option<Cm>,
    #[serde(skip_serializing_if = "Option::is_none")]
    private_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rdma_cm: Option<RdmaCm>,
}

impl Mad {
    fn of(c: &Ctx<'_>, m: &frame::Mad) -> Mad {
        let fr = c.frame;
        let h = m.header;
        let private = fr.cm_private_data(c.data);
        Mad {
            mgmt_class: h.mgmt_class,
            class_version: h.class_version,
            method: h.method,
            status: h.status,
            attribute_id: h.attribute_id,
            transaction_id: h.transaction_id,
            cm: m.cm.map(Cm::of),
            private_data: private.map(|p| hex(trim_zeros(p))),
            rdma_cm: private.and_then(|_| fr.rdma_cm_header(c.data)).map(|h| RdmaCm {
                src: SocketAddr::new(h.src, h.src_port),
                dst: SocketAddr::new(h.dst, h.dst_port),
                port_space: h.port_space,
            }),
        }
    }
}

#[derive(Serialize)]
struct RdmaCm {
    #[serde(serialize_with = "text")]
    src: SocketAddr,
    #[serde(serialize_with = "text")]
    dst: SocketAddr,
    port_space: u8,
}

/// A CM message, `type` naming it.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "UPPERCASE")]
enum Cm {
    Req {
        local_comm_id: u32,
        service_id: u64,
        local_qpn: u32,
        starting_psn: u32,
        p_key: u16,
        path_mtu: u8,
        retry_count: u8,
        rnr_retry_count: u8,
        #[serde(serialize_with = "text")]
        local_gid: Ipv6Addr,
        #[serde(serialize_with = "text")]
        remote_gid: Ipv6Addr,
    },
    Rep {
        local_comm_id: u32,
        remote_comm_id: u32,
        local_qpn: u32,
        starting_psn: u32,
    },
    Rtu {
        local_comm_id: u32,
        remote_comm_id: u32,
    },
    Rej {
        local_comm_id: u32,
        remote_comm_id: u32,
        reason: u16,
    },
    Mra {
        local_comm_id: u32,
        remote_comm_id: u32,
    },
    Dreq {
        local_comm_id: u32,
        remote_comm_id: u32,
        remote_qpn: u32,
    },
    Drep {
        local_comm_id: u32,
        remote_comm_id: u32,
    },
}

impl Cm {
    fn of(cm: CmMessage) -> Cm {
        match cm {
            CmMessage::Req(r) => Cm::Req {
                local_comm_id: r.local_comm_id,
                service_id: r.service_id,
                local_qpn: r.local_qpn,
                starting_psn: r.starting_psn.value(),
                p_key: r.p_key,
                path_mtu: r.path_mtu,
                retry_count: r.retry_count,
                rnr_retry_count: r.rnr_retry_count,
                local_gid: r.primary_local_gid,
                remote_gid: r.primary_remote_gid,
            },
            CmMessage::Rep(r) => Cm::Rep {
                local_comm_id: r.local_comm_id,
                remote_comm_id: r.remote_comm_id,
                local_qpn: r.local_qpn,
                starting_psn: r.starting_psn.value(),
            },
            CmMessage::Rtu { local_comm_id, remote_comm_id } => {
                Cm::Rtu { local_comm_id, remote_comm_id }
            }
            CmMessage::Rej { local_comm_id, remote_comm_id, reason, .. } => {
                Cm::Rej { local_comm_id, remote_comm_id, reason }
            }
            CmMessage::Mra { local_comm_id, remote_comm_id, .. } => {
                Cm::Mra { local_comm_id, remote_comm_id }
            }
            CmMessage::Dreq { local_comm_id, remote_comm_id, remote_qpn } => {
                Cm::Dreq { local_comm_id, remote_comm_id, remote_qpn }
            }
            CmMessage::Drep { local_comm_id, remote_comm_id } => {
                Cm::Drep { local_comm_id, remote_comm_id }
            }
        }
    }
}

/// Where and why decoding stopped.
#[derive(Serialize)]
struct Stop {
    layer: &'static str,
    offset: usize,
    #[serde(serialize_with = "text")]
    error: frame::Stop,
}

impl Stop {
    fn of(s: frame::Stop) -> Stop {
        Stop { layer: s.header.unwrap_or(s.layer.name()), offset: s.offset, error: s }
    }
}
