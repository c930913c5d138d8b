//! Network I/O on this host, below everything that sends or records frames:
//! [`live`] capture in (libpcap), [`raw`] frames out (pnet).
//!
//! Owns: the libpcap and pnet handles. Imports: dissector only.
#[cfg(feature = "live")]
pub mod live;
pub(crate) mod raw;
