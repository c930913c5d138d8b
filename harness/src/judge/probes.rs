//! What answered each crafted probe: its frames found on the wire (in step order),
//! and every response from the target to the prober after it, up to the prober's
//! next request.
//!
//! Owns: [`ProbeAnswer`], [`answers`] and the probes' [`verdict`]. Imports:
//! `super::timeline`, the results' outcome and verdicts, the scenario model and
//! patterns, dissector's PSN and ACK class.
use std::net::IpAddr;

use dissector::wire::{AckClass, Psn};

use super::timeline::{Packet, Timeline};
use crate::results::{Evidence, Verdict, VerdictKind};
use crate::scenario::model::{ProbeExpect, PsnAt};
use crate::scenario::pattern;

/// What the target did with one probe, read from the wire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProbeAnswer {
    pub id: String,
    /// How many of the probe's frames are on the wire (of how many sent).
    pub on_wire: usize,
    pub sent: usize,
    /// The target's responses: their operation and AETH class, and their names.
    pub seen: Vec<(&'static str, Option<AckClass>, u64)>,
    pub responses: Vec<String>,
    /// The first response's PSN, relative to `next` when the probe went out.
    pub psn_offset: Option<i32>,
    /// From the probe's first frame to the first response.
    pub latency_ms: Option<f64>,
    /// Frame numbers: the probe's first, and the responses.
    pub frames: Vec<u64>,
}

impl ProbeAnswer {
    /// `NAK PSN Sequence Error (PSN next) after 0.41 ms`, `no answer (dropped)`.
    pub(crate) fn describe(&self) -> String {
        if self.on_wire == 0 {
            return format!("the probe is not on the wire ({} sent)", self.sent);
        }
        if self.responses.is_empty() {
            return "no answer (dropped)".into();
        }
        let mut s = self.responses.join(", ");
        if let Some(off) = self.psn_offset {
            s += &format!(" (PSN {})", PsnAt::Next(off));
        }
        if let Some(ms) = self.latency_ms {
            s += &format!(" after {ms:.2} ms");
        }
        s
    }
}

/// Each probe's frames on the wire, in step order, and what answered them. The
/// target may answer the first copy before the next copy is on the wire; the
/// probe's own copies do not end its answer.
pub(crate) fn answers(o: &Evidence, t: &Timeline) -> Vec<ProbeAnswer> {
    let frames: &[Packet] = &t.packets;
    let mut cursor = 0;
    let mut out = Vec::new();
    for p in &o.probes {
        let (Ok(src), Ok(dst)) = (p.src.parse::<IpAddr>(), p.dst.parse::<IpAddr>()) else {
            continue;
        };
        let (src, dst) = (Some(src), Some(dst));
        let mut a = ProbeAnswer {
            id: p.id.clone(),
            on_wire: 0,
            sent: p.frames.len(),
            seen: vec![],
            responses: vec![],
            psn_offset: None,
            latency_ms: None,
            frames: vec![],
        };
        // The probe's frames, in order, from where the last probe's ended.
        let mut want = p.frames.iter().peekable();
        let mut own = Vec::new();
        let mut i = cursor;
        while let (Some(w), Some(f)) = (want.peek(), frames.get(i)) {
            if f.src == src
                && f.dst == dst
                && f.dest_qp == w.dest_qp
                && f.psn.value() == w.psn
                && f.opcode.0 == w.opcode
                && !f.marks.injected()
            {
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
                if f.src == src && f.dst == dst && f.is_request && !f.marks.injected() {
                    break; // the prober's next request: what follows answers that
                }
                if f.src == dst && f.dst == src && !f.is_request && !f.cnp && !f.marks.injected() {
                    if a.responses.is_empty() {
                        a.latency_ms = Some(f.ts_ns.saturating_sub(t0) as f64 / 1e6);
                        a.psn_offset = Some(f.psn.diff(Psn::new(p.next)));
                    }
                    a.seen.push((f.op, f.ack_class(), f.held));
                    a.responses.push(f.response_name());
                    a.frames.push(f.number);
                }
            }
        }
        out.push(a);
    }
    out
}

pub(crate) fn verdict(
    e: &ProbeExpect,
    o: &Evidence,
    answers: &Result<Vec<ProbeAnswer>, String>,
    conditions: &[String],
) -> Verdict {
    let what = format!("probe {}", e.probe);
    let mut want = Vec::new();
    if let Some(r) = &e.responses {
        want.push(if r.is_empty() {
            "no answer".to_string()
        } else {
            format!("answered [{}]", pattern::describe(r))
        });
    }
    if let Some(p) = &e.psn {
        want.push(format!("PSN {p}"));
    }
    if let Some(ms) = e.within_ms {
        want.push(format!("within {ms} ms"));
    }
    let expected = want.join(", ");
    let answers = match answers {
        Ok(a) => a,
        Err(m) => return Verdict::new(VerdictKind::Probe, what, false, expected, m.clone()),
    };
    let Some(a) = answers.iter().find(|a| a.id == e.probe) else {
        return Verdict::new(
            VerdictKind::Probe,
            what,
            false,
            expected,
            "the probe was never sent (the run stopped before it)".into(),
        );
    };
    let Some(sent) = o.probes.iter().find(|p| p.id == e.probe) else {
        return Verdict::new(
            VerdictKind::Probe,
            what,
            false,
            expected,
            "the probe was never sent".into(),
        );
    };
    let mut ok = a.on_wire > 0;
    if let Some(r) = &e.responses {
        ok &= pattern::matches_sequence(r, &a.seen, &|p, x| {
            p.matches(x.0, x.1, &|c| super::Timeline::holds(conditions, x.2, c))
        });
    }
    if let Some(p) = &e.psn {
        let next = Psn::new(sent.next);
        let first = a.psn_offset.map(|off| next.add(off as u32));
        ok &= first == Some(p.resolve(next));
    }
    if let Some(ms) = e.within_ms {
        ok &= a.latency_ms.is_some_and(|l| l <= ms as f64);
    }
    let mut v = Verdict::new(
        VerdictKind::Probe,
        what,
        ok,
        expected,
        format!(
            "{}; frames {}",
            a.describe(),
            a.frames.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    );
    if a.on_wire < a.sent {
        v.detail =
            Some(format!("only {} of the {} frames sent are on the wire", a.on_wire, a.sent));
    }
    v
}
