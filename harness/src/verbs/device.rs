//! The device and the objects built on it: context (ports, GIDs), PD, CQ, MR,
//! address handle. Each owns its verbs object and releases it once in `Drop`; each
//! holds an `Arc` to what it was built on, so nothing is destroyed while something
//! built on it lives.
//!
//! Owns: [`Context`], [`Pd`], [`Cq`], [`Mr`], [`Mw`], [`Ah`], their completions and
//! asynchronous events. Imports: `super::caps`, `super::error`, `super::ext`,
//! `crate::vocab`; `rdma_sys`, libc.
use std::ffi::CStr;
use std::ptr;
use std::sync::Arc;

use rdma_sys::*;

use super::error::{Result, VerbError};
use crate::vocab::caps::DeviceCaps;
use crate::vocab::memory::{canary, damage, Guards, MwKind, GUARD};
use crate::vocab::{Access, EventType, WcFlags, WcOpcode, WcStatus};

/// An open RDMA device.
pub(crate) struct Context {
    pub(super) ctx: *mut ibv_context,
    pub(crate) name: String,
}

// SAFETY: libibverbs objects may be used from any thread ("all verbs are thread
// safe", ibv_open_device(3)); the pointer is only freed in Drop.
unsafe impl Send for Context {}
// SAFETY: as for Send: shared references only reach thread-safe verbs.
unsafe impl Sync for Context {}

