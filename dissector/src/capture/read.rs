//! The streaming reader for pcap and pcapng.
//!
//! The reader owns one large buffer (1 MiB unless told otherwise), reads the file in
//! chunks that size, and hands out records as slices into it: no allocation and no
//! copy per packet once the buffer is warm, and memory that does not grow with the
//! file. A record may only be larger than the buffer if it is a pcapng block up to
//! [`MAX_BLOCK_LEN`]; the buffer then grows to fit it.
//!
//! Owns: the pcap and pcapng readers and [`open`]. Imports: the record, direction and
//! source trait (its parent), the capture error, the link type.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::error::{CaptureError, ErrorKind};
use super::{Direction, PacketSource, Record};
use crate::LinkType;

/// Default size of the read buffer: small enough that what the kernel copies in is
/// still in the L2 cache (512 KiB per core here) when it is decoded.
pub const DEFAULT_BUFFER: usize = 1 << 17;
/// Largest captured length a pcap record may claim (Wireshark's limit too).
pub const MAX_PCAP_CAPLEN: u32 = 262_144;
/// Largest pcapng block accepted.
pub const MAX_BLOCK_LEN: u32 = 16 << 20;
/// Most interfaces one file may declare (over all sections).
pub const MAX_INTERFACES: usize = 65_536;

const SHB_TYPE: u32 = 0x0A0D_0D0A;
const IDB_TYPE: u32 = 1;
const PB_TYPE: u32 = 2;
const SPB_TYPE: u32 = 3;
const EPB_TYPE: u32 = 6;
const BOM: u32 = 0x1A2B_3C4D;
const BOM_SWAPPED: u32 = 0x4D3C_2B1A;

/// The kind of file being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap: timestamp resolution, byte order, the one link type and snap length.
    Pcap { nanos: bool, big_endian: bool, link: LinkType, snaplen: u32 },
    /// pcapng: link types and resolutions are per interface, see [`Reader::interfaces`].
    Pcapng,
}

/// A capture interface: a pcapng Interface Description Block, or the one implied by a
/// pcap file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub link: LinkType,
    /// 0 = no limit.
    pub snaplen: u32,
    /// `if_name`.
    pub name: Option<String>,
    /// `if_description`.
    pub description: Option<String>,
    /// `if_tsresol` as written: high bit clear → 10^-n s, set → 2^-(n & 0x7f) s.
    /// 6 (µs) by default; 9 for nanosecond pcap.
    pub tsresol: u8,
    /// `if_tsoffset`: seconds added to every timestamp.
    pub tsoffset: i64,
    /// Which section (0-based SHB count) declared it.
    pub section: u32,
}

/// How to turn raw timestamp units into nanoseconds.
#[derive(Debug, Clone, Copy)]
enum TsScale {
    Mul(u64),
    Div(u64),
    Pow2(u32),
    Zero,
}

impl TsScale {
    fn from_tsresol(r: u8) -> TsScale {
        if r & 0x80 == 0 {
            let e = u32::from(r);
            if e <= 9 {
                TsScale::Mul(10u64.pow(9 - e))
            } else {
                match 10u64.checked_pow(e - 9) {
                    Some(d) => TsScale::Div(d),
                    None => TsScale::Zero,
                }
            }
        } else {
            TsScale::Pow2(u32::from(r & 0x7f))
        }
    }

