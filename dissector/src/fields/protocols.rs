//! What a frame is made of, by name: `frame.protocols` ([`Protocols`]), the Protocol
//! column ([`col_protocol`]), the headers a display filter tests for presence
//! ([`Header`]) and the bytes a protocol covers when a filter reads it as a byte
//! string ([`ProtoBytes`]), each as tshark 4.0 has it.
//!
//! Owns: the protocol and header names, when a frame has them and which bytes each
//! covers. Imports: the per-frame context ([`crate::ctx`]), the decoded frame and
//! where it stopped, the opcode table's header set and the ethertypes
//! ([`crate::wire`]), the link type.

use core::fmt;
use core::ops::Range;

use crate::ctx::Ctx;
use crate::frame::{Frame, Layer, Link, Net, RoceVersion, StopError};
use crate::wire::ethernet::{self, ethertype};
use crate::wire::{ipv6, udp, Headers};
use crate::LinkType;

/// `_ws.col.Protocol`: the innermost protocol, named as tshark's Protocol column
/// names it (RoCEv2 is "RRoCE", RoCEv1 "RoCE").
pub fn col_protocol(fr: &Frame) -> &'static str {
    match fr.roce {
        Some(RoceVersion::V2) => return "RRoCE",
        Some(RoceVersion::V1) => return "RoCE",
        None => {}
    }
    if fr.tcp.is_some() {
        return "TCP";
    }
    if fr.udp.is_some() {
        return "UDP";
    }
    match fr.ethertype {
        Some(ethertype::IPV4) => "IPv4",
        Some(ethertype::IPV6) => "IPv6",
        Some(ethertype::ARP) => "ARP",
        Some(ethertype::LLDP) => "LLDP",
        _ => match fr.link {
            Link::Sll(_) | Link::Truncated(LinkType::LINUX_SLL | LinkType::LINUX_SLL2) => "SLL",
            Link::Raw => "Raw",
            Link::Null { .. } => "Null",
            _ => "Ethernet",
        },
    }
}

/// `frame.protocols`: the protocols of the frame, outermost first, joined with `:`
/// as tshark prints them (`eth:ethertype:vlan:ethertype:ip:udp:infiniband:data`).
///
/// Where tshark hands bytes to a dissector we do not have (DNS on UDP port 53, ICMP,
/// …) we name `data` or stop; `data` after `infiniband` means a payload we decoded in
/// full, so for opcodes tshark 4.0 does not decode (XRC, FLUSH, CNP) we show `data`
/// where tshark does not.
#[derive(Debug, Clone, Copy)]
pub struct Protocols<'a>(pub &'a Ctx<'a>);

