//! Link-layer header types (`LINKTYPE_*` as pcap and pcapng write them).
//!
//! Owns: the link-type numbers and their names. Imports: nothing of the project.

/// A pcap/pcapng link-layer header type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u16);

impl LinkType {
    /// BSD loopback: a 4-byte host-order address family, then IP.
    pub const NULL: LinkType = LinkType(0);
    /// Ethernet II (with optional 802.1Q / 802.1ad tags).
    pub const ETHERNET: LinkType = LinkType(1);
    /// Raw IP, version read from the first nibble.
    pub const RAW: LinkType = LinkType(101);
    /// Linux cooked capture v1 (`tcpdump -i any` before libpcap 1.10).
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// Raw IPv4.
    pub const IPV4: LinkType = LinkType(228);
    /// Raw IPv6.
    pub const IPV6: LinkType = LinkType(229);
    /// Linux cooked capture v2 (`tcpdump -i any` with libpcap ≥ 1.10).
    pub const LINUX_SLL2: LinkType = LinkType(276);

    /// A short name, as tools print it.
    pub fn name(self) -> &'static str {
        match self {
            LinkType::NULL => "NULL",
            LinkType::ETHERNET => "EN10MB",
            LinkType::RAW => "RAW",
            LinkType::LINUX_SLL => "LINUX_SLL",
            LinkType::IPV4 => "IPV4",
            LinkType::IPV6 => "IPV6",
            LinkType::LINUX_SLL2 => "LINUX_SLL2",
            _ => "unsupported",
        }
    }
}

impl core::fmt::Display for LinkType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}
