//! Carrying out one scenario: start an agent per endpoint (in a lab VM, or on a
//! real host), set up, start the wire's recording, connect, carry out the steps in
//! order, collect completions and memory. What happened is the run's [`Evidence`];
//! judging it is the judge's job.
//!
//! Owns: one scenario's run ([`execute`] and its phases), the agent pool, the endpoints
//! and slots. Imports: `super::link`, `super::resolve`, the agent protocol, the
//! results' outcome shapes, the scenario model, the agent's key, the lab's claims,
//! client, state and images.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use lab::claim::Claim;
use lab::client::RunSession;

use crate::bridge::client::{wrong_way, Bridge, BridgeRun, Sides};
use lab::state::{LabPaths, Vm};

use super::at_agents;
use super::link::{unexpected, Agent, Deadline, Unsupported};
use super::resolve::{self, Plan};
use crate::protocol::READ_BACK_MAX;
use crate::protocol::{self, Action, FromAgent, QpInfo, ToAgent};
use crate::results::{
    AgentsCapture, Connection, EndpointFacts, Evidence, Laps, Phase, StepAnswer, StreamRun,
    Verified,
};
use crate::scenario::model::{ConnectMethod, Memory, Qp, Scenario, Step};

/// How long one agent request may take (a `wait_completions` step adds its own).
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// A connection: rdma_cm address/route resolution, TCP exchange, RTR/RTS.
const CONNECT_WITHIN: Duration = Duration::from_secs(30);
/// How long completions may take to show up when the scenario does not say.
const COMPLETIONS_WITHIN: Duration = Duration::from_secs(3);

/// Agents on real hosts: each endpoint's `HOST:PORT`, and the key they share with
/// us (`None`: the agents listen unauthenticated, `--insecure` or loopback).
#[derive(Debug, Clone)]
pub(crate) struct RemoteAgents {
    pub(crate) addrs: BTreeMap<String, String>,
    pub(crate) key: Option<crate::agent::auth::Key>,
    /// `--bridge`: the switch between the hosts, which applies scenarios' fault
    /// rules and records their wire.
    pub(crate) bridge: Option<Bridge>,
}

/// A lab, and the image it boots (to bring it back the same after a crash).
#[derive(Debug, Clone)]
pub(crate) struct LabRef {
    pub(crate) paths: LabPaths,
    pub(crate) image: lab::image::Release,
}

/// Where the endpoints' agents run.
#[derive(Debug, Clone)]
pub(crate) enum Endpoints {
    /// The lab: each endpoint's agent is started in its VM.
    Lab(LabRef),
    /// Agents already listening on real hosts (`roce agent --listen`), by endpoint.
    Remote(RemoteAgents),
}

impl Endpoints {
    /// Whether a switch records each scenario's wire (and applies its fault
    /// rules): the lab's, or a bridge between real hosts.
    pub(crate) fn switched(&self) -> bool {
        match self {
            Endpoints::Lab(_) => true,
            Endpoints::Remote(r) => r.bridge.is_some(),
        }
    }
}

/// Where a scenario's wire is recorded: the switch's recording (the lab's, or a
/// bridge's), the agents' captures merged (`--capture-at-agents`), either,
/// both or neither.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wires {
    pub(crate) switch: Option<PathBuf>,
    pub(crate) agents: Option<PathBuf>,
}

/// A scenario's wire being recorded, by the lab's switch or a bridge's.
enum Recording {
    Lab(RunSession),
    /// The run on the bridge, where its recording goes, and each endpoint's side.
    Bridge(Box<BridgeRun>, PathBuf, Sides),
}

impl Recording {
    /// How far the recording's clock is ahead of this host's, at least (the
    /// lab's switch runs on this host: not at all).
    fn clock_ahead_ns(&self) -> i64 {
        match self {
            Recording::Lab(_) => 0,
            Recording::Bridge(run, ..) => run.clock_ahead_ns,
        }
    }

    /// Where its recording comes from, for the report.
    fn from(&self) -> String {
        match self {
            Recording::Lab(_) => "the lab's switch".into(),
            Recording::Bridge(run, ..) => run.what().to_string(),
        }
    }

    /// The switch's report, and what is wrong with the sides its recording
    /// shows (a bridge cabled the other way round).
    fn end(self) -> Result<(lab::switch::RunReport, Option<String>)> {
        match self {
            Recording::Lab(s) => Ok((s.end()?, None)),
            Recording::Bridge(run, capture, sides) => {
                let rep = run.end(&capture)?;
                Ok((rep, wrong_way(&capture, &sides)))
            }
        }
    }
}

/// Connection ports each slot has for its QPs.
const PORTS_PER_SLOT: usize = 500;

/// Where a scenario runs among those side by side on one lab (`-j N`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    /// Which of the N: its connection exchanges use their own ports.
    pub(crate) index: usize,
    /// Whether it shares the switch, owning only its own QPs' and ports' frames,
    /// or has it to itself (fault rules, probes, timed checks).
    pub(crate) shared: bool,
    /// Whether other scenarios may run on the same devices while it does (it
    /// shares the switch, and the run has more than one worker): their frames
    /// are in its devices' counters too.
    pub(crate) side_by_side: bool,
}

