//! The agent's executor: one endpoint's verbs objects, driven by [`ToAgent`]
//! messages. Transport-free: [`serve`] speaks the protocol over any byte stream.
//!
//! Owns: the agent's state per scenario (device, QPs, MRs, memory windows, SRQs, the
//! capture of its wire), the handling of every request, and [`serve`]. Imports: the
//! agent protocol and its stream vocabulary (`crate::protocol`), the verbs wrappers
//! (`crate::verbs`), the raw link for probes (`crate::net::raw`), its siblings
//! `capture`, `cm_private`, `limits` and `probe`, dissector's PSN, hex text and clock;
//! `rdma_sys`'s opcode and flag values.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dissector::wire::Psn;
use rdma_sys::{ibv_send_flags, ibv_wr_opcode};
use serde::{Deserialize, Serialize};

use super::capture::{Capture, Captured};
use super::cm_private;
use super::limits::{Limits, ProbeRate, Refused};
use super::probe::{self, Aim};
use crate::net::raw::Link;
use crate::protocol::stream::StreamContent;
use crate::protocol::{
    self, Action, Connect, ConnectBy, CounterDeltas, Event, FromAgent, Hex, MrInfo, MwInfo,
    ProbeOrder, ProbeSent, QpInfo, ReadError, Refusal, RemoteRef, SgeRef, ToAgent, Verb, Wc,
    COMPLETION_GRACE_MS,
};
use crate::verbs::{
    Ah, Binding, CmConn, Completion, Context, Cq, FlushWr, Given, Mr, Mw, Pd, Qp, Remote, Reset,
    Rts, SendWr, Sge, Srq, Steered, VerbError,
};
use crate::vocab::memory::GUARD;
use crate::vocab::{
    Access, MwKind, Peer, Placement, QpAttrs, QpKind, QpStateName, Selectivity, SendFlag,
};

mod setup;
mod stream;

/// An error for the controller: message, and the verb's error when a verb failed.
#[derive(Debug)]
pub(crate) struct AgentError {
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

/// A limit's refusal: its text is what the controller receives.
impl From<Refused> for AgentError {
    fn from(r: Refused) -> Self {
        r.to_string().into()
    }
}

impl AgentError {
    fn into_msg(self) -> FromAgent {
        FromAgent::Error {
            message: self.message,
            verb: self.verb.as_ref().map(|v| v.verb().to_string()),
            errno: self.verb.as_ref().map(VerbError::errno),
            hint: self.verb.as_ref().and_then(|v| v.hint().map(str::to_string)),
            unsupported: self.verb.as_ref().is_some_and(VerbError::is_unsupported),
        }
    }
}

type AgentResult<T> = std::result::Result<T, AgentError>;

fn err<T>(m: impl Into<String>) -> AgentResult<T> {
    Err(AgentError { message: m.into(), verb: None })
}

/// `$e` with `$q` the QP of `$state` as it takes send WRs (connected, or steered
/// by `modify_qp` steps); an error out of the enclosing function otherwise.
macro_rules! on_send_queue {
    ($state:expr, $q:ident => $e:expr) => {
        match &$state.qp {
            Handle::Connected($q) => $e,
            Handle::Steered($q) => $e,
            _ => {
                return err(format!(
                    "QP `{}` is not connected: Connect comes first",
                    $state.setup.name
                ))
            }
        }
    };
}

/// A QP as far as it is brought up: created, or connected (RTS), or steered
/// through its states by the scenario's `modify_qp` steps.
enum Handle {
    Created(Qp<Reset>),
    Connected(Qp<Rts>),
    Steered(Qp<Steered>),
    /// A connection attempt consumed it and failed.
    Lost,
}

/// One QP of this endpoint.
struct QpState {
    setup: protocol::QpSetup,
    qpn: u32,
    /// What its asynchronous events name it by.
    id: usize,
    /// rdma_cm's connection, released (DREQ) before the QP is destroyed.
    cm: Option<CmConn>,
    qp: Handle,
    psn: u32,
    peer: Option<Peer>,
    peer_qkey: u32,
    peer_mrs: Vec<MrInfo>,
    ah: Option<Ah>,
    /// Probes: the PSN the peer expects next, as far as this side's crafted
    /// packets moved it (starts at the QP's send PSN).
    probe_next: Option<Psn>,
    /// The passive side, between `Listen` and `Connect`: the port and what
    /// listens on it.
    listening: Option<(u16, Listening)>,
}

/// What the passive side of a connection listens with.
enum Listening {
    Tcp(TcpListener),
    Cm(CmConn),
}

impl QpState {
    /// Address and rkey of `r`, an MR of this QP's peer (at an offset; `rkey`
    /// overrides the exchanged one).
    fn remote(&self, r: &RemoteRef) -> AgentResult<(u64, u32)> {
        let m = self.peer_mrs.iter().find(|m| m.name == r.mr).ok_or_else(|| {
            AgentError::from(format!("the peer of `{}` has no MR `{}`", self.setup.name, r.mr))
        })?;
        Ok((m.addr.wrapping_add_signed(r.offset), r.rkey_or(m.rkey)?))
    }

    fn connected(&self) -> AgentResult<&Qp<Rts>> {
        match &self.qp {
            Handle::Connected(q) => Ok(q),
            Handle::Steered(_) => err(format!(
                "QP `{}` was moved by a modify_qp step: a stream needs it as connected",
                self.setup.name
            )),
            _ => err(format!("QP `{}` is not connected: Connect comes first", self.setup.name)),
        }
    }

