//! A wire in a normal form: the text a regression suite keeps and compares
//! (`roce suite --snapshots`), so that a change no expectation names still shows;
//! and the same form for any capture (`roce decode --normalised`).
//!
//! Per QP and direction, the requests in the order sent and then the responses in
//! the order sent (how the two interleave is the run's timing, not the device's),
//! each frame by its operation, BTH flags, payload length, AETH (an RNR NAK's
//! timer, an ACK's credits unless unlimited) and MSN, with every number a run
//! draws anew replaced: PSNs from the requester's starting PSN, VAs from the start
//! of the MR their R_Key (or, for a window's, their address) falls in, R_Keys, QPNs
//! and addresses by the scenario's names. The switch's marks are kept, less when a
//! held frame arrived, their rules' QPs by name; what the switch answered or
//! injected in a QP's place is listed after the QP's own frames (which it answers
//! first is the run's timing).
//!
//! What the run's timing shapes is shown as such, folded ([`fold`]): the requests
//! sent on past a PSN the requester then went back to (how far it got before the
//! NAK or its timer is the race between the two ends), and a run of lines repeated
//! over and over (an RNR NAK and the resend it draws, until a receive is posted or
//! the run ends) once, with a line that says it repeats. Left out, each for its
//! reason: times; early ACK-timer resends and what only they drew (the judge sets
//! them aside, [`super::Pair::early`]; a probe's copies are the prober's, never
//! set aside); the frames of a QP paced by the run (a
//! stream, a fault drawn by `prob`: how many resends and RNR NAKs depends on the
//! run's pace); and rdma_cm's DREQ and DREP, which race the end of the recording.
//! PSNs count from the starting PSN the agent set, or, where rdma_cm chose it, from
//! the first request's.
//!
//! A capture knows no scenario: its hosts are named `A`, `B`, … and its QP pairs
//! `q1`, `q2`, … in the order they first appear, its MRs `mr1`, … by R_Key in the
//! same order (VAs from the lowest seen with that R_Key), and each direction's
//! PSNs count from its first request's; requests and responses are paired as
//! `roce flows` pairs them (from CM, else from the PSNs).
//!
//! Owns: [`normal`], [`capture`], the fold and the form read back ([`read`]). Imports: the judge's pairs and
//! timeline, the scenario model, the run's evidence, the opt-in fields' names.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::net::IpAddr;

use dissector::wire::{AckKind, Psn};
use lab::mark::{Mark, Marks};

use super::timeline::{Packet, Timeline};
use crate::results::snapshots::Fields;
use crate::results::Evidence;
use crate::scenario::Scenario;

pub(crate) mod read;

/// The first line of every snapshot: what it is and which form (a later form is
/// a change of its own, said as such: [`crate::results::snapshots::Store`]).
pub(crate) const HEADER: &str = "# roce wire snapshot, form 2: PSNs from the requester's first; VAs from the start of their MR; times left out; what timing shapes folded";