impl Slot {
    /// TCP / rdma_cm port for the `i`-th QP's connection.
    fn connect_port(self, i: usize) -> u16 {
        (18_600 + self.index * PORTS_PER_SLOT + i) as u16
    }
}

/// What the scenario's run claims on a shared switch: its QPs on each VM, its
/// connection ports.
fn claim(
    sc: &Scenario,
    plan: &Plan,
    endpoints: &BTreeMap<String, EndpointFacts>,
    slot: Slot,
) -> Result<Claim> {
    let mut c = Claim {
        ports: (0..sc.qps.len()).map(|i| slot.connect_port(i)).collect(),
        ..Claim::default()
    };
    for (name, facts) in endpoints {
        let on = match plan.vm(name).map_err(anyhow::Error::msg)? {
            Vm::A => &mut c.qps_a,
            Vm::B => &mut c.qps_b,
        };
        on.extend(facts.qps.iter().map(|q| q.qpn));
    }
    Ok(c)
}

/// How many completions the expectations wait for on `endpoint`, and for how
/// long: [`COMPLETIONS_WITHIN`], or longer where an expectation's `within_ms`
/// says so; when every expectation waited for names its completion (`wr_id`,
/// `index`, no `count`) with a `within_ms`, the longest of them. Such a
/// completion polled later than its `within_ms` after setup fails anyway, and
/// the wait starts after the steps: waiting no longer changes no verdict, only
/// how soon a run whose operations never complete ends (`roce fuzz`'s batches
/// are such runs).
fn completions_wanted(sc: &Scenario, endpoint: &str) -> (usize, Duration) {
    let mut min = 0;
    let mut within = COMPLETIONS_WITHIN;
    let mut bounded: Option<Duration> = None;
    let mut unbounded = false;
    for e in sc.expect.completion.iter().filter(|e| e.on == endpoint) {
        let wants = e.count.unwrap_or(0).max(e.index.map(|i| i + 1).unwrap_or(0));
        let wants = wants.max(usize::from(e.wr_id.is_some()));
        min = min.max(wants);
        if let Some(ms) = e.within_ms {
            within = within.max(Duration::from_millis(ms));
        }
        // The judge holds a completion named by `wr_id` or `index` to its
        // `within_ms`, but not a `count` (of the whole run, whenever polled).
        match e.within_ms.filter(|_| e.count.is_none()) {
            Some(ms) if wants > 0 => {
                bounded = Some(bounded.unwrap_or_default().max(Duration::from_millis(ms)))
            }
            _ if wants > 0 => unbounded = true,
            _ => {}
        }
    }
    if let Some(b) = bounded.filter(|_| !unbounded) {
        within = b;
    }
    // Waiting for every wr_id named is the agent's `min` in total, at least.
    let named =
        sc.expect.completion.iter().filter(|e| e.on == endpoint && e.wr_id.is_some()).count();
    (min.max(named), within)
}

/// The lab's agents between scenarios: each served a scenario to its Teardown and
/// waits for the next, so a run pays for starting them once, not per scenario.
/// An agent whose scenario did not end cleanly is not kept (it is stopped).
/// Scenarios side by side share it: each takes agents no other is using.
#[derive(Default)]
pub(crate) struct AgentPool {
    idle: std::sync::Mutex<Vec<Agent>>,
}

impl AgentPool {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Agent>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle agent in `vm`, for endpoint `endpoint`.
    fn take(&self, vm: Vm, endpoint: &str) -> Option<Agent> {
        let mut idle = self.idle();
        let i = idle.iter().position(|a| a.vm == Some(vm))?;
        let mut a = idle.swap_remove(i);
        a.reuse(endpoint);
        Some(a)
    }

    /// Stops every idle agent (the lab is being restarted, or the run is over):
    /// each holds a command open in its VM, which a stopping lab would wait for.
    pub(crate) fn clear(&self) {
        self.idle().clear();
    }
}

/// How long a lab agent may live: the run's, not a scenario's; each request has
/// its own deadline, and a scenario that misses one stops its agents.
const LAB_AGENT_LIFE: Duration = Duration::from_secs(24 * 3600);

