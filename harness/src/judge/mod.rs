//! Judging a scenario: its outcome and its one decoded wire ([`timeline`]) against
//! its expectations — completions, wire, probes, memory — each a [`Verdict`] with
//! what was expected and what happened; and what this setup did, as observations
//! a device profile records ([`observe`]) and compares ([`profile`]).
//!
//! Owns: the expectations' semantics. Imports: scenario (the checked model and its
//! patterns), results, the protocol (what agents reported: completions, events,
//! the stream vocabulary), the verbs' completion names, dissector (capture decoding,
//! vocabulary, go-back-N rules), lab's marks. Go-back-N and RNR-timer
//! facts come from `dissector::flow::recovery`; the judge adds only what the
//! capture cannot know: which QPs and probes belong to the scenario.
use std::collections::HashSet;
use std::net::IpAddr;

use dissector::flow::recovery;
use dissector::wire::NakKind;

use crate::protocol::stream::StreamVerb;
use crate::protocol::{Action, Event, Wc};
use crate::results::{Evidence, Verdict, VerdictKind};
use crate::scenario::model::{
    CompletionExpect, Errno, EventExpect, Memory, MemoryExpect, Outcome, Qp, Scenario, Step,
    StepExpect, StreamExpect, WireExpect,
};
use crate::scenario::pattern::{self, Pattern};
use crate::vocab::{GuardDamage, WcFlags, GUARD};

pub(crate) mod counters;
mod headers;
pub(crate) mod observe;
pub(crate) mod pace;
pub(crate) mod probes;
pub(crate) mod profile;
pub(crate) mod snapshot;
pub(crate) mod timeline;

pub(crate) use timeline::{Packet, Timeline};

/// The capture of a run, decoded once (each frame tested against the header
/// conditions of `sc`'s expectations), or why there is none.
pub(crate) fn wire_of(sc: &Scenario, o: &Evidence) -> Result<Timeline, String> {
    match &o.capture {
        Some(p) => timeline::read_with(p, &sc.expect.conditions()),
        None => Err("no capture was recorded (the lab's switch records the wire; with --endpoints, give -i IFACE to capture on a host, --capture-at-agents to capture at each agent, or --bridge HOST:PORT)".into()),
    }
}

/// Every expectation of `sc` judged on what happened and its wire, and what the
/// setup did (the observations a profile records).
pub(crate) fn judge(
    sc: &Scenario,
    o: &Evidence,
    wire: &Result<Timeline, String>,
) -> (Vec<Verdict>, std::collections::BTreeMap<String, String>) {
    let answers = match wire {
        Ok(t) => Ok(probes::answers(o, t)),
        Err(m) => Err(m.clone()),
    };
    let mut v = Vec::new();
    let mut deviations = Vec::new();
    let mut push = |verdict: Verdict, record: bool| {
        let (verdict, obs) = verdict.recorded(record);
        v.push(verdict);
        deviations.extend(obs);
    };
    for e in &sc.expect.completion {
        push(
            completion(e, o.completions.get(&e.on).map(Vec::as_slice).unwrap_or(&[]), o),
            e.record_deviation,
        );
    }
    for e in &sc.expect.wire {
        let verdict = match wire {
            Ok(t) => self::wire(sc, e, o, t),
            Err(msg) => {
                let expected = if o.capture.is_some() { "a readable capture" } else { "a capture" };
                Verdict::new(
                    VerdictKind::Wire,
                    format!("wire of QP {} from {}", e.qp, e.from),
                    false,
                    expected.into(),
                    msg.clone(),
                )
            }
        };
        // No capture is not a deviation of the device.
        push(verdict, e.record_deviation && wire.is_ok());
    }
    let conditions = wire.as_ref().map_or(&[][..], |t| t.conditions.as_slice());
    for e in &sc.expect.probe {
        // No capture is not a deviation of the device.
        push(probes::verdict(e, o, &answers, conditions), e.record_deviation && answers.is_ok());
    }
    for e in &sc.expect.order {
        let verdict = match wire {
            Ok(t) => headers::order(sc, e, o, t),
            Err(msg) => Verdict::new(
                VerdictKind::Wire,
                format!("order on QP {}", e.qp),
                false,
                "a capture".into(),
                msg.clone(),
            ),
        };
        push(verdict, e.record_deviation && wire.is_ok());
    }
    for e in &sc.expect.memory {
        // Memory never read (the run stopped) is not a deviation either.
        let read = o.memory.get(&e.on).is_some_and(|m| m.contains_key(&e.mr));
        let verdict = match e.want {
            Memory::ProbeWritesLanded => probes::writes_landed(sc, e, o, &answers),
            _ => memory(sc, e, o),
        };
        // Nor is a wire not read.
        let judged = read && (e.want != Memory::ProbeWritesLanded || answers.is_ok());
        push(verdict, e.record_deviation && judged);
    }
    for e in &sc.expect.outside {
        let read = o.guards.get(&e.on).is_some_and(|m| m.contains_key(&e.mr));
        push(outside(&e.on, &e.mr, o), e.record_deviation && read);
    }
    // A device that wrote outside an MR fails the run whether or not an
    // expectation asked: no setup may do that.
    for (on, mrs) in &o.guards {
        for (mr, g) in mrs {
            let asked = sc.expect.outside.iter().any(|e| e.on == *on && e.mr == *mr);
            if !g.intact() && !asked {
                push(outside(on, mr, o), false);
            }
        }
    }
    for e in &sc.expect.counters {
        // Counters never read (the run stopped) are not a deviation.
        push(counters::verdict(e, o), e.record_deviation && o.counters.contains_key(&e.on));
    }
    for e in &sc.expect.event {
        // Events of a run that stopped early were never all collected.
        push(
            event(e, o.events.get(&e.on).map(Vec::as_slice).unwrap_or(&[])),
            e.record_deviation && o.error.is_none(),
        );
    }
    for e in &sc.expect.step {
        // A step the run never reached is not a deviation of the device.
        let reached = o.answers.iter().any(|a| a.index == e.index);
        push(step(sc, e, o), e.record_deviation && reached);
    }
    for e in &sc.expect.stream {
        push(stream(e, o), false);
        if let Some(w) = pace::verdict(e, o) {
            push(w, false);
        }
    }
    let mut obs = match (wire, &answers) {
        (Ok(t), Ok(a)) => observe::observations(sc, o, Some((t, a))),
        _ => observe::observations(sc, o, None),
    };
    // Only from a run carried to its end: a stopped run says nothing of the device.
    if o.error.is_none() {
        obs.extend(deviations);
    }
    (v, obs)
}