    /// The attributes its transitions take, as `Connect` gave them.
    fn attrs(&self, port: u8, sgid_index: u8) -> QpAttrs {
        QpAttrs {
            port,
            sgid_index,
            sq_psn: self.psn,
            access: self.setup.access,
            params: self.setup.params,
        }
    }
}

/// A memory window and the rkey it has now (a type 2 window's new rkey is the
/// binder's to remember).
struct MwState {
    mw: Mw,
    rkey: u32,
}

/// Everything `Setup` created. Field order is drop order: the windows first (a
/// bound type 2 window holds its QP and its MR: rxe's QP destroy waits ~20 s for
/// a window still bound to it, and an MR with a window bound cannot be
/// deregistered), then QPs and AHs, MRs, SRQs (after the QPs on them), the CQ,
/// the PD, the context.
struct Local {
    mws: BTreeMap<String, MwState>,
    qps: BTreeMap<String, QpState>,
    mrs: BTreeMap<String, Mr>,
    srqs: BTreeMap<String, Arc<Srq>>,
    /// This endpoint's MRs in scenario order, as the peer learns them.
    mr_table: Vec<MrInfo>,
    cq: Arc<Cq>,
    pd: Arc<Pd>,
    ctx: Arc<Context>,
    port: u8,
    gid_index: u8,
    gid: [u8; 16],
    started: Instant,
    wcs: Vec<Wc>,
    /// How many completions the `wait_completions` steps so far waited for: the
    /// next waits for `count` beyond these, whether they came before it started
    /// (a loaded host) or after.
    waited: usize,
    /// Asynchronous events, in order.
    events: Vec<Event>,
    /// The interface crafted packets go out on, opened at the first probe.
    probe_link: Option<Link>,
    /// The device port's counters when the controller asked for a baseline
    /// (`Baseline`), or else when its setup was done.
    counters_before: BTreeMap<String, u64>,
    /// When `counters_before` was read.
    counters_read: Instant,
}

/// What the two ends of a TCP exchange tell each other.
#[derive(Debug, Serialize, Deserialize)]
struct Exchange {
    qpn: u32,
    psn: u32,
    gid: String,
    qkey: u32,
}

fn gid_ip(g: &[u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(*g);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

fn unhex16(s: &str) -> AgentResult<[u8; 16]> {
    let v = dissector::text::hex_bytes(s)
        .map_err(|e| AgentError::from(format!("peer sent a malformed GID `{s}`: {e}")))?;
    v.try_into().map_err(|_| AgentError::from(format!("peer sent a GID of the wrong length `{s}`")))
}

/// A fresh starting PSN (24 bits) when the scenario does not set one.
fn random_psn() -> u32 {
    let t = dissector::capture::unix_now().subsec_nanos();
    (t ^ std::process::id().rotate_left(12)) & Psn::MASK
}

/// The device an agent's scenarios use. A listening agent opens it for each
/// controller and closes it after; a lab agent, which serves one controller
/// scenario after scenario, keeps the context and a PD open between them (opening
/// costs about 6 ms under TCG). Everything else a scenario made is freed at its
/// Teardown either way, and the asynchronous events left from the last scenario
/// are thrown away before the next one creates anything.
#[derive(Default)]
pub(crate) struct Device {
    keep: bool,
    open: Option<Opened>,
}

struct Opened {
    /// The name the scenario asked for (`None`: the first device).
    asked: Option<String>,
    ctx: Arc<Context>,
    pd: Arc<Pd>,
}

impl Device {
    /// A device kept open from one scenario to the next.
    pub(crate) fn kept() -> Device {
        Device { keep: true, open: None }
    }

    /// The context and a PD for `asked`: the kept ones, or opened now (`true`).
    fn get(&mut self, asked: Option<&str>) -> AgentResult<(Arc<Context>, Arc<Pd>, bool)> {
        if let Some(o) = self.open.as_ref().filter(|o| o.asked.as_deref() == asked) {
            return Ok((o.ctx.clone(), o.pd.clone(), false));
        }
        self.open = None;
        let ctx = Context::open(asked)?;
        let pd = Pd::new(&ctx)?;
        if self.keep {
            self.open =
                Some(Opened { asked: asked.map(str::to_string), ctx: ctx.clone(), pd: pd.clone() });
        }
        Ok((ctx, pd, true))
    }

    /// Only the context: the kept one, or one opened and closed again.
    fn context(&mut self, asked: Option<&str>) -> AgentResult<Arc<Context>> {
        match self.open.as_ref().filter(|o| o.asked.as_deref() == asked) {
            Some(o) => Ok(o.ctx.clone()),
            None => Ok(Context::open(asked)?),
        }
    }

    /// Closes what is kept (it failed: the device may have gone and come back).
    fn forget(&mut self) {
        self.open = None;
    }
}

/// The executor of one agent.
#[derive(Default)]
pub(crate) struct Agent {
    ep: Option<Local>,
    device: Device,
    limits: Limits,
    probes: ProbeRate,
    /// The wire being captured, from `CaptureStart` to `CaptureStop`.
    capture: Option<Capture>,
    /// The capture `CaptureStop` stopped, read by `CaptureRead` until the
    /// scenario's Teardown (or the next `CaptureStart`).
    captured: Option<Captured>,
}

impl Agent {
    pub(crate) fn handle(&mut self, m: ToAgent) -> FromAgent {
        let r = match m {
            ToAgent::Heartbeat => {
                Err(AgentError::from("a heartbeat gets no answer; serve() skips it".to_string()))
            }
            ToAgent::Hello { .. } => Ok(FromAgent::Hello {
                version: protocol::VERSION,
                agent: format!("roce {}", env!("CARGO_PKG_VERSION")),
                host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .ok()
                    .map(|k| k.trim().to_string()),
            }),
            ToAgent::Capabilities { device } => self.capabilities(device.as_deref()),
            ToAgent::Setup(s) => self.setup(s),
            ToAgent::Baseline => self.ep().map(|ep| {
                let earlier = Some((std::mem::take(&mut ep.counters_before), ep.counters_read));
                ep.counters_before = super::counters::read_settled(&ep.ctx.name, ep.port, earlier);
                FromAgent::Baseline { counters: ep.counters_before.len() }
            }),
            ToAgent::Listen { qp, port } => self.listen(qp, port),
            ToAgent::Connect(c) => self.connect(c),
            ToAgent::Do { index, action, judged } => self.act(index, action, judged),
            ToAgent::Completions { min, wait_ms, grace_ms } => {
                let grace_ms = grace_ms.unwrap_or(COMPLETION_GRACE_MS);
                match self.limits.may_wait(wait_ms.saturating_add(grace_ms)) {
                    Ok(()) => self.completions(
                        min,
                        Duration::from_millis(wait_ms),
                        Duration::from_millis(grace_ms),
                    ),
                    Err(e) => Err(e.into()),
                }
            }
            ToAgent::ReadMemory { mr } => self.read_memory(&mr),
            ToAgent::Verify { mr, offset, content } => self.verify(&mr, offset, &content),
            ToAgent::Guards => self.ep().map(|ep| FromAgent::Guards {
                mrs: ep.mrs.iter().map(|(name, m)| (name.clone(), m.guards())).collect(),
            }),
            ToAgent::CaptureStart => self.capture_start(),
            ToAgent::CaptureStop => self.capture_stop(),
            ToAgent::CaptureRead { offset } => self.capture_read(offset),
            ToAgent::Teardown => Ok(FromAgent::TornDown { counters: self.tear_down() }),
        };
        r.unwrap_or_else(AgentError::into_msg)
    }

    /// Frees everything the scenario set up (its QPs first: the device sends
    /// nothing more for it), then reads what its port's counters moved by.
    fn tear_down(&mut self) -> Option<CounterDeltas> {
        self.capture = None;
        self.captured = None;
        let ep = self.ep.take()?;
        let (device, port, before) = (ep.ctx.name.clone(), ep.port, ep.counters_before.clone());
        drop(ep);
        if before.is_empty() {
            return None;
        }
        let after = super::counters::read(&device, port);
        let driver = super::counters::driver(&device);
        Some(super::counters::deltas((&device, driver, port), &before, &after))
    }

    /// Starts capturing this endpoint's wire on this host (the agent's own
    /// `--capture-command`, or libpcap), in place of any capture before.
    fn capture_start(&mut self) -> AgentResult<FromAgent> {
        let ep = self.ep()?;
        let (device, port, gid_index) = (ep.ctx.name.clone(), ep.port, ep.gid_index);
        // The last one goes first (its command ended, its file removed).
        self.capture = None;
        self.captured = None;
        let c = Capture::start(&device, port, gid_index, self.limits.capture_command.as_deref())?;
        let how = c.how().to_string();
        self.capture = Some(c);
        Ok(FromAgent::Capturing { how })
    }

    fn capture_stop(&mut self) -> AgentResult<FromAgent> {
        let c = self.capture.take().ok_or_else(|| {
            AgentError::from("no capture runs: CaptureStart comes first".to_string())
        })?;
        let got = c.stop()?;
        let answer = FromAgent::Captured {
            bytes: got.bytes,
            frames: got.frames,
            dropped: got.dropped,
            cut_short: got.cut_short,
        };
        self.captured = Some(got);
        Ok(answer)
    }

    fn capture_read(&mut self, offset: u64) -> AgentResult<FromAgent> {
        let c = self.captured.as_ref().ok_or_else(|| {
            AgentError::from("no stopped capture to read: CaptureStop comes first".to_string())
        })?;
        Ok(FromAgent::CaptureChunk { offset, bytes: Hex(c.read(offset)?) })
    }

    fn ep(&mut self) -> AgentResult<&mut Local> {
        self.ep
            .as_mut()
            .ok_or_else(|| AgentError::from("not set up yet: Setup comes first".to_string()))
    }

    /// What the device can do, for a scenario's `requires` (a device not kept
    /// open is opened, asked, and closed again).
    fn capabilities(&mut self, device: Option<&str>) -> AgentResult<FromAgent> {
        let ctx = self.device.context(device)?;
        let caps = ctx.caps()?;
        Ok(FromAgent::Capabilities { device: ctx.name.clone(), features: caps.features() })
    }

    fn listen(&mut self, qp: String, port: u16) -> AgentResult<FromAgent> {
        let ep = self.ep()?;
        let my_ip = gid_ip(&ep.gid);
        let q = ep
            .qps
            .get_mut(&qp)
            .ok_or_else(|| AgentError::from(format!("no QP `{qp}` on this endpoint")))?;
        if !matches!(q.qp, Handle::Created(_)) || q.listening.is_some() {
            return err(format!("QP `{qp}` is listening or connected already"));
        }
        let l = match q.setup.connect {
            ConnectBy::RdmaCm => Listening::Cm(CmConn::listen(cm_ipv4(&q.setup, my_ip)?, port)?),
            ConnectBy::Tcp => Listening::Tcp(exchange_listen(my_ip, port)?),
            ConnectBy::Controller => {
                return err(format!("QP `{qp}` is connected by the controller: nothing listens"))
            }
        };
        q.listening = Some((port, l));
        Ok(FromAgent::Listening { qp })
    }

    fn connect(&mut self, c: Connect) -> AgentResult<FromAgent> {
        let limits = self.limits.clone();
        let ep = self.ep()?;
        let private = cm_private::encode(
            &ep.mr_table,
            if c.passive { cm_private::REP_ROOM } else { cm_private::REQ_ROOM },
        );
        let (my_ip, gid, gid_index, ep_port, pd) =
            (gid_ip(&ep.gid), ep.gid, ep.gid_index, ep.port, ep.pd.clone());
        let q = ep
            .qps
            .get_mut(&c.qp)
            .ok_or_else(|| AgentError::from(format!("no QP `{}` on this endpoint", c.qp)))?;
        let mut peer_mrs = c.peer_mrs;
        let p = q.setup.params;
        let mine = Exchange {
            qpn: q.qpn,
            psn: q.psn,
            gid: dissector::text::hex_string(&gid),
            qkey: p.qkey,
        };
        let peer_ip: IpAddr = c.peer_ip.parse().map_err(|_| {
            AgentError::from(format!("peer address `{}` is not an IP address", c.peer_ip))
        })?;
        limits.may_connect(my_ip, peer_ip)?;
        let attrs = QpAttrs {
            port: ep_port,
            sgid_index: gid_index,
            sq_psn: q.psn,
            access: q.setup.access,
            params: q.setup.params,
        };
        // What `Listen` opened, or (a controller that did not send it) opened now.
        let listening = match q.listening.take() {
            Some((port, _)) if !c.passive || port != c.port => {
                return err(format!("QP `{}` listens on port {port}: its Connect must be the passive side's, on that port", c.qp));
            }
            Some((_, l)) => Some(l),
            None if !c.passive || q.setup.connect == ConnectBy::Controller => None,
            None if q.setup.connect == ConnectBy::RdmaCm => {
                Some(Listening::Cm(CmConn::listen(cm_ipv4(&q.setup, my_ip)?, c.port)?))
            }
            None => Some(Listening::Tcp(exchange_listen(my_ip, c.port)?)),
        };
        let Handle::Created(created) = std::mem::replace(&mut q.qp, Handle::Lost) else {
            return err(format!("QP `{}` was connected already", c.qp));
        };
        let mut from_cm = None;
        let (peer, peer_qkey) = if q.setup.connect == ConnectBy::Controller {
            // What the peer's Setup answered, as the controller passed it on; its
            // GID is where this QP's packets go, so it is held to the limits too.
            let given = c.peer.as_ref().ok_or_else(|| {
                AgentError::from(format!(
                    "QP `{}` is connected by the controller, whose Connect names no peer",
                    c.qp
                ))
            })?;
            let gid: Ipv6Addr = given.gid.parse().map_err(|_| {
                AgentError::from(format!("peer GID `{}` is not an IPv6 address", given.gid))
            })?;
            limits.may_connect(my_ip, gid_ip(&gid.octets()))?;
            let peer = Peer { qpn: given.qpn, psn: given.psn, gid: gid.octets() };
            let peer_for_rtr = (q.setup.kind != QpKind::Ud).then_some(peer);
            q.qp = Handle::Connected(created.connect(&attrs, peer_for_rtr)?);
            (peer, given.qkey.unwrap_or(0))
        } else if q.setup.connect == ConnectBy::RdmaCm {
            cm_ipv4(&q.setup, my_ip)?;
            let IpAddr::V4(peer4) = peer_ip else {
                return err("rdma_cm here connects over IPv4 addresses");
            };
            let (cm, rts) = if let Some(Listening::Cm(l)) = listening {
                l.accept(created, &attrs, &private, EXCHANGE_WITHIN)?
            } else {
                CmConn::connect(peer4, c.port, created, &attrs, &private, EXCHANGE_WITHIN)?
            };
            // The peer's MR addresses and rkeys, as it sent them in the REQ/REP.
            if let Some(entries) = cm_private::decode(&cm.peer_private)? {
                from_cm = Some(cm_private::apply(&mut peer_mrs, &entries)?);
            }
            // The CM chose the starting PSNs; report those.
            q.psn = cm.sq_psn;
            let peer =
                Peer { qpn: cm.dest_qpn, psn: cm.rq_psn, gid: peer4.to_ipv6_mapped().octets() };
            q.cm = Some(cm);
            q.qp = Handle::Connected(rts);
            (peer, 0)
        } else {
            let theirs = match listening {
                Some(Listening::Tcp(l)) => exchange_passive(&l, &mine)?,
                _ => exchange_active(SocketAddr::new(peer_ip, c.port), &mine)?,
            };
            let peer = Peer { qpn: theirs.qpn, psn: theirs.psn, gid: unhex16(&theirs.gid)? };
            let peer_for_rtr = (q.setup.kind != QpKind::Ud).then_some(peer);
            q.qp = Handle::Connected(created.connect(&attrs, peer_for_rtr)?);
            (peer, theirs.qkey)
        };
        q.peer = Some(peer);
        q.peer_qkey = peer_qkey;
        q.peer_mrs = peer_mrs;
        if q.setup.kind == QpKind::Ud {
            q.ah = Some(Ah::new(&pd, ep_port, gid_index, peer.gid)?);
        }
        let ud = q.setup.kind == QpKind::Ud;
        let local = QpInfo {
            name: c.qp.clone(),
            qpn: q.qpn,
            psn: q.psn,
            gid: Ipv6Addr::from(gid).to_string(),
            qkey: ud.then_some(p.qkey),
        };
        let remote = QpInfo {
            name: c.qp.clone(),
            qpn: peer.qpn,
            psn: peer.psn,
            gid: Ipv6Addr::from(peer.gid).to_string(),
            qkey: Some(peer_qkey),
        };
        Ok(FromAgent::Connected { qp: c.qp, local, remote, peer_mrs_from_cm: from_cm })
    }

    /// One step; for a `judged` one, a verb's refusal is its outcome (`Done`
    /// says it), not an error.
    fn act(&mut self, index: usize, a: Action, judged: bool) -> AgentResult<FromAgent> {
        match self.act_once(index, a) {
            Err(AgentError { verb: Some(v), message })
                if judged && !v.is_unsupported() && v.errno() != 0 =>
            {
                let ep = self.ep()?;
                ep.drain()?;
                Ok(FromAgent::Done {
                    index,
                    probe: None,
                    mw: None,
                    stream: None,
                    refused: Some(Refusal {
                        verb: v.verb().to_string(),
                        errno: v.errno(),
                        message,
                    }),
                    qp_state: None,
                    notified: None,
                })
            }
            r => r,
        }
    }

    fn act_once(&mut self, index: usize, a: Action) -> AgentResult<FromAgent> {
        if let Action::Probe(order) = &a {
            self.probes.take(
                order.copies.max(1) as usize,
                self.limits.probe_rate,
                Instant::now(),
            )?;
        }
        match &a {
            Action::Stream(o) => self.limits.may_stream(o.content.count)?,
            Action::Receive(o) => self.limits.may_stream(o.content.count)?,
            Action::Sleep { ms } => self.limits.may_wait(*ms)?,
            Action::WaitCompletions { within_ms, .. } | Action::AwaitNotify { within_ms } => {
                self.limits.may_wait(*within_ms)?
            }
            _ => {}
        }
        let ep = self.ep()?;
        let mut probe = None;
        let mut mw = None;
        let mut stream = None;
        let mut qp_state = None;
        let mut notified = None;
        match a {
            Action::Sleep { ms } => std::thread::sleep(Duration::from_millis(ms)),
            Action::WaitCompletions { count, within_ms } => {
                let want = ep.waited + count as usize;
                ep.poll_until(want, Duration::from_millis(within_ms))?;
                ep.waited = want;
            }
            Action::Probe(order) => probe = Some(ep.probe(&order)?),
            Action::PostRecv { qp, wr_id, sges } => {
                let sges = ep.sges(&sges)?;
                let q = ep.qp(&qp)?;
                // SAFETY: `Local::sges` made each SGE inside an `Mr` of `ep.mrs`, under
                // its lkey (stale after a `DeregMr` step, on purpose). Every MR in this
                // PD is an `Mr`: its buffer is never borrowed (raw copies only) and is
                // freed only by its `Drop`, after `ibv_dereg_mr` (not refused: `Local`
                // drops its windows first). `Local` drops its QPs before its MRs.
                unsafe {
                    match &q.qp {
                        Handle::Connected(x) => x.post_recv(wr_id, &sges)?,
                        Handle::Steered(x) => x.post_recv(wr_id, &sges)?,
                        _ => {
                            return err(format!("QP `{qp}` is not connected: Connect comes first"))
                        }
                    }
                }
            }
            Action::PostSrqRecv { srq, wr_id, sges } => {
                let sges = ep.sges(&sges)?;
                // SAFETY: as for `PostRecv`: SGEs inside `Mr`s of `ep.mrs`, whose buffers
                // are never borrowed and freed only after deregistration. `Local` drops
                // its SRQs after its MRs, but its QPs (the only consumers of the SRQ's
                // WRs) before them, and a deregistered MR is out of the device's reach.
                unsafe { ep.srq(&srq)?.post_recv(wr_id, &sges)? };
            }
            Action::ArmSrq { srq, limit } => ep.srq(&srq)?.arm_limit(limit)?,
            Action::Post { qp, wr_id, verb, sges, flags } => {
                mw = ep.post(&qp, wr_id, &verb, &sges, &flags)?
            }
            Action::Stream(order) => stream = Some(Box::new(ep.stream(&order)?)),
            Action::Receive(order) => stream = Some(Box::new(ep.receive(&order)?)),
            Action::ModifyQp { qp, state, state_only, access } => {
                let given = if state_only { Given::StateOnly } else { Given::Required };
                ep.modify_qp(&qp, state, given, access)?
            }
            Action::QueryQp { qp } => qp_state = Some(ep.query_qp(&qp)?),
            Action::DeregMr { mr } => ep.mr_mut(&mr)?.deregister()?,
            Action::ReregMr { mr, access } => ep.mr_mut(&mr)?.reregister(access)?,
            Action::ArmCq { solicited_only } => ep.cq.arm(solicited_only)?,
            Action::ResizeCq { cqe } => {
                super::limits::cq_depth_ok(cqe)?;
                ep.cq.resize(cqe)?
            }
            Action::AwaitNotify { within_ms } => {
                notified = Some(ep.cq.await_notification(Duration::from_millis(within_ms))?)
            }
            Action::DeallocMw { mw } => {
                // Its rkey dies with it (ibv_dealloc_mw; the Drop).
                if ep.mws.remove(&mw).is_none() {
                    return err(format!("no memory window `{mw}` on this endpoint"));
                }
            }
        }
        ep.drain()?;
        Ok(FromAgent::Done { index, probe, mw, stream, refused: None, qp_state, notified })
    }

    fn completions(
        &mut self,
        min: usize,
        wait: Duration,
        grace: Duration,
    ) -> AgentResult<FromAgent> {
        let ep = self.ep()?;
        ep.poll_until(min, wait)?;
        // A moment more for anything unexpected (an error after the expected ones).
        std::thread::sleep(grace);
        ep.drain()?;
        Ok(FromAgent::Completions { wcs: ep.wcs.clone(), events: ep.events.clone() })
    }

    fn verify(&mut self, mr: &str, offset: u64, content: &StreamContent) -> AgentResult<FromAgent> {
        let ep = self.ep()?;
        let m = ep
            .mrs
            .get(mr)
            .ok_or_else(|| AgentError::from(format!("no MR `{mr}` on this endpoint")))?;
        let bytes = m.read();
        let region = bytes.get(offset as usize..).unwrap_or(&[]);
        Ok(FromAgent::Verified { mr: mr.to_string(), result: content.verify(region) })
    }

    fn read_memory(&mut self, mr: &str) -> AgentResult<FromAgent> {
        let ep = self.ep()?;
        let m = ep
            .mrs
            .get(mr)
            .ok_or_else(|| AgentError::from(format!("no MR `{mr}` on this endpoint")))?;
        Ok(FromAgent::Memory { mr: mr.to_string(), bytes: Hex(m.read()) })
    }
}

impl Local {
    /// Moves QP `name` to `to`; from then on it is steered (every verb on it is
    /// the device's to take or refuse).
    fn modify_qp(
        &mut self,
        name: &str,
        to: QpStateName,
        given: Given,
        access: Option<Access>,
    ) -> AgentResult<()> {
        let (port, sgid_index) = (self.port, self.gid_index);
        let q = self
            .qps
            .get_mut(name)
            .ok_or_else(|| AgentError::from(format!("no QP `{name}` on this endpoint")))?;
        q.qp = match std::mem::replace(&mut q.qp, Handle::Lost) {
            Handle::Created(x) => Handle::Steered(x.steer()),
            Handle::Connected(x) => Handle::Steered(x.steer()),
            other => other,
        };
        let attrs = q.attrs(port, sgid_index);
        // UD has no peer in RTR; RC and UC take the one Connect gave.
        let peer = q.peer.filter(|_| q.setup.kind != QpKind::Ud);
        match &q.qp {
            Handle::Steered(x) => Ok(x.move_to(to, &attrs, peer, given, access)?),
            _ => err(format!("QP `{name}` was lost to a failed connection")),
        }
    }

    /// The state the device reports for QP `name`.
    fn query_qp(&self, name: &str) -> AgentResult<QpStateName> {
        Ok(match &self.qp(name)?.qp {
            Handle::Created(x) => x.state()?,
            Handle::Connected(x) => x.state()?,
            Handle::Steered(x) => x.state()?,
            Handle::Lost => return err(format!("QP `{name}` was lost to a failed connection")),
        })
    }

    fn mr_mut(&mut self, name: &str) -> AgentResult<&mut Mr> {
        self.mrs
            .get_mut(name)
            .ok_or_else(|| AgentError::from(format!("no MR `{name}` on this endpoint")))
    }

    fn qp(&self, name: &str) -> AgentResult<&QpState> {
        self.qps
            .get(name)
            .ok_or_else(|| AgentError::from(format!("no QP `{name}` on this endpoint")))
    }

    fn srq(&self, name: &str) -> AgentResult<&Arc<Srq>> {
        self.srqs
            .get(name)
            .ok_or_else(|| AgentError::from(format!("no SRQ `{name}` on this endpoint")))
    }

    fn mw(&self, name: &str) -> AgentResult<&MwState> {
        self.mws
            .get(name)
            .ok_or_else(|| AgentError::from(format!("no memory window `{name}` on this endpoint")))
    }

    /// Asynchronous events, named by the SRQ or QP they are about.
    fn drain_events(&mut self) {
        let t_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        for e in self.ctx.async_events() {
            let srq = self.srqs.iter().find(|(_, s)| s.id() == e.element).map(|(n, _)| n.clone());
            let qp = self.qps.iter().find(|(_, q)| q.id == e.element).map(|(n, _)| n.clone());
            self.events.push(Event { kind: e.kind, srq, qp, t_ms });
        }
    }

    fn drain(&mut self) -> AgentResult<()> {
        self.drain_events();
        loop {
            let got = self.cq.poll(32)?;
            if got.is_empty() {
                return Ok(());
            }
            let t_ms = self.started.elapsed().as_secs_f64() * 1000.0;
            for c in got {
                let w = self.wc(c, t_ms);
                self.wcs.push(w);
            }
        }
    }

    /// A completion as the controller learns it: named by its QP (and window).
    fn wc(&self, c: Completion, t_ms: f64) -> Wc {
        let q = self.qps.iter().find(|(_, q)| q.qpn == c.qp_num);
        let ud = q.is_some_and(|(_, q)| q.setup.kind == QpKind::Ud);
        Wc {
            wr_id: c.wr_id,
            status: c.status,
            opcode: c.opcode,
            byte_len: c.byte_len,
            imm_data: c.imm_data,
            invalidated_rkey: c.invalidated_rkey,
            flags: c.flags,
            invalidated_mw: c
                .invalidated_rkey
                .and_then(|k| self.mws.iter().find(|(_, w)| w.rkey == k).map(|(n, _)| n.clone())),
            qp: q.map(|(n, _)| n.clone()).unwrap_or_default(),
            qp_num: c.qp_num,
            src_qp: ud.then_some(c.src_qp),
            pkey_index: Some(c.pkey_index),
            vendor_err: c.vendor_err,
            t_ms,
        }
    }

    fn poll_until(&mut self, want: usize, wait: Duration) -> AgentResult<()> {
        let until = Instant::now() + wait;
        loop {
            self.drain()?;
            if self.wcs.len() >= want || Instant::now() >= until {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The SGEs inside this endpoint's MRs.
    fn sges(&self, sges: &[SgeRef]) -> AgentResult<Vec<Sge>> {
        sges.iter()
            .map(|g| {
                let m = self.mrs.get(&g.mr).ok_or_else(|| {
                    AgentError::from(format!("no MR `{}` on this endpoint", g.mr))
                })?;
                // Outside the MR only where asked, and never past the guard
                // region after it: what a device that fails to refuse the SGE
                // touches is the agent's own padding, never other memory.
                let guard = if g.outside_mr { GUARD as u64 } else { 0 };
                if g.offset.saturating_add(u64::from(g.len)) > m.len() as u64 + guard {
                    return err(format!(
                        "SGE {}+{} past the end of MR `{}`",
                        g.offset, g.len, g.mr
                    ));
                }
                Ok(Sge { addr: m.addr() + g.offset, len: g.len, lkey: m.lkey() })
            })
            .collect()
    }

    /// A crafted packet in the name of QP `order.qp`, to the QP at its other end.
    fn probe(&mut self, order: &ProbeOrder) -> AgentResult<ProbeSent> {
        let my_ip = gid_ip(&self.gid);
        let q = self.qp(&order.qp)?;
        let peer = q.peer.ok_or_else(|| {
            AgentError::from(format!("QP `{}` is not connected: probes go to its peer", order.qp))
        })?;
        let peer_ip = gid_ip(&peer.gid);
        let remote = order.remote.as_ref().map(|r| q.remote(r)).transpose()?;
        let next = q.probe_next.unwrap_or(Psn::new(q.psn));
        let aim = Aim { dest_qp: peer.qpn, src_qp: q.qpn, next, remote };
        if self.probe_link.as_ref().is_none_or(|l| l.dst.ip != peer_ip) {
            self.probe_link =
                Some(Link::open(Some(my_ip), peer_ip, None, None).map_err(String::from)?);
        }
        let link = self
            .probe_link
            .as_mut()
            .ok_or_else(|| AgentError::from("no link to send probes on".to_string()))?;
        let frames = probe::frames(order, &aim, &link.src, &link.dst)?;
        for (f, _) in &frames {
            link.send(f)?;
        }
        let most = Duration::from_millis(order.settle_ms);
        match order.quiet_ms {
            Some(gap) => link.until_quiet(most, Duration::from_millis(gap)),
            None => std::thread::sleep(most),
        }
        if let Some(q) = self.qps.get_mut(&order.qp) {
            q.probe_next = Some(probe::advance(order, next));
        }
        Ok(ProbeSent {
            id: order.id.clone(),
            qp: order.qp.clone(),
            src: my_ip.to_string(),
            dst: peer_ip.to_string(),
            src_qp: aim.src_qp,
            next: next.value(),
            frames: frames.into_iter().map(|(_, s)| s).collect(),
        })
    }

    /// Posts one send-queue WR; a bind says the window's rkey now.
    fn post(
        &mut self,
        qname: &str,
        wr_id: u64,
        verb: &Verb,
        sges: &[SgeRef],
        flags: &[SendFlag],
    ) -> AgentResult<Option<MwInfo>> {
        let sges = self.sges(sges)?;
        let p = Posting { q: self.qp(qname)?, wr_id, flags: send_flag_bits(flags) };
        let (opcode, imm, remote) = match verb {
            Verb::Send { imm, qkey } if p.q.setup.kind == QpKind::Ud => {
                (send_opcode(*imm), *imm, p.ud_peer(qname, *qkey)?)
            }
            Verb::Send { imm, .. } => (send_opcode(*imm), *imm, Remote::None),
            Verb::Write { remote, imm } => {
                let (addr, rkey) = p.q.remote(remote)?;
                (write_opcode(*imm), *imm, Remote::Rdma { addr, rkey })
            }
            Verb::Read { remote } => {
                let (addr, rkey) = p.q.remote(remote)?;
                (ibv_wr_opcode::IBV_WR_RDMA_READ, None, Remote::Rdma { addr, rkey })
            }
            Verb::CmpSwap { remote, compare, swap } => {
                let (addr, rkey) = p.q.remote(remote)?;
                (
                    ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP,
                    None,
                    Remote::Atomic { addr, rkey, compare_add: *compare, swap: *swap },
                )
            }
            Verb::FetchAdd { remote, add } => {
                let (addr, rkey) = p.q.remote(remote)?;
                (
                    ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD,
                    None,
                    Remote::Atomic { addr, rkey, compare_add: *add, swap: 0 },
                )
            }
            Verb::AtomicWrite { remote, value } => {
                p.atomic_write(remote, value)?;
                return Ok(None);
            }
            Verb::Flush { remote, len, placement, level } => {
                p.flush(remote, *len, *placement, *level)?;
                return Ok(None);
            }
            Verb::SendInv { invalidate } => (
                ibv_wr_opcode::IBV_WR_SEND_WITH_INV,
                None,
                Remote::Invalidate { rkey: invalidate.rkey()? },
            ),
            Verb::LocalInv { mw } => (
                ibv_wr_opcode::IBV_WR_LOCAL_INV,
                None,
                Remote::Invalidate { rkey: self.mw(mw)?.rkey },
            ),
            Verb::BindMw { mw, mr, offset, len, access } => {
                let w = self.mw(mw)?;
                let m = self
                    .mrs
                    .get(mr)
                    .ok_or_else(|| AgentError::from(format!("no MR `{mr}` on this endpoint")))?;
                let addr = m.addr().wrapping_add(*offset);
                let rkey = p.bind(w, Binding { mr: m, addr, len: *len, access: *access })?;
                if let Some(w) = self.mws.get_mut(mw) {
                    w.rkey = rkey;
                }
                return Ok(Some(MwInfo { name: mw.clone(), rkey }));
            }
        };
        let wr = SendWr { wr_id, opcode, flags: p.flags, imm_data: imm.unwrap_or(0), remote };
        // SAFETY: `Local::sges` made each SGE inside an `Mr` of `self.mrs`, under its
        // lkey (stale after a `DeregMr` step, on purpose). Every MR in this PD is an
        // `Mr`: its buffer is never borrowed (raw copies only) and is freed only by its
        // `Drop`, after `ibv_dereg_mr` (not refused: `Local` drops its windows first);
        // `Local` drops its QPs before its MRs. Sent inline, the SGEs' bytes lie in an
        // allocated, zero-initialised `Mr` buffer that outlives this call.
        on_send_queue!(p.q, q => unsafe { q.post_send(&wr, &sges) })?;
        Ok(None)
    }
}

/// One work request being posted on a QP's send queue: the QP, the request's
/// `wr_id`, and its `ibv_send_flags`.
struct Posting<'a> {
    q: &'a QpState,
    wr_id: u64,
    flags: u32,
}

impl<'a> Posting<'a> {
    /// Where a SEND on a UD QP goes: its peer, through its address handle.
    fn ud_peer(&self, qname: &str, qkey: Option<u32>) -> AgentResult<Remote<'a>> {
        let q = self.q;
        let ah = q.ah.as_ref().ok_or_else(|| {
            AgentError::from(format!("UD QP `{qname}` has no address handle: Connect first"))
        })?;
        let peer =
            q.peer.ok_or_else(|| AgentError::from(format!("UD QP `{qname}` knows no peer")))?;
        Ok(Remote::Ud { ah, qpn: peer.qpn, qkey: qkey.unwrap_or(q.peer_qkey) })
    }

    /// Posts an ATOMIC WRITE of `value` (8 bytes) to the peer's `remote`.
    fn atomic_write(&self, remote: &RemoteRef, value: &Hex) -> AgentResult<()> {
        let (addr, rkey) = self.q.remote(remote)?;
        let v: [u8; 8] = value.0.as_slice().try_into().map_err(|_| {
            AgentError::from(format!("an ATOMIC WRITE carries 8 bytes, not {}", value.0.len()))
        })?;
        on_send_queue!(self.q, q => q.post_atomic_write(self.wr_id, self.flags, rkey, addr, v))?;
        Ok(())
    }

    /// Posts an RDMA FLUSH of `len` bytes at the peer's `remote`.
    fn flush(
        &self,
        remote: &RemoteRef,
        len: u64,
        placement: Placement,
        level: Selectivity,
    ) -> AgentResult<()> {
        let (addr, rkey) = self.q.remote(remote)?;
        let len = usize::try_from(len)
            .map_err(|_| AgentError::from(format!("a FLUSH of {len} bytes is too long here")))?;
        let fl = FlushWr { rkey, addr, len, placement, level };
        on_send_queue!(self.q, q => q.post_flush(self.wr_id, self.flags, fl))?;
        Ok(())
    }

    /// Binds window `w` to `to`: a type 1 window through `ibv_bind_mw`, a type 2
    /// by a work request under its next rkey. Returns the window's rkey now.
    fn bind(&self, w: &MwState, to: Binding) -> AgentResult<u32> {
        Ok(match w.mw.kind {
            MwKind::Type1 => {
                on_send_queue!(self.q, q => q.bind_mw_type1(&w.mw, self.wr_id, self.flags, to))?;
                w.mw.rkey()
            }
            MwKind::Type2 => {
                let rkey = Mw::next_rkey(w.rkey);
                let wr = SendWr {
                    wr_id: self.wr_id,
                    opcode: ibv_wr_opcode::IBV_WR_BIND_MW,
                    flags: self.flags,
                    imm_data: 0,
                    remote: Remote::Bind { mw: &w.mw, rkey, to },
                };
                // SAFETY: no SGE: the bind names its MR and window by reference, and
                // the WR leaves no memory of ours in the device's hands.
                on_send_queue!(self.q, q => unsafe { q.post_send(&wr, &[]) })?;
                rkey
            }
        })
    }
}

/// The `ibv_send_flags` of a step's flags: signalled unless it says otherwise.
fn send_flag_bits(flags: &[SendFlag]) -> u32 {
    let mut bits = 0;
    let mut signaled = true;
    for f in flags {
        match f {
            SendFlag::Signaled => signaled = true,
            SendFlag::Unsignaled => signaled = false,
            SendFlag::Inline => bits |= ibv_send_flags::IBV_SEND_INLINE.0,
            SendFlag::Solicited => bits |= ibv_send_flags::IBV_SEND_SOLICITED.0,
            SendFlag::Fence => bits |= ibv_send_flags::IBV_SEND_FENCE.0,
        }
    }
    if signaled {
        bits |= ibv_send_flags::IBV_SEND_SIGNALED.0;
    }
    bits
}

fn write_opcode(imm: Option<u32>) -> u32 {
    if imm.is_some() {
        ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM
    } else {
        ibv_wr_opcode::IBV_WR_RDMA_WRITE
    }
}

fn send_opcode(imm: Option<u32>) -> u32 {
    if imm.is_some() {
        ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
    } else {
        ibv_wr_opcode::IBV_WR_SEND
    }
}

const EXCHANGE_WITHIN: Duration = Duration::from_secs(20);

/// The address rdma_cm connects QP `q` from: the endpoint's own, IPv4.
fn cm_ipv4(q: &protocol::QpSetup, my_ip: IpAddr) -> AgentResult<std::net::Ipv4Addr> {
    if q.kind == QpKind::Ud {
        return err(format!(
            "QP `{}`: rdma_cm connects RC and UC QPs; UD uses connect = \"tcp\" here",
            q.name
        ));
    }
    match my_ip {
        IpAddr::V4(v4) => Ok(v4),
        IpAddr::V6(_) => err("rdma_cm here connects over IPv4 addresses"),
    }
}

fn exchange_listen(ip: IpAddr, port: u16) -> AgentResult<TcpListener> {
    let l = TcpListener::bind((ip, port)).map_err(|e| {
        AgentError::from(format!("listening on {ip}:{port} for the QP exchange: {e}"))
    })?;
    l.set_nonblocking(true).map_err(|e| AgentError::from(e.to_string()))?;
    Ok(l)
}

fn exchange_passive(l: &TcpListener, mine: &Exchange) -> AgentResult<Exchange> {
    let until = Instant::now() + EXCHANGE_WITHIN;
    let s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => {
                let at = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
                return err(format!("no peer connected to {at} within {EXCHANGE_WITHIN:?}: {e}"));
            }
        }
    };
    s.set_nonblocking(false).map_err(|e| AgentError::from(e.to_string()))?;
    swap(s, mine)
}

fn exchange_active(to: SocketAddr, mine: &Exchange) -> AgentResult<Exchange> {
    let until = Instant::now() + EXCHANGE_WITHIN;
    let s = loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(2)) {
            Ok(s) => break s,
            // The passive side may not be listening yet.
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                return err(format!("cannot reach the peer at {to} for the QP exchange: {e}"))
            }
        }
    };
    swap(s, mine)
}

