//! A safe layer over libibverbs (through `rdma-sys`): device, port and GID, PD, CQ,
//! MR, QP with its state machine, address handles, posting and polling. This module
//! is the only place in the harness that calls verbs; every `unsafe` block says why
//! it is sound.
//!
//! Ownership mirrors the verbs object graph: a QP holds its PD and CQ, an MR its PD,
//! a PD its context (all `Arc`s), so nothing is destroyed while something built on it
//! lives, and `Drop` releases each object once, children first.
use std::ffi::CStr;
use std::fmt;
use std::ptr;
use std::sync::Arc;

use rdma_sys::*;

/// A verb that failed: which, the errno, and what probably caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbError {
    pub verb: String,
    pub errno: i32,
    pub hint: Option<String>,
}

impl VerbError {
    /// What failed and the errno, without the hint.
    pub fn what(&self) -> String {
        format!("{} failed: {}", self.verb, std::io::Error::from_raw_os_error(self.errno))
    }
}

impl fmt::Display for VerbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.what())?;
        if let Some(h) = &self.hint {
            write!(f, " — hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerbError {}

pub type Result<T> = std::result::Result<T, VerbError>;

fn fail(verb: impl Into<String>, hint: Option<String>) -> VerbError {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    VerbError { verb: verb.into(), errno, hint }
}

/// Verbs that return an errno (not -1 + errno) report it directly.
fn check(verb: impl Into<String>, rc: i32, hint: Option<String>) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(VerbError { verb: verb.into(), errno: if rc > 0 { rc } else { -rc }, hint })
    }
}

/// An open RDMA device.
pub struct Context {
    ctx: *mut ibv_context,
    pub name: String,
}

