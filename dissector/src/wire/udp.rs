//! UDP header (RFC 768).
//!
//! Owns: the UDP header. Imports: the shared helpers and errors (its parent).

use super::{be, check_len, Error, Field, Malformed};

mod field {
    use super::Field;
    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const CHECKSUM: Field = 6..8;
}

pub const HEADER_LEN: usize = field::CHECKSUM.end;
/// The IANA port of RoCEv2.
pub const ROCE_V2_PORT: u16 = 4791;

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Checks the header fits and the length field is at least 8. A length beyond
    /// the captured bytes is allowed (truncated capture): the caller decides.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        let p = Packet { buffer };
        if (p.length() as usize) < HEADER_LEN {
            return Err(Error::Malformed(Malformed::UdpLength { length: p.length() }));
        }
        Ok(p)
    }
    #[inline]
    pub fn src_port(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::SRC_PORT)
    }
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DST_PORT)
    }
    #[inline]
    pub fn length(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LENGTH)
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CHECKSUM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::SRC_PORT, v)
    }
    pub fn set_dst_port(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DST_PORT, v)
    }
    pub fn set_length(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LENGTH, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub length: u16,
    pub checksum: u16,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            length: p.length(),
            checksum: p.checksum(),
        }
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_length(self.length);
        p.set_checksum(self.checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_and_bad_length() {
        let b = [0xc0, 0x00, 0x12, 0xb7, 0x00, 0x30, 0x00, 0x00];
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap());
        assert_eq!(r, Repr { src_port: 49152, dst_port: ROCE_V2_PORT, length: 48, checksum: 0 });
        let mut out = [0xa5; 8];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
        let bad = [0, 1, 0x12, 0xb7, 0, 7, 0, 0];
        assert_eq!(
            Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed(Malformed::UdpLength { length: 7 })
        );
        for n in 0..8 {
            assert!(matches!(Packet::new_checked(&b[..n]), Err(Error::Truncated { .. })));
        }
    }

    proptest::proptest! {
        #[test]
        fn round_trip(src_port: u16, dst_port: u16, length in 8u16.., checksum: u16) {
            let r = Repr { src_port, dst_port, length, checksum };
            let mut b = [0u8; 8];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            proptest::prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
        }
    }
}
