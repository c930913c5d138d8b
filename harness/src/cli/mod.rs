//! Command-line front end. `main` parses, then hands a validated configuration to the
//! command's module; every command returns an exit code (see [`exit`]).
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{craft, decode, flows};

pub mod exit;
pub mod lab;

/// Documented exit codes.
pub mod codes {
    /// Everything worked.
    pub const OK: u8 = 0;
    /// Bad input: unreadable or corrupt capture, unknown field, bad option value.
    pub const INPUT: u8 = 1;
    /// Command-line usage error (clap's own code).
    pub const USAGE: u8 = 2;
}

/// RoCE test harness and packet analyzer.
///
/// Decodes RoCEv2 (UDP 4791) and RoCEv1 (ethertype 0x8915) captures the way tshark
/// does, with the same field names, and analyses each QP flow.
#[derive(Debug, Parser)]
#[command(name = "roce", version, about, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Decode a capture file or a live interface, one line per frame (like tshark).
    // `-V` is tshark's verbose here, not the propagated --version.
    #[command(disable_version_flag = true)]
    Decode(decode::DecodeArgs),
    /// Per-QP flow analysis: messages, PSNs, retransmissions, NAKs, latency, ECN.
    Flows(flows::FlowsArgs),
    /// Write the project's synthetic captures (RC/UC/UD conversations, NAKs, CNPs, …).
    Craft(craft::CraftArgs),
    /// Two Soft-RoCE VMs joined by a recording, fault-injecting switch (RDMA without RDMA NICs).
    Lab(lab::LabArgs),
    /// Validate scenario files without running them (every problem, at file:line:col).
    Check(CheckArgs),
    /// The endpoint agent that `roce run` drives (real verbs on this host)
    Agent(crate::agent::AgentArgs),
    /// Run scenarios with real verbs between two endpoints (the lab by default) and judge completions, wire and memory.
    Run(crate::run::RunArgs),
    /// Run a directory of scenarios as a regression suite: reports to keep (suite.json, HTML) and what changed since a baseline.
    Suite(crate::suite::SuiteArgs),
    /// Compare two suite.json files from `roce suite`: what changed (setup, pass/fail, observed behaviour).
    Diff(crate::suite::DiffArgs),
    /// Send a crafted RoCEv2 request to a QP and show what it answers (raw frames: needs root).
    Probe(crate::probe::ProbeArgs),
    /// Render a saved `roce run --json` report as one HTML page (expectations, ladder diagram of each capture).
    Report(crate::report::ReportArgs),
    /// Print the JSON Schema of the scenario format (for editors and validators).
    Schema,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "EXIT STATUS\n  0 every file is a valid scenario; 2 at least one is not (each problem printed).")]
pub struct CheckArgs {
    /// Scenario files, or directories of them (every *.toml below)
    #[arg(required = true, value_name = "SCENARIO|DIR")]
    pub paths: Vec<std::path::PathBuf>,
}

/// `roce schema`: the scenario format as JSON Schema, derived from the model types.
fn schema(out: &mut dyn Write) -> anyhow::Result<u8> {
    let schema = schemars::schema_for!(crate::scenario::model::Scenario);
    writeln!(out, "{}", serde_json::to_string_pretty(&schema)?)?;
    Ok(codes::OK)
}

fn check(a: CheckArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let files = crate::run::discover(&a.paths)?;
    let plural = |k: usize, w: &str| format!("{k} {w}{}", if k == 1 { "" } else { "s" });
    let loaded = crate::run::load_all(&files, err, |f, sc| {
        let e = &sc.expect;
        let n = e.completion.len() + e.wire.len() + e.memory.len() + e.probe.len();
        writeln!(out, "ok  {}  {} ({}, {})", f.display(), sc.name, plural(sc.steps.len(), "step"), plural(n, "expectation"))
    })?;
    if loaded.is_none() {
        return Ok(crate::run::exit::SETUP);
    }
    Ok(codes::OK)
}

pub fn main() -> ExitCode {
    let code = run(std::env::args_os(), &mut std::io::stdout().lock(), &mut std::io::stderr().lock());
    ExitCode::from(code)
}

/// Runs `roce` with `args` (program name first), writing to `out` and `err`; returns
/// the exit code. Tests drive the CLI through this.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { codes::USAGE } else { codes::OK };
            let text = e.render().ansi().to_string();
            let _ = if e.use_stderr() { err.write_all(text.as_bytes()) } else { out.write_all(text.as_bytes()) };
            return code;
        }
    };
    let r = match cli.command {
        Command::Decode(a) => decode::run(a, out, err),
        Command::Flows(a) => flows::run(a, out, err),
        Command::Craft(a) => craft::run(a, out),
        Command::Lab(a) => match lab::run(a, out) {
            Ok(e) => Ok(e.code()),
            Err(f) if f.is_broken_pipe() => Ok(0),
            Err(f) => {
                let _ = writeln!(err, "roce: error: {f}");
                return f.exit.code();
            }
        },
        Command::Check(a) => check(a, out, err),
        Command::Agent(a) => crate::agent::run(a),
        Command::Run(a) => crate::run::run(a, out, err),
        Command::Probe(a) => crate::probe::run(a, out, err),
        Command::Suite(a) => crate::suite::run(a, out, err),
        Command::Diff(a) => crate::suite::run_diff(a, out, err),
        Command::Report(a) => crate::report::run(a, out, err),
        Command::Schema => schema(out),
    };
    match r {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => codes::OK,
        Err(e) => {
            let _ = writeln!(err, "roce: error: {e:#}");
            codes::INPUT
        }
    }
}

/// `roce decode … | head` closes the pipe early: that is not an error.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    /// clap's consistency checks (duplicate short flags and the like). They are
    /// compiled into debug builds only, where a conflict makes every run of the
    /// subcommand panic: `roce decode` once did, over `-V`.
    #[test]
    fn command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
