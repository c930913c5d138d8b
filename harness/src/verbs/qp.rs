//! Queue pairs, their bring-up as types: `Qp<Reset>` → `Qp<Init>` → `Qp<Rtr>` →
//! `Qp<Rts>`. Each transition consumes the QP and hands back the next state (a
//! failed one destroys it: a half-brought-up QP is of no use). Receives can be
//! posted from INIT on; sends only on a QP in RTS — the compiler says so, not a
//! runtime check. A conformance scenario that moves a QP through its states
//! itself (to SQD, ERR, RESET and back, or where the state machine does not go)
//! steers it: `Qp<Steered>` takes every verb, and the device's answer is the
//! point; the attributes each transition requires are built in one place for both.
//!
//! Owns: [`Qp`] and its states, [`QpAttrs`], [`Srq`], send and receive work requests
//! ([`SendWr`], [`Sge`]). Imports: `super::device`, `super::error`, `super::ext`,
//! `crate::vocab`; `rdma_sys`, libc.
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;

use rdma_sys::*;

use super::device::{mtu_enum, Ah, Cq, Mr, Mw, Pd};
use super::error::{Result, VerbError};
use crate::vocab::QpStateName;
use crate::vocab::{Access, Caps, MwKind, Peer, Placement, QpAttrs, QpKind, Selectivity};

/// `ibv_qp_type` of a transport.
fn qp_type(k: QpKind) -> u32 {
    match k {
        QpKind::Rc => ibv_qp_type::IBV_QPT_RC,
        QpKind::Uc => ibv_qp_type::IBV_QPT_UC,
        QpKind::Ud => ibv_qp_type::IBV_QPT_UD,
    }
}

/// What a QP is created with beyond its queues: the extended send operations
/// that only the `ibv_wr_*` API posts (the QP is then made with
/// `ibv_create_qp_ex`), and a shared receive queue.
#[derive(Clone, Default)]
pub(crate) struct QpExtras {
    pub atomic_write: bool,
    pub flush: bool,
    pub srq: Option<Arc<Srq>>,
}

/// `IBV_QP_EX_WITH_FLUSH` (rdma-core 56 `libibverbs/verbs.h`, `enum
/// ibv_qp_create_send_ops_flags`); rdma-core 44, which rdma-sys binds here, has
/// no name for it. A libibverbs or provider without FLUSH refuses the QP
/// (`EOPNOTSUPP`): the scenario is skipped.
const IBV_QP_EX_WITH_FLUSH: u64 = 1 << 11;

/// `struct ibv_qp_ex` as rdma-core 56 has it: rdma-core 44's (which rdma-sys
/// binds: it ends with `wr_atomic_write`), then `wr_flush`, appended in rdma-core
/// 45 (linux-rdma/rdma-core `libibverbs/verbs.h`, v56.4 lines 1347–1352:
/// `void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr,
/// size_t len, uint8_t type, uint8_t level);`). Only read through a QP created
/// with [`IBV_QP_EX_WITH_FLUSH`], which a library that lacks the member refuses.
#[repr(C)]
struct QpExWithFlush {
    base: ibv_qp_ex,
    wr_flush: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            rkey: u32,
            remote_addr: u64,
            len: usize,
            kind: u8,
            level: u8,
        ),
    >,
}

// The appended member starts right where rdma-core 44's struct ends: no padding
// between (every member of ibv_qp_ex is 8-aligned at its end).
const _: () =
    assert!(std::mem::offset_of!(QpExWithFlush, wr_flush) == std::mem::size_of::<ibv_qp_ex>());

/// QP states, as type parameters.
pub(crate) struct Reset;
pub(crate) struct Init;
pub(crate) struct Rtr;
pub(crate) struct Rts;
/// A QP a scenario moves through its states itself (`modify_qp` steps): this
/// program no longer knows its state, and every verb on it is the device's to
/// accept or refuse, which is what such a scenario checks.
pub(crate) struct Steered;

