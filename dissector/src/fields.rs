//! Named fields for `-T fields -e NAME` output.
//!
//! Names and value formats are tshark 4.0's (`infiniband.bth.destqp` → `0x000012`,
//! `infiniband.reth.va` → `0x00007f0000001000`, …) so that scripts written against
//! tshark keep working; where a frame lacks the field the value is empty, and a field
//! that occurs several times (VLAN tags) is comma-joined, as tshark does. Our own
//! extras — things tshark does not decode — live under the `roce.` prefix.
//!
//! [`Field::lookup`] resolves a name once; [`write()`] formats a value per frame without
//! allocating.

use std::io::Write as _;
use std::net::IpAddr;

use crate::frame::{Frame, Link, Net, RoceVersion};
use crate::wire::ethernet::ethertype;
use crate::wire::aeth::AckKind;
use crate::wire::mad::CmMessage;
use crate::wire::{icrc, RNR_TIMER_US};

/// Per-frame context the fields are read from.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub number: u64,
    pub ts_ns: u64,
    /// Timestamp of the first frame (for `frame.time_relative`).
    pub first_ts_ns: u64,
    /// Timestamp of the previous frame (for `frame.time_delta`).
    pub prev_ts_ns: u64,
    pub orig_len: u32,
    pub interface: u32,
    pub data: &'a [u8],
    pub frame: &'a Frame,
    /// The pcapng packet comment (the lab switch notes what a fault rule did).
    pub comment: Option<&'a str>,
}

impl<'a> Ctx<'a> {
    /// The context of a captured record decoded as `frame`, times relative to
    /// `first_ts_ns` (and `prev_ts_ns` for the delta).
    #[inline]
    pub fn of(rec: &crate::capture::Record<'a>, frame: &'a Frame, first_ts_ns: u64, prev_ts_ns: u64) -> Ctx<'a> {
        Ctx {
            number: rec.number,
            ts_ns: rec.ts_ns,
            first_ts_ns,
            prev_ts_ns,
            orig_len: rec.orig_len,
            interface: rec.interface,
            data: rec.data,
            frame,
            comment: rec.comment,
        }
    }
}

macro_rules! fields {
    ($( $id:ident = $name:literal : $desc:literal ),* $(,)?) => {
        /// A field that `-e` can name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum Field { $($id),* }

        impl Field {
            /// Every field: name and one-line description.
            pub const ALL: &'static [(Field, &'static str, &'static str)] = &[
                $((Field::$id, $name, $desc)),*
            ];
        }
    };
}

