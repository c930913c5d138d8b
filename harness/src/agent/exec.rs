//! The agent's executor: one endpoint's verbs objects, driven by [`ToAgent`]
//! messages. Transport-free: `serve` speaks the protocol over any byte stream.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdma_sys::{ibv_access_flags, ibv_qp_cap, ibv_qp_type, ibv_send_flags, ibv_wr_opcode};
use serde::{Deserialize, Serialize};

use super::cm_private;
use super::proto::{self, FromAgent, MrInfo, QpInfo, ReadError, ToAgent, Wc};
use crate::scenario::model::{ConnectMethod, Endpoint, MrSpec, Op, QpSpec, QpType, Step};
use crate::scenario::parse::{access_name, content_bytes};
use crate::verbs::{self, Ah, Context, Cq, Mr, Pd, Peer, Qp, QpAttrs, Remote, SendWr, VerbError};

/// An error for the controller: message, and the verb/errno/hint when a verb failed.
#[derive(Debug)]
pub struct AgentError {
    pub message: String,
    pub verb: Option<VerbError>,
}

impl From<VerbError> for AgentError {
    fn from(e: VerbError) -> Self {
        AgentError { message: e.what(), verb: Some(e) }
    }
}

impl From<String> for AgentError {
    fn from(message: String) -> Self {
        AgentError { message, verb: None }
    }
}

impl AgentError {
    fn into_msg(self) -> FromAgent {
        FromAgent::Error {
            message: self.message,
            verb: self.verb.as_ref().map(|v| v.verb.clone()),
            errno: self.verb.as_ref().map(|v| v.errno),
            hint: self.verb.and_then(|v| v.hint),
        }
    }
}

type R<T> = std::result::Result<T, AgentError>;

fn err<T>(m: impl Into<String>) -> R<T> {
    Err(AgentError { message: m.into(), verb: None })
}

/// One QP of this endpoint.
struct QpState {
    spec: QpSpec,
    /// rdma_cm's connection, released (DREQ) before the QP is destroyed.
    cm: Option<verbs::CmConn>,
    qp: Qp,
    psn: u32,
    peer: Option<Peer>,
    peer_qkey: u32,
    peer_mrs: Vec<MrInfo>,
    ah: Option<Ah>,
    /// Probes: the PSN the peer expects next, as far as this side's crafted
    /// packets moved it (starts at the QP's send PSN).
    probe_next: Option<u32>,
}

impl QpState {
    /// Address and rkey of `r`, an MR of this QP's peer (at an offset; `rkey`
    /// overrides the exchanged one).
    fn remote(&self, r: &crate::scenario::model::Remote) -> R<(u64, u32)> {
        let m = self
            .peer_mrs
            .iter()
            .find(|m| m.name == r.mr)
            .ok_or_else(|| AgentError::from(format!("the peer of `{}` has no MR `{}`", self.spec.name, r.mr)))?;
        Ok((m.addr.wrapping_add(r.offset), r.rkey.unwrap_or(m.rkey)))
    }
}

/// Everything `Setup` created. Field order is drop order: QPs and AHs, then MRs,
/// then the CQ, the PD, the context.
struct Local {
    name: String,
    qps: BTreeMap<String, QpState>,
    mrs: BTreeMap<String, Mr>,
    /// This endpoint's MRs in scenario order, as the peer learns them.
    mr_table: Vec<MrInfo>,
    cq: Arc<Cq>,
    _pd: Arc<Pd>,
    _ctx: Arc<Context>,
    port: u8,
    gid_index: u8,
    gid: [u8; 16],
    started: Instant,
    wcs: Vec<Wc>,
    /// The interface crafted packets go out on, opened at the first probe.
    probe_link: Option<crate::net::raw::Link>,
}

/// What the two ends of a TCP exchange tell each other.
#[derive(Debug, Serialize, Deserialize)]
struct Exchange {
    qpn: u32,
    psn: u32,
    gid: String,
    qkey: u32,
}

