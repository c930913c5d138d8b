//! Judging a scenario's outcome: completions, wire and memory, each expectation a
//! [`Verdict`] with what was expected and what happened.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use dissector::capture;
use dissector::frame::{self, Options};
use dissector::wire::aeth::{AckKind, NakCode};
use serde::{Deserialize, Serialize};

use crate::results::{Outcome, Verdict};
use crate::scenario::model::{CompletionExpect, MemoryExpect, ProbeExpect, PsnRef, Scenario, WireExpect};
use crate::scenario::parse::{content_bytes, wc_name};
use crate::agent::proto::Wc;

fn verdict(kind: &'static str, what: String, pass: bool, expected: String, actual: String) -> Verdict {
    Verdict::new(kind, what, pass, expected, actual)
}

/// A scenario's capture, decoded once for every judgement made of it, and what
/// answered each probe there.
struct Wire {
    frames: Option<Result<Vec<WireFrame>, String>>,
    answers: Result<Vec<ProbeAnswer>, String>,
}

impl Wire {
    fn read(o: &Outcome) -> Wire {
        let frames = o.capture.as_deref().map(read_wire);
        let answers = match &frames {
            Some(Ok(f)) => Ok(probe_answers(o, f)),
            Some(Err(m)) => Err(m.clone()),
            None => Err("no capture was recorded".to_string()),
        };
        Wire { frames, answers }
    }
}

/// Every expectation of `sc`, judged on what happened.
pub fn evaluate(sc: &Scenario, o: &Outcome) -> Vec<Verdict> {
    verdicts(sc, o, &Wire::read(o))
}

/// The verdicts and the observations (what a device profile records: see
/// `observations_on`) of one run, from one reading of its capture.
pub fn judge(sc: &Scenario, o: &Outcome) -> (Vec<Verdict>, BTreeMap<String, String>) {
    let w = Wire::read(o);
    (verdicts(sc, o, &w), observations_on(sc, o, &w))
}

fn verdicts(sc: &Scenario, o: &Outcome, w: &Wire) -> Vec<Verdict> {
    let mut v = Vec::new();
    for e in &sc.expect.completion {
        v.push(completion(e, o.completions.get(&e.on).map(Vec::as_slice).unwrap_or(&[])));
    }
    for e in &sc.expect.wire {
        v.push(match &w.frames {
            Some(Ok(f)) => wire(sc, e, o, f),
            Some(Err(msg)) => verdict("wire", format!("wire of QP {} from {}", e.qp, e.from), false, "a readable capture".into(), msg.clone()),
            None => verdict(
                "wire",
                format!("wire of QP {} from {}", e.qp, e.from),
                false,
                "a capture".into(),
                "no capture was recorded (the lab's switch records the wire; with --endpoints, give -i IFACE to capture on a host)".into(),
            ),
        });
    }
    for e in &sc.expect.probe {
        v.push(probe(e, o, &w.answers));
    }
    for e in &sc.expect.memory {
        v.push(memory(sc, e, o));
    }
    v
}

fn describe(w: &Wc) -> String {
    // The opcode and length of a failed completion are undefined (ibv_poll_cq(3)).
    if w.status != "IBV_WC_SUCCESS" {
        return format!("wr_id {} {}", w.wr_id, w.status);
    }
    let mut s = format!("wr_id {} {} {} byte_len {}", w.wr_id, w.status, w.opcode, w.byte_len);
    if let Some(i) = w.imm_data {
        s.push_str(&format!(" imm_data {i:#x}"));
    }
    s
}

pub fn completion(e: &CompletionExpect, wcs: &[Wc]) -> Verdict {
    let which = match (e.wr_id, e.index) {
        (Some(id), _) => format!("completion of wr_id {id} on {}", e.on),
        (None, Some(i)) => format!("completion #{i} on {}", e.on),
        (None, None) => format!("completions on {}", e.on),
    };
    let mut want = Vec::new();
    if let Some(s) = &e.status {
        want.push(wc_name(s));
    }
    if let Some(o) = &e.opcode {
        want.push(wc_name(o));
    }
    if let Some(b) = e.byte_len {
        want.push(format!("byte_len {b}"));
    }
    if let Some(i) = e.imm_data {
        want.push(format!("imm_data {i:#x}"));
    }
    if let Some(ms) = e.within_ms {
        want.push(format!("within {ms} ms"));
    }
    if let Some(c) = e.count {
        if e.wr_id.is_none() && e.index.is_none() {
            let all: Vec<String> = wcs.iter().map(describe).collect();
            let actual = if all.is_empty() { "none".to_string() } else { format!("{}: {}", all.len(), all.join("; ")) };
            return verdict("completion", which, wcs.len() == c, format!("{c} completions"), actual);
        }
    }
    let found = match (e.wr_id, e.index) {
        (Some(id), _) => wcs.iter().find(|w| w.wr_id == id),
        (None, Some(i)) => wcs.get(i),
        (None, None) => None,
    };
    let Some(w) = found else {
        let seen: Vec<String> = wcs.iter().map(describe).collect();
        return verdict("completion", which, false, want.join(", "), format!("no such completion (polled: {})", if seen.is_empty() { "none".into() } else { seen.join("; ") }));
    };
    let ok = e.status.as_ref().is_none_or(|s| wc_name(s) == w.status)
        && e.opcode.as_ref().is_none_or(|o| wc_name(o) == w.opcode)
        && e.byte_len.is_none_or(|b| b == w.byte_len)
        && e.imm_data.is_none_or(|i| Some(i) == w.imm_data)
        && e.within_ms.is_none_or(|ms| w.t_ms <= ms as f64)
        && e.count.is_none_or(|c| wcs.len() == c);
    let mut actual = describe(w);
    actual.push_str(&format!(" at {:.1} ms", w.t_ms));
    verdict("completion", which, ok, want.join(", "), actual)
}