impl Context {
    /// Opens `name`, or the first device.
    pub(crate) fn open(name: Option<&str>) -> Result<Arc<Context>> {
        let mut n = 0;
        // SAFETY: n is a valid out pointer; the list is freed below.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            let hint = if errno == libc::ENOSYS {
                "this kernel has no RDMA stack (ib_uverbs): run on an RDMA host or in the lab (`roce run` without --endpoints)"
            } else {
                "is libibverbs installed with a provider (rdma-core)?"
            };
            return Err(VerbError::from_errno("ibv_get_device_list", errno, Some(hint.into())));
        }
        let mut names = Vec::new();
        let mut chosen: *mut ibv_device = ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds n valid device pointers.
            let dev = unsafe { *list.add(i) };
            // SAFETY: dev is valid; the name is a NUL-terminated string it owns.
            let dn =
                unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }.to_string_lossy().into_owned();
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
        let err = VerbError::last("ibv_open_device", None);
        // SAFETY: the list came from ibv_get_device_list; opened contexts outlive it.
        unsafe { ibv_free_device_list(list) };
        if chosen.is_null() {
            let hint = if names.is_empty() {
                "no RDMA devices: load rdma_rxe and `rdma link add rxe0 type rxe netdev IF`, or use the lab".to_string()
            } else {
                format!("devices here: {}", names.join(", "))
            };
            return Err(VerbError::from_errno(
                format!("opening device {}", name.unwrap_or("(first)")),
                libc::ENODEV,
                Some(hint),
            ));
        }
        if ctx.is_null() {
            return Err(err);
        }
        let dn = names.into_iter().find(|d| name.is_none_or(|w| w == d)).unwrap_or_default();
        Ok(Arc::new(Context { ctx, name: dn }))
    }

    pub(crate) fn port_state(&self, port: u8) -> Result<(u32, u32)> {
        // SAFETY: zeroed ibv_port_attr is a valid out buffer.
        let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; attr is a valid out pointer.
        let rc = unsafe { ___ibv_query_port(self.ctx, port, &mut attr) };
        VerbError::check(format!("ibv_query_port({port})"), rc, None)?;
        Ok((attr.state, attr.active_mtu))
    }

    /// What the device can do ([`DeviceCaps`]), from `ibv_query_device_ex`.
    pub(crate) fn caps(&self) -> Result<DeviceCaps> {
        // SAFETY: zeroed ibv_device_attr_ex is a valid out buffer (the inline
        // ibv_query_device_ex leaves fields an old kernel does not know untouched).
        let mut a: ibv_device_attr_ex = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; a is a valid out pointer (rdma-sys's own port of
        // this inline never reaches the provider: see `ext`).
        let rc = unsafe { super::ext::query_device_ex(self.ctx, &mut a) };
        VerbError::check("ibv_query_device_ex", rc, None)?;
        // The low 32 bits are the same flags in both fields; a provider without
        // query_device_ex fills only the old one.
        let flags = a.device_cap_flags_ex | u64::from(a.orig_attr.device_cap_flags);
        Ok(DeviceCaps {
            cap_flags_ex: flags,
            max_mw: a.orig_attr.max_mw.max(0) as u32,
            max_srq: a.orig_attr.max_srq.max(0) as u32,
        })
    }

    /// Makes the asynchronous event channel non-blocking, so [`Context::async_events`]
    /// can be polled.
    pub(crate) fn watch_async_events(&self) -> Result<()> {
        // SAFETY: ctx is open; async_fd is its event channel's descriptor.
        let fd = unsafe { (*self.ctx).async_fd };
        // SAFETY: fcntl on a descriptor the context owns; only O_NONBLOCK is added.
        let rc = unsafe {
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK)
        };
        if rc < 0 {
            return Err(VerbError::last("fcntl(async_fd, O_NONBLOCK)", None));
        }
        Ok(())
    }

    /// The asynchronous events waiting now (after [`Context::watch_async_events`]),
    /// each acknowledged: its type and, for an SRQ event, the SRQ's handle.
    pub(crate) fn async_events(&self) -> Vec<AsyncEvent> {
        let mut out = Vec::new();
        loop {
            // SAFETY: zeroed is a valid out buffer for the event.
            let mut ev: RawAsyncEvent = unsafe { std::mem::zeroed() };
            // SAFETY: ctx is open and its channel non-blocking; RawAsyncEvent has
            // struct ibv_async_event's layout (a pointer union, then the enum as a
            // C int), read without trusting the enum's value.
            let rc =
                unsafe { ibv_get_async_event(self.ctx, (&mut ev as *mut RawAsyncEvent).cast()) };
            if rc != 0 {
                return out;
            }
            out.push(AsyncEvent { kind: EventType(ev.event_type), element: ev.element as usize });
            // SAFETY: the event was returned by ibv_get_async_event and is acked once.
            unsafe { ibv_ack_async_event((&mut ev as *mut RawAsyncEvent).cast()) };
        }
    }

    pub(crate) fn gid(&self, port: u8, index: u8) -> Result<[u8; 16]> {
        // SAFETY: zeroed ibv_gid is a valid out buffer.
        let mut g: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; g is a valid out pointer.
        let rc = unsafe { ibv_query_gid(self.ctx, port, index as i32, &mut g) };
        VerbError::check(format!("ibv_query_gid(port {port}, index {index})"), rc, None)?;
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { g.raw })
    }

    /// The RoCE type of a GID entry as the kernel reports it (`RoCE v2`, `IB/RoCE v1`).
    pub(crate) fn gid_type(&self, port: u8, index: u8) -> Option<String> {
        let p = format!("/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}", self.name);
        std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
    }

    /// The IPv4-mapped RoCEv2 GID of `port`: (index, gid). Explains what the table
    /// holds when there is none.
    pub(crate) fn roce_v2_ipv4_gid(&self, port: u8) -> Result<(u8, [u8; 16])> {
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
            seen.push(format!(
                "{i}: {} ({})",
                std::net::Ipv6Addr::from(g),
                if ty.is_empty() { "type unknown" } else { &ty }
            ));
        }
        Err(VerbError::from_errno(
            format!("choosing the RoCEv2 GID of {} port {port}", self.name),
            libc::ENOENT,
            Some(format!(
                "no IPv4-mapped RoCEv2 GID (::ffff:a.b.c.d); give the netdev an IPv4 address. The table holds: {}",
                if seen.is_empty() { "nothing".to_string() } else { seen.join("; ") }
            )),
        ))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device, closed once; everything built on it
        // holds an Arc to it and is gone by now.
        unsafe { ibv_close_device(self.ctx) };
    }
}

