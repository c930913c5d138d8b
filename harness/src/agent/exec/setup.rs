//! `Setup`: an endpoint's verbs objects made from the controller's order —
//! device and PD (kept open between a lab agent's scenarios), CQ, MRs, SRQs,
//! memory windows and QPs, each within the agent's limits — and what the
//! controller needs to know of them (QPNs, keys, addresses, the GID).
//!
//! Owns: [`Agent::setup`](super::Agent). Imports: the executor's state
//! ([`super`]), the protocol's setup order and answer, the verbs layer.
use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::sync::Arc;
use std::time::Instant;

use dissector::wire::Psn;

use super::{
    err, gid_ip, random_psn, Agent, AgentError, AgentResult, Handle, Local, MwState, QpState,
};
use crate::protocol::{FromAgent, MrInfo, MrSetup, MwInfo, MwSetup, QpInfo, QpSetup, Setup};
use crate::verbs::{Context, Cq, Mr, Mw, Pd, Qp, QpExtras, Srq};
use crate::vocab::QpKind;

/// How many completions an endpoint's CQ holds when its scenario does not say.
const DEFAULT_CQ_DEPTH: u32 = 256;

impl Agent {
    /// Makes the endpoint's verbs objects from the controller's order, within the
    /// agent's limits, and answers with what the controller needs to know of them.
    pub(super) fn setup(&mut self, s: Setup) -> AgentResult<FromAgent> {
        if self.ep.is_some() {
            return err("already set up");
        }
        self.limits.may_set_up(
            s.mrs.len(),
            s.mrs.iter().map(|m| m.size).fold(0u64, u64::saturating_add),
            s.qps.len(),
        )?;
        let port = s.port;
        let (ctx, pd, open_ms) = self.open_port(s.device.as_deref(), port)?;
        let (gid_index, gid) = port_gid(&ctx, port, s.gid_index)?;
        let depth = s.cq_depth.unwrap_or(DEFAULT_CQ_DEPTH);
        crate::agent::limits::cq_depth_ok(depth)?;
        let cq = Cq::new(&ctx, depth as i32)?;
        let (mr_map, mr_infos) = create_mrs(&pd, &s.mrs)?;
        let mut srqs = BTreeMap::new();
        for q in &s.srqs {
            srqs.insert(q.name.clone(), Srq::new(&pd, q.max_wr, q.max_sge)?);
        }
        let (mws, mw_infos) = create_mws(&pd, &s.mws)?;
        let mut qp_map = BTreeMap::new();
        let mut qp_infos = Vec::new();
        for q in s.qps {
            let (info, state) = create_qp(&pd, &cq, &srqs, q, gid)?;
            qp_infos.push(info);
            qp_map.insert(state.setup.name.clone(), state);
        }
        let ip = gid_ip(&gid).to_string();
        let device = ctx.name.clone();
        self.ep = Some(Local {
            qps: qp_map,
            mws,
            mrs: mr_map,
            srqs,
            mr_table: mr_infos.clone(),
            cq,
            pd,
            ctx,
            port,
            gid_index,
            gid,
            started: Instant::now(),
            wcs: Vec::new(),
            waited: 0,
            events: Vec::new(),
            probe_link: None,
            // Setup sends nothing: from here on, what the counters count is the
            // scenario's.
            counters_before: crate::agent::counters::read(&device, port),
            counters_read: Instant::now(),
        });
        Ok(FromAgent::SetupDone {
            device,
            port,
            gid_index,
            gid: Ipv6Addr::from(gid).to_string(),
            ip,
            qps: qp_infos,
            mrs: mr_infos,
            mws: mw_infos,
            open_ms,
        })
    }

    /// The device (kept open, or opened now) and its PD, with `port` checked
    /// ACTIVE and the events of earlier scenarios dropped; and how long opening
    /// took, in ms.
    fn open_port(
        &mut self,
        device: Option<&str>,
        port: u8,
    ) -> AgentResult<(Arc<Context>, Arc<Pd>, f64)> {
        let opening = Instant::now();
        let (mut ctx, mut pd, fresh) = self.device.get(device)?;
        let mut state = ctx.port_state(port);
        if state.is_err() && !fresh {
            // The kept context may name a device that went away since: once more,
            // on a context opened now.
            self.device.forget();
            (ctx, pd, _) = self.device.get(device)?;
            state = ctx.port_state(port);
        }
        let (state, _) = state?;
        // What the last scenario left in the event queue (port events; its QPs'
        // and SRQs' events went with them) is not this scenario's.
        ctx.watch_async_events()?;
        drop(ctx.async_events());
        let open_ms = opening.elapsed().as_secs_f64() * 1000.0;
        if state != rdma_sys::ibv_port_state::IBV_PORT_ACTIVE {
            return err(format!("{} port {port} is not ACTIVE (state {state})", ctx.name));
        }
        Ok((ctx, pd, open_ms))
    }
}

