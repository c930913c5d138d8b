//! Recording the lab wire: the switch hands every frame to a [`Recorder`].
//!
//! The capture is pcapng (`dissector::capture::PcapngWriter`) with one interface
//! per sender, named `a` and `b`, so every frame says which VM put it on the wire;
//! frames a fault rule touched carry a comment saying what was done. The file is
//! written through `dissector::capture::AtomicFile` and renamed when the run ends:
//! a crashed run never leaves a half-written capture under the requested name.
//!
//! Owns: [`Recorder`] and the pcapng recorder, and reading a capture back.
//! Imports: [`fault`](super::fault)'s `Dir`, and the pcapng writer and reader from
//! `dissector`.
use std::io;
use std::path::Path;

use dissector::capture::{self, AtomicFile, OutPacket, PcapngWriter};
use dissector::LinkType;

use super::fault::Dir;

pub trait Recorder: Send {
    fn record(
        &mut self,
        sender: Dir,
        ts_ns: u64,
        frame: &[u8],
        comment: Option<&str>,
    ) -> io::Result<()>;
    /// Flushes and publishes the capture.
    fn finish(self: Box<Self>) -> io::Result<()>;
}

/// Frames are Ethernet frames of at most an MTU or so; never cut them.
pub const SNAPLEN: u32 = 0;

/// A pcapng file with interfaces `a` (id 0) and `b` (id 1), Ethernet, ns timestamps.
pub struct PcapngRecorder {
    w: PcapngWriter<AtomicFile>,
}

impl PcapngRecorder {
    pub fn create(path: &Path) -> io::Result<PcapngRecorder> {
        let mut w = PcapngWriter::new(capture::create_atomically(path)?, "roce lab switch")?;
        for d in [Dir::AtoB, Dir::BtoA] {
            let id = w.add_interface(LinkType::ETHERNET, SNAPLEN, Some(d.sender()))?;
            debug_assert_eq!(id as usize, d.index());
        }
        Ok(PcapngRecorder { w })
    }
}

impl Recorder for PcapngRecorder {
    fn record(
        &mut self,
        sender: Dir,
        ts_ns: u64,
        frame: &[u8],
        comment: Option<&str>,
    ) -> io::Result<()> {
        let mut p = OutPacket::new(sender.index() as u32, ts_ns, frame);
        p.comment = comment;
        self.w.write_packet(&p)
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        self.w.into_inner()?.commit()
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

/// Reads a whole capture (small lab captures: tests, bench): interface names and
/// packets.
pub fn read_capture(path: &Path) -> Result<(Vec<String>, Vec<ReadPacket>), String> {
    let mut r = capture::open(path).map_err(|e| e.to_string())?;
    let mut packets = Vec::new();
    while let Some(rec) = r.next_packet().map_err(|e| e.to_string())? {
        packets.push(ReadPacket {
            interface: rec.interface,
            ts_ns: rec.ts_ns,
            data: rec.data.to_vec(),
            comment: rec.comment.map(str::to_string),
        });
    }
    let names = r.interfaces().iter().map(|i| i.name.clone().unwrap_or_default()).collect();
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
        let (names, pkts) = read_capture(&path).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(pkts.len(), 2);
        assert_eq!(
            (pkts[0].interface, pkts[0].ts_ns, &pkts[0].data[..]),
            (0, 1_700_000_000_123_456_789, &[1u8, 2, 3][..])
        );
        assert_eq!(pkts[1].comment.as_deref(), Some("dropped by rule 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
