//! A scenario's wire in a normal form: the text a regression suite keeps and
//! compares (`roce suite --snapshots`), so that a change no expectation names
//! still shows.
//!
//! Per QP and direction, the requests in the order sent and then the responses in
//! the order sent (how the two interleave is the run's timing, not the device's),
//! each frame by its operation, BTH flags, payload length, AETH and MSN, with every
//! number a run draws anew replaced: PSNs from the requester's starting PSN, VAs
//! from the start of the MR their R_Key (or, for a window's, their address) falls
//! in, R_Keys, QPNs and addresses by the scenario's names. The switch's marks are
//! kept, less when a held frame arrived, their rules' QPs by name. Left out, each
//! for its reason: times; early ACK-timer resends and what only they drew (the
//! judge sets them aside, [`super::Pair::early`]); the frames of a QP paced by the
//! run (a stream, a fault drawn by `prob`: how many resends and RNR NAKs depends on
//! the run's pace); and rdma_cm's DREQ and DREP, which race the end of the
//! recording. PSNs count from the starting PSN the agent set, or, where rdma_cm
//! chose it, from the first request's.
//!
//! Owns: [`normal`]. Imports: the judge's pairs and timeline, the scenario model,
//! the run's evidence.
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::net::IpAddr;

use lab::mark::{Mark, Marks};

use super::timeline::{Packet, Timeline};
use crate::results::Evidence;
use crate::scenario::Scenario;

/// The first line of every snapshot: what it is and which form (a later form
/// is a change of its own, said as such).
pub(crate) const HEADER: &str = "# roce wire snapshot, form 1: PSNs from the requester's first; VAs from the start of their MR; times left out";

/// The normal form of the wire `t` of scenario `sc` run as `o` says.
pub(crate) fn normal(sc: &Scenario, o: &Evidence, t: &Timeline) -> String {
    let mut out = format!("{HEADER}\n# {}\n", sc.name);
    let mut shown: HashSet<u64> = HashSet::new();
    // A rule's QPs in a switch mark (`qp=0x1b4`, `reply-qp=0x1b6`), by name.
    let named_marks = |m: &Marks| named_qps(&marks(m), o);
    for q in &sc.qps {
        for (from, to) in [(&q.between[0], &q.between[1]), (&q.between[1], &q.between[0])] {
            let Some(d) = super::direction(o, q, from, to, t) else { continue };
            let aside: HashSet<u64> = d
                .pair(q)
                .early
                .iter()
                .flat_map(|e| e.frames.iter().chain(&e.answers))
                .copied()
                .collect();
            // Every frame of the direction, the switch's copies and injections
            // included (their marks say what they are).
            let reqs = &d.reqs;
            let resps: Vec<&Packet> =
                d.back.iter().copied().filter(|f| !f.is_request && !f.op.is_empty()).collect();
            shown.extend(reqs.iter().chain(&resps).map(|f| f.number));
            if reqs.is_empty() && resps.is_empty() {
                continue;
            }
            // The QP's starting PSN as its agent set it, unless no request
            // carries it (rdma_cm picks its own): then the first request's.
            let base = match (d.first_psn, reqs.first()) {
                (Some(b), Some(first)) if !reqs.iter().any(|f| f.psn == b) => Some(first.psn),
                (b, _) => b,
            };
            let regions = Regions::of(o, to);
            let _ = writeln!(out, "\nqp {} {from} → {to}", q.name);
            if super::observe::paced_by_the_run(sc, q) {
                let _ = writeln!(out, "  paced by the run: its frames are not listed");
                continue;
            }
            for (what, frames) in [("requests", reqs), ("responses", &resps)] {
                let _ = writeln!(out, "  {what}");
                for f in frames.iter().filter(|f| !aside.contains(&f.number)) {
                    let line = line(f, base, &regions);
                    let _ = writeln!(out, "    {line}{}", named_marks(&f.marks));
                }
            }
        }
    }
    // What no QP of the scenario sent or answered: connection management, probes
    // to QPs nobody has.
    let names: BTreeMap<IpAddr, &str> =
        o.endpoints.iter().filter_map(|(n, f)| Some((f.ip.parse().ok()?, n.as_str()))).collect();
    let host = |a: Option<IpAddr>| a.and_then(|a| names.get(&a).copied()).unwrap_or("?");
    // The disconnect races the end of the recording: left out.
    let teardown = |f: &Packet| f.mad.as_deref().is_some_and(|m| m == "CM DREQ" || m == "CM DREP");
    let others: Vec<&Packet> =
        t.packets.iter().filter(|f| !shown.contains(&f.number) && !teardown(f)).collect();
    if !others.is_empty() {
        let _ = writeln!(out, "\nother");
        for f in others {
            let what = f.mad.clone().unwrap_or_else(|| f.response_name());
            let _ = writeln!(
                out,
                "    {} → {} {what}{}",
                host(f.src),
                host(f.dst),
                named_marks(&f.marks)
            );
        }
    }
    out
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

/// One frame, its marks left to the caller: `RDMA WRITE Only  psn +1 A len 8 →
/// target+8 dma 8`.
fn line(f: &Packet, base: Option<dissector::wire::Psn>, regions: &Regions) -> String {
    let h = &f.hdr;
    let mut s = format!("{:<30}", f.response_name());
    match base {
        Some(b) => {
            let _ = write!(s, " psn {:+}", f.psn.diff(b));
        }
        None => s.push_str(" psn ?"),
    }
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
    if let Some((va, rkey, dma)) = h.reth {
        let _ = write!(s, " → {} dma {dma}", regions.name(va, rkey));
    }
    if let Some((va, rkey)) = h.atomic {
        let _ = write!(s, " → {}", regions.name(va, rkey));
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

/// `text` with every `qp=0x…` a QP's name (`qp=q`). A rule `dir=a>b` names
/// b's QP with `qp=` and a's with `reply-qp=`; without a direction the QPs of
/// both ends are looked in (names joined by `|` where both have the number);
/// `?` for a number no QP of the scenario had.
pub(super) fn named_qps(text: &str, o: &Evidence) -> String {
    const KEY: &str = "qp=0x";
    let dir = text
        .split_once("dir=")
        .and_then(|(_, r)| r.split(|c: char| c.is_whitespace() || c == '`').next())
        .and_then(|d| d.split_once('>'));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let reply = rest[..at].ends_with("reply-");
        out.push_str(&rest[..at + 3]);
        let hex = &rest[at + KEY.len()..];
        let end = hex.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(hex.len());
        let ends: Vec<&str> = match dir {
            Some((from, _)) if reply => vec![from],
            Some((_, to)) => vec![to],
            None => o.endpoints.keys().map(String::as_str).collect(),
        };
        let mut names: Vec<&str> = u32::from_str_radix(&hex[..end], 16)
            .map(|n| {
                ends.iter()
                    .filter_map(|e| o.endpoints.get(*e))
                    .flat_map(|f| f.qps.iter().filter(move |x| x.qpn == n))
                    .map(|x| x.name.as_str())
                    .collect()
            })
            .unwrap_or_default();
        names.sort_unstable();
        names.dedup();
        out.push_str(if names.is_empty() { "?" } else { "" });
        out.push_str(&names.join("|"));
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
