//! Where `decode` and `flows` read packets from: a capture file or a live
//! interface, behind one type; or, given several captures or a directory, a dataset
//! (see [`super::dataset`]).
//!
//! Owns: the input plan ([`Input`], [`Live`]), [`Source`], and compiling a `-Y`
//! display filter. Imports: dissector's capture, frame and filter; live capture
//! (`crate::net::live`); `super::dataset`, `super::parallel`, `super::Error`.
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use dissector::capture::{self, CaptureError, PacketSource, Reader, Record};
use dissector::filter::{Filter, FilterError};
use dissector::frame;

#[cfg(feature = "live")]
use crate::net::live::{LiveCapture, LiveOptions};

use super::dataset::{self, Capture};
use super::parallel;
use super::Error;

/// What to read, and how: the input half of a `decode` or `flows` plan.
#[derive(Debug)]
pub(crate) struct Input {
    /// The capture files and directories given, in order. One file is read by
    /// itself; several, or a directory, are a dataset.
    pub files: Vec<PathBuf>,
    /// Capture live on an interface instead.
    pub live: Option<Live>,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// How frames are decoded (the RoCEv2 UDP ports, the transport hint).
    pub options: frame::Options,
    /// Only the frames this display filter keeps are shown (or analysed).
    pub display_filter: Option<Filter>,
    /// Threads to read a capture file with; `None`: every core.
    pub jobs: Option<usize>,
    /// Records per chunk handed to a thread (at least 1).
    pub chunk_frames: usize,
}

/// A live capture to open.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub iface: String,
    /// The BPF capture filter.
    pub filter: String,
    pub snaplen: u32,
}

impl Input {
    /// How many threads to use (every core by default).
    pub(crate) fn jobs(&self) -> usize {
        self.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// At most this many packets.
    pub(super) fn limit(&self) -> u64 {
        self.count.unwrap_or(u64::MAX)
    }

    /// How a file is shared out between threads (see [`super::parallel`]).
    pub(super) fn chunks(&self) -> parallel::Plan {
        parallel::Plan { chunk_frames: self.chunk_frames, limit: self.limit() }
    }

    /// Opens the file or interface. A file that is not a capture fails here with
    /// the reader's explanation (bad input); an interface that cannot be opened is
    /// the environment's.
    pub(crate) fn open(&self) -> Result<Source, Error> {
        #[cfg(not(feature = "live"))]
        if self.live.is_some() {
            return Err(Error {
                kind: super::ErrorKind::NoLiveCapture,
                error: anyhow!("live capture (-i) is not in this build of roce"),
            });
        }
        #[cfg(feature = "live")]
        if let Some(live) = &self.live {
            let capture = LiveCapture::open(&LiveOptions {
                iface: live.iface.clone(),
                filter: live.filter.clone(),
                snaplen: live.snaplen,
                promisc: true,
                count: self.count,
                buffer: None,
            })
            .map_err(Error::environment)?;
            return Ok(Source::Live(capture));
        }
        let path = match &self.files[..] {
            [path] if !path.is_dir() => path,
            [] => {
                return Err(Error::bad_input(anyhow!(
                    "no input: give a capture FILE (or -r FILE), or -i IFACE to capture live"
                )))
            }
            _ => {
                return Err(Error::bad_input(anyhow!(
                    "several captures, or a directory, are read as a dataset: only `decode -T parquet -w DIR` and `flows` take them"
                )))
            }
        };
        Ok(Source::File(capture::open(path).map_err(Error::bad_input)?))
    }

    /// The captures of a dataset, when the input is one: several captures or a
    /// directory (see [`super::dataset`]); `None` for one capture or a live interface.
    pub(crate) fn dataset(&self) -> Result<Option<Vec<Capture>>, Error> {
        let inputs: Vec<&Path> = self.files.iter().map(PathBuf::as_path).collect();
        if self.live.is_some() || !dataset::is_dataset(&inputs) {
            return Ok(None);
        }
        dataset::captures(&inputs).map(Some)
    }
}

/// A `-Y` display filter, compiled: a bad one is bad input, with the column and a
/// caret.
pub(crate) fn display_filter(text: Option<&str>) -> Result<Option<Filter>, Error> {
    text.map(Filter::compile)
        .transpose()
        .map_err(|e| Error::bad_input(FilterError { origin: Some("-Y"), ..e }))
}

/// An opened input. An enum rather than a `Box<dyn PacketSource>`: the file reader's
/// `next_packet` is then inlined into the decode and flows loops (a measurable part of
/// their per-packet cost).
pub(crate) enum Source {
    File(Reader<BufReader<File>>),
    #[cfg(feature = "live")]
    Live(LiveCapture),
}

impl PacketSource for Source {
    #[inline]
    fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        match self {
            Source::File(r) => r.next_packet(),
            #[cfg(feature = "live")]
            Source::Live(l) => l.next_packet(),
        }
    }
}