/// The normal form of the wire `t` of scenario `sc` run as `o` says, with the
/// opt-in `fields`.
pub(crate) fn normal(sc: &Scenario, o: &Evidence, t: &Timeline, fields: Fields) -> String {
    let mut w = Writer::new(&sc.name, fields);
    let mut shown: HashSet<u64> = HashSet::new();
    let probes = super::probes::frame_numbers(o, t);
    // A rule's QPs in a switch mark (`qp=0x1b4`, `reply-qp=0x1b6`), by name.
    let named_marks = |m: &Marks| named_qps(&marks(m), o);
    for q in &sc.qps {
        for (from, to) in [(&q.between[0], &q.between[1]), (&q.between[1], &q.between[0])] {
            let Some(d) = super::direction(o, q, from, to, t) else { continue };
            // A probe's copies are the prober's, never a timer resend: listed
            // whether or not the target answered between them (that is timing).
            let aside = d.pair(q).set_aside(&probes);
            // Every frame of the direction, the switch's copies and injections
            // included (their marks say what they are).
            let resps: Vec<&Packet> =
                d.back.iter().copied().filter(|f| !f.is_request && !f.op.is_empty()).collect();
            shown.extend(d.reqs.iter().chain(&resps).map(|f| f.number));
            if d.reqs.is_empty() && resps.is_empty() {
                continue;
            }
            // The QP's starting PSN as its agent set it, unless no request
            // carries it (rdma_cm picks its own): then the first request's.
            let base = match (d.first_psn, d.reqs.first()) {
                (Some(b), Some(first)) if !d.reqs.iter().any(|f| f.psn == b) => Some(first.psn),
                (b, _) => b,
            };
            let title = format!("qp {} {from} → {to}", q.name);
            if super::observe::paced_by_the_run(sc, q) {
                let _ = writeln!(w.out, "\n{title}\n  paced by the run: its frames are not listed");
                continue;
            }
            let keep = |f: &&Packet| !aside.contains(&f.number);
            let reqs: Vec<&Packet> = d.reqs.iter().copied().filter(keep).collect();
            let resps: Vec<&Packet> = resps.into_iter().filter(keep).collect();
            let regions = Regions::of(o, to);
            let names = Names { va: &|va, rkey| regions.name(va, rkey), marks: &named_marks };
            w.direction(&title, &reqs, &resps, base, &names);
        }
    }
    // What no QP of the scenario sent or answered: connection management, probes
    // to QPs nobody has.
    let hosts: BTreeMap<IpAddr, &str> =
        o.endpoints.iter().filter_map(|(n, f)| Some((f.ip.parse().ok()?, n.as_str()))).collect();
    let host = |a: Option<IpAddr>| a.and_then(|a| hosts.get(&a).map(|h| h.to_string()));
    let others: Vec<&Packet> = t.packets.iter().filter(|f| !shown.contains(&f.number)).collect();
    w.others(&others, &host, &named_marks);
    w.out
}

