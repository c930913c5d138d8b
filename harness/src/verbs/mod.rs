//! A safe layer over libibverbs and librdmacm (through `rdma-sys`): device, port
//! and GID, PD, CQ, MR, address handles ([`device`]); queue pairs whose bring-up
//! is a chain of types, sends posted only on a QP in RTS or on one a scenario steers
//! through its states itself (`Steered`: the device then decides), receives from
//! INIT on ([`qp`]; posting SGEs is `unsafe`: the device uses their raw addresses
//! after the call returns); rdma_cm connections ([`cm`]); memory windows and SRQs
//! ([`device`]); the extended verbs rdma-sys
//! gets wrong, done as verbs.h does them (`ext`); and errors that say which verb
//! failed and whether the device simply lacks it ([`error`]).
//!
//! Ownership mirrors the verbs object graph: a QP holds its PD and CQ, an MR its
//! PD, a PD its context (all `Arc`s), so nothing is destroyed while something built
//! on it lives, and `Drop` releases each object once, children first.
//!
//! Owns: every `unsafe` call into rdma-sys in the harness; each block says why it
//! is sound. Imports: the plain data it takes and gives (`crate::vocab`:
//! names, features, QP parameters, guard regions), re-exported here.
pub(crate) mod cm;
pub(crate) mod device;
pub(crate) mod error;
mod ext;
pub(crate) mod qp;

pub(crate) use cm::CmConn;
pub(crate) use device::{Ah, Completion, Context, Cq, Mr, Mw, Pd};
pub(crate) use error::VerbError;
pub(crate) use qp::{
    Binding, FlushWr, Given, Qp, QpExtras, Remote, Reset, Rts, SendWr, Sge, Srq, Steered,
};
