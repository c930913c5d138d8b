//! Typed columns written as Apache Parquet, for captures too big for one tool:
//! `roce decode -T parquet -e …` (the chosen fields of every frame shown) and
//! `roce flows --parquet DIR` (the per-QP flow table and its events). DuckDB,
//! Polars, Spark or pyarrow then query them.
//!
//! Each column has the type its values have — integers as unsigned 64-bit
//! integers, flags as booleans, addresses and text as strings, bytes as binary,
//! `frame.time_epoch` as a UTC timestamp in nanoseconds, relative times as seconds
//! (a double, as tshark prints them) — and is null where the frame has no such
//! field. A field that can occur more than once in a frame (`ip.addr`,
//! `udp.port`, the VLAN tags, …) is a list column. Rows are written in row groups
//! of [`ROW_GROUP`], so memory stays bounded whatever the capture's size, into
//! a temporary beside `FILE` ([`AtomicFile`]), renamed to `FILE` once complete: a file that is there is whole.
//!
//! Owns: the column model and the Parquet writing. Imports: the dissector's field
//! registry (names, types, values), its flow report (for `roce flows --parquet`),
//! its [`AtomicFile`], and the `parquet` crate.
use dissector::capture::AtomicFile;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use dissector::ctx::{Ctx, Shown};
use dissector::fields::{self, Field, Ty, Value};
use dissector::flow::FlowReport;
use parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use parquet::column::writer::{
    get_column_writer, get_typed_column_writer_mut, ColumnCloseResult, ColumnWriter,
};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType, DoubleType, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, ColumnPath, Type};
use rayon::iter::{IntoParallelIterator, ParallelIterator};

/// Rows per row group: a reader's unit of work; buffers of a few tens of MB for
/// a dozen fields.
pub(crate) const ROW_GROUP: usize = 1 << 18;

/// What one column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Unsigned 64-bit integers.
    U64,
    Bool,
    /// UTF-8 text (addresses too).
    Str,
    /// Raw bytes.
    Bytes,
    /// Nanoseconds since the epoch, UTC.
    Timestamp,
    /// Seconds, as a double.
    Seconds,
}

/// A column: its name, kind, and whether a row may hold several values (a list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub name: String,
    pub kind: Kind,
    pub list: bool,
}

impl Spec {
    pub(crate) fn new(name: &str, kind: Kind) -> Spec {
        Spec { name: name.to_string(), kind, list: false }
    }

    /// The column for a `-e` field.
    pub(crate) fn of_field(f: Field) -> Spec {
        let kind = match (f, f.ty()) {
            (Field::FrameTimeEpoch, _) => Kind::Timestamp,
            (_, Ty::Time) => Kind::Seconds,
            (_, Ty::Uint) => Kind::U64,
            (_, Ty::Bool) => Kind::Bool,
            (_, Ty::Bytes) => Kind::Bytes,
            (_, Ty::Ipv4 | Ty::Ipv6 | Ty::Mac | Ty::Str) => Kind::Str,
        };
        Spec { name: f.name().to_string(), kind, list: f.multi() }
    }

    fn schema(&self) -> Result<Type> {
        let (physical, logical) = match self.kind {
            Kind::U64 => (Physical::INT64, Some(LogicalType::integer(64, false))),
            Kind::Bool => (Physical::BOOLEAN, None),
            Kind::Str => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
            Kind::Bytes => (Physical::BYTE_ARRAY, None),
            Kind::Timestamp => {
                (Physical::INT64, Some(LogicalType::timestamp(true, TimeUnit::NANOS)))
            }
            Kind::Seconds => (Physical::DOUBLE, None),
        };
        if !self.list {
            return Ok(Type::primitive_type_builder(&self.name, physical)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(logical)
                .build()?);
        }
        // The standard three-level list: optional group (LIST) { repeated group list { required element } }.
        let element = Type::primitive_type_builder("element", physical)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(logical)
            .build()?;
        let list = Type::group_type_builder("list")
            .with_repetition(Repetition::REPEATED)
            .with_fields(vec![Arc::new(element)])
            .build()?;
        Ok(Type::group_type_builder(&self.name)
            .with_repetition(Repetition::OPTIONAL)
            .with_logical_type(Some(LogicalType::List))
            .with_fields(vec![Arc::new(list)])
            .build()?)
    }
}

