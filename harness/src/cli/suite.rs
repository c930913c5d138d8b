//! `roce suite DIR…`: `roce run` for regression suites. It writes into `--out` the
//! captures, `report.json`, `report.html` and `suite.json` (what passed and what
//! the setup did, made to be kept and diffed), and says what changed since a
//! baseline.
//!
//! Owns: `roce suite`'s options and its output directory's files. Imports: `super::run`
//! (it is a run), the suite shape (`crate::results::suite`), `crate::render`,
//! `super::check`, `super::exit`.
use std::io::Write;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;

use super::exit::{help, CommandResult, Failure};
use super::run::{self, RunArgs};
use super::write_file;
use crate::render;
use crate::results::suite::{self, Suite};

#[derive(Debug, Args)]
#[command(after_help = format!(
    "OUTPUT (in --out)\n  suite.json   what passed and what the setup did: keep it, diff the next run against it\n  report.json  the full results (roce run --json)\n  report.html  the HTML report with a ladder diagram per scenario\n  *.pcapng     each scenario's wire\n\n{}",
    help(run::EXIT)
))]
pub struct SuiteArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// A previous run's suite.json: say what changed since
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
}

/// `roce suite`.
pub(super) fn run(mut a: SuiteArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    // The baseline is read first: a wrong path is said before an hour of running.
    let baseline = a.baseline.as_deref().map(Suite::load).transpose().map_err(Failure::input)?;
    let loaded = super::check::load(&a.run.paths, "roce suite", err)?;
    let mut loaded = super::check::select(loaded, &a.run.cases, "roce suite")?;
    if a.run.list {
        super::check::list(&loaded, out)?;
        return Ok(super::exit::Exit::Ok);
    }
    // On real hosts without a bridge there is no switch to apply faults: those
    // scenarios are left out of the suite (said, not silently), the rest runs.
    if a.run.endpoints.is_some() && a.run.bridge.is_none() {
        let lab_only = run::with_faults(&loaded);
        if !lab_only.is_empty() {
            writeln!(
                out,
                "note: left out {} scenarios with [[fault]] rules, which need a switch in the wire (the lab's, or a bridge's: --bridge HOST:PORT): {}",
                lab_only.len(),
                lab_only.join(", ")
            )?;
        }
        loaded.retain(|(_, sc)| sc.faults.is_empty());
        if loaded.is_empty() {
            return Err(Failure::input(anyhow!("roce suite: every scenario given needs a switch in the wire; nothing to run on real hosts without one\nhint: stand `roce bridge --listen` between the hosts and add --bridge HOST:PORT")));
        }
    }
    let dir = a.run.out.clone().unwrap_or_else(|| run::timestamped("roce-suite"));
    a.run.json.get_or_insert(dir.join("report.json"));
    let html = a.run.html.get_or_insert(dir.join("report.html")).clone();
    let plan = run::plan(&a.run, &loaded, dir.clone())?;
    let report = run::execute(&a.run, &plan, &loaded, out)?;
    let suite = Suite::from_report(&report);
    let path = dir.join("suite.json");
    write_file(&path, |w| serde_json::to_writer_pretty(w, &suite).map_err(std::io::Error::other))?;
    writeln!(
        out,
        "suite report: {} (diff it against the next run's), {}",
        path.display(),
        html.display()
    )?;
    if let (Some(b), Some(p)) = (&baseline, &a.baseline) {
        render::suite::diff(out, p, &suite::diff(b, &suite))?;
    }
    Ok(run::exit_of(&report, a.run.fail_on_skip))
}
