//! Where `decode` and `flows` read packets from: a capture file or a live
//! interface, behind one trait.
//!
//! Owns: the input options ([`InputArgs`]) shared by `decode` and `flows`, and
//! [`Source`]. Imports: dissector's capture, frame and filter; live capture
//! (`crate::net::live`); `super::exit`, `super::par`.
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use dissector::capture::{self, CaptureError, PacketSource, Reader, Record};
use dissector::filter::{Filter, FilterError};
use dissector::frame::TransportHint;

#[cfg(feature = "live")]
use crate::net::live::{LiveCapture, LiveOptions};

use super::exit::Failure;

/// Input options shared by `decode` and `flows`.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Capture file to read (pcap or pcapng, any byte order, µs or ns). Several
    /// files, or a directory of them, are read as a dataset: one Hive partition per
    /// capture with `decode -T parquet -w DIR` and `flows --parquet DIR`.
    #[arg(value_name = "FILE", conflicts_with = "interface")]
    pub files: Vec<PathBuf>,
    /// Read this capture file (tshark's spelling of FILE), or directory of captures.
    #[arg(short = 'r', long = "read-file", value_name = "FILE", conflicts_with_all = ["files", "interface"])]
    pub read_file: Option<PathBuf>,
    /// Capture live on this interface (needs root or CAP_NET_RAW).
    #[arg(short = 'i', long, value_name = "IFACE")]
    pub interface: Option<String>,
    /// BPF capture filter for live capture.
    #[arg(
        short = 'f',
        long,
        value_name = "FILTER",
        default_value = "udp port 4791 or ether proto 0x8915",
        requires = "interface"
    )]
    pub filter: String,
    /// Stop after this many packets.
    #[arg(short = 'c', long, value_name = "COUNT")]
    pub count: Option<u64>,
    /// Snapshot length for live capture.
    #[arg(
        short = 's',
        long,
        value_name = "BYTES",
        default_value_t = 65535,
        requires = "interface"
    )]
    pub snaplen: u32,
    /// Also treat this UDP destination port as RoCEv2 (4791 always is). Repeatable.
    #[arg(long = "roce-port", value_name = "PORT")]
    pub roce_ports: Vec<u16>,
    /// How to read RD-range opcodes (0x40–0x5F): as mlx5 Dynamically Connected
    /// transport (what tshark does), as IBA Reliable Datagram, or `auto`: DC unless
    /// the packet cannot be DC while it can be RD.
    #[arg(long = "transport-hint", value_name = "HINT", value_enum, default_value_t = Hint::Auto)]
    pub transport_hint: Hint,
    /// Display filter, in Wireshark's syntax (e.g. `infiniband.aeth.syndrome >= 0x60`,
    /// `ip.addr == 10.0.0.0/24 && infiniband.bth.opcode in {4 10}`): only frames
    /// that match are shown (or, for `flows`, analysed).
    #[arg(short = 'Y', long = "display-filter", value_name = "FILTER")]
    pub display_filter: Option<String>,
    /// Threads to decode a capture FILE with (1–256; default: every core). The
    /// output is the same whatever N. Used by `flows` and by `decode -T fields`
    /// and `-T parquet`; live capture (-i) and the other output forms (the
    /// summary, -V, --json, -w FILE.pcapng) read on one thread.
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// Records per chunk handed to a thread with -j (tests make it small to cut
    /// flows across chunks).
    #[arg(long = "chunk-frames", value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..), hide = true)]
    pub chunk_frames: u32,
}

/// `--transport-hint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Hint {
    Auto,
    Rd,
    Dc,
}

impl InputArgs {
    pub fn decode_options(&self) -> dissector::frame::Options {
        let transport_hint = match self.transport_hint {
            Hint::Auto => TransportHint::Auto,
            Hint::Rd => TransportHint::Rd,
            Hint::Dc => TransportHint::Dc,
        };
        let mut o = dissector::frame::Options { transport_hint, ..Default::default() };
        for &p in &self.roce_ports {
            if !o.roce_ports.contains(&p) {
                o.roce_ports.push(p);
            }
        }
        o
    }

    /// How many threads to use with `-j` (every core by default).
    pub fn jobs(&self) -> usize {
        self.jobs.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        )
    }

    /// How a file is shared out between `jobs` threads (see [`super::par`]).
    pub(super) fn plan(&self) -> super::parallel::Plan {
        super::parallel::Plan {
            chunk_frames: self.chunk_frames as usize,
            limit: self.count.unwrap_or(u64::MAX),
        }
    }

    /// The display filter, compiled before anything is read: a bad one is bad input,
    /// with the column and a caret.
    pub fn display_filter(&self) -> Result<Option<Filter>, Failure> {
        display_filter(self.display_filter.as_deref())
    }

    /// Opens the file or interface. A file that is not a capture fails here with
    /// the reader's explanation (bad input); an interface that cannot be opened is
    /// the environment's.
    pub fn open(&self) -> Result<Source, Failure> {
        #[cfg(not(feature = "live"))]
        if self.interface.is_some() {
            return Err(super::feature::missing(
                "live capture (-i)",
                super::feature::Feature::Live,
            ));
        }
        #[cfg(feature = "live")]
        if let Some(iface) = &self.interface {
            let live = LiveCapture::open(&LiveOptions {
                iface: iface.clone(),
                filter: self.filter.clone(),
                snaplen: self.snaplen,
                promisc: true,
                count: self.count,
            })
            .map_err(Failure::setup)?;
            return Ok(Source::Live(live));
        }
        let path = match self.inputs()[..] {
            [path] if !path.is_dir() => path,
            [] => {
                return Err(Failure::input(anyhow::anyhow!(
                    "no input: give a capture FILE (or -r FILE), or -i IFACE to capture live"
                )))
            }
            _ => {
                return Err(Failure::input(anyhow::anyhow!(
                    "several captures, or a directory, are read as a dataset: only `decode -T parquet -w DIR` and `flows` take them"
                )))
            }
        };
        Ok(Source::File(capture::open(path).map_err(Failure::input)?))
    }

    /// The capture files and directories given (FILE… or -r).
    pub(super) fn inputs(&self) -> Vec<&std::path::Path> {
        self.files.iter().chain(&self.read_file).map(|p| p.as_path()).collect()
    }

    /// The captures of a dataset, when the input is one: several captures or a
    /// directory (see [`super::dataset`]); `None` for one capture or a live interface.
    pub(super) fn dataset(&self) -> Result<Option<Vec<super::dataset::Capture>>, Failure> {
        let inputs = self.inputs();
        if self.interface.is_some() || !super::dataset::is_dataset(&inputs) {
            return Ok(None);
        }
        super::dataset::captures(&inputs).map(Some)
    }
}

/// A `-Y` display filter, compiled: a bad one is bad input, with the column and a
/// caret.
pub(super) fn display_filter(text: Option<&str>) -> Result<Option<Filter>, Failure> {
    text.map(Filter::compile)
        .transpose()
        .map_err(|e| Failure::input(FilterError { origin: Some("-Y"), ..e }))
}

/// An opened input. An enum rather than a `Box<dyn PacketSource>`: the file reader's
/// `next_packet` is then inlined into the decode and flows loops (a measurable part of
/// their per-packet cost).
pub enum Source {
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