/// The RoCE frames of a capture, decoded to what the wire expectations need.
#[derive(Debug, Clone)]
pub struct WireFrame {
    pub number: u64,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dest_qp: u32,
    pub psn: u32,
    pub opcode: u8,
    pub name: String,
    pub is_request: bool,
    /// "ACK", "RNR NAK", "NAK Remote Access Error", … for Acknowledge frames.
    pub aeth: Option<String>,
    pub nak: Option<&'static str>,
    pub icrc_ok: Option<bool>,
    pub ts_ns: u64,
    /// The lab switch dropped it (its comment says so): sent, never delivered.
    pub dropped: bool,
    /// A copy the lab switch made (`dup`): on the wire, but not sent by anyone.
    pub injected: bool,
    /// Held back by the switch (`reorder`, `delay`): recorded when it left the
    /// switch, later than it was sent.
    pub held: bool,
    /// ECN Congestion Experienced.
    pub ce: bool,
    pub cnp: bool,
    /// An RNR NAK's timer: how long the requester must wait, in µs.
    pub rnr_wait_us: Option<u32>,
}

pub fn read_wire(path: &Path) -> Result<Vec<WireFrame>, String> {
    let mut r = capture::open(path).map_err(|e| e.to_string())?;
    let opts = Options::default();
    let mut out = Vec::new();
    while let Some(rec) = r.next_packet().map_err(|e| e.to_string())? {
        let f = frame::decode(rec.link, rec.data, &opts);
        let (Some(ib), Some((src, dst))) = (&f.ib, f.addrs()) else { continue };
        let Some(info) = ib.info else { continue };
        let comment = rec.comment.unwrap_or("");
        let (aeth, nak) = match ib.aeth.map(|a| a.syndrome.kind()) {
            Some(AckKind::Ack { .. }) => (Some("ACK".to_string()), None),
            Some(AckKind::RnrNak { .. }) => (Some("RNR NAK".to_string()), Some("rnr")),
            Some(AckKind::Nak(code)) => {
                let key = match code {
                    NakCode::PsnSequenceError => "psn_sequence_error",
                    NakCode::InvalidRequest => "invalid_request",
                    NakCode::RemoteAccessError => "remote_access_error",
                    NakCode::RemoteOperationalError => "remote_operational_error",
                    NakCode::InvalidRdRequest => "invalid_rd_request",
                    NakCode::Reserved(_) => "reserved",
                };
                (Some(format!("NAK {}", code.name())), Some(key))
            }
            _ => (None, None),
        };
        out.push(WireFrame {
            number: rec.number,
            src,
            dst,
            dest_qp: ib.bth.dest_qp,
            psn: ib.bth.psn.value(),
            opcode: ib.bth.opcode.0,
            name: info.name.to_string(),
            is_request: info.is_request(),
            aeth,
            nak,
            icrc_ok: f.icrc_check(rec.data).map(|c| c.ok()),
            ts_ns: rec.ts_ns,
            dropped: comment.contains("not delivered"),
            injected: comment.starts_with("duplicate "),
            held: comment.contains("reordered by") || comment.contains("delayed "),
            ce: f.ecn() == Some(3),
            cnp: info.transport == dissector::wire::opcode::Transport::Cnp,
            rnr_wait_us: match ib.aeth.map(|a| a.syndrome.kind()) {
                Some(AckKind::RnrNak { timer }) => dissector::wire::RNR_TIMER_US.get(timer as usize).copied(),
                _ => None,
            },
        });
    }
    Ok(out)
}

/// `*` (0+) and `+` (1+) suffixes; whole-sequence match.
pub fn matches_sequence(pattern: &[String], actual: &[String]) -> bool {
    fn go(p: &[String], a: &[String]) -> bool {
        let Some((first, rest)) = p.split_first() else { return a.is_empty() };
        let (name, min, many) = if let Some(n) = first.strip_suffix('*') {
            (n.trim(), 0, true)
        } else if let Some(n) = first.strip_suffix('+') {
            (n.trim(), 1, true)
        } else {
            (first.trim(), 1, false)
        };
        let eq = |x: &String| {
            name.split('|').map(str::trim).any(|name| x == name || (name == "ACK" && x == "Acknowledge") || x.ends_with(name) && name.starts_with("NAK"))
        };
        let run = a.iter().take_while(|x| eq(x)).count();
        if !many {
            return run >= 1 && go(rest, &a[1..]);
        }
        (min..=run).rev().any(|k| go(rest, &a[k..]))
    }
    go(pattern, actual)
}

/// One direction of a QP pair on the wire: the requests `from` sent to `to`, and
/// the responses and CNPs back.
struct Pair<'a> {
    reqs: Vec<&'a WireFrame>,
    resps: Vec<&'a WireFrame>,
    cnps: usize,
    a_ip: IpAddr,
    b_ip: IpAddr,
}