fn access_bits(flags: &[String]) -> R<u32> {
    let mut bits = 0;
    for f in flags {
        bits |= match access_name(f).as_str() {
            "local_write" => ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0,
            "remote_write" => ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
            "remote_read" => ibv_access_flags::IBV_ACCESS_REMOTE_READ.0,
            "remote_atomic" => ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0,
            "mw_bind" => ibv_access_flags::IBV_ACCESS_MW_BIND.0,
            "zero_based" => ibv_access_flags::IBV_ACCESS_ZERO_BASED.0,
            "relaxed_ordering" => ibv_access_flags::IBV_ACCESS_RELAXED_ORDERING.0,
            other => return err(format!("unknown access flag `{other}`")),
        };
    }
    Ok(bits)
}

fn gid_ip(g: &[u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(*g);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex16(s: &str) -> R<[u8; 16]> {
    let v: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| AgentError::from(format!("peer sent a malformed GID `{s}`")))?;
    v.try_into().map_err(|_| AgentError::from(format!("peer sent a GID of the wrong length `{s}`")))
}

/// A fresh starting PSN (24 bits) when the scenario does not set one.
fn random_psn() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(1);
    (t ^ std::process::id().rotate_left(12)) & 0x00ff_ffff
}

/// The executor of one agent.
#[derive(Default)]
pub struct Agent {
    ep: Option<Local>,
}

