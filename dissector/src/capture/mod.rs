//! Capture files: pcap and pcapng, read and written.
//!
//! - Writers: [`PcapngWriter`] (several interfaces, ns timestamps, comments, direction)
//!   and [`PcapWriter`] (classic pcap, ns magic); [`AtomicFile`] / [`create_atomically`]
//!   so a file is either complete or absent.

mod write;

pub use write::{create_atomically, AtomicFile, OutPacket, PcapWriter, PcapngWriter, MAX_WRITE_CAPLEN};

/// Which way a packet went, relative to the capturing interface (pcapng `epb_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inbound,
    Outbound,
}