// SAFETY: libibverbs objects may be used from any thread ("all verbs are thread
// safe", ibv_open_device(3)); the pointer is only freed in Drop.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// Opens `name`, or the first device.
    pub fn open(name: Option<&str>) -> Result<Arc<Context>> {
        let mut n = 0;
        // SAFETY: n is a valid out pointer; the list is freed below.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = fail("ibv_get_device_list", None);
            let hint = if e.errno == libc::ENOSYS {
                "this kernel has no RDMA stack (ib_uverbs): run on an RDMA host or in the lab (`roce run` without --endpoints)"
            } else {
                "is libibverbs installed with a provider (rdma-core)?"
            };
            return Err(VerbError { hint: Some(hint.into()), ..e });
        }
        let mut names = Vec::new();
        let mut chosen: *mut ibv_device = ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds n valid device pointers.
            let dev = unsafe { *list.add(i) };
            // SAFETY: dev is valid; the name is a NUL-terminated string it owns.
            let dn = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }.to_string_lossy().into_owned();
            if chosen.is_null() && name.is_none_or(|w| w == dn) {
                chosen = dev;
            }
            names.push(dn);
        }
        let ctx = if chosen.is_null() {
            ptr::null_mut()
        } else {
            // SAFETY: chosen is a device from the list, which is still alive.
            unsafe { ibv_open_device(chosen) }
        };
        let err = fail("ibv_open_device", None);
        // SAFETY: the list came from ibv_get_device_list; opened contexts outlive it.
        unsafe { ibv_free_device_list(list) };
        if chosen.is_null() {
            let hint = if names.is_empty() {
                "no RDMA devices: load rdma_rxe and `rdma link add rxe0 type rxe netdev IF`, or use the lab".to_string()
            } else {
                format!("devices here: {}", names.join(", "))
            };
            return Err(VerbError { verb: format!("opening device {}", name.unwrap_or("(first)")), errno: libc::ENODEV, hint: Some(hint) });
        }
        if ctx.is_null() {
            return Err(err);
        }
        let dn = names.into_iter().find(|d| name.is_none_or(|w| w == d)).unwrap_or_default();
        Ok(Arc::new(Context { ctx, name: dn }))
    }

    pub fn port_state(&self, port: u8) -> Result<(u32, u32)> {
        // SAFETY: zeroed ibv_port_attr is a valid out buffer.
        let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; attr is a valid out pointer.
        let rc = unsafe { ___ibv_query_port(self.ctx, port, &mut attr) };
        check(format!("ibv_query_port({port})"), rc, None)?;
        Ok((attr.state, attr.active_mtu))
    }

    pub fn gid(&self, port: u8, index: u8) -> Result<[u8; 16]> {
        // SAFETY: zeroed ibv_gid is a valid out buffer.
        let mut g: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; g is a valid out pointer.
        let rc = unsafe { ibv_query_gid(self.ctx, port, index as i32, &mut g) };
        check(format!("ibv_query_gid(port {port}, index {index})"), rc, None)?;
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { g.raw })
    }

    /// The RoCE type of a GID entry as the kernel reports it (`RoCE v2`, `IB/RoCE v1`).
    pub fn gid_type(&self, port: u8, index: u8) -> Option<String> {
        let p = format!("/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}", self.name);
        std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
    }

    /// The IPv4-mapped RoCEv2 GID of `port`: (index, gid). Explains what the table
    /// holds when there is none.
    pub fn roce_v2_ipv4_gid(&self, port: u8) -> Result<(u8, [u8; 16])> {
        let mut seen = Vec::new();
        for i in 0..16u8 {
            let Ok(g) = self.gid(port, i) else { break };
            if g == [0; 16] {
                continue;
            }
            let mapped = g[..10] == [0; 10] && g[10..12] == [0xff, 0xff];
            let ty = self.gid_type(port, i).unwrap_or_default();
            if mapped && (ty.is_empty() || ty.contains("v2")) {
                return Ok((i, g));
            }
            seen.push(format!("{i}: {} ({})", std::net::Ipv6Addr::from(g), if ty.is_empty() { "type unknown" } else { &ty }));
        }
        Err(VerbError {
            verb: format!("choosing the RoCEv2 GID of {} port {port}", self.name),
            errno: libc::ENOENT,
            hint: Some(format!(
                "no IPv4-mapped RoCEv2 GID (::ffff:a.b.c.d); give the netdev an IPv4 address. The table holds: {}",
                if seen.is_empty() { "nothing".to_string() } else { seen.join("; ") }
            )),
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device, closed once; everything built on it
        // holds an Arc to it and is gone by now.
        unsafe { ibv_close_device(self.ctx) };
    }
}

pub struct Pd {
    pd: *mut ibv_pd,
    _ctx: Arc<Context>,
}

// SAFETY: see Context.
unsafe impl Send for Pd {}
unsafe impl Sync for Pd {}

impl Pd {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>> {
        // SAFETY: ctx is open.
        let pd = unsafe { ibv_alloc_pd(ctx.ctx) };
        if pd.is_null() {
            return Err(fail("ibv_alloc_pd", None));
        }
        Ok(Arc::new(Pd { pd, _ctx: ctx.clone() }))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; MRs, QPs and AHs hold Arcs to it.
        unsafe { ibv_dealloc_pd(self.pd) };
    }
}

pub struct Cq {
    cq: *mut ibv_cq,
    _ctx: Arc<Context>,
}

// SAFETY: see Context.
unsafe impl Send for Cq {}
unsafe impl Sync for Cq {}

impl Cq {
    pub fn new(ctx: &Arc<Context>, depth: i32) -> Result<Arc<Cq>> {
        // SAFETY: ctx is open; no channel, no context pointer.
        let cq = unsafe { ibv_create_cq(ctx.ctx, depth, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(fail(format!("ibv_create_cq({depth})"), None));
        }
        Ok(Arc::new(Cq { cq, _ctx: ctx.clone() }))
    }

    /// Polls up to `max` completions.
    pub fn poll(&self, max: usize) -> Result<Vec<Completion>> {
        // SAFETY: ibv_wc is plain data; zeroed is valid.
        let mut wcs: Vec<ibv_wc> = (0..max.max(1)).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: cq is alive; wcs has room for max entries.
        let n = unsafe { ibv_poll_cq(self.cq, wcs.len() as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(VerbError { verb: "ibv_poll_cq".into(), errno: -n, hint: None });
        }
        Ok(wcs[..n as usize]
            .iter()
            .map(|w| Completion {
                wr_id: w.wr_id,
                status: w.status,
                opcode: w.opcode,
                byte_len: w.byte_len,
                // SAFETY: the union holds imm_data when IBV_WC_WITH_IMM is set; both
                // members are plain u32 anyway.
                imm_data: (w.wc_flags & IBV_WC_WITH_IMM != 0).then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })),
                qp_num: w.qp_num,
                src_qp: w.src_qp,
                vendor_err: w.vendor_err,
            })
            .collect())
    }
}

/// `ibv_wc_flags::IBV_WC_WITH_IMM`.
const IBV_WC_WITH_IMM: u32 = 1 << 1;

/// A work completion, copied out of the CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub byte_len: u32,
    pub imm_data: Option<u32>,
    pub qp_num: u32,
    pub src_qp: u32,
    pub vendor_err: u32,
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq; QPs using it hold Arcs to it.
        unsafe { ibv_destroy_cq(self.cq) };
    }
}

