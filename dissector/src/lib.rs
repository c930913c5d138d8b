//! `dissector`: a zero-copy decoder for RoCE traffic — RoCEv2 (InfiniBand transport
//! over UDP port 4791) and RoCEv1 (ethertype 0x8915) — plus the analysis built on it.
//!
//! Layout, from the bytes up:
//! - [`wire`]: one module per header, each a zero-copy `Packet<T: AsRef<[u8]>>` view
//!   and an owned `Repr` that parses from and emits into that view (smoltcp's style);
//!   the opcode table; the ICRC.
//! - [`frame`]: lax decoding of a whole captured frame, link layer to payload; a frame
//!   that stops early keeps the layers that parsed and says where and why it stopped.
//! - [`fields`]: tshark's field names over a decoded frame, and [`filter`]: display
//!   filters in tshark's syntax over those fields.
//! - [`capture`]: pcap and pcapng readers and writers. The only module doing I/O, and
//!   only through the `Read`/`Write` values handed to it.
//! - [`flow`]: per-QP flow analysis, and go-back-N / RNR-timer rules ([`flow::recovery`]).
//! - [`fields`], [`print`](mod@print): tshark's field names and the one printer; [`craft`],
//!   [`corpus`]: building frames, and the project's synthetic captures; [`text`]:
//!   numbers, hex and did-you-mean for text users type.
//!
//! The RoCE vocabulary every layer above uses lives here, once: [`wire::Psn`],
//! [`wire::NakCode`], [`wire::AckClass`], [`wire::NakKind`], [`wire::Opcode`] and its
//! names. Owns: the wire. Imports: nothing of the project.
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

pub mod capture;
pub mod corpus;
pub mod craft;
pub mod ctx;
pub mod fields;
pub mod filter;
pub mod flow;
pub mod frame;
pub mod linktype;
pub mod print;
pub mod text;
pub mod wire;

pub use linktype::LinkType;
