//! `roce flows`: per-QP flow analysis of a capture.
use std::io::{BufWriter, Write};

use anyhow::Result;
use clap::Args;
use dissector::capture::PacketSource;
use dissector::flow::Analyzer;
use dissector::frame;

use crate::cli::codes as exit;
use crate::source::InputArgs;

#[derive(Debug, Args)]
pub struct FlowsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Print the report as JSON (schema: dissector::flow::Report).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: FlowsArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8> {
    let opts = a.input.decode_options();
    let mut src = a.input.open()?;
    let mut an = Analyzer::new();
    let mut frames = 0u64;
    let limit = a.input.count.unwrap_or(u64::MAX);
    let mut f = frame::decode(dissector::LinkType::ETHERNET, &[], &opts);
    let result = loop {
        if frames >= limit {
            break Ok(());
        }
        match src.next_packet() {
            // By reference: moving the record out copies it with wide loads that
            // stall on the narrower stores that built it.
            Ok(Some(ref r)) => {
                frames += 1;
                an.add_captured(r.number, r.ts_ns, r.orig_len, r.link, r.data, &opts, &mut f);
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    let report = an.report();
    let mut out = BufWriter::new(out);
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write!(out, "{report}")?;
    }
    out.flush()?;
    match result {
        Ok(()) => Ok(exit::OK),
        Err(e) => {
            writeln!(err, "roce: error: {e}")?;
            writeln!(err, "roce: the report above covers the {} frames read before the error", frames)?;
            Ok(exit::INPUT)
        }
    }
}
