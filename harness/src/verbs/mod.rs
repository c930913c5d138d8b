//! A safe layer over libibverbs and librdmacm (through `rdma-sys`): device, port
//! and GID, PD, CQ, MR, address handles ([`device`]); queue pairs whose bring-up
//! is a chain of types, sends posted only on a QP in RTS or on one a scenario steers
//! through its states itself (`Steered`: the device then decides), receives from
//! INIT on ([`qp`]; posting SGEs is `unsafe`: the device uses their raw addresses
//! after the call returns); rdma_cm connections ([`cm`]); the verbs vocabulary by
//! name ([`names`]); what a device can do, as features scenarios require
//! ([`caps`]); memory windows and SRQs ([`device`]); the extended verbs rdma-sys
//! gets wrong, done as verbs.h does them (`ext`); and errors that say which verb
//! failed and whether the device simply lacks it ([`error`]).
//!
//! Ownership mirrors the verbs object graph: a QP holds its PD and CQ, an MR its
//! PD, a PD its context (all `Arc`s), so nothing is destroyed while something built
//! on it lives, and `Drop` releases each object once, children first.
//!
//! Owns: every `unsafe` call into rdma-sys in the harness; each block says why it
//! is sound. Imports: nothing of the harness.
pub(crate) mod caps;
pub(crate) mod cm;
pub(crate) mod device;
pub(crate) mod error;
mod ext;
pub(crate) mod names;
pub(crate) mod qp;

pub(crate) use caps::Feature;
pub(crate) use cm::CmConn;
pub(crate) use device::{
    Ah, Completion, Context, Cq, GuardDamage, Guards, Mr, Mw, MwKind, Pd, GUARD,
};
pub(crate) use error::VerbError;
pub(crate) use names::{
    Access, Errno, EventType, QpStateName, SendFlag, WcFlags, WcOpcode, WcStatus,
};
pub(crate) use qp::{
    Binding, Caps, FlushWr, Given, Peer, Placement, Qp, QpAttrs, QpExtras, QpKind, QpParams,
    Remote, Reset, Rts, Selectivity, SendWr, Sge, Srq, Steered,
};