/// One value to put in a column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Cell<'a> {
    U64(u64),
    Bool(bool),
    Str(&'a str),
    Bytes(&'a [u8]),
    /// Nanoseconds: since the epoch for [`Kind::Timestamp`], a span for
    /// [`Kind::Seconds`].
    Nanos(i64),
}

/// A column's values for the current row group, with Parquet's levels.
#[derive(Debug)]
struct Buffer {
    spec: Spec,
    ints: Vec<i64>,
    doubles: Vec<f64>,
    bools: Vec<bool>,
    bytes: Vec<ByteArray>,
    /// Text and byte values not yet in `bytes`, end to end, and where each ends:
    /// [`Buffer::seal`] makes them `ByteArray`s sharing one allocation.
    text: Vec<u8>,
    ends: Vec<usize>,
    defs: Vec<i16>,
    reps: Vec<i16>,
    /// Values given for the row being built.
    in_row: usize,
}

impl Buffer {
    fn new(spec: Spec) -> Buffer {
        Buffer {
            spec,
            ints: Vec::new(),
            doubles: Vec::new(),
            bools: Vec::new(),
            bytes: Vec::new(),
            text: Vec::new(),
            ends: Vec::new(),
            defs: Vec::new(),
            reps: Vec::new(),
            in_row: 0,
        }
    }

    /// Whether the row being built takes another value: a scalar column keeps a
    /// row's first value (the fields that can repeat are lists).
    #[inline(always)]
    fn takes_more(&self) -> bool {
        self.in_row == 0 || self.spec.list
    }

    #[inline(always)]
    fn push(&mut self, c: Cell<'_>) {
        if !self.takes_more() {
            return;
        }
        match (self.spec.kind, c) {
            (Kind::U64, Cell::U64(v)) => self.ints.push(v as i64),
            (Kind::Bool, Cell::Bool(b)) => self.bools.push(b),
            (Kind::Timestamp, Cell::Nanos(n)) => self.ints.push(n),
            (Kind::Seconds, Cell::Nanos(n)) => self.doubles.push(seconds(n)),
            (Kind::Str, Cell::Str(s)) => self.push_text(s.as_bytes()),
            (Kind::Bytes | Kind::Str, Cell::Bytes(b)) => self.push_text(b),
            // A value of another kind than the column's: not the field's own type,
            // a bug of the caller. Left null rather than written wrong.
            _ => return,
        }
        self.pushed();
    }

    /// Counts the value just added to the row being built.
    #[inline(always)]
    fn pushed(&mut self) {
        if self.spec.list {
            self.defs.push(2);
            self.reps.push(if self.in_row == 0 { 0 } else { 1 });
        } else {
            self.defs.push(1);
        }
        self.in_row += 1;
    }

    fn push_text(&mut self, b: &[u8]) {
        self.text.extend_from_slice(b);
        self.ends.push(self.text.len());
    }

    /// Moves the text values into `bytes`: one allocation for them all, rather than
    /// one each (and none to free one by one on another thread).
    fn seal(&mut self) {
        if self.ends.is_empty() {
            return;
        }
        let all = bytes::Bytes::from(std::mem::take(&mut self.text));
        let mut start = 0;
        for end in self.ends.drain(..) {
            self.bytes.push(ByteArray::from(all.slice(start..end)));
            start = end;
        }
    }

    /// Ends the row: a row with no value is null.
    fn end_row(&mut self) {
        if self.in_row == 0 {
            self.defs.push(0);
            if self.spec.list {
                self.reps.push(0);
            }
        }
        self.in_row = 0;
    }

    /// Moves the first `rows` complete rows of `from` to the end of this buffer (of
    /// the same column).
    fn take_rows(&mut self, from: &mut Buffer, rows: usize) {
        self.seal();
        from.seal();
        // Where row `rows` starts among the levels, and how many values come before.
        let levels = if self.spec.list {
            from.reps
                .iter()
                .enumerate()
                .filter(|&(_, &r)| r == 0)
                .nth(rows)
                .map_or(from.reps.len(), |(i, _)| i)
        } else {
            rows.min(from.defs.len())
        };
        let full = if self.spec.list { 2 } else { 1 };
        let values = from.defs[..levels].iter().filter(|&&d| d == full).count();
        match self.spec.kind {
            Kind::U64 | Kind::Timestamp => self.ints.extend(from.ints.drain(..values)),
            Kind::Seconds => self.doubles.extend(from.doubles.drain(..values)),
            Kind::Bool => self.bools.extend(from.bools.drain(..values)),
            Kind::Str | Kind::Bytes => self.bytes.extend(from.bytes.drain(..values)),
        }
        self.defs.extend(from.defs.drain(..levels));
        if self.spec.list {
            self.reps.extend(from.reps.drain(..levels));
        }
    }

    /// The column's values as Parquet pages in memory, and what the file's
    /// metadata needs to know of them (see [`Table::flush`]).
    fn encode(
        &self,
        descr: ColumnDescPtr,
        props: WriterPropertiesPtr,
    ) -> Result<(bytes::Bytes, ColumnCloseResult)> {
        fn write<T: DataType>(
            col: &mut ColumnWriter<'_>,
            values: &[T::T],
            defs: &[i16],
            reps: Option<&[i16]>,
        ) -> Result<()> {
            get_typed_column_writer_mut::<T>(col).write_batch(values, Some(defs), reps)?;
            Ok(())
        }
        let mut sink = TrackedWrite::new(Vec::new());
        let close = {
            let mut col =
                get_column_writer(descr, props, Box::new(SerializedPageWriter::new(&mut sink)));
            let reps = self.spec.list.then_some(&self.reps[..]);
            match self.spec.kind {
                Kind::U64 | Kind::Timestamp => {
                    write::<Int64Type>(&mut col, &self.ints, &self.defs, reps)?
                }
                Kind::Seconds => write::<DoubleType>(&mut col, &self.doubles, &self.defs, reps)?,
                Kind::Bool => write::<BoolType>(&mut col, &self.bools, &self.defs, reps)?,
                Kind::Str | Kind::Bytes => {
                    write::<ByteArrayType>(&mut col, &self.bytes, &self.defs, reps)?
                }
            }
            col.close()?
        };
        Ok((bytes::Bytes::from(sink.into_inner()?), close))
    }

    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.ints.clear();
        self.doubles.clear();
        self.bools.clear();
        self.bytes.clear();
        self.defs.clear();
        self.reps.clear();
    }
}

