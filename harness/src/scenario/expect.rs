//! Judging a scenario's outcome: completions, wire and memory, each expectation a
//! [`Verdict`] with what was expected and what happened.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use dissector::capture;
use dissector::frame::{self, Options};
use dissector::wire::aeth::{AckKind, NakCode};
use serde::Serialize;

use super::model::{CompletionExpect, MemoryExpect, Scenario, WireExpect};
use super::parse::{content_bytes, wc_name};
use super::runner::Outcome;
use crate::agent::proto::Wc;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// completion, wire or memory.
    pub kind: &'static str,
    pub what: String,
    pub pass: bool,
    pub expected: String,
    pub actual: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

fn verdict(kind: &'static str, what: String, pass: bool, expected: String, actual: String) -> Verdict {
    Verdict { kind, what, pass, expected, actual, detail: None }
}

pub fn evaluate(sc: &Scenario, o: &Outcome) -> Vec<Verdict> {
    let mut v = Vec::new();
    for e in &sc.expect.completion {
        v.push(completion(e, o.completions.get(&e.on).map(Vec::as_slice).unwrap_or(&[])));
    }
    let frames = o.capture.as_deref().map(read_wire);
    for e in &sc.expect.wire {
        v.push(match &frames {
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
    pub name: String,
    pub is_request: bool,
    /// "ACK", "RNR NAK", "NAK Remote Access Error", … for Acknowledge frames.
    pub aeth: Option<String>,
    pub nak: Option<&'static str>,
    pub icrc_ok: Option<bool>,
}

fn read_wire(path: &Path) -> Result<Vec<WireFrame>, String> {
    let mut r = capture::open(path).map_err(|e| e.to_string())?;
    let opts = Options::default();
    let mut out = Vec::new();
    while let Some(rec) = r.next_packet().map_err(|e| e.to_string())? {
        let f = frame::decode(rec.link, rec.data, &opts);
        let (Some(ib), Some((src, dst))) = (&f.ib, f.addrs()) else { continue };
        let Some(info) = ib.info else { continue };
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
            name: info.name.to_string(),
            is_request: info.is_request(),
            aeth,
            nak,
            icrc_ok: f.icrc_check(rec.data).map(|c| c.ok()),
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
        let eq = |x: &String| x == name || (name == "ACK" && x == "Acknowledge") || x.ends_with(name) && name.starts_with("NAK");
        let run = a.iter().take_while(|x| eq(x)).count();
        if !many {
            return run >= 1 && go(rest, &a[1..]);
        }
        (min..=run).rev().any(|k| go(rest, &a[k..]))
    }
    go(pattern, actual)
}

fn wire(sc: &Scenario, e: &WireExpect, o: &Outcome, frames: &[WireFrame]) -> Verdict {
    let what = format!("wire of QP {} from {}", e.qp, e.from);
    let Some(q) = sc.qps.iter().find(|q| q.name == e.qp) else {
        return verdict("wire", what, false, "a QP of the scenario".into(), format!("no QP {}", e.qp));
    };
    let to = if q.between[0] == e.from { &q.between[1] } else { &q.between[0] };
    let ident = |ep: &str| -> Option<(IpAddr, u32)> {
        let f = o.endpoints.get(ep)?;
        let ip: IpAddr = f.ip.parse().ok()?;
        Some((ip, f.qps.iter().find(|x| x.name == e.qp)?.qpn))
    };
    let (Some((a_ip, a_qpn)), Some((b_ip, b_qpn))) = (ident(&e.from), ident(to)) else {
        return verdict("wire", what, false, "both ends set up".into(), "an end of the QP was never set up".into());
    };
    let reqs: Vec<&WireFrame> = frames.iter().filter(|f| f.src == a_ip && f.dst == b_ip && f.dest_qp == b_qpn && f.is_request).collect();
    let resps: Vec<&WireFrame> = frames.iter().filter(|f| f.src == b_ip && f.dst == a_ip && f.dest_qp == a_qpn && !f.is_request).collect();
    // An Acknowledge is named by its AETH (ACK, RNR NAK, NAK …); every other
    // response (READ responses, ATOMIC Acknowledge) by its opcode.
    let names = |v: &[&WireFrame]| -> Vec<String> {
        v.iter().map(|f| if f.name == "Acknowledge" { f.aeth.clone().unwrap_or_else(|| f.name.clone()) } else { f.name.clone() }).collect()
    };
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
    if e.icrc_valid.unwrap_or(true) {
        want.push("ICRCs valid".into());
        ok &= bad_icrc == 0;
    }
    let actual = format!(
        "requests [{}]; responses [{}]; {} NAKs ({} RNR), {retx} retransmissions, {bad_icrc} bad ICRCs; frames {}",
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
}
