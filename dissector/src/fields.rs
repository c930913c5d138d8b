//! Named fields for `-T fields -e NAME` output and for display filters.
//!
//! Names and value formats are tshark 4.0's (`infiniband.bth.destqp` → `0x000012`,
//! `infiniband.reth.va` → `0x00007f0000001000`, …) so that scripts written against
//! tshark keep working; where a frame lacks the field the value is empty, and a field
//! that occurs several times (VLAN tags, `ip.addr`) is comma-joined, as tshark does.
//! Our own extras — things tshark does not decode — live under the `roce.` prefix.
//!
//! One function, [`visit`], reads every field of a frame as typed [`Value`]s; `-T
//! fields` formats them ([`write()`], no allocation per frame) and display filters
//! ([`crate::filter`]) compare them. [`Field::lookup`] resolves a name once;
//! [`Field::ty`] says what a filter may compare a field with.
//!
//! Owns: the field names, their types (and, for numbers, the largest value tshark's
//! type for them holds: [`Field::max`]) and value formats; its child `protocols` owns
//! the protocol and header names (`frame.protocols`, presence tests) and the bytes
//! each protocol covers ([`ProtoBytes`]: `data.data`, `udp.payload`, `eth contains …`).
//! Imports: the per-frame context ([`crate::ctx`]), the decoded frame, the wire
//! vocabulary, the summary ([`crate::print::Info`], for `_ws.col.Info`) and did-you-mean
//! ([`crate::text`]).

use core::fmt;
use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::ctx::{Ctx, Shown};
use crate::frame::{Link, Net, OpName, RoceVersion};
use crate::wire::aeth::AckKind;
use crate::wire::ethernet::{ethertype, Mac};
use crate::wire::{icrc, RNR_TIMER_US};

/// The MAD and CM fields' values.
mod mad;
/// `frame.protocols`, the Protocol column and header presence.
mod protocols;
pub use protocols::{col_protocol, Covered, Header, ProtoBytes, Protocols};