impl Protocols<'_> {
    /// Calls `f` with each protocol name, outermost first.
    pub fn each(&self, mut f: impl FnMut(&'static str)) {
        let fr = self.0.frame;
        match fr.link {
            Link::Ethernet { .. } => f("eth"),
            Link::Sll(_) => f("sll"),
            Link::Raw => f("raw"),
            Link::Null { .. } => f("null"),
            Link::Truncated(LinkType::ETHERNET) => return f("eth"),
            Link::Truncated(LinkType::LINUX_SLL | LinkType::LINUX_SLL2) => return f("sll"),
            Link::Truncated(_) | Link::Unsupported(_) => return,
        }
        // After an Ethernet header or tag, a type/length field that is a length
        // (IEEE 802.3) leads to LLC, which we do not decode: tshark lists no
        // `ethertype` there, and only `data` for the 1501–1535 that are neither.
        let ethernet = matches!(fr.link, Link::Ethernet { .. });
        let first_type = fr.vlans[0].map(|v| v.tpid).or(fr.ethertype);
        let typed = |t: Option<u16>| !ethernet || t.is_none_or(ethertype::is_type);
        if matches!(fr.link, Link::Ethernet { .. } | Link::Sll(_)) {
            if !typed(first_type) {
                return self.untyped(first_type, &mut f);
            }
            f("ethertype");
            for v in fr.vlans.iter().flatten() {
                f(if v.tpid == ethertype::QINQ { "ieee8021ad" } else { "vlan" });
                if !typed(Some(v.inner_type)) {
                    return self.untyped(Some(v.inner_type), &mut f);
                }
                f("ethertype");
            }
        }
        let stopped_at = |l: Layer| fr.stop.is_some_and(|s| s.layer == l);
        let l4 = |proto: u8, l4_len: usize, f: &mut dyn FnMut(&'static str)| match proto {
            17 => {
                f("udp");
                if fr.roce.is_some() {
                    infiniband(fr, f)
                } else if fr.udp.is_some_and(|u| u.length > 8) && !stopped_at(Layer::Udp) {
                    f("data")
                }
            }
            6 => {
                f("tcp");
                if let Some(t) = fr.tcp {
                    if t.header_len >= 20 && l4_len > usize::from(t.header_len) {
                        f("data")
                    }
                }
            }
            _ => {}
        };
        match fr.ethertype {
            Some(ethertype::IPV4) => {
                f("ip");
                if let Net::Ipv4(r) = fr.net {
                    if fr.stop.is_some_and(|s| s.error == StopError::Fragment) {
                        f("data")
                    } else {
                        l4(
                            r.protocol,
                            usize::from(r.total_len).saturating_sub(r.header_len.into()),
                            &mut f,
                        )
                    }
                }
            }
            Some(ethertype::IPV6) => {
                f("ipv6");
                if let Net::Ipv6(r) = fr.net {
                    let proto = if fr.udp.is_some() {
                        17
                    } else if fr.tcp.is_some() {
                        6
                    } else {
                        r.next_header
                    };
                    l4(proto, r.payload_len.into(), &mut f)
                }
            }
            Some(ethertype::ROCE_V1) => infiniband(fr, &mut f),
            Some(ethertype::ARP) => f("arp"),
            Some(ethertype::LLDP) => f("lldp"),
            Some(_) => f("data"),
            None => {}
        }
    }

    /// After a type/length field that is no ethertype: nothing for a length (LLC
    /// follows, which we do not decode), `data` for 1501–1535, as tshark.
    fn untyped(&self, t: Option<u16>, f: &mut impl FnMut(&'static str)) {
        if t.is_some_and(|t| t > ethertype::MAX_LEN) {
            f("data")
        }
    }

    /// The frame holds protocol `name` (a display filter's bare `ip`, `udp`, …).
    /// A link header cut short is named in `frame.protocols` but, as in tshark, is
    /// not there for a filter: its dissector stopped before adding it.
    pub fn has(&self, name: &str) -> bool {
        if matches!(self.0.frame.link, Link::Truncated(_)) {
            return false;
        }
        let mut found = false;
        self.each(|p| found |= p == name);
        found
    }
}

/// A header tshark names as a whole (`infiniband.reth`, FT_BYTES there), which a
/// display filter tests for presence: `-Y infiniband.reth`, `!infiniband.aeth`.
///
/// Which extension headers a frame has is not decided here: it is the set the
/// decoder read ([`crate::frame::Ib::decoded`]), walking the opcode table's row.
/// `infiniband.immdt` and `infiniband.ieth` are fields (their header is their
/// value), so they are not listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// RoCEv1's Global Route Header.
    Grh,
    Bth,
    /// An extension header after the BTH.
    Ext(Headers),
    /// The MAD common header of a UD SEND to QP1.
    Mad,
}

impl Header {
    /// tshark's name for each header we decode, with what it is.
    pub const ALL: &'static [(&'static str, Header, &'static str)] = &[
        ("infiniband.grh", Header::Grh, "Global Route Header (RoCEv1)"),
        ("infiniband.bth", Header::Bth, "Base Transport Header"),
        ("infiniband.rdeth", Header::Ext(Headers::RDETH), "Reliable Datagram ETH"),
        ("infiniband.deth", Header::Ext(Headers::DETH), "Datagram ETH"),
        ("infiniband.reth", Header::Ext(Headers::RETH), "RDMA ETH"),
        ("infiniband.atomiceth", Header::Ext(Headers::ATOMICETH), "Atomic ETH"),
        ("infiniband.aeth", Header::Ext(Headers::AETH), "ACK ETH"),
        ("infiniband.atomicacketh", Header::Ext(Headers::ATOMICACKETH), "Atomic ACK ETH"),
        ("infiniband.mad", Header::Mad, "MAD common header"),
    ];

    pub fn lookup(name: &str) -> Option<Header> {
        Header::ALL.iter().find(|(n, _, _)| *n == name).map(|&(_, h, _)| h)
    }

    /// The frame holds the whole header.
    #[inline]
    pub fn present(self, fr: &Frame) -> bool {
        match self {
            Header::Grh => matches!(fr.net, Net::Grh(_)),
            Header::Bth => fr.ib.is_some(),
            Header::Ext(h) => fr.ib.as_ref().is_some_and(|i| i.decoded.contains(h)),
            Header::Mad => fr.mad.is_some(),
        }
    }
}