/// States a receive may be posted in (IBA 10.8.2: from INIT on).
pub(crate) trait Receiving {}
impl Receiving for Init {}
impl Receiving for Rtr {}
impl Receiving for Rts {}
impl Receiving for Steered {}

/// The states a QP takes send WRs in: RTS, as brought up, or wherever a scenario
/// steered it (the device then decides).
pub(crate) trait Sending {}
impl Sending for Rts {}
impl Sending for Steered {}

/// The QP object itself; destroyed once, when the last state holding it drops.
struct Raw {
    qp: *mut ibv_qp,
    /// The extended view (`ibv_qp_to_qp_ex`), for a QP made with extra send ops.
    qpx: *mut ibv_qp_ex,
    /// Made with `IBV_QP_EX_WITH_FLUSH` (so `wr_flush` exists).
    flush: bool,
    kind: QpKind,
    // Kept so the PD and CQ outlive the QP: destroying a CQ with a QP on it fails
    // with EBUSY, and deallocating a PD with a QP on it too.
    _pd: Arc<Pd>,
    _cq: Arc<Cq>,
    // Destroying an SRQ with a QP on it fails (EBUSY).
    _srq: Option<Arc<Srq>>,
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
// safe", ibv_open_device(3)); the pointer is only freed in Drop. Not `Sync`: the
// extended post (`ibv_wr_start` .. `ibv_wr_complete`) builds one WR in the QP's
// shared `ibv_qp_ex` across several calls, which two threads posting through
// `&Qp` would interleave; the provider's lock covers each call, not the bracket.
unsafe impl<S> Send for Qp<S> {}
static_assertions::assert_not_impl_any!(Qp<Rts>: Sync);

impl<S> Qp<S> {
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: the QP is alive until Drop.
        unsafe { (*self.raw.qp).qp_num }
    }

    pub(crate) fn kind(&self) -> QpKind {
        self.raw.kind
    }

    /// What its asynchronous events name it by (the `ibv_qp` address).
    pub(crate) fn id(&self) -> usize {
        self.raw.qp as usize
    }

    fn modify<T>(
        self,
        attr: &mut ibv_qp_attr,
        mask: u32,
        verb: &str,
        hint: Option<String>,
    ) -> Result<Qp<T>> {
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
    pub(crate) fn new(
        pd: &Arc<Pd>,
        cq: &Arc<Cq>,
        kind: QpKind,
        caps: Caps,
        extras: QpExtras,
    ) -> Result<Qp<Reset>> {
        let cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: caps.max_sge,
            max_recv_sge: caps.max_sge,
            max_inline_data: caps.max_inline,
        };
        let srq = extras.srq.as_ref().map_or(ptr::null_mut(), |s| s.srq);
        let extended = extras.atomic_write || extras.flush;
        // One set of attributes either way: with only the PD in comp_mask,
        // create_qp_ex is ibv_create_qp (as in verbs.h); the send-op flags make it
        // the extended creation ATOMIC WRITE and FLUSH need.
        // SAFETY: zeroed init attributes are valid; pointers set below are alive.
        let mut init: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
        init.send_cq = cq.cq;
        init.recv_cq = cq.cq;
        init.srq = srq;
        init.cap = cap;
        init.qp_type = qp_type(kind);
        init.pd = pd.pd;
        init.comp_mask = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0;
        if extended {
            use ibv_qp_create_send_ops_flags as F;
            let mut ops = [
                F::IBV_QP_EX_WITH_RDMA_WRITE,
                F::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
                F::IBV_QP_EX_WITH_SEND,
                F::IBV_QP_EX_WITH_SEND_WITH_IMM,
                F::IBV_QP_EX_WITH_RDMA_READ,
                F::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
                F::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
            ]
            .iter()
            .fold(0u64, |a, f| a | u64::from(f.0));
            if extras.atomic_write {
                ops |= u64::from(F::IBV_QP_EX_WITH_ATOMIC_WRITE.0);
            }
            if extras.flush {
                ops |= IBV_QP_EX_WITH_FLUSH;
            }
            init.comp_mask |= ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.0;
            init.send_ops_flags = ops;
        }
        // SAFETY: the context, pd, cq and srq are alive and outlive the QP (Arcs);
        // NULL with errno set on failure (EOPNOTSUPP without create_qp_ex).
        let qp = unsafe { super::ext::create_qp_ex((*pd.pd).context, &mut init) };
        let verb = if extended { "ibv_create_qp_ex" } else { "ibv_create_qp" };
        if qp.is_null() {
            let hint = if extended {
                "the send operations asked for (ATOMIC WRITE, FLUSH) need a libibverbs, provider and kernel that have them".to_string()
            } else {
                format!(
                    "queue sizes (send {} recv {} sge {} inline {}) may exceed the device's limits",
                    caps.max_send_wr, caps.max_recv_wr, caps.max_sge, caps.max_inline
                )
            };
            return Err(VerbError::last(verb, Some(hint)));
        }
        let qpx = if extended {
            // SAFETY: qp was made by ibv_create_qp_ex with send ops flags, which is
            // what ibv_qp_to_qp_ex requires.
            unsafe { ibv_qp_to_qp_ex(qp) }
        } else {
            ptr::null_mut()
        };
        Ok(Qp {
            raw: Raw {
                qp,
                qpx,
                flush: extras.flush,
                kind,
                _pd: pd.clone(),
                _cq: cq.clone(),
                _srq: extras.srq,
            },
            _state: PhantomData,
        })
    }

