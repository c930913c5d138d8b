//! `roce run --html FILE` and `roce report`: one self-contained HTML page per run.
//!
//! The page holds a summary, then per scenario its expectations, endpoints, fault
//! rules and a ladder diagram of its capture: a lane per endpoint, an arrow per RoCE
//! frame in capture order (CM MADs on QP1 too), drawn here as inline SVG: nothing is
//! fetched and no script is needed to see it. It draws the scenario's one decoded
//! wire (the judge's [`Timeline`]); what the lab switch did to a frame, read from
//! its marks, marks the arrow: dropped (it stops halfway at a red ✗), an injected
//! duplicate (dashed), held back (reordered or delayed: dotted), changed on the way
//! (dash-dot, with what changed), a response a `respond` rule synthesized in the
//! responder's place (pink, starting between the lanes at a ◆: the switch sent it,
//! not the responder), the responder's answer that rule withheld (its ✗ says so);
//! bad ICRCs, NAKs, RNR NAKs, CE marks and CNPs have their colour or mark too.
//!
//! The markup is a contract with `tests/browser/check_ladder.py`, which checks the
//! layout in a real browser: each lane is `<line class="lane" data-endpoint>`, each
//! arrow `<g class="arrow …" data-frame data-from data-to data-label>` whose first
//! child is a `<title>` with the decoded line, holding `line.shaft` (from the
//! sender's lane to the receiver's, or halfway when dropped; a synthesized one
//! from halfway), `text.label` and the row's other texts.
//!
//! The markup is maud templates (`html!`): text is escaped by default (`& < > "`),
//! only the CSS and JS assets go in as they are (`PreEscaped`).
//!
//! Owns: the page (`render_page`), its ladder, stream plots and CSS/JS. Imports: the
//! results (`crate::results`), the judge's [`Timeline`] and time formats, the
//! protocol's stream percentiles, dissector's NAK kinds, maud.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped, Render as _, DOCTYPE};

use crate::judge::timeline::{self, Packet, Timeline, MAX_ROWS};
use crate::results::{Report, ScenarioResult, Status, VerdictKind};

// The ladder's geometry, in px (the SVG is drawn 1:1, never scaled).
/// Lane headings above the first row.
const TOP: f64 = 84.0;
const ROW: f64 = 26.0;
/// The arrow's y within its row; its label sits above it.
const ROW_ARROW: f64 = 18.0;
/// x of the first lane, and between lanes.
const LANE0: f64 = 220.0;
const SPAN: f64 = 460.0;
/// Right of the last lane: the marks (dropped, bad ICRC, …).
const MARKS: f64 = 360.0;
/// Right edges of the time and frame-number columns.
const TIME_X: f64 = 78.0;
const FRAME_X: f64 = 136.0;

/// One RoCE frame as the ladder draws it: a view of the timeline's packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rung<'a>(pub &'a Packet);

impl Rung<'_> {
    /// `RDMA WRITE Middle  PSN 101`, `NAK PSN Sequence Error  PSN 101`, `CM REQ`.
    pub(crate) fn label(&self) -> String {
        let p = self.0;
        if let Some(m) = &p.mad {
            return m.clone();
        }
        if p.cnp {
            return "CNP".into();
        }
        format!("{}  PSN {}", p.response_name(), p.psn)
    }

    /// The flags it carries, in display order: whether each is set, its CSS class
    /// on the arrow, and what the marks column says of it (nothing for NAK, RNR and
    /// CM, which the label already names).
    fn flags(&self) -> [(bool, &'static str, Option<String>); 11] {
        let p = self.0;
        let nak = p.ack.and_then(|a| a.nak());
        let modified = p.marks.modifications();
        let dropped = if p.marks.withheld() {
            "✗ withheld by the lab switch, which answered instead"
        } else {
            "✗ dropped by the lab switch"
        };
        [
            (p.marks.dropped(), "dropped", Some(dropped.into())),
            (
                p.marks.synthesized(),
                "synthesized",
                Some("◆ synthesized by the lab switch: the responder never sent it".into()),
            ),
            (p.marks.injected(), "injected", Some("duplicate injected by the switch".into())),
            (p.marks.held(), "held", Some("held by the switch (reordered/delayed)".into())),
            (
                !modified.is_empty(),
                "modified",
                Some(format!("changed by the switch: {}", modified.join(", "))),
            ),
            (p.icrc_ok == Some(false), "bad-icrc", Some("bad ICRC".into())),
            (nak.is_some(), "nak", None),
            (nak == Some(dissector::wire::NakKind::Rnr), "rnr", None),
            (p.ce, "ce", Some("CE marked".into())),
            (p.cnp, "cnp", Some("CNP".into())),
            (p.mad.is_some(), "cm", None),
        ]
    }

    /// What the row's marks column says.
    fn marks(&self) -> Vec<String> {
        self.flags().into_iter().filter(|f| f.0).filter_map(|f| f.2).collect()
    }
}

