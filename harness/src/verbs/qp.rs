//! Queue pairs, their bring-up as types: `Qp<Reset>` → `Qp<Init>` → `Qp<Rtr>` →
//! `Qp<Rts>`. Each transition consumes the QP and hands back the next state (a
//! failed one destroys it: a half-brought-up QP is of no use). Receives can be
//! posted from INIT on; sends only on a QP in RTS — the compiler says so, not a
//! runtime check.
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;

use rdma_sys::*;

use super::device::{mtu_enum, Ah, Cq, Pd};
use super::error::{Result, VerbError};
use super::names::Access;

/// The transport of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum QpKind {
    Rc,
    Uc,
    Ud,
}

impl QpKind {
    fn raw(self) -> u32 {
        match self {
            QpKind::Rc => ibv_qp_type::IBV_QPT_RC,
            QpKind::Uc => ibv_qp_type::IBV_QPT_UC,
            QpKind::Ud => ibv_qp_type::IBV_QPT_UD,
        }
    }
}

/// Queue depths and SGE limits asked for at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Caps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_sge: u32,
    pub max_inline: u32,
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
    pub access: Access,
    pub qkey: u32,
    pub mtu: u32,
    pub sq_psn: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
}

/// QP states, as type parameters.
pub(crate) struct Reset;
pub(crate) struct Init;
pub(crate) struct Rtr;
pub(crate) struct Rts;

/// States a receive may be posted in (IBA 10.8.2: from INIT on).
pub(crate) trait Receiving {}
impl Receiving for Init {}
impl Receiving for Rtr {}
impl Receiving for Rts {}

/// The QP object itself; destroyed once, when the last state holding it drops.
struct Raw {
    qp: *mut ibv_qp,
    kind: QpKind,
    // Kept so the PD and CQ outlive the QP: destroying a CQ with a QP on it fails
    // with EBUSY, and deallocating a PD with a QP on it too.
    _pd: Arc<Pd>,
    _cq: Arc<Cq>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp; destroyed once, before its PD and CQ.
        unsafe { ibv_destroy_qp(self.qp) };
    }
}

/// A queue pair in state `S`.
pub(crate) struct Qp<S> {
    raw: Raw,
    _state: PhantomData<S>,
}

// SAFETY: libibverbs objects may be used from any thread ("all verbs are thread
// safe", ibv_open_device(3)); the pointer is only freed in Drop.
unsafe impl<S> Send for Qp<S> {}
unsafe impl<S> Sync for Qp<S> {}

impl<S> Qp<S> {
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: the QP is alive until Drop.
        unsafe { (*self.raw.qp).qp_num }
    }

    pub(crate) fn kind(&self) -> QpKind {
        self.raw.kind
    }

    fn modify<T>(self, attr: &mut ibv_qp_attr, mask: u32, verb: &str, hint: Option<String>) -> Result<Qp<T>> {
        // SAFETY: the QP is alive; attr is a valid block for the bits in mask.
        let rc = unsafe { ibv_modify_qp(self.raw.qp, attr, mask as i32) };
        VerbError::check(verb, rc, hint)?;
        Ok(Qp { raw: self.raw, _state: PhantomData })
    }

    /// Applies attributes computed elsewhere (rdma_cm's `rdma_init_qp_attr`),
    /// leaving the type alone: the caller moves it on with [`Qp::into_state`] once
    /// the sequence is done.
    pub(super) fn apply_raw(&self, attr: &mut ibv_qp_attr, mask: i32, verb: &str) -> Result<()> {
        // SAFETY: the QP is alive; attr and mask come from rdma_init_qp_attr.
        let rc = unsafe { ibv_modify_qp(self.raw.qp, attr, mask) };
        VerbError::check(verb, rc, None)
    }

    /// The same QP, in the state the caller took it to with [`Qp::apply_raw`].
    pub(super) fn into_state<T>(self) -> Qp<T> {
        Qp { raw: self.raw, _state: PhantomData }
    }
}

