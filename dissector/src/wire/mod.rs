//! Wire formats, one module per header, in the style of smoltcp's `wire` module.
//!
//! Each header module has:
//! - `mod field`: the byte ranges of its fields (offsets as data, never scattered literals);
//! - `Packet<T: AsRef<[u8]>>`: a zero-copy view. [`Packet::new_checked`] validates the
//!   length once; after that no accessor can panic. Setters exist when `T: AsMut<[u8]>`;
//! - `Repr`: a small owned value with `parse(&Packet)` and `emit(&mut Packet)`.
//!
//! Header-level errors ([`Error`]) do not know where the header sits in a frame; the
//! frame decoder ([`crate::frame`]) adds the layer and the offset.
//!
//! Owns: the header modules, the shared length and content errors, field ranges and
//! big-endian reads. Imports: nothing of the project.
//!
//! [`Packet::new_checked`]: bth::Packet::new_checked

pub mod aeth;
pub mod bth;
pub mod ethernet;
pub mod ext;
pub mod icrc;
pub mod ipv4;
pub mod ipv6;
pub mod l4sum;
pub mod mad;
pub mod opcode;
pub mod psn;
pub mod sll;
pub mod tcp;
pub mod udp;

pub use aeth::{AckClass, AckKind, AethRepr, NakCode, NakKind, Syndrome, RNR_TIMER_US};
pub use bth::{Packet as BthPacket, Repr as BthRepr};
pub use opcode::{Headers, OpInfo, Opcode, Transport};
pub use psn::Psn;

use core::fmt;

/// A byte range of a field inside its header.
pub(crate) type Field = core::ops::Range<usize>;

/// Why a header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the header (or the length a field announces) does.
    Truncated { needed: usize, available: usize },
    /// A field holds a value this header does not allow.
    Malformed(Malformed),
}

/// The content errors, one per rule a header can break. Each names the field and the
/// value found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    Ipv4Version {
        version: u8,
    },
    Ipv4HeaderLen {
        ihl: u8,
    },
    Ipv4TotalLen {
        total_len: u16,
        header_len: usize,
    },
    Ipv6Version {
        version: u8,
    },
    UdpLength {
        length: u16,
    },
    GrhVersion {
        version: u8,
    },
    PadExceedsPayload {
        pad: u8,
        payload_len: usize,
    },
    NoRoomForIcrc {
        left: usize,
    },
    MadBaseVersion {
        version: u8,
    },
    /// A MAD is 256 bytes (IBA 13.4.2); tshark 4.0 reads no MAD from fewer.
    MadLength {
        len: usize,
    },
    TcpHeaderLen {
        words: u8,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} captured")
            }
            Error::Malformed(m) => m.fmt(f),
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Malformed::Ipv4Version { version } => {
                write!(f, "IP version field is {version}, expected 4")
            }
            Malformed::Ipv4HeaderLen { ihl } => {
                write!(f, "IPv4 header length (IHL) is {ihl} words, at least 5 required")
            }
            Malformed::Ipv4TotalLen { total_len, header_len } => write!(
                f,
                "IPv4 total length {total_len} is smaller than its header ({header_len} bytes)"
            ),
            Malformed::Ipv6Version { version } => {
                write!(f, "IP version field is {version}, expected 6")
            }
            Malformed::UdpLength { length } => {
                write!(f, "UDP length {length} is smaller than the 8-byte UDP header")
            }
            Malformed::GrhVersion { version } => {
                write!(f, "GRH IP version is {version}, expected 6")
            }
            Malformed::PadExceedsPayload { pad, payload_len } => {
                write!(f, "BTH pad count {pad} exceeds the {payload_len} bytes left for payload")
            }
            Malformed::NoRoomForIcrc { left } => write!(
                f,
                "only {left} bytes after the transport headers, the 4-byte ICRC does not fit"
            ),
            Malformed::MadBaseVersion { version } => {
                write!(f, "MAD base version is {version}, expected 1")
            }
            Malformed::MadLength { len } => {
                write!(f, "a MAD is 256 bytes, this UD SEND to QP1 carries {len}")
            }
            Malformed::TcpHeaderLen { words } => {
                write!(f, "TCP data offset is {words} words, at least 5 required")
            }
        }
    }
}

impl std::error::Error for Error {}

/// Checks that `buf` holds at least `len` bytes.
#[inline]
pub(crate) fn check_len(buf: &[u8], len: usize) -> Result<(), Error> {
    if buf.len() < len {
        Err(Error::Truncated { needed: len, available: buf.len() })
    } else {
        Ok(())
    }
}

/// Big-endian reads and writes of fields whose range has been length-checked.
/// Widths are fixed by each header's `mod field`, so the conversions cannot fail.
pub(crate) mod be {
    use super::Field;

    #[inline(always)]
    pub(crate) fn u16(b: &[u8], f: Field) -> u16 {
        u16::from_be_bytes([b[f.start], b[f.start + 1]])
    }
    #[inline(always)]
    pub(crate) fn u24(b: &[u8], f: Field) -> u32 {
        u32::from_be_bytes([0, b[f.start], b[f.start + 1], b[f.start + 2]])
    }
    #[inline(always)]
    pub(crate) fn u32(b: &[u8], f: Field) -> u32 {
        u32::from_be_bytes([b[f.start], b[f.start + 1], b[f.start + 2], b[f.start + 3]])
    }
    #[inline(always)]
    pub(crate) fn u64(b: &[u8], f: Field) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[f.start..f.start + 8]);
        u64::from_be_bytes(x)
    }
    #[inline(always)]
    pub(crate) fn set_u16(b: &mut [u8], f: Field, v: u16) {
        b[f.start..f.start + 2].copy_from_slice(&v.to_be_bytes());
    }
    #[inline(always)]
    pub(crate) fn set_u24(b: &mut [u8], f: Field, v: u32) {
        b[f.start..f.start + 3].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    #[inline(always)]
    pub(crate) fn set_u32(b: &mut [u8], f: Field, v: u32) {
        b[f.start..f.start + 4].copy_from_slice(&v.to_be_bytes());
    }
    #[inline(always)]
    pub(crate) fn set_u64(b: &mut [u8], f: Field, v: u64) {
        b[f.start..f.start + 8].copy_from_slice(&v.to_be_bytes());
    }
}