/// The normal form of a capture no scenario drew (`roce decode --normalised`):
/// the timeline `t` with the analyzer's `flows` over the same capture, named as
/// the module says.
pub(crate) fn capture(
    title: &str,
    t: &Timeline,
    flows: &dissector::flow::Analyzer,
    fields: Fields,
) -> String {
    let mut w = Writer::new(title, fields);
    let mut hosts: HashMap<IpAddr, String> = HashMap::new();
    for a in t.packets.iter().flat_map(|f| [f.src, f.dst]).flatten() {
        let n = hosts.len();
        hosts.entry(a).or_insert_with(|| letter(n));
    }
    let host = |a: Option<IpAddr>| a.and_then(|a| hosts.get(&a).cloned());
    let hostname = |a: IpAddr| host(Some(a)).unwrap_or_else(|| "?".into());
    // The request flows (a flow keyed by a DETH's source QP is a UD or MAD
    // flow: its frames are datagrams, listed alone) in the order they began,
    // each with its pair; a pair of QPs named once for both its directions.
    let all = flows.flows();
    let mut order: Vec<usize> = (0..all.len()).filter(|&i| all[i].counters.requests > 0).collect();
    order.sort_by_key(|&i| all[i].first_frame);
    let mut pair_names: HashMap<(IpAddr, u32, IpAddr, u32), String> = HashMap::new();
    // Each QPN's pair names (a mark names a QP by number alone: the same number
    // on two hosts is both).
    let mut qpns: HashMap<u32, Vec<String>> = HashMap::new();
    // The capture's RoCE frames by (source, destination, destination QP), each
    // list in capture order: one pass, not one per flow.
    let mut by_key: HashMap<FrameKey, Vec<&Packet>> = HashMap::new();
    for f in &t.packets {
        by_key.entry((f.src, f.dst, f.dest_qp)).or_default().push(f);
    }
    let to = |src: IpAddr, dst: IpAddr, qp: u32| {
        by_key.get(&(Some(src), Some(dst), qp)).map_or(&[][..], Vec::as_slice)
    };
    let mut shown: HashSet<u64> = HashSet::new();
    let mut directions = Vec::new();
    for i in order {
        let k = all[i].key;
        let back = all[i].paired.and_then(|p| all.get(p)).map(|p| p.key.dest_qp);
        // A pair's name whichever side it is seen from first.
        let ends = match back {
            Some(m) => {
                let (x, y) = ((k.src, m), (k.dst, k.dest_qp));
                if x <= y {
                    (x.0, x.1, y.0, y.1)
                } else {
                    (y.0, y.1, x.0, x.1)
                }
            }
            // A datagram flow's source QP is its DETH's (u32::MAX for one
            // that has none).
            None => (k.src, k.src_qp, k.dst, k.dest_qp),
        };
        let n = pair_names.len();
        let name = pair_names.entry(ends).or_insert_with(|| format!("q{}", n + 1)).clone();
        for qpn in [Some(k.dest_qp), back].into_iter().flatten() {
            let names = qpns.entry(qpn).or_default();
            if !names.contains(&name) {
                names.push(name.clone());
            }
        }
        let ud = k.src_qp != u32::MAX;
        let reqs: Vec<&Packet> = to(k.src, k.dst, k.dest_qp)
            .iter()
            .copied()
            .filter(|f| {
                f.mad.is_none()
                    && (f.is_request || f.op.is_empty())
                    && (!ud || f.src_qp == Some(k.src_qp))
            })
            .collect();
        let resps: Vec<&Packet> = match back {
            Some(m) => to(k.dst, k.src, m)
                .iter()
                .copied()
                .filter(|f| !f.is_request && !f.op.is_empty())
                .collect(),
            None => Vec::new(),
        };
        if reqs.is_empty() {
            continue;
        }
        shown.extend(reqs.iter().chain(&resps).map(|f| f.number));
        let title = format!("qp {name} {} → {}", hostname(k.src), hostname(k.dst));
        directions.push((title, reqs, resps));
    }
    // MRs by (responder, R_Key) in the order first named, VAs from the lowest.
    let mut mrs: Vec<((Option<IpAddr>, u32), u64)> = Vec::new();
    for f in t.packets.iter().filter(|f| f.is_request) {
        let Some((va, rkey)) = f.hdr.reth.map(|(va, k, _)| (va, k)).or(f.hdr.atomic) else {
            continue;
        };
        match mrs.iter_mut().find(|(k, _)| *k == (f.dst, rkey)) {
            Some((_, low)) => *low = (*low).min(va),
            None => mrs.push(((f.dst, rkey), va)),
        }
    }
    let named_marks = |m: &Marks| {
        let text = marks(m);
        replace_qpns(&text, |n| {
            let mut names: Vec<&str> =
                qpns.get(&n).map(|v| v.iter().map(String::as_str).collect()).unwrap_or_default();
            names.sort_unstable();
            names.join("|")
        })
    };
    for (title, reqs, resps) in directions {
        let dst = reqs.first().and_then(|f| f.dst);
        let va = |va: u64, rkey: u32| match mrs.iter().position(|(k, _)| *k == (dst, rkey)) {
            Some(i) => format!("mr{}+{}", i + 1, va - mrs[i].1),
            None => "mr?".into(),
        };
        let base = reqs.first().map(|f| f.psn);
        let names = Names { va: &va, marks: &named_marks };
        w.direction(&title, &reqs, &resps, base, &names);
    }
    let others: Vec<&Packet> = t.packets.iter().filter(|f| !shown.contains(&f.number)).collect();
    w.others(&others, &host, &named_marks);
    if let Some(e) = &t.damaged {
        let _ = writeln!(w.out, "\nthe capture ends damaged: {e}");
    }
    w.out
}

/// A RoCE frame's source, destination and destination QP.
type FrameKey = (Option<IpAddr>, Option<IpAddr>, u32);

/// `A`, `B`, …, `Z`, then `H27`, … : the `n`th host (from 0).
fn letter(n: usize) -> String {
    match u8::try_from(n).ok().filter(|&n| n < 26) {
        Some(n) => char::from(b'A' + n).to_string(),
        None => format!("H{}", n + 1),
    }
}

