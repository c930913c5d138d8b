//! ACK Extended Transport Header (IBA Vol 1, 9.3.5): syndrome (8 bits) and MSN (24).
//!
//! The syndrome says whether this is an ACK (with a credit count), an RNR NAK (with
//! the minimum RNR timer the requester must wait) or a NAK (with its error code).
//!
//! Owns: the AETH and what a syndrome means (ACK credits, RNR timer, NAK codes and the
//! work completion each causes). Imports: the shared helpers and errors (its parent).

use core::fmt;

use super::{be, check_len, Error, Field};

mod field {
    use super::Field;
    pub(super) const SYNDROME: usize = 0;
    pub(super) const MSN: Field = 1..4;
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
    Ack {
        credits: u8,
    },
    /// Receiver not ready: the requester waits `timer_us` microseconds (at least).
    RnrNak {
        timer: u8,
    },
    Nak(NakCode),
    /// Syndromes with bits 6–5 = 10, or the reserved bit 7 set.
    Reserved,
}

impl AckKind {
    /// Its class (`None` for a reserved syndrome).
    pub const fn class(self) -> Option<AckClass> {
        match self {
            AckKind::Ack { .. } => Some(AckClass::Ack),
            AckKind::RnrNak { .. } => Some(AckClass::RnrNak),
            AckKind::Nak(c) => Some(AckClass::Nak(c)),
            AckKind::Reserved => None,
        }
    }
    /// A NAK or RNR NAK: which.
    pub const fn nak(self) -> Option<NakKind> {
        match self {
            AckKind::RnrNak { .. } => Some(NakKind::Rnr),
            AckKind::Nak(c) => Some(NakKind::Nak(c)),
            _ => None,
        }
    }
    /// How long an RNR NAK tells the requester to wait, in µs.
    pub const fn rnr_wait_us(self) -> Option<u32> {
        match self {
            AckKind::RnrNak { timer } => Some(RNR_TIMER_US[(timer & 0x1F) as usize]),
            _ => None,
        }
    }
}

/// NAK codes (IBA Vol 1, table 44).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NakCode {
    PsnSequenceError,
    InvalidRequest,
    RemoteAccessError,
    RemoteOperationalError,
    InvalidRdRequest,
    Reserved(u8),
}

/// One row of the NAK table: everything any layer says about a NAK code. This is
/// the one home of these facts; decoding, scenarios, `roce check`'s hints, reports
/// and the HTML ladder all read them from here.
struct NakRow {
    /// Its 5-bit value in the syndrome is [`NakCode::value`].
    code: NakCode,
    /// As the IBA spec and tshark write it.
    name: &'static str,
    /// As scenario files write it (`naks = ["remote_access_error"]`).
    key: &'static str,
    /// What a libibverbs requester's completion says.
    wc_status: Option<&'static str>,
}

const NAKS: [NakRow; 5] = [
    NakRow {
        code: NakCode::PsnSequenceError,
        name: "PSN Sequence Error",
        key: "psn_sequence_error",
        wc_status: None,
    },
    NakRow {
        code: NakCode::InvalidRequest,
        name: "Invalid Request",
        key: "invalid_request",
        wc_status: Some("IBV_WC_REM_INV_REQ_ERR"),
    },
    NakRow {
        code: NakCode::RemoteAccessError,
        name: "Remote Access Error",
        key: "remote_access_error",
        wc_status: Some("IBV_WC_REM_ACCESS_ERR"),
    },
    NakRow {
        code: NakCode::RemoteOperationalError,
        name: "Remote Operational Error",
        key: "remote_operational_error",
        wc_status: Some("IBV_WC_REM_OP_ERR"),
    },
    NakRow {
        code: NakCode::InvalidRdRequest,
        name: "Invalid RD Request",
        key: "invalid_rd_request",
        wc_status: Some("IBV_WC_REM_INV_RD_REQ_ERR"),
    },
];

impl NakCode {
    /// The defined codes, in code order.
    pub const ALL: [NakCode; 5] = {
        let mut all = [NakCode::PsnSequenceError; 5];
        let mut i = 0;
        while i < NAKS.len() {
            all[i] = NAKS[i].code;
            i += 1;
        }
        all
    };

