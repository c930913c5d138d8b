//! TCP header (RFC 9293), as far as an analyzer of RoCE captures needs it: ports,
//! sequence numbers, header length and flags. Options are skipped, not decoded.
//!
//! The tools that set up RDMA connections (perftest, the verbs pingpongs) exchange
//! QP numbers over TCP on the same wire; this view lets the frame decoder name those
//! segments (`tcp.port`, the `-T fields` and display filter fields).
//!
//! Owns: the TCP header. Imports: the shared helpers and errors (its parent).

use super::{be, check_len, Error, Field, Malformed};

mod field {
    use super::Field;
    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const SEQ: Field = 4..8;
    pub(super) const ACK: Field = 8..12;
    pub(super) const DATA_OFF: usize = 12;
    pub(super) const FLAGS: usize = 13;
    pub(super) const WINDOW: Field = 14..16;
    pub(super) const CHECKSUM: Field = 16..18;
    pub(super) const URGENT: Field = 18..20;
}

/// The fixed header, without options.
pub const HEADER_LEN: usize = field::URGENT.end;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Checks the fixed header fits and the data offset is at least 5 words. After
    /// this no accessor can panic. Options beyond the capture are the caller's concern.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        let p = Packet { buffer };
        if p.header_len() < HEADER_LEN {
            return Err(Error::Malformed(Malformed::TcpHeaderLen { words: p.data_offset() }));
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
    pub fn seq(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::SEQ)
    }
    pub fn ack(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ACK)
    }
    /// The data offset field: header length in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::DATA_OFF] >> 4
    }
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
    }
    /// FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn window(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::WINDOW)
    }
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
    pub fn set_seq(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::SEQ, v)
    }
    pub fn set_ack(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ACK, v)
    }
    /// Sets the data offset (in words); the low nibble of the byte is reserved: zero.
    pub fn set_data_offset(&mut self, words: u8) {
        self.buffer.as_mut()[field::DATA_OFF] = (words & 0x0F) << 4;
    }
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }
    pub fn set_window(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::WINDOW, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, v)
    }
}

/// The parts of a TCP header the analyzer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    /// Header length in bytes (options included).
    pub header_len: u8,
    pub flags: u8,
    pub window: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            ack: p.ack(),
            header_len: p.header_len() as u8,
            flags: p.flags(),
            window: p.window(),
        }
    }
    /// Writes the fixed header (checksum 0; no options, so `header_len` must be 20).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq(self.seq);
        p.set_ack(self.ack);
        p.set_data_offset(self.header_len / 4);
        p.set_flags(self.flags);
        p.set_window(self.window);
        p.set_checksum(0);
        be::set_u16(p.buffer.as_mut(), field::URGENT, 0);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    // 43520 → 18515, seq 1, ack 2, 5 words, SYN+ACK, window 0x1000.
    static BYTES: [u8; 20] =
        [0xaa, 0x00, 0x48, 0x53, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x12, 0x10, 0x00, 0, 0, 0, 0];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (43520, 18515));
        assert_eq!((p.seq(), p.ack()), (1, 2));
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.flags(), 0x12);
        assert_eq!(p.window(), 0x1000);
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 20];
        let r = Repr::parse(&Packet::new_unchecked(&BYTES[..]));
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn truncated_every_len() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&BYTES[..n]).unwrap_err(),
                Error::Truncated { needed: HEADER_LEN, available: n }
            );
        }
    }

    #[test]
    fn short_data_offset_is_malformed() {
        let mut b = BYTES;
        b[12] = 0x40;
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!(e, Error::Malformed(Malformed::TcpHeaderLen { words: 4 }));
        assert!(e.to_string().contains("4 words"), "{e}");
    }

    proptest! {
        #[test]
        fn round_trip(src_port in any::<u16>(), dst_port in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(), flags in any::<u8>(), window in any::<u16>()) {
            let r = Repr { src_port, dst_port, seq, ack, header_len: 20, flags, window };
            let mut buf = [0xa5u8; 20];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()), r);
        }
    }
}