fn pair<'a>(o: &Outcome, qp: &str, from: &str, to: &str, frames: &'a [WireFrame]) -> Option<Pair<'a>> {
    let ident = |ep: &str| -> Option<(IpAddr, u32)> {
        let f = o.endpoints.get(ep)?;
        let ip: IpAddr = f.ip.parse().ok()?;
        Some((ip, f.qps.iter().find(|x| x.name == qp)?.qpn))
    };
    let ((a_ip, a_qpn), (b_ip, b_qpn)) = (ident(from)?, ident(to)?);
    // What each side sent: copies the switch injected are left out (they are
    // nobody's retransmissions); frames it dropped stay in (they were sent).
    let reqs = frames.iter().filter(|f| f.src == a_ip && f.dst == b_ip && f.dest_qp == b_qpn && f.is_request && !f.injected).collect();
    let back = |f: &&WireFrame| f.src == b_ip && f.dst == a_ip && f.dest_qp == a_qpn;
    let resps = frames.iter().filter(|f| back(f) && !f.is_request && !f.cnp && !f.injected).collect();
    let cnps = frames.iter().filter(|f| back(f) && f.cnp).count();
    Some(Pair { reqs, resps, cnps, a_ip, b_ip })
}

fn names(v: &[&WireFrame]) -> Vec<String> {
    v.iter().map(|f| f.response_name()).collect()
}

impl WireFrame {
    /// How the expectations name it: an Acknowledge by its AETH (ACK, RNR NAK,
    /// NAK …); every other frame (READ responses, ATOMIC Acknowledge, requests) by
    /// its opcode.
    pub fn response_name(&self) -> String {
        match &self.aeth {
            Some(a) if self.name == "Acknowledge" => a.clone(),
            _ => self.name.clone(),
        }
    }
}

/// What this setup did, in terms that stay the same from run to run on the same
/// setup (no times, no addresses): the answer to each probe, each completion's
/// status, and per QP direction the NAKs drawn, how lost packets were recovered,
/// whether CE drew a CNP and whether the RNR timer was waited out. A device
/// profile records these; `--profile` compares them.
fn observations_on(sc: &Scenario, o: &Outcome, w: &Wire) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for (ep, wcs) in &o.completions {
        let mut seen = std::collections::BTreeSet::new();
        for w in wcs.iter().filter(|w| seen.insert(w.wr_id)) {
            m.insert(format!("completion {ep} wr_id {}", w.wr_id), w.status.clone());
        }
    }
    let (Some(Ok(frames)), Ok(answers)) = (&w.frames, &w.answers) else { return m };
    for a in answers {
        let v = match (a.on_wire, a.responses.is_empty()) {
            (0, _) => "not on the wire".to_string(),
            (_, true) => "no answer".to_string(),
            _ => format!("{} (PSN {})", a.responses.join(", "), a.psn_offset.map(psn_rel).unwrap_or_default()),
        };
        m.insert(format!("probe {}", a.id), v);
    }
    for q in &sc.qps {
        for (from, to) in [(&q.between[0], &q.between[1]), (&q.between[1], &q.between[0])] {
            let Some(p) = pair(o, &q.name, from, to, frames) else { continue };
            if p.reqs.is_empty() {
                continue;
            }
            let key = |what: &str| format!("wire {} from {from}: {what}", q.name);
            let mut naks: Vec<&str> = Vec::new();
            for f in &p.resps {
                if let (Some(_), Some(a)) = (f.nak, f.aeth.as_deref()) {
                    if !naks.contains(&a) {
                        naks.push(a);
                    }
                }
            }
            m.insert(key("NAKs"), if naks.is_empty() { "none".into() } else { naks.join(", ") });
            // How lost requests were recovered: not asked of crafted requests (their
            // repeats are the probe's, not the requester's), nor after RNR NAKs
            // (the RNR timer says that).
            let probed = o.probes.iter().any(|x| x.qp == q.name && p.a_ip.to_string() == x.src);
            let rnr = p.resps.iter().any(|f| f.nak == Some("rnr"));
            let mut how: Vec<&str> = go_back_n(&p.reqs, &p.resps).resends.iter().map(|r| r.trigger).collect();
            how.sort();
            how.dedup();
            if !how.is_empty() && !probed && !rnr {
                m.insert(key("resent after"), how.join(", "));
            }
            if p.reqs.iter().any(|f| f.ce) {
                m.insert(key("CNP after CE"), if p.cnps > 0 { "yes" } else { "no" }.into());
            }
            if let Some(v) = rnr_waits(&p.reqs, &p.resps) {
                m.insert(key("RNR timer"), v);
            }
        }
    }
    m
}

/// After each RNR NAK, whether the requester waited at least the NAK's timer
/// before sending that PSN again.
fn rnr_waits(reqs: &[&WireFrame], resps: &[&WireFrame]) -> Option<String> {
    let mut waits = Vec::new();
    for n in resps.iter().filter(|f| f.nak == Some("rnr")) {
        let Some(timer) = n.rnr_wait_us else { continue };
        if let Some(again) = reqs.iter().find(|f| f.number > n.number && f.psn == n.psn) {
            waits.push((again.ts_ns.saturating_sub(n.ts_ns) / 1000, timer as u64));
        }
    }
    if waits.is_empty() {
        return None;
    }
    let short: Vec<String> = waits.iter().filter(|(w, t)| w < t).map(|(w, t)| format!("{w} µs of {t} µs")).collect();
    Some(if short.is_empty() { "honoured".into() } else { format!("not honoured ({})", short.join(", ")) })
}

