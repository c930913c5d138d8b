//! What this setup did, in terms that stay the same from run to run on the same
//! setup (no times, no addresses): each completion's status, the answer to each
//! probe, and per QP direction the NAKs drawn, how lost packets were recovered,
//! whether CE drew a CNP and whether the RNR timer was waited out; how each stream
//! ended. A device profile
//! records these; `--profile` compares them.
//!
//! Owns: [`observations`]. Imports: `super::timeline`, `super::probes` and
//! `super::pair` (and its `Pair`); the results' outcome, the scenario model, the
//! verbs' completion names, dissector's ACK and NAK kinds.
use std::collections::{BTreeMap, BTreeSet};

use dissector::wire::{AckClass, AckKind, NakKind};

use super::probes::ProbeAnswer;
use super::timeline::Timeline;
use super::Pair;
use crate::results::Evidence;
use crate::scenario::model::{Action, PsnAt, Qp, Scenario, Step, Verb};
use crate::vocab::{WcOpcode, WcStatus};

/// The observations of one run; the wire's only when there is a readable capture.
pub(crate) fn observations(
    sc: &Scenario,
    o: &Evidence,
    wire: Option<(&Timeline, &[ProbeAnswer])>,
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    stream_endings(o, &mut m);
    completions(sc, o, &mut m);
    let Some((t, answers)) = wire else { return m };
    probe_answers(answers, &mut m);
    for q in &sc.qps {
        if paced_by_the_run(sc, q) {
            continue;
        }
        for (from, to) in [(&q.between[0], &q.between[1]), (&q.between[1], &q.between[0])] {
            let Some(p) = super::pair(o, q, from, to, t) else { continue };
            if p.reqs.is_empty() {
                continue;
            }
            for (what, v) in direction(sc, o, q, from, &p) {
                m.insert(format!("wire {} from {from}: {what}", q.name), v);
            }
        }
    }
    m
}

/// How each stream ended (its numbers are times: not observations).
fn stream_endings(o: &Evidence, m: &mut BTreeMap<String, String>) {
    for st in &o.streams {
        let r = &st.report;
        let v = match &r.failed {
            None if r.completed == r.count => "all completed".to_string(),
            None => format!("{} of {} completed", r.completed, r.count),
            Some(f) => format!("{} of {} completed, then {}", r.completed, r.count, f.status),
        };
        m.insert(format!("stream {} on {}", r.id, st.on), v);
    }
}

/// The observation of the status of `ep`'s completion of `wr_id` (the first).
pub(crate) fn completion_key(ep: &str, wr_id: u64) -> String {
    format!("completion {ep} wr_id {wr_id}")
}

/// Each completion's status (the first of each `wr_id`), and how a receive
/// said that the peer's SEND with Invalidate invalidated.
fn completions(sc: &Scenario, o: &Evidence, m: &mut BTreeMap<String, String>) {
    for (ep, wcs) in &o.completions {
        let mut seen = BTreeSet::new();
        for w in wcs.iter().filter(|w| seen.insert(w.wr_id)) {
            m.insert(completion_key(ep, w.wr_id), w.status.to_string());
        }
        // Where the peer sent a SEND with Invalidate, how the receive said so:
        // the verbs API's IBV_WC_WITH_INV and the rkey, or not.
        let peer_sends_inv = sc
            .steps
            .iter()
            .any(|s| matches!(s, Step::Act { on, action: Action::Post { verb: Verb::SendInv { .. }, .. } } if on != ep));
        for w in wcs.iter().filter(|w| {
            peer_sends_inv && w.opcode == WcOpcode::RECV && w.status == WcStatus::SUCCESS
        }) {
            let v = match (&w.invalidated_mw, w.invalidated_rkey) {
                (Some(mw), _) => format!("IBV_WC_WITH_INV, the rkey of MW {mw}"),
                (None, Some(k)) => format!("IBV_WC_WITH_INV, rkey {k:#x}"),
                (None, None) => format!("no IBV_WC_WITH_INV (wc_flags {:#x})", w.flags),
            };
            m.insert(format!("completion {ep} wr_id {} invalidation", w.wr_id), v);
        }
    }
}

/// What answered each probe on the wire, and at which PSN.
fn probe_answers(answers: &[ProbeAnswer], m: &mut BTreeMap<String, String>) {
    for a in answers {
        let v = match (a.on_wire, a.responses.is_empty()) {
            (0, _) => "not on the wire".to_string(),
            (_, true) => "no answer".to_string(),
            _ => format!(
                "{} (PSN {})",
                a.responses.join(", "),
                a.psn_offset.map(|o| PsnAt::Next(o).to_string()).unwrap_or_default()
            ),
        };
        m.insert(format!("probe {}", a.id), v);
    }
}

/// Whether QP `q`'s wire is the run's rather than the device's: under a fault
/// with `prob`, which frames it hits depends on how the QPs' frames interleave,
/// run to run; a stream's wire (RNR NAKs as receives run out, resends when the
/// host stalls) depends on the pace of the run. The judge holds what followed
/// to its bounds, and the profile records how the streams ended.
pub(super) fn paced_by_the_run(sc: &Scenario, q: &Qp) -> bool {
    let random = sc
        .faults
        .iter()
        .any(|f| f.rule.prob.is_some() && f.qp.as_ref().is_none_or(|n| *n == q.name));
    let streamed =
        sc.steps.iter().any(|s| matches!(s, Step::Stream(st) if st.order.qps.contains(&q.name)));
    random || streamed
}