/// A registered buffer. The device reads and writes it behind our back, so its
/// bytes are only ever copied in or out through raw pointers, never borrowed.
pub struct Mr {
    mr: *mut ibv_mr,
    buf: *mut u8,
    len: usize,
    layout: std::alloc::Layout,
    _pd: Arc<Pd>,
}

// SAFETY: see Context; the buffer is only touched through raw copies.
unsafe impl Send for Mr {}
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers a zeroed, page-aligned buffer of `len` bytes holding `init` at its
    /// start.
    pub fn new(pd: &Arc<Pd>, len: usize, access: u32, init: &[u8]) -> Result<Mr> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .map_err(|_| VerbError { verb: format!("allocating {len} bytes"), errno: libc::EINVAL, hint: None })?;
        // SAFETY: the layout has a non-zero size.
        let buf = unsafe { std::alloc::alloc_zeroed(layout) };
        if buf.is_null() {
            return Err(VerbError { verb: format!("allocating {len} bytes"), errno: libc::ENOMEM, hint: None });
        }
        // SAFETY: buf has len bytes; init is clipped to them.
        unsafe { ptr::copy_nonoverlapping(init.as_ptr(), buf, init.len().min(len)) };
        // SAFETY: pd is alive; buf is valid for len bytes until Drop deregisters it.
        let mr = unsafe { ibv_reg_mr(pd.pd, buf.cast(), len, access as i32) };
        if mr.is_null() {
            let e = fail(format!("ibv_reg_mr({len} bytes, access {access:#x})"), None);
            // SAFETY: allocated above with this layout, not registered.
            unsafe { std::alloc::dealloc(buf, layout) };
            return Err(e);
        }
        Ok(Mr { mr, buf, len, layout, _pd: pd.clone() })
    }

    pub fn addr(&self) -> u64 {
        self.buf as u64
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn lkey(&self) -> u32 {
        // SAFETY: mr is registered until Drop.
        unsafe { (*self.mr).lkey }
    }
    pub fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }

    /// A copy of the buffer as it is now.
    pub fn read(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // SAFETY: buf is valid for len bytes; the copy does not create a reference.
        unsafe { ptr::copy_nonoverlapping(self.buf, v.as_mut_ptr(), self.len) };
        v
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered in new(); deregistered once, then the memory is freed.
        unsafe {
            ibv_dereg_mr(self.mr);
            std::alloc::dealloc(self.buf, self.layout);
        }
    }
}

pub struct Ah {
    ah: *mut ibv_ah,
    _pd: Arc<Pd>,
}

// SAFETY: see Context.
unsafe impl Send for Ah {}
unsafe impl Sync for Ah {}

impl Ah {
    /// A RoCE address handle towards `dgid` from our GID `sgid_index`.
    pub fn new(pd: &Arc<Pd>, port: u8, sgid_index: u8, dgid: [u8; 16]) -> Result<Ah> {
        // SAFETY: zeroed ibv_ah_attr is valid; the fields set below are plain data.
        let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
        a.is_global = 1;
        a.port_num = port;
        a.grh.dgid.raw = dgid;
        a.grh.sgid_index = sgid_index;
        a.grh.hop_limit = 64;
        // SAFETY: pd is alive; a is a valid attribute block.
        let ah = unsafe { ibv_create_ah(pd.pd, &mut a) };
        if ah.is_null() {
            return Err(fail("ibv_create_ah", Some("RoCE needs a GID: check the GID index".into())));
        }
        Ok(Ah { ah, _pd: pd.clone() })
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah; WRs that used it have completed or are
        // flushed by the time the agent tears down.
        unsafe { ibv_destroy_ah(self.ah) };
    }
}

/// Path MTU in bytes → the verbs enum.
pub fn mtu_enum(bytes: u32) -> u32 {
    match bytes {
        256 => ibv_mtu::IBV_MTU_256,
        512 => ibv_mtu::IBV_MTU_512,
        2048 => ibv_mtu::IBV_MTU_2048,
        4096 => ibv_mtu::IBV_MTU_4096,
        _ => ibv_mtu::IBV_MTU_1024,
    }
}

/// What RTR needs to know about the peer.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
}

