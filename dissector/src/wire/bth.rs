//! Base Transport Header (IBA Vol 1, 9.2), 12 bytes.
//!
//! ```text
//!  byte 0  OpCode
//!  byte 1  SE | MigReq | PadCnt(2) | TVer(4)
//!  2..4    P_Key
//!  byte 4  FECN | BECN | reserved(6)        (RoCEv2 Annex A17 gives FECN/BECN meaning)
//!  5..8    DestQP (24)
//!  byte 8  AckReq | reserved(7)
//!  9..12   PSN (24)
//! ```
//!
//! Owns: the BTH. Imports: the shared helpers and errors, [`Opcode`] and
//! [`Psn`] (its parent).

use super::{be, check_len, Error, Field, Opcode, Psn};

mod field {
    use super::Field;
    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const P_KEY: Field = 2..4;
    pub(super) const FECN_BECN: usize = 4;
    pub(super) const DEST_QP: Field = 5..8;
    pub(super) const ACK_REQ: usize = 8;
    pub(super) const PSN: Field = 9..12;
}

pub const HEADER_LEN: usize = field::PSN.end;

/// A zero-copy view of a BTH.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking it; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after checking it holds a whole BTH; no accessor can panic after.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode(self.buffer.as_ref()[field::OPCODE])
    }
    #[inline]
    pub fn solicited_event(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }
    #[inline]
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x3
    }
    #[inline]
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0xF
    }
    #[inline]
    pub fn p_key(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::P_KEY)
    }
    #[inline]
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x80 != 0
    }
    #[inline]
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x40 != 0
    }
    /// The six reserved bits of byte 4 (tshark's `infiniband.bth.reserved` byte).
    #[inline]
    pub fn resv6(&self) -> u8 {
        self.buffer.as_ref()[field::FECN_BECN] & 0x3F
    }
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        be::u24(self.buffer.as_ref(), field::DEST_QP)
    }
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }
    #[inline]
    pub fn resv7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK_REQ] & 0x7F
    }
    #[inline]
    pub fn psn(&self) -> Psn {
        Psn::new(be::u24(self.buffer.as_ref(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.0;
    }
    pub fn set_flags(&mut self, se: bool, mig_req: bool, pad: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] =
            (se as u8) << 7 | (mig_req as u8) << 6 | (pad & 3) << 4 | (tver & 0xF);
    }
    pub fn set_p_key(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::P_KEY, v)
    }
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool, resv6: u8) {
        self.buffer.as_mut()[field::FECN_BECN] =
            (fecn as u8) << 7 | (becn as u8) << 6 | (resv6 & 0x3F);
    }
    pub fn set_dest_qp(&mut self, v: u32) {
        be::set_u24(self.buffer.as_mut(), field::DEST_QP, v)
    }
    pub fn set_ack_req(&mut self, a: bool, resv7: u8) {
        self.buffer.as_mut()[field::ACK_REQ] = (a as u8) << 7 | (resv7 & 0x7F);
    }
    pub fn set_psn(&mut self, psn: Psn) {
        be::set_u24(self.buffer.as_mut(), field::PSN, psn.value())
    }
}

/// An owned BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    pub opcode: Opcode,
    pub solicited_event: bool,
    pub mig_req: bool,
    pub pad_count: u8,
    pub tver: u8,
    pub p_key: u16,
    pub fecn: bool,
    pub becn: bool,
    pub resv6: u8,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub resv7: u8,
    pub psn: Psn,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        // One bounds check for the whole header, then plain reads (the hot path).
        let Some(b) = p.buffer.as_ref().first_chunk::<HEADER_LEN>() else {
            unreachable!("Packet::new_checked guarantees HEADER_LEN bytes")
        };
        Repr {
            opcode: Opcode(b[field::OPCODE]),
            solicited_event: b[field::FLAGS] & 0x80 != 0,
            mig_req: b[field::FLAGS] & 0x40 != 0,
            pad_count: (b[field::FLAGS] >> 4) & 0x3,
            tver: b[field::FLAGS] & 0xF,
            p_key: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[field::FECN_BECN] & 0x80 != 0,
            becn: b[field::FECN_BECN] & 0x40 != 0,
            resv6: b[field::FECN_BECN] & 0x3F,
            dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_req: b[field::ACK_REQ] & 0x80 != 0,
            resv7: b[field::ACK_REQ] & 0x7F,
            psn: Psn::new(u32::from_be_bytes([0, b[9], b[10], b[11]])),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_opcode(self.opcode);
        p.set_flags(self.solicited_event, self.mig_req, self.pad_count, self.tver);
        p.set_p_key(self.p_key);
        p.set_fecn_becn(self.fecn, self.becn, self.resv6);
        p.set_dest_qp(self.dest_qp);
        p.set_ack_req(self.ack_req, self.resv7);
        p.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // RC RDMA WRITE Only, SE=0 M=1 PadCnt=2 TVer=0, P_Key 0xffff, BECN, DestQP 0x000011,
    // AckReq, PSN 0x0a0b0c.
    static BYTES: [u8; 12] =
        [0x0a, 0x60, 0xff, 0xff, 0x40, 0x00, 0x00, 0x11, 0x80, 0x0a, 0x0b, 0x0c];

    fn repr() -> Repr {
        Repr {
            opcode: Opcode(0x0a),
            mig_req: true,
            pad_count: 2,
            p_key: 0xffff,
            becn: true,
            dest_qp: 0x11,
            ack_req: true,
            psn: Psn::new(0x0a0b0c),
            ..Repr::default()
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.opcode(), Opcode(0x0a));
        assert!(!p.solicited_event());
        assert!(p.mig_req());
        assert_eq!(p.pad_count(), 2);
        assert_eq!(p.p_key(), 0xffff);
        assert!(!p.fecn() && p.becn());
        assert_eq!(p.dest_qp(), 0x11);
        assert!(p.ack_req());
        assert_eq!(p.psn(), Psn::new(0x0a0b0c));
        assert_eq!(Repr::parse(&p), repr());
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 12];
        repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn truncated_every_len() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&BYTES[..n]).unwrap_err(),
                Error::Truncated { needed: 12, available: n }
            );
        }
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::array::uniform12(any::<u8>())) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap());
            let mut out = [0u8; 12];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(out, bytes);
        }
    }
}