/// Runs `sc` in `slot`; the wire is recorded where `wires` says, by the switch
/// (the lab's or a bridge's) and at the agents. Lab agents come from and go back
/// to `pool`.
pub(super) fn execute(
    sc: &Scenario,
    endpoints: &Endpoints,
    wires: Wires,
    pool: &AgentPool,
    slot: Slot,
) -> Evidence {
    let start = Instant::now();
    let mut out = Evidence::default();
    let deadline = Deadline::new(start, sc.timeout);
    let mut live = Live {
        agents: BTreeMap::new(),
        session: None,
        capturing: None,
        laps: Laps::start(),
        deadline,
    };
    let at_agents = wires.agents.clone();
    let wired = (wires.switch, at_agents.is_some());
    if let Err(e) = drive(sc, endpoints, wired, &mut out, &mut live, pool, slot) {
        match e.downcast_ref::<Unsupported>() {
            Some(u) => out.skipped = Some(u.0.clone()),
            None => out.error = Some(format!("{e:#}")),
        }
        // The time up to the failure is the failed phase's: the first not done.
        let recorded = endpoints.switched() || at_agents.is_some();
        let failed = DRIVE
            .iter()
            .find(|p| !out.timings.contains_key(p) && (**p != Phase::RecordingStart || recorded));
        live.laps.lap(&mut out.timings, *failed.unwrap_or(&Phase::Memory));
    }
    let Live { mut agents, mut session, mut laps, capturing, .. } = live;
    // A run that stopped early stopped waiting for its traffic here.
    out.settled_ns.get_or_insert_with(dissector::capture::unix_now_ns);
    // The agents' captures end before the teardown, whose frames are no
    // scenario's (the switch's recording ends after it, and sets them aside).
    if let (Some(running), Some(path)) = (capturing, at_agents) {
        agents.values_mut().for_each(|a| a.set_deadline(None));
        finish_agents_capture(&mut agents, &running, &path, session.is_some(), &mut out);
    }
    // Both endpoints tear down side by side; an agent still busy past the
    // deadline is not waited for.
    let sent: Vec<bool> = agents
        .values_mut()
        .map(|a| {
            a.set_deadline(None);
            !a.is_behind() && a.send(&ToAgent::Teardown).is_ok()
        })
        .collect();
    for ((name, mut a), sent) in agents.into_iter().zip(sent) {
        // An agent that cannot tear down is stopped: its VM command is killed when
        // its link drops (the kernel frees what it held), and a remote agent's
        // connection closes.
        let clean = match sent.then(|| a.recv(ANSWER_WITHIN)) {
            Some(Ok(FromAgent::TornDown { counters })) => {
                // Side by side on one lab, a device counts every scenario's
                // frames: its counters are not this one's alone.
                if let Some(c) = counters.filter(|_| !slot.side_by_side) {
                    out.counters.insert(name.clone(), c);
                }
                true
            }
            _ => false,
        };
        let log = a.log_text();
        if !log.trim().is_empty() {
            out.agent_logs.insert(name.clone(), log);
        }
        if clean && a.vm.is_some() {
            pool.idle().push(a);
        }
    }
    laps.lap(&mut out.timings, Phase::Teardown);
    if let Some(s) = session.take() {
        let from = s.from();
        match s.end() {
            Ok((rep, wrong_way)) => {
                if let Some(w) = wrong_way {
                    out.error.get_or_insert(w);
                }
                // The switch counted what it carried for this scenario: a capture
                // that lacks some of it would be judged as if those frames never were.
                if let Some(e) = &rep.capture_error {
                    out.error.get_or_insert(format!("the wire's capture is incomplete: {e}"));
                } else if rep.capture.is_some() && !rep.counters.capture_complete() {
                    out.error.get_or_insert(format!(
                        "the wire's capture holds {} frames, the switch carried more: {}",
                        rep.counters.recorded,
                        rep.counters.summary()
                    ));
                }
                out.capture = rep.capture.as_ref().map(PathBuf::from);
                out.wire_from = out.capture.is_some().then_some(from);
                if let (Some(switch), Some(agents)) = (&out.capture, &mut out.agents_capture) {
                    agents.differs = at_agents::against_switch(switch, Path::new(&agents.path))
                        .unwrap_or_else(|e| vec![format!("cannot compare: {e:#}")]);
                }
                out.wire = Some(rep);
            }
            Err(e) => {
                out.error.get_or_insert(format!("ending the wire recording: {e:#}"));
            }
        }
        laps.lap(&mut out.timings, Phase::RecordingStop);
    }
    out.duration_ms = start.elapsed().as_millis() as u64;
    out
}

/// Stops the agents' captures and merges them: the wire judged when no switch
/// recorded one (`switched`: kept beside the switch's otherwise). A capture that
/// could not be had, or is incomplete, is the run's error: judged on it, the
/// frames it lacks would look never sent.
fn finish_agents_capture(
    agents: &mut BTreeMap<String, Agent>,
    running: &at_agents::Capturing,
    path: &Path,
    switched: bool,
    out: &mut Evidence,
) {
    // An agent still at a request it was given cannot be asked for its capture.
    if let Some((name, _)) = agents.iter().find(|(_, a)| a.is_behind()) {
        out.error.get_or_insert(format!(
            "the agents' captures: endpoint {name}'s agent never answered, so its capture could not be had"
        ));
        return;
    }
    match at_agents::finish(agents, running, path, &out.endpoints) {
        Ok(m) => {
            if let Some(why) = m.incomplete.first().filter(|_| !switched) {
                out.error.get_or_insert(format!("the wire's capture is incomplete: {why}"));
            }
            if switched {
                // Set against the switch's recording once that is whole, after
                // the teardown.
                out.agents_capture = Some(AgentsCapture {
                    path: m.path.display().to_string(),
                    from: m.said,
                    incomplete: m.incomplete,
                    differs: Vec::new(),
                });
            } else {
                out.capture = Some(m.path);
                out.wire_from = Some(m.said);
            }
        }
        Err(e) => {
            out.error.get_or_insert(format!("the agents' captures: {e:#}"));
        }
    }
}

