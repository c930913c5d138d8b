//! IPv6 header (RFC 8200). The InfiniBand GRH (RoCEv1) has the same 40-byte layout
//! — IPVer, TClass, FlowLabel, PayLen, NxtHdr, HopLmt, SGID, DGID — so this view
//! serves both.
//!
//! Owns: the IPv6 header and GRH. Imports: the shared helpers and errors (its parent).

use std::net::Ipv6Addr;

use super::{be, check_len, Error, Field, Malformed};

mod field {
    use super::Field;
    pub(super) const VER_TC_FLOW: Field = 0..4;
    pub(super) const PAYLOAD_LEN: Field = 4..6;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Field = 8..24;
    pub(super) const DST: Field = 24..40;
}

pub const HEADER_LEN: usize = field::DST.end;
/// The GRH's next header value for an IBA transport header (BTH).
pub const NEXT_HEADER_IBA: u8 = 0x1B;

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        let p = Packet { buffer };
        if p.version() != 6 {
            return Err(Error::Malformed(Malformed::Ipv6Version { version: p.version() }));
        }
        Ok(p)
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    pub fn traffic_class(&self) -> u8 {
        (be::u16(self.buffer.as_ref(), 0..2) >> 4) as u8
    }
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }
    pub fn flow_label(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0xF_FFFF
    }
    pub fn payload_len(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    pub fn src(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Ipv6Addr::from(a)
    }
    pub fn dst(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Ipv6Addr::from(a)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub payload_len: u16,
    pub next_header: u8,
    pub hop_limit: u8,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src(),
            dst: p.dst(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            payload_len: p.payload_len(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
        }
    }
    pub fn ecn(&self) -> u8 {
        self.traffic_class & 3
    }
    pub fn emit(&self, b: &mut [u8]) {
        let w = 6u32 << 28 | (self.traffic_class as u32) << 20 | (self.flow_label & 0xF_FFFF);
        be::set_u32(b, field::VER_TC_FLOW, w);
        be::set_u16(b, field::PAYLOAD_LEN, self.payload_len);
        b[field::NEXT_HEADER] = self.next_header;
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC].copy_from_slice(&self.src.octets());
        b[field::DST].copy_from_slice(&self.dst.octets());
    }
}

/// Extension headers that may sit between IPv6 and UDP: hop-by-hop (0), routing (43),
/// destination options (60). Fragments (44) stop decoding. Returns the header
/// length to skip, or `None` if `next` is not a skippable extension header.
pub fn extension_len(next: u8, b: &[u8]) -> Option<Result<(u8, usize), Error>> {
    match next {
        0 | 43 | 60 => Some(check_len(b, 2).map(|()| (b[0], (b[1] as usize + 1) * 8))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_against_etherparse() {
        let r = Repr {
            src: "fe80::1".parse().unwrap(),
            dst: "::ffff:10.0.0.2".parse().unwrap(),
            traffic_class: 0x6b,
            flow_label: 0xabcde,
            payload_len: 1000,
            next_header: 17,
            hop_limit: 64,
        };
        let mut b = [0xa5; 40];
        r.emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), r);
        assert_eq!(p.ecn(), 3);
        let (h, _) = etherparse::Ipv6Header::from_slice(&b).unwrap();
        assert_eq!(h.traffic_class, 0x6b);
        assert_eq!(u32::from(h.flow_label), 0xabcde);
        assert_eq!(h.source, r.src.octets());
        for n in 0..40 {
            assert!(Packet::new_checked(&b[..n]).is_err());
        }
    }

    proptest::proptest! {
        #[test]
        fn round_trip(src: u128, dst: u128, traffic_class: u8, flow_label in 0u32..0x10_0000, payload_len: u16, next_header: u8, hop_limit: u8) {
            let r = Repr { src: src.into(), dst: dst.into(), traffic_class, flow_label, payload_len, next_header, hop_limit };
            let mut b = [0u8; 40];
            r.emit(&mut b);
            proptest::prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
        }
    }
}
