//! Recording the lab wire: the switch hands every frame to a [`Recorder`].
//!
//! The capture is pcapng with one interface per sender, named `a` and `b`, so every
//! frame says which VM put it on the wire; frames a fault rule touched carry a
//! comment saying what was done. The file is written under a temporary name and
//! renamed when the run ends: a crashed run never leaves a half-written capture
//! under the requested name.
//!
//! TODO(lead): swap the minimal writer and reader below for `dissector::capture`'s
//! `PcapngWriter` / reader once they are on main; [`Recorder`] stays the interface.
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::fault::Dir;

pub trait Recorder: Send {
    fn record(&mut self, sender: Dir, ts_ns: u64, frame: &[u8], comment: Option<&str>) -> io::Result<()>;
    /// Flushes and publishes the capture.
    fn finish(self: Box<Self>) -> io::Result<()>;
}

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
pub const LINKTYPE_ETHERNET: u16 = 1;
pub const SNAPLEN: u32 = 65535;

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

fn option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    buf.extend_from_slice(&code.to_le_bytes());
    buf.extend_from_slice(&(value.len() as u16).to_le_bytes());
    buf.extend_from_slice(value);
    buf.extend(std::iter::repeat_n(0u8, pad4(value.len())));
}

fn block(w: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    let len = (12 + body.len()) as u32;
    w.write_all(&kind.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&len.to_le_bytes())
}

/// A pcapng file with interfaces `a` (id 0) and `b` (id 1), Ethernet, ns timestamps.
pub struct PcapngRecorder {
    out: BufWriter<File>,
    tmp: PathBuf,
    path: PathBuf,
}

impl PcapngRecorder {
    pub fn create(path: &Path) -> io::Result<PcapngRecorder> {
        let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "capture path has no file name"))?;
        let tmp = path.with_file_name(format!(".{}.partial", name.to_string_lossy()));
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        let mut shb = Vec::new();
        shb.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
        option(&mut shb, 4, b"roce lab switch"); // shb_userappl
        option(&mut shb, 0, &[]);
        block(&mut out, SHB, &shb)?;
        for name in ["a", "b"] {
            let mut idb = Vec::new();
            idb.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
            idb.extend_from_slice(&0u16.to_le_bytes());
            idb.extend_from_slice(&SNAPLEN.to_le_bytes());
            option(&mut idb, 2, name.as_bytes()); // if_name
            let desc = format!("frames sent by lab VM {name}");
            option(&mut idb, 3, desc.as_bytes()); // if_description
            option(&mut idb, 9, &[9]); // if_tsresol: nanoseconds
            option(&mut idb, 0, &[]);
            block(&mut out, IDB, &idb)?;
        }
        Ok(PcapngRecorder { out, tmp, path: path.to_path_buf() })
    }
}

impl Recorder for PcapngRecorder {
    fn record(&mut self, sender: Dir, ts_ns: u64, frame: &[u8], comment: Option<&str>) -> io::Result<()> {
        let cap = frame.len().min(SNAPLEN as usize);
        let mut epb = Vec::with_capacity(32 + cap + comment.map_or(0, str::len));
        epb.extend_from_slice(&(sender.index() as u32).to_le_bytes());
        epb.extend_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts_ns as u32).to_le_bytes());
        epb.extend_from_slice(&(cap as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&frame[..cap]);
        epb.extend(std::iter::repeat_n(0u8, pad4(cap)));
        if let Some(c) = comment {
            option(&mut epb, 1, c.as_bytes()); // opt_comment
            option(&mut epb, 0, &[]);
        }
        block(&mut self.out, EPB, &epb)
    }

    fn finish(mut self: Box<Self>) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

/// One packet read back from a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPacket {
    pub interface: u32,
    pub ts_ns: u64,
    pub data: Vec<u8>,
    pub comment: Option<String>,
}

/// Reads a little-endian pcapng file as [`PcapngRecorder`] writes it: interface
/// names and enhanced packet blocks (ns resolution assumed).
pub fn read_pcapng(bytes: &[u8]) -> Result<(Vec<String>, Vec<ReadPacket>), String> {
    let u32_at = |o: usize| -> Result<u32, String> {
        bytes
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("truncated at byte {o}"))
    };
    let mut names = Vec::new();
    let mut packets = Vec::new();
    let mut off = 0;
    while off < bytes.len() {
        let kind = u32_at(off)?;
        let len = u32_at(off + 4)? as usize;
        if len < 12 || len % 4 != 0 || off + len > bytes.len() {
            return Err(format!("bad block length {len} at byte {off}"));
        }
        let body = &bytes[off + 8..off + len - 4];
        let options = |mut o: &[u8]| -> Vec<(u16, Vec<u8>)> {
            let mut v = Vec::new();
            while o.len() >= 4 {
                let code = u16::from_le_bytes([o[0], o[1]]);
                let l = u16::from_le_bytes([o[2], o[3]]) as usize;
                if code == 0 || o.len() < 4 + l {
                    break;
                }
                v.push((code, o[4..4 + l].to_vec()));
                o = &o[(4 + l + pad4(l)).min(o.len())..];
            }
            v
        };
        match kind {
            SHB => {
                if u32_at(off + 8)? != BYTE_ORDER_MAGIC {
                    return Err("not a little-endian pcapng section".into());
                }
            }
            IDB if body.len() >= 8 => {
                let name = options(&body[8..]).into_iter().find(|(c, _)| *c == 2).map(|(_, v)| String::from_utf8_lossy(&v).into_owned());
                names.push(name.unwrap_or_default());
            }
            EPB if body.len() >= 20 => {
                let b = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
                let cap = b(12) as usize;
                if 20 + cap > body.len() {
                    return Err(format!("packet at byte {off} claims {cap} bytes"));
                }
                let comment = options(&body[20 + cap + pad4(cap)..])
                    .into_iter()
                    .find(|(c, _)| *c == 1)
                    .map(|(_, v)| String::from_utf8_lossy(&v).into_owned());
                packets.push(ReadPacket {
                    interface: b(0),
                    ts_ns: (b(4) as u64) << 32 | b(8) as u64,
                    data: body[20..20 + cap].to_vec(),
                    comment,
                });
            }
            _ => {}
        }
        off += len;
    }
    Ok((names, packets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_what_it_reads_back() {
        let dir = std::env::temp_dir().join(format!("roce-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcapng");
        let mut r: Box<dyn Recorder> = Box::new(PcapngRecorder::create(&path).unwrap());
        r.record(Dir::AtoB, 1_700_000_000_123_456_789, &[1, 2, 3], None).unwrap();
        r.record(Dir::BtoA, 5, &[9; 64], Some("dropped by rule 1")).unwrap();
        assert!(!path.exists(), "published before finish");
        r.finish().unwrap();
        let (names, pkts) = read_pcapng(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(pkts.len(), 2);
        assert_eq!((pkts[0].interface, pkts[0].ts_ns, &pkts[0].data[..]), (0, 1_700_000_000_123_456_789, &[1u8, 2, 3][..]));
        assert_eq!(pkts[1].comment.as_deref(), Some("dropped by rule 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
