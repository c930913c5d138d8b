//! What answered each crafted probe: its frames found on the wire (in step order),
//! and every response from the target to the prober after it, up to the prober's
//! next request.
//!
//! Owns: [`ProbeAnswer`], [`answers`], the probes' own [`frame_numbers`], their [`verdict`], and
//! [`writes_landed`] (the memory acknowledged probe WRITEs must hold). Imports:
//! `super::timeline`, the results' outcome and verdicts, the scenario model and
//! patterns, the agent protocol's actions, dissector's PSN, opcodes and ACK class.
use std::collections::HashSet;
use std::net::IpAddr;

use dissector::wire::opcode::Kind;
use dissector::wire::{AckClass, Opcode, Psn, Transport};

use super::timeline::{Packet, Timeline};
use crate::protocol::{Action, ProbeSent};
use crate::results::{Evidence, Verdict, VerdictKind};
use crate::scenario::model::{MemoryExpect, ProbeExpect, PsnAt, Scenario, Step};
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
        let Some((src, dst, own)) = own_frames(p, frames, &mut cursor) else {
            continue;
        };
        let mut a = ProbeAnswer {
            id: p.id.clone(),
            on_wire: own.len(),
            sent: p.frames.len(),
            seen: vec![],
            responses: vec![],
            psn_offset: None,
            latency_ms: None,
            frames: vec![],
        };
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

/// The frame numbers of every probe's own frames, its copies included: what the
/// prober sent, never a QP's requester (so never one of its timer resends).
pub(crate) fn frame_numbers(o: &Evidence, t: &Timeline) -> HashSet<u64> {
    let mut cursor = 0;
    o.probes
        .iter()
        .filter_map(|p| own_frames(p, &t.packets, &mut cursor))
        .flat_map(|(_, _, own)| own.into_iter().map(|i| t.packets[i].number))
        .collect()
}

/// Probe `p`'s frames on the wire, in order, looked for from `cursor` on
/// (where the last probe's ended, which it moves past them): the prober's and
/// the target's addresses, and the frames' indices. None when the agent's
/// addresses do not read.
fn own_frames(
    p: &ProbeSent,
    frames: &[Packet],
    cursor: &mut usize,
) -> Option<(Option<IpAddr>, Option<IpAddr>, Vec<usize>)> {
    let (Ok(src), Ok(dst)) = (p.src.parse::<IpAddr>(), p.dst.parse::<IpAddr>()) else {
        return None;
    };
    let (src, dst) = (Some(src), Some(dst));
    let mut want = p.frames.iter().peekable();
    let mut own = Vec::new();
    let mut i = *cursor;
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
            *cursor = i + 1;
        }
        i += 1;
    }
    Some((src, dst, own))
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

/// How a [`writes_landed`] verdict ends its name: `memory of MR X on E: the
/// probe WRITEs it acknowledged` (the fuzzer's memory oracle reads it).
pub(crate) const ACKNOWLEDGED_WRITES: &str = ": the probe WRITEs it acknowledged";

