//! Writers: pcapng (several interfaces, nanosecond timestamps, comments, direction) and
//! classic pcap (one link type, nanosecond magic), plus [`AtomicFile`] so that a file
//! is either complete or absent.
//!
//! Owns: the writers, [`RecordFile`] and the atomic file. Imports: the record and
//! direction (its parent), the link type.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::Direction;
use crate::LinkType;

/// The largest captured length either writer accepts, after truncation to the
/// interface's snap length. Readers (ours and Wireshark's) refuse larger records.
pub const MAX_WRITE_CAPLEN: usize = 262_144;

const BUF_CAPACITY: usize = 256 * 1024;

/// pcapng block types and option codes used by the writer.
const SHB_TYPE: u32 = 0x0A0D_0D0A;
const IDB_TYPE: u32 = 1;
const EPB_TYPE: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_ENDOFOPT: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;

const ZEROS: [u8; 4] = [0; 4];

/// One packet for [`PcapngWriter::write_packet`].
#[derive(Debug, Clone, Copy)]
pub struct OutPacket<'a> {
    /// An id returned by [`PcapngWriter::add_interface`].
    pub interface: u32,
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// The captured bytes (truncated to the interface's snap length on writing).
    pub data: &'a [u8],
    /// The length on the wire; raised to the captured length if smaller.
    pub orig_len: u32,
    /// Written as the `epb_flags` option when known.
    pub direction: Option<Direction>,
    /// Written as an `opt_comment` option (at most 65535 bytes).
    pub comment: Option<&'a str>,
}

