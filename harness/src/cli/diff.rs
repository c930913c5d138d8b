//! `roce diff OLD NEW`: what changed between two `suite.json` files.
//!
//! Owns: `roce diff`'s options. Imports: the suite shape (`crate::results::suite`), its
//! rendering (`crate::render`), `super::exit`.
use std::io::Write;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::render;
use crate::results::suite::{self, Suite};

#[derive(Debug, Args)]
#[command(after_help = help(&[(Exit::Ok, "the same"), (Exit::Failed, "something changed"), (Exit::BadInput, "a file is missing or not a suite.json")]))]
pub struct DiffArgs {
    /// The earlier suite.json
    pub old: PathBuf,
    /// The later suite.json
    pub new: PathBuf,
}

/// `roce diff OLD NEW`.
pub(super) fn run(a: DiffArgs, out: &mut dyn Write, _err: &mut dyn Write) -> CommandResult {
    let load = |p: &PathBuf| {
        Suite::load(p).map_err(|e| {
            Failure::input(anyhow!(
                "{e:#}\nhint: give two suite.json files written by `roce suite`"
            ))
        })
    };
    let (old, new) = (load(&a.old)?, load(&a.new)?);
    let changes = suite::diff(&old, &new);
    render::suite::diff(out, &a.old, &changes)?;
    Ok(if changes.is_empty() { Exit::Ok } else { Exit::Failed })
}