/// A lane of the ladder: an endpoint (or, with no endpoint facts, an address).
struct Lane {
    name: String,
    ip: Option<IpAddr>,
    /// Heading lines under the name: IP, QPNs.
    lines: Vec<String>,
    title: String,
}

fn lanes_of(s: &ScenarioResult, wire: &Timeline) -> Vec<Lane> {
    if !s.endpoints.is_empty() {
        return s
            .endpoints
            .iter()
            .map(|(name, f)| {
                let qpns: Vec<String> =
                    f.qps.iter().map(|q| format!("{} QPN {:#x}", q.name, q.qpn)).collect();
                let mut qp_line = qpns.join(", ");
                if qp_line.chars().count() > 60 {
                    qp_line = qp_line.chars().take(59).collect::<String>() + "…";
                }
                Lane {
                    name: name.clone(),
                    ip: f.ip.parse().ok(),
                    lines: vec![f.ip.clone(), qp_line],
                    title: format!(
                        "{name}: {} on {} (GID {}); {}",
                        f.ip,
                        f.device,
                        f.gid,
                        qpns.join(", ")
                    ),
                }
            })
            .collect();
    }
    // No endpoint facts (the run stopped before setup): a lane per address seen.
    let mut lanes: Vec<Lane> = Vec::new();
    for ip in wire.packets.iter().flat_map(|r| [r.src, r.dst]).flatten() {
        if !lanes.iter().any(|l| l.ip == Some(ip)) {
            lanes.push(Lane {
                name: ip.to_string(),
                ip: Some(ip),
                lines: vec!["(no endpoint facts)".into()],
                title: ip.to_string(),
            });
        }
    }
    lanes
}

fn fmt_ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Frames each side of an anomaly in a long capture's ladder windows.
const WINDOW_BEFORE: usize = 12;
const WINDOW_AFTER: usize = 28;
/// Windows drawn of a long capture.
const WINDOWS: usize = 6;
/// The most frames one window grows to when anomalies follow each other.
const WINDOW_MAX: usize = 120;

/// Where a long capture's anomalies are: windows of frames (index ranges into the
/// timeline, overlapping ones merged) around the first [`WINDOWS`] of them, each
/// with what it shows.
fn anomaly_windows(packets: &[Packet]) -> Vec<(std::ops::Range<usize>, String)> {
    let mut windows: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, p) in packets.iter().enumerate() {
        let resend =
            p.is_request && !p.marks.injected() && !seen.insert((p.src, p.dest_qp, p.psn.value()));
        let r = Rung(p);
        let why = match p.ack.and_then(|a| a.nak()) {
            Some(_) => Some(p.response_name()),
            None if resend => Some(format!("resend of PSN {}", p.psn)),
            None => r.flags().into_iter().find(|f| f.0 && f.2.is_some()).and_then(|f| f.2),
        };
        let Some(why) = why else { continue };
        let mut range = i.saturating_sub(WINDOW_BEFORE)..(i + WINDOW_AFTER).min(packets.len());
        let full = windows.len() == WINDOWS;
        match windows.last_mut() {
            // Already in view.
            Some((last, _)) if i < last.end => {}
            // Close after the last one: one window, up to its longest.
            Some((last, _)) if range.start <= last.end && range.end - last.start <= WINDOW_MAX => {
                last.end = range.end
            }
            _ if full => break,
            Some((last, _)) => {
                range.start = range.start.max(last.end);
                windows.push((range, format!("frame {}: {why}", p.number)));
            }
            None => windows.push((range, format!("frame {}: {why}", p.number))),
        }
    }
    windows
}

