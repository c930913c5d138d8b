//! Carrying out one scenario: start an agent per endpoint (in a lab VM, or on a
//! real host), set up, connect, post the steps in order, collect completions and
//! memory, record the wire. What happened is an [`Outcome`]; judging it against the
//! expectations is the judge's job.
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::agent::proto::{self, FromAgent, MrInfo, QpInfo, ToAgent};
use crate::results::{Connection, EndpointFacts, MrFacts, Outcome, QpFacts};
use lab::client::{ExecStdio, RunSession};
use lab::state::{LabPaths, Vm};
use lab::fault::{Dir, Rule};
use crate::scenario::model::{Op, Scenario};

/// How long one agent request may take (a `wait_completions` step adds its own).
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// A connection: rdma_cm address/route resolution, TCP exchange, RTR/RTS.
const CONNECT_WITHIN: Duration = Duration::from_secs(30);
/// How long completions may take to show up when the scenario does not say.
const COMPLETIONS_WITHIN: Duration = Duration::from_secs(3);
/// The agent in a VM is the host's own `roce`, shared over 9p.
const LAB_AGENT: &str = "/host/roce agent --stdio";

/// Where the endpoints' agents run.
#[derive(Debug, Clone)]
pub enum Endpoints {
    /// The lab: each endpoint's agent is started in its VM.
    Lab(LabPaths),
    /// Agents already listening on real hosts (`roce agent --listen`), by endpoint.
    Remote(BTreeMap<String, String>),
}

/// One agent: requests go out on `tx`, answers come back through a reader thread.
struct Agent {
    endpoint: String,
    tx: Box<dyn Write + Send>,
    rx: mpsc::Receiver<Result<FromAgent, String>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Keeps the transport (the VM command, or the TCP stream) alive.
    _keep: Box<dyn Send>,
}

fn spawn_reader(endpoint: &str, mut r: impl Read + Send + 'static) -> mpsc::Receiver<Result<FromAgent, String>> {
    let (tx, rx) = mpsc::channel();
    let name = endpoint.to_string();
    thread::spawn(move || loop {
        let m = match proto::read_msg::<_, FromAgent>(&mut r) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(format!("endpoint {name}'s agent closed its connection")),
            Err(e) => Err(format!("endpoint {name}'s agent: {e}")),
        };
        let end = m.is_err();
        if tx.send(m).is_err() || end {
            return;
        }
    });
    rx
}

impl Agent {
    fn in_lab(paths: &LabPaths, vm: Vm, endpoint: &str, timeout: Duration) -> Result<Agent> {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = log.clone();
        let on_stderr = Box::new(move |d: &[u8]| sink.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(d));
        let x = ExecStdio::start(paths, vm, LAB_AGENT, timeout, on_stderr)
            .with_context(|| format!("starting endpoint {endpoint}'s agent in VM {}", vm.name()))?;
        let tx = x.stdin()?;
        let rx = spawn_reader(endpoint, x);
        Ok(Agent { endpoint: endpoint.into(), tx: Box::new(tx), rx, log, _keep: Box::new(()) })
    }

    fn remote(addr: &str, endpoint: &str) -> Result<Agent> {
        let s = TcpStream::connect(addr).with_context(|| {
            format!("connecting to endpoint {endpoint}'s agent at {addr}\nhint: start it there with `roce agent --listen {addr}`")
        })?;
        let _ = s.set_nodelay(true);
        let r = s.try_clone()?;
        let rx = spawn_reader(endpoint, r);
        Ok(Agent { endpoint: endpoint.into(), tx: Box::new(s), rx, log: Default::default(), _keep: Box::new(()) })
    }

    fn send(&mut self, m: &ToAgent) -> Result<()> {
        proto::write_msg(&mut self.tx, m).with_context(|| format!("sending to endpoint {}'s agent", self.endpoint))
    }

    fn recv(&mut self, within: Duration) -> Result<FromAgent> {
        let m = self
            .rx
            .recv_timeout(within)
            .map_err(|_| anyhow!("endpoint {}'s agent did not answer within {within:?}", self.endpoint))?
            .map_err(anyhow::Error::msg)?;
        if let FromAgent::Error { message, verb, errno, hint } = m {
            let mut s = format!("endpoint {}: {message}", self.endpoint);
            if let Some(v) = verb {
                s.push_str(&format!(" (verb {v}"));
                if let Some(e) = errno {
                    s.push_str(&format!(", errno {e}"));
                }
                s.push(')');
            }
            if let Some(h) = hint {
                s.push_str(&format!("\nhint: {h}"));
            }
            bail!(s);
        }
        Ok(m)
    }

