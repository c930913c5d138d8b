//! `roce repro FINDING.toml`: a finding as a standalone C program a kernel developer
//! builds with `cc repro.c -libverbs` and runs on two hosts without `roce`
//! ([`crate::repro`]).
//!
//! Owns: `roce repro`'s options. Imports: `super::check` (loading a scenario),
//! `crate::repro`, `super::exit` and `super::write_file`.
use std::io::Write;
use std::path::PathBuf;

use anyhow::anyhow;

use super::exit::{help, CommandResult, Exit, Failure};
use super::write_file;
use crate::repro;

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[
    (Exit::Ok, "the C program was written"),
    (Exit::BadInput, "the file is not a valid scenario, holds more than one case and --case picks none or several, or uses what has no C form yet (said which)"),
    (Exit::Setup, "the output could not be written (nothing is left half-written)"),
]))]
pub struct ReproArgs {
    /// A scenario: a finding `roce fuzz` wrote, or any scenario of two endpoints
    #[arg(value_name = "FINDING.toml")]
    pub scenario: PathBuf,
    /// Of a parameterised file, the case (as `roce run --case`: a substring of its
    /// name, or a glob with `*`)
    #[arg(long = "case", value_name = "PATTERN")]
    pub case: Option<String>,
    /// Write the C program here (default: standard output)
    #[arg(short = 'o', long = "output", value_name = "FILE.c")]
    pub output: Option<PathBuf>,
}

/// `roce repro`.
pub(super) fn run(a: ReproArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let loaded = super::check::load(std::slice::from_ref(&a.scenario), "roce repro", err)?;
    let loaded = super::check::select(loaded, a.case.as_slice(), "roce repro")?;
    let [(file, sc)] = &loaded[..] else {
        let names: Vec<&str> = loaded.iter().map(|(_, sc)| sc.name.as_str()).collect();
        return Err(Failure::input(anyhow!(
            "{}: {} cases: a reproducer is of one\n  {}\nhint: pick one with --case PATTERN",
            a.scenario.display(),
            loaded.len(),
            names.join("\n  ")
        )));
    };
    let c = repro::c_program(sc, &file.display().to_string()).map_err(|e| {
        Failure::input(anyhow!(
            "{}: no C reproducer: {e}\n  hint: `roce run {}` reproduces it with the agents",
            file.display(),
            file.display()
        ))
    })?;
    match &a.output {
        Some(p) => {
            write_file(p, |w| w.write_all(c.as_bytes()))?;
            writeln!(
                err,
                "wrote {}: build it with `cc -O2 -o repro {} -libverbs`",
                p.display(),
                p.display()
            )?;
        }
        None => out.write_all(c.as_bytes())?,
    }
    Ok(Exit::Ok)
}