/// Attributes for INIT → RTR → RTS.
#[derive(Debug, Clone, Copy)]
pub struct QpAttrs {
    pub port: u8,
    pub sgid_index: u8,
    pub access: u32,
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

pub struct Qp {
    qp: *mut ibv_qp,
    pub qp_type: u32,
    _pd: Arc<Pd>,
    _cq: Arc<Cq>,
}

// SAFETY: see Context.
unsafe impl Send for Qp {}
unsafe impl Sync for Qp {}

impl Qp {
    pub fn new(pd: &Arc<Pd>, cq: &Arc<Cq>, qp_type: u32, cap: ibv_qp_cap) -> Result<Qp> {
        // SAFETY: zeroed init attributes are valid; pointers set below are alive.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.cq;
        init.recv_cq = cq.cq;
        init.cap = cap;
        init.qp_type = qp_type;
        // SAFETY: pd and cq are alive and outlive the QP (held as Arcs).
        let qp = unsafe { ibv_create_qp(pd.pd, &mut init) };
        if qp.is_null() {
            return Err(fail("ibv_create_qp", Some(format!(
                "queue sizes (send {} recv {} sge {}/{} inline {}) may exceed the device's limits",
                cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data
            ))));
        }
        Ok(Qp { qp, qp_type, _pd: pd.clone(), _cq: cq.clone() })
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: the QP is alive until Drop.
        unsafe { (*self.qp).qp_num }
    }

    fn modify(&self, attr: &mut ibv_qp_attr, mask: u32, verb: &str, hint: Option<String>) -> Result<()> {
        // SAFETY: the QP is alive; attr is a valid block for the bits in mask.
        let rc = unsafe { ibv_modify_qp(self.qp, attr, mask as i32) };
        check(verb, rc, hint)
    }

    /// RESET → INIT → RTR → RTS with `peer` (for UD, only the local attributes).
    pub fn connect(&self, a: &QpAttrs, peer: Option<Peer>) -> Result<()> {
        use ibv_qp_attr_mask as M;
        let ud = self.qp_type == ibv_qp_type::IBV_QPT_UD;
        let uc = self.qp_type == ibv_qp_type::IBV_QPT_UC;
        // SAFETY: zeroed attributes are valid.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = ibv_qp_state::IBV_QPS_INIT;
        x.pkey_index = 0;
        x.port_num = a.port;
        let mut mask = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0;
        if ud {
            x.qkey = a.qkey;
            mask |= M::IBV_QP_QKEY.0;
        } else {
            x.qp_access_flags = a.access;
            mask |= M::IBV_QP_ACCESS_FLAGS.0;
        }
        self.modify(&mut x, mask, "ibv_modify_qp(INIT)", None)?;

        // SAFETY: as above.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = ibv_qp_state::IBV_QPS_RTR;
        let mut mask = M::IBV_QP_STATE.0;
        if !ud {
            let p = peer.ok_or(VerbError { verb: "ibv_modify_qp(RTR)".into(), errno: libc::EINVAL, hint: Some("no peer".into()) })?;
            x.path_mtu = mtu_enum(a.mtu);
            x.dest_qp_num = p.qpn;
            x.rq_psn = p.psn;
            x.ah_attr.is_global = 1;
            x.ah_attr.port_num = a.port;
            x.ah_attr.grh.dgid.raw = p.gid;
            x.ah_attr.grh.sgid_index = a.sgid_index;
            x.ah_attr.grh.hop_limit = 64;
            mask |= M::IBV_QP_AV.0 | M::IBV_QP_PATH_MTU.0 | M::IBV_QP_DEST_QPN.0 | M::IBV_QP_RQ_PSN.0;
            if !uc {
                x.max_dest_rd_atomic = a.max_dest_rd_atomic;
                x.min_rnr_timer = a.min_rnr_timer;
                mask |= M::IBV_QP_MAX_DEST_RD_ATOMIC.0 | M::IBV_QP_MIN_RNR_TIMER.0;
            }
        }
        let hint = Some(format!(
            "RoCEv2 needs a GID on both sides: sgid index {} must be the IPv4-mapped GID (index 1 on rxe)",
            a.sgid_index
        ));
        self.modify(&mut x, mask, "ibv_modify_qp(RTR)", hint)?;

        // SAFETY: as above.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = ibv_qp_state::IBV_QPS_RTS;
        x.sq_psn = a.sq_psn;
        let mut mask = M::IBV_QP_STATE.0 | M::IBV_QP_SQ_PSN.0;
        if !ud && !uc {
            x.timeout = a.timeout;
            x.retry_cnt = a.retry_cnt;
            x.rnr_retry = a.rnr_retry;
            x.max_rd_atomic = a.max_rd_atomic;
            mask |= M::IBV_QP_TIMEOUT.0 | M::IBV_QP_RETRY_CNT.0 | M::IBV_QP_RNR_RETRY.0 | M::IBV_QP_MAX_QP_RD_ATOMIC.0;
        }
        self.modify(&mut x, mask, "ibv_modify_qp(RTS)", None)
    }