/// The GID the endpoint's packets carry, and its index: the one asked for, or
/// the port's IPv4-mapped RoCEv2 GID; an empty one is refused.
fn port_gid(ctx: &Context, port: u8, asked: Option<u8>) -> AgentResult<(u8, [u8; 16])> {
    let (gid_index, gid) = match asked {
        Some(i) => (i, ctx.gid(port, i)?),
        None => ctx.roce_v2_ipv4_gid(port)?,
    };
    if gid == [0; 16] {
        return err(format!("GID index {gid_index} of {} port {port} is empty; RoCEv2 needs the IPv4-mapped GID (index 1 on rxe)", ctx.name));
    }
    Ok((gid_index, gid))
}

/// The MRs, registered and filled, by name; and what the peer learns of them,
/// in the order given.
fn create_mrs(pd: &Arc<Pd>, mrs: &[MrSetup]) -> AgentResult<(BTreeMap<String, Mr>, Vec<MrInfo>)> {
    let mut mr_map = BTreeMap::new();
    let mut mr_infos = Vec::new();
    for m in mrs {
        let size = usize::try_from(m.size).map_err(|_| {
            AgentError::from(format!("MR `{}` of {} bytes is too large here", m.name, m.size))
        })?;
        let mr = Mr::new(pd, size, m.access, &m.fill.bytes(size))?;
        mr_infos.push(MrInfo {
            name: m.name.clone(),
            addr: mr.addr(),
            len: mr.len() as u64,
            rkey: mr.rkey(),
            lkey: mr.lkey(),
        });
        mr_map.insert(m.name.clone(), mr);
    }
    Ok((mr_map, mr_infos))
}

/// The memory windows, allocated unbound, by name; and their rkeys, in the
/// order given.
fn create_mws(
    pd: &Arc<Pd>,
    mws: &[MwSetup],
) -> AgentResult<(BTreeMap<String, MwState>, Vec<MwInfo>)> {
    let mut mw_map = BTreeMap::new();
    let mut mw_infos = Vec::new();
    for w in mws {
        let mw = Mw::new(pd, w.kind)?;
        mw_infos.push(MwInfo { name: w.name.clone(), rkey: mw.rkey() });
        mw_map.insert(w.name.clone(), MwState { rkey: mw.rkey(), mw });
    }
    Ok((mw_map, mw_infos))
}

/// A QP created (on its SRQ, if it names one) with its first PSN, as the
/// controller learns it and as the endpoint keeps it.
fn create_qp(
    pd: &Arc<Pd>,
    cq: &Arc<Cq>,
    srqs: &BTreeMap<String, Arc<Srq>>,
    q: QpSetup,
    gid: [u8; 16],
) -> AgentResult<(QpInfo, QpState)> {
    let srq = match &q.srq {
        Some(n) => Some(srqs.get(n).cloned().ok_or_else(|| {
            AgentError::from(format!("QP `{}`: no SRQ `{n}` on this endpoint", q.name))
        })?),
        None => None,
    };
    let qp = Qp::new(
        pd,
        cq,
        q.kind,
        q.caps,
        QpExtras { atomic_write: q.atomic_write, flush: q.flush, srq },
    )?;
    let psn = q.psn.unwrap_or_else(random_psn) & Psn::MASK;
    let (qpn, id) = (qp.qpn(), qp.id());
    let info = QpInfo {
        name: q.name.clone(),
        qpn,
        psn,
        gid: Ipv6Addr::from(gid).to_string(),
        qkey: (q.kind == QpKind::Ud).then_some(q.params.qkey),
    };
    let state = QpState {
        setup: q,
        qpn,
        id,
        cm: None,
        qp: Handle::Created(qp),
        psn,
        peer: None,
        peer_qkey: 0,
        peer_mrs: Vec::new(),
        ah: None,
        probe_next: None,
        listening: None,
    };
    Ok((info, state))
}