fn wire(sc: &Scenario, e: &WireExpect, o: &Outcome, frames: &[WireFrame]) -> Verdict {
    let what = format!("wire of QP {} from {}", e.qp, e.from);
    let Some(q) = sc.qps.iter().find(|q| q.name == e.qp) else {
        return verdict("wire", what, false, "a QP of the scenario".into(), format!("no QP {}", e.qp));
    };
    let to = if q.between[0] == e.from { &q.between[1] } else { &q.between[0] };
    let Some(Pair { reqs, resps, cnps, a_ip, b_ip }) = pair(o, &e.qp, &e.from, to, frames) else {
        return verdict("wire", what, false, "both ends set up".into(), "an end of the QP was never set up".into());
    };
    let ce_marked = reqs.iter().filter(|f| f.ce).count();
    let (req_names, resp_names) = (names(&reqs), names(&resps));
    let mut want = Vec::new();
    let mut ok = true;
    if e.empty == Some(true) {
        let n = reqs.len() + resps.len();
        let mut v = verdict("wire", what, n == 0, "nothing on the wire".into(), format!("{n} frames"));
        if a_ip == b_ip {
            v.detail = Some("both QPs are on the same rxe device: their traffic is looped back inside the driver and never reaches the wire".into());
        }
        return v;
    }
    if let Some(p) = &e.sequence {
        want.push(format!("requests [{}]", p.join(", ")));
        ok &= matches_sequence(p, &req_names);
    }
    if let Some(p) = &e.responses {
        want.push(format!("responses [{}]", p.join(", ")));
        ok &= matches_sequence(p, &resp_names);
    }
    let naks: Vec<&str> = resps.iter().filter_map(|f| f.nak).collect();
    if let Some(n) = &e.naks {
        want.push(format!("NAKs {}", n.join(", ")));
        ok &= n.iter().all(|x| naks.contains(&x.as_str()));
    }
    let rnr = naks.iter().filter(|x| **x == "rnr").count() as u64;
    if let Some(m) = e.min_rnr_naks {
        want.push(format!("≥ {m} RNR NAKs"));
        ok &= rnr >= m;
    }
    let mut seen = std::collections::BTreeSet::new();
    let retx = reqs.iter().filter(|f| !seen.insert(f.psn)).count() as u64;
    if let Some(r) = e.retransmissions {
        want.push(format!("{r} retransmissions"));
        ok &= retx == r;
    }
    let bad_icrc = reqs.iter().chain(&resps).filter(|f| f.icrc_ok == Some(false)).count();
    match e.icrc_valid {
        Some(false) => {
            want.push("a bad ICRC".into());
            ok &= bad_icrc > 0;
        }
        _ => {
            want.push("ICRCs valid".into());
            ok &= bad_icrc == 0;
        }
    }
    let gbn = go_back_n(&reqs, &resps);
    if e.go_back_n == Some(true) {
        want.push("go-back-N recovery".into());
        ok &= gbn.violations.is_empty();
    }
    if let Some(ms) = e.retransmit_within_ms {
        want.push(format!("each resend within {ms} ms"));
        ok &= !gbn.resends.is_empty() && gbn.resends.iter().all(|r| r.after_ms <= ms as f64);
    }
    if let Some(c) = e.cnp {
        want.push(if c { "a CNP after CE".to_string() } else { "no CNP".to_string() });
        ok &= if c { ce_marked > 0 && cnps > 0 } else { cnps == 0 };
    }
    let mut extra = String::new();
    if !gbn.resends.is_empty() {
        let r: Vec<String> = gbn.resends.iter().map(|r| format!("PSN {} {:.1} ms after {}", r.psn, r.after_ms, r.trigger)).collect();
        extra += &format!("; resends: {}", r.join(", "));
    }
    if let Some(n) = gbn.nak_latency_ms {
        extra += &format!("; NAK {n:.2} ms after the out-of-order request");
    }
    if e.cnp.is_some() || ce_marked > 0 || cnps > 0 {
        extra += &format!("; {ce_marked} CE-marked requests, {cnps} CNPs");
    }
    if e.go_back_n.is_some() && !gbn.violations.is_empty() {
        extra += &format!("; go-back-N broken: {}", gbn.violations.join("; "));
    }
    let actual = format!(
        "requests [{}]; responses [{}]; {} NAKs ({} RNR), {retx} retransmissions, {bad_icrc} bad ICRCs{extra}; frames {}",
        req_names.join(", "),
        resp_names.join(", "),
        naks.len(),
        rnr,
        match (reqs.iter().chain(&resps).map(|f| f.number).min(), reqs.iter().chain(&resps).map(|f| f.number).max()) {
            (Some(a), Some(b)) => format!("{a}–{b}"),
            _ => "none".into(),
        }
    );
    let mut v = verdict("wire", what, ok, want.join("; "), actual);
    if reqs.is_empty() && resps.is_empty() && a_ip == b_ip {
        v.detail = Some("both QPs are on the same rxe device: their traffic is looped back inside the driver and never reaches the wire".into());
    }
    v
}

/// One resend run seen on the wire: where it started and what set it off.
#[derive(Debug, Clone, PartialEq)]
pub struct Resend {
    pub psn: u32,
    /// "NAK" (a NAK PSN Sequence Error before it) or "timeout" (the ACK timer).
    pub trigger: &'static str,
    /// From the NAK, or from the last transmission of that PSN.
    pub after_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GoBackN {
    pub resends: Vec<Resend>,
    /// From the first request after a gap in what the responder received to the
    /// NAK PSN Sequence Error it drew.
    pub nak_latency_ms: Option<f64>,
    pub violations: Vec<String>,
}

/// `a` after `b` in 24-bit PSN space (serial number arithmetic, half the space).
fn psn_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & 0x00ff_ffff;
    d != 0 && d < 0x0080_0000
}

