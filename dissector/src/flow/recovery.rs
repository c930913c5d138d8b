//! Recovery on one QP pair, read from its packets in capture order: go-back-N
//! (IBA Vol 1, 9.7.5) — each resend with what set it off, and every rule the
//! recovery broke — and whether the requester waited out the RNR NAK timers
//! (9.7.5.2.8).
//!
//! The caller hands over one direction's requests and the other direction's
//! responses, and says of each packet what only the capture point can know: whether
//! it was delivered (a capture taken before a lossy link, such as the lab switch's,
//! also holds packets that never arrived) and whether it was held back (recorded
//! after packets sent later). Everything else is read from the BTH and the AETH.
//!
//! Owns: the recovery rules and their findings. Imports: the wire vocabulary only (PSNs,
//! syndromes, NAK codes).

use core::fmt;

use crate::wire::aeth::{AckKind, NakCode};
use crate::wire::Psn;

/// One packet of the pair, as recovery analysis needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Frame number in the capture.
    pub number: u64,
    pub ts_ns: u64,
    pub psn: Psn,
    /// It reached its receiver (not dropped on the way, ICRC not bad).
    pub delivered: bool,
    /// Recorded later than it was sent (delayed or reordered on the way): a late
    /// original, not a resend.
    pub held: bool,
    /// For responses: the AETH's meaning (`None` for responses without an AETH,
    /// such as a READ Response Middle).
    pub ack: Option<AckKind>,
}

/// What set off a resend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trigger {
    /// A NAK PSN Sequence Error before it.
    Nak,
    /// The requester's ACK timer: nothing said the PSN was lost.
    Timeout,
    /// An RNR NAK of that PSN: the requester waited out its timer.
    Rnr,
}

/// `NAK`, `timeout`: how reports and device profiles name a trigger.
impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Trigger::Nak => "NAK",
            Trigger::Timeout => "timeout",
            Trigger::Rnr => "RNR NAK",
        })
    }
}

/// One resend run: where it started and what set it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resend {
    pub psn: Psn,
    /// The frame that starts the run.
    pub frame: u64,
    pub trigger: Trigger,
    /// From the NAK, or from the last transmission of that PSN.
    pub after_ns: u64,
}

/// A rule of go-back-N recovery that the pair broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// What the responder acknowledged moved back: the last PSN its ACKs and NAKs
    /// said had arrived (a NAK's PSN less one).
    AckMovedBack { from: Psn, to: Psn, frame: u64 },
    /// After a NAK PSN Sequence Error the resend starts past the NAK'd PSN, which
    /// the responder waits for (IBA 9.7.5.1.4: the requester resends from the PSN
    /// the NAK names).
    ResentPastNak { frame: u64, psn: Psn, nak_psn: Psn, nak_frame: u64 },
    /// A resend run starts past the oldest PSN the responder had not acknowledged
    /// (by the responses recorded before it): go-back-N goes back to that PSN,
    /// whatever set the resend off (IBA 9.7.5.1.4), so the PSNs between are skipped.
    ResentPastUnacked { frame: u64, psn: Psn, unacked: Psn, acked_in: u64 },
    /// PSNs that never got through, in PSN order.
    NeverDelivered { psns: Vec<Psn> },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::AckMovedBack { from, to, frame } => {
                write!(f, "what the responder acknowledged moved back from PSN {from} to {to} (frame {frame})")
            }
            Violation::ResentPastNak { frame, psn, nak_psn, nak_frame } => {
                write!(f, "frame {frame} resends from PSN {psn}, past PSN {nak_psn} that the NAK in frame {nak_frame} asked for")
            }
            Violation::ResentPastUnacked { frame, psn, unacked, acked_in } => {
                write!(f, "frame {frame} resends from PSN {psn}, past PSN {unacked} that no response had acknowledged (frame {acked_in} acknowledged the PSN before it)")
            }
            Violation::NeverDelivered { psns } => {
                let l: Vec<String> = psns.iter().map(Psn::to_string).collect();
                write!(f, "PSN {} never delivered", l.join(", "))
            }
        }
    }
}

