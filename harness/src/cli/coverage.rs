//! `roce coverage`: how much of the conformance catalogue the scenarios check, per
//! chapter and section (a rule is covered when a scenario names it in `spec`), and,
//! given `suite.json` files, what each setup did per rule: holds, deviates (a
//! deviation recorded), skipped (with the reason) or fails.
//!
//! Owns: `roce coverage`'s options. Imports: `crate::catalogue`,
//! `crate::scenario` (through `super::check::load`), `crate::results` (the
//! tally, reading `suite.json`), `crate::render::coverage`, `super::exit`.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::catalogue::Catalogue;
use crate::render;
use crate::results::coverage::{tally, Naming};
use crate::results::suite::Suite;

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[
    (Exit::Ok, "the coverage was printed"),
    (Exit::BadInput, "a scenario or suite.json could not be read (an unknown rule id in `spec` is one, with the closest id)"),
]))]
pub struct CoverageArgs {
    /// Scenario files or directories whose `spec` lists count (default: ./scenarios)
    #[arg(long = "scenarios", value_name = "DIR")]
    pub scenarios: Vec<PathBuf>,
    /// suite.json files from `roce suite`, one per setup: what each setup did per rule
    #[arg(value_name = "SUITE.JSON")]
    pub suites: Vec<PathBuf>,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// Also write the coverage as one self-contained HTML page to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub(super) fn run(a: CoverageArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let catalogue = Catalogue::shipped().map_err(Failure::input)?;
    let paths = if a.scenarios.is_empty() {
        let d = PathBuf::from("scenarios");
        if !d.is_dir() {
            return Err(Failure::input(anyhow::anyhow!(
                "roce coverage: no ./scenarios here; say where the scenarios are with --scenarios DIR"
            )));
        }
        vec![d]
    } else {
        a.scenarios.clone()
    };
    let loaded = super::check::load(&paths, "roce coverage", err)?;
    let mut naming: Naming = BTreeMap::new();
    for (file, sc) in &loaded {
        for id in &sc.spec {
            if let Some(r) = catalogue.rule(id).filter(|r| r.observable) {
                naming
                    .entry(r.id.as_str())
                    .or_default()
                    .push((sc.name.clone(), file.display().to_string()));
            }
        }
    }
    let suites = a
        .suites
        .iter()
        .map(|p| Suite::load(p).map(|s| (p.clone(), s)))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(Failure::input)?;
    let c = tally(catalogue, &naming, loaded.len(), &suites);
    if let Some(page) = &a.html {
        let html = render::coverage::html(&c, catalogue);
        super::write_file(page, |w| w.write_all(html.as_bytes())).map_err(Failure::setup)?;
    }
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &c)?;
        writeln!(out)?;
    } else {
        let from = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        render::coverage::text(out, &c, &from)?;
    }
    Ok(Exit::Ok)
}
