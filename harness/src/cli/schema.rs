//! `roce schema`: the scenario format as JSON Schema, derived from the model types.
//!
//! Owns: `roce schema`. Imports: the scenario file shape (`crate::scenario::file`)
//! through `schemars`, `super::exit`.
use std::io::Write;

use super::exit::{CommandResult, Exit};

pub(super) fn run(out: &mut dyn Write) -> CommandResult {
    let schema = schemars::schema_for!(crate::scenario::file::ScenarioFile);
    writeln!(out, "{}", serde_json::to_string_pretty(&schema)?)?;
    Ok(Exit::Ok)
}
