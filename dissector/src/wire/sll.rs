//! Linux cooked capture headers (`tcpdump -i any`): SLL v1 (16 bytes) and SLL2
//! (20 bytes). Both end up naming the protocol that follows (an ethertype).
//!
//! Owns: the SLL and SLL2 headers. Imports: the shared helpers and errors (its parent).

use super::{be, check_len, Error};

/// What both versions tell us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SllRepr {
    pub version: u8,
    pub packet_type: u16,
    pub hatype: u16,
    pub halen: u16,
    /// Link-layer source address, the first `min(halen, 8)` bytes meaningful.
    pub addr: [u8; 8],
    pub protocol: u16,
    /// SLL2 only.
    pub ifindex: Option<u32>,
}

pub const V1_LEN: usize = 16;
pub const V2_LEN: usize = 20;

impl SllRepr {
    /// SLL v1: packet type(2) ARPHRD(2) addr len(2) addr(8) protocol(2).
    pub fn parse_v1(b: &[u8]) -> Result<SllRepr, Error> {
        check_len(b, V1_LEN)?;
        let mut addr = [0; 8];
        addr.copy_from_slice(&b[6..14]);
        Ok(SllRepr {
            version: 1,
            packet_type: be::u16(b, 0..2),
            hatype: be::u16(b, 2..4),
            halen: be::u16(b, 4..6),
            addr,
            protocol: be::u16(b, 14..16),
            ifindex: None,
        })
    }

    /// SLL2: protocol(2) reserved(2) ifindex(4) ARPHRD(2) packet type(1) addr len(1) addr(8).
    pub fn parse_v2(b: &[u8]) -> Result<SllRepr, Error> {
        check_len(b, V2_LEN)?;
        let mut addr = [0; 8];
        addr.copy_from_slice(&b[12..20]);
        Ok(SllRepr {
            version: 2,
            protocol: be::u16(b, 0..2),
            ifindex: Some(be::u32(b, 4..8)),
            hatype: be::u16(b, 8..10),
            packet_type: b[10] as u16,
            halen: b[11] as u16,
            addr,
        })
    }

    pub const fn header_len(&self) -> usize {
        if self.version == 2 {
            V2_LEN
        } else {
            V1_LEN
        }
    }

    pub fn emit(&self, b: &mut [u8]) {
        if self.version == 2 {
            be::set_u16(b, 0..2, self.protocol);
            be::set_u16(b, 2..4, 0);
            be::set_u32(b, 4..8, self.ifindex.unwrap_or(0));
            be::set_u16(b, 8..10, self.hatype);
            b[10] = self.packet_type as u8;
            b[11] = self.halen as u8;
            b[12..20].copy_from_slice(&self.addr);
        } else {
            be::set_u16(b, 0..2, self.packet_type);
            be::set_u16(b, 2..4, self.hatype);
            be::set_u16(b, 4..6, self.halen);
            b[6..14].copy_from_slice(&self.addr);
            be::set_u16(b, 14..16, self.protocol);
        }
    }

    /// `incoming`, `outgoing`, … as tcpdump prints the packet type.
    pub const fn packet_type_name(&self) -> &'static str {
        match self.packet_type {
            0 => "incoming",
            1 => "broadcast",
            2 => "multicast",
            3 => "to another host",
            4 => "outgoing",
            _ => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_round_trip() {
        for version in [1u8, 2] {
            let r = SllRepr {
                version,
                packet_type: 4,
                hatype: 1,
                halen: 6,
                addr: [2, 0, 0, 0, 0, 1, 0, 0],
                protocol: 0x0800,
                ifindex: (version == 2).then_some(3),
            };
            let mut b = [0xa5u8; 20];
            r.emit(&mut b);
            let p = if version == 1 { SllRepr::parse_v1(&b) } else { SllRepr::parse_v2(&b) };
            assert_eq!(p.unwrap(), r);
            for n in 0..r.header_len() {
                let p = if version == 1 {
                    SllRepr::parse_v1(&b[..n])
                } else {
                    SllRepr::parse_v2(&b[..n])
                };
                assert!(p.is_err());
            }
        }
    }
}
