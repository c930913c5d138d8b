//! rdma_cm connections for QPs we created ourselves: librdmacm carries the
//! REQ/REP/RTU on QP1 and computes the QP attributes; we apply them (with the
//! scenario's own timers and access on top) and take the QP to RTS.
//!
//! Owns: [`CmConn`] (listen, accept, connect). Imports: `super::qp` and `super::error`;
//! `rdma_sys`'s librdmacm and libc for the event channel.
use std::os::fd::BorrowedFd;
use std::ptr;

use nix::poll::{poll, PollFd, PollFlags};
use rdma_sys::*;

use super::error::{Result, VerbError};
use super::qp::{Qp, Reset, Rts};
use crate::vocab::QpAttrs;

/// An rdma_cm connection for a QP we created ourselves. Dropping it disconnects
/// (DREQ/DREP on the wire) and releases the ids and the channel.
pub(crate) struct CmConn {
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
// SAFETY: as for Send: shared references only reach thread-safe verbs.
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
            return Err(VerbError::last(
                "rdma_create_event_channel",
                Some("is the rdma_ucm module loaded?".into()),
            ));
        }
        // SAFETY: ec is a valid channel; its fd is ours to make non-blocking.
        unsafe {
            let fd = (*ec).fd;
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
        }
        Ok(CmConn {
            ec,
            id: ptr::null_mut(),
            listen: ptr::null_mut(),
            sq_psn: 0,
            rq_psn: 0,
            dest_qpn: 0,
            peer_private: Vec::new(),
        })
    }

    fn create_id(&self, out: &mut *mut rdma_cm_id) -> Result<()> {
        // SAFETY: ec is valid; out receives the new id.
        let rc =
            unsafe { rdma_create_id(self.ec, out, ptr::null_mut(), rdma_port_space::RDMA_PS_TCP) };
        if rc != 0 {
            return Err(VerbError::last("rdma_create_id", None));
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
                    // SAFETY: ec is a valid channel for the life of self, and so its fd
                    // stays open for the borrow, which ends with this statement.
                    let fd = unsafe { BorrowedFd::borrow_raw((*self.ec).fd) };
                    // A failed or interrupted wait only means we look again.
                    let _ = poll(&mut [PollFd::new(fd, PollFlags::POLLIN)], 50u16);
                    continue;
                }
                return Err(VerbError::from_errno(
                    format!("waiting for RDMA_CM_EVENT_{}", cm_event_name(want)),
                    e.raw_os_error().unwrap_or(libc::ETIMEDOUT),
                    Some(format!("nothing came within {within:?}: is the peer listening, and the address reachable?")),
                ));
            }
            // SAFETY: ev is a valid event until acked.
            let (t, status, id) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
            let private = if t == rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST
                || t == rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_RESPONSE
            {
                // SAFETY: connection events carry `param.conn`; its private data
                // (when not null) is private_data_len bytes owned by the event,
                // copied out before the ack frees it.
                unsafe {
                    let c = &(*ev).param.conn;
                    if c.private_data.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(
                            c.private_data.cast::<u8>(),
                            c.private_data_len as usize,
                        )
                        .to_vec()
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
            let rejected = t == rdma_cm_event_type::RDMA_CM_EVENT_REJECTED;
            let errno = match status {
                s if s < 0 => -s,
                _ if rejected => libc::ECONNREFUSED,
                _ => libc::EPROTO,
            };
            return Err(VerbError::from_errno(
                format!("rdma_cm: expected {}, got {}", cm_event_name(want), cm_event_name(t)),
                errno,
                rejected.then(|| format!("the peer rejected the connection (status {status})")),
            ));
        }
    }

    /// Moves `qp` to `state` with the attributes the CM computed, overriding what
    /// the scenario sets.
    fn step<S>(&mut self, qp: &Qp<S>, state: u32, a: &QpAttrs) -> Result<()> {
        use ibv_qp_attr_mask as M;
        // SAFETY: zeroed attributes are valid.
        let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
        x.qp_state = state;
        let mut mask: i32 = 0;
        // SAFETY: id is connected far enough for this state; x and mask are out params.
        let rc = unsafe { rdma_init_qp_attr(self.id, &mut x, &mut mask) };
        VerbError::check(format!("rdma_init_qp_attr({state})"), rc, None)?;
        let m = mask as u32;
        if m & M::IBV_QP_ACCESS_FLAGS.0 != 0 {
            x.qp_access_flags = a.access.0;
        }
        if m & M::IBV_QP_MIN_RNR_TIMER.0 != 0 {
            x.min_rnr_timer = a.params.min_rnr_timer;
        }
        if m & M::IBV_QP_TIMEOUT.0 != 0 {
            x.timeout = a.params.timeout;
        }
        if m & M::IBV_QP_RETRY_CNT.0 != 0 {
            x.retry_cnt = a.params.retry_cnt;
        }
        if m & M::IBV_QP_RNR_RETRY.0 != 0 {
            x.rnr_retry = a.params.rnr_retry;
        }
        if m & M::IBV_QP_RQ_PSN.0 != 0 {
            self.rq_psn = x.rq_psn;
            self.dest_qpn = x.dest_qp_num;
        }
        if m & M::IBV_QP_SQ_PSN.0 != 0 {
            self.sq_psn = x.sq_psn;
        }
        qp.apply_raw(
            &mut x,
            mask,
            &format!("ibv_modify_qp(state {state}) with rdma_cm's attributes"),
        )
    }

    /// The connection parameters; `private` must outlive the call they are passed to.
    fn param<S>(qp: &Qp<S>, a: &QpAttrs, private: &[u8]) -> rdma_conn_param {
        // SAFETY: zeroed is valid (null private data).
        let mut p: rdma_conn_param = unsafe { std::mem::zeroed() };
        if !private.is_empty() {
            p.private_data = private.as_ptr().cast();
            p.private_data_len = private.len().min(u8::MAX as usize) as u8;
        }
        p.responder_resources = a.params.max_dest_rd_atomic;
        p.initiator_depth = a.params.max_rd_atomic;
        p.retry_count = a.params.retry_cnt;
        p.rnr_retry_count = a.params.rnr_retry;
        p.qp_num = qp.qpn();
        p
    }

    /// The passive side, before the active side connects: listening on ip:port.
    pub(crate) fn listen(ip: std::net::Ipv4Addr, port: u16) -> Result<CmConn> {
        let mut c = CmConn::new()?;
        let mut l = ptr::null_mut();
        c.create_id(&mut l)?;
        c.listen = l;
        let mut sa = sockaddr(ip, port);
        // SAFETY: l is a fresh id; sa is a valid sockaddr_in.
        let rc = unsafe { rdma_bind_addr(l, (&mut sa as *mut libc::sockaddr_in).cast()) };
        if rc != 0 {
            return Err(VerbError::last(
                format!("rdma_bind_addr({ip}:{port})"),
                Some("is the address one of this host's, on an RDMA device?".into()),
            ));
        }
        // SAFETY: l is bound.
        if unsafe { rdma_listen(l, 1) } != 0 {
            return Err(VerbError::last("rdma_listen", None));
        }
        Ok(c)
    }

    /// The passive side, listening ([`CmConn::listen`]): accepts one connection
    /// for `qp`, answering with `private` (at most 196 bytes) in the REP; `qp`
    /// ends in RTS.
    pub(crate) fn accept(
        mut self,
        qp: Qp<Reset>,
        a: &QpAttrs,
        private: &[u8],
        within: std::time::Duration,
    ) -> Result<(CmConn, Qp<Rts>)> {
        check_private("rdma_accept", private, 196)?;
        let c = &mut self;
        (c.id, c.peer_private) =
            c.expect(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST, within)?;
        c.step(&qp, ibv_qp_state::IBV_QPS_INIT, a)?;
        c.step(&qp, ibv_qp_state::IBV_QPS_RTR, a)?;
        c.step(&qp, ibv_qp_state::IBV_QPS_RTS, a)?;
        let mut p = Self::param(&qp, a, private);
        // SAFETY: id came with the connect request; p is valid (private outlives it).
        VerbError::check("rdma_accept", unsafe { rdma_accept(c.id, &mut p) }, None)?;
        c.expect(rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED, within)?;
        // The CM's attributes took it through INIT and RTR to RTS just above.
        Ok((self, qp.into_state()))
    }

    /// The active side: resolve, connect `qp` to ip:port with `private` (at most 56
    /// bytes) in the REQ; `qp` ends in RTS. A connection refused because the passive
    /// side is not listening yet is retried with a fresh id.
    pub(crate) fn connect(
        ip: std::net::Ipv4Addr,
        port: u16,
        qp: Qp<Reset>,
        a: &QpAttrs,
        private: &[u8],
        within: std::time::Duration,
    ) -> Result<(CmConn, Qp<Rts>)> {
        check_private("rdma_connect", private, 56)?;
        let until = std::time::Instant::now() + within;
        loop {
            match Self::try_connect(ip, port, &qp, a, private, within) {
                Err(e) if e.verb().contains("REJECTED") && std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                // The CM's attributes took it through INIT and RTR to RTS.
                Ok(c) => return Ok((c, qp.into_state())),
                Err(e) => return Err(e),
            }
        }
    }

    fn try_connect(
        ip: std::net::Ipv4Addr,
        port: u16,
        qp: &Qp<Reset>,
        a: &QpAttrs,
        private: &[u8],
        within: std::time::Duration,
    ) -> Result<CmConn> {
        let mut c = CmConn::new()?;
        let mut id = ptr::null_mut();
        c.create_id(&mut id)?;
        c.id = id;
        let mut dst = sockaddr(ip, port);
        // SAFETY: id is fresh; dst is a valid sockaddr_in; no source address.
        let rc = unsafe {
            rdma_resolve_addr(
                id,
                ptr::null_mut(),
                (&mut dst as *mut libc::sockaddr_in).cast(),
                2000,
            )
        };
        if rc != 0 {
            return Err(VerbError::last(format!("rdma_resolve_addr({ip})"), None));
        }
        c.expect(rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED, within)?;
        // SAFETY: the address is resolved.
        if unsafe { rdma_resolve_route(id, 2000) } != 0 {
            return Err(VerbError::last("rdma_resolve_route", None));
        }
        c.expect(rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_RESOLVED, within)?;
        c.step(qp, ibv_qp_state::IBV_QPS_INIT, a)?;
        let mut p = Self::param(qp, a, private);
        // SAFETY: the route is resolved; p is valid (private outlives it).
        VerbError::check("rdma_connect", unsafe { rdma_connect(id, &mut p) }, None)?;
        (_, c.peer_private) =
            c.expect(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_RESPONSE, within)?;
        c.step(qp, ibv_qp_state::IBV_QPS_RTR, a)?;
        c.step(qp, ibv_qp_state::IBV_QPS_RTS, a)?;
        // SAFETY: connected; sends the RTU.
        VerbError::check("rdma_establish", unsafe { rdma_establish(id) }, None)?;
        Ok(c)
    }
}

