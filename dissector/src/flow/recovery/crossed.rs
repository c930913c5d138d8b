//! Resends an ACK timer sent while the answer was on its way: the responder
//! answered, but later than the requester's ACK timeout.
//!
//! A requester whose ACK timer runs out resends (IBA 9.7.6.1.3), whatever the
//! reason the answer is late. When nothing was lost, the first transmission's
//! answer comes after all, just behind the resend, and the resend draws an answer
//! of its own: two transmissions, two answers. The wire then tells the story of
//! the responder's latency against the requester's timer, not of the exchange the
//! scenario drove: in the lab, a VM whose vCPU the host stalled for a timeout's
//! worth of milliseconds (a SEND answered 82.9 ms after it went out, 7 µs after
//! the timer resent it, under `-j 4`), so such a resend appears in some runs and
//! not in others.
//!
//! [`crossed_resends`] finds them, with the answers that only they drew, so a
//! judge can set them aside as it does early resends ([`super::early`]) and say
//! that it did.
//!
//! Owns: [`CrossedResend`], [`crossed_resends`]. Imports: the recovery analysis
//! of its parent, the wire vocabulary.

use core::fmt;
use core::ops::RangeInclusive;

use super::{go_back_n, Packet, Resend, Trigger};
use crate::wire::Psn;

/// A resend run the ACK timer sent no sooner than its interval allows, whose PSN's
/// earlier transmission was answered after it: the answer and the resend crossed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossedResend {
    /// The run's first frame and its PSN.
    pub frame: u64,
    pub psn: Psn,
    /// From the PSN's last transmission before the run to the run.
    pub after_ns: u64,
    /// The answer to that transmission: its frame, and how long after the run's
    /// first frame it was recorded.
    pub answer: (u64, u64),
    /// Every request frame of the run, in capture order.
    pub frames: Vec<u64>,
    /// The answers recorded after `answer` that repeat one given to the run's
    /// PSNs: what only the resend drew.
    pub answers: Vec<u64>,
}

impl fmt::Display for CrossedResend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (answer, behind) = self.answer;
        write!(
            f,
            "frame {} resent PSN {} {:.2} ms after it went out; frame {answer} answered the first transmission {:.3} ms after the resend",
            self.frame,
            self.psn,
            self.after_ns as f64 / 1e6,
            behind as f64 / 1e6,
        )
    }
}

/// The crossed resends on one QP pair: `reqs` and `resps` as [`go_back_n`] takes
/// them, `timer` the intervals an ACK timer of this QP can take as the capture
/// point sees them (a resend sooner than its start is early, not crossed).
///
/// A timer resend run counts as crossed when all of these hold, so a resend that
/// loss explains never does:
/// - it came no sooner than `timer` allows after its PSN's last transmission;
/// - every transmission of its PSN before it, and every answer counted below,
///   was delivered as it came (the switch neither dropped nor held it);
/// - nothing answered that PSN, or a later one, between that last transmission
///   and the resend;
/// - before the PSN is sent again, at least two answers to it (an ACK of it or a
///   later PSN, or a NAK of it) were recorded after the resend, the later ones
///   repeating the first: each transmission drew its own, so the first answer is
///   the earlier transmission's, not the resend's. One answer alone could be the
///   resend's to a transmission lost where the capture point cannot see.
pub fn crossed_resends(
    reqs: &[Packet],
    resps: &[Packet],
    timer: RangeInclusive<u64>,
) -> Vec<CrossedResend> {
    crossed_among(&go_back_n(reqs, resps).resends, reqs, resps, timer)
}