    /// Posts one send-queue WR. `sges` are (addr, len, lkey).
    pub fn post_send(&self, wr: &SendWr, sges: &[(u64, u32, u32)]) -> Result<()> {
        let mut sg: Vec<ibv_sge> = sges.iter().map(|&(addr, length, lkey)| ibv_sge { addr, length, lkey }).collect();
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
            Remote::Ud { ah, qpn, qkey } => w.wr.ud = ud_t { ah: ah.ah, remote_qpn: qpn, remote_qkey: qkey },
        }
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is alive; w and sg live until the call returns (the device
        // copies the WR; the data stays in registered MRs the agent keeps).
        let rc = unsafe { ibv_post_send(self.qp, &mut w, &mut bad) };
        check("ibv_post_send", rc, Some("the QP must be in RTS, the SGEs inside registered MRs, inline data within max_inline".into()))
    }

    pub fn post_recv(&self, wr_id: u64, sges: &[(u64, u32, u32)]) -> Result<()> {
        let mut sg: Vec<ibv_sge> = sges.iter().map(|&(addr, length, lkey)| ibv_sge { addr, length, lkey }).collect();
        let mut w = ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: sg.as_mut_ptr(), num_sge: sg.len() as i32 };
        let mut bad = ptr::null_mut();
        // SAFETY: as in post_send.
        let rc = unsafe { ibv_post_recv(self.qp, &mut w, &mut bad) };
        check("ibv_post_recv", rc, None)
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp; destroyed once, before its PD and CQ.
        unsafe { ibv_destroy_qp(self.qp) };
    }
}

/// Where a send-queue WR goes.
pub enum Remote<'a> {
    None,
    Rdma { addr: u64, rkey: u32 },
    Atomic { addr: u64, rkey: u32, compare_add: u64, swap: u64 },
    Ud { ah: &'a Ah, qpn: u32, qkey: u32 },
}

pub struct SendWr<'a> {
    pub wr_id: u64,
    pub opcode: u32,
    pub flags: u32,
    pub imm_data: u32,
    pub remote: Remote<'a>,
}

pub mod names {
    //! ibv_wc_status / ibv_wc_opcode values by their `IBV_WC_*` names.
    /// `ibv_wc_status` names, indexed by value.
    pub const WC_STATUS: [&str; 24] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
        "IBV_WC_TM_ERR",
        "IBV_WC_TM_RNDV_INCOMPLETE",
    ];

    /// `ibv_wc_opcode` values and names.
    pub const WC_OPCODES: [(u32, &str); 20] = [
        (0, "IBV_WC_SEND"),
        (1, "IBV_WC_RDMA_WRITE"),
        (2, "IBV_WC_RDMA_READ"),
        (3, "IBV_WC_COMP_SWAP"),
        (4, "IBV_WC_FETCH_ADD"),
        (5, "IBV_WC_BIND_MW"),
        (6, "IBV_WC_LOCAL_INV"),
        (7, "IBV_WC_TSO"),
        (8, "IBV_WC_FLUSH"),
        (9, "IBV_WC_ATOMIC_WRITE"),
        (128, "IBV_WC_RECV"),
        (129, "IBV_WC_RECV_RDMA_WITH_IMM"),
        (130, "IBV_WC_TM_ADD"),
        (131, "IBV_WC_TM_DEL"),
        (132, "IBV_WC_TM_SYNC"),
        (133, "IBV_WC_TM_RECV"),
        (134, "IBV_WC_TM_NO_TAG"),
        (135, "IBV_WC_DRIVER1"),
        (136, "IBV_WC_DRIVER2"),
        (137, "IBV_WC_DRIVER3"),
    ];

    pub fn status(v: u32) -> String {
        WC_STATUS.get(v as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("IBV_WC_STATUS_{v}"))
    }

    pub fn opcode(v: u32) -> String {
        WC_OPCODES.iter().find(|(n, _)| *n == v).map(|(_, s)| s.to_string()).unwrap_or_else(|| format!("IBV_WC_OPCODE_{v}"))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn names_match_the_verbs_header() {
            assert_eq!(super::status(rdma_sys::ibv_wc_status::IBV_WC_REM_ACCESS_ERR), "IBV_WC_REM_ACCESS_ERR");
            assert_eq!(super::status(rdma_sys::ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR), "IBV_WC_RNR_RETRY_EXC_ERR");
            assert_eq!(super::opcode(rdma_sys::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM), "IBV_WC_RECV_RDMA_WITH_IMM");
            assert_eq!(super::opcode(rdma_sys::ibv_wc_opcode::IBV_WC_FETCH_ADD), "IBV_WC_FETCH_ADD");
            assert_eq!(super::status(99), "IBV_WC_STATUS_99");
        }
    }
}

