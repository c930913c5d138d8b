//! `roce flows`: per-QP flow analysis of a capture (with `-Y`, of the frames a
//! display filter keeps).
//!
//! Owns: `roce flows`'s options and the analysis loop, on one thread or several.
//! Imports: dissector's capture, frame, ctx, filter and flow; the Parquet writer
//! (`crate::columns`); `super::input`, `super::par`, `super::exit`.
use std::io::{BufWriter, Write};

use std::fs::File;
use std::io::BufReader;

use clap::Args;
use dissector::capture::{CaptureError, Chunk, PacketSource, Reader, Record};
use dissector::ctx::Ctx;
use dissector::filter::Filter;
use dissector::flow::{Analyzer, Seen};
use dissector::frame::{self, Frame};

use anyhow::Context;

use super::dataset::{self, Capture, Dataset};
use super::exit::{help, CommandResult, Exit, Failure};
use super::input::{InputArgs, Source};
use super::parallel::{self, Plan};

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
    let opts = a.input.decode_options();
    let filter = a.input.display_filter()?;
    if let Some(captures) = a.input.dataset()? {
        return flows_dataset(&a, &captures, &opts, filter.as_ref(), out, err);
    }
    let mut src = a.input.open()?;
    let mut an = Analyzer::new();
    let jobs = a.input.jobs();
    let (frames, result) = match &mut src {
        Source::File(r) if jobs > 1 => {
            analyse_par(r, a.input.plan(), jobs, &opts, filter.as_ref(), &mut an)?
        }
        _ => analyse(&mut src, a.input.count.unwrap_or(u64::MAX), &opts, filter.as_ref(), &mut an),
    };
    let report = an.report();
    if let Some(dir) = &a.parquet {
        crate::parquet_writer::write_flows(dir, &report)
            .context("writing --parquet")
            .map_err(Failure::setup)?;
    }
    let mut out = BufWriter::new(out);
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write!(out, "{report}")?;
    }
    out.flush()?;
    match result {
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
/// written whole or not at all (see [`super::dataset`]).
fn flows_dataset(
    a: &FlowsArgs,
    captures: &[Capture],
    opts: &frame::Options,
    filter: Option<&Filter>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> CommandResult {
    if a.json {
        return Err(Failure::input(anyhow::anyhow!(
            "--json prints the report of one capture; for several, run once per capture or write --parquet DIR"
        )));
    }
    let ds = a.parquet.as_deref().map(|dir| Dataset::create(dir, a.force)).transpose()?;
    let limit = a.input.count.unwrap_or(u64::MAX);
    // A compiled filter keeps scratch state (not `Sync`): each capture takes a copy.
    let filter = std::sync::Mutex::new(filter.cloned());
    let results = dataset::each(captures, a.input.jobs(), |c| {
        let mut src = Source::File(dissector::capture::open(&c.path).map_err(Failure::input)?);
        let filter =
            filter.lock().map_err(|_| anyhow::anyhow!("an analysing thread failed"))?.clone();
        let mut an = Analyzer::new();
        if let (_, Some(e)) = analyse(&mut src, limit, opts, filter.as_ref(), &mut an) {
            return Err(Failure::input(dataset::capture_error(c, &e)));
        }
        let report = an.report();
        if let Some(ds) = &ds {
            let (flows, events) =
                (ds.table_part("flows", &c.name)?, ds.table_part("events", &c.name)?);
            crate::parquet_writer::write_flow_tables(&flows, &events, &report)
                .with_context(|| {
                    format!("writing the --parquet partitions of {}", c.path.display())
                })
                .map_err(Failure::setup)?;
        }
        Ok(report)
    });
    let mut out = BufWriter::new(out);
    let mut failed = None;
    for (c, r) in captures.iter().zip(results) {
        match r {
            Some(Ok(report)) => {
                writeln!(out, "== {} ({})", c.name, c.path.display())?;
                write!(out, "{report}")?;
            }
            Some(Err(f)) => {
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
        (None, Some(ds)) => ds.commit().map(|()| Exit::Ok),
        (None, None) => Ok(Exit::Ok),
    }
}

/// Feeds the analyzer frame by frame: the frames read, and the error that ended the
/// capture early.
fn analyse(
    src: &mut Source,
    limit: u64,
    opts: &frame::Options,
    filter: Option<&Filter>,
    an: &mut Analyzer,
) -> (u64, Option<CaptureError>) {
    let mut frames = 0u64;
    // For the filter's frame.time_*: the first frame's timestamp, and the previous
    // one's (the first frame is its own previous: a delta of 0, as tshark shows).
    let (mut first_ts, mut prev_ts) = (None, None);
    let mut f = frame::decode(dissector::LinkType::ETHERNET, &[], opts);
    loop {
        if frames >= limit {
            return (frames, None);
        }
        match src.next_packet() {
            // By reference: moving the record out copies it with wide loads that
            // stall on the narrower stores that built it.
            Ok(Some(ref r)) => {
                frames += 1;
                match filter {
                    None => {
                        an.add_captured(r.number, r.ts_ns, r.orig_len, r.link, r.data, opts, &mut f)
                    }
                    // A filter needs the decoded frame, so no fast path.
                    Some(flt) => {
                        let (first, prev) =
                            (*first_ts.get_or_insert(r.ts_ns), prev_ts.unwrap_or(r.ts_ns));
                        an.add_seen(
                            r.number,
                            r.ts_ns,
                            r.orig_len,
                            &seen_through(flt, &mut f, r, first, prev, opts),
                        );
                        prev_ts = Some(r.ts_ns);
                    }
                }
            }
            Ok(None) => return (frames, None),
            Err(e) => return (frames, Some(e)),
        }
    }
}

/// What a frame gives the analysis when a display filter chooses the frames: the
/// filter needs the decoded frame (so no fast path), and a frame it does not keep
/// is skipped. `first_ts` and `prev_ts` are the first and previous frames'
/// timestamps, for the filter's `frame.time_*`.
fn seen_through(
    flt: &Filter,
    f: &mut Frame,
    r: &Record<'_>,
    first_ts: u64,
    prev_ts: u64,
    opts: &frame::Options,
) -> Seen {
    frame::decode_into(f, r.link, r.data, opts);
    if flt.matches(&Ctx::of(r, f, first_ts, prev_ts)) {
        Seen::of(f, r.data)
    } else {
        Seen::Skipped
    }
}

/// [`analyse`] on `jobs` threads: they find what each frame gives the analysis
/// ([`Seen`]: the fast path, the ICRC, a full decode, the filter), this thread
/// feeds the analyzer in frame order, so per-QP state is the same as in one pass.
fn analyse_par(
    src: &mut Reader<BufReader<File>>,
    plan: Plan,
    jobs: usize,
    opts: &frame::Options,
    filter: Option<&Filter>,
    an: &mut Analyzer,
) -> Result<(u64, Option<CaptureError>), Failure> {
    let workers = (0..jobs)
        .map(|_| {
            let mut f = frame::decode(dissector::LinkType::ETHERNET, &[], opts);
            let flt = filter.cloned();
            move |c: &Chunk, seen: &mut Vec<Seen>| {
                seen.clear();
                for (r, prev) in c.records() {
                    seen.push(match &flt {
                        None => Seen::of_captured(r.link, r.data, opts, &mut f),
                        Some(flt) => seen_through(flt, &mut f, &r, c.first_ts_ns, prev, opts),
                    });
                }
            }
        })
        .collect();
    let mut frames = 0u64;
    let end = parallel::run(src, plan, workers, |c, seen: &mut Vec<Seen>| {
        for ((r, _), s) in c.records().zip(seen.iter()) {
            an.add_seen(r.number, r.ts_ns, r.orig_len, s);
        }
        frames += c.len() as u64;
        Ok(())
    })?;
    Ok((frames, end))
}