    /// RESET → INIT: port, P_Key index, and the access flags (RC/UC) or Q_Key (UD).
    pub(crate) fn init(self, a: &QpAttrs) -> Result<Qp<Init>> {
        let (mut x, mask) = init_attrs(self.kind(), a);
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
        let (mut x, mask) = rtr_attrs(self.kind(), a, peer)?;
        self.modify(&mut x, mask, "ibv_modify_qp(RTR)", Some(gid_hint(a)))
    }
}

impl Qp<Rtr> {
    /// RTR → RTS: the first send PSN, and for RC the ACK timeout, retry counts and
    /// outstanding READ/atomic depth.
    pub(crate) fn ready_to_send(self, a: &QpAttrs) -> Result<Qp<Rts>> {
        let (mut x, mask) = rts_attrs(self.kind(), a);
        self.modify(&mut x, mask, "ibv_modify_qp(RTS)", None)
    }
}

fn gid_hint(a: &QpAttrs) -> String {
    format!("RoCEv2 needs a GID on both sides: sgid index {} must be the IPv4-mapped GID (index 1 on rxe)", a.sgid_index)
}

/// The attributes RESET → INIT requires: port, P_Key index, and the access flags
/// (RC/UC) or Q_Key (UD).
fn init_attrs(kind: QpKind, a: &QpAttrs) -> (ibv_qp_attr, u32) {
    use ibv_qp_attr_mask as M;
    // SAFETY: zeroed attributes are valid.
    let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
    x.qp_state = ibv_qp_state::IBV_QPS_INIT;
    x.pkey_index = 0;
    x.port_num = a.port;
    let mut mask = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0;
    if kind == QpKind::Ud {
        x.qkey = a.params.qkey;
        mask |= M::IBV_QP_QKEY.0;
    } else {
        x.qp_access_flags = a.access.0;
        mask |= M::IBV_QP_ACCESS_FLAGS.0;
    }
    (x, mask)
}