impl Qp<Reset> {
    pub(crate) fn new(pd: &Arc<Pd>, cq: &Arc<Cq>, kind: QpKind, caps: Caps) -> Result<Qp<Reset>> {
        let cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: caps.max_sge,
            max_recv_sge: caps.max_sge,
            max_inline_data: caps.max_inline,
        };
        // SAFETY: zeroed init attributes are valid; pointers set below are alive.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.cq;
        init.recv_cq = cq.cq;
        init.cap = cap;
        init.qp_type = kind.raw();
        // SAFETY: pd and cq are alive and outlive the QP (held as Arcs).
        let qp = unsafe { ibv_create_qp(pd.pd, &mut init) };
        if qp.is_null() {
            return Err(VerbError::last(
                "ibv_create_qp",
                Some(format!(
                    "queue sizes (send {} recv {} sge {} inline {}) may exceed the device's limits",
                    caps.max_send_wr, caps.max_recv_wr, caps.max_sge, caps.max_inline
                )),
            ));
        }
        Ok(Qp { raw: Raw { qp, kind, _pd: pd.clone(), _cq: cq.clone() }, _state: PhantomData })
    }

    /// RESET → INIT: port, P_Key index, and the access flags (RC/UC) or Q_Key (UD).
    pub(crate) fn init(self, a: &QpAttrs) -> Result<Qp<Init>> {
        use ibv_qp_attr_mask as M;
        // SAFETY: zeroed attributes are valid.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = ibv_qp_state::IBV_QPS_INIT;
        x.pkey_index = 0;
        x.port_num = a.port;
        let mut mask = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0;
        if self.kind() == QpKind::Ud {
            x.qkey = a.qkey;
            mask |= M::IBV_QP_QKEY.0;
        } else {
            x.qp_access_flags = a.access.0;
            mask |= M::IBV_QP_ACCESS_FLAGS.0;
        }
        self.modify(&mut x, mask, "ibv_modify_qp(INIT)", None)
    }

    /// RESET → INIT → RTR → RTS in one go, towards `peer` (UD has none).
    pub(crate) fn connect(self, a: &QpAttrs, peer: Option<Peer>) -> Result<Qp<Rts>> {
        self.init(a)?.ready_to_receive(a, peer)?.ready_to_send(a)
    }
}

impl Qp<Init> {
    /// INIT → RTR: the path to the peer (its QPN, its first PSN, its GID) for RC and
    /// UC; nothing for UD.
    pub(crate) fn ready_to_receive(self, a: &QpAttrs, peer: Option<Peer>) -> Result<Qp<Rtr>> {
        use ibv_qp_attr_mask as M;
        let kind = self.kind();
        // SAFETY: zeroed attributes are valid.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = ibv_qp_state::IBV_QPS_RTR;
        let mut mask = M::IBV_QP_STATE.0;
        if kind != QpKind::Ud {
            let p = peer.ok_or_else(|| VerbError::from_errno("ibv_modify_qp(RTR)", libc::EINVAL, Some("an RC or UC QP needs its peer".into())))?;
            x.path_mtu = mtu_enum(a.mtu);
            x.dest_qp_num = p.qpn;
            x.rq_psn = p.psn;
            x.ah_attr.is_global = 1;
            x.ah_attr.port_num = a.port;
            x.ah_attr.grh.dgid.raw = p.gid;
            x.ah_attr.grh.sgid_index = a.sgid_index;
            x.ah_attr.grh.hop_limit = 64;
            mask |= M::IBV_QP_AV.0 | M::IBV_QP_PATH_MTU.0 | M::IBV_QP_DEST_QPN.0 | M::IBV_QP_RQ_PSN.0;
            if kind == QpKind::Rc {
                x.max_dest_rd_atomic = a.max_dest_rd_atomic;
                x.min_rnr_timer = a.min_rnr_timer;
                mask |= M::IBV_QP_MAX_DEST_RD_ATOMIC.0 | M::IBV_QP_MIN_RNR_TIMER.0;
            }
        }
        let hint = Some(format!("RoCEv2 needs a GID on both sides: sgid index {} must be the IPv4-mapped GID (index 1 on rxe)", a.sgid_index));
        self.modify(&mut x, mask, "ibv_modify_qp(RTR)", hint)
    }
}