/// What QP `q`'s traffic `p` from endpoint `from` showed, by what it is about.
fn direction(
    sc: &Scenario,
    o: &Evidence,
    q: &Qp,
    from: &str,
    p: &Pair,
) -> Vec<(&'static str, String)> {
    let mut seen = vec![("NAKs", nak_classes(p))];
    if let Some(v) = resent_after(o, q, p) {
        seen.push(("resent after", v));
    }
    // Where the scenario leaves ICRCs to the profile: which frames had a
    // bad one (by operation).
    if sc.expect.wire.iter().any(|e| e.qp == q.name && e.from == from && e.icrc_valid.is_none()) {
        seen.push(("ICRCs", bad_icrcs(p)));
    }
    if p.reqs.iter().any(|f| f.ce) {
        seen.push(("CNP after CE", if p.cnps > 0 { "yes" } else { "no" }.into()));
    }
    if let Some(v) = rnr_nak_timers(p) {
        seen.push(("RNR NAK timer", v));
    }
    if let Some(v) = after_zero_credits(p) {
        seen.push(("after an ACK with 0 credits", v));
    }
    if let Some(v) = rnr_timer(p) {
        seen.push(("RNR timer", v));
    }
    seen
}

/// The kinds of NAK the responder sent, in the order they first came.
fn nak_classes(p: &Pair) -> String {
    let mut naks: Vec<AckClass> = Vec::new();
    for c in p
        .resps
        .iter()
        .filter(|f| f.ack.and_then(|a| a.nak()).is_some())
        .filter_map(|f| f.ack_class())
    {
        if !naks.contains(&c) {
            naks.push(c);
        }
    }
    let names: Vec<String> = naks.iter().map(AckClass::to_string).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// How lost requests were recovered, if any were: not asked of crafted requests
/// (their repeats are the probe's, not the requester's), nor after RNR NAKs (the
/// RNR timer says that).
fn resent_after(o: &Evidence, q: &Qp, p: &Pair) -> Option<String> {
    let probed = o.probes.iter().any(|x| x.qp == q.name && p.a_ip.to_string() == x.src);
    let rnr = p.resps.iter().any(|f| f.ack.and_then(|a| a.nak()) == Some(NakKind::Rnr));
    let how: BTreeSet<_> = p.go_back_n().resends.iter().map(|r| r.trigger).collect();
    (!how.is_empty() && !probed && !rnr)
        .then(|| how.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "))
}

/// Which frames had a bad ICRC, counted by operation.
fn bad_icrcs(p: &Pair) -> String {
    let mut bad: BTreeMap<String, usize> = BTreeMap::new();
    for f in p.reqs.iter().chain(&p.resps).filter(|f| f.icrc_ok == Some(false)) {
        *bad.entry(if f.op.is_empty() {
            format!("opcode {:#04x}", f.opcode.0)
        } else {
            f.op.to_string()
        })
        .or_default() += 1;
    }
    if bad.is_empty() {
        "all valid".to_string()
    } else {
        bad.iter().map(|(op, n)| format!("bad on {op} ×{n}")).collect::<Vec<_>>().join(", ")
    }
}

/// The wait each RNR NAK asked for (its 5-bit timer, IBA table 45): what the
/// responder's min_rnr_timer became on the wire; `None` without RNR NAKs.
fn rnr_nak_timers(p: &Pair) -> Option<String> {
    let mut asked: Vec<u32> =
        p.resps.iter().filter_map(|f| f.ack.and_then(|a| a.rnr_wait_us())).collect();
    asked.dedup();
    (!asked.is_empty()).then(|| {
        asked.iter().map(|us| format!("{} ms", *us as f64 / 1000.0)).collect::<Vec<_>>().join(", ")
    })
}

/// End-to-end credits (IBA 9.7.7.2): after an ACK that says 0, whether new
/// requests went out before an ACK gave credit back; `None` without such an ACK.
fn after_zero_credits(p: &Pair) -> Option<String> {
    let zero =
        p.resps.iter().find(|f| f.delivered() && f.ack == Some(AckKind::Ack { credits: 0 }))?;
    let back = p
        .resps
        .iter()
        .find(|f| {
            f.number > zero.number
                && f.delivered()
                && matches!(f.ack, Some(AckKind::Ack { credits }) if credits > 0)
        })
        .map(|f| f.number);
    let mut seen: BTreeSet<u32> =
        p.reqs.iter().filter(|f| f.number < zero.number).map(|f| f.psn.value()).collect();
    let new = p
        .reqs
        .iter()
        .filter(|f| f.number > zero.number && back.is_none_or(|b| f.number < b))
        .filter(|f| seen.insert(f.psn.value()))
        .count();
    Some(if new == 0 {
        "held new requests".to_string()
    } else {
        format!("sent {new} new requests on")
    })
}

/// Whether the requester waited out each RNR NAK's timer before resending, and
/// by how much it fell short where it did not; `None` without RNR waits.
fn rnr_timer(p: &Pair) -> Option<String> {
    let waits = p.rnr_waits();
    if waits.is_empty() {
        return None;
    }
    let short: Vec<String> = waits
        .iter()
        .filter(|w| !w.honoured())
        .map(|w| format!("{} µs of {} µs", w.waited_us, w.timer_us))
        .collect();
    Some(if short.is_empty() {
        "honoured".into()
    } else {
        format!("not honoured ({})", short.join(", "))
    })
}