/// A resend run that starts at a PSN the responder had acknowledged before it, on
/// the wire: work for nothing, not a broken recovery (the responder answers the
/// duplicate again and executes nothing twice, IBA 9.7.5.1.1). The capture point
/// sees the acknowledgement before the requester does, so a resend close behind
/// it may simply have crossed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redundant {
    pub frame: u64,
    pub psn: Psn,
    /// The response that had acknowledged it (an ACK of it or later, or a NAK PSN
    /// Sequence Error past it).
    pub acked_in: u64,
    /// From that response to the resend.
    pub after_ns: u64,
}

impl fmt::Display for Redundant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frame {} resends PSN {}, {:.2} ms after frame {} acknowledged it",
            self.frame,
            self.psn,
            self.after_ns as f64 / 1e6,
            self.acked_in
        )
    }
}

/// What go-back-N analysis found on one pair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoBackN {
    pub resends: Vec<Resend>,
    /// Resend runs that started at a PSN already acknowledged.
    pub redundant: Vec<Redundant>,
    /// From the first request after a gap in what the responder received to the
    /// NAK PSN Sequence Error it drew.
    pub nak_latency_ns: Option<u64>,
    pub violations: Vec<Violation>,
}

fn is_seq_nak(p: &Packet) -> bool {
    matches!(p.ack, Some(AckKind::Nak(NakCode::PsnSequenceError)))
}

/// The last PSN a response acknowledges: an ACK (or a READ response or ATOMIC
/// Acknowledge carrying one) its own PSN; a NAK or an RNR NAK the PSN before the
/// one it names, which is the request it could not take (IBA 9.7.5.1.4: every
/// request before it was received).
fn acknowledges(p: &Packet) -> Option<Psn> {
    match p.ack? {
        AckKind::Ack { .. } => Some(p.psn),
        AckKind::Nak(_) | AckKind::RnrNak { .. } => Some(p.psn.add(Psn::MASK)),
        AckKind::Reserved => None,
    }
}

/// How far behind the packets sent after it a held packet can show up, in
/// packets, and how many PSNs in a row can be missing for that reason.
const HELD_WITHIN: usize = 32;
const HELD_GAP: u32 = 4;

/// The held packets a resend at `i` may take to fill its gaps: those recorded
/// since the last packet that was not held (`since`, sent before `i` but after
/// it, or released early), and the first [`HELD_WITHIN`] after `i`. Each held
/// packet is one transmission, so it fills one gap only: `taken` says which
/// already did.
struct HeldAround<'a> {
    reqs: &'a [Packet],
    /// How many times each PSN went out in the whole capture: a held packet whose
    /// PSN went out only that once is its original, no resend.
    sent: &'a std::collections::HashMap<Psn, u32>,
    taken: &'a mut [bool],
    since: usize,
    i: usize,
}

impl HeldAround<'_> {
    /// An untaken held packet of `psn` around `i`.
    fn find(&self, psn: Psn) -> Option<usize> {
        let end = (self.i + 1 + HELD_WITHIN).min(self.reqs.len());
        (self.since..self.i)
            .chain(self.i + 1..end)
            .find(|&j| self.reqs[j].held && !self.taken[j] && self.reqs[j].psn == psn)
            .filter(|_| self.sent.get(&psn).is_some_and(|&n| n > 1))
    }

    /// Whether each PSN from `from` up to (not including) `to` shows up held back
    /// around `i` (at most [`HELD_GAP`] of them); if so they are taken.
    fn fill(&mut self, from: Psn, to: Psn) -> bool {
        let gap = to.diff(from);
        if gap <= 0 || gap as u32 > HELD_GAP {
            return false;
        }
        let found: Option<Vec<usize>> = (0..gap as u32).map(|k| self.find(from.add(k))).collect();
        let Some(found) = found else { return false };
        for j in found {
            self.taken[j] = true;
        }
        true
    }

    /// Where a resend run that shows up starting at `psn` began in the
    /// requester's order: at the earliest PSN before it (up to [`HELD_GAP`] back)
    /// all of whose packets from there up to `psn` show up held back around it;
    /// else at `psn`. Those held packets are taken.
    fn run_start(&mut self, psn: Psn) -> Psn {
        let back = (1..=HELD_GAP)
            .take_while(|&k| (1..=k).all(|b| self.find(psn.add(Psn::MASK + 1 - b)).is_some()))
            .last()
            .unwrap_or(0);
        let first = psn.add(Psn::MASK + 1 - back);
        self.fill(first, psn);
        first
    }
}