impl Agent {
    pub fn handle(&mut self, m: ToAgent) -> FromAgent {
        let r = match m {
            ToAgent::Hello { .. } => Ok(FromAgent::Hello {
                version: proto::VERSION,
                agent: format!("roce {}", env!("CARGO_PKG_VERSION")),
                host: std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string(),
                kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|k| k.trim().to_string()),
            }),
            ToAgent::Setup { endpoint, spec, qps, mrs } => self.setup(endpoint, &spec, qps, mrs),
            ToAgent::Connect { qp, passive, peer_ip, port, peer_mrs } => self.connect(&qp, passive, &peer_ip, port, peer_mrs),
            ToAgent::Step { index, step } => self.step(index, &step),
            ToAgent::Completions { min, wait_ms } => self.completions(min, Duration::from_millis(wait_ms)),
            ToAgent::ReadMemory { mr } => self.read_memory(&mr),
            ToAgent::Teardown => {
                self.ep = None;
                Ok(FromAgent::TornDown)
            }
        };
        r.unwrap_or_else(AgentError::into_msg)
    }

    fn ep(&mut self) -> R<&mut Local> {
        self.ep.as_mut().ok_or_else(|| AgentError::from("not set up yet: Setup comes first".to_string()))
    }

    fn setup(&mut self, name: String, spec: &Endpoint, qps: Vec<QpSpec>, mrs: Vec<MrSpec>) -> R<FromAgent> {
        if self.ep.is_some() {
            return err("already set up");
        }
        let ctx = Context::open(spec.device.as_deref())?;
        let port = spec.port.unwrap_or(1);
        let (state, _) = ctx.port_state(port)?;
        if state != rdma_sys::ibv_port_state::IBV_PORT_ACTIVE {
            return err(format!("{} port {port} is not ACTIVE (state {state})", ctx.name));
        }
        let (gid_index, gid) = match spec.gid_index {
            Some(i) => (i, ctx.gid(port, i)?),
            None => ctx.roce_v2_ipv4_gid(port)?,
        };
        if gid == [0; 16] {
            return err(format!(
                "GID index {gid_index} of {} port {port} is empty; RoCEv2 needs the IPv4-mapped GID (index 1 on rxe)",
                ctx.name
            ));
        }
        let pd = Pd::new(&ctx)?;
        let cq = Cq::new(&ctx, 256)?;
        let mut mr_map = BTreeMap::new();
        let mut mr_infos = Vec::new();
        for m in &mrs {
            let access = access_bits(m.access.as_deref().unwrap_or(&["local_write".to_string()]))?;
            let init = match &m.init {
                Some(c) => content_bytes(c, m.size as usize)?,
                None => Vec::new(),
            };
            let mr = Mr::new(&pd, m.size as usize, access, &init)?;
            mr_infos.push(MrInfo { name: m.name.clone(), addr: mr.addr(), len: mr.len() as u64, rkey: mr.rkey(), lkey: mr.lkey() });
            mr_map.insert(m.name.clone(), mr);
        }
        let mut qp_map = BTreeMap::new();
        let mut qp_infos = Vec::new();
        for q in qps {
            let t = match q.qp_type {
                QpType::Rc => ibv_qp_type::IBV_QPT_RC,
                QpType::Uc => ibv_qp_type::IBV_QPT_UC,
                QpType::Ud => ibv_qp_type::IBV_QPT_UD,
            };
            let sge = q.max_sge.unwrap_or(4);
            let cap = ibv_qp_cap {
                max_send_wr: q.max_send_wr.unwrap_or(16),
                max_recv_wr: q.max_recv_wr.unwrap_or(16),
                max_send_sge: sge,
                max_recv_sge: sge,
                max_inline_data: q.max_inline.unwrap_or(0),
            };
            let qp = Qp::new(&pd, &cq, t, cap)?;
            let psn = q.psn.as_ref().and_then(|p| p.get(&name)).unwrap_or_else(random_psn) & 0x00ff_ffff;
            qp_infos.push(QpInfo { name: q.name.clone(), qpn: qp.qpn(), psn, gid: Ipv6Addr::from(gid).to_string(), qkey: q.qkey });
            qp_map.insert(q.name.clone(), QpState { spec: q, cm: None, qp, psn, peer: None, peer_qkey: 0, peer_mrs: Vec::new(), ah: None, probe_next: None });
        }
        let ip = gid_ip(&gid).to_string();
        let device = ctx.name.clone();
        self.ep = Some(Local {
            name,
            qps: qp_map,
            mrs: mr_map,
            mr_table: mr_infos.clone(),
            cq,
            _pd: pd,
            _ctx: ctx,
            port,
            gid_index,
            gid,
            started: Instant::now(),
            wcs: Vec::new(),
            probe_link: None,
        });
        Ok(FromAgent::SetupDone { device, port, gid_index, gid: Ipv6Addr::from(gid).to_string(), ip, qps: qp_infos, mrs: mr_infos })
    }

    fn connect(&mut self, qp: &str, passive: bool, peer_ip: &str, port: u16, mut peer_mrs: Vec<MrInfo>) -> R<FromAgent> {
        let ep = self.ep()?;
        let private = cm_private::encode(&ep.mr_table, if passive { cm_private::REP_ROOM } else { cm_private::REQ_ROOM });
        let (my_ip, gid, gid_index, ep_port, ep_name) = (gid_ip(&ep.gid), ep.gid, ep.gid_index, ep.port, ep.name.clone());
        let q = ep.qps.get_mut(qp).ok_or_else(|| AgentError::from(format!("no QP `{qp}` on this endpoint")))?;
        let qkey = q.spec.qkey.unwrap_or(0x1111_1111);
        let mine = Exchange { qpn: q.qp.qpn(), psn: q.psn, gid: hex(&gid), qkey };
        let peer_ip: IpAddr = peer_ip.parse().map_err(|_| AgentError::from(format!("peer address `{peer_ip}` is not an IP address")))?;
        let s = &q.spec;
        let default_access = ["remote_write", "remote_read", "remote_atomic"].map(String::from).to_vec();
        let access = s.access.as_ref().and_then(|a| a.get(&ep_name)).unwrap_or(default_access);
        let attrs = QpAttrs {
            port: ep_port,
            sgid_index: gid_index,
            access: access_bits(&access)?,
            qkey,
            mtu: s.mtu.unwrap_or(1024),
            sq_psn: q.psn,
            timeout: s.timeout.unwrap_or(14),
            retry_cnt: s.retry_cnt.unwrap_or(7),
            rnr_retry: s.rnr_retry.unwrap_or(7),
            min_rnr_timer: s.min_rnr_timer.unwrap_or(12),
            max_rd_atomic: s.max_rd_atomic.unwrap_or(1),
            max_dest_rd_atomic: s.max_dest_rd_atomic.unwrap_or(1),
        };
        let mut from_cm = None;
        let (peer, peer_qkey) = if q.spec.connect == ConnectMethod::RdmaCm {
            let (IpAddr::V4(mine4), IpAddr::V4(peer4)) = (my_ip, peer_ip) else {
                return err("rdma_cm here connects over IPv4 addresses");
            };
            if q.spec.qp_type != QpType::Rc && q.spec.qp_type != QpType::Uc {
                return err(format!("QP `{qp}`: rdma_cm connects RC and UC QPs; UD uses connect = \"tcp\" here"));
            }
            let cm = if passive {
                verbs::CmConn::accept(mine4, port, &q.qp, &attrs, &private, EXCHANGE_WITHIN)?
            } else {
                verbs::CmConn::connect(peer4, port, &q.qp, &attrs, &private, EXCHANGE_WITHIN)?
            };
            // The peer's MR addresses and rkeys, as it sent them in the REQ/REP.
            if let Some(entries) = cm_private::decode(&cm.peer_private)? {
                from_cm = Some(cm_private::apply(&mut peer_mrs, &entries)?);
            }
            // The CM chose the starting PSNs; report those.
            q.psn = cm.sq_psn;
            let peer = Peer { qpn: cm.dest_qpn, psn: cm.rq_psn, gid: peer4.to_ipv6_mapped().octets() };
            q.cm = Some(cm);
            (peer, 0)
        } else {
            let theirs = if passive { exchange_passive(my_ip, port, &mine)? } else { exchange_active(SocketAddr::new(peer_ip, port), &mine)? };
            let peer = Peer { qpn: theirs.qpn, psn: theirs.psn, gid: unhex16(&theirs.gid)? };
            q.qp.connect(&attrs, Some(peer))?;
            (peer, theirs.qkey)
        };
        q.peer = Some(peer);
        q.peer_qkey = peer_qkey;
        q.peer_mrs = peer_mrs;
        let qkey_out = (q.spec.qp_type == QpType::Ud).then_some(qkey);
        let local = QpInfo { name: qp.to_string(), qpn: q.qp.qpn(), psn: q.psn, gid: Ipv6Addr::from(gid).to_string(), qkey: qkey_out };
        let remote = QpInfo { name: qp.to_string(), qpn: peer.qpn, psn: peer.psn, gid: Ipv6Addr::from(peer.gid).to_string(), qkey: Some(peer_qkey) };
        if q.spec.qp_type == QpType::Ud {
            let pd = ep._pd.clone();
            let q = ep.qps.get_mut(qp).ok_or_else(|| AgentError::from(format!("no QP `{qp}`")))?;
            q.ah = Some(Ah::new(&pd, ep_port, gid_index, peer.gid)?);
        }
        Ok(FromAgent::Connected { qp: qp.to_string(), local, remote, peer_mrs_from_cm: from_cm })
    }

    fn step(&mut self, index: usize, s: &Step) -> R<FromAgent> {
        let ep = self.ep()?;
        match s.op {
            Op::Sync => {}
            Op::Sleep => std::thread::sleep(Duration::from_millis(s.ms.unwrap_or(0))),
            Op::WaitCompletions => {
                let want = s.count.unwrap_or(1) as usize + ep.wcs.len();
                ep.poll_until(want, Duration::from_millis(s.within_ms.unwrap_or(2000)))?;
            }
            Op::Probe => {
                let sent = ep.probe(s)?;
                ep.drain()?;
                return Ok(FromAgent::StepDone { index, probe: Some(sent) });
            }
            _ => ep.post(s)?,
        }
        self.ep()?.drain()?;
        Ok(FromAgent::StepDone { index, probe: None })
    }

    fn completions(&mut self, min: usize, wait: Duration) -> R<FromAgent> {
        let ep = self.ep()?;
        ep.poll_until(min, wait)?;
        // A moment more for anything unexpected (an error after the expected ones).
        std::thread::sleep(Duration::from_millis(50));
        ep.drain()?;
        Ok(FromAgent::Completions { wcs: ep.wcs.clone() })
    }

    fn read_memory(&mut self, mr: &str) -> R<FromAgent> {
        let ep = self.ep()?;
        let m = ep.mrs.get(mr).ok_or_else(|| AgentError::from(format!("no MR `{mr}` on this endpoint")))?;
        Ok(FromAgent::Memory { mr: mr.to_string(), hex: hex(&m.read()) })
    }
}

