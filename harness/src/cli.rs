//! Command-line front end: `roce decode`, `roce flows`, `roce craft`, `roce lab …`.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// RoCE test harness and packet analyzer.
#[derive(Debug, Parser)]
#[command(name = "roce", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

pub fn main() -> ExitCode {
    let _cli = Cli::parse();
    ExitCode::SUCCESS
}
