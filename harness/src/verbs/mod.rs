//! A safe layer over libibverbs and librdmacm (through `rdma-sys`): device, port
//! and GID, PD, CQ, MR, address handles ([`device`]); queue pairs whose bring-up
//! is a chain of types, posting only on a QP in RTS ([`qp`]); rdma_cm connections
//! ([`cm`]); the verbs vocabulary by name ([`names`]); and errors that say which
//! verb failed and whether the device simply lacks it ([`error`]).
//!
//! Ownership mirrors the verbs object graph: a QP holds its PD and CQ, an MR its
//! PD, a PD its context (all `Arc`s), so nothing is destroyed while something built
//! on it lives, and `Drop` releases each object once, children first.
//!
//! Owns: every `unsafe` call into rdma-sys in the harness; each block says why it
//! is sound. Imports: nothing of the harness.
pub mod cm;
pub mod device;
pub mod error;
pub mod names;
pub mod qp;

pub use cm::CmConn;
pub use device::{Ah, Completion, Context, Cq, Mr, Pd};
pub use error::{Result, VerbError};
pub use names::{Access, SendFlag, WcOpcode, WcStatus};
pub use qp::{Caps, Init, Peer, Qp, QpAttrs, QpKind, Remote, Reset, Rtr, Rts, SendWr, Sge};
