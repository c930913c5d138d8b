//! The fixed-size extended transport headers that follow the BTH (IBA Vol 1, 9.3;
//! XRCETH: Annex A14; FETH: the 1.5 memory placement extensions). Which of them a
//! packet carries, and in what order, comes from [`super::opcode`].
//!
//! Each header is a zero-copy `…Packet<T>` view plus an owned `…Repr`. The views share
//! their constructor through `header_view!`; the accessors are written out.
//!
//! Owns: the fixed-size extension headers. Imports: the shared helpers and errors (its
//! parent).

use super::{be, check_len, Error};

macro_rules! header_view {
    ($(#[$m:meta])* $name:ident, $len:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }
        impl<T: AsRef<[u8]>> $name<T> {
            pub const HEADER_LEN: usize = $len;
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }
            /// Checks the length once; no accessor can panic afterwards.
            pub fn new_checked(buffer: T) -> Result<Self, Error> {
                check_len(buffer.as_ref(), $len)?;
                Ok(Self { buffer })
            }
        }
    };
}

// ---- RDETH: reserved(8) EE-Context(24) -------------------------------------------
header_view!(
    /// Reliable Datagram Extended Transport Header.
    RdethPacket, 4
);
impl<T: AsRef<[u8]>> RdethPacket<T> {
    pub fn ee_context(&self) -> u32 {
        be::u24(self.buffer.as_ref(), 1..4)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> RdethPacket<T> {
    pub fn set_ee_context(&mut self, v: u32) {
        self.buffer.as_mut()[0] = 0;
        be::set_u24(self.buffer.as_mut(), 1..4, v)
    }
}

// ---- DETH: Q_Key(32) reserved(8) SrcQP(24) ---------------------------------------
header_view!(
    /// Datagram Extended Transport Header (UD, RD).
    DethPacket, 8
);
impl<T: AsRef<[u8]>> DethPacket<T> {
    #[inline]
    pub fn q_key(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 0..4)
    }
    #[inline]
    pub fn src_qp(&self) -> u32 {
        be::u24(self.buffer.as_ref(), 5..8)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> DethPacket<T> {
    pub fn set_q_key(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), 0..4, v)
    }
    pub fn set_src_qp(&mut self, v: u32) {
        self.buffer.as_mut()[4] = 0;
        be::set_u24(self.buffer.as_mut(), 5..8, v)
    }
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DethRepr {
    pub q_key: u32,
    pub src_qp: u32,
}
impl DethRepr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &DethPacket<T>) -> Self {
        DethRepr { q_key: p.q_key(), src_qp: p.src_qp() }
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut DethPacket<T>) {
        p.set_q_key(self.q_key);
        p.set_src_qp(self.src_qp);
    }
}

// ---- RETH: VA(64) R_Key(32) DMA Length(32) ---------------------------------------
header_view!(
    /// RDMA Extended Transport Header.
    RethPacket, 16
);
impl<T: AsRef<[u8]>> RethPacket<T> {
    #[inline]
    pub fn va(&self) -> u64 {
        be::u64(self.buffer.as_ref(), 0..8)
    }
    #[inline]
    pub fn r_key(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 8..12)
    }
    #[inline]
    pub fn dma_len(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 12..16)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> RethPacket<T> {
    pub fn set_va(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), 0..8, v)
    }
    pub fn set_r_key(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), 8..12, v)
    }
    pub fn set_dma_len(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), 12..16, v)
    }
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RethRepr {
    pub va: u64,
    pub r_key: u32,
    pub dma_len: u32,
}
impl RethRepr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &RethPacket<T>) -> Self {
        RethRepr { va: p.va(), r_key: p.r_key(), dma_len: p.dma_len() }
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut RethPacket<T>) {
        p.set_va(self.va);
        p.set_r_key(self.r_key);
        p.set_dma_len(self.dma_len);
    }
}

// ---- AtomicETH: VA(64) R_Key(32) Swap/Add(64) Compare(64) ------------------------
header_view!(
    /// Atomic Extended Transport Header (CmpSwap, FetchAdd).
    AtomicEthPacket, 28
);
impl<T: AsRef<[u8]>> AtomicEthPacket<T> {
    #[inline]
    pub fn va(&self) -> u64 {
        be::u64(self.buffer.as_ref(), 0..8)
    }
    #[inline]
    pub fn r_key(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 8..12)
    }
    pub fn swap_add(&self) -> u64 {
        be::u64(self.buffer.as_ref(), 12..20)
    }
    pub fn compare(&self) -> u64 {
        be::u64(self.buffer.as_ref(), 20..28)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEthPacket<T> {
    pub fn set_va(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), 0..8, v)
    }
    pub fn set_r_key(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), 8..12, v)
    }
    pub fn set_swap_add(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), 12..20, v)
    }
    pub fn set_compare(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), 20..28, v)
    }
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub r_key: u32,
    pub swap_add: u64,
    pub compare: u64,
}
impl AtomicEthRepr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &AtomicEthPacket<T>) -> Self {
        AtomicEthRepr { va: p.va(), r_key: p.r_key(), swap_add: p.swap_add(), compare: p.compare() }
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut AtomicEthPacket<T>) {
        p.set_va(self.va);
        p.set_r_key(self.r_key);
        p.set_swap_add(self.swap_add);
        p.set_compare(self.compare);
    }
}