/// The attributes INIT → RTR requires: for RC and UC the path to `peer` (its QPN,
/// its first PSN, its GID), and for RC the responder's depth and RNR timer.
fn rtr_attrs(kind: QpKind, a: &QpAttrs, peer: Option<Peer>) -> Result<(ibv_qp_attr, u32)> {
    use ibv_qp_attr_mask as M;
    // SAFETY: zeroed attributes are valid.
    let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
    x.qp_state = ibv_qp_state::IBV_QPS_RTR;
    let mut mask = M::IBV_QP_STATE.0;
    if kind != QpKind::Ud {
        let p = peer.ok_or_else(|| {
            VerbError::not_called("ibv_modify_qp(RTR)", "an RC or UC QP needs its peer")
        })?;
        x.path_mtu = mtu_enum(a.params.mtu);
        x.dest_qp_num = p.qpn;
        x.rq_psn = p.psn;
        x.ah_attr.is_global = 1;
        x.ah_attr.port_num = a.port;
        x.ah_attr.grh.dgid.raw = p.gid;
        x.ah_attr.grh.sgid_index = a.sgid_index;
        x.ah_attr.grh.hop_limit = 64;
        mask |= M::IBV_QP_AV.0 | M::IBV_QP_PATH_MTU.0 | M::IBV_QP_DEST_QPN.0 | M::IBV_QP_RQ_PSN.0;
        if kind == QpKind::Rc {
            x.max_dest_rd_atomic = a.params.max_dest_rd_atomic;
            x.min_rnr_timer = a.params.min_rnr_timer;
            mask |= M::IBV_QP_MAX_DEST_RD_ATOMIC.0 | M::IBV_QP_MIN_RNR_TIMER.0;
        }
    }
    Ok((x, mask))
}

/// The attributes RTR → RTS requires: the first send PSN, and for RC the ACK
/// timeout, retry counts and outstanding READ/atomic depth.
fn rts_attrs(kind: QpKind, a: &QpAttrs) -> (ibv_qp_attr, u32) {
    use ibv_qp_attr_mask as M;
    // SAFETY: zeroed attributes are valid.
    let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
    x.qp_state = ibv_qp_state::IBV_QPS_RTS;
    x.sq_psn = a.sq_psn;
    let mut mask = M::IBV_QP_STATE.0 | M::IBV_QP_SQ_PSN.0;
    if kind == QpKind::Rc {
        x.timeout = a.params.timeout;
        x.retry_cnt = a.params.retry_cnt;
        x.rnr_retry = a.params.rnr_retry;
        x.max_rd_atomic = a.params.max_rd_atomic;
        mask |= M::IBV_QP_TIMEOUT.0
            | M::IBV_QP_RETRY_CNT.0
            | M::IBV_QP_RNR_RETRY.0
            | M::IBV_QP_MAX_QP_RD_ATOMIC.0;
    }
    (x, mask)
}

/// What a `modify_qp` step gives besides the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Given {
    /// What the transition requires, taken from the QP's setup (IBA 10.3.1's
    /// table): the path on INIT → RTR, PSN and timers on RTR → RTS, …
    Required,
    /// The state alone: a transition that requires more must be refused.
    StateOnly,
}

impl<S> Qp<S> {
    /// The same QP, from now on moved through its states by the scenario.
    pub(crate) fn steer(self) -> Qp<Steered> {
        Qp { raw: self.raw, _state: PhantomData }
    }

    /// The state the device says the QP is in (`ibv_query_qp`).
    pub(crate) fn state(&self) -> Result<QpStateName> {
        // SAFETY: zeroed attribute blocks are valid out-parameters.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the QP is alive; both blocks are valid for writing.
        let rc = unsafe {
            ibv_query_qp(self.raw.qp, &mut x, ibv_qp_attr_mask::IBV_QP_STATE.0 as i32, &mut init)
        };
        VerbError::check("ibv_query_qp", rc, None)?;
        Ok(QpStateName(x.qp_state))
    }
}