/// A judged step: did the device refuse or accept its verb as expected, is the
/// QP in the state expected?
fn step(sc: &Scenario, e: &StepExpect, o: &Evidence) -> Verdict {
    let st = sc.steps.get(e.index);
    let what = match st {
        Some(Step::Act { on, action: Action::QueryQp { qp } }) => {
            format!("step {}: state of QP {qp} on {on}", e.index + 1)
        }
        Some(s) => {
            format!("step {}: {} on {}", e.index + 1, s.op(), s.on().unwrap_or("the controller"))
        }
        None => format!("step {}", e.index + 1),
    };
    let expected = match e.outcome {
        Outcome::Accepted => "accepted".to_string(),
        Outcome::Refused(None) => "refused".to_string(),
        Outcome::Refused(Some(n)) => format!("refused with {n}"),
        Outcome::State(s) => s.to_string(),
        Outcome::Notified(true) => "a notification".to_string(),
        Outcome::Notified(false) => "no notification".to_string(),
    };
    let Some(a) = o.answers.iter().find(|a| a.index == e.index) else {
        let actual = "the run stopped before this step".to_string();
        return Verdict::new(VerdictKind::Verb, what, false, expected, actual);
    };
    let refusal = |r: &crate::protocol::Refusal| {
        format!("{} refused it with {} ({})", r.verb, Errno(r.errno as u32), r.message)
    };
    let (passed, actual) = match (e.outcome, &a.refused) {
        (Outcome::State(want), None) => match a.qp_state {
            Some(got) => (got == want, got.to_string()),
            None => (false, "no state was reported".to_string()),
        },
        (Outcome::State(_) | Outcome::Notified(_), Some(r)) => (false, refusal(r)),
        (Outcome::Notified(want), None) => match a.notified {
            Some(got) => {
                (got == want, if got { "a notification" } else { "no notification" }.to_string())
            }
            None => (false, "no answer about a notification".to_string()),
        },
        (Outcome::Accepted, None) => (true, "accepted".to_string()),
        (Outcome::Accepted, Some(r)) => (false, refusal(r)),
        (Outcome::Refused(_), None) => (false, "accepted".to_string()),
        (Outcome::Refused(want), Some(r)) => {
            (want.is_none_or(|n| n.0 as i32 == r.errno), refusal(r))
        }
    };
    Verdict::new(VerdictKind::Verb, what, passed, expected, actual)
}

fn describe(w: &Wc) -> String {
    // The opcode and length of a failed completion are undefined (ibv_poll_cq(3)).
    if w.status != crate::vocab::WcStatus::SUCCESS {
        return format!("wr_id {} {}", w.wr_id, w.status);
    }
    let mut s = format!("wr_id {} {} {} byte_len {}", w.wr_id, w.status, w.opcode, w.byte_len);
    if let Some(i) = w.imm_data {
        s.push_str(&format!(" imm_data {i:#x}"));
    }
    if let Some(q) = w.src_qp {
        s.push_str(&format!(" src_qp {q:#x}"));
    }
    if let Some(k) = w.invalidated_rkey {
        s.push_str(&format!(" invalidated rkey {k:#x}"));
        if let Some(m) = &w.invalidated_mw {
            s.push_str(&format!(" (MW {m})"));
        }
    }
    s
}

/// Asynchronous events on an endpoint: of the expected type (about the expected
/// SRQ or QP), exactly `count` of them or at least one.
pub(crate) fn event(e: &EventExpect, events: &[Event]) -> Verdict {
    let what = format!("events on {}", e.on);
    let about = match (&e.srq, &e.qp) {
        (Some(s), _) => format!(" on SRQ {s}"),
        (None, Some(q)) => format!(" on QP {q}"),
        (None, None) => String::new(),
    };
    let n = events
        .iter()
        .filter(|x| {
            x.kind == e.kind
                && (e.srq.is_none() || x.srq == e.srq)
                && (e.qp.is_none() || x.qp == e.qp)
        })
        .count();
    let (ok, want) = match e.count {
        Some(c) => (n == c, format!("{c} × {}{about}", e.kind)),
        None => (n > 0, format!("{}{about}", e.kind)),
    };
    let seen: Vec<String> = events
        .iter()
        .map(|x| {
            format!(
                "{}{} at {:.1} ms",
                x.kind,
                x.srq
                    .as_ref()
                    .map(|s| format!(" on SRQ {s}"))
                    .or_else(|| x.qp.as_ref().map(|q| format!(" on QP {q}")))
                    .unwrap_or_default(),
                x.t_ms
            )
        })
        .collect();
    Verdict::new(
        VerdictKind::Event,
        what,
        ok,
        want,
        if seen.is_empty() { "none".into() } else { seen.join("; ") },
    )
}