impl<'a> OutPacket<'a> {
    /// A packet on `interface` captured whole: `orig_len` is `data.len()`, no
    /// direction, no comment.
    pub fn new(interface: u32, ts_ns: u64, data: &'a [u8]) -> Self {
        OutPacket {
            interface,
            ts_ns,
            data,
            orig_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            direction: None,
            comment: None,
        }
    }
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn into_inner<W: Write>(w: BufWriter<W>) -> io::Result<W> {
    w.into_inner().map_err(|e| e.into_error())
}

/// Length of one option (header + padded value), or an error if the value does not
/// fit an option's 16-bit length.
fn option_len(what: &str, value_len: usize) -> io::Result<usize> {
    if value_len > usize::from(u16::MAX) {
        return Err(invalid(format!(
            "pcapng {what} is {value_len} bytes, more than the 65535 an option can hold"
        )));
    }
    Ok(4 + value_len + pad4(value_len))
}

/// Writes one option (code, length, value, padding) in little-endian order.
fn put_option<W: Write>(w: &mut W, code: u16, value: &[u8]) -> io::Result<()> {
    // Callers checked the length with `option_len`.
    let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
    w.write_all(&code.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(value)?;
    w.write_all(&ZEROS[..pad4(value.len())])
}

fn block_len(body: usize) -> io::Result<u32> {
    u32::try_from(12 + body)
        .map_err(|_| invalid(format!("pcapng block of {body} bytes is too large")))
}

/// A pcapng writer: one section, any number of interfaces, Enhanced Packet Blocks with
/// nanosecond timestamps. Output is little-endian and buffered internally, so `W` may
/// be an unbuffered `File`; call [`flush`](Self::flush) or [`into_inner`](Self::into_inner)
/// to make sure everything reached `W`.
#[derive(Debug)]
pub struct PcapngWriter<W: Write> {
    w: BufWriter<W>,
    /// Snap length per interface id (0 = unlimited).
    snaplens: Vec<u32>,
}

impl<W: Write> PcapngWriter<W> {
    /// Starts a file: writes the Section Header Block, naming the writing application
    /// in `shb_userappl`.
    pub fn new(w: W, user_appl: &str) -> io::Result<Self> {
        let mut w = BufWriter::with_capacity(BUF_CAPACITY, w);
        let mut opts = 0;
        if !user_appl.is_empty() {
            opts += option_len("shb_userappl", user_appl.len())?;
        }
        if opts > 0 {
            opts += 4;
        }
        let len = block_len(16 + opts)?;
        w.write_all(&SHB_TYPE.to_le_bytes())?;
        w.write_all(&len.to_le_bytes())?;
        w.write_all(&BYTE_ORDER_MAGIC.to_le_bytes())?;
        w.write_all(&1u16.to_le_bytes())?; // major
        w.write_all(&0u16.to_le_bytes())?; // minor
        w.write_all(&(-1i64).to_le_bytes())?; // section length unknown
        if !user_appl.is_empty() {
            put_option(&mut w, SHB_USERAPPL, user_appl.as_bytes())?;
        }
        if opts > 0 {
            put_option(&mut w, OPT_ENDOFOPT, &[])?;
        }
        w.write_all(&len.to_le_bytes())?;
        Ok(PcapngWriter { w, snaplens: Vec::new() })
    }

    /// Declares an interface (Interface Description Block with `if_name` when given and
    /// `if_tsresol` = 9, i.e. nanoseconds) and returns its id for [`OutPacket::interface`].
    /// `snaplen` 0 means no limit.
    pub fn add_interface(
        &mut self,
        link: LinkType,
        snaplen: u32,
        name: Option<&str>,
    ) -> io::Result<u32> {
        let id = u32::try_from(self.snaplens.len())
            .map_err(|_| invalid("too many pcapng interfaces".to_string()))?;
        let name = name.filter(|n| !n.is_empty());
        let mut opts = option_len("if_tsresol", 1)? + 4;
        if let Some(n) = name {
            opts += option_len("if_name", n.len())?;
        }
        let len = block_len(8 + opts)?;
        let w = &mut self.w;
        w.write_all(&IDB_TYPE.to_le_bytes())?;
        w.write_all(&len.to_le_bytes())?;
        w.write_all(&link.0.to_le_bytes())?;
        w.write_all(&0u16.to_le_bytes())?;
        w.write_all(&snaplen.to_le_bytes())?;
        if let Some(n) = name {
            put_option(w, IF_NAME, n.as_bytes())?;
        }
        put_option(w, IF_TSRESOL, &[9])?;
        put_option(w, OPT_ENDOFOPT, &[])?;
        w.write_all(&len.to_le_bytes())?;
        self.snaplens.push(snaplen);
        Ok(id)
    }

    /// Writes one Enhanced Packet Block. The data is cut to the interface's snap
    /// length; an undeclared interface, or captured data still longer than
    /// [`MAX_WRITE_CAPLEN`], is an `InvalidInput` error and writes nothing.
    pub fn write_packet(&mut self, p: &OutPacket<'_>) -> io::Result<()> {
        let Some(&snaplen) = usize::try_from(p.interface).ok().and_then(|i| self.snaplens.get(i))
        else {
            return Err(invalid(format!(
                "pcapng interface {} was never declared ({} declared)",
                p.interface,
                self.snaplens.len()
            )));
        };
        let mut data = p.data;
        if snaplen != 0 {
            if let Ok(s) = usize::try_from(snaplen) {
                data = &data[..data.len().min(s)];
            }
        }
        if data.len() > MAX_WRITE_CAPLEN {
            return Err(invalid(format!(
                "packet of {} captured bytes is longer than the {MAX_WRITE_CAPLEN} a capture file may hold; \
                 give the interface a smaller snaplen",
                data.len()
            )));
        }
        let caplen = data.len() as u32; // ≤ MAX_WRITE_CAPLEN
        let orig_len = p.orig_len.max(caplen);
        let mut opts = 0;
        if let Some(c) = p.comment {
            opts += option_len("opt_comment", c.len())?;
        }
        if p.direction.is_some() {
            opts += 8;
        }
        if opts > 0 {
            opts += 4;
        }
        let len = block_len(20 + data.len() + pad4(data.len()) + opts)?;

        let mut head = [0u8; 28];
        head[0..4].copy_from_slice(&EPB_TYPE.to_le_bytes());
        head[4..8].copy_from_slice(&len.to_le_bytes());
        head[8..12].copy_from_slice(&p.interface.to_le_bytes());
        head[12..16].copy_from_slice(&((p.ts_ns >> 32) as u32).to_le_bytes());
        head[16..20].copy_from_slice(&(p.ts_ns as u32).to_le_bytes());
        head[20..24].copy_from_slice(&caplen.to_le_bytes());
        head[24..28].copy_from_slice(&orig_len.to_le_bytes());
        let w = &mut self.w;
        w.write_all(&head)?;
        w.write_all(data)?;
        w.write_all(&ZEROS[..pad4(data.len())])?;
        if let Some(c) = p.comment {
            put_option(w, OPT_COMMENT, c.as_bytes())?;
        }
        if let Some(d) = p.direction {
            let flags: u32 = match d {
                Direction::Inbound => 1,
                Direction::Outbound => 2,
            };
            put_option(w, EPB_FLAGS, &flags.to_le_bytes())?;
        }
        if opts > 0 {
            put_option(w, OPT_ENDOFOPT, &[])?;
        }
        w.write_all(&len.to_le_bytes())
    }

    /// Number of interfaces declared so far.
    pub fn interface_count(&self) -> usize {
        self.snaplens.len()
    }

    /// Pushes everything written so far to `W` and flushes it.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Flushes and returns the underlying writer (e.g. an [`AtomicFile`] to commit).
    pub fn into_inner(self) -> io::Result<W> {
        into_inner(self.w)
    }
}

/// A classic pcap writer: one link type, nanosecond-resolution magic (`0xa1b23c4d`),
/// little-endian. Buffered internally like [`PcapngWriter`].
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: BufWriter<W>,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header. `snaplen` 0 is written as 262144.
    pub fn new(w: W, link: LinkType, snaplen: u32) -> io::Result<Self> {
        let snaplen = if snaplen == 0 { MAX_WRITE_CAPLEN as u32 } else { snaplen };
        let mut w = BufWriter::with_capacity(BUF_CAPACITY, w);
        let mut head = [0u8; 24];
        head[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        head[4..6].copy_from_slice(&2u16.to_le_bytes());
        head[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone, sigfigs: 0
        head[16..20].copy_from_slice(&snaplen.to_le_bytes());
        head[20..24].copy_from_slice(&u32::from(link.0).to_le_bytes());
        w.write_all(&head)?;
        Ok(PcapWriter { w, snaplen })
    }

    /// Writes one record. The data is cut to the snap length; if it is still longer
    /// than [`MAX_WRITE_CAPLEN`] that is an `InvalidInput` error and nothing is written.
    /// `orig_len` is raised to the captured length if smaller. Timestamps past 2106
    /// (the 32-bit seconds field) are an `InvalidInput` error.
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let data = &data[..data.len().min(usize::try_from(self.snaplen).unwrap_or(usize::MAX))];
        if data.len() > MAX_WRITE_CAPLEN {
            return Err(invalid(format!(
                "packet of {} captured bytes is longer than the {MAX_WRITE_CAPLEN} a pcap file may hold",
                data.len()
            )));
        }
        let secs = u32::try_from(ts_ns / 1_000_000_000).map_err(|_| {
            invalid(format!("timestamp {ts_ns} ns does not fit pcap's 32-bit seconds"))
        })?;
        let caplen = data.len() as u32;
        let mut head = [0u8; 16];
        head[0..4].copy_from_slice(&secs.to_le_bytes());
        head[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        head[8..12].copy_from_slice(&caplen.to_le_bytes());
        head[12..16].copy_from_slice(&orig_len.max(caplen).to_le_bytes());
        self.w.write_all(&head)?;
        self.w.write_all(data)
    }

    /// Pushes everything written so far to `W` and flushes it.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(self) -> io::Result<W> {
        into_inner(self.w)
    }
}

/// A file written under a temporary name beside `PATH` and renamed to `PATH` by
/// [`commit`](Self::commit), so `PATH` is never half-written: either the old content
/// (or nothing) or the whole new file. Dropped without `commit` (an error, a panic),
/// the temporary is removed.
///
/// The temporary is `tempfile`'s: a fresh name in `PATH`'s directory (`.NAME.XXXXXX.tmp`)
/// created exclusively, so two writers of one output never write into each other's
/// file (the last to commit wins, whole), and the rename stays on one file system.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// use dissector::capture::{create_atomically, PcapngWriter};
/// let mut w = PcapngWriter::new(create_atomically("out.pcapng")?, "roce")?;
/// // ... add_interface, write_packet ...
/// w.into_inner()?.commit()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AtomicFile {
    file: tempfile::NamedTempFile,
    path: PathBuf,
}

/// Writes `path` whole or not at all: `data` writes a buffered temporary file
/// beside it, renamed over `path` once all of it is written and synced. Every
/// error names `path`; on one, `path` is as it was.
pub fn write_whole(
    path: &Path,
    data: impl FnOnce(&mut io::BufWriter<AtomicFile>) -> io::Result<()>,
) -> io::Result<()> {
    let named = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
    };
    let mut w = io::BufWriter::with_capacity(
        1 << 20,
        AtomicFile::create(path).map_err(|e| named("cannot create", e))?,
    );
    data(&mut w).map_err(|e| named("cannot write", e))?;
    w.into_inner().map_err(|e| named("cannot write", e.into_error()))?.commit()
}