    const fn row(self) -> Option<&'static NakRow> {
        let mut i = 0;
        while i < NAKS.len() {
            if NAKS[i].code.value() == self.value() && !matches!(self, NakCode::Reserved(_)) {
                return Some(&NAKS[i]);
            }
            i += 1;
        }
        None
    }

    /// The code of a NAK syndrome's low five bits.
    pub const fn from_value(v: u8) -> NakCode {
        let v = v & 0x1F;
        let mut i = 0;
        while i < NAKS.len() {
            if NAKS[i].code.value() == v {
                return NAKS[i].code;
            }
            i += 1;
        }
        NakCode::Reserved(v)
    }

    /// The five-bit code (bits 4–0 of the syndrome, with bits 6–5 = 11).
    pub const fn value(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(v) => v & 0x1F,
        }
    }

    /// `Remote Access Error`, as the spec and tshark name it.
    pub const fn name(self) -> &'static str {
        match self.row() {
            Some(r) => r.name,
            None => "Reserved NAK code",
        }
    }

    /// `remote_access_error`, as scenario files name it.
    pub const fn key(self) -> &'static str {
        match self.row() {
            Some(r) => r.key,
            None => "reserved",
        }
    }

    /// The completion status a libibverbs requester sees for this NAK.
    pub const fn wc_status(self) -> Option<&'static str> {
        match self.row() {
            Some(r) => r.wc_status,
            None => None,
        }
    }
}

/// The spec's name: `Remote Access Error`.
impl fmt::Display for NakCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub use crate::text::UnknownName;

/// Words compared without case and with runs of white space as one.
fn same_words(a: &str, b: &str) -> bool {
    a.split_whitespace()
        .map(str::to_ascii_lowercase)
        .eq(b.split_whitespace().map(str::to_ascii_lowercase))
}

/// Either form: the spec's name (`Remote Access Error`, any case) or the scenario
/// key (`remote_access_error`).
impl core::str::FromStr for NakCode {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<NakCode, UnknownName> {
        NAKS.iter()
            .find(|r| r.key == s.trim() || same_words(r.name, s))
            .map(|r| r.code)
            .ok_or_else(|| UnknownName::among("NAK", s, s.trim(), NAKS.iter().map(|r| r.key)))
    }
}

/// What an acknowledgement says, by class: how scenarios, reports and the ladder
/// name a response (`ACK`, `RNR NAK`, `NAK Remote Access Error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AckClass {
    Ack,
    RnrNak,
    Nak(NakCode),
}

impl AckClass {
    /// Every class with a name, in syndrome order.
    pub fn all() -> impl Iterator<Item = AckClass> {
        [AckClass::Ack, AckClass::RnrNak]
            .into_iter()
            .chain(NakCode::ALL.into_iter().map(AckClass::Nak))
    }
}

/// `ACK`, `RNR NAK`, `NAK Remote Access Error`.
impl fmt::Display for AckClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AckClass::Ack => f.write_str("ACK"),
            AckClass::RnrNak => f.write_str("RNR NAK"),
            AckClass::Nak(c) => write!(f, "NAK {}", c.name()),
        }
    }
}

impl core::str::FromStr for AckClass {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<AckClass, UnknownName> {
        AckClass::all()
            .find(|c| same_words(&c.to_string(), s))
            .ok_or_else(|| UnknownName::among("response", s, s, ["ACK", "RNR NAK"]))
    }
}

/// A negative acknowledgement of either kind, as scenarios list the ones that
/// must appear: `rnr`, or a NAK code's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NakKind {
    Rnr,
    Nak(NakCode),
}

impl NakKind {
    /// Every kind, `rnr` last.
    pub fn all() -> impl Iterator<Item = NakKind> {
        NakCode::ALL.into_iter().map(NakKind::Nak).chain([NakKind::Rnr])
    }
    /// `rnr`, `remote_access_error`.
    pub const fn key(self) -> &'static str {
        match self {
            NakKind::Rnr => "rnr",
            NakKind::Nak(c) => c.key(),
        }
    }
}

