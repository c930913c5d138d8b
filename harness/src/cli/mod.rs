//! The binary layer: one module per `roce` command. Each turns what the user typed
//! into a validated plan, calls the library, and says how it ended with an [`Exit`].
//!
//! Owns: command-line options, printing to the terminal, exit codes.
//! Imports: every library room below it. Nothing imports this module but
//! `main.rs` (and the tests, which drive the CLI in-process through [`run()`]).
use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub(crate) mod exit;

#[cfg(feature = "verbs")]
mod agent;
#[cfg(feature = "lab")]
mod bridge;
mod check;
mod completions;
mod coverage;
mod craft;
mod decode;
mod diff;
#[cfg(not(all(feature = "verbs", feature = "live", feature = "lab")))]
mod feature;
mod flows;
#[cfg(feature = "lab")]
mod fuzz;
mod input;
#[cfg(feature = "lab")]
mod lab;
mod man;
mod matrix;
mod merge;
mod new;
#[cfg(feature = "lab")]
mod probe;
mod report;
mod repro;
#[cfg(feature = "lab")]
mod run;
mod schema;
mod snapshots;
#[cfg(feature = "lab")]
mod suite;

/// Each command's arguments, or [`feature::Missing`] when the build lacks
/// `$feature`: a command a build leaves out keeps its name and takes any
/// arguments, to say which feature it needs.
macro_rules! args_of {
    ($feature:literal: $($alias:ident = $args:path),+ $(,)?) => {$(
        #[cfg(feature = $feature)]
        type $alias = $args;
        #[cfg(not(feature = $feature))]
        type $alias = feature::Missing;
    )+};
}
args_of!("verbs": AgentArgs = agent::AgentArgs);
args_of!("lab":
    LabArgs = lab::LabArgs,
    BridgeArgs = bridge::BridgeArgs,
    RunArgs = run::RunArgs,
    SuiteArgs = suite::SuiteArgs,
    FuzzArgs = fuzz::FuzzArgs,
    ProbeArgs = probe::ProbeArgs,
);

/// Runs a command that needs `$feature`, or says this build lacks it.
macro_rules! needs {
    ($feature:literal, $variant:ident, $name:literal, $call:expr) => {{
        #[cfg(feature = $feature)]
        let r = $call;
        #[cfg(not(feature = $feature))]
        let r = feature::run($name, feature::Feature::$variant);
        r
    }};
}

pub use craft::bench_file;
pub(crate) use exit::Exit;

/// RoCE test harness and packet analyzer.
///
/// Decodes RoCEv2 (UDP 4791) and RoCEv1 (ethertype 0x8915) captures the way tshark
/// does, with the same field names, and analyses each QP flow; runs RDMA scenarios
/// with real verbs between two endpoints and judges completions, wire and memory.
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
    /// Merge two captures of one exchange, one taken on each host, into one timeline (frames matched by identity, not by clocks).
    Merge(merge::MergeArgs),
    /// Write the project's synthetic captures (RC/UC/UD conversations, NAKs, CNPs, …).
    Craft(craft::CraftArgs),
    /// Two Soft-RoCE VMs joined by a recording, fault-injecting switch (RDMA without RDMA NICs).
    Lab(LabArgs),
    /// The lab's switch between two network interfaces: a recording, fault-injecting bump in the wire between two hosts under test.
    Bridge(BridgeArgs),
    /// Validate scenario files without running them (every problem, at file:line:col).
    Check(check::CheckArgs),
    /// Write a new scenario file in the current format, from a commented template or an existing scenario.
    New(new::NewArgs),
    /// How much of the conformance catalogue the scenarios check, per chapter and section; per setup with suite.json files.
    Coverage(coverage::CoverageArgs),
    /// One grid of case × setup from suite.json files, grouped by catalogue section; verdicts that change between setups marked.
    Matrix(matrix::MatrixArgs),
    /// The endpoint agent that `roce run` drives (real verbs on this host)
    Agent(AgentArgs),
    /// Run scenarios with real verbs between two endpoints (the lab by default) and judge completions, wire and memory.
    Run(RunArgs),
    /// Run a directory of scenarios as a regression suite: reports to keep (suite.json, HTML) and what changed since a baseline.
    Suite(SuiteArgs),
    /// Fuzz the lab's live QPs with crafted requests: memory, kernel, liveness and protocol oracles; each finding minimised to a scenario `roce run` reproduces.
    Fuzz(FuzzArgs),
    /// Compare two suite.json files from `roce suite`: what changed (setup, pass/fail, observed behaviour).
    Diff(diff::DiffArgs),
    /// The changed wires a run left beside its snapshots: list them, review them one by one, accept or reject them.
    Snapshots(snapshots::SnapshotsArgs),
    /// Send a crafted RoCEv2 request to a QP and show what it answers (raw frames: needs root).
    Probe(ProbeArgs),
    /// Write a finding (or any two-endpoint scenario) as a standalone C program: libibverbs and a raw socket, no `roce` needed.
    Repro(repro::ReproArgs),
    /// Render a saved `roce run --json` report as one HTML page (expectations, ladder diagram of each capture).
    Report(report::ReportArgs),
    /// Print the JSON Schema of the scenario format (for editors and validators).
    Schema,
    /// Print the shell completion script for bash, zsh, fish, elvish or PowerShell.
    Completions(completions::CompletionsArgs),
    /// Write the manual pages (roce.1, roce-decode.1, …) into a directory.
    Man(man::ManArgs),
}