fields! {
    FrameNumber = "frame.number": "Frame number, from 1",
    FrameLen = "frame.len": "Frame length on the wire",
    FrameCapLen = "frame.cap_len": "Bytes captured",
    FrameTimeEpoch = "frame.time_epoch": "Capture time, seconds since the epoch",
    FrameTimeRelative = "frame.time_relative": "Seconds since the first frame",
    FrameTimeDelta = "frame.time_delta": "Seconds since the previous frame",
    FrameInterfaceId = "frame.interface_id": "pcapng interface index",
    FrameComment = "frame.comment": "pcapng packet comment (e.g. what a lab fault rule did to the frame)",
    EthSrc = "eth.src": "Ethernet source MAC",
    EthDst = "eth.dst": "Ethernet destination MAC",
    EthType = "eth.type": "Ethertype in the Ethernet header",
    VlanId = "vlan.id": "802.1Q VLAN ID (one per 0x8100 tag)",
    VlanPriority = "vlan.priority": "802.1Q PCP (one per 0x8100 tag)",
    VlanEtype = "vlan.etype": "Type after each 0x8100 tag",
    QinqId = "ieee8021ad.id": "802.1ad (QinQ outer, 0x88a8) VLAN ID",
    QinqPriority = "ieee8021ad.priority": "802.1ad PCP",
    QinqDei = "ieee8021ad.dei": "802.1ad drop eligible indicator",
    IpSrc = "ip.src": "IPv4 source",
    IpDst = "ip.dst": "IPv4 destination",
    IpProto = "ip.proto": "IPv4 protocol",
    IpTtl = "ip.ttl": "IPv4 TTL",
    IpLen = "ip.len": "IPv4 total length",
    IpDscp = "ip.dsfield.dscp": "IPv4 DSCP",
    IpEcn = "ip.dsfield.ecn": "IPv4 ECN (3 = CE)",
    Ipv6Src = "ipv6.src": "IPv6 source",
    Ipv6Dst = "ipv6.dst": "IPv6 destination",
    Ipv6Plen = "ipv6.plen": "IPv6 payload length",
    Ipv6Nxt = "ipv6.nxt": "IPv6 next header",
    Ipv6Hlim = "ipv6.hlim": "IPv6 hop limit",
    UdpSrcport = "udp.srcport": "UDP source port",
    UdpDstport = "udp.dstport": "UDP destination port",
    UdpLength = "udp.length": "UDP length",
    GrhIpver = "infiniband.grh.ipver": "GRH IP version (RoCEv1)",
    GrhTclass = "infiniband.grh.tclass": "GRH traffic class",
    GrhFlowlabel = "infiniband.grh.flowlabel": "GRH flow label",
    GrhPaylen = "infiniband.grh.paylen": "GRH payload length",
    GrhNxthdr = "infiniband.grh.nxthdr": "GRH next header",
    GrhHoplmt = "infiniband.grh.hoplmt": "GRH hop limit",
    GrhSgid = "infiniband.grh.sgid": "GRH source GID",
    GrhDgid = "infiniband.grh.dgid": "GRH destination GID",
    BthOpcode = "infiniband.bth.opcode": "BTH opcode",
    BthSe = "infiniband.bth.se": "Solicited event",
    BthM = "infiniband.bth.m": "MigReq",
    BthPadcnt = "infiniband.bth.padcnt": "Pad count",
    BthTver = "infiniband.bth.tver": "Transport header version",
    BthPKey = "infiniband.bth.p_key": "Partition key",
    BthDestqp = "infiniband.bth.destqp": "Destination QP",
    BthA = "infiniband.bth.a": "AckReq",
    BthReserved7 = "infiniband.bth.reserved7": "Reserved bits after AckReq",
    BthPsn = "infiniband.bth.psn": "Packet sequence number",
    RdethEecnxt = "infiniband.rdeth.eecnxt": "RDETH EE context",
    DethQKey = "infiniband.deth.q_key": "DETH Q_Key",
    DethSrcqp = "infiniband.deth.srcqp": "DETH source QP",
    RethVa = "infiniband.reth.va": "Virtual address of the RETH, or of the AtomicETH (as tshark)",
    RethRKey = "infiniband.reth.r_key": "Remote key of the RETH, or of the AtomicETH (as tshark)",
    RethDmalen = "infiniband.reth.dmalen": "RETH DMA length",
    AtomicethSwapdt = "infiniband.atomiceth.swapdt": "AtomicETH swap (or add) data",
    AtomicethCmpdt = "infiniband.atomiceth.cmpdt": "AtomicETH compare data",
    AethSyndrome = "infiniband.aeth.syndrome": "AETH syndrome",
    AethMsn = "infiniband.aeth.msn": "AETH message sequence number",
    AtomicackethOrigremdt = "infiniband.atomicacketh.origremdt": "Original remote data",
    Immdt = "infiniband.immdt": "Immediate data (4 bytes, hex)",
    Ieth = "infiniband.ieth": "R_Key to invalidate (4 bytes, hex)",
    InvariantCrc = "infiniband.invariant.crc": "ICRC as on the wire (bytes read big-endian)",
    MadBaseversion = "infiniband.mad.baseversion": "MAD base version",
    MadMgmtclass = "infiniband.mad.mgmtclass": "MAD management class (0x07 = CM)",
    MadClassversion = "infiniband.mad.classversion": "MAD class version",
    MadMethod = "infiniband.mad.method": "MAD method",
    MadStatus = "infiniband.mad.status": "MAD status",
    MadClassspecific = "infiniband.mad.classspecific": "MAD class-specific field",
    MadTransactionid = "infiniband.mad.transactionid": "MAD transaction ID",
    MadAttributeid = "infiniband.mad.attributeid": "MAD attribute ID",
    MadAttributemodifier = "infiniband.mad.attributemodifier": "MAD attribute modifier",
    CmReqLocalCommId = "infiniband.cm.req": "CM REQ local communication ID",
    CmReqServiceid = "infiniband.cm.req.serviceid": "CM REQ service ID",
    CmReqLocalqpn = "infiniband.cm.req.localqpn": "CM REQ local QPN",
    CmReqStartpsn = "infiniband.cm.req.startpsn": "CM REQ starting PSN",
    CmRepLocalCommId = "infiniband.cm.rep": "CM REP local communication ID",
    CmRepRemotecommid = "infiniband.cm.rep.remotecommid": "CM REP remote communication ID",
    CmRepLocalqpn = "infiniband.cm.rep.localqpn": "CM REP local QPN",
    CmRepStartpsn = "infiniband.cm.rep.startpsn": "CM REP starting PSN",
    CmRtuLocalcommid = "infiniband.cm.rtu.localcommid": "CM RTU local communication ID",
    CmRtuRemotecommid = "infiniband.cm.rtu.remotecommid": "CM RTU remote communication ID",
    CmRejLocalcommid = "infiniband.cm.rej.localcommid": "CM REJ local communication ID",
    CmRejRemotecommid = "infiniband.cm.rej.remotecommid": "CM REJ remote communication ID",
    CmRejReason = "infiniband.cm.rej.reason": "CM REJ reason",
    CmDreqLocalcommid = "infiniband.cm.dreq.localcommid": "CM DREQ local communication ID",
    CmDreqRemotecommid = "infiniband.cm.dreq.remotecommid": "CM DREQ remote communication ID",
    RoceVersion = "roce.version": "RoCE version: 1 or 2",
    RoceOpcodeName = "roce.opcode.name": "Opcode name, e.g. RC RDMA WRITE Only",
    RoceTransport = "roce.transport": "Transport: RC UC RD UD XRC CNP VENDOR",
    RoceFecn = "roce.bth.fecn": "BTH FECN bit",
    RoceBecn = "roce.bth.becn": "BTH BECN bit",
    RoceEcnCe = "roce.ecn.ce": "1 if the IP header carries ECN CE",
    RoceAethType = "roce.aeth.type": "ACK, RNR NAK or NAK",
    RoceAethNak = "roce.aeth.nak": "NAK name, e.g. Remote Access Error",
    RoceAethCredits = "roce.aeth.credits": "ACK credit count",
    RoceAethRnrTimerUs = "roce.aeth.rnr_timer_us": "RNR NAK minimum timer, microseconds",
    RoceAtomicVa = "roce.atomiceth.va": "AtomicETH virtual address",
    RoceAtomicRKey = "roce.atomiceth.r_key": "AtomicETH remote key",
    RoceXrcSrq = "roce.xrceth.srq": "XRCETH XRC SRQ number",
    RoceFeth = "roce.feth": "FETH (FLUSH selectivity and placement)",
    RocePayloadLen = "roce.payload.len": "Payload bytes on the wire (pad and ICRC excluded)",
    RoceIcrcStatus = "roce.icrc.status": "ok or bad (empty when not captured)",
    RoceIcrcComputed = "roce.icrc.computed": "ICRC we computed, in the format of infiniband.invariant.crc",
    RoceCmType = "roce.cm.type": "CM message: REQ REP RTU REJ MRA DREQ DREP",
    RoceFlow = "roce.flow": "Flow id: SRC>DST/DESTQP",
    RoceStop = "roce.stop": "Where and why decoding stopped",
}