/// Checks go-back-N recovery (IBA 9.7.5) on one QP pair: the requester's
/// transmissions `reqs` (dropped ones included) and the responder's `resps`, in
/// capture order.
pub fn go_back_n(reqs: &[&WireFrame], resps: &[&WireFrame]) -> GoBackN {
    let mut g = GoBackN::default();
    // The responder's ACK/NAK PSNs never move back.
    let acks: Vec<&&WireFrame> = resps.iter().filter(|f| f.aeth.is_some()).collect();
    for w in acks.windows(2) {
        if psn_after(w[0].psn, w[1].psn) {
            g.violations.push(format!("the ACK PSN moved back from {} to {} (frame {})", w[0].psn, w[1].psn, w[1].number));
        }
    }
    // Resend runs, against what the responder had said by then.
    let mut highest: Option<u32> = None;
    let mut last_sent: BTreeMap<u32, u64> = BTreeMap::new();
    let mut prev: Option<(u32, bool)> = None;
    for f in reqs {
        // A held frame shows up late, but it is an original transmission.
        let resent = !f.held && highest.is_some_and(|h| !psn_after(f.psn, h));
        let starts_run = resent && prev.is_none_or(|(p, was_resend)| !was_resend || f.psn != (p + 1) & 0x00ff_ffff);
        if starts_run {
            // What the requester had heard (a response the switch dropped never came).
            let said: Vec<&&&WireFrame> = acks.iter().filter(|a| a.number < f.number && !a.dropped).collect();
            // Everything up to this PSN is acknowledged: an ACK of it or later, or
            // a NAK PSN Sequence Error past it.
            if let Some(a) = said.iter().find(|a| {
                (a.nak.is_none() && !psn_after(f.psn, a.psn))
                    || (a.nak == Some("psn_sequence_error") && psn_after(a.psn, f.psn))
            }) {
                g.violations.push(format!("frame {} resends PSN {}, which frame {} had already acknowledged", f.number, f.psn, a.number));
            }
            let last_nak = said.last().filter(|a| a.nak == Some("psn_sequence_error"));
            let orig = last_sent.get(&f.psn).copied().unwrap_or(f.ts_ns);
            match last_nak {
                Some(n) if n.ts_ns >= orig => {
                    if n.psn != f.psn {
                        g.violations.push(format!("frame {} resends from PSN {} after a NAK for PSN {} (frame {})", f.number, f.psn, n.psn, n.number));
                    }
                    g.resends.push(Resend { psn: f.psn, trigger: "NAK", after_ms: f.ts_ns.saturating_sub(n.ts_ns) as f64 / 1e6 });
                }
                _ => g.resends.push(Resend { psn: f.psn, trigger: "timeout", after_ms: f.ts_ns.saturating_sub(orig) as f64 / 1e6 }),
            }
        }
        if highest.is_none_or(|h| psn_after(f.psn, h)) {
            highest = Some(f.psn);
        }
        last_sent.insert(f.psn, f.ts_ns);
        prev = Some((f.psn, resent));
    }
    // The first NAK PSN Sequence Error: how long after the request that showed
    // the responder a gap (the first delivered one past the NAK'd PSN).
    if let Some(n) = acks.iter().find(|a| a.nak == Some("psn_sequence_error")) {
        let delivered = |f: &&&WireFrame| !f.dropped && f.icrc_ok != Some(false);
        if let Some(trig) = reqs.iter().filter(|f| f.number < n.number && psn_after(f.psn, n.psn)).find(delivered) {
            g.nak_latency_ms = Some(n.ts_ns.saturating_sub(trig.ts_ns) as f64 / 1e6);
        }
    }
    // In the end every PSN sent got through at least once.
    let delivered: std::collections::BTreeSet<u32> = reqs.iter().filter(|f| !f.dropped && f.icrc_ok != Some(false)).map(|f| f.psn).collect();
    let lost: std::collections::BTreeSet<u32> = reqs.iter().map(|f| f.psn).filter(|p| !delivered.contains(p)).collect();
    if !lost.is_empty() {
        let l: Vec<String> = lost.iter().map(u32::to_string).collect();
        g.violations.push(format!("PSN {} never delivered", l.join(", ")));
    }
    g
}

/// What the target did with one probe, read from the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeAnswer {
    pub id: String,
    /// How many of the probe's frames are on the wire (of how many sent).
    pub on_wire: usize,
    pub sent: usize,
    /// The target's responses, named as in the wire expectations, up to the
    /// prober's next request.
    pub responses: Vec<String>,
    /// The first response's PSN, relative to `next` when the probe went out.
    pub psn_offset: Option<i64>,
    /// From the probe's first frame to the first response.
    pub latency_ms: Option<f64>,
    /// Frame numbers: the probe's first, and the responses.
    pub frames: Vec<u64>,
}

impl ProbeAnswer {
    /// `NAK PSN Sequence Error (PSN next) after 0.41 ms`, `nothing`.
    pub fn describe(&self) -> String {
        if self.on_wire == 0 {
            return format!("the probe is not on the wire ({} sent)", self.sent);
        }
        if self.responses.is_empty() {
            return "no answer (dropped)".into();
        }
        let mut s = self.responses.join(", ");
        if let Some(off) = self.psn_offset {
            s += &format!(" (PSN {})", psn_rel(off));
        }
        if let Some(ms) = self.latency_ms {
            s += &format!(" after {ms:.2} ms");
        }
        s
    }
}

/// `next`, `next+3`, `next-1`.
pub fn psn_rel(off: i64) -> String {
    match off {
        0 => "next".into(),
        o if o > 0 => format!("next+{o}"),
        o => format!("next{o}"),
    }
}