pub(crate) struct Pd {
    pub(super) pd: *mut ibv_pd,
    _ctx: Arc<Context>,
}

// SAFETY: see Context.
unsafe impl Send for Pd {}
// SAFETY: as for Send: shared references only reach thread-safe verbs.
unsafe impl Sync for Pd {}

impl Pd {
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>> {
        // SAFETY: ctx is open.
        let pd = unsafe { ibv_alloc_pd(ctx.ctx) };
        if pd.is_null() {
            return Err(VerbError::last("ibv_alloc_pd", None));
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

/// A completion queue with its own completion channel: polled for completions,
/// and armed (`ibv_req_notify_cq`) for a notification a step may wait for.
pub(crate) struct Cq {
    pub(super) cq: *mut ibv_cq,
    /// Non-blocking: a wait for a notification is a `poll(2)` with a deadline.
    channel: *mut ibv_comp_channel,
    _ctx: Arc<Context>,
}

// SAFETY: see Context.
unsafe impl Send for Cq {}
// SAFETY: as for Send: shared references only reach thread-safe verbs.
unsafe impl Sync for Cq {}

impl Cq {
    pub(crate) fn new(ctx: &Arc<Context>, depth: i32) -> Result<Arc<Cq>> {
        // SAFETY: ctx is open.
        let channel = unsafe { ibv_create_comp_channel(ctx.ctx) };
        if channel.is_null() {
            return Err(VerbError::last("ibv_create_comp_channel", None));
        }
        // SAFETY: the channel's fd is open; O_NONBLOCK only changes how reads wait.
        let nonblocking = unsafe {
            let fd = (*channel).fd;
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK)
        };
        let cq = if nonblocking >= 0 {
            // SAFETY: ctx is open; the channel is alive; no context pointer.
            unsafe { ibv_create_cq(ctx.ctx, depth, ptr::null_mut(), channel, 0) }
        } else {
            ptr::null_mut()
        };
        if cq.is_null() {
            let e = VerbError::last(format!("ibv_create_cq({depth})"), None);
            // SAFETY: created above; no CQ uses it.
            unsafe { ibv_destroy_comp_channel(channel) };
            return Err(e);
        }
        Ok(Arc::new(Cq { cq, channel, _ctx: ctx.clone() }))
    }

    /// Resizes it to hold at least `cqe` completions (`ibv_resize_cq`): refused
    /// below the completions it holds, or past what the device allows.
    pub(crate) fn resize(&self, cqe: u32) -> Result<()> {
        let cqe = i32::try_from(cqe).unwrap_or(i32::MAX);
        // SAFETY: cq is alive; resizing keeps its completions and its pointer.
        let rc = unsafe { ibv_resize_cq(self.cq, cqe) };
        VerbError::check(format!("ibv_resize_cq({cqe})"), rc, None)
    }

    /// Arms it (`ibv_req_notify_cq`): the next completion (`solicited_only`: the
    /// next solicited or failed receive completion) notifies, once.
    pub(crate) fn arm(&self, solicited_only: bool) -> Result<()> {
        // SAFETY: cq is alive.
        let rc = unsafe { ibv_req_notify_cq(self.cq, i32::from(solicited_only)) };
        let verb =
            if solicited_only { "ibv_req_notify_cq(solicited)" } else { "ibv_req_notify_cq" };
        VerbError::check(verb, rc, None)
    }

    /// Waits up to `within` for a notification; takes and acknowledges it.
    pub(crate) fn await_notification(&self, within: std::time::Duration) -> Result<bool> {
        // SAFETY: the channel is alive until Drop.
        let fd = unsafe { (*self.channel).fd };
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = i32::try_from(within.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: p is one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            return Err(VerbError::last("poll(completion channel)", None));
        }
        if n == 0 {
            return Ok(false);
        }
        let mut cq = ptr::null_mut();
        let mut user = ptr::null_mut();
        // SAFETY: the channel is alive and readable; both are out-parameters.
        let rc = unsafe { ibv_get_cq_event(self.channel, &mut cq, &mut user) };
        if rc != 0 {
            return Err(VerbError::last("ibv_get_cq_event", None));
        }
        // SAFETY: one event of this CQ was taken above; acknowledged once.
        unsafe { ibv_ack_cq_events(cq, 1) };
        Ok(true)
    }

    /// Polls up to `max` completions.
    pub(crate) fn poll(&self, max: usize) -> Result<Vec<Completion>> {
        // SAFETY: ibv_wc is plain data; zeroed is valid.
        let mut wcs: Vec<ibv_wc> = (0..max.max(1)).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: cq is alive; wcs has room for max entries.
        let n = unsafe { ibv_poll_cq(self.cq, wcs.len() as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(VerbError::from_errno("ibv_poll_cq", -n, None));
        }
        Ok(wcs[..n as usize]
            .iter()
            .map(|w| Completion {
                wr_id: w.wr_id,
                status: WcStatus(w.status),
                opcode: WcOpcode(w.opcode),
                byte_len: w.byte_len,
                // SAFETY: the union holds imm_data when IBV_WC_WITH_IMM is set; both
                // members are plain u32 anyway.
                imm_data: (w.wc_flags & WcFlags::WITH_IMM != 0)
                    .then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })),
                // SAFETY: as above; with IBV_WC_WITH_INV the union holds the rkey
                // the SEND with Invalidate named, in host order.
                invalidated_rkey: (w.wc_flags & WcFlags::WITH_INV != 0)
                    .then_some(unsafe { w.imm_data_invalidated_rkey_union.invalidated_rkey }),
                flags: w.wc_flags,
                qp_num: w.qp_num,
                src_qp: w.src_qp,
                pkey_index: w.pkey_index,
                vendor_err: w.vendor_err,
            })
            .collect())
    }
}

