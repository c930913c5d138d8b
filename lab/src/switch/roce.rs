//! The fields of a RoCE frame the switch matches rules on, and the byte changes
//! its faults make (with the IPv4 checksum and the ICRC kept or made right).
//!
//! Owns: [`RoceView`] ([`parse_roce`]) and [`apply_modification`]. Imports: [`Action`]
//! and [`Offset`] from [`fault`](crate::fault); the decoder and the checksums come
//! from `dissector`.
use dissector::frame::{self, Frame, Net};
use dissector::wire::{icrc, ipv4};
use dissector::LinkType;

use crate::fault::{Action, Offset};

/// The fields of a RoCE frame that rules match on and faults change.
///
/// Built on `dissector::frame::decode` (lax: a frame that stops early still shows
/// its BTH); only what the switch needs is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceView {
    pub opcode: u8,
    pub qp: u32,
    pub psn: u32,
    /// Offsets in the frame: IP header, its length (IPv4; 0 for IPv6), UDP, BTH,
    /// payload start, ICRC.
    pub ip: usize,
    pub ipv4_header_len: usize,
    pub udp: usize,
    pub bth: usize,
    pub payload: usize,
    pub icrc: Option<usize>,
}

pub fn parse_roce(data: &[u8], opts: &frame::Options) -> Option<RoceView> {
    roce_view(&frame::decode(LinkType::ETHERNET, data, opts), data)
}

/// [`parse_roce`] of a frame already decoded.
pub(super) fn roce_view(f: &Frame, data: &[u8]) -> Option<RoceView> {
    let ib = f.ib.as_ref()?;
    let o = f.offsets;
    let ipv4_header_len = match f.net {
        Net::Ipv4(_) => usize::from(data.get(o.net)? & 0x0f) * 4,
        Net::Ipv6(_) => 0,
        _ => return None, // RoCEv1 is not on this wire
    };
    Some(RoceView {
        opcode: ib.bth.opcode.0,
        qp: ib.bth.dest_qp,
        psn: ib.bth.psn.value(),
        ip: o.net,
        ipv4_header_len,
        udp: o.l4,
        bth: o.bth,
        payload: ib.payload.start,
        icrc: ib.icrc.map(|_| o.icrc),
    })
}

/// Recomputes the ICRC of a RoCEv2 frame in place.
fn fix_icrc(frame: &mut [u8], v: &RoceView) -> bool {
    let Some(at) = v.icrc else { return false };
    if at + 4 > frame.len() {
        return false;
    }
    let kind = if v.ipv4_header_len > 0 { icrc::Net::Ipv4 } else { icrc::Net::Ipv6 };
    let c = icrc::compute_covered(kind, &frame[v.ip..at], v.udp - v.ip, v.bth - v.ip);
    frame[at..at + 4].copy_from_slice(&icrc::to_wire(c));
    true
}

fn fix_ipv4_checksum(frame: &mut [u8], v: &RoceView) {
    if v.ipv4_header_len >= 20 && v.ip + v.ipv4_header_len <= frame.len() {
        ipv4::Packet::new_unchecked(&mut frame[v.ip..]).fill_checksum();
    }
}

/// Applies a byte-changing action; returns a description, or why it was skipped.
pub fn apply_modification(
    frame: &mut [u8],
    v: &RoceView,
    action: &Action,
    fix: bool,
) -> Result<String, String> {
    let mut desc = match *action {
        Action::Ce => {
            if v.ipv4_header_len > 0 {
                frame[v.ip + 1] |= 0x03;
                fix_ipv4_checksum(frame, v);
            } else {
                // IPv6 traffic class spans bytes 0–1; ECN is bits 5–4 of byte 1.
                frame[v.ip + 1] |= 0x30;
            }
            "ECN set to CE".to_string()
        }
        Action::CorruptIcrc => {
            let Some(at) = v.icrc.filter(|&a| a + 4 <= frame.len()) else {
                return Err("no ICRC in the frame".into());
            };
            for b in &mut frame[at..at + 4] {
                *b ^= 0xff;
            }
            return Ok("ICRC inverted".into()); // never "fixed"
        }
        Action::Corrupt { at, xor } => {
            let (pos, limit) = match at {
                Offset::Frame(n) => (n, frame.len()),
                Offset::Ip(n) => (v.ip + n, frame.len()),
                Offset::Bth(n) => (v.bth + n, frame.len()),
                Offset::Payload(n) => (v.payload + n, v.icrc.unwrap_or(frame.len())),
            };
            if pos >= limit {
                return Err(format!(
                    "offset {at} is past the end ({} bytes available)",
                    limit.saturating_sub(pos.min(limit))
                ));
            }
            frame[pos] ^= xor;
            if v.ipv4_header_len > 0 && (v.ip..v.ip + v.ipv4_header_len).contains(&pos) {
                fix_ipv4_checksum(frame, v);
            }
            format!("byte {pos} ({at}) xor {xor:#04x}")
        }
        _ => return Err("not a modification".into()),
    };
    if fix && fix_icrc(frame, v) {
        desc.push_str(", ICRC recomputed");
    }
    Ok(desc)
}