/// One JSON line each way.
fn swap(s: TcpStream, mine: &Exchange) -> AgentResult<Exchange> {
    let _ = s.set_read_timeout(Some(EXCHANGE_WITHIN));
    let mut w = s.try_clone().map_err(|e| AgentError::from(e.to_string()))?;
    let mut line = serde_json::to_string(mine).map_err(|e| AgentError::from(e.to_string()))?;
    line.push('\n');
    w.write_all(line.as_bytes())
        .map_err(|e| AgentError::from(format!("sending our QP info: {e}")))?;
    let mut r = BufReader::new(s.take(4096));
    let mut got = String::new();
    r.read_line(&mut got)
        .map_err(|e| AgentError::from(format!("reading the peer's QP info: {e}")))?;
    serde_json::from_str(got.trim())
        .map_err(|e| AgentError::from(format!("the peer's QP info is malformed: {e}")))
}

/// Serves one controller until its `Teardown` (`Ok(true)`) or the end of the
/// stream (`Ok(false)`: what it set up is freed all the same); `torn_down` is
/// called once a `Teardown` has freed everything, before its answer is written.
/// `device` is what may stay open for the next call ([`Device::kept`]).
pub(crate) fn serve(
    r: &mut dyn Read,
    w: &mut dyn Write,
    limits: &Limits,
    device: &mut Device,
    torn_down: &mut dyn FnMut(),
) -> std::io::Result<bool> {
    let mut agent =
        Agent { limits: limits.clone(), device: std::mem::take(device), ..Agent::default() };
    let served = serve_with(&mut agent, r, w, torn_down);
    // The scenario's capture and objects go first (they hold the device's
    // Arcs), then the device goes back to the caller, kept or closed.
    agent.capture = None;
    agent.captured = None;
    agent.ep = None;
    *device = std::mem::take(&mut agent.device);
    served
}