fn infiniband(fr: &Frame, f: &mut dyn FnMut(&'static str)) {
    f("infiniband");
    if let Some(ib) = &fr.ib {
        // The payload and its pad: tshark hands both to `data` (a SEND whose pad
        // count fills the bytes before the ICRC still has `data`).
        if fr.mad.is_none() && fr.stop.is_none() && fr.offsets.icrc > ib.payload.start {
            f("data")
        }
    }
}

impl fmt::Display for Protocols<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut r = Ok(());
        let mut first = true;
        self.each(|p| {
            if !first {
                r = r.and_then(|()| f.write_str(":"));
            }
            first = false;
            r = r.and_then(|()| f.write_str(p));
        });
        r
    }
}

/// A protocol a display filter can read as a byte string (`frame contains
/// "rdma-ping"`, `ip == 45:00:…`), as tshark 4.0 does for these.
///
/// Each covers two ranges of the frame, both starting at the protocol's first byte
/// (tshark's FT_PROTOCOL value): its own header (what `==`, `!=`, `<`, … and `in`
/// compare: tshark's tree item) and everything from there to the end of the bytes
/// the protocol was handed (what `contains` and `matches` search). Both stop where
/// the capture does. What tshark 4.0 does, checked on the project's captures
/// (`tests/tests/filter_diff.rs`):
///
/// | name | own bytes (`==`) | searched (`contains`, `matches`) |
/// |---|---|---|
/// | `frame` | every captured byte | the same |
/// | `eth` | the 14-byte header | the whole frame, Ethernet padding and trailer included |
/// | `ip` | the header (options included) | to the end of the IPv4 total length: not the Ethernet padding |
/// | `ipv6` | the header and its extension headers | to the end of the payload length |
/// | `udp` | the 8-byte header | to the end of the IP payload (past a shorter UDP length) |
/// | `infiniband` | RoCEv2: the UDP payload (BTH to ICRC, as the UDP length says); RoCEv1: GRH to the end of the frame | the same |
/// | `data` | bytes no dissector claims: a RoCE payload **and its pad** (no ICRC), a TCP payload, a UDP payload to a port we do not decode | the same |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoBytes {
    Frame,
    Eth,
    Ip,
    Ipv6,
    Udp,
    Infiniband,
    Data,
}

/// The two ranges of a [`ProtoBytes`] in one frame: `covered` (searched, as far as
/// captured), of which the first `own` bytes are the protocol's own (compared).
/// `own` is the length the protocol's header gives, which may run past the capture
/// (an IPv4 header cut short): tshark then compares that length, not the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Covered<'a> {
    pub covered: &'a [u8],
    pub own: usize,
}

impl<'a> Covered<'a> {
    /// The protocol's own bytes that were captured (all of them unless
    /// [`Covered::cut`]).
    #[inline]
    pub fn own(&self) -> &'a [u8] {
        &self.covered[..self.own.min(self.covered.len())]
    }

    /// The protocol's own bytes run past what was captured.
    #[inline]
    pub fn cut(&self) -> bool {
        self.own > self.covered.len()
    }
}

