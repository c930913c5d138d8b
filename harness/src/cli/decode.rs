//! `roce decode`: one line per frame, a header tree (`-V`), JSON Lines (`--json`),
//! tshark-compatible fields (`-T fields -e …`), or those fields as typed Parquet
//! columns (`-T parquet -e … -w FILE.parquet`); with `-Y`, only the frames a display
//! filter keeps (in every output, `-w` included).
//!
//! Owns: `roce decode`'s options, its field options (`-E`), and the decode loop, on one
//! thread or several. Imports: dissector's capture, frame, ctx, fields, filter and
//! print; the Parquet writer (`crate::parquet_writer`); `super::input`,
//! `super::parallel`, `super::exit`.
use std::io::{self, BufWriter, Write};

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use std::fs::File;
use std::io::BufReader;

use dissector::capture::{CaptureError, Chunk, PacketSource, Reader, Record, RecordFile};
use dissector::ctx::{Ctx, Shown};
use dissector::fields::{self, Field, Value};
use dissector::filter::Filter;
use dissector::frame::Frame;
use dissector::{frame, print};

use super::dataset::{self, Capture, Dataset};
use super::exit::{help, CommandResult, Exit, Failure};
use super::input::{InputArgs, Source};
use super::parallel::{self, Plan};
use crate::parquet_writer::{self, Extract, Rows, Spec, Table};

const EXIT: &[(Exit, &str)] = &[
    (Exit::Ok, "every frame was read"),
    (Exit::BadInput, "a bad option, field name or display filter, or a damaged capture (the frames before the damage are printed; a dataset of several captures is not written at all), or -w DIR exists and is not empty (without --force)"),
    (Exit::Setup, "the interface could not be opened, or -w could not be written"),
    (Exit::Interrupted, "a second Ctrl-C during live capture"),
];

#[derive(Debug, Args)]
#[command(after_help = help(EXIT))]
pub struct DecodeArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Print the full header tree of each frame.
    #[arg(short = 'V', long)]
    pub verbose: bool,
    /// JSON Lines: one object per frame (schema: docs/src/guide/decode.md).
    #[arg(long, conflicts_with_all = ["verbose", "output_format"])]
    pub json: bool,
    /// Output format, as tshark's -T: text (default), fields, json (= --json), or
    /// parquet (the -e fields as typed columns, written to -w FILE.parquet).
    #[arg(short = 'T', value_name = "FORMAT", value_enum)]
    pub output_format: Option<Format>,
    /// A field to print with -T fields (tshark names, e.g. infiniband.bth.psn). Repeatable.
    #[arg(short = 'e', value_name = "FIELD")]
    pub fields: Vec<String>,
    /// Field output options, as tshark's -E: header=y|n, separator=/t|/s|C,
    /// occurrence=f|l|a, aggregator=,|/s|C, quote=d|s|n. Repeatable.
    #[arg(short = 'E', value_name = "OPT=VALUE")]
    pub field_opts: Vec<String>,
    /// List what can be printed: `fields` (every -e name with its meaning).
    #[arg(short = 'G', value_name = "WHAT")]
    pub list: Option<String>,
    /// Also write the frames read (with -Y, those it keeps) to this pcapng file;
    /// with -T parquet, the Parquet file (written to FILE.tmp, renamed when
    /// complete).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// With -T parquet: rows per row group (what a reader reads at a time; memory
    /// while writing grows with it).
    #[arg(long, value_name = "ROWS", default_value_t = parquet_writer::ROW_GROUP)]
    pub row_group: usize,
    /// With several captures or a directory (a dataset, -w DIR): replace DIR when it
    /// exists and is not empty (it is refused otherwise).
    #[arg(long)]
    pub force: bool,
    /// Print the capture in the wire snapshot's normal form, the text `roce suite
    /// --snapshots` keeps: per QP and direction, requests then responses, PSNs
    /// and VAs relative, hosts, QPs and MRs named in order of appearance, times
    /// left out, what timing shapes folded. Keep it to see what a re-capture
    /// changed
    #[arg(
        long,
        visible_alias = "normalized",
        conflicts_with_all = ["verbose", "json", "output_format", "fields", "write", "interface", "display_filter", "count"]
    )]
    pub normalised: bool,
    /// With --normalised: fields also shown, comma-separated: `ip.dsfield` (DSCP
    /// and ECN), `udp.srcport` (by class: p1, p2, … as first seen)
    #[arg(long, value_name = "FIELDS", requires = "normalised", value_delimiter = ',')]
    pub snapshot_fields: Vec<String>,
}

