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
use std::net::IpAddr;

use dissector::flow::recovery;
use dissector::wire::NakKind;

use crate::protocol::stream::StreamVerb;
use crate::protocol::{Event, Wc};
use crate::results::{Outcome, Verdict, VerdictKind};
use crate::scenario::model::{
    CompletionExpect, EventExpect, Memory, MemoryExpect, Scenario, StreamExpect, WireExpect,
};
use crate::scenario::pattern::{self, Pattern};

pub(crate) mod observe;
pub(crate) mod pace;
pub(crate) mod probes;
pub(crate) mod profile;
pub(crate) mod timeline;

pub(crate) use timeline::{Packet, Timeline};

/// The capture of a run, decoded once, or why there is none.
pub(crate) fn wire_of(o: &Outcome) -> Result<Timeline, String> {
    match &o.capture {
        Some(p) => timeline::read(p),
        None => Err("no capture was recorded (the lab's switch records the wire; with --endpoints, give -i IFACE to capture on a host)".into()),
    }
}

/// Every expectation of `sc` judged on what happened and its wire, and what the
/// setup did (the observations a profile records).
pub(crate) fn judge(
    sc: &Scenario,
    o: &Outcome,
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
            completion(e, o.completions.get(&e.on).map(Vec::as_slice).unwrap_or(&[])),
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
    for e in &sc.expect.probe {
        push(probes::verdict(e, o, &answers), false);
    }
    for e in &sc.expect.memory {
        // Memory never read (the run stopped) is not a deviation either.
        let read = o.memory.get(&e.on).is_some_and(|m| m.contains_key(&e.mr));
        push(memory(sc, e, o), e.record_deviation && read);
    }
    for e in &sc.expect.event {
        push(event(e, o.events.get(&e.on).map(Vec::as_slice).unwrap_or(&[])), false);
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

fn describe(w: &Wc) -> String {
    // The opcode and length of a failed completion are undefined (ibv_poll_cq(3)).
    if w.status != crate::verbs::WcStatus::SUCCESS {
        return format!("wr_id {} {}", w.wr_id, w.status);
    }
    let mut s = format!("wr_id {} {} {} byte_len {}", w.wr_id, w.status, w.opcode, w.byte_len);
    if let Some(i) = w.imm_data {
        s.push_str(&format!(" imm_data {i:#x}"));
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
/// SRQ), exactly `count` of them or at least one.
pub(crate) fn event(e: &EventExpect, events: &[Event]) -> Verdict {
    let what = format!("events on {}", e.on);
    let about = e.srq.as_ref().map(|s| format!(" on SRQ {s}")).unwrap_or_default();
    let n =
        events.iter().filter(|x| x.kind == e.kind && (e.srq.is_none() || x.srq == e.srq)).count();
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

pub(crate) fn completion(e: &CompletionExpect, wcs: &[Wc]) -> Verdict {
    let which = match (e.wr_id, e.index) {
        (Some(id), _) => format!("completion of wr_id {id} on {}", e.on),
        (None, Some(i)) => format!("completion #{i} on {}", e.on),
        (None, None) => format!("completions on {}", e.on),
    };
    let mut want = Vec::new();
    want.extend(e.status.map(|s| s.to_string()));
    want.extend(e.opcode.map(|o| o.to_string()));
    want.extend(e.byte_len.map(|b| format!("byte_len {b}")));
    want.extend(e.imm_data.map(|i| format!("imm_data {i:#x}")));
    want.extend(e.invalidated.as_ref().map(|m| format!("invalidated the rkey of MW {m}")));
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
        && e.within_ms.is_none_or(|ms| w.t_ms <= ms as f64)
        && e.count.is_none_or(|c| wcs.len() == c);
    Verdict::new(
        VerdictKind::Completion,
        which,
        ok,
        want.join(", "),
        format!("{} at {:.1} ms", describe(w), w.t_ms),
    )
}

/// One direction of a QP pair on the wire: the requests `from` sent to its peer,
/// and the responses and CNPs back.
pub(crate) struct Pair<'a> {
    pub reqs: Vec<&'a Packet>,
    pub resps: Vec<&'a Packet>,
    pub cnps: usize,
    pub a_ip: IpAddr,
    pub b_ip: IpAddr,
}

impl Pair<'_> {
    pub(crate) fn go_back_n(&self) -> recovery::GoBackN {
        let r: Vec<recovery::Packet> = self.reqs.iter().map(|p| p.recovery()).collect();
        let s: Vec<recovery::Packet> = self.resps.iter().map(|p| p.recovery()).collect();
        recovery::go_back_n(&r, &s)
    }

    /// Requests whose PSN went out before: retransmissions.
    pub(crate) fn retransmissions(&self) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.reqs.iter().filter(|f| !seen.insert(f.psn.value())).count() as u64
    }

    pub(crate) fn rnr_waits(&self) -> Vec<recovery::RnrWait> {
        let r: Vec<recovery::Packet> = self.reqs.iter().map(|p| p.recovery()).collect();
        let s: Vec<recovery::Packet> = self.resps.iter().map(|p| p.recovery()).collect();
        recovery::rnr_waits(&r, &s)
    }
}

/// QP `qp`'s traffic from endpoint `from` to `to`: `None` when an end was never
/// set up.
pub(crate) fn pair<'a>(
    o: &Outcome,
    qp: &str,
    from: &str,
    to: &str,
    t: &'a Timeline,
) -> Option<Pair<'a>> {
    let ident = |ep: &str| -> Option<(IpAddr, u32)> {
        let f = o.endpoints.get(ep)?;
        Some((f.ip.parse().ok()?, f.qps.iter().find(|x| x.name == qp)?.qpn))
    };
    let ((a_ip, a_qpn), (b_ip, b_qpn)) = (ident(from)?, ident(to)?);
    // What each side sent: copies the switch made are left out (they are nobody's
    // retransmissions); frames it dropped stay in (they were sent).
    let reqs = t
        .packets
        .iter()
        .filter(|f| {
            f.src == Some(a_ip)
                && f.dst == Some(b_ip)
                && f.dest_qp == b_qpn
                && f.is_request
                && !f.marks.injected()
        })
        .collect();
    let back = |f: &&Packet| f.src == Some(b_ip) && f.dst == Some(a_ip) && f.dest_qp == a_qpn;
    let resps = t
        .packets
        .iter()
        .filter(|f| back(f) && !f.is_request && !f.cnp && !f.marks.injected())
        .collect();
    let cnps = t.packets.iter().filter(|f| back(f) && f.cnp).count();
    Some(Pair { reqs, resps, cnps, a_ip, b_ip })
}