/// `f(0)`, …, `f(n - 1)` in index order, worked out on `pool` when there is one;
/// `None` for an index whose work panicked (a panic of the parquet crate is
/// reported as an error, not a crash).
fn in_order<T: Send>(
    pool: Option<&rayon::ThreadPool>,
    n: usize,
    f: impl Fn(usize) -> T + Sync,
) -> Vec<Option<T>> {
    let one = |i: usize| panic::catch_unwind(AssertUnwindSafe(|| f(i))).ok();
    match pool {
        Some(pool) => pool.install(|| (0..n).into_par_iter().map(one).collect()),
        None => (0..n).map(one).collect(),
    }
}

/// A double of seconds from nanoseconds, as a [`Kind::Seconds`] column holds it.
fn seconds(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// Rows being built, column by column: a table's current row group, or a batch
/// made on another thread and appended to a table later ([`Table::append`]).
#[derive(Debug, Default)]
pub(crate) struct Rows {
    cols: Vec<Buffer>,
    rows: usize,
}

impl Rows {
    /// No rows, in the columns of `specs`.
    pub(crate) fn new(specs: &[Spec]) -> Rows {
        Rows { cols: specs.iter().cloned().map(Buffer::new).collect(), rows: 0 }
    }

    /// Whether the columns are those of [`Rows::new`] (a `Default` has none).
    pub(crate) fn has_columns(&self) -> bool {
        !self.cols.is_empty()
    }

    /// Appends a value to column `i` of the row being built.
    pub(crate) fn push(&mut self, i: usize, c: Cell<'_>) {
        if let Some(b) = self.cols.get_mut(i) {
            b.push(c);
        }
    }

    /// Ends the row being built.
    pub(crate) fn end_row(&mut self) {
        for c in &mut self.cols {
            c.end_row();
        }
        self.rows += 1;
    }

    /// Replaces the value of the first row in [`Kind::Seconds`] column `i` (a row
    /// that has one).
    pub(crate) fn set_first_seconds(&mut self, i: usize, ns: i64) {
        if let Some(v) = self
            .cols
            .get_mut(i)
            .filter(|b| b.spec.kind == Kind::Seconds && b.defs.first() == Some(&1))
            .and_then(|b| b.doubles.first_mut())
        {
            *v = seconds(ns);
        }
    }

    /// Moves the first `n` rows of `from` (the same columns) to the end of these.
    fn take_rows(&mut self, from: &mut Rows, n: usize) {
        let n = n.min(from.rows);
        for (to, col) in self.cols.iter_mut().zip(&mut from.cols) {
            to.take_rows(col, n);
        }
        self.rows += n;
        from.rows -= n;
    }

    /// Makes the text values of every column ready to be written or moved.
    pub(crate) fn seal(&mut self) {
        for c in &mut self.cols {
            c.seal();
        }
    }

    /// Drops every row, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        for c in &mut self.cols {
            c.clear();
            c.in_row = 0;
        }
        self.rows = 0;
    }
}