/// Each probe's frames on the wire, in step order, and what answered them: every
/// response from the target to the prober after the probe's first frame, until
/// the prober's next request. The target may answer the first copy before the
/// next copy is on the wire; the probe's own copies do not end its answer.
pub fn probe_answers(o: &Outcome, frames: &[WireFrame]) -> Vec<ProbeAnswer> {
    let mut cursor = 0;
    let mut out = Vec::new();
    for p in &o.probes {
        let (Ok(src), Ok(dst)) = (p.src.parse::<IpAddr>(), p.dst.parse::<IpAddr>()) else { continue };
        let mut a = ProbeAnswer { id: p.id.clone(), on_wire: 0, sent: p.frames.len(), responses: vec![], psn_offset: None, latency_ms: None, frames: vec![] };
        // The probe's frames, in order, from where the last probe's ended.
        let mut want = p.frames.iter().peekable();
        let mut own = Vec::new();
        let mut i = cursor;
        while let (Some(w), Some(f)) = (want.peek(), frames.get(i)) {
            if f.src == src && f.dst == dst && f.dest_qp == w.dest_qp && f.psn == w.psn && f.opcode == w.opcode && !f.injected {
                own.push(i);
                want.next();
                cursor = i + 1;
            }
            i += 1;
        }
        a.on_wire = own.len();
        if let Some(&first) = own.first() {
            let t0 = frames[first].ts_ns;
            a.frames.push(frames[first].number);
            for (j, f) in frames.iter().enumerate().skip(first + 1) {
                if own.contains(&j) {
                    continue;
                }
                if f.src == src && f.dst == dst && f.is_request && !f.injected {
                    break; // the prober's next request: what follows answers that
                }
                if f.src == dst && f.dst == src && !f.is_request && !f.cnp && !f.injected {
                    if a.responses.is_empty() {
                        a.latency_ms = Some(f.ts_ns.saturating_sub(t0) as f64 / 1e6);
                        let d = (f.psn as i64 - p.next as i64).rem_euclid(1 << 24);
                        a.psn_offset = Some(if d >= 1 << 23 { d - (1 << 24) } else { d });
                    }
                    a.responses.push(f.response_name());
                    a.frames.push(f.number);
                }
            }
        }
        out.push(a);
    }
    out
}

