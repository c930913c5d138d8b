//! `roce flows`: per-QP flow analysis of a capture (with `-Y`, of the frames a
//! display filter keeps). The analysis is the library's (`crate::analyze::flows`).
//!
//! Owns: `roce flows`'s options, printing the report (text or JSON), and the
//! closing errors on stderr. Imports: `crate::analyze` (the flows plan and pipeline,
//! datasets); `super::input`, `super::exit`.
use std::io::{BufWriter, Write};

use clap::Args;

use super::exit::{help, CommandResult, Exit, Failure};
use super::input::InputArgs;
use crate::analyze::dataset::Capture;
use crate::analyze::flows::{self as pipeline, Analysed, Flows};

#[derive(Debug, Args)]
#[command(after_help = help(&[
    (Exit::Ok, "every frame was read"),
    (Exit::BadInput, "a bad option or display filter, or a damaged capture (the report covers the frames before the damage; of several captures, no --parquet dataset is written), or --parquet DIR of several captures exists and is not empty (without --force)"),
    (Exit::Setup, "the interface could not be opened, or --parquet could not be written"),
    (Exit::Interrupted, "a second Ctrl-C during live capture"),
]))]
pub struct FlowsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Print the report as JSON (schema: dissector::flow::Report).
    #[arg(long)]
    pub json: bool,
    /// Also write the flow table and its events as Apache Parquet:
    /// DIR/flows.parquet and DIR/events.parquet; of several captures or a directory,
    /// a Hive-partitioned dataset: DIR/flows/capture=NAME/part-0.parquet and
    /// DIR/events/capture=NAME/part-0.parquet.
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<std::path::PathBuf>,
    /// With several captures or a directory and --parquet DIR: replace DIR when it
    /// exists and is not empty (it is refused otherwise).
    #[arg(long, requires = "parquet")]
    pub force: bool,
}

pub(super) fn run(a: FlowsArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let plan = Flows { input: a.input.plan()?, parquet: a.parquet.clone(), force: a.force };
    if let Some(captures) = plan.input.dataset()? {
        return flows_dataset(&a, &plan, &captures, out, err);
    }
    let Analysed { report, frames, end } = pipeline::run(&plan)?;
    let mut out = BufWriter::new(out);
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write!(out, "{report}")?;
    }
    out.flush()?;
    match end {
        None => Ok(Exit::Ok),
        Some(e) => {
            writeln!(err, "roce: error: {e}")?;
            writeln!(
                err,
                "roce: the report above covers the {} frames read before the error",
                frames
            )?;
            Ok(Exit::BadInput)
        }
    }
}

/// `roce flows` of several captures or a directory: each capture analysed on its
/// own (`-j` at a time, one thread each), its report printed under its name, and
/// with `--parquet DIR` a Hive-partitioned dataset of the flow tables and events,
/// written whole or not at all (see [`crate::analyze::dataset`]).
fn flows_dataset(
    a: &FlowsArgs,
    plan: &Flows,
    captures: &[Capture],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> CommandResult {
    if a.json {
        return Err(Failure::input(anyhow::anyhow!(
            "--json prints the report of one capture; for several, run once per capture or write --parquet DIR"
        )));
    }
    let (results, ds) = pipeline::dataset(plan, captures)?;
    let mut out = BufWriter::new(out);
    let mut failed = None;
    for (c, r) in captures.iter().zip(results) {
        match r {
            Some(Ok(report)) => {
                writeln!(out, "== {} ({})", c.name, c.path.display())?;
                write!(out, "{report}")?;
            }
            Some(Err(e)) => {
                let f = Failure::from(e);
                writeln!(err, "roce: error: {f}")?;
                failed.get_or_insert(f.exit);
            }
            None => writeln!(err, "roce: {}: not read after the error", c.path.display())?,
        }
    }
    out.flush()?;
    match (failed, ds) {
        (Some(exit), ds) => {
            if let Some(dir) = &a.parquet {
                writeln!(
                    err,
                    "roce: nothing was written to {} (the dataset is written whole or not at all)",
                    dir.display()
                )?;
            }
            drop(ds);
            Ok(exit)
        }
        (None, Some(ds)) => ds.commit().map(|()| Exit::Ok).map_err(Failure::from),
        (None, None) => Ok(Exit::Ok),
    }
}
