//! The Invariant CRC that ends every RoCE packet (IBA Vol 1, 7.8.1; RoCEv2 Annex A17.3.3).
//!
//! CRC-32 (the Ethernet/zlib polynomial) over:
//! 1. eight bytes of 0xFF standing in for the LRH;
//! 2. the IP header (RoCEv2) or GRH (RoCEv1) with the fields routers may change set
//!    to all ones — IPv4: TOS, TTL, header checksum; IPv6/GRH: traffic class, flow
//!    label, hop limit;
//! 3. RoCEv2 only: the UDP header with its checksum set to 0xFFFF;
//! 4. the BTH with byte 4 (FECN, BECN, reserved) set to 0xFF;
//! 5. everything after the BTH up to the ICRC.
//!
//! The result is sent least significant byte first ([`to_wire`]). Linux rxe seeds its
//! CRC with 0xdebb20e3, which is the state after step 1: the same value.

use super::{bth, udp};

/// The network header the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    Ipv4,
    Ipv6,
    /// RoCEv1: the GRH (IPv6 layout), no UDP header.
    Grh,
}

/// Computes the ICRC.
///
/// `net` is the whole IP header (IPv4 options included) or GRH; `l4` holds what sits
/// between it and the BTH: IPv6 extension headers (covered unmasked) and, for RoCEv2,
/// the 8-byte UDP header at its end (`l4` is empty for RoCEv1); `ib` runs from the
/// BTH to just before the ICRC. Slices shorter than the headers they must hold are
/// covered as they are (the result then simply won't match).
/// A hasher that has already consumed the eight 0xFF bytes standing in for the LRH
/// (rxe's 0xdebb20e3 seed is the same state), built once: cloning it also skips the
/// CPU feature probe a fresh hasher makes.
fn seeded() -> crc32fast::Hasher {
    static SEEDED: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    SEEDED
        .get_or_init(|| {
            let mut h = crc32fast::Hasher::new();
            h.update(&[0xFF; 8]);
            h
        })
        .clone()
}

pub fn compute(kind: Net, net: &[u8], l4: &[u8], ib: &[u8]) -> u32 {
    // One CRC call costs ~25 ns whatever its length up to ~128 bytes, so the covered
    // bytes of a typical packet are laid out in one stack buffer and masked in place;
    // only what does not fit (a large payload, IPv6 extension headers, IP options
    // beyond 60 bytes) is hashed straight from the packet.
    const CAP: usize = 256;
    let mut buf = [0u8; CAP];
    let mut h = seeded();
    let take = net.len().min(60);
    buf[..take].copy_from_slice(&net[..take]);
    let masked: &[usize] = match kind {
        Net::Ipv4 => &[1, 8, 10, 11],
        // Traffic class, flow label and hop limit; the version nibble is kept below.
        Net::Ipv6 | Net::Grh => &[1, 2, 3, 7],
    };
    for &i in masked {
        if i < take {
            buf[i] = 0xFF;
        }
    }
    if kind != Net::Ipv4 && take > 0 {
        buf[0] |= 0x0F;
    }
    let mut n = take;
    let udp_len = if kind == Net::Grh { 0 } else { l4.len().min(udp::HEADER_LEN) };
    let ext = &l4[..l4.len() - udp_len];
    if take < net.len() || !ext.is_empty() {
        h.update(&buf[..n]);
        h.update(&net[take..]);
        h.update(ext);
        n = 0;
    }
    buf[n..n + udp_len].copy_from_slice(&l4[l4.len() - udp_len..]);
    if udp_len == udp::HEADER_LEN {
        buf[n + 6] = 0xFF;
        buf[n + 7] = 0xFF;
    }
    n += udp_len;
    let b = ib.len().min(bth::HEADER_LEN);
    buf[n..n + b].copy_from_slice(&ib[..b]);
    if b > 4 {
        buf[n + 4] = 0xFF;
    }
    n += b;
    let rest = &ib[b..];
    if n + rest.len() <= CAP {
        buf[n..n + rest.len()].copy_from_slice(rest);
        h.update(&buf[..n + rest.len()]);
    } else {
        h.update(&buf[..n]);
        h.update(rest);
    }
    h.finalize()
}

/// The four bytes as they appear on the wire.
pub const fn to_wire(icrc: u32) -> [u8; 4] {
    icrc.to_le_bytes()
}