impl Local {
    fn drain(&mut self) -> R<()> {
        loop {
            let got = self.cq.poll(32)?;
            if got.is_empty() {
                return Ok(());
            }
            let t_ms = self.started.elapsed().as_secs_f64() * 1000.0;
            for c in got {
                let qp = self.qps.iter().find(|(_, q)| q.qp.qpn() == c.qp_num).map(|(n, _)| n.clone()).unwrap_or_default();
                let ud = self.qps.get(&qp).is_some_and(|q| q.spec.qp_type == QpType::Ud);
                self.wcs.push(Wc {
                    wr_id: c.wr_id,
                    status: verbs::names::status(c.status),
                    opcode: verbs::names::opcode(c.opcode),
                    byte_len: c.byte_len,
                    imm_data: c.imm_data,
                    qp,
                    qp_num: c.qp_num,
                    src_qp: ud.then_some(c.src_qp),
                    vendor_err: c.vendor_err,
                    t_ms,
                });
            }
        }
    }

    fn poll_until(&mut self, want: usize, wait: Duration) -> R<()> {
        let until = Instant::now() + wait;
        loop {
            self.drain()?;
            if self.wcs.len() >= want || Instant::now() >= until {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn sges(&self, s: &Step) -> R<Vec<(u64, u32, u32)>> {
        s.sge
            .iter()
            .map(|g| {
                let m = self.mrs.get(&g.mr).ok_or_else(|| AgentError::from(format!("no MR `{}` on this endpoint", g.mr)))?;
                let len = g.len.map(u64::from).unwrap_or((m.len() as u64).saturating_sub(g.offset));
                if g.offset + len > m.len() as u64 {
                    return err(format!("SGE {}+{len} past the end of MR `{}`", g.offset, g.mr));
                }
                Ok((m.addr() + g.offset, len as u32, m.lkey()))
            })
            .collect()
    }

    /// A crafted packet in the name of QP `s.qp`, to the QP at its other end.
    fn probe(&mut self, s: &Step) -> R<proto::ProbeSent> {
        let spec = s.probe.as_ref().ok_or_else(|| AgentError::from("a probe step without `probe = { … }`".to_string()))?;
        let qname = s.qp.as_deref().ok_or_else(|| AgentError::from("step without `qp`".to_string()))?;
        let my_ip = gid_ip(&self.gid);
        let q = self.qps.get(qname).ok_or_else(|| AgentError::from(format!("no QP `{qname}` on this endpoint")))?;
        let peer = q.peer.ok_or_else(|| AgentError::from(format!("QP `{qname}` is not connected: probes go to its peer")))?;
        let peer_ip = gid_ip(&peer.gid);
        let remote = spec.remote.as_ref().map(|r| q.remote(r)).transpose()?;
        let transport = q.spec.qp_type.transport();
        let next = q.probe_next.unwrap_or(q.psn);
        let aim = crate::probe::Aim { transport, dest_qp: peer.qpn, src_qp: q.qp.qpn(), next, remote };
        if self.probe_link.as_ref().is_none_or(|l| l.dst.ip != peer_ip) {
            self.probe_link = Some(crate::net::raw::Link::open(Some(my_ip), peer_ip, None, None)?);
        }
        let link = self.probe_link.as_mut().ok_or_else(|| AgentError::from("no link".to_string()))?;
        let frames = crate::probe::frames(spec, &aim, &link.src, &link.dst)?;
        for (f, _) in &frames {
            link.send(f)?;
        }
        std::thread::sleep(Duration::from_millis(spec.settle_ms.unwrap_or(crate::scenario::model::DEFAULT_SETTLE_MS)));
        let src_qp = q.qp.qpn();
        if let Some(q) = self.qps.get_mut(qname) {
            q.probe_next = Some(crate::probe::advance(spec, next));
        }
        Ok(proto::ProbeSent {
            id: spec.id.clone(),
            qp: qname.to_string(),
            src: my_ip.to_string(),
            dst: peer_ip.to_string(),
            src_qp,
            next,
            frames: frames.into_iter().map(|(_, s)| s).collect(),
        })
    }

    fn post(&mut self, s: &Step) -> R<()> {
        let qname = s.qp.as_deref().ok_or_else(|| AgentError::from("step without `qp`".to_string()))?;
        let sges = self.sges(s)?;
        let q = self.qps.get(qname).ok_or_else(|| AgentError::from(format!("no QP `{qname}` on this endpoint")))?;
        let wr_id = s.wr_id.unwrap_or(0);
        if s.op == Op::PostRecv {
            return Ok(q.qp.post_recv(wr_id, &sges)?);
        }
        let mut flags = 0;
        let mut signaled = true;
        for f in &s.flags {
            match f.to_ascii_lowercase().as_str() {
                "signaled" => signaled = true,
                "unsignaled" => signaled = false,
                "inline" => flags |= ibv_send_flags::IBV_SEND_INLINE.0,
                "solicited" => flags |= ibv_send_flags::IBV_SEND_SOLICITED.0,
                "fence" => flags |= ibv_send_flags::IBV_SEND_FENCE.0,
                other => return err(format!("unknown flag `{other}`")),
            }
        }
        if signaled {
            flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        let remote_mr = |r: &crate::scenario::model::Remote| q.remote(r);
        let remote = match (s.op, &s.remote) {
            (Op::Write | Op::WriteImm | Op::Read, Some(r)) => {
                let (addr, rkey) = remote_mr(r)?;
                Remote::Rdma { addr, rkey }
            }
            (Op::CmpSwap, Some(r)) => {
                let (addr, rkey) = remote_mr(r)?;
                Remote::Atomic { addr, rkey, compare_add: s.compare.unwrap_or(0), swap: s.swap.unwrap_or(0) }
            }
            (Op::FetchAdd, Some(r)) => {
                let (addr, rkey) = remote_mr(r)?;
                Remote::Atomic { addr, rkey, compare_add: s.add.unwrap_or(0), swap: 0 }
            }
            (Op::Send | Op::SendImm, _) if q.spec.qp_type == QpType::Ud => {
                let ah = q.ah.as_ref().ok_or_else(|| AgentError::from(format!("UD QP `{qname}` has no address handle: Connect first")))?;
                let peer = q.peer.ok_or_else(|| AgentError::from(format!("UD QP `{qname}` knows no peer")))?;
                Remote::Ud { ah, qpn: peer.qpn, qkey: q.peer_qkey }
            }
            (Op::Send | Op::SendImm, _) => Remote::None,
            (op, None) => return err(format!("{op:?} needs `remote`")),
            (op, Some(_)) => return err(format!("{op:?} cannot be posted here")),
        };
        let opcode = match s.op {
            Op::Send => ibv_wr_opcode::IBV_WR_SEND,
            Op::SendImm => ibv_wr_opcode::IBV_WR_SEND_WITH_IMM,
            Op::Write => ibv_wr_opcode::IBV_WR_RDMA_WRITE,
            Op::WriteImm => ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM,
            Op::Read => ibv_wr_opcode::IBV_WR_RDMA_READ,
            Op::CmpSwap => ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP,
            Op::FetchAdd => ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD,
            other => return err(format!("{other:?} is not a send-queue operation")),
        };
        let wr = SendWr { wr_id, opcode, flags, imm_data: s.imm_data.unwrap_or(0), remote };
        Ok(q.qp.post_send(&wr, &sges)?)
    }
}

const EXCHANGE_WITHIN: Duration = Duration::from_secs(20);

fn exchange_passive(ip: IpAddr, port: u16, mine: &Exchange) -> R<Exchange> {
    let l = TcpListener::bind((ip, port)).map_err(|e| AgentError::from(format!("listening on {ip}:{port} for the QP exchange: {e}")))?;
    l.set_nonblocking(true).map_err(|e| AgentError::from(e.to_string()))?;
    let until = Instant::now() + EXCHANGE_WITHIN;
    let s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return err(format!("no peer connected to {ip}:{port} within {EXCHANGE_WITHIN:?}: {e}")),
        }
    };
    s.set_nonblocking(false).map_err(|e| AgentError::from(e.to_string()))?;
    swap(s, mine)
}

fn exchange_active(to: SocketAddr, mine: &Exchange) -> R<Exchange> {
    let until = Instant::now() + EXCHANGE_WITHIN;
    let s = loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(2)) {
            Ok(s) => break s,
            // The passive side may not be listening yet.
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return err(format!("cannot reach the peer at {to} for the QP exchange: {e}")),
        }
    };
    swap(s, mine)
}