impl ProtoBytes {
    /// The names, as `frame.protocols` has them.
    pub const ALL: &'static [(&'static str, ProtoBytes)] = &[
        ("frame", ProtoBytes::Frame),
        ("eth", ProtoBytes::Eth),
        ("ip", ProtoBytes::Ip),
        ("ipv6", ProtoBytes::Ipv6),
        ("udp", ProtoBytes::Udp),
        ("infiniband", ProtoBytes::Infiniband),
        ("data", ProtoBytes::Data),
    ];

    pub fn lookup(name: &str) -> Option<ProtoBytes> {
        ProtoBytes::ALL.iter().find(|(n, _)| *n == name).map(|&(_, p)| p)
    }

    pub fn name(self) -> &'static str {
        ProtoBytes::ALL.iter().find(|(_, p)| *p == self).map_or("?", |(n, _)| n)
    }

    /// The protocol's bytes in the frame of `c`; `None` when the frame lacks it.
    pub fn bytes<'a>(self, c: &Ctx<'a>) -> Option<Covered<'a>> {
        let fr = c.frame;
        let data = c.data;
        let n = data.len();
        // `own`: the length of the protocol's own bytes; `None`: all it covers.
        let cut = |r: Range<usize>, own: Option<usize>| {
            let end = r.end.min(n);
            let covered = data.get(r.start.min(end)..end).unwrap_or(&[]);
            Covered { covered, own: own.unwrap_or(covered.len()) }
        };
        if self == ProtoBytes::Frame {
            return Some(cut(0..n, None));
        }
        let p = Protocols(c);
        if !p.has(self.name()) {
            return None;
        }
        let net = net_start(fr)?;
        Some(match self {
            ProtoBytes::Frame => cut(0..n, None),
            ProtoBytes::Eth => cut(0..n, Some(ethernet::HEADER_LEN)),
            ProtoBytes::Ip => match fr.net {
                Net::Ipv4(r) => cut(net..net + usize::from(r.total_len), Some(r.header_len.into())),
                // A header that did not decode (a bogus version, cut short): what is
                // left of the frame; its own bytes as long as its IHL says.
                _ => cut(net..n, Some(data.get(net).map_or(20, |b| usize::from(b & 0xF) * 4))),
            },
            ProtoBytes::Ipv6 => match fr.net {
                Net::Ipv6(r) => {
                    let t = fr.offsets.transport;
                    let own = if t > net { t - net } else { ipv6::HEADER_LEN };
                    cut(net..net + ipv6::HEADER_LEN + usize::from(r.payload_len), Some(own))
                }
                _ => cut(net..n, Some(ipv6::HEADER_LEN)),
            },
            ProtoBytes::Udp => {
                let at = fr.offsets.transport;
                cut(at..ip_end(fr, net).unwrap_or(n).max(at), Some(udp::HEADER_LEN))
            }
            ProtoBytes::Infiniband => match fr.ethertype {
                // RoCEv1: the GRH to the end of the frame (the GRH's payload length
                // does not bound it).
                Some(ethertype::ROCE_V1) => cut(net..n, None),
                _ => {
                    let (at, bth) = (fr.offsets.transport, fr.offsets.bth);
                    let udp_end = fr.udp.map_or(n, |u| at + usize::from(u.length));
                    let end = udp_end.min(ip_end(fr, net).unwrap_or(n).max(bth));
                    cut(bth..end, None)
                }
            },
            ProtoBytes::Data => cut(data_range(fr, net, n), None),
        })
    }
}

/// Where the link header (and its VLAN tags) ends.
fn net_start(fr: &Frame) -> Option<usize> {
    let tags = fr.vlans.iter().flatten().count() * ethernet::VLAN_TAG_LEN;
    Some(match fr.link {
        Link::Ethernet { .. } => ethernet::HEADER_LEN + tags,
        Link::Sll(s) => s.header_len(),
        Link::Raw => 0,
        Link::Null { .. } => 4,
        Link::Truncated(_) | Link::Unsupported(_) => return None,
    })
}

/// Where the IP packet that starts at `net` ends, as its header says.
fn ip_end(fr: &Frame, net: usize) -> Option<usize> {
    match fr.net {
        Net::Ipv4(r) => Some(net + usize::from(r.total_len)),
        Net::Ipv6(r) => Some(net + ipv6::HEADER_LEN + usize::from(r.payload_len)),
        _ => None,
    }
}

/// The bytes of `data` in a frame whose protocols end with it (captured or not):
/// each place [`Protocols::each`] names `data`.
fn data_range(fr: &Frame, net: usize, n: usize) -> Range<usize> {
    let ip_end = ip_end(fr, net).unwrap_or(n);
    let at = fr.offsets.transport;
    if let Some(ib) = &fr.ib {
        // A RoCE payload and its pad, up to the ICRC.
        ib.payload.start..fr.offsets.icrc
    } else if fr.stop.is_some_and(|s| s.error == StopError::Fragment) {
        fr.offsets.l4..ip_end
    } else if let Some(t) = fr.tcp {
        at + usize::from(t.header_len)..ip_end
    } else if let Some(u) = fr.udp {
        at + udp::HEADER_LEN..(at + usize::from(u.length)).min(ip_end)
    } else {
        // After an ethertype (or an IEEE 802.3 length) we do not decode.
        net..n
    }
}

/// The bytes after the UDP header, to the end of the IP payload (tshark's
/// `udp.payload`): `None` without a UDP header whose length is at least 8, or with
/// nothing after it.
pub(crate) fn udp_payload<'a>(c: &Ctx<'a>) -> Option<&'a [u8]> {
    let fr = c.frame;
    fr.udp?;
    if fr.stop.is_some_and(|s| s.layer == Layer::Udp) {
        return None;
    }
    let n = c.data.len();
    let start = fr.offsets.transport + udp::HEADER_LEN;
    let end = net_start(fr).and_then(|net| ip_end(fr, net)).unwrap_or(n).min(n);
    c.data.get(start..end).filter(|b| !b.is_empty())
}

/// The bytes of the `data` protocol (tshark's `data.data`), when the frame has it.
pub(crate) fn data_bytes<'a>(c: &Ctx<'a>) -> Option<&'a [u8]> {
    ProtoBytes::Data.bytes(c).map(|b| b.covered)
}