/// A completion on `e.on`, among the `wcs` it polled, held to `e`; `o` gives the
/// QPNs the run set up (what `src_qp` names).
pub(crate) fn completion(e: &CompletionExpect, wcs: &[Wc], o: &Evidence) -> Verdict {
    let which = match (e.wr_id, e.index) {
        (Some(id), _) => format!("completion of wr_id {id} on {}", e.on),
        (None, Some(i)) => format!("completion #{i} on {}", e.on),
        (None, None) => format!("completions on {}", e.on),
    };
    // A QPN is the run's: an end never set up has none, and no completion can match.
    let src_qpn = e.src_qp.as_ref().map(|q| {
        let qpn = o.endpoints.get(&q.on).and_then(|f| f.qps.iter().find(|x| x.name == q.qp));
        (q, qpn.map(|x| x.qpn))
    });
    let mut want = Vec::new();
    want.extend(e.status.map(|s| s.to_string()));
    want.extend(e.opcode.map(|o| o.to_string()));
    want.extend(e.byte_len.map(|b| format!("byte_len {b}")));
    want.extend(e.imm_data.map(|i| format!("imm_data {i:#x}")));
    want.extend(e.invalidated.as_ref().map(|m| format!("invalidated the rkey of MW {m}")));
    want.extend(src_qpn.map(|(q, n)| match n {
        Some(n) => format!("src_qp {n:#x} ({q})"),
        None => format!("src_qp of {q} (never set up)"),
    }));
    want.extend(e.grh.map(|g| format!("grh {g}")));
    want.extend(e.pkey_index.map(|p| format!("pkey_index {p}")));
    want.extend(e.within_ms.map(|ms| format!("within {ms} ms")));
    if let (Some(c), None, None) = (e.count, e.wr_id, e.index) {
        let all: Vec<String> = wcs.iter().map(describe).collect();
        let actual = if all.is_empty() {
            "none".to_string()
        } else {
            format!("{}: {}", all.len(), all.join("; "))
        };
        return Verdict::new(
            VerdictKind::Completion,
            which,
            wcs.len() == c,
            format!("{c} completions"),
            actual,
        );
    }
    let found = match (e.wr_id, e.index) {
        (Some(id), _) => wcs.iter().find(|w| w.wr_id == id),
        (None, Some(i)) => wcs.get(i),
        (None, None) => None,
    };
    let Some(w) = found else {
        let seen: Vec<String> = wcs.iter().map(describe).collect();
        return Verdict::new(
            VerdictKind::Completion,
            which,
            false,
            want.join(", "),
            format!(
                "no such completion (polled: {})",
                if seen.is_empty() { "none".into() } else { seen.join("; ") }
            ),
        );
    };
    let ok = e.status.is_none_or(|s| s == w.status)
        && e.opcode.is_none_or(|o| o == w.opcode)
        && e.byte_len.is_none_or(|b| b == w.byte_len)
        && e.imm_data.is_none_or(|i| Some(i) == w.imm_data)
        && e.invalidated
            .as_ref()
            .is_none_or(|m| w.invalidated_rkey.is_some() && w.invalidated_mw.as_ref() == Some(m))
        && src_qpn.is_none_or(|(_, n)| n.is_some() && w.src_qp == n)
        && e.grh.is_none_or(|g| g == (w.flags & WcFlags::GRH != 0))
        && e.pkey_index.is_none_or(|p| w.pkey_index == Some(p))
        && e.within_ms.is_none_or(|ms| w.t_ms <= ms as f64)
        && e.count.is_none_or(|c| wcs.len() == c);
    Verdict::new(
        VerdictKind::Completion,
        which,
        ok,
        want.join(", "),
        format!("{}{} at {:.1} ms", describe(w), judged_too(e, w), w.t_ms),
    )
}

/// What `describe` leaves out of `w` that `e` judges: the flag and the P_Key
/// index, and a source QP it did not show (none reported, or a failed completion).
fn judged_too(e: &CompletionExpect, w: &Wc) -> String {
    let mut s = String::new();
    if e.src_qp.is_some() {
        match w.src_qp {
            None => s.push_str(" src_qp not reported (not a UD QP's completion)"),
            Some(q) if w.status != crate::vocab::WcStatus::SUCCESS => {
                s.push_str(&format!(" src_qp {q:#x}"))
            }
            Some(_) => {}
        }
    }
    if e.grh.is_some() {
        let g = w.flags & WcFlags::GRH != 0;
        s.push_str(&format!(" grh {g} (wc_flags {:#x})", w.flags));
    }
    if e.pkey_index.is_some() {
        match w.pkey_index {
            Some(p) => s.push_str(&format!(" pkey_index {p}")),
            None => s.push_str(" pkey_index not reported (an older agent)"),
        }
    }
    s
}

/// One direction of a QP pair on the wire: the requests `from` sent to its peer,
/// and the responses and CNPs back.
pub(crate) struct Pair<'a> {
    pub reqs: Vec<&'a Packet>,
    pub resps: Vec<&'a Packet>,
    pub cnps: usize,
    pub a_ip: IpAddr,
    pub b_ip: IpAddr,
    /// Resends an ACK timer left running from an acknowledged exchange set off
    /// early: they, and the answers only they drew, are not in `reqs` and
    /// `resps` (whether a run has one depends on how long its steps took), and
    /// only `ack_timeout` judges them.
    pub early: Vec<recovery::EarlyTimerResend>,
    /// Resends the ACK timer sent while the answer to the transmission before
    /// was on its way (the responder answered later than the timeout; in the
    /// lab, a VM the host stalled): they, and the answers only they drew, are
    /// not in `reqs` and `resps` either.
    pub crossed: Vec<recovery::CrossedResend>,
}

impl Pair<'_> {
    /// The frames set aside as the timer's story rather than the wire's: every
    /// early or crossed resend and the answers only it drew, with whether the
    /// resend run holds one of `keep`'s frames (a probe's copies are the
    /// prober's, never a timer's).
    pub(crate) fn set_aside(&self, keep: &HashSet<u64>) -> HashSet<u64> {
        let early = self.early.iter().map(|e| (&e.frames, &e.answers));
        let crossed = self.crossed.iter().map(|c| (&c.frames, &c.answers));
        early
            .chain(crossed)
            .filter(|(frames, _)| !frames.iter().any(|n| keep.contains(n)))
            .flat_map(|(frames, answers)| frames.iter().chain(answers))
            .copied()
            .collect()
    }
}

impl Pair<'_> {
    pub(crate) fn go_back_n(&self) -> recovery::GoBackN {
        let r: Vec<recovery::Packet> = self.reqs.iter().map(|p| p.recovery()).collect();
        let s: Vec<recovery::Packet> = self.resps.iter().map(|p| p.recovery()).collect();
        recovery::go_back_n(&r, &s)
    }

    /// Requests whose PSN went out before: retransmissions.
    pub(crate) fn retransmissions(&self) -> u64 {
        let mut seen = HashSet::new();
        self.reqs.iter().filter(|f| !seen.insert(f.psn.value())).count() as u64
    }

    pub(crate) fn rnr_waits(&self) -> Vec<recovery::RnrWait> {
        let r: Vec<recovery::Packet> = self.reqs.iter().map(|p| p.recovery()).collect();
        let s: Vec<recovery::Packet> = self.resps.iter().map(|p| p.recovery()).collect();
        recovery::rnr_waits(&r, &s)
    }
}

/// Every frame of QP `q`'s traffic from endpoint `from` to `to`, in capture
/// order, as the switch saw it: what [`Pair`] and the wire snapshot are both
/// read from. `None` when an end was never set up.
pub(crate) struct Direction<'a> {
    /// What `from`'s QP sent to the peer's, the switch's copies and injections
    /// included. A frame whose opcode the table does not know goes with the
    /// requests of its direction (a crafted undefined opcode is a request, and a
    /// response must be one we know).
    pub reqs: Vec<&'a Packet>,
    /// Everything the peer's QP sent back to `from`'s: its responses, CNPs, and
    /// its own requests (the other direction's).
    pub back: Vec<&'a Packet>,
    pub a_ip: IpAddr,
    pub b_ip: IpAddr,
    /// `from`'s QP's starting send PSN, as its agent reported it.
    pub first_psn: Option<dissector::wire::Psn>,
}

