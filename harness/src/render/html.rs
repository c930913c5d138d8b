//! `roce run --html FILE` and `roce report`: one self-contained HTML page per run;
//! `roce fuzz`: one of its findings, each drawn as the run that reproduced it.
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
//! Owns: the page (`render_page`, `render_findings`) and its CSS/JS; its ladder is drawn in [`ladder`], a
//! stream's plots in [`plots`], a changed wire's ladders before and after in [`wire_diff`]. Imports: the
//! results (`crate::results`), the judge's [`Timeline`] and time formats, the
//! protocol's stream percentiles, dissector's NAK kinds, maud.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::judge::timeline::{self, Timeline};
use crate::results::{Iba, Report, ScenarioResult, Status, VerdictKind};
use ladder::ladder;
use plots::stream_wire;
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
    let title = format!(
        "roce run: {} passed, {} failed, {} skipped",
        report.passed, report.failed, report.skipped
    );
    page(&title, summary(report), report, base, wires)
}

/// A fuzzing run's findings (`roce fuzz`): `lines` say what the run did, then
/// each finding's last reproducing run is a section as in [`render_page`],
/// named for the finding, with the ladder of its minimised exchange.
pub(crate) fn render_findings(
    title: &str,
    lines: &[String],
    report: &Report,
    base: Option<&Path>,
) -> (String, Vec<String>) {
    let header = html! {
        header id="summary" data-findings=(report.scenarios.len()) {
            h1 { (title) }
            @for l in lines {
                p class="totals" { (l) }
            }
            "\n"
            (toc(report))
        }
        "\n"
    };
    page(title, header, report, base, &|_| None)
}

/// The document: `header`, then a section per scenario of `report`.
fn page(
    title: &str,
    header: Markup,
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
                title { (title) }
                "\n"
                style { (PreEscaped(CSS)) }
            }
            "\n"
            body {
                "\n"
                (header)
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
                span class="pass" { (report.passed) " passed" }
                @let deviating = report.scenarios.iter().filter(|s| s.iba() == Some(Iba::Deviates)).count();
                @if deviating > 0 {
                    " " span class="deviates" { "(" (deviating) " of them as profiled: deviating from IBA)" }
                }
                ", "
                span class="fail" { (report.failed) " failed" } ", "
                span class="skip" { (report.skipped) " skipped" }
                " (" (report.scenarios.len()) " scenarios in "
                (format!("{:.1}", report.duration_s)) " s)"
            }
            "\n"
            (chapters::toc(report))
        }
        "\n"
    }
}

/// A fuzzing run's findings, a line each linking to its section. A run's report
/// groups its cases instead ([`chapters::toc`]).
fn toc(report: &Report) -> Markup {
    html! {
        ul class="toc" {
            "\n"
            @for (i, s) in report.scenarios.iter().enumerate() {
                li { (chapters::entry(i, s, false)) }
                "\n"
            }
        }
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
            data-pass=(s.pass) data-outcome=(chapters::outcome_key(s)) {
            "\n"
            h2 { span class={ "badge " (c) } { (c.to_uppercase()) } " " (s.name) }
            "\n"
            @if s.iba() == Some(Iba::Deviates) {
                p class="note deviates" {
                    "Passed as profiled: the device deviates from IBA here, and the profile the run was held to records it. "
                    @for d in s.deviations() {
                        br; (d.said())
                    }
                }
                "\n"
            }
            p class="file" {
                (s.file) " · " (format!("{:.1}", s.duration_s)) " s · capture: "
                (s.capture.as_deref().unwrap_or("none"))
            }
            "\n"
            (chapters::rules(s))
            @if let Some(e) = &s.error {
                pre class="error" { "run stopped: " (e) }
                "\n"
            }
            @if let Some(why) = &s.skip_reason {
                p class="note skipped" { "Skipped: " (why) }
                "\n"
            }
            (expectations(s))
            @if let (Some(kept), Some(now)) = (&s.wire_kept, &s.wire_snapshot) {
                (wire_diff::before_after(kept, now))
            }
            (streams(s))
            (endpoints(s))
            (counters(s))
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

/// What each endpoint's device counters moved by (the ones that moved), and
/// each the wire also counts, with both numbers.
fn counters(s: &ScenarioResult) -> Markup {
    if s.counters.is_empty() {
        return html! {};
    }
    html! {
        h3 { "Device counters" }
        "\n"
        table class="counters" {
            thead { tr {
                th { "endpoint" } th { "device" } th { "counter" } th { "moved by" }
                th { "the wire" } th { "notes" }
            } }
            tbody {
                "\n"
                @for (ep, c) in &s.counters {
                    @for (name, d) in c.deltas.iter().filter(|(_, d)| **d > 0) {
                        @let wire = c.reconciled.iter().find(|x| &x.counter == name);
                        tr class=[wire.filter(|x| !x.agrees()).map(|_| "disagrees")] {
                            td { (ep) } td { (c.device) " port " (c.port) } td { (name) }
                            td { "+" (d) }
                            td { @if let Some(x) = wire { (x.wire_text()) " " (if x.agrees() { "✓" } else { "≠" }) } }
                            td class="text" { (wire.and_then(|x| x.note.as_deref()).unwrap_or_default()) }
                        }
                        "\n"
                    }
                    @for x in c.reconciled.iter().filter(|x| x.device == 0 && !x.agrees()) {
                        tr class="disagrees" {
                            td { (ep) } td { (c.device) " port " (c.port) } td { (x.counter) }
                            td { "+0" } td { (x.wire_text()) " ≠" }
                            td class="text" { (x.note.as_deref().unwrap_or_default()) }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
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

mod chapters;
mod ladder;
mod plots;
mod wire_diff;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;