/// Checks go-back-N recovery on one QP pair over a whole run: the requester's
/// transmissions `reqs` (undelivered ones included) and the responder's `resps`,
/// each in capture order. One pass over each: linear in the packets.
pub fn go_back_n(reqs: &[Packet], resps: &[Packet]) -> GoBackN {
    let mut g = GoBackN::default();
    let acks: Vec<&Packet> = resps.iter().filter(|f| f.ack.is_some()).collect();
    acks_moved_back(&acks, &mut g.violations);
    // What the requester had heard by each request (a response that was not
    // delivered never came): the last response, and each step forward of what was
    // acknowledged (PSN through, frame, time), to find which one first covered a PSN.
    let mut heard = acks.iter().filter(|a| a.delivered).peekable();
    let mut last: Option<&Packet> = None;
    let mut through: Vec<(Psn, u64, u64)> = Vec::new();
    let mut highest: Option<Psn> = None;
    let mut last_sent: std::collections::HashMap<Psn, u64> = std::collections::HashMap::new();
    let mut prev: Option<(Psn, bool)> = None;
    // Held packets already placed in a gap, and the last packet not held.
    let mut taken = vec![false; reqs.len()];
    let mut sent = std::collections::HashMap::new();
    for f in reqs {
        *sent.entry(f.psn).or_insert(0u32) += 1;
    }
    let mut since = 0;
    for (i, f) in reqs.iter().enumerate() {
        while let Some(a) = heard.next_if(|a| a.number < f.number) {
            last = Some(a);
            if let Some(p) = acknowledges(a) {
                if through.last().is_none_or(|t| p.after(t.0)) {
                    through.push((p, a.number, a.ts_ns));
                }
            }
        }
        // A held packet shows up late, but it is an original transmission (or a
        // resend's): it went out when it was sent, and it does not break a resend
        // run it lands in the middle of.
        if f.held {
            if highest.is_none_or(|h| f.psn.after(h)) {
                highest = Some(f.psn);
            }
            last_sent.insert(f.psn, f.ts_ns);
            continue;
        }
        let resent = highest.is_some_and(|h| !f.psn.after(h));
        let mut around = HeldAround { reqs, sent: &sent, taken: &mut taken, since, i };
        since = i + 1;
        // A resend run goes on PSN by PSN; one held back on the way shows up a
        // little later (or, released early, just before), and its gap is no new run.
        let starts_run = resent
            && prev.is_none_or(|(p, was_resend)| {
                !was_resend || (f.psn != p.add(1) && !around.fill(p.add(1), f.psn))
            });
        if starts_run {
            // In the order the requester sent them, the run may begin before `f`: its
            // first packets held back by the switch show up around it. Judged
            // from that first PSN, as the requester went back to it.
            let first = around.run_start(f.psn);
            // The first step forward that acknowledged this PSN, if any did.
            let k = through.partition_point(|t| first.after(t.0));
            if let Some(&(_, frame, ts)) = through.get(k) {
                g.redundant.push(Redundant {
                    frame: f.number,
                    psn: first,
                    acked_in: frame,
                    after_ns: f.ts_ns.saturating_sub(ts),
                });
            }
            let orig = last_sent.get(&first).copied().unwrap_or(f.ts_ns);
            let rnr = last.filter(|a| {
                matches!(a.ack, Some(AckKind::RnrNak { .. })) && a.psn == first && a.ts_ns >= orig
            });
            let nak = last.filter(|a| is_seq_nak(a) && a.ts_ns >= orig);
            // Whatever set it off, the run goes back at least to the oldest PSN not
            // acknowledged (the requester cannot have heard more than was recorded).
            // A NAK's own rule, below, says it better when it applies.
            if let Some(&(acked, acked_in, _)) = through.last() {
                let unacked = acked.add(1);
                if first.after(unacked) && nak.is_none_or(|n| !first.after(n.psn)) {
                    g.violations.push(Violation::ResentPastUnacked {
                        frame: f.number,
                        psn: first,
                        unacked,
                        acked_in,
                    });
                }
            }
            match (rnr, nak) {
                (Some(n), _) => g.resends.push(Resend {
                    psn: first,
                    frame: f.number,
                    trigger: Trigger::Rnr,
                    after_ns: f.ts_ns.saturating_sub(n.ts_ns),
                }),
                (None, Some(n)) => {
                    if first.after(n.psn) {
                        g.violations.push(Violation::ResentPastNak {
                            frame: f.number,
                            psn: first,
                            nak_psn: n.psn,
                            nak_frame: n.number,
                        });
                    }
                    g.resends.push(Resend {
                        psn: first,
                        frame: f.number,
                        trigger: Trigger::Nak,
                        after_ns: f.ts_ns.saturating_sub(n.ts_ns),
                    });
                }
                (None, None) => g.resends.push(Resend {
                    psn: first,
                    frame: f.number,
                    trigger: Trigger::Timeout,
                    after_ns: f.ts_ns.saturating_sub(orig),
                }),
            }
        }
        if highest.is_none_or(|h| f.psn.after(h)) {
            highest = Some(f.psn);
        }
        last_sent.insert(f.psn, f.ts_ns);
        prev = Some((f.psn, resent));
    }
    g.nak_latency_ns = nak_latency(reqs, &acks);
    g.violations.extend(never_delivered(reqs));
    g
}