fn agent<'a>(agents: &'a mut BTreeMap<String, Agent>, name: &str) -> Result<&'a mut Agent> {
    agents.get_mut(name).ok_or_else(|| anyhow!("no agent for endpoint {name}"))
}

/// The phases of [`drive`], in order.
const DRIVE: [Phase; 7] = [
    Phase::AgentStart,
    Phase::Setup,
    Phase::RecordingStart,
    Phase::Connect,
    Phase::Steps,
    Phase::Completions,
    Phase::Memory,
];

/// What a scenario's run holds while it goes: its agents, the recording (the
/// switch's, the agents' captures), the stopwatch, and when it must be over.
struct Live {
    agents: BTreeMap<String, Agent>,
    session: Option<Recording>,
    capturing: Option<at_agents::Capturing>,
    laps: Laps,
    deadline: Deadline,
}

fn drive(
    sc: &Scenario,
    endpoints: &Endpoints,
    (capture, at_agents): (Option<PathBuf>, bool),
    out: &mut Evidence,
    live: &mut Live,
    pool: &AgentPool,
    slot: Slot,
) -> Result<()> {
    let Live { agents, session, capturing, laps, deadline } = live;
    let deadline = *deadline;
    if sc.qps.len() > PORTS_PER_SLOT {
        bail!(
            "{} QPs: a scenario connects at most {PORTS_PER_SLOT}, each on its own port",
            sc.qps.len()
        );
    }
    // Through a switch, each endpoint is on a side of it: its lab VM, or the
    // bridge port that faces its host (side a: the bridge's first --port).
    let plan = Plan::new(sc, endpoints.switched()).map_err(anyhow::Error::msg)?;
    let kernels = start_agents(sc, &plan, endpoints, pool, deadline, agents)?;
    laps.lap(&mut out.timings, Phase::AgentStart);
    let (mut keys, open_ms) = set_up(&plan, &kernels, agents, out)?;
    laps.lap(&mut out.timings, Phase::Setup);
    // Of Setup, the agents' own measure of opening the device.
    if let Some(setup) = out.timings.get_mut(&Phase::Setup) {
        let open = open_ms.min(*setup);
        *setup -= open;
        out.timings.insert(Phase::DeviceOpen, open);
    }
    *session = start_recording(sc, &plan, endpoints, capture, slot, deadline, out)?;
    if at_agents {
        *capturing = Some(at_agents::start(agents)?);
    }
    if session.is_some() || at_agents {
        laps.lap(&mut out.timings, Phase::RecordingStart);
    }
    // QPs the controller connects come up with nothing on any wire: the
    // baseline's wait for the counters to hold still runs while they do.
    if sc.qps.iter().all(|q| q.connect == ConnectMethod::Controller) {
        connect(sc, slot, agents, out)?;
        baseline(agents, out)?;
    } else {
        baseline(agents, out)?;
        connect(sc, slot, agents, out)?;
    }
    laps.lap(&mut out.timings, Phase::Connect);
    let clock = session.as_ref().map(Recording::clock_ahead_ns);
    run_steps(sc, &mut keys, deadline, (agents, clock), out)?;
    laps.lap(&mut out.timings, Phase::Steps);
    collect(sc, out, agents, laps, deadline)
}

/// Where endpoint `name`'s agent listens: named in --endpoints, or else the
/// host of its side (its `vm`, as in the lab: `a` or `b`). Two endpoints on one
/// host need an agent each (one serves one controller connection at a time):
/// without one named for each, the scenario is skipped, saying how to run it.
fn remote_addr<'a>(sc: &Scenario, r: &'a RemoteAgents, name: &str) -> Result<&'a str> {
    if let Some(a) = r.addrs.get(name) {
        return Ok(a);
    }
    let side =
        |e: &str| sc.endpoints.get(e).and_then(|x| x.vm.clone()).unwrap_or_else(|| e.to_string());
    let host = side(name);
    let Some(addr) = r.addrs.get(&host) else {
        bail!("no address for endpoint `{name}` (nor for `{host}`, the host it runs on) in --endpoints\nhint: --endpoints {host}=HOST:PORT")
    };
    let unnamed = |e: &&String| e.as_str() != name && !r.addrs.contains_key(e.as_str());
    if let Some(other) = sc.endpoints.keys().filter(unnamed).find(|e| side(e) == host) {
        return Err(Unsupported(format!(
            "endpoints `{name}` and `{other}` both run on host {host} ({addr}), and one agent serves one endpoint\nhint: start a second agent there and name each: --endpoints {name}=HOST:PORT,{other}=HOST:PORT2"
        ))
        .into());
    }
    Ok(addr)
}