pub(crate) fn direction<'a>(
    o: &Evidence,
    q: &Qp,
    from: &str,
    to: &str,
    t: &'a Timeline,
) -> Option<Direction<'a>> {
    let ident = |ep: &str| -> Option<(IpAddr, &crate::protocol::QpInfo)> {
        let f = o.endpoints.get(ep)?;
        Some((f.ip.parse().ok()?, f.qps.iter().find(|x| x.name == q.name)?))
    };
    let ((a_ip, a), (b_ip, b)) = (ident(from)?, ident(to)?);
    let reqs = t
        .packets
        .iter()
        .filter(|f| {
            f.src == Some(a_ip)
                && f.dst == Some(b_ip)
                && f.dest_qp == b.qpn
                && (f.is_request || f.op.is_empty())
        })
        .collect();
    let back = t
        .packets
        .iter()
        .filter(|f| f.src == Some(b_ip) && f.dst == Some(a_ip) && f.dest_qp == a.qpn)
        .collect();
    let first_psn = Some(dissector::wire::Psn::new(a.psn));
    Some(Direction { reqs, back, a_ip, b_ip, first_psn })
}

impl<'a> Direction<'a> {
    /// The responses back, CNPs left out.
    pub(crate) fn responses(&self) -> impl Iterator<Item = &'a Packet> + '_ {
        self.back.iter().copied().filter(|f| !f.is_request && !f.op.is_empty() && !f.cnp)
    }

    /// The pair as the judge reads it, of QP `q`: copies the switch made are left
    /// out (they are nobody's retransmissions), frames it dropped stay in (they
    /// were sent), and early and crossed ACK-timer resends are set aside
    /// ([`Pair::early`], [`Pair::crossed`]).
    pub(crate) fn pair(&self, q: &Qp) -> Pair<'a> {
        let own = |f: &&Packet| !f.marks.injected();
        let reqs: Vec<&Packet> = self.reqs.iter().copied().filter(own).collect();
        let resps: Vec<&Packet> = self.responses().filter(own).collect();
        let cnps = self.back.iter().filter(|f| f.cnp).count();
        let (early, crossed) = match q.ack_timeout_ns() {
            Some(tto) => {
                let r: Vec<recovery::Packet> = reqs.iter().map(|p| p.recovery()).collect();
                let s: Vec<recovery::Packet> = resps.iter().map(|p| p.recovery()).collect();
                recovery::timer_resends(&r, &s, one_timer_interval(tto), ACK_TIMER_MARGIN_NS)
            }
            None => (Vec::new(), Vec::new()),
        };
        let mut p = Pair { reqs, resps, cnps, a_ip: self.a_ip, b_ip: self.b_ip, early, crossed };
        let aside = p.set_aside(&HashSet::new());
        if !aside.is_empty() {
            p.reqs.retain(|f| !aside.contains(&f.number));
            p.resps.retain(|f| !aside.contains(&f.number));
        }
        p
    }
}

/// QP `q`'s traffic from endpoint `from` to `to` as the judge reads it
/// ([`Direction::pair`]): `None` when an end was never set up.
pub(crate) fn pair<'a>(
    o: &Evidence,
    q: &Qp,
    from: &str,
    to: &str,
    t: &'a Timeline,
) -> Option<Pair<'a>> {
    Some(direction(o, q, from, to, t)?.pair(q))
}

/// The times one interval of an ACK timer of `tto` ns can take, as the lab's
/// switch sees them ([`ACK_TIMER_SLACK`], [`ACK_TIMER_MARGIN_NS`]).
fn one_timer_interval(tto: u64) -> std::ops::RangeInclusive<u64> {
    let slack = tto / ACK_TIMER_SLACK + ACK_TIMER_MARGIN_NS;
    tto.saturating_sub(slack)..=tto + slack
}

/// The ACK-timer check allows 1/20 (5 %) of the local ACK timeout for clocks, and
/// [`ACK_TIMER_MARGIN_NS`] on top, on both sides of its window.
const ACK_TIMER_SLACK: u64 = 20;
/// What the lab's observation point cannot resolve: both transmissions are timed
/// where the switch receives them, not in the requester, so each carries the
/// latency of its VM's transmit path (a TCG vCPU and qemu's main loop, which host
/// load delays by milliseconds: an original held up 1.5 ms longer than its resend
/// shortens the interval seen by as much); and a kernel timer runs in ticks, firing
/// up to one tick (4 ms at Debian's HZ=250) before the interval it was set for
/// (rxe sets `jiffies + usecs_to_jiffies(timeout)`). With 5 % alone, timeout 12
/// (16.78 ms) failed 2 runs in 10 of the whole suite while the host compiled; the
/// margin covers one tick and as much again of path latency. It is also how
/// long before an early timer resend an ACK of its PSN may be recorded and still
/// not have reached the requester ([`recovery::early_timer_resends`]).
const ACK_TIMER_MARGIN_NS: u64 = 8_000_000;

const LOOPBACK: &str = "both QPs are on the same rxe device: their traffic is looped back inside the driver and never reaches the wire";

fn matches(patterns: &[Pattern], packets: &[&Packet], conditions: &[String]) -> bool {
    pattern::matches_sequence(patterns, packets, &|p, x| {
        p.matches(x.op, x.ack_class(), &|c| Timeline::holds(conditions, x.held, c))
    })
}

