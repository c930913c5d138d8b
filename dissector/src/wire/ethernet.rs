//! Ethernet II frames and 802.1Q / 802.1ad VLAN tags.
//!
//! Owns: Ethernet II, VLAN tags, ethertypes and MACs. Imports: the shared helpers and
//! errors (its parent).

use super::{be, check_len, Error, Field};

pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88A8;
    /// Old QinQ outer tag some switches still send.
    pub const QINQ_OLD: u16 = 0x9100;
    pub const IPV6: u16 = 0x86DD;
    /// RoCEv1: GRH + BTH directly over Ethernet.
    pub const ROCE_V1: u16 = 0x8915;
    pub const LLDP: u16 = 0x88CC;

    pub const fn is_vlan(t: u16) -> bool {
        matches!(t, VLAN | QINQ | QINQ_OLD)
    }

    /// The largest 802.3 length: a type/length field up to this is the length of
    /// an IEEE 802.3 frame (an LLC header follows), not an ethertype.
    pub const MAX_LEN: u16 = 1500;
    /// The smallest ethertype (IEEE 802.3 clause 3.2.6); 1501–1535 are neither.
    pub const MIN_TYPE: u16 = 0x0600;

    /// `t` names the protocol that follows (Ethernet II), as tshark reads it: only
    /// then does it print `eth.type` (or `vlan.etype`).
    pub const fn is_type(t: u16) -> bool {
        t >= MIN_TYPE
    }
}

mod field {
    use super::Field;
    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    pub(super) const ETHERTYPE: Field = 12..14;
}

pub const HEADER_LEN: usize = field::ETHERTYPE.end;

/// A MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Mac(pub [u8; 6]);

impl core::fmt::Display for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}
/// `aa:bb:cc:dd:ee:ff` (also with `-` separators, any case), as the
/// [`Display`](core::fmt::Display) form writes it.
impl core::str::FromStr for Mac {
    type Err = String;
    fn from_str(s: &str) -> Result<Mac, String> {
        let bad = || format!("`{s}` is not a MAC address (six bytes, aa:bb:cc:dd:ee:ff)");
        let parts: Vec<&str> = s.trim().split([':', '-']).collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut m = [0u8; 6];
        for (b, p) in m.iter_mut().zip(parts) {
            if p.is_empty() || p.len() > 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        Ok(Mac(m))
    }
}

impl core::fmt::Debug for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        Ok(Frame { buffer })
    }
    pub fn dst(&self) -> Mac {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Mac(m)
    }
    pub fn src(&self) -> Mac {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Mac(m)
    }
    pub fn ethertype(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ETHERTYPE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst(&mut self, m: Mac) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&m.0)
    }
    pub fn set_src(&mut self, m: Mac) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&m.0)
    }
    pub fn set_ethertype(&mut self, t: u16) {
        be::set_u16(self.buffer.as_mut(), field::ETHERTYPE, t)
    }
}

/// One VLAN tag: the 2-byte TCI and the 2-byte type that follows it. (The tag's own
/// TPID is the preceding ethertype.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanTag {
    pub tpid: u16,
    pub pcp: u8,
    pub dei: bool,
    pub id: u16,
    pub inner_type: u16,
}

pub const VLAN_TAG_LEN: usize = 4;

impl VlanTag {
    pub fn parse(tpid: u16, b: &[u8]) -> Result<VlanTag, Error> {
        check_len(b, VLAN_TAG_LEN)?;
        let tci = be::u16(b, 0..2);
        Ok(VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            id: tci & 0x0FFF,
            inner_type: be::u16(b, 2..4),
        })
    }
    pub fn emit(&self, b: &mut [u8]) {
        let tci = (self.pcp as u16 & 7) << 13 | (self.dei as u16) << 12 | (self.id & 0x0FFF);
        be::set_u16(b, 0..2, tci);
        be::set_u16(b, 2..4, self.inner_type);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_round_trip() {
        let t = VlanTag { tpid: 0x8100, pcp: 5, dei: true, id: 0x123, inner_type: 0x0800 };
        let mut b = [0xa5; 4];
        t.emit(&mut b);
        assert_eq!(b, [0xb1, 0x23, 0x08, 0x00]);
        assert_eq!(VlanTag::parse(0x8100, &b).unwrap(), t);
        assert!(VlanTag::parse(0x8100, &b[..3]).is_err());
    }

    #[test]
    fn macs_parse_as_they_print() {
        let m = Mac([0x52, 0x54, 0, 0, 0, 0x0a]);
        assert_eq!(m.to_string().parse::<Mac>(), Ok(m));
        assert_eq!("52-54-00-00-00-0A".parse::<Mac>(), Ok(m));
        for bad in
            ["52:54:00", "zz:54:00:00:00:0a", "52:54:00:00:00:0a:01", "525:4:00:00:00:0a", ":::::"]
        {
            assert!(bad.parse::<Mac>().unwrap_err().contains("not a MAC address"), "{bad}");
        }
    }

    #[test]
    fn ethernet_fields() {
        let b = [1, 2, 3, 4, 5, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x89, 0x15];
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(f.dst().to_string(), "01:02:03:04:05:06");
        assert_eq!(f.src(), Mac([0xa, 0xb, 0xc, 0xd, 0xe, 0xf]));
        assert_eq!(f.ethertype(), ethertype::ROCE_V1);
        assert!(Frame::new_checked(&b[..13]).is_err());
    }
}