/// Phase [`Phase::AgentStart`]: an agent per endpoint (from the pool, started in
/// its lab VM, or reached on its host), each greeted, and each device asked for
/// what the scenario requires. Returns each endpoint's kernel, as its agent said.
fn start_agents(
    sc: &Scenario,
    plan: &Plan,
    endpoints: &Endpoints,
    pool: &AgentPool,
    deadline: Deadline,
    agents: &mut BTreeMap<String, Agent>,
) -> Result<BTreeMap<String, Option<String>>> {
    // Agents first, then the recording: the wire holds the scenario's traffic only.
    for name in sc.endpoints.keys() {
        let mut a = match endpoints {
            Endpoints::Lab(lab) => {
                let vm = plan.vm(name).map_err(anyhow::Error::msg)?;
                match pool.take(vm, name) {
                    Some(a) => a,
                    None => Agent::in_lab(&lab.paths, vm, name, LAB_AGENT_LIFE)?,
                }
            }
            Endpoints::Remote(r) => Agent::remote(remote_addr(sc, r, name)?, name, r.key.as_ref())?,
        };
        a.set_deadline(Some(deadline));
        agents.insert(name.clone(), a);
    }
    let mut kernels = BTreeMap::new();
    // Each request below goes to every endpoint before any answer is awaited: the
    // endpoints work side by side (each agent still answers in order).
    for a in agents.values_mut() {
        a.send(&ToAgent::Hello { version: protocol::VERSION })?;
    }
    for (name, a) in agents.iter_mut() {
        match a.recv(ANSWER_WITHIN)? {
            FromAgent::Hello { version, kernel, .. } if version == protocol::VERSION => {
                kernels.insert(name.clone(), kernel);
            }
            FromAgent::Hello { version, agent, .. } => {
                bail!("endpoint {name}'s agent ({agent}) speaks protocol version {version}, this controller {}\nhint: run the same roce version on both", protocol::VERSION)
            }
            other => return Err(unexpected(name, "Hello", &other)),
        }
    }
    // What the scenario requires of each device, asked before anything is set up:
    // a device without it skips the scenario, with the reason.
    if !sc.requires.is_empty() {
        for name in sc.endpoints.keys() {
            let device = sc.endpoints.get(name).and_then(|e| e.device.clone());
            match agent(agents, name)?.request(&ToAgent::Capabilities { device }, ANSWER_WITHIN)? {
                FromAgent::Capabilities { features, .. } => {
                    if let Some(f) = sc.requires.iter().find(|f| !features.contains(f)) {
                        return Err(Unsupported(format!(
                            "endpoint {name}: the device lacks {} ({})",
                            f.what(),
                            f.since()
                        ))
                        .into());
                    }
                }
                other => return Err(unexpected(name, "Capabilities", &other)),
            }
        }
    }
    Ok(kernels)
}

/// Phase [`Phase::Setup`]: device, PD, CQ, MRs, SRQs, windows, QPs on each
/// endpoint; what each set up goes into `out.endpoints`. Returns the memory
/// windows' keys and the slowest endpoint's time to open its device.
fn set_up(
    plan: &Plan,
    kernels: &BTreeMap<String, Option<String>>,
    agents: &mut BTreeMap<String, Agent>,
    out: &mut Evidence,
) -> Result<(resolve::MwKeys, f64)> {
    let mut keys = resolve::MwKeys::new();
    // Setup: device, PD, CQ, MRs, SRQs, windows, QPs on each endpoint.
    let mut open_ms: f64 = 0.0;
    for (name, planned) in &plan.endpoints {
        agent(agents, name)?.send(&ToAgent::Setup(planned.setup.clone()))?;
    }
    for (name, planned) in &plan.endpoints {
        match agent(agents, name)?.recv(ANSWER_WITHIN)? {
            FromAgent::SetupDone {
                device,
                port,
                gid_index,
                gid,
                ip,
                qps,
                mrs,
                mws,
                open_ms: opened,
            } => {
                // Side by side: the slowest endpoint's device open is the phase's.
                open_ms = open_ms.max(opened);
                keys.extend(mws.into_iter().map(|w| ((name.clone(), w.name), w.rkey)));
                let vm = planned.vm.map(|v| v.name().to_string());
                let kernel = kernels.get(name).cloned().flatten();
                out.endpoints.insert(
                    name.clone(),
                    EndpointFacts { vm, device, port, gid_index, gid, ip, qps, mrs, kernel },
                );
            }
            other => return Err(unexpected(name, "SetupDone", &other)),
        }
    }
    Ok((keys, open_ms))
}