/// [`crossed_resends`], with the pair's go-back-N resends already found.
pub(super) fn crossed_among(
    resends: &[Resend],
    reqs: &[Packet],
    resps: &[Packet],
    timer: RangeInclusive<u64>,
) -> Vec<CrossedResend> {
    let timed =
        resends.iter().filter(|r| r.trigger == Trigger::Timeout && r.after_ns >= *timer.start());
    let mut out = Vec::new();
    for r in timed {
        let Some(i) = reqs.iter().position(|f| f.number == r.frame) else { continue };
        let before: Vec<&Packet> = reqs[..i].iter().filter(|f| f.psn == r.psn).collect();
        let Some(last) = before.last() else { continue };
        if before.iter().any(|f| !f.delivered || f.held_ns > 0) {
            continue;
        }
        let covers = |a: &&Packet| !r.psn.after(a.psn) && a.ack.is_some();
        if resps.iter().filter(|a| a.number > last.number && a.number < r.frame).any(|a| covers(&a))
        {
            continue;
        }
        let Some(frames) = super::resend_run(reqs, i) else { continue };
        let end = i + frames.len();
        // Answers after the run, up to the PSN's next transmission.
        let until = reqs[end..].iter().find(|f| f.psn == r.psn).map_or(u64::MAX, |f| f.number);
        let after: Vec<&Packet> = resps
            .iter()
            .filter(|a| a.number > r.frame && a.number < until)
            .filter(covers)
            .collect();
        let Some(first) = after.first() else { continue };
        if after.iter().any(|a| !a.delivered || a.held_ns > 0) {
            continue;
        }
        let answers: Vec<u64> = after[1..]
            .iter()
            .filter(|a| a.psn == first.psn && a.ack == first.ack)
            .take(frames.len())
            .map(|a| a.number)
            .collect();
        if answers.is_empty() {
            continue;
        }
        let at = reqs[i].ts_ns;
        out.push(CrossedResend {
            frame: r.frame,
            psn: r.psn,
            after_ns: r.after_ns,
            answer: (first.number, first.ts_ns.saturating_sub(at)),
            frames,
            answers,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::aeth::AckKind;

    use super::super::support::{answer, req, timer, MS};

    const RNR: AckKind = AckKind::RnrNak { timer: 12 };

    /// What a run under `-j 4` recorded (conformance/srq/empty_rnr on 6.1): a
    /// SEND to an empty SRQ, resent by the ACK timer 82.9 ms later, the RNR NAK
    /// of the first transmission recorded 7 µs after the resend and the resend's
    /// own 12.3 ms after that. The resend and its RNR NAK go aside; the first
    /// RNR NAK stays.
    #[test]
    fn a_resend_the_late_answer_crossed_is_named_with_the_answer_it_drew() {
        let reqs = [req(11, 57_010, 6_458_886), req(12, 139_954, 6_458_886)];
        let resps = [answer(13, 139_961, 6_458_886, RNR), answer(14, 152_276, 6_458_886, RNR)];
        let crossed = crossed_resends(&reqs, &resps, timer());
        assert_eq!(
            crossed,
            vec![CrossedResend {
                frame: 12,
                psn: Psn::new(6_458_886),
                after_ns: 82_944_000,
                answer: (13, 7_000),
                frames: vec![12],
                answers: vec![14],
            }]
        );
        assert_eq!(
            crossed[0].to_string(),
            "frame 12 resent PSN 6458886 82.94 ms after it went out; frame 13 answered the first transmission 0.007 ms after the resend"
        );
        // With rnr_retry = 1 the requester waits out the RNR timer and sends the
        // PSN again: that transmission and its answer are the scenario's.
        let reqs = [reqs[0], reqs[1], req(15, 153_000, 6_458_886)];
        let resps = [resps[0], resps[1], answer(16, 153_100, 6_458_886, RNR)];
        let crossed = crossed_resends(&reqs, &resps, timer());
        assert_eq!(crossed.len(), 1, "{crossed:?}");
        assert_eq!((crossed[0].frames.clone(), crossed[0].answers.clone()), (vec![12], vec![14]));
    }

    /// A lost transmission's resend draws one answer; one lost on the way back
    /// was answered before the resend; one the switch dropped or held is the
    /// wire's doing: none of them crossed anything.
    #[test]
    fn recovery_from_loss_is_not_a_crossing() {
        let ack = AckKind::Ack { credits: 31 };
        // Lost where the capture cannot see: one answer after the resend.
        let reqs = [req(1, 0, 5), req(2, 70_000, 5)];
        assert!(crossed_resends(&reqs, &[answer(3, 70_100, 5, ack)], timer()).is_empty());
        // Two answers, but the switch dropped the first transmission.
        let dropped = Packet { delivered: false, ..req(1, 0, 5) };
        let two = [answer(3, 70_010, 5, ack), answer(4, 70_100, 5, ack)];
        assert!(crossed_resends(&[dropped, req(2, 70_000, 5)], &two, timer()).is_empty());
        // The switch held the answer.
        let held = Packet { held_ns: 70 * MS, ..answer(3, 70_010, 5, ack) };
        assert!(crossed_resends(&reqs, &[held, two[1]], timer()).is_empty());
        // Crossed, when nothing was lost or held.
        assert_eq!(crossed_resends(&reqs, &two, timer()).len(), 1);
        // Resent sooner than the timer allows: early, not crossed.
        let soon = [req(1, 0, 5), req(2, 30_000, 5)];
        let two = [answer(3, 30_010, 5, ack), answer(4, 30_100, 5, ack)];
        assert!(crossed_resends(&soon, &two, timer()).is_empty());
    }
}
