//! A stream's plots: its latency percentiles over time and its per-QP bars, as
//! inline SVG.
//!
//! Owns: the plots. Imports: the results' stream figures, maud.
use maud::{html, Markup};

/// Plot geometry, in px.
pub(super) const PLOT_W: f64 = 720.0;
pub(super) const PLOT_H: f64 = 180.0;
pub(super) const PLOT_LEFT: f64 = 64.0;
pub(super) const PLOT_TOP: f64 = 16.0;

/// `p50 / p99 / max` of `l`, or `–`.
pub(super) fn pct(l: &Option<crate::protocol::stream::Percentiles>) -> String {
    let d = crate::judge::duration;
    l.as_ref()
        .map(|l| format!("{} / {} / {}", d(l.p50), d(l.p99), d(l.max)))
        .unwrap_or_else(|| "–".into())
}

/// A stream's wire: its numbers per QP, its acknowledgement latency over the run
/// with resends and NAKs marked, and what each QP got through.
pub(super) fn stream_wire(st: &crate::results::StreamRun) -> Markup {
    let Some(w) = &st.wire else { return html! {} };
    html! {
        h4 class="stream-wire" { "Stream " (st.report.id) " on the wire" }
        "\n"
        p class="stream-wire-summary" {
            (w.acked) " of " (w.messages) " messages acknowledged; at most " (w.peak_outstanding)
            " unacknowledged at once (window " (w.window) "); request→ACK p50 / p99 / max "
            (pct(&w.ack_latency_ns)) "; " (w.resends) " resends (p50 / p99 / max after their cause "
            (pct(&w.resend_latency_ns)) "); " (w.naks) " NAKs (" (w.rnr_naks) " RNR)."
        }
        "\n"
        (latency_plot(&st.report.id, &w.plot))
        (per_qp_bars(w, st.report.elapsed_us))
        details class="qp-pace" {
            summary { "each QP" }
            table class="qp-pace" {
                thead { tr {
                    th { "QP" } th { "messages" } th { "acknowledged" } th { "peak unacknowledged" }
                    th { "request→ACK p50 / p99 / max" } th { "resends (redundant)" }
                    th { "NAKs (RNR)" } th { "go-back-N" }
                } }
                tbody {
                    "\n"
                    @for q in &w.qps {
                        tr {
                            td { (q.qp) } td { (q.messages) } td { (q.acked) }
                            td { (q.peak_outstanding) } td { (pct(&q.ack_latency_ns)) }
                            td { (q.resends) " (" (q.redundant_resends) ")" }
                            td { (q.naks) " (" (q.rnr_naks) ")" }
                            td {
                                @match &q.go_back_n {
                                    None => "–",
                                    Some(g) if g.broken == 0 => "held",
                                    Some(g) => { "broken: " (g.first.as_deref().unwrap_or("?")) },
                                }
                            }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

/// Latency over the run: each slice's median and highest, resends marked under
/// the axis, NAKs over the plot.
pub(super) fn latency_plot(id: &str, p: &crate::results::Plot) -> Markup {
    if p.slices.is_empty() {
        return html! {};
    }
    let top = p.slices.iter().map(|s| s.max_ns).max().unwrap_or(1).max(1) as f64;
    let span = p.span_ns.max(1) as f64;
    let x = |ns: u64| PLOT_LEFT + ns as f64 / span * PLOT_W;
    let y = |ns: u64| PLOT_TOP + PLOT_H - ns as f64 / top * PLOT_H;
    let (w, h) = (PLOT_LEFT + PLOT_W + 16.0, PLOT_TOP + PLOT_H + 44.0);
    let (x0, y0, x1) = (PLOT_LEFT, PLOT_TOP + PLOT_H, PLOT_LEFT + PLOT_W);
    let d = crate::judge::duration;
    let line = |f: fn(&crate::results::Slice) -> u64| -> String {
        p.slices
            .iter()
            .map(|s| format!("{:.1},{:.1}", x(s.at_ns), y(f(s))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let at = |ns: u64| format!("{:.1}", x(ns));
    html! {
        svg class="latency-plot" data-stream=(id) xmlns="http://www.w3.org/2000/svg" width=(w)
            height=(h) viewBox={ "0 0 " (w) " " (h) } role="img"
            aria-label={ "request to ACK latency over the run of stream " (id) } {
            "\n"
            line class="axis" x1=(x0) y1=(y0) x2=(x1) y2=(y0) {}
            line class="axis" x1=(x0) y1=(PLOT_TOP) x2=(x0) y2=(y0) {}
            "\n"
            text class="tick" x=(x0 - 4.0) y=(PLOT_TOP + 8.0) text-anchor="end" { (d(top as u64)) }
            text class="tick" x=(x0 - 4.0) y=(y0) text-anchor="end" { "0" }
            text class="tick" x=(x0) y=(y0 + 14.0) { "0" }
            text class="tick" x=(x1) y=(y0 + 14.0) text-anchor="end" { (d(p.span_ns)) }
            "\n"
            polyline class="max" points=(line(|s| s.max_ns)) {
                title { "highest latency of each slice" }
            }
            "\n"
            polyline class="p50" points=(line(|s| s.p50_ns)) {
                title { "median latency of each slice" }
            }
            "\n"
            @for m in &p.resends {
                @let x = at(m.at_ns);
                line class="resend" x1=(x) y1=(y0 + 18.0) x2=(x) y2=(y0 + 26.0) {
                    title { "frame " (m.frame) ": resend after " (m.what) }
                }
                "\n"
            }
            @for m in &p.naks {
                @let x = at(m.at_ns);
                line class="nak" x1=(x) y1=(PLOT_TOP - 12.0) x2=(x) y2=(PLOT_TOP - 4.0) {
                    title { "frame " (m.frame) ": " (m.what) }
                }
                "\n"
            }
            text class="tick" x=(x0 + PLOT_W / 2.0) y=(y0 + 40.0) text-anchor="middle" {
                "time since its first message; request→ACK latency (median, highest); "
                "▲ NAKs above, resends below"
            }
        }
        "\n"
    }
}

/// Messages each QP got acknowledged, as bars: a starved QP stands out.
pub(super) fn per_qp_bars(w: &crate::results::StreamWire, elapsed_us: u64) -> Markup {
    if w.qps.len() < 2 {
        return html! {};
    }
    let most = w.qps.iter().map(|q| q.acked).max().unwrap_or(0).max(1) as f64;
    let bar = (PLOT_W / w.qps.len() as f64).min(24.0);
    let (width, h) = (PLOT_LEFT + bar * w.qps.len() as f64 + 16.0, 120.0);
    let secs = elapsed_us.max(1) as f64 / 1e6;
    let f1 = |v: f64| format!("{v:.1}");
    html! {
        svg class="qp-bars" xmlns="http://www.w3.org/2000/svg" width=(width) height=(h + 20.0)
            viewBox={ "0 0 " (width) " " (h + 20.0) } role="img"
            aria-label="messages acknowledged per QP" {
            "\n"
            @for (i, q) in w.qps.iter().enumerate() {
                @let bh = q.acked as f64 / most * (h - 10.0);
                rect class="bar" data-qp=(q.qp) x=(f1(PLOT_LEFT + i as f64 * bar)) y=(f1(h - bh))
                    width=(f1((bar - 1.0).max(1.0))) height=(f1(bh)) {
                    title {
                        (q.qp) ": " (q.acked) " messages acknowledged, "
                        (format!("{:.0}", q.acked as f64 / secs)) " a second"
                    }
                }
                "\n"
            }
            text class="tick" x=(PLOT_LEFT - 4.0) y=(10.0 + 8.0) text-anchor="end" { (most as u64) }
            text class="tick" x=(PLOT_LEFT) y=(h + 16.0) {
                "messages acknowledged per QP (" (w.qps.len()) " QPs)"
            }
        }
        "\n"
    }
}