/// The ICRC a packet carries, from its four wire bytes.
pub const fn from_wire(b: [u8; 4]) -> u32 {
    u32::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC-32 of `data`, bit by bit, straight from the definition (reflected
    /// polynomial 0xEDB88320, init and final XOR 0xFFFFFFFF): independent of crc32fast.
    fn crc32_by_hand(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for &byte in data {
            c ^= byte as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            }
        }
        !c
    }

    // A RoCEv2 RC SEND Only over IPv4, 4-byte payload "ping", hand-assembled.
    const IP: [u8; 20] = [
        0x45, 0x02, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1,
        10, 0, 0, 2,
    ];
    const UDP: [u8; 8] = [0xc0, 0x00, 0x12, 0xb7, 0x00, 0x1c, 0xab, 0xcd];
    const IB: [u8; 16] = [
        0x04, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05, b'p', b'i',
        b'n', b'g',
    ];

    #[test]
    fn known_answer_ipv4_by_hand() {
        let mut masked = Vec::new();
        masked.extend_from_slice(&[0xFF; 8]);
        let mut ip = IP;
        ip[1] = 0xFF; // TOS
        ip[8] = 0xFF; // TTL
        ip[10] = 0xFF; // checksum
        ip[11] = 0xFF;
        masked.extend_from_slice(&ip);
        let mut udp = UDP;
        udp[6] = 0xFF;
        udp[7] = 0xFF;
        masked.extend_from_slice(&udp);
        let mut ib = IB;
        ib[4] = 0xFF;
        masked.extend_from_slice(&ib);
        assert_eq!(compute(Net::Ipv4, &IP, &UDP, &IB), crc32_by_hand(&masked));
        assert_eq!(crc32_by_hand(b"123456789"), 0xCBF4_3926, "CRC-32 check value");
    }

    #[test]
    fn rxe_seed_is_the_state_after_eight_ff_bytes() {
        // rxe starts its CRC at 0xdebb20e3 instead of hashing the 8 LRH bytes: that is
        // the (non-inverted) register after eight 0xFF bytes from the standard init.
        let mut c = 0xFFFF_FFFFu32;
        for _ in 0..8 {
            c ^= 0xFF;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            }
        }
        assert_eq!(c, 0xdebb_20e3);
    }

    #[test]
    fn variant_fields_do_not_change_it() {
        let base = compute(Net::Ipv4, &IP, &UDP, &IB);
        let mut ip = IP;
        ip[1] = 0x03; // ECN CE
        ip[8] = 1; // TTL
        ip[10] = 0x55;
        let mut udp = UDP;
        udp[6] = 0;
        let mut ib = IB;
        ib[4] = 0x80; // FECN
        assert_eq!(compute(Net::Ipv4, &ip, &udp, &ib), base);
        // ...but an invariant one does.
        let mut ib2 = IB;
        ib2[11] ^= 1;
        assert_ne!(compute(Net::Ipv4, &IP, &UDP, &ib2), base);
        let mut udp2 = UDP;
        udp2[0] ^= 1; // source port is covered
        assert_ne!(compute(Net::Ipv4, &IP, &udp2, &IB), base);
    }

    #[test]
    fn ipv6_and_grh_mask_tc_flow_hop() {
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[6] = 17;
        v6[7] = 64;
        let base = compute(Net::Ipv6, &v6, &UDP, &IB);
        let mut v6b = v6;
        v6b[0] = 0x6a;
        v6b[1] = 0xbc;
        v6b[3] = 0x77;
        v6b[7] = 1;
        assert_eq!(compute(Net::Ipv6, &v6b, &UDP, &IB), base);
        let mut by_hand = vec![0xFF; 8];
        let mut m = v6;
        m[0] = 0x6F;
        m[1] = 0xFF;
        m[2] = 0xFF;
        m[3] = 0xFF;
        m[7] = 0xFF;
        by_hand.extend_from_slice(&m);
        by_hand.extend_from_slice(&[0xFF; 8][..0]);
        let mut ib = IB;
        ib[4] = 0xFF;
        by_hand.extend_from_slice(&ib);
        assert_eq!(compute(Net::Grh, &v6, &[], &IB), crc32_by_hand(&by_hand));
        assert_eq!(from_wire(to_wire(0x1234_5678)), 0x1234_5678);
        assert_eq!(to_wire(0x1234_5678), [0x78, 0x56, 0x34, 0x12]);
    }
}
