//! The terminal report of `roce run` and `roce suite`: per scenario a line with
//! ✓, ✗ or − (skipped), its expectations (expected against actual for the failed
//! ones), and for a failing scenario the decoded wire and what the agents said.
//!
//! Owns: the terminal lines of a scenario, its streams, its timings, the run's summary.
//! Imports: the results (`crate::results`), the judge's [`Timeline`] and time format.
use std::io::{self, Write};

use crate::judge::{us_or_ms, Timeline};
use crate::results::{CounterReport, Iba, ScenarioResult, Status, StreamRun};

/// Writes one scenario's result; `quiet` keeps a passing scenario to its line.
/// `wire` is its decoded capture, when there is one.
pub(crate) fn scenario(
    out: &mut dyn Write,
    r: &ScenarioResult,
    quiet: bool,
    wire: Option<&Timeline>,
) -> io::Result<()> {
    let iba = match r.iba() {
        Some(Iba::Deviates) => format!("  {}", Iba::Deviates.said()),
        _ => String::new(),
    };
    writeln!(out, "{} {}  ({}, {:.1} s){iba}", r.status.mark(), r.name, r.file, r.duration_s)?;
    if let Some(why) = &r.skip_reason {
        writeln!(out, "    skipped: {}", why.replace('\n', "\n    "))?;
    }
    if quiet && r.status != Status::Failed {
        return Ok(());
    }
    if let Some(e) = &r.error {
        writeln!(out, "    run stopped: {}", e.replace('\n', "\n    "))?;
    }
    for v in &r.verdicts {
        let m = if v.deviation {
            "≠"
        } else if v.pass {
            "✓"
        } else {
            "✗"
        };
        if v.deviation {
            writeln!(
                out,
                "    {m} {} (a deviation, recorded)\n        IBA:         {}\n        this device: {}",
                v.what, v.expected, v.actual
            )?;
        } else if v.pass {
            writeln!(out, "    {m} {}: {}", v.what, v.actual)?;
        } else {
            writeln!(
                out,
                "    {m} {}\n        expected: {}\n        actual:   {}",
                v.what, v.expected, v.actual
            )?;
        }
        if let Some(d) = &v.detail {
            writeln!(out, "        note: {d}")?;
        }
    }
    for st in &r.streams {
        writeln!(out, "    {}", stream_line(st))?;
    }
    for (ep, c) in &r.counters {
        for line in counter_lines(ep, c) {
            writeln!(out, "    {line}")?;
        }
    }
    if r.status == Status::Failed {
        if let (Some(c), Some(w)) = (&r.capture, wire.filter(|w| !w.lines.is_empty())) {
            match &r.wire_from {
                Some(from) => writeln!(out, "    the wire ({c}, from {from}):")?,
                None => writeln!(out, "    the wire ({c}):")?,
            }
            for l in &w.lines {
                writeln!(out, "      {l}")?;
            }
        }
        for (ep, log) in &r.agent_logs {
            writeln!(out, "    agent {ep} said: {}", log.trim().replace('\n', "\n      "))?;
        }
    }
    Ok(())
}

/// `stream w on a (write over 2 QPs): 10000 of 10000 in 812.3 ms, 12.3 k msg/s,
/// 0.25 Gb/s; completion latency p50 1.20 ms, p99 3.40 ms, max 5.10 ms`.
pub(crate) fn stream_line(st: &StreamRun) -> String {
    let r = &st.report;
    let (msgs, gbps) = r.rates();
    let qps = if r.qps == 1 { "1 QP".to_string() } else { format!("{} QPs", r.qps) };
    let mut s = format!(
        "stream {} on {} ({} over {qps}): {} of {} in {:.1} ms, {} msg/s, {gbps:.3} Gb/s",
        r.id,
        st.on,
        r.verb.name(),
        r.completed,
        r.count,
        r.elapsed_us as f64 / 1000.0,
        si(msgs)
    );
    if let Some(l) = &r.latency_us {
        s.push_str(&format!(
            "; completion latency p50 {}, p99 {}, max {} ({} signalled)",
            us_or_ms(l.p50),
            us_or_ms(l.p99),
            us_or_ms(l.max),
            l.samples
        ));
    }
    if r.post_ns > 0 && r.posted > 0 {
        s.push_str(&format!(
            "; posting {:.1} µs a message",
            r.post_ns as f64 / 1000.0 / r.posted as f64
        ));
    }
    if r.timed_out {
        s.push_str(&format!("; out of time after {} posted", r.posted));
    }
    s
}

