//! `roce report RESULTS.json --html OUT.html`: a report saved by `roce run --json`,
//! rendered again as the HTML page of [`crate::html`] (e.g. on a CI artifact).
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::run::Report;

/// Exit codes of `roce report`.
pub mod exit {
    /// The page was written.
    pub const OK: u8 = 0;
    /// The JSON report is missing, unreadable or not a `roce run --json` report.
    pub const INPUT: u8 = 2;
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXIT STATUS\n  0 the page was written; 1 it could not be written; 2 the JSON report is missing, unreadable or not a `roce run --json` report."
)]
pub struct ReportArgs {
    /// A report written by `roce run --json FILE`
    #[arg(value_name = "RESULTS.json")]
    pub json: PathBuf,
    /// Write one self-contained HTML page: the summary, and per scenario its
    /// expectations, endpoints, fault rules and a ladder diagram of its capture
    #[arg(long, value_name = "OUT.html")]
    pub html: PathBuf,
}

/// Reads a saved report; the error says which file and what is wrong with it.
pub fn load(path: &Path) -> Result<Report, String> {
    let hint = format!(
        "hint: `roce run --json {} SCENARIO…` writes one",
        path.display()
    );
    let data =
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}\n{hint}", path.display()))?;
    serde_json::from_slice(&data).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            format!("{} is not JSON ({e})\n{hint}", path.display())
        } else {
            format!("{} is not a roce run report ({e})\n{hint}", path.display())
        }
    })
}

/// `roce report`.
pub fn run(a: ReportArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8> {
    let report = match load(&a.json) {
        Ok(r) => r,
        Err(e) => {
            writeln!(err, "roce report: {e}")?;
            return Ok(exit::INPUT);
        }
    };
    // Captures named relative to where `roce run` ran may be next to the report.
    let base = a.json.parent().filter(|p| !p.as_os_str().is_empty());
    let (page, notes) = crate::html::render_page(&report, base);
    for n in &notes {
        writeln!(err, "roce report: note: {n}")?;
    }
    crate::run::write_atomically(&a.html, page.as_bytes())?;
    writeln!(
        out,
        "wrote {}: {} scenario{} ({} passed, {} failed)",
        a.html.display(),
        report.scenarios.len(),
        if report.scenarios.len() == 1 { "" } else { "s" },
        report.passed,
        report.failed
    )?;
    Ok(exit::OK)
}