/// An unknown `-e` name, with the closest known one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    pub name: String,
    pub suggestion: Option<&'static str>,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown field '{}'", self.name)?;
        if let Some(s) = self.suggestion {
            write!(f, "; did you mean '{s}'?")?;
        }
        write!(f, " (`roce decode -G fields` lists them all)")
    }
}

impl std::error::Error for UnknownField {}

impl Field {
    pub fn lookup(name: &str) -> Result<Field, UnknownField> {
        if let Some(&(f, _, _)) = Field::ALL.iter().find(|(_, n, _)| *n == name) {
            return Ok(f);
        }
        let suggestion = crate::text::did_you_mean(name, Field::ALL.iter().map(|(_, n, _)| *n));
        Err(UnknownField { name: name.to_string(), suggestion })
    }

    pub fn name(self) -> &'static str {
        Field::ALL.iter().find(|(f, _, _)| *f == self).map_or("?", |(_, n, _)| n)
    }
}

fn dec(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// `0x` and `digits` lowercase hex digits.
fn hex(out: &mut Vec<u8>, v: u64, digits: u32) {
    let mut b = hex16(v);
    let start = 16 - digits.min(16) as usize;
    b[start..start + 2].copy_from_slice(b"0x");
    out.extend_from_slice(&b[start..]);
}

fn hex_bare(out: &mut Vec<u8>, v: u64, digits: u32) {
    out.extend_from_slice(&hex16(v)[18 - digits.min(16) as usize..]);
}

/// Two spare bytes (for a `0x`), then the sixteen hex digits of `v`: one copy out.
fn hex16(v: u64) -> [u8; 18] {
    let mut b = [0u8; 18];
    b[2..10].copy_from_slice(&hex8((v >> 32) as u32));
    b[10..].copy_from_slice(&hex8(v as u32));
    b
}

/// The eight lowercase hex digits of `v`, most significant first, computed eight at
/// a time in one u64 (SWAR): a table lookup per digit costs more than the field.
fn hex8(v: u32) -> [u8; 8] {
    // Spread the nibbles one per byte, the most significant into the top byte.
    let mut x = v as u64;
    x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F;
    // 0x01 in each byte holding 10..=15 (no byte carries: 15 + 6 < 256).
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    // '0' + nibble, and 'a' - '0' - 10 = 39 more for a letter.
    (x + 0x3030_3030_3030_3030 + letters * 39).to_be_bytes()
}

fn bit(out: &mut Vec<u8>, b: bool) {
    out.push(if b { b'1' } else { b'0' });
}

/// Seconds with nine decimals, as tshark prints times.
fn secs(out: &mut Vec<u8>, ns: u64) {
    dec(out, ns / 1_000_000_000);
    out.push(b'.');
    let frac = ns % 1_000_000_000;
    let mut b = itoa::Buffer::new();
    let s = b.format(frac);
    out.extend(std::iter::repeat_n(b'0', 9 - s.len()));
    out.extend_from_slice(s.as_bytes());
}

/// The text of the IPv4 addresses formatted last: a capture holds few distinct
/// addresses, and formatting one costs more than the rest of a field.
#[derive(Clone, Copy)]
struct V4Text {
    addr: u32,
    len: u8,
    text: [u8; 15],
}

thread_local! {
    static V4_CACHE: core::cell::Cell<[V4Text; 4]> =
        const { core::cell::Cell::new([V4Text { addr: 0, len: 0, text: [0; 15] }; 4]) };
}

fn ipv4(out: &mut Vec<u8>, v: std::net::Ipv4Addr) {
    let addr = u32::from(v);
    V4_CACHE.with(|c| {
        let c: &core::cell::Cell<[V4Text]> = c;
        let cache = c.as_slice_of_cells();
        let slot = &cache[(addr ^ addr >> 8) as usize % cache.len()];
        let mut e = slot.get();
        if e.len == 0 || e.addr != addr {
            let mut t = Vec::with_capacity(15);
            let [a, b, c2, d] = v.octets();
            dec(&mut t, a);
            t.push(b'.');
            dec(&mut t, b);
            t.push(b'.');
            dec(&mut t, c2);
            t.push(b'.');
            dec(&mut t, d);
            e.addr = addr;
            e.len = t.len() as u8;
            e.text[..t.len()].copy_from_slice(&t);
            slot.set(e);
        }
        out.extend_from_slice(&e.text[..e.len as usize]);
    })
}

fn ip(out: &mut Vec<u8>, a: IpAddr) {
    match a {
        IpAddr::V4(v) => ipv4(out, v),
        IpAddr::V6(v) => {
            let _ = write!(out, "{v}");
        }
    }
}

/// Appends the value of `field` for the frame in `c` (nothing if absent).
pub fn write(field: Field, c: &Ctx<'_>, out: &mut Vec<u8>) {
    use Field as F;
    let f = c.frame;
    // Cheap accessors, evaluated only by the arms that need them.
    let ib = f.ib.as_ref();
    let bth = ib.map(|i| &i.bth);
    let v4 = || match &f.net {
        Net::Ipv4(r) => Some(r),
        _ => None,
    };
    let v6 = || match &f.net {
        Net::Ipv6(r) => Some(r),
        _ => None,
    };
    let grh = || match &f.net {
        Net::Grh(r) => Some(r),
        _ => None,
    };
    let mad = f.mad.as_ref();
    let cm = || mad.and_then(|m| m.cm.as_ref());
    match field {
        F::FrameNumber => dec(out, c.number),
        F::FrameLen => dec(out, c.orig_len),
        F::FrameCapLen => dec(out, c.data.len()),
        F::FrameTimeEpoch => secs(out, c.ts_ns),
        F::FrameTimeRelative => secs(out, c.ts_ns.saturating_sub(c.first_ts_ns)),
        F::FrameTimeDelta => secs(out, c.ts_ns.saturating_sub(c.prev_ts_ns)),
        F::FrameInterfaceId => dec(out, c.interface),
        F::FrameComment => {
            if let Some(s) = c.comment {
                out.extend_from_slice(s.as_bytes())
            }
        }
        F::EthSrc | F::EthDst | F::EthType => {
            if let Link::Ethernet { src, dst } = f.link {
                match field {
                    F::EthSrc => {
                        let _ = write!(out, "{src}");
                    }
                    F::EthDst => {
                        let _ = write!(out, "{dst}");
                    }
                    _ => {
                        let t = f.vlans[0].map(|v| v.tpid).or(f.ethertype);
                        if let Some(t) = t {
                            hex(out, t as u64, 4)
                        }
                    }
                }
            }
        }
        F::VlanId | F::VlanPriority | F::VlanEtype | F::QinqId | F::QinqPriority | F::QinqDei => {
            // tshark files 802.1ad (0x88a8) tags under ieee8021ad.*, the rest under vlan.*.
            let qinq = matches!(field, F::QinqId | F::QinqPriority | F::QinqDei);
            let tags = f.vlans.iter().flatten().filter(|v| (v.tpid == ethertype::QINQ) == qinq);
            for (i, v) in tags.enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match field {
                    F::VlanId | F::QinqId => dec(out, v.id),
                    F::VlanPriority | F::QinqPriority => dec(out, v.pcp),
                    F::QinqDei => dec(out, v.dei as u8),
                    _ => hex(out, v.inner_type as u64, 4),
                }
            }
        }
        F::IpSrc => v4().into_iter().for_each(|r| ip(out, r.src.into())),
        F::IpDst => v4().into_iter().for_each(|r| ip(out, r.dst.into())),
        F::IpProto => v4().into_iter().for_each(|r| dec(out, r.protocol)),
        F::IpTtl => v4().into_iter().for_each(|r| dec(out, r.ttl)),
        F::IpLen => v4().into_iter().for_each(|r| dec(out, r.total_len)),
        F::IpDscp => v4().into_iter().for_each(|r| dec(out, r.dscp)),
        F::IpEcn => v4().into_iter().for_each(|r| dec(out, r.ecn)),
        F::Ipv6Src => v6().into_iter().for_each(|r| ip(out, r.src.into())),
        F::Ipv6Dst => v6().into_iter().for_each(|r| ip(out, r.dst.into())),
        F::Ipv6Plen => v6().into_iter().for_each(|r| dec(out, r.payload_len)),
        F::Ipv6Nxt => v6().into_iter().for_each(|r| dec(out, r.next_header)),
        F::Ipv6Hlim => v6().into_iter().for_each(|r| dec(out, r.hop_limit)),
        F::UdpSrcport => f.udp.into_iter().for_each(|u| dec(out, u.src_port)),
        F::UdpDstport => f.udp.into_iter().for_each(|u| dec(out, u.dst_port)),
        F::UdpLength => f.udp.into_iter().for_each(|u| dec(out, u.length)),
        F::GrhIpver => grh().into_iter().for_each(|_| dec(out, 6u8)),
        F::GrhTclass => grh().into_iter().for_each(|r| dec(out, r.traffic_class)),
        F::GrhFlowlabel => grh().into_iter().for_each(|r| dec(out, r.flow_label)),
        F::GrhPaylen => grh().into_iter().for_each(|r| dec(out, r.payload_len)),
        F::GrhNxthdr => grh().into_iter().for_each(|r| dec(out, r.next_header)),
        F::GrhHoplmt => grh().into_iter().for_each(|r| dec(out, r.hop_limit)),
        F::GrhSgid => grh().into_iter().for_each(|r| ip(out, r.src.into())),
        F::GrhDgid => grh().into_iter().for_each(|r| ip(out, r.dst.into())),
        F::BthOpcode => bth.into_iter().for_each(|b| dec(out, b.opcode.0)),
        F::BthSe => bth.into_iter().for_each(|b| bit(out, b.solicited_event)),
        F::BthM => bth.into_iter().for_each(|b| bit(out, b.mig_req)),
        F::BthPadcnt => bth.into_iter().for_each(|b| dec(out, b.pad_count)),
        F::BthTver => bth.into_iter().for_each(|b| dec(out, b.tver)),
        F::BthPKey => bth.into_iter().for_each(|b| dec(out, b.p_key)),
        F::BthDestqp => bth.into_iter().for_each(|b| hex(out, b.dest_qp as u64, 6)),
        F::BthA => bth.into_iter().for_each(|b| bit(out, b.ack_req)),
        F::BthReserved7 => bth.into_iter().for_each(|b| dec(out, b.resv7)),
        F::BthPsn => bth.into_iter().for_each(|b| dec(out, b.psn.value())),
        F::RdethEecnxt => ib.and_then(|i| i.rdeth).into_iter().for_each(|v| dec(out, v)),
        F::DethQKey => ib.and_then(|i| i.deth).into_iter().for_each(|d| hex(out, d.q_key as u64, 16)),
        F::DethSrcqp => ib.and_then(|i| i.deth).into_iter().for_each(|d| hex(out, d.src_qp as u64, 8)),
        // tshark shows the AtomicETH's VA and R_Key under the RETH's field names.
        F::RethVa => {
            let va = ib.and_then(|i| i.reth.map(|r| r.va).or(i.atomiceth.map(|a| a.va)));
            va.into_iter().for_each(|v| hex(out, v, 16))
        }
        F::RethRKey => {
            let k = ib.and_then(|i| i.reth.map(|r| r.r_key).or(i.atomiceth.map(|a| a.r_key)));
            k.into_iter().for_each(|v| hex(out, v as u64, 8))
        }
        F::RethDmalen => ib.and_then(|i| i.reth).into_iter().for_each(|r| dec(out, r.dma_len)),
        F::AtomicethSwapdt => ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| dec(out, a.swap_add)),
        F::AtomicethCmpdt => ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| dec(out, a.compare)),
        F::AethSyndrome => ib.and_then(|i| i.aeth).into_iter().for_each(|a| dec(out, a.syndrome.0)),
        F::AethMsn => ib.and_then(|i| i.aeth).into_iter().for_each(|a| dec(out, a.msn)),
        F::AtomicackethOrigremdt => ib.and_then(|i| i.atomicacketh).into_iter().for_each(|v| dec(out, v)),
        F::Immdt => ib.and_then(|i| i.immdt).into_iter().for_each(|v| hex_bare(out, v as u64, 8)),
        F::Ieth => ib.and_then(|i| i.ieth).into_iter().for_each(|v| hex_bare(out, v as u64, 8)),
        F::InvariantCrc => {
            if let Some(b) = ib.and_then(|i| i.icrc) {
                hex(out, u32::from_be_bytes(b) as u64, 8)
            }
        }
        F::MadBaseversion => mad.into_iter().for_each(|m| hex(out, m.header.base_version as u64, 2)),
        F::MadMgmtclass => mad.into_iter().for_each(|m| hex(out, m.header.mgmt_class as u64, 2)),
        F::MadClassversion => mad.into_iter().for_each(|m| hex(out, m.header.class_version as u64, 2)),
        F::MadMethod => mad.into_iter().for_each(|m| hex(out, m.header.method as u64, 2)),
        F::MadStatus => mad.into_iter().for_each(|m| hex(out, m.header.status as u64, 4)),
        F::MadClassspecific => mad.into_iter().for_each(|m| hex(out, m.header.class_specific as u64, 4)),
        F::MadTransactionid => mad.into_iter().for_each(|m| hex(out, m.header.transaction_id, 16)),
        F::MadAttributeid => mad.into_iter().for_each(|m| hex(out, m.header.attribute_id as u64, 4)),
        F::MadAttributemodifier => {
            mad.into_iter().for_each(|m| hex(out, m.header.attribute_modifier as u64, 8))
        }
        F::CmReqLocalCommId | F::CmReqServiceid | F::CmReqLocalqpn | F::CmReqStartpsn => {
            if let Some(CmMessage::Req(r)) = cm() {
                match field {
                    F::CmReqLocalCommId => hex(out, r.local_comm_id as u64, 8),
                    F::CmReqServiceid => hex(out, r.service_id, 16),
                    F::CmReqLocalqpn => hex(out, r.local_qpn as u64, 6),
                    _ => hex(out, r.starting_psn.value() as u64, 6),
                }
            }
        }
        F::CmRepLocalCommId | F::CmRepRemotecommid | F::CmRepLocalqpn | F::CmRepStartpsn => {
            if let Some(CmMessage::Rep(r)) = cm() {
                match field {
                    F::CmRepLocalCommId => hex(out, r.local_comm_id as u64, 8),
                    F::CmRepRemotecommid => hex(out, r.remote_comm_id as u64, 8),
                    F::CmRepLocalqpn => hex(out, r.local_qpn as u64, 6),
                    _ => hex(out, r.starting_psn.value() as u64, 6),
                }
            }
        }
        F::CmRtuLocalcommid | F::CmRtuRemotecommid => {
            if let Some(&CmMessage::Rtu { local_comm_id, remote_comm_id }) = cm() {
                let v = if field == F::CmRtuLocalcommid { local_comm_id } else { remote_comm_id };
                hex(out, v as u64, 8)
            }
        }
        F::CmRejLocalcommid | F::CmRejRemotecommid | F::CmRejReason => {
            if let Some(&CmMessage::Rej { local_comm_id, remote_comm_id, reason, .. }) = cm() {
                match field {
                    F::CmRejLocalcommid => hex(out, local_comm_id as u64, 8),
                    F::CmRejRemotecommid => hex(out, remote_comm_id as u64, 8),
                    _ => hex(out, reason as u64, 4),
                }
            }
        }
        F::CmDreqLocalcommid | F::CmDreqRemotecommid => {
            if let Some(&CmMessage::Dreq { local_comm_id, remote_comm_id, .. }) = cm() {
                let v = if field == F::CmDreqLocalcommid { local_comm_id } else { remote_comm_id };
                hex(out, v as u64, 8)
            }
        }
        F::RoceVersion => f.roce.into_iter().for_each(|v| out.push(if v == RoceVersion::V1 { b'1' } else { b'2' })),
        F::RoceOpcodeName => {
            if let Some(b) = bth {
                let _ = write!(out, "{}", b.opcode);
            }
        }
        F::RoceTransport => bth.into_iter().for_each(|b| out.extend_from_slice(b.opcode.transport().abbrev().as_bytes())),
        F::RoceFecn => bth.into_iter().for_each(|b| bit(out, b.fecn)),
        F::RoceBecn => bth.into_iter().for_each(|b| bit(out, b.becn)),
        F::RoceEcnCe => f.ecn().into_iter().for_each(|e| bit(out, e == 3)),
        F::RoceAethType | F::RoceAethNak | F::RoceAethCredits | F::RoceAethRnrTimerUs => {
            if let Some(a) = ib.and_then(|i| i.aeth) {
                match (field, a.syndrome.kind()) {
                    (F::RoceAethType, AckKind::Ack { .. }) => out.extend_from_slice(b"ACK"),
                    (F::RoceAethType, AckKind::RnrNak { .. }) => out.extend_from_slice(b"RNR NAK"),
                    (F::RoceAethType, AckKind::Nak(_)) => out.extend_from_slice(b"NAK"),
                    (F::RoceAethType, AckKind::Reserved) => out.extend_from_slice(b"Reserved"),
                    (F::RoceAethNak, AckKind::Nak(n)) => out.extend_from_slice(n.name().as_bytes()),
                    (F::RoceAethCredits, AckKind::Ack { credits }) => dec(out, credits),
                    (F::RoceAethRnrTimerUs, AckKind::RnrNak { timer }) => dec(out, RNR_TIMER_US[timer as usize]),
                    _ => {}
                }
            }
        }
        F::RoceAtomicVa => ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| hex(out, a.va, 16)),
        F::RoceAtomicRKey => ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| hex(out, a.r_key as u64, 8)),
        F::RoceXrcSrq => ib.and_then(|i| i.xrceth).into_iter().for_each(|v| hex(out, v as u64, 6)),
        F::RoceFeth => ib.and_then(|i| i.feth).into_iter().for_each(|v| hex(out, v as u64, 8)),
        F::RocePayloadLen => f.payload_len_on_wire().into_iter().for_each(|n| dec(out, n)),
        F::RoceIcrcStatus | F::RoceIcrcComputed => {
            if let Some(chk) = f.icrc_check(c.data) {
                if field == F::RoceIcrcStatus {
                    out.extend_from_slice(if chk.ok() { b"ok" } else { b"bad" });
                } else {
                    hex(out, u32::from_be_bytes(icrc::to_wire(chk.computed)) as u64, 8)
                }
            }
        }
        F::RoceCmType => {
            if let Some(m) = cm() {
                let n = m.name();
                let short = n.rsplit_once('(').map_or(n, |(_, s)| s.trim_end_matches(')'));
                out.extend_from_slice(short.as_bytes());
            }
        }
        F::RoceFlow => {
            if let (Some(b), Some((s, d))) = (bth, f.addrs()) {
                let _ = write!(out, "{s}>{d}/0x{:06x}", b.dest_qp);
            }
        }
        F::RoceStop => {
            if let Some(s) = f.stop {
                let _ = write!(out, "{s}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex_string(v: u64, digits: u32) -> String {
        let mut out = Vec::new();
        hex_bare(&mut out, v, digits);
        String::from_utf8(out).expect("hex digits are ASCII")
    }

    #[test]
    fn hex_digits_at_the_edges() {
        assert_eq!(hex_string(0, 6), "000000");
        assert_eq!(hex_string(u64::MAX, 16), "ffffffffffffffff");
        assert_eq!(hex_string(0x0123_4567_89ab_cdef, 16), "0123456789abcdef");
        assert_eq!(hex_string(0xfedc_ba98_7654_3210, 16), "fedcba9876543210");
        // Fewer digits keep the low ones, as a fixed-width field shows them.
        assert_eq!(hex_string(0x1234_5678_9abc, 8), "56789abc");
        assert_eq!(hex_string(0x9a, 1), "a");
        assert_eq!(hex_string(0x9a, 0), "");
        let prefixed = |v, digits| {
            let mut out = Vec::new();
            hex(&mut out, v, digits);
            String::from_utf8(out).expect("hex digits are ASCII")
        };
        assert_eq!(prefixed(0x12, 6), "0x000012");
        assert_eq!(prefixed(0x7f00_0000_0000, 16), "0x00007f0000000000");
        assert_eq!(prefixed(0xabc, 2), "0xbc");
    }

    proptest! {
        #[test]
        fn hex_matches_std(v in any::<u64>(), digits in 0u32..=16) {
            let masked = if digits == 16 { v } else { v & ((1u64 << (4 * digits)) - 1) };
            let want = if digits == 0 { String::new() } else { format!("{masked:0w$x}", w = digits as usize) };
            prop_assert_eq!(hex_string(v, digits), want);
        }
    }

    #[test]
    fn names_are_unique_and_found() {
        let mut names: Vec<_> = Field::ALL.iter().map(|(_, n, _)| *n).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate field name");
        for (f, name, _) in Field::ALL {
            assert_eq!(Field::lookup(name), Ok(*f));
            assert_eq!(f.name(), *name);
        }
    }

    #[test]
    fn unknown_fields_get_a_suggestion() {
        let e = Field::lookup("infiniband.bth.destqpn").unwrap_err();
        assert_eq!(e.suggestion, Some("infiniband.bth.destqp"));
        assert!(e.to_string().contains("did you mean 'infiniband.bth.destqp'"));
        assert_eq!(Field::lookup("zzz").unwrap_err().suggestion, None);
    }

    #[test]
    fn ipv4_cache_never_mixes_addresses() {
        let addrs = ["10.0.0.1", "10.0.0.2", "255.255.255.255", "0.0.0.0", "1.2.3.4", "10.0.0.1", "192.168.100.200"];
        for _ in 0..3 {
            for a in addrs {
                let mut o = Vec::new();
                ip(&mut o, a.parse().unwrap());
                assert_eq!(o, a.as_bytes());
            }
        }
    }

    #[test]
    fn formats() {
        let mut o = Vec::new();
        secs(&mut o, 1_700_000_000_000_002_000);
        assert_eq!(o, b"1700000000.000002000");
        o.clear();
        hex(&mut o, 0x12, 6);
        assert_eq!(o, b"0x000012");
    }
}