/// A work completion, copied out of the CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) opcode: WcOpcode,
    pub(crate) byte_len: u32,
    pub(crate) imm_data: Option<u32>,
    /// The rkey a SEND with Invalidate invalidated (`IBV_WC_WITH_INV`).
    pub(crate) invalidated_rkey: Option<u32>,
    /// `wc_flags` as the provider set them (`IBV_WC_*`).
    pub(crate) flags: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    pub(crate) pkey_index: u16,
    pub(crate) vendor_err: u32,
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq; QPs using it hold Arcs to it. Every
        // event taken was acknowledged, so destroying it does not wait; then the
        // channel it was made on.
        unsafe {
            ibv_destroy_cq(self.cq);
            ibv_destroy_comp_channel(self.channel);
        }
    }
}

/// A registered buffer. The device reads and writes it behind our back, so its
/// bytes are only ever copied in or out through raw pointers, never borrowed.
///
/// The buffer sits between two guard regions of [`GUARD`] bytes each, registered
/// nowhere and filled with a canary: the one after starts right past the MR's last
/// byte (in the same page, where a device's bounds check that is off by a few
/// bytes would write), so [`Mr::guards`] sees any write outside the MR.
pub(crate) struct Mr {
    /// Null once deregistered ([`Mr::deregister`]): the buffer stays, for reading.
    mr: *mut ibv_mr,
    /// Its keys as last registered (kept after deregistration: a scenario may use a
    /// stale key on purpose).
    keys: (u32, u32),
    /// The MR's first byte: `GUARD` bytes into the allocation.
    buf: *mut u8,
    len: usize,
    layout: std::alloc::Layout,
    _pd: Arc<Pd>,
}

// SAFETY: see Context; the buffer is only touched through raw copies. Not `Sync`:
// `write_at` and `read_at` copy through `&self` without synchronisation, so two
// threads sharing an `Mr` could race those copies (undefined behaviour). One
// thread at a time owns an `Mr`, and the compiler holds every caller to that.
unsafe impl Send for Mr {}
static_assertions::assert_not_impl_any!(Mr: Sync);