impl Qp {
    /// Applies attributes computed elsewhere (rdma_cm's `rdma_init_qp_attr`).
    fn modify_raw(&self, attr: &mut ibv_qp_attr, mask: i32, verb: &str) -> Result<()> {
        // SAFETY: the QP is alive; attr and mask come from rdma_init_qp_attr.
        let rc = unsafe { ibv_modify_qp(self.qp, attr, mask) };
        check(verb, rc, None)
    }
}

/// An rdma_cm connection for a QP we created ourselves: librdmacm carries the
/// REQ/REP/RTU on QP1 and computes the QP attributes; we apply them. Dropping it
/// disconnects (DREQ/DREP on the wire) and releases the ids and the channel.
pub struct CmConn {
    ec: *mut rdma_event_channel,
    id: *mut rdma_cm_id,
    listen: *mut rdma_cm_id,
    /// The PSNs and peer QPN the CM settled on (it picks the starting PSNs).
    pub sq_psn: u32,
    pub rq_psn: u32,
    pub dest_qpn: u32,
    /// What the peer put in its REQ (we accepted) or REP (we connected), as the
    /// event delivered it: zero-padded to the field, after librdmacm's header.
    pub peer_private: Vec<u8>,
}

// SAFETY: librdmacm ids and channels may be used from any thread; only Drop frees.
unsafe impl Send for CmConn {}
unsafe impl Sync for CmConn {}

fn cm_event_name(t: u32) -> &'static str {
    use rdma_cm_event_type as E;
    match t {
        E::RDMA_CM_EVENT_ADDR_RESOLVED => "ADDR_RESOLVED",
        E::RDMA_CM_EVENT_ADDR_ERROR => "ADDR_ERROR",
        E::RDMA_CM_EVENT_ROUTE_RESOLVED => "ROUTE_RESOLVED",
        E::RDMA_CM_EVENT_ROUTE_ERROR => "ROUTE_ERROR",
        E::RDMA_CM_EVENT_CONNECT_REQUEST => "CONNECT_REQUEST",
        E::RDMA_CM_EVENT_CONNECT_RESPONSE => "CONNECT_RESPONSE",
        E::RDMA_CM_EVENT_CONNECT_ERROR => "CONNECT_ERROR",
        E::RDMA_CM_EVENT_UNREACHABLE => "UNREACHABLE",
        E::RDMA_CM_EVENT_REJECTED => "REJECTED",
        E::RDMA_CM_EVENT_ESTABLISHED => "ESTABLISHED",
        E::RDMA_CM_EVENT_DISCONNECTED => "DISCONNECTED",
        _ => "another event",
    }
}

fn sockaddr(ip: std::net::Ipv4Addr, port: u16) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = port.to_be();
    s.sin_addr = libc::in_addr { s_addr: u32::from(ip).to_be() };
    s
}

impl CmConn {
    fn new() -> Result<CmConn> {
        // SAFETY: no arguments; returns null on failure.
        let ec = unsafe { rdma_create_event_channel() };
        if ec.is_null() {
            return Err(fail("rdma_create_event_channel", Some("is the rdma_ucm module loaded?".into())));
        }
        // SAFETY: ec is a valid channel; its fd is ours to make non-blocking.
        unsafe {
            let fd = (*ec).fd;
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
        }
        Ok(CmConn { ec, id: ptr::null_mut(), listen: ptr::null_mut(), sq_psn: 0, rq_psn: 0, dest_qpn: 0, peer_private: Vec::new() })
    }

    fn create_id(&self, out: &mut *mut rdma_cm_id) -> Result<()> {
        // SAFETY: ec is valid; out receives the new id.
        let rc = unsafe { rdma_create_id(self.ec, out, ptr::null_mut(), rdma_port_space::RDMA_PS_TCP) };
        if rc != 0 {
            return Err(fail("rdma_create_id", None));
        }
        Ok(())
    }