/// The ladder SVG of a scenario's capture, and notes (frames not drawn, …). A
/// capture too long for one ladder gets windows around its first anomalies
/// instead (the stream plot above gives the whole run).
fn ladder(out: &mut String, s: &ScenarioResult, wire: &Timeline) {
    let drawn = if wire.packets.len() <= MAX_ROWS {
        rungs(s, wire, &wire.packets)
    } else {
        long_ladder(s, wire)
    };
    html! {
        (drawn)
        @if let Some(d) = &wire.damaged {
            p class="note damaged" {
                "The capture is damaged: " (d) " (the frames before the damage are shown)."
            }
            "\n"
        }
    }
    .render_to(out);
}

fn long_ladder(s: &ScenarioResult, wire: &Timeline) -> Markup {
    let windows = anomaly_windows(&wire.packets);
    let shown = if windows.is_empty() {
        format!(
            "no anomaly (drop, NAK, resend, mark) in them; the first {} frames",
            WINDOW_BEFORE + WINDOW_AFTER
        )
    } else {
        format!("the wire around its first {} anomalies (drops, NAKs, resends, marks), {WINDOW_BEFORE} frames before each and {WINDOW_AFTER} from it", windows.len())
    };
    html! {
        p class="note more" {
            (wire.packets.len()) " RoCE frames, more than one ladder shows (" (MAX_ROWS) "): "
            (shown) "."
        }
        "\n"
        @if windows.is_empty() {
            (rungs(s, wire, &wire.packets[..WINDOW_BEFORE + WINDOW_AFTER]))
        }
        @for (range, why) in windows {
            @let (a, b) = (wire.packets[range.start].number, wire.packets[range.end - 1].number);
            h4 class="window" data-first=(a) data-last=(b) {
                "frames " (a) "–" (b) " (" (why) ")"
            }
            "\n"
            (rungs(s, wire, &wire.packets[range]))
        }
    }
}

/// A ladder of `packets`, some of `wire`'s: the diagram of the frames between two
/// of the scenario's lanes, and a note of the others.
fn rungs(s: &ScenarioResult, wire: &Timeline, packets: &[Packet]) -> Markup {
    let lanes = lanes_of(s, wire);
    let lane_of =
        |ip: Option<IpAddr>| ip.and_then(|ip| lanes.iter().position(|l| l.ip == Some(ip)));
    let mut drawn = Vec::new();
    let mut stray = Vec::new();
    for p in packets {
        let r = Rung(p);
        match (lane_of(p.src), lane_of(p.dst)) {
            (Some(a), Some(b)) if a != b => drawn.push((r, a, b)),
            _ => stray.push(r),
        }
    }
    html! {
        @if packets.is_empty() {
            p class="note" { "No RoCE frames in the capture." }
            "\n"
        }
        @if !drawn.is_empty() {
            (ladder_svg(&lanes, &drawn, wire.first_ts_ns.unwrap_or(0)))
            (legend())
        }
        @if !stray.is_empty() {
            (stray_note(&stray))
        }
    }
}

/// x of lane `i`.
fn lane_x(i: usize) -> f64 {
    LANE0 + i as f64 * SPAN
}

