//! A requester's pace on one QP pair, read from its packets in capture order: each
//! message from its first packet on the wire to the response that acknowledged it,
//! and how many messages it had unacknowledged at each moment.
//!
//! The rules are the responder's (IBA Vol 1, 9.7.5.1): an ACK with PSN p
//! acknowledges every request up to p (ACKs coalesce); a READ is acknowledged by
//! the last packet of its response; a NAK PSN Sequence Error or an RNR NAK for PSN p
//! acknowledges everything before p and nothing from p on. A response the
//! requester never got (dropped on the way) acknowledges nothing. A fatal NAK
//! (Invalid Request, Remote Access or Operational Error) ends the pair's analysis:
//! the requester's QP goes to the error state and flushes what it had outstanding.
//!
//! Resends are not new messages: a request whose PSN was seen before belongs to a
//! message already counted, which keeps the time of its first transmission. A PSN
//! seen for the first time behind higher ones (its packet was held back on the
//! way, or the capture point saw the packets out of order) is still its message's
//! first transmission, and the message takes its place in PSN order.
//!
//! Owns: the pace analysis and its figures. Imports: the wire vocabulary only (PSNs,
//! AETH kinds, NAK codes, opcode kinds).

use std::collections::VecDeque;

use crate::wire::aeth::{AckKind, NakCode};
use crate::wire::opcode::Kind;
use crate::wire::Psn;

/// One packet of the pair, as pace analysis needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Frame number in the capture: the order of requests and responses.
    pub number: u64,
    pub ts_ns: u64,
    pub psn: Psn,
    /// The opcode's meaning (`Kind::FIRST`, `Kind::LAST`, `Kind::READ`, …).
    pub kind: Kind,
    /// For responses: the AETH's meaning, when there is one.
    pub ack: Option<AckKind>,
    /// It reached its receiver. Only delivered responses acknowledge.
    pub delivered: bool,
}

/// One message, acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// Its first packet's first transmission.
    pub sent_ns: u64,
    /// The response that acknowledged it.
    pub acked_ns: u64,
    /// That response's frame.
    pub frame: u64,
}

impl Acked {
    pub fn latency_ns(&self) -> u64 {
        self.acked_ns.saturating_sub(self.sent_ns)
    }
}

/// How the number of unacknowledged messages changed: `delta` at frame `frame`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub frame: u64,
    pub ts_ns: u64,
    pub delta: i64,
}

/// What pace analysis found on one pair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pace {
    /// Messages the requester started (resends not counted again).
    pub messages: u64,
    /// Each acknowledged message, in the order of acknowledgement.
    pub acked: Vec<Acked>,
    /// The most messages unacknowledged at once.
    pub peak: u64,
    /// Every change of the unacknowledged count, in capture order: merge the
    /// steps of several pairs to get their peak together ([`peak_of`]).
    pub steps: Vec<Step>,
    /// The frame of a fatal NAK that ended the analysis.
    pub ended_by: Option<u64>,
}

struct Msg {
    start: Psn,
    /// Its last PSN, once known: a READ's is known when the next message starts
    /// or its response ends.
    end: Option<Psn>,
    read: bool,
    sent_ns: u64,
}

fn fatal(k: AckKind) -> bool {
    matches!(k, AckKind::Nak(c) if !matches!(c, NakCode::PsnSequenceError))
}