fn serve_with(
    agent: &mut Agent,
    r: &mut dyn Read,
    w: &mut dyn Write,
    torn_down: &mut dyn FnMut(),
) -> std::io::Result<bool> {
    loop {
        let m: ToAgent = match protocol::read_msg(r) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(false),
            Err(ReadError::Invalid(e)) => {
                protocol::write_msg(w, &FromAgent::error(format!("malformed message: {e}"), None))?;
                continue;
            }
            Err(e @ ReadError::TooLarge(_)) => {
                let _ = protocol::write_msg(w, &FromAgent::error(e.to_string(), None));
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()));
            }
            Err(ReadError::Io(e)) => return Err(e),
        };
        let last = matches!(m, ToAgent::Teardown);
        if matches!(m, ToAgent::Heartbeat) {
            continue;
        }
        if let ToAgent::Hello { version } = &m {
            if *version != protocol::VERSION {
                let msg = format!(
                    "protocol version {version} asked, this agent speaks {}",
                    protocol::VERSION
                );
                protocol::write_msg(
                    w,
                    &FromAgent::error(msg, Some("run the same roce version on both sides")),
                )?;
                continue;
            }
        }
        let answer = agent.handle(m);
        if last {
            torn_down();
        }
        protocol::write_msg(w, &answer)?;
        if last {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests;