/// How one form names what a run draws anew.
struct Names<'a> {
    /// A RETH's or AtomicETH's VA and R_Key: `target+8`.
    va: &'a dyn Fn(u64, u32) -> String,
    /// The switch's marks on a frame, their rules' QPs by name: ` [dropped …]`.
    marks: &'a dyn Fn(&Marks) -> String,
}

/// The text being written, and the names the opt-in fields give as they go.
struct Writer {
    out: String,
    fields: Fields,
    /// UDP source ports, `p1`, `p2`, … in the order first seen (the RoCEv2
    /// port is said as itself).
    ports: HashMap<u16, usize>,
}

impl Writer {
    fn new(title: &str, fields: Fields) -> Writer {
        let mut out = format!("{HEADER}{}\n# {title}\n", fields.header());
        out.reserve(4096);
        Writer { out, fields, ports: HashMap::new() }
    }

    /// One direction of one QP: its requests, then its responses (each in capture
    /// order), each folded.
    fn direction<'a>(
        &mut self,
        title: &str,
        reqs: &[&'a Packet],
        resps: &[&'a Packet],
        base: Option<Psn>,
        names: &Names,
    ) {
        let _ = writeln!(self.out, "\n{title}");
        // Each sender's frames in the order it sent them: the QP's own (what
        // the switch dropped, withheld or copied included), then what the switch
        // answered or injected in its place. How the two interleave is the run's
        // timing: the switch answers a request at once, the responder later.
        let by_sender = |frames: &[&'a Packet]| -> Vec<&'a Packet> {
            let switch = |f: &&Packet| {
                f.marks.synthesized() || f.marks.0.iter().any(|m| matches!(m, Mark::Injected))
            };
            let (theirs, own): (Vec<&Packet>, Vec<&Packet>) =
                frames.iter().copied().partition(switch);
            own.into_iter().chain(theirs).collect()
        };
        let (sent, answered) = (by_sender(reqs), by_sender(resps));
        for (what, frames) in [("requests", &sent[..]), ("responses", &answered[..])] {
            let _ = writeln!(self.out, "  {what}");
            let back_to = if what == "requests" {
                fold::sent_past_a_go_back(frames, resps)
            } else {
                vec![None; frames.len()]
            };
            let mut lines = Vec::with_capacity(frames.len());
            let mut i = 0;
            while i < frames.len() {
                if let Some(s) = back_to[i] {
                    lines.push(format!(
                        "⋯ sent on past psn {} before going back to it (how far: the run's timing)",
                        psn(s, base)
                    ));
                    while i < frames.len() && back_to[i] == Some(s) {
                        i += 1;
                    }
                    continue;
                }
                let f = frames[i];
                let mut l = line(f, base, names.va);
                self.extra(&mut l, f);
                l.push_str(&(names.marks)(&f.marks));
                lines.push(l);
                i += 1;
            }
            for l in fold::loops(lines, fold::BLOCK) {
                let _ = writeln!(self.out, "    {l}");
            }
        }
    }

    /// The frames no QP of the run sent or answered, by host (the disconnect,
    /// which races the end of the recording, left out).
    fn others(
        &mut self,
        frames: &[&Packet],
        host: &dyn Fn(Option<IpAddr>) -> Option<String>,
        marks: &dyn Fn(&Marks) -> String,
    ) {
        let teardown =
            |f: &Packet| f.mad.as_deref().is_some_and(|m| m == "CM DREQ" || m == "CM DREP");
        let lines: Vec<String> = frames
            .iter()
            .filter(|f| !teardown(f))
            .map(|f| {
                let what = f.mad.clone().unwrap_or_else(|| f.response_name());
                let h = |a| host(a).unwrap_or_else(|| "?".into());
                format!("{} → {} {what}{}", h(f.src), h(f.dst), marks(&f.marks))
            })
            .collect();
        if !lines.is_empty() {
            let _ = writeln!(self.out, "\nother");
            // A MAD sent again is folded; a handshake is not taken for a
            // repeat of the one before (two connections are two).
            for l in fold::loops(lines, 1) {
                let _ = writeln!(self.out, "    {l}");
            }
        }
    }

    /// The opt-in fields of frame `f`, onto its line.
    fn extra(&mut self, l: &mut String, f: &Packet) {
        if self.fields.dsfield {
            let _ = match (f.hdr.dscp, f.hdr.ecn) {
                (Some(d), Some(e)) => write!(l, " dscp {d} ecn {e}"),
                _ => write!(l, " dscp ?"),
            };
        }
        if self.fields.udp_srcport {
            match f.hdr.udp_src {
                Some(p) if p == dissector::wire::udp::ROCE_V2_PORT => {
                    let _ = write!(l, " sport {p}");
                }
                Some(p) => {
                    let n = self.ports.len();
                    let k = *self.ports.entry(p).or_insert(n + 1);
                    let _ = write!(l, " sport p{k}");
                }
                None => l.push_str(" sport ?"),
            }
        }
    }
}

/// `+3` from `base`; `?` without one.
fn psn(p: Psn, base: Option<Psn>) -> String {
    base.map_or_else(|| "?".into(), |b| format!("{:+}", p.diff(b)))
}

/// What the run's timing shapes, shown once and said as such.
mod fold {
    use super::{Packet, Psn};

    /// How far back one go-back is looked for the transmission it returns to.
    const WINDOW: usize = 1024;
    /// How near a line must come again to be part of a loop, in a QP's list.
    pub(super) const BLOCK: usize = 8;

    /// For each request, the PSN `s` when it is one the requester sent on past
    /// `s` and then went back to `s` on a NAK or RNR NAK of `s` (among `resps`):
    /// sent after `s`'s last transmission, before the go-back, its own PSN past
    /// `s`, no switch mark on it (a marked frame is what a rule did: shown). How
    /// many such there are is the race between the requester's sending and the
    /// NAK that turned it back. (Behind a timer's go-back the requester had sent
    /// what it had: not folded.) `resps` in capture order: the NAK is looked
    /// for between two frame numbers, not in every response.
    pub(super) fn sent_past_a_go_back(reqs: &[&Packet], resps: &[&Packet]) -> Vec<Option<Psn>> {
        let naked = |s: Psn, after: u64, before: u64| {
            let from = resps.partition_point(|r| r.number <= after);
            resps[from..]
                .iter()
                .take_while(|r| r.number < before)
                .any(|r| r.psn == s && r.ack.is_some_and(|a| a.nak().is_some()))
        };
        let mut out = vec![None; reqs.len()];
        let mut highest: Option<Psn> = None;
        for (g, f) in reqs.iter().enumerate() {
            if highest.is_some_and(|h| !f.psn.after(h)) {
                let s = f.psn;
                // Back over what was sent past `s`, to its last transmission.
                let lo = g.saturating_sub(WINDOW);
                let mut k = g;
                while k > lo && reqs[k - 1].psn.after(s) {
                    k -= 1;
                }
                if k > lo && reqs[k - 1].psn == s && naked(s, reqs[k - 1].number, f.number) {
                    for (o, r) in out[k..g].iter_mut().zip(&reqs[k..g]) {
                        if r.marks.0.is_empty() {
                            *o = Some(s);
                        }
                    }
                }
            }
            if highest.is_none_or(|h| f.psn.after(h)) {
                highest = Some(f.psn);
            }
        }
        out
    }

    /// `lines` with each stretch of lines that keep coming back shown once: its
    /// lines each once, in the order they first came, and a line that says so.
    /// How many times they came, and in which order after the first round, is the
    /// run's timing: an RNR NAK and the resend it draws, round after round until
    /// a receive is posted or the run ends, now with the out-of-sequence NAK the
    /// frames sent past it drew and now without; duplicate ACKs. A stretch begins
    /// with a round: a line that comes again within `window` lines, every line
    /// between coming again as soon (in any order); it goes on while each line
    /// came within the last `window` lines, or comes again as soon with a line of
    /// the loop between. A go-back-N pass, which sends each PSN again once, is
    /// not a loop; a line that comes once is not folded: a duplicate where there
    /// was none still shows.
    pub(super) fn loops(lines: Vec<String>, window: usize) -> Vec<String> {
        use std::collections::HashMap;
        let n = lines.len();
        // Where each line comes next, and where it came last (as the scan goes).
        let mut next = vec![usize::MAX; n];
        let mut at: HashMap<&str, usize> = HashMap::new();
        for i in (0..n).rev() {
            if let Some(&j) = at.get(lines[i].as_str()) {
                next[i] = j;
            }
            at.insert(&lines[i], i);
        }
        let soon = |i: usize| next[i] != usize::MAX && next[i] - i <= window;
        // A round: from a line to where it comes again (within `window`), every
        // line of it coming again as soon.
        let repeats_at = |i: usize| soon(i) && (i..next[i]).all(soon);
        let mut last: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            if !repeats_at(i) {
                out.push(lines[i].clone());
                last.insert(&lines[i], i);
                i += 1;
                continue;
            }
            let start = i;
            let mut distinct: Vec<&str> = Vec::new();
            while i < n {
                let l = lines[i].as_str();
                let recent = last.get(l).is_some_and(|&j| j >= start && i - j <= window);
                // A line new to the loop joins it when it comes again with a
                // line of the loop between: another loop right after (the
                // duplicate ACKs after the RNR NAKs) stays its own.
                let interleaved =
                    || soon(i) && (i + 1..next[i]).any(|k| distinct.contains(&lines[k].as_str()));
                if i > start && !recent && !interleaved() {
                    break;
                }
                if !distinct.contains(&l) {
                    distinct.push(l);
                }
                last.insert(l, i);
                i += 1;
            }
            out.extend(distinct.iter().map(|l| l.to_string()));
            out.push(if distinct.len() == 1 {
                "⟳ the line above, repeated (how many times is left out: the run's timing)".into()
            } else {
                format!(
                    "⟳ the {} lines above, repeated in whatever order the run's timing gave (how many times is left out)",
                    distinct.len()
                )
            });
        }
        out
    }
}

/// The MRs of one endpoint, to name a RETH's VA and R_Key by.
struct Regions<'a> {
    mrs: &'a [crate::protocol::MrInfo],
}

