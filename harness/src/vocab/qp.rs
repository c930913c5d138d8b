//! The plain data of a queue pair: its transport, queue sizes, the attributes
//! of its bring-up and the transport parameters both ends share, and what a
//! FLUSH asks for. Scenarios, the agent protocol and the verbs layer all hold
//! these; nothing here calls libibverbs.
//!
//! Owns: [`QpKind`], [`Caps`], [`QpAttrs`], [`QpParams`], [`Peer`], [`Placement`],
//! [`Selectivity`]. Imports: `super::names::Access`; `serde`.
use super::names::Access;

/// The transport of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum QpKind {
    Rc,
    Uc,
    Ud,
}

/// Queue depths and SGE limits asked for at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Caps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_sge: u32,
    pub max_inline: u32,
}

/// RDMA FLUSH: what must be made durable or visible (IBA A19 placement type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Placement {
    /// `IBV_FLUSH_GLOBAL`.
    Global,
    /// `IBV_FLUSH_PERSISTENT`.
    Persistent,
}

/// RDMA FLUSH: how much of the MR (selectivity level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Selectivity {
    /// `IBV_FLUSH_RANGE`: the range given.
    Range,
    /// `IBV_FLUSH_MR`: the whole MR the rkey names.
    Mr,
}

impl Placement {
    /// `enum ibv_placement_type` (rdma-core 56 verbs.h).
    pub(crate) fn raw(self) -> u8 {
        match self {
            Placement::Global => 1 << 0,
            Placement::Persistent => 1 << 1,
        }
    }
}

impl Selectivity {
    /// `enum ibv_selectivity_level` (rdma-core 56 verbs.h).
    pub(crate) fn raw(self) -> u8 {
        match self {
            Selectivity::Range => 0,
            Selectivity::Mr => 1,
        }
    }
}

/// What RTR needs to know about the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Peer {
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
}

/// The attributes of INIT → RTR → RTS, as the scenario set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct QpAttrs {
    pub port: u8,
    pub sgid_index: u8,
    pub sq_psn: u32,
    /// `qp_access_flags`: what the peer may do to this side's memory.
    pub access: Access,
    pub params: QpParams,
}

/// How a QP runs its transport, the same on both of its ends: the one home of
/// these attributes, which the scenario model, the agent protocol and the
/// bring-up above ([`QpAttrs`]) all hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QpParams {
    /// Path MTU in bytes (256–4096).
    pub mtu: u32,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout; 0 never fires.
    pub timeout: u8,
    /// Resends after the ACK timer fires (0–7).
    pub retry_cnt: u8,
    /// Resends after RNR NAKs (0–7; 7 means forever).
    pub rnr_retry: u8,
    /// The RNR timer code (0–31) this side's RNR NAKs ask for.
    pub min_rnr_timer: u8,
    /// READs and atomics this side may have outstanding, and accept.
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    /// UD Q_Key.
    pub qkey: u32,
}
