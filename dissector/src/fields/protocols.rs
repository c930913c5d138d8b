//! What a frame is made of, by name: `frame.protocols` ([`Protocols`]), the Protocol
//! column ([`col_protocol`]) and the headers a display filter tests for presence
//! ([`Header`]), each named as tshark 4.0 names it.
//!
//! Owns: the protocol and header names and when a frame has them. Imports: the
//! per-frame context ([`crate::ctx`]), the decoded frame and where it stopped, the
//! opcode table's header set and the ethertypes ([`crate::wire`]), the link type.

use core::fmt;

use crate::ctx::Ctx;
use crate::frame::{Frame, Layer, Link, Net, RoceVersion, StopError};
use crate::wire::ethernet::ethertype;
use crate::wire::Headers;
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
        if fr.mad.is_none() && fr.stop.is_none() && ib.payload_len() > 0 {
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