/// Reads the pace of one pair: the requester's transmissions `reqs` and the
/// responder's `resps`, each in capture order.
pub fn pace(reqs: &[Packet], resps: &[Packet]) -> Pace {
    let mut p = Pace::default();
    let mut open: VecDeque<Msg> = VecDeque::new();
    let mut seen = std::collections::HashSet::new();
    // Last packets seen before their message's first (held back on the way).
    let mut orphans: Vec<Psn> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < reqs.len() || j < resps.len() {
        let take_req = j == resps.len() || (i < reqs.len() && reqs[i].number < resps[j].number);
        if take_req {
            let r = reqs[i];
            i += 1;
            if !seen.insert(r.psn.value()) {
                continue; // a resend
            }
            // Where it goes among the open messages, which are in PSN order: at
            // the back, unless it came late.
            let at = match open.back() {
                Some(m) if m.start.after(r.psn) => {
                    open.iter().position(|m| m.start.after(r.psn)).unwrap_or(open.len())
                }
                _ => open.len(),
            };
            if r.kind.contains(Kind::FIRST) {
                if let Some(prev) = at
                    .checked_sub(1)
                    .and_then(|k| open.get_mut(k))
                    .filter(|m| m.end.is_none() && m.read)
                {
                    prev.end = Some(r.psn.add(u32::MAX)); // the PSN before this one
                }
                let read = r.kind.contains(Kind::READ);
                let mut end = (r.kind.contains(Kind::LAST) && !read).then_some(r.psn);
                if end.is_none() && !read && !orphans.is_empty() {
                    // A late first packet: its last may have come already (before
                    // the next message's start).
                    let next = open.get(at).map(|m| m.start);
                    if let Some(k) = orphans
                        .iter()
                        .position(|&q| !r.psn.after(q) && next.is_none_or(|n| n.after(q)))
                    {
                        end = Some(orphans.swap_remove(k));
                    }
                }
                open.insert(at, Msg { start: r.psn, end, read, sent_ns: r.ts_ns });
                p.messages += 1;
                p.steps.push(Step { frame: r.number, ts_ns: r.ts_ns, delta: 1 });
                p.peak = p.peak.max(open.len() as u64);
            } else if r.kind.contains(Kind::LAST) {
                match at
                    .checked_sub(1)
                    .and_then(|k| open.get_mut(k))
                    .filter(|m| m.end.is_none() && !m.read)
                {
                    Some(m) => m.end = Some(r.psn),
                    None => orphans.push(r.psn),
                }
            }
            continue;
        }
        let s = resps[j];
        j += 1;
        if !s.delivered {
            continue;
        }
        // Acknowledges every message that ends at or before `upto`.
        let upto = match s.ack {
            Some(AckKind::Ack { .. }) => Some(s.psn),
            Some(AckKind::RnrNak { .. }) | Some(AckKind::Nak(NakCode::PsnSequenceError)) => {
                Some(s.psn.add(u32::MAX))
            }
            Some(k) if fatal(k) => {
                p.ended_by = Some(s.number);
                break;
            }
            _ => None,
        };
        // The last packet of a READ response ends its READ.
        let read_done = s.kind.contains(Kind::READ) && s.kind.contains(Kind::LAST);
        if read_done {
            if let Some(m) = open
                .iter_mut()
                .find(|m| m.read && !m.start.after(s.psn) && m.end.is_none_or(|e| !e.after(s.psn)))
            {
                m.end = Some(s.psn);
            }
        }
        let Some(upto) = upto.or(read_done.then_some(s.psn)) else { continue };
        let mut n = 0;
        while let Some(m) = open.front() {
            // Ended at or before `upto`; or its end unseen but the next message
            // starts at or before it, so it ended before.
            let done = match m.end {
                Some(e) => !e.after(upto),
                None => open.get(1).is_some_and(|next| !next.start.after(upto)),
            };
            if !done {
                break;
            }
            p.acked.push(Acked { sent_ns: m.sent_ns, acked_ns: s.ts_ns, frame: s.number });
            open.pop_front();
            n += 1;
        }
        if n > 0 {
            p.steps.push(Step { frame: s.number, ts_ns: s.ts_ns, delta: -n });
        }
    }
    p
}