impl Qp<Steered> {
    /// Asks the device to move the QP to `to` (`ibv_modify_qp`), with what the
    /// transition from the state it is in requires (or, `Given::StateOnly`, the
    /// state alone), and `access` when given (an optional attribute from INIT on).
    /// A refusal is the device's answer, returned as the error; the QP stays usable.
    pub(crate) fn move_to(
        &self,
        to: QpStateName,
        a: &QpAttrs,
        peer: Option<Peer>,
        given: Given,
        access: Option<Access>,
    ) -> Result<()> {
        use ibv_qp_attr_mask as M;
        let kind = self.kind();
        let from = self.state()?;
        let verb = format!("ibv_modify_qp({} → {})", short(from), short(to));
        let (mut x, mut mask) = match (given, to) {
            (Given::StateOnly, _) => {
                // SAFETY: zeroed attributes are valid.
                let x: ibv_qp_attr = unsafe { std::mem::zeroed() };
                (x, M::IBV_QP_STATE.0)
            }
            (Given::Required, QpStateName::INIT) if from == QpStateName::RESET => {
                init_attrs(kind, a)
            }
            (Given::Required, QpStateName::RTR) if from == QpStateName::INIT => {
                rtr_attrs(kind, a, peer)?
            }
            (Given::Required, QpStateName::RTS) if from == QpStateName::RTR => rts_attrs(kind, a),
            (Given::Required, QpStateName::SQD) => {
                // SAFETY: zeroed attributes are valid.
                let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
                x.en_sqd_async_notify = 1;
                (x, M::IBV_QP_STATE.0 | M::IBV_QP_EN_SQD_ASYNC_NOTIFY.0)
            }
            // RTS → RTS, SQD → RTS, INIT → INIT, to ERR or RESET, or a transition
            // the state machine does not have: the state (and what the step adds).
            (Given::Required, _) => {
                // SAFETY: zeroed attributes are valid.
                let x: ibv_qp_attr = unsafe { std::mem::zeroed() };
                (x, M::IBV_QP_STATE.0)
            }
        };
        x.qp_state = to.0;
        if let Some(acc) = access.filter(|_| kind != QpKind::Ud) {
            x.qp_access_flags = acc.0;
            mask |= M::IBV_QP_ACCESS_FLAGS.0;
        }
        // SAFETY: the QP is alive; x is valid for the bits in mask.
        let rc = unsafe { ibv_modify_qp(self.raw.qp, &mut x, mask as i32) };
        let hint = (to == QpStateName::RTR).then(|| gid_hint(a));
        VerbError::check(verb, rc, hint)
    }
}

/// `IBV_QPS_RTS` → `RTS`.
fn short(s: QpStateName) -> String {
    let n = s.to_string();
    n.strip_prefix("IBV_QPS_").map(str::to_string).unwrap_or(n)
}

/// One scatter/gather element: address, length, lkey.
///
/// Raw numbers, not a borrow: the device reads or writes the bytes after the verb
/// that posts it has returned, so posting one is `unsafe` (see [`Qp::post_send`]).
/// The device reaches `addr..addr + len` only through the registration `lkey` names
/// and only inside it: a range past that MR, or a key that names none, it refuses
/// (the WR completes in error) without touching memory. Inline data is the
/// exception: the provider copies it with the CPU as it is posted, checking no key.
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
    /// # Safety
    ///
    /// The device writes a message that arrives into the SGEs after this returns,
    /// until the WR is done (its completion, a flush in error included, has been
    /// generated) or the QP is destroyed. For that whole time, for each SGE:
    ///
    /// - whatever memory is registered under `lkey` (the key may be stale, or wrong
    ///   on purpose) stays allocated as long as it is registered: it may be
    ///   deregistered early (once `ibv_dereg_mr` returns the device no longer
    ///   reaches it) but not freed first;
    /// - no Rust reference (`&`, `&mut`) to the bytes of `addr..addr + len` in it
    ///   is alive: they are touched only through raw copies, as [`Mr`]'s are, which
    ///   may see the device's write in part.
    pub(crate) unsafe fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<()> {
        let mut sg = sg_list(sges);
        let mut w = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sg.as_mut_ptr(),
            num_sge: sg.len() as i32,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is alive; w and sg live until the call returns (the
        // provider copies the WR); the memory the SGEs name is the caller's to keep
        // (this fn's contract).
        let rc = unsafe { ibv_post_recv(self.raw.qp, &mut w, &mut bad) };
        VerbError::check("ibv_post_recv", rc, None)
    }
}

/// A shared receive queue: receives posted on it serve every QP created on it.
pub(crate) struct Srq {
    pub(super) srq: *mut ibv_srq,
    _pd: Arc<Pd>,
}