/// A Parquet file being written, a row at a time.
pub(crate) struct Table {
    writer: Option<SerializedFileWriter<AtomicFile>>,
    props: WriterPropertiesPtr,
    /// The row group being built.
    group: Rows,
    rows_per_group: usize,
    /// The threads that encode a row group's columns (see [`Table::encode_with`]);
    /// none: the caller's.
    pool: Option<rayon::ThreadPool>,
}

impl Table {
    /// Starts `path` (written as `path.tmp` until [`Table::finish`]), with row
    /// groups of [`ROW_GROUP`] rows.
    pub(crate) fn create(path: &Path, specs: Vec<Spec>) -> Result<Table> {
        Table::with_row_groups(path, specs, ROW_GROUP)
    }

    /// [`Table::create`] with row groups of `rows` rows (at least 1).
    pub(crate) fn with_row_groups(path: &Path, specs: Vec<Spec>, rows: usize) -> Result<Table> {
        let fields = specs.iter().map(|s| s.schema().map(Arc::new)).collect::<Result<Vec<_>>>()?;
        let schema = Type::group_type_builder("roce").with_fields(fields).build()?;
        // Dictionaries pay off for text (opcode names, addresses, the Info column);
        // numbers are left plain, which is faster to write and compresses as well.
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_created_by(concat!("roce ", env!("CARGO_PKG_VERSION")).into());
        for sp in specs.iter().filter(|sp| !matches!(sp.kind, Kind::Str | Kind::Bytes)) {
            let path = if sp.list {
                vec![sp.name.clone(), "list".into(), "element".into()]
            } else {
                vec![sp.name.clone()]
            };
            props = props.set_column_dictionary_enabled(ColumnPath::new(path), false);
        }
        let props = Arc::new(props.build());
        let file = AtomicFile::create(path)?;
        let writer = SerializedFileWriter::new(file, Arc::new(schema), props.clone())
            .context("starting the Parquet file")?;
        Ok(Table {
            writer: Some(writer),
            props,
            group: Rows::new(&specs),
            rows_per_group: rows.max(1),
            pool: None,
        })
    }

