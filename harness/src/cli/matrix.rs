//! `roce matrix SUITE.JSON…`: one grid of case × setup (a setup is one suite.json),
//! grouped by catalogue section, each cell pass / deviates / skipped / fails with
//! its reason, a case whose verdict differs between setups marked; as text, JSON
//! or an HTML page.
//!
//! A case's sections come from the rules `suite.json` records for it; for files
//! from before it recorded them, from the scenario of the same name under
//! `--scenarios` (default `./scenarios`, when there is one).
//!
//! Owns: `roce matrix`'s options. Imports: `crate::catalogue`, `crate::scenario`
//! (through `super::check::load`), `crate::results` (reading suite.json, the
//! grid), `crate::render::matrix`, `super::exit`.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::catalogue::Catalogue;
use crate::render;
use crate::results::matrix::build;
use crate::results::suite::Suite;

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[
    (Exit::Ok, "the grid was printed (whatever the verdicts in it)"),
    (Exit::BadInput, "a file is missing or not a suite.json from `roce suite`, or a scenario could not be read"),
    (Exit::Setup, "the HTML page could not be written"),
]))]
pub struct MatrixArgs {
    /// suite.json files from `roce suite`, one per setup, in the order of the columns
    #[arg(value_name = "SUITE.JSON", required = true)]
    pub suites: Vec<PathBuf>,
    /// Also write the grid as one self-contained HTML page to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// Where the scenarios are, for the rules of cases a suite.json does not
    /// record them for (default: ./scenarios, if there is one)
    #[arg(long = "scenarios", value_name = "DIR")]
    pub scenarios: Vec<PathBuf>,
}

pub(super) fn run(a: MatrixArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let catalogue = Catalogue::shipped().map_err(Failure::input)?;
    let suites = a
        .suites
        .iter()
        .map(|p| Suite::load(p).map(|s| (p.display().to_string(), s)))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(Failure::input)?;
    let unrecorded =
        suites.iter().flat_map(|(_, s)| s.scenarios.values()).any(|e| e.spec.is_empty());
    let dirs = if !a.scenarios.is_empty() {
        a.scenarios.clone()
    } else if unrecorded && PathBuf::from("scenarios").is_dir() {
        vec![PathBuf::from("scenarios")]
    } else {
        Vec::new()
    };
    let mut spec: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if unrecorded && !dirs.is_empty() {
        for (_, sc) in super::check::load(&dirs, "roce matrix", err)? {
            spec.insert(sc.name.clone(), sc.spec.clone());
        }
    }
    let m = build(catalogue, &suites, &|case| spec.get(case).cloned().unwrap_or_default());
    if let Some(page) = &a.html {
        let html = render::matrix::html(&m);
        super::write_file(page, |w| w.write_all(html.as_bytes())).map_err(Failure::setup)?;
    }
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &m)?;
        writeln!(out)?;
    } else {
        render::matrix::text(out, &m)?;
    }
    Ok(Exit::Ok)
}
