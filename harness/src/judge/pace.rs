//! A stream on the wire: each of its QPs' pace (`dissector::flow::pace`: messages
//! from their first packet to the response that acknowledged them, and how many
//! were unacknowledged at once) and resends (`dissector::flow::recovery`), put
//! together as the stream's numbers ([`StreamWire`]), and judged against its window
//! and its latency bound.
//!
//! The judge adds only what the capture cannot know: which QPs are the stream's,
//! which endpoint is its requester, and its window.
//!
//! Owns: [`stream_wires`] and the stream's [`verdict`]. Imports: `super::{Timeline,
//! pair, duration}`, dissector's `flow::pace` and NAK kinds, the protocol's
//! percentiles, the results' stream shapes, the scenario model.
use dissector::flow::pace;
use dissector::wire::NakKind;

use super::{duration, pair, Timeline};
use crate::protocol::stream::Percentiles;
use crate::results::{
    Evidence, GoBackN, Mark, Plot, QpPace, Slice, StreamWire, Verdict, VerdictKind,
};
use crate::scenario::model::{QpType, Scenario, Step, StreamExpect, StreamStep};

/// The wire of every stream step that ran: (its id, its endpoint, its numbers).
pub(crate) fn stream_wires(
    sc: &Scenario,
    o: &Evidence,
    t: &Timeline,
) -> Vec<(String, String, StreamWire)> {
    sc.steps
        .iter()
        .filter_map(|s| match s {
            Step::Stream(st) => Some(st),
            _ => None,
        })
        .filter(|st| o.streams.iter().any(|r| r.report.id == st.order.id && r.on == st.on))
        .map(|st| (st.order.id.clone(), st.on.clone(), of(sc, st, o, t)))
        .collect()
}

fn of(sc: &Scenario, st: &StreamStep, o: &Evidence, t: &Timeline) -> StreamWire {
    let mut paces = Vec::new();
    let mut qps = Vec::new();
    let (mut acked, mut resend_after, mut resend_marks, mut nak_marks) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut resends_total, mut naks_total, mut rnr_total) = (0, 0, 0);
    let mut first_ns: Option<u64> = None;
    for name in &st.order.qps {
        let Some(q) = sc.qps.iter().find(|q| q.name == *name) else { continue };
        let Some(p) = pair(o, q, &st.on, &st.peer, t) else { continue };
        // Go-back-N is RC's recovery: a UC QP resends nothing, and what it loses
        // stays lost.
        let reliable = q.kind == QpType::Rc;
        let reqs: Vec<pace::Packet> = p.reqs.iter().map(|f| f.pace()).collect();
        let resps: Vec<pace::Packet> = p.resps.iter().map(|f| f.pace()).collect();
        let pc = pace::pace(&reqs, &resps);
        if let Some(f) = p.reqs.first() {
            first_ns = Some(first_ns.map_or(f.ts_ns, |x| x.min(f.ts_ns)));
        }
        let resends = p.retransmissions();
        let gbn = p.go_back_n();
        for r in &gbn.resends {
            resend_after.push(r.after_ns);
            // The requests are in capture order: by frame number.
            if let Ok(k) = p.reqs.binary_search_by_key(&r.frame, |f| f.number) {
                resend_marks.push((p.reqs[k].ts_ns, r.frame, r.trigger.to_string()));
            }
        }
        let naks: Vec<_> =
            p.resps.iter().filter(|f| f.ack.and_then(|a| a.nak()).is_some()).collect();
        let rnr = naks.iter().filter(|f| f.ack.and_then(|a| a.nak()) == Some(NakKind::Rnr)).count()
            as u64;
        nak_marks.extend(naks.iter().map(|f| (f.ts_ns, f.number, f.response_name())));
        let mut lat: Vec<u64> = pc.acked.iter().map(pace::Acked::latency_ns).collect();
        qps.push(QpPace {
            qp: name.clone(),
            messages: pc.messages,
            acked: pc.acked.len() as u64,
            peak_outstanding: pc.peak,
            ack_latency_ns: Percentiles::of(&mut lat),
            resends,
            redundant_resends: gbn.redundant.len() as u64,
            naks: naks.len() as u64,
            rnr_naks: rnr,
            go_back_n: reliable.then(|| GoBackN {
                broken: gbn.violations.len() as u64,
                first: gbn.violations.first().map(|v| v.to_string()),
            }),
        });
        resends_total += resends;
        naks_total += naks.len() as u64;
        rnr_total += rnr;
        acked.extend_from_slice(&pc.acked);
        paces.push(pc);
    }
    let first = first_ns.unwrap_or(0);
    let plot = plot(first, &acked, resend_marks, nak_marks);
    let mut lat: Vec<u64> = acked.iter().map(pace::Acked::latency_ns).collect();
    StreamWire {
        messages: paces.iter().map(|p| p.messages).sum(),
        acked: acked.len() as u64,
        peak_outstanding: pace::peak_of(&paces),
        window: st.order.window,
        ack_latency_ns: Percentiles::of(&mut lat),
        resends: resends_total,
        resend_latency_ns: Percentiles::of(&mut resend_after),
        naks: naks_total,
        rnr_naks: rnr_total,
        qps,
        plot,
    }
}