/// One JSON line each way.
fn swap(s: TcpStream, mine: &Exchange) -> R<Exchange> {
    let _ = s.set_read_timeout(Some(EXCHANGE_WITHIN));
    let mut w = s.try_clone().map_err(|e| AgentError::from(e.to_string()))?;
    let mut line = serde_json::to_string(mine).map_err(|e| AgentError::from(e.to_string()))?;
    line.push('\n');
    w.write_all(line.as_bytes()).map_err(|e| AgentError::from(format!("sending our QP info: {e}")))?;
    let mut r = BufReader::new(s.take(4096));
    let mut got = String::new();
    r.read_line(&mut got).map_err(|e| AgentError::from(format!("reading the peer's QP info: {e}")))?;
    serde_json::from_str(got.trim()).map_err(|e| AgentError::from(format!("the peer's QP info is malformed: {e}")))
}

/// Serves the protocol on a byte stream until Teardown or the end of the stream.
pub fn serve(r: &mut dyn Read, w: &mut dyn Write) -> std::io::Result<()> {
    let mut agent = Agent::default();
    loop {
        let m: ToAgent = match proto::read_msg(r) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(()),
            Err(ReadError::Invalid(e)) => {
                proto::write_msg(w, &FromAgent::Error { message: format!("malformed message: {e}"), verb: None, errno: None, hint: None })?;
                continue;
            }
            Err(e @ ReadError::TooLarge(_)) => {
                let _ = proto::write_msg(w, &FromAgent::Error { message: e.to_string(), verb: None, errno: None, hint: None });
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()));
            }
            Err(ReadError::Io(e)) => return Err(e),
        };
        let last = matches!(m, ToAgent::Teardown);
        if let ToAgent::Hello { version } = &m {
            if *version != proto::VERSION {
                proto::write_msg(w, &FromAgent::Error { message: format!("protocol version {version} asked, this agent speaks {}", proto::VERSION), verb: None, errno: None, hint: Some("run the same roce version on both sides".into()) })?;
                continue;
            }
        }
        let answer = agent.handle(m);
        proto::write_msg(w, &answer)?;
        if last {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn talk(msgs: &[ToAgent]) -> Vec<FromAgent> {
        let mut input = Vec::new();
        for m in msgs {
            proto::write_msg(&mut input, m).unwrap();
        }
        let mut out = Vec::new();
        serve(&mut &input[..], &mut out).unwrap();
        let mut r = &out[..];
        let mut v = Vec::new();
        while let Some(m) = proto::read_msg::<_, FromAgent>(&mut r).unwrap() {
            v.push(m);
        }
        v
    }

    #[test]
    fn answers_in_order_and_refuses_what_it_cannot_do() {
        let a = talk(&[
            ToAgent::Hello { version: proto::VERSION },
            ToAgent::Hello { version: 99 },
            ToAgent::Step { index: 0, step: toml::from_str("op = \"sync\"").unwrap() },
            ToAgent::ReadMemory { mr: "x".into() },
            ToAgent::Teardown,
        ]);
        assert_eq!(a.len(), 5);
        assert!(matches!(&a[0], FromAgent::Hello { version, .. } if *version == proto::VERSION));
        assert!(matches!(&a[1], FromAgent::Error { message, .. } if message.contains("version 99")));
        assert!(matches!(&a[2], FromAgent::Error { message, .. } if message.contains("Setup comes first")));
        assert!(matches!(&a[3], FromAgent::Error { .. }));
        assert_eq!(a[4], FromAgent::TornDown);
    }

    #[test]
    fn garbage_is_answered_not_fatal_and_oversize_ends_the_stream() {
        let mut input = Vec::new();
        input.extend_from_slice(&3u32.to_be_bytes());
        input.extend_from_slice(b"{x}");
        proto::write_msg(&mut input, &ToAgent::Teardown).unwrap();
        let mut out = Vec::new();
        serve(&mut &input[..], &mut out).unwrap();
        let mut r = &out[..];
        assert!(matches!(proto::read_msg::<_, FromAgent>(&mut r).unwrap(), Some(FromAgent::Error { .. })));
        assert_eq!(proto::read_msg::<_, FromAgent>(&mut r).unwrap(), Some(FromAgent::TornDown));
        let huge = (u32::MAX).to_be_bytes();
        let mut out = Vec::new();
        assert!(serve(&mut &huge[..], &mut out).is_err());
        assert!(!out.is_empty(), "the refusal is said before the stream ends");
    }

    #[test]
    fn access_names_and_gid_text() {
        assert_eq!(access_bits(&["IBV_ACCESS_REMOTE_WRITE".into(), "local_write".into()]).unwrap(), 3);
        assert!(access_bits(&["remote_wrte".into()]).is_err());
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(gid_ip(&g).to_string(), "10.0.0.1");
        assert_eq!(unhex16(&hex(&g)).unwrap(), g);
        assert!(unhex16("zz").is_err());
    }
}
