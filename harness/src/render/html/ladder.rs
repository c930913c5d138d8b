//! The ladder diagram of one scenario's wire: a lane per endpoint, an arrow per
//! RoCE frame (see the page's doc for what each mark means and the markup
//! contract with `tests/browser/check_ladder.py`); a long capture is shown as
//! windows around its anomalies.
//!
//! Owns: [`Rung`], the lanes, the windows and the SVG. Imports: the results, the
//! judge's timeline, maud.
use std::net::IpAddr;

use maud::{html, Markup, Render as _};

use crate::judge::timeline::{Packet, Timeline, MAX_ROWS};
use crate::results::ScenarioResult;
// The ladder's geometry, in px (the SVG is drawn 1:1, never scaled).
/// Lane headings above the first row.
pub(super) const TOP: f64 = 84.0;
pub(super) const ROW: f64 = 26.0;
/// The arrow's y within its row; its label sits above it.
pub(super) const ROW_ARROW: f64 = 18.0;
/// x of the first lane, and between lanes.
pub(super) const LANE0: f64 = 220.0;
pub(super) const SPAN: f64 = 460.0;
/// Right of the last lane: the marks (dropped, bad ICRC, …).
pub(super) const MARKS: f64 = 360.0;
/// Right edges of the time and frame-number columns.
pub(super) const TIME_X: f64 = 78.0;
pub(super) const FRAME_X: f64 = 136.0;

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
    pub(super) fn flags(&self) -> [(bool, &'static str, Option<String>); 11] {
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
    pub(super) fn marks(&self) -> Vec<String> {
        self.flags().into_iter().filter(|f| f.0).filter_map(|f| f.2).collect()
    }
}

/// A lane of the ladder: an endpoint (or, with no endpoint facts, an address).
pub(super) struct Lane {
    name: String,
    ip: Option<IpAddr>,
    /// Heading lines under the name: IP, QPNs.
    lines: Vec<String>,
    title: String,
}

pub(super) fn lanes_of(s: &ScenarioResult, wire: &Timeline) -> Vec<Lane> {
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

pub(super) fn fmt_ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Frames each side of an anomaly in a long capture's ladder windows.
pub(super) const WINDOW_BEFORE: usize = 12;
pub(super) const WINDOW_AFTER: usize = 28;
/// Windows drawn of a long capture.
pub(super) const WINDOWS: usize = 6;
/// The most frames one window grows to when anomalies follow each other.
pub(super) const WINDOW_MAX: usize = 120;

/// Where a long capture's anomalies are: windows of frames (index ranges into the
/// timeline, overlapping ones merged) around the first [`WINDOWS`] of them, each
/// with what it shows.
pub(super) fn anomaly_windows(packets: &[Packet]) -> Vec<(std::ops::Range<usize>, String)> {
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
pub(super) fn ladder(out: &mut String, s: &ScenarioResult, wire: &Timeline) {
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

pub(super) fn long_ladder(s: &ScenarioResult, wire: &Timeline) -> Markup {
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
pub(super) fn rungs(s: &ScenarioResult, wire: &Timeline, packets: &[Packet]) -> Markup {
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
pub(super) fn lane_x(i: usize) -> f64 {
    LANE0 + i as f64 * SPAN
}

/// The diagram: column heads, a lane per endpoint, an arrow per frame drawn
/// (`(frame, sender's lane, receiver's lane)`); times from `first` (ns).
pub(super) fn ladder_svg(lanes: &[Lane], drawn: &[(Rung<'_>, usize, usize)], first: u64) -> Markup {
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
pub(super) fn lane(x: f64, l: &Lane, bottom: f64) -> Markup {
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
pub(super) fn arrow(
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
pub(super) fn legend() -> Markup {
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
pub(super) fn stray_note(stray: &[Rung<'_>]) -> Markup {
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