/// Latency over the run in at most [`Plot::BINS`] slices, by when each message was
/// acknowledged, and the first [`Plot::MARKS`] resends and NAKs.
fn plot(
    first: u64,
    acked: &[pace::Acked],
    resends: Vec<(u64, u64, String)>,
    naks: Vec<(u64, u64, String)>,
) -> Plot {
    let last = acked.iter().map(|a| a.acked_ns).max().unwrap_or(first);
    let span = last.saturating_sub(first);
    let width = span.div_ceil(Plot::BINS).max(1);
    let mut bins: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for a in acked {
        bins.entry(a.acked_ns.saturating_sub(first) / width).or_default().push(a.latency_ns());
    }
    let slices = bins
        .into_iter()
        .filter_map(|(i, mut v)| {
            let p = Percentiles::of(&mut v)?;
            Some(Slice { at_ns: i * width, p50_ns: p.p50, max_ns: p.max, messages: p.samples })
        })
        .collect();
    let marks = |mut v: Vec<(u64, u64, String)>| -> Vec<Mark> {
        v.sort_by_key(|m| m.1);
        v.into_iter()
            .take(Plot::MARKS)
            .map(|(ts, frame, what)| Mark { at_ns: ts.saturating_sub(first), frame, what })
            .collect()
    };
    Plot { span_ns: span, slices, resends: marks(resends), naks: marks(naks) }
}

/// The stream's wire against its window and its latency bound: `None` when there
/// is nothing to judge (no capture, or the stream never ran) and nothing was asked
/// of the wire.
pub(crate) fn verdict(e: &StreamExpect, o: &Evidence) -> Option<Verdict> {
    let what = format!("wire of stream {} from {}", e.id, e.on);
    let run = o.streams.iter().find(|s| s.report.id == e.id && s.on == e.on);
    let Some(w) = run.and_then(|r| r.wire.as_ref()) else {
        let ms = e.max_ack_latency_ms?;
        let why = if run.is_none() {
            "never ran (the run stopped before)"
        } else {
            "no capture of its wire"
        };
        return Some(Verdict::new(
            VerdictKind::Wire,
            what,
            false,
            format!("every message acknowledged within {ms} ms"),
            why.into(),
        ));
    };
    let mut expected =
        vec![format!("at most {} messages unacknowledged at once (its window)", w.window)];
    if w.qps.iter().any(|q| q.go_back_n.is_some()) {
        expected.push("go-back-N recovery on every QP over the whole run".to_string());
    }
    let mut ok = w.peak_outstanding <= w.window as u64;
    let broken: Vec<(&QpPace, &GoBackN)> = w
        .qps
        .iter()
        .filter_map(|q| Some((q, q.go_back_n.as_ref().filter(|g| g.broken > 0)?)))
        .collect();
    ok &= broken.is_empty();
    let slowest =
        w.qps.iter().filter_map(|q| Some((q, q.ack_latency_ns?.max))).max_by_key(|(_, m)| *m);
    if let Some(ms) = e.max_ack_latency_ms {
        expected.push(format!("every message acknowledged within {ms} ms"));
        // Messages never acknowledged waited longer than any bound.
        ok &= w.acked == w.messages && slowest.is_none_or(|(_, m)| m <= ms * 1_000_000);
    }
    let qps = if w.qps.len() == 1 { String::new() } else { format!(" over {} QPs", w.qps.len()) };
    let mut actual = format!(
        "peak {}{qps}; {} of {} messages acknowledged",
        w.peak_outstanding, w.acked, w.messages
    );
    if let Some(l) = &w.ack_latency_ns {
        actual += &format!(
            "; request→ACK p50 {}, p99 {}, max {}",
            duration(l.p50),
            duration(l.p99),
            duration(l.max)
        );
    }
    if let (Some((q, m)), true) = (slowest, w.qps.len() > 1) {
        actual += &format!(" (slowest QP {}: {})", q.qp, duration(m));
    }
    actual += &format!("; {} resends", w.resends);
    if let Some(r) = &w.resend_latency_ns {
        actual += &format!(", p50 {} after their cause", duration(r.p50));
    }
    actual += &format!("; {} NAKs ({} RNR)", w.naks, w.rnr_naks);
    let redundant: u64 = w.qps.iter().map(|q| q.redundant_resends).sum();
    if redundant > 0 {
        actual += &format!("; {redundant} of the resends from a PSN already acknowledged on the wire (redundant, not lost)");
    }
    match broken.first() {
        None if w.qps.iter().all(|q| q.go_back_n.is_none()) => {}
        None => actual += "; go-back-N held on every QP",
        Some((q, g)) => {
            let n = broken.len();
            actual += &format!(
                "; go-back-N broken on {n} QP{}: QP {}: {}",
                if n == 1 { "" } else { "s" },
                q.qp,
                g.first.as_deref().unwrap_or("?")
            );
        }
    }
    Some(Verdict::new(VerdictKind::Wire, what, ok, expected.join("; "), actual))
}
