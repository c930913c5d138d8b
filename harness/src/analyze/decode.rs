//! The decode pipeline of `roce decode`: each frame of a capture file or a live
//! interface decoded, the frames a display filter keeps written out as one line each,
//! a header tree, JSON Lines, tshark-compatible fields or typed Parquet columns, and
//! copied to a pcapng file; on one thread, or for fields and Parquet of a file on
//! several (the output the same); and several captures decoded side by side into a
//! Parquet dataset.
//!
//! Owns: the decode plan ([`Decode`], [`Format`], [`FieldOpts`]), the decode loop in
//! order and on threads, and what a run saw ([`Stats`]). Imports: dissector's capture,
//! frame, ctx, fields, filter and print; the Parquet writer (`crate::parquet_writer`);
//! `super::input`, `super::parallel`, `super::dataset`, `super::Error`.
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use dissector::capture::{CaptureError, Chunk, PacketSource, Reader, Record, RecordFile};
use dissector::ctx::{Ctx, Shown};
use dissector::fields::{self, Field, Value};
use dissector::filter::Filter;
use dissector::frame::Frame;
use dissector::{frame, print};

use super::dataset::{self, Capture, Dataset, Results};
use super::input::{Input, Source};
use super::parallel::{self, Plan};
use super::Error;
use crate::parquet_writer::{Extract, Rows, Spec, Table};

/// What a decode writes of each frame kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// One line per frame (with [`Decode::verbose`], the header tree).
    Text,
    /// The [`Decode::fields`], one line per frame.
    Fields,
    /// JSON Lines: one object per frame.
    Json,
    /// The [`Decode::fields`] as typed columns of the Parquet file [`Decode::write`].
    Parquet,
}

/// What to decode and how to write it: a plan the caller has checked (fields and
/// Parquet name at least one field, Parquet has a file to go to).
#[derive(Debug)]
pub(crate) struct Decode {
    pub input: Input,
    pub format: Format,
    /// With [`Format::Text`]: the full header tree of each frame.
    pub verbose: bool,
    /// The fields of [`Format::Fields`] and [`Format::Parquet`].
    pub fields: Vec<Field>,
    /// The same fields as they were named, for the header line.
    pub field_names: Vec<String>,
    pub field_opts: FieldOpts,
    /// Also write the frames kept to this pcapng file; with [`Format::Parquet`],
    /// the Parquet file (written to FILE.tmp, renamed when complete).
    pub write: Option<PathBuf>,
    /// Rows per Parquet row group.
    pub row_group: usize,
    /// Of a dataset: replace a directory that exists and is not empty.
    pub force: bool,
}

/// How a run over one capture or interface ended: what it saw, and the error that
/// ended a damaged capture (the frames before it were written).
#[derive(Debug)]
pub(crate) struct Decoded {
    pub stats: Stats,
    pub end: Option<CaptureError>,
}

/// Parsed `-E` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldOpts {
    pub header: bool,
    pub separator: Vec<u8>,
    pub occurrence: u8,
    pub aggregator: Vec<u8>,
    pub quote: Option<u8>,
}

/// No header, tabs between fields, every occurrence joined with commas, no quotes.
impl Default for FieldOpts {
    fn default() -> FieldOpts {
        FieldOpts {
            header: false,
            separator: b"\t".to_vec(),
            occurrence: b'a',
            aggregator: b",".to_vec(),
            quote: None,
        }
    }
}

impl FieldOpts {
    /// Parses tshark's `-E OPTION=VALUE` options: a bad one is bad input.
    pub(crate) fn parse(opts: &[String]) -> Result<FieldOpts, Error> {
        FieldOpts::parse_all(opts).map_err(Error::bad_input)
    }

