//! `roce craft`: writes the project's synthetic captures ([`dissector::corpus`])
//! into a directory, each file complete or absent.
//!
//! Owns: `roce craft`'s options, and `bench_file` for the benches. Imports: dissector's
//! `corpus`, `super::exit` and `super::write_file`.
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use dissector::corpus;

use super::exit::{help, CommandResult, Exit};
use super::write_file;

#[derive(Debug, Args)]
#[command(after_help = help(&[(Exit::Ok, "every capture was written"), (Exit::Setup, "a file or the directory could not be written")]))]
pub struct CraftArgs {
    /// Directory to write the captures into (created if missing).
    #[arg(long, value_name = "DIR", default_value = "captures")]
    pub out: PathBuf,
    /// Only write the captures whose file name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
}

pub(super) fn run(a: CraftArgs, out: &mut dyn Write) -> CommandResult {
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    for c in corpus::all() {
        if a.only.as_deref().is_some_and(|o| !c.name.contains(o)) {
            continue;
        }
        let p = a.out.join(c.name);
        write_file(&p, |w| c.write(w))?;
        writeln!(out, "{:<40} {:>3} frames  {}", p.display(), c.frames.len(), c.what)?;
    }
    Ok(Exit::Ok)
}

/// The benchmark's large RoCEv2 file ([`corpus::write_bench`]), `packets` frames.
pub fn bench_file(path: &Path, packets: u64) -> anyhow::Result<()> {
    write_file(path, |w| corpus::write_bench(w, packets))
}
