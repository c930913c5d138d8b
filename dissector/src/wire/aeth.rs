//! ACK Extended Transport Header (IBA Vol 1, 9.3.5): syndrome (8 bits) and MSN (24).
//!
//! The syndrome says whether this is an ACK (with a credit count), an RNR NAK (with
//! the minimum RNR timer the requester must wait) or a NAK (with its error code).

use core::fmt;

use super::{be, check_len, Error, Field};

mod field {
    use super::Field;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

pub const HEADER_LEN: usize = field::MSN.end;

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        Ok(Packet { buffer })
    }
    #[inline]
    pub fn syndrome(&self) -> Syndrome {
        Syndrome(self.buffer.as_ref()[field::SYNDROME])
    }
    #[inline]
    pub fn msn(&self) -> u32 {
        be::u24(self.buffer.as_ref(), field::MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_syndrome(&mut self, s: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = s.0;
    }
    pub fn set_msn(&mut self, msn: u32) {
        be::set_u24(self.buffer.as_mut(), field::MSN, msn)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AethRepr {
    pub syndrome: Syndrome,
    pub msn: u32,
}

impl AethRepr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> AethRepr {
        AethRepr { syndrome: p.syndrome(), msn: p.msn() }
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_syndrome(self.syndrome);
        p.set_msn(self.msn);
    }
}

/// The AETH syndrome byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Syndrome(pub u8);

/// What a syndrome means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckKind {
    /// Positive acknowledgement; `credits` 0x1F means no end-to-end credit.
    Ack { credits: u8 },
    /// Receiver not ready: the requester waits `timer_us` microseconds (at least).
    RnrNak { timer: u8 },
    Nak(NakCode),
    /// Syndromes with bits 6–5 = 10, or the reserved bit 7 set.
    Reserved,
}

/// NAK codes (IBA Vol 1, table 44).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    PsnSequenceError,
    InvalidRequest,
    RemoteAccessError,
    RemoteOperationalError,
    InvalidRdRequest,
    Reserved(u8),
}

impl NakCode {
    pub const fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "PSN Sequence Error",
            NakCode::InvalidRequest => "Invalid Request",
            NakCode::RemoteAccessError => "Remote Access Error",
            NakCode::RemoteOperationalError => "Remote Operational Error",
            NakCode::InvalidRdRequest => "Invalid RD Request",
            NakCode::Reserved(_) => "Reserved NAK code",
        }
    }
    /// The completion status a libibverbs requester sees for this NAK.
    pub const fn wc_status(self) -> Option<&'static str> {
        match self {
            NakCode::InvalidRequest => Some("IBV_WC_REM_INV_REQ_ERR"),
            NakCode::RemoteAccessError => Some("IBV_WC_REM_ACCESS_ERR"),
            NakCode::RemoteOperationalError => Some("IBV_WC_REM_OP_ERR"),
            NakCode::InvalidRdRequest => Some("IBV_WC_REM_INV_RD_REQ_ERR"),
            _ => None,
        }
    }
}

/// Minimum RNR NAK timer values in microseconds, indexed by the 5-bit timer field
/// (IBA Vol 1, table 45). Index 0 means 655.36 ms.
pub const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
    3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
    163_840, 245_760, 327_680, 491_520,
];

impl Syndrome {
    pub const ACK: Syndrome = Syndrome(0x1F);

    pub const fn rnr_nak(timer: u8) -> Syndrome {
        Syndrome(0x20 | (timer & 0x1F))
    }
    pub const fn nak(code: u8) -> Syndrome {
        Syndrome(0x60 | (code & 0x1F))
    }

    pub const fn kind(self) -> AckKind {
        if self.0 & 0x80 != 0 {
            return AckKind::Reserved;
        }
        let v = self.0 & 0x1F;
        match (self.0 >> 5) & 3 {
            0 => AckKind::Ack { credits: v },
            1 => AckKind::RnrNak { timer: v },
            3 => AckKind::Nak(match v {
                0 => NakCode::PsnSequenceError,
                1 => NakCode::InvalidRequest,
                2 => NakCode::RemoteAccessError,
                3 => NakCode::RemoteOperationalError,
                4 => NakCode::InvalidRdRequest,
                x => NakCode::Reserved(x),
            }),
            _ => AckKind::Reserved,
        }
    }

    pub const fn is_ack(self) -> bool {
        matches!(self.kind(), AckKind::Ack { .. })
    }
    pub const fn is_nak(self) -> bool {
        matches!(self.kind(), AckKind::Nak(_))
    }
    pub const fn is_rnr_nak(self) -> bool {
        matches!(self.kind(), AckKind::RnrNak { .. })
    }
}

impl fmt::Debug for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Syndrome({:#04x} {})", self.0, self)
    }
}

/// `ACK credits=31`, `RNR NAK timer=12 (0.64 ms)`, `NAK Remote Access Error`.
impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            AckKind::Ack { credits: 0x1F } => f.write_str("ACK (no credit limit)"),
            AckKind::Ack { credits } => write!(f, "ACK credits={credits}"),
            AckKind::RnrNak { timer } => {
                let us = RNR_TIMER_US[timer as usize];
                write!(f, "RNR NAK timer={timer} ({}.{:02} ms)", us / 1000, (us % 1000) / 10)
            }
            AckKind::Nak(code) => write!(f, "NAK {}", code.name()),
            AckKind::Reserved => write!(f, "Reserved syndrome {:#04x}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_from_protocol_md() {
        assert_eq!(Syndrome(0x1F).to_string(), "ACK (no credit limit)");
        assert_eq!(Syndrome(0x05).to_string(), "ACK credits=5");
        assert_eq!(Syndrome(0x2C).to_string(), "RNR NAK timer=12 (0.64 ms)");
        assert_eq!(Syndrome(0x20).to_string(), "RNR NAK timer=0 (655.36 ms)");
        assert_eq!(Syndrome(0x3F).to_string(), "RNR NAK timer=31 (491.52 ms)");
        assert_eq!(Syndrome(0x60).to_string(), "NAK PSN Sequence Error");
        assert_eq!(Syndrome(0x61).to_string(), "NAK Invalid Request");
        assert_eq!(Syndrome(0x62).to_string(), "NAK Remote Access Error");
        assert_eq!(Syndrome(0x63).to_string(), "NAK Remote Operational Error");
        assert_eq!(Syndrome(0x64).to_string(), "NAK Invalid RD Request");
        assert_eq!(Syndrome(0x41).kind(), AckKind::Reserved);
        assert_eq!(Syndrome(0x9F).kind(), AckKind::Reserved);
        assert_eq!(NakCode::RemoteAccessError.wc_status(), Some("IBV_WC_REM_ACCESS_ERR"));
    }

    #[test]
    fn parse_emit() {
        let bytes = [0x62, 0x00, 0x01, 0x02];
        let r = AethRepr::parse(&Packet::new_checked(&bytes[..]).unwrap());
        assert_eq!(r, AethRepr { syndrome: Syndrome(0x62), msn: 0x102 });
        let mut out = [0xa5; 4];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        for n in 0..4 {
            assert!(Packet::new_checked(&bytes[..n]).is_err());
        }
    }

    proptest::proptest! {
        #[test]
        fn round_trip(syndrome: u8, msn in 0u32..0x100_0000) {
            let r = AethRepr { syndrome: Syndrome(syndrome), msn };
            let mut b = [0u8; 4];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            proptest::prop_assert_eq!(AethRepr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
            // Every syndrome has a meaning and a name.
            proptest::prop_assert!(!r.syndrome.to_string().is_empty());
        }
    }
}
