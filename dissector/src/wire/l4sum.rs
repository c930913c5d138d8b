//! Completing a frame's TCP or UDP checksum, in place: what a NIC does for a
//! frame whose sender left the checksum to the hardware (Linux's
//! `CHECKSUM_PARTIAL`). A frame read off a virtual interface (veth, tap) with a
//! local sender can carry such a checksum unfinished; forwarded as it is, the
//! receiver drops it. RoCEv2's own integrity is the ICRC, which covers the UDP
//! checksum as a masked field: completing it never changes the ICRC.
//!
//! Owns: [`complete_l4_checksum`]. Imports: the Internet checksum of `ipv4`.
use super::ipv4::checksum;

const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const TCP: u8 = 6;
const UDP: u8 = 17;

/// Completes the TCP or UDP checksum of the Ethernet frame `frame` (IPv4 or
/// IPv6 without extension headers, behind at most one VLAN tag). Returns false,
/// leaving the frame as it was, for anything else or a frame cut short.
pub fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    let be16 = |b: &[u8], at: usize| b.get(at..at + 2).map(|x| u16::from_be_bytes([x[0], x[1]]));
    let mut ip = 14;
    let mut ethertype = be16(frame, 12);
    if ethertype == Some(ETHERTYPE_VLAN) {
        ip += 4;
        ethertype = be16(frame, 16);
    }
    // The pseudo-header, the transport's protocol, and where its segment lies.
    let (mut pseudo, proto, start, end) = match ethertype {
        Some(ETHERTYPE_IPV4) => {
            let Some(&vihl) = frame.get(ip) else { return false };
            let ihl = usize::from(vihl & 0x0f) * 4;
            let (Some(total), Some(&proto)) = (be16(frame, ip + 2), frame.get(ip + 9)) else {
                return false;
            };
            let (start, end) = (ip + ihl, ip + usize::from(total));
            let Some(addrs) = frame.get(ip + 12..ip + 20) else { return false };
            let mut p = addrs.to_vec();
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(end.saturating_sub(start) as u16).to_be_bytes());
            (p, proto, start, end)
        }
        Some(ETHERTYPE_IPV6) => {
            let (Some(len), Some(&proto)) = (be16(frame, ip + 4), frame.get(ip + 6)) else {
                return false;
            };
            let (start, end) = (ip + 40, ip + 40 + usize::from(len));
            let Some(addrs) = frame.get(ip + 8..ip + 40) else { return false };
            let mut p = addrs.to_vec();
            p.extend_from_slice(&u32::from(len).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
            (p, proto, start, end)
        }
        _ => return false,
    };
    let at = match proto {
        UDP => start + 6,
        TCP => start + 16,
        _ => return false,
    };
    if start > end || end > frame.len() || at + 2 > end {
        return false;
    }
    frame[at..at + 2].copy_from_slice(&[0, 0]);
    pseudo.extend_from_slice(&frame[start..end]);
    let mut sum = checksum(&pseudo);
    // UDP: a computed 0 is sent as all ones (0 means "no checksum").
    if proto == UDP && sum == 0 {
        sum = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame;
    use crate::LinkType;

    /// A UDP datagram over IPv4 whose checksum was left to the hardware: once
    /// completed, the decoder finds it right; a frame of another kind is left alone.
    #[test]
    fn a_partial_udp_checksum_is_completed() {
        // 10.9.0.1:36046 → 10.9.0.2:9999, "msg1\n", checksum field holding the
        // pseudo-header's partial sum as Linux leaves it.
        let mut f = vec![
            0xea, 0x7c, 0x12, 0xcd, 0x43, 0xa3, 0x26, 0x03, 0x06, 0x28, 0xa1, 0x0d, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x21, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 9, 0, 1,
            10, 9, 0, 2, 0x8c, 0xce, 0x27, 0x0f, 0x00, 0x0d, 0x14, 0x33, b'm', b's', b'g', b'1',
            b'\n',
        ];
        let ip = crate::wire::ipv4::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&ip.to_be_bytes());
        assert!(complete_l4_checksum(&mut f));
        // The sum over the pseudo-header and the whole segment is now all ones.
        let mut all = vec![10, 9, 0, 1, 10, 9, 0, 2, 0, 17, 0, 13];
        all.extend_from_slice(&f[34..]);
        assert_eq!(checksum(&all), 0, "the checksum verifies");
        assert_ne!(&f[40..42], &[0x14, 0x33]);
        let d = frame::decode(LinkType::ETHERNET, &f, &frame::Options::default());
        assert!(d.udp.is_some(), "still a UDP datagram");
        let mut arp = vec![0xff; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        assert!(!complete_l4_checksum(&mut arp));
        assert_eq!(arp, before);
        let mut short = f[..30].to_vec();
        assert!(!complete_l4_checksum(&mut short), "cut short: left alone");
    }
}