/// The scenario key: `rnr`, `remote_access_error`.
impl fmt::Display for NakKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl core::str::FromStr for NakKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<NakKind, UnknownName> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("rnr") || same_words(s, "RNR NAK") {
            return Ok(NakKind::Rnr);
        }
        s.parse::<NakCode>()
            .map(NakKind::Nak)
            .map_err(|_| UnknownName::among("NAK", s, s, NAKS.iter().map(|r| r.key).chain(["rnr"])))
    }
}

/// Minimum RNR NAK timer values in microseconds, indexed by the 5-bit timer field
/// (IBA Vol 1, table 45). Index 0 means 655.36 ms.
pub const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

impl Syndrome {
    pub const ACK: Syndrome = Syndrome(0x1F);

    pub const fn rnr_nak(timer: u8) -> Syndrome {
        Syndrome(0x20 | (timer & 0x1F))
    }
    pub const fn nak(code: u8) -> Syndrome {
        Syndrome(0x60 | (code & 0x1F))
    }
    /// The NAK syndrome of `code`.
    pub const fn of_nak(code: NakCode) -> Syndrome {
        Syndrome::nak(code.value())
    }

    pub const fn kind(self) -> AckKind {
        if self.0 & 0x80 != 0 {
            return AckKind::Reserved;
        }
        let v = self.0 & 0x1F;
        match (self.0 >> 5) & 3 {
            0 => AckKind::Ack { credits: v },
            1 => AckKind::RnrNak { timer: v },
            3 => AckKind::Nak(NakCode::from_value(v)),
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
            AckKind::Nak(code) => write!(f, "{}", AckClass::Nak(code)),
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

    /// Every name parses back to its code, in either form, and nothing else does.
    #[test]
    fn names_and_keys_round_trip() {
        for c in NakCode::ALL {
            assert_eq!(c.name().parse::<NakCode>(), Ok(c));
            assert_eq!(c.key().parse::<NakCode>(), Ok(c));
            assert_eq!(c.name().to_uppercase().parse::<NakCode>(), Ok(c), "any case");
            assert_eq!(NakCode::from_value(c.value()), c);
            assert_eq!(Syndrome::of_nak(c).kind(), AckKind::Nak(c));
            assert_eq!(AckClass::Nak(c).to_string().parse::<AckClass>(), Ok(AckClass::Nak(c)));
            assert_eq!(NakKind::Nak(c).to_string().parse::<NakKind>(), Ok(NakKind::Nak(c)));
        }
        assert_eq!(NakCode::InvalidRdRequest.value(), 4);
        assert_eq!(
            Syndrome(0x64).kind().class().map(|c| c.to_string()).as_deref(),
            Some("NAK Invalid RD Request")
        );
        assert_eq!(
            "invalid_rd_request".parse::<NakKind>(),
            Ok(NakKind::Nak(NakCode::InvalidRdRequest))
        );
        assert_eq!(NakCode::from_value(9), NakCode::Reserved(9));
        assert_eq!(NakCode::Reserved(9).name(), "Reserved NAK code");
        assert_eq!("rnr".parse::<NakKind>(), Ok(NakKind::Rnr));
        assert_eq!("RNR NAK".parse::<AckClass>(), Ok(AckClass::RnrNak));
        assert_eq!("ack".parse::<AckClass>(), Ok(AckClass::Ack));
        let e = "remote_acess_error".parse::<NakKind>().unwrap_err();
        assert_eq!(e.suggestion.as_deref(), Some("remote_access_error"), "{e}");
        assert_eq!("rrn".parse::<NakKind>().unwrap_err().suggestion.as_deref(), Some("rnr"));
        assert_eq!(
            "remote_acess_error".parse::<NakKind>().unwrap_err().to_string(),
            "unknown NAK `remote_acess_error` (did you mean `remote_access_error`?)"
        );
        assert!("NAK".parse::<AckClass>().is_err(), "a bare NAK is no class");
        assert_eq!(AckKind::RnrNak { timer: 12 }.rnr_wait_us(), Some(640));
        assert_eq!(AckKind::Ack { credits: 3 }.nak(), None);
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