impl Qp<Rtr> {
    /// RTR → RTS: the first send PSN, and for RC the ACK timeout, retry counts and
    /// outstanding READ/atomic depth.
    pub(crate) fn ready_to_send(self, a: &QpAttrs) -> Result<Qp<Rts>> {
        use ibv_qp_attr_mask as M;
        // SAFETY: zeroed attributes are valid.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = ibv_qp_state::IBV_QPS_RTS;
        x.sq_psn = a.sq_psn;
        let mut mask = M::IBV_QP_STATE.0 | M::IBV_QP_SQ_PSN.0;
        if self.kind() == QpKind::Rc {
            x.timeout = a.timeout;
            x.retry_cnt = a.retry_cnt;
            x.rnr_retry = a.rnr_retry;
            x.max_rd_atomic = a.max_rd_atomic;
            mask |= M::IBV_QP_TIMEOUT.0 | M::IBV_QP_RETRY_CNT.0 | M::IBV_QP_RNR_RETRY.0 | M::IBV_QP_MAX_QP_RD_ATOMIC.0;
        }
        self.modify(&mut x, mask, "ibv_modify_qp(RTS)", None)
    }
}

/// One scatter/gather element: address, length, lkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sge {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

fn sg_list(sges: &[Sge]) -> Vec<ibv_sge> {
    sges.iter().map(|s| ibv_sge { addr: s.addr, length: s.len, lkey: s.lkey }).collect()
}

impl<S: Receiving> Qp<S> {
    /// Posts one receive WR.
    ///
    /// # Safety of the memory
    /// The device writes into the SGEs until the WR completes (or the QP is
    /// destroyed): they must lie inside MRs that live as long as this QP. The agent
    /// keeps every MR until after its QPs are destroyed.
    pub(crate) fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<()> {
        let mut sg = sg_list(sges);
        let mut w = ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: sg.as_mut_ptr(), num_sge: sg.len() as i32 };
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is alive; w and sg live until the call returns (the device
        // copies the WR); the buffers are in registered MRs the caller keeps.
        let rc = unsafe { ibv_post_recv(self.raw.qp, &mut w, &mut bad) };
        VerbError::check("ibv_post_recv", rc, None)
    }
}

/// Where a send-queue WR goes.
pub(crate) enum Remote<'a> {
    None,
    Rdma { addr: u64, rkey: u32 },
    Atomic { addr: u64, rkey: u32, compare_add: u64, swap: u64 },
    Ud { ah: &'a Ah, qpn: u32, qkey: u32 },
}

/// One send-queue WR, as `ibv_post_send` takes it.
pub(crate) struct SendWr<'a> {
    pub wr_id: u64,
    /// `ibv_wr_opcode`.
    pub opcode: u32,
    /// `ibv_send_flags`.
    pub flags: u32,
    pub imm_data: u32,
    pub remote: Remote<'a>,
}

impl Qp<Rts> {
    /// Posts one send-queue WR.
    ///
    /// # Safety of the memory
    /// The device reads (or, for READ and atomics, writes) the SGEs until the WR
    /// completes: they must lie inside MRs that live as long as this QP (inline data
    /// is copied at once).
    pub(crate) fn post_send(&self, wr: &SendWr, sges: &[Sge]) -> Result<()> {
        let mut sg = sg_list(sges);
        // SAFETY: zeroed ibv_send_wr is valid; the fields are set below.
        let mut w: ibv_send_wr = unsafe { std::mem::zeroed() };
        w.wr_id = wr.wr_id;
        w.sg_list = if sg.is_empty() { ptr::null_mut() } else { sg.as_mut_ptr() };
        w.num_sge = sg.len() as i32;
        w.opcode = wr.opcode;
        w.send_flags = wr.flags;
        w.imm_data_invalidated_rkey_union.imm_data = wr.imm_data.to_be();
        match wr.remote {
            Remote::None => {}
            Remote::Rdma { addr, rkey } => w.wr.rdma = rdma_t { remote_addr: addr, rkey },
            Remote::Atomic { addr, rkey, compare_add, swap } => w.wr.atomic = atomic_t { remote_addr: addr, compare_add, swap, rkey },
            Remote::Ud { ah, qpn, qkey } => w.wr.ud = ud_t { ah: ah.ah, remote_qpn: qpn, remote_qkey: qkey },
        }
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is alive; w and sg live until the call returns (the device
        // copies the WR); the data stays in registered MRs the caller keeps.
        let rc = unsafe { ibv_post_send(self.raw.qp, &mut w, &mut bad) };
        VerbError::check("ibv_post_send", rc, Some("the SGEs must be inside registered MRs, inline data within max_inline".into()))
    }
}