/// `--normalised`: one capture in the wire snapshot's normal form. A damaged
/// capture prints what came before the damage, and says where.
fn normalised(a: &DecodeArgs, out: &mut dyn Write) -> CommandResult {
    let fields = crate::results::snapshots::Fields::parse(&a.snapshot_fields).map_err(|e| {
        Failure::input(anyhow!(
            "roce decode: --snapshot-fields: {e}\nhint: --snapshot-fields ip.dsfield,udp.srcport"
        ))
    })?;
    let path = match a.input.inputs()[..] {
        [p] if p.is_file() => p,
        [p] if !p.exists() => {
            return Err(Failure::input(anyhow!("roce decode: {}: no such file", p.display())))
        }
        _ => {
            return Err(Failure::input(anyhow!(
                "roce decode --normalised reads one capture file\nhint: normalise each capture by itself (a directory or several files are a dataset)"
            )))
        }
    };
    let (t, flows) = crate::judge::timeline::read_with_flows(path)
        .map_err(|e| Failure::input(anyhow!("roce decode: {e}")))?;
    let title = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let text = crate::judge::snapshot::capture(&title, &t, &flows, fields);
    out.write_all(text.as_bytes()).context("writing the normal form")?;
    out.flush().context("writing the normal form")?;
    match &t.damaged {
        Some(e) => Err(Failure::input(anyhow!(
            "roce decode: {}: {e} (the normal form above holds the frames before it)",
            path.display()
        ))),
        None => Ok(Exit::Ok),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Fields,
    Json,
    Parquet,
}

/// Parsed `-E` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldOpts {
    pub header: bool,
    pub separator: Vec<u8>,
    pub occurrence: u8,
    pub aggregator: Vec<u8>,
    pub quote: Option<u8>,
}