    fn parse_all(opts: &[String]) -> anyhow::Result<FieldOpts> {
        let mut o = FieldOpts::default();
        let sep = |v: &str| -> Vec<u8> {
            match v {
                "/t" => b"\t".to_vec(),
                "/s" => b" ".to_vec(),
                other => other.as_bytes().to_vec(),
            }
        };
        for opt in opts {
            let Some((k, v)) = opt.split_once('=') else {
                anyhow::bail!("-E {opt}: expected OPTION=VALUE, e.g. -E header=y");
            };
            match (k, v) {
                ("header", "y") => o.header = true,
                ("header", "n") => o.header = false,
                ("separator", v) if !v.is_empty() => o.separator = sep(v),
                ("occurrence", "f" | "l" | "a") => o.occurrence = v.as_bytes()[0],
                ("aggregator", v) if !v.is_empty() => o.aggregator = sep(v),
                ("quote", "d") => o.quote = Some(b'"'),
                ("quote", "s") => o.quote = Some(b'\''),
                ("quote", "n") => o.quote = None,
                ("bom", _) => {}
                _ => anyhow::bail!(
                    "-E {opt}: unsupported; use header=y|n, separator=/t|/s|C, occurrence=f|l|a, aggregator=,|/s|C, quote=d|s|n"
                ),
            }
        }
        Ok(o)
    }
}

/// Decodes one capture file or a live interface as `plan` says, writing to `out`
/// (and to [`Decode::write`]). A damaged capture is not an error here: the frames
/// before the damage are written, and [`Decoded::end`] says what ended it.
pub(crate) fn run(plan: &Decode, out: &mut dyn Write) -> Result<Decoded, Error> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let (format, field_ids, filter) = (plan.format, &plan.fields[..], &plan.input.display_filter);
    let opts = &plan.input.options;
    let mut src = plan.input.open()?;
    let (mut save, mut table) = open_writes(plan)?;
    if format == Format::Fields && plan.field_opts.header {
        write_header(&mut out, &plan.field_names, &plan.field_opts.separator)?;
    }
    let mut stats = Stats::default();
    let render = Render::new(field_ids, &plan.field_opts);
    // -j: the typed outputs, unless the filter itself reads what it kept before.
    let jobs = plan.input.jobs();
    if let Some(t) = table.as_mut() {
        t.encode_with(jobs);
    }
    let sequential_filter = filter.as_ref().is_some_and(|f| f.uses(Field::FrameTimeDeltaDisplayed));
    let par = match (&mut src, format) {
        (Source::File(r), Format::Fields | Format::Parquet)
            if jobs > 1 && save.is_none() && !sequential_filter =>
        {
            Some(r)
        }
        _ => None,
    };
    let end = if let Some(r) = par {
        let job = Job { opts, fields: field_ids, plan: plan.input.chunks(), jobs };
        match table.as_mut() {
            Some(t) => job.parquet(r, filter.as_ref(), t, &mut stats)?,
            None => job.fields(r, filter.as_ref(), &render, &mut out, &mut stats)?,
        }
    } else {
        let mut output = Output {
            format,
            verbose: plan.verbose,
            render: &render,
            extract: Extract::new(field_ids),
            out: &mut out,
            table: table.as_mut(),
            save: save.as_mut(),
            line: Vec::with_capacity(512),
            val: Vec::with_capacity(64),
            text: String::with_capacity(512),
        };
        let limit = plan.input.limit();
        decode_in_order(&mut src, opts, filter.as_ref(), limit, &mut output, &mut stats)?
    };
    out.flush()?;
    drop(out);
    close_writes(save, table)?;
    Ok(Decoded { stats, end })
}