fn probe(e: &ProbeExpect, o: &Outcome, answers: &Result<Vec<ProbeAnswer>, String>) -> Verdict {
    let what = format!("probe {}", e.probe);
    let mut want = Vec::new();
    if let Some(r) = &e.responses {
        want.push(if r.is_empty() { "no answer".to_string() } else { format!("answered [{}]", r.join(", ")) });
    }
    if let Some(p) = &e.psn {
        want.push(format!("PSN {}", match p { PsnRef::Relative(s) => s.clone(), PsnRef::Absolute(n) => n.to_string() }));
    }
    if let Some(ms) = e.within_ms {
        want.push(format!("within {ms} ms"));
    }
    let expected = want.join(", ");
    let answers = match answers {
        Ok(a) => a,
        Err(m) => return verdict("probe", what, false, expected, m.clone()),
    };
    let Some(a) = answers.iter().find(|a| a.id == e.probe) else {
        return verdict("probe", what, false, expected, "the probe was never sent (the run stopped before it)".into());
    };
    let Some(sent) = o.probes.iter().find(|p| p.id == e.probe) else {
        return verdict("probe", what, false, expected, "the probe was never sent".into());
    };
    let mut ok = a.on_wire > 0;
    if let Some(r) = &e.responses {
        ok &= matches_sequence(r, &a.responses);
    }
    if let Some(p) = &e.psn {
        let first = a.psn_offset.map(|off| ((sent.next as i64 + off).rem_euclid(1 << 24)) as u32);
        ok &= first.is_some() && p.resolve(sent.next).ok() == first;
    }
    if let Some(ms) = e.within_ms {
        ok &= a.latency_ms.is_some_and(|l| l <= ms as f64);
    }
    let mut v = verdict("probe", what, ok, expected, format!("{}; frames {}", a.describe(), a.frames.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")));
    if a.on_wire < a.sent {
        v.detail = Some(format!("only {} of the {} frames sent are on the wire", a.on_wire, a.sent));
    }
    v
}

fn memory(sc: &Scenario, e: &MemoryExpect, o: &Outcome) -> Verdict {
    let what = format!("memory of MR {} on {} at offset {}", e.mr, e.on, e.offset);
    let Some(spec) = sc.mrs.iter().find(|m| m.on == e.on && m.name == e.mr) else {
        return verdict("memory", what, false, "an MR of the scenario".into(), "no such MR".into());
    };
    let Some(now) = o.memory.get(&e.on).and_then(|m| m.get(&e.mr)) else {
        return verdict("memory", what, false, "the MR's content".into(), "never read (the run stopped before)".into());
    };
    let off = e.offset as usize;
    let shown = |b: &[u8]| -> String {
        let text = b.iter().all(|c| c.is_ascii_graphic() || *c == b' ');
        if text && !b.is_empty() {
            format!("{:?}", String::from_utf8_lossy(b))
        } else {
            b.iter().take(48).map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ") + if b.len() > 48 { " …" } else { "" }
        }
    };
    if e.unchanged == Some(true) {
        let init = spec.init.as_ref().and_then(|c| content_bytes(c, spec.size as usize).ok()).unwrap_or_default();
        let mut want = vec![0u8; spec.size as usize];
        let n = init.len().min(want.len());
        want[..n].copy_from_slice(&init[..n]);
        let ok = now == &want;
        return verdict("memory", what, ok, format!("unchanged: {}", shown(&want[off.min(want.len())..])), shown(&now[off.min(now.len())..]));
    }
    let Some(c) = &e.equals else {
        return verdict("memory", what, false, "equals or unchanged".into(), "neither given".into());
    };
    let want = match content_bytes(c, now.len().saturating_sub(off)) {
        Ok(w) => w,
        Err(m) => return verdict("memory", what, false, "valid content".into(), m),
    };
    let got = now.get(off..off + want.len()).unwrap_or(&[]);
    verdict("memory", what, got == want.as_slice(), shown(&want), shown(got))
}

/// Verdicts by scenario, for the reports.
pub type Results = BTreeMap<String, Vec<Verdict>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn sequences_with_repetition() {
        let p = s(&["RDMA WRITE First", "RDMA WRITE Middle*", "RDMA WRITE Last"]);
        assert!(matches_sequence(&p, &s(&["RDMA WRITE First", "RDMA WRITE Last"])));
        assert!(matches_sequence(&p, &s(&["RDMA WRITE First", "RDMA WRITE Middle", "RDMA WRITE Middle", "RDMA WRITE Last"])));
        assert!(!matches_sequence(&p, &s(&["RDMA WRITE First", "RDMA WRITE Middle"])));
        assert!(!matches_sequence(&p, &s(&["RDMA WRITE First", "RDMA WRITE Last", "RDMA WRITE Last"])));
        assert!(matches_sequence(&s(&["SEND Only+"]), &s(&["SEND Only", "SEND Only"])));
        assert!(!matches_sequence(&s(&["SEND Only+"]), &[]));
        assert!(matches_sequence(&s(&["ACK+"]), &s(&["ACK", "ACK"])));
        assert!(matches_sequence(&[], &[]));
        assert!(!matches_sequence(&[], &s(&["ACK"])));
        // Alternatives, where the spec leaves the device a choice.
        let either = s(&["NAK Invalid Request | NAK Remote Access Error"]);
        assert!(matches_sequence(&either, &s(&["NAK Remote Access Error"])));
        assert!(matches_sequence(&either, &s(&["NAK Invalid Request"])));
        assert!(!matches_sequence(&either, &s(&["NAK PSN Sequence Error"])));
        assert!(!matches_sequence(&either, &s(&["ACK"])));
    }

    fn wc(id: u64, status: &str, t: f64) -> Wc {
        Wc { wr_id: id, status: status.into(), opcode: "IBV_WC_SEND".into(), byte_len: 5, imm_data: None, qp: "q".into(), qp_num: 17, src_qp: None, vendor_err: 0, t_ms: t }
    }

    #[test]
    fn completions_pass_and_fail_with_what_happened() {
        let wcs = [wc(1, "IBV_WC_SUCCESS", 3.0), wc(2, "IBV_WC_REM_ACCESS_ERR", 4.0)];
        let e: CompletionExpect = toml::from_str("on = 'a'\nwr_id = 2\nstatus = 'rem_access_err'").unwrap();
        assert!(completion(&e, &wcs).pass);
        let e: CompletionExpect = toml::from_str("on = 'a'\nwr_id = 1\nstatus = 'IBV_WC_REM_ACCESS_ERR'").unwrap();
        let v = completion(&e, &wcs);
        assert!(!v.pass && v.actual.contains("IBV_WC_SUCCESS"), "{v:?}");
        let e: CompletionExpect = toml::from_str("on = 'a'\nwr_id = 9").unwrap();
        assert!(completion(&e, &wcs).actual.contains("no such completion"));
        let e: CompletionExpect = toml::from_str("on = 'a'\ncount = 2").unwrap();
        assert!(completion(&e, &wcs).pass);
        let e: CompletionExpect = toml::from_str("on = 'a'\nwr_id = 2\nwithin_ms = 3").unwrap();
        assert!(!completion(&e, &wcs).pass, "4 ms is later than 3 ms");
    }

    /// A frame of a made-up exchange: requests from 10.0.0.1, responses back.
    fn wf(number: u64, ms: u64, psn: u32, what: &str) -> WireFrame {
        let (name, aeth, nak) = match what {
            "ack" => ("Acknowledge", Some("ACK".to_string()), None),
            "nak" => ("Acknowledge", Some("NAK PSN Sequence Error".to_string()), Some("psn_sequence_error")),
            op => (op, None, None),
        };
        WireFrame {
            number,
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            dest_qp: 0x11,
            psn,
            opcode: if aeth.is_none() { 0x0a } else { 0x11 },
            name: name.to_string(),
            is_request: aeth.is_none(),
            aeth,
            nak,
            icrc_ok: Some(true),
            ts_ns: ms * 1_000_000,
            dropped: false,
            injected: false,
            held: false,
            ce: false,
            cnp: false,
            rnr_wait_us: None,
        }
    }

    /// The answer to a probe is what the target sent back before the prober's next
    /// request; its PSN is read relative to the PSN the target expected.
    #[test]
    fn probe_answers_are_the_responses_up_to_the_next_request() {
        use crate::agent::proto::ProbeSent;
        use crate::probe::SentFrame;
        let resp = |n, ms, psn, what: &str| {
            let mut f = wf(n, ms, psn, what);
            (f.src, f.dst, f.dest_qp) = (f.dst, f.src, 0x22);
            f
        };
        let sent = |id: &str, next, psn, copies| ProbeSent {
            id: id.into(),
            qp: "q".into(),
            src: "10.0.0.1".into(),
            dst: "10.0.0.2".into(),
            src_qp: 0x22,
            next,
            frames: vec![SentFrame { opcode: 0x0a, dest_qp: 0x11, psn, len: 8 }; copies],
        };
        let o = Outcome {
            probes: vec![sent("ahead", 100, 103, 2), sent("dup", 100, 99, 1), sent("lost", 100, 100, 1), sent("never", 100, 100, 1)],
            ..Default::default()
        };
        let frames = vec![
            wf(1, 0, 103, "RDMA WRITE Only"),
            wf(2, 0, 103, "RDMA WRITE Only"),
            resp(3, 1, 100, "nak"),
            wf(4, 10, 99, "RDMA WRITE Only"),
            resp(5, 12, 99, "ack"),
            wf(6, 20, 100, "RDMA WRITE Only"),
            wf(7, 30, 500, "RDMA WRITE Only"), // a real request: what follows is its answer
            resp(8, 31, 500, "ack"),
        ];
        let a = probe_answers(&o, &frames);
        // The target may answer the first copy before the second is on the wire.
        let mut interleaved = frames.clone();
        interleaved.swap(1, 2);
        let b = probe_answers(&o, &interleaved);
        assert_eq!(a, b, "the same answers whether the NAK comes after both copies or between them");
        assert_eq!(a.len(), 4);
        assert_eq!((a[0].on_wire, &a[0].responses[..], a[0].psn_offset), (2, &["NAK PSN Sequence Error".to_string()][..], Some(0)));
        assert_eq!(a[0].describe(), "NAK PSN Sequence Error (PSN next) after 1.00 ms");
        assert_eq!((a[1].responses.clone(), a[1].psn_offset, a[1].latency_ms), (vec!["ACK".to_string()], Some(-1), Some(2.0)));
        assert_eq!(a[1].frames, vec![4, 5]);
        assert!(a[2].responses.is_empty(), "the ACK of frame 8 answers frame 7, not the probe");
        assert_eq!(a[2].describe(), "no answer (dropped)");
        assert_eq!(a[3].on_wire, 0, "a frame is matched once");
        let pe = |responses: Vec<&str>, psn: &str| ProbeExpect {
            probe: "ahead".into(),
            responses: Some(responses.into_iter().map(String::from).collect()),
            psn: Some(PsnRef::Relative(psn.into())),
            within_ms: Some(5),
        };
        assert!(probe(&pe(vec!["NAK PSN Sequence Error"], "next"), &o, &Ok(a.clone())).pass);
        assert!(!probe(&pe(vec!["NAK PSN Sequence Error"], "next+3"), &o, &Ok(a.clone())).pass, "the NAK names the expected PSN");
        assert!(!probe(&pe(vec!["NAK PSN Sequence Error", "NAK PSN Sequence Error"], "next"), &o, &Ok(a.clone())).pass, "one NAK, not one per packet");
        assert!(!probe(&pe(vec![], "next"), &o, &Ok(a)).pass);
    }

    fn split(v: &[WireFrame]) -> (Vec<&WireFrame>, Vec<&WireFrame>) {
        (v.iter().filter(|f| f.is_request).collect(), v.iter().filter(|f| !f.is_request).collect())
    }

    #[test]
    fn go_back_n_after_a_nak() {
        // 101 dropped, 102–103 arrive, NAK 101, resend 101–103, ACK 103: as rxe does.
        let mut v = vec![
            wf(1, 0, 100, "RDMA WRITE First"),
            wf(2, 0, 101, "RDMA WRITE Middle"),
            wf(3, 0, 102, "RDMA WRITE Middle"),
            wf(4, 0, 103, "RDMA WRITE Last"),
            wf(5, 1, 101, "nak"),
            wf(6, 3, 101, "RDMA WRITE Middle"),
            wf(7, 3, 102, "RDMA WRITE Middle"),
            wf(8, 3, 103, "RDMA WRITE Last"),
            wf(9, 4, 103, "ack"),
        ];
        v[1].dropped = true;
        let (q, r) = split(&v);
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, Vec::<String>::new());
        assert_eq!(g.resends, vec![Resend { psn: 101, trigger: "NAK", after_ms: 2.0 }]);
        assert_eq!(g.nak_latency_ms, Some(1.0), "from frame 3 (PSN 102, the first past the gap) to the NAK");

        // Resending from the wrong PSN, and an ACK that moves back, are caught.
        let mut bad = v.clone();
        bad[5].psn = 102;
        bad[6].psn = 103;
        bad.remove(7);
        bad.push(wf(10, 5, 102, "ack"));
        let (q, r) = split(&bad);
        let g = go_back_n(&q, &r);
        assert!(g.violations.iter().any(|x| x.contains("resends from PSN 102 after a NAK for PSN 101")), "{:?}", g.violations);
        assert!(g.violations.iter().any(|x| x.contains("moved back from 103 to 102")), "{:?}", g.violations);
        assert!(g.violations.iter().any(|x| x.contains("PSN 101 never delivered")), "{:?}", g.violations);
    }

    #[test]
    fn go_back_n_after_a_timeout_and_a_lost_ack() {
        // WRITE Only PSN 7 delivered, its ACK dropped: the requester's timer fires
        // and it resends PSN 7, which is right: it never heard the ACK.
        let mut v = vec![wf(1, 0, 7, "RDMA WRITE Only"), wf(2, 1, 7, "ack"), wf(3, 70, 7, "RDMA WRITE Only"), wf(4, 71, 7, "ack")];
        v[1].dropped = true;
        let (q, r) = split(&v);
        let g = go_back_n(&q, &r);
        assert_eq!(g.violations, Vec::<String>::new());
        assert_eq!(g.resends, vec![Resend { psn: 7, trigger: "timeout", after_ms: 70.0 }]);
        // Had the ACK arrived, resending would be wrong.
        v[1].dropped = false;
        let (q, r) = split(&v);
        assert!(go_back_n(&q, &r).violations[0].contains("already acknowledged"));
    }

    #[test]
    fn psn_order_wraps() {
        assert!(psn_after(0, 0xff_ffff));
        assert!(psn_after(5, 4));
        assert!(!psn_after(4, 5));
        assert!(!psn_after(4, 4));
    }
}
