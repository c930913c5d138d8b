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
//!
//! Owns: the ICRC computation. Imports: the BTH and UDP layouts (its siblings).

use super::{bth, udp};

/// The network header the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    Ipv4,
    Ipv6,
    /// RoCEv1: the GRH (IPv6 layout), no UDP header.
    Grh,
}

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

/// Computes the ICRC.
///
/// `net` is the whole IP header (IPv4 options included) or GRH; `l4` holds what sits
/// between it and the BTH: IPv6 extension headers (covered unmasked) and, for RoCEv2,
/// the 8-byte UDP header at its end (`l4` is empty for RoCEv1); `ib` runs from the
/// BTH to just before the ICRC. Slices shorter than the headers they must hold are
/// covered as they are (the result then simply won't match).
///
/// [`compute_covered`] is the fast way when the covered bytes sit together, as they
/// do in a captured frame.
pub fn compute(kind: Net, net: &[u8], l4: &[u8], ib: &[u8]) -> u32 {
    // The covered bytes of a typical packet are laid out in one stack buffer and
    // masked in place; only what does not fit (a large payload, IPv6 extension
    // headers, IP options beyond 60 bytes) is hashed straight from the packet.
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

/// The crc32fast state (the complemented register) after the eight 0xFF bytes.
const SEEDED_STATE: u32 = !0xdebb_20e3;

/// The byte-at-a-time table of the reflected CRC-32 (polynomial 0xEDB88320).
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// The entries of [`TABLE`] have 256 distinct top bytes: this maps one back to its index.
const TOP_BYTE_INDEX: [u8; 256] = {
    let mut inv = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        inv[(TABLE[i] >> 24) as usize] = i as u8;
        i += 1;
    }
    inv
};

/// Runs the CRC register back over one zero byte: the inverse of
/// `r ↦ (r >> 8) ^ TABLE[r & 0xFF]`.
const fn unstep(r: u32) -> u32 {
    let i = TOP_BYTE_INDEX[(r >> 24) as usize];
    ((r ^ TABLE[i as usize]) << 8) | i as u32
}

/// For each covered byte offset `p` in `at`, a table mapping `v` to the change of the
/// CRC state *before* the covered bytes that changes the result exactly as XORing `v`
/// into byte `p` does. The CRC is linear: XORing `v` into byte `p` is XORing it into
/// the register just before that byte is consumed, which is the register at the
/// start run back over `p` zero bytes.
const fn fixups<const N: usize>(at: [usize; N]) -> [[u32; 256]; N] {
    let mut t = [[0u32; 256]; N];
    let mut n = 0;
    while n < N {
        let mut basis = [0u32; 8];
        let mut bit = 0;
        while bit < 8 {
            let mut r = 1u32 << bit;
            let mut k = 0;
            while k < at[n] {
                r = unstep(r);
                k += 1;
            }
            basis[bit] = r;
            bit += 1;
        }
        let mut v = 1;
        while v < 256 {
            t[n][v] = t[n][v & (v - 1)] ^ basis[v.trailing_zeros() as usize];
            v += 1;
        }
        n += 1;
    }
    t
}

/// Masked whole bytes for IPv4 without options: TOS, TTL, header checksum, the UDP
/// checksum, BTH byte 4.
const V4_AT: [usize; 7] = [1, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4];
/// IPv6 without extension headers: traffic class and flow label (bytes 1-3; the low
/// nibble of byte 0 separately), hop limit, UDP checksum, BTH byte 4.
const V6_AT: [usize; 7] = [1, 2, 3, 7, 40 + 6, 40 + 7, 48 + 4];
/// The GRH (same fields as IPv6), BTH byte 4.
const GRH_AT: [usize; 5] = [1, 2, 3, 7, 40 + 4];
static V4_FIX: [[u32; 256]; 7] = fixups(V4_AT);
static V6_FIX: [[u32; 256]; 7] = fixups(V6_AT);
static GRH_FIX: [[u32; 256]; 5] = fixups(GRH_AT);
static BYTE0_FIX: [[u32; 256]; 1] = fixups([0]);

/// XOR of the fixups that set the bytes at `at` to 0xFF.
#[inline]
fn mask_fixup<const N: usize>(covered: &[u8], at: &[usize; N], fix: &[[u32; 256]; N]) -> u32 {
    let mut d = 0;
    for (p, t) in at.iter().zip(fix) {
        d ^= t[(covered[*p] ^ 0xFF) as usize];
    }
    d
}