/// Writes a file through `PATH.tmp`, renamed when complete: an output is whole or
/// absent, never half-written.
fn write_file(
    path: &std::path::Path,
    data: impl FnOnce(&mut std::io::BufWriter<dissector::capture::AtomicFile>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    Ok(dissector::capture::write_whole(path, data)?)
}

pub fn main() -> ExitCode {
    // Stderr is not held locked for the whole command: other threads (the
    // workers of `roce run -j`, booting a lab back) say things there too.
    let code = run(std::env::args_os(), &mut std::io::stdout().lock(), &mut std::io::stderr());
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
            // --help and --version are not errors.
            let (code, w): (Exit, &mut dyn Write) =
                if e.use_stderr() { (Exit::BadInput, err) } else { (Exit::Ok, out) };
            let _ = w.write_all(e.render().ansi().to_string().as_bytes());
            return code.code();
        }
    };
    let r = match cli.command {
        Command::Decode(a) => decode::run(a, out, err),
        Command::Flows(a) => flows::run(a, out, err),
        Command::Merge(a) => merge::run(a, out, err),
        Command::Craft(a) => craft::run(a, out),
        Command::Lab(_a) => needs!("lab", Lab, "lab", lab::run(_a, out)),
        Command::Bridge(_a) => needs!("lab", Lab, "bridge", bridge::run(_a, out, err)),
        Command::Check(a) => check::run(a, out, err),
        Command::New(a) => new::run(a, out, err),
        Command::Coverage(a) => coverage::run(a, out, err),
        Command::Matrix(a) => matrix::run(a, out, err),
        Command::Agent(_a) => needs!("verbs", Verbs, "agent", agent::run(_a)),
        Command::Run(_a) => needs!("lab", Lab, "run", run::run(_a, out, err)),
        Command::Probe(_a) => needs!("lab", Lab, "probe", probe::run(_a, out, err)),
        Command::Suite(_a) => needs!("lab", Lab, "suite", suite::run(_a, out, err)),
        Command::Diff(a) => diff::run(a, out, err),
        Command::Snapshots(a) => snapshots::run(a, out, err),
        Command::Fuzz(_a) => needs!("lab", Lab, "fuzz", fuzz::run(_a, out, err)),
        Command::Report(a) => report::run(a, out, err),
        Command::Repro(a) => repro::run(a, out, err),
        Command::Schema => schema::run(out),
        Command::Completions(a) => completions::run(a, Cli::command(), out),
        Command::Man(a) => man::run(a, Cli::command(), out),
    };
    match r {
        Ok(e) => e.code(),
        Err(f) if f.is_broken_pipe() => Exit::Ok.code(),
        // A report of bad input text starts `error: …` itself.
        Err(f) if f.is_report() => {
            let _ = writeln!(err, "roce: {f}");
            f.exit.code()
        }
        Err(f) => {
            let _ = writeln!(err, "roce: error: {f}");
            f.exit.code()
        }
    }
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
