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
//! Owns: the page (`render_page`), its ladder, stream plots and CSS/JS. Imports: the
//! results (`crate::results`), the judge's [`Timeline`] and time formats, the
//! protocol's stream percentiles, dissector's NAK kinds, `super::esc`.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::esc;
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
    if wire.packets.len() <= MAX_ROWS {
        rungs(out, s, wire, &wire.packets);
    } else {
        long_ladder(out, s, wire);
    }
    if let Some(d) = &wire.damaged {
        let _ = writeln!(out, "<p class=\"note damaged\">The capture is damaged: {} (the frames before the damage are shown).</p>", esc(d));
    }
}

fn long_ladder(out: &mut String, s: &ScenarioResult, wire: &Timeline) {
    let windows = anomaly_windows(&wire.packets);
    let _ = writeln!(
        out,
        "<p class=\"note more\">{} RoCE frames, more than one ladder shows ({MAX_ROWS}): {}.</p>",
        wire.packets.len(),
        if windows.is_empty() {
            format!(
                "no anomaly (drop, NAK, resend, mark) in them; the first {} frames",
                WINDOW_BEFORE + WINDOW_AFTER
            )
        } else {
            format!("the wire around its first {} anomalies (drops, NAKs, resends, marks), {WINDOW_BEFORE} frames before each and {WINDOW_AFTER} from it", windows.len())
        }
    );
    if windows.is_empty() {
        return rungs(out, s, wire, &wire.packets[..WINDOW_BEFORE + WINDOW_AFTER]);
    }
    for (range, why) in windows {
        let (a, b) = (wire.packets[range.start].number, wire.packets[range.end - 1].number);
        let _ = writeln!(
            out,
            "<h4 class=\"window\" data-first=\"{a}\" data-last=\"{b}\">frames {a}–{b} ({})</h4>",
            esc(&why)
        );
        rungs(out, s, wire, &wire.packets[range]);
    }
}