fn wire(sc: &Scenario, e: &WireExpect, o: &Evidence, t: &Timeline) -> Verdict {
    let what = format!("wire of QP {} from {}", e.qp, e.from);
    let Some(q) = sc.qps.iter().find(|q| q.name == e.qp) else {
        return Verdict::new(
            VerdictKind::Wire,
            what,
            false,
            "a QP of the scenario".into(),
            format!("no QP {}", e.qp),
        );
    };
    let Some(d) = direction(o, q, &e.from, q.peer_of(&e.from), t) else {
        return Verdict::new(
            VerdictKind::Wire,
            what,
            false,
            "both ends set up".into(),
            "an end of the QP was never set up".into(),
        );
    };
    let p = d.pair(q);
    if e.empty {
        return empty_wire(what, &p);
    }
    let s = WireSeen::of(p, q, &t.conditions, (d.first_psn, o.asked_ns.get(&e.from).copied()));
    let checks = [
        pattern_checks(e, &s),
        psn_checks(e, &s),
        nak_checks(e, &s),
        retransmission_checks(e, &s),
        icrc_checks(e, &s),
        recovery_checks(e, &s),
        ack_timer_checks(e, q, &s),
        cnp_checks(e, &s),
    ]
    .concat();
    let ok = checks.iter().all(|(_, ok)| *ok);
    let want: Vec<&str> = checks.iter().map(|(w, _)| w.as_str()).collect();
    let mut v = Verdict::new(VerdictKind::Wire, what, ok, want.join("; "), s.actual(e));
    // An expectation of several items says which of them failed: the rest held.
    let failed = failed_items(&checks);
    if s.p.reqs.is_empty() && s.p.resps.is_empty() && s.p.a_ip == s.p.b_ip {
        v.detail = Some(failed.map_or(LOOPBACK.into(), |f| format!("{f}; {LOOPBACK}")));
    } else {
        v.detail = failed;
    }
    v
}

/// Of an expectation's items, the ones that failed, when some did and some
/// held: `failed: NAKs psn_sequence_error (the other 2 items held)`.
pub(crate) fn failed_items(checks: &[(String, bool)]) -> Option<String> {
    let failed: Vec<&str> = checks.iter().filter(|(_, ok)| !ok).map(|(w, _)| w.as_str()).collect();
    let held = checks.len() - failed.len();
    if failed.is_empty() || held == 0 {
        return None;
    }
    let others = if held == 1 {
        "the other item held".to_string()
    } else {
        format!("the other {held} items held")
    };
    Some(format!("failed: {} ({others})", failed.join("; ")))
}

/// `empty = true`: nothing on the wire of the QP direction `p`.
fn empty_wire(what: String, p: &Pair) -> Verdict {
    let n = p.reqs.len() + p.resps.len();
    let mut v = Verdict::new(
        VerdictKind::Wire,
        what,
        n == 0,
        "nothing on the wire".into(),
        format!("{n} frames"),
    );
    if p.a_ip == p.b_ip {
        v.detail = Some(LOOPBACK.into());
    }
    v
}

/// A QP direction's wire, and the facts of it that `[[expect.wire]]` is judged on.
struct WireSeen<'a> {
    p: Pair<'a>,
    /// The NAKs the responder sent, in order, and how many of them were RNR NAKs.
    naks: Vec<NakKind>,
    rnr: u64,
    retx: u64,
    bad_icrc: usize,
    ce_marked: usize,
    gbn: recovery::GoBackN,
    waits: Vec<recovery::RnrWait>,
    /// The QP's local ACK timeout in ns (none: timeout 0, it never fires).
    tto: Option<u64>,
    /// The timeline's header conditions, for the patterns' `{…}`.
    conditions: &'a [String],
    /// The requester QP's starting PSN, as its agent reported it.
    first_psn: Option<dissector::wire::Psn>,
    /// When the requester's endpoint was first asked for a step, on the
    /// capture's clock ([`Evidence::asked_ns`]): its QPs armed no timer before.
    asked_ns: Option<u64>,
}

impl<'a> WireSeen<'a> {
    /// The facts of `p`, the wire of one direction of QP `q`.
    fn of(
        p: Pair<'a>,
        q: &Qp,
        conditions: &'a [String],
        (first_psn, asked_ns): (Option<dissector::wire::Psn>, Option<u64>),
    ) -> Self {
        let naks: Vec<NakKind> =
            p.resps.iter().filter_map(|f| f.ack.and_then(|a| a.nak())).collect();
        WireSeen {
            rnr: naks.iter().filter(|x| **x == NakKind::Rnr).count() as u64,
            naks,
            retx: p.retransmissions(),
            bad_icrc: p.reqs.iter().chain(&p.resps).filter(|f| f.icrc_ok == Some(false)).count(),
            ce_marked: p.reqs.iter().filter(|f| f.ce).count(),
            gbn: p.go_back_n(),
            waits: p.rnr_waits(),
            tto: q.ack_timeout_ns(),
            conditions,
            first_psn,
            asked_ns,
            p,
        }
    }

    /// The resends the requester's ACK timer triggered.
    fn timeouts(&self) -> Vec<&recovery::Resend> {
        self.gbn.resends.iter().filter(|r| r.trigger == recovery::Trigger::Timeout).collect()
    }

    /// For `r`, the `n`-th ACK-timer resend (from 0), how long after the
    /// requester was first asked for a step it reached the switch, when that is
    /// long enough for `n + 1` firings of the timer ([`firing_gap`]) and no
    /// resend before it was set off by anything else: then, however soon after
    /// its PSN's last transmission the switch saw it, the timer did not fire
    /// early; that transmission was held on its way (the sending VM's path,
    /// which host load delays by milliseconds). The timer cannot have been armed
    /// before the ask, and each firing is a full interval after the one before.
    fn held_transmission(&self, n: usize, r: &recovery::Resend) -> Option<u64> {
        let (tto, asked) = (self.tto?, self.asked_ns?);
        let leading =
            self.gbn.resends.iter().take_while(|x| x.trigger == recovery::Trigger::Timeout);
        if !leading.take(n + 1).any(|x| x.frame == r.frame) {
            return None;
        }
        let f = self.p.reqs.iter().find(|f| f.number == r.frame)?.recovery();
        let since = f.ts_ns.saturating_sub(f.held_ns).checked_sub(asked)?;
        (since >= (n as u64 + 1) * firing_gap(tto)).then_some(since)
    }

    /// What the wire showed, for the verdict: the frames, NAKs, retransmissions,
    /// bad ICRCs, how it recovered, and the span of frame numbers.
    fn actual(&self, e: &WireExpect) -> String {
        let p = &self.p;
        let names =
            |v: &[&Packet]| -> Vec<String> { v.iter().map(|f| f.response_name()).collect() };
        let numbers = p.reqs.iter().chain(&p.resps).map(|f| f.number);
        let span = match (numbers.clone().min(), numbers.max()) {
            (Some(a), Some(b)) => format!("{a}–{b}"),
            _ => "none".into(),
        };
        format!(
            "requests [{}]; responses [{}]; {} NAKs ({} RNR), {} retransmissions, {} bad ICRCs{}; frames {span}",
            names_or_counts(&names(&p.reqs)),
            names_or_counts(&names(&p.resps)),
            self.naks.len(),
            self.rnr,
            self.retx,
            self.bad_icrc,
            self.recovery_details(e),
        )
    }

