//! `roce run --html FILE` and `roce report`: one self-contained HTML page per run.
//!
//! The page holds a summary, then per scenario its expectations, endpoints, fault
//! rules and a ladder diagram of its capture: a lane per endpoint, an arrow per RoCE
//! frame in capture order (CM MADs on QP1 too), drawn here as inline SVG: nothing is
//! fetched and no script is needed to see it. What the lab switch did to a frame (its
//! pcapng comment) marks the arrow: dropped (it stops halfway at a red ✗), an
//! injected duplicate (dashed), held back (reordered or delayed: dotted); bad ICRCs,
//! NAKs, RNR NAKs, CE marks and CNPs have their colour or mark too.
//!
//! The markup is a contract with `tests/browser/check_ladder.py`, which checks the
//! layout in a real browser: each lane is `<line class="lane" data-endpoint>`, each
//! arrow `<g class="arrow …" data-frame data-from data-to data-label>` whose first
//! child is a `<title>` with the decoded line, holding `line.shaft` (from the
//! sender's lane to the receiver's, or halfway when dropped), `text.label` and the
//! row's other texts.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use dissector::frame::{self, Options};
use dissector::wire::aeth::AckKind;
use dissector::wire::opcode::Transport;

use super::esc;
use crate::results::{Report, ScenarioResult};

/// Rows drawn per ladder; frames past it are counted in a note.
pub const MAX_ROWS: usize = 2000;

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

/// One RoCE frame as the ladder draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rung {
    pub number: u64,
    pub ts_ns: u64,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub psn: u32,
    /// `RDMA WRITE Middle  PSN 101`, `NAK PSN Sequence Error  PSN 101`, `CM REQ`.
    pub label: String,
    /// The frame as `roce decode` prints it, with the switch's comment.
    pub line: String,
    /// The lab switch dropped it (sent, never delivered).
    pub dropped: bool,
    /// A copy the switch made (`dup`).
    pub injected: bool,
    /// Held back by the switch (`reorder`, `delay`).
    pub held: bool,
    pub bad_icrc: bool,
    /// Any NAK, RNR NAKs included.
    pub nak: bool,
    pub rnr: bool,
    /// ECN Congestion Experienced.
    pub ce: bool,
    pub cnp: bool,
    /// A MAD on QP1 (CM).
    pub mad: bool,
    pub request: bool,
}

/// The RoCE frames of a capture, as far as it could be read.
#[derive(Debug, Clone, Default)]
pub struct Wire {
    pub rungs: Vec<Rung>,
    /// Of the capture's first frame (RoCE or not): times are shown from there, as
    /// `roce decode` shows them.
    pub first_ts_ns: Option<u64>,
    /// RoCE frames past the limit, not kept.
    pub more: usize,
    /// Why reading stopped early (a damaged file): the frames before are kept.
    pub damaged: Option<String>,
}

/// `ConnectRequest (REQ)` → `REQ`.
fn cm_short(name: &str) -> &str {
    name.rsplit_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or(name)
}