    /// Encodes each row group's columns on `threads` threads (1: on the caller's).
    /// The file is the same whatever the number, so when the threads cannot be
    /// started the caller's does the work.
    pub(crate) fn encode_with(&mut self, threads: usize) {
        self.pool = (threads > 1)
            .then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("parquet-{i}"))
                    .build()
                    .ok()
            })
            .flatten();
    }

    /// Appends a value to column `i` of the row being built.
    pub(crate) fn push(&mut self, i: usize, c: Cell<'_>) {
        self.group.push(i, c);
    }

    /// Ends the row being built; writes a row group when one is full.
    pub(crate) fn end_row(&mut self) -> Result<()> {
        self.group.end_row();
        self.flush_if_full()
    }

    /// Writes the row group once it is full.
    fn flush_if_full(&mut self) -> Result<()> {
        if self.group.rows >= self.rows_per_group {
            self.flush()?;
        }
        Ok(())
    }

    /// Appends every row of `rows` (made with the table's columns), which are left
    /// empty; row groups are cut where one row at a time would cut them.
    pub(crate) fn append(&mut self, rows: &mut Rows) -> Result<()> {
        while rows.rows > 0 {
            let room = self.rows_per_group - self.group.rows;
            self.group.take_rows(rows, room);
            self.flush_if_full()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.group.rows == 0 {
            return Ok(());
        }
        let Some(w) = self.writer.as_mut() else { anyhow::bail!("the Parquet file was closed") };
        self.group.seal();
        // Each column is encoded into pages in memory, the columns side by side on
        // `threads` threads (encoding and compressing is most of the work of
        // writing Parquet), then appended to the file in column order.
        let cols = &self.group.cols;
        let schema = w.schema_descr();
        if schema.num_columns() != cols.len() {
            anyhow::bail!("{} Parquet columns for {} fields", schema.num_columns(), cols.len());
        }
        let descrs: Vec<ColumnDescPtr> = (0..cols.len()).map(|i| schema.column(i)).collect();
        let encoded = in_order(self.pool.as_ref(), cols.len(), |i| {
            cols[i].encode(descrs[i].clone(), self.props.clone())
        });
        let mut rg = w.next_row_group()?;
        for e in encoded {
            let (pages, close) =
                e.unwrap_or_else(|| Err(anyhow::anyhow!("a Parquet encoding thread failed")))?;
            rg.append_column(&pages, close)?;
        }
        rg.close()?;
        for b in &mut self.group.cols {
            b.clear();
        }
        self.group.rows = 0;
        Ok(())
    }

    /// Writes what is left and the footer, then renames the file into place.
    /// A table dropped unfinished leaves no file behind (its [`AtomicFile`] goes).
    pub(crate) fn finish(mut self) -> Result<()> {
        self.flush()?;
        if let Some(w) = self.writer.take() {
            w.into_inner().context("finishing the Parquet file")?.commit()?;
        }
        Ok(())
    }
}

/// A column takes a field's values as they come.
impl fields::Sink for Buffer {
    #[inline(always)]
    fn value(&mut self, v: Value<'_>) {
        match v {
            Value::Dec(n) | Value::Hex(n, _) => self.push(Cell::U64(n)),
            Value::Bool(b) => self.push(Cell::Bool(b)),
            Value::Secs(ns) => self.push(Cell::Nanos(ns)),
            Value::Bytes(b) => self.push(Cell::Bytes(b)),
            Value::Str(s) => self.push(Cell::Str(s)),
            // Addresses and made text: as `-T fields` prints them, written
            // straight into the column's text.
            Value::Ipv4(_) | Value::Ipv6(_) | Value::Mac(_) | Value::Text(_) => {
                if !self.takes_more() || !matches!(self.spec.kind, Kind::Str | Kind::Bytes) {
                    return;
                }
                v.write(&mut self.text);
                self.ends.push(self.text.len());
                self.pushed();
            }
        }
    }
}

/// How the values of a list of `-e` fields become a row: one visitor per field,
/// made for it (see [`Field::visitor`]).
pub(crate) struct Extract {
    visitors: Vec<fn(&Ctx<'_>, Shown, &mut Buffer)>,
}

impl Extract {
    /// The row of `fields`: column `i` is field `i`.
    pub(crate) fn new(fields: &[Field]) -> Extract {
        Extract { visitors: fields.iter().map(|f| f.visitor()).collect() }
    }

    /// The values of the frame in `c`, as a row of `rows` (made with the specs of
    /// the same fields).
    pub(crate) fn row(&self, rows: &mut Rows, c: &Ctx<'_>, shown: Shown) {
        for (visit, col) in self.visitors.iter().zip(&mut rows.cols) {
            visit(c, shown, col);
        }
        rows.end_row();
    }