    /// How the wire recovered, each part after a `; `: the resends, RNR waits,
    /// ACK-timer resends, redundant resends, the NAK's latency, CE and CNPs, and
    /// where go-back-N broke, as far as there are any.
    fn recovery_details(&self, e: &WireExpect) -> String {
        let (gbn, p) = (&self.gbn, &self.p);
        let mut extra = String::new();
        if e.psns.is_some() {
            extra += &format!("; request PSNs {}", headers::list(&headers::first_sent(&p.reqs)));
        }
        if e.response_psns.is_some() {
            extra += &format!("; response PSNs {}", headers::list(&headers::first_sent(&p.resps)));
        }
        if let (Some(f), true) = (self.first_psn, e.psns.is_some() || e.response_psns.is_some()) {
            extra += &format!(" (the QP started at {f})");
        }
        if !gbn.resends.is_empty() {
            let r: Vec<String> = gbn
                .resends
                .iter()
                .map(|r| format!("PSN {} {:.1} ms after {}", r.psn, ms(r.after_ns), r.trigger))
                .collect();
            extra += &format!("; resends: {}", first_of(&r));
        }
        if !self.waits.is_empty() {
            let w: Vec<String> = self
                .waits
                .iter()
                .map(|w| format!("{} of {}", us_or_ms(w.waited_us), us_or_ms(w.timer_us)))
                .collect();
            extra += &format!("; RNR waits (waited of asked): {}", w.join(", "));
        }
        let timeouts = self.timeouts();
        if let (Some(t), false) = (self.tto, timeouts.is_empty()) {
            let r: Vec<String> =
                timeouts.iter().map(|r| format!("{:.2}×", r.after_ns as f64 / t as f64)).collect();
            extra += &format!(
                "; ACK-timer resends at {} the local ACK timeout ({:.2} ms)",
                first_of(&r),
                ms(t)
            );
            let low = *one_timer_interval(t).start();
            let held: Vec<String> = timeouts
                .iter()
                .enumerate()
                .filter(|(_, r)| r.after_ns < low)
                .filter_map(|(n, r)| Some((r, self.held_transmission(n, r)?)))
                .map(|(r, since)| {
                    format!("frame {} {:.2} ms after it was asked", r.frame, ms(since))
                })
                .collect();
            if !held.is_empty() {
                extra += &format!(
                    " (sooner than the timer after the last transmission, not after the post: that transmission was held on its way; {})",
                    first_of(&held)
                );
            }
        }
        if let Some(first) = p.early.first() {
            extra += &format!(
                "; {} early ACK-timer resends set aside (a timer left running from an acknowledged exchange; first: {first}{})",
                p.early.len(),
                match first.answers.len() {
                    0 => String::new(),
                    n => format!(", with the {n} answers it drew"),
                }
            );
        }
        if let Some(first) = p.crossed.first() {
            extra += &format!(
                "; {} ACK-timer resends that crossed a late answer set aside (the responder answered after the timeout; first: {first}, with the {} answers it drew)",
                p.crossed.len(),
                first.answers.len()
            );
        }
        if let Some(first) = gbn.redundant.first() {
            extra += &format!(
                "; {} redundant resends (of PSNs acknowledged on the wire before; first: {first})",
                gbn.redundant.len()
            );
        }
        if let Some(n) = gbn.nak_latency_ns {
            extra += &format!("; NAK {:.2} ms after the out-of-order request", ms(n));
        }
        if e.cnp.is_some() || self.ce_marked > 0 || p.cnps > 0 {
            extra += &format!("; {} CE-marked requests, {} CNPs", self.ce_marked, p.cnps);
        }
        if e.go_back_n && !gbn.violations.is_empty() {
            let v: Vec<String> = gbn.violations.iter().map(|v| v.to_string()).collect();
            extra += &format!("; go-back-N broken: {}", first_of(&v));
        }
        extra
    }
}

// Each `…_checks` below: what one kind of `[[expect.wire]]` asks, as far as the
// expectation asks it, and whether the wire gave it.

/// The requests' and the responses' sequences, against their patterns.
fn pattern_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    let mut c = Vec::new();
    if let Some(pat) = &e.sequence {
        let ok = matches(pat, &s.p.reqs, s.conditions);
        c.push((format!("requests [{}]", pattern::describe(pat)), ok));
    }
    if let Some(pat) = &e.responses {
        let ok = matches(pat, &s.p.resps, s.conditions);
        c.push((format!("responses [{}]", pattern::describe(pat)), ok));
    }
    c
}

/// The PSNs of the requests and of the responses, each once in the order first
/// sent.
fn psn_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    let mut c = Vec::new();
    if let Some(want) = &e.psns {
        c.push(headers::psns_check("request", want, &headers::first_sent(&s.p.reqs), s.first_psn));
    }
    if let Some(want) = &e.response_psns {
        let actual = headers::first_sent(&s.p.resps);
        c.push(headers::psns_check("response", want, &actual, s.first_psn));
    }
    c
}

/// The NAKs sent, and how many RNR NAKs.
fn nak_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    let mut c = Vec::new();
    if let Some(n) = &e.naks {
        let want = format!("NAKs {}", n.iter().map(|k| k.key()).collect::<Vec<_>>().join(", "));
        c.push((want, n.iter().all(|x| s.naks.contains(x))));
    }
    if let Some(m) = e.min_rnr_naks {
        c.push((format!("≥ {m} RNR NAKs"), s.rnr >= m));
    }
    if let Some((lo, hi)) = e.rnr_naks {
        let want = if hi == u64::MAX {
            format!("≥ {lo} RNR NAKs")
        } else {
            format!("{lo} to {hi} RNR NAKs")
        };
        c.push((want, (lo..=hi).contains(&s.rnr)));
    }
    c
}

/// How many requests were retransmissions: exactly, or at most.
fn retransmission_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    let mut c = Vec::new();
    if let Some(r) = e.retransmissions {
        c.push((format!("{r} retransmissions"), s.retx == r));
    }
    if let Some(r) = e.max_retransmissions {
        c.push((format!("at most {r} retransmissions"), s.retx <= r));
    }
    c
}