/// Reads a capture's RoCE frames for the ladder, at most `max` of them. The switch's
/// comments are read as `scenario::expect::read_wire` reads them.
pub fn read_ladder(path: &Path, max: usize) -> Result<Wire, String> {
    let mut r = dissector::capture::open(path).map_err(|e| e.to_string())?;
    let opts = Options::default();
    let mut w = Wire::default();
    let mut prev_ts = None;
    loop {
        let rec = match r.next_packet() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => {
                w.damaged = Some(e.to_string());
                break;
            }
        };
        let first = *w.first_ts_ns.get_or_insert(rec.ts_ns);
        let prev = prev_ts.replace(rec.ts_ns).unwrap_or(rec.ts_ns);
        let f = frame::decode(rec.link, rec.data, &opts);
        let Some(ib) = &f.ib else { continue };
        if w.rungs.len() >= max {
            w.more += 1;
            continue;
        }
        let psn = ib.bth.psn.value();
        let kind = ib.aeth.map(|a| a.syndrome.kind());
        let (nak, rnr) = match kind {
            Some(AckKind::RnrNak { .. }) => (true, true),
            Some(AckKind::Nak(_)) => (true, false),
            _ => (false, false),
        };
        let label = if let Some(m) = &f.mad {
            match (m.cm, m.header.mgmt_class, m.header.attribute_id) {
                (Some(cm), _, _) => format!("CM {}", cm_short(cm.name())),
                (None, 0x07, 0x0017) => "CM SIDR REQ".to_string(),
                (None, 0x07, 0x0018) => "CM SIDR REP".to_string(),
                (None, 0x07, a) => format!("CM attr {a:#06x}"),
                (None, c, a) => format!("MAD class {c:#04x} attr {a:#06x}"),
            }
        } else {
            match ib.info {
                Some(i) if i.transport == Transport::Cnp => "CNP".to_string(),
                Some(i) if i.name == "Acknowledge" => {
                    let what = match kind {
                        Some(AckKind::Ack { .. }) => "ACK".to_string(),
                        Some(AckKind::RnrNak { .. }) => "RNR NAK".to_string(),
                        Some(AckKind::Nak(code)) => format!("NAK {}", code.name()),
                        _ => i.name.to_string(),
                    };
                    format!("{what}  PSN {psn}")
                }
                Some(i) => format!("{}  PSN {psn}", i.name),
                None => format!("{}  PSN {psn}", ib.bth.opcode),
            }
        };
        let comment = rec.comment.unwrap_or("");
        let ctx = dissector::fields::Ctx::of(&rec, &f, first, prev);
        let mut line = String::new();
        dissector::print::line(&ctx, &mut line);
        let (src, dst) = f.addrs().unzip();
        w.rungs.push(Rung {
            number: rec.number,
            ts_ns: rec.ts_ns,
            src,
            dst,
            psn,
            label,
            line: line.trim().to_string(),
            dropped: comment.contains("not delivered"),
            injected: comment.starts_with("duplicate "),
            held: comment.contains("reordered by") || comment.contains("delayed "),
            bad_icrc: f.icrc_check(rec.data).is_some_and(|c| !c.ok()),
            nak,
            rnr,
            ce: f.ecn() == Some(3),
            cnp: ib.info.is_some_and(|i| i.transport == Transport::Cnp),
            mad: f.mad.is_some(),
            request: ib.info.is_some_and(|i| i.is_request()),
        });
    }
    Ok(w)
}

/// A lane of the ladder: an endpoint (or, with no endpoint facts, an address).
struct Lane {
    name: String,
    ip: Option<IpAddr>,
    /// Heading lines under the name: IP, QPNs.
    lines: Vec<String>,
    title: String,
}