/// A ladder of `packets`, some of `wire`'s.
fn rungs(out: &mut String, s: &ScenarioResult, wire: &Timeline, packets: &[Packet]) {
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
    if packets.is_empty() {
        out.push_str("<p class=\"note\">No RoCE frames in the capture.</p>\n");
    }
    if !drawn.is_empty() {
        let lane_x = |i: usize| LANE0 + i as f64 * SPAN;
        let last = lane_x(lanes.len().saturating_sub(1));
        let width = last + MARKS;
        let bottom = TOP + drawn.len() as f64 * ROW;
        let height = bottom + 16.0;
        let first = wire.first_ts_ns.unwrap_or(0);
        let _ = writeln!(
            out,
            "<div class=\"ladder-wrap\"><svg class=\"ladder\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"ladder diagram: {} RoCE frames\">",
            drawn.len()
        );
        let _ = writeln!(
            out,
            "<text class=\"col-head\" x=\"{TIME_X}\" y=\"{}\" text-anchor=\"end\">ms</text><text class=\"col-head\" x=\"{FRAME_X}\" y=\"{}\" text-anchor=\"end\">frame</text>",
            TOP - 10.0,
            TOP - 10.0
        );
        for (i, l) in lanes.iter().enumerate() {
            let x = lane_x(i);
            let _ = write!(out, "<g class=\"lane-head\"><title>{}</title><text class=\"lane-name\" x=\"{x}\" y=\"20\" text-anchor=\"middle\">{}</text>", esc(&l.title), esc(&l.name));
            for (k, t) in l.lines.iter().enumerate() {
                let _ = write!(
                    out,
                    "<text class=\"lane-info\" x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    38 + 16 * k,
                    esc(t)
                );
            }
            let _ = writeln!(
                out,
                "</g><line class=\"lane\" data-endpoint=\"{}\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{bottom}\"><title>{}</title></line>",
                esc(&l.name),
                TOP - 4.0,
                esc(&l.title)
            );
        }
        for (row, (r, a, b)) in drawn.iter().enumerate() {
            let y = TOP + row as f64 * ROW + ROW_ARROW;
            let (x1, xt) = (lane_x(*a), lane_x(*b));
            let dir = if xt > x1 { 1.0 } else { -1.0 };
            let dropped = r.0.marks.dropped();
            let x2 = if dropped { (x1 + xt) / 2.0 } else { xt };
            // The switch, not the sender, put a synthesized frame on the wire.
            let synthesized = r.0.marks.synthesized();
            let x1 = if synthesized { (x1 + xt) / 2.0 } else { x1 };
            let label = r.label();
            let mut class = vec!["arrow", if r.0.is_request { "request" } else { "response" }];
            class.extend(r.flags().into_iter().filter(|f| f.0).map(|f| f.1));
            let _ = write!(
                out,
                "<g class=\"{}\" data-frame=\"{}\" data-from=\"{}\" data-to=\"{}\" data-label=\"{}\"",
                class.join(" "),
                r.0.number,
                esc(&lanes[*a].name),
                esc(&lanes[*b].name),
                esc(&label)
            );
            if r.0.mad.is_none() {
                let _ = write!(out, " data-psn=\"{}\"", r.0.psn);
            }
            let _ = write!(out, "><title>{}</title><line class=\"shaft\" x1=\"{x1}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y}\"/>", esc(r.0.line.as_deref().unwrap_or("")));
            if synthesized {
                let _ = write!(out, "<path class=\"origin\" d=\"M{x1} {}L{} {y}L{x1} {}L{} {y}Z\"><title>synthesized by the lab switch</title></path>", y - 5.0, x1 + 5.0, y + 5.0, x1 - 5.0);
            }
            if dropped {
                let _ = write!(
                    out,
                    "<path class=\"x\" d=\"M{} {}L{} {}M{} {}L{} {}\"><title>dropped by the lab switch</title></path>",
                    x2 - 5.0,
                    y - 5.0,
                    x2 + 5.0,
                    y + 5.0,
                    x2 - 5.0,
                    y + 5.0,
                    x2 + 5.0,
                    y - 5.0
                );
            } else {
                let _ = write!(
                    out,
                    "<polygon class=\"head\" points=\"{xt},{y} {},{} {},{}\"/>",
                    xt - dir * 9.0,
                    y - 4.5,
                    xt - dir * 9.0,
                    y + 4.5
                );
            }
            let _ = write!(
                out,
                "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                (x1 + x2) / 2.0,
                y - 7.0,
                esc(&label)
            );
            let _ = write!(
                out,
                "<text class=\"time\" x=\"{TIME_X}\" y=\"{}\" text-anchor=\"end\">{}</text><text class=\"frame-no\" x=\"{FRAME_X}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                y + 4.0,
                fmt_ms(r.0.ts_ns.saturating_sub(first)),
                y + 4.0,
                r.0.number
            );
            let m = r.marks();
            if !m.is_empty() {
                let _ = write!(
                    out,
                    "<text class=\"mark\" x=\"{}\" y=\"{}\">{}</text>",
                    last + 16.0,
                    y + 4.0,
                    esc(&m.join(" · "))
                );
            }
            out.push_str("</g>\n");
        }
        out.push_str("</svg></div>\n");
        let _ = writeln!(
            out,
            "<p class=\"legend\">Time in ms since the capture's first frame. <span class=\"k dropped\">✗ dropped by the lab switch</span> <span class=\"k injected\">- - injected duplicate</span> <span class=\"k held\">··· held (reordered/delayed)</span> <span class=\"k synthesized\">◆ synthesized by the switch (the responder never sent it)</span> <span class=\"k modified\">changed by the switch</span> <span class=\"k nak\">NAK</span> <span class=\"k rnr\">RNR NAK</span> <span class=\"k bad-icrc\">bad ICRC</span> <span class=\"k cnp\">CNP</span> <span class=\"k cm\">CM</span>. Hover an arrow for the decoded frame and the other frames of its PSN.</p>"
        );
    }
    if !stray.is_empty() {
        let shown: Vec<String> = stray
            .iter()
            .take(20)
            .map(|r| {
                let addr =
                    |a: Option<IpAddr>| a.map(|a| a.to_string()).unwrap_or_else(|| "?".into());
                format!("frame {} {} → {} {}", r.0.number, addr(r.0.src), addr(r.0.dst), r.label())
            })
            .collect();
        let _ = writeln!(
            out,
            "<p class=\"note stray\">{} RoCE frames are not between two endpoints of this scenario (their addresses match no endpoint's IP, or both ends are the same), not drawn: {}{}</p>",
            stray.len(),
            esc(&shown.join("; ")),
            if stray.len() > shown.len() { "; …" } else { "" }
        );
    }
}