// ---- FETH: reserved(26) SEL(2) PLT(4) --------------------------------------------
header_view!(
    /// FLUSH Extended Transport Header: selectivity level and placement type.
    FethPacket, 4
);
impl<T: AsRef<[u8]>> FethPacket<T> {
    pub fn raw(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 0..4)
    }
    /// Selectivity level: 0 = memory region range, 1 = whole memory region.
    pub fn selectivity(&self) -> u8 {
        ((self.raw() >> 4) & 0x3) as u8
    }
    /// Placement type bits: 1 = global visibility, 2 = persistence.
    pub fn placement(&self) -> u8 {
        (self.raw() & 0xF) as u8
    }
}

// ---- 32-bit and 64-bit single-value headers --------------------------------------
header_view!(
    /// Immediate Data (ImmDt), AtomicAckETH's original data, IETH's R_Key, XRCETH's
    /// SRQ number and RDETH share this shape: one big-endian value.
    Word32Packet, 4
);
impl<T: AsRef<[u8]>> Word32Packet<T> {
    pub fn value(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 0..4)
    }
    /// The low 24 bits (XRCETH's XRC SRQ number).
    pub fn value24(&self) -> u32 {
        be::u24(self.buffer.as_ref(), 1..4)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> Word32Packet<T> {
    pub fn set_value(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), 0..4, v)
    }
}

header_view!(
    /// ATOMIC Acknowledge Extended Transport Header: the original remote data.
    AtomicAckEthPacket, 8
);
impl<T: AsRef<[u8]>> AtomicAckEthPacket<T> {
    pub fn orig_remote_data(&self) -> u64 {
        be::u64(self.buffer.as_ref(), 0..8)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicAckEthPacket<T> {
    pub fn set_orig_remote_data(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), 0..8, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reth_fixture() {
        let bytes: [u8; 16] = [
            0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00,
            0x10, 0x00,
        ];
        let r = RethRepr::parse(&RethPacket::new_checked(&bytes[..]).unwrap());
        assert_eq!(r, RethRepr { va: 0x7f12_3456_7800, r_key: 0xdead_beef, dma_len: 4096 });
        let mut out = [0xa5u8; 16];
        r.emit(&mut RethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn deth_fixture() {
        let bytes: [u8; 8] = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x01, 0x2c];
        let r = DethRepr::parse(&DethPacket::new_checked(&bytes[..]).unwrap());
        assert_eq!(r, DethRepr { q_key: 0x1111_1111, src_qp: 0x12c });
        let mut out = [0xa5u8; 8];
        r.emit(&mut DethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes, "reserved byte must be written as zero");
    }

    #[test]
    fn feth_bits() {
        let bytes = [0, 0, 0, 0x12];
        let p = FethPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.selectivity(), p.placement()), (1, 2));
    }

    #[test]
    fn truncated_every_len() {
        let z = [0u8; 28];
        for n in 0..28 {
            assert_eq!(AtomicEthPacket::new_checked(&z[..n]).is_err(), n < 28);
            assert_eq!(RethPacket::new_checked(&z[..n]).is_err(), n < 16);
            assert_eq!(DethPacket::new_checked(&z[..n]).is_err(), n < 8);
            assert_eq!(AtomicAckEthPacket::new_checked(&z[..n]).is_err(), n < 8);
            assert_eq!(Word32Packet::new_checked(&z[..n]).is_err(), n < 4);
            assert_eq!(RdethPacket::new_checked(&z[..n]).is_err(), n < 4);
        }
    }

    proptest! {
        #[test]
        fn atomiceth_round_trip(va: u64, r_key: u32, swap_add: u64, compare: u64) {
            let r = AtomicEthRepr { va, r_key, swap_add, compare };
            let mut buf = [0u8; 28];
            r.emit(&mut AtomicEthPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(AtomicEthRepr::parse(&AtomicEthPacket::new_checked(&buf[..]).unwrap()), r);
        }

        #[test]
        fn reth_round_trip(va: u64, r_key: u32, dma_len: u32) {
            let r = RethRepr { va, r_key, dma_len };
            let mut buf = [0u8; 16];
            r.emit(&mut RethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(RethRepr::parse(&RethPacket::new_checked(&buf[..]).unwrap()), r);
        }

        #[test]
        fn deth_round_trip(q_key: u32, src_qp in 0u32..0x100_0000) {
            let r = DethRepr { q_key, src_qp };
            let mut buf = [0u8; 8];
            r.emit(&mut DethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(DethRepr::parse(&DethPacket::new_checked(&buf[..]).unwrap()), r);
        }
    }
}