macro_rules! fields {
    ($( $id:ident = $name:literal : $desc:literal ),* $(,)?) => {
        /// A field that `-e` can name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum Field { $($id),* }

        impl Field {
            /// Every field: name and one-line description, in `-G fields` order.
            pub const ALL: &'static [(Field, &'static str, &'static str)] = &[
                $((Field::$id, $name, $desc)),*
            ];

            /// [`write_shown`] made for this one field: the field's match and its
            /// value's are settled when this is compiled, not per frame.
            pub fn writer(self) -> Writer {
                match self {
                    $(Field::$id => |c, shown, out| write_shown(Field::$id, c, shown, out)),*
                }
            }

            /// [`visit`] made for this one field, handing its values to a
            /// [`Sink`] (a typed column, say): the field's match and which value
            /// it gives are settled when this is compiled, not per frame.
            pub fn visitor<S: Sink>(self) -> fn(&Ctx<'_>, Shown, &mut S) {
                match self {
                    $(Field::$id => |c, shown, sink| visit(Field::$id, c, shown, #[inline(always)] |v| sink.value(v))),*
                }
            }
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
    FrameTimeDeltaDisplayed = "frame.time_delta_displayed": "Seconds since the previous displayed frame (the previous frame the display filter kept)",
    FrameInterfaceId = "frame.interface_id": "pcapng interface index",
    FrameComment = "frame.comment": "pcapng packet comment (e.g. what a lab fault rule did to the frame)",
    FrameProtocols = "frame.protocols": "Protocols in the frame, outermost first, as tshark names them: eth:ethertype:ip:udp:infiniband:data",
    ColProtocol = "_ws.col.Protocol": "The Protocol column: RRoCE (RoCEv2), RoCE (RoCEv1), TCP, UDP, ARP, IPv4, …, as tshark shows it",
    ColInfo = "_ws.col.Info": "The Info column: our one-line summary without the addresses (tshark's own Info text differs)",
    EthSrc = "eth.src": "Ethernet source MAC",
    EthDst = "eth.dst": "Ethernet destination MAC",
    EthAddrs = "eth.addr": "Ethernet destination and source MACs (two values, in header order)",
    EthType = "eth.type": "Ethertype in the Ethernet header",
    EthDstIg = "eth.dst.ig": "Destination MAC's I/G bit (1 = group: multicast or broadcast)",
    EthDstLg = "eth.dst.lg": "Destination MAC's L/G bit (1 = locally administered)",
    EthSrcIg = "eth.src.ig": "Source MAC's I/G bit",
    EthSrcLg = "eth.src.lg": "Source MAC's L/G bit (1 = locally administered)",
    EthIg = "eth.ig": "I/G bits of the destination and source MACs (two values, in header order)",
    EthLg = "eth.lg": "L/G bits of the destination and source MACs (two values, in header order)",
    EthDstOui = "eth.dst.oui": "Destination MAC's first three bytes (OUI), as a number",
    EthSrcOui = "eth.src.oui": "Source MAC's first three bytes (OUI), as a number",
    EthAddrOui = "eth.addr.oui": "OUIs of the destination and source MACs (two values, in header order)",
    VlanId = "vlan.id": "802.1Q VLAN ID (one per 0x8100 tag)",
    VlanPriority = "vlan.priority": "802.1Q PCP (one per 0x8100 tag)",
    VlanEtype = "vlan.etype": "Type after each 0x8100 tag",
    QinqId = "ieee8021ad.id": "802.1ad (QinQ outer, 0x88a8) VLAN ID",
    QinqPriority = "ieee8021ad.priority": "802.1ad PCP",
    QinqDei = "ieee8021ad.dei": "802.1ad drop eligible indicator",
    IpSrc = "ip.src": "IPv4 source",
    IpDst = "ip.dst": "IPv4 destination",
    IpAddrs = "ip.addr": "IPv4 source and destination (two values)",
    IpVersion = "ip.version": "IP header's version nibble: 4, 6 for IPv6 (as tshark), or what a bogus header says",
    IpHdrLen = "ip.hdr_len": "IPv4 header length in bytes (20 without options)",
    IpDsfield = "ip.dsfield": "IPv4 DS field: DSCP and ECN as one byte",
    IpId = "ip.id": "IPv4 identification",
    IpFlags = "ip.flags": "IPv4 flags, the 3 bits (0x2 = don't fragment)",
    IpFlagsRb = "ip.flags.rb": "IPv4 reserved flag bit",
    IpFlagsDf = "ip.flags.df": "IPv4 don't-fragment bit (RoCEv2 NICs set it)",
    IpFlagsMf = "ip.flags.mf": "IPv4 more-fragments bit",
    IpChecksum = "ip.checksum": "IPv4 header checksum, as carried",
    IpProto = "ip.proto": "IPv4 protocol",
    IpTtl = "ip.ttl": "IPv4 TTL",
    IpLen = "ip.len": "IPv4 total length",
    IpDscp = "ip.dsfield.dscp": "IPv4 DSCP",
    IpEcn = "ip.dsfield.ecn": "IPv4 ECN (3 = CE)",
    Ipv6Src = "ipv6.src": "IPv6 source",
    Ipv6Dst = "ipv6.dst": "IPv6 destination",
    Ipv6Addrs = "ipv6.addr": "IPv6 source and destination (two values)",
    Ipv6Version = "ipv6.version": "IPv6 header's version (6)",
    Ipv6Tclass = "ipv6.tclass": "IPv6 traffic class: DSCP and ECN as one byte",
    Ipv6TclassDscp = "ipv6.tclass.dscp": "IPv6 DSCP",
    Ipv6TclassEcn = "ipv6.tclass.ecn": "IPv6 ECN (3 = CE)",
    Ipv6Flow = "ipv6.flow": "IPv6 flow label",
    Ipv6Plen = "ipv6.plen": "IPv6 payload length",
    Ipv6Nxt = "ipv6.nxt": "IPv6 next header",
    Ipv6Hlim = "ipv6.hlim": "IPv6 hop limit",
    UdpSrcport = "udp.srcport": "UDP source port",
    UdpDstport = "udp.dstport": "UDP destination port",
    UdpPort = "udp.port": "UDP source and destination ports (two values)",
    UdpLength = "udp.length": "UDP length",
    UdpChecksum = "udp.checksum": "UDP checksum, as carried (RoCEv2 senders leave it 0)",
    UdpPayload = "udp.payload": "The bytes after the UDP header, to the end of the IP payload (a RoCE packet's BTH to ICRC)",
    TcpSrcport = "tcp.srcport": "TCP source port",
    TcpDstport = "tcp.dstport": "TCP destination port",
    TcpPort = "tcp.port": "TCP source and destination ports (two values)",
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
    AethSyndromeReserved = "infiniband.aeth.syndrome.reserved": "AETH syndrome bit 7 (reserved)",
    AethSyndromeOpcode = "infiniband.aeth.syndrome.opcode": "AETH syndrome bits 6-5: 0 ACK, 1 RNR NAK, 2 reserved, 3 NAK",
    AethSyndromeCreditCount = "infiniband.aeth.syndrome.credit_count": "AETH syndrome bits 4-0 of an ACK: the credit count",
    AethSyndromeTimer = "infiniband.aeth.syndrome.timer": "AETH syndrome bits 4-0 of an RNR NAK: the timer code",
    AethSyndromeReservedValue = "infiniband.aeth.syndrome.reserved_value": "AETH syndrome bits 4-0 under the reserved opcode 2",
    AethSyndromeErrorCode = "infiniband.aeth.syndrome.error_code": "AETH syndrome bits 4-0 of a NAK: the NAK code",
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
    MadData = "infiniband.mad.data": "MAD data: the 232 bytes after the common header",
    CmReqLocalCommId = "infiniband.cm.req": "CM REQ local communication ID",
    CmReqServiceid = "infiniband.cm.req.serviceid": "CM REQ service ID",
    CmReqServiceidPrefix = "infiniband.cm.req.serviceid.prefix": "CM REQ IP CM service ID: its prefix, 0000000001",
    CmReqServiceidProtocol = "infiniband.cm.req.serviceid.protocol": "CM REQ IP CM service ID: the port space (0x06 TCP, 0x11 UDP, 0x02 IPoIB, 0x13 IB)",
    CmReqServiceidDport = "infiniband.cm.req.serviceid.dport": "CM REQ IP CM service ID: the destination port",
    CmReqLocalqkey = "infiniband.cm.req.localqkey": "CM REQ local Q_Key",
    CmReqLocalqpn = "infiniband.cm.req.localqpn": "CM REQ local QPN",
    CmReqResponderres = "infiniband.cm.req.responderres": "CM REQ responder resources",
    CmReqInitdepth = "infiniband.cm.req.initdepth": "CM REQ initiator depth",
    CmReqTranspsvctype = "infiniband.cm.req.transpsvctype": "CM REQ transport service type (0 RC, 1 UC)",
    CmReqStartpsn = "infiniband.cm.req.startpsn": "CM REQ starting PSN",
    CmReqRetrcount = "infiniband.cm.req.retrcount": "CM REQ retry count",
    CmReqPkey = "infiniband.cm.req.pkey": "CM REQ partition key",
    CmReqPppmtu = "infiniband.cm.req.pppmtu": "CM REQ path MTU (1 = 256 bytes ... 5 = 4096)",
    CmReqRnrretrcount = "infiniband.cm.req.rnrretrcount": "CM REQ RNR retry count",
    CmReqSrq = "infiniband.cm.req.srq": "CM REQ SRQ bit",
    CmReqPrimLocalgid = "infiniband.cm.req.prim_localgid": "CM REQ primary local GID (RoCE over IPv6, RoCEv1)",
    CmReqPrimRemotegid = "infiniband.cm.req.prim_remotegid": "CM REQ primary remote GID (RoCE over IPv6, RoCEv1)",
    CmReqPrimLocalgidIpv4 = "infiniband.cm.req.prim_localgid_ipv4": "CM REQ primary local GID as IPv4 (RoCE over IPv4)",
    CmReqPrimRemotegidIpv4 = "infiniband.cm.req.prim_remotegid_ipv4": "CM REQ primary remote GID as IPv4 (RoCE over IPv4)",
    CmReqPrivate = "infiniband.cm.req.private": "CM REQ private data (92 bytes) under a service ID that is no IP CM one",
    CmReqIpCm = "infiniband.cm.req.ip_cm": "CM REQ private data (92 bytes) under an IP CM service ID",
    CmReqIpCmMajv = "infiniband.cm.req.ip_cm.majv": "IP CM major version",
    CmReqIpCmMinv = "infiniband.cm.req.ip_cm.minv": "IP CM minor version",
    CmReqIpCmIpv = "infiniband.cm.req.ip_cm.ipv": "IP CM IP version (4 or 6)",
    CmReqIpCmSport = "infiniband.cm.req.ip_cm.sport": "IP CM source port",
    CmReqIpCmSip6 = "infiniband.cm.req.ip_cm.sip6": "IP CM source address (IP version other than 4)",
    CmReqIpCmDip6 = "infiniband.cm.req.ip_cm.dip6": "IP CM destination address (IP version other than 4)",
    CmReqIpCmSip4 = "infiniband.cm.req.ip_cm.sip4": "IP CM source address (IP version 4)",
    CmReqIpCmDip4 = "infiniband.cm.req.ip_cm.dip4": "IP CM destination address (IP version 4)",
    CmReqIpCmPrivate = "infiniband.cm.req.ip_cm.private": "IP CM consumer private data (56 bytes)",
    CmRepLocalCommId = "infiniband.cm.rep": "CM REP local communication ID",
    CmRepRemotecommid = "infiniband.cm.rep.remotecommid": "CM REP remote communication ID",
    CmRepLocalqkey = "infiniband.cm.rep.localqkey": "CM REP local Q_Key",
    CmRepLocalqpn = "infiniband.cm.rep.localqpn": "CM REP local QPN",
    CmRepStartpsn = "infiniband.cm.rep.startpsn": "CM REP starting PSN",
    CmRepRespres = "infiniband.cm.rep.respres": "CM REP responder resources",
    CmRepInitdepth = "infiniband.cm.rep.initdepth": "CM REP initiator depth",
    CmRepRnrretrcount = "infiniband.cm.rep.rnrretrcount": "CM REP RNR retry count",
    CmRepSrq = "infiniband.cm.rep.srq": "CM REP SRQ bit",
    CmRepPrivate = "infiniband.cm.rep.private": "CM REP private data (196 bytes)",
    CmRtuLocalcommid = "infiniband.cm.rtu.localcommid": "CM RTU local communication ID",
    CmRtuRemotecommid = "infiniband.cm.rtu.remotecommid": "CM RTU remote communication ID",
    CmRtuPrivate = "infiniband.cm.rtu.private": "CM RTU private data (224 bytes)",
    CmRejLocalcommid = "infiniband.cm.rej.localcommid": "CM REJ local communication ID",
    CmRejRemotecommid = "infiniband.cm.rej.remotecommid": "CM REJ remote communication ID",
    CmRejMsgrej = "infiniband.cm.rej.msgrej": "CM REJ: which message is rejected (0 REQ, 1 REP, 2 other)",
    CmRejReason = "infiniband.cm.rej.reason": "CM REJ reason",
    CmRejAri = "infiniband.cm.rej.ari": "CM REJ additional reject information (72 bytes)",
    CmRejPrivate = "infiniband.cm.rej.private": "CM REJ private data (148 bytes)",
    CmDreqLocalcommid = "infiniband.cm.dreq.localcommid": "CM DREQ local communication ID",
    CmDreqRemotecommid = "infiniband.cm.dreq.remotecommid": "CM DREQ remote communication ID",
    CmDreqRemoteqpn = "infiniband.cm.req.remoteqpneecn": "CM DREQ remote QPN (tshark names it under cm.req)",
    CmDreqPrivate = "infiniband.cm.dreq.private": "CM DREQ private data (220 bytes)",
    CmDrepLocalcommid = "infiniband.cm.drsp.localcommid": "CM DREP local communication ID",
    CmDrepRemotecommid = "infiniband.cm.drsp.remotecommid": "CM DREP remote communication ID",
    CmDrepPrivate = "infiniband.cm.drsp.private": "CM DREP private data (224 bytes)",
    DataData = "data.data": "Bytes no dissector claims, as tshark's data: a RoCE payload and its pad (ICRC excluded), a TCP payload, …",
    DataLen = "data.len": "Length of data.data (a RoCE payload's pad included, unlike roce.payload.len)",
    RoceVersion = "roce.version": "RoCE version: 1 or 2",
    RoceOpcodeName = "roce.opcode.name": "Opcode name, e.g. RC RDMA WRITE Only",
    RoceOpcodeRole = "roce.opcode.role": "request or response, as the opcode table says (what roce flows counts as a request; empty for CNPs and unknown opcodes)",
    RoceTransport = "roce.transport": "Transport: RC UC RD DC UD XRC CNP VENDOR",
    RoceDceth = "roce.dceth": "DC: the 8 bytes after the BTH (tshark skips them unnamed)",
    RoceDcceth = "roce.dcceth": "DC connect: the 16-byte DCCETH, hex",
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
    RocePayloadLen = "roce.payload.len": "Payload bytes on the wire (pad and ICRC excluded; data.len counts the pad)",
    RoceIcrcStatus = "roce.icrc.status": "ok or bad (empty when not captured)",
    RoceIcrcComputed = "roce.icrc.computed": "ICRC we computed, in the format of infiniband.invariant.crc",
    RoceCmType = "roce.cm.type": "CM message: REQ REP RTU REJ MRA DREQ DREP",
    RoceFlow = "roce.flow": "Flow id: SRC>DST/DESTQP",
    RoceStop = "roce.stop": "Where and why decoding stopped",
}

/// What a field's values are: what a display filter may compare them with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ty {
    /// An unsigned number (any base on output).
    Uint,
    /// A flag: 0 or 1 (tshark's FT_BOOLEAN).
    Bool,
    Ipv4,
    Ipv6,
    Mac,
    /// Seconds, with nanoseconds.
    Time,
    /// Bytes, printed as bare hex.
    Bytes,
    /// Text.
    Str,
}

impl Ty {
    pub const fn name(self) -> &'static str {
        match self {
            Ty::Uint => "unsigned integer",
            Ty::Bool => "boolean",
            Ty::Ipv4 => "IPv4 address",
            Ty::Ipv6 => "IPv6 address",
            Ty::Mac => "Ethernet address",
            Ty::Time => "time in seconds",
            Ty::Bytes => "byte string",
            Ty::Str => "character string",
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value of a field, as [`visit`] hands it out: the number or address itself,
/// and how `-T fields` prints it.
#[derive(Clone, Copy)]
pub enum Value<'a> {
    /// A number printed in decimal.
    Dec(u64),
    /// A number printed `0x` and this many hex digits.
    Hex(u64, u32),
    Bool(bool),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Mac(Mac),
    /// Nanoseconds, printed as seconds with nine decimals (negative when a
    /// capture's timestamps go backwards, as tshark prints them).
    Secs(i64),
    Bytes(&'a [u8]),
    Str(&'a str),
    /// Text made when needed (names, the Info column).
    Text(&'a dyn fmt::Display),
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Dec(v) => write!(f, "Dec({v})"),
            Value::Hex(v, d) => write!(f, "Hex({v:#x}, {d})"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Ipv4(a) => write!(f, "Ipv4({a})"),
            Value::Ipv6(a) => write!(f, "Ipv6({a})"),
            Value::Mac(m) => write!(f, "Mac({m})"),
            Value::Secs(ns) => write!(f, "Secs({ns} ns)"),
            Value::Bytes(b) => write!(f, "Bytes({b:02x?})"),
            Value::Str(s) => write!(f, "Str({s:?})"),
            Value::Text(t) => write!(f, "Text({:?})", t.to_string()),
        }
    }
}

impl Value<'_> {
    pub const fn ty(&self) -> Ty {
        match self {
            Value::Dec(_) | Value::Hex(..) => Ty::Uint,
            Value::Bool(_) => Ty::Bool,
            Value::Ipv4(_) => Ty::Ipv4,
            Value::Ipv6(_) => Ty::Ipv6,
            Value::Mac(_) => Ty::Mac,
            Value::Secs(_) => Ty::Time,
            Value::Bytes(_) => Ty::Bytes,
            Value::Str(_) | Value::Text(_) => Ty::Str,
        }
    }

    /// Appends the value as `-T fields` prints it.
    #[inline(always)]
    pub fn write(&self, out: &mut Vec<u8>) {
        match *self {
            Value::Dec(v) => dec(out, v),
            Value::Hex(v, digits) => hex(out, v, digits),
            Value::Bool(b) => bit(out, b),
            Value::Ipv4(a) => ipv4(out, a),
            Value::Ipv6(a) => {
                let _ = write!(out, "{a}");
            }
            Value::Mac(m) => {
                let _ = write!(out, "{m}");
            }
            Value::Secs(ns) => {
                if ns < 0 {
                    out.push(b'-');
                }
                secs(out, ns.unsigned_abs())
            }
            Value::Bytes(b) => {
                for x in b {
                    hex_bare(out, u64::from(*x), 2);
                }
            }
            Value::Str(s) => out.extend_from_slice(s.as_bytes()),
            Value::Text(t) => {
                let _ = write!(out, "{t}");
            }
        }
    }
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

    /// The field can occur more than once in a frame ([`visit`] may give several
    /// values): `ip.addr` (source and destination), the VLAN tags of a double-tagged
    /// frame, ….
    pub const fn multi(self) -> bool {
        use Field as F;
        matches!(
            self,
            F::EthAddrs
                | F::EthIg
                | F::EthLg
                | F::EthAddrOui
                | F::IpAddrs
                | F::Ipv6Addrs
                | F::UdpPort
                | F::TcpPort
                | F::VlanId
                | F::VlanPriority
                | F::VlanEtype
                | F::QinqId
                | F::QinqPriority
                | F::QinqDei
        )
    }

    /// The type of the field's values (every value [`visit`] gives has it).
    pub const fn ty(self) -> Ty {
        use Field as F;
        match self {
            F::FrameTimeEpoch
            | F::FrameTimeRelative
            | F::FrameTimeDelta
            | F::FrameTimeDeltaDisplayed => Ty::Time,
            F::FrameComment | F::FrameProtocols | F::ColProtocol | F::ColInfo => Ty::Str,
            F::EthSrc | F::EthDst | F::EthAddrs => Ty::Mac,
            F::IpSrc
            | F::IpDst
            | F::IpAddrs
            | F::CmReqPrimLocalgidIpv4
            | F::CmReqPrimRemotegidIpv4
            | F::CmReqIpCmSip4
            | F::CmReqIpCmDip4 => Ty::Ipv4,
            F::Ipv6Src
            | F::Ipv6Dst
            | F::Ipv6Addrs
            | F::GrhSgid
            | F::GrhDgid
            | F::CmReqPrimLocalgid
            | F::CmReqPrimRemotegid
            | F::CmReqIpCmSip6
            | F::CmReqIpCmDip6 => Ty::Ipv6,
            F::BthSe
            | F::BthM
            | F::BthA
            | F::RoceFecn
            | F::RoceBecn
            | F::RoceEcnCe
            | F::EthDstIg
            | F::EthDstLg
            | F::EthSrcIg
            | F::EthSrcLg
            | F::EthIg
            | F::EthLg
            | F::IpFlagsRb
            | F::IpFlagsDf
            | F::IpFlagsMf => Ty::Bool,
            F::Immdt
            | F::Ieth
            | F::UdpPayload
            | F::DataData
            | F::RoceDcceth
            | F::MadData
            | F::CmReqServiceidPrefix
            | F::CmReqPrivate
            | F::CmReqIpCm
            | F::CmReqIpCmPrivate
            | F::CmRepPrivate
            | F::CmRtuPrivate
            | F::CmRejAri
            | F::CmRejPrivate
            | F::CmDreqPrivate
            | F::CmDrepPrivate => Ty::Bytes,
            F::RoceOpcodeName
            | F::RoceOpcodeRole
            | F::RoceTransport
            | F::RoceAethType
            | F::RoceAethNak
            | F::RoceIcrcStatus
            | F::RoceCmType
            | F::RoceFlow
            | F::RoceStop => Ty::Str,
            _ => Ty::Uint,
        }
    }
}

impl Field {
    /// The largest value of a number field, as tshark 4.0 types it (FT_UINT8 to
    /// FT_UINT64; `data.len` is FT_INT32), whatever bits of it the field uses: a
    /// display filter's `&` mask, and a number a masked field is compared with, may
    /// be no larger (tshark: "too big for this field"). Our `roce.*` numbers, and
    /// fields of other types, take any `u64`.
    pub const fn max(self) -> u64 {
        use Field as F;
        match self {
            F::IpVersion
            | F::IpHdrLen
            | F::IpDsfield
            | F::IpFlags
            | F::Ipv6Version
            | F::IpProto
            | F::IpTtl
            | F::IpDscp
            | F::IpEcn
            | F::Ipv6Nxt
            | F::Ipv6Hlim
            | F::GrhIpver
            | F::GrhNxthdr
            | F::GrhHoplmt
            | F::BthOpcode
            | F::BthPadcnt
            | F::BthTver
            | F::BthReserved7
            | F::AethSyndrome
            | F::AethSyndromeReserved
            | F::AethSyndromeOpcode
            | F::AethSyndromeCreditCount
            | F::AethSyndromeTimer
            | F::AethSyndromeReservedValue
            | F::AethSyndromeErrorCode
            | F::MadBaseversion
            | F::MadMgmtclass
            | F::MadClassversion
            | F::MadMethod
            | F::CmReqServiceidProtocol
            | F::CmReqResponderres
            | F::CmReqInitdepth
            | F::CmReqTranspsvctype
            | F::CmReqRetrcount
            | F::CmReqPppmtu
            | F::CmReqRnrretrcount
            | F::CmReqSrq
            | F::CmReqIpCmMajv
            | F::CmReqIpCmMinv
            | F::CmReqIpCmIpv
            | F::CmRepRespres
            | F::CmRepInitdepth
            | F::CmRepRnrretrcount
            | F::CmRepSrq
            | F::CmRejMsgrej => u8::MAX as u64,
            F::EthType
            | F::VlanId
            | F::VlanPriority
            | F::VlanEtype
            | F::QinqId
            | F::QinqPriority
            | F::QinqDei
            | F::IpLen
            | F::IpId
            | F::IpChecksum
            | F::UdpChecksum
            | F::Ipv6Plen
            | F::UdpSrcport
            | F::UdpDstport
            | F::UdpPort
            | F::UdpLength
            | F::TcpSrcport
            | F::TcpDstport
            | F::TcpPort
            | F::GrhTclass
            | F::GrhPaylen
            | F::BthPKey
            | F::MadStatus
            | F::MadClassspecific
            | F::MadAttributeid
            | F::CmReqServiceidDport
            | F::CmReqPkey
            | F::CmReqIpCmSport
            | F::CmRejReason => u16::MAX as u64,
            F::BthDestqp
            | F::BthPsn
            | F::RdethEecnxt
            | F::AethMsn
            | F::CmReqLocalqpn
            | F::CmReqStartpsn
            | F::CmRepLocalqpn
            | F::CmRepStartpsn
            | F::CmDreqRemoteqpn
            | F::EthDstOui
            | F::EthSrcOui
            | F::EthAddrOui
            | F::Ipv6Flow => 0xFF_FFFF,
            F::Ipv6Tclass
            | F::Ipv6TclassDscp
            | F::Ipv6TclassEcn
            | F::FrameNumber
            | F::FrameLen
            | F::FrameCapLen
            | F::FrameInterfaceId
            | F::GrhFlowlabel
            | F::DethSrcqp
            | F::RethRKey
            | F::RethDmalen
            | F::InvariantCrc
            | F::MadAttributemodifier
            | F::CmReqLocalCommId
            | F::CmReqLocalqkey
            | F::CmRepLocalCommId
            | F::CmRepRemotecommid
            | F::CmRepLocalqkey
            | F::CmRtuLocalcommid
            | F::CmRtuRemotecommid
            | F::CmRejLocalcommid
            | F::CmRejRemotecommid
            | F::CmDreqLocalcommid
            | F::CmDreqRemotecommid
            | F::CmDrepLocalcommid
            | F::CmDrepRemotecommid => u32::MAX as u64,
            F::DataLen => i32::MAX as u64,
            _ => u64::MAX,
        }
    }
}

/// Appends the first `len` bytes of `text`. The whole array is copied, a copy
/// whose size is known when this is compiled (a few register moves), and the
/// excess cut off: copying just `len` bytes would be a call to `memcpy`, which
/// costs more than the value it copies.
#[inline(always)]
fn push_prefix<const N: usize>(out: &mut Vec<u8>, text: &[u8; N], len: usize) {
    let at = out.len();
    out.extend_from_slice(text);
    out.truncate(at + len.min(N));
}

/// "00" to "99".
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// `v` in decimal.
#[inline(always)]
fn dec(out: &mut Vec<u8>, v: impl Into<u64>) {
    let mut v: u64 = v.into();
    let len = v.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut b = [0u8; 20];
    let mut i = len;
    while v >= 100 {
        let d = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        b[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    }
    if v >= 10 {
        let d = v as usize * 2;
        b[..2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    } else {
        b[0] = b'0' + v as u8;
    }
    push_prefix(out, &b, len);
}

/// `0x` and `digits` lowercase hex digits.
#[inline(always)]
fn hex(out: &mut Vec<u8>, v: u64, digits: u32) {
    let mut b = [0u8; 18];
    b[..2].copy_from_slice(b"0x");
    b[2..].copy_from_slice(&hex16(v, digits));
    push_prefix(out, &b, 2 + digits.min(16) as usize);
}

fn hex_bare(out: &mut Vec<u8>, v: u64, digits: u32) {
    push_prefix(out, &hex16(v, digits), digits.min(16) as usize);
}

/// The low `digits` hex digits of `v` (at most 16), most significant first, at the
/// start of the array.
#[inline(always)]
fn hex16(v: u64, digits: u32) -> [u8; 16] {
    let v = v.checked_shl(4 * (16 - digits.min(16))).unwrap_or(0);
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hex8((v >> 32) as u32));
    b[8..].copy_from_slice(&hex8(v as u32));
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
    let mut frac = ns % 1_000_000_000;
    let mut b = [b'0'; 9];
    for d in b.iter_mut().rev() {
        *d = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    out.extend_from_slice(&b);
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
        push_prefix(out, &e.text, e.len as usize);
    })
}

/// Appends the value of `field` for the frame in `c` (nothing if absent), every
/// frame taken as displayed (see [`Shown`]).
#[inline]
pub fn write(field: Field, c: &Ctx<'_>, out: &mut Vec<u8>) {
    write_shown(field, c, Shown::every(c), out)
}

/// A function that appends one field's value (see [`Field::writer`]).
pub type Writer = fn(&Ctx<'_>, Shown, &mut Vec<u8>);

/// What takes a field's values from [`Field::visitor`].
pub trait Sink {
    fn value(&mut self, v: Value<'_>);
}

/// [`write()`] for a caller that displays only some frames.
#[inline(always)]
pub fn write_shown(field: Field, c: &Ctx<'_>, shown: Shown, out: &mut Vec<u8>) {
    let mut first = true;
    // Inlined into each of `visit`'s arms, so that a writer made for one field
    // (`Field::writer`) settles which value it writes when it is compiled.
    visit(
        field,
        c,
        shown,
        #[inline(always)]
        |v| {
            if !first {
                out.push(b',');
            }
            first = false;
            v.write(out)
        },
    )
}

/// Hands each value of `field` in the frame of `c` to `f`, in tshark's order
/// (`ip.addr`: source, then destination; `eth.addr`: destination, then source, as
/// the header has them). Absent fields call `f` never.
#[inline(always)]
pub fn visit(field: Field, c: &Ctx<'_>, shown: Shown, mut f: impl FnMut(Value<'_>)) {
    use Field as F;
    use Value::{Dec, Hex};
    let fr = c.frame;
    // Cheap accessors, evaluated only by the arms that need them.
    let ib = fr.ib.as_ref();
    let bth = ib.map(|i| &i.bth);
    let v4 = || match &fr.net {
        Net::Ipv4(r) => Some(r),
        _ => None,
    };
    let v6 = || match &fr.net {
        Net::Ipv6(r) => Some(r),
        _ => None,
    };
    let grh = || match &fr.net {
        Net::Grh(r) => Some(r),
        _ => None,
    };
    let cm = || fr.mad.as_ref().and_then(|m| m.cm.as_ref());
    let eth = || match fr.link {
        Link::Ethernet { src, dst } => Some((src, dst)),
        _ => None,
    };
    match field {
        F::FrameNumber => f(Dec(c.number)),
        F::FrameLen => f(Dec(c.orig_len.into())),
        F::FrameCapLen => f(Dec(c.data.len() as u64)),
        F::FrameTimeEpoch => f(Value::Secs(c.ts_ns as i64)),
        F::FrameTimeRelative => f(Value::Secs(since(c.ts_ns, c.first_ts_ns))),
        F::FrameTimeDelta => f(Value::Secs(since(c.ts_ns, c.prev_ts_ns))),
        F::FrameTimeDeltaDisplayed => f(delta_displayed(c.ts_ns, shown)),
        F::FrameInterfaceId => f(Dec(c.interface.into())),
        F::FrameComment => c.comment.into_iter().for_each(|s| f(Value::Str(s))),
        F::FrameProtocols => f(Value::Text(&Protocols(c))),
        F::ColProtocol => f(Value::Str(col_protocol(fr))),
        F::ColInfo => f(Value::Text(&crate::print::Info { frame: fr, data: c.data })),
        F::EthSrc => eth().into_iter().for_each(|(s, _)| f(Value::Mac(s))),
        F::EthDst => eth().into_iter().for_each(|(_, d)| f(Value::Mac(d))),
        F::EthAddrs => {
            if let Some((s, d)) = eth() {
                f(Value::Mac(d));
                f(Value::Mac(s));
            }
        }
        F::EthDstIg => eth().into_iter().for_each(|(_, d)| f(Value::Bool(d.0[0] & 1 != 0))),
        F::EthDstLg => eth().into_iter().for_each(|(_, d)| f(Value::Bool(d.0[0] & 2 != 0))),
        F::EthSrcIg => eth().into_iter().for_each(|(s, _)| f(Value::Bool(s.0[0] & 1 != 0))),
        F::EthSrcLg => eth().into_iter().for_each(|(s, _)| f(Value::Bool(s.0[0] & 2 != 0))),
        F::EthIg | F::EthLg => {
            let bit = if field == F::EthIg { 1 } else { 2 };
            if let Some((s, d)) = eth() {
                f(Value::Bool(d.0[0] & bit != 0));
                f(Value::Bool(s.0[0] & bit != 0));
            }
        }
        F::EthDstOui => eth().into_iter().for_each(|(_, d)| f(Dec(oui(d)))),
        F::EthSrcOui => eth().into_iter().for_each(|(s, _)| f(Dec(oui(s)))),
        F::EthAddrOui => {
            if let Some((s, d)) = eth() {
                f(Dec(oui(d)));
                f(Dec(oui(s)));
            }
        }
        F::EthType => {
            if eth().is_some() {
                // A length (IEEE 802.3) is not an ethertype: tshark prints nothing.
                let t = fr.vlans[0].map(|v| v.tpid).or(fr.ethertype);
                t.filter(|&t| ethertype::is_type(t)).into_iter().for_each(|t| f(Hex(t.into(), 4)))
            }
        }
        F::VlanId | F::VlanPriority | F::VlanEtype | F::QinqId | F::QinqPriority | F::QinqDei => {
            // tshark files 802.1ad (0x88a8) tags under ieee8021ad.*, the rest under vlan.*.
            let qinq = matches!(field, F::QinqId | F::QinqPriority | F::QinqDei);
            let tags = fr.vlans.iter().flatten().filter(|v| (v.tpid == ethertype::QINQ) == qinq);
            for v in tags {
                f(match field {
                    F::VlanId | F::QinqId => Dec(v.id.into()),
                    F::VlanPriority | F::QinqPriority => Dec(v.pcp.into()),
                    F::QinqDei => Dec(v.dei.into()),
                    // After a tag too, a length is no ethertype (tshark: vlan.len).
                    _ if !ethertype::is_type(v.inner_type) => continue,
                    _ => Hex(v.inner_type.into(), 4),
                })
            }
        }
        F::IpSrc => v4().into_iter().for_each(|r| f(Value::Ipv4(r.src))),
        F::IpDst => v4().into_iter().for_each(|r| f(Value::Ipv4(r.dst))),
        F::IpAddrs => {
            if let Some(r) = v4() {
                f(Value::Ipv4(r.src));
                f(Value::Ipv4(r.dst));
            }
        }
        F::IpVersion => ip_version(c).into_iter().for_each(|v| f(Dec(v))),
        F::IpHdrLen => v4().into_iter().for_each(|r| f(Dec(r.header_len.into()))),
        F::IpDsfield => v4().into_iter().for_each(|r| f(Hex((r.dscp << 2 | r.ecn).into(), 2))),
        F::IpId => v4().into_iter().for_each(|r| f(Hex(r.ident.into(), 4))),
        F::IpFlags => v4().into_iter().for_each(|r| {
            let flags = u64::from(r.dont_frag) << 1 | u64::from(r.more_frags);
            // The reserved bit is not kept apart: it is read from the header.
            f(Hex(flags | u64::from(ip_reserved_flag(c)) << 2, 2))
        }),
        F::IpFlagsRb => v4().into_iter().for_each(|_| f(Value::Bool(ip_reserved_flag(c)))),
        F::IpFlagsDf => v4().into_iter().for_each(|r| f(Value::Bool(r.dont_frag))),
        F::IpFlagsMf => v4().into_iter().for_each(|r| f(Value::Bool(r.more_frags))),
        F::IpChecksum => v4().into_iter().for_each(|r| f(Hex(r.checksum.into(), 4))),
        F::IpProto => v4().into_iter().for_each(|r| f(Dec(r.protocol.into()))),
        F::IpTtl => v4().into_iter().for_each(|r| f(Dec(r.ttl.into()))),
        F::IpLen => v4().into_iter().for_each(|r| f(Dec(r.total_len.into()))),
        F::IpDscp => v4().into_iter().for_each(|r| f(Dec(r.dscp.into()))),
        F::IpEcn => v4().into_iter().for_each(|r| f(Dec(r.ecn.into()))),
        F::Ipv6Src => v6().into_iter().for_each(|r| f(Value::Ipv6(r.src))),
        F::Ipv6Dst => v6().into_iter().for_each(|r| f(Value::Ipv6(r.dst))),
        F::Ipv6Addrs => {
            if let Some(r) = v6() {
                f(Value::Ipv6(r.src));
                f(Value::Ipv6(r.dst));
            }
        }
        F::Ipv6Version => v6().into_iter().for_each(|_| f(Dec(6))),
        // tshark's mask keeps the field in place: 0x0ff00000, 8 hex digits.
        F::Ipv6Tclass => v6().into_iter().for_each(|r| f(Hex(u64::from(r.traffic_class) << 20, 8))),
        F::Ipv6TclassDscp => v6().into_iter().for_each(|r| f(Dec((r.traffic_class >> 2).into()))),
        F::Ipv6TclassEcn => v6().into_iter().for_each(|r| f(Dec((r.traffic_class & 3).into()))),
        F::Ipv6Flow => v6().into_iter().for_each(|r| f(Hex(r.flow_label.into(), 6))),
        F::Ipv6Plen => v6().into_iter().for_each(|r| f(Dec(r.payload_len.into()))),
        F::Ipv6Nxt => v6().into_iter().for_each(|r| f(Dec(r.next_header.into()))),
        F::Ipv6Hlim => v6().into_iter().for_each(|r| f(Dec(r.hop_limit.into()))),
        F::UdpSrcport => fr.udp.into_iter().for_each(|u| f(Dec(u.src_port.into()))),
        F::UdpDstport => fr.udp.into_iter().for_each(|u| f(Dec(u.dst_port.into()))),
        F::UdpPort => {
            if let Some(u) = fr.udp {
                f(Dec(u.src_port.into()));
                f(Dec(u.dst_port.into()));
            }
        }
        F::UdpLength => fr.udp.into_iter().for_each(|u| f(Dec(u.length.into()))),
        // tshark stops before the checksum when the length is too short for a header.
        F::UdpChecksum => fr
            .udp
            .into_iter()
            .filter(|u| usize::from(u.length) >= crate::wire::udp::HEADER_LEN)
            .for_each(|u| f(Hex(u.checksum.into(), 4))),
        F::UdpPayload => protocols::udp_payload(c).into_iter().for_each(|b| f(Value::Bytes(b))),
        F::TcpSrcport => fr.tcp.into_iter().for_each(|t| f(Dec(t.src_port.into()))),
        F::TcpDstport => fr.tcp.into_iter().for_each(|t| f(Dec(t.dst_port.into()))),
        F::TcpPort => {
            if let Some(t) = fr.tcp {
                f(Dec(t.src_port.into()));
                f(Dec(t.dst_port.into()));
            }
        }
        F::GrhIpver => grh().into_iter().for_each(|_| f(Dec(6))),
        F::GrhTclass => grh().into_iter().for_each(|r| f(Dec(r.traffic_class.into()))),
        F::GrhFlowlabel => grh().into_iter().for_each(|r| f(Dec(r.flow_label.into()))),
        F::GrhPaylen => grh().into_iter().for_each(|r| f(Dec(r.payload_len.into()))),
        F::GrhNxthdr => grh().into_iter().for_each(|r| f(Dec(r.next_header.into()))),
        F::GrhHoplmt => grh().into_iter().for_each(|r| f(Dec(r.hop_limit.into()))),
        F::GrhSgid => grh().into_iter().for_each(|r| f(Value::Ipv6(r.src))),
        F::GrhDgid => grh().into_iter().for_each(|r| f(Value::Ipv6(r.dst))),
        F::BthOpcode => bth.into_iter().for_each(|b| f(Dec(b.opcode.0.into()))),
        F::BthSe => bth.into_iter().for_each(|b| f(Value::Bool(b.solicited_event))),
        F::BthM => bth.into_iter().for_each(|b| f(Value::Bool(b.mig_req))),
        F::BthPadcnt => bth.into_iter().for_each(|b| f(Dec(b.pad_count.into()))),
        F::BthTver => bth.into_iter().for_each(|b| f(Dec(b.tver.into()))),
        F::BthPKey => bth.into_iter().for_each(|b| f(Dec(b.p_key.into()))),
        F::BthDestqp => bth.into_iter().for_each(|b| f(Hex(b.dest_qp.into(), 6))),
        F::BthA => bth.into_iter().for_each(|b| f(Value::Bool(b.ack_req))),
        F::BthReserved7 => bth.into_iter().for_each(|b| f(Dec(b.resv7.into()))),
        F::BthPsn => bth.into_iter().for_each(|b| f(Dec(b.psn.value().into()))),
        F::RdethEecnxt => ib.and_then(|i| i.rdeth).into_iter().for_each(|v| f(Dec(v.into()))),
        F::DethQKey => ib.and_then(|i| i.deth).into_iter().for_each(|d| f(Hex(d.q_key.into(), 16))),
        F::DethSrcqp => {
            ib.and_then(|i| i.deth).into_iter().for_each(|d| f(Hex(d.src_qp.into(), 8)))
        }
        // tshark shows the AtomicETH's VA and R_Key under the RETH's field names.
        F::RethVa => {
            let va = ib.and_then(|i| i.reth.map(|r| r.va).or(i.atomiceth.map(|a| a.va)));
            va.into_iter().for_each(|v| f(Hex(v, 16)))
        }
        F::RethRKey => {
            let k = ib.and_then(|i| i.reth.map(|r| r.r_key).or(i.atomiceth.map(|a| a.r_key)));
            k.into_iter().for_each(|v| f(Hex(v.into(), 8)))
        }
        F::RethDmalen => ib.and_then(|i| i.reth).into_iter().for_each(|r| f(Dec(r.dma_len.into()))),
        F::AtomicethSwapdt => {
            ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| f(Dec(a.swap_add)))
        }
        F::AtomicethCmpdt => {
            ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| f(Dec(a.compare)))
        }
        F::AethSyndrome => {
            ib.and_then(|i| i.aeth).into_iter().for_each(|a| f(Dec(a.syndrome.0.into())))
        }
        F::AethSyndromeReserved
        | F::AethSyndromeOpcode
        | F::AethSyndromeCreditCount
        | F::AethSyndromeTimer
        | F::AethSyndromeReservedValue
        | F::AethSyndromeErrorCode => {
            // tshark's bit fields of the syndrome: bit 7, bits 6-5 (the kind), and
            // bits 4-0 under the name the kind gives them.
            if let Some(a) = ib.and_then(|i| i.aeth) {
                let s = a.syndrome.0;
                let low = match (field, s >> 5 & 3) {
                    (F::AethSyndromeReserved, _) => return f(Dec((s >> 7).into())),
                    (F::AethSyndromeOpcode, op) => return f(Dec(op.into())),
                    (F::AethSyndromeCreditCount, 0)
                    | (F::AethSyndromeTimer, 1)
                    | (F::AethSyndromeReservedValue, 2)
                    | (F::AethSyndromeErrorCode, 3) => s & 0x1F,
                    _ => return,
                };
                f(Dec(low.into()))
            }
        }
        F::AethMsn => ib.and_then(|i| i.aeth).into_iter().for_each(|a| f(Dec(a.msn.into()))),
        F::AtomicackethOrigremdt => {
            ib.and_then(|i| i.atomicacketh).into_iter().for_each(|v| f(Dec(v)))
        }
        F::Immdt => {
            ib.and_then(|i| i.immdt).into_iter().for_each(|v| f(Value::Bytes(&v.to_be_bytes())))
        }
        F::Ieth => {
            ib.and_then(|i| i.ieth).into_iter().for_each(|v| f(Value::Bytes(&v.to_be_bytes())))
        }
        F::InvariantCrc => ib
            .and_then(|i| i.icrc)
            .into_iter()
            .for_each(|b| f(Hex(u32::from_be_bytes(b).into(), 8))),
        F::MadBaseversion
        | F::MadMgmtclass
        | F::MadClassversion
        | F::MadMethod
        | F::MadStatus
        | F::MadClassspecific
        | F::MadTransactionid
        | F::MadAttributeid
        | F::MadAttributemodifier
        | F::MadData
        | F::CmReqLocalCommId
        | F::CmReqServiceid
        | F::CmReqServiceidPrefix
        | F::CmReqServiceidProtocol
        | F::CmReqServiceidDport
        | F::CmReqLocalqkey
        | F::CmReqLocalqpn
        | F::CmReqResponderres
        | F::CmReqInitdepth
        | F::CmReqTranspsvctype
        | F::CmReqStartpsn
        | F::CmReqRetrcount
        | F::CmReqPkey
        | F::CmReqPppmtu
        | F::CmReqRnrretrcount
        | F::CmReqSrq
        | F::CmReqPrimLocalgid
        | F::CmReqPrimRemotegid
        | F::CmReqPrimLocalgidIpv4
        | F::CmReqPrimRemotegidIpv4
        | F::CmReqPrivate
        | F::CmReqIpCm
        | F::CmReqIpCmMajv
        | F::CmReqIpCmMinv
        | F::CmReqIpCmIpv
        | F::CmReqIpCmSport
        | F::CmReqIpCmSip6
        | F::CmReqIpCmDip6
        | F::CmReqIpCmSip4
        | F::CmReqIpCmDip4
        | F::CmReqIpCmPrivate
        | F::CmRepLocalCommId
        | F::CmRepRemotecommid
        | F::CmRepLocalqkey
        | F::CmRepLocalqpn
        | F::CmRepStartpsn
        | F::CmRepRespres
        | F::CmRepInitdepth
        | F::CmRepRnrretrcount
        | F::CmRepSrq
        | F::CmRepPrivate
        | F::CmRtuLocalcommid
        | F::CmRtuRemotecommid
        | F::CmRtuPrivate
        | F::CmRejLocalcommid
        | F::CmRejRemotecommid
        | F::CmRejMsgrej
        | F::CmRejReason
        | F::CmRejAri
        | F::CmRejPrivate
        | F::CmDreqLocalcommid
        | F::CmDreqRemotecommid
        | F::CmDreqRemoteqpn
        | F::CmDreqPrivate
        | F::CmDrepLocalcommid
        | F::CmDrepRemotecommid
        | F::CmDrepPrivate => mad::visit(field, fr, c.data, &mut f),
        F::DataData => protocols::data_bytes(c).into_iter().for_each(|b| f(Value::Bytes(b))),
        F::DataLen => protocols::data_bytes(c).into_iter().for_each(|b| f(Dec(b.len() as u64))),
        F::RoceVersion => {
            fr.roce.into_iter().for_each(|v| f(Dec(if v == RoceVersion::V1 { 1 } else { 2 })))
        }
        F::RoceOpcodeName => ib.into_iter().for_each(|i| f(Value::Text(&OpName(i)))),
        F::RoceOpcodeRole => match ib.and_then(|i| i.info) {
            Some(info) if info.is_request() => f(Value::Str("request")),
            Some(info) if info.is_response() => f(Value::Str("response")),
            _ => {}
        },
        F::RoceTransport => ib.into_iter().for_each(|i| {
            let t = i.info.map_or(i.bth.opcode.transport(), |info| info.transport);
            f(Value::Str(t.abbrev()))
        }),
        F::RoceDceth => ib.and_then(|i| i.dceth).into_iter().for_each(|v| f(Hex(v, 16))),
        F::RoceDcceth => {
            ib.and_then(|i| i.dcceth.as_ref()).into_iter().for_each(|b| f(Value::Bytes(b)))
        }
        F::RoceFecn => bth.into_iter().for_each(|b| f(Value::Bool(b.fecn))),
        F::RoceBecn => bth.into_iter().for_each(|b| f(Value::Bool(b.becn))),
        F::RoceEcnCe => fr.ecn().into_iter().for_each(|e| f(Value::Bool(e == 3))),
        F::RoceAethType | F::RoceAethNak | F::RoceAethCredits | F::RoceAethRnrTimerUs => {
            if let Some(a) = ib.and_then(|i| i.aeth) {
                match (field, a.syndrome.kind()) {
                    (F::RoceAethType, AckKind::Ack { .. }) => f(Value::Str("ACK")),
                    (F::RoceAethType, AckKind::RnrNak { .. }) => f(Value::Str("RNR NAK")),
                    (F::RoceAethType, AckKind::Nak(_)) => f(Value::Str("NAK")),
                    (F::RoceAethType, AckKind::Reserved) => f(Value::Str("Reserved")),
                    (F::RoceAethNak, AckKind::Nak(n)) => f(Value::Str(n.name())),
                    (F::RoceAethCredits, AckKind::Ack { credits }) => f(Dec(credits.into())),
                    (F::RoceAethRnrTimerUs, AckKind::RnrNak { timer }) => {
                        f(Dec(RNR_TIMER_US[timer as usize].into()))
                    }
                    _ => {}
                }
            }
        }
        F::RoceAtomicVa => ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| f(Hex(a.va, 16))),
        F::RoceAtomicRKey => {
            ib.and_then(|i| i.atomiceth).into_iter().for_each(|a| f(Hex(a.r_key.into(), 8)))
        }
        F::RoceXrcSrq => ib.and_then(|i| i.xrceth).into_iter().for_each(|v| f(Hex(v.into(), 6))),
        F::RoceFeth => ib.and_then(|i| i.feth).into_iter().for_each(|v| f(Hex(v.into(), 8))),
        F::RocePayloadLen => fr.payload_len_on_wire().into_iter().for_each(|n| f(Dec(n as u64))),
        F::RoceIcrcStatus | F::RoceIcrcComputed => {
            if let Some(chk) = fr.icrc_check(c.data) {
                if field == F::RoceIcrcStatus {
                    f(Value::Str(if chk.ok() { "ok" } else { "bad" }))
                } else {
                    f(Hex(u32::from_be_bytes(icrc::to_wire(chk.computed)).into(), 8))
                }
            }
        }
        F::RoceCmType => {
            if let Some(m) = cm() {
                let n = m.name();
                f(Value::Str(n.rsplit_once('(').map_or(n, |(_, s)| s.trim_end_matches(')'))))
            }
        }
        F::RoceFlow => {
            if let (Some(b), Some((s, d))) = (bth, fr.addrs()) {
                f(Value::Text(&format_args!("{s}>{d}/0x{:06x}", b.dest_qp)))
            }
        }
        F::RoceStop => fr.stop.iter().for_each(|s| f(Value::Text(s))),
    }
}

/// Nanoseconds from `earlier` to `ts`: negative when the capture's clock went back.
/// `frame.time_delta_displayed` of a frame stamped `ts_ns`.
#[inline]
pub fn delta_displayed(ts_ns: u64, shown: Shown) -> Value<'static> {
    Value::Secs(shown.prev_ts_ns.map_or(0, |p| since(ts_ns, p)))
}

/// A MAC's first three bytes as a number (tshark's `eth.*.oui`).
fn oui(m: Mac) -> u64 {
    u64::from(m.0[0]) << 16 | u64::from(m.0[1]) << 8 | u64::from(m.0[2])
}

/// `ip.version`: tshark's IPv4 and IPv6 dissectors both give it, and an IPv4
/// header of another version still has one (decoding stopped there).
fn ip_version(c: &Ctx<'_>) -> Option<u64> {
    let fr = c.frame;
    match (fr.net, fr.stop) {
        (Net::Ipv4(_), _) => Some(4),
        (Net::Ipv6(_), _) => Some(6),
        (_, Some(s))
            if matches!(s.layer, crate::frame::Layer::Ipv4 | crate::frame::Layer::Ipv6) =>
        {
            c.data.get(s.offset).map(|b| u64::from(b >> 4))
        }
        _ => None,
    }
}

/// The IPv4 header's reserved flag bit (0x80 of byte 6), which the decoded
/// header does not keep.
fn ip_reserved_flag(c: &Ctx<'_>) -> bool {
    c.data.get(c.frame.offsets.net + 6).is_some_and(|b| b & 0x80 != 0)
}

fn since(ts: u64, earlier: u64) -> i64 {
    (ts as i64).wrapping_sub(earlier as i64)
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

        #[test]
        fn dec_and_secs_match_std(v in any::<u64>(), small in 0u64..1_000_000) {
            for v in [v, small, v >> 32] {
                let mut out = b"x".to_vec();
                dec(&mut out, v);
                prop_assert_eq!(String::from_utf8(out).expect("digits are ASCII"), format!("x{v}"));
                let mut out = Vec::new();
                secs(&mut out, v);
                prop_assert_eq!(String::from_utf8(out).expect("digits are ASCII"), format!("{}.{:09}", v / 1_000_000_000, v % 1_000_000_000));
            }
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
        let addrs = [
            "10.0.0.1",
            "10.0.0.2",
            "255.255.255.255",
            "0.0.0.0",
            "1.2.3.4",
            "10.0.0.1",
            "192.168.100.200",
        ];
        for _ in 0..3 {
            for a in addrs {
                let mut o = Vec::new();
                ipv4(&mut o, a.parse().unwrap());
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