/// Plot geometry, in px.
const PLOT_W: f64 = 720.0;
const PLOT_H: f64 = 180.0;
const PLOT_LEFT: f64 = 64.0;
const PLOT_TOP: f64 = 16.0;

/// A stream's wire: its numbers per QP, its acknowledgement latency over the run
/// with resends and NAKs marked, and what each QP got through.
fn stream_wire(o: &mut String, st: &crate::results::StreamRun) {
    let Some(w) = &st.wire else { return };
    let d = crate::judge::duration;
    let pct = |l: &Option<crate::protocol::stream::Percentiles>| {
        l.as_ref()
            .map(|l| format!("{} / {} / {}", d(l.p50), d(l.p99), d(l.max)))
            .unwrap_or_else(|| "–".into())
    };
    let _ = writeln!(
        o,
        "<h4 class=\"stream-wire\">Stream {} on the wire</h4>\n<p class=\"stream-wire-summary\">{} of {} messages acknowledged; at most {} unacknowledged at once (window {}); request→ACK p50 / p99 / max {}; {} resends (p50 / p99 / max after their cause {}); {} NAKs ({} RNR).</p>",
        esc(&st.report.id),
        w.acked,
        w.messages,
        w.peak_outstanding,
        w.window,
        pct(&w.ack_latency_ns),
        w.resends,
        pct(&w.resend_latency_ns),
        w.naks,
        w.rnr_naks
    );
    latency_plot(o, &st.report.id, &w.plot);
    per_qp_bars(o, w, st.report.elapsed_us);
    o.push_str("<details class=\"qp-pace\"><summary>each QP</summary><table class=\"qp-pace\"><thead><tr><th>QP</th><th>messages</th><th>acknowledged</th><th>peak unacknowledged</th><th>request→ACK p50 / p99 / max</th><th>resends (redundant)</th><th>NAKs (RNR)</th><th>go-back-N</th></tr></thead><tbody>\n");
    for q in &w.qps {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{} ({})</td><td>{}</td></tr>",
            esc(&q.qp),
            q.messages,
            q.acked,
            q.peak_outstanding,
            pct(&q.ack_latency_ns),
            q.resends,
            q.redundant_resends,
            q.naks,
            q.rnr_naks,
            match &q.go_back_n {
                None => "–".to_string(),
                Some(g) if g.broken == 0 => "held".to_string(),
                Some(g) => format!("broken: {}", esc(g.first.as_deref().unwrap_or("?"))),
            }
        );
    }
    o.push_str("</tbody></table></details>\n");
}