// SAFETY: see Context.
unsafe impl Send for Srq {}
// SAFETY: as for Send: shared references only reach thread-safe verbs.
unsafe impl Sync for Srq {}

impl Srq {
    pub(crate) fn new(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<Arc<Srq>> {
        let mut init = ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
        };
        // SAFETY: pd is alive; init is a valid attribute block.
        let srq = unsafe { ibv_create_srq(pd.pd, &mut init) };
        if srq.is_null() {
            return Err(VerbError::last(
                format!("ibv_create_srq(max_wr {max_wr}, max_sge {max_sge})"),
                None,
            ));
        }
        Ok(Arc::new(Srq { srq, _pd: pd.clone() }))
    }

    /// What its asynchronous events name it by.
    pub(crate) fn id(&self) -> usize {
        self.srq as usize
    }

    /// Arms the limit event: `IBV_EVENT_SRQ_LIMIT_REACHED` comes once, when fewer
    /// than `limit` receives are left on the queue.
    pub(crate) fn arm_limit(&self, limit: u32) -> Result<()> {
        let mut a = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: limit };
        // SAFETY: srq is alive; a is valid for the IBV_SRQ_LIMIT bit.
        let rc =
            unsafe { ibv_modify_srq(self.srq, &mut a, ibv_srq_attr_mask::IBV_SRQ_LIMIT.0 as i32) };
        VerbError::check(format!("ibv_modify_srq(limit {limit})"), rc, None)
    }

    /// Posts one receive WR on the shared queue.
    ///
    /// # Safety
    ///
    /// As [`Qp::post_recv`]'s, for as long as the device may use the WR: until a
    /// QP on this SRQ has consumed it and its completion has been generated, or
    /// the SRQ (or every QP on it) is destroyed.
    pub(crate) unsafe fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<()> {
        let mut sg = sg_list(sges);
        let mut w = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sg.as_mut_ptr(),
            num_sge: sg.len() as i32,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: the SRQ is alive; w and sg live until the call returns (the
        // provider copies the WR); the memory the SGEs name is the caller's to keep
        // (this fn's contract).
        let rc = unsafe { ibv_post_srq_recv(self.srq, &mut w, &mut bad) };
        VerbError::check("ibv_post_srq_recv", rc, None)
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_srq; QPs on it hold Arcs to it and are gone.
        unsafe { ibv_destroy_srq(self.srq) };
    }
}

/// What a window is bound to: `len` bytes of `mr` from `addr`, with `access`.
#[derive(Clone, Copy)]
pub(crate) struct Binding<'a> {
    pub mr: &'a Mr,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
}

/// An RDMA FLUSH: `len` bytes from `addr` under `rkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlushWr {
    pub rkey: u32,
    pub addr: u64,
    pub len: usize,
    pub placement: Placement,
    pub level: Selectivity,
}

/// Where a send-queue WR goes.
pub(crate) enum Remote<'a> {
    None,
    Rdma {
        addr: u64,
        rkey: u32,
    },
    Atomic {
        addr: u64,
        rkey: u32,
        compare_add: u64,
        swap: u64,
    },
    Ud {
        ah: &'a Ah,
        qpn: u32,
        qkey: u32,
    },
    /// `IBV_WR_SEND_WITH_INV` and `IBV_WR_LOCAL_INV`: the rkey to invalidate.
    Invalidate {
        rkey: u32,
    },
    /// `IBV_WR_BIND_MW` (a type 2 window), under the new rkey `rkey`.
    Bind {
        mw: &'a Mw,
        rkey: u32,
        to: Binding<'a>,
    },
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