impl<'a> Regions<'a> {
    fn of(o: &'a Evidence, ep: &str) -> Regions<'a> {
        Regions { mrs: o.endpoints.get(ep).map_or(&[][..], |f| &f.mrs) }
    }

    /// `target+8`: the MR the R_Key names (else the one the VA falls in, with
    /// `rkey other`), and the offset into it; `va ?` when none does.
    fn name(&self, va: u64, rkey: u32) -> String {
        let within = |m: &&crate::protocol::MrInfo| va >= m.addr && va - m.addr <= m.len;
        match self.mrs.iter().find(|m| m.rkey == rkey) {
            Some(m) if within(&m) => format!("{}+{}", m.name, va - m.addr),
            Some(m) => format!("{} va outside it", m.name),
            None => match self.mrs.iter().find(within) {
                Some(m) => format!("{}+{} (rkey other)", m.name, va - m.addr),
                None => "va and rkey of no MR".to_string(),
            },
        }
    }
}

/// One frame, its marks and opt-in fields left to the caller: `RDMA WRITE Only
/// psn +1 A len 8 → target+8 dma 8`.
fn line(f: &Packet, base: Option<Psn>, va: &dyn Fn(u64, u32) -> String) -> String {
    let h = &f.hdr;
    let mut s = format!("{:<30} psn {}", f.response_name(), psn(f.psn, base));
    for (on, flag) in [(h.solicited, "SE"), (h.mig_req, "M"), (h.ack_req, "A")] {
        if on {
            let _ = write!(s, " {flag}");
        }
    }
    if h.pad > 0 {
        let _ = write!(s, " pad {}", h.pad);
    }
    match h.len {
        Some(n) if n > 0 || f.is_request => {
            let _ = write!(s, " len {n}");
        }
        _ => {}
    }
    if let Some((addr, rkey, dma)) = h.reth {
        let _ = write!(s, " → {} dma {dma}", va(addr, rkey));
    }
    if let Some((addr, rkey)) = h.atomic {
        let _ = write!(s, " → {}", va(addr, rkey));
    }
    match f.ack {
        Some(AckKind::RnrNak { timer }) => {
            let _ = write!(s, " timer {timer}");
        }
        Some(AckKind::Ack { credits }) if credits != NO_CREDITS => {
            let _ = write!(s, " credits {credits}");
        }
        _ => {}
    }
    if let Some(m) = h.msn {
        let _ = write!(s, " msn {m}");
    }
    if h.immediate {
        s.push_str(" imm");
    }
    if h.invalidate.is_some() {
        s.push_str(" invalidate");
    }
    if f.ce {
        s.push_str(" CE");
    }
    if f.icrc_ok == Some(false) {
        s.push_str(" ICRC bad");
    }
    s
}

/// An ACK's credit field when the responder does not count credits (IBA
/// 9.7.5.1.3: "invalid"), which rxe always sends: left unsaid.
const NO_CREDITS: u8 = 0x1F;

/// `text` with every `qp=0x…` a QP's name (`qp=q`). A rule `dir=a>b` names
/// b's QP with `qp=` and a's with `reply-qp=`; without a direction the QPs of
/// both ends are looked in (names joined by `|` where both have the number);
/// `?` for a number no QP of the scenario had.
pub(super) fn named_qps(text: &str, o: &Evidence) -> String {
    let dir = text
        .split_once("dir=")
        .and_then(|(_, r)| r.split(|c: char| c.is_whitespace() || c == '`').next())
        .and_then(|d| d.split_once('>'));
    replace_qpns_with(text, |n, reply| {
        let ends: Vec<&str> = match dir {
            Some((from, _)) if reply => vec![from],
            Some((_, to)) => vec![to],
            None => o.endpoints.keys().map(String::as_str).collect(),
        };
        let mut names: Vec<&str> = ends
            .iter()
            .filter_map(|e| o.endpoints.get(*e))
            .flat_map(|f| f.qps.iter().filter(move |x| x.qpn == n))
            .map(|x| x.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names.join("|")
    })
}

/// `text` with every `qp=0x…` named by `name` (`?` where it gives nothing),
/// whichever end it is on.
fn replace_qpns(text: &str, name: impl Fn(u32) -> String) -> String {
    replace_qpns_with(text, |n, _| name(n))
}

/// `text` with every `qp=0x…` named by `name(number, after "reply-")`.
fn replace_qpns_with(text: &str, name: impl Fn(u32, bool) -> String) -> String {
    const KEY: &str = "qp=0x";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let reply = rest[..at].ends_with("reply-");
        out.push_str(&rest[..at + 3]);
        let hex = &rest[at + KEY.len()..];
        let end = hex.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(hex.len());
        let named =
            u32::from_str_radix(&hex[..end], 16).map(|n| name(n, reply)).unwrap_or_default();
        out.push_str(if named.is_empty() { "?" } else { &named });
        rest = &hex[end..];
    }
    out.push_str(rest);
    out
}

/// ` [dropped by rule 1 `…`: not delivered]`, without when a held frame arrived
/// (the run's timing); "" for a frame the switch left alone.
fn marks(m: &Marks) -> String {
    let kept: Vec<Mark> =
        m.0.iter().filter(|m| !matches!(m, Mark::Arrived { .. })).cloned().collect();
    if kept.is_empty() {
        String::new()
    } else {
        format!(" [{}]", Marks(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::fold;

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| l.to_string()).collect()
    }

    /// A loop is shown once whatever the count and whatever order its rounds
    /// came in: the same for 2 and 7 rounds, with and without the NAK some
    /// rounds drew; once is not a loop; lines around are kept.
    #[test]
    fn a_loop_is_shown_once() {
        let run = |rounds: &[&[&str]]| {
            let mut v = lines(&["ACK +0"]);
            for r in rounds {
                v.extend(lines(r));
            }
            v.push("ACK +3".into());
            fold::loops(v, fold::BLOCK)
        };
        let both: &[&str] = &["RNR NAK +1", "NAK +1"];
        let rnr: &[&str] = &["RNR NAK +1"];
        let two = run(&[both, both]);
        assert_eq!(two, run(&[both, both, both, both, both, both, both]));
        assert_eq!(two, run(&[both, rnr, rnr, both, rnr]));
        assert_eq!(two.len(), 5, "{two:?}");
        assert!(two[3].starts_with("⟳ the 2 lines above, repeated"), "{two:?}");
        assert_eq!(run(&[both]), lines(&["ACK +0", "RNR NAK +1", "NAK +1", "ACK +3"]));
        // A duplicate ACK is a loop of one line: still seen against none.
        let dup = fold::loops(lines(&["ACK +3", "ACK +3"]), fold::BLOCK);
        assert_eq!(dup.len(), 2);
        assert!(dup[1].starts_with("⟳ the line above"), "{dup:?}");
        // A loop right after another is its own: duplicate ACKs after RNR NAKs.
        let two = fold::loops(lines(&["RNR +3", "RNR +3", "ACK +3", "ACK +3"]), fold::BLOCK);
        assert_eq!(two.len(), 4, "{two:?}");
        assert_eq!((two[0].as_str(), two[2].as_str()), ("RNR +3", "ACK +3"));
        // A go-back-N pass is not a loop.
        let gbn = lines(&["W+0", "W+1 [dropped]", "W+2", "W+0", "W+1", "W+2", "W+3"]);
        assert_eq!(fold::loops(gbn.clone(), fold::BLOCK), gbn);
        let gbn = lines(&["W+4", "W+6", "W+7", "W+5", "W+6", "W+7"]);
        assert_eq!(fold::loops(gbn.clone(), fold::BLOCK), gbn);
        // Lines far apart are not a loop; with a window of 1 only neighbours are.
        let far = lines(&["A", "B", "C", "A"]);
        assert_eq!(fold::loops(far.clone(), 2), far);
        // A MAD sent again folds; a second connection's handshake does not.
        let cm = fold::loops(lines(&["REQ", "REQ", "REP", "RTU", "REQ", "REP", "RTU"]), 1);
        assert_eq!(cm.len(), 7, "{cm:?}");
        assert!(
            cm[1].starts_with("⟳ the line above") && cm[2] == "REP" && cm[4] == "REQ",
            "{cm:?}"
        );
    }
}

#[cfg(test)]
mod capture_tests {
    use dissector::capture::PcapWriter;
    use dissector::craft::{Conversation, Dir};
    use dissector::linktype::LinkType;

    /// Two UD senders on one host, to one QP, told apart only by their DETH's
    /// source QP: two pairs, each with its own datagram.
    #[test]
    fn datagrams_from_two_qps_of_one_host_are_two_pairs() {
        let mut c = Conversation::new();
        c.transport = dissector::wire::Transport::Ud;
        c.ud_send(Dir::AtoB, 16, None, 0x1111_1111);
        c.a.qpn = 0x99;
        c.ud_send(Dir::AtoB, 32, None, 0x1111_1111);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ud.pcap");
        let mut w =
            PcapWriter::new(std::fs::File::create(&path).unwrap(), LinkType::ETHERNET, 65535)
                .unwrap();
        for f in &c.frames {
            w.write_packet(f.ts_ns, &f.data, f.data.len() as u32).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let (t, flows) = super::super::timeline::read_with_flows(&path).unwrap();
        let text = super::capture("ud", &t, &flows, Default::default());
        let body = text.split_once("\n\n").map_or("", |x| x.1);
        assert_eq!(
            body,
            "qp q1 A → B\n  requests\n    SEND Only                      psn +0 len 16\n  responses\n\n\
             qp q2 A → B\n  requests\n    SEND Only                      psn +0 len 32\n  responses\n",
            "{text}"
        );
    }
}