/// The diagram: column heads, a lane per endpoint, an arrow per frame drawn
/// (`(frame, sender's lane, receiver's lane)`); times from `first` (ns).
fn ladder_svg(lanes: &[Lane], drawn: &[(Rung<'_>, usize, usize)], first: u64) -> Markup {
    let last = lane_x(lanes.len().saturating_sub(1));
    let width = last + MARKS;
    let bottom = TOP + drawn.len() as f64 * ROW;
    let height = bottom + 16.0;
    html! {
        div class="ladder-wrap" {
            svg class="ladder" xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
                viewBox={ "0 0 " (width) " " (height) } role="img"
                aria-label={ "ladder diagram: " (drawn.len()) " RoCE frames" } {
                "\n"
                text class="col-head" x=(TIME_X) y=(TOP - 10.0) text-anchor="end" { "ms" }
                text class="col-head" x=(FRAME_X) y=(TOP - 10.0) text-anchor="end" { "frame" }
                "\n"
                @for (i, l) in lanes.iter().enumerate() {
                    (lane(lane_x(i), l, bottom))
                }
                @for (row, (r, a, b)) in drawn.iter().enumerate() {
                    @let y = TOP + row as f64 * ROW + ROW_ARROW;
                    (arrow(y, r, (&lanes[*a], *a), (&lanes[*b], *b), last, first))
                }
            }
        }
        "\n"
    }
}

/// A lane at `x`: its heading, and its line down to `bottom`.
fn lane(x: f64, l: &Lane, bottom: f64) -> Markup {
    html! {
        g class="lane-head" {
            title { (l.title) }
            text class="lane-name" x=(x) y="20" text-anchor="middle" { (l.name) }
            @for (k, t) in l.lines.iter().enumerate() {
                text class="lane-info" x=(x) y=(38 + 16 * k) text-anchor="middle" { (t) }
            }
        }
        line class="lane" data-endpoint=(l.name) x1=(x) y1=(TOP - 4.0) x2=(x) y2=(bottom) {
            title { (l.title) }
        }
        "\n"
    }
}

/// The arrow of frame `r` at height `y`, from lane `from` to lane `to` (each with
/// its index); its marks right of `last`, the last lane, and its time from `first`.
fn arrow(
    y: f64,
    r: &Rung<'_>,
    (from, a): (&Lane, usize),
    (to, b): (&Lane, usize),
    last: f64,
    first: u64,
) -> Markup {
    let (x1, xt) = (lane_x(a), lane_x(b));
    let dir = if xt > x1 { 1.0 } else { -1.0 };
    let dropped = r.0.marks.dropped();
    let x2 = if dropped { (x1 + xt) / 2.0 } else { xt };
    // The switch, not the sender, put a synthesized frame on the wire.
    let synthesized = r.0.marks.synthesized();
    let x1 = if synthesized { (x1 + xt) / 2.0 } else { x1 };
    let label = r.label();
    let mut class = vec!["arrow", if r.0.is_request { "request" } else { "response" }];
    class.extend(r.flags().into_iter().filter(|f| f.0).map(|f| f.1));
    let marks = r.marks();
    // The ◆ where a synthesized frame starts, the ✗ where a dropped one ends, the head.
    let origin = format!("M{x1} {}L{} {y}L{x1} {}L{} {y}Z", y - 5.0, x1 + 5.0, y + 5.0, x1 - 5.0);
    let (left, right, up, down) = (x2 - 5.0, x2 + 5.0, y - 5.0, y + 5.0);
    let x = format!("M{left} {up}L{right} {down}M{left} {down}L{right} {up}");
    let back = xt - dir * 9.0;
    let head = format!("{xt},{y} {back},{} {back},{}", y - 4.5, y + 4.5);
    html! {
        g class=(class.join(" ")) data-frame=(r.0.number) data-from=(from.name)
            data-to=(to.name) data-label=(label)
            data-psn=[r.0.mad.is_none().then(|| r.0.psn.to_string())] {
            title { (r.0.line.as_deref().unwrap_or("")) }
            line class="shaft" x1=(x1) y1=(y) x2=(x2) y2=(y) {}
            @if synthesized {
                path class="origin" d=(origin) {
                    title { "synthesized by the lab switch" }
                }
            }
            @if dropped {
                path class="x" d=(x) {
                    title { "dropped by the lab switch" }
                }
            } @else {
                polygon class="head" points=(head) {}
            }
            text class="label" x=((x1 + x2) / 2.0) y=(y - 7.0) text-anchor="middle" { (label) }
            text class="time" x=(TIME_X) y=(y + 4.0) text-anchor="end" {
                (fmt_ms(r.0.ts_ns.saturating_sub(first)))
            }
            text class="frame-no" x=(FRAME_X) y=(y + 4.0) text-anchor="end" { (r.0.number) }
            @if !marks.is_empty() {
                text class="mark" x=(last + 16.0) y=(y + 4.0) { (marks.join(" · ")) }
            }
        }
        "\n"
    }
}

/// What the ladder's line styles and colours mean.
fn legend() -> Markup {
    html! {
        p class="legend" {
            "Time in ms since the capture's first frame. "
            span class="k dropped" { "✗ dropped by the lab switch" } " "
            span class="k injected" { "- - injected duplicate" } " "
            span class="k held" { "··· held (reordered/delayed)" } " "
            span class="k synthesized" {
                "◆ synthesized by the switch (the responder never sent it)"
            }
            " "
            span class="k modified" { "changed by the switch" } " "
            span class="k nak" { "NAK" } " "
            span class="k rnr" { "RNR NAK" } " "
            span class="k bad-icrc" { "bad ICRC" } " "
            span class="k cnp" { "CNP" } " "
            span class="k cm" { "CM" }
            ". Hover an arrow for the decoded frame and the other frames of its PSN."
        }
        "\n"
    }
}

/// The frames not between two of the scenario's lanes (the first 20 named).
fn stray_note(stray: &[Rung<'_>]) -> Markup {
    let addr = |a: Option<IpAddr>| a.map(|a| a.to_string()).unwrap_or_else(|| "?".into());
    let shown: Vec<String> = stray
        .iter()
        .take(20)
        .map(|r| {
            format!("frame {} {} → {} {}", r.0.number, addr(r.0.src), addr(r.0.dst), r.label())
        })
        .collect();
    html! {
        p class="note stray" {
            (stray.len()) " RoCE frames are not between two endpoints of this scenario (their "
            "addresses match no endpoint's IP, or both ends are the same), not drawn: "
            (shown.join("; "))
            @if stray.len() > shown.len() { "; …" }
        }
        "\n"
    }
}

/// Plot geometry, in px.
const PLOT_W: f64 = 720.0;
const PLOT_H: f64 = 180.0;
const PLOT_LEFT: f64 = 64.0;
const PLOT_TOP: f64 = 16.0;

/// `p50 / p99 / max` of `l`, or `–`.
fn pct(l: &Option<crate::protocol::stream::Percentiles>) -> String {
    let d = crate::judge::duration;
    l.as_ref()
        .map(|l| format!("{} / {} / {}", d(l.p50), d(l.p99), d(l.max)))
        .unwrap_or_else(|| "–".into())
}

/// A stream's wire: its numbers per QP, its acknowledgement latency over the run
/// with resends and NAKs marked, and what each QP got through.
fn stream_wire(st: &crate::results::StreamRun) -> Markup {
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
fn latency_plot(id: &str, p: &crate::results::Plot) -> Markup {
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
fn per_qp_bars(w: &crate::results::StreamWire, elapsed_us: u64) -> Markup {
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

/// Where a report's capture is: as written, or relative to `base` (the saved
/// report's directory) when that is where it exists.
fn capture_file(c: &str, base: Option<&Path>) -> PathBuf {
    let p = PathBuf::from(c);
    if p.is_relative() && !p.exists() {
        if let Some(q) = base.map(|b| b.join(&p)).filter(|q| q.exists()) {
            return q;
        }
    }
    p
}

/// The page's style sheet (kept as a file of its own, so an editor sees CSS).
const CSS: &str = include_str!("assets/report.css");

/// Hovering an arrow also highlights the other frames of its PSN (the request, its
/// resends, the ACK or NAK). The diagram does not need it.
const JS: &str = include_str!("assets/report.js");

/// The decoded wire of the report's `i`-th scenario, when the caller has it
/// already (a run just made it); otherwise its capture is read here.
pub(crate) type Wires<'a> = &'a dyn Fn(usize) -> Option<Cow<'a, Timeline>>;

/// The page, and a sentence for each capture that could not be drawn. Relative
/// capture paths that do not exist from here are also looked for under `base`.
pub(crate) fn render_page(
    report: &Report,
    base: Option<&Path>,
    wires: Wires<'_>,
) -> (String, Vec<String>) {
    let mut notes = Vec::new();
    let page = html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                "\n"
                title {
                    "roce run: " (report.passed) " passed, " (report.failed) " failed, "
                    (report.skipped) " skipped"
                }
                "\n"
                style { (PreEscaped(CSS)) }
            }
            "\n"
            body {
                "\n"
                (summary(report))
                main {
                    "\n"
                    @for (i, s) in report.scenarios.iter().enumerate() {
                        (scenario(i + 1, s, base, wires(i), &mut notes))
                    }
                }
                "\n"
                footer class="note" { "roce " (env!("CARGO_PKG_VERSION")) }
                "\n"
                script { (PreEscaped(JS)) }
                "\n"
            }
        }
        "\n"
    };
    (page.into_string(), notes)
}

/// The CSS class and the word for a scenario's outcome.
fn outcome(s: &ScenarioResult) -> (&'static str, &'static str) {
    match s.status {
        Status::Passed => ("pass", "passed"),
        Status::Failed => ("fail", "failed"),
        Status::Skipped => ("skip", "skipped"),
    }
}

/// The page's header: the totals, and a line per scenario linking to it.
fn summary(report: &Report) -> Markup {
    html! {
        header id="summary" data-passed=(report.passed) data-failed=(report.failed)
            data-skipped=(report.skipped) {
            h1 { "roce run" }
            p class="totals" {
                span class="pass" { (report.passed) " passed" } ", "
                span class="fail" { (report.failed) " failed" } ", "
                span class="skip" { (report.skipped) " skipped" }
                " (" (report.scenarios.len()) " scenarios in "
                (format!("{:.1}", report.duration_s)) " s)"
            }
            "\n"
            ul class="toc" {
                "\n"
                @for (i, s) in report.scenarios.iter().enumerate() {
                    li {
                        a class=(outcome(s).0) href={ "#s" (i + 1) } {
                            (s.status.mark()) " " (s.name)
                        }
                        " "
                        span class="file" { "(" (s.file) ")" }
                    }
                    "\n"
                }
            }
        }
        "\n"
    }
}

/// A scenario's section: its outcome, expectations, streams, endpoints, what its
/// setup did, its wire (fault rules, failing wire expectations, the ladder), its
/// connections and what its agents said.
fn scenario(
    id: usize,
    s: &ScenarioResult,
    base: Option<&Path>,
    wire: Option<Cow<'_, Timeline>>,
    notes: &mut Vec<String>,
) -> Markup {
    let (c, outcome) = outcome(s);
    html! {
        section class={ "scenario " (outcome) } id={ "s" (id) } data-name=(s.name)
            data-pass=(s.pass) {
            "\n"
            h2 { span class={ "badge " (c) } { (c.to_uppercase()) } " " (s.name) }
            "\n"
            p class="file" {
                (s.file) " · " (format!("{:.1}", s.duration_s)) " s · capture: "
                (s.capture.as_deref().unwrap_or("none"))
            }
            "\n"
            @if let Some(e) = &s.error {
                pre class="error" { "run stopped: " (e) }
                "\n"
            }
            @if let Some(why) = &s.skip_reason {
                p class="note skipped" { "Skipped: " (why) }
                "\n"
            }
            (expectations(s))
            (streams(s))
            (endpoints(s))
            (observations(s))
            (wire_of(s, base, wire, notes))
            (connections(s))
            (agent_logs(s))
        }
        "\n"
    }
}

/// The table of the scenario's verdicts.
fn expectations(s: &ScenarioResult) -> Markup {
    html! {
        h3 { "Expectations" }
        "\n"
        @if s.verdicts.is_empty() {
            p class="note" { "No expectation was judged." }
        } @else {
            table class="verdicts" {
                thead { tr {
                    th { "result" } th { "kind" } th { "what" } th { "expected" } th { "actual" }
                    th { "notes" }
                } }
                tbody {
                    "\n"
                    @for v in &s.verdicts {
                        @let (c, outcome, m) = if v.deviation {
                            ("deviation", "deviation", "≠ deviates (recorded)")
                        } else if v.pass {
                            ("pass", "passed", "✓ pass")
                        } else {
                            ("fail", "failed", "✗ FAIL")
                        };
                        tr class={ "verdict " (outcome) } data-kind=(v.kind.name()) {
                            td class={ "result " (c) } { (m) }
                            td { (v.kind.name()) }
                            td { (v.what) }
                            td class="text" { (v.expected) }
                            td class="text" { (v.actual) }
                            td class="text" { (v.detail.as_deref().unwrap_or_default()) }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

/// The numbers of each stream step, then each one's wire.
fn streams(s: &ScenarioResult) -> Markup {
    let lat = |r: &crate::protocol::StreamReport,
               f: fn(&crate::protocol::stream::Percentiles) -> u64| {
        r.latency_us.as_ref().map(|l| crate::judge::us_or_ms(f(l))).unwrap_or_default()
    };
    if s.streams.is_empty() {
        return html! {};
    }
    html! {
        h3 { "Streams" }
        "\n"
        table class="streams" {
            thead { tr {
                th { "stream" } th { "on" } th { "verb" } th { "QPs" } th { "completed" }
                th { "elapsed" } th { "messages/s" } th { "Gb/s" } th { "latency p50" } th { "p99" }
                th { "max" }
            } }
            tbody {
                "\n"
                @for st in &s.streams {
                    @let r = &st.report;
                    @let (msgs, gbps) = r.rates();
                    tr {
                        td { (r.id) } td { (st.on) } td { (r.verb.name()) } td { (r.qps) }
                        td { (r.completed) " of " (r.count) }
                        td { (format!("{:.1}", r.elapsed_us as f64 / 1000.0)) " ms" }
                        td { (format!("{msgs:.0}")) } td { (format!("{gbps:.3}")) }
                        td { (lat(r, |l| l.p50)) }
                        td { (lat(r, |l| l.p99)) }
                        td { (lat(r, |l| l.max)) }
                    }
                    "\n"
                }
            }
        }
        "\n"
        @for st in &s.streams {
            (stream_wire(st))
        }
    }
}

/// What each endpoint set up: device, GID, IP, QPNs and starting PSNs.
fn endpoints(s: &ScenarioResult) -> Markup {
    html! {
        h3 { "Endpoints" }
        "\n"
        @if s.endpoints.is_empty() {
            p class="note" { "No endpoint was set up." }
        } @else {
            table class="endpoints" {
                thead { tr {
                    th { "name" } th { "VM" } th { "device" } th { "GID" } th { "IP" } th { "QPNs" }
                    th { "starting PSNs" }
                } }
                tbody {
                    "\n"
                    @for (name, f) in &s.endpoints {
                        @let qpns: Vec<String> =
                            f.qps.iter().map(|q| format!("{} {:#x}", q.name, q.qpn)).collect();
                        @let psns: Vec<String> =
                            f.qps.iter().map(|q| format!("{} {}", q.name, q.psn)).collect();
                        tr data-endpoint=(name) {
                            td { (name) }
                            td { (f.vm.as_deref().unwrap_or("-")) }
                            td { (f.device) " port " (f.port) }
                            td class="text" { (f.gid) " (index " (f.gid_index) ")" }
                            td { (f.ip) }
                            td class="text" { (qpns.join(", ")) }
                            td class="text" { (psns.join(", ")) }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

/// What the setup did, as a device profile records it.
fn observations(s: &ScenarioResult) -> Markup {
    if s.observations.is_empty() {
        return html! {};
    }
    html! {
        h3 { "What the setup did" }
        "\n"
        table class="observations" {
            thead { tr { th { "observation" } th { "value" } } }
            tbody {
                "\n"
                @for (k, v) in &s.observations {
                    tr { td { (k) } td class="text" { (v) } }
                    "\n"
                }
            }
        }
        "\n"
    }
}

/// The wire: the lab switch's fault rules, the failing wire expectations, and the
/// ladder of the capture (read here unless `wire` is given; a capture that cannot
/// be read is a note on the page and in `notes`).
fn wire_of(
    s: &ScenarioResult,
    base: Option<&Path>,
    wire: Option<Cow<'_, Timeline>>,
    notes: &mut Vec<String>,
) -> Markup {
    let failing: Vec<_> =
        s.verdicts.iter().filter(|v| v.kind == VerdictKind::Wire && !v.pass).collect();
    let mut drawn = String::new();
    let unread = match (&s.capture, wire) {
        (None, _) => None,
        (Some(_), Some(w)) => {
            ladder(&mut drawn, s, &w);
            None
        }
        (Some(c), None) => {
            let path = capture_file(c, base);
            match timeline::read(&path) {
                Ok(w) => {
                    ladder(&mut drawn, s, &w);
                    None
                }
                Err(e) => {
                    notes.push(format!(
                        "{}: the capture {} could not be read ({e})",
                        s.name,
                        path.display()
                    ));
                    Some((path, e))
                }
            }
        }
    };
    html! {
        h3 { "Wire" }
        "\n"
        @if !s.faults.is_empty() {
            div class="faults" {
                "Fault rules of the lab switch:"
                ul { @for f in &s.faults { li { code { (f) } } } }
            }
            "\n"
        }
        @if !failing.is_empty() {
            div class="failing-wire" {
                @for v in failing {
                    p {
                        b { "✗ " (v.what) } br; "expected: " code { (v.expected) } br;
                        "actual: " code { (v.actual) }
                    }
                }
            }
            "\n"
        }
        @if s.capture.is_none() {
            p class="note no-capture" {
                "No capture was recorded for this scenario: there is no ladder to draw."
            }
            "\n"
        }
        @if let Some((path, e)) = unread {
            p class="note no-capture" {
                "The capture " (path.display()) " could not be read (" (e)
                "): there is no ladder to draw."
            }
            "\n"
        }
        (PreEscaped(drawn))
    }
}

/// How each QP connected: its and its peer's QPN and PSN.
fn connections(s: &ScenarioResult) -> Markup {
    if s.connections.is_empty() {
        return html! {};
    }
    html! {
        details {
            summary { "connections" }
            table class="connections" {
                thead { tr {
                    th { "QP" } th { "endpoint" } th { "local QPN / PSN" } th { "remote QPN / PSN" }
                } }
                tbody {
                    @for c in &s.connections {
                        tr {
                            td { (c.qp) } td { (c.endpoint) }
                            td { (format!("{:#x}", c.local.qpn)) " / " (c.local.psn) }
                            td { (format!("{:#x}", c.remote.qpn)) " / " (c.remote.psn) }
                        }
                    }
                }
            }
        }
        "\n"
    }
}

/// What each agent said (those that said something).
fn agent_logs(s: &ScenarioResult) -> Markup {
    let logs: BTreeMap<_, _> = s.agent_logs.iter().filter(|(_, l)| !l.trim().is_empty()).collect();
    html! {
        @for (ep, log) in logs {
            details { summary { "agent " (ep) " said" } pre { (log.trim()) } }
            "\n"
        }
    }
}

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;
