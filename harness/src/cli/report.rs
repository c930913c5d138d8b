//! `roce report RESULTS.json --html OUT.html`: a report saved by `roce run --json`,
//! rendered again as the HTML page (e.g. on a CI artifact).
//!
//! Owns: `roce report`'s options. Imports: the saved [`Report`] (`crate::results`), its
//! HTML rendering (`crate::render`), `super::exit` and `super::write_file`.
use std::io::Write;
use std::path::PathBuf;

use anyhow::anyhow;

use super::exit::{help, CommandResult, Exit, Failure};
use super::write_file;
use crate::render;
use crate::results::Report;

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[
    (Exit::Ok, "the page was written"),
    (Exit::BadInput, "the JSON report is missing, unreadable or not a `roce run --json` report"),
    (Exit::Setup, "the page could not be written"),
]))]
pub struct ReportArgs {
    /// A report written by `roce run --json FILE`
    #[arg(value_name = "RESULTS.json")]
    pub json: PathBuf,
    /// Write one self-contained HTML page: the summary, and per scenario its
    /// expectations, endpoints, fault rules and a ladder diagram of its capture
    #[arg(long, value_name = "OUT.html")]
    pub html: PathBuf,
}

/// `roce report`.
pub(super) fn run(a: ReportArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let report = Report::load(&a.json).map_err(|e| Failure::input(anyhow!("{e}")))?;
    // Captures named relative to where `roce run` ran may be next to the report.
    let base = a.json.parent().filter(|p| !p.as_os_str().is_empty());
    let (page, notes) = render::html::render_page(&report, base, &|_| None);
    for n in &notes {
        writeln!(err, "roce report: note: {n}")?;
    }
    write_file(&a.html, |w| w.write_all(page.as_bytes()))?;
    writeln!(
        out,
        "wrote {}: {} scenario{} ({} passed, {} failed)",
        a.html.display(),
        report.scenarios.len(),
        if report.scenarios.len() == 1 { "" } else { "s" },
        report.passed,
        report.failed
    )?;
    Ok(Exit::Ok)
}
