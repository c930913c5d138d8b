//! Capture files: pcap and pcapng, read and written.
//!
//! - Reading: [`Reader`] (or [`open`]) sniffs the format — pcap in microseconds or
//!   nanoseconds, either byte order, or pcapng, either byte order, several sections —
//!   and streams [`Record`]s that borrow its buffer: no allocation or copy per packet,
//!   memory independent of the file's size. [`PacketSource`] is what analyzers consume;
//!   live capture (in the `roce` crate) implements it too.
//! - Writing: [`PcapngWriter`] (several interfaces, ns timestamps, comments,
//!   direction) and [`PcapWriter`] (classic pcap, ns magic); [`AtomicFile`] /
//!   [`create_atomically`] so a file is either complete or absent; [`RecordFile`]
//!   keeps records read from anywhere (their interfaces and link types kept apart).
//! - Batches: [`Chunk`] holds records with their bytes, for reading on one thread
//!   and decoding on others.
//! - Errors: [`CaptureError`] says what, where (path, byte offset, frame) and a hint.
//!
//! Owns: the capture formats, their records, sources and errors, and the crate's only
//! file-system access. Imports: the link type ([`crate::LinkType`]); nothing else of the
//! project.

mod chunk;
mod error;
mod read;
mod write;

pub use chunk::{Carry, Chunk, Filled};
pub use error::{CaptureError, ErrorKind};
pub use read::{
    open, Format, Interface, Reader, DEFAULT_BUFFER, MAX_BLOCK_LEN, MAX_INTERFACES, MAX_PCAP_CAPLEN,
};
pub use write::{
    create_atomically, write_whole, AtomicFile, OutPacket, PcapWriter, PcapngWriter, RecordFile,
    MAX_WRITE_CAPLEN,
};

use crate::LinkType;

/// Which way a packet went, relative to the capturing interface (pcapng `epb_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inbound,
    Outbound,
}

/// One captured packet, borrowed from its source's buffer until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// 1-based frame number, as tshark counts.
    pub number: u64,
    /// Nanoseconds since the Unix epoch (0 for a pcapng Simple Packet Block, which has
    /// no timestamp).
    pub ts_ns: u64,
    /// The link type of the record's interface.
    pub link: LinkType,
    /// Index into the source's interface list: pcapng interfaces are counted over all
    /// sections in file order, so in a multi-section file this is not the section-local
    /// id in the block (tshark 4.0's `frame.interface_id` shows the section-local id;
    /// in a single-section file the two agree). pcap: always 0.
    pub interface: u32,
    /// Length on the wire.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
    /// Byte offset of the record (pcap record header or pcapng block) in the file;
    /// for live capture, 0.
    pub file_offset: u64,
    /// From pcapng `epb_flags`, when present.
    pub direction: Option<Direction>,
    /// The first pcapng `opt_comment` (its valid UTF-8 prefix).
    pub comment: Option<&'a str>,
}

/// A stream of captured packets: a file [`Reader`], or a live capture. `Ok(None)` is
/// the end (end of file, packet count reached, or Ctrl-C).
pub trait PacketSource {
    fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError>;
}

impl<T: PacketSource + ?Sized> PacketSource for &mut T {
    fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        (**self).next_packet()
    }
}

impl<T: PacketSource + ?Sized> PacketSource for Box<T> {
    fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        (**self).next_packet()
    }
}

/// The wall clock as time since the Unix epoch, the way capture timestamps count
/// it (zero for a clock set before 1970): the one reading of "now" every layer
/// uses for timestamps, file names and dates.
pub fn unix_now() -> std::time::Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
}

/// [`unix_now`] in nanoseconds, as frames are stamped (the lab switch's clock,
/// which the controller's notes of when things happened are set against).
pub fn unix_now_ns() -> u64 {
    u64::try_from(unix_now().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