/// The [`Decode::fields`] of several captures or a directory, as a Hive-partitioned
/// Parquet dataset `dir`, `DIR/capture=NAME/part-0.parquet`, the captures decoded
/// side by side (`jobs` at a time, one thread each): what each capture saw, or its
/// error (a damaged capture is one), and the dataset, not yet in place. It is all or
/// nothing (see [`super::dataset`]): the caller commits it only when every capture
/// was read.
pub(crate) fn dataset(
    plan: &Decode,
    captures: &[Capture],
    dir: &Path,
) -> Result<(Results<Stats>, Dataset), Error> {
    // Not `plan` itself into the threads: its display filter is not `Sync`.
    let (fields, opts, row_group) = (&plan.fields[..], &plan.input.options, plan.row_group);
    let ds = Dataset::create(dir, plan.force)?;
    let fopts = FieldOpts::default();
    let render = Render::new(fields, &fopts);
    let limit = plan.input.limit();
    // A compiled filter keeps scratch state (not `Sync`): each capture takes a copy.
    let filter = std::sync::Mutex::new(plan.input.display_filter.clone());
    let results = dataset::each(captures, plan.input.jobs(), |c| {
        let part = ds.part(&c.name)?;
        let mut src = Source::File(dissector::capture::open(&c.path).map_err(Error::bad_input)?);
        let specs = fields.iter().map(|&f| Spec::of_field(f)).collect();
        let mut table = Table::with_row_groups(&part, specs, row_group)
            .with_context(|| format!("writing the partition of {}", c.path.display()))
            .map_err(Error::environment)?;
        let mut sink = io::sink();
        let mut output = Output {
            format: Format::Parquet,
            verbose: false,
            render: &render,
            extract: Extract::new(fields),
            out: &mut sink,
            table: Some(&mut table),
            save: None,
            line: Vec::new(),
            val: Vec::new(),
            text: String::new(),
        };
        let mut stats = Stats::default();
        let filter = filter
            .lock()
            .map_err(|_| Error::environment(anyhow!("a decoding thread failed")))?
            .clone();
        if let Some(e) =
            decode_in_order(&mut src, opts, filter.as_ref(), limit, &mut output, &mut stats)?
        {
            return Err(Error::bad_input(dataset::capture_error(c, &e)));
        }
        table
            .finish()
            .with_context(|| format!("writing the partition of {}", c.path.display()))
            .map_err(Error::environment)?;
        Ok(stats)
    });
    Ok((results, ds))
}

/// What `-w` writes, created now: the Parquet file of the fields with
/// [`Format::Parquet`], else a pcapng file of the frames kept.
fn open_writes(plan: &Decode) -> Result<(Option<RecordFile>, Option<Table>), Error> {
    Ok(match (&plan.write, plan.format) {
        (Some(p), Format::Parquet) => (
            None,
            Some(
                Table::with_row_groups(
                    p,
                    plan.fields.iter().map(|&f| Spec::of_field(f)).collect(),
                    plan.row_group,
                )
                .map_err(Error::environment)?,
            ),
        ),
        (Some(p), _) => (
            Some(
                RecordFile::create(p, concat!("roce ", env!("CARGO_PKG_VERSION")))
                    .map_err(Error::environment)?,
            ),
            None,
        ),
        (None, _) => (None, None),
    })
}

/// `-E header=y`: the field names, on a line of their own.
fn write_header(out: &mut impl Write, names: &[String], separator: &[u8]) -> io::Result<()> {
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.write_all(separator)?;
        }
        out.write_all(n.as_bytes())?;
    }
    out.write_all(b"\n")
}

/// Completes what `-w` wrote: the pcapng file, or the Parquet file.
fn close_writes(save: Option<RecordFile>, table: Option<Table>) -> Result<(), Error> {
    if let Some(s) = save {
        s.commit().context("writing the -w file").map_err(Error::environment)?;
    }
    if let Some(t) = table {
        t.finish().context("writing the Parquet file").map_err(Error::environment)?;
    }
    Ok(())
}

/// Decodes the frames one after the other, at most `limit`, and gives those the
/// filter keeps to `output`; returns the error that ended a damaged capture.
fn decode_in_order(
    src: &mut Source,
    opts: &frame::Options,
    filter: Option<&Filter>,
    limit: u64,
    output: &mut Output<'_, impl Write>,
    stats: &mut Stats,
) -> Result<Option<CaptureError>, Error> {
    let mut fr = frame::decode(dissector::LinkType::ETHERNET, &[], opts);
    let mut first_ts = None;
    let mut prev_ts = 0;
    // The timestamp of the last frame shown (for frame.time_delta_displayed).
    let mut shown_ts: Option<u64> = None;
    loop {
        if stats.frames >= limit {
            return Ok(None);
        }
        let rec: Record<'_> = match src.next_packet() {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(e) => return Ok(Some(e)),
        };
        frame::decode_into(&mut fr, rec.link, rec.data, opts);
        stats.count(&fr);
        let first = *first_ts.get_or_insert(rec.ts_ns);
        let ctx = Ctx::of(&rec, &fr, first, if stats.frames == 1 { rec.ts_ns } else { prev_ts });
        prev_ts = rec.ts_ns;
        let shown = Shown { prev_ts_ns: shown_ts };
        if filter.is_some_and(|f| !f.matches_shown(&ctx, shown)) {
            continue;
        }
        shown_ts = Some(rec.ts_ns);
        output.frame(&rec, &ctx, shown)?;
    }
}