/// `counters a (rxe0 port 1): rcvd_pkts +12, sent_pkts +14`: the counters that
/// moved; then `≠ counter sent_pkts on a (RoCE packets sent): the device +13, the
/// wire 14` for each that disagrees with the wire.
pub(crate) fn counter_lines(ep: &str, c: &CounterReport) -> Vec<String> {
    let moved: Vec<String> =
        c.deltas.iter().filter(|(_, d)| **d > 0).map(|(n, d)| format!("{n} +{d}")).collect();
    let moved = if moved.is_empty() { "none moved".to_string() } else { moved.join(", ") };
    let mut lines = vec![format!("counters {ep} ({} port {}): {moved}", c.device, c.port)];
    if !c.reset.is_empty() {
        lines.push(format!("  went backwards (reset): {}", c.reset.join(", ")));
    }
    for x in c.reconciled.iter().filter(|x| !x.agrees()) {
        let note = x.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
        lines.push(format!(
            "≠ counter {} on {ep} ({}): the device +{}, the wire {}{note}",
            x.counter,
            x.meaning,
            x.device,
            x.wire_text()
        ));
    }
    lines
}

/// `812`, `12.3 k`, `1.20 M`.
fn si(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// `    timings: agent start 812 ms · device open 41 ms · …` (`--timings`).
pub(crate) fn timings(out: &mut dyn Write, r: &ScenarioResult) -> io::Result<()> {
    if r.timings.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> =
        r.timings.iter().map(|(p, ms)| format!("{} {ms:.0} ms", p.label())).collect();
    writeln!(out, "    timings: {}", parts.join(" · "))
}

/// Where the run's time went, per phase: the mean per scenario, its share, the
/// total (`--timings`).
pub(crate) fn timing_table(out: &mut dyn Write, r: &crate::results::Report) -> io::Result<()> {
    let rows = crate::results::phase_means(
        r.scenarios.iter().map(|s| &s.timings).filter(|t| !t.is_empty()),
    );
    if rows.is_empty() {
        return Ok(());
    }
    let all: f64 = rows.iter().map(|r| r.1).sum();
    writeln!(
        out,
        "where the time went (mean per scenario, over {} scenarios):",
        r.scenarios.iter().filter(|s| !s.timings.is_empty()).count()
    )?;
    for (p, mean, total) in &rows {
        writeln!(
            out,
            "  {:<22} {:>8.1} ms  {:>5.1} %  ({:.1} s in all)",
            p.label(),
            mean,
            mean / all.max(f64::EPSILON) * 100.0,
            total / 1000.0
        )?;
    }
    writeln!(out, "  {:<22} {:>8.1} ms", "total", all)
}

/// The run's closing line.
pub(crate) fn summary(
    out: &mut dyn Write,
    r: &crate::results::Report,
    captures: &std::path::Path,
) -> io::Result<()> {
    let skipped = if r.skipped > 0 { format!(", {} skipped", r.skipped) } else { String::new() };
    let deviating = r.scenarios.iter().filter(|s| s.iba() == Some(Iba::Deviates)).count();
    if deviating > 0 {
        writeln!(
            out,
            "{deviating} of the {} passes hold only as profiled: the device deviates from IBA there (each marked above)",
            r.passed
        )?;
    }
    writeln!(
        out,
        "{} passed, {} failed{skipped} ({} scenarios in {:.1} s); captures in {}",
        r.passed,
        r.failed,
        r.scenarios.len(),
        r.duration_s,
        captures.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(status: &str, pass: bool) -> ScenarioResult {
        serde_json::from_value(serde_json::json!({
            "name": "n", "file": "f.toml", "pass": pass, "status": status, "error": null,
            "skip_reason": if status == "skipped" { Some("endpoint b: the device lacks ibv_wr_flush") } else { None },
            "verdicts": [{"kind": "wire", "what": "w", "pass": pass, "expected": "e", "actual": "a"}],
            "capture": null, "duration_s": 0.5, "endpoints": {}, "connections": []
        }))
        .unwrap()
    }

    fn text(r: &ScenarioResult, quiet: bool) -> String {
        let mut out = Vec::new();
        scenario(&mut out, r, quiet, None).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn counters_say_what_moved_and_where_the_wire_disagrees() {
        let mut r = result("passed", true);
        r.counters.insert(
            "a".into(),
            serde_json::from_value(serde_json::json!({
                "device": "rxe0", "port": 1, "driver": "rxe",
                "deltas": {"sent_pkts": 14, "rcvd_pkts": 12, "send_rnr_err": 0},
                "reconciled": [
                    {"counter": "sent_pkts", "meaning": "RoCE packets sent", "device": 14, "wire": 14},
                    {"counter": "rcvd_pkts", "meaning": "RoCE packets received", "device": 12, "wire": 13,
                     "note": "1 of them were crafted probes"}
                ]
            }))
            .unwrap(),
        );
        let t = text(&r, false);
        assert!(t.contains("    counters a (rxe0 port 1): rcvd_pkts +12, sent_pkts +14\n"), "{t}");
        assert!(t.contains("    ≠ counter rcvd_pkts on a (RoCE packets received): the device +12, the wire 13 (1 of them were crafted probes)\n"), "{t}");
        assert!(!t.contains("counter sent_pkts on a"), "what agrees is not repeated: {t}");
        assert!(!text(&r, true).contains("counters"), "quiet: a passing scenario's line only");
    }

    #[test]
    fn timings_line_and_table_in_phase_order() {
        let mut r: ScenarioResult = serde_json::from_value(serde_json::json!({
            "name": "n", "file": "f.toml", "pass": true, "status": "passed", "error": null, "verdicts": [], "capture": null,
            "duration_s": 0.5, "endpoints": {}, "connections": [],
            "timings_ms": {"steps": 20.0, "agent_start": 300.0, "device_open": 40.0}
        }))
        .unwrap();
        let mut o = Vec::new();
        timings(&mut o, &r).unwrap();
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "    timings: agent start 300 ms · device open 40 ms · steps 20 ms\n"
        );
        let mut r2 = r.clone();
        r2.timings.insert(crate::results::Phase::AgentStart, 100.0);
        r.timings.remove(&crate::results::Phase::Steps);
        let report = crate::results::Report::new(vec![r, r2], 1.0, None);
        let mut o = Vec::new();
        timing_table(&mut o, &report).unwrap();
        let t = String::from_utf8(o).unwrap();
        assert!(t.starts_with("where the time went (mean per scenario, over 2 scenarios):\n  agent start               200.0 ms"), "{t}");
        assert!(
            t.contains("steps                      10.0 ms")
                && t.contains("total                     250.0 ms"),
            "{t}"
        );
    }

    /// A pass that holds only as profiled is marked as such, with what IBA says
    /// and what the device did, and counted at the end.
    #[test]
    fn a_pass_as_profiled_says_it_deviates_from_iba() {
        let mut r = result("passed", true);
        r.verdicts[0].deviation = true;
        let t = text(&r, false);
        assert!(t.starts_with("✓ n  (f.toml, 0.5 s)  as profiled: deviates from IBA\n"), "{t}");
        assert!(
            t.contains(
                "    ≠ w (a deviation, recorded)\n        IBA:         e\n        this device: a\n"
            ),
            "{t}"
        );
        assert!(
            !text(&result("passed", true), false).contains("IBA"),
            "a pass that follows IBA says nothing of it"
        );
        let report = crate::results::Report::new(vec![r, result("passed", true)], 1.0, None);
        let mut out = Vec::new();
        summary(&mut out, &report, std::path::Path::new("c")).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("1 of the 2 passes hold only as profiled: the device deviates from IBA there (each marked above)\n2 passed, 0 failed"), "{out}");
    }

    #[test]
    fn each_status_has_its_mark() {
        assert_eq!(text(&result("passed", true), true), "✓ n  (f.toml, 0.5 s)\n");
        assert_eq!(
            text(&result("skipped", false), true),
            "− n  (f.toml, 0.5 s)\n    skipped: endpoint b: the device lacks ibv_wr_flush\n"
        );
        let f = text(&result("failed", false), true);
        assert!(
            f.starts_with("✗ n") && f.contains("expected: e\n        actual:   a"),
            "quiet still shows a failure: {f}"
        );
    }
}
