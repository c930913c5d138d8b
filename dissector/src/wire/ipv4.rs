//! IPv4 header (RFC 791). Options are skipped, not decoded.
//!
//! Owns: the IPv4 header. Imports: the shared helpers and errors (its parent).

use std::net::Ipv4Addr;

use super::{be, check_len, Error, Field, Malformed};

mod field {
    use super::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const TOTAL_LEN: Field = 2..4;
    pub(super) const IDENT: Field = 4..6;
    pub(super) const FLG_OFF: Field = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Field = 10..12;
    pub(super) const SRC: Field = 12..16;
    pub(super) const DST: Field = 16..20;
}

pub const HEADER_LEN: usize = field::DST.end;
pub const PROTO_UDP: u8 = 17;

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Checks version 4, IHL ≥ 5, the whole header (options included) captured, and
    /// total length ≥ header length. Total length beyond the capture is allowed.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        let p = Packet { buffer };
        if p.version() != 4 {
            return Err(Error::Malformed(Malformed::Ipv4Version { version: p.version() }));
        }
        if p.ihl() < 5 {
            return Err(Error::Malformed(Malformed::Ipv4HeaderLen { ihl: p.ihl() }));
        }
        check_len(p.buffer.as_ref(), p.header_len())?;
        if (p.total_len() as usize) < p.header_len() {
            return Err(Error::Malformed(Malformed::Ipv4TotalLen {
                total_len: p.total_len(),
                header_len: p.header_len(),
            }));
        }
        Ok(p)
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0xF
    }
    pub fn header_len(&self) -> usize {
        self.ihl() as usize * 4
    }
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 3
    }
    pub fn total_len(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }
    pub fn ident(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::IDENT)
    }
    pub fn dont_frag(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }
    pub fn more_frags(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be::u16(self.buffer.as_ref(), field::FLG_OFF) & 0x1FFF) * 8
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(be::u32(self.buffer.as_ref(), field::SRC))
    }
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(be::u32(self.buffer.as_ref(), field::DST))
    }
    /// The header checksum verifies (sums to 0xFFFF over the header).
    pub fn verify_checksum(&self) -> bool {
        checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & !3) | (ecn & 3);
    }
    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, 0);
        let hl = self.header_len();
        let c = checksum(&self.buffer.as_ref()[..hl]);
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }
}

/// The Internet checksum (RFC 1071) of `data`: one's complement of the one's complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub dscp: u8,
    pub ecn: u8,
    pub total_len: u16,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    pub frag_offset: u16,
    pub ttl: u8,
    pub protocol: u8,
    pub checksum: u16,
    pub header_len: u8,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src(),
            dst: p.dst(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            total_len: p.total_len(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            ttl: p.ttl(),
            protocol: p.protocol(),
            checksum: p.checksum(),
            header_len: p.header_len() as u8,
        }
    }

    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// Emits a 20-byte header (no options) and fills in its checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let b = p.buffer.as_mut();
        b[field::VER_IHL] = 0x45;
        b[field::DSCP_ECN] = self.dscp << 2 | (self.ecn & 3);
        be::set_u16(b, field::TOTAL_LEN, self.total_len);
        be::set_u16(b, field::IDENT, self.ident);
        let flg =
            (self.dont_frag as u16) << 14 | (self.more_frags as u16) << 13 | (self.frag_offset / 8);
        be::set_u16(b, field::FLG_OFF, flg);
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = self.protocol;
        be::set_u32(b, field::SRC, u32::from(self.src));
        be::set_u32(b, field::DST, u32::from(self.dst));
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_parse_and_checksum() {
        let r = Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 26,
            ecn: 2,
            total_len: 60,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            ttl: 64,
            protocol: PROTO_UDP,
            checksum: 0,
            header_len: 20,
        };
        let mut b = [0xa5u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        // Cross-check the header and its checksum with an independent implementation.
        let (h, _) = etherparse::Ipv4Header::from_slice(&b).unwrap();
        assert_eq!(h.header_checksum, p.checksum());
        assert_eq!(h.calc_header_checksum(), p.checksum());
        assert_eq!(Repr::parse(&p), Repr { checksum: p.checksum(), ..r });
    }

    #[test]
    fn malformed_and_truncated() {
        let mut b = [0u8; 24];
        b[0] = 0x65;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed(Malformed::Ipv4Version { version: 6 })
        );
        b[0] = 0x44;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed(Malformed::Ipv4HeaderLen { ihl: 4 })
        );
        b[0] = 0x46; // 24-byte header, options captured
        b[3] = 24;
        assert!(Packet::new_checked(&b[..]).is_ok());
        assert_eq!(
            Packet::new_checked(&b[..22]).unwrap_err(),
            Error::Truncated { needed: 24, available: 22 }
        );
        b[3] = 10;
        assert!(matches!(
            Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed(Malformed::Ipv4TotalLen { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn round_trip(src: u32, dst: u32, dscp in 0u8..64, ecn in 0u8..4, total_len in 20u16.., ident: u16, ttl: u8, protocol: u8, df: bool) {
            let r = Repr {
                src: src.into(), dst: dst.into(), dscp, ecn, total_len, ident, dont_frag: df, more_frags: false,
                frag_offset: 0, ttl, protocol, checksum: 0, header_len: 20,
            };
            let mut b = [0u8; 20];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            let p = Packet::new_checked(&b[..]).unwrap();
            proptest::prop_assert!(p.verify_checksum());
            proptest::prop_assert_eq!(Repr::parse(&p), Repr { checksum: p.checksum(), ..r });
        }
    }
}