/// Phase [`Phase::RecordingStart`]: in the lab, the switch starts recording (and
/// applying the scenario's faults) for this run.
fn start_recording(
    sc: &Scenario,
    plan: &Plan,
    endpoints: &Endpoints,
    capture: Option<PathBuf>,
    slot: Slot,
    deadline: Deadline,
    out: &Evidence,
) -> Result<Option<Recording>> {
    // The recording (and the faults, which name QPNs known only now) starts before
    // anything goes on the wire: setup is local to each endpoint.
    if let Endpoints::Lab(LabRef { paths, .. }) = endpoints {
        let pcap = match &capture {
            Some(p) => Some(lab::absolute(p)?.display().to_string()),
            None => None,
        };
        let rules = resolve::fault_rules(sc, plan, &out.endpoints).map_err(anyhow::Error::msg)?;
        let claim = if slot.shared { Some(claim(sc, plan, &out.endpoints, slot)?) } else { None };
        return Ok(Some(Recording::Lab(RunSession::begin(paths, pcap, rules, 1, None, claim)?)));
    }
    if let (Endpoints::Remote(RemoteAgents { bridge: Some(b), .. }), Some(capture)) =
        (endpoints, capture)
    {
        let rules = resolve::fault_rules(sc, plan, &out.endpoints).map_err(anyhow::Error::msg)?;
        // The bridge ends a run its controller left behind, once the scenario
        // could no longer be going on.
        let within = deadline.left() + 2 * ANSWER_WITHIN;
        let mut sides = Sides::new();
        for (name, facts) in &out.endpoints {
            if let (Ok(ip), Ok(vm)) = (facts.ip.parse(), plan.vm(name)) {
                sides.insert(ip, (name.clone(), vm.index()));
            }
        }
        let run = Box::new(b.begin(&rules, 1, within)?);
        return Ok(Some(Recording::Bridge(run, capture, sides)));
    }
    if !sc.faults.is_empty() {
        bail!("this scenario has [[fault]] rules, which need a switch in the wire\nhint: run it in the lab (no --endpoints), or through a bridge between the hosts (--bridge HOST:PORT)");
    }
    Ok(None)
}

/// Each endpoint reads its counters' baseline, now that the wire is being
/// recorded (nothing of the scenario's is on it yet). Frames recorded before
/// every endpoint answered may or may not be in a baseline: the judge makes
/// their count a range (`Evidence::baseline_ns`).
fn baseline(agents: &mut BTreeMap<String, Agent>, out: &mut Evidence) -> Result<()> {
    for a in agents.values_mut() {
        a.send(&ToAgent::Baseline)?;
    }
    for (name, a) in agents.iter_mut() {
        match a.recv(ANSWER_WITHIN)? {
            FromAgent::Baseline { .. } => {}
            other => return Err(unexpected(name, "Baseline", &other)),
        }
    }
    out.baseline_ns = Some(dissector::capture::unix_now_ns());
    Ok(())
}

/// Phase [`Phase::Connect`]: each QP connected, passive side first.
fn connect(
    sc: &Scenario,
    slot: Slot,
    agents: &mut BTreeMap<String, Agent>,
    out: &mut Evidence,
) -> Result<()> {
    // The QPs the controller connects first: every Connect is sent before any
    // answer is read (there is no exchange between the endpoints to wait for),
    // so both agents bring their QPs up at once. Then the others, one at a time:
    // the passive side listens, then both are asked to connect; both answer once
    // connected.
    let by_controller = |q: &&Qp| q.connect == ConnectMethod::Controller;
    let mut asked = Vec::new();
    for (i, q) in sc.qps.iter().enumerate().filter(|(_, q)| by_controller(q)) {
        asked.extend(ask_connect(q, slot.connect_port(i), agents, out)?);
    }
    for e in &asked {
        connected(e, agents, out)?;
    }
    for (i, q) in sc.qps.iter().enumerate().filter(|(_, q)| !by_controller(q)) {
        // The passive side listens before the active side is asked: its first
        // SYN or REQ finds a listener (no refused attempt on the wire, no retry).
        let listen = ToAgent::Listen { qp: q.name.clone(), port: slot.connect_port(i) };
        let p = &q.between[0];
        match agent(agents, p)?.request(&listen, ANSWER_WITHIN)? {
            FromAgent::Listening { .. } => {}
            other => return Err(unexpected(p, "Listening", &other)),
        }
        for e in ask_connect(q, slot.connect_port(i), agents, out)? {
            connected(&e, agents, out)?;
        }
    }
    Ok(())
}

/// Asks both ends of `q` to connect it (the passive side first), each told the
/// other's address and MRs, and, connected by the controller, the other's QP as
/// its setup answered; the endpoints whose answer is to be read, in order.
fn ask_connect(
    q: &Qp,
    port: u16,
    agents: &mut BTreeMap<String, Agent>,
    out: &Evidence,
) -> Result<[String; 2]> {
    let [p, act] = &q.between;
    let facts =
        |e: &str| out.endpoints.get(e).ok_or_else(|| anyhow!("endpoint {e} was not set up"));
    let peer_qp = |e: &str| -> Result<Option<QpInfo>> {
        if q.connect != ConnectMethod::Controller {
            return Ok(None);
        }
        let info = facts(e)?.qps.iter().find(|x| x.name == q.name).cloned();
        info.map(Some).ok_or_else(|| anyhow!("endpoint {e} did not set QP `{}` up", q.name))
    };
    let msg = |passive: bool, peer: &str| -> Result<ToAgent> {
        Ok(ToAgent::Connect(protocol::Connect {
            qp: q.name.clone(),
            passive,
            peer_ip: facts(peer)?.ip.clone(),
            port,
            peer_mrs: facts(peer)?.mrs.clone(),
            peer: peer_qp(peer)?,
        }))
    };
    agent(agents, p)?.send(&msg(true, act)?)?;
    agent(agents, act)?.send(&msg(false, p)?)?;
    Ok([act.clone(), p.clone()])
}