    /// Waits for the next event, which must be `want`; returns its id and the
    /// private data it carried.
    fn expect(&self, want: u32, within: std::time::Duration) -> Result<(*mut rdma_cm_id, Vec<u8>)> {
        let until = std::time::Instant::now() + within;
        loop {
            let mut ev: *mut rdma_cm_event = ptr::null_mut();
            // SAFETY: ec is valid; ev receives an event we ack below.
            let rc = unsafe { rdma_get_cm_event(self.ec, &mut ev) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock && std::time::Instant::now() < until {
                    // SAFETY: ec is a valid channel for the life of self.
                    let fd = unsafe { (*self.ec).fd };
                    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                    // SAFETY: p is one valid pollfd.
                    unsafe { libc::poll(&mut p, 1, 50) };
                    continue;
                }
                return Err(VerbError {
                    verb: format!("waiting for RDMA_CM_EVENT_{}", cm_event_name(want)),
                    errno: e.raw_os_error().unwrap_or(libc::ETIMEDOUT),
                    hint: Some(format!("nothing came within {within:?}: is the peer listening, and the address reachable?")),
                });
            }
            // SAFETY: ev is a valid event until acked.
            let (t, status, id) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
            let private = if t == rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST || t == rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_RESPONSE {
                // SAFETY: connection events carry `param.conn`; its private data
                // (when not null) is private_data_len bytes owned by the event,
                // copied out before the ack frees it.
                unsafe {
                    let c = &(*ev).param.conn;
                    if c.private_data.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(c.private_data.cast::<u8>(), c.private_data_len as usize).to_vec()
                    }
                }
            } else {
                Vec::new()
            };
            // SAFETY: acknowledging the event we got; its id stays valid (owned by us).
            unsafe { rdma_ack_cm_event(ev) };
            if t == want {
                return Ok((id, private));
            }
            return Err(VerbError {
                verb: format!("rdma_cm: expected {}, got {}", cm_event_name(want), cm_event_name(t)),
                errno: -status.min(0),
                hint: (t == rdma_cm_event_type::RDMA_CM_EVENT_REJECTED).then(|| format!("the peer rejected the connection (status {status})")),
            });
        }
    }

    /// Moves `qp` to `state` with the attributes the CM computed, overriding what
    /// the scenario sets.
    fn step(&mut self, qp: &Qp, state: u32, a: &QpAttrs) -> Result<()> {
        use ibv_qp_attr_mask as M;
        // SAFETY: zeroed attributes are valid.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = state;
        let mut mask: i32 = 0;
        // SAFETY: id is connected far enough for this state; x and mask are out params.
        let rc = unsafe { rdma_init_qp_attr(self.id, &mut x, &mut mask) };
        check(format!("rdma_init_qp_attr({state})"), rc, None)?;
        let m = mask as u32;
        if m & M::IBV_QP_ACCESS_FLAGS.0 != 0 {
            x.qp_access_flags = a.access;
        }
        if m & M::IBV_QP_MIN_RNR_TIMER.0 != 0 {
            x.min_rnr_timer = a.min_rnr_timer;
        }
        if m & M::IBV_QP_TIMEOUT.0 != 0 {
            x.timeout = a.timeout;
        }
        if m & M::IBV_QP_RETRY_CNT.0 != 0 {
            x.retry_cnt = a.retry_cnt;
        }
        if m & M::IBV_QP_RNR_RETRY.0 != 0 {
            x.rnr_retry = a.rnr_retry;
        }
        if m & M::IBV_QP_RQ_PSN.0 != 0 {
            self.rq_psn = x.rq_psn;
            self.dest_qpn = x.dest_qp_num;
        }
        if m & M::IBV_QP_SQ_PSN.0 != 0 {
            self.sq_psn = x.sq_psn;
        }
        qp.modify_raw(&mut x, mask, &format!("ibv_modify_qp(state {state}) with rdma_cm's attributes"))
    }

    /// The connection parameters; `private` must outlive the call they are passed to.
    fn param(qp: &Qp, a: &QpAttrs, private: &[u8]) -> rdma_conn_param {
        // SAFETY: zeroed is valid (null private data).
        let mut p: rdma_conn_param = unsafe { std::mem::zeroed() };
        if !private.is_empty() {
            p.private_data = private.as_ptr().cast();
            p.private_data_len = private.len().min(u8::MAX as usize) as u8;
        }
        p.responder_resources = a.max_dest_rd_atomic;
        p.initiator_depth = a.max_rd_atomic;
        p.retry_count = a.retry_cnt;
        p.rnr_retry_count = a.rnr_retry;
        p.qp_num = qp.qpn();
        p
    }

    /// The passive side: listen on ip:port, accept one connection for `qp`,
    /// answering with `private` (at most 196 bytes) in the REP.
    pub fn accept(ip: std::net::Ipv4Addr, port: u16, qp: &Qp, a: &QpAttrs, private: &[u8], within: std::time::Duration) -> Result<CmConn> {
        check_private("rdma_accept", private, 196)?;
        let mut c = CmConn::new()?;
        let mut l = ptr::null_mut();
        c.create_id(&mut l)?;
        c.listen = l;
        let mut sa = sockaddr(ip, port);
        // SAFETY: l is a fresh id; sa is a valid sockaddr_in.
        let rc = unsafe { rdma_bind_addr(l, (&mut sa as *mut libc::sockaddr_in).cast()) };
        if rc != 0 {
            return Err(fail(format!("rdma_bind_addr({ip}:{port})"), Some("is the address one of this host's, on an RDMA device?".into())));
        }
        // SAFETY: l is bound.
        if unsafe { rdma_listen(l, 1) } != 0 {
            return Err(fail("rdma_listen", None));
        }
        (c.id, c.peer_private) = c.expect(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST, within)?;
        c.step(qp, ibv_qp_state::IBV_QPS_INIT, a)?;
        c.step(qp, ibv_qp_state::IBV_QPS_RTR, a)?;
        c.step(qp, ibv_qp_state::IBV_QPS_RTS, a)?;
        let mut p = Self::param(qp, a, private);
        // SAFETY: id came with the connect request; p is valid (private outlives it).
        check("rdma_accept", unsafe { rdma_accept(c.id, &mut p) }, None)?;
        c.expect(rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED, within)?;
        Ok(c)
    }

    /// The active side: resolve, connect `qp` to ip:port with `private` (at most 56
    /// bytes) in the REQ. A connection refused because the passive side is not
    /// listening yet is retried with a fresh id.
    pub fn connect(ip: std::net::Ipv4Addr, port: u16, qp: &Qp, a: &QpAttrs, private: &[u8], within: std::time::Duration) -> Result<CmConn> {
        check_private("rdma_connect", private, 56)?;
        let until = std::time::Instant::now() + within;
        loop {
            match Self::try_connect(ip, port, qp, a, private, within) {
                Err(e) if e.verb.contains("REJECTED") && std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                r => return r,
            }
        }
    }

    fn try_connect(ip: std::net::Ipv4Addr, port: u16, qp: &Qp, a: &QpAttrs, private: &[u8], within: std::time::Duration) -> Result<CmConn> {
        let mut c = CmConn::new()?;
        let mut id = ptr::null_mut();
        c.create_id(&mut id)?;
        c.id = id;
        let mut dst = sockaddr(ip, port);
        // SAFETY: id is fresh; dst is a valid sockaddr_in; no source address.
        let rc = unsafe { rdma_resolve_addr(id, ptr::null_mut(), (&mut dst as *mut libc::sockaddr_in).cast(), 2000) };
        if rc != 0 {
            return Err(fail(format!("rdma_resolve_addr({ip})"), None));
        }
        c.expect(rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED, within)?;
        // SAFETY: the address is resolved.
        if unsafe { rdma_resolve_route(id, 2000) } != 0 {
            return Err(fail("rdma_resolve_route", None));
        }
        c.expect(rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_RESOLVED, within)?;
        c.step(qp, ibv_qp_state::IBV_QPS_INIT, a)?;
        let mut p = Self::param(qp, a, private);
        // SAFETY: the route is resolved; p is valid (private outlives it).
        check("rdma_connect", unsafe { rdma_connect(id, &mut p) }, None)?;
        (_, c.peer_private) = c.expect(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_RESPONSE, within)?;
        c.step(qp, ibv_qp_state::IBV_QPS_RTR, a)?;
        c.step(qp, ibv_qp_state::IBV_QPS_RTS, a)?;
        // SAFETY: connected; sends the RTU.
        check("rdma_establish", unsafe { rdma_establish(id) }, None)?;
        Ok(c)
    }
}

/// librdmacm refuses private data longer than the message has room for (after its
/// own 36-byte header in a REQ); say so before the call does, with the numbers.
fn check_private(verb: &str, private: &[u8], room: usize) -> Result<()> {
    if private.len() > room {
        return Err(VerbError {
            verb: verb.to_string(),
            errno: libc::EINVAL,
            hint: Some(format!("{} bytes of private data; an rdma_cm {} has room for {room}", private.len(), if room == 56 { "REQ" } else { "REP" })),
        });
    }
    Ok(())
}

impl Drop for CmConn {
    fn drop(&mut self) {
        // SAFETY: ids and channel were created here and are released once.
        unsafe {
            if !self.id.is_null() {
                rdma_disconnect(self.id);
                rdma_destroy_id(self.id);
            }
            if !self.listen.is_null() {
                rdma_destroy_id(self.listen);
            }
            rdma_destroy_event_channel(self.ec);
        }
    }
}
