//! The input options `decode` and `flows` share, turned into the library's input
//! plan ([`Input`]); and how the library's errors end a command.
//!
//! Owns: [`InputArgs`], [`Hint`], and the exit code of each [`analyze::Error`].
//! Imports: `crate::analyze` (the input plan, the display filter, the error);
//! `super::exit`, `super::feature`.
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use dissector::filter::Filter;
use dissector::frame::TransportHint;

use crate::analyze::input::{Input, Live};
use crate::analyze::{self, ErrorKind};

use super::exit::{Exit, Failure};

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
    /// How frames are decoded: `--transport-hint`, and `--roce-port` (each port once).
    fn decode_options(&self) -> dissector::frame::Options {
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

    /// The input plan. The display filter is compiled first, before anything is
    /// read: a bad one is bad input, with the column and a caret.
    pub(super) fn plan(&self) -> Result<Input, Failure> {
        let display_filter = display_filter(self.display_filter.as_deref())?;
        Ok(Input {
            files: self.inputs().into_iter().map(Path::to_path_buf).collect(),
            live: self.interface.as_ref().map(|iface| Live {
                iface: iface.clone(),
                filter: self.filter.clone(),
                snaplen: self.snaplen,
            }),
            count: self.count,
            options: self.decode_options(),
            display_filter,
            jobs: self.jobs.map(usize::from),
            chunk_frames: self.chunk_frames as usize,
        })
    }

    /// The capture files and directories given (FILE… or -r).
    pub(super) fn inputs(&self) -> Vec<&Path> {
        self.files.iter().chain(&self.read_file).map(|p| p.as_path()).collect()
    }
}

/// A `-Y` display filter, compiled: a bad one is bad input, with the column and a
/// caret.
pub(super) fn display_filter(text: Option<&str>) -> Result<Option<Filter>, Failure> {
    analyze::input::display_filter(text).map_err(Failure::from)
}

/// Each kind of the library's errors ends a command with its exit code; the message
/// goes as it is (a display filter's report, the I/O error of a closed pipe, which
/// [`super::run`] ends quietly, among what it keeps).
impl From<analyze::Error> for Failure {
    fn from(e: analyze::Error) -> Failure {
        let exit = match e.kind() {
            ErrorKind::BadInput => Exit::BadInput,
            ErrorKind::Environment | ErrorKind::BrokenPipe => Exit::Setup,
            #[cfg(not(feature = "live"))]
            ErrorKind::NoLiveCapture => {
                return super::feature::missing("live capture (-i)", super::feature::Feature::Live)
            }
        };
        Failure { exit, error: e.into_inner() }
    }
}