/// Reads endpoint `e`'s answer to a Connect.
fn connected(e: &str, agents: &mut BTreeMap<String, Agent>, out: &mut Evidence) -> Result<()> {
    match agent(agents, e)?.recv(CONNECT_WITHIN)? {
        FromAgent::Connected { qp, local, remote, peer_mrs_from_cm } => {
            let endpoint = e.to_string();
            out.connections.push(Connection { qp, endpoint, local, remote, peer_mrs_from_cm });
            Ok(())
        }
        other => Err(unexpected(e, "Connected", &other)),
    }
}

/// Phase [`Phase::Steps`]: the steps, in order. With a recording whose clock
/// is `clock` ns ahead of this host's, when each endpoint was first asked for a
/// step goes into [`Evidence::asked_ns`].
fn run_steps(
    sc: &Scenario,
    keys: &mut resolve::MwKeys,
    deadline: Deadline,
    (agents, clock): (&mut BTreeMap<String, Agent>, Option<i64>),
    out: &mut Evidence,
) -> Result<()> {
    let mut asked = |on: &str| {
        if let Some(ahead) = clock {
            let now = i128::from(dissector::capture::unix_now_ns()) + i128::from(ahead);
            let at = now.clamp(0, i128::from(u64::MAX)) as u64;
            out.asked_ns.entry(on.to_string()).or_insert(at);
        }
    };
    // Steps, in order. The controller waits for each to be done (posted) before the
    // next, which is what orders the two endpoints; `sync` is that, made explicit.
    // The scenario's own deadline (timeout_ms) bounds each wait for an agent, and
    // the controller's own sleeps.
    let overdue = |what: &str| -> Result<()> {
        if deadline.left().is_zero() {
            return Err(deadline.passed(&format!("before {what}")));
        }
        Ok(())
    };
    for (index, step) in sc.steps.iter().enumerate() {
        overdue(&format!("step {}", index + 1))?;
        if let Step::Sleep { ms } = step {
            thread::sleep(Duration::from_millis(*ms).min(deadline.left()));
        }
        let Some((on, action)) = resolve::sent(sc, step, keys).map_err(anyhow::Error::msg)? else {
            continue;
        };
        let within = ANSWER_WITHIN + Duration::from_millis(action.waits_ms());
        let what = || format!("step {} ({} on {on})", index + 1, step.op());
        // A SEND stream: the peer keeps its receives posted while it goes.
        let receiver = match step {
            Step::Stream(st) => st.receive.as_ref().map(|r| (&st.peer, r)),
            _ => None,
        };
        if let Some((peer, r)) = receiver {
            let action = Action::Receive(r.clone());
            asked(peer);
            agent(agents, peer)?.send(&ToAgent::Do { index, action, judged: false })?;
        }
        let judged = sc.expect.step.iter().any(|e| e.index == index);
        asked(&on);
        match agent(agents, &on)?
            .request(&ToAgent::Do { index, action, judged }, within)
            .with_context(what)?
        {
            FromAgent::Done { probe, mw, stream, refused, qp_state, notified, .. } => {
                if judged {
                    let on = on.clone();
                    out.answers.push(StepAnswer { index, on, refused, qp_state, notified });
                }
                out.probes.extend(probe);
                out.streams.extend(stream.map(|report| StreamRun {
                    on: on.clone(),
                    report: *report,
                    wire: None,
                }));
                if let Some(w) = mw {
                    keys.insert((on.clone(), w.name), w.rkey);
                }
            }
            other => return Err(unexpected(&on, "Done", &other)),
        }
        if let Some((peer, _)) = receiver {
            match agent(agents, peer)?.recv(within).with_context(what)? {
                FromAgent::Done { stream, .. } => {
                    out.streams.extend(stream.map(|report| StreamRun {
                        on: peer.clone(),
                        report: *report,
                        wire: None,
                    }))
                }
                other => return Err(unexpected(peer, "Done", &other)),
            }
        }
    }
    overdue("collecting the completions")
}

