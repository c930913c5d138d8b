//! `dissector`: a zero-copy decoder for RoCE traffic — RoCEv2 (InfiniBand transport
//! over UDP port 4791) and RoCEv1 (ethertype 0x8915) — plus the analysis built on it.
//!
//! Layout, from the bytes up, in the order `dissector/LAYERS` declares (a module
//! imports only from those below it; `rust-layers.py dissector/src` checks it):
//! - [`wire`]: one module per header, each a zero-copy `Packet<T: AsRef<[u8]>>` view
//!   and an owned `Repr` that parses from and emits into that view (smoltcp's style);
//!   the opcode table; the ICRC. Beside it [`linktype`] (`LINKTYPE_*`) and, at the
//!   floor, [`text`] (numbers, hex and did-you-mean for text users type) and [`diag`]
//!   (the one way a mistake in such text is shown: message, origin, caret, hint).
//! - [`frame`]: lax decoding of a whole captured frame, link layer to payload; a frame
//!   that stops early keeps the layers that parsed and says where and why it stopped.
//!   Beside it [`capture`]: pcap and pcapng readers and writers.
//! - [`craft`]: building frames from values (the emit side), and [`flow`]: per-QP flow
//!   analysis, go-back-N / RNR-timer rules ([`flow::recovery`]), a requester's pace
//!   ([`flow::pace`]) and the flow report.
//! - [`merge`]: two hosts' captures made one timeline, each frame matched across
//!   them by what it is (its tests craft frames).
//! - [`ctx`]: one frame in its capture, what every output below reads.
//! - [`print`](mod@print): the one printer (summary line, `-V` tree, JSON).
//! - [`fields`]: tshark's field names over a decoded frame, and [`filter`]: display
//!   filters in tshark's syntax over those fields.
//! - [`corpus`]: the project's synthetic captures.
//!
//! I/O: [`capture`] is the only module that touches the file system ([`capture::open`]
//! reads a capture by path; [`capture::AtomicFile`] writes a temporary file, syncs it
//! and renames it into place). The rest does no I/O of its own: [`corpus`] writes to
//! the `Write` it is handed, and [`fields::write()`] and the printers append to a buffer.
//!
//! The RoCE vocabulary every layer above uses lives here, once: [`wire::Psn`],
//! [`wire::NakCode`], [`wire::AckClass`], [`wire::NakKind`], [`wire::Opcode`] and its
//! names.
//!
//! Owns: the crate's module tree and its public paths. Imports: nothing of the project
//! (crc32fast, regex and serde are its main dependencies; annotate-snippets draws
//! [`diag`]'s reports).
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

pub mod capture;
pub mod corpus;
pub mod craft;
pub mod ctx;
pub mod diag;
pub mod fields;
pub mod filter;
pub mod flow;
pub mod frame;
pub mod linktype;
pub mod merge;
pub mod print;
pub mod text;
pub mod wire;

pub use linktype::LinkType;
