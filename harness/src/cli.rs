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
pub enum Command {
    /// Two Soft-RoCE VMs joined by a recording, fault-injecting switch
    Lab(crate::lab::LabArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(args) => crate::lab::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