/// Where a decode in order puts the frames it keeps: the output in its `-T`
/// format, the Parquet table, the `-w` file; and the buffers each frame reuses.
struct Output<'a, W> {
    format: Format,
    verbose: bool,
    render: &'a Render<'a>,
    extract: Extract,
    out: &'a mut W,
    table: Option<&'a mut Table>,
    save: Option<&'a mut RecordFile>,
    line: Vec<u8>,
    val: Vec<u8>,
    text: String,
}

impl<W: Write> Output<'_, W> {
    /// Writes one frame kept, as `-T` says, and to the `-w` file.
    fn frame(&mut self, rec: &Record<'_>, ctx: &Ctx<'_>, shown: Shown) -> Result<(), Error> {
        match self.format {
            Format::Text if self.verbose => {
                self.text.clear();
                print::verbose(ctx, &mut self.text);
                self.out.write_all(self.text.as_bytes())?;
                self.out.write_all(b"\n")?;
            }
            Format::Text => {
                self.text.clear();
                print::line(ctx, &mut self.text);
                self.out.write_all(self.text.as_bytes())?;
                self.out.write_all(b"\n")?;
            }
            Format::Json => {
                serde_json::to_writer(&mut *self.out, &print::json(ctx))?;
                self.out.write_all(b"\n")?;
            }
            Format::Parquet => {
                if let Some(t) = self.table.as_mut() {
                    self.extract
                        .row_of(t, ctx, shown)
                        .context("writing the Parquet file")
                        .map_err(Error::environment)?;
                }
            }
            Format::Fields => {
                self.line.clear();
                self.render.line(&mut self.line, ctx, shown, &mut self.val, None);
                self.out.write_all(&self.line)?;
            }
        }
        if let Some(s) = self.save.as_mut() {
            s.write(rec).context("writing the -w file").map_err(Error::environment)?;
        }
        Ok(())
    }
}

/// What a run saw, for the closing notes.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stats {
    /// Frames read.
    pub frames: u64,
    /// Of them, RoCE frames.
    pub roce: u64,
}

impl Stats {
    fn count(&mut self, f: &Frame) {
        self.frames += 1;
        self.roce += f.roce.is_some() as u64;
    }

    pub(crate) fn add(&mut self, other: &Stats) {
        self.frames += other.frames;
        self.roce += other.roce;
    }
}

/// Renders `-T fields` lines.
struct Render<'a> {
    fields: &'a [Field],
    /// Each field's own writer, in the order of `fields`.
    writers: Vec<fields::Writer>,
    opts: &'a FieldOpts,
    /// No -E option changes the values as printed.
    plain: bool,
}

impl<'a> Render<'a> {
    fn new(fields: &'a [Field], opts: &'a FieldOpts) -> Render<'a> {
        let plain = opts.quote.is_none() && opts.occurrence == b'a' && opts.aggregator == b",";
        Render { fields, writers: fields.iter().map(|f| f.writer()).collect(), opts, plain }
    }

    /// Appends the line of the frame in `c` to `line`. With `holes`, the values of
    /// `frame.time_delta_displayed` are left out and where they go is noted
    /// instead (for [`Render::value`] to fill in later).
    fn line(
        &self,
        line: &mut Vec<u8>,
        c: &Ctx<'_>,
        shown: Shown,
        val: &mut Vec<u8>,
        mut holes: Option<&mut Vec<usize>>,
    ) {
        // The common case, values as they are and a one-byte separator, without
        // the per-field tests the general loop below makes.
        if let (true, None, &[sep]) = (self.plain, &holes, &self.opts.separator[..]) {
            let mut writers = self.writers.iter();
            if let Some(write) = writers.next() {
                write(c, shown, line);
            }
            for write in writers {
                line.push(sep);
                write(c, shown, line);
            }
            line.push(b'\n');
            return;
        }
        for (i, (&f, write)) in self.fields.iter().zip(&self.writers).enumerate() {
            if i > 0 {
                match self.opts.separator[..] {
                    [one] => line.push(one),
                    ref sep => line.extend_from_slice(sep),
                }
            }
            match holes.as_deref_mut() {
                Some(h) if f == Field::FrameTimeDeltaDisplayed => h.push(line.len()),
                _ => self.value(line, val, |out| write(c, shown, out)),
            }
        }
        line.push(b'\n');
    }

    /// Appends the value `write` writes, as the -E options want it.
    fn value(&self, line: &mut Vec<u8>, val: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        if self.plain {
            write(line);
        } else {
            val.clear();
            write(val);
            push_value(line, val, self.opts);
        }
    }
}