fn lanes_of(s: &ScenarioResult, wire: &Wire) -> Vec<Lane> {
    if !s.endpoints.is_empty() {
        return s
            .endpoints
            .iter()
            .map(|(name, f)| {
                let qpns: Vec<String> = f
                    .qps
                    .iter()
                    .map(|q| format!("{} QPN {:#x}", q.name, q.qpn))
                    .collect();
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
    for ip in wire.rungs.iter().flat_map(|r| [r.src, r.dst]).flatten() {
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

/// The flags a rung can carry, in display order: whether it is set, its CSS class on
/// the arrow, and what the marks column says of it (nothing for NAK, RNR and CM,
/// which the label already names).
fn flags(r: &Rung) -> [(bool, &'static str, Option<&'static str>); 9] {
    [
        (r.dropped, "dropped", Some("✗ dropped by the lab switch")),
        (r.injected, "injected", Some("duplicate injected by the switch")),
        (r.held, "held", Some("held by the switch (reordered/delayed)")),
        (r.bad_icrc, "bad-icrc", Some("bad ICRC")),
        (r.nak, "nak", None),
        (r.rnr, "rnr", None),
        (r.ce, "ce", Some("CE marked")),
        (r.cnp, "cnp", Some("CNP")),
        (r.mad, "cm", None),
    ]
}

/// What the row's marks column says.
fn marks(r: &Rung) -> Vec<&'static str> {
    flags(r).into_iter().filter(|f| f.0).filter_map(|f| f.2).collect()
}

/// The ladder SVG of a scenario's capture, and notes (frames not drawn, …).
fn ladder(out: &mut String, s: &ScenarioResult, wire: &Wire) {
    let lanes = lanes_of(s, wire);
    let lane_of =
        |ip: Option<IpAddr>| ip.and_then(|ip| lanes.iter().position(|l| l.ip == Some(ip)));
    let mut drawn = Vec::new();
    let mut stray = Vec::new();
    for r in &wire.rungs {
        match (lane_of(r.src), lane_of(r.dst)) {
            (Some(a), Some(b)) if a != b => drawn.push((r, a, b)),
            _ => stray.push(r),
        }
    }
    if wire.rungs.is_empty() && wire.more == 0 {
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
            let x2 = if r.dropped { (x1 + xt) / 2.0 } else { xt };
            let mut class = vec!["arrow", if r.request { "request" } else { "response" }];
            class.extend(flags(r).into_iter().filter(|f| f.0).map(|f| f.1));
            let _ = write!(
                out,
                "<g class=\"{}\" data-frame=\"{}\" data-from=\"{}\" data-to=\"{}\" data-label=\"{}\"",
                class.join(" "),
                r.number,
                esc(&lanes[*a].name),
                esc(&lanes[*b].name),
                esc(&r.label)
            );
            if !r.mad {
                let _ = write!(out, " data-psn=\"{}\"", r.psn);
            }
            let _ = write!(out, "><title>{}</title><line class=\"shaft\" x1=\"{x1}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y}\"/>", esc(&r.line));
            if r.dropped {
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
                esc(&r.label)
            );
            let _ = write!(
                out,
                "<text class=\"time\" x=\"{TIME_X}\" y=\"{}\" text-anchor=\"end\">{}</text><text class=\"frame-no\" x=\"{FRAME_X}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                y + 4.0,
                fmt_ms(r.ts_ns.saturating_sub(first)),
                y + 4.0,
                r.number
            );
            let m = marks(r);
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
            "<p class=\"legend\">Time in ms since the capture's first frame. <span class=\"k dropped\">✗ dropped by the lab switch</span> <span class=\"k injected\">- - injected duplicate</span> <span class=\"k held\">··· held (reordered/delayed)</span> <span class=\"k nak\">NAK</span> <span class=\"k rnr\">RNR NAK</span> <span class=\"k bad-icrc\">bad ICRC</span> <span class=\"k cnp\">CNP</span> <span class=\"k cm\">CM</span>. Hover an arrow for the decoded frame and the other frames of its PSN.</p>"
        );
    }
    if wire.more > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note more\">… {} more frames (the ladder shows the first {MAX_ROWS}).</p>",
            wire.more
        );
    }
    if !stray.is_empty() {
        let shown: Vec<String> = stray
            .iter()
            .take(20)
            .map(|r| {
                let addr =
                    |a: Option<IpAddr>| a.map(|a| a.to_string()).unwrap_or_else(|| "?".into());
                format!(
                    "frame {} {} → {} {}",
                    r.number,
                    addr(r.src),
                    addr(r.dst),
                    r.label
                )
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
    if let Some(d) = &wire.damaged {
        let _ = writeln!(out, "<p class=\"note damaged\">The capture is damaged: {} (the frames before the damage are shown).</p>", esc(d));
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

const CSS: &str = r#"
body { font: 14px/1.4 system-ui, "DejaVu Sans", sans-serif; margin: 1.5em; color: #1e293b; background: #fff; }
h1 { font-size: 1.5em; margin: 0 0 .3em; } h2 { font-size: 1.2em; margin: 0 0 .3em; } h3 { font-size: 1em; margin: 1.2em 0 .4em; }
code, pre, .mono { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 12px; }
.pass { color: #15803d; } .fail { color: #b91c1c; }
.badge { display: inline-block; padding: 0 .5em; border-radius: 3px; color: #fff; font-size: .85em; font-weight: 700; }
.badge.pass { background: #15803d; } .badge.fail { background: #b91c1c; }
section.scenario { border-top: 2px solid #cbd5e1; padding: 1em 0; }
section.scenario.failed { border-top-color: #b91c1c; }
.file { color: #64748b; margin: 0; }
pre.error { background: #fef2f2; border-left: 4px solid #b91c1c; padding: .5em; white-space: pre-wrap; }
table { border-collapse: collapse; }
th, td { border: 1px solid #e2e8f0; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f8fafc; }
td.text { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; word-break: break-word; max-width: 40em; }
tr.failed td { background: #fef2f2; }
td.result { white-space: nowrap; font-weight: 600; }
.faults, .failing-wire { padding: .4em .8em; margin: .5em 0; }
.faults { background: #fffbeb; border-left: 4px solid #d97706; }
.failing-wire { background: #fef2f2; border-left: 4px solid #b91c1c; }
.failing-wire p { margin: .2em 0; }
.note { color: #475569; font-style: italic; }
.ladder-wrap { overflow-x: auto; }
svg.ladder { display: block; background: #fff; }
svg.ladder text { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 12px; white-space: pre; }
svg.ladder .lane-name { font-family: "DejaVu Sans", sans-serif; font-size: 14px; font-weight: 700; fill: #0f172a; }
svg.ladder .lane-info { font-size: 11px; fill: #475569; }
svg.ladder .col-head { font-size: 11px; fill: #64748b; }
svg.ladder .time, svg.ladder .frame-no { font-size: 11px; fill: #64748b; }
line.lane { stroke: #94a3b8; stroke-width: 2; }
.arrow { color: #1e293b; }
.arrow.response { color: #334155; }
.arrow.cm { color: #0f766e; }
.arrow.nak { color: #c2410c; }
.arrow.rnr { color: #7c3aed; }
.arrow.cnp { color: #1d4ed8; }
.arrow.bad-icrc, .arrow.dropped { color: #b91c1c; }
.arrow .shaft { stroke: currentColor; stroke-width: 1.5; }
.arrow .head { fill: currentColor; }
.arrow .label { fill: currentColor; }
.arrow .mark { fill: #b91c1c; font-size: 11px; }
.arrow.ce .mark, .arrow.held .mark, .arrow.injected .mark { fill: #b45309; }
.arrow.injected .shaft { stroke-dasharray: 6 4; }
.arrow.held .shaft { stroke-dasharray: 1.5 3.5; stroke-width: 2.5; stroke-linecap: round; }
.arrow .x { stroke: #dc2626; stroke-width: 2.5; fill: none; }
.arrow:hover .shaft, .arrow.hl .shaft { stroke-width: 3; }
.arrow:hover .label, .arrow.hl .label { font-weight: 700; }
.legend { color: #475569; font-size: 12px; }
.legend .k { margin-right: .6em; }
.legend .k.dropped, .legend .k.bad-icrc { color: #b91c1c; } .legend .k.nak { color: #c2410c; } .legend .k.rnr { color: #7c3aed; }
.legend .k.cnp { color: #1d4ed8; } .legend .k.cm { color: #0f766e; } .legend .k.held { color: #b45309; }
ul.toc { margin: .3em 0; }
"#;

/// Hovering an arrow also highlights the other frames of its PSN (the request, its
/// resends, the ACK or NAK). The diagram does not need it.
const JS: &str = r#"
(function () {
  var on = [];
  document.addEventListener('mouseover', function (e) {
    var g = e.target && e.target.closest ? e.target.closest('g.arrow') : null;
    on.forEach(function (x) { x.classList.remove('hl'); });
    on = [];
    if (!g || !g.dataset.psn) return;
    on = Array.prototype.slice.call(g.ownerSVGElement.querySelectorAll('g.arrow[data-psn="' + g.dataset.psn + '"]'));
    on.forEach(function (x) { x.classList.add('hl'); });
  });
})();
"#;

/// The page for a run's report.
pub fn render(report: &Report) -> String {
    render_page(report, None).0
}

/// The page, and a sentence for each capture that could not be drawn. Relative
/// capture paths that do not exist from here are also looked for under `base`.
pub fn render_page(report: &Report, base: Option<&Path>) -> (String, Vec<String>) {
    let mut notes = Vec::new();
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>roce run: {} passed, {} failed</title>\n<style>{CSS}</style></head>\n<body>\n",
        report.passed, report.failed
    );
    let _ = writeln!(
        o,
        "<header id=\"summary\" data-passed=\"{}\" data-failed=\"{}\"><h1>roce run</h1><p class=\"totals\"><span class=\"pass\">{} passed</span>, <span class=\"fail\">{} failed</span> ({} scenarios in {:.1} s)</p>\n<ul class=\"toc\">",
        report.passed,
        report.failed,
        report.passed,
        report.failed,
        report.scenarios.len(),
        report.duration_s
    );
    for (i, s) in report.scenarios.iter().enumerate() {
        let (c, m) = if s.pass {
            ("pass", "✓")
        } else {
            ("fail", "✗")
        };
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
        scenario(&mut o, i + 1, s, base, &mut notes);
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
    notes: &mut Vec<String>,
) {
    let (c, outcome) = if s.pass {
        ("pass", "passed")
    } else {
        ("fail", "failed")
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
        s.capture
            .as_deref()
            .map(esc)
            .unwrap_or_else(|| "none".into())
    );
    if let Some(e) = &s.error {
        let _ = writeln!(o, "<pre class=\"error\">run stopped: {}</pre>", esc(e));
    }

    o.push_str("<h3>Expectations</h3>\n");
    if s.verdicts.is_empty() {
        o.push_str("<p class=\"note\">No expectation was judged.</p>\n");
    } else {
        o.push_str("<table class=\"verdicts\"><thead><tr><th>result</th><th>kind</th><th>what</th><th>expected</th><th>actual</th><th>notes</th></tr></thead><tbody>\n");
        for v in &s.verdicts {
            let (c, outcome, m) = if v.pass {
                ("pass", "passed", "✓ pass")
            } else {
                ("fail", "failed", "✗ FAIL")
            };
            let _ = writeln!(
                o,
                "<tr class=\"verdict {outcome}\" data-kind=\"{}\"><td class=\"result {c}\">{m}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
                esc(&v.kind),
                esc(&v.kind),
                esc(&v.what),
                esc(&v.expected),
                esc(&v.actual),
                v.detail.as_deref().map(esc).unwrap_or_default()
            );
        }
        o.push_str("</tbody></table>\n");
    }

    o.push_str("<h3>Endpoints</h3>\n");
    if s.endpoints.is_empty() {
        o.push_str("<p class=\"note\">No endpoint was set up.</p>\n");
    } else {
        o.push_str("<table class=\"endpoints\"><thead><tr><th>name</th><th>VM</th><th>device</th><th>GID</th><th>IP</th><th>QPNs</th><th>starting PSNs</th></tr></thead><tbody>\n");
        for (name, f) in &s.endpoints {
            let qpns: Vec<String> = f
                .qps
                .iter()
                .map(|q| format!("{} {:#x}", q.name, q.qpn))
                .collect();
            let psns: Vec<String> = f
                .qps
                .iter()
                .map(|q| format!("{} {}", q.name, q.psn))
                .collect();
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
    let failing: Vec<_> = s
        .verdicts
        .iter()
        .filter(|v| v.kind == "wire" && !v.pass)
        .collect();
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
    match &s.capture {
        None => o.push_str("<p class=\"note no-capture\">No capture was recorded for this scenario: there is no ladder to draw.</p>\n"),
        Some(c) => {
            let path = capture_file(c, base);
            match read_ladder(&path, MAX_ROWS) {
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
    let logs: BTreeMap<_, _> = s
        .agent_logs
        .iter()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
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
mod tests {
    use super::*;
    use crate::results::Verdict;

    fn capture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../captures/lab")
            .join(name)
    }

    fn result(capture: Option<String>) -> ScenarioResult {
        serde_json::from_value(serde_json::json!({
            "name": "<script>alert(1)</script> & \"co\"",
            "file": "x'.toml",
            "pass": false,
            "error": null,
            "verdicts": [],
            "capture": capture,
            "duration_s": 0.5,
            "endpoints": {},
            "connections": []
        }))
        .unwrap()
    }

    /// A saved `--json` report reads back into the same report, field for field.
    #[test]
    fn a_saved_report_reads_back_unchanged() {
        let saved = serde_json::json!({
            "scenarios": [{
                "name": "n", "file": "f.toml", "pass": false, "error": "VM b went away",
                "verdicts": [
                    {"kind": "wire", "what": "w", "pass": false, "expected": "e", "actual": "a", "detail": "d"},
                    {"kind": "memory", "what": "m", "pass": true, "expected": "e", "actual": "a"}
                ],
                "capture": "roce-runs/1/f.pcapng", "duration_s": 1.5,
                "agent_logs": {"a": "said this"},
                "endpoints": {"a": {"vm": "a", "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.1", "ip": "10.0.0.1",
                    "qps": [{"name": "q", "qpn": 17, "psn": 100, "gid": "::ffff:10.0.0.1", "qkey": null}],
                    "mrs": [{"name": "m", "addr": 4096, "len": 64, "rkey": 5, "lkey": 6}]}},
                "connections": [{"qp": "q", "endpoint": "a",
                    "local": {"name": "q", "qpn": 17, "psn": 100, "gid": "g", "qkey": null},
                    "remote": {"name": "q", "qpn": 18, "psn": 200, "gid": "h", "qkey": 7},
                    "peer_mrs_from_cm": 2}],
                "faults": ["drop psn=101 nth=1 (from a, QP q)"]
            }],
            "passed": 0, "failed": 1, "duration_s": 2.0
        });
        /// Every field of `a` is in `b`, the same (`b` may have newer fields).
        fn within(a: &serde_json::Value, b: &serde_json::Value) -> bool {
            use serde_json::Value::{Array, Object};
            match (a, b) {
                (Object(x), Object(y)) => x
                    .iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| within(v, w))),
                (Array(x), Array(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(v, w)| within(v, w))
                }
                _ => a == b,
            }
        }
        let r: Report = serde_json::from_value(saved.clone()).unwrap();
        let again = serde_json::to_value(&r).unwrap();
        assert!(within(&saved, &again), "{saved:#}\nread back as\n{again:#}");
        // Reports written before `faults` existed still read.
        let mut old = saved.clone();
        old["scenarios"][0]
            .as_object_mut()
            .unwrap()
            .remove("faults");
        let r: Report = serde_json::from_value(old).unwrap();
        assert!(r.scenarios[0].faults.is_empty());
    }

    #[test]
    fn escapes_text_from_scenarios_and_captures() {
        assert_eq!(
            esc("<a href='x'>&\"</a>\u{1}\n"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;\u{fffd}\n"
        );
        let r = Report {
            scenarios: vec![result(None)],
            passed: 0,
            failed: 1,
            duration_s: 1.0,
            profile: None,
        };
        let page = render(&r);
        assert!(
            !page.contains("<script>alert"),
            "scenario text reached the page unescaped"
        );
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;"));
        assert!(page
            .contains("data-name=\"&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;\""));
        assert!(
            !page.contains("src=") && !page.contains("href=\"http"),
            "the page fetches nothing"
        );
    }

    #[test]
    fn a_missing_capture_is_a_note_not_a_panic() {
        let r = Report {
            scenarios: vec![result(None), result(Some("/nonexistent/x.pcapng".into()))],
            passed: 0,
            failed: 2,
            duration_s: 1.0,
            profile: None,
        };
        let (page, notes) = render_page(&r, None);
        assert!(page.contains("No capture was recorded for this scenario"));
        assert!(page.contains("The capture /nonexistent/x.pcapng could not be read"));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(!page.contains("class=\"arrow"));
    }

    /// The flags agree with what the wire expectations read from the same capture.
    #[test]
    fn rungs_agree_with_the_wire_expectations() {
        for name in [
            "rc_drop_retransmit.pcapng",
            "rc_ce_mark.pcapng",
            "write_bw_rdma_cm.pcapng",
        ] {
            let w = read_ladder(&capture(name), MAX_ROWS).unwrap();
            let wire = crate::judge::read_wire(&capture(name)).unwrap();
            for f in &wire {
                let r = w.rungs.iter().find(|r| r.number == f.number).unwrap();
                assert_eq!(
                    (
                        r.dropped, r.injected, r.held, r.ce, r.cnp, r.bad_icrc, r.request, r.nak,
                        r.src, r.dst
                    ),
                    (
                        f.dropped,
                        f.injected,
                        f.held,
                        f.ce,
                        f.cnp,
                        f.icrc_ok == Some(false),
                        f.is_request,
                        f.nak.is_some(),
                        Some(f.src),
                        Some(f.dst)
                    ),
                    "{name} frame {}",
                    f.number
                );
            }
        }
        let w = read_ladder(&capture("rc_drop_retransmit.pcapng"), MAX_ROWS).unwrap();
        let r12 = w.rungs.iter().find(|r| r.number == 12).unwrap();
        assert!(r12.dropped);
        assert_eq!(r12.label, "SEND First  PSN 8227874");
        assert!(r12.line.contains("not delivered"), "{}", r12.line);
        assert_eq!(
            w.rungs.iter().find(|r| r.number == 16).unwrap().label,
            "NAK PSN Sequence Error  PSN 8227874"
        );
        assert_eq!(
            w.rungs.iter().find(|r| r.number == 21).unwrap().label,
            "ACK  PSN 8227877"
        );
        let cm = read_ladder(&capture("write_bw_rdma_cm.pcapng"), MAX_ROWS).unwrap();
        assert!(
            cm.rungs.iter().any(|r| r.mad && r.label == "CM REQ"),
            "{:?}",
            cm.rungs.iter().map(|r| &r.label).collect::<Vec<_>>()
        );
        let capped = read_ladder(&capture("rc_drop_retransmit.pcapng"), 10).unwrap();
        assert_eq!((capped.rungs.len(), capped.more), (10, w.rungs.len() - 10));
    }

    #[test]
    fn frames_of_no_endpoint_are_a_note() {
        let mut s = result(Some(
            capture("rc_drop_retransmit.pcapng").display().to_string(),
        ));
        s.verdicts.push(Verdict {
            kind: "wire".into(),
            what: "wire of QP q from b".into(),
            pass: false,
            expected: "x".into(),
            actual: "y".into(),
            detail: None,
        });
        s.endpoints = serde_json::from_value(serde_json::json!({
            "a": {"vm": "a", "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.1", "ip": "10.0.0.1",
                  "qps": [{"name": "q", "qpn": 31, "psn": 1, "gid": "::ffff:10.0.0.1"}], "mrs": []},
            "c": {"vm": null, "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.9", "ip": "10.0.0.9", "qps": [], "mrs": []}
        }))
        .unwrap();
        let page = render(&Report {
            scenarios: vec![s],
            passed: 0,
            failed: 1,
            duration_s: 1.0,
            profile: None,
        });
        assert!(page.contains("are not between two endpoints of this scenario"));
        assert!(!page.contains("class=\"arrow"));
        assert!(page.contains("class=\"failing-wire\""));
    }
}
