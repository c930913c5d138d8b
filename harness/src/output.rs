//! Shared pieces of the commands' output: the optional pcapng copy (`-w`), written
//! atomically, and frame statistics with the loopback hint.
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dissector::capture::{OutPacket, PcapngWriter, Record};
use dissector::frame::Frame;
use dissector::LinkType;

/// A pcapng file being written: `PATH.tmp` until [`PcapngOut::commit`] renames it, so
/// an interrupted run never leaves a half-written file under the real name.
pub struct PcapngOut {
    path: PathBuf,
    tmp: PathBuf,
    w: Option<PcapngWriter<BufWriter<File>>>,
    ifaces: HashMap<(u32, LinkType), u32>,
}

impl PcapngOut {
    pub fn create(path: &Path) -> Result<PcapngOut> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let f = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let w = PcapngWriter::new(BufWriter::new(f), concat!("roce ", env!("CARGO_PKG_VERSION")))
            .with_context(|| format!("writing {}", tmp.display()))?;
        Ok(PcapngOut { path: path.to_owned(), tmp, w: Some(w), ifaces: HashMap::new() })
    }

    pub fn write(&mut self, r: &Record<'_>) -> Result<()> {
        let Some(w) = self.w.as_mut() else { return Ok(()) };
        let key = (r.interface, r.link);
        let id = match self.ifaces.get(&key) {
            Some(&id) => id,
            None => {
                let id = w.add_interface(r.link, 262_144, None)?;
                self.ifaces.insert(key, id);
                id
            }
        };
        w.write_packet(&OutPacket {
            interface: id,
            ts_ns: r.ts_ns,
            data: r.data,
            orig_len: r.orig_len,
            direction: r.direction,
            comment: None,
        })
        .with_context(|| format!("writing {}", self.tmp.display()))
    }

    /// Flushes and renames the file into place.
    pub fn commit(mut self) -> Result<()> {
        if let Some(w) = self.w.take() {
            let inner = w.into_inner().with_context(|| format!("writing {}", self.tmp.display()))?;
            let f = inner.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", self.tmp.display()))?;
            f.sync_all()?;
        }
        fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("renaming {} to {}", self.tmp.display(), self.path.display()))
    }
}

impl Drop for PcapngOut {
    fn drop(&mut self) {
        if self.w.is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// What a run saw, for the closing notes.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub frames: u64,
    pub roce: u64,
}

impl Stats {
    pub fn count(&mut self, f: &Frame) {
        self.frames += 1;
        self.roce += f.roce.is_some() as u64;
    }

    /// The most common surprise: an empty capture of traffic between two QPs on one
    /// rxe device, which is looped back inside the driver.
    pub fn warn_if_no_roce(&self, err: &mut dyn std::io::Write) -> std::io::Result<()> {
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