    fn request(&mut self, m: &ToAgent, within: Duration) -> Result<FromAgent> {
        self.send(m)?;
        self.recv(within)
    }

    fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

fn unexpected(endpoint: &str, want: &str, got: &FromAgent) -> anyhow::Error {
    anyhow!("endpoint {endpoint}'s agent answered {got:?} where {want} was expected")
}

/// The lab VM an endpoint runs in: `vm`, else its name.
pub fn endpoint_vm(sc: &Scenario, endpoint: &str) -> Result<Vm> {
    let vm = sc.endpoints.get(endpoint).and_then(|e| e.vm.clone()).unwrap_or_else(|| endpoint.to_string());
    Vm::parse(&vm).ok_or_else(|| anyhow!("endpoint `{endpoint}` runs on `{vm}`, which is not a lab VM (a or b)\nhint: set `vm = \"a\"` or `vm = \"b\"` in [endpoints.{endpoint}]"))
}

fn qp_facts(q: QpInfo) -> QpFacts {
    QpFacts { name: q.name, qpn: q.qpn, psn: q.psn, gid: q.gid, qkey: q.qkey }
}

fn mr_facts(m: MrInfo) -> MrFacts {
    MrFacts { name: m.name, addr: m.addr, len: m.len, rkey: m.rkey, lkey: m.lkey }
}

/// TCP / rdma_cm port for the `i`-th QP's connection.
fn connect_port(i: usize) -> u16 {
    18_600 + i as u16
}

/// How many completions the expectations wait for on `endpoint`.
fn completions_wanted(sc: &Scenario, endpoint: &str) -> (usize, Duration) {
    let mut min = 0;
    let mut within = COMPLETIONS_WITHIN;
    for e in sc.expect.completion.iter().filter(|e| e.on == endpoint) {
        min = min.max(e.count.unwrap_or(0)).max(e.index.map(|i| i + 1).unwrap_or(0)).max(usize::from(e.wr_id.is_some()));
        if let Some(ms) = e.within_ms {
            within = within.max(Duration::from_millis(ms));
        }
    }
    // Waiting for every wr_id named is the agent's `min` in total, at least.
    let named = sc.expect.completion.iter().filter(|e| e.on == endpoint && e.wr_id.is_some()).count();
    (min.max(named), within)
}

/// Runs `sc`; the wire is recorded to `capture` when the endpoints are in the lab.
pub fn execute(sc: &Scenario, endpoints: &Endpoints, capture: Option<PathBuf>) -> Outcome {
    let start = Instant::now();
    let mut out = Outcome::default();
    let mut agents: BTreeMap<String, Agent> = BTreeMap::new();
    let mut session = None;
    let r = drive(sc, endpoints, capture.clone(), &mut out, &mut agents, &mut session);
    if let Err(e) = r {
        out.error = Some(format!("{e:#}"));
    }
    for (name, a) in &mut agents {
        // An agent that cannot tear down still ends: its VM command has a timeout,
        // and a remote agent's connection closes when `agents` drops.
        let _ = a.request(&ToAgent::Teardown, ANSWER_WITHIN);
        let log = a.log_text();
        if !log.trim().is_empty() {
            out.agent_logs.insert(name.clone(), log);
        }
    }
    drop(agents);
    if let Some(s) = session.take() {
        match RunSession::end(s) {
            Ok(rep) => {
                out.capture = rep.capture.as_ref().map(PathBuf::from);
                out.wire = Some(rep);
            }
            Err(e) => {
                let msg = format!("ending the wire recording: {e:#}");
                out.error.get_or_insert(msg);
            }
        }
    }
    out.duration_ms = start.elapsed().as_millis() as u64;
    out
}

fn drive(
    sc: &Scenario,
    endpoints: &Endpoints,
    capture: Option<PathBuf>,
    out: &mut Outcome,
    agents: &mut BTreeMap<String, Agent>,
    session: &mut Option<RunSession>,
) -> Result<()> {
    let deadline = Duration::from_millis(sc.timeout_ms.unwrap_or(crate::scenario::model::DEFAULT_TIMEOUT_MS));
    // Agents first, then the recording: the wire holds the scenario's traffic only.
    for name in sc.endpoints.keys() {
        let a = match endpoints {
            Endpoints::Lab(paths) => Agent::in_lab(paths, endpoint_vm(sc, name)?, name, deadline + Duration::from_secs(60))?,
            Endpoints::Remote(addrs) => {
                let addr = addrs.get(name).ok_or_else(|| anyhow!("no address for endpoint `{name}` in --endpoints"))?;
                Agent::remote(addr, name)?
            }
        };
        agents.insert(name.clone(), a);
    }
    let mut kernels = BTreeMap::new();
    for (name, a) in agents.iter_mut() {
        match a.request(&ToAgent::Hello { version: proto::VERSION }, ANSWER_WITHIN)? {
            FromAgent::Hello { version, kernel, .. } if version == proto::VERSION => {
                kernels.insert(name.clone(), kernel);
            }
            FromAgent::Hello { version, agent, .. } => {
                bail!("endpoint {name}'s agent ({agent}) speaks protocol version {version}, this controller {}\nhint: run the same roce version on both", proto::VERSION)
            }
            other => return Err(unexpected(name, "Hello", &other)),
        }
    }
    // Setup: device, PD, CQ, MRs, QPs on each endpoint.
    for (name, spec) in &sc.endpoints {
        let qps = sc.qps.iter().filter(|q| q.between.iter().any(|e| e == name)).cloned().collect();
        let mrs = sc.mrs.iter().filter(|m| &m.on == name).cloned().collect();
        let a = agents.get_mut(name).ok_or_else(|| anyhow!("no agent for endpoint {name}"))?;
        let m = a.request(&ToAgent::Setup { endpoint: name.clone(), spec: spec.clone(), qps, mrs }, ANSWER_WITHIN)?;
        match m {
            FromAgent::SetupDone { device, port, gid_index, gid, ip, qps, mrs } => {
                let vm = match endpoints {
                    Endpoints::Lab(_) => Some(endpoint_vm(sc, name)?.name().to_string()),
                    Endpoints::Remote(_) => None,
                };
                let kernel = kernels.get(name).cloned().flatten();
                let (qps, mrs) = (qps.into_iter().map(qp_facts).collect(), mrs.into_iter().map(mr_facts).collect());
                out.endpoints.insert(name.clone(), EndpointFacts { vm, device, port, gid_index, gid, ip, qps, mrs, kernel });
            }
            other => return Err(unexpected(name, "SetupDone", &other)),
        }
    }

    // The recording (and the faults, which name QPNs known only now) starts before
    // anything goes on the wire: setup is local to each endpoint.
    if let Endpoints::Lab(paths) = endpoints {
        let pcap = match &capture {
            Some(p) => Some(lab::absolute(p)?.display().to_string()),
            None => None,
        };
        let rules = fault_rules(sc, out)?;
        *session = Some(RunSession::begin(paths, pcap, rules, 1, None)?);
    } else if !sc.faults.is_empty() {
        bail!("this scenario has [[fault]] rules, which need the lab's switch\nhint: run it in the lab (no --endpoints)");
    }

    // Connect each QP: the passive side first (it listens), then the active side;
    // both answer once connected.
    for (i, q) in sc.qps.iter().enumerate() {
        let [p, act] = &q.between;
        let facts = |e: &str| out.endpoints.get(e).ok_or_else(|| anyhow!("endpoint {e} was not set up"));
        let mr_info = |m: &MrFacts| MrInfo { name: m.name.clone(), addr: m.addr, len: m.len, rkey: m.rkey, lkey: m.lkey };
        let (p_ip, p_mrs): (String, Vec<MrInfo>) = (facts(p)?.ip.clone(), facts(p)?.mrs.iter().map(mr_info).collect());
        let (a_ip, a_mrs): (String, Vec<MrInfo>) = (facts(act)?.ip.clone(), facts(act)?.mrs.iter().map(mr_info).collect());
        let port = connect_port(i);
        let msg = |passive: bool, peer_ip: &str, peer_mrs: &[MrInfo]| ToAgent::Connect {
            qp: q.name.clone(),
            passive,
            peer_ip: peer_ip.to_string(),
            port,
            peer_mrs: peer_mrs.to_vec(),
        };
        agents.get_mut(p).ok_or_else(|| anyhow!("no agent for {p}"))?.send(&msg(true, &a_ip, &a_mrs))?;
        agents.get_mut(act).ok_or_else(|| anyhow!("no agent for {act}"))?.send(&msg(false, &p_ip, &p_mrs))?;
        for e in [act, p] {
            match agents.get_mut(e).ok_or_else(|| anyhow!("no agent for {e}"))?.recv(CONNECT_WITHIN)? {
                FromAgent::Connected { qp, local, remote, peer_mrs_from_cm } => {
                    out.connections.push(Connection { qp, endpoint: e.clone(), local: qp_facts(local), remote: qp_facts(remote), peer_mrs_from_cm })
                }
                other => return Err(unexpected(e, "Connected", &other)),
            }
        }
    }

    // Steps, in order. The controller waits for each to be done (posted) before the
    // next, which is what orders the two endpoints; `sync` is that, made explicit.
    for (index, step) in sc.steps.iter().enumerate() {
        match step.op {
            Op::Sync => {}
            Op::Sleep => thread::sleep(Duration::from_millis(step.ms.unwrap_or(0))),
            _ => {
                let on = step.on.as_deref().ok_or_else(|| anyhow!("step {} ({:?}) has no `on`", index + 1, step.op))?;
                let within = ANSWER_WITHIN + Duration::from_millis(step.within_ms.unwrap_or(0));
                let a = agents.get_mut(on).ok_or_else(|| anyhow!("step {}: no endpoint `{on}`", index + 1))?;
                match a.request(&ToAgent::Step { index, step: step.clone() }, within).with_context(|| format!("step {} ({:?} on {on})", index + 1, step.op))? {
                    FromAgent::StepDone { probe, .. } => out.probes.extend(probe),
                    other => return Err(unexpected(on, "StepDone", &other)),
                }
            }
        }
    }
    collect(sc, out, agents)
}

/// The scenario's faults as lab switch rules: `from` becomes the direction
/// between the VMs, `qp` the QPN of the QP's receiving end (one rule per end when
/// the fault has no `from`).
fn fault_rules(sc: &Scenario, out: &Outcome) -> Result<Vec<Rule>> {
    let mut rules = Vec::new();
    for (i, f) in sc.faults.iter().enumerate() {
        let mut r = lab::fault::parse_rule(&f.rule).map_err(|e| anyhow!("fault {}: {e}", i + 1))?;
        if let Some(from) = &f.from {
            r.dir = Some(match endpoint_vm(sc, from)? {
                Vm::A => Dir::AtoB,
                Vm::B => Dir::BtoA,
            });
        }
        let Some(qname) = &f.qp else {
            rules.push(r);
            continue;
        };
        let q = sc.qps.iter().find(|q| &q.name == qname).ok_or_else(|| anyhow!("fault {}: no QP `{qname}`", i + 1))?;
        // Frames from `from` go to the other end; without `from`, either end's.
        for e in q.between.iter().filter(|e| f.from.as_ref() != Some(*e)) {
            let qpn = out
                .endpoints
                .get(e)
                .and_then(|x| x.qps.iter().find(|x| &x.name == qname))
                .map(|x| x.qpn)
                .ok_or_else(|| anyhow!("fault {}: QP `{qname}` was not set up on {e}", i + 1))?;
            rules.push(Rule { qp: Some(qpn), ..r.clone() });
        }
    }
    Ok(rules)
}

/// Completions and memory, once the steps are done.
fn collect(sc: &Scenario, out: &mut Outcome, agents: &mut BTreeMap<String, Agent>) -> Result<()> {
    for (name, a) in agents.iter_mut() {
        let (min, within) = completions_wanted(sc, name);
        // Errors and RNR retries take their time: wait for what the expectations
        // name, then a moment more for anything unexpected.
        let wait_ms = within.as_millis() as u64;
        match a.request(&ToAgent::Completions { min, wait_ms }, within + ANSWER_WITHIN)? {
            FromAgent::Completions { wcs } => {
                out.completions.insert(name.clone(), wcs);
            }
            other => return Err(unexpected(name, "Completions", &other)),
        }
    }
    for m in &sc.mrs {
        let a = agents.get_mut(&m.on).ok_or_else(|| anyhow!("no agent for {}", m.on))?;
        match a.request(&ToAgent::ReadMemory { mr: m.name.clone() }, ANSWER_WITHIN)? {
            FromAgent::Memory { mr, hex } => {
                let bytes = decode_hex(&hex).ok_or_else(|| anyhow!("endpoint {}'s agent sent MR {mr} as invalid hex", m.on))?;
                out.memory.entry(m.on.clone()).or_default().insert(mr, bytes);
            }
            other => return Err(unexpected(&m.on, "Memory", &other)),
        }
    }
    Ok(())
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_garbage() {
        assert_eq!(decode_hex("00ff10"), Some(vec![0, 0xff, 0x10]));
        assert_eq!(decode_hex("0"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex(""), Some(vec![]));
    }

    #[test]
    fn endpoints_map_to_vms() {
        let sc: Scenario = toml::from_str(
            "name = 'x'\n[endpoints.a]\n[endpoints.server]\nvm = 'b'\n[endpoints.c]\n",
        )
        .unwrap();
        assert_eq!(endpoint_vm(&sc, "a").unwrap(), Vm::A);
        assert_eq!(endpoint_vm(&sc, "server").unwrap(), Vm::B);
        let e = endpoint_vm(&sc, "c").unwrap_err().to_string();
        assert!(e.contains("`c`") && e.contains("not a lab VM"), "{e}");
    }
}