impl FieldOpts {
    pub(super) fn parse(opts: &[String]) -> anyhow::Result<FieldOpts> {
        let mut o = FieldOpts {
            header: false,
            separator: b"\t".to_vec(),
            occurrence: b'a',
            aggregator: b",".to_vec(),
            quote: None,
        };
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

fn list_fields(out: &mut impl Write) -> io::Result<()> {
    for (_, name, desc) in Field::ALL {
        writeln!(out, "{name}\t{desc}")?;
    }
    Ok(())
}

pub(super) fn run(a: DecodeArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    if let Some(what) = a.list.as_deref() {
        return list(what, &mut out);
    }
    if a.normalised {
        return normalised(&a, &mut out);
    }
    let format = output_format(&a)?;
    let field_ids = a
        .fields
        .iter()
        .map(|n| Field::lookup(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::input)?;
    let fopts = FieldOpts::parse(&a.field_opts).map_err(Failure::input)?;
    let filter = a.input.display_filter()?;
    let opts = a.input.decode_options();
    if let Some(captures) = a.input.dataset()? {
        return decode_dataset(&a, format, &captures, &field_ids, filter.as_ref(), &opts, err);
    }
    let mut src = a.input.open()?;
    let (mut save, mut table) = open_writes(&a, format, &field_ids)?;
    if format == Format::Fields && fopts.header {
        write_header(&mut out, &a.fields, &fopts.separator)?;
    }
    let mut stats = Stats::default();
    let render = Render::new(&field_ids, &fopts);
    // -j: the typed outputs, unless the filter itself reads what it kept before.
    let jobs = a.input.jobs();
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
        let job = Job { opts: &opts, fields: &field_ids, plan: a.input.plan(), jobs };
        match table.as_mut() {
            Some(t) => job.parquet(r, filter.as_ref(), t, &mut stats)?,
            None => job.fields(r, filter.as_ref(), &render, &mut out, &mut stats)?,
        }
    } else {
        let mut output = Output {
            format,
            verbose: a.verbose,
            render: &render,
            extract: Extract::new(&field_ids),
            out: &mut out,
            table: table.as_mut(),
            save: save.as_mut(),
            line: Vec::with_capacity(512),
            val: Vec::with_capacity(64),
            text: String::with_capacity(512),
        };
        let limit = a.input.count.unwrap_or(u64::MAX);
        decode_in_order(&mut src, &opts, filter.as_ref(), limit, &mut output, &mut stats)?
    };
    out.flush()?;
    drop(out);
    close_writes(save, table)?;
    stats.warn_if_no_roce(err)?;
    match end {
        None => Ok(Exit::Ok),
        Some(e) => {
            writeln!(err, "roce: error: {e}")?;
            writeln!(err, "roce: {} frames were decoded before the error", stats.frames)?;
            Ok(Exit::BadInput)
        }
    }
}

/// `-T parquet -w DIR` of several captures or a directory: a Hive-partitioned
/// dataset, `DIR/capture=NAME/part-0.parquet`, the captures decoded side by side
/// (`-j` at a time, one thread each), all or nothing (see [`super::dataset`]).
fn decode_dataset(
    a: &DecodeArgs,
    format: Format,
    captures: &[Capture],
    fields: &[Field],
    filter: Option<&Filter>,
    opts: &frame::Options,
    err: &mut dyn Write,
) -> CommandResult {
    let (Format::Parquet, Some(dir)) = (format, a.write.as_deref()) else {
        return Err(Failure::input(anyhow!(
            "several captures, or a directory, are decoded into a dataset: give -T parquet -e FIELD… -w DIR"
        )));
    };
    let ds = Dataset::create(dir, a.force)?;
    let fopts = FieldOpts::parse(&[]).map_err(Failure::input)?;
    let render = Render::new(fields, &fopts);
    let limit = a.input.count.unwrap_or(u64::MAX);
    // A compiled filter keeps scratch state (not `Sync`): each capture takes a copy.
    let filter = std::sync::Mutex::new(filter.cloned());
    let results = dataset::each(captures, a.input.jobs(), |c| {
        let part = ds.part(&c.name)?;
        let mut src = Source::File(dissector::capture::open(&c.path).map_err(Failure::input)?);
        let specs = fields.iter().map(|&f| Spec::of_field(f)).collect();
        let mut table = Table::with_row_groups(&part, specs, a.row_group)
            .with_context(|| format!("writing the partition of {}", c.path.display()))
            .map_err(Failure::setup)?;
        let mut sink = io::sink();
        let mut output = Output {
            format,
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
        let filter = filter.lock().map_err(|_| anyhow!("a decoding thread failed"))?.clone();
        if let Some(e) =
            decode_in_order(&mut src, opts, filter.as_ref(), limit, &mut output, &mut stats)?
        {
            return Err(Failure::input(dataset::capture_error(c, &e)));
        }
        table
            .finish()
            .with_context(|| format!("writing the partition of {}", c.path.display()))
            .map_err(Failure::setup)?;
        Ok(stats)
    });
    let mut total = Stats::default();
    let mut first_failure = None;
    let mut not_started = 0;
    for r in results {
        match r {
            Some(Ok(s)) => total.add(&s),
            Some(Err(f)) => {
                writeln!(err, "roce: error: {f}")?;
                first_failure.get_or_insert(f.exit);
            }
            None => not_started += 1,
        }
    }
    if let Some(exit) = first_failure {
        writeln!(
            err,
            "roce: nothing was written to {} (the dataset is written whole or not at all{})",
            dir.display(),
            if not_started > 0 {
                format!("; {not_started} capture(s) were not read after the error")
            } else {
                String::new()
            }
        )?;
        return Ok(exit);
    }
    ds.commit()?;
    total.warn_if_no_roce(err)?;
    Ok(Exit::Ok)
}

/// `-G WHAT`: what can be printed (`fields`: every -e name with its meaning).
fn list(what: &str, out: &mut impl Write) -> CommandResult {
    match what {
        "fields" => {
            list_fields(out)?;
            out.flush()?;
            Ok(Exit::Ok)
        }
        other => Err(Failure::input(anyhow!("-G {other}: unknown report; try -G fields"))),
    }
}

/// The output format `--json`, `-T` and `-e` ask for, refused where the other
/// options do not fit it (fields without `-e`, `-E` beyond fields, Parquet
/// without `-w`).
fn output_format(a: &DecodeArgs) -> Result<Format, Failure> {
    let format = match (a.json, a.output_format) {
        (true, _) | (_, Some(Format::Json)) => Format::Json,
        (_, Some(f)) => f,
        (false, None) if !a.fields.is_empty() => Format::Fields,
        _ => Format::Text,
    };
    if matches!(format, Format::Fields | Format::Parquet) && a.fields.is_empty() {
        return Err(Failure::input(anyhow!(
            "-T fields and -T parquet need at least one -e FIELD (see `roce decode -G fields`)"
        )));
    }
    if format != Format::Fields && !a.field_opts.is_empty() {
        return Err(Failure::input(anyhow!("-E only applies to -T fields")));
    }
    if format == Format::Parquet && a.write.is_none() {
        return Err(Failure::input(anyhow!(
            "-T parquet writes a file: give it with -w FILE.parquet"
        )));
    }
    Ok(format)
}

/// What `-w` writes, created now: the Parquet file of the `-e` columns with
/// `-T parquet`, else a pcapng file of the frames kept.
fn open_writes(
    a: &DecodeArgs,
    format: Format,
    fields: &[Field],
) -> Result<(Option<RecordFile>, Option<Table>), Failure> {
    Ok(match (&a.write, format) {
        (Some(p), Format::Parquet) => (
            None,
            Some(
                Table::with_row_groups(
                    p,
                    fields.iter().map(|&f| Spec::of_field(f)).collect(),
                    a.row_group,
                )
                .map_err(Failure::setup)?,
            ),
        ),
        (Some(p), _) => (
            Some(
                RecordFile::create(p, concat!("roce ", env!("CARGO_PKG_VERSION")))
                    .map_err(Failure::setup)?,
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
fn close_writes(save: Option<RecordFile>, table: Option<Table>) -> Result<(), Failure> {
    if let Some(s) = save {
        s.commit().context("writing the -w file").map_err(Failure::setup)?;
    }
    if let Some(t) = table {
        t.finish().context("writing the Parquet file").map_err(Failure::setup)?;
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
) -> Result<Option<CaptureError>, Failure> {
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
    fn frame(&mut self, rec: &Record<'_>, ctx: &Ctx<'_>, shown: Shown) -> Result<(), Failure> {
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
                        .map_err(Failure::setup)?;
                }
            }
            Format::Fields => {
                self.line.clear();
                self.render.line(&mut self.line, ctx, shown, &mut self.val, None);
                self.out.write_all(&self.line)?;
            }
        }
        if let Some(s) = self.save.as_mut() {
            s.write(rec).context("writing the -w file").map_err(Failure::setup)?;
        }
        Ok(())
    }
}

/// What a run saw, for the closing notes.
#[derive(Debug, Default, Clone)]
struct Stats {
    frames: u64,
    roce: u64,
}

impl Stats {
    fn count(&mut self, f: &Frame) {
        self.frames += 1;
        self.roce += f.roce.is_some() as u64;
    }

    fn add(&mut self, other: &Stats) {
        self.frames += other.frames;
        self.roce += other.roce;
    }

    /// The most common surprise: an empty capture of traffic between two QPs on one
    /// rxe device, which is looped back inside the driver.
    fn warn_if_no_roce(&self, err: &mut dyn Write) -> io::Result<()> {
        if self.roce == 0 {
            writeln!(
                err,
                "roce: note: no RoCE frames in {} frame(s) (UDP port 4791 or ethertype 0x8915). \
                 Traffic between two QPs on the same rxe device is looped back inside the driver \
                 and never reaches the wire: capture between two hosts, VMs or network namespaces. \
                 Use --roce-port if your RoCEv2 traffic uses another UDP port.",
                self.frames
            )?;
        }
        Ok(())
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
    ) -> Result<Option<CaptureError>, Failure> {
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
    ) -> Result<Option<CaptureError>, Failure> {
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
            table.append(&mut part.body).context("writing the Parquet file").map_err(Failure::setup)
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