    #[inline]
    fn to_ns(self, ts: u64) -> u64 {
        match self {
            TsScale::Mul(1) => ts,
            TsScale::Mul(m) => ts.saturating_mul(m),
            TsScale::Div(d) => ts / d,
            TsScale::Pow2(s) => {
                let ns = (u128::from(ts) * 1_000_000_000) >> s;
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
            TsScale::Zero => 0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct IfTime {
    scale: TsScale,
    /// Nanoseconds to add (from `if_tsoffset`).
    offset_ns: i128,
}

impl IfTime {
    #[inline]
    fn to_ns(self, ts: u64) -> u64 {
        let ns = self.scale.to_ns(ts);
        if self.offset_ns == 0 {
            return ns;
        }
        let v = i128::from(ns) + self.offset_ns;
        u64::try_from(v.max(0)).unwrap_or(u64::MAX)
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Pcap {
        be: bool,
        nanos: bool,
        link: LinkType,
        snaplen: u32,
    },
    Pcapng {
        be: bool,
        section_base: usize,
        section: u32,
    },
    /// An error was returned; no more records.
    Done,
}

/// Where a record's pieces are in the buffer, gathered before the record is lent out.
#[derive(Debug, Clone, Copy)]
struct Meta {
    ts_ns: u64,
    link: LinkType,
    interface: u32,
    orig_len: u32,
    data: (usize, usize),
    file_offset: u64,
    direction: Option<Direction>,
    comment: Option<(usize, usize)>,
}

#[inline]
fn rd16(b: &[u8], at: usize, be: bool) -> u16 {
    let v = [b[at], b[at + 1]];
    if be {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

#[inline]
fn rd32(b: &[u8], at: usize, be: bool) -> u32 {
    let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if be {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

fn rd64(b: &[u8], at: usize, be: bool) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    if be {
        u64::from_be_bytes(v)
    } else {
        u64::from_le_bytes(v)
    }
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Iterates over the options in `opts` (a block's option area), calling `f(code,
/// value_start, value_end)` with positions relative to `opts`. Stops at `opt_endofopt`
/// or when an option would run past the area (options are advisory: a bad one is
/// dropped, not fatal).
fn for_each_option(opts: &[u8], be: bool, mut f: impl FnMut(u16, usize, usize)) {
    let mut at = 0;
    while at + 4 <= opts.len() {
        let code = rd16(opts, at, be);
        let len = usize::from(rd16(opts, at + 2, be));
        if code == 0 {
            return;
        }
        let start = at + 4;
        let end = start + len;
        if end > opts.len() {
            return;
        }
        f(code, start, end);
        at = start + pad4(len);
    }
}

/// Longest interface name or description kept, so that a hostile file with many
/// IDBs cannot make the reader hold gigabytes of strings.
const MAX_IF_STRING: usize = 256;

fn option_string(b: &[u8]) -> String {
    let mut s = str_prefix_lossy(b);
    if s.len() > MAX_IF_STRING {
        let mut end = MAX_IF_STRING;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

fn str_prefix_lossy(b: &[u8]) -> String {
    let b = match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    };
    String::from_utf8_lossy(b).into_owned()
}

/// The longest valid UTF-8 prefix of `b`, without trailing NULs.
fn str_prefix(b: &[u8]) -> &str {
    let b = match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    };
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
    }
}

fn direction_from_flags(flags: u32) -> Option<Direction> {
    match flags & 3 {
        1 => Some(Direction::Inbound),
        2 => Some(Direction::Outbound),
        _ => None,
    }
}

/// A streaming pcap/pcapng reader. See the module documentation.
///
/// After any error, [`next_packet`](Self::next_packet) returns `Ok(None)`.
#[derive(Debug)]
pub struct Reader<R: Read> {
    r: R,
    buf: Vec<u8>,
    /// First unconsumed byte in `buf`.
    start: usize,
    /// End of valid bytes in `buf`.
    end: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    eof: bool,
    frames: u64,
    origin: Option<String>,
    state: State,
    interfaces: Vec<Interface>,
    times: Vec<IfTime>,
    /// The record just read. Kept here rather than returned: an enum of record and
    /// error travelling through the stack cost a store-forwarding stall per packet.
    meta: Meta,
}

/// Opens a capture file for streaming. Errors name the path.
pub fn open(path: &Path) -> Result<Reader<BufReader<File>>, CaptureError> {
    let origin = path.display().to_string();
    let file = File::open(path).map_err(|e| CaptureError::from(e).with_origin(origin.clone()))?;
    // Our reads are larger than this buffer, so BufReader passes them straight through.
    Reader::with_options(BufReader::with_capacity(8192, file), DEFAULT_BUFFER, Some(origin))
}

impl<R: Read> Reader<R> {
    /// Reads the file header (pcap) or first Section Header Block (pcapng).
    pub fn new(r: R) -> Result<Self, CaptureError> {
        Self::with_options(r, DEFAULT_BUFFER, None)
    }

    /// Like [`new`](Self::new) with a chosen initial buffer size (at least 64 bytes)
    /// and a name for error messages.
    pub fn with_options(r: R, buffer: usize, origin: Option<String>) -> Result<Self, CaptureError> {
        let mut rd = Reader {
            r,
            buf: vec![0; buffer.max(64)],
            start: 0,
            end: 0,
            buf_offset: 0,
            eof: false,
            frames: 0,
            origin,
            state: State::Done,
            interfaces: Vec::new(),
            times: Vec::new(),
            meta: Meta {
                ts_ns: 0,
                link: LinkType::ETHERNET,
                interface: 0,
                orig_len: 0,
                data: (0, 0),
                file_offset: 0,
                direction: None,
                comment: None,
            },
        };
        rd.sniff()?;
        Ok(rd)
    }

    /// Which format is being read.
    pub fn format(&self) -> Format {
        match self.state {
            State::Pcap { be, nanos, link, snaplen } => {
                Format::Pcap { nanos, big_endian: be, link, snaplen }
            }
            _ => Format::Pcapng,
        }
    }

    /// Interfaces declared so far, over all sections, in file order: a record's
    /// `interface` indexes this slice. For pcap, the one interface of the file header.
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// Records returned so far.
    pub fn frames_read(&self) -> u64 {
        self.frames
    }

    /// Bytes of the file consumed so far.
    pub fn position(&self) -> u64 {
        self.pos()
    }

    /// The next record, or `Ok(None)` at the end of the file. The record borrows the
    /// reader's buffer.
    #[inline(always)]
    pub fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        let res = match self.state {
            State::Pcap { be, nanos, link, snaplen } => self.next_pcap(be, nanos, link, snaplen),
            State::Pcapng { .. } => match self.next_pcapng() {
                Ok(Some(m)) => {
                    self.meta = m;
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            },
            State::Done => Ok(false),
        };
        match res {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => {
                self.state = State::Done;
                return Err(match &self.origin {
                    Some(o) => e.with_origin(o.clone()),
                    None => e,
                });
            }
        }
        let meta = &self.meta;
        self.frames += 1;
        Ok(Some(Record {
            number: self.frames,
            ts_ns: meta.ts_ns,
            link: meta.link,
            interface: meta.interface,
            orig_len: meta.orig_len,
            data: &self.buf[meta.data.0..meta.data.1],
            file_offset: meta.file_offset,
            direction: meta.direction,
            comment: meta.comment.map(|(a, b)| str_prefix(&self.buf[a..b])),
        }))
    }

    #[inline]
    fn pos(&self) -> u64 {
        self.buf_offset + self.start as u64
    }

    #[inline]
    fn avail(&self) -> usize {
        self.end - self.start
    }

    /// Makes at least `need` unconsumed bytes available in `buf[start..end]`, reading
    /// more (and compacting or growing the buffer) if needed. `Ok(false)` if the file
    /// ends first.
    #[inline]
    fn fill(&mut self, need: usize) -> Result<bool, CaptureError> {
        if self.avail() >= need {
            return Ok(true);
        }
        self.refill(need)
    }

    #[cold]
    fn refill(&mut self, need: usize) -> Result<bool, CaptureError> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.buf_offset += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
        if need > self.buf.len() {
            // Only pcapng blocks (≤ MAX_BLOCK_LEN, checked by callers) get here.
            let new_len =
                need.max(self.buf.len().saturating_mul(2)).min(MAX_BLOCK_LEN as usize).max(need);
            self.buf.resize(new_len, 0);
        }
        while self.end < need && !self.eof {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end = (self.end + n).min(self.buf.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CaptureError::from(e).at(self.pos() + self.avail() as u64)),
            }
        }
        Ok(self.end >= need)
    }

    fn truncated(&self, what: &'static str, needed: u64, at: u64) -> CaptureError {
        CaptureError::new(ErrorKind::Truncated {
            frames: self.frames,
            what,
            needed,
            available: self.avail() as u64,
        })
        .at(at)
    }

    fn corrupt(what: String, at: u64) -> CaptureError {
        CaptureError::new(ErrorKind::Corrupt { what }).at(at)
    }

    fn sniff(&mut self) -> Result<(), CaptureError> {
        let origin = self.origin.clone();
        let with_origin = |e: CaptureError| match &origin {
            Some(o) => e.with_origin(o.clone()),
            None => e,
        };
        self.fill(4).map_err(with_origin)?;
        let n = self.avail().min(4);
        let mut magic = [0u8; 4];
        magic[..n].copy_from_slice(&self.buf[..n]);
        if n == 0 {
            return Err(with_origin(CaptureError::new(ErrorKind::Empty)));
        }
        if n < 4 {
            return Err(with_origin(CaptureError::new(ErrorKind::NotCapture { magic, len: n })));
        }
        let (be, nanos) = match magic {
            [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
            [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
            [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
            [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                self.state = State::Pcapng { be: false, section_base: 0, section: 0 };
                return self.read_shb(true).map_err(with_origin);
            }
            [0xa1, 0xb2, 0xcd, 0x34] | [0x34, 0xcd, 0xb2, 0xa1] => {
                return Err(with_origin(CaptureError::new(ErrorKind::Unsupported {
                    what: "this is a \"modified\" (Kuznetzov) pcap file, which this reader does not handle".into(),
                    hint: "convert it with `editcap -F pcapng IN OUT`",
                })))
            }
            _ => return Err(with_origin(CaptureError::new(ErrorKind::NotCapture { magic, len: 4 }))),
        };
        if !self.fill(24).map_err(with_origin)? {
            let e = self.truncated("the pcap file header", 24, 0);
            return Err(with_origin(e));
        }
        let b = &self.buf[..24];
        let major = rd16(b, 4, be);
        let snaplen = rd32(b, 16, be);
        let link = LinkType(rd32(b, 20, be) as u16);
        if major != 2 {
            return Err(with_origin(
                CaptureError::new(ErrorKind::Unsupported {
                    what: format!("pcap version {major} (only version 2 exists)"),
                    hint: "the file header is damaged, or this is not a pcap file",
                })
                .at(4),
            ));
        }
        self.start = 24;
        self.state = State::Pcap { be, nanos, link, snaplen };
        self.interfaces.push(Interface {
            link,
            snaplen,
            name: None,
            description: None,
            tsresol: if nanos { 9 } else { 6 },
            tsoffset: 0,
            section: 0,
        });
        self.times.push(IfTime { scale: TsScale::Mul(if nanos { 1 } else { 1000 }), offset_ns: 0 });
        Ok(())
    }

    #[inline(always)]
    fn next_pcap(
        &mut self,
        be: bool,
        nanos: bool,
        link: LinkType,
        snaplen: u32,
    ) -> Result<bool, CaptureError> {
        let at = self.pos();
        let frame = self.frames + 1;
        if !self.fill(16)? {
            if self.avail() == 0 {
                return Ok(false);
            }
            return Err(self.truncated("a record header", 16, at).in_frame(frame));
        }
        let s = self.start;
        let b = &self.buf[s..s + 16];
        let sec = u64::from(rd32(b, 0, be));
        let frac = u64::from(rd32(b, 4, be));
        let caplen = rd32(b, 8, be);
        let orig_len = rd32(b, 12, be);
        if caplen > MAX_PCAP_CAPLEN {
            return Err(Self::corrupt(
                format!("record claims {caplen} captured bytes, more than the {MAX_PCAP_CAPLEN} allowed"),
                at,
            )
            .in_frame(frame));
        }
        if snaplen != 0 && u64::from(caplen) > u64::from(snaplen) + 65_536 {
            return Err(Self::corrupt(
                format!("record claims {caplen} captured bytes, far more than the file's snap length of {snaplen}"),
                at,
            )
            .in_frame(frame));
        }
        let total = 16 + caplen as usize;
        if !self.fill(total)? {
            return Err(self.truncated("a packet record", total as u64, at).in_frame(frame));
        }
        let s = self.start;
        self.start += total;
        let ts_ns = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        self.meta = Meta {
            ts_ns,
            link,
            interface: 0,
            orig_len,
            data: (s + 16, s + total),
            file_offset: at,
            direction: None,
            comment: None,
        };
        Ok(true)
    }

    /// Reads a Section Header Block at the current position. Sets the byte order and
    /// starts a new section (unless `first`).
    fn read_shb(&mut self, first: bool) -> Result<(), CaptureError> {
        let at = self.pos();
        if !self.fill(12)? {
            return Err(self.truncated("a section header block", 12, at));
        }
        let s = self.start;
        let be = match rd32(&self.buf, s + 8, false) {
            BOM => false,
            BOM_SWAPPED => true,
            other => {
                let what = format!(
                    "section header block has byte-order magic 0x{other:08x}, not 0x1a2b3c4d in either byte order"
                );
                return Err(if first {
                    CaptureError::new(ErrorKind::Unsupported {
                        what: format!("not a pcapng file after all: {what}"),
                        hint:
                            "the file starts like pcapng but is not one; check it with `capinfos`",
                    })
                    .at(at)
                } else {
                    Self::corrupt(what, at)
                });
            }
        };
        let len = rd32(&self.buf, s + 4, be);
        if len < 28 || !len.is_multiple_of(4) || len > MAX_BLOCK_LEN {
            return Err(Self::corrupt(
                format!("section header block has impossible length {len}"),
                at,
            ));
        }
        let len = len as usize;
        if !self.fill(len)? {
            return Err(self.truncated("a section header block", len as u64, at));
        }
        let s = self.start;
        let trailer = rd32(&self.buf, s + len - 4, be);
        if trailer as usize != len {
            return Err(Self::corrupt(
                format!(
                    "section header block length {len} does not match its trailing copy {trailer}"
                ),
                at,
            ));
        }
        let major = rd16(&self.buf, s + 12, be);
        let minor = rd16(&self.buf, s + 14, be);
        if major != 1 {
            return Err(CaptureError::new(ErrorKind::Unsupported {
                what: format!("pcapng version {major}.{minor} (only 1.x is defined)"),
                hint: "the file may be damaged; check it with `capinfos`",
            })
            .at(at + 12));
        }
        self.start += len;
        let (section_base, section) = match self.state {
            State::Pcapng { section, .. } if !first => (self.interfaces.len(), section + 1),
            _ => (0, 0),
        };
        self.state = State::Pcapng { be, section_base, section };
        Ok(())
    }

    #[inline(never)]
    fn next_pcapng(&mut self) -> Result<Option<Meta>, CaptureError> {
        loop {
            let State::Pcapng { be, section_base, section } = self.state else {
                return Ok(None);
            };
            let at = self.pos();
            let frame = self.frames + 1;
            if !self.fill(8)? {
                if self.avail() == 0 {
                    return Ok(None);
                }
                return Err(self.truncated("a block header", 8, at));
            }
            let s = self.start;
            let btype = rd32(&self.buf, s, be);
            if btype == SHB_TYPE {
                self.read_shb(false)?;
                continue;
            }
            let len = rd32(&self.buf, s + 4, be);
            if len < 12 || !len.is_multiple_of(4) || len > MAX_BLOCK_LEN {
                let why = if len > MAX_BLOCK_LEN {
                    "more than the 16 MiB allowed"
                } else {
                    "not a multiple of 4 of at least 12"
                };
                return Err(Self::corrupt(
                    format!("block of type 0x{btype:08x} claims length {len}, {why}"),
                    at,
                ));
            }
            let len = len as usize;
            if !self.fill(len)? {
                let what = match btype {
                    EPB_TYPE | SPB_TYPE | PB_TYPE => "a packet block",
                    IDB_TYPE => "an interface description block",
                    _ => "a block",
                };
                let e = self.truncated(what, len as u64, at);
                return Err(if matches!(btype, EPB_TYPE | SPB_TYPE | PB_TYPE) {
                    e.in_frame(frame)
                } else {
                    e
                });
            }
            let s = self.start;
            let trailer = rd32(&self.buf, s + len - 4, be);
            if trailer as usize != len {
                return Err(Self::corrupt(
                    format!("block of type 0x{btype:08x} has length {len} but its trailing copy says {trailer}"),
                    at,
                ));
            }
            // The block body: after type and length, before the trailing length.
            let body = (s + 8, s + len - 4);
            self.start += len;
            match btype {
                EPB_TYPE => return self.epb(be, section_base, body, at, frame).map(Some),
                SPB_TYPE => return self.spb(be, section_base, body, at, frame).map(Some),
                PB_TYPE => return self.pb(be, section_base, body, at, frame).map(Some),
                IDB_TYPE => self.idb(be, section, body, at)?,
                _ => {} // NRB, ISB, DSB, custom, unknown: skipped.
            }
        }
    }

    fn idb(
        &mut self,
        be: bool,
        section: u32,
        body: (usize, usize),
        at: u64,
    ) -> Result<(), CaptureError> {
        let b = &self.buf[body.0..body.1];
        if b.len() < 8 {
            return Err(Self::corrupt(
                format!("interface description block too short ({} bytes)", b.len() + 12),
                at,
            ));
        }
        if self.interfaces.len() >= MAX_INTERFACES {
            return Err(Self::corrupt(
                format!("more than {MAX_INTERFACES} interface description blocks"),
                at,
            ));
        }
        let mut iface = Interface {
            link: LinkType(rd16(b, 0, be)),
            snaplen: rd32(b, 4, be),
            name: None,
            description: None,
            tsresol: 6,
            tsoffset: 0,
            section,
        };
        let opts = &b[8..];
        for_each_option(opts, be, |code, a, z| {
            let v = &opts[a..z];
            match code {
                2 if iface.name.is_none() => iface.name = Some(option_string(v)),
                3 if iface.description.is_none() => iface.description = Some(option_string(v)),
                9 if !v.is_empty() => iface.tsresol = v[0],
                14 if v.len() >= 8 => iface.tsoffset = rd64(v, 0, be) as i64,
                _ => {}
            }
        });
        self.times.push(IfTime {
            scale: TsScale::from_tsresol(iface.tsresol),
            offset_ns: i128::from(iface.tsoffset) * 1_000_000_000,
        });
        self.interfaces.push(iface);
        Ok(())
    }

    /// Maps a section-local interface id to an index into `interfaces`.
    #[inline]
    fn interface(
        &self,
        section_base: usize,
        id: u32,
        at: u64,
        frame: u64,
    ) -> Result<usize, CaptureError> {
        let declared = self.interfaces.len() - section_base;
        match usize::try_from(id) {
            Ok(i) if i < declared => Ok(section_base + i),
            _ => Err(CaptureError::new(ErrorKind::UndeclaredInterface {
                id,
                declared: declared as u32,
            })
            .at(at)
            .in_frame(frame)),
        }
    }

    /// Options of a packet block: the first comment's range (absolute) and direction.
    #[inline]
    fn packet_options(
        &self,
        be: bool,
        opts: (usize, usize),
    ) -> (Option<(usize, usize)>, Option<Direction>) {
        let mut comment = None;
        let mut direction = None;
        if opts.0 < opts.1 {
            let o = &self.buf[opts.0..opts.1];
            for_each_option(o, be, |code, a, z| match code {
                1 if comment.is_none() => comment = Some((opts.0 + a, opts.0 + z)),
                2 if z - a >= 4 => direction = direction_from_flags(rd32(o, a, be)),
                _ => {}
            });
        }
        (comment, direction)
    }

    #[inline]
    fn epb(
        &mut self,
        be: bool,
        section_base: usize,
        body: (usize, usize),
        at: u64,
        frame: u64,
    ) -> Result<Meta, CaptureError> {
        let b = &self.buf[body.0..body.1];
        if b.len() < 20 {
            return Err(Self::corrupt(
                format!("enhanced packet block too short ({} bytes)", b.len() + 12),
                at,
            )
            .in_frame(frame));
        }
        let id = rd32(b, 0, be);
        let ts = (u64::from(rd32(b, 4, be)) << 32) | u64::from(rd32(b, 8, be));
        let caplen = rd32(b, 12, be);
        let orig_len = rd32(b, 16, be);
        let room = b.len() - 20;
        if caplen as usize > room {
            return Err(Self::corrupt(
                format!(
                    "enhanced packet block claims {caplen} captured bytes but has room for {room}"
                ),
                at,
            )
            .in_frame(frame));
        }
        let idx = self.interface(section_base, id, at, frame)?;
        let data = (body.0 + 20, body.0 + 20 + caplen as usize);
        let opts_start = (body.0 + 20 + pad4(caplen as usize)).min(body.1);
        let (comment, direction) = self.packet_options(be, (opts_start, body.1));
        Ok(Meta {
            ts_ns: self.times[idx].to_ns(ts),
            link: self.interfaces[idx].link,
            interface: idx as u32,
            orig_len,
            data,
            file_offset: at,
            direction,
            comment,
        })
    }

    fn spb(
        &mut self,
        be: bool,
        section_base: usize,
        body: (usize, usize),
        at: u64,
        frame: u64,
    ) -> Result<Meta, CaptureError> {
        let b = &self.buf[body.0..body.1];
        if b.len() < 4 {
            return Err(Self::corrupt(
                format!("simple packet block too short ({} bytes)", b.len() + 12),
                at,
            )
            .in_frame(frame));
        }
        let orig_len = rd32(b, 0, be);
        let idx = self.interface(section_base, 0, at, frame)?;
        let snaplen = self.interfaces[idx].snaplen;
        let mut caplen = (orig_len as usize).min(b.len() - 4);
        if snaplen != 0 {
            caplen = caplen.min(snaplen as usize);
        }
        Ok(Meta {
            ts_ns: 0,
            link: self.interfaces[idx].link,
            interface: idx as u32,
            orig_len,
            data: (body.0 + 4, body.0 + 4 + caplen),
            file_offset: at,
            direction: None,
            comment: None,
        })
    }

    fn pb(
        &mut self,
        be: bool,
        section_base: usize,
        body: (usize, usize),
        at: u64,
        frame: u64,
    ) -> Result<Meta, CaptureError> {
        let b = &self.buf[body.0..body.1];
        if b.len() < 20 {
            return Err(Self::corrupt(
                format!("packet block too short ({} bytes)", b.len() + 12),
                at,
            )
            .in_frame(frame));
        }
        let id = u32::from(rd16(b, 0, be));
        let ts = (u64::from(rd32(b, 4, be)) << 32) | u64::from(rd32(b, 8, be));
        let caplen = rd32(b, 12, be);
        let orig_len = rd32(b, 16, be);
        let room = b.len() - 20;
        if caplen as usize > room {
            return Err(Self::corrupt(
                format!("packet block claims {caplen} captured bytes but has room for {room}"),
                at,
            )
            .in_frame(frame));
        }
        let idx = self.interface(section_base, id, at, frame)?;
        let data = (body.0 + 20, body.0 + 20 + caplen as usize);
        let opts_start = (body.0 + 20 + pad4(caplen as usize)).min(body.1);
        let (comment, direction) = self.packet_options(be, (opts_start, body.1));
        Ok(Meta {
            ts_ns: self.times[idx].to_ns(ts),
            link: self.interfaces[idx].link,
            interface: idx as u32,
            orig_len,
            data,
            file_offset: at,
            direction,
            comment,
        })
    }
}

impl<R: Read> PacketSource for Reader<R> {
    fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        Reader::next_packet(self)
    }
}