impl Mr {
    /// Registers a zeroed, page-aligned buffer of `len` bytes holding `init` at its
    /// start, between two guard regions.
    pub(crate) fn new(pd: &Arc<Pd>, len: usize, access: Access, init: &[u8]) -> Result<Mr> {
        let too_large =
            || VerbError::from_errno(format!("allocating {len} bytes"), libc::EINVAL, None);
        let total = len.checked_add(2 * GUARD).ok_or_else(too_large)?;
        let layout = std::alloc::Layout::from_size_align(total, 4096).map_err(|_| too_large())?;
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            return Err(VerbError::from_errno(
                format!("allocating {len} bytes"),
                libc::ENOMEM,
                None,
            ));
        }
        // SAFETY: base has GUARD + len + GUARD bytes; buf is GUARD bytes in.
        let buf = unsafe { base.add(GUARD) };
        let fill = |after: bool| (0..GUARD).map(move |i| canary(after, i)).collect::<Vec<u8>>();
        // SAFETY: each copy stays inside the allocation: the region before buf
        // (written from its far end inwards, so byte 0 is buf - 1), init clipped
        // to len, and the region from buf + len.
        unsafe {
            let mut before = fill(false);
            before.reverse();
            ptr::copy_nonoverlapping(before.as_ptr(), base, GUARD);
            ptr::copy_nonoverlapping(init.as_ptr(), buf, init.len().min(len));
            ptr::copy_nonoverlapping(fill(true).as_ptr(), buf.add(len), GUARD);
        }
        // SAFETY: pd is alive; buf is valid for len bytes until Drop deregisters it.
        let mr = unsafe { ibv_reg_mr(pd.pd, buf.cast(), len, access.0 as i32) };
        if mr.is_null() {
            let e = VerbError::last(format!("ibv_reg_mr({len} bytes, access {access:?})"), None);
            // SAFETY: allocated above with this layout, not registered.
            unsafe { std::alloc::dealloc(base, layout) };
            return Err(e);
        }
        // SAFETY: mr was just registered.
        let keys = unsafe { ((*mr).lkey, (*mr).rkey) };
        Ok(Mr { mr, keys, buf, len, layout, _pd: pd.clone() })
    }

    /// Deregisters it (`ibv_dereg_mr`). Once that returns the device no longer
    /// touches the buffer, which stays allocated (and readable) until the `Mr`
    /// drops. A refusal (a window still bound to it) leaves it registered.
    pub(crate) fn deregister(&mut self) -> Result<()> {
        if self.mr.is_null() {
            return Err(VerbError::not_called("ibv_dereg_mr", "the MR was deregistered already"));
        }
        // SAFETY: registered; on success it is never used again (nulled below).
        let rc = unsafe { ibv_dereg_mr(self.mr) };
        VerbError::check("ibv_dereg_mr", rc, None)?;
        self.mr = ptr::null_mut();
        Ok(())
    }

    /// Re-registers it with `access` (`ibv_rereg_mr`, `IBV_REREG_MR_CHANGE_ACCESS`):
    /// the same buffer, keys as the device gives them now.
    pub(crate) fn reregister(&mut self, access: Access) -> Result<()> {
        let verb = format!("ibv_rereg_mr(access {access:?})");
        if self.mr.is_null() {
            return Err(VerbError::not_called(verb, "the MR was deregistered"));
        }
        let flags = ibv_rereg_mr_flags::IBV_REREG_MR_CHANGE_ACCESS.0 as i32;
        // SAFETY: mr is registered; the PD and address arguments are ignored for a
        // change of access alone (null is what rdma-core's own callers pass).
        let rc = unsafe {
            ibv_rereg_mr(self.mr, flags, ptr::null_mut(), ptr::null_mut(), 0, access.0 as i32)
        };
        if rc != 0 {
            return Err(VerbError::last(verb, None));
        }
        // SAFETY: still registered.
        self.keys = unsafe { ((*self.mr).lkey, (*self.mr).rkey) };
        Ok(())
    }

    pub(crate) fn addr(&self) -> u64 {
        self.buf as u64
    }
    pub(super) fn raw(&self) -> *mut ibv_mr {
        self.mr
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    pub(crate) fn lkey(&self) -> u32 {
        self.keys.0
    }
    pub(crate) fn rkey(&self) -> u32 {
        self.keys.1
    }

    /// Copies `bytes` in at `offset` (clipped to the buffer): only while no work
    /// request uses that part of it.
    pub(crate) fn write_at(&self, offset: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.len.saturating_sub(offset));
        // SAFETY: offset + n lies inside the buffer; the copy creates no reference.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf.add(offset.min(self.len)), n) };
    }

    /// A copy of `len` bytes from `offset` (clipped to the buffer).
    pub(crate) fn read_at(&self, offset: usize, len: usize) -> Vec<u8> {
        let start = offset.min(self.len);
        let n = len.min(self.len - start);
        let mut v = vec![0u8; n];
        // SAFETY: start + n lies inside the buffer; the copy creates no reference.
        unsafe { ptr::copy_nonoverlapping(self.buf.add(start), v.as_mut_ptr(), n) };
        v
    }

    /// What changed in its guard regions since it was registered.
    pub(crate) fn guards(&self) -> Guards {
        let mut before = vec![0u8; GUARD];
        let mut after = vec![0u8; GUARD];
        // SAFETY: the GUARD bytes before buf and from buf + len are the
        // allocation's own (see `new`); the copies create no reference.
        unsafe {
            ptr::copy_nonoverlapping(self.buf.sub(GUARD), before.as_mut_ptr(), GUARD);
            ptr::copy_nonoverlapping(self.buf.add(self.len), after.as_mut_ptr(), GUARD);
        }
        // Both counted from the MR's edge outwards.
        before.reverse();
        Guards { before: damage(false, &before), after: damage(true, &after) }
    }

    /// A copy of the buffer as it is now.
    pub(crate) fn read(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // SAFETY: buf is valid for len bytes; the copy does not create a reference.
        unsafe { ptr::copy_nonoverlapping(self.buf, v.as_mut_ptr(), self.len) };
        v
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered in new() (null once deregistered); deregistered
        // once, then the memory is freed.
        unsafe {
            if !self.mr.is_null() {
                ibv_dereg_mr(self.mr);
            }
            std::alloc::dealloc(self.buf.sub(GUARD), self.layout);
        }
    }
}