/// `probe_writes = "landed"`: every crafted RDMA WRITE into MR `e.mr` of `e.on`
/// that the target acknowledged placed exactly the payload the prober sent,
/// where its RETH aimed it, as far as nothing later wrote there. A byte is only
/// judged where the wire settles what it must hold: an RC WRITE Only (with or
/// without immediate) sent in sequence to the MR's own rkey, answered first by
/// an ACK of its own PSN. A WRITE the target NAKed leaves the bytes as they
/// were; one it left unanswered, sent out of sequence, or to another rkey, an
/// atomic, and anything else that may write there (a WRITE Middle or Last after
/// a First into it, a SEND into a receive of it, a verb or stream of the run)
/// makes what it may have covered unknown.
pub(crate) fn writes_landed(
    sc: &Scenario,
    e: &MemoryExpect,
    o: &Evidence,
    answers: &Result<Vec<ProbeAnswer>, String>,
) -> Verdict {
    let what = format!("memory of MR {} on {}{ACKNOWLEDGED_WRITES}", e.mr, e.on);
    let expected = "each acknowledged WRITE's payload where it was aimed".to_string();
    let fail = |actual: String| {
        Verdict::new(VerdictKind::Memory, what.clone(), false, expected.clone(), actual)
    };
    let answers = match answers {
        Ok(a) => a,
        Err(m) => return fail(m.clone()),
    };
    let Some(mr) = sc.mrs.iter().find(|m| m.on == e.on && m.name == e.mr) else {
        return fail("no such MR".into());
    };
    let Some(now) = o.memory.get(&e.on).and_then(|m| m.get(&e.mr)) else {
        return fail("never read (the run stopped before)".into());
    };
    let mut model = Placed::new(mr.size as usize);
    let mut first_into_it = false;
    let receives_into_it = sc.steps.iter().any(|s| match s {
        Step::Act {
            on,
            action: Action::PostRecv { sges, .. } | Action::PostSrqRecv { sges, .. },
        } => *on == e.on && sges.iter().any(|g| g.mr == e.mr),
        _ => false,
    });
    for step in &sc.steps {
        let p = match step {
            Step::Act { on, action: Action::Probe(p) } if *on != e.on => p,
            Step::Act { on, action: Action::Post { verb, sges, .. } } => {
                let theirs = *on != e.on && verb.remote().is_some_and(|r| r.mr == e.mr);
                let mine = *on == e.on && sges.iter().any(|g| g.mr == e.mr);
                if theirs || mine {
                    model.forget_all();
                }
                continue;
            }
            Step::Stream(s) if s.peer == e.on || s.on == e.on => {
                model.forget_all();
                continue;
            }
            _ => continue,
        };
        // By its id, as every probe verdict finds it (probes `e.on` sends itself
        // are in `o.probes` too). One the run never sent (it stopped) placed
        // nothing, nor did any after it.
        let Some(ps) = o.probes.iter().find(|x| x.id == p.id) else { break };
        if !sc.qps.iter().any(|q| q.name == p.qp && q.between.contains(&e.on)) {
            continue;
        }
        let answer = answers.iter().find(|a| a.id == ps.id);
        let first = answer.and_then(|a| a.seen.first());
        let nak = matches!(first, Some((_, Some(AckClass::Nak(_) | AckClass::RnrNak), _)));
        let info = Opcode(p.opcode).info();
        let is = |k: Kind| info.is_some_and(|i| i.is(k));
        let Some(remote) = p.remote.as_ref().filter(|r| r.mr == e.mr) else {
            // Without a RETH it writes where an earlier First aimed, or into a receive.
            let continues = is(Kind::WRITE) && !is(Kind::FIRST);
            if !nak && ((continues && first_into_it) || (is(Kind::SEND) && receives_into_it)) {
                model.forget_all();
            }
            continue;
        };
        if is(Kind::READ) {
            continue;
        }
        first_into_it |= is(Kind::WRITE) && is(Kind::FIRST) && !is(Kind::LAST);
        // One that starts before the MR lands in none of it, if anywhere: the
        // guard regions' check (`outside`) judges that, not this model.
        let Ok(off) = usize::try_from(remote.offset) else { continue };
        let len = p.payload.0.len().max(p.dma_len.unwrap_or(0) as usize).max(8);
        let settled = is(Kind::WRITE)
            && is(Kind::ONLY)
            && info.is_some_and(|i| i.transport == Transport::Rc)
            && remote.rkey.is_none()
            && remote.mw.is_none()
            && p.dma_len.is_none_or(|d| d as usize == p.payload.0.len())
            && ps.frames.first().is_some_and(|f| f.psn == ps.next)
            && answer.is_some_and(|a| a.on_wire > 0 && a.psn_offset == Some(0))
            && matches!(first, Some((_, Some(AckClass::Ack), _)));
        if settled {
            model.place(off, &p.payload.0, &ps.id);
        } else if !nak {
            model.forget(off, len);
        }
    }
    let judged = model.judged();
    match model.first_wrong(now) {
        None => Verdict::new(
            VerdictKind::Memory,
            what,
            true,
            expected,
            if judged == 0 {
                "no acknowledged probe WRITE settles a byte of it".into()
            } else {
                format!("{judged} bytes as the acknowledged WRITEs placed them")
            },
        ),
        Some(w) => fail(format!(
            "{} of {judged} bytes differ; the first at offset {}: probe {}'s acknowledged WRITE put {:02x} there, the MR holds {}",
            w.count,
            w.offset,
            w.probe,
            w.want,
            w.got.map_or("nothing (it is shorter)".into(), |g| format!("{g:02x}"))
        )),
    }
}

/// What acknowledged WRITEs placed in an MR, byte by byte: the byte and the probe
/// that put it there, or `None` where nothing settles it.
struct Placed {
    bytes: Vec<Option<(u8, String)>>,
}

/// The first byte that is not what was placed, and how many are not.
struct Wrong {
    offset: usize,
    want: u8,
    got: Option<u8>,
    probe: String,
    count: usize,
}

impl Placed {
    fn new(size: usize) -> Placed {
        Placed { bytes: vec![None; size] }
    }

    fn place(&mut self, off: usize, payload: &[u8], probe: &str) {
        for (i, b) in payload.iter().enumerate() {
            if let Some(x) = self.bytes.get_mut(off + i) {
                *x = Some((*b, probe.to_string()));
            }
        }
    }

    fn forget(&mut self, off: usize, len: usize) {
        for x in self.bytes.iter_mut().skip(off).take(len) {
            *x = None;
        }
    }

    fn forget_all(&mut self) {
        self.bytes.iter_mut().for_each(|x| *x = None);
    }

    fn judged(&self) -> usize {
        self.bytes.iter().filter(|x| x.is_some()).count()
    }

    fn first_wrong(&self, now: &[u8]) -> Option<Wrong> {
        let mut out: Option<Wrong> = None;
        for (i, x) in self.bytes.iter().enumerate() {
            let Some((want, probe)) = x else { continue };
            let got = now.get(i).copied();
            if got == Some(*want) {
                continue;
            }
            match &mut out {
                Some(w) => w.count += 1,
                None => {
                    out =
                        Some(Wrong { offset: i, want: *want, got, probe: probe.clone(), count: 1 })
                }
            }
        }
        out
    }
}