/// The most messages unacknowledged at once over several pairs of one capture
/// (their steps merged by frame number).
pub fn peak_of<'a>(paces: impl IntoIterator<Item = &'a Pace>) -> u64 {
    let mut steps: Vec<Step> = paces.into_iter().flat_map(|p| p.steps.iter().copied()).collect();
    steps.sort_by_key(|s| (s.frame, s.delta));
    let (mut now, mut peak) = (0i64, 0i64);
    for s in steps {
        now += s.delta;
        peak = peak.max(now);
    }
    peak as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::aeth::AckKind;

    const ONLY: Kind = Kind::REQUEST.union(Kind::WRITE).union(Kind::ONLY);
    const FIRST: Kind = Kind::REQUEST.union(Kind::WRITE).union(Kind::FIRST);
    const LAST: Kind = Kind::REQUEST.union(Kind::WRITE).union(Kind::LAST);
    const READ: Kind = Kind::REQUEST.union(Kind::READ).union(Kind::ONLY);
    const READ_FIRST: Kind = Kind::RESPONSE.union(Kind::READ).union(Kind::FIRST);
    const READ_LAST: Kind = Kind::RESPONSE.union(Kind::READ).union(Kind::LAST);
    const ACK_KIND: Kind = Kind::RESPONSE.union(Kind::ACK);

    fn req(number: u64, psn: u32, kind: Kind) -> Packet {
        Packet {
            number,
            ts_ns: number * 1000,
            psn: Psn::new(psn),
            kind,
            ack: None,
            delivered: true,
        }
    }
    fn resp(number: u64, psn: u32, kind: Kind, ack: Option<AckKind>) -> Packet {
        Packet { number, ts_ns: number * 1000, psn: Psn::new(psn), kind, ack, delivered: true }
    }
    fn ack(number: u64, psn: u32) -> Packet {
        resp(number, psn, ACK_KIND, Some(AckKind::Ack { credits: 0x1f }))
    }

    /// Three messages (one of two packets) acknowledged by one coalesced ACK: each
    /// timed from its first packet, the peak three, the count back to zero.
    #[test]
    fn a_coalesced_ack_acknowledges_every_message_up_to_its_psn() {
        let reqs = [req(1, 100, ONLY), req(2, 101, FIRST), req(3, 102, LAST), req(4, 103, ONLY)];
        let p = pace(&reqs, &[ack(5, 102), ack(6, 103)]);
        assert_eq!(p.messages, 3);
        let lat: Vec<u64> = p.acked.iter().map(Acked::latency_ns).collect();
        assert_eq!(
            lat,
            vec![4000, 3000, 2000],
            "messages 100 and 101–102 by frame 5, 103 by frame 6"
        );
        assert_eq!(p.peak, 3);
        assert_eq!(p.steps.iter().map(|s| s.delta).sum::<i64>(), 0);
    }

    /// A message is unacknowledged until its last packet is: an ACK for its first
    /// packet's PSN does not count.
    #[test]
    fn an_ack_inside_a_message_does_not_acknowledge_it() {
        let reqs = [req(1, 10, FIRST), req(2, 11, LAST)];
        let p = pace(&reqs, &[ack(3, 10)]);
        assert!(p.acked.is_empty(), "{p:?}");
        assert_eq!(p.peak, 1);
    }

    /// A resend is not a new message, and the message keeps its first
    /// transmission's time; a NAK PSN Sequence Error acknowledges what is before its PSN.
    #[test]
    fn resends_and_seq_naks() {
        let nak = resp(4, 11, ACK_KIND, Some(AckKind::Nak(NakCode::PsnSequenceError)));
        let reqs = [
            req(1, 10, ONLY),
            req(2, 11, ONLY),
            req(3, 12, ONLY),
            req(5, 11, ONLY),
            req(6, 12, ONLY),
        ];
        let p = pace(&reqs, &[nak, ack(7, 12)]);
        assert_eq!(p.messages, 3);
        assert_eq!(
            p.acked.iter().map(|a| (a.sent_ns, a.frame)).collect::<Vec<_>>(),
            vec![(1000, 4), (2000, 7), (3000, 7)]
        );
        assert_eq!(p.peak, 3);
    }

    /// A READ ends with the last packet of its response, not its first (whose AETH
    /// acknowledges only what came before the READ); an ACK or response the
    /// requester never got acknowledges nothing.
    #[test]
    fn reads_end_with_their_response_and_lost_responses_do_not_count() {
        let reqs = [req(1, 50, ONLY), req(2, 51, READ), req(5, 54, ONLY)];
        let mut lost = ack(3, 50);
        lost.delivered = false;
        let first = resp(4, 51, READ_FIRST, Some(AckKind::Ack { credits: 0x1f }));
        let last = resp(6, 53, READ_LAST, Some(AckKind::Ack { credits: 0x1f }));
        let p = pace(&reqs, &[lost, first, last, ack(7, 54)]);
        assert_eq!(
            p.acked.iter().map(|a| (a.sent_ns / 1000, a.frame)).collect::<Vec<_>>(),
            vec![(1, 4), (2, 6), (5, 7)]
        );
        assert_eq!(
            p.peak, 2,
            "the READ and the WRITE after it; the first WRITE was acknowledged by frame 4"
        );
    }

    /// A packet held back on the way is recorded after a later one: still its
    /// message's first transmission (counted, in PSN order), not a resend; its
    /// second transmission is one.
    #[test]
    fn a_late_original_is_a_message_not_a_resend() {
        let reqs = [
            req(1, 10, ONLY),
            req(2, 12, ONLY),
            req(3, 11, ONLY),
            req(4, 13, ONLY),
            req(6, 11, ONLY),
        ];
        let p = pace(&reqs, &[ack(5, 13), ack(7, 13)]);
        assert_eq!(p.messages, 4, "{p:?}");
        assert_eq!(
            p.acked.iter().map(|a| a.sent_ns / 1000).collect::<Vec<_>>(),
            vec![1, 3, 2, 4],
            "in PSN order: 10, 11, 12, 13"
        );
        assert_eq!(p.peak, 4);
    }

    /// A two-packet message whose first packet was held back behind its last:
    /// one message, ended by that last packet, acknowledged with the rest.
    #[test]
    fn a_first_packet_held_behind_its_last() {
        let reqs = [req(1, 20, ONLY), req(2, 22, LAST), req(3, 21, FIRST), req(4, 23, ONLY)];
        let p = pace(&reqs, &[ack(5, 22), ack(6, 23)]);
        assert_eq!(p.messages, 3);
        assert_eq!(
            p.acked.iter().map(|a| (a.sent_ns / 1000, a.frame)).collect::<Vec<_>>(),
            vec![(1, 5), (3, 5), (4, 6)]
        );
    }

    /// An RNR NAK leaves its message outstanding; a fatal NAK ends the analysis.
    #[test]
    fn rnr_keeps_the_message_and_a_fatal_nak_ends() {
        let rnr = resp(3, 21, ACK_KIND, Some(AckKind::RnrNak { timer: 1 }));
        let p = pace(&[req(1, 20, ONLY), req(2, 21, ONLY)], &[rnr]);
        assert_eq!((p.acked.len(), p.peak), (1, 2));
        let bad = resp(3, 20, ACK_KIND, Some(AckKind::Nak(NakCode::RemoteAccessError)));
        let p = pace(&[req(1, 20, ONLY), req(2, 21, ONLY)], &[bad, ack(4, 21)]);
        assert_eq!((p.acked.len(), p.ended_by), (0, Some(3)));
    }

    /// Two pairs each with two outstanding, interleaved: four at once together.
    #[test]
    fn the_peak_of_several_pairs_merges_their_steps() {
        let a = pace(&[req(1, 1, ONLY), req(3, 2, ONLY)], &[ack(5, 2)]);
        let b = pace(&[req(2, 7, ONLY), req(4, 8, ONLY)], &[ack(6, 8)]);
        assert_eq!((a.peak, b.peak, peak_of([&a, &b])), (2, 2, 4));
        let c = pace(&[req(7, 9, ONLY)], &[]);
        assert_eq!(peak_of([&a, &b, &c]), 4, "c starts after both were acknowledged");
    }
}
