//! The terminal report of `roce run` and `roce suite`: per scenario a line with
//! ✓ or ✗, its expectations (expected against actual for the failed ones), and for
//! a failing scenario the decoded wire and what the agents said.
use std::io::{self, Write};
use std::path::Path;

use crate::results::ScenarioResult;

/// Writes one scenario's result; `quiet` keeps a passing scenario to its line.
pub fn scenario(out: &mut dyn Write, r: &ScenarioResult, quiet: bool) -> io::Result<()> {
    let mark = if r.pass { "✓" } else { "✗" };
    writeln!(out, "{mark} {}  ({}, {:.1} s)", r.name, r.file, r.duration_s)?;
    if quiet && r.pass {
        return Ok(());
    }
    if let Some(e) = &r.error {
        writeln!(out, "    run stopped: {}", e.replace('\n', "\n    "))?;
    }
    for v in &r.verdicts {
        let m = if v.pass { "✓" } else { "✗" };
        if v.pass {
            writeln!(out, "    {m} {}: {}", v.what, v.actual)?;
        } else {
            writeln!(out, "    {m} {}\n        expected: {}\n        actual:   {}", v.what, v.expected, v.actual)?;
        }
        if let Some(d) = &v.detail {
            writeln!(out, "        note: {d}")?;
        }
    }
    if !r.pass {
        if let Some(c) = &r.capture {
            let lines = wire_lines(Path::new(c), 40);
            if !lines.is_empty() {
                writeln!(out, "    the wire ({c}):")?;
                for l in lines {
                    writeln!(out, "      {l}")?;
                }
            }
        }
        for (ep, log) in &r.agent_logs {
            writeln!(out, "    agent {ep} said: {}", log.trim().replace('\n', "\n      "))?;
        }
    }
    Ok(())
}

/// The decoded lines of a capture (for a failing scenario's report).
fn wire_lines(path: &Path, max: usize) -> Vec<String> {
    let Ok(mut r) = dissector::capture::open(path) else { return vec![] };
    let opts = dissector::frame::Options::default();
    let mut out = Vec::new();
    let mut first = None;
    while let Ok(Some(rec)) = r.next_packet() {
        if out.len() >= max {
            out.push("…".into());
            break;
        }
        let f = dissector::frame::decode(rec.link, rec.data, &opts);
        let first_ts = *first.get_or_insert(rec.ts_ns);
        let ctx = dissector::fields::Ctx::of(&rec, &f, first_ts, first_ts);
        let mut line = String::new();
        dissector::print::line(&ctx, &mut line);
        out.push(line);
    }
    out
}
