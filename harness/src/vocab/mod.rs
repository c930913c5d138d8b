//! The verbs vocabulary, as plain data: completion statuses and opcodes, access
//! and send flags, async events and QP states by name ([`names`]); what a
//! device can do, as features scenarios require ([`caps`]); a QP's transport,
//! sizes and parameters ([`qp`]); the guard regions around every MR and the
//! kinds of memory window ([`memory`]).
//!
//! Scenarios, the agent protocol, the judge and the reports all speak it; only
//! the verbs layer turns it into libibverbs calls. So it builds without
//! rdma-core: `roce check`, `roce decode` and the other offline commands use it
//! in a build without the `verbs` feature.
//!
//! Owns: nothing beyond its modules. Imports: dissector's `UnknownName`; `serde`.
pub(crate) mod caps;
pub(crate) mod memory;
pub(crate) mod names;
pub(crate) mod qp;

pub(crate) use caps::Feature;
pub(crate) use memory::{GuardDamage, Guards, MwKind, GUARD};
pub(crate) use names::{
    Access, Errno, EventType, QpStateName, SendFlag, WcFlags, WcOpcode, WcStatus,
};
pub(crate) use qp::{Caps, Peer, Placement, QpAttrs, QpKind, QpParams, Selectivity};