impl<S: Sending> Qp<S> {
    /// Posts one send-queue WR.
    ///
    /// # Safety
    ///
    /// The device reads the SGEs (a SEND, a WRITE) or writes them (an RDMA READ's
    /// data, an atomic's original value) after this returns, until the WR is done
    /// (its completion, or for an unsignalled WR that of a later WR on this send
    /// queue, has been generated, a flush in error included) or the QP is
    /// destroyed. For that whole time, for each SGE:
    ///
    /// - whatever memory is registered under `lkey` (the key may be stale, or wrong
    ///   on purpose) stays allocated as long as it is registered: it may be
    ///   deregistered early (once `ibv_dereg_mr` returns the device no longer
    ///   reaches it) but not freed first;
    /// - no Rust reference (`&`, `&mut`) to the bytes of `addr..addr + len` in it
    ///   is alive: they are touched only through raw copies, as [`Mr`]'s are, which
    ///   may see the device's write in part, or send a write of ours in part.
    ///
    /// With `IBV_SEND_INLINE` in `wr.flags` the provider copies each
    /// `addr..addr + len` with the CPU during this call, checking no key: those
    /// bytes must then be allocated, initialised and valid for reads (and nothing
    /// else is needed of them afterwards).
    pub(crate) unsafe fn post_send(&self, wr: &SendWr, sges: &[Sge]) -> Result<()> {
        self.ud_needs_an_address(&wr.remote, "ibv_post_send")?;
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
            Remote::Atomic { addr, rkey, compare_add, swap } => {
                w.wr.atomic = atomic_t { remote_addr: addr, compare_add, swap, rkey }
            }
            Remote::Ud { ah, qpn, qkey } => {
                w.wr.ud = ud_t { ah: ah.ah, remote_qpn: qpn, remote_qkey: qkey }
            }
            Remote::Invalidate { rkey } => {
                w.imm_data_invalidated_rkey_union.invalidated_rkey = rkey
            }
            Remote::Bind { mw, rkey, to } => {
                w.bind_mw_tso_union.bind_mw = bind_mw_t {
                    mw: mw.mw,
                    rkey,
                    bind_info: ibv_mw_bind_info {
                        mr: to.mr.raw(),
                        addr: to.addr,
                        length: to.len,
                        mw_access_flags: to.access.0,
                    },
                }
            }
        }
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is alive; w and sg live until the call returns (the
        // provider copies the WR, and inline data); the memory the SGEs name is
        // the caller's to keep (this fn's contract).
        let rc = unsafe { ibv_post_send(self.raw.qp, &mut w, &mut bad) };
        VerbError::check(
            "ibv_post_send",
            rc,
            Some("the SGEs must be inside registered MRs, inline data within max_inline".into()),
        )
    }
}

impl<S: Sending> Qp<S> {
    /// A UD QP's provider reads every send WR's address handle (`wr.ud.ah`, a
    /// union with the RDMA fields): a WR without one would have it dereference a
    /// remote address. Such a WR is not passed on.
    fn ud_needs_an_address(&self, remote: &Remote, verb: &str) -> Result<()> {
        if self.kind() == QpKind::Ud && !matches!(remote, Remote::Ud { .. }) {
            return Err(VerbError::not_called(
                verb,
                "a UD QP takes only SENDs with an address handle; its provider would read this WR's other fields as one",
            ));
        }
        Ok(())
    }

    fn extended(&self, verb: &str, flag: &str) -> Result<*mut ibv_qp_ex> {
        if self.raw.qpx.is_null() {
            return Err(VerbError::not_called(verb, format!("the QP was not created with {flag}")));
        }
        Ok(self.raw.qpx)
    }

    /// Posts one extended WR: `ibv_wr_start`, `build` (the operation and its
    /// SGEs), `ibv_wr_complete`.
    fn post_ex(
        &self,
        verb: &str,
        flag: &str,
        wr_id: u64,
        flags: u32,
        build: impl FnOnce(*mut ibv_qp_ex),
    ) -> Result<()> {
        let qpx = self.extended(verb, flag)?;
        // SAFETY: qpx is the extended view of this live QP; wr_id and wr_flags are
        // plain fields read by the next operation; start/complete bracket it.
        let rc = unsafe {
            ibv_wr_start(qpx);
            (*qpx).wr_id = wr_id;
            (*qpx).wr_flags = flags;
            build(qpx);
            ibv_wr_complete(qpx)
        };
        VerbError::check(verb, rc, None)
    }