pub(crate) struct Ah {
    pub(super) ah: *mut ibv_ah,
    _pd: Arc<Pd>,
}

// SAFETY: see Context.
unsafe impl Send for Ah {}
// SAFETY: as for Send: shared references only reach thread-safe verbs.
unsafe impl Sync for Ah {}

impl Ah {
    /// A RoCE address handle towards `dgid` from our GID `sgid_index`.
    pub(crate) fn new(pd: &Arc<Pd>, port: u8, sgid_index: u8, dgid: [u8; 16]) -> Result<Ah> {
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
            return Err(VerbError::last(
                "ibv_create_ah",
                Some("RoCE needs a GID: check the GID index".into()),
            ));
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
pub(super) fn mtu_enum(bytes: u32) -> u32 {
    match bytes {
        256 => ibv_mtu::IBV_MTU_256,
        512 => ibv_mtu::IBV_MTU_512,
        2048 => ibv_mtu::IBV_MTU_2048,
        4096 => ibv_mtu::IBV_MTU_4096,
        _ => ibv_mtu::IBV_MTU_1024,
    }
}

/// `struct ibv_async_event` read as plain data: rdma-sys declares its type as a
/// Rust enum, which a value this build does not know would make undefined.
#[repr(C)]
struct RawAsyncEvent {
    element: *mut std::ffi::c_void,
    event_type: u32,
}

/// An asynchronous event: its `ibv_event_type` and the object it is about (the
/// SRQ's, QP's or CQ's address, to match with `Srq::id` or `Qp::id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AsyncEvent {
    pub(crate) kind: EventType,
    pub(crate) element: usize,
}

/// A memory window: type 1 (bound with `ibv_bind_mw`) or type 2 (bound by an
/// `IBV_WR_BIND_MW` posted on a QP).
pub(crate) struct Mw {
    pub(super) mw: *mut ibv_mw,
    pub(crate) kind: MwKind,
    _pd: Arc<Pd>,
}

// SAFETY: see Context.
unsafe impl Send for Mw {}
// SAFETY: as for Send: shared references only reach thread-safe verbs.
unsafe impl Sync for Mw {}

impl Mw {
    pub(crate) fn new(pd: &Arc<Pd>, kind: MwKind) -> Result<Mw> {
        let t = match kind {
            MwKind::Type1 => ibv_mw_type::IBV_MW_TYPE_1,
            MwKind::Type2 => ibv_mw_type::IBV_MW_TYPE_2,
        };
        // SAFETY: pd is alive; the inline sets errno (EOPNOTSUPP) when the provider
        // has no memory windows.
        let mw = unsafe { ibv_alloc_mw(pd.pd, t) }.unwrap_or(ptr::null_mut());
        if mw.is_null() {
            return Err(VerbError::last(
                format!("ibv_alloc_mw({kind:?})"),
                Some("the device may have no memory windows of this type".into()),
            ));
        }
        Ok(Mw { mw, kind, _pd: pd.clone() })
    }