/// Computes the ICRC of a packet whose covered bytes sit together in `covered`: from
/// the IP header (RoCEv2) or GRH (RoCEv1) up to just before the ICRC. `l4` is where
/// IPv6 extension headers or UDP start in it, `bth` where the BTH starts.
///
/// For the usual layouts (IPv4 without options, IPv6 without extension headers, the
/// GRH) nothing is copied: the masking is folded into the CRC's starting state and
/// the packet's bytes are hashed as they are, in one call. Other layouts, and
/// packets too short for their headers, go through [`compute`].
pub fn compute_covered(kind: Net, covered: &[u8], l4: usize, bth: usize) -> u32 {
    let fixup = match (kind, l4, bth) {
        (Net::Ipv4, 20, 28) if covered.len() >= 28 + bth::HEADER_LEN => {
            Some(mask_fixup(covered, &V4_AT, &V4_FIX))
        }
        (Net::Ipv6, 40, 48) if covered.len() >= 48 + bth::HEADER_LEN => {
            Some(mask_fixup(covered, &V6_AT, &V6_FIX) ^ BYTE0_FIX[0][(!covered[0] & 0x0F) as usize])
        }
        (Net::Grh, 40, 40) if covered.len() >= 40 + bth::HEADER_LEN => Some(
            mask_fixup(covered, &GRH_AT, &GRH_FIX) ^ BYTE0_FIX[0][(!covered[0] & 0x0F) as usize],
        ),
        _ => None,
    };
    if let Some(d) = fixup {
        let mut h = crc32fast::Hasher::new_with_initial(SEEDED_STATE ^ d);
        h.update(covered);
        return h.finalize();
    }
    let bth = bth.min(covered.len());
    let l4 = l4.min(bth);
    compute(kind, &covered[..l4], &covered[l4..bth], &covered[bth..])
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
        0x45, 0x02, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        0, 2,
    ];
    const UDP: [u8; 8] = [0xc0, 0x00, 0x12, 0xb7, 0x00, 0x1c, 0xab, 0xcd];
    const IB: [u8; 16] = [
        0x04, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05, b'p', b'i', b'n',
        b'g',
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
        let covered = [&IP[..], &UDP[..], &IB[..]].concat();
        assert_eq!(compute_covered(Net::Ipv4, &covered, 20, 28), crc32_by_hand(&masked));
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
    fn seeded_state_is_crc32fast_after_eight_ff_bytes() {
        let mut h = crc32fast::Hasher::new();
        h.update(&[0xFF; 8]);
        assert_eq!(h.finalize(), SEEDED_STATE);
        assert_eq!(seeded().finalize(), SEEDED_STATE);
    }

    #[test]
    fn unstep_undoes_a_zero_byte() {
        for r in [0u32, 1, 0xdeb_b20e3, 0x8000_0000, 0xFFFF_FFFF, 0x1234_5678] {
            let stepped = (r >> 8) ^ TABLE[(r & 0xFF) as usize];
            assert_eq!(unstep(stepped), r);
        }
    }

    proptest::proptest! {
        /// The fixup path (no copy) agrees with the masked-copy path for every layout,
        /// the usual ones and the others (IPv4 options, IPv6 extension headers, cut
        /// short), whatever the bytes.
        #[test]
        fn covered_agrees_with_split(
            kind in proptest::sample::select(vec![Net::Ipv4, Net::Ipv6, Net::Grh]),
            extra in proptest::sample::select(vec![0usize, 0, 0, 4, 8, 24]),
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
        ) {
            let (l4, bth) = match kind {
                Net::Ipv4 => (20 + extra.min(40), 28 + extra.min(40)),
                Net::Ipv6 => (40, 48 + extra),
                Net::Grh => (40, 40),
            };
            let b = &bytes[..];
            let e = bth.min(b.len());
            let s = l4.min(e);
            proptest::prop_assert_eq!(
                compute_covered(kind, b, l4, bth),
                compute(kind, &b[..s], &b[s..e], &b[e..])
            );
        }
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
        let covered = [&v6b[..], &IB[..]].concat();
        assert_eq!(compute_covered(Net::Grh, &covered, 40, 40), crc32_by_hand(&by_hand));
        assert_eq!(from_wire(to_wire(0x1234_5678)), 0x1234_5678);
        assert_eq!(to_wire(0x1234_5678), [0x78, 0x56, 0x34, 0x12]);
    }
}
