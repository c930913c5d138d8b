//! The flow analysis of `roce flows`: the frames of a capture file or a live
//! interface (with a display filter, those it keeps) fed to dissector's per-QP
//! analyzer, on one thread or, for a file, the per-frame work on several and the
//! analysis in frame order (the report the same); the report also written as
//! Parquet tables; several captures analysed side by side, their tables a Parquet
//! dataset.
//!
//! Owns: the flows plan ([`Flows`]) and the analysis loop, in order and on threads.
//! Imports: dissector's capture, frame, ctx, filter and flow; the Parquet writer
//! (`crate::parquet_writer`); `super::input`, `super::parallel`, `super::dataset`,
//! `super::Error`.
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use dissector::capture::{CaptureError, Chunk, PacketSource, Reader, Record};
use dissector::ctx::Ctx;
use dissector::filter::Filter;
use dissector::flow::{Analyzer, Report, Seen};
use dissector::frame::{self, Frame};

use super::dataset::{self, Capture, Dataset, Results};
use super::input::{Input, Source};
use super::parallel::{self, Plan};
use super::Error;

/// What to analyse, and where the flow tables go.
#[derive(Debug)]
pub(crate) struct Flows {
    pub input: Input,
    /// Also write the flow table and its events as Parquet: DIR/flows.parquet and
    /// DIR/events.parquet; of a dataset, DIR/flows/capture=NAME/part-0.parquet and
    /// DIR/events/capture=NAME/part-0.parquet.
    pub parquet: Option<PathBuf>,
    /// Of a dataset: replace a `parquet` directory that exists and is not empty.
    pub force: bool,
}

/// How the analysis of one capture or interface ended: the report, the frames read,
/// and the error that ended a damaged capture (the report covers the frames before
/// it).
#[derive(Debug)]
pub(crate) struct Analysed {
    pub report: Report,
    pub frames: u64,
    pub end: Option<CaptureError>,
}

/// Analyses one capture file or a live interface as `plan` says, and writes the
/// Parquet tables of its report.
pub(crate) fn run(plan: &Flows) -> Result<Analysed, Error> {
    let (opts, filter) = (&plan.input.options, plan.input.display_filter.as_ref());
    let mut src = plan.input.open()?;
    let mut an = Analyzer::new();
    let jobs = plan.input.jobs();
    let (frames, end) = match &mut src {
        Source::File(r) if jobs > 1 => {
            analyse_par(r, plan.input.chunks(), jobs, opts, filter, &mut an)?
        }
        _ => analyse(&mut src, plan.input.limit(), opts, filter, &mut an),
    };
    let report = an.report();
    if let Some(dir) = &plan.parquet {
        crate::parquet_writer::write_flows(dir, &report)
            .context("writing --parquet")
            .map_err(Error::environment)?;
    }
    Ok(Analysed { report, frames, end })
}

/// Several captures or a directory: each capture analysed on its own (`jobs` at a
/// time, one thread each) into its report, or its error (a damaged capture is one);
/// with [`Flows::parquet`], a Hive-partitioned dataset of the flow tables and events,
/// not yet in place. It is all or nothing (see [`super::dataset`]): the caller
/// commits it only when every capture was read.
pub(crate) fn dataset(
    plan: &Flows,
    captures: &[Capture],
) -> Result<(Results<Report>, Option<Dataset>), Error> {
    let ds = plan.parquet.as_deref().map(|dir| Dataset::create(dir, plan.force)).transpose()?;
    // Not `plan` itself into the threads: its display filter is not `Sync`.
    let (opts, limit) = (&plan.input.options, plan.input.limit());
    // A compiled filter keeps scratch state (not `Sync`): each capture takes a copy.
    let filter = std::sync::Mutex::new(plan.input.display_filter.clone());
    let results = dataset::each(captures, plan.input.jobs(), |c| {
        let mut src = Source::File(dissector::capture::open(&c.path).map_err(Error::bad_input)?);
        let filter = filter
            .lock()
            .map_err(|_| Error::environment(anyhow!("an analysing thread failed")))?
            .clone();
        let mut an = Analyzer::new();
        if let (_, Some(e)) = analyse(&mut src, limit, opts, filter.as_ref(), &mut an) {
            return Err(Error::bad_input(dataset::capture_error(c, &e)));
        }
        let report = an.report();
        if let Some(ds) = &ds {
            let (flows, events) =
                (ds.table_part("flows", &c.name)?, ds.table_part("events", &c.name)?);
            crate::parquet_writer::write_flow_tables(&flows, &events, &report)
                .with_context(|| {
                    format!("writing the --parquet partitions of {}", c.path.display())
                })
                .map_err(Error::environment)?;
        }
        Ok(report)
    });
    Ok((results, ds))
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
) -> Result<(u64, Option<CaptureError>), Error> {
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