    /// Its rkey as the provider last set it (a type 1 bind changes it; a type 2
    /// bind's new rkey is the poster's to remember).
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: mw is allocated until Drop.
        unsafe { (*self.mw).rkey }
    }

    /// The rkey a bind gives it next: the same index, the key byte moved on.
    pub(crate) fn next_rkey(rkey: u32) -> u32 {
        (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_mw; deallocated once, before its PD.
        unsafe { ibv_dealloc_mw(self.mw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(after: bool) -> Vec<u8> {
        (0..GUARD).map(|i| canary(after, i)).collect()
    }

    #[test]
    fn an_intact_guard_region_shows_no_damage() {
        assert_eq!(damage(false, &region(false)), None);
        assert_eq!(damage(true, &region(true)), None);
    }

    #[test]
    fn the_canary_is_no_fill_byte_and_differs_by_side() {
        let r = region(true);
        // A device writing zeros, 0xff or any one byte over it is seen: no value
        // covers more than a few of its bytes.
        for fill in [0u8, 0xff, 0xa5] {
            let d = damage(true, &vec![fill; GUARD]).expect("a filled region is damage");
            assert!(d.changed as usize > GUARD - GUARD / 64, "{fill:#x}: {}", d.changed);
        }
        assert_ne!(r, region(false), "the sides hold different canaries");
        // Nor does a copy shifted by a byte pass for it.
        let mut shifted = r[1..].to_vec();
        shifted.push(0);
        assert!(damage(true, &shifted).is_some());
    }

    #[test]
    fn damage_names_how_many_bytes_and_the_nearest() {
        let mut r = region(true);
        // A write of 4 bytes starting 3 past the MR's end, and one far out.
        for b in &mut r[3..7] {
            *b = !*b;
        }
        r[4000] ^= 1;
        let d = damage(true, &r).expect("damage");
        assert_eq!((d.changed, d.first), (5, 3));
        assert_eq!(d.want.len(), 16);
        assert_eq!(
            d.got[..4],
            [!canary(true, 3), !canary(true, 4), !canary(true, 5), !canary(true, 6)]
        );
        assert_eq!(d.want[4..], region(true)[7..19]);
        // Near the far end the sample is clipped to the region.
        let mut r = region(false);
        r[GUARD - 2] ^= 0x80;
        let d = damage(false, &r).expect("damage");
        assert_eq!((d.changed, d.first, d.got.len()), (1, GUARD as u32 - 2, 2));
    }
}