/// librdmacm refuses private data longer than the message has room for (after its
/// own 36-byte header in a REQ); say so before the call does, with the numbers.
fn check_private(verb: &str, private: &[u8], room: usize) -> Result<()> {
    if private.len() > room {
        return Err(VerbError::from_errno(
            verb,
            libc::EINVAL,
            Some(format!(
                "{} bytes of private data; an rdma_cm {} has room for {room}",
                private.len(),
                if room == 56 { "REQ" } else { "REP" }
            )),
        ));
    }
    Ok(())
}

/// How long a connection that goes waits for its disconnect to be answered.
const DISCONNECT_WITHIN: std::time::Duration = std::time::Duration::from_millis(500);

impl CmConn {
    /// Waits (up to `within`) for the disconnect to be done: the peer's DREP to
    /// our DREQ, or its own DREQ. Until then the CM may still send for this
    /// connection, after whatever runs next has begun counting.
    fn await_disconnected(&self, within: std::time::Duration) {
        let until = std::time::Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            // Another event first (one left from the connection): read on.
            if self.expect(rdma_cm_event_type::RDMA_CM_EVENT_DISCONNECTED, left).is_ok() {
                return;
            }
        }
    }
}

impl Drop for CmConn {
    fn drop(&mut self) {
        // SAFETY: ids and channel were created here and are released once.
        unsafe {
            if !self.id.is_null() {
                // Refused (not connected): nothing to wait for.
                if rdma_disconnect(self.id) == 0 {
                    self.await_disconnected(DISCONNECT_WITHIN);
                }
                rdma_destroy_id(self.id);
            }
            if !self.listen.is_null() {
                rdma_destroy_id(self.listen);
            }
            rdma_destroy_event_channel(self.ec);
        }
    }
}
