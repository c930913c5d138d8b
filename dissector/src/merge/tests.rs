use super::*;
use crate::craft::{rc_packet, Encap, Host};
use crate::wire::Opcode;

const MS: u64 = 1_000_000;

/// A RoCE frame from host `from` to host `to`: `op` of `psn`, IP identification
/// `ident`.
fn roce(from: u8, to: u8, op: u8, psn: u32, ident: u16) -> Vec<u8> {
    roce_as(&Encap { ip_ident: ident, ..Encap::default() }, from, to, op, psn)
}

/// [`roce`], with the IP and UDP header fields of `encap`.
fn roce_as(encap: &Encap, from: u8, to: u8, op: u8, psn: u32) -> Vec<u8> {
    let payload: &[u8] = if op == ACK { b"" } else { b"payload!" };
    rc_packet(encap, &host(from), &host(to), Opcode(op), psn, payload)
}

fn host(last: u8) -> Host {
    Host::v4(last)
}

const A: u8 = 1;
const B: u8 = 2;
const SEND: u8 = 0x04;
const ACK: u8 = 0x11;

fn at(ts_ms: u64, data: &[u8]) -> Frame<'_> {
    Frame { ts_ns: ts_ms * MS, link: LinkType::ETHERNET, data }
}

fn merged(a: &[Frame<'_>], b: &[Frame<'_>]) -> Merge {
    merge(&Taken { host: host(A).ip, frames: a }, &Taken { host: host(B).ip, frames: b })
}

/// (which capture's copy, its index, who sent it, where it was seen), in order.
fn story(m: &Merge) -> Vec<(Side, usize, Side, Seen)> {
    m.frames.iter().map(|f| (f.side, f.index, f.from, f.seen)).collect()
}

/// A SEND and its ACK, each seen at both ends; b's clock runs 5 s ahead and
/// each way takes 1 ms: the merge says b is 5 s ahead, keeps the receiver's
/// copies, and puts everything on a's clock in the order it happened.
#[test]
fn a_clean_exchange_is_matched_and_the_clocks_are_set_against_each_other() {
    let (send, ack) = (roce(A, B, SEND, 7, 1), roce(B, A, ACK, 7, 9));
    let skew = 5_000;
    let a = [at(100, &send), at(103, &ack)];
    let b = [at(skew + 101, &send), at(skew + 102, &ack)];
    let m = merged(&a, &b);
    assert_eq!(m.b_ahead_ns, Some(5_000 * MS as i64));
    assert_eq!(story(&m), [(Side::B, 0, Side::A, Seen::Both), (Side::A, 1, Side::B, Seen::Both)]);
    assert_eq!(m.frames.iter().map(|f| f.ts_ns).collect::<Vec<_>>(), [100 * MS, 102 * MS]);
    assert_eq!(m.least_delay_ns, Some(MS as i64));
    // Unsaid, the hosts are found, each at its own capture (the other way round
    // the frames would arrive before they were sent)…
    let found = |a: &[Frame<'_>], b: &[Frame<'_>]| merge_found(a, b).map(|(h, m)| (h, m.frames));
    assert_eq!(found(&a, &b), Some(((host(A).ip, host(B).ip), m.frames.clone())));
    let swapped =
        merge(&Taken { host: host(B).ip, frames: &b }, &Taken { host: host(A).ip, frames: &a });
    assert_eq!(found(&b, &a), Some(((host(B).ip, host(A).ip), swapped.frames)));
    // …but not from frames matched one way only.
    assert_eq!(found(&a[..1], &b[..1]), None);
}

/// The first SEND lost on the way, its resend (another IP identification)
/// through: the first is seen at its sender only, the resend at both.
#[test]
fn a_frame_lost_on_the_way_is_seen_at_its_sender_only() {
    let (first, again, ack) =
        (roce(A, B, SEND, 7, 1), roce(A, B, SEND, 7, 2), roce(B, A, ACK, 7, 5));
    let a = [at(0, &first), at(20, &again), at(23, &ack)];
    let b = [at(21, &again), at(22, &ack)];
    let m = merged(&a, &b);
    assert_eq!(
        story(&m),
        [
            (Side::A, 0, Side::A, Seen::SenderOnly),
            (Side::B, 0, Side::A, Seen::Both),
            (Side::A, 2, Side::B, Seen::Both),
        ]
    );
    assert_eq!((m.count(Side::A, Seen::SenderOnly), m.count(Side::A, Seen::Both)), (1, 1));
}