/// How long before the deadline an agent's wait for completions ends, so its
/// answer is back in time.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// Completions and memory, once the steps are done.
fn collect(
    sc: &Scenario,
    out: &mut Evidence,
    agents: &mut BTreeMap<String, Agent>,
    laps: &mut Laps,
    deadline: Deadline,
) -> Result<()> {
    let mut cut = BTreeMap::new();
    for (name, a) in agents.iter_mut() {
        let (min, within) = completions_wanted(sc, name);
        // Errors and RNR retries take their time: wait for what the expectations
        // name, then a moment more for anything unexpected; the deadline first.
        let wait = within.min(deadline.left().saturating_sub(ANSWER_MARGIN));
        if wait < within {
            cut.insert(name.clone(), min);
        }
        let grace_ms = sc.completion_grace_ms;
        a.send(&ToAgent::Completions { min, wait_ms: wait.as_millis() as u64, grace_ms })?;
    }
    for (name, a) in agents.iter_mut() {
        let (_, within) = completions_wanted(sc, name);
        match a.recv(within + ANSWER_WITHIN)? {
            FromAgent::Completions { wcs, events } => {
                if let Some(&min) = cut.get(name).filter(|&&min| wcs.len() < min) {
                    out.error.get_or_insert(deadline.passed(&format!("while endpoint {name} waited for its completions ({} of {min} came)", wcs.len())).to_string());
                }
                out.completions.insert(name.clone(), wcs);
                out.events.insert(name.clone(), events);
            }
            other => return Err(unexpected(name, "Completions", &other)),
        }
    }
    laps.lap(&mut out.timings, Phase::Completions);
    out.settled_ns = Some(dissector::capture::unix_now_ns());
    // Reading memory back is the controller's, not the scenario's: its own
    // deadline per MR.
    for a in agents.values_mut() {
        a.set_deadline(None);
    }
    // Every MR small enough is read back whole; a stream's messages are checked
    // where they landed, whatever the MR's size.
    for m in sc.mrs.iter().filter(|m| m.size <= READ_BACK_MAX) {
        match agent(agents, &m.on)?
            .request(&ToAgent::ReadMemory { mr: m.name.clone() }, ANSWER_WITHIN)?
        {
            FromAgent::Memory { mr, bytes } => {
                out.memory.entry(m.on.clone()).or_default().insert(mr, bytes.0);
            }
            other => return Err(unexpected(&m.on, "Memory", &other)),
        }
    }
    // Outside every MR: its guard regions, all of an endpoint's in one answer.
    for (name, a) in agents.iter_mut() {
        match a.request(&ToAgent::Guards, ANSWER_WITHIN)? {
            FromAgent::Guards { mrs } => {
                out.guards.insert(name.clone(), mrs);
            }
            other => return Err(unexpected(name, "Guards", &other)),
        }
    }
    for e in &sc.expect.memory {
        let Memory::Stream { id, content } = &e.want else { continue };
        let ask = ToAgent::Verify { mr: e.mr.clone(), offset: e.offset, content: *content };
        match agent(agents, &e.on)?.request(&ask, ANSWER_WITHIN)? {
            FromAgent::Verified { mr, result } => {
                out.verified.push(Verified { on: e.on.clone(), mr, stream: id.clone(), result })
            }
            other => return Err(unexpected(&e.on, "Verified", &other)),
        }
    }
    laps.lap(&mut out.timings, Phase::Memory);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// One QP between a and b, and the completion expectations `expect` (TOML).
    fn scenario(expect: &str) -> Scenario {
        let text = format!(
            r#"
name = "x"
[endpoints.a]
[endpoints.b]
[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]
[[mr]]
name = "m"
on = "a"
size = 8
[[step]]
on = "a"
op = "send"
qp = "q"
wr_id = 1
sge = [{{ mr = "m" }}]
{expect}
"#
        );
        crate::scenario::check::parse_str(Path::new("t.toml"), &text)
            .unwrap_or_else(|e| panic!("{}", e[0]))
    }

    fn wanted(expect: &str) -> (usize, u64) {
        let (min, within) = completions_wanted(&scenario(expect), "a");
        (min, within.as_millis() as u64)
    }

    #[test]
    fn the_wait_is_the_longest_within_ms_only_when_every_awaited_completion_has_one() {
        let one = |wr, ms: &str| format!("[[expect.completion]]\non = \"a\"\nwr_id = {wr}\n{ms}\n");
        assert_eq!(wanted(&one(1, "")), (1, 3000), "no within_ms: the usual 3 s");
        assert_eq!(wanted(&one(1, "within_ms = 800")), (1, 800));
        let both = one(1, "within_ms = 800") + &one(2, "within_ms = 400");
        assert_eq!(wanted(&both), (2, 800), "the longest of them");
        let mixed = one(1, "within_ms = 800") + &one(2, "");
        assert_eq!(wanted(&mixed), (2, 3000), "one without: as before");
        assert_eq!(wanted(&one(1, "within_ms = 5000")), (1, 5000), "longer than 3 s, as before");
        // A count is of the whole run, whenever polled: its within_ms bounds nothing.
        let count = "[[expect.completion]]\non = \"a\"\ncount = 2\nwithin_ms = 100\n";
        assert_eq!(wanted(count), (2, 3000));
        let beside = "[[expect.completion]]\non = \"a\"\nwr_id = 1\ncount = 2\nwithin_ms = 100\n";
        assert_eq!(wanted(beside), (2, 3000));
        // b waits for nothing: its wait is not shortened by a's bounds.
        let sc = scenario(&one(1, "within_ms = 800"));
        assert_eq!(completions_wanted(&sc, "b"), (0, COMPLETIONS_WITHIN));
    }
}
