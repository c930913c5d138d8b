//! 24-bit packet sequence numbers, compared by wrapping subtraction.
//!
//! Owns: [`Psn`]. Imports: nothing of the project.

use core::fmt;

/// A Packet Sequence Number: 24 bits, wrapping from 0xFF_FFFF to 0.
///
/// Ordering is only meaningful within half the sequence space (2^23), as in
/// IBA 9.7.2 and smoltcp's `TcpSeqNumber`: [`Psn::diff`] gives the signed distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    pub const MASK: u32 = 0x00FF_FFFF;

    /// Keeps the low 24 bits of `v`.
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }

    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// Signed distance from `other` to `self`, in (-2^23, 2^23].
    pub const fn diff(self, other: Psn) -> i32 {
        let d = self.0.wrapping_sub(other.0) & Self::MASK;
        if d > 0x80_0000 {
            d as i32 - 0x100_0000
        } else {
            d as i32
        }
    }

    /// `self` comes after `other` (within half the space).
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(0xFF_FFFF).add(1), Psn::new(0));
        assert_eq!(Psn::new(0x1FF_FFFF), Psn::new(0xFF_FFFF));
        assert!(Psn::new(0).after(Psn::new(0xFF_FFFF)));
        assert_eq!(Psn::new(2).diff(Psn::new(0xFF_FFFE)), 4);
        assert_eq!(Psn::new(0xFF_FFFE).diff(Psn::new(2)), -4);
    }

    proptest! {
        #[test]
        fn diff_inverts_add(a in 0u32..0x100_0000, n in 0u32..0x80_0000) {
            let p = Psn::new(a);
            prop_assert_eq!(p.add(n).diff(p), n as i32);
            prop_assert_eq!(p.diff(p.add(n)), -(n as i32));
        }
    }
}