/// Creates a temporary file beside `PATH` for writing; see [`AtomicFile`].
pub fn create_atomically(path: impl AsRef<Path>) -> io::Result<AtomicFile> {
    AtomicFile::create(path)
}

impl AtomicFile {
    /// Creates a temporary file beside `PATH` for writing, with the permissions a new
    /// `PATH` would get (0666 less the umask), not the temporary's usual 0600.
    pub fn create(path: impl AsRef<Path>) -> io::Result<AtomicFile> {
        let path = path.as_ref().to_path_buf();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let Some(name) = path.file_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot create {}: it names a directory, not a file", path.display()),
            ));
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let file = b.tempfile_in(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        Ok(AtomicFile { file, path })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary path being written.
    pub fn temp_path(&self) -> &Path {
        self.file.path()
    }

    /// Flushes, syncs to disk and renames the temporary file over `PATH`.
    pub fn commit(self) -> io::Result<()> {
        let AtomicFile { mut file, path } = self;
        let finished = |e: io::Error| {
            io::Error::new(e.kind(), format!("cannot finish writing {}: {e}", path.display()))
        };
        file.flush().and_then(|()| file.as_file().sync_all()).map_err(finished)?;
        // On failure the temporary comes back inside the error and is removed as it drops.
        file.persist(&path).map_err(|e| finished(e.error))?;
        // Make the rename itself durable (best effort: not every platform can open a
        // directory for syncing).
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn le32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    #[test]
    fn pcapng_layout() {
        let mut w = PcapngWriter::new(Vec::new(), "roce test").unwrap();
        assert_eq!(w.add_interface(LinkType::ETHERNET, 0, Some("eth0")).unwrap(), 0);
        assert_eq!(w.add_interface(LinkType::RAW, 64, None).unwrap(), 1);
        w.write_packet(&OutPacket {
            interface: 1,
            ts_ns: 0x1_0000_0002,
            data: &[7; 100],
            orig_len: 50,
            direction: Some(Direction::Outbound),
            comment: Some("hi"),
        })
        .unwrap();
        w.write_packet(&OutPacket::new(0, 5, &[1, 2, 3])).unwrap();
        let out = w.into_inner().unwrap();
        // Walk the blocks: every block's two length fields agree and are multiples of 4.
        let mut at = 0;
        let mut types = vec![];
        while at < out.len() {
            let len = le32(&out, at + 4) as usize;
            assert_eq!(len % 4, 0);
            assert_eq!(le32(&out, at + len - 4) as usize, len);
            types.push(le32(&out, at));
            at += len;
        }
        assert_eq!(at, out.len());
        assert_eq!(types, [SHB_TYPE, IDB_TYPE, IDB_TYPE, EPB_TYPE, EPB_TYPE]);
        // The first EPB: cut to snaplen 64, orig_len raised to 64.
        let shb = le32(&out, 4) as usize;
        let idb0 = le32(&out, shb + 4) as usize;
        let idb1 = le32(&out, shb + idb0 + 4) as usize;
        let epb = shb + idb0 + idb1;
        assert_eq!(le32(&out, epb + 8), 1);
        assert_eq!(le32(&out, epb + 12), 1);
        assert_eq!(le32(&out, epb + 16), 2);
        assert_eq!(le32(&out, epb + 20), 64);
        assert_eq!(le32(&out, epb + 24), 64);
    }

    #[test]
    fn pcapng_rejects_undeclared_interface_and_huge_comment() {
        let mut w = PcapngWriter::new(Vec::new(), "").unwrap();
        assert!(w.write_packet(&OutPacket::new(0, 0, &[])).is_err());
        w.add_interface(LinkType::ETHERNET, 0, None).unwrap();
        let big = "x".repeat(70_000);
        let mut p = OutPacket::new(0, 0, &[1]);
        p.comment = Some(&big);
        assert!(w.write_packet(&p).is_err());
        let huge = vec![0u8; MAX_WRITE_CAPLEN + 1];
        assert!(w.write_packet(&OutPacket::new(0, 0, &huge)).is_err());
    }

    #[test]
    fn pcap_layout() {
        let mut w = PcapWriter::new(Vec::new(), LinkType::ETHERNET, 10).unwrap();
        w.write_packet(3_000_000_007, &[9; 20], 0).unwrap();
        assert!(w.write_packet(u64::MAX, &[], 0).is_err());
        let out = w.into_inner().unwrap();
        assert_eq!(le32(&out, 0), 0xa1b2_3c4d);
        assert_eq!(le32(&out, 16), 10);
        assert_eq!(le32(&out, 20), 1);
        assert_eq!(&out[24..40], [3, 0, 0, 0, 7, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 0]);
        assert_eq!(out.len(), 24 + 16 + 10);
    }

    #[test]
    fn a_whole_write_that_fails_leaves_the_old_file_and_names_the_path() {
        let dir = std::env::temp_dir().join(format!("dissector-whole-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.json");
        write_whole(&path, |w| w.write_all(b"old")).unwrap();
        let e = write_whole(&path, |w| {
            w.write_all(b"half of the new")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(
            e.to_string().contains("report.json") && e.to_string().contains("disk full"),
            "{e}"
        );
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["report.json"], "no temporary left behind");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn atomic_file_commit_and_abandon() {
        let dir = std::env::temp_dir().join(format!("dissector-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.pcap");
        let mut f = create_atomically(&path).unwrap();
        f.write_all(b"hello").unwrap();
        assert!(!path.exists());
        assert!(f.temp_path().exists());
        f.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"hello");

        let mut f = AtomicFile::create(&path).unwrap();
        f.write_all(b"half").unwrap();
        let tmp = f.temp_path().to_path_buf();
        drop(f);
        assert!(!tmp.exists());
        assert_eq!(fs::read(&path).unwrap(), b"hello", "an abandoned write leaves the old file");

        // Two writers of one output each have their own temporary: neither writes into
        // the other's, and what lands is one of them, whole.
        let mut one = create_atomically(&path).unwrap();
        let mut two = create_atomically(&path).unwrap();
        assert_ne!(one.temp_path(), two.temp_path());
        one.write_all(b"first writer").unwrap();
        two.write_all(b"second").unwrap();
        two.commit().unwrap();
        one.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first writer");
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["a.pcap"], "no temporary left behind");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            let plain = dir.join("plain");
            File::create(&plain).unwrap();
            assert_eq!(mode(&path), mode(&plain), "the mode a new file gets, not 0600");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// A pcapng file of captured records, written atomically ([`AtomicFile`]): one
/// pcapng interface per (source interface, link type) met, so records from several
/// interfaces and link types keep theirs. What `roce decode -w`, `roce probe -w` and
/// the live recordings of `roce run` write.
#[derive(Debug)]
pub struct RecordFile {
    w: PcapngWriter<io::BufWriter<AtomicFile>>,
    ifaces: std::collections::HashMap<(u32, LinkType), u32>,
}

impl RecordFile {
    /// Creates `PATH.tmp`; nothing appears under `PATH` until [`RecordFile::commit`].
    pub fn create(path: impl AsRef<Path>, user_appl: &str) -> io::Result<RecordFile> {
        let f = AtomicFile::create(path)?;
        Ok(RecordFile {
            w: PcapngWriter::new(io::BufWriter::new(f), user_appl)?,
            ifaces: Default::default(),
        })
    }

    pub fn write(&mut self, r: &crate::capture::Record<'_>) -> io::Result<()> {
        let key = (r.interface, r.link);
        let id = match self.ifaces.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.w.add_interface(r.link, 262_144, None)?;
                self.ifaces.insert(key, id);
                id
            }
        };
        self.w.write_packet(&OutPacket {
            interface: id,
            ts_ns: r.ts_ns,
            data: r.data,
            orig_len: r.orig_len,
            direction: r.direction,
            comment: None,
        })
    }

    /// Flushes, syncs and renames the file into place.
    pub fn commit(self) -> io::Result<()> {
        let buffered = self.w.into_inner()?;
        buffered.into_inner().map_err(|e| e.into_error())?.commit()
    }
}