/// What the responder acknowledges never moves back: an ACK of PSN n after a NAK of
/// n + 1 says the same as the NAK (everything through n arrived).
fn acks_moved_back(acks: &[&Packet], violations: &mut Vec<Violation>) {
    let mut said: Option<Psn> = None;
    for a in acks {
        let Some(p) = acknowledges(a) else { continue };
        match said {
            Some(s) if s.after(p) => {
                violations.push(Violation::AckMovedBack { from: s, to: p, frame: a.number })
            }
            _ => said = Some(p),
        }
    }
}

/// The first NAK PSN Sequence Error: how long after the request that showed the
/// responder a gap (the first delivered one past the NAK'd PSN).
fn nak_latency(reqs: &[Packet], acks: &[&Packet]) -> Option<u64> {
    let n = acks.iter().find(|a| is_seq_nak(a))?;
    let trig = reqs
        .iter()
        .take_while(|f| f.number < n.number)
        .find(|f| f.delivered && f.psn.after(n.psn))?;
    Some(n.ts_ns.saturating_sub(trig.ts_ns))
}

/// In the end every PSN sent got through at least once: the ones that never did.
fn never_delivered(reqs: &[Packet]) -> Option<Violation> {
    let delivered: std::collections::HashSet<Psn> =
        reqs.iter().filter(|f| f.delivered).map(|f| f.psn).collect();
    let mut lost: Vec<Psn> =
        reqs.iter().map(|f| f.psn).filter(|p| !delivered.contains(p)).collect();
    lost.sort_by_key(|p| p.value());
    lost.dedup();
    (!lost.is_empty()).then_some(Violation::NeverDelivered { psns: lost })
}