    /// Posts an ATOMIC WRITE of `value` (8 bytes, as they land) to `addr` under
    /// `rkey`.
    pub(crate) fn post_atomic_write(
        &self,
        wr_id: u64,
        flags: u32,
        rkey: u32,
        addr: u64,
        value: [u8; 8],
    ) -> Result<()> {
        self.ud_needs_an_address(&Remote::None, "ibv_wr_atomic_write")?;
        // SAFETY: the QP was created with IBV_QP_EX_WITH_ATOMIC_WRITE (extended()
        // checks there is an extended view, Qp::new set it only with that flag
        // among others); the provider copies the 8 bytes before returning.
        let set = |q: *mut ibv_qp_ex| unsafe {
            if let Some(f) = (*q).wr_atomic_write {
                f(q, rkey, addr, value.as_ptr().cast());
            }
        };
        self.post_ex("ibv_wr_atomic_write", "IBV_QP_EX_WITH_ATOMIC_WRITE", wr_id, flags, set)
    }

    /// Posts an RDMA FLUSH.
    pub(crate) fn post_flush(&self, wr_id: u64, flags: u32, fl: FlushWr) -> Result<()> {
        self.ud_needs_an_address(&Remote::None, "ibv_wr_flush")?;
        let FlushWr { rkey, addr, len, placement, level } = fl;
        if !self.raw.flush {
            return Err(VerbError::not_called(
                "ibv_wr_flush",
                "the QP was not created with IBV_QP_EX_WITH_FLUSH",
            ));
        }
        let qpx = self.extended("ibv_wr_flush", "IBV_QP_EX_WITH_FLUSH")?;
        // SAFETY: created with IBV_QP_EX_WITH_FLUSH, which only a libibverbs whose
        // struct ibv_qp_ex has wr_flush accepts: the member is there to read.
        let f = unsafe { (*qpx.cast::<QpExWithFlush>()).wr_flush };
        let Some(f) = f else {
            return Err(VerbError::from_errno(
                "ibv_wr_flush",
                libc::EOPNOTSUPP,
                Some("the provider set no wr_flush".into()),
            ));
        };
        // SAFETY: f is the provider's wr_flush for this QP, called between
        // ibv_wr_start and ibv_wr_complete.
        let set =
            |q: *mut ibv_qp_ex| unsafe { f(q, rkey, addr, len, placement.raw(), level.raw()) };
        self.post_ex("ibv_wr_flush", "IBV_QP_EX_WITH_FLUSH", wr_id, flags, set)
    }

    /// Binds a type 1 window with `ibv_bind_mw` (a WR on this QP). Its new rkey
    /// is [`Mw::rkey`] once this returns.
    pub(crate) fn bind_mw_type1(&self, mw: &Mw, wr_id: u64, flags: u32, to: Binding) -> Result<()> {
        self.ud_needs_an_address(&Remote::None, "ibv_bind_mw")?;
        if mw.kind != MwKind::Type1 {
            return Err(VerbError::not_called(
                "ibv_bind_mw",
                "ibv_bind_mw binds type 1 windows; a type 2 one is bound by a WR",
            ));
        }
        let mut b = ibv_mw_bind {
            wr_id,
            send_flags: flags,
            bind_info: ibv_mw_bind_info {
                mr: to.mr.raw(),
                addr: to.addr,
                length: to.len,
                mw_access_flags: to.access.0,
            },
        };
        // SAFETY: the QP, window and MR are alive; b is a valid bind description.
        let rc = unsafe { ibv_bind_mw(self.raw.qp, mw.mw, &mut b) };
        let hint = if to.access.contains(Access::ZERO_BASED) {
            "a type 1 window cannot be bound zero-based (IBA o10-36.2.2); a type 2 window can"
        } else {
            "the MR needs mw_bind access (and local_write for a window with remote write)"
        };
        VerbError::check("ibv_bind_mw", rc, Some(hint.into()))
    }
}