/// The ACK-timer check allows 1/20 (5 %) short of the local ACK timeout: both
/// transmissions are timed at the switch, not in the requester, with the VMs'
/// scheduling between; and a kernel timer runs in ticks (rxe: 4 ms at HZ=250).
const ACK_TIMER_SLACK: u64 = 20;

const LOOPBACK: &str = "both QPs are on the same rxe device: their traffic is looped back inside the driver and never reaches the wire";

fn matches(patterns: &[Pattern], packets: &[&Packet]) -> bool {
    pattern::matches_sequence(patterns, packets, &|p, x| p.matches(x.op, x.ack_class()))
}

fn wire(sc: &Scenario, e: &WireExpect, o: &Outcome, t: &Timeline) -> Verdict {
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
    let Some(p) = pair(o, &e.qp, &e.from, q.peer_of(&e.from), t) else {
        return Verdict::new(
            VerdictKind::Wire,
            what,
            false,
            "both ends set up".into(),
            "an end of the QP was never set up".into(),
        );
    };
    let names = |v: &[&Packet]| -> Vec<String> { v.iter().map(|f| f.response_name()).collect() };
    let (req_names, resp_names) = (names(&p.reqs), names(&p.resps));
    if e.empty {
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
        return v;
    }
    let ce_marked = p.reqs.iter().filter(|f| f.ce).count();
    let mut want = Vec::new();
    let mut ok = true;
    if let Some(pat) = &e.sequence {
        want.push(format!("requests [{}]", pattern::describe(pat)));
        ok &= matches(pat, &p.reqs);
    }
    if let Some(pat) = &e.responses {
        want.push(format!("responses [{}]", pattern::describe(pat)));
        ok &= matches(pat, &p.resps);
    }
    let naks: Vec<NakKind> = p.resps.iter().filter_map(|f| f.ack.and_then(|a| a.nak())).collect();
    if let Some(n) = &e.naks {
        want.push(format!("NAKs {}", n.iter().map(|k| k.key()).collect::<Vec<_>>().join(", ")));
        ok &= n.iter().all(|x| naks.contains(x));
    }
    let rnr = naks.iter().filter(|x| **x == NakKind::Rnr).count() as u64;
    if let Some(m) = e.min_rnr_naks {
        want.push(format!("≥ {m} RNR NAKs"));
        ok &= rnr >= m;
    }
    let retx = p.retransmissions();
    if let Some((lo, hi)) = e.rnr_naks {
        want.push(if hi == u64::MAX {
            format!("≥ {lo} RNR NAKs")
        } else {
            format!("{lo} to {hi} RNR NAKs")
        });
        ok &= (lo..=hi).contains(&rnr);
    }
    if let Some(r) = e.retransmissions {
        want.push(format!("{r} retransmissions"));
        ok &= retx == r;
    }
    if let Some(r) = e.max_retransmissions {
        want.push(format!("at most {r} retransmissions"));
        ok &= retx <= r;
    }
    let bad_icrc = p.reqs.iter().chain(&p.resps).filter(|f| f.icrc_ok == Some(false)).count();
    match e.icrc_valid {
        Some(true) => {
            want.push("ICRCs valid".into());
            ok &= bad_icrc == 0;
        }
        Some(false) => {
            want.push("a bad ICRC".into());
            ok &= bad_icrc > 0;
        }
        None => {}
    }
    let gbn = p.go_back_n();
    if e.go_back_n {
        want.push("go-back-N recovery".into());
        ok &= gbn.violations.is_empty();
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    if let Some(limit) = e.retransmit_within_ms {
        want.push(format!("each resend within {limit} ms"));
        ok &= !gbn.resends.is_empty() && gbn.resends.iter().all(|r| ms(r.after_ns) <= limit as f64);
    }
    let waits = p.rnr_waits();
    if e.rnr_timer_honoured {
        want.push("each RNR NAK's timer waited out".into());
        ok &= !waits.is_empty() && waits.iter().all(|w| w.honoured());
    }
    let tto = q.ack_timeout_ns();
    let timeouts: Vec<&recovery::Resend> =
        gbn.resends.iter().filter(|r| r.trigger == recovery::Trigger::Timeout).collect();
    if e.ack_timeout {
        match tto {
            Some(t) => {
                let low = t - t / ACK_TIMER_SLACK;
                want.push(format!("each resend after the ACK timer {:.2}–{:.2} ms after the last transmission (timeout {}, less 5 %)", ms(low), ms(4 * t), q.params.timeout));
                ok &= !timeouts.is_empty()
                    && timeouts.iter().all(|r| (low..=4 * t).contains(&r.after_ns));
            }
            None => {
                want.push("an ACK timer (timeout 0 never fires)".into());
                ok = false;
            }
        }
    }
    if let Some(c) = e.cnp {
        want.push(if c { "a CNP after CE".to_string() } else { "no CNP".to_string() });
        ok &= if c { ce_marked > 0 && p.cnps > 0 } else { p.cnps == 0 };
    }
    let mut extra = String::new();
    if !gbn.resends.is_empty() {
        let r: Vec<String> = gbn
            .resends
            .iter()
            .map(|r| format!("PSN {} {:.1} ms after {}", r.psn, ms(r.after_ns), r.trigger))
            .collect();
        extra += &format!("; resends: {}", first_of(&r));
    }
    if !waits.is_empty() {
        let w: Vec<String> = waits
            .iter()
            .map(|w| format!("{} of {}", us_or_ms(w.waited_us), us_or_ms(w.timer_us)))
            .collect();
        extra += &format!("; RNR waits (waited of asked): {}", w.join(", "));
    }
    if let (Some(t), false) = (tto, timeouts.is_empty()) {
        let r: Vec<String> =
            timeouts.iter().map(|r| format!("{:.2}×", r.after_ns as f64 / t as f64)).collect();
        extra += &format!(
            "; ACK-timer resends at {} the local ACK timeout ({:.2} ms)",
            first_of(&r),
            ms(t)
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
    if e.cnp.is_some() || ce_marked > 0 || p.cnps > 0 {
        extra += &format!("; {ce_marked} CE-marked requests, {} CNPs", p.cnps);
    }
    if e.go_back_n && !gbn.violations.is_empty() {
        let v: Vec<String> = gbn.violations.iter().map(|v| v.to_string()).collect();
        extra += &format!("; go-back-N broken: {}", first_of(&v));
    }
    let numbers = p.reqs.iter().chain(&p.resps).map(|f| f.number);
    let span = match (numbers.clone().min(), numbers.max()) {
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "none".into(),
    };
    let actual = format!(
        "requests [{}]; responses [{}]; {} NAKs ({rnr} RNR), {retx} retransmissions, {bad_icrc} bad ICRCs{extra}; frames {span}",
        names_or_counts(&req_names),
        names_or_counts(&resp_names),
        naks.len(),
    );
    let mut v = Verdict::new(VerdictKind::Wire, what, ok, want.join("; "), actual);
    if p.reqs.is_empty() && p.resps.is_empty() && p.a_ip == p.b_ip {
        v.detail = Some(LOOPBACK.into());
    }
    v
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
fn stream(e: &StreamExpect, o: &Outcome) -> Verdict {
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
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ");
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
fn stream_memory(e: &MemoryExpect, id: &str, o: &Outcome, what: String) -> Verdict {
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
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ");
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

fn memory(sc: &Scenario, e: &MemoryExpect, o: &Outcome) -> Verdict {
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
            let want = spec.initial_bytes();
            let ok = now == &want;
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
    }
}

#[cfg(test)]
mod tests;