/// How long the requester waited after one RNR NAK before sending its PSN again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RnrWait {
    /// The RNR NAK's frame.
    pub frame: u64,
    pub waited_us: u64,
    /// What the NAK's timer field asked for.
    pub timer_us: u64,
}

impl RnrWait {
    pub fn honoured(&self) -> bool {
        self.waited_us >= self.timer_us
    }
}

/// After each RNR NAK in `resps`, how long until `reqs` sent that PSN again (NAKs
/// whose PSN was never sent again are left out).
pub fn rnr_waits(reqs: &[Packet], resps: &[Packet]) -> Vec<RnrWait> {
    resps
        .iter()
        .filter_map(|n| {
            let timer_us = n.ack?.rnr_wait_us()? as u64;
            let again = reqs.iter().find(|f| f.number > n.number && f.psn == n.psn)?;
            Some(RnrWait {
                frame: n.number,
                waited_us: again.ts_ns.saturating_sub(n.ts_ns) / 1000,
                timer_us,
            })
        })
        .collect()
}

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Syndrome;

    fn req(number: u64, ms: u64, psn: u32) -> Packet {
        Packet {
            number,
            ts_ns: ms * 1_000_000,
            psn: Psn::new(psn),
            delivered: true,
            held: false,
            ack: None,
        }
    }

    fn resp(number: u64, ms: u64, psn: u32, syndrome: u8) -> Packet {
        Packet { ack: Some(Syndrome(syndrome).kind()), ..req(number, ms, psn) }
    }

    const ACK: u8 = 0x1f;
    const SEQ_NAK: u8 = 0x60;

    #[test]
    fn go_back_n_after_a_nak() {
        // 101 lost, 102–103 arrive, NAK 101, resend 101–103, ACK 103: as rxe does.
        let mut q = vec![
            req(1, 0, 100),
            req(2, 0, 101),
            req(3, 0, 102),
            req(4, 0, 103),
            req(6, 3, 101),
            req(7, 3, 102),
            req(8, 3, 103),
        ];
        q[1].delivered = false;
        let r = vec![resp(5, 1, 101, SEQ_NAK), resp(9, 4, 103, ACK)];
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, vec![]);
        assert_eq!(
            g.resends,
            vec![Resend {
                psn: Psn::new(101),
                frame: 6,
                trigger: Trigger::Nak,
                after_ns: 2_000_000
            }]
        );
        assert_eq!(
            g.nak_latency_ns,
            Some(1_000_000),
            "from frame 3 (PSN 102, the first past the gap) to the NAK"
        );

        // Resending from past the NAK'd PSN, and an ACK that moves back, are caught.
        let bad_q = vec![q[0], q[1], q[2], q[3], req(6, 3, 102), req(7, 3, 103)];
        let bad_r = vec![resp(5, 1, 101, SEQ_NAK), resp(9, 4, 103, ACK), resp(10, 5, 102, ACK)];
        let g = go_back_n(&bad_q, &bad_r);
        let v: Vec<String> = g.violations.iter().map(|v| v.to_string()).collect();
        assert!(
            v.iter().any(|x| x
                == "frame 6 resends from PSN 102, past PSN 101 that the NAK in frame 5 asked for"),
            "{v:?}"
        );
        assert!(
            v.iter().any(|x| x
                == "what the responder acknowledged moved back from PSN 103 to 102 (frame 10)"),
            "{v:?}"
        );
        // An ACK of 100 after a NAK of 101 says what the NAK said: not back.
        let g =
            go_back_n(&q, &[resp(5, 1, 101, SEQ_NAK), resp(9, 4, 100, ACK), resp(10, 4, 103, ACK)]);
        assert_eq!(g.violations, vec![]);
        assert!(v.iter().any(|x| x == "PSN 101 never delivered"), "{v:?}");
        assert!(g.redundant.is_empty(), "{:?}", g.redundant);

        // Resending from before it: the NAK acknowledged PSN 100 (everything before
        // 101 arrived), so resending 100 is work for nothing, not a broken recovery.
        let early_q = vec![
            q[0],
            q[1],
            q[2],
            q[3],
            req(6, 3, 100),
            req(7, 3, 101),
            req(8, 3, 102),
            req(9, 3, 103),
        ];
        let g = go_back_n(&early_q, &[resp(5, 1, 101, SEQ_NAK), resp(10, 4, 103, ACK)]);
        assert_eq!(g.violations, vec![]);
        assert_eq!(
            g.redundant,
            vec![Redundant { frame: 6, psn: Psn::new(100), acked_in: 5, after_ns: 2_000_000 }]
        );
        assert_eq!(
            g.redundant[0].to_string(),
            "frame 6 resends PSN 100, 2.00 ms after frame 5 acknowledged it"
        );
        assert_eq!(g.resends.len(), 1, "one resend run");
    }

    #[test]
    fn go_back_n_after_a_timeout_and_a_lost_ack() {
        // WRITE Only PSN 7 delivered, its ACK lost: the requester's timer fires and
        // it resends PSN 7, which is right: it never heard the ACK.
        let q = vec![req(1, 0, 7), req(3, 70, 7)];
        let mut r = vec![resp(2, 1, 7, ACK), resp(4, 71, 7, ACK)];
        r[0].delivered = false;
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, vec![]);
        assert_eq!(
            g.resends,
            vec![Resend {
                psn: Psn::new(7),
                frame: 3,
                trigger: Trigger::Timeout,
                after_ns: 70_000_000
            }]
        );
        assert!(g.redundant.is_empty());
        // Had the ACK arrived, the resend is redundant: counted, not a violation.
        r[0].delivered = true;
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, vec![]);
        assert_eq!(
            g.redundant,
            vec![Redundant { frame: 3, psn: Psn::new(7), acked_in: 2, after_ns: 69_000_000 }]
        );
    }

    /// A held packet that lands inside a resend run neither starts a run of its
    /// own nor splits the one it is in.
    #[test]
    fn a_held_packet_does_not_split_a_resend_run() {
        let mut q = vec![
            req(1, 0, 10),
            req(2, 0, 11),
            req(3, 0, 12),
            req(4, 0, 13),
            req(6, 2, 11),
            req(7, 2, 12),
            req(8, 2, 14),
            req(9, 2, 13),
        ];
        q[1].delivered = false;
        q[6].held = true;
        let g = go_back_n(&q, &[resp(5, 1, 11, SEQ_NAK), resp(10, 3, 14, ACK)]);
        assert_eq!(g.violations, vec![]);
        assert_eq!(
            g.resends,
            vec![Resend {
                psn: Psn::new(11),
                frame: 6,
                trigger: Trigger::Nak,
                after_ns: 1_000_000
            }]
        );
    }

    /// A resend held back by the switch behind the one after it (as the lab's
    /// `reorder` rule does): the run it belongs to goes on across the gap.
    #[test]
    fn a_held_resend_leaves_no_gap_in_its_run() {
        let mut q = vec![
            req(1, 0, 50),
            req(2, 0, 51),
            req(3, 0, 52),
            req(4, 0, 53),
            req(6, 2, 51),
            req(7, 2, 53),
            req(8, 2, 52),
        ];
        q[1].delivered = false;
        q[6].held = true;
        let g = go_back_n(&q, &[resp(5, 1, 51, SEQ_NAK), resp(9, 3, 53, ACK)]);
        assert_eq!(g.violations, vec![]);
        assert_eq!(g.resends.len(), 1, "{:?}", g.resends);
        // Not held: the run skipped 52, and went on past the NAK'd PSN.
        q[6].held = false;
        let g = go_back_n(&q, &[resp(5, 1, 51, SEQ_NAK), resp(9, 3, 53, ACK)]);
        assert!(
            matches!(g.violations[..], [Violation::ResentPastNak { frame: 7, .. }, ..]),
            "{:?}",
            g.violations
        );
    }

    /// The first resend of a run held back by the switch behind the next one (the
    /// lab's `reorder` rule): the capture shows the run starting one PSN past the
    /// NAK'd one, but the requester went back to the NAK'd PSN first, as the
    /// switch's mark says. Seen on trixie in `write_stream_faults.toml`.
    #[test]
    fn a_run_whose_first_resend_was_held_starts_where_the_requester_started_it() {
        let mut q = vec![
            req(1, 0, 50),
            req(2, 0, 51),
            req(3, 0, 52),
            req(4, 0, 53),
            req(6, 2, 52),
            req(7, 2, 51),
            req(8, 2, 53),
        ];
        q[1].delivered = false;
        q[5].held = true;
        let r = [resp(5, 1, 51, SEQ_NAK), resp(9, 3, 53, ACK)];
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, vec![]);
        assert_eq!(
            g.resends,
            vec![Resend {
                psn: Psn::new(51),
                frame: 6,
                trigger: Trigger::Nak,
                after_ns: 1_000_000
            }]
        );
        // Not held: the requester did resend from 52 first, past the NAK'd 51.
        q[5].held = false;
        let g = go_back_n(&q, &r);
        assert!(
            matches!(
                g.violations[..],
                [Violation::ResentPastNak { frame: 6, nak_frame: 5, .. }, ..]
            ),
            "{:?}",
            g.violations
        );
        // Two held back (the run began two PSNs before what shows first): the same.
        let mut q2 = vec![
            req(1, 0, 50),
            req(2, 0, 51),
            req(3, 0, 52),
            req(4, 0, 53),
            req(6, 2, 53),
            req(7, 2, 51),
            req(8, 2, 52),
        ];
        q2[1].delivered = false;
        q2[5].held = true;
        q2[6].held = true;
        let g = go_back_n(&q2, &r);
        assert_eq!(g.violations, vec![]);
        assert_eq!(g.resends.len(), 1, "{:?}", g.resends);
        assert_eq!(g.resends[0].psn, Psn::new(51));
    }

    /// A resend the switch held (a short `delay`) but released before the next
    /// one came: recorded in place, marked held. It is still in its run, not a
    /// gap (found by the model test: judged a resend past the NAK'd PSN).
    #[test]
    fn a_held_resend_recorded_in_place_leaves_no_gap() {
        let mut q = vec![
            req(1, 0, 50),
            req(2, 0, 51),
            req(3, 0, 52),
            req(4, 0, 53),
            req(6, 2, 51),
            req(7, 2, 52),
            req(8, 2, 53),
        ];
        q[1].delivered = false;
        q[5].held = true;
        let g = go_back_n(&q, &[resp(5, 1, 51, SEQ_NAK), resp(9, 3, 53, ACK)]);
        assert_eq!(g.violations, vec![]);
        assert_eq!(g.resends.len(), 1, "{:?}", g.resends);
    }

    /// A resend run that starts past what the responder had acknowledged, after
    /// an ACK rather than a NAK (a PSN skipped in the run): caught.
    #[test]
    fn a_run_past_the_oldest_unacknowledged_psn_is_caught() {
        // NAK 51; resend 51, then an ACK of 51; then 53: 52 skipped.
        let mut q = vec![
            req(1, 0, 50),
            req(2, 0, 51),
            req(3, 0, 52),
            req(4, 0, 53),
            req(6, 2, 51),
            req(8, 3, 53),
        ];
        q[1].delivered = false;
        let g = go_back_n(&q, &[resp(5, 1, 51, SEQ_NAK), resp(7, 3, 51, ACK)]);
        assert_eq!(
            g.violations[0].to_string(),
            "frame 8 resends from PSN 53, past PSN 52 that no response had acknowledged (frame 7 acknowledged the PSN before it)"
        );
    }

    /// Over a long run (go-back-N checked across all of it), each loss recovered
    /// from its NAK, in one pass: 100,000 messages with every 100th lost once.
    #[test]
    fn go_back_n_over_a_long_run() {
        let (mut q, mut r) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        let mut next = |v: &mut Vec<Packet>, p: Packet| {
            n += 1;
            v.push(Packet { number: n, ..p });
        };
        for psn in 0..100_000u32 {
            let ms = u64::from(psn);
            if psn % 100 == 50 {
                next(&mut q, Packet { delivered: false, ..req(0, ms, psn) });
                next(&mut q, req(0, ms, psn + 1));
                next(&mut r, resp(0, ms, psn, SEQ_NAK));
                next(&mut q, req(0, ms, psn));
            } else if psn % 100 != 51 {
                next(&mut q, req(0, ms, psn));
            } else {
                next(&mut q, req(0, ms, psn));
                next(&mut r, resp(0, ms, psn, ACK));
            }
        }
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, vec![]);
        assert_eq!(g.resends.len(), 1000);
        assert!(g.resends.iter().all(|x| x.trigger == Trigger::Nak));
        assert!(g.redundant.is_empty());
    }

    #[test]
    fn held_packets_are_late_originals_and_psns_wrap() {
        // 0xffffff then 0 and 1, with 0 held behind 1: no resend, nothing lost.
        let mut q = vec![req(1, 0, 0xff_ffff), req(2, 0, 1), req(3, 1, 0)];
        q[2].held = true;
        let g = go_back_n(&q, &[resp(4, 2, 1, ACK)]);
        assert_eq!((g.resends.len(), g.violations.len()), (0, 0), "{g:?}");
        // The held one draws a NAK, and its resend is the NAK's doing (the lab's
        // `reorder psn=101`): timed from the NAK, not the ACK timer's.
        let mut q =
            vec![req(1, 0, 100), req(2, 0, 102), req(3, 0, 101), req(5, 2, 101), req(6, 2, 102)];
        q[2].held = true;
        let g = go_back_n(&q, &[resp(4, 1, 101, SEQ_NAK), resp(7, 3, 102, ACK)]);
        assert_eq!(
            g.resends,
            vec![Resend {
                psn: Psn::new(101),
                frame: 5,
                trigger: Trigger::Nak,
                after_ns: 1_000_000
            }]
        );
        assert_eq!(g.violations, vec![]);
        // Half the PSN space ahead counts as after, as Psn::after says.
        let far = vec![req(1, 0, 0), req(2, 0, 0x80_0000)];
        assert!(go_back_n(&far, &[]).resends.is_empty());
    }

    #[test]
    fn rnr_timers_waited_out_or_not() {
        let q = vec![req(1, 0, 5), req(3, 1, 5)];
        let r = vec![resp(2, 0, 5, 0x2c)]; // timer 12 = 640 µs; resent 1 ms later
        let w = rnr_waits(&q, &r);
        assert_eq!(w, vec![RnrWait { frame: 2, waited_us: 1000, timer_us: 640 }]);
        assert!(w[0].honoured());
        let r = vec![resp(2, 0, 5, 0x2f)]; // timer 15 = 1.92 ms
        assert!(!rnr_waits(&q, &r)[0].honoured());
        assert!(rnr_waits(&q[..1], &r).is_empty(), "never sent again: nothing to measure");
        // The resend is the RNR NAK's doing, timed from it; not the ACK timer's.
        let g = go_back_n(&q, &[resp(2, 0, 5, 0x2c)]);
        assert_eq!(
            g.resends,
            vec![Resend { psn: Psn::new(5), frame: 3, trigger: Trigger::Rnr, after_ns: 1_000_000 }]
        );
        assert_eq!(g.resends[0].trigger.to_string(), "RNR NAK");
    }
}