/// Every ICRC valid, or a bad one.
fn icrc_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    match e.icrc_valid {
        Some(true) => vec![("ICRCs valid".into(), s.bad_icrc == 0)],
        Some(false) => vec![("a bad ICRC".into(), s.bad_icrc > 0)],
        None => Vec::new(),
    }
}

/// Go-back-N recovery, how soon each resend came, and each RNR NAK's timer
/// waited out.
fn recovery_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    let (mut c, gbn) = (Vec::new(), &s.gbn);
    if e.go_back_n {
        c.push(("go-back-N recovery".into(), gbn.violations.is_empty()));
    }
    if let Some(limit) = e.retransmit_within_ms {
        let ok =
            !gbn.resends.is_empty() && gbn.resends.iter().all(|r| ms(r.after_ns) <= limit as f64);
        c.push((format!("each resend within {limit} ms"), ok));
    }
    if e.rnr_timer_honoured {
        let ok = !s.waits.is_empty() && s.waits.iter().all(|w| w.honoured());
        c.push(("each RNR NAK's timer waited out".into(), ok));
    }
    c
}

/// Each resend after the ACK timer came when QP `q`'s local ACK timeout says.
fn ack_timer_checks(e: &WireExpect, q: &Qp, s: &WireSeen) -> Vec<(String, bool)> {
    if !e.ack_timeout {
        return Vec::new();
    }
    let Some(t) = s.tto else {
        return vec![("an ACK timer (timeout 0 never fires)".into(), false)];
    };
    let low = *one_timer_interval(t).start();
    let high = 4 * t + 4 * t / ACK_TIMER_SLACK + ACK_TIMER_MARGIN_NS;
    let timeouts = s.timeouts();
    let mut want = format!("each resend after the ACK timer {:.2}–{:.2} ms after the last transmission (timeout {}: 1 to 4 times {:.2} ms, ± 5 % and {} ms that the switch cannot resolve)", ms(low), ms(high), q.params.timeout, ms(t), ACK_TIMER_MARGIN_NS / 1_000_000);
    if s.asked_ns.is_some() {
        want += &format!(", or sooner only after a transmission held on its way: the n-th at least n × {:.2} ms after {} was first asked for a step", ms(firing_gap(t)), e.from);
    }
    // An early resend is a timer resend that came too soon.
    let ok = !timeouts.is_empty()
        && timeouts.iter().enumerate().all(|(n, r)| {
            r.after_ns <= high && (r.after_ns >= low || s.held_transmission(n, r).is_some())
        })
        && s.p.early.is_empty();
    vec![(want, ok)]
}

/// The least time between two firings of an ACK timer of `tto` ns, or from the
/// moment it was armed to its first: the timeout, less 5 % for clocks and one
/// kernel tick ([`TIMER_TICK_NS`]). Unlike [`one_timer_interval`], nothing of
/// the path to the switch: a resend reaches the switch after its timer fired.
fn firing_gap(tto: u64) -> u64 {
    tto.saturating_sub(tto / ACK_TIMER_SLACK + TIMER_TICK_NS)
}

/// How early a kernel timer may fire: one tick at Debian's HZ=250 (rxe sets
/// `jiffies + usecs_to_jiffies(timeout)`, counted from within a tick).
const TIMER_TICK_NS: u64 = 4_000_000;

/// A CNP after CE-marked requests, or none at all.
fn cnp_checks(e: &WireExpect, s: &WireSeen) -> Vec<(String, bool)> {
    let Some(cnp) = e.cnp else { return Vec::new() };
    let (want, ok) = if cnp {
        ("a CNP after CE".to_string(), s.ce_marked > 0 && s.p.cnps > 0)
    } else {
        ("no CNP".to_string(), s.p.cnps == 0)
    };
    vec![(want, ok)]
}

/// Nanoseconds in milliseconds.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// How many items a verdict lists before it counts instead: a stream's wire has
/// tens of thousands.
const LISTED: usize = 24;