    /// [`Extract::row`] into `t`, writing a row group when one is full.
    pub(crate) fn row_of(&self, t: &mut Table, c: &Ctx<'_>, shown: Shown) -> Result<()> {
        self.row(&mut t.group, c, shown);
        t.flush_if_full()
    }
}

type FlowCount = (&'static str, fn(&FlowReport) -> Option<u64>);

/// The flow table's integer columns: each name beside how a flow gives its value
/// (`None`: null).
const FLOW_COUNTS: &[FlowCount] = &[
    ("id", |f| Some(f.id as u64)),
    ("dest_qp", |f| Some(f.dest_qp.into())),
    ("src_qp", |f| f.src_qp.map(u64::from)),
    ("paired_with", |f| f.paired_with.map(|p| p as u64)),
    ("first_frame", |f| Some(f.first_frame)),
    ("packets", |f| Some(f.counters.packets)),
    ("bytes", |f| Some(f.counters.bytes)),
    ("payload_bytes", |f| Some(f.counters.payload_bytes)),
    ("requests", |f| Some(f.counters.requests)),
    ("psn_first", |f| f.counters.psn_first.map(u64::from)),
    ("psn_last", |f| f.counters.psn_last.map(u64::from)),
    ("gaps", |f| Some(f.counters.gaps)),
    ("missing_psns", |f| Some(f.counters.missing_psns)),
    ("out_of_order", |f| Some(f.counters.out_of_order)),
    ("retransmissions", |f| Some(f.counters.retransmissions)),
    ("send_messages", |f| Some(f.counters.sends.messages)),
    ("send_bytes", |f| Some(f.counters.sends.bytes)),
    ("write_messages", |f| Some(f.counters.writes.messages)),
    ("write_bytes", |f| Some(f.counters.writes.bytes)),
    ("read_messages", |f| Some(f.counters.reads.messages)),
    ("read_bytes", |f| Some(f.counters.reads.bytes)),
    ("atomic_messages", |f| Some(f.counters.atomics.messages)),
    ("largest_message", |f| Some(f.counters.largest_message)),
    ("broken_messages", |f| Some(f.counters.broken_messages)),
    ("ack_req", |f| Some(f.counters.ack_req)),
    ("acks", |f| Some(f.counters.acks)),
    ("coalesced_acks", |f| Some(f.counters.coalesced_acks)),
    ("acked_packets", |f| Some(f.counters.acked_packets)),
    ("naks", |f| Some(f.counters.naks)),
    ("rnr_naks", |f| Some(f.counters.rnr_naks)),
    ("ack_regressions", |f| Some(f.counters.ack_regressions)),
    ("ack_latency_samples", |f| f.ack_latency.map(|l| l.samples)),
    ("ack_latency_min_ns", |f| f.ack_latency.map(|l| l.min_ns)),
    ("ack_latency_median_ns", |f| f.ack_latency.map(|l| l.median_ns)),
    ("ack_latency_max_ns", |f| f.ack_latency.map(|l| l.max_ns)),
    ("read_latency_samples", |f| f.read_latency.map(|l| l.samples)),
    ("read_latency_min_ns", |f| f.read_latency.map(|l| l.min_ns)),
    ("read_latency_median_ns", |f| f.read_latency.map(|l| l.median_ns)),
    ("read_latency_max_ns", |f| f.read_latency.map(|l| l.max_ns)),
    ("ecn_ce", |f| Some(f.counters.ecn_ce)),
    ("fecn", |f| Some(f.counters.fecn)),
    ("becn", |f| Some(f.counters.becn)),
    ("cnps", |f| Some(f.counters.cnps)),
    ("icrc_checked", |f| Some(f.counters.icrc_checked)),
    ("icrc_bad", |f| Some(f.counters.icrc_bad)),
];

/// `roce flows --parquet DIR`: `DIR/flows.parquet`, one row per flow (one direction
/// of traffic to one QP) with the counters `roce flows` prints, and
/// `DIR/events.parquet`, one row per event the analysis kept (NAKs, RNR NAKs, PSN
/// gaps, ghost ACKs; the first [`dissector::flow::MAX_EVENTS`] of each kind per
/// flow), tied to its flow by `flow`.
pub(crate) fn write_flows(dir: &Path, r: &dissector::flow::Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_flow_tables(&dir.join("flows.parquet"), &dir.join("events.parquet"), r)
}

/// The two tables of [`write_flows`], at the paths given: the flow table at `flows`,
/// its events at `events` (the partitions of a dataset of several captures).
pub(crate) fn write_flow_tables(
    flows: &Path,
    events: &Path,
    r: &dissector::flow::Report,
) -> Result<()> {
    let mut specs = vec![
        Spec::new("transport", Kind::Str),
        Spec::new("src", Kind::Str),
        Spec::new("dst", Kind::Str),
        Spec::new("paired_by", Kind::Str),
        Spec::new("duration", Kind::Seconds),
    ];
    specs.extend(FLOW_COUNTS.iter().map(|(n, _)| Spec::new(n, Kind::U64)));
    let mut t = Table::create(flows, specs)?;
    for f in &r.flows {
        t.push(0, Cell::Str(f.transport));
        t.push(1, Cell::Str(&f.src));
        t.push(2, Cell::Str(&f.dst));
        if let Some(by) = f.paired_by {
            t.push(3, Cell::Str(by));
        }
        t.push(4, Cell::Nanos(f.duration_ns as i64));
        for (i, (_, value)) in FLOW_COUNTS.iter().enumerate() {
            if let Some(v) = value(f) {
                t.push(5 + i, Cell::U64(v));
            }
        }
        t.end_row()?;
    }
    t.finish()?;

    let specs = vec![
        Spec::new("flow", Kind::U64),
        Spec::new("frame", Kind::U64),
        Spec::new("kind", Kind::Str),
        Spec::new("psn", Kind::U64),
        Spec::new("syndrome", Kind::U64),
        Spec::new("detail", Kind::Str),
        Spec::new("request_frame", Kind::U64),
        Spec::new("wc_status", Kind::Str),
    ];
    let mut t = Table::create(events, specs)?;
    // flow, frame, kind, PSN, syndrome, detail, request frame, WC status.
    type Event<'a> = (u64, u64, &'a str, u32, Option<u8>, String, Option<u64>, Option<&'a str>);
    let mut events: Vec<Event> = Vec::new();
    for f in &r.flows {
        let id = f.id as u64;
        for n in &f.nak_events {
            let kind = if dissector::wire::Syndrome(n.syndrome_value).kind().nak()
                == Some(dissector::wire::NakKind::Rnr)
            {
                "rnr_nak"
            } else {
                "nak"
            };
            events.push((
                id,
                n.frame,
                kind,
                n.psn,
                Some(n.syndrome_value),
                n.syndrome.clone(),
                n.request_frame,
                n.wc_status,
            ));
        }
        for g in &f.gap_events {
            events.push((
                id,
                g.frame,
                "gap",
                g.got,
                None,
                format!("expected PSN {}, got {} ({} missing)", g.expected, g.got, g.missing),
                None,
                None,
            ));
        }
        for g in &f.ghost_acks {
            events.push((
                id,
                g.frame,
                "ghost_ack",
                g.psn,
                None,
                format!("ACK for PSN {}, never sent (next PSN to send: {})", g.psn, g.next_psn),
                None,
                None,
            ));
        }
    }
    events.sort_by_key(|e| (e.1, e.0));
    for (flow, frame, kind, psn, syn, detail, req, wc) in events {
        t.push(0, Cell::U64(flow));
        t.push(1, Cell::U64(frame));
        t.push(2, Cell::Str(kind));
        t.push(3, Cell::U64(psn.into()));
        if let Some(s) = syn {
            t.push(4, Cell::U64(s.into()));
        }
        t.push(5, Cell::Str(&detail));
        if let Some(r) = req {
            t.push(6, Cell::U64(r));
        }
        if let Some(w) = wc {
            t.push(7, Cell::Str(w));
        }
        t.end_row()?;
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_shared_out_comes_back_in_order_and_a_panic_is_a_gap() {
        for threads in [1, 2, 5] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().ok();
            let got = in_order(pool.as_ref(), 40, |i| i * i);
            assert_eq!(got, (0..40).map(|i| Some(i * i)).collect::<Vec<_>>(), "{threads} threads");
        }
        for pool in [None, rayon::ThreadPoolBuilder::new().num_threads(3).build().ok()] {
            let got = in_order(pool.as_ref(), 6, |i| {
                assert!(i != 4, "encoding column 4 failed");
                i
            });
            assert_eq!(got[4], None);
            let done = got.iter().flatten().count();
            assert_eq!(done, 5, "the other columns are still encoded: {got:?}");
        }
    }
}