/// Two copies identical to the byte (a NIC that resends with the same IP
/// identification), one of them lost: the one seen is matched to the first
/// sent, the other is seen at its sender only; neither is matched twice.
#[test]
fn identical_copies_are_matched_in_order_and_once() {
    let send = roce(A, B, SEND, 7, 0);
    let a = [at(0, &send), at(10, &send)];
    let b = [at(1, &send)];
    let m = merged(&a, &b);
    assert_eq!(
        story(&m),
        [(Side::B, 0, Side::A, Seen::Both), (Side::A, 1, Side::A, Seen::SenderOnly)]
    );
}

/// What a switch on the way may change (TTL, ECN, the UDP checksum a sender left
/// unfinished, Ethernet padding) does not make two copies two frames.
#[test]
fn what_the_path_changes_is_not_the_frames_identity() {
    let sent = roce(A, B, SEND, 7, 3);
    let mut arrived =
        roce_as(&Encap { ip_ident: 3, ttl: 63, ecn: 3, ..Encap::default() }, A, B, SEND, 7);
    // The UDP checksum (after Ethernet 14 and IPv4 20 bytes, at 6 in UDP), and
    // trailing padding.
    arrived[14 + 20 + 6] ^= 0xff;
    arrived.extend_from_slice(&[0; 6]);
    let m = merged(&[at(0, &sent)], &[at(1, &arrived)]);
    assert_eq!(story(&m), [(Side::B, 0, Side::A, Seen::Both)]);
    // A byte of the payload is the frame's own: then it is another frame.
    let mut changed = arrived.clone();
    changed[14 + 20 + 8 + 12] ^= 1;
    let m = merged(&[at(0, &sent)], &[at(1, &changed)]);
    assert_eq!(
        story(&m),
        [(Side::A, 0, Side::A, Seen::SenderOnly), (Side::B, 0, Side::A, Seen::ReceiverOnly)]
    );
}

/// An ACK a switch made in b's place reaches a, which b never sent: seen at
/// its receiver only, after the frame a saw before it; a frame between other
/// hosts stays as its capture holds it.
#[test]
fn a_frame_made_on_the_way_is_seen_at_its_receiver_only() {
    let (send, made, other) =
        (roce(A, B, SEND, 7, 1), roce(B, A, ACK, 7, 0), roce(A, 9, SEND, 1, 4));
    let a = [at(0, &send), at(2, &made), at(3, &other)];
    let b = [at(1, &send)];
    let m = merged(&a, &b);
    assert_eq!(
        story(&m),
        [
            (Side::B, 0, Side::A, Seen::Both),
            (Side::A, 1, Side::B, Seen::ReceiverOnly),
            (Side::A, 2, Side::A, Seen::Elsewhere),
        ]
    );
}

/// Each direction keeps its sender's order whatever the times say: two SENDs a
/// capture stamped out of order stay in the order they were sent.
#[test]
fn each_direction_keeps_its_senders_order() {
    let (s1, s2, ack) = (roce(A, B, SEND, 1, 1), roce(A, B, SEND, 2, 2), roce(B, A, ACK, 2, 3));
    let a = [at(10, &s1), at(9, &s2), at(12, &ack)];
    let b = [at(11, &s1), at(11, &s2), at(11, &ack)];
    let m = merged(&a, &b);
    let from_a: Vec<usize> =
        m.frames.iter().filter(|f| f.from == Side::A).map(|f| f.index).collect();
    assert_eq!(from_a, [0, 1], "{:?}", story(&m));
    assert_eq!(m.frames.len(), 3);
}