/// Frame names in order, or for a long run how many of each: `2512: RDMA WRITE
/// First ×900, RDMA WRITE Last ×900, RDMA WRITE Only ×712`.
fn names_or_counts(names: &[String]) -> String {
    if names.len() <= LISTED {
        return names.join(", ");
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for n in names {
        match counts.iter_mut().find(|(m, _)| *m == n.as_str()) {
            Some(c) => c.1 += 1,
            None => counts.push((n.as_str(), 1)),
        }
    }
    let c: Vec<String> = counts.iter().map(|(n, k)| format!("{n} ×{k}")).collect();
    format!("{}: {}", names.len(), c.join(", "))
}

/// The first items of a list, and how many more.
fn first_of(items: &[String]) -> String {
    if items.len() <= LISTED {
        return items.join(", ");
    }
    format!("{}, … and {} more", items[..LISTED].join(", "), items.len() - LISTED)
}

/// `850 ns`, `12.4 µs`, `1.28 ms`, `2.05 s`.
pub(crate) fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// `40 µs`, `1.28 ms`.
pub(crate) fn us_or_ms(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else {
        format!("{:.2} ms", us as f64 / 1000.0)
    }
}

/// How many of a stream's messages completed, against how many must have.
fn stream(e: &StreamExpect, o: &Evidence) -> Verdict {
    let what = format!("stream {} on {}", e.id, e.on);
    let expected = format!("{} messages completed successfully", e.completed);
    let Some(r) = o.streams.iter().find(|s| s.report.id == e.id && s.on == e.on).map(|s| &s.report)
    else {
        return Verdict::new(
            VerdictKind::Stream,
            what,
            false,
            expected,
            "never ran (the run stopped before)".into(),
        );
    };
    let mut actual = format!("{} of {} completed", r.completed, r.count);
    if let Some(f) = &r.failed {
        actual.push_str(&format!(
            "; first failure: message {} on QP {}: {}",
            f.wr_id, f.qp, f.status
        ));
    }
    if r.timed_out {
        actual.push_str(&format!("; out of time with {} posted", r.posted));
    }
    let mut ok = r.completed == e.completed;
    // A SEND stream: what its peer received, each message checked as it came.
    if let Some(rx) =
        o.streams.iter().find(|s| s.report.id == e.id && s.report.verb == StreamVerb::Receive)
    {
        let got = &rx.report;
        actual.push_str(&format!("; {} received {} of {}", rx.on, got.completed, got.count));
        let imm = r.verb == StreamVerb::WriteImm;
        match &got.mismatch {
            None if got.completed > 0 && imm => {
                actual.push_str(", each with its index as its immediate")
            }
            None if got.completed > 0 => actual.push_str(", each as seeded"),
            None => {}
            Some(m) if imm => actual.push_str(&format!(
                ", message {}'s immediate: expected {}, found {}",
                m.message,
                hex(&m.want),
                if m.got.is_empty() { "none".into() } else { hex(&m.got) }
            )),
            Some(m) => actual.push_str(&format!(
                ", message {} differs at its byte {}: expected {}, found {}",
                m.message,
                m.offset,
                hex(&m.want),
                hex(&m.got)
            )),
        }
        if let Some(f) = &got.failed {
            actual.push_str(&format!(
                "; its receive of message {} on QP {}: {}",
                f.wr_id, f.qp, f.status
            ));
        }
        ok &= got.completed == e.completed && got.mismatch.is_none();
    }
    // Atomics: each saw the word one add further than the one before.
    let mut expected = expected;
    if let Some(chain) = &r.atomics {
        expected.push_str(", each atomic's old value one add past another's (every add ran once)");
        match &chain.first_break {
            None => actual.push_str(&format!(
                "; the {} old values chain, so the word ends at {}",
                chain.checked, chain.end
            )),
            Some(b) => {
                actual.push_str(&format!("; the old values break: {b}"));
                ok = false;
            }
        }
    }
    Verdict::new(VerdictKind::Stream, what, ok, expected, actual)
}

/// A stream's messages in memory, as the endpoint that holds them checked them.
fn stream_memory(e: &MemoryExpect, id: &str, o: &Evidence, what: String) -> Verdict {
    let expected = format!("every message of stream {id} as seeded");
    let Some(v) = o
        .verified
        .iter()
        .find(|v| v.on == e.on && v.mr == e.mr && v.stream == id)
        .map(|v| &v.result)
    else {
        return Verdict::new(
            VerdictKind::Memory,
            what,
            false,
            expected,
            "never checked (the run stopped before)".into(),
        );
    };
    match &v.mismatch {
        None => Verdict::new(
            VerdictKind::Memory,
            what,
            true,
            expected,
            format!(
                "all {} messages ({} bytes) as seeded; digest {}",
                v.messages,
                v.bytes,
                v.digest.as_deref().unwrap_or("-")
            ),
        ),
        Some(m) => Verdict::new(
            VerdictKind::Memory,
            what,
            false,
            expected,
            format!(
                "message {} of {} differs at offset {} (MR offset {}): expected {}, found {}",
                m.message,
                v.messages,
                m.offset,
                e.offset + m.offset,
                hex(&m.want),
                hex(&m.got)
            ),
        ),
    }
}

/// Bytes as spaced hex: `de ad be ef`.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

/// Nothing outside MR `mr` of `on` changed: its guard regions still hold their
/// canary.
fn outside(on: &str, mr: &str, o: &Evidence) -> Verdict {
    let what = format!("memory outside MR {mr} on {on}");
    let expected = format!("unchanged: the {GUARD} bytes on either side hold their canary");
    let Some(g) = o.guards.get(on).and_then(|m| m.get(mr)) else {
        return Verdict::new(
            VerdictKind::Memory,
            what,
            false,
            expected,
            "never read (the run stopped before)".into(),
        );
    };
    let side = |name: &str, d: &GuardDamage| {
        let at = match name {
            "before" => format!("{} byte(s) before its first", d.first + 1),
            _ => format!("{} byte(s) past its last", d.first + 1),
        };
        format!(
            "{} byte(s) changed {name} it, the nearest {at}: expected {}, found {}",
            d.changed,
            hex(&d.want),
            hex(&d.got)
        )
    };
    let found: Vec<String> = [("before", &g.before), ("after", &g.after)]
        .into_iter()
        .filter_map(|(name, d)| d.as_ref().map(|d| side(name, d)))
        .collect();
    let ok = found.is_empty();
    let found = if ok { "unchanged".to_string() } else { found.join("; ") };
    Verdict::new(VerdictKind::Memory, what, ok, expected, found)
}

fn memory(sc: &Scenario, e: &MemoryExpect, o: &Evidence) -> Verdict {
    let what = format!("memory of MR {} on {} at offset {}", e.mr, e.on, e.offset);
    if let Memory::Stream { id, .. } = &e.want {
        return stream_memory(e, id, o, what);
    }
    let Some(spec) = sc.mrs.iter().find(|m| m.on == e.on && m.name == e.mr) else {
        return Verdict::new(
            VerdictKind::Memory,
            what,
            false,
            "an MR of the scenario".into(),
            "no such MR".into(),
        );
    };
    let Some(now) = o.memory.get(&e.on).and_then(|m| m.get(&e.mr)) else {
        return Verdict::new(
            VerdictKind::Memory,
            what,
            false,
            "the MR's content".into(),
            "never read (the run stopped before)".into(),
        );
    };
    let off = e.offset as usize;
    let shown = |b: &[u8]| -> String {
        let text = b.iter().all(|c| c.is_ascii_graphic() || *c == b' ');
        if text && !b.is_empty() {
            format!("{:?}", String::from_utf8_lossy(b))
        } else {
            b.iter().take(48).map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
                + if b.len() > 48 { " …" } else { "" }
        }
    };
    match &e.want {
        Memory::Unchanged => {
            // From `offset` on, as the expectation says: bytes before it are not
            // this expectation's business (a UD receive's GRH area, say).
            let want = spec.initial_bytes();
            let ok = now.get(off..).is_some() && now.get(off..) == want.get(off..);
            Verdict::new(
                VerdictKind::Memory,
                what,
                ok,
                format!("unchanged: {}", shown(&want[off.min(want.len())..])),
                shown(&now[off.min(now.len())..]),
            )
        }
        Memory::Equals(c) => {
            let want = c.bytes(now.len().saturating_sub(off));
            let got = now.get(off..off + want.len()).unwrap_or(&[]);
            Verdict::new(
                VerdictKind::Memory,
                what,
                got == want.as_slice(),
                shown(&want),
                shown(got),
            )
        }
        Memory::Stream { id, .. } => stream_memory(e, id, o, what),
        Memory::ProbeWritesLanded => Verdict::new(
            VerdictKind::Memory,
            what,
            false,
            "judged from the wire".into(),
            "judged without it".into(),
        ),
    }
}

#[cfg(test)]
mod tests;