/// What a worker made of one chunk for `decode -j`: `body` (text, or column
/// values) and what the calling thread needs to put it in place.
#[derive(Debug, Default)]
struct Part<T> {
    body: T,
    stats: Stats,
    /// The timestamp of the chunk's first frame shown: its
    /// `frame.time_delta_displayed` counts from the last frame shown before the
    /// chunk, which the worker does not know.
    first_shown: Option<u64>,
    /// The timestamp of the chunk's last frame shown.
    last_shown: Option<u64>,
}

/// `-T fields` text of a chunk, with the places of the first shown frame's
/// `frame.time_delta_displayed` values (see [`Render::line`]).
#[derive(Debug, Default)]
struct Text {
    bytes: Vec<u8>,
    holes: Vec<usize>,
}

/// What every `decode -j` worker shares.
struct Job<'a> {
    opts: &'a frame::Options,
    fields: &'a [Field],
    plan: Plan,
    jobs: usize,
}

impl Job<'_> {
    /// Decodes the frames of a chunk into `scratch`, applies the filter and hands
    /// each frame shown to `emit`, with `true` for the chunk's first one shown.
    fn each_shown<T>(
        &self,
        c: &Chunk,
        scratch: &mut Frame,
        filter: Option<&Filter>,
        part: &mut Part<T>,
        mut emit: impl FnMut(&mut T, &Ctx<'_>, Shown, bool),
    ) {
        part.stats = Stats::default();
        let mut shown_ts = None;
        part.first_shown = None;
        for (r, prev) in c.records() {
            frame::decode_into(scratch, r.link, r.data, self.opts);
            part.stats.count(scratch);
            let ctx = Ctx::of(&r, scratch, c.first_ts_ns, prev);
            let shown = Shown { prev_ts_ns: shown_ts };
            // The filter does not read frame.time_delta_displayed (else no -j).
            if filter.is_some_and(|f| !f.matches_shown(&ctx, shown)) {
                continue;
            }
            let first = shown_ts.is_none();
            if first {
                part.first_shown = Some(r.ts_ns);
            }
            emit(&mut part.body, &ctx, shown, first);
            shown_ts = Some(r.ts_ns);
        }
        part.last_shown = shown_ts;
    }

    /// What to show as the chunk's first `frame.time_delta_displayed`, given the
    /// last frame shown before it; the last frame shown after it.
    fn carry<T>(part: &Part<T>, shown_ts: &mut Option<u64>) -> Option<Value<'static>> {
        let first =
            part.first_shown.map(|ts| fields::delta_displayed(ts, Shown { prev_ts_ns: *shown_ts }));
        if part.last_shown.is_some() {
            *shown_ts = part.last_shown;
        }
        first
    }

    /// `-T fields` on `jobs` threads, written to `out` in frame order.
    fn fields(
        &self,
        src: &mut Reader<BufReader<File>>,
        filter: Option<&Filter>,
        render: &Render<'_>,
        out: &mut impl Write,
        stats: &mut Stats,
    ) -> Result<Option<CaptureError>, Error> {
        let workers = (0..self.jobs)
            .map(|_| {
                let (mut scratch, filter, mut val) = (
                    frame::decode(dissector::LinkType::ETHERNET, &[], self.opts),
                    filter.cloned(),
                    Vec::new(),
                );
                move |c: &Chunk, part: &mut Part<Text>| {
                    part.body.bytes.clear();
                    part.body.holes.clear();
                    self.each_shown(
                        c,
                        &mut scratch,
                        filter.as_ref(),
                        part,
                        |text, ctx, shown, first| {
                            render.line(
                                &mut text.bytes,
                                ctx,
                                shown,
                                &mut val,
                                first.then_some(&mut text.holes),
                            );
                        },
                    );
                }
            })
            .collect();
        let (mut shown_ts, mut val, mut cell) = (None, Vec::new(), Vec::new());
        parallel::run(src, self.plan, workers, |_, part: &mut Part<Text>| {
            stats.add(&part.stats);
            let first = Job::carry(part, &mut shown_ts);
            let mut at = 0;
            for &h in &part.body.holes {
                out.write_all(&part.body.bytes[at..h])?;
                cell.clear();
                render.value(&mut cell, &mut val, |o| first.iter().for_each(|v| v.write(o)));
                out.write_all(&cell)?;
                at = h;
            }
            out.write_all(&part.body.bytes[at..])?;
            Ok(())
        })
    }

    /// `-T parquet` on `jobs` threads: column values made by the workers, rows
    /// appended to `table` in frame order.
    fn parquet(
        &self,
        src: &mut Reader<BufReader<File>>,
        filter: Option<&Filter>,
        table: &mut Table,
        stats: &mut Stats,
    ) -> Result<Option<CaptureError>, Error> {
        let specs: Vec<Spec> = self.fields.iter().map(|&f| Spec::of_field(f)).collect();
        let extract = Extract::new(self.fields);
        let workers = (0..self.jobs)
            .map(|_| {
                let (mut scratch, filter, specs, extract) = (
                    frame::decode(dissector::LinkType::ETHERNET, &[], self.opts),
                    filter.cloned(),
                    &specs,
                    &extract,
                );
                move |c: &Chunk, part: &mut Part<Rows>| {
                    if !part.body.has_columns() {
                        part.body = Rows::new(specs);
                    }
                    part.body.clear();
                    self.each_shown(
                        c,
                        &mut scratch,
                        filter.as_ref(),
                        part,
                        |rows, ctx, shown, _| {
                            extract.row(rows, ctx, shown);
                        },
                    );
                    part.body.seal();
                }
            })
            .collect();
        let delta_displayed: Vec<usize> = self
            .fields
            .iter()
            .enumerate()
            .filter(|&(_, &f)| f == Field::FrameTimeDeltaDisplayed)
            .map(|(i, _)| i)
            .collect();
        let mut shown_ts = None;
        parallel::run(src, self.plan, workers, |_, part: &mut Part<Rows>| {
            stats.add(&part.stats);
            if let Some(Value::Secs(ns)) = Job::carry(part, &mut shown_ts) {
                for &i in &delta_displayed {
                    part.body.set_first_seconds(i, ns);
                }
            }
            table
                .append(&mut part.body)
                .context("writing the Parquet file")
                .map_err(Error::environment)
        })
    }
}