/// Latency over the run: each slice's median and highest, resends marked under
/// the axis, NAKs over the plot.
fn latency_plot(o: &mut String, id: &str, p: &crate::results::Plot) {
    if p.slices.is_empty() {
        return;
    }
    let top = p.slices.iter().map(|s| s.max_ns).max().unwrap_or(1).max(1) as f64;
    let span = p.span_ns.max(1) as f64;
    let x = |ns: u64| PLOT_LEFT + ns as f64 / span * PLOT_W;
    let y = |ns: u64| PLOT_TOP + PLOT_H - ns as f64 / top * PLOT_H;
    let (w, h) = (PLOT_LEFT + PLOT_W + 16.0, PLOT_TOP + PLOT_H + 44.0);
    let _ = writeln!(
        o,
        "<svg class=\"latency-plot\" data-stream=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"request to ACK latency over the run of stream {}\">",
        esc(id),
        esc(id)
    );
    let (x0, y0, x1) = (PLOT_LEFT, PLOT_TOP + PLOT_H, PLOT_LEFT + PLOT_W);
    let _ = writeln!(o, "<line class=\"axis\" x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\"/><line class=\"axis\" x1=\"{x0}\" y1=\"{PLOT_TOP}\" x2=\"{x0}\" y2=\"{y0}\"/>");
    let d = crate::judge::duration;
    let _ = writeln!(
        o,
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text><text class=\"tick\" x=\"{x0}\" y=\"{}\">0</text><text class=\"tick\" x=\"{x1}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        x0 - 4.0,
        PLOT_TOP + 8.0,
        d(top as u64),
        x0 - 4.0,
        y0,
        y0 + 14.0,
        y0 + 14.0,
        d(p.span_ns)
    );
    let line = |f: fn(&crate::results::Slice) -> u64| -> String {
        p.slices
            .iter()
            .map(|s| format!("{:.1},{:.1}", x(s.at_ns), y(f(s))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(o, "<polyline class=\"max\" points=\"{}\"><title>highest latency of each slice</title></polyline>", line(|s| s.max_ns));
    let _ = writeln!(o, "<polyline class=\"p50\" points=\"{}\"><title>median latency of each slice</title></polyline>", line(|s| s.p50_ns));
    for m in &p.resends {
        let _ = writeln!(o, "<line class=\"resend\" x1=\"{0:.1}\" y1=\"{1}\" x2=\"{0:.1}\" y2=\"{2}\"><title>frame {3}: resend after {4}</title></line>", x(m.at_ns), y0 + 18.0, y0 + 26.0, m.frame, esc(&m.what));
    }
    for m in &p.naks {
        let _ = writeln!(o, "<line class=\"nak\" x1=\"{0:.1}\" y1=\"{1}\" x2=\"{0:.1}\" y2=\"{2}\"><title>frame {3}: {4}</title></line>", x(m.at_ns), PLOT_TOP - 12.0, PLOT_TOP - 4.0, m.frame, esc(&m.what));
    }
    let _ = writeln!(o, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">time since its first message; request→ACK latency (median, highest); ▲ NAKs above, resends below</text></svg>", x0 + PLOT_W / 2.0, y0 + 40.0);
}

/// Messages each QP got acknowledged, as bars: a starved QP stands out.
fn per_qp_bars(o: &mut String, w: &crate::results::StreamWire, elapsed_us: u64) {
    if w.qps.len() < 2 {
        return;
    }
    let most = w.qps.iter().map(|q| q.acked).max().unwrap_or(0).max(1) as f64;
    let bar = (PLOT_W / w.qps.len() as f64).min(24.0);
    let (width, h) = (PLOT_LEFT + bar * w.qps.len() as f64 + 16.0, 120.0);
    let secs = elapsed_us.max(1) as f64 / 1e6;
    let _ = writeln!(o, "<svg class=\"qp-bars\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" viewBox=\"0 0 {width} {}\" role=\"img\" aria-label=\"messages acknowledged per QP\">", h + 20.0, h + 20.0);
    for (i, q) in w.qps.iter().enumerate() {
        let bh = q.acked as f64 / most * (h - 10.0);
        let _ = writeln!(
            o,
            "<rect class=\"bar\" data-qp=\"{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\"><title>{}: {} messages acknowledged, {:.0} a second</title></rect>",
            esc(&q.qp),
            PLOT_LEFT + i as f64 * bar,
            h - bh,
            (bar - 1.0).max(1.0),
            esc(&q.qp),
            q.acked,
            q.acked as f64 / secs
        );
    }
    let _ = writeln!(o, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text class=\"tick\" x=\"{PLOT_LEFT}\" y=\"{}\">messages acknowledged per QP ({} QPs)</text></svg>", PLOT_LEFT - 4.0, 10.0 + 8.0, most as u64, h + 16.0, w.qps.len());
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
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>roce run: {} passed, {} failed, {} skipped</title>\n<style>{CSS}</style></head>\n<body>\n",
        report.passed, report.failed, report.skipped
    );
    let _ = writeln!(
        o,
        "<header id=\"summary\" data-passed=\"{}\" data-failed=\"{}\" data-skipped=\"{}\"><h1>roce run</h1><p class=\"totals\"><span class=\"pass\">{} passed</span>, <span class=\"fail\">{} failed</span>, <span class=\"skip\">{} skipped</span> ({} scenarios in {:.1} s)</p>\n<ul class=\"toc\">",
        report.passed,
        report.failed,
        report.skipped,
        report.passed,
        report.failed,
        report.skipped,
        report.scenarios.len(),
        report.duration_s
    );
    for (i, s) in report.scenarios.iter().enumerate() {
        let c = match s.status {
            Status::Passed => "pass",
            Status::Failed => "fail",
            Status::Skipped => "skip",
        };
        let m = s.status.mark();
        let _ = writeln!(
            o,
            "<li><a class=\"{c}\" href=\"#s{}\">{m} {}</a> <span class=\"file\">({})</span></li>",
            i + 1,
            esc(&s.name),
            esc(&s.file)
        );
    }
    o.push_str("</ul></header>\n<main>\n");
    for (i, s) in report.scenarios.iter().enumerate() {
        scenario(&mut o, i + 1, s, base, wires(i), &mut notes);
    }
    let _ = write!(
        o,
        "</main>\n<footer class=\"note\">roce {}</footer>\n<script>{JS}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION")
    );
    (o, notes)
}

fn scenario(
    o: &mut String,
    id: usize,
    s: &ScenarioResult,
    base: Option<&Path>,
    wire: Option<Cow<'_, Timeline>>,
    notes: &mut Vec<String>,
) {
    let (c, outcome) = match s.status {
        Status::Passed => ("pass", "passed"),
        Status::Failed => ("fail", "failed"),
        Status::Skipped => ("skip", "skipped"),
    };
    let _ = writeln!(
        o,
        "<section class=\"scenario {outcome}\" id=\"s{id}\" data-name=\"{}\" data-pass=\"{}\">\n<h2><span class=\"badge {c}\">{}</span> {}</h2>",
        esc(&s.name),
        s.pass,
        c.to_uppercase(),
        esc(&s.name)
    );
    let _ = writeln!(
        o,
        "<p class=\"file\">{} · {:.1} s · capture: {}</p>",
        esc(&s.file),
        s.duration_s,
        s.capture.as_deref().map(esc).unwrap_or_else(|| "none".into())
    );
    if let Some(e) = &s.error {
        let _ = writeln!(o, "<pre class=\"error\">run stopped: {}</pre>", esc(e));
    }
    if let Some(why) = &s.skip_reason {
        let _ = writeln!(o, "<p class=\"note skipped\">Skipped: {}</p>", esc(why));
    }

    o.push_str("<h3>Expectations</h3>\n");
    if s.verdicts.is_empty() {
        o.push_str("<p class=\"note\">No expectation was judged.</p>\n");
    } else {
        o.push_str("<table class=\"verdicts\"><thead><tr><th>result</th><th>kind</th><th>what</th><th>expected</th><th>actual</th><th>notes</th></tr></thead><tbody>\n");
        for v in &s.verdicts {
            let (c, outcome, m) = if v.deviation {
                ("deviation", "deviation", "≠ deviates (recorded)")
            } else if v.pass {
                ("pass", "passed", "✓ pass")
            } else {
                ("fail", "failed", "✗ FAIL")
            };
            let _ = writeln!(
                o,
                "<tr class=\"verdict {outcome}\" data-kind=\"{}\"><td class=\"result {c}\">{m}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
                v.kind.name(),
                v.kind.name(),
                esc(&v.what),
                esc(&v.expected),
                esc(&v.actual),
                v.detail.as_deref().map(esc).unwrap_or_default()
            );
        }
        o.push_str("</tbody></table>\n");
    }

    if !s.streams.is_empty() {
        o.push_str("<h3>Streams</h3>\n<table class=\"streams\"><thead><tr><th>stream</th><th>on</th><th>verb</th><th>QPs</th><th>completed</th><th>elapsed</th><th>messages/s</th><th>Gb/s</th><th>latency p50</th><th>p99</th><th>max</th></tr></thead><tbody>\n");
        for st in &s.streams {
            let r = &st.report;
            let (msgs, gbps) = r.rates();
            let lat = |f: fn(&crate::protocol::stream::Percentiles) -> u64| {
                r.latency_us.as_ref().map(|l| crate::judge::us_or_ms(f(l))).unwrap_or_default()
            };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{:.1} ms</td><td>{msgs:.0}</td><td>{gbps:.3}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.id),
                esc(&st.on),
                r.verb.name(),
                r.qps,
                r.completed,
                r.count,
                r.elapsed_us as f64 / 1000.0,
                lat(|l| l.p50),
                lat(|l| l.p99),
                lat(|l| l.max)
            );
        }
        o.push_str("</tbody></table>\n");
        for st in s.streams.iter().filter(|st| st.wire.is_some()) {
            stream_wire(o, st);
        }
    }

    o.push_str("<h3>Endpoints</h3>\n");
    if s.endpoints.is_empty() {
        o.push_str("<p class=\"note\">No endpoint was set up.</p>\n");
    } else {
        o.push_str("<table class=\"endpoints\"><thead><tr><th>name</th><th>VM</th><th>device</th><th>GID</th><th>IP</th><th>QPNs</th><th>starting PSNs</th></tr></thead><tbody>\n");
        for (name, f) in &s.endpoints {
            let qpns: Vec<String> =
                f.qps.iter().map(|q| format!("{} {:#x}", q.name, q.qpn)).collect();
            let psns: Vec<String> = f.qps.iter().map(|q| format!("{} {}", q.name, q.psn)).collect();
            let _ = writeln!(
                o,
                "<tr data-endpoint=\"{}\"><td>{}</td><td>{}</td><td>{} port {}</td><td class=\"text\">{} (index {})</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
                esc(name),
                esc(name),
                esc(f.vm.as_deref().unwrap_or("-")),
                esc(&f.device),
                f.port,
                esc(&f.gid),
                f.gid_index,
                esc(&f.ip),
                esc(&qpns.join(", ")),
                esc(&psns.join(", "))
            );
        }
        o.push_str("</tbody></table>\n");
    }

    if !s.observations.is_empty() {
        o.push_str("<h3>What the setup did</h3>\n<table class=\"observations\"><thead><tr><th>observation</th><th>value</th></tr></thead><tbody>\n");
        for (k, v) in &s.observations {
            let _ = writeln!(o, "<tr><td>{}</td><td class=\"text\">{}</td></tr>", esc(k), esc(v));
        }
        o.push_str("</tbody></table>\n");
    }

    o.push_str("<h3>Wire</h3>\n");
    if !s.faults.is_empty() {
        o.push_str("<div class=\"faults\">Fault rules of the lab switch:<ul>");
        for f in &s.faults {
            let _ = write!(o, "<li><code>{}</code></li>", esc(f));
        }
        o.push_str("</ul></div>\n");
    }
    let failing: Vec<_> =
        s.verdicts.iter().filter(|v| v.kind == VerdictKind::Wire && !v.pass).collect();
    if !failing.is_empty() {
        o.push_str("<div class=\"failing-wire\">");
        for v in failing {
            let _ = write!(
                o,
                "<p><b>✗ {}</b><br>expected: <code>{}</code><br>actual: <code>{}</code></p>",
                esc(&v.what),
                esc(&v.expected),
                esc(&v.actual)
            );
        }
        o.push_str("</div>\n");
    }
    match (&s.capture, wire) {
        (None, _) => o.push_str("<p class=\"note no-capture\">No capture was recorded for this scenario: there is no ladder to draw.</p>\n"),
        (Some(_), Some(w)) => ladder(o, s, &w),
        (Some(c), None) => {
            let path = capture_file(c, base);
            match timeline::read(&path) {
                Ok(w) => ladder(o, s, &w),
                Err(e) => {
                    let _ = writeln!(o, "<p class=\"note no-capture\">The capture {} could not be read ({}): there is no ladder to draw.</p>", esc(&path.display().to_string()), esc(&e));
                    notes.push(format!("{}: the capture {} could not be read ({e})", s.name, path.display()));
                }
            }
        }
    }
    if !s.connections.is_empty() {
        o.push_str("<details><summary>connections</summary><table class=\"connections\"><thead><tr><th>QP</th><th>endpoint</th><th>local QPN / PSN</th><th>remote QPN / PSN</th></tr></thead><tbody>");
        for c in &s.connections {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:#x} / {}</td><td>{:#x} / {}</td></tr>",
                esc(&c.qp),
                esc(&c.endpoint),
                c.local.qpn,
                c.local.psn,
                c.remote.qpn,
                c.remote.psn
            );
        }
        o.push_str("</tbody></table></details>\n");
    }
    let logs: BTreeMap<_, _> = s.agent_logs.iter().filter(|(_, l)| !l.trim().is_empty()).collect();
    for (ep, log) in logs {
        let _ = writeln!(
            o,
            "<details><summary>agent {} said</summary><pre>{}</pre></details>",
            esc(ep),
            esc(log.trim())
        );
    }
    o.push_str("</section>\n");
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod golden;
