//! `roce merge A B -w OUT`: two captures of one exchange, one taken on each
//! host, made one timeline. The pipeline is the library's
//! (`crate::analyze::merge`).
//!
//! Owns: `roce merge`'s options and its summary on stdout. Imports:
//! `crate::analyze::merge`, `super::exit`.
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::analyze::merge::{self as pipeline, Merge};

/// Frames are matched by what they are (addresses, IP identification, the IP
/// payload: for RoCE, the BTH through the ICRC), never by the two hosts' clocks.
/// Each frame is written once, on the interface of the host that sent it; one
/// seen at its sender only (lost on the way) or at its receiver only (made or
/// changed on the way) says so in its comment. Each direction keeps its
/// sender's order; the two are interleaved on the first capture's clock, the
/// second's set against it by the frames seen at both ends.
#[derive(Debug, Args)]
#[command(after_help = help(&[
    (Exit::Ok, "merged"),
    (Exit::BadInput, "a capture cannot be read, or the hosts cannot be found (say them with --hosts)"),
    (Exit::Setup, "the output cannot be written"),
]))]
pub struct MergeArgs {
    /// The capture taken on host a
    pub a: PathBuf,
    /// The capture taken on host b
    pub b: PathBuf,
    /// Where to write the merged capture (pcapng; whole or not at all)
    #[arg(short = 'w', long = "write", value_name = "OUT")]
    pub out: PathBuf,
    /// The two hosts' addresses, the first capture's host first (found from the
    /// frames when not given)
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub hosts: Option<Vec<IpAddr>>,
}

pub(super) fn run(a: MergeArgs, out: &mut dyn Write, _err: &mut dyn Write) -> CommandResult {
    let hosts = match a.hosts.as_deref() {
        None => None,
        Some(&[ha, hb]) => Some([ha, hb]),
        Some(other) => {
            return Err(Failure::input(anyhow::anyhow!(
                "--hosts takes two addresses, {} given\nhint: --hosts 10.0.0.1,10.0.0.2",
                other.len()
            )))
        }
    };
    let plan = Merge { captures: [a.a, a.b], hosts, out: a.out.clone() };
    let summary = pipeline::run(&plan)?;
    writeln!(out, "{summary}")?;
    writeln!(out, "written: {}", a.out.display())?;
    Ok(Exit::Ok)
}