/// Appends a field value, applying occurrence, aggregator and quoting options.
fn push_value(line: &mut Vec<u8>, val: &[u8], o: &FieldOpts) {
    if let Some(q) = o.quote {
        line.push(q);
    }
    if o.occurrence == b'a' && o.aggregator == b"," {
        line.extend_from_slice(val);
    } else {
        let mut parts = val.split(|&b| b == b',');
        match o.occurrence {
            b'f' => line.extend_from_slice(parts.next().unwrap_or(&[])),
            b'l' => line.extend_from_slice(val.rsplit(|&b| b == b',').next().unwrap_or(&[])),
            _ => {
                for (i, p) in parts.enumerate() {
                    if i > 0 {
                        line.extend_from_slice(&o.aggregator);
                    }
                    line.extend_from_slice(p);
                }
            }
        }
    }
    if let Some(q) = o.quote {
        line.push(q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_options() {
        let o = FieldOpts::parse(&["header=y".into(), "separator=,".into(), "occurrence=l".into()])
            .unwrap();
        assert!(o.header);
        assert_eq!(o.separator, b",");
        let mut l = Vec::new();
        push_value(&mut l, b"10,20", &o);
        assert_eq!(l, b"20");
        let e = FieldOpts::parse(&["colour=red".into()]).unwrap_err().to_string();
        assert!(e.contains("unsupported"), "{e}");
        assert!(FieldOpts::parse(&["header".into()]).is_err());
    }
}
